/* attnacc: signed ordinal of a value on the grid of a binary format, for ULP distances monotone across zero. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "metrics.h"
#include "metrics/ordinal.h"

/* A positive value of a format with p significand bits and smallest normal
   exponent emin sits in binade E = max(floor(log2 x), emin), where the grid
   step is 2^(E-p+1). The values below it are 2^(p-1) per binade above emin
   plus the 2^(p-1) subnormals and zero, which gives
     ord(x) = (E - emin) 2^(p-1) + x / 2^(E-p+1),
   exactly the IEEE bit pattern of x read as an integer (sign bit clear).
   x / 2^(E-p+1) is a power-of-two scaling, hence exact. */
double aa_metrics_ordinal(double x, aa_fmt_t fmt) {
  int p, emin, emax, e;
  double a = fabs(x), half, ord, ord_inf;
  if (aa__ordinal_bits(&ord, x, fmt)) return ord; /* most calls: values of the format itself */
  switch (fmt) {
  case AA_FMT_BF16:
    p = 8, emin = -126, emax = 127;
    break;
  case AA_FMT_FP16:
    p = 11, emin = -14, emax = 15;
    break;
  case AA_FMT_FP32:
    p = 24, emin = -126, emax = 127;
    break;
  default:
    return NAN;
  }
  if (isnan(x)) return NAN;
  half = ldexp(1.0, p - 1);
  ord_inf = (double)(emax - emin + 2) * half; /* one past the largest finite pattern */
  if (isinf(a))
    ord = ord_inf;
  else if (a == 0)
    return 0.0;
  else {
    frexp(a, &e);
    e = e - 1 < emin ? emin : e - 1;
    ord = (double)(e - emin) * half + ldexp(a, p - 1 - e);
    if (ord > ord_inf) ord = ord_inf;
  }
  return x < 0 ? -ord : ord;
}
