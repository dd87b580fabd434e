/* attnacc: the report's section for a table4-shaped sweep: pass-rule grid (published verdicts only where the source
 * measured), rel_l2 per output, the flash-attention rule, timings; plots in render_plots.c. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"

/* One published pass-rule row per kernel: "pass" where the source measured that (mask, n), "not run" elsewhere. */
static void published_pass_rows(cli_sb_t *md, const rp_t4_t *g) {
  for (size_t i = 0; i < rp_pub_count(); i++) {
    const rp_pub_t *p = rp_pub_row(i);
    int seen = 0;
    if (p->metric != RP_PUB_PASS) continue;
    for (size_t j = 0; j < i; j++) /* one row per kernel: its first pass-rule entry */
      seen |= rp_pub_row(j)->metric == RP_PUB_PASS && strcmp(rp_pub_row(j)->kernel, p->kernel) == 0;
    if (seen) continue;
    cli_sb_printf(md, "| *%s, published (%s)* |", p->kernel, p->source);
    for (size_t mi = 0; mi < g->M; mi++) {
      const rp_pub_t *q = rp_pub_pass(p->recipe, g->masks.v[mi]);
      for (size_t ni = 0; ni < g->N; ni++)
        cli_sb_printf(md, " %s |", q && rp_pub_measured_at(q, g->ns.v[ni]) ? q->text : "not run");
    }
    cli_sb_printf(md, "\n");
  }
}

static void pass_table(cli_sb_t *md, const rp_t4_t *g) {
  cli_sb_printf(md, "### Pass rule |a - b| <= 0.01 + 0.01 |b| on every element of o, dq, dk, dv\n\n| recipe |");
  rp_md_grid_header(md, &g->masks, &g->ns, "");
  for (size_t ri = 0; ri < g->R; ri++) {
    cli_sb_printf(md, "| %s |", g->rec.v[ri]);
    for (size_t mi = 0; mi < g->M; mi++)
      for (size_t ni = 0; ni < g->N; ni++) {
        char what[64];
        int nf = rp_t4_fails(g, ri, mi, ni, what, sizeof what);
        if (nf < 0)
          cli_sb_printf(md, " - |");
        else if (nf == 0)
          cli_sb_printf(md, " pass |");
        else
          cli_sb_printf(md, " FAIL %s |", what);
      }
    cli_sb_printf(md, "\n");
  }
  if (!rp_t4_has_paper(g)) {
    cli_sb_printf(md, "\n");
    return;
  }
  published_pass_rows(md, g);
  cli_sb_printf(md,
                "\nThe published rows are the Blackwell FlashAttention paper's statement (REFERENCES.md "
                "[blackwell-fa] section 5.3) that every output and gradient of both kernels meets this rule at "
                "its six lengths 1024..32768, dense and causal; \"not run\" marks lengths it did not measure.\n\n");
}

static void rel_l2_table(cli_sb_t *md, const rp_t4_t *g, size_t t) {
  char b1[32], b2[32];
  cli_sb_printf(md, "### rel_l2 of %s (%s)\n\n| recipe | mask |", rp_tensors[t],
                g->S > 1 ? "mean over seeds; max in brackets" : "one seed");
  rp_md_length_header(md, &g->ns);
  for (size_t ri = 0; ri < g->R; ri++)
    for (size_t mi = 0; mi < g->M; mi++) {
      size_t any = 0;
      for (size_t ni = 0; ni < g->N; ni++)
        any += rp_t4_cell(g, ri, mi, ni, t)->k;
      if (!any) continue;
      cli_sb_printf(md, "| %s | %s |", g->rec.v[ri], g->masks.v[mi]);
      for (size_t ni = 0; ni < g->N; ni++) {
        const rp_cell_t *a = rp_t4_cell(g, ri, mi, ni, t);
        rp_fmt_e(b1, sizeof b1, rp_t4_mean(g, ri, mi, ni, t));
        rp_fmt_e(b2, sizeof b2, a->k ? a->max : NAN);
        if (a->k > 1)
          cli_sb_printf(md, " %s [%s]%s |", b1, b2, a->nonfinite ? " (NaN/Inf)" : "");
        else
          cli_sb_printf(md, " %s%s |", b1, a->nonfinite ? " (NaN/Inf)" : a->err ? " (refused)" : "");
      }
      cli_sb_printf(md, "\n");
    }
  cli_sb_printf(md, "\n");
}

static void fa_rule_table(cli_sb_t *md, const rp_t4_t *g) {
  if (g->ref < 0) {
    cli_sb_printf(md, "### Flash-attention test rule\n\nNot evaluated: no recipe of this sweep computes the naive "
                      "same-precision reference of the rule (the numerics of the preset `naive-bf16`, "
                      "lib/score.h); add it to --variants.\n\n");
    return;
  }
  cli_sb_printf(md,
                "### Flash-attention test rule: worst max_abs / the naive reference's max_abs, as a fraction of the "
                "limit (2 for o, 3 for the gradients; worst over tensors and seeds; reference: `%s`, the recipe "
                "whose numerics are lib/score's naive BF16 reference)\n\n| recipe | mask |",
                g->rec.v[g->ref]);
  rp_md_length_header(md, &g->ns);
  for (size_t ri = 0; ri < g->R; ri++) {
    if ((int)ri == g->ref) continue;
    for (size_t mi = 0; mi < g->M; mi++) {
      size_t any = 0;
      for (size_t ni = 0; ni < g->N; ni++)
        any += rp_t4_cell(g, ri, mi, ni, 0)->k;
      if (!any) continue;
      cli_sb_printf(md, "| %s | %s |", g->rec.v[ri], g->masks.v[mi]);
      for (size_t ni = 0; ni < g->N; ni++) {
        double w = rp_t4_fa_fraction(g, ri, mi, ni);
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

static double cell_seconds(const rp_t4_t *g, size_t mi, size_t ni) {
  double s = g->t_oracle[mi * g->N + ni] / (double)g->k_oracle[mi * g->N + ni];
  for (size_t ri = 0; ri < g->R; ri++) {
    size_t ix = (ri * g->M + mi) * g->N + ni;
    if (g->k_emul[ix]) s += g->t_emul[ix] / (double)g->k_emul[ix];
  }
  return s;
}

/* Seconds of the grid as run, and extrapolated to n = 32768 from the largest length run (the oracle and the
   emulation grow like n^2). */
static void timing_totals(cli_sb_t *md, const rp_t4_t *g) {
  double run_s = 0, full_s = 0;
  for (size_t mi = 0; mi < g->M; mi++)
    for (size_t ni = 0; ni < g->N; ni++) {
      if (!g->k_oracle[mi * g->N + ni]) continue;
      double cs = cell_seconds(g, mi, ni);
      run_s += cs * (double)g->S;
      if (ni == g->N - 1 && rp_t4_has_paper(g)) /* the paper's lengths: for a grid shaped like its Table 4 */
        for (double n2 = 2 * g->ns.v[ni]; n2 <= 32768; n2 *= 2)
          full_s += cs * (double)g->S * (n2 / g->ns.v[ni]) * (n2 / g->ns.v[ni]);
    }
  cli_sb_printf(md, "\nThis grid took about %.0f s of cell time (sum over cells, one at a time)", run_s);
  if (full_s > 0)
    cli_sb_printf(md,
                  "; the lengths up to 32768 would add about %.0f s (%.1f h), scaling the largest length run by n^2 "
                  "(measured under the load of this run)",
                  full_s, full_s / 3600);
  cli_sb_printf(md,
                ".\n\nA cached oracle (a rerun over the same fixtures) shows the time to read it back. The oracle "
                "and the emulation grow like n^2 (causal about half).\n\n");
}

static void timings(cli_sb_t *md, const rp_t4_t *g) {
  cli_sb_printf(md, "### Where the time goes (seconds per cell, mean; the oracle once per cell, shared by every "
                    "recipe)\n\n| mask | n | oracle |");
  for (size_t ri = 0; ri < g->R; ri++)
    cli_sb_printf(md, " %s |", g->rec.v[ri]);
  cli_sb_printf(md, "\n| --- | --- | --- |");
  for (size_t ri = 0; ri < g->R; ri++)
    cli_sb_printf(md, " --- |");
  cli_sb_printf(md, "\n");
  for (size_t mi = 0; mi < g->M; mi++)
    for (size_t ni = 0; ni < g->N; ni++) {
      if (!g->k_oracle[mi * g->N + ni]) continue;
      cli_sb_printf(md, "| %s | %.0f | %.3g |", g->masks.v[mi], g->ns.v[ni],
                    g->t_oracle[mi * g->N + ni] / (double)g->k_oracle[mi * g->N + ni]);
      for (size_t ri = 0; ri < g->R; ri++) {
        size_t ix = (ri * g->M + mi) * g->N + ni;
        if (g->k_emul[ix])
          cli_sb_printf(md, " %.3g |", g->t_emul[ix] / (double)g->k_emul[ix]);
        else
          cli_sb_printf(md, " - |");
      }
      cli_sb_printf(md, "\n");
    }
  timing_totals(md, g);
}

void rp_render_table4(cli_sb_t *md, rp_plotter_t *pl, const rp_t4_t *g) {
  if (rp_t4_has_paper(g))
    cli_sb_printf(md,
                  "## Accuracy grid `%s` (shaped like Table 4 of the Blackwell FlashAttention paper, REFERENCES.md "
                  "[blackwell-fa])\n\n",
                  g->tag);
  else
    cli_sb_printf(md, "## Accuracy grid `%s`\n\n", g->tag);
  rp_prov_md(md, &g->prov, g->dir);
  cli_sb_printf(md,
                "Inputs q, k, v, dO are N(0,1) (times sigma where a panel names one) rounded to BF16, d = %s, "
                "%zu seed%s per length and panel; errors are against the MPFR-certified oracle. o is the forward "
                "output, dq, dk, "
                "dv the backward gradients.\n\n",
                g->d, g->S, g->S > 1 ? "s" : "");
  rp_render_variants(md, pl, g);
  pass_table(md, g);
  for (size_t i = 0; i < rp_pub_count(); i++) {
    const rp_pub_t *p = rp_pub_row(i);
    /* one block per recipe the published table names (tlx, fa2), once each, when the sweep ran it */
    int first = 1;
    for (size_t j = 0; j < i; j++)
      if (rp_pub_row(j)->recipe && p->recipe && strcmp(rp_pub_row(j)->recipe, p->recipe) == 0) first = 0;
    if (p->recipe && first && rp_strs_find(&g->rec, p->recipe) >= 0) rp_render_published(md, g, p->recipe);
  }
  for (size_t t = 0; t < RP_NT; t++)
    rel_l2_table(md, g, t);
  fa_rule_table(md, g);
  timings(md, g);
  rp_render_table4_plots(md, pl, g);
}
