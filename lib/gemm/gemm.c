/* attnacc: aa_gemm and aa_gemm_ref entry points: argument checks, then the model's fast path or reference loop. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "gemm-impl.h"
#include "tc-impl.h"

int aa_gemm(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb, int transB,
            size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  int st = aa_gemm_check(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, model);
  if (st != AA_OK || M == 0 || N == 0) return st;
  if (K == 0) {
    aa_gemm_k0(C, ldc, M, N, accumulate, model != AA_ACC_FP64_SEQ);
    return AA_OK;
  }
  switch (model) {
  case AA_ACC_FP32_SEQ:
    return aa_gemm_fp32_seq(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
  case AA_ACC_FP32_PAIRWISE:
    return aa_gemm_fp32_pairwise(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
  case AA_ACC_FP64_SEQ:
    return aa_gemm_fp64_seq(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
  case AA_ACC_TC_K16_F25:
  case AA_ACC_TC_K8_F24:
  case AA_ACC_TC_K4_F23:
  case AA_ACC_TC_FP8_K32_F13:
  case AA_ACC_TC_FP8_K32_F25:
  case AA_ACC_CDNA3_K8_F24:
    return aa_gemm_fast_tc(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, model);
  default:
    return AA_EINVAL;
  }
}

int aa_gemm_ref(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  int st = aa_gemm_check(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, model);
  if (st != AA_OK || M == 0 || N == 0) return st;
  if (K == 0) {
    aa_gemm_k0(C, ldc, M, N, accumulate, model != AA_ACC_FP64_SEQ);
    return AA_OK;
  }
  switch (model) {
  case AA_ACC_FP32_SEQ:
    aa_gemm_ref_fp32_seq(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    return AA_OK;
  case AA_ACC_FP32_PAIRWISE:
    return aa_gemm_ref_fp32_pairwise(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
  case AA_ACC_FP64_SEQ:
    aa_gemm_ref_fp64_seq(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    return AA_OK;
  case AA_ACC_TC_K16_F25:
  case AA_ACC_TC_K8_F24:
  case AA_ACC_TC_K4_F23:
  case AA_ACC_TC_FP8_K32_F13:
  case AA_ACC_TC_FP8_K32_F25:
    aa_gemm_ref_tc(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, model);
    return AA_OK;
  case AA_ACC_CDNA3_K8_F24:
    aa_gemm_ref_cdna3(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    return AA_OK;
  default:
    return AA_EINVAL;
  }
}
