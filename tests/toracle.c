/* attnacc: oracle tests: fast path against the MPFR path over masks, GQA, sinks and dropout; MPFR at two precisions;
 * thread independence; argument errors. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <time.h>

#include "toracle_common.c"

static void check_result(const aa_oracle_result_t *r, const char *what, uint64_t seed) {
  for (int t = 0; t < 6; t++) {
    const aa_oracle_out_t *o = tor_out(r, t);
    AA_CHECK(o->relerr_bound <= 0x1p-48, "%s %s: relerr_bound %a <= 2^-48, seed %llu", what, tor_names[t],
             o->relerr_bound, (unsigned long long)seed);
    size_t n = aa_tensor_numel(&o->val);
    for (size_t i = 0; i < n; i++) {
      /* the stored roundings are roundings of val's neighbourhood: FP32/BF16 of val itself may differ only
         when val is within relerr of a midpoint, so check the weaker property |fp32 - val| <= ulp-ish */
      double v = o->val.data[i], f = o->fp32.data[i];
      if (isnan(v) || isnan(f) || isnan(o->bf16.data[i])) {
        AA_FAIL("%s %s[%zu]: no NaN (val %a fp32 %a bf16 %a), seed %llu", what, tor_names[t], i, v, f,
                o->bf16.data[i], (unsigned long long)seed);
        break;
      }
      if (isfinite(v) && fabs(f - v) > 0x1p-23 * fabs(v) + 0x1p-149) {
        AA_FAIL("%s %s[%zu]: fp32 %a is a rounding of val %a, seed %llu", what, tor_names[t], i, f, v,
                (unsigned long long)seed);
        break;
      }
    }
  }
}

int main(void) {
  uint64_t seed = aa_test_seed("toracle");
  int expensive = aa_test_expensive();
  /* n, d, heads, kvh, causal, window, packing, sinks, dropout, scale_given, fp32, amp */
  tor_cfg_t cfgs[] = {
      {64, 16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1.0},
      {64, 16, 4, 2, 1, 0, 0, 0, 0, 0, 0, 1.0},
      {96, 16, 2, 1, 1, 17, 0, 2, 0, 0, 0, 1.0},
      {80, 16, 2, 2, 0, 0, 2, 1, 0, 0, 0, 1.0},
      {64, 16, 4, 2, 0, 0, 0, 0, 1, 0, 0, 1.0},
      {64, 64, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1.0},
      {48, 16, 2, 1, 0, 0, 1, 0, 0, 0, 1, 1.0},
      {64, 16, 1, 1, 1, 0, 0, 0, 0, 0, 0, 6.0},
      {128, 128, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1.0},
      {256, 16, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1.0},
      /* large scores: rows dominated by one key, recomputed rows lend their MPFR statistics to the columns */
      {192, 64, 1, 1, 0, 0, 0, 0, 0, 0, 0, 4.5},
      {512, 64, 2, 1, 1, 0, 1, 1, 1, 0, 0, 1.0},
      {512, 128, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1.0},
  };
  size_t ncfg = sizeof cfgs / sizeof cfgs[0], ncheap = ncfg - 2;
  int iters = (int)aa_test_multiplier();
  for (int it = 0; it < iters; it++) {
    for (size_t ci = 0; ci < (expensive ? ncfg : ncheap); ci++) {
      tor_cfg_t *c = &cfgs[ci];
      uint64_t s = seed + (uint64_t)it * 1000 + ci;
      tor_case_t tc;
      tor_make(&tc, c, s);
      aa_oracle_result_t rf, rm;
      char what[160];
      snprintf(what, sizeof what,
               "fast vs mpfr (n %zu d %zu heads %zu/%zu causal %d window %zu packing %d sinks %zu dropout %d "
               "scale %d fp32 %d amp %g)",
               c->n, c->d, c->heads, c->kvh, c->causal, c->window, c->packing, c->ns, c->dropout, c->scale_given,
               c->fp32, c->amp);
      if (tor_run(&rf, &tc, AA_ORACLE_FAST, 128, 0) == AA_OK) {
        if (tor_run(&rm, &tc, AA_ORACLE_MPFR, 128, 0) == AA_OK) {
          tor_compare(&rf, &rm, what, s, 0);
          check_result(&rf, what, s);
          check_result(&rm, what, s);
          printf("cfg %zu: fast %zu recomputed, %zu uncertified; mpfr %zu uncertified; bounds O %.2g dQ %.2g dK "
                 "%.2g\n",
                 ci, rf.n_recomputed, rf.n_uncertified, rm.n_uncertified, rf.o.relerr_bound, rf.dq.relerr_bound,
                 rf.dk.relerr_bound);
          aa_oracle_result_free(&rm);
        }
        aa_oracle_result_free(&rf);
      }
      tor_free(&tc);
    }
  }

  /* MPFR at 128 bits against MPFR at 192 bits: within the claimed bounds. */
  {
    tor_cfg_t c = {48, 16, 2, 1, 1, 0, 0, 1, 1, 0, 0, 2.0};
    tor_case_t tc;
    tor_make(&tc, &c, seed + 77);
    aa_oracle_result_t a, b;
    if (tor_run(&a, &tc, AA_ORACLE_MPFR, 128, 1) == AA_OK) {
      if (tor_run(&b, &tc, AA_ORACLE_MPFR, 192, 1) == AA_OK) {
        tor_compare(&a, &b, "mpfr 128 vs 192", seed + 77, 0);
        aa_oracle_result_free(&b);
      }
      aa_oracle_result_free(&a);
    }
    tor_free(&tc);
  }

  /* Thread count never changes a bit. */
  {
    tor_cfg_t c = {160, 64, 2, 1, 1, 0, 1, 1, 1, 0, 0, 1.0};
    tor_case_t tc;
    tor_make(&tc, &c, seed + 99);
    for (int path = 0; path < 2; path++) {
      aa_oracle_result_t a, b;
      if (path == AA_ORACLE_MPFR) {
        tc.pb.n_q = tc.pb.n_k = 40; /* a smaller problem for the MPFR path: rebuild the tensors */
        tor_free(&tc);
        c.n = 40;
        tor_make(&tc, &c, seed + 99);
      }
      if (tor_run(&a, &tc, (aa_oracle_path_t)path, 128, 1) == AA_OK) {
        if (tor_run(&b, &tc, (aa_oracle_path_t)path, 128, 2) == AA_OK) {
          tor_compare(&a, &b, path ? "threads 1 vs 2 (fast)" : "threads 1 vs 2 (mpfr)", seed + 99, 1);
          aa_oracle_result_free(&b);
        }
        aa_oracle_result_free(&a);
      }
    }
    tor_free(&tc);
  }

  /* Argument errors. */
  {
    tor_cfg_t c = {16, 16, 2, 1, 0, 0, 0, 0, 0, 0, 0, 1.0};
    tor_case_t tc;
    tor_make(&tc, &c, seed);
    aa_oracle_result_t r;
    aa_error_t err = {{0}};
    int st = aa_oracle_run(&r, &tc.pb, &tc.k, &tc.k, &tc.v, &tc.dO, NULL, &err);
    AA_CHECK(st == AA_ESHAPE && err.msg[0] != '\0', "q with the shape of k is AA_ESHAPE with a message (got %d: %s)",
             st, err.msg);
    tc.pb.kv_heads = 3;
    st = aa_oracle_run(&r, &tc.pb, &tc.q, &tc.k, &tc.v, &tc.dO, NULL, &err);
    AA_CHECK(st == AA_ESHAPE, "heads %% kv_heads != 0 is AA_ESHAPE (got %d)", st);
    tc.pb.kv_heads = 1;
    tc.q.data[3] = NAN;
    st = aa_oracle_run(&r, &tc.pb, &tc.q, &tc.k, &tc.v, &tc.dO, NULL, &err);
    AA_CHECK(st == AA_ENAN, "a NaN input is AA_ENAN (got %d)", st);
    tc.q.data[3] = 0;
    aa_oracle_opts_t o;
    aa_oracle_opts_init(&o);
    o.prec = 10;
    st = aa_oracle_run(&r, &tc.pb, &tc.q, &tc.k, &tc.v, &tc.dO, &o, &err);
    AA_CHECK(st == AA_EINVAL, "precision 10 is AA_EINVAL (got %d)", st);
    aa_oracle_path_t p;
    AA_CHECK(aa_oracle_path_from_name(&p, "mpfr") == AA_OK && p == AA_ORACLE_MPFR, "name mpfr");
    AA_CHECK(aa_oracle_path_from_name(&p, "fast") == AA_OK && p == AA_ORACLE_FAST, "name fast");
    AA_CHECK(aa_oracle_path_from_name(&p, "exact") == AA_ENOTFOUND, "unknown name");
    tor_free(&tc);
  }
  return aa_test_finish("toracle");
}
