/* attnacc: the report's section for a nanmap sweep: per recipe, mask and length the scale thresholds at which the
 * rule fails, Inf/NaN appear and the exact result overflows, and the heatmap of plots/nanmap.gp. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

/* The map options of nanmap (--dists, --logit-offsets, --key-pads, --empty-row, --n-q): the axes that vary become
   part of each column's label, next to sigma, so that every condition has a column of its own instead of being
   folded into the worst class of its sigma. */
static const char *const map_axes[] = {"dist", "logit_offset", "key_pad", "empty_row", "n_q"};
#define NMAP_AXES (sizeof map_axes / sizeof map_axes[0])

typedef struct {
  rp_strs_t rec, masks;
  rp_nums_t ns;
  rp_strs_t xs;        /* column labels: log2 sigma, then the varying map axes */
  double *xsig;        /* [G]: the log2 sigma of each column */
  int axis[NMAP_AXES]; /* column of each map axis that varies, else -1 */
  size_t R, M, N, G;
  int d_varies;  /* d is part of the panel names */
  int *cls, *ov; /* [R][M][N][G]: worst class (0 pass, 1 fails rule, 2 Inf, 3 NaN, 4 refused; -1 none), overflow */
} map_t;

static size_t mx(const map_t *m, size_t ri, size_t mi, size_t ni, size_t gi) {
  return ((ri * m->M + mi) * m->N + ni) * m->G + gi;
}

static int nan_class(const aa_results_t *c, size_t r, int cp, int cna, int ci, int cer) {
  if (aa_results_cell(c, r, cer)[0] != '\0') return 4;
  if (aa_results_num(aa_results_cell(c, r, cna)) > 0) return 3;
  if (aa_results_num(aa_results_cell(c, r, ci)) > 0) return 2;
  if (aa_results_num(aa_results_cell(c, r, cp)) != 1) return 1;
  return 0;
}

/* The label of row r's column: "0", "17" without map axes; "17 constant off-200 row" with them (a short word per
   varying axis: the distribution, off=C, pad=P, row for a fully masked row, nq=M). */
static const char *x_label(char *buf, size_t cap, const aa_results_t *c, const map_t *m, int cg, size_t r) {
  double g = aa_results_num(aa_results_cell(c, r, cg));
  /* integers as they are (log2 sigma); a fractional log2 (--sigma 133120: 17.0224...) as the sigma people know */
  size_t used = (size_t)(g == floor(g) ? snprintf(buf, cap, "%.0f", g) : snprintf(buf, cap, "s=%.6g", exp2(g)));
  static const char *const fmt[NMAP_AXES] = {" %s", " off%s", " pad%s", " row%s", " nq%s"};
  for (size_t x = 0; x < NMAP_AXES && used < cap; x++) {
    if (m->axis[x] < 0) continue;
    const char *v = aa_results_cell(c, r, m->axis[x]);
    if (x == 3) v = strcmp(v, "0") ? "" : NULL; /* empty_row: the word "row" when 1, nothing when 0 */
    if (v != NULL) used += (size_t)snprintf(buf + used, cap - used, fmt[x], v);
  }
  return buf;
}

static void find_map_axes(map_t *m, const aa_results_t *c) {
  for (size_t x = 0; x < NMAP_AXES; x++) {
    int col = aa_results_col(c, map_axes[x]), varies = 0;
    for (size_t r = 1; col >= 0 && r < c->nrows && !varies; r++)
      varies = strcmp(aa_results_cell(c, r, col), aa_results_cell(c, 0, col)) != 0;
    m->axis[x] = varies ? col : -1;
  }
}

static int map_build(map_t *m, const aa_results_t *c) {
  int cr = aa_results_col(c, "recipe"), cn = aa_results_col(c, "n"), cg = aa_results_col(c, "log2_sigma"),
      cp = aa_results_col(c, "pass"), cna = aa_results_col(c, "nan"), ci = aa_results_col(c, "inf"),
      cer = aa_results_col(c, "error"), cov = aa_results_col(c, "ref_overflow");
  rp_panel_cols_t pc;
  char panel[160], xl[160];
  memset(m, 0, sizeof *m);
  rp_panel_cols(&pc, c); /* a sweep over several d (or heads, kv_heads) maps each apart */
  m->d_varies = pc.extra[0] >= 0;
  find_map_axes(m, c);
  for (size_t r = 0; r < c->nrows; r++) {
    rp_strs_add(&m->rec, aa_results_cell(c, r, cr));
    rp_strs_add(&m->masks, rp_panel_of(panel, sizeof panel, c, &pc, r));
    rp_nums_add(&m->ns, aa_results_num(aa_results_cell(c, r, cn)));
    rp_strs_add(&m->xs, x_label(xl, sizeof xl, c, m, cg, r));
  }
  m->R = m->rec.n, m->M = m->masks.n, m->N = m->ns.n, m->G = m->xs.n;
  size_t total = m->R * m->M * m->N * m->G;
  m->cls = malloc((total + 1) * sizeof *m->cls);
  m->ov = calloc(total + 1, sizeof *m->ov);
  m->xsig = calloc(m->G + 1, sizeof *m->xsig);
  if (m->rec.oom || m->masks.oom || m->ns.oom || m->xs.oom || !m->cls || !m->ov || !m->xsig) return -1;
  for (size_t i = 0; i < total; i++)
    m->cls[i] = -1;
  for (size_t r = 0; r < c->nrows; r++) {
    int ri = rp_strs_find(&m->rec, aa_results_cell(c, r, cr)),
        mi = rp_strs_find(&m->masks, rp_panel_of(panel, sizeof panel, c, &pc, r)),
        ni = rp_nums_find(&m->ns, aa_results_num(aa_results_cell(c, r, cn))),
        gi = rp_strs_find(&m->xs, x_label(xl, sizeof xl, c, m, cg, r));
    if (ri < 0 || mi < 0 || ni < 0 || gi < 0) continue;
    m->xsig[gi] = aa_results_num(aa_results_cell(c, r, cg));
    size_t ix = mx(m, (size_t)ri, (size_t)mi, (size_t)ni, (size_t)gi);
    int k = nan_class(c, r, cp, cna, ci, cer);
    if (k > m->cls[ix]) m->cls[ix] = k;
    if (aa_results_num(aa_results_cell(c, r, cov)) > 0) m->ov[ix] = 1;
  }
  return 0;
}

/* "a b a c" -> "a 2, b 1, c 1" in order of first appearance (static buffer: the report is single-threaded). */
static const char *site_counts(const char *words) {
  static char out[256];
  char seen[8][24];
  size_t cnt[8] = {0}, k = 0, used = 0;
  for (const char *p = words; *p;) {
    size_t len = strcspn(p, " "), i;
    for (i = 0; i < k && !(strlen(seen[i]) == len && strncmp(seen[i], p, len) == 0); i++)
      ;
    if (i == k && k < 8) snprintf(seen[k++], sizeof seen[0], "%.*s", (int)len, p);
    if (i < k) cnt[i]++;
    p += len + (p[len] == ' ');
  }
  out[0] = '\0';
  for (size_t i = 0; i < k && used < sizeof out; i++)
    used += (size_t)snprintf(out + used, sizeof out - used, "%s%s %zu", i ? ", " : "", seen[i], cnt[i]);
  return out;
}

static void map_free(map_t *m) {
  rp_strs_free(&m->rec), rp_strs_free(&m->masks), rp_nums_free(&m->ns), rp_strs_free(&m->xs);
  free(m->cls), free(m->ov), free(m->xsig);
}

static void threshold_table(cli_sb_t *md, const map_t *m) {
  rp_md_grid_header(md, &m->masks, &m->ns, ": fail / Inf-NaN / exact overflow");
  for (size_t ri = 0; ri < m->R; ri++) {
    cli_sb_printf(md, "| %s |", m->rec.v[ri]);
    for (size_t mi = 0; mi < m->M; mi++)
      for (size_t ni = 0; ni < m->N; ni++) {
        double f = NAN, nf = NAN, o = NAN; /* the smallest log2 sigma of a column in each class */
        for (size_t gi = 0; gi < m->G; gi++) {
          int k = m->cls[mx(m, ri, mi, ni, gi)];
          double x = m->xsig[gi];
          if (k >= 1 && !(f <= x)) f = x;
          if (k >= 2 && !(nf <= x)) nf = x;
          if (m->ov[mx(m, ri, mi, ni, gi)] && !(o <= x)) o = x;
        }
        char a[16] = "-", b[16] = "-", d[16] = "-";
        if (!isnan(f)) snprintf(a, sizeof a, "%.0f", f);
        if (!isnan(nf)) snprintf(b, sizeof b, "%.0f", nf);
        if (!isnan(o)) snprintf(d, sizeof d, "%.0f", o);
        cli_sb_printf(md, " %s / %s / %s |", a, b, d);
      }
    cli_sb_printf(md, "\n");
  }
  cli_sb_printf(md, "\n");
}

/* Heatmap data: one block per mask of "x y class", and the cells whose exact result overflows. */
static void heatmap_data(const map_t *m, cli_sb_t *dat, cli_sb_t *od, char *panels, size_t cap) {
  size_t up = 0;
  for (size_t mi = 0; mi < m->M; mi++) {
    int any = 0;
    if (mi) cli_sb_printf(dat, "\n\n"), cli_sb_printf(od, "\n\n");
    cli_sb_printf(dat, "# %s: x (log2 sigma index) y (recipe, n index) class\n", m->masks.v[mi]);
    cli_sb_printf(od, "# %s: cells whose exact result overflows BF16\n", m->masks.v[mi]);
    for (size_t ri = 0; ri < m->R; ri++)
      for (size_t ni = 0; ni < m->N; ni++)
        for (size_t gi = 0; gi < m->G; gi++) {
          size_t ix = mx(m, ri, mi, ni, gi);
          cli_sb_printf(dat, "%zu %zu %d\n", gi, ri * m->N + ni, m->cls[ix] < 0 ? 4 : m->cls[ix]);
          if (m->ov[ix]) cli_sb_printf(od, "%zu %zu\n", gi, ri * m->N + ni), any = 1;
        }
    if (!any) cli_sb_printf(od, "-1 -1\n");
    if (mi && up + 2 < cap) panels[up++] = ' ';
    for (const char *q = m->masks.v[mi]; up + 2 < cap && *q; q++) /* one word per panel: gnuplot's word() */
      panels[up++] = *q == ' ' ? ',' : *q;
    panels[up] = '\0';
  }
}

/* The x axis's title: log2 sigma, and the map axes that label its columns. */
static const char *x_name(const map_t *m) {
  static char buf[160]; /* the report is single-threaded */
  static const char *const words[NMAP_AXES] = {"distribution", "logit offset", "padded keys",
                                               "row: one query row fully masked", "n_q"};
  int frac = 0; /* a column labelled by sigma itself (x_label) */
  for (size_t gi = 0; gi < m->G && !frac; gi++)
    frac = !strncmp(m->xs.v[gi], "s=", 2);
  size_t used = (size_t)snprintf(buf, sizeof buf, frac ? "log2 sigma (s=: sigma itself)" : "log2 sigma");
  for (size_t x = 0; x < NMAP_AXES && used < sizeof buf; x++)
    if (m->axis[x] >= 0) used += (size_t)snprintf(buf + used, sizeof buf - used, ", %s", words[x]);
  return buf;
}

static void heatmap(cli_sb_t *md, rp_plotter_t *pl, const map_t *m, const char *tag, const rp_prov_t *pv) {
  cli_sb_t dat = {0}, od = {0}, vars = {0}, xt = {0}, yt = {0};
  char name[160], dn[200], on[200], dp[4300], op[4300], panels[512] = "";
  snprintf(name, sizeof name, "%.100s_map", tag);
  snprintf(dn, sizeof dn, "%s.dat", name);
  snprintf(on, sizeof on, "%s_overflow.dat", name);
  heatmap_data(m, &dat, &od, panels, sizeof panels);
  for (size_t gi = 0; gi < m->G; gi++)
    cli_sb_printf(&xt, "%s\"%s\" %zu", gi ? ", " : "", m->xs.v[gi], gi);
  for (size_t ri = 0; ri < m->R; ri++)
    for (size_t ni = 0; ni < m->N; ni++)
      cli_sb_printf(&yt, "%s\"%s n=%.0f\" %zu", ri + ni ? ", " : "", m->rec.v[ri], m->ns.v[ni], ri * m->N + ni);
  snprintf(dp, sizeof dp, "%s/%s", pl->out, dn);
  snprintf(op, sizeof op, "%s/%s", pl->out, on);
  if (rp_write_file(pl->out, dn, &dat) == AA_OK && rp_write_file(pl->out, on, &od) == AA_OK && !xt.oom && !yt.oom) {
    rp_gp_str(&vars, "datafile", dp);
    rp_gp_str(&vars, "ovfile", op);
    cli_sb_printf(&vars, "npanels = %zu\nnx = %zu\nny = %zu\n", m->M, m->G, m->R * m->N);
    rp_gp_str(&vars, "xname", x_name(m));
    rp_gp_str(&vars, "panels", panels);
    rp_gp_str(&vars, "xtic", xt.buf ? xt.buf : "");
    rp_gp_str(&vars, "ytic", yt.buf ? yt.buf : "");
    rp_gp_caption(&vars, pv->caption, 180); /* 1400 pixels at 9 points */
    if (!vars.oom && rp_draw(pl, "nanmap.gp", name, vars.buf))
      cli_sb_printf(md,
                    "![NaN/Inf map](%s.png)\n\n*Figure: class of each cell (worst over o, dq, dk, dv and seeds): "
                    "green pass, yellow finite but failing the rule, orange Inf, red NaN, grey refused; R: the exact "
                    "result overflows BF16; %s; SVG: [%s.svg](%s.svg).*\n\n",
                    name, pv->version, name, name);
  }
  cli_sb_free(&dat), cli_sb_free(&od), cli_sb_free(&vars), cli_sb_free(&xt), cli_sb_free(&yt);
}

/* Per recipe: the cells whose run created a NaN or Inf, by site, and the first of them in results order with its
   sentence (columns first_* of nanmap's map options; absent: nothing). */
static void first_table(cli_sb_t *md, const map_t *m, const aa_results_t *c) {
  int cs = aa_results_col(c, "first_site"), ct = aa_results_col(c, "first_text"), cr = aa_results_col(c, "recipe"),
      cten = aa_results_col(c, "tensor");
  if (cs < 0 || ct < 0 || cr < 0 || cten < 0) return;
  cli_sb_printf(md, "Where the first NaN or Inf of a run was created (one run per cell and recipe; the first "
                    "site in pipeline order, then the smallest (h, i, j)):\n\n| recipe | runs with a NaN/Inf by "
                    "site | first such run |\n|---|---|---|\n");
  for (size_t ri = 0; ri < m->R; ri++) {
    cli_sb_t sites = {0};
    const char *ex = NULL;
    for (size_t r = 0; r < c->nrows; r++) {
      const char *s = aa_results_cell(c, r, cs);
      if (strcmp(aa_results_cell(c, r, cr), m->rec.v[ri]) != 0 || strcmp(aa_results_cell(c, r, cten), "o") != 0 ||
          s[0] == '\0')
        continue;
      if (ex == NULL) ex = aa_results_cell(c, r, ct);
      cli_sb_printf(&sites, "%s ", s);
    }
    cli_sb_printf(md, "| %s | %s | %s |\n", m->rec.v[ri], sites.buf ? site_counts(sites.buf) : "none", ex ? ex : "-");
    cli_sb_free(&sites);
  }
  cli_sb_printf(md, "\n");
}

void rp_render_nanmap(cli_sb_t *md, rp_plotter_t *pl, const char *dir, const char *tag, const aa_results_t *c) {
  map_t m;
  rp_meta_t meta;
  rp_prov_t pv;
  rp_meta_read(&meta, dir);
  rp_provenance(&pv, dir, &meta, c);
  rp_meta_free(&meta);
  if (map_build(&m, c) != 0) {
    cli_sb_printf(md, "## NaN / Inf / overflow map `%s`\n\nOut of memory while reading it.\n\n", tag);
    map_free(&m);
    return;
  }
  cli_sb_printf(md, "## NaN / Inf / overflow map `%s`\n\n", tag);
  rp_prov_md(md, &pv, dir);
  cli_sb_printf(md,
                "Inputs sigma * N(0,1) rounded to BF16 (sigma = 2^log2_sigma, d = %s). Each entry gives, for "
                "one recipe, mask and length, the smallest log2 sigma at which the pass rule fails on some output, "
                "at which an Inf or NaN appears, and at which the exact result itself overflows BF16 (worst over "
                "o, dq, dk, dv and seeds; '-' never on this grid).\n\n| recipe |",
                m.d_varies                                ? "as each panel names"
                : aa_results_col(c, "d") >= 0 && c->nrows ? aa_results_cell(c, 0, aa_results_col(c, "d"))
                                                          : "?");
  threshold_table(md, &m);
  heatmap(md, pl, &m, tag, &pv);
  first_table(md, &m, c);
  map_free(&m);
}
