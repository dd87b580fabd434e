/* attnacc: error measures of an output tensor against the oracle, and the pass rules. */
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
  size_t count;    /* elements compared */
  size_t nan, inf; /* non-finite elements of the tested tensor */
  double rel_l2;   /* ||a - b||_2 / ||b||_2 over finite elements (b = oracle) */
  double max_abs;  /* max |a - b| */
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

/* Compare got with the oracle output ref. ulp_fmt selects which correctly
   rounded oracle tensor (FP32 or BF16) ULP distances are taken against. */
int aa_metrics_compare(aa_metrics_t *m, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt,
                       double atol, double rtol, aa_error_t *err);
/* Apply the flash-attention rule with the naive reference's metrics. */
void aa_metrics_fa_rule(aa_metrics_t *m, const aa_metrics_t *naive, double factor);

#ifdef __cplusplus
}
#endif
#endif
