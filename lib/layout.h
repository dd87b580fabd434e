/* attnacc: tensor layouts of attention inputs ([B,H,N,d], [B,N,H,d], [H,N,d], [N,d]), their inference, and the
 * seeded input draw. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_LAYOUT_H
#define AA_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fmt.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the axes of a caller's C-order array are named.
     bhnd  [B, H, N, d]  PyTorch scaled_dot_product_attention
     bnhd  [B, N, H, d]  flash-attn's flash_attn_func
     hnd   [H, N, d]     attnacc's own tensors
     nd    [N, d]        one head
     nhd   [N, H, d]     flash-attn's layout without the batch axis (never inferred:
                         3 axes are read as hnd unless nhd is named)
   Internally every attention tensor is [B*H, N, d] (aa_tensor_t, 3 axes):
   batch b, head h is folded head b*H + h. This keeps GQA exact: with
   group = H / H_kv the oracle maps query head b*H + h to kv head
   (b*H + h) / group = b*H_kv + h / group, the kv head of the same batch. */
typedef enum {
  AA_LAYOUT_AUTO = 0, /* infer from the shapes where only one layout fits */
  AA_LAYOUT_BHND,
  AA_LAYOUT_BNHD,
  AA_LAYOUT_HND,
  AA_LAYOUT_ND,
  AA_LAYOUT_NHD,
  AA_LAYOUT_COUNT
} aa_layout_t;

const char *aa_layout_name(aa_layout_t l); /* "auto", "bhnd", "bnhd", "hnd", "nd", "nhd" */
const char *aa_layout_axes(aa_layout_t l); /* "[B, H, N, d]", ...; "?" for auto */
int aa_layout_from_name(aa_layout_t *out, const char *name);
int aa_layout_ndim(aa_layout_t l); /* 4, 4, 3, 2, 3; 0 for auto */

/* Batch, heads, length and head dimension of an array read in a layout. */
typedef struct {
  size_t b, h, n, d;
} aa_dims_t;

/* dims of shape[0..ndim-1] read in layout l (not auto); AA_ESHAPE when
   ndim is not the layout's axis count. */
int aa_layout_dims(aa_dims_t *out, aa_layout_t l, int ndim, const size_t *shape);

/* Choose the layout of a problem from q's and k's shapes (both ndim axes).
   A layout fits when both read in it give the same batch and head
   dimension, non-zero sizes and kv heads dividing the query heads (GQA).
   given != auto: that layout, or AA_ESHAPE saying why it does not fit.
   auto: 2 axes are nd, 3 are hnd (attnacc's historical reading; nhd must
   be named); with 4 axes the one of bhnd and bnhd that
   fits, and when both fit AA_EINVAL with a message naming both candidates
   and what each would mean (the caller must say which). */
int aa_layout_resolve(aa_layout_t *out, aa_layout_t given, int ndim, const size_t *q_shape, const size_t *k_shape,
                      aa_error_t *err);

/* Copy a C-order array data (values exact in fmt) of shape[0..ndim-1] in
   layout l into out, [B*H, N, d], fmt-tagged (out is allocated; free it
   with aa_tensor_free). The 2-D promotion [N, d] -> [1, N, d] is the nd case. */
int aa_layout_import(aa_tensor_t *out, const double *data, aa_fmt_t fmt, aa_layout_t l, int ndim, const size_t *shape,
                     aa_error_t *err);
/* The inverse: write t ([B*H, N, d]) into dst, C order in layout l with dims. */
void aa_layout_export(double *dst, const aa_tensor_t *t, aa_layout_t l, const aa_dims_t *dims);
/* The caller's index (idx[0..aa_layout_ndim(l)-1], in the layout's axis
   order) of element i of the folded [B*H, N, d] tensor. Returns the axis count. */
int aa_layout_index(size_t *idx, aa_layout_t l, const aa_dims_t *dims, size_t i);

/* Input distributions of aa_layout_draw (its `uniform` argument). */
enum {
  AA_DIST_NORMAL = 0,  /* sigma * N(0,1) */
  AA_DIST_UNIFORM = 1, /* sigma * U[0,1) */
  /* sigma * (N(0,1) + N(0,100) Bernoulli(0.001)): 0.1 % of the entries get
     an outlier of standard deviation 10, the FA3 paper's FP8 accuracy
     setting (section 4.3, as we read it); each element takes three draws
     from its stream: the normal, the uniform for the Bernoulli, the outlier */
  AA_DIST_OUTLIER = 2,
  /* Magnitudes where kernels produce NaN or Inf (no draw for the first):
     constant: every element sigma; every score ties at the row max (sigma
     133120 in BF16 is the all-133120.0 input that gives flash NaN);
     near-constant: sigma (1 + 2^-8 z), which BF16 rounds to a few values, so
     that many keys tie at the row max;
     huge-keys: sigma z, and in k (id 1) each key row is, with probability
     2^-6 (one uniform drawn at the row's start), multiplied by 64: a few
     keys whose scores dwarf the rest;
     massive: sigma z, plus 32 sigma on channel 0 of every row of head 0 of q
     and k (ids 0, 1): a massive-activation head whose logits spread over
     about 32 sigma^2 scale sqrt(d) times more than the other heads'. */
  AA_DIST_CONSTANT = 3,
  AA_DIST_NEAR_CONSTANT = 4,
  AA_DIST_HUGE_KEYS = 5,
  AA_DIST_MASSIVE = 6,
  AA_DIST_COUNT
};
/* The name of a distribution ("normal", "uniform", "outlier", "constant", "near-constant", "huge-keys",
   "massive"), NULL when out of range; and the reverse (-1 for an unknown name). */
const char *aa_layout_dist_name(int dist);
int aa_layout_dist_from_name(const char *name);

/* The seeded input draw of `attnacc run`: a [heads, rows, cols] tensor whose
   head h is drawn from the pcg64 stream aa_rng_derive(seed, {id, h}),
   element by element in row-major order, by the distribution `uniform`
   (AA_DIST_NORMAL = 0, AA_DIST_UNIFORM = 1, AA_DIST_OUTLIER) formed in
   double, then rounded to fmt (RNE).
   Ids used by the front end: 0 = q, 1 = k, 2 = v, 3 = dO, 4 = sinks. */
int aa_layout_draw(aa_tensor_t *out, uint64_t seed, uint64_t id, size_t heads, size_t rows, size_t cols, int uniform,
                   double sigma, aa_fmt_t fmt, aa_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
