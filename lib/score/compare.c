/* attnacc: robust error measures of one output (ULP order statistics, normwise ULP, floored relative error) and the
 * rules evaluated on them. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"

/* The k-th smallest of u[0..n-1] (k < n), u reordered so that u[0..k-1] <= u[k] <= u[k+1..n-1] (Hoare's
   selection, middle pivot): the order statistics a full sort would give, in linear expected time. */
static double select_kth(double *u, size_t n, size_t k) {
  size_t lo = 0, hi = n - 1;
  while (lo < hi) {
    double pivot = u[lo + (hi - lo) / 2], t;
    size_t i = lo, j = hi;
    while (i <= j) {
      while (u[i] < pivot)
        i++;
      while (u[j] > pivot)
        j--;
      if (i <= j) {
        t = u[i], u[i] = u[j], u[j] = t;
        i++;
        if (j == 0) break;
        j--;
      }
    }
    if (k <= j)
      hi = j;
    else if (k >= i)
      lo = i;
    else
      return u[k];
  }
  return u[k];
}

/* The median, the ceil(0.99 n)-th smallest and the largest of u[0..n-1] (n > 0; u is reordered). */
static void order_stats(double *med, double *p99, double *max, double *u, size_t n) {
  size_t k99 = (size_t)ceil(0.99 * (double)n), h = n / 2;
  double m = u[0];
  for (size_t i = 1; i < n; i++)
    if (u[i] > m) m = u[i];
  *max = m;
  *p99 = select_kth(u, n, (k99 > 0 ? k99 : 1) - 1);
  *med = select_kth(u, n, h);
  if (n % 2 == 0) { /* the largest of the lower half: u[0..h-1] <= u[h] after the selection */
    double lo = u[0];
    for (size_t i = 1; i < h; i++)
      if (u[i] > lo) lo = u[i];
    *med = 0.5 * (lo + *med);
  }
}

/* ulp(x) of the binary format fmt: 2^(max(floor(log2 |x|), emin) - p + 1). */
static double fmt_ulp(double x, aa_fmt_t fmt) {
  int p, emin, e;
  switch (fmt) {
  case AA_FMT_BF16:
    p = 8, emin = -126;
    break;
  case AA_FMT_FP16:
    p = 11, emin = -14;
    break;
  default:
    p = 24, emin = -126;
    break;
  }
  if (x == 0 || !isfinite(x)) return ldexp(1.0, emin - p + 1);
  frexp(fabs(x), &e);
  e -= 1;
  if (e < emin) e = emin;
  return ldexp(1.0, e - p + 1);
}

/* The elementwise rule |a - b| <= atol + rtol |b|: ratio = max of
   |a - b| / (atol + rtol |b|) (0/0 = 0, x/0 = Inf). */
static void elementwise(aa_rule_result_t *r, const aa_tensor_t *got, const double *b, size_t n, double atol,
                        double rtol) {
  size_t nan = 0, inf = 0;
  double worst = -1;
  *r = (aa_rule_result_t){1, 0, 0, 0, atol, rtol, NAN, 0, 0, NAN, NAN};
  for (size_t i = 0; i < n; i++) {
    double a = got->data[i], d, allow, q;
    if (isnan(a) || isnan(b[i])) {
      nan++, r->fail_count++;
      continue;
    }
    if (isinf(a) && a != b[i]) {
      inf++, r->fail_count++;
      continue;
    }
    d = a == b[i] ? 0 : fabs(a - b[i]);
    allow = atol + rtol * fabs(b[i]);
    q = d == 0 ? 0 : (allow > 0 ? d / allow : INFINITY);
    if (q > 1) r->fail_count++;
    if (q > worst) {
      worst = q;
      r->worst = i;
      r->allowed = allow;
      r->worst_got = a;
      r->worst_ref = b[i];
    }
  }
  r->ratio = nan ? NAN : inf ? INFINITY : (worst < 0 ? 0 : worst);
  r->pass = nan == 0 && inf == 0 && r->fail_count == 0;
}

int aa_score_compare(aa_score_out_t *s, const char *name, const aa_tensor_t *got, const aa_oracle_out_t *ref,
                     aa_fmt_t data_fmt, aa_fmt_t ulp_fmt, double atol, double rtol, aa_error_t *err) {
  size_t n = aa_tensor_numel(got), used = 0;
  double *u = NULL, max_b = 0, trtol, tatol, usum = 0;
  int rc;
  memset(s, 0, sizeof *s);
  s->name = name;
  s->data_fmt = data_fmt;
  if (ulp_fmt == AA_FMT_FP64) ulp_fmt = AA_FMT_FP32;
  if (ulp_fmt != AA_FMT_BF16 && ulp_fmt != AA_FMT_FP16 && ulp_fmt != AA_FMT_FP32)
    return aa_error_set(err, AA_EINVAL, "%s: ULPs are counted in bf16, fp16 or fp32", name);
  s->ulp_fmt = ulp_fmt;
  s->oracle_relerr_bound = ref->relerr_bound;
  if ((rc = aa_metrics_compare(&s->m, got, ref, AA_FMT_FP32, atol, rtol, err)) != AA_OK) return rc;
  if (n > 0 && (u = malloc(n * sizeof *u)) == NULL) return aa_error_set(err, AA_ENOMEM, "%s: out of memory", name);
  for (size_t i = 0; i < n; i++)
    if (isfinite(ref->val.data[i]) && fabs(ref->val.data[i]) > max_b) max_b = fabs(ref->val.data[i]);
  s->rel_floor = ldexp(max_b, -4); /* the top four binades (score.h) */
  s->worst_got = s->worst_ref = NAN;
  {
    double worst_abs = -1, worst_rel = -1;
    size_t seen_nonfinite = 0;
    aa_round_opts_t ro = {ulp_fmt, AA_RND_NE, 1, 0};
    for (size_t i = 0; i < n; i++) {
      double a = got->data[i], b = ref->val.data[i], d, r, cr;
      if (!isfinite(a) && !seen_nonfinite++) s->first_nonfinite = i;
      if (!isfinite(a) || !isfinite(b)) continue;
      d = fabs(a - b);
      if (d > worst_abs) {
        worst_abs = d;
        s->worst_abs = i;
        s->worst_got = a;
        s->worst_ref = b;
      }
      r = b != 0 ? d / fabs(b) : (d == 0 ? 0 : INFINITY);
      if (r > worst_rel) {
        worst_rel = r;
        s->worst_rel = i;
      }
      if (fabs(b) >= s->rel_floor && b != 0 && r > s->max_rel) s->max_rel = r;
      /* RN of the exact value in ulp_fmt: the oracle's own roundings for
         bf16/fp32; for fp16 the rounding of val, which is within 2^-48 of the
         exact value, so it can differ only at an fp16 midpoint that close. */
      cr = ulp_fmt == AA_FMT_BF16   ? ref->bf16.data[i]
           : ulp_fmt == AA_FMT_FP32 ? ref->fp32.data[i]
                                    : aa_round(b, &ro, NULL);
      u[used] = fabs(aa_metrics_ordinal(a, ulp_fmt) - aa_metrics_ordinal(cr, ulp_fmt));
      usum += u[used];
      used++;
    }
    s->max_rel_any = worst_rel < 0 ? NAN : worst_rel;
  }
  if (used > 0) {
    order_stats(&s->ulp_median, &s->ulp_p99, &s->ulp_max, u, used);
    s->ulp_mean = usum / (double)used;
    s->ulp_normwise = s->m.max_abs / fmt_ulp(max_b, ulp_fmt);
  } else {
    s->ulp_median = s->ulp_p99 = s->ulp_max = s->ulp_mean = s->ulp_normwise = s->max_rel = NAN;
  }
  free(u);
  elementwise(&s->rule[AA_RULE_ABSREL], got, ref->val.data, n, atol, rtol);
  aa_rule_torch_tol(&trtol, &tatol, data_fmt);
  elementwise(&s->rule[AA_RULE_TORCH], got, ref->val.data, n, tatol, trtol);
  return AA_OK;
}

/* max|a - b| against a threshold; NaN/Inf in a fail. */
static void against(aa_rule_result_t *r, const aa_score_out_t *s, double naive_max_abs, double atol, double factor) {
  double thr = naive_max_abs * factor;
  if (thr < atol) thr = atol;
  *r = (aa_rule_result_t){1, 0, NAN, thr, atol, factor, naive_max_abs, 0, s->worst_abs, s->worst_got, s->worst_ref};
  if (s->m.nan > 0)
    r->ratio = NAN;
  else if (s->m.inf > 0)
    r->ratio = INFINITY;
  else if (isnan(thr) || isnan(s->m.max_abs))
    r->ratio = NAN;
  else if (thr == 0)
    r->ratio = s->m.max_abs == 0 ? 0 : INFINITY;
  else
    r->ratio = s->m.max_abs / thr;
  r->pass = s->m.nan == 0 && s->m.inf == 0 && r->ratio <= 1;
  r->fail_count = r->pass ? 0 : 1;
}

void aa_score_apply_naive(aa_score_out_t *s, const aa_score_out_t *naive) {
  /* A NaN in the naive output makes its max NaN (PyTorch's max propagates
     NaN), an Inf makes it infinite: as aa_metrics_fa_rule. */
  double ref = naive->m.nan > 0 ? NAN : naive->m.inf > 0 ? INFINITY : naive->m.max_abs;
  against(&s->rule[AA_RULE_FA], s, ref, 0, aa_rule_fa_factor(s->name));
  against(&s->rule[AA_RULE_SDPA], s, ref, AA_RULE_SDPA_ATOL, aa_rule_sdpa_fudge(s->name));
}

int aa_score_exact_finite(const aa_oracle_out_t *ref, const char *name, aa_fmt_t data_fmt, aa_error_t *err) {
  size_t n = aa_tensor_numel(&ref->val), bad = 0;
  double big = 0;
  aa_round_opts_t ro = {AA_FMT_FP16, AA_RND_NE, 1, 0};
  for (size_t i = 0; i < n; i++) {
    double r = data_fmt == AA_FMT_FP32   ? ref->fp32.data[i]
               : data_fmt == AA_FMT_BF16 ? ref->bf16.data[i]
               : data_fmt == AA_FMT_FP16 ? aa_round(ref->val.data[i], &ro, NULL)
                                         : ref->val.data[i];
    if (!isfinite(r)) {
      bad++;
      big = fmax(big, fabs(ref->val.data[i]));
    }
  }
  if (bad == 0) return AA_OK;
  return aa_error_set(err, AA_ERANGE,
                      "the exact %s is not finite in %s at %zu of %zu elements (|%s| up to %.3g, past %s's largest "
                      "value %.3g): no rule can judge a kernel there; scale the inputs down",
                      name, aa_fmt_info(data_fmt)->name, bad, n, name, big, aa_fmt_info(data_fmt)->name,
                      aa_fmt_info(data_fmt)->max_finite);
}
