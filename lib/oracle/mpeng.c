/* attnacc: the MPFR engine of the oracle: rows (O, LSE, dQ), columns (dK, dV) and sink gradients with running error
 * bounds. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "oracle-impl.h"

/* Error model (u = 2^-p, every MPFR operation correctly rounded):
   - dot products of stored doubles: products are exact at 2p+64 bits and
     mpfr_sum rounds the exact sum once: relative error u;
   - S = RN(sigma t): relative (2u + sigma_rel) where sigma = 1/sqrt(d) is
     rounded to p+64 bits (or exact when given);
   - exp(x^) with |x^ - x| <= e: relative u e^e + expm1(e) against exp(x);
   - log(Z (1 + eps)) = log Z + log(1 + eps): absolute eps/(1-eps);
   - sums of exact products rounded once: absolute u |result| plus the
     propagated sum of |input error| * |coefficient|, evaluated in double
     and inflated by (1 + (n+2) 2^-52) for its own rounding;
   - the factor 1.01 absorbs second-order terms (all relative errors here
     are below 2^-40). */

typedef struct {
  mpfr_prec_t p;
  size_t cap, tcap, d, m;
  mpfr_t *a, *b, *s, *terms, *o, *dq, *g; /* g: softcap derivative of each pair's score; g[cap]: scratch */
  mpfr_t *dterm;                          /* ds_dominant's terms (2p + 64 bits) */
  mpfr_ptr *ptrs, *dptrs;
  double *eS, *epsP, *Pd, *eDS, *eo, *edq, *eg; /* eg: relative error of g */
  size_t *idx;
  uint8_t *kept;
  mpfr_t sig, t1, t2, lse, D, Z, y, th, x1, x2, x3, x4; /* x1..x4: ds_dominant */
  double sig_rel, sig_d, e_lse, e_D;
  int empty, ok;
} ws_t;

static void *xcalloc(size_t n, size_t sz, int *ok) {
  void *p = calloc(n + 1, sz);
  if (p == NULL) *ok = 0;
  return p;
}

static void init_arr(mpfr_t **arr, size_t n, int *ok) {
  *arr = xcalloc(n, sizeof(mpfr_t), ok);
  if (*arr != NULL)
    for (size_t i = 0; i < n; i++)
      mpfr_init2((*arr)[i], 64);
}
static void clear_arr(mpfr_t *arr, size_t n) {
  if (arr == NULL) return;
  for (size_t i = 0; i < n; i++)
    mpfr_clear(arr[i]);
  free(arr);
}

static void ws_init(ws_t *w, const aa_or_ctx_t *cx) {
  memset(w, 0, sizeof *w);
  w->ok = 1;
  w->d = cx->d;
  w->cap = cx->n_k > cx->group * cx->n_q ? cx->n_k : cx->group * cx->n_q;
  w->tcap = w->cap + cx->ns;
  if (w->tcap < cx->d) w->tcap = cx->d;
  if (w->tcap < cx->n_q) w->tcap = cx->n_q;
  init_arr(&w->a, w->cap, &w->ok);
  init_arr(&w->b, w->cap, &w->ok);
  init_arr(&w->s, w->cap, &w->ok);
  init_arr(&w->g, w->cap + 1, &w->ok);
  init_arr(&w->dterm, w->tcap, &w->ok);
  w->dptrs = xcalloc(w->tcap, sizeof(mpfr_ptr), &w->ok);
  w->eg = xcalloc(w->cap, sizeof(double), &w->ok);
  init_arr(&w->terms, w->tcap, &w->ok);
  init_arr(&w->o, w->d, &w->ok);
  init_arr(&w->dq, w->d, &w->ok);
  w->ptrs = xcalloc(w->tcap, sizeof(mpfr_ptr), &w->ok);
  w->eS = xcalloc(w->cap, sizeof(double), &w->ok);
  w->epsP = xcalloc(w->cap, sizeof(double), &w->ok);
  w->Pd = xcalloc(w->cap, sizeof(double), &w->ok);
  w->eDS = xcalloc(w->cap, sizeof(double), &w->ok);
  w->eo = xcalloc(w->d, sizeof(double), &w->ok);
  w->edq = xcalloc(w->d, sizeof(double), &w->ok);
  w->idx = xcalloc(w->cap, sizeof(size_t), &w->ok);
  w->kept = xcalloc(w->cap, 1, &w->ok);
  mpfr_inits2(64, w->sig, w->t1, w->t2, w->lse, w->D, w->Z, w->y, w->th, w->x1, w->x2, w->x3, w->x4, (mpfr_ptr)0);
  w->p = 0;
}

static void ws_free(ws_t *w) {
  clear_arr(w->a, w->cap);
  clear_arr(w->b, w->cap);
  clear_arr(w->s, w->cap);
  clear_arr(w->g, w->cap + 1);
  clear_arr(w->dterm, w->tcap);
  free(w->dptrs);
  free(w->eg);
  clear_arr(w->terms, w->tcap);
  clear_arr(w->o, w->d);
  clear_arr(w->dq, w->d);
  free(w->ptrs);
  free(w->eS);
  free(w->epsP);
  free(w->Pd);
  free(w->eDS);
  free(w->eo);
  free(w->edq);
  free(w->idx);
  free(w->kept);
  mpfr_clears(w->sig, w->t1, w->t2, w->lse, w->D, w->Z, w->y, w->th, w->x1, w->x2, w->x3, w->x4, (mpfr_ptr)0);
  mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
}

static void ws_set_prec(ws_t *w, const aa_or_ctx_t *cx, mpfr_prec_t p) {
  if (w->p == p) return;
  w->p = p;
  for (size_t i = 0; i < w->cap; i++) {
    mpfr_set_prec(w->a[i], p);
    mpfr_set_prec(w->b[i], p);
    mpfr_set_prec(w->s[i], p);
    mpfr_set_prec(w->g[i], p);
  }
  mpfr_set_prec(w->g[w->cap], p);
  for (size_t i = 0; i < w->tcap; i++)
    mpfr_set_prec(w->terms[i], 2 * p + 64);
  for (size_t i = 0; i < w->d; i++) {
    mpfr_set_prec(w->o[i], p);
    mpfr_set_prec(w->dq[i], p);
  }
  mpfr_set_prec(w->sig, p + 64);
  mpfr_set_prec(w->t1, p);
  mpfr_set_prec(w->t2, p + 64);
  mpfr_set_prec(w->lse, p + 64);
  mpfr_set_prec(w->D, p + 64);
  mpfr_set_prec(w->Z, p);
  mpfr_set_prec(w->y, p);
  mpfr_set_prec(w->th, p);
  mpfr_set_prec(w->x1, p);
  mpfr_set_prec(w->x2, p);
  mpfr_set_prec(w->x3, p);
  mpfr_set_prec(w->x4, p);
  for (size_t i = 0; i < w->tcap; i++)
    mpfr_set_prec(w->dterm[i], 2 * p + 64);
  if (cx->pb->scale_default) {
    mpfr_set_ui(w->sig, (unsigned long)cx->d, MPFR_RNDN);
    w->sig_rel = mpfr_rec_sqrt(w->sig, w->sig, MPFR_RNDN) != 0 ? ldexp(1.0, -(int)p - 64) : 0.0;
  } else {
    mpfr_set_d(w->sig, cx->pb->scale, MPFR_RNDN);
    w->sig_rel = 0;
  }
  w->sig_d = mpfr_get_d(w->sig, MPFR_RNDU);
}

static inline double absd(mpfr_srcptr x) {
  return fabs(mpfr_get_d(x, MPFR_RNDA));
}

/* Upward inflation of a double sum of n non-negative terms. */
static inline double infl(size_t n) {
  return 1.0 + ((double)n + 2.0) * 0x1p-52;
}

/* out = RN_p(sum_c x[c] y[c]) from exact products; returns the ternary value. */
static int dot_exact(ws_t *w, mpfr_ptr out, const double *x, const double *y, size_t n) {
  for (size_t c = 0; c < n; c++) {
    mpfr_set_d(w->terms[c], x[c], MPFR_RNDN);
    mpfr_mul_d(w->terms[c], w->terms[c], y[c], MPFR_RNDN);
    w->ptrs[c] = w->terms[c];
  }
  return mpfr_sum(out, w->ptrs, n, MPFR_RNDN);
}

/* Rounding error of one MPFR operation from its ternary value: 0 when exact
   (this keeps exact results, such as the single-key row of a causal mask,
   exact with a zero bound). */
#define ERR(inex, uu, x) ((inex) != 0 ? (uu)*absd(x) : 0.0)

/* relative error of exp(x^) (rounded, ternary inex) against exp(x), |x^ - x| <= e */
static inline double exp_eps(int inex, double u, double e) {
  return ((inex != 0 ? u * exp(e) : 0.0) + expm1(e)) * (1 + 0x1p-50);
}

/* Below this argument exp is under 2^-1074 (e^-(2^29) = 2^-7.7e8), yet still
   above MPFR's default underflow threshold (2^-(2^30)), so mpfr_exp never
   underflows on arguments at or above it. */
#define EXP_FLUSH (-(1L << 29))

/* out = exp(x^) with |x^ - x| <= e: returns its relative error against
   exp(x) and sets *pd to an upper bound of |out| for the error formulas.
   An argument below EXP_FLUSH (after its error) is flushed: out = +0 with
   *pd = 2^-1074 >= exp(x) and relative error 1, so every formula of the
   form eps P |y| bounds the lost term absolutely, where a relative bound
   of a rounding near MPFR's underflow threshold would hold nothing. */
static double exp_term(mpfr_ptr out, mpfr_srcptr x, double u, double e, double *pd) {
  if (mpfr_cmp_si(x, EXP_FLUSH) < 0 && e < 1) {
    mpfr_set_zero(out, 1);
    *pd = 0x1p-1074;
    return 1.0;
  }
  int ie = mpfr_exp(out, x, MPFR_RNDN);
  *pd = absd(out);
  return exp_eps(ie, u, e);
}

/* S = sigma q.k of (head h, query i, key j) into out with the score
   modifiers of problem.h, returns its bound; the softcap derivative goes
   to w->g[m] (relative error w->eg[m]). Softcap c: y = RN(S / c) with
   |y - s/c| <= e_y = e_S / c + rounding; tanh' <= 1, so RN(tanh y) is
   within e_y + rounding of tanh(s/c); g = RN(RN(sech y)^2), and since
   |d log sech / dy| = |tanh| <= 1, sech y is within relative expm1(e_y)
   of sech(s/c). The ALiBi bias slope * dist is exact at p + 64 >= 128 bits
   (53 + 32 bits), then added with one rounding; the attention bias and the
   logit offset are added after it with one rounding each. */
static double s_val(ws_t *w, const aa_or_ctx_t *cx, mpfr_ptr out, const double *q, const double *k, size_t h,
                    size_t i, size_t j, size_t m, double u) {
  const aa_problem_t *pb = cx->pb;
  int i1 = dot_exact(w, w->t1, q, k, cx->d);
  double et = ERR(i1, u, w->t1);
  int i2 = mpfr_mul(out, w->t1, w->sig, MPFR_RNDN);
  double e = 1.01 * (w->sig_d * et + w->sig_rel * absd(out) + ERR(i2, u, out));
  if (cx->cap > 0) {
    int i3 = mpfr_div_d(w->y, out, cx->cap, MPFR_RNDN);
    double ey = 1.01 * (e / cx->cap + ERR(i3, u, w->y));
    int i4 = mpfr_tanh(w->th, w->y, MPFR_RNDN);
    double eth = ey + ERR(i4, u, w->th);
    int i5 = mpfr_mul_d(out, w->th, cx->cap, MPFR_RNDN);
    e = 1.01 * cx->cap * eth + ERR(i5, u, out);
    int i6 = mpfr_sech(w->g[m], w->y, MPFR_RNDN);
    double rs = (i6 != 0 ? u : 0) + expm1(ey) * (1 + 0x1p-50);
    int i7 = mpfr_sqr(w->g[m], w->g[m], MPFR_RNDN);
    w->eg[m] = 1.01 * (2 * rs + (i7 != 0 ? u : 0));
  } else {
    mpfr_set_ui(w->g[m], 1, MPFR_RNDN);
    w->eg[m] = 0;
  }
  if (pb->alibi != AA_ALIBI_NONE) {
    mpfr_set_d(w->t2, pb->alibi_slopes[h], MPFR_RNDN);
    mpfr_mul_si(w->t2, w->t2, (long)aa_problem_alibi_dist(pb, i, j), MPFR_RNDN); /* exact */
    int i8 = mpfr_add(out, out, w->t2, MPFR_RNDN);
    e += ERR(i8, u, out);
  }
  if (aa_problem_has_bias(pb)) { /* the attention bias, then the logit offset (problem.h), each one rounding */
    int i9 = mpfr_add_d(out, out, aa_problem_bias(pb, h, i, j), MPFR_RNDN);
    e += ERR(i9, u, out);
    int i10 = mpfr_add_d(out, out, pb->logit_offset, MPFR_RNDN);
    e += ERR(i10, u, out);
  }
  return e;
}

/* dS of pair m times its softcap derivative g (when the problem has a softcap). */
static void ds_times_g(ws_t *w, const aa_or_ctx_t *cx, size_t m, double u) {
  if (!(cx->cap > 0)) return;
  double gd = absd(w->g[m]), bd = absd(w->b[m]);
  int i1 = mpfr_mul(w->b[m], w->b[m], w->g[m], MPFR_RNDN);
  w->eDS[m] = 1.01 * (gd * w->eDS[m] + w->eg[m] * gd * (bd + w->eDS[m])) + ERR(i1, u, w->b[m]);
}

/* dP' = ks dO_row . v_key for a kept pair, 0 for a dropped one, into out; returns its bound. */
static double dp_val(ws_t *w, mpfr_ptr out, const double *doi, const double *vj, int kept, const aa_or_ctx_t *cx,
                     double u) {
  if (!kept) {
    mpfr_set_zero(out, 1);
    return 0;
  }
  int i1 = dot_exact(w, out, doi, vj, cx->d);
  double e = ERR(i1, u, out);
  if (cx->ks == 1.0) return e;
  int i2 = mpfr_mul_d(out, out, cx->ks, MPFR_RNDN);
  return 1.01 * (cx->ks * e + ERR(i2, u, out));
}

/* dS = P (ks dO.v - D) into out for a kept/dropped pair; returns its bound. */
static double ds_val(ws_t *w, mpfr_ptr out, mpfr_srcptr P, double Pd, double epsP, const double *doi,
                     const double *vj, int kept, const aa_or_ctx_t *cx, double u) {
  double edp = dp_val(w, w->t1, doi, vj, kept, cx, u);
  int i3 = mpfr_sub(w->t1, w->t1, w->D, MPFR_RNDN);
  double dd = absd(w->t1), ediff = edp + w->e_D + ERR(i3, u, w->t1);
  int i4 = mpfr_mul(out, P, w->t1, MPFR_RNDN);
  return 1.01 * (Pd * ediff + epsP * Pd * (dd + ediff)) + ERR(i4, u, out);
}

/* dS of the dominant pair (query i of head h, key j, P_ij = Pj > 1/2: at
   most one per row) without the cancellation of dP'_j - D. When one key
   holds nearly all the weight, D = O.dO = sum_r P_r dP'_r is within
   (1 - P_j) of dP'_j, and the subtraction leaves u |D| of error on a
   result that can be smaller than anything p bits resolve (a row of logits
   1e14 apart: dS_j ~ e^-1e13). Since sum_r P_r + P_sinks = 1 exactly,
     dP'_j - D = sum_{r != j} P_r (dP'_j - dP'_r) + P_sinks dP'_j,
   a sum of small terms, each with a relative error (dP'_r = ks dO.v_r for
   kept keys, 0 for dropped ones, as in D). Recomputes the row's other
   logits and weights from the statistics in w->lse (bound w->e_lse); the
   softcap derivative is applied by the caller as for any pair. out gets
   P_j times the sum; returns its bound. Every double product of bounds
   near the subnormals is covered by the floor (n + 2) 2^-1070. */
static double ds_dominant(ws_t *w, const aa_or_ctx_t *cx, mpfr_ptr out, size_t h, size_t i, size_t j, mpfr_srcptr Pj,
                          double Pdj, double epsPj, double u) {
  const aa_problem_t *pb = cx->pb;
  size_t d = cx->d, nk = cx->n_k, g = h / cx->group, row = h * cx->n_q + i, n = 0, lo, hi;
  const double *qi = cx->q + row * d, *doi = cx->dO + row * d, *K = cx->k + g * nk * d, *V = cx->v + g * nk * d;
  const uint8_t *keep = pb->keep != NULL ? pb->keep + row * nk : NULL;
  double edj = dp_val(w, w->x1, doi, V + j * d, keep == NULL || keep[j] != 0, cx, u), dj = absd(w->x1), acc = 0;
  aa_problem_row_keys(pb, i, &lo, &hi);
  for (size_t r = lo; r < hi; r++) {
    if (r == j || !aa_problem_visible_h(pb, h, i, r)) continue;
    double eS = s_val(w, cx, w->x2, qi, K + r * d, h, i, r, w->cap, u);
    int ix = mpfr_sub(w->x2, w->x2, w->lse, MPFR_RNDN);
    double pd, eps = exp_term(w->x2, w->x2, u, eS + w->e_lse + ERR(ix, u, w->x2), &pd);
    double edr = dp_val(w, w->x3, doi, V + r * d, keep == NULL || keep[r] != 0, cx, u);
    int id = mpfr_sub(w->x3, w->x1, w->x3, MPFR_RNDN);
    double ed = edj + edr + ERR(id, u, w->x3), df = absd(w->x3);
    mpfr_mul(w->dterm[n], w->x2, w->x3, MPFR_RNDN); /* exact: 2p bits */
    w->dptrs[n] = w->dterm[n];
    n++;
    acc += 1.01 * (pd * ed + eps * pd * (df + ed));
  }
  for (size_t s = 0; s < cx->ns; s++) {
    int ix = mpfr_d_sub(w->x2, pb->sinks[h * cx->ns + s], w->lse, MPFR_RNDN);
    double pd, eps = exp_term(w->x2, w->x2, u, w->e_lse + ERR(ix, u, w->x2), &pd);
    mpfr_mul(w->dterm[n], w->x2, w->x1, MPFR_RNDN);
    w->dptrs[n] = w->dterm[n];
    n++;
    acc += 1.01 * (pd * edj + eps * pd * (dj + edj));
  }
  int iz = mpfr_sum(w->x4, w->dptrs, n, MPFR_RNDN);
  double es = acc * infl(n) + ERR(iz, u, w->x4) + (double)(n + 2) * 0x1p-1070, sd = absd(w->x4);
  int i4 = mpfr_mul(out, Pj, w->x4, MPFR_RNDN);
  return 1.01 * (Pdj * es + epsPj * Pdj * (sd + es)) + ERR(i4, u, out) + 0x1p-1070;
}

/* Replace pair m's dS (w->b[m], bound w->eDS[m]) by ds_dominant's when its
   weight is above 1/2 and that bound is smaller (both are certified). */
static void ds_refine(ws_t *w, const aa_or_ctx_t *cx, size_t m, size_t h, size_t i, size_t j, double u) {
  if (!(mpfr_cmp_d(w->a[m], 0.5) > 0)) return;
  double e = ds_dominant(w, cx, w->x4, h, i, j, w->a[m], w->Pd[m], w->epsP[m], u);
  if (!(e < w->eDS[m])) return;
  mpfr_set(w->b[m], w->x4, MPFR_RNDN); /* same precision p: exact */
  w->eDS[m] = e;
}

/* w->o[c] = ks sum over the kept terms r < w->m of P_r Y[idx_r, c] with
   its bound in w->eo[c] (O of a row with Y = V, dV of a column with Y =
   dO; idx_r is then the key or the query row of term r). */
static void kept_sum(ws_t *w, const aa_or_ctx_t *cx, size_t c, const double *Y, double u) {
  size_t n = 0, d = cx->d;
  double acc = 0, ks = cx->ks;
  for (size_t r = 0; r < w->m; r++) {
    if (!w->kept[r]) continue;
    double y = Y[w->idx[r] * d + c];
    mpfr_mul_d(w->terms[n], w->a[r], y, MPFR_RNDN);
    w->ptrs[n] = w->terms[n];
    acc += w->epsP[r] * w->Pd[r] * fabs(y);
    n++;
  }
  int i1 = mpfr_sum(w->o[c], w->ptrs, n, MPFR_RNDN), i2 = 0;
  double e1 = ERR(i1, u, w->o[c]);
  if (ks != 1.0) i2 = mpfr_mul_d(w->o[c], w->o[c], ks, MPFR_RNDN);
  w->eo[c] = 1.01 * ks * (acc * infl(n) + e1) + ERR(i2, u, w->o[c]);
}

/* sigma sum_r dS_r Y[idx_r][c] over the m pairs (dQ of a row with Y its keys, dK of a key with Y the queries)
   into w->dq[c], with its bound w->edq[c]; dS_r in w->b[r] with bound w->eDS[r]. */
static void ds_sum(ws_t *w, size_t c, const double *Y, size_t m, double u) {
  size_t d = w->d;
  double a2 = 0;
  for (size_t r = 0; r < m; r++) {
    double y = Y[w->idx[r] * d + c];
    mpfr_mul_d(w->terms[r], w->b[r], y, MPFR_RNDN);
    w->ptrs[r] = w->terms[r];
    a2 += w->eDS[r] * fabs(y);
  }
  int i1 = mpfr_sum(w->t1, w->ptrs, m, MPFR_RNDN);
  double e1 = ERR(i1, u, w->t1);
  int i2 = mpfr_mul(w->dq[c], w->t1, w->sig, MPFR_RNDN);
  w->edq[c] = 1.01 * (w->sig_d * (a2 * infl(m) + e1) + w->sig_rel * absd(w->dq[c])) + ERR(i2, u, w->dq[c]);
}

/* M = the largest of the row's m logits w->s and the sinks of head h
   (exactly: M has the logits' precision p >= 53). */
static void row_max(ws_t *w, const aa_or_ctx_t *cx, mpfr_ptr M, size_t h, size_t m) {
  mpfr_set_inf(M, -1);
  for (size_t r = 0; r < m; r++)
    if (mpfr_greater_p(w->s[r], M)) mpfr_set(M, w->s[r], MPFR_RNDN);
  for (size_t s = 0; s < cx->ns; s++)
    if (mpfr_cmp_d(M, cx->pb->sinks[h * cx->ns + s]) < 0) mpfr_set_d(M, cx->pb->sinks[h * cx->ns + s], MPFR_RNDN);
}

/* Row i of head h at precision p: LSE, O[c], D and, when full, dQ[c]. */
static void mp_row(ws_t *w, const aa_or_ctx_t *cx, size_t h, size_t i, mpfr_prec_t p, int full) {
  ws_set_prec(w, cx, p);
  const aa_problem_t *pb = cx->pb;
  const double u = ldexp(1.0, -(int)p), u64 = ldexp(u, -64);
  size_t g = h / cx->group, d = cx->d, nk = cx->n_k, row = h * cx->n_q + i;
  const double *qi = cx->q + row * d, *doi = cx->dO + row * d;
  const double *K = cx->k + g * nk * d, *V = cx->v + g * nk * d;
  const uint8_t *keep = pb->keep != NULL ? pb->keep + row * nk : NULL;
  size_t m = 0;
  for (size_t j = 0; j < nk; j++) {
    if (!aa_problem_visible_h(pb, h, i, j)) continue;
    w->eS[m] = s_val(w, cx, w->s[m], qi, K + j * d, h, i, j, m, u);
    w->idx[m] = j;
    w->kept[m] = keep != NULL ? keep[j] != 0 : 1;
    m++;
  }
  w->m = m;
  w->empty = m + cx->ns == 0;
  if (w->empty) {
    mpfr_set_inf(w->lse, -1);
    w->e_lse = 0;
    mpfr_set_zero(w->D, 1);
    w->e_D = 0;
    for (size_t c = 0; c < d; c++) {
      mpfr_set_zero(w->o[c], 1);
      mpfr_set_zero(w->dq[c], 1);
      w->eo[c] = w->edq[c] = 0;
    }
    return;
  }
  if (m + cx->ns == 1) {
    /* one term: LSE is that logit and P = 1, both exactly */
    if (m == 1) {
      mpfr_set(w->lse, w->s[0], MPFR_RNDN);
      w->e_lse = w->eS[0];
      mpfr_set_ui(w->a[0], 1, MPFR_RNDN);
      w->epsP[0] = 0;
      w->Pd[0] = 1;
    } else {
      mpfr_set_d(w->lse, pb->sinks[h * cx->ns], MPFR_RNDN);
      w->e_lse = 0;
    }
  } else {
    /* Z = sum exp(S - M) + sum exp(sink - M) for the largest logit M (an
       MPFR number, so the shift cancels exactly in LSE = M + log Z): no
       argument exceeds the error of its own logit, so nothing overflows
       whatever the scores' magnitude (exp(S) itself overflows MPFR's
       exponent range above S = 7.4e8). The term of M is exp(0) = 1, so
       Z >= 1 and each flushed term (exp_term) adds at most 2^-1074 to the
       relative error; the others: max term error + u for the rounded sum. */
    mpfr_ptr M = w->y;
    row_max(w, cx, M, h, m);
    double epsE = 0, flush = 0;
    for (size_t r = 0; r < m; r++) {
      int ix = mpfr_sub(w->t1, w->s[r], M, MPFR_RNDN);
      double pd, eps = exp_term(w->a[r], w->t1, u, w->eS[r] + ERR(ix, u, w->t1), &pd);
      if (mpfr_zero_p(w->a[r]))
        flush += pd;
      else
        epsE = fmax(epsE, eps);
      w->ptrs[r] = w->a[r];
    }
    for (size_t s = 0; s < cx->ns; s++) {
      int ix = mpfr_d_sub(w->t1, pb->sinks[h * cx->ns + s], M, MPFR_RNDN);
      double pd, eps = exp_term(w->terms[s], w->t1, u, ERR(ix, u, w->t1), &pd);
      if (mpfr_zero_p(w->terms[s]))
        flush += pd;
      else
        epsE = fmax(epsE, eps);
      w->ptrs[m + s] = w->terms[s];
    }
    int iz = mpfr_sum(w->Z, w->ptrs, m + cx->ns, MPFR_RNDN);
    double epsZ = (epsE + flush * 2 + (iz != 0 ? u : 0)) * 1.01;
    int il = mpfr_log(w->lse, w->Z, MPFR_RNDN); /* lse has p + 64 bits */
    double elog = ERR(il, u64, w->lse);
    int ia = mpfr_add(w->lse, w->lse, M, MPFR_RNDN);
    w->e_lse = 1.01 * epsZ + elog + ERR(ia, u64, w->lse);
    for (size_t r = 0; r < m; r++) {
      int ix = mpfr_sub(w->t1, w->s[r], w->lse, MPFR_RNDN);
      double ex = w->eS[r] + w->e_lse + ERR(ix, u, w->t1);
      w->epsP[r] = exp_term(w->a[r], w->t1, u, ex, &w->Pd[r]);
    }
  }
  /* O[c] = ks sum_{kept} P v */
  for (size_t c = 0; c < d; c++) {
    kept_sum(w, cx, c, V, u);
  }
  /* D = sum O dO */
  double acc = 0;
  for (size_t c = 0; c < d; c++) {
    mpfr_mul_d(w->terms[c], w->o[c], doi[c], MPFR_RNDN);
    w->ptrs[c] = w->terms[c];
    acc += w->eo[c] * fabs(doi[c]);
  }
  int idd = mpfr_sum(w->D, w->ptrs, d, MPFR_RNDN);
  w->e_D = acc * infl(d) + ERR(idd, u64, w->D);
  if (!full) return;
  for (size_t r = 0; r < m; r++) {
    w->eDS[r] = ds_val(w, w->b[r], w->a[r], w->Pd[r], w->epsP[r], doi, V + w->idx[r] * d, w->kept[r], cx, u);
    ds_refine(w, cx, r, h, i, w->idx[r], u);
    ds_times_g(w, cx, r, u);
  }
  for (size_t c = 0; c < d; c++)
    ds_sum(w, c, K, m, u);
}

/* Row statistics source for columns and sinks. With use_dd, rows that the
   row phase recomputed in MPFR (ref_have) take those statistics instead of
   the double-double ones: they are the rows where one key dominates and
   dP - D cancels, whose dd-accurate D would otherwise keep the columns of
   that key unsettled and escalate the statistics of every row. Mixing is
   sound: each row's statistics carry their own certified bounds. */
typedef struct {
  const aa_or_ctx_t *cx;
  int use_dd;
  aa_or_stats_t *st;        /* [heads] when !use_dd */
  const aa_or_stats_t *ref; /* [heads]: MPFR statistics of the rows the row phase recomputed, or NULL */
  const uint8_t *ref_have;  /* [heads * n_q] */
} src_t;

/* lse/D of row (h, i) into w->lse, w->D (precision p + 64) with bounds. */
static int get_stats(ws_t *w, const src_t *src, size_t h, size_t i) {
  const aa_or_ctx_t *cx = src->cx;
  size_t row = h * cx->n_q + i;
  if (src->use_dd && src->ref != NULL && src->ref_have[row]) {
    const aa_or_stats_t *s = &src->ref[h];
    if (s->empty[i]) return 0;
    /* rounded to this level's p + 64 bits: one more relative error 2^-(p+63) */
    mpfr_set(w->lse, s->lse[i], MPFR_RNDN);
    mpfr_set(w->D, s->dd[i], MPFR_RNDN);
    w->e_lse = s->e_lse[i] + ldexp(absd(w->lse), -(int)w->p - 63);
    w->e_D = s->e_d[i] + ldexp(absd(w->D), -(int)w->p - 63);
    return 1;
  }
  if (src->use_dd) {
    if (cx->row_empty[row]) return 0;
    mpfr_set_d(w->lse, cx->lse_h[row], MPFR_RNDN);
    mpfr_add_d(w->lse, w->lse, cx->lse_l[row], MPFR_RNDN);
    w->e_lse = cx->e_lse[row] + ldexp(absd(w->lse), -(int)w->p - 63);
    mpfr_set_d(w->D, cx->d_h[row], MPFR_RNDN);
    mpfr_add_d(w->D, w->D, cx->d_l[row], MPFR_RNDN);
    w->e_D = cx->e_d[row] + ldexp(absd(w->D), -(int)w->p - 63);
    return 1;
  }
  const aa_or_stats_t *s = &src->st[h];
  if (s->empty[i]) return 0;
  mpfr_set(w->lse, s->lse[i], MPFR_RNDN);
  mpfr_set(w->D, s->dd[i], MPFR_RNDN);
  w->e_lse = s->e_lse[i];
  w->e_D = s->e_d[i];
  return 1;
}

/* Column j of kv head g at precision p: dV[c] into w->o, dK[c] into w->dq. */
static void mp_col(ws_t *w, const src_t *src, size_t g, size_t j, mpfr_prec_t p) {
  const aa_or_ctx_t *cx = src->cx;
  ws_set_prec(w, cx, p);
  const aa_problem_t *pb = cx->pb;
  const double u = ldexp(1.0, -(int)p);
  size_t d = cx->d, nk = cx->n_k, m = 0;
  const double *kj = cx->k + (g * nk + j) * d, *vj = cx->v + (g * nk + j) * d;
  for (size_t hh = 0; hh < cx->group; hh++) {
    size_t h = g * cx->group + hh;
    for (size_t i = 0; i < cx->n_q; i++) {
      if (!aa_problem_visible_h(pb, h, i, j)) continue;
      size_t row = h * cx->n_q + i;
      if (!get_stats(w, src, h, i)) continue;
      double eS = s_val(w, cx, w->s[m], cx->q + row * d, kj, h, i, j, m, u);
      int ix = mpfr_sub(w->t1, w->s[m], w->lse, MPFR_RNDN);
      double ex = eS + w->e_lse + ERR(ix, u, w->t1);
      w->epsP[m] = exp_term(w->a[m], w->t1, u, ex, &w->Pd[m]);
      w->kept[m] = pb->keep != NULL ? pb->keep[row * nk + j] != 0 : 1;
      w->eDS[m] = ds_val(w, w->b[m], w->a[m], w->Pd[m], w->epsP[m], cx->dO + row * d, vj, w->kept[m], cx, u);
      ds_refine(w, cx, m, h, i, j, u);
      ds_times_g(w, cx, m, u);
      w->idx[m] = row;
      m++;
    }
  }
  w->m = m;
  for (size_t c = 0; c < d; c++) {
    kept_sum(w, cx, c, cx->dO, u); /* dV */
    ds_sum(w, c, cx->q, m, u);     /* dK */
  }
}

/* dsinks[h, s] = - sum_i exp(sink - LSE_i) D_i into w->Z (precision p) with bound w->e_D... returned. */
static double mp_sink(ws_t *w, const src_t *src, size_t h, size_t s, mpfr_prec_t p) {
  const aa_or_ctx_t *cx = src->cx;
  ws_set_prec(w, cx, p);
  const double u = ldexp(1.0, -(int)p);
  size_t n = 0;
  double acc = 0;
  for (size_t i = 0; i < cx->n_q; i++) {
    if (!get_stats(w, src, h, i)) continue;
    mpfr_set_d(w->t2, cx->pb->sinks[h * cx->ns + s], MPFR_RNDN);
    int ix = mpfr_sub(w->t1, w->t2, w->lse, MPFR_RNDN);
    double ex = w->e_lse + ERR(ix, u, w->t1);
    double pd, eps = exp_term(w->t1, w->t1, u, ex, &pd);
    mpfr_mul(w->terms[n], w->t1, w->D, MPFR_RNDN);
    w->ptrs[n] = w->terms[n];
    acc += pd * (eps * absd(w->D) + w->e_D) * 1.01;
    n++;
  }
  int iz = mpfr_sum(w->Z, w->ptrs, n, MPFR_RNDN);
  mpfr_neg(w->Z, w->Z, MPFR_RNDN);
  return acc * infl(n) + ERR(iz, u, w->Z);
}

static void stats_free(aa_or_stats_t *st, size_t heads, size_t n_q) {
  if (st == NULL) return;
  for (size_t h = 0; h < heads; h++) {
    if (st[h].lse != NULL) {
      for (size_t i = 0; i < n_q; i++) {
        mpfr_clear(st[h].lse[i]);
        mpfr_clear(st[h].dd[i]);
      }
    }
    free(st[h].lse);
    free(st[h].dd);
    free(st[h].e_lse);
    free(st[h].e_d);
    free(st[h].empty);
  }
  free(st);
}

static int stats_alloc(aa_or_stats_t *s, size_t n_q, mpfr_prec_t p) {
  int ok = 1;
  s->lse = xcalloc(n_q, sizeof(mpfr_t), &ok);
  s->dd = xcalloc(n_q, sizeof(mpfr_t), &ok);
  s->e_lse = xcalloc(n_q, sizeof(double), &ok);
  s->e_d = xcalloc(n_q, sizeof(double), &ok);
  s->empty = xcalloc(n_q, 1, &ok);
  if (!ok) {
    free(s->lse);
    free(s->dd);
    s->lse = s->dd = NULL;
    return 0;
  }
  for (size_t i = 0; i < n_q; i++) {
    mpfr_init2(s->lse[i], p + 64);
    mpfr_init2(s->dd[i], p + 64);
  }
  return 1;
}

static void stats_store(aa_or_stats_t *s, size_t i, const ws_t *w) {
  mpfr_set(s->lse[i], w->lse, MPFR_RNDN);
  mpfr_set(s->dd[i], w->D, MPFR_RNDN);
  s->e_lse[i] = w->e_lse;
  s->e_d[i] = w->e_D;
  s->empty[i] = (uint8_t)w->empty;
}

/* A worker's workspace inside a parallel region; a failed allocation
   clears the shared *ok (its loop iterations are then skipped via w->ok). */
static void ws_begin(ws_t *w, const aa_or_ctx_t *cx, int *ok) {
  ws_init(w, cx);
  if (!w->ok) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
    *ok = 0;
  }
}

static int any_todo(const aa_or_work_t *w, size_t off, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (w->todo[off + i]) return 1;
  return 0;
}

/* One resolve: the context, the choices every pass shares, and the work lists. */
typedef struct {
  aa_or_ctx_t *cx;
  int use_dd_stats, nt, ok; /* ok: cleared (atomically, ws_begin) when out of memory */
  size_t *rows, nrows;      /* rows with an O, LSE or dQ element todo */
  aa_or_stats_t *ref;       /* fast path: MPFR statistics of the recomputed rows (see src_t), or NULL */
  uint8_t *ref_have;
  size_t *cols, ncols, *sks, nsk; /* per level: key columns with dK or dV todo, sink gradients todo */
  uint8_t *need;                  /* [heads]: the columns or sinks of this level read head h's statistics */
  int level;
  src_t src;
} resolve_t;

typedef void (*item_fn)(ws_t *w, resolve_t *R, size_t idx);

/* item(idx) for idx < n over the threads, each with its own workspace (chunk: items taken at a time). The items
   write disjoint elements, so the results do not depend on the schedule. */
static void par_items(resolve_t *R, size_t n, int chunk, item_fn item) {
#ifdef _OPENMP
#pragma omp parallel num_threads(R->nt)
#endif
  {
    ws_t w;
    ws_begin(&w, R->cx, &R->ok);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, chunk)
#endif
    for (size_t i = 0; i < n; i++)
      if (w.ok) item(&w, R, i);
    ws_free(&w);
  }
}

/* Row rows[ri]: O, LSE and dQ escalating the precision until every todo element settles. */
static void row_item(ws_t *w, resolve_t *R, size_t ri) {
  aa_or_ctx_t *cx = R->cx;
  size_t r = R->rows[ri], h = r / cx->n_q, i = r % cx->n_q, d = cx->d;
  for (int l = 0; l < AA_OR_LEVELS; l++) {
    int final = l == AA_OR_LEVELS - 1, left = 0;
    mp_row(w, cx, h, i, (mpfr_prec_t)cx->prec << l, 1);
    if (l == 0 && !R->use_dd_stats) stats_store(&cx->stats[0][h], i, w);
    if (R->ref != NULL) { /* exact copy: ref holds 4 prec + 64 bits */
      stats_store(&R->ref[h], i, w);
      R->ref_have[r] = 1;
    }
    if (cx->w[AA_OR_LSE].todo[r]) {
      if (w->empty)
        aa_oracle_settle_empty_lse(cx, r);
      else
        left += !aa_oracle_settle_mp(cx, AA_OR_LSE, r, w->lse, w->e_lse, final);
    }
    for (size_t c = 0; c < d; c++) {
      if (cx->w[AA_OR_O].todo[r * d + c])
        left += !aa_oracle_settle_mp(cx, AA_OR_O, r * d + c, w->o[c], w->eo[c], final);
      if (cx->w[AA_OR_DQ].todo[r * d + c])
        left += !aa_oracle_settle_mp(cx, AA_OR_DQ, r * d + c, w->dq[c], w->edq[c], final);
    }
    if (!left) break;
  }
}

/* Room for the MPFR statistics of the rows the row pass recomputes, at the last level's precision (best effort:
   without the memory the columns use the dd statistics). */
static void ref_alloc(resolve_t *R) {
  aa_or_ctx_t *cx = R->cx;
  size_t H = cx->heads, nq = cx->n_q;
  R->ref = calloc(H, sizeof *R->ref);
  R->ref_have = calloc(H * nq + 1, 1);
  for (size_t h = 0; R->ref != NULL && R->ref_have != NULL && h < H; h++)
    if (!stats_alloc(&R->ref[h], nq, (mpfr_prec_t)cx->prec << (AA_OR_LEVELS - 1))) {
      stats_free(R->ref, H, nq);
      R->ref = NULL;
    }
  if (R->ref == NULL || R->ref_have == NULL) {
    stats_free(R->ref, H, nq);
    free(R->ref_have);
    R->ref = NULL;
    R->ref_have = NULL;
  }
}

/* Rows: O, LSE, dQ of every row with an element todo (every row on the mpfr path, whose level-0 statistics the
   columns then reuse). */
static void resolve_rows(resolve_t *R) {
  aa_or_ctx_t *cx = R->cx;
  size_t H = cx->heads, nq = cx->n_q, d = cx->d;
  R->rows = malloc((H * nq + 1) * sizeof(size_t));
  if (R->rows == NULL) R->ok = 0;
  for (size_t r = 0; R->ok && r < H * nq; r++)
    if (cx->w[AA_OR_LSE].todo[r] || any_todo(&cx->w[AA_OR_O], r * d, d) || any_todo(&cx->w[AA_OR_DQ], r * d, d))
      R->rows[R->nrows++] = r;
  if (!R->ok || R->nrows == 0) return;
  if (R->use_dd_stats) ref_alloc(R);
  for (size_t h = 0; !R->use_dd_stats && h < H; h++) {
    if (!stats_alloc(&cx->stats[0][h], nq, cx->prec))
      R->ok = 0;
    else
      cx->stats[0][h].ready = 1;
  }
  if (R->ok) par_items(R, R->nrows, 1, row_item);
}

/* The columns (dK, dV) and sink gradients still todo at this level, and the heads whose statistics they need;
   returns how many. */
static size_t level_todo(resolve_t *R) {
  aa_or_ctx_t *cx = R->cx;
  size_t nk = cx->n_k, d = cx->d;
  R->ncols = R->nsk = 0;
  memset(R->need, 0, cx->heads);
  for (size_t r = 0; r < cx->kvh * nk; r++)
    if (any_todo(&cx->w[AA_OR_DK], r * d, d) || any_todo(&cx->w[AA_OR_DV], r * d, d)) {
      R->cols[R->ncols++] = r;
      for (size_t hh = 0; hh < cx->group; hh++)
        R->need[(r / nk) * cx->group + hh] = 1;
    }
  for (size_t r = 0; r < cx->heads * cx->ns; r++)
    if (cx->w[AA_OR_DSINKS].todo[r]) {
      R->sks[R->nsk++] = r;
      R->need[r / cx->ns] = 1;
    }
  return R->ncols + R->nsk;
}

/* Row r's MPFR statistics at this level, where a needed head does not have them yet. */
static void stats_item(ws_t *w, resolve_t *R, size_t r) {
  aa_or_ctx_t *cx = R->cx;
  size_t h = r / cx->n_q, i = r % cx->n_q;
  int l = R->level;
  if (!R->need[h] || cx->stats[l][h].ready) return;
  mp_row(w, cx, h, i, (mpfr_prec_t)cx->prec << l, 0);
  stats_store(&cx->stats[l][h], i, w);
}

/* Item ci of this level: a key column (dK, dV) or, past the columns, a sink gradient. */
static void col_item(ws_t *w, resolve_t *R, size_t ci) {
  aa_or_ctx_t *cx = R->cx;
  size_t nk = cx->n_k, d = cx->d;
  mpfr_prec_t p = (mpfr_prec_t)cx->prec << R->level;
  int final = R->level == AA_OR_LEVELS - 1;
  if (ci >= R->ncols) {
    size_t r = R->sks[ci - R->ncols];
    double e = mp_sink(w, &R->src, r / cx->ns, r % cx->ns, p);
    aa_oracle_settle_mp(cx, AA_OR_DSINKS, r, w->Z, e, final);
    return;
  }
  size_t r = R->cols[ci];
  mp_col(w, &R->src, r / nk, r % nk, p);
  for (size_t c = 0; c < d; c++) {
    if (cx->w[AA_OR_DV].todo[r * d + c]) aa_oracle_settle_mp(cx, AA_OR_DV, r * d + c, w->o[c], w->eo[c], final);
    if (cx->w[AA_OR_DK].todo[r * d + c]) aa_oracle_settle_mp(cx, AA_OR_DK, r * d + c, w->dq[c], w->edq[c], final);
  }
}

/* Columns and sink gradients, escalating the statistics level by level (level 0 of the fast path takes its dd
   statistics, src_t). */
static void resolve_cols(resolve_t *R) {
  aa_or_ctx_t *cx = R->cx;
  size_t H = cx->heads, nq = cx->n_q;
  R->cols = malloc((cx->kvh * cx->n_k + 1) * sizeof(size_t));
  R->sks = malloc((H * cx->ns + 1) * sizeof(size_t));
  R->need = calloc(H + 1, 1);
  if (R->cols == NULL || R->sks == NULL || R->need == NULL) R->ok = 0;
  for (int l = 0; R->ok && l < AA_OR_LEVELS; l++) {
    mpfr_prec_t p = (mpfr_prec_t)cx->prec << l;
    if (level_todo(R) == 0) break;
    R->level = l;
    R->src = (src_t){cx, R->use_dd_stats && l == 0, cx->stats[l], R->ref, R->ref_have};
    if (!R->src.use_dd) {
      /* make sure the MPFR statistics of every needed head exist at this level */
      for (size_t h = 0; R->ok && h < H; h++)
        if (R->need[h] && !cx->stats[l][h].ready && !stats_alloc(&cx->stats[l][h], nq, p)) R->ok = 0;
      if (!R->ok) break;
      par_items(R, H * nq, 4, stats_item);
      for (size_t h = 0; h < H; h++)
        if (R->need[h]) cx->stats[l][h].ready = 1;
    }
    par_items(R, R->ncols + R->nsk, 1, col_item);
  }
}

int aa_oracle_mp_resolve(aa_or_ctx_t *cx, int use_dd_stats, aa_error_t *err) {
  resolve_t R = {.cx = cx, .use_dd_stats = use_dd_stats, .nt = cx->threads, .ok = 1};
  if (!mpfr_buildopt_tls_p()) R.nt = 1; /* MPFR without thread-local state is not thread-safe */
  if (use_dd_stats)
    for (int t = 0; t < AA_OR_NT; t++) {
      size_t n = cx->w[t].n, count = 0;
      const uint8_t *todo = cx->w[t].todo;
#pragma omp parallel for reduction(+ : count) num_threads(cx->threads) schedule(static) if (n >= ((size_t)1 << 16))
      for (size_t i = 0; i < n; i++)
        count += todo[i];
      cx->n_recomputed += count;
    }
  for (int l = 0; l < AA_OR_LEVELS; l++) {
    cx->stats[l] = calloc(cx->heads, sizeof(aa_or_stats_t));
    if (cx->stats[l] == NULL) R.ok = 0;
  }
  resolve_rows(&R);
  free(R.rows);
  resolve_cols(&R);
  free(R.cols);
  free(R.sks);
  free(R.need);
  stats_free(R.ref, cx->heads, cx->n_q);
  free(R.ref_have);
  for (int l = 0; l < AA_OR_LEVELS; l++) {
    stats_free(cx->stats[l], cx->heads, cx->n_q);
    cx->stats[l] = NULL;
  }
  if (!R.ok) return aa_error_set(err, AA_ENOMEM, "oracle: out of memory in the MPFR engine");
  return AA_OK;
}
