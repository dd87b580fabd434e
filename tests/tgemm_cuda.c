/* attnacc: tests of the GPU gemm models (aa_gemm_cuda, aa_gemm_cuda_dev) against the CPU's aa_gemm, bit for bit. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef AA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "gemm.h"
#include "rng.h"
#include "tests.h"

/* The CPU model (aa_gemm, itself tested against MPFR and the literal loops
   in tgemm and tgemm_tc) is the reference: for every model with a GPU path,
   every shape (odd M, N, K; K not a multiple of the block; K = 0), both
   transpositions, accumulate on and off, padded leading dimensions, and
   four kinds of values (BF16-like, FP32, wide exponent spreads reaching
   subnormals and overflow, and edge values: NaN, Inf, subnormals, zeros of
   both signs, 2^+-100), the GPU's C must equal the CPU's on every element
   of C's extent (the gaps between rows untouched), NaN payloads aside.
   Exits 77 without CUDA or a GPU. Ends with "N passed, N failed". */

static uint64_t seed;
static int n_pass, n_fail;

static unsigned long long bits64(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return (unsigned long long)u;
}

/* An fp32 value of the kind: 0 BF16-like (8-bit significands, exponents -8..8), 1 FP32 (-20..20), 2 FP32 with
   exponents -140..120 (subnormal products, overflow of the fp32 chain), 3 edge values; 1/16 signed zeros. */
static double edge_value(aa_pcg64_t *rng) {
  static const double edges[] = {INFINITY, -INFINITY, NAN,       0x1p-149,       -0x1p-149,       0x1.fffffcp-127,
                                 0x1p-126, 0x1p100,   -0x1p-100, 0x1.fffffep127, -0x1.fffffep127, 1.0};
  uint64_t r = aa_pcg64_next(rng) % 64;
  return r < sizeof edges / sizeof edges[0] ? edges[r] : (double)(float)ldexp((double)(r + 1), (int)(r % 9) - 4);
}
static double rand_value(aa_pcg64_t *rng, int kind) {
  uint64_t r = aa_pcg64_next(rng);
  if ((r & 15) == 0) return (r & 16) ? -0.0 : 0.0;
  if (kind == 3) return edge_value(rng);
  int bits = kind == 0 ? 8 : 24;
  uint64_t m = (UINT64_C(1) << (bits - 1)) | ((r >> 8) & ((UINT64_C(1) << (bits - 1)) - 1));
  int lo = kind == 0 ? -8 : kind == 1 ? -20 : -140, hi = kind == 0 ? 8 : kind == 1 ? 20 : 120;
  int e = lo + (int)(aa_pcg64_next(rng) % (uint64_t)(hi - lo + 1));
  double v = (double)(float)ldexp((double)m, e - (bits - 1)); /* subnormal fp32 values rounded as callers pass them */
  return (r >> 5) & 1 ? -v : v;
}

typedef struct {
  size_t M, N, K, lda, ldb, ldc;
  int tA, tB, acc, kind;
  double *A, *B, *C;
  size_t na, nb, nc;
} case_t;

static double *rand_array(aa_pcg64_t *rng, size_t n, int kind) {
  double *x = malloc((n ? n : 1) * sizeof *x);
  for (size_t i = 0; i < n; i++)
    x[i] = rand_value(rng, kind);
  return x;
}

static void case_make(case_t *c, aa_pcg64_t *rng, size_t M, size_t N, size_t K, int tA, int tB, int acc, int kind) {
  *c = (case_t){M, N, K, (tA ? M : K) + 3, (tB ? K : N) + 1, N + 2, tA, tB, acc, kind, NULL, NULL, NULL, 0, 0, 0};
  c->na = (tA ? K : M) * c->lda, c->nb = (tB ? N : K) * c->ldb, c->nc = M * c->ldc;
  c->A = rand_array(rng, c->na, kind);
  c->B = rand_array(rng, c->nb, kind);
  c->C = rand_array(rng, c->nc, kind); /* the gaps (ldc > N) too: they must come back unchanged */
}

static void case_free(case_t *c) {
  free(c->A), free(c->B), free(c->C);
}

/* Both C arrays over the whole extent; the first difference printed. */
static int compare(const case_t *c, aa_accum_t model, const double *got, const double *want, const char *path) {
  for (size_t x = 0; x < c->nc; x++)
    if (!aa_test_same(got[x], want[x])) {
      AA_FAIL("%s %s M=%zu N=%zu K=%zu tA=%d tB=%d acc=%d kind=%d: C[%zu][%zu] GPU %a (0x%016llx) CPU %a (0x%016llx) "
              "seed %llu",
              path, aa_accum_name(model), c->M, c->N, c->K, c->tA, c->tB, c->acc, c->kind, x / c->ldc, x % c->ldc,
              got[x], bits64(got[x]), want[x], bits64(want[x]), (unsigned long long)seed);
      return 0;
    }
  return 1;
}

static void count(int ok) {
  if (ok)
    n_pass++;
  else
    n_fail++;
}

/* The host-pointer path against aa_gemm on one case. */
static void run_host(const case_t *c, aa_accum_t model) {
  double *want = malloc(c->nc * sizeof *want + 1), *got = malloc(c->nc * sizeof *got + 1);
  memcpy(want, c->C, c->nc * sizeof *want);
  memcpy(got, c->C, c->nc * sizeof *got);
  int sw = aa_gemm(want, c->ldc, c->A, c->lda, c->tA, c->B, c->ldb, c->tB, c->M, c->N, c->K, c->acc, model);
  int sg = aa_gemm_cuda(got, c->ldc, c->A, c->lda, c->tA, c->B, c->ldb, c->tB, c->M, c->N, c->K, c->acc, model);
  int ok = sw == AA_OK && sg == AA_OK;
  if (!ok) AA_FAIL("%s M=%zu N=%zu K=%zu: status CPU %d GPU %d", aa_accum_name(model), c->M, c->N, c->K, sw, sg);
  ok = ok && compare(c, model, got, want, "host");
  printf("  %-16s M=%-4zu N=%-4zu K=%-4zu tA=%d tB=%d acc=%d kind=%d: %s\n", aa_accum_name(model), c->M, c->N, c->K,
         c->tA, c->tB, c->acc, c->kind, ok ? "same bits" : "DIFFERENT");
  count(ok);
  free(want), free(got);
}

#ifdef AA_HAVE_CUDA
static double *to_device(const double *x, size_t n) {
  double *d = NULL;
  if (cudaMalloc((void **)&d, (n ? n : 1) * sizeof *d) != cudaSuccess) return NULL;
  if (n) cudaMemcpy(d, x, n * sizeof *d, cudaMemcpyHostToDevice);
  return d;
}

/* The device-pointer path on one case against aa_gemm. */
static void run_dev(const case_t *c, aa_accum_t model) {
  double *want = malloc(c->nc * sizeof *want + 1), *got = malloc(c->nc * sizeof *got + 1);
  memcpy(want, c->C, c->nc * sizeof *want);
  aa_gemm(want, c->ldc, c->A, c->lda, c->tA, c->B, c->ldb, c->tB, c->M, c->N, c->K, c->acc, model);
  double *dA = to_device(c->A, c->na), *dB = to_device(c->B, c->nb), *dC = to_device(c->C, c->nc);
  int st = dA && dB && dC
               ? aa_gemm_cuda_dev(dC, c->ldc, dA, c->lda, c->tA, dB, c->ldb, c->tB, c->M, c->N, c->K, c->acc, model)
               : AA_ENOMEM;
  int ok = st == AA_OK && cudaMemcpy(got, dC, c->nc * sizeof *got, cudaMemcpyDeviceToHost) == cudaSuccess;
  if (!ok) AA_FAIL("dev %s: status %d", aa_accum_name(model), st);
  ok = ok && compare(c, model, got, want, "dev");
  printf("  dev %-12s M=%-4zu N=%-4zu K=%-4zu tA=%d tB=%d acc=%d kind=%d: %s\n", aa_accum_name(model), c->M, c->N,
         c->K, c->tA, c->tB, c->acc, c->kind, ok ? "same bits" : "DIFFERENT");
  count(ok);
  cudaFree(dA), cudaFree(dB), cudaFree(dC);
  free(want), free(got);
}
#endif

/* Every model with a GPU path must include fp32-seq and every AA_SUM_BLOCK row (issue 28 item 4). */
static void check_coverage(void) {
  for (int m = 0; m < AA_ACC_COUNT; m++) {
    int want = m == AA_ACC_FP32_SEQ || aa_accum_table[m].sum == AA_SUM_BLOCK;
    if (want && !aa_gemm_cuda_supports((aa_accum_t)m)) AA_FAIL("coverage: %s has no GPU path", aa_accum_name(m));
    count(!want || aa_gemm_cuda_supports((aa_accum_t)m));
  }
}

/* Arguments: invalid ones as aa_gemm (AA_EINVAL), a model without a GPU path AA_EUNSUPPORTED. */
static void check_args(void) {
  double a[4] = {1, 2, 3, 4}, c[4] = {0};
  int st = aa_gemm_cuda(c, 1, a, 2, 0, a, 2, 0, 2, 2, 2, 0, AA_ACC_TC_K16_F25); /* ldc < N */
  AA_CHECK(st == AA_EINVAL, "args: ldc < N gives %d, want AA_EINVAL", st);
  count(st == AA_EINVAL);
  st = aa_gemm_cuda(c, 2, a, 2, 0, a, 2, 0, 2, 2, 2, 0, AA_ACC_CDNA3_K8_F24);
  AA_CHECK(st == AA_EUNSUPPORTED, "args: cdna3-k8-f24 gives %d, want AA_EUNSUPPORTED", st);
  count(st == AA_EUNSUPPORTED);
}

int main(void) {
  seed = aa_test_seed("tgemm_cuda");
  if (!aa_gemm_cuda_supports(AA_ACC_FP32_SEQ)) {
    double c = 0, a = 1;
    int st = aa_gemm_cuda(&c, 1, &a, 1, 0, &a, 1, 0, 1, 1, 1, 0, AA_ACC_FP32_SEQ);
    printf("tgemm_cuda: not built with CUDA (aa_gemm_cuda gives %d, AA_EUNSUPPORTED = %d): skipped\n", st,
           AA_EUNSUPPORTED);
    return st == AA_EUNSUPPORTED ? AA_TEST_SKIP : 1;
  }
  if (aa_gemm_cuda_devices() == 0) {
    printf("tgemm_cuda: no CUDA device: skipped\n");
    return AA_TEST_SKIP;
  }
  check_coverage();
  check_args();
  static const size_t shapes[][3] = {{1, 1, 1},       {7, 5, 3},     {65, 33, 17}, {64, 64, 32}, {130, 67, 45},
                                     {100, 129, 100}, {3, 200, 257}, {33, 1, 70},  {5, 7, 0},    {70, 70, 130}};
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 28);
  for (int m = 0; m < AA_ACC_COUNT; m++) {
    if (!aa_gemm_cuda_supports((aa_accum_t)m)) continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int t = 0; t < 4; t++)
        for (int kind = 0; kind < 4; kind++) {
          case_t c;
          case_make(&c, &rng, shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1, (s + t + kind) & 1, kind);
          run_host(&c, (aa_accum_t)m);
          case_free(&c);
        }
#ifdef AA_HAVE_CUDA
    case_t c;
    case_make(&c, &rng, 67, 131, 77, 1, 0, 1, 3);
    run_dev(&c, (aa_accum_t)m);
    case_free(&c);
#endif
  }
  printf("seed %llu\n%d passed, %d failed\n", (unsigned long long)seed, n_pass, n_fail);
  return n_fail ? 1 : 0;
}
