/* attnacc: the report's sections for the packed-exp table (table3 sweeps, shaped like [blackwell-fa] Table 3) and
 * the exp-ratio plot of `attnacc expmap --curve`. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static void table3_provenance(cli_sb_t *md, const char *dir, const aa_results_t *c) {
  rp_meta_t m;
  if (dir == NULL || c->nrows == 0) return;
  rp_meta_read(&m, dir);
  cli_sb_printf(md, "- provenance: attnacc %s (git %s); %s samples in [%s, %s] (seed %s, shift %s)%s\n", m.version,
                m.git, aa_results_cell(c, 0, aa_results_col(c, "samples")),
                aa_results_cell(c, 0, aa_results_col(c, "lo")), aa_results_cell(c, 0, aa_results_col(c, "hi")),
                aa_results_cell(c, 0, aa_results_col(c, "seed")), aa_results_cell(c, 0, aa_results_col(c, "shift")),
                strcmp(aa_results_cell(c, 0, aa_results_col(c, "exhaustive")), "1") == 0
                    ? "; exhaustive columns in results.csv"
                    : "");
  rp_meta_free(&m);
}

static const char *const pub_stats[4] = {"ratio_min", "ratio_max", "max_rel_err", "mean_rel_err"};

/* The published row, from the published table; then the fitted construction's columns over the published ones:
   "fitted" for the ratio columns (equal by construction), the ratio for the independent error columns. */
static void table3_published(cli_sb_t *md, const double *fitted) {
  const rp_pub_t *p = rp_pub_exp(pub_stats[0]);
  cli_sb_printf(md, "| *published (%s)* | deployed shift (error columns) |", p ? p->source : "?");
  for (int k = 0; k < 4; k++) {
    p = rp_pub_exp(pub_stats[k]);
    cli_sb_printf(md, " %s |", p ? p->text : "-");
  }
  cli_sb_printf(md, " NaN at encoded exponents -127, -126.5 (section 5.5) |\n");
  if (fitted != NULL) {
    cli_sb_printf(md, "| *fitted / published* | the ratio columns are fitted; the error columns are a test |");
    for (int k = 0; k < 4; k++) {
      p = rp_pub_exp(pub_stats[k]);
      if (k < 2 || p == NULL)
        cli_sb_printf(md, " (fitted) |");
      else
        cli_sb_printf(md, " %.3f |", fitted[k] / p->value);
    }
    cli_sb_printf(md, " |\n");
  }
  cli_sb_printf(md, "\n");
}

static int is_fitted(const char *label) {
  return strncmp(label, XP_TABLE3_FITTED, strlen(XP_TABLE3_FITTED)) == 0;
}

/* From a table3 sweep folder (results.csv: label, spec, s_*) or an older table3.csv (construction, spec, s_*;
   provenance in its '#' line). */
void rp_render_table3(cli_sb_t *md, const char *path, const char *dir, const aa_results_t *c) {
  static const char *const cols[5] = {"s_min_ratio", "s_max_ratio", "s_max_rel_err", "s_mean_rel_err", "s_nan"};
  int cl = aa_results_col(c, "label") >= 0 ? aa_results_col(c, "label") : aa_results_col(c, "construction"),
      cs = aa_results_col(c, "spec");
  cli_sb_printf(md,
                "## Packed BF16 exponential (shaped like Table 3 of the Blackwell FlashAttention paper, "
                "REFERENCES.md [blackwell-fa] section 5.2)\n\n- results: `%s`\n",
                path);
  if (c->comment[0]) cli_sb_printf(md, "- provenance: `%s`\n", c->comment + (c->comment[0] == '#' ? 2 : 0));
  table3_provenance(md, dir, c);
  cli_sb_printf(md, "\n| construction | spec | sampled ratio min | max | max rel err | mean rel err | NaN |\n| --- | "
                    "--- | --- | --- | --- | --- | --- |\n");
  double fitted[4];
  int have_fitted = 0;
  for (size_t r = 0; r < c->nrows; r++) {
    const char *label = aa_results_cell(c, r, cl);
    if (strcmp(label, "published") == 0) continue;
    cli_sb_printf(md, "| %s%s | `%s` |", label, is_fitted(label) ? " (**fitted** to the published ratio range)" : "",
                  aa_results_cell(c, r, cs));
    for (int k = 0; k < 5; k++) {
      double v = aa_results_num(aa_results_cell(c, r, aa_results_col(c, cols[k])));
      if (k < 4 && is_fitted(label)) fitted[k] = v, have_fitted = 1;
      if (k == 4 || isnan(v))
        cli_sb_printf(md, " %s |", aa_results_cell(c, r, aa_results_col(c, cols[k])));
      else
        cli_sb_printf(md, k < 2 ? " %.4f |" : " %.3e |", v);
    }
    cli_sb_printf(md, "\n");
  }
  table3_published(md, have_fitted ? fitted : NULL);
  if (have_fitted)
    cli_sb_printf(md, "The fitted row's k and s are searched so that its sampled ratio min and max match the "
                      "published ones: those two columns agree by construction and test nothing; its max and mean "
                      "relative errors are computed independently and are the comparison.\n\n");
}

void rp_render_expratio(cli_sb_t *md, rp_plotter_t *pl, const char *path) {
  cli_sb_t vars = {0};
  char *text = NULL, *nl;
  size_t tlen;
  if (aa_file_read(&text, &tlen, path, NULL) != AA_OK) text = NULL;
  rp_gp_str(&vars, "file", path);
  /* the footer: the curve file's first line (version, git hash, what the columns are) and its path */
  if (text != NULL && text[0] == '#') {
    cli_sb_t cap = {0};
    if ((nl = strchr(text, '\n')) != NULL) *nl = '\0';
    cli_sb_printf(&cap, "%s: %s", path, text[1] == ' ' ? text + 2 : text + 1);
    rp_gp_caption(&vars, cap.buf ? cap.buf : "", 160); /* 1100 pixels at 8 points */
    vars.oom |= cap.oom;
    cli_sb_free(&cap);
  }
  free(text);
  cli_sb_printf(md,
                "## Exp ratio output / 2^x\n\n- data: `%s` (attnacc expmap --curve; its first line names version and "
                "git hash)\n\n",
                path);
  if (!vars.oom && rp_draw(pl, "expratio.gp", "expratio", vars.buf))
    cli_sb_printf(md, "![exp ratio](expratio.png)\n\n*Figure: top, output / 2^x per construction over the whole "
                      "range; middle, the same on x in [-4, 0], where each period of the oscillation shows; bottom, "
                      "the class "
                      "of each construction's output at every x (valid, subnormal, zero, negative, Inf, NaN), with "
                      "its key; SVG: [expratio.svg](expratio.svg).*\n\n");
  else if (pl->have_gnuplot)
    cli_sb_printf(md, "(the exp-ratio plot could not be drawn; see gnuplot.log)\n\n");
  cli_sb_free(&vars);
}
