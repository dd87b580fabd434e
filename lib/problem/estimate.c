/* attnacc: the memory and time an attention problem of given sizes needs, estimated before anything is allocated. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <unistd.h>

#include "problem.h"

/* Memory, per element of q and of k (in doubles): the inputs (q, dO; k, v),
   the oracle's three copies of o, dq (dk, dv) and its workspace, about 10;
   each output set about 4 more (o, dq; dk, dv and the emulation's
   accumulators). Measured peak resident sizes at n = 4096, d = 128
   (524288 elements of q and of k): `attnacc run --variant fa2` (fa2 and
   naive-bf16, 2 sets) 138 MB, formula 151 MB; a table4 cell of one recipe
   109 MB without and 126 MB with the oracle cache, formula 117 MB. */
#define EST_ORACLE_DOUBLES 10.0
#define EST_SET_DOUBLES 4.0

/* Time: the fast oracle and every emulated pipeline visit each (query, key)
   pair of every query head: a fixed cost per pair (exp, the dS chain, the
   bounds) plus a few d-term dot products, so each costs heads * n_q * n_k *
   (A + B d); masks are left out, as in the mpfr estimate
   (lib/oracle/estimate.c), because the kernels' loops span the key tiles
   either way. Calibration, 4 December 2026: `attnacc run --variant fa2 --n
   2048 --heads 1 --threads 1 --json` (Debian 12, gcc 12 -O2, one core of the
   2-core machine, idle) at d = 32, 64, 128, 256: the fast oracle at its
   default target 2^-48 took 144, 241, 373, 643 ns per pair (about 95 + 2.15 d;
   at score's 2^-32, 116, 165, 241, 478 ns), fa2 35, 41, 74, 100 ns (about 30 +
   0.28 d). The constants below round those up. Check: a default `attnacc
   score` of [1, 16, 4096, 64] (one recipe emulated, 2 sets counted) is
   estimated at 43 s on two threads and took 26.9 s (bench/bench_score, median
   of 3): the estimate errs high, as a limit should. The constants before
   (6.5 and 3.5 ns per pair and dimension, measured at d = 512 on a loaded
   machine) said 116 s for it. */
#define EST_ORACLE_PAIR_NS 100e-9
#define EST_ORACLE_NS 2.2e-9
#define EST_SET_PAIR_NS 30e-9
#define EST_SET_NS 0.3e-9

void aa_problem_cost(aa_problem_cost_t *c, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads,
                     size_t sets) {
  double eq = (double)heads * (double)n_q * (double)d, ek = (double)kv_heads * (double)n_k * (double)d;
  c->bytes = 8.0 * (eq + ek) * (EST_ORACLE_DOUBLES + EST_SET_DOUBLES * (double)sets);
  double pairs = (double)heads * (double)n_q * (double)n_k, dd = (double)d;
  c->seconds = pairs * (EST_ORACLE_PAIR_NS + EST_ORACLE_NS * dd + (EST_SET_PAIR_NS + EST_SET_NS * dd) * (double)sets);
}

double aa_problem_mem_default(void) {
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || psize <= 0) return 0;
  return 0.75 * (double)pages * (double)psize;
}
