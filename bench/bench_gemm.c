/* attnacc: benchmark of aa_gemm on the five attention-backward shapes, against OpenBLAS sgemm when configure found
 * it. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "config.h"
#include "gemm.h"
#include "rng.h"
#ifdef AA_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* usage: bench_gemm [n [d [reps [models]]]]
   n: sequence length (default 8192), d: head dimension (default 128),
   reps: repetitions per measurement (default 5; the median is reported),
   models: comma-separated accumulation models (default fp32-seq,fp64-seq,fp32-pairwise,tc-k16-f25,tc-k8-f24).
   A closing table gives every model's throughput as a fraction of sgemm's,
   shape by shape, from the same run. */

typedef struct {
  const char *name; /* which product of the backward pass */
  size_t M, N, K;
  int tA, tB;
} shape_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* bf16-representable values of a unit normal (as attention operands are) */
static void fill(double *x, size_t n, aa_pcg64_t *rng) {
  for (size_t i = 0; i < n; i++) {
    float f = (float)aa_pcg64_normal(rng);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u &= 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    x[i] = f;
  }
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 8192, d = argc > 2 ? strtoull(argv[2], NULL, 0) : 128;
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  const char *models = argc > 4 ? argv[4] : "fp32-seq,fp64-seq,fp32-pairwise,tc-k16-f25,tc-k8-f24";
  if (n == 0 || d == 0 || reps <= 0) {
    fprintf(stderr, "usage: %s [n [d [reps [models]]]]\n", argv[0]);
    return 2;
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  printf("bench_gemm: n = %zu, d = %zu, %d repetitions (median), %d OpenMP thread(s), fp32-seq kernel %s\n", n, d,
         reps, threads, aa_gemm_kernel_name());
#ifdef AA_HAVE_OPENBLAS
  printf("OpenBLAS: %d thread(s), core %s, config %s\n", openblas_get_num_threads(), openblas_get_corename(),
         openblas_get_config());
#if defined(__x86_64__) && defined(__GNUC__)
  /* OpenBLAS 0.3.21 DYNAMIC_ARCH does not recognise some recent Xeons (and
     some virtual CPUs) and falls back to its SSE3 "Prescott" kernels, which
     makes the comparison meaningless. */
  __builtin_cpu_init();
  if (strcmp(openblas_get_corename(), "Prescott") == 0 && __builtin_cpu_supports("avx512f"))
    printf(
        "note: OpenBLAS chose its SSE3 kernels on an AVX-512 CPU; rerun with OPENBLAS_CORETYPE=SkylakeX for a fair "
        "comparison\n");
#endif
#else
  printf("OpenBLAS: not found by configure (no sgemm comparison)\n");
#endif

  /* Q, K, V, dO: n x d; P, dS: n x n (query rows, key columns). */
  const shape_t shapes[] = {
      {"S = Q K^T", n, n, d, 0, 1},   {"dP = dO V^T", n, n, d, 0, 1}, {"dV = P^T dO", n, d, n, 1, 0},
      {"dK = dS^T Q", n, d, n, 1, 0}, {"dQ = dS K", n, d, n, 0, 0},
  };
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  enum { MAXM = 16 };
  double ratio[5][MAXM];
  char mnames[MAXM][32];
  int nm = 0;
  double *Xd = malloc(n * d * sizeof(double)), *Yd = malloc(n * d * sizeof(double));
  double *Pd = malloc(n * n * sizeof(double)), *Cd = malloc(n * n * sizeof(double));
  double *t = malloc((size_t)reps * sizeof(double));
  if (!Xd || !Yd || !Pd || !Cd || !t) {
    fprintf(stderr, "bench_gemm: out of memory for n = %zu\n", n);
    return 1;
  }
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, 42, 7);
  fill(Xd, n * d, &rng);
  fill(Yd, n * d, &rng);
  fill(Pd, n * n, &rng);
#ifdef AA_HAVE_OPENBLAS
  float *Xf = malloc(n * d * sizeof(float)), *Yf = malloc(n * d * sizeof(float));
  float *Pf = malloc(n * n * sizeof(float)), *Cf = malloc(n * n * sizeof(float));
  if (!Xf || !Yf || !Pf || !Cf) {
    fprintf(stderr, "bench_gemm: out of memory for n = %zu\n", n);
    return 1;
  }
  for (size_t i = 0; i < n * d; i++)
    Xf[i] = (float)Xd[i], Yf[i] = (float)Yd[i];
  for (size_t i = 0; i < n * n; i++)
    Pf[i] = (float)Pd[i];
#endif

  printf("%-12s %6s %6s %6s  %-14s %10s %10s %12s %8s\n", "shape", "M", "N", "K", "model", "median_s", "GFLOP/s",
         "sgemm_GFLOP/s", "ratio");
  for (int s = 0; s < nshapes; s++) {
    const shape_t *sh = &shapes[s];
    /* operands: n x d shapes take X and Y; the n x n operand is P */
    const double *A = sh->K == d ? Xd : Pd, *B = Yd;
    size_t lda = sh->tA ? sh->M : sh->K, ldb = sh->tB ? sh->K : sh->N;
    double flops = 2.0 * (double)sh->M * (double)sh->N * (double)sh->K;
    double sgemm_gf = NAN;
#ifdef AA_HAVE_OPENBLAS
    {
      const float *Af = sh->K == d ? Xf : Pf, *Bf = Yf;
      cblas_sgemm(CblasRowMajor, sh->tA ? CblasTrans : CblasNoTrans, sh->tB ? CblasTrans : CblasNoTrans, (int)sh->M,
                  (int)sh->N, (int)sh->K, 1.0f, Af, (int)lda, Bf, (int)ldb, 0.0f, Cf, (int)sh->N); /* warm-up */
      for (int r = 0; r < reps; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, sh->tA ? CblasTrans : CblasNoTrans, sh->tB ? CblasTrans : CblasNoTrans, (int)sh->M,
                    (int)sh->N, (int)sh->K, 1.0f, Af, (int)lda, Bf, (int)ldb, 0.0f, Cf, (int)sh->N);
        t[r] = now() - t0;
      }
      double med = median(t, reps);
      sgemm_gf = flops / med * 1e-9;
      printf("%-12s %6zu %6zu %6zu  %-14s %10.4f %10.1f %12s %8s\n", sh->name, sh->M, sh->N, sh->K, "sgemm", med,
             sgemm_gf, "", "");
    }
#endif
    char list[256];
    snprintf(list, sizeof list, "%s", models);
    int mi = 0;
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m != NULL; m = strtok_r(NULL, ",", &save), mi++) {
      aa_accum_t model;
      if (aa_accum_from_name(&model, m) != AA_OK) {
        fprintf(stderr, "bench_gemm: unknown model '%s'\n", m);
        return 2;
      }
      int st = aa_gemm(Cd, sh->N, A, lda, sh->tA, B, ldb, sh->tB, sh->M, sh->N, sh->K, 0, model); /* warm-up */
      for (int r = 0; r < reps && st == AA_OK; r++) {
        double t0 = now();
        st = aa_gemm(Cd, sh->N, A, lda, sh->tA, B, ldb, sh->tB, sh->M, sh->N, sh->K, 0, model);
        t[r] = now() - t0;
      }
      if (st != AA_OK) {
        fprintf(stderr, "bench_gemm: aa_gemm failed: %s\n", aa_status_str(st));
        return 1;
      }
      double med = median(t, reps), gf = flops / med * 1e-9;
      printf("%-12s %6zu %6zu %6zu  %-14s %10.4f %10.1f %12.1f %8.3f\n", sh->name, sh->M, sh->N, sh->K, m, med, gf,
             sgemm_gf, gf / sgemm_gf);
      if (mi < MAXM) {
        ratio[s][mi] = gf / sgemm_gf;
        snprintf(mnames[mi], sizeof mnames[mi], "%s", m);
        if (mi >= nm) nm = mi + 1;
      }
      fflush(stdout);
    }
  }
  /* the same measurements, as fractions of sgemm's throughput (NaN without OpenBLAS) */
  printf("\nthroughput / sgemm throughput\n%-12s", "shape");
  for (int m = 0; m < nm; m++)
    printf(" %14s", mnames[m]);
  printf("\n");
  for (int s = 0; s < nshapes; s++) {
    printf("%-12s", shapes[s].name);
    for (int m = 0; m < nm; m++)
      printf(" %14.3f", ratio[s][m]);
    printf("\n");
  }
  free(Xd), free(Yd), free(Pd), free(Cd), free(t);
#ifdef AA_HAVE_OPENBLAS
  free(Xf), free(Yf), free(Pf), free(Cf);
#endif
  return 0;
}
