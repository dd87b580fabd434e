/* attnacc: fp64-seq kernels (AVX-512, AVX2+FMA, scalar fma) for the blocked gemm driver: acc = fma(a_k, b_k, acc) in
 * binary64. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AA_GEMM_X86 1
#endif

#include "gemm-impl.h"

/* As the fp32 kernels: each output is its own chain of fused
   multiply-adds in k order (vfmadd231pd or fma()), many chains side by side. */

#define SC_MR 4
#define SC_NR 8
static void kern64_scalar(size_t kc, const void *pav, const void *pbv, double *c, size_t ldc, int mode) {
  const double *pa = pav, *pb = pbv;
  double acc[SC_MR][SC_NR];
  for (int r = 0; r < SC_MR; r++)
    for (int j = 0; j < SC_NR; j++)
      acc[r][j] = (mode & AA_KERN_LOAD) ? c[r * ldc + j] : 0.0;
  for (size_t k = 0; k < kc; k++, pa += SC_MR, pb += SC_NR)
    for (int r = 0; r < SC_MR; r++)
      for (int j = 0; j < SC_NR; j++)
        acc[r][j] = fma(pa[r], pb[j], acc[r][j]);
  for (int r = 0; r < SC_MR; r++)
    for (int j = 0; j < SC_NR; j++)
      c[r * ldc + j] = acc[r][j];
}

#define A2_MR 6
#define A2_NR 8
#define A5_MR 12
#define A5_NR 16

#ifdef AA_GEMM_X86
/* 6 x 8 tile = 12 ymm accumulators */
__attribute__((target("avx2,fma"))) static void kern64_avx2(size_t kc, const void *pav, const void *pbv, double *c,
                                                            size_t ldc, int mode) {
  const double *pa = pav, *pb = pbv;
  const int load = mode & AA_KERN_LOAD;
  __m256d acc[A2_MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < A2_MR; r++) {
    acc[r][0] = load ? _mm256_loadu_pd(c + r * ldc) : _mm256_setzero_pd();
    acc[r][1] = load ? _mm256_loadu_pd(c + r * ldc + 4) : _mm256_setzero_pd();
  }
  for (size_t k = 0; k < kc; k++, pa += A2_MR, pb += A2_NR) {
    __m256d b0 = _mm256_loadu_pd(pb), b1 = _mm256_loadu_pd(pb + 4);
#pragma GCC unroll 8
    for (int r = 0; r < A2_MR; r++) {
      __m256d a = _mm256_broadcast_sd(pa + r);
      acc[r][0] = _mm256_fmadd_pd(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_pd(a, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < A2_MR; r++) {
    _mm256_storeu_pd(c + r * ldc, acc[r][0]);
    _mm256_storeu_pd(c + r * ldc + 4, acc[r][1]);
  }
}

/* 12 x 16 tile = 24 zmm accumulators */
__attribute__((target("avx512f"))) static void kern64_avx512(size_t kc, const void *pav, const void *pbv, double *c,
                                                             size_t ldc, int mode) {
  const double *pa = pav, *pb = pbv;
  const int load = mode & AA_KERN_LOAD;
  __m512d acc[A5_MR][2];
#pragma GCC unroll 16
  for (int r = 0; r < A5_MR; r++) {
    acc[r][0] = load ? _mm512_loadu_pd(c + r * ldc) : _mm512_setzero_pd();
    acc[r][1] = load ? _mm512_loadu_pd(c + r * ldc + 8) : _mm512_setzero_pd();
  }
  for (size_t k = 0; k < kc; k++, pa += A5_MR, pb += A5_NR) {
    __m512d b0 = _mm512_loadu_pd(pb), b1 = _mm512_loadu_pd(pb + 8);
#pragma GCC unroll 16
    for (int r = 0; r < A5_MR; r++) {
      __m512d a = _mm512_set1_pd(pa[r]);
      acc[r][0] = _mm512_fmadd_pd(a, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_pd(a, b1, acc[r][1]);
    }
  }
  if (mode & AA_KERN_STREAM) {
#pragma GCC unroll 16
    for (int r = 0; r < A5_MR; r++) {
      _mm512_stream_pd(c + r * ldc, acc[r][0]);
      _mm512_stream_pd(c + r * ldc + 8, acc[r][1]);
    }
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < A5_MR; r++) {
      _mm512_storeu_pd(c + r * ldc, acc[r][0]);
      _mm512_storeu_pd(c + r * ldc + 8, acc[r][1]);
    }
  }
}
#endif

static const aa_gemm_kern_t kernels[AA_ISA_COUNT] = {
#ifdef AA_GEMM_X86
    [AA_ISA_AVX512] = {A5_MR, A5_NR, sizeof(double), kern64_avx512},
    [AA_ISA_AVX2] = {A2_MR, A2_NR, sizeof(double), kern64_avx2},
#endif
    [AA_ISA_SCALAR] = {SC_MR, SC_NR, sizeof(double), kern64_scalar},
};

int aa_gemm_fp64_seq(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                     int transB, size_t M, size_t N, size_t K, int accumulate) {
  return aa_gemm_blocked(&kernels[aa_gemm_isa()], C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
}
