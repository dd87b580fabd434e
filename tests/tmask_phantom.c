/* attnacc: mask.phantom_tile (cuDNN's padded key slots, inferred from H200 data) against its definition. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
/* The definition (lib/recipe.h): with a mask or bias and n_k mod T =
   T/2, a dQ row is NaN exactly when a phantom slot's dS = P (0 - D)
   overflows in FP32, P = FP32 exp(-LSE) of that row (+Inf below about
   -88.72) and D = rowsum(O dO); nothing else changes. Checked here on
   cudnn-h100 (T = 128) against the same recipe with the key off, over key
   lengths on both sides of T/2 and a bias that is a constant offset (-200
   or -50: LSEs below and above -88.7), or a ramp of offsets over the rows
   with dO scaled by 64 (LSEs across -88.7 - ln|D|, where P is finite and
   P D is not), plus one fully masked row. The expected NaN rows are
   computed from the LSE and O the run stored and D summed here in FP64
   (a second order of summation), by the rule above written out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "fmt.h"
#include "rng.h"
#include "tests.h"

#define D 16

static void fill(aa_tensor_t *t, size_t n, aa_pcg64_t *r) {
  size_t shape[3] = {1, n, D};
  aa_tensor_alloc(t, 3, shape, AA_FMT_BF16);
  aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  for (size_t i = 0; i < aa_tensor_numel(t); i++)
    t->data[i] = aa_round(aa_pcg64_normal(r), &ro, NULL);
}

static int row_nan(const aa_tensor_t *t, size_t i) {
  for (size_t c = 0; c < D; c++)
    if (t->data[i * D + c] == t->data[i * D + c]) return 0;
  return 1;
}

/* Whether row i's phantom dS = P (0 - D) overflows FP32 (P = +Inf included). */
static int ds_overflows(const aa_attn_result_t *a, const aa_tensor_t *dO, size_t i) {
  double rowsum = 0, p = (float)exp(-a->lse.data[i]);
  for (size_t c = 0; c < D; c++)
    rowsum += a->o.data[i * D + c] * dO->data[i * D + c];
  return !isfinite((float)(p * -rowsum));
}

/* ramp = 0: every score + offset; ramp = 1: row i's scores + offset - i / 4 and dO x 64. */
static void run_case(size_t n, double offset, int ramp, uint64_t seed) {
  aa_pcg64_t r;
  aa_pcg64_seed(&r, seed, n);
  aa_tensor_t in[4];
  fill(&in[0], n, &r), fill(&in[1], n, &r), fill(&in[2], n, &r), fill(&in[3], n, &r);
  for (size_t e = 0; ramp && e < n * D; e++)
    in[3].data[e] *= 64; /* exact in BF16 */
  double *bias = malloc(n * n * sizeof *bias);
  for (size_t e = 0; e < n * n; e++)
    bias[e] = e / n == 3 ? -INFINITY : offset - (ramp ? 0.25 * (double)(e / n) : 0); /* row 3 fully masked */
  aa_problem_t pb;
  aa_problem_init(&pb, n, n, D, 1, 1);
  pb.bias = bias;
  pb.mask_hstride = 0;
  aa_recipe_t on, off;
  aa_attn_result_t a = {0}, b = {0};
  aa_error_t err = {{0}};
  int ok = aa_recipe_preset(&on, "cudnn-h100", &err) == AA_OK &&
           aa_recipe_from_spec(&off, "cudnn-h100:mask.phantom_tile=0", &err) == AA_OK &&
           aa_attn_run(&a, &pb, &on, &in[0], &in[1], &in[2], &in[3], &err) == AA_OK &&
           aa_attn_run(&b, &pb, &off, &in[0], &in[1], &in[2], &in[3], &err) == AA_OK;
  AA_CHECK(ok, "tmask_phantom n %zu: %s", n, err.msg);
  size_t rem = n % 128, nan_rows = 0, bad = 0, finite_p = 0;
  for (size_t i = 0; ok && i < n; i++) {
    int want = rem == 64 && ds_overflows(&a, &in[3], i);
    nan_rows += (size_t)want;
    finite_p += (size_t)(want && !isinf((float)exp(-a.lse.data[i])));
    bad += (size_t)(row_nan(&a.dq, i) != want) + (size_t)row_nan(&b.dq, i);
    for (size_t c = 0; c < D && !want; c++) /* rows without the overflow keep their bits */
      bad += a.dq.data[i * D + c] != b.dq.data[i * D + c];
  }
  for (size_t e = 0; ok && e < n * D; e++) /* dK and dV never change */
    bad += a.dk.data[e] != b.dk.data[e] || a.dv.data[e] != b.dv.data[e];
  AA_CHECK(bad == 0, "tmask_phantom n %zu offset %g: %zu elements off the definition", n, offset, bad);
  if (rem == 64 && ramp) /* the rows P alone would miss: the reason for the product */
    AA_CHECK(finite_p > 0 && nan_rows < n, "tmask_phantom n %zu ramp: %zu NaN rows, %zu of them with P finite", n,
             nan_rows, finite_p);
  else if (rem == 64)
    AA_CHECK(nan_rows == (offset < -100 ? n : 1), "tmask_phantom n %zu offset %g: %zu NaN rows", n, offset, nan_rows);
  else
    AA_CHECK(nan_rows == 0, "tmask_phantom n %zu: %zu NaN rows outside the phantom lengths", n, nan_rows);
  aa_attn_result_free(&a), aa_attn_result_free(&b);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&in[i]);
  free(bias);
}

/* mask.score = fill (cudnn-h100): a boolean mask hides row 3 whole. Its scores are all s0 = 1024 kv / 4 (q row 3
   along e0, every key's first element kv), so without the mask its LSE is s0 + ln n exactly; with the fill
   -65504 (BF16 -65536) the row keeps that softmax (O row 3 = the unmasked run's, close, and finite) and its LSE
   is s0 + ln n - 65536, so the phantom slot (n mod 128 = 64) overflows exactly when 65536 - s0 - ln n exceeds
   about 88.7 - ln|D|: kv 254 (s0 65024, 512 short) makes dQ row 3 NaN, kv 256 (s0 65536) leaves it finite. At
   n = 96 (no phantom slots) the row is finite either way; with mask.score = neginf it is the problem's empty row
   (O = 0). The other rows' dQ is neginf's, bit for bit (the mask hides nothing of theirs). */
static void fill_case(size_t n, double kv, int want_nan) {
  aa_pcg64_t r;
  aa_pcg64_seed(&r, 11, n);
  aa_tensor_t in[4];
  fill(&in[0], n, &r), fill(&in[1], n, &r), fill(&in[2], n, &r), fill(&in[3], n, &r);
  for (size_t c = 0; c < D; c++)
    in[0].data[3 * D + c] = c == 0 ? 1024 : 0;
  for (size_t j = 0; j < n; j++)
    in[1].data[j * D] = kv;
  uint8_t *m = malloc(n * n);
  for (size_t e = 0; e < n * n; e++)
    m[e] = e / n != 3;
  aa_problem_t pb, pu;
  aa_problem_init(&pb, n, n, D, 1, 1);
  pu = pb;
  pb.mask = m;
  pb.mask_hstride = 0;
  aa_recipe_t on, neg;
  aa_attn_result_t a = {0}, u = {0}, z = {0};
  aa_error_t err = {{0}};
  int ok = aa_recipe_preset(&on, "cudnn-h100", &err) == AA_OK &&
           aa_recipe_from_spec(&neg, "cudnn-h100:mask.score=neginf", &err) == AA_OK &&
           aa_attn_run(&a, &pb, &on, &in[0], &in[1], &in[2], &in[3], &err) == AA_OK &&
           aa_attn_run(&u, &pu, &on, &in[0], &in[1], &in[2], &in[3], &err) == AA_OK &&
           aa_attn_run(&z, &pb, &neg, &in[0], &in[1], &in[2], &in[3], &err) == AA_OK;
  AA_CHECK(ok, "tmask_phantom fill n %zu: %s", n, err.msg);
  size_t bad = 0;
  for (size_t c = 0; ok && c < D; c++) {
    double o = a.o.data[3 * D + c], ou = u.o.data[3 * D + c];
    bad += !(fabs(o - ou) <= 0.02 * fabs(ou) + 1e-3) || z.o.data[3 * D + c] != 0;
  }
  AA_CHECK(bad == 0, "tmask_phantom fill n %zu: O row 3 is not the unmasked row (or neginf's 0)", n);
  AA_CHECK(!ok || fabs(a.lse.data[3] - (u.lse.data[3] - 65536)) < 0.1,
           "tmask_phantom fill n %zu: LSE %g, unmasked %g", n, ok ? a.lse.data[3] : NAN, ok ? u.lse.data[3] : NAN);
  AA_CHECK(!ok || row_nan(&a.dq, 3) == (want_nan && n % 128 == 64), "tmask_phantom fill n %zu kv %g: dQ row 3 NaN %d",
           n, kv, ok ? row_nan(&a.dq, 3) : -1);
  for (size_t e = 0; ok && e < n * D; e++) /* the other rows' dQ: as with mask.score = neginf, NaN or not */
    bad += e / D != 3 && memcmp(&a.dq.data[e], &z.dq.data[e], sizeof(double)) != 0;
  AA_CHECK(bad == 0, "tmask_phantom fill n %zu: dQ outside row 3 differs from neginf's", n);
  aa_attn_result_free(&a), aa_attn_result_free(&u), aa_attn_result_free(&z);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&in[i]);
  free(m);
}

int main(void) {
  fill_case(64, 254, 1);
  fill_case(64, 256, 0);
  fill_case(192, 254, 1);
  fill_case(96, 254, 1);
  static const size_t lengths[] = {64, 40, 96, 128, 192, 200};
  for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
    run_case(lengths[i], -200.0, 0, 7);
    run_case(lengths[i], -50.0, 0, 8);
    run_case(lengths[i], -84.0, 1, 9);
  }
  return aa_test_finish("tmask_phantom");
}
