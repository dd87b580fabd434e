/* attnacc: the report's sections of the FP8 experiments: fp8-rescale (flash-attention issue 2716) and lowpmap (maps
 * of error, P saturation and P underflow, and the P cast under a sink). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <string.h>

#include "report/report.h"

/* Draw script into NAME.png / .svg from the folder's results.csv with its provenance footer; the Markdown figure
   line with the given caption, or a note that it could not be drawn. */
static void lp_figure(cli_sb_t *md, rp_plotter_t *pl, const char *script, const char *name, const char *path,
                      const rp_prov_t *pv, const char *what) {
  cli_sb_t vars = {0};
  rp_gp_str(&vars, "file", path);
  rp_gp_caption(&vars, pv->caption, 250); /* 2100 pixels at 8 points */
  if (!vars.oom && rp_draw(pl, script, name, vars.buf))
    cli_sb_printf(md, "![%s](%s.png)\n\n*Figure: %s; SVG: [%s.svg](%s.svg).*\n\n", name, name, what, name, name);
  else if (pl->have_gnuplot)
    cli_sb_printf(md, "(the plot %s could not be drawn; see gnuplot.log)\n\n", name);
  cli_sb_free(&vars);
}

static void lp_heading(cli_sb_t *md, rp_prov_t *pv, const char *title, const char *tag, const char *dir,
                       const aa_results_t *c) {
  rp_meta_t meta;
  rp_meta_read(&meta, dir);
  rp_provenance(pv, dir, &meta, c);
  rp_meta_free(&meta);
  cli_sb_printf(md, "## %s `%s`\n\n", title, tag);
  rp_prov_md(md, pv, dir);
}

/* fp8-rescale: per recipe, the logit stds that fail the test's rule (Pearson >= 0.999), the largest P x 2^offset
   and the saturated share, then the plot. */
void rp_render_fp8_rescale(cli_sb_t *md, rp_plotter_t *pl, const char *path, const char *dir, const char *tag,
                           const aa_results_t *c) {
  rp_prov_t pv;
  char name[96];
  int cr = aa_results_col(c, "recipe"), cs = aa_results_col(c, "logit_std");
  lp_heading(md, &pv, "FA4 FP8 stale running max (flash-attention issue 2716)", tag, dir, c);
  cli_sb_printf(md,
                "fa4-fp8 on the inputs of the regression test of flash-attention 4f3b9be2 (q calibrated to "
                "the logit std, e4m3 per tensor): Pearson of o against exact attention on the quantised "
                "inputs, the test's rule 0.999, the largest P x 2^offset presented to the e4m3 cast (448 is "
                "e4m3's largest) and the share of casts saturated (experiments/README-fp8.md).\n\n"
                "| recipe | logit std | pearson | passes | p_max | saturated share |\n|---|---|---|---|---|---|\n");
  for (size_t r = 0; r < c->nrows && cr >= 0 && cs >= 0; r++)
    cli_sb_printf(md, "| %s | %s | %.5f | %s | %.1f | %.2g |\n", aa_results_cell(c, r, cr), aa_results_cell(c, r, cs),
                  aa_results_value(c, r, "pearson"), aa_results_value(c, r, "pass") == 1 ? "yes" : "**no**",
                  aa_results_value(c, r, "p_max"), aa_results_value(c, r, "p_over_fraction"));
  cli_sb_printf(md, "\n");
  snprintf(name, sizeof name, "fp8rescale-%s", tag);
  lp_figure(md, pl, "fp8rescale.gp", name, path, &pv,
            "Pearson of o, the largest P x 2^offset before the e4m3 cast, and the saturated share, against the "
            "logit std, one curve per rescale threshold / max_offset pair");
}

/* lowpmap: per map and recipe, the range of rel_l2(o) and the largest saturated and underflowed shares. */
static void lp_map_table(cli_sb_t *md, const aa_results_t *c) {
  int cm = aa_results_col(c, "map"), cr = aa_results_col(c, "recipe"), cx = aa_results_col(c, "x");
  if (cm < 0 || cr < 0 || cx < 0) return;
  cli_sb_printf(md, "| map | recipe | x | rel_l2(o) | rel_l2(dq) | saturated share | underflowed share |\n"
                    "|---|---|---|---|---|---|---|\n");
  for (size_t r = 0; r < c->nrows; r++) {
    char o[32], dq[32];
    rp_fmt_e(o, sizeof o, aa_results_value(c, r, "rel_l2_o"));
    rp_fmt_e(dq, sizeof dq, aa_results_value(c, r, "rel_l2_dq"));
    cli_sb_printf(md, "| %s | %s | %s | %s | %s | %.2g | %.2g |\n", aa_results_cell(c, r, cm),
                  aa_results_cell(c, r, cr), aa_results_cell(c, r, cx), o, dq,
                  aa_results_value(c, r, "over_fraction"), aa_results_value(c, r, "under_fraction"));
  }
  cli_sb_printf(md, "\n");
}

void rp_render_lowpmap(cli_sb_t *md, rp_plotter_t *pl, const char *path, const char *dir, const char *tag,
                       const aa_results_t *c) {
  rp_prov_t pv;
  char name[96];
  int cm = aa_results_col(c, "map"), pcast = 0, other = 0;
  for (size_t r = 0; r < c->nrows && cm >= 0; r++)
    *(strcmp(aa_results_cell(c, r, cm), "pcast") == 0 ? &pcast : &other) = 1;
  lp_heading(md, &pv, "FP8 attention maps (lowpmap)", tag, dir, c);
  cli_sb_printf(md, "Error of o (and of the BF16 backward fed with the FP8 forward) against exact-fp64 on the same "
                    "BF16 inputs, the share of P casts saturated at e4m3's 448 and the share rounded to zero, over "
                    "the logit std, 4 outlier keys, a sink token, a learned sink logit, the key tile, the "
                    "quantisation block and the KV length modulo the tile; pcast: the P cast alone under a sink "
                    "token, key blocks forward or reverse, P x 1 or 2^8 (experiments/README-fp8.md).\n\n");
  lp_map_table(md, c);
  snprintf(name, sizeof name, "lowpmap-%s", tag);
  if (other)
    lp_figure(md, pl, "lowpmap.gp", name, path, &pv,
              "one column per map; rows: rel_l2(o), saturated share, underflowed share; one curve per recipe");
  snprintf(name, sizeof name, "lowpcast-%s", tag);
  if (pcast)
    lp_figure(md, pl, "lowpcast.gp", name, path, &pv,
              "MSE of o and the underflowed share of P against the sink token's logit: forward or reverse key "
              "blocks, P x 1 or 2^8 before the e4m3 cast, one column per recipe");
}
