/* attnacc: the evaluation's part of the JSON document of run and score (schema version 2): one output's metrics,
 * robust measures and rules, and one run with its counters, for every command that writes the document. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stddef.h>

#include "score/json.h"
#include "score/score-impl.h"

static const char *fmt_name(aa_fmt_t f) {
  const aa_fmt_info_t *i = aa_fmt_info(f);
  return i != NULL ? i->name : "?";
}

/* The index of element i of output o as a JSON array in p's layout. */
static json_t *json_index(const aa_eval_place_t *p, const aa_eval_out_t *o, size_t i) {
  size_t idx[4];
  int nd = aa_eval_index(idx, p, o, i), bad = 0;
  json_t *a = json_array();
  for (int k = 0; k < nd; k++)
    bad |= aa_json_push(a, aa_json_u64(idx[k]));
  if (bad) {
    json_decref(a);
    return NULL;
  }
  return a;
}

/* The expect rule's parts: the deciding statistic, and each statistic's ratio, limit and the recipe's value. */
static int json_expect(json_t *j, const aa_score_out_t *s) {
  json_t *st = json_object();
  int bad = aa_json_set(j, "statistic", aa_json_str(aa_expect_stat_name((aa_expect_stat_t)s->expect_stat)));
  for (int k = 0; k < AA_EXPECT_NSTAT; k++) {
    json_t *x = json_object();
    bad |= aa_json_set(x, "ratio", aa_json_num(s->expect_ratio[k]));
    bad |= aa_json_set(x, "limit", aa_json_num(s->expect_limit[k]));
    bad |= aa_json_set(x, "recipe", aa_json_num(s->expect_ref[k]));
    bad |= aa_json_set(st, aa_expect_stat_name((aa_expect_stat_t)k), x);
  }
  return bad | aa_json_set(j, "statistics", st);
}

/* The systematic-error statistics of one output (score.h), with the worst row and head. */
static json_t *json_systematic(const aa_score_out_t *s) {
  json_t *j = json_object();
  int bad = 0;
  for (size_t k = 0; k < aa_score_nmeasures; k++)
    if (aa_score_measures[k].score_offset >= offsetof(aa_score_out_t, ls_scale) &&
        aa_score_measures[k].score_offset <= offsetof(aa_score_out_t, head_rel_l2_max))
      bad |= aa_json_set(j, aa_score_measures[k].name, aa_json_num(AA_SCORE_MEASURE(s, k)));
  bad |= aa_json_set(j, "row_worst", aa_json_u64(s->row_worst));
  bad |= aa_json_set(j, "head_worst", aa_json_u64(s->head_worst));
  return bad ? (json_decref(j), NULL) : j;
}

/* One rule's result: applied, and when applied its ratio, threshold and worst element. */
static json_t *json_rule(const aa_eval_place_t *p, const aa_eval_out_t *o, aa_rule_t r) {
  const aa_rule_result_t *x = &o->s.rule[r];
  json_t *j = json_object();
  int bad = aa_json_set(j, "applied", aa_json_bool(x->applied));
  if (!x->applied) return bad ? (json_decref(j), NULL) : j;
  bad |= aa_json_set(j, "pass", aa_json_bool(x->pass));
  bad |= aa_json_set(j, "ratio", aa_json_num(x->ratio));
  bad |= aa_json_set(j, "allowed", aa_json_num(x->allowed));
  bad |= aa_json_set(j, "atol", aa_json_num(x->atol));
  bad |= aa_json_set(j, "rtol", aa_json_num(x->rtol));
  if (r == AA_RULE_FA || r == AA_RULE_SDPA) bad |= aa_json_set(j, "naive_max_abs", aa_json_num(x->naive_max_abs));
  if (r == AA_RULE_EXPECT) bad |= json_expect(j, &o->s);
  bad |= aa_json_set(j, "fail_count", aa_json_u64(x->fail_count));
  bad |= aa_json_set(j, "worst_index", json_index(p, o, x->worst));
  return bad ? (json_decref(j), NULL) : j;
}

/* The robust measures of one output. */
static json_t *json_robust(const aa_eval_place_t *p, const aa_eval_out_t *o) {
  const aa_score_out_t *s = &o->s;
  json_t *j = json_object(), *w = json_object();
  int bad = aa_json_set(j, "ulp_fmt", json_string(fmt_name(s->ulp_fmt)));
  for (size_t k = 0; k < aa_score_nmeasures; k++) /* a measure added to the table appears here */
    if (aa_score_measures[k].robust)
      bad |= aa_json_set(j, aa_score_measures[k].name, aa_json_num(AA_SCORE_MEASURE(s, k)));
  bad |= aa_json_set(w, "index", json_index(p, o, s->worst_abs));
  bad |= aa_json_set(w, "got", aa_json_num(s->worst_got));
  bad |= aa_json_set(w, "oracle", aa_json_num(s->worst_ref));
  bad |= aa_json_set(j, "worst_abs", w);
  return bad ? (json_decref(j), NULL) : j;
}

/* The legacy fa rule's fields: null when it was not applied. */
static json_t *fa_num(const aa_eval_out_t *o, double x) {
  return o->fa_applied ? aa_json_num(x) : json_null();
}

json_t *aa_eval_json_output(const aa_eval_out_t *o, const aa_eval_place_t *p) {
  const aa_metrics_t *m = &o->m;
  json_t *j = json_object(), *rules = json_object();
  int bad = aa_json_set(j, "count", aa_json_u64(m->count));
  bad |= aa_json_set(j, "ulp_fmt", json_string(fmt_name(o->ulp_fmt)));
  bad |= aa_json_set(j, "rel_l2", aa_json_num(m->rel_l2));
  bad |= aa_json_set(j, "max_abs", aa_json_num(m->max_abs));
  bad |= aa_json_set(j, "max_ulp", aa_json_num(m->max_ulp));
  bad |= aa_json_set(j, "mean_ulp", aa_json_num(m->mean_ulp));
  bad |= aa_json_set(j, "nan", aa_json_u64(m->nan));
  bad |= aa_json_set(j, "inf", aa_json_u64(m->inf));
  bad |= aa_json_set(j, "atol", aa_json_num(m->atol));
  bad |= aa_json_set(j, "rtol", aa_json_num(m->rtol));
  bad |= aa_json_set(j, "fail_count", aa_json_u64(m->fail_count));
  bad |= aa_json_set(j, "pass", aa_json_bool(m->pass));
  bad |= aa_json_set(j, "oracle_relerr_bound", aa_json_num(o->relerr_bound));
  bad |= aa_json_set(j, "fa_factor", fa_num(o, m->fa_factor));
  bad |= aa_json_set(j, "fa_ref_max_abs", fa_num(o, m->fa_ref_max_abs));
  bad |= aa_json_set(j, "fa_ratio", fa_num(o, m->fa_ratio));
  bad |= aa_json_set(j, "fa_pass", o->fa_applied ? aa_json_bool(m->fa_pass) : json_null());
  bad |= aa_json_set(j, "data_fmt", json_string(fmt_name(o->s.data_fmt)));
  bad |= aa_json_set(j, "robust", json_robust(p, o));
  bad |= aa_json_set(j, "systematic", json_systematic(&o->s));
  for (int r = 0; r < AA_RULE_COUNT; r++)
    bad |= aa_json_set(rules, aa_rule_name((aa_rule_t)r), json_rule(p, o, (aa_rule_t)r));
  bad |= aa_json_set(j, "rules", rules);
  return bad ? (json_decref(j), NULL) : j;
}

/* The recipe's counters: the dQ reduction and the normalisation (recipes only, not given outputs). */
static int json_counters(json_t *j, const aa_eval_variant_t *v) {
  int bad = 0;
  if (v->dq_reduce[0] != '\0') {
    const aa_reduce_stats_t *s = &v->dq_stats;
    json_t *d = json_object();
    bad |= aa_json_set(d, "kind", aa_json_str(v->dq_reduce));
    bad |= aa_json_set(d, "tiles", aa_json_u64(s->tiles));
    bad |= aa_json_set(d, "conv_failures", aa_json_u64(s->conv_failures));
    bad |= aa_json_set(d, "sum_failures", aa_json_u64(s->sum_failures));
    bad |= aa_json_set(d, "budget_failures", aa_json_u64(s->budget_failures));
    bad |= aa_json_set(d, "fp64_recomputes", aa_json_u64(s->fp64_recomputes));
    bad |= aa_json_set(j, "dq_reduce", d);
  }
  if (v->softmax[0] != '\0') {
    json_t *n = json_object();
    bad |= aa_json_set(n, "softmax", aa_json_str(v->softmax));
    bad |= aa_json_set(n, "fwd_tiles", aa_json_u64(v->fwd_tiles));
    bad |= aa_json_set(n, "tiles_flagged", aa_json_u64(v->tiles_flagged));
    bad |= aa_json_set(n, "rows_recovered", aa_json_u64(v->rows_recovered));
    bad |= aa_json_set(n, "nonfinite", aa_json_bool(v->nonfinite));
    bad |= aa_json_set(j, "normalisation", n);
  }
  return bad;
}

json_t *aa_eval_json_run(const aa_eval_variant_t *v, const aa_eval_place_t *p) {
  json_t *j = json_object(), *outs = json_object();
  int bad = aa_json_set(j, "variant", aa_json_str(v->variant));
  bad |= aa_json_set(j, "recipe", aa_json_str(v->recipe_text));
  bad |= aa_json_set(j, "emulation_seconds", aa_json_num(v->seconds));
  bad |= json_counters(j, v);
  for (int k = 0; k < v->nout; k++)
    bad |= aa_json_set(outs, v->out[k].name, aa_eval_json_output(&v->out[k], p));
  bad |= aa_json_set(j, "outputs", outs);
  return bad ? (json_decref(j), NULL) : j;
}
