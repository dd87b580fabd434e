/* attnacc: the attention-mask options of run and score (--mask, --key-len, --logit-offset). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_MASKS_CLI_H
#define AA_MASKS_CLI_H

#include "cli/cli.h"

/* The options (name, metavar, default, help) run and score add to their tables. */
// clang-format off
#define MASKS_CLI_OPTS                                                                                        \
  {"mask", "FILE.npy", NULL,                                                                                 \
   "SDPA's attn_mask: bool ('|b1', True attends) or float (added to every score after the softcap; -inf "    \
   "masks), [n_q, n_k], [1|H, n_q, n_k] or [1|B, 1|H, n_q, n_k]"},                                           \
  {"key-len", "L[,L...]", "n_k", "key padding: batch element b sees keys 0..L_b - 1 (one L, or one per b)"}, \
  {"logit-offset", "C", "0", "constant added to every score: every LSE moves by C, nothing else (|C| <= 2^40)"}
// clang-format on

/* Text `run --help` and `score --help` append to their descriptions. */
#define MASKS_CLI_HELP                                                                                               \
  "\n\nMasks (lib/problem.h): --mask and --key-len hide keys on top of --causal and the\n"                           \
  "windows; a row left with no key gets O = 0, LSE = -Inf and no gradient (a kernel's 0\n"                           \
  "there is exact, its NaN is counted as NaN). The recipe keys mask.score, mask.enter,\n"                            \
  "mask.empty_o and mask.empty_lse say how an emulated kernel treats them."

typedef struct {
  double *bias; /* the problem's bias when the mask had to be expanded over the heads */
  aa_ndarray_t file;
} masks_cli_t;

/* --mask, --key-len and --logit-offset into pb (after aa_problem_init), whose heads are `batch` batch elements of
   heads / batch heads each (folded b-major, as the layouts fold [B, H, N, d]); 0, or 2 after a message naming
   the option and the problem. */
int masks_cli_problem(masks_cli_t *mc, const char *cmd, const cli_args_t *a, size_t batch, aa_problem_t *pb);
void masks_cli_free(masks_cli_t *mc);

#endif
