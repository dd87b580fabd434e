/* attnacc: the quadratic-corrected BF16 exp (quadratic-bf16) and its BF16 conversions, written once for gcc and nvcc.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_EXP_QUAD_CORE_H
#define AA_EXP_QUAD_CORE_H

/* exp-impl.h builds the CPU's evaluation (eval.c) on these, and the GPU emulation's backward
   (lib/attn/attn-bwd-core.h) calls them in device code, so both evaluate one definition. Integer and exactly
   rounded operations only (fmaf, floorf, frexp, ldexp, nearbyint in the default rounding mode). */
#include <stdint.h>
#ifndef __CUDACC__
#include <math.h>
#endif

#include "../hd.h"

/* FP32 -> BF16 bits with the conversion rounding of the packed evaluator. RNE (rz = 0) as cvt.rn.bf16.f32; RZ as
   cvt.rz (truncation). NaN becomes a quiet NaN in both, so truncation never turns a NaN with a low payload into
   Inf. */
static inline AA_HD uint16_t aa_exp_bf16_cvt(float v, int rz) {
  uint32_t u = aa_hd_f2u(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  if (rz) return (uint16_t)(u >> 16);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* lib/fmt.h aa_bf16_bits_rne */
}

static inline AA_HD float aa_exp_bf16_widen(uint16_t b) {
  return aa_hd_u2f((uint32_t)b << 16);
}

/* Round a finite double to BF16 (RNE, subnormals kept, overflow to Inf),
   as a float. Used for the BF16-arithmetic order, where an FP32 operation
   followed by a second rounding could double-round. */
static inline AA_HD float aa_exp_round_bf16_d(double v) {
  double av = fabs(v);
  if (av >= 0x1p-126 && av < 0x1p128) {
    /* normal range: RNE on the FP64 pattern, keeping 7 fraction bits (the
       carry into the exponent is the correct rounding to the next binade) */
    uint64_t u = aa_hd_d2u(v);
    u += (UINT64_C(1) << 44) - 1 + ((u >> 45) & 1);
    u &= ~((UINT64_C(1) << 45) - 1);
    double r = aa_hd_u2d(u);
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

/* floor(x) as the exponent to add, clamped so the shift below is defined;
   beyond |x| = 2^20 every construction is far outside its range anyway. */
static inline AA_HD int32_t aa_exp_floor_int(float x) {
  float j = floorf(x);
  /* comparisons instead of fminf/fmaxf so the loops vectorise; NaN -> -2^20 */
  j = j >= -1048576.0f ? j : -1048576.0f;
  j = j <= 1048576.0f ? j : 1048576.0f;
  return (int32_t)j;
}

/* Quadratic-corrected BF16 mantissa, the shape of hardware BF16 exp units:
   j = floor(x), f = x - j, m = s ((1 + d) + f + k f (f - 1)), converted to BF16,
   then the exponent added as (j << 7) on the 16-bit pattern (per-half
   integer add, no carry into the other half of a packed pair). FP32 order:
   m in FP32 (one FMA for the last step, then the product by s), one
   conversion with cvt. BF16 order: every operation rounded to BF16 (RNE),
   the FMA rounded once. The scale s is how a kernel folds a constant factor
   (which a fixed shift and the final normalisation cancel) into the weights.
   kf, df1, sf: aa_exp_t's derived k, 1 + d and s; rz: cvt = rz; bf16: order = bf16. */
static inline AA_HD int32_t aa_exp_quad_core(float x, float kf, float df1, float sf, int rz, int bf16) {
  int32_t j;
  uint16_t mb;
  if (bf16) {
    float xb = aa_exp_bf16_widen(aa_exp_bf16_cvt(x, rz));
    j = aa_exp_floor_int(xb);
    float f = aa_exp_round_bf16_d((double)xb - (double)j);
    float u = aa_exp_round_bf16_d((double)df1 + f);
    float g = aa_exp_round_bf16_d((double)f - 1.0);
    float h = aa_exp_round_bf16_d((double)kf * f);
    float m = aa_exp_round_bf16_d((double)h * g + u);
    if (sf != 1.0f) m = aa_exp_round_bf16_d((double)m * sf);
    mb = (uint16_t)(aa_hd_f2u(m) >> 16);
  } else {
    j = aa_exp_floor_int(x);
    float f = x - (float)j;
    float u = df1 + f;
    float g = f - 1.0f;
    float h = kf * f;
    mb = aa_exp_bf16_cvt(fmaf(h, g, u) * sf, rz); /* s = 1 leaves the FMA result unchanged */
  }
  return (int32_t)mb + j * 128;
}

#endif
