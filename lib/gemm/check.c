/* attnacc: argument checks of aa_gemm (the model's row included) and the K = 0 case shared by all models. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>

#include "gemm-impl.h"

/* rows x cols array with row stride ld: non-NULL, ld >= cols, and the last
   element addressable without size_t overflow. */
static int check_array(const void *p, size_t ld, size_t rows, size_t cols) {
  if (p == NULL || ld < cols) return AA_EINVAL;
  size_t last;
  if (aa_size_mul(&last, rows - 1, ld) != AA_OK || last > SIZE_MAX / sizeof(double) - cols) return AA_EINVAL;
  return AA_OK;
}

/* The parameters each mechanism is written for (gemm.h; the block paths'
   buffers hold 32 products, their int64 and int32 sums need F <= 25): a
   row outside them has no path. */
static int row_supported(const aa_accum_info_t *m) {
  switch (m->sum) {
  case AA_SUM_CHAIN:
    return m->rnd == AA_RND_NE && (m->out_bits == 23 || m->out_bits == 52);
  case AA_SUM_PAIRWISE:
    return m->rnd == AA_RND_NE && m->out_bits == 23;
  case AA_SUM_BLOCK:
    return m->rnd == AA_RND_Z && m->block_k >= 1 && m->block_k <= 32 && m->frac_bits >= 1 && m->frac_bits <= 25 &&
           m->out_bits >= 1 && m->out_bits <= 23;
  case AA_SUM_BLOCK2:
    return m->rnd == AA_RND_NE && m->block_k == 8 && m->frac_bits == 24 && m->out_bits == 23;
  case AA_SUM_PROMOTED: /* fp32 or fp16 results; inner blocks as AA_SUM_BLOCK's, or RNE to the result format */
    return m->rnd == AA_RND_NE && m->block_k >= 1 && m->block_k <= 32 && m->frac_bits >= 1 && m->frac_bits <= 25 &&
           ((m->out_bits == 23 && m->out_ebits == 0) || (m->out_bits == 10 && m->out_ebits == 5)) &&
           m->promote_k >= m->block_k && m->promote_k % m->block_k == 0 && m->k_granule >= 1 &&
           ((m->inner_rnd == AA_RND_Z && m->inner_bits >= 1 && m->inner_bits <= 23) ||
            (m->inner_rnd == AA_RND_NE && m->inner_bits == m->out_bits));
  case AA_SUM_SCALED: /* MMA-Sim's two instruction shapes; scales per 16 or 32 (a divisor of 64, 32 for k = 32) */
    return m->rnd == AA_RND_Z && m->out_bits == 23 &&
           ((m->block_k == 32 && m->frac_bits == 25 && m->scale_block == 32) ||
            (m->block_k == 64 && m->frac_bits == 35 && (m->scale_block == 16 || m->scale_block == 32)));
  default:
    return 0;
  }
}

int aa_gemm_check(const double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                  int transB, size_t M, size_t N, size_t K, aa_accum_t model) {
  if ((unsigned)model >= AA_ACC_COUNT || !row_supported(&aa_accum_table[model])) return AA_EINVAL;
  if (M == 0 || N == 0) return AA_OK;
  if (check_array(C, ldc, M, N) != AA_OK) return AA_EINVAL;
  if (K == 0) return AA_OK;
  if (check_array(A, lda, transA ? K : M, transA ? M : K) != AA_OK) return AA_EINVAL;
  if (check_array(B, ldb, transB ? N : K, transB ? K : N) != AA_OK) return AA_EINVAL;
  return AA_OK;
}

void aa_gemm_k0(double *C, size_t ldc, size_t M, size_t N, int accumulate, int round32) {
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      double *c = &C[i * ldc + j];
      *c = !accumulate ? 0.0 : round32 ? (double)(float)*c : *c;
    }
}
