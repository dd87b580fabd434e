/* attnacc: torch.sum's, cuBLAS GEMV's and cuDNN's D summation orders (vendor_order.c) give the H200's bits. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn-impl.h"
#include "tests.h"

/* tests/data/h200_sum_orders.txt (fixtures/h200-nan/sum_orders.py): for probed shapes of torch.sum over the last
   dim of [ROWS, D] FP32 rows, and of cuBLAS's FP32 GEMV of an [NK, D] matrix, seeded terms spanning 2^-12 .. 2^12
   and the sum the H200's own summation tree gives them (the tree read on the H200 by probe_flex_order.py, replayed
   in FP32 by numpy: independent of the code under test), and of cuDNN's compute_dot_do_o over one row (the tree
   read through cuDNN's dQ by probe_cudnn_order.py, README-gpu 8.10). vendor_order.c must give every sum bit for bit;
   a column-order sum must miss at least one vector of each kind, so the terms do tell orders apart. */
#define DMAX 256

static float f32_of(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

int main(void) {
  const char *top = getenv("top_srcdir");
  char path[4096], kind[8], line[512];
  snprintf(path, sizeof path, "%s/tests/data/h200_sum_orders.txt", top != NULL ? top : ".");
  FILE *f = fopen(path, "r");
  AA_CHECK(f != NULL, "%s: cannot open", path);
  if (f == NULL) return 1;
  int ch;
  while ((ch = fgetc(f)) == '#')
    if (fgets(line, sizeof line, f) == NULL) break;
  ungetc(ch, f);
  static const char *const kinds[] = {"sum", "gemv", "cudnn"};
  size_t n, d, k, nvec[3] = {0, 0, 0}, seq_missed[3] = {0, 0, 0};
  static double x[DMAX], ones[DMAX];
  for (size_t c = 0; c < DMAX; c++)
    ones[c] = 1.0;
  while (fscanf(f, " %7s %zu %zu %zu", kind, &n, &d, &k) == 4) {
    int which = 0;
    while (which < 3 && strcmp(kind, kinds[which]) != 0)
      which++;
    AA_CHECK(d <= DMAX && which < 3, "%s: bad shape line %s %zu %zu", path, kind, n, d);
    if (d > DMAX || which == 3) break;
    for (size_t v = 0; v < k; v++) {
      unsigned b;
      double seq = 0;
      for (size_t c = 0; c < d; c++) {
        if (fscanf(f, "%x", &b) != 1) b = 0;
        x[c] = f32_of(b);
        seq = (double)(float)(seq + x[c]);
      }
      if (fscanf(f, "%x", &b) != 1) b = 0;
      double want = f32_of(b);
      double got = which == 1   ? aa_attn_cublas_gemv(x, ones, n, d, AA_FMT_FP32)
                   : which == 2 ? aa_attn_cudnn_dot_do_o(x, ones, d, AA_FMT_FP32, AA_FMT_FP32)
                                : aa_attn_torch_sum(x, ones, d, n, AA_FMT_FP32, AA_FMT_FP32);
      AA_CHECK(got == want, "%s %zu x %zu vector %zu: %a, the H200's order %a", kind, n, d, v, got, want);
      nvec[which]++;
      seq_missed[which] += seq != want;
    }
  }
  fclose(f);
  AA_CHECK(nvec[0] >= 60 && nvec[1] >= 60 && nvec[2] >= 30, "%zu torch.sum, %zu GEMV, %zu cuDNN vectors read",
           nvec[0], nvec[1], nvec[2]);
  AA_CHECK(seq_missed[0] > 0 && seq_missed[1] > 0 && seq_missed[2] > 0,
           "a column-order sum gives the H200's bits on every vector of a kind: blind");
  printf("tvendor_order: %zu torch.sum, %zu GEMV and %zu cuDNN D sums (column order misses %zu, %zu, %zu), %d "
         "failures\n",
         nvec[0], nvec[1], nvec[2], seq_missed[0], seq_missed[1], seq_missed[2], aa_test_failures);
  return aa_test_failures ? 1 : 0;
}
