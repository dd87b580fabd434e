/* attnacc: the preprocessing pass of the reciprocal backward ([blackwell-fa] section 3.5): dO scaled by the saved
 * 1/l, and the per-row exp bias. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn-impl.h"

/* With P = P~ r (P~ the unnormalised weights exp2(S*c - b), r = 1/l saved
   by the forward), every backward quantity that multiplies P by a dO term
   can take r from dO instead: dV = P^T dO = P~^T (r dO), dP*P = P~ (r dO V^T)
   and D*P = P~ rowsum(O * r dO). So one linear pass forms dO~ = r dO (seed
   003 section 3.5: "applies the saved reciprocal to dO in its linear
   preprocessing pass"), rounded to bwd.do_fmt since it is the operand of
   the dV and dP products, and D is then formed from dO~ by the unchanged
   D = rowsum(O * dO) step. The quadratic loop recomputes P~ with the saved
   shift as the exp bias: no LSE load and no per-score normalisation. Rows
   that saved LSE (recovered guarded tiles, empty rows) keep dO and the LSE
   bias of the LSE backward, bit for bit. */
int aa_attn_recip_prepare(const aa_attn_ctx_t *cx, const aa_attn_result_t *out, double **dO_eff, double **bias) {
  const aa_recipe_t *r = cx->r;
  aa_fmt_t alu = r->alu_fmt;
  size_t H = cx->heads, n_q = cx->n_q, d = cx->d, rows, n;
  *dO_eff = NULL;
  *bias = NULL;
  if (aa_size_mul(&rows, H, n_q) != AA_OK || aa_size_mul(&n, rows, d) != AA_OK) return AA_ENOMEM;
  double *g = malloc((n ? n : 1) * sizeof *g), *bb = malloc((rows ? rows : 1) * sizeof *bb);
  if (g == NULL || bb == NULL) {
    free(g);
    free(bb);
    return AA_ENOMEM;
  }
  for (size_t row = 0; row < rows; row++) {
    const double *src = cx->dO + row * d;
    double *dst = g + row * d;
    if (out->row_ckpt != NULL && out->row_ckpt[row] == AA_ROW_CKPT_RECIP) {
      double rr = out->recip.data[row];
      for (size_t c = 0; c < d; c++)
        dst[c] = aa_attn_rnd(aa_attn_alu(src[c] * rr, alu), r->bwd_do_fmt);
      bb[row] = out->shift.data[row];
    } else {
      double L = out->lse.data[row];
      memcpy(dst, src, d * sizeof *dst);
      /* the LSE backward's bias (backward.c): LSE*log2e in one ALU multiply for exp2-fma */
      bb[row] = L == -INFINITY ? -INFINITY : (aa_attn_exp2form(r) ? aa_attn_alu(L * cx->l2e, alu) : L);
    }
  }
  *dO_eff = g;
  *bias = bb;
  return AA_OK;
}
