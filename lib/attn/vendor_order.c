/* attnacc: the summation orders of vendor-library calls in a backward (PyTorch's CUDA sum, cuBLAS's GEMV). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "attn-impl.h"

/* FlexAttention's dense backward (sdpa_dense_backward, used without torch.compile) forms D with torch.sum and dP with
   a cuBLAS FP32 GEMM; every product of BF16 values is exact in FP32, so the order of each sum is all that decides its
   bits, and in a causal cell where row 0's weight overflows, whether dS_00 = Inf (dP_00 - D_0) is NaN or Inf. Both
   orders were read on the H200 ([h200-orders]; PyTorch 2.11.0+cu130) by fixtures/h200-nan/probe_flex_order.py, whose
   pair probe ([fprev]) gives the whole summation tree of each call, at 261 shapes of each (probe_flex*.npz,
   README-gpu 8.9). */

static size_t pow2_floor(size_t x) {
  size_t p = 1;
  while (p <= x / 2)
    p *= 2;
  return p;
}

static double add_in(double a, double b, aa_fmt_t alu, aa_fmt_t f) {
  return aa_attn_rnd(aa_attn_alu(a + b, alu), f);
}

/* Thread 0's value after shuffle-down steps (or shared-memory steps) with offsets width/2, ..., down to stop: at
   each step thread t < off adds thread t + off, when t + off < live (threads past it hold nothing). Thread 0 reads
   only threads below 2 off at each step, so the others need not be updated. */
static void tree_down(double *v, size_t width, size_t stop, size_t live, aa_fmt_t alu, aa_fmt_t f) {
  for (size_t off = width / 2; off >= stop && off >= 1; off /= 2)
    for (size_t t = 0; t < off && t + off < live; t++)
      v[t] = add_in(v[t], v[t + off], alu, f);
}

/* torch.sum(o * g, -1) of one row of a [rows, d] contiguous FP32 tensor, as PyTorch's reduce_kernel<512, 1> adds it
   (ATen/native/cuda/Reduce.cuh): setReduceConfig reduces along the row with block width T: last_pow2(d) (d / 4 with
   the 4-wide loads that vectorize_input takes from d = 128 on) capped at 32, then widened to 512 / block height, the
   height last_pow2(rows) capped at 512 / 32; so few rows give wider blocks (1 x 8 rows at d 128: 32 threads of one
   4-wide load each). Thread t: 4 accumulators from +0, either lane i of its loads at vectors t, t + T, ... (4-wide)
   or element t + i T of each step of 4 T (thread_reduce_impl, its tail into accumulators 0, 1, ...), then added in
   order 0 + 1 + 2 + 3; then block_x_reduce: shared-memory steps T/2 .. 32, then warp shuffles down by 16 .. 1
   (descending in this PyTorch version). All 261 probed trees (d 8 .. 256, 8 .. 8192 rows). d >= 128 and not a
   multiple of 4 (misaligned rows, vectorize_input's unaligned head) is not modelled: taken as the plain path. */
/* element c of out.float() * grad_out.float(): the product in alu, rounded to f */
static double prod(const double *o, const double *g, size_t c, aa_fmt_t alu, aa_fmt_t f) {
  return aa_attn_rnd(aa_attn_alu(o[c] * g[c], alu), f);
}

double aa_attn_torch_sum(const double *o, const double *g, size_t d, size_t rows, aa_fmt_t alu, aa_fmt_t f) {
  enum { MNT = 512, VT = 4, WARP = 32 };
  int vec = d >= 128 && d % 4 == 0;
  size_t dim0 = vec ? d / 4 : d;
  size_t d0 = dim0 < MNT ? pow2_floor(dim0) : MNT, d1 = rows < MNT ? pow2_floor(rows) : MNT;
  size_t bw = d0 < WARP ? d0 : WARP, bh = d1 < MNT / bw ? d1 : MNT / bw, T = d0 < MNT / bh ? d0 : MNT / bh;
  double v[MNT];
  for (size_t t = 0; t < T; t++) {
    double acc[VT] = {0, 0, 0, 0};
    if (vec) {
      for (size_t idx = t; idx * VT + VT - 1 < d; idx += T)
        for (int i = 0; i < VT; i++)
          acc[i] = add_in(acc[i], prod(o, g, idx * VT + i, alu, f), alu, f);
    } else {
      size_t idx = t;
      for (; idx + (VT - 1) * T < d; idx += VT * T)
        for (int i = 0; i < VT; i++)
          acc[i] = add_in(acc[i], prod(o, g, idx + i * T, alu, f), alu, f);
      for (int i = 0; i < VT && idx < d; i++, idx += T)
        acc[i] = add_in(acc[i], prod(o, g, idx, alu, f), alu, f);
    }
    v[t] = acc[0];
    for (int i = 1; i < VT; i++)
      v[t] = add_in(v[t], acc[i], alu, f);
  }
  if (T > WARP) tree_down(v, T, WARP, T, alu, f);  /* shared memory, offsets T/2 .. 32 */
  tree_down(v, T < WARP ? T : WARP, 1, T, alu, f); /* warp shuffles, 16 .. 1 */
  return v[0];
}

/* cuBLAS's FP32 GEMV y = V x (V: [n_k, d], one query row of dO as x) on the H200: which kernel and order it takes
   per (n_k, d), read from 214 probed shapes (n_k 32 .. 5000, d 8 .. 256; probe_flex*.npz); the boundaries between
   probed n_k are placed inside the measured interval, the cases of d never probed are inferred. Each thread sums
   its columns by an FMA chain from +0; the threads' partials are then added by a shuffle tree (offsets P/2 .. 1 over
   the next power of two, absent threads adding nothing) or, for gemv2T, in thread order. */
typedef struct {
  size_t threads; /* thread t holds columns t base + k step, k < per (and below d) */
  size_t base, step, per;
  int chain; /* partials added in thread order (gemv2T_kernel_val) instead of the tree */
} gemv_plan_t;

/* contiguous chunks of ch columns */
static gemv_plan_t gemv_chunks(size_t d, size_t ch) {
  if (ch == 0) ch = 1;
  return (gemv_plan_t){(d + ch - 1) / ch, ch, 1, ch, 0};
}
/* p threads of every p-th column */
static gemv_plan_t gemv_strided(size_t d, size_t p, int chain) {
  return (gemv_plan_t){p, 1, p, (d + p - 1) / p, chain};
}

static gemv_plan_t gemv_plan(size_t n_k, size_t d) {
  /* gemv2T_kernel_val<..., 128, 16, 2, 2, ...>: from n_k 280 at d >= 192 (250 < boundary <= 280), from 777 at
     d >= 96 (750 < boundary <= 777) */
  if ((d >= 192 && n_k >= 280) || (d >= 96 && n_k > 750)) return gemv_strided(d, 16, 1);
  if (n_k > 700 && d < 96) { /* internal::gemvx::kernel, long matrices (700 < boundary <= 750) */
    if (d == 64) return gemv_strided(d, 4, 0);
    if (d == 80) return gemv_chunks(d, 20);
    if ((d > 56 && d % 16 == 8) || (n_k > 4000 && d >= 48)) /* 72, 88; 48, 56 at n_k 5000 (3000 < b <= 5000) */
      return gemv_strided(d, 2, 0);
    return gemv_chunks(d, (d + 1) / 2); /* two halves */
  }
  /* gemvx, contiguous chunks: 16 for d >= 96 below n_k 280 (250 < boundary <= 280), else 8; halves up to d 16 */
  size_t p = d >= 96 && n_k < 280 ? 16 : 8;
  return gemv_chunks(d, d <= 16 ? d / 2 : (d + p - 1) / p);
}

double aa_attn_cublas_gemv(const double *x, const double *v, size_t n_k, size_t d, aa_fmt_t alu) {
  gemv_plan_t g = gemv_plan(n_k, d);
  double part[16]; /* gemv_plan gives at most 16 threads */
  for (size_t t = 0; t < g.threads && t < 16; t++) {
    part[t] = 0;
    for (size_t k = 0, c = t * g.base; k < g.per && c < d; k++, c += g.step)
      part[t] = aa_attn_rnd(aa_attn_fma(x[c], v[c], part[t], alu), AA_FMT_FP32);
  }
  if (g.chain)
    for (size_t t = 1; t < g.threads; t++)
      part[0] = add_in(part[0], part[t], alu, AA_FMT_FP32);
  else
    tree_down(part, aa_attn_pow2_ceil(g.threads), 1, g.threads, alu, AA_FMT_FP32);
  return part[0];
}

/* cuDNN's compute_dot_do_o (the kernel its SDPA backward launches before the fused bprop; cuDNN 9.19 on the H200,
   the templated and the d = 64, 128, 256 specialized kernels alike) as read by fixtures/h200-nan/probe_cudnn_order.py
   through cuDNN's own dQ (README-gpu 8.10): every 8 consecutive columns belong to one of 16 lanes per 128-column
   chunk (lane t: columns 128 k + 8 t .. + 7); a lane adds the products of its 8 columns in pairs, ((p0 + p1) + (p2 +
   p3)) + (p4 + p5)) + (p6 + p7), one such partial per chunk, the chunks' partials in order; then the lanes by the xor
   butterfly 8, 4, 2, 1 (lane 0 with 8 first). Every D probed at 32 head dims (8 .. 256) and 1 to 1000 rows is this
   tree. The bits of a pair sum, fma(o1, g1, o0 g0) or o0 g0 + o1 g1, cannot be told apart when the products are
   exact (BF16 O and dO); the FMA is taken. */
static double dot_do_o_pair(const double *o, const double *g, size_t c, size_t d, aa_fmt_t alu, aa_fmt_t f) {
  double p = prod(o, g, c, alu, f);
  return c + 1 < d ? aa_attn_rnd(aa_attn_fma(o[c + 1], g[c + 1], p, alu), f) : p;
}

double aa_attn_cudnn_dot_do_o(const double *o, const double *g, size_t d, aa_fmt_t alu, aa_fmt_t f) {
  enum { LANES = 16, PER = 8, CHUNK = LANES * PER };
  double lane[LANES];
  for (size_t t = 0; t < LANES; t++) {
    lane[t] = 0;
    for (size_t c0 = t * PER; c0 < d; c0 += CHUNK) {
      double part = dot_do_o_pair(o, g, c0, d, alu, f);
      for (size_t c = c0 + 2; c < c0 + PER && c < d; c += 2)
        part = add_in(part, dot_do_o_pair(o, g, c, d, alu, f), alu, f);
      lane[t] = c0 < CHUNK ? part : add_in(lane[t], part, alu, f); /* the first chunk's partial as it is (-0 kept) */
    }
  }
  tree_down(lane, LANES, 1, LANES, alu, f);
  return lane[0];
}
