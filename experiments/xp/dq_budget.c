/* attnacc: the `dq-budget` experiment: fixed-point dQ budget map (fallback fraction and added error). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xp/xp.h"

static const cli_opt_t params[] = {
    {"n", "N[,N...]", "1024,2048,4096,8192,16384,32768", "sequence lengths"},
    {"masks", "dense,causal", "dense,causal", "masks"},
    {"sigma", "X[,X...]", "1", "input scales (inputs sigma*N(0,1), bf16)"},
    {"d", "D", "128", "head dimension"},
    {"heads", "H", "1", "heads"},
    {"width", "W", "16", "fixed-point word width (16: packed pairs)"},
    {"scale-exp", "S", "12", "centre of the probed scale exponents (S-8..S+8)"},
    {"variant", "NAME", "fa2-fixed", "preset whose dQ reduction is switched to fixed with the probe on"},
    {"seed", "S", "1", "base seed (mixed with the cell coordinates)"},
};

static const char description[] =
    "For every (mask, sigma, n) cell: draw inputs, run the recipe with dq_reduce = fixed\n"
    "and the probe on, and write one row per probed scale exponent s (S-8..S+8):\n"
    "tiles, fail_tiles (tiles failing the conversion or recovered-sum budget, which\n"
    "would be recomputed in FP64), fail_frac, and red_rel_l2: the relative l2\n"
    "distance of the reduced FP32 dQ accumulator (before scale and BF16 rounding)\n"
    "from the FP32 ascending sum of the same partials, failing tiles counted at their\n"
    "FP64 recompute (0). Inputs are drawn from aa_cell_seed(cell) xor --seed.\n"
    "Columns: mask, sigma, n, then the settings d, heads, width, scale_exp_center,\n"
    "variant, base_seed (one value each: a folder of other settings is refused on\n"
    "--resume), then scale_exp, tiles, fail_tiles, fail_frac, red_rel_l2; timing:\n"
    "seconds. plots/dqbudget.gp finds its columns by name.\n"
    "Default folder: results/dq-budget. Plot:\n"
    "gnuplot -e \"csv='DIR/results.csv'; out='x.png'\" plots/dqbudget.gp";

typedef struct {
  aa_recipe_t base;
  size_t d, heads;
  uint64_t seed;
} dq_t;

static int eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *vctx) {
  const xp_ctx_t *ctx = vctx;
  const dq_t *cx = ctx->priv;
  size_t n = (size_t)aa_cell_int(cell, "n", 0);
  double sigma = aa_cell_double(cell, "sigma", 1);
  int causal = strcmp(aa_cell_str(cell, "mask", "dense"), "causal") == 0;
  aa_error_t *err = aa_sweep_rows_error(rows);
  cli_inputs_t in = {0};
  aa_problem_t pb;
  aa_attn_result_t res;
  int st;
  xp_cell_threads(ctx);
  st = cli_inputs_draw(&in, aa_cell_seed(cell) ^ cx->seed, 0, sigma, n, cx->d, cx->heads, cx->heads, 0,
                       cx->base.io_fmt, err);
  if (st != AA_OK) return st;
  aa_problem_init(&pb, n, n, cx->d, cx->heads, cx->heads);
  pb.causal = causal;
  double t0 = cli_now();
  st = aa_attn_run(&res, &pb, &cx->base, &in.q, &in.k, &in.v, &in.dO, err);
  double secs = cli_now() - t0;
  cli_inputs_free(&in);
  if (st != AA_OK) return st;
  const aa_reduce_stats_t *s = &res.dq_reduce;
  for (int k = 0; k < AA_REDUCE_PROBE; k++) {
    aa_sweep_row_new(rows);
    aa_sweep_set_int(rows, "scale_exp", cx->base.bwd_dq_reduce.scale_exp + k - AA_REDUCE_PROBE / 2);
    aa_sweep_set_int(rows, "tiles", (int64_t)s->probe_tiles);
    aa_sweep_set_int(rows, "fail_tiles", (int64_t)s->probe_fail[k]);
    aa_sweep_set_double(rows, "fail_frac", s->probe_tiles ? (double)s->probe_fail[k] / (double)s->probe_tiles : 0);
    aa_sweep_set_double(rows, "red_rel_l2", s->probe_ref2 > 0 ? sqrt(s->probe_err2[k] / s->probe_ref2) : 0);
    aa_sweep_set_double(rows, "seconds", secs);
  }
  aa_attn_result_free(&res);
  return AA_OK;
}

static int dq_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const char *const cols[] = {"scale_exp", "tiles", "fail_tiles", "fail_frac", "red_rel_l2", "seconds@"};
  size_t width = 16, nn, nm, nsig;
  double sc = 12;
  int64_t ns[32];
  double sigmas[32];
  const char *masks[2], *variant = xp_opt(o, "variant") ? xp_opt(o, "variant") : "fa2-fixed";
  char mbuf[64];
  int rc;
  dq_t *cx = calloc(1, sizeof *cx);
  if ((ctx->priv = cx) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  cx->d = 128;
  cx->heads = 1;
  cx->seed = 1;
  if ((rc = aa_recipe_preset(&cx->base, variant, err)) != AA_OK) return rc;
  if (xp_opt_size(&cx->d, o, "d", 1, 4096) || xp_opt_size(&cx->heads, o, "heads", 1, 4096) ||
      xp_opt_size(&width, o, "width", 2, 32) || xp_opt_double(&sc, o, "scale-exp", -190, 190, 0) ||
      xp_opt_u64(&cx->seed, o, "seed") ||
      xp_opt_ints(ns, &nn, 32, o, "n", "1024,2048,4096,8192,16384,32768", 1, 1 << 20) ||
      xp_opt_strs(masks, &nm, 2, mbuf, sizeof mbuf, o, "masks", "dense,causal") ||
      xp_opt_doubles(sigmas, &nsig, 32, o, "sigma", "1", 0, 1e300, 1))
    return AA_EINVAL;
  for (size_t i = 0; i < nm; i++)
    if (strcmp(masks[i], "dense") && strcmp(masks[i], "causal"))
      return aa_error_set(err, AA_EINVAL, "--masks: '%s' is not dense or causal", masks[i]);
  cx->base.bwd_dq_reduce.kind = AA_REDUCE_FIXED;
  cx->base.bwd_dq_reduce.width = (unsigned)width;
  cx->base.bwd_dq_reduce.scale_exp = (int)lround(sc);
  cx->base.bwd_dq_reduce.probe = 1;
  if ((rc = aa_recipe_check(&cx->base, err)) != AA_OK || (rc = xp_ctx_add_recipe(ctx, &cx->base, err)) != AA_OK)
    return rc;
  /* The settings are one-value coordinates (no effect on aa_cell_seed):
     columns of every row, and a folder of other settings is refused on
     --resume. plots/dqbudget.gp reads the columns by name. */
  char seedtxt[24];
  snprintf(seedtxt, sizeof seedtxt, "%llu", (unsigned long long)cx->seed);
  if ((rc = aa_sweep_axis_str(sw, "mask", masks, nm, 0, err)) ||
      (rc = aa_sweep_axis_double(sw, "sigma", sigmas, nsig, 0, err)) ||
      (rc = aa_sweep_axis_int(sw, "n", ns, nn, 0, err)) || (rc = xp_axis_fixed_int(sw, "d", (int64_t)cx->d, err)) ||
      (rc = xp_axis_fixed_int(sw, "heads", (int64_t)cx->heads, err)) ||
      (rc = xp_axis_fixed_int(sw, "width", (int64_t)width, err)) ||
      (rc = xp_axis_fixed_int(sw, "scale_exp_center", (int64_t)cx->base.bwd_dq_reduce.scale_exp, err)) ||
      (rc = xp_axis_fixed_str(sw, "variant", variant, err)) ||
      (rc = xp_axis_fixed_str(sw, "base_seed", seedtxt, err)) ||
      (rc = xp_columns(sw, cols, sizeof cols / sizeof cols[0], err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

const xp_experiment_t xp_dqbudget = {
    .name = "dq-budget",
    .summary = "fixed-point dQ budget map: fallback fraction and added error over n, mask, sigma, scale",
    .description = description,
    .inputs = "sigma*N(0,1) in the recipe's io format, seeded with aa_cell_seed(cell) xor --seed",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .declare = dq_declare,
    .eval = eval,
    .release = xp_free_priv,
};
