/* attnacc: the oracle of a varlen batch: each sequence's exact attention computed on its own and packed. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <string.h>

#include "oracle-impl.h"

static int out_alloc_like(aa_oracle_out_t *o, const aa_tensor_t *like, size_t rows) {
  size_t shape[3] = {like->shape[0], rows, like->shape[2]};
  int st;
  if ((st = aa_tensor_alloc(&o->val, like->ndim, shape, AA_FMT_FP64)) != AA_OK) return st;
  if ((st = aa_tensor_alloc(&o->fp32, like->ndim, shape, AA_FMT_FP32)) != AA_OK) return st;
  return aa_tensor_alloc(&o->bf16, like->ndim, shape, AA_FMT_BF16);
}

/* One sequence's output into rows r0.. of the packed one; the packed bound
   is the largest of the sequences' (each element keeps its own). */
static void out_put(aa_oracle_out_t *dst, const aa_oracle_out_t *src, size_t r0) {
  aa_tensor_put_rows(&dst->val, &src->val, r0);
  aa_tensor_put_rows(&dst->fp32, &src->fp32, r0);
  aa_tensor_put_rows(&dst->bf16, &src->bf16, r0);
  if (src->relerr_bound > dst->relerr_bound) dst->relerr_bound = src->relerr_bound;
}

/* Sequence b: slice the inputs, run the oracle, pack its outputs. */
static int run_seq(aa_oracle_result_t *out, const aa_problem_t *pb, size_t b, const aa_tensor_t *const in[4],
                   const aa_oracle_opts_t *opts, int kernel, aa_error_t *err) {
  aa_problem_t seq;
  aa_tensor_t s[4];
  aa_oracle_result_t r;
  size_t q0, k0;
  int st;
  aa_problem_varlen_seq(&seq, pb, b, &q0, &k0);
  if ((st = aa_tensor_rows_qkvd(s, in, q0, seq.n_q, k0, seq.n_k)) != AA_OK)
    st = aa_error_set(err, st, "oracle: sequence %zu: cannot slice the inputs", b);
  if (st == AA_OK && (st = aa_oracle_run_kernel(&r, &seq, &s[0], &s[1], &s[2], &s[3], opts, kernel, err)) == AA_OK) {
    out_put(&out->o, &r.o, q0);
    out_put(&out->lse, &r.lse, q0);
    out_put(&out->dq, &r.dq, q0);
    out_put(&out->dk, &r.dk, k0);
    out_put(&out->dv, &r.dv, k0);
    out->n_recomputed += r.n_recomputed;
    out->n_uncertified += r.n_uncertified;
    aa_oracle_result_free(&r);
  }
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&s[i]);
  return st;
}

int aa__oracle_run_varlen(aa_oracle_result_t *out, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                          const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, int kernel,
                          aa_error_t *err) {
  const aa_tensor_t *in[4] = {q, k, v, dO};
  size_t lse_shape[2] = {pb->heads, pb->n_q};
  aa_tensor_t lse_like = {0};
  int st;
  memset(out, 0, sizeof *out);
  lse_like.ndim = 2;
  memcpy(lse_like.shape, lse_shape, sizeof lse_shape);
  lse_like.shape[2] = 1;
  if (out_alloc_like(&out->o, q, pb->n_q) || out_alloc_like(&out->lse, &lse_like, pb->n_q) ||
      out_alloc_like(&out->dq, q, pb->n_q) || out_alloc_like(&out->dk, k, pb->n_k) ||
      out_alloc_like(&out->dv, k, pb->n_k)) {
    aa_oracle_result_free(out);
    return aa_error_set(err, AA_ENOMEM, "oracle: cannot allocate the packed varlen outputs");
  }
  for (size_t b = 0; b < pb->varlen_batch; b++)
    if ((st = run_seq(out, pb, b, in, opts, kernel, err)) != AA_OK) {
      aa_oracle_result_free(out);
      return st;
    }
  return AA_OK;
}
