/* attnacc: the forward's own Q, K, V: optional Hadamard rotation of Q and K, FP8 cast with power-of-two scales. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

/* In-place normalised Walsh-Hadamard transform of each row of x ([rows][d],
   d a power of two): x <- x H / sqrt(d), in binary64 and then rounded to io
   (incoherent processing happens outside the kernel, which reads the
   rotated tensors as stored; FA3 paper section 3.3). Q H (K H)^T = Q K^T,
   so the problem is unchanged up to that rounding. */
static void hadamard_rows(double *x, size_t rows, size_t d, aa_fmt_t io) {
  double norm = 1.0 / sqrt((double)d);
  for (size_t r = 0; r < rows; r++) {
    double *v = x + r * d;
    for (size_t h = 1; h < d; h *= 2)
      for (size_t i = 0; i < d; i += 2 * h)
        for (size_t j = i; j < i + h; j++) {
          double a = v[j], b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
    for (size_t c = 0; c < d; c++)
      v[c] = aa_attn_rnd(v[c] * norm, io);
  }
}

/* Cast n values to fmt with one power-of-two scale 2^e, the smallest that
   keeps amax / 2^e within the format's largest finite value, and keep them
   dequantized (x = fmt(x / 2^e) 2^e, exact in binary64). A power-of-two
   descale folded into FA3's softmax_scale_log2 (flash_fwd_kernel_sm90.h:
   412-414) and into its final O scale (v_descale through finalize,
   mainloop_fwd_sm90_tma_gmma_ws.hpp:1241-1242) is exact, so the dequantized
   values reproduce the kernel's products and roundings. */
static void cast_scaled(double *x, size_t n, aa_fmt_t fmt) {
  double amax = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(x[i]) > amax) amax = fabs(x[i]);
  int e = 0;
  if (amax > 0) e = (int)ceil(log2(amax / aa_fmt_info(fmt)->max_finite));
  for (size_t i = 0; i < n; i++)
    x[i] = ldexp(aa_attn_rnd(ldexp(x[i], -e), fmt), e);
}

/* Q's scale is per KV head as FA3's q_descale[batch, kv head]: the query
   heads of one group are contiguous ([heads][n][d], head h in group h / G). */
static void cast_tensor(double *x, size_t groups, size_t per_group, aa_fmt_t fmt, int per_tensor) {
  if (per_tensor) {
    cast_scaled(x, groups * per_group, fmt);
    return;
  }
  for (size_t g = 0; g < groups; g++)
    cast_scaled(x + g * per_group, per_group, fmt);
}

static int is_pow2(size_t d) {
  return d > 0 && (d & (d - 1)) == 0;
}

int aa_attn_fwd_operands(const aa_attn_ctx_t *cx, double **qf, double **kf, double **vf, aa_error_t *err) {
  const aa_recipe_t *r = cx->r;
  *qf = *kf = *vf = NULL;
  if (r->fwd_qkv_fmt == AA_QKV_NONE && r->fwd_qk_rotate == AA_ROTATE_NONE) return AA_OK;
  size_t d = cx->d, nq = cx->heads * cx->n_q * d, nk = cx->kv_heads * cx->n_k * d;
  if (r->fwd_qk_rotate == AA_ROTATE_HADAMARD && !is_pow2(d))
    return aa_error_set(err, AA_EINVAL,
                        "attn_run: recipe '%s': fwd.qk_rotate = hadamard needs d a power of two, not %zu", r->name,
                        d);
  double *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
  if (q == NULL || k == NULL || v == NULL) {
    free(q), free(k), free(v);
    return aa_error_set(err, AA_ENOMEM, "attn_run: cannot allocate the forward's FP8 operands");
  }
  memcpy(q, cx->Q, nq * sizeof *q);
  memcpy(k, cx->K, nk * sizeof *k);
  memcpy(v, cx->V, nk * sizeof *v);
  if (r->fwd_qk_rotate == AA_ROTATE_HADAMARD) {
    hadamard_rows(q, cx->heads * cx->n_q, d, r->io_fmt);
    hadamard_rows(k, cx->kv_heads * cx->n_k, d, r->io_fmt);
  }
  if (r->fwd_qkv_fmt != AA_QKV_NONE) {
    aa_fmt_t f = r->fwd_qkv_fmt == AA_QKV_E4M3 ? AA_FMT_E4M3 : AA_FMT_E5M2;
    int pt = r->fwd_qkv_scale == AA_QKV_SCALE_TENSOR;
    cast_tensor(q, cx->kv_heads, cx->group * cx->n_q * d, f, pt);
    cast_tensor(k, cx->kv_heads, cx->n_k * d, f, pt);
    cast_tensor(v, cx->kv_heads, cx->n_k * d, f, pt);
  }
  *qf = q, *kf = k, *vf = v;
  return AA_OK;
}
