/* attnacc: dropout keep masks for a given tiling (tile-seeded pcg32, position-keyed Philox, u8 threshold). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <string.h>

#include "dropout-impl.h"
#include "rng.h"

void aa_dropout_fwd_tiles(size_t *tile_q, size_t *tile_k, const aa_dropout_t *d, size_t n_q, size_t n_k) {
  (void)n_q;
  (void)n_k;
  *tile_q = d->fwd_tile_q;
  *tile_k = d->fwd_tile_k;
}

void aa_dropout_bwd_tiles(size_t *tile_q, size_t *tile_k, const aa_dropout_t *d, size_t n_q, size_t n_k) {
  (void)n_q;
  *tile_q = d->bwd_tile_q;
  /* Twin _flash_attn_bwd_core: `if seqlen_k >= 512: 512 else 128`. */
  *tile_k = n_k >= d->bwd_tile_k ? d->bwd_tile_k : d->bwd_tile_k_short;
}

static size_t tile_count(size_t n, size_t tile, aa_dropout_count_t rule) {
  if (tile == 0) return 0;
  return rule == AA_DROPOUT_COUNT_FLOOR ? n / tile : (n + tile - 1) / tile;
}

uint64_t aa_dropout_tile_offset(const aa_dropout_t *d, size_t heads, size_t n_q, size_t n_k, size_t tile_q,
                                size_t tile_k, size_t head, size_t iq, size_t ik) {
  /* Twin L974-981 (backward) and the forward's dropout block: offset =
     ik + iq*NK + head*NK*NQ + batch*heads*NK*NQ, NK/NQ tile counts; the
     sum wraps mod 2^64 like the seed addition below. */
  uint64_t nk = tile_count(n_k, tile_k, d->tile_count);
  uint64_t nq = tile_count(n_q, tile_q, d->tile_count);
  return (uint64_t)ik + (uint64_t)iq * nk + (uint64_t)head * nk * nq + d->batch * (uint64_t)heads * nk * nq;
}

static void fill_tile_seeded(uint8_t *keep, const aa_dropout_t *d, size_t heads, size_t n_q, size_t n_k,
                             size_t tile_q, size_t tile_k) {
  uint64_t t32 = aa_dropout_t32(d->p);
  size_t ntq = (n_q + tile_q - 1) / tile_q, ntk = (n_k + tile_k - 1) / tile_k;
  for (size_t h = 0; h < heads; h++)
    for (size_t iq = 0; iq < ntq; iq++)
      for (size_t ik = 0; ik < ntk; ik++) {
        aa_pcg32_t rng;
        uint64_t off = aa_dropout_tile_offset(d, heads, n_q, n_k, tile_q, tile_k, h, iq, ik);
        aa_pcg32_seed(&rng, d->seed + off, AA_DROPOUT_PCG_STREAM);
        size_t r0 = iq * tile_q, c0 = ik * tile_k;
        size_t rows = n_q - r0 < tile_q ? n_q - r0 : tile_q;
        size_t cols = n_k - c0 < tile_k ? n_k - c0 : tile_k;
        /* Row-major over the nominal tile: a partial tile still consumes
           tile_k draws per row (the surplus is discarded); rows past n_q
           are never reached, so their draws need not be taken. */
        for (size_t r = 0; r < rows; r++) {
          uint8_t *row = keep + (h * n_q + r0 + r) * n_k + c0;
          for (size_t c = 0; c < cols; c++)
            row[c] = (uint64_t)aa_pcg32_next(&rng) < t32;
          for (size_t c = cols; c < tile_k; c++)
            (void)aa_pcg32_next(&rng);
        }
      }
}

static void fill_position_keyed(uint8_t *keep, const aa_dropout_t *d, size_t heads, size_t n_q, size_t n_k) {
  uint64_t t32 = aa_dropout_t32(d->p);
  unsigned t8 = aa_dropout_t8(d->p);
  int u8 = d->scheme == AA_DROPOUT_U8_THRESHOLD;
  for (size_t h = 0; h < heads; h++)
    for (size_t i = 0; i < n_q; i++) {
      uint8_t *row = keep + (h * n_q + i) * n_k;
      for (size_t j = 0; j < n_k; j++) {
        uint32_t w = aa_dropout_philox_word(d->seed, d->batch, h, i, j);
        row[j] = u8 ? (w >> 24) <= t8 : (uint64_t)w < t32;
      }
    }
}

int aa_dropout_mask(uint8_t *keep, double *keep_scale, const aa_dropout_t *d, size_t heads, size_t n_q, size_t n_k,
                    size_t tile_q, size_t tile_k, aa_error_t *err) {
  int st = aa_dropout_check(d, err);
  if (st != AA_OK) return st;
  size_t total, hq;
  if (aa_size_mul(&hq, heads, n_q) != AA_OK || aa_size_mul(&total, hq, n_k) != AA_OK)
    return aa_error_set(err, AA_ENOMEM, "dropout: mask of %zu x %zu x %zu elements is too large", heads, n_q, n_k);
  if (total > 0 && keep == NULL) return aa_error_set(err, AA_EINVAL, "dropout: NULL keep mask");
  /* The Philox counter holds row, column, head and batch in 32-bit words. */
  if ((d->scheme == AA_DROPOUT_POSITION_KEYED || d->scheme == AA_DROPOUT_U8_THRESHOLD) &&
      ((uint64_t)n_q > UINT32_MAX || (uint64_t)n_k > UINT32_MAX || (uint64_t)heads > UINT32_MAX ||
       d->batch > UINT32_MAX))
    return aa_error_set(err, AA_ERANGE, "dropout: position-keyed counters hold indices below 2^32");
  if (d->scheme == AA_DROPOUT_TILE_SEEDED && (tile_q < 1 || tile_k < 1))
    return aa_error_set(err, AA_EINVAL, "dropout: tile widths must be >= 1 (got %zu x %zu)", tile_q, tile_k);
  if (keep_scale != NULL) *keep_scale = aa_dropout_keep_scale(d);
  if (total == 0) return AA_OK;
  switch (d->scheme) {
  case AA_DROPOUT_TILE_SEEDED:
    fill_tile_seeded(keep, d, heads, n_q, n_k, tile_q, tile_k);
    break;
  case AA_DROPOUT_POSITION_KEYED:
  case AA_DROPOUT_U8_THRESHOLD:
    fill_position_keyed(keep, d, heads, n_q, n_k);
    break;
  default:
    memset(keep, 1, total);
    break;
  }
  return AA_OK;
}

int aa_dropout_mask_fwd(uint8_t *keep, double *keep_scale, const aa_dropout_t *d, size_t heads, size_t n_q,
                        size_t n_k, aa_error_t *err) {
  size_t tq, tk;
  if (d == NULL) return aa_error_set(err, AA_EINVAL, "dropout: NULL parameters");
  aa_dropout_fwd_tiles(&tq, &tk, d, n_q, n_k);
  return aa_dropout_mask(keep, keep_scale, d, heads, n_q, n_k, tq, tk, err);
}

int aa_dropout_mask_bwd(uint8_t *keep, double *keep_scale, const aa_dropout_t *d, size_t heads, size_t n_q,
                        size_t n_k, aa_error_t *err) {
  size_t tq, tk;
  if (d == NULL) return aa_error_set(err, AA_EINVAL, "dropout: NULL parameters");
  aa_dropout_bwd_tiles(&tq, &tk, d, n_q, n_k);
  return aa_dropout_mask(keep, keep_scale, d, heads, n_q, n_k, tq, tk, err);
}
