/* attnacc: tests of the emulated attention pipeline against an independent long-double reference written here. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn.h"
#include "rng.h"
#include "tests.h"

static uint64_t seed;
static double worst_exact = 0;

/* ---- the reference: textbook attention in long double, one row at a time ---- */
typedef struct {
  double *o, *lse, *dq, *dk, *dv, *dsinks;
  double *dsinks_abs; /* [h][s] sum_i |p_sink,i D_i|: the conditioning of dsinks */
  double *pv_abs;     /* [h][i][c] sum_j P_ij |z_ij V_jc|: the conditioning of O */
  double *ds_max;     /* [h][i] max_j over visible keys of the score error budget (see o_bound) */
  double *s_abs;      /* [h][i] max_j |scale * q_i . k_j| */
  double *qk_abs;     /* [h][i] max_j scale * sum_c |q_ic k_jc| */
} ref_t;

static void ref_free(ref_t *r) {
  free(r->o);
  free(r->lse);
  free(r->dq);
  free(r->dk);
  free(r->dv);
  free(r->dsinks);
  free(r->dsinks_abs);
  free(r->pv_abs);
  free(r->ds_max);
  free(r->s_abs);
  free(r->qk_abs);
}

static void reference(ref_t *R, const aa_problem_t *pb, const double *Q, const double *K, const double *V,
                      const double *dO) {
  size_t H = pb->heads, nq = pb->n_q, nk = pb->n_k, d = pb->d, G = pb->heads / pb->kv_heads;
  long double scale = pb->scale_default ? 1.0L / sqrtl((long double)d) : (long double)pb->scale;
  R->o = calloc(H * nq * d, sizeof(double));
  R->lse = calloc(H * nq, sizeof(double));
  R->dq = calloc(H * nq * d, sizeof(double));
  R->dk = calloc(pb->kv_heads * nk * d, sizeof(double));
  R->dv = calloc(pb->kv_heads * nk * d, sizeof(double));
  R->dsinks = calloc(H * (pb->num_sinks + 1), sizeof(double));
  R->dsinks_abs = calloc(H * (pb->num_sinks + 1), sizeof(double));
  R->pv_abs = calloc(H * nq * d, sizeof(double));
  R->ds_max = calloc(H * nq, sizeof(double));
  R->s_abs = calloc(H * nq, sizeof(double));
  R->qk_abs = calloc(H * nq, sizeof(double));
  long double *s = malloc(nk * sizeof *s), *P = malloc(nk * sizeof *P), *dP = malloc(nk * sizeof *dP);
  long double *z = malloc(nk * sizeof *z);
  long double *dkl = calloc(pb->kv_heads * nk * d, sizeof *dkl), *dvl = calloc(pb->kv_heads * nk * d, sizeof *dvl);
  for (size_t h = 0; h < H; h++) {
    size_t g = h / G;
    const double *Kg = K + g * nk * d, *Vg = V + g * nk * d;
    long double dsink[8] = {0}, dsink_abs[8] = {0};
    for (size_t i = 0; i < nq; i++) {
      const double *q = Q + (h * nq + i) * d, *go = dO + (h * nq + i) * d;
      long double m = -INFINITY, sa = 0, qa = 0;
      for (size_t j = 0; j < nk; j++) {
        z[j] = pb->keep == NULL ? 1.0L : (pb->keep[(h * nq + i) * nk + j] ? (long double)pb->keep_scale : 0.0L);
        if (!aa_problem_visible(pb, i, j)) {
          s[j] = -INFINITY;
          continue;
        }
        long double acc = 0, aa = 0;
        for (size_t c = 0; c < d; c++) {
          acc += (long double)q[c] * Kg[j * d + c];
          aa += fabsl((long double)q[c] * Kg[j * d + c]);
        }
        s[j] = acc * scale;
        if (s[j] > m) m = s[j];
        if (fabsl(s[j]) > sa) sa = fabsl(s[j]);
        if (aa * scale > qa) qa = aa * scale;
      }
      R->s_abs[h * nq + i] = (double)sa;
      R->qk_abs[h * nq + i] = (double)qa;
      for (size_t t = 0; t < pb->num_sinks; t++)
        if (pb->sinks[h * pb->num_sinks + t] > m) m = pb->sinks[h * pb->num_sinks + t];
      if (m == -INFINITY) {
        R->lse[h * nq + i] = -INFINITY;
        continue; /* O = 0, gradients 0 */
      }
      long double l = 0;
      for (size_t j = 0; j < nk; j++)
        l += s[j] == -INFINITY ? 0.0L : expl(s[j] - m);
      for (size_t t = 0; t < pb->num_sinks; t++)
        l += expl(pb->sinks[h * pb->num_sinks + t] - m);
      R->lse[h * nq + i] = (double)(m + logl(l));
      for (size_t j = 0; j < nk; j++)
        P[j] = s[j] == -INFINITY ? 0.0L : expl(s[j] - m) / l;
      long double D = 0;
      for (size_t c = 0; c < d; c++) {
        long double o = 0, oa = 0;
        for (size_t j = 0; j < nk; j++) {
          o += P[j] * z[j] * Vg[j * d + c];
          oa += P[j] * fabsl(z[j] * Vg[j * d + c]);
        }
        R->o[(h * nq + i) * d + c] = (double)o;
        R->pv_abs[(h * nq + i) * d + c] = (double)oa;
      }
      for (size_t j = 0; j < nk; j++) {
        long double t = 0;
        for (size_t c = 0; c < d; c++)
          t += (long double)go[c] * Vg[j * d + c];
        dP[j] = z[j] * t;
        D += P[j] * dP[j];
      }
      for (size_t t = 0; t < pb->num_sinks; t++) {
        dsink[t] -= expl(pb->sinks[h * pb->num_sinks + t] - m) / l * D;
        dsink_abs[t] += fabsl(expl(pb->sinks[h * pb->num_sinks + t] - m) / l * D);
      }
      for (size_t j = 0; j < nk; j++) {
        if (P[j] == 0) continue;
        long double ds = P[j] * (dP[j] - D);
        for (size_t c = 0; c < d; c++) {
          dkl[(g * nk + j) * d + c] += scale * ds * q[c];
          dvl[(g * nk + j) * d + c] += P[j] * z[j] * go[c];
        }
      }
      for (size_t c = 0; c < d; c++) {
        long double acc = 0;
        for (size_t j = 0; j < nk; j++)
          if (P[j] != 0) acc += P[j] * (dP[j] - D) * Kg[j * d + c];
        R->dq[(h * nq + i) * d + c] = (double)(scale * acc);
      }
    }
    for (size_t t = 0; t < pb->num_sinks; t++) {
      R->dsinks[h * pb->num_sinks + t] = (double)dsink[t];
      R->dsinks_abs[h * pb->num_sinks + t] = (double)dsink_abs[t];
    }
  }
  for (size_t x = 0; x < pb->kv_heads * nk * d; x++) {
    R->dk[x] = (double)dkl[x];
    R->dv[x] = (double)dvl[x];
  }
  free(s);
  free(P);
  free(dP);
  free(z);
  free(dkl);
  free(dvl);
}

/* ---- helpers ---- */
static void fill(aa_tensor_t *t, size_t a, size_t b, size_t c, aa_fmt_t fmt, uint64_t tag, double sd) {
  size_t shape[3] = {a, b, c};
  aa_tensor_alloc(t, 3, shape, AA_FMT_FP64);
  aa_pcg64_t rng;
  uint64_t tags[1] = {tag};
  aa_rng_derive(&rng, seed, tags, 1);
  for (size_t i = 0; i < a * b * c; i++)
    t->data[i] = sd * aa_pcg64_normal(&rng);
  aa_tensor_round(t, fmt);
}

/* Relative l2 error of n values against the reference (0/0 counts as 0). */
static double rel_l2(const double *x, const double *ref, size_t n) {
  long double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    long double e = (long double)x[i] - ref[i];
    num += e * e;
    den += (long double)ref[i] * ref[i];
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return (double)sqrtl(num / den);
}

static size_t count_nonfinite(const double *x, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    c += !isfinite(x[i]);
  return c;
}

typedef struct {
  aa_tensor_t q, k, v, dO;
} inputs_t;

static void inputs_make(inputs_t *in, const aa_problem_t *pb, aa_fmt_t fmt, uint64_t tag) {
  fill(&in->q, pb->heads, pb->n_q, pb->d, fmt, tag * 4 + 0, 1.0);
  fill(&in->k, pb->kv_heads, pb->n_k, pb->d, fmt, tag * 4 + 1, 1.0);
  fill(&in->v, pb->kv_heads, pb->n_k, pb->d, fmt, tag * 4 + 2, 1.0);
  fill(&in->dO, pb->heads, pb->n_q, pb->d, fmt, tag * 4 + 3, 1.0);
}

static void inputs_free(inputs_t *in) {
  aa_tensor_free(&in->q);
  aa_tensor_free(&in->k);
  aa_tensor_free(&in->v);
  aa_tensor_free(&in->dO);
}

static int run(aa_attn_result_t *res, const aa_problem_t *pb, const aa_recipe_t *r, const inputs_t *in,
               const char *what) {
  aa_error_t err = {{0}};
  int st = aa_attn_run(res, pb, r, &in->q, &in->k, &in->v, &in->dO, &err);
  if (st != AA_OK)
    AA_FAIL("%s: aa_attn_run(%s) returned %d: %s (seed %llu)", what, r->name, st, err.msg, (unsigned long long)seed);
  return st;
}

/* ---- problem variants ---- */
enum { V_DENSE, V_CAUSAL, V_WINDOW, V_PACK, V_SINKS, V_DROPOUT, V_COUNT };
static const char *vname[] = {"dense", "causal", "causal+window", "packing", "causal+sinks", "dropout"};

typedef struct {
  int32_t *bmin, *bmax;
  double *sinks;
  uint8_t *keep;
} extras_t;

static void variant(aa_problem_t *pb, extras_t *ex, int v) {
  memset(ex, 0, sizeof *ex);
  size_t n = pb->n_q;
  if (v == V_CAUSAL || v == V_WINDOW || v == V_SINKS) pb->causal = 1;
  if (v == V_WINDOW) pb->window = 13;
  if (v == V_PACK) {
    /* three packed documents and one query row that sees nothing */
    ex->bmin = malloc(n * sizeof(int32_t));
    ex->bmax = malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
      int32_t a = i < n / 3 ? 0 : i < (2 * n) / 3 ? (int32_t)(n / 3) : (int32_t)((2 * n) / 3);
      ex->bmin[i] = a;
      ex->bmax[i] = (int32_t)((i + 1) < pb->n_k ? i + 1 : pb->n_k);
    }
    ex->bmin[5] = ex->bmax[5] = 0; /* empty row */
    pb->bound_min = ex->bmin;
    pb->bound_max = ex->bmax;
  }
  if (v == V_SINKS) {
    pb->num_sinks = 2;
    ex->sinks = malloc(pb->heads * 2 * sizeof(double));
    for (size_t h = 0; h < pb->heads; h++) {
      ex->sinks[2 * h] = 0.75 - 0.5 * (double)h;
      ex->sinks[2 * h + 1] = -1.5 + 0.25 * (double)h;
    }
    pb->sinks = ex->sinks;
  }
  if (v == V_DROPOUT) {
    size_t cnt = pb->heads * pb->n_q * pb->n_k;
    ex->keep = malloc(cnt);
    aa_pcg64_t rng;
    uint64_t tags[1] = {999};
    aa_rng_derive(&rng, seed, tags, 1);
    for (size_t i = 0; i < cnt; i++)
      ex->keep[i] = aa_pcg64_uniform(&rng) < 0.75;
    pb->keep = ex->keep;
    pb->keep_scale = 1.0 / 0.75;
  }
}

static void extras_free(extras_t *ex) {
  free(ex->bmin);
  free(ex->bmax);
  free(ex->sinks);
  free(ex->keep);
}

static void set(aa_recipe_t *r, const char *k, const char *v) {
  aa_error_t err = {{0}};
  if (aa_recipe_set(r, k, v, &err) != AA_OK) AA_FAIL("recipe_set %s = %s: %s", k, v, err.msg);
}

/* Max |x - ref| / max |ref| of one output. */
static double rel_max(const double *x, const double *ref, size_t n) {
  double e = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    if (isinf(ref[i]) && x[i] == ref[i]) continue;
    double t = fabs(x[i] - ref[i]);
    if (!(t <= e)) e = t;
    if (isfinite(ref[i]) && fabs(ref[i]) > m) m = fabs(ref[i]);
  }
  return m > 0 ? e / m : e;
}

/* 1. Every pipeline structure in binary64 against the reference: the algebra
   (tiling, sections, GQA reduction, masks, sinks, dropout, two-pass, both
   checkpoints and exp forms) is right to 1e-13 of the largest output
   (binary64 rounding over ~100-term sums and libm exp: ~1e-15 expected). */
static void test_exact(void) {
  const char *names[] = {"exact-fp64 tiles 16", "fp64 nki-structure", "fp64 two-pass"};
  for (int rv = 0; rv < 3; rv++) {
    aa_recipe_t r;
    aa_recipe_preset(&r, "exact-fp64", NULL);
    set(&r, "fwd.tile_q", "16");
    set(&r, "fwd.tile_k", "16");
    set(&r, "bwd.tile_q", "16");
    set(&r, "bwd.tile_k", "16");
    if (rv == 1) {
      set(&r, "scale_fold", "q");
      set(&r, "exp_form", "exp2-fma");
      set(&r, "fwd.checkpoint", "negmax-recip");
      set(&r, "fwd.o_norm", "reciprocal");
      set(&r, "fwd.rescale_threshold", "3");
      set(&r, "bwd.dk_scale", "none");
      set(&r, "bwd.dq_scale", "tile");
      set(&r, "bwd.dkv_accumulate", "add");
      set(&r, "bwd.section", "32");
      set(&r, "bwd.sub_k", "8");
      set(&r, "bwd.q_group", "2");
      set(&r, "bwd.d_tile", "4");
    }
    if (rv == 2) {
      set(&r, "fwd.softmax", "two-pass");
      set(&r, "scale_fold", "s");
      set(&r, "fwd.tile_k", "0");
      set(&r, "bwd.tile_k", "0");
      set(&r, "bwd.d_source", "p-dp");
      set(&r, "bwd.ds_scale", "on");
      set(&r, "bwd.dq_scale", "none");
      set(&r, "bwd.dk_scale", "none");
      set(&r, "bwd.gqa_reduce", "sum-rounded");
    }
    for (int v = 0; v < V_COUNT; v++) {
      aa_problem_t pb;
      aa_problem_init(&pb, 70, 70, 12, 4, 2);
      extras_t ex;
      variant(&pb, &ex, v);
      inputs_t in;
      inputs_make(&in, &pb, AA_FMT_FP64, 10 + (uint64_t)v);
      ref_t R;
      reference(&R, &pb, in.q.data, in.k.data, in.v.data, in.dO.data);
      aa_attn_result_t res;
      if (run(&res, &pb, &r, &in, names[rv]) == AA_OK) {
        size_t nqd = pb.heads * pb.n_q * pb.d, nkd = pb.kv_heads * pb.n_k * pb.d;
        double e[6] = {rel_max(res.o.data, R.o, nqd),
                       rel_max(res.lse.data, R.lse, pb.heads * pb.n_q),
                       rel_max(res.dq.data, R.dq, nqd),
                       rel_max(res.dk.data, R.dk, nkd),
                       rel_max(res.dv.data, R.dv, nkd),
                       pb.num_sinks ? rel_max(res.dsinks.data, R.dsinks, pb.heads * pb.num_sinks) : 0};
        const char *on[6] = {"O", "LSE", "dQ", "dK", "dV", "dsinks"};
        for (int t = 0; t < 6; t++) {
          if (e[t] > worst_exact) worst_exact = e[t];
          AA_CHECK(e[t] < 1e-13, "%s %s: %s max error %.3e relative to max |ref| (want < 1e-13), seed %llu",
                   names[rv], vname[v], on[t], e[t], (unsigned long long)seed);
        }
        if (v == V_PACK) {
          size_t i = 5;
          AA_CHECK(res.lse.data[i] == -INFINITY && res.o.data[i * pb.d] == 0 && res.dq.data[i * pb.d] == 0,
                   "%s: empty row gives LSE %a O %a dQ %a (want -inf, 0, 0)", names[rv], res.lse.data[i],
                   res.o.data[i * pb.d], res.dq.data[i * pb.d]);
        }
        aa_attn_result_free(&res);
      }
      ref_free(&R);
      inputs_free(&in);
      extras_free(&ex);
    }
  }
}

/* Error budget of one row's exponent arguments (score and LSE/max): ~1e-5
   absolute in fp32 recipes; u * scale * sum_c |q_c k_c| more when Q*scale is
   rounded to BF16 (scale_fold = q); 2u |S| + u scale sum |q k| more when S
   and S*scale are rounded to BF16 (scale_fold = s). */
static double es_row(const aa_recipe_t *r, const ref_t *R, const aa_problem_t *pb, size_t h, size_t i) {
  const double u = 0x1p-8;
  double es = 1e-5;
  if (r->scale_fold == AA_SCALE_Q) es += u * R->qk_abs[h * pb->n_q + i];
  if (r->scale_fold == AA_SCALE_S) es += 2 * u * R->s_abs[h * pb->n_q + i] + u * R->qk_abs[h * pb->n_q + i];
  return es;
}

/* 2. BF16 recipes against the reference. u = 2^-8 is the BF16 unit
   roundoff. O: the elementwise bound below, derived from where each recipe
   rounds; gradients: relative l2 below 6u (each element of dS and P carries
   a few relative errors of size u; sums of independent errors keep their
   relative l2 near u, and 6u leaves room for the dP/D cancellation in dS),
   and not zero (the recipe must round). */
static void test_bf16(size_t n, size_t d, size_t heads, size_t kv_heads) {
  const double u = 0x1p-8;
  const char *recipes[] = {"fa2", "nki", "nki-bf16", "naive-bf16"};
  for (int v = 0; v < V_COUNT; v++) {
    aa_problem_t pb;
    aa_problem_init(&pb, n, n, d, heads, kv_heads);
    extras_t ex;
    variant(&pb, &ex, v);
    inputs_t in;
    inputs_make(&in, &pb, AA_FMT_BF16, 20 + (uint64_t)v);
    ref_t R;
    reference(&R, &pb, in.q.data, in.k.data, in.v.data, in.dO.data);
    for (int ri = 0; ri < 4; ri++) {
      aa_recipe_t r;
      aa_recipe_preset(&r, recipes[ri], NULL);
      if (ri == 1 || ri == 2) set(&r, "bwd.section", n > 1024 ? "512" : "128"); /* make the dQ round trip happen */
      aa_attn_result_t res;
      if (run(&res, &pb, &r, &in, "bf16") != AA_OK) continue;
      size_t nqd = pb.heads * pb.n_q * pb.d, nkd = pb.kv_heads * pb.n_k * pb.d;
      /* O bound, per element: the stored O rounds once (u |O|); each weight
         carries its own BF16 rounding (u) plus the error of its exponent
         argument, twice (the score and the row's LSE/max): in fp32 recipes
         that is ~1e-6 absolute; with Q*scale rounded to BF16 (nki) it is
         u * scale * sum_c |q_c k_c|; with S and S*scale rounded to BF16
         (naive) 2u |S| more. Normalising by the row sum adds u once more. */
      size_t bad = 0;
      for (size_t h = 0; h < pb.heads; h++)
        for (size_t i = 0; i < pb.n_q; i++) {
          double es = es_row(&r, &R, &pb, h, i);
          for (size_t c = 0; c < pb.d; c++) {
            size_t x = (h * pb.n_q + i) * pb.d + c;
            double bound = 1.001 * u * fabs(R.o[x]) + (2 * u + 2 * es) * R.pv_abs[x] * 1.001 + 1e-30;
            double err = fabs(res.o.data[x] - R.o[x]);
            if (!(err <= bound) && bad++ < 3)
              AA_FAIL("%s %s: O[%zu][%zu][%zu] = %a, reference %a, error %.3e > bound %.3e (seed %llu)", recipes[ri],
                      vname[v], h, i, c, res.o.data[x], R.o[x], err, bound, (unsigned long long)seed);
          }
        }
      double e_dq = rel_l2(res.dq.data, R.dq, nqd), e_dk = rel_l2(res.dk.data, R.dk, nkd),
             e_dv = rel_l2(res.dv.data, R.dv, nkd), e_o = rel_l2(res.o.data, R.o, nqd);
      printf("  %-10s %-14s rel_l2 O %.2e dQ %.2e dK %.2e dV %.2e\n", recipes[ri], vname[v], e_o, e_dq, e_dk, e_dv);
      double g[3] = {e_dq, e_dk, e_dv};
      const char *gn[3] = {"dQ", "dK", "dV"};
      for (int t = 0; t < 3; t++) {
        AA_CHECK(g[t] < 6 * u, "%s %s: %s rel_l2 %.3e >= 6u = %.3e (seed %llu)", recipes[ri], vname[v], gn[t], g[t],
                 6 * u, (unsigned long long)seed);
        AA_CHECK(g[t] > 1e-4, "%s %s: %s rel_l2 %.3e: no rounding visible (seed %llu)", recipes[ri], vname[v], gn[t],
                 g[t], (unsigned long long)seed);
      }
      AA_CHECK(count_nonfinite(res.o.data, nqd) + count_nonfinite(res.dq.data, nqd) +
                       count_nonfinite(res.dk.data, nkd) + count_nonfinite(res.dv.data, nkd) ==
                   0,
               "%s %s: non-finite outputs", recipes[ri], vname[v]);
      /* dsinks = -sum_i p_i D_i with D_i = dO_i . O_i computed from the
         stored O: its error is sum_i p_i |dO_i| . (O bound)_i, plus p_i's own
         relative error (u + 2 es), plus the recursive-summation bound of the
         accumulators, (adds along the longest chain) * u_acc * sum |p_i D_i|
         (n_q / tile_q adds per partition row, then tile_q partition sums). */
      for (size_t h = 0; h < pb.heads; h++)
        for (size_t t = 0; t < pb.num_sinks; t++) {
          size_t x = h * pb.num_sinks + t;
          double ua = r.bwd_dsinks_fmt == AA_FMT_BF16 ? u : 0x1p-24;
          double chain = (double)(pb.n_q / r.bwd_tile_q + r.bwd_tile_q);
          double bound = chain * ua * R.dsinks_abs[x] + 1e-30;
          for (size_t i = 0; i < pb.n_q; i++) {
            double L = R.lse[h * pb.n_q + i];
            if (!isfinite(L)) continue;
            double ps = exp(pb.sinks[x] - L), es = es_row(&r, &R, &pb, h, i), dD = 0, Dv = 0;
            for (size_t c = 0; c < pb.d; c++) {
              size_t y = (h * pb.n_q + i) * pb.d + c;
              dD += fabs(in.dO.data[y]) * (1.001 * u * fabs(R.o[y]) + (2 * u + 2 * es) * R.pv_abs[y]);
              Dv += R.o[y] * in.dO.data[y];
            }
            bound += ps * (dD + (2 * u + 2 * es) * fabs(Dv)) * 1.01;
          }
          double err = fabs(res.dsinks.data[x] - R.dsinks[x]);
          AA_CHECK(err <= bound, "%s %s: dsinks[%zu] = %a, reference %a, error %.3e > bound %.3e (seed %llu)",
                   recipes[ri], vname[v], x, res.dsinks.data[x], R.dsinks[x], err, bound, (unsigned long long)seed);
        }
      aa_attn_result_free(&res);
    }
    ref_free(&R);
    inputs_free(&in);
    extras_free(&ex);
  }
}

static int same_bits(const aa_tensor_t *a, const aa_tensor_t *b) {
  size_t n = aa_tensor_numel(a);
  return n == aa_tensor_numel(b) && (n == 0 || memcmp(a->data, b->data, n * sizeof(double)) == 0);
}

static int same_result(const aa_attn_result_t *a, const aa_attn_result_t *b) {
  return same_bits(&a->o, &b->o) && same_bits(&a->lse, &b->lse) && same_bits(&a->dq, &b->dq) &&
         same_bits(&a->dk, &b->dk) && same_bits(&a->dv, &b->dv) && same_bits(&a->dsinks, &b->dsinks);
}

/* 3. Identical bits for one and two threads: with 2 KV heads the backward
   splits over KV heads, with 1 KV head over the K tiles of each chunk. */
static void test_threads(void) {
#ifdef _OPENMP
  const char *recipes[] = {"fa2", "nki", "naive-bf16"};
  for (int kvh = 1; kvh <= 2; kvh++) {
    aa_problem_t pb;
    aa_problem_init(&pb, 300, 300, 16, 4, (size_t)kvh);
    extras_t ex;
    variant(&pb, &ex, V_SINKS);
    inputs_t in;
    inputs_make(&in, &pb, AA_FMT_BF16, 40);
    for (int ri = 0; ri < 3; ri++) {
      aa_recipe_t r;
      aa_recipe_preset(&r, recipes[ri], NULL);
      if (ri == 1) {
        set(&r, "bwd.tile_k", "64"); /* several K tiles per section and chunks */
        set(&r, "bwd.sub_k", "32");
      }
      aa_attn_result_t a, b;
      omp_set_num_threads(1);
      int st = run(&a, &pb, &r, &in, "threads=1");
      omp_set_num_threads(2);
      if (st == AA_OK && run(&b, &pb, &r, &in, "threads=2") == AA_OK) {
        AA_CHECK(same_result(&a, &b) && a.tiles_skipped == b.tiles_skipped,
                 "%s kv_heads=%d: results differ between 1 and 2 threads", recipes[ri], kvh);
        aa_attn_result_free(&b);
      }
      if (st == AA_OK) aa_attn_result_free(&a);
    }
    inputs_free(&in);
    extras_free(&ex);
  }
#else
  printf("  (no OpenMP: thread test skipped)\n");
#endif
}

/* 4. NKI sections: with the dQ section store in fp32 the split changes no
   bit (dK/dV live in one section, dQ round-trips exactly); with the store in
   BF16 dQ differs and dK/dV do not; mixed_precision off changes all three. */
static void test_sections(void) {
  aa_problem_t pb;
  aa_problem_init(&pb, 1024, 1024, 32, 1, 1);
  pb.causal = 1;
  inputs_t in;
  inputs_make(&in, &pb, AA_FMT_BF16, 50);
  aa_recipe_t one, split, split32, off;
  aa_recipe_preset(&one, "nki", NULL);
  split = one;
  set(&split, "bwd.section", "512"); /* >= the 512 K tile, as in the kernel */
  split32 = split;
  set(&split32, "bwd.dq_section_fmt", "fp32");
  off = split;
  set(&off, "mixed_precision", "off");
  aa_attn_result_t r1, r2, r3, r4;
  if (run(&r1, &pb, &one, &in, "one section") || run(&r2, &pb, &split, &in, "section 512") ||
      run(&r3, &pb, &split32, &in, "section 512 fp32") || run(&r4, &pb, &off, &in, "mixed off"))
    return;
  AA_CHECK(same_result(&r1, &r3), "nki: 2 sections with an fp32 dQ store differ from one section");
  AA_CHECK(!same_bits(&r1.dq, &r2.dq), "nki: the bf16 dQ section round trip changed nothing");
  AA_CHECK(same_bits(&r1.dk, &r2.dk) && same_bits(&r1.dv, &r2.dv), "nki: sections changed dK/dV");
  AA_CHECK(!same_bits(&r2.dq, &r4.dq) && !same_bits(&r2.dk, &r4.dk) && !same_bits(&r2.dv, &r4.dv),
           "nki: mixed_precision off equals on");
  /* Causal 1024 with 128 x 512 tiles: for q tile t (rows 128t..128t+127) a
     K tile is skipped when its first key 512kt lies beyond the tile's last
     row 128t+127 ([nki-bwd] get_required_tiles_mask): rows 0..511 skip the
     second K tile, i.e. 4 pairs. */
  size_t want = 4;
  AA_CHECK(r1.tiles_skipped == want, "nki causal 1024: %zu tiles skipped, want %zu", r1.tiles_skipped, want);
  ref_t R;
  reference(&R, &pb, in.q.data, in.k.data, in.v.data, in.dO.data);
  double e2 = rel_l2(r2.dq.data, R.dq, 1024 * 32), e4 = rel_l2(r4.dq.data, R.dq, 1024 * 32),
         e1 = rel_l2(r1.dq.data, R.dq, 1024 * 32);
  printf("  nki causal 1024: dQ rel_l2 one section %.3e, 2 sections %.3e, 2 sections mixed off %.3e\n", e1, e2, e4);
  AA_CHECK(e4 > e1, "nki: mixed_precision off is not less accurate (%.3e vs %.3e)", e4, e1);
  ref_free(&R);
  aa_attn_result_free(&r1);
  aa_attn_result_free(&r2);
  aa_attn_result_free(&r3);
  aa_attn_result_free(&r4);
  inputs_free(&in);
}

/* 5. Argument checks. */
static void test_errors(void) {
  aa_problem_t pb;
  aa_problem_init(&pb, 8, 8, 4, 1, 1);
  inputs_t in;
  inputs_make(&in, &pb, AA_FMT_FP64, 60); /* not bf16-representable */
  aa_recipe_t r;
  aa_recipe_preset(&r, "fa2", NULL);
  aa_attn_result_t res;
  aa_error_t err = {{0}};
  AA_CHECK(aa_attn_run(&res, &pb, &r, &in.q, &in.k, &in.v, &in.dO, &err) == AA_EINVAL && strstr(err.msg, "q"),
           "fp64 inputs to a bf16 recipe accepted (%s)", err.msg);
  aa_tensor_round(&in.q, AA_FMT_BF16);
  aa_tensor_round(&in.k, AA_FMT_BF16);
  aa_tensor_round(&in.v, AA_FMT_BF16);
  aa_tensor_round(&in.dO, AA_FMT_BF16);
  in.v.data[3] = NAN;
  AA_CHECK(aa_attn_run(&res, &pb, &r, &in.q, &in.k, &in.v, &in.dO, &err) == AA_ENAN, "NaN input accepted");
  in.v.data[3] = 0;
  AA_CHECK(aa_attn_run(&res, &pb, &r, &in.q, &in.k, &in.v, NULL, &err) == AA_OK && res.dq.data == NULL &&
               res.o.data != NULL,
           "forward-only run");
  aa_attn_result_free(&res);
  aa_problem_t bad = pb;
  bad.heads = 2;
  AA_CHECK(aa_attn_run(&res, &bad, &r, &in.q, &in.k, &in.v, &in.dO, &err) == AA_ESHAPE, "shape mismatch accepted");
  inputs_free(&in);
}

int main(void) {
  seed = aa_test_seed("tattn");
  test_errors();
  test_exact();
  printf("  binary64 recipes: worst max-error ratio %.3e over all outputs and variants\n", worst_exact);
  test_bf16(256, 32, 2, 1);
  if (aa_test_expensive()) test_bf16(2048, 128, 1, 1);
  test_threads();
  test_sections();
  return aa_test_finish("tattn");
}
