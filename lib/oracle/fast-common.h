/* attnacc: helpers shared by the oracle's tiled and row-by-row fast kernels (element finish, exactness test,
 * compensated dots, exp error). */
#ifndef AA_ORACLE_FAST_COMMON_H
#define AA_ORACLE_FAST_COMMON_H

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "oracle-impl.h"

/* One clone per vector width, chosen at run time. "arch=x86-64-v3" (AVX2 + FMA) rather than "avx2,fma": clang
   refuses a comma inside one clone's string. */
#define TC __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))

static inline double infl(size_t n) {
  return 1.0 + ((double)n + 2.0) * 0x1p-52;
}

/* Finish an accumulated element: value (s + cc) times the dd factor f (rel
   error frel), bound; settles it (or leaves it todo). */
static inline void finish(aa_or_ctx_t *cx, int t, size_t idx, double s, double cc, double a, double b, size_t n,
                          aa_or_dd_t f, double frel, double *vh, double *vl, double *ve) {
  aa_or_dd_t v = aa_or_two_sum(s, cc);
  double e;
  if (n == 0) {
    v.hi = v.lo = 0;
    e = 0;
  } else {
    v = aa_or_dd_mul(v, f);
    e = 1.01 * f.hi * (b * infl(n) + aa_or_kappa(n) * a) + (frel + 5 * AA_OR_U2) * 1.01 * fabs(v.hi) +
        (double)(n + 1) * cx->floor_unit * fmax(1.0, f.hi);
  }
  if (vh != NULL) {
    *vh = v.hi;
    *vl = v.lo;
    *ve = e;
  }
  if (n == 0 || (v.hi == 0 && e == 0)) { /* exactly zero: no term at all */
    aa_oracle_out_t *o = cx->w[t].out;
    o->val.data[idx] = o->fp32.data[idx] = o->bf16.data[idx] = 0;
    cx->w[t].rel[idx] = 0;
    cx->w[t].todo[idx] = 0;
    return;
  }
  aa_oracle_settle_dd(cx, t, idx, v.hi, v.lo, e);
}

/* Row r's LSE = mx + log Z and 1/Z from the normaliser Z = zs + zc
   (relative error epsZ), through MPFR at 256 bits (mz, ml: scratch of that
   precision; only n_q of these per run): stores and settles the LSE with
   its bound and returns 1/Z as a double-double. */
static inline aa_or_dd_t lse_from_z(aa_or_ctx_t *cx, size_t r, double zs, double zc, double mx, double epsZ,
                                    mpfr_t mz, mpfr_t ml) {
  aa_or_dd_t iz;
  mpfr_set_d(mz, zs, MPFR_RNDN);
  mpfr_add_d(mz, mz, zc, MPFR_RNDN); /* relative 2^-256 */
  mpfr_log(ml, mz, MPFR_RNDN);
  mpfr_add_d(ml, ml, mx, MPFR_RNDN);
  double lh = mpfr_get_d(ml, MPFR_RNDN);
  mpfr_sub_d(ml, ml, lh, MPFR_RNDN);
  double ll = mpfr_get_d(ml, MPFR_RNDN);
  cx->lse_h[r] = lh;
  cx->lse_l[r] = ll;
  cx->e_lse[r] = 1.01 * epsZ + 0x1p-105 * fabs(lh) + 0x1p-250 * (1 + fabs(mx));
  mpfr_ui_div(ml, 1, mz, MPFR_RNDN);
  iz.hi = mpfr_get_d(ml, MPFR_RNDN);
  mpfr_sub_d(ml, ml, iz.hi, MPFR_RNDN);
  iz.lo = mpfr_get_d(ml, MPFR_RNDN);
  aa_oracle_settle_dd(cx, AA_OR_LSE, r, lh, ll, cx->e_lse[r]);
  return iz;
}

/* relative error of the computed exp against exp(exact x), |x^ - x| <= ex */
static inline double exp_eps(double xh, double ex) {
  double rel = aa_or_exp_relerr(xh);
  if (ex <= 0x1p-30) return (rel + ex) * (1 + 0x1p-29);
  return (rel * exp(ex) + expm1(ex)) * (1 + 0x1p-50);
}

/* Exponent of the lowest set bit of a non-zero double. */
static int lowbit_exp(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  int ef = (int)((b >> 52) & 0x7ff);
  uint64_t m = b & ((UINT64_C(1) << 52) - 1);
  int e0 = ef == 0 ? -1074 : ef - 1075;
  if (ef != 0) m |= UINT64_C(1) << 52;
  return e0 + __builtin_ctzll(m);
}

/* Span of a vector: max|x| / 2^lb with lb the lowest set bit over the
   vector. If span(a) span(b) d <= 2^52 and lb(a) + lb(b) >= -1074, every
   product a_c b_c and every partial sum of a.b is an integer multiple of
   2^(lb(a)+lb(b)) below 2^53 times it, so the plain double dot product is
   exact in any order (tested in toracle_kernels). */
static inline void span(double *sp, int *lb, const double *x, size_t n) {
  double m = 0;
  int l = INT_MAX;
  for (size_t i = 0; i < n; i++)
    if (x[i] != 0) {
      m = fmax(m, fabs(x[i]));
      int e = lowbit_exp(x[i]);
      if (e < l) l = e;
    }
  *sp = m == 0 ? 0 : ldexp(m, -l);
  *lb = m == 0 ? 0 : l;
}

typedef struct {
  double *xq, *xk, *xv, *xdo;
  int *lq, *lk, *lv, *ldo;
} spans_t;

static inline int exact_pair(double sa, int la, double sb, int lb, size_t d) {
  if (sa == 0 || sb == 0) return 1;
  return (double)d * sa * sb <= 0x1p52 && la + lb >= -1074;
}

/* Plain dot product (dot.c), for products whose sum is exact. */
double aa_oracle_dot_plain(const double *restrict a, const double *restrict b, size_t n);

/* compensated dot product (Dot2 without the final rounding), fixed order */
static inline aa_or_dd_t dot_comp(const double *a, const double *b, size_t n, double *bound) {
  double s = 0, cc = 0, ab = 0;
  for (size_t c = 0; c < n; c++) {
    double p = a[c] * b[c], e = fma(a[c], b[c], -p);
    double ss = s + p, bv = ss - s, t = (s - (ss - bv)) + (p - bv);
    s = ss;
    cc += t + e;
    ab += fabs(p);
  }
  *bound = aa_or_kappa(n) * ab * infl(n) + (double)(n + 1) * 0x1p-1070;
  return aa_or_two_sum(s, cc);
}

#endif
