/* attnacc: error measures of an output tensor against the oracle, and the pass rules. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_METRICS_H
#define AA_METRICS_H

#include <stddef.h>

#include "common.h"
#include "fmt.h"
#include "oracle.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  size_t count;             /* elements compared */
  size_t nan, inf;          /* non-finite elements of the tested tensor */
  double rel_l2;            /* ||a - b||_2 / ||b||_2 over finite elements (b = oracle) */
  double max_abs;           /* max |a - b| */
  double max_ulp, mean_ulp; /* distance in ULPs of ulp_fmt to the correctly rounded oracle value */
  /* Rule 1: |a - b| <= atol + rtol |b| for every element. */
  double atol, rtol;
  size_t fail_count;
  int pass;
  /* Rule 2 (flash-attention tests): max_abs <= factor * max_abs of a naive
     same-precision reference; filled by aa_metrics_fa_rule. */
  double fa_factor, fa_ref_max_abs, fa_ratio;
  int fa_pass;
} aa_metrics_t;

/* Defaults of rule 1 (the flash-attention/PyTorch style allclose rule). */
#define AA_METRICS_ATOL 0.01
#define AA_METRICS_RTOL 0.01
/* Factors of rule 2 ([fa2] tests/test_flash_attn.py): 2 for forward outputs, 3 for gradients. */
#define AA_METRICS_FA_FACTOR_FWD 2.0
#define AA_METRICS_FA_FACTOR_BWD 3.0

/* Compare got with the oracle output ref. ulp_fmt selects which correctly
   rounded oracle tensor (FP32 or BF16) ULP distances are taken against.
   Non-finite elements of got (NaN, +-Inf) are counted in nan/inf, left out
   of rel_l2, max_abs and the ULP statistics (which describe the finite
   elements only), and each counts as a failure of rule 1, so pass = 0 and
   fa_pass = 0 whenever got holds any NaN or Inf. When no element is finite
   the statistics are NaN. rel_l2 is 0 when both norms are 0 and +Inf when
   only ||b|| is 0. Norms are formed with power-of-two scaling and a
   compensated long double sum, so the metric adds no error of its own beyond
   the rounding of each difference a - b to double (relative 2^-53).
   fa_* are reset (fa_factor 0, fa_ratio NaN, fa_pass 0) until
   aa_metrics_fa_rule is applied. AA_ESHAPE when the element counts differ,
   AA_EINVAL for ulp_fmt other than BF16/FP32, a missing oracle tensor or a
   negative tolerance. */
int aa_metrics_compare(aa_metrics_t *m, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt,
                       double atol, double rtol, aa_error_t *err);
/* aa_metrics_compare that also stores the ULP distance of each element taking part in the statistics (got and
   the oracle value finite), in element order, into ulps (room for every element; NULL: none): the robust measures'
   order statistics read them rather than computing each ordinal again. */
int aa_metrics_compare_ulps(aa_metrics_t *m, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt,
                            double atol, double rtol, double *ulps, aa_error_t *err);
/* Apply the flash-attention rule with the naive reference's metrics:
   fa_ref_max_abs = naive->max_abs (NaN when the naive output has a NaN,
   +Inf when it has an Inf), fa_ratio = max_abs / fa_ref_max_abs (0/0 is 0),
   fa_pass = no NaN/Inf in m and max_abs <= factor * fa_ref_max_abs. */
void aa_metrics_fa_rule(aa_metrics_t *m, const aa_metrics_t *naive, double factor);

/* Signed ordinal of x on the grid of fmt (BF16, FP16 or FP32): for values
   of the format it is the bit pattern read as sign-magnitude integer, with
   +0 and -0 both 0, so ord(b) - ord(a) counts the representable values
   between them and is monotone across zero; +-Inf map one past the largest
   finite value. Between grid points it interpolates linearly (a value that
   is not in fmt gets a fractional ordinal); beyond the largest finite value
   it saturates at Inf's ordinal. NaN gives NaN. */
double aa_metrics_ordinal(double x, aa_fmt_t fmt);

#ifdef __cplusplus
}
#endif
#endif
