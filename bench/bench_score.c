/* attnacc: benchmark of `attnacc score`: cold (oracle computed), warm (oracle read from --cache) and --rows K, with
 * where the time of a cold score goes (oracle, cache key and read, naive reference, comparison). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "attnacc.h"
#include "npy.h"
#include "sweep.h"

static const char *const usage =
    "usage: bench_score [--reps R] [--rows K] [--cli PATH] [--phases] [B,H,N,D ...]\n"
    "  times `attnacc score` on BF16 standard-normal q, k, v, do and outputs ([B*H, N, D], hnd: the problem of\n"
    "  [B, H, N, D]; no mask; --no-fail:\n"
    "  the values only set the time of the comparison) in a temporary folder, R times each (medians):\n"
    "    cold-def  --cache in a fresh folder, the default rule (expect: the oracle and the expect recipe run and "
    "are\n"
    "              stored; builds before 2 Dec 2026 ran the naive reference too); warm-def the same read from "
    "--cache\n"
    "    cold      --cache in a fresh folder (the oracle computed and stored), rule fa (the naive reference runs)\n"
    "    cold-ar   the same with --rule abs-rel (no naive reference)\n"
    "    warm      the oracle read from the --cache folder, rule fa; warm-ar with --rule abs-rel\n"
    "    rows      --rows K (default 64: o, dq of K rows, dk, dv of one kv head) without a cache, rule fa\n"
    "  --phases: also the library's steps in this process (oracle, cache key, cache read, naive reference,\n"
    "  comparison), to show where a cold score spends its time\n"
    "  shapes: default 2,8,1024,128 and 1,16,4096,64; --cli: the command (default experiments/attnacc, or\n"
    "  ATTNACC_CLI); threads: OMP_NUM_THREADS; report the machine's load beside the numbers\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* q, k, v, do and o, dq, dk, dv of [B, H, N, D], folded to [B*H, N, D], as BF16 normal draws (stream i of seed 7)
   into dir; t gets q, k, v, do. */
static int write_inputs(const char *dir, const size_t shp[4], aa_tensor_t t[4]) {
  static const char *const names[8] = {"q", "k", "v", "do", "o", "dq", "dk", "dv"};
  size_t fold[3] = {shp[0] * shp[1], shp[2], shp[3]};
  for (int i = 0; i < 8; i++) {
    aa_tensor_t x;
    aa_pcg64_t rng;
    aa_error_t err = {{0}};
    char path[4096];
    if (aa_tensor_alloc(&x, 3, fold, AA_FMT_BF16) != AA_OK) return 1;
    aa_rng_derive(&rng, 7, (const uint64_t[]){(uint64_t)i}, 1);
    for (size_t e = 0, n = aa_tensor_numel(&x); e < n; e++)
      x.data[e] = (double)aa_bf16_rne((float)aa_pcg64_normal(&rng));
    snprintf(path, sizeof path, "%s/%s.npy", dir, names[i]);
    if (aa_npy_write(path, &x, AA_FMT_BF16, &err) != AA_OK) {
      fprintf(stderr, "bench_score: %s\n", err.msg);
      aa_tensor_free(&x);
      return 1;
    }
    if (i < 4)
      t[i] = x;
    else
      aa_tensor_free(&x);
  }
  return 0;
}

/* User + system CPU seconds of the children waited for so far. */
static double child_cpu(void) {
  struct rusage u;
  getrusage(RUSAGE_CHILDREN, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* One timed command line (its output discarded): wall seconds, and its CPU seconds in *cpu (a measure that the
   other processes of a loaded machine disturb less); -1 when it failed. */
static double timed(const char *cmd, double *cpu) {
  double t0 = now(), c0 = child_cpu();
  int rc = system(cmd);
  double s = now() - t0;
  *cpu = child_cpu() - c0;
  if (rc != 0) fprintf(stderr, "bench_score: failed (status %d): %s\n", rc, cmd);
  return rc == 0 ? s : -1;
}

typedef struct {
  const char *cli, *dir;
  char cache[4200];
  size_t rows;
  int reps;
} bench_t;

/* The median wall seconds of R runs of score with extra options, and their median CPU seconds in *cpu; fresh: an
   empty cache folder before each. */
static double score_median(const bench_t *b, const char *extra, int fresh, double *cpu) {
  double v[64], c[64];
  int n = 0;
  for (int r = 0; r < b->reps && r < 64; r++) {
    char cmd[9000];
    if (fresh) {
      snprintf(cmd, sizeof cmd, "rm -rf '%s'", b->cache);
      if (system(cmd) != 0) return -1;
    }
    snprintf(cmd, sizeof cmd, "'%s' score --inputs '%s' --grads '%s' --layout hnd --no-fail %s >/dev/null 2>&1",
             b->cli, b->dir, b->dir, extra);
    if ((v[n] = timed(cmd, &c[n])) < 0) return -1;
    n++;
  }
  *cpu = median(c, n);
  return median(v, n);
}

/* The library's steps of a cold score in this process: oracle, cache key, cache put and get, naive, the default
   rule's recipe (fa2, emulated and compared), comparison. */
static void phases(const aa_tensor_t t[4], const size_t shp[4], const char *cache) {
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t r, hit;
  aa_eval_variant_t v = {0}, nv = {0}, ev = {0};
  aa_attn_result_t nres, eres;
  aa_recipe_t er;
  aa_hash128_t key;
  aa_error_t err = {{0}};
  aa_tensor_t g[5] = {t[0], t[0], t[1], t[2], {0}};
  double t0;
  aa_problem_init(&pb, shp[2], shp[2], shp[3], shp[0] * shp[1], shp[0] * shp[1]);
  aa_oracle_opts_init(&oo);
  oo.target = aa_score_oracle_target(AA_FMT_BF16); /* what a score of these BF16 outputs asks for */
  t0 = now();
  if (aa_oracle_run(&r, &pb, &t[0], &t[1], &t[2], &t[3], &oo, &err) != AA_OK) {
    fprintf(stderr, "bench_score: %s\n", err.msg);
    return;
  }
  printf("  phase oracle        %8.3f s\n", now() - t0);
  t0 = now();
  aa_oracle_cache_key(&key, &pb, &t[0], &t[1], &t[2], &t[3], &oo, NULL);
  printf("  phase cache key     %8.3f s\n", now() - t0);
  t0 = now();
  aa_oracle_cache_put(cache, &key, &r, NULL);
  printf("  phase cache put     %8.3f s\n", now() - t0);
  t0 = now();
  if (aa_oracle_cache_get(&hit, cache, &key, NULL) == AA_OK) aa_oracle_result_free(&hit);
  printf("  phase cache get     %8.3f s\n", now() - t0);
  t0 = now();
  if (aa_eval_naive(&nv, &nres, AA_FMT_BF16, &pb, &t[0], &t[1], &t[2], &t[3], &r, NULL) == AA_OK)
    aa_attn_result_free(&nres);
  printf("  phase naive ref     %8.3f s\n", now() - t0);
  t0 = now();
  if (aa_eval_expect_recipe(&er, NULL, AA_FMT_BF16, NULL) == AA_OK &&
      aa_eval_run(&ev, &eres, &er, &pb, &t[0], &t[1], &t[2], &t[3], &r, NULL, NULL) == AA_OK)
    aa_attn_result_free(&eres);
  printf("  phase expect recipe %8.3f s (%s emulated and compared)\n", now() - t0, ev.variant);
  t0 = now();
  aa_eval_given(&v, g, &r, NULL, NULL);
  printf("  phase compare       %8.3f s (o, dq, dk, dv)\n", now() - t0);
  aa_eval_variant_free(&v);
  aa_eval_variant_free(&nv);
  aa_eval_variant_free(&ev);
  aa_oracle_result_free(&r);
}

/* Every timing of one shape B,H,N,D. */
static int bench_shape(bench_t *b, const size_t shp[4], int with_phases) {
  char dir[] = "/tmp/bench_score.XXXXXX", extra[4400], cmd[4400];
  aa_tensor_t t[4] = {{0}};
  int rc = 1;
  if (mkdtemp(dir) == NULL || write_inputs(dir, shp, t)) return 1;
  b->dir = dir;
  snprintf(b->cache, sizeof b->cache, "%s/cache", dir);
  printf("[%zu, %zu, %zu, %zu] (%d reps, medians; OMP_NUM_THREADS=%s)\n", shp[0], shp[1], shp[2], shp[3], b->reps,
         getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "unset");
  /* the default rule (expect, no --rule) first, as the headline; then cold-ar before cold: its empty cache would
     otherwise drop the naive entry that cold (rule fa) leaves for warm */
  static const struct {
    const char *what, *rule, *why;
    int fresh; /* 1: an empty cache before each run (cold); -1: no cache (--rows) */
  } runs[] = {
      {"cold-def", NULL, "default rule (expect): oracle + expect recipe (the naive reference too before 2 Dec)", 1},
      {"warm-def", NULL, "default rule, everything from --cache", 0},
      {"cold-ar ", "abs-rel", "rule abs-rel: no naive reference", 1},
      {"cold    ", "fa", "rule fa: oracle + naive reference", 1},
      {"warm    ", "fa", "oracle and naive errors from --cache, rule fa", 0},
      {"warm-ar ", "abs-rel", "oracle from --cache, rule abs-rel", 0},
      {"rows    ", "fa", "no cache, rule fa", -1},
  };
  rc = 0;
  for (size_t i = 0; i < sizeof runs / sizeof runs[0] && rc == 0; i++) {
    double wall, cpu;
    char rule[64] = "";
    if (runs[i].rule != NULL) snprintf(rule, sizeof rule, "--rule %s", runs[i].rule);
    if (runs[i].fresh < 0)
      snprintf(extra, sizeof extra, "--rows %zu %s", b->rows, rule);
    else
      snprintf(extra, sizeof extra, "--cache '%s' %s", b->cache, rule);
    if ((wall = score_median(b, extra, runs[i].fresh > 0, &cpu)) < 0)
      rc = 1;
    else if (runs[i].fresh < 0)
      printf("  %s %8.3f s wall %8.3f s cpu   (--rows %zu of %zu, %s)\n", runs[i].what, wall, cpu, b->rows, shp[2],
             runs[i].why);
    else
      printf("  %s %8.3f s wall %8.3f s cpu   (%s)\n", runs[i].what, wall, cpu, runs[i].why);
  }
  if (with_phases) phases(t, shp, b->cache);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&t[i]);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}

int main(int argc, char **argv) {
  bench_t b = {getenv("ATTNACC_CLI") ? getenv("ATTNACC_CLI") : "experiments/attnacc", NULL, "", 64, 3};
  size_t shapes[16][4] = {{2, 8, 1024, 128}, {1, 16, 4096, 64}};
  int nshapes = 0, with_phases = 0, rc = 0;
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it is measured */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      b.reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
      b.rows = (size_t)strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--cli") && i + 1 < argc)
      b.cli = argv[++i];
    else if (!strcmp(argv[i], "--phases"))
      with_phases = 1;
    else if (nshapes < 16 && sscanf(argv[i], "%zu,%zu,%zu,%zu", &shapes[nshapes][0], &shapes[nshapes][1],
                                    &shapes[nshapes][2], &shapes[nshapes][3]) == 4)
      nshapes++;
    else {
      fputs(usage, stderr);
      return 2;
    }
  }
  if (b.reps < 1 || b.reps > 64 || b.rows < 1 || access(b.cli, X_OK) != 0) {
    fprintf(stderr, "bench_score: need 1 <= R <= 64, K >= 1 and an executable %s\n%s", b.cli, usage);
    return 2;
  }
  for (int i = 0; i < (nshapes ? nshapes : 2); i++)
    rc |= bench_shape(&b, shapes[i], with_phases);
  return rc;
}
