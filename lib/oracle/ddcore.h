/* attnacc: the oracle's rounding definitions shared by the CPU and the CUDA fast paths (double-double arithmetic, dd
 * exp, FP32/BF16 rounding, the settle and finish of an element); plain C, and __host__ __device__ under nvcc. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ORACLE_DDCORE_H
#define AA_ORACLE_DDCORE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../hd.h"

/* Written once for both compilers: the GPU kernels must give every value bit for bit as the CPU rows kernel does,
   so both must run these very operations. nvcc compiles them with -fmad=false and the CPU oracle with
   -ffp-contract=off (lib/oracle/local.mk): no a * b + c is fused unless fma is written. AA_HD: hd.h. */

/* Unit roundoff of binary64 and its square (the double-double unit). */
#define AA_OR_U 0x1p-53
#define AA_OR_U2 0x1p-106
/* Relative error bound of aa_oracle_dd_exp for |x| <= 708 (see ddexp.c):
   AA_OR_EXP_REL + AA_OR_EXP_XREL * |x|, plus an absolute AA_OR_TINY below
   exp(-707) where the low word of the result is subnormal. */
#define AA_OR_EXP_REL 0x1p-100
#define AA_OR_EXP_XREL 0x1p-108
#define AA_OR_TINY 0x1p-1000
/* The smallest magnitude the fast path accepts (below it an element goes to
   MPFR, where the floors are harmless). */
#define AA_OR_MINMAG 0x1p-900

/* Bound on the error of a compensated accumulation of n terms xh*y (TwoProduct
   and TwoSum, error terms summed in a second double), relative to sum |xh*y|;
   ORO 2005 gives gamma_{n}^2 ~ n^2 u^2 for Dot2, we take 4 (n+4)^2 u^2 to also
   cover the low words xl*y and the error-term additions. */
AA_HD static inline double aa_or_kappa(size_t n) {
  double m = (double)n + 4.0;
  return 4.0 * m * m * AA_OR_U2;
}

typedef struct {
  double hi, lo;
} aa_or_dd_t;

AA_HD static inline aa_or_dd_t aa_or_dd(double hi, double lo) {
  aa_or_dd_t r;
  r.hi = hi;
  r.lo = lo;
  return r;
}
AA_HD static inline aa_or_dd_t aa_or_two_sum(double a, double b) {
  double s = a + b, bb = s - a;
  return aa_or_dd(s, (a - (s - bb)) + (b - bb));
}
AA_HD static inline aa_or_dd_t aa_or_fast_two_sum(double a, double b) { /* |a| >= |b| or a == 0 */
  double s = a + b;
  return aa_or_dd(s, b - (s - a));
}
/* Accurate double-double addition (both words through TwoSum): relative
   error <= 3 u^2 of |a + b| + 2 u^2 (|a| + |b|) (Joldes-Muller-Popescu 2017, alg. 6). */
AA_HD static inline aa_or_dd_t aa_or_dd_add(aa_or_dd_t a, aa_or_dd_t b) {
  aa_or_dd_t s = aa_or_two_sum(a.hi, b.hi), t = aa_or_two_sum(a.lo, b.lo);
  s.lo += t.hi;
  s = aa_or_fast_two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return aa_or_fast_two_sum(s.hi, s.lo);
}
AA_HD static inline aa_or_dd_t aa_or_dd_neg(aa_or_dd_t a) {
  return aa_or_dd(-a.hi, -a.lo);
}
/* dd * dd: relative error <= 5 u^2 (JMP 2017, alg. 12 bound, generously). */
AA_HD static inline aa_or_dd_t aa_or_dd_mul(aa_or_dd_t a, aa_or_dd_t b) {
  double p = a.hi * b.hi, e = fma(a.hi, b.hi, -p);
  e += a.hi * b.lo + a.lo * b.hi;
  return aa_or_fast_two_sum(p, e);
}
/* dd * double: relative error <= 3 u^2. */
AA_HD static inline aa_or_dd_t aa_or_dd_mul_d(aa_or_dd_t a, double b) {
  double p = a.hi * b, e = fma(a.hi, b, -p);
  e += a.lo * b;
  return aa_or_fast_two_sum(p, e);
}

/* Constants of the double-double exponential (computed once per run with MPFR). */
typedef struct {
  double th[256], tl[256];     /* 2^(j/256) as double-double */
  double c1, c2, c3;           /* ln2/256 = c1 + c2 + c3, c1 with 32 significant bits */
  double inv;                  /* 256/ln2 (only picks the reduction integer) */
  double c6h, c6l, c24h, c24l; /* 1/6, 1/24 as double-double */
} aa_or_exp_tab_t;

/* Relative error of aa_oracle_dd_exp at xh; infinite above AA_OR_EXP_MAXARG,
   where the double-double result overflows (no shifted softmax argument
   gets there, but a bound must never be finite on an overflowed value). */
#define AA_OR_EXP_MAXARG 700.0
AA_HD static inline double aa_or_exp_relerr(double xh) {
  return xh <= AA_OR_EXP_MAXARG ? AA_OR_EXP_REL + AA_OR_EXP_XREL * fabs(xh) : INFINITY;
}

/* exp(x) of one element, x = xh + xl a double-double with |xl| <= ulp(xh)/2 and xh <= 708; the error analysis is
   at aa_oracle_dd_exp (ddexp.c), which runs this in a vectorised loop. No control flow, so that the loop
   vectorises. */
AA_HD static inline void aa_or_dd_exp1(double *yh, double *yl, double xh, double xl, const aa_or_exp_tab_t *tab) {
  const double c1 = tab->c1, c2 = tab->c2, c3 = tab->c3, inv = tab->inv;
  const double c6h = tab->c6h, c6l = tab->c6l, c24h = tab->c24h, c24l = tab->c24l;
  double x = xh, xlo = xl;
  int under = !(x >= -707.0);
  x = under ? 0.0 : x;
  xlo = under ? 0.0 : xlo;
  x = x > 708.0 ? 708.0 : x; /* never reached by the callers (arguments <= 0 up to rounding) */
  /* N = nearest integer to x 256/ln2 through the 1.5 * 2^52 shifter (|x inv| < 2^18, round to nearest
     in the default environment); its low bits are N in two's complement */
  double shf = x * inv + 0x1.8p52, nd = shf - 0x1.8p52;
  uint64_t nb;
  memcpy(&nb, &shf, sizeof nb);
  int64_t N = (int64_t)(nb - UINT64_C(0x4338000000000000));
  /* j = N mod 256 from the shifter's bits (the bias 0x4338... has zero low bits), as a 64-bit index: with an int
     index (from the int64 N) GCC 12 finds no gather for the table loads and leaves the whole loop scalar */
  uint64_t jj = nb & 255;
  int64_t kk = N >> 8;
  double t = x - nd * c1; /* exact */
  double ph = nd * c2, pl = fma(nd, c2, -ph);
  /* (a, b) = t - ph exactly */
  double a = t - ph, bb = a - t, b = (t - (a - bb)) + (-ph - bb);
  /* (a2, b2) = a + xlo exactly */
  double a2 = a + xlo, bb2 = a2 - a, b2 = (a - (a2 - bb2)) + (xlo - bb2);
  double rl0 = ((b + b2) - pl) - nd * c3;
  double rh = a2 + rl0, rl = rl0 - (rh - a2);
  /* c5(r) = 1/120 + r/720 + r^2/5040 + r^3/40320 + r^4/362880 */
  double c5 = 1.0 / 120 + rh * (1.0 / 720 + rh * (1.0 / 5040 + rh * (1.0 / 40320 + rh * (1.0 / 362880))));
  /* a4 = 1/24 + r c5 (the product with rl is below 2^-120) */
  double p = rh * c5, pe = fma(rh, c5, -p);
  double sh = c24h + p, sb = sh - c24h, sl = ((c24h - (sh - sb)) + (p - sb)) + (c24l + pe);
  double ah = sh + sl, al = sl - (ah - sh);
  /* a3 = 1/6 + r a4, a2 = 1/2 + r a3, a1 = 1 + r a2, a0 = 1 + r a1 */
#define AA_OR_HORNER_STEP(CH, CL)                                                                                    \
  do {                                                                                                               \
    double m_ = rh * ah, me_ = fma(rh, ah, -m_);                                                                     \
    me_ += rh * al + rl * ah;                                                                                        \
    double mh_ = m_ + me_, ml_ = me_ - (mh_ - m_);                                                                   \
    double u_ = (CH) + mh_, ub_ = u_ - (CH), ul_ = (((CH) - (u_ - ub_)) + (mh_ - ub_)) + ((CL) + ml_);               \
    ah = u_ + ul_;                                                                                                   \
    al = ul_ - (ah - u_);                                                                                            \
  } while (0)
  AA_OR_HORNER_STEP(c6h, c6l);
  AA_OR_HORNER_STEP(0.5, 0.0);
  AA_OR_HORNER_STEP(1.0, 0.0);
  AA_OR_HORNER_STEP(1.0, 0.0);
#undef AA_OR_HORNER_STEP
  /* times 2^(j/256) */
  double tj = tab->th[jj], tjl = tab->tl[jj];
  double m = tj * ah, me = fma(tj, ah, -m);
  me += tj * al + tjl * ah;
  double mh = m + me, ml = me - (mh - m);
  /* times 2^k, k >= -1021 here, so 2^k is a normal double */
  /* the flush to 0 for xh < -707 goes through the scale (2^k, or +0 whose
     bits are 0) rather than a select after the table loads: with a select
     GCC sinks the loads under a mask and gives up vectorising (a masked
     gather); the + 0.0 turns the -0 of a negative ml times +0 into +0 */
  uint64_t bits = under ? 0 : (uint64_t)(kk + 1023) << 52;
  double sc;
  memcpy(&sc, &bits, sizeof sc);
  *yh = mh * sc;
  *yl = ml * sc + 0.0;
}

/* Correct rounding of a double to FP32 (bf16 = 0) or BF16: binary32 is the
   C conversion (IEEE RNE with subnormals and overflow to Inf in the default
   environment). bfloat16 of a normal |x| >= 2^-126 keeps the top 7 of the
   52 fraction bits, rounding the 45 below to nearest even on the bit
   pattern (a carry out of the fraction moves to the next binade, as it
   must; at or above max + half an ulp it reaches 2^128: Inf); below 2^-126
   the quantum is 2^-133 whatever the exponent, so |x| is scaled by it (a
   power of two: exactly), rounded to an integer with nearbyint (RNE) and
   scaled back. The bit path is the scaling path's result for every normal
   x (tests/toracle_round checks both against MPFR) without its ilogb,
   ldexp and nearbyint calls, a tenth of a settle's time. */
AA_HD static inline double aa_or_round_d(double x, int bf16) {
  if (!bf16) return (double)(float)x;
  if (isnan(x) || isinf(x) || x == 0.0) return x;
  double a = fabs(x), r;
  if (a >= 0x1p-126) {
    uint64_t b = aa_hd_d2u(a), lsb = (b >> 45) & 1;
    r = aa_hd_u2d((b + (((uint64_t)1 << 44) - 1) + lsb) & ~(((uint64_t)1 << 45) - 1));
  } else {
    r = nearbyint(a * 0x1p133) * 0x1p-133; /* subnormal bfloat16: quantum 2^-133 */
  }
  if (r >= 0x1p128) r = INFINITY; /* at or above max + half an ulp: ties go to the even 2^128 */
  return copysign(r, x);
}

/* nextafter(nextafter(x, -Inf), -Inf) and the same towards +Inf for finite x, on the bit pattern: a step away
   from zero adds one to the pattern of |x|, a step towards it subtracts one, and from +-0 the first step lands on
   the smallest subnormal of the direction's sign (the largest finite value steps to Inf, as nextafter). */
AA_HD static inline double aa_or_step_down(double x) {
  if (x == 0) return -0x1p-1074;
  uint64_t b = aa_hd_d2u(x);
  return aa_hd_u2d(x > 0 ? b - 1 : b + 1);
}
AA_HD static inline double aa_or_step_up(double x) {
  return -aa_or_step_down(-x);
}

/* The settle of a double-double center (h, l) with absolute bound e against
   the target: 1 with *val, *f32, *b16, *rel when every guarantee of oracle.h
   holds (an interval inside (-2^-900, 2^-900) settles as 0, see
   aa_oracle_settle_mp), 0 when the element must go to MPFR. */
AA_HD static inline int aa_or_settle_dd_core(double *val, double *f32, double *b16, double *rel, double h, double l,
                                             double e, double target) {
  double a = fabs(h);
  if ((a + fabs(l) + e) * (1 + 0x1p-50) < AA_OR_MINMAG && e > 0) { /* inside (-2^-900, 2^-900) */
    *val = *f32 = *b16 = *rel = 0.0;
    return 1;
  }
  if (!(a >= AA_OR_MINMAG) || !(a <= 0x1p1000) || !(e >= 0) || !(e < INFINITY)) return 0;
  /* val = h: |h - exact| <= |l| + e and |exact| >= |h| - |l| - e */
  double num = (fabs(l) + e) * (1 + 0x1p-50), den = (a - fabs(l) - e) * (1 - 0x1p-50);
  if (!(den > 0) || num > target * den) return 0;
  /* interval ends pushed two ulps outward to cover the two roundings */
  double lo = h + (l - e), hi = h + (l + e);
  lo = aa_or_step_down(aa_or_step_down(lo)); /* lo, hi finite: a <= 2^1000, num <= target den */
  hi = aa_or_step_up(aa_or_step_up(hi));
  double r32 = aa_or_round_d(lo, 0), r16 = aa_or_round_d(lo, 1);
  if (r32 != aa_or_round_d(hi, 0) || r16 != aa_or_round_d(hi, 1)) return 0;
  *val = h;
  *f32 = r32;
  *b16 = r16;
  *rel = num / den * (1 + 0x1p-50);
  return 1;
}

AA_HD static inline double aa_or_infl(size_t n) {
  return 1.0 + ((double)n + 2.0) * 0x1p-52;
}

/* Value and bound of an accumulated element: (s + cc) times the dd factor f
   (rel error frel) over n terms with a = sum |c_hi y|, b = sum e_c |y|
   (fast_rows.c); floor_unit is the run's absolute floor per term. Returns
   1 when the element is exactly zero (no term at all). */
AA_HD static inline int aa_or_finish_core(aa_or_dd_t *v, double *e, double s, double cc, double a, double b, size_t n,
                                          aa_or_dd_t f, double frel, double floor_unit) {
  *v = aa_or_two_sum(s, cc);
  if (n == 0) {
    v->hi = v->lo = 0;
    *e = 0;
  } else {
    *v = aa_or_dd_mul(*v, f);
    *e = 1.01 * f.hi * (b * aa_or_infl(n) + aa_or_kappa(n) * a) + (frel + 5 * AA_OR_U2) * 1.01 * fabs(v->hi) +
         (double)(n + 1) * floor_unit * fmax(1.0, f.hi);
  }
  return n == 0 || (v->hi == 0 && *e == 0);
}

/* The shift of a row's softmax: the largest of its m logits (sh + sl, normalised double-doubles, compared by
   hi word, then lo word: exact) and its ns sinks. The shift must be the
   largest logit itself, not its hi word: a logit exceeds its hi word by up
   to 2^-53 of itself, an exp argument that overflows beyond |S| ~ 2^62 (the
   overflowed exp then carried a tiny claimed error into Z and the LSE). */
AA_HD static inline aa_or_dd_t aa_or_row_max_dd(const double *sh, const double *sl, size_t m, const double *sinks,
                                                size_t ns) {
  aa_or_dd_t M = aa_or_dd(-INFINITY, 0);
  for (size_t s = 0; s < ns; s++)
    if (sinks[s] > M.hi || (sinks[s] == M.hi && 0 > M.lo)) M = aa_or_dd(sinks[s], 0);
  for (size_t j = 0; j < m; j++)
    if (sh[j] > M.hi || (sh[j] == M.hi && sl[j] > M.lo)) M = aa_or_dd(sh[j], sl[j]);
  return M;
}

/* relative error of the computed exp against exp(exact x), |x^ - x| <= ex
   (exp and expm1 of the second branch come from each side's libm, so far
   arguments, beyond |S| ~ 2^70, may differ in the last bits of the bound
   between CPU and GPU; the factor 1 + 2^-50 covers either) */
AA_HD static inline double aa_or_exp_eps(double xh, double ex) {
  double rel = aa_or_exp_relerr(xh);
  if (ex <= 0x1p-30) return (rel + ex) * (1 + 0x1p-29);
  return (rel * exp(ex) + expm1(ex)) * (1 + 0x1p-50);
}

AA_HD static inline int aa_or_exact_pair(double sa, int la, double sb, int lb, size_t d) {
  if (sa == 0 || sb == 0) return 1;
  return (double)d * sa * sb <= 0x1p52 && la + lb >= -1074;
}

/* compensated dot product (Dot2 without the final rounding), fixed order */
AA_HD static inline aa_or_dd_t aa_or_dot_comp(const double *a, const double *b, size_t n, double *bound) {
  double s = 0, cc = 0, ab = 0;
  for (size_t c = 0; c < n; c++) {
    double p = a[c] * b[c], e = fma(a[c], b[c], -p);
    double ss = s + p, bv = ss - s, t = (s - (ss - bv)) + (p - bv);
    s = ss;
    cc += t + e;
    ab += fabs(p);
  }
  *bound = aa_or_kappa(n) * ab * aa_or_infl(n) + (double)(n + 1) * 0x1p-1070;
  return aa_or_two_sum(s, cc);
}

#endif
