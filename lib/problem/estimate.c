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
   pair of every query head with a few d-term dot products, so each costs
   heads * n_q * n_k * d times a constant; masks are left out, as in the
   mpfr estimate (lib/oracle/estimate.c), because the kernels' loops span
   the key tiles either way. Calibration: `attnacc run --n 1024 --threads 1
   --json` (Debian 12, gcc 12 -O2, one core of the shared 2-core build
   machine): the fast oracle took 3.50 s at d = 512 (6.5 ns per
   pair-dimension), fa2 plus naive-bf16 3.8 s (about 3.5 ns each); d = 128
   gave 1.77 s in all against 1.8 s from the formula. */
#define EST_ORACLE_NS 6.5e-9
#define EST_SET_NS 3.5e-9

void aa_problem_cost(aa_problem_cost_t *c, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads,
                     size_t sets) {
  double eq = (double)heads * (double)n_q * (double)d, ek = (double)kv_heads * (double)n_k * (double)d;
  c->bytes = 8.0 * (eq + ek) * (EST_ORACLE_DOUBLES + EST_SET_DOUBLES * (double)sets);
  c->seconds = eq * (double)n_k * (EST_ORACLE_NS + EST_SET_NS * (double)sets);
}

double aa_problem_mem_default(void) {
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || psize <= 0) return 0;
  return 0.75 * (double)pages * (double)psize;
}
