/* attnacc: the problem-feature options of the run command (alignment, two-sided windows, softcap, ALiBi, varlen). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_FEATURES_CLI_H
#define AA_FEATURES_CLI_H

#include <stdint.h>

#include "cli/cli.h"

/* The options `run` adds to its table (name, metavar, default, help). */
// clang-format off
/* The problem options alone (a command that reads its inputs, such as score, can add these and call
   features_cli_problem; --window W|L,R is parsed there too). */
#define FEATURES_CLI_PROBLEM_OPTS                                                                            \
  {"causal-align", "top-left|bottom-right", "top-left; bottom-right with --window L,R",                     \
   "diagonal of --causal and the windows: query i sees key i (SDPA) or i + n_k - n_q (flash-attn)"},        \
  {"softcap", "C", "0 = off", "logit softcap s' = C tanh(s / C) on the scaled score (flash-attn softcap)"}, \
  {"alibi", NULL, NULL, "ALiBi bias, standard geometric slopes 2^(-8 (h+1) / H) rounded to fp32"},         \
  {"alibi-form", "flash|torch", "flash", "bias -slope |i + n_k - n_q - j| (flash) or slope (j - i) (torch)"}, \
  {"alibi-slopes", "FILE", NULL, "ALiBi slopes, H numbers in a text file (implies --alibi)"}
#define FEATURES_CLI_OPTS                                                                                    \
  {"n-q", "NQ", "= n", "query length; --n is then the key length n_k"},                                    \
  FEATURES_CLI_PROBLEM_OPTS,                                                                                \
  {"cu-seqlens", "FILE", NULL, "varlen batch: line 1 cu_seqlens_q, optional line 2 cu_seqlens_k (see below)"}
// clang-format on

/* Text `run --help` appends to its description. */
#define FEATURES_CLI_HELP                                                                                            \
  "\n\nProblem features (lib/problem.h): --window W with --causal keeps the last W keys up\n"                        \
  "to the diagonal; --window L,R is flash-attn's window_size (-1 = unbounded side), with\n"                          \
  "or without --causal (causal is R = 0), bottom-right aligned unless --causal-align says\n"                         \
  "otherwise. --softcap and --alibi modify the scores of visible keys only; rows with no\n"                          \
  "visible key (bottom-right with n_q > n_k: the first n_q - n_k rows) get O = 0,\n"                                 \
  "LSE = -Inf and zero gradients. --cu-seqlens FILE: each line holds B+1 increasing\n"                               \
  "integers from 0 (cu_seqlens_q, then cu_seqlens_k; one line: the same for both); the\n"                            \
  "inputs are drawn packed ([H, total, d], the head-major twin of flash-attn's [total,\n"                            \
  "H, d]: sequence b is rows cu[b]..cu[b+1]-1), every sequence is its own problem (its\n"                            \
  "own masks, alignment and ALiBi indices), and the report gives each sequence, then\n"                              \
  "the batch (metrics over all the packed elements)."

typedef struct {
  double *slopes; /* [heads] when ALiBi is on */
  int32_t *cu_q, *cu_k;
  size_t batch; /* 0: no varlen */
} features_cli_t;

/* --n-q (default n) and --cu-seqlens (before the draw): *n_q, and with a
   cu_seqlens file fc->batch, cu_q, cu_k with *n_q, *n_k set to the totals.
   0, or 2 after a message naming the problem. */
int features_cli_lengths(features_cli_t *fc, const char *cmd, const cli_args_t *a, size_t *n_q, size_t *n_k);
/* --causal-align, --window, --softcap, --alibi, --alibi-form, --alibi-slopes into pb (after aa_problem_init and
   --causal); 0, or 2 after a message. */
int features_cli_problem(features_cli_t *fc, const char *cmd, const cli_args_t *a, aa_problem_t *pb);
void features_cli_free(features_cli_t *fc);

/* The varlen batch of `run` (fc->batch > 0): pb and in describe the packed
   batch ([H, total, d]); every sequence b is run as its own problem (pb
   with n_q, n_k of b and the rows cu[b]..cu[b+1]-1), the oracle and each
   recipe per sequence, then every output compared over the whole packed
   batch. Prints the table (or the JSON object {"cu_seqlens_q", "cu_seqlens_k",
   "sequences": [...], "batch": ...}) only when everything succeeded, and
   writes it to out_file when given. Returns the exit status. */
int features_cli_run_varlen(const features_cli_t *fc, const char *cmd, const cli_report_t *rep,
                            const cli_inputs_t *in, const aa_recipe_t *recipes, size_t nrec, int json,
                            const char *out_file);

#endif
