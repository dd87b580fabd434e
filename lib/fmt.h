/* attnacc: emulated number formats (bf16, fp16, fp32, fp64, fp8 e4m3/e5m2, e2m1, e8m0), rounding modes, conversions
   and block-scaled quantisation (MXFP8, MXFP4, NVFP4, SageAttention INT8/INT4, per-tensor FP8). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_FMT_H
#define AA_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  AA_FMT_BF16 = 0,
  AA_FMT_FP16,
  AA_FMT_FP32,
  AA_FMT_FP64,
  AA_FMT_E4M3, /* OCP FP8 E4M3 (fn): no infinities, one NaN pattern per sign, max 448 */
  AA_FMT_E5M2, /* OCP FP8 E5M2: IEEE-like with infinities, max 57344 */
  AA_FMT_COUNT
} aa_fmt_t;

typedef enum {
  AA_RND_NE = 0, /* round to nearest, ties to even */
  AA_RND_Z,      /* toward zero */
  AA_RND_U,      /* toward +infinity */
  AA_RND_D,      /* toward -infinity */
  AA_RND_O,      /* round to odd (sticky last bit) */
  AA_RND_S,      /* stochastic: up with probability (x - down) / (up - down) */
  AA_RND_COUNT
} aa_rnd_t;

/* Static description of a format. A finite non-zero value is
   +-m * 2^(e - prec + 1) with 2^(prec-1) <= m < 2^prec for normals,
   emin <= e <= emax; subnormals have e = emin and m < 2^(prec-1). */
typedef struct {
  const char *name;  /* "bf16", "fp16", "fp32", "fp64", "e4m3", "e5m2" */
  int bits;          /* storage width */
  int prec;          /* significand bits including the implicit one */
  int emin;          /* exponent of the smallest normal (2^emin) */
  int emax;          /* exponent of the largest finite binade */
  int has_inf;       /* 0 for e4m3 */
  double max_finite; /* largest finite value */
} aa_fmt_info_t;

/* How a value is rounded into a format. */
typedef struct {
  aa_fmt_t fmt;
  aa_rnd_t rnd;
  int subnormals; /* 1: keep subnormals; 0: flush results below 2^emin to signed zero */
  int saturate;   /* 1: overflow gives +-max_finite; 0: +-Inf (NaN for e4m3, which has no Inf) */
} aa_round_opts_t;

const aa_fmt_info_t *aa_fmt_info(aa_fmt_t fmt);
/* Name lookup; returns AA_OK or AA_ENOTFOUND. */
int aa_fmt_from_name(aa_fmt_t *out, const char *name);
const char *aa_rnd_name(aa_rnd_t rnd); /* "rne", "rz", "ru", "rd", "ro", "rs" */
int aa_rnd_from_name(aa_rnd_t *out, const char *name);

/* Round the double x into the format described by opts and return the
   result as a double (exactly representable in the format). NaN stays NaN.
   rng is used only for AA_RND_S (may be NULL otherwise). Inputs are doubles,
   so a product of two fp32 values or any fp32 value is rounded once.
   Exact semantics (tested against MPFR in tests/tfmt*.c; details in
   lib/fmt/round.c):
   - x is rounded to prec bits on the grid 2^(max(e, emin) - prec + 1)
     (subnormal grid below 2^emin), with no upper exponent bound; a result
     above max_finite is an overflow (e4m3: 464 rounds to 448 under RNE,
     anything that would round to 480 or more overflows).
   - Overflow gives +-max_finite in modes that round |x| down (RZ, RD of a
     positive, RU of a negative) and in RO; otherwise +-max_finite if
     saturate, else +-Inf (NaN for e4m3). Infinite inputs give +-max_finite
     if saturate, else +-Inf (NaN for e4m3).
   - subnormals == 0 flushes AFTER rounding: a rounded result below 2^emin
     in magnitude becomes a zero with the sign of x (even in RU/RD).
   - AA_RND_O: truncate, then set the last significand bit (of the
     subnormal grid below 2^emin) if inexact; overflow follows RZ.
   - AA_RND_S: every call consumes exactly one aa_pcg32_next output r (also
     for exact or special inputs); with t = the first 32 bits of the
     fraction (|x| - down) / ulp, the result is up iff r < t, so
     P(up) = t / 2^32: exact when the fraction has <= 32 significant bits,
     otherwise low by less than 2^-32. With rng == NULL it acts as RZ. */
double aa_round(double x, const aa_round_opts_t *opts, aa_pcg32_t *rng);

/* out[i] = aa_round(x[i], opts, rng) for i < n (out may alias x), with the
   option decoding hoisted out of the loop. AA_RND_S draws in index order.
   Returns AA_EINVAL for an invalid format/mode or AA_RND_S without rng. */
int aa_round_n(double *out, const double *x, size_t n, const aa_round_opts_t *opts, aa_pcg32_t *rng);

/* Bit pattern of a value already representable in fmt, and back.
   Encoding an unrepresentable value is undefined; round it first.
   NaN encodes as the quiet pattern (e4m3: S.1111.111), Inf as the
   all-ones exponent (e4m3 has none: NaN). Patterns sit in the low bits. */
uint64_t aa_fmt_encode(double x, aa_fmt_t fmt);
double aa_fmt_decode(uint64_t bits, aa_fmt_t fmt);

/* ---- Block-scaled formats (lib/fmt/block.c) ----
   Element and scale formats of the OCP Microscaling (MX) specification
   v1.0 ([ocp-mx] 5.3, 5.4) and of NVFP4, outside aa_fmt_t because they are
   only ever stored with a scale. */

/* E2M1 (FP4, [ocp-mx] 5.3.3): sign, 2 exponent bits (bias 1), 1 fraction
   bit: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no Inf, no NaN. x rounded with
   rnd (AA_RND_NE, _Z, _U, _D, _O) on the grid 0.5 below 2, 1 in [2, 4), 2
   in [4, 6]; every overflow (and +-Inf) saturates to +-6, the only
   conversion a format without Inf or NaN has (cvt.rn.satfinite.e2m1x2);
   NaN stays NaN (the caller's block then has a NaN scale). Signed zeros
   kept. */
double aa_e2m1_round(double x, aa_rnd_t rnd);
/* 4-bit code (sign in bit 3) of a value aa_e2m1_round returns (not NaN), and back. */
unsigned aa_e2m1_encode(double x);
double aa_e2m1_decode(unsigned code);

/* E8M0 ([ocp-mx] 5.4.1): unsigned, no zero: code c < 255 is 2^(c - 127),
   255 is NaN. aa_e8m0_encode: the code of 2^k (-127 <= k <= 127) or NaN;
   255 for anything else. */
double aa_e8m0_decode(unsigned code);
unsigned aa_e8m0_encode(double x);

/* What a block quantiser produces (recipe key values in lib/recipe/KEYS.md). */
typedef enum {
  AA_BQ_NONE = 0,    /* "none": values unchanged */
  AA_BQ_MXFP8_E4M3,  /* "mxfp8-e4m3": E4M3 elements, one E8M0 scale per 32 ([ocp-mx] 6.3) */
  AA_BQ_MXFP8_E5M2,  /* "mxfp8-e5m2": E5M2 elements, one E8M0 scale per 32 */
  AA_BQ_MXFP4,       /* "mxfp4": E2M1 elements, one E8M0 scale per 32 */
  AA_BQ_NVFP4,       /* "nvfp4": E2M1 elements, one E4M3 scale per 16, an FP32 tensor scale ([te-nvfp4]) */
  AA_BQ_INT8_BLOCK,  /* "int8-block": SageAttention per-block INT8, scale fl32(amax / 127) ([sage] quant_per_block.py)
                      */
  AA_BQ_INT8_THREAD, /* "int8-thread": the same with fl32(amax / 127 + 1e-7) ([sage] quant_per_thread.py) */
  AA_BQ_INT4_THREAD, /* "int4-thread": SageAttention2 per-thread INT4, fl32(amax / 7 + 1e-7), values -7..7 */
  AA_BQ_FP8_TENSOR,  /* "fp8-tensor": E4M3 with one FP32 scale fl32(448 / amax) ([te] current scaling) */
  AA_BQ_COUNT
} aa_bq_kind_t;

/* How an E8M0 scale is chosen from the block's largest magnitude amax
   (MX kinds only; the other kinds have one rule each, aa_bq_quantize). */
typedef enum {
  AA_BQ_SCALE_RCEIL = 0, /* "rceil": 2^ceil(log2(fl32(amax * fl32(1 / max_elem)))), cvt.rp.satfinite.ue8m0x2.f32
                            (cuBLAS 1D block quantization, TransformerEngine float_to_e8m0) */
  AA_BQ_SCALE_FLOOR,     /* "floor": 2^(floor(log2 amax) - emax_elem), [ocp-mx] 6.3 (elements may then need
                            saturation: amax / scale < 2 * 2^emax_elem) */
  AA_BQ_SCALE_COUNT
} aa_bq_scale_rnd_t;

typedef struct {
  aa_bq_kind_t kind;
  size_t block; /* values per scale; 0: the kind's own (32 MX, 16 NVFP4, n for INT and fp8-tensor) */
  aa_bq_scale_rnd_t scale_rnd;
  int satfinite; /* FP8 elements: 1 overflow saturates to +-max (cvt .satfinite), 0 gives NaN (e4m3) or Inf
                    (e5m2); E2M1 and INT elements always saturate */
} aa_bq_opts_t;

const char *aa_bq_kind_name(aa_bq_kind_t kind);                /* "mxfp8-e4m3", ...; "?" outside the enum */
int aa_bq_kind_from_name(aa_bq_kind_t *out, const char *name); /* AA_OK or AA_ENOTFOUND */
/* The kind's own block length (32, 16, or 0 for one block of all values). */
size_t aa_bq_default_block(aa_bq_kind_t kind);

/* Quantise the n values x[0], x[stride], ... in blocks of o->block
   consecutive ones (the last may be shorter; block 0 as in aa_bq_opts_t)
   and write each value dequantized, element times scale (exact in
   binary64), to out at the same positions (out may be x). scales, when
   not NULL, receives one decoded scale per block (ceil(n / block) of
   them). tensor_amax is the largest magnitude of the whole tensor, read
   by NVFP4 only (its FP32 tensor scale). Each kind computes, in FP32 as
   its source does (amax = the block's largest |x| after rounding x to
   FP32; a block holding a NaN gives NaN values throughout):
   - MX kinds: scale 2^k by o->scale_rnd (k clamped to [-127, 127], an
     all-zero block k = -127), elements RNE(x / 2^k) in the element format;
   - nvfp4 (core_nvfp4.cuh quantization_SF, compute_global_encode_scaling_
     factor_FP4, compute_scaling_coefficient<float>): S_enc =
     fl32(2688 / tensor_amax) (1 when tensor_amax is 0), s = RNE_e4m3,sat(
     fl32(amax * fl32(S_enc * fl32(1/6)))), r = fl32(1 / fl32(s *
     fl32(1 / S_enc))), elements RNE_e2m1(fl32(x * r)), value = element *
     s / S_enc (the GEMM's block scale s and its alpha 1 / S_enc);
   - INT kinds: scale as named in aa_bq_kind_t, q = trunc(fl32(fl32(x /
     scale) +- 0.5)) (+0.5 for x / scale >= 0: the kernels' round half away
     from zero in FP32), value q * scale; a zero scale gives q = 0;
   - fp8-tensor: scale = fl32(448 / amax) (1 when amax is 0), elements
     e4m3(fl32(x * scale)), value element * fl32(1 / scale).
   AA_EINVAL for an unknown kind or mode, stride 0 with n > 1. */
int aa_bq_quantize(double *out, double *scales, const double *x, size_t n, size_t stride, const aa_bq_opts_t *o,
                   double tensor_amax);

/* Fast paths used in the emulation hot loops (bit-exact with aa_round in
   RNE, subnormals kept, Inf on overflow). */
static inline float aa_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline uint32_t aa_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
/* FP32 -> BF16 bits, round to nearest even; NaN becomes a quiet NaN. */
static inline uint16_t aa_bf16_bits_rne(float f) {
  uint32_t u = aa_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float aa_bf16_to_f32(uint16_t b) {
  return aa_f32_from_bits((uint32_t)b << 16);
}
/* FP32 value rounded to the nearest BF16 (RNE), returned as FP32. */
static inline float aa_bf16_rne(float f) {
  return aa_bf16_to_f32(aa_bf16_bits_rne(f));
}

#ifdef __cplusplus
}
#endif
#endif
