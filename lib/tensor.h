/* attnacc: dense row-major tensors of up to three axes, values held as doubles with a format tag. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_TENSOR_H
#define AA_TENSOR_H

#include <stddef.h>

#include "common.h"
#include "fmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values are stored as doubles; fmt says which format they are exactly
   representable in (the oracle reads the exact stored values). Attention
   tensors are [heads, n, d]; LSE-like vectors are [heads, n]. */
typedef struct {
  double *data;
  int ndim;        /* 1..3 */
  size_t shape[3]; /* unused trailing entries are 1 */
  aa_fmt_t fmt;
} aa_tensor_t;

/* Allocate zero-filled; returns AA_ENOMEM on an impossible size. */
int aa_tensor_alloc(aa_tensor_t *t, int ndim, const size_t *shape, aa_fmt_t fmt);
void aa_tensor_free(aa_tensor_t *t); /* safe on a zeroed or freed tensor */
size_t aa_tensor_numel(const aa_tensor_t *t);
/* Round every element into fmt (RNE, subnormals, Inf on overflow) and tag it. */
void aa_tensor_round(aa_tensor_t *t, aa_fmt_t fmt);
/* Rows r0 .. r0 + n - 1 along axis 1 of src ([H, N] or [H, N, d]) into
   dst, allocated as [H, n] or [H, n, d] in src's format (the sequences of a
   varlen batch). AA_ESHAPE when the rows do not exist, AA_ENOMEM. */
int aa_tensor_rows(aa_tensor_t *dst, const aa_tensor_t *src, size_t r0, size_t n);
/* One sequence of a varlen batch from the attention inputs in = {q, k, v, dO}
   (dO may be NULL): rows q0 .. q0 + nq - 1 of q and dO, k0 .. k0 + nk - 1 of
   k and v, into s[0..3] (s[3] left empty without dO). On failure every s[i]
   is freed and the status returned. */
int aa_tensor_rows_qkvd(aa_tensor_t s[4], const aa_tensor_t *const in[4], size_t q0, size_t nq, size_t k0, size_t nk);
/* The reverse: src ([H, n] or [H, n, d]) into rows r0 .. r0 + n - 1 of dst,
   whose other axes match. */
void aa_tensor_put_rows(aa_tensor_t *dst, const aa_tensor_t *src, size_t r0);
/* Count NaN and Inf elements. */
void aa_tensor_count_nonfinite(const aa_tensor_t *t, size_t *nan, size_t *inf);

#ifdef __cplusplus
}
#endif
#endif
