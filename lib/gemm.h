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
  AA_ACC_FP32_PAIRWISE, /* "fp32-pairwise": products rounded to fp32, summed by a fixed pairwise tree, then added to C
                         */
  AA_ACC_FP64_SEQ,      /* "fp64-seq": as fp32-seq in IEEE double (for exact-arithmetic recipes) */
  AA_ACC_TC_K16_F25,    /* "tc-k16-f25": tensor-core blocks of 16, 25 fractional bits, RZ (H100/H200/B200) */
  AA_ACC_TC_K8_F24,     /* "tc-k8-f24": tensor-core blocks of 8, 24 fractional bits, RZ (A100/Ada) */
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

   tc-kK-fF       the tensor-core model of REFERENCES section 6 (Fasi, Higham,
                  Mikaitis and Pranesh 2021; MMA-Sim 2025; Khattak and Mikaitis
                  2025), with (K, F) = (16, 25) for tc-k16-f25 and (8, 24) for
                  tc-k8-f24. Operands are first rounded to fp32 (RNE; the
                  identity for the bf16/fp16/fp32 values callers pass).
                  acc = accumulate ? fl32(C) : +0. The k axis is cut into
                  blocks of K consecutive indices (0..K-1, K..2K-1, ...; the
                  last block may be shorter). For each block in order, the
                  terms are acc and the exact products p_k = a_k * b_k (no
                  rounding: an fp32 x fp32 product is exact in binary64), and
                    E    = floor(log2 max |t|) over the nonzero terms (a zero
                           accumulator or product takes no part: it
                           contributes exactly 0 whatever E is; products are
                           taken as normalised values, so a significand
                           product in [2, 4) raises E by one);
                    t'   = t truncated toward zero to a multiple of 2^(E-F)
                           (F fractional bits below the leading bit of the
                           largest term; the accumulator is aligned and
                           truncated like any product, so it loses its low
                           bits when a product is larger);
                    S    = the exact sum of the t' (no intermediate rounding);
                    acc  = RZ_fp32(S): truncation to 24 significant bits,
                           subnormal results truncated to multiples of 2^-149,
                           overflow gives +-FLT_MAX (IEEE RZ), an exact zero
                           sum gives +0 (also when every term is -0), a
                           nonzero sum below 2^-149 in magnitude a zero of
                           its own sign.
                  Inf/NaN: when a block holds an infinite or NaN term (an
                  Inf or NaN accumulator or operand; 0 * Inf is NaN) its
                  result is the IEEE sum of those non-finite terms, the
                  finite ones being ignored. Products of finite fp32 values
                  never overflow (binary64 holds them), so a block of finite
                  terms only overflows in its final RZ, to FLT_MAX.
                  C = acc after the last block; for K = 0, C = accumulate ? fl32(C) : +0.
                  Every path (reference loop, packed threaded path) gives
                  identical bits.

   NaN payloads are not part of the model (paths may propagate different
   NaNs); everything else, including signed zeros, subnormals and
   infinities, is bitwise identical whatever vector path and thread count. */

const char *aa_accum_name(aa_accum_t model);
int aa_accum_from_name(aa_accum_t *out, const char *name); /* AA_OK or AA_ENOTFOUND */
const char *aa_accum_describe(aa_accum_t model);           /* one line for `attnacc list` */

/* Block length K and fractional bits F of a tc-* model; AA_ENOTFOUND for the
   other models (either output may be NULL). */
int aa_accum_tc_params(aa_accum_t model, int *block_k, int *frac_bits);

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
