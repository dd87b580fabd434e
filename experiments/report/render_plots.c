/* attnacc: the error-against-length plots of a table4-shaped sweep: one image per output, faceted into rows of at
 * most RP_SERIES recipes (grouped by family) and one panel per mask, published points marked where measured. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

/* At most this many series share a panel: the palette of plots/table4.gp has this many colours. */
#define RP_SERIES 8

/* The family of a recipe: its name up to the first '-', ':' or '/' (fa2-h100 and fa2 are family fa2). */
static size_t family_len(const char *name) {
  size_t k = strcspn(name, "-:/");
  return k ? k : strlen(name);
}

/* Rows of the facet grid: families in order of first appearance, packed into rows of at most RP_SERIES
   recipes; a family larger than that is split. row[ri] receives the row of recipe ri; returns the row count. */
static size_t pack_rows(const rp_t4_t *g, size_t *row, size_t *slot) {
  size_t nrows = 0, fill = RP_SERIES;
  char *done = calloc(g->R + 1, 1);
  if (done == NULL) return 0;
  for (size_t a = 0; a < g->R; a++) {
    size_t fam = 0, fl = family_len(g->rec.v[a]);
    if (done[a]) continue;
    for (size_t b = a; b < g->R; b++)
      fam += !done[b] && family_len(g->rec.v[b]) == fl && strncmp(g->rec.v[a], g->rec.v[b], fl) == 0;
    if (fill + (fam < RP_SERIES ? fam : RP_SERIES) > RP_SERIES) nrows++, fill = 0;
    for (size_t b = a; b < g->R; b++) {
      if (done[b] || family_len(g->rec.v[b]) != fl || strncmp(g->rec.v[a], g->rec.v[b], fl) != 0) continue;
      if (fill == RP_SERIES) nrows++, fill = 0;
      done[b] = 1, row[b] = nrows - 1, slot[b] = fill++;
    }
  }
  free(done);
  return nrows;
}

typedef struct {
  const rp_t4_t *g;
  size_t t, *row, *slot, nrows;
  double xmin, xmax, *ymin, *ymax; /* per row */
} plot_t;

static void widen(double *lo, double *hi, double v) {
  if (!(v > 0) || !isfinite(v)) return;
  if (!(v >= *lo)) *lo = v;
  if (!(v <= *hi)) *hi = v;
}

/* rowname<r>: the families of row r ("nki, fa2, recip"), for the panel titles. */
static void row_name(cli_sb_t *vars, const plot_t *P, size_t r) {
  cli_sb_t nm = {0};
  for (size_t ri = 0; ri < P->g->R; ri++) {
    const char *a = P->g->rec.v[ri];
    size_t fl = family_len(a);
    int seen = 0;
    if (P->row[ri] != r) continue;
    for (size_t rj = 0; rj < ri; rj++)
      seen |= P->row[rj] == r && family_len(P->g->rec.v[rj]) == fl && strncmp(P->g->rec.v[rj], a, fl) == 0;
    if (!seen) cli_sb_printf(&nm, "%s%.*s", nm.len ? ", " : "", (int)fl, a);
  }
  char var[32];
  snprintf(var, sizeof var, "rowname%zu", r + 1);
  rp_gp_str(vars, var, nm.buf ? nm.buf : "");
  cli_sb_free(&nm);
}

/* The data file: one block per (row, mask, recipe) that has points; vars pb<p>, pc<p> (block indices and colour
   slots of panel p), key<r>/keyc<r> (the row's recipes and slots). */
static int write_data(const plot_t *P, cli_sb_t *dat, cli_sb_t *vars) {
  const rp_t4_t *g = P->g;
  size_t nb = 0;
  for (size_t r = 0; r < P->nrows; r++) {
    cli_sb_t key = {0}, keyc = {0};
    for (size_t ri = 0; ri < g->R; ri++)
      if (P->row[ri] == r) cli_sb_printf(&key, "%s ", g->rec.v[ri]), cli_sb_printf(&keyc, "%zu ", P->slot[ri] + 1);
    cli_sb_printf(vars, "key%zu = '%s'\nkeyc%zu = '%s'\n", r + 1, key.buf ? key.buf : "", r + 1,
                  keyc.buf ? keyc.buf : "");
    cli_sb_free(&key), cli_sb_free(&keyc);
    row_name(vars, P, r);
    for (size_t mi = 0; mi < g->M; mi++) {
      cli_sb_t pb = {0}, pc = {0};
      for (size_t ri = 0; ri < g->R; ri++) {
        int any = 0;
        if (P->row[ri] != r) continue;
        for (size_t ni = 0; ni < g->N; ni++) {
          double e = rp_t4_mean(g, ri, mi, ni, P->t);
          /* log scale: zero, NaN and Inf points are left out of the line */
          if (!(e > 0 && isfinite(e))) continue;
          if (!any) cli_sb_printf(dat, "%s# %s/%s\n", nb ? "\n\n" : "", g->rec.v[ri], g->masks.v[mi]);
          cli_sb_printf(dat, "%.0f %.17g %.17g\n", g->ns.v[ni], e, rp_t4_cell(g, ri, mi, ni, P->t)->max);
          any = 1;
        }
        if (any) cli_sb_printf(&pb, "%zu ", nb++), cli_sb_printf(&pc, "%zu ", P->slot[ri] + 1);
      }
      size_t p = r * g->M + mi + 1;
      cli_sb_printf(vars, "pb%zu = '%s'\npc%zu = '%s'\n", p, pb.buf ? pb.buf : "", p, pc.buf ? pc.buf : "");
      cli_sb_free(&pb), cli_sb_free(&pc);
    }
  }
  return nb > 0;
}

/* The kernel's name without its parenthesis ("TLX" of "TLX (the paper's kernel)"), as a precision. */
static int short_kernel(const rp_pub_t *p) {
  const char *q = strstr(p->kernel, " (");
  return q ? (int)(q - p->kernel) : (int)strlen(p->kernel);
}

/* The facet row of the recipe that models a published kernel, or -1 when the sweep does not run it. */
static int pub_row(const plot_t *P, const rp_pub_t *p) {
  int ri = p->recipe ? rp_strs_find(&P->g->rec, p->recipe) : -1;
  return ri < 0 ? -1 : (int)P->row[ri];
}

/* Published points of this output measured inside the plotted lengths (pubfile: mask n value label row, drawn in
   the row of the recipe that models the kernel), and per row a note on those outside (notes[r], beside that
   row's legend). */
static size_t published_points(const plot_t *P, cli_sb_t *pd, cli_sb_t *notes, double *lo, double *hi) {
  size_t npts = 0;
  for (size_t i = 0; i < rp_pub_count(); i++) {
    const rp_pub_t *p = rp_pub_row(i);
    int r = pub_row(P, p);
    if (p->metric != RP_PUB_REL_L2 || strcmp(p->what, rp_tensors[P->t]) != 0 || r < 0) continue;
    for (size_t j = 0; j < p->nns; j++) {
      if (p->ns[j] >= P->xmin && p->ns[j] <= P->xmax) {
        cli_sb_printf(pd, "%s %.0f %.17g \"%.*s %s\" %d\n", p->mask, p->ns[j], p->value, short_kernel(p), p->kernel,
                      p->text, r + 1);
        widen(lo, hi, p->value);
        npts++;
      } else {
        cli_sb_printf(&notes[r], "%s%.*s (recipe %s) %s %s at %.0f",
                      notes[r].len ? "\\n" : "published, beyond these lengths:\\n", short_kernel(p), p->kernel,
                      p->recipe, p->mask, p->text, p->ns[j]);
      }
    }
  }
  return npts;
}

/* One y range for every row of an output, so that rows compare at a glance (a row's curves are not rescaled). */
static void row_ranges(plot_t *P, double plo, double phi) {
  const rp_t4_t *g = P->g;
  double lo = NAN, hi = NAN;
  for (size_t ri = 0; ri < g->R; ri++)
    for (size_t mi = 0; mi < g->M; mi++)
      for (size_t ni = 0; ni < g->N; ni++)
        widen(&lo, &hi, rp_t4_mean(g, ri, mi, ni, P->t));
  widen(&lo, &hi, plo), widen(&lo, &hi, phi);
  for (size_t r = 0; r < P->nrows; r++) { /* whole decades around the data */
    P->ymin[r] = isnan(lo) ? 1e-4 : pow(10, floor(log10(lo) - 0.05));
    P->ymax[r] = isnan(hi) ? 1e-1 : pow(10, ceil(log10(hi) + 0.05));
  }
}

static void plot_vars(const plot_t *P, cli_sb_t *vars, const char *datpath, const char *pubpath,
                      const cli_sb_t *notes) {
  const rp_t4_t *g = P->g;
  cli_sb_t xt = {0}, masks = {0};
  rp_gp_str(vars, "datafile", datpath);
  rp_gp_str(vars, "pubfile", pubpath);
  for (size_t r = 0; r < P->nrows; r++) /* \\n escapes: one line per value */
    cli_sb_printf(vars, "pubnote%zu = \"%s\"\n", r + 1, notes[r].buf ? notes[r].buf : "");
  rp_gp_str(vars, "tensor", rp_tensors[P->t]);
  for (size_t ni = 0; ni < g->N; ni++)
    cli_sb_printf(&xt, "%s%.0f", ni ? ", " : "", g->ns.v[ni]);
  for (size_t mi = 0; mi < g->M; mi++) { /* gnuplot's word() splits at spaces: a panel "dense d=64" is one word */
    cli_sb_printf(&masks, "%s", mi ? " " : "");
    for (const char *c = g->masks.v[mi]; *c; c++)
      cli_sb_printf(&masks, "%c", *c == ' ' ? ',' : *c);
  }
  rp_gp_str(vars, "xtics", xt.buf ? xt.buf : "");
  rp_gp_str(vars, "masks", masks.buf ? masks.buf : "");
  vars->oom |= xt.oom | masks.oom;
  cli_sb_free(&xt), cli_sb_free(&masks);
  cli_sb_printf(vars, "nrows = %zu\nnmasks = %zu\nxmin = %.17g\nxmax = %.17g\n", P->nrows, g->M, P->xmin, P->xmax);
  for (size_t r = 0; r < P->nrows; r++)
    cli_sb_printf(vars, "ymin%zu = %.17g\nymax%zu = %.17g\n", r + 1, P->ymin[r], r + 1, P->ymax[r]);
  rp_gp_caption(vars, g->prov.caption, 180); /* 1400 pixels at 9 points: about 190 characters */
}

static void one_plot(cli_sb_t *md, rp_plotter_t *pl, plot_t *P) {
  const rp_t4_t *g = P->g;
  cli_sb_t dat = {0}, pd = {0}, vars = {0};
  cli_sb_t *notes = calloc(P->nrows, sizeof *notes);
  char name[160], datname[200], pubname[200], dp[4300], pp[4300];
  double plo = NAN, phi = NAN;
  size_t npub;
  snprintf(name, sizeof name, "%.100s_%s", g->tag, rp_tensors[P->t]);
  snprintf(datname, sizeof datname, "%s.dat", name);
  snprintf(pubname, sizeof pubname, "%s_published.dat", name);
  cli_sb_printf(&dat, "# attnacc report: %s rel_l2 against n; %s; blocks: recipe/mask; columns n mean max\n",
                rp_tensors[P->t], g->prov.version);
  cli_sb_printf(&pd, "# published %s rel_l2 (REFERENCES.md): mask n value label\n", rp_tensors[P->t]);
  /* the published figures only beside a recipe that models their kernel (rp_t4_has_paper) */
  if (notes == NULL) goto out;
  npub = published_points(P, &pd, notes, &plo, &phi); /* only for the rows of recipes that model the kernels */
  row_ranges(P, plo, phi);
  if (!write_data(P, &dat, &vars) || rp_write_file(pl->out, datname, &dat) != AA_OK ||
      (npub && rp_write_file(pl->out, pubname, &pd) != AA_OK))
    goto out;
  snprintf(dp, sizeof dp, "%s/%s", pl->out, datname);
  snprintf(pp, sizeof pp, "%s/%s", pl->out, pubname);
  if (!npub) remove(pp), pp[0] = '\0'; /* no published point inside these lengths: no file (and none left over) */
  plot_vars(P, &vars, dp, pp, notes);
  if (!vars.oom && rp_draw(pl, "table4.gp", name, vars.buf))
    cli_sb_printf(md,
                  "![%s rel_l2 against n](%s.png)\n\n*Figure: rel_l2 of %s against n; one panel per mask, one row "
                  "per recipe family (at most %d recipes each)%s; %s; SVG: [%s.svg](%s.svg), data: [%s](%s).*\n\n",
                  rp_tensors[P->t], name, rp_tensors[P->t], RP_SERIES,
                  npub ? ", black rings: published values at the lengths their source measured, in the row of the "
                         "recipe that models the kernel"
                       : "",
                  g->prov.version, name, name, datname, datname);
out:
  for (size_t r = 0; notes && r < P->nrows; r++)
    cli_sb_free(&notes[r]);
  free(notes);
  cli_sb_free(&dat), cli_sb_free(&pd), cli_sb_free(&vars);
}

void rp_render_table4_plots(cli_sb_t *md, rp_plotter_t *pl, const rp_t4_t *g) {
  plot_t P = {g, 0, NULL, NULL, 0, 0, 0, NULL, NULL};
  if (g->R == 0 || g->N == 0) return;
  P.row = calloc(g->R, sizeof *P.row);
  P.slot = calloc(g->R, sizeof *P.slot);
  P.ymin = calloc(g->R, sizeof *P.ymin);
  P.ymax = calloc(g->R, sizeof *P.ymax);
  if (P.row && P.slot && P.ymin && P.ymax && (P.nrows = pack_rows(g, P.row, P.slot)) > 0) {
    P.xmin = g->ns.v[0], P.xmax = g->ns.v[g->N - 1];
    for (P.t = 0; P.t < RP_NT; P.t++)
      one_plot(md, pl, &P);
  }
  free(P.row), free(P.slot), free(P.ymin), free(P.ymax);
}
