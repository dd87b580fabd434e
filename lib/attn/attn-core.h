/* attnacc: the FA2 split-KV forward of one query row, written once for the CPU (host threads) and the GPU (CUDA). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ATTN_CORE_H
#define AA_ATTN_CORE_H

/* The GPU emulation (lib/attn/cuda.c decides what it runs, attn_cuda_kern.cu
   launches it) computes, for the recipes lib/attn/cuda.c accepts, exactly
   what forward.c and forward_split.c compute: the same binary64 operations
   in the same order, each rounding of aa_attn_rnd (FP32: a cast; BF16 and
   FP16 below), the tensor-core products by tc-core.h and the sm90 SFU models
   by sm90-core.h. The CPU's query tile is a set of independent rows except
   for one thing, the skip of a key block no row of the tile sees; each row
   here recomputes that test over its tile. Plain C, so the same code also
   runs on host threads (AA_ATTN_DEVICE_CUDA_EMU) and in tests/tattn_cuda_emu. */
#include <stddef.h>
#include <stdint.h>

#include "../exp/quad-core.h"
#include "../exp/sm90-core.h"
#include "../gemm/tc-core.h"

#define AA_CORE_MAXD 256           /* head dimension */
#define AA_CORE_MAXTK 256          /* key block */
#define AA_CORE_LN2F 0x1.62e43p-1f /* fl32(ln 2) */

enum { AA_CORE_FP32 = 0, AA_CORE_BF16 = 1, AA_CORE_FP16 = 2 };

/* Everything one row needs, with host or device pointers. */
typedef struct {
  const float *Q, *K, *V;       /* [heads][n_q][d], [kv_heads][n_k][d]: values of the io format */
  const int64_t *lo, *hi;       /* [n_q]: row i sees keys [lo[i], hi[i]) (aa_problem_row_keys) */
  float *O, *LSE;               /* [heads][n_q][d], [heads][n_q]: the outputs (O rounded to io) */
  float *Os, *Ls;               /* nsplit > 1: [nsplit][heads][n_q][d] and [...][n_q], the splits' partials */
  unsigned long long *counters; /* [3]: P casts, casts above p_fmt's largest finite, positive casts to zero */
  unsigned long long *pmax;     /* the largest P cast, as the bits of a nonnegative double */
  unsigned char *doubt;         /* [nsplit][heads][n_q]: 1 where a libm value was too close to call (aa_core_libm) */
  size_t n_q, n_k, d, heads, group;
  size_t tq, tk, nsplit, per; /* forward tiles, splits and key blocks per split (forward_split.c) */
  int k_desc, quad, rs_fma, rs_rounded, mulsub, o_recip;
  int sm90;    /* 1: the weights, rescale and LSE log by the sm90 SFU models; 0: binary64 libm (exp = exact) */
  int natural; /* exp_form = natural: exp, else exp2 (exact exp only) */
  int scale_s; /* scale_fold = s: S = fl(S scale) after the product */
  int log2max; /* fwd.lse_form = log2-max or log2-ln2 (one split only) */
  int lse_ln2; /* fwd.lse_form = log2-ln2: the log2 max back to natural units times fl(ln 2), not over log2 e;
                  2: log2-ln2-fma, the product and the log l in one FFMA */
  int p_fmt, io_fmt;
  int qk_bk, qk_fb, qk_ob, pv_bk, pv_fb, pv_ob; /* tc-kK-fF models of fwd.acc_qk and fwd.acc_pv (K = 0: fp32-seq) */
  double c, se, threshold, p_top;               /* exp coefficient, LSE scale, fwd.rescale_threshold, max finite */
  double scale, l2e;                            /* the softmax scale and log2(e) in the ALU format */
  int doubt_log2; /* aa_core_libm's margin: 2^doubt_log2 ulps (3 on the GPU; more on host threads, to test it) */
  /* fwd.softmax = fixed-shift or guarded (forward_fixed.c; aa_core_shifted_row) */
  int shifted;             /* 0: online-lse; 1: fixed-shift; 2: guarded */
  size_t sub;              /* rows per contraction: fwd.sub_q with the guarded forward, else tq */
  double shift0, lo2, hi2; /* fwd.shift in FP32; the range check's [2^fwd.guard_lo, 2^fwd.guard_hi) */
  float *Msh, *Lsum;       /* [heads][n_q]: each row's shift (NaN: never anchored) and row sum */
  unsigned char *rflag;    /* [heads][n_q]: bit 0 the row was seen, bit 1 every weight in range */
  /* fwd.exp = quadratic-bf16 (order fp32): the weights by aa_exp_quad_core (the rescale keeps its exp) */
  int qexp, qexp_rz;             /* on; its cvt = rz */
  float qexp_k, qexp_d1, qexp_s; /* aa_exp_t's kf, df1, sf */
  /* fwd.softmax = two-pass (forward.c fwd_tile_twopass; one split, fwd.tile_k unused) and the scores' s_fmt */
  int twopass, s_fmt;
} aa_core_fwd_t;

/* An FP32 value rounded to BF16 or FP16 (RNE, subnormals, Inf on overflow): aa_attn_rnd's result for it. Scaling
   by a power of two is exact, and rintf rounds to nearest even, so x 2^(10 - e) rounded to an integer is the FP16
   significand at x's exponent e (clamped to FP16's subnormal step 2^-24). */
static inline AA_HD float aa_core_rnd16(float x, int fmt) {
  if (fmt == AA_CORE_FP32 || x != x) return x;
  uint32_t u = aa_core_f2u(x);
  if (fmt == AA_CORE_BF16) {
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    return aa_core_u2f((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
  }
  int e = (int)((u >> 23) & 255) - 127;
  if (e < -14) e = -14;
  if (e > 15) e = 15;
  float up = aa_core_u2f((uint32_t)(127 + 10 - e) << 23), down = aa_core_u2f((uint32_t)(127 - 10 + e) << 23);
  float r = rintf(x * up) * down;
  return fabsf(r) > 65504.0f ? (x < 0 ? -INFINITY : INFINITY) : r;
}
static inline AA_HD double aa_core_r32(double x) {
  return (double)(float)x;
}

/* exp2, exp or log (fn 0, 1, 2) in binary64, as the CPU's aa_attn_exp and aa_attn_lse_log evaluate them before
   rounding to FP32. glibc's and CUDA's results may differ in their last bits (each within 1 ulp of the exact
   value), so the FP32 rounding the CPU gets is certain only when the value lies more than a few ulps from an FP32
   rounding boundary: otherwise *doubt is set and the caller redoes the row on the host, whose libm is the CPU's.
   The margin is 2^margin ulps of y. */
static inline AA_HD double aa_core_libm(int fn, double a, int margin, int *doubt) {
  double y = fn == 0 ? exp2(a) : fn == 1 ? exp(a) : log(a);
  if (y == y && y != 0 && fabs(y) < 1e300) {
    int e;
    frexp(y, &e);
    double u = ldexp(1.0, e - 53 + margin);
    if ((float)(y - u) != (float)(y + u)) *doubt = 1;
  }
  return y;
}

/* One product chain of a tc model: acc through blocks of bk terms a[k] b[k bs], k < n; bk = 0: fp32-seq, one FMA
   per term (gemm.h). */
static inline AA_HD float aa_core_tc(float acc, const float *a, const float *b, size_t bs, size_t n, int bk, int fb,
                                     int ob) {
  if (bk == 0) {
    for (size_t k = 0; k < n; k++)
      acc = aa_seq32_step(acc, a[k], b[k * bs]);
    return acc;
  }
  for (size_t k0 = 0; k0 < n; k0 += (size_t)bk)
    acc = aa_tc_block(acc, a + k0, b + k0 * bs, bs, n - k0 < (size_t)bk ? n - k0 : (size_t)bk, fb, ob);
  return acc;
}

/* 1 when some row of the tile [i0, i0 + tq) sees a key of [j0, j0 + tk): aa_attn_visible's count is nonzero. */
static inline AA_HD int aa_core_tile_seen(const aa_core_fwd_t *p, size_t i0, size_t tq, size_t j0, size_t tk) {
  for (size_t i = i0; i < i0 + tq; i++) {
    int64_t a = p->lo[i] > (int64_t)j0 ? p->lo[i] : (int64_t)j0;
    int64_t b = p->hi[i] < (int64_t)(j0 + tk) ? p->hi[i] : (int64_t)(j0 + tk);
    if (a < b) return 1;
  }
  return 0;
}

/* The row's running state (forward.c: m, the four row-sum lanes, acc_o). */
typedef struct {
  double m, l[4];
  float acc[AA_CORE_MAXD];
  unsigned long long cast, over, under;
  double pmax;
  int doubt; /* aa_core_libm */
} aa_core_row_t;

/* A weight or rescale factor exp(a) (exp2 for the exp2 forms) in FP32: the sm90 exp2f model or the exact exp. */
static inline AA_HD double aa_core_exp(const aa_core_fwd_t *p, aa_core_row_t *w, double a) {
  if (p->sm90) return (double)aa_core_exp2f((float)a);
  return aa_core_r32(aa_core_libm(p->natural, a, p->doubt_log2, &w->doubt));
}

/* A weight exp(a) (exp2 for the exp2 forms) as aa_attn_wexp gives it: fwd.exp's quadratic BF16 construction on the
   FP32 argument (a BF16 value), else aa_core_exp. */
static inline AA_HD double aa_core_wexp(const aa_core_fwd_t *p, aa_core_row_t *w, double a) {
  if (p->qexp)
    return (double)aa_exp_bf16_widen(
        (uint16_t)aa_exp_quad_core((float)a, p->qexp_k, p->qexp_d1, p->qexp_s, p->qexp_rz, 0));
  return aa_core_exp(p, w, a);
}

/* forward.c rescale_row: the max moves from m_old to m_new. */
static inline AA_HD void aa_core_rescale(const aa_core_fwd_t *p, aa_core_row_t *w, double m_old, double m_new) {
  double arg = p->log2max ? aa_core_r32(aa_core_r32(m_old * p->c) - aa_core_r32(m_new * p->c))
                          : aa_core_r32(aa_core_r32(m_old - m_new) * p->c);
  double alpha = aa_core_exp(p, w, arg);
  for (int t = 0; t < 4; t++)
    w->l[t] = p->rs_fma ? w->l[t] * alpha : aa_core_r32(aa_core_r32(w->l[t] * alpha));
  for (size_t c = 0; c < p->d; c++)
    w->acc[c] = (float)((double)w->acc[c] * alpha);
}

/* forward.c aa_attn_fwd_block for one row i against keys [j0, j0 + tk): S, max, rescale, weights, P V. */
static inline AA_HD void aa_core_block(const aa_core_fwd_t *p, aa_core_row_t *w, const float *q, const float *K,
                                       const float *V, size_t i, size_t j0, size_t tk, float *P) {
  size_t d = p->d;
  int64_t lo = p->lo[i], hi = p->hi[i];
  double mx = -INFINITY;
  for (size_t b = 0; b < tk; b++) {
    int64_t j = (int64_t)(j0 + b);
    if (j < lo || j >= hi) continue;
    float s = aa_core_tc(0.0f, q, K + (j0 + b) * d, 1, d, p->qk_bk, p->qk_fb, p->qk_ob);
    if (p->scale_s) s = (float)((double)s * p->scale); /* common.c aa_attn_scores, s_fmt = FP32 */
    P[b] = s;
    if ((double)s > mx) mx = s;
  }
  double m_old = w->m, m_new = m_old;
  if (mx > m_old && (m_old == -INFINITY || (mx - m_old) * fabs(p->c) > p->threshold)) m_new = mx;
  if (m_new == -INFINITY) {
    for (size_t b = 0; b < tk; b++)
      P[b] = 0;
  } else {
    if (m_new != m_old && m_old != -INFINITY) aa_core_rescale(p, w, m_old, m_new);
    w->m = m_new;
    double bb = aa_core_r32(m_new * p->c);
    for (size_t b = 0; b < tk; b++) {
      int64_t j = (int64_t)(j0 + b);
      int t = p->quad ? (int)((b % 8) / 2) : 0;
      if (j < lo || j >= hi) { /* a masked column adds 0: rounds a pending fused rescale */
        w->l[t] = aa_core_r32(w->l[t]);
        P[b] = 0;
        continue;
      }
      double s = P[b];
      double a =
          p->mulsub ? aa_core_r32(aa_core_r32(s * p->c) - bb) : (double)fmaf((float)s, (float)p->c, (float)-bb);
      double e = aa_core_wexp(p, w, a);
      double pr = (double)aa_core_rnd16((float)e, p->p_fmt);
      w->cast++, w->over += e > p->p_top, w->under += e > 0 && pr == 0;
      if (e > w->pmax) w->pmax = e;
      w->l[t] = aa_core_r32(w->l[t] + (p->rs_rounded ? pr : e));
      P[b] = (float)pr;
    }
  }
  for (size_t c = 0; c < d; c++)
    w->acc[c] = aa_core_tc(w->acc[c], P, V + j0 * d + c, d, tk, p->pv_bk, p->pv_fb, p->pv_ob);
}

/* forward.c aa_attn_row_sum */
static inline AA_HD double aa_core_row_sum(const aa_core_fwd_t *p, const double *l) {
  if (!p->quad) return l[0];
  double a = aa_core_r32(aa_core_r32(l[0] + l[2])), b = aa_core_r32(aa_core_r32(l[1] + l[3]));
  return aa_core_r32(aa_core_r32(a + b));
}

/* forward.c lse_formed with fwd.lse_form = fma, log2-max, log2-ln2 or log2-ln2-fma: the LSE of a row of max m and sum
   l > 0. */
static inline AA_HD double aa_core_lse(const aa_core_fwd_t *p, int *doubt, double m, double l) {
  double lg = p->sm90 ? (double)aa_core_logf_fast((float)l) : aa_core_r32(aa_core_libm(2, l, p->doubt_log2, doubt));
  if (p->log2max) {
    double mi = aa_core_r32(m * p->c);
    if (p->lse_ln2 == 2) return (double)fmaf((float)mi, AA_CORE_LN2F, (float)lg);
    return aa_core_r32(aa_core_r32(p->lse_ln2 ? mi * (double)AA_CORE_LN2F : mi / p->l2e) + lg);
  }
  return (double)fmaf((float)m, (float)p->se, (float)lg);
}

/* common.c aa_attn_scores for the pair (q, k): the product rounded to s_fmt and, with scale_fold = s, times the scale
   in FP32 and rounded to s_fmt again (FP32: the product is the accumulator's own format, no rounding). */
static inline AA_HD double aa_core_score(const aa_core_fwd_t *p, const float *q, const float *k) {
  float s = aa_core_rnd16(aa_core_tc(0.0f, q, k, 1, p->d, p->qk_bk, p->qk_fb, p->qk_ob), p->s_fmt);
  return p->scale_s ? (double)aa_core_rnd16((float)((double)s * p->scale), p->s_fmt) : (double)s;
}

/* common.c aa_attn_twopass_row's weight of score s against the shift b = m c: the exp (aa_attn_wexp with fwd.exp)
   of aa_attn_exparg, in FP32. */
static inline AA_HD double aa_core_tp_weight(const aa_core_fwd_t *p, int *doubt, double s, double b) {
  double a = p->mulsub ? aa_core_r32(aa_core_r32(s * p->c) - b) : (double)fmaf((float)s, (float)p->c, (float)-b);
  if (p->sm90) return (double)aa_core_exp2f((float)a);
  return aa_core_r32(aa_core_libm(p->natural, a, p->doubt_log2, doubt));
}

/* aa_attn_twopass_row's first two passes over query row i of head h (its visible keys, ascending): the max m of the
   scores, then the sum l of the weights (each rounded to p_fmt first with fwd.rowsum_rounded); l = 0 when m = -Inf.
   The scores are computed in each pass rather than held: n_k of them would not fit a GPU thread. */
static inline AA_HD void aa_core_tp_stats(const aa_core_fwd_t *p, size_t h, size_t i, double *m, double *l,
                                          int *doubt) {
  const float *q = p->Q + (h * p->n_q + i) * p->d, *K = p->K + h / p->group * p->n_k * p->d;
  *m = -INFINITY, *l = 0;
  for (int64_t j = p->lo[i]; j < p->hi[i]; j++) {
    double s = aa_core_score(p, q, K + (size_t)j * p->d);
    if (s > *m) *m = s;
  }
  if (*m == -INFINITY) return;
  double b = aa_core_r32(*m * p->c);
  for (int64_t j = p->lo[i]; j < p->hi[i]; j++) {
    double e = aa_core_tp_weight(p, doubt, aa_core_score(p, q, K + (size_t)j * p->d), b);
    *l = aa_core_r32(*l + (p->rs_rounded ? (double)aa_core_rnd16((float)e, p->p_fmt) : e));
  }
}

/* aa_attn_twopass_row's last pass: a key's weight e (0 when masked) normalised by l (fwd.o_norm), in p_fmt. */
static inline AA_HD float aa_core_tp_p(const aa_core_fwd_t *p, double e, double l) {
  double x = p->o_recip ? aa_core_r32(e * aa_core_r32(1.0 / l)) : aa_core_r32(e / l);
  return aa_core_rnd16((float)x, p->p_fmt);
}

/* forward.c fwd_tile_twopass for query row i of head h: the two-pass row, then O = P V by fwd.acc_pv with nothing
   after it but the roundings; P in chunks of whole tc blocks (the chains continue across them), AA_CORE_MAXTK
   floats of scratch. The CPU counts no P casts on this route. */
static inline AA_HD void aa_core_twopass_row(const aa_core_fwd_t *p, size_t h, size_t i, aa_core_row_t *w, float *P) {
  size_t d = p->d, n_k = p->n_k, row = h * p->n_q + i, kv = h / p->group * n_k * d;
  size_t ch = p->pv_bk ? AA_CORE_MAXTK - AA_CORE_MAXTK % (size_t)p->pv_bk : AA_CORE_MAXTK;
  const float *q = p->Q + row * d;
  double m, l;
  w->doubt = 0;
  aa_core_tp_stats(p, h, i, &m, &l, &w->doubt);
  double b = aa_core_r32(m * p->c);
  for (size_t c = 0; c < d; c++)
    w->acc[c] = 0;
  for (size_t j0 = 0; j0 < n_k; j0 += ch) {
    size_t nb = n_k - j0 < ch ? n_k - j0 : ch;
    for (size_t x = 0; x < nb; x++) {
      int64_t j = (int64_t)(j0 + x);
      double e = 0;
      if (j >= p->lo[i] && j < p->hi[i] && m != -INFINITY)
        e = aa_core_tp_weight(p, &w->doubt, aa_core_score(p, q, p->K + kv + (j0 + x) * d), b);
      P[x] = m == -INFINITY ? 0.0f : aa_core_tp_p(p, e, l); /* an empty row: P = 0, no division */
    }
    for (size_t c = 0; c < d; c++)
      w->acc[c] = aa_core_tc(w->acc[c], P, p->V + kv + j0 * d + c, d, nb, p->pv_bk, p->pv_fb, p->pv_ob);
  }
  for (size_t c = 0; c < d; c++)
    p->O[row * d + c] = aa_core_rnd16(w->acc[c], p->io_fmt);
  p->LSE[row] = l == 0 || m == -INFINITY ? -INFINITY : (float)aa_core_lse(p, &w->doubt, m, l);
  if (p->doubt != NULL) p->doubt[row] = (unsigned char)w->doubt;
}

/* forward_split.c run_split for query row i of head h and split sp: its key blocks, then O_s and lse_s (several
   splits) or the final O and LSE (one); the two-pass softmax's whole row instead (aa_core_twopass_row). P is
   AA_CORE_MAXTK floats of scratch, w the row state. */
static inline AA_HD void aa_core_split_row(const aa_core_fwd_t *p, size_t h, size_t i, size_t sp, aa_core_row_t *w,
                                           float *P) {
  if (p->twopass) { /* forward.c's two-pass route */
    aa_core_twopass_row(p, h, i, w, P);
    return;
  }
  size_t d = p->d, n_k = p->n_k, kvh = h / p->group;
  size_t nblk = (n_k + p->tk - 1) / p->tk, i0 = i / p->tq * p->tq;
  size_t tq = p->n_q - i0 < p->tq ? p->n_q - i0 : p->tq;
  size_t b0 = sp * p->per, b1 = (sp + 1) * p->per < nblk ? (sp + 1) * p->per : nblk;
  const float *q = p->Q + (h * p->n_q + i) * d, *K = p->K + kvh * n_k * d, *V = p->V + kvh * n_k * d;
  w->m = -INFINITY;
  w->doubt = 0;
  for (int t = 0; t < 4; t++)
    w->l[t] = 0;
  for (size_t c = 0; c < d; c++)
    w->acc[c] = 0;
  for (size_t bi = b0; bi < b1; bi++) {
    size_t b = p->k_desc ? b1 - 1 - (bi - b0) : bi;
    size_t j0 = b * p->tk, tk = n_k - j0 < p->tk ? n_k - j0 : p->tk;
    if (aa_core_tile_seen(p, i0, tq, j0, tk)) aa_core_block(p, w, q, K, V, i, j0, tk, P);
  }
  size_t row = h * p->n_q + i;
  float *o = p->nsplit > 1 ? p->Os + (sp * p->heads * p->n_q + row) * d : p->O + row * d;
  double lse = -INFINITY, la = aa_core_row_sum(p, w->l);
  if (la == 0 || w->m == -INFINITY) {
    for (size_t c = 0; c < d; c++)
      o[c] = 0;
  } else {
    double rr = aa_core_r32(1.0 / la);
    for (size_t c = 0; c < d; c++) {
      double x = p->o_recip ? aa_core_r32(w->acc[c] * rr) : aa_core_r32(w->acc[c] / la);
      o[c] = p->nsplit > 1 ? (float)x : aa_core_rnd16((float)x, p->io_fmt);
    }
    lse = aa_core_lse(p, &w->doubt, w->m, la);
  }
  if (p->nsplit > 1)
    p->Ls[sp * p->heads * p->n_q + row] = (float)lse;
  else
    p->LSE[row] = (float)lse;
  if (p->doubt != NULL) p->doubt[sp * p->heads * p->n_q + row] = (unsigned char)w->doubt;
}

/* The range check of [blackwell-fa] section 3.2, "every weight and the row sum stay finite, non-zero and inside
   the encoded range", the range being [lo2, hi2) = [2^fwd.guard_lo, 2^fwd.guard_hi) (lo = -inf admits zero; lo2 >=
   0 also rejects -Inf); one definition for forward_fixed.c and the GPU core. */
static inline AA_HD int aa_core_in_range(double w, double lo2, double hi2) {
  return w == w && w != INFINITY && w >= lo2 && w < hi2;
}

/* forward_fixed.c shifted_row_weights for row i against the scored block P[0, tk) at j0 (visible keys [lo, hi)):
   the guarded anchor if still unset, then the weights against the shift *m into P, the row sum *l and *ok. */
static inline AA_HD void aa_core_shifted_weights(const aa_core_fwd_t *p, aa_core_row_t *w, double *m, double *l,
                                                 int *seen, int *ok, size_t i, size_t j0, size_t tk, float *P) {
  int64_t lo = p->lo[i], hi = p->hi[i];
  if (*m != *m) { /* section 3.2: the max of the row's first visible block, times c in FP32 */
    double mx = -INFINITY;
    for (size_t b = 0; b < tk; b++)
      if ((int64_t)(j0 + b) >= lo && (int64_t)(j0 + b) < hi && (double)P[b] > mx) mx = P[b];
    if (mx > -INFINITY) *m = aa_core_r32(mx * p->c);
  }
  if (*m != *m) {
    for (size_t b = 0; b < tk; b++)
      P[b] = 0;
    return;
  }
  *seen = 1;
  for (size_t b = 0; b < tk; b++) {
    if ((int64_t)(j0 + b) < lo || (int64_t)(j0 + b) >= hi) {
      P[b] = 0;
      continue;
    }
    double e = aa_core_wexp(p, w, (double)fmaf(P[b], (float)p->c, (float)-*m));
    double pr = (double)aa_core_rnd16((float)e, p->p_fmt);
    if (!aa_core_in_range(pr, p->lo2, p->hi2)) *ok = 0;
    *l = aa_core_r32(*l + (p->rs_rounded ? pr : e));
    P[b] = (float)pr;
  }
}

/* forward_fixed.c for query row i of head h (fwd.softmax = fixed-shift or guarded): the key blocks some row of its
   tile sees, each as a contraction of its row group (skipped when no row of the group sees the block), no
   rescaling; then O (0 for a row never seen), the shift, the row sum and the row's flags. The tile's flag, the
   recovery and the saved (shift, 1/l) follow on the host (cuda_fixed.c), which needs every row of the tile. */
static inline AA_HD void aa_core_shifted_row(const aa_core_fwd_t *p, size_t h, size_t i, aa_core_row_t *w, float *P) {
  size_t d = p->d, n_k = p->n_k, kvh = h / p->group, row = h * p->n_q + i;
  size_t i0 = i / p->tq * p->tq, tq = p->n_q - i0 < p->tq ? p->n_q - i0 : p->tq;
  size_t s0 = i0 + (i - i0) / p->sub * p->sub, sr = i0 + tq - s0 < p->sub ? i0 + tq - s0 : p->sub;
  const float *q = p->Q + row * d, *K = p->K + kvh * n_k * d, *V = p->V + kvh * n_k * d;
  double m = p->shifted == 2 ? NAN : p->shift0, l = 0;
  int seen = 0, ok = 1;
  w->doubt = 0;
  for (size_t c = 0; c < d; c++)
    w->acc[c] = 0;
  for (size_t j0 = 0; j0 < n_k; j0 += p->tk) {
    size_t tk = n_k - j0 < p->tk ? n_k - j0 : p->tk;
    if (!aa_core_tile_seen(p, i0, tq, j0, tk) || !aa_core_tile_seen(p, s0, sr, j0, tk)) continue; /* section 3.4 */
    for (size_t b = 0; b < tk; b++) {
      float s = aa_core_tc(0.0f, q, K + (j0 + b) * d, 1, d, p->qk_bk, p->qk_fb, p->qk_ob);
      P[b] = p->scale_s ? (float)((double)s * p->scale) : s;
    }
    aa_core_shifted_weights(p, w, &m, &l, &seen, &ok, i, j0, tk, P);
    for (size_t c = 0; c < d; c++) /* section 3.1: O keeps accumulating P V */
      w->acc[c] = aa_core_tc(w->acc[c], P, V + j0 * d + c, d, tk, p->pv_bk, p->pv_fb, p->pv_ob);
  }
  double rr = aa_core_r32(1.0 / l);
  for (size_t c = 0; c < d; c++) {
    double x = p->o_recip ? aa_core_r32(w->acc[c] * rr) : aa_core_r32(w->acc[c] / l);
    p->O[row * d + c] = seen ? aa_core_rnd16((float)x, p->io_fmt) : 0.0f;
  }
  p->Msh[row] = (float)m, p->Lsum[row] = (float)l;
  p->rflag[row] = (unsigned char)(seen | ok << 1);
  if (p->doubt != NULL) p->doubt[row] = (unsigned char)w->doubt;
}

/* One forward work item: row i of head h (split sp) by the recipe's softmax. */
static inline AA_HD void aa_core_fwd_row(const aa_core_fwd_t *p, size_t h, size_t i, size_t sp, aa_core_row_t *w,
                                         float *P) {
  if (p->shifted)
    aa_core_shifted_row(p, h, i, w, P);
  else
    aa_core_split_row(p, h, i, sp, w, P);
}

/* forward_split.c combine_row with sfu = sm90 (combine_lse_sm90): row `row` (= h n_q + i) from its splits. */
static inline AA_HD void aa_core_combine_row(const aa_core_fwd_t *p, size_t row, float *acc) {
  size_t d = p->d, ns = p->nsplit, stride = p->heads * p->n_q;
  float *o = p->O + row * d;
  double mx = -INFINITY;
  for (size_t sp = 0; sp < ns; sp++)
    if ((double)p->Ls[sp * stride + row] > mx) mx = p->Ls[sp * stride + row];
  if (mx == -INFINITY) {
    for (size_t c = 0; c < d; c++)
      o[c] = 0;
    p->LSE[row] = -INFINITY;
    return;
  }
  float e[128];
  size_t wd = 2;
  while (wd < ns)
    wd *= 2;
  for (size_t s = 0; s < wd; s++)
    e[s] = s < ns ? aa_core_expf((float)((double)p->Ls[s * stride + row] - mx)) : 0.0f;
  for (size_t off = wd / 2; off >= 1; off /= 2)
    for (size_t s = 0; s < off; s++)
      e[s] = e[s] + e[s + off];
  double lse = (double)(aa_core_logf(e[0]) + (float)mx);
  for (size_t c = 0; c < d; c++)
    acc[c] = 0;
  for (size_t sp = 0; sp < ns; sp++) {
    float wgt = aa_core_expf((float)((double)p->Ls[sp * stride + row] - lse));
    const float *src = p->Os + (sp * stride + row) * d;
    for (size_t c = 0; c < d; c++)
      acc[c] = fmaf(wgt, src[c], acc[c]);
  }
  for (size_t c = 0; c < d; c++)
    o[c] = aa_core_rnd16(acc[c], p->io_fmt);
  p->LSE[row] = (float)lse;
}

#endif
