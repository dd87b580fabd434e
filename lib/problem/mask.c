/* attnacc: an attention mask broadcast over a batch folded into the heads, with per-sequence key lengths. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "problem.h"

void aa_problem_mask_expand(double *out, const double *mask, size_t mb, size_t mh, size_t batch, size_t heads,
                            size_t n_q, size_t n_k, const size_t *key_len, size_t nlen) {
  size_t nn = n_q * n_k;
  for (size_t bh = 0; bh < batch * heads; bh++) {
    size_t b = bh / heads, h = bh % heads, len = nlen == 0 ? n_k : key_len[nlen == 1 ? 0 : b];
    const double *src = mask != NULL ? mask + ((mb == 1 ? 0 : b) * mh + (mh == 1 ? 0 : h)) * nn : NULL;
    for (size_t e = 0; e < nn; e++)
      out[bh * nn + e] = e % n_k >= len ? -INFINITY : src != NULL ? src[e] : 0.0;
  }
}
