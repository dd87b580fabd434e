/* attnacc: the one evaluation path: a recipe or given outputs compared with the oracle, per output, the naive
 * reference's rules applied, rules parsed and verdicts formed (for the command and the flat entry points). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
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
  rc = aa_metrics_compare(&out->m, t, ref, out->ulp_fmt, AA_METRICS_ATOL, AA_METRICS_RTOL, err);
  if (rc == AA_OK) rc = rescore(out, t, ref, o, err);
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
    aa_recipe_case_t c = {.causal = pb->causal, .n_q = pb->n_q, .n_k = pb->n_k, .d = pb->d};
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

int aa_eval_attn(aa_eval_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                 const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                 aa_error_t *err) {
  char probe[2];
  size_t need = aa_recipe_format(probe, sizeof probe, r);
  int rc;
  memset(res, 0, sizeof *res);
  v->refused[0] = '\0';
  snprintf(v->variant, sizeof v->variant, "%s", r->name);
  v->recipe_text = malloc(need + 1);
  if (v->recipe_text == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  aa_recipe_format(v->recipe_text, need + 1, r);
  rc = aa_attn_run(res, pb, r, q, k, vt, dO, err);
  if (rc != AA_OK) {
    snprintf(v->refused, sizeof v->refused, "%s", err != NULL && err->msg[0] ? err->msg : aa_status_str(rc));
    aa_error_prefix(err, r->name);
    return rc;
  }
  record_counters(v, res, r, pb);
  return AA_OK;
}

int aa_eval_outputs(aa_eval_variant_t *v, const aa_attn_result_t *res, const aa_problem_t *pb,
                    const aa_oracle_result_t *oracle, const aa_eval_opts_t *o, aa_error_t *err) {
  const aa_tensor_t *got[5] = {&res->o, &res->dq, &res->dk, &res->dv, &res->dsinks};
  const aa_oracle_out_t *ref[5] = {&oracle->o, &oracle->dq, &oracle->dk, &oracle->dv, &oracle->dsinks};
  const aa_eval_opts_t def = AA_EVAL_OPTS_DEFAULT;
  int rc, n = pb->num_sinks > 0 ? 5 : 4;
  v->nout = 0;
  v->nonfinite = 0;
  for (int i = 0; i < n; i++) {
    if ((rc = compare(&v->out[v->nout++], out_names[i], got[i], ref[i], o != NULL ? o : &def, err)) != AA_OK)
      return rc;
    if (v->out[i].m.nan + v->out[i].m.inf > 0) v->nonfinite = 1;
  }
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
  const aa_oracle_out_t *ref[5] = {&oracle->o, &oracle->dq, &oracle->dk, &oracle->dv, &oracle->dsinks};
  const aa_eval_opts_t def = AA_EVAL_OPTS_DEFAULT;
  int rc;
  snprintf(v->variant, sizeof v->variant, "external");
  for (int i = 0; i < 5; i++) {
    if (g[i].data == NULL) continue;
    if ((rc = aa_score_exact_finite(ref[i], out_names[i], g[i].fmt, err)) != AA_OK) return rc;
    if ((rc = compare(&v->out[v->nout++], out_names[i], &g[i], ref[i], o != NULL ? o : &def, err)) != AA_OK)
      return rc;
  }
  return AA_OK;
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
      return aa_error_set(err, AA_EINVAL, "'%s' is not fa, torch, sdpa, abs-rel or all", tok);
    if (r == AA_RULE_ABSREL && (rc = absrel_tols(atol, rtol, &save, err)) != AA_OK) return rc;
    if (!have[r]++) rules[(*n)++] = r;
  }
  if (*n == 0) return aa_error_set(err, AA_EINVAL, "no rule given");
  return AA_OK;
}

aa_rule_t aa_eval_default_rule(aa_fmt_t input_fmt) {
  return input_fmt == AA_FMT_FP64 ? AA_RULE_TORCH : AA_RULE_FA;
}

int aa_eval_rules_usable(const aa_rule_t *rules, int n, aa_fmt_t input_fmt, aa_error_t *err) {
  for (int i = 0; i < n; i++)
    if ((rules[i] == AA_RULE_FA || rules[i] == AA_RULE_SDPA) && input_fmt == AA_FMT_FP64)
      return aa_error_set(err, AA_EINVAL,
                          "rule %s needs a naive reference in the inputs' dtype, which exists for bf16, fp16 and "
                          "fp32 inputs; these are fp64 (use torch or abs-rel)",
                          aa_rule_name(rules[i]));
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

int aa_eval_index(size_t idx[4], const aa_eval_place_t *p, const aa_eval_out_t *o, size_t i) {
  int kv = strcmp(o->name, "dk") == 0 || strcmp(o->name, "dv") == 0;
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
