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
   The loop has no control flow so that it vectorises (about 5x faster than
   the scalar loop with AVX-512); the compiler may contract a product and a
   sum into an FMA (GNU C default -ffp-contract=fast), which only removes a
   rounding from the analysis above, and never inside TwoProduct/TwoSum (the
   product there has a second use). Vector body and scalar remainder give the
   same bits, so results do not depend on how the callers block the calls. */
__attribute__((target_clones("avx512f", "arch=x86-64-v3", "default"))) static void
dd_exp_clones(double *restrict yh, double *restrict yl, const double *restrict xh, const double *restrict xl,
              size_t n, const aa_or_exp_tab_t *restrict tab) {
  const double c1 = tab->c1, c2 = tab->c2, c3 = tab->c3, inv = tab->inv;
  const double c6h = tab->c6h, c6l = tab->c6l, c24h = tab->c24h, c24l = tab->c24l;
  const double *th = tab->th, *tl = tab->tl;
#pragma omp simd
  for (size_t i = 0; i < n; i++) {
    double x = xh[i], xlo = xl[i];
    int under = !(x >= -707.0);
    x = under ? 0.0 : x;
    xlo = under ? 0.0 : xlo;
    x = x > 708.0 ? 708.0 : x; /* never reached by the callers (arguments <= 0 up to rounding) */
    /* N = nearest integer to x 256/ln2 through the 1.5 * 2^52 shifter (|x inv| < 2^18, round to nearest
       in the default environment); its low bits are N in two's complement */
    double shf = x * inv + 0x1.8p52, nd = shf - 0x1.8p52;
    uint64_t nb;
    memcpy(&nb, &shf, sizeof nb);
    int64_t N = (int64_t)(nb - UINT64_C(0x4338000000000000));
    int jj = (int)(N & 255);
    int64_t kk = N >> 8;
    double t = x - nd * c1; /* exact */
    double ph = nd * c2, pl = fma(nd, c2, -ph);
    /* (a, b) = t - ph exactly */
    double a = t - ph, bb = a - t, b = (t - (a - bb)) + (-ph - bb);
    /* (a2, b2) = a + xlo exactly */
    double a2 = a + xlo, bb2 = a2 - a, b2 = (a - (a2 - bb2)) + (xlo - bb2);
    double rl0 = ((b + b2) - pl) - nd * c3;
    double rh = a2 + rl0, rl = rl0 - (rh - a2);
    /* c5(r) = 1/120 + r/720 + r^2/5040 + r^3/40320 + r^4/362880 */
    double c5 = 1.0 / 120 + rh * (1.0 / 720 + rh * (1.0 / 5040 + rh * (1.0 / 40320 + rh * (1.0 / 362880))));
    /* a4 = 1/24 + r c5 (the product with rl is below 2^-120) */
    double p = rh * c5, pe = fma(rh, c5, -p);
    double sh = c24h + p, sb = sh - c24h, sl = ((c24h - (sh - sb)) + (p - sb)) + (c24l + pe);
    double ah = sh + sl, al = sl - (ah - sh);
    /* a3 = 1/6 + r a4, a2 = 1/2 + r a3, a1 = 1 + r a2, a0 = 1 + r a1 */
#define AA_OR_HORNER_STEP(CH, CL)                                                                                    \
  do {                                                                                                               \
    double m_ = rh * ah, me_ = fma(rh, ah, -m_);                                                                     \
    me_ += rh * al + rl * ah;                                                                                        \
    double mh_ = m_ + me_, ml_ = me_ - (mh_ - m_);                                                                   \
    double u_ = (CH) + mh_, ub_ = u_ - (CH), ul_ = (((CH) - (u_ - ub_)) + (mh_ - ub_)) + ((CL) + ml_);               \
    ah = u_ + ul_;                                                                                                   \
    al = ul_ - (ah - u_);                                                                                            \
  } while (0)
    AA_OR_HORNER_STEP(c6h, c6l);
    AA_OR_HORNER_STEP(0.5, 0.0);
    AA_OR_HORNER_STEP(1.0, 0.0);
    AA_OR_HORNER_STEP(1.0, 0.0);
#undef AA_OR_HORNER_STEP
    /* times 2^(j/256) */
    double tj = th[jj], tjl = tl[jj];
    double m = tj * ah, me = fma(tj, ah, -m);
    me += tj * al + tjl * ah;
    double mh = m + me, ml = me - (mh - m);
    /* times 2^k, k >= -1021 here, so 2^k is a normal double */
    /* the flush to 0 for xh < -707 goes through the scale (2^k, or +0 whose
       bits are 0) rather than a select after the table loads: with a select
       GCC sinks the loads under a mask and gives up vectorising (a masked
       gather); the + 0.0 turns the -0 of a negative ml times +0 into +0 */
    uint64_t bits = under ? 0 : (uint64_t)(kk + 1023) << 52;
    double sc;
    memcpy(&sc, &bits, sizeof sc);
    yh[i] = mh * sc;
    yl[i] = ml * sc + 0.0;
  }
}

/* The exported name calls the clones: clang 14 names the dispatcher of an
   external target_clones function so that calls from other files miss it. */
void aa_oracle_dd_exp(double *restrict yh, double *restrict yl, const double *restrict xh, const double *restrict xl,
                      size_t n, const aa_or_exp_tab_t *restrict tab) {
  dd_exp_clones(yh, yl, xh, xl, n, tab);
}
