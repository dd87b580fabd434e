/* attnacc: one recipe beside the published values of the kernel it models (the TLX row: recipe tlx and the
 * paper's kernel; fa4 and FA4), with ratios where both were measured and the reading that produced ours. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"

/* Columns: the sweep's lengths and every length the source measured for this recipe. */
static void columns(rp_nums_t *cols, const rp_t4_t *g, const char *recipe) {
  for (size_t ni = 0; ni < g->N; ni++)
    rp_nums_add(cols, g->ns.v[ni]);
  for (size_t i = 0; i < rp_pub_count(); i++) {
    const rp_pub_t *p = rp_pub_row(i);
    if (p->recipe == NULL || strcmp(p->recipe, recipe) != 0) continue;
    for (size_t j = 0; j < p->nns; j++)
      rp_nums_add(cols, p->ns[j]);
  }
}

static void header(cli_sb_t *md, const rp_nums_t *cols) {
  cli_sb_printf(md, "| what | mask |");
  rp_md_length_header(md, cols);
}

/* Which reading produced our numbers: the recipe's name and text hash from the results, and the description of
   this build's preset when its text is the one that ran. */
static void reading(cli_sb_t *md, const rp_t4_t *g, size_t ri) {
  const char *hash = ri < g->hash.n ? g->hash.v[ri] : "";
  const char *desc = rp_preset_description(g->rec.v[ri], hash);
  cli_sb_printf(md,
                "Reading: recipe `%s`, text hash `%s` (results.csv `recipe_hash`; the full text is in %s/meta.json)",
                g->rec.v[ri], hash[0] ? hash : "?", g->dir);
  if (desc != NULL)
    cli_sb_printf(md, ": %s.\n\n", desc);
  else
    cli_sb_printf(md,
                  "; this build's preset `%s` has another text, so its description does not apply: read the "
                  "text in meta.json.\n\n",
                  g->rec.v[ri]);
}

static void pass_rows(cli_sb_t *md, const rp_t4_t *g, size_t ri, const rp_nums_t *cols) {
  for (size_t mi = 0; mi < g->M; mi++) {
    const rp_pub_t *p = rp_pub_pass(g->rec.v[ri], g->masks.v[mi]);
    cli_sb_printf(md, "| pass rule, ours | %s |", g->masks.v[mi]);
    for (size_t c = 0; c < cols->n; c++) {
      int ni = rp_nums_find(&g->ns, cols->v[c]);
      char what[64];
      int nf = ni < 0 ? -1 : rp_t4_fails(g, ri, mi, (size_t)ni, what, sizeof what);
      if (nf < 0)
        cli_sb_printf(md, " not run |");
      else if (nf > 0)
        cli_sb_printf(md, " FAIL %s |", what);
      else
        cli_sb_printf(md, " pass |");
    }
    cli_sb_printf(md, "\n");
    if (p == NULL) continue;
    cli_sb_printf(md, "| pass rule, published | %s |", g->masks.v[mi]);
    for (size_t c = 0; c < cols->n; c++)
      cli_sb_printf(md, " %s |", rp_pub_measured_at(p, cols->v[c]) ? p->text : "not measured");
    cli_sb_printf(md, "\n");
  }
}

static void rel_l2_rows(cli_sb_t *md, const rp_t4_t *g, size_t ri, const rp_nums_t *cols, const rp_pub_t *p) {
  int mi = rp_strs_find(&g->masks, p->mask), ti = -1;
  char b[32];
  for (int t = 0; t < RP_NT; t++)
    if (strcmp(rp_tensors[t], p->what) == 0) ti = t;
  if (mi < 0 || ti < 0) return;
  cli_sb_printf(md, "| %s rel_l2, ours | %s |", p->what, p->mask);
  for (size_t c = 0; c < cols->n; c++) {
    int ni = rp_nums_find(&g->ns, cols->v[c]);
    rp_fmt_e(b, sizeof b, ni < 0 ? NAN : rp_t4_mean(g, ri, (size_t)mi, (size_t)ni, (size_t)ti));
    cli_sb_printf(md, " %s |", ni < 0 ? "not run" : b);
  }
  cli_sb_printf(md, "\n| %s rel_l2, published | %s |", p->what, p->mask);
  for (size_t c = 0; c < cols->n; c++)
    cli_sb_printf(md, " %s |", rp_pub_measured_at(p, cols->v[c]) ? p->text : "not measured");
  cli_sb_printf(md, "\n| ours / published | %s |", p->mask);
  for (size_t c = 0; c < cols->n; c++) {
    int ni = rp_nums_find(&g->ns, cols->v[c]);
    double e = ni < 0 ? NAN : rp_t4_mean(g, ri, (size_t)mi, (size_t)ni, (size_t)ti);
    if (rp_pub_measured_at(p, cols->v[c]) && !isnan(e))
      cli_sb_printf(md, " %.3f |", e / p->value);
    else
      cli_sb_printf(md, " |");
  }
  cli_sb_printf(md, "\n");
}

void rp_render_published(cli_sb_t *md, const rp_t4_t *g, const char *recipe) {
  int ri = rp_strs_find(&g->rec, recipe);
  const char *kernel = NULL, *source = NULL;
  rp_nums_t cols = {0};
  if (ri < 0) return;
  for (size_t i = 0; i < rp_pub_count() && kernel == NULL; i++)
    if (rp_pub_row(i)->recipe && strcmp(rp_pub_row(i)->recipe, recipe) == 0)
      kernel = rp_pub_row(i)->kernel, source = rp_pub_row(i)->source;
  if (kernel == NULL) return;
  cli_sb_printf(md, "### `%s` beside the published %s (%s)\n\n", recipe, kernel, source);
  reading(md, g, (size_t)ri);
  columns(&cols, g, recipe);
  header(md, &cols);
  for (size_t i = 0; i < rp_pub_count(); i++) {
    const rp_pub_t *p = rp_pub_row(i);
    if (p->metric == RP_PUB_REL_L2 && strcmp(p->recipe, recipe) == 0) rel_l2_rows(md, g, (size_t)ri, &cols, p);
  }
  pass_rows(md, g, (size_t)ri, &cols);
  cli_sb_printf(md, "\nRatios are computed (ours / published) only at lengths both measured; \"not run\": this sweep "
                    "has no cell there (the full grid without --quick runs 1024..32768).\n\n");
  rp_nums_free(&cols);
}
