/* attnacc: tests of the [blackwell-fa] normalisation variants (fixed shift, guarded causal recovery, reciprocal
 * backward).
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "rng.h"
#include "tests.h"

static uint64_t seed;

/* BF16 and FP32 unit roundoffs (RNE, 8 and 24 significant bits). */
#define U_BF16 0x1p-8
#define U_FP32 0x1p-24

/* ---- inputs ---- */
typedef struct {
  aa_tensor_t q, k, v, dO;
} inputs_t;

static void inputs_free(inputs_t *in) {
  aa_tensor_free(&in->q);
  aa_tensor_free(&in->k);
  aa_tensor_free(&in->v);
  aa_tensor_free(&in->dO);
}

/* sigma * N(0,1) rounded to fmt, one derived stream per tensor. */
static void draw(inputs_t *in, const aa_problem_t *pb, double sigma, aa_fmt_t fmt, uint64_t s) {
  size_t sq[3] = {pb->heads, pb->n_q, pb->d}, sk[3] = {pb->kv_heads, pb->n_k, pb->d};
  aa_tensor_t *ts[4] = {&in->q, &in->k, &in->v, &in->dO};
  for (int t = 0; t < 4; t++) {
    aa_tensor_alloc(ts[t], 3, (t == 1 || t == 2) ? sk : sq, fmt);
    aa_pcg64_t rng;
    uint64_t tag = (uint64_t)t;
    aa_rng_derive(&rng, s, &tag, 1);
    size_t n = aa_tensor_numel(ts[t]);
    double sg = t < 2 ? sigma : 1.0;
    for (size_t i = 0; i < n; i++)
      ts[t]->data[i] = sg * aa_pcg64_normal(&rng);
    aa_tensor_round(ts[t], fmt);
  }
}

/* ---- an independent reference: textbook attention in long double ---- */
typedef struct {
  long double *o, *dq, *dk, *dv;
  /* conditioning of each output for the rounding bounds below */
  long double *pv_abs; /* [h][i][c] sum_j P_ij |V_jc| */
  long double *dv_abs; /* [g][j][c] sum_i P_ij |dO_ic| */
  long double *dq_abs; /* [h][i][c] scale sum_j P_ij (B_ij + A_i + |D_i|) |K_jc| */
  long double *dk_abs; /* [g][j][c] scale sum_i P_ij (B_ij + A_i + |D_i|) |Q_ic| */
} ref_t;

static void ref_free(ref_t *R) {
  free(R->o);
  free(R->dq);
  free(R->dk);
  free(R->dv);
  free(R->pv_abs);
  free(R->dv_abs);
  free(R->dq_abs);
  free(R->dk_abs);
}

/* P = softmax(scale q k^T) over the visible keys, O = P V, D = rowsum(O dO),
   dS = P (dO V^T - D), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
   B_ij = sum_c |dO_ic V_jc| bounds |dP_ij| and A_i = sum_j P_ij B_ij
   bounds the effect of an error in O on D. */
static void reference(ref_t *R, const aa_problem_t *pb, const inputs_t *in) {
  size_t H = pb->heads, nq = pb->n_q, nk = pb->n_k, d = pb->d, G = pb->heads / pb->kv_heads;
  long double scale = 1.0L / sqrtl((long double)d);
  R->o = calloc(H * nq * d, sizeof(long double));
  R->dq = calloc(H * nq * d, sizeof(long double));
  R->pv_abs = calloc(H * nq * d, sizeof(long double));
  R->dq_abs = calloc(H * nq * d, sizeof(long double));
  R->dk = calloc(pb->kv_heads * nk * d, sizeof(long double));
  R->dv = calloc(pb->kv_heads * nk * d, sizeof(long double));
  R->dv_abs = calloc(pb->kv_heads * nk * d, sizeof(long double));
  R->dk_abs = calloc(pb->kv_heads * nk * d, sizeof(long double));
  long double *P = malloc(nk * sizeof *P), *B = malloc(nk * sizeof *B), *dS = malloc(nk * sizeof *dS);
  for (size_t h = 0; h < H; h++) {
    size_t g = h / G;
    for (size_t i = 0; i < nq; i++) {
      const double *q = in->q.data + (h * nq + i) * d, *go = in->dO.data + (h * nq + i) * d;
      long double mx = -INFINITY, l = 0;
      for (size_t j = 0; j < nk; j++) {
        P[j] = -INFINITY;
        if (!aa_problem_visible(pb, i, j)) continue;
        long double s = 0;
        for (size_t c = 0; c < d; c++)
          s += (long double)q[c] * in->k.data[(g * nk + j) * d + c];
        P[j] = s * scale;
        if (P[j] > mx) mx = P[j];
      }
      if (mx == -INFINITY) continue;
      for (size_t j = 0; j < nk; j++) {
        P[j] = P[j] == -INFINITY ? 0 : expl(P[j] - mx);
        l += P[j];
      }
      long double D = 0, A = 0, *o = R->o + (h * nq + i) * d;
      for (size_t j = 0; j < nk; j++) {
        P[j] /= l;
        const double *v = in->v.data + (g * nk + j) * d;
        long double dp = 0, b = 0;
        for (size_t c = 0; c < d; c++) {
          o[c] += P[j] * v[c];
          R->pv_abs[(h * nq + i) * d + c] += P[j] * fabsl((long double)v[c]);
          dp += (long double)go[c] * v[c];
          b += fabsl((long double)go[c] * v[c]);
        }
        dS[j] = dp; /* dP for now */
        B[j] = b;
        A += P[j] * b;
      }
      for (size_t c = 0; c < d; c++)
        D += o[c] * go[c];
      for (size_t j = 0; j < nk; j++) {
        if (P[j] == 0) continue;
        long double w = P[j] * (B[j] + A + fabsl(D)) * scale;
        dS[j] = P[j] * (dS[j] - D) * scale;
        const double *k = in->k.data + (g * nk + j) * d;
        for (size_t c = 0; c < d; c++) {
          R->dq[(h * nq + i) * d + c] += dS[j] * k[c];
          R->dq_abs[(h * nq + i) * d + c] += w * fabsl((long double)k[c]);
          R->dk[(g * nk + j) * d + c] += dS[j] * q[c];
          R->dk_abs[(g * nk + j) * d + c] += w * fabsl((long double)q[c]);
          R->dv[(g * nk + j) * d + c] += P[j] * go[c];
          R->dv_abs[(g * nk + j) * d + c] += P[j] * fabsl((long double)go[c]);
        }
      }
    }
  }
  free(P);
  free(B);
  free(dS);
}

static int run(aa_attn_result_t *res, const aa_problem_t *pb, const aa_recipe_t *r, const inputs_t *in) {
  aa_error_t err = {{0}};
  int st = aa_attn_run(res, pb, r, &in->q, &in->k, &in->v, &in->dO, &err);
  if (st != AA_OK) AA_FAIL("attn_run %s: %s (seed %llu)", r->name, err.msg, (unsigned long long)seed);
  return st;
}

static void set(aa_recipe_t *r, const char *k, const char *v) {
  aa_error_t err = {{0}};
  if (aa_recipe_set(r, k, v, &err) != AA_OK) AA_FAIL("recipe_set %s = %s: %s", k, v, err.msg);
}

static void bits_fail(const char *what, const char *out, size_t idx, double a, double b, double bound) {
  uint64_t ua, ub;
  memcpy(&ua, &a, 8);
  memcpy(&ub, &b, 8);
  AA_FAIL("%s: %s[%zu] |%a - %a| = %g > bound %g (bits %016llx %016llx, seed %llu)", what, out, idx, a, b,
          fabs(a - b), bound, (unsigned long long)ua, (unsigned long long)ub, (unsigned long long)seed);
}

/* ---- 1. shift = true row max: recip and fa2 agree within the BF16 bound ----

   With one key block per row (fwd.tile_k = 0) the guarded forward anchors
   each row at its true max m, exactly as fa2 does with one block: both form
   the same p_j = exp2(fma(S_j, c, -fl(m c))) and the same BF16 weights
   P~_j = bf16(p_j) in P V, so their FP32 accumulators acc are identical.
   They differ in the row sum: fa2 sums p_j, recip sums P~_j (section 3.5).
   With u = 2^-8 (BF16) and g = (n-1) 2^-24 (sequential FP32 sum of n
   positive terms), l_r / l_f lies in [(1-u)(1-g)/(1+g), (1+u)(1+g)/(1-g)],
   so x_r = fl(acc fl(1/l_r)) and x_f = fl(acc fl(1/l_f)) satisfy
   |x_r - x_f| <= e |x_f| with e = u + 3g + 4 2^-24 (first order), and after
   the final BF16 roundings (each <= u relative):
     |O_r - O_f| <= (e + 2u + 2ue) |O_f| / (1 - u).
   Gradients: both backwards approximate the exact dS_ij with errors made of
   O(u) relative perturbations of P_ij, dP_ij (bounded by B_ij), D_i (by
   A_i + |D_i|, through the BF16 O and dO or scaled dO): each is within
   4u P_ij (B_ij + A_i + |D_i|) of it plus u |dS_ij| from its BF16 rounding,
   so dQ, dK differ by at most 10u sum_j P_ij (B_ij + A_i + |D_i|) scale |K_j|
   (dq_abs, dk_abs) plus the two BF16 output roundings; dV by
   4u sum_i P_ij |dO_i| (the scaled dO and the weights, each u) plus its
   roundings. */
static void check_bound(const char *what, const char *name, const aa_tensor_t *a, const aa_tensor_t *b,
                        const long double *cond, double k_cond, double k_rel) {
  size_t n = aa_tensor_numel(a), bad = 0;
  for (size_t i = 0; i < n; i++) {
    double x = a->data[i], y = b->data[i];
    double bound = k_cond * (double)(cond ? cond[i] : 0) + k_rel * (fabs(x) + fabs(y)) + 0x1p-126;
    if (!(fabs(x - y) <= bound)) {
      if (bad++ < 3) bits_fail(what, name, i, x, y, bound);
    }
  }
}

static void test_true_max(int causal) {
  aa_problem_t pb;
  aa_problem_init(&pb, 384, 384, 64, 2, 1);
  pb.causal = causal;
  inputs_t in = {0};
  draw(&in, &pb, 1.0, AA_FMT_BF16, seed + 11 + (uint64_t)causal);
  aa_recipe_t rr, rf;
  aa_recipe_preset(&rr, "recip-causal", NULL);
  aa_recipe_preset(&rf, "fa2", NULL);
  set(&rr, "fwd.tile_k", "0"); /* one block: the anchor is the row max */
  set(&rf, "fwd.tile_k", "0");
  set(&rf, "fwd.tile_q", "256");
  aa_attn_result_t a = {0}, b = {0};
  if (run(&a, &pb, &rr, &in) == AA_OK && run(&b, &pb, &rf, &in) == AA_OK) {
    const char *what = causal ? "true-max causal recip vs fa2" : "true-max dense recip vs fa2";
    AA_CHECK(a.tiles_flagged == 0 && a.rows_recovered == 0, "%s: %zu tiles flagged, %zu rows recovered", what,
             a.tiles_flagged, a.rows_recovered);
    double u = U_BF16, g = (double)(pb.n_k - 1) * U_FP32, e = u + 3 * g + 4 * U_FP32;
    double ko = (e + 2 * u + 2 * u * e) / (1 - u);
    /* O: relative to |O_f| alone (k_rel on |a|+|b| >= |O_f|) */
    check_bound(what, "o", &a.o, &b.o, NULL, 0, ko);
    ref_t R = {0};
    reference(&R, &pb, &in);
    check_bound(what, "dv", &a.dv, &b.dv, R.dv_abs, 4 * u + 2 * g, u);
    check_bound(what, "dq", &a.dq, &b.dq, R.dq_abs, 10 * u + 2 * g, u);
    check_bound(what, "dk", &a.dk, &b.dk, R.dk_abs, 10 * u + 2 * g, u);
    /* the bound is not vacuous: the two differ somewhere (rounded vs unrounded row sums) */
    size_t diff = 0;
    for (size_t i = 0; i < aa_tensor_numel(&a.o); i++)
      diff += a.o.data[i] != b.o.data[i];
    AA_CHECK(diff > 0, "%s: recip and fa2 outputs are identical: the rounded row sum had no effect", what);
    ref_free(&R);
  }
  aa_attn_result_free(&a);
  aa_attn_result_free(&b);
  inputs_free(&in);
}

/* ---- 2. exact arithmetic: the reciprocal backward is the textbook gradient ----

   All formats binary64: the only errors left are binary64 roundings of
   sums of n terms (~n 2^-53 relative to the sums of absolute values), far
   below the 1e-12 asked for at these sizes. Mixed rows (recovered LSE rows
   and reciprocal rows in one problem) are covered by a guarded case with a
   narrow range that flags some tiles. */
static void compare_exact(const char *what, const char *name, const aa_tensor_t *t, const long double *ref) {
  size_t n = aa_tensor_numel(t);
  long double num = 0, den = 0;
  size_t worst = 0;
  double wdiff = -1;
  for (size_t i = 0; i < n; i++) {
    long double dlt = (long double)t->data[i] - ref[i];
    num += dlt * dlt;
    den += ref[i] * ref[i];
    if (fabsl(dlt) > wdiff) {
      wdiff = (double)fabsl(dlt);
      worst = i;
    }
  }
  double rel = den > 0 ? (double)sqrtl(num / den) : (double)sqrtl(num);
  if (!(rel <= 1e-12)) {
    AA_FAIL("%s: %s rel_l2 %g > 1e-12 (worst [%zu] %a vs %a, seed %llu)", what, name, rel, worst, t->data[worst],
            (double)ref[worst], (unsigned long long)seed);
  }
}

static void test_exact(const char *softmax, int causal, const char *shift, const char *hi, int want_flags) {
  aa_problem_t pb;
  aa_problem_init(&pb, 320, 320, 32, 2, 1);
  pb.causal = causal;
  inputs_t in = {0};
  draw(&in, &pb, 1.5, AA_FMT_FP64, seed + 23 + (uint64_t)causal);
  aa_recipe_t r;
  aa_recipe_preset(&r, "exact-fp64", NULL);
  set(&r, "fwd.softmax", softmax);
  set(&r, "fwd.shift", shift);
  set(&r, "fwd.guard_hi", hi);
  set(&r, "fwd.tile_q", "64");
  set(&r, "fwd.sub_q", "32");
  set(&r, "bwd.norm", "recip");
  set(&r, "bwd.do_fmt", "fp64");
  set(&r, "fwd.rowsum_rounded", "on");
  aa_attn_result_t a = {0};
  char what[128];
  snprintf(what, sizeof what, "exact %s %s shift %s hi %s", softmax, causal ? "causal" : "dense", shift, hi);
  if (run(&a, &pb, &r, &in) == AA_OK) {
    ref_t R = {0};
    reference(&R, &pb, &in);
    compare_exact(what, "o", &a.o, R.o);
    compare_exact(what, "dq", &a.dq, R.dq);
    compare_exact(what, "dk", &a.dk, R.dk);
    compare_exact(what, "dv", &a.dv, R.dv);
    size_t nrecip = 0;
    for (size_t i = 0; i < pb.heads * pb.n_q; i++)
      nrecip += a.row_ckpt[i] == AA_ROW_CKPT_RECIP;
    if (want_flags) {
      AA_CHECK(a.tiles_flagged > 0 && a.rows_recovered > 0 && nrecip > 0,
               "%s: expected a mix of recovered and reciprocal rows (flagged %zu, recovered %zu, recip %zu)", what,
               a.tiles_flagged, a.rows_recovered, nrecip);
    } else {
      AA_CHECK(a.rows_recovered == 0 && nrecip == pb.heads * pb.n_q, "%s: %zu recovered, %zu recip rows", what,
               a.rows_recovered, nrecip);
    }
    ref_free(&R);
  }
  aa_attn_result_free(&a);
  inputs_free(&in);
}

/* ---- 3. a constructed input that must overflow the fixed shift ----

   d = 64 (scale 1/8), n = 512. Component 0 of every q is 32; component 0 of
   k_j is 0 for j < 300 and 32 from key 300 on; the other components are
   N(0, 1/4). Scores of keys >= 300 exceed those of the first block by
   32*32/8 = 128 natural units = 184.7 log2 units (+- the noise, |noise| <
   2^5 natural): their weights relative to the first-block anchor are above
   2^128, so the guarded tile holding rows >= 300 (rows 256..511, the second
   256-row tile) must be flagged and recovered, the first tile (rows 0..255
   see keys <= 255 only) must not, and nothing may be NaN. The fixed shift 0
   on the same input must overflow (weights above 2^128 give an infinite row
   sum and NaN outputs). Causal 256-row tiles of 128-row halves against
   128-key blocks skip one diagonal half per tile: 2 per head. */
static void test_overflow(void) {
  aa_problem_t pb;
  aa_problem_init(&pb, 512, 512, 64, 1, 1);
  pb.causal = 1;
  inputs_t in = {0};
  draw(&in, &pb, 0.5, AA_FMT_BF16, seed + 41);
  for (size_t i = 0; i < pb.n_q; i++)
    in.q.data[i * pb.d] = 32;
  for (size_t j = 0; j < pb.n_k; j++)
    in.k.data[j * pb.d] = j < 300 ? 0 : 32;
  aa_recipe_t rg, rf;
  aa_recipe_preset(&rg, "recip-causal", NULL);
  aa_recipe_preset(&rf, "recip", NULL);
  aa_attn_result_t a = {0}, b = {0};
  if (run(&a, &pb, &rg, &in) == AA_OK) {
    AA_CHECK(a.fwd_q_tiles == 2 && a.tile_flagged[0] == 0 && a.tile_flagged[1] == 1 && a.tiles_flagged == 1,
             "overflow: guarded flags %d %d (count %zu of %zu), expected 0 1", a.tile_flagged[0], a.tile_flagged[1],
             a.tiles_flagged, a.fwd_q_tiles);
    AA_CHECK(a.rows_recovered == 256, "overflow: %zu rows recovered, expected 256", a.rows_recovered);
    AA_CHECK(a.contractions_skipped == 2, "overflow: %zu diagonal contractions skipped, expected 2",
             a.contractions_skipped);
    size_t nan = 0, inf = 0, n2, i2;
    const aa_tensor_t *ts[4] = {&a.o, &a.dq, &a.dk, &a.dv};
    for (int t = 0; t < 4; t++) {
      aa_tensor_count_nonfinite(ts[t], &n2, &i2);
      nan += n2;
      inf += i2;
    }
    AA_CHECK(nan == 0 && inf == 0, "overflow: guarded result holds %zu NaN and %zu Inf (seed %llu)", nan, inf,
             (unsigned long long)seed);
    for (size_t i = 0; i < pb.n_q; i++)
      AA_CHECK(a.row_ckpt[i] == (i < 256 ? AA_ROW_CKPT_RECIP : AA_ROW_CKPT_LSE), "overflow: row %zu checkpoint %d", i,
               a.row_ckpt[i]);
    /* and the recovered result is right: within the BF16 pass rule of the reference */
    ref_t R = {0};
    reference(&R, &pb, &in);
    size_t bad = 0;
    for (size_t x = 0; x < aa_tensor_numel(&a.o); x++)
      bad += !(fabsl(a.o.data[x] - R.o[x]) <= 0.01L + 0.01L * fabsl(R.o[x]));
    AA_CHECK(bad == 0, "overflow: %zu O elements of the recovered result fail |a-b| <= 0.01 + 0.01|b|", bad);
    ref_free(&R);
  }
  if (run(&b, &pb, &rf, &in) == AA_OK) {
    size_t n2, i2;
    aa_tensor_count_nonfinite(&b.o, &n2, &i2);
    AA_CHECK(n2 + i2 > 0 && b.tiles_flagged >= 1 && b.rows_recovered == 0,
             "overflow: the fixed shift did not overflow (%zu NaN/Inf in O, %zu flagged)", n2 + i2, b.tiles_flagged);
  }
  aa_attn_result_free(&a);
  aa_attn_result_free(&b);
  inputs_free(&in);
}

/* ---- 4. recipe checks ---- */
static void test_recipe(void) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  aa_recipe_preset(&r, "fa2", NULL);
  set(&r, "bwd.norm", "recip");
  AA_CHECK(aa_recipe_check(&r, &err) == AA_EINVAL && strstr(err.msg, "bwd.norm"),
           "bwd.norm = recip with an online forward accepted (%s)", err.msg);
  aa_recipe_preset(&r, "recip", NULL);
  AA_CHECK(r.fwd_softmax == AA_SOFTMAX_FIXED_SHIFT && r.fwd_rowsum_rounded && r.bwd_norm == AA_BWDNORM_RECIP &&
               r.fwd_lse_fmt == AA_FMT_FP32 && r.scale_fold == AA_SCALE_EXP,
           "recip preset fields");
  set(&r, "fwd.guard_lo", "200");
  AA_CHECK(aa_recipe_check(&r, &err) == AA_EINVAL, "guard_lo above guard_hi accepted");
}

int main(void) {
  seed = aa_test_seed("tnorm");
  test_recipe();
  test_true_max(0);
  test_true_max(1);
  test_exact("fixed-shift", 0, "3", "128", 0);
  test_exact("fixed-shift", 1, "-2.5", "128", 0);
  test_exact("guarded", 1, "0", "128", 0);
  test_exact("guarded", 0, "0", "128", 0);
  /* hi = 3: a weight above 8 flags its tile. Rows 0..63 of the causal
     problem see one key block, anchored at its max (weights <= 1): that tile
     stays, later ones are recovered: LSE and reciprocal rows mixed. */
  test_exact("guarded", 1, "0", "3", 1);
  test_overflow();
  return aa_test_finish("tnorm");
}
