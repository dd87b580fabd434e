/* attnacc: Philox4x32-10 counter-based generator (the position-keyed dropout draw). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "dropout-impl.h"

/* Round multipliers and Weyl key increments of Philox4x32 (Salmon et al.,
   "Parallel random numbers: as easy as 1, 2, 3", SC 2011, section 4.2). */
#define PHILOX_M0 UINT32_C(0xD2511F53)
#define PHILOX_M1 UINT32_C(0xCD9E8D57)
#define PHILOX_W0 UINT32_C(0x9E3779B9)
#define PHILOX_W1 UINT32_C(0xBB67AE85)

void aa_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    /* One S-box round: two 32x32->64 products, high halves mixed with the
       other two words and the round key; the key is bumped between rounds. */
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
    uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = (uint32_t)p0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}
