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

#endif
