/* attnacc: tests of the oracle's accuracy target: a looser target stays certified and agrees with the default one. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "oracle/oracle-impl.h"
#include "toracle_common.c"

/* aa_oracle_opts_t.target sets the certified relative accuracy every
   element must reach before the fast path accepts it. Checked here against
   the default-target oracle on the same inputs as the second witness:
   - a looser target (2^-24) must still certify every element to it
     (relerr_bound <= 2^-24) and both results contain the exact value, so
     |a - b| <= (2^-24 + 2^-48) |x| <= (2^-24 + 2^-48) |b| / (1 - 2^-48)
     element by element; their FP32 and BF16 roundings, both claimed
     correct, must be identical;
   - it never recomputes more elements in MPFR than the default target, and
     on inputs with large scores (amplitude 4 to 6: rows dominated by one
     key, where dP - D cancels to many bits) strictly fewer;
   - targets outside [2^-96, 2^-8] are refused with AA_EINVAL. */

static int run_target(aa_oracle_result_t *res, const tor_case_t *tc, double target) {
  aa_oracle_opts_t o;
  aa_error_t err = {{0}};
  aa_oracle_opts_init(&o);
  o.target = target;
  int st = aa_oracle_run(res, &tc->pb, &tc->q, &tc->k, &tc->v, &tc->dO, &o, &err);
  if (st != AA_OK) AA_FAIL("oracle run (target %a): status %d: %s", target, st, err.msg);
  return st;
}

int main(void) {
  uint64_t seed = aa_test_seed("toracle_target");
  (void)tor_run;
  (void)tor_compare;
  /* n, d, heads, kvh, causal, window, packing, sinks, dropout, scale_given, fp32, amp */
  tor_cfg_t cfgs[] = {
      {256, 64, 1, 1, 0, 0, 0, 0, 0, 0, 0, 4.5},
      {200, 16, 2, 1, 1, 0, 0, 0, 0, 0, 0, 6.0},
      {160, 128, 1, 1, 0, 0, 0, 1, 0, 0, 0, 4.0},
  };
  const double loose = 0x1p-24, tight = AA_ORACLE_TARGET_DEFAULT;
  size_t fewer = 0, ncfg = sizeof cfgs / sizeof cfgs[0];
  for (size_t ci = 0; ci < ncfg; ci++) {
    tor_cfg_t *c = &cfgs[ci];
    uint64_t s = seed + ci;
    tor_case_t tc;
    tor_make(&tc, c, s);
    aa_oracle_result_t a, b;
    if (run_target(&a, &tc, loose) == AA_OK) {
      if (run_target(&b, &tc, tight) == AA_OK) {
        for (int t = 0; t < 6; t++) {
          const aa_oracle_out_t *oa = tor_out(&a, t), *ob = tor_out(&b, t);
          AA_CHECK(oa->relerr_bound <= loose, "case %zu %s: bound %a <= 2^-24, seed %llu", ci, tor_names[t],
                   oa->relerr_bound, (unsigned long long)s);
          AA_CHECK(ob->relerr_bound <= tight, "case %zu %s: bound %a <= 2^-48, seed %llu", ci, tor_names[t],
                   ob->relerr_bound, (unsigned long long)s);
          size_t ne = aa_tensor_numel(&ob->val);
          for (size_t i = 0; i < ne; i++) {
            double x = oa->val.data[i], y = ob->val.data[i];
            if (isinf(y) && x == y) continue; /* LSE of an empty row */
            if (!(fabs(x - y) <= (loose + tight) * fabs(y) / (1 - tight) * (1 + 0x1p-50)))
              AA_FAIL("case %zu %s[%zu]: target 2^-24 value %a within 2^-24 of the 2^-48 value %a, seed %llu", ci,
                      tor_names[t], i, x, y, (unsigned long long)s);
            if (tor_bits(oa->fp32.data[i]) != tor_bits(ob->fp32.data[i]) ||
                tor_bits(oa->bf16.data[i]) != tor_bits(ob->bf16.data[i]))
              AA_FAIL("case %zu %s[%zu]: identical roundings: fp32 %a vs %a, bf16 %a vs %a, seed %llu", ci,
                      tor_names[t], i, oa->fp32.data[i], ob->fp32.data[i], oa->bf16.data[i], ob->bf16.data[i],
                      (unsigned long long)s);
          }
        }
        AA_CHECK(a.n_uncertified == 0 && b.n_uncertified == 0, "case %zu: no uncertified element (%zu, %zu)", ci,
                 a.n_uncertified, b.n_uncertified);
        AA_CHECK(a.n_recomputed <= b.n_recomputed, "case %zu: target 2^-24 recomputes %zu <= %zu of 2^-48", ci,
                 a.n_recomputed, b.n_recomputed);
        printf("case %zu (n %zu d %zu amp %g): recomputed in MPFR: %zu at 2^-24, %zu at 2^-48\n", ci, c->n, c->d,
               c->amp, a.n_recomputed, b.n_recomputed);
        fewer += a.n_recomputed < b.n_recomputed;
        aa_oracle_result_free(&b);
      }
      aa_oracle_result_free(&a);
    }
    tor_free(&tc);
  }
  AA_CHECK(fewer > 0, "a looser target spares MPFR recomputes in at least one large-score case");

  /* out-of-range targets */
  {
    tor_cfg_t c = {8, 4, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1.0};
    tor_case_t tc;
    tor_make(&tc, &c, seed);
    const double bad[] = {0.0, 0x1p-7, 0x1p-97, NAN, -0x1p-30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      aa_oracle_opts_t o;
      aa_oracle_result_t r;
      aa_error_t err = {{0}};
      aa_oracle_opts_init(&o);
      o.target = bad[i];
      int st = aa_oracle_run(&r, &tc.pb, &tc.q, &tc.k, &tc.v, &tc.dO, &o, &err);
      AA_CHECK(st == AA_EINVAL, "target %a refused with AA_EINVAL (got %d)", bad[i], st);
      AA_CHECK(st != AA_OK || 0, "no result for target %a", bad[i]);
      if (st == AA_OK) aa_oracle_result_free(&r);
    }
    tor_free(&tc);
  }
  return aa_test_finish("toracle_target");
}
