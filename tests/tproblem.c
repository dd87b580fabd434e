/* attnacc: tests of the problem module: masks against flash-attn's and SDPA's index formulas, column intervals,
 * ALiBi distances and slopes, validation. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>

#include "problem.h"
#include "rng.h"
#include "tests.h"

/* flash-attn mask.h:53-54 (bottom-right), SDPA is_causal (top-left), [nki-bwd]'s window of W keys */
static int ref_vis(size_t nq, size_t nk, int causal, int br, size_t W, int local, long L, long R, long i, long j) {
  long off = br ? (long)nk - (long)nq : 0;
  if (causal && j > i + off) return 0;
  if (W != 0 && j < i + off - (long)W + 1) return 0;
  if (local && L >= 0 && j < (i + off - L > 0 ? i + off - L : 0)) return 0;
  if (local && R >= 0 && j >= (i + off + 1 + R < (long)nk ? i + off + 1 + R : (long)nk)) return 0;
  return j >= 0 && j < (long)nk;
}

static void test_masks(uint64_t seed) {
  aa_pcg64_t r;
  aa_pcg64_seed(&r, seed, 1);
  int fails = 0;
  for (int it = 0; it < 400 * aa_test_multiplier() && fails < 5; it++) {
    size_t nq = 1 + aa_pcg64_next(&r) % 20, nk = 1 + aa_pcg64_next(&r) % 20;
    int causal = aa_pcg64_next(&r) % 2, br = aa_pcg64_next(&r) % 2, local = aa_pcg64_next(&r) % 2;
    size_t W = causal && aa_pcg64_next(&r) % 3 == 0 ? 1 + aa_pcg64_next(&r) % 6 : 0;
    long L = (long)(aa_pcg64_next(&r) % 8) - 1, R = (long)(aa_pcg64_next(&r) % 8) - 1;
    aa_problem_t pb;
    aa_problem_init(&pb, nq, nk, 4, 1, 1);
    pb.causal = causal;
    pb.align = br ? AA_ALIGN_BOTTOM_RIGHT : AA_ALIGN_TOP_LEFT;
    pb.window = W;
    pb.local = local;
    pb.window_left = L < 0 ? AA_WINDOW_INF : (size_t)L;
    pb.window_right = R < 0 ? AA_WINDOW_INF : (size_t)R;
    aa_error_t err = {{0}};
    AA_CHECK(aa_problem_check(&pb, &err) == AA_OK, "valid problem accepted: %s", err.msg);
    for (size_t i = 0; i < nq; i++) {
      size_t lo, hi;
      aa_problem_row_keys(&pb, i, &lo, &hi);
      for (size_t j = 0; j < nk; j++) {
        int want = ref_vis(nq, nk, causal, br, W, local, L, R, (long)i, (long)j);
        if (want != aa_problem_visible(&pb, i, j) || want != (j >= lo && j < hi)) {
          AA_FAIL(
              "mask (nq %zu nk %zu causal %d br %d W %zu local %d L %ld R %ld) at (%zu, %zu): want %d, visible %d, "
              "row interval [%zu, %zu)",
              nq, nk, causal, br, W, local, L, R, i, j, want, aa_problem_visible(&pb, i, j), lo, hi);
          fails++;
        }
      }
    }
    for (size_t j = 0; j < nk; j++) {
      size_t lo, hi;
      aa_problem_col_queries(&pb, j, &lo, &hi);
      for (size_t i = 0; i < nq; i++)
        if (ref_vis(nq, nk, causal, br, W, local, L, R, (long)i, (long)j) != (i >= lo && i < hi)) {
          AA_FAIL("column interval of key %zu (nq %zu nk %zu causal %d br %d W %zu local %d L %ld R %ld): [%zu, %zu) "
                  "vs query %zu",
                  j, nq, nk, causal, br, W, local, L, R, lo, hi, i);
          fails++;
          break;
        }
    }
  }
}

static void test_alibi(void) {
  aa_problem_t pb;
  aa_problem_init(&pb, 3, 7, 4, 1, 1);
  pb.alibi = AA_ALIBI_FLASH; /* -|i + n_k - n_q - j|: the last query's diagonal is the last key */
  AA_CHECK(aa_problem_alibi_dist(&pb, 2, 6) == 0 && aa_problem_alibi_dist(&pb, 0, 0) == -4 &&
               aa_problem_alibi_dist(&pb, 0, 6) == -2,
           "flash ALiBi distances");
  pb.alibi = AA_ALIBI_TORCH;
  AA_CHECK(aa_problem_alibi_dist(&pb, 2, 6) == 4 && aa_problem_alibi_dist(&pb, 2, 0) == -2, "torch ALiBi distances");
  /* ALiBi paper's get_slopes: 8 heads 2^-1 .. 2^-8; 6 heads [2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3] */
  double s8[8], s6[6], w6[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125}, s12[12];
  aa_problem_alibi_geometric(s8, 8);
  for (int h = 0; h < 8; h++)
    AA_CHECK(s8[h] == ldexp(1, -(h + 1)), "geometric slope %d of 8: %a", h, s8[h]);
  aa_problem_alibi_geometric(s6, 6);
  for (int h = 0; h < 6; h++)
    AA_CHECK(s6[h] == w6[h], "geometric slope %d of 6: %a vs %a", h, s6[h], w6[h]);
  aa_problem_alibi_geometric(s12, 12); /* 8 of 2^(-k), then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 rounded to fp32 */
  AA_CHECK(s12[8] == (double)(float)0.70710678118654752 && s12[11] == (double)(float)0.088388347648318441,
           "geometric slopes 9 and 12 of 12: %a %a", s12[8], s12[11]);
}

static void test_check(void) {
  aa_problem_t pb;
  aa_error_t err = {{0}};
  double bad = NAN;
  aa_problem_init(&pb, 4, 9, 4, 1, 1);
  pb.causal = 1;
  AA_CHECK(aa_problem_check(&pb, &err) == AA_OK, "causal with n_q != n_k is accepted: %s", err.msg);
  pb.softcap = -1;
  AA_CHECK(aa_problem_check(&pb, &err) == AA_EINVAL, "negative softcap refused");
  pb.softcap = 0;
  pb.alibi = AA_ALIBI_FLASH;
  AA_CHECK(aa_problem_check(&pb, &err) == AA_EINVAL, "ALiBi without slopes refused");
  pb.alibi_slopes = &bad;
  AA_CHECK(aa_problem_check(&pb, &err) == AA_EINVAL && strstr(err.msg, "head 0") != NULL,
           "NaN slope refused naming the head: %s", err.msg);
  pb.alibi = AA_ALIBI_NONE;
  pb.window = 3;
  pb.causal = 0;
  AA_CHECK(aa_problem_check(&pb, &err) == AA_EINVAL, "the W-key window still needs causal");
}

int main(void) {
  uint64_t seed = aa_test_seed("tproblem");
  test_masks(seed);
  test_alibi();
  test_check();
  return aa_test_finish("tproblem");
}
