/* attnacc: the `determinism` command: run one cell R times with different dQ order seeds and measure the run-to-run
 * spread. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const cli_opt_t opts[] = {
    {"variant", "NAME", NULL, "preset recipe (attnacc list shows them)"},
    {"recipe", "FILE", NULL, "a recipe file instead of --variant"},
    {"set", "KEY=VALUE[,KEY=VALUE...]", NULL, "recipe keys changed after the preset (e.g. dq_reduce=fp32-atomic)"},
    {"runs", "R", "8", "number of runs (order seeds base .. base + R - 1)"},
    {"order-seed-base", "S", "1", "order seed of the first run (dq_reduce_order_seed)"},
    {"n", "N", "1024", "sequence length (queries and keys)"},
    {"d", "D", "128", "head dimension"},
    {"heads", "H", "1", "query heads"},
    {"kv-heads", "HKV", "= heads", "key/value heads (GQA); must divide heads"},
    {"seed", "S", "1", "seed of the input draw"},
    {"dist", "normal|uniform", "normal", "input distribution"},
    {"sigma", "X", "1", "scale of the input distribution (> 0)"},
    {"causal", NULL, NULL, "causal mask"},
    {"oracle", "mpfr|fast", "fast", "oracle path"},
    {"threads", "T", "0 = all", "threads (results do not depend on it)"},
    {"json", NULL, NULL, "print one JSON object instead of the text report"},
};

static const char usage_line[] =
    "--variant NAME | --recipe FILE [--runs R] [--n N] ... [--order-seed-base S] [--json]";
static const char description[] = "Run the same cell (inputs, recipe) R times; run r sets dq_reduce_order_seed =\n"
                                  "base + r, which only the fp32-atomic dQ reduction reads. Reports for the stored\n"
                                  "dQ: the number of distinct bit patterns, the elements that differ between runs,\n"
                                  "the max and mean per-element spread max_r(dq) - min_r(dq) in ULPs of dQ's format\n"
                                  "(bf16 for the presets), the error against the oracle (max and mean ULP, rel_l2,\n"
                                  "averaged over runs), the ratios spread / error, and the fixed-point budget\n"
                                  "failures and FP64 recomputes per run. Exit status 0 done, 2 bad usage, 1 failure.";

/* Apply "k=v,k=v" to r. */
static int apply_sets(aa_recipe_t *r, const char *cmd, const char *s) {
  char buf[1024];
  aa_error_t err = {{0}};
  if (strlen(s) >= sizeof buf) {
    cli_error(cmd, "--set: too long");
    return 2;
  }
  strcpy(buf, s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (eq == NULL) {
      cli_error(cmd, "--set: '%s' is not KEY=VALUE", tok);
      return 2;
    }
    *eq = '\0';
    if (aa_recipe_set(r, tok, eq + 1, &err) != AA_OK) {
      cli_error(cmd, "--set: %s", err.msg);
      return 2;
    }
  }
  return 0;
}

static aa_fmt_t ulp_fmt_of(aa_fmt_t f) {
  return f == AA_FMT_BF16 || f == AA_FMT_FP16 ? f : AA_FMT_FP32;
}

int aa_cmd_determinism(int argc, char **argv) {
  const char *cmd = "determinism";
  cli_args_t a;
  aa_error_t err = {{0}};
  aa_recipe_t rec;
  size_t n = 1024, d = 128, heads = 1, kv_heads = 0, runs = 8, threads = 0;
  uint64_t seed = 1, base = 1;
  double sigma = 1;
  int uniform = 0, rc, status = 2;
  const char *s;
  cli_inputs_t in = {0};
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  int have_oracle = 0;
  double *lo = NULL, *hi = NULL, **pat = NULL;
  size_t npat = 0, numel = 0;
  cli_sb_t sb = {0};

  memset(&oracle, 0, sizeof oracle);
  if ((rc = cli_args_parse(&a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, argv)) >= 0)
    return rc;
  if ((s = cli_get(&a, "variant")) != NULL) {
    if (aa_recipe_preset(&rec, s, &err) != AA_OK) {
      cli_error(cmd, "unknown variant '%s' (attnacc list shows the presets)", s);
      return 2;
    }
  } else if ((s = cli_get(&a, "recipe")) != NULL) {
    if ((rc = aa_recipe_parse_file(&rec, s, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      return cli_exit_status(rc);
    }
    if (rec.name[0] == '\0') snprintf(rec.name, sizeof rec.name, "recipe");
  } else {
    cli_error(cmd, "give --variant NAME or --recipe FILE");
    return 2;
  }
  if ((s = cli_get(&a, "set")) != NULL && apply_sets(&rec, cmd, s)) return 2;
  if ((rc = aa_recipe_check(&rec, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    return 2;
  }
  if ((s = cli_get(&a, "runs")) && cli_size(&runs, cmd, "runs", s, 1, 1000)) return 2;
  if ((s = cli_get(&a, "order-seed-base")) && cli_u64(&base, cmd, "order-seed-base", s)) return 2;
  if ((s = cli_get(&a, "n")) && cli_size(&n, cmd, "n", s, 1, SIZE_MAX)) return 2;
  if ((s = cli_get(&a, "d")) && cli_size(&d, cmd, "d", s, 1, SIZE_MAX)) return 2;
  if ((s = cli_get(&a, "heads")) && cli_size(&heads, cmd, "heads", s, 1, SIZE_MAX)) return 2;
  if ((s = cli_get(&a, "kv-heads")) && cli_size(&kv_heads, cmd, "kv-heads", s, 1, SIZE_MAX)) return 2;
  if ((s = cli_get(&a, "seed")) && cli_u64(&seed, cmd, "seed", s)) return 2;
  if ((s = cli_get(&a, "dist")) != NULL) {
    if (strcmp(s, "uniform") == 0)
      uniform = 1;
    else if (strcmp(s, "normal") != 0) {
      cli_error(cmd, "--dist: '%s' is not normal or uniform", s);
      return 2;
    }
  }
  if ((s = cli_get(&a, "sigma")) && cli_double(&sigma, cmd, "sigma", s, 0, 1e300, 1)) return 2;
  if ((s = cli_get(&a, "threads")) && cli_size(&threads, cmd, "threads", s, 0, 4096)) return 2;
  if (kv_heads == 0) kv_heads = heads;
  if (heads % kv_heads != 0) {
    cli_error(cmd, "--kv-heads %zu does not divide --heads %zu", kv_heads, heads);
    return 2;
  }
  aa_oracle_opts_init(&oo);
  if ((s = cli_get(&a, "oracle")) != NULL && aa_oracle_path_from_name(&oo.path, s) != AA_OK) {
    cli_error(cmd, "--oracle: '%s' is not mpfr or fast", s);
    return 2;
  }
  oo.threads = (int)threads;
  cli_set_threads(threads);

  if ((rc = cli_inputs_draw(&in, seed, uniform, sigma, n, d, heads, kv_heads, 0, rec.io_fmt, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    return cli_exit_status(rc);
  }
  aa_problem_init(&pb, n, n, d, heads, kv_heads);
  pb.causal = cli_get(&a, "causal") != NULL;
  if ((rc = aa_problem_check(&pb, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  double t0 = cli_now();
  if ((rc = aa_oracle_run(&oracle, &pb, &in.q, &in.k, &in.v, &in.dO, &oo, &err)) != AA_OK) {
    cli_error(cmd, "oracle: %s", err.msg);
    status = cli_exit_status(rc);
    goto out;
  }
  double oracle_seconds = cli_now() - t0;
  have_oracle = 1;

  numel = heads * n * d;
  lo = malloc(numel * sizeof *lo);
  hi = malloc(numel * sizeof *hi);
  pat = calloc(runs, sizeof *pat);
  if (lo == NULL || hi == NULL || pat == NULL) {
    cli_error(cmd, "out of memory");
    status = 1;
    goto out;
  }
  /* Per run: error against the oracle; over runs: distinct patterns and the
     per-element range [lo, hi]. */
  double sum_mean_ulp = 0, max_ulp_err = 0, sum_rel_l2 = 0, seconds = 0, max_diff_l2 = 0;
  uint64_t fails = 0, recomputes = 0, tiles = 0;
  aa_fmt_t uf = AA_FMT_FP32;
  double ref2 = 0;
  for (size_t i = 0; i < numel; i++)
    ref2 += oracle.dq.val.data[i] * oracle.dq.val.data[i];
  for (size_t r = 0; r < runs; r++) {
    aa_recipe_t rr = rec;
    cli_variant_t v;
    aa_attn_result_t res;
    memset(&v, 0, sizeof v);
    rr.bwd_dq_reduce.order_seed = base + r;
    if ((rc = cli_run_variant(&v, &res, &rr, &pb, &in, &oracle, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      status = cli_exit_status(rc);
      cli_variant_free(&v);
      aa_attn_result_free(&res);
      goto out;
    }
    const double *q = res.dq.data;
    uf = ulp_fmt_of(res.dq.fmt);
    seconds += v.seconds;
    sum_mean_ulp += v.out[1].m.mean_ulp;
    sum_rel_l2 += v.out[1].m.rel_l2;
    if (v.out[1].m.max_ulp > max_ulp_err) max_ulp_err = v.out[1].m.max_ulp;
    fails += res.dq_reduce.budget_failures;
    recomputes += res.dq_reduce.fp64_recomputes;
    tiles += res.dq_reduce.tiles;
    int seen = 0;
    for (size_t k = 0; k < npat && !seen; k++)
      seen = memcmp(pat[k], q, numel * sizeof *q) == 0;
    if (!seen) {
      if ((pat[npat] = malloc(numel * sizeof *q)) == NULL) {
        cli_error(cmd, "out of memory");
        status = 1;
        cli_variant_free(&v);
        aa_attn_result_free(&res);
        goto out;
      }
      memcpy(pat[npat++], q, numel * sizeof *q);
    }
    double dl2 = 0;
    for (size_t i = 0; i < numel; i++) {
      if (r == 0 || q[i] < lo[i]) lo[i] = q[i];
      if (r == 0 || q[i] > hi[i]) hi[i] = q[i];
      double dd = q[i] - pat[0][i];
      dl2 += dd * dd;
    }
    if (dl2 > max_diff_l2) max_diff_l2 = dl2;
    cli_variant_free(&v);
    aa_attn_result_free(&res);
  }
  size_t differ = 0;
  double max_spread = 0, sum_spread = 0;
  for (size_t i = 0; i < numel; i++) {
    double sp = aa_metrics_ordinal(hi[i], uf) - aa_metrics_ordinal(lo[i], uf);
    if (!(sp == sp)) sp = 0; /* NaN elements: left out */
    if (sp > 0) differ++;
    if (sp > max_spread) max_spread = sp;
    sum_spread += sp;
  }
  double mean_spread = numel ? sum_spread / (double)numel : 0, mean_ulp_err = sum_mean_ulp / (double)runs;
  double rel_l2_err = sum_rel_l2 / (double)runs, spread_l2 = ref2 > 0 ? sqrt(max_diff_l2 / ref2) : 0;
  double r_max = max_ulp_err > 0 ? max_spread / max_ulp_err : 0,
         r_mean = mean_ulp_err > 0 ? mean_spread / mean_ulp_err : 0;
  double r_l2 = rel_l2_err > 0 ? spread_l2 / rel_l2_err : 0;
  const char *kind = aa_reduce_kind_name(rec.bwd_dq_reduce.kind);

  if (cli_get(&a, "json") != NULL) {
    cli_sb_printf(&sb, "{\n  \"command\": \"determinism\",\n  \"attnacc_version\": ");
    cli_sb_json_str(&sb, AA_VERSION);
    cli_sb_printf(&sb, ",\n  \"git_hash\": ");
    cli_sb_json_str(&sb, AA_GIT_HASH);
    cli_sb_printf(&sb, ",\n  \"variant\": ");
    cli_sb_json_str(&sb, rec.name);
    cli_sb_printf(&sb, ",\n  \"dq_reduce\": ");
    cli_sb_json_str(&sb, kind);
    cli_sb_printf(&sb,
                  ",\n  \"seed\": %llu,\n  \"problem\": {\"n\": %zu, \"d\": %zu, \"heads\": %zu, \"kv_heads\": %zu, "
                  "\"causal\": %s, \"dist\": \"%s\", \"sigma\": ",
                  (unsigned long long)seed, n, d, heads, kv_heads, pb.causal ? "true" : "false",
                  uniform ? "uniform" : "normal");
    cli_sb_json_num(&sb, sigma);
    cli_sb_printf(&sb, "},\n  \"runs\": %zu,\n  \"order_seed_base\": %llu,\n  \"distinct_patterns\": %zu,\n", runs,
                  (unsigned long long)base, npat);
    cli_sb_printf(&sb, "  \"elements\": %zu,\n  \"elements_differing\": %zu,\n  \"ulp_fmt\": \"%s\",\n", numel,
                  differ, cli_fmt_name(uf));
    cli_sb_printf(&sb, "  \"spread_max_ulp\": ");
    cli_sb_json_num(&sb, max_spread);
    cli_sb_printf(&sb, ",\n  \"spread_mean_ulp\": ");
    cli_sb_json_num(&sb, mean_spread);
    cli_sb_printf(&sb, ",\n  \"spread_rel_l2\": ");
    cli_sb_json_num(&sb, spread_l2);
    cli_sb_printf(&sb, ",\n  \"error_max_ulp\": ");
    cli_sb_json_num(&sb, max_ulp_err);
    cli_sb_printf(&sb, ",\n  \"error_mean_ulp\": ");
    cli_sb_json_num(&sb, mean_ulp_err);
    cli_sb_printf(&sb, ",\n  \"error_rel_l2\": ");
    cli_sb_json_num(&sb, rel_l2_err);
    cli_sb_printf(&sb, ",\n  \"spread_over_error_max\": ");
    cli_sb_json_num(&sb, r_max);
    cli_sb_printf(&sb, ",\n  \"spread_over_error_mean\": ");
    cli_sb_json_num(&sb, r_mean);
    cli_sb_printf(&sb, ",\n  \"spread_over_error_l2\": ");
    cli_sb_json_num(&sb, r_l2);
    cli_sb_printf(&sb, ",\n  \"dq_tiles_per_run\": %llu,\n  \"dq_budget_failures_per_run\": ",
                  (unsigned long long)(tiles / runs));
    cli_sb_json_num(&sb, (double)fails / (double)runs);
    cli_sb_printf(&sb, ",\n  \"dq_fp64_recomputes_per_run\": ");
    cli_sb_json_num(&sb, (double)recomputes / (double)runs);
    cli_sb_printf(&sb, ",\n  \"seconds_oracle\": ");
    cli_sb_json_num(&sb, oracle_seconds);
    cli_sb_printf(&sb, ",\n  \"seconds_per_run\": ");
    cli_sb_json_num(&sb, seconds / (double)runs);
    cli_sb_printf(&sb, "\n}\n");
    if (sb.oom) {
      cli_error(cmd, "out of memory");
      status = 1;
      goto out;
    }
    fwrite(sb.buf, 1, sb.len, stdout);
  } else {
    printf(
        "determinism: variant %s, dq_reduce %s; n %zu, d %zu, heads %zu, kv_heads %zu, %s, %s sigma %g, seed %llu\n",
        rec.name, kind, n, d, heads, kv_heads, pb.causal ? "causal" : "dense", uniform ? "uniform" : "normal", sigma,
        (unsigned long long)seed);
    printf("runs: %zu (order seeds %llu..%llu)\n", runs, (unsigned long long)base,
           (unsigned long long)(base + runs - 1));
    printf("distinct dQ bit patterns: %zu\n", npat);
    printf("elements differing between runs: %zu of %zu\n", differ, numel);
    printf("spread (ulp of %s): max %.4g, mean %.4g; rel_l2 of the largest run difference %.3e\n", cli_fmt_name(uf),
           max_spread, mean_spread, spread_l2);
    printf("error vs oracle (ulp of %s, over runs): max %.4g, mean %.4g; rel_l2 %.3e\n", cli_fmt_name(uf),
           max_ulp_err, mean_ulp_err, rel_l2_err);
    printf("spread / error: max %.3g, mean %.3g, l2 %.3g\n", r_max, r_mean, r_l2);
    printf("dq tiles per run %llu; budget failures per run %.4g; FP64 recomputes per run %.4g\n",
           (unsigned long long)(tiles / runs), (double)fails / (double)runs, (double)recomputes / (double)runs);
    printf("seconds: oracle %.3f, emulation %.3f per run\n", oracle_seconds, seconds / (double)runs);
    printf("attnacc %s (git %s)\n", AA_VERSION, AA_GIT_HASH);
  }
  status = fflush(stdout) != 0;

out:
  cli_sb_free(&sb);
  if (pat != NULL)
    for (size_t k = 0; k < npat; k++)
      free(pat[k]);
  free(pat);
  free(lo);
  free(hi);
  if (have_oracle) aa_oracle_result_free(&oracle);
  cli_inputs_free(&in);
  return status;
}
