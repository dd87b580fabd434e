/* attnacc: the report's view of a variant sweep: each recipe `BASE:key=value,...` against BASE on the same inputs,
 * as ratios of rel_l2 per output, panel and length with their spread over seeds. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"

/* "0.728 [0.712..0.741]": the mean of the per-seed ratios, min..max in brackets when there are several seeds. */
static void ratio_text(cli_sb_t *md, double mean, double lo, double hi, size_t seeds) {
  if (isnan(mean))
    cli_sb_printf(md, " - |");
  else if (seeds > 1)
    cli_sb_printf(md, " %.3g [%.3g..%.3g] |", mean, lo, hi);
  else
    cli_sb_printf(md, " %.3g |", mean);
}

static size_t nvariants(const rp_t4_t *g) {
  size_t k = 0;
  for (size_t ri = 0; ri < g->R; ri++)
    k += rp_t4_base(g, ri) >= 0;
  return k;
}

void rp_summary_variants(cli_sb_t *md, const rp_t4_t *g) {
  if (nvariants(g) == 0) return;
  cli_sb_printf(md, "**Variants against their base** (rel_l2 of the variant / rel_l2 of its base on the same inputs, "
                    "per seed; mean over every panel, length and seed, [min..max]; below 1: the variant is more "
                    "accurate):\n\n| variant | base |");
  for (size_t t = 0; t < RP_NT; t++)
    cli_sb_printf(md, " %s |", rp_tensors[t]);
  cli_sb_printf(md, "\n| --- | --- | --- | --- | --- | --- |\n");
  for (size_t ri = 0; ri < g->R; ri++) {
    int bi = rp_t4_base(g, ri);
    if (bi < 0) continue;
    cli_sb_printf(md, "| %s | %s |", g->rec.v[ri], g->rec.v[bi]);
    for (size_t t = 0; t < RP_NT; t++) {
      double m, lo, hi;
      rp_t4_ratio(&m, &lo, &hi, g, ri, (size_t)bi, RP_ALL, 0, t);
      ratio_text(md, m, lo, hi, 2);
    }
    cli_sb_printf(md, "\n");
  }
  cli_sb_printf(md, "\n");
}

static void variants_plot(cli_sb_t *md, rp_plotter_t *pl, const rp_t4_t *g);

void rp_render_variants(cli_sb_t *md, rp_plotter_t *pl, const rp_t4_t *g) {
  for (size_t ri = 0; ri < g->R; ri++) {
    int bi = rp_t4_base(g, ri);
    if (bi < 0) continue;
    cli_sb_printf(md,
                  "### Variant `%s` against its base `%s`\n\nrel_l2 of the variant / rel_l2 of `%s` on the same "
                  "inputs, per seed%s.\n\n| output | panel |",
                  g->rec.v[ri], g->rec.v[bi], g->rec.v[bi],
                  g->S > 1 ? ": mean over the seeds, [min..max] over them" : " (one seed: no spread)");
    rp_md_length_header(md, &g->ns);
    for (size_t t = 0; t < RP_NT; t++)
      for (size_t mi = 0; mi < g->M; mi++) {
        cli_sb_printf(md, "| %s | %s |", rp_tensors[t], g->masks.v[mi]);
        for (size_t ni = 0; ni < g->N; ni++) {
          double m, lo, hi;
          rp_t4_ratio(&m, &lo, &hi, g, ri, (size_t)bi, mi, ni, t);
          ratio_text(md, m, lo, hi, g->S);
        }
        cli_sb_printf(md, "\n");
      }
    cli_sb_printf(md, "\n");
  }
  if (nvariants(g) > 0) variants_plot(md, pl, g);
}

/* The data: output-major blocks, one per (variant, panel) series, "n mean lo hi"; the series' titles in vars. The
   y range covers every bar, in whole tenths around 1. Returns the series count. */
static size_t variants_data(cli_sb_t *dat, cli_sb_t *vars, const rp_t4_t *g, double *ylo, double *yhi) {
  size_t ns = 0, nb = 0;
  *ylo = 1, *yhi = 1;
  for (size_t t = 0; t < RP_NT; t++)
    for (size_t ri = 0; ri < g->R; ri++) {
      int bi = rp_t4_base(g, ri);
      for (size_t mi = 0; bi >= 0 && mi < g->M; mi++) {
        if (t == 0) cli_sb_printf(vars, "title%zu = '%s (%s)'\n", ++ns, g->rec.v[ri], g->masks.v[mi]);
        cli_sb_printf(dat, "%s# %s %s/%s (%s)\n", nb++ ? "\n\n" : "", rp_tensors[t], g->rec.v[ri], g->rec.v[bi],
                      g->masks.v[mi]);
        for (size_t ni = 0; ni < g->N; ni++) {
          double m, lo, hi;
          rp_t4_ratio(&m, &lo, &hi, g, ri, (size_t)bi, mi, ni, t);
          cli_sb_printf(dat, "%.0f %.17g %.17g %.17g\n", g->ns.v[ni], m, lo, hi);
          if (lo < *ylo) *ylo = lo;
          if (hi > *yhi) *yhi = hi;
        }
      }
    }
  *ylo = floor(*ylo * 10 - 0.5) / 10, *yhi = ceil(*yhi * 10 + 0.5) / 10;
  return ns;
}

static void variants_plot(cli_sb_t *md, rp_plotter_t *pl, const rp_t4_t *g) {
  cli_sb_t dat = {0}, vars = {0}, xt = {0};
  char name[160], datname[200], dp[4300];
  double ylo, yhi;
  size_t ns;
  snprintf(name, sizeof name, "%.100s_variants", g->tag);
  snprintf(datname, sizeof datname, "%s.dat", name);
  cli_sb_printf(&dat, "# attnacc report: variant / base rel_l2 against n; %s; columns n mean lo hi\n",
                g->prov.version);
  ns = variants_data(&dat, &vars, g, &ylo, &yhi);
  for (size_t ni = 0; ni < g->N; ni++)
    cli_sb_printf(&xt, "%s%.0f", ni ? ", " : "", g->ns.v[ni]);
  snprintf(dp, sizeof dp, "%s/%s", pl->out, datname);
  rp_gp_str(&vars, "datafile", dp);
  rp_gp_str(&vars, "xtics", xt.buf ? xt.buf : "");
  cli_sb_printf(&vars, "nser = %zu\nxmin = %.17g\nxmax = %.17g\nymin = %.17g\nymax = %.17g\n", ns, g->ns.v[0],
                g->ns.v[g->N - 1], ylo, yhi);
  rp_gp_caption(&vars, g->prov.caption, 180);
  if (!vars.oom && !xt.oom && rp_write_file(pl->out, datname, &dat) == AA_OK &&
      rp_draw(pl, "variants.gp", name, vars.buf))
    cli_sb_printf(md,
                  "![variants against their base](%s.png)\n\n*Figure: rel_l2 of each variant over its base's on "
                  "the same inputs, per output, against n; points: mean over seeds, bars: min..max; dotted: 1 (as "
                  "accurate as the base); SVG: [%s.svg](%s.svg), data: [%s](%s).*\n\n",
                  name, name, name, datname, datname);
  cli_sb_free(&dat), cli_sb_free(&vars), cli_sb_free(&xt);
}
