/* attnacc: tests of the oracle's binary64 tier (loose targets): every value against MPFR at higher precision, on
 * adversarial inputs, and the same bits on any thread count. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "oracle/oracle-impl.h"
#include "toracle_common.c"

/* At a target of AA_OR_TIER64_TARGET or looser the tiled kernel accumulates dQ, dK and dV in plain binary64 with
   an a-posteriori bound and redoes in double-double the rows it cannot certify (fast.c, acc_tile64). Checked:
   - every element of every output against the MPFR path at 256 bits (target 2^-48: an MPFR run of these sizes at
   2^-64 leaves elements uncertified) (an independent engine: mpeng.c, no double-double): |a - r| <= (bound_a +
   bound_r) |r| (1 + 2^-40), identical FP32 and BF16 roundings, relerr_bound <= the target, nothing uncertified;
   - inputs chosen to hurt it: large scores (amplitude 4.5 and 6, rows dominated by one key), values that make
     dP - D cancel (v rows equal up to a 2^-6 perturbation), ties (key columns that are constant, whose dQ is an
     exact zero certified by an identity only), GQA, causal and windowed masks, packing, sinks, dropout, FP32
     inputs that fail the span test;
   - the tier really ran: the gradients' relerr_bound is far above the double-double kernel's (~2^-53), which would
   pass everything above with the tier switched off;
   - threads 1, 2 and 3 give the same bits and counts (fixed summation order);
   - the pair store that phase 2 reads gives the same bits and counts as recomputing every pair, in one chunk or
     in several;
   - on a larger problem (n = 1024, 2048 with ATTNACC_CHECK_EXPENSIVE) against the all-double-double tiled kernel
     at the default target 2^-48 as the witness. */

static int run_k(aa_oracle_result_t *res, const tor_case_t *tc, aa_oracle_path_t path, int prec, double target,
                 int kernel, int threads) {
  aa_oracle_opts_t o;
  aa_oracle_opts_init(&o);
  o.path = path;
  o.prec = prec;
  o.target = target;
  o.threads = threads;
  o.device = AA_ORACLE_DEVICE_CPU;
  aa_error_t err = {{0}};
  int st = aa_oracle_run_kernel(res, &tc->pb, &tc->q, &tc->k, &tc->v, &tc->dO, &o, kernel, &err);
  if (st != AA_OK) AA_FAIL("oracle run (kernel %d, target %a): status %d: %s", kernel, target, st, err.msg);
  return st;
}

/* v rows equal up to a small perturbation (dP - D cancels) and the first key columns constant (exact dQ zeros). */
static void make_adversarial(tor_case_t *tc, uint64_t seed) {
  aa_pcg64_t r;
  aa_pcg64_seed(&r, seed, 7);
  size_t d = tc->pb.d, nk = aa_tensor_numel(&tc->v) / d;
  for (size_t j = 0; j < nk; j++)
    for (size_t c = 0; c < d; c++) {
      double base = tc->v.data[c]; /* row 0 */
      tc->v.data[j * d + c] = (double)aa_bf16_rne((float)(base + 0x1p-6 * aa_pcg64_normal(&r)));
    }
  for (size_t j = 0; j < nk; j++)
    for (size_t c = 0; c < 3 && c < d; c++)
      tc->k.data[j * d + c] = 0.5;
}

static void check_vs_ref(const aa_oracle_result_t *a, const aa_oracle_result_t *ref, double target, const char *what,
                         uint64_t seed) {
  tor_compare(a, ref, what, seed, 0);
  for (int t = 0; t < 6; t++)
    AA_CHECK(tor_out(a, t)->relerr_bound <= target, "%s %s: relerr_bound %a <= target %a, seed %llu", what,
             tor_names[t], tor_out(a, t)->relerr_bound, target, (unsigned long long)seed);
  AA_CHECK(a->n_uncertified == 0 && ref->n_uncertified == 0, "%s: nothing uncertified (%zu, %zu), seed %llu", what,
           a->n_uncertified, ref->n_uncertified, (unsigned long long)seed);
}

static void check_same(const aa_oracle_result_t *a, const aa_oracle_result_t *b, const char *what, uint64_t seed) {
  tor_compare(a, b, what, seed, 1);
  for (int t = 0; t < 6; t++)
    AA_CHECK(tor_bits(tor_out(a, t)->relerr_bound) == tor_bits(tor_out(b, t)->relerr_bound),
             "%s %s: same relerr_bound %a vs %a, seed %llu", what, tor_names[t], tor_out(a, t)->relerr_bound,
             tor_out(b, t)->relerr_bound, (unsigned long long)seed);
  AA_CHECK(a->n_recomputed == b->n_recomputed && a->n_uncertified == b->n_uncertified,
           "%s: same counts %zu/%zu vs %zu/%zu, seed %llu", what, a->n_recomputed, a->n_uncertified, b->n_recomputed,
           b->n_uncertified, (unsigned long long)seed);
}

/* The pair store (fast.c, store_t) against the same run without it (phase 2 recomputing every pair) and with one
   group of heads per chunk (several chunks where there are several key/value heads): the same bits and counts. */
static void store_variants(const aa_oracle_result_t *a, const tor_case_t *tc, double target, size_t ci,
                           uint64_t seed) {
  size_t max0 = aa_oracle_store_max, chunk0 = aa_oracle_store_chunk;
  const size_t maxs[] = {0, max0}, chunks[] = {chunk0, 1};
  const char *names[] = {"without the store", "one group per chunk"};
  for (int v = 0; v < 2; v++) {
    aa_oracle_store_max = maxs[v];
    aa_oracle_store_chunk = chunks[v];
    aa_oracle_result_t b;
    char what[96];
    if (run_k(&b, tc, AA_ORACLE_FAST, 128, target, AA_OR_KERNEL_TILED, 2) == AA_OK) {
      snprintf(what, sizeof what, "case %zu (target %a) store vs %s", ci, target, names[v]);
      check_same(a, &b, what, seed);
      aa_oracle_result_free(&b);
    }
  }
  aa_oracle_store_max = max0;
  aa_oracle_store_chunk = chunk0;
}

/* One small case at target: the tier on 1, 2, 3 threads against the MPFR path at 256 bits. */
static void small_case(const tor_cfg_t *c, int adversarial, double target, size_t ci, uint64_t seed) {
  tor_case_t tc;
  char what[96];
  tor_make(&tc, c, seed);
  if (adversarial) make_adversarial(&tc, seed);
  aa_oracle_result_t a[3], ref;
  int ok = 1;
  for (int th = 0; th < 3; th++)
    ok &= run_k(&a[th], &tc, AA_ORACLE_FAST, 128, target, AA_OR_KERNEL_TILED, th + 1) == AA_OK;
  ok &= run_k(&ref, &tc, AA_ORACLE_MPFR, 256, AA_ORACLE_TARGET_DEFAULT, AA_OR_KERNEL_TILED, 0) == AA_OK;
  if (ok) {
    snprintf(what, sizeof what, "case %zu (target %a) tier vs mpfr-256", ci, target);
    check_vs_ref(&a[0], &ref, target, what, seed);
    snprintf(what, sizeof what, "case %zu (target %a) threads 1 vs 2", ci, target);
    check_same(&a[0], &a[1], what, seed);
    snprintf(what, sizeof what, "case %zu (target %a) threads 1 vs 3", ci, target);
    check_same(&a[0], &a[2], what, seed);
    store_variants(&a[0], &tc, target, ci, seed);
    double tb = fmax(a[0].dq.relerr_bound, fmax(a[0].dk.relerr_bound, a[0].dv.relerr_bound));
    AA_CHECK(tb > 0x1p-50, "case %zu: the tier settled gradients (largest relerr_bound %a > 2^-50), seed %llu", ci,
             tb, (unsigned long long)seed);
    printf("case %zu (n %zu d %zu amp %g%s, target %a): bounds dQ %a dK %a dV %a; MPFR recomputes %zu\n", ci, c->n,
           c->d, c->amp, adversarial ? ", adversarial" : "", target, a[0].dq.relerr_bound, a[0].dk.relerr_bound,
           a[0].dv.relerr_bound, a[0].n_recomputed);
  }
  for (int th = 0; th < 3; th++)
    aa_oracle_result_free(&a[th]);
  aa_oracle_result_free(&ref);
  tor_free(&tc);
}

/* A larger case: the tier at 2^-32 against the all-double-double tiled kernel at 2^-48. */
static void large_case(size_t n, size_t d, uint64_t seed) {
  tor_cfg_t c = {n, d, 2, 1, 0, 0, 0, 0, 0, 0, 0, 1.0};
  tor_case_t tc;
  char what[96];
  tor_make(&tc, &c, seed);
  aa_oracle_result_t a, b;
  if (run_k(&a, &tc, AA_ORACLE_FAST, 128, 0x1p-32, AA_OR_KERNEL_TILED, 0) == AA_OK) {
    if (run_k(&b, &tc, AA_ORACLE_FAST, 128, AA_ORACLE_TARGET_DEFAULT, AA_OR_KERNEL_TILED_DD, 0) == AA_OK) {
      snprintf(what, sizeof what, "n %zu d %zu tier 2^-32 vs double-double 2^-48", n, d);
      check_vs_ref(&a, &b, 0x1p-32, what, seed);
      AA_CHECK(a.dq.relerr_bound > 0x1p-50, "n %zu: the tier settled dQ (relerr_bound %a > 2^-50), seed %llu", n,
               a.dq.relerr_bound, (unsigned long long)seed);
      printf("n %zu d %zu: bounds dQ %a dK %a dV %a; MPFR recomputes %zu\n", n, d, a.dq.relerr_bound,
             a.dk.relerr_bound, a.dv.relerr_bound, a.n_recomputed);
      aa_oracle_result_free(&b);
    }
    aa_oracle_result_free(&a);
  }
  tor_free(&tc);
}

int main(void) {
  uint64_t seed = aa_test_seed("toracle_tier64");
  (void)tor_run;
  /* n, d, heads, kvh, causal, window, packing, sinks, dropout, scale_given, fp32, amp */
  const tor_cfg_t cfgs[] = {
      {136, 32, 2, 1, 0, 0, 0, 0, 0, 0, 0, 1.0},  /* GQA, three tiles of keys */
      {150, 16, 1, 1, 1, 0, 0, 0, 0, 0, 0, 4.5},  /* causal, large scores */
      {130, 24, 2, 2, 0, 0, 0, 1, 1, 0, 0, 2.0},  /* sinks and dropout */
      {130, 16, 1, 1, 1, 40, 1, 0, 0, 1, 1, 6.0}, /* window, packing, given scale, FP32 inputs, huge scores */
      {140, 16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1.5},  /* adversarial: dP - D cancels, constant key columns */
  };
  const int adv[] = {0, 0, 0, 0, 1};
  const double targets[] = {0x1p-32, AA_OR_TIER64_TARGET, 0x1p-16};
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
    small_case(&cfgs[ci], adv[ci], targets[ci % 3], ci, seed + ci);
  small_case(&cfgs[4], 1, 0x1p-24, 5, seed + 5);
  large_case(1024, 64, seed + 10);
  if (aa_test_expensive()) large_case(2048, 128, seed + 11);
  return aa_test_finish("toracle_tier64");
}
