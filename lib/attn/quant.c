/* attnacc: the quant.* recipe keys: block-scaled and INT quantisation of Q, K, V, dO, P and dS (lib/fmt.h
 * aa_bq_quantize). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

static aa_bq_opts_t quant_opts(const aa_recipe_t *r, int kind) {
  aa_bq_opts_t o = {(aa_bq_kind_t)kind, r->quant_block, (aa_bq_scale_rnd_t)r->quant_scale_rnd, r->quant_satfinite};
  return o;
}

static double amax_of(const double *x, size_t n) {
  double a = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(x[i]) > a) a = fabs(x[i]);
  return a;
}

/* SageAttention's INT groups of one head ([rows][d]): per-block kinds a
   tile of blk rows (BLKQ = 128 for Q, BLKK = 64 for K: quant_per_block.py
   per_block_int8); per-thread kinds, within each warp block of W rows (Q:
   WARPQ = 32, K: WARPK = 64), the rows one thread holds: Q row r of the
   block to thread r % 8, K rows to thread (r % 8) / 2 (quant_per_thread.py
   quant_query/key_per_thread_*_kernel offs_n). */
static void quant_int_head(double *x, size_t rows, size_t d, const aa_bq_opts_t *o, int is_q, double *buf) {
  if (o->kind == AA_BQ_INT8_BLOCK) {
    size_t blk = o->block ? o->block / d : is_q ? 128 : 64;
    if (blk == 0) blk = 1;
    aa_bq_opts_t ob = *o;
    ob.block = blk * d;
    aa_bq_quantize(x, NULL, x, rows * d, 1, &ob, 0);
    return;
  }
  size_t W = is_q ? 32 : 64, groups = is_q ? 8 : 4, per = is_q ? 1 : 2;
  aa_bq_opts_t ob = *o;
  ob.block = 0;
  for (size_t w0 = 0; w0 < rows; w0 += W)
    for (size_t t = 0; t < groups; t++) {
      size_t n = 0;
      for (size_t r = w0; r < w0 + W && r < rows; r++)
        if ((r - w0) % 8 / per == t) memcpy(buf + n++ * d, x + r * d, d * sizeof *buf);
      aa_bq_quantize(buf, NULL, buf, n * d, 1, &ob, 0);
      n = 0;
      for (size_t r = w0; r < w0 + W && r < rows; r++)
        if ((r - w0) % 8 / per == t) memcpy(x + r * d, buf + n++ * d, d * sizeof *buf);
    }
}

/* One tensor [heads][rows][d] in place: blocks along d (rows of d values),
   INT kinds by head as above, fp8-tensor one scale for all. */
static int quant_tensor(double *x, size_t heads, size_t rows, size_t d, const aa_recipe_t *r, int kind, int is_q) {
  aa_bq_opts_t o = quant_opts(r, kind);
  size_t n = heads * rows * d;
  if (kind == AA_BQ_FP8_TENSOR) return aa_bq_quantize(x, NULL, x, n, 1, &o, 0);
  if (kind >= AA_BQ_INT8_BLOCK && kind <= AA_BQ_INT4_THREAD) {
    double *buf = malloc((64 * d + 1) * sizeof *buf);
    if (buf == NULL) return AA_ENOMEM;
    for (size_t h = 0; h < heads; h++)
      quant_int_head(x + h * rows * d, rows, d, &o, is_q, buf);
    free(buf);
    return AA_OK;
  }
  double tamax = amax_of(x, n); /* NVFP4's FP32 tensor scale: the tensor's amax */
  if (o.block == 0 || o.block > d) o.block = o.block ? d : aa_bq_default_block(o.kind);
  for (size_t row = 0; row < heads * rows; row++)
    aa_bq_quantize(x + row * d, NULL, x + row * d, d, 1, &o, tamax);
  return AA_OK;
}

/* A quantised copy of src, or NULL (and AA_OK) when kind is none. */
static int quant_copy(double **out, const double *src, size_t heads, size_t rows, size_t d, const aa_recipe_t *r,
                      int kind, int is_q) {
  *out = NULL;
  if (kind == AA_BQ_NONE || src == NULL) return AA_OK;
  size_t n = heads * rows * d;
  *out = malloc((n ? n : 1) * sizeof **out);
  if (*out == NULL) return AA_ENOMEM;
  memcpy(*out, src, n * sizeof **out);
  return quant_tensor(*out, heads, rows, d, r, kind, is_q);
}

int aa_attn_quant_operands(aa_attn_ctx_t *cx, double *owned[4], aa_error_t *err) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d;
  int st = quant_copy(&owned[0], cx->Q, cx->heads, cx->n_q, d, r, r->quant_q, 1);
  if (st == AA_OK) st = quant_copy(&owned[1], cx->K, cx->kv_heads, cx->n_k, d, r, r->quant_k, 0);
  if (st == AA_OK) st = quant_copy(&owned[2], cx->V, cx->kv_heads, cx->n_k, d, r, r->quant_v, 0);
  if (st == AA_OK) st = quant_copy(&owned[3], cx->dO, cx->heads, cx->n_q, d, r, r->quant_do, 0);
  if (st != AA_OK) return aa_error_set(err, st, "attn_run: cannot allocate the quantised operands");
  if (owned[0]) cx->Q = owned[0];
  if (owned[1]) cx->K = owned[1];
  if (owned[2]) cx->V = owned[2];
  if (owned[3]) cx->dO = owned[3];
  return AA_OK;
}

void aa_attn_quant_rows(const aa_recipe_t *r, int kind, double *x, size_t rows, size_t cols, size_t ld) {
  if (kind == AA_BQ_NONE) return;
  aa_bq_opts_t o = quant_opts(r, kind);
  double tamax = 0;
  for (size_t a = 0; a < rows; a++) {
    double m = amax_of(x + a * ld, cols);
    if (m > tamax) tamax = m;
  }
  for (size_t a = 0; a < rows; a++)
    aa_bq_quantize(x + a * ld, NULL, x + a * ld, cols, 1, &o, tamax);
}
