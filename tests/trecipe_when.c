/* attnacc: tests of conditional recipe keys (`when COND: key = value`): parsing, errors, text, resolution. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "recipe.h"
#include "rng.h"
#include "tests.h"

/* A bad file: parse must fail with status `want` and a message naming
   path:line and `what` (the key, or the bad term). */
static void bad(const char *text, int line, const char *what, int want) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  char where[32];
  snprintf(where, sizeof where, "w.recipe:%d:", line);
  int st = aa_recipe_parse_string(&r, text, "w.recipe", &err);
  AA_CHECK(st == want && strstr(err.msg, where) != NULL && strstr(err.msg, what) != NULL,
           "bad conditional file (want status %d, '%s', '%s'): got %d '%s'\n%s", want, where, what, st, err.msg,
           text);
}

static void parse_ok(aa_recipe_t *r, const char *text) {
  aa_error_t err = {{0}};
  AA_CHECK(aa_recipe_parse_string(r, text, "w.recipe", &err) == AA_OK, "parse failed: %s\n%s", err.msg, text);
}

static void test_parse(void) {
  aa_recipe_t r, back;
  char buf[1 << 14];
  parse_ok(&r, "base = fa2\nname = w\nwhen causal and n >= 32768: dq_reduce = fp32-atomic  # note\n"
               "when n<4096 and d==64: fwd.tile_q = 64\nwhen dense: dq_reduce_splits = 3\n");
  AA_CHECK(r.nwhen == 3, "three conditional lines, got %zu", r.nwhen);
  AA_CHECK(r.when[0].mask == 1 && r.when[0].nterms == 1 && r.when[0].term[0].var == AA_WHEN_N &&
               r.when[0].term[0].op == AA_WHEN_GE && r.when[0].term[0].value == 32768 &&
               !strcmp(r.when[0].key, "dq_reduce") && !strcmp(r.when[0].value, "fp32-atomic"),
           "line 1 parsed wrongly");
  AA_CHECK(r.when[1].mask == -1 && r.when[1].nterms == 2 && r.when[1].term[0].op == AA_WHEN_LT &&
               r.when[1].term[1].var == AA_WHEN_D && r.when[1].term[1].op == AA_WHEN_EQ &&
               r.when[1].term[1].value == 64,
           "line 2 (no blanks around operators) parsed wrongly");
  /* The unconditional part is fa2's: conditional lines change nothing until resolved. */
  aa_recipe_t fa2;
  aa_error_t err = {{0}};
  aa_recipe_preset(&fa2, "fa2", &err);
  AA_CHECK(r.bwd_dq_reduce.kind == fa2.bwd_dq_reduce.kind && r.fwd_tile_q == fa2.fwd_tile_q,
           "a conditional key changed the unconditional recipe");
  aa_recipe_format(buf, sizeof buf, &r);
  AA_CHECK(strstr(buf, "\nwhen causal and n >= 32768: dq_reduce = fp32-atomic\n"
                       "when n < 4096 and d == 64: fwd.tile_q = 64\nwhen dense: dq_reduce_splits = 3\n") != NULL,
           "canonical text of the conditional lines:\n%s", buf);
  parse_ok(&back, buf);
  AA_CHECK(aa_recipe_equal(&r, &back), "format -> parse does not give the same recipe back");
  back.when[1].term[0].value = 4095;
  AA_CHECK(!aa_recipe_equal(&r, &back), "recipes that differ in a condition compare equal");
  AA_CHECK(!aa_recipe_equal(&r, &fa2), "a recipe with conditional keys equals one without");
  /* The same key under different conditions is fine; under one condition twice it is not. */
  parse_ok(&r, "when causal: fwd.sub_q = 128\nwhen causal and n >= 16384: fwd.sub_q = 0\nfwd.sub_q = 64\n");
  bad("name = w\nwhen causal: io = fp32\nwhen  causal : io=fp16\n", 3, "first at w.recipe:2", AA_EFORMAT);
  bad("when causal: dq_reduce = fixed\nwhen causal: dq_reduce_kind = fp32-atomic\n", 2, "given twice", AA_EFORMAT);
  /* Bad keys, values and conditions: the message names file:line and the key or term. */
  bad("base = fa2\n\nwhen causal: nope = 1\n", 3, "nope", AA_EINVAL);
  bad("when causal: fwd.tile_q = abc\n", 1, "fwd.tile_q", AA_EINVAL);
  bad("when causal: fwd.exp = nope-exp\n", 1, "fwd.exp", AA_EINVAL);
  bad("io = bf16\nwhen causl: io = fp32\n", 2, "causl", AA_EFORMAT);
  bad("when causal and: io = fp32\n", 1, "and", AA_EFORMAT);
  bad("when and causal: io = fp32\n", 1, "and", AA_EFORMAT);
  bad("when causal n >= 4: io = fp32\n", 1, "joined by 'and'", AA_EFORMAT);
  bad("when causal and dense: io = fp32\n", 1, "never true", AA_EFORMAT);
  bad("when n >= -4: io = fp32\n", 1, "integer", AA_EFORMAT);
  bad("when n => 4: io = fp32\n", 1, "operator", AA_EFORMAT);
  bad("when m >= 4: io = fp32\n", 1, "unknown term", AA_EFORMAT);
  bad("when : io = fp32\n", 1, "empty condition", AA_EFORMAT);
  bad("when causal io = fp32\n", 1, "without ':'", AA_EFORMAT);
  bad("when causal: io\n", 1, "missing '='", AA_EFORMAT);
  bad("when causal: base = fa2\n", 1, "base", AA_EFORMAT);
  bad("when dense: name = x\n", 1, "name", AA_EFORMAT);
  bad("io = bf16\nbase = fa2\n", 2, "first key", AA_EFORMAT);
}

/* Resolution: the expected recipes are written out without conditions (a
   second construction of the same recipe), so the test does not read the
   resolved recipe back through the code under test. */
static void resolves_to(const aa_recipe_t *r, int causal, size_t n, size_t d, const char *expect_text) {
  aa_recipe_t res, want;
  aa_error_t err = {{0}};
  aa_recipe_case_t c = {.causal = causal, .n_q = n, .n_k = n, .d = d};
  int st = aa_recipe_resolve(&res, r, &c, &err);
  AA_CHECK(st == AA_OK, "resolve %s n=%zu d=%zu: %s", causal ? "causal" : "dense", n, d, err.msg);
  parse_ok(&want, expect_text);
  AA_CHECK(st != AA_OK || (res.nwhen == 0 && aa_recipe_equal(&res, &want) && !strcmp(res.name, r->name)),
           "%s resolved for %s n=%zu d=%zu is not\n%s", r->name, causal ? "causal" : "dense", n, d, expect_text);
}

static void test_resolve(void) {
  aa_recipe_t r, tlx;
  aa_error_t err = {{0}};
  parse_ok(&r, "base = fa2\nname = w\nwhen causal: fwd.tile_q = 64\nwhen causal and n >= 16384: fwd.tile_q = 32\n"
               "when n > 4096 and n <= 16384 and d != 64: bwd.tile_k = 64\n");
  resolves_to(&r, 0, 1024, 128, "base = fa2\n");
  resolves_to(&r, 1, 1024, 128, "base = fa2\nfwd.tile_q = 64\n");
  resolves_to(&r, 1, 16384, 128, "base = fa2\nfwd.tile_q = 32\nbwd.tile_k = 64\n"); /* later line wins */
  resolves_to(&r, 1, 16384, 64, "base = fa2\nfwd.tile_q = 32\n");
  resolves_to(&r, 0, 8192, 128, "base = fa2\nbwd.tile_k = 64\n");
  resolves_to(&r, 0, 32768, 128, "base = fa2\n");
  /* n is the key length; n_q the query length. */
  parse_ok(&r, "when n_q == 100 and n_k >= 200: fwd.tile_k = 64\n");
  aa_recipe_case_t c = {.causal = 0, .n_q = 100, .n_k = 200, .d = 8};
  aa_recipe_t res;
  AA_CHECK(aa_recipe_resolve(&res, &r, &c, &err) == AA_OK && res.fwd_tile_k == 64, "n_q/n_k terms: %s", err.msg);
  c.n_q = 200;
  AA_CHECK(aa_recipe_resolve(&res, &r, &c, &err) == AA_OK && res.fwd_tile_k == 128, "n_q term ignored");
  /* A resolved recipe must pass the check; the message names the case. */
  parse_ok(&r, "base = fa2\nname = w\nwhen causal: bwd.norm = recip\n");
  c = (aa_recipe_case_t){.causal = 1, .n_q = 64, .n_k = 64, .d = 16};
  AA_CHECK(aa_recipe_resolve(&res, &r, &c, &err) == AA_EINVAL && strstr(err.msg, "causal") != NULL &&
               strstr(err.msg, "bwd.norm = recip") != NULL,
           "resolution to an inconsistent recipe: '%s'", err.msg);
  /* The tlx preset: the D3 reading on dense d = 128 cells, C3 on causal
     cells, FP32 causal dQ at 32768 (recipes/tlx-readings, written out). */
  AA_CHECK(aa_recipe_preset(&tlx, "tlx", &err) == AA_OK && tlx.nwhen > 0, "preset tlx: %s", err.msg);
  const char *dense = "base = tlx-exp\nbwd.tile_k = 256\nbwd.dq_scale = tile\ndq_reduce = bf16-pair\n"
                      "dq_reduce_pair = chain\n";
  resolves_to(&tlx, 0, 1024, 128, dense);
  resolves_to(&tlx, 0, 32768, 128, dense);
  resolves_to(&tlx, 1, 8192, 128, "base = tlx-dq-causal\nbwd.norm = lse\n");
  resolves_to(&tlx, 1, 16384, 128, "base = tlx-dq-causal\nbwd.norm = lse\nfwd.sub_q = 0\n");
  resolves_to(&tlx, 1, 32768, 128, "base = tlx-dq-causal\nbwd.norm = lse\nfwd.sub_q = 0\ndq_reduce = fp32-ordered\n");
}

/* aa_attn_run resolves a conditional recipe against its problem: the same
   bits as the resolved recipe run directly, and different ones from the
   unresolved recipe's unconditional part. */
static void test_run(void) {
  const size_t n = 96, d = 16;
  aa_problem_t pb;
  aa_problem_init(&pb, n, n, d, 1, 1);
  aa_tensor_t t[4];
  aa_error_t err = {{0}};
  aa_round_opts_t bf16 = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  for (int i = 0; i < 4; i++) {
    size_t shape[3] = {1, n, d};
    aa_tensor_alloc(&t[i], 3, shape, AA_FMT_BF16);
    aa_pcg64_t g;
    uint64_t tag = (uint64_t)i;
    aa_rng_derive(&g, 7, &tag, 1);
    for (size_t j = 0; j < n * d; j++)
      t[i].data[j] = aa_round(aa_pcg64_normal(&g), &bf16, NULL);
  }
  aa_recipe_t r, plain, want;
  parse_ok(&r, "base = fa2\nname = w\nwhen causal and n >= 64: bwd.ds_fmt = fp16\nwhen dense: fwd.p_fmt = fp16\n");
  parse_ok(&plain, "base = fa2\nname = w\n");
  for (int causal = 0; causal <= 1; causal++) {
    pb.causal = causal;
    parse_ok(&want, causal ? "base = fa2\nbwd.ds_fmt = fp16\n" : "base = fa2\nfwd.p_fmt = fp16\n");
    aa_attn_result_t a, b, p;
    int st = aa_attn_run(&a, &pb, &r, &t[0], &t[1], &t[2], &t[3], &err);
    st |= aa_attn_run(&b, &pb, &want, &t[0], &t[1], &t[2], &t[3], &err);
    st |= aa_attn_run(&p, &pb, &plain, &t[0], &t[1], &t[2], &t[3], &err);
    AA_CHECK(st == AA_OK, "attn_run: %s", err.msg);
    if (st == AA_OK) {
      int same = 1, differs = 0;
      const aa_tensor_t *x[4] = {&a.o, &a.dq, &a.dk, &a.dv}, *y[4] = {&b.o, &b.dq, &b.dk, &b.dv},
                        *z[4] = {&p.o, &p.dq, &p.dk, &p.dv};
      for (int o = 0; o < 4; o++)
        for (size_t j = 0; j < n * d; j++) {
          same &= memcmp(&x[o]->data[j], &y[o]->data[j], sizeof(double)) == 0;
          differs |= x[o]->data[j] != z[o]->data[j];
        }
      AA_CHECK(same, "%s: conditional recipe and its resolution differ", causal ? "causal" : "dense");
      AA_CHECK(differs, "%s: the conditional key had no effect", causal ? "causal" : "dense");
    }
    aa_attn_result_free(&a);
    aa_attn_result_free(&b);
    aa_attn_result_free(&p);
  }
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&t[i]);
}

/* A file that repeats an inherited conditional line (base = tlx has `when causal: fwd.exp = exact` and `when
   causal: dq_reduce = fixed`) overrides it in place: each (condition, key) is held once, the later value wins,
   and the formatted text parses back to the same recipe (a case the recipe fuzzer found). */
static void test_override_inherited(void) {
  aa_recipe_t r, back;
  static char buf[1 << 15];
  aa_error_t err = {{0}};
  parse_ok(&r, "base = tlx\nname = o\nwhen causal: fwd.exp = exact\nwhen causal: dq_reduce_kind = fp32-ordered\n");
  size_t with_cond = 0;
  for (size_t i = 0; i < r.nwhen; i++)
    if (!strcmp(r.when[i].key, "dq_reduce") || !strcmp(r.when[i].key, "dq_reduce_kind")) {
      char cond[256];
      aa_recipe_when_cond_text(cond, sizeof cond, &r.when[i]);
      if (!strcmp(cond, "causal")) {
        with_cond++;
        AA_CHECK(!strcmp(r.when[i].value, "fp32-ordered"), "inherited dq_reduce not overridden: %s", r.when[i].value);
      }
    }
  AA_CHECK(with_cond == 1, "'when causal: dq_reduce' held %zu times, want once", with_cond);
  aa_recipe_format(buf, sizeof buf, &r);
  AA_CHECK(aa_recipe_parse_string(&back, buf, "formatted.recipe", &err) == AA_OK, "formatted text does not parse: %s",
           err.msg);
  AA_CHECK(aa_recipe_equal(&r, &back), "format then parse changed the recipe");
}

/* `masked` and `unmasked`: parsed, written back, matched on the case's masked flag, which aa_attn_case sets for
   each of the four ways a problem receives an attn_mask (a boolean mask, a bias, key padding, a logit offset) and
   for none of them; a contradiction is refused. */
static void test_masked(void) {
  aa_recipe_t r, back, res;
  aa_error_t err = {{0}};
  char buf[1 << 14];
  parse_ok(&r, "base = fa2\nname = w\nwhen masked and n_q > 1: fwd.tile_k = 64\nwhen unmasked and causal: "
               "fwd.tile_q = 64\n");
  aa_recipe_format(buf, sizeof buf, &r);
  AA_CHECK(strstr(buf, "when masked and n_q > 1: fwd.tile_k = 64\nwhen causal and unmasked: fwd.tile_q = 64\n"),
           "canonical text of masked/unmasked lines:\n%s", buf);
  parse_ok(&back, buf);
  AA_CHECK(aa_recipe_equal(&r, &back), "masked: format -> parse does not give the same recipe back");
  bad("when masked and unmasked: fwd.tile_k = 64\n", 1, "never true", AA_EFORMAT);
  aa_problem_t pb;
  uint8_t keep[4] = {1, 1, 1, 0};
  double bias[4] = {0, 0, 0, -INFINITY};
  for (int way = 0; way < 5; way++) {
    aa_problem_init(&pb, 2, 2, 8, 1, 1);
    pb.causal = 1;
    if (way == 1) pb.mask = keep;
    if (way == 2) pb.bias = bias;
    if (way == 3) pb.key_pad = 1;
    if (way == 4) pb.logit_offset = -200;
    aa_recipe_case_t c = aa_attn_case(&pb);
    AA_CHECK(c.masked == (way > 0) && c.causal == 1 && c.n_q == 2 && c.d == 8, "aa_attn_case way %d: masked %d", way,
             c.masked);
    AA_CHECK(aa_recipe_resolve(&res, &r, &c, &err) == AA_OK, "resolve way %d: %s", way, err.msg);
    AA_CHECK(res.fwd_tile_k == (way > 0 ? 64u : 128u) && res.fwd_tile_q == (way > 0 ? 128u : 64u),
             "way %d resolved to tile_q %zu tile_k %zu", way, res.fwd_tile_q, res.fwd_tile_k);
    c.n_q = 1; /* the second term of the masked line fails */
    AA_CHECK(aa_recipe_resolve(&res, &r, &c, &err) == AA_OK && res.fwd_tile_k == 128, "n_q = 1 way %d", way);
  }
}

int main(void) {
  test_parse();
  test_masked();
  test_override_inherited();
  test_resolve();
  test_run();
  return aa_test_finish("trecipe_when");
}
