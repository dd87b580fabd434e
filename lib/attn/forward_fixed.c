/* attnacc: the fixed-shift and guarded forwards of [blackwell-fa] (sections 3.1, 3.2, 3.4, 3.5): O, the saved (shift,
 * 1/l) per row, tile flags and recovery. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-core.h" /* aa_core_in_range: the range check, one definition for CPU and GPU */
#include "attn-impl.h"

/* Sink logit in the units of S (as forward.c: with scale_fold = exp the
   scaled logit is divided by the scale in the ALU format). */
static double sink_s(const aa_attn_ctx_t *cx, double sink) {
  return cx->r->scale_fold == AA_SCALE_EXP ? aa_attn_alu(sink / cx->scale, cx->r->alu_fmt) : sink;
}

double aa_attn_lse_equiv(const aa_attn_ctx_t *cx, double b, double l) {
  if (aa_attn_exp2form(cx->r)) return aa_attn_rnd((b + log2(l)) * 0.69314718055994530942, cx->r->fwd_lse_fmt);
  return aa_attn_rnd(b + log(l), cx->r->fwd_lse_fmt);
}

/* One (head, q tile) of the shifted forward: the state its steps share. */
typedef struct {
  const aa_attn_ctx_t *cx;
  aa_attn_result_t *out;
  size_t h, i0, tq;
  size_t sub; /* rows per contraction: fwd.sub_q with the guarded forward, else the tile */
  double *qe, *S, *P, *acc, *m, *l;
  uint8_t *vis;
  uint8_t *seen;       /* row has a visible key (or a sink) */
  const double *sinks; /* the head's sink logits, or NULL */
  double lo2, hi2;     /* the range check's [2^fwd.guard_lo, 2^fwd.guard_hi) */
  int guarded;
  int ok;         /* every weight and row sum so far in range */
  size_t skipped; /* fully masked contractions skipped (section 3.4) */
} shifted_t;

/* The sink weights of row a added to its row sum against the row's shift. */
static void add_sink_weights(shifted_t *t, size_t a) {
  const aa_attn_ctx_t *cx = t->cx;
  const aa_recipe_t *r = cx->r;
  for (size_t s = 0; s < cx->pb->num_sinks; s++) {
    double p = aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_fma(sink_s(cx, t->sinks[s]), cx->c, -t->m[a], r->alu_fmt));
    double pr = aa_attn_p_rnd(r, p);
    t->l[a] = aa_attn_rnd(t->l[a] + (r->fwd_rowsum_rounded ? pr : p), r->fwd_rowsum_fmt);
  }
}

/* Q loaded, O zeroed, every row's shift and row sum set. */
static void open_rows(shifted_t *t) {
  const aa_attn_ctx_t *cx = t->cx;
  aa_attn_load_q(cx, t->qe, cx->Q + (t->h * cx->n_q + t->i0) * cx->d, t->tq);
  memset(t->acc, 0, t->tq * cx->d * sizeof *t->acc);
  for (size_t a = 0; a < t->tq; a++) {
    /* m holds the row's shift b in exp-argument units. Section 3.1: one
       constant for every row (held in the ALU format, as a kernel constant);
       section 3.2: unset (NaN) until the row's first visible key block. */
    t->m[a] = t->guarded ? NAN : aa_attn_rnd(cx->r->fwd_shift, cx->r->alu_fmt);
    t->l[a] = 0;
    if (t->sinks != NULL && !t->guarded) {
      /* Sinks join the row sum first (as in the online forward). */
      add_sink_weights(t, a);
      t->seen[a] = cx->pb->num_sinks > 0;
    }
  }
}

/* Row a of a scored tk-key block at j0: its anchor if still unset, then the
   weights into P and the row sum, each checked against the range. */
static void shifted_row_weights(shifted_t *t, size_t a, size_t j0, size_t tk) {
  const aa_attn_ctx_t *cx = t->cx;
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  double *srow = t->S + a * tk, *prow = t->P + a * tk;
  const uint8_t *vrow = t->vis + a * tk;
  if (isnan(t->m[a])) {
    /* Section 3.2: the anchor is the max of the row's first visible
       block, formed as FA2's max_scaled = m * scale_log2 (one ALU
       multiply); later blocks are not rescaled against it. */
    double mx = -INFINITY;
    for (size_t b = 0; b < tk; b++)
      if (vrow[b] && srow[b] > mx) mx = srow[b];
    if (mx > -INFINITY) t->m[a] = aa_attn_alu(mx * cx->c, alu);
  }
  if (isnan(t->m[a])) {
    for (size_t b = 0; b < tk; b++)
      prow[b] = 0;
    return;
  }
  t->seen[a] = 1;
  double bb = t->m[a], la = t->l[a];
  const uint8_t *krow = cx->keep_fwd != NULL ? cx->keep_fwd + ((t->h * cx->n_q + t->i0 + a) * cx->n_k + j0) : NULL;
  for (size_t b = 0; b < tk; b++) {
    if (!vrow[b]) {
      prow[b] = 0;
      continue;
    }
    /* Section 3.5: the scale folded into the FP32 QK result by the
       exp2 FFMA, exp2(fma(S, scale*log2e, -shift)), K unscaled. */
    double p = aa_attn_wexp(cx, cx->wexp_fwd, aa_attn_fma(srow[b], cx->c, -bb, alu));
    double pr = aa_attn_p_rnd(r, p); /* BF16 weight, the PV operand */
    if (!aa_core_in_range(pr, t->lo2, t->hi2)) t->ok = 0;
    /* Section 3.5: the denominator sums the BF16-rounded weights in
       FP32 (fwd.rowsum_rounded), so the rounded weights times 1/l sum
       to one only up to the FP32 additions. */
    la = aa_attn_rnd(la + (r->fwd_rowsum_rounded ? pr : p), r->fwd_rowsum_fmt);
    prow[b] = (krow != NULL && !krow[b]) ? 0.0 : pr;
  }
  t->l[a] = la;
}

/* The contraction of rows [s0, s0 + sr) with the tk-key block at j0, whose
   visibility is in vis: scores, weights, P V added into acc. */
static int row_group(shifted_t *t, size_t s0, size_t sr, size_t j0, size_t tk) {
  const aa_attn_ctx_t *cx = t->cx;
  const aa_recipe_t *r = cx->r;
  size_t d = cx->d, kvh = t->h / cx->group, nv = 0;
  const double *K = cx->K + kvh * cx->n_k * d, *V = cx->V + kvh * cx->n_k * d;
  for (size_t x = s0 * tk; x < (s0 + sr) * tk; x++)
    nv += t->vis[x];
  if (nv == 0) {
    /* Section 3.4: a fully masked (query group, key block) contraction
       of the diagonal is skipped before QK and PV; its weights are 0,
       so skipping changes no value (acc + 0 = acc exactly). */
    t->skipped++;
    return AA_OK;
  }
  /* Rows are independent in the gemm models, so scoring a row group on
     its own gives the values of the whole-tile product. */
  int st = aa_attn_scores(cx, t->S + s0 * tk, t->qe + s0 * d, sr, K + j0 * d, tk, r->fwd_acc_qk, r->fwd_qk_gemv);
  if (st != AA_OK) return st;
  aa_attn_score_mod(cx, t->S + s0 * tk, NULL, t->h, t->i0 + s0, sr, j0, tk);
  for (size_t a = s0; a < s0 + sr; a++)
    shifted_row_weights(t, a, j0, tk);
  aa_attn_quant_rows(r, r->quant_p, t->P + s0 * tk, sr, tk, tk);
  /* No accumulator rescaling (section 3.1): O keeps accumulating P V. */
  return aa_attn_quant_pv(t->cx, t->h / t->cx->group, t->acc + s0 * d, t->P + s0 * tk, V + j0 * d, sr, tk);
}

/* Every key block in order, each in row groups of t->sub rows. */
static int key_blocks(shifted_t *t) {
  const aa_attn_ctx_t *cx = t->cx;
  size_t n_k = cx->n_k, tkk = cx->r->fwd_tile_k ? cx->r->fwd_tile_k : n_k;
  for (size_t j0 = 0; j0 < n_k; j0 += tkk) {
    size_t tk = n_k - j0 < tkk ? n_k - j0 : tkk;
    /* A key block no row of the tile sees is never visited (causal kernels
       stop at the diagonal); exact, as in the online forward. */
    if (aa_attn_visible(cx, t->vis, t->h, t->i0, t->tq, j0, tk) == 0) continue;
    for (size_t s0 = 0; s0 < t->tq; s0 += t->sub) {
      size_t sr = t->tq - s0 < t->sub ? t->tq - s0 : t->sub;
      int st = row_group(t, s0, sr, j0, tk);
      if (st != AA_OK) return st;
    }
  }
  return AA_OK;
}

/* After the keys: the guarded rows' sinks, then each row sum's range check. */
static void close_rows(shifted_t *t) {
  const aa_attn_ctx_t *cx = t->cx;
  size_t ns = cx->pb->num_sinks;
  for (size_t a = 0; a < t->tq; a++) {
    if (t->guarded && t->sinks != NULL && ns > 0) {
      /* Guarded rows with sinks: the anchor is the first block's max (or
         the largest sink when no key is visible); the sink weights are added
         after the keys (the seeds do not cover sinks on this route). */
      if (isnan(t->m[a])) {
        double mx = -INFINITY;
        for (size_t s = 0; s < ns; s++)
          mx = fmax(mx, sink_s(cx, t->sinks[s]));
        t->m[a] = aa_attn_alu(mx * cx->c, cx->r->alu_fmt);
      }
      add_sink_weights(t, a);
      t->seen[a] = 1;
    }
    if (t->seen[a] && !aa_core_in_range(t->l[a], t->lo2 > 0 ? t->lo2 : 0x1p-1074, t->hi2))
      t->ok = 0; /* the row sum: finite, non-zero, in range */
  }
}

/* Section 3.2: a flagged guarded tile is recomputed whole with
   conditionally rescaled online normalisation (fwd.rescale_threshold) and
   saves LSE. */
static int recover_tile(shifted_t *t) {
  const aa_attn_ctx_t *cx = t->cx;
  aa_attn_result_t *out = t->out;
  int st = aa_attn_fwd_tile_online(cx, out, t->h, t->i0, t->tq, t->qe, t->S, t->P, t->vis, t->acc, t->m, t->l);
  size_t rec = 0;
  for (size_t a = 0; a < t->tq; a++) {
    size_t row = t->h * cx->n_q + t->i0 + a;
    out->row_ckpt[row] = AA_ROW_CKPT_LSE;
    out->recip.data[row] = 0;
    out->shift.data[row] = 0;
    rec += out->lse.data[row] != -INFINITY;
  }
#pragma omp atomic
  out->rows_recovered += rec;
  return st;
}

/* The O rows and the saved (shift, 1/l) of an unflagged tile. */
static void write_rows(const shifted_t *t) {
  const aa_attn_ctx_t *cx = t->cx;
  const aa_recipe_t *r = cx->r;
  aa_attn_result_t *out = t->out;
  aa_fmt_t alu = r->alu_fmt;
  size_t d = cx->d;
  for (size_t a = 0; a < t->tq; a++) {
    size_t row = t->h * cx->n_q + t->i0 + a;
    double *o = out->o.data + row * d;
    const double *arow = t->acc + a * d;
    if (!t->seen[a]) { /* no visible key, no sink: O = 0, LSE = -inf (the oracle's convention) */
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
    double rr = aa_attn_alu(1.0 / t->l[a], alu);
    if (r->fwd_o_norm == AA_NORM_RECIPROCAL) {
      double rk = cx->keep_fwd != NULL ? aa_attn_alu(rr * cx->ks, alu) : rr;
      for (size_t c = 0; c < d; c++)
        o[c] = aa_attn_rnd(aa_attn_alu(arow[c] * rk, alu), r->io_fmt);
    } else {
      for (size_t c = 0; c < d; c++) {
        double x = aa_attn_alu(arow[c] / t->l[a], alu);
        if (cx->keep_fwd != NULL) x = aa_attn_alu(x * cx->ks, alu);
        o[c] = aa_attn_rnd(x, r->io_fmt);
      }
    }
    out->recip.data[row] = aa_attn_rnd(rr, r->fwd_lse_fmt);
    out->shift.data[row] = aa_attn_rnd(t->m[a], r->fwd_lse_fmt);
    out->row_ckpt[row] = AA_ROW_CKPT_RECIP;
    out->lse.data[row] = aa_attn_lse_equiv(cx, t->m[a], t->l[a]);
  }
}

/* The tile's steps once its state is set: rows opened, key blocks, rows
   closed, the counters and flag, then recovery or the outputs. */
static int shifted_tile(shifted_t *t) {
  aa_attn_result_t *out = t->out;
  open_rows(t);
  int st = key_blocks(t);
  if (st != AA_OK) return st;
  close_rows(t);
  if (t->guarded && t->skipped > 0) {
#pragma omp atomic
    out->contractions_skipped += t->skipped;
  }
  if (!t->ok) {
    size_t tqf = t->cx->r->fwd_tile_q ? t->cx->r->fwd_tile_q : t->cx->n_q;
    if (tqf > t->cx->n_q) tqf = t->cx->n_q;
    out->tile_flagged[t->h * out->fwd_q_tiles + t->i0 / tqf] = 1;
#pragma omp atomic
    out->tiles_flagged++;
  }
  if (t->guarded && !t->ok) return recover_tile(t);
  write_rows(t);
  return AA_OK;
}

int aa_attn_fwd_tile_shifted(const aa_attn_ctx_t *cx, aa_attn_result_t *out, size_t h, size_t i0, size_t tq,
                             double *qe, double *S, double *P, uint8_t *vis, double *acc, double *m, double *l) {
  const aa_recipe_t *r = cx->r;
  int guarded = r->fwd_softmax == AA_SOFTMAX_GUARDED;
  shifted_t t = {
      .cx = cx,
      .out = out,
      .h = h,
      .i0 = i0,
      .tq = tq,
      .sub = guarded && r->fwd_sub_q != 0 && r->fwd_sub_q < tq ? r->fwd_sub_q : tq,
      .qe = qe,
      .S = S,
      .P = P,
      .acc = acc,
      .m = m,
      .l = l,
      .vis = vis,
      .seen = calloc(tq, 1),
      .sinks = cx->sinks != NULL ? cx->sinks + h * cx->pb->num_sinks : NULL,
      .lo2 = exp2(r->fwd_guard_lo),
      .hi2 = exp2(r->fwd_guard_hi),
      .guarded = guarded,
      .ok = 1,
  };
  if (t.seen == NULL) return AA_ENOMEM;
  int st = shifted_tile(&t);
  free(t.seen);
  return st;
}
