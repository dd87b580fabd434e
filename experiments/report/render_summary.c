/* attnacc: the summary that opens the report: which recipes fail which rule where, NaN/Inf, and ours beside the
 * published numbers (ratios computed from the one published table, only where the source measured). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"

/* A cell predicate: 1 when recipe ri at (mi, ni) is to be named, with what to say after "mask n" in what. */
typedef int (*cell_pred)(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, char *what, size_t cap);

static int fails_pass(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, char *what, size_t cap) {
  char t[64];
  if (rp_t4_fails(g, ri, mi, ni, t, sizeof t) <= 0) return 0;
  snprintf(what, cap, ": %s", t);
  return 1;
}

static int fails_fa(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, char *what, size_t cap) {
  double w = rp_t4_fa_fraction(g, ri, mi, ni);
  if (w <= 1 || isnan(w)) return 0;
  snprintf(what, cap, " (%.3g of the limit)", w);
  return 1;
}

static int has_nonfinite(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, char *what, size_t cap) {
  int any = 0;
  for (size_t t = 0; t < RP_NT; t++)
    any |= rp_t4_cell(g, ri, mi, ni, t)->nonfinite;
  if (cap) what[0] = '\0';
  return any;
}

/* "causal 2048: dq, dk; causal 4096: dk" for the cells of recipe ri where pred holds (md NULL: count only). */
static size_t where(cli_sb_t *md, const rp_t4_t *g, size_t ri, cell_pred pred) {
  size_t nf = 0;
  for (size_t mi = 0; mi < g->M; mi++)
    for (size_t ni = 0; ni < g->N; ni++) {
      char what[80];
      if (!pred(g, ri, mi, ni, what, sizeof what)) continue;
      if (md) cli_sb_printf(md, "%s%s %.0f%s", nf ? "; " : "", g->masks.v[mi], g->ns.v[ni], what);
      nf++;
    }
  return nf;
}

/* "- **title**: every recipe passes." or a recipe | where table of the failing ones. */
static void failing_table(cli_sb_t *md, const rp_t4_t *g, const char *title, const char *none, cell_pred pred,
                          int skip_ref) {
  size_t nfail = 0;
  for (size_t ri = 0; ri < g->R; ri++)
    if (!(skip_ref && (int)ri == g->ref) && where(NULL, g, ri, pred) > 0) nfail++;
  cli_sb_printf(md, "**%s**: ", title);
  if (nfail == 0) {
    cli_sb_printf(md, "%s\n\n", none);
    return;
  }
  cli_sb_printf(md, "%zu of %zu recipes, at:\n\n| recipe | where (mask n: outputs) |\n| --- | --- |\n", nfail,
                g->R - (skip_ref && g->ref >= 0));
  for (size_t ri = 0; ri < g->R; ri++) {
    if ((skip_ref && (int)ri == g->ref) || where(NULL, g, ri, pred) == 0) continue;
    cli_sb_printf(md, "| %s | ", g->rec.v[ri]);
    where(md, g, ri, pred);
    cli_sb_printf(md, " |\n");
  }
  cli_sb_printf(md, "\n");
}

/* One summary row for a published rel_l2 figure: ours at the same length, and the ratio, or why there is none. */
static void published_rel_l2(cli_sb_t *md, const rp_t4_t *g, const rp_pub_t *p) {
  int ri = rp_strs_find(&g->rec, p->recipe), mi = rp_strs_find(&g->masks, p->mask), ti = -1;
  char b[32];
  for (int t = 0; t < RP_NT; t++)
    if (strcmp(rp_tensors[t], p->what) == 0) ti = t;
  for (size_t j = 0; j < p->nns; j++) {
    int ni = rp_nums_find(&g->ns, p->ns[j]);
    double e =
        ri < 0 || mi < 0 || ni < 0 || ti < 0 ? NAN : rp_t4_mean(g, (size_t)ri, (size_t)mi, (size_t)ni, (size_t)ti);
    cli_sb_printf(md, "| %s: %s %s rel_l2 at %.0f | %s | %s | `%s` |", p->kernel, p->mask, p->what, p->ns[j],
                  p->source, p->text, p->recipe);
    if (ri < 0)
      cli_sb_printf(md, " not in this sweep | |\n");
    else if (isnan(e) && g->N > 0 && mi >= 0 && ti >= 0) {
      /* ours at the largest length run, for orientation: no ratio across lengths */
      rp_fmt_e(b, sizeof b, rp_t4_mean(g, (size_t)ri, (size_t)mi, g->N - 1, (size_t)ti));
      cli_sb_printf(md, " not run (largest length here: %.0f, where ours is %s) | |\n", g->ns.v[g->N - 1], b);
    } else if (isnan(e))
      cli_sb_printf(md, " not run | |\n");
    else {
      rp_fmt_e(b, sizeof b, e);
      cli_sb_printf(md, " %s | %.3f |\n", b, e / p->value);
    }
  }
}

/* One summary row for a published "passes everywhere" statement: how many of the cells both measured pass. */
static void published_pass(cli_sb_t *md, const rp_t4_t *g, const rp_pub_t *p) {
  int ri = rp_strs_find(&g->rec, p->recipe), mi = rp_strs_find(&g->masks, p->mask);
  size_t both = 0, pass = 0;
  cli_sb_printf(md, "| %s: every output passes the rule, %s, at %.0f..%.0f | %s | %s (%zu lengths) | `%s` |",
                p->kernel, p->mask, p->ns[0], p->ns[p->nns - 1], p->source, p->text, p->nns, p->recipe);
  for (size_t j = 0; ri >= 0 && mi >= 0 && j < p->nns; j++) {
    int ni = rp_nums_find(&g->ns, p->ns[j]);
    char what[64];
    int nf = ni < 0 ? -1 : rp_t4_fails(g, (size_t)ri, (size_t)mi, (size_t)ni, what, sizeof what);
    if (nf < 0) continue;
    both++;
    pass += nf == 0;
  }
  if (ri < 0)
    cli_sb_printf(md, " not in this sweep | |\n");
  else if (both == 0)
    cli_sb_printf(md, " no common length run | |\n");
  else
    cli_sb_printf(md, " passes at %zu of the %zu lengths run | %s |\n", pass, both,
                  pass == both ? "agrees" : "disagrees");
}

void rp_summary_grid(cli_sb_t *md, const rp_t4_t *g) {
  cli_sb_printf(md, "### Grid `%s`: n = %.0f..%.0f, ", g->tag, g->N ? g->ns.v[0] : 0, g->N ? g->ns.v[g->N - 1] : 0);
  for (size_t mi = 0; mi < g->M; mi++) /* the panels: masks, with the shape axes that vary */
    cli_sb_printf(md, "%s%s", mi == 0 ? "" : mi + 1 == g->M ? " and " : ", ", g->masks.v[mi]);
  cli_sb_printf(md, ", %zu recipes, %zu seed%s, d = %s\n\n", g->R, g->S, g->S > 1 ? "s" : "", g->d);
  failing_table(md, g,
                "Pass rule |a - b| <= 0.01 + 0.01 |b| on o, dq, dk, dv (the Blackwell FlashAttention paper's rule, "
                "REFERENCES.md [blackwell-fa] section 5.3); failing",
                "none: every recipe passes in every cell.", fails_pass, 0);
  if (g->ref >= 0)
    failing_table(md, g,
                  "Flash-attention test rule (max error at most 2x (o) or 3x (gradients) that of the naive BF16 "
                  "reference, here the recipe with its numerics)",
                  "every recipe passes in every cell.", fails_fa, 1);
  else
    cli_sb_printf(md, "**Flash-attention test rule**: not evaluated (no recipe computes the naive BF16 reference; "
                      "add `naive-bf16` to --variants).\n\n");
  failing_table(md, g, "NaN or Inf in an output", "none.", has_nonfinite, 0);
  rp_summary_variants(md, g);
  if (!rp_t4_has_paper(g)) {
    cli_sb_printf(md, "No recipe of this grid models a kernel with published numbers (`tlx`, `fa4`): the "
                      "published comparison is left out.\n\n");
    return;
  }
  cli_sb_printf(md, "**Ours beside the published numbers** (ratios computed from the published table, only at the "
                    "lengths the source measured):\n\n| published | source | value | ours | our value | ours / "
                    "published |\n| --- | --- | --- | --- | --- | --- |\n");
  for (size_t i = 0; i < rp_pub_count(); i++) {
    const rp_pub_t *p = rp_pub_row(i);
    if (p->metric == RP_PUB_REL_L2)
      published_rel_l2(md, g, p);
    else if (p->metric == RP_PUB_PASS)
      published_pass(md, g, p);
  }
  cli_sb_printf(md, "\n");
}

/* Per recipe, the smallest log2 sigma at which an output fails the rule, and at which NaN or Inf appears. */
void rp_summary_nanmap(cli_sb_t *md, const char *tag, const aa_results_t *c) {
  int cr = aa_results_col(c, "recipe"), cg = aa_results_col(c, "log2_sigma"), cp = aa_results_col(c, "pass"),
      cna = aa_results_col(c, "nan"), ci = aa_results_col(c, "inf");
  rp_strs_t rec = {0};
  for (size_t r = 0; r < c->nrows; r++)
    rp_strs_add(&rec, aa_results_cell(c, r, cr));
  cli_sb_printf(md,
                "### NaN / Inf map `%s` (inputs sigma * N(0,1); the smallest sigma over masks, lengths and "
                "outputs)\n\n| recipe | first failing log2 sigma | first "
                "NaN/Inf log2 sigma |\n| --- | --- | --- |\n",
                tag);
  for (size_t i = 0; i < rec.n; i++) {
    double f = NAN, x = NAN;
    for (size_t r = 0; r < c->nrows; r++) {
      double s = aa_results_num(aa_results_cell(c, r, cg));
      if (strcmp(aa_results_cell(c, r, cr), rec.v[i]) != 0) continue;
      if (aa_results_num(aa_results_cell(c, r, cp)) != 1 && !(s >= f)) f = s;
      if ((aa_results_num(aa_results_cell(c, r, cna)) > 0 || aa_results_num(aa_results_cell(c, r, ci)) > 0) &&
          !(s >= x))
        x = s;
    }
    char a[32] = "never", b[32] = "never";
    if (!isnan(f)) snprintf(a, sizeof a, "%.0f", f);
    if (!isnan(x)) snprintf(b, sizeof b, "%.0f", x);
    cli_sb_printf(md, "| %s | %s | %s |\n", rec.v[i], a, b);
  }
  cli_sb_printf(md, "\n");
  rp_strs_free(&rec);
}

/* The construction whose sampled ratio range is nearest the published one, beside it. */
void rp_summary_table3(cli_sb_t *md, const char *tag, const aa_results_t *c) {
  const rp_pub_t *lo = rp_pub_exp("ratio_min"), *hi = rp_pub_exp("ratio_max"), *emax = rp_pub_exp("max_rel_err"),
                 *emean = rp_pub_exp("mean_rel_err");
  int cl = aa_results_col(c, "label") >= 0 ? aa_results_col(c, "label") : aa_results_col(c, "construction"),
      cmin = aa_results_col(c, "s_min_ratio"), cmax = aa_results_col(c, "s_max_ratio"),
      cem = aa_results_col(c, "s_max_rel_err"), cea = aa_results_col(c, "s_mean_rel_err");
  double best = INFINITY, bmin = NAN, bmax = NAN;
  const char *name = NULL;
  cli_sb_printf(md, "### Packed BF16 exponential `%s` (shaped like [blackwell-fa] Table 3)\n\n", tag);
  for (size_t r = 0; r < c->nrows && lo && hi && emax && emean; r++) {
    const char *label = aa_results_cell(c, r, cl);
    double a = aa_results_num(aa_results_cell(c, r, cmin)), b = aa_results_num(aa_results_cell(c, r, cmax));
    double d = fabs(a - lo->value) + fabs(b - hi->value);
    if (strncmp(label, XP_TABLE3_FITTED, strlen(XP_TABLE3_FITTED)) == 0) {
      /* its k and s were searched to match the published min and max: only the error columns are a test */
      double m = aa_results_num(aa_results_cell(c, r, cem)), e = aa_results_num(aa_results_cell(c, r, cea));
      cli_sb_printf(md,
                    "Fitted: `%s` has k and s searched so that its sampled ratio range matches the published %s..%s "
                    "(%s), so %.4f..%.4f agrees by construction. Its independent columns beside the published "
                    "deployed shift: max rel err %.3e (ours / published %.3f), mean rel err %.3e (%.3f).\n\n",
                    label, lo->text, hi->text, lo->source, a, b, m, m / emax->value, e, e / emean->value);
      continue;
    }
    if (strcmp(label, "published") == 0 || !(d < best)) continue;
    best = d, bmin = a, bmax = b, name = label;
  }
  if (name == NULL) {
    cli_sb_printf(md, "No unfitted construction with a sampled ratio range.\n\n");
    return;
  }
  cli_sb_printf(md,
                "Nearest the published ratio range %s..%s among the constructions not fitted to it: `%s`, "
                "%.4f..%.4f (ours / published: %.4f and %.4f).\n\n",
                lo->text, hi->text, name, bmin, bmax, bmin / lo->value, bmax / hi->value);
}
