/* attnacc: a kernel's inputs and outputs as score and closest read them (cli/sources.c). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_CLI_SOURCES_H
#define AA_CLI_SOURCES_H

#include "attnacc.h"
#include "cli/cli.h"
#include "cli/features.h"

typedef enum { CLI_SRC_DIR, CLI_SRC_NPZ, CLI_SRC_ST } cli_src_kind_t;

/* The arrays of --inputs (q, k, v, do [, sinks] [, keep]) and --grads (o [optional], dq, dk, dv [, dsinks with
   sinks] [, lse]): a
   folder of NAME.npy, an .npz archive or a .safetensors file each; dtypes '<u2' BF16 bits, '<f2', '<f4', '<f8'
   (flags AA_NPY_BF16_BITS: '<i2' too). The layout is given (layout) or inferred when only one fits; [B, H, N, d]
   arrays are folded into [B*H, N, d] tensors. */
typedef struct {
  const char *cmd, *inputs_src, *grads_src;
  unsigned flags;     /* set before reading: AA_NPY_BF16_BITS */
  aa_layout_t layout; /* set before reading: AA_LAYOUT_AUTO or the given one; then the resolved one */
  cli_src_kind_t ik, gk;
  aa_dims_t qd, kd;                   /* the resolved dims of q and k */
  aa_ndarray_t raw[6], graw[6];       /* q, k, v, do, sinks, keep; o, dq, dk, dv, dsinks, lse */
  char label[6][320], glabel[6][320]; /* "q.npy" or "in.npz[q]", for messages */
  aa_fmt_t in_fmt;                    /* the widest storage format of the inputs */
  cli_inputs_t in;                    /* q, k, v, dO as [B*H, N, d] tensors, sinks [H, K] */
  aa_tensor_t g[5];                   /* o (data NULL when absent), dq, dk, dv, dsinks */
  aa_tensor_t lse;                    /* the kernel's lse, folded [B*H, Nq] (data NULL when absent) */
  aa_error_t err;
} cli_sources_t;

/* Each returns 0, or 2 after a message naming the problem. */
/* The kinds of both paths (a folder, an .npz, a .safetensors). */
int cli_sources_open(cli_sources_t *s, const char *cmd, const char *inputs, const char *grads);
/* Read q, k, v, do (and sinks) and resolve the layout and dims (qd, kd), without converting. */
int cli_sources_read_inputs(cli_sources_t *s);
/* Fold the inputs into s->in (after a resource check on qd, kd); in_fmt. */
int cli_sources_import_inputs(cli_sources_t *s);
/* Read the kernel's outputs into g[], in the inputs' layout, and the optional lse [B, H, Nq] (natural log with the
   softmax scale: flash-attn's softmax_lse, head-major whatever q's layout) into lse. */
int cli_sources_read_outputs(cli_sources_t *s);
/* The keep mask of --dropout P > 0 (the array keep of the inputs: 0/1 values [B, H, Nq, Nk], head-major as
   flash-attn returns it), folded into *keep [B*H][Nq][Nk] (malloc'd; NULL when P = 0); a keep array without
   --dropout, or --dropout without one, is refused. */
int cli_sources_keep(cli_sources_t *s, double dropout_p, uint8_t **keep);
/* The problem of the inputs: dims, --causal, run's features (--window W|L,R, --causal-align, --softcap, --alibi*,
   features_cli_problem; --alibi-slopes gives one slope per head of q, the same for every batch element, as
   flash-attn's alibi_slopes [H]), --scale, the sinks; before aa_problem_check. */
int cli_sources_problem(aa_problem_t *pb, features_cli_t *fc, cli_sources_t *s, const cli_args_t *a);
void cli_sources_free(cli_sources_t *s);

#endif
