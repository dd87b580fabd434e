/* attnacc: the verdicts `attnacc sweep` prints at the end of a table4-shaped grid: per recipe, the pass rule, the
 * flash-attention rule, NaN/Inf, and a variant's ratios to its base (the report's aggregation, on stdout). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>

#include "report/report.h"

/* Cells of recipe ri that have rows, and how many of them fail the pass rule / the fa rule / hold NaN or Inf. */
static void count(const rp_t4_t *g, size_t ri, size_t *cells, size_t *fail, size_t *fa_fail, size_t *nonfinite,
                  double *fa_worst) {
  *cells = *fail = *fa_fail = *nonfinite = 0;
  *fa_worst = NAN;
  for (size_t mi = 0; mi < g->M; mi++)
    for (size_t ni = 0; ni < g->N; ni++) {
      char what[64];
      int nf = rp_t4_fails(g, ri, mi, ni, what, sizeof what);
      double w = rp_t4_fa_fraction(g, ri, mi, ni);
      if (nf < 0) continue;
      (*cells)++, *fail += nf > 0;
      for (size_t t = 0; t < RP_NT; t++)
        if (rp_t4_cell(g, ri, mi, ni, t)->nonfinite) {
          (*nonfinite)++;
          break;
        }
      if (!isnan(w)) *fa_fail += w > 1, *fa_worst = isnan(*fa_worst) || w > *fa_worst ? w : *fa_worst;
    }
}

static void variant_line(FILE *f, const rp_t4_t *g, size_t ri, size_t bi) {
  fprintf(f, "    against %s (rel_l2 ratio, mean [min..max] over cells and seeds):", g->rec.v[bi]);
  for (size_t t = 0; t < RP_NT; t++) {
    double m, lo, hi;
    rp_t4_ratio(&m, &lo, &hi, g, ri, bi, RP_ALL, 0, t);
    if (!isnan(m)) fprintf(f, " %s %.3g [%.3g..%.3g]%s", rp_tensors[t], m, lo, hi, t + 1 < RP_NT ? "," : "");
  }
  fprintf(f, "\n");
}

int rp_print_verdicts(FILE *f, const char *dir) {
  aa_results_t c;
  rp_t4_t g;
  aa_error_t err = {{0}};
  if (aa_sweep_results_open(&c, dir, &err) != AA_OK) return -1;
  if (rp_t4_aggregate(&g, dir, "sweep", &c) != 0) {
    rp_t4_free(&g), aa_results_free(&c);
    return -1;
  }
  fprintf(f,
          "verdicts (pass rule |a - b| <= 0.01 + 0.01 |b| on o, dq, dk, dv; fa rule: max error at most 2x (o), 3x "
          "(gradients) that of %s%s):\n",
          g.ref >= 0 ? g.rec.v[g.ref] : "the naive reference", g.ref >= 0 ? "" : ", not in this sweep");
  for (size_t ri = 0; ri < g.R; ri++) {
    size_t cells, fail, fa_fail, nonfinite;
    double w;
    int bi = rp_t4_base(&g, ri);
    count(&g, ri, &cells, &fail, &fa_fail, &nonfinite, &w);
    fprintf(f, "  %s: pass rule %s (%zu of %zu cells fail)", g.rec.v[ri], fail ? "FAIL" : "pass", fail, cells);
    if (!isnan(w) && (int)ri != g.ref)
      fprintf(f, "; fa rule %s (worst %.3g of the limit)", fa_fail ? "FAIL" : "pass", w);
    fprintf(f, "; NaN/Inf in %zu cells%s\n", nonfinite, (int)ri == g.ref ? "; the fa rule's reference" : "");
    if (bi >= 0) variant_line(f, &g, ri, (size_t)bi);
  }
  rp_t4_free(&g);
  aa_results_free(&c);
  return 0;
}
