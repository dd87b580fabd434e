/* attnacc: aa_fmt_encode / aa_fmt_decode, conversions between representable values and storage bit patterns. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "fmt-impl.h"

/* Layout: sign | exponent field (bits - prec bits) | prec - 1 fraction bits.
   NaN encodes as the quiet pattern (exponent all ones, top fraction bit
   set), except e4m3 whose only NaN is S.1111.111. Infinity encodes as the
   exponent field all ones with a zero fraction (e4m3 has none: NaN). */
uint64_t aa_fmt_encode(double x, aa_fmt_t fmt) {
  if ((unsigned)fmt >= AA_FMT_COUNT) return 0;
  if (fmt == AA_FMT_FP64) return aa_f64_bits(x);
  const aa_fmt_info_t *f = &aa_fmt_infos_[fmt];
  const int fb = f->prec - 1;      /* fraction bits */
  const int ew = f->bits - 1 - fb; /* exponent field width */
  const uint64_t emask = (UINT64_C(1) << ew) - 1;
  const uint64_t u = aa_f64_bits(x);
  const uint64_t sign = (u >> 63) << (f->bits - 1);
  const uint64_t ax = u & ~AA_F64_SIGN;
  if (ax > AA_F64_INF) {
    if (!f->has_inf) return sign | (emask << fb) | ((UINT64_C(1) << fb) - 1);
    return sign | (emask << fb) | (UINT64_C(1) << (fb - 1));
  }
  if (ax == AA_F64_INF) {
    if (!f->has_inf) return sign | (emask << fb) | ((UINT64_C(1) << fb) - 1);
    return sign | (emask << fb);
  }
  if (ax == 0) return sign;
  /* |x| = M * 2^E; all formats here have emin >= -1022 + ... except fp64,
     handled above, so x is a normal double. */
  const int be = (int)(ax >> 52);
  const uint64_t M = (ax & AA_F64_FRAC) | AA_F64_HIDDEN;
  const int e = be - 1023;
  if (e < f->emin) {
    /* Subnormal: fraction = |x| / 2^(emin - fb), an integer < 2^fb. */
    int sh = 52 - (e - (f->emin - fb));
    return sign | (sh < 64 ? M >> sh : 0);
  }
  uint64_t field = (uint64_t)(e + aa_fmt_bias_[fmt]);
  return sign | (field << fb) | ((M >> (52 - fb)) & ((UINT64_C(1) << fb) - 1));
}

double aa_fmt_decode(uint64_t bits, aa_fmt_t fmt) {
  if ((unsigned)fmt >= AA_FMT_COUNT) return NAN;
  if (fmt == AA_FMT_FP64) return aa_f64_from_bits(bits);
  const aa_fmt_info_t *f = &aa_fmt_infos_[fmt];
  const int fb = f->prec - 1;
  const int ew = f->bits - 1 - fb;
  const uint64_t emask = (UINT64_C(1) << ew) - 1;
  const uint64_t frac = bits & ((UINT64_C(1) << fb) - 1);
  const uint64_t field = (bits >> fb) & emask;
  const uint64_t neg = (bits >> (f->bits - 1)) & 1;
  double mag;
  if (!f->has_inf && field == emask && frac == ((UINT64_C(1) << fb) - 1)) {
    mag = NAN;
  } else if (f->has_inf && field == emask) {
    mag = frac ? NAN : INFINITY;
  } else if (field == 0) {
    mag = (double)frac * aa_pow2(f->emin - fb);
  } else {
    mag = (double)(frac | (UINT64_C(1) << fb)) * aa_pow2((int)field - aa_fmt_bias_[fmt] - fb);
  }
  return neg ? -mag : mag;
}
