/* attnacc: the flat entry points aa_flat_score and aa_flat_oracle (C arrays with shapes in, scores or oracle values
 * out), for callers such as the Python package. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn.h"
#include "score.h"
#include "score/score-impl.h"
#include "version.h"

const char *aa_flat_version(void) {
  return AA_VERSION;
}

void aa_flat_opts_init(aa_flat_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->layout = AA_LAYOUT_AUTO;
  o->atol = AA_METRICS_ATOL;
  o->rtol = AA_METRICS_RTOL;
  o->ulp_fmt = -1;
  o->oracle_path = AA_ORACLE_FAST;
  o->naive = 1;
}

typedef struct {
  aa_layout_t layout;
  aa_dims_t dq, dk; /* dims of q and of k in the layout */
  aa_tensor_t in[4];
  aa_problem_t pb;
  aa_fmt_t in_fmt;
  double target;  /* the oracle's target when the caller names none: the score's (aa_score_oracle_target), or the
                     oracle's own default for emulate, as `attnacc run` */
  double *bias;   /* pb.bias: the caller's mask over the folded heads (prob_mask) */
  double *slopes; /* [B * H] ALiBi slopes of the folded heads */
} flat_prob_t;

static void prob_free(flat_prob_t *p) {
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&p->in[i]);
  free(p->bias);
  p->bias = NULL;
  free(p->slopes);
  p->slopes = NULL;
}

/* The mask options into p->pb (aa_problem_mask_expand over the folded heads b H + h). */
static int prob_mask(flat_prob_t *p, const aa_flat_opts_t *o, aa_error_t *err) {
  size_t B = p->dq.b, H = p->dq.h, nq = p->dq.n, nk = p->dk.n;
  p->pb.logit_offset = o->logit_offset;
  if (o->attn_mask == NULL && o->nkey_len == 0) return AA_OK;
  if (o->attn_mask != NULL && !((o->mask_b == 1 || o->mask_b == B) && (o->mask_h == 1 || o->mask_h == H)))
    return aa_error_set(err, AA_ESHAPE,
                        "attn_mask has %zu batch and %zu head entries; the problem has B = %zu, H = %zu", o->mask_b,
                        o->mask_h, B, H);
  if (o->nkey_len != 0 && o->nkey_len != 1 && o->nkey_len != B)
    return aa_error_set(err, AA_ESHAPE, "%zu key lengths for a batch of %zu (give one, or one per batch element)",
                        o->nkey_len, B);
  for (size_t b = 0; b < o->nkey_len; b++)
    if (o->key_len[b] > nk)
      return aa_error_set(err, AA_EINVAL, "key length %zu of batch element %zu exceeds n_k = %zu", o->key_len[b], b,
                          nk);
  if ((p->bias = malloc(B * H * nq * nk * sizeof *p->bias)) == NULL)
    return aa_error_set(err, AA_ENOMEM, "cannot allocate the attention mask of %zu heads of [%zu, %zu]", B * H, nq,
                        nk);
  aa_problem_mask_expand(p->bias, o->attn_mask, o->mask_b, o->mask_h, B, H, nq, nk, o->key_len, o->nkey_len);
  p->pb.bias = p->bias;
  p->pb.bias_bool = o->attn_mask != NULL && o->mask_bool;
  p->pb.mask_hstride = nq * nk;
  return AA_OK;
}

/* The problem features, sinks and keep mask of the options (problem.h; aa_problem_check checks their values). */
static int prob_features(flat_prob_t *p, const aa_flat_opts_t *o, aa_error_t *err) {
  aa_problem_t *pb = &p->pb;
  size_t heads = pb->heads, h = p->dq.h;
  pb->align = (aa_align_t)o->align;
  pb->local = o->local != 0;
  pb->window_left = o->window_left;
  pb->window_right = o->window_right;
  pb->softcap = o->softcap;
  pb->alibi = (aa_alibi_t)o->alibi;
  if (o->alibi != AA_ALIBI_NONE) {
    size_t n = o->alibi_slopes != NULL ? o->n_slopes : h;
    if (n != h && n != heads)
      return aa_error_set(err, AA_ESHAPE,
                          "alibi_slopes: %zu slopes; need one per head of q (%zu) or per batch and head (%zu)", n, h,
                          heads);
    if ((p->slopes = malloc(heads * sizeof *p->slopes)) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
    if (o->alibi_slopes == NULL)
      aa_problem_alibi_geometric(p->slopes, h);
    else
      memcpy(p->slopes, o->alibi_slopes, n * sizeof *p->slopes);
    for (size_t i = n; i < heads; i++) /* flash-attn's [H] slopes are the same for every batch */
      p->slopes[i] = p->slopes[i % n];
    pb->alibi_slopes = p->slopes;
  }
  if (o->sinks != NULL) {
    if (p->dq.b != 1) return aa_error_set(err, AA_ESHAPE, "sinks need batch 1 (the inputs have B = %zu)", p->dq.b);
    if (o->sinks_numel != heads * o->num_sinks)
      return aa_error_set(err, AA_ESHAPE, "sinks holds %zu values, not [H, K] = [%zu, %zu]", o->sinks_numel, heads,
                          o->num_sinks);
    pb->num_sinks = o->num_sinks;
    pb->sinks = o->sinks;
  }
  if (o->keep != NULL) {
    if (o->keep_numel != heads * pb->n_q * pb->n_k)
      return aa_error_set(err, AA_ESHAPE, "keep holds %zu values, not [B, H, n_q, n_k] = [%zu, %zu, %zu, %zu]",
                          o->keep_numel, p->dq.b, h, pb->n_q, pb->n_k);
    pb->keep = o->keep;
    pb->keep_scale = o->keep_scale;
  }
  return AA_OK;
}

static void shape_str(char *buf, size_t cap, const aa_flat_tensor_t *t) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < t->ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%zu", i ? ", " : "", t->shape[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

static int valid_fmt(int f) {
  return f == AA_FMT_BF16 || f == AA_FMT_FP16 || f == AA_FMT_FP32 || f == AA_FMT_FP64;
}

static int same_shape(const aa_flat_tensor_t *a, const aa_flat_tensor_t *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

static const char *const in_names[4] = {"q", "k", "v", "do"};

/* Check shapes and resolve the layout into p->layout, p->dq, p->dk (the data
   pointers only when need_data). */
static int prob_shapes(flat_prob_t *p, const aa_flat_tensor_t *in, const aa_flat_opts_t *o, int need_data,
                       aa_error_t *err) {
  const char *const *nm = in_names;
  char a[96], b[96];
  int rc;
  memset(p, 0, sizeof *p);
  for (int i = 0; i < 4; i++) {
    if (need_data && in[i].data == NULL) return aa_error_set(err, AA_EINVAL, "%s is missing", nm[i]);
    if (in[i].ndim < 2 || in[i].ndim > 4)
      return aa_error_set(err, AA_ESHAPE,
                          "%s has %d axes (need 2 to 4: [N, d], [H, N, d], [B, H, N, d] or [B, N, H, d])", nm[i],
                          in[i].ndim);
    if (!valid_fmt(in[i].fmt))
      return aa_error_set(err, AA_EINVAL, "%s: format %d is not bf16/fp16/fp32/fp64", nm[i], in[i].fmt);
  }
  if (in[0].ndim != in[1].ndim || !same_shape(&in[1], &in[2]) || !same_shape(&in[0], &in[3])) {
    int bad = in[0].ndim != in[1].ndim ? 1 : !same_shape(&in[1], &in[2]) ? 2 : 3;
    shape_str(a, sizeof a, &in[bad]);
    shape_str(b, sizeof b, &in[bad == 2 ? 1 : 0]);
    return aa_error_set(err, AA_ESHAPE, "%s %s does not match %s %s", nm[bad], a, bad == 2 ? "k" : "q", b);
  }
  if (o->varlen_batch > 0 && o->layout != AA_LAYOUT_AUTO && o->layout != AA_LAYOUT_NHD)
    return aa_error_set(err, AA_EINVAL, "a varlen batch needs the packed layout nhd ([total, H, d]), not %s",
                        aa_layout_name((aa_layout_t)o->layout));
  if (o->varlen_batch > 0 && in[0].ndim != 3)
    return aa_error_set(err, AA_ESHAPE, "a varlen batch needs packed [total, H, d] arrays; q has %d axes",
                        in[0].ndim);
  if ((rc = aa_layout_resolve(&p->layout, o->varlen_batch > 0 ? AA_LAYOUT_NHD : (aa_layout_t)o->layout, in[0].ndim,
                              in[0].shape, in[1].shape, err)) != AA_OK)
    return rc;
  aa_layout_dims(&p->dq, p->layout, in[0].ndim, in[0].shape);
  aa_layout_dims(&p->dk, p->layout, in[1].ndim, in[1].shape);
  return AA_OK;
}

/* Check shapes, resolve the layout, import the inputs and set up the problem. */
static int prob_setup(flat_prob_t *p, const aa_flat_tensor_t *in, const aa_flat_opts_t *o, aa_error_t *err) {
  const char *const *nm = in_names;
  int rc;
  if ((rc = prob_shapes(p, in, o, 1, err)) != AA_OK) return rc;
  p->in_fmt = AA_FMT_BF16;
  for (int i = 0; i < 4; i++) {
    if ((rc = aa_layout_import(&p->in[i], in[i].data, (aa_fmt_t)in[i].fmt, p->layout, in[i].ndim, in[i].shape,
                               err)) != AA_OK) {
      prob_free(p);
      return rc;
    }
    /* the widest input format: bf16 < fp32 < fp64, fp16 < fp32 */
    if (in[i].fmt == AA_FMT_FP64 || (in[i].fmt == AA_FMT_FP32 && p->in_fmt != AA_FMT_FP64) ||
        (in[i].fmt == AA_FMT_FP16 && p->in_fmt == AA_FMT_BF16))
      p->in_fmt = (aa_fmt_t)in[i].fmt;
  }
  p->target = aa_score_oracle_target(p->in_fmt);
  for (int i = 0; i < 4; i++) {
    size_t nn, ni;
    aa_tensor_count_nonfinite(&p->in[i], &nn, &ni);
    if (nn || ni) {
      prob_free(p);
      return aa_error_set(err, AA_ENAN, "%s holds %zu NaN and %zu Inf values", nm[i], nn, ni);
    }
  }
  aa_problem_init(&p->pb, p->dq.n, p->dk.n, p->dq.d, p->dq.b * p->dq.h, p->dk.b * p->dk.h);
  p->pb.causal = o->causal != 0;
  p->pb.window = o->window;
  if (o->scale != 0) {
    if (!(o->scale > 0) || !isfinite(o->scale)) {
      prob_free(p);
      return aa_error_set(err, AA_EINVAL, "scale %g is not a positive number", o->scale);
    }
    p->pb.scale_default = 0;
    p->pb.scale = o->scale;
  }
  p->pb.varlen_batch = o->varlen_batch; /* the check matches the offsets with the packed lengths */
  p->pb.cu_seqlens_q = o->cu_seqlens_q;
  p->pb.cu_seqlens_k = o->cu_seqlens_k != NULL ? o->cu_seqlens_k : o->cu_seqlens_q;
  if ((rc = prob_features(p, o, err)) != AA_OK || (rc = prob_mask(p, o, err)) != AA_OK ||
      (rc = aa_problem_check(&p->pb, err)) != AA_OK) {
    prob_free(p);
    return rc;
  }
  return AA_OK;
}

static void fill_info(aa_flat_info_t *info, const flat_prob_t *p, const aa_oracle_result_t *r) {
  const aa_oracle_out_t *outs[4] = {&r->o, &r->dq, &r->dk, &r->dv};
  if (info == NULL) return;
  memset(info, 0, sizeof *info);
  info->layout = p->layout;
  info->b = p->dq.b;
  info->h = p->dq.h;
  info->h_kv = p->dk.h;
  info->n_q = p->dq.n;
  info->n_k = p->dk.n;
  info->d = p->dq.d;
  info->scale = aa_problem_scale(&p->pb);
  info->input_fmt = p->in_fmt;
  for (int i = 0; i < 4; i++)
    if (outs[i]->relerr_bound > info->oracle_relerr_bound) info->oracle_relerr_bound = outs[i]->relerr_bound;
  info->oracle_recomputed = r->n_recomputed;
  info->oracle_uncertified = r->n_uncertified;
}

/* The oracle's options; without oracle_target, the problem's default (flat_prob_t.target). */
static void oracle_opts(aa_oracle_opts_t *oo, const aa_flat_opts_t *o, const flat_prob_t *p) {
  aa_oracle_opts_init(oo);
  oo->path = (aa_oracle_path_t)o->oracle_path;
  oo->device = (aa_oracle_device_t)o->device;
  oo->threads = o->threads;
  oo->target = o->oracle_target != 0 ? o->oracle_target : p->target;
}

/* The oracle: kept (*borrowed = 1: not to be freed), cached or computed. */
static int run_oracle(aa_oracle_result_t *r, int *borrowed, const flat_prob_t *p, const aa_flat_opts_t *o,
                      aa_error_t *err) {
  aa_oracle_opts_t oo;
  if (o->oracle_path < 0 || o->oracle_path >= AA_ORACLE_COUNT)
    return aa_error_set(err, AA_EINVAL, "oracle path %d is unknown", o->oracle_path);
  if (o->device < 0 || o->device >= AA_ORACLE_DEVICE_COUNT)
    return aa_error_set(err, AA_EINVAL, "device %d is unknown", o->device);
  if (o->device == AA_ORACLE_DEVICE_CUDA && !aa_oracle_cuda_available())
    return aa_error_set(err, AA_EUNSUPPORTED, "device cuda: no CUDA GPU, or a libattnacc built without CUDA");
  oracle_opts(&oo, o, p);
  return aa_score_oracle_get(r, borrowed, &p->pb, p->in, &oo, o->cache_dir, o->oracle, err);
}

/* Where the scored outputs' elements sit in the caller's arrays (aa_eval_index: o, dq, dk, dv, dsinks, lse). */
static aa_eval_place_t place_of(const flat_prob_t *p) {
  return (aa_eval_place_t){p->layout, p->dq, p->dk, p->pb.n_q, p->pb.n_k, p->pb.d, p->pb.num_sinks, NULL};
}

static void to_flat(aa_flat_out_t *f, const aa_eval_out_t *eo, const aa_tensor_t *got, const aa_oracle_out_t *ref,
                    const aa_eval_place_t *pl) {
  const aa_score_out_t *s = &eo->s;
  snprintf(f->name, sizeof f->name, "%s", s->name);
  f->present = 1;
  f->data_fmt = s->data_fmt;
  f->ulp_fmt = s->ulp_fmt;
  f->count = s->m.count;
  f->nan = s->m.nan;
  f->inf = s->m.inf;
  f->rel_l2 = s->m.rel_l2;
  f->max_abs = s->m.max_abs;
  for (size_t k = 0; k < aa_score_nmeasures; k++)
    AA_FLAT_MEASURE(f, k) = AA_SCORE_MEASURE(s, k);
  f->idx_ndim = aa_eval_index(f->worst_abs_idx, pl, eo, s->worst_abs);
  aa_eval_index(f->worst_rel_idx, pl, eo, s->worst_rel);
  f->worst_got = s->worst_got;
  f->worst_ref = s->worst_ref;
  f->worst_rel_got = got->data[s->worst_rel];
  f->worst_rel_ref = ref->val.data[s->worst_rel];
  f->row_worst = s->row_worst;
  f->head_worst = s->head_worst;
  for (int k = 0; k < AA_EXPECT_NSTAT; k++) {
    f->expect_ratio[k] = s->expect_ratio[k];
    f->expect_limit[k] = s->expect_limit[k];
    f->expect_ref[k] = s->expect_ref[k];
  }
  f->expect_stat = s->expect_stat;
  for (int r = 0; r < AA_RULE_COUNT; r++) {
    const aa_rule_result_t *x = &s->rule[r];
    f->rule_applied[r] = x->applied;
    f->rule_pass[r] = x->pass;
    f->rule_ratio[r] = x->ratio;
    f->rule_allowed[r] = x->allowed;
    f->rule_atol[r] = x->atol;
    f->rule_rtol[r] = x->rtol;
    f->rule_naive_max_abs[r] = x->naive_max_abs;
    f->rule_fail_count[r] = x->fail_count;
    aa_eval_index(f->rule_worst_idx[r], pl, eo, x->worst);
    f->rule_worst_got[r] = x->worst_got;
    f->rule_worst_ref[r] = x->worst_ref;
  }
}

/* One given output t of n elements, refused unless its last axis has last elements (the shapes of dsinks and lse
   vary with the layout: their counts and last axes decide). */
static int import_flat(aa_tensor_t *dst, const aa_flat_tensor_t *t, const char *name, size_t rows, size_t last,
                       aa_error_t *err) {
  size_t n = 1, shp[2] = {rows, last};
  char a[96];
  for (int i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  if (t->ndim < 1 || t->ndim > 3 || n != rows * last || t->shape[t->ndim - 1] != last) {
    shape_str(a, sizeof a, t);
    return aa_error_set(err, AA_ESHAPE, "%s %s does not hold %zu x %zu elements ending in an axis of %zu", name, a,
                        rows, last, last);
  }
  if (aa_tensor_alloc(dst, 2, shp, (aa_fmt_t)t->fmt) != AA_OK) return aa_error_set(err, AA_ENOMEM, "out of memory");
  memcpy(dst->data, t->data, n * sizeof *dst->data);
  return AA_OK;
}

/* The given outputs (o, dq of q's shape, dk, dv of k's, dsinks [H, K], lse [B, H, N]) imported into got[0..5] in
   the problem's layout (folded). */
static int import_outputs(aa_tensor_t got[AA_FLAT_NOUT], const flat_prob_t *p, const aa_flat_tensor_t *inputs,
                          const aa_flat_tensor_t *outputs, aa_error_t *err) {
  static const char *nm[AA_FLAT_NOUT] = {"o", "dq", "dk", "dv", "dsinks", "lse"};
  char a[96], b[96];
  int rc;
  for (int i = 0; i < AA_FLAT_NOUT; i++) {
    const aa_flat_tensor_t *like = &inputs[i == 0 || i == 1 ? 0 : 1];
    if (outputs[i].data == NULL) continue;
    if (!valid_fmt(outputs[i].fmt))
      return aa_error_set(err, AA_EINVAL, "%s: format %d is not bf16/fp16/fp32/fp64", nm[i], outputs[i].fmt);
    if (i == 4 && p->pb.num_sinks == 0) return aa_error_set(err, AA_EINVAL, "dsinks given without sinks");
    if (i >= 4) {
      rc = import_flat(&got[i], &outputs[i], nm[i], p->pb.heads, i == 4 ? p->pb.num_sinks : p->pb.n_q, err);
      if (rc != AA_OK) return rc;
      continue;
    }
    if (!same_shape(&outputs[i], like)) {
      shape_str(a, sizeof a, &outputs[i]);
      shape_str(b, sizeof b, like);
      return aa_error_set(err, AA_ESHAPE, "%s %s does not match %s %s", nm[i], a, i < 2 ? "q" : "k", b);
    }
    if ((rc = aa_layout_import(&got[i], outputs[i].data, (aa_fmt_t)outputs[i].fmt, p->layout, outputs[i].ndim,
                               outputs[i].shape, err)) != AA_OK)
      return rc;
  }
  return AA_OK;
}

/* The scored outputs of v (those of got[0..n-1] that are present, in that order) into out[0..n-1]; lse (NULL when
   n < 6): the copies the lse was compared on. */
static void export_scores(aa_flat_out_t *out, const aa_eval_variant_t *v, const aa_tensor_t *const *got, int n,
                          const aa_oracle_result_t *orc, const aa_eval_lse_t *lse, const flat_prob_t *p) {
  const aa_oracle_out_t *ref[AA_FLAT_NOUT] = {&orc->o,  &orc->dq,     &orc->dk,
                                              &orc->dv, &orc->dsinks, lse != NULL ? &lse->ref : NULL};
  aa_eval_place_t pl = place_of(p);
  for (int i = 0, j = 0; i < n && j < v->nout; i++)
    if (got[i]->data != NULL) {
      to_flat(&out[i], &v->out[j], i == 5 ? &lse->got : got[i], ref[i], &pl);
      j++;
    }
}

/* What a flat call evaluates: the oracle (borrowed: a kept one, not freed), the variant scored (emulate), the naive
   reference and the expect recipe (zeroed: freed whole). */
typedef struct {
  aa_oracle_result_t orc;
  int borrowed;
  aa_eval_variant_t v, naive, rec;
  aa_attn_result_t res;
} flat_eval_t;

/* The naive reference in format fmt (the inputs are tagged fmt) into e->naive, when asked and when one exists in
   that format, through the options' cache; the caller applies its fa and sdpa rules. */
static int flat_naive(flat_eval_t *e, flat_prob_t *p, aa_fmt_t fmt, const aa_flat_opts_t *o, aa_error_t *err) {
  const aa_tensor_t *in[4] = {&p->in[0], &p->in[1], &p->in[2], &p->in[3]};
  aa_oracle_opts_t oo;
  if (!o->naive || (fmt != AA_FMT_BF16 && fmt != AA_FMT_FP16 && fmt != AA_FMT_FP32)) return AA_OK;
  for (int i = 0; i < 4; i++)
    p->in[i].fmt = fmt;
  oracle_opts(&oo, o, p);
  return aa_eval_naive_cached(&e->naive, NULL, fmt, &p->pb, in, &e->orc, &oo, o->cache_dir, err);
}

static void eval_free(flat_eval_t *e) {
  aa_attn_result_free(&e->res);
  aa_eval_variant_free(&e->v);
  aa_eval_variant_free(&e->naive);
  aa_eval_variant_free(&e->rec);
  if (!e->borrowed && e->orc.o.val.data != NULL) aa_oracle_result_free(&e->orc);
}

/* The expect recipe in the kernel's format kf run on the inputs (tagged with its io format) into e->rec, through the
   options' cache. */
static int flat_expect_run(flat_eval_t *e, flat_prob_t *p, aa_fmt_t kf, const aa_flat_opts_t *o, aa_error_t *err) {
  const aa_tensor_t *in[4] = {&p->in[0], &p->in[1], &p->in[2], &p->in[3]};
  aa_oracle_opts_t oo;
  aa_recipe_t r;
  int rc;
  if ((rc = aa_eval_expect_recipe(&r, o->expect, kf, err)) != AA_OK) return rc;
  for (int i = 0; i < 4; i++)
    p->in[i].fmt = r.io_fmt;
  oracle_opts(&oo, o, p);
  rc = aa_eval_recipe_cached(&e->rec, NULL, &r, 0, &p->pb, in, &e->orc, &oo, o->cache_dir, err);
  for (int i = 0; i < 4; i++)
    p->in[i].fmt = p->in_fmt;
  return rc;
}

static void set_msg(char *msg, size_t msg_cap, int rc, const aa_error_t *err) {
  if (msg != NULL && msg_cap > 0) snprintf(msg, msg_cap, "%s", rc == AA_OK ? "" : err->msg);
}

/* The given outputs against the oracle into v: o .. dsinks as aa_eval_given, then the lse (got[5]) on the copies
   lse (zeroed by the caller, freed by it). */
static int score_given(aa_eval_variant_t *v, aa_eval_lse_t *lse, const aa_tensor_t got[AA_FLAT_NOUT],
                       const aa_oracle_result_t *orc, const aa_flat_opts_t *opts, aa_error_t *err) {
  aa_eval_opts_t eo = {opts->ulp_fmt, opts->atol, opts->rtol};
  int rc = aa_eval_given(v, got, orc, &eo, err);
  if (rc != AA_OK || got[5].data == NULL) return rc;
  if ((rc = aa_eval_lse_prepare(lse, &got[5], &orc->lse, err)) != AA_OK) return rc;
  return aa_eval_lse(v, lse, &eo, err);
}

/* One set's outputs got[0..5] scored into out[0..5] with the naive and expect references of e. */
static int flat_score_set(aa_flat_out_t *out, flat_eval_t *e, aa_tensor_t *got, flat_prob_t *p,
                          const aa_flat_opts_t *opts, aa_error_t *err) {
  const aa_tensor_t *gp[AA_FLAT_NOUT] = {&got[0], &got[1], &got[2], &got[3], &got[4], &got[5]};
  aa_eval_variant_t v;
  aa_eval_lse_t lse;
  int rc;
  memset(&v, 0, sizeof v);
  memset(&lse, 0, sizeof lse);
  rc = score_given(&v, &lse, got, &e->orc, opts, err);
  if (rc == AA_OK && e->naive.nout > 0) aa_eval_apply_naive(&v, &e->naive);
  if (rc == AA_OK) aa_eval_apply_expect(&v, &e->rec);
  if (rc == AA_OK) export_scores(out, &v, gp, AA_FLAT_NOUT, &e->orc, &lse, p);
  aa_eval_variant_free(&v);
  aa_eval_lse_free(&lse);
  return rc;
}

/* The references of a flat score: the oracle, the naive reference in the inputs' format and the expect recipe
   in the kernel's format kf (when asked). */
static int flat_references(flat_eval_t *e, flat_prob_t *p, aa_fmt_t kf, const aa_flat_opts_t *opts, aa_error_t *err,
                           double *t) {
  int rc;
  if ((rc = run_oracle(&e->orc, &e->borrowed, p, opts, err)) != AA_OK) return rc;
  aa_phase_mark("AA_SCORE_TIMES", "score", "oracle", t);
  if ((rc = flat_naive(e, p, p->in_fmt, opts, err)) != AA_OK) return rc;
  aa_phase_mark("AA_SCORE_TIMES", "score", "naive reference and its scores", t);
  rc = opts->expect != NULL && kf != AA_FMT_FP64 ? flat_expect_run(e, p, kf, opts, err) : AA_OK;
  aa_phase_mark("AA_SCORE_TIMES", "score", "expect recipe and its scores", t);
  return rc;
}

/* The kernel's format from the inputs and every set's o, dq, dk, dv, dsinks (aa_eval_kernel_fmt; not the lse,
   which flash-attn keeps in FP32 whatever the kernel's dtype). */
static aa_fmt_t flat_kernel_fmt(int *inferred, const flat_prob_t *p, const aa_tensor_t *got, size_t nsets) {
  aa_tensor_t *outs = malloc((AA_FLAT_NOUT - 1) * nsets * sizeof *outs);
  aa_fmt_t kf;
  if (outs == NULL) return aa_eval_kernel_fmt(inferred, p->in_fmt, p->in, 4, got, AA_FLAT_NOUT - 1);
  for (size_t i = 0; i < nsets; i++)
    memcpy(&outs[(AA_FLAT_NOUT - 1) * i], &got[AA_FLAT_NOUT * i], (AA_FLAT_NOUT - 1) * sizeof *outs);
  kf = aa_eval_kernel_fmt(inferred, p->in_fmt, p->in, 4, outs, (AA_FLAT_NOUT - 1) * nsets);
  free(outs);
  return kf;
}

int aa_flat_score_sets(aa_flat_out_t *out, aa_flat_info_t *info, const aa_flat_tensor_t *inputs,
                       const aa_flat_tensor_t *outputs, size_t nsets, const aa_flat_opts_t *opts, char *msg,
                       size_t msg_cap) {
  aa_error_t err = {{0}};
  flat_prob_t p;
  flat_eval_t e;
  aa_tensor_t *got = nsets > 0 ? calloc(AA_FLAT_NOUT * nsets, sizeof *got) : NULL;
  aa_fmt_t kf = AA_FMT_BF16;
  int rc = AA_OK, inferred = 0;
  double t = 0;

  aa_phase_mark("AA_SCORE_TIMES", "score", "", &t);
  memset(&e, 0, sizeof e);
  if (nsets > 0) memset(out, 0, AA_FLAT_NOUT * nsets * sizeof *out);
  if (got == NULL) {
    rc = aa_error_set(&err, nsets == 0 ? AA_EINVAL : AA_ENOMEM, nsets == 0 ? "no output set given" : "out of memory");
    goto done_noprob;
  }
  if ((rc = prob_setup(&p, inputs, opts, &err)) != AA_OK) goto done_noprob;
  aa_phase_mark("AA_SCORE_TIMES", "score", "inputs imported", &t);
  for (size_t i = 0; i < nsets && rc == AA_OK; i++)
    rc = import_outputs(&got[AA_FLAT_NOUT * i], &p, inputs, &outputs[AA_FLAT_NOUT * i], &err);
  aa_phase_mark("AA_SCORE_TIMES", "score", "outputs imported", &t);
  /* the inputs' tag when the caller declared a format narrower than the storage, else inferred from the values */
  if (rc == AA_OK) kf = flat_kernel_fmt(&inferred, &p, got, nsets);
  aa_phase_mark("AA_SCORE_TIMES", "score", "kernel format inferred", &t);
  if (rc == AA_OK) rc = flat_references(&e, &p, kf, opts, &err, &t);
  for (size_t i = 0; i < nsets && rc == AA_OK; i++)
    rc = flat_score_set(&out[AA_FLAT_NOUT * i], &e, &got[AA_FLAT_NOUT * i], &p, opts, &err);
  aa_phase_mark("AA_SCORE_TIMES", "score", "outputs scored", &t);
  if (rc == AA_OK) {
    fill_info(info, &p, &e.orc);
    if (info != NULL) {
      info->kernel_fmt = kf;
      info->kernel_fmt_inferred = inferred;
      snprintf(info->expect, sizeof info->expect, "%s", e.rec.variant);
    }
  }
  eval_free(&e);
  for (size_t i = 0; i < AA_FLAT_NOUT * nsets; i++)
    aa_tensor_free(&got[i]);
  prob_free(&p);
  aa_phase_mark("AA_SCORE_TIMES", "score", "freed", &t);
done_noprob:
  free(got);
  set_msg(msg, msg_cap, rc, &err);
  return rc;
}

int aa_flat_score(aa_flat_out_t *out, aa_flat_info_t *info, const aa_flat_tensor_t *inputs,
                  const aa_flat_tensor_t *outputs, const aa_flat_opts_t *opts, char *msg, size_t msg_cap) {
  return aa_flat_score_sets(out, info, inputs, outputs, 1, opts, msg, msg_cap);
}

int aa_flat_oracle(double *o, double *lse, double *dq, double *dk, double *dv, aa_flat_kept_t **kept,
                   aa_flat_info_t *info, const aa_flat_tensor_t *inputs, const aa_flat_opts_t *opts, char *msg,
                   size_t msg_cap) {
  aa_error_t err = {{0}};
  flat_prob_t p;
  aa_oracle_result_t orc;
  aa_oracle_opts_t oo;
  int rc, borrowed = 0;
  memset(&orc, 0, sizeof orc);
  if (kept != NULL) *kept = NULL;
  if ((rc = prob_setup(&p, inputs, opts, &err)) != AA_OK) goto out;
  if ((rc = run_oracle(&orc, &borrowed, &p, opts, &err)) == AA_OK) {
    if (o) aa_layout_export(o, &orc.o.val, p.layout, &p.dq);
    if (dq) aa_layout_export(dq, &orc.dq.val, p.layout, &p.dq);
    if (dk) aa_layout_export(dk, &orc.dk.val, p.layout, &p.dk);
    if (dv) aa_layout_export(dv, &orc.dv.val, p.layout, &p.dk);
    if (lse) memcpy(lse, orc.lse.val.data, aa_tensor_numel(&orc.lse.val) * sizeof(double)); /* [B*H, N] = [B, H, N] */
    fill_info(info, &p, &orc);
    oracle_opts(&oo, opts, &p);
    if (kept != NULL && !borrowed) rc = aa_score_oracle_keep(kept, &orc, &p.pb, p.in, &oo, &err);
    if (!borrowed) aa_oracle_result_free(&orc);
  }
  prob_free(&p);
out:
  set_msg(msg, msg_cap, rc, &err);
  return rc;
}

int aa_flat_estimate(aa_problem_cost_t *c, const aa_flat_tensor_t *inputs, const aa_flat_opts_t *opts, size_t sets,
                     char *msg, size_t msg_cap) {
  aa_error_t err = {{0}};
  flat_prob_t p;
  int rc;
  memset(c, 0, sizeof *c);
  if ((rc = prob_shapes(&p, inputs, opts, 0, &err)) == AA_OK) {
    size_t heads = p.dq.b * p.dq.h;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double threads = opts->threads > 0 ? (double)opts->threads : cores > 0 ? (double)cores : 1.0;
    aa_problem_cost(c, p.dq.n, p.dk.n, p.dq.d, heads, p.dk.b * p.dk.h, sets);
    if (opts->oracle_path == AA_ORACLE_MPFR) {
      aa_problem_t pb;
      aa_oracle_opts_t oo;
      aa_oracle_opts_init(&oo);
      aa_problem_init(&pb, p.dq.n, p.dk.n, p.dq.d, heads, p.dk.b * p.dk.h);
      c->seconds += aa_oracle_mpfr_seconds(&pb, &oo);
    }
    /* more threads than cores do not run faster */
    if (cores > 0 && threads > (double)cores) threads = (double)cores;
    c->seconds /= threads;
  }
  if (msg != NULL && msg_cap > 0) snprintf(msg, msg_cap, "%s", rc == AA_OK ? "" : err.msg);
  return rc;
}

int aa_flat_draw(double *out, uint64_t seed, uint64_t id, size_t heads, size_t rows, size_t cols, int dist,
                 double sigma, int fmt, char *msg, size_t msg_cap) {
  aa_error_t err = {{0}};
  aa_tensor_t t = {0};
  int rc = AA_OK;
  if (!valid_fmt(fmt) || !(sigma > 0 && isfinite(sigma)))
    rc = aa_error_set(&err, AA_EINVAL, "draw: format %d or sigma %g is not valid", fmt, sigma);
  if (rc == AA_OK &&
      (rc = aa_layout_draw(&t, seed, id, heads, rows, cols, dist, sigma, (aa_fmt_t)fmt, &err)) == AA_OK)
    memcpy(out, t.data, heads * rows * cols * sizeof *out);
  aa_tensor_free(&t);
  if (msg != NULL && msg_cap > 0) snprintf(msg, msg_cap, "%s", rc == AA_OK ? "" : err.msg);
  return rc;
}

/* A variant spec in the command's grammar (aa_recipe_from_spec). */
static int load_recipe(aa_recipe_t *r, const char *spec, aa_error_t *err) {
  if (spec == NULL || spec[0] == '\0') return aa_error_set(err, AA_EINVAL, "no recipe given");
  return aa_recipe_from_spec(r, spec, err);
}

/* Round the inputs (RNE) into fmt and tag them so; the count of values changed. */
static size_t round_inputs(flat_prob_t *p, aa_fmt_t fmt) {
  aa_round_opts_t ro = {fmt, AA_RND_NE, 1, 0};
  size_t rounded = 0;
  for (int i = 0; i < 4; i++) {
    size_t n = aa_tensor_numel(&p->in[i]);
    for (size_t j = 0; j < n; j++) {
      double x = aa_round(p->in[i].data[j], &ro, NULL);
      if (x != p->in[i].data[j]) rounded++;
      p->in[i].data[j] = x;
    }
    p->in[i].fmt = fmt;
  }
  return rounded;
}

/* The naive reference's rules (when it ran) and the expect rule (when asked and when its format has a recipe) on an
   emulated recipe's scores e->v. */
static int flat_emulate_rules(flat_eval_t *e, flat_prob_t *p, aa_fmt_t fmt, const aa_flat_opts_t *opts,
                              aa_error_t *err) {
  int rc;
  if (e->naive.nout > 0) aa_eval_apply_naive(&e->v, &e->naive);
  p->in_fmt = fmt;
  if (opts->expect == NULL || fmt == AA_FMT_FP64) return AA_OK;
  if ((rc = flat_expect_run(e, p, fmt, opts, err)) == AA_OK) aa_eval_apply_expect(&e->v, &e->rec);
  return rc;
}

int aa_flat_emulate(double *o, double *dq, double *dk, double *dv, aa_flat_out_t *out, aa_flat_info_t *info,
                    const aa_flat_tensor_t *inputs, const char *recipe, const aa_flat_opts_t *opts, char *msg,
                    size_t msg_cap) {
  aa_error_t err = {{0}};
  flat_prob_t p;
  flat_eval_t e;
  aa_recipe_t r;
  const aa_tensor_t *got[4] = {&e.res.o, &e.res.dq, &e.res.dk, &e.res.dv};
  double *dst[4] = {o, dq, dk, dv};
  size_t rounded;
  int rc;

  memset(out, 0, 4 * sizeof *out);
  memset(&e, 0, sizeof e);
  if ((rc = load_recipe(&r, recipe, &err)) != AA_OK) goto done_noprob;
  if ((rc = prob_setup(&p, inputs, opts, &err)) != AA_OK) goto done_noprob;
  rounded = round_inputs(&p, r.io_fmt);
  p.target = AA_ORACLE_TARGET_DEFAULT; /* emulate is `attnacc run`: its oracle, and its cache entry */
  if ((rc = run_oracle(&e.orc, &e.borrowed, &p, opts, &err)) == AA_OK &&
      (rc = aa_eval_attn_device(&e.v, &e.res, &r, &p.pb, &p.in[0], &p.in[1], &p.in[2], &p.in[3],
                                aa_eval_device((aa_oracle_device_t)opts->device), &err)) == AA_OK &&
      (rc = aa_eval_outputs(&e.v, &e.res, &p.pb, &e.orc, &(aa_eval_opts_t){opts->ulp_fmt, opts->atol, opts->rtol},
                            &err)) == AA_OK &&
      (rc = flat_naive(&e, &p, r.io_fmt, opts, &err)) == AA_OK &&
      (rc = flat_emulate_rules(&e, &p, r.io_fmt, opts, &err)) == AA_OK) {
    export_scores(out, &e.v, got, 4, &e.orc, NULL, &p);
    for (int i = 0; i < 4; i++)
      if (dst[i] != NULL) aa_layout_export(dst[i], got[i], p.layout, i < 2 ? &p.dq : &p.dk);
    fill_info(info, &p, &e.orc);
    if (info != NULL) {
      info->input_fmt = info->kernel_fmt = r.io_fmt;
      snprintf(info->expect, sizeof info->expect, "%s", e.rec.variant);
      info->rounded = rounded;
      snprintf(info->recipe, sizeof info->recipe, "%s", r.name);
    }
  }
  eval_free(&e);
  prob_free(&p);
done_noprob:
  set_msg(msg, msg_cap, rc, &err);
  return rc;
}
