/* attnacc: helpers shared by the oracle's tiled and row-by-row fast kernels (element finish, exactness test,
 * compensated dots, exp error). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ORACLE_FAST_COMMON_H
#define AA_ORACLE_FAST_COMMON_H

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oracle-impl.h"

/* One clone per vector width, chosen at run time. "arch=x86-64-v3" (AVX2 + FMA) rather than "avx2,fma": clang
   refuses a comma inside one clone's string. */
#define TC __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))

/* Terms per block of the normaliser sum Z and of the sink gradients' sums (row_norm; sink_grad of fast.c). */
#define ZB 64

/* The element operations shared with the GPU are in ddcore.h; the short names below are the kernels' own. */
static inline double infl(size_t n) {
  return aa_or_infl(n);
}

/* Finish an accumulated element: value (s + cc) times the dd factor f (rel
   error frel), bound (aa_or_finish_core); settles it (or leaves it todo). */
static inline void finish(aa_or_ctx_t *cx, int t, size_t idx, double s, double cc, double a, double b, size_t n,
                          aa_or_dd_t f, double frel, double *vh, double *vl, double *ve) {
  aa_or_dd_t v;
  double e;
  int zero = aa_or_finish_core(&v, &e, s, cc, a, b, n, f, frel, cx->floor_unit);
  if (vh != NULL) {
    *vh = v.hi;
    *vl = v.lo;
    *ve = e;
  }
  if (zero) { /* exactly zero: no term at all */
    aa_oracle_out_t *o = cx->w[t].out;
    o->val.data[idx] = o->fp32.data[idx] = o->bf16.data[idx] = 0;
    cx->w[t].rel[idx] = 0;
    cx->w[t].todo[idx] = 0;
    return;
  }
  aa_oracle_settle_dd(cx, t, idx, v.hi, v.lo, e);
}

static inline aa_or_dd_t row_max_dd(const double *sh, const double *sl, size_t m, const double *sinks, size_t ns) {
  return aa_or_row_max_dd(sh, sl, m, sinks, ns);
}

/* Row r's LSE = M + log Z (M = mx, the shift, a double-double) and 1/Z from the normaliser Z = zs + zc
   (relative error epsZ), through MPFR at 256 bits (mz, ml: scratch of that
   precision; only n_q of these per run): stores and settles the LSE with
   its bound and returns 1/Z as a double-double. */
static inline aa_or_dd_t lse_from_z(aa_or_ctx_t *cx, size_t r, double zs, double zc, aa_or_dd_t M, double epsZ,
                                    mpfr_t mz, mpfr_t ml) {
  aa_or_dd_t iz;
  double mx = M.hi;
  mpfr_set_d(mz, zs, MPFR_RNDN);
  mpfr_add_d(mz, mz, zc, MPFR_RNDN); /* relative 2^-256 */
  mpfr_log(ml, mz, MPFR_RNDN);
  mpfr_add_d(ml, ml, M.hi, MPFR_RNDN);
  mpfr_add_d(ml, ml, M.lo, MPFR_RNDN);
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

static inline double exp_eps(double xh, double ex) {
  return aa_or_exp_eps(xh, ex);
}

/* A query row with no visible key and no sink (forward of either kernel): LSE -inf, exact; D = 0; O = 0. */
static inline void row_empty_fwd(aa_or_ctx_t *cx, size_t r) {
  aa_oracle_settle_empty_lse(cx, r);
  cx->lse_h[r] = -INFINITY;
  cx->lse_l[r] = cx->e_lse[r] = cx->d_h[r] = cx->d_l[r] = cx->e_d[r] = 0;
  for (size_t c = 0; c < cx->d; c++)
    finish(cx, AA_OR_O, r * cx->d + c, 0, 0, 0, 0, 0, cx->sig, 0, NULL, NULL, NULL);
}

/* One query row of the forward's second pass ([m] each, m its visible keys): the scaled scores S (sh, sl, with
   bound eS) in; x = S - M (xh, xl), E = exp(x) (eh, el) and the relative bound ee of each E out. */
typedef struct {
  double *sh, *sl, *eS, *xh, *xl, *eh, *el, *ee;
} srow_t;

/* The forward's second pass on row r of head h, as both kernels run it: the largest logit M (row_max_dd) is the
   shift, which keeps Z in [1, m + ns]; E = exp(S - M); Z = sum E + sum exp(sink - M); the LSE (settled) and 1/Z
   from Z (lse_from_z). Returns 1/Z; *pz: the relative bound that 1/Z adds to P = E / Z. */
static inline aa_or_dd_t row_norm(aa_or_ctx_t *cx, size_t h, size_t r, size_t m, const srow_t *R, mpfr_t mz,
                                  mpfr_t ml, double *pz) {
  const aa_problem_t *pb = cx->pb;
  size_t ns = cx->ns;
  aa_or_dd_t M = row_max_dd(R->sh, R->sl, m, ns > 0 ? pb->sinks + h * ns : NULL, ns), nM = aa_or_dd_neg(M);
  double mx = M.hi;
  double zs = 0, zc = 0, epsE = 0;
  for (size_t s = 0; s < ns; s++) {
    double sk = pb->sinks[h * ns + s];
    aa_or_dd_t x = aa_or_dd_add((aa_or_dd_t){sk, 0}, nM);
    double eh, el;
    aa_oracle_dd_exp(&eh, &el, &x.hi, &x.lo, 1, &cx->tab);
    epsE = fmax(epsE, exp_eps(x.hi, 4 * AA_OR_U2 * (fabs(sk) + fabs(mx))));
    aa_or_dd_t t2 = aa_or_two_sum(zs, eh);
    zs = t2.hi;
    zc += t2.lo + el;
  }
  for (size_t j = 0; j < m; j++) {
    aa_or_dd_t x = aa_or_dd_add((aa_or_dd_t){R->sh[j], R->sl[j]}, nM);
    R->xh[j] = x.hi;
    R->xl[j] = x.lo;
  }
  aa_oracle_dd_exp(R->eh, R->el, R->xh, R->xl, m, &cx->tab);
  /* Z = sum of positive terms, in blocks of ZB: a TwoSum chain within a
     block (error <= kappa(ZB) times the block's sum), the blocks merged
     with the accurate dd sum (<= 5 u2 of the running sum each, positive
     terms), so relative error <= max term error + kappa(max(ZB, ns)) +
     5 u2 (blocks + 1) (+ flushed terms below 2^-1019 against Z >= 1/2).
     One chain over the row gives kappa(m + ns) ~ 4 m^2 u2 instead, 2^-76
     at m = 32768: the LSE bound then sends cancelling dK/dV elements past
     the first MPFR level, whose next level recomputes every row. */
  aa_or_dd_t Zd = aa_or_two_sum(zs, zc);
  size_t nblk = 0;
  for (size_t j0 = 0; j0 < m; j0 += ZB, nblk++) {
    double bs = 0, bc = 0;
    for (size_t j = j0; j < m && j < j0 + ZB; j++) {
      double ex = R->eS[j] + 4 * AA_OR_U2 * (fabs(R->sh[j]) + fabs(mx));
      R->ee[j] = exp_eps(R->xh[j], ex);
      epsE = fmax(epsE, R->ee[j]);
      aa_or_dd_t t2 = aa_or_two_sum(bs, R->eh[j]);
      bs = t2.hi;
      bc += t2.lo + R->el[j];
    }
    Zd = aa_or_dd_add(Zd, aa_or_two_sum(bs, bc));
  }
  zs = Zd.hi;
  zc = Zd.lo;
  double epsZ = 1.01 * (epsE + aa_or_kappa(ns > ZB ? ns : ZB) + 5 * AA_OR_U2 * (double)(nblk + 1)) +
                (double)(m + ns) * 0x1p-1018;
  *pz = 1.01 * (epsZ + 0x1p-105);
  return lse_from_z(cx, r, zs, zc, M, epsZ, mz, ml);
}

/* The O elements of row r from their accumulated words (s, cc; bound words a, b as finish() takes them, a NULL
   reading as 0 and b scaled by bscale: exactly 1 for the row kernel) over nkept terms, and then
   D_r = sum_c O_c dO_c, computed from the double-double O with its bounds. */
static inline void o_and_d(aa_or_ctx_t *cx, size_t r, const double *s, const double *cc, const double *a,
                           const double *b, double bscale, size_t nkept) {
  size_t d = cx->d;
  const double *doi = cx->dO + r * d;
  double ds = 0, dc = 0, da = 0, db = 0;
  aa_or_dd_t ksd = {cx->ks, 0};
  for (size_t c = 0; c < d; c++) {
    double oh, ol, oe;
    finish(cx, AA_OR_O, r * d + c, s[c], cc[c], a != NULL ? a[c] : 0, b[c] * bscale, nkept, ksd, 0, &oh, &ol, &oe);
    double y = doi[c], p = oh * y, e = fma(oh, y, -p), l = ol * y;
    aa_or_dd_t t2 = aa_or_two_sum(ds, p);
    ds = t2.hi;
    dc += (t2.lo + e) + l;
    da += fabs(p);
    db += oe * fabs(y);
  }
  aa_or_dd_t D = aa_or_two_sum(ds, dc);
  cx->d_h[r] = D.hi;
  cx->d_l[r] = D.lo;
  cx->e_d[r] = nkept == 0 ? 0 : db * infl(d) + aa_or_kappa(d) * da + (double)(d + 1) * cx->floor_unit;
}

/* The term of query row r in dsinks[h, s] = - sum_i exp(sink - LSE_i) D_i: exp(sink - LSE_r) D_r as a
   double-double, *eT its bound. */
static inline aa_or_dd_t sink_term(const aa_or_ctx_t *cx, double sink, size_t r, double *eT) {
  aa_or_dd_t L = {cx->lse_h[r], cx->lse_l[r]};
  aa_or_dd_t x = aa_or_dd_add((aa_or_dd_t){sink, 0}, aa_or_dd_neg(L));
  double ex = cx->e_lse[r] + 4 * AA_OR_U2 * (fabs(sink) + fabs(L.hi)), ph, pl;
  aa_oracle_dd_exp(&ph, &pl, &x.hi, &x.lo, 1, &cx->tab);
  aa_or_dd_t T = aa_or_dd_mul((aa_or_dd_t){ph, pl}, (aa_or_dd_t){cx->d_h[r], cx->d_l[r]});
  *eT = 1.01 * (exp_eps(x.hi, ex) * fabs(T.hi) + ph * cx->e_d[r]) + 5 * AA_OR_U2 * fabs(T.hi);
  return T;
}

/* 1 / a for a double-double a >= 1/2 (JMP 2017 alg. 17, DWDivDW2, with x =
   1): relative error <= 15 u2 + 56 u^3 < 2^-101. */
static inline aa_or_dd_t dd_recip(aa_or_dd_t a) {
  double th = 1.0 / a.hi;
  aa_or_dd_t r = aa_or_dd_mul_d(a, th); /* a th, relative 3 u2 (the alg. uses DWTimesFP1, bound 2 u2) */
  double pih = 1.0 - r.hi, dl = 0.0 - r.lo, de = pih + dl, tl = de / a.hi;
  return aa_or_fast_two_sum(th, tl);
}

/* Score modifiers of problem.h for one pair (head h, query i, key j) on the
   scaled score S (dd, |S - s| <= *eS for the exact s), in place:
   S <- softcap tanh(S / softcap) + slope_h dist(i, j), and the softcap
   derivative g = 1 - tanh^2(s / softcap) (dd, |g - exact| <= *eg; g = 1,
   eg = 0 without softcap).
   tanh from the certified double-double exp: with y = |S| / softcap and
   E = exp(-2 y) (|E - exact| <= eE, from exp_eps with the argument error
   2 e_y), t = (1 - E) / (1 + E) and g = 4 E / (1 + E)^2. Since |dt/dE| <= 2
   and |dg/dE| <= 4 on E in [0, 1], the propagated errors are 2 eE and 4 eE;
   the double-double steps (1 +- E: <= 10 u2 absolute, the reciprocal 2^-101
   relative, two or three products 5 u2 each) add less than 2^-98 (times g
   for g, which keeps g's bound relative where g underflows towards 0). Below
   exp(-707) the exp returns 0 and the true E < 2^-1019: an absolute
   AA_OR_TINY covers it. The bias slope dist is exact as TwoProduct (slope
   0 or >= 2^-900, |dist| < 2^32, problem.h), added with the accurate dd sum;
   so is the attention bias plus the logit offset, exact as TwoSum. */
static inline void score_mod(const aa_or_ctx_t *cx, size_t h, size_t i, size_t j, aa_or_dd_t *S, double *eS,
                             aa_or_dd_t *g, double *eg) {
  const aa_problem_t *pb = cx->pb;
  g->hi = 1;
  g->lo = 0;
  *eg = 0;
  if (cx->cap > 0) {
    aa_or_dd_t y = aa_or_dd_mul(*S, cx->icap);
    double ey = 1.01 * (*eS * cx->icap.hi + (0x1p-105 + 5 * AA_OR_U2) * fabs(y.hi));
    int neg = y.hi < 0;
    if (neg) y = aa_or_dd_neg(y);
    double xh = -2 * y.hi, xl = -2 * y.lo, Eh, El;
    aa_oracle_dd_exp(&Eh, &El, &xh, &xl, 1, &cx->tab);
    double eE = 1.01 * exp_eps(xh, 2 * ey) * Eh + AA_OR_TINY;
    aa_or_dd_t E = {Eh, El}, one = {1, 0};
    aa_or_dd_t r = dd_recip(aa_or_dd_add(one, E)), t = aa_or_dd_mul(aa_or_dd_add(one, aa_or_dd_neg(E)), r);
    double et = 2 * eE + 0x1p-98;
    aa_or_dd_t gg = aa_or_dd_mul(aa_or_dd_mul(E, aa_or_dd_mul(r, r)), (aa_or_dd_t){4, 0});
    *g = gg;
    *eg = 4 * eE + 0x1p-98 * gg.hi + 0x1p-1060;
    if (neg) t = aa_or_dd_neg(t);
    *S = aa_or_dd_mul_d(t, cx->cap);
    *eS = 1.01 * (cx->cap * et + 3 * AA_OR_U2 * fabs(S->hi));
  }
  if (pb->alibi != AA_ALIBI_NONE) {
    double sl = pb->alibi_slopes[h], dist = (double)aa_problem_alibi_dist(pb, i, j);
    double bh = sl * dist, bl = fma(sl, dist, -bh);
    aa_or_dd_t b = {bh, bl}, n = aa_or_dd_add(*S, b);
    *eS += 1.01 * (3 * AA_OR_U2 * fabs(n.hi) + 2 * AA_OR_U2 * (fabs(S->hi) + fabs(bh)));
    *S = n;
  }
  if (aa_problem_has_bias(pb)) {
    aa_or_dd_t b = aa_or_two_sum(aa_problem_bias(pb, h, i, j), pb->logit_offset), n = aa_or_dd_add(*S, b);
    *eS += 1.01 * (3 * AA_OR_U2 * fabs(n.hi) + 2 * AA_OR_U2 * (fabs(S->hi) + fabs(b.hi)));
    *S = n;
  }
}

/* Multiply a dS coefficient (ch, cl, |err| <= *ec) by the softcap derivative g (|err| <= eg). */
static inline void ds_times_g(double *ch, double *cl, double *ec, aa_or_dd_t g, double eg) {
  aa_or_dd_t x = {*ch, *cl}, y = aa_or_dd_mul(x, g);
  *ec = 1.01 * (g.hi * *ec + eg * (fabs(x.hi) + *ec)) + 5 * AA_OR_U2 * fabs(y.hi) + 0x1p-1060;
  *ch = y.hi;
  *cl = y.lo;
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

/* What every fast kernel sets up first: the spans of every row of q, dO, k
   and v (computed here), and cx's double-double row statistics (LSE, D,
   their bounds, the empty-row flags), which stay in cx for the MPFR
   resolve (oracle.c frees them). Returns 0 when out of memory; spans_free
   then frees what was allocated, as it does after a run. */
static inline int fast_begin(aa_or_ctx_t *cx, spans_t *sp) {
  size_t nr = cx->heads * cx->n_q, nc = cx->kvh * cx->n_k, d = cx->d;
  double **dv[] = {&sp->xq, &sp->xdo, &cx->lse_h, &cx->lse_l, &cx->e_lse, &cx->d_h, &cx->d_l, &cx->e_d};
  int ok = 1;
  for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++)
    ok &= (*dv[i] = malloc((nr + 1) * sizeof(double))) != NULL;
  ok &= (sp->xk = malloc((nc + 1) * sizeof(double))) != NULL;
  ok &= (sp->xv = malloc((nc + 1) * sizeof(double))) != NULL;
  ok &= (sp->lq = malloc((nr + 1) * sizeof(int))) != NULL;
  ok &= (sp->ldo = malloc((nr + 1) * sizeof(int))) != NULL;
  ok &= (sp->lk = malloc((nc + 1) * sizeof(int))) != NULL;
  ok &= (sp->lv = malloc((nc + 1) * sizeof(int))) != NULL;
  ok &= (cx->row_empty = malloc(nr + 1)) != NULL;
  if (!ok) return 0;
    /* rows in parallel: each span is its own row's (8 M elements of a large problem took a tenth of a second on one
       core, longer than some GPU kernels) */
#pragma omp parallel num_threads(cx->threads) if (nr * d >= ((size_t)1 << 16))
  {
#pragma omp for schedule(static) nowait
    for (size_t r = 0; r < nr; r++) {
      span(&sp->xq[r], &sp->lq[r], cx->q + r * d, d);
      span(&sp->xdo[r], &sp->ldo[r], cx->dO + r * d, d);
    }
#pragma omp for schedule(static)
    for (size_t r = 0; r < nc; r++) {
      span(&sp->xk[r], &sp->lk[r], cx->k + r * d, d);
      span(&sp->xv[r], &sp->lv[r], cx->v + r * d, d);
    }
  }
  return 1;
}

static inline void spans_free(spans_t *sp) {
  free(sp->xq);
  free(sp->xdo);
  free(sp->xk);
  free(sp->xv);
  free(sp->lq);
  free(sp->ldo);
  free(sp->lk);
  free(sp->lv);
}

static inline int exact_pair(double sa, int la, double sb, int lb, size_t d) {
  return aa_or_exact_pair(sa, la, sb, lb, d);
}

/* Plain dot product (dot.c), for products whose sum is exact. */
double aa_oracle_dot_plain(const double *restrict a, const double *restrict b, size_t n);

/* compensated dot product (Dot2 without the final rounding), fixed order */
static inline aa_or_dd_t dot_comp(const double *a, const double *b, size_t n, double *bound) {
  return aa_or_dot_comp(a, b, n, bound);
}

/* A fast kernel as aa_oracle_fast_drive runs it: three phases, 0 the forward of every query row (LSE, O, D),
   1 dQ, 2 dK and dV (each reads the row statistics the forward wrote), each a loop of independent items over the
   threads with one workspace per thread; then the sink gradients, in order. */
typedef struct {
  const void *data;                                           /* the kernel's own: spans, panels */
  int chunk;                                                  /* items a thread takes at a time */
  size_t (*items)(const aa_or_ctx_t *cx, int phase);          /* items of a phase */
  size_t ws_size;                                             /* bytes of a thread's workspace */
  int (*ws_init)(void *ws, const aa_or_ctx_t *cx, int phase); /* 0 when out of memory (ws_free still runs) */
  void (*ws_free)(void *ws);                                  /* frees what ws_init allocated */
  /* item idx of the phase; mz, ml: MPFR scratch of 256 bits (lse_from_z) */
  void (*item)(aa_or_ctx_t *cx, const void *data, void *ws, int phase, size_t idx, mpfr_ptr mz, mpfr_ptr ml);
  void (*sink_grad)(aa_or_ctx_t *cx, size_t h, size_t s);
  /* NULL, or run after each phase (the tiled kernel's binary64 tier redoes rows there); 0 when out of memory */
  int (*after)(aa_or_ctx_t *cx, const void *data, int phase);
} fast_kernel_t;

/* Runs K on cx when ok (ok = 0: the kernel's own setup ran out of memory). AA_OK, or AA_ENOMEM with err set. */
int aa_oracle_fast_drive(aa_or_ctx_t *cx, const fast_kernel_t *K, int ok, aa_error_t *err);
/* Items 0 .. n - 1 of one phase of K over the threads, a workspace each; 0 when one could not be allocated. */
int aa_oracle_fast_phase(aa_or_ctx_t *cx, const fast_kernel_t *K, int phase, size_t n);

#endif
