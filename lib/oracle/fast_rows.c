/* attnacc: the reference row-by-row kernel of the fast oracle path (before tiling), kept as a second algorithm for
 * tests and benchmarks. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "oracle-impl.h"

/* Bound bookkeeping: as the tiled kernel's (fast.c), except that each n-term sum sum_j c_j y_j (c dd, y a stored
   double) is one TwoProduct/TwoSum chain over all its terms (aa_or_kappa bound) while two plain doubles gather
   a = sum |c_hi y| and b = sum e_c |y|: the element's bound is b (1 + (n+2) 2^-52) + kappa(n) a, plus
   floor_unit (n+1) for anything below the normal range (flushed P < 2^-1019, subnormal low words). */

#include "fast-common.h"
#define U2 AA_OR_U2
#define BLK 256

/* infl, finish, exp_eps, span, exact_pair, dot_comp (aa_oracle_dot_plain: dot.c): fast-common.h; the visible-key
 * interval: aa_problem_row_keys */

/* a.b as a double-double with bound: exact when the spans allow it */
static inline aa_or_dd_t dot_dd(const double *a, const double *b, size_t n, int exact, double *bound) {
  if (exact) {
    aa_or_dd_t r = {aa_oracle_dot_plain(a, b, n), 0};
    *bound = 0;
    return r;
  }
  return dot_comp(a, b, n, bound);
}

/* acc[c] += sum_t (ch_t + cl_t) Y[idx_t][c], with a[c] += |ch_t Y|, b[c] += ec_t |Y|. */
TC static void acc_block(double *restrict s, double *restrict cc, double *restrict a, double *restrict b,
                         const double *restrict Y, const size_t *restrict idx, const double *restrict ch,
                         const double *restrict cl, const double *restrict ec, const uint8_t *restrict use, size_t nt,
                         size_t d) {
  for (size_t t = 0; t < nt; t++) {
    if (use != NULL && !use[t]) continue;
    const double *restrict y = Y + idx[t] * d;
    const double xh = ch[t], xl = cl[t], ex = ec[t];
#pragma omp simd
    for (size_t c = 0; c < d; c++) {
      double yy = y[c], p = xh * yy, e = fma(xh, yy, -p), l = xl * yy;
      double sv = s[c], ss = sv + p, bv = ss - sv, tt = (sv - (ss - bv)) + (p - bv);
      s[c] = ss;
      cc[c] += (tt + e) + l;
      a[c] += fabs(p);
      b[c] += ex * fabs(yy);
    }
  }
}

typedef struct {
  double *sh, *sl, *eS, *xh, *xl, *ex, *ph, *pl, *epsP, *eP, *ch, *cl, *ec, *gh, *gl, *eg;
  double *s, *cc, *a, *b, *s2, *cc2, *a2, *b2;
  double *rsh, *rsl, *res, *rxh, *rxl, *reh, *rel, *ree; /* one row of n_k */
  size_t *rows, *keys, *yidx;
  size_t *klist; /* the visible keys of one row, ascending (row_list) */
  uint8_t *kept;
  int ok;
} buf_t;

/* A thread's workspace (fast_kernel_t.ws_init): 0 when out of memory. */
static int buf_init(void *ws, const aa_or_ctx_t *cx, int phase) {
  buf_t *B = ws;
  size_t d = cx->d, nk = cx->n_k;
  (void)phase;
  memset(B, 0, sizeof *B);
  double **dv[] = {&B->sh,   &B->sl, &B->eS, &B->xh, &B->xl, &B->ex, &B->ph, &B->pl,
                   &B->epsP, &B->eP, &B->ch, &B->cl, &B->ec, &B->gh, &B->gl, &B->eg};
  B->ok = 1;
  for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++)
    if ((*dv[i] = malloc(BLK * sizeof(double))) == NULL) B->ok = 0;
  double **av[] = {&B->s, &B->cc, &B->a, &B->b, &B->s2, &B->cc2, &B->a2, &B->b2};
  for (size_t i = 0; i < sizeof av / sizeof av[0]; i++)
    if ((*av[i] = malloc((d + 1) * sizeof(double))) == NULL) B->ok = 0;
  double **rv[] = {&B->rsh, &B->rsl, &B->res, &B->rxh, &B->rxl, &B->reh, &B->rel, &B->ree};
  for (size_t i = 0; i < sizeof rv / sizeof rv[0]; i++)
    if ((*rv[i] = malloc((nk + 1) * sizeof(double))) == NULL) B->ok = 0;
  B->rows = malloc(BLK * sizeof(size_t));
  B->keys = malloc(BLK * sizeof(size_t));
  B->yidx = malloc(BLK * sizeof(size_t));
  B->kept = malloc(BLK);
  B->klist = malloc((nk + 1) * sizeof(size_t));
  if (!B->rows || !B->keys || !B->yidx || !B->kept || !B->klist) B->ok = 0;
  return B->ok;
}

static void buf_free(void *ws) {
  buf_t *B = ws;
  double *dv[] = {B->sh,  B->sl,  B->eS,  B->xh,  B->xl,  B->ex,  B->ph,  B->pl,  B->epsP, B->eP, B->ch,
                  B->cl,  B->ec,  B->s,   B->cc,  B->a,   B->b,   B->s2,  B->cc2, B->a2,   B->b2, B->rsh,
                  B->rsl, B->res, B->rxh, B->rxl, B->reh, B->rel, B->ree, B->gh,  B->gl,   B->eg};
  for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++)
    free(dv[i]);
  free(B->rows);
  free(B->keys);
  free(B->yidx);
  free(B->kept);
  free(B->klist);
}

/* The visible keys of query i of head h into B->klist, ascending; returns their count. Without a mask
   (problem.h aa_problem_has_mask) the interval of aa_problem_row_keys, else the keys in it that pass the mask. */
static size_t row_list(const aa_problem_t *pb, buf_t *B, size_t h, size_t i) {
  size_t lo, hi, m = 0;
  aa_problem_row_keys(pb, i, &lo, &hi);
  int masked = aa_problem_has_mask(pb);
  for (size_t j = lo; j < hi; j++)
    if (!masked || aa_problem_mask_ok(pb, h, i, j)) B->klist[m++] = j;
  return m;
}

static void acc_zero(double *s, double *cc, double *a, double *b, size_t d) {
  memset(s, 0, d * sizeof *s);
  memset(cc, 0, d * sizeof *cc);
  memset(a, 0, d * sizeof *a);
  memset(b, 0, d * sizeof *b);
}

/* S for pair t of the block: rows[t] = h n_q + i, keys[t] = g n_k + j. */
static void block_s(const aa_or_ctx_t *cx, const spans_t *sp, buf_t *B, size_t nb) {
  size_t d = cx->d;
  for (size_t t = 0; t < nb; t++) {
    size_t r = B->rows[t], kk = B->keys[t];
    double et;
    aa_or_dd_t tt =
        dot_dd(cx->q + r * d, cx->k + kk * d, d, exact_pair(sp->xq[r], sp->lq[r], sp->xk[kk], sp->lk[kk], d), &et);
    aa_or_dd_t S = tt.lo == 0 ? aa_or_dd_mul_d(cx->sig, tt.hi) : aa_or_dd_mul(cx->sig, tt);
    B->sh[t] = S.hi;
    B->sl[t] = S.lo;
    B->eS[t] = 1.01 * (cx->sig.hi * et + (cx->sig_rel + 5 * U2) * fabs(S.hi));
    if (cx->mod) { /* softcap, ALiBi (fast-common.h) */
      aa_or_dd_t g;
      score_mod(cx, r / cx->n_q, r % cx->n_q, kk % cx->n_k, &S, &B->eS[t], &g, &B->eg[t]);
      B->sh[t] = S.hi;
      B->sl[t] = S.lo;
      B->gh[t] = g.hi;
      B->gl[t] = g.lo;
    }
  }
}

/* P = exp(S - LSE_row) and, when want_ds, dS = P (dP - D_row) for the block. */
static void block_pairs(const aa_or_ctx_t *cx, const spans_t *sp, buf_t *B, size_t nb, int want_ds) {
  size_t d = cx->d;
  block_s(cx, sp, B, nb);
  for (size_t t = 0; t < nb; t++) {
    size_t r = B->rows[t];
    aa_or_dd_t S = {B->sh[t], B->sl[t]}, L = {cx->lse_h[r], cx->lse_l[r]};
    aa_or_dd_t x = aa_or_dd_add(S, aa_or_dd_neg(L));
    B->xh[t] = x.hi;
    B->xl[t] = x.lo;
    B->ex[t] = B->eS[t] + cx->e_lse[r] + 4 * U2 * (fabs(S.hi) + fabs(L.hi));
  }
  aa_oracle_dd_exp(B->ph, B->pl, B->xh, B->xl, nb, &cx->tab);
  for (size_t t = 0; t < nb; t++) {
    B->epsP[t] = exp_eps(B->xh[t], B->ex[t]);
    B->eP[t] = 1.01 * B->epsP[t] * B->ph[t];
  }
  if (!want_ds) return;
  const aa_problem_t *pb = cx->pb;
  for (size_t t = 0; t < nb; t++) {
    size_t r = B->rows[t], kk = B->keys[t], j = kk % cx->n_k;
    B->kept[t] = pb->keep != NULL ? pb->keep[r * cx->n_k + j] != 0 : 1;
    aa_or_dd_t dP = {0, 0};
    double edp = 0;
    if (B->kept[t]) {
      double et;
      dP = dot_dd(cx->dO + r * d, cx->v + kk * d, d, exact_pair(sp->xdo[r], sp->ldo[r], sp->xv[kk], sp->lv[kk], d),
                  &et);
      if (cx->ks != 1.0) {
        dP = aa_or_dd_mul(dP, (aa_or_dd_t){cx->ks, 0});
        edp = 1.01 * (cx->ks * et + 5 * U2 * fabs(dP.hi));
      } else {
        dP = aa_or_fast_two_sum(dP.hi, dP.lo);
        edp = et;
      }
    }
    aa_or_dd_t D = {cx->d_h[r], cx->d_l[r]};
    aa_or_dd_t df = aa_or_dd_add(dP, aa_or_dd_neg(D));
    double ediff = edp + cx->e_d[r] + 4 * U2 * (fabs(dP.hi) + fabs(D.hi));
    aa_or_dd_t P = {B->ph[t], B->pl[t]};
    aa_or_dd_t dS = aa_or_dd_mul(P, df);
    B->ch[t] = dS.hi;
    B->cl[t] = dS.lo;
    B->ec[t] = 1.01 * (P.hi * ediff + B->epsP[t] * P.hi * (fabs(df.hi) + ediff)) + 5 * U2 * fabs(dS.hi);
    if (cx->cap > 0) ds_times_g(&B->ch[t], &B->cl[t], &B->ec[t], (aa_or_dd_t){B->gh[t], B->gl[t]}, B->eg[t]);
  }
}

/* Forward of row r = h n_q + i: LSE, O, D. */
static void fwd_row(aa_or_ctx_t *cx, const spans_t *sp, buf_t *B, size_t r, mpfr_t mz, mpfr_t ml) {
  const aa_problem_t *pb = cx->pb;
  size_t h = r / cx->n_q, i = r % cx->n_q, g = h / cx->group, d = cx->d;
  size_t m = row_list(pb, B, h, i);
  const size_t *kl = B->klist;
  cx->row_empty[r] = m + cx->ns == 0;
  if (m + cx->ns == 0) {
    row_empty_fwd(cx, r);
    return;
  }
  /* pass 1: the S row */
  for (size_t j0 = 0; j0 < m; j0 += BLK) {
    size_t nb = m - j0 < BLK ? m - j0 : BLK;
    for (size_t t = 0; t < nb; t++) {
      B->rows[t] = r;
      B->keys[t] = g * cx->n_k + kl[j0 + t];
    }
    block_s(cx, sp, B, nb);
    for (size_t t = 0; t < nb; t++) {
      B->rsh[j0 + t] = B->sh[t];
      B->rsl[j0 + t] = B->sl[t];
      B->res[j0 + t] = B->eS[t];
    }
  }
  /* pass 2: E = exp(S - M), Z, LSE, 1/Z (row_norm, fast-common.h) */
  srow_t R = {B->rsh, B->rsl, B->res, B->rxh, B->rxl, B->reh, B->rel, B->ree};
  double pz;
  aa_or_dd_t iz = row_norm(cx, h, r, m, &R, mz, ml, &pz);
  /* pass 3: P = E / Z, O = ks sum_kept P v */
  const double *V = cx->v + g * cx->n_k * d;
  acc_zero(B->s, B->cc, B->a, B->b, d);
  size_t nkept = 0;
  for (size_t j0 = 0; j0 < m; j0 += BLK) {
    size_t nb = m - j0 < BLK ? m - j0 : BLK;
    for (size_t t = 0; t < nb; t++) {
      size_t j = j0 + t;
      aa_or_dd_t P = aa_or_dd_mul((aa_or_dd_t){B->reh[j], B->rel[j]}, iz);
      B->ch[t] = P.hi;
      B->cl[t] = P.lo;
      B->ec[t] = 1.01 * (B->ree[j] + pz + 5 * U2) * P.hi;
      B->kept[t] = pb->keep != NULL ? pb->keep[r * cx->n_k + kl[j]] != 0 : 1;
      B->yidx[t] = kl[j];
      nkept += B->kept[t];
    }
    acc_block(B->s, B->cc, B->a, B->b, V, B->yidx, B->ch, B->cl, B->ec, pb->keep != NULL ? B->kept : NULL, nb, d);
  }
  o_and_d(cx, r, B->s, B->cc, B->a, B->b, 1.0, nkept); /* b times 1: exact */
}

/* dQ of row r. */
static void dq_row(aa_or_ctx_t *cx, const spans_t *sp, buf_t *B, size_t r) {
  size_t h = r / cx->n_q, i = r % cx->n_q, g = h / cx->group, d = cx->d;
  size_t m = row_list(cx->pb, B, h, i);
  const double *K = cx->k + g * cx->n_k * d;
  acc_zero(B->s, B->cc, B->a, B->b, d);
  for (size_t j0 = 0; j0 < m; j0 += BLK) {
    size_t nb = m - j0 < BLK ? m - j0 : BLK;
    for (size_t t = 0; t < nb; t++) {
      B->rows[t] = r;
      B->keys[t] = g * cx->n_k + B->klist[j0 + t];
      B->yidx[t] = B->klist[j0 + t];
    }
    block_pairs(cx, sp, B, nb, 1);
    acc_block(B->s, B->cc, B->a, B->b, K, B->yidx, B->ch, B->cl, B->ec, NULL, nb, d);
  }
  for (size_t c = 0; c < d; c++)
    finish(cx, AA_OR_DQ, r * d + c, B->s[c], B->cc[c], B->a[c], B->b[c], m, cx->sig, cx->sig_rel, NULL, NULL, NULL);
}

/* dK and dV of key column kk = g n_k + j. */
static void kv_col(aa_or_ctx_t *cx, const spans_t *sp, buf_t *B, size_t kk) {
  const aa_problem_t *pb = cx->pb;
  size_t g = kk / cx->n_k, j = kk % cx->n_k, d = cx->d, nvis = 0, nkept = 0;
  size_t ilo, ihi;
  aa_problem_col_queries(pb, j, &ilo, &ihi);
  acc_zero(B->s, B->cc, B->a, B->b, d);     /* dK */
  acc_zero(B->s2, B->cc2, B->a2, B->b2, d); /* dV */
  for (size_t hh = 0; hh < cx->group; hh++) {
    size_t h = g * cx->group + hh, nb = 0;
    for (size_t i = ilo; i <= ihi; i++) {
      if (i < ihi && aa_problem_visible_h(pb, h, i, j)) {
        B->rows[nb] = h * cx->n_q + i;
        B->keys[nb] = kk;
        B->yidx[nb] = h * cx->n_q + i;
        nb++;
      }
      if (nb == BLK || (i == ihi && nb > 0)) {
        block_pairs(cx, sp, B, nb, 1);
        acc_block(B->s, B->cc, B->a, B->b, cx->q, B->yidx, B->ch, B->cl, B->ec, NULL, nb, d);
        acc_block(B->s2, B->cc2, B->a2, B->b2, cx->dO, B->yidx, B->ph, B->pl, B->eP,
                  pb->keep != NULL ? B->kept : NULL, nb, d);
        nvis += nb;
        for (size_t t = 0; t < nb; t++)
          nkept += B->kept[t];
        nb = 0;
      }
    }
  }
  aa_or_dd_t ksd = {cx->ks, 0};
  for (size_t c = 0; c < d; c++) {
    finish(cx, AA_OR_DK, kk * d + c, B->s[c], B->cc[c], B->a[c], B->b[c], nvis, cx->sig, cx->sig_rel, NULL, NULL,
           NULL);
    finish(cx, AA_OR_DV, kk * d + c, B->s2[c], B->cc2[c], B->a2[c], B->b2[c], nkept, ksd, 0, NULL, NULL, NULL);
  }
}

/* dsinks[h, s] = - sum_i exp(sink - LSE_i) D_i, in row order. */
static void sink_grad(aa_or_ctx_t *cx, size_t h, size_t s) {
  double sink = cx->pb->sinks[h * cx->ns + s], zs = 0, zc = 0, a = 0, b = 0;
  size_t n = 0;
  for (size_t i = 0; i < cx->n_q; i++) {
    size_t r = h * cx->n_q + i;
    if (cx->row_empty[r]) continue;
    double eT;
    aa_or_dd_t T = sink_term(cx, sink, r, &eT);
    aa_or_dd_t t2 = aa_or_two_sum(zs, T.hi);
    zs = t2.hi;
    zc += t2.lo + T.lo;
    a += fabs(T.hi);
    b += eT;
    n++;
  }
  finish(cx, AA_OR_DSINKS, h * cx->ns + s, -zs, -zc, a, b, n, (aa_or_dd_t){1, 0}, 0, NULL, NULL, NULL);
}

/* The kernel for aa_oracle_fast_drive: phases 0 and 1 by query rows, phase 2 by key columns. */
static size_t rows_items(const aa_or_ctx_t *cx, int phase) {
  return phase == 2 ? cx->kvh * cx->n_k : cx->heads * cx->n_q;
}

static void rows_item(aa_or_ctx_t *cx, const void *data, void *ws, int phase, size_t r, mpfr_ptr mz, mpfr_ptr ml) {
  const spans_t *sp = data;
  if (phase == 0)
    fwd_row(cx, sp, ws, r, mz, ml);
  else if (phase == 1)
    dq_row(cx, sp, ws, r);
  else
    kv_col(cx, sp, ws, r);
}

int aa_oracle_fast_run_rows(aa_or_ctx_t *cx, aa_error_t *err) {
  spans_t sp;
  int ok = fast_begin(cx, &sp);
  fast_kernel_t K = {&sp, 8, rows_items, sizeof(buf_t), buf_init, buf_free, rows_item, sink_grad, NULL};
  int st = aa_oracle_fast_drive(cx, &K, ok, err);
  spans_free(&sp);
  return st;
}

/* The rows of a redo (aa_oracle_fast_rows_redo): the spans and the listed own rows. */
typedef struct {
  const spans_t *sp;
  const size_t *list;
} redo_t;

static void redo_item(aa_or_ctx_t *cx, const void *data, void *ws, int phase, size_t i, mpfr_ptr mz, mpfr_ptr ml) {
  const redo_t *R = data;
  rows_item(cx, R->sp, ws, phase, R->list[i], mz, ml);
}

int aa_oracle_fast_rows_redo(aa_or_ctx_t *cx, const void *spans, int phase, const size_t *list, size_t n) {
  redo_t R = {spans, list};
  fast_kernel_t K = {&R, 1, rows_items, sizeof(buf_t), buf_init, buf_free, redo_item, sink_grad, NULL};
  return aa_oracle_fast_phase(cx, &K, phase, n);
}
