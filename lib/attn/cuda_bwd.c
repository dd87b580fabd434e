/* attnacc: which backwards the GPU emulation runs (an explicit list of recipe values), and its inputs and outputs. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-bwd-core.h"
#include "attn-cuda.h"
#include "attn-impl.h"

#ifndef AA_HAVE_CUDA /* no kernels in this build: the device side says so */
int aa_atcu_backward(const aa_core_bwd_t *p, float *dQ, float *dK, float *dV, unsigned *bad, size_t *redone) {
  (void)p, (void)dQ, (void)dK, (void)dV, (void)bad, (void)redone;
  return AA_EUNSUPPORTED;
}
#endif

/* A product model with an FP32 result (so that S, dP and the accumulators need no rounding of their own): {K, F,
   23} as aa_attn_tc_model gives it. */
static int tc_model(aa_accum_t m, int *out) {
  return aa_attn_tc_model(m, &out[0], &out[1], &out[2]) && out[2] == 23;
}

/* The backward's tiles as backward.c's aa_attn_backward sets them; 0 when they are outside the core's (several
   sections, a dQ sub-tile below the key tile). */
static int tiles(const aa_attn_ctx_t *cx, size_t *tq, size_t *tk) {
  const aa_recipe_t *r = cx->r;
  *tq = r->bwd_tile_q ? r->bwd_tile_q : cx->n_q;
  if (*tq > cx->n_q) *tq = cx->n_q;
  *tk = cx->n_k;
  if (r->bwd_tile_k) {
    *tk = r->bwd_tile_k;
    if (cx->n_k < *tk) *tk = r->bwd_tile_k_short ? r->bwd_tile_k_short : cx->n_k;
  }
  return r->bwd_section == 0 && *tq > 0 && *tk > 0 && (r->bwd_sub_k == 0 || r->bwd_sub_k >= *tk);
}

/* Every recipe field backward.c (and run.c's run_backward) reads on the backward's path is a parameter of
   aa_core_bwd_t or holds the value listed here: the LSE or reciprocal backward with the sm90 exp2, the
   quadratic BF16 exp or the exact exp of the weights, FP32 everywhere inside, dK/dV chained, dQ by ordered FP32
   adds, BF16 pairs or bounded fixed point, the scales at the end or per tile, on plain problems. dP may be rounded
   (bwd.dp_fmt); the two-pass softmax's scores may be BF16 (its P goes through aa_core_score). */
static int fmts_supported(const aa_recipe_t *r) {
  int s_ok = r->s_fmt == AA_FMT_FP32 || (r->fwd_softmax == AA_SOFTMAX_TWO_PASS && r->s_fmt == AA_FMT_BF16);
  return r->alu_fmt == AA_FMT_FP32 && s_ok && aa_attn_core_fmt(r->bwd_dp_fmt) >= 0 && r->bwd_d_fmt == AA_FMT_FP32 &&
         r->bwd_dq_acc_fmt == AA_FMT_FP32 && r->bwd_dq_section_fmt == AA_FMT_FP32 &&
         r->bwd_dkv_acc_fmt == AA_FMT_FP32 && aa_attn_core_fmt(r->io_fmt) > 0 &&
         aa_attn_core_fmt(r->bwd_p_ds_fmt) >= 0 && aa_attn_core_fmt(r->bwd_p_dv_fmt) >= 0 &&
         aa_attn_core_fmt(r->bwd_ds_fmt) >= 0;
}

/* The dq_reduce kinds aa_core_bwd_dq reduces as aa_reduce_tile does (the fixed kind without its probe). */
static int reduce_supported(const aa_reduce_t *red) {
  return red->kind == AA_REDUCE_FP32_ORDERED || red->kind == AA_REDUCE_SECTION_ROUNDTRIP ||
         (red->kind == AA_REDUCE_BF16_PAIR && (red->pair == AA_PAIR_CHAIN || red->pair == AA_PAIR_TREE)) ||
         (red->kind == AA_REDUCE_FIXED && red->probe == 0 && red->width >= 2 && red->width <= 32);
}

/* The backward's normalisation: the LSE, or bwd.norm = recip with run.c's scaled dO and biases in cx (the
   forwards that save LSE or reciprocals; the backward reads nothing else of them). */
static int norm_supported(const aa_attn_ctx_t *cx) {
  const aa_recipe_t *r = cx->r;
  int fwd = r->fwd_softmax == AA_SOFTMAX_ONLINE_LSE || r->fwd_softmax == AA_SOFTMAX_FIXED_SHIFT ||
            r->fwd_softmax == AA_SOFTMAX_GUARDED || r->fwd_softmax == AA_SOFTMAX_TWO_PASS;
  return fwd && r->fwd_checkpoint == AA_CKPT_LSE &&
         ((r->bwd_norm == AA_BWDNORM_LSE && cx->bias == NULL) ||
          (r->bwd_norm == AA_BWDNORM_RECIP && cx->bias != NULL));
}

static int models(const aa_recipe_t *r, int m[5][3]) {
  return tc_model(r->bwd_acc_qk, m[AA_CORE_QK]) && tc_model(r->bwd_acc_dp, m[AA_CORE_DP]) &&
         tc_model(r->bwd_acc_dv, m[AA_CORE_DV]) && tc_model(r->bwd_acc_dk, m[AA_CORE_DK]) &&
         tc_model(r->bwd_acc_dq, m[AA_CORE_DQ]);
}

/* fwd.softmax: two-pass with P recomputed by the two-pass row (bwd.twopass_p = saved; fwd.exp exact, fwd.rowsum_fmt
   FP32, fwd.p_fmt a core format) over one key tile of tk keys; the others as norm_supported says. */
static int softmax_supported(const aa_attn_ctx_t *cx, size_t tk) {
  const aa_recipe_t *r = cx->r;
  if (r->fwd_softmax == AA_SOFTMAX_TWO_PASS)
    return !r->bwd_twopass_lse && tk >= cx->n_k && cx->wexp_fwd == NULL && r->fwd_rowsum_fmt == AA_FMT_FP32 &&
           aa_attn_core_fmt(r->fwd_p_fmt) >= 0;
  return 1;
}

int aa_attn_cuda_bwd_supported(const aa_attn_ctx_t *cx) {
  const aa_recipe_t *r = cx->r;
  const aa_exp_t *e = cx->wexp_bwd;
  int m[5][3];
  size_t tq, tk;
  int exp2 = r->exp_form == AA_EXPFORM_EXP2_FMA || r->exp_form == AA_EXPFORM_EXP2_MULSUB;
  /* the weights' exp: the sm90 exp2 model, the quadratic BF16 exp (FP32 order), or the exact exp of any form,
     whose doubtful roundings the host redoes */
  int exp_ok = e == NULL ? exp2 || r->exp_form == AA_EXPFORM_NATURAL
                         : exp2 && (e->kind == AA_EXP_EX2_SM90 || e->kind == AA_EXP_QUADRATIC_BF16) &&
                               e->order == AA_EXP_ORDER_FP32;
  /* bwd.exp_form arrives here resolved (run.c backward_own_exp_form) */
  return fmts_supported(r) && models(r, m) && tiles(cx, &tq, &tk) && norm_supported(cx) &&
         softmax_supported(cx, tk) && r->bwd_k_prescale == 0 && exp_ok &&
         (r->scale_fold == AA_SCALE_EXP || r->scale_fold == AA_SCALE_S) &&
         (r->bwd_d_source == AA_DSRC_O_DO || (r->bwd_d_source == AA_DSRC_P_DP && tk >= cx->n_k)) &&
         (r->bwd_dq_scale == AA_GSCALE_NONE || r->bwd_dq_scale == AA_GSCALE_TILE ||
          r->bwd_dq_scale == AA_GSCALE_END) &&
         r->bwd_dkv_accumulate == AA_KVACC_CHAIN && reduce_supported(&r->bwd_dq_reduce) && r->quant_ds == 0 &&
         ((r->bwd_dp_gemv | r->bwd_qk_gemv | r->fwd_qk_gemv) == 0 ||
          cx->n_q > 1) && /* GEMV orders are the host's (vendor_order.c) */
         cx->keep_bwd == NULL &&
         cx->mod == 0 && cx->masked == 0 && cx->sinks == NULL && cx->d >= 1 && cx->d <= AA_CORE_MAXD &&
         cx->pb->varlen_batch == 0;
}

/* x in FP32; 0 without memory or when a value is not exact in FP32 (an operand the core cannot take as is). */
static int to_f32(float **dst, const double *x, size_t n) {
  float *f = *dst = malloc((n ? n : 1) * sizeof **dst);
  size_t inexact = 0;
  if (f == NULL) return 0;
#pragma omp parallel for reduction(+ : inexact) schedule(static) if (n >= ((size_t)1 << 16))
  for (size_t i = 0; i < n; i++) {
    f[i] = (float)x[i];
    inexact += (double)f[i] != x[i] && x[i] == x[i];
  }
  return inexact == 0;
}

/* The pairs backward.c computes (skip_masked: those whose tile some row sees); returns the skipped count. */
static size_t fill_seen(unsigned char *seen, const aa_core_bwd_t *p, int skip) {
  size_t skipped = 0;
  for (size_t t = 0; t < p->nqt; t++)
    for (size_t kt = 0; kt < p->nkt; kt++) {
      size_t i1 = (t + 1) * p->tq < p->n_q ? (t + 1) * p->tq : p->n_q;
      int64_t j0 = (int64_t)(kt * p->tk), j1 = (int64_t)((kt + 1) * p->tk < p->n_k ? (kt + 1) * p->tk : p->n_k);
      int s = !skip;
      for (size_t i = t * p->tq; i < i1 && !s; i++)
        s = (p->lo[i] > j0 ? p->lo[i] : j0) < (p->hi[i] < j1 ? p->hi[i] : j1);
      seen[t * p->nkt + kt] = (unsigned char)s;
      skipped += !s;
    }
  return skipped;
}

/* Each row's exp bias as backward.c pair_p forms it: -inf where the LSE is (P = 0), else cx->bias (bwd.norm =
   recip, backward_recip.c) or LSE*log2e in one ALU multiply (the LSE itself for the natural exp). 0 when a row with
   an LSE has the bias -inf, whose exp argument +inf the core does not take (the CPU runs it). */
static int row_bias(double *bb, const aa_attn_ctx_t *cx, const aa_attn_result_t *out) {
  const aa_recipe_t *r = cx->r;
  size_t rows = cx->heads * cx->n_q, refused = 0;
#pragma omp parallel for reduction(+ : refused) schedule(static) if (rows >= 4096)
  for (size_t row = 0; row < rows; row++) {
    double L = out->lse.data[row];
    bb[row] = cx->bias != NULL ? cx->bias[row] : aa_attn_exp2form(r) ? aa_attn_alu(L * cx->l2e, r->alu_fmt) : L;
    if (L == -INFINITY)
      bb[row] = -INFINITY;
    else if (bb[row] == -INFINITY)
      refused++;
  }
  return refused == 0;
}

/* The weights' exp construction (bwd.exp) and the dQ reduction's parameters. */
static void fill_exp_dq(aa_core_bwd_t *p, const aa_attn_ctx_t *cx) {
  const aa_exp_t *e = cx->wexp_bwd;
  const aa_reduce_t *red = &cx->r->bwd_dq_reduce;
  p->sm90 = e != NULL && e->kind == AA_EXP_EX2_SM90;
  p->quad = e != NULL && e->kind == AA_EXP_QUADRATIC_BF16;
  if (p->quad) p->quad_k = e->kf, p->quad_d1 = e->df1, p->quad_s = e->sf, p->quad_rz = e->cvt == AA_RND_Z;
  p->dq_tile = cx->r->bwd_dq_scale == AA_GSCALE_TILE;
  p->dq_kind = red->kind == AA_REDUCE_FIXED       ? AA_CORE_RED_FIXED
               : red->kind != AA_REDUCE_BF16_PAIR ? AA_CORE_RED_ORDERED
               : red->pair == AA_PAIR_CHAIN       ? AA_CORE_RED_CHAIN
                                                  : AA_CORE_RED_TREE;
  p->fx_width = (int)red->width, p->fx_up = ldexp(1.0, red->scale_exp), p->fx_down = ldexp(1.0, -red->scale_exp);
}

/* The forward's row parameters the two-pass P is recomputed with (aa_core_tp_stats): the backward's operands and
   score model, the forward's softmax. */
static void fill_twopass(aa_core_fwd_t *tp, const aa_attn_ctx_t *cx, const aa_core_bwd_t *p) {
  const aa_recipe_t *r = cx->r;
  memset(tp, 0, sizeof *tp);
  tp->Q = p->Q, tp->K = p->K, tp->lo = p->lo, tp->hi = p->hi;
  tp->n_q = p->n_q, tp->n_k = p->n_k, tp->d = p->d, tp->heads = p->heads, tp->group = p->group;
  tp->qk_bk = p->tc[AA_CORE_QK][0], tp->qk_fb = p->tc[AA_CORE_QK][1], tp->qk_ob = p->tc[AA_CORE_QK][2];
  tp->s_fmt = aa_attn_core_fmt(r->s_fmt), tp->scale_s = p->scale_s, tp->scale = p->scale, tp->c = p->c;
  tp->natural = p->natural, tp->mulsub = p->mulsub, tp->rs_rounded = r->fwd_rowsum_rounded;
  tp->p_fmt = aa_attn_core_fmt(r->fwd_p_fmt), tp->o_recip = r->fwd_o_norm == AA_NORM_RECIPROCAL;
}

/* The parameters from the context (own: what the caller frees); *skipped: backward.c's tiles_skipped. */
static int fill_params(aa_core_bwd_t *p, const aa_attn_ctx_t *cx, const aa_attn_result_t *out, void **own,
                       size_t *skipped) {
  const aa_recipe_t *r = cx->r;
  size_t nq = cx->n_q, nk = cx->n_k, d = cx->d, rows = cx->heads * nq, nK = cx->kv_heads * nk * d;
  memset(p, 0, sizeof *p);
  tiles(cx, &p->tq, &p->tk);
  models(r, p->tc);
  p->n_q = nq, p->n_k = nk, p->d = d, p->heads = cx->heads, p->group = cx->group;
  p->nqt = (nq + p->tq - 1) / p->tq, p->nkt = (nk + p->tk - 1) / p->tk;
  p->q_desc = r->bwd_q_desc, p->scale_s = r->scale_fold == AA_SCALE_S;
  p->mulsub = r->exp_form == AA_EXPFORM_EXP2_MULSUB;
  p->pds_fmt = aa_attn_core_fmt(r->bwd_p_ds_fmt), p->pdv_fmt = aa_attn_core_fmt(r->bwd_p_dv_fmt);
  p->ds_fmt = aa_attn_core_fmt(r->bwd_ds_fmt), p->io_fmt = aa_attn_core_fmt(r->io_fmt);
  p->gqa_sum = r->bwd_gqa_reduce == AA_GQA_SUM_ROUNDED;
  p->dk_end = r->bwd_dk_scale == AA_GSCALE_END, p->dq_end = r->bwd_dq_scale == AA_GSCALE_END;
  p->c = cx->c, p->scale = cx->scale, p->l2e = cx->l2e, p->dq_mul = cx->dq_mul;
  p->natural = r->exp_form == AA_EXPFORM_NATURAL, p->ds_scale = (int)r->bwd_ds_scale;
  fill_exp_dq(p, cx);
  float *f[6] = {NULL};
  double *D = malloc((2 * rows + 1) * sizeof *D); /* D, then each row's exp bias */
  own[6] = D;
  int ok = D != NULL && row_bias(D + rows, cx, out);
  /* each row's D on its own (backward.c's rounding steps per row): rows in parallel */
#pragma omp parallel for schedule(static) if (ok && rows >= 4096)
  for (size_t row = 0; row < (ok ? rows : 0); row++)
    D[row] = aa_attn_rowsum_o_do(cx, out->o.data + row * d, cx->dO + row * d);
  ok = ok && to_f32(&f[0], cx->Q, rows * d) && to_f32(&f[1], cx->K, nK) && to_f32(&f[2], cx->V, nK) &&
       to_f32(&f[3], cx->dO, rows * d) && to_f32(&f[4], D + rows, rows) && to_f32(&f[5], D, rows);
  for (int x = 0; x < 6; x++)
    own[x] = f[x];
  int64_t *lohi = malloc(2 * (nq ? nq : 1) * sizeof *lohi);
  unsigned char *seen = malloc(p->nqt * p->nkt + 1);
  own[7] = lohi, own[8] = seen;
  if (!ok || lohi == NULL || seen == NULL) return AA_ENOMEM; /* or an operand outside FP32: the CPU runs it */
  for (size_t i = 0; i < nq; i++) {
    size_t lo, hi;
    aa_problem_row_keys(cx->pb, i, &lo, &hi);
    lohi[i] = (int64_t)lo, lohi[nq + i] = (int64_t)hi;
  }
  p->Q = f[0], p->K = f[1], p->V = f[2], p->dO = f[3], p->B = f[4], p->D = f[5];
  p->lo = lohi, p->hi = lohi + nq, p->seen = seen;
  p->twopass = r->fwd_softmax == AA_SOFTMAX_TWO_PASS, p->pdp = r->bwd_d_source == AA_DSRC_P_DP;
  p->dp_fmt = aa_attn_core_fmt(r->bwd_dp_fmt);
  if (p->twopass) fill_twopass(&p->tp, cx, p);
  *skipped = fill_seen(seen, p, r->bwd_skip_masked) * cx->heads;
  return AA_OK;
}

/* The pairs whose exact exp was too close to call, again with the host's libm (the CPU's). Returns the count, or
   -1 when the list overflowed. */
static long redo_pairs(aa_core_bwd_t *p) {
  unsigned long long n = *p->ndoubt;
  if (n > p->doubt_cap) return -1;
  int margin = p->doubt_log2, doubt = 0;
  p->doubt_log2 = -1;
  for (unsigned long long x = 0; x < n; x++) {
    unsigned long long pr = p->doubt[x], row = pr / p->n_k;
    float pds, *ppds = p->Pds != NULL ? p->Pds + pr : &pds;
    aa_core_bwd_vals(p, row / p->n_q, row % p->n_q, pr % p->n_k, p->Pdv + pr, p->dS + pr, ppds, &doubt);
  }
  p->doubt_log2 = margin;
  return (long)n;
}

/* The two-pass rows aa_core_bwd_stats flagged, again with the host's libm (the CPU's): their statistics and pairs.
   Returns the pairs redone. */
static size_t redo_rows(aa_core_bwd_t *p) {
  size_t hq = p->heads * p->n_q, nk = p->n_k, n = 0;
  int margin = p->doubt_log2;
  p->doubt_log2 = -1;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : n)
  for (size_t x = 0; x < hq; x++) {
    if (!p->rdoubt[x]) continue;
    if (aa_core_bwd_tp_row(p, x / p->n_q, x % p->n_q, p->Pdv + x * nk, p->dS + x * nk, p->Pds + x * nk)) *p->bad = 1;
    n += nk;
  }
  p->doubt_log2 = margin;
  return n;
}

/* The passes on host threads: what each CUDA thread does, one element after another. */
static int run_host(aa_core_bwd_t *p, float *dQ, float *dK, float *dV, unsigned *bad, size_t *redone) {
  size_t hq = p->heads * p->n_q, kvh = p->heads / p->group, nk = p->n_k, d = p->d, rows = 0;
  p->Pdv = malloc((hq * nk + 1) * sizeof(float)), p->dS = malloc((hq * nk + 1) * sizeof(float));
  if (p->Pdv == NULL || p->dS == NULL) return AA_ENOMEM;
  if (p->twopass || p->pdp) p->Pds = malloc((hq * nk + 1) * sizeof(float));
  if (p->twopass) p->ML = malloc((2 * hq + 1) * sizeof(float)), p->rdoubt = calloc(hq + 1, 1);
  if ((p->twopass || p->pdp) && p->Pds == NULL) return AA_ENOMEM;
  if (p->twopass && (p->ML == NULL || p->rdoubt == NULL)) return AA_ENOMEM;
  p->dQ = dQ, p->dK = dK, p->dV = dV, p->bad = bad;
  if (p->twopass) {
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t x = 0; x < hq; x++)
      aa_core_bwd_stats(p, x / p->n_q, x % p->n_q);
  }
#pragma omp parallel for schedule(static)
  for (size_t x = 0; x < hq * nk; x++)
    aa_core_bwd_pair(p, x / (p->n_q * nk), x / nk % p->n_q, x % nk);
  if (p->twopass) rows = redo_rows(p);
  long n = redo_pairs(p);
  if (n < 0) return AA_EUNSUPPORTED;
  *redone = (size_t)n + rows;
  if (p->pdp) {
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t x = 0; x < hq; x++)
      aa_core_bwd_ds_row(p, x / p->n_q, x % p->n_q);
  }
#pragma omp parallel for schedule(static)
  for (size_t x = 0; x < kvh * nk * d; x++)
    aa_core_bwd_kv(p, x / (nk * d), x / d % nk, x % d);
  if (p->dq_kind == AA_CORE_RED_FIXED) { /* each q tile's verdict before its dQ */
    if ((p->fxe = malloc((hq * d + 1) * sizeof *p->fxe)) == NULL) return AA_ENOMEM;
#pragma omp parallel for schedule(static)
    for (size_t x = 0; x < hq * d; x++)
      aa_core_bwd_fx_elem(p, x / (p->n_q * d), x / d % p->n_q, x % d);
    for (size_t x = 0; x < p->heads * p->nqt; x++)
      aa_core_bwd_fx_tile(p, x / p->nqt, x % p->nqt);
  }
#pragma omp parallel for schedule(static)
  for (size_t x = 0; x < hq * d; x++)
    aa_core_bwd_dq(p, x / (p->n_q * d), x / d % p->n_q, x % d);
  return AA_OK;
}

/* The outputs as backward.c leaves them, with its counters. */
static void store(const aa_core_bwd_t *p, aa_attn_result_t *out, const float *dQ, const float *dK, const float *dV,
                  size_t skipped) {
  size_t nq = p->heads * p->n_q * p->d, nk = p->heads / p->group * p->n_k * p->d;
#pragma omp parallel for schedule(static) if (nq >= ((size_t)1 << 16))
  for (size_t x = 0; x < nq; x++)
    out->dq.data[x] = dQ[x];
#pragma omp parallel for schedule(static) if (nk >= ((size_t)1 << 16))
  for (size_t x = 0; x < nk; x++)
    out->dk.data[x] = dK[x], out->dv.data[x] = dV[x];
  aa_reduce_stats_t st;
  memset(&st, 0, sizeof st);
  st.tiles = p->heads * p->nqt, st.partials = p->heads * p->nqt * p->nkt - skipped;
  for (size_t t = 0; p->dq_kind == AA_CORE_RED_FIXED && t < p->heads * p->nqt; t++) { /* reduce/fixed.c's counters */
    st.conv_failures += p->fxt[2 * t], st.sum_failures += p->fxt[2 * t + 1];
    st.budget_failures += p->fxt[2 * t] + p->fxt[2 * t + 1] > 0;
  }
  st.fp64_recomputes = st.budget_failures;
  aa_reduce_stats_add(&out->dq_reduce, &st);
  out->tiles_skipped = skipped;
}

int aa_attn_backward_cuda(const aa_attn_ctx_t *cx, aa_attn_result_t *out, int on_host) {
  if (!aa_attn_cuda_bwd_supported(cx)) return AA_EUNSUPPORTED;
  if (!on_host && aa_gemm_cuda_devices() == 0) return AA_EUNSUPPORTED;
  aa_core_bwd_t p;
  void *own[9] = {NULL};
  size_t skipped = 0, nq = cx->heads * cx->n_q * cx->d, nk = cx->kv_heads * cx->n_k * cx->d;
  int st = fill_params(&p, cx, out, own, &skipped);
  float *dQ = malloc((nq + 1) * sizeof *dQ), *dK = malloc((nk + 1) * sizeof *dK), *dV = malloc((nk + 1) * sizeof *dV);
  unsigned bad = 0;
  unsigned long long ndoubt = 0;
  size_t redone = 0;
  /* the exact exp's doubtful pairs: 8 ulps cover glibc's and CUDA's libm errors (cuda.c); on host threads 2^20
     ulps list many, so tests/tattn_cuda_emu checks the redo */
  p.doubt_log2 = on_host ? 20 : 3;
  p.tp.doubt_log2 = p.doubt_log2;
  p.doubt_cap = 1u << 20, p.ndoubt = &ndoubt;
  p.doubt = malloc(p.doubt_cap * sizeof *p.doubt);
  p.fxt = calloc(2 * p.heads * p.nqt + 1, sizeof *p.fxt); /* host memory: the device's is copied back */
  if (st == AA_OK && (dQ == NULL || dK == NULL || dV == NULL || p.doubt == NULL || p.fxt == NULL)) st = AA_ENOMEM;
  if (st == AA_OK && on_host) {
    st = run_host(&p, dQ, dK, dV, &bad, &redone);
    free(p.Pdv), free(p.dS), free(p.fxe), free(p.Pds), free(p.ML), free(p.rdoubt);
  } else if (st == AA_OK) {
    st = aa_atcu_backward(&p, dQ, dK, dV, &bad, &redone);
  }
  free(p.doubt);
  out->bwd_pairs_redone = redone;
  if (st == AA_OK && bad) st = AA_EUNSUPPORTED; /* a non-finite pair: the CPU's backward records where */
  if (st == AA_OK) store(&p, out, dQ, dK, dV, skipped);
  for (int x = 0; x < 9; x++)
    free(own[x]);
  free(dQ), free(dK), free(dV), free(p.fxt);
  return st == AA_ENOMEM ? AA_EUNSUPPORTED : st; /* a device out of memory: the CPU runs it */
}
