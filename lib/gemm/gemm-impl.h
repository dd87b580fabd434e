/* attnacc: internal declarations shared by the gemm sources (argument checks, operand access, fast paths). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_GEMM_IMPL_H
#define AA_GEMM_IMPL_H

#include <stddef.h>

#include "gemm.h"

/* The AA_SUM_SCALED rows with every scale 1 (lib/gemm/scaled.c). M, N, K > 0. */
void aa_gemm_ref_scaled(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                        int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m);

/* op(A)[i][k] and op(B)[k][j] for the layouts documented in gemm.h. */
static inline double aa_gemm_opa(const double *A, size_t lda, int transA, size_t i, size_t k) {
  return transA ? A[k * lda + i] : A[i * lda + k];
}
static inline double aa_gemm_opb(const double *B, size_t ldb, int transB, size_t k, size_t j) {
  return transB ? B[j * ldb + k] : B[k * ldb + j];
}

/* Keeps the compiler from fusing a rounded product into a following add
   (GCC contracts across statements under -ffp-contract=fast, the GNU C
   default, once a target with FMA is enabled): the value must pass through
   a register as an opaque fp32/fp64 number. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define AA_GEMM_OPAQUE(x) __asm__("" : "+x"(x))
#elif defined(__GNUC__)
#define AA_GEMM_OPAQUE(x) __asm__("" : "+w"(x))
#else
#define AA_GEMM_OPAQUE(x) ((void)0)
#endif

/* OpenMP pragmas that vanish, without -Wunknown-pragmas noise, when the
   build has no OpenMP. */
#ifdef _OPENMP
#define AA_OMP(x) _Pragma(#x)
#else
#define AA_OMP(x)
#endif

/* ---- blocked driver shared by the sequential-chain models ----

   A kernel computes an mr x nr tile of C over kc steps of k from packed
   panels: pa holds kc groups of mr op(A) values (k major), pb kc groups of
   nr op(B) values. mode: AA_KERN_LOAD starts each chain from the value in
   c (converted to the accumulator format), else from +0; AA_KERN_STREAM
   asks for non-temporal stores (full tiles with 64-byte aligned rows). */
#define AA_KERN_LOAD 1
#define AA_KERN_STREAM 2
typedef void (*aa_gemm_kern_fn)(size_t kc, const void *pa, const void *pb, double *c, size_t ldc, int mode);
typedef struct {
  int mr, nr;
  size_t esize; /* bytes per packed element: 4 (fp32 models) or 8 */
  aa_gemm_kern_fn kern;
} aa_gemm_kern_t;

/* Instruction sets of the kernels, best first; the run-time choice is the
   first one the CPU supports, unless aa_gemm_force_kernel picked one. */
enum { AA_ISA_AVX512, AA_ISA_AVX2, AA_ISA_SCALAR, AA_ISA_COUNT };
int aa_gemm_isa(void);

/* C = op(A) op(B) with the chains of kd (K split into blocks whose
   accumulators travel through C exactly). M, N, K > 0. */
int aa_gemm_blocked(const aa_gemm_kern_t *kd, double *C, size_t ldc, const double *A, size_t lda, int transA,
                    const double *B, size_t ldb, int transB, size_t M, size_t N, size_t K, int accumulate);

/* AA_OK when the arguments describe a valid call (see gemm.h) of a model whose row has the parameters its
   mechanism is written for, AA_EINVAL otherwise. */
int aa_gemm_check(const double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                  int transB, size_t M, size_t N, size_t K, aa_accum_t model);

/* Handles M, N > 0 and K == 0 for every model: C = accumulate ? C : +0, with
   the incoming C rounded to fp32 when round32 (as the fp32 models read it). */
void aa_gemm_k0(double *C, size_t ldc, size_t M, size_t N, int accumulate, int round32);

/* Fast paths; arguments already checked, M, N, K > 0. Bitwise equal to the
   reference loops. */
int aa_gemm_fp32_seq(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                     int transB, size_t M, size_t N, size_t K, int accumulate);
int aa_gemm_fp32_pairwise(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate);
int aa_gemm_fp64_seq(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                     int transB, size_t M, size_t N, size_t K, int accumulate);

/* Scalar reference loops of each model (M, N, K > 0). */
void aa_gemm_ref_fp32_seq(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate);
int aa_gemm_ref_fp32_pairwise(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B,
                              size_t ldb, int transB, size_t M, size_t N, size_t K, int accumulate);
void aa_gemm_ref_fp64_seq(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate);

#endif
