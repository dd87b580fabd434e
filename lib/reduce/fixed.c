/* attnacc: the bounded fixed-point dQ reduction (packed integer adds, budget checks, FP64 fallback; [blackwell-fa]
 * section 3.6). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixed-core.h"
#include "reduce-impl.h"

/* Default FP64 recompute: the binary64 sum of the FP32 partials in
   ascending order (relative error of the sum below (nparts-1) 2^-53 times
   sum |p|, far below the FP32 result it replaces). */
static int fp64_sum(double *out, const double *parts, size_t nparts, size_t len) {
  for (size_t x = 0; x < len; x++)
    out[x] = 0.0;
  for (size_t p = 0; p < nparts; p++)
    for (size_t x = 0; x < len; x++)
      out[x] += parts[p * len + x];
  return AA_OK;
}

/* The probe (s->probe): for each scale exponent s' = scale_exp + k - 8,
   whether this tile passes both checks at width w, and if so the squared
   distance of fp32(sum rne(p 2^s') 2^-s') from the FP32 ascending sum of the
   partials (a failing tile would be recomputed in FP64, which is within
   rounding of that sum: counted as 0). The checks are the exact conditions
   of the main path, evaluated on exact integer sums. */
static int probe(aa_reduce_stats_t *stats, const double *parts, size_t nparts, size_t len, const aa_reduce_t *s) {
  double *ref = malloc(len * sizeof *ref);
  int64_t *sum = malloc(len * sizeof *sum);
  if (ref == NULL || sum == NULL) {
    free(ref);
    free(sum);
    return AA_ENOMEM;
  }
  double lim = ldexp(1.0, (int)s->width - 1);
  int64_t smin = -(INT64_C(1) << (s->width - 1)), smax = (INT64_C(1) << (s->width - 1)) - 1;
  double r2 = 0;
  for (size_t x = 0; x < len; x++) {
    float a = 0.0f;
    for (size_t p = 0; p < nparts; p++)
      a += (float)parts[p * len + x];
    ref[x] = a;
    r2 += ref[x] * ref[x];
  }
  stats->probe_ref2 += r2;
  stats->probe_tiles++;
  for (int k = 0; k < AA_REDUCE_PROBE; k++) {
    int se = s->scale_exp + k - AA_REDUCE_PROBE / 2, fail = 0;
    for (size_t x = 0; x < len; x++)
      sum[x] = 0;
    for (size_t p = 0; p < nparts && !fail; p++)
      for (size_t x = 0; x < len; x++) {
        double q = aa_reduce_rne_int(ldexp(parts[p * len + x], se));
        if (!(fabs(q) < lim)) {
          fail = 1;
          break;
        }
        sum[x] += (int64_t)q;
      }
    for (size_t x = 0; x < len && !fail; x++)
      fail = sum[x] < smin || sum[x] > smax;
    if (fail) {
      stats->probe_fail[k]++;
      continue;
    }
    double e2 = 0;
    for (size_t x = 0; x < len; x++) {
      double v = aa_reduce_rnd(ldexp((double)sum[x], -se), AA_FMT_FP32) - ref[x];
      e2 += v * v;
    }
    stats->probe_err2[k] += e2;
  }
  free(ref);
  free(sum);
  return AA_OK;
}

int aa_reduce_fixed_tile(double *acc, aa_reduce_stats_t *stats, const double *parts, size_t nparts, size_t len,
                         uint64_t tile, const aa_reduce_t *s, aa_reduce_fallback_fn fallback, void *ctx,
                         aa_error_t *err) {
  unsigned w = s->width;
  int packed = w == 16;
  double lim = ldexp(1.0, (int)w - 1); /* |q| < 2^(w-1): the magnitude fits in w-1 bits */
  int64_t smin = -(INT64_C(1) << (w - 1)), smax = (INT64_C(1) << (w - 1)) - 1;
  uint64_t wmask = w == 64 ? ~UINT64_C(0) : (UINT64_C(1) << w) - 1;
  size_t nw = packed ? (len + 1) / 2 : len;
  int64_t *exact = calloc(len, sizeof *exact); /* exact integer sums (the emulator's view) */
  uint64_t *word = calloc(nw, sizeof *word);   /* the hardware words: w-bit lanes or packed 32-bit pairs */
  uint8_t *bad = calloc(len, 1);               /* element saw a failed conversion */
  if (exact == NULL || word == NULL || bad == NULL) {
    free(exact);
    free(word);
    free(bad);
    return aa_error_set(err, AA_ENOMEM, "dq_reduce: no memory for a fixed-point tile of %zu", len);
  }
  uint64_t conv_fail = 0, sum_fail = 0;
  for (size_t p = 0; p < nparts; p++) {
    const double *src = parts + p * len;
    for (size_t x = 0; x < len; x++) {
      /* Conversion: x * 2^s is exact (power-of-two scaling of an FP32
         value), then rounded to the nearest integer, ties to even (the
         cvt.rni conversion). Range: |q| must fit in w-1 magnitude bits. */
      double q = aa_reduce_rne_int(ldexp(src[x], s->scale_exp));
      if (!isfinite(src[x]) || !(fabs(q) < lim)) {
        conv_fail++;
        bad[x] = 1;
        continue;
      }
      int64_t qi = (int64_t)q;
      exact[x] += qi;
      if (packed) {
        /* Two lanes per 32-bit word packed as lo + hi * 2^16 in signed
           arithmetic (a negative lo borrows from hi), so one 32-bit
           integer add adds both lanes; the word wraps modulo 2^32. */
        uint64_t add = (x & 1) ? (uint64_t)qi * 65536u : (uint64_t)qi;
        word[x / 2] = (word[x / 2] + add) & 0xffffffffu;
      } else {
        word[x] = (word[x] + (uint64_t)qi) & wmask; /* w-bit two's complement wrap-around */
      }
    }
  }
  /* Recovered-sum check after the whole tile, per element: the wrapped (or
     packed) words give back the integer sum exactly iff it lies in the
     w-bit range, whatever the intermediate sums did. The emulator knows
     the exact sum; a kernel checks the same condition with a cheap bound. */
  for (size_t x = 0; x < len; x++)
    if (!bad[x] && (exact[x] < smin || exact[x] > smax)) sum_fail++;
  if (stats != NULL) {
    stats->conv_failures += conv_fail;
    stats->sum_failures += sum_fail;
  }
  int st = AA_OK;
  if (s->probe && stats != NULL && (st = probe(stats, parts, nparts, len, s)) != AA_OK) {
    free(exact);
    free(word);
    free(bad);
    return aa_error_set(err, st, "dq_reduce: no memory for the fixed-point probe");
  }
  if (conv_fail == 0 && sum_fail == 0) {
    for (size_t x = 0; x < len; x++) {
      int64_t rec;
      if (packed) {
        uint32_t W = (uint32_t)word[x / 2];
        int64_t lo = (int16_t)(uint16_t)(W & 0xffffu);               /* sign-extended low lane */
        int64_t hi = ((int64_t)(int32_t)(W - (uint32_t)lo)) / 65536; /* exact multiple of 2^16 */
        rec = (x & 1) ? hi : lo;
      } else {
        uint64_t u = word[x];
        rec = (u >> (w - 1)) & 1 ? (int64_t)u - (int64_t)(wmask + 1) : (int64_t)u; /* sign extension */
      }
      /* Back to FP32: the integer times 2^-s (exact in binary64), rounded
         once to FP32, then published into the accumulator. */
      double v = aa_reduce_rnd(ldexp((double)rec, -s->scale_exp), AA_FMT_FP32);
      acc[x] = aa_reduce_add(acc[x], v, s);
    }
  } else {
    double *R = malloc(len * sizeof *R);
    if (R == NULL)
      st = aa_error_set(err, AA_ENOMEM, "dq_reduce: no memory for the FP64 recompute");
    else {
      st = fallback != NULL ? fallback(R, parts, nparts, len, tile, ctx) : fp64_sum(R, parts, nparts, len);
      if (st == AA_OK) {
        /* The recomputed tile replaces the fixed-point result: one binary64
           add into the accumulator, stored in acc_fmt. */
        for (size_t x = 0; x < len; x++)
          acc[x] = aa_reduce_rnd(acc[x] + R[x], s->acc_fmt);
        if (stats != NULL) {
          stats->budget_failures++;
          stats->fp64_recomputes++;
        }
      }
      free(R);
    }
  }
  free(exact);
  free(word);
  free(bad);
  return st;
}
