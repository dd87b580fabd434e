/* attnacc: pieces shared by the emulated forward and backward (Q load, score tile, masks, two-pass softmax row). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <string.h>

#include "attn-impl.h"

void aa_attn_load_q(const aa_attn_ctx_t *cx, double *dst, const double *q, size_t rows) {
  const aa_recipe_t *r = cx->r;
  size_t n = rows * cx->d;
  if (r->scale_fold != AA_SCALE_Q) {
    memcpy(dst, q, n * sizeof *dst);
    return;
  }
  /* [nki-bwd] L698-699/751/790: Q*scale on the load path (engine in alu),
     written in the kernel dtype q_scale_fmt. */
  for (size_t i = 0; i < n; i++)
    dst[i] = aa_attn_rnd(aa_attn_alu(q[i] * cx->scale, r->alu_fmt), r->q_scale_fmt);
}

int aa_attn_abt(const aa_attn_ctx_t *cx, double *C, const double *A, size_t rows, const double *B, size_t cols,
                aa_accum_t model, int gemv) {
  size_t d = cx->d;
  if (!gemv || cx->n_q != 1 || !aa_accum_native(model, AA_FMT_FP32))
    return aa_gemm(C, cols, A, d, 0, B, d, 1, rows, cols, d, 0, model);
  for (size_t a = 0; a < rows; a++) /* one query row: cuBLAS's GEMV in place of its FP32 GEMM */
    for (size_t x = 0; x < cols; x++)
      C[a * cols + x] = aa_attn_cublas_gemv(A + a * d, B + x * d, cx->n_k, d, cx->r->alu_fmt);
  return AA_OK;
}

int aa_attn_scores(const aa_attn_ctx_t *cx, double *S, const double *qeff, size_t tq, const double *k, size_t tk,
                   aa_accum_t model, int gemv) {
  const aa_recipe_t *r = cx->r;
  /* [nki-bwd] L912-918: qk_psum = Q^T K accumulated in PSUM (the gemm model). */
  int st = aa_attn_abt(cx, S, qeff, tq, k, tk, model, gemv);
  if (st != AA_OK) return st;
  size_t n = tq * tk;
  int native = aa_accum_native(model, r->s_fmt);
  /* [nki-bwd] L935: tensor_copy PSUM -> SBUF in s_fmt (identity when s_fmt is the accumulator format). */
  if (!native)
    for (size_t i = 0; i < n; i++)
      S[i] = aa_attn_rnd(S[i], r->s_fmt);
  if (r->scale_fold == AA_SCALE_S && !cx->scale_in_mod) /* else aa_attn_score_mod: fl(S scale + b) */
    for (size_t i = 0; i < n; i++)
      S[i] = aa_attn_rnd(aa_attn_alu(S[i] * cx->scale, r->alu_fmt), r->s_fmt);
  return AA_OK;
}

/* tanh as the recipe's softcap.tanh evaluates it (recipe.h aa_tanh_t). */
static double tanh_r(const aa_attn_ctx_t *cx, double x) {
  double t = tanh(x);
  if (cx->r->softcap_tanh == AA_TANH_APPROX) {
    /* model of tanh.approx.f32 (recipe.h): the exact value with an 18-bit significand (RNE) */
    int e;
    double m = frexp(t, &e);
    t = ldexp(nearbyint(ldexp(m, 18)), e - 18);
  }
  return aa_attn_rnd(t, cx->r->alu_fmt);
}

/* The bias of (h, i, j) plus the logit offset in the units of S where mask.enter adds it (cx->mask_div,
   mask_mul): the sum rounded to alu as the kernel holds it, then converted once. */
static double bias_in_s_units(const aa_attn_ctx_t *cx, size_t h, size_t i, size_t j) {
  aa_fmt_t alu = cx->r->alu_fmt;
  double e = aa_problem_bias(cx->pb, h, i, j);
  if (e == -INFINITY && cx->pb->bias_bool && cx->r->mask_score == AA_MASKSC_FILL) e = cx->mask_fill_io; /* fill */
  double b = aa_attn_rnd(e + cx->pb->logit_offset, alu);
  if (cx->mask_div != 1.0) return aa_attn_alu(b / cx->mask_div, alu);
  return cx->mask_mul != 1.0 ? aa_attn_alu(b * cx->mask_mul, alu) : b;
}

void aa_attn_score_mod(const aa_attn_ctx_t *cx, double *S, double *G, size_t h, size_t i0, size_t tq, size_t j0,
                       size_t tk) {
  const aa_problem_t *pb = cx->pb;
  aa_fmt_t alu = cx->r->alu_fmt;
  int bias = aa_problem_has_bias(pb), early = cx->r->mask_enter != AA_MASKAT_AFTER_CAP;
  if (!cx->mod) return;
  for (size_t a = 0; a < tq; a++)
    for (size_t b = 0; b < tk; b++) {
      size_t e = a * tk + b;
      double s = S[e];
      if (cx->scale_in_mod)
        s = aa_attn_rnd(aa_attn_fma(s, cx->scale, bias_in_s_units(cx, h, i0 + a, j0 + b), alu), cx->r->s_fmt);
      else if (bias && early)
        s = aa_attn_alu(s + bias_in_s_units(cx, h, i0 + a, j0 + b), alu);
      if (pb->softcap > 0) {
        /* flash-attn utils.h:396-399 apply_softcap: tanh(acc_s * params.softcap), params.softcap = scale /
           softcap (flash_api.cpp:131), in FP32, right after the QK^T GEMM (flash_fwd_kernel.h:331-332,
           flash_bwd_kernel.h:477-478). */
        double t = tanh_r(cx, aa_attn_alu(s * cx->sc_mul, alu));
        /* calculate_dtanh (utils.h:404-407): (1 - t*t) * params.softcap; 1 - t*t as one FFMA (nvcc contracts
           by default) */
        if (G != NULL) G[e] = aa_attn_alu(aa_attn_fma(-t, t, 1.0, alu) * cx->dt_mul, alu);
        s = cx->cap_out == 1.0 ? t : aa_attn_alu(t * cx->cap_out, alu);
      } else if (G != NULL) {
        G[e] = 1.0;
      }
      if (pb->alibi != AA_ALIBI_NONE) {
        /* flash-attn mask.h:184 / alibi.h:65: tensor -= alibi_slope * abs(row + n_k - n_q - col), one FFMA after
           the softcap; alibi_slope = slope / params.scale_softmax (flash_fwd_kernel.h:294, flash_bwd_kernel.h:454);
           alibi.causal = col: tensor += alibi_slope * col under the causal mask (alibi.h:48, mask.h:157) */
        /* FA2's Is_causal: causal with no left window (flash_api.cpp:157; a left window makes it Is_local) */
        int col = cx->r->alibi_causal_col && pb->causal && pb->alibi == AA_ALIBI_FLASH && pb->window == 0 &&
                  !(pb->local && pb->window_left != AA_WINDOW_INF);
        double dist = col ? (double)(j0 + b) : (double)aa_problem_alibi_dist(pb, i0 + a, j0 + b);
        s = aa_attn_fma(cx->slope_e[h], dist, s, alu);
      }
      if (bias && !early) s = aa_attn_alu(s + bias_in_s_units(cx, h, i0 + a, j0 + b), alu);
      /* a masked key aa_attn_visible let through has the recipe's constant score (mask.score = lowest, zero) or
         its own plus the fill (fill: the boolean mask's and the padding's keys here, a bias read from a boolean
         mask's in bias_in_s_units; a float -Inf bias entry's key is not let through) */
      if (cx->masked && !aa_problem_mask_ok(pb, h, i0 + a, j0 + b)) {
        if (cx->r->mask_score != AA_MASKSC_FILL)
          s = cx->mask_low;
        else if (!(pb->bias_bool && aa_problem_bias(pb, h, i0 + a, j0 + b) == -INFINITY)) /* not filled above */
          s = aa_attn_alu(s + cx->mask_fill_s, alu);
      }
      S[e] = s;
    }
}

size_t aa_attn_visible(const aa_attn_ctx_t *cx, uint8_t *vis, size_t h, size_t i0, size_t tq, size_t j0, size_t tk) {
  const aa_problem_t *pb = cx->pb;
  int mask = cx->masked && cx->r->mask_score == AA_MASKSC_NEGINF,
      fill = cx->masked && !mask && cx->r->mask_score == AA_MASKSC_FILL;
  size_t cnt = 0;
  for (size_t a = 0; a < tq; a++) {
    size_t lo, hi; /* aa_problem_visible's interval, once per row rather than per key */
    aa_problem_row_keys(pb, i0 + a, &lo, &hi);
    if (!mask && !fill) { /* the row's visible keys are one run: two fills instead of a test per key */
      size_t b0 = lo > j0 ? lo - j0 : 0, b1 = hi > j0 ? hi - j0 : 0;
      b1 = b1 < tk ? b1 : tk;
      b0 = b0 < b1 ? b0 : b1;
      memset(vis + a * tk, 0, tk);
      memset(vis + a * tk + b0, 1, b1 - b0);
      cnt += b1 - b0;
      continue;
    }
    for (size_t b = 0; b < tk; b++) {
      uint8_t v = (uint8_t)(j0 + b >= lo && j0 + b < hi);
      if (v && mask) v = (uint8_t)aa_problem_mask_ok(pb, h, i0 + a, j0 + b);
      if (v && fill) v = (uint8_t)!aa_problem_bias_blocks(pb, h, i0 + a, j0 + b);
      vis[a * tk + b] = v;
      cnt += v;
    }
  }
  return cnt;
}

/* 1 when row i of head h has no key the kernel scores and no sink (aa_attn_visible's rule). */
static int row_is_empty(const aa_attn_ctx_t *cx, size_t h, size_t i) {
  uint8_t v;
  if (cx->pb->num_sinks > 0) return 0;
  for (size_t j = 0; j < cx->n_k; j++)
    if (aa_attn_visible(cx, &v, h, i, 1, j, 1)) return 0;
  return 1;
}

static void fill_nan(aa_tensor_t *t, size_t off, size_t n) {
  if (t->data == NULL) return;
  for (size_t x = off; x < off + n; x++)
    t->data[x] = NAN;
}

void aa_attn_finish_empty(const aa_attn_ctx_t *cx, aa_attn_result_t *out) {
  const aa_recipe_t *r = cx->r;
  static const double lse_of[AA_EMPTYLSE_COUNT] = {-INFINITY, INFINITY, 0.0};
  size_t d = cx->d, n_q = cx->n_q, n_k = cx->n_k;
  if (!r->mask_empty_nan && r->mask_empty_lse == AA_EMPTYLSE_NEGINF) return;
  for (size_t h = 0; h < cx->pb->heads; h++)
    for (size_t i = 0; i < n_q; i++) {
      if (!row_is_empty(cx, h, i)) continue;
      out->lse.data[h * n_q + i] = lse_of[r->mask_empty_lse];
      if (!r->mask_empty_nan) continue;
      aa_attn_first_note(cx, AA_FIRST_EMPTY, h, i, 0, NAN, out->lse.data[h * n_q + i], 0, 0);
      /* softmax of an all -inf row is NaN: O = P V, dQ = dS K and every key's P^T dO, dS^T Q of the head */
      fill_nan(&out->o, (h * n_q + i) * d, d);
      fill_nan(&out->dq, (h * n_q + i) * d, d);
      fill_nan(&out->dk, h / cx->group * n_k * d, n_k * d);
      fill_nan(&out->dv, h / cx->group * n_k * d, n_k * d);
    }
}

/* The phantom slot j = n_k of row (h, i): its P = exp(0 - LSE) when that overflowed (AA_FIRST_EXP), else its
   dS = P (0 - D) (AA_FIRST_DS), marked as a phantom slot when it is the first. */
static void phantom_first(const aa_attn_ctx_t *cx, size_t h, size_t i, double lse, double p, double D, double ds) {
  aa_attn_first_t *f = cx->first;
  if (isinf(p))
    aa_attn_first_note(cx, AA_FIRST_EXP, h, i, cx->n_k, INFINITY, 0, lse, -lse);
  else
    aa_attn_first_note(cx, AA_FIRST_DS, h, i, cx->n_k, ds, 0, D, p);
  if (f != NULL && f->h == h && f->i == i && f->j == cx->n_k) f->phantom = 1;
}

/* A phantom slot has K = V = 0 and score 0, so dP = dO . V = 0 and dS = P (dP - D) = -P D in the ALU format;
   dQ's row gets dS K = (+-Inf or NaN) x 0 = NaN when P or that product overflows (a fully masked row: P = +Inf,
   D = 0, NaN). The product, not P alone: the held-out grid of the last session (nan_heldout.json, cuDNN, offset
   -120, n_k mod 128 = 64) has NaN rows whose P is finite, near FLT_MAX / |D| (2441 of its 2449 NaN rows at
   n = 320, d = 64 against 2296 from P alone; the rest are rows near the threshold).
   Only n_k mod T = T/2: the three grids hold masked cuDNN cells at n_k mod 128 = 1, 9, 33, 96 and 104 too, and
   none of them has a NaN that the slots would explain (nan_heldout2.json: offset -100 and row-masked at sigma 1
   and 3, n_k 1, 257, 33; every NaN cell there has n_k mod 128 = 64 or sigma 133120). The reading: the kernel
   checks key bounds only when n_k is not a multiple of 64, in a 128-key tile, so only a last tile that ends
   exactly half full is left unmasked. */
void aa_attn_phantom_keys(const aa_attn_ctx_t *cx, aa_attn_result_t *out) {
  size_t T = cx->r->mask_phantom_tile, rem = T != 0 ? cx->n_k % T : 0, d = cx->d, n_q = cx->n_q;
  aa_fmt_t alu = cx->r->alu_fmt;
  if (T == 0 || rem != T / 2 || out->dq.data == NULL || out->o.data == NULL || !aa_problem_has_mask(cx->pb)) return;
  for (size_t h = 0; h < cx->pb->heads; h++)
    for (size_t i = 0; i < n_q; i++) {
      size_t row = h * n_q + i;
      double lse = out->lse.data[row], p = aa_attn_alu(exp(-lse), alu); /* LSE = -Inf: +Inf */
      double D = aa_attn_rowsum_o_do(cx, out->o.data + row * d, cx->dO + row * d);
      double ds = aa_attn_alu(p * (0 - D), alu);
      if (isfinite(ds)) continue;
      fill_nan(&out->dq, row * d, d);
      phantom_first(cx, h, i, lse, p, D, ds);
    }
}

/* Sink logit in the units of S: with scale_fold = exp, S is unscaled, so the
   sink (a scaled logit) is divided by the scale in the ALU format. */
static double sink_in_s_units(const aa_attn_ctx_t *cx, double sink) {
  if (cx->r->scale_fold == AA_SCALE_EXP) return aa_attn_alu(sink / cx->scale, cx->r->alu_fmt);
  return sink;
}

void aa_attn_twopass_row(const aa_attn_ctx_t *cx, double *P, const double *S, const uint8_t *vis, size_t n,
                         const double *sinks, double *m_out, double *l_out) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  size_t ns = sinks != NULL ? cx->pb->num_sinks : 0;
  double m = -INFINITY, l = 0;
  for (size_t s = 0; s < ns; s++)
    m = fmax(m, sink_in_s_units(cx, sinks[s]));
  for (size_t j = 0; j < n; j++)
    if (vis[j] && S[j] > m) m = S[j];
  if (m == -INFINITY) { /* no visible key, no sink: P = 0, l = 0 (O = 0, LSE = -inf) */
    for (size_t j = 0; j < n; j++)
      P[j] = 0;
    *m_out = m;
    *l_out = 0;
    return;
  }
  /* Naive softmax in the ALU format from s_fmt scores: max, exp(x - max),
     sequential sum, then normalise each weight ([fa2] tests, *_pt). */
  double b = aa_attn_alu(m * cx->c, alu);
  for (size_t s = 0; s < ns; s++) {
    double p = aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_fma(sink_in_s_units(cx, sinks[s]), cx->c, -b, alu));
    l = aa_attn_rnd(l + (r->fwd_rowsum_rounded ? aa_attn_p_rnd(r, p) : p), r->fwd_rowsum_fmt);
  }
  for (size_t j = 0; j < n; j++) {
    /* the backward recomputes the forward's P with this same row (fwd.exp) */
    double p = vis[j] ? aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_exparg(cx, S[j], b)) : 0.0;
    P[j] = p;
    l = aa_attn_rnd(l + (r->fwd_rowsum_rounded ? aa_attn_p_rnd(r, p) : p), r->fwd_rowsum_fmt);
  }
  if (r->fwd_o_norm == AA_NORM_RECIPROCAL) {
    double rr = aa_attn_alu(1.0 / l, alu);
    for (size_t j = 0; j < n; j++)
      P[j] = aa_attn_p_rnd(r, aa_attn_alu(P[j] * rr, alu));
  } else {
    for (size_t j = 0; j < n; j++)
      P[j] = aa_attn_p_rnd(r, aa_attn_alu(P[j] / l, alu));
  }
  *m_out = m;
  *l_out = l;
}
