/* attnacc: tests of the oracle's kernels: double-double exp against MPFR, the exact-dot span test, FP32/BF16 rounding
 * helpers. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "oracle/oracle-impl.h"
#include "rng.h"
#include "tests.h"

static uint64_t bits_of(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

/* exp of double-double arguments against MPFR at 300 bits:
   |y - exp(x)| <= (2^-100 + 2^-108 |x|) exp(x) + 2^-1000. */
static void test_exp(uint64_t seed, int iters) {
  aa_or_exp_tab_t tab;
  aa_oracle_exp_tab_init(&tab);
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 1);
  enum { N = 64 };
  double xh[N], xl[N], yh[N], yl[N];
  mpfr_t x, y, z;
  mpfr_inits2(300, x, y, z, (mpfr_ptr)0);
  double worst = 0;
  for (int it = 0; it < iters; it++) {
    for (int i = 0; i < N; i++) {
      double r = aa_pcg64_uniform(&rng);
      int kind = it % 4;
      double h = kind == 0 ? -707.0 * r : kind == 1 ? -10.0 * r + 0.5 : kind == 2 ? ldexp(r - 0.5, -20) : -40 * r;
      if (it == 0 && i < 6) h = (double[]){0.0, -0.0, -707.0, 1e-300, -0x1p-60, 0.0013}[i];
      xh[i] = h;
      xl[i] = ldexp(aa_pcg64_uniform(&rng) - 0.5, -53) * fabs(h) * 0.999;
      aa_or_dd_t t = aa_or_fast_two_sum(xh[i], xl[i]);
      xh[i] = t.hi;
      xl[i] = t.lo;
    }
    aa_oracle_dd_exp(yh, yl, xh, xl, N, &tab);
    for (int i = 0; i < N; i++) {
      mpfr_set_d(x, xh[i], MPFR_RNDN);
      mpfr_add_d(x, x, xl[i], MPFR_RNDN);
      mpfr_exp(y, x, MPFR_RNDN);
      mpfr_set_d(z, yh[i], MPFR_RNDN);
      mpfr_add_d(z, z, yl[i], MPFR_RNDN);
      mpfr_sub(z, z, y, MPFR_RNDN);
      mpfr_abs(z, z, MPFR_RNDN);
      double err = mpfr_get_d(z, MPFR_RNDU), ref = mpfr_get_d(y, MPFR_RNDN);
      double bound = aa_or_exp_relerr(xh[i]) * ref + 0x1p-1000;
      if (ref > 0x1p-900) worst = fmax(worst, err / ref);
      if (!(err <= bound))
        AA_FAIL("dd_exp: |y - exp(x)| <= (2^-100 + 2^-108|x|) exp(x): x = %a + %a (bits %016llx), y = %a + %a, "
                "err %a, bound %a, seed %llu",
                xh[i], xl[i], (unsigned long long)bits_of(xh[i]), yh[i], yl[i], err, bound, (unsigned long long)seed);
    }
  }
  printf("dd_exp: worst relative error %.3g (2^%.1f) over %d arguments (results above 2^-900)\n", worst, log2(worst),
         iters * N);
  mpfr_clears(x, y, z, (mpfr_ptr)0);
}

/* The span test: whenever it claims exactness, the plain dot equals the
   exact (MPFR) dot; on BF16 normal data it should claim it nearly always. */
static void test_span(uint64_t seed, int iters) {
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 2);
  double a[128], b[128];
  mpfr_t acc, t;
  mpfr_inits2(2200, acc, t, (mpfr_ptr)0);
  int claimed = 0;
  for (int it = 0; it < iters; it++) {
    size_t n = (size_t[]){16, 64, 128}[it % 3];
    int fp32 = it % 5 == 4;
    double scale = ldexp(1.0, (int)(aa_pcg64_next(&rng) % 40) - 20);
    for (size_t c = 0; c < n; c++) {
      a[c] = aa_pcg64_normal(&rng) * scale;
      b[c] = aa_pcg64_normal(&rng);
      if (fp32) {
        a[c] = (float)a[c];
        b[c] = (float)b[c];
      } else {
        a[c] = (double)aa_bf16_rne((float)a[c]);
        b[c] = (double)aa_bf16_rne((float)b[c]);
      }
    }
    double got;
    if (!aa_oracle_dot_exact_check(&got, a, b, n)) continue;
    claimed++;
    mpfr_set_zero(acc, 1);
    for (size_t c = 0; c < n; c++) {
      mpfr_set_d(t, a[c], MPFR_RNDN);
      mpfr_mul_d(t, t, b[c], MPFR_RNDN);
      mpfr_add(acc, acc, t, MPFR_RNDN);
    }
    if (mpfr_cmp_d(acc, got) != 0)
      AA_FAIL("span test: a claimed-exact plain dot differs from the exact dot: n %zu, got %a, iteration %d, "
              "seed %llu",
              n, got, it, (unsigned long long)seed);
  }
  mpfr_clears(acc, t, (mpfr_ptr)0);
  printf("span test: claimed exact for %d of %d vectors (4/5 BF16, 1/5 FP32)\n", claimed, iters);
  AA_CHECK(claimed >= iters / 2, "span test: claims exactness for at least the BF16 half (%d of %d), seed %llu",
           claimed, iters, (unsigned long long)seed);
}

/* The MPFR emulation and the double-based rounding agree on FP32 and BF16,
   and the FP32 rounding is the C conversion (itself IEEE RNE). */
static void test_round(uint64_t seed, int iters) {
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 3);
  mpfr_t x;
  mpfr_init2(x, 53);
  for (int it = 0; it < iters; it++) {
    double v;
    int kind = it % 6;
    uint64_t r = aa_pcg64_next(&rng);
    if (kind == 0) { /* exact midpoints of BF16 / FP32 */
      int e = (int)(r % 300) - 150;
      double m = (double)((r >> 20) % 256 + 256);
      v = ldexp(m + 0.5, e - 8);
    } else if (kind == 1) {
      int e = (int)(r % 300) - 150;
      v = ldexp((double)((r >> 20) % (1 << 24) + (1 << 24)) + 0.5, e - 24);
    } else if (kind == 2) { /* around overflow */
      v = ldexp(1.0 + aa_pcg64_uniform(&rng), 127);
    } else if (kind == 3) { /* subnormal ranges */
      v = ldexp(aa_pcg64_uniform(&rng), -125 - (int)(r % 30));
    } else {
      memcpy(&v, &r, sizeof v);
      if (!isfinite(v)) continue;
      v = ldexp(frexp(v, &(int){0}), (int)(r % 400) - 200);
    }
    if (r & 1) v = -v;
    mpfr_set_d(x, v, MPFR_RNDN);
    for (int bf = 0; bf < 2; bf++) {
      double m = aa_oracle_round_mpfr(x, bf), d = aa_oracle_round_d(v, bf);
      if (!(m == d && signbit(m) == signbit(d)) && !(isnan(m) && isnan(d)))
        AA_FAIL("round %s: MPFR emulation %a != double rounding %a for x = %a (bits %016llx), seed %llu",
                bf ? "bf16" : "fp32", m, d, v, (unsigned long long)bits_of(v), (unsigned long long)seed);
    }
    if (aa_oracle_round_d(v, 0) != (double)(float)v) AA_FAIL("round fp32: differs from the C conversion for %a", v);
  }
  /* fixed cases */
  struct {
    double x, f32, b16;
  } fx[] = {{0x1p-150, 0, 0},
            {0x1.0000000000001p-150, 0x1p-149, 0},
            {0x1p-134, 0x1p-134, 0},
            {0x1.8p-134, 0x1.8p-134, 0x1p-133},
            {0x1.fffffefffffffp127, 0x1.fffffep127, INFINITY},
            {0x1.ffffffp127, INFINITY, INFINITY},
            {0x1.fep127, 0x1.fep127, 0x1.fep127},
            {0x1.ffp127, 0x1.ffp127, INFINITY},
            {0x1.01p0, 0x1.01p0, 0x1p0},
            {0x1.03p0, 0x1.03p0, 0x1.04p0}};
  for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
    mpfr_set_d(x, fx[i].x, MPFR_RNDN);
    AA_CHECK(aa_oracle_round_mpfr(x, 0) == fx[i].f32 && aa_oracle_round_d(fx[i].x, 0) == fx[i].f32,
             "round fp32: %a -> %a expected", fx[i].x, fx[i].f32);
    AA_CHECK(aa_oracle_round_mpfr(x, 1) == fx[i].b16 && aa_oracle_round_d(fx[i].x, 1) == fx[i].b16,
             "round bf16: %a -> %a expected (got %a / %a)", fx[i].x, fx[i].b16, aa_oracle_round_mpfr(x, 1),
             aa_oracle_round_d(fx[i].x, 1));
  }
  mpfr_clear(x);
}

int main(void) {
  uint64_t seed = aa_test_seed("toracle_kernels");
  int m = (int)aa_test_multiplier();
  test_exp(seed, 200 * m);
  test_span(seed, 3000 * m);
  test_round(seed, 20000 * m);
  return aa_test_finish("toracle_kernels");
}
