/* attnacc: the emulated backward's elements (P and dS of a pair, dK/dV of a key column, dQ of a query column),
 * written once for the CPU (host threads) and the GPU (CUDA). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ATTN_BWD_CORE_H
#define AA_ATTN_BWD_CORE_H

/* backward.c walks KV heads, q heads, q tiles and key tiles; every output element there is one chain of products in
   a fixed order, and the only shared intermediates are P and dS of each (query, key) pair. So the GPU emulation
   (lib/attn/cuda_bwd.c decides what it runs) computes in three passes what backward.c computes, with the same
   operations in the same order: every pair's P (for dV) and dS (aa_core_bwd_pair), then every dV and dK element
   walking the q tiles in backward.c's order (aa_core_bwd_kv), then every dQ element walking the key tiles
   (aa_core_bwd_dq). D = rowsum(dO o O) comes from the host (backward.c's own function). The two-pass softmax adds
   a pass before the pairs, each row's max and sum (aa_core_bwd_stats); D = rowsum(P o dP) one after them, each row's
   D and then its dS (aa_core_bwd_ds_row). */
#include "attn-core.h"

/* Everything the three passes read and write, host or device pointers. */
typedef struct {
  const float *Q, *K, *V, *dO; /* [heads][n_q][d], [kv_heads][n_k][d], [heads][n_q][d]: exact in FP32 */
  const float *LSE, *D;        /* [heads][n_q] */
  const int64_t *lo, *hi;      /* [n_q]: row i sees keys [lo[i], hi[i]) */
  const unsigned char *seen;   /* [nqt][nkt]: 1 when the (q tile, key tile) pair is computed (bwd.skip_masked) */
  float *Pdv, *dS;             /* [heads][n_q][n_k]: each pair's P for dV and dS (pairs of skipped tiles unset) */
  float *dQ, *dK, *dV;         /* outputs: [heads][n_q][d], [kv_heads][n_k][d], rounded to io */
  unsigned *bad;               /* set when a pair holds a non-finite value: the host redoes the backward */
  unsigned long long *doubt;   /* [doubt_cap]: pairs (h n_q + i) n_k + j whose libm exp was too close to call */
  unsigned long long *ndoubt;  /* their count (may exceed doubt_cap: then the CPU runs the backward) */
  size_t doubt_cap;
  int doubt_log2;    /* aa_core_libm's margin; below 0: no check (the host's redo) */
  int sm90, natural; /* the weights' exp: the sm90 exp2 model, else the exact exp (exp when natural) */
  int ds_scale;      /* bwd.ds_scale: 0 off, 1 on (the ds_fmt dS times scale, rounded again), 2 fused */
  size_t n_q, n_k, d, heads, group;
  size_t tq, tk, nqt, nkt; /* backward.c's tiles (sub = tk, one section) */
  int q_desc;              /* bwd.q_order = desc */
  int scale_s, mulsub;     /* scale_fold = s; exp_form = exp2-mul-sub (else exp2-fma) */
  int pds_fmt, pdv_fmt, ds_fmt, io_fmt;
  int gqa_sum;        /* bwd.gqa_reduce = sum-rounded */
  int dk_end, dq_end; /* bwd.dk_scale, bwd.dq_scale = end */
  int tc[5][3];       /* bk, fb, ob of bwd.acc_qk, acc_dp, acc_dv, acc_dk, acc_dq (bk = 0: fp32-seq) */
  double c, scale, l2e, dq_mul;
  /* fwd.softmax = two-pass with bwd.twopass_p = saved (P recomputed by the two-pass row) and bwd.d_source = p-dp (D
     from the pairs), each with one key tile; dP rounded to bwd.dp_fmt */
  int twopass, pdp, dp_fmt;
  aa_core_fwd_t tp; /* two-pass: the forward's row parameters with the backward's scores (aa_core_tp_stats) */
  float *ML;        /* two-pass: [heads][n_q][2], each row's max and sum (aa_core_bwd_stats) */
  unsigned char
      *rdoubt; /* two-pass: [heads][n_q], 1 where a row's sum met a doubtful libm value: the host redoes it */
  float *Pds;  /* p-dp: [heads][n_q][n_k], each pair's P for dS; dS holds dP until aa_core_bwd_ds_row */
} aa_core_bwd_t;

enum { AA_CORE_QK = 0, AA_CORE_DP, AA_CORE_DV, AA_CORE_DK, AA_CORE_DQ };

/* aa_core_tc with strided a: the same blocks (gathered, at most 32 terms each) or the same FMA chain. */
static inline AA_HD float aa_core_tc_strided(float acc, const float *a, size_t as, const float *b, size_t bs,
                                             size_t n, const int *m) {
  if (m[0] == 0) {
    for (size_t k = 0; k < n; k++)
      acc = aa_seq32_step(acc, a[k * as], b[k * bs]);
    return acc;
  }
  float ta[32], tb[32];
  for (size_t k0 = 0; k0 < n; k0 += (size_t)m[0]) {
    size_t nb = n - k0 < (size_t)m[0] ? n - k0 : (size_t)m[0];
    for (size_t k = 0; k < nb; k++)
      ta[k] = a[(k0 + k) * as], tb[k] = b[(k0 + k) * bs];
    acc = aa_tc_block(acc, ta, tb, 1, nb, m[1], m[2]);
  }
  return acc;
}

static inline AA_HD int aa_core_finite(float x) {
  return (aa_core_f2u(x) & 0x7f800000u) != 0x7f800000u;
}

/* One more doubtful pair in the list (an atomic add on either side). */
static inline AA_HD void aa_core_bwd_doubt(const aa_core_bwd_t *p, unsigned long long pair) {
#ifdef __CUDA_ARCH__
  unsigned long long k = atomicAdd(p->ndoubt, 1ULL);
#else
  unsigned long long k = __atomic_fetch_add(p->ndoubt, 1ULL, __ATOMIC_RELAXED);
#endif
  if (k < p->doubt_cap) p->doubt[k] = pair;
}

/* backward.c pair_ds's dS = (dP - D) P in ds_fmt, with bwd.ds_scale. */
static inline AA_HD float aa_core_bwd_ds(const aa_core_bwd_t *p, float dp, double D, float pds) {
  double t0 = aa_core_r32((double)dp - D), x = aa_core_r32(t0 * pds);
  if (p->ds_scale == 2) x = aa_core_r32(x * p->scale); /* fused: the FP32 dS times the scale, one cast */
  float ds = aa_core_rnd16((float)x, p->ds_fmt);
  if (p->ds_scale == 1) ds = aa_core_rnd16((float)aa_core_r32((double)ds * p->scale), p->ds_fmt);
  return ds;
}

/* backward.c pair_p with the two-pass softmax: the forward's P of the pair (row, key k) from the row's max and sum
   (aa_core_bwd_stats); *s: the score of a visible key. */
static inline AA_HD double aa_core_bwd_tp_p(const aa_core_bwd_t *p, size_t row, const float *q, const float *k,
                                            int vis, double *s, int *doubt) {
  double m = p->ML[2 * row], l = p->ML[2 * row + 1], e = 0;
  if (m == -INFINITY) return 0; /* an empty row: P = 0, no division */
  if (vis) *s = aa_core_score(&p->tp, q, k), e = aa_core_tp_weight(&p->tp, doubt, *s, aa_core_r32(m * p->tp.c));
  return aa_core_tp_p(&p->tp, e, l);
}

/* backward.c pair_p, pair_dp and pair_ds for query row i of head h and key j: P recomputed from the LSE (bwd.exp =
   ex2-sm90, or the exact exp rounded to FP32) or by the two-pass row, dP = dO V^T in dp_fmt, dS = (dP - D) P in
   ds_fmt: *pdv, *ds and P for dS *pds; with p-dp *ds is dP (aa_core_bwd_ds_row forms dS). Returns 1 when a value is
   not finite; sets *doubt when the exact exp's rounding was too close to call. */
static inline AA_HD int aa_core_bwd_vals(const aa_core_bwd_t *p, size_t h, size_t i, size_t j, float *pdv, float *ds,
                                         float *pds, int *doubt) {
  size_t d = p->d, g = h / p->group, row = h * p->n_q + i;
  const float *q = p->Q + row * d, *k = p->K + (g * p->n_k + j) * d;
  const float *o = p->dO + row * d, *v = p->V + (g * p->n_k + j) * d;
  double L = p->LSE[row], pr = 0, s = 0;
  int vis = (int64_t)j >= p->lo[i] && (int64_t)j < p->hi[i];
  if (p->twopass) {
    pr = aa_core_bwd_tp_p(p, row, q, k, vis, &s, doubt);
  } else if (L != -INFINITY && vis) {
    double bb = p->natural ? L : aa_core_r32(L * p->l2e);
    s = aa_core_tc(0.0f, q, k, 1, d, p->tc[AA_CORE_QK][0], p->tc[AA_CORE_QK][1], p->tc[AA_CORE_QK][2]);
    if (p->scale_s) s = aa_core_r32(s * p->scale);
    double a = p->mulsub ? aa_core_r32(aa_core_r32(s * p->c) - bb) : (double)fmaf((float)s, (float)p->c, (float)-bb);
    if (p->sm90)
      pr = (double)aa_core_exp2f((float)a);
    else if (p->doubt_log2 >= 0)
      pr = aa_core_r32(aa_core_libm(p->natural, a, p->doubt_log2, doubt));
    else
      pr = aa_core_r32(p->natural ? exp(a) : exp2(a));
  }
  *pds = aa_core_rnd16((float)pr, p->pds_fmt);
  float dp = aa_core_tc(0.0f, o, v, 1, d, p->tc[AA_CORE_DP][0], p->tc[AA_CORE_DP][1], p->tc[AA_CORE_DP][2]);
  dp = aa_core_rnd16(dp, p->dp_fmt);
  *ds = p->pdp ? dp : aa_core_bwd_ds(p, dp, p->D[row], *pds);
  *pdv = aa_core_rnd16((float)pr, p->pdv_fmt);
  return !aa_core_finite((float)s) || !aa_core_finite((float)pr) || !aa_core_finite(dp) || !aa_core_finite(*ds);
}

/* The pair (h, i, j) into Pdv and dS, unless backward.c skips its tile; a non-finite value sets *bad (backward.c
   records the first one: the host redoes the whole backward), a doubtful exp lists the pair for the host. */
static inline AA_HD void aa_core_bwd_pair(const aa_core_bwd_t *p, size_t h, size_t i, size_t j) {
  size_t x = (h * p->n_q + i) * p->n_k + j;
  int doubt = 0;
  float pds;
  if (!p->seen[(i / p->tq) * p->nkt + j / p->tk]) return;
  if (aa_core_bwd_vals(p, h, i, j, p->Pdv + x, p->dS + x, p->Pds != NULL ? p->Pds + x : &pds, &doubt)) *p->bad = 1;
  if (doubt && p->doubt_log2 >= 0) aa_core_bwd_doubt(p, (unsigned long long)x);
}

/* The two-pass row statistics backward.c pair_p recomputes (common.c aa_attn_twopass_row over the one key tile) of
   row i of head h into ML; a doubtful libm value flags the row for the host. */
static inline AA_HD void aa_core_bwd_stats(const aa_core_bwd_t *p, size_t h, size_t i) {
  size_t row = h * p->n_q + i;
  double m, l;
  int doubt = 0;
  aa_core_tp_stats(&p->tp, h, i, &m, &l, &doubt);
  p->ML[2 * row] = (float)m, p->ML[2 * row + 1] = (float)l;
  if (doubt && p->doubt_log2 >= 0) p->rdoubt[row] = 1;
}

/* A flagged two-pass row again (the host's redo, with the CPU's libm): its statistics, then its pairs into pdv, ds
   and pds (n_k each, the row's slices). Returns 1 when a value is not finite. */
static inline AA_HD int aa_core_bwd_tp_row(const aa_core_bwd_t *p, size_t h, size_t i, float *pdv, float *ds,
                                           float *pds) {
  int doubt = 0, bad = 0;
  aa_core_bwd_stats(p, h, i);
  if (!p->seen[(i / p->tq) * p->nkt]) return 0;
  for (size_t j = 0; j < p->n_k; j++)
    bad |= aa_core_bwd_vals(p, h, i, j, pdv + j, ds + j, pds + j, &doubt);
  return bad;
}

/* backward.c pair_ds with bwd.d_source = p-dp (one key tile): D = rowsum(P dP) of row i over the keys in order in
   FP32, then each pair's dS from its dP (held in dS) and P. */
static inline AA_HD void aa_core_bwd_ds_row(const aa_core_bwd_t *p, size_t h, size_t i) {
  size_t nk = p->n_k, row = h * p->n_q + i;
  float *dS = p->dS + row * nk;
  const float *P = p->Pds + row * nk;
  double D = 0;
  if (!p->seen[(i / p->tq) * p->nkt]) return;
  for (size_t j = 0; j < nk; j++)
    D = aa_core_r32(D + aa_core_r32((double)P[j] * dS[j]));
  for (size_t j = 0; j < nk; j++) {
    dS[j] = aa_core_bwd_ds(p, dS[j], D, P[j]);
    if (!aa_core_finite(dS[j])) *p->bad = 1;
  }
}

/* The final dK/dV value of an accumulator (backward.c finish_kv without dropout): scale, then io. */
static inline AA_HD float aa_core_bwd_fin(const aa_core_bwd_t *p, float x, int kscale) {
  double y = kscale && p->dk_end ? aa_core_r32((double)x * p->scale) : (double)x;
  return aa_core_rnd16((float)y, p->io_fmt);
}

/* dV and dK of key j, column c of KV head g: backward.c bwd_section with bwd.dkv_accumulate = chain, one section:
   each q head of the group, its q tiles in bwd.q_order, each computed pair's rows chained into the FP32
   accumulators (the tile's rows as the product's k); sum-rounded GQA finishes each head and sums in FP32. */
static inline AA_HD void aa_core_bwd_kv(const aa_core_bwd_t *p, size_t g, size_t j, size_t c) {
  size_t d = p->d, nk = p->n_k, kt = j / p->tk;
  float ak = 0, av = 0, gk = 0, gv = 0;
  for (size_t hh = 0; hh < p->group; hh++) {
    size_t h = g * p->group + hh;
    for (size_t tt = 0; tt < p->nqt; tt++) {
      size_t t = p->q_desc ? p->nqt - 1 - tt : tt, i0 = t * p->tq;
      size_t rows = p->n_q - i0 < p->tq ? p->n_q - i0 : p->tq, r0 = h * p->n_q + i0;
      if (!p->seen[t * p->nkt + kt]) continue;
      av = aa_core_tc_strided(av, p->Pdv + r0 * nk + j, nk, p->dO + r0 * d + c, d, rows, p->tc[AA_CORE_DV]);
      ak = aa_core_tc_strided(ak, p->dS + r0 * nk + j, nk, p->Q + r0 * d + c, d, rows, p->tc[AA_CORE_DK]);
    }
    if (p->gqa_sum) { /* backward.c gqa_fold */
      float k = aa_core_bwd_fin(p, ak, 1), v = aa_core_bwd_fin(p, av, 0);
      gk = hh == 0 ? k : gk + k, gv = hh == 0 ? v : gv + v;
      ak = av = 0;
    }
  }
  size_t x = (g * nk + j) * d + c;
  p->dK[x] = p->gqa_sum ? aa_core_rnd16(gk, p->io_fmt) : aa_core_bwd_fin(p, ak, 1);
  p->dV[x] = p->gqa_sum ? aa_core_rnd16(gv, p->io_fmt) : aa_core_bwd_fin(p, av, 0);
}

/* dQ of query row i, column c of head h: backward.c bwd_q_tile with dq_reduce = fp32-ordered: each computed key
   tile's partial (a fresh product over its keys), added in ascending order in FP32; then finish_dq. */
static inline AA_HD void aa_core_bwd_dq(const aa_core_bwd_t *p, size_t h, size_t i, size_t c) {
  size_t d = p->d, nk = p->n_k, g = h / p->group, row = h * p->n_q + i, t = i / p->tq;
  float acc = 0;
  for (size_t kt = 0; kt < p->nkt; kt++) {
    size_t j0 = kt * p->tk, tkc = nk - j0 < p->tk ? nk - j0 : p->tk;
    if (!p->seen[t * p->nkt + kt]) continue;
    float part =
        aa_core_tc_strided(0.0f, p->dS + row * nk + j0, 1, p->K + (g * nk + j0) * d + c, d, tkc, p->tc[AA_CORE_DQ]);
    acc = acc + part;
  }
  double v = p->dq_end ? aa_core_r32((double)acc * p->dq_mul) : (double)acc;
  p->dQ[row * d + c] = aa_core_rnd16((float)v, p->io_fmt);
}

#endif
