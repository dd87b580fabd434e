/* attnacc: the fast oracle path: tiled double-double attention forward and backward with certified per-element
 * bounds. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "oracle-impl.h"

/* Bound bookkeeping (u = 2^-53, u2 = u^2):
   - every double-double value c carries an absolute bound e on |c - exact|;
   - S = q.k: exact in plain double when the "span" test below holds, else a
     compensated dot product (bound kappa(d) sum|q k|); times sigma (a dd of
     relative error sig_rel) with a dd product (rel 5 u2);
   - x = S - LSE (or S - max): accurate dd sum, |err| <= 4 u2 (|S| + |LSE|);
   - P = exp(x): aa_oracle_dd_exp, relative AA_OR_EXP_REL + AA_OR_EXP_XREL |x|,
     and exp(x^)/exp(x) - 1 <= expm1(e_x) for the argument error e_x;
   - n-term sums sum_j c_j y_j (c dd, y a stored double: O, dQ, dK, dV) are
     accumulated per element in blocks, one block per tile of TB terms
     (blocked accumulation, see acc_tile): within a tile a TwoProduct/TwoSum
     chain from +0 (aa_or_kappa bound: kappa(m) sum_tile |c_hi y|, m <= TB
     terms) while one plain double gathers w = sum_j wt_j |y| with the
     per-term weight wt_j >= kappa(min(n, TB)) (1 + u) |c_hi| + e_c
     (tile_w), so that w >= kappa(m) sum |RN(c_hi y)| + sum e_c |y|; the
     tile partials are merged with the accurate dd addition, whose errors
     (about 7 u2 of the running sum per merge) are added to w. The element's
     bound is w (1 + (TB + 2K + 2) 2^-52) (1 + (n+2) 2^-52) for K merges,
     plus floor_unit (n+1) for anything below the normal range (flushed
     P < 2^-1019, subnormal low words). This is about
     (kappa(TB) + 7 K u2) sum |terms| (~2^-92 at n = 32768) where one chain
     over all n terms gives kappa(n) ~ 4 n^2 u2 (~2^-74). (The row-by-row
     kernel, fast_rows.c, keeps the single chain and a = sum |RN(c_hi y)|
     and b = sum e_c |y| apart, bound b (1 + (n+2) 2^-52) + kappa(n) a; n is
     known before the pass: the row range, or a count of the visible pairs
     of a key);
   - the factor 1.01 covers second-order products of relative errors.

   Tiling (flash-style). The work is cut into blocks of QB "own" rows (query
   rows for the forward and dQ, key rows for dK and dV) against tiles of TB
   "other" rows, aligned on multiples of TB so that the transposed copies
   (panels, see make_panels) of K, V, Q and dO serve as the right operand of
   a small GEMM for S = q.k and dP = dO.v. Each output element still receives
   its terms one at a time, in ascending order of the other index (and of the
   query head within a GQA group), through the same operations on its value
   words s and cc as in the row-by-row kernel (fast_rows.c), but the chain
   restarts from +0 at every tile (the tiles sit at multiples of TB of the
   other index, whatever the blocking or thread count) and the tile partials
   are merged in the same ascending order; the values therefore agree with
   the row kernel within the two certified bounds (not bit for bit), and
   the FP32/BF16 roundings are identical. A pair outside the mask or dropped gets
   coefficients (+0, +0, +0), which leaves every accumulator word unchanged
   bit for bit (s and cc are never -0: they start at +0 and RNE gives +0 for
   exact zero sums; y is finite). The plain-double S and dP of pairs that pass
   the span test are exact, so the GEMM's summation order does not matter;
   the other pairs take the compensated dot product in the reference order.
   Hence the a-priori bounds above hold, term counts n included, and results
   never depend on the own-row blocking or on the thread count (each element
   is owned by one block; a tile with no visible pair in the block is not
   merged at all, and the blocks are fixed by QB, not by the threads).
   Where the time goes (one head, n = 4096, d = 128, one thread, perf): the
   accumulation kernel ~55%, the GEMMs ~10%, exp ~5%, the rest per-pair
   bookkeeping; the row-by-row kernel spent ~38% in the accumulation, 21% in
   a scalar (unvectorised) exp and 17% in per-pair dot products. */

#include "fast-common.h"
#define U2 AA_OR_U2
#define TB 64 /* other rows per tile (panel width) */
#define QB 32 /* own rows per block */
#define GR 16 /* own rows per register block of the GEMM */
#define RB 4  /* own rows per register block of the accumulation kernel */
#define CW 8  /* columns per register block */
#define NP (QB * TB)

/* infl, finish, exp_eps, span, exact_pair, dot_comp (aa_oracle_dot_plain: dot.c): fast-common.h; the visible-key
 * interval: aa_problem_row_keys */

/* Transposed copies: panel p of head h holds rows p TB .. p TB + TB - 1 of
   X [heads][n][d], zero padded, as TB/8 contiguous sub-panels [d][8]
   (row p TB + 8 m + jj, column c at m 8 d + 8 c + jj), so that the GEMM
   streams each sub-panel sequentially. */
static double *make_panels(const double *X, size_t heads, size_t n, size_t d) {
  size_t np = (n + TB - 1) / TB;
  size_t bytes = (heads * np * d * TB * sizeof(double) + 64) / 64 * 64; /* 64-byte aligned: no split vector loads */
  double *P = aligned_alloc(64, bytes);
  if (P == NULL) return NULL;
  memset(P, 0, bytes);
  for (size_t h = 0; h < heads; h++)
    for (size_t j = 0; j < n; j++) {
      const double *x = X + (h * n + j) * d;
      double *o = P + (h * np + j / TB) * d * TB + (j % TB) / 8 * 8 * d + j % 8;
      for (size_t c = 0; c < d; c++)
        o[c * 8] = x[c];
    }
  return P;
}

/* T[i TB + jj] = sum_c A[i d + c] X_jj[c] for i < na, jj < TB (X a panel) (plain
   double: exact for the pairs that pass the span test, in any order). The
   GR x 8 accumulators are GCC vectors so that they stay in registers; one
   panel load from L3 serves QB rows (the sub-panel stays in L1 for the
   second group), which keeps the GEMM off the L3 bandwidth limit. */
typedef double v8d_t __attribute__((vector_size(64), aligned(8), may_alias));
TC static void gemm_tile(double *restrict T, const double *restrict A, size_t na, const double *restrict XT,
                         size_t d) {
  for (size_t j0 = 0; j0 < TB; j0 += 8) {
    const double *X = XT + j0 * d; /* 8 d doubles, in L1 for the second group of rows */
    for (size_t i0 = 0; i0 < na; i0 += GR) {
      const double *a[GR];
      for (size_t k = 0; k < GR; k++)
        a[k] = A + (i0 + k < na ? i0 + k : i0) * d; /* padding rows: not stored */
      const v8d_t z = {0, 0, 0, 0, 0, 0, 0, 0};
      v8d_t t[GR];
      for (size_t k = 0; k < GR; k++)
        t[k] = z;
      for (size_t c = 0; c < d; c++) {
        v8d_t x = *(const v8d_t *)(X + 8 * c);
#pragma GCC unroll 16
        for (size_t k = 0; k < GR; k++)
          t[k] += a[k][c] * x;
      }
      for (size_t k = 0; k < GR && i0 + k < na; k++)
        *(v8d_t *)(T + (i0 + k) * TB + j0) = t[k];
    }
  }
}

/* Merge of a tile partial (s + cc, bound word b) into the element's running
   sum R = (A[0], A[ld]) and bound word W = A[3 ld] (see "Blocked
   accumulation" above acc_tile): R <- dd_add(R, TwoSum(s, cc)), W <- W +
   (b + u2 (3 |R'.hi| + 2 |R.hi| + 2 |T.hi|) (1 + 2^-49)). */
static inline void merge_tile(double *A, size_t ld, double s, double cc, double b) {
  aa_or_dd_t R = {A[0], A[ld]}, T = aa_or_two_sum(s, cc), N = aa_or_dd_add(R, T);
  A[0] = N.hi;
  A[ld] = N.lo;
  A[3 * ld] += b + (3 * fabs(N.hi) + 2 * (fabs(R.hi) + fabs(T.hi))) * (U2 * (1 + 0x1p-49));
}

/* Accumulation kernel: for own rows i < nrows (a multiple of RB, padding
   rows have zero coefficients) and columns c < d,
   acc_i[c] <- acc_i[c] + sum_{t < nt} (ch + cl)[i TB + t] Y[t d + c], the
   tile sum in ascending t, then merged (see "Blocked accumulation" below)
   (layout acc[(i 4 + k) ld + c]: k = 0 s, 1 cc, 3 w; k = 2 is unused). s
   and cc go through exactly the operations of the row-by-row kernel
   (TwoProduct, TwoSum, error terms in cc); RB x CW of them stay in
   registers while the Y rows stream through.
   The two bound words of the row-by-row kernel, a = sum |RN(ch y)| (times
   kappa(n)) and b = sum ec |y|, are merged into one: with a per-term weight
   wt >= kappa(n) (1 + u) |ch| + ec (see tile_w), w_i[c] += wt |y| bounds
   kappa(n) a + b from above, one FMA per term and element instead of an
   absolute value, an addition and an FMA (14 -> 12 vector operations per
   term); finish() then gets a = 0, b = wfin(w).
   Blocked accumulation. The registers start at +0 for every call (one tile
   of nt <= TB terms), and the tile partial T = TwoSum(s, cc) (exact: the
   real s + cc), whose error against the exact tile sum is at most the
   tile's weight sum b (kappa(m) with m <= TB terms, kappa increasing),
   is merged (merge_tile) into the element's running sum R (acc words 0, 1,
   a normalised dd) by R' = dd_add(R, T) (JMP 2017 alg. 6):
   |R' - (R + T)| <= 3 u2 |R + T| + 2 u2 (|R| + |T|)
                  <= u2 (3 |R'.hi| + 2 |R.hi| + 2 |T.hi|) (1 + 2^-49),
   since |x| <= |x.hi| (1 + u) for normalised pairs, |R + T| <= |R'| (1 +
   4 u2), and the plain-double evaluation and the hi words add at most 8
   relative errors of u each (8 u = 2^-50 < 2^-49). Additions are exact
   on underflow, so no floor is needed for the merge. The bound word (acc word 3) gets
   b plus that merge error; the total over the K merges bounds the value's
   error, and each term of it passes at most TB + 2K roundings of positive
   plain-double sums, covered by infl(TB + 2K) in wfin(). */
TC static void acc_tile(double *restrict acc, size_t ld, const double *restrict Y, size_t d,
                        const double *restrict ch, const double *restrict cl, const double *restrict wt, size_t nt,
                        size_t nrows) {
  for (size_t i0 = 0; i0 < nrows; i0 += RB) {
    double *A = acc + i0 * 4 * ld;
    const double *H = ch + i0 * TB, *L = cl + i0 * TB, *E = wt + i0 * TB;
    size_t c0 = 0;
    for (; c0 + CW <= d; c0 += CW) {
      double s[RB][CW], cc[RB][CW], b[RB][CW];
      for (int i = 0; i < RB; i++)
        for (int c = 0; c < CW; c++)
          s[i][c] = cc[i][c] = b[i][c] = 0; /* the tile partial starts at +0 */
      for (size_t t = 0; t < nt; t++) {
        const double *restrict y = Y + t * d + c0;
#pragma GCC unroll 4
        for (int i = 0; i < RB; i++) {
          const double xh = H[i * TB + t], xl = L[i * TB + t], ex = E[i * TB + t];
#pragma omp simd
          for (int c = 0; c < CW; c++) {
            double yy = y[c], p = xh * yy, e = fma(xh, yy, -p), l = xl * yy;
            double sv = s[i][c], ss = sv + p, bv = ss - sv, tt = (sv - (ss - bv)) + (p - bv);
            s[i][c] = ss;
            cc[i][c] += (tt + e) + l;
            b[i][c] += ex * fabs(yy);
          }
        }
      }
      for (int i = 0; i < RB; i++)
#pragma omp simd
        for (int c = 0; c < CW; c++)
          merge_tile(A + (i * 4) * ld + c0 + c, ld, s[i][c], cc[i][c], b[i][c]);
    }
    if (c0 < d)
      for (int i = 0; i < RB; i++) {
        double s[CW], cc[CW], b[CW];
        for (size_t c = c0; c < d; c++)
          s[c - c0] = cc[c - c0] = b[c - c0] = 0;
        for (size_t t = 0; t < nt; t++) {
          const double *restrict y = Y + t * d;
          const double xh = H[i * TB + t], xl = L[i * TB + t], ex = E[i * TB + t];
          for (size_t c = c0; c < d; c++) {
            double yy = y[c], p = xh * yy, e = fma(xh, yy, -p), l = xl * yy;
            double sv = s[c - c0], ss = sv + p, bv = ss - sv, tt = (sv - (ss - bv)) + (p - bv);
            s[c - c0] = ss;
            cc[c - c0] += (tt + e) + l;
            b[c - c0] += ex * fabs(yy);
          }
        }
        for (size_t c = c0; c < d; c++)
          merge_tile(A + (i * 4) * ld + c, ld, s[c - c0], cc[c - c0], b[c - c0]);
      }
  }
}

/* The binary64 tier's accumulation kernel (cx->tier64, dQ, dK and dV only): as acc_tile, but the tile partial is
   one plain binary64 FMA chain over the coefficients' hi words, s_t = RN(s_{t-1} + ch_t y_t) in ascending t from
   +0, and the low words cl are dropped. Bound, a posteriori: each FMA rounds once (the product is exact inside
   it), by at most u |s_t| (u = 2^-53, round to nearest: half an ulp of the result), so the chain is off the
   exact sum of ch y by at most u sum_t |s_t|, which a third word a gathers (|s_t| added in plain double: a
   computed is at most infl(TB) short of the exact sum over <= TB terms); the dropped |cl y| <= u |ch y| (cl is
   the low word of a normalised pair) and the coefficients' own errors ec |y| go to the bound word with the
   weights of tile_w built on kap64 = u (1 + 2^-52). The tile's bound u a infl(TB) (1 + 2^-52) + b then plays
   the part of b in merge_tile, as the kappa bound does in acc_tile; underflowing partial sums add at most
   2^-1075 each, inside the floor_unit (n + 1) of finish(). The merge (cc = +0: TwoSum(s, 0) = (s, 0) exactly) and
   the inflation wfin() are acc_tile's. The a-priori bound gamma_m sum |ch y| would be about sqrt(m) times
   larger on terms of mixed signs, and at a 2^-32 target sends 5 to 10 times more rows to the redo. Per term and
   element: 2 FMAs, an addition and two absolute values where acc_tile spends 12 operations; RB64 x CW words of
   each kind stay in registers. The order of every operation is fixed by the tile, so the bits do not depend on
   the blocking or the thread count. */
#define RB64 4
static inline double tile64_bound(double a, double b) {
  return a * (0x1p-53 * (1 + 0x1p-52)) * infl(TB) + b;
}
TC static void acc_tile64(double *restrict acc, size_t ld, const double *restrict Y, size_t d,
                          const double *restrict ch, const double *restrict wt, size_t nt, size_t nrows) {
  nrows = (nrows + RB64 - 1) / RB64 * RB64; /* <= QB: padding rows accumulate into unread rows of acc */
  for (size_t i0 = 0; i0 < nrows; i0 += RB64) {
    double *A = acc + i0 * 4 * ld;
    const double *H = ch + i0 * TB, *E = wt + i0 * TB;
    size_t c0 = 0;
    for (; c0 + CW <= d; c0 += CW) {
      double s[RB64][CW], a[RB64][CW], b[RB64][CW];
      for (int i = 0; i < RB64; i++)
        for (int c = 0; c < CW; c++)
          s[i][c] = a[i][c] = b[i][c] = 0; /* the tile partial starts at +0 */
      for (size_t t = 0; t < nt; t++) {
        const double *restrict y = Y + t * d + c0;
#pragma GCC unroll 8
        for (int i = 0; i < RB64; i++) {
          const double xh = H[i * TB + t], ex = E[i * TB + t];
#pragma omp simd
          for (int c = 0; c < CW; c++) {
            double sv = fma(xh, y[c], s[i][c]);
            s[i][c] = sv;
            a[i][c] += fabs(sv);
            b[i][c] = fma(ex, fabs(y[c]), b[i][c]);
          }
        }
      }
      for (int i = 0; i < RB64; i++)
#pragma omp simd
        for (int c = 0; c < CW; c++)
          merge_tile(A + (i * 4) * ld + c0 + c, ld, s[i][c], 0, tile64_bound(a[i][c], b[i][c]));
    }
    if (c0 < d)
      for (int i = 0; i < RB64; i++) {
        double s[CW], a[CW], b[CW];
        for (size_t c = c0; c < d; c++)
          s[c - c0] = a[c - c0] = b[c - c0] = 0;
        for (size_t t = 0; t < nt; t++) {
          const double *restrict y = Y + t * d;
          const double xh = H[i * TB + t], ex = E[i * TB + t];
          for (size_t c = c0; c < d; c++) {
            double sv = fma(xh, y[c], s[c - c0]);
            s[c - c0] = sv;
            a[c - c0] += fabs(sv);
            b[c - c0] = fma(ex, fabs(y[c]), b[c - c0]);
          }
        }
        for (size_t c = c0; c < d; c++)
          merge_tile(A + (i * 4) * ld + c, ld, s[c - c0], 0, tile64_bound(a[c - c0], b[c - c0]));
      }
  }
}

/* Merged bound weights of the accumulation terms, rows i < na of a tile:
   wt = (kap_i |ch| + ec) (1 + 2^-50) with kap_i = kappa(min(n_i, TB))
   (1 + 2^-52) for the number n_i of terms the element receives (or an upper
   bound: kappa is increasing): one tile holds at most min(n_i, TB) of them,
   and the chain restarts at every tile (blocked accumulation). The factor
   1 + 2^-50 covers the three roundings of wt, and
   kap_i covers |RN(ch y)| <= |ch y| (1 + u); the roundings of the sum
   w = sum wt |y| are covered by infl(n) in finish(), as for b before.
   Masked terms (ch = ec = +0) get wt = +0 and leave w unchanged. */
TC static void tile_w(double *restrict wt, const double *restrict ch, const double *restrict ec,
                      const double *restrict kap, size_t na) {
  for (size_t i = 0; i < na; i++) {
    const double k = kap[i];
#pragma omp simd
    for (size_t t = 0; t < TB; t++)
      wt[i * TB + t] = (k * fabs(ch[i * TB + t]) + ec[i * TB + t]) * (1 + 0x1p-50);
  }
}

static inline double kap_of(size_t n) {
  return aa_or_kappa(n) * (1 + 0x1p-52);
}
/* weight factor for an element with n terms in all: a tile holds at most min(n, TB) of them */
static inline double kap_tile(size_t n) {
  return kap_of(n < TB ? n : TB);
}
/* The binary64 tier's weight factor (acc_tile64): u = 2^-53 for the dropped low word, rounded upward (the weight's
   own roundings are tile_w's factor 1 + 2^-50). */
static inline double kap64_tile(size_t n) {
  (void)n; /* the chain's own error is bounded a posteriori, whatever the term count */
  return 0x1p-53 * (1 + 0x1p-52);
}
/* The tier's factor where it is on, else the double-double one. */
static inline double kap_acc(const aa_or_ctx_t *cx, size_t n) {
  return cx->tier64 ? kap64_tile(n) : kap_tile(n);
}
/* One tile's accumulation of the backward (dQ, dK, dV): the binary64 tier where it is on, else double-double. */
static inline void acc_bwd(const aa_or_ctx_t *cx, double *acc, size_t ld, const double *Y, size_t d, const double *ch,
                           const double *cl, const double *wt, size_t nt, size_t nrows) {
  if (cx->tier64)
    acc_tile64(acc, ld, Y, d, ch, wt, nt, nrows);
  else
    acc_tile(acc, ld, Y, d, ch, cl, wt, nt, nrows);
}
/* bound word of a blocked accumulation after ncall tile merges (see acc_tile) */
static inline double wfin(double w, size_t ncall) {
  return w * infl(TB + 2 * ncall);
}

/* Per-thread workspace. Pair arrays are [QB][TB] (index i TB + jj). */
typedef struct {
  double *T, *U;                       /* plain S and dP dots from the GEMMs */
  double *th, *tl, *et, *uh, *ul, *eu; /* raw dots as dd with bounds */
  double *sh, *sl, *eS, *xh, *xl, *ex, *ph, *pl, *epsP, *eP, *ch, *cl, *ec, *ph2, *pl2, *eP2;
  double *Lh, *Ll, *eL, *Dh, *Dl, *eD; /* row statistics of the pair's query row */
  double *wt, *wt2;                    /* merged bound weights (acc_tile) */
  double *gh, *gl, *eg;                /* softcap derivative of each pair (score_mod) */
  uint8_t *vis, *kept;
  double *acc1, *acc2; /* [QB][4][ld] */
  size_t ld;
  double *rsh, *rsl, *res, *rxh, *rxl, *reh, *rel, *ree; /* forward: [QB][n_k + 1] */
  size_t rn;
  int ok;
} ws_t;

/* A thread's workspace for a phase (fast_kernel_t.ws_init): 0 when out of memory. */
static int ws_init(void *ws, const aa_or_ctx_t *cx, int phase) {
  ws_t *W = ws;
  size_t d = cx->d, nk = cx->n_k;
  memset(W, 0, sizeof *W);
  W->ok = 1;
  double **pv[] = {&W->T,  &W->U,  &W->th, &W->tl,  &W->et,  &W->uh,  &W->ul, &W->eu,   &W->sh,
                   &W->sl, &W->eS, &W->xh, &W->xl,  &W->ex,  &W->ph,  &W->pl, &W->epsP, &W->eP,
                   &W->ch, &W->cl, &W->ec, &W->ph2, &W->pl2, &W->eP2, &W->Lh, &W->Ll,   &W->eL,
                   &W->Dh, &W->Dl, &W->eD, &W->wt,  &W->wt2, &W->gh,  &W->gl, &W->eg};
  for (size_t i = 0; i < sizeof pv / sizeof pv[0]; i++)
    if ((*pv[i] = calloc(NP, sizeof(double))) == NULL) W->ok = 0;
  W->vis = calloc(NP, 1);
  W->kept = calloc(NP, 1);
  W->ld = d + 1;
  W->acc1 = calloc(QB * 4 * W->ld, sizeof(double));
  W->acc2 = calloc(QB * 4 * W->ld, sizeof(double));
  if (!W->vis || !W->kept || !W->acc1 || !W->acc2) W->ok = 0;
  if (phase == 0) { /* the forward's S rows */
    W->rn = nk + 1;
    double **rv[] = {&W->rsh, &W->rsl, &W->res, &W->rxh, &W->rxl, &W->reh, &W->rel, &W->ree};
    for (size_t i = 0; i < sizeof rv / sizeof rv[0]; i++)
      if ((*rv[i] = malloc(QB * W->rn * sizeof(double))) == NULL) W->ok = 0;
  }
  return W->ok;
}

static void ws_free(void *ws) {
  ws_t *W = ws;
  double *pv[] = {W->T,   W->U,   W->th,  W->tl,  W->et,   W->uh,  W->ul, W->eu,  W->sh,   W->sl,   W->eS,  W->xh,
                  W->xl,  W->ex,  W->ph,  W->pl,  W->epsP, W->eP,  W->ch, W->cl,  W->ec,   W->ph2,  W->pl2, W->eP2,
                  W->Lh,  W->Ll,  W->eL,  W->Dh,  W->Dl,   W->eD,  W->wt, W->wt2, W->acc1, W->acc2, W->rsh, W->rsl,
                  W->res, W->rxh, W->rxl, W->reh, W->rel,  W->ree, W->gh, W->gl,  W->eg};
  for (size_t i = 0; i < sizeof pv / sizeof pv[0]; i++)
    free(pv[i]);
  free(W->vis);
  free(W->kept);
}

/* The pair (own row i, other row jj) of a tile: the query row r and the key kk. */
typedef struct {
  size_t own0, oth0; /* first own / other global row (query row h n_q + i, or key g n_k + j) */
  int tr;            /* 0: own rows are queries, 1: own rows are keys */
  size_t na, nb;
} tile_t;

static inline void pair_rk(const tile_t *T, size_t i, size_t jj, size_t *r, size_t *kk) {
  if (T->tr) {
    *kk = T->own0 + i;
    *r = T->oth0 + jj;
  } else {
    *r = T->own0 + i;
    *kk = T->oth0 + jj;
  }
}

/* One side of a tile's raw dots: a pair's query-side row (q or dO) and key-side row (k or v) with their spans. */
typedef struct {
  const double *A, *B;   /* [rows][d]: query side, key side */
  const double *xa, *xb; /* spans of their rows */
  const int *la, *lb;    /* lowest set bits of their rows */
} dots_t;

/* Raw dots (h, l, e) of the pairs with use[t]: the GEMM value G where the span test proves it exact (for the whole
   tile when ex), else the compensated dot product in the reference order; zeros for the other pairs. */
static void tile_dots(const aa_or_ctx_t *cx, const tile_t *T, const dots_t *D, const uint8_t *use, const double *G,
                      int ex, double *h, double *l, double *e) {
  size_t d = cx->d, n = T->na * TB;
  memset(l, 0, n * sizeof(double));
  memset(e, 0, n * sizeof(double));
  if (ex) {
    for (size_t t = 0; t < n; t++)
      h[t] = use[t] ? G[t] : 0;
    return;
  }
  for (size_t i = 0; i < T->na; i++)
    for (size_t jj = 0; jj < TB; jj++) {
      size_t t = i * TB + jj, r, kk;
      h[t] = 0;
      if (!use[t]) continue;
      pair_rk(T, i, jj, &r, &kk);
      if (exact_pair(D->xa[r], D->la[r], D->xb[kk], D->lb[kk], d)) {
        h[t] = G[t];
      } else {
        aa_or_dd_t tt = dot_comp(D->A + r * d, D->B + kk * d, d, &e[t]);
        h[t] = tt.hi;
        l[t] = tt.lo;
      }
    }
}

/* Raw dots of the visible pairs (q.k, tile_dots); with want_dp also dO.v for the kept pairs. exS, exP: the span
   test passes for the whole tile (maximum spans and minimum low bits over its rows pass it, hence every pair
   does), no per-pair test. */
static void tile_raw(const aa_or_ctx_t *cx, const spans_t *sp, ws_t *W, const tile_t *T, int want_dp, int exS,
                     int exP) {
  const aa_problem_t *pb = cx->pb;
  size_t n = T->na * TB;
  dots_t qk = {cx->q, cx->k, sp->xq, sp->xk, sp->lq, sp->lk};
  tile_dots(cx, T, &qk, W->vis, W->T, exS, W->th, W->tl, W->et);
  if (!want_dp) return;
  if (pb->keep == NULL) {
    memcpy(W->kept, W->vis, n);
  } else {
    for (size_t i = 0; i < T->na; i++)
      for (size_t jj = 0; jj < TB; jj++) {
        size_t t = i * TB + jj, r, kk;
        pair_rk(T, i, jj, &r, &kk);
        W->kept[t] = W->vis[t] && pb->keep[r * cx->n_k + kk % cx->n_k] != 0;
      }
  }
  dots_t dv = {cx->dO, cx->v, sp->xdo, sp->xv, sp->ldo, sp->lv};
  tile_dots(cx, T, &dv, W->kept, W->U, exP, W->uh, W->ul, W->eu);
}

/* Largest span and smallest low bit over n rows (for the tile-level span test). */
static void span_agg(double *sx, int *lb, const double *xs, const int *ls, size_t n) {
  double m = 0;
  int l = INT_MAX;
  for (size_t i = 0; i < n; i++)
    if (xs[i] != 0) {
      m = fmax(m, xs[i]);
      if (ls[i] < l) l = ls[i];
    }
  *sx = m;
  *lb = m == 0 ? 0 : l;
}

/* S = sigma (th + tl) with its bound, as block_s of the reference kernel. */
TC static void tile_s(double *restrict sh, double *restrict sl, double *restrict eS, const double *restrict th,
                      const double *restrict tl, const double *restrict et, size_t n, aa_or_dd_t sig,
                      double sig_rel) {
#pragma omp simd
  for (size_t t = 0; t < n; t++) {
    aa_or_dd_t tt = {th[t], tl[t]};
    aa_or_dd_t S1 = aa_or_dd_mul_d(sig, tt.hi), S2 = aa_or_dd_mul(sig, tt);
    aa_or_dd_t S = tt.lo == 0 ? S1 : S2;
    sh[t] = S.hi;
    sl[t] = S.lo;
    eS[t] = 1.01 * (sig.hi * et[t] + (sig_rel + 5 * U2) * fabs(S.hi));
  }
}

/* Score modifiers of problem.h on the visible pairs of a tile (score_mod,
   fast-common.h), after tile_s; the softcap derivative goes to gh, gl, eg. */
static void tile_mod(const aa_or_ctx_t *cx, ws_t *W, const tile_t *T) {
  if (!cx->mod) return;
  for (size_t i = 0; i < T->na; i++)
    for (size_t jj = 0; jj < TB; jj++) {
      size_t t = i * TB + jj, r, kk;
      if (!W->vis[t]) continue;
      pair_rk(T, i, jj, &r, &kk);
      aa_or_dd_t S = {W->sh[t], W->sl[t]}, g;
      score_mod(cx, r / cx->n_q, r % cx->n_q, kk % cx->n_k, &S, &W->eS[t], &g, &W->eg[t]);
      W->sh[t] = S.hi;
      W->sl[t] = S.lo;
      W->gh[t] = g.hi;
      W->gl[t] = g.lo;
    }
}

/* x = S - LSE and its bound */
TC static void tile_x(ws_t *restrict W, size_t n) {
  double *restrict xh = W->xh, *restrict xl = W->xl, *restrict ex = W->ex;
  const double *restrict sh = W->sh, *restrict sl = W->sl, *restrict eS = W->eS, *restrict Lh = W->Lh,
                         *restrict Ll = W->Ll, *restrict eL = W->eL;
#pragma omp simd
  for (size_t t = 0; t < n; t++) {
    aa_or_dd_t S = {sh[t], sl[t]}, L = {Lh[t], Ll[t]};
    aa_or_dd_t x = aa_or_dd_add(S, aa_or_dd_neg(L));
    xh[t] = x.hi;
    xl[t] = x.lo;
    ex[t] = eS[t] + eL[t] + 4 * U2 * (fabs(S.hi) + fabs(L.hi));
  }
}

/* relative error of the computed exp, fast case (ex <= 2^-30) of exp_eps */
TC static void tile_eps(double *restrict epsP, const double *restrict xh, const double *restrict ex, size_t n) {
#pragma omp simd
  for (size_t t = 0; t < n; t++) {
    double rel = xh[t] <= AA_OR_EXP_MAXARG ? AA_OR_EXP_REL + AA_OR_EXP_XREL * fabs(xh[t]) : INFINITY;
    epsP[t] = (rel + ex[t]) * (1 + 0x1p-29);
  }
}

/* eP, dP, dS and their bounds, as block_pairs of the reference kernel */
TC static void tile_ds(ws_t *restrict W, size_t n, double ks) {
  const double *restrict ph = W->ph, *restrict pl = W->pl, *restrict epsP = W->epsP, *restrict uh = W->uh,
                         *restrict ul = W->ul, *restrict eu = W->eu, *restrict Dh = W->Dh, *restrict Dl = W->Dl,
                         *restrict eD = W->eD;
  double *restrict eP = W->eP, *restrict ch = W->ch, *restrict cl = W->cl, *restrict ec = W->ec;
  const uint8_t *restrict kept = W->kept;
  const int scaled = ks != 1.0;
#pragma omp simd
  for (size_t t = 0; t < n; t++) {
    eP[t] = 1.01 * epsP[t] * ph[t];
    aa_or_dd_t dP = {uh[t], ul[t]}, dPs = aa_or_dd_mul(dP, (aa_or_dd_t){ks, 0}),
               dPu = aa_or_fast_two_sum(dP.hi, dP.lo);
    double edp = scaled ? 1.01 * (ks * eu[t] + 5 * U2 * fabs(dPs.hi)) : eu[t];
    dP = scaled ? dPs : dPu;
    dP.hi = kept[t] ? dP.hi : 0;
    dP.lo = kept[t] ? dP.lo : 0;
    edp = kept[t] ? edp : 0;
    aa_or_dd_t D = {Dh[t], Dl[t]};
    aa_or_dd_t df = aa_or_dd_add(dP, aa_or_dd_neg(D));
    double ediff = edp + eD[t] + 4 * U2 * (fabs(dP.hi) + fabs(D.hi));
    aa_or_dd_t P = {ph[t], pl[t]};
    aa_or_dd_t dS = aa_or_dd_mul(P, df);
    ch[t] = dS.hi;
    cl[t] = dS.lo;
    ec[t] = 1.01 * (P.hi * ediff + epsP[t] * P.hi * (fabs(df.hi) + ediff)) + 5 * U2 * fabs(dS.hi);
  }
}

/* masked pairs: coefficients +0 (no-ops in acc_tile); dV only for kept pairs */
TC static void tile_mask(ws_t *restrict W, size_t n) {
  const uint8_t *restrict vis = W->vis, *restrict kept = W->kept;
  double *restrict ch = W->ch, *restrict cl = W->cl, *restrict ec = W->ec, *restrict ph2 = W->ph2,
                   *restrict pl2 = W->pl2, *restrict eP2 = W->eP2;
  const double *restrict ph = W->ph, *restrict pl = W->pl, *restrict eP = W->eP;
#pragma omp simd
  for (size_t t = 0; t < n; t++) {
    int v = vis[t], k = kept[t]; /* kept implies visible */
    ch[t] = v ? ch[t] : 0;
    cl[t] = v ? cl[t] : 0;
    ec[t] = v ? ec[t] : 0;
    ph2[t] = k ? ph[t] : 0;
    pl2[t] = k ? pl[t] : 0;
    eP2[t] = k ? eP[t] : 0;
  }
}

/* All pair quantities of a backward tile (T, U and vis filled). */
static void tile_bwd(const aa_or_ctx_t *cx, const spans_t *sp, ws_t *W, const tile_t *T, int exS, int exP) {
  size_t n = T->na * TB;
  tile_raw(cx, sp, W, T, 1, exS, exP);
  tile_s(W->sh, W->sl, W->eS, W->th, W->tl, W->et, n, cx->sig, cx->sig_rel);
  tile_mod(cx, W, T);
  /* row statistics of each pair's query row (values of invisible pairs are masked below) */
  for (size_t i = 0; i < T->na; i++)
    for (size_t jj = 0; jj < TB; jj++) {
      size_t t = i * TB + jj, r = T->tr ? T->oth0 + (jj < T->nb ? jj : 0) : T->own0 + i;
      W->Lh[t] = cx->lse_h[r];
      W->Ll[t] = cx->lse_l[r];
      W->eL[t] = cx->e_lse[r];
      W->Dh[t] = cx->d_h[r];
      W->Dl[t] = cx->d_l[r];
      W->eD[t] = cx->e_d[r];
    }
  tile_x(W, n);
  aa_oracle_dd_exp(W->ph, W->pl, W->xh, W->xl, n, &cx->tab);
  tile_eps(W->epsP, W->xh, W->ex, n);
  for (size_t t = 0; t < n; t++)
    if (W->vis[t] && !(W->ex[t] <= 0x1p-30)) W->epsP[t] = exp_eps(W->xh[t], W->ex[t]);
  tile_ds(W, n, cx->ks);
  if (cx->cap > 0)
    for (size_t t = 0; t < n; t++)
      if (W->vis[t]) ds_times_g(&W->ch[t], &W->cl[t], &W->ec[t], (aa_or_dd_t){W->gh[t], W->gl[t]}, W->eg[t]);
  tile_mask(W, n);
}

static void acc_clear(ws_t *W) {
  memset(W->acc1, 0, QB * 4 * W->ld * sizeof(double));
  memset(W->acc2, 0, QB * 4 * W->ld * sizeof(double));
}

static void zero_rows(double *v, size_t na) { /* padding rows of a pair array */
  if (na < QB) memset(v + na * TB, 0, (QB - na) * TB * sizeof(double));
}

typedef struct {
  const double *KT, *VT, *QT, *DT; /* panels */
  size_t npk, npq;                 /* panels per head */
  double *ks, *vs, *qs, *os;       /* largest span over the rows of each panel (k, v, q, dO) */
  int *kl, *vl, *ql, *ol;          /* smallest low bit over the rows of each panel */
} panels_t;

/* the span test for every pair of a tile, from aggregates of both sides */
static inline int tile_exact(double sa, int la, double sb, int lb, size_t d) {
  return exact_pair(sa, la, sb, lb, d);
}

/* P = E / Z (E times the double-double 1/Z) and its bound, for a run of keys */
TC static void tile_p(double *restrict ch, double *restrict cl, double *restrict ec, const double *restrict eh,
                      const double *restrict el, const double *restrict ee, size_t n, aa_or_dd_t iz, double pz) {
#pragma omp simd
  for (size_t t = 0; t < n; t++) {
    aa_or_dd_t P = aa_or_dd_mul((aa_or_dd_t){eh[t], el[t]}, iz);
    ch[t] = P.hi;
    cl[t] = P.lo;
    ec[t] = 1.01 * (ee[t] + pz + 5 * U2) * P.hi;
  }
}

/* A forward block: the query rows r0 .. r0 + na - 1 (i0 .. i0 + na - 1 of head h), their visible keys, and what
   each pass of fwd_block hands to the next. */
typedef struct {
  size_t h, g, i0, na, r0;
  size_t lo[QB], hi[QB]; /* visible keys [lo, hi) of each row */
  size_t ulo, uhi;       /* the union of those of the rows with a key (none: ulo >= uhi) */
  int act[QB];           /* the row has a visible key */
  size_t nkept[QB];      /* terms of the row's O */
  aa_or_dd_t iz[QB];     /* 1/Z */
  double pz[QB];         /* the relative bound 1/Z adds to P (row_norm) */
} fblk_t;

/* The key ranges of the block's rows; the rows without any term settled at once (row_empty_fwd). */
static void fwd_rows(aa_or_ctx_t *cx, fblk_t *F) {
  F->ulo = SIZE_MAX;
  F->uhi = 0;
  for (size_t i = 0; i < F->na; i++) {
    size_t r = F->r0 + i;
    aa_problem_row_keys(cx->pb, F->i0 + i, &F->lo[i], &F->hi[i]);
    size_t m = F->hi[i] - F->lo[i];
    F->act[i] = m > 0;
    F->nkept[i] = 0;
    cx->row_empty[r] = m + cx->ns == 0;
    if (m + cx->ns == 0) { /* as the reference kernel */
      row_empty_fwd(cx, r);
      continue;
    }
    if (F->act[i]) {
      if (F->lo[i] < F->ulo) F->ulo = F->lo[i];
      if (F->hi[i] > F->uhi) F->uhi = F->hi[i];
    }
  }
}

/* Pass 1: the S rows of the block into W->rsh, rsl, res (row i at i W->rn), tile by tile of keys. */
static void fwd_scores(const aa_or_ctx_t *cx, const spans_t *sp, const panels_t *PN, ws_t *W, const fblk_t *F) {
  size_t g = F->g, d = cx->d, na = F->na, r0 = F->r0;
  tile_t T = {r0, g * cx->n_k, 0, na, TB};
  double qsx;
  int qlb;
  span_agg(&qsx, &qlb, sp->xq + r0, sp->lq + r0, na);
  for (size_t p = F->ulo / TB; F->ulo < F->uhi && p * TB < F->uhi; p++) {
    size_t j0 = p * TB;
    T.oth0 = g * cx->n_k + j0;
    T.nb = cx->n_k - j0 < TB ? cx->n_k - j0 : TB;
    int any = 0;
    for (size_t i = 0; i < na; i++)
      for (size_t jj = 0; jj < TB; jj++) {
        size_t j = j0 + jj;
        W->vis[i * TB + jj] = F->act[i] && j >= F->lo[i] && j < F->hi[i];
        any |= W->vis[i * TB + jj];
      }
    if (!any) continue;
    gemm_tile(W->T, cx->q + r0 * d, na, PN->KT + (g * PN->npk + p) * d * TB, d);
    tile_raw(cx, sp, W, &T, 0, tile_exact(qsx, qlb, PN->ks[g * PN->npk + p], PN->kl[g * PN->npk + p], d), 0);
    tile_s(W->sh, W->sl, W->eS, W->th, W->tl, W->et, na * TB, cx->sig, cx->sig_rel);
    tile_mod(cx, W, &T);
    for (size_t i = 0; i < na; i++)
      for (size_t jj = 0; jj < TB; jj++) {
        size_t t = i * TB + jj, j = j0 + jj;
        if (!W->vis[t]) continue;
        W->rsh[i * W->rn + j - F->lo[i]] = W->sh[t];
        W->rsl[i * W->rn + j - F->lo[i]] = W->sl[t];
        W->res[i * W->rn + j - F->lo[i]] = W->eS[t];
      }
  }
}

/* Pass 2 per row, as the reference kernel (row_norm, fast-common.h): E = exp(S - M), Z, LSE, 1/Z. */
static void fwd_norm(aa_or_ctx_t *cx, ws_t *W, fblk_t *F, mpfr_t mz, mpfr_t ml) {
  for (size_t i = 0; i < F->na; i++) {
    size_t m = F->hi[i] - F->lo[i], o = i * W->rn;
    if (m + cx->ns == 0) continue;
    srow_t R = {W->rsh + o, W->rsl + o, W->res + o, W->rxh + o, W->rxl + o, W->reh + o, W->rel + o, W->ree + o};
    F->iz[i] = row_norm(cx, F->h, F->r0 + i, m, &R, mz, ml, &F->pz[i]);
  }
}

/* Pass 3: P = E / Z, O = ks sum_kept P v (at most m terms per element), tile by tile of keys; then O settled and
   D per row (o_and_d). */
static void fwd_out(aa_or_ctx_t *cx, ws_t *W, fblk_t *F) {
  const aa_problem_t *pb = cx->pb;
  size_t d = cx->d, na = F->na;
  double kap[QB];
  for (size_t i = 0; i < na; i++)
    kap[i] = kap_tile(F->hi[i] - F->lo[i]);
  acc_clear(W);
  size_t nrows = (na + RB - 1) / RB * RB;
  zero_rows(W->ch, na);
  zero_rows(W->cl, na);
  zero_rows(W->wt, na);
  zero_rows(W->wt2, na);
  const double *V = cx->v + F->g * cx->n_k * d;
  size_t ncall = 0;
  for (size_t p = F->ulo / TB; F->ulo < F->uhi && p * TB < F->uhi; p++) {
    size_t j0 = p * TB, nb = cx->n_k - j0 < TB ? cx->n_k - j0 : TB;
    int any = 0;
    memset(W->ch, 0, na * TB * sizeof(double));
    memset(W->cl, 0, na * TB * sizeof(double));
    memset(W->ec, 0, na * TB * sizeof(double));
    for (size_t i = 0; i < na; i++) {
      size_t a = F->lo[i] > j0 ? F->lo[i] : j0, b = F->hi[i] < j0 + TB ? F->hi[i] : j0 + TB, o = i * W->rn;
      if (!F->act[i] || a >= b) continue;
      any = 1;
      tile_p(W->ch + i * TB + (a - j0), W->cl + i * TB + (a - j0), W->ec + i * TB + (a - j0),
             W->reh + o + (a - F->lo[i]), W->rel + o + (a - F->lo[i]), W->ree + o + (a - F->lo[i]), b - a, F->iz[i],
             F->pz[i]);
      if (pb->keep == NULL) {
        F->nkept[i] += b - a;
        continue;
      }
      for (size_t j = a; j < b; j++) { /* dropped: coefficients +0 */
        size_t t = i * TB + (j - j0);
        if (pb->keep[(F->r0 + i) * cx->n_k + j] != 0) {
          F->nkept[i]++;
        } else {
          W->ch[t] = W->cl[t] = W->ec[t] = 0;
        }
      }
    }
    if (!any) continue;
    tile_w(W->wt, W->ch, W->ec, kap, na);
    acc_tile(W->acc1, W->ld, V + j0 * d, d, W->ch, W->cl, W->wt, nb, nrows);
    ncall++;
  }
  double bscale = wfin(1.0, ncall); /* b wfin(1, ncall) = wfin(b, ncall) */
  for (size_t i = 0; i < na; i++) {
    if (F->hi[i] - F->lo[i] + cx->ns == 0) continue;
    const double *s = W->acc1 + (i * 4) * W->ld, *cc = s + W->ld, *b = s + 3 * W->ld; /* a (k = 2) unused */
    o_and_d(cx, F->r0 + i, s, cc, NULL, b, bscale, F->nkept[i]);
  }
}

/* Forward of the query rows r0 .. r0 + na - 1 of head h: LSE, O, D. */
static void fwd_block(aa_or_ctx_t *cx, const spans_t *sp, const panels_t *PN, ws_t *W, size_t h, size_t i0, size_t na,
                      mpfr_t mz, mpfr_t ml) {
  fblk_t F;
  F.h = h;
  F.g = h / cx->group;
  F.i0 = i0;
  F.na = na;
  F.r0 = h * cx->n_q + i0;
  fwd_rows(cx, &F);
  fwd_scores(cx, sp, PN, W, &F);
  fwd_norm(cx, W, &F, mz, ml);
  fwd_out(cx, W, &F);
}

/* The binary64 tier's pair store. Phases 1 (dQ) and 2 (dK, dV) need the same pair quantities: dS with its bound
   (ch, ec) and the kept P (ph2, eP2), each a function of the pair alone (its dots, the row statistics of its query
   row, elementwise double-double arithmetic; the span test picks the GEMM value only where it is exact, so the
   tile's orientation does not matter). Phase 1 computes them tile by tile and keeps them here; phase 2 reads them
   back transposed instead of recomputing two GEMMs, exp and the dS chain per pair; tile_w then forms phase 2's
   weights from the same words as before, so dK and dV keep their bits. Only with the tier: its accumulation
   (acc_tile64) drops the low words cl and pl2, which are not stored. Layout: [head of the chunk][key panel][query
   row][TB], zero where phase 1 skipped a tile (no visible pair, hence coefficients +0 as tile_mask gives). Memory is
   n_q n_k 32 bytes per head; heads are stored by groups of key/value heads (chunks) under aa_oracle_store_max bytes,
   beyond which (one group too large) phase 2 recomputes as before. */
size_t aa_oracle_store_max = (size_t)512 << 20; /* one head of n = 4096 */
_Static_assert(TB % QB == 0, "a block of own rows lies in one panel of the other side (store_get)");
typedef struct {
  double *ch, *ec, *p, *ep; /* NULL: no store (phase 2 recomputes) */
  size_t g0, ng;            /* key/value heads of the current chunk */
} store_t;

/* offset of the row (query row iq, key panel p) of head h in the store (h in the chunk) */
static inline size_t store_at(const aa_or_ctx_t *cx, const store_t *S, size_t h, size_t p, size_t iq) {
  size_t npk = (cx->n_k + TB - 1) / TB;
  return (((h - S->g0 * cx->group) * npk + p) * cx->n_q + iq) * TB;
}

/* Phase 1: the tile's pair quantities (query rows r0 .. r0 + na - 1 of head h, key panel p) into the store. */
static void store_put(const aa_or_ctx_t *cx, const store_t *S, const ws_t *W, size_t h, size_t i0, size_t na,
                      size_t p) {
  for (size_t i = 0; i < na; i++) {
    size_t o = store_at(cx, S, h, p, i0 + i);
    memcpy(S->ch + o, W->ch + i * TB, TB * sizeof(double));
    memcpy(S->ec + o, W->ec + i * TB, TB * sizeof(double));
    memcpy(S->p + o, W->ph2 + i * TB, TB * sizeof(double));
    memcpy(S->ep + o, W->eP2 + i * TB, TB * sizeof(double));
  }
}

/* Phase 2: the transposed tile (keys j0 .. j0 + na - 1, query rows i0 .. i0 + nb - 1 of head h) from the store,
   one query row (na contiguous keys) at a time; the kept flags of the visible pairs (for the term counts) as
   tile_raw sets them. */
static void store_get(const aa_or_ctx_t *cx, const store_t *S, ws_t *W, size_t h, size_t j0, size_t na, size_t i0,
                      size_t nb) {
  const aa_problem_t *pb = cx->pb;
  const double *src[] = {S->ch, S->ec, S->p, S->ep};
  double *dst[] = {W->ch, W->ec, W->ph2, W->eP2};
  size_t o = store_at(cx, S, h, j0 / TB, i0) + j0 % TB; /* a block of QB keys lies in one panel */
  for (int a = 0; a < 4; a++) {
    const double *restrict x = src[a] + o;
    double *restrict y = dst[a];
    for (size_t jj = 0; jj < nb; jj++)
      for (size_t i = 0; i < na; i++)
        y[i * TB + jj] = x[jj * TB + i];
    for (size_t i = 0; i < na; i++)
      for (size_t jj = nb; jj < TB; jj++)
        y[i * TB + jj] = 0;
  }
  if (pb->keep == NULL) {
    memcpy(W->kept, W->vis, na * TB);
    return;
  }
  for (size_t i = 0; i < na; i++)
    for (size_t jj = 0; jj < TB; jj++)
      W->kept[i * TB + jj] = W->vis[i * TB + jj] && pb->keep[(h * cx->n_q + i0 + jj) * cx->n_k + j0 + i] != 0;
}

/* dQ of the query rows r0 .. r0 + na - 1 of head h. */
static void dq_block(aa_or_ctx_t *cx, const spans_t *sp, const panels_t *PN, const store_t *S, ws_t *W, size_t h,
                     size_t i0, size_t na) {
  size_t g = h / cx->group, d = cx->d, r0 = h * cx->n_q + i0;
  size_t lo[QB], hi[QB], ulo = SIZE_MAX, uhi = 0;
  for (size_t i = 0; i < na; i++) {
    aa_problem_row_keys(cx->pb, i0 + i, &lo[i], &hi[i]);
    if (hi[i] > lo[i]) {
      if (lo[i] < ulo) ulo = lo[i];
      if (hi[i] > uhi) uhi = hi[i];
    }
  }
  acc_clear(W);
  size_t nrows = (na + RB - 1) / RB * RB;
  zero_rows(W->ch, na);
  zero_rows(W->cl, na);
  zero_rows(W->wt, na);
  zero_rows(W->wt2, na);
  const double *K = cx->k + g * cx->n_k * d;
  size_t ncall = 0;
  double kap[QB];
  for (size_t i = 0; i < na; i++)
    kap[i] = kap_acc(cx, hi[i] - lo[i]);
  tile_t T = {r0, 0, 0, na, TB};
  double qsx, osx;
  int qlb, olb;
  span_agg(&qsx, &qlb, sp->xq + r0, sp->lq + r0, na);
  span_agg(&osx, &olb, sp->xdo + r0, sp->ldo + r0, na);
  for (size_t p = ulo / TB; ulo < uhi && p * TB < uhi; p++) {
    size_t j0 = p * TB;
    T.oth0 = g * cx->n_k + j0;
    T.nb = cx->n_k - j0 < TB ? cx->n_k - j0 : TB;
    int any = 0;
    for (size_t i = 0; i < na; i++)
      for (size_t jj = 0; jj < TB; jj++) {
        size_t j = j0 + jj;
        W->vis[i * TB + jj] = j >= lo[i] && j < hi[i];
        any |= W->vis[i * TB + jj];
      }
    if (!any) continue;
    gemm_tile(W->T, cx->q + r0 * d, na, PN->KT + (g * PN->npk + p) * d * TB, d);
    gemm_tile(W->U, cx->dO + r0 * d, na, PN->VT + (g * PN->npk + p) * d * TB, d);
    size_t pk = g * PN->npk + p;
    tile_bwd(cx, sp, W, &T, tile_exact(qsx, qlb, PN->ks[pk], PN->kl[pk], d),
             tile_exact(osx, olb, PN->vs[pk], PN->vl[pk], d));
    if (S->ch != NULL) store_put(cx, S, W, h, i0, na, p);
    tile_w(W->wt, W->ch, W->ec, kap, na);
    acc_bwd(cx, W->acc1, W->ld, K + j0 * d, d, W->ch, W->cl, W->wt, T.nb, nrows);
    ncall++;
  }
  for (size_t i = 0; i < na; i++) {
    const double *s = W->acc1 + (i * 4) * W->ld, *cc = s + W->ld, *b = s + 3 * W->ld; /* a (k = 2) unused */
    for (size_t c = 0; c < d; c++)
      finish(cx, AA_OR_DQ, (r0 + i) * d + c, s[c], cc[c], 0, wfin(b[c], ncall), hi[i] - lo[i], cx->sig, cx->sig_rel,
             NULL, NULL, NULL);
  }
}

/* dK and dV of the keys j0 .. j0 + na - 1 of key/value head g. */
static void kv_block(aa_or_ctx_t *cx, const spans_t *sp, const panels_t *PN, const store_t *S, ws_t *W, size_t g,
                     size_t j0, size_t na) {
  const aa_problem_t *pb = cx->pb;
  size_t d = cx->d, kk0 = g * cx->n_k + j0, nvis[QB], nkept[QB], ilo = SIZE_MAX, ihi = 0, jlo[QB], jhi[QB];
  for (size_t i = 0; i < na; i++) {
    size_t a, b;
    aa_problem_col_queries(pb, j0 + i, &a, &b);
    jlo[i] = a;
    jhi[i] = b;
    if (a < ilo) ilo = a;
    if (b > ihi) ihi = b;
    nvis[i] = nkept[i] = 0;
  }
  acc_clear(W);
  size_t nrows = (na + RB - 1) / RB * RB;
  double *zr[] = {W->ch, W->cl, W->ec, W->ph2, W->pl2, W->eP2};
  for (int z = 0; z < 6; z++)
    zero_rows(zr[z], na);
  /* terms per key, counted first for the merged bound weights (dV has at most as many) */
  double kap[QB];
  for (size_t i = 0; i < na; i++) {
    size_t cnt = 0;
    if (pb->bound_min == NULL) /* causal and window masks: exactly the rows [jlo, jhi) (aa_problem_col_queries) */
      cnt = jhi[i] > jlo[i] ? jhi[i] - jlo[i] : 0;
    else
      for (size_t iq = jlo[i]; iq < jhi[i]; iq++)
        cnt += aa_problem_visible(pb, iq, j0 + i);
    kap[i] = kap_acc(cx, cnt * cx->group);
  }
  tile_t T = {kk0, 0, 1, na, TB};
  size_t ncall = 0;
  double ksx, vsx;
  int klb, vlb;
  span_agg(&ksx, &klb, sp->xk + kk0, sp->lk + kk0, na);
  span_agg(&vsx, &vlb, sp->xv + kk0, sp->lv + kk0, na);
  for (size_t hh = 0; hh < cx->group; hh++) {
    size_t h = g * cx->group + hh;
    for (size_t p = ilo / TB; ilo < ihi && p * TB < ihi; p++) {
      size_t i0 = p * TB;
      T.oth0 = h * cx->n_q + i0;
      T.nb = cx->n_q - i0 < TB ? cx->n_q - i0 : TB;
      int any = 0;
      for (size_t i = 0; i < na; i++)
        for (size_t jj = 0; jj < TB; jj++) {
          size_t iq = i0 + jj;
          int v = iq >= jlo[i] && iq < jhi[i] && aa_problem_visible(pb, iq, j0 + i);
          W->vis[i * TB + jj] = v;
          any |= v;
        }
      if (!any) continue;
      if (S->ch != NULL) {
        store_get(cx, S, W, h, j0, na, i0, T.nb);
      } else {
        gemm_tile(W->T, cx->k + kk0 * d, na, PN->QT + (h * PN->npq + p) * d * TB, d);
        gemm_tile(W->U, cx->v + kk0 * d, na, PN->DT + (h * PN->npq + p) * d * TB, d);
        size_t pq = h * PN->npq + p;
        tile_bwd(cx, sp, W, &T, tile_exact(ksx, klb, PN->qs[pq], PN->ql[pq], d),
                 tile_exact(vsx, vlb, PN->os[pq], PN->ol[pq], d));
      }
      for (size_t i = 0; i < na; i++)
        for (size_t jj = 0; jj < T.nb; jj++) {
          nvis[i] += W->vis[i * TB + jj];
          nkept[i] += W->vis[i * TB + jj] && W->kept[i * TB + jj];
        }
      tile_w(W->wt, W->ch, W->ec, kap, na);
      tile_w(W->wt2, W->ph2, W->eP2, kap, na);
      acc_bwd(cx, W->acc1, W->ld, cx->q + T.oth0 * d, d, W->ch, W->cl, W->wt, T.nb, nrows);
      acc_bwd(cx, W->acc2, W->ld, cx->dO + T.oth0 * d, d, W->ph2, W->pl2, W->wt2, T.nb, nrows);
      ncall++;
    }
  }
  aa_or_dd_t ksd = {cx->ks, 0};
  for (size_t i = 0; i < na; i++) {
    const double *s = W->acc1 + (i * 4) * W->ld, *cc = s + W->ld, *b = s + 3 * W->ld; /* a (k = 2) unused */
    const double *s2 = W->acc2 + (i * 4) * W->ld, *cc2 = s2 + W->ld, *b2 = s2 + 3 * W->ld;
    size_t kk = kk0 + i;
    for (size_t c = 0; c < d; c++) {
      finish(cx, AA_OR_DK, kk * d + c, s[c], cc[c], 0, wfin(b[c], ncall), nvis[i], cx->sig, cx->sig_rel, NULL, NULL,
             NULL);
      finish(cx, AA_OR_DV, kk * d + c, s2[c], cc2[c], 0, wfin(b2[c], ncall), nkept[i], ksd, 0, NULL, NULL, NULL);
    }
  }
}

/* dsinks[h, s] = - sum_i exp(sink - LSE_i) D_i, in row order, accumulated in
   blocks of ZB rows as O, dQ, dK, dV (see acc_tile): within a block a TwoSum
   chain from +0 (error <= kappa(min(n, ZB)) a_blk + b_blk with a_blk the
   block's sum |T.hi| and b_blk its term bounds), the block partials merged
   with dd_add (error <= u2 (3 |R'.hi| + 2 |R.hi| + 2 |B.hi|) (1 + 2^-49));
   the total error word passes at most ZB + 2K + 2 roundings (K blocks). */
typedef struct {
  aa_or_dd_t R;        /* running sum of the merged blocks */
  double zs, zc, a, b; /* the open block: value words, sum |T.hi|, sum of term bounds */
  double etot, kb;     /* bound of the merged blocks; kappa(min(n, ZB)) (1 + 2^-52) */
  size_t nblk;
} sinkacc_t;

/* Merge of the open block into the running sum, with the error model above. */
static void sink_merge(sinkacc_t *Z) {
  aa_or_dd_t B = aa_or_two_sum(Z->zs, Z->zc), N = aa_or_dd_add(Z->R, B);
  Z->etot += Z->b * infl(ZB) + Z->kb * Z->a * infl(ZB) +
             (3 * fabs(N.hi) + 2 * (fabs(Z->R.hi) + fabs(B.hi))) * (U2 * (1 + 0x1p-49));
  Z->R = N;
  Z->zs = Z->zc = Z->a = Z->b = 0;
  Z->nblk++;
}

static void sink_grad(aa_or_ctx_t *cx, size_t h, size_t s) {
  double sink = cx->pb->sinks[h * cx->ns + s];
  size_t n = 0, nb = 0;
  sinkacc_t Z = {{0, 0}, 0, 0, 0, 0, 0, aa_or_kappa(cx->n_q < ZB ? cx->n_q : ZB) * (1 + 0x1p-52), 0};
  for (size_t i = 0; i < cx->n_q; i++) {
    size_t r = h * cx->n_q + i;
    if (cx->row_empty[r]) continue;
    double eT;
    aa_or_dd_t T = sink_term(cx, sink, r, &eT);
    aa_or_dd_t t2 = aa_or_two_sum(Z.zs, T.hi);
    Z.zs = t2.hi;
    Z.zc += t2.lo + T.lo;
    Z.a += fabs(T.hi);
    Z.b += eT;
    n++;
    if (++nb == ZB) { /* merge the block partial */
      sink_merge(&Z);
      nb = 0;
    }
  }
  if (nb != 0) sink_merge(&Z); /* the last, partial block */
  finish(cx, AA_OR_DSINKS, h * cx->ns + s, -Z.R.hi, -Z.R.lo, 0, Z.etot * infl(2 * Z.nblk), n, (aa_or_dd_t){1, 0}, 0,
         NULL, NULL, NULL);
}

/* The span aggregates of every panel (see panels_t) from the row spans. */
static void panels_spans(const aa_or_ctx_t *cx, const spans_t *sp, panels_t *PN) {
  size_t nk = cx->n_k, nq = cx->n_q;
  for (size_t b = 0; b < cx->kvh * PN->npk; b++) {
    size_t g = b / PN->npk, j0 = (b % PN->npk) * TB, m = nk - j0 < TB ? nk - j0 : TB, o = g * nk + j0;
    span_agg(&PN->ks[b], &PN->kl[b], sp->xk + o, sp->lk + o, m);
    span_agg(&PN->vs[b], &PN->vl[b], sp->xv + o, sp->lv + o, m);
  }
  for (size_t b = 0; b < cx->heads * PN->npq; b++) {
    size_t h = b / PN->npq, i0 = (b % PN->npq) * TB, m = nq - i0 < TB ? nq - i0 : TB, o = h * nq + i0;
    span_agg(&PN->qs[b], &PN->ql[b], sp->xq + o, sp->lq + o, m);
    span_agg(&PN->os[b], &PN->ol[b], sp->xdo + o, sp->ldo + o, m);
  }
}

/* The transposed panels of k, v, q, dO and their span aggregates. 0 when out of memory (panels_free frees what
   was allocated). */
static int panels_make(const aa_or_ctx_t *cx, const spans_t *sp, panels_t *PN) {
  size_t nq = cx->n_q, nk = cx->n_k, d = cx->d;
  PN->npk = (nk + TB - 1) / TB;
  PN->npq = (nq + TB - 1) / TB;
  PN->KT = make_panels(cx->k, cx->kvh, nk, d);
  PN->VT = make_panels(cx->v, cx->kvh, nk, d);
  PN->QT = make_panels(cx->q, cx->heads, nq, d);
  PN->DT = make_panels(cx->dO, cx->heads, nq, d);
  size_t npk_all = cx->kvh * PN->npk, npq_all = cx->heads * PN->npq;
  PN->ks = malloc((npk_all + 1) * sizeof(double));
  PN->vs = malloc((npk_all + 1) * sizeof(double));
  PN->qs = malloc((npq_all + 1) * sizeof(double));
  PN->os = malloc((npq_all + 1) * sizeof(double));
  PN->kl = malloc((npk_all + 1) * sizeof(int));
  PN->vl = malloc((npk_all + 1) * sizeof(int));
  PN->ql = malloc((npq_all + 1) * sizeof(int));
  PN->ol = malloc((npq_all + 1) * sizeof(int));
  if (!PN->KT || !PN->VT || !PN->QT || !PN->DT || !PN->ks || !PN->vs || !PN->qs || !PN->os || !PN->kl || !PN->vl ||
      !PN->ql || !PN->ol)
    return 0;
  panels_spans(cx, sp, PN);
  return 1;
}

static void panels_free(panels_t *PN) {
  free((void *)PN->KT);
  free((void *)PN->VT);
  free((void *)PN->QT);
  free((void *)PN->DT);
  free(PN->ks);
  free(PN->vs);
  free(PN->qs);
  free(PN->os);
  free(PN->kl);
  free(PN->vl);
  free(PN->ql);
  free(PN->ol);
}

int aa_oracle_fast_phase(aa_or_ctx_t *cx, const fast_kernel_t *K, int phase, size_t n) {
  int nt = cx->threads, ok = 1;
  if (!mpfr_buildopt_tls_p()) nt = 1; /* MPFR without thread-local state is not thread-safe (lse_from_z) */
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
#endif
  {
    mpfr_t mz, ml;
    mpfr_inits2(256, mz, ml, (mpfr_ptr)0);
    void *ws = malloc(K->ws_size);
    int wok = ws != NULL && K->ws_init(ws, cx, phase);
    if (!wok) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
      ok = 0;
    }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, K->chunk)
#endif
    for (size_t i = 0; i < n; i++)
      if (wok) K->item(cx, K->data, ws, phase, i, mz, ml);
    if (ws != NULL) K->ws_free(ws);
    free(ws);
    mpfr_clears(mz, ml, (mpfr_ptr)0);
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
  }
  return ok;
}

int aa_oracle_fast_drive(aa_or_ctx_t *cx, const fast_kernel_t *K, int ok, aa_error_t *err) {
  for (int phase = 0; ok && phase < 3; phase++) {
    ok = aa_oracle_fast_phase(cx, K, phase, K->items(cx, phase));
    if (ok && K->after != NULL) ok = K->after(cx, K->data, phase);
  }
  if (ok)
    for (size_t h = 0; h < cx->heads; h++)
      for (size_t s = 0; s < cx->ns; s++)
        K->sink_grad(cx, h, s);
  if (!ok) return aa_error_set(err, AA_ENOMEM, "oracle: out of memory in the fast path");
  return AA_OK;
}

/* The tiled kernel for aa_oracle_fast_drive: blocks of QB query rows (phases 0 and 1) or keys (phase 2). */
typedef struct {
  spans_t sp;
  panels_t PN;
  store_t S; /* the tier's pair store; S.g0 also offsets the blocks of phases 1 and 2 to the current chunk */
} tiled_t;

static size_t tiled_items(const aa_or_ctx_t *cx, int phase) {
  return phase == 2 ? cx->kvh * ((cx->n_k + QB - 1) / QB) : cx->heads * ((cx->n_q + QB - 1) / QB);
}

static void tiled_item(aa_or_ctx_t *cx, const void *data, void *ws, int phase, size_t blk, mpfr_ptr mz, mpfr_ptr ml) {
  const tiled_t *D = data;
  size_t nq = cx->n_q, nk = cx->n_k, nbq = (nq + QB - 1) / QB, nbk = (nk + QB - 1) / QB;
  if (phase == 2) {
    blk += D->S.g0 * nbk;
    size_t g = blk / nbk, j0 = (blk % nbk) * QB;
    kv_block(cx, &D->sp, &D->PN, &D->S, ws, g, j0, nk - j0 < QB ? nk - j0 : QB);
    return;
  }
  if (phase == 1) blk += D->S.g0 * cx->group * nbq;
  size_t h = blk / nbq, i0 = (blk % nbq) * QB, na = nq - i0 < QB ? nq - i0 : QB;
  if (phase == 0)
    fwd_block(cx, &D->sp, &D->PN, ws, h, i0, na, mz, ml);
  else
    dq_block(cx, &D->sp, &D->PN, &D->S, ws, h, i0, na);
}

/* 1 when one of the n elements of output t from off on is still todo. */
static int row_todo(const aa_or_ctx_t *cx, int t, size_t off, size_t n) {
  const uint8_t *todo = cx->w[t].todo + off;
  for (size_t i = 0; i < n; i++)
    if (todo[i]) return 1;
  return 0;
}

/* The binary64 tier's fallback after phase 1 (dQ) or 2 (dK, dV): the own rows with an unsettled element, in
   ascending order (a function of the values alone, so of no thread count), again in double-double by the
   row-by-row kernel (aa_oracle_fast_rows_redo); what it leaves goes to MPFR. 0 when out of memory. */
static int tiled_after(aa_or_ctx_t *cx, const void *data, int phase) {
  const tiled_t *D = data;
  if (!cx->tier64 || phase == 0) return 1;
  size_t nr = phase == 1 ? cx->heads * cx->n_q : cx->kvh * cx->n_k, d = cx->d, n = 0;
  size_t *list = malloc((nr + 1) * sizeof *list);
  if (list == NULL) return 0;
  for (size_t r = 0; r < nr; r++)
    if (phase == 1 ? row_todo(cx, AA_OR_DQ, r * d, d)
                   : row_todo(cx, AA_OR_DK, r * d, d) || row_todo(cx, AA_OR_DV, r * d, d))
      list[n++] = r;
  int ok = n == 0 || aa_oracle_fast_rows_redo(cx, &D->sp, phase, list, n);
  free(list);
  return ok;
}

/* The tier's store for ng key/value heads (0: none, as without the tier, when one group needs more than
   aa_oracle_store_max bytes, or out of memory; phase 2 then recomputes). Chunks of about aa_oracle_store_chunk bytes
   (at least one group), reused from chunk to chunk: the first touch of fresh pages costs the kernel about 1 ms of
   system time per MiB (0.4 s for the 512 MiB of one head at n = 4096), so small chunks pay it once for a small
   store. calloc: the tiles phase 1 skips stay +0. They are the same for every head (the key intervals of
   aa_problem_row_keys do not depend on the head), so a chunk that reuses the store finds them +0 still and the
   store is never cleared. */
size_t aa_oracle_store_chunk = (size_t)64 << 20;
static size_t store_alloc(const aa_or_ctx_t *cx, store_t *S) {
  size_t npk = (cx->n_k + TB - 1) / TB, per = cx->group * npk * cx->n_q * TB; /* doubles per array and group */
  size_t bytes = 4 * sizeof(double) * per, ng = aa_oracle_store_chunk / bytes;
  memset(S, 0, sizeof *S);
  if (!cx->tier64 || bytes > aa_oracle_store_max) return 0;
  if (ng == 0) ng = 1;
  if (ng > cx->kvh) ng = cx->kvh;
  double **a[] = {&S->ch, &S->ec, &S->p, &S->ep};
  int ok = 1;
  for (int i = 0; i < 4; i++)
    ok = ok && (*a[i] = calloc(ng * per, sizeof(double))) != NULL;
  if (!ok) {
    for (int i = 0; i < 4; i++)
      free(*a[i]);
    memset(S, 0, sizeof *S);
    return 0;
  }
  return ng;
}

/* Phases 1 and 2 chunk by chunk of the store (one chunk of all heads without it), then the tier's redo of each
   (tiled_after: the rows to redo are a function of the values alone, whatever the chunks). */
static int tiled_backward(aa_or_ctx_t *cx, const fast_kernel_t *K, tiled_t *D) {
  size_t nbq = (cx->n_q + QB - 1) / QB, nbk = (cx->n_k + QB - 1) / QB, ng = store_alloc(cx, &D->S);
  int ok = 1;
  if (ng == 0) ng = cx->kvh;
  for (size_t g0 = 0; ok && g0 < cx->kvh; g0 += ng) {
    D->S.g0 = g0;
    D->S.ng = cx->kvh - g0 < ng ? cx->kvh - g0 : ng;
    ok = aa_oracle_fast_phase(cx, K, 1, D->S.ng * cx->group * nbq) && aa_oracle_fast_phase(cx, K, 2, D->S.ng * nbk);
  }
  free(D->S.ch);
  free(D->S.ec);
  free(D->S.p);
  free(D->S.ep);
  memset(&D->S, 0, sizeof D->S);
  return ok && tiled_after(cx, D, 1) && tiled_after(cx, D, 2);
}

/* aa_oracle_fast_drive with the backward of tiled_backward. */
static int tiled_drive(aa_or_ctx_t *cx, const fast_kernel_t *K, tiled_t *D, int ok, aa_error_t *err) {
  ok = ok && aa_oracle_fast_phase(cx, K, 0, tiled_items(cx, 0));
  ok = ok && tiled_backward(cx, K, D);
  if (ok)
    for (size_t h = 0; h < cx->heads; h++)
      for (size_t s = 0; s < cx->ns; s++)
        sink_grad(cx, h, s);
  if (!ok) return aa_error_set(err, AA_ENOMEM, "oracle: out of memory in the fast path");
  return AA_OK;
}

int aa_oracle_fast_run(aa_or_ctx_t *cx, aa_error_t *err) {
  /* A boolean mask, a bias's -Inf entries or key padding make a row's keys a set, not the interval the blocks
     and their term counts are built on: the row kernel, which lists each row's visible keys, runs those. */
  if (aa_problem_has_mask(cx->pb)) return aa_oracle_fast_run_rows(cx, err);
  tiled_t D;
  memset(&D, 0, sizeof D);
  int ok = fast_begin(cx, &D.sp);
  ok = ok && panels_make(cx, &D.sp, &D.PN);
  fast_kernel_t K = {&D, 1, tiled_items, sizeof(ws_t), ws_init, ws_free, tiled_item, sink_grad, tiled_after};
  int st = tiled_drive(cx, &K, &D, ok, err);
  spans_free(&D.sp);
  panels_free(&D.PN);
  return st;
}

/* For tests: the span test on one pair and, when it passes, the plain dot product. */
int aa_oracle_dot_exact_check(double *out, const double *a, const double *b, size_t n) {
  double sa, sb;
  int la, lb;
  span(&sa, &la, a, n);
  span(&sb, &lb, b, n);
  if (!exact_pair(sa, la, sb, lb, n)) return 0;
  *out = aa_oracle_dot_plain(a, b, n);
  return 1;
}
