/* attnacc: dropout options of the run command (mask draws, mismatch, keep rate, E[O] bias estimate). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_DROPOUT_CLI_H
#define AA_DROPOUT_CLI_H

#include <stdio.h>

#include "cli/cli.h"

/* The options `run` adds to its table (name, metavar, default, help). */
// clang-format off
#define DROPOUT_CLI_OPTS                                                                                   \
  {"dropout", "P", "0 = off", "dropout probability (the emulated backward redraws the mask, see below)"},  \
  {"dropout-scheme", "NAME", "recipe's, else position-keyed",                                              \
   "tile-seeded | position-keyed | u8-threshold (lib/dropout.h)"},                                        \
  {"dropout-seed", "S", "= seed", "seed of the dropout mask draw"},                                        \
  {"dropout-seeds", "K", "32", "independent mask draws for the E[O] bias estimate (see below)"}
// clang-format on

/* Text `run --help` appends to its description. */
#define DROPOUT_CLI_HELP                                                                                             \
  "\n\nDropout (--dropout P): the forward's keep mask is drawn with the forward tiling\n"                            \
  "and given to the oracle exactly; each variant's emulated backward redraws it with\n"                              \
  "its backward tiling (NKI twin: 128 x 512 forward chunks; backward 512-wide K tiles\n"                             \
  "when n_k >= 512, else 128), so the metrics are the backward's error for the\n"                                    \
  "forward that ran. Reported: mismatch (fraction of the heads x n x n_k mask bits\n"                                \
  "the redraw got different), the realised keep rate against nominal 1-p and the\n"                                  \
  "scheme's exact rate, and the bias of E[O] implied by the rescale s: exact\n"                                      \
  "E[m] s - 1, and its estimate over K = --dropout-seeds independent forward masks\n"                                \
  "(seeds S + k 2^32): b_k = s * kept_k / elements - 1 is the bias of the average\n"                                 \
  "weight of draw k (every weight has the same E[m s], so E[O] = (1 + E[b]) O);\n"                                   \
  "the estimate is mean(b_k) +- 1.96 sd(b_k)/sqrt(K) (normal 95% interval)."

typedef struct {
  int on;
  aa_dropout_t d;
  unsigned nseeds;
  uint8_t *fwd, *bwd; /* [heads][n_q][n_k] */
  double keep_scale;
  size_t fwd_tq, fwd_tk, bwd_tq, bwd_tk;
  size_t elements, mismatch_count;
  double mismatch, keep_rate, expected_keep, implied_bias, bias_mean, bias_hw;
} dropout_cli_t;

/* Read --dropout, --dropout-scheme, --dropout-seed, --dropout-seeds (NULL
   when absent). The scheme defaults to base's (a recipe's dropout) when
   that is not none, else position-keyed; tiles come from base. Returns 0
   or the exit status 2 after a message. dc->on = 0 without --dropout. */
int dropout_cli_setup(dropout_cli_t *dc, const char *cmd, const char *p_s, const char *scheme_s, const char *seed_s,
                      const char *seeds_s, uint64_t default_seed, const aa_dropout_t *base);
/* Draw the forward mask (into pb->keep / keep_scale) and the backward
   redraw, and compute every statistic. */
int dropout_cli_draw(dropout_cli_t *dc, aa_problem_t *pb, aa_error_t *err);
/* The "dropout" member of the run document (only when dc->on): scheme, tiles, mask statistics; NULL when out of
 * memory. */
json_t *dropout_cli_json(const dropout_cli_t *dc);
void dropout_cli_print(FILE *f, const dropout_cli_t *dc);
void dropout_cli_free(dropout_cli_t *dc);

#endif
