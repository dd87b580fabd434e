/* attnacc: internal interface between the gemm module's C side (cuda.c) and its CUDA kernels (gemm_cuda_kern.cu). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_GEMM_GEMM_CUDA_H
#define AA_GEMM_GEMM_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One product of aa_gemm's arguments, checked, M, N > 0 (K may be 0). block_k 0 is fp32-seq; else the
   AA_SUM_BLOCK row with block_k in {4, 8, 16, 32}, frac_bits <= 25 and out_bits (23 or 13). */
typedef struct {
  double *C;
  const double *A, *B;
  size_t ldc, lda, ldb, M, N, K;
  int transA, transB, accumulate;
  int block_k, frac_bits, out_bits;
} aa_gmcu_job_t;

/* Usable CUDA devices (0 without a driver or a GPU). */
int aa_gmcu_devices(void);
/* Runs the job on the calling thread's GPU (lib/common.h aa_gpu_index): host pointers copied in and out (on_device
   0), or device pointers (allocated on that GPU) used as they are (1). AA_OK, AA_ENOMEM (cudaMalloc failed) or
   AA_EUNSUPPORTED (no device, or a CUDA error). */
int aa_gmcu_run(const aa_gmcu_job_t *job, int on_device);

#ifdef __cplusplus
}
#endif
#endif
