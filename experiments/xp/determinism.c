/* attnacc: the `determinism` experiment: one problem run with R dQ order seeds, and the run-to-run spread. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xp/xp.h"

static const cli_opt_t params[] = {
    {"variant", "NAME", NULL, "preset recipe (attnacc list shows them)"},
    {"recipe", "FILE", NULL, "a recipe file instead of --variant"},
    {"set", "KEY=VALUE[,KEY=VALUE...]", NULL, "recipe keys changed after the preset (e.g. dq_reduce=fp32-atomic)"},
    {"runs", "R", "8", "number of runs (order seeds base .. base + R - 1)"},
    {"order-seed-base", "S", "1", "order seed of the first run (dq_reduce_order_seed)"},
    CLI_OPTS_PROBLEM_SHAPE,
    CLI_OPTS_PROBLEM_DRAW,
    CLI_OPT_CAUSAL,
    XP_OPTS_ORACLE,
    {"json", NULL, NULL, "print the verdict as one JSON object (the sweep's own lines then go to stderr)"},
};

static const char description[] =
    "Run the same problem (inputs, recipe) R times; run r sets dq_reduce_order_seed =\n"
    "base + r, which only the fp32-atomic dQ reduction reads. Cells: order_seed (one per\n"
    "run) with the problem's settings as one-value coordinates (variant, recipe_hash, n, d,\n"
    "heads, kv_heads, mask, dist, sigma, seed). The inputs are those of attnacc run --seed S\n"
    "(the same for every run), and the oracle runs once (through the cache). Columns per\n"
    "run: dq_hash (FNV-1a 128 of the stored dQ values: equal hashes, equal bits), dq_reduce,\n"
    "rel_l2, max_ulp, mean_ulp (dQ against the oracle, ULPs of dQ's format, bf16 for the\n"
    "presets), diff_elements, diff_max_ulp, diff_mean_ulp (against the dQ of the first run,\n"
    "order seed base, which each process computes once) and diff_rel_l2 (|dq - dq_first| /\n"
    "|dq_oracle|), tiles, budget_failures, fp64_recomputes; timings seconds_oracle,\n"
    "seconds_emul.\n"
    "After the sweep the verdict is printed from results.csv (--json: one JSON object):\n"
    "distinct dQ bit patterns (distinct dq_hash), the elements that differ from the first\n"
    "run (largest count over runs), the spread: rel_l2 of the largest run difference and the\n"
    "mean ULP distance from the first run (largest over runs; the per-element range\n"
    "max_r - min_r lies between it and twice it), the error against the oracle (rel_l2 and\n"
    "mean ULP averaged over runs), the ratios spread / error, each with the max ULP last (it\n"
    "is set by elements near zero, where a sign flip counts thousands of ULPs: README\n"
    "\"Metrics\"), and the fixed-point budget failures and FP64 recomputes per run. Default\n"
    "folder: results/determinism.";

typedef struct {
  aa_recipe_t rec;
  size_t n, d, heads, kv_heads, runs;
  uint64_t seed, base;
  double sigma;
  int uniform, causal, json;
  /* dQ of the first run (order seed base), computed once per process */
  pthread_mutex_t lock;
  double *ref;
  int ref_rc;
} det_t;

/* Apply "k=v,k=v" to r. */
static int apply_sets(aa_recipe_t *r, const char *s, aa_error_t *err) {
  char buf[1024];
  if (strlen(s) >= sizeof buf) return aa_error_set(err, AA_EINVAL, "--set: too long");
  strcpy(buf, s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    aa_error_t e = {{0}};
    if (eq == NULL) return aa_error_set(err, AA_EINVAL, "--set: '%s' is not KEY=VALUE", tok);
    *eq = '\0';
    if (aa_recipe_set(r, tok, eq + 1, &e) != AA_OK) return aa_error_set(err, AA_EINVAL, "--set: %s", e.msg);
  }
  return AA_OK;
}

static aa_fmt_t ulp_fmt_of(aa_fmt_t f) {
  return f == AA_FMT_BF16 || f == AA_FMT_FP16 ? f : AA_FMT_FP32;
}

static void problem(aa_problem_t *pb, const det_t *cx) {
  aa_problem_init(pb, cx->n, cx->n, cx->d, cx->heads, cx->kv_heads);
  pb->causal = cx->causal;
}

/* The first run's dQ: computed by the first cell that asks, under the lock. */
static const double *first_run(det_t *cx, const aa_problem_t *pb, const cli_inputs_t *in, aa_error_t *err) {
  pthread_mutex_lock(&cx->lock);
  if (cx->ref == NULL && cx->ref_rc == AA_OK) {
    aa_recipe_t r = cx->rec;
    aa_attn_result_t res;
    r.bwd_dq_reduce.order_seed = cx->base;
    cx->ref_rc = aa_attn_run(&res, pb, &r, &in->q, &in->k, &in->v, &in->dO, err);
    if (cx->ref_rc == AA_OK) {
      size_t n = aa_tensor_numel(&res.dq);
      if ((cx->ref = malloc(n * sizeof *cx->ref)) == NULL)
        cx->ref_rc = aa_error_set(err, AA_ENOMEM, "out of memory");
      else
        memcpy(cx->ref, res.dq.data, n * sizeof *cx->ref);
      aa_attn_result_free(&res);
    }
  } else if (cx->ref == NULL) {
    aa_error_set(err, cx->ref_rc, "the first run failed");
  }
  pthread_mutex_unlock(&cx->lock);
  return cx->ref;
}

static int det_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *vctx) {
  xp_ctx_t *ctx = vctx;
  det_t *cx = ctx->priv;
  aa_error_t *err = aa_sweep_rows_error(rows);
  cli_inputs_t in = {0};
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  aa_recipe_t rr = cx->rec;
  cli_variant_t v;
  aa_attn_result_t res;
  const double *ref;
  double t0, t_or, ref2 = 0, d2 = 0, sum_ulp = 0, max_ulp = 0;
  size_t numel, differ = 0;
  int rc, have_oracle = 0, have_res = 0;
  char hex[33];
  aa_hash128_t h;

  memset(&oracle, 0, sizeof oracle);
  memset(&v, 0, sizeof v);
  xp_cell_threads(ctx);
  rr.bwd_dq_reduce.order_seed = (uint64_t)aa_cell_int(cell, "order_seed", 1);
  if ((rc = cli_inputs_draw(&in, cx->seed, cx->uniform, cx->sigma, cx->n, cx->d, cx->heads, cx->kv_heads, 0,
                            cx->rec.io_fmt, err)) != AA_OK)
    goto out;
  problem(&pb, cx);
  xp_oracle_opts(&oo, ctx);
  t0 = cli_now();
  if ((rc = xp_oracle(&oracle, NULL, ctx, &pb, &in.q, &in.k, &in.v, &in.dO, &oo, err)) != AA_OK) goto out;
  t_or = cli_now() - t0;
  have_oracle = 1;
  if ((rc = cli_run_variant(&v, &res, &rr, &pb, &in, &oracle, err)) != AA_OK) goto out;
  have_res = 1;
  if ((ref = first_run(cx, &pb, &in, err)) == NULL) {
    rc = cx->ref_rc;
    goto out;
  }
  numel = aa_tensor_numel(&res.dq);
  {
    aa_fmt_t uf = ulp_fmt_of(res.dq.fmt);
    const double *q = res.dq.data;
    for (size_t i = 0; i < numel; i++) {
      double sp = fabs(aa_metrics_ordinal(q[i], uf) - aa_metrics_ordinal(ref[i], uf)), dd = q[i] - ref[i];
      if (!(sp == sp)) sp = 0; /* NaN elements: left out */
      if (sp > 0) differ++;
      if (sp > max_ulp) max_ulp = sp;
      sum_ulp += sp;
      if (dd == dd) d2 += dd * dd;
      ref2 += oracle.dq.val.data[i] * oracle.dq.val.data[i];
    }
    aa_hash128_init(&h);
    aa_hash128_update(&h, q, numel * sizeof *q);
    aa_hash128_hex(hex, &h);
  }
  aa_sweep_row_new(rows);
  aa_sweep_set_str(rows, "dq_hash", hex);
  aa_sweep_set_str(rows, "dq_reduce", aa_reduce_kind_name(rr.bwd_dq_reduce.kind));
  aa_sweep_set_double(rows, "rel_l2", v.out[1].m.rel_l2);
  aa_sweep_set_double(rows, "max_ulp", v.out[1].m.max_ulp);
  aa_sweep_set_double(rows, "mean_ulp", v.out[1].m.mean_ulp);
  aa_sweep_set_int(rows, "diff_elements", (int64_t)differ);
  aa_sweep_set_double(rows, "diff_max_ulp", max_ulp);
  aa_sweep_set_double(rows, "diff_mean_ulp", numel ? sum_ulp / (double)numel : 0);
  aa_sweep_set_double(rows, "diff_rel_l2", ref2 > 0 ? sqrt(d2 / ref2) : 0);
  aa_sweep_set_int(rows, "tiles", (int64_t)res.dq_reduce.tiles);
  aa_sweep_set_int(rows, "budget_failures", (int64_t)res.dq_reduce.budget_failures);
  aa_sweep_set_int(rows, "fp64_recomputes", (int64_t)res.dq_reduce.fp64_recomputes);
  aa_sweep_set_double(rows, "seconds_oracle", t_or);
  rc = aa_sweep_set_double(rows, "seconds_emul", v.seconds);
out:
  if (have_res) aa_attn_result_free(&res);
  cli_variant_free(&v);
  if (have_oracle) aa_oracle_result_free(&oracle);
  cli_inputs_free(&in);
  return rc;
}

static int det_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const char *const cols[] = {"dq_hash",         "dq_reduce",     "rel_l2",          "max_ulp",
                                     "mean_ulp",        "diff_elements", "diff_max_ulp",    "diff_mean_ulp",
                                     "diff_rel_l2",     "tiles",         "budget_failures", "fp64_recomputes",
                                     "seconds_oracle@", "seconds_emul@"};
  const char *s;
  int64_t *seeds;
  aa_problem_t pb;
  int rc;
  det_t *cx = calloc(1, sizeof *cx);
  if ((ctx->priv = cx) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  pthread_mutex_init(&cx->lock, NULL);
  cx->runs = 8;
  cx->base = 1;
  if ((s = xp_opt(o, "variant")) != NULL) {
    if (aa_recipe_preset(&cx->rec, s, NULL) != AA_OK)
      return aa_error_set(err, AA_ENOTFOUND, "unknown variant '%s' (attnacc list shows the presets)", s);
  } else if ((s = xp_opt(o, "recipe")) != NULL) {
    if ((rc = aa_recipe_parse_file(&cx->rec, s, err)) != AA_OK) return rc;
    if (cx->rec.name[0] == '\0') snprintf(cx->rec.name, sizeof cx->rec.name, "recipe");
  } else {
    return aa_error_set(err, AA_EINVAL, "give --variant NAME or --recipe FILE");
  }
  if ((s = xp_opt(o, "set")) != NULL && (rc = apply_sets(&cx->rec, s, err)) != AA_OK) return rc;
  if ((rc = aa_recipe_check(&cx->rec, err)) != AA_OK) return rc;
  cli_problem_opts_t po;
  cli_problem_opts_init(&po);
  if (xp_opt_size(&cx->runs, o, "runs", 1, 1000) || xp_opt_u64(&cx->base, o, "order-seed-base") ||
      cli_problem_opts_parse(&po, o->args, o->cmd, 1 << 20, 4096))
    return AA_EINVAL;
  cx->n = po.n, cx->d = po.d, cx->heads = po.heads, cx->kv_heads = po.kv_heads ? po.kv_heads : po.heads;
  cx->seed = po.seed, cx->uniform = po.dist, cx->sigma = po.sigma, cx->causal = po.causal;
  if (cx->heads % cx->kv_heads != 0)
    return aa_error_set(err, AA_EINVAL, "--kv-heads %zu does not divide --heads %zu", cx->kv_heads, cx->heads);
  cx->json = xp_opt(o, "json") != NULL;
  ctx->stdout_owned = cx->json;
  problem(&pb, cx);
  if ((rc = aa_problem_check(&pb, err)) != AA_OK || (rc = xp_ctx_add_recipe(ctx, &cx->rec, err)) != AA_OK) return rc;
  if ((seeds = malloc(cx->runs * sizeof *seeds)) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  for (size_t r = 0; r < cx->runs; r++)
    seeds[r] = (int64_t)(cx->base + r);
  rc = aa_sweep_axis_int(sw, "order_seed", seeds, cx->runs, 0, err);
  free(seeds);
  if (rc || (rc = xp_axis_fixed_str(sw, "variant", cx->rec.name, err)) ||
      (rc = xp_axis_fixed_str(sw, "recipe_hash", ctx->recipe_hash[0], err)) ||
      (rc = xp_axis_fixed_int(sw, "n", (int64_t)cx->n, err)) ||
      (rc = xp_axis_fixed_int(sw, "d", (int64_t)cx->d, err)) ||
      (rc = xp_axis_fixed_int(sw, "heads", (int64_t)cx->heads, err)) ||
      (rc = xp_axis_fixed_int(sw, "kv_heads", (int64_t)cx->kv_heads, err)) ||
      (rc = xp_axis_fixed_str(sw, "mask", cx->causal ? "causal" : "dense", err)) ||
      (rc = xp_axis_fixed_str(sw, "dist", cli_dist_name(cx->uniform), err)) ||
      (rc = xp_axis_fixed_double(sw, "sigma", cx->sigma, err)) ||
      (rc = xp_axis_fixed_int(sw, "seed", (int64_t)cx->seed, err)) ||
      (rc = xp_columns(sw, cols, sizeof cols / sizeof cols[0], err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

/* What det_finish reports, summed or maximised over the runs of results.csv. */
typedef struct {
  size_t runs, npat, differ, numel;
  double max_spread, mean_spread, spread_l2, max_err, mean_err, l2_err, fails, rec, tiles, t_or, t_em;
  const char *kind, *uf;
} det_summary_t;

static int det_summarise(det_summary_t *S, const det_t *cx, const char *path, aa_error_t *err) {
  aa_results_t c;
  double sum_mean = 0, sum_l2 = 0;
  memset(S, 0, sizeof *S);
  S->numel = cx->heads * cx->n * cx->d;
  S->kind = aa_reduce_kind_name(cx->rec.bwd_dq_reduce.kind);
  S->uf = cli_fmt_name(ulp_fmt_of(cx->rec.io_fmt));
  int rc = aa_results_read(&c, path, err);
  if (rc != AA_OK) return rc;
  if (c.nrows == 0) {
    aa_results_free(&c);
    return aa_error_set(err, AA_EIO, "%s: no rows", path);
  }
  int ch = aa_results_col(&c, "dq_hash");
  S->runs = c.nrows;
  for (size_t r = 0; r < S->runs; r++) {
    size_t k = 0;
    while (k < r && strcmp(aa_results_cell(&c, k, ch), aa_results_cell(&c, r, ch)) != 0)
      k++;
    if (k == r) S->npat++;
#define NUM(name) aa_results_value(&c, r, name)
    if ((size_t)NUM("diff_elements") > S->differ) S->differ = (size_t)NUM("diff_elements");
    S->max_spread = fmax(S->max_spread, NUM("diff_max_ulp"));
    S->mean_spread = fmax(S->mean_spread, NUM("diff_mean_ulp"));
    S->spread_l2 = fmax(S->spread_l2, NUM("diff_rel_l2"));
    S->max_err = fmax(S->max_err, NUM("max_ulp"));
    sum_mean += NUM("mean_ulp");
    sum_l2 += NUM("rel_l2");
    S->fails += NUM("budget_failures");
    S->rec += NUM("fp64_recomputes");
    S->tiles += NUM("tiles");
    S->t_or = fmax(S->t_or, NUM("seconds_oracle"));
    S->t_em += NUM("seconds_emul");
#undef NUM
  }
  aa_results_free(&c);
  S->mean_err = sum_mean / (double)S->runs;
  S->l2_err = sum_l2 / (double)S->runs;
  return AA_OK;
}

static double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

static int det_print_json(const det_summary_t *S, const det_t *cx, const char *path, aa_error_t *err) {
  json_t *j = json_object(), *p = json_object();
  const double runs = (double)S->runs;
  int bad = aa_json_set(j, "command", json_string("determinism"));
  bad |= aa_json_set(j, "attnacc_version", aa_json_str(AA_VERSION));
  bad |= aa_json_set(j, "git_hash", aa_json_str(AA_GIT_HASH));
  bad |= aa_json_set(j, "results", aa_json_str(path));
  bad |= aa_json_set(j, "variant", aa_json_str(cx->rec.name));
  bad |= aa_json_set(j, "dq_reduce", aa_json_str(S->kind));
  bad |= aa_json_set(j, "seed", aa_json_u64(cx->seed));
  bad |= aa_json_set(p, "n", aa_json_u64(cx->n));
  bad |= aa_json_set(p, "d", aa_json_u64(cx->d));
  bad |= aa_json_set(p, "heads", aa_json_u64(cx->heads));
  bad |= aa_json_set(p, "kv_heads", aa_json_u64(cx->kv_heads));
  bad |= aa_json_set(p, "causal", aa_json_bool(cx->causal));
  bad |= aa_json_set(p, "dist", json_string(cli_dist_name(cx->uniform)));
  bad |= aa_json_set(p, "sigma", aa_json_num(cx->sigma));
  bad |= aa_json_set(j, "problem", p);
  bad |= aa_json_set(j, "runs", aa_json_u64(S->runs));
  bad |= aa_json_set(j, "order_seed_base", aa_json_u64(cx->base));
  bad |= aa_json_set(j, "distinct_patterns", aa_json_u64(S->npat));
  bad |= aa_json_set(j, "elements", aa_json_u64(S->numel));
  bad |= aa_json_set(j, "elements_differing", aa_json_u64(S->differ));
  bad |= aa_json_set(j, "ulp_fmt", json_string(S->uf));
  bad |= aa_json_set(j, "spread_max_ulp", aa_json_num(S->max_spread));
  bad |= aa_json_set(j, "spread_mean_ulp", aa_json_num(S->mean_spread));
  bad |= aa_json_set(j, "spread_rel_l2", aa_json_num(S->spread_l2));
  bad |= aa_json_set(j, "error_max_ulp", aa_json_num(S->max_err));
  bad |= aa_json_set(j, "error_mean_ulp", aa_json_num(S->mean_err));
  bad |= aa_json_set(j, "error_rel_l2", aa_json_num(S->l2_err));
  bad |= aa_json_set(j, "spread_over_error_max", aa_json_num(ratio(S->max_spread, S->max_err)));
  bad |= aa_json_set(j, "spread_over_error_mean", aa_json_num(ratio(S->mean_spread, S->mean_err)));
  bad |= aa_json_set(j, "spread_over_error_l2", aa_json_num(ratio(S->spread_l2, S->l2_err)));
  bad |= aa_json_set(j, "dq_tiles_per_run", aa_json_u64((uint64_t)(S->tiles / runs)));
  bad |= aa_json_set(j, "dq_budget_failures_per_run", aa_json_num(S->fails / runs));
  bad |= aa_json_set(j, "dq_fp64_recomputes_per_run", aa_json_num(S->rec / runs));
  bad |= aa_json_set(j, "seconds_oracle", aa_json_num(S->t_or));
  bad |= aa_json_set(j, "seconds_per_run", aa_json_num(S->t_em / runs));
  char *text = bad ? NULL : aa_json_text(j, 0, NULL);
  json_decref(j);
  if (text == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  fputs(text, stdout);
  free(text);
  return AA_OK;
}

static void det_print_text(const det_summary_t *S, const det_t *cx) {
  const double runs = (double)S->runs;
  printf("determinism: variant %s, dq_reduce %s; n %zu, d %zu, heads %zu, kv_heads %zu, %s, %s sigma %g, seed %llu\n",
         cx->rec.name, S->kind, cx->n, cx->d, cx->heads, cx->kv_heads, cx->causal ? "causal" : "dense",
         cli_dist_name(cx->uniform), cx->sigma, (unsigned long long)cx->seed);
  printf("runs: %zu (order seeds %llu..%llu)\n", S->runs, (unsigned long long)cx->base,
         (unsigned long long)(cx->base + S->runs - 1));
  printf("distinct dQ bit patterns: %zu%s\n", S->npat, S->npat == 1 ? " (bitwise identical runs)" : "");
  printf("elements differing from the first run: %zu of %zu (largest over runs)\n", S->differ, S->numel);
  /* rel_l2 and the mean ULP lead; the max ULP is that of elements near zero (a sign flip there is thousands of
     ULPs in a correct kernel: README "Metrics"), so it comes last, named as such */
  printf("spread (distance from the first run): rel_l2 of the largest run difference %.3e, mean %.4g ulp of %s "
         "(max %.4g ulp; elements near zero dominate a max)\n",
         S->spread_l2, S->mean_spread, S->uf, S->max_spread);
  printf("error vs oracle (over runs): rel_l2 %.3e, mean %.4g ulp of %s (max %.4g ulp; elements near zero dominate a "
         "max)\n",
         S->l2_err, S->mean_err, S->uf, S->max_err);
  printf("spread / error: l2 %.3g, mean %.3g (max %.3g)\n", ratio(S->spread_l2, S->l2_err),
         ratio(S->mean_spread, S->mean_err), ratio(S->max_spread, S->max_err));
  printf("dq tiles per run %.0f; budget failures per run %.4g; FP64 recomputes per run %.4g\n", S->tiles / runs,
         S->fails / runs, S->rec / runs);
  printf("seconds: oracle %.3f, emulation %.3f per run\n", S->t_or, S->t_em / runs);
  printf("attnacc %s (git %s)\n", AA_VERSION, AA_GIT_HASH);
}

/* The verdict over the runs, from results.csv. */
static int det_finish(const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  const det_t *cx = ctx->priv;
  det_summary_t S;
  char path[4096];
  int rc;
  snprintf(path, sizeof path, "%s/" AA_SWEEP_RESULTS_CSV, o->out_dir);
  if ((rc = det_summarise(&S, cx, path, err)) != AA_OK) return rc;
  if (cx->json) return det_print_json(&S, cx, path, err);
  det_print_text(&S, cx);
  return AA_OK;
}

static void det_release(xp_ctx_t *ctx) {
  det_t *cx = ctx->priv;
  if (cx != NULL) {
    pthread_mutex_destroy(&cx->lock);
    free(cx->ref);
  }
  free(cx);
  ctx->priv = NULL;
}

const xp_experiment_t xp_determinism = {
    .name = "determinism",
    .summary =
        "run one cell R times with different dQ order seeds: distinct bit patterns, the spread (rel_l2, mean ULP)",
    .description = description,
    .inputs = "the draws of attnacc run --seed S (the seed coordinate), the same for every run",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .declare = det_declare,
    .eval = det_eval,
    .finish = det_finish,
    .release = det_release,
};
