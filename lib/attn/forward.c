/* attnacc: the emulated forward pass (online-LSE or two-pass softmax), producing O and the LSE checkpoint. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

static double sink_s(const aa_attn_ctx_t *cx, double sink) {
  return cx->r->scale_fold == AA_SCALE_EXP ? aa_attn_alu(sink / cx->scale, cx->r->alu_fmt) : sink;
}

/* The LSE checkpoint by fwd.lse_form (lib/recipe.h aa_lse_form_t). */
static double lse_formed(const aa_attn_ctx_t *cx, double m, double l) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  double lg = aa_attn_lse_log(cx, l);
  if (aa_recipe_lse_log2(r)) {
    /* the row max in log2 units, mi = fl(m c), back to natural units: log2-max over log2 e (xformers
       kernel_forward.h attention_kernel, step 7: accum_t(mi / kLog2e) + fast_log(s_prime), kLog2e a float), log2-ln2
       times fl(ln 2), log2-ln2-fma the same product and sum in one FFMA (cudnn-h100's decode and prefill, read from
       cuDNN's LSE, README-gpu 8.10) */
    double mi = aa_attn_alu(m * cx->c, alu);
    if (r->fwd_lse_form == AA_LSE_LOG2_LN2_FMA)
      return aa_attn_rnd(aa_attn_fma(mi, aa_attn_rnd(AA_ATTN_LN2, alu), lg, alu), r->fwd_lse_fmt);
    double nat = r->fwd_lse_form == AA_LSE_LOG2_MAX ? aa_attn_alu(mi / cx->l2e, alu)
                                                    : aa_attn_alu(mi * aa_attn_rnd(AA_ATTN_LN2, alu), alu);
    return aa_attn_rnd(aa_attn_alu(nat + lg, alu), r->fwd_lse_fmt);
  }
  /* [fa2]: LSE = row_max*scale + log(sum) (FA2 writes it as one FFMA). */
  double lse = aa_attn_rnd(aa_attn_fma(m, cx->se, lg, alu), r->fwd_lse_fmt);
  if (r->fwd_lse_form == AA_LSE_LOG2_TRIP) {
    /* FlexAttention's dense path: math_attention returns logsumexp / math.log(2) (a CUDA division by a CPU
       scalar is a multiply by the float reciprocal of the float divisor, BinaryDivTrueKernel.cu
       div_true_kernel_cuda), sdpa_dense_backward multiplies it by math.log(2) (held in float) */
    double ln2 = aa_attn_rnd(AA_ATTN_LN2, alu), inv = aa_attn_alu(1.0 / ln2, alu);
    lse =
        aa_attn_rnd(aa_attn_alu(aa_attn_rnd(aa_attn_alu(lse * inv, alu), r->fwd_lse_fmt) * ln2, alu), r->fwd_lse_fmt);
  }
  return lse;
}

/* Natural-log LSE from the row state (m in S units, l the row sum), through
   the recipe's checkpoint. */
static double checkpoint_lse(const aa_attn_ctx_t *cx, double m, double l) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  if (l == 0 || m == -INFINITY) return -INFINITY; /* empty row: the oracle's convention */
  if (r->fwd_checkpoint == AA_CKPT_LSE) return lse_formed(cx, m, l);
  /* [nki-bwd] "The single-exp and the LSE sign chain": the forward emits
     (neg_max, 1/sum); the host forms lse = -(neg_max + log(recip)). */
  double neg_max = aa_attn_rnd(-aa_attn_alu(m * cx->se, alu), r->fwd_lse_fmt);
  double recip = aa_attn_rnd(aa_attn_alu(1.0 / l, alu), r->fwd_lse_fmt);
  double lg = aa_attn_alu(log(recip), alu);
  return aa_attn_rnd(-aa_attn_alu(neg_max + lg, alu), r->fwd_lse_fmt);
}

/* Final O row: acc / l (or acc * (1/l)), times the dropout rescale as FA2
   folds rp_dropout into the final multiply, rounded to io. */
static void finish_row(const aa_attn_ctx_t *cx, double *o, const double *acc, double m, double l) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  size_t d = cx->d;
  if (l == 0 || m == -INFINITY) {
    for (size_t c = 0; c < d; c++)
      o[c] = 0;
    return;
  }
  if (r->fwd_o_norm == AA_NORM_RECIPROCAL) {
    double rr = aa_attn_alu(1.0 / l, alu);
    if (cx->keep_fwd != NULL) rr = aa_attn_alu(rr * cx->ks, alu);
    for (size_t c = 0; c < d; c++)
      o[c] = aa_attn_rnd(aa_attn_alu(acc[c] * rr, alu), r->io_fmt);
  } else {
    for (size_t c = 0; c < d; c++) {
      double x = aa_attn_alu(acc[c] / l, alu);
      if (cx->keep_fwd != NULL) x = aa_attn_alu(x * cx->ks, alu);
      o[c] = aa_attn_rnd(x, r->io_fmt);
    }
  }
}

/* FA4's choice of the software exp2 (flash_attn/cute/softmax.py
   apply_exp2_convert): key c of a tk-key block lies in fragment j = c / 32
   at k = c % 32; the pair starting at even k is emulated when k % freq >=
   freq - res, j >= start and j is not the last fragment. */
static const aa_exp_t *fwd_construction(const aa_attn_ctx_t *cx, size_t c, size_t tk) {
  const aa_recipe_t *r = cx->r;
  if (cx->wexp_emu == NULL) return cx->wexp_fwd;
  size_t j = c / 32, k = (c % 32) & ~(size_t)1, f = r->fwd_exp_emu_freq, frg = tk / 32;
  int hw = k % f < f - (r->fwd_exp_emu_res < f ? r->fwd_exp_emu_res : f) || j + 1 >= frg || j < r->fwd_exp_emu_start;
  return hw ? cx->wexp_fwd : cx->wexp_emu;
}

/* The row sum's partials (fwd.rowsum_split). FA2 keeps one partial per lane
   of the quad that holds a row of the m16n8 accumulator: lane t holds the
   columns c with (c mod 8) div 2 = t and sums them in ascending order into
   its own running sum (softmax.h:23-36 thread_reduce_, :144 and :165
   reduce_sum), rescales it with the row (:158), and only
   normalize_softmax_lse combines the four (:172 quad_allreduce_, utils.h
   Allreduce<4>: shuffle-xor 2, then 1, so (l0 + l2) + (l1 + l3)). l holds
   AA_ATTN_ROWSUM_LANES entries per row; without the split only lane 0. */
static size_t rowsum_lane(const aa_recipe_t *r, size_t c) {
  return r->fwd_rowsum_quad ? (c % 8) / 2 : 0;
}

double aa_attn_row_sum(const aa_attn_ctx_t *cx, const double *la) {
  const aa_recipe_t *r = cx->r;
  if (!r->fwd_rowsum_quad) return la[0];
  double a = aa_attn_rnd(aa_attn_alu(la[0] + la[2], r->alu_fmt), r->fwd_rowsum_fmt);
  double b = aa_attn_rnd(aa_attn_alu(la[1] + la[3], r->alu_fmt), r->fwd_rowsum_fmt);
  return aa_attn_rnd(aa_attn_alu(a + b, r->alu_fmt), r->fwd_rowsum_fmt);
}

/* FA2 softmax_rescale_o on a row whose max moves from m_old to m_new:
   scale = exp2((m_old - m_new) * scale_log2); row_sum *= scale (each of the
   AA_ATTN_ROWSUM_LANES partials at la); acc_o *= scale (arow). */
static void rescale_row(const aa_attn_ctx_t *cx, double *la, double *arow, double m_old, double m_new) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  double arg = aa_attn_alu(aa_attn_alu(m_old - m_new, alu) * cx->c, alu);
  /* fwd.lse_form = log2-max: the maxima are held in log2 units (kernel_forward.h iterative_softmax:
     exp2f(m_prime - mi)) */
  if (aa_recipe_lse_log2(r))
    arg = aa_attn_alu(aa_attn_alu(m_old * cx->c, alu) - aa_attn_alu(m_new * cx->c, alu), alu);
  double alpha = r->sfu_sm90 ? (double)aa_exp2f_sm90((float)arg) : aa_attn_exp(cx, arg);
  /* fwd.rowsum_rescale = fma: the product is left exact (fp32 x fp32 fits binary64) and rounded by
     the lane's next add, or by its next masked column (p = 0): one FFMA, as nvcc contracts
     row_sum *= scale (softmax.h:158) with the first add of reduce_sum (:165). */
  for (size_t t = 0; t < AA_ATTN_ROWSUM_LANES; t++)
    la[t] = r->fwd_rowsum_fma ? la[t] * alpha : aa_attn_rnd(aa_attn_alu(la[t] * alpha, alu), r->fwd_rowsum_fmt);
  for (size_t c = 0; c < cx->d; c++)
    arow[c] = aa_attn_rnd(aa_attn_alu(arow[c] * alpha, alu), r->fwd_o_acc_fmt);
}

/* The weights of one row of a tk-key block against the shift bb: P row
   prow (0 where masked or dropped), the row sum's lanes la; krow is the
   row's dropout keep mask or NULL. */
static void row_weights(const aa_attn_ctx_t *cx, double *prow, double *la, const double *srow, const uint8_t *vrow,
                        const uint8_t *krow, size_t tk, double bb) {
  const aa_recipe_t *r = cx->r;
  double top = aa_fmt_info(r->fwd_p_fmt)->max_finite, pmax = 0;
  size_t cast = 0, over = 0, under = 0;
  const int pk = (int)r->fwd_p_scale_exp, unscaled = r->quant_p_scale == 1.0;
  for (size_t b = 0; b < tk; b++) {
    if (!vrow[b]) {
      size_t t0 = rowsum_lane(r, b); /* a masked column adds 0: rounds a pending fused rescale */
      la[t0] = aa_attn_rnd(la[t0], r->fwd_rowsum_fmt);
      prow[b] = 0;
      continue;
    }
    double p = aa_attn_wexp(cx, fwd_construction(cx, b, tk), aa_attn_exparg(cx, srow[b], bb));
    /* P rounded before PV ([fa2]); FP8: times 2^Max_offset
       first (flash-attention hopper/softmax.h:66-69; the row sum and O
       carry the power of two exactly and finalize divides it out,
       softmax.h:146-150), modelled by scaling back */
    double pc = p, pr;
    if (pk == 0 && unscaled) { /* every BF16/FP16 P: two ldexp calls and two multiplies by one saved per weight */
      pr = aa_attn_p_rnd(r, pc);
    } else {
      pc = ldexp(p, pk) * r->quant_p_scale;
      pr = ldexp(aa_attn_p_rnd(r, pc) / r->quant_p_scale, -pk);
    }
    cast++, over += pc > top, under += pc > 0 && pr == 0, pmax = pc > pmax ? pc : pmax;
    size_t t = rowsum_lane(r, b);
    la[t] = aa_attn_rnd(la[t] + (r->fwd_rowsum_rounded ? pr : p), r->fwd_rowsum_fmt);
    /* Dropout: dropped weights are zeroed; the 1/keep rescale is folded
       into the final normalisation (FA2). The row sum keeps them. */
    prow[b] = (krow != NULL && !krow[b]) ? 0.0 : pr;
  }
  if (cx->pcast == NULL) return;
#pragma omp critical(aa_attn_pcast)
  {
    cx->pcast->p_cast += cast, cx->pcast->p_over += over, cx->pcast->p_under += under;
    if (pmax > cx->pcast->p_max) cx->pcast->p_max = pmax;
  }
}

/* One key block [j0, j0 + tk) of the online-LSE softmax for the q tile
   (h, i0, tq): scores, running max and rescale, weights, P V into acc.
   Shared by the plain forward and FA2's split-KV forward (forward_split.c),
   which runs it over each split's blocks in its own order. */
int aa_attn_fwd_block(const aa_attn_ctx_t *cx, size_t h, size_t i0, size_t tq, double *qe, size_t j0, size_t tk,
                      double *S, double *P, uint8_t *vis, double *acc, double *m, double *l) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  size_t d = cx->d, n_k = cx->n_k, kvh = h / cx->group;
  const double *K = cx->K + kvh * n_k * d, *V = cx->V + kvh * n_k * d;
  int st;
  /* A tile with every element masked changes nothing (m, l and acc keep
     their values exactly), so it is skipped as the kernels do. */
  if (aa_attn_visible(cx, vis, h, i0, tq, j0, tk) == 0) return AA_OK;
  st = aa_attn_scores(cx, S, qe, tq, K + j0 * d, tk, r->fwd_acc_qk, r->fwd_qk_gemv);
  if (st != AA_OK) return st;
  aa_attn_score_mod(cx, S, NULL, h, i0, tq, j0, tk);
  for (size_t a = 0; a < tq; a++) {
    double *srow = S + a * tk, *prow = P + a * tk;
    const uint8_t *vrow = vis + a * tk;
    double mx = -INFINITY;
    for (size_t b = 0; b < tk; b++)
      if (vrow[b] && srow[b] > mx) mx = srow[b];
    double m_old = m[a], m_new = m_old;
    if (mx > m_old) {
      /* [fa2], [fa4]: FA2 rescales on every increase; FA4 only when
         the max grows by more than 8 (log2 units): the threshold key. */
      if (m_old == -INFINITY || (mx - m_old) * fabs(cx->c) > r->fwd_rescale_threshold) m_new = mx;
    }
    if (m_new == -INFINITY) { /* nothing visible yet in this row */
      for (size_t b = 0; b < tk; b++)
        prow[b] = 0;
      continue;
    }
    if (m_new != m_old && m_old != -INFINITY)
      rescale_row(cx, l + a * AA_ATTN_ROWSUM_LANES, acc + a * d, m_old, m_new);
    m[a] = m_new;
    /* FA2: max_scaled = m * scale_log2 (one FP32 multiply), then
       p = exp2(fma(S, scale_log2, -max_scaled)); natural: exp(S - m). */
    double bb = aa_attn_alu(m_new * cx->c, alu);
    const uint8_t *krow = cx->keep_fwd != NULL ? cx->keep_fwd + ((h * cx->n_q + i0 + a) * n_k + j0) : NULL;
    row_weights(cx, prow, l + a * AA_ATTN_ROWSUM_LANES, srow, vrow, krow, tk, bb);
  }
  aa_attn_quant_rows(r, r->quant_p, P, tq, tk, tk);
  /* O accumulator continues across K tiles (chained MMA into acc_o; quant.pv_buffer: lib/attn/quant.c). */
  return aa_attn_quant_pv(cx, kvh, acc, P, V + j0 * d, tq, tk);
}

/* fwd.sink_at = end: after the last key block each sink adds exp(sink - m) to lane 0 of the row sum, against the
   row's final max m, which it never raises ([fa4] flash_fwd_sm100.py:2731-2742 at 0251105a: row_sum +=
   exp2(sink log2(e) - row_max scale_log2 + max_offset); the 2^max_offset is divided out here as everywhere). A row
   with no visible key takes the largest sink as its max (:2734-2736: row_max = sink, row_sum = 2^max_offset). */
static void add_sinks_at_end(const aa_attn_ctx_t *cx, double *l0, double *m, const double *sinks) {
  const aa_recipe_t *r = cx->r;
  if (*m == -INFINITY)
    for (size_t s = 0; s < cx->pb->num_sinks; s++)
      *m = fmax(*m, sink_s(cx, sinks[s]));
  double b = aa_attn_alu(*m * cx->c, r->alu_fmt);
  for (size_t s = 0; s < cx->pb->num_sinks; s++) {
    double p = aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_fma(sink_s(cx, sinks[s]), cx->c, -b, r->alu_fmt));
    *l0 = aa_attn_rnd(*l0 + p, r->fwd_rowsum_fmt);
  }
}

/* One (head, q tile) of the online-LSE forward. */
static int fwd_tile_online(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq, double *qe,
                           double *S, double *P, uint8_t *vis, double *acc, double *m, double *l) {
  const aa_recipe_t *r = cx->r;
  const aa_problem_t *pb = cx->pb;
  aa_fmt_t alu = r->alu_fmt;
  size_t d = cx->d, n_k = cx->n_k;
  size_t tkk = r->fwd_tile_k ? r->fwd_tile_k : n_k;
  const double *sinks = cx->sinks != NULL ? cx->sinks + h * pb->num_sinks : NULL;
  int st;

  /* forward_split.c runs desc orders and splits; it refuses sinks, so one split in desc order with sinks walks the
     blocks here (the sinks still open the row) */
  int desc_here =
      r->fwd_k_desc && sinks != NULL && r->fwd_splits <= 1 && r->fwd_split_sms == 0 && r->fwd_split_keys == 0;
  if (!desc_here && (r->fwd_k_desc || r->fwd_splits > 1 || r->fwd_split_sms > 0 || r->fwd_split_keys > 0))
    return aa_attn_fwd_tile_split(cx, out, h, i0, tq, qe, S, P, vis, acc, m, l);
  aa_attn_load_q(cx, qe, cx->Q + (h * cx->n_q + i0) * d, tq);
  memset(acc, 0, tq * d * sizeof *acc);
  for (size_t a = 0; a < tq; a++) {
    m[a] = -INFINITY;
    for (size_t t = 0; t < AA_ATTN_ROWSUM_LANES; t++)
      l[a * AA_ATTN_ROWSUM_LANES + t] = 0;
    if (sinks == NULL || r->fwd_sink_end) continue;
    /* Sinks open the row: they set the first max and row sum (they join the
       softmax denominator, REFERENCES/[nki-bwd] "Attention-sink gradient"). */
    for (size_t s = 0; s < pb->num_sinks; s++)
      m[a] = fmax(m[a], sink_s(cx, sinks[s]));
    double b = aa_attn_alu(m[a] * cx->c, alu);
    for (size_t s = 0; s < pb->num_sinks; s++) {
      double p = aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_fma(sink_s(cx, sinks[s]), cx->c, -b, alu));
      double *l0 = l + a * AA_ATTN_ROWSUM_LANES; /* sinks join lane 0 */
      *l0 = aa_attn_rnd(*l0 + (r->fwd_rowsum_rounded ? aa_attn_p_rnd(r, p) : p), r->fwd_rowsum_fmt);
    }
  }
  size_t nblocks = (n_k + tkk - 1) / tkk;
  for (size_t bi = 0; bi < nblocks; bi++) {
    size_t j0 = (desc_here ? nblocks - 1 - bi : bi) * tkk, tk = n_k - j0 < tkk ? n_k - j0 : tkk;
    if ((st = aa_attn_fwd_block(cx, h, i0, tq, qe, j0, tk, S, P, vis, acc, m, l)) != AA_OK) return st;
  }
  if (sinks != NULL && r->fwd_sink_end)
    for (size_t a = 0; a < tq; a++)
      add_sinks_at_end(cx, l + a * AA_ATTN_ROWSUM_LANES, m + a, sinks);
  for (size_t a = 0; a < tq; a++) {
    size_t i = i0 + a;
    double la = aa_attn_row_sum(cx, l + a * AA_ATTN_ROWSUM_LANES);
    finish_row(cx, out->o.data + (h * cx->n_q + i) * d, acc + a * d, m[a], la);
    out->lse.data[h * cx->n_q + i] = checkpoint_lse(cx, m[a], la);
  }
  return AA_OK;
}

/* The online tile for the guarded forward's recovery (forward_fixed.c). */
int aa_attn_fwd_tile_online(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq,
                            double *qe, double *S, double *P, uint8_t *vis, double *acc, double *m, double *l) {
  return fwd_tile_online(cx, out, h, i0, tq, qe, S, P, vis, acc, m, l);
}

/* One (head, q tile) of the two-pass forward: whole rows, P normalised
   before PV, O = round(P V) (naive math attention). */
static int fwd_tile_twopass(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq,
                            double *qe, double *S, double *P, uint8_t *vis, double *acc) {
  const aa_recipe_t *r = cx->r;
  const aa_problem_t *pb = cx->pb;
  size_t d = cx->d, n_k = cx->n_k, kvh = h / cx->group;
  const double *K = cx->K + kvh * n_k * d, *V = cx->V + kvh * n_k * d;
  const double *sinks = cx->sinks != NULL ? cx->sinks + h * pb->num_sinks : NULL;
  aa_attn_load_q(cx, qe, cx->Q + (h * cx->n_q + i0) * d, tq);
  aa_attn_visible(cx, vis, h, i0, tq, 0, n_k);
  int st = aa_attn_scores(cx, S, qe, tq, K, n_k, r->fwd_acc_qk, r->fwd_qk_gemv);
  if (st != AA_OK) return st;
  aa_attn_score_mod(cx, S, NULL, h, i0, tq, 0, n_k);
  for (size_t a = 0; a < tq; a++) {
    double m, l;
    double *prow = P + a * n_k;
    aa_attn_twopass_row(cx, prow, S + a * n_k, vis + a * n_k, n_k, sinks, &m, &l);
    out->lse.data[h * cx->n_q + i0 + a] = checkpoint_lse(cx, m, l);
    if (cx->keep_fwd != NULL) {
      const uint8_t *krow = cx->keep_fwd + (h * cx->n_q + i0 + a) * n_k;
      for (size_t b = 0; b < n_k; b++)
        prow[b] = krow[b] ? aa_attn_p_rnd(r, aa_attn_alu(prow[b] * cx->ks, r->alu_fmt)) : 0.0;
    }
  }
  aa_attn_quant_rows(r, r->quant_p, P, tq, n_k, n_k);
  st = aa_gemm(acc, d, P, n_k, 0, V, d, 0, tq, d, n_k, 0, r->fwd_acc_pv);
  if (st != AA_OK) return st;
  double *o = out->o.data + (h * cx->n_q + i0) * d;
  for (size_t x = 0; x < tq * d; x++)
    o[x] = aa_attn_rnd(aa_attn_rnd(acc[x], r->fwd_o_acc_fmt), r->io_fmt);
  return AA_OK;
}

int aa_attn_forward(const aa_attn_ctx_t *cx0, aa_attn_result_t *out) {
  aa_attn_ctx_t cxl = *cx0; /* with the P-cast counters */
  const aa_attn_ctx_t *cx = &cxl;
  const aa_recipe_t *r = cx->r;
  cxl.pcast = out;
  size_t n_q = cx->n_q, n_k = cx->n_k, d = cx->d;
  size_t tq = r->fwd_tile_q ? r->fwd_tile_q : n_q;
  if (tq > n_q) tq = n_q;
  size_t tkk = r->fwd_softmax == AA_SOFTMAX_TWO_PASS ? n_k : (r->fwd_tile_k ? r->fwd_tile_k : n_k);
  if (tkk > n_k) tkk = n_k;
  size_t ntiles = (n_q + tq - 1) / tq, njobs = ntiles * cx->heads;
  int status = AA_OK;
#pragma omp parallel
  {
    double *qe = malloc(tq * d * sizeof *qe), *acc = malloc(tq * d * sizeof *acc);
    double *S = malloc(tq * tkk * sizeof *S), *P = malloc(tq * tkk * sizeof *P);
    double *m = malloc(tq * sizeof *m), *l = malloc(tq * AA_ATTN_ROWSUM_LANES * sizeof *l);
    uint8_t *vis = malloc(tq * tkk);
    int ok = qe && acc && S && P && m && l && vis;
    if (!ok) {
#pragma omp critical
      status = AA_ENOMEM;
    }
#pragma omp for schedule(dynamic, 1)
    for (size_t job = 0; job < njobs; job++) {
      if (!ok) continue;
      size_t h = job / ntiles, i0 = (job % ntiles) * tq;
      size_t rows = n_q - i0 < tq ? n_q - i0 : tq;
      int st = r->fwd_softmax == AA_SOFTMAX_TWO_PASS ? fwd_tile_twopass(cx, out, h, i0, rows, qe, S, P, vis, acc)
               : r->fwd_softmax == AA_SOFTMAX_FIXED_SHIFT || r->fwd_softmax == AA_SOFTMAX_GUARDED
                   ? aa_attn_fwd_tile_shifted(cx, out, h, i0, rows, qe, S, P, vis, acc, m, l) /* forward_fixed.c */
                   : fwd_tile_online(cx, out, h, i0, rows, qe, S, P, vis, acc, m, l);
      if (st != AA_OK) {
#pragma omp critical
        status = st;
      }
    }
    free(qe);
    free(acc);
    free(S);
    free(P);
    free(m);
    free(l);
    free(vis);
  }
  return status;
}
