/* attnacc: tests of the evaluation path (lib/score/eval.c): rule parsing, verdicts, given outputs, a recipe's run and
 * the naive reference's rules, against closed forms. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "layout.h"
#include "oracle.h"
#include "score.h"
#include "tests.h"

/* ---- rules as text ---- */

static void test_rules_parse(void) {
  static const struct {
    const char *text;
    int status, n;
    aa_rule_t want[AA_RULE_COUNT];
    double atol, rtol; /* -1: left as it was */
  } cases[] = {
      {"fa", AA_OK, 1, {AA_RULE_FA}, -1, -1},
      {"torch,fa,torch", AA_OK, 2, {AA_RULE_TORCH, AA_RULE_FA}, -1, -1},
      {"sdpa all", AA_OK, 5, {AA_RULE_SDPA, AA_RULE_ABSREL, AA_RULE_TORCH, AA_RULE_FA, AA_RULE_EXPECT}, -1, -1},
      {"expect,fa", AA_OK, 2, {AA_RULE_EXPECT, AA_RULE_FA}, -1, -1},
      {"abs-rel,1e-3,2.5e-2", AA_OK, 1, {AA_RULE_ABSREL}, 1e-3, 2.5e-2},
      {"abs-rel 0 .5 fa", AA_OK, 2, {AA_RULE_ABSREL, AA_RULE_FA}, 0, 0.5},
      {"abs-rel,fa", AA_OK, 2, {AA_RULE_ABSREL, AA_RULE_FA}, -1, -1},
      {"abs-rel,0.1", AA_EINVAL, 0, {0}, -1, -1},
      {"abs-rel,1e-3,x", AA_EINVAL, 0, {0}, -1, -1},
      {"abs-rel,-1,2", AA_EINVAL, 0, {0}, -1, -1}, /* "-1" is no tolerance, so it is read as a rule */
      {"bogus", AA_EINVAL, 0, {0}, -1, -1},
      {",", AA_EINVAL, 0, {0}, -1, -1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    aa_rule_t rules[AA_RULE_COUNT];
    double atol = -1, rtol = -1;
    int n = -1;
    aa_error_t err = {{0}};
    int rc = aa_eval_rules_parse(rules, &n, &atol, &rtol, cases[c].text, &err);
    if (rc != cases[c].status) {
      AA_FAIL("teval rules '%s': status %d (%s), want %d", cases[c].text, rc, err.msg, cases[c].status);
      continue;
    }
    if (rc != AA_OK) {
      AA_CHECK(err.msg[0] != '\0', "teval rules '%s': refused without a message", cases[c].text);
      continue;
    }
    AA_CHECK(n == cases[c].n, "teval rules '%s': %d rules, want %d", cases[c].text, n, cases[c].n);
    for (int i = 0; i < n && i < cases[c].n; i++)
      AA_CHECK(rules[i] == cases[c].want[i], "teval rules '%s': rule %d is %s, want %s", cases[c].text, i,
               aa_rule_name(rules[i]), aa_rule_name(cases[c].want[i]));
    AA_CHECK(atol == cases[c].atol && rtol == cases[c].rtol, "teval rules '%s': atol %a rtol %a, want %a %a",
             cases[c].text, atol, rtol, cases[c].atol, cases[c].rtol);
  }
}

/* ---- verdicts on constructed rule results ---- */

static void test_verdict(void) {
  aa_eval_variant_t v;
  aa_rule_t fa_torch[2] = {AA_RULE_FA, AA_RULE_TORCH};
  memset(&v, 0, sizeof v);
  v.nout = 2;
  for (int j = 0; j < 2; j++)
    for (int r = 0; r < AA_RULE_COUNT; r++)
      v.out[j].s.rule[r] = (aa_rule_result_t){.applied = 1, .pass = 1};
  AA_CHECK(aa_eval_verdict(&v, fa_torch, 2) == 1, "teval verdict: every rule passes, verdict fails");
  v.out[1].s.rule[AA_RULE_TORCH].pass = 0;
  AA_CHECK(aa_eval_verdict(&v, fa_torch, 2) == 0, "teval verdict: torch fails on dq, verdict passes");
  AA_CHECK(aa_eval_verdict(&v, fa_torch, 1) == 1, "teval verdict: fa alone passes, verdict fails");
  v.out[0].s.rule[AA_RULE_FA].applied = 0;
  AA_CHECK(aa_eval_verdict(&v, fa_torch, 1) == 0, "teval verdict: an unapplied rule counts as passing");
}

/* ---- the path on one small problem ---- */

typedef struct {
  aa_tensor_t in[4];
  aa_problem_t pb;
  aa_oracle_result_t orc;
} problem_t;

static int setup(problem_t *p, uint64_t seed, size_t sinks) {
  aa_oracle_opts_t oo;
  aa_error_t err = {{0}};
  static double sink_logits[2 * 3] = {0.5, -1.0, 0.25, -0.75, 1.5, 0};
  aa_oracle_opts_init(&oo);
  for (int i = 0; i < 4; i++)
    aa_layout_draw(&p->in[i], seed, (uint64_t)(20 + i), 2, 24, 8, 0, 1.0, AA_FMT_BF16, &err);
  aa_problem_init(&p->pb, 24, 24, 8, 2, 2);
  p->pb.causal = 1;
  if (sinks > 0) {
    p->pb.num_sinks = sinks;
    p->pb.sinks = sink_logits;
  }
  if (aa_oracle_run(&p->orc, &p->pb, &p->in[0], &p->in[1], &p->in[2], &p->in[3], &oo, &err) != AA_OK) {
    AA_FAIL("teval setup: oracle: %s", err.msg);
    return 1;
  }
  return 0;
}

static void problem_free(problem_t *p) {
  aa_oracle_result_free(&p->orc);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&p->in[i]);
}

/* Outputs equal to the oracle's correctly rounded FP32 values are 0 ULPs away and pass abs-rel and torch; the
   options reach the abs-rel rule; an output not given is not scored. */
static void test_given(uint64_t seed) {
  problem_t p;
  aa_tensor_t g[5];
  aa_eval_variant_t v;
  aa_error_t err = {{0}};
  const aa_oracle_out_t *ref[4];
  if (setup(&p, seed, 0)) return;
  ref[0] = &p.orc.o, ref[1] = &p.orc.dq, ref[2] = &p.orc.dk, ref[3] = &p.orc.dv;
  memset(g, 0, sizeof g);
  memset(&v, 0, sizeof v);
  for (int i = 1; i < 4; i++) { /* o left out */
    aa_tensor_alloc(&g[i], ref[i]->fp32.ndim, ref[i]->fp32.shape, AA_FMT_FP32);
    memcpy(g[i].data, ref[i]->fp32.data, aa_tensor_numel(&g[i]) * sizeof(double));
  }
  if (aa_eval_given(&v, g, &p.orc, &(aa_eval_opts_t){-1, 1e-4, 2e-3}, &err) != AA_OK) {
    AA_FAIL("teval given: %s", err.msg);
  } else {
    AA_CHECK(v.nout == 3 && strcmp(v.out[0].name, "dq") == 0 && strcmp(v.variant, "external") == 0,
             "teval given: %d outputs, first '%s', variant '%s'; want 3, dq, external", v.nout, v.out[0].name,
             v.variant);
    for (int j = 0; j < v.nout; j++) {
      const aa_score_out_t *s = &v.out[j].s;
      AA_CHECK(s->ulp_max == 0 && s->ulp_fmt == AA_FMT_FP32, "teval given %s: ulp_max %g in fmt %d, want 0 in fp32",
               s->name, s->ulp_max, (int)s->ulp_fmt);
      AA_CHECK(s->rule[AA_RULE_ABSREL].pass && s->rule[AA_RULE_ABSREL].atol == 1e-4 &&
                   s->rule[AA_RULE_ABSREL].rtol == 2e-3 && s->rule[AA_RULE_TORCH].pass,
               "teval given %s: abs-rel (atol %a, rtol %a) or torch does not pass", s->name,
               s->rule[AA_RULE_ABSREL].atol, s->rule[AA_RULE_ABSREL].rtol);
      AA_CHECK(!s->rule[AA_RULE_FA].applied, "teval given %s: fa applied without a naive reference", s->name);
    }
  }
  aa_eval_variant_free(&v);
  for (int i = 0; i < 5; i++)
    aa_tensor_free(&g[i]);
  problem_free(&p);
}

/* A recipe's run: exact-fp64 lands within the oracle's bound on every output (dsinks too), and the naive
   reference judged against itself has fa ratio 1/2 on o and 1/3 on the gradients (max|naive - b| over factor
   times itself). */
static void test_run_and_naive(uint64_t seed) {
  problem_t p;
  aa_recipe_t r;
  aa_eval_variant_t v, naive;
  aa_attn_result_t res, nres;
  aa_error_t err = {{0}};
  memset(&v, 0, sizeof v);
  memset(&naive, 0, sizeof naive);
  memset(&res, 0, sizeof res);
  memset(&nres, 0, sizeof nres);
  if (setup(&p, seed, 3)) return;
  if (aa_recipe_preset(&r, "exact-fp64", &err) != AA_OK ||
      aa_eval_run(&v, &res, &r, &p.pb, &p.in[0], &p.in[1], &p.in[2], &p.in[3], &p.orc, NULL, &err) != AA_OK) {
    AA_FAIL("teval run: exact-fp64: %s", err.msg);
  } else {
    AA_CHECK(v.nout == 5 && strcmp(v.out[4].name, "dsinks") == 0 && strcmp(v.variant, "exact-fp64") == 0 &&
                 v.recipe_text != NULL && !v.nonfinite,
             "teval run: %d outputs (last '%s'), variant '%s', nonfinite %d; want 5, dsinks, exact-fp64, 0", v.nout,
             v.out[v.nout - 1].name, v.variant, v.nonfinite);
    for (int j = 0; j < v.nout; j++)
      AA_CHECK(v.out[j].m.rel_l2 < 1e-12, "teval run: exact-fp64 %s has rel_l2 %a", v.out[j].name, v.out[j].m.rel_l2);
  }
  if (aa_eval_naive(&naive, &nres, AA_FMT_BF16, &p.pb, &p.in[0], &p.in[1], &p.in[2], &p.in[3], &p.orc, &err) !=
      AA_OK) {
    AA_FAIL("teval naive: %s", err.msg);
  } else {
    aa_eval_variant_t self = naive;
    aa_eval_apply_naive(&self, &naive);
    for (int j = 0; j < self.nout; j++) {
      const aa_rule_result_t *fa = &self.out[j].s.rule[AA_RULE_FA];
      double want = strcmp(self.out[j].name, "o") == 0 ? 0.5 : 1.0 / 3.0;
      AA_CHECK(fa->applied && fa->pass && fabs(fa->ratio - want) <= 1e-15,
               "teval naive: fa on %s against itself: ratio %a, want %a", self.out[j].name, fa->ratio, want);
    }
  }
  aa_eval_variant_free(&v);
  aa_eval_variant_free(&naive);
  aa_attn_result_free(&res);
  aa_attn_result_free(&nres);
  problem_free(&p);
}

static void test_error_prefix(void) {
  aa_error_t err = {{0}};
  aa_error_set(&err, AA_EINVAL, "bad value");
  aa_error_prefix(&err, "dq");
  AA_CHECK(strcmp(err.msg, "dq: bad value") == 0, "teval prefix: '%s'", err.msg);
  aa_error_prefix(&err, "dq");
  AA_CHECK(strcmp(err.msg, "dq: bad value") == 0, "teval prefix: a second prefix gives '%s'", err.msg);
  aa_error_prefix(NULL, "dq");
}

/* The library's description of its result structures covers each of them: fields in order, no gap beyond
   alignment padding (a field left out of lib/score/abi.c would leave one), ending within padding of sizeof; every
   robust measure is a double field of aa_flat_out_t. */
static void test_abi_fields(void) {
  static const struct {
    const char *name;
    size_t size;
  } structs[] = {{"aa_flat_out_t", sizeof(aa_flat_out_t)}, {"aa_flat_info_t", sizeof(aa_flat_info_t)}};
  for (size_t t = 0; t < 2; t++) {
    size_t end = 0, off, rows, cols, i;
    int kind;
    const char *f;
    for (i = 0; (f = aa_abi_field(structs[t].name, i, &off, &kind, &rows, &cols)) != NULL; i++) {
      size_t el = kind == 'i' ? sizeof(int) : kind == 'z' ? sizeof(size_t) : kind == 'd' ? sizeof(double) : 1;
      AA_CHECK(off >= end && off - end < sizeof(double), "teval abi: %s.%s at %zu, the previous field ends at %zu",
               structs[t].name, f, off, end);
      end = off + el * rows * cols;
    }
    AA_CHECK(i > 0 && end <= structs[t].size && structs[t].size - end < sizeof(double),
             "teval abi: %s's %zu fields end at %zu of %zu bytes", structs[t].name, i, end, structs[t].size);
  }
  AA_CHECK(aa_abi_field("aa_flat_opts_t", 0, NULL, NULL, NULL, NULL) == NULL, "teval abi: an input structure listed");
  for (size_t m = 0; aa_abi_measure(m, NULL) != NULL; m++) {
    const char *name = aa_abi_measure(m, NULL), *f;
    int kind = 0, found = 0;
    for (size_t i = 0; (f = aa_abi_field("aa_flat_out_t", i, NULL, &kind, NULL, NULL)) != NULL; i++)
      if (strcmp(f, name) == 0) found = kind == 'd';
    AA_CHECK(found, "teval abi: measure %s is not a double field of aa_flat_out_t", name);
  }
}

int main(void) {
  uint64_t seed = aa_test_seed("teval");
  test_rules_parse();
  test_verdict();
  test_given(seed);
  test_run_and_naive(seed);
  test_error_prefix();
  test_abi_fields();
  return aa_test_finish("teval");
}
