/* attnacc: tests of the layout and score modules and of the 4-axis, '<i2', .npz and .safetensors readers, against
 * closed forms and per-batch oracles. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn.h"
#include "config.h"
#include "layout.h"
#include "npy.h"
#include "oracle.h"
#include "score.h"
#include "tests.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* Threads of the next parallel regions (1 without OpenMP, where the comparison is serial anyway). */
static void set_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

static char tmpdir[256];

/* ---- layouts ---- */

static void test_resolve(void) {
  aa_layout_t l;
  aa_error_t err = {{0}};
  size_t q4[4] = {2, 4, 32, 16}, k4[4] = {2, 2, 32, 16};
  size_t qa[4] = {1, 6, 4, 8}, ka[4] = {1, 3, 3, 8}; /* only bhnd: as bnhd 3 kv heads do not divide 4 */
  size_t qb[4] = {1, 4, 6, 8}, kb[4] = {1, 3, 3, 8}; /* only bnhd */
  size_t q3[3] = {4, 32, 16}, k3[3] = {2, 32, 16}, q2[2] = {32, 16}, k2[2] = {40, 16}, kbad[2] = {40, 8};
  int rc = aa_layout_resolve(&l, AA_LAYOUT_AUTO, 4, q4, k4, &err);
  AA_CHECK(rc == AA_EINVAL && strstr(err.msg, "bhnd") && strstr(err.msg, "bnhd"),
           "tscore resolve: ambiguous shapes give %d '%s', want AA_EINVAL naming bhnd and bnhd", rc, err.msg);
  AA_CHECK(aa_layout_resolve(&l, AA_LAYOUT_AUTO, 4, qa, ka, &err) == AA_OK && l == AA_LAYOUT_BHND,
           "tscore resolve: [1,6,4,8]/[1,3,3,8] is not bhnd (%d, %s)", (int)l, err.msg);
  AA_CHECK(aa_layout_resolve(&l, AA_LAYOUT_AUTO, 4, qb, kb, &err) == AA_OK && l == AA_LAYOUT_BNHD,
           "tscore resolve: [1,4,6,8]/[1,3,3,8] is not bnhd (%d, %s)", (int)l, err.msg);
  AA_CHECK(aa_layout_resolve(&l, AA_LAYOUT_AUTO, 3, q3, k3, &err) == AA_OK && l == AA_LAYOUT_HND,
           "tscore resolve: 3 axes are not hnd");
  AA_CHECK(aa_layout_resolve(&l, AA_LAYOUT_AUTO, 2, q2, k2, &err) == AA_OK && l == AA_LAYOUT_ND,
           "tscore resolve: 2 axes are not nd");
  rc = aa_layout_resolve(&l, AA_LAYOUT_AUTO, 2, q2, kbad, &err);
  AA_CHECK(rc == AA_ESHAPE && strstr(err.msg, "head dimensions"), "tscore resolve: d mismatch gives '%s'", err.msg);
  rc = aa_layout_resolve(&l, AA_LAYOUT_BNHD, 4, qa, ka, &err);
  AA_CHECK(rc == AA_ESHAPE && strstr(err.msg, "bnhd [B, N, H, d]") && strstr(err.msg, "divide"),
           "tscore resolve: a given layout that does not fit gives '%s'", err.msg);
  rc = aa_layout_resolve(&l, AA_LAYOUT_HND, 4, q4, k4, &err);
  AA_CHECK(rc == AA_ESHAPE && strstr(err.msg, "needs 3 axes"), "tscore resolve: axis count gives '%s'", err.msg);
}

/* Element (b, h, n, j) of a [B, N, H, d] array lands at folded head b*H + h, row n, column j; export and
   index invert it. Values encode their own position, so the check needs no second implementation. */
static void test_import(void) {
  size_t shape[4] = {2, 5, 3, 4}; /* B=2, N=5, H=3, d=4 */
  size_t n = 2 * 5 * 3 * 4, idx[4];
  double *a = malloc(n * sizeof *a), *back = malloc(n * sizeof *back);
  aa_tensor_t t;
  aa_dims_t m;
  aa_error_t err = {{0}};
  for (size_t b = 0; b < 2; b++)
    for (size_t i = 0; i < 5; i++)
      for (size_t h = 0; h < 3; h++)
        for (size_t j = 0; j < 4; j++)
          a[((b * 5 + i) * 3 + h) * 4 + j] = (double)(1000 * b + 100 * h + 10 * i + j);
  AA_CHECK(aa_layout_import(&t, a, AA_FMT_FP32, AA_LAYOUT_BNHD, 4, shape, &err) == AA_OK, "tscore import: %s",
           err.msg);
  aa_layout_dims(&m, AA_LAYOUT_BNHD, 4, shape);
  AA_CHECK(t.shape[0] == 6 && t.shape[1] == 5 && t.shape[2] == 4, "tscore import: folded shape [%zu, %zu, %zu]",
           t.shape[0], t.shape[1], t.shape[2]);
  for (size_t f = 0; f < n; f++) {
    size_t hh = f / 20, i = (f / 4) % 5, j = f % 4, b = hh / 3, h = hh % 3;
    double want = (double)(1000 * b + 100 * h + 10 * i + j);
    if (t.data[f] != want) {
      AA_FAIL("tscore import: folded element %zu is %g, want %g", f, t.data[f], want);
      break;
    }
    aa_layout_index(idx, AA_LAYOUT_BNHD, &m, f);
    if (idx[0] != b || idx[1] != i || idx[2] != h || idx[3] != j) {
      AA_FAIL("tscore index: folded %zu maps to (%zu, %zu, %zu, %zu), want (%zu, %zu, %zu, %zu)", f, idx[0], idx[1],
              idx[2], idx[3], b, i, h, j);
      break;
    }
  }
  aa_layout_export(back, &t, AA_LAYOUT_BNHD, &m);
  AA_CHECK(memcmp(a, back, n * sizeof *a) == 0, "tscore export: the round trip changed the array");
  aa_tensor_free(&t);
  free(a);
  free(back);
}

/* GQA with a batch: the oracle on the folded [B*H, N, d] problem equals the oracle of each batch alone. */
static void test_batch_gqa(uint64_t seed) {
  size_t B = 2, H = 4, HK = 2, N = 12, D = 8;
  aa_tensor_t in[4], one[4];
  aa_problem_t pb, p1;
  aa_oracle_opts_t oo;
  aa_oracle_result_t all, part;
  aa_error_t err = {{0}};
  size_t heads[4] = {H, HK, HK, H};
  aa_oracle_opts_init(&oo);
  for (int i = 0; i < 4; i++)
    aa_layout_draw(&in[i], seed, (uint64_t)i, B * heads[i], N, D, 0, 1.0, AA_FMT_BF16, &err);
  aa_problem_init(&pb, N, N, D, B * H, B * HK);
  pb.causal = 1;
  AA_CHECK(aa_oracle_run(&all, &pb, &in[0], &in[1], &in[2], &in[3], &oo, &err) == AA_OK, "tscore gqa: %s", err.msg);
  aa_problem_init(&p1, N, N, D, H, HK);
  p1.causal = 1;
  for (size_t b = 0; b < B; b++) {
    for (int i = 0; i < 4; i++) {
      size_t shape[3] = {heads[i], N, D}, per = heads[i] * N * D;
      aa_tensor_alloc(&one[i], 3, shape, AA_FMT_BF16);
      memcpy(one[i].data, in[i].data + b * per, per * sizeof(double));
    }
    AA_CHECK(aa_oracle_run(&part, &p1, &one[0], &one[1], &one[2], &one[3], &oo, &err) == AA_OK, "tscore gqa: %s",
             err.msg);
    {
      const aa_oracle_out_t *a[4] = {&all.o, &all.dq, &all.dk, &all.dv},
                            *p[4] = {&part.o, &part.dq, &part.dk, &part.dv};
      const char *nm[4] = {"o", "dq", "dk", "dv"};
      for (int k = 0; k < 4; k++) {
        size_t per = aa_tensor_numel(&p[k]->val);
        if (memcmp(a[k]->fp32.data + b * per, p[k]->fp32.data, per * sizeof(double)) != 0)
          AA_FAIL("tscore gqa: batch %zu's %s differs between the folded and the separate problem", b, nm[k]);
      }
    }
    aa_oracle_result_free(&part);
    for (int i = 0; i < 4; i++)
      aa_tensor_free(&one[i]);
  }
  aa_oracle_result_free(&all);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&in[i]);
}

/* ---- metrics and rules, on constructed data ---- */

static void make_ref(aa_oracle_out_t *r, const double *val, size_t n) {
  size_t shape[1] = {n};
  aa_round_opts_t r32 = {AA_FMT_FP32, AA_RND_NE, 1, 0}, r16 = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  memset(r, 0, sizeof *r);
  aa_tensor_alloc(&r->val, 1, shape, AA_FMT_FP64);
  aa_tensor_alloc(&r->fp32, 1, shape, AA_FMT_FP32);
  aa_tensor_alloc(&r->bf16, 1, shape, AA_FMT_BF16);
  for (size_t i = 0; i < n; i++) {
    r->val.data[i] = val[i];
    r->fp32.data[i] = aa_round(val[i], &r32, NULL);
    r->bf16.data[i] = aa_round(val[i], &r16, NULL);
  }
}

static void free_ref(aa_oracle_out_t *r) {
  aa_tensor_free(&r->val);
  aa_tensor_free(&r->fp32);
  aa_tensor_free(&r->bf16);
}

/* ref = 1 + i/64 (exact in fp16 for i < 64); got = ref moved by k_i fp16 ULPs (2^-10 in [1, 2)) with
   k = 0 for 50 elements, 1 for 40, 3 for 9 and 7 for 1: median 0.5 (0 and 1 at the middle), p99 the
   99th smallest = 3, max 7; normwise = 7 2^-10 / ulp16(max ref) = 7; max_rel = 7 2^-10 / ref at that element. */
static void test_ulp_stats(void) {
  enum { n = 100 };
  double val[n], got[n];
  aa_oracle_out_t ref;
  aa_tensor_t t;
  aa_score_out_t s;
  aa_error_t err = {{0}};
  size_t shape[1] = {n};
  for (int i = 0; i < n; i++) {
    int k = i < 50 ? 0 : i < 90 ? 1 : i < 99 ? 3 : 7;
    val[i] = 1.0 + (i % 64) / 64.0;
    got[i] = val[i] + k * ldexp(1.0, -10);
  }
  make_ref(&ref, val, n);
  aa_tensor_alloc(&t, 1, shape, AA_FMT_FP16);
  memcpy(t.data, got, sizeof got);
  AA_CHECK(aa_score_compare(&s, "o", &t, &ref, AA_FMT_FP16, AA_FMT_FP16, 0.01, 0.01, &err) == AA_OK, "tscore ulp: %s",
           err.msg);
  AA_CHECK(s.ulp_median == 0.5 && s.ulp_p99 == 3 && s.ulp_max == 7,
           "tscore ulp: fp16 median %g p99 %g max %g, want 0.5 3 7", s.ulp_median, s.ulp_p99, s.ulp_max);
  AA_CHECK(s.ulp_normwise == 7, "tscore ulp: normwise %a, want 7", s.ulp_normwise);
  AA_CHECK(s.max_rel == 7 * ldexp(1.0, -10) / val[99], "tscore ulp: max_rel %a, want %a", s.max_rel,
           7 * ldexp(1.0, -10) / val[99]);
  AA_CHECK(s.worst_abs == 99 && s.worst_got == got[99] && s.worst_ref == val[99], "tscore ulp: worst element %zu",
           s.worst_abs);
  /* the same data counted in fp32 ULPs: 2^13 per fp16 ULP in [1, 2) */
  aa_score_compare(&s, "o", &t, &ref, AA_FMT_FP16, AA_FMT_FP32, 0.01, 0.01, &err);
  AA_CHECK(s.ulp_max == 7 * 8192.0 && s.ulp_p99 == 3 * 8192.0, "tscore ulp: fp32 max %g p99 %g, want %g %g",
           s.ulp_max, s.ulp_p99, 7 * 8192.0, 3 * 8192.0);
  /* torch rule for fp16: rtol 1e-3, atol 1e-5; the 7-ULP element has |d| / (1e-5 + 1e-3 |b|) */
  {
    double d = 7 * ldexp(1.0, -10), want = d / (1e-5 + 1e-3 * val[99]);
    const aa_rule_result_t *r = &s.rule[AA_RULE_TORCH];
    AA_CHECK(r->applied && !r->pass && fabs(r->ratio - want) <= 1e-15 * want && r->worst == 99,
             "tscore torch rule: ratio %.17g worst %zu, want %.17g at 99", r->ratio, r->worst, want);
    /* 1 ULP (2^-10) is within 1e-5 + 1e-3 |b| for |b| >= 1; 3 and 7 ULPs are not: the last 10 elements */
    AA_CHECK(r->fail_count == 10, "tscore torch rule: %zu elements over, want the 10 with k >= 3", r->fail_count);
  }
  /* fa with a naive reference twice as far: ratio max_abs / (3 * 2 max_abs) = 1/6 for a gradient */
  {
    aa_score_out_t naive = s;
    naive.m.max_abs = 2 * s.m.max_abs;
    aa_score_apply_naive(&s, &naive);
    s.name = "dq";
    aa_score_apply_naive(&s, &naive);
    AA_CHECK(s.rule[AA_RULE_FA].pass && s.rule[AA_RULE_FA].ratio == 1.0 / 6, "tscore fa rule: ratio %a, want 1/6",
             s.rule[AA_RULE_FA].ratio);
    AA_CHECK(s.rule[AA_RULE_SDPA].pass && s.rule[AA_RULE_SDPA].ratio == s.m.max_abs / (180 * naive.m.max_abs),
             "tscore sdpa rule: ratio %a", s.rule[AA_RULE_SDPA].ratio);
    t.data[3] = NAN;
    aa_score_compare(&s, "dq", &t, &ref, AA_FMT_FP16, AA_FMT_FP16, 0.01, 0.01, &err);
    aa_score_apply_naive(&s, &naive);
    AA_CHECK(!s.rule[AA_RULE_FA].pass && !s.rule[AA_RULE_TORCH].pass && !s.rule[AA_RULE_ABSREL].pass && s.m.nan == 1,
             "tscore rules: a NaN element passes a rule");
  }
  aa_tensor_free(&t);
  free_ref(&ref);
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The ULP order statistics against a full sort written here, over seeded sizes 1..400 and ULP offsets 0..15 drawn
   with many ties (the selection of compare.c must give a sort's median, ceil(0.99 n)-th smallest and largest). */
static void test_ulp_order(uint64_t seed) {
  aa_pcg32_t rng;
  aa_pcg32_seed(&rng, seed, 77);
  for (int trial = 0; trial < 200 * aa_test_multiplier(); trial++) {
    size_t n = 1 + aa_pcg32_bounded(&rng, 400), shape[1] = {n}, k99 = (size_t)ceil(0.99 * (double)n);
    double *val = malloc(n * sizeof *val), *u = malloc(n * sizeof *u), med;
    unsigned top = 1 + aa_pcg32_bounded(&rng, 15);
    aa_oracle_out_t ref;
    aa_tensor_t t;
    aa_score_out_t s;
    for (size_t i = 0; i < n; i++)
      val[i] = 1.0 + (double)(i % 64) / 64.0;
    make_ref(&ref, val, n);
    aa_tensor_alloc(&t, 1, shape, AA_FMT_FP16);
    for (size_t i = 0; i < n; i++) {
      u[i] = aa_pcg32_bounded(&rng, top + 1);
      t.data[i] = val[i] + u[i] * ldexp(1.0, -10); /* u[i] fp16 ULPs above, in [1, 2.02) */
    }
    aa_score_compare(&s, "o", &t, &ref, AA_FMT_FP16, AA_FMT_FP16, 0.01, 0.01, NULL);
    qsort(u, n, sizeof *u, cmp_dbl);
    med = n % 2 ? u[n / 2] : 0.5 * (u[n / 2 - 1] + u[n / 2]);
    AA_CHECK(s.ulp_median == med && s.ulp_p99 == u[(k99 ? k99 : 1) - 1] && s.ulp_max == u[n - 1],
             "tscore ulp order (seed %llu, trial %d, n %zu): median %g p99 %g max %g, sorted %g %g %g",
             (unsigned long long)seed, trial, n, s.ulp_median, s.ulp_p99, s.ulp_max, med, u[(k99 ? k99 : 1) - 1],
             u[n - 1]);
    free_ref(&ref);
    aa_tensor_free(&t);
    free(val);
    free(u);
  }
}

static void test_rule_constants(void) {
  double rt, at;
  aa_fmt_t f[4] = {AA_FMT_BF16, AA_FMT_FP16, AA_FMT_FP32, AA_FMT_FP64};
  double want[4][2] = {{1.6e-2, 1e-5}, {1e-3, 1e-5}, {1.3e-6, 1e-5}, {1e-7, 1e-7}}; /* [pytorch-sdpa] */
  for (int i = 0; i < 4; i++) {
    aa_rule_torch_tol(&rt, &at, f[i]);
    AA_CHECK(rt == want[i][0] && at == want[i][1], "tscore torch tolerances of fmt %d: %g %g", (int)f[i], rt, at);
  }
  AA_CHECK(aa_rule_fa_factor("o") == 2 && aa_rule_fa_factor("dv") == 3, "tscore fa factors");
  AA_CHECK(aa_rule_sdpa_fudge("o") == 4 && aa_rule_sdpa_fudge("dq") == 180 && aa_rule_sdpa_fudge("dk") == 16 &&
               aa_rule_sdpa_fudge("dv") == 4,
           "tscore sdpa fudge factors");
}

/* The naive references in fp16 and fp32 are valid recipes, run, and are more accurate than bf16's. */
static void test_naive(uint64_t seed) {
  aa_fmt_t fm[3] = {AA_FMT_BF16, AA_FMT_FP16, AA_FMT_FP32};
  double err_dq[3] = {0};
  aa_tensor_t in[4];
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t orc;
  aa_error_t err = {{0}};
  aa_oracle_opts_init(&oo);
  for (int i = 0; i < 4; i++)
    aa_layout_draw(&in[i], seed, (uint64_t)(10 + i), 2, 24, 8, 0, 1.0, AA_FMT_BF16, &err);
  aa_problem_init(&pb, 24, 24, 8, 2, 2);
  aa_oracle_run(&orc, &pb, &in[0], &in[1], &in[2], &in[3], &oo, &err);
  for (int k = 0; k < 3; k++) {
    aa_recipe_t r;
    aa_attn_result_t res;
    aa_score_out_t s;
    AA_CHECK(aa_score_naive_recipe(&r, fm[k], &err) == AA_OK && aa_recipe_check(&r, &err) == AA_OK,
             "tscore naive %d: %s", (int)fm[k], err.msg);
    for (int i = 0; i < 4; i++)
      in[i].fmt = fm[k];
    if (aa_attn_run(&res, &pb, &r, &in[0], &in[1], &in[2], &in[3], &err) != AA_OK) {
      AA_FAIL("tscore naive %s: %s", r.name, err.msg);
      continue;
    }
    AA_CHECK(res.dq.fmt == fm[k], "tscore naive %s: dq is stored in fmt %d", r.name, (int)res.dq.fmt);
    aa_score_compare(&s, "dq", &res.dq, &orc.dq, fm[k], fm[k] == AA_FMT_FP32 ? AA_FMT_FP32 : fm[k], 0.01, 0.01, &err);
    err_dq[k] = s.m.rel_l2;
    aa_attn_result_free(&res);
  }
  /* unit roundoffs 2^-8, 2^-11, 2^-24: each step down in error by well over 4x */
  AA_CHECK(err_dq[1] < err_dq[0] / 4 && err_dq[2] < err_dq[1] / 100,
           "tscore naive: dq rel_l2 bf16 %g fp16 %g fp32 %g do not shrink with the precision", err_dq[0], err_dq[1],
           err_dq[2]);
  AA_CHECK(aa_score_naive_recipe(NULL, AA_FMT_FP64, &err) == AA_EINVAL, "tscore naive: fp64 is not refused");
  aa_oracle_result_free(&orc);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&in[i]);
}

/* ---- readers ---- */

static void write_file(const char *name, const void *data, size_t len) {
  char p[400];
  FILE *f;
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  f = fopen(p, "wb");
  fwrite(data, 1, len, f);
  fclose(f);
}

static void test_npy_nd(void) {
  /* a '<i2' [1, 2, 1, 2] array of the BF16 bits of 1, -2, 0.5, 3 (0x3f80, 0xc000, 0x3f00, 0x4040) */
  const char hdr[] = "{'descr': '<i2', 'fortran_order': False, 'shape': (1, 2, 1, 2), }";
  unsigned char buf[256];
  const unsigned char data[8] = {0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3f, 0x40, 0x40};
  size_t hl = 118, off = 10;
  char p[400];
  aa_ndarray_t a;
  aa_tensor_t t;
  aa_error_t err = {{0}};
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)hl, buf[9] = 0;
  memset(buf + off, ' ', hl);
  memcpy(buf + off, hdr, strlen(hdr));
  buf[off + hl - 1] = '\n';
  memcpy(buf + off + hl, data, sizeof data);
  write_file("i2.npy", buf, off + hl + sizeof data);
  snprintf(p, sizeof p, "%s/i2.npy", tmpdir);
  AA_CHECK(aa_npy_read_nd(&a, p, 0, &err) == AA_EFORMAT && strstr(err.msg, "'<i2'"),
           "tscore '<i2' without the flag: '%s'", err.msg);
  AA_CHECK(aa_npy_read_nd(&a, p, AA_NPY_BF16_BITS, &err) == AA_OK && a.ndim == 4 && a.fmt == AA_FMT_BF16 &&
               a.data[0] == 1 && a.data[1] == -2 && a.data[2] == 0.5 && a.data[3] == 3,
           "tscore '<i2' as BF16 bits: %s", err.msg);
  aa_ndarray_free(&a);
  AA_CHECK(aa_npy_read(&t, p, &err) == AA_EFORMAT, "tscore: aa_npy_read accepts 4 axes");
}

static void test_safetensors(void) {
  /* {"__metadata__":{"bf16_bits":"true"},"q":{"dtype":"I16","shape":[2],"data_offsets":[0,4]},
     "k":{"dtype":"F32","shape":[1,2],"data_offsets":[4,12]}} */
  const char *json = "{\"__metadata__\":{\"bf16_bits\":\"true\"},\"q\":{\"dtype\":\"I16\",\"shape\":[2],"
                     "\"data_offsets\":[0,4]},\"k\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[4,12]}}";
  unsigned char buf[512];
  size_t hl = strlen(json), n = 0;
  float f[2] = {0.25f, -7.5f};
  char p[400];
  aa_ndarray_t a;
  aa_error_t err = {{0}};
  for (int i = 0; i < 8; i++)
    buf[n++] = (unsigned char)(((uint64_t)hl >> (8 * i)) & 0xff);
  memcpy(buf + n, json, hl);
  n += hl;
  buf[n++] = 0x80, buf[n++] = 0x3f, buf[n++] = 0x00, buf[n++] = 0xc0; /* bf16 1, -2 */
  memcpy(buf + n, f, sizeof f);                                       /* little-endian host (configure) */
  n += sizeof f;
  write_file("t.safetensors", buf, n);
  snprintf(p, sizeof p, "%s/t.safetensors", tmpdir);
  AA_CHECK(aa_safetensors_read(&a, p, "q", 0, &err) == AA_OK && a.fmt == AA_FMT_BF16 && a.ndim == 1 &&
               a.data[0] == 1 && a.data[1] == -2,
           "tscore safetensors I16 with bf16_bits metadata: %s", err.msg);
  aa_ndarray_free(&a);
  AA_CHECK(aa_safetensors_read(&a, p, "k", 0, &err) == AA_OK && a.fmt == AA_FMT_FP32 && a.ndim == 2 &&
               a.shape[1] == 2 && a.data[0] == 0.25 && a.data[1] == -7.5,
           "tscore safetensors F32: %s", err.msg);
  aa_ndarray_free(&a);
  AA_CHECK(aa_safetensors_read(&a, p, "v", 0, &err) == AA_ENOTFOUND && strstr(err.msg, "tensors: q, k"),
           "tscore safetensors missing tensor: '%s'", err.msg);
  buf[8] = '#'; /* break the JSON: no opening brace */
  write_file("bad.safetensors", buf, n);
  snprintf(p, sizeof p, "%s/bad.safetensors", tmpdir);
  AA_CHECK(aa_safetensors_read(&a, p, "q", 0, &err) == AA_EFORMAT && strstr(err.msg, "malformed"),
           "tscore safetensors malformed header: '%s'", err.msg);
  write_file("short.safetensors", buf, 5);
  snprintf(p, sizeof p, "%s/short.safetensors", tmpdir);
  AA_CHECK(aa_safetensors_read(&a, p, "q", 0, &err) == AA_EFORMAT, "tscore safetensors: a 5-byte file is accepted");
}

static void test_npz_refusals(void) {
  char p[400];
  aa_ndarray_t a;
  aa_error_t err = {{0}};
  write_file("not.npz", "this is not a zip archive", 25);
  snprintf(p, sizeof p, "%s/not.npz", tmpdir);
#ifdef AA_HAVE_LIBZIP
  AA_CHECK(aa_npz_read(&a, p, "q", 0, &err) == AA_EFORMAT && strstr(err.msg, "zip"),
           "tscore npz: a non-zip file gives '%s'", err.msg);
#else
  AA_CHECK(aa_npz_read(&a, p, "q", 0, &err) == AA_EUNSUPPORTED && strstr(err.msg, "libzip-dev"),
           "tscore npz without libzip: '%s'", err.msg);
#endif
}

/* The systematic statistics of lib/score.h on [H = 2, N = 4, d = 4] with b_i = 1 + i/32 (sums exact in double):
   a = (1 + 2^-6) b gives ls_scale = 2^-6 exactly, a zero residual (sigma 0), offset 0 and correlation 1, and
   fails expect by its scale against a recipe without bias; a = b with row 5 zeroed gives that row's |b| as
   row_err_max and head 1's rel_l2 as sqrt(|b_row5|^2 / |b_head1|^2). */
/* The chunked, parallel comparison (lib/score/compare.c, lib/metrics/compare.c) against a serial second algorithm
   written here, on a tensor of several chunks (2^14 elements each) with NaN, Inf and equal worst elements in
   different chunks: the first non-finite element, the worst absolute error (the first of equal ones), rule
   abs-rel's failures and worst element, the 0.99 quantile of |a - b| by a full sort, max_rel over the top four
   binades; and every statistic the same with 1, 2 and 3 threads. */
static void test_chunked(uint64_t seed) {
  enum { n = 3 * 16384 + 123 };
  double *val = malloc(n * sizeof *val), *d = malloc(n * sizeof *d), max_b = 0, worst = -1, max_rel = 0;
  size_t shape[1] = {n}, used = 0, fails = 0, worst_i = 0, first = SIZE_MAX, k, rule_i = 0;
  double rule_worst = -1;
  aa_pcg32_t rng;
  aa_oracle_out_t ref;
  aa_tensor_t t;
  aa_score_out_t s[3];
  int omp_max = 1;
#ifdef _OPENMP
  omp_max = omp_get_max_threads();
#endif
  aa_pcg32_seed(&rng, seed, 91);
  for (size_t i = 0; i < n; i++)
    val[i] = ldexp(1.0 + aa_pcg32_bounded(&rng, 1024) / 1024.0, (int)aa_pcg32_bounded(&rng, 12) - 6) *
             (aa_pcg32_bounded(&rng, 2) ? 1 : -1);
  make_ref(&ref, val, n);
  aa_tensor_alloc(&t, 1, shape, AA_FMT_BF16);
  for (size_t i = 0; i < n; i++) /* the BF16 rounding, moved by up to 3 BF16 ULPs */
    t.data[i] = ref.bf16.data[i] + ldexp((double)aa_pcg32_bounded(&rng, 7) - 3, ilogb(ref.bf16.data[i]) - 7);
  t.data[20000] = NAN, t.data[40000] = INFINITY, t.data[5] = -INFINITY;
  t.data[17000] = val[17000] + 64, t.data[33000] = val[33000] + 64; /* equal worst errors in chunks 1 and 2 */
  val[17000] = ref.val.data[17000], val[33000] = ref.val.data[33000];
  for (size_t i = 0; i < n; i++) {
    double a = t.data[i], b = ref.val.data[i], e = fabs(a - b);
    if (!isfinite(a)) {
      first = first == SIZE_MAX ? i : first, fails++;
      continue;
    }
    max_b = fmax(max_b, fabs(b));
    d[used++] = e;
    fails += !(e <= 0.01 + 0.01 * fabs(b));
    if (e > worst) worst = e, worst_i = i;
    if (e / (0.01 + 0.01 * fabs(b)) > rule_worst) rule_worst = e / (0.01 + 0.01 * fabs(b)), rule_i = i;
  }
  for (size_t i = 0; i < n; i++)
    if (isfinite(t.data[i]) && fabs(ref.val.data[i]) >= ldexp(max_b, -4))
      max_rel = fmax(max_rel, fabs(t.data[i] - ref.val.data[i]) / fabs(ref.val.data[i]));
  qsort(d, used, sizeof *d, cmp_dbl);
  k = (size_t)ceil(0.99 * (double)used);
  for (int th = 0; th < 3; th++) {
    set_threads(th + 1);
    AA_CHECK(aa_score_compare(&s[th], "o", &t, &ref, AA_FMT_BF16, AA_FMT_BF16, 0.01, 0.01, NULL) == AA_OK,
             "tscore chunked: compare failed");
  }
  set_threads(omp_max);
  AA_CHECK(s[0].first_nonfinite == first && s[0].m.nan == 1 && s[0].m.inf == 2 && s[0].worst_abs == worst_i &&
               worst_i == 17000 && s[0].rule[AA_RULE_ABSREL].fail_count == fails &&
               s[0].rule[AA_RULE_ABSREL].worst == rule_i && s[0].abs_q99 == d[k - 1] && s[0].max_rel == max_rel,
           "tscore chunked: first %zu (want %zu), worst %zu (want %zu), fails %zu (want %zu), q99 %a (want %a), "
           "max_rel %a (want %a)",
           s[0].first_nonfinite, first, s[0].worst_abs, worst_i, s[0].rule[AA_RULE_ABSREL].fail_count, fails,
           s[0].abs_q99, d[k - 1], s[0].max_rel, max_rel);
  for (int th = 1; th < 3; th++) {
    const aa_score_out_t *a = &s[0], *b = &s[th];
#define SAME(x) (a->x == b->x || (a->x != a->x && b->x != b->x)) /* NaN equal to NaN */
    int same = SAME(m.rel_l2) && SAME(m.mean_ulp) && SAME(m.max_ulp) && SAME(m.fail_count) && SAME(ulp_median) &&
               SAME(ulp_p99) && SAME(ulp_mean) && SAME(abs_q99) && SAME(max_rel) && SAME(max_rel_any) &&
               SAME(worst_rel) && SAME(ls_scale) && SAME(scale_sigma) && SAME(row_err_max) &&
               SAME(rule[AA_RULE_TORCH].ratio) && SAME(rule[AA_RULE_TORCH].worst) &&
               SAME(rule[AA_RULE_TORCH].fail_count);
#undef SAME
    AA_CHECK(same, "tscore chunked: %d threads differ from 1 (rel_l2 %a / %a, q99 %a / %a)", th + 1, b->m.rel_l2,
             a->m.rel_l2, b->abs_q99, a->abs_q99);
  }
  aa_tensor_free(&t);
  free_ref(&ref);
  free(val);
  free(d);
}

static void test_systematic(void) {
  enum { n = 32 };
  double val[n], row5 = 0, head1 = 0;
  aa_oracle_out_t ref;
  aa_tensor_t t;
  aa_score_out_t s, rec;
  aa_error_t err = {{0}};
  size_t shape[3] = {2, 4, 4};
  for (int i = 0; i < n; i++) {
    val[i] = 1.0 + i / 32.0;
    if (i >= 20 && i < 24) row5 += val[i] * val[i];
    if (i >= 16) head1 += val[i] * val[i];
  }
  make_ref(&ref, val, n);
  aa_tensor_alloc(&t, 3, shape, AA_FMT_FP64);
  for (int i = 0; i < n; i++)
    t.data[i] = val[i] * (1 + ldexp(1.0, -6));
  aa_score_compare(&s, "dq", &t, &ref, AA_FMT_FP64, AA_FMT_FP32, 0.01, 0.01, &err);
  AA_CHECK(s.ls_scale == ldexp(1.0, -6) && s.scale_sigma == 0 && fabs(s.ls_offset) < 1e-17 && s.err_corr == 1,
           "tscore systematic: scale %a sigma %a offset %a corr %a, want 2^-6 0 0 1", s.ls_scale, s.scale_sigma,
           s.ls_offset, s.err_corr);
  rec = s;
  rec.ls_scale = 0;
  aa_score_apply_expect(&s, &rec);
  AA_CHECK(!s.rule[AA_RULE_EXPECT].pass && s.expect_stat == AA_EXPECT_SCALE && isinf(s.rule[AA_RULE_EXPECT].ratio) &&
               s.expect_ratio[AA_EXPECT_REL_L2] == 1 / AA_EXPECT_BAND_L2,
           "tscore expect: stat %d ratio %g rel-l2 ratio %g, want scale, Inf, 1/%g", s.expect_stat,
           s.rule[AA_RULE_EXPECT].ratio, s.expect_ratio[AA_EXPECT_REL_L2], AA_EXPECT_BAND_L2);
  for (int i = 0; i < n; i++)
    t.data[i] = i >= 20 && i < 24 ? 0 : val[i];
  aa_score_compare(&s, "dq", &t, &ref, AA_FMT_FP64, AA_FMT_FP32, 0.01, 0.01, &err);
  AA_CHECK(s.row_worst == 5 && s.row_err_max == sqrt(row5) && s.head_worst == 1 &&
               fabs(s.head_rel_l2_max - sqrt(row5 / head1)) <= 1e-15,
           "tscore systematic: row %zu |e| %a head %zu rel %a, want 5 %a 1 %a", s.row_worst, s.row_err_max,
           s.head_worst, s.head_rel_l2_max, sqrt(row5), sqrt(row5 / head1));
  aa_tensor_free(&t);
  free_ref(&ref);
}

/* aa_score_infer_fmt of one value against the definition by aa_round (a value belongs to a format when its RNE
   rounding, subnormals kept, overflow to Inf, returns it): every BF16 pattern, and each one moved by one FP32 ulp
   and by one double ulp either way (FP32 values that are not BF16, values of no format), in FP16's range too. */
static aa_fmt_t infer_by_round(double x) {
  static const aa_fmt_t order[3] = {AA_FMT_BF16, AA_FMT_FP16, AA_FMT_FP32};
  int ok[3];
  for (int k = 0; k < 3; k++) {
    aa_round_opts_t ro = {order[k], AA_RND_NE, 1, 0};
    ok[k] = x != x || aa_round(x, &ro, NULL) == x;
  }
  if (ok[0] && !ok[1]) return AA_FMT_BF16;
  if (ok[1] && !ok[0]) return AA_FMT_FP16;
  return ok[0] ? AA_FMT_BF16 : ok[2] ? AA_FMT_FP32 : AA_FMT_FP64;
}

static void test_infer_fmt(void) {
  size_t one = 1;
  aa_tensor_t t;
  int bad = 0;
  if (aa_tensor_alloc(&t, 1, &one, AA_FMT_FP64) != AA_OK) return;
  for (uint32_t p = 0; p < 0x10000u && bad < 5; p++) {
    uint32_t u = p << 16;
    float f;
    memcpy(&f, &u, 4);
    double xs[5] = {f, nextafterf(f, INFINITY), nextafterf(f, -INFINITY), nextafter(f, INFINITY),
                    nextafter(f, -INFINITY)};
    for (int j = 0; j < 5; j++) {
      t.data[0] = xs[j];
      aa_fmt_t got = aa_score_infer_fmt(&t), want = infer_by_round(xs[j]);
      if (got != want && bad++ < 5)
        AA_FAIL("infer_fmt: %a (bf16 pattern 0x%04x, case %d): %d, by aa_round %d", xs[j], (unsigned)p, j, got, want);
    }
  }
  aa_tensor_free(&t);
}

int main(void) {
  uint64_t seed = aa_test_seed("tscore");
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/tscore.XXXXXX", base && *base ? base : "/tmp");
  if (mkdtemp(tmpdir) == NULL) {
    printf("FAIL tscore: cannot create a temporary folder\n");
    return 1;
  }
  test_resolve();
  test_import();
  test_batch_gqa(seed);
  test_ulp_stats();
  test_systematic();
  test_infer_fmt();
  test_ulp_order(seed);
  test_chunked(seed);
  test_rule_constants();
  test_naive(seed);
  test_npy_nd();
  test_safetensors();
  test_npz_refusals();
  {
    const char *files[] = {"i2.npy", "t.safetensors", "bad.safetensors", "short.safetensors", "not.npz"};
    char p[400];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
      snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
      unlink(p);
    }
    rmdir(tmpdir);
  }
  return aa_test_finish("tscore");
}
