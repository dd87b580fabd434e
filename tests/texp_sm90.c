/* attnacc: the sm90 special-function models (lib/exp/sm90.c) against stored H200 outputs (fixtures/h200-fa2). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exp.h"
#include "fmt.h"
#include "tests.h"

/* dir/name, a '<u4' .npy of shape (rows, cols) with a 128-byte header (as the fixtures are written); NULL (and
   a failure counted) when it cannot be read. */
static uint32_t *load_u4(const char *dir, const char *name, size_t rows, size_t cols) {
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb");
  uint32_t *a = f != NULL ? malloc(rows * cols * 4) : NULL;
  int ok = a != NULL && fseek(f, 128, SEEK_SET) == 0 && fread(a, 4, rows * cols, f) == rows * cols;
  if (f != NULL) fclose(f);
  if (!ok) {
    AA_FAIL("cannot read %s", p);
    free(a);
    return NULL;
  }
  return a;
}

static float f32(uint32_t u) {
  return aa_f32_from_bits(u);
}
static uint32_t b32(float f) {
  return aa_f32_bits(f);
}
/* |a - b| in units in the last place for two positive finite floats */
static long ulps(uint32_t a, uint32_t b) {
  return labs((long)a - (long)b);
}

/* ex2.npy: 5120 (x, ex2.approx.ftz.f32(x)) pairs read from the device: 2048 on the 2^-23 grid of [0, 1), 2048
   on the 2^-24 grid of (-1, 0), 1024 positive inputs up to 120. The model (lib/exp/sm90.c) reproduces all 2^23
   device mantissas (bench/sfu_fit check), so every sample must match; correctly rounded 2^x matches about 61 %
   on these grids (README-gpu.md section 4). */
static void test_ex2(const char *dir) {
  uint32_t *a = load_u4(dir, "ex2.npy", 5120, 2);
  if (a == NULL) return;
  size_t model = 0, cr = 0, neg_model = 0;
  for (size_t i = 0; i < 5120; i++) {
    float x = f32(a[2 * i]);
    uint32_t dev = a[2 * i + 1], m = b32(aa_ex2_sm90_ftz(x));
    model += m == dev;
    cr += b32(aa_exp2_cr_f32(x)) == dev;
    if (i >= 2048 && i < 4096) neg_model += m == dev;
  }
  double fc = cr / 5120.0;
  printf("texp_sm90 ex2: model %zu of 5120 (negative side %zu of 2048), correctly rounded %.4f\n", model, neg_model,
         fc);
  AA_CHECK(model == 5120, "ex2 model differs from the H200 on %zu of 5120 samples", 5120 - model);
  AA_CHECK(fc < 0.8, "correctly rounded 2^x matches %.4f: the samples should tell the two apart", fc);
  /* structure read off the device: exact results at the integers and at 0, truncation of the input */
  AA_CHECK(aa_ex2_sm90_ftz(0.0f) == 1.0f && aa_ex2_sm90_ftz(3.0f) == 8.0f && aa_ex2_sm90_ftz(-2.0f) == 0.25f,
           "ex2 model at integers");
  AA_CHECK(b32(aa_ex2_sm90_ftz(0x1p-24f)) == b32(1.0f) && b32(aa_ex2_sm90_ftz(-0x1p-30f)) == b32(1.0f),
           "inputs below 2^-23 in magnitude truncate to 0");
  AA_CHECK(aa_ex2_sm90_ftz(-127.5f) == 0.0f && aa_exp2f_sm90(-127.5f) > 0.0f && isinf(aa_ex2_sm90_ftz(128.0f)),
           "ftz below 2^-126 (exp2f keeps the subnormal by halving and squaring), +Inf at 128");
  free(a);
}

/* lg2.npy: 4096 (x, lg2.approx.ftz.f32(x)) device pairs on [1, 2) (bench/sfu_fit sample: both sides of every
   interval boundary, the 64 fractions nearest 1 and 2, PCG32 draws). The model must match every one; the
   correctly rounded log2 (the old stand-in) matches about 34 % of all 2^23. */
static void test_lg2(const char *dir) {
  uint32_t *a = load_u4(dir, "lg2.npy", 4096, 2);
  if (a == NULL) return;
  size_t model = 0, cr = 0;
  for (size_t i = 0; i < 4096; i++) {
    float x = f32(a[2 * i]);
    model += b32(aa_lg2_sm90_ftz(x)) == a[2 * i + 1];
    cr += b32((float)log2((double)x)) == a[2 * i + 1];
  }
  printf("texp_sm90 lg2: model %zu of 4096, correctly rounded %.4f\n", model, cr / 4096.0);
  AA_CHECK(model == 4096, "lg2 model differs from the H200 on %zu of 4096 samples", 4096 - model);
  AA_CHECK(cr / 4096.0 < 0.5, "correctly rounded log2 matches %.4f: the samples should tell the two apart",
           cr / 4096.0);
  AA_CHECK(b32(aa_lg2_sm90_ftz(1.0f)) == 0 && aa_lg2_sm90_ftz(2.0f) == 1.0f && aa_lg2_sm90_ftz(65536.0f) == 16.0f,
           "lg2 model at 1, 2 and 2^16");
  AA_CHECK(isinf(aa_lg2_sm90_ftz(0.0f)) && aa_lg2_sm90_ftz(0.0f) < 0 && isinf(aa_lg2_sm90_ftz(0x1p-130f)) &&
               isnan(aa_lg2_sm90_ftz(-1.0f)) && isinf(aa_lg2_sm90_ftz(INFINITY)) && aa_lg2_sm90_ftz(INFINITY) > 0,
           "lg2 special values (subnormals flushed)");
  free(a);
}

/* libm.npy: 4096 rows (x_e, expf(x_e), x_l, logf(x_l), __logf(x_l)) from the device, x_e in [-30, 0],
   x_l in [1, 2^20). logf compiles to an FMA polynomial (no MUFU) and __logf to MUFU.LG2 and an FMUL: both models
   must be bit-exact, and so must expf (FFMA range reduction around MUFU.EX2; 91.9 % with the old EX2 table). */
static void test_libm(const char *dir) {
  uint32_t *a = load_u4(dir, "libm.npy", 4096, 5);
  if (a == NULL) return;
  size_t e = 0, l = 0, il = 0, efar = 0, ilcr = 0;
  for (size_t i = 0; i < 4096; i++) {
    const uint32_t *r = a + 5 * i;
    uint32_t me = b32(aa_expf_sm90(f32(r[0])));
    e += me == r[1];
    efar += ulps(me, r[1]) > 1;
    l += b32(aa_logf_sm90(f32(r[2]))) == r[3];
    il += b32(aa_logf_fast_sm90(f32(r[2]))) == r[4];
    ilcr += b32((float)log2((double)f32(r[2])) * f32(0x3f317218u)) == r[4];
  }
  printf("texp_sm90 libm: expf %.4f (> 1 ulp: %zu), logf %.4f, __logf %zu of 4096 (correctly rounded lg2: %.4f)\n",
         e / 4096.0, efar, l / 4096.0, il, ilcr / 4096.0);
  AA_CHECK(l == 4096, "logf model differs from the device on %zu of 4096 samples", 4096 - l);
  AA_CHECK(e == 4096, "expf model: %zu of 4096 identical, %zu more than 1 ulp off", e, efar);
  AA_CHECK(il == 4096, "__logf model differs from the device on %zu of 4096 samples", 4096 - il);
  AA_CHECK(isinf(aa_logf_sm90(0.0f)) && aa_logf_sm90(0.0f) < 0 && isnan(aa_logf_sm90(-1.0f)) &&
               aa_logf_sm90(1.0f) == 0.0f,
           "logf special values");
  /* __logf keeps subnormals: 2^24 prescale, 24 subtracted (SASS of __logf) */
  AA_CHECK(isfinite(aa_logf_fast_sm90(0x1p-130f)) && fabsf(aa_logf_fast_sm90(0x1p-130f) + 130 * 0.6931472f) < 1e-4f,
           "__logf of a subnormal: %.9g", aa_logf_fast_sm90(0x1p-130f));
  free(a);
}

/* The interpolator's truncated square S(t) on all 2^17 inputs, against the folded array as lib/exp/sm90.c
   describes it, summed partial product by partial product: the squares t_i 2^(2i), i >= 10, and the cross terms
   t_i t_j 2^(i+j+1), i < j, i + j >= 18, the low 19 bits of the sum dropped. */
static void test_square(void) {
  long bad = 0;
  for (uint32_t t = 0; t < (1u << 17); t++) {
    uint64_t sum = 0;
    for (int i = 0; i < 17; i++)
      for (int j = i; j < 17; j++) {
        uint64_t p = (uint64_t)((t >> i) & (t >> j) & 1u) << (i + j + (i < j));
        if ((i == j && i >= 10) || (i < j && i + j >= 18)) sum += p;
      }
    uint32_t want = (uint32_t)(sum >> 19), got = aa_sfu_square_sm90(t);
    if (got != want && bad++ < 5) AA_FAIL("square: S(0x%05x) = 0x%x, the folded array gives 0x%x", t, got, want);
  }
  AA_CHECK(bad == 0, "square: %ld of 2^17 inputs differ from the folded array", bad);
}

int main(void) {
  test_square();
  const char *src = getenv("top_srcdir");
  char dir[4000];
  snprintf(dir, sizeof dir, "%s/fixtures/h200-fa2", src != NULL ? src : "..");
  test_ex2(dir);
  test_lg2(dir);
  test_libm(dir);
  return aa_test_finish("texp_sm90");
}
