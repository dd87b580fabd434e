/* attnacc: benchmark of the oracle: fast path at n = 1024..8192 (d = 128, one head, BF16 normal inputs) against a plain-MPFR estimate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oracle.h"
#include "rng.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* bfloat16 value by round-to-nearest-even of the float bit pattern */
static double bf16(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&f, &u, sizeof f);
  return f;
}

static int run(size_t n, size_t d, int causal, aa_oracle_path_t path, double *secs, size_t *nrec, size_t *nunc) {
  aa_problem_t pb;
  aa_problem_init(&pb, n, n, d, 1, 1);
  pb.causal = causal;
  size_t sh[3] = {1, n, d};
  aa_tensor_t t[4];
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, 42, n);
  for (int i = 0; i < 4; i++) {
    if (aa_tensor_alloc(&t[i], 3, sh, AA_FMT_BF16) != AA_OK) return 1;
    for (size_t e = 0; e < n * d; e++) t[i].data[e] = bf16(aa_pcg64_normal(&rng));
  }
  aa_oracle_opts_t o;
  aa_oracle_opts_init(&o);
  o.path = path;
  aa_oracle_result_t r;
  aa_error_t err = {{0}};
  double t0 = now();
  int st = aa_oracle_run(&r, &pb, &t[0], &t[1], &t[2], &t[3], &o, &err);
  *secs = now() - t0;
  if (st != AA_OK) {
    fprintf(stderr, "bench_oracle: %s\n", err.msg);
  } else {
    *nrec = r.n_recomputed;
    *nunc = r.n_uncertified;
    aa_oracle_result_free(&r);
  }
  for (int i = 0; i < 4; i++) aa_tensor_free(&t[i]);
  return st;
}

int main(int argc, char **argv) {
  size_t d = 128, nmp = 256;
  size_t ns[5] = {1024, 2048, 4096, 8192, 0};
  int nn = 4;
  if (argc > 1) ns[nn++] = (size_t)strtoul(argv[1], NULL, 10);
  const char *th = getenv("OMP_NUM_THREADS");
  printf("bench_oracle: d = %zu, one head, BF16 standard-normal q, k, v, dO, dense (no mask); threads %s\n", d,
         th ? th : "all");
  double tmp;
  size_t rec, unc;
  if (run(nmp, d, 0, AA_ORACLE_MPFR, &tmp, &rec, &unc) != AA_OK) return 1;
  printf("plain MPFR path measured at n = %zu: %.2f s; estimates below scale it by (n/%zu)^2\n", nmp, tmp, nmp);
  printf("%8s %12s %12s %12s %18s\n", "n", "fast (s)", "recomputed", "uncertified", "mpfr estimate (s)");
  for (int i = 0; i < nn; i++) {
    double s;
    if (run(ns[i], d, 0, AA_ORACLE_FAST, &s, &rec, &unc) != AA_OK) return 1;
    double est = tmp * ((double)ns[i] / (double)nmp) * ((double)ns[i] / (double)nmp);
    printf("%8zu %12.2f %12zu %12zu %18.0f\n", ns[i], s, rec, unc, est);
    fflush(stdout);
  }
  return 0;
}
