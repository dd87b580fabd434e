/* attnacc: the aggregation step of the report for table4-shaped sweeps: results.csv rows folded into cells
 * (recipe x mask x n x tensor) with mean/max rel_l2, pass verdicts, the flash-attention rule and timings. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnacc.h"
#include "report/report.h"

const char *const rp_tensors[RP_NT] = {"o", "dq", "dk", "dv"};

/* Column indices of the rows the aggregation reads. */
typedef struct {
  int recipe, hash, n, mask, tensor, rel_l2, pass, nan, inf, max_abs, seed, s_oracle, s_emul, error;
  rp_panel_cols_t panel;
} cols_t;

const char *const rp_extra_axes[RP_NEXTRA] = {"d", "heads", "kv_heads", "sigma"};

void rp_panel_cols(rp_panel_cols_t *p, const aa_results_t *c) {
  p->mask = aa_results_col(c, "mask");
  for (int x = 0; x < RP_NEXTRA; x++) {
    int col = aa_results_col(c, rp_extra_axes[x]), varies = 0;
    for (size_t r = 1; col >= 0 && r < c->nrows && !varies; r++)
      varies = strcmp(aa_results_cell(c, r, col), aa_results_cell(c, 0, col)) != 0;
    p->extra[x] = varies ? col : -1;
  }
}

int rp_panel_folded(const rp_panel_cols_t *p) {
  for (int x = 0; x < RP_NEXTRA; x++)
    if (p->extra[x] >= 0) return 1;
  return 0;
}

const char *rp_panel_of(char *buf, size_t cap, const aa_results_t *c, const rp_panel_cols_t *p, size_t r) {
  size_t used = (size_t)snprintf(buf, cap, "%s", aa_results_cell(c, r, p->mask));
  for (int x = 0; x < RP_NEXTRA && used < cap; x++)
    if (p->extra[x] >= 0)
      used +=
          (size_t)snprintf(buf + used, cap - used, " %s=%s", rp_extra_axes[x], aa_results_cell(c, r, p->extra[x]));
  return buf;
}

static void find_cols(cols_t *k, const aa_results_t *c) {
  k->recipe = aa_results_col(c, "recipe"), k->hash = aa_results_col(c, "recipe_hash"), k->n = aa_results_col(c, "n");
  k->mask = aa_results_col(c, "mask"), k->tensor = aa_results_col(c, "tensor"),
  k->rel_l2 = aa_results_col(c, "rel_l2");
  k->pass = aa_results_col(c, "pass"), k->nan = aa_results_col(c, "nan"), k->inf = aa_results_col(c, "inf");
  k->max_abs = aa_results_col(c, "max_abs"), k->seed = aa_results_col(c, "seed");
  k->s_oracle = aa_results_col(c, "seconds_oracle"), k->s_emul = aa_results_col(c, "seconds_emul");
  k->error = aa_results_col(c, "error");
  rp_panel_cols(&k->panel, c);
}

static int tensor_index(const char *t) {
  for (int i = 0; i < RP_NT; i++)
    if (strcmp(t, rp_tensors[i]) == 0) return i;
  return -1;
}

/* The recipe whose numerics (its text without the name) are the naive same-precision reference of the
   flash-attention rule, as lib/score defines it (aa_score_naive_recipe): found by what it computes, whatever
   it is called. -1 when meta.json lists no such recipe. */
static int find_reference(const rp_t4_t *g) {
  aa_recipe_t naive;
  aa_error_t err = {{0}};
  char probe[2], *text;
  int found = -1;
  if (aa_score_naive_recipe(&naive, AA_FMT_BF16, &err) != AA_OK) return -1;
  size_t need = aa_recipe_format(probe, sizeof probe, &naive);
  if ((text = malloc(need + 1)) == NULL) return -1;
  aa_recipe_format(text, need + 1, &naive);
  for (size_t i = 0; i < g->R && found < 0; i++) {
    const rp_recipe_meta_t *m = rp_meta_recipe(&g->meta, g->rec.v[i]);
    if (m != NULL && rp_meta_same_numerics(m->text, text)) found = (int)i;
  }
  free(text);
  return found;
}

/* First pass: the axes (recipes with their hashes, masks dense and causal first, lengths, seeds). */
static void collect_axes(rp_t4_t *g, const aa_results_t *c, const cols_t *k) {
  char panel[160];
  if (!rp_panel_folded(&k->panel)) rp_strs_add(&g->masks, "dense"), rp_strs_add(&g->masks, "causal");
  for (size_t r = 0; r < c->nrows; r++) {
    size_t before = g->rec.n;
    rp_strs_add(&g->rec, aa_results_cell(c, r, k->recipe));
    if (g->rec.n > before) {
      char **h = realloc(g->hash.v, g->rec.n * sizeof *h);
      if (h == NULL || (h[g->hash.n] = strdup(aa_results_cell(c, r, k->hash))) == NULL) {
        if (h != NULL) g->hash.v = h;
        g->oom = 1;
        continue;
      }
      g->hash.v = h;
      g->hash.n++;
    }
    rp_strs_add(&g->masks, rp_panel_of(panel, sizeof panel, c, &k->panel, r));
    rp_nums_add(&g->ns, aa_results_num(aa_results_cell(c, r, k->n)));
    rp_nums_add(&g->seeds, aa_results_num(aa_results_cell(c, r, k->seed)));
  }
  if (g->rec.oom || g->masks.oom || g->ns.oom || g->seeds.oom) g->oom = 1;
  g->R = g->rec.n, g->M = g->masks.n, g->N = g->ns.n, g->S = g->seeds.n ? g->seeds.n : 1;
}

/* Where a row belongs: 0 and the indices, or -1 for a row outside the grid (unknown tensor). */
static int row_index(const rp_t4_t *g, const aa_results_t *c, const cols_t *k, size_t r, size_t ix[5]) {
  char panel[160];
  int ri = rp_strs_find(&g->rec, aa_results_cell(c, r, k->recipe)),
      mi = rp_strs_find(&g->masks, rp_panel_of(panel, sizeof panel, c, &k->panel, r)),
      ni = rp_nums_find(&g->ns, aa_results_num(aa_results_cell(c, r, k->n))),
      si = rp_nums_find(&g->seeds, aa_results_num(aa_results_cell(c, r, k->seed))),
      ti = tensor_index(aa_results_cell(c, r, k->tensor));
  if (ri < 0 || mi < 0 || ni < 0 || ti < 0) return -1;
  ix[0] = (size_t)ri, ix[1] = (size_t)mi, ix[2] = (size_t)ni, ix[3] = (size_t)ti, ix[4] = si < 0 ? 0 : (size_t)si;
  return 0;
}

/* The reference's max_abs per (mask, n, seed, tensor), NaN where it has no row. */
static double *reference_max_abs(const rp_t4_t *g, const aa_results_t *c, const cols_t *k) {
  size_t total = g->M * g->N * g->S * RP_NT, ix[5];
  double *v = malloc((total ? total : 1) * sizeof *v);
  if (v == NULL) return NULL;
  for (size_t i = 0; i < total; i++)
    v[i] = NAN;
  for (size_t r = 0; r < c->nrows && g->ref >= 0; r++)
    if (row_index(g, c, k, r, ix) == 0 && ix[0] == (size_t)g->ref)
      v[((ix[1] * g->N + ix[2]) * g->S + ix[4]) * RP_NT + ix[3]] = aa_results_num(aa_results_cell(c, r, k->max_abs));
  return v;
}

static void add_row(rp_t4_t *g, const aa_results_t *c, const cols_t *k, size_t r, const size_t ix[5], double ref) {
  rp_cell_t *a = rp_t4_cell(g, ix[0], ix[1], ix[2], ix[3]);
  double e = aa_results_num(aa_results_cell(c, r, k->rel_l2)), mx = aa_results_num(aa_results_cell(c, r, k->max_abs));
  size_t rm = (ix[0] * g->M + ix[1]) * g->N + ix[2];
  a->k++;
  g->rel[(((ix[0] * g->M + ix[1]) * g->N + ix[2]) * RP_NT + ix[3]) * g->S + ix[4]] = e;
  if (aa_results_cell(c, r, k->error)[0] != '\0') a->err = 1;
  if (!isnan(e)) {
    a->sum += e;
    if (!(e <= a->max)) a->max = e;
  }
  if (aa_results_num(aa_results_cell(c, r, k->pass)) != 1) a->fail = 1;
  if (aa_results_num(aa_results_cell(c, r, k->nan)) > 0 || aa_results_num(aa_results_cell(c, r, k->inf)) > 0)
    a->nonfinite = 1;
  if (!isnan(ref)) {
    double ratio = mx == 0 && ref == 0 ? 0 : mx / ref;
    if (isnan(a->fa_worst) || ratio > a->fa_worst || isnan(ratio)) a->fa_worst = ratio;
  }
  if (ix[3] == 0) { /* timings once per (recipe, cell): on the o row */
    g->t_emul[rm] += aa_results_num(aa_results_cell(c, r, k->s_emul));
    g->k_emul[rm]++;
    if (ix[0] == 0) {
      g->t_oracle[ix[1] * g->N + ix[2]] += aa_results_num(aa_results_cell(c, r, k->s_oracle));
      g->k_oracle[ix[1] * g->N + ix[2]]++;
    }
  }
}

int rp_t4_aggregate(rp_t4_t *g, const char *dir, const char *tag, const aa_results_t *c) {
  cols_t k;
  double *ref;
  size_t ix[5], cells;
  memset(g, 0, sizeof *g);
  g->dir = dir;
  snprintf(g->tag, sizeof g->tag, "%s", tag);
  find_cols(&k, c);
  snprintf(g->d, sizeof g->d, "%s",
           k.panel.extra[0] >= 0                     ? "per panel"
           : aa_results_col(c, "d") >= 0 && c->nrows ? aa_results_cell(c, 0, aa_results_col(c, "d"))
                                                     : "?");
  rp_meta_read(&g->meta, dir);
  rp_provenance(&g->prov, dir, &g->meta, c);
  collect_axes(g, c, &k);
  cells = g->R * g->M * g->N;
  g->cell = calloc(cells * RP_NT + 1, sizeof *g->cell);
  g->rel = malloc((cells * RP_NT * g->S + 1) * sizeof *g->rel);
  g->t_emul = calloc(cells + 1, sizeof *g->t_emul);
  g->k_emul = calloc(cells + 1, sizeof *g->k_emul);
  g->t_oracle = calloc(g->M * g->N + 1, sizeof *g->t_oracle);
  g->k_oracle = calloc(g->M * g->N + 1, sizeof *g->k_oracle);
  if (g->oom || !g->cell || !g->rel || !g->t_emul || !g->k_emul || !g->t_oracle || !g->k_oracle)
    return g->oom = 1, -1;
  g->ref = find_reference(g);
  if ((ref = reference_max_abs(g, c, &k)) == NULL) return g->oom = 1, -1;
  for (size_t i = 0; i < cells * RP_NT; i++)
    g->cell[i].fa_worst = NAN;
  for (size_t i = 0; i < cells * RP_NT * g->S; i++)
    g->rel[i] = NAN;
  for (size_t r = 0; r < c->nrows; r++)
    if (row_index(g, c, &k, r, ix) == 0)
      add_row(g, c, &k, r, ix, ref[((ix[1] * g->N + ix[2]) * g->S + ix[4]) * RP_NT + ix[3]]);
  free(ref);
  return 0;
}

void rp_t4_free(rp_t4_t *g) {
  rp_meta_free(&g->meta);
  rp_strs_free(&g->rec);
  rp_strs_free(&g->hash);
  rp_strs_free(&g->masks);
  rp_nums_free(&g->ns);
  rp_nums_free(&g->seeds);
  free(g->cell), free(g->rel), free(g->t_emul), free(g->k_emul), free(g->t_oracle), free(g->k_oracle);
  memset(g, 0, sizeof *g);
}

rp_cell_t *rp_t4_cell(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, size_t ti) {
  return &g->cell[((ri * g->M + mi) * g->N + ni) * RP_NT + ti];
}

double rp_t4_mean(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, size_t ti) {
  const rp_cell_t *a = rp_t4_cell(g, ri, mi, ni, ti);
  return a->k ? a->sum / (double)a->k : NAN;
}

int rp_t4_fails(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, char *what, size_t cap) {
  size_t used = 0, k = 0;
  int nfail = 0;
  if (cap) what[0] = '\0';
  for (size_t t = 0; t < RP_NT; t++) {
    const rp_cell_t *a = rp_t4_cell(g, ri, mi, ni, t);
    k += a->k;
    if (a->fail && used < cap) {
      used += (size_t)snprintf(what + used, cap - used, "%s%s", used ? ", " : "", rp_tensors[t]);
      nfail++;
    }
  }
  return k == 0 ? -1 : nfail;
}

double rp_t4_fa_fraction(const rp_t4_t *g, size_t ri, size_t mi, size_t ni) {
  double w = NAN;
  for (size_t t = 0; t < RP_NT; t++) {
    /* AA_METRICS_FA_FACTOR_*: 2 for the forward output, 3 for the gradients ([fa2] tests) */
    double f =
        rp_t4_cell(g, ri, mi, ni, t)->fa_worst / (t == 0 ? AA_METRICS_FA_FACTOR_FWD : AA_METRICS_FA_FACTOR_BWD);
    if (isnan(w) || f > w || isnan(f)) w = f;
  }
  return w;
}

double rp_t4_rel(const rp_t4_t *g, size_t ri, size_t mi, size_t ni, size_t ti, size_t si) {
  return g->rel[(((ri * g->M + mi) * g->N + ni) * RP_NT + ti) * g->S + si];
}

int rp_t4_base(const rp_t4_t *g, size_t ri) {
  const char *name = g->rec.v[ri], *colon = strchr(name, ':');
  for (size_t bi = 0; colon && bi < g->R; bi++)
    if (bi != ri && strlen(g->rec.v[bi]) == (size_t)(colon - name) && strncmp(g->rec.v[bi], name, colon - name) == 0)
      return (int)bi;
  return -1;
}

int rp_t4_has_paper(const rp_t4_t *g) {
  for (size_t i = 0; i < rp_pub_count(); i++)
    if (rp_pub_row(i)->recipe && rp_strs_find(&g->rec, rp_pub_row(i)->recipe) >= 0) return 1;
  return 0;
}

void rp_t4_ratio(double *mean, double *lo, double *hi, const rp_t4_t *g, size_t ri, size_t bi, size_t mi, size_t ni,
                 size_t ti) {
  double sum = 0;
  size_t k = 0, m0 = mi == RP_ALL ? 0 : mi, m1 = mi == RP_ALL ? g->M : mi + 1, n0 = mi == RP_ALL ? 0 : ni,
         n1 = mi == RP_ALL ? g->N : ni + 1;
  *lo = *hi = NAN;
  for (size_t m = m0; m < m1; m++)
    for (size_t n = n0; n < n1; n++)
      for (size_t si = 0; si < g->S; si++) {
        double q = rp_t4_rel(g, ri, m, n, ti, si) / rp_t4_rel(g, bi, m, n, ti, si);
        if (!isfinite(q)) continue; /* a seed one of them lacks, or a zero base error */
        sum += q, k++;
        if (!(q >= *lo)) *lo = q;
        if (!(q <= *hi)) *hi = q;
      }
  *mean = k ? sum / (double)k : NAN;
}
