/* attnacc: the emulated backward pass (KV-section outer, Q inner; P recompute, dS, dQ/dK/dV, dsinks). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* D_i = rowsum(O*dO) ([nki-bwd] Step 1, L614-655): products and per-head-tile
   sums in d_fmt (dy_o_mul and tensor_reduce), then the tile partials summed
   in order (L1264-1270). The order inside one reduce is taken as sequential
   (seed silent). */
/* bwd.d_order = fa2-lanes: FA2's dot_do_o (flash_bwd_preprocess_kernel.h:24-48, called at :131 with
   kGmemThreadsPerRow) gives each row kBlockKSmem / 8 lanes (kernel_traits.h:186, 292, 118:
   kBlockKSmem = 64 when the kernel's kHeadDim is a multiple of 64, else 32; kHeadDim is d rounded up by
   HEADDIM_SWITCH, aa_fa2_headdim: d = 112 runs the 128 kernel, 8 lanes; 8 BF16 per 16-byte load), each loading 8
   consecutive columns of every kBlockKSmem-wide chunk; a lane multiplies its first pair and adds the
   rest with FMAs (ni = column within its 8, then chunk), then Allreduce (utils.h:112-131) adds the
   lanes by shuffle-xor lanes/2, ..., 1: for 8 lanes ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
   bwd.d_order = lanes-128 is the same with 128-column chunks at every d (16 lanes, butterfly 8, 4, 2, 1). Of about
   300 layouts tried (lane counts, widths, chunks, combines) it and 32 lanes of 256 columns, which agrees with it on
   every cell, are the ones that give cuDNN's NaN/Inf split on all 37 causal cells of the calibration grids; on the
   held-out heldout4 it gives 11 of 13 (misses at d 200 and 216, README-gpu 8.8). 16 lanes is FA2's layout with the
   chunk doubled. Lanes past d hold +0 and add nothing.
   bwd.d_order = xformers-lanes: computeDelta of the mem-efficient backward (kernel_backward.h) gives each row
   kNumThreadsPerLine = kNumThreads / kBlockSizeI lanes, lane t loading 8 elements (one 128-bit access) at column
   8t of every 8 kNumThreadsPerLine-wide step and adding their products into delta_value (an FMA chain from 0), the
   lanes then added by shfl_xor 1, 2, ... (ascending: (l0 + l1) + (l2 + l3)). The kernel is the first of
   dispatch_cutlassB_bf16_sm80 that takes d: 64 x 64 tiles for d <= 64 (128 threads, 2 lanes), 128 x 128 for d <= 128
   (512 threads, 4 lanes), 128 x 64 (k65536) above (256 threads, 2 lanes). */
/* The chunk width (8 columns per lane) of the recipe's lane layout at head dimension d. */
static size_t lanes_chunk(aa_d_order_t layout, size_t d) {
  if (layout == AA_D_ORDER_LANES_128) return 128;
  if (layout == AA_D_ORDER_XFORMERS) return d > 64 && d <= 128 ? 32 : 16;
  return aa_fa2_headdim(d) % 64 == 0 ? 64 : 32;
}
static double rowsum_o_do_lanes(const aa_attn_ctx_t *cx, const double *o, const double *g) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, kb = lanes_chunk((aa_d_order_t)r->bwd_d_order, d), nl = kb / 8;
  double lane[16];
  for (size_t t = 0; t < nl; t++) {
    int first = 1;
    lane[t] = 0;
    for (size_t c0 = 0; c0 < d; c0 += kb)
      for (size_t e = 0; e < 8 && c0 + 8 * t + e < d; e++) {
        size_t c = c0 + 8 * t + e;
        lane[t] = first ? aa_attn_rnd(aa_attn_alu(o[c] * g[c], r->alu_fmt), r->bwd_d_fmt)
                        : aa_attn_rnd(aa_attn_fma(o[c], g[c], lane[t], r->alu_fmt), r->bwd_d_fmt);
        first = 0;
      }
  }
  if (r->bwd_d_order == AA_D_ORDER_XFORMERS) /* shfl_xor 1, 2, ...: lane t (t a multiple of 2 off) takes t + off */
    for (size_t off = 1; off < nl; off *= 2)
      for (size_t t = 0; t < nl; t += 2 * off)
        lane[t] = aa_attn_rnd(aa_attn_alu(lane[t] + lane[t + off], r->alu_fmt), r->bwd_d_fmt);
  else
    for (size_t off = nl / 2; off >= 1; off /= 2)
      for (size_t t = 0; t < off; t++) /* lane t after this step; lanes t and t^off agree */
        lane[t] = aa_attn_rnd(aa_attn_alu(lane[t] + lane[t + off], r->alu_fmt), r->bwd_d_fmt);
  return lane[0];
}

double aa_attn_rowsum_o_do(const aa_attn_ctx_t *cx, const double *o, const double *g) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, dt = r->bwd_d_tile ? r->bwd_d_tile : d;
  double D = 0;
  if (r->bwd_d_order == AA_D_ORDER_TORCH_SUM) /* torch.sum(out.float() * grad_out.float(), -1) of [heads n_q, d] */
    return aa_attn_torch_sum(o, g, d, cx->heads * cx->n_q, r->alu_fmt, r->bwd_d_fmt);
  if (r->bwd_d_order == AA_D_ORDER_CUDNN_DOT) return aa_attn_cudnn_dot_do_o(o, g, d, r->alu_fmt, r->bwd_d_fmt);
  if (r->bwd_d_order != AA_D_ORDER_SEQ) return rowsum_o_do_lanes(cx, o, g);
  for (size_t c0 = 0; c0 < d; c0 += dt) {
    size_t c1 = c0 + dt < d ? c0 + dt : d;
    double part = 0;
    for (size_t c = c0; c < c1; c++)
      part = aa_attn_rnd(part + aa_attn_rnd(aa_attn_alu(o[c] * g[c], r->alu_fmt), r->bwd_d_fmt), r->bwd_d_fmt);
    D = c0 == 0 ? part : aa_attn_rnd(D + part, r->bwd_d_fmt);
  }
  return D;
}

/* Per kv-head state (one per outer thread). */
typedef struct {
  double *dk, *dv, *dkp, *dvp; /* section accumulators and PSUMs [sec x d] */
  double *gk, *gv;             /* gqa_reduce = sum-rounded: group sums [sec x d] */
  uint8_t *live;               /* per K tile of the section: PSUM holds a product */
  uint8_t *done;               /* per K tile of the current chunk: 0 skipped, 1 computed */
  double *qe, *dql, *dqp, *D;  /* dqp: one dQ partial per K tile of a chunk */
  double *dqall;               /* dq_reduce kinds other than ordered: every partial of a (q tile, section) */
  aa_reduce_t red;             /* the recipe's dq_reduce with add = alu, acc = bwd.dq_acc_fmt */
  aa_reduce_stats_t rstats;    /* this worker's dq_reduce counters */
} bwd_buf_t;

/* Per-thread scratch of one (q tile, k tile) pair. */
typedef struct {
  double *S, *Pdv, *Pds, *dP, *dS, *G; /* G: softcap dtanh (aa_attn_score_mod) */
  uint8_t *vis;
} tile_buf_t;

static void buf_free(bwd_buf_t *b) {
  free(b->dk);
  free(b->dv);
  free(b->dkp);
  free(b->dvp);
  free(b->gk);
  free(b->gv);
  free(b->live);
  free(b->done);
  free(b->qe);
  free(b->dql);
  free(b->dqp);
  free(b->dqall);
  free(b->D);
}

static int tile_alloc(tile_buf_t *t, size_t tt) {
  t->S = malloc(tt * sizeof(double));
  t->Pdv = malloc(tt * sizeof(double));
  t->Pds = malloc(tt * sizeof(double));
  t->dP = malloc(tt * sizeof(double));
  t->dS = malloc(tt * sizeof(double));
  t->G = malloc(tt * sizeof(double));
  t->vis = malloc(tt);
  return t->S && t->Pdv && t->Pds && t->dP && t->dS && t->G && t->vis;
}

static void tile_free(tile_buf_t *t) {
  free(t->S);
  free(t->Pdv);
  free(t->Pds);
  free(t->dP);
  free(t->dS);
  free(t->G);
  free(t->vis);
}

/* Flush the PSUMs of a finished q-tile group into the section accumulators:
   [nki-bwd] L1568-1617, tensor_tensor(add) in the mixed dtype. */
static void flush_psums(const aa_attn_ctx_t *cx, bwd_buf_t *b, size_t sec_len, size_t tk) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, nkt = (sec_len + tk - 1) / tk;
  for (size_t kt = 0; kt < nkt; kt++) {
    if (!b->live[kt]) continue;
    size_t j0 = kt * tk, j1 = j0 + tk < sec_len ? j0 + tk : sec_len;
    for (size_t x = j0 * d; x < j1 * d; x++) {
      b->dk[x] = aa_attn_rnd(aa_attn_alu(b->dk[x] + b->dkp[x], r->alu_fmt), r->bwd_dkv_acc_fmt);
      b->dv[x] = aa_attn_rnd(aa_attn_alu(b->dv[x] + b->dvp[x], r->alu_fmt), r->bwd_dkv_acc_fmt);
    }
    b->live[kt] = 0;
  }
}

/* Final dK/dV value of one accumulator element: the scale on dK (FA2 applies
   it to the FP32 accumulator at the end), the dropout rescale on dV, then
   the output format. */
static void finish_kv(const aa_attn_ctx_t *cx, double *k_out, double *v_out, double k, double v) {
  const aa_recipe_t *r = cx->r;
  if (r->bwd_dk_scale == AA_GSCALE_END) k = aa_attn_alu(k * cx->scale, r->alu_fmt);
  if (cx->keep_bwd != NULL) v = aa_attn_alu(v * cx->ks, r->alu_fmt);
  *k_out = aa_attn_rnd(k, r->io_fmt);
  *v_out = aa_attn_rnd(v, r->io_fmt);
}

/* The backward's tiling, fixed for the run (aa_attn_backward). */
typedef struct {
  size_t tq, tk, sec; /* q tile, k tile, KV section */
  size_t sub;         /* the dQ product's k sub-tile (bwd.sub_k) */
  int inner;          /* the K tiles of a chunk in parallel (fewer KV heads than threads) */
} bwd_tiling_t;

/* One q tile of one q head against one KV section [s0, s1). */
typedef struct {
  size_t g, hh, h;    /* kv head, q head within its group, q head */
  size_t t, i0, rows; /* q tile index, first row, rows */
  size_t s0, s1;
  const double *lse; /* the tile's LSE rows */
  uint64_t tile_id;  /* dq_reduce tile id */
} bwd_qtile_t;

/* One (q tile, k tile) pair: the q tile, the keys [j0, j0 + tkc), the
   buffers, and the rows of K, V, dO it reads. */
typedef struct {
  const aa_attn_ctx_t *cx;
  const bwd_qtile_t *qt;
  bwd_buf_t *b;
  tile_buf_t *tb;
  size_t j0, tkc;
  const double *K, *V, *dO; /* the kv head's K and V; the q tile's dO rows */
} bwd_pair_t;

/* The first visible score or weight of the pair that is not finite, recorded with the operands that met
   (attn.h aa_attn_first_t); bb: the exp bias of each row (NULL: two-pass, no LSE). One note per pair. */
static void pair_p_first(const bwd_pair_t *p, const double *bb) {
  const aa_attn_ctx_t *cx = p->cx;
  const tile_buf_t *tb = p->tb;
  size_t tkc = p->tkc;
  for (size_t a = 0; a < p->qt->rows; a++)
    for (size_t x = 0; x < tkc; x++) {
      double s = tb->S[a * tkc + x], w = tb->dS[a * tkc + x];
      if (!tb->vis[a * tkc + x] || (isfinite(s) && isfinite(w))) continue;
      size_t h = p->qt->h, i = p->qt->i0 + a, j = p->j0 + x;
      if (!isfinite(s))
        aa_attn_first_note(cx, AA_FIRST_SCORE, h, i, j, s, s, 0, 0);
      else
        aa_attn_first_note(cx, AA_FIRST_EXP, h, i, j, w, s, bb ? p->qt->lse[a] : NAN,
                           bb ? aa_attn_exparg(cx, s, bb[a]) : NAN);
      return;
    }
}

/* Step 2: recompute P of the pair into tb->Pds (rounded for dS) and
   tb->Pdv (dropped and rounded for dV). */
static void pair_p(const bwd_pair_t *p) {
  const aa_attn_ctx_t *cx = p->cx;
  const aa_recipe_t *r = cx->r;
  tile_buf_t *tb = p->tb;
  aa_fmt_t alu = r->alu_fmt;
  size_t n_q = cx->n_q, n_k = cx->n_k, h = p->qt->h, i0 = p->qt->i0, tkc = p->tkc, j0 = p->j0;
  const double *lse = p->qt->lse;
  const double *sinks = cx->sinks != NULL ? cx->sinks + h * cx->pb->num_sinks : NULL;
  double bbs[512]; /* each row's exp bias, for pair_p_first */
  int two_pass = r->fwd_softmax == AA_SOFTMAX_TWO_PASS, keep_bb = p->qt->rows <= 512;
  for (size_t a = 0; a < p->qt->rows; a++) {
    double *srow = tb->S + a * tkc, *prow = tb->dS + a * tkc; /* dS doubles as scratch for p */
    const uint8_t *vrow = tb->vis + a * tkc;
    if (r->fwd_softmax == AA_SOFTMAX_TWO_PASS && !r->bwd_twopass_lse) {
      /* Naive keeps the forward's P: recomputing it with the same two-pass
         row gives the identical values (bwd.twopass_p = lse: from the LSE below). */
      double m, l;
      aa_attn_twopass_row(cx, prow, srow, vrow, tkc, sinks, &m, &l);
    } else if (lse[a] == -INFINITY) {
      for (size_t x = 0; x < tkc; x++)
        prow[x] = 0; /* empty row: P = 0, never exp(-inf + inf) */
    } else {
      /* nki: activation(exp, data=S, bias=-LSE, scale=1.0), L964-970;
         fa2: exp2(fma(S, scale*log2e, -LSE*log2e)) with LSE*log2e one FP32
         multiply ([fa2]). */
      double bb = aa_attn_exp2form(r) ? aa_attn_alu(lse[a] * cx->l2e, alu) : lse[a];
      /* bwd.norm = recip: the row's saved shift, unnormalised weights (seed
         003 section 3.5; backward_recip.c); LSE rows get the same bb. */
      if (cx->bias != NULL) bb = cx->bias[h * n_q + i0 + a];
      if (keep_bb) bbs[a] = bb;
      for (size_t x = 0; x < tkc; x++)
        prow[x] = vrow[x] ? aa_attn_wexp(cx, cx->wexp_bwd, aa_attn_exparg(cx, srow[x], bb)) : 0.0;
    }
    const uint8_t *krow = cx->keep_bwd != NULL ? cx->keep_bwd + ((h * n_q + i0 + a) * n_k + j0) : NULL;
    for (size_t x = 0; x < tkc; x++) {
      tb->Pds[a * tkc + x] = aa_attn_rnd(prow[x], r->bwd_p_ds_fmt);
      /* Dropout: the redrawn mask zeroes P for dV (twin L974-981); the 1/keep
         rescale is applied to the dV accumulator at the end. */
      tb->Pdv[a * tkc + x] = (krow != NULL && !krow[x]) ? 0.0 : aa_attn_rnd(prow[x], r->bwd_p_dv_fmt);
    }
    if (lse[a] == -INFINITY && !two_pass && keep_bb) bbs[a] = -INFINITY;
  }
  if (cx->first != NULL && keep_bb) pair_p_first(p, two_pass ? NULL : bbs);
}

/* Step 3.2: dP = dO V^T (L1019-1025), rounded to dp_fmt, the dropout mask
   and rescale applied. */
static int pair_dp(const bwd_pair_t *p) {
  const aa_attn_ctx_t *cx = p->cx;
  const aa_recipe_t *r = cx->r;
  tile_buf_t *tb = p->tb;
  size_t rows = p->qt->rows, tkc = p->tkc;
  int st = aa_attn_abt(cx, tb->dP, p->dO, rows, p->V + p->j0 * cx->d, tkc, r->bwd_acc_dp, r->bwd_dp_gemv);
  if (st != AA_OK) return st;
  if (!aa_accum_native(r->bwd_acc_dp, r->bwd_dp_fmt))
    for (size_t x = 0; x < rows * tkc; x++)
      tb->dP[x] = aa_attn_rnd(tb->dP[x], r->bwd_dp_fmt);
  if (cx->keep_bwd != NULL)
    for (size_t a = 0; a < rows; a++) {
      const uint8_t *krow = cx->keep_bwd + ((p->qt->h * cx->n_q + p->qt->i0 + a) * cx->n_k + p->j0);
      for (size_t x = 0; x < tkc; x++) {
        double *v = &tb->dP[a * tkc + x];
        *v = krow[x] ? aa_attn_alu(*v * cx->ks, r->alu_fmt) : 0.0; /* dropped: dS = -P*D */
      }
    }
  return AA_OK;
}

/* D from the key axis when bwd.d_source says so (textbook softmax
   backward; one K tile only), then Step 4: dS = (dP - D) * P, one fused
   scalar_tensor_tensor (L1029-1036): op0 result in the ALU format, final in
   ds_fmt. */
static void pair_ds(const bwd_pair_t *p) {
  const aa_attn_ctx_t *cx = p->cx;
  const aa_recipe_t *r = cx->r;
  tile_buf_t *tb = p->tb;
  aa_fmt_t alu = r->alu_fmt;
  size_t rows = p->qt->rows, tkc = p->tkc;
  double *Drow = p->b->D + p->qt->hh * cx->n_q + p->qt->i0;
  int first = cx->first != NULL; /* one note per pair: the first in row-major order is its smallest (i, j) */
  if (r->bwd_d_source == AA_DSRC_P_DP)
    for (size_t a = 0; a < rows; a++) {
      double D = 0;
      for (size_t x = 0; x < tkc; x++)
        D = aa_attn_rnd(D + aa_attn_rnd(aa_attn_alu(tb->Pds[a * tkc + x] * tb->dP[a * tkc + x], alu), r->bwd_d_fmt),
                        r->bwd_d_fmt);
      Drow[a] = D;
    }
  for (size_t a = 0; a < rows; a++) {
    double D = Drow[a];
    for (size_t x = 0; x < tkc; x++) {
      size_t e = a * tkc + x;
      double t0 = aa_attn_alu(tb->dP[e] - D, alu);
      double v = aa_attn_alu(t0 * tb->Pds[e], alu);
      /* softcap: scaled_ds *= dtanh before the BF16 cast (flash_bwd_kernel.h:591-593) */
      if (cx->pb->softcap > 0) v = aa_attn_alu(v * tb->G[e], alu);
      /* fused: xformers scales the FP32 dS before its one cast (kernel_backward.h processBlockIJ) */
      if (r->bwd_ds_scale == AA_DS_SCALE_FUSED) v = aa_attn_alu(v * cx->scale, alu);
      v = aa_attn_rnd(v, r->bwd_ds_fmt);
      if (r->bwd_ds_scale == AA_DS_SCALE_ON) v = aa_attn_rnd(aa_attn_alu(v * cx->scale, alu), r->bwd_ds_fmt);
      tb->dS[e] = v;
      if (!isfinite(v) && isfinite(tb->Pds[e]) && first)
        first = 0,
        aa_attn_first_note(cx, AA_FIRST_DS, p->qt->h, p->qt->i0 + a, p->j0 + x, v, tb->dP[e], D, tb->Pds[e]);
    }
  }
  aa_attn_quant_rows(r, r->quant_ds, tb->dS, rows, tkc, tkc);
}

/* Step 3.1 dV = P^T dO and Step 5.1 dK = Q^T dS into the rows of K tile kt
   of the section accumulators (or PSUMs); Qk is Q as loaded. */
static int pair_dkv(const bwd_pair_t *p, size_t kt, const double *Qk) {
  const aa_recipe_t *r = p->cx->r;
  bwd_buf_t *b = p->b;
  tile_buf_t *tb = p->tb;
  size_t d = p->cx->d, rows = p->qt->rows, tkc = p->tkc, off = (p->j0 - p->qt->s0) * d;
  int st;
  if (r->bwd_dkv_accumulate == AA_KVACC_CHAIN) {
    st = aa_gemm(b->dv + off, d, tb->Pdv, tkc, 1, p->dO, d, 0, tkc, d, rows, 1, r->bwd_acc_dv);
    if (st == AA_OK) st = aa_gemm(b->dk + off, d, tb->dS, tkc, 1, Qk, d, 0, tkc, d, rows, 1, r->bwd_acc_dk);
    if (st != AA_OK) return st;
    if (!aa_accum_native(r->bwd_acc_dv, r->bwd_dkv_acc_fmt))
      for (size_t x = 0; x < tkc * d; x++)
        b->dv[off + x] = aa_attn_rnd(b->dv[off + x], r->bwd_dkv_acc_fmt);
    if (!aa_accum_native(r->bwd_acc_dk, r->bwd_dkv_acc_fmt))
      for (size_t x = 0; x < tkc * d; x++)
        b->dk[off + x] = aa_attn_rnd(b->dk[off + x], r->bwd_dkv_acc_fmt);
  } else {
    /* [nki-bwd] L1568-1617: dv_psum/dk_psum over the q-tile group, added
       into the section accumulators when the group ends (flush_psums). */
    int acc = b->live[kt];
    st = aa_gemm(b->dvp + off, d, tb->Pdv, tkc, 1, p->dO, d, 0, tkc, d, rows, acc, r->bwd_acc_dv);
    if (st == AA_OK) st = aa_gemm(b->dkp + off, d, tb->dS, tkc, 1, Qk, d, 0, tkc, d, rows, acc, r->bwd_acc_dk);
    if (st != AA_OK) return st;
    b->live[kt] = 1;
  }
  return AA_OK;
}

/* One (q tile, k tile) pair: recompute P, dP, dS; the dQ partial into dqp;
   dV and dK into the rows of K tile kt (keys [j0, j0 + tkc)) of the section
   accumulators (or PSUMs), which no other K tile touches. *computed = 0
   when the pair is skipped by the mask. */
static int bwd_pair(const aa_attn_ctx_t *cx, bwd_buf_t *b, tile_buf_t *tb, const bwd_qtile_t *qt, size_t j0,
                    size_t tkc, size_t kt, size_t sub, double *dqp, int *computed) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, n_q = cx->n_q, n_k = cx->n_k, h = qt->h, i0 = qt->i0, rows = qt->rows;
  const double *Qraw = cx->Q + (h * n_q + i0) * d;
  const double *Qk = r->scale_fold == AA_SCALE_Q ? b->qe : Qraw; /* dK = Q^T dS with Q as loaded */
  bwd_pair_t p = {.cx = cx,
                  .qt = qt,
                  .b = b,
                  .tb = tb,
                  .j0 = j0,
                  .tkc = tkc,
                  .K = cx->K + qt->g * n_k * d,
                  .V = cx->V + qt->g * n_k * d,
                  .dO = cx->dO + (h * n_q + i0) * d};
  int st;
  *computed = 0;
  size_t nv = aa_attn_visible(cx, tb->vis, h, i0, rows, j0, tkc);
  if (nv == 0 && r->bwd_skip_masked) return AA_OK; /* get_required_tiles_mask, L794-846 */
  *computed = 1;
  st = aa_attn_scores(cx, tb->S, b->qe, rows, p.K + j0 * d, tkc, r->bwd_acc_qk, r->bwd_qk_gemv);
  if (st != AA_OK) return st;
  aa_attn_score_mod(cx, tb->S, tb->G, h, i0, rows, j0, tkc);
  pair_p(&p);
  if ((st = pair_dp(&p)) != AA_OK) return st;
  pair_ds(&p);
  /* ---- Step 5.2: dQ partial over the 128-wide sub-tiles chained in one
     PSUM (L1548-1556); the caller adds it in K order ---- */
  for (size_t kb = 0; kb < tkc; kb += sub) {
    size_t sc = tkc - kb < sub ? tkc - kb : sub;
    st = aa_gemm(dqp, d, tb->dS + kb, tkc, 0, p.K + (j0 + kb) * d, d, 0, rows, d, sc, kb > 0, r->bwd_acc_dq);
    if (st != AA_OK) return st;
  }
  return pair_dkv(&p, kt, Qk);
}

/* K tiles handled per parallel chunk (bounds the dQ partial buffers). */
#define AA_ATTN_CHUNK 16

/* Step 1 once per q head ([nki-bwd] L1233: only on the first K section). */
static void rowsum_heads(const aa_attn_ctx_t *cx, const aa_attn_result_t *out, size_t g, bwd_buf_t *b) {
  size_t d = cx->d, n_q = cx->n_q, G = cx->group;
  for (size_t hh = 0; hh < G; hh++) {
    size_t h = g * G + hh;
    for (size_t i = 0; i < n_q; i++)
      b->D[hh * n_q + i] = aa_attn_rowsum_o_do(cx, out->o.data + (h * n_q + i) * d, cx->dO + (h * n_q + i) * d);
  }
}

/* The pairs of K tiles [c0, c0 + nc) of the section with the q tile, their
   dQ partials into b->dqp and b->done set. The K tiles of a chunk are
   independent (each owns its dK/dV rows and its dQ partial); only the dQ
   adds (add_dq_partials) are ordered. */
static int chunk_pairs(const aa_attn_ctx_t *cx, bwd_buf_t *b, tile_buf_t *tbs, const bwd_tiling_t *tl,
                       const bwd_qtile_t *qt, size_t c0, long nc) {
  int status = AA_OK;
#pragma omp parallel for if (tl->inner && nc > 1) schedule(dynamic, 1)
  for (long ci = 0; ci < nc; ci++) {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    size_t kt = c0 + (size_t)ci, j0 = qt->s0 + kt * tl->tk, tkc = qt->s1 - j0 < tl->tk ? qt->s1 - j0 : tl->tk;
    int computed = 0;
    int st = bwd_pair(cx, b, &tbs[tid], qt, j0, tkc, kt, tl->sub, b->dqp + (size_t)ci * tl->tq * cx->d, &computed);
    b->done[ci] = (uint8_t)computed;
    if (st != AA_OK) {
#pragma omp critical
      status = st;
    }
  }
  return status;
}

/* dq_local = dq_psum*scale + dq_local, one fused op per K tile in K order
   (L1558-1565); FA2: atomicAdd of the tile partial into the FP32 buffer in
   ascending KV order ([fa2]). The adds are the dq_reduce
   strategy's (lib/reduce.h): ordered kinds take each partial of the chunk
   as it comes, the others collect the partials of the (q tile, section)
   into b->dqall for bwd_q_tile to reduce. *np counts the partials. */
static int add_dq_partials(const aa_attn_ctx_t *cx, bwd_buf_t *b, const bwd_tiling_t *tl, const bwd_qtile_t *qt,
                           long nc, size_t *np, size_t *skipped) {
  const aa_recipe_t *r = cx->r;
  size_t rd = qt->rows * cx->d;
  for (size_t ci = 0; ci < (size_t)nc; ci++) {
    if (!b->done[ci]) {
      (*skipped)++;
      continue;
    }
    double *dqp = b->dqp + ci * tl->tq * cx->d;
    if (r->bwd_dq_scale == AA_GSCALE_TILE)
      for (size_t x = 0; x < rd; x++)
        dqp[x] = aa_attn_alu(dqp[x] * cx->dq_mul, r->alu_fmt);
    if (b->dqall != NULL) {
      memcpy(b->dqall + *np * rd, dqp, rd * sizeof(double));
      (*np)++;
    } else {
      int st = aa_reduce_tile(b->dql, NULL, dqp, 1, rd, qt->tile_id, &b->red, NULL, NULL, NULL);
      if (st != AA_OK) return st;
      (*np)++;
    }
  }
  return AA_OK;
}

/* Q tile qt against its section: every K tile's pair in chunks, the dQ
   partials reduced into dq_local, the PSUMs flushed at a q-group end, dQ
   written back. */
static int bwd_q_tile(const aa_attn_ctx_t *cx, aa_attn_result_t *out, bwd_buf_t *b, tile_buf_t *tbs,
                      const bwd_tiling_t *tl, const bwd_qtile_t *qt, int group_end, size_t *skipped) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, rows = qt->rows, sl = qt->s1 - qt->s0, nkt = (sl + tl->tk - 1) / tl->tk, np = 0;
  int st;
  aa_attn_load_q(cx, b->qe, cx->Q + (qt->h * cx->n_q + qt->i0) * d, rows);
  /* dq_local: zero on the first section, else reloaded from out_dq_ref (L1188-1207). */
  double *dq_store = out->dq.data + (qt->h * cx->n_q + qt->i0) * d;
  memcpy(b->dql, dq_store, rows * d * sizeof(double));
  for (size_t c0 = 0; c0 < nkt; c0 += AA_ATTN_CHUNK) {
    size_t c1 = c0 + AA_ATTN_CHUNK < nkt ? c0 + AA_ATTN_CHUNK : nkt;
    long nc = (long)(c1 - c0);
    if ((st = chunk_pairs(cx, b, tbs, tl, qt, c0, nc)) != AA_OK) return st;
    if ((st = add_dq_partials(cx, b, tl, qt, nc, &np, skipped)) != AA_OK) return st;
  }
  if (b->dqall != NULL) {
    st = aa_reduce_tile(b->dql, &b->rstats, b->dqall, np, rows * d, qt->tile_id, &b->red, NULL, NULL, NULL);
    if (st != AA_OK) return st;
  } else {
    b->rstats.tiles++;
    b->rstats.partials += np;
  }
  if (r->bwd_dkv_accumulate == AA_KVACC_ADD && group_end) flush_psums(cx, b, sl, tl->tk);
  /* write dq (L1326-1335): the section round trip through dq_section_fmt */
  for (size_t x = 0; x < rows * d; x++)
    dq_store[x] = aa_attn_rnd(b->dql[x], r->bwd_dq_section_fmt);
  return AA_OK;
}

/* FA2 GQA (gqa_reduce = sum-rounded): q head hh's dK/dV of the section
   finished and stored in io (dk_expanded), then summed over the group in
   alu order hh = 0, 1, ...; the accumulators zeroed for the next head. */
static void gqa_fold(const aa_attn_ctx_t *cx, bwd_buf_t *b, size_t hh, size_t sl) {
  aa_fmt_t alu = cx->r->alu_fmt;
  size_t d = cx->d;
  for (size_t x = 0; x < sl * d; x++) {
    double k, v;
    finish_kv(cx, &k, &v, b->dk[x], b->dv[x]);
    b->gk[x] = hh == 0 ? k : aa_attn_alu(b->gk[x] + k, alu);
    b->gv[x] = hh == 0 ? v : aa_attn_alu(b->gv[x] + v, alu);
  }
  memset(b->dk, 0, sl * d * sizeof(double));
  memset(b->dv, 0, sl * d * sizeof(double));
}

/* write dK, dV of the section [s0, s0 + sl) (L1340-1353) */
static void write_section(const aa_attn_ctx_t *cx, aa_attn_result_t *out, const bwd_buf_t *b, size_t g, size_t s0,
                          size_t sl) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d;
  for (size_t x = 0; x < sl * d; x++) {
    double k, v;
    if (r->bwd_gqa_reduce == AA_GQA_SUM_ROUNDED) {
      k = aa_attn_rnd(b->gk[x], r->io_fmt);
      v = aa_attn_rnd(b->gv[x], r->io_fmt);
    } else {
      finish_kv(cx, &k, &v, b->dk[x], b->dv[x]);
    }
    out->dk.data[(g * cx->n_k + s0) * d + x] = k;
    out->dv.data[(g * cx->n_k + s0) * d + x] = v;
  }
}

/* KV section [s0, s0 + tl->sec) of kv head g (L1162): accumulators zeroed
   (L1166-1167), every q head of the group (L1180) and q tile (L1184), then
   dK, dV written. */
static int bwd_section(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t g, bwd_buf_t *b, tile_buf_t *tbs,
                       const bwd_tiling_t *tl, size_t s0, size_t *skipped) {
  const aa_recipe_t *r = cx->r;
  size_t n_q = cx->n_q, n_k = cx->n_k, G = cx->group, tq = tl->tq, d = cx->d;
  size_t nqt = (n_q + tq - 1) / tq, nsec = (n_k + tl->sec - 1) / tl->sec;
  size_t s1 = s0 + tl->sec < n_k ? s0 + tl->sec : n_k, sl = s1 - s0, nkt = (sl + tl->tk - 1) / tl->tk;
  memset(b->dk, 0, sl * d * sizeof(double));
  memset(b->dv, 0, sl * d * sizeof(double));
  memset(b->live, 0, nkt);
  for (size_t hh = 0; hh < G; hh++) {
    for (size_t tt = 0; tt < nqt; tt++) {
      bwd_qtile_t qt = {.g = g, .hh = hh, .h = g * G + hh, .s0 = s0, .s1 = s1};
      qt.t = r->bwd_q_desc ? nqt - 1 - tt : tt; /* bwd.q_order = desc: FA2's m_block loop counts down */
      qt.i0 = qt.t * tq;
      qt.rows = n_q - qt.i0 < tq ? n_q - qt.i0 : tq;
      qt.lse = out->lse.data + qt.h * n_q + qt.i0;
      /* dq_reduce tile id: a pure function of (q head, q tile, section), so
         the fp32-atomic order does not depend on threads or schedule. */
      qt.tile_id = ((uint64_t)qt.h * nqt + qt.t) * nsec + s0 / tl->sec;
      int group_end = (tt % r->bwd_q_group) == r->bwd_q_group - 1 || tt == nqt - 1;
      int st = bwd_q_tile(cx, out, b, tbs, tl, &qt, group_end, skipped);
      if (st != AA_OK) return st;
    }
    if (r->bwd_gqa_reduce == AA_GQA_SUM_ROUNDED) gqa_fold(cx, b, hh, sl);
  }
  write_section(cx, out, b, g, s0, sl);
  return AA_OK;
}

/* Final dQ of kv head g's q heads: FA2 scales the FP32 buffer once and
   rounds ([fa2]). */
static void finish_dq(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t g) {
  const aa_recipe_t *r = cx->r;
  size_t G = cx->group, nqd = cx->n_q * cx->d;
  for (size_t hh = 0; hh < G; hh++) {
    double *dq = out->dq.data + (g * G + hh) * nqd;
    for (size_t x = 0; x < nqd; x++) {
      double v = dq[x];
      if (r->bwd_dq_scale == AA_GSCALE_END) v = aa_attn_alu(v * cx->dq_mul, r->alu_fmt);
      dq[x] = aa_attn_rnd(v, r->io_fmt);
    }
  }
}

/* p_sink of row i of head h for the sink logit `sink`: exp(sink - LSE)
   with the same bias as P. */
static double sink_p(const aa_attn_ctx_t *cx, const aa_attn_result_t *out, double sink, size_t h, size_t i) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  double L = out->lse.data[h * cx->n_q + i];
  if (L == -INFINITY) return 0;
  if (cx->bias != NULL) /* recip: unnormalised p_sink times the scaled-dO D (backward_recip.c) */
    return aa_attn_wexp(cx, cx->wexp_bwd,
                        aa_attn_exp2form(r) ? aa_attn_fma(sink, cx->l2e, -cx->bias[h * cx->n_q + i], alu)
                                            : aa_attn_alu(sink - cx->bias[h * cx->n_q + i], alu));
  if (aa_attn_exp2form(r))
    return aa_attn_wexp(cx, cx->wexp_bwd, aa_attn_fma(sink, cx->l2e, -aa_attn_alu(L * cx->l2e, alu), alu));
  return aa_attn_wexp(cx, cx->wexp_bwd, aa_attn_alu(sink - L, alu));
}

/* Sink gradient (L1355-1405) of kv head g's q heads: per partition row
   (tq of them, b->dql as scratch) dsinks_local = dsinks_local - p_sink*D
   (scalar_tensor_tensor reverse1), then a partition reduce (taken as
   sequential over rows, seed silent). */
static void dsinks_heads(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t g, bwd_buf_t *b, size_t tq) {
  const aa_recipe_t *r = cx->r;
  size_t n_q = cx->n_q, G = cx->group, ns = cx->pb->num_sinks;
  for (size_t hh = 0; hh < G; hh++) {
    size_t h = g * G + hh;
    for (size_t s = 0; s < ns; s++) {
      double sink = cx->sinks[h * ns + s];
      double *acc = b->dql; /* tq scratch */
      for (size_t a = 0; a < tq; a++)
        acc[a] = 0;
      for (size_t i = 0; i < n_q; i++) {
        double t0 = aa_attn_alu(sink_p(cx, out, sink, h, i) * b->D[hh * n_q + i], r->alu_fmt);
        acc[i % tq] = aa_attn_rnd(aa_attn_alu(acc[i % tq] - t0, r->alu_fmt), r->bwd_dsinks_fmt);
      }
      double tot = 0;
      for (size_t a = 0; a < tq; a++)
        tot = aa_attn_rnd(tot + acc[a], r->bwd_dsinks_fmt);
      out->dsinks.data[h * ns + s] = tot;
    }
  }
}

/* Everything of kv head g: D, each KV section, the final dQ, dsinks. */
static int bwd_kv_head(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t g, bwd_buf_t *b, tile_buf_t *tbs,
                       const bwd_tiling_t *tl, size_t *skipped) {
  if (cx->r->bwd_d_source == AA_DSRC_O_DO) rowsum_heads(cx, out, g, b);
  for (size_t s0 = 0; s0 < cx->n_k; s0 += tl->sec) {
    int st = bwd_section(cx, out, g, b, tbs, tl, s0, skipped);
    if (st != AA_OK) return st;
  }
  finish_dq(cx, out, g);
  if (cx->sinks != NULL && out->dsinks.data != NULL) dsinks_heads(cx, out, g, b, tl->tq);
  return AA_OK;
}

static int buf_alloc(bwd_buf_t *b, const aa_attn_ctx_t *cx, size_t tq, size_t tk, size_t sec) {
  size_t d = cx->d, sd = sec * d;
  memset(b, 0, sizeof *b);
  b->dk = calloc(sd, sizeof(double));
  b->dv = calloc(sd, sizeof(double));
  b->dkp = calloc(sd, sizeof(double));
  b->dvp = calloc(sd, sizeof(double));
  b->gk = calloc(sd, sizeof(double));
  b->gv = calloc(sd, sizeof(double));
  b->live = calloc(sec, 1);
  b->done = calloc(AA_ATTN_CHUNK, 1);
  b->qe = malloc(tq * d * sizeof(double));
  b->dql = malloc(tq * d * sizeof(double));
  b->dqp = malloc(AA_ATTN_CHUNK * tq * d * sizeof(double));
  b->D = calloc(cx->group * cx->n_q, sizeof(double));
  b->red = cx->r->bwd_dq_reduce;
  b->red.add_fmt = cx->r->alu_fmt;
  b->red.acc_fmt = cx->r->bwd_dq_acc_fmt;
  b->red.section = 0; /* sections are the pipeline's (bwd.section, bwd.dq_section_fmt) */
  b->red.store_fmt = cx->r->bwd_dq_section_fmt;
  int streaming = b->red.kind == AA_REDUCE_FP32_ORDERED || b->red.kind == AA_REDUCE_SECTION_ROUNDTRIP;
  if (streaming) {
    /* Within a section both are ascending adds, one partial at a time; the
       section-roundtrip store/reload is the pipeline's own section write. */
    b->red.kind = AA_REDUCE_FP32_ORDERED;
  } else {
    size_t nkt = (sec + tk - 1) / tk, m;
    if (aa_size_mul(&m, nkt, tq) || aa_size_mul(&m, m, d) || (b->dqall = malloc(m * sizeof(double))) == NULL)
      return 0;
  }
  return b->dk && b->dv && b->dkp && b->dvp && b->gk && b->gv && b->live && b->done && b->qe && b->dql && b->dqp &&
         b->D;
}

int aa_attn_backward(const aa_attn_ctx_t *cx, aa_attn_result_t *out) {
  const aa_recipe_t *r = cx->r;
  size_t n_q = cx->n_q, n_k = cx->n_k, d = cx->d;
  size_t tq = r->bwd_tile_q ? r->bwd_tile_q : n_q;
  if (tq > n_q) tq = n_q;
  size_t sec = n_k;
  if (r->bwd_section) {
    sec = r->bwd_section;
    if (r->bwd_section_per_d) sec /= aa_attn_pow2_ceil((d + r->bwd_section_per_d - 1) / r->bwd_section_per_d);
    if (sec == 0) sec = 1;
    if (sec > n_k) sec = n_k;
  }
  size_t tk = n_k;
  if (r->bwd_tile_k) {
    tk = r->bwd_tile_k;
    if (n_k < tk) tk = r->bwd_tile_k_short ? r->bwd_tile_k_short : n_k;
  }
  if (tk > sec) tk = sec;
  size_t sub = r->bwd_sub_k && r->bwd_sub_k < tk ? r->bwd_sub_k : tk;
  size_t tt = tq * tk;
  bwd_tiling_t tl = {.tq = tq, .tk = tk, .sec = sec, .sub = sub, .inner = 1}, tl_outer = tl;
  tl_outer.inner = 0;
  int status = AA_OK, nth = 1;
  size_t skipped = 0;
#ifdef _OPENMP
  nth = omp_get_max_threads();
#endif
  if ((size_t)nth > cx->kv_heads) {
    /* Fewer KV heads than threads: KV heads in turn, the K tiles of each
       chunk in parallel (same arithmetic, same order of every sum). */
    bwd_buf_t b = {0};
    tile_buf_t *tbs = calloc((size_t)nth, sizeof *tbs);
    int ok = tbs != NULL && buf_alloc(&b, cx, tq, tk, sec);
    for (int i = 0; ok && i < nth; i++)
      ok = tile_alloc(&tbs[i], tt);
    for (size_t g = 0; ok && status == AA_OK && g < cx->kv_heads; g++)
      status = bwd_kv_head(cx, out, g, &b, tbs, &tl, &skipped);
    if (!ok) status = AA_ENOMEM;
    aa_reduce_stats_add(&out->dq_reduce, &b.rstats);
    if (tbs != NULL)
      for (int i = 0; i < nth; i++)
        tile_free(&tbs[i]);
    free(tbs);
    buf_free(&b);
  } else {
    long nkv = (long)cx->kv_heads;
#pragma omp parallel reduction(+ : skipped)
    {
      bwd_buf_t b;
      tile_buf_t tb = {0};
      int ok = buf_alloc(&b, cx, tq, tk, sec) && tile_alloc(&tb, tt);
      if (!ok) {
#pragma omp critical
        status = AA_ENOMEM;
      }
#pragma omp for schedule(dynamic, 1)
      for (long g = 0; g < nkv; g++) {
        if (!ok) continue;
        int st = bwd_kv_head(cx, out, (size_t)g, &b, &tb, &tl_outer, &skipped);
        if (st != AA_OK) {
#pragma omp critical
          status = st;
        }
      }
#pragma omp critical
      aa_reduce_stats_add(&out->dq_reduce, &b.rstats);
      tile_free(&tb);
      buf_free(&b);
    }
  }
  out->tiles_skipped = skipped;
  return status;
}
