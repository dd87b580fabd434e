/* attnacc: emulation of a varlen batch: each sequence run through the recipe on its own and the outputs packed. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <string.h>

#include "attn-impl.h"

/* The packed outputs, in the formats the first sequence's run chose. */
static int alloc_like(aa_tensor_t *dst, const aa_tensor_t *like, size_t heads, size_t rows) {
  size_t shape[3] = {heads, rows, like->shape[2]};
  if (like->data == NULL) return AA_OK; /* not produced (no dO) */
  return aa_tensor_alloc(dst, like->ndim, shape, like->fmt);
}

static int alloc_packed(aa_attn_result_t *out, const aa_attn_result_t *first, const aa_problem_t *pb) {
  int st = alloc_like(&out->o, &first->o, pb->heads, pb->n_q);
  if (st == AA_OK) st = alloc_like(&out->lse, &first->lse, pb->heads, pb->n_q);
  if (st == AA_OK) st = alloc_like(&out->dq, &first->dq, pb->heads, pb->n_q);
  if (st == AA_OK) st = alloc_like(&out->dk, &first->dk, pb->kv_heads, pb->n_k);
  if (st == AA_OK) st = alloc_like(&out->dv, &first->dv, pb->kv_heads, pb->n_k);
  return st;
}

/* Sequence b's outputs into the packed rows, its counters added. */
static void put_seq(aa_attn_result_t *out, const aa_attn_result_t *r, size_t q0, size_t k0) {
  aa_tensor_put_rows(&out->o, &r->o, q0);
  aa_tensor_put_rows(&out->lse, &r->lse, q0);
  if (r->dq.data != NULL) {
    aa_tensor_put_rows(&out->dq, &r->dq, q0);
    aa_tensor_put_rows(&out->dk, &r->dk, k0);
    aa_tensor_put_rows(&out->dv, &r->dv, k0);
  }
  out->tiles_skipped += r->tiles_skipped;
  aa_reduce_stats_add(&out->dq_reduce, &r->dq_reduce);
  out->tiles_flagged += r->tiles_flagged;
  out->rows_recovered += r->rows_recovered;
  out->contractions_skipped += r->contractions_skipped;
  out->p_cast += r->p_cast;
  out->p_over += r->p_over;
  out->p_under += r->p_under;
  if (r->p_max > out->p_max) out->p_max = r->p_max;
}

/* Sequence b: slice the inputs, run the recipe, pack. */
static int run_seq(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, size_t b,
                   const aa_tensor_t *const in[4], aa_error_t *err) {
  aa_problem_t seq;
  aa_tensor_t s[4];
  aa_attn_result_t res;
  size_t q0, k0;
  int st;
  aa_problem_varlen_seq(&seq, pb, b, &q0, &k0);
  if ((st = aa_tensor_rows_qkvd(s, in, q0, seq.n_q, k0, seq.n_k)) != AA_OK)
    st = aa_error_set(err, st, "attn_run: sequence %zu: cannot slice the inputs", b);
  if (st == AA_OK &&
      (st = aa_attn_run(&res, &seq, r, &s[0], &s[1], &s[2], in[3] != NULL ? &s[3] : NULL, err)) == AA_OK) {
    if (b == 0 && (st = alloc_packed(out, &res, pb)) != AA_OK)
      st = aa_error_set(err, st, "attn_run: cannot allocate the packed varlen outputs");
    if (st == AA_OK) put_seq(out, &res, q0, k0);
    aa_attn_result_free(&res);
  }
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&s[i]);
  return st;
}

int aa__attn_run_varlen(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                        const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_error_t *err) {
  const aa_tensor_t *in[4] = {q, k, v, dO};
  int st;
  memset(out, 0, sizeof *out);
  if (r->dropout.scheme != AA_DROPOUT_NONE)
    return aa_error_set(err, AA_EINVAL,
                        "attn_run: recipe '%s' redraws a dropout mask, which a varlen batch does not support",
                        r->name);
  for (size_t b = 0; b < pb->varlen_batch; b++)
    if ((st = run_seq(out, pb, r, b, in, err)) != AA_OK) {
      aa_attn_result_free(out);
      return st;
    }
  return AA_OK;
}
