/* attnacc: the table of robust measures, one row each, that the JSON of run and score, the flat ABI and the Python
 * package read. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "score/score-impl.h"

/* A measure is a double field of this name in both aa_score_out_t (computed by aa_score_compare) and
   aa_flat_out_t; robust: listed under the document's "robust", in this order. */
#define MEASURE(f, robust)                                                                                           \
  { #f, offsetof(aa_score_out_t, f), offsetof(aa_flat_out_t, f), robust }

const aa_score_measure_t aa_score_measures[] = {
    MEASURE(ulp_median, 1),
    MEASURE(ulp_p99, 1),
    MEASURE(ulp_max, 1),
    MEASURE(ulp_normwise, 1),
    MEASURE(max_rel, 1),
    MEASURE(rel_floor, 1),
    MEASURE(max_rel_any, 1),
    MEASURE(ulp_mean, 0),
    MEASURE(oracle_relerr_bound, 0),
    /* the systematic-error statistics (score.h), listed under "systematic" */
    MEASURE(ls_scale, 0),
    MEASURE(ls_offset, 0),
    MEASURE(scale_sigma, 0),
    MEASURE(offset_sigma, 0),
    MEASURE(err_corr, 0),
    MEASURE(abs_q99, 0),
    MEASURE(row_err_max, 0),
    MEASURE(head_rel_l2_max, 0),
};
const size_t aa_score_nmeasures = sizeof aa_score_measures / sizeof aa_score_measures[0];

const char *aa_abi_measure(size_t i, int *robust) {
  if (i >= aa_score_nmeasures) return NULL;
  if (robust != NULL) *robust = aa_score_measures[i].robust;
  return aa_score_measures[i].name;
}
