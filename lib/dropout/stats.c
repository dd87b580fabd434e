/* attnacc: dropout mask statistics: realised keep rate, forward/backward mismatch, E[O] bias estimate over seeds. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>

#include "dropout-impl.h"

static size_t count_kept(const uint8_t *keep, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    c += keep[i] != 0;
  return c;
}

double aa_dropout_keep_rate(const uint8_t *keep, size_t n) {
  return n == 0 ? 0.0 : (double)count_kept(keep, n) / (double)n;
}

size_t aa_dropout_mismatch_count(const uint8_t *a, const uint8_t *b, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    c += (a[i] != 0) != (b[i] != 0);
  return c;
}

double aa_dropout_mismatch(const uint8_t *a, const uint8_t *b, size_t n) {
  return n == 0 ? 0.0 : (double)aa_dropout_mismatch_count(a, b, n) / (double)n;
}

int aa_dropout_bias_estimate(double *mean, double *half_width, const aa_dropout_t *d, size_t heads, size_t n_q,
                             size_t n_k, unsigned nseeds, aa_error_t *err) {
  int st = aa_dropout_check(d, err);
  if (st != AA_OK) return st;
  if (nseeds < 1) return aa_error_set(err, AA_EINVAL, "dropout: bias estimate needs at least one seed");
  size_t hq, total;
  if (aa_size_mul(&hq, heads, n_q) != AA_OK || aa_size_mul(&total, hq, n_k) != AA_OK || total == 0)
    return aa_error_set(err, AA_EINVAL, "dropout: bias estimate needs a non-empty mask");
  uint8_t *keep = malloc(total);
  if (keep == NULL) return aa_error_set(err, AA_ENOMEM, "dropout: cannot allocate %zu mask bytes", total);
  aa_dropout_t ds = *d;
  /* Welford's running mean and sum of squared deviations (no cancellation
     when the b_s are small and close together). */
  double m = 0, m2 = 0;
  for (unsigned s = 0; s < nseeds; s++) {
    double ks;
    ds.seed = d->seed + ((uint64_t)s << 32);
    st = aa_dropout_mask_fwd(keep, &ks, &ds, heads, n_q, n_k, err);
    if (st != AA_OK) break;
    double b = ks * ((double)count_kept(keep, total) / (double)total) - 1.0;
    double delta = b - m;
    m += delta / (s + 1);
    m2 += delta * (b - m);
  }
  free(keep);
  if (st != AA_OK) return st;
  *mean = m;
  if (half_width != NULL)
    /* Sample variance with the K-1 denominator; the draws are independent
       (distinct seeds), so the mean's standard error is sd/sqrt(K). */
    *half_width = nseeds > 1 ? 1.96 * sqrt(m2 / (nseeds - 1)) / sqrt((double)nseeds) : 0.0;
  return AA_OK;
}
