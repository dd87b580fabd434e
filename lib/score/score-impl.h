/* attnacc: internal declarations of the score module: the table of robust measures (internal, not installed). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_SCORE_IMPL_H
#define AA_SCORE_IMPL_H

#include <stddef.h>

#include "score.h"

/* One robust measure: a double field of the same name in aa_score_out_t
   and aa_flat_out_t, and whether the JSON document lists it under "robust"
   (the table's order is the document's). */
typedef struct {
  const char *name;
  size_t score_offset, flat_offset;
  int robust;
} aa_score_measure_t;
extern const aa_score_measure_t aa_score_measures[];
extern const size_t aa_score_nmeasures;

/* Measure k of s or f. */
#define AA_SCORE_MEASURE(s, k) (*(const double *)((const char *)(s) + aa_score_measures[k].score_offset))
#define AA_FLAT_MEASURE(f, k) (*(double *)((char *)(f) + aa_score_measures[k].flat_offset))

/* The oracle of a flat call (lib/score/kept.c): kept's result when given (*borrowed = 1, not to be freed; AA_EINVAL
   unless it was computed for the same problem, input values and oracle settings), else aa_oracle_cached_run through
   cache_dir (NULL: no cache). */
int aa_score_oracle_get(aa_oracle_result_t *r, int *borrowed, const aa_problem_t *pb, const aa_tensor_t in[4],
                        const aa_oracle_opts_t *oo, const char *cache_dir, const aa_flat_kept_t *kept,
                        aa_error_t *err);
/* Move r (zeroed after) into a new kept result for the problem and inputs it was computed for. */
int aa_score_oracle_keep(aa_flat_kept_t **kept, aa_oracle_result_t *r, const aa_problem_t *pb,
                         const aa_tensor_t in[4], const aa_oracle_opts_t *oo, aa_error_t *err);

#endif
