/* attnacc: aa_reduce_tile, the floating-point strategies (ordered, atomic order, splits, BF16 pairs, section round
 * trip). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "reduce-impl.h"
#include "rng.h"

void aa_reduce_order(size_t *perm, size_t n, uint64_t order_seed, uint64_t tile) {
  /* One pcg32 stream per (seed, tile): derived through aa_rng_derive so
     neighbouring tiles and seeds get unrelated orders, then a Fisher-Yates
     shuffle with unbiased bounded draws (n < 2^32 partials per tile). */
  aa_pcg64_t g64;
  aa_pcg32_t g;
  uint64_t tag = tile;
  aa_rng_derive(&g64, order_seed, &tag, 1);
  uint64_t a = aa_pcg64_next(&g64), b = aa_pcg64_next(&g64);
  aa_pcg32_seed(&g, a, b);
  for (size_t i = 0; i < n; i++)
    perm[i] = i;
  for (size_t i = n; i > 1; i--) {
    size_t j = aa_pcg32_bounded(&g, (uint32_t)i);
    size_t t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
}

/* acc = add(...add(acc, parts[order[0]])..., parts[order[n-1]]), order NULL = ascending. */
static void chain(double *acc, const double *parts, const size_t *order, size_t nparts, size_t len, int desc,
                  const aa_reduce_t *s) {
  for (size_t k = 0; k < nparts; k++) {
    size_t p = order != NULL ? order[k] : desc ? nparts - 1 - k : k;
    const double *src = parts + p * len;
    for (size_t x = 0; x < len; x++)
      acc[x] = aa_reduce_add(acc[x], src[x], s);
  }
}

static int splits(double *acc, const double *parts, size_t nparts, size_t len, const aa_reduce_t *s,
                  aa_error_t *err) {
  size_t S = s->splits;
  if (S > nparts)
    S = nparts; /* empty splits hold +0 and add nothing to a non-zero sum; dropping them
                   only differs in the sign of an all-zero result */
  double *buf = calloc(S * len, sizeof *buf);
  if (buf == NULL) return aa_error_set(err, AA_ENOMEM, "dq_reduce: no memory for %zu split buffers", S);
  size_t c = (nparts + S - 1) / S;
  /* Within a split its blocks arrive in ascending order (the n-block loop of
     one FA2 thread block); buffers start at +0 as FA2's zeroed dq_accum. */
  for (size_t p = 0; p < nparts; p++) {
    size_t sp = s->split_layout == AA_SPLIT_STRIDED ? p % S : p / c;
    double *b = buf + sp * len;
    const double *src = parts + p * len;
    for (size_t x = 0; x < len; x++)
      b[x] = aa_reduce_add(b[x], src[x], s);
  }
  /* The final pass sums the split buffers in split order into the accumulator. */
  chain(acc, buf, NULL, S, len, 0, s);
  free(buf);
  return AA_OK;
}

static int bf16_pair(double *acc, const double *parts, size_t nparts, size_t len, const aa_reduce_t *s,
                     aa_error_t *err) {
  double *v = malloc(nparts * sizeof *v);
  if (v == NULL) return aa_error_set(err, AA_ENOMEM, "dq_reduce: no memory for %zu partials", nparts);
  for (size_t x = 0; x < len; x++) {
    /* Each FP32 partial is rounded to BF16 once (RNE) before publication
       ([blackwell-fa] 3.6: dense dQ partials reduced as BF16 pairs). */
    for (size_t p = 0; p < nparts; p++)
      v[p] = aa_reduce_rnd(parts[p * len + x], AA_FMT_BF16);
    double r;
    if (s->pair == AA_PAIR_CHAIN) {
      r = v[0];
      for (size_t p = 1; p < nparts; p++)
        r = aa_reduce_rnd(r + v[p], AA_FMT_BF16);
    } else {
      /* Level-by-level tree: (0,1), (2,3), ...; an odd last value moves up
         unchanged. Rounding the binary64 sum of two BF16 values to BF16 is
         the correctly rounded BF16 add (53 >= 2*8 + 2, no harmful double
         rounding), i.e. one bf16x2 add per pair. */
      size_t m = nparts;
      while (m > 1) {
        size_t h = 0;
        for (size_t i = 0; i + 1 < m; i += 2)
          v[h++] = aa_reduce_rnd(v[i] + v[i + 1], AA_FMT_BF16);
        if (m & 1) v[h++] = v[m - 1];
        m = h;
      }
      r = v[0];
    }
    acc[x] = aa_reduce_add(acc[x], r, s);
  }
  free(v);
  return AA_OK;
}

/* fp32-jitter (lib/reduce.h): one stream per element, adjacent arrivals swapped with probability swap_prob. */
static void jitter(double *acc, const double *parts, size_t nparts, size_t len, uint64_t tile, const aa_reduce_t *s) {
  for (size_t x = 0; x < len; x++) {
    uint64_t tag[2] = {tile, x};
    aa_pcg64_t g;
    aa_rng_derive(&g, s->order_seed, tag, 2);
    for (size_t k = 0; k < nparts;) {
      double u = (double)(aa_pcg64_next(&g) >> 11) * 0x1p-53;
      if (k + 1 < nparts && u < s->swap_prob) {
        acc[x] = aa_reduce_add(acc[x], parts[(k + 1) * len + x], s);
        acc[x] = aa_reduce_add(acc[x], parts[k * len + x], s);
        k += 2;
      } else
        acc[x] = aa_reduce_add(acc[x], parts[k++ * len + x], s);
    }
  }
}

static void section_roundtrip(double *acc, const double *parts, size_t nparts, size_t len, const aa_reduce_t *s) {
  size_t sec = s->section ? s->section : nparts;
  /* Seed 000 L1188-1207: dq_local is reloaded from out_dq_ref at a section
     start; L1326-1335: written back at the section end in the output
     dtype. The reload of a stored value is exact, so the round trip is one
     rounding to store_fmt per section. */
  for (size_t p0 = 0; p0 < nparts; p0 += sec) {
    size_t n = nparts - p0 < sec ? nparts - p0 : sec;
    chain(acc, parts + p0 * len, NULL, n, len, 0, s);
    for (size_t x = 0; x < len; x++)
      acc[x] = aa_reduce_rnd(acc[x], s->store_fmt);
  }
}

int aa_reduce_tile(double *acc, aa_reduce_stats_t *stats, const double *parts, size_t nparts, size_t len,
                   uint64_t tile, const aa_reduce_t *s, aa_reduce_fallback_fn fallback, void *fallback_ctx,
                   aa_error_t *err) {
  int st = aa_reduce_check(s, err);
  if (st != AA_OK) return st;
  if (stats != NULL) {
    stats->tiles++;
    stats->partials += nparts;
  }
  if (nparts == 0 || len == 0) return AA_OK;
  switch (s->kind) {
  case AA_REDUCE_FP32_ORDERED:
    chain(acc, parts, NULL, nparts, len, 0, s);
    return AA_OK;
  case AA_REDUCE_FP32_ORDERED_DESC:
    chain(acc, parts, NULL, nparts, len, 1, s);
    return AA_OK;
  case AA_REDUCE_FP32_ATOMIC: {
    size_t *perm = malloc(nparts * sizeof *perm);
    if (perm == NULL) return aa_error_set(err, AA_ENOMEM, "dq_reduce: no memory for a %zu-permutation", nparts);
    aa_reduce_order(perm, nparts, s->order_seed, tile);
    chain(acc, parts, perm, nparts, len, 0, s);
    free(perm);
    return AA_OK;
  }
  case AA_REDUCE_FP32_SPLITS:
    return splits(acc, parts, nparts, len, s, err);
  case AA_REDUCE_BF16_PAIR:
    return bf16_pair(acc, parts, nparts, len, s, err);
  case AA_REDUCE_FIXED:
    return aa_reduce_fixed_tile(acc, stats, parts, nparts, len, tile, s, fallback, fallback_ctx, err);
  case AA_REDUCE_SECTION_ROUNDTRIP:
    section_roundtrip(acc, parts, nparts, len, s);
    return AA_OK;
  case AA_REDUCE_FP32_JITTER:
    jitter(acc, parts, nparts, len, tile, s);
    return AA_OK;
  default:
    return aa_error_set(err, AA_EINVAL, "dq_reduce: invalid kind %d", (int)s->kind);
  }
}
