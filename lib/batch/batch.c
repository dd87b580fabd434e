/* attnacc: FA2's split decision for a whole padded batch, and one sequence's forward under it. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>
#include <stdlib.h>

#include "batch.h"

static int check_batch(const aa_problem_t *pb, const aa_recipe_t *r, const aa_batch_t *b, aa_error_t *err) {
  if (b == NULL || b->batch == 0) return aa_error_set(err, AA_EINVAL, "batch: the batch size must be at least 1");
  if (pb->varlen_batch > 0)
    return aa_error_set(err, AA_EINVAL,
                        "batch: a varlen problem is not a padded batch (FA2's varlen forward splits only for decode; "
                        "not modelled)");
  if ((r->tiling_fa2 || r->fwd_split_sms > 0) && b->num_sms == 0 && r->fwd_split_sms == 0)
    return aa_error_set(err, AA_EINVAL, "batch: recipe '%s' needs an SM count (fwd.split_sms or num_sms)", r->name);
  return aa_problem_check(pb, err);
}

/* The decision proper, for a recipe without conditional keys. */
static int decide_resolved(aa_batch_decision_t *out, const aa_problem_t *pb, const aa_recipe_t *r,
                           const aa_batch_t *b, aa_error_t *err) {
  int st;
  int dropout = pb->keep != NULL || r->dropout.scheme != AA_DROPOUT_NONE;
  size_t sms = b->num_sms ? b->num_sms : r->fwd_split_sms;
  *out = (aa_batch_decision_t){0};
  out->batch_dependent = (r->tiling_fa2 || r->fwd_split_sms > 0) && r->fwd_split_keys == 0;
  if (out->batch_dependent)
    out->ngroups_swapped = aa_fa2_seen(&out->heads_seen, &out->n_q_seen, pb, dropout);
  else
    out->heads_seen = pb->heads, out->n_q_seen = pb->n_q;
  if (aa_size_mul(&out->units, b->batch, out->heads_seen) != AA_OK ||
      aa_size_mul(&out->units, out->units, (out->n_q_seen + 63) / 64) != AA_OK || out->units > INT32_MAX)
    return aa_error_set(err, AA_EINVAL, "batch: %zu x %zu heads x %zu rows overflows FA2's int work units", b->batch,
                        out->heads_seen, out->n_q_seen);
  out->sms = 2 * sms;
  out->fwd_tile_q = r->fwd_tile_q, out->fwd_tile_k = r->fwd_tile_k;
  out->bwd_tile_q = r->bwd_tile_q, out->bwd_tile_k = r->bwd_tile_k;
  out->num_splits = r->fwd_splits > 1 ? r->fwd_splits : 1;
  if (r->fwd_split_keys > 0) { /* a fixed split size: the count follows n_k, the tiles are the split kernel's */
    out->num_splits = (pb->n_k + r->fwd_split_keys - 1) / r->fwd_split_keys;
    if (r->tiling_fa2) {
      aa_fa2_dispatch_t dp;
      if ((st = aa_fa2_dispatch(&dp, out->heads_seen, out->n_q_seen, pb->n_k, pb->d, sms, dropout, err)) != AA_OK)
        return st;
      out->fwd_tile_q = 64, out->fwd_tile_k = aa_fa2_splitkv_block_n(pb->d);
      out->bwd_tile_q = dp.bwd_tile_q, out->bwd_tile_k = dp.bwd_tile_k;
    }
    size_t tk = out->fwd_tile_k ? out->fwd_tile_k : pb->n_k;
    out->n_blocks = (pb->n_k + tk - 1) / tk;
  } else if (r->tiling_fa2) {
    aa_fa2_dispatch_t dp;
    if ((st = aa_fa2_dispatch(&dp, b->batch * out->heads_seen, out->n_q_seen, pb->n_k, pb->d, sms, dropout, err)) !=
        AA_OK)
      return st;
    out->num_splits = dp.num_splits;
    out->fwd_tile_q = dp.fwd_tile_q, out->fwd_tile_k = dp.fwd_tile_k;
    out->bwd_tile_q = dp.bwd_tile_q, out->bwd_tile_k = dp.bwd_tile_k;
    /* set_params_splitkv's block_n (flash_api.cpp:323-335), whichever kernel runs */
    size_t block_n = aa_fa2_splitkv_block_n(pb->d);
    out->n_blocks = (pb->n_k + block_n - 1) / block_n;
  } else if (r->fwd_split_sms > 0) {
    /* the recipe's own key tiles are the blocks (lib/attn/forward_split.c aa_attn_fwd_nsplits) */
    size_t tk = r->fwd_tile_k ? r->fwd_tile_k : pb->n_k;
    out->n_blocks = (pb->n_k + tk - 1) / tk;
    out->num_splits = dropout ? 1 : aa_fa2_num_splits(out->units, out->sms, out->n_blocks, 128);
  }
  return AA_OK;
}

/* r as it applies to pb: itself, or (conditional keys, lib/recipe.h) a
   resolved copy in *owned, which the caller frees. */
static int resolve(const aa_recipe_t **out, aa_recipe_t **owned, const aa_problem_t *pb, const aa_recipe_t *r,
                   aa_error_t *err) {
  *out = r, *owned = NULL;
  if (r->nwhen == 0) return AA_OK;
  if ((*owned = malloc(sizeof **owned)) == NULL) return aa_error_set(err, AA_ENOMEM, "batch: out of memory");
  aa_recipe_case_t c = aa_attn_case(pb);
  *out = *owned;
  return aa_recipe_resolve(*owned, r, &c, err);
}

int aa_batch_decide(aa_batch_decision_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_batch_t *b,
                    aa_error_t *err) {
  int st = check_batch(pb, r, b, err);
  const aa_recipe_t *res;
  aa_recipe_t *owned = NULL;
  if (st == AA_OK && (st = resolve(&res, &owned, pb, r, err)) == AA_OK) st = decide_resolved(out, pb, res, b, err);
  free(owned);
  return st;
}

void aa_batch_recipe(aa_recipe_t *out, const aa_recipe_t *r, const aa_batch_decision_t *dec) {
  *out = *r;
  if (!dec->batch_dependent) return;
  out->tiling_fa2 = 0;
  out->fwd_tile_q = dec->fwd_tile_q;
  out->fwd_tile_k = dec->fwd_tile_k;
  out->fwd_splits = dec->num_splits;
  out->fwd_split_sms = 0;
  out->bwd_tile_q = dec->bwd_tile_q;
  out->bwd_tile_k = dec->bwd_tile_k;
}

int aa_batch_forward(aa_attn_result_t *out, aa_batch_decision_t *dec, const aa_problem_t *pb, const aa_recipe_t *r,
                     const aa_batch_t *b, const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v,
                     aa_error_t *err) {
  const aa_recipe_t *res;
  aa_recipe_t *owned = NULL, *fixed = malloc(sizeof *fixed);
  int st = fixed == NULL ? aa_error_set(err, AA_ENOMEM, "batch: out of memory") : check_batch(pb, r, b, err);
  if (st == AA_OK && (st = resolve(&res, &owned, pb, r, err)) == AA_OK && (st = aa_recipe_check(res, err)) == AA_OK &&
      (st = decide_resolved(dec, pb, res, b, err)) == AA_OK) {
    aa_batch_recipe(fixed, res, dec);
    st = aa_attn_run(out, pb, fixed, q, k, v, NULL, err);
  }
  free(owned);
  free(fixed);
  return st;
}
