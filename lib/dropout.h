/* attnacc: dropout keep-mask schemes (tile-seeded NKI twin, position-keyed Philox, FA2 u8), rates, comparison. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_DROPOUT_H
#define AA_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backward that re-draws the dropout mask is right only if it draws the
   forward's mask exactly. A scheme is data (aa_dropout_t) and the functions
   below fill a keep mask [heads][n_q][n_k] (uint8, 1 keep / 0 drop, the
   layout of aa_problem_t.keep) for a given tiling, so the forward's mask
   (drawn with the forward tiling) and the backward's redraw (drawn with the
   backward tiling) can be compared bit by bit. Nothing here knows about
   attention.

   Schemes (the recipe key `dropout_scheme`):
   - "tile-seeded" (NKI reference twin, [nki-bwd] attention.py:974-981
     in the twin's backward core): one generator per (batch, head, q-tile, k-tile),
     re-seeded with seed + offset where
       offset = ik + iq*NK + head*NK*NQ + batch*heads*NK*NQ,
     ik, iq the tile indices and NK, NQ the TILE COUNTS of the tiling in use
     (not the lengths: the twin writes k_seq_n_tiles * q_seq_n_tiles in the
     backward core and seq_k_num_tiles * seq_q_num_tiles in the forward; the
     forward's k index counts 512-wide B_F_SIZE chunks). NK = ceil(n_k/tile_k)
     by default; tile_count = floor reproduces the twin's seqlen // tile,
     which is 0 in the forward for n_k < 512 and then collapses every q tile,
     head and batch onto the same seed (the twin asserts divisibility, we do
     not). The generator of a tile is pcg32 seeded by
       aa_pcg32_seed(rng, initstate = seed + offset (mod 2^64),
                     initseq = AA_DROPOUT_PCG_STREAM),
     and the elements of the tile consume one 32-bit output each, row-major
     over the NOMINAL tile_q x tile_k shape (a hardware tile draws a full
     tile of randomness; draws of positions past the end of the sequence are
     discarded). seed + offset is a sum, so tile (seed, offset) is tile
     (seed + 1, offset - 1): streams of nearby seeds overlap, as in the twin.
   - "position-keyed" (the correct reference): each keep bit is a pure
     function of (seed, batch, head, row, column): Philox4x32-10 (Salmon et
     al. 2011, the FA2 generator) with counter (column, row, head, batch)
     and key (seed mod 2^32, seed >> 32); output word 0 is the uniform u.
     Any tiling redraws the same mask.
   - "u8-threshold" (FA2, [fa2] dropout.h, [philox]): keep = 1 - p in binary32
     (FA2 computes it in float), threshold t = floor(keep*255); an element is
     kept when its 8-bit random value r <= t, where r = (word 0 >> 24) of the
     same position-keyed Philox output; the rescale is exactly 1/keep. The
     real keep rate is (t + 1)/256, not keep.
   For tile-seeded and position-keyed an element is kept when
   u < T = floor((1 - p) * 2^32) (32-bit uniform u; T computed exactly), so
   the keep probability is T / 2^32, within 2^-32 of 1 - p; the rescale
   (keep_scale) is 1/(1 - p) in binary64. */
typedef enum {
  AA_DROPOUT_NONE = 0,       /* "none": no dropout (keep everything, keep_scale 1) */
  AA_DROPOUT_TILE_SEEDED,    /* "tile-seeded" */
  AA_DROPOUT_POSITION_KEYED, /* "position-keyed" */
  AA_DROPOUT_U8_THRESHOLD,   /* "u8-threshold" */
  AA_DROPOUT_SCHEME_COUNT
} aa_dropout_scheme_t;

/* How NK and NQ of the tile-seeded offset count tiles. */
typedef enum {
  AA_DROPOUT_COUNT_CEIL = 0, /* "ceil": every tile that is visited, including a partial last one */
  AA_DROPOUT_COUNT_FLOOR,    /* "floor": the twin's seqlen // tile_size */
  AA_DROPOUT_COUNT_COUNT
} aa_dropout_count_t;

/* pcg32 stream selector (initseq) of every tile-seeded generator: the ASCII
   bytes of "dropout". Fixed: changing it changes every tile-seeded mask. */
#define AA_DROPOUT_PCG_STREAM UINT64_C(0x64726f706f7574)

/* A scheme and its parameters; every field is a recipe key `dropout_<name>`
   (aa_dropout_set; the scheme is `dropout_scheme`). Defaults from
   aa_dropout_default (NKI twin tiles). */
typedef struct {
  aa_dropout_scheme_t scheme;
  double p; /* drop probability, 0 <= p < 1 */
  uint64_t seed;
  uint64_t batch;                /* batch index of this (single-batch) problem */
  size_t fwd_tile_q, fwd_tile_k; /* forward tiling of the mask draw (twin: 128 x 512 chunks) */
  size_t bwd_tile_q;             /* backward q tile (twin: 128) */
  size_t bwd_tile_k;             /* backward k tile when n_k >= bwd_tile_k (twin: 512) ... */
  size_t bwd_tile_k_short;       /* ... else this one (twin: 128) */
  aa_dropout_count_t tile_count; /* NK, NQ of the offset */
} aa_dropout_t;

/* Defaults: scheme none, p 0, seed 0, batch 0, fwd 128 x 512, bwd 128 x
   512 (n_k >= 512) else 128 x 128, tile_count ceil. */
void aa_dropout_default(aa_dropout_t *out);

const char *aa_dropout_scheme_name(aa_dropout_scheme_t s); /* "none", "tile-seeded", ... ("?" if invalid) */
int aa_dropout_scheme_from_name(aa_dropout_scheme_t *out, const char *name); /* AA_OK or AA_ENOTFOUND */
const char *aa_dropout_count_name(aa_dropout_count_t c);                     /* "ceil", "floor" */

/* Set one parameter by short name: "scheme", "p", "seed", "batch",
   "fwd_tile_q", "fwd_tile_k", "bwd_tile_q", "bwd_tile_k",
   "bwd_tile_k_short", "tile_count". AA_ENOTFOUND for an unknown key,
   AA_EINVAL for a bad value (the message names both). */
int aa_dropout_set(aa_dropout_t *d, const char *key, const char *value, aa_error_t *err);
/* Canonical "key = value" lines of every parameter, keys prefixed by
   `prefix` (e.g. "dropout_"; the scheme line is `<prefix>scheme`).
   snprintf-style: returns the length needed. */
size_t aa_dropout_format(char *buf, size_t len, const aa_dropout_t *d, const char *prefix);
/* Ranges: valid scheme and count rule, 0 <= p < 1 (p finite), tile widths
   >= 1. AA_EINVAL with a message. */
int aa_dropout_check(const aa_dropout_t *d, aa_error_t *err);

/* Rescale applied to kept weights: 1 for none, 1/(1-p) (binary64) for
   tile-seeded and position-keyed, 1/fl32(1-p) for u8-threshold. */
double aa_dropout_keep_scale(const aa_dropout_t *d);
/* Exact probability that one element is kept: 1 (none), T/2^32 (tile-seeded,
   position-keyed), (floor(fl32(1-p)*255) + 1)/256 (u8-threshold). */
double aa_dropout_expected_keep(const aa_dropout_t *d);
/* Multiplicative bias of E[O] implied by the rescale: expected_keep *
   keep_scale - 1 (E[m*s] for every weight, so E[O] = (1 + bias) O). */
double aa_dropout_implied_bias(const aa_dropout_t *d);

/* Tilings: the forward draws with (fwd_tile_q, fwd_tile_k); the backward
   with bwd_tile_q and bwd_tile_k when n_k >= bwd_tile_k, else
   bwd_tile_k_short (the twin's `if seqlen_k >= 512`). */
void aa_dropout_fwd_tiles(size_t *tile_q, size_t *tile_k, const aa_dropout_t *d, size_t n_q, size_t n_k);
void aa_dropout_bwd_tiles(size_t *tile_q, size_t *tile_k, const aa_dropout_t *d, size_t n_q, size_t n_k);

/* The tile-seeded offset of tile (iq, ik) of query head `head` for a
   problem of `heads` heads and the given tiling (formula above, mod 2^64). */
uint64_t aa_dropout_tile_offset(const aa_dropout_t *d, size_t heads, size_t n_q, size_t n_k, size_t tile_q,
                                size_t tile_k, size_t head, size_t iq, size_t ik);

/* Fill keep[heads][n_q][n_k] for the scheme drawn with tiling (tile_q,
   tile_k) (only tile-seeded reads the tiling), and *keep_scale (may be
   NULL). Scheme none fills ones. AA_EINVAL for bad parameters, AA_ENOMEM
   for an impossible size. */
int aa_dropout_mask(uint8_t *keep, double *keep_scale, const aa_dropout_t *d, size_t heads, size_t n_q, size_t n_k,
                    size_t tile_q, size_t tile_k, aa_error_t *err);
/* The same with the forward's / the backward's tiling. */
int aa_dropout_mask_fwd(uint8_t *keep, double *keep_scale, const aa_dropout_t *d, size_t heads, size_t n_q,
                        size_t n_k, aa_error_t *err);
int aa_dropout_mask_bwd(uint8_t *keep, double *keep_scale, const aa_dropout_t *d, size_t heads, size_t n_q,
                        size_t n_k, aa_error_t *err);

/* Realised keep rate: the fraction of nonzero entries of keep[n] (0 for n = 0). */
double aa_dropout_keep_rate(const uint8_t *keep, size_t n);
/* Number and fraction of positions where (a[i] != 0) != (b[i] != 0). */
size_t aa_dropout_mismatch_count(const uint8_t *a, const uint8_t *b, size_t n);
double aa_dropout_mismatch(const uint8_t *a, const uint8_t *b, size_t n);

/* Estimate of the E[O] bias over nseeds independent draws, draw s using
   seed + s * 2^32 (so tile-seeded draws share no tile stream while offsets
   stay below 2^32): for each draw the forward mask is drawn and
   b_s = keep_scale * (kept / elements) - 1 is the bias of that draw's
   average weight (E[O] = (1 + E[b]) O since every weight gets the same
   E[m*s]). *mean = mean of b_s, *half_width = 1.96 * sd(b_s)/sqrt(nseeds)
   (normal 95% interval; 0 when nseeds < 2). Each draw covers heads x n_q x
   n_k elements. */
int aa_dropout_bias_estimate(double *mean, double *half_width, const aa_dropout_t *d, size_t heads, size_t n_q,
                             size_t n_k, unsigned nseeds, aa_error_t *err);

/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC 2011): out = bijection of
   the 128-bit counter ctr under the 64-bit key. Exposed for tests. */
void aa_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);

#ifdef __cplusplus
}
#endif
#endif
