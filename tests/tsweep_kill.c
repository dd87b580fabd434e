/* attnacc: resume after SIGKILL: a child runs the sweep and is killed mid-run, repeatedly; the resumed result equals
 * an uninterrupted run. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rng.h"
#include "sweep.h"
#include "tests.h"
#include "tsweep_synth.h"

#define DIR "tsweep_kill.dir"

static size_t count_done(const char *path) {
  char *s = aa_test_slurp(path);
  size_t n = 0;
  for (char *p = s; p && (p = strstr(p, "\n#done ")) != NULL; p++)
    n++;
  free(s);
  return n;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static int run(const aa_sweep_t *sw, const char *dir, int threads, tsw_ctx_t *ctx, aa_sweep_progress_t *pr,
               aa_error_t *err) {
  aa_sweep_opts_t o;
  aa_sweep_opts_init(&o);
  o.out_dir = dir;
  o.threads = threads;
  o.resume = 1;
  o.sync = 1; /* the real configuration: fsync after each cell */
  return aa_sweep_run(pr, sw, tsw_eval, ctx, &o, err);
}

int main(void) {
  uint64_t seed = aa_test_seed("tsweep_kill");
  if (system("rm -rf " DIR) != 0 || system("mkdir " DIR) != 0) return 99;
  aa_sweep_t *sw;
  aa_error_t err = {{0}};
  aa_sweep_progress_t pr;
  if (tsw_grid(&sw, &err)) {
    printf("FAIL tsweep_kill: grid: %s\n", err.msg);
    return 1;
  }
  int st = run(sw, DIR "/ref", 2, NULL, &pr, &err);
  AA_CHECK(st == AA_OK && pr.complete, "uninterrupted run: %d %s", st, err.msg);

  aa_pcg64_t rng;
  aa_rng_derive(&rng, seed, NULL, 0);
  const char *journal = DIR "/killed/journal-0-of-1.txt";
  size_t kills = 0, prev = 0;
  /* Kill at about 12, 24, 36, 48 finished cells, plus a random 0..15 ms, so
     the signal lands during evals, writes and fsyncs alike. */
  for (size_t target = 12; target < TSW_NCELLS - 6; target += 12) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 99;
    if (pid == 0) {
      tsw_ctx_t slow = {15000, -1};
      aa_sweep_progress_t cp;
      int cst = run(sw, DIR "/killed", 3, &slow, &cp, NULL);
      _exit(cst == AA_OK ? 0 : 3);
    }
    int waited = 0;
    while (count_done(journal) < target && waited < 30000) {
      sleep_us(2000);
      waited += 2;
    }
    sleep_us((long)(aa_pcg64_uniform(&rng) * 15000));
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    AA_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
             "kill round %zu: the child was not killed (status %d); target %zu cells", kills, status, target);
    size_t now = count_done(journal);
    printf("tsweep_kill: round %zu killed after %zu complete cells\n", kills, now);
    AA_CHECK(now >= prev && now < (size_t)TSW_NCELLS, "kill round %zu: %zu cells in the journal (before %zu)", kills,
             now, prev);
    AA_CHECK(access(DIR "/killed/results.csv", F_OK) != 0, "kill round %zu: results.csv exists after a kill", kills);
    prev = now;
    kills++;
  }
  st = run(sw, DIR "/killed", 3, NULL, &pr, &err);
  AA_CHECK(st == AA_OK && pr.complete && pr.skipped + pr.done == TSW_NCELLS && pr.skipped >= prev,
           "final resume: status %d (%s), skipped %zu, done %zu", st, err.msg, pr.skipped, pr.done);
  char *a = aa_test_slurp(DIR "/ref/results.canon.csv"), *b = aa_test_slurp(DIR "/killed/results.canon.csv");
  AA_CHECK(a && b && strcmp(a, b) == 0,
           "results.canon.csv after %zu kills and a resume differs from the uninterrupted run", kills);
  free(a);
  free(b);
  aa_sweep_free(sw);
  int rc = aa_test_finish("tsweep_kill");
  if (rc == 0 && system("rm -rf " DIR) != 0) return 99;
  return rc;
}
