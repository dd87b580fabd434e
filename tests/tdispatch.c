/* attnacc: tests of aa_fa2_dispatch and aa_fa2_num_splits against FA2's launch code and the H200's launches. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "tests.h"

/* Kernel and tiles the H200 launched (PyTorch 2.11 SDPA flash backend,
   read from the profiler's kernel names and grids by
   fixtures/h200-fa2/gpu_fa2.py; fixtures/h200-fa2/launches.txt): split
   count = grid.y of flash_fwd_splitkv_kernel, tiles = the kBlockM, kBlockN
   template arguments of the forward and backward kernel traits. */
static const struct {
  size_t heads, n, d;
  size_t splits, fq, fk, bq, bk;
} launched[] = {
    {1, 1024, 128, 8, 64, 128, 64, 128},   /* d128n1024: splitkv grid [16, 8, 1] */
    {1, 4096, 128, 4, 64, 128, 64, 128},   /* d128n4096: splitkv grid [64, 4, 1] */
    {1, 16384, 128, 1, 128, 64, 64, 128},  /* d128n16384: flash_fwd_kernel 128 x 64 */
    {1, 1024, 64, 4, 64, 256, 128, 128},   /* d64n1024: splitkv 64 x 256 grid [16, 4, 1] */
    {1, 4096, 64, 4, 64, 256, 128, 128},   /* d64n4096: splitkv grid [64, 4, 1] */
    {1, 16384, 64, 1, 128, 128, 128, 128}, /* d64n16384: flash_fwd_kernel 128 x 128 */
    {8, 2048, 128, 1, 128, 64, 64, 128},   /* GQA 8 q heads / 2 kv heads: flash_fwd_kernel grid [16, 1, 8] */
    {4, 4096, 64, 1, 128, 128, 128, 128},  /* 4 heads: flash_fwd_kernel grid [32, 1, 4] */
};

static void test_launched(void) {
  for (size_t i = 0; i < sizeof launched / sizeof launched[0]; i++) {
    aa_fa2_dispatch_t dp;
    aa_error_t err = {{0}};
    int st = aa_fa2_dispatch(&dp, launched[i].heads, launched[i].n, launched[i].n, launched[i].d, 132, 0, &err);
    AA_CHECK(st == AA_OK, "case %zu: dispatch failed: %s", i, err.msg);
    if (st != AA_OK) continue;
    AA_CHECK(
        dp.num_splits == launched[i].splits && dp.fwd_tile_q == launched[i].fq && dp.fwd_tile_k == launched[i].fk &&
            dp.bwd_tile_q == launched[i].bq && dp.bwd_tile_k == launched[i].bk,
        "heads %zu n %zu d %zu: got splits %zu fwd %zux%zu bwd %zux%zu, the H200 launched %zu, %zux%zu, %zux%zu",
        launched[i].heads, launched[i].n, launched[i].d, dp.num_splits, dp.fwd_tile_q, dp.fwd_tile_k, dp.bwd_tile_q,
        dp.bwd_tile_k, launched[i].splits, launched[i].fq, launched[i].fk, launched[i].bq, launched[i].bk);
  }
}

/* The heuristic worked by hand from flash_api.cpp:281-313. */
static void test_heuristic(void) {
  /* the source's own comment (flash_api.cpp:275-276): batch * heads = 48 on 108 SMs: 2 splits (eff 0.89) beat 3
     (0.67); the best is 9 splits (432 / 108 = 4 waves, eff 1), 0.85 of it is 0.85, first reached at 2 */
  AA_CHECK(aa_fa2_num_splits(48, 108, 64, 128) == 2, "48 units on 108: %zu splits, expected 2",
           aa_fa2_num_splits(48, 108, 64, 128));
  /* 16 units on 264 (one head, n = 1024, 64-row blocks), 8 key blocks: eff 16 s / 264 grows with s; s = 8 is the
     best and the only one >= 0.85 of it */
  AA_CHECK(aa_fa2_num_splits(16, 264, 8, 128) == 8, "16 units, 8 blocks: %zu", aa_fa2_num_splits(16, 264, 8, 128));
  /* 16 units, 4 blocks (d = 64: 256-key blocks): s = 3 is ineligible (ceil(4/3) = ceil(4/2) = 2), s = 4 best */
  AA_CHECK(aa_fa2_num_splits(16, 264, 4, 128) == 4, "16 units, 4 blocks: %zu", aa_fa2_num_splits(16, 264, 4, 128));
  /* 64 units, 16 blocks: s = 4 gives 256 / 264 = 0.9697, the best (8, 12 and 16 tie it); 3 gives 0.727 */
  AA_CHECK(aa_fa2_num_splits(64, 264, 16, 128) == 4, "64 units, 16 blocks: %zu", aa_fa2_num_splits(64, 264, 16, 128));
  /* at or above 0.8 * num_SMs = 211.2 units: one split */
  AA_CHECK(aa_fa2_num_splits(212, 264, 128, 128) == 1 && aa_fa2_num_splits(211, 264, 128, 128) > 1,
           "the 0.8 * num_SMs threshold: 212 -> %zu, 211 -> %zu", aa_fa2_num_splits(212, 264, 128, 128),
           aa_fa2_num_splits(211, 264, 128, 128));
  /* one key block: nothing to split */
  AA_CHECK(aa_fa2_num_splits(1, 264, 1, 128) == 1, "one block: %zu", aa_fa2_num_splits(1, 264, 1, 128));
}

static void test_tiles(void) {
  aa_fa2_dispatch_t dp;
  aa_error_t err = {{0}};
  /* dropout: no split-KV (flash_api.cpp:331); d = 128 with dropout runs 128 x 32
     (flash_fwd_launch_template.h:273), d = 64 128 x 64 (:214) */
  AA_CHECK(aa_fa2_dispatch(&dp, 1, 1024, 1024, 128, 132, 1, &err) == AA_OK && dp.num_splits == 1 &&
               dp.fwd_tile_q == 128 && dp.fwd_tile_k == 32,
           "d 128 dropout: splits %zu fwd %zux%zu", dp.num_splits, dp.fwd_tile_q, dp.fwd_tile_k);
  AA_CHECK(aa_fa2_dispatch(&dp, 1, 1024, 1024, 64, 132, 1, &err) == AA_OK && dp.fwd_tile_k == 64,
           "d 64 dropout: fwd tile_k %zu", dp.fwd_tile_k);
  /* head dims round up as HEADDIM_SWITCH does: d = 80 is the 96 kernel (fwd 128 x 64, bwd 64 x 128), its split
     blocks are 128 keys (head_size <= 128); d = 256 on sm90: fwd 64 x 64, bwd 64 x 64 */
  AA_CHECK(aa_fa2_dispatch(&dp, 64, 1024, 1024, 80, 132, 0, &err) == AA_OK && dp.num_splits == 1 &&
               dp.fwd_tile_q == 128 && dp.fwd_tile_k == 64 && dp.bwd_tile_q == 64 && dp.bwd_tile_k == 128,
           "d 80: splits %zu fwd %zux%zu bwd %zux%zu", dp.num_splits, dp.fwd_tile_q, dp.fwd_tile_k, dp.bwd_tile_q,
           dp.bwd_tile_k);
  AA_CHECK(aa_fa2_dispatch(&dp, 64, 1024, 1024, 256, 132, 0, &err) == AA_OK && dp.fwd_tile_q == 64 &&
               dp.fwd_tile_k == 64 && dp.bwd_tile_q == 64 && dp.bwd_tile_k == 64,
           "d 256: fwd %zux%zu bwd %zux%zu", dp.fwd_tile_q, dp.fwd_tile_k, dp.bwd_tile_q, dp.bwd_tile_k);
  /* n_q and n_k enter separately: 64 queries (one m block), 8192 keys, d = 128: 64 key blocks, 1 unit: the best
     efficiency 64 / 264 is reached only at 64 splits */
  AA_CHECK(aa_fa2_dispatch(&dp, 1, 64, 8192, 128, 132, 0, &err) == AA_OK && dp.num_splits == 64,
           "n_q 64, n_k 8192: %zu splits", dp.num_splits);
  /* bad input */
  AA_CHECK(aa_fa2_dispatch(&dp, 1, 1024, 1024, 0, 132, 0, &err) == AA_EINVAL, "d = 0 accepted");
  AA_CHECK(aa_fa2_dispatch(&dp, 1, 1024, 1024, 257, 132, 0, &err) == AA_EINVAL && strstr(err.msg, "d = 257") != NULL,
           "d = 257 accepted or unnamed (%s)", err.msg);
  AA_CHECK(aa_fa2_dispatch(&dp, 1, 1024, 1024, 128, 0, 0, &err) == AA_EINVAL, "num_sms = 0 accepted");
}

int main(void) {
  test_launched();
  test_heuristic();
  test_tiles();
  return aa_test_finish("tdispatch");
}
