/* attnacc: the one evaluation path: a recipe or given outputs compared with the oracle, per output, the naive
 * reference's rules applied, rules parsed and verdicts formed (for the command and the flat entry points). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"

_Static_assert(sizeof(((aa_eval_variant_t *)0)->refused) == sizeof(((aa_error_t *)0)->msg),
               "aa_eval_variant_t.refused holds one aa_error_t message");

static const char *const out_names[5] = {"o", "dq", "dk", "dv", "dsinks"};

/* The robust measures in o's ULP format (-1: the data's own when bf16, fp16
   or fp32, else fp32) and tolerances (< 0: the 0.01/0.01 defaults). */
static int rescore(aa_eval_out_t *out, const aa_tensor_t *t, const aa_oracle_out_t *ref, const aa_eval_opts_t *o,
                   aa_error_t *err) {
  aa_fmt_t uf = o->ulp_fmt >= 0                                                           ? (aa_fmt_t)o->ulp_fmt
                : t->fmt == AA_FMT_BF16 || t->fmt == AA_FMT_FP16 || t->fmt == AA_FMT_FP32 ? t->fmt
                                                                                          : AA_FMT_FP32;
  return aa_score_compare(&out->s, out->name, t, ref, t->fmt, uf, o->atol >= 0 ? o->atol : AA_METRICS_ATOL,
                          o->rtol >= 0 ? o->rtol : AA_METRICS_RTOL, err);
}

/* The legacy metrics (ULPs in bf16 for bf16 data, else fp32; the default
   tolerances) and the robust measures scored with o. */
static int compare(aa_eval_out_t *out, const char *name, const aa_tensor_t *t, const aa_oracle_out_t *ref,
                   const aa_eval_opts_t *o, aa_error_t *err) {
  int rc;
  out->name = name;
  out->ulp_fmt = t->fmt == AA_FMT_BF16 ? AA_FMT_BF16 : AA_FMT_FP32;
  out->relerr_bound = ref->relerr_bound;
  out->fa_applied = 0;
  rc = rescore(out, t, ref, o, err);
  /* the robust measures' metrics (aa_score_compare) are these legacy ones when they count ULPs in the same format
     with the default tolerances: one pass over the tensor instead of two, the same numbers */
  if (rc == AA_OK && aa_score_metrics_ulp_fmt(&out->s) == out->ulp_fmt && out->s.m.atol == AA_METRICS_ATOL &&
      out->s.m.rtol == AA_METRICS_RTOL)
    out->m = out->s.m;
  else if (rc == AA_OK)
    rc = aa_metrics_compare(&out->m, t, ref, out->ulp_fmt, AA_METRICS_ATOL, AA_METRICS_RTOL, err);
  if (rc != AA_OK) aa_error_prefix(err, name);
  return rc;
}

int aa_eval_compare(aa_eval_out_t *out, const char *name, const aa_tensor_t *t, const aa_oracle_out_t *ref,
                    aa_error_t *err) {
  const aa_eval_opts_t def = AA_EVAL_OPTS_DEFAULT;
  return compare(out, name, t, ref, &def, err);
}

int aa_eval_rescore(aa_eval_out_t *out, const aa_tensor_t *t, const aa_oracle_out_t *ref, const aa_eval_opts_t *o,
                    aa_error_t *err) {
  const aa_eval_opts_t def = AA_EVAL_OPTS_DEFAULT;
  return rescore(out, t, ref, o != NULL ? o : &def, err);
}

/* The counters of the summary lines, of the recipe that ran: with
   conditional keys, the one resolved for this problem (aa_attn_run resolved
   it the same way). */
static void record_counters(aa_eval_variant_t *v, const aa_attn_result_t *res, const aa_recipe_t *r,
                            const aa_problem_t *pb) {
  static const char *const sm[] = {"online-lse", "two-pass", "fixed-shift", "guarded"};
  aa_recipe_t *resolved = NULL;
  if (r->nwhen > 0 && (resolved = malloc(sizeof *resolved)) != NULL) {
    aa_recipe_case_t c = aa_attn_case(pb);
    if (aa_recipe_resolve(resolved, r, &c, NULL) == AA_OK) r = resolved;
  }
  snprintf(v->dq_reduce, sizeof v->dq_reduce, "%s", aa_reduce_kind_name(r->bwd_dq_reduce.kind));
  v->dq_stats = res->dq_reduce;
  snprintf(v->softmax, sizeof v->softmax, "%s",
           (unsigned)r->fwd_softmax < sizeof sm / sizeof sm[0] ? sm[r->fwd_softmax] : "?");
  v->fwd_tiles = res->fwd_q_tiles * pb->heads;
  v->tiles_flagged = res->tiles_flagged;
  v->rows_recovered = res->rows_recovered;
  v->first = res->first;
  free(resolved);
}

aa_attn_device_t aa_eval_device(aa_oracle_device_t dev) {
  return dev == AA_ORACLE_DEVICE_CPU    ? AA_ATTN_DEVICE_CPU
         : dev == AA_ORACLE_DEVICE_CUDA ? AA_ATTN_DEVICE_CUDA
                                        : AA_ATTN_DEVICE_AUTO;
}

int aa_eval_attn(aa_eval_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                 const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                 aa_error_t *err) {
  return aa_eval_attn_device(v, res, r, pb, q, k, vt, dO, AA_ATTN_DEVICE_CPU, err);
}

int aa_eval_attn_device(aa_eval_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                        const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                        aa_attn_device_t dev, aa_error_t *err) {
  char probe[2];
  size_t need = aa_recipe_format(probe, sizeof probe, r);
  int rc;
  memset(res, 0, sizeof *res);
  v->refused[0] = '\0';
  snprintf(v->variant, sizeof v->variant, "%s", r->name);
  v->recipe_text = malloc(need + 1);
  if (v->recipe_text == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  aa_recipe_format(v->recipe_text, need + 1, r);
  rc = aa_attn_run_device(res, pb, r, q, k, vt, dO, dev, err);
  if (rc != AA_OK) {
    snprintf(v->refused, sizeof v->refused, "%s", err != NULL && err->msg[0] ? err->msg : aa_status_str(rc));
    aa_error_prefix(err, r->name);
    return rc;
  }
  record_counters(v, res, r, pb);
  return AA_OK;
}

/* The outputs got[0..n-1] (those with data) compared with ref[] into v->out in order, names[] theirs; check: each
   refused first when its exact value is not finite in its format. One output after the other, each comparison in
   parallel over its elements (lib/score/compare.c: every thread on one output, rather than one thread per output,
   which left all but four cores idle on a GPU machine and could not split an output between two). */
static int compare_set(aa_eval_variant_t *v, const char *const *names, const aa_tensor_t *const *got,
                       const aa_oracle_out_t *const *ref, int n, int check, const aa_eval_opts_t *o,
                       aa_error_t *err) {
  int rc = AA_OK, m = 0;
  for (int i = 0; i < n && rc == AA_OK; i++) {
    if (got[i]->data == NULL) continue;
    if (check) rc = aa_score_exact_finite(ref[i], names[i], got[i]->fmt, err);
    if (rc == AA_OK) rc = compare(&v->out[v->nout + m], names[i], got[i], ref[i], o, err);
    m += rc == AA_OK;
  }
  if (rc == AA_OK) v->nout += m;
  return rc;
}

int aa_eval_outputs(aa_eval_variant_t *v, const aa_attn_result_t *res, const aa_problem_t *pb,
                    const aa_oracle_result_t *oracle, const aa_eval_opts_t *o, aa_error_t *err) {
  const aa_tensor_t *got[5] = {&res->o, &res->dq, &res->dk, &res->dv, &res->dsinks};
  const aa_oracle_out_t *ref[5] = {&oracle->o, &oracle->dq, &oracle->dk, &oracle->dv, &oracle->dsinks};
  const aa_eval_opts_t def = AA_EVAL_OPTS_DEFAULT;
  int rc;
  v->nout = 0;
  v->nonfinite = 0;
  if ((rc = compare_set(v, out_names, got, ref, pb->num_sinks > 0 ? 5 : 4, 0, o != NULL ? o : &def, err)) != AA_OK)
    return rc;
  for (int i = 0; i < v->nout; i++)
    if (v->out[i].m.nan + v->out[i].m.inf > 0) v->nonfinite = 1;
  return AA_OK;
}

int aa_eval_run(aa_eval_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                const aa_oracle_result_t *oracle, const aa_eval_opts_t *o, aa_error_t *err) {
  int rc = aa_eval_attn(v, res, r, pb, q, k, vt, dO, err);
  return rc != AA_OK ? rc : aa_eval_outputs(v, res, pb, oracle, o, err);
}

int aa_eval_given(aa_eval_variant_t *v, const aa_tensor_t g[5], const aa_oracle_result_t *oracle,
                  const aa_eval_opts_t *o, aa_error_t *err) {
  const aa_tensor_t *got[5] = {&g[0], &g[1], &g[2], &g[3], &g[4]};
  const aa_oracle_out_t *ref[5] = {&oracle->o, &oracle->dq, &oracle->dk, &oracle->dv, &oracle->dsinks};
  const aa_eval_opts_t def = AA_EVAL_OPTS_DEFAULT;
  snprintf(v->variant, sizeof v->variant, "external");
  return compare_set(v, out_names, got, ref, 5, 1, o != NULL ? o : &def, err);
}

/* A copy of t (or an empty tensor of t's shape when copy is 0). */
static int clone(aa_tensor_t *dst, const aa_tensor_t *t, int copy) {
  if (aa_tensor_alloc(dst, t->ndim, t->shape, t->fmt) != AA_OK) return AA_ENOMEM;
  if (copy) memcpy(dst->data, t->data, aa_tensor_numel(t) * sizeof *t->data);
  return AA_OK;
}

int aa_eval_lse_prepare(aa_eval_lse_t *x, const aa_tensor_t *lse, const aa_oracle_out_t *oracle_lse,
                        aa_error_t *err) {
  const aa_oracle_out_t *r = oracle_lse;
  size_t n = aa_tensor_numel(&r->val);
  memset(x, 0, sizeof *x);
  if (aa_tensor_numel(lse) != n)
    return aa_error_set(err, AA_ESHAPE, "lse: %zu elements, the oracle's LSE has %zu (one per head and query row)",
                        aa_tensor_numel(lse), n);
  if (clone(&x->got, &r->val, 0) || clone(&x->ref.val, &r->val, 1) || clone(&x->ref.fp32, &r->fp32, 1) ||
      clone(&x->ref.bf16, &r->bf16, 1))
    return aa_error_set(err, AA_ENOMEM, "out of memory");
  /* [heads, n_q, 1]: each query row's LSE is a row of the systematic statistics (score.h: a row is the last axis;
     as [heads, n_q] a head's LSE would be one row, and the expect rule's sigmas would count heads, not queries) */
  x->got.ndim = x->ref.val.ndim = x->ref.fp32.ndim = x->ref.bf16.ndim = 3;
  x->got.fmt = lse->fmt;
  x->ref.relerr_bound = r->relerr_bound;
  for (size_t i = 0; i < n; i++) {
    x->got.data[i] = lse->data[i];
    if (r->val.data[i] != -INFINITY) continue;
    x->empty++; /* no visible key: flash-attn's +Inf and the oracle's -Inf are one convention each */
    x->ref.val.data[i] = x->ref.fp32.data[i] = x->ref.bf16.data[i] = 0;
    x->got.data[i] = isinf(lse->data[i]) ? 0 : NAN;
  }
  return AA_OK;
}

void aa_eval_lse_free(aa_eval_lse_t *x) {
  aa_tensor_free(&x->got);
  aa_tensor_free(&x->ref.val);
  aa_tensor_free(&x->ref.fp32);
  aa_tensor_free(&x->ref.bf16);
}

int aa_eval_lse(aa_eval_variant_t *v, const aa_eval_lse_t *x, const aa_eval_opts_t *o, aa_error_t *err) {
  const aa_eval_opts_t def = AA_EVAL_OPTS_DEFAULT;
  int rc;
  if (v->nout >= AA_EVAL_MAX_OUT) return aa_error_set(err, AA_EINVAL, "lse: no room for another output");
  if ((rc = aa_score_exact_finite(&x->ref, "lse", x->got.fmt, err)) != AA_OK) return rc;
  return compare(&v->out[v->nout++], "lse", &x->got, &x->ref, o != NULL ? o : &def, err);
}

int aa_eval_result_lse(aa_eval_variant_t *v, const aa_attn_result_t *res, const aa_oracle_result_t *oracle,
                       aa_error_t *err) {
  aa_eval_lse_t x;
  int rc = aa_eval_lse_prepare(&x, &res->lse, &oracle->lse, err);
  if (rc == AA_OK) rc = aa_eval_lse(v, &x, NULL, err);
  aa_eval_lse_free(&x);
  return rc;
}

int aa_eval_naive(aa_eval_variant_t *naive, aa_attn_result_t *naive_res, aa_fmt_t fmt, const aa_problem_t *pb,
                  const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                  const aa_oracle_result_t *oracle, aa_error_t *err) {
  aa_recipe_t r;
  int rc = aa_score_naive_recipe(&r, fmt, err);
  return rc != AA_OK ? rc : aa_eval_run(naive, naive_res, &r, pb, q, k, vt, dO, oracle, NULL, err);
}

/* The output of naive named as v's output i, or NULL. */
static const aa_eval_out_t *same_name(const aa_eval_variant_t *naive, const aa_eval_out_t *o) {
  for (int j = 0; j < naive->nout; j++)
    if (strcmp(o->name, naive->out[j].name) == 0) return &naive->out[j];
  return NULL;
}

void aa_eval_apply_naive(aa_eval_variant_t *v, const aa_eval_variant_t *naive) {
  for (int i = 0; i < v->nout; i++) {
    const aa_eval_out_t *n = same_name(naive, &v->out[i]);
    if (n != NULL) aa_score_apply_naive(&v->out[i].s, &n->s);
  }
}

void aa_eval_apply_fa(aa_eval_variant_t *v, const aa_eval_variant_t *naive) {
  for (int i = 0; i < v->nout; i++) {
    const aa_eval_out_t *n = same_name(naive, &v->out[i]);
    if (n == NULL) continue;
    aa_metrics_fa_rule(&v->out[i].m, &n->m,
                       strcmp(v->out[i].name, "o") == 0 ? AA_METRICS_FA_FACTOR_FWD : AA_METRICS_FA_FACTOR_BWD);
    aa_score_apply_naive(&v->out[i].s, &n->s);
    v->out[i].fa_applied = 1;
  }
}

const char *aa_eval_expect_default(aa_fmt_t fmt) {
  return fmt == AA_FMT_FP32 ? "naive-fp32" : "fa2";
}

int aa_eval_expect_recipe(aa_recipe_t *r, const char *spec, aa_fmt_t fmt, aa_error_t *err) {
  int rc;
  if (fmt != AA_FMT_BF16 && fmt != AA_FMT_FP16 && fmt != AA_FMT_FP32)
    return aa_error_set(err, AA_EINVAL, "the expect rule needs a bf16, fp16 or fp32 kernel, not %s",
                        aa_fmt_info(fmt)->name);
  /* FA2 has no fp32 build: an fp32 kernel is held to PyTorch's math attention in fp32 */
  if ((spec == NULL || spec[0] == '\0') && fmt == AA_FMT_FP32) return aa_score_naive_recipe(r, fmt, err);
  if ((rc = aa_recipe_from_spec(r, spec != NULL && spec[0] ? spec : aa_eval_expect_default(fmt), err)) != AA_OK) {
    aa_error_prefix(err, "expect");
    return rc;
  }
  /* a recipe written for fp16 or fp32 io is taken as it is; a bf16 one is moved into the kernel's format */
  return r->io_fmt == AA_FMT_BF16 ? aa_score_recipe_to_fmt(r, fmt, err) : AA_OK;
}

void aa_eval_apply_expect(aa_eval_variant_t *v, const aa_eval_variant_t *rec) {
  for (int i = 0; i < v->nout; i++) {
    const aa_eval_out_t *n = same_name(rec, &v->out[i]);
    if (n != NULL)
      aa_score_apply_expect(&v->out[i].s, &n->s);
    else if (rec->nout > 0 && strcmp(v->out[i].name, "lse") == 0) /* no band for the lse (score.h) */
      aa_score_apply_expect_finite(&v->out[i].s);
  }
}

int aa_eval_expect(aa_eval_variant_t *v, aa_eval_variant_t *rec, aa_attn_result_t *rec_res, const aa_recipe_t *r,
                   const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt,
                   const aa_tensor_t *dO, const aa_oracle_result_t *oracle, aa_error_t *err) {
  int rc = aa_eval_run(rec, rec_res, r, pb, q, k, vt, dO, oracle, NULL, err);
  if (rc == AA_OK) aa_eval_apply_expect(v, rec);
  return rc;
}

aa_fmt_t aa_eval_kernel_fmt(int *inferred, aa_fmt_t storage, const aa_tensor_t *in, size_t nin,
                            const aa_tensor_t *out, size_t nout) {
  aa_fmt_t f = AA_FMT_BF16;
  int fp16 = 0, bf16 = 0;
  *inferred = 0;
  if (storage != AA_FMT_FP32 && storage != AA_FMT_FP64) return storage;
  for (size_t i = 0; i < nin + nout; i++) {
    const aa_tensor_t *t = i < nin ? &in[i] : &out[i - nin];
    aa_fmt_t g;
    if (t->data == NULL) continue;
    g = aa_score_infer_fmt(t);
    /* bf16 and fp16 hold each other's small values: a mix of the two needs fp32 */
    fp16 |= g == AA_FMT_FP16, bf16 |= g == AA_FMT_BF16;
    if (g == AA_FMT_FP64 || (g == AA_FMT_FP32 && f != AA_FMT_FP64)) f = g;
  }
  if (f == AA_FMT_BF16 && fp16) f = bf16 ? AA_FMT_FP32 : AA_FMT_FP16;
  *inferred = f != storage;
  return f;
}

/* A tolerance of abs-rel: the whole word a number >= 0. */
static int tolerance(double *out, const char *word, const char *what, aa_error_t *err) {
  char *end;
  *out = strtod(word, &end);
  if (*end != '\0' || !(*out >= 0) || !isfinite(*out))
    return aa_error_set(err, AA_EINVAL, "abs-rel: %s '%s' is not a number >= 0", what, word);
  return AA_OK;
}

/* The optional ATOL RTOL after abs-rel (a word starting with a digit or
   '.'), consumed from *save when present. */
static int absrel_tols(double *atol, double *rtol, char **save, aa_error_t *err) {
  char *save2 = *save;
  char *a = strtok_r(NULL, ", ", &save2), *b = a ? strtok_r(NULL, ", ", &save2) : NULL;
  int rc;
  if (a == NULL || !((a[0] >= '0' && a[0] <= '9') || a[0] == '.')) return AA_OK;
  if (b == NULL) return aa_error_set(err, AA_EINVAL, "abs-rel: give both ATOL and RTOL (e.g. abs-rel,1e-3,1e-2)");
  if ((rc = tolerance(atol, a, "ATOL", err)) != AA_OK || (rc = tolerance(rtol, b, "RTOL", err)) != AA_OK) return rc;
  *save = save2;
  return AA_OK;
}

int aa_eval_rules_parse(aa_rule_t *rules, int *n, double *atol, double *rtol, const char *text, aa_error_t *err) {
  char buf[256], *tok, *save = NULL;
  int have[AA_RULE_COUNT] = {0}, rc;
  *n = 0;
  if (strlen(text) >= sizeof buf) return aa_error_set(err, AA_EINVAL, "'%s' is too long", text);
  strcpy(buf, text);
  for (tok = strtok_r(buf, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
    aa_rule_t r;
    if (strcmp(tok, "all") == 0) {
      for (int i = 0; i < AA_RULE_COUNT; i++)
        if (!have[i]++) rules[(*n)++] = (aa_rule_t)i;
      continue;
    }
    if (aa_rule_from_name(&r, tok) != AA_OK)
      return aa_error_set(err, AA_EINVAL, "'%s' is not expect, fa, torch, sdpa, abs-rel or all", tok);
    if (r == AA_RULE_ABSREL && (rc = absrel_tols(atol, rtol, &save, err)) != AA_OK) return rc;
    if (!have[r]++) rules[(*n)++] = r;
  }
  if (*n == 0) return aa_error_set(err, AA_EINVAL, "no rule given");
  return AA_OK;
}

aa_rule_t aa_eval_default_rule(aa_fmt_t input_fmt) {
  return input_fmt == AA_FMT_FP64 ? AA_RULE_TORCH : AA_RULE_EXPECT;
}

int aa_eval_rules_usable(const aa_rule_t *rules, int n, aa_fmt_t input_fmt, aa_error_t *err) {
  for (int i = 0; i < n; i++)
    if ((rules[i] == AA_RULE_FA || rules[i] == AA_RULE_SDPA || rules[i] == AA_RULE_EXPECT) &&
        input_fmt == AA_FMT_FP64)
      return aa_error_set(err, AA_EINVAL,
                          "rule %s needs a %s in the inputs' dtype, which exists for bf16, fp16 and fp32 inputs; "
                          "these are fp64 (use torch or abs-rel)",
                          aa_rule_name(rules[i]), rules[i] == AA_RULE_EXPECT ? "recipe" : "naive reference");
  return AA_OK;
}

int aa_eval_verdict(const aa_eval_variant_t *v, const aa_rule_t *rules, int n) {
  for (int j = 0; j < v->nout; j++)
    for (int i = 0; i < n; i++) {
      const aa_rule_result_t *r = &v->out[j].s.rule[rules[i]];
      if (!r->applied || !r->pass) return 0;
    }
  return 1;
}

double aa_eval_oracle_bound(const aa_oracle_result_t *r) {
  double b = 0;
  const aa_oracle_out_t *outs[5] = {&r->o, &r->dq, &r->dk, &r->dv, &r->dsinks};
  for (int i = 0; i < 5; i++)
    if (outs[i]->val.data != NULL && aa_tensor_numel(&outs[i]->val) > 0 && !(outs[i]->relerr_bound <= b))
      b = outs[i]->relerr_bound;
  return b;
}

void aa_eval_variant_free(aa_eval_variant_t *v) {
  free(v->recipe_text);
  v->recipe_text = NULL;
}

static int index_of(size_t idx[4], const aa_eval_place_t *p, const aa_eval_out_t *o, size_t i);

int aa_eval_index(size_t idx[4], const aa_eval_place_t *p, const aa_eval_out_t *o, size_t i) {
  int nd = index_of(idx, p, o, i), lse = !strcmp(o->name, "lse");
  if (p->row_map != NULL && (lse || !strcmp(o->name, "o") || !strcmp(o->name, "dq"))) {
    /* the query-row axis: lse's last, else the layout's N ([B, H, N, d], [B, N, H, d], [H, N, d], [N, H, d], [N, d])
     */
    int ax = lse                                                       ? nd - 1
             : p->layout == AA_LAYOUT_BHND                             ? 2
             : p->layout == AA_LAYOUT_NHD || p->layout == AA_LAYOUT_ND ? 0
                                                                       : 1;
    idx[ax] = p->row_map[idx[ax]];
  }
  return nd;
}

static int index_of(size_t idx[4], const aa_eval_place_t *p, const aa_eval_out_t *o, size_t i) {
  int kv = strcmp(o->name, "dk") == 0 || strcmp(o->name, "dv") == 0;
  if (strcmp(o->name, "lse") == 0) { /* [B, H, N] for 4-axis layouts (flash-attn's softmax_lse), [H, N], [N] */
    size_t h = p->qdims.h ? p->qdims.h : 1, n = p->layout == AA_LAYOUT_AUTO ? p->n_q : p->qdims.n;
    int ax = p->layout == AA_LAYOUT_ND ? 1 : p->layout == AA_LAYOUT_BHND || p->layout == AA_LAYOUT_BNHD ? 3 : 2;
    idx[0] = i / (h * n), idx[1] = (i / n) % h, idx[2] = i % n;
    if (ax == 2) idx[0] = i / n, idx[1] = i % n;
    if (ax == 1) idx[0] = i % n;
    return ax;
  }
  if (strcmp(o->name, "dsinks") == 0) {
    size_t k = p->num_sinks ? p->num_sinks : 1;
    idx[0] = i / k, idx[1] = i % k;
    return 2;
  }
  if (p->layout == AA_LAYOUT_AUTO) {
    size_t n = kv ? p->n_k : p->n_q;
    idx[0] = i / (n * p->d), idx[1] = (i / p->d) % n, idx[2] = i % p->d;
    return 3;
  }
  return aa_layout_index(idx, p->layout, kv ? &p->kdims : &p->qdims, i);
}
