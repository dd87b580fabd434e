/* attnacc: emulated attention forward and backward pipelines driven by a recipe. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ATTN_H
#define AA_ATTN_H

#include <stddef.h>

#include "common.h"
#include "problem.h"
#include "recipe.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The first non-finite value a run created and the operands that met there
   (aa_attn_run fills it; found = 0: every value stayed finite). "First" is
   a fixed order, not a thread's: the earliest pipeline step (site order
   below) and within it the smallest (h, i, j), so the record does not
   depend on the thread count. Sites and their operands a, b, c:
     AA_FIRST_FWD    forward output O[h, i, j] (j a column) non-finite or
                     LSE NaN/+Inf: a = O, b = the row's LSE
     AA_FIRST_EMPTY  mask.empty_nan: a row with no visible key (0 / 0):
                     a = the row's LSE
     AA_FIRST_SCORE  backward score s[h, i, j] non-finite: a = s
     AA_FIRST_EXP    exp of s - LSE overflowed (or met Inf - Inf): a = s, b =
                     LSE, c = the exp argument; j >= n_k: a phantom key slot
                     of mask.phantom_tile (s = 0)
     AA_FIRST_DS     dS = (dP - D) P non-finite: a = dP, b = D, c = P
   value is the non-finite value created. */
typedef enum {
  AA_FIRST_FWD,
  AA_FIRST_EMPTY,
  AA_FIRST_SCORE,
  AA_FIRST_EXP,
  AA_FIRST_DS,
  AA_FIRST_COUNT
} aa_first_site_t;
typedef struct {
  int found;
  aa_first_site_t site;
  size_t h, i, j;
  double value, a, b, c;
  int phantom; /* AA_FIRST_EXP at a phantom key slot */
} aa_attn_first_t;
/* The site's name ("fwd.o", "empty-row", "bwd.score", "bwd.exp", "bwd.ds") and a sentence naming what met
   there with the values, e.g. "exp of s - LSE overflowed at (h 0, i 5, j 130): s = 1, LSE = -200, argument =
   288.5 -> inf"; written into buf (cap bytes). */
const char *aa_attn_first_site_name(aa_first_site_t s);
void aa_attn_first_format(char *buf, size_t cap, const aa_attn_first_t *f);

/* Where a pass of the emulation runs. auto and cuda: on the GPU when this build has CUDA, a device is present and
   the GPU emulation implements the recipe and problem (today the online-LSE forwards, split-KV or not, of fa2-h100,
   fa2, efficient-h100, cudnn-h100, flex-h100 and their kind on plain problems; lib/attn/cuda.c lists what), else on
   the CPU, with the same bits either way. cuda-emu: the GPU path's per-row code run on host threads (tests without
   a GPU). aa_attn_result_t says where each pass ran. */
typedef enum {
  AA_ATTN_DEVICE_AUTO = 0,
  AA_ATTN_DEVICE_CPU,
  AA_ATTN_DEVICE_CUDA,
  AA_ATTN_DEVICE_CUDA_EMU
} aa_attn_device_t;
const char *aa_attn_device_name(aa_attn_device_t dev);                 /* "auto", "cpu", "cuda", "cuda-emu" */
int aa_attn_device_from_name(aa_attn_device_t *out, const char *name); /* AA_OK or AA_EINVAL */

typedef struct {
  aa_tensor_t o;        /* [heads, n_q, d], stored format of the recipe */
  aa_tensor_t lse;      /* [heads, n_q], the checkpoint the backward read (natural-log LSE) */
  aa_tensor_t dq;       /* [heads, n_q, d] */
  aa_tensor_t dk, dv;   /* [kv_heads, n_k, d] */
  aa_tensor_t dsinks;   /* [heads, num_sinks] */
  size_t tiles_skipped; /* (q-tile, k-tile) pairs skipped by the mask */
  /* The dQ reduction (recipe dq_reduce): tiles = (q head, q tile, KV
     section) reductions, partials = K tiles reduced, and for fixed the
     budget failures and FP64 recomputes (lib/reduce.h). */
  aa_reduce_stats_t dq_reduce;
  /* Per-row checkpoint of the normalisation variants (fwd.softmax =
     fixed-shift or guarded; empty/NULL otherwise). row_ckpt[h*n_q + i] is
     AA_ROW_CKPT_RECIP when the row saved (shift, 1/l) or AA_ROW_CKPT_LSE
     when it saved LSE (a recovered guarded tile, or an empty row). For recip
     rows lse holds the equivalent LSE = (shift + log2 l) ln 2 (exp2-fma; shift
     + log l for natural exp), used by LSE backwards and the sink gradient. */
  aa_tensor_t recip;           /* [heads, n_q]: saved 1/l in fwd.lse_fmt (0 for LSE rows) */
  aa_tensor_t shift;           /* [heads, n_q]: the row's shift b in exp-argument units */
  unsigned char *row_ckpt;     /* [heads * n_q] */
  unsigned char *tile_flagged; /* [heads * fwd_q_tiles]: 1 when the query tile failed the range checks */
  size_t fwd_q_tiles;          /* forward query tiles per head */
  size_t tiles_flagged;        /* guarded: tiles recomputed online; fixed-shift: tiles that failed the checks */
  size_t rows_recovered;       /* rows whose checkpoint is the recovered LSE */
  size_t contractions_skipped; /* guarded: fully masked (sub-tile, key block) contractions skipped (3.4) */
  /* The forward's casts of P to fwd.p_fmt on the online-LSE paths (plain and
     split; not two-pass, fixed-shift or guarded): weights cast, the largest
     value presented to the cast (times 2^fwd.p_scale_exp, before rounding)
     and how many exceeded p_fmt's largest finite value (saturated under
     quant.satfinite, else NaN/Inf). With fwd.rescale_threshold > 0 a
     weight can reach 2^(p_scale_exp + threshold) ([fa4] Note [Low Precision
     Scaling], flash_fwd_sm100.py:84-89 at 0251105a). p_under counts the
     positive weights the cast rounded to zero (P x 2^fwd.p_scale_exp below
     half p_fmt's least subnormal: the P underflow of arXiv 2606.06521 under
     attention sinks). */
  size_t p_cast, p_over, p_under;
  double p_max;
  aa_attn_first_t first; /* where the first NaN or Inf was created (above) */
  /* Where the forward and the backward ran: AA_ATTN_DEVICE_CPU, _CUDA or _CUDA_EMU (aa_attn_run_device). */
  aa_attn_device_t fwd_device, bwd_device;
  /* GPU forward with the exact (binary64 libm) exp: rows the host redid because a value of the GPU's libm lay too
     close to an FP32 rounding boundary to be sure of the CPU's rounding (lib/attn/attn-core.h aa_core_libm). */
  size_t fwd_rows_redone;
  /* The same for the GPU backward: (query, key) pairs whose P the host redid (lib/attn/attn-bwd-core.h). */
  size_t bwd_pairs_redone;
} aa_attn_result_t;

#define AA_ROW_CKPT_LSE 0
#define AA_ROW_CKPT_RECIP 1

/* The case a recipe's conditional keys are resolved on (lib/recipe.h): the
   problem's mask kind, sizes, and whether it has an attention mask, bias,
   key padding or logit offset (`masked`). */
aa_recipe_case_t aa_attn_case(const aa_problem_t *pb);

/* Run the recipe's forward (producing O and its checkpoint) and backward
   on the inputs (values must be representable in recipe io_fmt, else
   AA_EINVAL; NaN/Inf give AA_ENAN). dO may be NULL: forward only (dq, dk,
   dv, dsinks stay unallocated). Rows with no visible key (and no sink) get
   O = 0, LSE = -Inf and zero gradients, as the oracle defines them. Results
   are bitwise identical for any OpenMP thread count (forward parallel over
   (head, q tile), backward over KV heads). Memory is O(n d + tile^2) per
   thread, except whole-row recipes (tile_k = 0, e.g. naive-bf16) which hold
   tile_q x n_k scores per thread (AA_ENOMEM beyond 16 GiB of tiles).
   tiles_skipped counts the backward's skipped (q head, q tile, k tile)
   triples. The library reads no clock: a caller that reports timings
   times the call (dO NULL times the forward alone). A varlen problem
   (problem.h) runs sequence by sequence, each with the recipe's tiles
   starting at the sequence's first row; o, lse, dq, dk, dv are packed, the
   counters summed, and the per-row checkpoint (recip, shift, row_ckpt,
   tile_flagged) left empty. Recipes that redraw dropout masks are refused
   there (AA_EINVAL). */
int aa_attn_run(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_error_t *err);
void aa_attn_result_free(aa_attn_result_t *res);
/* aa_attn_run with a device choice (aa_attn_run is AA_ATTN_DEVICE_CPU): the same bits wherever a pass runs. */
int aa_attn_run_device(aa_attn_result_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_tensor_t *q,
                       const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, aa_attn_device_t dev,
                       aa_error_t *err);

/* FA2's kernel and tile choice for one problem, as PyTorch's flash backend
   makes it on an sm90 GPU (H100/H200 run FA2's sm80 kernels with
   is_sm8x = false and 227 KiB of shared memory per block). Sources (FA2,
   Dao-AILab/flash-attention at 0251105a, the code PyTorch 2.11 builds;
   PyTorch's aten/src/ATen/native/transformers/cuda/flash_attn copy has the
   same functions):
   - split count: flash_api.cpp:281-313 num_splits_heuristic, called by
     set_params_splitkv (flash_api.cpp:323-335) when dropout is off with
     batch*heads*ceil(n_q/64) work units, 2*num_sms "SMs" and block_n =
     256 (d <= 64), 128 (d <= 128), 64 above; > 1 split runs the splitkv
     kernel (flash_api.cpp:265) with 64 x block_n tiles
     (flash_fwd_launch_template.h:181-191), 1 split the standard kernel;
   - standard forward tiles per head dim rounded up by HEADDIM_SWITCH
     (static_switch.h:90-110): 32: 128x128 (:198), 64: 128x128, dropout
     128x64 (:210, :214), 96: 128x64 (:236), 128: 128x64, dropout 128x32
     (:262, :273), 192: 128x64, dropout 64x64 (:286, :288), 256: 64x64 on
     sm90 (:315-318: 228 KiB per SM is not below 4*256*(64+128) bytes);
   - backward tiles (kBlockM x kBlockN of flash_bwd_launch_template.h): 32,
     64: 128x128 (:149-154, :179), 96, 128: 64x128 (:217-222, :248), 192:
     64x64 (:277), 256: 64x64 (:297).
   GQA changes nothing here (heads counts the query heads; dK/dV of the
   group are summed afterwards, recipe key bwd.gqa_reduce) except in
   decode, where mha_fwd first folds the group's heads into query rows
   (aa_fa2_ngroups_swapped: the caller then passes kv_heads and
   heads / kv_heads for batch_heads and n_q); nor does the causal mask
   (sm8x-only branches). Returns AA_EINVAL for d = 0 or d > 256,
   num_sms = 0 or an empty problem. */
typedef struct {
  size_t num_splits;             /* 1: flash_fwd_kernel; > 1: flash_fwd_splitkv_kernel + combine */
  size_t fwd_tile_q, fwd_tile_k; /* kBlockM x kBlockN of the forward kernel that runs */
  size_t bwd_tile_q, bwd_tile_k; /* kBlockM x kBlockN of flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel */
} aa_fa2_dispatch_t;
int aa_fa2_dispatch(aa_fa2_dispatch_t *out, size_t batch_heads, size_t n_q, size_t n_k, size_t d, size_t num_sms,
                    int dropout, aa_error_t *err);
/* The key block of FA2's split-KV kernel for head dimension d (set_params_splitkv, flash_api.cpp:323-335):
   256 for d <= 64, 128 for d <= 128, else 64; its query block is 64. */
size_t aa_fa2_splitkv_block_n(size_t d);
/* The head dimension of the kernel FA2 runs for d: d rounded up by HEADDIM_SWITCH (static_switch.h:90-110) to 32,
   64, 96, 128, 192 or 256; 0 above 256. Its tiles and layouts (kernel_traits.h: kBlockKSmem) follow this, not d. */
size_t aa_fa2_headdim(size_t d);
/* 1 when FA2's mha_fwd runs this problem with seqlenq_ngroups_swapped
   (flash_api.cpp mha_fwd): one query row, GQA, no window it keeps (a side
   >= n_k is none), no dropout, d % 8 == 0 and no ALiBi. is_causal is
   dropped for seqlen_q == 1 before the test, so a causal decode swaps too. */
int aa_fa2_ngroups_swapped(const aa_problem_t *pb, int dropout);
/* The heads and query rows FA2's launch code sees for pb: with the decode
   fold (aa_fa2_ngroups_swapped) kv_heads and heads / kv_heads, else heads
   and n_q. Returns whether the fold applies. */
int aa_fa2_seen(size_t *heads, size_t *n_q, const aa_problem_t *pb, int dropout);
/* FA2's num_splits_heuristic itself (flash_api.cpp:281-313) for the given
   work units, "SM" count (FA2 passes twice the SM count), key blocks and
   split cap (FA2: 128). */
size_t aa_fa2_num_splits(size_t units, size_t num_sms, size_t n_blocks, size_t max_splits);

#ifdef __cplusplus
}
#endif
#endif
