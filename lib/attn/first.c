/* attnacc: the first non-finite value of an emulated run and the operands that met there (aa_attn_first_t). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>

#include "attn-impl.h"

/* Deterministic order (attn.h): site, then h, i, j. Threads race only for the lock, never for the result. */
static int first_before(aa_first_site_t s, size_t h, size_t i, size_t j, const aa_attn_first_t *f) {
  if (!f->found || s != f->site) return !f->found || s < f->site;
  if (h != f->h) return h < f->h;
  if (i != f->i) return i < f->i;
  return j < f->j;
}

void aa_attn_first_note(const aa_attn_ctx_t *cx, aa_first_site_t site, size_t h, size_t i, size_t j, double value,
                        double a, double b, double c) {
  aa_attn_first_t *f = cx->first;
  if (f == NULL) return;
#ifdef _OPENMP
#pragma omp critical(aa_attn_first)
#endif
  if (first_before(site, h, i, j, f)) *f = (aa_attn_first_t){1, site, h, i, j, value, a, b, c, 0};
}

void aa_attn_first_fwd(const aa_attn_ctx_t *cx, const aa_attn_result_t *out) {
  size_t n_q = cx->n_q, d = cx->d;
  for (size_t h = 0; h < cx->pb->heads; h++)
    for (size_t i = 0; i < n_q; i++) {
      double L = out->lse.data[h * n_q + i];
      for (size_t c = 0; c < d; c++) {
        double o = out->o.data[(h * n_q + i) * d + c];
        if (!isfinite(o) || isnan(L) || L == INFINITY) { /* LSE = -Inf is an empty row's definition */
          aa_attn_first_note(cx, AA_FIRST_FWD, h, i, c, isfinite(o) ? L : o, o, L, 0);
          return;
        }
      }
    }
}

const char *aa_attn_first_site_name(aa_first_site_t s) {
  static const char *const names[AA_FIRST_COUNT] = {"fwd.o", "empty-row", "bwd.score", "bwd.exp", "bwd.ds"};
  return (unsigned)s < AA_FIRST_COUNT ? names[s] : "?";
}

void aa_attn_first_format(char *buf, size_t cap, const aa_attn_first_t *f) {
  size_t h = f->h, i = f->i, j = f->j;
  if (cap == 0) return;
  if (!f->found) {
    snprintf(buf, cap, "no NaN or Inf was created");
    return;
  }
  switch (f->site) {
  case AA_FIRST_FWD:
    snprintf(buf, cap, "the forward's output is non-finite at (h %zu, i %zu, column %zu): O = %.9g, LSE = %.9g", h, i,
             j, f->a, f->b);
    break;
  case AA_FIRST_EMPTY:
    snprintf(buf, cap, "row (h %zu, i %zu) has no visible key: softmax 0 / 0 = NaN (mask.empty_nan), LSE = %.9g", h,
             i, f->a);
    break;
  case AA_FIRST_SCORE:
    snprintf(buf, cap, "the score q.k overflowed at (h %zu, i %zu, j %zu): s = %.9g", h, i, j, f->a);
    break;
  case AA_FIRST_EXP:
    snprintf(buf, cap, "exp of s - LSE %s at (h %zu, i %zu, j %zu%s): s = %.9g, LSE = %.9g, argument = %.9g -> %.9g",
             isnan(f->value) ? "met NaN" : "overflowed", h, i, j,
             f->phantom ? ", a key slot past n_k (mask.phantom_tile)" : "", f->a, f->b, f->c, f->value);
    break;
  case AA_FIRST_DS:
    snprintf(buf, cap, "dS = (dP - D) P is %.9g at (h %zu, i %zu, j %zu): dP = %.9g, D = %.9g, P = %.9g", f->value, h,
             i, j, f->a, f->b, f->c);
    break;
  default:
    snprintf(buf, cap, "?");
  }
}
