/* attnacc: emulated matrix products with an explicit, named accumulation model. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_GEMM_H
#define AA_GEMM_H

#include <stddef.h>

#include "common.h"
#include "fmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the K-long sum of each output element is formed. Every model fixes
   the order of operations, so results are bitwise reproducible and do not
   depend on the thread count or on the vector path chosen at run time.
   The models are the rows of aa_accum_table below (names, parameters,
   descriptions and sources there); the enum only numbers them. */
typedef enum {
  AA_ACC_FP32_SEQ = 0,
  AA_ACC_FP32_PAIRWISE,
  AA_ACC_FP64_SEQ,
  AA_ACC_TC_K16_F25,
  AA_ACC_TC_K8_F24,
  AA_ACC_TC_K4_F23,
  AA_ACC_TC_FP8_K32_F13,
  AA_ACC_TC_FP8_K32_F25,
  AA_ACC_CDNA3_K8_F24,
  /* the promoted models (AA_SUM_PROMOTED), checked on the H200 (fixtures/h200-fp8) */
  AA_ACC_SM90_FP8_MMA_F32,
  AA_ACC_SM90_FP8_MMA_F16,
  AA_ACC_TC_FP8_K32_F13_P128,
  /* block-scaled MMA (Blackwell kind::mxf8f6f4 and kind::mxf4nvf4), rule AA_SUM_SCALED */
  AA_ACC_TC_MXFP8_K32_F25,
  AA_ACC_TC_MXFP4_K64_F35,
  AA_ACC_TC_NVFP4_K64_F35,
  AA_ACC_TC_K8_F25,
  AA_ACC_COUNT
} aa_accum_t;

/* The alignment rule of a model's sum, the definitions below: each names
   one mechanism of the library, which reads the rest of its row. */
typedef enum {
  AA_SUM_CHAIN = 0, /* fp32-seq, fp64-seq: one fused multiply-add per k, in k order, rounded to the result */
  AA_SUM_PAIRWISE,  /* fp32-pairwise: products rounded, then a fixed pairwise tree */
  AA_SUM_BLOCK,     /* tc-kK-fF: blocks of K exact products and the accumulator, aligned to their largest
                       exponent, truncated to F fractional bits, summed exactly, then rounded once */
  AA_SUM_BLOCK2,    /* cdna3-k8-f24: groups of K products aligned and truncated to F bits, then the group sum and
                       the accumulator aligned again (two stages) */
  AA_SUM_PROMOTED,  /* sm90-fp8-mma-*, tc-fp8-k32-f13-p128: chunks of k summed from +0 by tc blocks, each chunk sum
                       then added into the accumulator by an IEEE add (RNE) of the result format */
  AA_SUM_SCALED, /* tc-mxfp8/mxfp4/nvfp4: block-scaled MMA, the scales' exponents in the alignment (aa_gemm_scaled) */
  AA_SUM_COUNT
} aa_sum_t;

/* One accumulation model: a row of aa_accum_table. Adding a model is
   adding its enum value (before AA_ACC_COUNT), its row in
   lib/gemm/accum.c and its MPFR test row in tests/tgemm_tc.c (which fails
   while a row has none); the paths read nothing but the row's fields. */
typedef struct {
  aa_accum_t model; /* its own index in aa_accum_table */
  const char *name; /* the recipe value, e.g. "tc-k16-f25" */
  aa_sum_t sum;     /* alignment rule */
  int block_k;      /* K: products per block (1 .. 32) for AA_SUM_BLOCK*, the instruction's k (32, 64) for
                       AA_SUM_SCALED, else 0 */
  int frac_bits;    /* F: fractional bits kept below the block exponent, else 0 */
  int out_bits;     /* fractional bits of the result: 23 (fp32), 13 (e8m13, fp32's exponent range), 52 (fp64) */
  aa_rnd_t rnd;     /* rounding of the result: AA_RND_NE or AA_RND_Z */
  const char *description; /* one line for `attnacc list` */
  const char *cite;        /* REFERENCES.md key of the source ("mma-sim"), or "" for IEEE 754 operations alone */
  /* AA_SUM_PROMOTED only (0 in the other rows: NOT_PROMOTED in lib/gemm/accum.c); such a row also uses
     block_k and frac_bits (its inner blocks) and out_bits 10 for an fp16 result (with out_ebits 5): */
  int promote_k;      /* P: k per chunk summed from +0 before it is added into the accumulator */
  int k_granule;      /* g: position q in the chunk goes to inner block (q / g) mod (P / K) */
  int inner_bits;     /* fractional bits of an inner block's result */
  aa_rnd_t inner_rnd; /* its rounding: AA_RND_Z (fp32's exponent range) or AA_RND_NE (the result format) */
  int out_ebits;      /* exponent bits of the result format: 0 = fp32's range (fp64's for out_bits 52), 5 = fp16 */
  int scale_block;    /* AA_SUM_SCALED: k-values per scale (32 MX, 16 NVFP4); else 0 */
  int scale_emin;     /* AA_SUM_SCALED: the scale format's smallest exponent (-127 E8M0, -6 UE4M3); else 0 */
} aa_accum_info_t;

/* The models, AA_ACC_COUNT rows in enum order. */
extern const aa_accum_info_t aa_accum_table[AA_ACC_COUNT];
/* The row of a model, or NULL for a value outside the enum. */
const aa_accum_info_t *aa_accum_info(aa_accum_t model);
/* 1 when every result of the model is already a value of format f (the
   fp32 results, e8m13 included, in FP32; the fp64 ones in FP64; the fp16
   ones in FP16 and FP32), so that
   rounding a product to f is the identity and may be skipped. */
int aa_accum_native(aa_accum_t model, aa_fmt_t f);

/* Exact definitions (acc, p_k and sums are fp32 for the fp32 models; every
   fp32 operation is IEEE binary32 with round-to-nearest-even, subnormals
   kept; with accumulate the incoming C is first rounded to fp32 (RNE), which
   is the identity for the fp32 values callers are required to pass):

   Each rule of aa_sum_t in turn, for its rows (the names given):

   fp32-seq       (AA_SUM_CHAIN) acc = accumulate ? C : +0;  for k = 0..K-1: acc = fmaf(a_k, b_k, acc);  C = acc.
   fp32-pairwise  (AA_SUM_PAIRWISE) p_k = fl32(a_k * b_k) (a separate multiply, never fused);
                  S = pw(p_0 .. p_{K-1}) where pw(x_0) = x_0 and, for n >= 2,
                  pw(x_0 .. x_{n-1}) = fl32(pw(x_0 .. x_{m-1}) + pw(x_m .. x_{n-1}))
                  with m the largest power of two strictly below n (so the
                  tree is the one a binary counter builds while streaming k:
                  complete power-of-two blocks, the ragged tail on the right);
                  C = accumulate ? fl32(C + S) : S; for K = 0, C = accumulate ? C : +0.
   fp64-seq       as fp32-seq with fma() in binary64 and C not rounded.

   tc-kK-fF       (AA_SUM_BLOCK) the tensor-core model of [mma-sim]
                  (Fasi, Higham, Mikaitis and Pranesh 2021; MMA-Sim 2025;
                  Khattak and Mikaitis 2025), with the block length K, the
                  fractional bits F and the result format of the model's
                  row in aa_accum_table (lib/gemm/accum.c, where a comment
                  gives the source of each row's parameters).
                  Operands are first rounded to fp32 (RNE; the
                  identity for the bf16/fp16/fp32 values callers pass).
                  acc = accumulate ? fl32(C) : +0. The k axis is cut into
                  blocks of K consecutive indices (0..K-1, K..2K-1, ...; the
                  last block may be shorter). For each block in order, the
                  terms are acc and the exact products p_k = a_k * b_k (no
                  rounding: an fp32 x fp32 product is exact in binary64), and
                    E    = the largest alignment exponent over the nonzero
                           terms, with e(x) = max(floor(log2 |x|), -126):
                           e(acc) for the accumulator and e(a_k) + e(b_k)
                           for a product, so a significand product in
                           [2, 4) does not raise E and such a product keeps
                           one more bit (MMA-Sim's rule; a zero accumulator
                           or product takes no part: it contributes exactly
                           0 whatever E is);
                    t'   = t truncated toward zero to a multiple of 2^(E-F)
                           (F fractional bits below 2^E; the accumulator is aligned and
                           truncated like any product, so it loses its low
                           bits when a product is larger);
                    S    = the exact sum of the t' (no intermediate rounding);
                    acc  = RZ_fp32(S): truncation to 24 significant bits,
                           subnormal results truncated to multiples of 2^-149,
                           |S| >= 2^128 gives +-Inf (the H200's mma.sync and
                           wgmma, [h200-orders] (4): not
                           IEEE RZ's FLT_MAX; |S| in [FLT_MAX, 2^128) truncates
                           to FLT_MAX), an exact zero
                           sum gives +0 (also when every term is -0), a
                           nonzero sum below 2^-149 in magnitude a zero of
                           its own sign. A row with a 13-bit result
                           (tc-fp8-k32-f13) truncates instead to e8m13 (nv_ptx.py:153-159,
                           arithmetic.py:189-193): 14 significant bits,
                           subnormals in multiples of 2^-139, overflow to
                           +-(2 - 2^-13) 2^127, an fp32 value.
                  (The alignment rule was checked on the H200: tc-k16-f25
                  reproduces all of 1.57 million BF16 mma.sync m16n8k16
                  steps of fixtures/h200-fa2/mma_chain.cu, where E from the
                  products' values missed 2-3 % of the steps with widely
                  spread exponents; tests/tmma_sm90 keeps a sample.
                  MMA-Sim gives a zero term the exponent -126; here it
                  takes no part.)
                  Inf/NaN: when a block holds an infinite or NaN term (an
                  Inf or NaN accumulator or operand; 0 * Inf is NaN) its
                  result is the IEEE sum of those non-finite terms, the
                  finite ones being ignored. Products of finite fp32 values
                  never overflow (binary64 holds them), so a block of finite
                  terms only overflows in its final rounding, to +-Inf: a
                  block whose exact sum is finite stays finite even where
                  its terms in sequence would overflow (2^127 + 2^127 -
                  2^127 gives 2^127 on the H200), while the accumulator
                  overflows between blocks.
                  C = acc after the last block; for K = 0, C = accumulate ? fl32(C) : +0.
                  Every path (reference loop, packed threaded path) gives
                  identical bits.

   cdna3-k8-f24   (AA_SUM_BLOCK2, implemented for K = 8, F = 24 only)
                  AMD CDNA3 (MI300) bf16/fp16 MFMA as MMA-Sim models it
                  (mmasim/simulator/amd.py:39-43 and 87-98, group_size =
                  min(8, k), the accumulator rounded to fp32 (RNE) after
                  each group; arithmetic.py:227-285, fused_dot_rd_add
                  without FP8). Operands rounded to fp32 (RNE) as above;
                  acc = accumulate ? fl32(C) : +0; k cut into groups of 8
                  (the last may be shorter). In each group, with
                  e(x) = max(floor(log2 |x|), -126) for nonzero x:
                    stage 1  over the nonzero products p_i = a_i b_i,
                             e_p = max (e(a_i) + e(b_i)) and
                             S = sum of p_i truncated toward zero to
                             multiples of 2^(e_p - 24) (exact sum);
                             no nonzero product: S = 0 and e_p absent;
                    stage 2  E = max(e_p, e(acc)) (a zero accumulator
                             takes no part; neither present: acc = +0);
                             S' = S rounded down (toward -Inf) to a
                             multiple of 2^(E - 31), acc' = acc rounded
                             down to a multiple of 2^(E - 24);
                             acc = RNE_fp32(S' + acc') (exact sum;
                             subnormals kept, overflow to +-Inf, an exact
                             zero gives +0).
                  A product of magnitude >= 2^128 counts as an infinity of
                  its sign (arithmetic.py:243-259); a group holding an
                  infinite or NaN term (after that rule) gives the IEEE sum
                  of those terms. (MMA-Sim gives a zero operand the
                  exponent -126 in e_p; here zero products take no part.)

   sm90-fp8-mma-f32, sm90-fp8-mma-f16, tc-fp8-k32-f13-p128 (AA_SUM_PROMOTED)
                  chunks of the k axis summed from zero by tensor-core
                  blocks, then added into the accumulator by an IEEE add
                  (the FADD/HADD2 of a compiled mma.sync, the promotion of
                  cuBLAS's FP8 GEMMs). Row parameters: block length K,
                  fractional bits F, the inner blocks' result (inner_bits,
                  inner_rnd), the chunk P (promote_k), the granule g
                  (k_granule), the result format (out_bits 23 with
                  out_ebits 0: fp32; out_bits 10 with out_ebits 5: fp16,
                  emin -14, subnormals kept, overflow to +-Inf) with RNE.
                  Operands are rounded to fp32 (RNE) as above;
                  acc = accumulate ? RNE_out(C) : +0. The k axis is cut into
                  chunks of P consecutive indices (the last may be shorter).
                  In a chunk starting at k0, index k goes to inner block
                  b = ((k - k0) / g) mod (P / K); then, from d = +0, for
                  b = 0, 1, ... in order (a block holding no index is
                  skipped): d = the block of the tc-kK-fF definition above
                  with d as its accumulator term and its products, the
                  exact sum S rounded to inner_bits: RZ in fp32's range as
                  the tc rows (23: fp32, 13: e8m13), or RNE to the result
                  format (the fp16 of HMMA.F16; overflow to +-Inf, an exact
                  zero sum +0). Then acc = RNE_out(acc + d), the IEEE add
                  of the result format (fp32: binary32 addition).
                  C = acc; for K = 0, C = accumulate ? RNE_out(C) : +0.
                  Rows (lib/gemm/accum.c): sm90-fp8-mma-f32 (K 16, F 25,
                  inner RZ fp32, P 32, g 2) and sm90-fp8-mma-f16 (the same,
                  inner RNE fp16, fp16 result): the FP8 mma.sync m16n8k32
                  of sm_90, which compiles to two HMMA.16816 on FP16
                  operands from zero, over k mod 4 in {0, 1} and then
                  {2, 3}, and an FADD/HADD2 of C ([h200-fp8]: every one
                  of 2.1 million steps of each form); tc-fp8-k32-f13-p128 (K 32,
                  F 13, inner RZ e8m13, P 128, g 32): torch._scaled_mm
                  (cuBLASLt) FP8 without use_fast_accum, whose wgmma
                  partial sums are added into fp32 every 128 k
                  ([cublas-fp8], [h200-fp8]; with
                  use_fast_accum it is tc-fp8-k32-f13 itself). One path
                  (the literal loop) serves aa_gemm and aa_gemm_ref.
   tc-mxfp8-k32-f25, tc-mxfp4-k64-f35, tc-nvfp4-k64-f35   (AA_SUM_SCALED)
                  Blackwell block-scaled MMA as MMA-Sim models it
                  (microsoft/MMA-Sim c785138, mmasim/simulator/nv_ptx.py:
                  100-144 mma_block_scale and 220-260
                  tcgen05mma_block_scale: 35 fractional bits for k = 64,
                  25 for k = 32; arithmetic.py:115-224). Elements and scales
                  are given apart (aa_gemm_scaled); aa_gemm runs these rows
                  with every scale 1 and e() clamped at fp32's -126.
                  acc = accumulate ? fl32(C) : +0; k cut into instructions
                  of block_k (the last may be shorter). e(x) =
                  max(floor(log2 |x|), emin of x's format) (MMA-Sim's
                  extract_significand_exponent). In each instruction the
                  terms are acc (exponent e(acc), emin -126) and
                    k = 32 (mxf8f6f4, E8M0 scales sa_i, sb_j of the block):
                      each product a_k b_k sa sb, exponent
                      e(a_k) + e(b_k) + e(sa) + e(sb) (elements' emin
                      aa_gemm_scales_t.emin_a / emin_b: -6 E4M3, -14 E5M2);
                    k = 64 (mxf4nvf4): per 16 consecutive k the sum
                      g = sum a_k b_k (exact for E2M1 elements; binary64
                      in k order otherwise) times |sa| |sb| of those k
                      (one scale per scale_block k: E8M0 for mxfp4, UE4M3
                      for nvfp4, MMA-Sim taking their absolute values),
                      exponent e(sa) + e(sb) alone, whatever g is;
                  E = the largest exponent of a nonzero term, every term
                  truncated toward zero to a multiple of 2^(E - F), summed
                  exactly, and the sum rounded toward zero to fp32
                  (subnormals kept, an exact zero +0); a NaN or infinite
                  term gives the IEEE sum of those terms. Where this
                  differs from MMA-Sim: a zero term takes no part in E
                  (MMA-Sim gives a zero accumulator or operand the exponent
                  -126 and a zero group its scales' exponent), and an
                  overflow gives +-FLT_MAX (RZ; MMA-Sim's conversion of the
                  truncated double gives +-Inf). Both need sums at the
                  edges of the range or groups that cancel exactly.

   NaN payloads are not part of the model (paths may propagate different
   NaNs); everything else, including signed zeros, subnormals and
   infinities, is bitwise identical whatever vector path and thread count. */

/* Shorthands for fields of aa_accum_table. */
const char *aa_accum_name(aa_accum_t model);               /* "unknown" outside the table */
int aa_accum_from_name(aa_accum_t *out, const char *name); /* AA_OK or AA_ENOTFOUND */
const char *aa_accum_describe(aa_accum_t model);           /* one line for `attnacc list` */

/* Block length K and fractional bits F of a block model (AA_SUM_BLOCK,
   AA_SUM_BLOCK2, AA_SUM_PROMOTED: its inner blocks); AA_ENOTFOUND for the other models (either output may be
   NULL). */
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

/* aa_gemm on an NVIDIA GPU (configure --with-cuda): the same arguments,
   checks and bits as aa_gemm (signed zeros, subnormals, infinities; NaN
   payloads aside) for the models aa_gemm_cuda_supports accepts: fp32-seq
   and the AA_SUM_BLOCK rows (tc-*). Operands and C are host pointers,
   copied to the GPU and C back. AA_EUNSUPPORTED for a build without CUDA
   ("not built with CUDA"), a machine without a usable GPU, or a model with
   no GPU path; AA_ENOMEM when the GPU cannot hold the arrays; the argument
   errors of aa_gemm. Runs on the calling thread's current CUDA device. */
int aa_gemm_cuda(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                 int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model);
/* The same on device pointers (C, A, B in GPU memory, same layouts), for
   pipelines that keep their arrays on the GPU; returns once C is written. */
int aa_gemm_cuda_dev(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                     int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model);
/* 1 when this build has a GPU path for the model (whether or not a GPU is present), else 0. */
int aa_gemm_cuda_supports(aa_accum_t model);
/* Number of usable CUDA devices: 0 without CUDA built, a driver or a GPU. */
int aa_gemm_cuda_devices(void);

/* Scales of a block-scaled product (AA_SUM_SCALED rows). */
typedef struct {
  const double *sa; /* M x (K / scale_block), row-major: the scale of A's row i for k-block kb at sa[i (K/sb) + kb] */
  const double *sb; /* (K / scale_block) x N, row-major: B's scale of k-block kb, column j at sb[kb N + j] */
  int emin_a, emin_b; /* smallest normal exponent of A's and B's element format (k = 32 rows): -6 E4M3, -14 E5M2 */
} aa_gemm_scales_t;

/* C[i][j] (+)= the block-scaled product of A (M x K elements, row stride
   lda) and B (K x N, row stride ldb) as the AA_SUM_SCALED row says, the
   elements passed as their values (E4M3/E5M2 for k = 32, E2M1 for
   k = 64) and the scales decoded. sa and sb both NULL: every scale 1.
   AA_EINVAL for a row of another rule, K not a multiple of the row's
   scale_block (with scales), or the argument errors of aa_gemm. */
int aa_gemm_scaled(double *C, size_t ldc, const double *A, size_t lda, const double *B, size_t ldb, size_t M,
                   size_t N, size_t K, int accumulate, aa_accum_t model, const aa_gemm_scales_t *s);

/* Name of the kernel family the fp32-seq and fp64-seq fast paths dispatch
   to on this CPU ("avx512f", "avx2-fma" or "scalar"), for benchmark and
   test reports. (fp32-pairwise is vectorised by compiler-generated clones
   chosen by the loader and does not follow this choice.) */
const char *aa_gemm_kernel_name(void);

/* Testing and benchmarking only: force the fast paths onto one kernel
   ("avx512f", "avx2-fma", "scalar"), or NULL / "auto" for the run-time
   choice. The run-time choice is the best kernel this CPU runs, or the one
   the environment variable ATTNACC_GEMM_KERNEL names (read once, ignored
   when unknown or unsupported here). "scalar" also sends the tc-* models
   to their binary64 packed path and cdna3-k8-f24 to its literal loop, the
   paths of a build or CPU without AVX-512. AA_EUNSUPPORTED when this CPU cannot run it, AA_ENOTFOUND for an
   unknown name. Not thread-safe: call it while no aa_gemm is running. */
int aa_gemm_force_kernel(const char *name);

#ifdef __cplusplus
}
#endif
#endif
