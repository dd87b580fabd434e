/* attnacc: benchmark of the exhaustive exp map over all 2^32 FP32 bit patterns, against a plain libm exp2f loop. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "exp.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* usage: bench_exp [SPEC [KEYS]]: SPEC a construction ("schraudolph-bf16"),
   KEYS how many bit patterns from the lowest key (default all 2^32). */
int main(int argc, char **argv) {
  const char *spec = argc > 1 ? argv[1] : "schraudolph-bf16";
  uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : (UINT64_C(1) << 32);
  if (n == 0 || n > (UINT64_C(1) << 32)) n = UINT64_C(1) << 32;
  aa_exp_t e;
  aa_error_t err;
  if (aa_exp_parse(&e, spec, &err) != AA_OK) {
    fprintf(stderr, "bench_exp: %s\n", err.msg);
    return 2;
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  printf("bench_exp: %s over %llu FP32 bit patterns, %d thread(s)\n", spec, (unsigned long long)n, threads);
  aa_exp_map_t m;
  aa_exp_map_opts_t o = {0, 4096, 0, 0.0f};
  double t0 = now();
  int st = aa_exp_map_keys(&m, &e, 1, 0, (uint32_t)(n - 1), &o, &err);
  double t1 = now();
  if (st != AA_OK) {
    fprintf(stderr, "bench_exp: %s\n", err.msg);
    return 1;
  }
  /* the baseline: only libm exp2f on the same inputs, in the same blocks */
  double acc = 0;
  double t2 = now();
#pragma omp parallel for reduction(+ : acc) schedule(static)
  for (int64_t b = 0; b < (int64_t)((n + 4095) / 4096); b++) {
    float s = 0;
    uint64_t k0 = (uint64_t)b * 4096, k1 = k0 + 4096 < n ? k0 + 4096 : n;
    for (uint64_t k = k0; k < k1; k++) {
      float y = exp2f(aa_exp_unkey((uint32_t)k));
      s += y == y && y < INFINITY ? y * 0x1p-100f : 0.0f;
    }
    acc += s;
  }
  double t3 = now();
  printf("  map:        %.2f s, %.3g inputs/s (valid %llu, nan %llu, max rel err %.4g)\n", t1 - t0,
         (double)n / (t1 - t0), (unsigned long long)m.valid, (unsigned long long)m.cls_count[AA_EXP_CLS_NAN],
         m.max_rel_err);
  printf("  exp2f loop: %.2f s, %.3g inputs/s (checksum %g)\n", t3 - t2, (double)n / (t3 - t2), acc);
  printf("  map / exp2f time ratio: %.2f\n", (t1 - t0) / (t3 - t2));
  return 0;
}
