/* attnacc: the oracle's double-to-FP32/BF16 rounding and its two-ulp interval steps against MPFR and nextafter. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
/* aa_or_round_d (ddcore.h) rounds a double to BF16 on its bit pattern and the settle widens an interval by two
   steps of the pattern (aa_or_step_down, aa_or_step_up). The witnesses are independent of that code: MPFR's
   rounding to an 8- or 24-bit significand with the narrow exponent range and subnormalisation
   (aa_oracle_round_mpfr, round.c), and the C library's nextafter. Checked on
   - every finite BF16 value of either sign, the midpoints between neighbours (ties: RNE picks the even one) and
     the doubles one ulp on each side of each midpoint (the carries into the next binade and to Inf included);
   - 2^20 random doubles with exponents spread over the whole binary64 range (subnormal BF16 and FP32, overflow);
   - the steps on random doubles and on the edges: +-0, +-the smallest subnormal, +-DBL_MIN, +-1, +-DBL_MAX. */
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#include "hd.h"
#include "oracle/ddcore.h"
#include "oracle/oracle-impl.h"
#include "tests.h"

static uint64_t xs = 0x9e3779b97f4a7c15u;
static uint64_t next64(void) { /* xorshift64*: the draw of this test only */
  xs ^= xs >> 12, xs ^= xs << 25, xs ^= xs >> 27;
  return xs * 0x2545f4914f6cdd1du;
}

static size_t bad;

static void check_round(double x, mpfr_t m) {
  for (int bf16 = 0; bf16 < 2; bf16++) {
    mpfr_set_d(m, x, MPFR_RNDN); /* exact: m has 64 bits */
    double want = aa_oracle_round_mpfr(m, bf16), got = aa_oracle_round_d(x, bf16);
    if (want != got && bad++ < 10) /* == : the witness gives +0 for -0 too */
      AA_FAIL("toracle_round %s(%a): %a, MPFR %a", bf16 ? "bf16" : "fp32", x, got, want);
  }
}

static void check_steps(double x) {
  double d = aa_or_step_down(x), u = aa_or_step_up(x);
  double wd = nextafter(x, -(double)INFINITY), wu = nextafter(x, (double)INFINITY);
  if ((memcmp(&d, &wd, sizeof d) != 0 || memcmp(&u, &wu, sizeof u) != 0) && bad++ < 10)
    AA_FAIL("toracle_round steps of %a: down %a up %a, nextafter %a %a", x, d, u, wd, wu);
}

int main(void) {
  mpfr_t m;
  mpfr_init2(m, 64);
  for (uint32_t p = 0; p < 0x7f80u; p++) { /* every finite positive BF16 pattern */
    double v = (double)aa_hd_u2f(p << 16), w = (double)aa_hd_u2f((p + 1) << 16), mid = 0.5 * (v + w);
    const double pts[] = {v, mid, nextafter(mid, 0), nextafter(mid, INFINITY), nextafter(v, 0), nextafter(v, 1e300)};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
      check_round(pts[i], m);
      check_round(-pts[i], m);
    }
  }
  for (int i = 0; i < (1 << 20); i++) {
    uint64_t b = next64() & ~((uint64_t)0x7ff << 52);
    b |= (next64() % 2047) << 52; /* every exponent field but Inf/NaN's */
    double x;
    memcpy(&x, &b, sizeof x);
    check_round(x, m);
    check_steps(x);
  }
  const double edges[] = {0.0, 0x1p-1074, DBL_MIN, 1.0, DBL_MAX, 0x1p-126, 0x1p-133};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    check_steps(edges[i]);
    check_steps(-edges[i]);
    check_round(edges[i], m);
    check_round(-edges[i], m);
  }
  AA_CHECK(bad == 0, "toracle_round: %zu mismatches", bad);
  mpfr_clear(m);
  mpfr_free_cache();
  return aa_test_finish("toracle_round");
}
