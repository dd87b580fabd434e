/* attnacc: the JSON document of run and score, schema version 2 (experiments/README-json.md), built with jansson: the
 * problem, oracle, layout and verdict around the library's runs (lib/score/json.h). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "score/json.h"

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
  bad |= aa_json_set(j, "expect", x->expect != NULL ? aa_json_str(x->expect) : json_null());
  return bad ? (json_decref(j), NULL) : j;
}

json_t *cli_json_run(const cli_report_t *rep, const cli_variant_t *v) {
  aa_eval_place_t p;
  json_t *j;
  cli_place(&p, rep);
  j = aa_eval_json_run(v, &p);
  if (j != NULL && cli_report_extra()->n_verdict > 0 && aa_json_set(j, "verdict", json_verdict(rep, v)) != 0) {
    json_decref(j);
    return NULL;
  }
  return j;
}

/* The problem features beyond masks (lib/problem.h), only when on (the problem of other runs is unchanged). */
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
  if (pb->mask != NULL || pb->bias != NULL)
    bad |= aa_json_set(p, "attn_mask", json_string(pb->mask_hstride ? "per-head" : "broadcast"));
  if (pb->key_pad > 0) bad |= aa_json_set(p, "key_len", json_integer((json_int_t)(pb->n_k - pb->key_pad)));
  if (pb->logit_offset != 0) bad |= aa_json_set(p, "logit_offset", aa_json_num(pb->logit_offset));
  return bad;
}

json_t *cli_json_problem(const cli_report_t *rep) {
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

json_t *cli_json_oracle(const cli_report_t *rep) {
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

json_t *cli_json_runs(const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  json_t *runs = json_array();
  int bad = 0;
  for (size_t i = 0; i < nv; i++)
    bad |= aa_json_push(runs, cli_json_run(rep, &vs[i]));
  return bad ? (json_decref(runs), NULL) : runs;
}

json_t *cli_json_doc(const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  json_t *doc = json_object(), *who = json_object();
  int bad = aa_json_set(doc, "schema_version", json_integer(CLI_SCHEMA_VERSION));
  bad |= aa_json_set(who, "version", aa_json_str(AA_VERSION));
  bad |= aa_json_set(who, "git", aa_json_str(AA_GIT_HASH));
  bad |= aa_json_set(doc, "attnacc", who);
  bad |= aa_json_set(doc, "command", aa_json_str(rep->cmd));
  bad |= aa_json_set(doc, "seed", rep->seed_known ? aa_json_u64(rep->seed) : json_null());
  bad |= aa_json_set(doc, "inputs", aa_json_str(rep->inputs_dir));
  bad |= aa_json_set(doc, "problem", cli_json_problem(rep));
  if (cli_report_extra()->layout != AA_LAYOUT_AUTO) bad |= aa_json_set(doc, "layout", json_layout());
  bad |= aa_json_set(doc, "oracle", cli_json_oracle(rep));
  bad |= aa_json_set(doc, "runs", cli_json_runs(rep, vs, nv));
  return bad ? (json_decref(doc), NULL) : doc;
}
