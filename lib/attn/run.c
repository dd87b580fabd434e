/* attnacc: aa_attn_run (validation, allocation, forward then backward) and aa_attn_result_free. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

static int check_tensor(const aa_tensor_t *t, const char *what, size_t a, size_t b, size_t c, aa_fmt_t io,
                        aa_error_t *err) {
  if (t == NULL || t->data == NULL) return aa_error_set(err, AA_EINVAL, "attn_run: tensor %s is missing", what);
  if (t->ndim != 3 || t->shape[0] != a || t->shape[1] != b || t->shape[2] != c)
    return aa_error_set(err, AA_ESHAPE, "attn_run: %s has shape [%zu,%zu,%zu], expected [%zu,%zu,%zu]", what,
                        t->shape[0], t->shape[1], t->shape[2], a, b, c);
  size_t n = a * b * c, first = SIZE_MAX;
  /* the first element that is not finite or not of the io format, over threads (a minimum: the same for any thread
     count; one thread took a tenth of a second per large input, the rounding being generic) */
#pragma omp parallel for reduction(min : first) schedule(static) if (n >= ((size_t)1 << 16))
  for (size_t i = 0; i < n; i++) {
    double x = t->data[i];
    if ((!isfinite(x) || aa_attn_rnd(x, io) != x) && i < first) first = i;
  }
  if (first == SIZE_MAX) return AA_OK;
  if (!isfinite(t->data[first]))
    return aa_error_set(err, AA_ENAN, "attn_run: %s[%zu] = %g is not finite", what, first, t->data[first]);
  return aa_error_set(err, AA_EINVAL, "attn_run: %s[%zu] = %a is not representable in the recipe's io format", what,
                      first, t->data[first]);
}

void aa_attn_result_free(aa_attn_result_t *res) {
  if (res == NULL) return;
  aa_tensor_free(&res->o);
  aa_tensor_free(&res->lse);
  aa_tensor_free(&res->dq);
  aa_tensor_free(&res->dk);
  aa_tensor_free(&res->dv);
  aa_tensor_free(&res->dsinks);
  res->tiles_skipped = 0;
  memset(&res->dq_reduce, 0, sizeof res->dq_reduce);
  aa_tensor_free(&res->recip);
  aa_tensor_free(&res->shift);
  free(res->row_ckpt);
  free(res->tile_flagged);
  res->row_ckpt = res->tile_flagged = NULL;
  res->fwd_q_tiles = res->tiles_flagged = res->rows_recovered = res->contractions_skipped = 0;
  res->p_cast = res->p_over = res->p_under = 0;
  res->p_max = 0;
}

aa_recipe_case_t aa_attn_case(const aa_problem_t *pb) {
  aa_recipe_case_t c = {.causal = pb->causal, .n_q = pb->n_q, .n_k = pb->n_k, .d = pb->d};
  c.masked = aa_problem_has_mask(pb) || aa_problem_has_bias(pb);
  return c;
}

static int run_resolved(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                        const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_attn_device_t dev,
                        aa_error_t *err);

int aa_attn_run(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_error_t *err) {
  return aa_attn_run_device(out, pb, r, q, k, v, dO, AA_ATTN_DEVICE_CPU, err);
}

int aa_attn_run_device(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                       const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_attn_device_t dev,
                       aa_error_t *err) {
  if (out == NULL || pb == NULL || r == NULL) return aa_error_set(err, AA_EINVAL, "attn_run: NULL argument");
  memset(out, 0, sizeof *out);
  /* Conditional keys (lib/recipe.h): the recipe for this problem's mask and
     sizes, then the run as for any recipe. A varlen batch resolves them per
     sequence (each sequence is run through aa_attn_run on its own). */
  if (r->nwhen == 0 || pb->varlen_batch > 0) return run_resolved(out, pb, r, q, k, v, dO, dev, err);
  aa_recipe_t *res = malloc(sizeof *res);
  if (res == NULL) return aa_error_set(err, AA_ENOMEM, "attn_run: out of memory");
  aa_recipe_case_t c = aa_attn_case(pb);
  int st = aa_recipe_resolve(res, r, &c, err);
  if (st == AA_OK) st = run_resolved(out, pb, res, q, k, v, dO, dev, err);
  free(res);
  return st;
}

/* bwd.k_prescale = on, as Triton's fused-attention tutorial (python/tutorials/06-fused-attention.py@003da478,
   _attention.backward): arg_k = k * (sm_scale * RCP_LN2) is a torch op on the input-dtype tensor, so the factor,
   formed in double, is held in float (PyTorch's opmath for a half tensor times a scalar), the product is rounded to
   float and then to the input dtype. The backward reads that K' for its scores (_attn_bwd_dkdv qkT = k' q^T,
   _attn_bwd_dq qk = q k'^T), so the exp argument is S' - LSE log2 e (coefficient 1), and for dQ += dS K', whose end
   scale is LN2 (`dq *= LN2`, a float constant); dK = scale dS^T Q as usual (`dk *= sm_scale`). */
static int backward_k_prescaled(aa_attn_ctx_t *cx, aa_attn_result_t *out) {
  const aa_recipe_t *r = cx->r;
  size_t n = cx->kv_heads * cx->n_k * cx->d;
  double *kp = malloc((n ? n : 1) * sizeof *kp);
  if (kp == NULL) return AA_ENOMEM;
  double c = aa_attn_rnd(aa_problem_scale(cx->pb) * AA_ATTN_LOG2E, r->alu_fmt);
  for (size_t i = 0; i < n; i++)
    kp[i] = aa_attn_rnd(aa_attn_alu(cx->K[i] * c, r->alu_fmt), r->io_fmt);
  aa_attn_ctx_t cb = *cx;
  cb.K = kp;
  cb.c = 1.0;
  cb.dq_mul = aa_attn_rnd(AA_ATTN_LN2, r->alu_fmt);
  int st = aa_attn_backward(&cb, out);
  free(kp);
  return st;
}

/* The problems bwd.k_prescale models: the tutorial has no score modifiers, sinks or dropout. */
static int check_k_prescale(const aa_problem_t *pb, const aa_recipe_t *r, aa_error_t *err) {
  if (!r->bwd_k_prescale) return AA_OK;
  if (pb->softcap > 0 || pb->alibi != AA_ALIBI_NONE || pb->num_sinks > 0 || pb->keep != NULL ||
      r->dropout.scheme != AA_DROPOUT_NONE || aa_problem_has_bias(pb))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': bwd.k_prescale = on models a kernel without softcap, ALiBi, sinks, dropout, "
                        "bias or logit offset",
                        r->name);
  return AA_OK;
}

/* The resources of one run besides its outputs: the dispatched recipe, the
   context forward and backward read, and the arrays the context points to.
   run_free releases them, the one cleanup of run_resolved. */
typedef struct {
  aa_recipe_t tiled; /* tiling = fa2: the recipe with FA2's dispatched tiles */
  aa_attn_ctx_t cx;
  double *slope_e, *sinks;            /* cx.slope_e, cx.sinks */
  uint8_t *drawn_fwd, *drawn_bwd;     /* recipe dropout: the redrawn keep masks (cx.keep_fwd, cx.keep_bwd) */
  double *dO_eff, *bias;              /* bwd.norm = recip: cx.dO, cx.bias */
  double *quant[AA_ATTN_QUANT_OWNED]; /* quant.q/k/v/do: the quantised Q, K, V, dO; quant.smooth_k's means */
} run_t;

static void run_free(run_t *rn) {
  free(rn->slope_e);
  free(rn->sinks);
  free(rn->drawn_fwd);
  free(rn->drawn_bwd);
  free(rn->dO_eff);
  free(rn->bias);
  for (int i = 0; i < AA_ATTN_QUANT_OWNED; i++)
    free(rn->quant[i]);
}

/* bwd.scale_fold other than the forward's: softcap and ALiBi fold the scale into constants of the forward's fold
   (ctx_softcap, ctx_alibi), which the backward would have to redo in its own; not modelled, refused. */
static int check_bwd_fold(const aa_problem_t *pb, const aa_recipe_t *r, aa_error_t *err) {
  if (r->bwd_scale_fold == 0 || r->bwd_scale_fold - 1 == (int)r->scale_fold) return AA_OK;
  if (pb->softcap > 0 || pb->alibi != AA_ALIBI_NONE)
    return aa_error_set(err, AA_EUNSUPPORTED,
                        "recipe '%s': bwd.scale_fold differs from scale_fold; softcap and ALiBi are not modelled "
                        "with that",
                        r->name);
  return AA_OK;
}

/* Step 1, check: the problem, the recipe and the rules between them. */
static int run_check(const aa_problem_t *pb, const aa_recipe_t *r, aa_error_t *err) {
  int st = aa_problem_check(pb, err);
  if (st == AA_OK) st = aa_recipe_check(r, err);
  if (st == AA_OK) st = check_k_prescale(pb, r, err);
  if (st == AA_OK) st = check_bwd_fold(pb, r, err);
  return st;
}

/* Step 2, dispatch: with tiling = fa2 the kernel and tiles FA2 would launch
   for this problem, written into rn->tiled, which *r then points to. */
static int run_dispatch(run_t *rn, const aa_recipe_t **r, const aa_problem_t *pb, aa_error_t *err) {
  const aa_recipe_t *in = *r;
  aa_fa2_dispatch_t dp;
  if (!in->tiling_fa2) return AA_OK;
  if (in->fwd_split_sms == 0)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': tiling = fa2 needs the SM count in fwd.split_sms", in->name);
  int dropout = pb->keep != NULL || in->dropout.scheme != AA_DROPOUT_NONE;
  /* decode with GQA: mha_fwd folds each group's heads into query rows first */
  size_t heads, n_q;
  aa_fa2_seen(&heads, &n_q, pb, dropout);
  int st = aa_fa2_dispatch(&dp, heads, n_q, pb->n_k, pb->d, in->fwd_split_sms, dropout, err);
  if (st != AA_OK) return st;
  rn->tiled = *in;
  rn->tiled.fwd_tile_q = dp.fwd_tile_q;
  rn->tiled.fwd_tile_k = dp.fwd_tile_k;
  rn->tiled.fwd_splits = dp.num_splits;
  if (in->fwd_split_keys > 0) { /* a fixed split size: the split-KV kernel, whatever the heuristic would say */
    rn->tiled.fwd_tile_q = 64;
    rn->tiled.fwd_tile_k = aa_fa2_splitkv_block_n(pb->d);
    rn->tiled.fwd_splits = 0;
  }
  rn->tiled.fwd_split_sms = 0;
  rn->tiled.bwd_tile_q = dp.bwd_tile_q;
  rn->tiled.bwd_tile_k = dp.bwd_tile_k;
  *r = &rn->tiled;
  return AA_OK;
}

/* fwd.split_keys must cut the keys on key-tile boundaries (the tiles of the run, after dispatch). */
static int check_split_keys(const aa_problem_t *pb, const aa_recipe_t *r, aa_error_t *err) {
  size_t tk = r->fwd_tile_k ? r->fwd_tile_k : pb->n_k;
  if (r->fwd_split_keys > 0 && r->fwd_split_keys % tk != 0)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': fwd.split_keys = %zu is not a multiple of the key tile %zu",
                        r->name, r->fwd_split_keys, tk);
  return AA_OK;
}

/* The inputs against the problem's shapes and the recipe's io format. */
static int check_inputs(const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q, const aa_tensor_t *k,
                        const aa_tensor_t *v, const aa_tensor_t *dO, aa_error_t *err) {
  size_t H = pb->heads, KH = pb->kv_heads, nq = pb->n_q, nk = pb->n_k, d = pb->d;
  int st = check_tensor(q, "q", H, nq, d, r->io_fmt, err);
  if (st == AA_OK) st = check_tensor(k, "k", KH, nk, d, r->io_fmt, err);
  if (st == AA_OK) st = check_tensor(v, "v", KH, nk, d, r->io_fmt, err);
  if (st == AA_OK && dO != NULL) st = check_tensor(dO, "dO", H, nq, d, r->io_fmt, err);
  return st;
}

/* Working set of the widest tile buffers: whole-row recipes (two-pass,
   tile_k = 0) hold tile_q x n_k per thread; refuse sizes that cannot be
   allocated instead of failing half way. */
static int check_working_set(const aa_problem_t *pb, const aa_recipe_t *r, aa_error_t *err) {
  size_t tq = r->fwd_tile_q ? r->fwd_tile_q : pb->n_q, tmp;
  if (aa_size_mul(&tmp, tq, pb->n_k) != AA_OK || aa_size_mul(&tmp, tmp, 6 * sizeof(double)) != AA_OK ||
      tmp > ((size_t)1 << 34))
    return aa_error_set(err, AA_ENOMEM, "attn_run: a %zu x %zu score tile is too large for recipe '%s'", tq, pb->n_k,
                        r->name);
  return AA_OK;
}

/* The exp coefficient c of S for the recipe's exp_form (aa_attn_exparg), from cx's se and l2e: FA2's
   scale_softmax_log2 = softmax_scale * M_LOG2E formed in double on the host and stored as float with
   scale_fold = exp, log2(e) alone on scaled scores, se for the natural form. */
static double exp_coef(const aa_attn_ctx_t *cx, const aa_recipe_t *r) {
  if (!aa_attn_exp2form(r)) return cx->se;
  if (r->scale_fold != AA_SCALE_EXP) return cx->l2e;
  return r->exp_coef_alu ? aa_attn_alu(cx->se * cx->l2e, r->alu_fmt)
                         : aa_attn_rnd(cx->se * AA_ATTN_LOG2E, r->alu_fmt);
}

/* The context's shapes, scale and exp coefficient. */
static void ctx_scales(aa_attn_ctx_t *cx, const aa_problem_t *pb, const aa_recipe_t *r) {
  aa_fmt_t alu = r->alu_fmt;
  double scale = aa_attn_rnd(aa_problem_scale(pb), r->scale_fmt);
  cx->pb = pb;
  cx->r = r;
  cx->n_q = pb->n_q;
  cx->n_k = pb->n_k;
  cx->d = pb->d;
  cx->heads = pb->heads;
  cx->kv_heads = pb->kv_heads;
  cx->group = pb->heads / pb->kv_heads;
  cx->scale = scale;
  cx->l2e = aa_attn_rnd(AA_ATTN_LOG2E, alu);
  cx->se = r->scale_fold == AA_SCALE_EXP ? scale : 1.0;
  cx->wexp_fwd = aa_recipe_exp_is_default(&r->fwd_exp) ? NULL : &r->fwd_exp; /* fwd.exp, bwd.exp */
  cx->wexp_bwd = aa_recipe_exp_is_default(&r->bwd_exp) ? NULL : &r->bwd_exp;
  cx->wexp_emu = r->fwd_exp_emu_freq > 0 ? &r->fwd_exp_emu : NULL;
  cx->c = exp_coef(cx, r);
}

/* Score modifiers (problem.h). Softcap with scale_fold = exp, as FA2
   (flash_api.cpp:130-133): params.softcap = softmax_scale / softcap (one
   FP32 division), and the softcap replaces the scale everywhere else:
   scale_softmax (LSE, sinks, the final dQ/dK scale
   scale_softmax_rp_dropout, flash_bwd_kernel.h:682, 733) and
   scale_softmax_log2 = softcap * M_LOG2E formed in double, stored as
   float. Other folds hold logits in S: S <- softcap tanh(S / softcap). */
static void ctx_softcap(aa_attn_ctx_t *cx, const aa_problem_t *pb, const aa_recipe_t *r) {
  aa_fmt_t alu = r->alu_fmt;
  cx->mod = aa_problem_has_score_mod(pb);
  cx->cap_out = 1.0;
  cx->dt_mul = 1.0;
  if (pb->softcap <= 0) return;
  double cap = aa_attn_rnd(pb->softcap, r->scale_fmt);
  if (r->scale_fold == AA_SCALE_EXP) {
    cx->sc_mul = aa_attn_alu(cx->scale / cap, alu);
    cx->dt_mul = cx->sc_mul;
    cx->scale = cap;
    cx->se = cap;
    cx->c = exp_coef(cx, r);
  } else {
    cx->sc_mul = aa_attn_alu(1.0 / cap, alu);
    cx->cap_out = cap;
  }
}

/* ALiBi: the slope in the units of S, divided by scale_softmax with
   scale_fold = exp (flash_fwd_kernel.h:294); after ctx_softcap, whose
   softcap then stands for the scale. */
static int ctx_alibi(run_t *rn, const aa_problem_t *pb, const aa_recipe_t *r, aa_error_t *err) {
  aa_fmt_t alu = r->alu_fmt;
  if (pb->alibi == AA_ALIBI_NONE) return AA_OK;
  if ((rn->slope_e = malloc(pb->heads * sizeof(double))) == NULL)
    return aa_error_set(err, AA_ENOMEM, "attn_run: cannot allocate the ALiBi slopes");
  for (size_t h = 0; h < pb->heads; h++)
    rn->slope_e[h] = r->scale_fold == AA_SCALE_EXP
                         ? aa_attn_alu(aa_attn_rnd(pb->alibi_slopes[h], alu) / rn->cx.scale, alu)
                         : aa_attn_rnd(pb->alibi_slopes[h], alu);
  rn->cx.slope_e = rn->slope_e;
  return AA_OK;
}

/* Attention mask, bias and logit offset (problem.h) as the recipe's mask.* keys take them: the units of S where
   mask.enter adds the bias (scale0: the softmax scale before ctx_softcap, which makes the softcap stand for it
   with scale_fold = exp), and the score of a masked key that is scored. */
static void ctx_mask(aa_attn_ctx_t *cx, const aa_problem_t *pb, const aa_recipe_t *r, double scale0) {
  int exp_fold = r->scale_fold == AA_SCALE_EXP;
  cx->masked = aa_problem_has_mask(pb);
  cx->mod |= cx->masked && r->mask_score != AA_MASKSC_NEGINF;
  cx->scale_in_mod = r->mask_enter == AA_MASKAT_SCALE_FMA && r->scale_fold == AA_SCALE_S && aa_problem_has_bias(pb);
  cx->mask_div = cx->mask_mul = 1.0;
  if (r->mask_enter == AA_MASKAT_AFTER_CAP && exp_fold) cx->mask_div = cx->scale;
  if (r->mask_enter == AA_MASKAT_BEFORE_CAP && exp_fold) cx->mask_div = scale0;
  if (r->mask_enter == AA_MASKAT_BEFORE_SCALE && !exp_fold) cx->mask_mul = scale0;
  cx->mask_low = r->mask_score == AA_MASKSC_LOWEST ? -aa_fmt_info(r->alu_fmt)->max_finite : 0.0;
  /* mask.score = fill: the fill as PyTorch casts it (the query's dtype, the io format), in the bias's S units */
  double f = cx->mask_fill_io = aa_attn_rnd(r->mask_fill, r->io_fmt);
  cx->mask_fill_s = cx->mask_div != 1.0   ? aa_attn_alu(f / cx->mask_div, r->alu_fmt)
                    : cx->mask_mul != 1.0 ? aa_attn_alu(f * cx->mask_mul, r->alu_fmt)
                                          : f;
}

/* Sink logits, loaded into the engine's format ([nki-bwd] L1361-1372). */
static int ctx_sinks(run_t *rn, const aa_problem_t *pb, const aa_recipe_t *r, aa_error_t *err) {
  size_t ns = pb->heads * pb->num_sinks;
  if (pb->num_sinks == 0) return AA_OK;
  if ((rn->sinks = malloc(ns * sizeof *rn->sinks)) == NULL)
    return aa_error_set(err, AA_ENOMEM, "attn_run: cannot allocate the sink logits");
  for (size_t i = 0; i < ns; i++)
    rn->sinks[i] = aa_attn_rnd(pb->sinks[i], r->alu_fmt);
  rn->cx.sinks = rn->sinks;
  return AA_OK;
}

/* Step 3, context: everything forward and backward read besides the
   outputs. Dropout: the forward applies the problem's mask (the oracle's);
   a recipe with a dropout scheme makes the backward redraw its own mask
   with its tiling ([nki-bwd] CORRECTION, twin L974-981), and draws the
   forward's too when the problem has none (run_dropout_masks). The rescale
   is the problem's with a given mask, else the scheme's. */
static int run_context(run_t *rn, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                       const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_error_t *err) {
  aa_attn_ctx_t *cx = &rn->cx;
  ctx_scales(cx, pb, r);
  double scale0 = cx->scale;
  ctx_softcap(cx, pb, r);
  ctx_mask(cx, pb, r, scale0);
  int st = ctx_alibi(rn, pb, r, err);
  if (st != AA_OK) return st;
  cx->keep_fwd = cx->keep_bwd = pb->keep;
  if (pb->keep != NULL)
    cx->ks = aa_attn_rnd(pb->keep_scale, r->alu_fmt);
  else
    cx->ks = r->dropout.scheme != AA_DROPOUT_NONE ? aa_attn_rnd(aa_dropout_keep_scale(&r->dropout), r->alu_fmt) : 1.0;
  cx->Q = q->data;
  cx->K = k->data;
  cx->V = v->data;
  cx->dO = dO != NULL ? dO->data : NULL;
  st = aa_attn_quant_operands(cx, rn->quant, err);
  if (st != AA_OK) return st;
  return ctx_sinks(rn, pb, r, err);
}

/* The output tensors (the backward's when dO is given) and, for the
   fixed-shift and guarded forwards, the per-row (shift, 1/l) checkpoint and
   per-tile flags (forward_fixed.c). */
static int alloc_outputs(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, int backward,
                         aa_error_t *err) {
  size_t H = pb->heads, nq = pb->n_q;
  size_t s3q[3] = {H, nq, pb->d}, s3k[3] = {pb->kv_heads, pb->n_k, pb->d}, s2[2] = {H, nq},
         ss[2] = {H, pb->num_sinks};
  int st = aa_tensor_alloc(&out->o, 3, s3q, r->io_fmt);
  if (st == AA_OK) st = aa_tensor_alloc(&out->lse, 2, s2, r->fwd_lse_fmt);
  if (st == AA_OK && backward) {
    st = aa_tensor_alloc(&out->dq, 3, s3q, r->io_fmt);
    if (st == AA_OK) st = aa_tensor_alloc(&out->dk, 3, s3k, r->io_fmt);
    if (st == AA_OK) st = aa_tensor_alloc(&out->dv, 3, s3k, r->io_fmt);
    if (st == AA_OK && pb->num_sinks > 0) st = aa_tensor_alloc(&out->dsinks, 2, ss, r->bwd_dsinks_fmt);
  }
  size_t tqf = r->fwd_tile_q && r->fwd_tile_q < nq ? r->fwd_tile_q : nq;
  out->fwd_q_tiles = nq ? (nq + tqf - 1) / tqf : 0;
  if (st == AA_OK && (r->fwd_softmax == AA_SOFTMAX_FIXED_SHIFT || r->fwd_softmax == AA_SOFTMAX_GUARDED)) {
    st = aa_tensor_alloc(&out->recip, 2, s2, r->fwd_lse_fmt);
    if (st == AA_OK) st = aa_tensor_alloc(&out->shift, 2, s2, r->fwd_lse_fmt);
    if (st == AA_OK) {
      out->row_ckpt = calloc(H * nq + 1, 1);
      out->tile_flagged = calloc(H * out->fwd_q_tiles + 1, 1);
      if (out->row_ckpt == NULL || out->tile_flagged == NULL) st = AA_ENOMEM;
    }
  }
  return st == AA_OK ? AA_OK : aa_error_set(err, st, "attn_run: cannot allocate the outputs");
}

/* A recipe dropout scheme's redrawn masks: the backward's always, the
   forward's when the problem brings none. */
static int run_dropout_masks(run_t *rn, const aa_problem_t *pb, const aa_recipe_t *r, aa_error_t *err) {
  size_t H = pb->heads, nq = pb->n_q, nk = pb->n_k, nm = 0;
  if (r->dropout.scheme == AA_DROPOUT_NONE) return AA_OK;
  if (aa_size_mul(&nm, H, nq) == AA_OK && aa_size_mul(&nm, nm, nk) == AA_OK) rn->drawn_bwd = malloc(nm ? nm : 1);
  if (rn->drawn_bwd != NULL && pb->keep == NULL) rn->drawn_fwd = malloc(nm ? nm : 1);
  if (rn->drawn_bwd == NULL || (pb->keep == NULL && rn->drawn_fwd == NULL))
    return aa_error_set(err, AA_ENOMEM, "attn_run: cannot allocate the dropout masks");
  int st = aa_dropout_mask_bwd(rn->drawn_bwd, NULL, &r->dropout, H, nq, nk, err);
  if (st == AA_OK && rn->drawn_fwd != NULL)
    st = aa_dropout_mask_fwd(rn->drawn_fwd, NULL, &r->dropout, H, nq, nk, err);
  if (st != AA_OK) return st == AA_ENOMEM ? aa_error_set(err, st, "attn_run: cannot allocate the dropout masks") : st;
  rn->cx.keep_bwd = rn->drawn_bwd;
  if (rn->drawn_fwd != NULL) rn->cx.keep_fwd = rn->drawn_fwd;
  return AA_OK;
}

/* Step 4, forward. With FP8 or rotated operands the forward alone reads
   the cast operands, the backward the io inputs (FA3 has no FP8 backward). */
static int run_forward(const aa_attn_ctx_t *cx, aa_attn_result_t *out, aa_error_t *err) {
  double *qf = NULL, *kf = NULL, *vf = NULL;
  int st = aa_attn_fwd_operands(cx, &qf, &kf, &vf, err);
  out->fwd_device = AA_ATTN_DEVICE_CPU;
  if (st == AA_OK && qf != NULL) {
    aa_attn_ctx_t cxf = *cx;
    cxf.Q = qf, cxf.K = kf, cxf.V = vf;
    st = aa_attn_forward(&cxf, out);
  } else if (st == AA_OK) {
    st = AA_EUNSUPPORTED; /* the GPU emulation where asked for and implemented (cuda.c), else the CPU */
    if (cx->device != AA_ATTN_DEVICE_CPU) st = aa_attn_forward_cuda(cx, out, cx->device == AA_ATTN_DEVICE_CUDA_EMU);
    out->fwd_device = st == AA_OK
                          ? cx->device == AA_ATTN_DEVICE_CUDA_EMU ? AA_ATTN_DEVICE_CUDA_EMU : AA_ATTN_DEVICE_CUDA
                          : AA_ATTN_DEVICE_CPU;
    if (st == AA_EUNSUPPORTED) st = aa_attn_forward(cx, out);
  }
  free(qf), free(kf), free(vf);
  return st;
}

/* aa_attn_backward, or the GPU emulation where asked for and implemented (cuda_bwd.c); out->bwd_device says which. */
static int backward_device(const aa_attn_ctx_t *cx, aa_attn_result_t *out) {
  if (cx->device != AA_ATTN_DEVICE_CPU) {
    int emu = cx->device == AA_ATTN_DEVICE_CUDA_EMU, st = aa_attn_backward_cuda(cx, out, emu);
    if (st == AA_OK) out->bwd_device = emu ? AA_ATTN_DEVICE_CUDA_EMU : AA_ATTN_DEVICE_CUDA;
    if (st != AA_EUNSUPPORTED) return st;
  }
  return aa_attn_backward(cx, out);
}

/* bwd.exp_form, bwd.scale_fold: a backward whose weights take another exp form than the forward's (xformers: the
   forward's exp2f(S*scale*kLog2e - mi), the backward's expf(S*scale - LSE), kernel_backward.h processBlockIJ and
   mma_from_smem.h accumApplyLSEToSmem), or apply the scale elsewhere (cudnn-h100's decode), runs on a copy of the
   recipe with that exp_form and fold, their coefficient, and the mask's units in that fold (check_bwd_fold keeps
   softcap and ALiBi out, so the scale is the problem's). */
static int backward_own_forms(const aa_attn_ctx_t *cx, aa_attn_result_t *out) {
  aa_recipe_t *rb = malloc(sizeof *rb);
  if (rb == NULL) return AA_ENOMEM;
  *rb = *cx->r;
  if (cx->r->bwd_exp_form) rb->exp_form = (aa_exp_form_t)(cx->r->bwd_exp_form - 1);
  aa_attn_ctx_t cb = *cx;
  cb.r = rb;
  if (cx->r->bwd_scale_fold && cx->r->bwd_scale_fold - 1 != (int)cx->r->scale_fold) {
    rb->scale_fold = (aa_scale_fold_t)(cx->r->bwd_scale_fold - 1);
    cb.se = rb->scale_fold == AA_SCALE_EXP ? cb.scale : 1.0;
    ctx_mask(&cb, cx->pb, rb, cb.scale);
  }
  cb.c = exp_coef(&cb, rb);
  int st = backward_device(&cb, out);
  free(rb);
  return st;
}

/* Step 5, backward. Reciprocal backward ([blackwell-fa] section 3.5): dO
   scaled once in the linear preprocessing pass, the saved shifts as exp
   biases. */
static int run_backward(run_t *rn, aa_attn_result_t *out) {
  aa_attn_ctx_t *cx = &rn->cx;
  out->bwd_device = AA_ATTN_DEVICE_CPU; /* unless the GPU emulation runs it below */
  if (cx->r->bwd_norm == AA_BWDNORM_RECIP) {
    int st = aa_attn_recip_prepare(cx, out, &rn->dO_eff, &rn->bias);
    cx->dO = rn->dO_eff;
    cx->bias = rn->bias;
    if (st != AA_OK) return st;
  }
  cx->dq_mul = cx->scale;
  if (cx->r->bwd_exp_form || cx->r->bwd_scale_fold) return backward_own_forms(cx, out);
  return cx->r->bwd_k_prescale ? backward_k_prescaled(cx, out) : backward_device(cx, out);
}

/* Steps 4 and 5 on a ready context and outputs; a failure names the recipe. */
static int run_passes(run_t *rn, aa_attn_result_t *out, int backward, aa_error_t *err) {
  rn->cx.first = &out->first;
  int st = run_forward(&rn->cx, out, err);
  if (st == AA_OK) aa_attn_first_fwd(&rn->cx, out);
  if (st == AA_OK && backward) st = run_backward(rn, out);
  if (st == AA_OK) aa_attn_quant_smooth_lse(&rn->cx, rn->quant, out);
  if (st == AA_OK) aa_attn_finish_empty(&rn->cx, out);
  if (st == AA_OK && backward) aa_attn_phantom_keys(&rn->cx, out);
  if (st != AA_OK)
    return aa_error_set(err, st, "attn_run: recipe '%s' failed (%s)", rn->cx.r->name, aa_status_str(st));
  return AA_OK;
}

/* check, dispatch, context, forward, backward; what the steps allocate is
   in rn (run_free) and out (freed on failure). */
static int run_resolved(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                        const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_attn_device_t dev,
                        aa_error_t *err) {
  run_t rn = {0};
  rn.cx.device = dev;
  int st = run_check(pb, r, err);
  if (st == AA_OK) st = run_dispatch(&rn, &r, pb, err);
  if (st == AA_OK) st = check_split_keys(pb, r, err);
  if (st == AA_OK) st = check_inputs(pb, r, q, k, v, dO, err);
  if (st != AA_OK) return st;
  if (pb->varlen_batch > 0) { /* sequence by sequence, on the CPU */
    st = aa__attn_run_varlen(out, pb, r, q, k, v, dO, err);
    out->fwd_device = out->bwd_device = AA_ATTN_DEVICE_CPU;
    return st;
  }
  st = check_working_set(pb, r, err);
  if (st == AA_OK) st = run_context(&rn, pb, r, q, k, v, dO, err);
  if (st == AA_OK) st = alloc_outputs(out, pb, r, dO != NULL, err);
  if (st == AA_OK) st = run_dropout_masks(&rn, pb, r, err);
  if (st == AA_OK) st = run_passes(&rn, out, dO != NULL, err);
  run_free(&rn);
  if (st != AA_OK) aa_attn_result_free(out);
  return st;
}
