/* attnacc: internal header of the oracle module (double-double kernels, MPFR engine, settling of outputs). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ORACLE_IMPL_H
#define AA_ORACLE_IMPL_H

#include <math.h>
#include <mpfr.h>
#include <stdint.h>

#include "oracle.h"

#include "ddcore.h"

/* Default target relative error (aa_oracle_opts_t.target; the run's target
   is cx->target) and the smallest magnitude the fast path accepts (below it
   an element goes to MPFR, where the floors are harmless: AA_OR_MINMAG,
   ddcore.h). */
#define AA_OR_TARGET AA_ORACLE_TARGET_DEFAULT
/* The tightest target at which the tiled kernel runs its binary64 tier (fast.c, acc_tile64): from 2^-34 up
   (looser) it accumulates dQ, dK and dV in plain binary64 with an a-posteriori bound and redoes in double-double,
   with the row-by-row kernel, only the rows where an element misses the target. Tighter targets lose: a 64-term
   binary64 block leaves about 2^-50 of the sum of its terms' magnitudes, and at 2^-36 already 12% of the dQ rows
   and 26% of the key rows go to the redo (n = 2048, d = 128, BF16 normal inputs), 2% at 2^-32. */
#define AA_OR_TIER64_TARGET 0x1p-34
/* Escalation levels of the MPFR recompute: prec, 2 prec, 4 prec. */
#define AA_OR_LEVELS 3

/* aa_or_kappa, the double-double primitives, aa_or_exp_tab_t: ddcore.h. */

void aa_oracle_exp_tab_init(aa_or_exp_tab_t *tab);
/* exp(xh + xl) into (yh, yl) for n elements; relative error bound as
   documented above; results 0 for xh < -707 (then exp < 2^-1019). */
void aa_oracle_dd_exp(double *yh, double *yl, const double *xh, const double *xl, size_t n,
                      const aa_or_exp_tab_t *tab);
/* Rounding of the exact value to FP32/BF16 (RNE, subnormals, overflow to
   Inf): from an MPFR number (MPFR emulation of the target exponent range),
   and from a double (own integer-free arithmetic, used for interval ends). */
double aa_oracle_round_mpfr(mpfr_srcptr x, int bf16);
double aa_oracle_round_d(double x, int bf16);

/* ---- the run context shared by the two paths ---- */

enum { AA_OR_O = 0, AA_OR_LSE, AA_OR_DQ, AA_OR_DK, AA_OR_DV, AA_OR_DSINKS, AA_OR_NT };

/* Working state of one output tensor. */
typedef struct {
  aa_oracle_out_t *out;
  size_t n;
  double *rel;   /* per-element certified relative error (or -1 when uncertified) */
  uint8_t *todo; /* 1 while an element still has to be (re)computed in MPFR */
} aa_or_work_t;

/* MPFR row statistics of one head at one precision, for the column pass. */
typedef struct {
  int ready;
  mpfr_t *lse, *dd; /* [n_q] */
  double *e_lse, *e_d;
  uint8_t *empty;
} aa_or_stats_t;

typedef struct {
  const aa_problem_t *pb;
  const double *q, *k, *v, *dO;
  size_t n_q, n_k, d, heads, kvh, group, ns;
  double ks; /* dropout rescale (1 without dropout) */
  int prec;  /* base MPFR precision */
  int threads;
  aa_or_dd_t sig;    /* softmax scale as double-double */
  double sig_rel;    /* relative error of sig */
  double floor_unit; /* absolute floor per term covering underflow (see fast.c) */
  double target;     /* relative accuracy an element must be certified to (opts.target) */
  int tier64;        /* the tiled kernel's binary64 tier is on (target >= AA_OR_TIER64_TARGET; fast.c) */
  int mod;           /* the problem has score modifiers (softcap or ALiBi, problem.h) */
  double cap;        /* softcap (0: off) */
  aa_or_dd_t icap;   /* 1 / softcap as double-double, relative error <= 2^-105 */
  aa_or_exp_tab_t tab;
  aa_or_work_t w[AA_OR_NT];
  size_t n_recomputed, n_uncertified;
  /* fast-path double-double row statistics, used by the level-0 column recompute */
  double *lse_h, *lse_l, *e_lse, *d_h, *d_l, *e_d; /* [heads*n_q] */
  uint8_t *row_empty;
  aa_or_stats_t *stats[AA_OR_LEVELS]; /* [heads] per level, lazily filled */
} aa_or_ctx_t;

/* Settle one element from an MPFR value x with absolute error bound e:
   returns 1 and writes val/fp32/bf16/rel when the guarantees hold (or when
   final, with best effort and counting it uncertified), else 0. */
int aa_oracle_settle_mp(aa_or_ctx_t *cx, int t, size_t idx, mpfr_srcptr x, double e, int final);
/* Same from a double-double center (h, l) with bound e (fast path). */
int aa_oracle_settle_dd(aa_or_ctx_t *cx, int t, size_t idx, double h, double l, double e);
/* The LSE of query row r (h n_q + i) that has no term at all: -inf, exact. */
void aa_oracle_settle_empty_lse(aa_or_ctx_t *cx, size_t r);

/* Fast path: double-double forward and backward; marks unsettled elements todo.
   aa_oracle_fast_run is the tiled kernel (fast.c); aa_oracle_fast_run_rows
   the earlier row-by-row kernel (fast_rows.c), same bounds and the same
   per-element operations, kept as a second algorithm for tests and for
   side-by-side benchmarks. */
int aa_oracle_fast_run(aa_or_ctx_t *cx, aa_error_t *err);
int aa_oracle_fast_run_rows(aa_or_ctx_t *cx, aa_error_t *err);
/* The binary64 tier's fallback (fast_rows.c): the row-by-row double-double kernel on the n own rows in list of one
   phase (1: the query rows h n_q + i of dQ, 2: the keys g n_k + j of dK and dV), with the spans of fast_begin
   (spans_t, fast-common.h), after the tiled kernel left elements of theirs unsettled. 0 when out of memory. */
int aa_oracle_fast_rows_redo(aa_or_ctx_t *cx, const void *spans, int phase, const size_t *list, size_t n);
/* The rows kernel on the GPU (fast_cuda.c, with configure --with-cuda): the same bits as
   aa_oracle_fast_run_rows for the problems aa_oracle_cuda_supports takes;
   aa_oracle_cuda_devices counts the usable GPUs (0 without a driver). */
int aa_oracle_fast_run_cuda(aa_or_ctx_t *cx, aa_error_t *err);
int aa_oracle_cuda_supports(const aa_or_ctx_t *cx);
int aa_oracle_cuda_auto_ok(const aa_or_ctx_t *cx); /* device auto: the GPU pays (fast_cuda.c says why) */
int aa_oracle_cuda_devices(void);
/* TILED: the tiled kernel, with its binary64 tier at loose targets (AA_OR_TIER64_TARGET); TILED_DD: the same
   without the tier, all double-double at every target (for tests and side-by-side benchmarks). */
/* Bytes the tiled kernel's binary64 tier may hold for its pair store (fast.c, store_t; 512 MiB; 0: no store) and
   the size of its chunks (64 MiB, at least one group of heads); tests change them to compare the store, its
   chunks and the recomputing path bit for bit. */
extern size_t aa_oracle_store_max, aa_oracle_store_chunk;
enum { AA_OR_KERNEL_TILED = 0, AA_OR_KERNEL_ROWS = 1, AA_OR_KERNEL_TILED_DD = 2 };
/* aa_oracle_run with a choice of fast kernel (ignored on the mpfr path). */
/* The oracle of a varlen problem (pb->varlen_batch > 0, checked): every
   sequence through aa_oracle_run_kernel on its own, outputs packed
   (lib/oracle/varlen.c). */
int aa__oracle_run_varlen(aa_oracle_result_t *out, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                          const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, int kernel,
                          aa_error_t *err);
int aa_oracle_run_kernel(aa_oracle_result_t *out, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                         const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, int kernel,
                         aa_error_t *err);
/* MPFR engine: recompute every todo element (all of them on the mpfr path),
   escalating precision; use_dd_stats: level 0 of the column pass may take the
   fast path's row statistics. */
int aa_oracle_mp_resolve(aa_or_ctx_t *cx, int use_dd_stats, aa_error_t *err);
/* For tests: 1 and the plain double dot product when the span test proves it exact. */
int aa_oracle_dot_exact_check(double *out, const double *a, const double *b, size_t n);

#endif
