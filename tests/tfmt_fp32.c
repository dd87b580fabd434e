/* attnacc: fp32 rounding against MPFR (sampled + boundaries), the inline bf16 fast path against aa_round, and the
 * expensive exhaustive fp32 -> bf16 check. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "tfmt_model.c"

static double f32_value(uint32_t u) {
  return (double)aa_f32_from_bits(u);
}

/* A random double: (a) an fp32 value with random bits below its last bit
   (lands anywhere in the gap, incl. exact midpoints when those bits are
   10..0), (b) a random exponent in fp32's range +-30 binades with a random
   significand, (c) an arbitrary 64-bit pattern. */
static double random_input(aa_pcg64_t *g) {
  uint64_t r = aa_pcg64_next(g);
  double x;
  switch (r % 4) {
  case 0:
  case 1: {
    uint64_t u = dbits(f32_value((uint32_t)(r >> 32) & 0x7fffffffu));
    uint64_t low = aa_pcg64_next(g) & ((UINT64_C(1) << 29) - 1);
    if ((r >> 8) % 4 == 0) low = UINT64_C(1) << 28; /* exact midpoint */
    u |= low;
    memcpy(&x, &u, sizeof x);
    break;
  }
  case 2:
    x = ldexp(1.0 + aa_pcg64_uniform(g), (int)((r >> 8) % 320) - 180);
    break;
  default: {
    uint64_t u = aa_pcg64_next(g);
    memcpy(&x, &u, sizeof x);
  }
  }
  return (r >> 63) ? -x : x;
}

static void check_fp32_sampled(uint64_t seed) {
  const double mult = aa_test_multiplier();
  const long n = (long)(3000000 * mult);
  aa_pcg64_t g;
  aa_pcg64_seed(&g, seed, 32);
  n_compared = 0;
  for (long i = 0; i < n; i++) {
    double x = random_input(&g);
    if (!isnan(x)) check_all_modes("fp32 sampled", AA_FMT_FP32, x, seed);
  }
  /* Boundary gaps: the first 4096 subnormals, +-4096 patterns around the
     subnormal/normal boundary, the last 4096 below max and beyond it, and
     +-2 patterns around every power of two. */
  uint32_t ranges[][2] = {{0, 4096}, {0x00800000u - 4096, 0x00800000u + 4096}, {0x7f7fffffu - 4096, 0x7f7fffffu}};
  for (int k = 0; k < 3; k++)
    for (uint32_t b = ranges[k][0]; b < ranges[k][1]; b++)
      check_gap("fp32 boundary", AA_FMT_FP32, f32_value(b), f32_value(b + 1), seed);
  for (uint32_t e = 1; e < 255; e++)
    for (int d = -2; d < 2; d++) {
      uint32_t b = (e << 23) + (uint32_t)d;
      check_gap("fp32 binade", AA_FMT_FP32, f32_value(b), f32_value(b + 1), seed);
    }
  check_gap("fp32 overflow", AA_FMT_FP32, FLT_MAX, 0x1p128, seed);
  check_gap("fp32 overflow", AA_FMT_FP32, 0x1p128, 0x1p129, seed);
  printf("tfmt_fp32: %ld inputs x 5 modes x 4 option sets\n", n_compared);
}

/* fp32 patterns (every 4099th, plus the first and last 65536 of each sign):
   decode equals the spec value and the hardware float, encode inverts it. */
static void check_fp32_patterns(void) {
  for (uint64_t b = 0; b <= UINT32_MAX;
       b += (b & 0x7fffffffu) < 65536 || (b & 0x7fffffffu) > 0x7f7f0000u ? 1 : 4099) {
    double v = aa_fmt_decode(b, AA_FMT_FP32), w = spec_decode(b, AA_FMT_FP32), h = f32_value((uint32_t)b);
    if (!same(v, w) || !same(v, h)) {
      AA_FAIL("aa_fmt_decode(0x%08" PRIx64 ", fp32) = %a, spec %a, hardware %a", b, v, w, h);
      continue;
    }
    if (isnan(v)) continue;
    uint64_t e = aa_fmt_encode(v, AA_FMT_FP32);
    AA_CHECK(e == b, "aa_fmt_encode(%a, fp32) = 0x%08" PRIx64 ", want 0x%08" PRIx64, v, e, b);
  }
}

/* aa_bf16_bits_rne(f) must equal aa_round((double)f, bf16, RNE, subnormals,
   Inf) for every fp32 f (NaN: both NaN). Default: every 2^8-th pattern with
   a rotating low byte, plus every pattern whose low 16 bits are a tie or a
   tie +-1; ATTNACC_CHECK_EXPENSIVE: all 2^32. */
static long bf16_fast_mismatch(uint32_t u, const aa_round_opts_t *o) {
  float f = aa_f32_from_bits(u);
  double want = aa_round((double)f, o, NULL);
  uint16_t h = aa_bf16_bits_rne(f);
  double got = (double)aa_bf16_to_f32(h);
  if (same(got, want)) return 0;
  int k;
#pragma omp atomic capture
  k = aa_test_failures++;
  if (k < 20)
    printf("FAIL aa_bf16_bits_rne: disagrees with aa_round(bf16, rne, subnormals 1, saturate 0)\n"
           "  input %a (fp32 0x%08" PRIx32 ")\n  got   %a (bf16 0x%04x)\n  want  %a (0x%016" PRIx64 ")\n",
           (double)f, u, got, h, want, dbits(want));
  return 1;
}

static void check_bf16_fast(void) {
  aa_round_opts_t o = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  long bad = 0, n = 0;
  if (aa_test_expensive()) {
    n = (long)UINT32_MAX + 1;
#pragma omp parallel for reduction(+ : bad) schedule(static, 65536)
    for (int64_t u = 0; u <= (int64_t)UINT32_MAX; u++)
      bad += bf16_fast_mismatch((uint32_t)u, &o);
  } else {
    for (uint64_t i = 0; i < (UINT64_C(1) << 24); i++, n++)
      bad += bf16_fast_mismatch((uint32_t)((i << 8) | ((i * 167) & 0xff)), &o);
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (uint32_t hi = 0; hi < 0x10000; hi++)
      for (int k = 0; k < 6; k++, n++)
        bad += bf16_fast_mismatch((hi << 16) | lows[k], &o);
  }
  printf("tfmt_fp32: aa_bf16_bits_rne vs aa_round on %ld fp32 inputs%s: %ld mismatches\n", n,
         aa_test_expensive() ? " (all)" : " (sample; ATTNACC_CHECK_EXPENSIVE=1 for all 2^32)", bad);
}

/* Expensive: every fp32 rounded to bf16 in RNE against MPFR. */
static void check_fp32_to_bf16_all(uint64_t seed) {
  aa_round_opts_t o = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  long bad = 0;
  /* MPFR keeps its exponent range per thread (thread-local storage), so the
     model can run under OpenMP when MPFR was built with TLS. */
  const int tls = mpfr_buildopt_tls_p();
#pragma omp parallel for reduction(+ : bad) schedule(static, 65536) if (tls)
  for (int64_t u = 0; u <= (int64_t)UINT32_MAX; u++) {
    double x = f32_value((uint32_t)u);
    double want = model_round(x, &o), got = aa_round(x, &o, NULL);
    if (!same(got, want)) {
      bad++;
#pragma omp critical
      report("fp32 -> bf16 exhaustive", &o, x, got, want, seed);
    }
  }
  printf("tfmt_fp32: all 2^32 fp32 -> bf16 (rne) against MPFR: %ld mismatches\n", bad);
}

int main(void) {
  uint64_t seed = aa_test_seed("tfmt_fp32");
  check_fp32_sampled(seed);
  check_fp32_patterns();
  check_stochastic(AA_FMT_FP32, seed);
  check_bf16_fast();
  if (aa_test_expensive())
    check_fp32_to_bf16_all(seed);
  else
    printf("tfmt_fp32: exhaustive fp32 -> bf16 vs MPFR skipped (set ATTNACC_CHECK_EXPENSIVE=1)\n");
  return aa_test_finish("tfmt_fp32");
}
