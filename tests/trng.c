/* attnacc: tests of the rng module (published PCG vectors, bounded/uniform/normal statistics, stream derivation). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "rng.h"
#include "tests.h"

/* Published outputs of the reference implementation for seed 42, sequence 54
   ([pcg]). */
static void check_vectors(void) {
  static const uint32_t want32[6] = {0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu};
  static const uint64_t want64[6] = {UINT64_C(0x86b1da1d72062b68), UINT64_C(0x1304aa46c9853d39),
                                     UINT64_C(0xa3670e9e0dd50358), UINT64_C(0xf9090e529a7dae00),
                                     UINT64_C(0xc85b9fd837996f2c), UINT64_C(0x606121f8e3919196)};
  aa_pcg32_t r32;
  aa_pcg32_seed(&r32, 42, 54);
  for (int i = 0; i < 6; i++) {
    uint32_t got = aa_pcg32_next(&r32);
    AA_CHECK(got == want32[i], "pcg32 seed 42 seq 54: output %d is %08" PRIx32 ", published %08" PRIx32, i, got,
             want32[i]);
  }
  aa_pcg64_t r64;
  aa_pcg64_seed(&r64, 42, 54);
  for (int i = 0; i < 6; i++) {
    uint64_t got = aa_pcg64_next(&r64);
    AA_CHECK(got == want64[i], "pcg64 seed 42 seq 54: output %d is %016" PRIx64 ", published %016" PRIx64, i, got,
             want64[i]);
  }
}

/* Bounded draws: always in range; chi-square for small bounds; for a bound
   of 3 * 2^30 a modulo reduction would put half the mass (not a third) in
   [0, 2^30), so this part catches modulo bias. */
static void check_bounded(uint64_t seed) {
  aa_pcg32_t r;
  aa_pcg32_seed(&r, seed, 1);
  static const uint32_t bounds[] = {1, 2, 3, 7, 10, 100, 1000};
  for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
    uint32_t k = bounds[b];
    static long count[1000];
    long n = 200L * k < 100000 ? 100000 : 200L * k;
    for (uint32_t j = 0; j < k; j++)
      count[j] = 0;
    for (long i = 0; i < n; i++) {
      uint32_t v = aa_pcg32_bounded(&r, k);
      if (v >= k) {
        AA_FAIL("aa_pcg32_bounded: %" PRIu32 " out of range [0, %" PRIu32 ") (seed %" PRIu64 ")", v, k, seed);
        return;
      }
      count[v]++;
    }
    if (k == 1) continue;
    double e = (double)n / k, chi2 = 0;
    for (uint32_t j = 0; j < k; j++)
      chi2 += (count[j] - e) * (count[j] - e) / e;
    /* chi2 has mean k-1 and sd sqrt(2(k-1)); allow 6 sd (generous). */
    double lim = (k - 1) + 6 * sqrt(2.0 * (k - 1));
    AA_CHECK(chi2 < lim, "aa_pcg32_bounded(%" PRIu32 "): chi-square %g > %g over %ld draws (seed %" PRIu64 ")", k,
             chi2, lim, n, seed);
  }
  const uint32_t big = 3u << 30;
  long n = 1000000, low = 0;
  for (long i = 0; i < n; i++) {
    uint32_t v = aa_pcg32_bounded(&r, big);
    if (v >= big) {
      AA_FAIL("aa_pcg32_bounded: %" PRIu32 " out of range [0, %" PRIu32 ") (seed %" PRIu64 ")", v, big, seed);
      return;
    }
    low += v < (1u << 30);
  }
  double p = 1.0 / 3, sd = sqrt(n * p * (1 - p));
  AA_CHECK(fabs(low - n * p) < 5 * sd,
           "aa_pcg32_bounded(3*2^30): %ld of %ld draws below 2^30, expected %g +- 5*%g (modulo bias?) (seed %" PRIu64
           ")",
           low, n, n * p, sd, seed);
}

/* Uniform: in [0,1), a multiple of 2^-53, mean 1/2 and variance 1/12 within
   5 sigma; normal: mean 0, variance 1, fourth moment 3 within 5 sigma. */
static void check_uniform_normal(uint64_t seed) {
  aa_pcg64_t r;
  aa_pcg64_seed(&r, seed, 7);
  const long n = 1000000;
  double s1 = 0, s2 = 0;
  for (long i = 0; i < n; i++) {
    double u = aa_pcg64_uniform(&r);
    if (!(u >= 0 && u < 1) || ldexp(u, 53) != floor(ldexp(u, 53))) {
      AA_FAIL("aa_pcg64_uniform: %a not a multiple of 2^-53 in [0,1) (seed %" PRIu64 ")", u, seed);
      return;
    }
    s1 += u;
    s2 += (u - 0.5) * (u - 0.5);
  }
  double mean = s1 / n, var = s2 / n;
  /* var(u) = 1/12; var((u-1/2)^2) = 1/80 - 1/144 = 1/180. */
  AA_CHECK(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / n), "aa_pcg64_uniform: mean %.6f (seed %" PRIu64 ")", mean, seed);
  AA_CHECK(fabs(var - 1.0 / 12) < 5 * sqrt(1.0 / 180 / n),
           "aa_pcg64_uniform: variance %.6f vs 1/12 (seed %" PRIu64 ")", var, seed);

  s1 = s2 = 0;
  double s4 = 0, maxabs = 0;
  for (long i = 0; i < n; i++) {
    double z = aa_pcg64_normal(&r);
    if (!isfinite(z)) {
      AA_FAIL("aa_pcg64_normal: non-finite draw %a at %ld (seed %" PRIu64 ")", z, i, seed);
      return;
    }
    s1 += z;
    s2 += z * z;
    s4 += z * z * z * z;
    if (fabs(z) > maxabs) maxabs = fabs(z);
  }
  mean = s1 / n;
  double m2 = s2 / n, m4 = s4 / n;
  /* var(z) = 1, var(z^2) = 2, var(z^4) = 105 - 9 = 96. */
  AA_CHECK(fabs(mean) < 5 / sqrt((double)n), "aa_pcg64_normal: mean %.6f (seed %" PRIu64 ")", mean, seed);
  AA_CHECK(fabs(m2 - 1) < 5 * sqrt(2.0 / n), "aa_pcg64_normal: E[z^2] %.6f vs 1 (seed %" PRIu64 ")", m2, seed);
  AA_CHECK(fabs(m4 - 3) < 5 * sqrt(96.0 / n), "aa_pcg64_normal: E[z^4] %.6f vs 3 (seed %" PRIu64 ")", m4, seed);
  /* Box-Muller with 53-bit u1 in (0,1] cannot exceed sqrt(106 ln 2). */
  AA_CHECK(maxabs <= sqrt(106 * log(2.0)) + 1e-12, "aa_pcg64_normal: |z| = %g beyond the Box-Muller bound", maxabs);

  /* Each normal draw costs exactly two outputs. */
  aa_pcg64_t a, b;
  aa_pcg64_seed(&a, seed, 3);
  aa_pcg64_seed(&b, seed, 3);
  for (int i = 0; i < 10; i++)
    (void)aa_pcg64_normal(&a);
  for (int i = 0; i < 20; i++)
    (void)aa_pcg64_next(&b);
  AA_CHECK(aa_pcg64_next(&a) == aa_pcg64_next(&b), "aa_pcg64_normal: does not consume exactly two outputs per draw");
}

static uint64_t first_outputs(aa_pcg64_t *r) {
  uint64_t h = 0;
  for (int i = 0; i < 4; i++)
    h = h * 31 + aa_pcg64_next(r);
  return h;
}

/* derive(): pure function of (seed, tags); different tags, seeds, or tag
   counts give different streams; streams are not shifted copies of each other. */
static void check_derive(uint64_t seed) {
  aa_pcg64_t a, b;
  uint64_t t1[3] = {1, 2, 3}, t2[3] = {1, 2, 4}, t3[3] = {2, 1, 3}, t4[4] = {1, 2, 3, 0};
  aa_rng_derive(&a, seed, t1, 3);
  aa_rng_derive(&b, seed, t1, 3);
  AA_CHECK(a.state == b.state && a.inc == b.inc && first_outputs(&a) == first_outputs(&b),
           "aa_rng_derive: same (seed %" PRIu64 ", tags 1,2,3) gives different streams", seed);
  struct {
    uint64_t seed;
    const uint64_t *tags;
    int n;
    const char *what;
  } v[] = {{seed, t1, 3, "1,2,3"},   {seed, t2, 3, "1,2,4"}, {seed, t3, 3, "2,1,3"},
           {seed, t4, 4, "1,2,3,0"}, {seed, t1, 2, "1,2"},   {seed + 1, t1, 3, "1,2,3 seed+1"},
           {seed, NULL, 0, "(none)"}};
  int nv = (int)(sizeof v / sizeof v[0]);
  uint64_t out[16][64];
  for (int i = 0; i < nv; i++) {
    aa_rng_derive(&a, v[i].seed, v[i].tags, v[i].n);
    for (int j = 0; j < 64; j++)
      out[i][j] = aa_pcg64_next(&a);
  }
  /* No output of one stream's first 64 appears among another's first 64. */
  for (int i = 0; i < nv; i++)
    for (int k = i + 1; k < nv; k++) {
      int same = 0;
      for (int j = 0; j < 64; j++)
        for (int l = 0; l < 64; l++)
          same += out[i][j] == out[k][l];
      AA_CHECK(same == 0, "aa_rng_derive: tags %s and %s share %d of 64 outputs (seed %" PRIu64 ")", v[i].what,
               v[k].what, same, seed);
    }
}

int main(void) {
  uint64_t seed = aa_test_seed("trng");
  check_vectors();
  check_bounded(seed);
  check_uniform_normal(seed);
  check_derive(seed);
  return aa_test_finish("trng");
}
