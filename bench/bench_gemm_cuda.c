/* attnacc: benchmark of the GPU gemm models (aa_gemm_cuda_dev) beside cuBLAS's BF16 tensor-core rate in the same run.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench-util.h"
#include "gemm.h"
#include "rng.h"

/* usage: bench/bench_gemm_cuda [M N K [REPS]]
   Without arguments: 4096 x 4096 x 128 (issue 28 item 12: >= 2 T multiply-adds/s for the tc models) and the
   attention shapes at n = 8192, d = 128 (S = Q K^T, dV = P^T dO, dQ = dS K). Operands are BF16 values held in
   doubles on the GPU, as a pipeline keeps them; the time is the median of REPS (default 5) calls of
   aa_gemm_cuda_dev after one warm-up, and the rate M N K / time. One line per model and shape, then cuBLAS's
   cublasGemmEx (BF16 in, FP32 compute, the tensor cores) on the same shape, loaded with dlopen (configure's path
   first) so the packed binaries need not carry cuBLAS's ~600 MB. */

typedef struct {
  const char *name;
  size_t M, N, K;
  int tA, tB;
} shape_t;

/* A device array of n BF16 values (as doubles) drawn from the normal distribution. */
static double *device_bf16(size_t n, uint64_t stream) {
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, 28, stream);
  double *h = malloc(n * sizeof *h), *d = NULL;
  if (h == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    float f = (float)aa_pcg64_normal(&rng);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u &= 0xffff0000u; /* truncated to BF16's 8 significant bits */
    memcpy(&f, &u, sizeof f);
    h[i] = f;
  }
  if (cudaMalloc((void **)&d, n * sizeof *d) != cudaSuccess ||
      cudaMemcpy(d, h, n * sizeof *d, cudaMemcpyHostToDevice) != cudaSuccess)
    d = NULL;
  free(h);
  return d;
}

/* Median seconds of one aa_gemm_cuda_dev, or -1 when it fails. */
static double time_model(const shape_t *s, double *C, const double *A, const double *B, aa_accum_t m, int reps) {
  size_t lda = s->tA ? s->M : s->K, ldb = s->tB ? s->K : s->N;
  double t[64];
  for (int r = -1; r < reps; r++) {
    double t0 = bench_now();
    if (aa_gemm_cuda_dev(C, s->N, A, lda, s->tA, B, ldb, s->tB, s->M, s->N, s->K, 0, m) != AA_OK) return -1;
    if (r >= 0) t[r] = bench_now() - t0;
  }
  return bench_median(t, reps);
}

/* cuBLAS through dlopen: the three functions the rate needs. */
typedef struct {
  void *lib;
  __typeof__(&cublasCreate_v2) create;
  __typeof__(&cublasDestroy_v2) destroy;
  __typeof__(&cublasGemmEx) gemm;
} cublas_t;

static int cublas_load(cublas_t *cb) {
  const char *paths[] = {AA_CUBLAS_PATH, "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  memset(cb, 0, sizeof *cb);
  for (size_t i = 0; i < sizeof paths / sizeof paths[0] && cb->lib == NULL; i++)
    if (paths[i][0] != '\0') cb->lib = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
  if (cb->lib == NULL) return -1;
  *(void **)&cb->create = dlsym(cb->lib, "cublasCreate_v2");
  *(void **)&cb->destroy = dlsym(cb->lib, "cublasDestroy_v2");
  *(void **)&cb->gemm = dlsym(cb->lib, "cublasGemmEx");
  return cb->create && cb->destroy && cb->gemm ? 0 : -1;
}

/* Median seconds of one BF16 x BF16 -> FP32 cublasGemmEx of the shape (the layout does not change the rate), or -1.
 */
static double time_cublas(const cublas_t *cb, const shape_t *s, int reps) {
  void *a = NULL, *b = NULL, *c = NULL;
  cublasHandle_t h = NULL;
  double t[64], res = -1;
  const float one = 1, zero = 0;
  int m = (int)s->M, n = (int)s->N, k = (int)s->K;
  if (cudaMalloc(&a, s->M * s->K * 2) == cudaSuccess && cudaMalloc(&b, s->K * s->N * 2) == cudaSuccess &&
      cudaMalloc(&c, s->M * s->N * 4) == cudaSuccess && cudaMemset(a, 0x3f, s->M * s->K * 2) == cudaSuccess &&
      cudaMemset(b, 0x3f, s->K * s->N * 2) == cudaSuccess && cb->create(&h) == CUBLAS_STATUS_SUCCESS) {
    int r;
    for (r = -1; r < reps; r++) {
      double t0 = bench_now();
      if (cb->gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_16BF, m, b, CUDA_R_16BF, k, &zero, c,
                   CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS ||
          cudaDeviceSynchronize() != cudaSuccess)
        break;
      if (r >= 0) t[r] = bench_now() - t0;
    }
    if (r == reps) res = bench_median(t, reps);
  }
  if (h) cb->destroy(h);
  cudaFree(a), cudaFree(b), cudaFree(c);
  return res;
}

static void bench_shape(const shape_t *s, int reps, const cublas_t *cb) {
  double *A = device_bf16(s->M * s->K, 1), *B = device_bf16(s->K * s->N, 2), *C = NULL;
  if (A == NULL || B == NULL || cudaMalloc((void **)&C, s->M * s->N * sizeof *C) != cudaSuccess) {
    printf("bench_gemm_cuda: %s: out of GPU memory\n", s->name);
    return;
  }
  double macs = (double)s->M * (double)s->N * (double)s->K;
  double tcb = cb->lib ? time_cublas(cb, s, reps) : -1;
  for (int m = 0; m < AA_ACC_COUNT; m++) {
    if (!aa_gemm_cuda_supports((aa_accum_t)m)) continue;
    double t = time_model(s, C, A, B, (aa_accum_t)m, reps);
    if (t < 0) {
      printf("bench_gemm_cuda: %-12s %5zu %5zu %5zu %-16s failed\n", s->name, s->M, s->N, s->K, aa_accum_name(m));
      continue;
    }
    printf("bench_gemm_cuda: %-12s %5zu %5zu %5zu %-16s %9.3f ms %7.3f T multiply-adds/s", s->name, s->M, s->N, s->K,
           aa_accum_name(m), 1e3 * t, macs / t * 1e-12);
    if (tcb > 0) printf("  (%.3f of cuBLAS BF16)", tcb / t);
    printf("\n");
  }
  if (tcb > 0)
    printf("bench_gemm_cuda: %-12s %5zu %5zu %5zu %-16s %9.3f ms %7.3f T multiply-adds/s\n", s->name, s->M, s->N,
           s->K, "cublas-bf16", 1e3 * tcb, macs / tcb * 1e-12);
  else
    printf("bench_gemm_cuda: %-12s cuBLAS BF16 rate not measured (%s)\n", s->name,
           cb->lib ? "cublasGemmEx failed" : "libcublas not found");
  fflush(stdout);
  cudaFree(A), cudaFree(B), cudaFree(C);
}

int main(int argc, char **argv) {
  if (aa_gemm_cuda_devices() == 0) {
    printf("bench_gemm_cuda: no CUDA device\n");
    return 77;
  }
  int reps = argc > 4 ? atoi(argv[4]) : 5;
  if (reps < 1 || reps > 64) reps = 5;
  cublas_t cb;
  cublas_load(&cb);
  struct cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
    printf("bench_gemm_cuda: device %s, %d SMs\n", p.name, p.multiProcessorCount);
  if (argc > 3) {
    shape_t s = {"custom", (size_t)atol(argv[1]), (size_t)atol(argv[2]), (size_t)atol(argv[3]), 0, 1};
    bench_shape(&s, reps, &cb);
    return 0;
  }
  const shape_t shapes[] = {
      {"4096^2x128", 4096, 4096, 128, 0, 1},
      {"S = Q K^T", 8192, 8192, 128, 0, 1},
      {"dV = P^T dO", 8192, 128, 8192, 1, 0},
      {"dQ = dS K", 8192, 128, 8192, 0, 0},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    bench_shape(&shapes[i], reps, &cb);
  return 0;
}
