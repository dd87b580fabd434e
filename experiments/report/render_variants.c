/* attnacc: the report's view of a variant sweep: each recipe `BASE:key=value,...` against BASE on the same inputs,
 * as ratios of rel_l2 per output, panel and length with their spread over seeds. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>

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

void rp_render_variants(cli_sb_t *md, const rp_t4_t *g) {
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
}
