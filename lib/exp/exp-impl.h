/* attnacc: internal inline kernels of the exp constructions, shared by the scalar, packed, batch and map paths. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_EXP_IMPL_H
#define AA_EXP_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exp.h"

/* FP32 -> BF16 bits with the conversion rounding of the packed evaluator.
   RNE as cvt.rn.bf16.f32; RZ as cvt.rz (truncation). NaN becomes a quiet
   NaN in both, so truncation never turns a NaN with a low payload into Inf. */
static inline uint16_t aa_exp_cvt16(float v, aa_rnd_t cvt) {
  uint32_t u = aa_f32_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  if (cvt == AA_RND_Z) return (uint16_t)(u >> 16);
  return aa_bf16_bits_rne(v); /* lib/fmt.h */
}

/* Round a finite double to BF16 (RNE, subnormals kept, overflow to Inf),
   as a float. Used for the BF16-arithmetic order, where an FP32 operation
   followed by a second rounding could double-round. */
static inline float aa_exp_round_bf16_d(double v) {
  double av = fabs(v);
  if (av >= 0x1p-126 && av < 0x1p128) {
    /* normal range: RNE on the FP64 pattern, keeping 7 fraction bits (the
       carry into the exponent is the correct rounding to the next binade) */
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    u += (UINT64_C(1) << 44) - 1 + ((u >> 45) & 1);
    u &= ~((UINT64_C(1) << 45) - 1);
    double r;
    memcpy(&r, &u, sizeof r);
    return fabs(r) >= 0x1p128 ? (float)(r * 2.0) : (float)r; /* overflow to a signed Inf */
  }
  if (v == 0 || !(av < 0x1p128)) return (float)v;
  int e;
  (void)frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
  int q = (e - 1 < -126 ? -126 : e - 1) - 7;
  double r = nearbyint(ldexp(v, -q));
  r = ldexp(r, q);
  if (fabs(r) >= 0x1p128) return v > 0 ? INFINITY : -INFINITY;
  return (float)r;
}

/* float -> integer as the GPU's saturating cvt with the given rounding. */
static inline double aa_exp_to_int(double t, aa_rnd_t icvt) {
  if (icvt == AA_RND_Z) return trunc(t);
  if (icvt == AA_RND_D) return floor(t);
  return nearbyint(t);
}

/* Schraudolph in the FP32 field ([schraudolph]): i = round(a x + b - c),
   a = 2^23, b = 127*2^23. arith64 = 0: one FP32 FMA (a x is exact, so this is
   the sum b - c + a x rounded to FP32: near 2^30 a multiple of 64 or 128, i.e.
   a 17-bit mantissa), then the integer conversion; 1: exact in FP64. The
   integer saturates to int32 like cvt.rni.sat and is written as raw bits, so
   once it is negative the pattern has the sign bit set (NaN, -Inf, ...). */
static inline int64_t aa_exp_sfp32_int(const aa_exp_t *e, float x) {
  double t;
  if (e->arith64)
    t = 0x1p23 * (double)x + (1065353216.0 - e->c);
  else
    t = (double)fmaf(0x1p23f, x, e->bmc);
  if (t != t) return 0;
  t = aa_exp_to_int(t, e->icvt);
  if (t > 2147483647.0) t = 2147483647.0;
  if (t < -2147483648.0) t = -2147483648.0;
  return (int64_t)t;
}

/* Schraudolph in the BF16 field: a = 2^7, b = 127*2^7, computed in FP32
   (one FMA), converted to int16 with saturation (cvt.rni.s16.f32), the int16
   written as BF16 bits. Within x in [-149, 128) the value stays in int16. */
static inline int32_t aa_exp_sbf16_int(const aa_exp_t *e, float x) {
  float t = fmaf(128.0f, x, e->bmc);
  if (t != t) return 0;
  double r = aa_exp_to_int((double)t, e->icvt);
  if (r > 32767.0) r = 32767.0;
  if (r < -32768.0) r = -32768.0;
  return (int32_t)r;
}

/* floor(x) as the exponent to add, clamped so the shift below is defined;
   beyond |x| = 2^20 every construction is far outside its range anyway. */
static inline int32_t aa_exp_floor_int(float x) {
  float j = floorf(x);
  /* comparisons instead of fminf/fmaxf so the loops vectorise; NaN -> -2^20 */
  j = j >= -1048576.0f ? j : -1048576.0f;
  j = j <= 1048576.0f ? j : 1048576.0f;
  return (int32_t)j;
}

/* FA4 software exp2 ([fa4] flash_attn/cute/utils.py): clamp at -127, j = floor(x) (the
   add of 1.5*2^23 in round-down yields exactly floor(x) for |x| < 2^22),
   f = x - j in FP32, Horner in FP32 FMA with p(0) = 1, bits(p) + (j << 23)
   as 32-bit integer arithmetic (wraps like the GPU's integer add). */
static inline uint32_t aa_exp_fa4_bits(const aa_exp_t *e, float x) {
  float xc = x >= -127.0f ? x : -127.0f; /* as fmax.f32: a NaN operand is dropped, giving -127 */
  int32_t j = aa_exp_floor_int(xc);
  float f = xc - (float)j;
  float p = e->coef[e->degree];
  for (int i = e->degree - 1; i >= 0; i--)
    p = fmaf(p, f, e->coef[i]);
  return aa_f32_bits(p) + ((uint32_t)j << 23);
}
static inline int64_t aa_exp_fa4_signed(const aa_exp_t *e, float x) {
  float xc = x >= -127.0f ? x : -127.0f;
  int32_t j = aa_exp_floor_int(xc);
  float f = xc - (float)j;
  float p = e->coef[e->degree];
  for (int i = e->degree - 1; i >= 0; i--)
    p = fmaf(p, f, e->coef[i]);
  return (int64_t)aa_f32_bits(p) + ((int64_t)j << 23);
}

/* Quadratic-corrected BF16 mantissa, the shape of hardware BF16 exp units:
   j = floor(x), f = x - j, m = s ((1 + d) + f + k f (f - 1)), converted to BF16,
   then the exponent added as (j << 7) on the 16-bit pattern (per-half
   integer add, no carry into the other half of a packed pair). FP32 order:
   m in FP32 (one FMA for the last step, then the product by s), one
   conversion with cvt. BF16 order: every operation rounded to BF16 (RNE),
   the FMA rounded once. The scale s is how a kernel folds a constant factor
   (which a fixed shift and the final normalisation cancel) into the weights. */
static inline int32_t aa_exp_quad_signed(const aa_exp_t *e, float x) {
  int32_t j;
  uint16_t mb;
  if (e->order == AA_EXP_ORDER_BF16) {
    float xb = aa_bf16_to_f32(aa_exp_cvt16(x, e->cvt));
    j = aa_exp_floor_int(xb);
    float f = aa_exp_round_bf16_d((double)xb - (double)j);
    float u = aa_exp_round_bf16_d((double)e->df1 + f);
    float g = aa_exp_round_bf16_d((double)f - 1.0);
    float h = aa_exp_round_bf16_d((double)e->kf * f);
    float m = aa_exp_round_bf16_d((double)h * g + u);
    if (e->sf != 1.0f) m = aa_exp_round_bf16_d((double)m * e->sf);
    mb = (uint16_t)(aa_f32_bits(m) >> 16);
  } else {
    j = aa_exp_floor_int(x);
    float f = x - (float)j;
    float u = e->df1 + f;
    float g = f - 1.0f;
    float h = e->kf * f;
    mb = aa_exp_cvt16(fmaf(h, g, u) * e->sf, e->cvt); /* s = 1 leaves the FMA result unchanged */
  }
  return (int32_t)mb + j * 128;
}

/* Exponent of the FP32 input as seen by the construction in BF16 order. */
static inline float aa_exp_input(const aa_exp_t *e, float x) {
  return e->order == AA_EXP_ORDER_BF16 ? aa_bf16_to_f32(aa_exp_cvt16(x, e->cvt)) : x;
}

/* Internal: correctly rounded 2^x at precision p (24 or 8) from the MPFR
   oracle, for inputs whose libm value is too close to a rounding boundary. */
double aa_exp2_cr_mpfr(float x, int p);

#endif
