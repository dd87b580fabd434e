/* attnacc: internal header of the oracle module (double-double kernels, MPFR engine, settling of outputs). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ORACLE_IMPL_H
#define AA_ORACLE_IMPL_H

#include <math.h>
#include <mpfr.h>
#include <stdint.h>

#include "oracle.h"

/* Unit roundoff of binary64 and its square (the double-double unit). */
#define AA_OR_U 0x1p-53
#define AA_OR_U2 0x1p-106
/* Relative error bound of aa_oracle_dd_exp for |x| <= 708 (see ddexp.c):
   AA_OR_EXP_REL + AA_OR_EXP_XREL * |x|, plus an absolute AA_OR_TINY below
   exp(-707) where the low word of the result is subnormal. */
#define AA_OR_EXP_REL 0x1p-100
#define AA_OR_EXP_XREL 0x1p-108
#define AA_OR_TINY 0x1p-1000
/* Default target relative error (aa_oracle_opts_t.target; the run's target
   is cx->target) and the smallest magnitude the fast path accepts (below it
   an element goes to MPFR, where the floors are harmless). */
#define AA_OR_TARGET AA_ORACLE_TARGET_DEFAULT
#define AA_OR_MINMAG 0x1p-900
/* Escalation levels of the MPFR recompute: prec, 2 prec, 4 prec. */
#define AA_OR_LEVELS 3

/* Bound on the error of a compensated accumulation of n terms xh*y (TwoProduct
   and TwoSum, error terms summed in a second double), relative to sum |xh*y|;
   ORO 2005 gives gamma_{n}^2 ~ n^2 u^2 for Dot2, we take 4 (n+4)^2 u^2 to also
   cover the low words xl*y and the error-term additions. */
static inline double aa_or_kappa(size_t n) {
  double m = (double)n + 4.0;
  return 4.0 * m * m * AA_OR_U2;
}

typedef struct {
  double hi, lo;
} aa_or_dd_t;

static inline aa_or_dd_t aa_or_two_sum(double a, double b) {
  double s = a + b, bb = s - a;
  aa_or_dd_t r = {s, (a - (s - bb)) + (b - bb)};
  return r;
}
static inline aa_or_dd_t aa_or_fast_two_sum(double a, double b) { /* |a| >= |b| or a == 0 */
  double s = a + b;
  aa_or_dd_t r = {s, b - (s - a)};
  return r;
}
/* Accurate double-double addition (both words through TwoSum): relative
   error <= 3 u^2 of |a + b| + 2 u^2 (|a| + |b|) (Joldes-Muller-Popescu 2017, alg. 6). */
static inline aa_or_dd_t aa_or_dd_add(aa_or_dd_t a, aa_or_dd_t b) {
  aa_or_dd_t s = aa_or_two_sum(a.hi, b.hi), t = aa_or_two_sum(a.lo, b.lo);
  s.lo += t.hi;
  s = aa_or_fast_two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return aa_or_fast_two_sum(s.hi, s.lo);
}
static inline aa_or_dd_t aa_or_dd_neg(aa_or_dd_t a) {
  aa_or_dd_t r = {-a.hi, -a.lo};
  return r;
}
/* dd * dd: relative error <= 5 u^2 (JMP 2017, alg. 12 bound, generously). */
static inline aa_or_dd_t aa_or_dd_mul(aa_or_dd_t a, aa_or_dd_t b) {
  double p = a.hi * b.hi, e = fma(a.hi, b.hi, -p);
  e += a.hi * b.lo + a.lo * b.hi;
  return aa_or_fast_two_sum(p, e);
}
/* dd * double: relative error <= 3 u^2. */
static inline aa_or_dd_t aa_or_dd_mul_d(aa_or_dd_t a, double b) {
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

void aa_oracle_exp_tab_init(aa_or_exp_tab_t *tab);
/* exp(xh + xl) into (yh, yl) for n elements; relative error bound as
   documented above; results 0 for xh < -707 (then exp < 2^-1019). */
void aa_oracle_dd_exp(double *yh, double *yl, const double *xh, const double *xl, size_t n,
                      const aa_or_exp_tab_t *tab);
/* Relative error of aa_oracle_dd_exp at xh; infinite above AA_OR_EXP_MAXARG,
   where the double-double result overflows (no shifted softmax argument
   gets there, but a bound must never be finite on an overflowed value). */
#define AA_OR_EXP_MAXARG 700.0
static inline double aa_or_exp_relerr(double xh) {
  return xh <= AA_OR_EXP_MAXARG ? AA_OR_EXP_REL + AA_OR_EXP_XREL * fabs(xh) : INFINITY;
}

/* Rounding of the exact value to FP32/BF16 (RNE, subnormals, overflow to
   Inf): from an MPFR number (MPFR emulation of the target exponent range),
   and from a double (own integer-free arithmetic, used for interval ends). */
double aa_oracle_round_mpfr(mpfr_srcptr x, int bf16);
double aa_oracle_round_d(double x, int bf16);

/* ---- the run context shared by the two paths ---- */

enum { AA_OR_O = 0, AA_OR_LSE, AA_OR_DQ, AA_OR_DK, AA_OR_DV, AA_OR_DSINKS, AA_OR_NT };

/* Working state of one output tensor. */
typedef struct {
  aa_oracle_out_t *out;
  size_t n;
  double *rel;   /* per-element certified relative error (or -1 when uncertified) */
  uint8_t *todo; /* 1 while an element still has to be (re)computed in MPFR */
} aa_or_work_t;

/* MPFR row statistics of one head at one precision, for the column pass. */
typedef struct {
  int ready;
  mpfr_t *lse, *dd; /* [n_q] */
  double *e_lse, *e_d;
  uint8_t *empty;
} aa_or_stats_t;

typedef struct {
  const aa_problem_t *pb;
  const double *q, *k, *v, *dO;
  size_t n_q, n_k, d, heads, kvh, group, ns;
  double ks; /* dropout rescale (1 without dropout) */
  int prec;  /* base MPFR precision */
  int threads;
  aa_or_dd_t sig;    /* softmax scale as double-double */
  double sig_rel;    /* relative error of sig */
  double floor_unit; /* absolute floor per term covering underflow (see fast.c) */
  double target;     /* relative accuracy an element must be certified to (opts.target) */
  int mod;           /* the problem has score modifiers (softcap or ALiBi, problem.h) */
  double cap;        /* softcap (0: off) */
  aa_or_dd_t icap;   /* 1 / softcap as double-double, relative error <= 2^-105 */
  aa_or_exp_tab_t tab;
  aa_or_work_t w[AA_OR_NT];
  size_t n_recomputed, n_uncertified;
  /* fast-path double-double row statistics, used by the level-0 column recompute */
  double *lse_h, *lse_l, *e_lse, *d_h, *d_l, *e_d; /* [heads*n_q] */
  uint8_t *row_empty;
  aa_or_stats_t *stats[AA_OR_LEVELS]; /* [heads] per level, lazily filled */
} aa_or_ctx_t;

/* Settle one element from an MPFR value x with absolute error bound e:
   returns 1 and writes val/fp32/bf16/rel when the guarantees hold (or when
   final, with best effort and counting it uncertified), else 0. */
int aa_oracle_settle_mp(aa_or_ctx_t *cx, int t, size_t idx, mpfr_srcptr x, double e, int final);
/* Same from a double-double center (h, l) with bound e (fast path). */
int aa_oracle_settle_dd(aa_or_ctx_t *cx, int t, size_t idx, double h, double l, double e);

/* Fast path: double-double forward and backward; marks unsettled elements todo.
   aa_oracle_fast_run is the tiled kernel (fast.c); aa_oracle_fast_run_rows
   the earlier row-by-row kernel (fast_rows.c), same bounds and the same
   per-element operations, kept as a second algorithm for tests and for
   side-by-side benchmarks. */
int aa_oracle_fast_run(aa_or_ctx_t *cx, aa_error_t *err);
int aa_oracle_fast_run_rows(aa_or_ctx_t *cx, aa_error_t *err);
enum { AA_OR_KERNEL_TILED = 0, AA_OR_KERNEL_ROWS = 1 };
/* aa_oracle_run with a choice of fast kernel (ignored on the mpfr path). */
/* The oracle of a varlen problem (pb->varlen_batch > 0, checked): every
   sequence through aa_oracle_run_kernel on its own, outputs packed
   (lib/oracle/varlen.c). */
int aa__oracle_run_varlen(aa_oracle_result_t *out, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                          const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, int kernel,
                          aa_error_t *err);
int aa_oracle_run_kernel(aa_oracle_result_t *out, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                         const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, int kernel,
                         aa_error_t *err);
/* MPFR engine: recompute every todo element (all of them on the mpfr path),
   escalating precision; use_dd_stats: level 0 of the column pass may take the
   fast path's row statistics. */
int aa_oracle_mp_resolve(aa_or_ctx_t *cx, int use_dd_stats, aa_error_t *err);
/* For tests: 1 and the plain double dot product when the span test proves it exact. */
int aa_oracle_dot_exact_check(double *out, const double *a, const double *b, size_t n);

#endif
