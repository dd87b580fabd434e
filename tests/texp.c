/* attnacc: tests of the exp constructions: closed forms, MPFR correct rounding, NaN boundaries, packed layout, map
 * stitching. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>

#include "exp.h"
#include "rng.h"
#include "tests.h"

static uint64_t seed;

/* Correctly rounded binary32 2^x by MPFR with the binary32 exponent range
   ([mpfr]: emin -148, emax 128, subnormalize): a second,
   independent computation of what `exact` must return. */
static float mpfr_exp2_f32(float x) {
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_t xx, r;
  mpfr_init2(xx, 24);
  mpfr_init2(r, 24);
  mpfr_set_flt(xx, x, MPFR_RNDN);
  mpfr_set_emin(-148);
  mpfr_set_emax(128);
  int t = mpfr_exp2(r, xx, MPFR_RNDN);
  t = mpfr_check_range(r, t, MPFR_RNDN);
  mpfr_subnormalize(r, t, MPFR_RNDN);
  float v = mpfr_get_flt(r, MPFR_RNDN);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  mpfr_clear(xx);
  mpfr_clear(r);
  return v;
}

static void test_exact(void) {
  aa_pcg64_t rng;
  uint64_t tag = 1;
  aa_rng_derive(&rng, seed, &tag, 1);
  int n = (int)(40000 * aa_test_multiplier());
  for (int i = 0; i < n + 600; i++) {
    float x;
    if (i < 300)
      x = (float)(i - 151); /* integers: exact powers, the subnormal and overflow edges */
    else if (i < 600)
      x = (float)(i - 451) + 0.5f;
    else if (i % 2)
      x = (float)(-152.0 + 282.0 * aa_pcg64_uniform(&rng));
    else
      x = (float)(-152.0 + 30.0 * aa_pcg64_uniform(&rng)); /* dense over the subnormal outputs */
    float got = aa_exp2_cr_f32(x), want = mpfr_exp2_f32(x);
    if (aa_f32_bits(got) != aa_f32_bits(want)) {
      AA_FAIL(
          "exact: aa_exp2_cr_f32 == MPFR binary32 exp2: x = %a (0x%08x) got %a (0x%08x) want %a (0x%08x) seed %llu",
          (double)x, aa_f32_bits(x), (double)got, aa_f32_bits(got), (double)want, aa_f32_bits(want),
          (unsigned long long)seed);
      return;
    }
    /* the BF16 variant must equal MPFR's 8-bit rounding (same exponent range) */
    mpfr_t xx, r;
    mpfr_init2(xx, 24);
    mpfr_init2(r, 8);
    mpfr_set_flt(xx, x, MPFR_RNDN);
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_set_emin(-132);
    mpfr_set_emax(128);
    int t = mpfr_exp2(r, xx, MPFR_RNDN);
    t = mpfr_check_range(r, t, MPFR_RNDN);
    mpfr_subnormalize(r, t, MPFR_RNDN);
    float wb = mpfr_get_flt(r, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    mpfr_clear(xx);
    mpfr_clear(r);
    uint16_t gb = aa_exp2_cr_bf16(x);
    if (gb != (uint16_t)(aa_f32_bits(wb) >> 16)) {
      AA_FAIL("exact: aa_exp2_cr_bf16 == MPFR 8-bit exp2: x = %a (0x%08x) got 0x%04x want %a seed %llu", (double)x,
              aa_f32_bits(x), gb, (double)wb, (unsigned long long)seed);
      return;
    }
  }
  /* the map of `exact` against the correctly rounded value: no mismatch, and
     in the normal range a relative error of at most half an ulp, 2^-24 */
  aa_exp_t e;
  aa_exp_init(&e, "exact", NULL);
  aa_exp_map_t m;
  aa_exp_map_opts_t o = {0, 256, 0, 0.0f};
  if (aa_exp_map_interval(&m, &e, 1, -9.0f, -8.0f, &o, NULL) != AA_OK) AA_FAIL("exact: map failed");
  AA_CHECK(m.cr_mismatch == 0, "exact: map cr_mismatch == 0 on [-9, -8]: %llu", (unsigned long long)m.cr_mismatch);
  AA_CHECK(m.max_rel_err <= 0x1p-24, "exact: max rel err <= 2^-24 on [-9, -8]: %a", m.max_rel_err);
  AA_CHECK(m.valid == m.inputs, "exact: all outputs valid on [-9, -8]");
  AA_CHECK(m.ref_observed_max_relerr <= AA_EXP_REF_RELERR, "exact: libm reference within 2^-52 of MPFR: %a",
           m.ref_observed_max_relerr);
}

/* libm exp2 against MPFR: the bound AA_EXP_REF_RELERR that the map and the
   correct-rounding shortcut rely on, on a dense sample and on every input of
   a proof-relevant set (integers, half-integers, the subnormal edge). */
static void test_reference(void) {
  aa_pcg64_t rng;
  uint64_t tag = 2;
  aa_rng_derive(&rng, seed, &tag, 1);
  mpfr_t xx, r;
  mpfr_init2(xx, 24);
  mpfr_init2(r, 113);
  double worst = 0;
  float wx = 0;
  int n = (int)(100000 * aa_test_multiplier());
  for (int i = 0; i < n; i++) {
    float x = i < 560 ? (float)(i - 280) * 0.5f : (float)(-149.0 + 277.0 * aa_pcg64_uniform(&rng));
    if (x >= 128.0f) continue;
    double ref = exp2((double)x);
    mpfr_set_flt(xx, x, MPFR_RNDN);
    mpfr_exp2(r, xx, MPFR_RNDN);
    mpfr_sub_d(r, r, ref, MPFR_RNDN);
    mpfr_div_d(r, r, ref, MPFR_RNDN);
    double re = fabs(mpfr_get_d(r, MPFR_RNDN));
    if (re > worst) {
      worst = re;
      wx = x;
    }
  }
  mpfr_clear(xx);
  mpfr_clear(r);
  printf("texp: libm exp2 max relative error vs MPFR over %d inputs: %.3e at x = %a\n", n, worst, (double)wx);
  AA_CHECK(worst <= AA_EXP_REF_RELERR, "reference: libm exp2 rel err <= 2^-52: %a at x = %a (0x%08x) seed %llu",
           worst, (double)wx, aa_f32_bits(wx), (unsigned long long)seed);
}

/* Closed form: (1 + f) / 2^f is maximal where its log-derivative
   1/(1+f) - ln 2 vanishes, f = 1/ln2 - 1 = 0.4427, with value
   (1/ln2) / 2^(1/ln2 - 1) = 2 / (e ln 2) = 1.0614756; minimum 1 at f = 0. */
static void test_schraudolph_fp32(void) {
  double fstar = 1.0 / log(2.0) - 1.0;
  double rmax = 2.0 / (exp(1.0) * log(2.0));
  aa_exp_t e;
  aa_exp_init(&e, "schraudolph-fp32", NULL);
  aa_exp_map_t m;
  aa_exp_map_opts_t o = {0, 64, 0, 0.0f};
  /* [-18, -16]: 2^20 normal inputs, frac(x) on a 2^-19 grid */
  if (aa_exp_map_interval(&m, &e, 1, -18.0f, -16.0f, &o, NULL) != AA_OK) AA_FAIL("schraudolph-fp32: map failed");
  double fr = (double)m.argmax_ratio - floor((double)m.argmax_ratio);
  AA_CHECK(fabs(m.max_ratio - rmax) <= 1e-6, "schraudolph-fp32 c=0: max ratio %.9f == 2/(e ln2) = %.9f +- 1e-6",
           m.max_ratio, rmax);
  AA_CHECK(fabs(fr - fstar) <= 2e-3, "schraudolph-fp32 c=0: argmax frac %.6f == 1/ln2 - 1 = %.6f (x = %a)", fr, fstar,
           (double)m.argmax_ratio);
  AA_CHECK(m.min_ratio >= 1.0 - 0x1p-23 && m.min_ratio <= 1.0 + 1e-12, "schraudolph-fp32 c=0: min ratio %.12f == 1",
           m.min_ratio);
  AA_CHECK(fabs(m.max_ratio - 1.061476) <= 1e-6, "schraudolph-fp32 c=0: published 1.061476: %.9f", m.max_ratio);
  /* a bias c scales the result by 2^(-c/2^23) in the normal range */
  aa_exp_set(&e, "preset", "rms", NULL);
  AA_CHECK(e.c == 8.0 * 60801, "schraudolph-fp32 preset rms: c = 8 * 60801, got %.17g", e.c);
  aa_exp_map_t m2;
  aa_exp_map_interval(&m2, &e, 1, -18.0f, -16.0f, &o, NULL);
  double s = exp2(-e.c / 0x1p23);
  AA_CHECK(fabs(m2.max_ratio - rmax * s) <= 2e-6, "schraudolph-fp32 rms: max ratio %.9f == %.9f", m2.max_ratio,
           rmax * s);
  /* Schraudolph's RMS constant gives a max relative error of 3.94% ([schraudolph]) */
  AA_CHECK(fabs(m2.max_rel_err - 0.0394) <= 0.0005, "schraudolph-fp32 rms: max rel err %.5f == 3.94%%",
           m2.max_rel_err);
  aa_exp_set(&e, "preset", "sym", NULL);
  aa_exp_map_interval(&m2, &e, 1, -18.0f, -16.0f, &o, NULL);
  AA_CHECK(fabs(m2.max_rel_err - 0.0298) <= 0.0005, "schraudolph-fp32 sym: max rel err %.5f == 2.98%%",
           m2.max_rel_err);
}

/* The BF16 NaN interval, derived from a, b, c: t = 2^7 x + fl32(127*2^7 - c)
   is exact in FP32 near the bottom (x has ulp 2^-17 there), i = rne(t), and
   the pattern is NaN for i in [-127, -1], i.e. t in (-127.5, -0.5); -Inf for
   t in [-128.5, -127.5] (ties to even give -128 at both ends). */
static void test_bf16_nan(const char *preset) {
  aa_exp_t e;
  aa_exp_init(&e, "schraudolph-bf16", NULL);
  aa_exp_set(&e, "preset", preset, NULL);
  double bmc = (double)(float)(16256.0 - e.c);
  double top = (-0.5 - bmc) / 128.0;   /* NaN for x < top */
  double bot = (-127.5 - bmc) / 128.0; /* NaN for x > bot */
  float hi = nextafterf((float)top, -INFINITY);
  while ((double)hi >= top)
    hi = nextafterf(hi, -INFINITY);
  float lo = nextafterf((float)bot, INFINITY);
  while ((double)lo <= bot)
    lo = nextafterf(lo, INFINITY);
  aa_exp_map_t m;
  aa_exp_map_opts_t o = {0, 0, 0, 0.0f};
  aa_exp_map_interval(&m, &e, 1, -129.0f, -126.0f, &o, NULL);
  AA_CHECK(m.cls_runs[AA_EXP_CLS_NAN] == 1 && m.nranges[AA_EXP_CLS_NAN] == 1,
           "schraudolph-bf16 %s: one NaN run, got %llu", preset, (unsigned long long)m.cls_runs[AA_EXP_CLS_NAN]);
  AA_CHECK(m.ranges[0][0].hi == hi && m.ranges[0][0].lo == lo,
           "schraudolph-bf16 %s: NaN run [%a, %a] == derived [%a, %a] (c = %.9g)", preset, (double)m.ranges[0][0].lo,
           (double)m.ranges[0][0].hi, (double)lo, (double)hi, e.c);
  /* NaN begins exactly where i goes negative: the encoded exponent there */
  double E = aa_exp_encoded_exponent(&e, hi, 1);
  AA_CHECK(E == -127.0 - 1.0 / 128, "schraudolph-bf16 %s: E at the first NaN = %.9g, want -127 - 1/128", preset, E);
  uint32_t p = aa_exp_eval_packed(&e, hi, lo);
  AA_CHECK(p == 0xff81ffffu, "schraudolph-bf16 %s: packed(first NaN, last NaN) = 0x%08x, want 0xff81ffff", preset, p);
  AA_CHECK(m.cls_count[AA_EXP_CLS_INF] > 0 && m.ranges[AA_EXP_CLS_INF][0].hi == nextafterf(lo, -INFINITY),
           "schraudolph-bf16 %s: -Inf run ends just below the NaN run", preset);
}

/* Packed: low half = first input; the halves equal the unpacked value's
   BF16 bits whenever that value is BF16-exact, for every construction,
   order and conversion; and a second conversion (fmt's RNE) agrees. */
static void test_packed(void) {
  int n;
  const aa_exp_info_t *reg = aa_exp_registry(&n);
  aa_pcg64_t rng;
  uint64_t tag = 3;
  aa_rng_derive(&rng, seed, &tag, 1);
  const char *orders[] = {"fp32", "bf16"}, *cvts[] = {"rne", "rz"};
  int iters = (int)(20000 * aa_test_multiplier());
  for (int k = 0; k < n; k++)
    for (int oi = 0; oi < 2; oi++)
      for (int ci = 0; ci < 2; ci++) {
        aa_exp_t e;
        aa_exp_init(&e, reg[k].name, NULL);
        aa_exp_set(&e, "order", orders[oi], NULL);
        aa_exp_set(&e, "cvt", cvts[ci], NULL);
        long exact = 0;
        for (int i = 0; i < iters; i++) {
          float x0 = (float)(-140.0 + 150.0 * aa_pcg64_uniform(&rng));
          float x1 = i % 3 == 0 ? (float)(int)x0 : (float)(-140.0 + 150.0 * aa_pcg64_uniform(&rng));
          uint32_t p = aa_exp_eval_packed(&e, x0, x1);
          float v[2] = {aa_exp_eval(&e, x0), aa_exp_eval(&e, x1)};
          for (int h = 0; h < 2; h++) {
            uint32_t u = aa_f32_bits(v[h]);
            uint16_t half = (uint16_t)(p >> (16 * h));
            if ((u & 0xffffu) == 0) {
              exact++;
              if (half != (uint16_t)(u >> 16))
                AA_FAIL(
                    "packed %s order=%s cvt=%s: half %d 0x%04x == unpacked bits 0x%08x: x0 = %a x1 = %a seed %llu",
                    reg[k].name, orders[oi], cvts[ci], h, half, u, (double)x0, (double)x1, (unsigned long long)seed);
            } else if (ci == 0 && !isnan(v[h]) && half != aa_bf16_bits_rne(v[h])) {
              AA_FAIL("packed %s order=%s: half %d 0x%04x == RNE(unpacked %a) seed %llu", reg[k].name, orders[oi], h,
                      half, (double)v[h], (unsigned long long)seed);
            } else if (ci == 1 && !isnan(v[h]) && half != (uint16_t)(u >> 16)) {
              AA_FAIL("packed %s order=%s: half %d 0x%04x == RZ(unpacked %a) seed %llu", reg[k].name, orders[oi], h,
                      half, (double)v[h], (unsigned long long)seed);
            }
          }
          if (aa_test_failures > 20) return;
        }
        AA_CHECK(exact > 0, "packed %s: some BF16-exact outputs were tested", reg[k].name);
      }
}

static void test_fa4(void) {
  /* [1, 2): f = x - 1 takes every FP32 value of [0, 1) with ulp 2^-23 */
  static const double published[6] = {0, 0, 0, 8.8e-5, 0, 0};
  static const double remez[6] = {0, 3.8222e-2, 2.0533e-3, 8.559e-5, 2.8959e-6, 8.227e-8};
  for (int d = 1; d <= 5; d++) {
    aa_exp_t e;
    char deg[4];
    aa_exp_init(&e, "fa4-poly", NULL);
    snprintf(deg, sizeof deg, "%d", d);
    aa_exp_set(&e, "degree", deg, NULL);
    aa_exp_map_t m;
    aa_exp_map_opts_t o = {0, 0, 0, 0.0f};
    aa_exp_map_interval(&m, &e, 1, 1.0f, 0x1.fffffep0f, &o, NULL);
    printf("texp: fa4-poly degree %d max rel err over [1, 2): %.4e\n", d, m.max_rel_err);
    if (d == 3)
      AA_CHECK(fabs(m.max_rel_err - published[3]) <= 0.05e-5,
               "fa4-poly degree 3: max rel err %.4e == published 8.8e-5", m.max_rel_err);
    else
      /* the continuous minimax error E_n is a lower bound; FP32 rounding of
         the coefficients and of Horner adds at most a few 2^-24 */
      AA_CHECK(m.max_rel_err >= remez[d] * 0.999 && m.max_rel_err <= remez[d] + 8 * 0x1p-24,
               "fa4-poly degree %d: max rel err %.4e within [E_n, E_n + 8 ulp], E_n = %.4e", d, m.max_rel_err,
               remez[d]);
  }
}

/* The map's runs and counts against a plain serial scan (a second
   algorithm), with block boundaries inside runs, and its result independent
   of the thread count. */
static void test_map_stitching(void) {
  const char *specs[] = {"schraudolph-bf16:c=7.4220", "quadratic-bf16:order=bf16", "schraudolph-fp32:arith=fp32"};
  for (int s = 0; s < 3; s++) {
    aa_exp_t e;
    aa_exp_parse(&e, specs[s], NULL);
    float lo = -131.0f, hi = -125.0f;
    aa_exp_map_t m1, m2;
    aa_exp_map_opts_t o1 = {1, 0, 1, 0.0f}, o2 = {1, 0, 2, 0.0f};
    aa_exp_map_interval(&m1, &e, 1, lo, hi, &o1, NULL);
    aa_exp_map_interval(&m2, &e, 1, lo, hi, &o2, NULL);
    AA_CHECK(m1.sum_rel_err == m2.sum_rel_err && m1.min_ratio == m2.min_ratio &&
                 m1.argmax_rel_err == m2.argmax_rel_err,
             "map %s: 1 thread == 2 threads", specs[s]);
    uint64_t cnt[AA_EXP_NCLS] = {0}, runs[AA_EXP_NCLS] = {0};
    float first_lo[AA_EXP_NCLS], first_hi[AA_EXP_NCLS];
    int prev = -1;
    for (float x = lo;; x = nextafterf(x, INFINITY)) {
      float v = aa_bf16_to_f32((uint16_t)aa_exp_eval_packed(&e, x, x));
      uint32_t u = aa_f32_bits(v) & 0x7fffffffu;
      int c = u > 0x7f800000u ? 0 : u == 0x7f800000u ? 1 : u == 0 ? 3 : v < 0 ? 2 : u < 0x800000u ? 4 : 5;
      if (c < 5) {
        cnt[c]++;
        if (c != prev) {
          if (runs[c] == 0) first_lo[c] = x;
          runs[c]++;
        }
        if (runs[c] == 1) first_hi[c] = x;
      }
      prev = c;
      if (x == hi) break;
    }
    for (int c = 0; c < AA_EXP_NCLS; c++) {
      AA_CHECK(m1.cls_count[c] == cnt[c] && m1.cls_runs[c] == runs[c],
               "map %s: class %s count/runs %llu/%llu == serial %llu/%llu", specs[s], aa_exp_cls_name(c),
               (unsigned long long)m1.cls_count[c], (unsigned long long)m1.cls_runs[c], (unsigned long long)cnt[c],
               (unsigned long long)runs[c]);
      if (runs[c] > 0 && m1.nranges[c] > 0)
        AA_CHECK(m1.ranges[c][0].lo == first_lo[c] && m1.ranges[c][0].hi == first_hi[c],
                 "map %s: class %s first run [%a, %a] == serial [%a, %a]", specs[s], aa_exp_cls_name(c),
                 (double)m1.ranges[c][0].lo, (double)m1.ranges[c][0].hi, (double)first_lo[c], (double)first_hi[c]);
    }
  }
}

/* A second algorithm for the quadratic family: with k = 0 and truncating
   conversion its BF16 pattern is 1 + floor(128 f)/128 with exponent j, which
   is exactly Schraudolph's i = floor(2^7 x + 127*2^7) (icvt = rd), including
   the wrap below the range (same integer, same 16 bits). Valid for |x| >= 1,
   where f = x - j and 1 + f are exact in FP32, and x a multiple of 2^-16,
   where Schraudolph's FP32 sum is exact as well. Also the scale s multiplies
   the FP32 mantissa before the conversion. */
static void test_quadratic(void) {
  aa_exp_t q, sch, qs;
  aa_exp_parse(&q, "quadratic-bf16:k=0,cvt=rz", NULL);
  aa_exp_parse(&sch, "schraudolph-bf16:icvt=rd", NULL);
  aa_exp_parse(&qs, "quadratic-bf16:k=0.25,s=1.0625,cvt=rz", NULL);
  aa_pcg64_t rng;
  uint64_t tag = 4;
  aa_rng_derive(&rng, seed, &tag, 1);
  int n = (int)(100000 * aa_test_multiplier());
  for (int i = 0; i < n; i++) {
    /* multiples of 2^-16, so that Schraudolph's FP32 sum 2^7 x + 16256 is exact too */
    float x = (float)(ldexp(floor(ldexp(-200.0 + 320.0 * aa_pcg64_uniform(&rng), 16)), -16));
    if (fabsf(x) < 1.0f) continue;
    uint32_t a = aa_f32_bits(aa_exp_eval(&q, x)), b = aa_f32_bits(aa_exp_eval(&sch, x));
    if (a != b) {
      AA_FAIL("quadratic-bf16 k=0 rz == schraudolph-bf16 rd: x = %a (0x%08x): 0x%08x vs 0x%08x seed %llu", (double)x,
              aa_f32_bits(x), a, b, (unsigned long long)seed);
      return;
    }
    if (x > -120.0f && x < 120.0f) {
      float j = floorf(x), f = x - j;
      float m = fmaf(0.25f * f, f - 1.0f, 1.0f + f) * 1.0625f; /* FP32, as documented */
      float want = ldexpf(aa_bf16_to_f32((uint16_t)(aa_f32_bits(m) >> 16)), (int)j);
      float got = aa_exp_eval(&qs, x);
      if (got != want) {
        AA_FAIL("quadratic-bf16 k=0.25 s=1.0625: x = %a got %a want %a seed %llu", (double)x, (double)got,
                (double)want, (unsigned long long)seed);
        return;
      }
    }
  }
}

/* Full exhaustive map of `exact` over [-149, 128): zero mismatches. */
static void test_expensive(void) {
  aa_exp_t e;
  aa_exp_init(&e, "exact", NULL);
  aa_exp_map_t m;
  aa_exp_map_opts_t o = {0, 65536, 0, 0.0f};
  aa_exp_map_interval(&m, &e, 1, -149.0f, 0x1.fffffep6f, &o, NULL);
  AA_CHECK(m.cr_mismatch == 0 && m.cls_count[AA_EXP_CLS_NAN] == 0 && m.cls_count[AA_EXP_CLS_INF] == 0,
           "exact exhaustive: %llu mismatches", (unsigned long long)m.cr_mismatch);
  AA_CHECK(m.ref_observed_max_relerr <= AA_EXP_REF_RELERR, "exact exhaustive: reference bound");
}

int main(void) {
  seed = aa_test_seed("texp");
  test_reference();
  test_exact();
  test_schraudolph_fp32();
  test_bf16_nan("linear");
  test_bf16_nan("rms");
  test_bf16_nan("below");
  test_packed();
  test_fa4();
  test_quadratic();
  test_map_stitching();
  if (aa_test_expensive())
    test_expensive();
  else
    printf("texp: exhaustive map of exact skipped (set ATTNACC_CHECK_EXPENSIVE)\n");
  return aa_test_finish("texp");
}
