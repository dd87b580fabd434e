/* attnacc: tests of the oracle's GPU fast path against the CPU rows and tiled kernels, element for element. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "config.h"
#include "oracle/oracle-impl.h"
#define TOR_NO_COMPARE
#include "toracle_common.c"

/* The GPU runs the row-by-row kernel (fast_rows.c) with the same
   operations in the same order, from the rounding definitions of
   lib/oracle/ddcore.h that both compile. So for every problem the GPU
   takes: val, fp32 and bf16 bit-identical to the CPU rows kernel on every
   element of every output, the same certified bounds and the same counts of
   recomputed and uncertified elements; and fp32/bf16 identical to the
   default tiled kernel's (whose val differs in the last bits: other sums).
   Problems with what the GPU does not take (here sinks, softcap) must run
   on the CPU and say so. Cases: n_q != n_k, odd lengths 1, 7, 65, 300, d
   in {1, 16, 80, 128, 256}, GQA, dense, causal (both alignments), windows,
   BF16-valued inputs (exact dot products) and FP32-valued ones (the
   compensated path), input scales from 1e-30 to 30. Without CUDA or
   without a GPU the test is skipped (77). Ends with "N passed, N failed",
   one check per property and case. */

static int n_pass = 0, n_fail = 0;

static void check(int ok, const char *what, const char *prop) {
  if (ok)
    n_pass++;
  else {
    n_fail++;
    AA_FAIL("%s: %s", what, prop);
  }
}

typedef struct {
  size_t n_q, n_k, d, heads, kvh;
  int causal, align;
  size_t window; /* causal sliding window */
  long wl, wr;   /* two-sided window (-1: none) */
  int fp32;      /* FP32-valued inputs instead of BF16-valued */
  double amp;    /* input scale */
  int feature;   /* 1: sinks, 2: softcap (CPU fallback) */
} cfg_t;

typedef struct {
  aa_problem_t pb;
  aa_tensor_t q, k, v, dO;
  double sinks[8];
} case_t;

static void make(case_t *c, const cfg_t *g, uint64_t seed) {
  aa_pcg64_t r;
  aa_pcg64_seed(&r, seed, g->n_q * 7919 + g->d);
  memset(c, 0, sizeof *c);
  aa_problem_init(&c->pb, g->n_q, g->n_k, g->d, g->heads, g->kvh);
  size_t sq[3] = {g->heads, g->n_q, g->d}, sk[3] = {g->kvh, g->n_k, g->d};
  aa_tensor_alloc(&c->q, 3, sq, AA_FMT_FP64);
  aa_tensor_alloc(&c->dO, 3, sq, AA_FMT_FP64);
  aa_tensor_alloc(&c->k, 3, sk, AA_FMT_FP64);
  aa_tensor_alloc(&c->v, 3, sk, AA_FMT_FP64);
  aa_tensor_t *ts[4] = {&c->q, &c->k, &c->v, &c->dO};
  for (int w = 0; w < 4; w++)
    for (size_t i = 0; i < aa_tensor_numel(ts[w]); i++) {
      double x = aa_pcg64_normal(&r) * g->amp;
      ts[w]->data[i] = g->fp32 ? (double)(float)x : aa_oracle_round_d(x, 1);
    }
  c->pb.causal = g->causal;
  c->pb.align = g->align ? AA_ALIGN_BOTTOM_RIGHT : AA_ALIGN_TOP_LEFT;
  c->pb.window = g->window;
  if (g->wl >= 0) {
    c->pb.local = 1;
    c->pb.window_left = (size_t)g->wl;
    c->pb.window_right = (size_t)g->wr;
  }
  if (g->feature == 1) {
    for (size_t h = 0; h < g->heads && h < 8; h++)
      c->sinks[h] = aa_pcg64_normal(&r);
    c->pb.num_sinks = 1;
    c->pb.sinks = c->sinks;
  } else if (g->feature == 2) {
    c->pb.softcap = 5.0;
  }
}

static void drop(case_t *c) {
  aa_tensor_free(&c->q);
  aa_tensor_free(&c->k);
  aa_tensor_free(&c->v);
  aa_tensor_free(&c->dO);
}

static int run(aa_oracle_result_t *res, const case_t *c, aa_oracle_device_t dev, int kernel, const char *what) {
  aa_oracle_opts_t o;
  aa_oracle_opts_init(&o);
  o.device = dev;
  aa_error_t err = {{0}};
  int st = aa_oracle_run_kernel(res, &c->pb, &c->q, &c->k, &c->v, &c->dO, &o, kernel, &err);
  check(st == AA_OK, what, "the oracle runs");
  if (st != AA_OK) printf("  status %d: %s\n", st, err.msg);
  return st;
}

/* every element of every output: val, fp32, bf16 bits equal (bits = 1), or fp32 and bf16 equal (bits = 0) */
static int same_elems(const aa_oracle_result_t *a, const aa_oracle_result_t *b, int bits, const char *what,
                      uint64_t seed) {
  int shown = 0;
  for (int t = 0; t < 6; t++) {
    const aa_oracle_out_t *x = tor_out(a, t), *y = tor_out(b, t);
    size_t n = aa_tensor_numel(&x->val);
    if (n != aa_tensor_numel(&y->val)) return 0;
    for (size_t i = 0; i < n; i++) {
      int same = tor_bits(x->fp32.data[i]) == tor_bits(y->fp32.data[i]) &&
                 tor_bits(x->bf16.data[i]) == tor_bits(y->bf16.data[i]) &&
                 (!bits || tor_bits(x->val.data[i]) == tor_bits(y->val.data[i]));
      if (!same && shown++ < 5)
        printf("  %s %s[%zu]: val %a vs %a (bits %016llx %016llx), fp32 %a vs %a, bf16 %a vs %a, seed %llu\n", what,
               tor_names[t], i, x->val.data[i], y->val.data[i], (unsigned long long)tor_bits(x->val.data[i]),
               (unsigned long long)tor_bits(y->val.data[i]), x->fp32.data[i], y->fp32.data[i], x->bf16.data[i],
               y->bf16.data[i], (unsigned long long)seed);
    }
  }
  return shown == 0;
}

static int same_bounds(const aa_oracle_result_t *a, const aa_oracle_result_t *b) {
  for (int t = 0; t < 6; t++)
    if (tor_bits(tor_out(a, t)->relerr_bound) != tor_bits(tor_out(b, t)->relerr_bound)) {
      printf("  %s bound %a vs %a\n", tor_names[t], tor_out(a, t)->relerr_bound, tor_out(b, t)->relerr_bound);
      return 0;
    }
  return 1;
}

int main(void) {
  uint64_t seed = aa_test_seed("toracle_cuda");
  (void)tor_make; /* shared helpers this test does not use */
  (void)tor_free;
  (void)tor_run;
  printf("toracle_cuda: built %s CUDA; %d CUDA device(s)\n",
#ifdef AA_HAVE_CUDA
         "with", aa_oracle_cuda_devices()
#else
         "without", 0
#endif
  );
  if (!aa_oracle_cuda_available()) {
    printf("toracle_cuda: skipped (no CUDA build or no GPU)\n");
    return AA_TEST_SKIP;
  }
  /* n_q n_k d heads kvh causal align window wl wr fp32 amp feature */
  const cfg_t cfgs[] = {
      {65, 65, 16, 1, 1, 0, 0, 0, -1, -1, 0, 1.0, 0},     {7, 300, 80, 4, 2, 0, 0, 0, -1, -1, 1, 1.0, 0},
      {300, 7, 128, 2, 1, 1, 1, 0, -1, -1, 0, 1.0, 0},    {300, 65, 1, 3, 1, 1, 0, 0, -1, -1, 1, 2.0, 0},
      {1, 1, 256, 1, 1, 0, 0, 0, -1, -1, 1, 1.0, 0},      {1, 65, 128, 4, 1, 1, 1, 0, -1, -1, 0, 1.0, 0},
      {130, 300, 256, 2, 2, 1, 1, 37, -1, -1, 1, 1.0, 0}, {300, 300, 16, 4, 2, 0, 0, 0, 20, 5, 0, 1.0, 0},
      {65, 130, 80, 2, 1, 1, 0, 0, -1, -1, 0, 30.0, 0},   {200, 200, 128, 1, 1, 0, 0, 0, -1, -1, 1, 1e-30, 0},
      {100, 77, 16, 2, 2, 0, 0, 0, -1, -1, 1, 8.0, 0},    {70, 70, 64, 1, 1, 1, 1, 0, 10, 0, 0, 0.25, 0},
      {50, 60, 16, 2, 1, 1, 0, 0, -1, -1, 0, 1.0, 1},     {50, 60, 16, 2, 1, 0, 0, 0, -1, -1, 1, 1.0, 2},
  };
  size_t ncfg = sizeof cfgs / sizeof cfgs[0];
  int nseeds = 3 * (int)aa_test_multiplier();
  for (int si = 0; si < nseeds; si++)
    for (size_t ci = 0; ci < ncfg; ci++) {
      const cfg_t *g = &cfgs[ci];
      uint64_t s = seed + (uint64_t)si * 1000 + ci;
      char what[240];
      snprintf(what, sizeof what,
               "case %zu seed %llu (n_q %zu n_k %zu d %zu heads %zu/%zu causal %d align %d window %zu local %ld/%ld "
               "fp32 %d amp %g feature %d)",
               ci, (unsigned long long)s, g->n_q, g->n_k, g->d, g->heads, g->kvh, g->causal, g->align, g->window,
               g->wl, g->wr, g->fp32, g->amp, g->feature);
      case_t c;
      make(&c, g, s);
      aa_oracle_result_t rr, rt, rg;
      int okr = run(&rr, &c, AA_ORACLE_DEVICE_CPU, AA_OR_KERNEL_ROWS, what) == AA_OK;
      int okt = run(&rt, &c, AA_ORACLE_DEVICE_CPU, AA_OR_KERNEL_TILED, what) == AA_OK;
      int okg = run(&rg, &c, AA_ORACLE_DEVICE_CUDA, AA_OR_KERNEL_TILED, what) == AA_OK;
      if (okr && okt && okg) {
        check(rr.device == AA_ORACLE_DEVICE_CPU && rt.device == AA_ORACLE_DEVICE_CPU, what, "the CPU runs say cpu");
        if (g->feature) {
          check(rg.device == AA_ORACLE_DEVICE_CPU, what, "a problem the GPU does not take runs on the CPU");
          check(same_elems(&rg, &rt, 1, what, s), what, "its fallback gives the tiled kernel's bits");
        } else {
          check(rg.device == AA_ORACLE_DEVICE_CUDA, what, "ran on the GPU");
          check(same_elems(&rg, &rr, 1, what, s), what, "val, fp32, bf16 bit-identical to the CPU rows kernel");
          check(same_elems(&rg, &rt, 0, what, s), what, "fp32, bf16 identical to the CPU tiled kernel");
          check(rg.n_uncertified == rr.n_uncertified && rg.n_uncertified == rt.n_uncertified, what,
                "same n_uncertified as both CPU kernels");
          check(rg.n_recomputed == rr.n_recomputed, what, "same n_recomputed as the rows kernel");
          check(same_bounds(&rg, &rr), what, "relerr_bound equal to the rows kernel's");
        }
        printf("case %zu seed %llu: device %s, %zu recomputed, %zu uncertified, bounds O %.2g dQ %.2g dK %.2g\n", ci,
               (unsigned long long)s, aa_oracle_device_name(rg.device), rg.n_recomputed, rg.n_uncertified,
               rg.o.relerr_bound, rg.dq.relerr_bound, rg.dk.relerr_bound);
      }
      if (okr) aa_oracle_result_free(&rr);
      if (okt) aa_oracle_result_free(&rt);
      if (okg) aa_oracle_result_free(&rg);
      drop(&c);
    }
  printf("%d passed, %d failed\n", n_pass, n_fail);
  return aa_test_finish("toracle_cuda");
}
