/* attnacc: attention masks, additive biases, key padding, logit offsets and fully masked rows: the oracle against a
 * long-double reference written here and against its MPFR path, and the emulation's mask keys. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <math.h>

#include "attn.h"
#include "fmt.h"
#include "layout.h"
#include "oracle.h"
#include "problem.h"
#include "recipe.h"
#include "rng.h"
#include "tests.h"

#define NQ 7
#define NK 9
#define D 8
#define H 2
#define KH 1

/* One masked problem and its inputs; the masks are filled by the cases below. */
typedef struct {
  aa_problem_t pb;
  aa_tensor_t in[4]; /* q, k, v, dO */
  uint8_t mask[H * NQ * NK];
  double bias[H * NQ * NK];
} mcase_t;

static void fill(aa_tensor_t *t, size_t heads, size_t n, aa_pcg64_t *r) {
  size_t shape[3] = {heads, n, D};
  aa_tensor_alloc(t, 3, shape, AA_FMT_BF16);
  aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  for (size_t i = 0; i < aa_tensor_numel(t); i++)
    t->data[i] = aa_round(aa_pcg64_normal(r), &ro, NULL);
}

/* Case kind: 0 a boolean mask per head (causal too) with a fully masked row; 1 a bias broadcast over the heads
   with -inf entries, key padding and an offset of -150 (every LSE far below -88.7); 2 both, offset +120. */
static void make(mcase_t *c, int kind, uint64_t seed) {
  aa_pcg64_t r;
  uint64_t tag[1] = {(uint64_t)kind};
  aa_rng_derive(&r, seed, tag, 1);
  fill(&c->in[0], H, NQ, &r);
  fill(&c->in[1], KH, NK, &r);
  fill(&c->in[2], KH, NK, &r);
  fill(&c->in[3], H, NQ, &r);
  aa_problem_init(&c->pb, NQ, NK, D, H, KH);
  for (size_t e = 0; e < H * NQ * NK; e++) {
    c->mask[e] = aa_pcg64_uniform(&r) > 0.3;
    double u = aa_pcg64_uniform(&r);
    c->bias[e] = u < 0.2 ? -INFINITY : ldexp(floor(aa_pcg64_normal(&r) * 64), -5);
  }
  for (size_t j = 0; j < NK; j++)
    c->mask[2 * NK + j] = 0; /* head 0, row 2: fully masked */
  if (kind != 1) c->pb.mask = c->mask;
  if (kind != 0) c->pb.bias = c->bias;
  c->pb.mask_hstride = kind == 1 ? 0 : NQ * NK;
  c->pb.causal = kind == 0;
  c->pb.key_pad = kind == 1 ? 2 : 0;
  c->pb.logit_offset = kind == 0 ? 0 : kind == 1 ? -150 : 120;
}

static void free_case(mcase_t *c) {
  for (int t = 0; t < 4; t++)
    aa_tensor_free(&c->in[t]);
}

/* The definition of problem.h written out, in long double: visibility, score, and the softmax's forward and
   backward. Outputs as the oracle lays them out. */
static int ref_visible(const aa_problem_t *pb, size_t h, size_t i, size_t j) {
  size_t e = (pb->mask_hstride ? h : 0) * NQ * NK + i * NK + j;
  if (pb->causal && j > i) return 0;
  if (j >= NK - pb->key_pad) return 0;
  if (pb->mask != NULL && !pb->mask[e]) return 0;
  return pb->bias == NULL || pb->bias[e] != -INFINITY;
}

typedef struct {
  long double o[H * NQ * D], lse[H * NQ], dq[H * NQ * D], dk[KH * NK * D], dv[KH * NK * D];
} ref_t;

static void ref_row(ref_t *R, const mcase_t *c, size_t h, size_t i, long double *P) {
  const aa_problem_t *pb = &c->pb;
  const double *q = c->in[0].data + (h * NQ + i) * D, *K = c->in[1].data, *V = c->in[2].data;
  long double s[NK], mx = -INFINITY, z = 0, scale = 1.0L / sqrtl((long double)D);
  for (size_t j = 0; j < NK; j++) {
    size_t e = (pb->mask_hstride ? h : 0) * NQ * NK + i * NK + j;
    long double dot = 0;
    for (size_t x = 0; x < D; x++)
      dot += (long double)q[x] * K[j * D + x];
    s[j] = dot * scale + (pb->bias != NULL ? pb->bias[e] : 0) + pb->logit_offset;
    if (ref_visible(pb, h, i, j) && s[j] > mx) mx = s[j];
  }
  for (size_t j = 0; j < NK; j++)
    z += ref_visible(pb, h, i, j) ? expl(s[j] - mx) : 0;
  R->lse[h * NQ + i] = z > 0 ? mx + logl(z) : -INFINITY;
  for (size_t j = 0; j < NK; j++)
    P[j] = ref_visible(pb, h, i, j) ? expl(s[j] - mx) / z : 0;
  for (size_t x = 0; x < D; x++) {
    long double o = 0;
    for (size_t j = 0; j < NK; j++)
      o += P[j] * V[j * D + x];
    R->o[(h * NQ + i) * D + x] = o;
  }
}

static void ref_run(ref_t *R, const mcase_t *c) {
  const double *Q = c->in[0].data, *K = c->in[1].data, *V = c->in[2].data, *dO = c->in[3].data;
  long double scale = 1.0L / sqrtl((long double)D);
  memset(R, 0, sizeof *R);
  for (size_t h = 0; h < H; h++)
    for (size_t i = 0; i < NQ; i++) {
      long double P[NK], Dr = 0;
      ref_row(R, c, h, i, P);
      const double *doi = dO + (h * NQ + i) * D;
      for (size_t x = 0; x < D; x++)
        Dr += (long double)doi[x] * R->o[(h * NQ + i) * D + x];
      for (size_t j = 0; j < NK; j++) {
        long double dp = 0;
        for (size_t x = 0; x < D; x++)
          dp += (long double)doi[x] * V[j * D + x];
        long double ds = P[j] * (dp - Dr);
        for (size_t x = 0; x < D; x++) {
          R->dq[(h * NQ + i) * D + x] += scale * ds * K[j * D + x];
          R->dk[j * D + x] += scale * ds * Q[(h * NQ + i) * D + x];
          R->dv[j * D + x] += P[j] * doi[x];
        }
      }
    }
}

static int run_oracle(aa_oracle_result_t *res, const mcase_t *c, aa_oracle_path_t path) {
  aa_oracle_opts_t opts;
  aa_error_t err = {0};
  aa_oracle_opts_init(&opts);
  opts.path = path;
  opts.device = AA_ORACLE_DEVICE_CPU;
  int st = aa_oracle_run(res, &c->pb, &c->in[0], &c->in[1], &c->in[2], &c->in[3], &opts, &err);
  if (st != AA_OK) AA_FAIL("oracle (%s): %s", aa_oracle_path_name(path), err.msg);
  return st;
}

/* val within 1e-12 of the reference (relative to the tensor's largest value); -inf and 0 exactly. */
static void cmp_ref(const char *what, const aa_oracle_out_t *o, const long double *ref, size_t n) {
  long double m = 0;
  for (size_t e = 0; e < n; e++)
    if (isfinite(ref[e])) m = fmaxl(m, fabsl(ref[e]));
  for (size_t e = 0; e < n; e++) {
    double v = o->val.data[e];
    int ok = isinf(ref[e]) ? v == (double)ref[e] : fabsl(v - ref[e]) <= 1e-12L * m;
    if (ref[e] == 0) ok = v == 0;
    if (!ok) AA_FAIL("%s[%zu]: oracle %a, reference %La", what, e, v, ref[e]);
  }
}

static void test_oracle_ref(uint64_t seed) {
  for (int kind = 0; kind < 3; kind++) {
    mcase_t c;
    ref_t R;
    aa_oracle_result_t f = {0}, m = {0};
    make(&c, kind, seed);
    ref_run(&R, &c);
    if (run_oracle(&f, &c, AA_ORACLE_FAST) == AA_OK && run_oracle(&m, &c, AA_ORACLE_MPFR) == AA_OK) {
      printf("case %d: LSE of row 0 %.17g (reference %.17Lg)\n", kind, f.lse.val.data[0], R.lse[0]);
      cmp_ref("O", &f.o, R.o, H * NQ * D);
      cmp_ref("LSE", &f.lse, R.lse, H * NQ);
      cmp_ref("dQ", &f.dq, R.dq, H * NQ * D);
      cmp_ref("dK", &f.dk, R.dk, KH * NK * D);
      cmp_ref("dV", &f.dv, R.dv, KH * NK * D);
      /* fast and MPFR: both certified, so the same correct FP32 roundings */
      const aa_oracle_out_t *a[5] = {&f.o, &f.lse, &f.dq, &f.dk, &f.dv}, *b[5] = {&m.o, &m.lse, &m.dq, &m.dk, &m.dv};
      for (int t = 0; t < 5; t++)
        for (size_t e = 0; e < aa_tensor_numel(&a[t]->fp32); e++)
          if (memcmp(&a[t]->fp32.data[e], &b[t]->fp32.data[e], sizeof(double)) != 0)
            AA_FAIL("case %d tensor %d [%zu]: fast fp32 %a, mpfr fp32 %a", kind, t, e, a[t]->fp32.data[e],
                    b[t]->fp32.data[e]);
    }
    aa_oracle_result_free(&f);
    aa_oracle_result_free(&m);
    free_case(&c);
  }
}

/* A logit offset c shifts every LSE by c and changes nothing else (problem.h). */
static void test_offset(uint64_t seed) {
  mcase_t c;
  aa_oracle_result_t a = {0}, b = {0};
  make(&c, 1, seed);
  c.pb.logit_offset = 0;
  int ok = run_oracle(&a, &c, AA_ORACLE_FAST) == AA_OK;
  c.pb.logit_offset = -150;
  ok = ok && run_oracle(&b, &c, AA_ORACLE_FAST) == AA_OK;
  for (size_t r = 0; ok && r < H * NQ; r++) {
    double la = a.lse.val.data[r], lb = b.lse.val.data[r];
    if (isinf(la) ? la != lb : fabs(lb - la + 150) > 1e-13 * fabs(lb)) AA_FAIL("offset: LSE %a -> %a", la, lb);
  }
  const aa_oracle_out_t *x[4] = {&a.o, &a.dq, &a.dk, &a.dv}, *y[4] = {&b.o, &b.dq, &b.dk, &b.dv};
  for (int t = 0; ok && t < 4; t++)
    for (size_t e = 0; e < aa_tensor_numel(&x[t]->fp32); e++)
      AA_CHECK(x[t]->fp32.data[e] == y[t]->fp32.data[e], "offset: tensor %d [%zu] %a -> %a", t, e, x[t]->fp32.data[e],
               y[t]->fp32.data[e]);
  aa_oracle_result_free(&a);
  aa_oracle_result_free(&b);
  free_case(&c);
}

static int run_recipe(aa_attn_result_t *res, const mcase_t *c, const char *spec) {
  aa_recipe_t r;
  aa_error_t err = {0};
  if (aa_recipe_from_spec(&r, spec, &err) != AA_OK) {
    AA_FAIL("recipe %s: %s", spec, err.msg);
    return 1;
  }
  int st = aa_attn_run(res, &c->pb, &r, &c->in[0], &c->in[1], &c->in[2], &c->in[3], &err);
  if (st != AA_OK) AA_FAIL("%s: %s", spec, err.msg);
  return st;
}

static void same_bits(const char *what, const aa_attn_result_t *a, const aa_attn_result_t *b) {
  const aa_tensor_t *x[5] = {&a->o, &a->lse, &a->dq, &a->dk, &a->dv},
                    *y[5] = {&b->o, &b->lse, &b->dq, &b->dk, &b->dv};
  for (int t = 0; t < 5; t++)
    for (size_t e = 0; e < aa_tensor_numel(x[t]); e++)
      if (memcmp(&x[t]->data[e], &y[t]->data[e], sizeof(double)) != 0) {
        AA_FAIL("%s: tensor %d [%zu] %a vs %a", what, t, e, x[t]->data[e], y[t]->data[e]);
        return;
      }
}

/* A boolean (or -inf bias) mask that is the causal one gives the causal problem's bits: an independent check of
   the emulation's mask path against its interval path. */
static void test_emul_causal(uint64_t seed) {
  static const char *const rec[] = {"fa2", "naive-bf16", "fa2-fixed", "recip", "fa4", "efficient-h100"};
  for (size_t k = 0; k < sizeof rec / sizeof rec[0]; k++)
    for (int form = 0; form < 2; form++) {
      mcase_t c;
      aa_attn_result_t a = {0}, b = {0};
      make(&c, 0, seed);
      c.pb.mask = NULL;
      int ok = run_recipe(&a, &c, rec[k]) == AA_OK;
      for (size_t e = 0; e < H * NQ * NK; e++) {
        size_t i = e / NK % NQ, j = e % NK;
        c.mask[e] = j <= i;
        c.bias[e] = j <= i ? 0 : -INFINITY;
      }
      c.pb.causal = 0;
      if (form == 0) c.pb.mask = c.mask;
      if (form == 1) c.pb.bias = c.bias;
      ok = ok && run_recipe(&b, &c, rec[k]) == AA_OK;
      char what[64];
      snprintf(what, sizeof what, "%s, causal as a %s mask", rec[k], form ? "bias" : "boolean");
      if (ok) same_bits(what, &a, &b);
      aa_attn_result_free(&a);
      aa_attn_result_free(&b);
      free_case(&c);
    }
}

/* Fully masked rows: the defaults are the problem's definition (O = 0, LSE = -inf); mask.empty_lse = posinf and
   mask.empty_o = nan give flash-attn's +inf and the math backend's NaN; mask.score = lowest averages V in the
   math backend's model (naive-bf16; an exp2-FMA kernel's S c - max c is the FP32 rounding error of -FLT_MAX c,
   about 2^100, and its weights are 0 or Inf). */
static void test_emul_empty(uint64_t seed) {
  mcase_t c;
  aa_attn_result_t a = {0}, b = {0}, l = {0};
  make(&c, 0, seed);
  c.pb.causal = 0;
  size_t r = 2; /* head 0, row 2 */
  if (run_recipe(&a, &c, "fa2") == AA_OK &&
      run_recipe(&b, &c, "fa2:mask.empty_lse=posinf,mask.empty_o=nan") == AA_OK &&
      run_recipe(&l, &c, "naive-bf16:mask.score=lowest") == AA_OK) {
    AA_CHECK(a.lse.data[r] == -INFINITY && b.lse.data[r] == INFINITY, "empty LSE %a, posinf %a", a.lse.data[r],
             b.lse.data[r]);
    for (size_t x = 0; x < D; x++) {
      AA_CHECK(a.o.data[r * D + x] == 0 && a.dq.data[r * D + x] == 0, "empty row: O %a dQ %a", a.o.data[r * D + x],
               a.dq.data[r * D + x]);
      AA_CHECK(isnan(b.o.data[r * D + x]) && isnan(b.dq.data[r * D + x]), "nan row: O %a dQ %a", b.o.data[r * D + x],
               b.dq.data[r * D + x]);
      AA_CHECK(isnan(b.dk.data[x]) && isnan(b.dv.data[x]), "nan row: dK %a dV %a", b.dk.data[x], b.dv.data[x]);
      double mean = 0;
      for (size_t j = 0; j < NK; j++)
        mean += c.in[2].data[j * D + x] / NK;
      AA_CHECK(fabs(l.o.data[r * D + x] - mean) <= 0x1p-7 * (1 + fabs(mean)), "lowest: O %a, mean of V %a",
               l.o.data[r * D + x], mean);
    }
    AA_CHECK(isfinite(l.lse.data[r]), "lowest: LSE %a finite", l.lse.data[r]);
  }
  aa_attn_result_free(&a);
  aa_attn_result_free(&b);
  aa_attn_result_free(&l);
  free_case(&c);
}

/* mask.score = zero: padded keys take score 0 (the cuDNN model): the emulation against the long-double softmax
   with those keys scored 0, within BF16 accuracy. */
static void test_emul_zero(uint64_t seed) {
  mcase_t c;
  aa_attn_result_t a = {0};
  make(&c, 1, seed);
  c.pb.bias = NULL;
  c.pb.logit_offset = 0;
  c.pb.key_pad = 3;
  if (run_recipe(&a, &c, "fa2:mask.score=zero") == AA_OK)
    for (size_t h = 0; h < H; h++)
      for (size_t i = 0; i < NQ; i++) {
        long double s[NK], z = 0, scale = 1.0L / sqrtl((long double)D);
        for (size_t j = 0; j < NK; j++) {
          long double dot = 0;
          for (size_t x = 0; x < D; x++)
            dot += (long double)c.in[0].data[(h * NQ + i) * D + x] * c.in[1].data[j * D + x];
          s[j] = j < NK - 3 ? dot * scale : 0;
          z += expl(s[j]);
        }
        for (size_t x = 0; x < D; x++) {
          long double o = 0;
          for (size_t j = 0; j < NK; j++)
            o += expl(s[j]) / z * c.in[2].data[j * D + x];
          double got = a.o.data[(h * NQ + i) * D + x];
          AA_CHECK(fabsl(got - o) <= 0x1p-7L * (1 + fabsl(o)), "zero-scored padding: O %a, reference %La", got, o);
        }
      }
  aa_attn_result_free(&a);
  free_case(&c);
}

/* The distributions of lib/layout.h aimed at NaN regions, against their definitions: normal draws redrawn here
   from the same stream, constant inputs, near-constant ties, a few huge keys, a massive-activation head. */
static void test_dists(uint64_t seed) {
  aa_tensor_t t = {0};
  aa_error_t err = {0};
  size_t n = 4096, d = 16, huge = 0;
  aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  aa_pcg64_t rng;
  uint64_t tags[2] = {1, 0};
  aa_rng_derive(&rng, seed, tags, 2);
  if (aa_layout_draw(&t, seed, 1, 1, n, d, AA_DIST_NORMAL, 2.0, AA_FMT_BF16, &err) == AA_OK)
    for (size_t e = 0; e < n * d; e++) {
      double z = aa_round(2.0 * aa_pcg64_normal(&rng), &ro, NULL);
      if (t.data[e] != z) AA_FAIL("normal draw [%zu]: %a, redrawn %a", e, t.data[e], z);
    }
  aa_tensor_free(&t);
  if (aa_layout_draw(&t, seed, 0, 2, 8, d, AA_DIST_CONSTANT, 133120.0, AA_FMT_BF16, &err) == AA_OK)
    for (size_t e = 0; e < 2 * 8 * d; e++)
      AA_CHECK(t.data[e] == 133120.0, "constant [%zu]: %a", e, t.data[e]);
  aa_tensor_free(&t);
  if (aa_layout_draw(&t, seed, 0, 1, n, d, AA_DIST_NEAR_CONSTANT, 1.0, AA_FMT_BF16, &err) == AA_OK)
    for (size_t e = 0; e < n * d; e++) /* 1 + z/256 in BF16 (spacing 2^-7 above 1, 2^-8 below): |z| <= 6 */
      AA_CHECK(fabs(t.data[e] - 1) <= 0x1.8p-5 && t.data[e] == ldexp(rint(ldexp(t.data[e], 8)), -8),
               "near-constant [%zu]: %a", e, t.data[e]);
  aa_tensor_free(&t);
  if (aa_layout_draw(&t, seed, 1, 1, n, d, AA_DIST_HUGE_KEYS, 1.0, AA_FMT_BF16, &err) == AA_OK)
    for (size_t r = 0; r < n; r++) {
      double m = 0;
      for (size_t c = 0; c < d; c++)
        m = fmax(m, fabs(t.data[r * d + c]));
      huge += m > 8; /* 16 normals all below 1/8 in a x64 row: probability 1e-14 */
    }
  AA_CHECK(huge >= n / 128 && huge <= n / 32, "huge-keys: %zu of %zu key rows huge, expected about 1/64", huge, n);
  aa_tensor_free(&t);
  if (aa_layout_draw(&t, seed, 0, 2, n, d, AA_DIST_MASSIVE, 1.0, AA_FMT_BF16, &err) == AA_OK) {
    double m0 = 0, m1 = 0;
    for (size_t r = 0; r < n; r++) {
      m0 += t.data[r * d] / n;
      m1 += t.data[(n + r) * d] / n;
    }
    AA_CHECK(fabs(m0 - 32) < 0.2 && fabs(m1) < 0.2, "massive: channel 0 means %g (head 0), %g (head 1)", m0, m1);
  }
  aa_tensor_free(&t);
}

/* mask.enter: with before-scale the kernel's logit gains scale * bias, with before-cap the bias goes inside the
   softcap's tanh; each emulation against the long-double softmax of that definition, within BF16 accuracy, and
   (so that the check can fail) away from the problem's own definition (after-cap). */
static void test_emul_enter(uint64_t seed) {
  static const char *const spec[] = {"naive-bf16:mask.enter=before-scale", "fa2:mask.enter=before-scale",
                                     "fa2:mask.enter=before-cap"};
  for (int k = 0; k < 3; k++) {
    mcase_t c;
    aa_attn_result_t a = {0};
    make(&c, 1, seed);
    c.pb.key_pad = 0;
    c.pb.logit_offset = 0;
    for (size_t e = 0; e < H * NQ * NK; e++)
      c.bias[e] = isinf(c.bias[e]) ? 0 : 4 * c.bias[e];
    c.pb.softcap = k == 2 ? 2.0 : 0;
    if (run_recipe(&a, &c, spec[k]) == AA_OK) {
      long double scale = 1.0L / sqrtl((long double)D), worst_def = 0, worst_alt = 0, m = 0;
      for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < NQ; i++) {
          long double s[NK], t[NK], zs = 0, zt = 0;
          for (size_t j = 0; j < NK; j++) {
            long double dot = 0, b = c.bias[i * NK + j];
            for (size_t x = 0; x < D; x++)
              dot += (long double)c.in[0].data[(h * NQ + i) * D + x] * c.in[1].data[j * D + x];
            s[j] = k < 2 ? (dot + b) * scale : 2 * tanhl((dot * scale + b) / 2); /* the key's definition */
            t[j] = k < 2 ? dot * scale + b : 2 * tanhl(dot * scale / 2) + b;     /* the problem's */
            zs += expl(s[j]);
            zt += expl(t[j]);
          }
          for (size_t x = 0; x < D; x++) {
            long double os = 0, ot = 0, got = a.o.data[(h * NQ + i) * D + x];
            for (size_t j = 0; j < NK; j++) {
              os += expl(s[j]) / zs * c.in[2].data[j * D + x];
              ot += expl(t[j]) / zt * c.in[2].data[j * D + x];
            }
            worst_def = fmaxl(worst_def, fabsl(got - os));
            worst_alt = fmaxl(worst_alt, fabsl(got - ot));
            m = fmaxl(m, fabsl(os));
          }
        }
      printf("%s: max |O - definition| %.3Lg, |O - after-cap| %.3Lg (max |O| %.3Lg)\n", spec[k], worst_def, worst_alt,
             m);
      AA_CHECK(worst_def <= 0x1p-6L * m, "%s: O %Lg from its definition", spec[k], worst_def);
      AA_CHECK(worst_alt >= 0x1p-4L * m, "%s: O only %Lg from after-cap's, the test cannot tell them", spec[k],
               worst_alt);
    }
    aa_attn_result_free(&a);
    free_case(&c);
  }
}

/* aa_problem_check refuses what has no softmax or no meaning, naming it. */
static void test_check(uint64_t seed) {
  static const struct {
    const char *what, *says;
  } cases[] = {{"NaN bias entry", "bias entry 5"},   {"+inf bias entry", "bias entry 5"},
               {"head stride", "head stride"},       {"key padding past n_k", "key padding"},
               {"infinite offset", "logit offset"},  {"mask with varlen", "varlen"},
               {"key padding with varlen", "varlen"}};
  static const int32_t cu[3] = {0, 3, NQ}, cuk[3] = {0, 4, NK};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    mcase_t c;
    aa_error_t err = {0};
    make(&c, 2, seed);
    c.bias[5] = k == 0 ? NAN : k == 1 ? INFINITY : c.bias[5];
    if (k == 2) c.pb.mask_hstride = 3;
    if (k == 3) c.pb.key_pad = NK + 1;
    if (k == 4) c.pb.logit_offset = INFINITY;
    if (k >= 5) c.pb.varlen_batch = 2, c.pb.cu_seqlens_q = cu, c.pb.cu_seqlens_k = cuk, c.pb.mask = NULL;
    if (k == 6) c.pb.bias = NULL, c.pb.key_pad = 1;
    int st = aa_problem_check(&c.pb, &err);
    AA_CHECK(st != AA_OK && strstr(err.msg, cases[k].says) != NULL, "check, %s: status %d, message '%s'",
             cases[k].what, st, err.msg);
    free_case(&c);
  }
}

int main(void) {
  uint64_t seed = aa_test_seed("tmask");
  test_oracle_ref(seed);
  test_offset(seed);
  test_emul_causal(seed);
  test_emul_empty(seed);
  test_emul_zero(seed);
  test_dists(seed);
  test_emul_enter(seed);
  test_check(seed);
  return aa_test_finish("tmask");
}
