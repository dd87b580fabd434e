/* attnacc: resource limits the front end checks before work starts: available memory and the MPFR oracle's time. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli/cli.h"
#include "cli/limits.h"

/* The value of "Key:" in a /proc/meminfo-style file, in bytes; 0 if absent. */
static uint64_t meminfo_value(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  char line[256];
  size_t kl = strlen(key);
  uint64_t v = 0;
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
      unsigned long long kb = strtoull(line + kl + 1, NULL, 10);
      v = (uint64_t)kb * 1024u;
      break;
    }
  fclose(f);
  return v;
}

/* A number in a one-line file ("max" or unreadable: 0). */
static uint64_t file_number(const char *path) {
  FILE *f = fopen(path, "r");
  char line[64];
  uint64_t v = 0;
  if (f == NULL) return 0;
  if (fgets(line, sizeof line, f) != NULL && line[0] >= '0' && line[0] <= '9') v = strtoull(line, NULL, 10);
  fclose(f);
  return v;
}

uint64_t lim_mem_available(const char **src) {
  const char *path = getenv("ATTNACC_MEMINFO");
  uint64_t avail = meminfo_value(path != NULL ? path : "/proc/meminfo", "MemAvailable");
  const char *from = "MemAvailable";
  if (avail == 0 && path == NULL) {
    long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && psize > 0) avail = (uint64_t)pages * (uint64_t)psize;
    from = "free pages";
  }
  if (path == NULL) {
    /* A container's own limit is what the kernel enforces first. */
    uint64_t max = file_number("/sys/fs/cgroup/memory.max"), cur = file_number("/sys/fs/cgroup/memory.current");
    if (max > 0) {
      uint64_t room = max > cur ? max - cur : 0;
      if (avail == 0 || room < avail) {
        avail = room;
        from = "cgroup memory.max";
      }
    }
  }
  if (src != NULL) *src = from;
  return avail;
}

int lim_attn_bytes(uint64_t *out, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads, size_t sets) {
  aa_problem_cost_t c;
  aa_problem_cost(&c, n_q, n_k, d, heads, kv_heads, sets);
  if (!(c.bytes < 1.8e19)) return 0;
  *out = (uint64_t)c.bytes;
  return 1;
}

/* "BYTES[K|M|G|T]" (powers of 1024) into *out; 2 after a message. */
static int parse_bytes(double *out, const char *cmd, const char *s) {
  static const char suffix[] = "KMGT";
  char *end;
  double v = strtod(s, &end), m = 1;
  const char *x = *end != '\0' ? strchr(suffix, *end) : NULL;
  if (x != NULL && *x != '\0') {
    for (const char *p = suffix; p <= x; p++)
      m *= 1024.0;
    end++;
  }
  if (end == s || *end != '\0' || !(v > 0) || !(v * m < 1.8e19)) {
    cli_error(cmd, "--max-memory: '%s' is not a positive number of bytes (suffix K, M, G or T: powers of 1024)", s);
    return 2;
  }
  *out = v * m;
  return 0;
}

int lim_mem_limit(double *mem, const char **src, const char *cmd, const cli_args_t *a) {
  const char *s = cli_get(a, "max-memory");
  uint64_t avail;
  *src = "--max-memory";
  if (s != NULL) return parse_bytes(mem, cmd, s);
  avail = lim_mem_available(src);
  *mem = aa_problem_mem_default();
  if (avail > 0 && (*mem <= 0 || (double)avail < *mem))
    *mem = (double)avail;
  else
    *src = "3/4 of physical memory";
  return 0;
}

int lim_check(const char *cmd, const cli_args_t *a, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads,
              size_t sets, int threads) {
  aa_problem_cost_t c;
  const char *s, *src;
  double mem, secs = LIM_RUN_SECONDS, wall;
  int th = lim_threads(threads);
  char t[48], lim[48];
  aa_problem_cost(&c, n_q, n_k, d, heads, kv_heads, sets);
  if (lim_mem_limit(&mem, &src, cmd, a)) return 2;
  if ((s = cli_get(a, "max-seconds")) != NULL && cli_double(&secs, cmd, "max-seconds", s, 0, 1e300, 1)) return 2;
  if (mem > 0 && c.bytes > mem) {
    lim_bytes(t, sizeof t, c.bytes);
    lim_bytes(lim, sizeof lim, mem);
    cli_error(cmd,
              "problem too large: n_q = %zu, n_k = %zu, d = %zu, heads = %zu, kv_heads = %zu needs about %s "
              "(estimate), limit %s (%s): use a smaller problem or --max-memory BYTES",
              n_q, n_k, d, heads, kv_heads, t, lim, src);
    return 2;
  }
  wall = c.seconds / th;
  lim_duration(t, sizeof t, wall);
  lim_duration(lim, sizeof lim, secs);
  if (wall > secs && cli_get(a, "force") == NULL) {
    cli_error(cmd,
              "problem too slow: n_q = %zu, n_k = %zu, d = %zu, heads = %zu would take about %s on %d thread%s "
              "(estimate; limit %s, --max-seconds): use a smaller problem, more --threads, --max-seconds S or "
              "--force",
              n_q, n_k, d, heads, t, th, th == 1 ? "" : "s", lim);
    return 2;
  }
  /* with --oracle mpfr, cli_oracle_run's note on the mpfr oracle is the one that matters */
  if (wall > 60.0 && !((s = cli_get(a, "oracle")) != NULL && strcmp(s, "mpfr") == 0))
    fprintf(stderr,
            "attnacc %s: note: the oracle and %zu output set%s should take about %s on %d thread%s (estimate)\n", cmd,
            sets, sets == 1 ? "" : "s", t, th, th == 1 ? "" : "s");
  return 0;
}

int lim_threads(int threads) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef _OPENMP
  if (threads <= 0) threads = omp_get_max_threads();
#else
  threads = 1;
#endif
  /* more threads than cores do not run faster */
  if (cores > 0 && threads > cores) threads = (int)cores;
  return threads > 0 ? threads : 1;
}

void lim_bytes(char *buf, size_t cap, double b) {
  static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024.0 && u < 6) {
    b /= 1024.0;
    u++;
  }
  snprintf(buf, cap, u == 0 ? "%.0f %s" : "%.3g %s", b, unit[u]);
}

void lim_duration(char *buf, size_t cap, double s) {
  if (s >= 2 * 86400.0)
    snprintf(buf, cap, "%.3g days", s / 86400.0);
  else if (s >= 2 * 3600.0)
    snprintf(buf, cap, "%.3g hours", s / 3600.0);
  else if (s >= 120.0)
    snprintf(buf, cap, "%.3g minutes", s / 60.0);
  else
    snprintf(buf, cap, "%.2g seconds", s);
}
