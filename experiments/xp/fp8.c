/* attnacc: the `fp8` experiment: FP8 attention forward, baseline against the FA3-style recipe, with and without the
 * Hadamard rotation. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "xp/xp.h"

/* Cells: n x mask x outlier (0: N(0,1) inputs; 1: the FA3 paper's FP8
   setting, N(0,1) + N(0,100) Bernoulli(0.001), AA_DIST_OUTLIER) x d = 128 x
   seed, every recipe on the same BF16 inputs (the attention grid's cell,
   xp_attn_eval). The default recipes:
   - fa2-h100: the BF16 forward, for scale;
   - fp8-baseline = fa3-fp8 with one power-of-two scale per tensor and P cast
     to e4m3 as is (fwd.qkv_scale = per-tensor, fwd.p_scale_exp = 0): a plain
     FP8 attention with per-tensor quantisation;
   - fa3-fp8: per-(KV-)head scales, P times 2^8 before its cast (FA3's
     Max_offset), FP8 wgmma accumulation;
   - fa3-fp8-hadamard: the same after Q and K are rotated by H / sqrt(d)
     (incoherent processing, fwd.qk_rotate = hadamard).
   The forward's o is the FP8 result; the gradients are a BF16 backward fed
   with that forward (FA3 has no FP8 backward). */
static const char *const fp8_default[] = {"fa2-h100", "fp8-baseline", "fa3-fp8", "fa3-fp8-hadamard"};

static int fp8_recipes(xp_ctx_t *ctx, const xp_opts_t *o, aa_error_t *err) {
  if (xp_opt(o, "variants") != NULL) return xp_recipes_from_opts(ctx, o, err);
  for (size_t i = 0; i < sizeof fp8_default / sizeof fp8_default[0]; i++) {
    aa_recipe_t r;
    int rc = AA_OK;
    if (i == 1)
      rc = aa_recipe_from_spec(&r, "fa3-fp8:fwd.qkv_scale=per-tensor,fwd.p_scale_exp=0", err);
    else if (i == 3)
      rc = aa_recipe_from_spec(&r, "fa3-fp8:fwd.qk_rotate=hadamard", err);
    else
      rc = aa_recipe_preset(&r, fp8_default[i], err);
    if (rc != AA_OK) return rc;
    snprintf(r.name, sizeof r.name, "%s", fp8_default[i]);
    if ((rc = xp_ctx_add_recipe(ctx, &r, err)) != AA_OK) return rc;
  }
  return AA_OK;
}

static int fp8_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const int64_t ns_full[] = {1024, 4096}, ns_quick[] = {1024}, outlier[] = {0, 1}, d = 128;
  size_t seeds = o->quick ? 1 : 3;
  int rc;
  ctx->d = (size_t)d;
  if (xp_opt_size(&seeds, o, "seeds", 1, 1000000)) return AA_EINVAL;
  if ((rc = fp8_recipes(ctx, o, err)) ||
      (rc = xp_axis_n(sw, o, o->quick ? ns_quick : ns_full, o->quick ? 1 : 2, err)) ||
      (rc = xp_axis_masks(sw, o, err)) || (rc = aa_sweep_axis_int(sw, "outlier", outlier, 2, 0, err)) ||
      (rc = aa_sweep_axis_int(sw, "d", &d, 1, 0, err)) || (rc = xp_axis_seeds(sw, seeds, err)) ||
      (rc = xp_axis_recipes(sw, ctx, err)) || (rc = xp_attn_columns(sw, err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

static const cli_opt_t params[] = {XP_OPTS_ATTN, XP_OPTS_ORACLE};

const xp_experiment_t xp_fp8 = {
    .name = "fp8",
    .summary = "FP8 attention forward: per-tensor baseline vs FA3-style (per-head scales, P x 2^8), +- Hadamard",
    .description = "Cells: n (1024, 4096; --quick: 1024) x mask x outlier (0: N(0,1); 1: N(0,1) + N(0,100)\n"
                   "Bernoulli(0.001), the FA3 paper's FP8 setting) x d = 128 x seed (3; --quick: 1); inputs\n"
                   "in BF16 from aa_cell_seed; recipes fa2-h100 (BF16), fp8-baseline (fa3-fp8 with\n"
                   "per-tensor scales and no P offset), fa3-fp8, fa3-fp8-hadamard (Q and K rotated); the\n"
                   "rows and columns of table4. o is the FP8 forward's; dq/dk/dv come from a BF16\n"
                   "backward fed with it (FA3 has no FP8 backward).",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .declare = fp8_declare,
    .eval = xp_attn_eval,
    .finish = xp_attn_finish,
};
