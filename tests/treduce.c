/* attnacc: tests of the dQ reduction strategies (exact sums, fallbacks, hand-derived BF16 pairs, atomic orders,
 * splits). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <fenv.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnacc.h"
#include "tests.h"

static uint64_t seed;

static uint64_t dbits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Strategy with its parameters set from "key=value,key=value". */
static aa_reduce_t strat(const char *kind, const char *params) {
  aa_reduce_t s;
  aa_error_t err;
  aa_reduce_default(&s);
  if (aa_reduce_set(&s, "kind", kind, &err) != AA_OK) AA_FAIL("setup %s: %s", kind, err.msg);
  if (params != NULL) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", params);
    for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
      char *eq = strchr(tok, '=');
      if (eq == NULL) continue;
      *eq = '\0';
      if (aa_reduce_set(&s, tok, eq + 1, &err) != AA_OK) AA_FAIL("setup %s %s: %s", kind, tok, err.msg);
    }
  }
  return s;
}

static int run(double *acc, aa_reduce_stats_t *st, const double *parts, size_t np, size_t len, uint64_t tile,
               const aa_reduce_t *s) {
  aa_error_t err = {{0}};
  int rc = aa_reduce_tile(acc, st, parts, np, len, tile, s, NULL, NULL, &err);
  if (rc != AA_OK) AA_FAIL("aa_reduce_tile %s: status %d (%s)", aa_reduce_kind_name(s->kind), rc, err.msg);
  return rc;
}

/* 1. Exactly representable partials: every strategy returns the exact sum.
   Partials are k * 2^e with |k| <= 8 and one e per case, at most 16 of
   them, so every partial sum is an integer multiple of 2^e below 2^8 * 2^e
   in magnitude: exact in BF16, FP32 and in the fixed-point words. The
   expected sum is the int64 sum of the k (independent of the library). */
static void test_exact_all(aa_pcg64_t *rng) {
  enum { LEN = 9, MAXP = 16 };
  double parts[MAXP * LEN], acc[LEN];
  int64_t ks[MAXP * LEN];
  for (int it = 0; it < 200; it++) {
    size_t np = 1 + (size_t)(aa_pcg64_uniform(rng) * MAXP);
    int e = (int)(aa_pcg64_uniform(rng) * 13) - 6;
    for (size_t i = 0; i < np * LEN; i++) {
      ks[i] = (int64_t)(aa_pcg64_uniform(rng) * 17) - 8;
      parts[i] = ldexp((double)ks[i], e);
    }
    char p16[64], p32[64];
    snprintf(p16, sizeof p16, "width=16,scale_exp=%d", 4 - e); /* |q| <= 8*16, sums <= 2^11 */
    snprintf(p32, sizeof p32, "width=32,scale_exp=%d", 16 - e);
    aa_reduce_t ss[] = {strat("fp32-ordered", NULL),
                        strat("fp32-ordered-desc", NULL),
                        strat("fp32-atomic", "order_seed=7"),
                        strat("fp32-splits", "splits=3"),
                        strat("fp32-splits", "splits=4,split_layout=contiguous"),
                        strat("bf16-pair", NULL),
                        strat("bf16-pair", "pair=chain"),
                        strat("fixed", p16),
                        strat("fixed", p32),
                        strat("fixed", "width=20,scale_exp=0"),
                        strat("section-roundtrip", "section=3,store_fmt=bf16"),
                        strat("fp32-jitter", "swap_prob=0.5,order_seed=3")};
    if (e < 0) ss[9] = strat("fixed", "width=24,scale_exp=6"); /* e >= -6: k 2^e 2^6 is an integer */
    for (size_t k = 0; k < sizeof ss / sizeof ss[0]; k++) {
      aa_reduce_stats_t st = {0};
      for (size_t x = 0; x < LEN; x++)
        acc[x] = 0.0;
      if (run(acc, &st, parts, np, LEN, (uint64_t)it, &ss[k]) != AA_OK) continue;
      for (size_t x = 0; x < LEN; x++) {
        int64_t sum = 0;
        for (size_t p = 0; p < np; p++)
          sum += ks[p * LEN + x];
        double want = ldexp((double)sum, e);
        if (acc[x] != want)
          AA_FAIL("exact %s (seed %" PRIu64 ", it %d, np %zu, e %d, x %zu): got %a (0x%016" PRIx64 ") want %a",
                  aa_reduce_kind_name(ss[k].kind), seed, it, np, e, x, acc[x], dbits(acc[x]), want);
      }
      AA_CHECK(st.fp64_recomputes == 0 && st.conv_failures == 0 && st.sum_failures == 0,
               "exact %s (it %d): unexpected budget failures %" PRIu64, aa_reduce_kind_name(ss[k].kind), it,
               st.fp64_recomputes);
      AA_CHECK(st.tiles == 1 && st.partials == np, "exact %s: stats tiles %" PRIu64 " partials %" PRIu64,
               aa_reduce_kind_name(ss[k].kind), st.tiles, st.partials);
    }
  }
}

/* 1b. Wider exact sums for the FP32 and fixed strategies: k in [-2^10, 2^10]
   times 2^e with e in [-3, 3] per partial, up to 64 partials: the sums are
   multiples of 2^-3 below 2^19, 22 bits, exact in FP32; the integer words
   of fixed (s = 3, w = 32) stay below 2^22 * 64. Intermediate wrap-around
   in a 16-bit packed lane is exercised with s = 3, w = 16 on sums that end
   in range: expected exact as long as the final sum fits. */
static void test_exact_fp32(aa_pcg64_t *rng) {
  enum { LEN = 7, MAXP = 64 };
  double parts[MAXP * LEN], acc[LEN];
  aa_reduce_t ss[] = {strat("fp32-ordered", NULL),
                      strat("fp32-ordered-desc", NULL),
                      strat("fp32-atomic", "order_seed=99"),
                      strat("fp32-splits", "splits=5"),
                      strat("fixed", "width=32,scale_exp=3"),
                      strat("section-roundtrip", "section=5,store_fmt=fp32")};
  for (int it = 0; it < 100; it++) {
    size_t np = 1 + (size_t)(aa_pcg64_uniform(rng) * MAXP);
    int64_t want8[LEN] = {0}; /* sums in units of 2^-3 */
    for (size_t p = 0; p < np; p++)
      for (size_t x = 0; x < LEN; x++) {
        int64_t k = (int64_t)(aa_pcg64_uniform(rng) * 2049) - 1024;
        int e = (int)(aa_pcg64_uniform(rng) * 7) - 3;
        parts[p * LEN + x] = ldexp((double)k, e);
        want8[x] += k * (INT64_C(1) << (e + 3));
      }
    for (size_t k = 0; k < sizeof ss / sizeof ss[0]; k++) {
      for (size_t x = 0; x < LEN; x++)
        acc[x] = 0.0;
      if (run(acc, NULL, parts, np, LEN, (uint64_t)it, &ss[k]) != AA_OK) continue;
      for (size_t x = 0; x < LEN; x++) {
        double want = ldexp((double)want8[x], -3);
        if (acc[x] != want)
          AA_FAIL("exact-fp32 %s (seed %" PRIu64 ", it %d, np %zu, x %zu): got %a want %a",
                  aa_reduce_kind_name(ss[k].kind), seed, it, np, x, acc[x], want);
      }
    }
  }
  /* Packed lanes with intermediate overflow: +30000, +30000, -30000, -29999
     in the high lane and the negatives in the low lane: the running lane
     sums leave int16 but the final ones (1 and -1) are in range. */
  double wp[4 * 3] = {30000, -30000, 5, 30000, -30000, -7, -30000, 30000, 1, -29999, 29999, 0};
  double wacc[3] = {0, 0, 0};
  aa_reduce_t s16 = strat("fixed", "width=16,scale_exp=0");
  aa_reduce_stats_t st = {0};
  run(wacc, &st, wp, 4, 3, 0, &s16);
  AA_CHECK(wacc[0] == 1 && wacc[1] == -1 && wacc[2] == -1 && st.fp64_recomputes == 0,
           "fixed w=16 wrap-around: got %a %a %a (recomputes %" PRIu64 "), want 1 -1 -1", wacc[0], wacc[1], wacc[2],
           st.fp64_recomputes);
}

/* A fallback that records which tiles it was called for and returns the
   binary64 sum in descending order (so its use is visible in the bits). */
typedef struct {
  int calls;
  uint64_t tiles[16];
} fb_log_t;

static int fb_record(double *out, const double *parts, size_t np, size_t len, uint64_t tile, void *ctx) {
  fb_log_t *log = ctx;
  if (log->calls < 16) log->tiles[log->calls] = tile;
  log->calls++;
  for (size_t x = 0; x < len; x++) {
    double s = 0;
    for (size_t p = np; p-- > 0;)
      s += parts[p * len + x];
    out[x] = s;
  }
  return AA_OK;
}

/* 2. Constructed budget failures (w = 16, s = 8: a partial fits iff
   |rne(x 256)| < 2^15, i.e. |x| < 128 - 2^-9). Eight tiles of four
   partials and two elements:
   tile 0, 2, 4, 6: ordinary values (|x| < 1): no failure;
   tile 1: one element holds 200 (conversion failure, 1 element);
   tile 3: 4 x 100 in element 0: every conversion fits, the sum 102400 does
           not (1 sum failure); element 1 sums to -4 (fine);
   tile 5: 127.998046875 = 128 - 2^-9 rounds (tie, to even) to 32768 = 2^15:
           conversion failure; 127.99609375 = 128 - 2^-8 gives 32767: fits;
   tile 7: 100, 100, -100, -28 in element 1 (a high lane): intermediate
           sums overflow, the final 72 (18432) is in range: no failure.
   Expected: 3 recomputes (tiles 1, 3, 5), 2 conversion failures, 1 sum
   failure; failed tiles hold the binary64 sum exactly (acc_fmt fp64; the
   values are dyadic so the binary64 sum is exact). */
static void test_fallback(void) {
  enum { NT = 8, NP = 4, LEN = 2 };
  double parts[NT][NP * LEN];
  for (int t = 0; t < NT; t++)
    for (int p = 0; p < NP; p++)
      for (int x = 0; x < LEN; x++)
        parts[t][p * LEN + x] = ldexp((double)((t + 1) * (p + 2) * (x ? -1 : 1)), -6);
  parts[1][2 * LEN + 1] = 200.0;
  for (int p = 0; p < NP; p++)
    parts[3][p * LEN + 0] = 100.0, parts[3][p * LEN + 1] = -1.0;
  parts[5][0 * LEN + 0] = 128.0 - 0x1p-9;
  parts[5][1 * LEN + 1] = 128.0 - 0x1p-8;
  parts[7][0 * LEN + 1] = 100.0, parts[7][1 * LEN + 1] = 100.0, parts[7][2 * LEN + 1] = -100.0,
                     parts[7][3 * LEN + 1] = -28.0;
  for (int pass = 0; pass < 3; pass++) {
    /* pass 0: default fallback, acc fp64; pass 1: acc fp32; pass 2: recording callback */
    aa_reduce_t s = strat("fixed", pass == 0 ? "width=16,scale_exp=8,acc_fmt=fp64" : "width=16,scale_exp=8");
    aa_reduce_stats_t st = {0};
    fb_log_t log = {0};
    for (int t = 0; t < NT; t++) {
      double acc[LEN] = {0.25, -0.5}; /* a reloaded accumulator: the result is acc + tile sum */
      aa_error_t err = {{0}};
      int rc = aa_reduce_tile(acc, &st, parts[t], NP, LEN, (uint64_t)t, &s, pass == 2 ? fb_record : NULL, &log, &err);
      AA_CHECK(rc == AA_OK, "fallback pass %d tile %d: status %d %s", pass, t, rc, err.msg);
      for (int x = 0; x < LEN; x++) {
        double exact = x ? -0.5 : 0.25; /* dyadic values: these binary64 sums are exact */
        for (int p = 0; p < NP; p++)
          exact += parts[t][p * LEN + x];
        double want = pass == 0 ? exact : (double)(float)exact;
        if (acc[x] != want)
          AA_FAIL("fallback pass %d tile %d x %d: got %a want %a (the FP64 recompute / exact)", pass, t, x, acc[x],
                  want);
      }
    }
    AA_CHECK(st.fp64_recomputes == 3 && st.budget_failures == 3,
             "fallback pass %d: %" PRIu64 " recomputes, want 3 (tiles 1, 3, 5)", pass, st.fp64_recomputes);
    AA_CHECK(st.conv_failures == 2, "fallback pass %d: %" PRIu64 " conversion failures, want 2", pass,
             st.conv_failures);
    AA_CHECK(st.sum_failures == 1, "fallback pass %d: %" PRIu64 " sum failures, want 1", pass, st.sum_failures);
    AA_CHECK(st.tiles == NT, "fallback pass %d: %" PRIu64 " tiles", pass, st.tiles);
    if (pass == 2)
      AA_CHECK(log.calls == 3 && log.tiles[0] == 1 && log.tiles[1] == 3 && log.tiles[2] == 5,
               "fallback callback: %d calls (tiles %" PRIu64 " %" PRIu64 " %" PRIu64 "), want tiles 1 3 5", log.calls,
               log.tiles[0], log.tiles[1], log.tiles[2]);
  }
}

/* 3. bf16-pair on constructed inputs, expectations derived by hand (BF16:
   8 significant bits, ulp(1) = 2^-7, ulp in [2,4) = 2^-6).
   Case A, partials 1, 2^-8, 1 + 2^-7, 3 2^-8, 2^-7 + 2^-20:
     to BF16: 1, 2^-8, 1 + 2^-7, 3 2^-8, 2^-7 (2^-20 is below half an ulp);
     tree level 1: 1 + 2^-8 is a tie -> 1 (even);
                   (1 + 2^-7) + 3 2^-8 = 1 + 2.5 2^-7, tie -> 1 + 2^-6 (even);
                   2^-7 moves up;
     level 2: 1 + (1 + 2^-6) = 2 + 2^-6 exact; 2^-7 moves up;
     level 3: 2 + 1.5 2^-6, tie -> 2 + 2^-5 (even).          tree = 2.03125
     chain: 1 + 2^-8 -> 1; 1 + 1 + 2^-7 = 2 + 0.5 ulp -> 2; 2 + 0.75 ulp ->
     2 + 2^-6; 2 + 2^-6 + 2^-7 = tie -> 2 + 2^-5.           chain = 2.03125
     (the FP32 ordered sum is 2 + 2^-5 + 2^-20.)
   Case B, partials 1, 2^-8, 2^-8, 2^-8:
     tree: 1 + 2^-8 tie -> 1; 2^-8 + 2^-8 = 2^-7; 1 + 2^-7 exact. tree = 1 + 2^-7
     chain: 1 + 2^-8 -> 1 three times.                        chain = 1
   Case C, partials 2^-9, 2^-9, 2^-9, 2^-9, 1 (the odd last value moves up):
     tree: 2^-8, 2^-8 | 1 -> 2^-7 | 1 -> 1 + 2^-7 (exact).       tree = 1 + 2^-7
     (merging the odd value into its left neighbour would give 2^-8 + 1 ->
     1 (tie), then 2^-8 + 1 -> 1.)
   The result is published into the FP32 accumulator: with acc = 0.5 on
   entry the result is fl32(0.5 + r), exact here. */
static void test_bf16_pair(void) {
  double A[5] = {1.0, 0x1p-8, 1.0 + 0x1p-7, 3 * 0x1p-8, 0x1p-7 + 0x1p-20};
  double B[4] = {1.0, 0x1p-8, 0x1p-8, 0x1p-8};
  double C[5] = {0x1p-9, 0x1p-9, 0x1p-9, 0x1p-9, 1.0};
  struct {
    const double *p;
    size_t n;
    const char *pair;
    double want;
  } cases[] = {{A, 5, "pair=tree", 2.03125},
               {A, 5, "pair=chain", 2.03125},
               {B, 4, "pair=tree", 1.0 + 0x1p-7},
               {B, 4, "pair=chain", 1.0},
               {C, 5, "pair=tree", 1.0 + 0x1p-7}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    aa_reduce_t s = strat("bf16-pair", cases[c].pair);
    double acc = 0.5;
    run(&acc, NULL, cases[c].p, cases[c].n, 1, 0, &s);
    AA_CHECK(acc == 0.5 + cases[c].want, "bf16-pair case %zu (%s): got %a (0x%016" PRIx64 ") want %a", c,
             cases[c].pair, acc, dbits(acc), 0.5 + cases[c].want);
  }
  /* FP32 ordered on A keeps the 2^-20: a sanity anchor for the constructed input. */
  aa_reduce_t o = strat("fp32-ordered", NULL);
  double acc = 0;
  run(&acc, NULL, A, 5, 1, 0, &o);
  AA_CHECK(acc == 2.03125 + 0x1p-20, "fp32-ordered on case A: got %a want %a", acc, 2.03125 + 0x1p-20);
}

/* 4. Atomic orders: a tile of partials 1, 2^-24, 2^-24, 2^-24, -1 gives
   2^-23 + 2^-24 (0x1.8p-23) when 1 and -1 meet first and 0 when each
   small value meets 1 first (1 + 2^-24 ties to 1), others for mixed orders;
   over 256 tiles two seeds must differ somewhere, one seed must repeat
   bit for bit, and the result set must contain both extremes. The order
   itself must be a permutation that covers all 3! orders about equally. */
static void test_atomic(void) {
  enum { NT = 256, LEN = 3 };
  double parts[5 * LEN];
  const double vals[5] = {1.0, 0x1p-24, 0x1p-24, 0x1p-24, -1.0};
  for (int p = 0; p < 5; p++)
    for (int x = 0; x < LEN; x++)
      parts[p * LEN + x] = vals[p];
  double r[3][NT * LEN];
  const uint64_t seeds[3] = {1, 2, 1};
  for (int k = 0; k < 3; k++) {
    char prm[32];
    snprintf(prm, sizeof prm, "order_seed=%" PRIu64, seeds[k]);
    aa_reduce_t s = strat("fp32-atomic", prm);
    for (int t = 0; t < NT; t++) {
      for (int x = 0; x < LEN; x++)
        r[k][t * LEN + x] = 0.0;
      run(r[k] + t * LEN, NULL, parts, 5, LEN, (uint64_t)t, &s);
    }
  }
  AA_CHECK(memcmp(r[0], r[2], sizeof r[0]) == 0, "fp32-atomic: the same order seed gave different bits");
  AA_CHECK(memcmp(r[0], r[1], sizeof r[0]) != 0, "fp32-atomic: order seeds 1 and 2 gave identical bits on 256 tiles");
  /* Each tile's value is the float loop in the order aa_reduce_order gives
     (the same order for every element of the tile). */
  int saw0 = 0, sawmax = 0;
  for (int t = 0; t < NT; t++) {
    size_t pm[5];
    aa_reduce_order(pm, 5, 1, (uint64_t)t);
    volatile float f = 0;
    for (int k = 0; k < 5; k++)
      f += (float)vals[pm[k]];
    double v = r[0][t * LEN];
    saw0 |= v == 0.0;
    sawmax |= v == 0x1.8p-23;
    for (int x = 0; x < LEN; x++)
      AA_CHECK(r[0][t * LEN + x] == (double)f, "fp32-atomic tile %d x %d: got %a, float loop in the drawn order %a",
               t, x, r[0][t * LEN + x], (double)f);
  }
  AA_CHECK(saw0 && sawmax, "fp32-atomic: 256 tiles never gave 0 (%d) or 0x1.8p-23 (%d)", saw0, sawmax);
  /* Permutations of 3: 6000 draws, each of the 6 orders expected 1000 times;
     the bound 1000 +- 200 is more than 6 standard deviations (sd ~ 29). */
  int count[6] = {0};
  for (uint64_t t = 0; t < 6000; t++) {
    size_t pm[3];
    aa_reduce_order(pm, 3, 12345, t);
    int ok = pm[0] < 3 && pm[1] < 3 && pm[2] < 3 && pm[0] != pm[1] && pm[1] != pm[2] && pm[0] != pm[2];
    if (!ok) {
      AA_FAIL("aa_reduce_order(3, 12345, %" PRIu64 "): not a permutation %zu %zu %zu", t, pm[0], pm[1], pm[2]);
      return;
    }
    count[pm[0] * 2 + (pm[1] > pm[2])]++;
  }
  for (int i = 0; i < 6; i++)
    AA_CHECK(count[i] > 800 && count[i] < 1200, "aa_reduce_order: order %d drawn %d times of 6000", i, count[i]);
}

/* 5. Splits and orders against plain float loops (a second implementation):
   random FP32 partials of mixed magnitude; S = 1 equals fp32-ordered bit
   for bit; S = 3 strided and contiguous equal float buffers summed in split
   order; desc equals the descending float loop; section-roundtrip with
   section 2 and bf16 store equals the float loop with a BF16 rounding (the
   fmt.h bit path) after every second partial and at the end. */
static void test_splits_orders(aa_pcg64_t *rng) {
  enum { LEN = 5, NP = 23 };
  double parts[NP * LEN];
  for (int it = 0; it < 50; it++) {
    for (size_t i = 0; i < NP * LEN; i++)
      parts[i] = (double)(float)(aa_pcg64_normal(rng) * ldexp(1.0, (int)(aa_pcg64_uniform(rng) * 20) - 10));
    for (size_t x = 0; x < LEN; x++) {
      volatile float asc = 0, desc = 0, b3[3] = {0, 0, 0}, c3[3] = {0, 0, 0}, sec = 0;
      for (int p = 0; p < NP; p++) {
        float v = (float)parts[p * LEN + x];
        asc += v;
        desc += (float)parts[(NP - 1 - p) * LEN + x];
        b3[p % 3] += v;
        c3[p / 8] += v; /* contiguous: ceil(23 / 3) = 8 blocks per split */
        sec += v;
        if (p % 2 == 1 || p == NP - 1) sec = aa_bf16_rne(sec);
      }
      float sb = 0, sc = 0;
      for (int k = 0; k < 3; k++)
        sb += b3[k], sc += c3[k];
      struct {
        const char *kind, *prm;
        float want;
      } cs[] = {{"fp32-ordered", NULL, asc},
                {"fp32-splits", "splits=1", asc},
                {"fp32-ordered-desc", NULL, desc},
                {"fp32-splits", "splits=3", sb},
                {"fp32-splits", "splits=3,split_layout=contiguous", sc},
                {"section-roundtrip", "section=2,store_fmt=bf16", sec}};
      for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        aa_reduce_t s = strat(cs[k].kind, cs[k].prm);
        double acc[LEN] = {0};
        run(acc, NULL, parts, NP, LEN, 0, &s);
        if (acc[x] != (double)cs[k].want)
          AA_FAIL("%s %s (seed %" PRIu64 ", it %d, x %zu): got %a (0x%016" PRIx64 ") want %a", cs[k].kind,
                  cs[k].prm ? cs[k].prm : "", seed, it, x, acc[x], dbits(acc[x]), (double)cs[k].want);
      }
    }
  }
}

/* 6. Fixed point on random data against an independent formula: with
   s = 20, w = 32 and partials below 2^6 in magnitude, 16 partials, no
   check fails and the result is fl32(sum_p nearbyint(p 2^20) 2^-20). */
static void test_fixed_random(aa_pcg64_t *rng) {
  enum { LEN = 8, NP = 16 };
  double parts[NP * LEN], acc[LEN];
  aa_reduce_t s = strat("fixed", "width=32,scale_exp=20");
  fesetround(FE_TONEAREST);
  for (int it = 0; it < 100; it++) {
    for (size_t i = 0; i < NP * LEN; i++)
      parts[i] = (double)(float)(aa_pcg64_normal(rng) * 8.0);
    for (size_t i = 0; i < NP * LEN; i++)
      if (fabs(parts[i]) >= 64) parts[i] = 1.0;
    aa_reduce_stats_t st = {0};
    for (size_t x = 0; x < LEN; x++)
      acc[x] = 0;
    run(acc, &st, parts, NP, LEN, 0, &s);
    for (size_t x = 0; x < LEN; x++) {
      long long q = 0;
      for (size_t p = 0; p < NP; p++)
        q += llrint(ldexp(parts[p * LEN + x], 20));
      double want = (double)(float)ldexp((double)q, -20);
      if (acc[x] != want)
        AA_FAIL("fixed random (seed %" PRIu64 ", it %d, x %zu): got %a want %a", seed, it, x, acc[x], want);
    }
    AA_CHECK(st.fp64_recomputes == 0, "fixed random: unexpected fallback");
  }
  /* Rounding of the conversion: ties to even at s = 1: 0.25 -> 0, 0.75 -> 2
     (1.5 -> 2), -0.25 -> 0, 1.25 -> 2 (2.5 -> 2): sum 0 + 2 + 0 + 2 = 4, 2^-1 4 = 2. */
  double tp[4] = {0.25, 0.75, -0.25, 1.25}, a1 = 0;
  aa_reduce_t s1 = strat("fixed", "width=8,scale_exp=1");
  run(&a1, NULL, tp, 4, 1, 0, &s1);
  AA_CHECK(a1 == 2.0, "fixed ties-to-even conversion: got %a want 2", a1);
}

/* 6b. The probe, on a constructed tile (w = 16, scale_exp 8: probed s' = 0..16):
   partials {50, 3 2^-10} twice. Element 0 converts while 50 2^s' < 2^15
   (s' <= 9) and its sum 100 2^s' fits while s' <= 8: the tile fails for
   s' = 9..16 (8 exponents). Element 1: rne(3 2^(s'-10)) is 0 for s' <= 7
   (0.375 and below), 1 at s' = 8 (0.75); so the recovered sum is 0 (error
   6 2^-10 against the FP32 sum 6 2^-10) for s' <= 7 and 2 2^-8 = 8 2^-10
   (error 2 2^-10) at s' = 8; element 0 is exact. The probe must not change
   the result. */
static void test_probe(void) {
  double parts[4] = {50.0, 3 * 0x1p-10, 50.0, 3 * 0x1p-10};
  aa_reduce_t s = strat("fixed", "width=16,scale_exp=8,probe=on");
  aa_reduce_t s0 = strat("fixed", "width=16,scale_exp=8");
  aa_reduce_stats_t st = {0};
  double acc[2] = {0, 0}, acc0[2] = {0, 0};
  run(acc, &st, parts, 2, 2, 0, &s);
  run(acc0, NULL, parts, 2, 2, 0, &s0);
  AA_CHECK(acc[0] == acc0[0] && acc[1] == acc0[1], "probe changed the result: %a %a vs %a %a", acc[0], acc[1],
           acc0[0], acc0[1]);
  AA_CHECK(st.probe_tiles == 1 && st.probe_ref2 == 100.0 * 100.0 + (6 * 0x1p-10) * (6 * 0x1p-10),
           "probe: tiles %llu ref2 %a", (unsigned long long)st.probe_tiles, st.probe_ref2);
  for (int k = 0; k < AA_REDUCE_PROBE; k++) {
    uint64_t wf = k >= 9;
    double we = k == 8 ? 0x1p-9 * 0x1p-9 : k < 8 ? (6 * 0x1p-10) * (6 * 0x1p-10) : 0.0;
    AA_CHECK(st.probe_fail[k] == wf && st.probe_err2[k] == we,
             "probe s'=%d: fail %llu (want %llu), err2 %a (want %a)", k, (unsigned long long)st.probe_fail[k],
             (unsigned long long)wf, st.probe_err2[k], we);
  }
}

/* 7. Names and parameters. */
static void test_names(void) {
  for (int k = 0; k < AA_REDUCE_COUNT; k++) {
    aa_reduce_kind_t back;
    const char *n = aa_reduce_kind_name((aa_reduce_kind_t)k);
    AA_CHECK(aa_reduce_kind_from_name(&back, n) == AA_OK && back == (aa_reduce_kind_t)k, "name round trip %s", n);
  }
  aa_reduce_kind_t dummy;
  AA_CHECK(aa_reduce_kind_from_name(&dummy, "fp32-unordered") == AA_ENOTFOUND, "unknown kind accepted");
  aa_reduce_t s;
  aa_error_t err;
  aa_reduce_default(&s);
  AA_CHECK(aa_reduce_set(&s, "width", "33", &err) == AA_EINVAL, "width 33 accepted");
  AA_CHECK(aa_reduce_set(&s, "splits", "0", &err) == AA_EINVAL, "splits 0 accepted");
  AA_CHECK(aa_reduce_set(&s, "bogus", "1", &err) == AA_ENOTFOUND, "unknown parameter accepted");
  /* format -> set round trip */
  aa_reduce_t a = strat("fixed", "width=16,scale_exp=-3,order_seed=42,splits=7,split_layout=contiguous,pair=chain,"
                                 "section=9,store_fmt=fp16,add_fmt=fp64,acc_fmt=fp64");
  char buf[1024];
  size_t n = aa_reduce_format(buf, sizeof buf, &a, "dq_reduce_", 0);
  AA_CHECK(n > 0 && n < sizeof buf && strncmp(buf, "dq_reduce = fixed\n", 18) == 0, "format: %s", buf);
  aa_reduce_t b;
  aa_reduce_default(&b);
  for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    char key[64], val[64];
    if (sscanf(line, "%63s = %63s", key, val) != 2) continue;
    const char *k = !strcmp(key, "dq_reduce") ? "kind" : key + strlen("dq_reduce_");
    if (aa_reduce_set(&b, k, val, &err) != AA_OK) AA_FAIL("format round trip: %s: %s", line, err.msg);
  }
  AA_CHECK(a.kind == b.kind && a.add_fmt == b.add_fmt && a.acc_fmt == b.acc_fmt && a.order_seed == b.order_seed &&
               a.splits == b.splits && a.split_layout == b.split_layout && a.pair == b.pair &&
               a.scale_exp == b.scale_exp && a.width == b.width && a.section == b.section &&
               a.store_fmt == b.store_fmt,
           "format/set round trip lost a field");
  AA_CHECK(aa_reduce_equal(&a, &b), "aa_reduce_equal after round trip");
}

/* fp32-jitter: swap_prob 0 is fp32-ordered; otherwise every element is one of
   the sums its adjacent transpositions allow, computed here in float (the
   FP32 adds, C's float arithmetic: round to nearest), and the swapped
   elements are as frequent as swap_prob says. With 3 partials and acc = 0
   the sums are (p0 + p1) + p2, which is also the order 1 0 2, and
   (p0 + p2) + p1 (order 0 2 1); a swap at k = 0 happens with probability q
   and the one at k = 1 only without it: P(0 2 1) = (1 - q) q. */
static void test_jitter(aa_pcg64_t *rng) {
  enum { LEN = 4096 };
  static double parts[3 * LEN], a0[LEN], a1[LEN], b[LEN];
  aa_reduce_t ord = strat("fp32-ordered", NULL), z = strat("fp32-jitter", "swap_prob=0,order_seed=5"),
              q = strat("fp32-jitter", "swap_prob=0.25,order_seed=5");
  size_t other = 0, bad = 0, both_equal = 0;
  for (size_t i = 0; i < 3 * LEN; i++)
    parts[i] = (double)(float)(aa_pcg64_normal(rng) * ldexp(1.0, (int)(aa_pcg64_uniform(rng) * 20) - 10));
  memset(a0, 0, sizeof a0), memset(a1, 0, sizeof a1), memset(b, 0, sizeof b);
  run(a0, NULL, parts, 3, LEN, 11, &ord);
  run(a1, NULL, parts, 3, LEN, 11, &z);
  AA_CHECK(memcmp(a0, a1, sizeof a0) == 0, "fp32-jitter with swap_prob 0 differs from fp32-ordered");
  run(b, NULL, parts, 3, LEN, 11, &q);
  for (size_t x = 0; x < LEN; x++) {
    float p0 = (float)parts[x], p1 = (float)parts[LEN + x], p2 = (float)parts[2 * LEN + x];
    volatile float s012 = p0 + p1, s021 = p0 + p2;
    s012 = s012 + p2;
    s021 = s021 + p1;
    if (s012 == s021) both_equal++;
    if (dbits(b[x]) == dbits((double)s012))
      continue;
    else if (dbits(b[x]) == dbits((double)s021))
      other++;
    else
      bad++;
  }
  AA_CHECK(bad == 0, "fp32-jitter: %zu elements are no sum an adjacent transposition allows", bad);
  /* elements that took 0 2 1 and differ: (1 - q) q = 0.1875 of those whose two sums differ, within 5 sigma */
  double n = (double)(LEN - both_equal), mean = n * 0.1875, sd = sqrt(n * 0.1875 * 0.8125);
  AA_CHECK(fabs((double)other - mean) < 5 * sd, "fp32-jitter: %zu of %.0f elements swapped at k = 1, expected %.0f",
           other, n, mean);
  memset(a0, 0, sizeof a0);
  run(a0, NULL, parts, 3, LEN, 11, &q);
  AA_CHECK(memcmp(a0, b, sizeof a0) == 0, "fp32-jitter: the same seed and tile gave different bits");
}

int main(void) {
  seed = aa_test_seed("treduce");
  aa_pcg64_t rng;
  uint64_t tag = 5;
  aa_rng_derive(&rng, seed, &tag, 1);
  test_names();
  test_exact_all(&rng);
  test_exact_fp32(&rng);
  test_fallback();
  test_bf16_pair();
  test_atomic();
  test_jitter(&rng);
  test_splits_orders(&rng);
  test_fixed_random(&rng);
  test_probe();
  return aa_test_finish("treduce");
}
