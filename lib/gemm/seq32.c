/* attnacc: fp32-seq kernels (AVX-512, AVX2+FMA, scalar fmaf) for the blocked gemm driver: acc = fmaf(a_k, b_k, acc)
 * per output. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AA_GEMM_X86 1
#endif

#include "gemm-impl.h"

/* Every kernel performs, for each output of its tile, exactly the chain
   acc = fma(a_k, b_k, acc) in k order with a single rounding per step
   (vfmadd231ps, or fmaf in the portable kernel, never a separate multiply
   and add), so all paths give the bits of the reference loop. The tile is
   only how many chains run side by side: lanes across j, registers across
   i, all advancing k in lockstep. */

/* ---- portable kernel: 4 x 8 tile, fmaf (a true fused multiply-add) ---- */

#define SC_MR 4
#define SC_NR 8
static void kern32_scalar(size_t kc, const void *pav, const void *pbv, double *c, size_t ldc, int mode) {
  const float *pa = pav, *pb = pbv;
  const int load = mode & AA_KERN_LOAD;
  float acc[SC_MR][SC_NR];
  for (int r = 0; r < SC_MR; r++)
    for (int j = 0; j < SC_NR; j++)
      acc[r][j] = load ? (float)c[r * ldc + j] : 0.0f;
  for (size_t k = 0; k < kc; k++, pa += SC_MR, pb += SC_NR)
    for (int r = 0; r < SC_MR; r++)
      for (int j = 0; j < SC_NR; j++)
        acc[r][j] = fmaf(pa[r], pb[j], acc[r][j]);
  for (int r = 0; r < SC_MR; r++)
    for (int j = 0; j < SC_NR; j++)
      c[r * ldc + j] = acc[r][j];
}

#define A2_MR 6
#define A2_NR 16
#define A5_MR 12
#define A5_NR 32

#ifdef AA_GEMM_X86
/* ---- AVX2 + FMA kernel: 6 x 16 tile = 12 ymm accumulators ---- */

__attribute__((target("avx2,fma"))) static inline __m256 a2_load8(const double *c) {
  __m128 lo = _mm256_cvtpd_ps(_mm256_loadu_pd(c)), hi = _mm256_cvtpd_ps(_mm256_loadu_pd(c + 4));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}
__attribute__((target("avx2,fma"))) static inline void a2_store8(double *c, __m256 v) {
  _mm256_storeu_pd(c, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  _mm256_storeu_pd(c + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
__attribute__((target("avx2,fma"))) static void kern32_avx2(size_t kc, const void *pav, const void *pbv, double *c,
                                                            size_t ldc, int mode) {
  const float *pa = pav, *pb = pbv;
  const int load = mode & AA_KERN_LOAD;
  __m256 acc[A2_MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < A2_MR; r++) {
    acc[r][0] = load ? a2_load8(c + r * ldc) : _mm256_setzero_ps();
    acc[r][1] = load ? a2_load8(c + r * ldc + 8) : _mm256_setzero_ps();
  }
  for (size_t k = 0; k < kc; k++, pa += A2_MR, pb += A2_NR) {
    __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8);
#pragma GCC unroll 8
    for (int r = 0; r < A2_MR; r++) {
      __m256 a = _mm256_broadcast_ss(pa + r);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < A2_MR; r++) {
    a2_store8(c + r * ldc, acc[r][0]);
    a2_store8(c + r * ldc + 8, acc[r][1]);
  }
}

/* ---- AVX-512 kernel: 12 x 32 tile = 24 zmm accumulators ---- */

__attribute__((target("avx512f"))) static inline __m512 a5_load16(const double *c) {
  __m256 lo = _mm512_cvtpd_ps(_mm512_loadu_pd(c)), hi = _mm512_cvtpd_ps(_mm512_loadu_pd(c + 8));
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
__attribute__((target("avx512f"))) static inline void a5_store16(double *c, __m512 v, int stream) {
  __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  if (stream) {
    _mm512_stream_pd(c, lo);
    _mm512_stream_pd(c + 8, hi);
  } else {
    _mm512_storeu_pd(c, lo);
    _mm512_storeu_pd(c + 8, hi);
  }
}
__attribute__((target("avx512f"))) static void kern32_avx512(size_t kc, const void *pav, const void *pbv, double *c,
                                                             size_t ldc, int mode) {
  const float *pa = pav, *pb = pbv;
  const int load = mode & AA_KERN_LOAD;
  __m512 acc[A5_MR][2];
#pragma GCC unroll 16
  for (int r = 0; r < A5_MR; r++) {
    acc[r][0] = load ? a5_load16(c + r * ldc) : _mm512_setzero_ps();
    acc[r][1] = load ? a5_load16(c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (size_t k = 0; k < kc; k++, pa += A5_MR, pb += A5_NR) {
    __m512 b0 = _mm512_loadu_ps(pb), b1 = _mm512_loadu_ps(pb + 16);
#pragma GCC unroll 16
    for (int r = 0; r < A5_MR; r++) {
      __m512 a = _mm512_set1_ps(pa[r]);
      acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < A5_MR; r++) {
    a5_store16(c + r * ldc, acc[r][0], mode & AA_KERN_STREAM);
    a5_store16(c + r * ldc + 16, acc[r][1], mode & AA_KERN_STREAM);
  }
}
#endif

static const aa_gemm_kern_t kernels[AA_ISA_COUNT] = {
#ifdef AA_GEMM_X86
    [AA_ISA_AVX512] = {A5_MR, A5_NR, sizeof(float), kern32_avx512},
    [AA_ISA_AVX2] = {A2_MR, A2_NR, sizeof(float), kern32_avx2},
#endif
    [AA_ISA_SCALAR] = {SC_MR, SC_NR, sizeof(float), kern32_scalar},
};

int aa_gemm_fp32_seq(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                     int transB, size_t M, size_t N, size_t K, int accumulate) {
  return aa_gemm_blocked(&kernels[aa_gemm_isa()], C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
}
