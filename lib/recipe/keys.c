/* attnacc: the recipe key table (one row per key) and the loops over it: set, format, equal and the per-key check. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe-impl.h"

static const char *const softmax_names[] = {"online-lse", "two-pass", "fixed-shift", "guarded", NULL};
static const char *const bwdnorm_names[] = {"lse", "recip", NULL};
static const char *const fold_names[] = {"q", "s", "exp", NULL};
static const char *const bwd_fold_names[] = {"fwd", "q", "s", "exp", NULL}; /* "q" is refused by the check */
static const char *const exp_coef_names[] = {"host", "alu", NULL};
static const char *const expform_names[] = {"natural", "exp2-fma", "exp2-mul-sub", NULL};
static const char *const bwd_expform_names[] = {"fwd", "natural", "exp2-fma", "exp2-mul-sub", NULL};
static const char *const lseform_names[] = {"fma", "log2-max", "log2-trip", "log2-ln2", "log2-ln2-fma", NULL};
static const char *const twopass_p_names[] = {"saved", "lse", NULL};
static const char *const tiling_names[] = {"fixed", "fa2", NULL};
static const char *const sfu_names[] = {"exact", "sm90", NULL};
static const char *const expimpl_names[] = {"exact", NULL};
static const char *const ckpt_names[] = {"lse", "negmax-recip", NULL};
static const char *const norm_names[] = {"divide", "reciprocal", NULL};
static const char *const dsrc_names[] = {"o-do", "p-dp", NULL};
static const char *const gscale_names[] = {"none", "tile", "end", NULL};
static const char *const kvacc_names[] = {"chain", "add", NULL};
static const char *const dsscale_names[] = {"off", "on", "fused", NULL};
static const char *const qkvfmt_names[] = {"none", "e4m3", "e5m2", NULL};
static const char *const qkvscale_names[] = {"per-head", "per-tensor", NULL};
static const char *const rotate_names[] = {"none", "hadamard", NULL};
static const char *const gqa_names[] = {"accumulate", "sum-rounded", NULL};
static const char *const onoff_names[] = {"off", "on", NULL};
static const char *const order_names[] = {"asc", "desc", NULL};
static const char *const sink_at_names[] = {"open", "end", NULL};
static const char *const rowsum_split_names[] = {"none", "quad", NULL};
static const char *const d_order_names[] = {"seq",       "fa2-lanes", "lanes-128", "xformers-lanes",
                                            "torch-sum", "cudnn-dot", NULL};
static const char *const dp_gemv_names[] = {"none", "cublas-h200", NULL};
static const char *const rescale_names[] = {"mul", "fma", NULL};
static const char *const tanh_names[] = {"exact", "approx", NULL};
static const char *const alibi_names[] = {"abs", "col", NULL};
static const char *const maskscore_names[] = {"neginf", "lowest", "zero", "fill", NULL};
static const char *const maskenter_names[] = {"after-cap", "before-cap", "before-scale", "scale-fma", NULL};
static const char *const emptyo_names[] = {"zero", "nan", NULL};
static const char *const emptylse_names[] = {"neginf", "posinf", "zero", NULL};
/* aa_bq_kind_t and aa_bq_scale_rnd_t of lib/fmt.h, in enum order (tests/tattn_quant checks the kinds) */
static const char *const bq_names[] = {"none",       "mxfp8-e4m3",  "mxfp8-e5m2",  "mxfp4",      "nvfp4",
                                       "int8-block", "int8-thread", "int4-thread", "fp8-tensor", NULL};
static const char *const bq_scale_names[] = {"rceil", "floor", NULL};
static const char *const quant_scope_names[] = {"tensor", "channel", NULL};
static const char *const quant_axis_names[] = {"d", "keys", NULL};
static const char *const nvfp4_global_names[] = {"tensor", "fixed", NULL};

static int set_mixed_precision(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err);
static int set_base(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err);

/* The field's offset and, for the check that a stored value fits it (tests/trecipe), its size. */
#define F_(field) offsetof(aa_recipe_t, field), .size = sizeof(((aa_recipe_t *)0)->field)
#define SIZE_MAX_KEY ((size_t)1 << 30)

/* Order = order of aa_recipe_format output. The default column is the
   value a recipe file without `base` starts from (fa2's; KEYS.md). Rows
   after bwd.gqa_reduce are written only when not at their default, so that
   the text (and hashes) of recipes that leave them alone stay as they were
   before the keys existed. `exact` marks a rounding site (attnacc explain);
   dq_reduce = fp32-ordered is exact once alu and bwd.dq_acc_fmt are. */
const aa_recipe_key_t aa_recipe_keys[] = {
    /* clang-format off */
    {.key = "name", .type = AA_KEY_STRING, .offset = F_(name), .def = "custom",
     .desc = "identifies the recipe in result files", .cite = ""},
    {.key = "io", .type = AA_KEY_FMT, .offset = F_(io_fmt), .def = "bf16", .exact = "fp64",
     .desc = "format of Q, K, V, dO as loaded and of O, dQ, dK, dV as stored", .cite = ""},
    {.key = "alu", .type = AA_KEY_FMT, .offset = F_(alu_fmt), .def = "fp32", .exact = "fp64",
     .desc = "format the elementwise engines compute in: every op result is rounded to it first", .cite = "[nki-bwd]"},
    {.key = "scale_fmt", .type = AA_KEY_FMT, .offset = F_(scale_fmt), .def = "fp32", .exact = "fp64",
     .desc = "format the softmax scale constant is held in", .cite = ""},
    {.key = "scale_fold", .type = AA_KEY_ENUM, .offset = F_(scale_fold), .names = fold_names, .def = "exp",
     .desc = "where the scale enters the scores", .cite = "[nki-bwd] attention_bwd.py:698-699"},
    {.key = "q_scale_fmt", .type = AA_KEY_FMT, .offset = F_(q_scale_fmt), .def = "bf16", .exact = "fp64",
     .desc = "with scale_fold = q: the format Q*scale is written in at load", .cite = ""},
    {.key = "s_fmt", .type = AA_KEY_FMT, .offset = F_(s_fmt), .def = "fp32", .exact = "fp64",
     .desc = "S = QK^T (and S*scale with scale_fold = s) rounded to this after the product", .cite = "[nki-bwd] attention_bwd.py:935"},
    {.key = "exp_form", .type = AA_KEY_ENUM, .offset = F_(exp_form), .names = expform_names, .def = "exp2-fma",
     .desc = "the exponential's base and argument: natural exp(fl(S*c - b)) or exp2(fmaf(S, c, -b))", .cite = "[nki-bwd] attention_bwd.py:964-970, [fa2]"},
    {.key = "exp", .type = AA_KEY_ENUM, .offset = F_(exp_impl), .names = expimpl_names, .def = "exact",
     .desc = "dead key, kept so that recipe texts and hashes stay as they were: its only value is exact and the pipeline never reads it; fwd.exp and bwd.exp choose the evaluation", .cite = ""},
    {.key = "fwd.softmax", .type = AA_KEY_ENUM, .offset = F_(fwd_softmax), .names = softmax_names, .def = "online-lse",
     .desc = "forward normalisation", .cite = "[blackwell-fa] sections 3.1, 3.2, 3.5"},
    {.key = "fwd.tile_q", .type = AA_KEY_SIZE, .offset = F_(fwd_tile_q), .max = SIZE_MAX_KEY, .def = "128",
     .desc = "forward query tile", .cite = ""},
    {.key = "fwd.tile_k", .type = AA_KEY_SIZE, .offset = F_(fwd_tile_k), .max = SIZE_MAX_KEY, .def = "128",
     .desc = "forward key tile", .cite = ""},
    {.key = "fwd.acc_qk", .type = AA_KEY_ACCUM, .offset = F_(fwd_acc_qk), .def = "fp32-seq", .exact = "fp64-seq",
     .desc = "accumulation model of QK^T in the forward", .cite = ""},
    {.key = "fwd.acc_pv", .type = AA_KEY_ACCUM, .offset = F_(fwd_acc_pv), .def = "fp32-seq", .exact = "fp64-seq",
     .desc = "accumulation model of P V, chained across K tiles into the O accumulator", .cite = ""},
    {.key = "fwd.p_fmt", .type = AA_KEY_FMT, .offset = F_(fwd_p_fmt), .def = "bf16", .exact = "fp64",
     .desc = "P rounded to this before P V", .cite = "[fa2]"},
    {.key = "fwd.rowsum_fmt", .type = AA_KEY_FMT, .offset = F_(fwd_rowsum_fmt), .def = "fp32", .exact = "fp64",
     .desc = "row-sum accumulator l", .cite = ""},
    {.key = "fwd.rowsum_rounded", .type = AA_KEY_BOOL, .offset = F_(fwd_rowsum_rounded), .def = "off",
     .desc = "on: the row sum adds the p_fmt-rounded weights; off: the alu weights (FA2)", .cite = "[blackwell-fa] section 3.5"},
    {.key = "fwd.rescale_threshold", .type = AA_KEY_DOUBLE, .offset = F_(fwd_rescale_threshold), .def = "0",
     .desc = "rescale the running max only when it grows by more than this, in exp-argument units", .cite = ""},
    {.key = "fwd.shift", .type = AA_KEY_DOUBLE, .offset = F_(fwd_shift), .def = "0",
     .desc = "fixed-shift: the nominal shift b in exp-argument units", .cite = "[blackwell-fa] section 3.1"},
    {.key = "fwd.guard_lo", .type = AA_KEY_DOUBLE, .offset = F_(fwd_guard_lo), .def = "-126",
     .desc = "fixed-shift/guarded range checks", .cite = "[blackwell-fa] sections 3.2, 5.5"},
    {.key = "fwd.guard_hi", .type = AA_KEY_DOUBLE, .offset = F_(fwd_guard_hi), .def = "128",
     .desc = "upper end of that range", .cite = ""},
    {.key = "fwd.sub_q", .type = AA_KEY_SIZE, .offset = F_(fwd_sub_q), .max = SIZE_MAX_KEY, .def = "0",
     .desc = "guarded: query sub-tile whose fully masked contractions are skipped", .cite = "[blackwell-fa] sections 4.1, 3.4"},
    {.key = "fwd.o_acc_fmt", .type = AA_KEY_FMT, .offset = F_(fwd_o_acc_fmt), .def = "fp32", .exact = "fp64",
     .desc = "O accumulator", .cite = ""},
    {.key = "fwd.checkpoint", .type = AA_KEY_ENUM, .offset = F_(fwd_checkpoint), .names = ckpt_names, .def = "lse",
     .desc = "what the forward saves: lse (FA2) or the (-max, 1/l) pair (NKI)", .cite = "[nki-bwd]"},
    {.key = "fwd.lse_fmt", .type = AA_KEY_FMT, .offset = F_(fwd_lse_fmt), .def = "fp32", .exact = "fp64",
     .desc = "format of the checkpoint values", .cite = ""},
    {.key = "fwd.o_norm", .type = AA_KEY_ENUM, .offset = F_(fwd_o_norm), .names = norm_names, .def = "reciprocal",
     .desc = "how O is divided by the row sum: acc / l, or acc * fl(1/l)", .cite = ""},
    {.key = "bwd.tile_q", .type = AA_KEY_SIZE, .offset = F_(bwd_tile_q), .max = SIZE_MAX_KEY, .def = "128",
     .desc = "backward query tile", .cite = ""},
    {.key = "bwd.tile_k", .type = AA_KEY_SIZE, .offset = F_(bwd_tile_k), .max = SIZE_MAX_KEY, .def = "128",
     .desc = "backward key tile", .cite = ""},
    {.key = "bwd.tile_k_short", .type = AA_KEY_SIZE, .offset = F_(bwd_tile_k_short), .max = SIZE_MAX_KEY, .def = "0",
     .desc = "K tile used when n_k < bwd.tile_k", .cite = "[nki-bwd]"},
    {.key = "bwd.sub_k", .type = AA_KEY_SIZE, .offset = F_(bwd_sub_k), .max = SIZE_MAX_KEY, .def = "0",
     .desc = "sub-tiles of the dQ product chained in one PSUM", .cite = "[nki-bwd] attention_bwd.py:1504-1556"},
    {.key = "bwd.section", .type = AA_KEY_SIZE, .offset = F_(bwd_section), .max = SIZE_MAX_KEY, .def = "0",
     .desc = "KV section length", .cite = "[nki-bwd] attention_bwd.py:1162, 1188-1207, 1326-1335"},
    {.key = "bwd.section_per_d", .type = AA_KEY_SIZE, .offset = F_(bwd_section_per_d), .max = SIZE_MAX_KEY, .def = "0",
     .desc = "the section length is divided by power_of_2(ceil(d / this))", .cite = "[nki-bwd] attention_bwd.py:494-497"},
    {.key = "bwd.q_group", .type = AA_KEY_SIZE, .offset = F_(bwd_q_group), .max = SIZE_MAX_KEY, .def = "1",
     .desc = "q tiles whose dK/dV products share one PSUM before the add", .cite = ""},
    {.key = "bwd.d_tile", .type = AA_KEY_SIZE, .offset = F_(bwd_d_tile), .max = SIZE_MAX_KEY, .def = "0",
     .desc = "D = rowsum(O*dO) summed per head-dim tile of this width, then over the tiles", .cite = "[nki-bwd] attention_bwd.py:614-655, 1264-1270"},
    {.key = "bwd.skip_masked", .type = AA_KEY_BOOL, .offset = F_(bwd_skip_masked), .def = "on",
     .desc = "skip pairs whose elements are all masked", .cite = "[nki-bwd] attention_bwd.py:794-846"},
    {.key = "bwd.norm", .type = AA_KEY_ENUM, .offset = F_(bwd_norm), .names = bwdnorm_names, .def = "lse",
     .desc = "backward weights from the LSE checkpoint (lse) or the saved reciprocal (recip)", .cite = "[blackwell-fa] section 3.5"},
    {.key = "bwd.do_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_do_fmt), .def = "bf16", .exact = "fp64",
     .desc = "recip: the scaled dO = dO * (1/l) rounded to this (an MMA operand)", .cite = "[blackwell-fa] section 3.5"},
    {.key = "bwd.acc_qk", .type = AA_KEY_ACCUM, .offset = F_(bwd_acc_qk), .def = "fp32-seq", .exact = "fp64-seq",
     .desc = "recompute of QK^T in the backward", .cite = ""},
    {.key = "bwd.acc_dp", .type = AA_KEY_ACCUM, .offset = F_(bwd_acc_dp), .def = "fp32-seq", .exact = "fp64-seq",
     .desc = "dP = dO V^T", .cite = "[nki-bwd] attention_bwd.py:1019-1025"},
    {.key = "bwd.acc_dv", .type = AA_KEY_ACCUM, .offset = F_(bwd_acc_dv), .def = "fp32-seq", .exact = "fp64-seq",
     .desc = "dV = P^T dO", .cite = "[nki-bwd] attention_bwd.py:1568-1591"},
    {.key = "bwd.acc_dk", .type = AA_KEY_ACCUM, .offset = F_(bwd_acc_dk), .def = "fp32-seq", .exact = "fp64-seq",
     .desc = "dK = Q^T dS", .cite = "[nki-bwd] attention_bwd.py:1594-1617"},
    {.key = "bwd.acc_dq", .type = AA_KEY_ACCUM, .offset = F_(bwd_acc_dq), .def = "fp32-seq", .exact = "fp64-seq",
     .desc = "dQ partial = dS K per K tile", .cite = "[nki-bwd] attention_bwd.py:1548-1556"},
    {.key = "bwd.p_dv_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_p_dv_fmt), .def = "bf16", .exact = "fp64",
     .desc = "P as the operand of dV", .cite = ""},
    {.key = "bwd.p_ds_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_p_ds_fmt), .def = "fp32", .exact = "fp64",
     .desc = "P as the operand of dS", .cite = ""},
    {.key = "bwd.dp_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_dp_fmt), .def = "fp32", .exact = "fp64",
     .desc = "dP rounded to this before subtracting D", .cite = "[nki-bwd]"},
    {.key = "bwd.d_source", .type = AA_KEY_ENUM, .offset = F_(bwd_d_source), .names = dsrc_names, .def = "o-do",
     .desc = "D = rowsum(O*dO) over the head axis (o-do) or rowsum(P*dP) over the key axis (p-dp)", .cite = "[nki-bwd] Step 1"},
    {.key = "bwd.d_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_d_fmt), .def = "fp32", .exact = "fp64",
     .desc = "D, its products and partial sums", .cite = "[nki-bwd] attention_bwd.py:101"},
    {.key = "bwd.ds_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_ds_fmt), .def = "bf16", .exact = "fp64",
     .desc = "dS = (dP - D) * P rounded to this before the dQ/dK products", .cite = "[nki-bwd] attention_bwd.py:1029-1036"},
    {.key = "bwd.ds_scale", .type = AA_KEY_ENUM, .offset = F_(bwd_ds_scale), .names = dsscale_names, .def = "off",
     .desc = "on: bf16 dS times the scale, rounded again (naive); fused: the FP32 dS times the scale, one rounding (xformers)",
     .cite = "PyTorch mem_eff_attention/kernel_backward.h processBlockIJ (accum * scale before the scalar_t store)"},
    {.key = "bwd.dq_acc_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_dq_acc_fmt), .def = "fp32", .exact = "fp64",
     .desc = "dQ accumulator across K tiles", .cite = "[nki-bwd] attention_bwd.py:1558-1565"},
    {.key = "bwd.dq_scale", .type = AA_KEY_ENUM, .offset = F_(bwd_dq_scale), .names = gscale_names, .def = "end",
     .desc = "where dQ gets the scale", .cite = ""},
    {.key = "bwd.dk_scale", .type = AA_KEY_ENUM, .offset = F_(bwd_dk_scale), .names = gscale_names, .def = "end",
     .desc = "where dK gets the scale: end on the accumulator (FA2), none (already in Q or dS)", .cite = ""},
    {.key = "bwd.dq_section_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_dq_section_fmt), .def = "fp32", .exact = "fp64",
     .desc = "format of the dQ store between KV sections", .cite = ""},
    {.key = "bwd.dkv_acc_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_dkv_acc_fmt), .def = "fp32", .exact = "fp64",
     .desc = "dK/dV section accumulators", .cite = ""},
    {.key = "bwd.dkv_accumulate", .type = AA_KEY_ENUM, .offset = F_(bwd_dkv_accumulate), .names = kvacc_names, .def = "chain",
     .desc = "how dK/dV tiles are summed over query tiles: chain (FA2) or add per PSUM (NKI)", .cite = "[nki-bwd] attention_bwd.py:1568-1617"},
    {.key = "bwd.dsinks_fmt", .type = AA_KEY_FMT, .offset = F_(bwd_dsinks_fmt), .def = "fp32", .exact = "fp64",
     .desc = "dsinks partition accumulators", .cite = "[nki-bwd] attention_bwd.py:1355-1405"},
    {.key = "bwd.gqa_reduce", .type = AA_KEY_ENUM, .offset = F_(bwd_gqa_reduce), .names = gqa_names, .def = "sum-rounded",
     .desc = "how the query heads of one KV head are combined", .cite = "[nki-bwd] attention_bwd.py:1166-1180, 1340-1353"},
    {.key = "bwd.k_prescale", .type = AA_KEY_ENUM, .offset = F_(bwd_k_prescale), .names = onoff_names, .def = "off", .omit = AA_OMIT_DEFAULT,
     .desc = "on: the backward reads K * scale * log2(e) rounded to io for the scores and dQ, dQ scaled by ln 2 at the end",
     .cite = "triton python/tutorials/06-fused-attention.py@003da478: _attention.backward arg_k, _attn_bwd_dq, _attn_bwd dq *= LN2"},
    {.key = "fwd.lse_form", .type = AA_KEY_ENUM, .offset = F_(fwd_lse_form), .names = lseform_names, .def = "fma", .omit = AA_OMIT_DEFAULT,
     .desc = "the saved LSE: fma fl(m*se + log l); log2-max fl(fl(m'/log2e) + log l) from the max m' = fl(m*c) kept in log2 units (also the rescale argument m'_old - m'_new); log2-trip the fma LSE times fl(1/fl(ln2)), then times fl(ln2); log2-ln2 fl(fl(m' fl(ln2)) + log l) from log2-max's m'; log2-ln2-fma fl(m' fl(ln2) + log l), one FFMA (cuDNN's prefill; its decode is log2-ln2: both read from cuDNN's own LSE, README-gpu 8.10)",
     .cite = "FA2 softmax.h:180; PyTorch mem_eff_attention/kernel_forward.h iterative_softmax and `mi / kLog2e + fast_log(s_prime)`; torch/_higher_order_ops/flex_attention.py math_attention `logsumexp / math.log(2)`, sdpa_dense_backward `logsumexp * math.log(2)`"},
    {.key = "bwd.exp_form", .type = AA_KEY_ENUM, .offset = F_(bwd_exp_form), .names = bwd_expform_names, .def = "fwd", .omit = AA_OMIT_DEFAULT,
     .desc = "exp form of the backward's recomputed weights when it differs from the forward's (fwd: the exp_form key)",
     .cite = "PyTorch mem_eff_attention/kernel_backward.h (accum = scale * QK^T) and gemm/mma_from_smem.h accumApplyLSEToSmem `expf(accum[idx] - lse)`"},
    {.key = "bwd.twopass_p", .type = AA_KEY_ENUM, .offset = F_(bwd_twopass_lse), .names = twopass_p_names, .def = "saved", .omit = AA_OMIT_DEFAULT,
     .desc = "fwd.softmax = two-pass: the backward reuses the forward's normalised P (saved, autograd of softmax) or recomputes exp(S*c - LSE) from the checkpoint (lse)",
     .cite = "torch/_higher_order_ops/flex_attention.py sdpa_dense_backward `torch.exp(post_mod_scores - logsumexp)`"},
    {.key = "dropout_*", .type = AA_KEY_DROPOUT, .offset = F_(dropout), .def = "none", .omit = AA_OMIT_DEFAULT,
     .desc = "dropout scheme (dropout_scheme) and its parameters: the backward's mask redraw", .cite = "lib/dropout.h, [nki-bwd] twin attention.py:974-981"},
    {.key = "dq_reduce", .type = AA_KEY_REDUCE, .offset = F_(bwd_dq_reduce), .def = "fp32-ordered", .exact = "fp32-ordered", .omit = AA_OMIT_DEFAULT,
     .desc = "dQ reduction across KV blocks (dq_reduce = kind, dq_reduce_<param>)", .cite = "lib/reduce.h, [blackwell-fa] section 3.6"},
    {.key = "fwd.k_order", .type = AA_KEY_ENUM, .offset = F_(fwd_k_desc), .names = order_names, .def = "asc", .omit = AA_OMIT_GROUP, .group = 1,
     .desc = "order of the forward key blocks: desc = last first", .cite = "FA2 n_block loop"},
    {.key = "fwd.splits", .type = AA_KEY_SIZE, .offset = F_(fwd_splits), .max = 4096, .def = "0", .omit = AA_OMIT_GROUP, .group = 1,
     .desc = "split-KV forward into this many key-block ranges merged by LSE", .cite = "FA2 combine kernel, lib/attn/forward_split.c"},
    {.key = "fwd.split_sms", .type = AA_KEY_SIZE, .offset = F_(fwd_split_sms), .max = 4096, .def = "0", .omit = AA_OMIT_GROUP, .group = 1,
     .desc = "> 0: split count from FA2's num_splits_heuristic for this many SMs", .cite = "FA2 num_splits_heuristic"},
    {.key = "fwd.split_keys", .type = AA_KEY_SIZE, .offset = F_(fwd_split_keys), .max = SIZE_MAX_KEY, .def = "0", .omit = AA_OMIT_DEFAULT,
     .desc = "> 0: a fixed split size of this many keys (a multiple of the key tile) instead of a split count: the split-KV kernel always runs with ceil(n_k / S) splits, whatever the batch", .cite = "[batch-invariance]"},
    {.key = "bwd.q_order", .type = AA_KEY_ENUM, .offset = F_(bwd_q_desc), .names = order_names, .def = "asc", .omit = AA_OMIT_GROUP, .group = 1,
     .desc = "order of the backward query tiles (dK/dV accumulation): desc = last first", .cite = "FA2 m_block loop"},
    {.key = "bwd.d_order", .type = AA_KEY_ENUM, .offset = F_(bwd_d_order), .names = d_order_names, .def = "seq", .omit = AA_OMIT_DEFAULT,
     .desc = "fa2-lanes: D = rowsum(O dO) by 8 lanes per row (64-column chunks; 4 lanes of 32 when FA2's kernel head dim, d rounded up to 32, 64, 96, 128, 192 or 256, is not a multiple of 64), lane t an FMA chain over its 8 columns of each chunk, then the xor butterfly 4, 2, 1; lanes-128: the same with 16 lanes of 128-column chunks at every d, butterfly 8, 4, 2, 1 (inferred for cuDNN from the H200's NaN/Inf splits, README-gpu 8.8; superseded by cudnn-dot); cudnn-dot: cuDNN's compute_dot_do_o as probed on the H200 through its dQ, lane t of 16 per 128-column chunk holding columns 8t .. 8t + 7, their products added in pairs ((p0 + p1) + (p2 + p3)) + (p4 + p5)) + (p6 + p7), the chunks' partials in order, then the xor butterfly 8, 4, 2, 1; xformers-lanes: computeDelta's lanes, 2 per row (4 for 64 < d <= 128) of 8 columns per access, FMA chains, then shfl_xor 1, 2; torch-sum: torch.sum over the last dim as PyTorch's CUDA reduce_kernel adds it (block width from the row count and d, 4 accumulators per thread, 4-wide loads from d = 128, shuffles descending), probed on the H200", .cite = "flash_bwd_preprocess_kernel.h:24-48,131; kernel_traits.h:186,292,118; utils.h:112-131; kernel_backward.h computeDelta; [h200-orders] (Reduce.cuh); README-gpu 8.8, 8.9, 8.10 (fixtures/h200-nan/probe_cudnn_order.py)"},
    {.key = "bwd.dp_gemv", .type = AA_KEY_ENUM, .offset = F_(bwd_dp_gemv), .names = dp_gemv_names, .def = "none", .omit = AA_OMIT_DEFAULT,
     .desc = "cublas-h200: with one query row, dP = dO V^T is a cuBLAS FP32 GEMV (n_q > 1, or an FP64 bwd.acc_dp: that model); its order over d as probed on the H200 at 214 (n_k, d): per thread a chunk or a stride of columns in sequence, then a shuffle tree or a chain (vendor_order.c gemv_plan)", .cite = "[h200-orders]; README-gpu 8.9 (fixtures/h200-nan/probe_flex_order.py)"},
    {.key = "fwd.qk_gemv", .type = AA_KEY_ENUM, .offset = F_(fwd_qk_gemv), .names = dp_gemv_names, .def = "none", .omit = AA_OMIT_DEFAULT,
     .desc = "cublas-h200: with one query row, the forward's QK^T is a cuBLAS FP32 GEMV (n_q > 1, or an FP64 fwd.acc_qk: that model), in the order of bwd.dp_gemv = cublas-h200 (the same call shape, [1, d] by [d, n_k])", .cite = "[h200-orders]; README-gpu 8.11 (the H200's FlexAttention LSE at n_q = 1)"},
    {.key = "bwd.qk_gemv", .type = AA_KEY_ENUM, .offset = F_(bwd_qk_gemv), .names = dp_gemv_names, .def = "none", .omit = AA_OMIT_DEFAULT,
     .desc = "cublas-h200: with one query row, the backward's recomputed QK^T is that GEMV (n_q > 1, or an FP64 bwd.acc_qk: that model)", .cite = "[h200-orders]; README-gpu 8.11"},
    {.key = "fwd.rowsum_rescale", .type = AA_KEY_ENUM, .offset = F_(fwd_rowsum_fma), .names = rescale_names, .def = "mul", .omit = AA_OMIT_DEFAULT,
     .desc = "fma: a row-sum partial's rescale l * alpha is rounded only with its next add, l = fma(l, alpha, p) (nvcc contracts softmax.h:158 with :165); mul: rounded on its own", .cite = "softmax.h:158,165; H200 softmax_lse (README-gpu section 6)"},
    {.key = "fwd.rowsum_split", .type = AA_KEY_ENUM, .offset = F_(fwd_rowsum_quad), .names = rowsum_split_names, .def = "none", .omit = AA_OMIT_DEFAULT,
     .desc = "quad: the row sum as four per-lane partials (lane t sums columns c with (c mod 8) div 2 = t), combined at the end as (l0 + l2) + (l1 + l3)", .cite = "softmax.h:23-36,144,158,165,172; utils.h:112-131"},
    {.key = "fwd.qkv_fmt", .type = AA_KEY_ENUM, .offset = F_(fwd_qkv_fmt), .names = qkvfmt_names, .def = "none", .omit = AA_OMIT_GROUP, .group = 3, .exact = "none",
     .desc = "format the forward casts Q, K, V to, with power-of-two scales (the backward reads the io inputs)", .cite = "[fa3] hopper/flash_fwd_kernel_sm90.h:412-414"},
    {.key = "fwd.qkv_scale", .type = AA_KEY_ENUM, .offset = F_(fwd_qkv_scale), .names = qkvscale_names, .def = "per-head", .omit = AA_OMIT_GROUP, .group = 3,
     .desc = "fwd.qkv_fmt scales: one per KV head (FA3 q/k/v_descale[batch, kv head]) or one per tensor", .cite = "[fa3] hopper/flash_fwd_kernel_sm90.h:412"},
    {.key = "fwd.qk_rotate", .type = AA_KEY_ENUM, .offset = F_(fwd_qk_rotate), .names = rotate_names, .def = "none", .omit = AA_OMIT_GROUP, .group = 3,
     .desc = "Q and K times a normalised Hadamard matrix (rounded to io) before the cast: incoherent processing", .cite = "[fa3] paper section 3.3"},
    {.key = "fwd.p_scale_exp", .type = AA_KEY_SIZE, .offset = F_(fwd_p_scale_exp), .max = 16, .def = "0", .omit = AA_OMIT_GROUP, .group = 3,
     .desc = "P times 2^k before its fwd.p_fmt rounding (FP8 Max_offset = 8)", .cite = "[fa3] hopper/softmax.h:66-69, 146-150"},
    {.key = "fwd.exp", .type = AA_KEY_EXP, .offset = F_(fwd_exp), .def = "exact", .omit = AA_OMIT_GROUP, .group = 2, .exact = "exact",
     .desc = "exp construction of the forward weights (a lib/exp.h spec)", .cite = "[blackwell-fa] section 3.3"},
    {.key = "bwd.exp", .type = AA_KEY_EXP, .offset = F_(bwd_exp), .def = "exact", .omit = AA_OMIT_GROUP, .group = 2, .exact = "exact",
     .desc = "exp construction of the backward's recomputed weights", .cite = "[blackwell-fa] section 3.3"},
    {.key = "fwd.exp_emu", .type = AA_KEY_EXP, .offset = F_(fwd_exp_emu), .def = "exact", .omit = AA_OMIT_GROUP, .group = 4,
     .desc = "exp construction of the forward weights that FA4 emulates in software (fwd.exp_emu_freq selects them)",
     .cite = "[fa4] flash_attn/cute/softmax.py apply_exp2_convert"},
    {.key = "fwd.exp_emu_freq", .type = AA_KEY_SIZE, .offset = F_(fwd_exp_emu_freq), .max = 32, .def = "0", .omit = AA_OMIT_GROUP, .group = 4,
     .desc = "FA4 ex2_emu_freq: period (keys) of the emulated pairs in each 32-key fragment; 0 = none", .cite = "[fa4] flash_attn/cute/flash_fwd_sm100.py:76, 101-104"},
    {.key = "fwd.exp_emu_res", .type = AA_KEY_SIZE, .offset = F_(fwd_exp_emu_res), .max = 32, .def = "4", .omit = AA_OMIT_GROUP, .group = 4,
     .desc = "FA4 ex2_emu_res: emulated keys at the end of each period", .cite = "[fa4] flash_attn/cute/softmax.py apply_exp2_convert"},
    {.key = "fwd.exp_emu_start", .type = AA_KEY_SIZE, .offset = F_(fwd_exp_emu_start), .max = 64, .def = "0", .omit = AA_OMIT_GROUP, .group = 4,
     .desc = "FA4 ex2_emu_start_frg: first fragment with emulated pairs", .cite = "[fa4] flash_attn/cute/flash_fwd_sm100.py:79, 526"},
    {.key = "fwd.sink_at", .type = AA_KEY_ENUM, .offset = F_(fwd_sink_end), .names = sink_at_names, .def = "open", .omit = AA_OMIT_DEFAULT,
     .desc = "where sink logits join the online softmax: open (first max and row sum) or end (exp(sink - final max) added to the row sum; the max is kept)",
     .cite = "[fa4] flash_attn/cute/flash_fwd_sm100.py:2731-2742, softmax.py:207-214 at 0251105a"},
    {.key = "softcap.tanh", .type = AA_KEY_ENUM, .offset = F_(softcap_tanh), .names = tanh_names, .def = "exact", .omit = AA_OMIT_DEFAULT, .exact = "exact",
     .desc = "the softcap's tanh: exact, or a model of tanh.approx.f32", .cite = "flash-attn utils.h:399"},
    {.key = "alibi.causal", .type = AA_KEY_ENUM, .offset = F_(alibi_causal_col), .names = alibi_names, .def = "abs", .omit = AA_OMIT_DEFAULT,
     .desc = "ALiBi under a causal mask: documented -slope |distance| (abs) or FA2's slope * j", .cite = "flash-attn alibi.h:48, mask.h:157"},
    {.key = "mask.score", .type = AA_KEY_ENUM, .offset = F_(mask_score), .names = maskscore_names, .def = "neginf", .omit = AA_OMIT_DEFAULT,
     .desc = "score of a key the attention mask, a -inf bias or key padding masks: skipped, the ALU's lowest finite, 0, or (fill) s + mask.fill for the boolean mask and the padding", .cite = "lib/problem.h; PyTorch sdpa_math finfo.min masks"},
    {.key = "mask.fill", .type = AA_KEY_DOUBLE, .offset = F_(mask_fill), .def = "-65504", .omit = AA_OMIT_DEFAULT,
     .desc = "mask.score = fill: the additive value of a boolean-masked key, rounded to the io format (-65504: BF16 -65536)", .cite = "inferred: H200 probe (experiments/README-gpu.md 8.6), PyTorch's boolean mask for cuDNN"},
    {.key = "mask.enter", .type = AA_KEY_ENUM, .offset = F_(mask_enter), .names = maskenter_names, .def = "after-cap", .omit = AA_OMIT_DEFAULT,
     .desc = "where the additive bias and the logit offset enter: after the softcap, before it, before the scale, or (scale-fma, with scale_fold = s) in the FMA that applies the scale, x = fl(S scale + b)", .cite = "flash-attn flash_fwd_kernel.h:331-335; README-gpu 8.10 (cuDNN's LSE, fixtures/h200-nan/probe_cudnn_bias.py)"},
    {.key = "mask.empty_o", .type = AA_KEY_ENUM, .offset = F_(mask_empty_nan), .names = emptyo_names, .def = "zero", .omit = AA_OMIT_DEFAULT,
     .desc = "a row with no visible key: O = 0 and no gradient, or NaN in O, dQ and its head's dK, dV (softmax of all -inf)", .cite = "flash-attn softmax.h:180; PyTorch sdpa_math"},
    {.key = "mask.empty_lse", .type = AA_KEY_ENUM, .offset = F_(mask_empty_lse), .names = emptylse_names, .def = "neginf", .omit = AA_OMIT_DEFAULT,
     .desc = "the LSE stored for a row with no visible key: -inf, +inf (flash-attn) or 0", .cite = "flash-attn softmax.h:180"},
    {.key = "quant.q", .type = AA_KEY_ENUM, .offset = F_(quant_q), .names = bq_names, .def = "none", .omit = AA_OMIT_DEFAULT, .exact = "none",
     .desc = "Q quantised before both passes, blocks along d (MX: E8M0 per 32; nvfp4: E4M3 per 16 and an FP32 tensor scale; int: SageAttention)", .cite = "[ocp-mx] 6.3; [te-nvfp4]; [sage]"},
    {.key = "quant.k", .type = AA_KEY_ENUM, .offset = F_(quant_k), .names = bq_names, .def = "none", .omit = AA_OMIT_DEFAULT, .exact = "none",
     .desc = "K quantised before both passes, blocks along d", .cite = "[ocp-mx] 6.3; [te-nvfp4]; [sage]"},
    {.key = "quant.v", .type = AA_KEY_ENUM, .offset = F_(quant_v), .names = bq_names, .def = "none", .omit = AA_OMIT_DEFAULT, .exact = "none",
     .desc = "V quantised before both passes, blocks along d", .cite = "[ocp-mx] 6.3; [te-nvfp4]"},
    {.key = "quant.do", .type = AA_KEY_ENUM, .offset = F_(quant_do), .names = bq_names, .def = "none", .omit = AA_OMIT_DEFAULT, .exact = "none",
     .desc = "dO quantised before the backward, blocks along d", .cite = "[ocp-mx] 6.3; [te-nvfp4]"},
    {.key = "quant.p", .type = AA_KEY_ENUM, .offset = F_(quant_p), .names = bq_names, .def = "none", .omit = AA_OMIT_DEFAULT, .exact = "none",
     .desc = "the forward's P quantised (after fwd.p_fmt) before the PV product, blocks along each tile row's keys", .cite = "[ocp-mx] 6.3; [te-nvfp4]"},
    {.key = "quant.ds", .type = AA_KEY_ENUM, .offset = F_(quant_ds), .names = bq_names, .def = "none", .omit = AA_OMIT_DEFAULT, .exact = "none",
     .desc = "dS quantised (after bwd.ds_fmt) before the dQ and dK products, blocks along each tile row's keys", .cite = "[ocp-mx] 6.3; [te-nvfp4]"},
    {.key = "quant.block", .type = AA_KEY_SIZE, .offset = F_(quant_block), .max = 1 << 20, .def = "0", .omit = AA_OMIT_DEFAULT,
     .desc = "values per scale of the quant.* keys; 0: each kind's own", .cite = "[ocp-mx] table 1"},
    {.key = "quant.scale_rnd", .type = AA_KEY_ENUM, .offset = F_(quant_scale_rnd), .names = bq_scale_names, .def = "rceil", .omit = AA_OMIT_DEFAULT,
     .desc = "E8M0 scale of the MX kinds: rceil (NVIDIA cvt.rp.satfinite.ue8m0x2) or floor (OCP MX 6.3, elements clamped)", .cite = "[ocp-mx] 6.3; [te-nvfp4]"},
    {.key = "quant.satfinite", .type = AA_KEY_BOOL, .offset = F_(quant_satfinite), .def = "on", .omit = AA_OMIT_DEFAULT,
     .desc = "FP8 elements of the quant.* keys saturate (cvt .satfinite) or overflow to NaN (e4m3) / Inf (e5m2)", .cite = "[ocp-mx]"},
    {.key = "quant.smooth_k", .type = AA_KEY_BOOL, .offset = F_(quant_smooth_k), .def = "off", .omit = AA_OMIT_DEFAULT,
     .desc = "K minus its io-rounded mean over tokens (per KV head) before quant.k; LSE += scale io(q.mean) after both passes, which read the smoothed K", .cite = "[sage] sageattention/core.py:772-797, triton/quant_per_thread.py:158-159"},
    {.key = "quant.fp8_scope", .type = AA_KEY_ENUM, .offset = F_(quant_fp8_scope), .names = quant_scope_names, .def = "tensor", .omit = AA_OMIT_DEFAULT,
     .desc = "scale of the fp8-tensor kind: one per tensor, or one per (KV head, column) over the tokens", .cite = "[sage] sageattention/quant.py:224-293, csrc/fused/fused.cu:316-420"},
    {.key = "quant.fp8_max", .type = AA_KEY_DOUBLE, .offset = F_(quant_fp8_max), .def = "448", .omit = AA_OMIT_DEFAULT,
     .desc = "the value fp8-tensor maps amax to; other than 448 (or with fp8_scope = channel): scale = amax / max, elements e4m3(x * (max / amax))", .cite = "[sage] sageattention/core.py:807-811, csrc/fused/fused.cu:393-399"},
    {.key = "quant.p_scale", .type = AA_KEY_DOUBLE, .offset = F_(quant_p_scale), .def = "1", .omit = AA_OMIT_DEFAULT,
     .desc = "P times this (after 2^fwd.p_scale_exp) before its fwd.p_fmt cast; the row sum carries it and the final 1/l divides it out", .cite = "[sage] csrc/qattn/attn_utils.cuh:30, 379"},
    {.key = "quant.pv_buffer", .type = AA_KEY_BOOL, .offset = F_(quant_pv_buffer), .def = "off", .omit = AA_OMIT_DEFAULT,
     .desc = "each key tile's P V summed from zero with fwd.acc_pv, then added into O's fwd.o_acc_fmt accumulator (online and split forwards)", .cite = "[sage] csrc/qattn/qk_int_sv_f8_cuda_sm90.cu:328-353, attn_utils.cuh:899-975"},
    {.key = "quant.warp_q", .type = AA_KEY_SIZE, .offset = F_(quant_warp_q), .max = 1 << 16, .def = "0", .omit = AA_OMIT_DEFAULT,
     .desc = "rows per warp block of Q's int8-thread/int4-thread scales (WARPQ; 0: 32)", .cite = "[sage] sageattention/core.py:793, 969"},
    {.key = "quant.warp_k", .type = AA_KEY_SIZE, .offset = F_(quant_warp_k), .max = 1 << 16, .def = "0", .omit = AA_OMIT_DEFAULT,
     .desc = "rows per warp block of K's int8-thread/int4-thread scales (WARPK; 0: 64)", .cite = "[sage] sageattention/core.py:793, 969"},
    {.key = "quant.smooth_q", .type = AA_KEY_SIZE, .offset = F_(quant_smooth_q), .max = 1 << 20, .def = "0", .omit = AA_OMIT_DEFAULT,
     .desc = "Q minus the FP32 mean of each group of this many rows (io-rounded, as is Q minus it) before quant.q, held plus the mean (0: off)", .cite = "[sage] sageattention3_blackwell/sageattn3/api.py:27-72, 86-91"},
    {.key = "quant.v_axis", .type = AA_KEY_ENUM, .offset = F_(quant_v_axis), .names = quant_axis_names, .def = "d", .omit = AA_OMIT_DEFAULT,
     .desc = "V's quantisation blocks along d, or along the keys (P V's contraction axis)", .cite = "[sage] sageattention3_blackwell/sageattn3/quantization/fp4_quantization_4d.cu:261-350"},
    {.key = "quant.nvfp4_global", .type = AA_KEY_ENUM, .offset = F_(quant_nvfp4_global), .names = nvfp4_global_names, .def = "tensor", .omit = AA_OMIT_DEFAULT,
     .desc = "NVFP4's FP32 scale: 448 x 6 / amax of the tensor or tile, or fixed: 1 for Q K V dO, 448 x 6 for P and dS (P <= 1 maps to 2688)", .cite = "[te-nvfp4]; [sage] fp4_quantization_4d.cu:196-204, softmax_fused.h:32-34"},
    {.key = "mask.phantom_tile", .type = AA_KEY_SIZE, .offset = F_(mask_phantom_tile), .max = SIZE_MAX_KEY, .def = "0", .omit = AA_OMIT_DEFAULT,
     .desc = "with a mask, n_k mod T = T/2: the key slots past n_k in the last T-key tile score 0 in dQ's backward, NaN dQ rows where their dS = exp(-LSE) (0 - D) overflows FP32 (0: off)", .cite = "inferred: fixtures/h200-nan, pytorch 196678"},
    {.key = "tiling", .type = AA_KEY_ENUM, .offset = F_(tiling_fa2), .names = tiling_names, .def = "fixed", .omit = AA_OMIT_DEFAULT,
     .desc = "fa2: tiles and split count per problem from FA2's launch code for fwd.split_sms SMs (aa_fa2_dispatch)", .cite = "flash_api.cpp:281-335, flash_fwd/bwd_launch_template.h"},
    {.key = "sfu", .type = AA_KEY_ENUM, .offset = F_(sfu_sm90), .names = sfu_names, .def = "exact", .omit = AA_OMIT_DEFAULT, .exact = "exact",
     .desc = "sm90: rescale exp2f, LSE __logf and split combine expf/logf as the H100/H200 computes them (lib/exp/sm90.c)", .cite = "softmax.h:157,180; flash_fwd_kernel.h:1190-1221"},
    {.key = "bwd.scale_fold", .type = AA_KEY_ENUM, .offset = F_(bwd_scale_fold), .names = bwd_fold_names, .def = "fwd", .omit = AA_OMIT_DEFAULT,
     .desc = "where the backward applies the scale to its recomputed scores (s or exp), if not as the forward does (fwd)", .cite = "inferred: cudnn-h100's decode, experiments/README-gpu.md 8.7"},
    {.key = "exp_coef", .type = AA_KEY_ENUM, .offset = F_(exp_coef_alu), .names = exp_coef_names, .def = "host", .omit = AA_OMIT_DEFAULT,
     .desc = "scale_fold = exp with an exp2 form: c = scale * log2 e in binary64, rounded to alu (host), or fl(scale) * fl(log2 e) in alu (alu)", .cite = "flash_api.cpp (host); inferred: cudnn-h100, experiments/README-gpu.md 8.7"},
    {.key = "mixed_precision", .type = AA_KEY_MACRO, .def = "", .set = set_mixed_precision,
     .desc = "macro (not stored): bwd.d_fmt, dq_acc_fmt, dkv_acc_fmt, dsinks_fmt = fp32 (on) or io (off)", .cite = "[nki-bwd] attention_bwd.py:101"},
    {.key = "base", .type = AA_KEY_MACRO, .def = "", .set = set_base,
     .desc = "macro (not stored, first key only): start from the named preset", .cite = ""},
    /* clang-format on */
};
const size_t aa_recipe_nkeys = sizeof aa_recipe_keys / sizeof aa_recipe_keys[0];

static int parse_bool(int *out, const char *v) {
  if (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "true")) {
    *out = 1;
    return 0;
  }
  if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "false")) {
    *out = 0;
    return 0;
  }
  return -1;
}

static void list_names(char *buf, size_t len, const char *const *names, const char *sep) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; names[i] != NULL && used < len; i++) {
    int w = snprintf(buf + used, len - used, "%s%s", i ? sep : "", names[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

static int set_base(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err) {
  aa_recipe_t tmp;
  (void)key;
  if (aa_recipe_preset(&tmp, value, err) != AA_OK)
    return aa_error_set(err, AA_EINVAL, "key 'base': unknown preset '%s'", value);
  *r = tmp;
  return AA_OK;
}

static int set_mixed_precision(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err) {
  int on;
  if (parse_bool(&on, value) != 0)
    return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected on|off)", key, value);
  /* [nki-bwd] attention_bwd.py:101: dy_o_sum is float32 "when mixed_precision";
     dQ reduced per K tile in the mixed dtype (fp32 only with
     mixed_precision); the dK/dV section accumulators and dsinks_local use
     the same mixed dtype. */
  aa_fmt_t f = on ? AA_FMT_FP32 : r->io_fmt;
  r->bwd_d_fmt = r->bwd_dq_acc_fmt = r->bwd_dkv_acc_fmt = r->bwd_dsinks_fmt = f;
  return AA_OK;
}

/* 1 when the row names `key`: its name, or for the two families every key
   of the family. */
static int row_matches(const aa_recipe_key_t *k, const char *key) {
  if (k->type == AA_KEY_DROPOUT) return !strncmp(key, "dropout_", 8);
  if (k->type == AA_KEY_REDUCE) return !strncmp(key, "dq_reduce", 9) && (key[9] == '\0' || key[9] == '_');
  return !strcmp(k->key, key);
}

static int set_row(aa_recipe_t *r, const aa_recipe_key_t *k, const char *key, const char *value, aa_error_t *err) {
  char *field = (char *)r + k->offset;
  switch (k->type) {
  case AA_KEY_STRING: {
    size_t n = strlen(value);
    if (n >= sizeof r->name)
      return aa_error_set(err, AA_EINVAL, "key '%s': value '%s' longer than %zu characters", key, value,
                          sizeof r->name - 1);
    memcpy(field, value, n + 1);
    return AA_OK;
  }
  case AA_KEY_FMT: {
    aa_fmt_t f;
    if (aa_fmt_from_name(&f, value) != AA_OK)
      return aa_error_set(err, AA_EINVAL, "key '%s': unknown format '%s' (expected bf16|fp16|fp32|fp64|e4m3|e5m2)",
                          key, value);
    memcpy(field, &f, sizeof f);
    return AA_OK;
  }
  case AA_KEY_ACCUM: {
    aa_accum_t a;
    if (aa_accum_from_name(&a, value) != AA_OK)
      return aa_error_set(err, AA_EINVAL, "key '%s': unknown accumulation model '%s'", key, value);
    memcpy(field, &a, sizeof a);
    return AA_OK;
  }
  case AA_KEY_ENUM: {
    for (int j = 0; k->names[j] != NULL; j++)
      if (!strcmp(k->names[j], value)) {
        memcpy(field, &j, sizeof j);
        return AA_OK;
      }
    char opts[256];
    list_names(opts, sizeof opts, k->names, "|");
    return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected %s)", key, value, opts);
  }
  case AA_KEY_SIZE: {
    char *end;
    errno = 0;
    unsigned long long u = value[0] >= '0' && value[0] <= '9' ? strtoull(value, &end, 10) : 0;
    if (value[0] < '0' || value[0] > '9' || errno != 0 || *end != '\0' || u > (unsigned long long)k->max) {
      if (k->max == SIZE_MAX_KEY)
        return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected an integer 0..2^30)", key, value);
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected an integer 0..%zu)", key, value,
                          k->max);
    }
    size_t s = (size_t)u;
    memcpy(field, &s, sizeof s);
    return AA_OK;
  }
  case AA_KEY_DOUBLE: {
    char *end;
    errno = 0;
    double d = strtod(value, &end);
    if (errno != 0 || end == value || *end != '\0' || isnan(d))
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected a number)", key, value);
    memcpy(field, &d, sizeof d);
    return AA_OK;
  }
  case AA_KEY_BOOL: {
    int b;
    if (parse_bool(&b, value) != 0)
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected on|off)", key, value);
    memcpy(field, &b, sizeof b);
    return AA_OK;
  }
  case AA_KEY_EXP: {
    aa_exp_t e;
    aa_error_t e2;
    e2.msg[0] = '\0';
    if (aa_exp_parse(&e, value, &e2) != AA_OK)
      return aa_error_set(err, AA_EINVAL, "key '%s': bad construction '%s' (%s)", key, value, e2.msg);
    memcpy(field, &e, sizeof e);
    return AA_OK;
  }
  case AA_KEY_DROPOUT: {
    int st = aa_dropout_set(&r->dropout, key + 8, value, err);
    if (st == AA_ENOTFOUND) return aa_error_set(err, AA_EINVAL, "unknown key '%s' (value '%s')", key, value);
    return st;
  }
  case AA_KEY_REDUCE: {
    const char *sub = key[9] == '\0' ? "kind" : key + 10;
    if (!strcmp(sub, "add_fmt") || !strcmp(sub, "acc_fmt") || !strcmp(sub, "section") || !strcmp(sub, "store_fmt"))
      return aa_error_set(err, AA_EINVAL,
                          "key '%s': set by the pipeline (alu, bwd.dq_acc_fmt, bwd.section, bwd.dq_section_fmt)",
                          key);
    int st = aa_reduce_set(&r->bwd_dq_reduce, sub, value, err);
    if (st == AA_ENOTFOUND) return aa_error_set(err, AA_EINVAL, "unknown key '%s' (value '%s')", key, value);
    return st;
  }
  case AA_KEY_MACRO:
    return k->set(r, key, value, err);
  }
  return aa_error_set(err, AA_EINVAL, "unknown key '%s' (value '%s')", key, value);
}

int aa_recipe_set(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err) {
  if (r == NULL || key == NULL || value == NULL) return aa_error_set(err, AA_EINVAL, "recipe_set: NULL argument");
  for (size_t i = 0; i < aa_recipe_nkeys; i++)
    if (row_matches(&aa_recipe_keys[i], key)) return set_row(r, &aa_recipe_keys[i], key, value, err);
  return aa_error_set(err, AA_EINVAL, "unknown key '%s' (value '%s')", key, value);
}

/* Text of one field's value (shared by format, equal and the defaults):
   for the families the kind (dropout_scheme, dq_reduce), for macros "". */
static void value_text(char *buf, size_t len, const aa_recipe_key_t *k, const aa_recipe_t *r) {
  const char *field = (const char *)r + k->offset;
  buf[0] = '\0';
  switch (k->type) {
  case AA_KEY_STRING:
    snprintf(buf, len, "%s", field);
    break;
  case AA_KEY_FMT: {
    aa_fmt_t f;
    memcpy(&f, field, sizeof f);
    const aa_fmt_info_t *info = aa_fmt_info(f);
    snprintf(buf, len, "%s", info != NULL ? info->name : "?");
    break;
  }
  case AA_KEY_ACCUM: {
    aa_accum_t a;
    memcpy(&a, field, sizeof a);
    const char *n = aa_accum_name(a);
    snprintf(buf, len, "%s", n != NULL ? n : "?");
    break;
  }
  case AA_KEY_ENUM: {
    int j, cnt = 0;
    memcpy(&j, field, sizeof j);
    while (k->names[cnt] != NULL)
      cnt++;
    snprintf(buf, len, "%s", j >= 0 && j < cnt ? k->names[j] : "?");
    break;
  }
  case AA_KEY_SIZE: {
    size_t s;
    memcpy(&s, field, sizeof s);
    snprintf(buf, len, "%zu", s);
    break;
  }
  case AA_KEY_DOUBLE: {
    double d;
    memcpy(&d, field, sizeof d);
    if (isinf(d))
      snprintf(buf, len, "%s", d > 0 ? "inf" : "-inf");
    else
      snprintf(buf, len, "%.17g", d);
    break;
  }
  case AA_KEY_BOOL: {
    int b;
    memcpy(&b, field, sizeof b);
    snprintf(buf, len, "%s", b ? "on" : "off");
    break;
  }
  case AA_KEY_EXP:
    aa_exp_describe(buf, len, (const aa_exp_t *)(const void *)field);
    break;
  case AA_KEY_DROPOUT:
    snprintf(buf, len, "%s", r->dropout.scheme == AA_DROPOUT_NONE ? "none" : "on");
    break;
  case AA_KEY_REDUCE:
    snprintf(buf, len, "%s", r->bwd_dq_reduce.kind == AA_REDUCE_FP32_ORDERED ? "fp32-ordered" : "other");
    break;
  case AA_KEY_MACRO:
    break;
  }
}

/* 1 when the row's value is its default (what omission tests). */
static int row_is_default(const aa_recipe_key_t *k, const aa_recipe_t *r) {
  char v[192];
  if (k->type == AA_KEY_EXP)
    return aa_recipe_exp_is_default((const aa_exp_t *)(const void *)((const char *)r + k->offset));
  value_text(v, sizeof v, k, r);
  return !strcmp(v, k->def);
}

static int row_written(const aa_recipe_key_t *k, const aa_recipe_t *r) {
  if (k->type == AA_KEY_MACRO) return 0;
  if (k->omit == AA_OMIT_DEFAULT) return !row_is_default(k, r);
  if (k->omit == AA_OMIT_GROUP) {
    for (size_t i = 0; i < aa_recipe_nkeys; i++)
      if (aa_recipe_keys[i].omit == AA_OMIT_GROUP && aa_recipe_keys[i].group == k->group &&
          !row_is_default(&aa_recipe_keys[i], r))
        return 1;
    return 0;
  }
  return 1;
}

size_t aa_recipe_format(char *buf, size_t len, const aa_recipe_t *r) {
  size_t need = 0;
  char val[192];
  for (size_t i = 0; i < aa_recipe_nkeys; i++) {
    const aa_recipe_key_t *k = &aa_recipe_keys[i];
    char *at = buf != NULL && need < len ? buf + need : NULL;
    size_t room = buf != NULL && need < len ? len - need : 0;
    if (!row_written(k, r)) continue;
    if (k->type == AA_KEY_DROPOUT) {
      need += aa_dropout_format(at, room, &r->dropout, "dropout_");
    } else if (k->type == AA_KEY_REDUCE) {
      need +=
          aa_reduce_format(at, room, &r->bwd_dq_reduce, "dq_reduce_", AA_REDUCE_FMT_USED | AA_REDUCE_FMT_PIPELINE);
    } else {
      value_text(val, sizeof val, k, r);
      int w = snprintf(at, room, "%s = %s\n", k->key, val);
      if (w > 0) need += (size_t)w;
    }
  }
  for (size_t i = 0; i < r->nwhen && i < AA_RECIPE_WHEN_MAX; i++) { /* conditional keys last, in file order */
    char *at = buf != NULL && need < len ? buf + need : NULL;
    need += aa_recipe_when_format(at, buf != NULL && need < len ? len - need : 0, &r->when[i]);
  }
  if (buf != NULL && len > 0 && need >= len) buf[len - 1] = '\0';
  return need;
}

int aa_recipe_exp_is_default(const aa_exp_t *e) {
  aa_exp_t def;
  char a[160], b[160];
  if (e->kind != AA_EXP_EXACT) return 0;
  aa_exp_init(&def, "exact", NULL);
  aa_exp_describe(a, sizeof a, e);
  aa_exp_describe(b, sizeof b, &def);
  return !strcmp(a, b);
}

/* 1 when the conditional lines of a and b are the same, in the same order. */
static int when_equal(const aa_recipe_t *a, const aa_recipe_t *b) {
  if (a->nwhen != b->nwhen) return 0;
  for (size_t i = 0; i < a->nwhen && i < AA_RECIPE_WHEN_MAX; i++) {
    char la[512], lb[512];
    aa_recipe_when_format(la, sizeof la, &a->when[i]);
    aa_recipe_when_format(lb, sizeof lb, &b->when[i]);
    if (strcmp(la, lb) != 0) return 0;
  }
  return 1;
}

int aa_recipe_equal(const aa_recipe_t *a, const aa_recipe_t *b) {
  char va[192], vb[192];
  if (!when_equal(a, b)) return 0;
  for (size_t i = 0; i < aa_recipe_nkeys; i++) {
    const aa_recipe_key_t *k = &aa_recipe_keys[i];
    switch (k->type) {
    case AA_KEY_STRING: /* the name is not part of the numerics */
    case AA_KEY_MACRO:
      continue;
    case AA_KEY_DROPOUT:
      if (a->dropout.scheme != b->dropout.scheme) return 0;
      if (a->dropout.scheme != AA_DROPOUT_NONE) {
        char da[512], db[512];
        aa_dropout_format(da, sizeof da, &a->dropout, "");
        aa_dropout_format(db, sizeof db, &b->dropout, "");
        if (strcmp(da, db) != 0 || memcmp(&a->dropout.p, &b->dropout.p, sizeof(double)) != 0) return 0;
      }
      continue;
    case AA_KEY_REDUCE:
      if (!aa_reduce_equal(&a->bwd_dq_reduce, &b->bwd_dq_reduce)) return 0;
      continue;
    default:
      value_text(va, sizeof va, k, a);
      value_text(vb, sizeof vb, k, b);
      if (strcmp(va, vb) != 0) return 0;
      if (k->type == AA_KEY_DOUBLE &&
          memcmp((const char *)a + k->offset, (const char *)b + k->offset, sizeof(double)) != 0)
        return 0;
    }
  }
  return 1;
}

int aa_recipe_check_fields(const aa_recipe_t *r, aa_error_t *err) {
  for (size_t i = 0; i < aa_recipe_nkeys; i++) {
    const aa_recipe_key_t *k = &aa_recipe_keys[i];
    const char *field = (const char *)r + k->offset;
    char v[192];
    int st;
    switch (k->type) {
    case AA_KEY_FMT:
    case AA_KEY_ACCUM:
    case AA_KEY_ENUM:
      value_text(v, sizeof v, k, r);
      if (!strcmp(v, "?"))
        return aa_error_set(err, AA_EINVAL, "recipe '%s': key '%s' is out of range", r->name, k->key);
      break;
    case AA_KEY_SIZE: {
      size_t s;
      memcpy(&s, field, sizeof s);
      if (s > k->max)
        return aa_error_set(err, AA_EINVAL, "recipe '%s': key '%s' = %zu is above %zu", r->name, k->key, s, k->max);
      break;
    }
    case AA_KEY_BOOL: {
      int b;
      memcpy(&b, field, sizeof b);
      if (b != 0 && b != 1)
        return aa_error_set(err, AA_EINVAL, "recipe '%s': key '%s' is not on/off", r->name, k->key);
      break;
    }
    case AA_KEY_EXP:
      if ((unsigned)((const aa_exp_t *)(const void *)field)->kind >= AA_EXP_KIND_COUNT)
        return aa_error_set(err, AA_EINVAL, "recipe '%s': key '%s': kind out of range", r->name, k->key);
      break;
    case AA_KEY_DROPOUT:
      if (r->dropout.scheme != AA_DROPOUT_NONE && (st = aa_dropout_check(&r->dropout, err)) != AA_OK) return st;
      break;
    case AA_KEY_REDUCE:
      if ((st = aa_reduce_check(&r->bwd_dq_reduce, err)) != AA_OK) return st;
      break;
    default:
      break;
    }
  }
  return AA_OK;
}

size_t aa_recipe_key_count(void) {
  return aa_recipe_nkeys;
}

int aa_recipe_key_info(aa_recipe_key_info_t *out, size_t i) {
  static const char *const type_values[] = {"text (<= 63 chars)",
                                            "format",
                                            "gemm model",
                                            "",
                                            "integer",
                                            "number",
                                            "on, off",
                                            "a lib/exp.h spec name[:key=value,...]",
                                            "dropout_<name> keys (lib/dropout.h)",
                                            "dq_reduce = kind and dq_reduce_<name> keys (lib/reduce.h)",
                                            "macro"};
  if (out == NULL || i >= aa_recipe_nkeys) return AA_EINVAL;
  const aa_recipe_key_t *k = &aa_recipe_keys[i];
  memset(out, 0, sizeof *out);
  out->key = k->key;
  out->values = type_values[k->type];
  out->names = k->names;
  out->max = k->type == AA_KEY_SIZE ? k->max : 0;
  out->def = k->def;
  out->exact = k->exact;
  out->desc = k->desc;
  out->cite = k->cite;
  out->group = k->omit == AA_OMIT_GROUP ? k->group : 0;
  out->flags = (k->omit != AA_OMIT_NEVER ? AA_RECIPE_KEY_OMITTED : 0u) |
               (k->type == AA_KEY_MACRO ? AA_RECIPE_KEY_MACRO : 0u) |
               (k->type == AA_KEY_DROPOUT || k->type == AA_KEY_REDUCE ? AA_RECIPE_KEY_FAMILY : 0u);
  return AA_OK;
}

int aa_recipe_value(char *buf, size_t len, const aa_recipe_t *r, const char *key) {
  if (buf == NULL || len == 0 || r == NULL || key == NULL) return AA_EINVAL;
  for (size_t i = 0; i < aa_recipe_nkeys; i++)
    if (row_matches(&aa_recipe_keys[i], key) && aa_recipe_keys[i].type != AA_KEY_MACRO) {
      value_text(buf, len, &aa_recipe_keys[i], r);
      return AA_OK;
    }
  return AA_ENOTFOUND;
}

void aa_recipe_defaults(aa_recipe_t *r) {
  memset(r, 0, sizeof *r);
  aa_dropout_default(&r->dropout);      /* scheme none; twin tile widths if a recipe turns it on */
  aa_reduce_default(&r->bwd_dq_reduce); /* fp32-ordered: ascending KV blocks (FA2 deterministic order) */
  for (size_t i = 0; i < aa_recipe_nkeys; i++) {
    const aa_recipe_key_t *k = &aa_recipe_keys[i];
    if (k->type == AA_KEY_MACRO || k->type == AA_KEY_DROPOUT || k->type == AA_KEY_REDUCE) continue;
    set_row(r, k, k->key, k->def, NULL); /* the table's own defaults: tests/trecipe parses each */
  }
}
