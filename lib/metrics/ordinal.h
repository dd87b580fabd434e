/* attnacc: the bit-pattern shortcut of aa_metrics_ordinal, inline for the comparison loops. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_METRICS_ORDINAL_H
#define AA_METRICS_ORDINAL_H

#include <stdint.h>
#include <string.h>

#include "metrics.h"

/* x held exactly by FP32 (and by BF16 when fmt is BF16): its IEEE bit pattern read as an integer (sign bit
   clear), which is the ordinal formula of ulp.c's aa_metrics_ordinal; 0 when the shortcut does not apply. */
static inline int aa__ordinal_bits(double *ord, double x, aa_fmt_t fmt) {
  float f = (float)x;
  uint32_t b;
  if ((double)f != x || (fmt != AA_FMT_FP32 && fmt != AA_FMT_BF16)) return 0;
  memcpy(&b, &f, sizeof b);
  if (fmt == AA_FMT_BF16 && (b & 0xffffu) != 0) return 0;
  b &= 0x7fffffffu;
  *ord = (double)(fmt == AA_FMT_BF16 ? b >> 16 : b);
  if (x < 0) *ord = -*ord; /* not -0: the formula's 0 */
  return 1;
}

/* aa_metrics_ordinal, without the call for values of the format itself (the common case of a comparison). */
static inline double aa__ordinal(double x, aa_fmt_t fmt) {
  double ord;
  return aa__ordinal_bits(&ord, x, fmt) ? ord : aa_metrics_ordinal(x, fmt);
}

#endif
