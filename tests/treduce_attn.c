/* attnacc: the dq_reduce strategies inside the attention pipeline (counters, closed-form fixed-point limits, bounds,
 * order purity). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "attnacc.h"
#include "tests.h"

static uint64_t seed;

typedef struct {
  aa_tensor_t q, k, v, dO;
} inputs_t;

/* N(0,1) inputs rounded to BF16, one derived stream per tensor. */
static void draw(inputs_t *in, size_t n, size_t d, size_t heads) {
  size_t shape[3] = {heads, n, d};
  aa_tensor_t *ts[4] = {&in->q, &in->k, &in->v, &in->dO};
  aa_round_opts_t o = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  for (int i = 0; i < 4; i++) {
    aa_pcg64_t rng;
    uint64_t tag = (uint64_t)i + 100;
    aa_rng_derive(&rng, seed, &tag, 1);
    if (aa_tensor_alloc(ts[i], 3, shape, AA_FMT_BF16) != AA_OK) abort();
    for (size_t x = 0; x < heads * n * d; x++)
      ts[i]->data[x] = aa_round(aa_pcg64_normal(&rng), &o, NULL);
  }
}

static void inputs_free(inputs_t *in) {
  aa_tensor_free(&in->q);
  aa_tensor_free(&in->k);
  aa_tensor_free(&in->v);
  aa_tensor_free(&in->dO);
}

/* Run preset `base` with "k=v,k=v" overrides. */
static int run(aa_attn_result_t *res, const char *base, const char *sets, const aa_problem_t *pb,
               const inputs_t *in) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  if (aa_recipe_preset(&r, base, &err) != AA_OK) {
    AA_FAIL("preset %s: %s", base, err.msg);
    return 1;
  }
  if (sets != NULL) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", sets);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
      char *eq = strchr(t, '=');
      *eq = '\0';
      if (aa_recipe_set(&r, t, eq + 1, &err) != AA_OK) {
        AA_FAIL("recipe set %s: %s", t, err.msg);
        return 1;
      }
    }
  }
  int st = aa_attn_run(res, pb, &r, &in->q, &in->k, &in->v, &in->dO, &err);
  if (st != AA_OK) AA_FAIL("aa_attn_run %s %s: %s", base, sets ? sets : "", err.msg);
  return st != AA_OK;
}

static double bf16_ulp(double x) {
  int e;
  if (x == 0) return 0x1p-133;
  frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
  return ldexp(1.0, e - 8 < -133 ? -133 : e - 8);
}

int main(void) {
  seed = aa_test_seed("treduce_attn");
  const size_t n = 512, d = 32, heads = 2, tq = 128, tk = 128; /* fa2 tiles */
  const size_t nqt = n / tq, nkt = n / tk;
  inputs_t in;
  draw(&in, n, d, heads);
  for (int causal = 0; causal < 2; causal++) {
    aa_problem_t pb;
    aa_problem_init(&pb, n, n, d, heads, heads);
    pb.causal = causal;
    aa_attn_result_t ref, a;
    if (run(&ref, "fa2", NULL, &pb, &in)) return 1;
    size_t m = heads * n * d;

    /* 1. Counters against closed forms: one reduction per (head, q tile);
       the partials are the K tiles not skipped: all nqt*nkt dense, the
       nqt(nqt+1)/2 tiles on or below the diagonal causal (tq = tk). */
    uint64_t want_parts = heads * (causal ? nqt * (nqt + 1) / 2 : nqt * nkt);
    AA_CHECK(ref.dq_reduce.tiles == heads * nqt && ref.dq_reduce.partials == want_parts,
             "fa2 counters (causal %d): tiles %llu partials %llu, want %zu %llu", causal,
             (unsigned long long)ref.dq_reduce.tiles, (unsigned long long)ref.dq_reduce.partials, heads * nqt,
             (unsigned long long)want_parts);

    /* 2. The collecting path (splits, S = 1) equals the streaming one bit for
       bit: with a fresh accumulator both are the same ascending FP32 adds. */
    if (!run(&a, "fa2", "dq_reduce=fp32-splits,dq_reduce_splits=1", &pb, &in)) {
      AA_CHECK(memcmp(a.dq.data, ref.dq.data, m * sizeof(double)) == 0,
               "fp32-splits S=1 differs from fp32-ordered in the pipeline (causal %d, seed %llu)", causal,
               (unsigned long long)seed);
      aa_attn_result_free(&a);
    }

    /* 3. fixed with s = -40: every partial (|x| < 2^39) converts to 0, so dQ
       is exactly 0 and nothing fails (closed form). */
    if (!run(&a, "fa2-fixed", "dq_reduce_scale_exp=-40", &pb, &in)) {
      size_t nz = 0;
      for (size_t x = 0; x < m; x++)
        nz += a.dq.data[x] != 0;
      AA_CHECK(nz == 0 && a.dq_reduce.fp64_recomputes == 0,
               "fixed s=-40 (causal %d): %zu non-zero dQ, %llu recomputes", causal, nz,
               (unsigned long long)a.dq_reduce.fp64_recomputes);
      aa_attn_result_free(&a);
    }

    /* 4. fixed with s = 60: any partial element with |x| >= 2^-45 fails the
       16-bit conversion, so every tile falls back to FP64 (counted once per
       tile) and dQ = bf16(scale * fp32(binary64 sum)): within one BF16 ulp of
       fa2's bf16(scale * FP32 ordered sum) (both sums are within a few FP32
       ulps of each other). */
    if (!run(&a, "fa2-fixed", "dq_reduce_scale_exp=60", &pb, &in)) {
      AA_CHECK(a.dq_reduce.fp64_recomputes == heads * nqt && a.dq_reduce.budget_failures == heads * nqt,
               "fixed s=60 (causal %d): %llu recomputes, want every tile (%zu)", causal,
               (unsigned long long)a.dq_reduce.fp64_recomputes, heads * nqt);
      size_t bad = 0, same = 0;
      for (size_t x = 0; x < m; x++) {
        double u = bf16_ulp(ref.dq.data[x]);
        if (fabs(a.dq.data[x] - ref.dq.data[x]) > u) bad++;
        same += a.dq.data[x] == ref.dq.data[x];
      }
      AA_CHECK(bad == 0, "fixed s=60 FP64 fallback (causal %d): %zu elements beyond one bf16 ulp of fa2", causal,
               bad);
      AA_CHECK(same > m / 2, "fixed s=60 (causal %d): only %zu of %zu elements equal fa2's", causal, same, m);
      aa_attn_result_free(&a);
    }

    /* 5. fixed w = 32, s = 20 without failures: each partial element is
       off by at most 2^-21 after conversion, so the FP32 accumulator is
       within nkt 2^-21 + 2 FP32 ulps of fa2's; after the scale and the BF16
       rounding the outputs differ by at most that bound (times the scale)
       plus one BF16 ulp. */
    if (!run(&a, "fa2-fixed", "dq_reduce_width=32,dq_reduce_scale_exp=20", &pb, &in)) {
      double scale = 1.0 / sqrt((double)d);
      size_t bad = 0;
      for (size_t x = 0; x < m; x++) {
        double r = ref.dq.data[x], b = a.dq.data[x];
        double bound =
            bf16_ulp(fmax(fabs(r), fabs(b))) + scale * ((double)nkt * 0x1p-21 + 4 * 0x1p-24 * fabs(r / scale));
        if (fabs(b - r) > bound) bad++;
      }
      AA_CHECK(bad == 0 && a.dq_reduce.fp64_recomputes == 0,
               "fixed w=32 s=20 (causal %d): %zu elements beyond the conversion bound, %llu recomputes", causal, bad,
               (unsigned long long)a.dq_reduce.fp64_recomputes);
      aa_attn_result_free(&a);
    }

    /* 6. fp32-atomic: the order of a tile is a pure function of (seed, tile),
       so one thread and two threads give the same bits; a different order
       seed gives an accumulator that differs somewhere in FP32 (checked with
       io = fp32, where the final BF16 rounding cannot hide it; causal q tile
       0 has one partial, so only the other tiles can differ). */
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    aa_attn_result_t t1, t2;
    omp_set_num_threads(1);
    int e1 = run(&t1, "fa2-atomic", "dq_reduce_order_seed=7", &pb, &in);
    omp_set_num_threads(2);
    int e2 = run(&t2, "fa2-atomic", "dq_reduce_order_seed=7", &pb, &in);
    omp_set_num_threads(nt);
    if (!e1 && !e2)
      AA_CHECK(memcmp(t1.dq.data, t2.dq.data, m * sizeof(double)) == 0,
               "fa2-atomic (causal %d): 1 and 2 threads gave different dQ bits", causal);
    if (!e1) aa_attn_result_free(&t1);
    if (!e2) aa_attn_result_free(&t2);
#endif
    {
      aa_attn_result_t s1, s2, s1b;
      int f1 = run(&s1, "fa2-atomic", "io=fp32,dq_reduce_order_seed=1", &pb, &in);
      int f2 = run(&s2, "fa2-atomic", "io=fp32,dq_reduce_order_seed=2", &pb, &in);
      int f3 = run(&s1b, "fa2-atomic", "io=fp32,dq_reduce_order_seed=1", &pb, &in);
      if (!f1 && !f2 && !f3) {
        size_t diff = 0;
        for (size_t x = 0; x < m; x++)
          diff += s1.dq.data[x] != s2.dq.data[x];
        AA_CHECK(diff > 0, "fa2-atomic io=fp32 (causal %d): order seeds 1 and 2 gave identical FP32 dQ", causal);
        AA_CHECK(memcmp(s1.dq.data, s1b.dq.data, m * sizeof(double)) == 0,
                 "fa2-atomic io=fp32 (causal %d): order seed 1 twice gave different bits", causal);
        printf("treduce_attn: causal %d, fp32 io: %zu of %zu dQ elements differ between order seeds 1 and 2\n",
               causal, diff, m);
      }
      if (!f1) aa_attn_result_free(&s1);
      if (!f2) aa_attn_result_free(&s2);
      if (!f3) aa_attn_result_free(&s1b);
    }
    aa_attn_result_free(&ref);
  }
  inputs_free(&in);
  return aa_test_finish("treduce_attn");
}
