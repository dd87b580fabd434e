/* attnacc: score --rows K: K query rows drawn at random, and the problem and folded arrays cut down to them. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ROWS_CLI_H
#define AA_ROWS_CLI_H

#include <stdint.h>

#include "cli/cli.h"

/* The subsample. Each query row's o, LSE and dQ depend on that row's q and
   dO and on every key, nothing of the other rows, so on the drawn rows they
   are exact and cheap (K / n_q of the oracle's work). dK and dV sum over
   every row's P: a subsample of rows does not give them, so they are not
   scored. The rows keep their visible keys (causal, windows, alignment)
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

#endif
