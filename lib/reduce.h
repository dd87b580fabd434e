/* attnacc: dQ reduction strategies (ordered, atomic, splits, BF16 pairs, bounded fixed point, section round trip). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_REDUCE_H
#define AA_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dQ is the one gradient that many KV blocks write into: a dQ tile (rows x d
   elements) receives one partial per KV block that is not skipped. A
   strategy is data (kind + parameters) and aa_reduce_tile adds the partials
   of one tile into the tile's accumulator in the strategy's exact order and
   arithmetic. Nothing here knows about attention: partials are plain
   arrays, so the module is tested on constructed inputs (tests/treduce*.c)
   and the attn pipeline routes its dQ through it (recipe key dq_reduce). */
typedef enum {
  AA_REDUCE_FP32_ORDERED =
      0, /* "fp32-ordered": acc += p_0, p_1, ... ascending KV block (FA2/FA3 dense deterministic) */
  AA_REDUCE_FP32_ORDERED_DESC, /* "fp32-ordered-desc": descending KV block (FA3/FA4 causal deterministic schedule) */
  AA_REDUCE_FP32_ATOMIC, /* "fp32-atomic": ascending adds in a seeded random order per tile (hardware atomics) */
  AA_REDUCE_FP32_SPLITS, /* "fp32-splits": per-split FP32 buffers summed in split order (FA2 deterministic) */
  AA_REDUCE_BF16_PAIR,   /* "bf16-pair": partials rounded to BF16, reduced in BF16 pairs ([blackwell-fa] 3.6 dense) */
  AA_REDUCE_FIXED,       /* "fixed": bounded (packed) fixed point with budget checks, FP64 fallback (003 3.6) */
  AA_REDUCE_SECTION_ROUNDTRIP, /* "section-roundtrip": ordered within a section, stored/reloaded between, [nki-bwd] */
  AA_REDUCE_FP32_JITTER, /* "fp32-jitter": ascending, each element's adjacent arrivals swapped at random (atomics) */
  AA_REDUCE_COUNT
} aa_reduce_kind_t;

/* bf16-pair: the shape of the BF16 reduction. */
typedef enum {
  AA_PAIR_TREE = 0, /* "tree": level-by-level pairwise tree (see aa_reduce_tile) */
  AA_PAIR_CHAIN,    /* "chain": sequential BF16 adds in ascending order (packed bf16x2 atomics into a BF16 buffer) */
  AA_PAIR_COUNT
} aa_reduce_pair_t;

/* fp32-splits: which split a KV block goes to. */
typedef enum {
  AA_SPLIT_STRIDED = 0, /* "strided": block p -> split p mod S (FA2's n-block loop strided by the split count) */
  AA_SPLIT_CONTIGUOUS,  /* "contiguous": split s gets blocks [s*c, (s+1)*c), c = ceil(nparts / S) */
  AA_SPLIT_COUNT
} aa_reduce_split_t;

/* A strategy. Every field is a recipe key `dq_reduce_<name>` (aa_reduce_set);
   defaults from aa_reduce_default. Fields a kind does not use are ignored. */
typedef struct {
  aa_reduce_kind_t kind;
  /* Arithmetic of the floating-point adds (all kinds): every add is the
     exact sum rounded to add_fmt, then stored in acc_fmt (the attn
     pipeline passes alu and bwd.dq_acc_fmt; both default to fp32). */
  aa_fmt_t add_fmt, acc_fmt;
  uint64_t order_seed; /* atomic: the permutation of a tile is a pure function of (order_seed, tile) */
  unsigned splits;     /* splits: S >= 1 */
  aa_reduce_split_t split_layout;
  aa_reduce_pair_t pair; /* bf16-pair */
  int scale_exp;         /* fixed: s, a partial x becomes the integer rne(x * 2^s) */
  unsigned width;        /* fixed: w in 2..32 bits (two's complement); w = 16 packs two per 32-bit word */
  size_t section;        /* section-roundtrip: partials per section (0 = all in one section) */
  aa_fmt_t store_fmt;    /* section-roundtrip: format of the store/reload between sections */
  int probe;             /* fixed: also evaluate the budget at scale_exp-8..+8 (stats.probe_*); no effect on acc */
  double swap_prob;      /* jitter: probability that two adjacent arrivals at one element come swapped, 0..0.5 */
} aa_reduce_t;

/* Scale exponents a fixed-point probe evaluates: scale_exp + k - AA_REDUCE_PROBE/2, k < AA_REDUCE_PROBE. */
#define AA_REDUCE_PROBE 17

/* Counters; aa_reduce_tile ADDS to them (callers sum over tiles). */
typedef struct {
  uint64_t tiles;           /* tiles reduced */
  uint64_t partials;        /* partials consumed */
  uint64_t conv_failures;   /* fixed: elements of partials with |rne(x 2^s)| >= 2^(w-1) (or not finite) */
  uint64_t sum_failures;    /* fixed: tile elements whose integer sum leaves [-2^(w-1), 2^(w-1)-1] */
  uint64_t budget_failures; /* fixed: tiles with at least one failed check (= FP64 recomputes) */
  uint64_t fp64_recomputes; /* tiles whose result came from the FP64 fallback */
  /* fixed with probe on: for each probed scale exponent, the tiles that
     would fail the budget, and the squared L2 distance of the tiles'
     reductions (FP64 fallback where they fail) from the FP32 ascending sum
     of the same partials; probe_ref2 is that sum's squared L2 norm. The
     double sums depend on the order tiles are merged (threads) in their
     last bits only. */
  uint64_t probe_tiles;
  uint64_t probe_fail[AA_REDUCE_PROBE];
  double probe_err2[AA_REDUCE_PROBE];
  double probe_ref2;
} aa_reduce_stats_t;

/* to += from, every counter (the probe arrays element by element). */
void aa_reduce_stats_add(aa_reduce_stats_t *to, const aa_reduce_stats_t *from);

/* FP64 recompute of a tile that failed its fixed-point budget: write the
   tile's dQ contribution (what the partials sum to, in binary64 or better)
   into out[len]. tile is the index given to aa_reduce_tile. Returns a status. */
typedef int (*aa_reduce_fallback_fn)(double *out, const double *parts, size_t nparts, size_t len, uint64_t tile,
                                     void *ctx);

/* Defaults: kind fp32-ordered, add/acc fp32, order_seed 0, splits 1
   strided, pair tree, scale_exp 16, width 32, section 0, store bf16. */
void aa_reduce_default(aa_reduce_t *out);

/* Names: "fp32-ordered", "fp32-ordered-desc", "fp32-atomic", "fp32-splits",
   "bf16-pair", "fixed", "section-roundtrip". */
const char *aa_reduce_kind_name(aa_reduce_kind_t kind);
int aa_reduce_kind_from_name(aa_reduce_kind_t *out, const char *name); /* AA_OK or AA_ENOTFOUND */
const char *aa_reduce_pair_name(aa_reduce_pair_t p);                   /* "tree", "chain" */
const char *aa_reduce_split_name(aa_reduce_split_t s);                 /* "strided", "contiguous" */

/* Set one parameter by its short name: "kind" (a kind name), "order_seed",
   "splits", "split_layout", "pair", "scale_exp", "width", "section",
   "store_fmt", "add_fmt", "acc_fmt", "probe" (on|off). AA_ENOTFOUND for an unknown key,
   AA_EINVAL for a bad value (message names both). */
int aa_reduce_set(aa_reduce_t *s, const char *key, const char *value, aa_error_t *err);
/* Canonical "key = value" lines, each parameter key prefixed by `prefix`
   (e.g. "dq_reduce_"); the kind line is `<prefix without the trailing '_'>
   = NAME`. flags: AA_REDUCE_FMT_USED writes only the parameters the kind
   reads; AA_REDUCE_FMT_PIPELINE leaves out add_fmt, acc_fmt, section and
   store_fmt (the attn pipeline takes them from alu, bwd.dq_acc_fmt,
   bwd.section and bwd.dq_section_fmt). snprintf-style: returns the length
   needed (buf may be NULL when len is 0). */
#define AA_REDUCE_FMT_USED 1u
#define AA_REDUCE_FMT_PIPELINE 2u
size_t aa_reduce_format(char *buf, size_t len, const aa_reduce_t *s, const char *prefix, unsigned flags);
/* Parameter ranges (splits >= 1, 2 <= width <= 32, |scale_exp| <= 200). */
int aa_reduce_check(const aa_reduce_t *s, aa_error_t *err);
/* 1 when two strategies reduce identically (ignores fields the kind does not read). */
int aa_reduce_equal(const aa_reduce_t *a, const aa_reduce_t *b);

/* Reduce one dQ tile: parts holds nparts partials of len values each
   (parts[p*len + x]; partial p = the contribution of the tile's p-th KV
   block in ascending KV order; values are FP32 numbers held as doubles).
   acc[len] is the tile's accumulator on entry (0 for a fresh tile, or the
   value reloaded from a previous section) and the result on exit, stored in
   acc_fmt. With nparts = 0 acc is unchanged. tile identifies the tile for
   the atomic order and the fallback. Arithmetic, element by element, with
   add(a, b) = rnd(rnd(a + b, add_fmt), acc_fmt):
   - fp32-ordered: acc = add(...add(add(acc, p_0), p_1)..., p_{n-1});
     desc: the same from p_{n-1} down to p_0.
   - fp32-atomic: the same adds in the order pi(0), pi(1), ... where pi is a
     Fisher-Yates shuffle of 0..n-1 drawn from a pcg32 stream seeded from
     aa_rng_derive(order_seed, {tile}); one order for the whole tile (a
     block's atomics for a tile issue together).
   - fp32-splits: buffers b_s = 0; each partial added into its split's
     buffer in ascending order; then acc = add(...add(acc, b_0)..., b_{S-1}).
     With S = 1 and acc = 0 this is fp32-ordered.
   - bf16-pair: v_p = bf16(p_p) (RNE from the FP32 value); tree: level by
     level, v'_i = bf16(v_{2i} + v_{2i+1}) (exact sum rounded once, as a
     bf16x2 add), an odd last element moves up unchanged, until one value r
     remains; chain: r = bf16(...bf16(v_0 + v_1) + v_2 ...). Then acc =
     add(acc, r): the BF16 result is published into the FP32 accumulator.
   - fixed: q_p = rne(p_p * 2^s) (ties to even; exact scaling); a partial
     element fails the conversion check if |q| >= 2^(w-1) or p is not finite.
     The q are summed with w-bit two's complement wrap-around (w = 16: two
     elements per 32-bit word, lo + hi*2^16 added as one 32-bit integer and
     recovered as lo = sext16(W), hi = (W - lo) >> 16); after the tile each
     element's exact integer sum must lie in [-2^(w-1), 2^(w-1)-1] (the
     condition under which the wrapped/packed words recover it exactly).
     All checks pass: acc = add(acc, fp32(sum * 2^-s)). Any check fails:
     the whole tile is recomputed by fallback (NULL: binary64 sum of the
     partials in ascending order) and acc = rnd(acc + R, acc_fmt) in binary64.
   - fp32-jitter: element by element, the ascending adds with adjacent
     arrivals transposed at random: for k = 0, 1, ...: with probability
     swap_prob (a uniform draw u < swap_prob, u = 53 bits of a pcg64 stream
     seeded from aa_rng_derive(order_seed, {tile, element})) add p_{k+1}
     then p_k and go on at k + 2, else add p_k and go on at k + 1. The
     model of FP32 atomics whose arrivals are nearly always in one order
     (one thread block per KV block, launched in order and running in
     step), with a rare overtaking pair at a single address; swap_prob 0 is
     fp32-ordered.
   - section-roundtrip: ordered adds; after every `section` partials and
     after the last one, acc = rnd(acc, store_fmt) (the write and reload
     through HBM, [nki-bwd] attention_bwd.py:1188-1207, 1326-1335).
   stats (may be NULL) is added to. Returns AA_EINVAL for a bad strategy,
   AA_ENOMEM, or the fallback's status. */
int aa_reduce_tile(double *acc, aa_reduce_stats_t *stats, const double *parts, size_t nparts, size_t len,
                   uint64_t tile, const aa_reduce_t *s, aa_reduce_fallback_fn fallback, void *fallback_ctx,
                   aa_error_t *err);

/* The permutation fp32-atomic uses for (order_seed, tile): perm[0..n-1]. */
void aa_reduce_order(size_t *perm, size_t n, uint64_t order_seed, uint64_t tile);

#ifdef __cplusplus
}
#endif
#endif
