/* attnacc: recomputes the minimax (Remez) fits of 2^f on [0,1] behind the fa4-poly coefficients and checks the stored
 * FP32 values. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>

#include "exp.h"
#include "tests.h"

/* Method (the one recorded in lib/exp/registry.c): minimise
   max_{f in [0,1]} |p(f) / 2^f - 1| over p(f) = 1 + c1 f + ... + cn f^n
   (p(0) = 1 fixed, as FA4 does, so integers are exact). Remez exchange:
   solve sum_i c_i f_k^i 2^-f_k - (-1)^k E = 1 - 2^-f_k at n + 1 reference
   points, move the points to the alternating extrema of the error found on
   a grid, repeat. Long double throughout. */
typedef long double ld;

static ld err_at(const ld *c, int n, ld f) {
  ld p = 0;
  for (int i = n; i >= 1; i--)
    p = (p + c[i]) * f;
  return (p + 1) / exp2l(f) - 1;
}

static void solve(int n, ld a[8][8], ld *b) {
  for (int i = 0; i < n; i++) {
    int piv = i;
    for (int r = i + 1; r < n; r++)
      if (fabsl(a[r][i]) > fabsl(a[piv][i])) piv = r;
    for (int c = 0; c < n; c++) {
      ld t = a[i][c];
      a[i][c] = a[piv][c];
      a[piv][c] = t;
    }
    ld t = b[i];
    b[i] = b[piv];
    b[piv] = t;
    for (int r = 0; r < n; r++) {
      if (r == i) continue;
      ld m = a[r][i] / a[i][i];
      for (int c = 0; c < n; c++)
        a[r][c] -= m * a[i][c];
      b[r] -= m * b[i];
    }
  }
  for (int i = 0; i < n; i++)
    b[i] /= a[i][i];
}

static ld remez(ld *c, int n) {
  ld pts[8], e = 0;
  for (int k = 0; k <= n; k++)
    pts[k] = (ld)(k + 1) / (n + 1);
  for (int it = 0; it < 30; it++) {
    ld a[8][8], b[8];
    for (int k = 0; k <= n; k++) {
      ld w = exp2l(-pts[k]);
      for (int i = 1; i <= n; i++)
        a[k][i - 1] = powl(pts[k], i) * w;
      a[k][n] = (k % 2) ? 1 : -1;
      b[k] = 1 - w;
    }
    solve(n + 1, a, b);
    for (int i = 1; i <= n; i++)
      c[i] = b[i - 1];
    e = fabsl(b[n]);
    /* the n + 1 extrema of the error on a grid (interior ones plus f = 1) */
    const int g = 20000;
    ld ext[32];
    int ne = 0;
    ld prev = err_at(c, n, 0), cur = err_at(c, n, 1.0L / g);
    for (int j = 1; j < g; j++) {
      ld next = err_at(c, n, (ld)(j + 1) / g);
      if (((cur > prev && cur >= next) || (cur < prev && cur <= next)) && ne < 31) ext[ne++] = (ld)j / g;
      prev = cur;
      cur = next;
    }
    ext[ne++] = 1;
    if (ne < n + 1) break;
    for (int k = 0; k <= n; k++)
      pts[k] = ext[ne - (n + 1) + k];
  }
  return e;
}

static double max_err_f32coefs(const float *cf, int n) {
  double mx = 0;
  for (int j = 0; j <= 200000; j++) {
    ld f = (ld)j / 200000, p = 0;
    for (int i = n; i >= 1; i--)
      p = (p + cf[i]) * f;
    ld e = fabsl((p + 1) / exp2l(f) - 1);
    if (e > mx) mx = (double)e;
  }
  return mx;
}

int main(void) {
  for (int n = 1; n <= 5; n++) {
    ld c[8] = {0};
    ld e = remez(c, n);
    const float *cf = aa_exp_fa4_coefs(n);
    double got = max_err_f32coefs(cf, n);
    printf("texp_remez: degree %d minimax E = %.6Le, stored FP32 coefficients give %.6e\n", n, e, got);
    if (n == 3) {
      /* FA4's published coefficients: within 3% of the optimum, and 8.8e-5 */
      AA_CHECK(got <= 1.03 * (double)e && fabs(got - 8.8e-5) < 0.1e-5,
               "fa4-poly degree 3: published coefficients max err %.6e vs minimax %.6Le", got, e);
      continue;
    }
    for (int i = 1; i <= n; i++)
      AA_CHECK(fabsl((ld)cf[i] - c[i]) <= 4e-7L * fabsl(c[i]) + 1e-9L,
               "fa4-poly degree %d: stored c%d = %a (%.9g) == Remez %.12Lg", n, i, (double)cf[i], (double)cf[i],
               c[i]);
    /* rounding the coefficients to FP32 may only cost a few 2^-24 */
    AA_CHECK(got <= (double)e + 4 * 0x1p-24, "fa4-poly degree %d: stored max err %.6e <= E + 4 ulp (E = %.6Le)", n,
             got, e);
  }
  return aa_test_finish("texp_remez");
}
