/* attnacc: the JSON document of run and score, schema version 2 (experiments/README-json.md), built with jansson. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"

/* The index of element i of output o as a JSON array in the report's layout. */
static json_t *json_index(const cli_report_t *rep, const cli_out_t *o, size_t i) {
  size_t idx[4];
  int nd = cli_index(idx, rep, o, i), bad = 0;
  json_t *a = json_array();
  for (int k = 0; k < nd; k++)
    bad |= aa_json_push(a, aa_json_u64(idx[k]));
  if (bad) {
    json_decref(a);
    return NULL;
  }
  return a;
}

/* One rule's result: applied, and when applied its ratio, threshold and worst element. */
static json_t *json_rule(const cli_report_t *rep, const cli_out_t *o, aa_rule_t r) {
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
  bad |= aa_json_set(j, "fail_count", aa_json_u64(x->fail_count));
  bad |= aa_json_set(j, "worst_index", json_index(rep, o, x->worst));
  return bad ? (json_decref(j), NULL) : j;
}

/* The robust measures (lib/score.h) of one output. */
static json_t *json_robust(const cli_report_t *rep, const cli_out_t *o) {
  const aa_score_out_t *s = &o->s;
  json_t *j = json_object(), *w = json_object();
  int bad = aa_json_set(j, "ulp_fmt", json_string(cli_fmt_name(s->ulp_fmt)));
  bad |= aa_json_set(j, "ulp_median", aa_json_num(s->ulp_median));
  bad |= aa_json_set(j, "ulp_p99", aa_json_num(s->ulp_p99));
  bad |= aa_json_set(j, "ulp_max", aa_json_num(s->ulp_max));
  bad |= aa_json_set(j, "ulp_normwise", aa_json_num(s->ulp_normwise));
  bad |= aa_json_set(j, "max_rel", aa_json_num(s->max_rel));
  bad |= aa_json_set(j, "rel_floor", aa_json_num(s->rel_floor));
  bad |= aa_json_set(j, "max_rel_any", aa_json_num(s->max_rel_any));
  bad |= aa_json_set(w, "index", json_index(rep, o, s->worst_abs));
  bad |= aa_json_set(w, "got", aa_json_num(s->worst_got));
  bad |= aa_json_set(w, "oracle", aa_json_num(s->worst_ref));
  bad |= aa_json_set(j, "worst_abs", w);
  return bad ? (json_decref(j), NULL) : j;
}

/* The legacy fa rule's fields: null when it was not applied. */
static json_t *fa_num(const cli_out_t *o, double x) {
  return o->fa_applied ? aa_json_num(x) : json_null();
}

static json_t *json_output(const cli_report_t *rep, const cli_out_t *o) {
  const aa_metrics_t *m = &o->m;
  json_t *j = json_object(), *rules = json_object();
  int bad = aa_json_set(j, "count", aa_json_u64(m->count));
  bad |= aa_json_set(j, "ulp_fmt", json_string(cli_fmt_name(o->ulp_fmt)));
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
  bad |= aa_json_set(j, "data_fmt", json_string(cli_fmt_name(o->s.data_fmt)));
  bad |= aa_json_set(j, "robust", json_robust(rep, o));
  for (int r = 0; r < AA_RULE_COUNT; r++)
    bad |= aa_json_set(rules, aa_rule_name((aa_rule_t)r), json_rule(rep, o, (aa_rule_t)r));
  bad |= aa_json_set(j, "rules", rules);
  return bad ? (json_decref(j), NULL) : j;
}

/* The verdict of v by the report's rules, with one line per failed (output, rule). */
static json_t *json_verdict(const cli_report_t *rep, const cli_variant_t *v) {
  const cli_report_extra_t *x = cli_report_extra();
  json_t *j = json_object(), *rules = json_array(), *fails = json_array();
  int bad = 0;
  char line[1024];
  for (int r = 0; r < x->n_verdict; r++)
    bad |= aa_json_push(rules, json_string(aa_rule_name(x->verdict_rules[r])));
  bad |= aa_json_set(j, "rules", rules);
  bad |= aa_json_set(j, "pass", aa_json_bool(cli_verdict(v, x->verdict_rules, x->n_verdict)));
  for (int k = 0; k < v->nout; k++)
    for (int r = 0; r < x->n_verdict; r++) {
      const aa_rule_result_t *rr = &v->out[k].s.rule[x->verdict_rules[r]];
      if (rr->applied && rr->pass) continue;
      cli_failure_line(line, sizeof line, rep, &v->out[k], x->verdict_rules[r]);
      bad |= aa_json_push(fails, aa_json_str(line));
    }
  bad |= aa_json_set(j, "failures", fails);
  return bad ? (json_decref(j), NULL) : j;
}

/* The recipe's counters: the dQ reduction and the normalisation (run only). */
static int json_counters(json_t *j, const cli_variant_t *v) {
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

json_t *aa_json_run(const cli_report_t *rep, const cli_variant_t *v) {
  json_t *j = json_object(), *outs = json_object();
  int bad = aa_json_set(j, "variant", aa_json_str(v->variant));
  bad |= aa_json_set(j, "recipe", aa_json_str(v->recipe_text));
  bad |= aa_json_set(j, "emulation_seconds", aa_json_num(v->seconds));
  bad |= json_counters(j, v);
  for (int k = 0; k < v->nout; k++)
    bad |= aa_json_set(outs, v->out[k].name, json_output(rep, &v->out[k]));
  bad |= aa_json_set(j, "outputs", outs);
  if (cli_report_extra()->n_verdict > 0) bad |= aa_json_set(j, "verdict", json_verdict(rep, v));
  return bad ? (json_decref(j), NULL) : j;
}

/* The problem features of issue 14, only when on (the problem of other runs is unchanged). */
static int json_features(json_t *p, const aa_problem_t *pb) {
  int bad = 0;
  if (pb->align == AA_ALIGN_BOTTOM_RIGHT) bad |= aa_json_set(p, "causal_align", json_string("bottom-right"));
  if (pb->local) {
    json_t *w = json_array();
    bad |= aa_json_push(w, json_integer(pb->window_left == AA_WINDOW_INF ? -1 : (json_int_t)pb->window_left));
    bad |= aa_json_push(w, json_integer(pb->window_right == AA_WINDOW_INF ? -1 : (json_int_t)pb->window_right));
    bad |= aa_json_set(p, "window_size", w);
  }
  if (pb->softcap > 0) bad |= aa_json_set(p, "softcap", aa_json_num(pb->softcap));
  if (pb->alibi != AA_ALIBI_NONE) {
    json_t *s = json_array();
    bad |= aa_json_set(p, "alibi", json_string(pb->alibi == AA_ALIBI_FLASH ? "flash" : "torch"));
    for (size_t h = 0; h < pb->heads; h++)
      bad |= aa_json_push(s, aa_json_num(pb->alibi_slopes[h]));
    bad |= aa_json_set(p, "alibi_slopes", s);
  }
  return bad;
}

json_t *aa_json_problem(const cli_report_t *rep) {
  const aa_problem_t *pb = rep->pb;
  json_t *p = json_object();
  int bad = aa_json_set(p, "n", aa_json_u64(pb->n_q));
  bad |= aa_json_set(p, "n_k", aa_json_u64(pb->n_k));
  bad |= aa_json_set(p, "d", aa_json_u64(pb->d));
  bad |= aa_json_set(p, "heads", aa_json_u64(pb->heads));
  bad |= aa_json_set(p, "kv_heads", aa_json_u64(pb->kv_heads));
  bad |= aa_json_set(p, "causal", aa_json_bool(pb->causal));
  bad |= aa_json_set(p, "window", aa_json_u64(pb->window));
  bad |= aa_json_set(p, "sinks", aa_json_u64(pb->num_sinks));
  bad |= aa_json_set(p, "dist", aa_json_str(rep->dist));
  bad |= aa_json_set(p, "sigma", rep->dist != NULL ? aa_json_num(rep->sigma) : json_null());
  bad |= aa_json_set(p, "scale", aa_json_num(aa_problem_scale(pb)));
  bad |= json_features(p, pb);
  return bad ? (json_decref(p), NULL) : p;
}

json_t *aa_json_oracle(const cli_report_t *rep) {
  json_t *o = json_object();
  int bad = aa_json_set(o, "path", aa_json_str(aa_oracle_path_name(rep->oo->path)));
  bad |= aa_json_set(o, "prec", json_integer(rep->oo->prec));
  bad |= aa_json_set(o, "target", aa_json_num(rep->oo->target));
  bad |= aa_json_set(o, "relerr_bound", aa_json_num(cli_oracle_bound(rep->oracle)));
  bad |= aa_json_set(o, "recomputed", aa_json_u64(rep->oracle->n_recomputed));
  bad |= aa_json_set(o, "uncertified", aa_json_u64(rep->oracle->n_uncertified));
  bad |= aa_json_set(o, "seconds", aa_json_num(rep->oracle_seconds));
  return bad ? (json_decref(o), NULL) : o;
}

/* The caller's layout (score): name, axes and the batch and head counts. */
static json_t *json_layout(void) {
  const cli_report_extra_t *x = cli_report_extra();
  json_t *l = json_object();
  int bad = aa_json_set(l, "name", json_string(aa_layout_name(x->layout)));
  bad |= aa_json_set(l, "axes", json_string(aa_layout_axes(x->layout)));
  bad |= aa_json_set(l, "b", aa_json_u64(x->qdims.b));
  bad |= aa_json_set(l, "heads", aa_json_u64(x->qdims.h));
  bad |= aa_json_set(l, "kv_heads", aa_json_u64(x->kdims.h));
  return bad ? (json_decref(l), NULL) : l;
}

json_t *aa_json_runs(const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  json_t *runs = json_array();
  int bad = 0;
  for (size_t i = 0; i < nv; i++)
    bad |= aa_json_push(runs, aa_json_run(rep, &vs[i]));
  return bad ? (json_decref(runs), NULL) : runs;
}

json_t *aa_json_doc(const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  json_t *doc = json_object(), *who = json_object();
  int bad = aa_json_set(doc, "schema_version", json_integer(CLI_SCHEMA_VERSION));
  bad |= aa_json_set(who, "version", aa_json_str(AA_VERSION));
  bad |= aa_json_set(who, "git", aa_json_str(AA_GIT_HASH));
  bad |= aa_json_set(doc, "attnacc", who);
  bad |= aa_json_set(doc, "command", aa_json_str(rep->cmd));
  bad |= aa_json_set(doc, "seed", rep->seed_known ? aa_json_u64(rep->seed) : json_null());
  bad |= aa_json_set(doc, "inputs", aa_json_str(rep->inputs_dir));
  bad |= aa_json_set(doc, "problem", aa_json_problem(rep));
  if (cli_report_extra()->layout != AA_LAYOUT_AUTO) bad |= aa_json_set(doc, "layout", json_layout());
  bad |= aa_json_set(doc, "oracle", aa_json_oracle(rep));
  bad |= aa_json_set(doc, "runs", aa_json_runs(rep, vs, nv));
  return bad ? (json_decref(doc), NULL) : doc;
}
