/* attnacc: the clock and the median every benchmark of bench/ takes its times with. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_BENCH_UTIL_H
#define AA_BENCH_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock, or with ATTNACC_BENCH_CLOCK=cpu on the process's CPU-time clock: on a machine
   shared with other jobs a single-threaded run (OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1) then counts the work
   and not the time slices the others took. */
static inline double bench_now(void) {
  static int cpu = -1;
  if (cpu < 0) cpu = getenv("ATTNACC_BENCH_CLOCK") != NULL && strcmp(getenv("ATTNACC_BENCH_CLOCK"), "cpu") == 0;
  struct timespec ts;
  clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline const char *bench_clock_name(void) {
  const char *c = getenv("ATTNACC_BENCH_CLOCK");
  return c != NULL && strcmp(c, "cpu") == 0 ? "process CPU time" : "wall clock";
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of x[0..n) (the mean of the middle two when n is even), x left as it is; n <= 128. */
static inline double bench_median(const double *x, int n) {
  double t[128];
  if (n < 1 || n > 128) return NAN;
  memcpy(t, x, (size_t)n * sizeof *t);
  qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

#endif
