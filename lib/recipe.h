/* attnacc: precision recipes (data describing how a kernel rounds), presets and the recipe-file parser. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_RECIPE_H
#define AA_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "dropout.h"
#include "exp.h"
#include "fmt.h"
#include "gemm.h"
#include "reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A recipe is data: for every intermediate the format it is rounded to, the
   accumulation model of every product, tile sizes, the softmax scheme and the
   dQ reduction. The attn module runs any recipe; presets name real kernels.
   Every field is one `key = value` line of the recipe file format; the table
   of keys, values, defaults and what each models is lib/recipe/KEYS.md. All
   roundings are round-to-nearest-even with subnormals kept. */
typedef struct aa_recipe aa_recipe_t;

/* fwd.softmax: how the forward normalises. */
typedef enum {
  AA_SOFTMAX_ONLINE_LSE = 0, /* "online-lse": running max, rescale, divide at the end (FA2, NKI CTE) */
  AA_SOFTMAX_TWO_PASS,       /* "two-pass": whole row max, sum, P = p/l before PV (naive math attention) */
  AA_SOFTMAX_FIXED_SHIFT,    /* "fixed-shift": one constant shift fwd.shift for every row, no running max, no
                                rescale; saves (shift, 1/l) per row ([blackwell-fa] 3.1, 3.5) */
  AA_SOFTMAX_GUARDED,        /* "guarded": shift anchored to each row's first visible key block; a query tile
                                failing the range checks is recomputed online and saves LSE ([blackwell-fa] 3.2, 3.4) */
  AA_SOFTMAX_COUNT
} aa_softmax_t;

/* bwd.norm: how the backward normalises the recomputed weights. */
typedef enum {
  AA_BWDNORM_LSE = 0, /* "lse": P = exp(S*c - LSE) per score from the LSE checkpoint (FA2, NKI) */
  AA_BWDNORM_RECIP,   /* "recip": rows with a saved reciprocal scale dO by it once in the preprocessing pass and
                         recompute unnormalised exp(S*c - shift); rows saved as LSE use it ([blackwell-fa] 3.5) */
  AA_BWDNORM_COUNT
} aa_bwd_norm_t;

/* softcap.tanh: the tanh of the softcap (problem.h). */
typedef enum {
  AA_TANH_EXACT = 0, /* "exact": binary64 tanh rounded to alu (correctly rounded FP32 but for double rounding) */
  AA_TANH_APPROX,    /* "approx": a model of CUDA tanh.approx.f32 (cutlass::fast_tanh, flash-attn utils.h:399):
                        the exact tanh rounded to nearest with an 18-bit significand (mean relative error about
                        1.3e-6, max 2^-18); measured on an H200 over 2.1e7 arguments (experiments/README-gpu.md):
                        mean 1.14e-6, max 1.11e-5 (2^-16.5); the size of the error, not its bits */
  AA_TANH_COUNT
} aa_tanh_t;

/* mask.score: the score a kernel gives a key the attention mask, a bias's
   -Inf or the key padding masks (problem.h; not the causal or window masks,
   which kernels skip). */
typedef enum {
  AA_MASKSC_NEGINF = 0, /* "neginf": -Inf: the key is skipped, as the problem defines (default) */
  AA_MASKSC_LOWEST,     /* "lowest": the ALU format's lowest finite value (a finfo.min additive mask): weight 0
                           unless the whole row is masked, then uniform weights over the row */
  AA_MASKSC_ZERO,       /* "zero": 0 (a padded key scored 0 instead of -Inf, the cuDNN NaN of
                           experiments/README-gpu.md section 8) */
  AA_MASKSC_FILL,       /* "fill": a key the boolean mask or the key padding masks gets s + mask.fill (rounded
                           to the io format, entering where mask.enter puts the bias): PyTorch hands cuDNN a
                           boolean attn_mask as the additive where(mask, 0, -65504) in the query's dtype; a
                           -Inf bias entry stays skipped. A fully masked row then keeps its keys' softmax */
  AA_MASKSC_COUNT
} aa_mask_score_t;

/* mask.enter: where the additive bias and the logit offset enter the score. */
typedef enum {
  AA_MASKAT_AFTER_CAP = 0, /* "after-cap": on the logit after the softcap, as ALiBi (problem.h; default) */
  AA_MASKAT_BEFORE_CAP,    /* "before-cap": on the logit before the softcap's tanh */
  AA_MASKAT_BEFORE_SCALE,  /* "before-scale": on the raw q.k before the softmax scale (the bias is scaled too) */
  AA_MASKAT_SCALE_FMA,     /* "scale-fma": in the FMA that applies the scale, x = fl(S scale + b) (scale_fold = s;
                              cuDNN, read from its LSE: experiments/README-gpu.md 8.10) */
  AA_MASKAT_COUNT
} aa_mask_enter_t;

/* mask.empty_lse: the LSE a kernel stores for a row with no visible key. */
typedef enum {
  AA_EMPTYLSE_NEGINF = 0, /* "neginf": -Inf, the problem's definition (default) */
  AA_EMPTYLSE_POSINF,     /* "posinf": +Inf, flash-attn's softmax.h:180 (sum == 0) */
  AA_EMPTYLSE_ZERO,       /* "zero": 0, a finite placeholder */
  AA_EMPTYLSE_COUNT
} aa_empty_lse_t;

/* scale_fold: where the softmax scale enters the scores (both passes). */
typedef enum {
  AA_SCALE_Q = 0, /* "q": Q*scale rounded to q_scale_fmt at load (NKI load_q_dy) */
  AA_SCALE_S,     /* "s": S*scale rounded to s_fmt after the product (naive) */
  AA_SCALE_EXP,   /* "exp": scale folded into the exp argument (FA2 exp2 FMA) */
  AA_SCALE_COUNT
} aa_scale_fold_t;

/* exp_form: the exponential's base and argument. */
typedef enum {
  AA_EXPFORM_NATURAL = 0, /* "natural": exp(fl(S*c - b)), NKI activation(exp, bias=-LSE) */
  AA_EXPFORM_EXP2_FMA,    /* "exp2-fma": exp2(fmaf(S, c, -b)), c and b carry log2(e) (FA2) */
  AA_EXPFORM_EXP2_MULSUB, /* "exp2-mul-sub": exp2(fl(fl(S*c) - b)), FA2 built with UNFUSE_FMA (PyTorch) */
  AA_EXPFORM_COUNT
} aa_exp_form_t;

/* fwd.lse_form: how the forward forms the natural-log LSE it saves (fwd.checkpoint = lse). */
typedef enum {
  AA_LSE_FMA = 0,      /* "fma": fl(m*se + log l), one FFMA (FA2 softmax.h:180) */
  AA_LSE_LOG2_MAX,     /* "log2-max": the running max kept in log2 units m' = fl(m*c) (exp2 forms): rescale
                          exp2(fl(m'_old - m'_new)), LSE = fl(fl(m' / log2e) + log l) (xformers kernel_forward.h
                          iterative_softmax, `mi / kLog2e + fast_log(s_prime)`) */
  AA_LSE_LOG2_TRIP,    /* "log2-trip": the fma LSE through base 2 and back, fl(fl(lse * fl(1/fl(ln2))) * fl(ln2)):
                          FlexAttention's dense path stores logsumexp / log(2), its backward multiplies by log(2) */
  AA_LSE_LOG2_LN2,     /* "log2-ln2": the running max in log2 units as log2-max, LSE = fl(fl(m' * fl(ln 2)) + log l)
                          (cudnn-h100's decode, read from cuDNN's own LSE: experiments/README-gpu.md 8.10) */
  AA_LSE_LOG2_LN2_FMA, /* "log2-ln2-fma": as log2-ln2 in one FFMA, LSE = fl(m' * fl(ln 2) + log l) (cudnn-h100's
                          prefill, read from cuDNN's own LSE: README-gpu 8.10) */
  AA_LSE_COUNT
} aa_lse_form_t;

/* bwd.d_order: the order of D = rowsum(O dO) (lib/attn/backward.c, aa_attn_rowsum_o_do). */
typedef enum {
  AA_D_ORDER_SEQ = 0,   /* "seq": products added in column order, in bwd.d_tile partials */
  AA_D_ORDER_FA2_LANES, /* "fa2-lanes": FA2's dot_do_o, kBlockKSmem / 8 lanes of its kernel head dim */
  AA_D_ORDER_LANES_128, /* "lanes-128": 16 lanes of 128-column chunks (inferred for cuDNN in README-gpu 8.8; the
                           probe of 8.10 read cudnn-dot instead) */
  AA_D_ORDER_XFORMERS,  /* "xformers-lanes": computeDelta's lanes, shfl_xor ascending (kernel_backward.h) */
  AA_D_ORDER_TORCH_SUM, /* "torch-sum": PyTorch's CUDA sum over the last dim (Reduce.cuh reduce_kernel; probed on the
                           H200, README-gpu 8.9) */
  AA_D_ORDER_CUDNN_DOT, /* "cudnn-dot": cuDNN's compute_dot_do_o, pair sums in 16 lanes of 128-column chunks (probed
                           on the H200, README-gpu 8.10) */
  AA_D_ORDER_COUNT
} aa_d_order_t;

/* exp: how the exponential itself is evaluated. */
typedef enum {
  AA_EXPIMPL_EXACT = 0, /* "exact": exp/exp2 in binary64 of the alu-format argument, rounded to alu_fmt */
  AA_EXPIMPL_COUNT      /* packed / polynomial constructions are added here (lib/exp.h) */
} aa_exp_impl_t;

/* fwd.checkpoint: what the forward saves for the backward. */
typedef enum {
  AA_CKPT_LSE = 0,      /* "lse": LSE = m*scale + log(l) in lse_fmt (FA2) */
  AA_CKPT_NEGMAX_RECIP, /* "negmax-recip": (-m, 1/l) pair, host forms LSE = -(neg_max + log(recip)) (NKI) */
  AA_CKPT_COUNT
} aa_checkpoint_t;

/* fwd.o_norm: how O (or P for two-pass) is divided by the row sum. */
typedef enum {
  AA_NORM_DIVIDE = 0, /* "divide": fl(x / l) */
  AA_NORM_RECIPROCAL, /* "reciprocal": r = fl(1/l), fl(x * r) */
  AA_NORM_COUNT
} aa_norm_t;

/* bwd.d_source: how D (the softmax-backward row sum) is formed. */
typedef enum {
  AA_DSRC_O_DO = 0, /* "o-do": D = rowsum(O * dO) over the head axis ([nki-bwd] Step 1) */
  AA_DSRC_P_DP,     /* "p-dp": D = rowsum(P * dP) over the key axis (textbook, naive) */
  AA_DSRC_COUNT
} aa_d_source_t;

/* bwd.dq_scale / bwd.dk_scale: where the softmax scale is applied to a gradient. */
typedef enum {
  AA_GSCALE_NONE = 0, /* "none": the scale is already inside (scaled Q, or scaled dS) */
  AA_GSCALE_TILE,     /* "tile": per K tile, fused with the accumulation (NKI dQ, L1558-1565) */
  AA_GSCALE_END,      /* "end": once on the fp32 accumulator before the final rounding (FA2) */
  AA_GSCALE_COUNT
} aa_grad_scale_t;

/* fwd.qkv_fmt: the format the forward casts Q, K, V to (none: the io values). */
typedef enum { AA_QKV_NONE = 0, AA_QKV_E4M3, AA_QKV_E5M2, AA_QKV_COUNT } aa_fwd_qkv_fmt_t;

/* fwd.qkv_scale: one power-of-two scale per KV head (Q: per KV-head group) or per tensor. */
typedef enum { AA_QKV_SCALE_HEAD = 0, AA_QKV_SCALE_TENSOR, AA_QKV_SCALE_COUNT } aa_qkv_scale_t;
/* quant.fp8_scope: the scale of quant.* = fp8-tensor, one per tensor or one per (KV head, column of d) over the
   tokens (SageAttention per_channel_fp8). */
typedef enum { AA_QUANT_SCOPE_TENSOR = 0, AA_QUANT_SCOPE_CHANNEL, AA_QUANT_SCOPE_COUNT } aa_quant_scope_t;
/* quant.v_axis: V's quantisation blocks along the head dimension or along the keys (the PV product's
   contraction axis; SageAttention3's scaled_fp4_quant_trans). */
typedef enum { AA_QUANT_AXIS_D = 0, AA_QUANT_AXIS_KEYS, AA_QUANT_AXIS_COUNT } aa_quant_axis_t;
/* quant.nvfp4_global: NVFP4's FP32 tensor scale 448 x 6 / amax (TransformerEngine), or fixed: 1 for the operands
   and 448 x 6 for P against its running max (SageAttention3). */
typedef enum { AA_NVFP4_GLOBAL_TENSOR = 0, AA_NVFP4_GLOBAL_FIXED, AA_NVFP4_GLOBAL_COUNT } aa_nvfp4_global_t;

/* fwd.qk_rotate: an orthogonal rotation of Q and K applied before the cast. */
typedef enum { AA_ROTATE_NONE = 0, AA_ROTATE_HADAMARD, AA_ROTATE_COUNT } aa_qk_rotate_t;

/* bwd.ds_scale: whether and how dS carries the softmax scale into the dQ/dK products. */
typedef enum {
  AA_DS_SCALE_OFF = 0, /* "off": the scale comes later (bwd.dq_scale, bwd.dk_scale) */
  AA_DS_SCALE_ON,      /* "on": the ds_fmt dS times the scale, rounded again (naive's dS*scale tensor) */
  AA_DS_SCALE_FUSED,   /* "fused": the FP32 dS times the scale, then one ds_fmt rounding (xformers) */
  AA_DS_SCALE_COUNT
} aa_ds_scale_t;

/* bwd.dkv_accumulate: how dK/dV tiles are summed over query tiles. */
typedef enum {
  AA_KVACC_CHAIN = 0, /* "chain": the product keeps accumulating into the accumulator (register/TMEM acc, FA2) */
  AA_KVACC_ADD, /* "add": a fresh PSUM product per q-tile group, then acc = fl(acc + psum) (NKI tensor_tensor) */
  AA_KVACC_COUNT
} aa_kv_accumulate_t;

/* bwd.gqa_reduce: how dK/dV of the query heads sharing one KV head are combined. */
typedef enum {
  AA_GQA_ACCUMULATE =
      0,              /* "accumulate": one accumulator for the whole group (NKI section accumulators, L1166-1180) */
  AA_GQA_SUM_ROUNDED, /* "sum-rounded": per-head dK/dV rounded to io, then summed over the group in alu and
                         rounded again (FA2 mha_bwd: dk_expanded in the input dtype, then a sum over the group) */
  AA_GQA_COUNT
} aa_gqa_reduce_t;

/* Conditional keys: a recipe line `when COND: key = value` sets key only
   for the problems COND holds for, so that one recipe holds a kernel's mask-
   and length-dependent routes (e.g. `when causal and n >= 32768: dq_reduce =
   fp32-ordered`). COND is terms joined by `and`: `causal`, `dense` (not
   causal), `masked` (the problem has an attention mask, an additive bias,
   key padding or a logit offset: what SDPA receives as an attn_mask),
   `unmasked` (none of these), or VAR OP INTEGER with VAR one of n (= n_k, the key length), n_q,
   n_k, d and OP one of >=, >, <=, <, ==, !=. The key and value are checked
   when the file is parsed (on a copy of the recipe as it stands at that
   line; `base`, `name` and nested `when` are refused); the same key under
   the same condition twice is an error naming both lines. A recipe keeps
   its conditional lines (those of its base first, then its own, in file
   order); aa_recipe_resolve applies the lines whose condition holds, in that
   order (a later matching line wins), on top of the unconditional keys. */
#define AA_RECIPE_WHEN_MAX 24
#define AA_RECIPE_WHEN_TERMS 4
typedef enum { AA_WHEN_N = 0, AA_WHEN_NQ, AA_WHEN_NK, AA_WHEN_D, AA_WHEN_VAR_COUNT } aa_recipe_when_var_t;
typedef enum {
  AA_WHEN_GE = 0, /* listed with the two-character operators first: the parser tries them in this order */
  AA_WHEN_GT,
  AA_WHEN_LE,
  AA_WHEN_LT,
  AA_WHEN_EQ,
  AA_WHEN_NE,
  AA_WHEN_OP_COUNT
} aa_recipe_when_op_t;
typedef struct {
  aa_recipe_when_var_t var;
  aa_recipe_when_op_t op;
  uint64_t value;
} aa_recipe_when_term_t;
typedef struct {
  int mask;      /* -1: either mask; 0: dense only; 1: causal only */
  int masked;    /* -1: either; 0: no attn_mask only; 1: with one only (aa_recipe_case_t.masked) */
  size_t nterms; /* comparisons, all of which must hold */
  aa_recipe_when_term_t term[AA_RECIPE_WHEN_TERMS];
  char key[64];    /* the key it sets (a key of the table, or a dq_reduce_ / dropout_ family key) */
  char value[192]; /* its value, as written (trimmed) */
} aa_recipe_when_t;

/* What a condition is evaluated on: the problem's mask and sizes. */
typedef struct {
  int causal;
  size_t n_q, n_k, d;
  int masked; /* 1: an attention mask, bias, key padding or logit offset (attn.h: aa_attn_case) */
} aa_recipe_case_t;

/* ---- fields ---- */
struct aa_recipe {
  char name[64];
  aa_fmt_t io_fmt; /* format of q, k, v, dO as loaded and of O, dQ, dK, dV as stored */
  aa_fmt_t
      alu_fmt; /* format elementwise engines compute in: every op result is rounded to it before its destination */
  aa_fmt_t scale_fmt; /* format the softmax scale constant is held in */

  /* Scores and exponential (shared by forward and backward). */
  aa_scale_fold_t scale_fold;
  aa_fmt_t q_scale_fmt; /* Q*scale rounded to this at load (scale_fold = q) */
  aa_fmt_t s_fmt;       /* S = QK^T rounded to this (and S*scale with scale_fold = s) */
  aa_exp_form_t exp_form;
  aa_exp_impl_t exp_impl;

  /* Forward. */
  aa_softmax_t fwd_softmax;
  size_t fwd_tile_q, fwd_tile_k; /* 0 = the whole axis */
  aa_accum_t fwd_acc_qk, fwd_acc_pv;
  aa_fmt_t fwd_p_fmt;      /* P rounded to this before PV */
  aa_fmt_t fwd_rowsum_fmt; /* row-sum accumulator */
  int fwd_rowsum_rounded;  /* 1: sum the p_fmt-rounded weights; 0: the alu-format weights */
  double
      fwd_rescale_threshold; /* rescale the running max only when it grows by more than this (exp-argument units) */
  aa_fmt_t fwd_o_acc_fmt;    /* O accumulator (rescale multiply rounds to it) */
  aa_checkpoint_t fwd_checkpoint;
  aa_fmt_t fwd_lse_fmt; /* checkpoint values (LSE, or neg_max and recip) */
  aa_norm_t fwd_o_norm;

  /* Backward tiling. */
  size_t bwd_tile_q, bwd_tile_k; /* 0 = whole axis */
  size_t bwd_tile_k_short;       /* K tile used when n_k < bwd_tile_k (NKI: 128); 0 = n_k */
  size_t bwd_sub_k;              /* K sub-tile of the dQ product, chained in one PSUM (NKI 128); 0 = tile_k */
  size_t bwd_section;            /* KV section length, dQ round trip between sections; 0 = one section */
  size_t bwd_section_per_d;      /* section /= power_of_2(ceil(d / this)) (NKI 128); 0 = no scaling */
  size_t bwd_q_group;            /* q tiles whose dK/dV products share one PSUM before the add (>= 1) */
  size_t bwd_d_tile;             /* head-dim tile of the D rowsum (NKI 128); 0 = one sequential sum */
  int bwd_skip_masked;           /* 1: skip (q-tile, k-tile) pairs with every element masked */

  /* Backward formats and products. */
  aa_accum_t bwd_acc_qk, bwd_acc_dp, bwd_acc_dv, bwd_acc_dk, bwd_acc_dq;
  aa_fmt_t bwd_p_dv_fmt, bwd_p_ds_fmt; /* P as used for dV and for dS */
  aa_fmt_t bwd_dp_fmt;                 /* dP rounded to this before subtracting D */
  aa_d_source_t bwd_d_source;
  aa_fmt_t bwd_d_fmt;  /* D (dy_o_sum) and its partial sums */
  aa_fmt_t bwd_ds_fmt; /* dS before the dQ/dK products */
  int bwd_ds_scale; /* 0 off; 1: ds_fmt dS times the scale, rounded again (naive); 2 (fused): FP32 dS times the scale,
                       one rounding */
  aa_fmt_t bwd_dq_acc_fmt; /* dQ accumulator across K tiles */
  aa_grad_scale_t bwd_dq_scale, bwd_dk_scale;
  aa_fmt_t bwd_dq_section_fmt; /* dQ stored (HBM) between KV sections: the section round trip */
  aa_fmt_t bwd_dkv_acc_fmt;    /* dK/dV section accumulators */
  aa_kv_accumulate_t bwd_dkv_accumulate;
  aa_fmt_t bwd_dsinks_fmt; /* dsinks accumulators */
  aa_gqa_reduce_t bwd_gqa_reduce;
  /* bwd.k_prescale = on (Triton's fused-attention tutorial, arg_k): the backward reads
     K' = io(alu(K * alu(scale * log2 e))) in place of K for the recomputed scores (the exp argument is then
     S' - LSE log2 e) and for the dQ product, whose end scale is alu(ln 2) instead of the softmax scale. */
  int bwd_k_prescale;
  /* How the LSE checkpoint is formed and how the backward recomputes the
     weights from it, where a kernel differs from FA2 (keys fwd.lse_form,
     bwd.exp_form, bwd.twopass_p; written only when not the defaults). These
     roundings decide whether exp(S*c - LSE) of the row maximum is exactly 1
     or overflows when S is huge (all-constant inputs: the ulp of S*scale
     exceeds the exp range; experiments/README-gpu.md section 8). */
  int fwd_lse_form;    /* aa_lse_form_t */
  int bwd_exp_form;    /* 0 ("fwd"): the forward's exp_form; else aa_exp_form_t + 1 (the backward's own) */
  int bwd_twopass_lse; /* fwd.softmax = two-pass: 0 ("saved") the backward reuses the forward's P; 1 ("lse")
                          it recomputes exp(S*c - LSE) from the checkpoint */

  /* Normalisation variants of [blackwell-fa] (fixed shift, guarded causal, saved
     reciprocal; keys in KEYS.md). The shift is in exp-argument units
     (log2 units with exp_form = exp2-fma: weight = exp2(fma(S, c, -b)));
     the guard bounds are base-2 exponents of the weight value. */
  double fwd_shift;    /* fixed-shift: the nominal shift b */
  double fwd_guard_lo; /* range checks: every weight and the row sum in [2^lo, 2^hi), finite, non-zero */
  double fwd_guard_hi;
  size_t fwd_sub_q;       /* guarded: query sub-tile whose fully masked contractions are skipped; 0 = tile_q */
  aa_bwd_norm_t bwd_norm; /* lse or recip */
  aa_fmt_t bwd_do_fmt;    /* recip: the scaled dO = dO * (1/l) rounded to this (an MMA operand) */

  /* Dropout (keys `dropout_<name>`, lib/dropout.h): with scheme none both
     passes apply the problem's keep mask; otherwise the backward redraws
     its mask with the scheme and its own tiling (twin L974-981) while the
     forward applies the problem's mask (or draws it with its tiling when
     the problem has none). Written in the recipe text only when on. */
  aa_dropout_t dropout;

  /* dQ reduction across KV blocks (keys `dq_reduce = NAME` and
     `dq_reduce_<param>`, lib/reduce.h): the partials of one (q tile, KV
     section) are reduced by this strategy into the dQ accumulator; the adds
     round to alu then bwd.dq_acc_fmt (the strategy's add_fmt/acc_fmt are
     overwritten with these), and the section round trip stays bwd.section
     with bwd.dq_section_fmt. Written in the recipe text with the
     parameters its kind reads. */
  aa_reduce_t bwd_dq_reduce;

  /* FA2's split-KV forward and key-block order (keys fwd.k_order,
     fwd.splits, fwd.split_sms; lib/attn/forward_split.c). Written in the
     recipe text only when not the defaults (asc, 0, 0), so that the text
     (and hashes) of other recipes stay as they were. */
  int fwd_k_desc;       /* fwd.k_order = desc: key blocks from the last to the first (FA2 n_block loop) */
  size_t fwd_splits;    /* split-KV into this many ranges of key blocks, combined by LSE (0 or 1: none) */
  size_t fwd_split_sms; /* > 0: the split count is FA2's num_splits_heuristic for this many SMs (H100/H200: 132) */
  /* > 0: a fixed split size instead of a split count: split s holds keys [s S, (s + 1) S), ceil(n_k / S) splits
     (a multiple of the forward key tile; overrides fwd.splits and, with tiling = fa2, the heuristic's count:
     the split-KV kernel always runs). No decision then depends on the batch (the batch-invariant rule). */
  size_t fwd_split_keys;
  int bwd_q_desc;      /* bwd.q_order = desc: query tiles from the last to the first (FA2 m_block loop) */
  int fwd_rowsum_quad; /* fwd.rowsum_split = quad: FA2's four per-lane partial row sums, combined at the end */
  int bwd_d_order;     /* aa_d_order_t: bwd.d_order, the summation order of D */
  int bwd_dp_gemv; /* bwd.dp_gemv = cublas-h200: with n_q = 1, dP in the order of cuBLAS's FP32 GEMV (backward.c) */
  int fwd_qk_gemv, bwd_qk_gemv; /* fwd/bwd.qk_gemv = cublas-h200: with n_q = 1, QK^T as that GEMV (common.c) */
  int fwd_rowsum_fma;           /* fwd.rowsum_rescale = fma: each partial's rescale fused into its next add */
  /* tiling = fa2: fwd.tile_q/tile_k, fwd.splits, bwd.tile_q/tile_k are
     chosen per problem by aa_fa2_dispatch (lib/attn.h) for fwd.split_sms
     SMs, as PyTorch's flash backend chooses FA2's kernels; fixed: the keys
     as written. sfu = sm90: the rescale factor uses aa_exp2f_sm90, the LSE
     log __logf (aa_logf_fast_sm90) and the split-KV combine libdevice
     expf/logf (aa_expf_sm90, aa_logf_sm90) with its butterfly sum; exact:
     binary64 values rounded to alu. Both written only when not default. */
  int tiling_fa2;
  int sfu_sm90;

  /* FP8 forward operands (keys fwd.qkv_fmt, fwd.qkv_scale, fwd.qk_rotate,
     fwd.p_scale_exp; lib/attn/fp8.c). The forward (only) reads Q, K, V
     rotated (optional Hadamard of Q and K, rounded to io) and cast to
     fwd.qkv_fmt with power-of-two scales, held dequantized: a power-of-two
     descale folded into the softmax scale (FA3) is exact, so this is the
     kernel's arithmetic. The backward reads the io inputs (FA3 has no FP8
     backward). Written in the recipe text only when not the defaults. */
  int fwd_qkv_fmt;        /* aa_fwd_qkv_fmt_t: none, e4m3, e5m2 */
  int fwd_qkv_scale;      /* aa_qkv_scale_t: per-head (FA3 descale per batch and KV head) or per-tensor */
  int fwd_qk_rotate;      /* aa_qk_rotate_t: none, hadamard (incoherent processing, outside the kernel) */
  size_t fwd_p_scale_exp; /* P times 2^k before its fwd.p_fmt rounding (FA3/FA4 FP8 Max_offset = 8) */
  /* fwd.sink_at: where the problem's sink logits join the online softmax: open (0) sets the row's first max and
     row sum with them; end (1) adds exp(sink - m) to the row sum after the last key block against the row's final
     max m, which the sink never raises (FA4 at 0251105a, flash_fwd_sm100.py:2731-2742, softmax.py finalize). */
  int fwd_sink_end;

  /* Exp constructions of the weights (keys fwd.exp and bwd.exp, value a
     lib/exp.h spec "name[:key=value,...]"): fwd_exp for the forward weights,
     bwd_exp for the backward recompute. Each construction gets the base-2
     argument of the weight (exp2-fma: the FP32 fma result; natural: that
     argument times log2(e) in FP32). The default `exact` keeps the `exp`
     key's evaluation bit for bit (binary64 exp rounded to alu); BF16-native
     constructions (schraudolph-bf16, quadratic-bf16) make the weight the BF16
     value of the packed evaluator ([blackwell-fa] section 3.3). Written in the
     recipe text only when not `exact`, so other recipes keep their text. */
  aa_exp_t fwd_exp, bwd_exp;

  /* FA4's partial exp emulation (keys fwd.exp_emu, fwd.exp_emu_freq,
     fwd.exp_emu_res, fwd.exp_emu_start; flash-attention
     flash_attn/cute/softmax.py apply_exp2_convert): each row of a key block
     is cut into fragments of 32 keys; in fragment j the key pair starting at
     k (even) takes fwd_exp_emu (FA4's software exp2) when k % freq >=
     freq - res, j >= start and j is not the last fragment, the others
     fwd_exp (the hardware exp2). freq = 0: off. Written only when freq > 0. */
  aa_exp_t fwd_exp_emu;
  size_t fwd_exp_emu_freq, fwd_exp_emu_res, fwd_exp_emu_start;

  /* Softcap (problem.h) tanh (key softcap.tanh, KEYS.md; written in the
     recipe text only when not exact): how the kernel evaluates tanh on the
     ALU-format argument (lib/attn/common.c, aa_attn_score_mod). */
  aa_tanh_t softcap_tanh;
  /* ALiBi under a causal mask (key alibi.causal = abs|col, written only when
     col): col adds slope * j instead of the documented -slope |i + n_k - n_q
     - j| under a causal mask with no left window (FA2's Is_causal,
     flash_api.cpp:157), as FA2's kernels do (alibi.h:48, mask.h:157): the same softmax and
     gradients, an LSE shifted by slope (i + n_k - n_q) and other FP32
     roundings of the biased score. */
  int alibi_causal_col;

  /* Attention mask, bias, key padding and fully masked rows (problem.h;
     keys mask.score, mask.enter, mask.empty_o, mask.empty_lse, KEYS.md;
     written only when not the defaults, which are the problem's definition;
     lib/attn/common.c aa_attn_score_mod, aa_attn_visible, aa_attn_finish_empty).
     mask_empty_nan: 1 makes a row with no visible key NaN as the math
     backend's softmax of an all -Inf row: its O and dQ rows and the dK, dV
     of every key of its head (P^T dO, dS^T Q); 0 (default): O = 0, no
     gradient. */
  aa_mask_score_t mask_score;
  double mask_fill; /* mask.score = fill: the additive fill of a boolean-masked key, before its io rounding */
  aa_mask_enter_t mask_enter;
  int mask_empty_nan;
  aa_empty_lse_t mask_empty_lse;
  /* Block-scaled and low-precision quantisation of the operands (keys
     quant.q, quant.k, quant.v, quant.do, quant.p, quant.ds, quant.block,
     quant.scale_rnd, quant.satfinite; values aa_bq_kind_t of lib/fmt.h;
     lib/attn/quant.c). Q, K, V and dO are quantised once, before both
     passes, in blocks along the head dimension (the contraction axis of
     QK^T and of dP = dO V^T); P before the forward's PV product and dS
     before the dQ and dK products, in blocks along the key axis of each
     tile row. Values are held dequantised (element times scale, exact in
     binary64), so the products see the kernel's operands. Written in the
     recipe text only when not the defaults (none, 0, rceil, on). */
  int quant_q, quant_k, quant_v, quant_do, quant_p, quant_ds; /* aa_bq_kind_t */
  size_t quant_block;  /* values per scale; 0: the kind's own (32, 16; SageAttention's 128 rows of Q, 64 of K) */
  int quant_scale_rnd; /* aa_bq_scale_rnd_t of the MX kinds' E8M0 scales */
  int quant_satfinite; /* FP8 elements saturate (1) or overflow to NaN/Inf (0) */
  /* SageAttention's additions (keys quant.smooth_k, quant.fp8_scope,
     quant.fp8_max, quant.p_scale, quant.pv_buffer; lib/attn/quant.c). */
  int quant_smooth_k;   /* K minus its mean over tokens before quant.k; the stored LSE corrected */
  int quant_fp8_scope;  /* aa_quant_scope_t: fp8-tensor's scale per tensor or per (KV head, column) */
  double quant_fp8_max; /* fp8-tensor maps amax to this (448; SageAttention2++'s V: 2.25) */
  double quant_p_scale; /* P times this (after 2^fwd.p_scale_exp) before its fwd.p_fmt cast (Sage: 2^0.807) */
  int quant_pv_buffer;  /* each key tile's P V summed from zero, then added into O (Sage RO_temp, inst_buf) */
  size_t quant_warp_q, quant_warp_k; /* rows per warp block of the int*-thread kinds (0: 32 for Q, 64 for K) */
  /* SageAttention3's (keys quant.smooth_q, quant.v_axis, quant.nvfp4_global). */
  size_t quant_smooth_q;  /* Q minus the mean of each group of this many rows before quant.q, held plus it (0: off) */
  int quant_v_axis;       /* aa_quant_axis_t: V's blocks along d or along the keys */
  int quant_nvfp4_global; /* aa_nvfp4_global_t: NVFP4's FP32 scale from the amax, or fixed (operands 1, P 448 x 6) */
  /* mask.phantom_tile T (0: off; aa_attn_phantom_keys): with an attention
     mask or bias, when n_k mod T = T/2 (pytorch 196678: "seq_len % 128 ==
     64"; the H200 grids show no such NaN at the other residues, 1 to 104),
     the key slots past n_k in
     the last T-key tile enter dQ's backward with score 0 and K = V = 0, so
     their dP = dO . V = 0 and dS = P (0 - D), P = exp(0 - LSE), overflows
     FP32 where P does (a row's LSE below -ln(FLT_MAX), about -88.72; -Inf
     for a fully masked row) or where P is finite but P |D| is not (LSE
     below about -88.72 + ln|D|); that row of dQ is NaN (Inf times the zero
     K); dK and dV of those slots are never stored. Inferred for cuDNN from H200 data (fixtures/h200-nan) and the
     report of pytorch 196678 ("padded keys scored 0 instead of -inf"). */
  size_t mask_phantom_tile;
  /* bwd.scale_fold: where the backward applies the softmax scale to its recomputed scores, 0 ("fwd") as the
     forward does (scale_fold), else an aa_scale_fold_t + 1 (s or exp): a backward that is another engine than the
     forward (cudnn-h100's decode forward, n_q = 1; experiments/README-gpu.md 8.7). */
  int bwd_scale_fold;
  /* exp_coef: with scale_fold = exp and an exp2 form, c = scale * log2 e formed in binary64 from the exact log2 e and
     rounded to alu (0, "host": FA2's host code) or as the ALU-format product fl(scale) * fl(log2 e) (1, "alu": a
     device-side FP32 multiply; cudnn-h100, inferred from the H200, experiments/README-gpu.md 8.7). */
  int exp_coef_alu;

  /* Conditional keys (`when COND: key = value`, see aa_recipe_when_t),
     written after every other key by aa_recipe_format; aa_attn_run
     resolves them against its problem before it runs. */
  size_t nwhen;
  aa_recipe_when_t when[AA_RECIPE_WHEN_MAX];
};

/* The forward keeps its running max in log2 units (fwd.lse_form = log2-max, log2-ln2 or log2-ln2-fma). */
static inline int aa_recipe_lse_log2(const aa_recipe_t *r) {
  return r->fwd_lse_form == AA_LSE_LOG2_MAX || r->fwd_lse_form == AA_LSE_LOG2_LN2 ||
         r->fwd_lse_form == AA_LSE_LOG2_LN2_FMA;
}

/* Presets. */
size_t aa_recipe_preset_count(void);
const char *aa_recipe_preset_name(size_t i);
const char *aa_recipe_preset_describe(size_t i);
int aa_recipe_preset(aa_recipe_t *out, const char *name, aa_error_t *err); /* AA_ENOTFOUND names the preset */
/* The recipe file a preset is (lib/recipe/presets/NAME.recipe, with its
   comments); NULL for an unknown name. */
const char *aa_recipe_preset_text(const char *name);
/* A variant spec, the one grammar of --variant and of the Python package:
   a preset NAME; a recipe file (a path ending in .recipe or containing
   '/'); NAME:key=value,... (the preset with those keys set in order, named
   as written, at most 63 characters; a value cannot hold a comma: use a
   file); or recipe text (it holds a line break, or a '=' before any ':',
   such as "base = fa2"; named by its `name` key, else "custom"). A file that sets
   no `name` key (even with `base`) is named by its base name less .recipe. The result passes
   aa_recipe_check. AA_ENOTFOUND for an unknown preset, AA_EINVAL for a bad
   key, value or check, AA_EIO/AA_EFORMAT from the file. */
int aa_recipe_from_spec(aa_recipe_t *out, const char *spec, aa_error_t *err);
/* The next spec of a comma-separated list (--variant, --variants): from *p
   to the comma that ends it, where a NAME:key=value spec runs on over commas
   while the next item is a key=value (no ':' or '/' before its '='). Copies
   it into out[cap] and moves *p past its comma (NULL after the last).
   Returns the spec's length; 0 for an empty item, cap or more when it does
   not fit (out is then truncated). */
size_t aa_recipe_spec_next(char *out, size_t cap, const char **p);

/* Set one key; an unknown key or value gives AA_EINVAL naming both. The
   macro key `mixed_precision = on|off` sets bwd.d_fmt, bwd.dq_acc_fmt,
   bwd.dkv_acc_fmt and bwd.dsinks_fmt to fp32 (on) or to io (off), as NKI's
   mixed_precision flag does; `base = PRESET` replaces the whole recipe. */
int aa_recipe_set(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err);
/* Parse a recipe file of `key = value` lines ('#' comments, blank lines);
   the optional first key `base = PRESET` starts from a preset, else the
   file starts from the key table's defaults (fa2's values, name custom). Errors name
   the file and line; a key given twice is AA_EFORMAT naming both lines; a
   folder is AA_EINVAL. */
int aa_recipe_parse_file(aa_recipe_t *out, const char *path, aa_error_t *err);
/* The same from a string (the `path` only names it in messages). */
int aa_recipe_parse_string(aa_recipe_t *out, const char *text, const char *path, aa_error_t *err);
/* Canonical `key = value` text of every field (for result files); returns
   the length it needs (snprintf-style). */
size_t aa_recipe_format(char *buf, size_t len, const aa_recipe_t *r);
/* Consistency of a recipe (each gradient receives the scale exactly once,
   tile sizes, two-pass needs whole-row tiles, ...); AA_EINVAL with a message. */
int aa_recipe_check(const aa_recipe_t *r, aa_error_t *err);
/* 1 when an exp construction is the default `exact` (fwd.exp, bwd.exp):
   the pipeline then evaluates the weight as the `exp` key says, bit for bit. */
int aa_recipe_exp_is_default(const aa_exp_t *e);
/* 1 when the two recipes have the same fields (names ignored). */
int aa_recipe_equal(const aa_recipe_t *a, const aa_recipe_t *b);

/* Conditional keys. Parse the condition text COND (without `when` and the
   colon) into w (mask and terms; key and value untouched); AA_EINVAL with
   a message naming the bad term. */
int aa_recipe_when_parse(aa_recipe_when_t *w, const char *cond, aa_error_t *err);
/* Canonical condition text ("causal and n >= 32768"; the mask first, then
   the comparisons as written) and the whole line ("when COND: key =
   value\n"); snprintf-style lengths. */
size_t aa_recipe_when_cond_text(char *buf, size_t len, const aa_recipe_when_t *w);
size_t aa_recipe_when_format(char *buf, size_t len, const aa_recipe_when_t *w);
/* 1 when w's condition holds for the case. */
int aa_recipe_when_matches(const aa_recipe_when_t *w, const aa_recipe_case_t *c);
/* The concrete recipe of r for one problem: r's unconditional keys with
   every matching conditional line applied in order, no conditional lines
   left (out->nwhen = 0), same name; it passes aa_recipe_check (AA_EINVAL
   naming the case otherwise). out may equal r. */
int aa_recipe_resolve(aa_recipe_t *out, const aa_recipe_t *r, const aa_recipe_case_t *c, aa_error_t *err);

/* The key table (lib/recipe/keys.c): one row per key, in the order
   aa_recipe_format writes them; set, format, equal and the per-key part of
   check are loops over it, and KEYS.md agrees with it (tests/tkeys.sh). */
#define AA_RECIPE_KEY_OMITTED 1u /* written only when not at its default (alone or with its group) */
#define AA_RECIPE_KEY_MACRO 2u   /* not stored: sets other keys (mixed_precision, base) */
#define AA_RECIPE_KEY_FAMILY 4u  /* stands for a family of keys (dropout_<name>, dq_reduce_<name>) */
typedef struct {
  const char *key;          /* the key; a family's prefix ("dropout_*", "dq_reduce") */
  const char *values;       /* kind of value ("format", "gemm model", "integer", ...; "" when names says) */
  const char *const *names; /* enumerated values, NULL-terminated; NULL when not an enumeration */
  size_t max;               /* integers: the largest value; else 0 */
  const char *def;          /* default: the value of a recipe file without `base` (fa2's), "" for macros */
  const char *exact;        /* a rounding site: the value that makes it exact (fp64, fp64-seq, exact); else NULL */
  const char *desc;         /* one line: what it models */
  const char *cite;         /* where the modelled behaviour is documented ("" when nowhere in particular) */
  unsigned flags;           /* AA_RECIPE_KEY_* */
  int group;                /* > 0: keys of one mechanism, written together (fwd.exp and bwd.exp); 0: none */
} aa_recipe_key_info_t;
size_t aa_recipe_key_count(void);
/* Row i (0 <= i < aa_recipe_key_count()); AA_EINVAL past the end. */
int aa_recipe_key_info(aa_recipe_key_info_t *out, size_t i);
/* The value of one stored key as aa_recipe_format writes it (for a family
   its kind: dropout_* none|on, dq_reduce fp32-ordered|other); AA_ENOTFOUND
   for an unknown key or a macro. */
int aa_recipe_value(char *buf, size_t len, const aa_recipe_t *r, const char *key);

#ifdef __cplusplus
}
#endif
#endif
