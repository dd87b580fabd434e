/* attnacc: correct rounding of oracle values to FP32 and BF16 (RNE, subnormals, overflow to Inf), independent of
 * lib/fmt. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <mpfr.h>

#include "oracle-impl.h"

/* MPFR emulation of the target format ([mpfr]): round to the
   target precision in the wide default exponent range, then let
   mpfr_check_range and mpfr_subnormalize redo the rounding in the narrow
   range with the ternary value, which avoids double rounding.
   binary32: p = 24, emin -148, emax 128; bfloat16: p = 8, emin -132, emax 128
   (MPFR exponents: x = m 2^e with 1/2 <= m < 1). */
double aa_oracle_round_mpfr(mpfr_srcptr x, int bf16) {
  if (mpfr_nan_p(x)) return NAN;
  if (mpfr_inf_p(x)) return mpfr_sgn(x) > 0 ? INFINITY : -INFINITY;
  if (mpfr_zero_p(x)) return 0.0;
  /* Far outside the target range the answer is known, and keeping the
     intermediate inside the double range makes mpfr_get_d exact below. */
  if (mpfr_get_exp(x) > 200) return mpfr_sgn(x) > 0 ? INFINITY : -INFINITY;
  if (mpfr_get_exp(x) < -200) return mpfr_sgn(x) > 0 ? 0.0 : -0.0;
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_t t;
  mpfr_init2(t, bf16 ? 8 : 24);
  int inex = mpfr_set(t, x, MPFR_RNDN);
  mpfr_set_emin(bf16 ? -132 : -148);
  mpfr_set_emax(128);
  inex = mpfr_check_range(t, inex, MPFR_RNDN);
  mpfr_subnormalize(t, inex, MPFR_RNDN);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  double r = mpfr_get_d(t, MPFR_RNDN); /* exact: t has <= 24 bits and a small exponent */
  mpfr_clear(t);
  return r;
}

/* From a double: aa_or_round_d (ddcore.h, shared with the GPU). */
double aa_oracle_round_d(double x, int bf16) {
  return aa_or_round_d(x, bf16);
}
