/* attnacc: PCG random streams (pcg32 XSH-RR, pcg64 XSL-RR), uniform and normal draws, stream derivation. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_RNG_H
#define AA_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* pcg32, "setseq 64" variant with XSH-RR output ([pcg]). */
typedef struct {
  uint64_t state;
  uint64_t inc; /* always odd */
} aa_pcg32_t;

/* The 128-bit unsigned integer of gcc and clang; __extension__ keeps a
   user's -std=c11 -pedantic build quiet, as ISO C has no such type. */
__extension__ typedef unsigned __int128 aa_u128_t;

/* pcg64, "setseq 128" variant with XSL-RR output ([pcg]). */
typedef struct {
  aa_u128_t state;
  aa_u128_t inc; /* always odd */
} aa_pcg64_t;

/* Reference seeding: state = 0; inc = (initseq << 1) | 1; step;
   state += initstate; step. */
void aa_pcg32_seed(aa_pcg32_t *rng, uint64_t initstate, uint64_t initseq);
uint32_t aa_pcg32_next(aa_pcg32_t *rng);
/* Uniform integer in [0, bound), bound > 0, without modulo bias (Lemire's
   multiply-shift with rejection: usually one output, more only with
   probability (2^32 mod bound) / 2^32). Returns 0 for bound == 0. */
uint32_t aa_pcg32_bounded(aa_pcg32_t *rng, uint32_t bound);

void aa_pcg64_seed(aa_pcg64_t *rng, aa_u128_t initstate, aa_u128_t initseq);
uint64_t aa_pcg64_next(aa_pcg64_t *rng);
/* Uniform double in [0, 1) with 53 random bits: (next >> 11) * 2^-53. */
double aa_pcg64_uniform(aa_pcg64_t *rng);
/* Standard normal sample (Box-Muller from two uniforms; the second value
   is discarded so every draw costs exactly two outputs). */
double aa_pcg64_normal(aa_pcg64_t *rng);

/* Derive an independent pcg64 stream from a user seed and a tuple of tags
   (tensor id, head, ...): the tags are mixed into the stream selector with a
   fixed integer hash, so a stream is a pure function of (seed, tags).
   The hash is the splitmix64 finaliser chained over seed, each tag (with
   its position) and ntags; four further finaliser calls give the 128-bit
   initstate and initseq (exact recipe in lib/rng/derive.c; changing it
   changes every derived stream). */
void aa_rng_derive(aa_pcg64_t *rng, uint64_t seed, const uint64_t *tags, int ntags);

#ifdef __cplusplus
}
#endif
#endif
