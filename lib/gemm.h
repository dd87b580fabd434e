/* attnacc: emulated matrix products with an explicit, named accumulation model. */
#ifndef AA_GEMM_H
#define AA_GEMM_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the K-long sum of each output element is formed. Every model fixes
   the order of operations, so results are bitwise reproducible and do not
   depend on the thread count or on the vector path chosen at run time. */
typedef enum {
  AA_ACC_FP32_SEQ = 0,  /* "fp32-seq": acc = fmaf(a_k, b_k, acc), k = 0..K-1, acc starts at the incoming C or +0 */
  AA_ACC_FP32_PAIRWISE, /* "fp32-pairwise": products rounded to fp32, summed by a fixed pairwise tree, then added to C */
  AA_ACC_FP64_SEQ,      /* "fp64-seq": as fp32-seq in IEEE double (for exact-arithmetic recipes) */
  AA_ACC_COUNT
} aa_accum_t;

const char *aa_accum_name(aa_accum_t model);
int aa_accum_from_name(aa_accum_t *out, const char *name); /* AA_OK or AA_ENOTFOUND */
const char *aa_accum_describe(aa_accum_t model);            /* one line for `attnacc list` */

/* C[i][j] (+)= sum_k op(A)[i][k] * op(B)[k][j], for i < M, j < N, k < K.
   op(A) is A (M x K, row stride lda) or, with transA, A^T where A is K x M.
   op(B) is B (K x N, row stride ldb) or, with transB, B^T where B is N x K.
   Operands are doubles holding values of the model's input format (fp32
   models round nothing on input: callers pass fp32-representable values).
   With accumulate != 0 the incoming C is part of the sum as the model says;
   otherwise C is overwritten. Results are fp32 values (fp64 for fp64-seq). */
int aa_gemm(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb, int transB,
            size_t M, size_t N, size_t K, int accumulate, aa_accum_t model);

#ifdef __cplusplus
}
#endif
#endif
