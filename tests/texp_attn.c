/* attnacc: tests of the exp constructions inside attention (recipe keys fwd.exp / bwd.exp, presets tlx-exp, tlx-dq,
 * tlx-causal). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "exp.h"
#include "rng.h"
#include "tests.h"

static uint64_t seed;

typedef struct {
  aa_tensor_t q, k, v, dO;
} inputs_t;

static void inputs_free(inputs_t *in) {
  aa_tensor_free(&in->q);
  aa_tensor_free(&in->k);
  aa_tensor_free(&in->v);
  aa_tensor_free(&in->dO);
}

/* The draw of `attnacc run` (experiments/cli/cli.c): per tensor id (0 q, 1 k,
   2 v, 3 dO) and head a pcg64 stream aa_rng_derive(seed, {id, head}),
   sigma N(0,1) rounded to BF16. With ints > 0 the values are instead
   integers in [-ints, ints] (exact in BF16). */
static void draw(inputs_t *in, const aa_problem_t *pb, uint64_t s, int ints) {
  aa_tensor_t *ts[4] = {&in->q, &in->k, &in->v, &in->dO};
  for (int t = 0; t < 4; t++) {
    size_t heads = (t == 1 || t == 2) ? pb->kv_heads : pb->heads, rows = (t == 1 || t == 2) ? pb->n_k : pb->n_q;
    size_t shape[3] = {heads, rows, pb->d}, per = rows * pb->d;
    aa_tensor_alloc(ts[t], 3, shape, AA_FMT_BF16);
    for (size_t h = 0; h < heads; h++) {
      aa_pcg64_t rng;
      uint64_t tags[2] = {(uint64_t)t, (uint64_t)h};
      aa_rng_derive(&rng, s, tags, 2);
      for (size_t i = 0; i < per; i++) {
        double z = aa_pcg64_normal(&rng);
        ts[t]->data[h * per + i] = ints > 0 ? fmax(-ints, fmin(ints, nearbyint(z))) : z;
      }
    }
    aa_tensor_round(ts[t], AA_FMT_BF16);
  }
}

static int run(aa_attn_result_t *res, const aa_problem_t *pb, const aa_recipe_t *r, const inputs_t *in, int bwd) {
  aa_error_t err;
  err.msg[0] = '\0';
  memset(res, 0, sizeof *res);
  int st = aa_attn_run(res, pb, r, &in->q, &in->k, &in->v, bwd ? &in->dO : NULL, &err);
  if (st != AA_OK) AA_FAIL("attn_run %s: status %d (%s)", r->name, st, err.msg);
  return st;
}

static void get(aa_recipe_t *r, const char *preset) {
  aa_error_t err;
  if (aa_recipe_preset(r, preset, &err) != AA_OK) {
    AA_FAIL("preset %s: %s", preset, err.msg);
    exit(1);
  }
}

static void set(aa_recipe_t *r, const char *key, const char *value) {
  aa_error_t err;
  err.msg[0] = '\0';
  if (aa_recipe_set(r, key, value, &err) != AA_OK) AA_FAIL("recipe_set %s = %s: %s", key, value, err.msg);
}

/* Bitwise comparison of two results' tensors (NaN-safe through the bits). */
static int same_tensor(const aa_tensor_t *a, const aa_tensor_t *b, const char *what, const char *ctx,
                       double scale_b) {
  if (a->data == NULL && b->data == NULL) return 1;
  size_t n = aa_tensor_numel(a);
  if (n != aa_tensor_numel(b)) {
    AA_FAIL("%s %s: sizes differ", ctx, what);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    double x = a->data[i], y = b->data[i] * scale_b;
    if (memcmp(&x, &y, sizeof x) != 0) {
      AA_FAIL("%s %s[%zu]: bit-identical: got %a expected %a (seed %llu)", ctx, what, i, x, y,
              (unsigned long long)seed);
      return 0;
    }
  }
  return 1;
}

static void same_results(const aa_attn_result_t *a, const aa_attn_result_t *b, const char *ctx) {
  same_tensor(&a->o, &b->o, "o", ctx, 1);
  same_tensor(&a->dq, &b->dq, "dq", ctx, 1);
  same_tensor(&a->dk, &b->dk, "dk", ctx, 1);
  same_tensor(&a->dv, &b->dv, "dv", ctx, 1);
}

/* ---- 1. recipe keys: defaults, text, round trip, presets ---- */
static void test_keys(void) {
  static char buf[16384], buf2[16384];
  const char *names[] = {"fa2", "nki", "recip", "recip-causal", "tlx-dq", "naive-bf16", "exact-fp64"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    aa_recipe_t r, r2;
    get(&r, names[i]);
    AA_CHECK(aa_recipe_exp_is_default(&r.fwd_exp) && aa_recipe_exp_is_default(&r.bwd_exp),
             "preset %s: fwd.exp and bwd.exp default to exact", names[i]);
    aa_recipe_format(buf, sizeof buf, &r);
    AA_CHECK(strstr(buf, "fwd.exp") == NULL && strstr(buf, "bwd.exp") == NULL,
             "preset %s: exact constructions are not written (recipe text unchanged)", names[i]);
    r2 = r;
    set(&r2, "fwd.exp", "exact");
    set(&r2, "bwd.exp", "exact:cvt=rne,order=fp32");
    aa_recipe_format(buf2, sizeof buf2, &r2);
    AA_CHECK(!strcmp(buf, buf2) && aa_recipe_equal(&r, &r2), "preset %s: explicit exact equals the default",
             names[i]);
  }
  aa_recipe_t t, back, tdq;
  aa_error_t err;
  get(&t, "tlx-exp");
  aa_recipe_format(buf, sizeof buf, &t);
  AA_CHECK(strstr(buf, "fwd.exp = quadratic-bf16:k=0.244,d=0,s=1.0476,cvt=rne,order=fp32\n") != NULL &&
               strstr(buf, "bwd.exp = quadratic-bf16:k=0.244,d=0,s=1.0476,cvt=rne,order=fp32\n") != NULL,
           "tlx-exp text names its construction in both directions:\n%s", buf);
  AA_CHECK(aa_recipe_parse_string(&back, buf, "tlx-exp.txt", &err) == AA_OK && aa_recipe_equal(&t, &back),
           "tlx-exp: format -> parse round trip");
  AA_CHECK(memcmp(&back.fwd_exp, &t.fwd_exp, sizeof t.fwd_exp) == 0,
           "tlx-exp: round trip keeps the construction bits");
  /* tlx-causal = tlx-dq-causal + the packed exp (the whole kernel `tlx`, a
     recipe with conditional keys, is checked against its readings in
     tests/trecipe_when.c) */
  const char *pairs[1][2] = {{"tlx-causal", "tlx-dq-causal"}};
  for (int i = 0; i < 1; i++) {
    aa_recipe_t a;
    get(&a, pairs[i][0]);
    get(&tdq, pairs[i][1]);
    tdq.fwd_exp = t.fwd_exp;
    tdq.bwd_exp = t.bwd_exp;
    AA_CHECK(aa_recipe_equal(&a, &tdq), "%s = %s + tlx-exp's constructions", pairs[i][0], pairs[i][1]);
    AA_CHECK(aa_recipe_check(&a, &err) == AA_OK, "%s passes aa_recipe_check: %s", pairs[i][0], err.msg);
  }
  aa_recipe_t r;
  get(&r, "recip");
  AA_CHECK(aa_recipe_set(&r, "fwd.exp", "no-such-construction", &err) == AA_EINVAL, "unknown construction refused");
  AA_CHECK(aa_recipe_set(&r, "bwd.exp", "quadratic-bf16:q=1", &err) == AA_EINVAL, "unknown parameter refused");
  get(&r, "exact-fp64");
  set(&r, "fwd.exp", "schraudolph-bf16");
  AA_CHECK(aa_recipe_check(&r, &err) == AA_EINVAL, "a non-exact construction with alu = fp64 is refused");
}

/* ---- 2. constant ratio cancels exactly ----
   With scale = fl32(ln 2), the exp2-fma coefficient c = fl32(scale log2 e)
   is exactly 1 (|fl32(ln 2) log2 e - 1| = 7e-9 < 2^-24), and with integer
   Q, K in [-1, 1] and d = 16 every score S is an integer of magnitude <= 16,
   exact in FP32. With fwd.shift = 0 the weight argument is x = S, an
   integer, so 2^x is exact, schraudolph-fp32 with c = 0 returns exactly 2^x
   (integer x: mantissa 0), with c = -2^23 exactly 2^(x+1), and
   schraudolph-bf16 with c = -128 the BF16 2^(x+1). A factor 2 on every
   weight (BF16 rounding, FP32 sums and products commute with it away from
   overflow and underflow) doubles l exactly, halves the saved 1/l exactly
   (fl(1/(2l)) = fl(1/l)/2), so O = acc * (1/l) is unchanged bit for bit; the
   backward scales dO by the halved 1/l (exactly half the BF16 dO~), so dP~
   and D~ halve, dP~ - D~ halves, times the doubled weight gives the same dS;
   dV = P~^T dO~ is the same product. So every output is identical to the
   exact exp, and the saved reciprocal is exactly 1/2 (or 1) times it. */
static void test_constant_ratio(void) {
  const char *routes[2] = {"recip", "tlx-dq"}; /* tlx-dq: the dense dQ route of tlx without its packed exp */
  const char *cons[3] = {"schraudolph-fp32:c=0", "schraudolph-fp32:c=-8388608", "schraudolph-bf16:c=-128"};
  const double factor[3] = {1, 0.5, 0.5};
  for (int causal = 0; causal < 2; causal++)
    for (int ro = 0; ro < 2; ro++) {
      aa_problem_t pb;
      aa_problem_init(&pb, 200, 200, 16, 2, 1);
      pb.scale_default = 0;
      pb.scale = (double)(float)0.69314718055994530942;
      pb.causal = causal;
      inputs_t in;
      draw(&in, &pb, seed, 1);
      aa_recipe_t r0;
      get(&r0, causal ? (ro ? "tlx-causal" : "recip-causal") : routes[ro]);
      set(&r0, "fwd.exp", "exact");
      set(&r0, "bwd.exp", "exact");
      aa_attn_result_t a;
      if (run(&a, &pb, &r0, &in, 1) != AA_OK) continue;
      AA_CHECK(a.tiles_flagged == 0, "%s: no flagged tiles on the integer problem", r0.name);
      for (int ci = 0; ci < 3; ci++) {
        aa_recipe_t r = r0;
        set(&r, "fwd.exp", cons[ci]);
        set(&r, "bwd.exp", cons[ci]);
        aa_attn_result_t b;
        if (run(&b, &pb, &r, &in, 1) != AA_OK) continue;
        char ctx[160];
        snprintf(ctx, sizeof ctx, "%s%s with %s (constant ratio %g)", r0.name, causal ? " causal" : "", cons[ci],
                 1 / factor[ci]);
        same_results(&b, &a, ctx);
        same_tensor(&b.recip, &a.recip, "saved 1/l", ctx, factor[ci]);
        aa_attn_result_free(&b);
      }
      aa_attn_result_free(&a);
      inputs_free(&in);
    }
}

/* Ratio range of a construction: min and max of eval(x) / 2^x over every
   float x in [1, 2) and [-2, -1). For |x| >= 1 the argument's fraction lies
   on the 2^-23 grid these visit (coarser above 2), and the result depends
   on floor(x) only through the exponent; finer fractions (|x| < 1) move the
   ratio by at most 2^(2^-23) - 1 < 1e-7 beyond the grid's extremes, covered
   by the margin. */
static void ratio_range(const aa_exp_t *e, double *rmin, double *rmax) {
  double mn = INFINITY, mx = 0;
  for (int sgn = 0; sgn < 2; sgn++)
    for (uint32_t u = 0; u < (1u << 23); u++) {
      float x = aa_f32_from_bits((sgn ? 0xbf800000u : 0x3f800000u) | u);
      double q = (double)aa_exp_eval(e, x) / exp2((double)x);
      if (q < mn) mn = q;
      if (q > mx) mx = q;
    }
  *rmin = mn * (1 - 1e-6);
  *rmax = mx * (1 + 1e-6);
}

/* ---- 3. tlx-exp's error lies within bounds from the ratio range ----
   Each unnormalised weight is p'_j = rho_j 2^(x_j) with rho_j in
   [rmin, rmax], so a normalised weight w'_j = p'_j / sum_k p'_k differs
   from the exact one by a factor in [rmin/rmax, rmax/rmin]:
   |w'_j - w_j| <= (R - 1) w_j, R = rmax/rmin (the mean bias cancels, only
   the spread remains). Hence |O'_c - O_c| <= (R - 1) sum_j w_j |V_jc| plus
   the pipeline's own roundings: O rounded to BF16 (2^-8 |O'|), the FP32
   score, sum, reciprocal and PV accumulation (below 1e-3 relative to
   sum_j w_j |V_jc| at n = 256, d = 64). The same bound holds for dV with
   dO in place of V and the BF16 rounding of dO~ = dO/l' (2^-8). The row sum
   itself keeps the bias: l'/l lies in [rmin/(1 + 2^-8), rmax/(1 - 2^-8)]
   (recip sums the BF16-rounded exact weights), up to the FP32 additions. */
static void test_bounds(void) {
  aa_problem_t pb;
  size_t n = 256, d = 64;
  aa_problem_init(&pb, n, n, d, 1, 1);
  inputs_t in;
  draw(&in, &pb, seed, 0);
  aa_recipe_t rt, rr;
  get(&rt, "tlx-exp");
  get(&rr, "recip");
  double rmin, rmax;
  ratio_range(&rt.fwd_exp, &rmin, &rmax);
  double R = rmax / rmin;
  printf("texp_attn: tlx-exp construction ratio range [%.6f, %.6f], R - 1 = %.4e\n", rmin, rmax, R - 1);
  AA_CHECK(rmin > 1.0 && rmax < 1.08 && R - 1 < 0.03,
           "quadratic-bf16 k=0.244 s=1.0476 ratio range [%.6f, %.6f] near the paper's [1.0440, 1.0687]", rmin, rmax);
  aa_attn_result_t a, b;
  if (run(&a, &pb, &rt, &in, 1) != AA_OK || run(&b, &pb, &rr, &in, 1) != AA_OK) return;
  /* exact softmax weights in long double */
  long double sc = 1.0L / sqrtl((long double)d);
  long double *w = malloc(n * n * sizeof *w);
  for (size_t i = 0; i < n; i++) {
    long double mx = -INFINITY, l = 0;
    for (size_t j = 0; j < n; j++) {
      long double s = 0;
      for (size_t c = 0; c < d; c++)
        s += (long double)in.q.data[i * d + c] * in.k.data[j * d + c];
      w[i * n + j] = s * sc;
      if (w[i * n + j] > mx) mx = w[i * n + j];
    }
    for (size_t j = 0; j < n; j++)
      l += (w[i * n + j] = expl(w[i * n + j] - mx));
    for (size_t j = 0; j < n; j++)
      w[i * n + j] /= l;
  }
  double worst_o = 0, worst_v = 0, err2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t c = 0; c < d; c++) {
      long double o = 0, cond = 0;
      for (size_t j = 0; j < n; j++) {
        o += w[i * n + j] * in.v.data[j * d + c];
        cond += w[i * n + j] * fabsl((long double)in.v.data[j * d + c]);
      }
      double got = a.o.data[i * d + c], e = fabs(got - (double)o);
      double bound = ((R - 1) + 1e-3) * (double)cond + 0x1p-8 * fabs(got);
      err2 += e * e;
      ref2 += (double)(o * o);
      if (e / bound > worst_o) worst_o = e / bound;
      if (e > bound) {
        AA_FAIL(
            "tlx-exp O[%zu][%zu]: |O' - O| <= (R-1) sum w|V| + 2^-8|O'|: got %a (bf16 bits %04x) exact %a bound %a "
            "(seed %llu)",
            i, c, got, (unsigned)(aa_f32_bits((float)got) >> 16), (double)o, bound, (unsigned long long)seed);
        goto done;
      }
    }
  for (size_t j = 0; j < n; j++)
    for (size_t c = 0; c < d; c++) {
      long double dv = 0, cond = 0;
      for (size_t i = 0; i < n; i++) {
        dv += w[i * n + j] * in.dO.data[i * d + c];
        cond += w[i * n + j] * fabsl((long double)in.dO.data[i * d + c]);
      }
      double got = a.dv.data[j * d + c], e = fabs(got - (double)dv);
      double bound = ((R - 1) + 0x1p-8 + 1e-3) * (double)cond + 0x1p-8 * fabs(got);
      if (e / bound > worst_v) worst_v = e / bound;
      if (e > bound) {
        AA_FAIL("tlx-exp dV[%zu][%zu]: |dV' - dV| <= (R-1+2^-8) sum w|dO| + 2^-8|dV'|: got %a exact %a bound %a "
                "(seed %llu)",
                j, c, got, (double)dv, bound, (unsigned long long)seed);
        goto done;
      }
    }
  printf("texp_attn: tlx-exp O rel_l2 vs exact %.3e, worst |err|/bound O %.3f dV %.3f\n", sqrt(err2 / ref2), worst_o,
         worst_v);
  /* The bias survives in the row sum: l'/l = recip(recip) / recip(tlx-exp). */
  {
    double lo = rmin / (1 + 0x1p-8) * (1 - 1e-4), hi = rmax / (1 - 0x1p-8) * (1 + 1e-4), mean = 0;
    for (size_t i = 0; i < n; i++) {
      double q = b.recip.data[i] / a.recip.data[i];
      mean += q / n;
      if (!(q >= lo && q <= hi)) {
        AA_FAIL("tlx-exp row %zu: l'/l in [%.6f, %.6f]: got %.8f (1/l' %a, 1/l %a, seed %llu)", i, lo, hi, q,
                a.recip.data[i], b.recip.data[i], (unsigned long long)seed);
        break;
      }
    }
    printf("texp_attn: mean l'/l over rows %.6f (the bias normalisation divides out)\n", mean);
  }
done:
  free(w);
  aa_attn_result_free(&a);
  aa_attn_result_free(&b);
  inputs_free(&in);
}

/* ---- measurement mode (ATTNACC_EXP_ATTN_MEASURE=n): the bias of the
   unnormalised weights of `attnacc run`'s inputs (seed ATTNACC_SEED or 1,
   d = 128, dense) and what is left of it after normalisation ---- */
static void measure(size_t n, uint64_t s, const char *preset) {
  size_t d = 128;
  aa_problem_t pb;
  aa_problem_init(&pb, n, n, d, 1, 1);
  inputs_t in;
  draw(&in, &pb, s, 0);
  aa_recipe_t rt, rr;
  get(&rt, preset);
  get(&rr, "recip");
  float c = (float)((double)(float)aa_problem_scale(&pb) * 1.4426950408889634);
  double sr = 0, sr2 = 0, mn = INFINITY, mx = 0, dw2 = 0, w2 = 0;
  double *p = malloc(n * sizeof *p), *e = malloc(n * sizeof *e);
  for (size_t i = 0; i < n; i++) {
    double lp = 0, le = 0;
    for (size_t j = 0; j < n; j++) {
      double sdot = 0;
      for (size_t k = 0; k < d; k++)
        sdot += in.q.data[i * d + k] * in.k.data[j * d + k];
      float x = (float)sdot * c; /* fwd.shift = 0: the argument is the scaled score in log2 units */
      p[j] = aa_exp_eval(&rt.fwd_exp, x);
      e[j] = exp2((double)x);
      double q = p[j] / e[j];
      sr += q;
      sr2 += q * q;
      mn = fmin(mn, q);
      mx = fmax(mx, q);
      lp += p[j];
      le += e[j];
    }
    for (size_t j = 0; j < n; j++) {
      double wd = p[j] / lp - e[j] / le;
      dw2 += wd * wd;
      w2 += (e[j] / le) * (e[j] / le);
    }
  }
  double N = (double)n * n, mean = sr / N, sd = sqrt(fmax(0, sr2 / N - mean * mean));
  aa_attn_result_t a, b;
  if (run(&a, &pb, &rt, &in, 0) == AA_OK && run(&b, &pb, &rr, &in, 0) == AA_OK) {
    double ml = 0, ol2 = 0, or2 = 0;
    for (size_t i = 0; i < n; i++)
      ml += b.recip.data[i] / a.recip.data[i] / n;
    for (size_t i = 0; i < n * d; i++) {
      ol2 += (a.o.data[i] - b.o.data[i]) * (a.o.data[i] - b.o.data[i]);
      or2 += b.o.data[i] * b.o.data[i];
    }
    printf("measure %s n=%zu d=%zu seed=%llu: weight ratio mean %.6f sd %.3e min %.6f max %.6f; pipeline row-sum "
           "ratio l'/l mean %.6f; normalised weights rel_l2 %.3e; O(%s) vs O(recip) rel_l2 %.3e\n",
           preset, n, d, (unsigned long long)s, mean, sd, mn, mx, ml, sqrt(dw2 / w2), preset, sqrt(ol2 / or2));
    aa_attn_result_free(&a);
    aa_attn_result_free(&b);
  }
  free(p);
  free(e);
  inputs_free(&in);
}

int main(void) {
  const char *m = getenv("ATTNACC_EXP_ATTN_MEASURE");
  if (m != NULL && *m != '\0') {
    const char *ss = getenv("ATTNACC_SEED"), *pr = getenv("ATTNACC_EXP_ATTN_PRESET");
    measure((size_t)strtoull(m, NULL, 0), ss != NULL ? strtoull(ss, NULL, 0) : 1, pr != NULL ? pr : "tlx-exp");
    return aa_test_finish("texp_attn");
  }
  seed = aa_test_seed("texp_attn");
  test_keys();
  test_constant_ratio();
  test_bounds();
  return aa_test_finish("texp_attn");
}
