/* attnacc: the FP8 P cast of fa4-fp8 against closed forms: a stale running max lets P x 2^8 pass e4m3's 448. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "recipe.h"
#include "tests.h"

/* One query q = e0 against 256 keys in two 128-key blocks (fa4's tiles,
   the last block first): key 0 scores 2 (q.k0 = 2, scale 1), every other
   key 0. V sends key 0 to column 1 and every other key to column 2, so
   o[1] is key 0's weight and o[2] the rest's. Every input is exact in
   e4m3, so the cast of Q, K and V changes nothing. */
enum { NK = 256, D = 16 };

static void inputs(aa_tensor_t *q, aa_tensor_t *k, aa_tensor_t *v) {
  size_t sq[3] = {1, 1, D}, sk[3] = {1, NK, D};
  aa_tensor_alloc(q, 3, sq, AA_FMT_BF16);
  aa_tensor_alloc(k, 3, sk, AA_FMT_BF16);
  aa_tensor_alloc(v, 3, sk, AA_FMT_BF16);
  memset(q->data, 0, D * sizeof *q->data);
  memset(k->data, 0, NK * D * sizeof *k->data);
  memset(v->data, 0, NK * D * sizeof *v->data);
  q->data[0] = 1, k->data[0] = 2;
  for (size_t j = 0; j < NK; j++)
    v->data[j * D + (j == 0 ? 1 : 2)] = 1;
}

static int run(aa_attn_result_t *res, const char *spec) {
  aa_problem_t pb;
  aa_recipe_t r;
  aa_tensor_t q, k, v;
  aa_error_t err = {{0}};
  aa_problem_init(&pb, 1, NK, D, 1, 1);
  pb.scale_default = 0, pb.scale = 1;
  inputs(&q, &k, &v);
  int st = aa_recipe_from_spec(&r, spec, &err);
  if (st == AA_OK) st = aa_attn_run(res, &pb, &r, &q, &k, &v, NULL, &err);
  if (st != AA_OK) AA_FAIL("%s: status %d: %s", spec, st, err.msg);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v);
  return st;
}

static void near(const char *spec, const char *what, double got, double want, double rel) {
  AA_CHECK(fabs(got - want) <= rel * fabs(want), "%s: %s = %a (%.6g), want %.6g within %g relative", spec, what, got,
           got, want, rel);
}

/* With a threshold above the jump 2 log2(e) = 2.885 (log2 units) the max
   stays 0 when key 0 arrives: its P x 2^8 is 2^8 e^2 = 1891.6, cast to 448,
   while the FP32 row sum 2^8 (255 + e^2) counts it in full. So o[1] =
   448 / (2^8 (255 + e^2)) (the softmax weight e^2 / (255 + e^2) times
   448 / (2^8 e^2) = 0.237) and o[2] = 255 / (255 + e^2) exactly. A
   threshold below the jump rescales: o[1] is the softmax weight (key 0's P
   is exactly 2^8; the others, 2^8 e^-2 = 34.6, carry e4m3's 1/16 relative
   spacing into o[2] only through the sum, o[1] through l). */
static void test_threshold(const char *spec, int stale) {
  aa_attn_result_t res;
  if (run(&res, spec) != AA_OK) return;
  double e2 = exp(2.0), w0 = e2 / (255 + e2), wr = 255 / (255 + e2);
  double o1 = res.o.data[1], o2 = res.o.data[2];
  near(spec, "o[1]", o1, stale ? 448 / (256 * (255 + e2)) : w0, 0.01);
  near(spec, "o[2]", o2, wr, stale ? 0.01 : 0.07);
  near(spec, "p_max", res.p_max, stale ? 256 * e2 : 256, 1e-5);
  AA_CHECK(res.p_cast == NK, "%s: p_cast = %zu, want %d", spec, res.p_cast, NK);
  AA_CHECK(res.p_over == (size_t)stale, "%s: p_over = %zu, want %d", spec, res.p_over, stale);
  aa_attn_result_free(&res);
}

/* quant.satfinite = off: the overflowing cast is e4m3's NaN, and O with it. */
static void test_nonsat(void) {
  const char *spec = "fa4-fp8:fwd.rescale_threshold=4,quant.satfinite=off";
  aa_attn_result_t res;
  if (run(&res, spec) != AA_OK) return;
  AA_CHECK(isnan(res.o.data[1]), "%s: o[1] = %a, want NaN", spec, res.o.data[1]);
  aa_attn_result_free(&res);
}

int main(void) {
  test_threshold("fa4-fp8", 0);                            /* 0251105a: threshold 0 */
  test_threshold("fa4-fp8:fwd.rescale_threshold=4", 1);    /* b65ae6b1 .. 849f660f */
  test_threshold("fa4-fp8:fwd.rescale_threshold=0.75", 0); /* flash-attention 4f3b9be2 */
  test_threshold("fa4-fp8:fwd.rescale_threshold=2.8", 0);  /* just below the jump */
  test_threshold("fa4-fp8:fwd.rescale_threshold=2.9", 1);  /* just above */
  /* PR 2582's MXFP8 mode keeps threshold 4: the inputs are exact in MXFP8 (1 and 2 are 2^8 and 2^8 times
     their E8M0 scales) and V's 448 / amax scale leaves 1 within an FP32 rounding. */
  test_threshold("fa4-mxfp8", 1);
  test_threshold("fa4-mxfp8:fwd.rescale_threshold=0", 0);
  test_nonsat();
  return aa_test_finish("tattn_fp8_sat");
}
