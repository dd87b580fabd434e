/* attnacc: the `table3` command: the paper's Table 3 (packed BF16 exp accuracy) for every construction, sampled and exhaustive. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

#define MAXROWS 24

static const cli_opt_t opts[] = {
    {"samples", "N", "4000000", "seeded samples per construction (the paper's 'four million sampled exponents')"},
    {"seed", "S", "1", "sample seed: pcg64 stream aa_rng_derive(S, {0x746233})"},
    {"lo", "X", "-16", "low end of the sampled exponents x (base 2, after the shift)"},
    {"hi", "Y", "0", "high end of the sampled exponents"},
    {"shift", "S", "0", "nominal shift: the construction gets fl32(x - S), the reference is 2^(x - S)"},
    {"no-exhaustive", NULL, NULL, "skip the exhaustive columns (every FP32 in [lo, hi]; about 1.1e9 inputs by default)"},
    {"search-samples", "N", "65536", "samples used by the search over the quadratic family"},
    {"threads", "T", "OpenMP default", "threads; results do not depend on it"},
    {"out", "DIR", NULL, "also write DIR/table3.csv (atomically)"},
};

static const char *desc =
    "Reproduce the shape of Table 3 of seed 003 (section 5.2): for every exp construction, the\n"
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
    "end-point distances) and adds that row.";

typedef struct {
  char label[96];
  aa_exp_t e;
} row_t;

static void add_row(row_t *rows, int *n, const char *label, const char *spec) {
  if (*n >= MAXROWS) return;
  snprintf(rows[*n].label, sizeof rows[*n].label, "%s", label);
  if (aa_exp_parse(&rows[*n].e, spec, NULL) == AA_OK) (*n)++;
}

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

static double objective(double mn, double mx) { return fmax(fabs(mn - 1.0440), fabs(mx - 1.0687)); }

int aa_cmd_table3(int argc, char **argv) {
  cli_args_t a;
  int rc;
  if ((rc = cli_args_parse(&a, "table3", "[options]", desc, opts, sizeof opts / sizeof opts[0], argc, argv)) >= 0)
    return rc;
  size_t nsamp = 4000000, nsearch = 65536, threads = 0;
  uint64_t seed = 1;
  double lo = -16, hi = 0, shift = 0;
  const char *v;
  if ((v = cli_get(&a, "samples")) && (rc = cli_size(&nsamp, "table3", "samples", v, 1, (size_t)1 << 30))) return rc;
  if ((v = cli_get(&a, "search-samples")) && (rc = cli_size(&nsearch, "table3", "search-samples", v, 16, (size_t)1 << 24)))
    return rc;
  if ((v = cli_get(&a, "seed")) && (rc = cli_u64(&seed, "table3", "seed", v))) return rc;
  if ((v = cli_get(&a, "lo")) && (rc = cli_double(&lo, "table3", "lo", v, -1e4, 1e4, 0))) return rc;
  if ((v = cli_get(&a, "hi")) && (rc = cli_double(&hi, "table3", "hi", v, -1e4, 1e4, 0))) return rc;
  if ((v = cli_get(&a, "shift")) && (rc = cli_double(&shift, "table3", "shift", v, -1e4, 1e4, 0))) return rc;
  if ((v = cli_get(&a, "threads")) && (rc = cli_size(&threads, "table3", "threads", v, 1, 1024))) return rc;
  int exhaustive = cli_get(&a, "no-exhaustive") == NULL;
  const char *out = cli_get(&a, "out");
  float flo = (float)lo, fhi = (float)hi, fsh = (float)shift;
  if ((double)flo != lo || (double)fhi != hi || (double)fsh != shift || !(flo < fhi)) {
    cli_error("table3", "--lo, --hi and --shift must be FP32 values with lo < hi");
    return 2;
  }
  aa_error_t err;
  if (out != NULL && cli_check_out_dir(out, &err) != AA_OK) {
    cli_error("table3", "--out: %s", err.msg);
    return 2;
  }

  row_t rows[MAXROWS];
  int nr = 0;
  add_row(rows, &nr, "exact (BF16 RNE of CR 2^x)", "exact");
  add_row(rows, &nr, "schraudolph-bf16 c=0 (linear)", "schraudolph-bf16");
  add_row(rows, &nr, "schraudolph-bf16 rms (c=7.4220)", "schraudolph-bf16:preset=rms");
  add_row(rows, &nr, "schraudolph-bf16 sym (c=5.5907)", "schraudolph-bf16:preset=sym");
  add_row(rows, &nr, "schraudolph-bf16 above (c=-1/8192)", "schraudolph-bf16:preset=above");
  add_row(rows, &nr, "schraudolph-bf16 below (c=11.0172)", "schraudolph-bf16:preset=below");
  add_row(rows, &nr, "schraudolph-fp32 c=0, packed", "schraudolph-fp32");
  add_row(rows, &nr, "quadratic-bf16 k=0.3398 (fp32 order)", "quadratic-bf16");
  add_row(rows, &nr, "quadratic-bf16 k=0.3398 (bf16 order)", "quadratic-bf16:order=bf16");
  for (int d = 1; d <= 5; d++) {
    char l[64], s[64];
    snprintf(l, sizeof l, "fa4-poly degree %d, packed", d);
    snprintf(s, sizeof s, "fa4-poly:degree=%d", d);
    add_row(rows, &nr, l, s);
  }

  /* search over the quadratic family on a small sample */
  float *xs = malloc(sizeof(float) * nsearch);
  float *xin = malloc(sizeof(float) * nsearch);
  double *ref = malloc(sizeof(double) * nsearch);
  uint16_t *h = malloc(sizeof(uint16_t) * nsearch);
  if (xs == NULL || xin == NULL || ref == NULL || h == NULL) {
    free(xs); free(xin); free(ref); free(h);
    cli_error("table3", "out of memory");
    return 1;
  }
  draw(xs, nsearch, seed, 0x746234, flo, fhi);
  for (size_t i = 0; i < nsearch; i++) {
    xin[i] = xs[i] - fsh;
    ref[i] = exp2((double)xs[i] - (double)fsh);
  }
  aa_exp_t q;
  aa_exp_init(&q, "quadratic-bf16", NULL);
  double bk = 0, bs = 1, best = INFINITY, bmn = 0, bmx = 0;
  for (int pass = 0; pass < 2; pass++) {
    double k0 = pass ? bk - 0.01 : 0.0, k1 = pass ? bk + 0.01 : 0.6, ks = pass ? 0.001 : 0.01;
    double s0 = pass ? bs - 0.001 : 1.0, s1 = pass ? bs + 0.001 : 1.1, ss = pass ? 0.0001 : 0.001;
    for (int ik = 0; k0 + ik * ks <= k1 + 1e-12; ik++)
      for (int is = 0; s0 + is * ss <= s1 + 1e-12; is++) {
        char kv[32];
        snprintf(kv, sizeof kv, "%.6f", k0 + ik * ks);
        if (aa_exp_set(&q, "k", kv, NULL) != AA_OK) continue;
        snprintf(kv, sizeof kv, "%.6f", s0 + is * ss);
        if (aa_exp_set(&q, "s", kv, NULL) != AA_OK) continue;
        double mn, mx;
        ratio_range(&mn, &mx, &q, xin, ref, h, nsearch);
        double o = objective(mn, mx);
        if (o < best) { best = o; bk = q.k; bs = q.s; bmn = mn; bmx = mx; }
      }
  }
  free(xs); free(xin); free(ref); free(h);
  char spec[128], label[96];
  snprintf(spec, sizeof spec, "quadratic-bf16:k=%.6f,s=%.6f", bk, bs);
  snprintf(label, sizeof label, "quadratic-bf16 search best k=%.3f s=%.4f", bk, bs);
  add_row(rows, &nr, label, spec);

  /* the sampled and exhaustive maps, all constructions in one pass each */
  aa_exp_t es[MAXROWS];
  for (int r = 0; r < nr; r++) es[r] = rows[r].e;
  aa_exp_map_t ms[MAXROWS], mx[MAXROWS];
  aa_exp_map_opts_t mo = {1, 4096, (int)threads, fsh};
  float *x = malloc(sizeof(float) * nsamp);
  if (x == NULL) {
    cli_error("table3", "out of memory");
    return 1;
  }
  draw(x, nsamp, seed, 0x746233, flo, fhi);
  double t0 = cli_now();
  int st = aa_exp_map_samples(ms, es, nr, x, nsamp, &mo, &err);
  free(x);
  double t1 = cli_now();
  if (st == AA_OK && exhaustive) st = aa_exp_map_interval(mx, es, nr, flo, fhi, &mo, &err);
  double t2 = cli_now();
  if (st != AA_OK) {
    cli_error("table3", "%s", err.msg);
    return cli_exit_status(st);
  }

  cli_sb_t md = {0}, csv = {0};
  cli_sb_printf(&md, "attnacc %s (git %s) table3: packed BF16 exp (cvt rne), x in [%g, %g], shift %g, %zu samples "
                     "(seed %llu)%s\n\n",
                AA_VERSION, AA_GIT_HASH, lo, hi, shift, nsamp, (unsigned long long)seed,
                exhaustive ? ", and every FP32 input of the interval" : "");
  cli_sb_printf(&md, "| construction | sampled min ratio | sampled max ratio | sampled max rel err | sampled mean rel err "
                     "| sampled NaN | exhaustive min ratio | exhaustive max ratio | exhaustive max rel err | "
                     "exhaustive mean rel err | exhaustive NaN |\n");
  cli_sb_printf(&md, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  cli_sb_printf(&csv, "# attnacc %s (git %s) table3 seed %llu samples %zu lo %.9g hi %.9g shift %.9g output bf16 cvt rne\n",
                AA_VERSION, AA_GIT_HASH, (unsigned long long)seed, nsamp, lo, hi, shift);
  cli_sb_printf(&csv, "construction,spec,s_min_ratio,s_max_ratio,s_max_rel_err,s_mean_rel_err,s_nan,x_inputs,"
                      "x_min_ratio,x_max_ratio,x_max_rel_err,x_mean_rel_err,x_nan\n");
  for (int r = 0; r < nr; r++) {
    char sp[256];
    aa_exp_describe(sp, sizeof sp, &es[r]);
    cli_sb_printf(&md, "| %s | %.4f | %.4f | %.3e | %.3e | %llu |", rows[r].label, ms[r].min_ratio, ms[r].max_ratio,
                  ms[r].max_rel_err, ms[r].mean_rel_err, (unsigned long long)ms[r].cls_count[AA_EXP_CLS_NAN]);
    cli_sb_printf(&csv, "\"%s\",\"%s\",%.9g,%.9g,%.9g,%.9g,%llu", rows[r].label, sp, ms[r].min_ratio, ms[r].max_ratio,
                  ms[r].max_rel_err, ms[r].mean_rel_err, (unsigned long long)ms[r].cls_count[AA_EXP_CLS_NAN]);
    if (exhaustive) {
      cli_sb_printf(&md, " %.4f | %.4f | %.3e | %.3e | %llu |\n", mx[r].min_ratio, mx[r].max_ratio, mx[r].max_rel_err,
                    mx[r].mean_rel_err, (unsigned long long)mx[r].cls_count[AA_EXP_CLS_NAN]);
      cli_sb_printf(&csv, ",%llu,%.9g,%.9g,%.9g,%.9g,%llu\n", (unsigned long long)mx[r].inputs, mx[r].min_ratio,
                    mx[r].max_ratio, mx[r].max_rel_err, mx[r].mean_rel_err,
                    (unsigned long long)mx[r].cls_count[AA_EXP_CLS_NAN]);
    } else {
      cli_sb_printf(&md, " - | - | - | - | - |\n");
      cli_sb_printf(&csv, ",,,,,,\n");
    }
  }
  cli_sb_printf(&md, "| published (seed 003, Table 3) | 1.0440 | 1.0687 | 6.93e-02 | 5.85e-02 | - | - | - | - | - | - |\n");
  cli_sb_printf(&csv, "\"published\",\"seed 003 Table 3\",1.0440,1.0687,6.93e-2,5.85e-2,,,,,,,\n");
  cli_sb_printf(&md, "\nquadratic-bf16 search: best k = %.4f, s = %.4f; on %zu search samples ratio [%.4f, %.4f], "
                     "largest end-point distance to [1.0440, 1.0687] = %.2e\n",
                bk, bs, nsearch, bmn, bmx, best);
  cli_sb_printf(&md, "timing: sampled maps %.1f s, exhaustive maps %.1f s (%llu inputs each)\n", t1 - t0, t2 - t1,
                exhaustive ? (unsigned long long)mx[0].inputs : 0ULL);
  int ret = 0;
  if (md.oom || csv.oom) {
    cli_error("table3", "out of memory");
    ret = 1;
  } else {
    fputs(md.buf, stdout);
    if (out != NULL) {
      char path[4096];
      snprintf(path, sizeof path, "%s/table3.csv", out);
      if (cli_mkdir_p(out, &err) != AA_OK || cli_write_atomic(path, csv.buf, csv.len, &err) != AA_OK) {
        cli_error("table3", "--out: %s", err.msg);
        ret = 1;
      }
    }
  }
  cli_sb_free(&md);
  cli_sb_free(&csv);
  if (ret == 0 && fflush(stdout) != 0) ret = 1;
  return ret;
}
