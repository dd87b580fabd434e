/* attnacc: internal inline kernels of the exp constructions, shared by the scalar, packed, batch and map paths. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_EXP_IMPL_H
#define AA_EXP_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exp.h"
#include "quad-core.h"

/* FP32 -> BF16 bits with the conversion rounding of the packed evaluator (quad-core.h). */
static inline uint16_t aa_exp_cvt16(float v, aa_rnd_t cvt) {
  return aa_exp_bf16_cvt(v, cvt == AA_RND_Z);
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

/* Quadratic-corrected BF16 mantissa (quad-core.h, shared with the GPU emulation). */
static inline int32_t aa_exp_quad_signed(const aa_exp_t *e, float x) {
  return aa_exp_quad_core(x, e->kf, e->df1, e->sf, e->cvt == AA_RND_Z, e->order == AA_EXP_ORDER_BF16);
}

/* Exponent of the FP32 input as seen by the construction in BF16 order. */
static inline float aa_exp_input(const aa_exp_t *e, float x) {
  return e->order == AA_EXP_ORDER_BF16 ? aa_bf16_to_f32(aa_exp_cvt16(x, e->cvt)) : x;
}

/* Internal: correctly rounded 2^x at precision p (24 or 8) from the MPFR
   oracle, for inputs whose libm value is too close to a rounding boundary. */
double aa_exp2_cr_mpfr(float x, int p);

#endif
