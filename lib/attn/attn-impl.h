/* attnacc: internal helpers of the attn module (format rounding, ALU ops, exp, the run context). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ATTN_IMPL_H
#define AA_ATTN_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "attn.h"
#include "exp.h"
#include "fmt.h"
#include "gemm.h"
#include "problem.h"
#include "recipe.h"

/* log2(e) rounded to binary64 (not relying on the non-ISO M_LOG2E). */
#define AA_ATTN_LOG2E 1.4426950408889634073599246810019
#define AA_ATTN_LN2 0.69314718055994530941723212145818

/* Round x to fmt (RNE, subnormals, Inf on overflow). For BF16 from an
   FP32-representable value the fast bit path of fmt.h is used; otherwise
   aa_round rounds the double once (never through FP32 first). */
static inline double aa_attn_rnd(double x, aa_fmt_t fmt) {
  if (fmt == AA_FMT_FP64) return x;
  if (fmt == AA_FMT_FP32) return (double)(float)x;
  if (fmt == AA_FMT_BF16) {
    float g = (float)x;
    if ((double)g == x || x != x) return (double)aa_bf16_rne(g);
  }
  aa_round_opts_t o = {fmt, AA_RND_NE, 1, 0};
  return aa_round(x, &o, NULL);
}

/* One elementwise operation of an engine computing in `alu`: the exact
   result rounded once. With FP32 operands the binary64 sum, difference,
   product or quotient rounded to FP32 equals the directly rounded result
   (53 >= 2*24 + 2), so computing in double and rounding is exact emulation. */
static inline double aa_attn_alu(double exact, aa_fmt_t alu) {
  return aa_attn_rnd(exact, alu);
}

/* The smallest power of two >= n (1 for n = 0). */
static inline size_t aa_attn_pow2_ceil(size_t n) {
  size_t p = 1;
  while (p < n)
    p <<= 1;
  return p;
}

/* Fused multiply-add in the ALU format: one rounding of a*b + c. */
static inline double aa_attn_fma(double a, double b, double c, aa_fmt_t alu) {
  if (alu == AA_FMT_FP32) return (double)fmaf((float)a, (float)b, (float)c);
  if (alu == AA_FMT_FP64) return fma(a, b, c);
  return aa_attn_rnd(fma(a, b, c), alu); /* narrower ALUs: binary64 fma then one rounding (may double-round) */
}

/* The run context shared by forward and backward. */
typedef struct {
  const aa_problem_t *pb;
  const aa_recipe_t *r;
  size_t n_q, n_k, d, heads, kv_heads, group; /* group = heads / kv_heads */
  double scale;                               /* softmax scale held in scale_fmt */
  double c;                                   /* coefficient of S in the exp argument (see exp_arg) */
  double se;     /* scale between S units and natural-log units (scale if scale_fold = exp, else 1) */
  double l2e;    /* log2(e) in the ALU format (FA2's float(M_LOG2E)) */
  double ks;     /* dropout keep_scale in the ALU format (1 without dropout) */
  double dq_mul; /* the final (or per-tile) dQ scale: scale, or alu(ln 2) with bwd.k_prescale = on */
  /* Dropout keep masks [heads][n_q][n_k] (NULL: none): the forward's (the
     problem's, or drawn with the recipe's forward tiling) and the one the
     backward applies (the problem's when recipe dropout is none, else the
     recipe scheme's redraw with the backward tiling, twin L974-981). */
  const uint8_t *keep_fwd, *keep_bwd;
  const double *sinks; /* [heads][num_sinks], rounded to alu, or NULL */
  const double *Q, *K, *V, *dO;
  const double *v_scale; /* quant.pv_buffer: V's FP8 descale per (KV head, column), or NULL (1) */
  /* bwd.norm = recip (lib/attn/backward_recip.c): the exp bias of every row
     [heads][n_q] (the saved shift for reciprocal rows, the LSE bias for LSE
     rows); NULL: the backward forms it from the LSE. */
  const double *bias;
  /* Exp constructions of the weights (recipe fwd.exp / bwd.exp); NULL for
     the default `exact`, which keeps aa_attn_exp bit for bit. */
  const aa_exp_t *wexp_fwd, *wexp_bwd;
  /* fwd.exp_emu with fwd.exp_emu_freq > 0 (FA4's emulated pairs), else NULL */
  const aa_exp_t *wexp_emu;
  /* Score modifiers (problem.h; aa_attn_score_mod). mod: the problem has
     softcap or ALiBi. Softcap: S <- cap_out tanh(S sc_mul) in the ALU
     format, cap_out = 1 with scale_fold = exp (FA2 folds the softcap into
     the exp coefficient and the gradient scale: cx.scale, c and se then
     hold the softcap), else the softcap; the backward multiplies dS by
     dtanh = (1 - t^2) dt_mul (dt_mul = sc_mul with scale_fold = exp, FA2's
     calculate_dtanh, else 1). ALiBi: S <- fma(slope_e[h], dist, S) with
     slope_e the slope in the units of S. */
  int mod;
  double sc_mul, cap_out, dt_mul;
  const double *slope_e; /* [heads] or NULL */
  /* Attention mask, bias and logit offset (problem.h, recipe mask.* keys). masked: the problem has a mask
     (aa_problem_has_mask). The bias b + offset, rounded to alu, enters S (mask.enter) as alu(b / mask_div) when
     mask_div != 1, else alu(b * mask_mul): the units of S at that point. mask_low: the score of a masked key
     with mask.score = lowest or zero. scale_in_mod: mask.enter = scale-fma with a bias, so aa_attn_scores leaves S
     unscaled and aa_attn_score_mod forms fl(S scale + b) in one FMA. */
  int masked, scale_in_mod;
  double mask_div, mask_mul, mask_low;
  double mask_fill_io, mask_fill_s; /* mask.score = fill: mask.fill rounded to the io format, and in S units */
  /* The forward's P-cast counters (aa_attn_result_t p_cast, p_over,
     p_max), shared by its threads (updated once per row in a critical
     section); NULL outside aa_attn_forward. */
  aa_attn_result_t *pcast;
  aa_attn_first_t *first;  /* the result's record of the first non-finite value (NULL: not recorded) */
  aa_attn_device_t device; /* where the caller asked the passes to run (aa_attn_run_device) */
} aa_attn_ctx_t;

/* Record a non-finite value created at site (h, i, j) with its operands when it comes before the one recorded
   (attn.h's order; thread-safe). aa_attn_first_fwd records the first non-finite output of the forward. */
void aa_attn_first_note(const aa_attn_ctx_t *cx, aa_first_site_t site, size_t h, size_t i, size_t j, double value,
                        double a, double b, double c);
void aa_attn_first_fwd(const aa_attn_ctx_t *cx, const aa_attn_result_t *out);

/* P's cast to fwd.p_fmt. An FP8 p_fmt saturates under quant.satfinite: the
   PTX conversion from f32 to e4m3x2 / e5m2x2 exists only as
   cvt.rn.satfinite (the CUTLASS converter FA3 uses and the CuTe DSL's
   .to(Float8E4M3FN) of FA4's softmax.py:401 at 0251105a both lower to it). */
static inline double aa_attn_p_rnd(const aa_recipe_t *r, double x) {
  if ((r->fwd_p_fmt == AA_FMT_E4M3 || r->fwd_p_fmt == AA_FMT_E5M2) && r->quant_satfinite) {
    aa_round_opts_t o = {r->fwd_p_fmt, AA_RND_NE, 1, 1};
    return aa_round(x, &o, NULL);
  }
  return aa_attn_rnd(x, r->fwd_p_fmt);
}

/* exp_impl = exact: exp or exp2 evaluated in binary64 on the ALU-format
   argument, then rounded to the ALU format. Binary64 exp has error below
   1 ulp of binary64, so the FP32 result is the correctly rounded exp except
   when the exact value lies within ~2^-29 FP32-ulp of a rounding boundary
   (double rounding; probability about 2^-28 per call). */
static inline int aa_attn_exp2form(const aa_recipe_t *r) {
  return r->exp_form == AA_EXPFORM_EXP2_FMA || r->exp_form == AA_EXPFORM_EXP2_MULSUB;
}
static inline double aa_attn_exp(const aa_attn_ctx_t *cx, double a) {
  double e = aa_attn_exp2form(cx->r) ? exp2(a) : exp(a);
  return aa_attn_rnd(e, cx->r->alu_fmt);
}
/* The weight's argument S*c - b: one FMA (exp2-fma, natural), or with
   exp2-mul-sub FA2's UNFUSE_FMA form __fmul_rn(S, c) - b (softmax.h:85-86,
   defined by PyTorch's build: a multiply and a subtract, each rounded). */
static inline double aa_attn_exparg(const aa_attn_ctx_t *cx, double s, double b) {
  aa_fmt_t alu = cx->r->alu_fmt;
  if (cx->r->exp_form == AA_EXPFORM_EXP2_MULSUB) return aa_attn_alu(aa_attn_alu(s * cx->c, alu) - b, alu);
  return aa_attn_fma(s, cx->c, -b, alu);
}

/* A softmax weight exp(a) (exp2(a) for exp2-fma) by the construction e of
   fwd.exp / bwd.exp (NULL: aa_attn_exp). Constructions take the base-2
   argument in FP32 (lib/exp.h): the exp2-fma argument itself, or the natural
   argument times log2(e) in one FP32 multiply. BF16-native constructions
   return the BF16 weight the packed evaluator writes ([blackwell-fa] section 3.3:
   two consecutive keys per bf16x2 word; the lanes are independent, so the
   element-wise value is the packed one); rounding it to fwd.p_fmt = bf16
   afterwards is then exact. Only weights go through e: FA2's rescale factor
   alpha stays aa_attn_exp. */
static inline double aa_attn_wexp(const aa_attn_ctx_t *cx, const aa_exp_t *e, double a) {
  if (e == NULL) return aa_attn_exp(cx, a);
  float x = aa_attn_exp2form(cx->r) ? (float)a : (float)a * (float)cx->l2e;
  return (double)aa_exp_eval(e, x);
}

/* log(l) of the LSE = m*scale + log(l) (softmax.h:180): __logf with
   sfu = sm90, else binary64 log rounded to alu. */
static inline double aa_attn_lse_log(const aa_attn_ctx_t *cx, double l) {
  if (cx->r->sfu_sm90) return (double)aa_logf_fast_sm90((float)l);
  return aa_attn_alu(log(l), cx->r->alu_fmt);
}

/* Q tile as used by the score product: with scale_fold = q the engine
   multiplies by scale in the ALU format and writes the kernel dtype ([nki-bwd]
   load_q_dy scale_first, attention_bwd.py:698-699/751/790). */
void aa_attn_load_q(const aa_attn_ctx_t *cx, double *dst, const double *q, size_t rows);
/* The emulation of a varlen problem (pb->varlen_batch > 0, checked): every
   sequence through aa_attn_run on its own, outputs packed (varlen.c). */
int aa__attn_run_varlen(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                        const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_error_t *err);
/* C [rows x cols] = A B^T over the head dimension (A [rows x d], B [cols x d], row-major) with the given model; with
   gemv nonzero, one query row in the problem and an FP32 model, cuBLAS's FP32 GEMV over all n_k keys instead
   (vendor_order.c; bwd.dp_gemv, fwd/bwd.qk_gemv): an FP64 model (explain's exact site) stays exact. */
int aa_attn_abt(const aa_attn_ctx_t *cx, double *C, const double *A, size_t rows, const double *B, size_t cols,
                aa_accum_t model, int gemv);
/* Score tile S[tq x tk] = Qeff K^T by aa_attn_abt, rounded to s_fmt and, with scale_fold = s, scaled and rounded
   again (naive: bf16(bf16(QK^T)*scale)). */
int aa_attn_scores(const aa_attn_ctx_t *cx, double *S, const double *qeff, size_t tq, const double *k, size_t tk,
                   aa_accum_t model, int gemv);
/* Score modifiers of problem.h on a score tile S [tq x tk] of head h (query
   rows i0.., keys j0..), right after aa_attn_scores; G [tq x tk] (NULL in
   the forward) receives the factor dtanh the backward multiplies dS by. */
void aa_attn_score_mod(const aa_attn_ctx_t *cx, double *S, double *G, size_t h, size_t i0, size_t tq, size_t j0,
                       size_t tk);
/* Visibility of a tile of head h (1 visible): returns the number of visible elements. The causal and window
   masks hide a key; a key the attention mask, a -inf bias or the key padding masks is hidden with mask.score =
   neginf and visible otherwise (aa_attn_score_mod then gives it the recipe's masked score). */
size_t aa_attn_visible(const aa_attn_ctx_t *cx, uint8_t *vis, size_t h, size_t i0, size_t tq, size_t j0, size_t tk);
/* The fully masked rows as the recipe's mask.empty_o and mask.empty_lse finish them (after the backward; a no-op
   at the defaults, which are the problem's definition). */
void aa_attn_finish_empty(const aa_attn_ctx_t *cx, aa_attn_result_t *out);
/* mask.phantom_tile (recipe.h): dQ rows NaN where a phantom slot's dS = P (0 - D) of the last key tile
   overflows FP32 (P = exp(-LSE)). */
void aa_attn_phantom_keys(const aa_attn_ctx_t *cx, aa_attn_result_t *out);
/* Two-pass softmax of one whole row: P[j] = round(p_j / l, fwd.p_fmt) for
   visible j (0 elsewhere); returns m and l (l = 0 for an empty row). */
void aa_attn_twopass_row(const aa_attn_ctx_t *cx, double *P, const double *S, const uint8_t *vis, size_t n,
                         const double *sinks, double *m_out, double *l_out);

int aa_attn_forward(const aa_attn_ctx_t *cx, aa_attn_result_t *out);
/* The GPU emulation of the forward (cuda.c): 1 when it implements the context's recipe and problem; and the forward
   itself on the GPU, or with on_host the same per-row code on host threads (AA_EUNSUPPORTED when unsupported or
   without a device; the caller then runs aa_attn_forward). */
int aa_attn_cuda_fwd_supported(const aa_attn_ctx_t *cx);
int aa_attn_forward_cuda(const aa_attn_ctx_t *cx, aa_attn_result_t *out, int on_host);
/* The same for the backward (cuda_bwd.c): AA_EUNSUPPORTED when the CPU must run it (outside the list, no device,
   no memory, or a non-finite pair, whose first occurrence only backward.c records). */
int aa_attn_cuda_bwd_supported(const aa_attn_ctx_t *cx);
/* The format code of attn-core.h, or -1 outside FP32, BF16 and FP16 (cuda.c). */
int aa_attn_core_fmt(aa_fmt_t f);
/* A tc-kK-fF model (AA_SUM_BLOCK, RZ, K <= 32, F <= 25, 23 or 13 output bits): its K, F and output bits; fp32-seq
   (the FP32 FMA chain) as K = 0; 0 for any other model (cuda.c). */
int aa_attn_tc_model(aa_accum_t m, int *bk, int *fb, int *ob);
int aa_attn_backward_cuda(const aa_attn_ctx_t *cx, aa_attn_result_t *out, int on_host);

/* The forward's own Q, K, V (lib/attn/fp8.c) when the recipe rotates Q and
   K (fwd.qk_rotate) or casts the operands (fwd.qkv_fmt): fresh arrays the
   caller frees; all NULL (and AA_OK) when it does neither. */
/* quant.q, quant.k, quant.v, quant.do (lib/attn/quant.c): quantised copies
   of the context's Q, K, V, dO, which then point at them; owned[0..3]
   receives the copies (NULL where the key is none), freed by the caller. */
#define AA_ATTN_QUANT_OWNED 6 /* the quantised Q, K, V, dO, quant.smooth_k's means, V's FP8 descales */
int aa_attn_quant_operands(aa_attn_ctx_t *cx, double *owned[AA_ATTN_QUANT_OWNED], aa_error_t *err);
/* quant.smooth_k after both passes: the stored LSE gets the lost scale q.km back. */
void aa_attn_quant_smooth_lse(const aa_attn_ctx_t *cx, double *owned[AA_ATTN_QUANT_OWNED], aa_attn_result_t *out);
/* One key tile's P V into acc: chained by fwd.acc_pv, or through quant.pv_buffer's zeroed buffer. */
int aa_attn_quant_pv(const aa_attn_ctx_t *cx, size_t kvh, double *acc, const double *P, const double *V, size_t tq,
                     size_t tk);
/* quant.p, quant.ds: the rows x cols tile x (row stride ld) quantised in
   place, blocks along each row, NVFP4's tensor scale from the tile's amax. */
void aa_attn_quant_rows(const aa_recipe_t *r, int kind, double *x, size_t rows, size_t cols, size_t ld);
int aa_attn_fwd_operands(const aa_attn_ctx_t *cx, double **qf, double **kf, double **vf, aa_error_t *err);
/* One (head, q tile) of the online-LSE forward (forward.c): O rows and LSE. */
int aa_attn_fwd_tile_online(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq,
                            double *qe, double *S, double *P, uint8_t *vis, double *acc, double *m, double *l);
/* One key block [j0, j0 + tk) of the online-LSE softmax of that tile
   (forward.c): scores, running max m and rescale, row sums l, P V into acc
   (q already loaded into qe); a fully masked block changes nothing. l holds
   AA_ATTN_ROWSUM_LANES partial sums per row (row a at l + a *
   AA_ATTN_ROWSUM_LANES; fwd.rowsum_split), aa_attn_row_sum combines them. */
#define AA_ATTN_ROWSUM_LANES 4
double aa_attn_row_sum(const aa_attn_ctx_t *cx, const double *la);
int aa_attn_fwd_block(const aa_attn_ctx_t *cx, size_t h, size_t i0, size_t tq, double *qe, size_t j0, size_t tk,
                      double *S, double *P, uint8_t *vis, double *acc, double *m, double *l);
/* fwd.k_order = desc, fwd.splits or fwd.split_sms (forward_split.c): the FA2
   split-KV forward of one (head, q tile), same buffers; and its split count. */
int aa_attn_fwd_tile_split(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq, double *qe,
                           double *S, double *P, uint8_t *vis, double *acc, double *m, double *l);
size_t aa_attn_fwd_nsplits(const aa_attn_ctx_t *cx);
/* One (head, q tile) of the fixed-shift or guarded forward (forward_fixed.c),
   same buffers (tile_q x tile_k scores); a flagged guarded tile is redone by
   aa_attn_fwd_tile_online. */
int aa_attn_fwd_tile_shifted(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq,
                             double *qe, double *S, double *P, uint8_t *vis, double *acc, double *m, double *l);
/* Natural-log LSE equivalent to the saved (shift b, row sum l) of the fixed-shift forward (forward_fixed.c): the
   weights were exp2(S*c - b) (exp2-fma) or exp(S*c - b) (natural), so LSE = (b + log2 l) ln 2 or b + log l; formed
   in binary64 and rounded to lse_fmt (only LSE-reading consumers use it: an LSE backward, dsinks). */
double aa_attn_lse_equiv(const aa_attn_ctx_t *cx, double b, double l);
/* bwd.norm = recip preprocessing (backward_recip.c): *dO_eff [heads][n_q][d]
   = dO scaled by each reciprocal row's 1/l (rounded to bwd.do_fmt), dO for
   LSE rows; *bias [heads][n_q] as aa_attn_ctx_t.bias. Both malloc'd. */
int aa_attn_recip_prepare(const aa_attn_ctx_t *cx, const aa_attn_result_t *out, double **dO_eff, double **bias);
int aa_attn_backward(const aa_attn_ctx_t *cx, aa_attn_result_t *out);
/* D_i = rowsum(O_i dO_i) as the recipe forms it (bwd.d_order, bwd.d_tile, bwd.d_fmt): row o of O, row g of dO. */
double aa_attn_rowsum_o_do(const aa_attn_ctx_t *cx, const double *o, const double *g);
/* vendor_order.c: torch.sum(o * g, -1) over one row of a [rows, d] FP32 tensor in the order of PyTorch's CUDA
   reduce_kernel (bwd.d_order = torch-sum), each product and addition in alu then rounded to f; and one element of
   cuBLAS's FP32 GEMV, sum_c x_c v_c for a matrix of n_k rows, in its order on the H200 (bwd.dp_gemv = cublas-h200);
   and cuDNN's compute_dot_do_o over one row (bwd.d_order = cudnn-dot), products and additions as torch-sum's.
 */
double aa_attn_torch_sum(const double *o, const double *g, size_t d, size_t rows, aa_fmt_t alu, aa_fmt_t f);
double aa_attn_cublas_gemv(const double *x, const double *v, size_t n_k, size_t d, aa_fmt_t alu);
double aa_attn_cudnn_dot_do_o(const double *o, const double *g, size_t d, aa_fmt_t alu, aa_fmt_t f);

#endif
