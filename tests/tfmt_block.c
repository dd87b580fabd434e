/* attnacc: exhaustive tests of the block-scaled formats (E2M1, E8M0, FP8 satfinite) and the block quantisers against
 * MPFR and the format specifications. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "fmt.h"
#include "rng.h"
#include "tests.h"

#define same aa_test_same

/* ---- MPFR rounding into a small binary format ----
   prec significand bits, smallest normal 2^emin_n, largest finite maxv
   (values past it saturate to +-maxv when sat, else give ovf); subnormals
   by mpfr_subnormalize (MPFR's emin is the exponent of the smallest
   subnormal: emin_n - prec + 2 in MPFR's [1/2, 1) convention). */
typedef struct {
  int prec, emin_n;
  double maxv, ovf;
} sfmt_t;

static double mpfr_small(double x, const sfmt_t *f, mpfr_rnd_t rnd, int sat) {
  if (isnan(x)) return x;
  if (isinf(x)) return sat ? copysign(f->maxv, x) : copysign(f->ovf, x);
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_set_emin(f->emin_n - f->prec + 2);
  mpfr_set_emax(64);
  mpfr_t r;
  mpfr_init2(r, f->prec);
  int inex = mpfr_set_d(r, x, rnd);
  inex = mpfr_check_range(r, inex, rnd);
  mpfr_subnormalize(r, inex, rnd);
  double v = mpfr_get_d(r, MPFR_RNDN);
  mpfr_clear(r);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  if (v == 0) v = copysign(0.0, x);
  if (fabs(v) > f->maxv) { /* overflow: toward zero modes keep the largest finite (IEEE 754 7.4) */
    int down = rnd == MPFR_RNDZ || (rnd == MPFR_RNDD && x > 0) || (rnd == MPFR_RNDU && x < 0);
    v = sat || down ? copysign(f->maxv, x) : copysign(f->ovf, x);
  }
  return v;
}

/* [ocp-mx] table 5 (E2M1), [ocp-fp8] (E4M3 max 448, no Inf; E5M2 max 57344 with Inf) */
static const sfmt_t E2M1 = {2, 0, 6.0, 6.0};
static const sfmt_t E4M3 = {4, -6, 448.0, NAN};
static const sfmt_t E5M2 = {3, -14, 57344.0, INFINITY};
static const sfmt_t F32 = {24, -126, FLT_MAX, INFINITY};

/* binary32 operations by MPFR (one correct rounding, RNE) */
static double f32(double x) {
  return mpfr_small(x, &F32, MPFR_RNDN, 0);
}
static double f32_op(char op, double a, double b) {
  mpfr_t x, y, z;
  mpfr_inits2(200, x, y, z, (mpfr_ptr)0);
  mpfr_set_d(x, a, MPFR_RNDN);
  mpfr_set_d(y, b, MPFR_RNDN);
  mpfr_set_prec(z, 24);
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_set_emin(-148);
  mpfr_set_emax(128);
  int inex = op == '*'   ? mpfr_mul(z, x, y, MPFR_RNDN)
             : op == '/' ? mpfr_div(z, x, y, MPFR_RNDN)
                         : mpfr_add(z, x, y, MPFR_RNDN);
  inex = mpfr_check_range(z, inex, MPFR_RNDN);
  mpfr_subnormalize(z, inex, MPFR_RNDN);
  double v = mpfr_get_d(z, MPFR_RNDN);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  mpfr_clears(x, y, z, (mpfr_ptr)0);
  return v;
}

/* E2M1: the eight magnitudes of [ocp-mx] table 5, codes 0..7 */
static const double e2m1_mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

static void test_e2m1_codes(void) {
  for (unsigned c = 0; c < 16; c++) {
    double want = c & 8 ? -e2m1_mag[c & 7] : e2m1_mag[c & 7];
    double got = aa_e2m1_decode(c);
    AA_CHECK(same(got, want), "e2m1 decode(0x%x) = %a, want %a", c, got, want);
    AA_CHECK(aa_e2m1_encode(want) == c, "e2m1 encode(%a) = 0x%x, want 0x%x", want, aa_e2m1_encode(want), c);
    AA_CHECK(same(aa_e2m1_round(want, AA_RND_NE), want), "e2m1 round(%a) moved a representable value", want);
  }
}

/* Every rounding boundary of E2M1: each code's value, the midpoints
   between neighbours, one ulp (binary64) either side of each, values past
   6 and below 0.25, infinities and NaN, in four modes against MPFR. */
static void test_e2m1_round(void) {
  static const aa_rnd_t modes[] = {AA_RND_NE, AA_RND_Z, AA_RND_U, AA_RND_D};
  static const mpfr_rnd_t mmodes[] = {MPFR_RNDN, MPFR_RNDZ, MPFR_RNDU, MPFR_RNDD};
  double pts[200];
  size_t np = 0;
  for (int i = 0; i < 8; i++) {
    double v = e2m1_mag[i], nxt = i < 7 ? e2m1_mag[i + 1] : 8.0; /* 7 = midpoint(6, 8): the RNE overflow edge */
    double mid = (v + nxt) / 2;
    double p[] = {v, nextafter(v, 0), nextafter(v, 100), mid, nextafter(mid, 0), nextafter(mid, 100)};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
      pts[np++] = p[k], pts[np++] = -p[k];
  }
  double extra[] = {0.25, 0.125, 1e-300, 0x1p-1074, 6.5, 7.0, 9.0, 1e300, INFINITY, -INFINITY, NAN, -0.0};
  for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++)
    pts[np++] = extra[k], pts[np++] = -extra[k];
  for (size_t m = 0; m < 4; m++)
    for (size_t k = 0; k < np; k++) {
      double got = aa_e2m1_round(pts[k], modes[m]);
      double want = mpfr_small(pts[k], &E2M1, mmodes[m], 1);
      AA_CHECK(same(got, want), "e2m1 round(%a, %s) = %a, MPFR %a", pts[k], aa_rnd_name(modes[m]), got, want);
    }
}

static void test_e8m0(void) {
  for (unsigned c = 0; c < 256; c++) {
    double got = aa_e8m0_decode(c);
    if (c == 255) {
      AA_CHECK(isnan(got), "e8m0 decode(0xff) = %a, want NaN", got);
      continue;
    }
    double want = 1.0; /* 2^(c - 127) by repeated exact doubling/halving */
    for (int k = 0; k < (int)c - 127; k++)
      want *= 2;
    for (int k = 0; k < 127 - (int)c; k++)
      want /= 2;
    AA_CHECK(same(got, want), "e8m0 decode(0x%02x) = %a, want %a", c, got, want);
    AA_CHECK(aa_e8m0_encode(want) == c, "e8m0 encode(%a) = %u, want %u", want, aa_e8m0_encode(want), c);
    AA_CHECK(aa_e8m0_encode(want * 1.5) == 255, "e8m0 encode(%a) accepted a non-power of two", want * 1.5);
  }
  double bad[] = {0.0, -1.0, 0x1p-128, 0x1p128, INFINITY, NAN};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    AA_CHECK(aa_e8m0_encode(bad[k]) == 255, "e8m0 encode(%a) = %u, want 255", bad[k], aa_e8m0_encode(bad[k]));
}

/* FP8 conversions with and without satfinite at every code and midpoint
   (the overflow edges: e4m3 464 ties to 448, above it overflows; e5m2
   61440 ties up to 65536, an overflow), against MPFR. */
static void test_fp8_satfinite(void) {
  const sfmt_t *sf[2] = {&E4M3, &E5M2};
  aa_fmt_t fm[2] = {AA_FMT_E4M3, AA_FMT_E5M2};
  for (int f = 0; f < 2; f++)
    for (unsigned c = 0; c < 256; c++) {
      double v = aa_fmt_decode(c, fm[f]), nv = aa_fmt_decode(c + 1 < 256 ? c + 1 : c, fm[f]);
      if (!isfinite(v) || signbit(v)) continue;
      double up = isfinite(nv) && nv > v ? nv : 2 * v - aa_fmt_decode(c - 1, fm[f]);
      double mid = (v + up) / 2, pts[] = {v, mid, nextafter(mid, 0), nextafter(mid, INFINITY), 3 * v, -mid};
      for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++)
        for (int sat = 0; sat <= 1; sat++) {
          aa_round_opts_t ro = {fm[f], AA_RND_NE, 1, sat};
          double got = aa_round(pts[k], &ro, NULL), want = mpfr_small(pts[k], sf[f], MPFR_RNDN, sat);
          AA_CHECK(same(got, want), "%s satfinite=%d round(%a) = %a, MPFR %a", aa_fmt_info(fm[f])->name, sat, pts[k],
                   got, want);
        }
    }
  /* specials: NaN stays NaN; +-Inf saturates to +-max under satfinite (PTX cvt .satfinite), else stays Inf (e5m2)
     or becomes NaN (e4m3, which has no Inf) */
  double sp[] = {NAN, -NAN, INFINITY, -INFINITY};
  for (int f = 0; f < 2; f++)
    for (size_t k = 0; k < 4; k++)
      for (int sat = 0; sat <= 1; sat++) {
        aa_round_opts_t ro = {fm[f], AA_RND_NE, 1, sat};
        double got = aa_round(sp[k], &ro, NULL), want = mpfr_small(sp[k], sf[f], MPFR_RNDN, sat);
        AA_CHECK(same(got, want) && (isnan(sp[k]) || signbit(got) == signbit(sp[k])),
                 "%s satfinite=%d round(%a) = %a, want %a", aa_fmt_info(fm[f])->name, sat, sp[k], got, want);
      }
}

/* ---- an independent block quantiser: every FP32 operation and element
   rounding by MPFR, written from the sources cited in lib/fmt.h ---- */
typedef struct {
  aa_bq_kind_t kind;
  const sfmt_t *el;
  double maxel;
  int emax_el;
} rkind_t;

static rkind_t rkind(aa_bq_kind_t k) {
  rkind_t r = {k, &E4M3, 448.0, 8};
  if (k == AA_BQ_MXFP8_E5M2) r.el = &E5M2, r.maxel = 57344.0, r.emax_el = 15;
  if (k == AA_BQ_MXFP4 || k == AA_BQ_NVFP4) r.el = &E2M1, r.maxel = 6.0, r.emax_el = 2;
  return r;
}

/* smallest k with 2^k >= d (d > 0), largest k with 2^k <= a (a > 0), by exact comparisons */
static int ceil_log2(double d) {
  int k = -160;
  while (ldexp(1.0, k) < d)
    k++;
  return k;
}
static int floor_log2(double a) {
  int k = 160;
  while (ldexp(1.0, k) > a)
    k--;
  return k;
}

static void ref_mx(double *out, const double *x, size_t n, const rkind_t *rk, aa_bq_scale_rnd_t mode, int sat,
                   double amax) {
  int k;
  if (mode == AA_BQ_SCALE_RCEIL) {
    double d = f32_op('*', amax, f32_op('/', 1.0, rk->maxel));
    k = d == 0 ? -127 : ceil_log2(d);
  } else {
    k = amax == 0 ? -127 : floor_log2(amax) - rk->emax_el;
  }
  k = k < -127 ? -127 : k > 127 ? 127 : k;
  for (size_t i = 0; i < n; i++)
    out[i] = mpfr_small(ldexp(f32(x[i]), -k), rk->el, MPFR_RNDN, rk->el == &E2M1 || sat) * ldexp(1.0, k);
}

static void ref_nvfp4(double *out, const double *x, size_t n, double amax, double tamax) {
  double s_enc = f32_op('/', 2688.0, tamax);
  if (s_enc > FLT_MAX) s_enc = FLT_MAX;
  if (tamax == 0 || s_enc == 0) s_enc = 1.0;
  double s = mpfr_small(f32_op('*', amax, f32_op('*', s_enc, f32_op('/', 1.0, 6.0))), &E4M3, MPFR_RNDN, 1);
  double r = f32_op('/', 1.0, f32_op('*', s, f32_op('/', 1.0, s_enc)));
  if (r > FLT_MAX) r = FLT_MAX;
  for (size_t i = 0; i < n; i++)
    out[i] = mpfr_small(f32_op('*', f32(x[i]), r), &E2M1, MPFR_RNDN, 1) * s / s_enc;
}

static void ref_int(double *out, const double *x, size_t n, aa_bq_kind_t kind, double amax) {
  double scale = f32_op('/', amax, kind == AA_BQ_INT4_THREAD ? 7.0 : 127.0);
  if (kind != AA_BQ_INT8_BLOCK) scale = f32_op('+', scale, (double)1e-7f);
  for (size_t i = 0; i < n; i++) {
    if (scale == 0) {
      out[i] = 0;
      continue;
    }
    double v = f32_op('/', f32(x[i]), scale);
    v = f32_op('+', v, v >= 0 ? 0.5 : -0.5);
    out[i] = trunc(v) * scale;
  }
}

static void ref_tensor(double *out, const double *x, size_t n, int sat, double amax) {
  double scale = amax > 0 ? f32_op('/', 448.0, amax) : 1.0, inv = f32_op('/', 1.0, scale);
  for (size_t i = 0; i < n; i++)
    out[i] = mpfr_small(f32_op('*', f32(x[i]), scale), &E4M3, MPFR_RNDN, sat) * inv;
}

/* One block of the reference (amax over the block, NaN blocks NaN). */
static void ref_block(double *out, const double *x, size_t n, const aa_bq_opts_t *o, double tamax) {
  double amax = 0;
  int nan = 0;
  for (size_t i = 0; i < n; i++) {
    nan |= isnan(x[i]);
    if (fabs(f32(x[i])) > amax) amax = fabs(f32(x[i]));
  }
  rkind_t rk = rkind(o->kind);
  if (nan)
    for (size_t i = 0; i < n; i++)
      out[i] = NAN;
  else if (o->kind == AA_BQ_NVFP4)
    ref_nvfp4(out, x, n, amax, tamax);
  else if (o->kind >= AA_BQ_INT8_BLOCK && o->kind <= AA_BQ_INT4_THREAD)
    ref_int(out, x, n, o->kind, amax);
  else if (o->kind == AA_BQ_FP8_TENSOR)
    ref_tensor(out, x, n, o->satfinite, amax);
  else
    ref_mx(out, x, n, &rk, o->scale_rnd, o->satfinite, amax);
}

/* Random blocks: bf16-like values with an exponent spread (so that small
   elements fall to subnormals and zero), exact zeros, all-zero blocks, an
   occasional NaN; strides 1 and 3; every kind, both scale modes, both
   satfinite settings. */
static void test_quantizers(uint64_t seed) {
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 0x626c6f636bu);
  enum { N = 96 };
  double x[3 * N], got[3 * N], want[N];
  int iters = (int)(200 * aa_test_multiplier());
  for (int it = 0; it < iters; it++) {
    aa_bq_opts_t o = {(aa_bq_kind_t)(1 + it % (AA_BQ_COUNT - 1)), 0, (aa_bq_scale_rnd_t)((it / 9) % 2),
                      (it / 18) % 2};
    size_t stride = it % 2 ? 3 : 1, n = 1 + aa_pcg64_next(&rng) % N;
    int spread = (int)(aa_pcg64_next(&rng) % 40), zero_block = it % 23 == 0;
    double tamax = 0;
    for (size_t i = 0; i < n; i++) {
      double v = (float)ldexp(aa_pcg64_normal(&rng), (int)(aa_pcg64_next(&rng) % (spread + 1)) - spread / 2);
      if (zero_block || aa_pcg64_next(&rng) % 10 == 0) v = 0;
      if (it % 37 == 5 && i == n / 2) v = NAN;
      x[i * stride] = v;
      if (fabs(v) > tamax) tamax = fabs(v);
    }
    AA_CHECK(aa_bq_quantize(got, NULL, x, n, stride, &o, tamax) == AA_OK, "bq %s: status", aa_bq_kind_name(o.kind));
    size_t block = o.block ? o.block : aa_bq_default_block(o.kind);
    if (block == 0 || block > n) block = n;
    for (size_t b0 = 0; b0 < n; b0 += block) {
      size_t len = n - b0 < block ? n - b0 : block;
      double xb[N];
      for (size_t i = 0; i < len; i++)
        xb[i] = x[(b0 + i) * stride];
      ref_block(want + b0, xb, len, &o, tamax);
    }
    for (size_t i = 0; i < n; i++)
      if (!same(got[i * stride], want[i])) {
        AA_FAIL("bq %s scale=%d sat=%d n=%zu stride=%zu: value %zu of %a gives %a, reference %a (seed %llu)",
                aa_bq_kind_name(o.kind), (int)o.scale_rnd, o.satfinite, n, stride, i, x[i * stride], got[i * stride],
                want[i], (unsigned long long)seed);
        break;
      }
  }
}

/* Cases derived by hand from the rules of lib/fmt.h (FP32 values worked
   out with the decimal expansions noted). */
static void check_case(const char *what, aa_bq_kind_t kind, aa_bq_scale_rnd_t mode, const double *x, size_t n,
                       double tamax, const double *want, double want_scale) {
  aa_bq_opts_t o = {kind, 0, mode, 1};
  double got[8], sc[8];
  AA_CHECK(aa_bq_quantize(got, sc, x, n, 1, &o, tamax) == AA_OK, "%s: status", what);
  for (size_t i = 0; i < n; i++)
    AA_CHECK(same(got[i], want[i]), "%s: value %zu of %a gives %a, want %a", what, i, x[i], got[i], want[i]);
  AA_CHECK(same(sc[0], want_scale), "%s: scale %a, want %a", what, sc[0], want_scale);
}

static void test_named_cases(void) {
  /* amax 500: rceil takes fl32(500 * fl32(1/448)) = 1.116 -> 2^1, 250 -> 256 (grid 16 in [128, 256)): 512;
     OCP floor takes 2^(8 - 8) = 1 and 500 saturates to 448 */
  check_case("mxfp8-e4m3 rceil", AA_BQ_MXFP8_E4M3, AA_BQ_SCALE_RCEIL, (double[]){500, 1}, 2, 0, (double[]){512, 1},
             2.0);
  check_case("mxfp8-e4m3 floor", AA_BQ_MXFP8_E4M3, AA_BQ_SCALE_FLOOR, (double[]){500, 1}, 2, 0, (double[]){448, 1},
             1.0);
  /* amax 7: rceil fl32(7 * fl32(1/6)) = 1.1666 -> 2^1, 3.5 ties to 4 (even code 0110): 8; 0.6 -> 0.5: 1.
     floor: 2^(2 - 2) = 1, 7 saturates to 6, 1.2 -> 1 */
  check_case("mxfp4 rceil", AA_BQ_MXFP4, AA_BQ_SCALE_RCEIL, (double[]){7, 1.2}, 2, 0, (double[]){8, 1}, 2.0);
  check_case("mxfp4 floor", AA_BQ_MXFP4, AA_BQ_SCALE_FLOOR, (double[]){7, 1.2}, 2, 0, (double[]){6, 1}, 1.0);
  /* fl32(6 * fl32(1/6)) = 1 exactly (6 * 0x1.555556p-3 = 1 + 2^-25 rounds down): scale 1, values kept */
  check_case("mxfp4 rceil exact", AA_BQ_MXFP4, AA_BQ_SCALE_RCEIL, (double[]){6, -1.5}, 2, 0, (double[]){6, -1.5},
             1.0);
  /* nvfp4, tensor amax 6: S_enc = 448; block amax 0.3: fl32(0.3 * 74.67) = 22.4 -> e4m3 22; r = fl32(1 /
     fl32(22 / 448)) = 20.36, 0.3 * 20.36 = 6.11 -> 6; value 6 * 22 / 448 */
  check_case("nvfp4", AA_BQ_NVFP4, AA_BQ_SCALE_RCEIL, (double[]){0.3}, 1, 6.0, (double[]){132.0 / 448.0},
             22.0 / 448.0);
  /* all zero: E8M0 code 0 (2^-127), values zero */
  check_case("mxfp8 zero block", AA_BQ_MXFP8_E4M3, AA_BQ_SCALE_RCEIL, (double[]){0, -0.0}, 2, 0, (double[]){0, -0.0},
             0x1p-127);
  check_case("mxfp8 NaN block", AA_BQ_MXFP8_E4M3, AA_BQ_SCALE_RCEIL, (double[]){1, NAN}, 2, 0, (double[]){NAN, NAN},
             NAN);
  /* int8-block: scale fl32(1/127) = 0x1.020408p-7; 1 / s = 127.0000129 (FP32), + 0.5, trunc: 127 */
  check_case("int8-block", AA_BQ_INT8_BLOCK, AA_BQ_SCALE_RCEIL, (double[]){1, 0}, 2, 0,
             (double[]){127 * 0x1.020408p-7, 0}, 0x1.020408p-7);
  /* ties round half away from zero (+-0.5 then truncation), not to even: 0.5 -> 1, -2.5 -> -3 */
  check_case("int8-block ties", AA_BQ_INT8_BLOCK, AA_BQ_SCALE_RCEIL, (double[]){127, 0.5, -2.5}, 3, 0,
             (double[]){127, 1, -3}, 1.0);
  /* int4-thread: fl32(7 / 7 + 1e-7) = 1 + 2^-23 (1e-7 is 0.84 ulp of 1); 7 / it = 6.9999992 + 0.5 -> 7 */
  check_case("int4-thread eps", AA_BQ_INT4_THREAD, AA_BQ_SCALE_RCEIL, (double[]){7, 0}, 2, 0,
             (double[]){7 * (1 + 0x1p-23), 0}, 1 + 0x1p-23);
}

int main(void) {
  uint64_t seed = aa_test_seed("tfmt_block");
  test_e2m1_codes();
  test_e2m1_round();
  test_e8m0();
  test_fp8_satfinite();
  test_quantizers(seed);
  test_named_cases();
  return aa_test_finish("tfmt_block");
}
