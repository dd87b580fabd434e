/* attnacc: the oracle of the flat entry points: computed, read from the on-disk cache, or a kept result reused. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "score/score-impl.h"
#include "sweep.h"

struct aa_flat_kept_s {
  aa_hash128_t key;
  aa_oracle_result_t res;
};

/* The cache's key (lib/sweep.h) of the problem, the input values and the oracle settings, blind to the inputs'
   format tags: the oracle reads values exactly whatever their tag, and a caller may tag the same values with the
   kernel's format in one call and the storage dtype in another. */
static int value_key(aa_hash128_t *key, const aa_problem_t *pb, const aa_tensor_t in[4], const aa_oracle_opts_t *oo,
                     aa_error_t *err) {
  aa_tensor_t t[4];
  for (int i = 0; i < 4; i++) {
    t[i] = in[i];
    t[i].fmt = AA_FMT_FP64;
  }
  return aa_oracle_cache_key(key, pb, &t[0], &t[1], &t[2], &t[3], oo, err);
}

int aa_score_oracle_get(aa_oracle_result_t *r, int *borrowed, const aa_problem_t *pb, const aa_tensor_t in[4],
                        const aa_oracle_opts_t *oo, const char *cache_dir, const aa_flat_kept_t *kept,
                        aa_error_t *err) {
  aa_hash128_t key;
  int rc;
  *borrowed = 0;
  if (kept == NULL) return aa_oracle_cached_run(r, NULL, cache_dir, pb, &in[0], &in[1], &in[2], &in[3], oo, err);
  if ((rc = value_key(&key, pb, in, oo, err)) != AA_OK) return rc;
  if (key.hi != kept->key.hi || key.lo != kept->key.lo)
    return aa_error_set(err, AA_EINVAL,
                        "the oracle given was computed for other inputs, another problem or other oracle settings "
                        "(path, precision, target)");
  *r = kept->res;
  *borrowed = 1;
  return AA_OK;
}

int aa_score_oracle_keep(aa_flat_kept_t **kept, aa_oracle_result_t *r, const aa_problem_t *pb,
                         const aa_tensor_t in[4], const aa_oracle_opts_t *oo, aa_error_t *err) {
  aa_flat_kept_t *k = malloc(sizeof *k);
  int rc;
  if (k == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  if ((rc = value_key(&k->key, pb, in, oo, err)) != AA_OK) {
    free(k);
    return rc;
  }
  k->res = *r;
  memset(r, 0, sizeof *r);
  *kept = k;
  return AA_OK;
}

void aa_flat_kept_free(aa_flat_kept_t *kept) {
  if (kept == NULL) return;
  aa_oracle_result_free(&kept->res);
  free(kept);
}
