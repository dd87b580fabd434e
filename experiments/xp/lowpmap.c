/* attnacc: the `lowpmap` experiment: maps of low-precision (FP8) attention's error, P saturation and P underflow
 * over logit std, outlier keys, sinks, tile and quantisation block size, and KV length modulo the tile. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xp/xp.h"

/* A cell is one point "MAP=X" of one map (the NOSEED axis "point": every
   point of a seed sees the same draw, so a curve shows its axis and not a
   redraw) x seed. Inputs: q, k, v, dO ~ N(0,1) in BF16 (cli_inputs_draw_qk),
   n_q queries (a slice of the rows: the effects are per row) against n_k
   keys, q calibrated to the logit std as flash-attention 4f3b9be2's FP8 test
   does (xp_fp8_calibrate). Maps:
   - std: the logit std (1 elsewhere);
   - outlier: 4 keys (rows n_k (t + 1) / 5) times X, a power of two (the
     huge-keys / massive distributions: a few keys of large norm that set
     each per-tensor or per-head FP8 scale);
   - sink: a sink token, key 0 with X added to its scaled logit for every
     query (an additive bias; the BOS sink of arXiv 2606.06521);
   - lsink: a learned sink logit X per head (lib/problem.h sinks), each
     recipe run as NAME/open (fwd.sink_at = open: the sink sets the row's
     first running max) and NAME/end (added to the row sum after the keys,
     as FA4's finalize does);
   - tile: fwd.tile_k = X;
   - qblock: quant.block = X (recipes quantising Q, K or V by blocks only);
   - kvmod: n_k = 4 fwd.tile_k + X (flash-attention issues 2577, 2131);
   - pcast: the sink token of "sink", each recipe run four ways, Q, K and V
     left in BF16 (fwd.qkv_fmt, quant.q/k/v = none) so that P's cast is the
     only FP8 step: key blocks first to last ("fwd", fwd.k_order = asc: the
     sink's block comes first) or last to first ("rev"), with P x 2^0 or
     2^8 before the cast (fwd.p_scale_exp): arXiv 2606.06521's comparison.
   Reference: exact-fp64 on the same BF16 inputs, forward and backward. */

#define LP_MAPS "std,outlier,sink,lsink,tile,qblock,kvmod,pcast"
#define LP_MAX_POINTS 96

typedef struct {
  size_t n_q, n_k, d, heads;
  int grads;
} lp_shape_t;

/* Per map: its full and quick points. */
static const char *const lp_points[][3] = {{"std", "0.25,0.5,0.8,1.5,2.5,5", "0.5,2.5"},
                                           {"outlier", "1,4,16,64", "1,64"},
                                           {"sink", "0,4,8,12,16", "0,12"},
                                           {"lsink", "0,4,8,12,16", "0,12"},
                                           {"tile", "64,128,192,256", "128,256"},
                                           {"qblock", "16,32,64,128", "32,128"},
                                           {"kvmod", "0,1,16,64,127", "0,1"},
                                           {"pcast", "0,4,8,10,12,16", "0,10"}};

static const char *const lp_default[] = {"fa4-fp8", "fa4-mxfp8", "fa3-fp8"};

/* The inputs and reference of one key length. */
typedef struct {
  size_t n_k;
  cli_inputs_t inp;
  aa_problem_t pb;
  double *bias, *sinks;
  aa_attn_result_t ref;
  int have;
} lp_fixture_t;

static void lp_fixture_free(lp_fixture_t *f) {
  if (f->have) aa_attn_result_free(&f->ref);
  cli_inputs_free(&f->inp);
  free(f->bias);
  free(f->sinks);
  memset(f, 0, sizeof *f);
}

/* The map's change to the drawn inputs and the problem (bias, sinks). */
static int lp_shape_inputs(lp_fixture_t *f, const char *map, double x, const lp_shape_t *sh) {
  aa_round_opts_t bf = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  if (strcmp(map, "outlier") == 0)
    for (size_t h = 0; h < sh->heads; h++)
      for (size_t t = 0; t < 4; t++) {
        double *row = f->inp.k.data + (h * f->n_k + f->n_k * (t + 1) / 5) * sh->d;
        for (size_t c = 0; c < sh->d; c++)
          row[c] = aa_round(row[c] * x, &bf, NULL);
      }
  if (strcmp(map, "sink") == 0 || strcmp(map, "pcast") == 0) {
    if ((f->bias = calloc(sh->n_q * f->n_k, sizeof *f->bias)) == NULL) return AA_ENOMEM;
    for (size_t i = 0; i < sh->n_q; i++)
      f->bias[i * f->n_k] = x;
    f->pb.bias = f->bias, f->pb.mask_hstride = 0;
  }
  if (strcmp(map, "lsink") == 0) {
    if ((f->sinks = malloc(sh->heads * sizeof *f->sinks)) == NULL) return AA_ENOMEM;
    for (size_t h = 0; h < sh->heads; h++)
      f->sinks[h] = x;
    f->pb.num_sinks = 1, f->pb.sinks = f->sinks;
  }
  return AA_OK;
}

static int lp_fixture(lp_fixture_t *f, const aa_cell_t *cell, const char *map, double x, size_t n_k,
                      const lp_shape_t *sh, const aa_recipe_t *exact, aa_error_t *err) {
  int rc;
  if (f->have && f->n_k == n_k) return AA_OK;
  lp_fixture_free(f);
  f->n_k = n_k;
  if ((rc = cli_inputs_draw_qk(&f->inp, aa_cell_seed(cell), 0, 1.0, sh->n_q, n_k, sh->d, sh->heads, sh->heads, 0,
                               AA_FMT_BF16, err)) != AA_OK)
    return rc;
  xp_fp8_calibrate(&f->inp.q, &f->inp.k, strcmp(map, "std") == 0 ? x : 1.0);
  aa_problem_init(&f->pb, sh->n_q, n_k, sh->d, sh->heads, sh->heads);
  if ((rc = lp_shape_inputs(f, map, x, sh)) != AA_OK) return rc;
  rc = aa_attn_run(&f->ref, &f->pb, exact, &f->inp.q, &f->inp.k, &f->inp.v, sh->grads ? &f->inp.dO : NULL, err);
  f->have = rc == AA_OK;
  return rc;
}

/* The pcast map's four ways: key-block order and the power of two on P before its cast. */
static const char *const lp_pcast[][3] = {
    {"fwd-0", "asc", "0"}, {"rev-0", "desc", "0"}, {"fwd-8", "asc", "8"}, {"rev-8", "desc", "8"}};

static int lp_pcast_recipe(aa_recipe_t *r, size_t way, aa_error_t *err) {
  static const char *const none[][2] = {
      {"fwd.qkv_fmt", "none"}, {"quant.q", "none"}, {"quant.k", "none"}, {"quant.v", "none"}};
  int rc = aa_recipe_set(r, "fwd.k_order", lp_pcast[way][1], err);
  if (rc == AA_OK) rc = aa_recipe_set(r, "fwd.p_scale_exp", lp_pcast[way][2], err);
  for (size_t i = 0; i < 4 && rc == AA_OK; i++)
    rc = aa_recipe_set(r, none[i][0], none[i][1], err);
  return rc;
}

/* The recipe of this point (way: the pcast map's variant), its row name and its key length; 0: the map does not
   apply to the recipe (no row), -1: a key was refused. */
static int lp_point_recipe(aa_recipe_t *r, char *name, size_t cap, size_t *n_k, const char *map, double x, size_t way,
                           size_t n_k0, aa_error_t *err) {
  char v[32];
  snprintf(v, sizeof v, "%.0f", x);
  snprintf(name, cap, "%s", r->name);
  *n_k = n_k0;
  if (strcmp(map, "pcast") == 0) {
    snprintf(name, cap, "%s/%s", r->name, lp_pcast[way][0]);
    return lp_pcast_recipe(r, way, err) == AA_OK ? 1 : -1;
  }
  if (strcmp(map, "lsink") == 0) { /* the emulation's default (open) and FA4's finalize (end) */
    snprintf(name, cap, "%s/%s", r->name, way ? "end" : "open");
    return aa_recipe_set(r, "fwd.sink_at", way ? "end" : "open", err) == AA_OK ? 1 : -1;
  }
  if (strcmp(map, "tile") == 0) return aa_recipe_set(r, "fwd.tile_k", v, err) == AA_OK ? 1 : -1;
  if (strcmp(map, "qblock") == 0) {
    if (r->quant_q == 0 && r->quant_k == 0 && r->quant_v == 0) return 0;
    return aa_recipe_set(r, "quant.block", v, err) == AA_OK ? 1 : -1;
  }
  if (strcmp(map, "kvmod") == 0) *n_k = 4 * (r->fwd_tile_k ? r->fwd_tile_k : 128) + (size_t)x;
  return 1;
}

static double lp_rel(const aa_tensor_t *a, const aa_tensor_t *b, double *mse) {
  double rel;
  xp_fp8_pearson(a, b, &rel);
  if (mse != NULL) {
    double e = 0;
    for (size_t i = 0; i < aa_tensor_numel(a); i++)
      e += (a->data[i] - b->data[i]) * (a->data[i] - b->data[i]);
    *mse = e / (double)aa_tensor_numel(a);
  }
  return rel;
}

static int lp_row(aa_sweep_rows_t *rows, const char *map, double x, const char *name, size_t n_k,
                  const aa_attn_result_t *res, const aa_attn_result_t *ref, int grads) {
  double mse;
  aa_sweep_row_new(rows);
  aa_sweep_set_str(rows, "map", map);
  aa_sweep_set_double(rows, "x", x);
  aa_sweep_set_str(rows, "recipe", name);
  aa_sweep_set_int(rows, "n_k", (int64_t)n_k);
  aa_sweep_set_double(rows, "rel_l2_o", lp_rel(&res->o, &ref->o, &mse));
  aa_sweep_set_double(rows, "mse_o", mse);
  aa_sweep_set_double(rows, "rel_l2_dq", grads ? lp_rel(&res->dq, &ref->dq, NULL) : NAN);
  aa_sweep_set_double(rows, "rel_l2_dk", grads ? lp_rel(&res->dk, &ref->dk, NULL) : NAN);
  aa_sweep_set_double(rows, "rel_l2_dv", grads ? lp_rel(&res->dv, &ref->dv, NULL) : NAN);
  aa_sweep_set_double(rows, "p_max", res->p_max);
  aa_sweep_set_int(rows, "p_cast", (int64_t)res->p_cast);
  aa_sweep_set_int(rows, "p_over", (int64_t)res->p_over);
  aa_sweep_set_int(rows, "p_under", (int64_t)res->p_under);
  aa_sweep_set_double(rows, "over_fraction", res->p_cast ? (double)res->p_over / (double)res->p_cast : 0);
  return aa_sweep_set_double(rows, "under_fraction", res->p_cast ? (double)res->p_under / (double)res->p_cast : 0);
}

static int lp_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *vctx) {
  xp_ctx_t *ctx = vctx;
  const lp_shape_t *sh = ctx->priv;
  aa_error_t *err = aa_sweep_rows_error(rows);
  const char *point = aa_cell_str(cell, "point", "std=1"), *eq = strchr(point, '=');
  char map[16];
  double x = eq != NULL ? atof(eq + 1) : 1;
  lp_fixture_t f;
  aa_recipe_t exact;
  int rc;
  snprintf(map, sizeof map, "%.*s", eq != NULL ? (int)(eq - point) : 0, point);
  memset(&f, 0, sizeof f);
  xp_cell_threads(ctx);
  if ((rc = aa_recipe_preset(&exact, "exact-fp64", err)) != AA_OK) return rc;
  size_t ways = strcmp(map, "pcast") == 0 ? sizeof lp_pcast / sizeof lp_pcast[0] : strcmp(map, "lsink") == 0 ? 2 : 1;
  for (size_t i = 0; i < ctx->nrecipes * ways && rc == AA_OK; i++) {
    aa_recipe_t r = ctx->recipe[i / ways];
    aa_attn_result_t res;
    char name[96];
    size_t n_k;
    int use = lp_point_recipe(&r, name, sizeof name, &n_k, map, x, i % ways, sh->n_k, err);
    if (use <= 0) {
      rc = use < 0 ? AA_EINVAL : AA_OK;
      continue;
    }
    if ((rc = lp_fixture(&f, cell, map, x, n_k, sh, &exact, err)) != AA_OK) break;
    if ((rc = aa_attn_run(&res, &f.pb, &r, &f.inp.q, &f.inp.k, &f.inp.v, sh->grads ? &f.inp.dO : NULL, err)) != AA_OK)
      break;
    rc = lp_row(rows, map, x, name, n_k, &res, &f.ref, sh->grads);
    aa_attn_result_free(&res);
  }
  lp_fixture_free(&f);
  return rc;
}

/* The "point" axis: every point of each map named by --maps, from --MAP or the map's defaults. */
static int lp_axis_points(aa_sweep_t *sw, const xp_opts_t *o, aa_error_t *err) {
  static char texts[LP_MAX_POINTS][40];
  const char *maps[8], *pts[LP_MAX_POINTS];
  char mbuf[128];
  size_t nm, np = 0;
  if (xp_opt_strs(maps, &nm, 8, mbuf, sizeof mbuf, o, "maps", LP_MAPS)) return AA_EINVAL;
  for (size_t m = 0; m < nm; m++) {
    size_t row = 0, nx;
    double xs[16];
    while (row < sizeof lp_points / sizeof lp_points[0] && strcmp(lp_points[row][0], maps[m]) != 0)
      row++;
    if (row == sizeof lp_points / sizeof lp_points[0]) {
      cli_error(o->cmd, "--maps: '%s' is not one of " LP_MAPS, maps[m]);
      return AA_EINVAL;
    }
    if (xp_opt_doubles(xs, &nx, 16, o, maps[m], lp_points[row][o->quick ? 2 : 1], 0, 1e6, 0)) return AA_EINVAL;
    for (size_t t = 0; t < nx && np < LP_MAX_POINTS; t++, np++) {
      snprintf(texts[np], sizeof texts[np], "%s=%g", maps[m], xs[t]);
      pts[np] = texts[np];
    }
  }
  return aa_sweep_axis_str(sw, "point", pts, np, AA_AXIS_NOSEED, err);
}

static int lp_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const char *const cols[] = {"map",    "x",         "recipe",    "n_k",           "rel_l2_o",
                                     "mse_o",  "rel_l2_dq", "rel_l2_dk", "rel_l2_dv",     "p_max",
                                     "p_cast", "p_over",    "p_under",   "over_fraction", "under_fraction"};
  lp_shape_t *sh = calloc(1, sizeof *sh);
  size_t seeds = 1;
  int rc;
  if (sh == NULL) return AA_ENOMEM;
  ctx->priv = sh;
  sh->n_q = 128, sh->n_k = 1024, sh->d = 128, sh->heads = 1, sh->grads = xp_opt(o, "no-grads") == NULL;
  if (xp_opt_size(&seeds, o, "seeds", 1, 1000) || xp_opt_size(&sh->heads, o, "heads", 1, 64) ||
      xp_opt_size(&sh->n_q, o, "n-q", 1, 1 << 16) || xp_opt_size(&sh->n_k, o, "n-k", 1, 1 << 20))
    return AA_EINVAL;
  if (xp_opt(o, "variants") != NULL)
    rc = xp_recipes_from_opts(ctx, o, err);
  else
    rc = xp_ctx_set_recipes(ctx, lp_default, sizeof lp_default / sizeof lp_default[0], err);
  if (rc != AA_OK || (rc = lp_axis_points(sw, o, err)) != AA_OK || (rc = xp_axis_seeds(sw, seeds, err)) ||
      (rc = xp_axis_fixed_int(sw, "n_q", (int64_t)sh->n_q, err)) ||
      (rc = xp_axis_fixed_int(sw, "heads", (int64_t)sh->heads, err)) ||
      (rc = xp_columns(sw, cols, sizeof cols / sizeof cols[0], err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

static const cli_opt_t lp_params[] = {
    {"quick", NULL, NULL, "two points per map (the report's and the test's grid)"},
    {"variants", "SPEC[,SPEC...]", "fa4-fp8,fa4-mxfp8,fa3-fp8", "recipes (presets, files or NAME:key=value,...)"},
    {"maps", "MAP[,MAP...]", LP_MAPS, "the maps to run"},
    {"std", "X[,X...]", "0.25,0.5,0.8,1.5,2.5,5", "logit stds"},
    {"outlier", "X[,X...]", "1,4,16,64", "factor on the norm of 4 keys"},
    {"sink", "X[,X...]", "0,4,8,12,16", "logit added to key 0 (a sink token)"},
    {"lsink", "X[,X...]", "0,4,8,12,16", "learned sink logit per head"},
    {"tile", "X[,X...]", "64,128,192,256", "fwd.tile_k"},
    {"qblock", "X[,X...]", "16,32,64,128", "quant.block (recipes with quant.q/k/v)"},
    {"kvmod", "X[,X...]", "0,1,16,64,127", "n_k = 4 fwd.tile_k + X"},
    {"pcast", "X[,X...]", "0,4,8,10,12,16", "sink token logit; P cast alone, forward/reverse blocks, P x 2^0 / 2^8"},
    {"n-q", "N", "128", "query rows"},
    {"n-k", "N", "1024", "key rows (not kvmod)"},
    {"heads", "H", "1", "heads"},
    {"seeds", "K", "1", "seeds 1..K"},
    {"no-grads", NULL, NULL, "forward only (no dq, dk, dv columns)"}};

const xp_experiment_t xp_lowpmap = {
    .name = "lowpmap",
    .summary =
        "FP8 attention maps: rel_l2, P saturation and P underflow over logit std, outliers, sinks, tile/block, "
        "KV length mod tile",
    .description = "Cells: point (MAP=X for each map of --maps: std, outlier, sink, lsink, tile, qblock, kvmod,\n"
                   "pcast) x seed; n_q 128 queries against n_k 1024 keys (kvmod: 4 tiles + X), d 128, 1 head;\n"
                   "inputs N(0,1) BF16 with q calibrated to the logit std (1 except on the std map), shared by\n"
                   "every point of a seed. Recipes fa4-fp8, fa4-mxfp8, fa3-fp8 (or --variants); the lsink map runs\n"
                   "each as NAME/open and NAME/end (fwd.sink_at), pcast as NAME/fwd-0, rev-0, fwd-8, rev-8. Columns: "
                   "rel_l2 of o, dq, dk, dv and the MSE of o\n"
                   "against exact-fp64 on the same BF16 inputs; p_max, p_cast, p_over (P x 2^offset above p_fmt's\n"
                   "max: saturated), p_under (positive P rounded to zero) and their fractions.",
    .params = lp_params,
    .nparams = sizeof lp_params / sizeof lp_params[0],
    .declare = lp_declare,
    .eval = lp_eval,
    .release = xp_free_priv,
};
