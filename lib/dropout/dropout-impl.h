/* attnacc: internal helpers of the dropout module (keep thresholds, per-element draws). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_DROPOUT_IMPL_H
#define AA_DROPOUT_IMPL_H

#include <math.h>

#include "dropout.h"

/* 32-bit keep threshold T = floor((1 - p) * 2^32): u < T keeps. 1 - p is
   one binary64 rounding; the product by 2^32 and the floor are exact, so
   the keep probability T/2^32 is within 2^-32 (plus that rounding) of 1 - p.
   p = 0 gives T = 2^32 (keep all), hence the 64-bit type. */
static inline uint64_t aa_dropout_t32(double p) {
  double k = 1.0 - p;
  if (!(k > 0)) return 0;
  if (k >= 1) return UINT64_C(1) << 32;
  return (uint64_t)floor(k * 4294967296.0);
}

/* FA2's byte threshold: keep = 1 - p in binary32 (flash_api.cpp computes
   p_dropout = 1.f - p_dropout in float), t = floor(keep * 255.0); keep when
   the random byte r <= t. */
static inline unsigned aa_dropout_t8(double p) {
  float keep = 1.0f - (float)p;
  double t = floor((double)keep * 255.0);
  if (t < 0) t = 0;
  if (t > 255) t = 255;
  return (unsigned)t;
}

/* Philox output word 0 of element (batch, head, row, col) under seed. */
static inline uint32_t aa_dropout_philox_word(uint64_t seed, uint64_t batch, size_t head, size_t row, size_t col) {
  uint32_t ctr[4] = {(uint32_t)col, (uint32_t)row, (uint32_t)head, (uint32_t)batch};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t out[4];
  aa_philox4x32_10(out, ctr, key);
  return out[0];
}

#endif
