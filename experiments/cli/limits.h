/* attnacc: resource limits the front end checks before work starts: available memory and the MPFR oracle's time. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_LIMITS_H
#define AA_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "attnacc.h"
#include "cli/cli.h"

/* Memory the command may still use, in bytes: MemAvailable of /proc/meminfo
   (ATTNACC_MEMINFO names another file of that format: a test hook), else
   the free pages; the smaller of that and a cgroup v2 limit's headroom
   (memory.max - memory.current) when there is one. 0 when unknown. *src
   says which ("MemAvailable", "cgroup memory.max", "free pages"). */
uint64_t lim_mem_available(const char **src);

/* Bytes an attention problem holds at once (lib/problem/estimate.c says how measured):
   the inputs q, k, v, dO, the oracle's three copies of o, dq, dk, dv (val,
   fp32, bf16, in doubles) and its workspace, plus `sets` output sets of the
   emulation (one per variant held at once). 1, or 0 with *out untouched
   when the size is beyond any machine. */
int lim_attn_bytes(uint64_t *out, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads, size_t sets);

/* The MPFR oracle's wall-clock limit without --force, in seconds. */
#define LIM_MPFR_SECONDS 3600.0
/* The default of --max-seconds: the fast oracle and the emulated pipelines
   of one problem, estimated wall-clock seconds. */
#define LIM_RUN_SECONDS 3600.0

/* The memory limit of a command's arguments a: --max-memory, else the
   smaller of aa_problem_mem_default and lim_mem_available (*src says
   which; *mem 0 when unknown). 0, or 2 after a message on a bad value. */
int lim_mem_limit(double *mem, const char **src, const char *cmd, const cli_args_t *a);

/* The resource estimate of lib/problem.h (aa_problem_cost) of a problem
   and `sets` output sets, checked against lim_mem_limit and
   --max-seconds (default LIM_RUN_SECONDS; --force lifts it) of the
   command's arguments a, before anything large is allocated: 0 (after a
   note on stderr when the time estimate exceeds a minute), or 2 after a
   message naming the estimate and the limit. threads: as lim_threads. */
int lim_check(const char *cmd, const cli_args_t *a, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads,
              size_t sets, int threads);

/* Threads one oracle run gets: threads (> 0), else OpenMP's maximum, at
   most the online cores. */
int lim_threads(int threads);
/* "27.5 GiB", "141 MiB", "512 bytes" (powers of 1024) */
void lim_bytes(char *buf, size_t cap, double bytes);
/* "3.1 hours", "12 minutes", "40 seconds" */
void lim_duration(char *buf, size_t cap, double seconds);

#endif
