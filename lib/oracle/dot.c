/* attnacc: the oracle's plain dot product of exactly representable products, one clone per vector width. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "fast-common.h"

/* Its own translation unit: clang emits the resolver of a target_clones
   function with external linkage even when the function is static, so a
   static definition in fast-common.h, included by fast.c and fast_rows.c,
   made two definitions of dot_plain.resolver; and clang 14 names the
   dispatcher of an external clone so that calls from other files miss it,
   hence the plain wrapper below. Callers use it only when
   exact_pair holds (every product and partial sum exact), so the summation
   order, and with it the clone, never changes the result. */
TC static double dot_plain(const double *restrict a, const double *restrict b, size_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (size_t c = 0; c < n; c++)
    s += a[c] * b[c];
  return s;
}

double aa_oracle_dot_plain(const double *restrict a, const double *restrict b, size_t n) {
  return dot_plain(a, b, n);
}
