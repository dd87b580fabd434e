/* attnacc: tests of the dropout schemes (Philox vectors, tiling independence, twin fwd/bwd agreement, rates). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnacc.h"
#include "tests.h"

static uint64_t seed;

static aa_dropout_t scheme(const char *name, double p) {
  aa_dropout_t d;
  aa_error_t err;
  aa_dropout_default(&d);
  if (aa_dropout_set(&d, "scheme", name, &err) != AA_OK) AA_FAIL("setup %s: %s", name, err.msg);
  d.p = p;
  d.seed = seed;
  return d;
}

static uint8_t *mask(const aa_dropout_t *d, size_t h, size_t nq, size_t nk, size_t tq, size_t tk) {
  aa_error_t err = {{0}};
  uint8_t *m = malloc(h * nq * nk);
  if (m == NULL) abort();
  int rc = aa_dropout_mask(m, NULL, d, h, nq, nk, tq, tk, &err);
  if (rc != AA_OK) AA_FAIL("aa_dropout_mask %s: status %d (%s)", aa_dropout_scheme_name(d->scheme), rc, err.msg);
  return m;
}

/* First position where two masks differ, printed as (head, row, col). */
static void print_first_diff(const uint8_t *a, const uint8_t *b, size_t nq, size_t nk, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((a[i] != 0) != (b[i] != 0)) {
      printf("  first difference at head %zu row %zu col %zu: %u vs %u\n", i / (nq * nk), i / nk % nq, i % nk, a[i],
             b[i]);
      return;
    }
}

/* 1. Philox4x32-10 against the published known-answer vectors of the
   Random123 distribution (tests/kat_vectors, "philox4x32 10" lines). */
static void test_philox_kat(void) {
  static const uint32_t v[3][10] = {{0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
                                    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
                                     0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
                                    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
                                     0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
  for (int t = 0; t < 3; t++) {
    uint32_t out[4];
    aa_philox4x32_10(out, v[t], v[t] + 4);
    for (int w = 0; w < 4; w++)
      AA_CHECK(out[w] == v[t][6 + w], "philox4x32_10 vector %d word %d: got %08" PRIx32 " expected %08" PRIx32, t, w,
               out[w], v[t][6 + w]);
  }
}

/* 2. Names, parameter parsing and the canonical text round trip. */
static void test_names(void) {
  aa_error_t err;
  for (int s = 0; s < AA_DROPOUT_SCHEME_COUNT; s++) {
    aa_dropout_scheme_t back;
    const char *n = aa_dropout_scheme_name((aa_dropout_scheme_t)s);
    AA_CHECK(aa_dropout_scheme_from_name(&back, n) == AA_OK && back == (aa_dropout_scheme_t)s,
             "scheme name round trip: %s", n);
  }
  aa_dropout_scheme_t dummy;
  AA_CHECK(aa_dropout_scheme_from_name(&dummy, "philox") == AA_ENOTFOUND, "unknown scheme name accepted");

  aa_dropout_t a, b;
  aa_dropout_default(&a);
  const char *kv[][2] = {
      {"scheme", "u8-threshold"}, {"p", "0.1"},           {"seed", "12345678901"}, {"batch", "3"},
      {"fwd_tile_q", "64"},       {"fwd_tile_k", "256"},  {"bwd_tile_q", "32"},    {"bwd_tile_k", "1024"},
      {"bwd_tile_k_short", "64"}, {"tile_count", "floor"}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    AA_CHECK(aa_dropout_set(&a, kv[i][0], kv[i][1], &err) == AA_OK, "set %s = %s", kv[i][0], kv[i][1]);
  AA_CHECK(a.p == 0.1 && a.seed == UINT64_C(12345678901) && a.batch == 3 && a.fwd_tile_q == 64 &&
               a.fwd_tile_k == 256 && a.bwd_tile_q == 32 && a.bwd_tile_k == 1024 && a.bwd_tile_k_short == 64 &&
               a.tile_count == AA_DROPOUT_COUNT_FLOOR && a.scheme == AA_DROPOUT_U8_THRESHOLD,
           "aa_dropout_set: fields not as set");
  char buf[1024];
  size_t need = aa_dropout_format(buf, sizeof buf, &a, "dropout_");
  AA_CHECK(need < sizeof buf, "format length %zu", need);
  aa_dropout_default(&b);
  for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    char key[64], val[128];
    if (sscanf(line, "dropout_%63s = %127s", key, val) != 2) {
      AA_FAIL("format: bad line '%s'", line);
      continue;
    }
    AA_CHECK(aa_dropout_set(&b, key, val, &err) == AA_OK, "reparse %s = %s", key, val);
  }
  AA_CHECK(memcmp(&a, &b, sizeof a) == 0, "format/set round trip differs");

  const char *bad[][2] = {
      {"p", "1"},          {"p", "-0.1"},           {"p", "nan"},  {"p", "0.1x"}, {"scheme", "philox"},
      {"fwd_tile_k", "0"}, {"tile_count", "round"}, {"seed", "-1"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    AA_CHECK(aa_dropout_set(&a, bad[i][0], bad[i][1], &err) == AA_EINVAL, "bad value accepted: %s = %s", bad[i][0],
             bad[i][1]);
  AA_CHECK(aa_dropout_set(&a, "rate", "0.1", &err) == AA_ENOTFOUND, "unknown key accepted");
  a.p = 1.0;
  AA_CHECK(aa_dropout_check(&a, &err) == AA_EINVAL, "check accepted p = 1");
}

/* 3. Position-keyed and u8-threshold masks do not depend on the tiling
   (bit for bit), and each element is the documented function of its
   position: Philox counter (col, row, head, batch), key (seed lo, seed hi),
   word 0 compared with 2^32 (1-p) or its top byte with floor(255 fl32(1-p)). */
static void test_position_keyed(void) {
  const size_t H = 2, NQ = 200, NK = 333, n = H * NQ * NK;
  const size_t tilings[][2] = {{128, 512}, {128, 128}, {1, 1}, {7, 13}, {200, 333}, {64, 1000}};
  const char *names[] = {"position-keyed", "u8-threshold"};
  for (int s = 0; s < 2; s++) {
    aa_dropout_t d = scheme(names[s], 0.2);
    d.batch = 3;
    uint8_t *ref = mask(&d, H, NQ, NK, tilings[0][0], tilings[0][1]);
    for (size_t t = 1; t < sizeof tilings / sizeof tilings[0]; t++) {
      uint8_t *m = mask(&d, H, NQ, NK, tilings[t][0], tilings[t][1]);
      size_t mis = aa_dropout_mismatch_count(ref, m, n);
      if (mis != 0) {
        AA_FAIL("%s: tiling %zux%zu differs from 128x512 in %zu bits (p %a, seed %" PRIu64 ")", names[s],
                tilings[t][0], tilings[t][1], mis, d.p, seed);
        print_first_diff(ref, m, NQ, NK, n);
      }
      free(m);
    }
    /* Element-wise specification check on a strided sample. */
    float keepf = 1.0f - (float)d.p;
    unsigned t8 = 0;
    while (t8 < 255 && (double)(t8 + 1) <= (double)keepf * 255.0)
      t8++; /* largest byte <= 255*keep */
    for (size_t i = 0; i < n; i += 97) {
      size_t h = i / (NQ * NK), r = i / NK % NQ, c = i % NK;
      uint32_t ctr[4] = {(uint32_t)c, (uint32_t)r, (uint32_t)h, (uint32_t)d.batch}, key[2], out[4];
      key[0] = (uint32_t)(seed & 0xffffffffu);
      key[1] = (uint32_t)(seed >> 32);
      aa_philox4x32_10(out, ctr, key);
      int want = s == 0 ? (double)out[0] < (1.0 - d.p) * 4294967296.0 : (out[0] >> 24) <= t8;
      if ((ref[i] != 0) != want) {
        AA_FAIL("%s: element (h %zu, r %zu, c %zu) = %u, specification gives %d (word %08" PRIx32 ", seed %" PRIu64
                ")",
                names[s], h, r, c, ref[i], want, out[0], seed);
        break;
      }
    }
    free(ref);
  }
}

/* Tile (head, iq, ik) of a tile-seeded mask recomputed from the documented
   recipe: pcg32 seeded (seed + offset, AA_DROPOUT_PCG_STREAM), one output per
   element row-major over the nominal tq x tk tile, keep when u < 2^32 (1-p).
   The offset follows [fa2] with ceil tile counts. */
static int tile_matches_spec(const uint8_t *m, const aa_dropout_t *d, size_t H, size_t NQ, size_t NK, size_t tq,
                             size_t tk, size_t head, size_t iq, size_t ik) {
  uint64_t nk = (NK + tk - 1) / tk, nq = (NQ + tq - 1) / tq;
  uint64_t off = ik + iq * nk + head * nk * nq + d->batch * H * nk * nq;
  aa_pcg32_t rng;
  aa_pcg32_seed(&rng, d->seed + off, AA_DROPOUT_PCG_STREAM);
  for (size_t r = 0; r < tq; r++)
    for (size_t c = 0; c < tk; c++) {
      uint32_t u = aa_pcg32_next(&rng);
      size_t row = iq * tq + r, col = ik * tk + c;
      if (row >= NQ || col >= NK) continue;
      int want = (double)u < (1.0 - d->p) * 4294967296.0;
      if ((m[(head * NQ + row) * NK + col] != 0) != want) return 0;
    }
  return 1;
}

/* 4. Tile-seeded: the forward (128 x 512 chunks) and the backward redraw
   agree bit for bit exactly when the tiles line up. */
static void test_tile_seeded(void) {
  const double p = 0.1;
  const size_t H = 2;
  aa_error_t err;

  /* n_k >= 512: the backward uses 512-wide tiles, like the forward chunks. */
  const size_t aligned[][2] = {{256, 512}, {384, 640}, {256, 1024}};
  for (size_t t = 0; t < sizeof aligned / sizeof aligned[0]; t++) {
    size_t NQ = aligned[t][0], NK = aligned[t][1], n = H * NQ * NK, tq, tk;
    aa_dropout_t d = scheme("tile-seeded", p);
    d.batch = 1;
    uint8_t *f = malloc(n), *b = malloc(n);
    if (f == NULL || b == NULL) abort();
    AA_CHECK(aa_dropout_mask_fwd(f, NULL, &d, H, NQ, NK, &err) == AA_OK, "mask_fwd: %s", err.msg);
    AA_CHECK(aa_dropout_mask_bwd(b, NULL, &d, H, NQ, NK, &err) == AA_OK, "mask_bwd: %s", err.msg);
    aa_dropout_bwd_tiles(&tq, &tk, &d, NQ, NK);
    AA_CHECK(tq == 128 && tk == 512, "bwd tiles for n_k %zu: %zu x %zu, expected 128 x 512", NK, tq, tk);
    size_t mis = aa_dropout_mismatch_count(f, b, n);
    if (mis != 0) {
      AA_FAIL("tile-seeded n_q %zu n_k %zu: forward and backward differ in %zu bits (seed %" PRIu64 ")", NQ, NK, mis,
              seed);
      print_first_diff(f, b, NQ, NK, n);
    }
    AA_CHECK(tile_matches_spec(f, &d, H, NQ, NK, 128, 512, 1, 1, NK / 512 - (NK % 512 == 0)),
             "tile-seeded n_k %zu: tile (1,1,last) does not follow the documented draw (seed %" PRIu64 ")", NK, seed);
    free(f);
    free(b);
  }

  /* n_k = 384 < 512: the backward uses 128-wide tiles, the forward one
     512-wide chunk. Offsets coincide only for offset 0 (head 0, q tile 0,
     k tile 0), and there the two generators agree only where the draw
     indices r*512 + c and r*128 + c coincide: row 0, columns 0..127. Every
     other bit is an independent redraw, so the mismatch fraction is
     2p(1-p) up to that sliver (checked within 5 sigma). */
  {
    const size_t NQ = 384, NK = 384, n = H * NQ * NK;
    aa_dropout_t d = scheme("tile-seeded", p);
    uint8_t *f = malloc(n), *b = malloc(n);
    if (f == NULL || b == NULL) abort();
    AA_CHECK(aa_dropout_mask_fwd(f, NULL, &d, H, NQ, NK, &err) == AA_OK, "mask_fwd: %s", err.msg);
    AA_CHECK(aa_dropout_mask_bwd(b, NULL, &d, H, NQ, NK, &err) == AA_OK, "mask_bwd: %s", err.msg);
    size_t mis_row0 = aa_dropout_mismatch_count(f, b, 128);
    AA_CHECK(mis_row0 == 0,
             "tile-seeded n_k 384: head 0 row 0 cols 0..127 share offset 0 and draw order, "
             "yet %zu bits differ (seed %" PRIu64 ")",
             mis_row0, seed);
    double mis = aa_dropout_mismatch(f, b, n);
    double q = 2 * p * (1 - p), m = (double)(n - 128);
    double expect = q * m / n, sigma = sqrt(q * (1 - q) / m);
    AA_CHECK(fabs(mis - expect) < 5 * sigma,
             "tile-seeded n_k 384: mismatch fraction %.6f, expected %.6f +- 5 x %.2g (p %a, seed %" PRIu64 ")", mis,
             expect, sigma, p, seed);
    printf("tdropout: tile-seeded n = 384 forward/backward mismatch %.6f (independent redraw: %.6f)\n", mis, expect);
    AA_CHECK(tile_matches_spec(b, &d, H, NQ, NK, 128, 128, 1, 2, 1),
             "tile-seeded n_k 384 backward: tile (1,2,1) does not follow the documented draw (seed %" PRIu64 ")",
             seed);
    AA_CHECK(tile_matches_spec(f, &d, H, NQ, NK, 128, 512, 1, 2, 0),
             "tile-seeded n_k 384 forward: tile (1,2,0) does not follow the documented draw (seed %" PRIu64 ")",
             seed);

    /* The same length with a backward that keeps 512-wide tiles lines up. */
    d.bwd_tile_k_short = 512;
    AA_CHECK(aa_dropout_mask_bwd(b, NULL, &d, H, NQ, NK, &err) == AA_OK, "mask_bwd: %s", err.msg);
    AA_CHECK(aa_dropout_mismatch_count(f, b, n) == 0,
             "tile-seeded n_k 384 with 512-wide backward tiles: masks differ (seed %" PRIu64 ")", seed);

    /* And n_k >= 512 with a backward tile that differs (256) does not. */
    const size_t NK2 = 1024, n2 = H * 128 * NK2;
    uint8_t *f2 = malloc(n2), *b2 = malloc(n2);
    if (f2 == NULL || b2 == NULL) abort();
    d.bwd_tile_k_short = 128;
    d.bwd_tile_k = 256;
    AA_CHECK(aa_dropout_mask_fwd(f2, NULL, &d, H, 128, NK2, &err) == AA_OK, "mask_fwd: %s", err.msg);
    AA_CHECK(aa_dropout_mask_bwd(b2, NULL, &d, H, 128, NK2, &err) == AA_OK, "mask_bwd: %s", err.msg);
    double mis2 = aa_dropout_mismatch(f2, b2, n2);
    AA_CHECK(mis2 > 0.5 * q, "tile-seeded n_k 1024 with 256-wide backward tiles: mismatch %.6f, expected about %.3f",
             mis2, q);
    free(f2);
    free(b2);

    /* Twin floor counts: the forward's seqlen_k // 512 = 0 for n_k = 384,
       so every q tile and head gets offset 0 and the same random tile. */
    d = scheme("tile-seeded", p);
    d.tile_count = AA_DROPOUT_COUNT_FLOOR;
    AA_CHECK(aa_dropout_mask_fwd(f, NULL, &d, H, NQ, NK, &err) == AA_OK, "mask_fwd: %s", err.msg);
    AA_CHECK(memcmp(f, f + 128 * NK, 128 * NK) == 0 && memcmp(f, f + NQ * NK, NQ * NK) == 0,
             "tile-seeded floor counts, n_k 384: q tiles / heads should repeat one tile (seed %" PRIu64 ")", seed);
    free(f);
    free(b);
  }
}

/* 5. Realised keep rate of 10^6 draws within 5 sigma of the exact expected
   rate. Expected: 1 - p for the 32-bit schemes (their threshold is within
   2^-32 of it); for u8-threshold the count of bytes v in 0..255 with
   v <= floor(255 * keep), keep = 1 - p in binary32 (FA2), over 256. */
static void test_keep_rates(void) {
  const double ps[] = {0.05, 0.1, 0.2, 0.5};
  const char *names[] = {"tile-seeded", "position-keyed", "u8-threshold"};
  const size_t NQ = 1000, NK = 1000, n = NQ * NK;
  uint8_t *m = malloc(n);
  if (m == NULL) abort();
  for (int s = 0; s < 3; s++)
    for (size_t ip = 0; ip < sizeof ps / sizeof ps[0]; ip++) {
      double p = ps[ip], expect;
      aa_dropout_t d = scheme(names[s], p);
      aa_error_t err;
      if (s == 2) {
        float keep = 1.0f - (float)p;
        double lim = floor((double)keep * 255.0);
        int cnt = 0;
        for (int v = 0; v < 256; v++)
          cnt += v <= lim;
        expect = cnt / 256.0;
        AA_CHECK(aa_dropout_expected_keep(&d) == expect, "u8-threshold p %a: expected_keep %.10f, derived %.10f", p,
                 aa_dropout_expected_keep(&d), expect);
        /* FA2's rescale rp_dropout = 1.f / keep is a binary32 quotient. */
        double bias = expect * (double)(1.0f / keep) - 1.0;
        AA_CHECK(fabs(aa_dropout_implied_bias(&d) - bias) < 1e-15, "u8-threshold p %a: implied bias %.6g vs %.6g", p,
                 aa_dropout_implied_bias(&d), bias);
      } else {
        expect = 1.0 - p;
        AA_CHECK(fabs(aa_dropout_expected_keep(&d) - expect) <= 0x1p-31, "%s p %a: expected_keep %.12f vs 1-p",
                 names[s], p, aa_dropout_expected_keep(&d));
        AA_CHECK(fabs(aa_dropout_keep_scale(&d) * (1 - p) - 1) < 1e-15, "%s p %a: keep_scale %a", names[s], p,
                 aa_dropout_keep_scale(&d));
      }
      AA_CHECK(aa_dropout_mask_fwd(m, NULL, &d, 1, NQ, NK, &err) == AA_OK, "mask: %s", err.msg);
      double rate = aa_dropout_keep_rate(m, n), sigma = sqrt(expect * (1 - expect) / n);
      AA_CHECK(fabs(rate - expect) < 5 * sigma,
               "%s p %a: realised keep rate %.6f, expected %.6f +- 5 x %.2g (seed %" PRIu64 ")", names[s], p, rate,
               expect, sigma, seed);
      /* The u8 rule's shortfall is visible: at p = 0.1 the expected rate
         230/256 is 5.2 sigma of 10^6 draws below the nominal 0.9. */
      if (s == 2 && p == 0.1)
        AA_CHECK(rate < 0.9 - 2 * sigma, "u8-threshold p 0.1: realised %.6f not below nominal 0.9", rate);
    }
  free(m);
}

/* 6. p = 0 keeps everything; the bias estimate covers the exact bias. */
static void test_edges_and_bias(void) {
  const char *names[] = {"none", "tile-seeded", "position-keyed", "u8-threshold"};
  uint8_t m[64 * 70];
  aa_error_t err;
  for (int s = 0; s < 4; s++) {
    aa_dropout_t d = scheme(names[s], 0.0);
    double ks = -1;
    AA_CHECK(aa_dropout_mask_fwd(m, &ks, &d, 1, 64, 70, &err) == AA_OK, "mask p 0: %s", err.msg);
    AA_CHECK(aa_dropout_keep_rate(m, sizeof m) == 1.0 && ks == 1.0, "%s p 0: keep rate %.6f scale %a", names[s],
             aa_dropout_keep_rate(m, sizeof m), ks);
  }
  /* u8-threshold at p = 0.1: exact bias (230/256) * fl32(1/fl32(0.9)) - 1. */
  aa_dropout_t d = scheme("u8-threshold", 0.1);
  double mean, hw, exact = (230.0 / 256.0) * (double)(1.0f / (1.0f - 0.1f)) - 1.0;
  AA_CHECK(aa_dropout_bias_estimate(&mean, &hw, &d, 1, 128, 256, 40, &err) == AA_OK, "bias estimate: %s", err.msg);
  /* 95% intervals miss 5% of the time: allow 2.5 half-widths (4.9 sigma). */
  AA_CHECK(fabs(mean - exact) < 2.5 * hw && hw > 0 && hw < 0.01,
           "u8-threshold bias estimate %.6g +- %.2g, exact %.6g (seed %" PRIu64 ")", mean, hw, exact, seed);
  d = scheme("tile-seeded", 0.1);
  AA_CHECK(aa_dropout_bias_estimate(&mean, &hw, &d, 1, 128, 256, 40, &err) == AA_OK, "bias estimate: %s", err.msg);
  AA_CHECK(fabs(mean) < 2.5 * hw, "tile-seeded bias estimate %.6g +- %.2g, exact 0 (seed %" PRIu64 ")", mean, hw,
           seed);
  d.p = 1.0;
  AA_CHECK(aa_dropout_mask_fwd(m, NULL, &d, 1, 64, 70, &err) == AA_EINVAL, "mask accepted p = 1");
}

int main(void) {
  seed = aa_test_seed("tdropout");
  test_philox_kat();
  test_names();
  test_position_keyed();
  test_tile_seeded();
  test_keep_rates();
  test_edges_and_bias();
  return aa_test_finish("tdropout");
}
