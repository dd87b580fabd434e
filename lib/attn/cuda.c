/* attnacc: which forwards the GPU emulation runs (an explicit list of recipe values), and its inputs and outputs. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

/* after attn-impl.h: attn-cuda.h's C-side declarations take the context */
#include "attn-core.h"
#include "attn-cuda.h"

#ifndef AA_HAVE_CUDA /* no kernels in this build: the device side says so */
int aa_atcu_forward(const aa_core_fwd_t *p, float *O, float *LSE, unsigned char *doubt, unsigned long long *cnt,
                    unsigned long long *pmax) {
  (void)p, (void)O, (void)LSE, (void)doubt, (void)cnt, (void)pmax;
  return AA_EUNSUPPORTED;
}
#endif

int aa_attn_core_fmt(aa_fmt_t f) {
  return f == AA_FMT_FP32 ? AA_CORE_FP32 : f == AA_FMT_BF16 ? AA_CORE_BF16 : f == AA_FMT_FP16 ? AA_CORE_FP16 : -1;
}

int aa_attn_tc_model(aa_accum_t m, int *bk, int *fb, int *ob) {
  const aa_accum_info_t *in = aa_accum_info(m);
  if (in != NULL && in->sum == AA_SUM_CHAIN && in->out_bits == 23) {
    *bk = 0, *fb = 0, *ob = 23;
    return 1;
  }
  if (in == NULL || in->sum != AA_SUM_BLOCK || in->rnd != AA_RND_Z || in->block_k < 1 || in->block_k > 32 ||
      in->frac_bits > 25 || (in->out_bits != 23 && in->out_bits != 13))
    return 0;
  *bk = in->block_k, *fb = in->frac_bits, *ob = in->out_bits;
  return 1;
}

/* The recipe and problem values the GPU forward implements: every recipe field that forward.c, forward_split.c,
   common.c, quant.c and fp8.c read on the forward's path is either taken as a parameter (aa_core_fwd_t) or must
   hold the one value listed here. Anything else (softcap, ALiBi, masks, bias, dropout, sinks, quantisation, FP8
   operands, other exp constructions) runs on the CPU. */
/* The weights' exp: the sm90 models (ex2-sm90 in FP32 order, sfu = sm90, an exp2 form), or with one split the exact
   binary64 exp of any form (exp = exact, no sfu), whose doubtful roundings the host redoes (attn-core.h). */
static int exp_supported(const aa_attn_ctx_t *cx) {
  const aa_recipe_t *r = cx->r;
  const aa_exp_t *e = cx->wexp_fwd;
  /* the quadratic BF16 weights (FP32 order, exp2 form); the rescale's exp as below */
  if (e != NULL && e->kind == AA_EXP_QUADRATIC_BF16)
    return e->order == AA_EXP_ORDER_FP32 && aa_attn_exp2form(r) && !r->sfu_sm90 && aa_attn_fwd_nsplits(cx) == 1;
  if (r->sfu_sm90)
    return e != NULL && e->kind == AA_EXP_EX2_SM90 && e->order == AA_EXP_ORDER_FP32 && aa_attn_exp2form(r);
  return e == NULL && aa_attn_fwd_nsplits(cx) == 1;
}

/* The path of the CPU forward the GPU follows: forward_split.c (k_order desc, splits), or forward.c's online tile
   with the fma or log2-max LSE (the same block updates and, with one split, the same row ends). */
static int path_supported(const aa_recipe_t *r) {
  int split = r->fwd_k_desc || r->fwd_splits > 1 || r->fwd_split_sms > 0 || r->fwd_split_keys > 0;
  return r->fwd_lse_form == AA_LSE_FMA || (!split && aa_recipe_lse_log2(r));
}

/* fwd.softmax: online-lse on key blocks of at most AA_CORE_MAXTK keys with FP32 scores; forward_fixed.c's
   fixed-shift and guarded forwards on the same blocks (one split, the weights' argument one FMA; a guarded tile's
   recovery is the online forward); or two-pass (forward.c fwd_tile_twopass: whole rows whatever fwd.tile_k says,
   one split) with FP32 or BF16 scores. */
static int softmax_supported(const aa_attn_ctx_t *cx) {
  const aa_recipe_t *r = cx->r;
  if (r->fwd_softmax == AA_SOFTMAX_TWO_PASS)
    return (r->s_fmt == AA_FMT_FP32 || r->s_fmt == AA_FMT_BF16) && aa_attn_fwd_nsplits(cx) == 1;
  int blocks = r->s_fmt == AA_FMT_FP32 && r->fwd_tile_k > 0 && r->fwd_tile_k <= AA_CORE_MAXTK;
  if (r->fwd_softmax == AA_SOFTMAX_ONLINE_LSE) return blocks;
  return blocks && (r->fwd_softmax == AA_SOFTMAX_FIXED_SHIFT || r->fwd_softmax == AA_SOFTMAX_GUARDED) &&
         r->exp_form != AA_EXPFORM_EXP2_MULSUB && aa_attn_fwd_nsplits(cx) == 1 && !r->fwd_k_desc;
}

int aa_attn_cuda_fwd_supported(const aa_attn_ctx_t *cx) {
  const aa_recipe_t *r = cx->r;
  int bk, fb, ob;
  return path_supported(r) && exp_supported(cx) && softmax_supported(cx) && r->fwd_checkpoint == AA_CKPT_LSE &&
         r->alu_fmt == AA_FMT_FP32 && r->fwd_rowsum_fmt == AA_FMT_FP32 && r->fwd_o_acc_fmt == AA_FMT_FP32 &&
         r->fwd_lse_fmt == AA_FMT_FP32 && aa_attn_core_fmt(r->io_fmt) > 0 && aa_attn_core_fmt(r->fwd_p_fmt) >= 0 &&
         (r->scale_fold == AA_SCALE_EXP || r->scale_fold == AA_SCALE_S) && cx->wexp_emu == NULL &&
         r->fwd_exp_emu_freq == 0 && r->fwd_p_scale_exp == 0 && r->quant_p_scale == 1.0 && r->quant_p == 0 &&
         r->quant_q == 0 && r->quant_k == 0 && r->quant_v == 0 && r->quant_pv_buffer == 0 && r->quant_smooth_q == 0 &&
         r->quant_smooth_k == 0 && r->fwd_qk_rotate == 0 && r->fwd_qkv_fmt == AA_QKV_NONE &&
         aa_attn_tc_model(r->fwd_acc_qk, &bk, &fb, &ob) && aa_attn_tc_model(r->fwd_acc_pv, &bk, &fb, &ob) &&
         cx->mod == 0 && cx->masked == 0 && cx->keep_fwd == NULL && cx->sinks == NULL && cx->v_scale == NULL &&
         cx->d >= 1 && cx->d <= AA_CORE_MAXD && r->fwd_tile_q > 0 && aa_attn_fwd_nsplits(cx) <= 128 &&
         cx->pb->varlen_batch == 0 &&
         (r->fwd_qk_gemv == 0 || cx->n_q > 1); /* the GEMV order is the host's (vendor_order.c) */
}

static float *to_f32(const double *x, size_t n) {
  float *f = malloc((n ? n : 1) * sizeof *f);
  if (f != NULL) {
#pragma omp parallel for schedule(static) if (n >= ((size_t)1 << 16))
    for (size_t i = 0; i < n; i++)
      f[i] = (float)x[i];
  }
  return f;
}

/* One row's P-cast counters into the totals. */
static void add_counters(const aa_core_fwd_t *p, const aa_core_row_t *w) {
#pragma omp critical(aa_attn_cuda_counters)
  {
    p->counters[0] += w->cast, p->counters[1] += w->over, p->counters[2] += w->under;
    unsigned long long b;
    memcpy(&b, &w->pmax, sizeof b);
    if (b > *p->pmax) *p->pmax = b;
  }
}

/* The rows whose libm roundings were too close to call (one split only: p->O and p->LSE are the outputs) again on
   the host, whose libm is the CPU's; their counters were left out of the first pass. Returns the rows redone. */
static size_t redo_doubtful(aa_core_fwd_t *p, const unsigned char *doubt) {
  size_t rows = p->heads * p->n_q, redone = 0;
  p->doubt = NULL;
#pragma omp parallel
  {
    aa_core_row_t *w = malloc(sizeof *w);
    float *P = malloc(AA_CORE_MAXTK * sizeof *P);
#pragma omp for schedule(dynamic, 1) reduction(+ : redone)
    for (size_t row = 0; row < rows; row++) {
      if (!doubt[row] || w == NULL || P == NULL) continue;
      w->cast = w->over = w->under = 0, w->pmax = 0;
      aa_core_fwd_row(p, row / p->n_q, row % p->n_q, 0, w, P);
      add_counters(p, w);
      redone++;
    }
    free(w);
    free(P);
  }
  return redone;
}

/* The row-by-row job on the host: what each CUDA thread does, one row (and split) after another. */
static void run_host(const aa_core_fwd_t *p) {
  size_t rows = p->heads * p->n_q, nwork = rows * p->nsplit;
#pragma omp parallel
  {
    aa_core_row_t *w = malloc(sizeof *w);
    float *P = malloc(AA_CORE_MAXTK * sizeof *P);
#pragma omp for schedule(dynamic, 16)
    for (size_t x = 0; x < nwork; x++) {
      size_t row = x % rows, sp = x / rows;
      w->cast = w->over = w->under = 0, w->pmax = 0;
      aa_core_fwd_row(p, row / p->n_q, row % p->n_q, sp, w, P);
      if (!w->doubt) add_counters(p, w); /* a doubtful row's come with its redo */
    }
    if (p->nsplit > 1) {
#pragma omp for schedule(dynamic, 16)
      for (size_t row = 0; row < rows; row++)
        aa_core_combine_row(p, row, P);
    }
    free(w);
    free(P);
  }
}

/* The kernel's parameters from the context: host copies in FP32 and the rows' key intervals. */
static int fill_params(aa_core_fwd_t *p, const aa_attn_ctx_t *cx, float **own) {
  const aa_recipe_t *r = cx->r;
  size_t nq = cx->n_q, nk = cx->n_k, d = cx->d, tkk = r->fwd_tile_k ? r->fwd_tile_k : nk, nblk = (nk + tkk - 1) / tkk;
  memset(p, 0, sizeof *p);
  p->n_q = nq, p->n_k = nk, p->d = d, p->heads = cx->heads, p->group = cx->group;
  p->tq = r->fwd_tile_q, p->tk = r->fwd_tile_k, p->nsplit = aa_attn_fwd_nsplits(cx);
  p->per = r->fwd_split_keys > 0 ? r->fwd_split_keys / tkk : (nblk + p->nsplit - 1) / p->nsplit;
  p->k_desc = r->fwd_k_desc, p->quad = r->fwd_rowsum_quad, p->rs_fma = r->fwd_rowsum_fma;
  p->rs_rounded = r->fwd_rowsum_rounded, p->mulsub = r->exp_form == AA_EXPFORM_EXP2_MULSUB;
  p->o_recip = r->fwd_o_norm == AA_NORM_RECIPROCAL;
  p->p_fmt = aa_attn_core_fmt(r->fwd_p_fmt), p->io_fmt = aa_attn_core_fmt(r->io_fmt);
  aa_attn_tc_model(r->fwd_acc_qk, &p->qk_bk, &p->qk_fb, &p->qk_ob);
  aa_attn_tc_model(r->fwd_acc_pv, &p->pv_bk, &p->pv_fb, &p->pv_ob);
  p->c = cx->c, p->se = cx->se, p->threshold = r->fwd_rescale_threshold;
  p->sm90 = r->sfu_sm90, p->natural = r->exp_form == AA_EXPFORM_NATURAL, p->scale_s = r->scale_fold == AA_SCALE_S;
  p->log2max = aa_recipe_lse_log2(r),
  p->lse_ln2 = r->fwd_lse_form == AA_LSE_LOG2_LN2       ? 1
               : r->fwd_lse_form == AA_LSE_LOG2_LN2_FMA ? 2
                                                        : 0,
  p->scale = cx->scale, p->l2e = cx->l2e;
  p->p_top = aa_fmt_info(r->fwd_p_fmt)->max_finite;
  p->qexp = cx->wexp_fwd != NULL && cx->wexp_fwd->kind == AA_EXP_QUADRATIC_BF16;
  if (p->qexp)
    p->qexp_k = cx->wexp_fwd->kf, p->qexp_d1 = cx->wexp_fwd->df1, p->qexp_s = cx->wexp_fwd->sf,
    p->qexp_rz = cx->wexp_fwd->cvt == AA_RND_Z;
  p->shifted = r->fwd_softmax == AA_SOFTMAX_FIXED_SHIFT ? 1 : r->fwd_softmax == AA_SOFTMAX_GUARDED ? 2 : 0;
  p->sub = p->shifted == 2 && r->fwd_sub_q != 0 && r->fwd_sub_q < p->tq ? r->fwd_sub_q : p->tq;
  p->shift0 = aa_core_r32(r->fwd_shift), p->lo2 = exp2(r->fwd_guard_lo), p->hi2 = exp2(r->fwd_guard_hi);
  p->twopass = r->fwd_softmax == AA_SOFTMAX_TWO_PASS, p->s_fmt = aa_attn_core_fmt(r->s_fmt);
  size_t nQ = cx->heads * nq * d, nK = cx->heads / cx->group * nk * d;
  own[0] = to_f32(cx->Q, nQ), own[1] = to_f32(cx->K, nK), own[2] = to_f32(cx->V, nK);
  int64_t *lohi = malloc(2 * (nq ? nq : 1) * sizeof *lohi);
  own[3] = (float *)lohi;
  if (own[0] == NULL || own[1] == NULL || own[2] == NULL || lohi == NULL) return AA_ENOMEM;
  for (size_t i = 0; i < nq; i++) {
    size_t lo, hi;
    aa_problem_row_keys(cx->pb, i, &lo, &hi);
    lohi[i] = (int64_t)lo, lohi[nq + i] = (int64_t)hi;
  }
  p->Q = own[0], p->K = own[1], p->V = own[2], p->lo = lohi, p->hi = lohi + nq;
  return AA_OK;
}

/* The outputs back as the CPU's forward leaves them, and its P-cast counters. */
static void store_outputs(const aa_core_fwd_t *p, aa_attn_result_t *out, const float *O, const float *L,
                          const unsigned long long *cnt, unsigned long long pmax) {
  size_t rows = p->heads * p->n_q;
#pragma omp parallel for schedule(static) if (rows * p->d >= ((size_t)1 << 16))
  for (size_t x = 0; x < rows * p->d; x++)
    out->o.data[x] = O[x];
  for (size_t x = 0; x < rows; x++)
    out->lse.data[x] = L[x];
  double pm;
  memcpy(&pm, &pmax, sizeof pm);
  out->p_cast += cnt[0], out->p_over += cnt[1], out->p_under += cnt[2];
  if (pm > out->p_max) out->p_max = pm;
}

int aa_attn_forward_cuda(const aa_attn_ctx_t *cx, aa_attn_result_t *out, int on_host) {
  if (!aa_attn_cuda_fwd_supported(cx)) return AA_EUNSUPPORTED;
  if (!on_host && aa_gemm_cuda_devices() == 0) return AA_EUNSUPPORTED;
  aa_core_fwd_t p;
  float *own[4] = {NULL, NULL, NULL, NULL};
  size_t rows = cx->heads * cx->n_q;
  int st = fill_params(&p, cx, own);
  /* 8 ulps cover glibc's and CUDA's libm errors (each below 1 ulp, CUDA's documented at 1); on host threads, where
     both passes are glibc's, 2^20 ulps flag a row in a few hundred calls, so tests/tattn_cuda_emu checks the redo */
  p.doubt_log2 = on_host ? 20 : 3;
  float *O = malloc((rows * cx->d + 1) * sizeof *O), *L = malloc((3 * rows + 1) * sizeof *L);
  unsigned char *doubt = calloc(rows * p.nsplit + 1, 1), *rflag = calloc(rows + 1, 1);
  unsigned long long cnt[3] = {0, 0, 0}, pmax = 0;
  if (st == AA_OK && (O == NULL || L == NULL || doubt == NULL || rflag == NULL)) st = AA_ENOMEM;
  p.Msh = L + rows, p.Lsum = L + 2 * rows, p.rflag = rflag; /* the shifted rows' (cuda_fixed.c) */
  if (st == AA_OK && on_host) {
    float *Os = p.nsplit > 1 ? malloc(p.nsplit * rows * cx->d * sizeof *Os) : NULL;
    float *Ls = p.nsplit > 1 ? malloc(p.nsplit * rows * sizeof *Ls) : NULL;
    if (p.nsplit > 1 && (Os == NULL || Ls == NULL)) st = AA_ENOMEM;
    p.O = O, p.LSE = L, p.Os = Os, p.Ls = Ls, p.counters = cnt, p.pmax = &pmax, p.doubt = doubt;
    if (st == AA_OK) run_host(&p);
    free(Os), free(Ls);
  } else if (st == AA_OK) {
    st = aa_atcu_forward(&p, O, L, doubt, cnt, &pmax);
  }
  if (st == AA_OK && p.nsplit == 1) { /* with several splits only the sm90 models run: nothing is doubtful */
    p.O = O, p.LSE = L, p.counters = cnt, p.pmax = &pmax;
    out->fwd_rows_redone = redo_doubtful(&p, doubt);
  }
  if (st == AA_OK) store_outputs(&p, out, O, L, cnt, pmax);
  if (st == AA_OK && p.shifted) aa_attn_cuda_fixed_finish(cx, out, &p);
  for (int x = 0; x < 4; x++)
    free(own[x]);
  free(O), free(L), free(doubt), free(rflag);
  return st;
}

const char *aa_attn_device_name(aa_attn_device_t dev) {
  static const char *names[] = {"auto", "cpu", "cuda", "cuda-emu"};
  return (unsigned)dev < 4 ? names[dev] : "unknown";
}

int aa_attn_device_from_name(aa_attn_device_t *out, const char *name) {
  for (int d = 0; d < 4; d++)
    if (name != NULL && strcmp(name, aa_attn_device_name((aa_attn_device_t)d)) == 0) {
      *out = (aa_attn_device_t)d;
      return AA_OK;
    }
  return AA_EINVAL;
}
