/* attnacc: fast fp32-pairwise gemm: the binary-counter form of the fixed pairwise tree, vectorised across columns. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "gemm-impl.h"

/* The tree of gemm.h (left block = largest power of two below n) is the
   one a binary counter builds: push p_k; while the two top partial sums
   cover equally many products, replace them by (lower + upper); at the end
   fold the stack from the top. Every column of a strip runs the same tree,
   so the strip is a loop over lanes; each lane performs exactly the
   reference operations. fp-contract=off keeps GCC from fusing the rounded
   product into the following add (the product must be rounded to fp32). */

#define PW_W 64     /* columns per strip */
#define PW_DEPTH 65 /* stack levels: at most 1 + log2(K) for any size_t K */
#define PB_BYTES ((size_t)16 << 20)

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define AA_PW_ATTR __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#elif defined(__GNUC__) && !defined(__clang__)
#define AA_PW_ATTR __attribute__((optimize("fp-contract=off")))
#else
#define AA_PW_ATTR
#endif

/* out[j] = pw(arow[k] * pb[k * ldp + j], k = 0..K-1) for j < PW_W. */
AA_PW_ATTR static void pw_strip(float *restrict out, const float *restrict arow, const float *restrict pb, size_t ldp,
                                size_t K, float *restrict stk) {
  size_t cnt = 0;
  for (size_t k = 0; k < K; k++) {
    const float a = arow[k];
    const float *restrict b = pb + k * ldp;
    float *restrict t = stk + cnt * PW_W;
    for (int j = 0; j < PW_W; j++)
      t[j] = a * b[j];
    cnt++;
    for (size_t n = k + 1; (n & 1) == 0; n >>= 1) {
      cnt--;
      float *restrict d = stk + (cnt - 1) * PW_W;
      const float *restrict s = stk + cnt * PW_W;
      for (int j = 0; j < PW_W; j++)
        d[j] = d[j] + s[j];
    }
  }
  while (cnt >= 2) {
    cnt--;
    float *restrict d = stk + (cnt - 1) * PW_W;
    const float *restrict s = stk + cnt * PW_W;
    for (int j = 0; j < PW_W; j++)
      d[j] = d[j] + s[j];
  }
  memcpy(out, stk, PW_W * sizeof(float));
}

int aa_gemm_fp32_pairwise(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate) {
  /* column block: K x nc fp32 panel of op(B), row-major, nc a multiple of PW_W */
  size_t nc = PB_BYTES / (K * sizeof(float)) / PW_W * PW_W;
  if (nc < PW_W) nc = PW_W;
  if (nc > (N + PW_W - 1) / PW_W * PW_W) nc = (N + PW_W - 1) / PW_W * PW_W;
  float *pb = malloc(K * nc * sizeof(float));
  if (pb == NULL) return AA_ENOMEM;
  int status = AA_OK;

  AA_OMP(omp parallel) {
    float *arow = malloc(K * sizeof(float)), *stk = malloc(PW_DEPTH * PW_W * sizeof(float));
    float out[PW_W];
    if (arow == NULL || stk == NULL) {
      AA_OMP(omp atomic write)
      status = AA_ENOMEM;
    }
    for (size_t j0 = 0; j0 < N; j0 += nc) {
      const size_t ncb = N - j0 < nc ? N - j0 : nc;
      AA_OMP(omp for schedule(static))
      for (size_t k = 0; k < K; k++) {
        float *dst = pb + k * nc;
        size_t j = 0;
        for (; j < ncb; j++)
          dst[j] = (float)aa_gemm_opb(B, ldb, transB, k, j0 + j);
        for (; j < nc; j++)
          dst[j] = 0.0f;
      }
      AA_OMP(omp for schedule(dynamic, 8))
      for (size_t i = 0; i < M; i++) {
        if (arow == NULL || stk == NULL) continue;
        for (size_t k = 0; k < K; k++)
          arow[k] = (float)aa_gemm_opa(A, lda, transA, i, k);
        for (size_t j = 0; j < ncb; j += PW_W) {
          pw_strip(out, arow, pb + j, nc, K, stk);
          const size_t w = ncb - j < PW_W ? ncb - j : PW_W;
          double *c = C + i * ldc + j0 + j;
          for (size_t t = 0; t < w; t++)
            c[t] = accumulate ? (float)c[t] + out[t] : out[t];
        }
      }
    }
    free(arow);
    free(stk);
  }
  free(pb);
  return status;
}
