/* attnacc: aa_oracle_run through the on-disk oracle cache. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "internal.h"

/* A hit must also fit the problem: a key collision or a foreign file put
   under the key's name would show as wrong shapes, and is recomputed. */
static int shapes_fit(const aa_oracle_result_t *r, const aa_problem_t *pb) {
  const aa_tensor_t *t[3] = {&r->o.val, &r->dq.val, &r->dk.val};
  size_t want[3][3] = {{pb->heads, pb->n_q, pb->d}, {pb->heads, pb->n_q, pb->d}, {pb->kv_heads, pb->n_k, pb->d}};
  for (int i = 0; i < 3; i++)
    if (t[i]->ndim != 3 || t[i]->shape[0] != want[i][0] || t[i]->shape[1] != want[i][1] ||
        t[i]->shape[2] != want[i][2])
      return 0;
  return r->dv.val.shape[0] == pb->kv_heads && r->dv.val.shape[1] == pb->n_k && r->lse.val.shape[0] == pb->heads;
}

int aa_oracle_cached_run(aa_oracle_result_t *out, int *hit, const char *dir, const aa_problem_t *pb,
                         const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO,
                         const aa_oracle_opts_t *opts, aa_error_t *err) {
  aa_hash128_t key;
  if (hit != NULL) *hit = 0;
  if (dir != NULL) {
    int st = aa_oracle_cache_key(&key, pb, q, k, v, dO, opts, err);
    if (st) return st;
    if (aa_oracle_cache_get(out, dir, &key, NULL) == AA_OK) {
      if (shapes_fit(out, pb)) {
        if (hit != NULL) *hit = 1;
        return AA_OK;
      }
      aa_oracle_result_free(out);
    }
  }
  int st = aa_oracle_run(out, pb, q, k, v, dO, opts, err);
  if (st != AA_OK || dir == NULL) return st;
  /* The cache is best effort: a failed put (disk full) only costs a
     recomputation next time, so the fresh result is returned all the same. */
  aa_oracle_cache_put(dir, &key, out, NULL);
  return AA_OK;
}
