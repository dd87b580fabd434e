/* attnacc: exhaustive tests of the 8/16-bit formats (decode/encode, every rounding mode and option against MPFR) and
 * stochastic rounding. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "common.h"
#include "tfmt_model.c"

static const aa_fmt_t small_fmts[] = {AA_FMT_BF16, AA_FMT_FP16, AA_FMT_E4M3, AA_FMT_E5M2};

/* Table values against the spec table and name lookups round trip. */
static void check_info(void) {
  for (int i = 0; i < AA_FMT_COUNT; i++) {
    const aa_fmt_info_t *f = aa_fmt_info((aa_fmt_t)i);
    const spec_t *s = &specs[i];
    AA_CHECK(f != NULL && f->bits == s->bits && f->prec == s->prec && f->emin == s->emin && f->emax == s->emax &&
                 f->has_inf == s->has_inf && f->max_finite == s->max,
             "aa_fmt_info(%d): table differs from the format specification", i);
    aa_fmt_t back;
    AA_CHECK(f && aa_fmt_from_name(&back, f->name) == 0 && back == (aa_fmt_t)i, "aa_fmt_from_name(%s)",
             f ? f->name : "?");
  }
  aa_fmt_t fm;
  AA_CHECK(aa_fmt_from_name(&fm, "BFloat16") == 0 && fm == AA_FMT_BF16, "aa_fmt_from_name(BFloat16)");
  AA_CHECK(aa_fmt_from_name(&fm, "fp12") != 0, "aa_fmt_from_name(fp12) should fail");
  AA_CHECK(aa_fmt_info(AA_FMT_COUNT) == NULL, "aa_fmt_info(AA_FMT_COUNT) should be NULL");
  static const char *rn[] = {"rne", "rz", "ru", "rd", "ro", "rs"};
  for (int i = 0; i < AA_RND_COUNT; i++) {
    aa_rnd_t r;
    AA_CHECK(strcmp(aa_rnd_name((aa_rnd_t)i), rn[i]) == 0 && aa_rnd_from_name(&r, rn[i]) == 0 && r == (aa_rnd_t)i,
             "rounding mode name %s", rn[i]);
  }
  aa_rnd_t r;
  AA_CHECK(aa_rnd_from_name(&r, "nearest-away") != 0, "aa_rnd_from_name(nearest-away) should fail");
}

/* Published bit patterns (IEEE 754 binary16 max 65504, OCP FP8 table). */
static void check_known(void) {
  static const struct {
    aa_fmt_t f;
    uint64_t b;
    double v;
  } k[] = {{AA_FMT_BF16, 0x3f80, 1.0},         {AA_FMT_BF16, 0x7f7f, 0x1.fep127},   {AA_FMT_BF16, 0x0001, 0x1p-133},
           {AA_FMT_BF16, 0xc000, -2.0},        {AA_FMT_FP16, 0x3c00, 1.0},          {AA_FMT_FP16, 0x7bff, 65504.0},
           {AA_FMT_FP16, 0x0001, 0x1p-24},     {AA_FMT_FP16, 0x0400, 0x1p-14},      {AA_FMT_E4M3, 0x7e, 448.0},
           {AA_FMT_E4M3, 0x78, 256.0},         {AA_FMT_E4M3, 0x08, 0x1p-6},         {AA_FMT_E4M3, 0x01, 0x1p-9},
           {AA_FMT_E4M3, 0x38, 1.0},           {AA_FMT_E4M3, 0xfe, -448.0},         {AA_FMT_E5M2, 0x7b, 57344.0},
           {AA_FMT_E5M2, 0x7c, INFINITY},      {AA_FMT_E5M2, 0x01, 0x1p-16},        {AA_FMT_E5M2, 0x3c, 1.0},
           {AA_FMT_FP32, 0x7f7fffff, FLT_MAX}, {AA_FMT_FP32, 0x00000001, 0x1p-149}, {AA_FMT_FP32, 0x3f800000, 1.0}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    double v = aa_fmt_decode(k[i].b, k[i].f);
    AA_CHECK(same(v, k[i].v), "aa_fmt_decode(0x%" PRIx64 ", %s) = %a, published %a", k[i].b,
             aa_fmt_info(k[i].f)->name, v, k[i].v);
    AA_CHECK(aa_fmt_encode(k[i].v, k[i].f) == k[i].b, "aa_fmt_encode(%a, %s) = 0x%" PRIx64 ", published 0x%" PRIx64,
             k[i].v, aa_fmt_info(k[i].f)->name, aa_fmt_encode(k[i].v, k[i].f), k[i].b);
  }
  AA_CHECK(isnan(aa_fmt_decode(0x7f, AA_FMT_E4M3)) && isnan(aa_fmt_decode(0xff, AA_FMT_E4M3)),
           "e4m3 S.1111.111 must decode to NaN");
  AA_CHECK((aa_fmt_encode(NAN, AA_FMT_E4M3) & 0x7f) == 0x7f, "e4m3 NaN must encode as S.1111.111");
}

/* Every bit pattern: decode equals the spec value, the value is exact in
   MPFR at the format's precision and range, and encode inverts decode; the
   positive patterns are strictly increasing. */
static void check_patterns(aa_fmt_t fmt) {
  const spec_t *s = &specs[fmt];
  uint64_t n = UINT64_C(1) << s->bits;
  double prev = -1;
  for (uint64_t b = 0; b < n; b++) {
    double v = aa_fmt_decode(b, fmt), w = spec_decode(b, fmt);
    if (!same(v, w)) {
      AA_FAIL("aa_fmt_decode(0x%" PRIx64 ", %s) = %a (0x%016" PRIx64 "), spec %a", b, aa_fmt_info(fmt)->name, v,
              dbits(v), w);
      continue;
    }
    if (isnan(v)) {
      AA_CHECK(isnan(aa_fmt_decode(aa_fmt_encode(v, fmt), fmt)), "aa_fmt_encode(NaN, %s) is not a NaN pattern",
               aa_fmt_info(fmt)->name);
      continue;
    }
    if (isfinite(v)) {
      int inex;
      double m = mpfr_round_d(v, fmt, MPFR_RNDN, &inex);
      AA_CHECK(!inex && same(m, v), "pattern 0x%" PRIx64 " of %s decodes to %a, not exact in MPFR", b,
               aa_fmt_info(fmt)->name, v);
    }
    uint64_t e = aa_fmt_encode(v, fmt);
    AA_CHECK(e == b, "aa_fmt_encode(%a, %s) = 0x%" PRIx64 ", want 0x%" PRIx64, v, aa_fmt_info(fmt)->name, e, b);
    if (b < n / 2 && !isnan(v)) {
      AA_CHECK(v > prev, "%s pattern 0x%" PRIx64 " = %a not above the previous %a", aa_fmt_info(fmt)->name, b, v,
               prev);
      prev = v;
    }
  }
  AA_CHECK(prev == (s->has_inf ? INFINITY : s->max), "%s: largest positive pattern decodes to %a",
           aa_fmt_info(fmt)->name, prev);
}

/* Every gap between adjacent non-negative values (negatives by symmetry in
   check_gap), then gaps beyond max_finite up to two binades above it, then
   special and far-out inputs; all modes, all options. */
static void check_rounding(aa_fmt_t fmt, uint64_t seed) {
  const spec_t *s = &specs[fmt];
  const char *name = aa_fmt_info(fmt)->name;
  uint64_t maxpat = s->has_inf ? ((UINT64_C(1) << s->ew) - 1) << s->fb : (UINT64_C(1) << (s->bits - 1)) - 1;
  for (uint64_t b = 0; b + 1 < maxpat; b++)
    check_gap(name, fmt, spec_decode(b, fmt), spec_decode(b + 1, fmt), seed);
  /* Beyond max_finite: the next value an unbounded exponent would give
     (max + ulp; 480 for e4m3), then 2^(emax+1), 2^(emax+2). */
  double ulp = ldexp(1.0, s->emax - s->prec + 1);
  double next = s->max + ulp, b1 = ldexp(1.0, s->emax + 1), b2 = ldexp(1.0, s->emax + 2);
  check_gap(name, fmt, s->max, next, seed);
  if (next < b1) check_gap(name, fmt, next, b1, seed);
  check_gap(name, fmt, b1, b2, seed);
  static const double far[] = {
      INFINITY, NAN, DBL_MAX, 1e300, 0x1p-1074, 0x1p-1022, 1e-300, 0.0, 0x1.fffffffffffffp-1};
  for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
    check_all_modes(name, fmt, far[i], seed);
    check_all_modes(name, fmt, -far[i], seed);
  }
}

/* aa_round_n agrees element-wise with aa_round (same rng draws for RS),
   also in place, and rejects invalid options. */
static void check_round_n(uint64_t seed) {
  enum { N = 4096 };
  static double x[N], y[N], z[N];
  aa_pcg64_t g;
  aa_pcg64_seed(&g, seed, 77);
  for (int i = 0; i < N; i++)
    x[i] = ldexp(aa_pcg64_normal(&g), (int)(aa_pcg64_next(&g) % 40) - 20);
  x[0] = NAN, x[1] = INFINITY, x[2] = -0.0, x[3] = 1e300, x[4] = 1e-300;
  for (int f = 0; f < AA_FMT_COUNT; f++)
    for (int r = 0; r < AA_RND_COUNT; r++)
      for (int k = 0; k < 4; k++) {
        aa_round_opts_t o = {(aa_fmt_t)f, (aa_rnd_t)r, k & 1, k >> 1};
        aa_pcg32_t r1, r2;
        aa_pcg32_seed(&r1, seed, 5);
        aa_pcg32_seed(&r2, seed, 5);
        memcpy(z, x, sizeof x);
        int st = aa_round_n(y, x, N, &o, &r1);
        (void)aa_round_n(z, z, N, &o, &r2);
        aa_pcg32_seed(&r1, seed, 5);
        AA_CHECK(st == 0, "aa_round_n(%d, %d): status %d", f, r, st);
        for (int i = 0; i < N; i++) {
          double w = aa_round(x[i], &o, &r1);
          if (!same(y[i], w) || !same(z[i], w)) {
            report("aa_round_n vs aa_round", &o, x[i], y[i], w, seed);
            break;
          }
        }
      }
  aa_round_opts_t bad = {AA_FMT_COUNT, AA_RND_NE, 1, 0};
  AA_CHECK(aa_round_n(y, x, 1, &bad, NULL) == AA_EINVAL, "aa_round_n: invalid format not rejected");
  aa_round_opts_t srn = {AA_FMT_BF16, AA_RND_S, 1, 0};
  AA_CHECK(aa_round_n(y, x, 1, &srn, NULL) == AA_EINVAL, "aa_round_n: RS without rng not rejected");
}

/* fp64 is the identity on finite doubles, flushes double subnormals and
   saturates infinities when asked. */
static void check_fp64(uint64_t seed) {
  aa_pcg64_t g;
  aa_pcg64_seed(&g, seed, 64);
  for (int i = 0; i < 100000; i++) {
    uint64_t u = aa_pcg64_next(&g);
    if (i % 3 == 0) u &= UINT64_C(0x800fffffffffffff); /* subnormals */
    double x;
    memcpy(&x, &u, sizeof x);
    if (isnan(x)) continue;
    check_all_modes("fp64", AA_FMT_FP64, x, seed);
  }
}

int main(void) {
  uint64_t seed = aa_test_seed("tfmt");
  check_info();
  check_known();
  for (size_t i = 0; i < sizeof small_fmts / sizeof small_fmts[0]; i++) {
    aa_fmt_t f = small_fmts[i];
    int before = aa_test_failures;
    n_compared = 0;
    check_patterns(f);
    check_rounding(f, seed);
    check_stochastic(f, seed);
    printf("tfmt: %s: %ld inputs x 5 modes x 4 option sets: %s\n", aa_fmt_info(f)->name, n_compared,
           aa_test_failures == before ? "ok" : "FAILED");
  }
  check_fp64(seed);
  check_round_n(seed);
  return aa_test_finish("tfmt");
}
