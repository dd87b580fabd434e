/* attnacc: the kernel presets' mechanisms against closed forms: FP8 P offset, power-of-two casts, Hadamard rotation,
 * fused dS scale, the pre-scaled K of Triton's tutorial. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "tests.h"

#define D 16
#define NQ 2
#define NK 2

/* Two keys, two queries, d = 16. Query 0 = 8 e0, key 0 = 0, key 1 = -4.15625 e0:
   fa3-fp8 casts key 1 to e4m3, which holds -4 (3 fraction bits; -4.15625
   rounds to -4), so the score gap is 8 * 4 / sqrt(16) = 8 and query 0's
   weights are 1 and p1 = exp(-8) = 2^-11.54 relative to the max. V: key 0
   = 0, key 1 = e0, so O[0][0] = p1 / (1 + p1) exactly in real arithmetic.
   e4m3's smallest subnormal is 2^-9: without the 2^8 offset p1 rounds to
   0 and O[0][0] = 0; with it p1 2^8 = 2^-3.54 is a normal e4m3 value within
   2^-4 relative of p1 2^8. Query 1 = 0: both weights 1, O[1][0] = 1/2. */
static void fill(aa_tensor_t *q, aa_tensor_t *k, aa_tensor_t *v, aa_tensor_t *dO) {
  size_t sq[3] = {1, NQ, D}, sk[3] = {1, NK, D};
  aa_tensor_alloc(q, 3, sq, AA_FMT_BF16);
  aa_tensor_alloc(k, 3, sk, AA_FMT_BF16);
  aa_tensor_alloc(v, 3, sk, AA_FMT_BF16);
  aa_tensor_alloc(dO, 3, sq, AA_FMT_BF16);
  memset(q->data, 0, sizeof(double) * NQ * D);
  memset(k->data, 0, sizeof(double) * NK * D);
  memset(v->data, 0, sizeof(double) * NK * D);
  for (size_t i = 0; i < NQ * D; i++)
    dO->data[i] = (i % 3) * 0.25 - 0.25;
  q->data[0] = 8;
  k->data[D] = -4.15625;
  v->data[D] = 1;
}

static int run(aa_attn_result_t *res, const char *spec, const aa_tensor_t *q, const aa_tensor_t *k,
               const aa_tensor_t *v, const aa_tensor_t *dO) {
  aa_recipe_t r;
  aa_problem_t pb;
  aa_error_t err = {{0}};
  aa_problem_init(&pb, NQ, NK, D, 1, 1);
  if (aa_recipe_from_spec(&r, spec, &err) != AA_OK || aa_attn_run(res, &pb, &r, q, k, v, dO, &err) != AA_OK) {
    AA_FAIL("%s: %s", spec, err.msg);
    return 0;
  }
  return 1;
}

static void p_offset(const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO) {
  aa_attn_result_t a, b;
  double p1 = exp(-8.0), want = p1 / (1 + p1);
  if (run(&a, "fa3-fp8:fwd.p_scale_exp=0", q, k, v, dO)) {
    AA_CHECK(a.o.data[0] == 0, "no offset: the 2^-11.5 weight must underflow e4m3 (O[0][0] = %g, want 0)",
             a.o.data[0]);
    AA_CHECK(a.o.data[D] == 0.5, "no offset: O[1][0] = %g, want 1/2", a.o.data[D]);
    aa_attn_result_free(&a);
  }
  if (run(&b, "fa3-fp8", q, k, v, dO)) {
    /* e4m3 rounding of p1 2^8 (2^-4 relative at most), then the BF16 output (2^-8) */
    AA_CHECK(fabs(b.o.data[0] / want - 1) < 0.0625 + 0.004, "offset 8: O[0][0] = %g, closed form %g", b.o.data[0],
             want);
    AA_CHECK(b.o.data[D] == 0.5, "offset 8: O[1][0] = %g, want 1/2", b.o.data[D]);
    aa_attn_result_free(&b);
  }
}

/* The cast itself: with the offset and no cast (fwd.qkv_fmt = none) key 1
   stays -4.15625: score gap 8.3125, O[0][0] = exp(-8.3125) / (1 + ...). */
static void no_cast(const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO) {
  aa_attn_result_t a;
  double p1 = exp(-8.3125), want = p1 / (1 + p1);
  if (run(&a, "fa3-fp8:fwd.qkv_fmt=none", q, k, v, dO)) {
    AA_CHECK(fabs(a.o.data[0] / want - 1) < 0.0665, "no cast: O[0][0] = %g, closed form %g", a.o.data[0], want);
    aa_attn_result_free(&a);
  }
}

/* A Hadamard rotation of Q and K leaves Q K^T unchanged: in binary64 (io
   fp64) the rotated problem's O equals the plain one to rounding. */
static void rotation(void) {
  aa_tensor_t q, k, v, dO;
  size_t s[3] = {1, 8, D};
  aa_tensor_alloc(&q, 3, s, AA_FMT_FP64);
  aa_tensor_alloc(&k, 3, s, AA_FMT_FP64);
  aa_tensor_alloc(&v, 3, s, AA_FMT_FP64);
  aa_tensor_alloc(&dO, 3, s, AA_FMT_FP64);
  for (size_t i = 0; i < 8 * D; i++) { /* a fixed irregular pattern */
    q.data[i] = sin(0.7 * (double)i + 0.1);
    k.data[i] = cos(1.3 * (double)i);
    v.data[i] = sin(0.37 * (double)i * (double)i);
    dO.data[i] = cos(0.11 * (double)i);
  }
  aa_problem_t pb;
  aa_problem_init(&pb, 8, 8, D, 1, 1);
  aa_recipe_t r0, r1;
  aa_attn_result_t a, b;
  aa_error_t err = {{0}};
  if (aa_recipe_preset(&r0, "exact-fp64", &err) != AA_OK ||
      aa_recipe_from_spec(&r1, "exact-fp64:fwd.qk_rotate=hadamard", &err) != AA_OK ||
      aa_attn_run(&a, &pb, &r0, &q, &k, &v, &dO, &err) != AA_OK) {
    AA_FAIL("rotation: %s", err.msg);
    return;
  }
  if (aa_attn_run(&b, &pb, &r1, &q, &k, &v, &dO, &err) != AA_OK) {
    AA_FAIL("rotation: %s", err.msg);
  } else {
    double worst = 0;
    for (size_t i = 0; i < 8 * D; i++)
      worst = fmax(worst, fabs(a.o.data[i] - b.o.data[i]));
    AA_CHECK(worst < 1e-13, "Hadamard-rotated O differs from the plain O by %g", worst);
    aa_attn_result_free(&b);
  }
  aa_attn_result_free(&a);
  /* d not a power of two: refused with a message naming the key */
  aa_problem_init(&pb, 8, 8, 12, 1, 1);
  size_t s12[3] = {1, 8, 12};
  aa_tensor_t q12, k12, v12;
  aa_tensor_alloc(&q12, 3, s12, AA_FMT_FP64);
  aa_tensor_alloc(&k12, 3, s12, AA_FMT_FP64);
  aa_tensor_alloc(&v12, 3, s12, AA_FMT_FP64);
  memset(q12.data, 0, sizeof(double) * 96);
  memset(k12.data, 0, sizeof(double) * 96);
  memset(v12.data, 0, sizeof(double) * 96);
  AA_CHECK(aa_attn_run(&b, &pb, &r1, &q12, &k12, &v12, NULL, &err) == AA_EINVAL && strstr(err.msg, "qk_rotate"),
           "d = 12 with fwd.qk_rotate = hadamard: want a refusal naming the key, got '%s'", err.msg);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v), aa_tensor_free(&dO);
  aa_tensor_free(&q12), aa_tensor_free(&k12), aa_tensor_free(&v12);
}

/* bwd.ds_scale = fused rounds FP32 dS * scale once to BF16; `on` rounds dS
   to BF16 first and again after the multiply. With a power-of-two scale
   the two agree bit for bit (the multiply is exact); with scale 1/sqrt(2)
   they must differ somewhere, and fused must equal fa2 (scale at the end)
   up to where the one BF16 rounding falls: their dQ agree to 2^-7 in l2. */
static void ds_scale(void) {
  aa_tensor_t q, k, v, dO;
  size_t s[3] = {1, 8, 2};
  aa_tensor_alloc(&q, 3, s, AA_FMT_BF16);
  aa_tensor_alloc(&k, 3, s, AA_FMT_BF16);
  aa_tensor_alloc(&v, 3, s, AA_FMT_BF16);
  aa_tensor_alloc(&dO, 3, s, AA_FMT_BF16);
  aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  for (size_t i = 0; i < 16; i++) {
    q.data[i] = aa_round(sin(1.7 * (double)i + 0.3), &ro, NULL);
    k.data[i] = aa_round(cos(0.9 * (double)i), &ro, NULL);
    v.data[i] = aa_round(sin(2.3 * (double)i), &ro, NULL);
    dO.data[i] = aa_round(cos(0.5 * (double)i + 1), &ro, NULL);
  }
  const char *specs[2][2] = {{"fa2:bwd.ds_scale=on,bwd.dq_scale=none,bwd.dk_scale=none",
                              "fa2:bwd.ds_scale=fused,bwd.dq_scale=none,bwd.dk_scale=none"},
                             {"fa2:bwd.ds_scale=on,bwd.dq_scale=none,bwd.dk_scale=none", "fa2"}};
  for (int pow2 = 1; pow2 >= 0; pow2--) {
    aa_problem_t pb;
    aa_problem_init(&pb, 8, 8, 2, 1, 1);
    if (pow2) pb.scale = 0.5, pb.scale_default = 0;
    aa_attn_result_t a, b, c;
    aa_recipe_t ra, rb, rc;
    aa_error_t err = {{0}};
    if (aa_recipe_from_spec(&ra, specs[0][0], &err) || aa_recipe_from_spec(&rb, specs[0][1], &err) ||
        aa_recipe_from_spec(&rc, specs[1][1], &err) || aa_attn_run(&a, &pb, &ra, &q, &k, &v, &dO, &err) ||
        aa_attn_run(&b, &pb, &rb, &q, &k, &v, &dO, &err) || aa_attn_run(&c, &pb, &rc, &q, &k, &v, &dO, &err)) {
      AA_FAIL("ds_scale: %s", err.msg);
      return;
    }
    int differ = 0;
    double num = 0, den = 0;
    for (size_t i = 0; i < 16; i++) {
      differ += a.dq.data[i] != b.dq.data[i];
      num += (b.dq.data[i] - c.dq.data[i]) * (b.dq.data[i] - c.dq.data[i]);
      den += c.dq.data[i] * c.dq.data[i];
    }
    double worst = sqrt(num / den);
    if (pow2)
      AA_CHECK(differ == 0, "scale 1/2: on and fused differ in %d dQ elements (the multiply is exact)", differ);
    else
      AA_CHECK(differ > 0, "scale 1/sqrt(2): on and fused agree everywhere (double rounding not modelled?)");
    AA_CHECK(worst <= ldexp(1, -7), "fused vs fa2 dQ: relative l2 %g (more than two BF16 ulps)", worst);
    aa_attn_result_free(&a), aa_attn_result_free(&b), aa_attn_result_free(&c);
  }
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v), aa_tensor_free(&dO);
}

/* FA4's emulated pairs: with Q = 0 every score is 0 and every weight
   2^0; the hardware exp2 (exact) gives 1, the stand-in emulation
   quadratic-bf16 (s = 1.0476) gives BF16(1.0476) = 1.046875. With V = the
   identity (d = n_k = 128), O[0][j] = p_j / l shows which keys were
   emulated. The closed form for freq 10, res 4, start 1 and one 128-key
   block (four 32-key fragments): fragments 1 and 2, pairs at k % 10 >= 6,
   i.e. k in {6..9, 16..19, 26..29}: 24 keys, columns 32 j + k. */
static void emu_pattern(void) {
  enum { NK2 = 128 };
  aa_tensor_t q, k, v;
  size_t s[3] = {1, 1, NK2}, sk[3] = {1, NK2, NK2};
  aa_tensor_alloc(&q, 3, s, AA_FMT_BF16);
  aa_tensor_alloc(&k, 3, sk, AA_FMT_BF16);
  aa_tensor_alloc(&v, 3, sk, AA_FMT_BF16);
  memset(q.data, 0, sizeof(double) * NK2);
  memset(k.data, 0, sizeof(double) * NK2 * NK2);
  memset(v.data, 0, sizeof(double) * NK2 * NK2);
  for (size_t j = 0; j < NK2; j++)
    v.data[j * NK2 + j] = 1;
  aa_problem_t pb;
  aa_problem_init(&pb, 1, NK2, NK2, 1, 1);
  aa_recipe_t r;
  aa_attn_result_t res;
  aa_error_t err = {{0}};
  if (aa_recipe_preset(&r, "fa4", &err) != AA_OK ||
      aa_recipe_set(&r, "fwd.exp_emu", "quadratic-bf16:k=0.244,d=0,s=1.0476", &err) != AA_OK ||
      aa_attn_run(&res, &pb, &r, &q, &k, &v, NULL, &err) != AA_OK) {
    AA_FAIL("fa4 emulation pattern: %s", err.msg);
    return;
  }
  int wrong = 0, emulated = 0;
  for (size_t c = 0; c < NK2; c++) {
    size_t j = c / 32, kk = c % 32;
    int want = j >= 1 && j <= 2 && kk % 10 >= 6;
    int got = res.o.data[c] > res.o.data[0];
    emulated += got;
    wrong += got != want;
  }
  AA_CHECK(wrong == 0 && emulated == 24, "fa4: %d keys emulated (want 24), %d in the wrong place", emulated, wrong);
  aa_attn_result_free(&res);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v);
}

/* bwd.k_prescale (Triton's tutorial, arg_k = k * (sm_scale * RCP_LN2) in FP16): d = 1 (scale 1), two keys
   K = (1, -1), V = (1, 0), dO = 1, one query. K' = fp16(float(log2 e)) = 1477/1024 for key 0.
   Query 0: every score is 0, so P = 1/2 (lse = float(ln 2), times float(log2 e) rounds to 1), O = 1/2,
   D = 1/2, dS = P (dP - D) = +-1/4 exactly; dQ = fp16(float(float(ln 2) * (1/4 K'_0 + 1/4 K'_0))), where the
   unscaled K gives fp16(1/4 + 1/4) = 1/2.
   Query 64: the forward's weights are 1 and 2^-184.7 (0 in FP32), lse = 64, and the backward's weight of key 0 is
   2^(64 K'_0 - float(64 float(log2 e))) = 2^-0.01998..., not the forward's 1: dV_0 = fp16 of that weight. */
static int prescale_run(aa_attn_result_t *res, const char *spec, double qval) {
  aa_tensor_t q, k, v, dO;
  size_t sq[3] = {1, 1, 1}, sk[3] = {1, 2, 1};
  aa_tensor_alloc(&q, 3, sq, AA_FMT_FP16);
  aa_tensor_alloc(&k, 3, sk, AA_FMT_FP16);
  aa_tensor_alloc(&v, 3, sk, AA_FMT_FP16);
  aa_tensor_alloc(&dO, 3, sq, AA_FMT_FP16);
  q.data[0] = qval, dO.data[0] = 1;
  k.data[0] = 1, k.data[1] = -1;
  v.data[0] = 1, v.data[1] = 0;
  aa_recipe_t r;
  aa_problem_t pb;
  aa_error_t err = {{0}};
  aa_problem_init(&pb, 1, 2, 1, 1, 1);
  int ok = aa_recipe_from_spec(&r, spec, &err) == AA_OK && aa_attn_run(res, &pb, &r, &q, &k, &v, &dO, &err) == AA_OK;
  if (!ok) AA_FAIL("%s: %s", spec, err.msg);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v), aa_tensor_free(&dO);
  return ok;
}

static void k_prescale(void) {
  aa_round_opts_t h = {AA_FMT_FP16, AA_RND_NE, 1, 0};
  double l2e = (float)(1 / log(2.0)), kp = aa_round(l2e, &h, NULL);
  double want_dq = aa_round((float)((float)log(2.0) * (0.25 * kp + 0.25 * kp)), &h, NULL);
  double want_dv = aa_round((float)exp2((float)(64 * kp - (float)(64 * l2e))), &h, NULL);
  aa_attn_result_t a;
  AA_CHECK(kp == 1477.0 / 1024, "fp16(log2 e) = %.10g, want 1477/1024", kp);
  if (prescale_run(&a, "triton-tutorial", 0)) {
    AA_CHECK(a.dq.data[0] == want_dq, "k_prescale on: dQ = %.10g, want %.10g", a.dq.data[0], want_dq);
    AA_CHECK(a.dk.data[0] == 0 && a.dk.data[1] == 0, "k_prescale on: dK = %g, %g, want 0 (Q = 0)", a.dk.data[0],
             a.dk.data[1]);
    aa_attn_result_free(&a);
  }
  if (prescale_run(&a, "triton-tutorial:bwd.k_prescale=off", 0)) {
    AA_CHECK(a.dq.data[0] == 0.5, "k_prescale off: dQ = %.10g, want 1/2", a.dq.data[0]);
    aa_attn_result_free(&a);
  }
  if (prescale_run(&a, "triton-tutorial", 64)) {
    AA_CHECK(a.dv.data[0] == want_dv && want_dv < 1, "k_prescale on: dV_0 = %.10g, want %.10g", a.dv.data[0],
             want_dv);
    aa_attn_result_free(&a);
  }
  if (prescale_run(&a, "triton-tutorial:bwd.k_prescale=off", 64)) {
    AA_CHECK(a.dv.data[0] == 1, "k_prescale off: dV_0 = %.10g, want 1", a.dv.data[0]);
    aa_attn_result_free(&a);
  }
  aa_recipe_t r;
  aa_error_t err = {{0}};
  AA_CHECK(aa_recipe_from_spec(&r, "triton-tutorial:exp_form=natural", &err) != AA_OK,
           "k_prescale with exp_form = natural accepted");
}

int main(void) {
  aa_tensor_t q, k, v, dO;
  fill(&q, &k, &v, &dO);
  p_offset(&q, &k, &v, &dO);
  no_cast(&q, &k, &v, &dO);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v), aa_tensor_free(&dO);
  rotation();
  ds_scale();
  emu_pattern();
  k_prescale();
  return aa_test_finish("tkernel_presets");
}
