/* attnacc: the `report` command: Markdown tables and gnuplot plots from sweep result folders. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "commands.h"
#include "config.h"
#include "xp/xp.h"

#ifndef AA_PLOTS_SRCDIR
#define AA_PLOTS_SRCDIR ""
#endif
#ifndef AA_PLOTS_DATADIR
#define AA_PLOTS_DATADIR ""
#endif

/* Published figures (REFERENCES section 2, from seed 003). */
#define PUB_DQ_PAPER 1.47e-2 /* dense dQ rel_l2 at 32768, the paper's kernel */
#define PUB_DQ_FA4 2.37e-3   /* the same for FA4 */

static const cli_opt_t opts[] = {
    {"in", "DIR", NULL, "folder with results: a sweep folder, or a folder of them (and expratio.csv)"},
    {"out", "DIR", "IN/report", "where report.md, the plots (PNG and SVG) and their data go"},
};

static const char description[] =
    "Read every results.csv of DIR and of its immediate subfolders (written by attnacc sweep,\n"
    "with meta.json; an older DIR/table3.csv is read too) and DIR/expratio.csv (attnacc\n"
    "expmap --curve), and write OUT/report.md: for table4-shaped sweeps the pass-rule table,\n"
    "relative l2 error tables per output with the published numbers beside ours, the\n"
    "flash-attention rule against naive-bf16, timings, and error-vs-length plots (log\n"
    "scale, one line per recipe and mask); for nanmap sweeps the scale thresholds and a\n"
    "heatmap; for table3 sweeps Table 3 with the published row; the exp-ratio plot; other\n"
    "experiments' folders are named. Plots are drawn by the gnuplot scripts in\n"
    "plots/ as PNG and SVG (gnuplot: $ATTNACC_GNUPLOT, else the configured one, else PATH;\n"
    "scripts: $ATTNACC_PLOTS_DIR, else the source tree, else the installed copy). Without\n"
    "gnuplot the tables still come out, with a note on how to install it. Prints the path\n"
    "of report.md. Exit status: 0 done, 2 bad usage or no results, 1 failure to write.";

/* ---- string sets (recipes, masks in order of appearance) ---- */
#define MAXK 64
typedef struct {
  const char *v[MAXK];
  size_t n;
} set_t;

static int set_add(set_t *s, const char *x) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i], x) == 0) return (int)i;
  if (s->n == MAXK) return -1;
  s->v[s->n] = x;
  return (int)s->n++;
}
static int set_find(const set_t *s, const char *x) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i], x) == 0) return (int)i;
  return -1;
}

typedef struct {
  double v[MAXK];
  size_t n;
} dset_t;
static int dset_add(dset_t *s, double x) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == x) return (int)i;
  if (s->n == MAXK) return -1;
  size_t i = s->n++;
  while (i > 0 && s->v[i - 1] > x) {
    s->v[i] = s->v[i - 1];
    i--;
  }
  s->v[i] = x;
  return (int)i;
}
static int dset_find(const dset_t *s, double x) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == x) return (int)i;
  return -1;
}

/* ---- output helpers ---- */
static void fmt_e(char *buf, size_t cap, double x) {
  if (isnan(x))
    snprintf(buf, cap, "-");
  else if (isinf(x))
    snprintf(buf, cap, "inf");
  else if (x == 0)
    snprintf(buf, cap, "0");
  else
    snprintf(buf, cap, "%.2e", x);
}

static int write_file(const char *dir, const char *name, const cli_sb_t *sb) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return aa_file_write(path, sb->buf ? sb->buf : "", sb->len, NULL);
}

/* Find gnuplot: $ATTNACC_GNUPLOT (empty or missing file: none), else the
   configured path, else the PATH. */
static int find_gnuplot(char *out, size_t cap) {
  const char *e = getenv("ATTNACC_GNUPLOT"), *path;
  if (e != NULL) {
    snprintf(out, cap, "%s", e);
    return e[0] != '\0' && access(e, X_OK) == 0;
  }
  if (AA_GNUPLOT[0] != '\0' && access(AA_GNUPLOT, X_OK) == 0) {
    snprintf(out, cap, "%s", AA_GNUPLOT);
    return 1;
  }
  if ((path = getenv("PATH")) != NULL) {
    const char *p = path;
    while (*p) {
      const char *c = strchr(p, ':');
      size_t len = c ? (size_t)(c - p) : strlen(p);
      snprintf(out, cap, "%.*s/gnuplot", (int)len, p);
      if (len > 0 && access(out, X_OK) == 0) return 1;
      p = c ? c + 1 : p + len;
    }
  }
  out[0] = '\0';
  return 0;
}

static int find_plots(char *out, size_t cap) {
  const char *c[3] = {getenv("ATTNACC_PLOTS_DIR"), AA_PLOTS_SRCDIR, AA_PLOTS_DATADIR};
  for (int i = 0; i < 3; i++) {
    char probe[4200];
    if (c[i] == NULL || c[i][0] == '\0') continue;
    snprintf(probe, sizeof probe, "%s/table4.gp", c[i]);
    if (access(probe, R_OK) == 0) {
      snprintf(out, cap, "%s", c[i]);
      return 1;
    }
  }
  out[0] = '\0';
  return 0;
}

/* The rest of a Markdown header row "| recipe |" of a mask x length grid:
   one column "MASK N<suffix>" per pair, then the separator row. */
static void grid_header(cli_sb_t *md, const set_t *masks, const dset_t *ns, const char *suffix) {
  for (size_t mi = 0; mi < masks->n; mi++)
    for (size_t ni = 0; ni < ns->n; ni++)
      cli_sb_printf(md, " %s %.0f%s |", masks->v[mi], ns->v[ni], suffix);
  cli_sb_printf(md, "\n| --- |");
  for (size_t i = 0; i < masks->n * ns->n; i++)
    cli_sb_printf(md, " --- |");
  cli_sb_printf(md, "\n");
}

typedef struct {
  int have_gnuplot, have_scripts;
  char gnuplot[4096], plots[4096];
  const char *out;
  int nplots, nfailed;
} plotter_t;

/* Run gnuplot on vars (written to OUT/name.vars.gp) then the script, for
   the PNG and the SVG. Returns 1 when both images exist. */
static int draw(plotter_t *pl, const char *script, const char *name, const char *vars) {
  char varsfile[4300], scr[4300], logf[4300];
  int ok = 1;
  if (!pl->have_gnuplot || !pl->have_scripts) return 0;
  snprintf(scr, sizeof scr, "%s/%s", pl->plots, script);
  if (access(scr, R_OK) != 0) return 0;
  snprintf(logf, sizeof logf, "%s/gnuplot.log", pl->out);
  for (int k = 0; k < 2; k++) {
    const char *ext = k ? "svg" : "png";
    cli_sb_t sb = {0};
    char img[4300];
    pid_t pid;
    int st = 0;
    snprintf(img, sizeof img, "%s/%s.%s", pl->out, name, ext);
    snprintf(varsfile, sizeof varsfile, "%s/%s.%s.vars.gp", pl->out, name, ext);
    cli_sb_printf(&sb, "# attnacc report: variables for %s\n%sout = '%s'\n", script, vars, img);
    if (sb.oom || aa_file_write(varsfile, sb.buf, sb.len, NULL) != AA_OK) {
      cli_sb_free(&sb);
      return 0;
    }
    cli_sb_free(&sb);
    remove(img);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
      FILE *lf = freopen(logf, "a", stderr);
      (void)lf;
      if (freopen("/dev/null", "w", stdout) == NULL) _exit(127);
      execl(pl->gnuplot, pl->gnuplot, varsfile, scr, (char *)NULL);
      _exit(127);
    }
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || access(img, R_OK) != 0)
      ok = 0;
    else
      remove(varsfile);
  }
  pl->nplots++;
  if (!ok) pl->nfailed++;
  return ok;
}

/* gnuplot single-quoted string: ' doubled. */
static void gp_str(cli_sb_t *sb, const char *name, const char *v) {
  cli_sb_printf(sb, "%s = '", name);
  for (const char *p = v; *p; p++)
    cli_sb_printf(sb, *p == '\'' ? "''" : "%c", *p);
  cli_sb_printf(sb, "'\n");
}

/* ---- provenance of a results folder ---- */
typedef struct {
  char experiment[64], grid[40], version[96];
  char recipes[2048];    /* "name [hash]", ... with gnuplot line breaks */
  char recipes_md[2048]; /* the same on one line */
  char seeds[256];
  char caption[1024];
} prov_t;

static void json_field(char *out, size_t cap, const char *json, const char *key) {
  char pat[80];
  const char *p;
  out[0] = '\0';
  if (json == NULL) return;
  snprintf(pat, sizeof pat, "\"%s\": \"", key);
  if ((p = strstr(json, pat)) == NULL) return;
  p += strlen(pat);
  size_t k = 0;
  while (*p && *p != '"' && k + 1 < cap)
    out[k++] = *p++;
  out[k] = '\0';
}

static void provenance(prov_t *pv, const char *dir, const xp_csv_t *c) {
  char path[4200], git[64] = "", ver[64] = "";
  char *meta;
  int cr = xp_csv_col(c, "recipe"), ch = xp_csv_col(c, "recipe_hash"), cs = xp_csv_col(c, "seed"),
      cv = xp_csv_col(c, "version");
  set_t rec = {{0}, 0}, vers = {{0}, 0};
  dset_t seeds = {{0}, 0};
  size_t used = 0;
  memset(pv, 0, sizeof *pv);
  snprintf(path, sizeof path, "%s/meta.json", dir);
  meta = xp_slurp(path, NULL);
  json_field(pv->experiment, sizeof pv->experiment, meta, "experiment");
  json_field(pv->grid, sizeof pv->grid, meta, "grid_hash");
  json_field(ver, sizeof ver, meta, "version");
  json_field(git, sizeof git, meta, "git");
  free(meta);
  for (size_t r = 0; r < c->nrows; r++) {
    size_t before = rec.n;
    int i = set_add(&rec, xp_csv_cell(c, r, cr));
    if (i >= 0 && rec.n > before) {
      /* a line break every four recipes keeps the plot captions inside the image */
      used += (size_t)snprintf(pv->recipes + used, used < sizeof pv->recipes ? sizeof pv->recipes - used : 0,
                               "%s%s [%.8s]",
                               i == 0  ? ""
                               : i % 4 ? ", "
                                       : ",\\n",
                               xp_csv_cell(c, r, cr), xp_csv_cell(c, r, ch));
      if (used >= sizeof pv->recipes) used = sizeof pv->recipes - 1;
    }
    if (cv >= 0) set_add(&vers, xp_csv_cell(c, r, cv));
    if (cs >= 0) dset_add(&seeds, xp_csv_num(xp_csv_cell(c, r, cs)));
  }
  {
    size_t k = 0;
    for (const char *p = pv->recipes; *p && k + 1 < sizeof pv->recipes_md; p++) {
      if (p[0] == '\\' && p[1] == 'n') {
        p++;
        pv->recipes_md[k++] = ' ';
        continue;
      }
      pv->recipes_md[k++] = *p;
    }
    pv->recipes_md[k] = '\0';
  }
  if (vers.n > 0)
    snprintf(pv->version, sizeof pv->version, "%s%s", vers.v[0], vers.n > 1 ? " (and others)" : "");
  else
    snprintf(pv->version, sizeof pv->version, "%s+%s", ver, git);
  if (seeds.n > 0)
    snprintf(pv->seeds, sizeof pv->seeds, "%g..%g (%zu seed(s); input streams from aa_cell_seed, column input_seed)",
             seeds.v[0], seeds.v[seeds.n - 1], seeds.n);
  else
    snprintf(pv->seeds, sizeof pv->seeds, "-");
  snprintf(pv->caption, sizeof pv->caption,
           "attnacc %.90s, %.60s (%.200s), seeds %g..%g, grid %.12s\\nrecipes [text hash]: %.500s", pv->version,
           pv->experiment[0] ? pv->experiment : "sweep", dir, seeds.n ? seeds.v[0] : 0,
           seeds.n ? seeds.v[seeds.n - 1] : 0, pv->grid, pv->recipes);
}

static void prov_md(cli_sb_t *md, const prov_t *pv, const char *dir) {
  cli_sb_printf(md, "- results: `%s/results.csv` (experiment `%s`, grid hash `%s`)\n", dir,
                pv->experiment[0] ? pv->experiment : "?", pv->grid[0] ? pv->grid : "?");
  cli_sb_printf(md,
                "- version: attnacc %s\n- seeds: %s\n- recipes [first 8 hex of the recipe text hash; full texts in "
                "meta.json]: %s\n\n",
                pv->version, pv->seeds, pv->recipes_md);
}

/* ---- table4-shaped sweeps ---- */
static const char *const tensors[4] = {"o", "dq", "dk", "dv"};

typedef struct {
  double sum, max, ma_max;
  size_t k;
  int fail, nonfinite, err;
  double fa_worst; /* worst max_abs / naive max_abs over seeds */
} agg_t;

static void section_table4(cli_sb_t *md, plotter_t *pl, const char *dir, const char *tag, const xp_csv_t *c) {
  int cr = xp_csv_col(c, "recipe"), cn = xp_csv_col(c, "n"), cm = xp_csv_col(c, "mask"), ct = xp_csv_col(c, "tensor"),
      cl = xp_csv_col(c, "rel_l2"), cp = xp_csv_col(c, "pass"), cna = xp_csv_col(c, "nan"), ci = xp_csv_col(c, "inf"),
      cmx = xp_csv_col(c, "max_abs"), cs = xp_csv_col(c, "seed"), cso = xp_csv_col(c, "seconds_oracle"),
      cse = xp_csv_col(c, "seconds_emul"), cer = xp_csv_col(c, "error");
  set_t rec = {{0}, 0}, masks = {{0}, 0};
  dset_t ns = {{0}, 0}, seeds = {{0}, 0};
  agg_t *ag;
  double *naive, *tor, *tem;
  size_t *kor, *kem;
  prov_t pv;
  int naive_i;
  char b1[32], b2[32];

  provenance(&pv, dir, c);
  set_add(&masks, "dense");
  set_add(&masks, "causal");
  for (size_t r = 0; r < c->nrows; r++) {
    set_add(&rec, xp_csv_cell(c, r, cr));
    set_add(&masks, xp_csv_cell(c, r, cm));
    dset_add(&ns, xp_csv_num(xp_csv_cell(c, r, cn)));
    dset_add(&seeds, xp_csv_num(xp_csv_cell(c, r, cs)));
  }
  size_t R = rec.n, M = masks.n, N = ns.n, S = seeds.n ? seeds.n : 1;
#define IX(ri, mi, ni, ti) ((((ri)*M + (mi)) * N + (ni)) * 4 + (ti))
  ag = calloc(R * M * N * 4, sizeof *ag);
  naive = calloc(M * N * S * 4, sizeof *naive);
  tor = calloc(M * N, sizeof *tor);
  tem = calloc(R * M * N, sizeof *tem);
  kor = calloc(M * N, sizeof *kor);
  kem = calloc(R * M * N, sizeof *kem);
  if (!ag || !naive || !tor || !tem || !kor || !kem) goto done;
  naive_i = set_find(&rec, "naive-bf16");
  for (size_t i = 0; i < M * N * S * 4; i++)
    naive[i] = NAN;
  /* pass 1: naive-bf16's max_abs per (mask, n, seed, tensor) for the fa rule */
  for (size_t r = 0; r < c->nrows; r++) {
    int ri = set_find(&rec, xp_csv_cell(c, r, cr)), mi = set_find(&masks, xp_csv_cell(c, r, cm)),
        ni = dset_find(&ns, xp_csv_num(xp_csv_cell(c, r, cn))),
        si = dset_find(&seeds, xp_csv_num(xp_csv_cell(c, r, cs))), ti = -1;
    for (int t = 0; t < 4; t++)
      if (strcmp(xp_csv_cell(c, r, ct), tensors[t]) == 0) ti = t;
    if (ri < 0 || mi < 0 || ni < 0 || ti < 0) continue;
    if (si < 0) si = 0;
    if (ri == naive_i) naive[((mi * N + ni) * S + si) * 4 + ti] = xp_csv_num(xp_csv_cell(c, r, cmx));
  }
  for (size_t i = 0; i < R * M * N * 4; i++)
    ag[i].fa_worst = NAN;
  for (size_t r = 0; r < c->nrows; r++) {
    int ri = set_find(&rec, xp_csv_cell(c, r, cr)), mi = set_find(&masks, xp_csv_cell(c, r, cm)),
        ni = dset_find(&ns, xp_csv_num(xp_csv_cell(c, r, cn))),
        si = dset_find(&seeds, xp_csv_num(xp_csv_cell(c, r, cs))), ti = -1;
    for (int t = 0; t < 4; t++)
      if (strcmp(xp_csv_cell(c, r, ct), tensors[t]) == 0) ti = t;
    if (ri < 0 || mi < 0 || ni < 0 || ti < 0) continue;
    if (si < 0) si = 0;
    agg_t *a = &ag[IX(ri, mi, ni, ti)];
    double e = xp_csv_num(xp_csv_cell(c, r, cl)), mx = xp_csv_num(xp_csv_cell(c, r, cmx)),
           nv = naive[((mi * N + ni) * S + si) * 4 + ti];
    a->k++;
    if (xp_csv_cell(c, r, cer)[0] != '\0') a->err = 1;
    if (!isnan(e)) {
      a->sum += e;
      if (!(e <= a->max)) a->max = e;
    }
    if (xp_csv_num(xp_csv_cell(c, r, cp)) != 1) a->fail = 1;
    if (xp_csv_num(xp_csv_cell(c, r, cna)) > 0 || xp_csv_num(xp_csv_cell(c, r, ci)) > 0) a->nonfinite = 1;
    if (!isnan(nv)) {
      double ratio = mx == 0 && nv == 0 ? 0 : mx / nv;
      if (isnan(a->fa_worst) || ratio > a->fa_worst || isnan(ratio)) a->fa_worst = ratio;
    }
    if (ti == 0) {
      tem[(ri * M + mi) * N + ni] += xp_csv_num(xp_csv_cell(c, r, cse));
      kem[(ri * M + mi) * N + ni]++;
      if (ri == 0) {
        tor[mi * N + ni] += xp_csv_num(xp_csv_cell(c, r, cso));
        kor[mi * N + ni]++;
      }
    }
  }

  cli_sb_printf(md, "## Accuracy grid `%s` (the shape of the paper's Table 4)\n\n", tag);
  prov_md(md, &pv, dir);
  cli_sb_printf(md,
                "Inputs q, k, v, dO are N(0,1) rounded to BF16, one head per cell (d = %s), %zu seed%s per "
                "length and mask; errors are against the MPFR-certified oracle. o is the forward output, dq, dk, "
                "dv the backward gradients.\n\n",
                xp_csv_col(c, "d") >= 0 ? xp_csv_cell(c, 0, xp_csv_col(c, "d")) : "?", S, S > 1 ? "s" : "");

  /* pass rule */
  cli_sb_printf(md, "### Pass rule |a - b| <= 0.01 + 0.01 |b| on every element of o, dq, dk, dv\n\n| recipe |");
  grid_header(md, &masks, &ns, "");
  for (size_t ri = 0; ri < R; ri++) {
    cli_sb_printf(md, "| %s |", rec.v[ri]);
    for (size_t mi = 0; mi < M; mi++)
      for (size_t ni = 0; ni < N; ni++) {
        char what[64] = "";
        size_t used = 0, k = 0;
        for (int t = 0; t < 4; t++) {
          k += ag[IX(ri, mi, ni, t)].k;
          if (ag[IX(ri, mi, ni, t)].fail)
            used += (size_t)snprintf(what + used, sizeof what - used, "%s%s", used ? "," : "", tensors[t]);
        }
        cli_sb_printf(md, " %s |", k == 0 ? "-" : used ? "FAIL " : "pass");
        if (used) {
          md->len -= 2;
          cli_sb_printf(md, "%s |", what);
        }
      }
    cli_sb_printf(md, "\n");
  }
  cli_sb_printf(md, "| *published (seed 003)* |");
  for (size_t i = 0; i < M * N; i++)
    cli_sb_printf(md, " pass |");
  cli_sb_printf(md, "\n\nThe paper reports that every output and gradient meets this rule at all six lengths "
                    "(1024..32768), dense and causal.\n\n");

  /* rel_l2 per tensor */
  for (int t = 0; t < 4; t++) {
    cli_sb_printf(md, "### rel_l2 of %s (%s)\n\n| recipe | mask |", tensors[t],
                  S > 1 ? "mean over seeds; max in brackets" : "one seed");
    for (size_t ni = 0; ni < N; ni++)
      cli_sb_printf(md, " %.0f |", ns.v[ni]);
    if (t == 1) cli_sb_printf(md, " published, 32768 dense |");
    cli_sb_printf(md, "\n| --- | --- |");
    for (size_t ni = 0; ni < N + (t == 1); ni++)
      cli_sb_printf(md, " --- |");
    cli_sb_printf(md, "\n");
    for (size_t ri = 0; ri < R; ri++)
      for (size_t mi = 0; mi < M; mi++) {
        size_t any = 0;
        for (size_t ni = 0; ni < N; ni++)
          any += ag[IX(ri, mi, ni, t)].k;
        if (!any) continue;
        cli_sb_printf(md, "| %s | %s |", rec.v[ri], masks.v[mi]);
        for (size_t ni = 0; ni < N; ni++) {
          agg_t *a = &ag[IX(ri, mi, ni, t)];
          fmt_e(b1, sizeof b1, a->k ? a->sum / (double)a->k : NAN);
          fmt_e(b2, sizeof b2, a->k ? a->max : NAN);
          if (a->k > 1)
            cli_sb_printf(md, " %s [%s]%s |", b1, b2, a->nonfinite ? " (NaN/Inf)" : "");
          else
            cli_sb_printf(md, " %s%s |", b1, a->nonfinite ? " (NaN/Inf)" : a->err ? " (refused)" : "");
        }
        if (t == 1) cli_sb_printf(md, " |");
        cli_sb_printf(md, "\n");
      }
    if (t == 1) {
      cli_sb_printf(md, "| *paper's kernel (seed 003)* | dense |");
      for (size_t ni = 0; ni < N; ni++)
        cli_sb_printf(md, " |");
      cli_sb_printf(md, " 1.47e-2 |\n| *FA4 (seed 003)* | dense |");
      for (size_t ni = 0; ni < N; ni++)
        cli_sb_printf(md, " |");
      cli_sb_printf(md, " 2.37e-3 |\n");
    }
    cli_sb_printf(md, "\n");
    if (t == 1) {
      int n32 = dset_find(&ns, 32768), nmax = (int)N - 1, di = set_find(&masks, "dense");
      cli_sb_printf(md,
                    "**Dense dQ rel_l2 at 32768 tokens, ours beside the published numbers** (seed 003: %.3g for "
                    "the paper's kernel, %.3g for FA4):\n\n",
                    PUB_DQ_PAPER, PUB_DQ_FA4);
      if (n32 < 0 && N > 0)
        cli_sb_printf(md,
                      "This sweep stops at n = %.0f (the full grid, without --quick, reaches 32768); the largest "
                      "length run is shown instead.\n\n",
                      ns.v[nmax]);
      cli_sb_printf(md, "| recipe | n | dense dQ rel_l2 | / FA4's 2.37e-3 | / paper's 1.47e-2 |\n| --- | --- | --- | "
                        "--- | --- |\n");
      for (size_t ri = 0; ri < R && di >= 0 && N > 0; ri++) {
        int ni = n32 >= 0 ? n32 : nmax;
        agg_t *a = &ag[IX(ri, (size_t)di, (size_t)ni, 1)];
        double e = a->k ? a->sum / (double)a->k : NAN;
        fmt_e(b1, sizeof b1, e);
        cli_sb_printf(md, "| %s | %.0f | %s | %.2f | %.2f |\n", rec.v[ri], ns.v[ni], b1, e / PUB_DQ_FA4,
                      e / PUB_DQ_PAPER);
      }
      cli_sb_printf(md, "| *paper's kernel (published)* | 32768 | 1.47e-2 | 6.20 | 1.00 |\n| *FA4 (published)* | "
                        "32768 | 2.37e-3 | 1.00 | 0.16 |\n\n");
    }
  }

  /* flash-attention rule */
  if (naive_i >= 0) {
    cli_sb_printf(md, "### Flash-attention test rule: worst max_abs / naive-bf16's max_abs (limit 2 for o, 3 for the "
                      "gradients; worst over tensors and seeds, as a fraction of the limit)\n\n| recipe | mask |");
    for (size_t ni = 0; ni < N; ni++)
      cli_sb_printf(md, " %.0f |", ns.v[ni]);
    cli_sb_printf(md, "\n| --- | --- |");
    for (size_t ni = 0; ni < N; ni++)
      cli_sb_printf(md, " --- |");
    cli_sb_printf(md, "\n");
    for (size_t ri = 0; ri < R; ri++) {
      if ((int)ri == naive_i) continue;
      for (size_t mi = 0; mi < M; mi++) {
        size_t any = 0;
        for (size_t ni = 0; ni < N; ni++)
          any += ag[IX(ri, mi, ni, 0)].k;
        if (!any) continue;
        cli_sb_printf(md, "| %s | %s |", rec.v[ri], masks.v[mi]);
        for (size_t ni = 0; ni < N; ni++) {
          double w = NAN;
          for (int t = 0; t < 4; t++) {
            double f = ag[IX(ri, mi, ni, t)].fa_worst / (t == 0 ? 2.0 : 3.0);
            if (isnan(w) || f > w || isnan(f)) w = f;
          }
          if (isnan(w))
            cli_sb_printf(md, " - |");
          else
            cli_sb_printf(md, " %.3g %s |", w, w <= 1 ? "pass" : "FAIL");
        }
        cli_sb_printf(md, "\n");
      }
    }
    cli_sb_printf(md, "\n");
  }

  /* timings */
  cli_sb_printf(md, "### Where the time goes (seconds per cell, mean; the oracle once per cell, shared by every "
                    "recipe)\n\n| mask | n | oracle |");
  for (size_t ri = 0; ri < R; ri++)
    cli_sb_printf(md, " %s |", rec.v[ri]);
  cli_sb_printf(md, "\n| --- | --- | --- |");
  for (size_t ri = 0; ri < R; ri++)
    cli_sb_printf(md, " --- |");
  cli_sb_printf(md, "\n");
  for (size_t mi = 0; mi < M; mi++)
    for (size_t ni = 0; ni < N; ni++) {
      if (!kor[mi * N + ni]) continue;
      cli_sb_printf(md, "| %s | %.0f | %.3g |", masks.v[mi], ns.v[ni], tor[mi * N + ni] / (double)kor[mi * N + ni]);
      for (size_t ri = 0; ri < R; ri++) {
        size_t k = kem[(ri * M + mi) * N + ni];
        if (k)
          cli_sb_printf(md, " %.3g |", tem[(ri * M + mi) * N + ni] / (double)k);
        else
          cli_sb_printf(md, " - |");
      }
      cli_sb_printf(md, "\n");
    }
  {
    /* Seconds of the grid as run, and extrapolated to n = 32768 from the
       largest length run (the oracle and the emulation grow like n^2). */
    double run_s = 0, full_s = 0;
    for (size_t mi = 0; mi < M; mi++)
      for (size_t ni = 0; ni < N; ni++) {
        double cell_s;
        if (!kor[mi * N + ni]) continue;
        cell_s = tor[mi * N + ni] / (double)kor[mi * N + ni];
        for (size_t ri = 0; ri < R; ri++)
          if (kem[(ri * M + mi) * N + ni])
            cell_s += tem[(ri * M + mi) * N + ni] / (double)kem[(ri * M + mi) * N + ni];
        run_s += cell_s * (double)S;
        if (ni == N - 1)
          for (double n2 = 2 * ns.v[ni]; n2 <= 32768; n2 *= 2)
            full_s += cell_s * (double)S * (n2 / ns.v[ni]) * (n2 / ns.v[ni]);
      }
    cli_sb_printf(md, "\nThis grid took about %.0f s of cell time (sum over cells, one at a time)", run_s);
    if (full_s > 0)
      cli_sb_printf(md,
                    "; the lengths up to 32768 would add about %.0f s (%.1f h), scaling the largest length run by "
                    "n^2 (measured under the load of this run)",
                    full_s, full_s / 3600);
    cli_sb_printf(md, ".\n");
  }
  cli_sb_printf(md, "\nA cached oracle (a rerun over the same fixtures) shows the time to read it back. The oracle "
                    "and the emulation grow like n^2 (causal about half).\n\n");

  /* plots */
  for (int t = 0; t < 4; t++) {
    cli_sb_t dat = {0}, vars = {0};
    char name[128], datname[160], titles[4096] = "", pub[200] = "";
    size_t used = 0, nb = 0;
    snprintf(name, sizeof name, "%.100s_%s", tag, tensors[t]);
    snprintf(datname, sizeof datname, "%s.dat", name);
    cli_sb_printf(&dat, "# attnacc report: %s rel_l2 against n; %s; blocks: recipe/mask; columns n mean max\n",
                  tensors[t], pv.version);
    for (size_t ri = 0; ri < R; ri++)
      for (size_t mi = 0; mi < M; mi++) {
        size_t any = 0;
        for (size_t ni = 0; ni < N; ni++)
          any += ag[IX(ri, mi, ni, t)].k;
        if (!any) continue;
        if (nb) cli_sb_printf(&dat, "\n\n");
        cli_sb_printf(&dat, "# %s/%s\n", rec.v[ri], masks.v[mi]);
        for (size_t ni = 0; ni < N; ni++) {
          agg_t *a = &ag[IX(ri, mi, ni, t)];
          double e = a->k ? a->sum / (double)a->k : NAN;
          /* log scale: zero, NaN and Inf points are left out of the line */
          if (a->k && e > 0 && isfinite(e)) cli_sb_printf(&dat, "%.0f %.17g %.17g\n", ns.v[ni], e, a->max);
        }
        if (used < sizeof titles)
          used +=
              (size_t)snprintf(titles + used, sizeof titles - used, "%s%s/%s", nb ? " " : "", rec.v[ri], masks.v[mi]);
        nb++;
      }
    if (nb == 0 || dat.oom || write_file(pl->out, datname, &dat) != AA_OK) {
      cli_sb_free(&dat);
      continue;
    }
    cli_sb_free(&dat);
    if (t == 1) {
      cli_sb_t pd = {0};
      cli_sb_printf(&pd,
                    "# published dense dQ rel_l2 at 32768 (seed 003)\n32768 %g \"paper's kernel 1.47e-2\"\n"
                    "32768 %g \"FA4 2.37e-3\"\n",
                    PUB_DQ_PAPER, PUB_DQ_FA4);
      snprintf(pub, sizeof pub, "%s/%s_published.dat", pl->out, tag);
      {
        char pn[200];
        snprintf(pn, sizeof pn, "%s_published.dat", tag);
        write_file(pl->out, pn, &pd);
      }
      cli_sb_free(&pd);
    }
    {
      char dp[4300];
      snprintf(dp, sizeof dp, "%s/%s", pl->out, datname);
      gp_str(&vars, "datafile", dp);
    }
    cli_sb_printf(&vars, "nblocks = %zu\n", nb);
    {
      char xt[1024] = "";
      size_t ux = 0;
      for (size_t ni = 0; ni < N && ux < sizeof xt; ni++)
        ux += (size_t)snprintf(xt + ux, sizeof xt - ux, "%s%.0f", ni ? ", " : "", ns.v[ni]);
      if (ux < sizeof xt && dset_find(&ns, 32768) < 0 && t == 1) snprintf(xt + ux, sizeof xt - ux, ", 32768");
      gp_str(&vars, "xtics", xt);
    }
    gp_str(&vars, "titles", titles);
    gp_str(&vars, "tensor", tensors[t]);
    gp_str(&vars, "pubfile", pub);
    cli_sb_printf(&vars, "caption = \"%s\"\n", pv.caption);
    if (draw(pl, "table4.gp", name, vars.buf ? vars.buf : ""))
      cli_sb_printf(md,
                    "![%s rel_l2 against n](%s.png)\n\n*Figure: rel_l2 of %s against n, one line per recipe "
                    "(solid dense, dashed causal)%s; %s; SVG: [%s.svg](%s.svg), data: [%s](%s).*\n\n",
                    tensors[t], name, tensors[t], t == 1 ? ", black dots: the published dense dQ at 32768" : "",
                    pv.version, name, name, datname, datname);
    cli_sb_free(&vars);
  }
done:
  free(ag);
  free(naive);
  free(tor);
  free(tem);
  free(kor);
  free(kem);
#undef IX
}

/* ---- nanmap sweeps ---- */
static int nan_class(const xp_csv_t *c, size_t r, int cp, int cna, int ci, int cer) {
  if (xp_csv_cell(c, r, cer)[0] != '\0') return 4;
  if (xp_csv_num(xp_csv_cell(c, r, cna)) > 0) return 3;
  if (xp_csv_num(xp_csv_cell(c, r, ci)) > 0) return 2;
  if (xp_csv_num(xp_csv_cell(c, r, cp)) != 1) return 1;
  return 0;
}

static void section_nanmap(cli_sb_t *md, plotter_t *pl, const char *dir, const char *tag, const xp_csv_t *c) {
  int cr = xp_csv_col(c, "recipe"), cn = xp_csv_col(c, "n"), cm = xp_csv_col(c, "mask"),
      cg = xp_csv_col(c, "log2_sigma"), cp = xp_csv_col(c, "pass"), cna = xp_csv_col(c, "nan"),
      ci = xp_csv_col(c, "inf"), cer = xp_csv_col(c, "error"), cov = xp_csv_col(c, "ref_overflow"),
      ct = xp_csv_col(c, "tensor");
  set_t rec = {{0}, 0}, masks = {{0}, 0};
  dset_t ns = {{0}, 0}, sg = {{0}, 0};
  int *cls, *ov;
  prov_t pv;
  provenance(&pv, dir, c);
  for (size_t r = 0; r < c->nrows; r++) {
    set_add(&rec, xp_csv_cell(c, r, cr));
    set_add(&masks, xp_csv_cell(c, r, cm));
    dset_add(&ns, xp_csv_num(xp_csv_cell(c, r, cn)));
    dset_add(&sg, xp_csv_num(xp_csv_cell(c, r, cg)));
  }
  size_t R = rec.n, M = masks.n, N = ns.n, G = sg.n;
  cls = calloc(R * M * N * G, sizeof *cls);
  ov = calloc(R * M * N * G, sizeof *ov);
  if (!cls || !ov) goto done;
  for (size_t i = 0; i < R * M * N * G; i++)
    cls[i] = -1;
#define NX(ri, mi, ni, gi) ((((ri)*M + (mi)) * N + (ni)) * G + (gi))
  for (size_t r = 0; r < c->nrows; r++) {
    int ri = set_find(&rec, xp_csv_cell(c, r, cr)), mi = set_find(&masks, xp_csv_cell(c, r, cm)),
        ni = dset_find(&ns, xp_csv_num(xp_csv_cell(c, r, cn))),
        gi = dset_find(&sg, xp_csv_num(xp_csv_cell(c, r, cg)));
    if (ri < 0 || mi < 0 || ni < 0 || gi < 0) continue;
    int k = nan_class(c, r, cp, cna, ci, cer);
    size_t ix = NX(ri, mi, ni, gi);
    if (k > cls[ix]) cls[ix] = k;
    if (xp_csv_num(xp_csv_cell(c, r, cov)) > 0) ov[ix] = 1;
  }
  (void)ct;
  cli_sb_printf(md, "## NaN / Inf / overflow map `%s`\n\n", tag);
  prov_md(md, &pv, dir);
  cli_sb_printf(md,
                "Inputs sigma * N(0,1) rounded to BF16 (sigma = 2^log2_sigma, d = %s). Each entry gives, for "
                "one recipe, mask and length, the smallest log2 sigma at which the pass rule fails on some output, "
                "at which an Inf or NaN appears, and at which the exact result itself overflows BF16 (worst over "
                "o, dq, dk, dv and seeds; '-' never on this grid).\n\n| recipe |",
                xp_csv_col(c, "d") >= 0 ? xp_csv_cell(c, 0, xp_csv_col(c, "d")) : "?");
  grid_header(md, &masks, &ns, ": fail / Inf-NaN / exact overflow");
  for (size_t ri = 0; ri < R; ri++) {
    cli_sb_printf(md, "| %s |", rec.v[ri]);
    for (size_t mi = 0; mi < M; mi++)
      for (size_t ni = 0; ni < N; ni++) {
        double f = NAN, nf = NAN, o = NAN;
        for (size_t gi = 0; gi < G; gi++) {
          int k = cls[NX(ri, mi, ni, gi)];
          if (k >= 1 && isnan(f)) f = sg.v[gi];
          if (k >= 2 && isnan(nf)) nf = sg.v[gi];
          if (ov[NX(ri, mi, ni, gi)] && isnan(o)) o = sg.v[gi];
        }
        char a[16] = "-", b[16] = "-", d[16] = "-";
        if (!isnan(f)) snprintf(a, sizeof a, "%.0f", f);
        if (!isnan(nf)) snprintf(b, sizeof b, "%.0f", nf);
        if (!isnan(o)) snprintf(d, sizeof d, "%.0f", o);
        cli_sb_printf(md, " %s / %s / %s |", a, b, d);
      }
    cli_sb_printf(md, "\n");
  }
  cli_sb_printf(md, "\n");
  {
    cli_sb_t dat = {0}, od = {0}, vars = {0};
    char name[128], dp[4300], op[4300], xt[4096] = "", yt[8192] = "", panels[512] = "";
    size_t ux = 0, uy = 0, up = 0;
    snprintf(name, sizeof name, "%.100s_map", tag);
    for (size_t mi = 0; mi < M; mi++) {
      if (mi) {
        cli_sb_printf(&dat, "\n\n");
        cli_sb_printf(&od, "\n\n");
      }
      cli_sb_printf(&dat, "# %s: x (log2 sigma index) y (recipe, n index) class\n", masks.v[mi]);
      cli_sb_printf(&od, "# %s: cells whose exact result overflows BF16\n", masks.v[mi]);
      int any = 0;
      for (size_t ri = 0; ri < R; ri++)
        for (size_t ni = 0; ni < N; ni++)
          for (size_t gi = 0; gi < G; gi++) {
            size_t ix = NX(ri, mi, ni, gi);
            cli_sb_printf(&dat, "%zu %zu %d\n", gi, ri * N + ni, cls[ix] < 0 ? 4 : cls[ix]);
            if (ov[ix]) {
              cli_sb_printf(&od, "%zu %zu\n", gi, ri * N + ni);
              any = 1;
            }
          }
      if (!any) cli_sb_printf(&od, "-1 -1\n");
      if (up < sizeof panels)
        up += (size_t)snprintf(panels + up, sizeof panels - up, "%s%s", mi ? " " : "", masks.v[mi]);
    }
    for (size_t gi = 0; gi < G && ux < sizeof xt; gi++)
      ux += (size_t)snprintf(xt + ux, sizeof xt - ux, "%s\"%.0f\" %zu", gi ? ", " : "", sg.v[gi], gi);
    for (size_t ri = 0; ri < R; ri++)
      for (size_t ni = 0; ni < N && uy < sizeof yt; ni++)
        uy += (size_t)snprintf(yt + uy, sizeof yt - uy, "%s\"%s n=%.0f\" %zu", ri + ni ? ", " : "", rec.v[ri],
                               ns.v[ni], ri * N + ni);
    snprintf(dp, sizeof dp, "%s/%s.dat", pl->out, name);
    snprintf(op, sizeof op, "%s/%s_overflow.dat", pl->out, name);
    if (!dat.oom && !od.oom && aa_file_write(dp, dat.buf, dat.len, NULL) == AA_OK &&
        aa_file_write(op, od.buf, od.len, NULL) == AA_OK) {
      gp_str(&vars, "datafile", dp);
      gp_str(&vars, "ovfile", op);
      cli_sb_printf(&vars, "npanels = %zu\nnx = %zu\nny = %zu\n", M, G, R * N);
      gp_str(&vars, "panels", panels);
      gp_str(&vars, "xtic", xt);
      gp_str(&vars, "ytic", yt);
      cli_sb_printf(&vars, "caption = \"%s\"\n", pv.caption);
      if (draw(pl, "nanmap.gp", name, vars.buf ? vars.buf : ""))
        cli_sb_printf(md,
                      "![NaN/Inf map](%s.png)\n\n*Figure: class of each cell (worst over o, dq, dk, dv and "
                      "seeds): green pass, yellow finite but failing the rule, orange Inf, red NaN, grey refused; "
                      "R: the exact result overflows BF16; %s; SVG: [%s.svg](%s.svg).*\n\n",
                      name, pv.version, name, name);
    }
    cli_sb_free(&dat);
    cli_sb_free(&od);
    cli_sb_free(&vars);
  }
done:
  free(cls);
  free(ov);
#undef NX
}

/* ---- table3 and the exp-ratio plot ---- */
/* From a table3 sweep folder (results.csv: label, spec, s_*) or an older
   table3.csv (construction, spec, s_*; provenance in its '#' line). */
static void section_table3(cli_sb_t *md, const char *path, const char *dir, const xp_csv_t *c) {
  static const char *const cols[5] = {"s_min_ratio", "s_max_ratio", "s_max_rel_err", "s_mean_rel_err", "s_nan"};
  int cl = xp_csv_col(c, "label") >= 0 ? xp_csv_col(c, "label") : xp_csv_col(c, "construction"),
      cs = xp_csv_col(c, "spec");
  cli_sb_printf(md, "## Packed BF16 exponential (the shape of the paper's Table 3)\n\n- results: `%s`\n", path);
  if (c->comment[0]) cli_sb_printf(md, "- provenance: `%s`\n", c->comment + (c->comment[0] == '#' ? 2 : 0));
  if (dir != NULL) {
    char mp[4200], ver[64] = "", git[64] = "", *meta;
    snprintf(mp, sizeof mp, "%s/meta.json", dir);
    meta = xp_slurp(mp, NULL);
    json_field(ver, sizeof ver, meta, "version");
    json_field(git, sizeof git, meta, "git");
    free(meta);
    if (c->nrows > 0)
      cli_sb_printf(md, "- provenance: attnacc %s (git %s); %s samples in [%s, %s] (seed %s, shift %s)%s\n", ver, git,
                    xp_csv_cell(c, 0, xp_csv_col(c, "samples")), xp_csv_cell(c, 0, xp_csv_col(c, "lo")),
                    xp_csv_cell(c, 0, xp_csv_col(c, "hi")), xp_csv_cell(c, 0, xp_csv_col(c, "seed")),
                    xp_csv_cell(c, 0, xp_csv_col(c, "shift")),
                    strcmp(xp_csv_cell(c, 0, xp_csv_col(c, "exhaustive")), "1") == 0
                        ? "; exhaustive columns in results.csv"
                        : "");
  }
  cli_sb_printf(md,
                "\n| construction | spec | sampled ratio min | max | max rel err | mean rel err | NaN |\n| --- | --- "
                "| --- | --- | --- | --- | --- |\n");
  for (size_t r = 0; r < c->nrows; r++) {
    if (strcmp(xp_csv_cell(c, r, cl), "published") == 0) continue;
    cli_sb_printf(md, "| %s | `%s` |", xp_csv_cell(c, r, cl), xp_csv_cell(c, r, cs));
    for (int k = 0; k < 5; k++) {
      double v = xp_csv_num(xp_csv_cell(c, r, xp_csv_col(c, cols[k])));
      if (k == 4 || isnan(v))
        cli_sb_printf(md, " %s |", xp_csv_cell(c, r, xp_csv_col(c, cols[k])));
      else
        cli_sb_printf(md, k < 2 ? " %.4f |" : " %.3e |", v);
    }
    cli_sb_printf(md, "\n");
  }
  cli_sb_printf(md,
                "| *published (seed 003)* | deployed shift | 1.0440 | 1.0687 | 6.93e-2 | 5.85e-2 | NaN at encoded "
                "exponents -127, -126.5 |\n\n");
}

/* The experiment named in DIR/meta.json ("" when none). */
static void meta_experiment(char *out, size_t cap, const char *dir) {
  char mp[4200], *meta;
  snprintf(mp, sizeof mp, "%s/meta.json", dir);
  meta = xp_slurp(mp, NULL);
  json_field(out, cap, meta, "experiment");
  free(meta);
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmpstr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int aa_cmd_report(int argc, char **argv) {
  const char *cmd = "report", *in, *out;
  cli_args_t a;
  aa_error_t err = {{0}};
  char outbuf[4096], *dirs[256], path[4300];
  size_t ndirs = 0, nsweeps = 0;
  int rc, status = 2, have_t3 = 0, have_t3sweep = 0;
  cli_sb_t md = {0};
  plotter_t pl;
  if ((rc = cli_args_parse(&a, cmd, "--in DIR [--out DIR]", description, opts, sizeof opts / sizeof opts[0], argc,
                           argv)) >= 0)
    return rc;
  if ((in = cli_get(&a, "in")) == NULL) {
    cli_error(cmd, "give --in DIR (a folder written by attnacc sweep, or a folder of them)");
    return 2;
  }
  if (!is_dir(in)) {
    cli_error(cmd, "--in: %s is not a folder", in);
    return 2;
  }
  if ((out = cli_get(&a, "out")) == NULL) {
    snprintf(outbuf, sizeof outbuf, "%s/report", in);
    out = outbuf;
  }
  /* the folders holding results: IN itself and its subfolders, sorted */
  snprintf(path, sizeof path, "%s/results.csv", in);
  if (is_file(path)) dirs[ndirs++] = strdup(in);
  {
    DIR *d = opendir(in);
    struct dirent *e;
    char *sub[256];
    size_t ns = 0;
    while (d && (e = readdir(d)) != NULL && ns < 256) {
      char p2[4300];
      if (e->d_name[0] == '.') continue;
      snprintf(p2, sizeof p2, "%s/%s/results.csv", in, e->d_name);
      if (is_file(p2)) {
        snprintf(p2, sizeof p2, "%s/%s", in, e->d_name);
        sub[ns++] = strdup(p2);
      }
    }
    if (d) closedir(d);
    qsort(sub, ns, sizeof *sub, cmpstr);
    for (size_t i = 0; i < ns && ndirs < 256; i++)
      dirs[ndirs++] = sub[i];
  }
  snprintf(path, sizeof path, "%s/table3.csv", in);
  have_t3 = is_file(path);
  if (ndirs == 0 && !have_t3) {
    cli_error(cmd, "no results.csv in %s or its subfolders, and no table3.csv (run attnacc sweep first)", in);
    goto out;
  }
  if ((rc = cli_check_out_dir(out, &err)) != AA_OK) { /* a file, /proc, a read-only folder: bad input */
    cli_error(cmd, "--out: %s", err.msg);
    status = rc == AA_ENOMEM ? 1 : 2;
    goto out;
  }
  if ((rc = aa_mkdir_p(out, &err)) != AA_OK) {
    cli_error(cmd, "--out: %s", err.msg);
    status = 1;
    goto out;
  }
  memset(&pl, 0, sizeof pl);
  pl.out = out;
  pl.have_gnuplot = find_gnuplot(pl.gnuplot, sizeof pl.gnuplot);
  pl.have_scripts = find_plots(pl.plots, sizeof pl.plots);
  {
    char lp[4300];
    snprintf(lp, sizeof lp, "%s/gnuplot.log", out);
    remove(lp);
  }

  cli_sb_printf(&md,
                "# attnacc accuracy report\n\nGenerated by attnacc %s (git %s) from `%s`. Every table and plot "
                "names the result file, its version and git hash, seeds and recipes (recipe text hashes; the "
                "full texts are in each folder's meta.json).\n\n",
                AA_VERSION, AA_GIT_HASH, in);
  if (!pl.have_gnuplot)
    cli_sb_printf(&md,
                  "> **No plots**: gnuplot was not found%s%s. The tables below are complete; to get the plots "
                  "install gnuplot (Debian/Ubuntu: `apt-get install gnuplot-nox`) and rerun `attnacc report`.\n\n",
                  pl.gnuplot[0] ? " at " : "", pl.gnuplot);
  else if (!pl.have_scripts)
    cli_sb_printf(&md,
                  "> **No plots**: the gnuplot scripts (plots/*.gp) were not found; set ATTNACC_PLOTS_DIR to the "
                  "plots/ folder of the source tree.\n\n");

  /* table4-shaped sweeps first, then the maps, then anything else */
  for (int pass = 0; pass < 4; pass++)
    for (size_t i = 0; i < ndirs; i++) {
      xp_csv_t c;
      int kind;
      char xname[64];
      const char *tag = strrchr(dirs[i], '/');
      char tagbuf[128];
      tag = tag ? tag + 1 : dirs[i];
      if (strcmp(dirs[i], in) == 0 || tag[0] == '\0') tag = "sweep";
      snprintf(tagbuf, sizeof tagbuf, "%s", tag);
      for (char *p = tagbuf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
          *p = '_';
      snprintf(path, sizeof path, "%s/results.csv", dirs[i]);
      if (xp_csv_read(&c, path) != 0) {
        cli_error(cmd, "%s: cannot read", path);
        continue;
      }
      meta_experiment(xname, sizeof xname, dirs[i]);
      kind = xp_csv_col(&c, "s_min_ratio") >= 0                                                         ? 3
             : xname[0] && strcmp(xname, "table4") && strcmp(xname, "nanmap") && strcmp(xname, "smoke") ? 2
             : xp_csv_col(&c, "log2_sigma") >= 0 && xp_csv_col(&c, "recipe") >= 0                       ? 1
             : xp_csv_col(&c, "n") >= 0 && xp_csv_col(&c, "mask") >= 0 && xp_csv_col(&c, "recipe") >= 0 &&
                     xp_csv_col(&c, "tensor") >= 0
                 ? 0
                 : 2;
      if (kind != pass) {
        xp_csv_free(&c);
        continue;
      }
      if (kind == 1) {
        section_nanmap(&md, &pl, dirs[i], tagbuf, &c);
        nsweeps++;
      } else if (kind == 0) {
        section_table4(&md, &pl, dirs[i], tagbuf, &c);
        nsweeps++;
      } else if (kind == 3) {
        section_table3(&md, path, dirs[i], &c);
        have_t3sweep = 1;
      } else if (xname[0]) {
        cli_sb_printf(&md,
                      "## `%s`\n\nA sweep of the %s experiment (%zu rows; `attnacc sweep --experiment %s --help` "
                      "describes its columns).\n\n",
                      path, xname, c.nrows, xname);
      } else {
        cli_sb_printf(&md, "## `%s`\n\nA results file of a shape this report does not know (%zu rows).\n\n", path,
                      c.nrows);
      }
      xp_csv_free(&c);
    }
  if (have_t3 && !have_t3sweep) {
    xp_csv_t c;
    snprintf(path, sizeof path, "%s/table3.csv", in);
    if (xp_csv_read(&c, path) == 0) {
      section_table3(&md, path, NULL, &c);
      xp_csv_free(&c);
    }
  }
  snprintf(path, sizeof path, "%s/expratio.csv", in);
  if (is_file(path)) {
    cli_sb_t vars = {0};
    gp_str(&vars, "file", path);
    cli_sb_printf(&md,
                  "## Exp ratio output / 2^x\n\n- data: `%s` (attnacc expmap --curve; its first line names "
                  "version and git hash)\n\n",
                  path);
    if (draw(&pl, "expratio.gp", "expratio", vars.buf ? vars.buf : ""))
      cli_sb_printf(&md, "![exp ratio](expratio.png)\n\n*Figure: output / 2^x per construction; bands: NaN, Inf, "
                         "negative or zero outputs; SVG: [expratio.svg](expratio.svg).*\n\n");
    else if (pl.have_gnuplot)
      cli_sb_printf(&md, "(the exp-ratio plot could not be drawn; see gnuplot.log)\n\n");
    cli_sb_free(&vars);
  }
  if (pl.nfailed > 0)
    cli_sb_printf(&md, "> %d of %d plots failed; gnuplot's messages are in gnuplot.log.\n", pl.nfailed, pl.nplots);
  if (md.oom) {
    cli_error(cmd, "out of memory");
    status = 1;
    goto out;
  }
  snprintf(path, sizeof path, "%s/report.md", out);
  if ((rc = aa_file_write(path, md.buf, md.len, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    status = 1;
    goto out;
  }
  if (!pl.have_gnuplot)
    fprintf(stderr, "attnacc report: gnuplot not found: tables only (install it: apt-get install gnuplot-nox)\n");
  printf("%s\n", path);
  status = fflush(stdout) == 0 ? 0 : 1;
out:
  cli_sb_free(&md);
  for (size_t i = 0; i < ndirs; i++)
    free(dirs[i]);
  return status;
}
