/* attnacc: the fixed-shift and guarded forwards of [blackwell-fa] (sections 3.1, 3.2, 3.4, 3.5): O, the saved (shift,
 * 1/l) per row, tile flags and recovery. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

/* Sink logit in the units of S (as forward.c: with scale_fold = exp the
   scaled logit is divided by the scale in the ALU format). */
static double sink_s(const aa_attn_ctx_t *cx, double sink) {
  return cx->r->scale_fold == AA_SCALE_EXP ? aa_attn_alu(sink / cx->scale, cx->r->alu_fmt) : sink;
}

/* The range check of [blackwell-fa] section 3.2: "every weight and the row sum
   stay finite, non-zero and inside the encoded range", the range being
   [2^fwd.guard_lo, 2^fwd.guard_hi) (lo = -inf admits zero). */
static int in_range(double w, double lo2, double hi2) {
  return isfinite(w) && w >= lo2 && w < hi2;
}

/* Natural-log LSE equivalent to the saved (shift b, row sum l): the weights
   were exp2(S*c - b) (exp2-fma) or exp(S*c - b) (natural), so
   LSE = (b + log2 l) ln 2 or b + log l; formed in binary64 and rounded to
   lse_fmt (only LSE-reading consumers use it: an LSE backward, dsinks). */
static double lse_equiv(const aa_attn_ctx_t *cx, double b, double l) {
  if (aa_attn_exp2form(cx->r)) return aa_attn_rnd((b + log2(l)) * 0.69314718055994530942, cx->r->fwd_lse_fmt);
  return aa_attn_rnd(b + log(l), cx->r->fwd_lse_fmt);
}

int aa_attn_fwd_tile_shifted(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq,
                             double *qe, double *S, double *P, uint8_t *vis, double *acc, double *m, double *l) {
  const aa_recipe_t *r = cx->r;
  const aa_problem_t *pb = cx->pb;
  aa_fmt_t alu = r->alu_fmt;
  size_t d = cx->d, n_q = cx->n_q, n_k = cx->n_k, kvh = h / cx->group;
  size_t tkk = r->fwd_tile_k ? r->fwd_tile_k : n_k;
  const double *K = cx->K + kvh * n_k * d, *V = cx->V + kvh * n_k * d;
  const double *sinks = cx->sinks != NULL ? cx->sinks + h * pb->num_sinks : NULL;
  int guarded = r->fwd_softmax == AA_SOFTMAX_GUARDED;
  size_t sub = guarded && r->fwd_sub_q != 0 && r->fwd_sub_q < tq ? r->fwd_sub_q : tq;
  size_t tqf = r->fwd_tile_q ? r->fwd_tile_q : n_q;
  if (tqf > n_q) tqf = n_q;
  size_t tile = h * out->fwd_q_tiles + i0 / tqf, skipped = 0;
  double lo2 = exp2(r->fwd_guard_lo), hi2 = exp2(r->fwd_guard_hi);
  int ok = 1, st;
  uint8_t *seen = calloc(tq, 1); /* row has a visible key (or a sink) */
  if (seen == NULL) return AA_ENOMEM;

  aa_attn_load_q(cx, qe, cx->Q + (h * n_q + i0) * d, tq);
  memset(acc, 0, tq * d * sizeof *acc);
  for (size_t a = 0; a < tq; a++) {
    /* m holds the row's shift b in exp-argument units. Section 3.1: one
       constant for every row (held in the ALU format, as a kernel constant);
       section 3.2: unset (NaN) until the row's first visible key block. */
    m[a] = guarded ? NAN : aa_attn_rnd(r->fwd_shift, alu);
    l[a] = 0;
    if (sinks != NULL && !guarded) {
      /* Sinks join the row sum first (as in the online forward). */
      for (size_t s = 0; s < pb->num_sinks; s++) {
        double p = aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_fma(sink_s(cx, sinks[s]), cx->c, -m[a], alu));
        double pr = aa_attn_rnd(p, r->fwd_p_fmt);
        l[a] = aa_attn_rnd(l[a] + (r->fwd_rowsum_rounded ? pr : p), r->fwd_rowsum_fmt);
      }
      seen[a] = pb->num_sinks > 0;
    }
  }
  for (size_t j0 = 0; j0 < n_k; j0 += tkk) {
    size_t tk = n_k - j0 < tkk ? n_k - j0 : tkk;
    /* A key block no row of the tile sees is never visited (causal kernels
       stop at the diagonal); exact, as in the online forward. */
    if (aa_attn_visible(cx, vis, i0, tq, j0, tk) == 0) continue;
    for (size_t s0 = 0; s0 < tq; s0 += sub) {
      size_t sr = tq - s0 < sub ? tq - s0 : sub, nv = 0;
      for (size_t x = s0 * tk; x < (s0 + sr) * tk; x++)
        nv += vis[x];
      if (nv == 0) {
        /* Section 3.4: a fully masked (query group, key block) contraction
           of the diagonal is skipped before QK and PV; its weights are 0,
           so skipping changes no value (acc + 0 = acc exactly). */
        skipped++;
        continue;
      }
      /* Rows are independent in the gemm models, so scoring a row group on
         its own gives the values of the whole-tile product. */
      st = aa_attn_scores(cx, S + s0 * tk, qe + s0 * d, sr, K + j0 * d, tk, r->fwd_acc_qk);
      if (st != AA_OK) goto fail;
      aa_attn_score_mod(cx, S + s0 * tk, NULL, h, i0 + s0, sr, j0, tk);
      for (size_t a = s0; a < s0 + sr; a++) {
        double *srow = S + a * tk, *prow = P + a * tk;
        const uint8_t *vrow = vis + a * tk;
        if (isnan(m[a])) {
          /* Section 3.2: the anchor is the max of the row's first visible
             block, formed as FA2's max_scaled = m * scale_log2 (one ALU
             multiply); later blocks are not rescaled against it. */
          double mx = -INFINITY;
          for (size_t b = 0; b < tk; b++)
            if (vrow[b] && srow[b] > mx) mx = srow[b];
          if (mx > -INFINITY) m[a] = aa_attn_alu(mx * cx->c, alu);
        }
        if (isnan(m[a])) {
          for (size_t b = 0; b < tk; b++)
            prow[b] = 0;
          continue;
        }
        seen[a] = 1;
        double bb = m[a], la = l[a];
        const uint8_t *krow = cx->keep_fwd != NULL ? cx->keep_fwd + ((h * n_q + i0 + a) * n_k + j0) : NULL;
        for (size_t b = 0; b < tk; b++) {
          if (!vrow[b]) {
            prow[b] = 0;
            continue;
          }
          /* Section 3.5: the scale folded into the FP32 QK result by the
             exp2 FFMA, exp2(fma(S, scale*log2e, -shift)), K unscaled. */
          double p = aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_fma(srow[b], cx->c, -bb, alu));
          double pr = aa_attn_rnd(p, r->fwd_p_fmt); /* BF16 weight, the PV operand */
          if (!in_range(pr, lo2, hi2)) ok = 0;
          /* Section 3.5: the denominator sums the BF16-rounded weights in
             FP32 (fwd.rowsum_rounded), so the rounded weights times 1/l sum
             to one only up to the FP32 additions. */
          la = aa_attn_rnd(la + (r->fwd_rowsum_rounded ? pr : p), r->fwd_rowsum_fmt);
          prow[b] = (krow != NULL && !krow[b]) ? 0.0 : pr;
        }
        l[a] = la;
      }
      /* No accumulator rescaling (section 3.1): O keeps accumulating P V. */
      st = aa_gemm(acc + s0 * d, d, P + s0 * tk, tk, 0, V + j0 * d, d, 0, sr, d, tk, 1, r->fwd_acc_pv);
      if (st != AA_OK) goto fail;
      if (!aa_accum_native(r->fwd_acc_pv, r->fwd_o_acc_fmt))
        for (size_t x = s0 * d; x < (s0 + sr) * d; x++)
          acc[x] = aa_attn_rnd(acc[x], r->fwd_o_acc_fmt);
    }
  }
  for (size_t a = 0; a < tq; a++) {
    if (guarded && sinks != NULL && pb->num_sinks > 0) {
      /* Guarded rows with sinks: the anchor is the first block's max (or
         the largest sink when no key is visible); the sink weights are added
         after the keys (the seeds do not cover sinks on this route). */
      if (isnan(m[a])) {
        double mx = -INFINITY;
        for (size_t s = 0; s < pb->num_sinks; s++)
          mx = fmax(mx, sink_s(cx, sinks[s]));
        m[a] = aa_attn_alu(mx * cx->c, alu);
      }
      for (size_t s = 0; s < pb->num_sinks; s++) {
        double p = aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_fma(sink_s(cx, sinks[s]), cx->c, -m[a], alu));
        double pr = aa_attn_rnd(p, r->fwd_p_fmt);
        l[a] = aa_attn_rnd(l[a] + (r->fwd_rowsum_rounded ? pr : p), r->fwd_rowsum_fmt);
      }
      seen[a] = 1;
    }
    if (seen[a] && !in_range(l[a], lo2 > 0 ? lo2 : 0x1p-1074, hi2))
      ok = 0; /* the row sum: finite, non-zero, in range */
  }
  if (guarded && skipped > 0) {
#pragma omp atomic
    out->contractions_skipped += skipped;
  }
  if (!ok) {
    out->tile_flagged[tile] = 1;
#pragma omp atomic
    out->tiles_flagged++;
  }
  if (guarded && !ok) {
    /* Section 3.2: the whole query tile is recomputed with conditionally
       rescaled online normalisation (fwd.rescale_threshold) and saves LSE. */
    free(seen);
    st = aa_attn_fwd_tile_online(cx, out, h, i0, tq, qe, S, P, vis, acc, m, l);
    size_t rec = 0;
    for (size_t a = 0; a < tq; a++) {
      size_t row = h * n_q + i0 + a;
      out->row_ckpt[row] = AA_ROW_CKPT_LSE;
      out->recip.data[row] = 0;
      out->shift.data[row] = 0;
      rec += out->lse.data[row] != -INFINITY;
    }
#pragma omp atomic
    out->rows_recovered += rec;
    return st;
  }
  for (size_t a = 0; a < tq; a++) {
    size_t row = h * n_q + i0 + a;
    double *o = out->o.data + row * d;
    const double *arow = acc + a * d;
    if (!seen[a]) { /* no visible key, no sink: O = 0, LSE = -inf (the oracle's convention) */
      for (size_t c = 0; c < d; c++)
        o[c] = 0;
      out->lse.data[row] = -INFINITY;
      out->row_ckpt[row] = AA_ROW_CKPT_LSE;
      out->recip.data[row] = 0;
      out->shift.data[row] = 0;
      continue;
    }
    /* Section 3.5: the FP32 reciprocal of the row sum is saved; O uses it
       (fwd.o_norm = reciprocal) with the dropout rescale folded in (FA2). */
    double rr = aa_attn_alu(1.0 / l[a], alu);
    if (r->fwd_o_norm == AA_NORM_RECIPROCAL) {
      double rk = cx->keep_fwd != NULL ? aa_attn_alu(rr * cx->ks, alu) : rr;
      for (size_t c = 0; c < d; c++)
        o[c] = aa_attn_rnd(aa_attn_alu(arow[c] * rk, alu), r->io_fmt);
    } else {
      for (size_t c = 0; c < d; c++) {
        double x = aa_attn_alu(arow[c] / l[a], alu);
        if (cx->keep_fwd != NULL) x = aa_attn_alu(x * cx->ks, alu);
        o[c] = aa_attn_rnd(x, r->io_fmt);
      }
    }
    out->recip.data[row] = aa_attn_rnd(rr, r->fwd_lse_fmt);
    out->shift.data[row] = aa_attn_rnd(m[a], r->fwd_lse_fmt);
    out->row_ckpt[row] = AA_ROW_CKPT_RECIP;
    out->lse.data[row] = lse_equiv(cx, m[a], l[a]);
  }
  free(seen);
  return AA_OK;
fail:
  free(seen);
  return st;
}
