/* attnacc: aa_gemm and aa_gemm_ref entry points: argument checks, then the path of the model's alignment rule. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "gemm-impl.h"
#include "tc-impl.h"

/* The fast path (ref 0) or the literal loop (ref 1) of model m's row: the
   alignment rule picks the mechanism, the result format the chain's
   precision; the block paths read K, F and the result format themselves. */
static int gemm_row(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                    int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model, int ref) {
  int st = aa_gemm_check(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, model);
  if (st != AA_OK || M == 0 || N == 0) return st;
  const aa_accum_info_t *m = aa_accum_info(model);
  if (m->sum == AA_SUM_PROMOTED) { /* one path; K = 0 included (an fp16 result rounds C to fp16) */
    aa_gemm_promoted(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, m);
    return AA_OK;
  }
  if (K == 0) { /* the accumulator is fp32 unless the result is fp64 */
    aa_gemm_k0(C, ldc, M, N, accumulate, m->out_bits < 52);
    return AA_OK;
  }
  switch (m->sum) {
  case AA_SUM_CHAIN: /* binary64 or binary32 (aa_gemm_check) */
    if (m->out_bits == 52 && ref)
      aa_gemm_ref_fp64_seq(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    else if (m->out_bits == 52)
      return aa_gemm_fp64_seq(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    else if (ref)
      aa_gemm_ref_fp32_seq(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    else
      return aa_gemm_fp32_seq(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    return AA_OK;
  case AA_SUM_PAIRWISE:
    return (ref ? aa_gemm_ref_fp32_pairwise : aa_gemm_fp32_pairwise)(C, ldc, A, lda, transA, B, ldb, transB, M, N, K,
                                                                     accumulate);
  case AA_SUM_BLOCK:
    if (!ref) return aa_gemm_fast_tc(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, m);
    aa_gemm_ref_tc(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, m);
    return AA_OK;
  case AA_SUM_BLOCK2:
    if (!ref) return aa_gemm_fast_tc(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, m);
    aa_gemm_ref_cdna3(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    return AA_OK;
  case AA_SUM_SCALED: /* one loop serves both: these rows have no packed path */
    aa_gemm_ref_scaled(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, m);
    return AA_OK;
  default:
    return AA_EINVAL;
  }
}

int aa_gemm(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb, int transB,
            size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  return gemm_row(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, model, 0);
}

int aa_gemm_ref(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  return gemm_row(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, model, 1);
}
