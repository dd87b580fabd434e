/* attnacc: benchmark of the oracle's fast path on the GPU beside the CPU, one head, d = 128, dense, forward and
 * backward. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "fmt.h"
#include "oracle.h"
#include "oracle/oracle-impl.h"
#include "rng.h"

/* usage: bench_oracle_cuda [N_GPU [N_CPU [E]]] (defaults 32768, 8192 and the oracle's default target; E: target
   2^-E for every run): the GPU at N_GPU and N_CPU, the CPU's
   default tiled kernel at N_CPU on all OpenMP threads (OMP_NUM_THREADS); BF16 standard-normal q, k, v, dO (seed
   42). The work grows as n^2, so the line also gives the CPU time scaled to N_GPU by (N_GPU / N_CPU)^2. At equal n
   it checks that both give the same FP32 roundings (a hash over every output). */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double target = AA_ORACLE_TARGET_DEFAULT;

static int run(double *secs, uint64_t *hash, aa_oracle_device_t *where, size_t n, aa_oracle_device_t dev) {
  size_t d = 128, sh[3] = {1, n, d};
  aa_problem_t pb;
  aa_problem_init(&pb, n, n, d, 1, 1);
  aa_tensor_t t[4];
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, 42, n);
  for (int i = 0; i < 4; i++) {
    if (aa_tensor_alloc(&t[i], 3, sh, AA_FMT_BF16) != AA_OK) return 1;
    for (size_t e = 0; e < n * d; e++)
      t[i].data[e] = (double)aa_bf16_rne((float)aa_pcg64_normal(&rng));
  }
  aa_oracle_opts_t o;
  aa_oracle_opts_init(&o);
  o.device = dev;
  o.target = target;
  aa_oracle_result_t res;
  aa_error_t err = {{0}};
  double t0 = now();
  int st = aa_oracle_run(&res, &pb, &t[0], &t[1], &t[2], &t[3], &o, &err);
  *secs = now() - t0;
  if (st != AA_OK) {
    fprintf(stderr, "bench_oracle_cuda: n %zu: %s\n", n, err.msg);
    return 1;
  }
  uint64_t h = 1469598103934665603u;
  const aa_oracle_out_t *outs[5] = {&res.o, &res.lse, &res.dq, &res.dk, &res.dv};
  for (int u = 0; u < 5; u++)
    for (size_t e = 0; e < aa_tensor_numel(&outs[u]->fp32); e++) {
      float f = (float)outs[u]->fp32.data[e];
      uint32_t b;
      memcpy(&b, &f, 4);
      h = (h ^ b) * 1099511628211u;
    }
  *hash = h;
  *where = res.device;
  printf("  %s n %zu: %.2f s, %zu elements recomputed in MPFR, %zu uncertified\n", aa_oracle_device_name(res.device),
         n, *secs, res.n_recomputed, res.n_uncertified);
  fflush(stdout);
  aa_oracle_result_free(&res);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&t[i]);
  return 0;
}

int main(int argc, char **argv) {
  size_t ng = argc > 1 ? strtoul(argv[1], NULL, 10) : 32768, nc = argc > 2 ? strtoul(argv[2], NULL, 10) : 8192;
  if (argc > 3) target = ldexp(1.0, -atoi(argv[3]));
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  double tg, tgc, tc;
  uint64_t hg, hgc, hc;
  aa_oracle_device_t wg, wgc, wc;
  if (!aa_oracle_cuda_available()) {
    printf("bench_oracle_cuda: no CUDA build or no GPU\n");
    return 77;
  }
  /* a line after each run, so that a run cut short still tells what it measured */
  if (run(&tgc, &hgc, &wgc, nc, AA_ORACLE_DEVICE_CUDA) || run(&tc, &hc, &wc, nc, AA_ORACLE_DEVICE_CPU) ||
      run(&tg, &hg, &wg, ng, AA_ORACLE_DEVICE_CUDA))
    return 1;
  printf("oracle fast path, 1 head d 128 dense fwd+bwd, target %a: GPU (%s) n %zu %.2f s; GPU n %zu %.2f s, CPU (%s, "
         "%d threads, tiled) n %zu %.2f s (%.1fx), fp32 roundings %s; CPU scaled to n %zu: %.1f s (%.0fx the GPU)\n",
         target, aa_oracle_device_name(wg), ng, tg, nc, tgc, aa_oracle_device_name(wc), threads, nc, tc, tc / tgc,
         hgc == hc ? "identical" : "DIFFER", ng, tc * ((double)ng / (double)nc) * ((double)ng / (double)nc),
         tc * ((double)ng / (double)nc) * ((double)ng / (double)nc) / tg);
  return hgc == hc ? 0 : 1;
}
