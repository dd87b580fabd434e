/* attnacc: varlen problems: cu_seqlens checks, the packed oracle against the same problem written as packing
 * bounds, and the packed emulation against each sequence run on its own. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "attn.h"
#include "fmt.h"
#include "oracle.h"
#include "problem.h"
#include "recipe.h"
#include "rng.h"
#include "tests.h"

typedef struct {
  size_t B, H, KH, d;
  int32_t cu_q[5], cu_k[5];
  int causal, bottom_right;
} vcase_t;

static void fill(aa_tensor_t *t, int ndim, const size_t *shape, aa_pcg64_t *r) {
  aa_tensor_alloc(t, ndim, shape, AA_FMT_BF16);
  aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  for (size_t i = 0; i < aa_tensor_numel(t); i++)
    t->data[i] = aa_round(aa_pcg64_normal(r), &ro, NULL);
}

static void make(const vcase_t *c, aa_problem_t *pb, aa_tensor_t in[4], uint64_t seed) {
  aa_pcg64_t r;
  uint64_t tag[1] = {(uint64_t)c->cu_q[c->B] * 1000 + (uint64_t)c->cu_k[c->B]};
  size_t nq = (size_t)c->cu_q[c->B], nk = (size_t)c->cu_k[c->B];
  size_t sq[3] = {c->H, nq, c->d}, sk[3] = {c->KH, nk, c->d};
  aa_rng_derive(&r, seed, tag, 1);
  fill(&in[0], 3, sq, &r);
  fill(&in[1], 3, sk, &r);
  fill(&in[2], 3, sk, &r);
  fill(&in[3], 3, sq, &r);
  aa_problem_init(pb, nq, nk, c->d, c->H, c->KH);
  pb->causal = c->causal;
  pb->align = c->bottom_right ? AA_ALIGN_BOTTOM_RIGHT : AA_ALIGN_TOP_LEFT;
  pb->varlen_batch = c->B;
  pb->cu_seqlens_q = c->cu_q;
  pb->cu_seqlens_k = c->cu_k;
}

/* The same batch as one packed problem with per-query key bounds, written
   from flash-attn's varlen masking (each query sees only its sequence's
   keys; bottom-right causal: key j - k0 <= (i - q0) + nk_b - nq_b). */
static void as_bounds(const vcase_t *c, aa_problem_t *pb, int32_t *bmin, int32_t *bmax) {
  for (size_t b = 0; b < c->B; b++) {
    long q0 = c->cu_q[b], k0 = c->cu_k[b], nqb = c->cu_q[b + 1] - q0, nkb = c->cu_k[b + 1] - k0;
    for (long i = q0; i < q0 + nqb; i++) {
      long hi = k0 + nkb;
      if (c->causal) {
        long last = k0 + (i - q0) + (c->bottom_right ? nkb - nqb : 0); /* last visible key */
        if (hi > last + 1) hi = last + 1;
        if (hi < k0) hi = k0;
      }
      bmin[i] = (int32_t)k0;
      bmax[i] = (int32_t)hi;
    }
  }
  pb->varlen_batch = 0;
  pb->cu_seqlens_q = pb->cu_seqlens_k = NULL;
  pb->causal = 0;
  pb->align = AA_ALIGN_TOP_LEFT;
  pb->bound_min = bmin;
  pb->bound_max = bmax;
}

static void free4(aa_tensor_t in[4]) {
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&in[i]);
}

/* The oracle of the varlen problem and of its bounds form: the certified
   FP32 and BF16 roundings must be identical, the values within the bounds. */
static void check_oracle(const vcase_t *c, const char *name, uint64_t seed) {
  aa_problem_t pb, pbb;
  aa_tensor_t in[4];
  aa_oracle_result_t a, b;
  aa_error_t err = {{0}};
  int32_t bmin[64], bmax[64];
  make(c, &pb, in, seed);
  pbb = pb;
  as_bounds(c, &pbb, bmin, bmax);
  int ra = aa_oracle_run(&a, &pb, &in[0], &in[1], &in[2], &in[3], NULL, &err);
  AA_CHECK(ra == AA_OK, "%s: varlen oracle failed: %s", name, err.msg);
  int rb = aa_oracle_run(&b, &pbb, &in[0], &in[1], &in[2], &in[3], NULL, &err);
  AA_CHECK(rb == AA_OK, "%s: bounds oracle failed: %s", name, err.msg);
  if (ra == AA_OK && rb == AA_OK) {
    const aa_oracle_out_t *x[5] = {&a.o, &a.lse, &a.dq, &a.dk, &a.dv}, *y[5] = {&b.o, &b.lse, &b.dq, &b.dk, &b.dv};
    static const char *nm[5] = {"o", "lse", "dq", "dk", "dv"};
    AA_CHECK(a.n_uncertified == 0 && b.n_uncertified == 0, "%s: uncertified elements", name);
    for (int t = 0; t < 5; t++) {
      size_t n = aa_tensor_numel(&x[t]->val), bad = 0;
      AA_CHECK(n == aa_tensor_numel(&y[t]->val), "%s %s: sizes differ", name, nm[t]);
      for (size_t i = 0; i < n; i++) {
        double u = x[t]->val.data[i], w = y[t]->val.data[i];
        int same_rounding = x[t]->fp32.data[i] == y[t]->fp32.data[i] && x[t]->bf16.data[i] == y[t]->bf16.data[i];
        int close = u == w || fabs(u - w) <= 0x1p-46 * fabs(w);
        if (!(same_rounding && close) && bad++ == 0)
          AA_FAIL("%s %s[%zu]: varlen %a (fp32 %a) against bounds %a (fp32 %a)", name, nm[t], i, u,
                  x[t]->fp32.data[i], w, y[t]->fp32.data[i]);
      }
    }
  }
  if (ra == AA_OK) aa_oracle_result_free(&a);
  if (rb == AA_OK) aa_oracle_result_free(&b);
  free4(in);
}

/* The packed emulation against each sequence run as its own problem, the
   slices cut here, bit for bit. */
static void check_emulation(const vcase_t *c, const char *recipe, uint64_t seed) {
  aa_problem_t pb;
  aa_tensor_t in[4];
  aa_recipe_t r;
  aa_attn_result_t packed;
  aa_error_t err = {{0}};
  make(c, &pb, in, seed);
  aa_recipe_preset(&r, recipe, NULL);
  int rc = aa_attn_run(&packed, &pb, &r, &in[0], &in[1], &in[2], &in[3], &err);
  AA_CHECK(rc == AA_OK, "%s: varlen run failed: %s", recipe, err.msg);
  for (size_t b = 0; rc == AA_OK && b < c->B; b++) {
    size_t q0 = (size_t)c->cu_q[b], k0 = (size_t)c->cu_k[b], nq = (size_t)c->cu_q[b + 1] - q0,
           nk = (size_t)c->cu_k[b + 1] - k0, mism = 0;
    size_t sq[3] = {c->H, nq, c->d}, sk[3] = {c->KH, nk, c->d};
    aa_tensor_t s[4];
    aa_problem_t one;
    aa_attn_result_t res;
    aa_tensor_alloc(&s[0], 3, sq, AA_FMT_BF16);
    aa_tensor_alloc(&s[3], 3, sq, AA_FMT_BF16);
    aa_tensor_alloc(&s[1], 3, sk, AA_FMT_BF16);
    aa_tensor_alloc(&s[2], 3, sk, AA_FMT_BF16);
    for (int t = 0; t < 4; t++) {
      size_t rows = t == 1 || t == 2 ? nk : nq, r0 = t == 1 || t == 2 ? k0 : q0, N = in[t].shape[1];
      for (size_t h = 0; h < s[t].shape[0]; h++)
        for (size_t i = 0; i < rows * c->d; i++)
          s[t].data[h * rows * c->d + i] = in[t].data[(h * N + r0) * c->d + i];
    }
    aa_problem_init(&one, nq, nk, c->d, c->H, c->KH);
    one.causal = c->causal;
    one.align = pb.align;
    if (aa_attn_run(&res, &one, &r, &s[0], &s[1], &s[2], &s[3], &err) != AA_OK) {
      AA_FAIL("%s sequence %zu: %s", recipe, b, err.msg);
    } else {
      const aa_tensor_t *p[4] = {&packed.o, &packed.dq, &packed.dk, &packed.dv},
                        *q[4] = {&res.o, &res.dq, &res.dk, &res.dv};
      for (int t = 0; t < 4; t++) {
        size_t rows = t >= 2 ? nk : nq, r0 = t >= 2 ? k0 : q0, N = p[t]->shape[1];
        for (size_t h = 0; h < q[t]->shape[0]; h++)
          for (size_t i = 0; i < rows * c->d; i++) {
            double u = p[t]->data[(h * N + r0) * c->d + i], w = q[t]->data[h * rows * c->d + i];
            if (!(u == w || (isnan(u) && isnan(w)))) mism++;
          }
      }
      AA_CHECK(mism == 0, "%s sequence %zu: %zu packed elements differ from the sequence's own run", recipe, b, mism);
      aa_attn_result_free(&res);
    }
    free4(s);
  }
  if (rc == AA_OK) aa_attn_result_free(&packed);
  free4(in);
}

static void expect_refused(aa_problem_t *pb, int want, const char *needle, const char *what) {
  aa_error_t err = {{0}};
  int rc = aa_problem_check(pb, &err);
  AA_CHECK(rc == want, "%s: status %d, want %d (%s)", what, rc, want, err.msg);
  AA_CHECK(strstr(err.msg, needle) != NULL, "%s: message '%s' does not say '%s'", what, err.msg, needle);
}

static void check_refusals(void) {
  int32_t cu[4] = {0, 4, 4, 9}, cu0[3] = {1, 4, 9}, cuk[3] = {0, 4, 9};
  double sinks[2] = {0, 0};
  aa_problem_t pb;
  aa_problem_init(&pb, 9, 9, 8, 1, 1);
  pb.varlen_batch = 3;
  pb.cu_seqlens_q = cu;
  pb.cu_seqlens_k = cu;
  expect_refused(&pb, AA_EINVAL, "sequence 1 is empty", "an empty sequence");
  pb.varlen_batch = 2;
  pb.cu_seqlens_q = cu0;
  pb.cu_seqlens_k = cuk;
  expect_refused(&pb, AA_EINVAL, "cu_seqlens_q[0] is 1", "offsets from 1");
  pb.cu_seqlens_q = cuk;
  pb.n_k = 10;
  expect_refused(&pb, AA_ESHAPE, "cu_seqlens_k ends at 9", "a wrong total");
  pb.n_k = 9;
  pb.cu_seqlens_k = NULL;
  expect_refused(&pb, AA_EINVAL, "no cu_seqlens_k", "a missing array");
  pb.cu_seqlens_k = cuk;
  pb.num_sinks = 2;
  pb.sinks = sinks;
  expect_refused(&pb, AA_EINVAL, "sinks", "varlen with sinks");
}

int main(void) {
  uint64_t seed = aa_test_seed("tvarlen");
  static const vcase_t cases[] = {
      {3, 2, 1, 8, {0, 5, 12, 20}, {0, 5, 12, 20}, 1, 0}, /* self-attention, causal, GQA */
      {3, 2, 2, 8, {0, 5, 12, 20}, {0, 5, 12, 20}, 0, 0}, /* dense */
      {2, 4, 2, 16, {0, 3, 13}, {0, 8, 12}, 1, 1},        /* bottom-right, n_k < n_q in sequence 1 */
      {4, 1, 1, 8, {0, 1, 2, 9, 17}, {0, 6, 7, 8, 30}, 1, 1},
  };
  check_refusals();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "case %zu", i);
    check_oracle(&cases[i], name, seed);
    check_emulation(&cases[i], "fa2", seed);
    check_emulation(&cases[i], "naive-bf16", seed);
  }
  printf("tvarlen: %d failures\n", aa_test_failures);
  return aa_test_failures ? 1 : 0;
}
