/* attnacc: tests of the metrics module against closed forms, bit-pattern ordinals and MPFR norms. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "tests.h"

static uint64_t xs_state;
static uint64_t xs_next(void) { /* xorshift64*: test data only */
  xs_state ^= xs_state >> 12;
  xs_state ^= xs_state << 25;
  xs_state ^= xs_state >> 27;
  return xs_state * UINT64_C(2685821657736338717);
}

static float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* An oracle output whose val, fp32 and bf16 tensors hold the given values
   (the caller passes values already exact in each format). */
static void make_ref(aa_oracle_out_t *r, const double *val, const double *f32, const double *b16, size_t n) {
  size_t shape[1] = {n};
  memset(r, 0, sizeof *r);
  aa_tensor_alloc(&r->val, 1, shape, AA_FMT_FP64);
  aa_tensor_alloc(&r->fp32, 1, shape, AA_FMT_FP32);
  aa_tensor_alloc(&r->bf16, 1, shape, AA_FMT_BF16);
  memcpy(r->val.data, val, n * sizeof *val);
  memcpy(r->fp32.data, f32 ? f32 : val, n * sizeof *val);
  memcpy(r->bf16.data, b16 ? b16 : val, n * sizeof *val);
}
static void free_ref(aa_oracle_out_t *r) {
  aa_tensor_free(&r->val);
  aa_tensor_free(&r->fp32);
  aa_tensor_free(&r->bf16);
}
static void make_t(aa_tensor_t *t, const double *v, size_t n, aa_fmt_t fmt) {
  size_t shape[1] = {n};
  aa_tensor_alloc(t, 1, shape, fmt);
  memcpy(t->data, v, n * sizeof *v);
}

static int close_rel(double got, double want, double tol) {
  if (want == 0) return got == 0;
  return fabs(got - want) <= tol * fabs(want);
}

/* The ordinal equals the sign-magnitude bit pattern for every BF16 value
   (exhaustive) and every FP16 value (exhaustive, via the IEEE layout). */
static void test_ordinal_exhaustive(void) {
  for (uint32_t b = 0; b < 65536; b++) {
    double v = (double)f32_from_bits(b << 16), want, got;
    if (isnan(v)) {
      AA_CHECK(isnan(aa_metrics_ordinal(v, AA_FMT_BF16)), "tmetrics ordinal bf16 0x%04x: NaN not NaN", b);
      continue;
    }
    want = (b & 0x8000) ? -(double)(b & 0x7fff) : (double)b;
    got = aa_metrics_ordinal(v, AA_FMT_BF16);
    if (got != want) {
      AA_FAIL("tmetrics ordinal bf16: bits 0x%04x value %a: got %.17g want %.17g", b, v, got, want);
      break;
    }
  }
  for (uint32_t b = 0; b < 65536; b++) {
    int e = (b >> 10) & 31;
    uint32_t m = b & 1023;
    double v, want, got;
    if (e == 31 && m) continue;
    v = e == 31 ? INFINITY : e == 0 ? ldexp((double)m, -24) : ldexp(1024.0 + m, e - 25);
    if (b & 0x8000) v = -v;
    want = (b & 0x8000) ? -(double)(b & 0x7fff) : (double)b;
    got = aa_metrics_ordinal(v, AA_FMT_FP16);
    if (got != want) {
      AA_FAIL("tmetrics ordinal fp16: bits 0x%04x value %a: got %.17g want %.17g", b, v, got, want);
      break;
    }
  }
  /* FP32: random patterns plus the edges. */
  for (int i = 0; i < 200000; i++) {
    uint32_t b = i < 8 ? (uint32_t[]){0, 1, 0x7f7fffff, 0x7f800000, 0x80000000, 0x80000001, 0x00800000, 0x007fffff}[i]
                       : (uint32_t)xs_next();
    float f = f32_from_bits(b);
    double want, got;
    if (isnan(f)) continue;
    want = (b & 0x80000000u) ? -(double)(b & 0x7fffffffu) : (double)b;
    got = aa_metrics_ordinal((double)f, AA_FMT_FP32);
    if (got != want) {
      AA_FAIL("tmetrics ordinal fp32: bits 0x%08x value %a: got %.17g want %.17g", b, (double)f, got, want);
      break;
    }
  }
  /* Between grid points it interpolates; across zero it is monotone. */
  AA_CHECK(aa_metrics_ordinal(1.0 + 0x1p-8, AA_FMT_BF16) == 16256.5, "tmetrics ordinal: 1 + 2^-8 in bf16 is %.17g",
           aa_metrics_ordinal(1.0 + 0x1p-8, AA_FMT_BF16));
  AA_CHECK(aa_metrics_ordinal(0x1p-133, AA_FMT_BF16) - aa_metrics_ordinal(-0x1p-133, AA_FMT_BF16) == 2,
           "tmetrics ordinal: +-min subnormal are not 2 apart");
  AA_CHECK(aa_metrics_ordinal(1e300, AA_FMT_FP32) == aa_metrics_ordinal(INFINITY, AA_FMT_FP32),
           "tmetrics ordinal: beyond max does not saturate at Inf");
  AA_CHECK(isnan(aa_metrics_ordinal(1.0, AA_FMT_FP64)), "tmetrics ordinal: fp64 should be NaN (unsupported)");
}

static void test_closed_form(void) {
  /* b = (3, 4, 0, 0); a = (3, 4 + 2^-5, 0, -2^-6): ||a - b|| = sqrt(2^-10 + 2^-12),
     ||b|| = 5; bf16 ULPs: 0, 1 (ulp at 4 is 2^-5), 0, and the bf16 pattern of
     2^-6, (127 - 6) << 7 = 15488. */
  const double b[4] = {3, 4, 0, 0}, a[4] = {3, 4 + 0x1p-5, 0, -0x1p-6};
  aa_oracle_out_t r;
  aa_tensor_t t;
  aa_metrics_t m;
  aa_error_t err = {{0}};
  double want_rel = sqrt(0x1p-10 + 0x1p-12) / 5, want_ulp = (double)(f32_bits(0x1p-6f) >> 16);
  int rc;
  make_ref(&r, b, NULL, NULL, 4);
  make_t(&t, a, 4, AA_FMT_BF16);
  rc = aa_metrics_compare(&m, &t, &r, AA_FMT_BF16, AA_METRICS_ATOL, AA_METRICS_RTOL, &err);
  AA_CHECK(rc == AA_OK, "tmetrics closed form: status %d (%s)", rc, err.msg);
  AA_CHECK(m.count == 4 && m.nan == 0 && m.inf == 0, "tmetrics closed form: counts %zu %zu %zu", m.count, m.nan,
           m.inf);
  AA_CHECK(close_rel(m.rel_l2, want_rel, 1e-15), "tmetrics closed form: rel_l2 %a want %a", m.rel_l2, want_rel);
  AA_CHECK(m.max_abs == 0x1p-5, "tmetrics closed form: max_abs %a want 0x1p-5", m.max_abs);
  AA_CHECK(want_ulp == 15488 && m.max_ulp == want_ulp, "tmetrics closed form: max_ulp %.17g want %.17g", m.max_ulp,
           want_ulp);
  AA_CHECK(m.mean_ulp == (1 + want_ulp) / 4, "tmetrics closed form: mean_ulp %.17g", m.mean_ulp);
  /* rule 1 with 0.01/0.01: 2^-5 <= 0.01 + 0.04 passes, 2^-6 > 0.01 + 0 fails. */
  AA_CHECK(m.fail_count == 1 && m.pass == 0, "tmetrics closed form: fail_count %zu pass %d", m.fail_count, m.pass);
  AA_CHECK(isnan(m.fa_ratio) && m.fa_factor == 0 && m.fa_pass == 0, "tmetrics: fa fields not reset");
  /* FP32 ULPs: the fp32 tensor of the oracle is used. 4 + 2^-5 is 2^16 fp32 ulps (2^-21) above 4. */
  rc = aa_metrics_compare(&m, &t, &r, AA_FMT_FP32, AA_METRICS_ATOL, AA_METRICS_RTOL, &err);
  AA_CHECK(rc == AA_OK && m.max_ulp == (double)f32_bits(0x1p-6f), "tmetrics fp32 ulps: max_ulp %.17g", m.max_ulp);
  AA_CHECK(m.mean_ulp == (65536.0 + (double)f32_bits(0x1p-6f)) / 4, "tmetrics fp32 ulps: mean %.17g", m.mean_ulp);
  aa_tensor_free(&t);
  free_ref(&r);

  /* ULPs are taken against the correctly rounded tensor, not against val:
     val = 1 + 2^-9 (bf16 CR 1), got = 1 + 2^-7 is one bf16 ulp away. */
  {
    const double v[1] = {1 + 0x1p-9}, cr[1] = {1}, g[1] = {1 + 0x1p-7};
    make_ref(&r, v, v, cr, 1);
    make_t(&t, g, 1, AA_FMT_BF16);
    aa_metrics_compare(&m, &t, &r, AA_FMT_BF16, AA_METRICS_ATOL, AA_METRICS_RTOL, &err);
    AA_CHECK(m.max_ulp == 1 && m.max_abs == 0x1p-7 - 0x1p-9, "tmetrics cr ulps: max_ulp %.17g max_abs %a", m.max_ulp,
             m.max_abs);
    aa_tensor_free(&t);
    free_ref(&r);
  }
  /* Rule 1 boundary: |d| = atol + rtol |b| passes, one ulp more fails. */
  {
    const double v[2] = {1, 1}, g[2] = {1.5, 1.5 + 0x1p-52};
    make_ref(&r, v, NULL, NULL, 2);
    make_t(&t, g, 2, AA_FMT_FP64);
    aa_metrics_compare(&m, &t, &r, AA_FMT_FP32, 0.25, 0.25, &err);
    AA_CHECK(m.fail_count == 1 && !m.pass, "tmetrics rule 1 boundary: fail_count %zu", m.fail_count);
    AA_CHECK(aa_metrics_compare(&m, &t, &r, AA_FMT_FP32, -1, 0.25, &err) == AA_EINVAL, "tmetrics: atol < 0 accepted");
    AA_CHECK(aa_metrics_compare(&m, &t, &r, AA_FMT_FP64, 0.25, 0.25, &err) == AA_EINVAL,
             "tmetrics: fp64 ulps accepted");
    aa_tensor_free(&t);
    free_ref(&r);
  }
}

static void test_nonfinite(void) {
  const double b[4] = {1, 1, 1, 2}, a[4] = {NAN, 1.5, INFINITY, 2};
  aa_oracle_out_t r;
  aa_tensor_t t;
  aa_metrics_t m;
  aa_error_t err = {{0}};
  make_ref(&r, b, NULL, NULL, 4);
  make_t(&t, a, 4, AA_FMT_BF16);
  aa_metrics_compare(&m, &t, &r, AA_FMT_BF16, AA_METRICS_ATOL, AA_METRICS_RTOL, &err);
  /* finite elements 1 and 3: ||(0.5, 0)|| / ||(1, 2)|| = 0.5 / sqrt 5 */
  AA_CHECK(m.nan == 1 && m.inf == 1, "tmetrics NaN: counts nan %zu inf %zu", m.nan, m.inf);
  AA_CHECK(close_rel(m.rel_l2, 0.5 / sqrt(5.0), 1e-15), "tmetrics NaN: rel_l2 %a want %a", m.rel_l2, 0.5 / sqrt(5.0));
  AA_CHECK(m.max_abs == 0.5 && m.max_ulp == 64 && m.mean_ulp == 32, "tmetrics NaN: max_abs %a max_ulp %g mean %g",
           m.max_abs, m.max_ulp, m.mean_ulp);
  AA_CHECK(m.fail_count == 3 && m.pass == 0, "tmetrics NaN: fail_count %zu (NaN, Inf, 0.5) pass %d", m.fail_count,
           m.pass);
  aa_tensor_free(&t);
  free_ref(&r);
  {
    const double bb[2] = {0, 0}, z[2] = {0, -0.0}, one[2] = {1, 0}, nn[2] = {NAN, NAN};
    make_ref(&r, bb, NULL, NULL, 2);
    make_t(&t, z, 2, AA_FMT_BF16);
    aa_metrics_compare(&m, &t, &r, AA_FMT_BF16, AA_METRICS_ATOL, AA_METRICS_RTOL, &err);
    AA_CHECK(m.rel_l2 == 0 && m.max_ulp == 0 && m.pass, "tmetrics zero ref, zero got: rel_l2 %g", m.rel_l2);
    aa_tensor_free(&t);
    make_t(&t, one, 2, AA_FMT_BF16);
    aa_metrics_compare(&m, &t, &r, AA_FMT_BF16, AA_METRICS_ATOL, AA_METRICS_RTOL, &err);
    AA_CHECK(isinf(m.rel_l2) && m.max_abs == 1, "tmetrics zero ref: rel_l2 %g want Inf", m.rel_l2);
    aa_tensor_free(&t);
    make_t(&t, nn, 2, AA_FMT_BF16);
    aa_metrics_compare(&m, &t, &r, AA_FMT_BF16, AA_METRICS_ATOL, AA_METRICS_RTOL, &err);
    AA_CHECK(isnan(m.rel_l2) && isnan(m.max_abs) && m.nan == 2 && !m.pass, "tmetrics all NaN: rel_l2 %g", m.rel_l2);
    aa_tensor_free(&t);
    free_ref(&r);
  }
  { /* element counts must agree */
    const double v3[3] = {1, 2, 3};
    make_ref(&r, v3, NULL, NULL, 3);
    make_t(&t, v3, 2, AA_FMT_BF16);
    AA_CHECK(aa_metrics_compare(&m, &t, &r, AA_FMT_BF16, 0.01, 0.01, &err) == AA_ESHAPE,
             "tmetrics: shape mismatch accepted");
    aa_tensor_free(&t);
    free_ref(&r);
  }
}

/* Scaling: squares that overflow or underflow double do not disturb rel_l2. */
static void test_scaling(void) {
  int exps[3] = {700, -700, -1060};
  for (int k = 0; k < 3; k++) {
    double s = ldexp(1.0, exps[k]);
    const double b[2] = {3 * s, 4 * s};
    double a[2] = {b[0] + b[0] * 0x1p-10, b[1] + b[1] * 0x1p-10};
    aa_oracle_out_t r;
    aa_tensor_t t;
    aa_metrics_t m;
    aa_error_t err = {{0}};
    make_ref(&r, b, NULL, NULL, 2);
    make_t(&t, a, 2, AA_FMT_FP64);
    aa_metrics_compare(&m, &t, &r, AA_FMT_FP32, 0, 0, &err);
    AA_CHECK(close_rel(m.rel_l2, 0x1p-10, 1e-15), "tmetrics scaling 2^%d: rel_l2 %a want 0x1p-10", exps[k], m.rel_l2);
    aa_tensor_free(&t);
    free_ref(&r);
  }
}

/* rel_l2 against MPFR at 256 bits on random data with a wide spread of
   magnitudes and many elements: relative error below 2^-50. */
static void test_vs_mpfr(uint64_t seed) {
  size_t n = 200000;
  double *b = malloc(n * sizeof *b), *a = malloc(n * sizeof *a), want;
  aa_oracle_out_t r;
  aa_tensor_t t;
  aa_metrics_t m;
  aa_error_t err = {{0}};
  mpfr_t sd, sb, x, y;
  xs_state = seed | 1;
  mpfr_inits2(256, sd, sb, x, y, (mpfr_ptr)0);
  mpfr_set_zero(sd, 1);
  mpfr_set_zero(sb, 1);
  for (size_t i = 0; i < n; i++) {
    double u = (double)(xs_next() >> 11) * 0x1p-53, e = (double)(xs_next() >> 11) * 0x1p-53;
    b[i] = ldexp(u - 0.5, (int)(e * 60) - 30);
    a[i] = (double)(float)(b[i] * (1 + 1e-3 * ((double)(xs_next() >> 11) * 0x1p-53 - 0.5)));
    mpfr_set_d(x, a[i] - b[i], MPFR_RNDN); /* the metric defines the difference as a - b rounded to double */
    mpfr_sqr(x, x, MPFR_RNDN);
    mpfr_add(sd, sd, x, MPFR_RNDN);
    mpfr_set_d(y, b[i], MPFR_RNDN);
    mpfr_sqr(y, y, MPFR_RNDN);
    mpfr_add(sb, sb, y, MPFR_RNDN);
  }
  mpfr_div(x, sd, sb, MPFR_RNDN);
  mpfr_sqrt(x, x, MPFR_RNDN);
  want = mpfr_get_d(x, MPFR_RNDN);
  make_ref(&r, b, NULL, NULL, n);
  make_t(&t, a, n, AA_FMT_FP32);
  aa_metrics_compare(&m, &t, &r, AA_FMT_FP32, AA_METRICS_ATOL, AA_METRICS_RTOL, &err);
  AA_CHECK(close_rel(m.rel_l2, want, 0x1p-50), "tmetrics vs MPFR (seed %llu): rel_l2 %a want %a",
           (unsigned long long)seed, m.rel_l2, want);
  mpfr_clears(sd, sb, x, y, (mpfr_ptr)0);
  aa_tensor_free(&t);
  free_ref(&r);
  free(a);
  free(b);
}

static void test_fa_rule(void) {
  aa_metrics_t m, nv;
  memset(&m, 0, sizeof m);
  memset(&nv, 0, sizeof nv);
  nv.max_abs = 0.125;
  m.max_abs = 0.375; /* exactly 3x */
  aa_metrics_fa_rule(&m, &nv, 3);
  AA_CHECK(m.fa_pass && m.fa_ratio == 3 && m.fa_ref_max_abs == 0.125 && m.fa_factor == 3,
           "tmetrics fa: 3x with factor 3 must pass (ratio %g)", m.fa_ratio);
  m.max_abs = 0.375 + 0x1p-50;
  aa_metrics_fa_rule(&m, &nv, 3);
  AA_CHECK(!m.fa_pass, "tmetrics fa: above 3x passed");
  aa_metrics_fa_rule(&m, &nv, 2);
  AA_CHECK(!m.fa_pass && m.fa_factor == 2, "tmetrics fa: factor 2");
  m.max_abs = 0.25;
  aa_metrics_fa_rule(&m, &nv, 2);
  AA_CHECK(m.fa_pass && m.fa_ratio == 2, "tmetrics fa: 2x with factor 2 must pass");
  m.nan = 1;
  aa_metrics_fa_rule(&m, &nv, 3);
  AA_CHECK(!m.fa_pass, "tmetrics fa: NaN in output passed");
  m.nan = 0;
  nv.nan = 1;
  aa_metrics_fa_rule(&m, &nv, 3);
  AA_CHECK(!m.fa_pass && isnan(m.fa_ratio), "tmetrics fa: NaN in the naive reference passed");
  nv.nan = 0;
  nv.inf = 1;
  aa_metrics_fa_rule(&m, &nv, 3);
  AA_CHECK(m.fa_pass && m.fa_ratio == 0, "tmetrics fa: Inf naive reference should make any finite output pass");
  nv.inf = 0;
  nv.max_abs = 0;
  m.max_abs = 0;
  aa_metrics_fa_rule(&m, &nv, 3);
  AA_CHECK(m.fa_pass && m.fa_ratio == 0, "tmetrics fa: 0 vs 0");
  m.max_abs = 0x1p-100;
  aa_metrics_fa_rule(&m, &nv, 3);
  AA_CHECK(!m.fa_pass && isinf(m.fa_ratio), "tmetrics fa: nonzero vs exact naive reference");
}

int main(void) {
  uint64_t seed = aa_test_seed("tmetrics");
  xs_state = seed | 1;
  test_ordinal_exhaustive();
  test_closed_form();
  test_nonfinite();
  test_scaling();
  test_vs_mpfr(seed);
  test_fa_rule();
  return aa_test_finish("tmetrics");
}
