/* attnacc: error measures (rel_l2, max_abs, ULP distances, non-finite counts, allclose rule) of a tensor against the
 * oracle. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The comparison runs over chunks of CHUNK elements, in parallel: each chunk's partial results are
   merged in chunk order, so a result never depends on the thread count (the counts, maxima and integer ULP sums are
   the serial ones exactly; the compensated sums are merged chunk by chunk, an order fixed by n alone). */
#define CHUNK ((size_t)1 << 14)

/* Pass 1 of one chunk: counts, rule 1, the largest magnitudes and the ULPs. */
typedef struct {
  size_t nan, inf, fail, used;
  double max_d, max_b, max_ulp;
  uint64_t su_int;
  ksum_t su;
} pass1_t;

static void pass1_chunk(pass1_t *p, const double *got, const double *ref, const double *cr, size_t i0, size_t i1,
                        aa_fmt_t ulp_fmt, double atol, double rtol, double *ulps) {
  *p = (pass1_t){0};
  for (size_t i = i0; i < i1; i++) {
    double a = got[i], b = ref[i], d, u;
    if (isnan(a)) {
      p->nan++;
      p->fail++;
      continue;
    }
    if (isinf(a)) {
      p->inf++;
      p->fail++;
      continue;
    }
    if (!usable(a, b)) {
      p->fail++;
      continue;
    }
    d = fabs(a - b);
    if (d > p->max_d) p->max_d = d;
    if (fabs(b) > p->max_b) p->max_b = fabs(b);
    p->fail += !(d <= atol + rtol * fabs(b)); /* no branch: the outcome is a coin flip on real data */
    u = fabs(aa__ordinal(a, ulp_fmt) - aa__ordinal(cr[i], ulp_fmt));
    if (u > p->max_ulp) p->max_ulp = u;
    if (u < 0x1p52 && u == (double)(uint64_t)u)
      p->su_int += (uint64_t)u; /* the common case: exact */
    else
      ksum_add(&p->su, u);
    if (ulps != NULL) ulps[i0 + p->used] = u; /* packed within the chunk; the chunks are joined afterwards */
    p->used++;
  }
}

/* Pass 2 of one chunk: the scaled sums of squares, in two chains (even and odd elements) joined at its end. */
static void pass2_chunk(ddsum_t *sd, ddsum_t *sb, const double *got, const double *ref, size_t i0, size_t i1,
                        int fast, double sd_, double sb_, int ed, int eb) {
  ddsum_t lane[2][2] = {{{0, 0}, {0, 0}}, {{0, 0}, {0, 0}}};
  for (size_t i = i0; i < i1; i++) {
    double a = got[i], b = ref[i];
    if (!usable(a, b)) continue;
    ddsum_sq(&lane[i % 2][0], fast ? (a - b) * sd_ : ldexp(a - b, -ed));
    ddsum_sq(&lane[i % 2][1], fast ? b * sb_ : ldexp(b, -eb));
  }
  *sd = lane[0][0], *sb = lane[0][1];
  ddsum_merge(sd, &lane[1][0]);
  ddsum_merge(sb, &lane[1][1]);
}

int aa_metrics_compare(aa_metrics_t *m, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt,
                       double atol, double rtol, aa_error_t *err) {
  return aa_metrics_compare_ulps(m, got, ref, ulp_fmt, atol, rtol, NULL, err);
}

/* Pass 1 over every chunk, merged in chunk order into m and the sums; ulps packed whole. */
static int pass1(aa_metrics_t *m, size_t *used, double *max_d, double *max_b, long double *ulp_sum,
                 const aa_tensor_t *got, const aa_oracle_out_t *ref, const aa_tensor_t *cr, aa_fmt_t ulp_fmt,
                 double *ulps, aa_error_t *err) {
  size_t n = m->count, nchunks = (n + CHUNK - 1) / CHUNK;
  pass1_t *p = malloc(nchunks * sizeof *p);
  uint64_t su_int = 0;
  ksum_t su = {0, 0};
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "metrics: out of memory");
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (size_t c = 0; c < nchunks; c++)
    pass1_chunk(&p[c], got->data, ref->val.data, cr->data, c * CHUNK, c + 1 < nchunks ? (c + 1) * CHUNK : n, ulp_fmt,
                m->atol, m->rtol, ulps);
  *used = 0, *max_d = *max_b = 0;
  for (size_t c = 0; c < nchunks; c++) {
    m->nan += p[c].nan, m->inf += p[c].inf, m->fail_count += p[c].fail;
    *max_d = fmax(*max_d, p[c].max_d), *max_b = fmax(*max_b, p[c].max_b);
    m->max_ulp = fmax(m->max_ulp, p[c].max_ulp);
    su_int += p[c].su_int;
    ksum_add(&su, p[c].su.s);
    su.c += p[c].su.c;
    if (ulps != NULL && *used != c * CHUNK) memmove(ulps + *used, ulps + c * CHUNK, p[c].used * sizeof *ulps);
    *used += p[c].used;
  }
  *ulp_sum = (long double)su_int + su.s + su.c;
  free(p);
  return AA_OK;
}

/* Pass 2 over every chunk: the norms ||a - b|| / 2^ed and ||b|| / 2^eb as double-double sums. */
static int pass2(ddsum_t *sd, ddsum_t *sb, const aa_tensor_t *got, const aa_oracle_out_t *ref, size_t n, int ed,
                 int eb, aa_error_t *err) {
  size_t nchunks = (n + CHUNK - 1) / CHUNK;
  ddsum_t(*p)[2] = malloc(nchunks * sizeof *p);
  /* a product with a normal power of two rounds as ldexp does (both give the exact scaled value, correctly
     rounded): the same bits, without a library call per element */
  double sd_ = ldexp(1.0, -ed), sb_ = ldexp(1.0, -eb);
  int fast = sd_ >= DBL_MIN && sd_ <= DBL_MAX && sb_ >= DBL_MIN && sb_ <= DBL_MAX;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "metrics: out of memory");
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (size_t c = 0; c < nchunks; c++)
    pass2_chunk(&p[c][0], &p[c][1], got->data, ref->val.data, c * CHUNK, c + 1 < nchunks ? (c + 1) * CHUNK : n, fast,
                sd_, sb_, ed, eb);
  *sd = p[0][0], *sb = p[0][1];
  for (size_t c = 1; c < nchunks; c++) {
    ddsum_merge(sd, &p[c][0]);
    ddsum_merge(sb, &p[c][1]);
  }
  free(p);
  return AA_OK;
}

int aa_metrics_compare_ulps(aa_metrics_t *m, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt,
                            double atol, double rtol, double *ulps, aa_error_t *err) {
  const aa_tensor_t *cr;
  size_t n, used = 0;
  double max_d = 0, max_b = 0;
  long double ulp_sum;
  int ed, eb, rc;
  ddsum_t sd = {0, 0}, sb = {0, 0};

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
  if ((rc = pass1(m, &used, &max_d, &max_b, &ulp_sum, got, ref, cr, ulp_fmt, ulps, err)) != AA_OK) return rc;
  m->pass = m->fail_count == 0;
  if (used == 0) {
    m->rel_l2 = m->max_abs = m->max_ulp = m->mean_ulp = NAN;
    return AA_OK;
  }
  m->max_abs = max_d;
  m->mean_ulp = (double)(ulp_sum / (long double)used);

  /* Pass 2: sums of squares scaled by powers of two (exact), so neither
     overflow nor underflow can occur for any finite data. */
  frexp(max_d, &ed);
  frexp(max_b, &eb);
  if ((rc = pass2(&sd, &sb, got, ref, n, ed, eb, err)) != AA_OK) return rc;
  {
    long double nd = sqrtl((long double)sd.s + sd.c), nb = sqrtl((long double)sb.s + sb.c);
    if (max_b == 0)
      m->rel_l2 = max_d == 0 ? 0.0 : INFINITY;
    else
      m->rel_l2 = (double)ldexpl(nd / nb, ed - eb);
  }
  return AA_OK;
}
