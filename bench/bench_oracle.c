/* attnacc: benchmark of the oracle's fast path (tiled kernel against the earlier row-by-row kernel, side by side)
 * with a plain-MPFR estimate. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "fmt.h"
#include "oracle.h"
#include "oracle/oracle-impl.h"
#include "rng.h"

static const char *const usage =
    "usage: bench_oracle [--kernel tiled|dd|rows|both|all] [--target T] [--d D] [--reps R] [--rows-max N]\n"
    "                    [--no-mpfr] [--only] [N ...]\n"
    "  one head, d = 128, BF16 standard-normal q, k, v, dO, no mask; forward + backward of the fast path\n"
    "  N: sequence lengths added to 1024 2048 4096 8192 (e.g. 32768); --only: just the N given\n"
    "  --kernel: tiled (current: binary64 tier at targets >= 2^-34), dd (tiled, all double-double), rows (the\n"
    "            earlier row-by-row kernel), both (tiled and rows, default) or all, run alternately R times\n"
    "            each (default 1); medians of wall and user CPU seconds\n"
    "  --target: the oracle's target accuracy (default 2^-48; e.g. 0x1p-32)\n"
    "  --d: head dimension (default 128)\n"
    "  --rows-max: skip the row-by-row kernel above this N (default 8192)\n"
    "  --no-mpfr: skip the plain-MPFR measurement at n = 256 (the estimate column)\n"
    "  threads: OMP_NUM_THREADS (results do not depend on it)\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double user_cpu(void) { /* all threads of the process */
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec;
}

typedef struct {
  double wall, user;
  size_t rec, unc;
  double bound;  /* largest relerr_bound over O, LSE, dQ, dK, dV */
  uint64_t hash; /* of the FP32 roundings of all outputs, to show that both kernels agree */
} meas_t;

static int run(meas_t *m, size_t n, size_t d, aa_oracle_path_t path, int kernel, double target) {
  aa_problem_t pb;
  aa_problem_init(&pb, n, n, d, 1, 1);
  size_t sh[3] = {1, n, d};
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
  o.path = path;
  o.target = target;
  aa_oracle_result_t r;
  aa_error_t err = {{0}};
  double t0 = now(), c0 = user_cpu();
  int st = aa_oracle_run_kernel(&r, &pb, &t[0], &t[1], &t[2], &t[3], &o, kernel, &err);
  m->wall = now() - t0;
  m->user = user_cpu() - c0;
  if (st != AA_OK) {
    fprintf(stderr, "bench_oracle: %s\n", err.msg);
  } else {
    m->rec = r.n_recomputed;
    m->unc = r.n_uncertified;
    const aa_oracle_out_t *outs[5] = {&r.o, &r.lse, &r.dq, &r.dk, &r.dv};
    uint64_t h = UINT64_C(1469598103934665603);
    m->bound = 0;
    for (int k = 0; k < 5; k++) {
      m->bound = fmax(m->bound, outs[k]->relerr_bound);
      size_t ne = aa_tensor_numel(&outs[k]->fp32);
      for (size_t e = 0; e < ne; e++) {
        uint64_t b;
        memcpy(&b, &outs[k]->fp32.data[e], sizeof b);
        h = (h ^ b) * UINT64_C(1099511628211);
      }
    }
    m->hash = h;
    aa_oracle_result_free(&r);
  }
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&t[i]);
  return st;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void machine(void) {
  char model[256] = "unknown", line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f != NULL) {
    while (fgets(line, sizeof line, f) != NULL)
      if (strncmp(line, "model name", 10) == 0) {
        char *p = strchr(line, ':');
        if (p != NULL) {
          p += 1 + (p[1] == ' ');
          p[strcspn(p, "\n")] = 0;
          snprintf(model, sizeof model, "%s", p);
        }
        break;
      }
    fclose(f);
  }
  double load[3] = {0, 0, 0};
  f = fopen("/proc/loadavg", "r");
  if (f != NULL) {
    if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = load[1] = load[2] = 0;
    fclose(f);
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  printf("machine: %s; %ld cores online; %d threads; load average %.2f %.2f %.2f\n", model,
         sysconf(_SC_NPROCESSORS_ONLN), threads, load[0], load[1], load[2]);
}

int main(int argc, char **argv) {
  size_t d = 128, nmp = 256, ns[32];
  int nn = 0, reps = 1, want[3] = {1, 0, 1}, do_mpfr = 1, only = 0;
  double target = AA_ORACLE_TARGET_DEFAULT;
  static const int kern[3] = {AA_OR_KERNEL_TILED, AA_OR_KERNEL_TILED_DD, AA_OR_KERNEL_ROWS};
  static const char *const kname[3] = {"tiled", "dd", "rows"};
  {
    size_t def[4] = {1024, 2048, 4096, 8192};
    for (int i = 0; i < 4; i++)
      ns[nn++] = def[i];
  }
  size_t rows_max = 8192;
  for (int a = 1; a < argc; a++) {
    if (strcmp(argv[a], "--kernel") == 0 && a + 1 < argc) {
      const char *k = argv[++a];
      int all = strcmp(k, "all") == 0;
      want[0] = strcmp(k, "tiled") == 0 || strcmp(k, "both") == 0 || all;
      want[1] = strcmp(k, "dd") == 0 || all;
      want[2] = strcmp(k, "rows") == 0 || strcmp(k, "both") == 0 || all;
      if (!want[0] && !want[1] && !want[2]) {
        fputs(usage, stderr);
        return 2;
      }
    } else if (strcmp(argv[a], "--target") == 0 && a + 1 < argc) {
      target = strtod(argv[++a], NULL);
    } else if (strcmp(argv[a], "--d") == 0 && a + 1 < argc) {
      d = (size_t)strtoul(argv[++a], NULL, 10);
    } else if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
      reps = atoi(argv[++a]);
    } else if (strcmp(argv[a], "--rows-max") == 0 && a + 1 < argc) {
      rows_max = (size_t)strtoul(argv[++a], NULL, 10);
    } else if (strcmp(argv[a], "--no-mpfr") == 0) {
      do_mpfr = 0;
    } else if (strcmp(argv[a], "--only") == 0) {
      only = 1;
    } else if (argv[a][0] != '-' && nn < 32 && strtoul(argv[a], NULL, 10) > 0) {
      ns[nn++] = (size_t)strtoul(argv[a], NULL, 10);
    } else {
      fputs(usage, stderr);
      return 2;
    }
  }
  if (reps < 1 || reps > 99) reps = 1;
  if (!(target >= AA_ORACLE_TARGET_MIN && target <= AA_ORACLE_TARGET_MAX) || d < 1 || d > 1024) {
    fputs(usage, stderr);
    return 2;
  }
  if (only) { /* drop the default lengths */
    memmove(ns, ns + 4, (size_t)(nn - 4) * sizeof ns[0]);
    nn -= 4;
  }
  printf("bench_oracle: d = %zu, one head, BF16 standard-normal q, k, v, dO, dense (no mask); fast path, forward + "
         "backward; target %a\n",
         d, target);
  machine();
  meas_t m;
  double mp = NAN, mpu = NAN;
  if (do_mpfr) {
    if (run(&m, nmp, d, AA_ORACLE_MPFR, AA_OR_KERNEL_TILED, target) != AA_OK) return 1;
    mp = m.wall;
    mpu = m.user;
    printf("plain MPFR path measured at n = %zu: %.2f s wall, %.2f s user; the estimate columns scale them by "
           "(n/%zu)^2\n",
           nmp, m.wall, m.user, nmp);
  }
  printf("tiled = current kernel (binary64 tier at targets >= 2^-34), dd = tiled all double-double, rows = earlier "
         "row-by-row kernel; medians of %d run(s); user = CPU seconds of all threads\n",
         reps);
  printf("%7s %6s %10s %10s %8s %8s %10s %16s %13s %13s\n", "n", "kernel", "wall (s)", "user (s)", "recomp", "uncert",
         "max bound", "fp32 hash", "mpfr est wall", "mpfr est user");
  for (int i = 0; i < nn; i++) {
    double w[3][100], u[3][100];
    meas_t last[3];
    int kdo[3] = {want[0], want[1], want[2] && ns[i] <= rows_max};
    for (int rep = 0; rep < reps; rep++)
      for (int k = 0; k < 3; k++) { /* alternate the kernels so that all see the same load */
        if (!kdo[k]) continue;
        if (run(&last[k], ns[i], d, AA_ORACLE_FAST, kern[k], target) != AA_OK) return 1;
        w[k][rep] = last[k].wall;
        u[k][rep] = last[k].user;
      }
    double sc = ((double)ns[i] / (double)nmp) * ((double)ns[i] / (double)nmp), mw[3] = {0, 0, 0}, mu[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
      if (!kdo[k]) continue;
      mw[k] = median(w[k], reps);
      mu[k] = median(u[k], reps);
      printf("%7zu %6s %10.2f %10.2f %8zu %8zu %10.3g %016llx %13.0f %13.0f\n", ns[i], kname[k], mw[k], mu[k],
             last[k].rec, last[k].unc, last[k].bound, (unsigned long long)last[k].hash, mp * sc, mpu * sc);
    }
    for (int k = 1; k < 3; k++)
      if (kdo[0] && kdo[k])
        printf("%7zu  ratio %s/tiled: wall %.2f, user %.2f; fp32 roundings %s\n", ns[i], kname[k], mw[k] / mw[0],
               mu[k] / mu[0], last[0].hash == last[k].hash ? "identical" : "DIFFER");
    fflush(stdout);
  }
  return 0;
}
