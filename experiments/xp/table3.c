/* attnacc: the `table3` experiment: Table 3 of [blackwell-fa] (packed BF16 exp accuracy), one cell per construction.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xp/xp.h"

static const cli_opt_t params[] = {
    {"samples", "N", "4000000",
     "seeded samples per construction ([blackwell-fa] section 5.2: 'four million sampled exponents')"},
    {"seed", "S", "1", "sample seed: pcg64 stream aa_rng_derive(S, {0x746233})"},
    {"lo", "X", "-16", "low end of the sampled exponents x (base 2, after the shift)"},
    {"hi", "Y", "0", "high end of the sampled exponents"},
    {"shift", "S", "0", "nominal shift: the construction gets fl32(x - S), the reference is 2^(x - S)"},
    {"no-exhaustive", NULL, NULL,
     "skip the exhaustive columns (every FP32 in [lo, hi]; about 1.1e9 inputs by default)"},
    {"search-samples", "N", "65536", "samples used by the search over the quadratic family"},
};

static const char description[] =
    "Reproduce the shape of Table 3 of the Blackwell FlashAttention paper (Stashuk, Yu, Shah;\n"
    "REFERENCES.md [blackwell-fa] section 5.2): for every exp construction, the\n"
    "packed BF16 output (cvt rne) over N seeded samples and over every FP32 input of the same\n"
    "interval, side by side: ratio output / 2^x (FP64 libm reference, relative error < 2^-52),\n"
    "max and mean relative error, NaN count; then the published row (ratio 1.0440-1.0687, max\n"
    "rel err 6.93e-2, mean 5.85e-2).\n"
    "Reading of 'sampled exponents': the base-2 arguments x = s*scale*log2(e) - shift that the\n"
    "dense kernel hands to the exponential, drawn uniform in [lo, hi]; with the nominal fixed\n"
    "shift the row maximum lands near 0 and weights below 2^-16 barely matter, hence [-16, 0].\n"
    "Exhaustive columns weight every FP32 input equally, so half of them have |x| < 1.\n"
    "A search over quadratic-bf16 (k on a 0.01 grid in [0, 0.6], scale s on a 0.001 grid in\n"
    "[1, 1.1], d = 0, then a 10x finer grid around the best) looks for the parameters whose sampled\n"
    "ratio range is closest to the published [1.0440, 1.0687] (objective: the larger of the two\n"
    "end-point distances) and adds that row (construction quadratic-bf16-search).\n\n"
    "Cells: one per construction (axis construction), with the settings samples, seed, lo, hi,\n"
    "shift, exhaustive and search_samples as one-value coordinates. Columns: label, spec,\n"
    "s_min_ratio, s_max_ratio, s_max_rel_err, s_mean_rel_err, s_nan (sampled), x_inputs,\n"
    "x_min_ratio, x_max_ratio, x_max_rel_err, x_mean_rel_err, x_nan (exhaustive; empty with\n"
    "--no-exhaustive), search_min_ratio, search_max_ratio, search_objective (the search row);\n"
    "timings seconds_search, seconds_sampled, seconds_exhaustive. After the sweep the table is\n"
    "printed in Markdown with the published row; attnacc report shows it too.\n"
    "Default folder: results/table3.";

/* The constructions of the table: axis key, label, aa_exp_parse spec. */
typedef struct {
  const char *key, *label, *spec;
} t3_con_t;

static const t3_con_t cons[] = {
    {"exact", "exact (BF16 RNE of CR 2^x)", "exact"},
    {"schraudolph-bf16", "schraudolph-bf16 c=0 (linear)", "schraudolph-bf16"},
    {"schraudolph-bf16-rms", "schraudolph-bf16 rms (c=7.4220)", "schraudolph-bf16:preset=rms"},
    {"schraudolph-bf16-sym", "schraudolph-bf16 sym (c=5.5907)", "schraudolph-bf16:preset=sym"},
    {"schraudolph-bf16-above", "schraudolph-bf16 above (c=-1/8192)", "schraudolph-bf16:preset=above"},
    {"schraudolph-bf16-below", "schraudolph-bf16 below (c=11.0172)", "schraudolph-bf16:preset=below"},
    {"schraudolph-fp32", "schraudolph-fp32 c=0, packed", "schraudolph-fp32"},
    {"quadratic-bf16", "quadratic-bf16 k=0.3398 (fp32 order)", "quadratic-bf16"},
    {"quadratic-bf16-bf16order", "quadratic-bf16 k=0.3398 (bf16 order)", "quadratic-bf16:order=bf16"},
    {"fa4-poly-1", "fa4-poly degree 1, packed", "fa4-poly:degree=1"},
    {"fa4-poly-2", "fa4-poly degree 2, packed", "fa4-poly:degree=2"},
    {"fa4-poly-3", "fa4-poly degree 3, packed", "fa4-poly:degree=3"},
    {"fa4-poly-4", "fa4-poly degree 4, packed", "fa4-poly:degree=4"},
    {"fa4-poly-5", "fa4-poly degree 5, packed", "fa4-poly:degree=5"},
    {"quadratic-bf16-search", NULL, NULL},
};
#define NCONS (sizeof cons / sizeof cons[0])

typedef struct {
  size_t nsamp, nsearch;
  uint64_t seed;
  double lo, hi, shift;
  int exhaustive;
} t3_t;

static void draw(float *x, size_t n, uint64_t seed, uint64_t tag, float lo, float hi) {
  aa_pcg64_t rng;
  aa_rng_derive(&rng, seed, &tag, 1);
  for (size_t i = 0; i < n; i++) {
    float v = (float)((double)lo + ((double)hi - (double)lo) * aa_pcg64_uniform(&rng));
    x[i] = v < lo ? lo : v > hi ? hi : v;
  }
}

/* Sampled ratio range of one quadratic-bf16 setting (packed output). */
static void ratio_range(double *mn, double *mx, const aa_exp_t *e, const float *xin, const double *ref, uint16_t *h,
                        size_t n) {
  aa_exp_eval_bf16_batch(h, xin, n, e);
  double a = INFINITY, b = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    double r = (double)aa_bf16_to_f32(h[i]) / ref[i];
    if (r < a) a = r;
    if (r > b) b = r;
  }
  *mn = a;
  *mx = b;
}

static double objective(double mn, double mx) {
  return fmax(fabs(mn - 1.0440), fabs(mx - 1.0687));
}

/* The quadratic-bf16 parameters whose sampled ratio range is closest to the
   published one: a pure function of the settings (its own sample stream). */
static int search(aa_exp_t *best_e, double res[3], const t3_t *cx, aa_error_t *err) {
  size_t n = cx->nsearch;
  float *xs = malloc(sizeof(float) * n), *xin = malloc(sizeof(float) * n), fsh = (float)cx->shift;
  double *ref = malloc(sizeof(double) * n), bk = 0, bs = 1, best = INFINITY, bmn = 0, bmx = 0;
  uint16_t *h = malloc(sizeof(uint16_t) * n);
  aa_exp_t q;
  char spec[128];
  int rc = AA_OK;
  if (xs == NULL || xin == NULL || ref == NULL || h == NULL) {
    rc = aa_error_set(err, AA_ENOMEM, "out of memory");
    goto out;
  }
  draw(xs, n, cx->seed, 0x746234, (float)cx->lo, (float)cx->hi);
  for (size_t i = 0; i < n; i++) {
    xin[i] = xs[i] - fsh;
    ref[i] = exp2((double)xs[i] - (double)fsh);
  }
  if ((rc = aa_exp_init(&q, "quadratic-bf16", err)) != AA_OK) goto out;
  for (int pass = 0; pass < 2; pass++) {
    double k0 = pass ? bk - 0.01 : 0.0, k1 = pass ? bk + 0.01 : 0.6, ks = pass ? 0.001 : 0.01;
    double s0 = pass ? bs - 0.001 : 1.0, s1 = pass ? bs + 0.001 : 1.1, ss = pass ? 0.0001 : 0.001;
    for (int ik = 0; k0 + ik * ks <= k1 + 1e-12; ik++)
      for (int is = 0; s0 + is * ss <= s1 + 1e-12; is++) {
        char kv[32];
        double mn, mx, o;
        snprintf(kv, sizeof kv, "%.6f", k0 + ik * ks);
        if (aa_exp_set(&q, "k", kv, NULL) != AA_OK) continue;
        snprintf(kv, sizeof kv, "%.6f", s0 + is * ss);
        if (aa_exp_set(&q, "s", kv, NULL) != AA_OK) continue;
        ratio_range(&mn, &mx, &q, xin, ref, h, n);
        o = objective(mn, mx);
        if (o < best) {
          best = o;
          bk = q.k;
          bs = q.s;
          bmn = mn;
          bmx = mx;
        }
      }
  }
  snprintf(spec, sizeof spec, "quadratic-bf16:k=%.6f,s=%.6f", bk, bs);
  rc = aa_exp_parse(best_e, spec, err);
  res[0] = bmn;
  res[1] = bmx;
  res[2] = best;
out:
  free(xs);
  free(xin);
  free(ref);
  free(h);
  return rc;
}

static void map_cols(aa_sweep_rows_t *rows, const char *pre, const aa_exp_map_t *m) {
  char c[32];
  snprintf(c, sizeof c, "%s_min_ratio", pre);
  aa_sweep_set_double(rows, c, m->min_ratio);
  snprintf(c, sizeof c, "%s_max_ratio", pre);
  aa_sweep_set_double(rows, c, m->max_ratio);
  snprintf(c, sizeof c, "%s_max_rel_err", pre);
  aa_sweep_set_double(rows, c, m->max_rel_err);
  snprintf(c, sizeof c, "%s_mean_rel_err", pre);
  aa_sweep_set_double(rows, c, m->mean_rel_err);
  snprintf(c, sizeof c, "%s_nan", pre);
  aa_sweep_set_int(rows, c, (int64_t)m->cls_count[AA_EXP_CLS_NAN]);
}

static int t3_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *vctx) {
  const xp_ctx_t *ctx = vctx;
  const t3_t *cx = ctx->priv;
  aa_error_t *err = aa_sweep_rows_error(rows);
  const char *key = aa_cell_str(cell, "construction", "");
  const t3_con_t *con = NULL;
  aa_exp_t e;
  aa_exp_map_t *ms = calloc(2, sizeof *ms);
  aa_exp_map_opts_t mo = {1, 4096, ctx->inner_threads, (float)cx->shift};
  float *x = NULL;
  double sr[3] = {0, 0, 0}, t0, t_search = 0, t_samp, t_exh = 0;
  char label[128], spec[256];
  int rc;
  for (size_t i = 0; i < NCONS; i++)
    if (strcmp(cons[i].key, key) == 0) con = &cons[i];
  if (ms == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  if (con == NULL) {
    rc = aa_error_set(err, AA_EINVAL, "unknown construction '%s'", key);
    goto out;
  }
  t0 = cli_now();
  if (con->spec == NULL) {
    if ((rc = search(&e, sr, cx, err)) != AA_OK) goto out;
    snprintf(label, sizeof label, XP_TABLE3_FITTED " k=%.3f s=%.4f", e.k, e.s);
  } else {
    if ((rc = aa_exp_parse(&e, con->spec, err)) != AA_OK) goto out;
    snprintf(label, sizeof label, "%s", con->label);
  }
  t_search = cli_now() - t0;
  if ((x = malloc(sizeof(float) * cx->nsamp)) == NULL) {
    rc = aa_error_set(err, AA_ENOMEM, "out of memory");
    goto out;
  }
  /* every construction maps the same samples (one stream of the seed) */
  draw(x, cx->nsamp, cx->seed, 0x746233, (float)cx->lo, (float)cx->hi);
  t0 = cli_now();
  rc = aa_exp_map_samples(&ms[0], &e, 1, x, cx->nsamp, &mo, err);
  t_samp = cli_now() - t0;
  if (rc == AA_OK && cx->exhaustive) {
    t0 = cli_now();
    rc = aa_exp_map_interval(&ms[1], &e, 1, (float)cx->lo, (float)cx->hi, &mo, err);
    t_exh = cli_now() - t0;
  }
  if (rc != AA_OK) goto out;
  aa_exp_describe(spec, sizeof spec, &e);
  aa_sweep_row_new(rows);
  aa_sweep_set_str(rows, "label", label);
  aa_sweep_set_str(rows, "spec", spec);
  map_cols(rows, "s", &ms[0]);
  if (cx->exhaustive) {
    aa_sweep_set_int(rows, "x_inputs", (int64_t)ms[1].inputs);
    map_cols(rows, "x", &ms[1]);
  }
  if (con->spec == NULL) {
    aa_sweep_set_double(rows, "search_min_ratio", sr[0]);
    aa_sweep_set_double(rows, "search_max_ratio", sr[1]);
    aa_sweep_set_double(rows, "search_objective", sr[2]);
  }
  aa_sweep_set_double(rows, "seconds_search", t_search);
  aa_sweep_set_double(rows, "seconds_sampled", t_samp);
  rc = aa_sweep_set_double(rows, "seconds_exhaustive", t_exh);
out:
  free(x);
  free(ms);
  return rc;
}

static int t3_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const char *const cols[] = {"label",
                                     "spec",
                                     "s_min_ratio",
                                     "s_max_ratio",
                                     "s_max_rel_err",
                                     "s_mean_rel_err",
                                     "s_nan",
                                     "x_inputs",
                                     "x_min_ratio",
                                     "x_max_ratio",
                                     "x_max_rel_err",
                                     "x_mean_rel_err",
                                     "x_nan",
                                     "search_min_ratio",
                                     "search_max_ratio",
                                     "search_objective",
                                     "seconds_search@",
                                     "seconds_sampled@",
                                     "seconds_exhaustive@"};
  const char *keys[NCONS];
  size_t nk = 0;
  int rc;
  t3_t *cx = calloc(1, sizeof *cx);
  if ((ctx->priv = cx) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  cx->nsamp = 4000000;
  cx->nsearch = 65536;
  cx->seed = 1;
  cx->lo = -16;
  if (xp_opt_size(&cx->nsamp, o, "samples", 1, (size_t)1 << 30) ||
      xp_opt_size(&cx->nsearch, o, "search-samples", 16, (size_t)1 << 24) || xp_opt_u64(&cx->seed, o, "seed") ||
      xp_opt_double(&cx->lo, o, "lo", -1e4, 1e4, 0) || xp_opt_double(&cx->hi, o, "hi", -1e4, 1e4, 0) ||
      xp_opt_double(&cx->shift, o, "shift", -1e4, 1e4, 0))
    return AA_EINVAL;
  cx->exhaustive = xp_opt(o, "no-exhaustive") == NULL;
  if ((double)(float)cx->lo != cx->lo || (double)(float)cx->hi != cx->hi || (double)(float)cx->shift != cx->shift ||
      !((float)cx->lo < (float)cx->hi))
    return aa_error_set(err, AA_EINVAL, "--lo, --hi and --shift must be FP32 values with lo < hi");
  for (size_t i = 0; i < NCONS; i++) {
    aa_exp_t e;
    if (cons[i].spec == NULL || aa_exp_parse(&e, cons[i].spec, NULL) == AA_OK) keys[nk++] = cons[i].key;
  }
  if ((rc = aa_sweep_axis_str(sw, "construction", keys, nk, 0, err)) ||
      (rc = xp_axis_fixed_int(sw, "samples", (int64_t)cx->nsamp, err)) ||
      (rc = xp_axis_fixed_int(sw, "seed", (int64_t)cx->seed, err)) ||
      (rc = xp_axis_fixed_double(sw, "lo", cx->lo, err)) || (rc = xp_axis_fixed_double(sw, "hi", cx->hi, err)) ||
      (rc = xp_axis_fixed_double(sw, "shift", cx->shift, err)) ||
      (rc = xp_axis_fixed_int(sw, "exhaustive", cx->exhaustive, err)) ||
      (rc = xp_axis_fixed_int(sw, "search_samples", (int64_t)cx->nsearch, err)) ||
      (rc = xp_columns(sw, cols, sizeof cols / sizeof cols[0], err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

/* The Markdown table of the folder's results.csv, with the published row. */
static int t3_finish(const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  const t3_t *cx = ctx->priv;
  aa_results_t c;
  double ts = 0, tx = 0;
  uint64_t xin = 0;
  int rc;
  if ((rc = aa_sweep_results_open(&c, o->out_dir, err)) != AA_OK) return rc;
  int cl = aa_results_col(&c, "label"), cso = aa_results_col(&c, "search_objective");
  const char *names[] = {"s_min_ratio", "s_max_ratio", "s_max_rel_err", "s_mean_rel_err", "s_nan",
                         "x_min_ratio", "x_max_ratio", "x_max_rel_err", "x_mean_rel_err", "x_nan"};
  printf(
      "attnacc %s (git %s) table3: packed BF16 exp (cvt rne), x in [%g, %g], shift %g, %zu samples (seed %llu)%s\n\n",
      AA_VERSION, AA_GIT_HASH, cx->lo, cx->hi, cx->shift, cx->nsamp, (unsigned long long)cx->seed,
      cx->exhaustive ? ", and every FP32 input of the interval" : "");
  printf("| construction | sampled min ratio | sampled max ratio | sampled max rel err | sampled mean rel err "
         "| sampled NaN | exhaustive min ratio | exhaustive max ratio | exhaustive max rel err | "
         "exhaustive mean rel err | exhaustive NaN |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (size_t r = 0; r < c.nrows; r++) {
    printf("| %s |", aa_results_cell(&c, r, cl));
    for (int k = 0; k < 10; k++) {
      const char *v = aa_results_cell(&c, r, aa_results_col(&c, names[k]));
      if (*v == '\0')
        printf(" - |");
      else if (k % 5 == 4)
        printf(" %s |", v);
      else
        printf(k % 5 < 2 ? " %.4f |" : " %.3e |", aa_results_num(v));
    }
    printf("\n");
    ts += aa_results_value(&c, r, "seconds_sampled");
    tx += aa_results_value(&c, r, "seconds_exhaustive");
    if (*aa_results_cell(&c, r, aa_results_col(&c, "x_inputs")))
      xin = strtoull(aa_results_cell(&c, r, aa_results_col(&c, "x_inputs")), NULL, 10);
  }
  printf("| published ([blackwell-fa] Table 3) | 1.0440 | 1.0687 | 6.93e-02 | 5.85e-02 | - | - | - | - | - | - |\n");
  for (size_t r = 0; r < c.nrows; r++)
    if (*aa_results_cell(&c, r, cso))
      printf("\nquadratic-bf16 search: %s; on %zu search samples ratio [%.4f, %.4f], largest end-point distance to "
             "[1.0440, 1.0687] = %.2e\n",
             aa_results_cell(&c, r, aa_results_col(&c, "spec")), cx->nsearch,
             aa_results_value(&c, r, "search_min_ratio"), aa_results_value(&c, r, "search_max_ratio"),
             aa_results_num(aa_results_cell(&c, r, cso)));
  printf("timing: sampled maps %.1f s, exhaustive maps %.1f s (%llu inputs each)\n", ts, tx, (unsigned long long)xin);
  aa_results_free(&c);
  return AA_OK;
}

const xp_experiment_t xp_table3 = {
    .name = "table3",
    .summary = "packed BF16 exp accuracy (Table 3 of the Blackwell FlashAttention paper) for every exp construction",
    .description = description,
    .inputs = "sampled exponents: pcg64 aa_rng_derive(seed, {0x746233}) uniform in [lo, hi] (search: {0x746234})",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .declare = t3_declare,
    .eval = t3_eval,
    .finish = t3_finish,
    .release = xp_free_priv,
};
