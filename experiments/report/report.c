/* attnacc: the `report` command: reads sweep result folders, aggregates them, and writes report.md (summary first)
 * with gnuplot plots. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "config.h"
#include "report/report.h"

static const cli_opt_t opts[] = {
    {"in", "DIR", NULL, "folder with results: a sweep folder, or a folder of them (and expratio.csv)"},
    {"out", "DIR", "IN/report", "where report.md, the plots (PNG and SVG) and their data go"},
};

static const char description[] =
    "Read every results.csv of DIR and of its immediate subfolders (written by attnacc sweep,\n"
    "with meta.json; an older DIR/table3.csv is read too) and DIR/expratio.csv (attnacc\n"
    "expmap --curve), and write OUT/report.md. It opens with a summary: which recipes fail\n"
    "which rule where, NaN/Inf, and ours beside the published numbers (REFERENCES.md). Then,\n"
    "for table4-shaped sweeps, the pass-rule table, the recipes that model a published\n"
    "kernel beside its values, rel_l2 per output, the flash-attention rule, timings and\n"
    "error-vs-length plots (one panel per mask, at most 8 recipes per row); for nanmap sweeps\n"
    "the scale thresholds and a heatmap; for table3 sweeps Table 3 with the published row; the\n"
    "exp-ratio plot; other experiments' folders are named. Plots are drawn by the gnuplot\n"
    "scripts in plots/ as PNG and SVG (gnuplot: $ATTNACC_GNUPLOT, else the configured one, else\n"
    "PATH; scripts: $ATTNACC_PLOTS_DIR, else the source tree, else the installed copy). Without\n"
    "gnuplot the tables still come out, with a note on how to install it. Prints the path\n"
    "of report.md. Exit status: 0 done, 2 bad usage or no results, 1 failure to write.";

enum { K_TABLE4, K_NANMAP, K_TABLE3, K_OTHER };

typedef struct {
  int kind;
  char *dir, tag[128], path[4300], xname[64];
  aa_results_t csv;
  rp_t4_t grid;
} item_t;

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

/* The folders holding results: IN itself, then its subfolders in name order. -1 out of memory. */
static int result_dirs(rp_strs_t *dirs, const char *in) {
  char path[4300];
  rp_strs_t sub = {0};
  DIR *d = opendir(in);
  struct dirent *e;
  snprintf(path, sizeof path, "%s/" AA_SWEEP_RESULTS_CSV, in);
  if (is_file(path)) rp_strs_add(dirs, in);
  while (d && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s/results.csv", in, e->d_name);
    if (!is_file(path)) continue;
    snprintf(path, sizeof path, "%s/%s", in, e->d_name);
    rp_strs_add(&sub, path);
  }
  if (d) closedir(d);
  if (sub.n) qsort(sub.v, sub.n, sizeof *sub.v, cmpstr);
  for (size_t i = 0; i < sub.n; i++)
    rp_strs_add(dirs, sub.v[i]);
  rp_strs_free(&sub);
  return dirs->oom || sub.oom ? -1 : 0;
}

static int classify(const aa_results_t *c, const char *xname) {
  if (aa_results_col(c, "s_min_ratio") >= 0) return K_TABLE3;
  if (xname[0] && strcmp(xname, "table4") && strcmp(xname, "nanmap") && strcmp(xname, "smoke")) return K_OTHER;
  if (aa_results_col(c, "log2_sigma") >= 0 && aa_results_col(c, "recipe") >= 0) return K_NANMAP;
  if (aa_results_col(c, "n") >= 0 && aa_results_col(c, "mask") >= 0 && aa_results_col(c, "recipe") >= 0 &&
      aa_results_col(c, "tensor") >= 0)
    return K_TABLE4;
  return K_OTHER;
}

/* Read and classify one folder; table4 grids are aggregated here (the aggregation step). 0, or -1 when its
   results.csv cannot be read (a message says so) or memory runs out. */
static int load_item(item_t *it, const char *cmd, const char *in, char *dir) {
  rp_meta_t m;
  const char *tag = strrchr(dir, '/');
  memset(it, 0, sizeof *it);
  it->dir = dir;
  tag = tag ? tag + 1 : dir;
  if (strcmp(dir, in) == 0 || tag[0] == '\0') tag = "sweep";
  snprintf(it->tag, sizeof it->tag, "%s", tag);
  for (char *p = it->tag; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-')) *p = '_';
  snprintf(it->path, sizeof it->path, "%s/" AA_SWEEP_RESULTS_CSV, dir);
  if (aa_results_read(&it->csv, it->path, NULL) != 0) {
    cli_error(cmd, "%s: cannot read", it->path);
    return -1;
  }
  rp_meta_read(&m, dir);
  snprintf(it->xname, sizeof it->xname, "%s", m.experiment);
  rp_meta_free(&m);
  it->kind = classify(&it->csv, it->xname);
  if (it->kind == K_TABLE4 && rp_t4_aggregate(&it->grid, it->dir, it->tag, &it->csv) != 0) {
    cli_error(cmd, "%s: out of memory", it->path);
    return -1;
  }
  return 0;
}

static void free_item(item_t *it) {
  aa_results_free(&it->csv);
  if (it->kind == K_TABLE4) rp_t4_free(&it->grid);
}

static void header(cli_sb_t *md, const char *in, const rp_plotter_t *pl) {
  cli_sb_printf(md,
                "# attnacc accuracy report\n\nGenerated by attnacc %s (git %s) from `%s`. Every table and plot "
                "names the result file, its version and git hash, seeds and recipes (recipe text hashes; the full "
                "texts are in each folder's meta.json). Citations in brackets are entries of REFERENCES.md.\n\n",
                AA_VERSION, AA_GIT_HASH, in);
  if (!pl->have_gnuplot)
    cli_sb_printf(md,
                  "> **No plots**: gnuplot was not found%s%s. The tables below are complete; to get the plots "
                  "install gnuplot (Debian/Ubuntu: `apt-get install gnuplot-nox`) and rerun `attnacc report`.\n\n",
                  pl->gnuplot[0] ? " at " : "", pl->gnuplot);
  else if (!pl->have_scripts)
    cli_sb_printf(md, "> **No plots**: the gnuplot scripts (plots/*.gp) were not found; set ATTNACC_PLOTS_DIR to the "
                      "plots/ folder of the source tree.\n\n");
}

static void summary(cli_sb_t *md, const item_t *items, size_t n) {
  cli_sb_printf(md, "## Summary\n\n");
  for (size_t i = 0; i < n; i++)
    if (items[i].kind == K_TABLE4) rp_summary_grid(md, &items[i].grid);
  for (size_t i = 0; i < n; i++)
    if (items[i].kind == K_NANMAP) rp_summary_nanmap(md, items[i].tag, &items[i].csv);
  for (size_t i = 0; i < n; i++)
    if (items[i].kind == K_TABLE3) rp_summary_table3(md, items[i].tag, &items[i].csv);
}

/* The sections: table4 grids first, then the maps, Table 3, anything else. */
static void sections(cli_sb_t *md, rp_plotter_t *pl, const item_t *items, size_t n) {
  for (int kind = K_TABLE4; kind <= K_OTHER; kind++)
    for (size_t i = 0; i < n; i++) {
      const item_t *it = &items[i];
      if (it->kind != kind) continue;
      if (kind == K_TABLE4)
        rp_render_table4(md, pl, &it->grid);
      else if (kind == K_NANMAP)
        rp_render_nanmap(md, pl, it->dir, it->tag, &it->csv);
      else if (kind == K_TABLE3)
        rp_render_table3(md, it->path, it->dir, &it->csv);
      else if (strcmp(it->xname, "fp8-rescale") == 0)
        rp_render_fp8_rescale(md, pl, it->path, it->dir, it->tag, &it->csv);
      else if (strcmp(it->xname, "lowpmap") == 0)
        rp_render_lowpmap(md, pl, it->path, it->dir, it->tag, &it->csv);
      else if (it->xname[0])
        cli_sb_printf(md,
                      "## `%s`\n\nA sweep of the %s experiment (%zu rows; `attnacc sweep --experiment %s --help` "
                      "describes its columns).\n\n",
                      it->path, it->xname, it->csv.nrows, it->xname);
      else
        cli_sb_printf(md, "## `%s`\n\nA results file of a shape this report does not know (%zu rows).\n\n", it->path,
                      it->csv.nrows);
    }
}

/* An older IN/table3.csv (without a table3 sweep folder) and IN/expratio.csv. */
static void loose_files(cli_sb_t *md, rp_plotter_t *pl, const char *in, int have_t3sweep) {
  char path[4300];
  aa_results_t c;
  snprintf(path, sizeof path, "%s/table3.csv", in);
  if (!have_t3sweep && is_file(path) && aa_results_read(&c, path, NULL) == 0) {
    rp_render_table3(md, path, NULL, &c);
    aa_results_free(&c);
  }
  snprintf(path, sizeof path, "%s/expratio.csv", in);
  if (is_file(path)) rp_render_expratio(md, pl, path);
}

/* Write OUT/report.md: 0, or 1 after a message. */
static int write_report(const char *cmd, const char *out, const cli_sb_t *md, const rp_plotter_t *pl) {
  char path[4300];
  aa_error_t err = {{0}};
  if (md->oom) {
    cli_error(cmd, "out of memory");
    return 1;
  }
  snprintf(path, sizeof path, "%s/report.md", out);
  if (aa_file_write(path, md->buf, md->len, &err) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    return 1;
  }
  if (!pl->have_gnuplot)
    fprintf(stderr, "attnacc report: gnuplot not found: tables only (install it: apt-get install gnuplot-nox)\n");
  printf("%s\n", path);
  return fflush(stdout) == 0 ? 0 : 1;
}

/* --in and --out checked, the output folder created: 0, or the exit status after a message. */
static int prepare_out(const char *cmd, const char *in, const char *out) {
  aa_error_t err = {{0}};
  int rc;
  if (!is_dir(in)) {
    cli_error(cmd, "--in: %s is not a folder", in);
    return 2;
  }
  if ((rc = cli_check_out_dir(out, &err)) != AA_OK) { /* a file, /proc, a read-only folder: bad input */
    cli_error(cmd, "--out: %s", err.msg);
    return rc == AA_ENOMEM ? 1 : 2;
  }
  if (aa_mkdir_p(out, &err) != AA_OK) {
    cli_error(cmd, "--out: %s", err.msg);
    return 1;
  }
  return 0;
}

static int render(const char *cmd, const char *in, const char *out, item_t *items, size_t n) {
  cli_sb_t md = {0};
  rp_plotter_t pl;
  int have_t3sweep = 0, status;
  rp_plotter_init(&pl, out);
  for (size_t i = 0; i < n; i++)
    have_t3sweep |= items[i].kind == K_TABLE3;
  header(&md, in, &pl);
  summary(&md, items, n);
  sections(&md, &pl, items, n);
  loose_files(&md, &pl, in, have_t3sweep);
  if (pl.nfailed > 0)
    cli_sb_printf(&md, "> %d of %d plots failed; gnuplot's messages are in gnuplot.log.\n", pl.nfailed, pl.nplots);
  status = write_report(cmd, out, &md, &pl);
  cli_sb_free(&md);
  return status;
}

int aa_cmd_report(int argc, char **argv) {
  const char *cmd = "report", *in, *out;
  cli_args_t a;
  char outbuf[4096], t3[4300];
  rp_strs_t dirs = {0};
  item_t *items = NULL;
  size_t n = 0;
  int rc, status = 2;
  if ((rc = cli_args_parse(&a, cmd, "--in DIR [--out DIR]", description, opts, sizeof opts / sizeof opts[0], argc,
                           argv)) >= 0)
    return rc;
  if ((in = cli_get(&a, "in")) == NULL) {
    cli_error(cmd, "give --in DIR (a folder written by attnacc sweep, or a folder of them)");
    return 2;
  }
  if ((out = cli_get(&a, "out")) == NULL) snprintf(outbuf, sizeof outbuf, "%s/report", in), out = outbuf;
  snprintf(t3, sizeof t3, "%s/table3.csv", in);
  if (is_dir(in) && result_dirs(&dirs, in) != 0) {
    cli_error(cmd, "out of memory listing %s", in);
    status = 1;
  } else if (is_dir(in) && dirs.n == 0 && !is_file(t3)) {
    cli_error(cmd, "no results.csv in %s or its subfolders, and no table3.csv (run attnacc sweep first)", in);
  } else if ((status = prepare_out(cmd, in, out)) == 0) {
    status = (items = calloc(dirs.n + 1, sizeof *items)) == NULL ? 1 : 0;
    for (size_t i = 0; i < dirs.n && status == 0; i++)
      if (load_item(&items[n], cmd, in, dirs.v[i]) == 0)
        n++;
      else
        free_item(&items[n]); /* unreadable: named on stderr, left out of the report */
    if (status == 0) status = render(cmd, in, out, items, n);
  }
  for (size_t i = 0; i < n; i++)
    free_item(&items[i]);
  free(items);
  rp_strs_free(&dirs);
  return status;
}
