/* attnacc: the fixed-point dQ reduction's conversion (round to an integer, ties to even), written once for gcc and
 * nvcc. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_REDUCE_FIXED_CORE_H
#define AA_REDUCE_FIXED_CORE_H

/* fixed.c (the CPU) and the GPU emulation's backward (lib/attn/attn-bwd-core.h) convert partials with this one
   definition. */
#ifndef __CUDACC__
#include <math.h>
#endif

#include "../hd.h"

/* Round-to-nearest-even of a double to an integer-valued double, written out
   so it does not depend on the floating-point environment's rounding mode. */
static inline AA_HD double aa_reduce_rne_int(double y) {
  if (!(fabs(y) < 0x1p52)) return y; /* already an integer (or NaN/Inf) */
  double r = floor(y), f = y - r;    /* f exact: r and y share the binade or r = 0 */
  if (f > 0.5 || (f == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

#endif
