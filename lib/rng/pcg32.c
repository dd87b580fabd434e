/* attnacc: pcg32 (PCG "setseq 64" with XSH-RR 64->32 output): seeding, next, unbiased bounded draws. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "rng.h"

/* 64-bit LCG multiplier of the reference implementation ([pcg]). */
#define AA_PCG32_MULT UINT64_C(6364136223846793005)

static inline void pcg32_step(aa_pcg32_t *rng) {
  rng->state = rng->state * AA_PCG32_MULT + rng->inc;
}

void aa_pcg32_seed(aa_pcg32_t *rng, uint64_t initstate, uint64_t initseq) {
  rng->state = 0;
  rng->inc = (initseq << 1) | 1u;
  pcg32_step(rng);
  rng->state += initstate;
  pcg32_step(rng);
}

uint32_t aa_pcg32_next(aa_pcg32_t *rng) {
  uint64_t old = rng->state;
  pcg32_step(rng);
  /* XSH-RR: xorshift the high bits down, then rotate by the top 5 bits. */
  uint32_t x = (uint32_t)(((old >> 18) ^ old) >> 27);
  uint32_t rot = (uint32_t)(old >> 59);
  return (x >> rot) | (x << ((32u - rot) & 31u));
}

/* Lemire's multiply-and-reject: m = r * bound; the low half of m falls below
   (2^32 mod bound) for exactly the (2^32 mod bound) surplus values of r, which
   are rejected, so every result in [0, bound) has exactly floor(2^32/bound)
   preimages. */
uint32_t aa_pcg32_bounded(aa_pcg32_t *rng, uint32_t bound) {
  if (bound == 0) return 0; /* documented precondition bound > 0; avoid a division by zero */
  uint64_t m = (uint64_t)aa_pcg32_next(rng) * bound;
  uint32_t lo = (uint32_t)m;
  if (lo < bound) {
    uint32_t threshold = (uint32_t)(-bound) % bound; /* 2^32 mod bound */
    while (lo < threshold) {
      m = (uint64_t)aa_pcg32_next(rng) * bound;
      lo = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}
