/* attnacc: allocation, rounding, non-finite counting and row slices of dense tensors. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

int aa_tensor_alloc(aa_tensor_t *t, int ndim, const size_t *shape, aa_fmt_t fmt) {
  size_t n = 1;
  *t = (aa_tensor_t){0};
  if (ndim < 1 || ndim > 3) return AA_EINVAL;
  t->shape[0] = t->shape[1] = t->shape[2] = 1;
  for (int i = 0; i < ndim; i++) {
    if (aa_size_mul(&n, n, shape[i]) != AA_OK) return AA_ENOMEM;
    t->shape[i] = shape[i];
  }
  if (aa_size_mul(&n, n, sizeof(double)) != AA_OK) return AA_ENOMEM;
  t->data = calloc(n > 0 ? n / sizeof(double) : 1, sizeof(double));
  if (t->data == NULL) return AA_ENOMEM;
  t->ndim = ndim;
  t->fmt = fmt;
  return AA_OK;
}

void aa_tensor_free(aa_tensor_t *t) {
  free(t->data);
  *t = (aa_tensor_t){0};
}

size_t aa_tensor_numel(const aa_tensor_t *t) {
  if (t->data == NULL) return 0;
  return t->shape[0] * t->shape[1] * t->shape[2];
}

void aa_tensor_round(aa_tensor_t *t, aa_fmt_t fmt) {
  aa_round_opts_t o = {fmt, AA_RND_NE, 1, 0};
  aa_round_n(t->data, t->data, aa_tensor_numel(t), &o, NULL);
  t->fmt = fmt;
}

void aa_tensor_count_nonfinite(const aa_tensor_t *t, size_t *nan, size_t *inf) {
  size_t n = aa_tensor_numel(t), cn = 0, ci = 0;
  /* integer counts: the same for any thread count */
#pragma omp parallel for reduction(+ : cn, ci) schedule(static) if (n >= ((size_t)1 << 18))
  for (size_t i = 0; i < n; i++) {
    cn += isnan(t->data[i]) != 0;
    ci += isinf(t->data[i]) != 0;
  }
  *nan = cn;
  *inf = ci;
}

/* Elements per row (the product of the axes after axis 1). */
static size_t row_len(const aa_tensor_t *t) {
  return t->ndim == 3 ? t->shape[2] : 1;
}

int aa_tensor_rows(aa_tensor_t *dst, const aa_tensor_t *src, size_t r0, size_t n) {
  size_t shape[3] = {src->shape[0], n, row_len(src)}, N = src->shape[1], w = row_len(src);
  int st;
  memset(dst, 0, sizeof *dst);
  if (src->ndim < 2 || r0 > N || n > N - r0) return AA_ESHAPE;
  if ((st = aa_tensor_alloc(dst, src->ndim, shape, src->fmt)) != AA_OK) return st;
  for (size_t h = 0; h < src->shape[0]; h++)
    memcpy(dst->data + h * n * w, src->data + (h * N + r0) * w, n * w * sizeof(double));
  return AA_OK;
}

int aa_tensor_rows_qkvd(aa_tensor_t s[4], const aa_tensor_t *const in[4], size_t q0, size_t nq, size_t k0,
                        size_t nk) {
  int st = AA_OK;
  memset(s, 0, 4 * sizeof *s);
  for (int i = 0; i < 4 && st == AA_OK; i++)
    if (in[i] != NULL) st = aa_tensor_rows(&s[i], in[i], i == 1 || i == 2 ? k0 : q0, i == 1 || i == 2 ? nk : nq);
  if (st != AA_OK)
    for (int i = 0; i < 4; i++)
      aa_tensor_free(&s[i]);
  return st;
}

void aa_tensor_put_rows(aa_tensor_t *dst, const aa_tensor_t *src, size_t r0) {
  size_t n = src->shape[1], N = dst->shape[1], w = row_len(src);
  for (size_t h = 0; h < src->shape[0]; h++)
    memcpy(dst->data + (h * N + r0) * w, src->data + h * n * w, n * w * sizeof(double));
}
