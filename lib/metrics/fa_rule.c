/* attnacc: the flash-attention pass rule, max_abs <= factor * max_abs of a naive same-precision reference. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "metrics.h"

/* [fa2] tests: the flash-attention tests pass when
   max|out - ref| <= factor * max|out_naive - ref| with factor 2 for the
   forward output and 3 for the gradients. PyTorch's max() propagates NaN and
   a comparison with NaN is false, so a NaN anywhere fails; an Inf in the
   naive output makes its max_abs infinite. */
void aa_metrics_fa_rule(aa_metrics_t *m, const aa_metrics_t *naive, double factor) {
  double ref = naive->max_abs;
  if (naive->nan > 0)
    ref = NAN;
  else if (naive->inf > 0)
    ref = INFINITY;
  m->fa_factor = factor;
  m->fa_ref_max_abs = ref;
  if (m->nan > 0 || m->inf > 0 || isnan(m->max_abs))
    m->fa_ratio = m->nan > 0 ? NAN : INFINITY;
  else if (ref == 0)
    m->fa_ratio = m->max_abs == 0 ? 0.0 : INFINITY;
  else
    m->fa_ratio = m->max_abs / ref;
  m->fa_pass = m->nan == 0 && m->inf == 0 && !isnan(m->max_abs) && m->max_abs <= factor * ref;
}
