/* attnacc: derivation of independent pcg64 streams from (seed, tags) with the splitmix64 finaliser. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "rng.h"

/* splitmix64 finaliser (Stafford's "mix13" variant): a bijection on 64-bit
   words with full avalanche, so distinct inputs never collide before the
   final combination. */
static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Recipe (fixed; changing it changes every derived stream):
     h0 = mix64(seed ^ 0x9e3779b97f4a7c15)
     h  = mix64((h + 0x9e3779b97f4a7c15 * (i + 1)) ^ tag_i)  for each tag i, then
     h  = mix64(h ^ ntags)                                  (so (a) and (a, 0) differ)
     initstate = mix64(h ^ A) << 64 | mix64(h ^ B)
     initseq   = mix64(h ^ C) << 64 | mix64(h ^ D)
   with the constants A..D below, and the stream is aa_pcg64_seed(initstate,
   initseq). The state is a pure function of (seed, tags, ntags). */
void aa_rng_derive(aa_pcg64_t *rng, uint64_t seed, const uint64_t *tags, int ntags) {
  const uint64_t golden = UINT64_C(0x9e3779b97f4a7c15);
  uint64_t h = mix64(seed ^ golden);
  for (int i = 0; i < ntags; i++)
    h = mix64((h + golden * (uint64_t)(i + 1)) ^ tags[i]);
  h = mix64(h ^ (uint64_t)(ntags < 0 ? 0 : ntags));
  unsigned __int128 initstate =
      ((unsigned __int128)mix64(h ^ UINT64_C(0x243f6a8885a308d3)) << 64) | mix64(h ^ UINT64_C(0x13198a2e03707344));
  unsigned __int128 initseq =
      ((unsigned __int128)mix64(h ^ UINT64_C(0xa4093822299f31d0)) << 64) | mix64(h ^ UINT64_C(0x082efa98ec4e6c89));
  aa_pcg64_seed(rng, initstate, initseq);
}
