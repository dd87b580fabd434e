/* attnacc: the evaluation's part of the JSON document of run and score (schema version 2,
 * experiments/README-json.md), built with jansson (internal, not installed, as lib/common/json.h). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_SCORE_JSON_H
#define AA_SCORE_JSON_H

#include "common/json.h"
#include "score.h"

/* One output: its count, legacy metrics and fa fields, data format, the
   robust measures and every rule; indices in p's layout. NULL when out of
   memory. */
json_t *aa_eval_json_output(const aa_eval_out_t *o, const aa_eval_place_t *p);
/* One run: variant, recipe, emulation seconds, the recipe's counters and
   every output (the caller appends the verdict when it has one). */
json_t *aa_eval_json_run(const aa_eval_variant_t *v, const aa_eval_place_t *p);

#endif
