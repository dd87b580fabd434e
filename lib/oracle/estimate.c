/* attnacc: the MPFR oracle path's running time estimated from the problem size (a pure function: no clock). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "oracle.h"

/* Model: the MPFR engine visits every (query, key) pair of every head in
   its row pass (S, P, O, dP, dS, dQ) and again in its column pass (dK, dV),
   each visit a few d-term exact dot products summed with mpfr_sum, so
     seconds = heads * n_q * n_k * (C0 + C1 * d) * prec_factor
   on one core. Masks are left out on purpose: the per-row work spans the
   key axis, and a causal n = 256, d = 64 problem measured 0.88 of the
   dense time. Calibration: `attnacc run --variant fa2 --oracle mpfr
   --threads 1` (Debian 12, gcc 12 -O2, one x86-64 core of the shared
   2-core build machine, the fastest of repeated runs): n = 128 and 256 at
   d = 64 took 112 us per
   pair (1.84 s, 7.39 s), n = 256 at d = 16 37 us, n = 512 at d = 32
   69 us, giving C0 = 10 us and C1 = 1.6 us; --prec 512 took 1.47 times
   --prec 128 (n = 256, d = 64), hence prec_factor = 1 + (prec - 128) / 800.
   The same runs on a loaded machine took up to 1.7 times longer: this is
   an order of magnitude to warn and refuse on, not a promise. */
#define EST_C0 10e-6
#define EST_C1 1.6e-6

double aa_oracle_mpfr_seconds(const aa_problem_t *pb, const aa_oracle_opts_t *opts) {
  if (pb == NULL) return 0;
  double prec = opts != NULL && opts->prec > 0 ? (double)opts->prec : 128.0;
  double f = 1.0 + (prec - 128.0) / 800.0;
  if (f < 0.9) f = 0.9;
  return (double)pb->heads * (double)pb->n_q * (double)pb->n_k * (EST_C0 + EST_C1 * (double)pb->d) * f;
}
