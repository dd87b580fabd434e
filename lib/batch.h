/* attnacc: the batch as part of the problem: FA2's launch decisions for a whole padded batch, and one sequence's
   forward under them. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_BATCH_H
#define AA_BATCH_H

#include <stddef.h>

#include "attn.h"
#include "common.h"
#include "problem.h"
#include "recipe.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A padded batch: `batch` sequences, each of the problem's shape (heads,
   kv_heads, n_q, n_k, d, masks), launched in one call. FA2 (and PyTorch's
   SDPA flash backend, its copy) computes one sequence's output the same way
   whatever the other sequences hold, but chooses the split count from the
   whole batch (flash_api.cpp:323-335 set_params_splitkv: batch x heads x
   ceil(n_q / 64) work units against twice the SM count). num_sms: the GPU's
   SM count (H100 SXM, H200: 132); 0 takes the recipe's fwd.split_sms. */
typedef struct {
  size_t batch;
  size_t num_sms;
} aa_batch_t;

/* What the launch code decides for the whole batch, and the inputs of that
   decision. batch_dependent is 0 for a recipe whose split count and tiles
   are fixed (no tiling = fa2, no fwd.split_sms): its bits cannot depend on
   the batch, and num_splits is then the recipe's own. */
typedef struct {
  int batch_dependent;
  int ngroups_swapped; /* mha_fwd's decode transpose (see aa_batch_decide) */
  size_t heads_seen;   /* heads the heuristic counts: kv_heads when swapped */
  size_t n_q_seen;     /* query rows per head it counts: heads / kv_heads when swapped */
  size_t units;        /* batch x heads_seen x ceil(n_q_seen / 64) */
  size_t sms;          /* the heuristic's "SM" count: 2 x num_sms */
  size_t n_blocks;     /* key blocks of the split-KV kernel: ceil(n_k / block_n) */
  size_t num_splits;   /* 1: the standard kernel; > 1: split-KV + combine */
  size_t fwd_tile_q, fwd_tile_k;
  size_t bwd_tile_q, bwd_tile_k; /* what a backward of the same call would tile by (not batch-dependent) */
} aa_batch_decision_t;

/* The decision FA2 makes for batch b of problem pb under recipe r.
   Decode with GQA is transposed first (flash_api.cpp mha_fwd: for
   seqlen_q == 1 without ALiBi is_causal is dropped, then
   seqlenq_ngroups_swapped = seqlen_q == 1 && num_heads > num_heads_k &&
   no window && p_dropout == 0 && head_size % 8 == 0 && no ALiBi turns q
   (b, 1, h_k * g, d) into (b, g, h_k, d): seqlen_q = g, num_heads = h_k),
   which changes the work units the split heuristic sees, not the rows'
   arithmetic. AA_EINVAL for a varlen problem (FA2's varlen forward splits
   only for decode; not modelled), batch = 0, or no SM count. */
int aa_batch_decide(aa_batch_decision_t *out, const aa_problem_t *pb, const aa_recipe_t *r, const aa_batch_t *b,
                    aa_error_t *err);

/* r with the decision fixed: tiling = fa2 and fwd.split_sms replaced by the
   tiles and split count of dec (the same fields run.c fills for one
   problem), so that aa_attn_run computes the sequence as the batch's
   launch would. */
void aa_batch_recipe(aa_recipe_t *out, const aa_recipe_t *r, const aa_batch_decision_t *dec);

/* One sequence (q, k, v of the problem's shape) of batch b: its forward
   output (out->o, out->lse) under the batch's decision, written to *dec
   too. The sequence's bits in a batch of B are those of this call. */
int aa_batch_forward(aa_attn_result_t *out, aa_batch_decision_t *dec, const aa_problem_t *pb, const aa_recipe_t *r,
                     const aa_batch_t *b, const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v,
                     aa_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
