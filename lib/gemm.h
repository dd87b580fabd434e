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

/* Exact definitions (acc, p_k and sums are fp32 for the fp32 models; every
   fp32 operation is IEEE binary32 with round-to-nearest-even, subnormals
   kept; with accumulate the incoming C is first rounded to fp32 (RNE), which
   is the identity for the fp32 values callers are required to pass):

   fp32-seq       acc = accumulate ? C : +0;  for k = 0..K-1: acc = fmaf(a_k, b_k, acc);  C = acc.
   fp32-pairwise  p_k = fl32(a_k * b_k) (a separate multiply, never fused);
                  S = pw(p_0 .. p_{K-1}) where pw(x_0) = x_0 and, for n >= 2,
                  pw(x_0 .. x_{n-1}) = fl32(pw(x_0 .. x_{m-1}) + pw(x_m .. x_{n-1}))
                  with m the largest power of two strictly below n (so the
                  tree is the one a binary counter builds while streaming k:
                  complete power-of-two blocks, the ragged tail on the right);
                  C = accumulate ? fl32(C + S) : S; for K = 0, C = accumulate ? C : +0.
   fp64-seq       as fp32-seq with fma() in binary64 and C not rounded.

   NaN payloads are not part of the model (paths may propagate different
   NaNs); everything else, including signed zeros, subnormals and
   infinities, is bitwise identical whatever vector path and thread count. */

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
/* Arguments are checked as follows: M, N or K equal to 0 is allowed (M or N
   zero: nothing is touched; K zero: C becomes +0 unless accumulate); a
   pointer that would be read or written must be non-NULL, and every leading
   dimension must be at least the row length of the array it describes
   (lda >= K, or >= M with transA; ldb >= N, or >= K with transB; ldc >= N),
   otherwise AA_EINVAL. C must not overlap A or B. */

/* The same products computed by plain scalar loops that follow the
   definitions above literally (slow; the reference the fast paths are
   tested against). Same arguments and checks as aa_gemm. */
int aa_gemm_ref(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model);

/* Name of the kernel family the fp32-seq and fp64-seq fast paths dispatch
   to on this CPU ("avx512f", "avx2-fma" or "scalar"), for benchmark and
   test reports. (fp32-pairwise is vectorised by compiler-generated clones
   chosen by the loader and does not follow this choice.) */
const char *aa_gemm_kernel_name(void);

/* Testing and benchmarking only: force the fast paths onto one kernel
   ("avx512f", "avx2-fma", "scalar"), or NULL / "auto" for the run-time
   choice. AA_EUNSUPPORTED when this CPU cannot run it, AA_ENOTFOUND for an
   unknown name. Not thread-safe: call it while no aa_gemm is running. */
int aa_gemm_force_kernel(const char *name);

#ifdef __cplusplus
}
#endif
#endif
