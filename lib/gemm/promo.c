/* attnacc: the promoted tensor-core models (AA_SUM_PROMOTED): chunks of k summed from +0 by tc blocks, then added
 * into the accumulator by an IEEE add of the result format. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "fmt.h"
#include "gemm-impl.h"
#include "tc-impl.h"

/* RNE into the row's result format: binary32, or binary16 (out_ebits 5:
   subnormals kept, overflow to +-Inf, as HADD2 and HMMA.F16 round). */
static double round_out(double x, const aa_accum_info_t *m) {
  static const aa_round_opts_t fp16 = {AA_FMT_FP16, AA_RND_NE, 1, 0};
  return m->out_ebits == 5 ? aa_round(x, &fp16, NULL) : (double)(float)x;
}

/* One inner block: the accumulator d and the products a[k] b[k] (k < n)
   aligned and truncated as a tc block, then rounded as the row says. */
static double inner_block(double d, const float *a, const float *b, size_t n, const aa_accum_info_t *m) {
  double t[33];
  int et[33];
  t[0] = d;
  et[0] = d != 0 && isfinite(d) ? aa_gemm_tc_exp(d) : 0;
  for (size_t k = 0; k < n; k++) {
    t[1 + k] = (double)a[k] * b[k];
    et[1 + k] = t[1 + k] != 0 && isfinite(t[1 + k]) ? aa_gemm_tc_exp(a[k]) + aa_gemm_tc_exp(b[k]) : 0;
  }
  if (m->inner_rnd == AA_RND_Z) return aa_gemm_tc_block_out(t, et, n + 1, m->frac_bits, m->inner_bits);
  double s = aa_gemm_tc_block_sum(t, et, n + 1, m->frac_bits);
  return s == 0 ? 0.0 : round_out(s, m); /* an exact zero sum is +0 */
}

/* The chunk of output (i, j) over k0 .. k0 + n - 1 (n <= P): its inner
   blocks in order, from d = +0, each gathering the positions q with
   (q / g) mod (P / K) == b; a block with no position is skipped. */
static double chunk(const double *A, size_t lda, int transA, const double *B, size_t ldb, int transB, size_t i,
                    size_t j, size_t k0, size_t n, const aa_accum_info_t *m) {
  const size_t nb = (size_t)(m->promote_k / m->block_k), g = (size_t)m->k_granule;
  double d = 0.0;
  for (size_t blk = 0; blk < nb; blk++) {
    float a[32], b[32];
    size_t cnt = 0;
    for (size_t q = 0; q < n; q++)
      if ((q / g) % nb == blk) {
        a[cnt] = (float)aa_gemm_opa(A, lda, transA, i, k0 + q);
        b[cnt++] = (float)aa_gemm_opb(B, ldb, transB, k0 + q, j);
      }
    if (cnt > 0) d = inner_block(d, a, b, cnt, m);
  }
  return d;
}

void aa_gemm_promoted(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                      int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m) {
  const size_t P = (size_t)m->promote_k;
  AA_OMP(omp parallel for schedule(static) if (M * N * K > 65536))
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      double acc = accumulate ? round_out(C[i * ldc + j], m) : 0.0;
      for (size_t k0 = 0; k0 < K; k0 += P) {
        double d = chunk(A, lda, transA, B, ldb, transB, i, j, k0, K - k0 < P ? K - k0 : P, m);
        /* the IEEE add: binary32 addition, or the exact sum of two fp16 values rounded to fp16 */
        acc = m->out_ebits == 5 ? round_out(acc + d, m) : (double)((float)acc + (float)d);
      }
      C[i * ldc + j] = acc;
    }
}
