/* attnacc: scalar reference loops of the gemm accumulation models, written literally from the definitions in gemm.h.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>

#include "gemm-impl.h"
#include "tc-core.h"

void aa_gemm_ref_fp32_seq(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate) {
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      float acc = accumulate ? (float)C[i * ldc + j] : 0.0f;
      for (size_t k = 0; k < K; k++)
        acc = aa_seq32_step(acc, (float)aa_gemm_opa(A, lda, transA, i, k), (float)aa_gemm_opb(B, ldb, transB, k, j));
      C[i * ldc + j] = acc;
    }
}

/* pw(p[lo .. lo+n)) with the split of gemm.h: left block = largest power of
   two strictly below n. */
static float pairwise(const float *p, size_t n) {
  if (n == 1) return p[0];
  size_t m = 1;
  while (2 * m < n)
    m *= 2;
  float s = pairwise(p, m) + pairwise(p + m, n - m);
  return s;
}

int aa_gemm_ref_fp32_pairwise(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B,
                              size_t ldb, int transB, size_t M, size_t N, size_t K, int accumulate) {
  float pbuf[256];
  float *p = pbuf;
  if (K > sizeof pbuf / sizeof pbuf[0]) {
    /* the tree needs all K products of one output; fall back to the heap */
    p = malloc(K * sizeof *p);
    if (p == NULL) return AA_ENOMEM;
  }
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      for (size_t k = 0; k < K; k++) {
        float x = (float)aa_gemm_opa(A, lda, transA, i, k) * (float)aa_gemm_opb(B, ldb, transB, k, j);
        AA_GEMM_OPAQUE(x);
        p[k] = x;
      }
      float s = pairwise(p, K);
      C[i * ldc + j] = accumulate ? (float)C[i * ldc + j] + s : s;
    }
  if (p != pbuf) free(p);
  return AA_OK;
}

void aa_gemm_ref_fp64_seq(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate) {
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      double acc = accumulate ? C[i * ldc + j] : 0.0;
      for (size_t k = 0; k < K; k++)
        acc = fma(aa_gemm_opa(A, lda, transA, i, k), aa_gemm_opb(B, ldb, transB, k, j), acc);
      C[i * ldc + j] = acc;
    }
}
