/* attnacc: internal helpers of the fmt module (double bit access, exact powers of two, exponent biases). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_FMT_IMPL_H
#define AA_FMT_IMPL_H

#include <stdint.h>
#include <string.h>

#include "fmt.h"

#define AA_F64_SIGN UINT64_C(0x8000000000000000)
#define AA_F64_FRAC UINT64_C(0x000fffffffffffff)
#define AA_F64_HIDDEN UINT64_C(0x0010000000000000)
#define AA_F64_INF UINT64_C(0x7ff0000000000000)

static inline uint64_t aa_f64_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline double aa_f64_from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}
/* 2^k exactly, for -1074 <= k <= 1023 (built from bits: no libm call). */
static inline double aa_pow2(int k) {
  if (k >= -1022) return aa_f64_from_bits((uint64_t)(k + 1023) << 52);
  return aa_f64_from_bits(UINT64_C(1) << (k + 1074));
}

/* Exponent bias of each format's storage encoding (e4m3 is not IEEE:
   bias 7 with emax 8). Indexed by aa_fmt_t. */
extern const int aa_fmt_bias_[AA_FMT_COUNT];
extern const aa_fmt_info_t aa_fmt_infos_[AA_FMT_COUNT];

/* aa_round on a format given by its description (the block formats'
   elements, e2m1, are not in aa_fmt_t); rnd is not AA_RND_S. */
double aa_round_info(double x, const aa_fmt_info_t *f, aa_rnd_t rnd, int subnormals, int saturate);

#endif
