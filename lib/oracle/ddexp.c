/* attnacc: double-double exponential with a proven relative error bound, and its constants computed in MPFR. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <mpfr.h>
#include <string.h>

#include "oracle-impl.h"

/* Round an MPFR number to a double-double (hi = RN(x), lo = RN(x - hi));
   relative error <= 2^-106 (1 + 2^-52). */
static void mp_to_dd(double *hi, double *lo, mpfr_t x, mpfr_t tmp) {
  *hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(tmp, x, *hi, MPFR_RNDN);
  *lo = mpfr_get_d(tmp, MPFR_RNDN);
}

void aa_oracle_exp_tab_init(aa_or_exp_tab_t *tab) {
  mpfr_t x, t, l;
  mpfr_inits2(320, x, t, l, (mpfr_ptr)0);
  for (int j = 0; j < 256; j++) {
    mpfr_set_si(x, j, MPFR_RNDN);
    mpfr_div_2ui(x, x, 8, MPFR_RNDN);
    mpfr_exp2(x, x, MPFR_RNDN);
    mp_to_dd(&tab->th[j], &tab->tl[j], x, t);
  }
  mpfr_const_log2(l, MPFR_RNDN);
  mpfr_div_2ui(l, l, 8, MPFR_RNDN); /* ln2/256 to 320 bits */
  mpfr_set_prec(x, 32);
  mpfr_set(x, l, MPFR_RNDN);
  tab->c1 = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub(t, l, x, MPFR_RNDN);
  tab->c2 = mpfr_get_d(t, MPFR_RNDN);
  mpfr_sub_d(t, t, tab->c2, MPFR_RNDN);
  tab->c3 = mpfr_get_d(t, MPFR_RNDN);
  mpfr_set_prec(x, 320);
  mpfr_ui_div(x, 1, l, MPFR_RNDN);
  tab->inv = mpfr_get_d(x, MPFR_RNDN);
  mpfr_set_ui(x, 1, MPFR_RNDN);
  mpfr_div_ui(x, x, 6, MPFR_RNDN);
  mp_to_dd(&tab->c6h, &tab->c6l, x, t);
  mpfr_set_ui(x, 1, MPFR_RNDN);
  mpfr_div_ui(x, x, 24, MPFR_RNDN);
  mp_to_dd(&tab->c24h, &tab->c24l, x, t);
  mpfr_clears(x, t, l, (mpfr_ptr)0);
}

/* exp(x), x = xh + xl a double-double with |xl| <= ulp(xh)/2 and xh <= 708.
   Error analysis (u = 2^-53):
   - N = nearest integer to x 256/ln2, |N| < 2^19; j = N mod 256, k = N div 256;
     x = k ln2 + j ln2/256 + r, exp(x) = 2^k 2^(j/256) exp(r).
   - r: c1 has 32 bits so N c1 is exact; xh - N c1 is exact (Sterbenz, since
     |xh - N c1| <= |N c1|/2 when N != 0); N c2 is split exactly by TwoProduct;
     the remaining additions round terms below 2^-62 in magnitude, so
     |r - (x - N ln2/256)| <= 2^-112 + 2^19 |c1+c2+c3 - ln2/256| <= 2^-111,
     plus the term xl folded in by TwoSum (exact); |r| <= 0.00136.
   - exp(r) = 1 + r + r^2/2 + r^3/6 + r^4/24 + r^5 c5(r), c5 a degree-4
     Taylor tail in plain double: truncation <= |r|^10/10! * 1.01 < 2^-117;
     c5 is computed with relative error < 2^-50, contributing < 2^-50 |r|^5/120
     < 2^-104; the four dd Horner steps (each one dd*dd product, rel <= 5u^2,
     and one dd+dd sum without cancellation since |r a| < 0.002 a, rel <= 3u^2)
     and the table entry (rel <= 1.01 u^2) and the final product (5u^2)
     give at most 4*8 u^2 + 6 u^2 = 38 u^2 < 2^-100.7.
   - An absolute error d in r is a relative error d(1+d) of the result.
   Total: relative error <= 2^-100 + 2^-108 |x| (the |x| term is slack for
   the rounding of xl-sized terms), for results above 2^-1020 (normal low
   words aside: below exp(-707) the low word may be subnormal, absolute
   error <= 2^-1074 per operation, covered by AA_OR_TINY in the callers).
   xh < -707 returns 0 (the exact value is below 2^-1019).
   The element function (aa_or_dd_exp1, ddcore.h, shared with the GPU) has
   no control flow so that the loop vectorises (about 5x faster than the
   scalar loop with AVX-512); the oracle is compiled with -ffp-contract=off
   (local.mk), so that no clone fuses a product and a sum and every clone,
   and the GPU, gives the same bits (a fusion would only remove a rounding
   from the analysis above). Vector body and scalar remainder give the
   same bits, so results do not depend on how the callers block the calls.
   flatten: GCC 12 does not inline the element function into the clones on its own; called out of line, as with
   an int table index (ddcore.h), the loop ran scalar with fma a libm call: 26% of the tiled kernel's time (perf,
   n = 2048, one thread). clang 14 refuses flatten beside target_clones, so it is left to clang's own inlining there
   (the bits are the same either way). */
#if defined(__clang__)
#define AA_DD_EXP_FLATTEN
#else
#define AA_DD_EXP_FLATTEN flatten,
#endif
__attribute__((AA_DD_EXP_FLATTEN target_clones("avx512f", "arch=x86-64-v3", "default"))) static void
dd_exp_clones(double *restrict yh, double *restrict yl, const double *restrict xh, const double *restrict xl,
              size_t n, const aa_or_exp_tab_t *restrict tab) {
#pragma omp simd
  for (size_t i = 0; i < n; i++)
    aa_or_dd_exp1(&yh[i], &yl[i], xh[i], xl[i], tab);
}

/* The exported name calls the clones: clang 14 names the dispatcher of an
   external target_clones function so that calls from other files miss it. */
void aa_oracle_dd_exp(double *restrict yh, double *restrict yl, const double *restrict xh, const double *restrict xl,
                      size_t n, const aa_or_exp_tab_t *restrict tab) {
  dd_exp_clones(yh, yl, xh, xl, n, tab);
}
