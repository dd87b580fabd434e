/* attnacc: MPFR-backed exact attention forward and backward, with certified error bounds. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ORACLE_H
#define AA_ORACLE_H

#include <stddef.h>

#include "common.h"
#include "problem.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  AA_ORACLE_MPFR = 0, /* every operation in MPFR at opts.prec bits */
  AA_ORACLE_FAST,     /* faster certified scheme; falls back to MPFR element by element */
  AA_ORACLE_COUNT
} aa_oracle_path_t;

const char *aa_oracle_path_name(aa_oracle_path_t path); /* "mpfr", "fast" */
int aa_oracle_path_from_name(aa_oracle_path_t *out, const char *name);
const char *aa_oracle_path_describe(aa_oracle_path_t path);

/* Where the fast path runs: auto = an NVIDIA GPU when libattnacc was built
   with CUDA (configure --with-cuda), one is present and the problem is one
   the GPU kernels take (dense, causal and windowed masks, GQA, d <= 256;
   sinks, dropout, softcap, ALiBi, packing bounds, varlen batches, attention
   masks, biases, key padding and logit offsets run on the CPU) and the GPU's row-by-row bounds are tight enough (sums
   of at most 8192 terms, or a target of 2^-40 or looser: beyond, elements go to the CPU's MPFR engine, which then
   dominates), else the CPU. cuda asks for the GPU: AA_EUNSUPPORTED when this build has no CUDA or no GPU is present;
   an unsupported problem still runs on the CPU, and aa_oracle_result_t.device says where it ran. Every value is the
   same either way: the GPU runs the CPU's row-by-row fast kernel operation for operation, so val, fp32 and bf16 are
   bit-identical to it. */
typedef enum {
  AA_ORACLE_DEVICE_AUTO = 0,
  AA_ORACLE_DEVICE_CPU,
  AA_ORACLE_DEVICE_CUDA,
  AA_ORACLE_DEVICE_COUNT
} aa_oracle_device_t;

const char *aa_oracle_device_name(aa_oracle_device_t dev); /* "auto", "cpu", "cuda" */
int aa_oracle_device_from_name(aa_oracle_device_t *out, const char *name);
/* 1 when this build has the GPU oracle and a CUDA device is present, else 0. */
int aa_oracle_cuda_available(void);

typedef struct {
  aa_oracle_path_t path;
  int prec;    /* MPFR working precision in bits (default 128) */
  int threads; /* 0 = all available (OpenMP); results never depend on it */
  /* Certified relative accuracy every element must reach before it is
     accepted (default AA_ORACLE_TARGET_DEFAULT = 2^-48; allowed 2^-96 to
     2^-8). Elements that miss it, or whose FP32/BF16 rounding is not yet
     decided, are recomputed in MPFR. A looser target (e.g. 2^-24 for maps of
     BF16 errors around 1e-3) spares most MPFR recomputes of rows where the
     softmax is dominated by one key and dP - D cancels to many bits (input
     scales sigma >= 4); every value is still certified, to the target
     instead of 2^-48. From 2^-34 up (looser) the CPU's tiled fast kernel
     accumulates dQ, dK and dV in plain binary64 with a-posteriori bounds and
     redoes in double-double only the rows it cannot certify (its binary64
     tier, lib/oracle/fast.c): faster, every value still certified to the
     target, fp32/bf16 still the correct roundings. The GPU path does not use
     the tier: it runs the row-by-row double-double kernel at every target. */
  double target;
  aa_oracle_device_t device; /* default auto (see above) */
} aa_oracle_opts_t;

#define AA_ORACLE_TARGET_DEFAULT 0x1p-48
#define AA_ORACLE_TARGET_MIN 0x1p-96
#define AA_ORACLE_TARGET_MAX 0x1p-8

void aa_oracle_opts_init(aa_oracle_opts_t *opts); /* path fast, prec 128, threads 0, target 2^-48, device auto */

/* One output tensor of the oracle. */
typedef struct {
  aa_tensor_t val;     /* a double within relerr_bound of the exact value (FP64 tag) */
  aa_tensor_t fp32;    /* the exact value correctly rounded (RNE) to FP32 */
  aa_tensor_t bf16;    /* the exact value correctly rounded (RNE) to BF16 */
  double relerr_bound; /* certified max over elements of |val - exact| / |exact| (0 for exact zeros) */
} aa_oracle_out_t;

/* Rows with no visible key and no sink have a defined result: O = 0,
   LSE = -Inf, and they contribute nothing to any gradient (dQ row = 0).
   A row with no visible key but sinks has O = 0, LSE = log(sum exp(sinks)),
   D = 0 and dQ row = 0.

   Guarantees. For every element whose exact value x is non-zero, |x| in
   [2^-900, 2^1000]: |val - x| <= relerr_bound |x| (relerr_bound is about
   2^-53 in practice and at most opts.target, 2^-48 by default), and
   fp32/bf16 hold RN(x) exactly.
   Both are certified by an interval [c - e, c + e] containing x (c from
   double-double or MPFR arithmetic, e a rigorous a-priori bound); when the
   interval is too wide the element is recomputed in MPFR at prec, 2 prec
   and 4 prec bits. Elements still undecided at 4 prec, or whose certified
   relative bound still misses the target there, are counted in
   n_uncertified and are not covered by relerr_bound: an interval that
   contains 0 (an exact zero that no interval separates from 0) gives
   val = 0 and fp32 = bf16 = 0, which are the correct roundings whenever the
   interval lies inside (-2^-150, 2^-150); an exact FP32/BF16 rounding
   midpoint gives the rounding of the computed center. One exact zero is
   certified by an identity instead: dQ[h, i, c] = 0 when every key row i
   sees has the same value in column c (sum_j dS_ij = 0 when the weights sum
   to 1: no sinks, softcap or dropout; oracle.c, dq_zero_by_identity), as
   two equal BF16 keys often make in the first rows of a causal or windowed
   problem. Zeros are returned as +0.
   Every input must be finite (AA_ENAN), and the a-priori magnitudes of the
   intermediates (q.k, the scaled score, the LSE, dO.v - D, and the bounds
   |dQ| <= scale max|dS| max|k|, |dK| <= scale group n_q max|dS| max|q|,
   |dV| <= group n_q max|dO|, from sum_j P_ij = 1) must stay within 2^1000:
   otherwise the run is refused with AA_ERANGE and a message naming the
   quantity, rather than returning overflowed values. Any logit magnitude
   below that is handled: both paths shift the softmax by the row's largest
   logit, so no exponential overflows, and the MPFR engine forms the dS of
   a key holding more than half of its row's weight as
   sum_{r != j} P_r (dP'_j - dP'_r) + P_sinks dP'_j, free of the
   cancellation of dP'_j - D (mpeng.c, ds_dominant). An element whose
   interval lies inside (-2^-900, 2^-900) is certified as below the range:
   val = fp32 = bf16 = 0 (the correct roundings; val is promised only from
   2^-900 up). Elements that still cannot be settled at 4 prec bits are
   reported uncertified, never given a bound they do not meet
   (tests/toracle_property checks all of this over input scales 1e-30 to
   1e30 against an independent MPFR reference).
   The score modifiers of problem.h (softcap, ALiBi) keep these guarantees:
   the fast path's tanh and 1 - tanh^2 come from its certified double-double
   exponential with propagated bounds (fast-common.h, score_mod), the MPFR
   path's from mpfr_tanh and mpfr_sech with running bounds; the ALiBi bias is
   formed exactly, and the attention bias plus the logit offset is added as an
   exact double-double (MPFR: one rounding each). A boolean mask, -Inf bias
   entries or key padding (problem.h) make a row's visible keys a set: the
   fast path then runs its row kernel, which lists each row's visible keys,
   with the same bounds (term counts are the visible keys'). */
typedef struct {
  aa_oracle_out_t o;         /* [heads, n_q, d] */
  aa_oracle_out_t lse;       /* [heads, n_q], natural log, includes the softmax scale */
  aa_oracle_out_t dq;        /* [heads, n_q, d] */
  aa_oracle_out_t dk;        /* [kv_heads, n_k, d], reduced over the query heads of each group */
  aa_oracle_out_t dv;        /* [kv_heads, n_k, d] */
  aa_oracle_out_t dsinks;    /* [heads, num_sinks] (empty when num_sinks == 0) */
  size_t n_recomputed;       /* fast path: elements recomputed in MPFR to meet the bound */
  size_t n_uncertified;      /* elements left uncertified at the highest precision (see above) */
  aa_oracle_device_t device; /* where the fast path ran: AA_ORACLE_DEVICE_CPU or _CUDA (mpfr path: CPU) */
} aa_oracle_result_t;

/* Compute the exact attention forward and backward of the stored inputs
   q [heads, n_q, d], k and v [kv_heads, n_k, d], dO [heads, n_q, d] (their
   values are taken exactly, whatever their format tag). A varlen problem
   (problem.h) is computed sequence by sequence; every guarantee above holds
   for each element, relerr_bound is the largest of the sequences'. */
int aa_oracle_run(aa_oracle_result_t *out, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                  const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, aa_error_t *err);
void aa_oracle_result_free(aa_oracle_result_t *res);

/* Seconds the mpfr path would take on one core for this problem at
   opts->prec bits: a pure function of the sizes (heads, n_q, n_k, d,
   precision), calibrated once on one machine (lib/oracle/estimate.c says
   how), for front ends to warn about or refuse hours-long runs. The
   library itself never refuses. */
double aa_oracle_mpfr_seconds(const aa_problem_t *pb, const aa_oracle_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif
