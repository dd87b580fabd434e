/* attnacc: internal helpers of the reduce module (rounding of one add, the fixed-point kernel). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_REDUCE_IMPL_H
#define AA_REDUCE_IMPL_H

#include "fmt.h"
#include "reduce.h"

/* x rounded to fmt (RNE, subnormals kept, Inf on overflow); FP32 and FP64
   take the fast paths, the exact double is rounded once otherwise. */
static inline double aa_reduce_rnd(double x, aa_fmt_t fmt) {
  if (fmt == AA_FMT_FP64) return x;
  if (fmt == AA_FMT_FP32) return (double)(float)x;
  aa_round_opts_t o = {fmt, AA_RND_NE, 1, 0};
  return aa_round(x, &o, NULL);
}

/* One floating-point add of the strategies: the binary64 sum rounded to
   add_fmt, then to acc_fmt. For FP32 (or narrower) operands rounding the
   binary64 sum equals rounding the exact sum once, since 53 >= 2*24 + 2
   (Figueroa's double-rounding condition), so this is the hardware's
   correctly rounded add. */
static inline double aa_reduce_add(double a, double b, const aa_reduce_t *s) {
  double v = aa_reduce_rnd(a + b, s->add_fmt);
  return s->acc_fmt == s->add_fmt ? v : aa_reduce_rnd(v, s->acc_fmt);
}

/* The fixed kind (fixed.c): returns AA_OK or an error; fills acc. */
int aa_reduce_fixed_tile(double *acc, aa_reduce_stats_t *stats, const double *parts, size_t nparts, size_t len,
                         uint64_t tile, const aa_reduce_t *s, aa_reduce_fallback_fn fallback, void *ctx,
                         aa_error_t *err);

#endif
