/* attnacc: the fixed-shift and guarded forwards on the GPU emulation: the tile flags, recovery and saved (shift, 1/l)
 * that forward_fixed.c writes, from the rows the core computed. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

#include "attn-cuda.h"

/* The rows of a tile are independent until forward_fixed.c's tile flag: one weight or row sum out of range flags
   the whole tile, and a guarded tile then recomputes every row online. So the core (aa_core_shifted_row) leaves
   each row's O, shift, row sum and flags, and this file makes the per-tile decisions on the host, in
   forward_fixed.c's order: close_rows, the flag, recover_tile or write_rows. */

/* forward_fixed.c close_rows and the weights' check: 1 when every row of the tile passed. */
static int tile_ok(const aa_core_fwd_t *p, size_t row0, size_t tq) {
  int ok = 1;
  double lo = p->lo2 > 0 ? p->lo2 : 0x1p-1074;
  for (size_t a = 0; a < tq; a++) {
    unsigned char f = p->rflag[row0 + a];
    if (!(f & 2) || ((f & 1) && !aa_core_in_range(p->Lsum[row0 + a], lo, p->hi2))) ok = 0;
  }
  return ok;
}

/* forward_fixed.c row_group's skip count for one tile (the same for every head: the rows' keys do not depend on
   it): the (row group, key block) contractions of the blocks the tile visits that no row of the group sees. */
static size_t tile_skips(const aa_core_fwd_t *p, size_t i0, size_t tq) {
  size_t n = 0;
  for (size_t j0 = 0; j0 < p->n_k; j0 += p->tk) {
    size_t tk = p->n_k - j0 < p->tk ? p->n_k - j0 : p->tk;
    if (!aa_core_tile_seen(p, i0, tq, j0, tk)) continue;
    for (size_t s0 = i0; s0 < i0 + tq; s0 += p->sub)
      n += !aa_core_tile_seen(p, s0, i0 + tq - s0 < p->sub ? i0 + tq - s0 : p->sub, j0, tk);
  }
  return n;
}

/* forward_fixed.c recover_tile: the tile's rows again by the online forward (forward.c, the core's split row with
   one split) on host threads, whose libm is the CPU's; their P-cast counters join the totals. */
static void recover(const aa_attn_ctx_t *cx, aa_attn_result_t *out, const aa_core_fwd_t *p0, size_t h, size_t i0,
                    size_t tq) {
  aa_core_fwd_t p = *p0;
  p.shifted = 0, p.doubt = NULL;
  size_t rec = 0;
  aa_core_row_t *w = malloc(sizeof *w);
  float *P = malloc(AA_CORE_MAXTK * sizeof *P);
  for (size_t a = 0; a < tq && w != NULL && P != NULL; a++) {
    size_t row = h * cx->n_q + i0 + a;
    w->cast = w->over = w->under = 0, w->pmax = 0;
    aa_core_split_row(&p, h, i0 + a, 0, w, P);
    out->p_cast += w->cast, out->p_over += w->over, out->p_under += w->under;
    if (w->pmax > out->p_max) out->p_max = w->pmax;
    for (size_t c = 0; c < cx->d; c++)
      out->o.data[row * cx->d + c] = p.O[row * cx->d + c];
    out->lse.data[row] = p.LSE[row];
    out->row_ckpt[row] = AA_ROW_CKPT_LSE;
    out->recip.data[row] = 0, out->shift.data[row] = 0;
    rec += p.LSE[row] != -INFINITY;
  }
  free(w), free(P);
  out->rows_recovered += rec;
}

/* forward_fixed.c write_rows: the saved (shift, 1/l) and the equivalent LSE of each row (O came from the core). */
static void write_rows(const aa_attn_ctx_t *cx, aa_attn_result_t *out, const aa_core_fwd_t *p, size_t row0,
                       size_t tq) {
  aa_fmt_t lf = cx->r->fwd_lse_fmt;
  for (size_t row = row0; row < row0 + tq; row++) {
    if (!(p->rflag[row] & 1)) { /* no visible key: O = 0, LSE = -inf */
      out->lse.data[row] = -INFINITY;
      out->row_ckpt[row] = AA_ROW_CKPT_LSE;
      out->recip.data[row] = 0, out->shift.data[row] = 0;
      continue;
    }
    out->recip.data[row] = aa_attn_rnd(aa_attn_alu(1.0 / p->Lsum[row], cx->r->alu_fmt), lf);
    out->shift.data[row] = aa_attn_rnd(p->Msh[row], lf);
    out->row_ckpt[row] = AA_ROW_CKPT_RECIP;
    out->lse.data[row] = aa_attn_lse_equiv(cx, p->Msh[row], p->Lsum[row]);
  }
}

void aa_attn_cuda_fixed_finish(const aa_attn_ctx_t *cx, aa_attn_result_t *out, const aa_core_fwd_t *p) {
  size_t tqf = p->tq < cx->n_q ? p->tq : cx->n_q;
  for (size_t i0 = 0; i0 < cx->n_q; i0 += tqf) {
    size_t tq = cx->n_q - i0 < tqf ? cx->n_q - i0 : tqf;
    if (p->shifted == 2) out->contractions_skipped += tile_skips(p, i0, tq) * cx->heads;
    for (size_t h = 0; h < cx->heads; h++) {
      size_t row0 = h * cx->n_q + i0;
      if (!tile_ok(p, row0, tq)) {
        out->tile_flagged[h * out->fwd_q_tiles + i0 / tqf] = 1;
        out->tiles_flagged++;
        if (p->shifted == 2) {
          recover(cx, out, p, h, i0, tq);
          continue;
        }
      }
      write_rows(cx, out, p, row0, tq);
    }
  }
}
