/* attnacc: the `table4` experiment: the accuracy grid of [blackwell-fa] (section 5.3, Table 4) over every backward
 * recipe. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "xp/xp.h"

/* The grid of the Blackwell FlashAttention paper (Stashuk, Yu, Shah; REFERENCES.md [blackwell-fa])
   sections 5.3 (Table 4) and 6.2: BF16, head dim 128, lengths
   1024..32768 (six), dense and causal, forward (o) and backward (dq, dk,
   dv). The paper runs 16 heads with the batch varied so that tokens stay
   fixed; one head per cell with more seeds measures the same per-element
   error distribution at a fraction of the oracle time (--heads restores
   more heads). --quick stops at 4096 so that the whole grid runs in a few
   minutes on two cores (the oracle at 4096 takes about 7 s unloaded). */
static int table4_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const int64_t ns[] = {1024, 2048, 4096, 8192, 16384, 32768};
  size_t heads = 1, seeds = 1;
  int rc;
  ctx->d = 128;
  if (xp_opt_size(&heads, o, "heads", 1, 4096) || xp_opt_size(&seeds, o, "seeds", 1, 1000000)) return AA_EINVAL;
  if ((rc = xp_recipes_from_opts(ctx, o, err)) != AA_OK ||
      (xp_opt(o, "no-naive") == NULL && (rc = xp_add_naive_reference(ctx, o, err)) != AA_OK))
    return rc;
  /* Axis order: length slowest, so that a sweep fills the short lengths of
     every recipe first and the table grows left to right. */
  if ((rc = xp_axis_n(sw, o, ns, o->quick ? 3 : 6, err)) || (rc = xp_axis_masks(sw, o, err)) ||
      (rc = xp_axis_dims(sw, o, 128, heads, err)) ||
      (rc = aa_sweep_axis_int(sw, "heads", &(int64_t){(int64_t)heads}, 1, 0, err)) ||
      (rc = xp_axis_sigma(sw, o, err)) || (rc = xp_axis_seeds(sw, seeds, err)) ||
      (rc = xp_axis_recipes(sw, ctx, err)) || (rc = xp_attn_columns(sw, err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

static const cli_opt_t params[] = {
    XP_OPTS_ATTN,
    {"heads", "H", "1", "query heads per cell"},
    XP_OPTS_SHAPE,
    {"no-naive", NULL, NULL, "with --variants: do not add the naive BF16 reference"},
    {"sigma", "S[,S...]", "1", "input scales: q, k, v, dO ~ S * N(0,1), one axis value each"},
    XP_OPTS_ORACLE};

const xp_experiment_t xp_table4 = {
    .name = "table4",
    .summary = "the Blackwell FlashAttention paper's accuracy grid: BF16, d = 128, n = 1024..32768, dense and "
               "causal, every backward recipe",
    .description = "Cells: n (1024..32768; --quick: up to 4096) x mask x d (128; --d) x heads (x kv_heads\n"
                   "with --kv-heads) x sigma (with --sigma) x seed; each cell draws q, k, v, dO ~ sigma N(0,1)\n"
                   "in BF16 from aa_cell_seed, runs the oracle once and every recipe of --variants (with\n"
                   "--variants, naive-bf16 is added for the flash-attention rule unless --no-naive). Rows:\n"
                   "one per recipe and output (o, dq, dk, dv) with rel_l2, max_abs, max/mean ULP, NaN/Inf\n"
                   "counts, the pass rule |a - b| <= 0.01 + 0.01 |b|, the oracle's certified bound,\n"
                   "recipe_hash, input_seed, version, error; timings last. At the end: the verdicts per\n"
                   "recipe, and each variant NAME:key=value's rel_l2 ratio to NAME when NAME ran too.",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .declare = table4_declare,
    .eval = xp_attn_eval,
    .finish = xp_attn_finish,
};
