/* attnacc: tests of the quant.* recipe keys: operands quantised as a second implementation here does, and where
 * P and dS quantisation may and may not act. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "recipe.h"
#include "rng.h"
#include "tests.h"

static uint64_t seed;

static void set(aa_recipe_t *r, const char *k, const char *v) {
  aa_error_t err = {{0}};
  if (aa_recipe_set(r, k, v, &err) != AA_OK) AA_FAIL("recipe_set %s = %s: %s", k, v, err.msg);
}

/* [heads][n][d] values of fmt, each row with its own magnitude 2^(-6..6) so that block scales differ */
static void fill(aa_tensor_t *t, size_t heads, size_t n, size_t d, aa_fmt_t fmt, aa_pcg64_t *rng) {
  size_t s[3] = {heads, n, d};
  aa_tensor_alloc(t, 3, s, fmt);
  aa_round_opts_t ro = {fmt, AA_RND_NE, 1, 0};
  for (size_t row = 0; row < heads * n; row++) {
    int e = (int)(aa_pcg64_next(rng) % 13) - 6;
    for (size_t c = 0; c < d; c++)
      t->data[row * d + c] = aa_round(ldexp(aa_pcg64_normal(rng), e), &ro, NULL);
  }
}

typedef struct {
  aa_tensor_t q, k, v, dO;
} inputs_t;

static void inputs_free(inputs_t *in) {
  aa_tensor_free(&in->q), aa_tensor_free(&in->k), aa_tensor_free(&in->v), aa_tensor_free(&in->dO);
}

static int run(aa_attn_result_t *res, const aa_problem_t *pb, const aa_recipe_t *r, const inputs_t *in) {
  aa_error_t err = {{0}};
  int st = aa_attn_run(res, pb, r, &in->q, &in->k, &in->v, &in->dO, &err);
  if (st != AA_OK) AA_FAIL("aa_attn_run(%s): %d %s (seed %llu)", r->name, st, err.msg, (unsigned long long)seed);
  return st;
}

static size_t ndiff(const aa_tensor_t *a, const aa_tensor_t *b) {
  size_t n = 0;
  for (size_t i = 0; i < aa_tensor_numel(a); i++)
    n += !aa_test_same(a->data[i], b->data[i]);
  return n;
}

/* The quantisers of the keys, written again: rows of d along d in blocks
   of the kind's own length (32 MX); SageAttention's int4-thread Q groups,
   rows r, r + 8, r + 16, r + 24 of each block of 32 (quant_per_thread.py). */
static void quant_rows(aa_tensor_t *t, aa_bq_kind_t kind, aa_bq_scale_rnd_t mode) {
  size_t d = t->shape[2], rows = t->shape[0] * t->shape[1];
  aa_bq_opts_t o = {kind, 32, mode, 1};
  for (size_t r = 0; r < rows; r++)
    aa_bq_quantize(t->data + r * d, NULL, t->data + r * d, d, 1, &o, 0);
}

static void quant_q_int4_thread(aa_tensor_t *t) {
  size_t d = t->shape[2], n = t->shape[1];
  aa_bq_opts_t o = {AA_BQ_INT4_THREAD, 0, AA_BQ_SCALE_RCEIL, 1};
  double buf[4 * 256];
  for (size_t h = 0; h < t->shape[0]; h++)
    for (size_t w = 0; w < n; w += 32)
      for (size_t lane = 0; lane < 8; lane++) {
        size_t m = 0;
        for (size_t r = w + lane; r < w + 32 && r < n; r += 8)
          memcpy(buf + m++ * d, t->data + (h * n + r) * d, d * sizeof *buf);
        aa_bq_quantize(buf, NULL, buf, m * d, 1, &o, 0);
        m = 0;
        for (size_t r = w + lane; r < w + 32 && r < n; r += 8)
          memcpy(t->data + (h * n + r) * d, buf + m++ * d, d * sizeof *buf);
      }
}

/* quant.q/k/v/do on exact-fp64 (io fp64, so any quantised value is an
   input) against the same recipe on inputs quantised here: every output
   bit for bit (both passes read the quantised operands). */
static void test_operands(void) {
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 21);
  aa_problem_t pb;
  aa_problem_init(&pb, 80, 72, 64, 2, 1);
  inputs_t in, pre;
  fill(&in.q, 2, 80, 64, AA_FMT_FP64, &rng), fill(&in.k, 1, 72, 64, AA_FMT_FP64, &rng);
  fill(&in.v, 1, 72, 64, AA_FMT_FP64, &rng), fill(&in.dO, 2, 80, 64, AA_FMT_FP64, &rng);
  aa_tensor_t *src[4] = {&in.q, &in.k, &in.v, &in.dO}, *dst[4] = {&pre.q, &pre.k, &pre.v, &pre.dO};
  for (int i = 0; i < 4; i++)
    aa_tensor_alloc(dst[i], 3, src[i]->shape, AA_FMT_FP64),
        memcpy(dst[i]->data, src[i]->data, aa_tensor_numel(src[i]) * sizeof(double));
  quant_q_int4_thread(&pre.q);
  quant_rows(&pre.k, AA_BQ_MXFP8_E4M3, AA_BQ_SCALE_FLOOR);
  quant_rows(&pre.v, AA_BQ_MXFP4, AA_BQ_SCALE_FLOOR);
  quant_rows(&pre.dO, AA_BQ_MXFP8_E5M2, AA_BQ_SCALE_FLOOR);
  aa_recipe_t rq, r0;
  aa_recipe_preset(&r0, "exact-fp64", NULL);
  rq = r0;
  set(&rq, "quant.q", "int4-thread"), set(&rq, "quant.k", "mxfp8-e4m3"), set(&rq, "quant.v", "mxfp4");
  set(&rq, "quant.do", "mxfp8-e5m2"), set(&rq, "quant.scale_rnd", "floor");
  aa_attn_result_t a = {0}, b = {0};
  if (run(&a, &pb, &rq, &in) == AA_OK && run(&b, &pb, &r0, &pre) == AA_OK) {
    const aa_tensor_t *ga[5] = {&a.o, &a.lse, &a.dq, &a.dk, &a.dv}, *gb[5] = {&b.o, &b.lse, &b.dq, &b.dk, &b.dv};
    static const char *const names[5] = {"O", "LSE", "dQ", "dK", "dV"};
    for (int i = 0; i < 5; i++)
      AA_CHECK(ndiff(ga[i], gb[i]) == 0, "quant operands: %s differs in %zu elements from the inputs quantised here",
               names[i], ndiff(ga[i], gb[i]));
  }
  aa_attn_result_free(&a), aa_attn_result_free(&b);
  inputs_free(&in), inputs_free(&pre);
}

/* quant.ds acts on the dQ and dK products only: O, LSE and dV keep fa2's
   bits, dQ and dK change. quant.p acts on PV only: LSE (from the
   unquantised weights) keeps its bits, O moves by at most the E4M3
   element error 2^-4 of each weight (the scale is a power of two, so
   relative) times max |V|, plus O's one BF16 rounding. */
static void test_p_ds(void) {
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 22);
  aa_problem_t pb;
  aa_problem_init(&pb, 96, 128, 64, 2, 2);
  pb.causal = 1;
  inputs_t in;
  fill(&in.q, 2, 96, 64, AA_FMT_BF16, &rng), fill(&in.k, 2, 128, 64, AA_FMT_BF16, &rng);
  fill(&in.v, 2, 128, 64, AA_FMT_BF16, &rng), fill(&in.dO, 2, 96, 64, AA_FMT_BF16, &rng);
  aa_recipe_t r0, rd, rp;
  aa_recipe_preset(&r0, "fa2", NULL);
  rd = rp = r0;
  set(&rd, "quant.ds", "mxfp8-e5m2");
  set(&rp, "quant.p", "mxfp8-e4m3");
  aa_attn_result_t a = {0}, b = {0}, c = {0};
  if (run(&a, &pb, &r0, &in) == AA_OK && run(&b, &pb, &rd, &in) == AA_OK && run(&c, &pb, &rp, &in) == AA_OK) {
    AA_CHECK(ndiff(&a.o, &b.o) == 0 && ndiff(&a.lse, &b.lse) == 0 && ndiff(&a.dv, &b.dv) == 0,
             "quant.ds: O, LSE or dV changed (%zu, %zu, %zu elements)", ndiff(&a.o, &b.o), ndiff(&a.lse, &b.lse),
             ndiff(&a.dv, &b.dv));
    AA_CHECK(ndiff(&a.dq, &b.dq) > 0 && ndiff(&a.dk, &b.dk) > 0, "quant.ds: dQ and dK unchanged");
    AA_CHECK(ndiff(&a.lse, &c.lse) == 0, "quant.p: LSE changed in %zu rows", ndiff(&a.lse, &c.lse));
    double vmax = 0, omax = 0, dmax = 0;
    for (size_t i = 0; i < aa_tensor_numel(&in.v); i++)
      vmax = fmax(vmax, fabs(in.v.data[i]));
    for (size_t i = 0; i < aa_tensor_numel(&a.o); i++)
      omax = fmax(omax, fabs(a.o.data[i])), dmax = fmax(dmax, fabs(a.o.data[i] - c.o.data[i]));
    AA_CHECK(dmax > 0 && dmax <= 0x1p-4 * vmax + 0x1p-7 * omax,
             "quant.p: max |O change| %a, want (0, 2^-4 max|V| + 2^-7 max|O|] = (0, %a]", dmax,
             0x1p-4 * vmax + 0x1p-7 * omax);
  }
  aa_attn_result_free(&a), aa_attn_result_free(&b), aa_attn_result_free(&c);
  inputs_free(&in);
}

/* The keys' value lists are lib/fmt.h's kinds, in enum order. */
static void test_names(void) {
  for (size_t i = 0; i < aa_recipe_key_count(); i++) {
    aa_recipe_key_info_t k;
    if (aa_recipe_key_info(&k, i) != AA_OK || strncmp(k.key, "quant.", 6) != 0 || k.names == NULL) continue;
    if (strcmp(k.names[0], "none") != 0) continue; /* scale_rnd, fp8_scope, v_axis ...: not kind lists */
    int n = 0;
    for (; k.names[n] != NULL; n++)
      AA_CHECK(strcmp(k.names[n], aa_bq_kind_name((aa_bq_kind_t)n)) == 0, "%s value %d is '%s', lib/fmt.h '%s'",
               k.key, n, k.names[n], aa_bq_kind_name((aa_bq_kind_t)n));
    AA_CHECK(n == AA_BQ_COUNT, "%s lists %d values, lib/fmt.h %d kinds", k.key, n, (int)AA_BQ_COUNT);
  }
}

int main(void) {
  seed = aa_test_seed("tattn_quant");
  test_names();
  test_operands();
  test_p_ds();
  return aa_test_finish("tattn_quant");
}
