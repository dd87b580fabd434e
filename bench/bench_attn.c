/* attnacc: benchmark of whole emulated recipes (forward + backward), side by side, on one head of BF16 normal inputs.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn.h"
#include "bench-util.h"
#include "gemm.h"
#include "rng.h"

/* usage: bench_attn [n [d [reps [recipes]]]]
   n: sequence length (default 8192), d: head dimension (default 128),
   reps: runs per recipe (default 1; the median is reported; the
   recipes alternate within each repetition), recipes:
   comma-separated presets (default fa2,fa2-h100); each line gives the
   time relative to the first recipe's (ratio of the medians, and the
   median over repetitions of the ratio within each). */

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 8192, d = argc > 2 ? strtoull(argv[2], NULL, 0) : 128;
  int reps = argc > 3 ? atoi(argv[3]) : 1;
  const char *recipes = argc > 4 ? argv[4] : "fa2,fa2-h100";
  if (n == 0 || d == 0 || reps <= 0 || reps > 99) {
    fprintf(stderr, "usage: %s [n [d [reps [recipes]]]]\n", argv[0]);
    return 2;
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  printf("bench_attn: n = %zu, d = %zu, 1 head, BF16 N(0,1) inputs (seed 1), %d run(s) (median), %d OpenMP "
         "thread(s), gemm kernel %s, %s\n",
         n, d, reps, threads, aa_gemm_kernel_name(), bench_clock_name());
  aa_tensor_t q = {0}, k = {0}, v = {0}, dO = {0};
  size_t shape[3] = {1, n, d};
  aa_tensor_t *ts[4] = {&q, &k, &v, &dO};
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, 1, 3);
  for (int i = 0; i < 4; i++) {
    if (aa_tensor_alloc(ts[i], 3, shape, AA_FMT_FP64) != AA_OK) {
      fprintf(stderr, "bench_attn: out of memory for n = %zu\n", n);
      return 1;
    }
    for (size_t e = 0; e < n * d; e++)
      ts[i]->data[e] = aa_pcg64_normal(&rng);
    aa_tensor_round(ts[i], AA_FMT_BF16);
  }
  aa_problem_t pb;
  aa_problem_init(&pb, n, n, d, 1, 1);
  printf("%-12s %10s %10s %10s %10s %12s\n", "recipe", "forward_s", "backward_s", "total_s", "vs_first",
         "median_ratio");
  enum { MAXR = 8 };
  aa_recipe_t rs[MAXR];
  char names[MAXR][64];
  int nr = 0;
  char list[512];
  snprintf(list, sizeof list, "%s", recipes);
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name != NULL && nr < MAXR;
       name = strtok_r(NULL, ",", &save), nr++) {
    aa_error_t err;
    if (aa_recipe_preset(&rs[nr], name, &err) != AA_OK) {
      fprintf(stderr, "bench_attn: %s\n", err.msg);
      return 2;
    }
    snprintf(names[nr], sizeof names[nr], "%s", name);
  }
  /* repetitions interleave the recipes, so that a change of machine load
     between them affects every recipe alike */
  static double t[MAXR][100], f[MAXR][100], b[MAXR][100];
  for (int rep = 0; rep < reps; rep++)
    for (int i = 0; i < nr; i++) {
      aa_attn_result_t res;
      aa_error_t err;
      /* the library reads no clock: the forward alone (dO NULL), then the whole run */
      double t0 = bench_now();
      int st = aa_attn_run(&res, &pb, &rs[i], &q, &k, &v, NULL, &err);
      double t1 = bench_now();
      if (st == AA_OK) aa_attn_result_free(&res);
      if (st == AA_OK) st = aa_attn_run(&res, &pb, &rs[i], &q, &k, &v, &dO, &err);
      t[i][rep] = bench_now() - t1;
      if (st != AA_OK) {
        fprintf(stderr, "bench_attn: %s: %s\n", names[i], err.msg);
        return 1;
      }
      f[i][rep] = t1 - t0, b[i][rep] = t[i][rep] - f[i][rep];
      aa_attn_result_free(&res);
    }
  /* the ratio to the first recipe within each repetition, then its median:
     a load change between repetitions cancels out */
  static double ratio[MAXR][100];
  for (int i = 0; i < nr; i++) {
    for (int rep = 0; rep < reps; rep++)
      ratio[i][rep] = t[i][rep] / t[0][rep];
    qsort(ratio[i], (size_t)reps, sizeof ratio[i][0], bench_cmp_double);
  }
  double first = 0;
  for (int i = 0; i < nr; i++) {
    qsort(t[i], (size_t)reps, sizeof t[i][0], bench_cmp_double);
    qsort(f[i], (size_t)reps, sizeof f[i][0], bench_cmp_double);
    qsort(b[i], (size_t)reps, sizeof b[i][0], bench_cmp_double);
    double med = t[i][reps / 2];
    if (i == 0) first = med;
    printf("%-12s %10.3f %10.3f %10.3f %10.2f %12.2f\n", names[i], f[i][reps / 2], b[i][reps / 2], med, med / first,
           ratio[i][reps / 2]);
  }
  for (int i = 0; i < 4; i++)
    aa_tensor_free(ts[i]);
  return 0;
}
