/* attnacc: benchmark of aa_gemm on the five attention-backward shapes, against OpenBLAS sgemm when configure found
 * it. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench-util.h"
#include "config.h"
#include "gemm.h"
#include "rng.h"
#ifdef AA_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* usage: bench_gemm [n [d [reps [models]]]]
   n: sequence length (default 8192), d: head dimension (default 128),
   reps: repetitions (default 5; medians are reported), models:
   comma-separated accumulation models (default: every row of
   aa_accum_table, in its order). Each repetition runs sgemm
   and then every model once, so that load changes on a shared machine
   touch them alike; the closing tables give, shape by shape, the median
   over repetitions of each model's throughput as a fraction of sgemm's
   and of fp32-seq's in the same repetition. */

enum { MAXM = 16, MAXREPS = 99 };
_Static_assert((int)AA_ACC_COUNT <= (int)MAXM, "bench_gemm: the default runs every model of aa_accum_table");

typedef struct {
  const char *name; /* which product of the backward pass */
  size_t M, N, K;
  int tA, tB;
} shape_t;

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

static void print_load(const char *when) {
  double l[3];
  if (getloadavg(l, 3) == 3) printf("load average %s: %.2f %.2f %.2f\n", when, l[0], l[1], l[2]);
}

/* OpenBLAS 0.3.21 DYNAMIC_ARCH does not recognise some recent Xeons (and
   some virtual CPUs) and falls back to its SSE3 "Prescott" kernels, which
   makes the comparison meaningless; and its idle threads spin for 2^28
   cycles (OPENBLAS_THREAD_TIMEOUT, default 28) after each call, taking the
   cores from the aa_gemm call that follows it. It reads both variables
   when it is loaded, so the benchmark runs itself again with
   OPENBLAS_CORETYPE=SkylakeX (when it chose Prescott on an AVX-512 CPU)
   and OPENBLAS_THREAD_TIMEOUT=4 (once: the variables are then set). */
static void openblas_setup(char **argv) {
#if defined(AA_HAVE_OPENBLAS) && defined(__linux__)
  int again = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (strcmp(openblas_get_corename(), "Prescott") == 0 && __builtin_cpu_supports("avx512f") &&
      getenv("OPENBLAS_CORETYPE") == NULL)
    again |= setenv("OPENBLAS_CORETYPE", "SkylakeX", 1) == 0;
#endif
  if (getenv("OPENBLAS_THREAD_TIMEOUT") == NULL) again |= setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0;
  if (again) {
    fflush(stdout);
    execv("/proc/self/exe", argv); /* returns only on failure: measure as we are */
  }
#else
  (void)argv;
#endif
#if defined(AA_HAVE_OPENBLAS) && defined(__x86_64__) && defined(__GNUC__)
  if (strcmp(openblas_get_corename(), "Prescott") == 0 && __builtin_cpu_supports("avx512f"))
    printf(
        "note: OpenBLAS chose its SSE3 kernels on an AVX-512 CPU; rerun with OPENBLAS_CORETYPE=SkylakeX for a fair "
        "comparison\n");
#endif
}

typedef struct {
  double *Xd, *Yd, *Pd, *Cd;
  float *Xf, *Yf, *Pf, *Cf;
  size_t d;
} operands_t;

/* seconds of one sgemm of shape sh (NaN without OpenBLAS) */
static double time_sgemm(const operands_t *op, const shape_t *sh) {
#ifdef AA_HAVE_OPENBLAS
  const float *Af = sh->K == op->d ? op->Xf : op->Pf;
  size_t lda = sh->tA ? sh->M : sh->K, ldb = sh->tB ? sh->K : sh->N;
  double t0 = bench_now();
  cblas_sgemm(CblasRowMajor, sh->tA ? CblasTrans : CblasNoTrans, sh->tB ? CblasTrans : CblasNoTrans, (int)sh->M,
              (int)sh->N, (int)sh->K, 1.0f, Af, (int)lda, op->Yf, (int)ldb, 0.0f, op->Cf, (int)sh->N);
  return bench_now() - t0;
#else
  (void)op, (void)sh;
  return NAN;
#endif
}

/* seconds of one aa_gemm of shape sh, or -1 when it fails */
static double time_model(const operands_t *op, const shape_t *sh, aa_accum_t model) {
  /* operands: n x d shapes take X and Y; the n x n operand is P */
  const double *A = sh->K == op->d ? op->Xd : op->Pd;
  size_t lda = sh->tA ? sh->M : sh->K, ldb = sh->tB ? sh->K : sh->N;
  double t0 = bench_now();
  int st = aa_gemm(op->Cd, sh->N, A, lda, sh->tA, op->Yd, ldb, sh->tB, sh->M, sh->N, sh->K, 0, model);
  if (st != AA_OK) {
    fprintf(stderr, "bench_gemm: aa_gemm failed: %s\n", aa_status_str(st));
    return -1;
  }
  return bench_now() - t0;
}

static int alloc_operands(operands_t *op, size_t n, size_t d) {
  op->d = d;
  op->Xd = malloc(n * d * sizeof(double)), op->Yd = malloc(n * d * sizeof(double));
  op->Pd = malloc(n * n * sizeof(double)), op->Cd = malloc(n * n * sizeof(double));
  op->Xf = malloc(n * d * sizeof(float)), op->Yf = malloc(n * d * sizeof(float));
  op->Pf = malloc(n * n * sizeof(float)), op->Cf = malloc(n * n * sizeof(float));
  if (!op->Xd || !op->Yd || !op->Pd || !op->Cd || !op->Xf || !op->Yf || !op->Pf || !op->Cf) return -1;
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, 42, 7);
  fill(op->Xd, n * d, &rng);
  fill(op->Yd, n * d, &rng);
  fill(op->Pd, n * n, &rng);
  for (size_t i = 0; i < n * d; i++)
    op->Xf[i] = (float)op->Xd[i], op->Yf[i] = (float)op->Yd[i];
  for (size_t i = 0; i < n * n; i++)
    op->Pf[i] = (float)op->Pd[i];
  return 0;
}

static void free_operands(operands_t *op) {
  free(op->Xd), free(op->Yd), free(op->Pd), free(op->Cd);
  free(op->Xf), free(op->Yf), free(op->Pf), free(op->Cf);
}

/* ratio[s][m]: median over repetitions of model m's throughput over sgemm's
   (vs = -1) or over model vs's, from the same repetition */
static void print_ratios(const char *title, const shape_t *shapes, int nshapes, char names[][32], int nm,
                         double t[][MAXM + 1][MAXREPS], int reps, int vs) {
  printf("\n%s\n%-12s", title, "shape");
  for (int m = 0; m < nm; m++)
    printf(" %14s", names[m]);
  printf("\n");
  for (int s = 0; s < nshapes; s++) {
    printf("%-12s", shapes[s].name);
    for (int m = 0; m < nm; m++) {
      double r[MAXREPS];
      for (int i = 0; i < reps; i++)
        r[i] = t[s][vs + 1][i] / t[s][m + 1][i];
      printf(" %14.3f", bench_median(r, reps));
    }
    printf("\n");
  }
}

static double t_all[5][MAXM + 1][MAXREPS]; /* seconds: [shape][0: sgemm, 1 + m: model m][repetition] */

static int run(size_t n, size_t d, int reps, const aa_accum_t *ms, char names[][32], int nm, int seq) {
  /* Q, K, V, dO: n x d; P, dS: n x n (query rows, key columns). */
  const shape_t shapes[] = {
      {"S = Q K^T", n, n, d, 0, 1},   {"dP = dO V^T", n, n, d, 0, 1}, {"dV = P^T dO", n, d, n, 1, 0},
      {"dK = dS^T Q", n, d, n, 1, 0}, {"dQ = dS K", n, d, n, 0, 0},
  };
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  operands_t op;
  if (alloc_operands(&op, n, d) != 0) {
    fprintf(stderr, "bench_gemm: out of memory for n = %zu\n", n);
    return 1;
  }
  printf("%-12s %6s %6s %6s  %-14s %10s %10s\n", "shape", "M", "N", "K", "model", "median_s", "GFLOP/s");
  for (int s = 0; s < nshapes; s++) {
    const shape_t *sh = &shapes[s];
    double flops = 2.0 * (double)sh->M * (double)sh->N * (double)sh->K;
    time_sgemm(&op, sh); /* warm-up */
    for (int m = 0; m < nm; m++)
      if (time_model(&op, sh, ms[m]) < 0) return 1;
    for (int r = 0; r < reps; r++) {
      t_all[s][0][r] = time_sgemm(&op, sh);
      for (int m = 0; m < nm; m++)
        if ((t_all[s][m + 1][r] = time_model(&op, sh, ms[m])) < 0) return 1;
    }
    for (int m = -1; m < nm; m++) {
      double med = bench_median(t_all[s][m + 1], reps);
      printf("%-12s %6zu %6zu %6zu  %-14s %10.4f %10.1f\n", sh->name, sh->M, sh->N, sh->K, m < 0 ? "sgemm" : names[m],
             med, flops / med * 1e-9);
    }
    fflush(stdout);
  }
  print_ratios(
      "throughput / sgemm throughput (median over repetitions of the ratio within each; NaN without OpenBLAS)",
      shapes, nshapes, names, nm, t_all, reps, -1);
  if (seq >= 0)
    print_ratios("throughput / fp32-seq throughput (median over repetitions of the ratio within each)", shapes,
                 nshapes, names, nm, t_all, reps, seq);
  print_load("at end");
  free_operands(&op);
  return 0;
}

int main(int argc, char **argv) {
  openblas_setup(argv);
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 8192, d = argc > 2 ? strtoull(argv[2], NULL, 0) : 128;
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  const char *models = argc > 4 ? argv[4] : NULL;
  if (n == 0 || d == 0 || reps <= 0 || reps > MAXREPS) {
    fprintf(stderr, "usage: %s [n [d [reps (1 to %d) [models]]]]\n", argv[0], MAXREPS);
    return 2;
  }
  aa_accum_t ms[MAXM];
  char names[MAXM][32], list[512] = "";
  int nm = 0, seq = -1;
  for (int m = 0; models == NULL && m < AA_ACC_COUNT; m++) /* the default list: the table's names */
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", m ? "," : "", aa_accum_table[m].name);
  if (models != NULL) snprintf(list, sizeof list, "%s", models);
  for (char *save = NULL, *m = strtok_r(list, ",", &save); m != NULL; m = strtok_r(NULL, ",", &save)) {
    if (nm == MAXM) {
      fprintf(stderr, "bench_gemm: more than %d models\n", MAXM);
      return 2;
    }
    if (aa_accum_from_name(&ms[nm], m) != AA_OK) {
      fprintf(stderr, "bench_gemm: unknown model '%s'\n", m);
      return 2;
    }
    snprintf(names[nm], sizeof names[nm], "%s", m);
    if (ms[nm] == AA_ACC_FP32_SEQ && seq < 0) seq = nm;
    nm++;
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  printf("bench_gemm: n = %zu, d = %zu, %d repetitions (median), %d OpenMP thread(s), fp32-seq kernel %s, %s\n", n, d,
         reps, threads, aa_gemm_kernel_name(), bench_clock_name());
#ifdef AA_HAVE_OPENBLAS
  printf("OpenBLAS: %d thread(s), core %s, config %s, OPENBLAS_THREAD_TIMEOUT %s\n", openblas_get_num_threads(),
         openblas_get_corename(), openblas_get_config(),
         getenv("OPENBLAS_THREAD_TIMEOUT") ? getenv("OPENBLAS_THREAD_TIMEOUT") : "unset");
#else
  printf("OpenBLAS: not found by configure (no sgemm comparison)\n");
#endif
  print_load("at start");
  return run(n, d, reps, ms, names, nm, seq);
}
