/* attnacc: correctly rounded 2^x in FP32 and BF16 (libm FP64 value with a rounding-boundary test, MPFR fallback). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <mpfr.h>
#include <string.h>

#include "exp-impl.h"

/* Round a positive finite double to p significant bits in the shared FP32 /
   BF16 exponent range (normals from 2^-126, subnormals below, +Inf from
   2^128 after rounding), RNE. */
static double round_p(double v, int p) {
  if (p == 24) return (double)(float)v; /* the hardware conversion is exactly this rounding */
  if (v == 0 || !(v < 0x1p129)) return v;
  if (v >= 0x1p-126) {
    /* normal range: RNE on the FP64 bit pattern, keeping p - 1 fraction bits */
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    int drop = 52 - (p - 1);
    u += (UINT64_C(1) << (drop - 1)) - 1 + ((u >> drop) & 1);
    u &= ~((UINT64_C(1) << drop) - 1);
    double r;
    memcpy(&r, &u, sizeof r);
    return r >= 0x1p128 ? INFINITY : r;
  }
  int e;
  (void)frexp(v, &e);
  int q = (e - 1 < -126 ? -126 : e - 1) - (p - 1);
  double r = ldexp(nearbyint(ldexp(v, -q)), q);
  if (r >= 0x1p128) return INFINITY;
  return r;
}

/* MPFR path: 2^x lies in [2^e, 2^(e+1)) with e = floor(x), so the number of
   significant bits the format keeps there is known in advance and one MPFR
   rounding at that precision is the correctly rounded result (no double
   rounding). Below half the smallest subnormal the result is 0; exactly half
   (x = -126 - p, an integer) ties to even, i.e. 0. */
double aa_exp2_cr_mpfr(float x, int p) {
  if (isnan(x)) return NAN;
  if (x >= 128.0f) return INFINITY;
  double fl = floor((double)x);
  if (fl < -400) return 0.0;
  int e = (int)fl;
  int bits = e >= -126 ? p : p - (-126 - e);
  if (bits < 0) return 0.0;
  if (bits == 0) return (double)x == fl ? 0.0 : ldexp(1.0, -126 - p + 1);
  mpfr_t xx, r;
  mpfr_init2(xx, 24);
  mpfr_init2(r, bits); /* MPFR >= 4.0 (required by configure) allows 1 bit */
  mpfr_set_flt(xx, x, MPFR_RNDN);
  mpfr_exp2(r, xx, MPFR_RNDN);
  double v = mpfr_get_d(r, MPFR_RNDN);
  mpfr_clear(xx);
  mpfr_clear(r);
  return v >= 0x1p128 ? INFINITY : v;
}

/* libm exp2 has relative error below 2^-52 (AA_EXP_REF_RELERR); if both ends
   of ref*(1 +- 2^-49) round to the same value, that value is the correctly
   rounded 2^x (the interval contains the true value with an 8x margin). */
static double cr_from_ref(float x, double ref, int p) {
  if (isnan(x)) return NAN;
  if (x >= 128.0f) return INFINITY;
  if (ref == 0.0) return 0.0; /* libm underflows to 0 only below 2^-1074, far under half a subnormal */
  double a = round_p(ref * (1.0 - 0x1p-49), p);
  double b = round_p(ref * (1.0 + 0x1p-49), p);
  if (a == b) return a;
  return aa_exp2_cr_mpfr(x, p);
}

float aa_exp2_cr_f32_ref(float x, double ref) {
  return (float)cr_from_ref(x, ref, 24);
}

uint16_t aa_exp2_cr_bf16_ref(float x, double ref) {
  double v = cr_from_ref(x, ref, 8);
  if (isnan(v)) return 0x7fc0u;
  return (uint16_t)(aa_f32_bits((float)v) >> 16); /* v has 8 bits: exact in FP32 */
}

float aa_exp2_cr_f32(float x) {
  return aa_exp2_cr_f32_ref(x, exp2((double)x));
}
uint16_t aa_exp2_cr_bf16(float x) {
  return aa_exp2_cr_bf16_ref(x, exp2((double)x));
}
