/* attnacc: score --rows K: K query rows drawn at random and one key/value head group, and the problem and folded
 * arrays cut down to each. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ROWS_CLI_H
#define AA_ROWS_CLI_H

#include <stdint.h>

#include "cli/cli.h"

/* The subsample. Each query row's o, LSE and dQ depend on that row's q and
   dO and on every key, nothing of the other rows, so on the drawn rows they
   are exact and cheap (K / n_q of the oracle's work). dK and dV sum over
   every row's P: a subsample of rows does not give them, so they are
   scored on a kv head group instead (rows_cli_group_t). The rows keep their visible keys (causal, windows, alignment)
   as packing bounds of a problem of K rows; ALiBi (its bias depends on the
   row index), varlen batches and attention masks (problem.h: they do not
   combine with packing bounds) are refused. */
typedef struct {
  size_t k; /* 0: off */
  uint64_t seed;
  size_t n_q;       /* the rows of the whole problem */
  size_t *rows;     /* [k], ascending */
  int32_t *lo, *hi; /* [k]: each row's visible keys [lo, hi) */
  uint8_t *keep;    /* [heads][k][n_k] when the problem has a keep mask */
} rows_cli_t;

/* Draw k distinct rows of [0, n_q) (k < n_q) from pcg32 (seed, stream
   0x726f7773), partial Fisher-Yates, then sorted. */
int rows_cli_draw(rows_cli_t *r, size_t k, uint64_t seed, size_t n_q, aa_error_t *err);
/* pb cut down to the drawn rows (AA_EINVAL for ALiBi and varlen). */
int rows_cli_problem(rows_cli_t *r, aa_problem_t *pb, aa_error_t *err);
/* The drawn rows of a folded tensor [heads, n_q, ...], in place. */
int rows_cli_cut(const rows_cli_t *r, aa_tensor_t *t, aa_error_t *err);
void rows_cli_free(rows_cli_t *r);

/* The dk, dv half of --rows: one whole key/value head group, folded kv head
   index of [B*H_kv] and its query heads index*group .. index*group + group - 1
   of [B*H]. A kv head's dK and dV sum over the rows of its query heads and
   nothing else, so the problem of that group alone gives them exactly, at
   1 / (B*H_kv) of the whole problem's work. */
typedef struct {
  size_t index;    /* the folded kv head, of kv_heads */
  size_t kv_heads; /* B*H_kv of the whole problem */
  size_t group;    /* query heads per kv head (H / H_kv) */
  uint8_t *keep;   /* [group][n_q][n_k] when the problem has a keep mask */
  double *sinks;   /* [group][num_sinks] when it has sinks */
} rows_cli_group_t;

/* Draw the kv head of [0, kv_heads) from pcg32 (seed, stream 0x6b76, "kv":
   not the rows' stream), one bounded draw; heads % kv_heads == 0. */
int rows_cli_group_draw(rows_cli_group_t *g, uint64_t seed, size_t heads, size_t kv_heads, aa_error_t *err);
/* pb (the whole problem) cut to the group: heads = group, kv_heads = 1, the
   keep mask and sinks of its query heads. AA_EINVAL for ALiBi, varlen,
   packing bounds and masks (rows_cli_problem refuses them first). */
int rows_cli_group_problem(rows_cli_group_t *g, aa_problem_t *pb, aa_error_t *err);
/* The group's heads of a folded tensor t into out (a new tensor): kv 1,
   [kv_heads, ...] -> [1, ...] (k, v, dk, dv); kv 0, [heads, ...] ->
   [group, ...] (q, dO). t empty (data NULL): out empty. AA_ESHAPE when t's
   first axis is not that many heads. */
int rows_cli_group_slice(const rows_cli_group_t *g, aa_tensor_t *out, const aa_tensor_t *t, int kv, aa_error_t *err);
/* The indices of s, an output scored on the group's kv head ([1, n_k, d]:
   element, row and head), moved to the whole problem's [kv_heads, n_k, d],
   so that reports name the caller's elements. */
void rows_cli_group_lift(const rows_cli_group_t *g, aa_score_out_t *s, size_t n_k, size_t d);
void rows_cli_group_free(rows_cli_group_t *g);

#endif
