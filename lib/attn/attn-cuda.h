/* attnacc: internal interface between the attn module's C side (cuda.c) and its CUDA kernels (attn_cuda_kern.cu). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ATTN_ATTN_CUDA_H
#define AA_ATTN_ATTN_CUDA_H

#include "attn-bwd-core.h"
#include "attn-core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The forward of p (host pointers Q, K, V, lo, hi; its output pointers are ignored) on the calling thread's GPU
   (lib/common.h aa_gpu_index): O, LSE (host, heads n_q d and heads n_q floats), the doubt flags (nsplit heads n_q
   bytes), the P-cast counters cnt[3] and the largest cast's bits *pmax. AA_OK, AA_ENOMEM or AA_EUNSUPPORTED (no
   device, a CUDA error, or a build without CUDA). */
int aa_atcu_forward(const aa_core_fwd_t *p, float *O, float *LSE, unsigned char *doubt, unsigned long long *cnt,
                    unsigned long long *pmax);

/* The backward of p (host pointers; Pdv, dS, dQ, dK, dV, bad, ndoubt and fxe ignored; doubt a host list of doubt_cap;
   fxt a host array of 2 heads nqt that receives the fixed dq_reduce's failures per q tile) on
   the calling thread's GPU: dQ, dK, dV (host, heads n_q d and kv_heads n_k d floats), *bad (a non-finite pair) and
   the pairs redone on the host after a doubtful libm exp (*redone). AA_OK, AA_ENOMEM or AA_EUNSUPPORTED (also when
   more than doubt_cap pairs were doubtful). */
int aa_atcu_backward(const aa_core_bwd_t *p, float *dQ, float *dK, float *dV, unsigned *bad, size_t *redone);

#ifdef AA_ATTN_IMPL_H /* the C side (cuda.c), which knows the context */
/* The fixed-shift and guarded forwards' per-tile steps after the core's rows (cuda_fixed.c): out's O, LSE, P-cast
   counters already stored from p's rows; the flags, recovery and saved (shift, 1/l) as forward_fixed.c writes them.
 */
void aa_attn_cuda_fixed_finish(const aa_attn_ctx_t *cx, aa_attn_result_t *out, const aa_core_fwd_t *p);
#endif

#ifdef __cplusplus
}
#endif
#endif
