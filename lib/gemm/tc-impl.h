/* attnacc: internal declarations of the tensor-core block accumulation models (tc-*, cdna3-k8-f24). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_GEMM_TC_IMPL_H
#define AA_GEMM_TC_IMPL_H

#include <stddef.h>

#include "gemm.h"

/* One block of the tc models: terms t[0..n) (exact products and, first,
   the incoming fp32 accumulator) aligned to the largest alignment exponent
   et[i] of a nonzero term (aa_gemm_tc_exp of the accumulator, the sum of
   the operands' for a product), each truncated toward zero to frac_bits
   fractional bits, summed exactly and normalised to fp32 with RZ
   (definitions in gemm.h). */
int aa_gemm_tc_exp(double x);
float aa_gemm_tc_block(const double *t, const int *et, size_t n, int frac_bits);
/* The same with the result truncated to out_bits fractional bits (23: fp32; 13: e8m13). */
/* The block's exact sum before its final rounding (a double: |sum| < 2^(E+8), a multiple of 2^(E-F));
   +0 when no term is nonzero; the IEEE sum of the non-finite terms when there are any. */
double aa_gemm_tc_block_sum(const double *t, const int *et, size_t n, int frac_bits);
/* AA_SUM_PROMOTED rows (promo.c), the literal loop; K = 0 allowed. */
void aa_gemm_promoted(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                      int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m);
float aa_gemm_tc_block_out(const double *t, const int *et, size_t n, int frac_bits, int out_bits);

/* cdna3-k8-f24, literally. M, N, K > 0. One group: the incoming fp32
   accumulator and n <= 8 operand pairs. */
float aa_gemm_cdna3_group(float acc, const float *a, const float *b, size_t n);
void aa_gemm_ref_cdna3(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                       int transB, size_t M, size_t N, size_t K, int accumulate);

/* Literal scalar loop and the packed, threaded path (bitwise equal) of the AA_SUM_BLOCK row m (the fast
   paths also take cdna3's AA_SUM_BLOCK2 row). M, N, K > 0. */
void aa_gemm_ref_tc(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                    int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m);
/* The binary64 packed path (the implementation before the fp32 one; used
   where the fp32 path's conditions fail, and as a second reference in tests). */
int aa_gemm_tc_packed_f64(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m);
/* The tile of rows [i0, i0 + rows) and columns [j0, j0 + cols) of C from
   packed fp32 operands (pa: M x K rows, pb: K x lp, lp a multiple of 8) by
   the binary64 steps (vectorised across 8 columns, the reference steps
   where a block meets a non-finite term or the result is e8m13). */
void aa_gemm_tc_tile_f64(double *C, size_t ldc, const float *pa, const float *pb, size_t lp, size_t i0, size_t rows,
                         size_t j0, size_t cols, size_t K, int bk, int fb, int ob, int accumulate);
/* The AVX-512 fp32 path (tc32.c): exact fp32 products, int32 block sums,
   when the operands make every product an exact normal fp32 number; else
   the binary64 path on the same packing. Available when this build and CPU
   have AVX-512 F, DQ and BW. */
int aa_gemm_tc_fast32_available(void);
int aa_gemm_tc_fast32(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                      int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m);
/* Run-time choice between the paths above. */
int aa_gemm_fast_tc(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                    int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m);

#endif
