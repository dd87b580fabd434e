/* attnacc: the `dropout-map` experiment: where the backward mask redraw differs from the forward's, and its cost. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xp/xp.h"

static const cli_opt_t params[] = {
    {"variant", "NAME", "nki", "preset recipe whose backward is emulated"},
    {"settings", "LIST", "all", "comma-separated settings (see below)"},
    {"p", "LIST", "0.05,0.1,0.2,0.5", "dropout probabilities"},
    {"n", "LIST", "128,256,384,512,640,1024,4096", "sequence lengths (n_q = n_k)"},
    {"d", "D", "64", "head dimension"},
    {"heads", "H", "1", "heads"},
    {"seed", "S", "1", "seed of the inputs (as attnacc run) and of the masks"},
    XP_OPTS_ORACLE,
};

static const char description[] =
    "For every (setting, p, n): draw the inputs as `attnacc run` does (normal, sigma 1),\n"
    "draw the forward's dropout keep mask with the forward tiling and give it to the\n"
    "oracle, let the variant's emulated backward redraw the mask with its backward\n"
    "tiling, and write one row: the fraction of mask bits the redraw got wrong,\n"
    "the realised and exact keep rates, the E[O] bias implied by the rescale, the\n"
    "rel_l2 and max_abs of o, dq, dk, dv against the oracle, and the same gradient\n"
    "errors of a backward given the forward's mask (consistent_*), so the cost of the\n"
    "mismatch is the difference of the two. Settings:\n"
    "  twin            tile-seeded, NKI twin tiling: forward 128 x 512 chunks, backward\n"
    "                  512-wide K tiles when n >= 512 else 128 (mismatch when n < 512)\n"
    "  twin-bwd128     tile-seeded, a backward that always uses 128-wide K tiles\n"
    "  twin-aligned    tile-seeded, a backward that always uses 512-wide K tiles\n"
    "  position-keyed  Philox keyed by (seed, batch, head, row, column): never mismatches\n"
    "  u8-threshold    FA2's byte threshold: never mismatches, keep rate (t+1)/256 != 1-p\n"
    "Cells: n x p x setting, with variant, d, heads and seed as one-value coordinates;\n"
    "the inputs are those of attnacc run --seed S (the same for every cell of one n), and\n"
    "settings that share a forward mask share the oracle (through the cache). Columns:\n"
    "scheme, fwd_tile_k, bwd_tile_k, mismatch_fraction, keep_rate, keep_expected,\n"
    "o_bias_implied, rel_l2_o, rel_l2_dq, rel_l2_dk, rel_l2_dv, max_abs_dq, max_abs_dk,\n"
    "max_abs_dv, consistent_rel_l2_dq, consistent_rel_l2_dk, consistent_rel_l2_dv; timing\n"
    "seconds. Default folder: results/dropout-map (the older --out FILE CSV is now this\n"
    "folder's results.csv).";

static int setting_dropout(aa_dropout_t *d, const char *name) {
  aa_dropout_default(d);
  d->scheme = AA_DROPOUT_TILE_SEEDED;
  if (!strcmp(name, "twin")) return 1;
  if (!strcmp(name, "twin-bwd128")) {
    d->bwd_tile_k = d->bwd_tile_k_short = 128;
    return 1;
  }
  if (!strcmp(name, "twin-aligned")) {
    d->bwd_tile_k = d->bwd_tile_k_short = 512;
    return 1;
  }
  if (!strcmp(name, "position-keyed")) {
    d->scheme = AA_DROPOUT_POSITION_KEYED;
    return 1;
  }
  if (!strcmp(name, "u8-threshold")) {
    d->scheme = AA_DROPOUT_U8_THRESHOLD;
    return 1;
  }
  return 0;
}

typedef struct {
  aa_recipe_t base;
  size_t d, heads;
  uint64_t seed;
} dm_t;

/* The cell's row: the masks' statistics, the variant's errors and those of the consistent run. */
static int dm_row(aa_sweep_rows_t *rows, const aa_dropout_t *dd, const uint8_t *fwd, const uint8_t *bwd, size_t total,
                  size_t ftk, size_t btk, const cli_variant_t *v, const double *cons, double t0) {
  static const char *const ro[] = {"rel_l2_o", "rel_l2_dq", "rel_l2_dk", "rel_l2_dv"};
  static const char *const ma[] = {"max_abs_dq", "max_abs_dk", "max_abs_dv"};
  static const char *const co[] = {"consistent_rel_l2_dq", "consistent_rel_l2_dk", "consistent_rel_l2_dv"};
  aa_sweep_row_new(rows);
  aa_sweep_set_str(rows, "scheme", aa_dropout_scheme_name(dd->scheme));
  aa_sweep_set_int(rows, "fwd_tile_k", (int64_t)ftk);
  aa_sweep_set_int(rows, "bwd_tile_k", (int64_t)btk);
  aa_sweep_set_double(rows, "mismatch_fraction", aa_dropout_mismatch(fwd, bwd, total));
  aa_sweep_set_double(rows, "keep_rate", aa_dropout_keep_rate(fwd, total));
  aa_sweep_set_double(rows, "keep_expected", aa_dropout_expected_keep(dd));
  aa_sweep_set_double(rows, "o_bias_implied", aa_dropout_implied_bias(dd));
  for (int j = 0; j < 4; j++)
    aa_sweep_set_double(rows, ro[j], v->out[j].m.rel_l2);
  for (int j = 0; j < 3; j++)
    aa_sweep_set_double(rows, ma[j], v->out[j + 1].m.max_abs);
  for (int j = 0; j < 3; j++)
    aa_sweep_set_double(rows, co[j], cons[j]);
  return aa_sweep_set_double(rows, "seconds", cli_now() - t0);
}

static int dm_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *vctx) {
  xp_ctx_t *ctx = vctx;
  const dm_t *cx = ctx->priv;
  aa_error_t *err = aa_sweep_rows_error(rows);
  size_t n = (size_t)aa_cell_int(cell, "n", 1), heads = cx->heads, total = heads * n * n, ftq, ftk, btq, btk, mis;
  const char *setting = aa_cell_str(cell, "setting", "twin");
  uint8_t *fwd = malloc(total), *bwd = malloc(total);
  cli_inputs_t inp = {0};
  aa_dropout_t dd;
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t orc;
  aa_recipe_t r = cx->base, rcons = cx->base;
  cli_variant_t v, vc;
  aa_attn_result_t res;
  double t0 = cli_now(), ks = 1, cons[3];
  int rc, have_orc = 0;
  memset(&orc, 0, sizeof orc);
  memset(&v, 0, sizeof v);
  memset(&vc, 0, sizeof vc);
  xp_cell_threads(ctx);
  if (fwd == NULL || bwd == NULL) {
    rc = aa_error_set(err, AA_ENOMEM, "out of memory");
    goto out;
  }
  if ((rc = cli_inputs_draw(&inp, cx->seed, 0, 1.0, n, cx->d, heads, heads, 0, cx->base.io_fmt, err)) != AA_OK)
    goto out;
  setting_dropout(&dd, setting);
  dd.p = aa_cell_double(cell, "p", 0);
  dd.seed = cx->seed;
  if ((rc = aa_dropout_mask_fwd(fwd, &ks, &dd, heads, n, n, err)) != AA_OK ||
      (rc = aa_dropout_mask_bwd(bwd, NULL, &dd, heads, n, n, err)) != AA_OK)
    goto out;
  aa_dropout_fwd_tiles(&ftq, &ftk, &dd, n, n);
  aa_dropout_bwd_tiles(&btq, &btk, &dd, n, n);
  aa_problem_init(&pb, n, n, cx->d, heads, heads);
  pb.keep = fwd;
  pb.keep_scale = ks;
  /* The oracle depends on the inputs and the forward's mask only: the
     settings that share a forward tiling share it through the cache. */
  xp_oracle_opts(&oo, ctx);
  if ((rc = xp_oracle(&orc, NULL, ctx, &pb, &inp.q, &inp.k, &inp.v, &inp.dO, &oo, err)) != AA_OK) goto out;
  have_orc = 1;
  /* The variant redraws with its backward tiling (recipe dropout); the
     consistent run reuses the forward's mask (recipe dropout none:
     problem.keep in both passes). Identical masks give identical runs, so
     the consistent run is only done after a mismatch. */
  r.dropout = dd;
  mis = aa_dropout_mismatch_count(fwd, bwd, total);
  if ((rc = cli_run_variant(&v, &res, &r, &pb, &inp, &orc, err)) != AA_OK) goto out;
  aa_attn_result_free(&res);
  for (int j = 0; j < 3; j++)
    cons[j] = v.out[j + 1].m.rel_l2;
  if (mis > 0) {
    aa_dropout_default(&rcons.dropout);
    if ((rc = cli_run_variant(&vc, &res, &rcons, &pb, &inp, &orc, err)) != AA_OK) goto out;
    aa_attn_result_free(&res);
    for (int j = 0; j < 3; j++)
      cons[j] = vc.out[j + 1].m.rel_l2;
  }
  rc = dm_row(rows, &dd, fwd, bwd, total, ftk, btk, &v, cons, t0);
out:
  cli_variant_free(&v);
  cli_variant_free(&vc);
  if (have_orc) aa_oracle_result_free(&orc);
  cli_inputs_free(&inp);
  free(fwd);
  free(bwd);
  return rc;
}

static int dm_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const char *const cols[] = {"scheme",
                                     "fwd_tile_k",
                                     "bwd_tile_k",
                                     "mismatch_fraction",
                                     "keep_rate",
                                     "keep_expected",
                                     "o_bias_implied",
                                     "rel_l2_o",
                                     "rel_l2_dq",
                                     "rel_l2_dk",
                                     "rel_l2_dv",
                                     "max_abs_dq",
                                     "max_abs_dk",
                                     "max_abs_dv",
                                     "consistent_rel_l2_dq",
                                     "consistent_rel_l2_dk",
                                     "consistent_rel_l2_dv",
                                     "seconds@"};
  const char *sets[16], *variant = xp_opt(o, "variant") ? xp_opt(o, "variant") : "nki";
  char setbuf[256];
  int64_t nv[16];
  double pv[16];
  size_t nset, np, nn;
  int rc;
  dm_t *cx = calloc(1, sizeof *cx);
  if ((ctx->priv = cx) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  cx->d = 64;
  cx->heads = 1;
  cx->seed = 1;
  if (aa_recipe_preset(&cx->base, variant, NULL) != AA_OK)
    return aa_error_set(err, AA_ENOTFOUND, "unknown variant '%s' (attnacc list shows the presets)", variant);
  if (xp_opt_strs(sets, &nset, 16, setbuf, sizeof setbuf, o, "settings",
                  "twin,twin-bwd128,twin-aligned,position-keyed,u8-threshold") ||
      xp_opt_doubles(pv, &np, 16, o, "p", "0.05,0.1,0.2,0.5", 0, 1, 0) ||
      xp_opt_ints(nv, &nn, 16, o, "n", "128,256,384,512,640,1024,4096", 1, 1 << 20) ||
      xp_opt_size(&cx->d, o, "d", 1, 4096) || xp_opt_size(&cx->heads, o, "heads", 1, 1024) ||
      xp_opt_u64(&cx->seed, o, "seed"))
    return AA_EINVAL;
  for (size_t i = 0; i < nset; i++) {
    aa_dropout_t t;
    if (!setting_dropout(&t, sets[i]))
      return aa_error_set(err, AA_EINVAL,
                          "--settings: unknown setting '%s' (twin, twin-bwd128, twin-aligned, position-keyed, "
                          "u8-threshold)",
                          sets[i]);
  }
  for (size_t i = 0; i < np; i++)
    if (pv[i] >= 1) return aa_error_set(err, AA_EINVAL, "--p: %g is not below 1", pv[i]);
  if ((rc = xp_ctx_add_recipe(ctx, &cx->base, err)) != AA_OK) return rc;
  /* n slowest, then p, then the setting: the order of the older CSV */
  if ((rc = aa_sweep_axis_int(sw, "n", nv, nn, 0, err)) || (rc = aa_sweep_axis_double(sw, "p", pv, np, 0, err)) ||
      (rc = aa_sweep_axis_str(sw, "setting", sets, nset, 0, err)) ||
      (rc = xp_axis_fixed_str(sw, "variant", cx->base.name, err)) ||
      (rc = xp_axis_fixed_int(sw, "d", (int64_t)cx->d, err)) ||
      (rc = xp_axis_fixed_int(sw, "heads", (int64_t)cx->heads, err)) ||
      (rc = xp_axis_fixed_int(sw, "seed", (int64_t)cx->seed, err)) ||
      (rc = xp_columns(sw, cols, sizeof cols / sizeof cols[0], err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

/* A short table on stdout: where the redraw mismatches and what it costs. */
static int dm_finish(const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  aa_results_t c;
  int rc;
  (void)ctx;
  if ((rc = aa_sweep_results_open(&c, o->out_dir, err)) != AA_OK) return rc;
  int cs = aa_results_col(&c, "setting"), cp = aa_results_col(&c, "p"), cn = aa_results_col(&c, "n"),
      cm = aa_results_col(&c, "mismatch_fraction"), cq = aa_results_col(&c, "rel_l2_dq"),
      cc = aa_results_col(&c, "consistent_rel_l2_dq");
  printf("%-16s %-6s %-6s %-12s %-12s %-12s\n", "setting", "p", "n", "mismatch", "rel_l2 dq", "consistent");
  for (size_t r = 0; r < c.nrows; r++)
    printf("%-16s %-6s %-6s %-12.4g %-12.4g %-12.4g\n", aa_results_cell(&c, r, cs), aa_results_cell(&c, r, cp),
           aa_results_cell(&c, r, cn), aa_results_num(aa_results_cell(&c, r, cm)),
           aa_results_num(aa_results_cell(&c, r, cq)), aa_results_num(aa_results_cell(&c, r, cc)));
  printf("attnacc %s (git %s)\n", AA_VERSION, AA_GIT_HASH);
  aa_results_free(&c);
  return AA_OK;
}

const xp_experiment_t xp_dropout_map = {
    .name = "dropout-map",
    .summary = "dropout mask redraw mismatch and gradient error over p, n and tiling",
    .description = description,
    .inputs = "the draws of attnacc run --seed S (normal, sigma 1); masks seeded with S",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .declare = dm_declare,
    .eval = dm_eval,
    .finish = dm_finish,
    .release = xp_free_priv,
};
