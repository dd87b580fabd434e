/* attnacc: MPFR reference model of aa_round and a spec-table decoder, #included by the tfmt* tests (not compiled
 * alone). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "tests.h"

/* Storage layouts as the format specifications state them (IEEE 754-2019
   table 3.5, the bfloat16 definition, OCP 8-bit FP spec v1.0), written here
   independently of lib/fmt. */
typedef struct {
  int bits, ew, fb, bias, has_inf, prec, emin, emax;
  double max; /* largest finite, from the spec text */
} spec_t;
static const spec_t specs[AA_FMT_COUNT] = {
    [AA_FMT_BF16] = {16, 8, 7, 127, 1, 8, -126, 127, 0x1.fep127},
    [AA_FMT_FP16] = {16, 5, 10, 15, 1, 11, -14, 15, 65504.0},
    [AA_FMT_FP32] = {32, 8, 23, 127, 1, 24, -126, 127, FLT_MAX},
    [AA_FMT_FP64] = {64, 11, 52, 1023, 1, 53, -1022, 1023, DBL_MAX},
    [AA_FMT_E4M3] = {8, 4, 3, 7, 0, 4, -6, 8, 448.0},
    [AA_FMT_E5M2] = {8, 5, 2, 15, 1, 3, -14, 15, 57344.0},
};

static uint64_t dbits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static int same(double a, double b) {
  return (isnan(a) && isnan(b)) || dbits(a) == dbits(b);
}

/* Value of a bit pattern per the spec: (-1)^s 2^(1-bias) 0.f for field 0,
   (-1)^s 2^(field-bias) 1.f otherwise; all-ones field is Inf/NaN for the
   IEEE-like formats; e4m3's only NaN is S.1111.111. Built with MPFR from
   integers so no lib/fmt arithmetic is involved. */
static double spec_decode(uint64_t b, aa_fmt_t fmt) {
  const spec_t *s = &specs[fmt];
  uint64_t frac = b & ((UINT64_C(1) << s->fb) - 1);
  uint64_t field = (b >> s->fb) & ((UINT64_C(1) << s->ew) - 1);
  int neg = (int)((b >> (s->bits - 1)) & 1);
  uint64_t allones = (UINT64_C(1) << s->ew) - 1;
  double v;
  if (s->has_inf && field == allones)
    v = frac ? NAN : INFINITY;
  else if (!s->has_inf && field == allones && frac == (UINT64_C(1) << s->fb) - 1)
    v = NAN;
  else {
    mpfr_t m;
    mpfr_init2(m, 64);
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    if (field == 0)
      mpfr_set_ui_2exp(m, (unsigned long)frac, (mpfr_exp_t)(1 - s->bias - s->fb), MPFR_RNDN);
    else
      mpfr_set_ui_2exp(m, (unsigned long)(frac + (UINT64_C(1) << s->fb)), (mpfr_exp_t)field - s->bias - s->fb,
                       MPFR_RNDN);
    v = mpfr_get_d(m, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    mpfr_clear(m);
  }
  return neg ? -v : v;
}

/* Set MPFR's exponent range to the format's: MPFR writes x = 0.1f * 2^E,
   so the smallest normal 2^emin has E = emin + 1, the smallest subnormal
   2^(emin - prec + 1) has E = emin - prec + 2, and the largest binade
   [2^emax, 2^(emax+1)) has E = emax + 1 (binary32: -148 and 128). */
static void model_range(aa_fmt_t fmt) {
  mpfr_set_emin(specs[fmt].emin - specs[fmt].prec + 2);
  mpfr_set_emax(specs[fmt].emax + 1);
}

static double mpfr_round_d(double x, aa_fmt_t fmt, mpfr_rnd_t r, int *inexact) {
  mpfr_t y;
  mpfr_init2(y, specs[fmt].prec);
  model_range(fmt);
  mpfr_clear_flags();
  int t = mpfr_set_d(y, x, r);
  t = mpfr_subnormalize(y, t, r);
  double d = mpfr_get_d(y, MPFR_RNDN); /* exact: the format fits in a double */
  mpfr_clear(y);
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
  if (inexact) *inexact = t != 0;
  return d;
}

/* Is a finite non-zero format value odd, i.e. its integral significand on
   the grid 2^(max(e, emin) - prec + 1) odd? */
static int model_odd(double y, aa_fmt_t fmt) {
  if (y == 0 || !isfinite(y)) return 0;
  int e = ilogb(y);
  if (e < specs[fmt].emin) e = specs[fmt].emin;
  double k = ldexp(fabs(y), specs[fmt].prec - 1 - e);
  return fmod(k, 2.0) == 1.0;
}

/* MPFR result before the options are applied: precision and range of the
   format with MPFR's own overflow (IEEE-like, so e4m3 can come out as 480
   or Inf here); round to odd from RZ and RA: the one of the two neighbours
   with an odd significand (not an MPFR mode). */
static double model_raw(double x, aa_fmt_t fmt, aa_rnd_t rnd) {
  static const mpfr_rnd_t map[] = {MPFR_RNDN, MPFR_RNDZ, MPFR_RNDU, MPFR_RNDD};
  if (rnd <= AA_RND_D) return mpfr_round_d(x, fmt, map[rnd], NULL);
  int inex;
  double z = mpfr_round_d(x, fmt, MPFR_RNDZ, &inex);
  if (!inex) return z;
  double a = mpfr_round_d(x, fmt, MPFR_RNDA, NULL);
  return model_odd(z, fmt) ? z : a;
}

/* Options: overflow (|y| > max, which for e4m3 includes MPFR's finite 480)
   is +-max for the modes that round |x| down and for round to odd, else +-max if saturating, else Inf (NaN
   for e4m3); infinite inputs: +-max if saturating, else Inf (NaN for e4m3);
   flushing applies to the rounded result: |y| < 2^emin becomes a zero of x's
   sign. */
static double model_post(double y, double x, const aa_round_opts_t *o) {
  const spec_t *s = &specs[o->fmt];
  if (isnan(x)) return NAN;
  if (isinf(x)) return o->saturate ? copysign(s->max, x) : s->has_inf ? x : NAN;
  if (fabs(y) > s->max) {
    /* IEEE 754-2019 7.4: a mode that rounds |x| down (RZ, RD of a positive,
       RU of a negative) overflows to max; RO is defined to follow RZ. */
    int toward_zero =
        o->rnd == AA_RND_Z || o->rnd == AA_RND_O || (o->rnd == AA_RND_D && x > 0) || (o->rnd == AA_RND_U && x < 0);
    if (toward_zero || o->saturate)
      y = copysign(s->max, x);
    else
      y = s->has_inf ? copysign(INFINITY, x) : NAN;
  }
  if (!o->subnormals && fabs(y) < ldexp(1.0, s->emin)) y = copysign(0.0, x);
  return y;
}

static double model_round(double x, const aa_round_opts_t *o) {
  return model_post(model_raw(x, o->fmt, o->rnd), x, o);
}

static int fail_printed = 0;
static void report(const char *what, const aa_round_opts_t *o, double x, double got, double want, uint64_t seed) {
  aa_test_failures++;
  if (fail_printed++ >= 30) return;
  printf("FAIL %s: aa_round(%s, %s, subnormals %d, saturate %d) != MPFR model\n"
         "  input %a (0x%016" PRIx64 ")\n  got   %a (0x%016" PRIx64 ")\n  want  %a (0x%016" PRIx64 ")  seed %" PRIu64
         "\n",
         what, specs[o->fmt].bits ? aa_fmt_info(o->fmt)->name : "?", aa_rnd_name(o->rnd), o->subnormals, o->saturate,
         x, dbits(x), got, dbits(got), want, dbits(want), seed);
}

/* Compare aa_round with the model for one input in all deterministic modes
   and all four option combinations (MPFR runs once per mode). */
static long n_compared = 0;
static void check_all_modes(const char *what, aa_fmt_t fmt, double x, uint64_t seed) {
  n_compared++;
  for (int r = AA_RND_NE; r <= AA_RND_O; r++) {
    double raw = model_raw(x, fmt, (aa_rnd_t)r);
    for (int k = 0; k < 4; k++) {
      aa_round_opts_t o = {fmt, (aa_rnd_t)r, k & 1, k >> 1};
      double want = model_post(raw, x, &o);
      double got = aa_round(x, &o, NULL);
      if (!same(got, want)) report(what, &o, x, got, want, seed);
    }
  }
}

/* Inputs around one gap [lo, hi] of adjacent format values (both signs):
   lo, lo+, quarter, mid-, mid, mid+, three quarters, hi-. */
static void check_gap(const char *what, aa_fmt_t fmt, double lo, double hi, uint64_t seed) {
  double mid = lo + (hi - lo) / 2;
  double xs[8] = {lo,  nextafter(lo, INFINITY),  lo + (hi - lo) / 4,       nextafter(mid, 0),
                  mid, nextafter(mid, INFINITY), lo + 3 * ((hi - lo) / 4), nextafter(hi, 0)};
  for (int i = 0; i < 8; i++) {
    check_all_modes(what, fmt, xs[i], seed);
    check_all_modes(what, fmt, -xs[i], seed);
  }
}

/* Stochastic rounding: the result is RD or RU of the model with the same
   options; exact values never move; one rng output per call; and the
   frequency of rounding up over 10^5 draws is within 5 sigma of
   (x - down) / (up - down) computed from the two MPFR neighbours. */
static void check_stochastic(aa_fmt_t fmt, uint64_t seed) {
  const spec_t *s = &specs[fmt];
  const char *name = aa_fmt_info(fmt)->name;
  aa_pcg32_t rng, twin;
  aa_pcg32_seed(&rng, seed, (uint64_t)fmt + 100);
  aa_pcg64_t pick;
  aa_pcg64_seed(&pick, seed, (uint64_t)fmt + 200);
  uint64_t maxpat = s->has_inf ? ((UINT64_C(1) << s->ew) - 1) << s->fb : (UINT64_C(1) << (s->bits - 1)) - 2;
  /* Random inputs: a random value of the format plus a random fraction of
     the next gap, both signs, plus random doubles in the format's range. */
  for (int i = 0; i < 20000; i++) {
    uint64_t b = aa_pcg64_next(&pick) % maxpat;
    double lo = spec_decode(b, fmt), hi = spec_decode(b + 1, fmt);
    if (isinf(hi)) hi = ldexp(1.0, s->emax + 1);
    double x = lo + (hi - lo) * aa_pcg64_uniform(&pick);
    if (i & 1) x = -x;
    if (i % 5 == 0)
      x = ldexp(aa_pcg64_uniform(&pick),
                (int)(aa_pcg64_next(&pick) % (s->emax - s->emin + s->prec + 4)) + s->emin - s->prec);
    for (int k = 0; k < 4; k++) {
      aa_round_opts_t o = {fmt, AA_RND_S, k & 1, k >> 1};
      aa_round_opts_t od = {fmt, AA_RND_D, k & 1, k >> 1}, ou = {fmt, AA_RND_U, k & 1, k >> 1};
      double got = aa_round(x, &o, &rng), d = model_round(x, &od), u = model_round(x, &ou);
      if (!same(got, d) && !same(got, u)) {
        report("stochastic not a neighbour", &o, x, got, d, seed);
        printf("  (RU neighbour %a)\n", u);
      }
      if (same(d, u) && !same(got, d)) report("stochastic moved an exact value", &o, x, got, d, seed);
    }
  }
  /* One output per call, whatever the input. */
  aa_pcg32_seed(&rng, seed, 1);
  aa_pcg32_seed(&twin, seed, 1);
  aa_round_opts_t os = {fmt, AA_RND_S, 1, 0};
  const double xs[] = {1.0, 1.1, 0.0, NAN, INFINITY, 1e300, 1e-300};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
    (void)aa_round(xs[i], &os, &rng);
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
    (void)aa_pcg32_next(&twin);
  AA_CHECK(aa_pcg32_next(&rng) == aa_pcg32_next(&twin), "%s stochastic: not exactly one rng output per call", name);

  /* Frequencies: fractions 1/4, 1/3 (not dyadic), 1/2, 0.9, 2^-10 of a gap
     in the normal range, one in the subnormal range, one just above max. */
  double one_ulp = ldexp(1.0, 1 - s->prec);
  double bases[3] = {1.0 + one_ulp, ldexp(1.0, s->emin - 1), s->max};
  double fracs[5] = {0.25, 1.0 / 3, 0.5, 0.9, 0x1p-10};
  for (int bi = 0; bi < 3; bi++)
    for (int fi = 0; fi < 5; fi++) {
      double lo = model_round(bases[bi], &(aa_round_opts_t){fmt, AA_RND_D, 1, 1});
      double hi = model_round(nextafter(lo, INFINITY), &(aa_round_opts_t){fmt, AA_RND_U, 1, 0});
      if (bi == 2) hi = s->max + ldexp(1.0, s->emax - s->prec + 1); /* the unbounded-exponent neighbour */
      double x = lo + (hi - lo) * fracs[fi];
      /* Subnormals kept, no saturation: above max the upper outcome is the
         overflow value (Inf, or NaN for e4m3), distinct from max. */
      aa_round_opts_t o = {fmt, AA_RND_S, 1, 0};
      double d = model_round(x, &(aa_round_opts_t){fmt, AA_RND_D, 1, 0});
      double u = model_round(x, &(aa_round_opts_t){fmt, AA_RND_U, 1, 0});
      double uval = bi == 2 ? hi : u; /* the neighbour on the unbounded-exponent grid */
      /* p from the two neighbours, in MPFR at 200 bits. */
      mpfr_t a, b, c;
      mpfr_inits2(200, a, b, c, (mpfr_ptr)0);
      mpfr_set_d(a, x, MPFR_RNDN);
      mpfr_sub_d(a, a, d, MPFR_RNDN);
      mpfr_set_d(b, uval, MPFR_RNDN);
      mpfr_sub_d(b, b, d, MPFR_RNDN);
      mpfr_div(c, a, b, MPFR_RNDN);
      double p = mpfr_get_d(c, MPFR_RNDN);
      mpfr_clears(a, b, c, (mpfr_ptr)0);
      const long n = 100000;
      long ups = 0;
      for (long i = 0; i < n; i++) {
        double y = aa_round(x, &o, &rng);
        if (same(y, u))
          ups++;
        else if (!same(y, d)) {
          report("stochastic frequency run", &o, x, y, d, seed);
          break;
        }
      }
      double sd = sqrt(n * p * (1 - p));
      AA_CHECK(fabs(ups - n * p) <= 5 * sd + 1,
               "%s stochastic: x = %a (0x%016" PRIx64 ") rounded up %ld of %ld times, expected p = %.10g (+- 5 sd "
               "%.1f) seed %" PRIu64,
               name, x, dbits(x), ups, n, p, 5 * sd, seed);
    }
}
