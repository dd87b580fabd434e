/* attnacc: 128-bit FNV-1a hashing (incremental) and its hex form. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>

#include "sweep.h"

/* FNV-1a 128 parameters (the published FNV constants): offset basis
   144066263297769815596495629667062367629, prime 2^88 + 2^8 + 0x3b. The
   product by the prime is done as h * 0x13b + (h << 88), mod 2^128. */
void aa_hash128_init(aa_hash128_t *h) {
  h->hi = UINT64_C(0x6c62272e07bb0142);
  h->lo = UINT64_C(0x62b821756295c58d);
}

void aa_hash128_update(aa_hash128_t *h, const void *data, size_t n) {
  const unsigned char *p = data;
  unsigned __int128 x = ((unsigned __int128)h->hi << 64) | h->lo;
  for (size_t i = 0; i < n; i++) {
    x ^= p[i];
    x = x * 0x13bu + (x << 88);
  }
  h->hi = (uint64_t)(x >> 64);
  h->lo = (uint64_t)x;
}

void aa_hash128_hex(char out[33], const aa_hash128_t *h) {
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)h->hi, (unsigned long long)h->lo);
}
