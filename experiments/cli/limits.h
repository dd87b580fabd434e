/* attnacc: resource limits the front end checks before work starts: available memory and the MPFR oracle's time. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_LIMITS_H
#define AA_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "attnacc.h"

/* Memory the command may still use, in bytes: MemAvailable of /proc/meminfo
   (ATTNACC_MEMINFO names another file of that format: a test hook), else
   the free pages; the smaller of that and a cgroup v2 limit's headroom
   (memory.max - memory.current) when there is one. 0 when unknown. *src
   says which ("MemAvailable", "cgroup memory.max", "free pages"). */
uint64_t lim_mem_available(const char **src);

/* Bytes an attention problem holds at once (limits.c says how measured):
   the inputs q, k, v, dO, the oracle's three copies of o, dq, dk, dv (val,
   fp32, bf16, in doubles) and its workspace, plus `sets` output sets of the
   emulation (one per variant held at once). 1, or 0 with *out untouched
   when the size is beyond any machine. */
int lim_attn_bytes(uint64_t *out, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads, size_t sets);

/* The MPFR oracle's wall-clock limit without --force, in seconds. */
#define LIM_MPFR_SECONDS 3600.0

/* Threads one oracle run gets: threads (> 0), else OpenMP's maximum, at
   most the online cores. */
int lim_threads(int threads);
/* "3.1 hours", "12 minutes", "40 seconds" */
void lim_duration(char *buf, size_t cap, double seconds);

#endif
