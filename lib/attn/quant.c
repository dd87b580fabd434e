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
static void quant_int_head(double *x, size_t rows, size_t d, const aa_bq_opts_t *o, int is_q, size_t W, double *buf) {
  if (o->kind == AA_BQ_INT8_BLOCK) {
    size_t blk = o->block ? o->block / d : is_q ? 128 : 64;
    if (blk == 0) blk = 1;
    aa_bq_opts_t ob = *o;
    ob.block = blk * d;
    aa_bq_quantize(x, NULL, x, rows * d, 1, &ob, 0);
    return;
  }
  size_t groups = is_q ? 8 : 4, per = is_q ? 1 : 2;
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

/* SageAttention's FP8 with scale = amax / max: per_channel_fp8 (quant.py:224-293) stores v_scale = amax /
   scale_max and converts fl32(x * fl32(scale_max / amax)) to e4m3 (fused.cu:393-399, 408-420); the kernel
   multiplies O by v_scale after the PV sum (qk_int_sv_f8_cuda_sm90.cu:492-510), modelled by holding the element
   times the scale. n values at stride. */
static float fp8_amax(const double *x, size_t n, size_t stride) {
  float amax = 0;
  for (size_t i = 0; i < n; i++)
    amax = fmaxf(amax, fabsf((float)x[i * stride]));
  return amax;
}

static void quant_fp8_amax(double *x, size_t n, size_t stride, double fmax, int satfinite) {
  float amax = fp8_amax(x, n, stride);
  float scale = amax / (float)fmax, recp = (float)fmax / amax;
  double top = aa_fmt_info(AA_FMT_E4M3)->max_finite;
  for (size_t i = 0; i < n; i++) {
    double e = (double)((float)x[i * stride] * recp);
    if (satfinite && fabs(e) > top) e = copysign(top, e); /* cvt.rn.satfinite.e4m3x2.f32 */
    x[i * stride] = amax > 0 ? aa_attn_rnd(e, AA_FMT_E4M3) * scale : 0;
  }
}

/* fp8-tensor by quant.fp8_scope and quant.fp8_max: SageAttention's form, or NULL return (0) for the stock one. */
static int quant_fp8_sage(double *x, size_t heads, size_t rows, size_t d, const aa_recipe_t *r) {
  if (r->quant_fp8_scope != AA_QUANT_SCOPE_CHANNEL && r->quant_fp8_max == 448.0) return 0;
  if (r->quant_fp8_scope != AA_QUANT_SCOPE_CHANNEL) {
    quant_fp8_amax(x, heads * rows * d, 1, r->quant_fp8_max, r->quant_satfinite);
    return 1;
  }
  for (size_t h = 0; h < heads; h++)
    for (size_t c = 0; c < d; c++)
      quant_fp8_amax(x + h * rows * d + c, rows, d, r->quant_fp8_max, r->quant_satfinite);
  return 1;
}

/* One tensor [heads][rows][d] in place: blocks along d (rows of d values),
   INT kinds by head as above, fp8-tensor one scale for all. */
static int quant_tensor(double *x, size_t heads, size_t rows, size_t d, const aa_recipe_t *r, int kind, int is_q,
                        int along_keys) {
  aa_bq_opts_t o = quant_opts(r, kind);
  size_t n = heads * rows * d;
  if (kind == AA_BQ_FP8_TENSOR && quant_fp8_sage(x, heads, rows, d, r)) return AA_OK;
  if (kind == AA_BQ_FP8_TENSOR) return aa_bq_quantize(x, NULL, x, n, 1, &o, 0);
  if (kind >= AA_BQ_INT8_BLOCK && kind <= AA_BQ_INT4_THREAD) {
    /* quant.warp_q, quant.warp_k: WARPQ, WARPK of the per_thread_int8 call (32 and 64 by default) */
    size_t W = is_q ? (r->quant_warp_q ? r->quant_warp_q : 32) : (r->quant_warp_k ? r->quant_warp_k : 64);
    double *buf = malloc((W * d + 1) * sizeof *buf);
    if (buf == NULL) return AA_ENOMEM;
    for (size_t h = 0; h < heads; h++)
      quant_int_head(x + h * rows * d, rows, d, &o, is_q, W, buf);
    free(buf);
    return AA_OK;
  }
  /* NVFP4's FP32 tensor scale: the tensor's amax, or quant.nvfp4_global = fixed: 448 x 6, a scale of 1 */
  double tamax = r->quant_nvfp4_global == AA_NVFP4_GLOBAL_FIXED ? 448.0 * 6.0 : amax_of(x, n);
  if (along_keys) { /* quant.v_axis = keys: blocks of each (head, column) over the keys, from key 0 */
    if (o.block == 0) o.block = aa_bq_default_block(o.kind);
    for (size_t c = 0; c < heads * d; c++)
      aa_bq_quantize(x + c / d * rows * d + c % d, NULL, x + c / d * rows * d + c % d, rows, d, &o, tamax);
    return AA_OK;
  }
  if (o.block == 0 || o.block > d) o.block = o.block ? d : aa_bq_default_block(o.kind);
  for (size_t row = 0; row < heads * rows; row++)
    aa_bq_quantize(x + row * d, NULL, x + row * d, d, 1, &o, tamax);
  return AA_OK;
}

/* A copy of src quantised by kind (none: a plain copy). */
static int quant_copy_always(double **out, const double *src, size_t heads, size_t rows, size_t d,
                             const aa_recipe_t *r, int kind, int is_q, int along_keys) {
  size_t n = heads * rows * d;
  *out = malloc((n ? n : 1) * sizeof **out);
  if (*out == NULL) return AA_ENOMEM;
  memcpy(*out, src, n * sizeof **out);
  return kind == AA_BQ_NONE ? AA_OK : quant_tensor(*out, heads, rows, d, r, kind, is_q, along_keys);
}

/* A quantised copy of src, or NULL (and AA_OK) when kind is none. */
static int quant_copy(double **out, const double *src, size_t heads, size_t rows, size_t d, const aa_recipe_t *r,
                      int kind, int is_q, int along_keys) {
  *out = NULL;
  if (kind == AA_BQ_NONE || src == NULL) return AA_OK;
  return quant_copy_always(out, src, heads, rows, d, r, kind, is_q, along_keys);
}

/* quant.smooth_k: SageAttention subtracts km = k.mean(dim=seq) (a BF16 tensor op: io-rounded mean, core.py:772-773)
   as k = k - km in io (quant_per_thread.py:158-159) before quantising K; softmax is invariant to the per-row
   constant q.km that S loses, the LSE is not: lse + sm_scale * io(q km^T) (core.py:785-797, 829-830). owned[4]
   keeps km [kv_heads][d] then those io(q.km) [heads][n_q] for aa_attn_quant_smooth_lse. Both passes read the
   smoothed K: the backward's P = exp(S - LSE) needs the forward's own LSE, and dQ = dS K loses nothing with
   the smoothing since the rows of dS sum to 0 (dK = dS^T Q does not read K). */
static int smooth_k(aa_attn_ctx_t *cx, double *owned[AA_ATTN_QUANT_OWNED]) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, nk = cx->n_k, group = cx->heads / cx->kv_heads;
  double *km = malloc((cx->kv_heads * d + cx->heads * cx->n_q + 1) * sizeof *km), *corr = km + cx->kv_heads * d;
  int st = km == NULL ? AA_ENOMEM : quant_copy_always(&owned[1], cx->K, cx->kv_heads, nk, d, r, AA_BQ_NONE, 0, 0);
  owned[4] = km;
  if (st != AA_OK) return AA_ENOMEM;
  for (size_t h = 0; h < cx->kv_heads; h++)
    for (size_t c = 0; c < d; c++) {
      double *k = owned[1] + h * nk * d + c, sum = 0;
      for (size_t j = 0; j < nk; j++)
        sum += k[j * d];
      km[h * d + c] = aa_attn_rnd(nk ? sum / (double)nk : 0, r->io_fmt);
      for (size_t j = 0; j < nk; j++)
        k[j * d] = aa_attn_rnd(k[j * d] - km[h * d + c], r->io_fmt);
    }
  for (size_t h = 0; h < cx->heads; h++)
    for (size_t i = 0; i < cx->n_q; i++) {
      const double *q = cx->Q + (h * cx->n_q + i) * d, *m = km + h / group * d;
      double dot = 0;
      for (size_t c = 0; c < d; c++)
        dot += q[c] * m[c];
      corr[h * cx->n_q + i] = aa_attn_rnd(dot, r->io_fmt); /* a BF16 matmul's output */
    }
  return r->quant_k == AA_BQ_NONE ? AA_OK : quant_tensor(owned[1], cx->kv_heads, nk, d, r, r->quant_k, 0, 0);
}

/* quant.smooth_q (SageAttention3, api.py:27-72, 86-91): qm = the FP32 mean of each group of G rows of Q (the
   rows past n_q padded with zeros count: the sum is divided by G), stored in io, and Q - qm in io; quant.q
   quantises Q - qm, which is held plus qm. The kernel adds delta_s = io(qm K^T) of the smoothed, unquantised K
   as the initial S (mainloop_tma_ws.h:691-718); here qm meets the quantised K: an uncalibrated approximation. */
static int smooth_q(aa_attn_ctx_t *cx, double *owned[AA_ATTN_QUANT_OWNED]) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, nq = cx->n_q, G = r->quant_smooth_q, ng = (nq + G - 1) / G;
  int st = quant_copy_always(&owned[0], cx->Q, cx->heads, nq, d, r, AA_BQ_NONE, 1, 0);
  double *qm = st == AA_OK ? malloc((cx->heads * ng * d + 1) * sizeof *qm) : NULL;
  if (qm == NULL) return AA_ENOMEM;
  for (size_t h = 0; h < cx->heads; h++)
    for (size_t g0 = 0; g0 < nq; g0 += G)
      for (size_t c = 0; c < d; c++) {
        double *q = owned[0] + h * nq * d + c, sum = 0;
        for (size_t i = g0; i < g0 + G && i < nq; i++)
          sum += q[i * d];
        double mf = aa_attn_rnd(aa_attn_rnd(sum, AA_FMT_FP32) / (double)G, AA_FMT_FP32);
        qm[(h * ng + g0 / G) * d + c] = aa_attn_rnd(mf, r->io_fmt);
        for (size_t i = g0; i < g0 + G && i < nq; i++)
          q[i * d] = aa_attn_rnd(q[i * d] - mf, r->io_fmt);
      }
  if (r->quant_q != AA_BQ_NONE) st = quant_tensor(owned[0], cx->heads, nq, d, r, r->quant_q, 1, 0);
  for (size_t h = 0; st == AA_OK && h < cx->heads; h++)
    for (size_t i = 0; i < nq; i++)
      for (size_t c = 0; c < d; c++)
        owned[0][(h * nq + i) * d + c] += qm[(h * ng + i / G) * d + c];
  free(qm);
  return st;
}

void aa_attn_quant_smooth_lse(const aa_attn_ctx_t *cx, double *owned[AA_ATTN_QUANT_OWNED], aa_attn_result_t *out) {
  const aa_recipe_t *r = cx->r;
  if (!r->quant_smooth_k || owned[4] == NULL) return;
  const double *corr = owned[4] + cx->kv_heads * cx->d;
  for (size_t x = 0; x < cx->heads * cx->n_q; x++) {
    double *lse = &out->lse.data[x];
    if (isfinite(*lse))
      *lse =
          aa_attn_rnd(aa_attn_alu(*lse + aa_attn_alu(corr[x] * cx->scale, r->alu_fmt), r->alu_fmt), r->fwd_lse_fmt);
  }
}

/* quant.pv_buffer's PV runs on the kernel's operands (P x 2^p_scale_exp x p_scale, the FP8 V elements), whose
   range an FP16 accumulator sees: V's descales (amax / fp8_max, per tensor or per (KV head, column) as
   quant_fp8_sage takes them, from the unquantised V), 1 for other V kinds. */
static int v_descales(aa_attn_ctx_t *cx, double *owned[AA_ATTN_QUANT_OWNED]) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, nk = cx->n_k, nv = cx->kv_heads * d;
  if (!r->quant_pv_buffer) return AA_OK;
  double *vs = owned[5] = malloc((nv + 1) * sizeof *vs);
  if (vs == NULL) return AA_ENOMEM;
  int sage =
      r->quant_v == AA_BQ_FP8_TENSOR && (r->quant_fp8_scope == AA_QUANT_SCOPE_CHANNEL || r->quant_fp8_max != 448.0);
  float tensor = sage ? fp8_amax(cx->V, nv * nk, 1) / (float)r->quant_fp8_max : 1;
  for (size_t x = 0; x < nv; x++) {
    size_t h = x / d, c = x % d;
    vs[x] = tensor;
    if (sage && r->quant_fp8_scope == AA_QUANT_SCOPE_CHANNEL)
      vs[x] = fp8_amax(cx->V + h * nk * d + c, nk, d) / (float)r->quant_fp8_max;
    if (!(vs[x] > 0)) vs[x] = 1;
  }
  cx->v_scale = vs;
  return AA_OK;
}

int aa_attn_quant_operands(aa_attn_ctx_t *cx, double *owned[AA_ATTN_QUANT_OWNED], aa_error_t *err) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d;
  int st = r->quant_smooth_k ? smooth_k(cx, owned) : AA_OK;
  if (st == AA_OK) st = v_descales(cx, owned);
  if (st == AA_OK && r->quant_smooth_q) st = smooth_q(cx, owned);
  if (st == AA_OK && !r->quant_smooth_q)
    st = quant_copy(&owned[0], cx->Q, cx->heads, cx->n_q, d, r, r->quant_q, 1, 0);
  if (st == AA_OK && !r->quant_smooth_k)
    st = quant_copy(&owned[1], cx->K, cx->kv_heads, cx->n_k, d, r, r->quant_k, 0, 0);
  if (st == AA_OK)
    st = quant_copy(&owned[2], cx->V, cx->kv_heads, cx->n_k, d, r, r->quant_v, 0,
                    r->quant_v_axis == AA_QUANT_AXIS_KEYS);
  if (st == AA_OK) st = quant_copy(&owned[3], cx->dO, cx->heads, cx->n_q, d, r, r->quant_do, 0, 0);
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
  if (r->quant_nvfp4_global == AA_NVFP4_GLOBAL_FIXED) tamax = 1.0; /* P <= 1 at the running max maps to 448 x 6 */
  for (size_t a = 0; a < rows; a++)
    aa_bq_quantize(x + a * ld, NULL, x + a * ld, cols, 1, &o, tamax);
}

/* The P V product of one key tile into the q tile's accumulator acc (tq x d): chained into acc by fwd.acc_pv,
   or, with quant.pv_buffer, summed from zero and added into acc in fwd.o_acc_fmt as SageAttention does
   (RO_temp from a wgmma chain over the 128-key tile, then RO += RO_temp: qk_int_sv_f8_cuda_sm90.cu:328-353;
   the FP16-accumulate mma.sync chain over 64 keys, then RO += float(RO_f16): attn_utils.cuh:899-975). The
   buffer's product takes the kernel's operands (pv_kernel_operands) so that an FP16 accumulator sees their
   range, and is scaled back before the add (exact for power-of-two scales; else within 2^-52). */
static int pv_buffered(const aa_attn_ctx_t *cx, size_t kvh, double *acc, const double *P, const double *V, size_t tq,
                       size_t tk) {
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d;
  double ps = ldexp(r->quant_p_scale, (int)r->fwd_p_scale_exp);
  const double *vs = cx->v_scale ? cx->v_scale + kvh * d : NULL;
  double *buf = calloc(tq * d + 1, sizeof *buf), *pk = malloc((tq * tk + 1) * sizeof *pk),
         *vk = malloc((tk * d + 1) * sizeof *vk);
  int st = buf && pk && vk ? AA_OK : AA_ENOMEM;
  for (size_t x = 0; st == AA_OK && x < tq * tk; x++)
    pk[x] = P[x] * ps;
  for (size_t x = 0; st == AA_OK && x < tk * d; x++)
    vk[x] = vs ? V[x] / vs[x % d] : V[x];
  if (st == AA_OK) st = aa_gemm(buf, d, pk, tk, 0, vk, d, 0, tq, d, tk, 0, r->fwd_acc_pv);
  for (size_t x = 0; st == AA_OK && x < tq * d; x++)
    acc[x] = aa_attn_rnd(acc[x] + buf[x] * (vs ? vs[x % d] : 1) / ps, r->fwd_o_acc_fmt);
  free(buf), free(pk), free(vk);
  return st;
}

int aa_attn_quant_pv(const aa_attn_ctx_t *cx, size_t kvh, double *acc, const double *P, const double *V, size_t tq,
                     size_t tk) {
  const aa_recipe_t *r = cx->r;
  if (r->quant_pv_buffer) return pv_buffered(cx, kvh, acc, P, V, tq, tk);
  int st = aa_gemm(acc, cx->d, P, tk, 0, V, cx->d, 0, tq, cx->d, tk, 1, r->fwd_acc_pv);
  if (st == AA_OK && !aa_accum_native(r->fwd_acc_pv, r->fwd_o_acc_fmt))
    for (size_t x = 0; x < tq * cx->d; x++)
      acc[x] = aa_attn_rnd(acc[x], r->fwd_o_acc_fmt);
  return st;
}
