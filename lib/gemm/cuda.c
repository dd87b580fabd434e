/* attnacc: aa_gemm_cuda and its device-pointer variant: checks, the models with a GPU path, and "not built with
 * CUDA". */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "config.h"

#include "gemm-cuda.h"
#include "gemm-impl.h"

/* The kernels take the fp32 chain and the block rows whose blocks tile the kernel's k-step of 32 (gemm_cuda_kern.cu).
 */
static int gpu_row(const aa_accum_info_t *m) {
  if (m->sum == AA_SUM_CHAIN) return m->out_bits == 23;
  if (m->sum != AA_SUM_BLOCK) return 0;
  return (m->block_k == 4 || m->block_k == 8 || m->block_k == 16 || m->block_k == 32) && m->frac_bits <= 25 &&
         (m->out_bits == 23 || m->out_bits == 13);
}

int aa_gemm_cuda_supports(aa_accum_t model) {
#ifdef AA_HAVE_CUDA
  const aa_accum_info_t *m = aa_accum_info(model);
  return m != NULL && gpu_row(m);
#else
  (void)model;
  (void)gpu_row;
  return 0;
#endif
}

int aa_gemm_cuda_devices(void) {
#ifdef AA_HAVE_CUDA
  return aa_gmcu_devices();
#else
  return 0;
#endif
}

static int gemm_cuda(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                     int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model, int on_device) {
  int st = aa_gemm_check(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, model);
  if (st != AA_OK) return st;
  if (!aa_gemm_cuda_supports(model)) return AA_EUNSUPPORTED; /* also: not built with CUDA */
  if (M == 0 || N == 0) return AA_OK;
  const aa_accum_info_t *m = aa_accum_info(model);
  aa_gmcu_job_t job = {C, A, B, ldc, lda, ldb, M, N, K, transA, transB, accumulate, 0, m->frac_bits, m->out_bits};
  if (m->sum == AA_SUM_BLOCK) job.block_k = m->block_k;
#ifdef AA_HAVE_CUDA
  return aa_gmcu_run(&job, on_device);
#else
  (void)job;
  (void)on_device;
  return AA_EUNSUPPORTED;
#endif
}

int aa_gemm_cuda(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                 int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  return gemm_cuda(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, model, 0);
}

int aa_gemm_cuda_dev(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                     int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  return gemm_cuda(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, model, 1);
}
