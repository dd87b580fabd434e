/* attnacc: the attention problem (shapes, scale, masks and their alignment, windows, softcap, ALiBi, GQA, sinks,
 * dropout keep mask) shared by oracle and emulation. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_PROBLEM_H
#define AA_PROBLEM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Alignment of the causal mask and of the windows: where query row i puts
   its diagonal key c(i). top-left (PyTorch SDPA is_causal, [nki-bwd]):
   c(i) = i. bottom-right (flash-attn >= 2.1, its window_size always):
   c(i) = i + n_k - n_q, so the last query sees the last key. */
typedef enum { AA_ALIGN_TOP_LEFT = 0, AA_ALIGN_BOTTOM_RIGHT = 1 } aa_align_t;

/* ALiBi bias added to the (softcapped) scaled score of head h as
   slope_h * dist(i, j), dist an integer:
   - AA_ALIBI_FLASH: dist = -|i + n_k - n_q - j|, flash-attn's documented form
     (flash_attn_interface.py:1124-1125, "A bias of (-alibi_slope * |i +
     seqlen_k - seqlen_q - j|) is added"), whatever the mask alignment;
   - AA_ALIBI_TORCH: dist = j - i, the signed additive bias PyTorch users
     build (attn_mask = slope * (j - i), FlexAttention's score_mod example);
     on the causal top-left visible region it equals the flash form. */
typedef enum { AA_ALIBI_NONE = 0, AA_ALIBI_FLASH = 1, AA_ALIBI_TORCH = 2 } aa_alibi_t;

/* An unbounded side of a two-sided window (flash-attn's -1). */
#define AA_WINDOW_INF SIZE_MAX

/* What is being computed, independent of how: both the oracle and the
   emulated pipelines read it, neither owns it.

   Score of (head h, query i, key j): s = scale q_i.k_j, then
     s' = softcap tanh(s / softcap)                  (when softcap > 0)
     s'' = s' + slope_h dist(i, j)                   (when alibi != NONE)
   and P = softmax_j(s'' over the visible keys, and the sinks). The softcap
   applies to the scaled score, as flash-attn (flash_api.cpp:130-133 sets
   params.softcap = softmax_scale / softcap and the exp scale to softcap;
   utils.h:396-399 computes tanh(qk * params.softcap)); the ALiBi bias is
   added after the softcap (flash_fwd_kernel.h:331-335: apply_softcap, then
   the mask adds the bias, divided by the exp scale at :294). Gradients:
   dS = P (dP - D) (1 - tanh^2(s / softcap)) (flash_bwd_kernel.h:486-488,
   591-592); the bias has no gradient.

   Masks. With c(i) the diagonal key of the alignment above, key j is
   visible from query i when
     (!causal || j <= c(i))
     && (window == 0 || j >= c(i) - window + 1)        ([nki-bwd] L258: W keys)
     && (!local || ((window_left == AA_WINDOW_INF || j >= c(i) - window_left)
                    && (window_right == AA_WINDOW_INF || j <= c(i) + window_right)))
     && (bound_min == NULL || (bound_min[i] <= j && j < bound_max[i])),
   [nki-bwd] (attention_bwd.py:943-962, 924-933) for causal, window and
   packing, flash-attn mask.h:53-54 for (local, window_left, window_right):
   flash-attn's window_size = (left, right) with -1 = AA_WINDOW_INF, bottom-
   right aligned; causal is right = 0 (flash_api.cpp:155-157). n_q != n_k
   is allowed with either alignment.

   Rows with no visible key (bottom-right with n_q > n_k: rows i < n_q - n_k;
   a window wholly outside [0, n_k); packing) keep the defined result of
   oracle.h: O = 0, LSE = -Inf (flash-attn writes +Inf, softmax.h:180),
   zero dQ row, no contribution to dK/dV; softcap and ALiBi change the
   scores of visible keys only, never which keys are visible.

   Attention mask, additive bias, key padding and logit offset (PyTorch
   SDPA's attn_mask, a padded batch, a shifted LSE). Key j is visible from
   query i of head h when it is visible by the rules above AND
     (mask == NULL || mask[h mask_hstride + i n_k + j] != 0)      (bool: 1 attends, SDPA's True)
     && (bias == NULL || bias[h mask_hstride + i n_k + j] != -Inf)
     && j < n_k - key_pad                                        (the batch element's key length)
   (aa_problem_visible_h). mask and bias share the broadcast stride:
   mask_hstride = n_q n_k for a mask per head, 0 for one mask broadcast over
   the heads (SDPA's [Nq, Nk] and [1, Nq, Nk]); a batch dimension is
   resolved by the front end, which points each batch element's problem at
   its slice. On the visible keys the score gains
     s''' = s'' + bias(h, i, j) + logit_offset                   (aa_problem_bias)
   after the softcap, as ALiBi; the sum is exact (the oracle adds it in
   double-double), so a logit offset c shifts every LSE by exactly c and
   leaves P, O, dQ, dK, dV unchanged: it moves the LSE far below -88.7 or
   above 88.7 (where exp(LSE) leaves FP32) without changing anything else.
   A boolean mask, a bias or key padding make the visible keys of a row a
   set, no longer an interval: aa_problem_row_keys stays the interval of the
   structural masks above and aa_problem_visible_h tests inside it.
   A row whose keys are all masked (or padded) is a row with no visible key:
   the definition above holds (O = 0, LSE = -Inf, zero dQ row, nothing to
   dK/dV), and the pass rules score a kernel's 0 there as exact and its NaN
   as a NaN (lib/score.h); what a kernel does there is recipe data (mask.*
   keys, lib/recipe.h). */
typedef struct {
  size_t n_q, n_k;   /* query and key lengths */
  size_t d;          /* head dimension */
  size_t heads;      /* query heads */
  size_t kv_heads;   /* key/value heads; heads % kv_heads == 0 (GQA) */
  int scale_default; /* 1: softmax scale is exactly 1/sqrt(d) (irrational for odd log2 d) */
  double scale;      /* used when scale_default == 0 */
  int causal;
  aa_align_t align;                     /* of causal, window and the two-sided window */
  size_t window;                        /* sliding window of W keys (0 = none); only with causal, [nki-bwd] L258 */
  int local;                            /* 1: the two-sided window below applies */
  size_t window_left, window_right;     /* keys left / right of the diagonal (AA_WINDOW_INF: unbounded) */
  const int32_t *bound_min, *bound_max; /* per query [n_q], both or neither (sequence packing) */
  size_t num_sinks;                     /* sink logits per head */
  const double *sinks;                  /* [heads][num_sinks] or NULL */
  double softcap;                       /* 0: off; else finite > 0 */
  aa_alibi_t alibi;
  const double *alibi_slopes; /* [heads], taken exactly (flash-attn takes FP32 slopes) */
  /* Dropout: keep mask [heads][n_q][n_k] (1 keep, 0 drop) and the rescale
     applied to kept weights; NULL for no dropout. The oracle applies exactly
     this mask: it is an input, not re-derived. */
  const uint8_t *keep;
  double keep_scale;
  /* Varlen batch, as flash_attn_varlen_func takes it: varlen_batch > 0
     sequences packed along the length axes; sequence b holds queries
     cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 and keys cu_seqlens_k[b] ..
     cu_seqlens_k[b+1] - 1 (both arrays [varlen_batch + 1], from 0, strictly
     increasing, ending at n_q and n_k). Each sequence is its own problem
     (aa_problem_varlen_seq): masks, their alignment, ALiBi and softcap apply
     within it, and no query sees another sequence's keys. The oracle and
     the emulation run the sequences one by one and pack the results, so the
     tiles start at each sequence's first row as a varlen kernel's do. Not
     combined with packing bounds, sinks or dropout. 0: one sequence. */
  size_t varlen_batch;
  const int32_t *cu_seqlens_q, *cu_seqlens_k;
  /* Attention mask and additive bias (spec above): [heads or 1][n_q][n_k]
     each, head stride mask_hstride (n_q n_k, or 0: broadcast); NULL: none.
     key_pad: the last key_pad keys are padding (0: none). logit_offset:
     added to every score (finite, |c| <= 2^40). */
  const uint8_t *mask;
  const double *bias;
  size_t mask_hstride;
  size_t key_pad;
  double logit_offset;
  /* 1: the bias's -Inf entries are a boolean mask's (SDPA's bool attn_mask, which a front end read as its additive
     form, npy.h AA_NPY_BOOL_BIAS): a recipe with mask.score = fill scores those keys as the boolean mask's. */
  int bias_bool;
} aa_problem_t;

/* Fill sensible defaults: scale_default = 1, everything else off. */
void aa_problem_init(aa_problem_t *pb, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads);
/* Check shapes and mask options; AA_EINVAL/AA_ESHAPE with a message. */
int aa_problem_check(const aa_problem_t *pb, aa_error_t *err);
/* Sequence b of a varlen problem: *seq is pb with that sequence's lengths
   and no varlen batch; *q0, *k0 its first query and key row in the packed
   tensors. pb must have passed aa_problem_check. */
void aa_problem_varlen_seq(aa_problem_t *seq, const aa_problem_t *pb, size_t b, size_t *q0, size_t *k0);
/* Softmax scale as a double (1.0 / sqrt(d) in double arithmetic when default). */
double aa_problem_scale(const aa_problem_t *pb);
/* The standard ALiBi slopes (Press et al. 2022; flash-attn tests'
   get_alibi_slopes, the ALiBi reference code): for H a power of two
   slope_h = 2^(-8 (h + 1) / H); otherwise the H' = 2^floor(log2 H) slopes
   of H', then every other slope of 2 H' until H are given. Each is rounded
   to FP32 (the dtype flash-attn requires), so the problem holds the values
   a kernel receives. out: [heads]. */
void aa_problem_alibi_geometric(double *out, size_t heads);

/* The bias of a batch folded into the heads (head b heads + h of a [batch, heads] problem, as the layouts fold
   [B, H, N, d]) from an additive mask [mb][mh][n_q][n_k] (mb 1 or batch, mh 1 or heads: broadcast as SDPA's
   attn_mask; mask NULL: 0 everywhere) and key lengths (nlen 0: none; 1: key_len[0] for every batch element;
   batch: one each): out[bh][i][j] = -Inf for j >= the length, else the mask's entry. out: [batch heads][n_q][n_k],
   to be the problem's bias with mask_hstride n_q n_k. */
void aa_problem_mask_expand(double *out, const double *mask, size_t mb, size_t mh, size_t batch, size_t heads,
                            size_t n_q, size_t n_k, const size_t *key_len, size_t nlen);

/* ---- resources, estimated before anything is allocated ----
   What one evaluation of a problem of these sizes needs: the bytes held at
   once (inputs q, k, v, dO, the oracle's outputs and workspace, and `sets`
   output sets: one per emulated recipe, naive reference or caller's
   outputs held at the same time) and the single-core seconds of the fast
   oracle plus the `sets` pipelines. A pure function of the sizes, blind to
   masks, recipes and values (lib/problem/estimate.c says why and how it
   was calibrated): an order of magnitude for front ends to refuse on, not a
   promise. Doubles, so that no size overflows. */
typedef struct {
  double bytes;
  double seconds;
} aa_problem_cost_t;

void aa_problem_cost(aa_problem_cost_t *c, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads,
                     size_t sets);
/* The default memory limit of the front ends: 3/4 of the physical memory
   (sysconf), leaving the rest to the system and the caller's own data;
   0 when unknown. */
double aa_problem_mem_default(void);

/* The diagonal key c(i) of query i under the problem's alignment. */
static inline int64_t aa_problem_diag(const aa_problem_t *pb, size_t i) {
  return (int64_t)i + (pb->align == AA_ALIGN_BOTTOM_RIGHT ? (int64_t)pb->n_k - (int64_t)pb->n_q : 0);
}

/* The keys query row i sees form one interval [*lo, *hi) (empty: lo = hi):
   causal, windows and packing bounds each cut an interval. */
static inline void aa_problem_row_keys(const aa_problem_t *pb, size_t i, size_t *lo, size_t *hi) {
  int64_t a = 0, b = (int64_t)pb->n_k, c = aa_problem_diag(pb, i);
  if (pb->causal && b > c + 1) b = c + 1;
  if (pb->window != 0 && a < c + 1 - (int64_t)pb->window) a = c + 1 - (int64_t)pb->window;
  if (pb->local) {
    if (pb->window_left != AA_WINDOW_INF && a < c - (int64_t)pb->window_left) a = c - (int64_t)pb->window_left;
    if (pb->window_right != AA_WINDOW_INF && b > c + (int64_t)pb->window_right + 1)
      b = c + (int64_t)pb->window_right + 1;
  }
  if (pb->bound_min != NULL) {
    if (pb->bound_min[i] > a) a = pb->bound_min[i];
    if (pb->bound_max[i] < b) b = pb->bound_max[i];
  }
  if (a > (int64_t)pb->n_k) a = (int64_t)pb->n_k;
  if (b < a) b = a;
  *lo = (size_t)a;
  *hi = (size_t)b;
}

/* The queries that may see key j form the interval [*lo, *hi); exactly the
   visible ones when there are no packing bounds (test aa_problem_visible
   inside it otherwise). */
static inline void aa_problem_col_queries(const aa_problem_t *pb, size_t j, size_t *lo, size_t *hi) {
  int64_t off = aa_problem_diag(pb, 0), a = 0, b = (int64_t)pb->n_q,
          jj = (int64_t)j - off; /* c(i) >= j iff i >= jj */
  if (pb->causal && a < jj) a = jj;
  if (pb->window != 0 && b > jj + (int64_t)pb->window) b = jj + (int64_t)pb->window;
  if (pb->local) {
    if (pb->window_right != AA_WINDOW_INF && a < jj - (int64_t)pb->window_right) a = jj - (int64_t)pb->window_right;
    if (pb->window_left != AA_WINDOW_INF && b > jj + (int64_t)pb->window_left + 1)
      b = jj + (int64_t)pb->window_left + 1;
  }
  if (a > (int64_t)pb->n_q) a = (int64_t)pb->n_q;
  if (b < a) b = a;
  *lo = (size_t)a;
  *hi = (size_t)b;
}

static inline int aa_problem_visible(const aa_problem_t *pb, size_t i, size_t j) {
  size_t lo, hi;
  aa_problem_row_keys(pb, i, &lo, &hi);
  return j >= lo && j < hi;
}

/* ALiBi distance dist(i, j) of the form pb->alibi (0 when off): the bias is
   alibi_slopes[h] * dist exactly. */
static inline int64_t aa_problem_alibi_dist(const aa_problem_t *pb, size_t i, size_t j) {
  if (pb->alibi == AA_ALIBI_FLASH) {
    int64_t x = (int64_t)i + (int64_t)pb->n_k - (int64_t)pb->n_q - (int64_t)j;
    return x < 0 ? x : -x;
  }
  if (pb->alibi == AA_ALIBI_TORCH) return (int64_t)j - (int64_t)i;
  return 0;
}

/* 1 when visibility is more than the interval of aa_problem_row_keys: a
   boolean mask, a bias (its -Inf entries mask) or key padding. Callers
   branch on it once per problem. */
static inline int aa_problem_has_mask(const aa_problem_t *pb) {
  return pb->mask != NULL || pb->bias != NULL || pb->key_pad != 0;
}

/* 1 when key j passes the mask, the bias's -Inf entries and the key padding
   (not the structural masks: aa_problem_visible_h combines both). */
static inline int aa_problem_mask_ok(const aa_problem_t *pb, size_t h, size_t i, size_t j) {
  size_t e = h * pb->mask_hstride + i * pb->n_k + j;
  if (j + pb->key_pad >= pb->n_k) return 0;
  if (pb->mask != NULL && pb->mask[e] == 0) return 0;
  return pb->bias == NULL || pb->bias[e] != -INFINITY;
}

/* 1 when (h, i, j) is masked by a -Inf entry of a float bias (not by the boolean mask, a bias read from one
   (bias_bool), or the key padding). */
static inline int aa_problem_bias_blocks(const aa_problem_t *pb, size_t h, size_t i, size_t j) {
  return pb->bias != NULL && !pb->bias_bool && pb->bias[h * pb->mask_hstride + i * pb->n_k + j] == -INFINITY;
}

/* Visibility of (h, i, j) with everything: the interval and the mask. */
static inline int aa_problem_visible_h(const aa_problem_t *pb, size_t h, size_t i, size_t j) {
  return aa_problem_visible(pb, i, j) && (!aa_problem_has_mask(pb) || aa_problem_mask_ok(pb, h, i, j));
}

/* The bias entry of (h, i, j) without the offset (0 without a bias). */
static inline double aa_problem_bias(const aa_problem_t *pb, size_t h, size_t i, size_t j) {
  return pb->bias != NULL ? pb->bias[h * pb->mask_hstride + i * pb->n_k + j] : 0.0;
}

/* 1 when the problem adds a bias or an offset to the scores. */
static inline int aa_problem_has_bias(const aa_problem_t *pb) {
  return pb->bias != NULL || pb->logit_offset != 0;
}

/* 1 when the problem modifies scores (softcap, ALiBi, a bias or an offset). */
static inline int aa_problem_has_score_mod(const aa_problem_t *pb) {
  return pb->softcap > 0 || pb->alibi != AA_ALIBI_NONE || aa_problem_has_bias(pb);
}

#ifdef __cplusplus
}
#endif
#endif
