/* attnacc: the report's internal interface: growable sets, result-folder metadata, the published figures, the
 * table4 aggregate and the renderers of `attnacc report`. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_REPORT_REPORT_H
#define AA_REPORT_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "cli/cli.h"
#include "xp/xp.h"

/* ---- growable sets (sets.c): no cap, an allocation failure sets oom ---- */
typedef struct {
  char **v; /* copies, in order of first appearance */
  size_t n, cap;
  int oom;
} rp_strs_t;
int rp_strs_add(rp_strs_t *s, const char *x); /* index of x (added if new); -1 out of memory */
int rp_strs_find(const rp_strs_t *s, const char *x);
void rp_strs_free(rp_strs_t *s);

typedef struct {
  double *v; /* ascending */
  size_t n, cap;
  int oom;
} rp_nums_t;
int rp_nums_add(rp_nums_t *s, double x); /* index of x (added if new); -1 out of memory */
int rp_nums_find(const rp_nums_t *s, double x);
void rp_nums_free(rp_nums_t *s);

/* Markdown headers (sets.c): the rest of "| recipe |" for a mask x length grid ("MASK N<suffix>" per pair),
   or of "| recipe | mask |" for one column per length; each with its separator row. */
void rp_md_grid_header(cli_sb_t *md, const rp_strs_t *masks, const rp_nums_t *ns, const char *suffix);
void rp_md_length_header(cli_sb_t *md, const rp_nums_t *ns);

/* "1.23e-03", "-" for NaN, "inf", "0" */
void rp_fmt_e(char *buf, size_t cap, double x);

/* ---- a results folder's meta.json and provenance (meta.c) ---- */
typedef struct {
  char *name, *hash, *text; /* one entry of meta.json "recipes": full hash and canonical text */
} rp_recipe_meta_t;
typedef struct {
  char experiment[64], grid[40], version[64], git[64];
  rp_recipe_meta_t *recipes;
  size_t nrecipes;
} rp_meta_t;
void rp_meta_read(rp_meta_t *m, const char *dir); /* missing or unreadable: empty fields, no recipes */
void rp_meta_free(rp_meta_t *m);
const rp_recipe_meta_t *rp_meta_recipe(const rp_meta_t *m, const char *name);
/* 1 when the recipe text, without its `name = ` line, is the text of ref (formatted by aa_recipe_format). */
int rp_meta_same_numerics(const char *text, const char *ref_text);
/* The one-line description of the preset `name` when this build's preset has the given text hash (the first 16
   hex digits of the recipe text hash, as results.csv records it); NULL otherwise. */
const char *rp_preset_description(const char *name, const char *hash);

typedef struct {
  char experiment[64], grid[40], version[160];
  char recipes_md[4096]; /* "name [hash8]", ... on one line; truncated with "..." and a count */
  char caption[2400];    /* gnuplot footer (rp_gp_caption wraps it), its two parts separated by a \n escape */
  int caption_lines;     /* lines before wrapping */
  char seeds[256];
} rp_prov_t;
void rp_provenance(rp_prov_t *pv, const char *dir, const rp_meta_t *m, const aa_results_t *c);
void rp_prov_md(cli_sb_t *md, const rp_prov_t *pv, const char *dir);

/* ---- published figures (published.c): the one table of numbers taken from papers ---- */
typedef enum { RP_PUB_REL_L2, RP_PUB_PASS, RP_PUB_EXP } rp_pub_metric_t;
typedef struct {
  const char *kernel;     /* who was measured: "TLX" (the paper's kernel), "FA4", "packed BF16 exp" */
  const char *recipe;     /* our recipe modelling that kernel (NULL for exp rows) */
  rp_pub_metric_t metric; /* rel_l2 of one output, "every element passes the rule", an exp statistic */
  const char *what;       /* output ("dq"; "o,dq,dk,dv" for the pass rule) or exp statistic name */
  const char *mask;       /* "dense", "causal"; NULL for exp rows */
  const double *ns;       /* the lengths the source measured it at */
  size_t nns;             /* number of them (0 for exp rows) */
  double value;           /* rel_l2 or statistic; 1 for "passes" */
  const char *text;       /* the value as printed in the source */
  const char *source;     /* "[blackwell-fa] section 5.3, Table 4" (REFERENCES.md) */
} rp_pub_t;
size_t rp_pub_count(void);
const rp_pub_t *rp_pub_row(size_t i);
int rp_pub_measured_at(const rp_pub_t *p, double n);
/* The rel_l2 row for (recipe, tensor, mask) measured at n, or NULL. */
const rp_pub_t *rp_pub_rel_l2(const char *recipe, const char *tensor, const char *mask, double n);
/* The pass-rule row for (recipe, mask), or NULL. */
const rp_pub_t *rp_pub_pass(const char *recipe, const char *mask);
/* The exp statistic row ("ratio_min", "ratio_max", "max_rel_err", "mean_rel_err"), or NULL. */
const rp_pub_t *rp_pub_exp(const char *stat);

/* ---- a table4-shaped sweep, aggregated (aggregate.c) ---- */
#define RP_NT 4
#define RP_NEXTRA 4
extern const char *const rp_extra_axes[RP_NEXTRA]; /* d, heads, kv_heads, sigma: folded into the panel name */
/* A shape axis that takes more than one value in a sweep (d, sigma, ...) joins the mask in the panel name
   ("dense d=64"), so that cells of different shapes are never merged. */
typedef struct {
  int mask, extra[RP_NEXTRA]; /* columns; extra[x] -1 where absent or constant */
} rp_panel_cols_t;
void rp_panel_cols(rp_panel_cols_t *p, const aa_results_t *c);
int rp_panel_folded(const rp_panel_cols_t *p); /* 1 when some shape axis varies */
/* The panel of row r: its mask, then each varying shape axis as name=value. */
const char *rp_panel_of(char *buf, size_t cap, const aa_results_t *c, const rp_panel_cols_t *p, size_t r);
extern const char *const rp_tensors[RP_NT]; /* o, dq, dk, dv */
typedef struct {
  double sum, max;
  size_t k;
  int fail, nonfinite, err;
  double fa_worst; /* worst over seeds of max_abs / the reference's max_abs; NaN without a reference */
} rp_cell_t;
typedef struct {
  const char *dir;
  char tag[128], d[32];
  rp_meta_t meta;
  rp_prov_t prov;
  rp_strs_t rec, hash, masks; /* hash[i]: recipe_hash of rec[i] */
  rp_nums_t ns, seeds;
  size_t R, M, N, S;
  rp_cell_t *cell;           /* [R][M][N][RP_NT] */
  double *rel;               /* [R][M][N][RP_NT][S]: rel_l2 per seed, NaN where no row */
  double *t_oracle, *t_emul; /* [M][N], [R][M][N]: summed seconds */
  size_t *k_oracle, *k_emul;
  int ref; /* the naive same-precision reference (fa rule), -1 when the sweep has none */
  int oom;
} rp_t4_t;
int rp_t4_aggregate(rp_t4_t *g, const char *dir, const char *tag, const aa_results_t *c); /* 0, or -1 out of memory */
void rp_t4_free(rp_t4_t *g);
rp_cell_t *rp_t4_cell(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, size_t ti);
double rp_t4_mean(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, size_t ti);            /* NaN when no rows */
int rp_t4_fails(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, char *what, size_t cap); /* -1 no rows */
double rp_t4_fa_fraction(const rp_t4_t *g, size_t ri, size_t mi, size_t ni); /* worst of ratio/limit; NaN none */
double rp_t4_rel(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, size_t ti, size_t si); /* one seed's rel_l2 */
/* The recipe a variant `BASE:key=value,...` of this sweep overrides, when BASE is in the sweep; -1 otherwise. */
int rp_t4_base(const rp_t4_t *g, size_t ri);
/* 1 when the sweep runs a recipe that models a kernel with published numbers (rp_pub_t.recipe). */
int rp_t4_has_paper(const rp_t4_t *g);
/* rel_l2 of variant ri over its base bi per seed: mean, min and max of the ratios (NaN when no seed has both), in
   one cell (mi, ni) or, with mi = RP_ALL, over every panel and length. */
#define RP_ALL ((size_t)-1)
void rp_t4_ratio(double *mean, double *lo, double *hi, const rp_t4_t *g, size_t ri, size_t bi, size_t mi, size_t ni,
                 size_t ti);

/* ---- gnuplot (gnuplot.c) ---- */
typedef struct {
  int have_gnuplot, have_scripts;
  char gnuplot[4096], plots[4096];
  const char *out;
  int nplots, nfailed;
} rp_plotter_t;
void rp_plotter_init(rp_plotter_t *pl, const char *out);
int rp_draw(rp_plotter_t *pl, const char *script, const char *name, const char *vars); /* 1: PNG and SVG */
void rp_gp_str(cli_sb_t *sb, const char *name, const char *v);                         /* name = 'v' with ' doubled */
int rp_write_file(const char *dir, const char *name, const cli_sb_t *sb);
/* `caption = "..."` and `caplines = N` for a plot's provenance footer: text broken at its newlines (or \n
   escapes) and, where a line is wider than width characters, at a space, so that no footer runs off the canvas;
   quotes and backslashes escaped. Returns the line count. */
int rp_gp_caption(cli_sb_t *sb, const char *text, size_t width);

/* ---- renderers ---- */
/* The summary (render_summary.c), first in the report: which recipes fail which rule where, and ours beside
   the published numbers; one block per table4 grid, nanmap sweep and table3 sweep. */
void rp_summary_grid(cli_sb_t *md, const rp_t4_t *g);
void rp_summary_nanmap(cli_sb_t *md, const char *tag, const aa_results_t *c);
void rp_summary_table3(cli_sb_t *md, const char *tag, const aa_results_t *c);
void rp_render_table4(cli_sb_t *md, rp_plotter_t *pl, const rp_t4_t *g);
/* Each variant of the sweep against its base (render_variants.c): ratios of rel_l2 per output, mask and length,
   with their spread over seeds; the summary's lines, then the section's tables. Nothing without a variant. */
void rp_summary_variants(cli_sb_t *md, const rp_t4_t *g);
void rp_render_variants(cli_sb_t *md, rp_plotter_t *pl, const rp_t4_t *g); /* tables, then a ratio plot */
/* The verdicts of the table4-shaped folder dir on f, per recipe (what `attnacc sweep` prints at its end); 0, or -1
   when its results cannot be read. */
int rp_print_verdicts(FILE *f, const char *dir);
void rp_render_table4_plots(cli_sb_t *md, rp_plotter_t *pl, const rp_t4_t *g);
/* Ours beside the published values for one recipe (the TLX row: recipe tlx; FA4: fa4), with its reading. */
void rp_render_published(cli_sb_t *md, const rp_t4_t *g, const char *recipe);
void rp_render_nanmap(cli_sb_t *md, rp_plotter_t *pl, const char *dir, const char *tag, const aa_results_t *c);
void rp_render_table3(cli_sb_t *md, const char *path, const char *dir, const aa_results_t *c);
void rp_render_expratio(cli_sb_t *md, rp_plotter_t *pl, const char *path);
/* The FP8 experiments' sections (render_lowp.c): fp8-rescale (issue 2716) and lowpmap, tables and plots. */
void rp_render_fp8_rescale(cli_sb_t *md, rp_plotter_t *pl, const char *path, const char *dir, const char *tag,
                           const aa_results_t *c);
void rp_render_lowpmap(cli_sb_t *md, rp_plotter_t *pl, const char *path, const char *dir, const char *tag,
                       const aa_results_t *c);

#endif
