/* attnacc: the FA2 split-KV forward and key-block order (keys fwd.k_order, fwd.splits, fwd.split_sms). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

size_t aa_attn_fwd_nsplits(const aa_attn_ctx_t *cx) {
  const aa_recipe_t *r = cx->r;
  size_t tkk = r->fwd_tile_k ? r->fwd_tile_k : cx->n_k;
  size_t nblk = (cx->n_k + tkk - 1) / tkk;
  if (r->fwd_split_keys > 0) /* a fixed split size: the count follows n_k alone */
    return (cx->n_k + r->fwd_split_keys - 1) / r->fwd_split_keys;
  if (r->fwd_split_sms > 0) /* FA2's num_splits_heuristic with twice the SM count (lib/attn/dispatch.c) */
    return aa_fa2_num_splits(cx->heads * ((cx->n_q + 63) / 64), 2 * r->fwd_split_sms, nblk, 128);
  return r->fwd_splits > 1 ? r->fwd_splits : 1;
}

/* The combine's LSE with sfu = sm90 (flash_fwd_kernel.h:1181-1204, FP32):
   one split per lane of kMaxSplits = the next power of two >= nsplit (the
   combine's Log_max_splits, flash_fwd_launch_template.h), the others -inf;
   expf(lse_s - max) per lane, summed by Allreduce's butterfly (shuffle-xor
   by kMaxSplits/2, ..., 1: lane 0 ends with ((e0+e4)+(e2+e6))+((e1+e5)+(e3+e7))
   for 8), then logf(sum) + max. ls holds lse_s at stride tq. */
static double combine_lse_sm90(const double *ls, size_t tq, size_t nsplit, double mx) {
  float e[128];
  size_t w = 2;
  while (w < nsplit)
    w *= 2;
  for (size_t s = 0; s < w; s++)
    e[s] = s < nsplit ? aa_expf_sm90((float)(ls[s * tq] - mx)) : 0.0f;
  for (size_t off = w / 2; off >= 1; off /= 2)
    for (size_t s = 0; s < off; s++) /* lane s after this step; lanes s and s^off agree */
      e[s] = e[s] + e[s + off];
  return (double)(aa_logf_sm90(e[0]) + (float)mx);
}

/* Split sp of the tile: its key blocks [b0, b1) through the online softmax,
   then per row O_s and lse_s (os, ls at stride tq), or with one split the
   final O and LSE. */
static int run_split(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq, double *qe,
                     double *S, double *P, uint8_t *vis, double *acc, double *m, double *l, size_t sp, double *os,
                     double *ls) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  size_t d = cx->d, n_k = cx->n_k, tkk = r->fwd_tile_k ? r->fwd_tile_k : n_k;
  size_t nblk = (n_k + tkk - 1) / tkk, nsplit = aa_attn_fwd_nsplits(cx);
  size_t per = r->fwd_split_keys > 0 ? r->fwd_split_keys / tkk : (nblk + nsplit - 1) / nsplit;
  size_t b0 = sp * per, b1 = (sp + 1) * per < nblk ? (sp + 1) * per : nblk;
  int st;
  memset(acc, 0, tq * d * sizeof *acc);
  for (size_t a = 0; a < tq * AA_ATTN_ROWSUM_LANES; a++)
    l[a] = 0;
  for (size_t a = 0; a < tq; a++)
    m[a] = -INFINITY;
  for (size_t bi = b0; bi < b1; bi++) {
    size_t b = r->fwd_k_desc ? b1 - 1 - (bi - b0) : bi;
    size_t j0 = b * tkk, tk = n_k - j0 < tkk ? n_k - j0 : tkk;
    /* the same block update as the plain forward, in this split's block order */
    if ((st = aa_attn_fwd_block(cx, h, i0, tq, qe, j0, tk, S, P, vis, acc, m, l)) != AA_OK) return st;
  }
  for (size_t a = 0; a < tq; a++) {
    size_t i = i0 + a;
    double *o = nsplit > 1 ? os + (sp * tq + a) * d : out->o.data + (h * cx->n_q + i) * d;
    double lse = -INFINITY, la = aa_attn_row_sum(cx, l + a * AA_ATTN_ROWSUM_LANES);
    if (la == 0 || m[a] == -INFINITY) {
      for (size_t c = 0; c < d; c++)
        o[c] = 0; /* empty row or split: O_s = 0, lse_s = -inf (FA2 writes -inf for split partials) */
    } else {
      double rr = aa_attn_alu(1.0 / la, alu);
      for (size_t c = 0; c < d; c++) {
        double x = r->fwd_o_norm == AA_NORM_RECIPROCAL ? aa_attn_alu(acc[a * d + c] * rr, alu)
                                                       : aa_attn_alu(acc[a * d + c] / la, alu);
        o[c] = nsplit > 1 ? x : aa_attn_rnd(x, r->io_fmt);
      }
      lse = aa_attn_fma(m[a], cx->se, aa_attn_lse_log(cx, la), alu);
    }
    if (nsplit > 1)
      ls[sp * tq + a] = lse;
    else
      out->lse.data[h * cx->n_q + i] = aa_attn_rnd(lse, r->fwd_lse_fmt);
  }
  return AA_OK;
}

/* Combine (the seeds and REFERENCES are silent on split-KV; modelled on
   FA2's combine kernel, combine_attn_seqk_parallel, and checked against
   H200 outputs, experiments/README-gpu.md) of row i of head h from its
   nsplit partials os + a*d, ls + a (split stride tq): lse = log(sum
   exp(lse_s - max)) + max in the ALU format, then O = sum exp(lse_s - lse)
   O_s by FMA in split order, rounded once to io; acc is d scratch. */
static void combine_row(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i, const double *os,
                        const double *ls, size_t tq, size_t nsplit, double *acc) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  size_t d = cx->d;
  double *o = out->o.data + (h * cx->n_q + i) * d;
  double mx = -INFINITY, sum = 0;
  for (size_t sp = 0; sp < nsplit; sp++)
    if (ls[sp * tq] > mx) mx = ls[sp * tq];
  if (mx == -INFINITY) { /* no visible key: the oracle's convention */
    for (size_t c = 0; c < d; c++)
      o[c] = 0;
    out->lse.data[h * cx->n_q + i] = -INFINITY;
    return;
  }
  double lse;
  if (r->sfu_sm90 && nsplit <= 128) /* FA2 allows at most 128 splits (flash_api.cpp:343) */
    lse = combine_lse_sm90(ls, tq, nsplit, mx);
  else {
    for (size_t sp = 0; sp < nsplit; sp++)
      sum = aa_attn_alu(sum + aa_attn_alu(exp(aa_attn_alu(ls[sp * tq] - mx, alu)), alu), alu);
    lse = aa_attn_alu(aa_attn_alu(log(sum), alu) + mx, alu);
  }
  for (size_t c = 0; c < d; c++)
    acc[c] = 0;
  for (size_t sp = 0; sp < nsplit; sp++) {
    double w = r->sfu_sm90 ? (double)aa_expf_sm90((float)(ls[sp * tq] - lse))
                           : aa_attn_alu(exp(aa_attn_alu(ls[sp * tq] - lse, alu)), alu);
    const double *src = os + sp * tq * d;
    for (size_t c = 0; c < d; c++)
      acc[c] = aa_attn_fma(w, src[c], acc[c], alu);
  }
  for (size_t c = 0; c < d; c++)
    o[c] = aa_attn_rnd(acc[c], r->io_fmt);
  out->lse.data[h * cx->n_q + i] = aa_attn_rnd(lse, r->fwd_lse_fmt);
}

/* One (head, q tile): the key blocks are cut into nsplit contiguous ranges
   of ceil(nblk / nsplit) blocks (FA2 compute_attn_1rowblock_splitkv:
   n_block_min = split * n_blocks_per_split); each range runs the online
   softmax of forward.c over its blocks, last block first with
   fwd.k_order = desc (FA2 iterates n_block from n_block_max - 1 down, so
   only the first block processed needs the boundary mask), and ends with
   its own normalised FP32 O_s = acc * (1/l) and lse_s = fma(m, scale, log l).
   With one split these are the final O (rounded to io) and LSE, as in
   forward.c. With several, flash_fwd_split_kv_combine_kernel merges them in
   the ALU format: lse_max = max lse_s (0 when all are -inf),
   sum = sum_s exp(lse_s - lse_max) in split order, lse = log(sum) + lse_max,
   O = sum_s fma(exp(lse_s - lse), O_s, O) from 0 in split order, then O is
   rounded to io. FA2 evaluates expf/logf/1/l with fast-math hardware
   approximations (ex2.approx, lg2.approx, rcp.approx); they are modelled by
   the recipe's exact exp and correctly rounded operations. */
int aa_attn_fwd_tile_split(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq, double *qe,
                           double *S, double *P, uint8_t *vis, double *acc, double *m, double *l) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, nsplit = aa_attn_fwd_nsplits(cx);
  if (cx->sinks != NULL || cx->keep_fwd != NULL || r->fwd_checkpoint != AA_CKPT_LSE ||
      r->fwd_softmax != AA_SOFTMAX_ONLINE_LSE)
    return AA_EUNSUPPORTED; /* aa_recipe_check refuses the recipe side; problem sinks and keep masks end here */
  double *os = NULL, *ls = NULL;
  if (nsplit > 1) {
    os = malloc(nsplit * tq * d * sizeof *os);
    ls = malloc(nsplit * tq * sizeof *ls);
    if (os == NULL || ls == NULL) {
      free(os);
      free(ls);
      return AA_ENOMEM;
    }
  }
  int st = AA_OK;
  aa_attn_load_q(cx, qe, cx->Q + (h * cx->n_q + i0) * d, tq);
  for (size_t sp = 0; sp < nsplit && st == AA_OK; sp++)
    st = run_split(cx, out, h, i0, tq, qe, S, P, vis, acc, m, l, sp, os, ls);
  if (st == AA_OK && nsplit > 1)
    for (size_t a = 0; a < tq; a++)
      combine_row(cx, out, h, i0 + a, os + a * d, ls + a, tq, nsplit, acc);
  free(os);
  free(ls);
  return st;
}
