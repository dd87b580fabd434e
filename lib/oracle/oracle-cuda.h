/* attnacc: internal interface between the oracle's C side and its CUDA kernels (lib/oracle/fast_cuda_kern.cu). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ORACLE_ORACLE_CUDA_H
#define AA_ORACLE_ORACLE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "ddcore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Widest head the kernels take (a thread holds d / AA_ORCU_THREADS columns). */
#define AA_ORCU_THREADS 128
#define AA_ORCU_MAXD 256

/* What the kernels need of the run context (aa_or_ctx_t), in plain data. */
typedef struct {
  size_t n_q, n_k, d, heads, kvh, group;
  aa_or_dd_t sig;
  double sig_rel, floor_unit, target;
  aa_or_exp_tab_t tab;
} aa_orcu_params_t;

/* The spans of fast-common.h (span, exact_pair) of every row of q, dO, k, v. */
typedef struct {
  const double *xq, *xdo, *xk, *xv;
  const int *lq, *ldo, *lk, *lv;
} aa_orcu_spans_t;

/* One output tensor on the host: val, fp32, bf16, rel written for every
   element, todo 1 where the element goes to MPFR (then the others are
   meaningless). */
typedef struct {
  double *val, *f32, *b16, *rel;
  uint8_t *todo;
} aa_orcu_out_t;

typedef struct aa_orcu aa_orcu_t;

/* Number of CUDA devices usable (0 without a driver or a GPU). */
int aa_orcu_devices(void);
/* Upload the inputs; rlo, rhi [n_q] are each query's visible keys, clo,
   chi [n_k] each key's visible queries (intervals). 0, or -1 with msg. */
int aa_orcu_begin(aa_orcu_t **h, const aa_orcu_params_t *p, const double *q, const double *k, const double *v,
                  const double *dO, const aa_orcu_spans_t *sp, const int64_t *rlo, const int64_t *rhi,
                  const int64_t *clo, const int64_t *chi, char *msg, size_t msglen);
/* Forward, first half, per row r of heads n_q: the shift M (mh, ml), the
   normaliser Z = zs + zc and its relative bound epsz. */
int aa_orcu_fwd_z(aa_orcu_t *h, double *mh, double *ml, double *zs, double *zc, double *epsz, char *msg,
                  size_t msglen);
/* Forward, second half: from the LSE (with bound) and 1/Z per row, O (settled on the GPU) and D per row. */
int aa_orcu_fwd_o(aa_orcu_t *h, const double *lse_h, const double *lse_l, const double *e_lse, const double *iz_h,
                  const double *iz_l, double *d_h, double *d_l, double *e_d, const aa_orcu_out_t *o, char *msg,
                  size_t msglen);
/* Backward: dQ by rows, dK and dV by key columns, settled on the GPU. */
int aa_orcu_bwd(aa_orcu_t *h, const aa_orcu_out_t *dq, const aa_orcu_out_t *dk, const aa_orcu_out_t *dv, char *msg,
                size_t msglen);
void aa_orcu_end(aa_orcu_t *h);

#ifdef __cplusplus
}
#endif
#endif
