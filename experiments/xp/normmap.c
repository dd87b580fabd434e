/* attnacc: the `normmap` experiment: where the fixed shift and the guarded causal route break
 * ([blackwell-fa] 3.1, 5.4). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xp/xp.h"

#define MAX_LIST 16
#define MAX_REC 8

static const cli_opt_t params[] = {
    {"n", "N[,N...]", "1024,4096,16384", "sequence lengths"},
    {"d", "D[,D...]", "64,128", "head dimensions"},
    {"sigma", "X[,X...]", "1,2,3,3.5,4,4.5", "input scales: q and k drawn sigma*N(0,1), v and dO N(0,1)"},
    {"seeds", "K", "3", "seeds 1..K of the input draw (the same draws as attnacc run --seed S --sigma X)"},
    {"masks", "dense,causal", "dense,causal", "masks to map"},
    {"dense", "SPEC[,SPEC...]", "fa2,recip,recip:fwd.rowsum_rounded=off",
     "recipes run on dense cells (presets, recipe files or NAME:key=value,... as --variants)"},
    {"causal", "SPEC[,SPEC...]", "fa2,recip-causal", "recipes run on causal cells (as --dense)"},
    {"shift", "B", "preset's (0)", "fwd.shift of the fixed-shift recipes, log2 units"},
    {"rows", "M", "0 = all", "evaluate only the last M query rows when n > M (exact for those rows; see --help)"},
    {"reference", "oracle|fp64", "oracle",
     "what rel_l2 is measured against: the MPFR-backed oracle, or the exact-fp64 recipe (fast; see --help)"},
    {"oracle", "mpfr|fast", "fast", "oracle path"},
    {"oracle-target", "2^-E|X", "2^-24",
     "certified relative accuracy of every oracle element (2^-96..2^-8; see --help)"},
    {"cache", "DIR|none", "OUT/oracle-cache", "on-disk oracle cache (shared by sweeps over the same fixtures)"},
    {"oracle-cache", "DIR", "OUT/oracle-cache", "older name of --cache"},
};

static const char description[] =
    "Map where the normalisation variants of the Blackwell FlashAttention paper (Stashuk,\n"
    "Yu, Shah; REFERENCES.md [blackwell-fa] sections 3.1, 3.2) break. Each cell (mask, n,\n"
    "d, sigma, seed) draws q, k as sigma*N(0,1) and v, dO as N(0,1) (bf16; the streams of\n"
    "attnacc run, so `run --seed S --sigma X` reproduces a cell), runs the oracle once\n"
    "and every recipe of its mask, and writes one CSV row per recipe and output\n"
    "(o, dq, dk, dv): rel_l2 and max_abs against the oracle, NaN/Inf counts, the pass\n"
    "rule, q_rows (the query rows evaluated: n, or M with --rows M), the forward tiles flagged by the range checks, "
    "the rows recovered to LSE,\n"
    "and the oracle's row LSE range in log2 units (lse2_max, lse2_min: the fixed shift\n"
    "b overflows when a row LSE reaches b + 128 and underflows below b - 126).\n"
    "Scaled scores have standard deviation sigma^2 whatever d; their tails are heavier\n"
    "for smaller d (a sum of d products of normals).\n\n"
    "--rows M keeps the cost at M x n per cell: the problem holds the last M query\n"
    "rows of the length-n problem (rows n-M..n-1, drawn exactly as in the full\n"
    "problem) against all n keys; causal rows keep their masks through sequence\n"
    "bounds (row i sees keys 0..n-M+i). O, dQ and the row statistics are those of\n"
    "the full problem's rows; dK and dV hold these rows' contributions only.\n\n"
    "--reference fp64 replaces the oracle by the exact-fp64 recipe run on the same\n"
    "inputs (every format binary64): not an independent witness, but tests/tnorm and\n"
    "tests/tattn check it against long-double references to ~1e-15, eleven orders\n"
    "below the BF16 errors mapped here; it costs one emulation instead of the\n"
    "oracle's MPFR recomputes, which dominate at n_k = 16384.\n\n"
    "The oracle is certified to --oracle-target 2^-24 per element here (not the\n"
    "library's 2^-48): six orders below the errors mapped, and it spares most MPFR\n"
    "recomputes of rows dominated by one key (sigma >= 4), where dP - D cancels;\n"
    "column oracle_target records it (0 with --reference fp64).\n\n"
    "Columns: recipe, tensor, rel_l2, max_abs, nan, inf, pass, q_rows, fwd_tiles,\n"
    "tiles_flagged, rows_recovered, nonfinite, lse2_max, lse2_min, oracle_cached,\n"
    "oracle_bound (the oracle's certified relative bound of the tensor), oracle_uncertified;\n"
    "timings seconds_oracle, seconds_emul. Default folder: results/normmap.\n\n"
    "After the sweep a summary is printed: per n the sigma where the fixed shift\n"
    "breaks (overflow or underflow, from NaN/Inf and the LSE range), per (n, d) where\n"
    "the guarded route starts recovering, and dq rel_l2 of the recipes.";

typedef struct {
  char name[64];
  aa_recipe_t r;
} rec_t;

/* The experiment's state (xp_ctx_t.priv): recipes per mask and the
   settings of the cells, and the lists the summary walks. */
typedef struct {
  rec_t dense[MAX_REC], causal[MAX_REC];
  size_t ndense, ncausal;
  size_t rows;
  int ref_fp64;
  double shift;
  int64_t nv[MAX_LIST], dv[MAX_LIST];
  long nl[MAX_LIST], dl[MAX_LIST];
  double sv[MAX_LIST];
  size_t nn, nd, nsg;
} nm_t;

static int make_recipe(rec_t *out, const char *spec, int have_shift, double shift, aa_error_t *err) {
  /* A preset, a recipe file or NAME:key=value,... (aa_recipe_from_spec):
     the default recip:fwd.rowsum_rounded=off measures what section 3.5's
     rounded weights (which need not sum to one) cost. */
  int st = aa_recipe_from_spec(&out->r, spec, err);
  if (st != AA_OK) return st;
  if (have_shift) out->r.fwd_shift = shift;
  snprintf(out->name, sizeof out->name, "%s", out->r.name);
  return aa_recipe_check(&out->r, err);
}

static int set_row(aa_sweep_rows_t *rows, const char *recipe, const char *tensor, const aa_metrics_t *m,
                   const aa_attn_result_t *res, size_t q_rows, int nonfinite, double lmax, double lmin, double t_or,
                   double t_em, int hit, double ref_bound, size_t uncertified) {
  int st = aa_sweep_row_new(rows);
  if (st == AA_OK) st = aa_sweep_set_str(rows, "recipe", recipe);
  if (st == AA_OK) st = aa_sweep_set_str(rows, "tensor", tensor);
  if (st == AA_OK) st = aa_sweep_set_double(rows, "rel_l2", m->rel_l2);
  if (st == AA_OK) st = aa_sweep_set_double(rows, "max_abs", m->max_abs);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "nan", (int64_t)m->nan);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "inf", (int64_t)m->inf);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "pass", m->pass);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "q_rows", (int64_t)q_rows);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "fwd_tiles", (int64_t)res->fwd_q_tiles);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "tiles_flagged", (int64_t)res->tiles_flagged);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "rows_recovered", (int64_t)res->rows_recovered);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "nonfinite", nonfinite);
  if (st == AA_OK) st = aa_sweep_set_double(rows, "lse2_max", lmax);
  if (st == AA_OK) st = aa_sweep_set_double(rows, "lse2_min", lmin);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "oracle_cached", hit);
  if (st == AA_OK) st = aa_sweep_set_double(rows, "oracle_bound", ref_bound);
  if (st == AA_OK) st = aa_sweep_set_int(rows, "oracle_uncertified", (int64_t)uncertified);
  if (st == AA_OK) st = aa_sweep_set_double(rows, "seconds_oracle", t_or);
  if (st == AA_OK) st = aa_sweep_set_double(rows, "seconds_emul", t_em);
  return st;
}

/* Copy rows [r0, r0 + m) of a [1, n, d] tensor. */
static int take_rows(aa_tensor_t *dst, const aa_tensor_t *src, size_t r0, size_t m) {
  size_t shape[3] = {1, m, src->shape[2]};
  int st = aa_tensor_alloc(dst, 3, shape, src->fmt);
  if (st == AA_OK) memcpy(dst->data, src->data + r0 * src->shape[2], m * src->shape[2] * sizeof(double));
  return st;
}

/* The exact-fp64 recipe's outputs dressed as an oracle result (val, and
   its FP32/BF16 roundings for the ULP metrics). The relerr_bound is a
   documented estimate, not a certificate: sums of n binary64 terms, about
   n 2^-53 relative to the sum of magnitudes. */
static int fp64_reference(aa_oracle_result_t *orc, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                          const aa_tensor_t *v, const aa_tensor_t *dO, aa_error_t *err) {
  aa_recipe_t r;
  aa_attn_result_t res;
  int st = aa_recipe_preset(&r, "exact-fp64", err);
  if (st == AA_OK) st = aa_attn_run(&res, pb, &r, q, k, v, dO, err);
  if (st != AA_OK) return st;
  memset(orc, 0, sizeof *orc);
  aa_oracle_out_t *outs[5] = {&orc->o, &orc->lse, &orc->dq, &orc->dk, &orc->dv};
  aa_tensor_t *ts[5] = {&res.o, &res.lse, &res.dq, &res.dk, &res.dv};
  for (int t = 0; t < 5 && st == AA_OK; t++) {
    outs[t]->val = *ts[t];
    memset(ts[t], 0, sizeof *ts[t]);
    outs[t]->relerr_bound = (double)pb->n_k * 0x1p-53;
    st = aa_tensor_alloc(&outs[t]->fp32, outs[t]->val.ndim, outs[t]->val.shape, AA_FMT_FP64);
    if (st == AA_OK) st = aa_tensor_alloc(&outs[t]->bf16, outs[t]->val.ndim, outs[t]->val.shape, AA_FMT_FP64);
    if (st != AA_OK) break;
    size_t n = aa_tensor_numel(&outs[t]->val);
    memcpy(outs[t]->fp32.data, outs[t]->val.data, n * sizeof(double));
    memcpy(outs[t]->bf16.data, outs[t]->val.data, n * sizeof(double));
    aa_tensor_round(&outs[t]->fp32, AA_FMT_FP32);
    aa_tensor_round(&outs[t]->bf16, AA_FMT_BF16);
  }
  aa_attn_result_free(&res);
  if (st != AA_OK) {
    aa_oracle_result_free(orc);
    return aa_error_set(err, st, "fp64 reference: out of memory");
  }
  return AA_OK;
}

/* The last m causal rows of a length-n problem as sequence bounds: row i sees keys 0..n-m+i. */
static int causal_rows(aa_problem_t *pb, int32_t **bmin, int32_t **bmax, size_t m, size_t n, aa_error_t *err) {
  *bmin = malloc(m * sizeof **bmin);
  *bmax = malloc(m * sizeof **bmax);
  if (*bmin == NULL || *bmax == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  for (size_t i = 0; i < m; i++) {
    (*bmin)[i] = 0;
    (*bmax)[i] = (int32_t)(n - m + i + 1); /* the causal row n-m+i */
  }
  pb->bound_min = *bmin;
  pb->bound_max = *bmax;
  return AA_OK;
}

/* Row LSE range in log2 units: the fixed shift b keeps the row sum in
   [2^-126, 2^128) iff every row LSE lies in (b - 126, b + 128). */
static void lse_range(double *lmax, double *lmin, const aa_oracle_result_t *orc, size_t m) {
  *lmax = -INFINITY;
  *lmin = INFINITY;
  for (size_t i = 0; i < m; i++) {
    double L = orc->lse.val.data[i] * 1.4426950408889634;
    if (!isfinite(L)) continue;
    if (L > *lmax) *lmax = L;
    if (L < *lmin) *lmin = L;
  }
}

static int eval_cell(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *vctx) {
  xp_ctx_t *ctx = vctx;
  const nm_t *cx = ctx->priv;
  aa_error_t *err = aa_sweep_rows_error(rows);
  const char *mask = aa_cell_str(cell, "mask", "dense");
  size_t n = (size_t)aa_cell_int(cell, "n", 1024), d = (size_t)aa_cell_int(cell, "d", 128);
  double sigma = aa_cell_double(cell, "sigma", 1);
  uint64_t seed = (uint64_t)aa_cell_int(cell, "seed", 1);
  int causal = strcmp(mask, "causal") == 0;
  size_t m = cx->rows && cx->rows < n ? cx->rows : n;
  cli_inputs_t A = {0}, B = {0};
  aa_tensor_t q = {0}, dO = {0};
  int32_t *bmin = NULL, *bmax = NULL;
  aa_oracle_result_t orc;
  int have_orc = 0, hit = 0, st;
  memset(&orc, 0, sizeof orc);
  xp_cell_threads(ctx);

  /* q, k at sigma; v, dO at 1 (same streams, ids 2 and 3). */
  st = cli_inputs_draw(&A, seed, 0, sigma, n, d, 1, 1, 0, AA_FMT_BF16, err);
  if (st == AA_OK) st = cli_inputs_draw(&B, seed, 0, 1.0, n, d, 1, 1, 0, AA_FMT_BF16, err);
  if (st == AA_OK) st = take_rows(&q, &A.q, n - m, m);
  if (st == AA_OK) st = take_rows(&dO, &B.dO, n - m, m);
  if (st != AA_OK) goto out;
  aa_problem_t pb;
  aa_problem_init(&pb, m, n, d, 1, 1);
  if (causal && m == n)
    pb.causal = 1;
  else if (causal && (st = causal_rows(&pb, &bmin, &bmax, m, n, err)) != AA_OK)
    goto out;
  double t0 = cli_now();
  if (cx->ref_fp64)
    st = fp64_reference(&orc, &pb, &q, &A.k, &B.v, &dO, err);
  else {
    aa_oracle_opts_t oo;
    xp_oracle_opts(&oo, ctx);
    st = xp_oracle(&orc, &hit, ctx, &pb, &q, &A.k, &B.v, &dO, &oo, err);
  }
  double t_or = cli_now() - t0;
  if (st != AA_OK) goto out;
  have_orc = 1;
  double lmax, lmin;
  lse_range(&lmax, &lmin, &orc, m);
  const rec_t *recs = causal ? cx->causal : cx->dense;
  size_t nrec = causal ? cx->ncausal : cx->ndense;
  for (size_t ri = 0; ri < nrec && st == AA_OK; ri++) {
    /* the evaluation path of run and score (cli_run_variant): the o, dq, dk, dv rows */
    static const char *const names[4] = {"o", "dq", "dk", "dv"};
    const aa_oracle_out_t *refs[4] = {&orc.o, &orc.dq, &orc.dk, &orc.dv};
    cli_inputs_t in = {.q = q, .k = A.k, .v = B.v, .dO = dO};
    aa_attn_result_t res;
    cli_variant_t v;
    memset(&v, 0, sizeof v);
    st = cli_run_variant(&v, &res, &recs[ri].r, &pb, &in, &orc, err);
    for (int t = 0; t < 4 && st == AA_OK; t++)
      st = set_row(rows, recs[ri].name, names[t], &v.out[t].m, &res, m, v.nonfinite, lmax, lmin, t_or, v.seconds, hit,
                   refs[t]->relerr_bound, orc.n_uncertified);
    aa_attn_result_free(&res);
    cli_variant_free(&v);
  }
out:
  if (have_orc) aa_oracle_result_free(&orc);
  cli_inputs_free(&A);
  cli_inputs_free(&B);
  aa_tensor_free(&q);
  aa_tensor_free(&dO);
  free(bmin);
  free(bmax);
  return st;
}

/* ---- summary from results.csv ---- */
typedef struct {
  char mask[8], recipe[64], tensor[8];
  long n, d, seed;
  double sigma, rel_l2, lmax, lmin;
  long tiles, flagged, recovered, nonfinite;
} row_t;

static row_t *read_rows(const char *path, size_t *count) {
  aa_results_t c;
  row_t *rs;
  if (aa_results_read(&c, path, NULL) != 0) return NULL;
  int c_mask = aa_results_col(&c, "mask"), c_n = aa_results_col(&c, "n"), c_d = aa_results_col(&c, "d"),
      c_sig = aa_results_col(&c, "sigma"), c_seed = aa_results_col(&c, "seed"), c_rec = aa_results_col(&c, "recipe"),
      c_ten = aa_results_col(&c, "tensor"), c_rel = aa_results_col(&c, "rel_l2"),
      c_lmax = aa_results_col(&c, "lse2_max"), c_lmin = aa_results_col(&c, "lse2_min"),
      c_t = aa_results_col(&c, "fwd_tiles"), c_fl = aa_results_col(&c, "tiles_flagged"),
      c_rr = aa_results_col(&c, "rows_recovered"), c_nf = aa_results_col(&c, "nonfinite");
  if (c_mask < 0 || c_n < 0 || c_d < 0 || c_sig < 0 || c_seed < 0 || c_rec < 0 || c_ten < 0 || c_rel < 0 ||
      c_lmax < 0 || c_lmin < 0 || c_t < 0 || c_fl < 0 || c_rr < 0 || c_nf < 0 ||
      (rs = calloc(c.nrows ? c.nrows : 1, sizeof *rs)) == NULL) {
    aa_results_free(&c);
    return NULL;
  }
  for (size_t i = 0; i < c.nrows; i++) {
    row_t *r = &rs[i];
    snprintf(r->mask, sizeof r->mask, "%s", aa_results_cell(&c, i, c_mask));
    snprintf(r->recipe, sizeof r->recipe, "%s", aa_results_cell(&c, i, c_rec));
    snprintf(r->tensor, sizeof r->tensor, "%s", aa_results_cell(&c, i, c_ten));
    r->n = atol(aa_results_cell(&c, i, c_n));
    r->d = atol(aa_results_cell(&c, i, c_d));
    r->seed = atol(aa_results_cell(&c, i, c_seed));
    r->sigma = aa_results_num(aa_results_cell(&c, i, c_sig));
    r->rel_l2 = aa_results_num(aa_results_cell(&c, i, c_rel));
    r->lmax = aa_results_num(aa_results_cell(&c, i, c_lmax));
    r->lmin = aa_results_num(aa_results_cell(&c, i, c_lmin));
    r->tiles = atol(aa_results_cell(&c, i, c_t));
    r->flagged = atol(aa_results_cell(&c, i, c_fl));
    r->recovered = atol(aa_results_cell(&c, i, c_rr));
    r->nonfinite = atol(aa_results_cell(&c, i, c_nf));
  }
  *count = c.nrows;
  aa_results_free(&c);
  return rs;
}

/* What the summary walks: the rows of results.csv, the lists of the grid, the two recipes it reads. */
typedef struct {
  const row_t *rs;
  size_t nr;
  const long *ns, *ds;
  size_t nn, nd;
  const double *sg;
  size_t nsg;
  const char *fixed, *guarded;
  double shift;
} nm_lists_t;

/* (a) where the fixed shift breaks, dense: the last clean sigma and the first with NaN/Inf per n */
static void summary_fixed(FILE *o, const nm_lists_t *L) {
  const row_t *rs = L->rs;
  size_t nr = L->nr;
  size_t nn = L->nn;
  size_t ns_ = L->nsg;
  const long *ns = L->ns;
  const double *sg = L->sg;
  const char *fixed = L->fixed;
  double shift = L->shift;
  /* (a) the fixed shift, dense */
  for (size_t in = 0; in < nn; in++) {
    double first_bad = NAN, last_good = NAN, lmax_bad = NAN, lmax_good = -INFINITY, lmin_all = INFINITY;
    double lmin_bad = NAN;
    int any = 0;
    for (size_t is = 0; is < ns_; is++) {
      int bad = 0, seen = 0;
      double lmx = -INFINITY, lmn = INFINITY;
      for (size_t i = 0; i < nr; i++) {
        const row_t *r = &rs[i];
        if (strcmp(r->mask, "dense") || strcmp(r->recipe, fixed) || r->n != ns[in] || r->sigma != sg[is] ||
            strcmp(r->tensor, "o"))
          continue;
        seen = 1;
        bad |= r->nonfinite != 0;
        lmx = fmax(lmx, r->lmax);
        lmn = fmin(lmn, r->lmin);
      }
      if (!seen) continue;
      any = 1;
      lmin_all = fmin(lmin_all, lmn);
      if (bad && isnan(first_bad)) {
        first_bad = sg[is];
        lmax_bad = lmx;
        lmin_bad = lmn;
      }
      if (!bad && isnan(first_bad)) {
        last_good = sg[is];
        lmax_good = lmx;
      }
    }
    if (!any) continue;
    fprintf(o, "  fixed shift (%s, dense) n=%ld: ", fixed, ns[in]);
    if (!isnan(last_good))
      fprintf(o, "finite up to sigma=%g (max row LSE %.1f log2)", last_good, lmax_good);
    else
      fprintf(o, "no clean sigma");
    if (!isnan(first_bad))
      fprintf(o, "; NaN/Inf from sigma=%g (max row LSE %.1f, min %.1f log2: %s)\n", first_bad, lmax_bad, lmin_bad,
              lmax_bad >= shift + 128   ? "overflow"
              : lmin_bad <= shift - 126 ? "underflow"
                                        : "inside the LSE window: weight-level failure");
    else
      fprintf(o, "; no NaN/Inf in the map\n");
    fprintf(o, "    underflow: min row LSE over the map %.1f log2 %s b - 126 = %g: %s\n", lmin_all,
            lmin_all > shift - 126 ? ">" : "<=", shift - 126,
            lmin_all > shift - 126 ? "not reached (dense rows sum >= n weights, LSE >~ log2 n + mean score)"
                                   : "reached");
  }
}

/* (b) the guarded route, causal: flagged tiles per (n, d) over sigma */
static void summary_guarded(FILE *o, const nm_lists_t *L) {
  const row_t *rs = L->rs;
  size_t nr = L->nr;
  size_t nn = L->nn;
  size_t nd = L->nd;
  size_t ns_ = L->nsg;
  const long *ns = L->ns;
  const long *ds = L->ds;
  const double *sg = L->sg;
  const char *guarded = L->guarded;
  /* (b) the guarded route, causal */
  for (size_t in = 0; in < nn; in++)
    for (size_t id = 0; id < nd; id++) {
      int any = 0;
      char line[1024];
      size_t used = 0;
      double first = NAN;
      long nf_tot = 0;
      line[0] = '\0';
      for (size_t is = 0; is < ns_; is++) {
        long fl = 0, tl = 0;
        int seen = 0;
        for (size_t i = 0; i < nr; i++) {
          const row_t *r = &rs[i];
          if (strcmp(r->mask, "causal") || strcmp(r->recipe, guarded) || r->n != ns[in] || r->d != ds[id] ||
              r->sigma != sg[is] || strcmp(r->tensor, "o"))
            continue;
          seen = 1;
          fl += r->flagged;
          tl += r->tiles;
          nf_tot += r->nonfinite;
        }
        if (!seen) continue;
        any = 1;
        if (fl > 0 && isnan(first)) first = sg[is];
        if (used < sizeof line)
          used += (size_t)snprintf(line + used, sizeof line - used, " s=%g:%ld/%ld", sg[is], fl, tl);
      }
      if (!any) continue;
      fprintf(o, "  guarded (%s, causal) n=%ld d=%ld: flagged/tiles over seeds%s; ", guarded, ns[in], ds[id], line);
      if (isnan(first))
        fprintf(o, "never flagged");
      else
        fprintf(o, "recovery from sigma=%g", first);
      fprintf(o, "; cells with NaN/Inf: %ld\n", nf_tot);
    }
}

/* (c) the observation of [blackwell-fa] section 5.4 (d = 128 never flagged, d = 64 recovered), at each (n, sigma) */
static void summary_recovery(FILE *o, const nm_lists_t *L) {
  const row_t *rs = L->rs;
  size_t nr = L->nr;
  size_t nn = L->nn;
  size_t nd = L->nd;
  size_t ns_ = L->nsg;
  const long *ns = L->ns;
  const double *sg = L->sg;
  const char *guarded = L->guarded;
  /* (c) the observation of [blackwell-fa] section 5.4 */
  if (nd >= 2) {
    fprintf(o, "  [blackwell-fa] 5.4 (d=128 never flagged, d=64 recovered at 16384 and 32768 tokens), at each (n, "
               "sigma):\n");
    for (size_t in = 0; in < nn; in++)
      for (size_t is = 0; is < ns_; is++) {
        long f64 = -1, f128 = -1;
        for (size_t i = 0; i < nr; i++) {
          const row_t *r = &rs[i];
          if (strcmp(r->mask, "causal") || strcmp(r->recipe, guarded) || r->n != ns[in] || r->sigma != sg[is] ||
              strcmp(r->tensor, "o"))
            continue;
          if (r->d == 64) f64 = (f64 < 0 ? 0 : f64) + r->flagged;
          if (r->d == 128) f128 = (f128 < 0 ? 0 : f128) + r->flagged;
        }
        if (f64 < 0 || f128 < 0) continue;
        if (f64 > 0 || f128 > 0)
          fprintf(o, "    n=%ld sigma=%g: flagged tiles d=64 %ld, d=128 %ld%s\n", ns[in], sg[is], f64, f128,
                  f64 > 0 && f128 == 0 ? "  <- d=64 recovers, d=128 does not" : "");
      }
  }
}

/* (d) accuracy: dq rel_l2, geometric mean over seeds and d, per recipe */
static void summary_dq(FILE *o, const nm_lists_t *L) {
  const row_t *rs = L->rs;
  size_t nr = L->nr;
  size_t nn = L->nn;
  size_t ns_ = L->nsg;
  const long *ns = L->ns;
  const double *sg = L->sg;
  /* (d) accuracy: dq rel_l2, mean over seeds and d, per recipe */
  fprintf(o, "  dq rel_l2 (geometric mean over seeds and d; '-' where an output is not finite):\n");
  const char *masks[2] = {"dense", "causal"};
  for (int mk = 0; mk < 2; mk++) {
    char recs[MAX_REC][64];
    size_t nrec = 0;
    for (size_t i = 0; i < nr; i++) {
      if (strcmp(rs[i].mask, masks[mk])) continue;
      size_t k = 0;
      while (k < nrec && strcmp(recs[k], rs[i].recipe))
        k++;
      if (k == nrec && nrec < MAX_REC) snprintf(recs[nrec++], 64, "%s", rs[i].recipe);
    }
    if (nrec == 0) continue;
    fprintf(o, "    %-6s %-6s %-6s", masks[mk], "n", "sigma");
    for (size_t k = 0; k < nrec; k++)
      fprintf(o, " %-16s", recs[k]);
    fprintf(o, "\n");
    for (size_t in = 0; in < nn; in++)
      for (size_t is = 0; is < ns_; is++) {
        int seen = 0;
        char buf[512];
        size_t used = 0;
        for (size_t k = 0; k < nrec; k++) {
          double lg = 0;
          int cnt = 0, bad = 0;
          for (size_t i = 0; i < nr; i++) {
            const row_t *r = &rs[i];
            if (strcmp(r->mask, masks[mk]) || strcmp(r->recipe, recs[k]) || r->n != ns[in] || r->sigma != sg[is] ||
                strcmp(r->tensor, "dq"))
              continue;
            if (r->nonfinite || !(r->rel_l2 > 0) || !isfinite(r->rel_l2))
              bad = 1;
            else {
              lg += log(r->rel_l2);
              cnt++;
            }
          }
          if (cnt == 0 && !bad) continue;
          seen = 1;
          if (bad || cnt == 0)
            used += (size_t)snprintf(buf + used, sizeof buf - used, " %-16s", "-");
          else
            used += (size_t)snprintf(buf + used, sizeof buf - used, " %-16.4e", exp(lg / cnt));
        }
        if (seen) fprintf(o, "    %-6s %-6ld %-6g%s\n", "", ns[in], sg[is], buf);
      }
  }
}

static void summary(FILE *o, const row_t *rs, size_t nr, const long *ns, size_t nn, const long *ds, size_t nd,
                    const double *sg, size_t ns_, const char *fixed, const char *guarded, double shift) {
  const nm_lists_t L = {rs, nr, ns, ds, nn, nd, sg, ns_, fixed, guarded, shift};
  fprintf(o,
          "\nsummary (fixed shift b = %g log2 units: row sums stay in range while every row LSE is in "
          "(b - 126, b + 128) = (%g, %g))\n",
          shift, shift - 126, shift + 128);
  summary_fixed(o, &L);
  summary_guarded(o, &L);
  summary_recovery(o, &L);
  summary_dq(o, &L);
}

static int normmap_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const char *const cols[] = {"recipe",
                                     "tensor",
                                     "rel_l2",
                                     "max_abs",
                                     "nan",
                                     "inf",
                                     "pass",
                                     "q_rows",
                                     "fwd_tiles",
                                     "tiles_flagged",
                                     "rows_recovered",
                                     "nonfinite",
                                     "lse2_max",
                                     "lse2_min",
                                     "oracle_cached",
                                     "oracle_bound",
                                     "oracle_uncertified",
                                     "seconds_oracle@",
                                     "seconds_emul@"};
  const char *ms[2], *drs[MAX_REC], *crs[MAX_REC], *s;
  char mbuf[64], drbuf[512], crbuf[512];
  size_t nm, ndr, ncr, nseeds = 3;
  int have_shift = 0, rc;
  nm_t *cx = calloc(1, sizeof *cx);
  if ((ctx->priv = cx) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  if (xp_opt_ints(cx->nv, &cx->nn, MAX_LIST, o, "n", "1024,4096,16384", 1, 1 << 20) ||
      xp_opt_ints(cx->dv, &cx->nd, MAX_LIST, o, "d", "64,128", 1, 4096) ||
      xp_opt_doubles(cx->sv, &cx->nsg, MAX_LIST, o, "sigma", "1,2,3,3.5,4,4.5", 0, 1e6, 1) ||
      xp_opt_strs(ms, &nm, 2, mbuf, sizeof mbuf, o, "masks", "dense,causal") ||
      xp_opt_specs(drs, &ndr, MAX_REC, drbuf, sizeof drbuf, o, "dense", "fa2,recip,recip:fwd.rowsum_rounded=off") ||
      xp_opt_specs(crs, &ncr, MAX_REC, crbuf, sizeof crbuf, o, "causal", "fa2,recip-causal") ||
      xp_opt_size(&nseeds, o, "seeds", 1, 1000000) || xp_opt_size(&cx->rows, o, "rows", 0, 1u << 30) ||
      xp_opt_double(&cx->shift, o, "shift", -1e4, 1e4, 0))
    return AA_EINVAL;
  for (size_t i = 0; i < cx->nn; i++)
    cx->nl[i] = (long)cx->nv[i];
  for (size_t i = 0; i < cx->nd; i++)
    cx->dl[i] = (long)cx->dv[i];
  for (size_t i = 0; i < nm; i++)
    if (strcmp(ms[i], "dense") && strcmp(ms[i], "causal"))
      return aa_error_set(err, AA_EINVAL, "--masks: '%s' is not dense or causal", ms[i]);
  have_shift = xp_opt(o, "shift") != NULL;
  if ((s = xp_opt(o, "reference")) != NULL) {
    if (strcmp(s, "fp64") == 0)
      cx->ref_fp64 = 1;
    else if (strcmp(s, "oracle") != 0)
      return aa_error_set(err, AA_EINVAL, "--reference: '%s' is not oracle or fp64", s);
  }
  for (size_t i = 0; i < ndr; i++)
    if (make_recipe(&cx->dense[i], drs[i], have_shift, cx->shift, err) != AA_OK ||
        xp_ctx_add_recipe(ctx, &cx->dense[i].r, err) != AA_OK)
      return aa_error_set(err, AA_EINVAL, "--dense: %.400s", err->msg);
  for (size_t i = 0; i < ncr; i++)
    if (make_recipe(&cx->causal[i], crs[i], have_shift, cx->shift, err) != AA_OK ||
        xp_ctx_add_recipe(ctx, &cx->causal[i].r, err) != AA_OK)
      return aa_error_set(err, AA_EINVAL, "--causal: %.400s", err->msg);
  cx->ndense = ndr;
  cx->ncausal = ncr;
  /* The map measures BF16 errors of 1e-4 and up: a reference certified to
     2^-24 (6e-8) per element changes none of its digits, and spares most of
     the MPFR recomputes that the default 2^-48 needs where one key dominates
     a row and dP - D cancels (sigma >= 4). */
  if (xp_opt(o, "oracle-target") == NULL) ctx->oracle_target = 0x1p-24;
  if (!have_shift)
    for (size_t i = 0; i < ndr; i++)
      if (cx->dense[i].r.fwd_softmax == AA_SOFTMAX_FIXED_SHIFT) cx->shift = cx->dense[i].r.fwd_shift;
  if ((rc = aa_sweep_axis_str(sw, "mask", ms, nm, 0, err)) ||
      (rc = aa_sweep_axis_int(sw, "n", cx->nv, cx->nn, 0, err)) ||
      (rc = aa_sweep_axis_int(sw, "d", cx->dv, cx->nd, 0, err)) ||
      (rc = aa_sweep_axis_double(sw, "sigma", cx->sv, cx->nsg, 0, err)) || (rc = xp_axis_seeds(sw, nseeds, err)) ||
      (rc = xp_axis_fixed_double(sw, "oracle_target", cx->ref_fp64 ? 0 : ctx->oracle_target, err)) ||
      (rc = xp_columns(sw, cols, sizeof cols / sizeof cols[0], err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

static int normmap_finish(const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  const nm_t *cx = ctx->priv;
  const char *fixed = "recip", *guarded = "recip-causal";
  char path[4096];
  size_t nr = 0;
  row_t *rs;
  snprintf(path, sizeof path, "%s/" AA_SWEEP_RESULTS_CSV, o->out_dir);
  if ((rs = read_rows(path, &nr)) == NULL) return aa_error_set(err, AA_EIO, "cannot read %s for the summary", path);
  for (size_t i = 0; i < cx->ndense; i++)
    if (cx->dense[i].r.fwd_softmax == AA_SOFTMAX_FIXED_SHIFT) {
      fixed = cx->dense[i].name;
      break;
    }
  for (size_t i = 0; i < cx->ncausal; i++)
    if (cx->causal[i].r.fwd_softmax == AA_SOFTMAX_GUARDED) {
      guarded = cx->causal[i].name;
      break;
    }
  summary(stdout, rs, nr, cx->nl, cx->nn, cx->dl, cx->nd, cx->sv, cx->nsg, fixed, guarded, cx->shift);
  free(rs);
  printf("attnacc %s (git %s)\n", AA_VERSION, AA_GIT_HASH);
  return AA_OK;
}

const xp_experiment_t xp_normmap = {
    .name = "normmap",
    .summary = "where the fixed shift and the guarded causal route break: sigma x n x d x seeds map",
    .description = description,
    .inputs = "q, k sigma*N(0,1), v, dO N(0,1), bf16, from the seed coordinate itself (as attnacc run --seed S "
              "--sigma X)",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .declare = normmap_declare,
    .eval = eval_cell,
    .finish = normmap_finish,
    .release = xp_free_priv,
};
