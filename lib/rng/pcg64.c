/* attnacc: pcg64 (PCG "setseq 128" with XSL-RR 128->64 output): seeding, next, uniform and normal doubles. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "rng.h"

/* 128-bit LCG multiplier 2549297995355413924 * 2^64 + 4865540595714422341
   ([pcg]). */
#define AA_PCG64_MULT                                                                                                \
  ((((unsigned __int128)UINT64_C(2549297995355413924)) << 64) | (unsigned __int128)UINT64_C(4865540595714422341))

static inline void pcg64_step(aa_pcg64_t *rng) {
  rng->state = rng->state * AA_PCG64_MULT + rng->inc;
}

void aa_pcg64_seed(aa_pcg64_t *rng, aa_u128_t initstate, aa_u128_t initseq) {
  rng->state = 0;
  rng->inc = (initseq << 1) | 1u;
  pcg64_step(rng);
  rng->state += initstate;
  pcg64_step(rng);
}

uint64_t aa_pcg64_next(aa_pcg64_t *rng) {
  /* Unlike pcg32, the 128-bit variant outputs from the new state. */
  pcg64_step(rng);
  uint64_t x = (uint64_t)(rng->state >> 64) ^ (uint64_t)rng->state;
  unsigned rot = (unsigned)(rng->state >> 122);
  return (x >> rot) | (x << ((64u - rot) & 63u));
}

/* The top 53 bits scaled by 2^-53: every multiple of 2^-53 in [0, 1) is
   equally likely and the conversion is exact. */
double aa_pcg64_uniform(aa_pcg64_t *rng) {
  return (double)(aa_pcg64_next(rng) >> 11) * 0x1p-53;
}

/* Box-Muller: r = sqrt(-2 ln u1), z = r cos(2 pi u2). u1 is taken from
   (0, 1] (1 - uniform) so log never sees 0; the largest |z| is then
   sqrt(2 * 53 ln 2) ~ 8.57. The sine partner is discarded so that each
   draw consumes exactly two outputs and streams stay position-addressable. */
double aa_pcg64_normal(aa_pcg64_t *rng) {
  double u1 = 1.0 - aa_pcg64_uniform(rng);
  double u2 = aa_pcg64_uniform(rng);
  const double two_pi = 6.283185307179586476925286766559;
  return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}
