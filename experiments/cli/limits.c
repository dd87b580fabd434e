/* attnacc: resource limits the front end checks before work starts: available memory and the MPFR oracle's time. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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
  /* Per element of q and of k (in doubles): the inputs (q, dO; k, v), the
     oracle's three copies of o, dq (dk, dv) and its workspace, about 10;
     each output set about 4 more (o, dq; dk, dv and the emulation's
     accumulators). Measured peak resident sizes at n = 4096, d = 128
     (524288 elements of q and of k): `attnacc run --variant fa2` (fa2 and
     naive-bf16, 2 sets) 138 MB, formula 151 MB; a table4 cell of one
     recipe 109 MB without and 126 MB with the oracle cache, formula 117 MB. */
  long double eq = (long double)heads * n_q * d, ek = (long double)kv_heads * n_k * d;
  long double b = 8.0L * (eq + ek) * (10.0L + 4.0L * (long double)sets);
  if (!(b < 1.8e19L)) return 0;
  *out = (uint64_t)b;
  return 1;
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
