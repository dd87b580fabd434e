/* attnacc: tc-k16-f25 against H200 mma.sync steps (fixtures/h200-fa2/mma.npy, from mma_chain.cu). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
/* mma.npy holds 4096 rows (code, acc_in, acc_out, 0) of '<u4': a step of
   one chain of the device program fixtures/h200-fa2/mma_chain.cu, code =
   cfg << 24 | warp << 16 | step << 8 | i << 4 | j, acc_in the fp32 bits of
   the accumulator element (i, j) before the step (the device's own output
   of the step before), acc_out after it. The 16 operand pairs of the step
   are regenerated from mma_gen.h, so each row is an independent witness of
   one BF16 mma.sync m16n8k16 on the H200. The model must match all of
   them. The previous alignment rule (E from the value of the largest
   product, so that a significand product in [2, 4) raised it) is checked
   to fail on some rows, so the sample can tell the two apart. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "gemm.h"
#include "mma_gen.h"
#include "tests.h"

/* The superseded rule, written out: E = floor(log2) of the largest nonzero term's value. */
static float old_rule(float acc, const double *a, const double *b) {
  double t[17], mx = fabs(acc), s = 0;
  t[0] = acc;
  for (int k = 0; k < 16; k++) {
    t[1 + k] = a[k] * b[k];
    if (fabs(t[1 + k]) > mx) mx = fabs(t[1 + k]);
  }
  if (mx == 0) return 0.0f;
  int e;
  frexp(mx, &e);
  for (int k = 0; k < 17; k++)
    s += trunc(ldexp(t[k], 25 - (e - 1)));
  double v = ldexp(s, (e - 1) - 25);
  float f = (float)v;
  if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
  return f;
}

int main(void) {
  const char *src = getenv("top_srcdir");
  char p[4200];
  snprintf(p, sizeof p, "%s/fixtures/h200-fa2/mma.npy", src != NULL ? src : "..");
  FILE *f = fopen(p, "rb");
  uint32_t *rows = malloc(4096 * 4 * 4);
  int ok = f != NULL && rows != NULL && fseek(f, 128, SEEK_SET) == 0 && fread(rows, 16, 4096, f) == 4096;
  if (f != NULL) fclose(f);
  if (!ok) {
    AA_FAIL("cannot read %s", p);
    free(rows);
    return aa_test_finish("tmma_sm90");
  }
  size_t same = 0, old_same = 0;
  for (size_t r = 0; r < 4096; r++) {
    uint32_t code = rows[4 * r], cfg = code >> 24, w = (code >> 16) & 0xff, s = (code >> 8) & 0xff,
             i = (code >> 4) & 15, j = code & 15;
    double a[16], b[16], c = aa_f32_from_bits(rows[4 * r + 1]);
    for (int k = 0; k < 16; k++) {
      a[k] = aa_f32_from_bits((uint32_t)mma_operand((int)cfg, 0, (int)w, (int)s, (int)(i * 16 + k)) << 16);
      b[k] = aa_f32_from_bits((uint32_t)mma_operand((int)cfg, 1, (int)w, (int)s, (int)(k * 16 + j)) << 16);
    }
    float want = aa_f32_from_bits(rows[4 * r + 2]), acc_in = (float)c;
    if (aa_gemm(&c, 1, a, 16, 0, b, 1, 0, 1, 1, 16, 1, AA_ACC_TC_K16_F25) != AA_OK) {
      AA_FAIL("aa_gemm failed");
      break;
    }
    if (aa_f32_bits((float)c) == aa_f32_bits(want))
      same++;
    else if (r - same < 5)
      AA_FAIL("step cfg %u warp %u step %u (%u, %u): model %a, H200 %a", cfg, w, s, i, j, c, (double)want);
    old_same += aa_f32_bits(old_rule(acc_in, a, b)) == aa_f32_bits(want);
  }
  printf("tmma_sm90: tc-k16-f25 reproduces %zu of 4096 H200 mma.sync steps; the superseded rule %zu\n", same,
         old_same);
  AA_CHECK(same == 4096, "tc-k16-f25 differs from the H200 on %zu steps", 4096 - same);
  AA_CHECK(old_same < 4096, "the sample does not tell the alignment rules apart");
  free(rows);
  return aa_test_finish("tmma_sm90");
}
