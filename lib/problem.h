/* attnacc: the attention problem (shapes, scale, masks, GQA, sinks, dropout keep mask) shared by oracle and
 * emulation. */
#ifndef AA_PROBLEM_H
#define AA_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What is being computed, independent of how: both the oracle and the
   emulated pipelines read it, neither owns it. Masks follow seed 000
   (attention_bwd.py:943-962, 924-933): key j is visible from query i when
     (!causal || j <= i) && (window == 0 || j >= i - window + 1)
     && (bound_min == NULL || (bound_min[i] <= j && j < bound_max[i])).
   Causal alignment is top-left (query i sees keys 0..i), as in seed 000,
   which requires n_q == n_k for causal. */
typedef struct {
  size_t n_q, n_k;   /* query and key lengths */
  size_t d;          /* head dimension */
  size_t heads;      /* query heads */
  size_t kv_heads;   /* key/value heads; heads % kv_heads == 0 (GQA) */
  int scale_default; /* 1: softmax scale is exactly 1/sqrt(d) (irrational for odd log2 d) */
  double scale;      /* used when scale_default == 0 */
  int causal;
  size_t window;                        /* sliding window (0 = none); only with causal, as in seed 000 L258 */
  const int32_t *bound_min, *bound_max; /* per query [n_q], both or neither (sequence packing) */
  size_t num_sinks;                     /* sink logits per head */
  const double *sinks;                  /* [heads][num_sinks] or NULL */
  /* Dropout: keep mask [heads][n_q][n_k] (1 keep, 0 drop) and the rescale
     applied to kept weights; NULL for no dropout. The oracle applies exactly
     this mask: it is an input, not re-derived. */
  const uint8_t *keep;
  double keep_scale;
} aa_problem_t;

/* Fill sensible defaults: scale_default = 1, everything else off. */
void aa_problem_init(aa_problem_t *pb, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads);
/* Check shapes and mask options; AA_EINVAL/AA_ESHAPE with a message. */
int aa_problem_check(const aa_problem_t *pb, aa_error_t *err);
/* Softmax scale as a double (1.0 / sqrt(d) in double arithmetic when default). */
double aa_problem_scale(const aa_problem_t *pb);

/* The keys query row i sees form one interval [*lo, *hi) (empty: lo = hi):
   causal, window and packing bounds each cut an interval. */
static inline void aa_problem_row_keys(const aa_problem_t *pb, size_t i, size_t *lo, size_t *hi) {
  size_t a = 0, b = pb->n_k;
  if (pb->causal && b > i + 1) b = i + 1;
  if (pb->window != 0 && i + 1 > pb->window) a = i + 1 - pb->window;
  if (pb->bound_min != NULL) {
    if ((size_t)pb->bound_min[i] > a) a = (size_t)pb->bound_min[i];
    if ((size_t)pb->bound_max[i] < b) b = (size_t)pb->bound_max[i];
  }
  if (b < a) b = a;
  *lo = a;
  *hi = b;
}

static inline int aa_problem_visible(const aa_problem_t *pb, size_t i, size_t j) {
  if (pb->causal && j > i) return 0;
  if (pb->window != 0 && j + pb->window < i + 1) return 0;
  if (pb->bound_min != NULL && ((int64_t)j < pb->bound_min[i] || (int64_t)j >= pb->bound_max[i])) return 0;
  return 1;
}

#ifdef __cplusplus
}
#endif
#endif
