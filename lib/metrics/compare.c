/* attnacc: error measures (rel_l2, max_abs, ULP distances, non-finite counts, allclose rule) of a tensor against the
 * oracle. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "metrics.h"
#include "metrics/ordinal.h"

/* Neumaier's compensated sum in long double: the error of the total stays
   near one rounding of the result, independent of the element count, so the
   norms below carry no error of their own worth mentioning. */
typedef struct {
  long double s, c;
} ksum_t;

static void ksum_add(ksum_t *k, long double x) {
  long double t = k->s + x;
  if (fabsl(k->s) >= fabsl(x))
    k->c += (k->s - t) + x;
  else
    k->c += (x - t) + k->s;
  k->s = t;
}

/* A sum of squares as an unevaluated double-double (s, c): each square exact as p + e (Dekker's product with
   Veltkamp's split, no FMA needed on the baseline x86-64; |x| <= 1 here, so the split cannot overflow, and the
   e of squares below 2^-969 may lose bits that the total cannot see), added to s by TwoSum with the rounding
   error and e gathered in c. The error of s + c is about n 2^-106 of the total, far below the 2^-64 of the long
   double compensated sum this replaced, at a tenth of its time (no x87 round trips through memory). */
typedef struct {
  double s, c;
} ddsum_t;

static inline void ddsum_sq(ddsum_t *k, double x) {
  double g = 134217729.0 * x, xh = g - (g - x), xl = x - xh; /* 2^27 + 1 */
  double p = x * x, e = ((xh * xh - p) + 2 * xh * xl) + xl * xl;
  double t = k->s + p, bv = t - k->s;
  k->c += ((k->s - (t - bv)) + (p - bv)) + e;
  k->s = t;
}

/* k <- k + j (TwoSum of the heads, the tails added): the lanes of one sum joined in a fixed order. */
static inline void ddsum_merge(ddsum_t *k, const ddsum_t *j) {
  double t = k->s + j->s, bv = t - k->s;
  k->c += (((k->s - (t - bv)) + (j->s - bv)) + j->c);
  k->s = t;
}

/* Element i takes part in the statistics when got is finite and so is the
   oracle value (an Inf equal to the oracle's is an exact match). */
static int usable(double a, double b) {
  return isfinite(a) && isfinite(b);
}

int aa_metrics_compare(aa_metrics_t *m, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt,
                       double atol, double rtol, aa_error_t *err) {
  return aa_metrics_compare_ulps(m, got, ref, ulp_fmt, atol, rtol, NULL, err);
}

int aa_metrics_compare_ulps(aa_metrics_t *m, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt,
                            double atol, double rtol, double *ulps, aa_error_t *err) {
  const aa_tensor_t *cr;
  size_t n, used = 0;
  double max_d = 0, max_b = 0, max_ulp = 0;
  int ed, eb;
  ksum_t su = {0, 0};
  ddsum_t sd = {0, 0}, sb = {0, 0};
  uint64_t su_int = 0; /* the integer ULP distances (< 2^52 each, fewer than 2^12 of them per 2^64): exact */

  *m = (aa_metrics_t){0};
  m->atol = atol;
  m->rtol = rtol;
  m->fa_ratio = NAN;
  m->fa_ref_max_abs = NAN;
  if (!(atol >= 0) || !(rtol >= 0))
    return aa_error_set(err, AA_EINVAL, "metrics: tolerances must be >= 0 (atol %g, rtol %g)", atol, rtol);
  if (ulp_fmt == AA_FMT_BF16)
    cr = &ref->bf16;
  else if (ulp_fmt == AA_FMT_FP32)
    cr = &ref->fp32;
  else
    return aa_error_set(err, AA_EINVAL, "metrics: ULP distances are taken in bf16 or fp32 only");
  n = aa_tensor_numel(got);
  if (n != aa_tensor_numel(&ref->val) || n != aa_tensor_numel(cr))
    return aa_error_set(err, AA_ESHAPE,
                        "metrics: the tensor has %zu elements ([%zu, %zu, %zu]) but the oracle output has %zu", n,
                        got->shape[0], got->shape[1], got->shape[2], aa_tensor_numel(&ref->val));
  m->count = n;
  if (n == 0) {
    m->pass = 1;
    return AA_OK;
  }

  /* Pass 1: counts, rule 1, the largest magnitudes (for exact power-of-two scaling) and ULPs. */
  for (size_t i = 0; i < n; i++) {
    double a = got->data[i], b = ref->val.data[i], d, u;
    if (isnan(a)) {
      m->nan++;
      m->fail_count++;
      continue;
    }
    if (isinf(a)) {
      m->inf++;
      m->fail_count++;
      continue;
    }
    if (!usable(a, b)) {
      m->fail_count++;
      continue;
    }
    d = fabs(a - b);
    if (d > max_d) max_d = d;
    if (fabs(b) > max_b) max_b = fabs(b);
    m->fail_count += !(d <= atol + rtol * fabs(b)); /* no branch: the outcome is a coin flip on real data */
    u = fabs(aa__ordinal(a, ulp_fmt) - aa__ordinal(cr->data[i], ulp_fmt));
    if (u > max_ulp) max_ulp = u;
    if (u < 0x1p52 && u == (double)(uint64_t)u)
      su_int += (uint64_t)u; /* the common case: the sum the long double one gave, exactly */
    else
      ksum_add(&su, u);
    if (ulps != NULL) ulps[used] = u;
    used++;
  }
  m->pass = m->fail_count == 0;
  if (used == 0) {
    m->rel_l2 = m->max_abs = m->max_ulp = m->mean_ulp = NAN;
    return AA_OK;
  }
  m->max_abs = max_d;
  m->max_ulp = max_ulp;
  m->mean_ulp = (double)(((long double)su_int + su.s + su.c) / (long double)used);

  /* Pass 2: sums of squares scaled by powers of two (exact), so neither
     overflow nor underflow can occur for any finite data. */
  frexp(max_d, &ed);
  frexp(max_b, &eb);
  /* a product with a normal power of two rounds as ldexp does (both give the exact scaled value, correctly
     rounded): the same bits, without a library call per element */
  double sd_ = ldexp(1.0, -ed), sb_ = ldexp(1.0, -eb);
  int fast = sd_ >= DBL_MIN && sd_ <= DBL_MAX && sb_ >= DBL_MIN && sb_ <= DBL_MAX;
  ddsum_t lane[2][2] = {{{0, 0}, {0, 0}}, {{0, 0}, {0, 0}}}; /* even and odd elements: two chains of additions */
  for (size_t i = 0; i < n; i++) {
    double a = got->data[i], b = ref->val.data[i];
    if (!usable(a, b)) continue;
    ddsum_sq(&lane[i % 2][0], fast ? (a - b) * sd_ : ldexp(a - b, -ed));
    ddsum_sq(&lane[i % 2][1], fast ? b * sb_ : ldexp(b, -eb));
  }
  sd = lane[0][0], sb = lane[0][1];
  ddsum_merge(&sd, &lane[1][0]);
  ddsum_merge(&sb, &lane[1][1]);
  {
    long double nd = sqrtl((long double)sd.s + sd.c), nb = sqrtl((long double)sb.s + sb.c);
    if (max_b == 0)
      m->rel_l2 = max_d == 0 ? 0.0 : INFINITY;
    else
      m->rel_l2 = (double)ldexpl(nd / nb, ed - eb);
  }
  return AA_OK;
}
