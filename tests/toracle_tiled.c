/* attnacc: tests of the oracle's tiled fast kernel against the row-by-row reference kernel and across thread counts.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "oracle/oracle-impl.h"
#include "toracle_common.c"

/* The tiled kernel (fast.c) performs, for every output element, the same
   operations in the same order as the row-by-row kernel (fast_rows.c),
   except that its long sums (O, dQ, dK, dV) restart at every 64-term tile
   and the tile partials are merged with an accurate double-double addition
   (blocked accumulation, for a bound that grows with the number of tiles
   instead of n^2). The values therefore differ in the last bits: the two
   kernels must agree within the sum of their certified bounds, with
   identical FP32/BF16 roundings, and both bounds must meet the 2^-48
   target (the recompute counts may differ). Across thread counts the tiled
   kernel's results must be identical bit for bit, bounds and recompute
   counts included. The cases cross the tile edges (n not a multiple of the
   64-row tiles or of the 8-row blocks, d not a multiple of 8), and mix tiles
   whose dot products are provably exact with tiles that need the
   compensated dot product (rows with FP32 values among BF16 ones). */

static int run_kernel(aa_oracle_result_t *res, const tor_case_t *tc, int kernel, int threads) {
  aa_oracle_opts_t o;
  aa_oracle_opts_init(&o);
  o.threads = threads;
  aa_error_t err = {{0}};
  int st = aa_oracle_run_kernel(res, &tc->pb, &tc->q, &tc->k, &tc->v, &tc->dO, &o, kernel, &err);
  if (st != AA_OK) AA_FAIL("oracle run (kernel %d, %d threads): status %d: %s", kernel, threads, st, err.msg);
  return st;
}

static void same_meta(const aa_oracle_result_t *a, const aa_oracle_result_t *b, const char *what, uint64_t seed,
                      double tol) {
  for (int t = 0; t < 6; t++) {
    double x = tor_out(a, t)->relerr_bound, y = tor_out(b, t)->relerr_bound;
    if (tol == 0 ? tor_bits(x) != tor_bits(y) : !(fabs(x - y) <= tol))
      AA_FAIL("%s %s: certified bounds agree (to %a): %a vs %a, seed %llu", what, tor_names[t], tol, x, y,
              (unsigned long long)seed);
  }
  if (a->n_recomputed != b->n_recomputed || a->n_uncertified != b->n_uncertified)
    AA_FAIL("%s: identical recompute counts: %zu/%zu vs %zu/%zu, seed %llu", what, a->n_recomputed, a->n_uncertified,
            b->n_recomputed, b->n_uncertified, (unsigned long long)seed);
}

/* put FP32 values (24-bit significands) into a few rows so that their tiles fail the span test */
static void spoil_rows(tor_case_t *tc, uint64_t seed) {
  aa_pcg64_t r;
  aa_pcg64_seed(&r, seed, 99);
  aa_tensor_t *ts[4] = {&tc->q, &tc->k, &tc->v, &tc->dO};
  size_t d = tc->pb.d;
  for (int w = 0; w < 4; w++) {
    size_t rows = aa_tensor_numel(ts[w]) / d;
    for (size_t row = w + 1; row < rows; row += 67)
      for (size_t c = 0; c < d; c++)
        ts[w]->data[row * d + c] = (double)(float)aa_pcg64_normal(&r);
  }
}

int main(void) {
  uint64_t seed = aa_test_seed("toracle_tiled");
  (void)tor_run; /* shared helper, not needed here */
  int expensive = aa_test_expensive();
  /* n, d, heads, kvh, causal, window, packing, sinks, dropout, scale_given, fp32, amp */
  tor_cfg_t cfgs[] = {
      {131, 13, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1.0},  {150, 16, 4, 2, 1, 0, 0, 0, 0, 0, 0, 1.0},
      {140, 20, 2, 1, 1, 37, 0, 2, 0, 0, 0, 1.0}, {129, 8, 2, 2, 0, 0, 2, 1, 0, 0, 0, 1.0},
      {100, 24, 4, 2, 0, 0, 0, 0, 1, 0, 0, 1.0},  {72, 64, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1.0},
      {90, 16, 2, 1, 0, 0, 1, 0, 0, 0, 1, 1.0},   {70, 16, 1, 1, 1, 0, 0, 0, 0, 0, 0, 6.0},
      {5, 3, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1.0},     {200, 128, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1.0},
      {300, 48, 2, 1, 0, 0, 1, 1, 1, 0, 0, 1.0},
  };
  size_t ncfg = sizeof cfgs / sizeof cfgs[0], ncheap = ncfg - 1;
  int iters = (int)aa_test_multiplier();
  for (int it = 0; it < iters; it++)
    for (size_t ci = 0; ci < (expensive ? ncfg : ncheap); ci++)
      for (int spoil = 0; spoil < 2; spoil++) {
        tor_cfg_t *c = &cfgs[ci];
        uint64_t s = seed + (uint64_t)it * 1000 + ci;
        tor_case_t tc;
        tor_make(&tc, c, s);
        if (spoil) spoil_rows(&tc, s);
        char what[200];
        snprintf(what, sizeof what,
                 "tiled vs rows (n %zu d %zu heads %zu/%zu causal %d window %zu packing %d sinks %zu dropout %d "
                 "scale %d fp32 %d amp %g spoiled %d)",
                 c->n, c->d, c->heads, c->kvh, c->causal, c->window, c->packing, c->ns, c->dropout, c->scale_given,
                 c->fp32, c->amp, spoil);
        aa_oracle_result_t rt1, rt2, rr;
        if (run_kernel(&rt1, &tc, AA_OR_KERNEL_TILED, 1) == AA_OK) {
          if (run_kernel(&rt2, &tc, AA_OR_KERNEL_TILED, 2) == AA_OK) {
            char w2[240];
            snprintf(w2, sizeof w2, "%s, 1 vs 2 threads", what);
            tor_compare(&rt1, &rt2, w2, s, 1);
            same_meta(&rt1, &rt2, w2, s, 0);
            aa_oracle_result_free(&rt2);
          }
          if (run_kernel(&rr, &tc, AA_OR_KERNEL_ROWS, 2) == AA_OK) {
            tor_compare(&rt1, &rr, what, s, 0);
            for (int t = 0; t < 6; t++) {
              double x = tor_out(&rt1, t)->relerr_bound, y = tor_out(&rr, t)->relerr_bound;
              if (!(x <= AA_OR_TARGET && y <= AA_OR_TARGET))
                AA_FAIL("%s %s: both certified bounds meet 2^-48: %a vs %a, seed %llu", what, tor_names[t], x, y,
                        (unsigned long long)s);
            }
            if (rt1.n_uncertified != rr.n_uncertified)
              AA_FAIL("%s: same uncertified counts: %zu vs %zu, seed %llu", what, rt1.n_uncertified, rr.n_uncertified,
                      (unsigned long long)s);
            printf("cfg %zu spoiled %d: %zu recomputed, bounds O %.2g dQ %.2g dK %.2g\n", ci, spoil, rt1.n_recomputed,
                   rt1.o.relerr_bound, rt1.dq.relerr_bound, rt1.dk.relerr_bound);
            aa_oracle_result_free(&rr);
          }
          aa_oracle_result_free(&rt1);
        }
        tor_free(&tc);
      }
  return aa_test_finish("toracle_tiled");
}
