/* attnacc: block-scaled formats: E2M1 and E8M0 codecs and the block quantisers (MX, NVFP4, SageAttention INT,
 * per-tensor FP8). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <string.h>

#include "common.h"
#include "fmt-impl.h"

/* E2M1 as an aa_round format: prec 2 (one fraction bit), emin 0 (the
   subnormal 0.5 = 2^0 * 0.1b), emax 2, largest 1.5 * 2^2 = 6 ([ocp-mx]
   5.3.3, table 5). */
static const aa_fmt_info_t e2m1_info = {"e2m1", 4, 2, 0, 2, 0, 6.0};

double aa_e2m1_round(double x, aa_rnd_t rnd) {
  if (isnan(x)) return x;
  return aa_round_info(x, &e2m1_info, rnd, 1, 1);
}

/* Code = sign << 3 | exponent field << 1 | fraction bit; field 0 holds 0
   and 0.5 (subnormal), field f > 0 holds (1 + m/2) 2^(f - 1). */
unsigned aa_e2m1_encode(double x) {
  unsigned sign = signbit(x) ? 8u : 0u;
  double a = fabs(x);
  if (a < 1) return sign | (unsigned)(a * 2);
  int e = ilogb(a);
  return sign | (unsigned)(e + 1) << 1 | (unsigned)((ldexp(a, -e) - 1) * 2);
}

double aa_e2m1_decode(unsigned code) {
  unsigned field = (code >> 1) & 3u, m = code & 1u;
  double mag = field == 0 ? 0.5 * m : ldexp(1 + 0.5 * m, (int)field - 1);
  return code & 8u ? -mag : mag;
}

double aa_e8m0_decode(unsigned code) {
  return code >= 255 ? NAN : aa_pow2((int)code - 127);
}

unsigned aa_e8m0_encode(double x) {
  if (!(x > 0) || isinf(x)) return 255;
  int e = ilogb(x);
  if (e < -127 || e > 127 || x != aa_pow2(e)) return 255;
  return (unsigned)(e + 127);
}

static const char *const bq_names[AA_BQ_COUNT] = {"none",       "mxfp8-e4m3",  "mxfp8-e5m2",  "mxfp4",     "nvfp4",
                                                  "int8-block", "int8-thread", "int4-thread", "fp8-tensor"};

const char *aa_bq_kind_name(aa_bq_kind_t kind) {
  return (unsigned)kind < AA_BQ_COUNT ? bq_names[kind] : "?";
}

int aa_bq_kind_from_name(aa_bq_kind_t *out, const char *name) {
  for (int k = 0; name != NULL && k < AA_BQ_COUNT; k++)
    if (strcmp(name, bq_names[k]) == 0) {
      if (out != NULL) *out = (aa_bq_kind_t)k;
      return AA_OK;
    }
  return AA_ENOTFOUND;
}

size_t aa_bq_default_block(aa_bq_kind_t kind) {
  switch (kind) {
  case AA_BQ_MXFP8_E4M3:
  case AA_BQ_MXFP8_E5M2:
  case AA_BQ_MXFP4:
    return 32; /* [ocp-mx] table 1: k = 32 for every concrete MX format */
  case AA_BQ_NVFP4:
    return 16; /* NVFP4_SCALE_DIM, core_nvfp4.cuh */
  default:
    return 0;
  }
}

/* The element format of a kind, its largest value and largest exponent. */
typedef struct {
  const aa_fmt_info_t *f;
  aa_fmt_t fmt; /* AA_FMT_COUNT for e2m1 */
} elem_t;

static elem_t elem_of(aa_bq_kind_t kind) {
  elem_t e = {&e2m1_info, AA_FMT_COUNT};
  if (kind == AA_BQ_MXFP8_E4M3 || kind == AA_BQ_FP8_TENSOR) e = (elem_t){aa_fmt_info(AA_FMT_E4M3), AA_FMT_E4M3};
  if (kind == AA_BQ_MXFP8_E5M2) e = (elem_t){aa_fmt_info(AA_FMT_E5M2), AA_FMT_E5M2};
  return e;
}

/* Round to the element format, RNE; FP8 overflow as satfinite says. */
static double elem_round(const elem_t *e, double v, int satfinite) {
  if (e->fmt == AA_FMT_COUNT) return aa_e2m1_round(v, AA_RND_NE);
  aa_round_opts_t ro = {e->fmt, AA_RND_NE, 1, satfinite};
  return aa_round(v, &ro, NULL);
}

/* The E8M0 exponent k of an MX block scale. rceil: the descale fl32(amax *
   fl32(1 / max)) rounded up to a power of two, clamped (satfinite) to
   [-127, 127], 0 giving -127 (TransformerEngine float_to_e8m0's fallback
   and cvt.rp.satfinite.ue8m0x2.f32). floor: [ocp-mx] 6.3,
   floor(log2 amax) - emax_elem, clamped the same way. */
static int mx_scale_exp(float amax, const elem_t *e, aa_bq_scale_rnd_t mode) {
  int k;
  if (isinf(amax)) return 127; /* float_to_e8m0: Inf gives 0xFE */
  if (mode == AA_BQ_SCALE_RCEIL) {
    float d = amax * (1.0f / (float)e->f->max_finite);
    if (d == 0) return -127;
    k = ilogbf(d);
    if (ldexpf(1.0f, k) != d) k++; /* a subnormal d is below 2^-126: k <= -126 either way */
  } else {
    if (amax == 0) return -127;
    k = ilogbf(amax) - e->f->emax;
  }
  return k < -127 ? -127 : k > 127 ? 127 : k;
}

/* Largest |fl32(x)| of a block; NaN when any value is NaN. */
static float block_amax(const double *x, size_t n, size_t stride) {
  float amax = 0;
  for (size_t i = 0; i < n; i++) {
    float v = fabsf((float)x[i * stride]);
    if (isnan(v)) return NAN;
    if (v > amax) amax = v;
  }
  return amax;
}

/* One MX or NVFP4 block; returns the decoded scale of the GEMM. */
static double quant_fp_block(double *out, const double *x, size_t n, size_t stride, const aa_bq_opts_t *o,
                             const elem_t *e, float amax, float s_enc) {
  double scale;
  float r; /* multiplier applied to x in FP32 */
  if (o->kind == AA_BQ_NVFP4) {
    aa_round_opts_t sat = {AA_FMT_E4M3, AA_RND_NE, 1, 1};
    float s = (float)aa_round(amax * (s_enc * (1.0f / 6.0f)), &sat, NULL);
    r = fminf(1.0f / (s * (1.0f / s_enc)), 0x1.fffffep127f);
    scale = (double)s / s_enc; /* element * s is exact; / S_enc is the GEMM's alpha, one rounding in binary64 */
    for (size_t i = 0; i < n; i++)
      out[i * stride] = elem_round(e, (float)x[i * stride] * r, 1) * s / (double)s_enc;
    return scale;
  }
  int k = mx_scale_exp(amax, e, o->scale_rnd);
  scale = aa_pow2(k);
  for (size_t i = 0; i < n; i++) /* x / 2^k is exact in binary64; the kernels' FP32 product is exact too */
    out[i * stride] = elem_round(e, ldexp((float)x[i * stride], -k), o->satfinite) * scale;
  return scale;
}

/* One SageAttention INT block ([sage] quant_per_block.py, quant_per_thread.py). */
static double quant_int_block(double *out, const double *x, size_t n, size_t stride, aa_bq_kind_t kind, float amax) {
  float qmax = kind == AA_BQ_INT4_THREAD ? 7.0f : 127.0f;
  float scale = amax / qmax;
  if (kind != AA_BQ_INT8_BLOCK) scale = scale + 1e-7f; /* "+ 0.0000001" of the per-thread kernels */
  for (size_t i = 0; i < n; i++) {
    float v = (float)x[i * stride] / scale;
    v = v + (v >= 0 ? 0.5f : -0.5f);
    /* .to(tl.int8) truncates; 0/0 (an all-zero block without eps) is NaN, which cvt.rzi gives as 0 */
    double q = isnan(v) ? 0.0 : trunc((double)v);
    out[i * stride] = q * scale;
  }
  return scale;
}

/* Per-tensor FP8 with an FP32 scale (TransformerEngine current scaling: scale = max / amax, scale_inv = 1 / scale).
 */
static double quant_tensor(double *out, const double *x, size_t n, size_t stride, const aa_bq_opts_t *o,
                           const elem_t *e, float amax) {
  float scale = amax > 0 ? 448.0f / amax : 1.0f;
  if (isinf(scale)) scale = 0x1.fffffep127f;
  float inv = 1.0f / scale;
  for (size_t i = 0; i < n; i++)
    out[i * stride] = elem_round(e, (float)x[i * stride] * scale, o->satfinite) * inv;
  return inv;
}

int aa_bq_quantize(double *out, double *scales, const double *x, size_t n, size_t stride, const aa_bq_opts_t *o,
                   double tensor_amax) {
  if (o == NULL || (unsigned)o->kind >= AA_BQ_COUNT || (unsigned)o->scale_rnd >= AA_BQ_SCALE_COUNT) return AA_EINVAL;
  if (n > 1 && stride == 0) return AA_EINVAL;
  if (n == 0) return AA_OK;
  if (o->kind == AA_BQ_NONE) {
    for (size_t i = 0; i < n; i++)
      out[i * stride] = x[i * stride];
    return AA_OK;
  }
  size_t block = o->block ? o->block : aa_bq_default_block(o->kind);
  if (block == 0 || block > n) block = n;
  elem_t e = elem_of(o->kind);
  float s_enc = 1.0f;
  if (o->kind == AA_BQ_NVFP4) { /* compute_global_encode_scaling_factor_FP4 */
    float ta = (float)tensor_amax;
    s_enc = fminf(448.0f * 6.0f / ta, 0x1.fffffep127f);
    if (ta == 0 || s_enc == 0) s_enc = 1.0f;
  }
  for (size_t b0 = 0, nb = 0; b0 < n; b0 += block, nb++) {
    size_t len = n - b0 < block ? n - b0 : block;
    const double *xb = x + b0 * stride;
    double *ob = out + b0 * stride, scale;
    float amax = block_amax(xb, len, stride);
    if (isnan(amax)) { /* [ocp-mx] 6.3: a NaN in the block makes the scale NaN, so every value decodes to NaN */
      for (size_t i = 0; i < len; i++)
        ob[i * stride] = NAN;
      scale = NAN;
    } else if (o->kind >= AA_BQ_INT8_BLOCK && o->kind <= AA_BQ_INT4_THREAD) {
      scale = quant_int_block(ob, xb, len, stride, o->kind, amax);
    } else if (o->kind == AA_BQ_FP8_TENSOR) {
      scale = quant_tensor(ob, xb, len, stride, o, &e, amax);
    } else {
      scale = quant_fp_block(ob, xb, len, stride, o, &e, amax, s_enc);
    }
    if (scales != NULL) scales[nb] = scale;
  }
  return AA_OK;
}
