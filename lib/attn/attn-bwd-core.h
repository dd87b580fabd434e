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
   (aa_core_bwd_dq). D = rowsum(dO o O) comes from the host (backward.c's own function), and so does each row's
   exp bias (the LSE's, or bwd.norm = recip's saved shift with dO scaled, backward_recip.c). The fixed dq_reduce
   decides per q tile whether the tile falls back to FP64 (reduce/fixed.c), so it adds two passes before dQ: each
   dQ element's checks (aa_core_bwd_fx_elem), then each tile's verdict (aa_core_bwd_fx_tile). The two-pass softmax
   adds a pass before the pairs, each row's max and sum (aa_core_bwd_stats); D = rowsum(P o dP) one after them,
   each row's D and then its dS (aa_core_bwd_ds_row). */
#include "../exp/quad-core.h"
#include "../reduce/fixed-core.h"
#include "attn-core.h"

/* Everything the passes read and write, host or device pointers. */
typedef struct {
  const float *Q, *K, *V, *dO; /* [heads][n_q][d], [kv_heads][n_k][d], [heads][n_q][d]: exact in FP32 */
  const float *B, *D;          /* [heads][n_q]: each row's exp bias (-inf where the LSE is: P = 0), and D */
  const int64_t *lo, *hi;      /* [n_q]: row i sees keys [lo[i], hi[i]) */
  const unsigned char *seen;   /* [nqt][nkt]: 1 when the (q tile, key tile) pair is computed (bwd.skip_masked) */
  float *Pdv, *dS;             /* [heads][n_q][n_k]: each pair's P for dV and dS (pairs of skipped tiles unset) */
  size_t h0; /* the pair arrays (Pdv, dS, Pds) start at q head h0: the GPU runs KV heads in batches that fit */
  float *dQ, *dK, *dV;        /* outputs: [heads][n_q][d], [kv_heads][n_k][d], rounded to io */
  unsigned *bad;              /* set when a pair holds a non-finite value: the host redoes the backward */
  unsigned long long *doubt;  /* [doubt_cap]: pairs (h n_q + i) n_k + j whose libm exp was too close to call */
  unsigned long long *ndoubt; /* their count (may exceed doubt_cap: then the CPU runs the backward) */
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
  /* the tlx family: bwd.exp = quadratic-bf16 (order fp32), bwd.dq_scale = tile, the dq_reduce kinds */
  int quad, quad_rz;             /* the weights by aa_exp_quad_core; its cvt = rz */
  float quad_k, quad_d1, quad_s; /* aa_exp_t's kf, df1, sf */
  int dq_tile;                   /* bwd.dq_scale = tile: each dQ partial times dq_mul in FP32 */
  int dq_kind;                   /* AA_CORE_RED_* */
  int fx_width;                  /* fixed: w */
  double fx_up, fx_down;         /* fixed: 2^s, 2^-s */
  unsigned *fxe;           /* fixed: [heads][n_q][d] each element's failed conversions (times 2) + sum failure */
  unsigned long long *fxt; /* fixed: [heads][nqt][2] each q tile's conversion and sum failures */
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

/* dq_reduce: fp32-ordered, bf16-pair chain and tree, fixed (lib/reduce.h). */
enum { AA_CORE_RED_ORDERED = 0, AA_CORE_RED_CHAIN, AA_CORE_RED_TREE, AA_CORE_RED_FIXED };

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

/* The operand rows of a pair: Q and dO of its query row, K and V of its key (in global memory, or a kernel's
   copies in shared memory: the same values, so the same bits). */
typedef struct {
  const float *q, *k, *o, *v;
} aa_core_rows_t;

static inline AA_HD aa_core_rows_t aa_core_pair_rows(const aa_core_bwd_t *p, size_t h, size_t i, size_t j) {
  size_t d = p->d, row = h * p->n_q + i, key = (h / p->group * p->n_k + j) * d;
  aa_core_rows_t r = {p->Q + row * d, p->K + key, p->dO + row * d, p->V + key};
  return r;
}

/* backward.c pair_p, pair_dp and pair_ds for query row i of head h and key j, its operands at rw: P recomputed from
   the row's exp bias (bwd.exp = ex2-sm90, quadratic-bf16, or the exact exp rounded to FP32) or by the two-pass row,
   dP = dO V^T in dp_fmt, dS = (dP - D) P in ds_fmt: *pdv, *ds and P for dS *pds; with p-dp *ds is dP
   (aa_core_bwd_ds_row forms dS). Returns 1 when a value is not finite; sets *doubt when the exact exp's rounding was
   too close to call. */
static inline AA_HD int aa_core_bwd_vals_at(const aa_core_bwd_t *p, size_t h, size_t i, size_t j,
                                            const aa_core_rows_t *rw, float *pdv, float *ds, float *pds, int *doubt) {
  size_t d = p->d, row = h * p->n_q + i;
  const float *q = rw->q, *k = rw->k, *o = rw->o, *v = rw->v;
  double bb = p->B[row], pr = 0, s = 0;
  int vis = (int64_t)j >= p->lo[i] && (int64_t)j < p->hi[i];
  if (p->twopass) {
    pr = aa_core_bwd_tp_p(p, row, q, k, vis, &s, doubt);
  } else if (bb != -INFINITY && vis) {
    s = aa_core_tc(0.0f, q, k, 1, d, p->tc[AA_CORE_QK][0], p->tc[AA_CORE_QK][1], p->tc[AA_CORE_QK][2]);
    if (p->scale_s) s = aa_core_r32(s * p->scale);
    double a = p->mulsub ? aa_core_r32(aa_core_r32(s * p->c) - bb) : (double)fmaf((float)s, (float)p->c, (float)-bb);
    if (p->quad) /* aa_attn_wexp: aa_exp_eval of the exp2 argument, a BF16 value */
      pr = (double)aa_exp_bf16_widen(
          (uint16_t)aa_exp_quad_core((float)a, p->quad_k, p->quad_d1, p->quad_s, p->quad_rz, 0));
    else if (p->sm90)
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

static inline AA_HD int aa_core_bwd_vals(const aa_core_bwd_t *p, size_t h, size_t i, size_t j, float *pdv, float *ds,
                                         float *pds, int *doubt) {
  aa_core_rows_t rw = aa_core_pair_rows(p, h, i, j);
  return aa_core_bwd_vals_at(p, h, i, j, &rw, pdv, ds, pds, doubt);
}

/* Where the pairs of query row `row` (= h n_q + i) start in Pdv, dS and Pds, in rows of n_k. */
static inline AA_HD size_t aa_core_prow(const aa_core_bwd_t *p, size_t row) {
  return row - p->h0 * p->n_q;
}

/* The pair (h, i, j) into Pdv and dS, unless backward.c skips its tile; a non-finite value sets *bad (backward.c
   records the first one: the host redoes the whole backward), a doubtful exp lists the pair for the host. */
static inline AA_HD void aa_core_bwd_pair_at(const aa_core_bwd_t *p, size_t h, size_t i, size_t j,
                                             const aa_core_rows_t *rw) {
  size_t x = aa_core_prow(p, h * p->n_q + i) * p->n_k + j;
  int doubt = 0;
  float pds;
  if (!p->seen[(i / p->tq) * p->nkt + j / p->tk]) return;
  if (aa_core_bwd_vals_at(p, h, i, j, rw, p->Pdv + x, p->dS + x, p->Pds != NULL ? p->Pds + x : &pds, &doubt))
    *p->bad = 1;
  if (doubt && p->doubt_log2 >= 0) aa_core_bwd_doubt(p, (unsigned long long)x);
}
static inline AA_HD void aa_core_bwd_pair(const aa_core_bwd_t *p, size_t h, size_t i, size_t j) {
  aa_core_rows_t rw = aa_core_pair_rows(p, h, i, j);
  aa_core_bwd_pair_at(p, h, i, j, &rw);
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
  float *dS = p->dS + aa_core_prow(p, row) * nk;
  const float *P = p->Pds + aa_core_prow(p, row) * nk;
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
      size_t rows = p->n_q - i0 < p->tq ? p->n_q - i0 : p->tq, r0 = h * p->n_q + i0, x = aa_core_prow(p, r0) * nk;
      if (!p->seen[t * p->nkt + kt]) continue;
      av = aa_core_tc_strided(av, p->Pdv + x + j, nk, p->dO + r0 * d + c, d, rows, p->tc[AA_CORE_DV]);
      ak = aa_core_tc_strided(ak, p->dS + x + j, nk, p->Q + r0 * d + c, d, rows, p->tc[AA_CORE_DK]);
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

/* The dQ partial of key tile kt for query row i, column c of head h: backward.c bwd_pair's product over the tile's
   keys (a fresh chain), times dq_mul in FP32 with bwd.dq_scale = tile (add_dq_partials). */
static inline AA_HD float aa_core_bwd_dq_part(const aa_core_bwd_t *p, size_t h, size_t i, size_t c, size_t kt) {
  size_t d = p->d, nk = p->n_k, g = h / p->group, row = h * p->n_q + i, j0 = kt * p->tk;
  size_t tkc = nk - j0 < p->tk ? nk - j0 : p->tk;
  float part = aa_core_tc_strided(0.0f, p->dS + aa_core_prow(p, row) * nk + j0, 1, p->K + (g * nk + j0) * d + c, d,
                                  tkc, p->tc[AA_CORE_DQ]);
  return p->dq_tile ? (float)((double)part * p->dq_mul) : part;
}

/* reduce/tile.c bf16_pair over the element's partials: each rounded to BF16, then a chain in ascending order, or
   the level-by-level tree, which equals merging equal-sized blocks as they complete (a binary counter) and adding
   what remains from the right. A BF16 add rounded from FP32 is the correctly rounded one (24 >= 2 * 8 + 2). *n:
   the partials. */
static inline AA_HD float aa_core_bwd_pairs(const aa_core_bwd_t *p, size_t h, size_t i, size_t c, size_t *n) {
  float v[64], r = 0;
  int lev[64], top = 0;
  size_t t = i / p->tq;
  *n = 0;
  for (size_t kt = 0; kt < p->nkt; kt++) {
    if (!p->seen[t * p->nkt + kt]) continue;
    float x = aa_core_rnd16(aa_core_bwd_dq_part(p, h, i, c, kt), AA_CORE_BF16);
    if (p->dq_kind == AA_CORE_RED_CHAIN) {
      r = *n == 0 ? x : aa_core_rnd16(r + x, AA_CORE_BF16);
    } else {
      int l = 0;
      for (; top > 0 && lev[top - 1] == l; l++)
        x = aa_core_rnd16(v[--top] + x, AA_CORE_BF16);
      v[top] = x, lev[top++] = l;
    }
    (*n)++;
  }
  if (p->dq_kind == AA_CORE_RED_CHAIN || top == 0) return r;
  r = v[--top];
  while (top > 0)
    r = aa_core_rnd16(v[--top] + r, AA_CORE_BF16);
  return r;
}

/* reduce/fixed.c aa_reduce_fixed_tile's checks for one element: each partial's conversion rne(x 2^s) (failed when
   x is not finite or |q| >= 2^(w-1)), then whether the integer sum of the others leaves the w-bit range. Returns
   the failed conversions times 2 plus the sum failure; *sum: the integer sum. */
static inline AA_HD unsigned aa_core_bwd_fx_sum(const aa_core_bwd_t *p, size_t h, size_t i, size_t c,
                                                long long *sum) {
  double lim = (double)(1LL << (p->fx_width - 1));
  unsigned conv = 0;
  size_t t = i / p->tq;
  *sum = 0;
  for (size_t kt = 0; kt < p->nkt; kt++) {
    if (!p->seen[t * p->nkt + kt]) continue;
    double x = aa_core_bwd_dq_part(p, h, i, c, kt), q = aa_reduce_rne_int(x * p->fx_up);
    if (!aa_core_finite((float)x) || !(fabs(q) < lim))
      conv++;
    else
      *sum += (long long)q;
  }
  int out = conv == 0 && (*sum < -(long long)lim || *sum > (long long)lim - 1);
  return conv * 2 + (unsigned)out;
}

/* The checks of element (h, i, c) into fxe. */
static inline AA_HD void aa_core_bwd_fx_elem(const aa_core_bwd_t *p, size_t h, size_t i, size_t c) {
  long long sum;
  p->fxe[(h * p->n_q + i) * p->d + c] = aa_core_bwd_fx_sum(p, h, i, c, &sum);
}

/* q tile t of head h: its elements' failed conversions and sums into fxt (the tile falls back to FP64 when either
   is nonzero, reduce/fixed.c). */
static inline AA_HD void aa_core_bwd_fx_tile(const aa_core_bwd_t *p, size_t h, size_t t) {
  size_t i0 = t * p->tq, rows = p->n_q - i0 < p->tq ? p->n_q - i0 : p->tq;
  const unsigned *e = p->fxe + (h * p->n_q + i0) * p->d;
  unsigned long long conv = 0, sum = 0;
  for (size_t x = 0; x < rows * p->d; x++)
    conv += e[x] >> 1, sum += e[x] & 1u;
  p->fxt[2 * (h * p->nqt + t)] = conv, p->fxt[2 * (h * p->nqt + t) + 1] = sum;
}

/* The fixed kind's value of element (h, i, c): the integer sum times 2^-s in FP32, or when the tile failed its
   checks the binary64 sum of the partials in ascending order (fixed.c fp64_sum), rounded once to FP32. */
static inline AA_HD float aa_core_bwd_fixed(const aa_core_bwd_t *p, size_t h, size_t i, size_t c) {
  size_t t = i / p->tq, tile = h * p->nqt + t;
  if (p->fxt[2 * tile] == 0 && p->fxt[2 * tile + 1] == 0) {
    long long sum;
    aa_core_bwd_fx_sum(p, h, i, c, &sum);
    return 0.0f + (float)((double)sum * p->fx_down);
  }
  double R = 0;
  for (size_t kt = 0; kt < p->nkt; kt++)
    if (p->seen[t * p->nkt + kt]) R += (double)aa_core_bwd_dq_part(p, h, i, c, kt);
  return (float)(0.0 + R);
}

/* dQ of query row i, column c of head h: backward.c bwd_q_tile, the computed key tiles' partials reduced by
   dq_reduce into the zeroed accumulator (ordered: added in ascending order in FP32; bf16-pair: the BF16 result
   added), then finish_dq. */
static inline AA_HD void aa_core_bwd_dq(const aa_core_bwd_t *p, size_t h, size_t i, size_t c) {
  size_t row = h * p->n_q + i, t = i / p->tq, n = 0;
  float acc = 0;
  if (p->dq_kind == AA_CORE_RED_FIXED) {
    acc = aa_core_bwd_fixed(p, h, i, c);
  } else if (p->dq_kind != AA_CORE_RED_ORDERED) {
    float r = aa_core_bwd_pairs(p, h, i, c, &n);
    if (n > 0) acc = acc + r;
  } else {
    for (size_t kt = 0; kt < p->nkt; kt++)
      if (p->seen[t * p->nkt + kt]) acc = acc + aa_core_bwd_dq_part(p, h, i, c, kt);
  }
  double v = p->dq_end ? aa_core_r32((double)acc * p->dq_mul) : (double)acc;
  p->dQ[row * p->d + c] = aa_core_rnd16((float)v, p->io_fmt);
}

#endif
