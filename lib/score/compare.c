/* attnacc: robust error measures of one output (ULP order statistics, normwise ULP, floored relative error) and the
 * rules evaluated on them. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "score.h"

/* The element passes run over chunks of CHUNK elements in parallel; every chunk's results are merged in chunk
   order, and the choices within a chunk are the serial loop's (the first of equal worst elements), so no result
   depends on the thread count. */
#define CHUNK ((size_t)1 << 14)

static int aa__threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
static int aa__thread(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

/* The histogram of abs_q99: a bin per value of the top 16 bits of |a - b| >= 0 (sign clear: 2^15 bins), which
   order as the values do. */
#define Q99_BINS ((size_t)1 << 15)
static size_t q99_bin(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return (size_t)(b >> 48) & (Q99_BINS - 1);
}

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

/* Histogram bins of counted_stats: every ULP distance between two bf16 or two fp16 values (ordinals within
   +-2^15) fits, so a kernel's data of those formats takes the counting path. */
#define COUNT_BINS ((size_t)1 << 17)

/* The smallest value whose cumulative count exceeds k, of the histogram c. */
static double counted_kth(const size_t *c, size_t k) {
  size_t v = 0, seen = c[0];
  while (seen <= k)
    seen += c[++v];
  return (double)v;
}

/* c[v] += the count of u[i] == v (integers below COUNT_BINS), in parallel over chunks into per-thread counts added
   up at the end (integers: the same for any thread count). */
static void count_bins(size_t *c, const double *u, size_t n) {
  int nt = n >= 2 * CHUNK ? aa__threads() : 1;
  size_t *part = nt > 1 ? calloc((size_t)nt * COUNT_BINS, sizeof *part) : NULL;
  if (part == NULL) {
    for (size_t i = 0; i < n; i++)
      c[(size_t)u[i]]++;
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    size_t *mine = part + (size_t)aa__thread() * COUNT_BINS;
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i++)
      mine[(size_t)u[i]]++;
  }
  for (int t = 0; t < nt; t++)
    for (size_t v = 0; v < COUNT_BINS; v++)
      c[v] += part[(size_t)t * COUNT_BINS + v];
  free(part);
}

/* order_stats of u when every u[i] is an integer below COUNT_BINS (the common case: ULP distances between values of
   the format itself), by counting: linear, and the same order statistics as the selection. 0 when some u[i] is
   not such an integer (nothing set). */
static int counted_stats(double *med, double *p99, const double *u, size_t n) {
  size_t k99 = (size_t)ceil(0.99 * (double)n), h = n / 2, *c, odd = 0;
#pragma omp parallel for reduction(+ : odd) schedule(static) if (n >= 2 * CHUNK)
  for (size_t i = 0; i < n; i++)
    odd += !(u[i] >= 0 && u[i] < (double)COUNT_BINS && u[i] == floor(u[i]));
  if (odd > 0 || (c = calloc(COUNT_BINS, sizeof *c)) == NULL) return 0;
  count_bins(c, u, n);
  *p99 = counted_kth(c, (k99 > 0 ? k99 : 1) - 1);
  *med = counted_kth(c, h);
  if (n % 2 == 0) *med = 0.5 * (counted_kth(c, h - 1) + *med);
  free(c);
  return 1;
}

/* The median, the ceil(0.99 n)-th smallest and the largest of u[0..n-1] (n > 0; u may be reordered). */
static void order_stats(double *med, double *p99, double *max, double *u, size_t n) {
  size_t k99 = (size_t)ceil(0.99 * (double)n), h = n / 2;
  double m = u[0];
  for (size_t i = 1; i < n; i++)
    if (u[i] > m) m = u[i];
  *max = m;
  if (counted_stats(med, p99, u, n)) return;
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
/* One element into rule r's running result (worst: its largest ratio so far). */
static void elementwise_one(aa_rule_result_t *r, double *worst, size_t i, double a, double b, double d) {
  double allow = r->atol + r->rtol * fabs(b), q = d == 0 ? 0 : (allow > 0 ? d / allow : INFINITY);
  r->fail_count += q > 1; /* no branch: a coin flip on real data */
  if (q > *worst) {
    *worst = q;
    r->worst = i;
    r->allowed = allow;
    r->worst_got = a;
    r->worst_ref = b;
  }
}

/* Per-row sums of the systematic statistics (score.h): e.b, b.b, sum e, sum b, e.e and the finite count. */
typedef struct {
  double eb, bb, e, b, ee;
  size_t n;
} row_sums_t;

/* The worst row (|e_row|) and head (|e_head| / |b_head|) of rows sums r (rows of them, heads equal groups). */
static void row_head_max(aa_score_out_t *s, const row_sums_t *r, size_t rows, size_t heads) {
  size_t per = heads > 0 ? rows / heads : rows;
  s->row_err_max = s->head_rel_l2_max = 0;
  for (size_t i = 0; i < rows; i++)
    if (sqrt(r[i].ee) > s->row_err_max) s->row_err_max = sqrt(r[i].ee), s->row_worst = i;
  for (size_t h = 0; h < heads && per > 0; h++) {
    double ee = 0, bb = 0, x;
    for (size_t i = h * per; i < (h + 1) * per; i++)
      ee += r[i].ee, bb += r[i].bb;
    x = bb > 0 ? sqrt(ee / bb) : (ee > 0 ? INFINITY : 0);
    if (x > s->head_rel_l2_max) s->head_rel_l2_max = x, s->head_worst = h;
  }
}

/* Scale, offset and their row-blocked standard errors (score.h) from the row sums. */
static void fit_scale(aa_score_out_t *s, const row_sums_t *r, size_t rows) {
  row_sums_t t = {0, 0, 0, 0, 0, 0};
  double rms, vs = 0, vo = 0;
  for (size_t i = 0; i < rows; i++)
    t.eb += r[i].eb, t.bb += r[i].bb, t.e += r[i].e, t.b += r[i].b, t.ee += r[i].ee, t.n += r[i].n;
  if (t.n == 0 || !(t.bb > 0)) {
    s->ls_scale = s->ls_offset = s->scale_sigma = s->offset_sigma = s->err_corr = t.ee > 0 ? NAN : 0;
    return;
  }
  rms = sqrt(t.bb / (double)t.n);
  s->ls_scale = t.eb / t.bb; /* a.b / b.b - 1 = (b.b + e.b) / b.b - 1 */
  s->ls_offset = (t.e - s->ls_scale * t.b) / (double)t.n / rms;
  for (size_t i = 0; i < rows; i++) {
    /* the residual after the fit: a scale bug must not widen its own sigma */
    double xs = r[i].eb - s->ls_scale * r[i].bb;
    double xo = r[i].e - s->ls_scale * r[i].b - s->ls_offset * rms * (double)r[i].n;
    vs += xs * xs, vo += xo * xo;
  }
  s->scale_sigma = sqrt(vs) / t.bb;
  s->offset_sigma = sqrt(vo) / (double)t.n / rms;
  s->err_corr = t.ee > 0 ? t.eb / sqrt(t.ee * t.bb) : 0;
}

/* The systematic-error statistics of score.h but abs_q99: rows along the last axis, heads along the first (3+
   axes). Rows in parallel: each row's sums are its own, so the bits do not depend on the thread count. */
static int systematic(aa_score_out_t *s, const aa_tensor_t *got, const double *b, size_t n, aa_error_t *err) {
  size_t len = got->ndim > 0 && got->shape[got->ndim - 1] > 0 ? got->shape[got->ndim - 1] : 1;
  size_t rows = n / len, heads = got->ndim >= 3 ? got->shape[0] : 1;
  row_sums_t *r = rows > 0 ? calloc(rows, sizeof *r) : NULL;
  if (rows > 0 && r == NULL) return aa_error_set(err, AA_ENOMEM, "%s: out of memory", s->name);
#pragma omp parallel for schedule(static) if (n >= 2 * CHUNK)
  for (size_t row = 0; row < rows; row++) { /* row by row: no division per element to find its row */
    row_sums_t *x = &r[row];
    for (size_t i = row * len; i < (row + 1) * len; i++) {
      double a = got->data[i], e;
      if (!isfinite(a) || !isfinite(b[i])) continue;
      e = a - b[i];
      x->eb += e * b[i], x->bb += b[i] * b[i], x->e += e, x->b += b[i], x->ee += e * e, x->n++;
    }
  }
  fit_scale(s, r, rows);
  row_head_max(s, r, rows, heads);
  free(r);
  return AA_OK;
}

aa_fmt_t aa_score_metrics_ulp_fmt(const aa_score_out_t *s) {
  return s->ulp_fmt == AA_FMT_BF16 ? AA_FMT_BF16 : AA_FMT_FP32; /* the two aa_metrics_compare counts ULPs in */
}

/* One chunk's part of the element pass of aa_score_compare (merged in chunk order: the serial results). */
typedef struct {
  double max_b;           /* max |b| over the finite b */
  size_t first_nonfinite; /* the chunk's first non-finite a; SIZE_MAX: none */
  double worst_abs, worst_rel;
  size_t i_abs, i_rel;
  double got_abs, ref_abs;
  size_t used;     /* elements taking part (a and b finite); their ULPs packed at the chunk's start unless shared */
  size_t nan, inf; /* the elementwise rules' NaN (a or b) and Inf (a != b) counts */
  aa_rule_result_t rule[2];
  double worst[2];
} chunk_t;

/* The element pass over [i0, i1): s's worst elements, the ULPs (unless shared: then u holds them already), the
   elementwise rules r (tolerances in r) and the histogram of |a - b|'s top bits (q99, add into hist). */
static void chunk_pass(chunk_t *c, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt, int shared,
                       double *u, size_t i0, size_t i1, size_t *hist) {
  aa_round_opts_t ro = {ulp_fmt, AA_RND_NE, 1, 0};
  const double *bv = ref->val.data;
  c->max_b = 0, c->first_nonfinite = SIZE_MAX, c->worst_abs = c->worst_rel = -1, c->used = 0;
  c->nan = c->inf = 0, c->worst[0] = c->worst[1] = -1;
  for (size_t i = i0; i < i1; i++) {
    double a = got->data[i], b = bv[i], d, r, cr;
    if (isfinite(b) && fabs(b) > c->max_b) c->max_b = fabs(b);
    if (isnan(a) || isnan(b) || (isinf(a) && a != b)) { /* the elementwise rules' failures */
      c->nan += isnan(a) || isnan(b), c->inf += !(isnan(a) || isnan(b));
      c->rule[0].fail_count++, c->rule[1].fail_count++;
    } else {
      d = a == b ? 0 : fabs(a - b);
      elementwise_one(&c->rule[0], &c->worst[0], i, a, b, d);
      elementwise_one(&c->rule[1], &c->worst[1], i, a, b, d);
    }
    if (!isfinite(a) && c->first_nonfinite == SIZE_MAX) c->first_nonfinite = i;
    if (!isfinite(a) || !isfinite(b)) continue;
    d = fabs(a - b);
    hist[q99_bin(d)]++;
    if (d > c->worst_abs) c->worst_abs = d, c->i_abs = i, c->got_abs = a, c->ref_abs = b;
    r = b != 0 ? d / fabs(b) : (d == 0 ? 0 : INFINITY);
    if (r > c->worst_rel) c->worst_rel = r, c->i_rel = i;
    /* RN of the exact value in ulp_fmt: the oracle's own roundings for bf16/fp32; for fp16 the rounding of val,
       which is within 2^-48 of the exact value, so it can differ only at an fp16 midpoint that close. */
    if (!shared) {
      cr = ulp_fmt == AA_FMT_BF16   ? ref->bf16.data[i]
           : ulp_fmt == AA_FMT_FP32 ? ref->fp32.data[i]
                                    : aa_round(b, &ro, NULL);
      u[i0 + c->used] = fabs(aa_metrics_ordinal(a, ulp_fmt) - aa_metrics_ordinal(cr, ulp_fmt));
    }
    c->used++;
  }
}

/* Chunk c's worst elements and rule results merged into s, r and the running worsts (strict: the first wins). */
static void chunk_merge(aa_score_out_t *s, aa_rule_result_t *r[2], double worst[2], double *worst_abs,
                        double *worst_rel, size_t *seen_nonfinite, const chunk_t *c) {
  if (c->first_nonfinite != SIZE_MAX && !(*seen_nonfinite)++) s->first_nonfinite = c->first_nonfinite;
  if (c->worst_abs > *worst_abs)
    *worst_abs = c->worst_abs, s->worst_abs = c->i_abs, s->worst_got = c->got_abs, s->worst_ref = c->ref_abs;
  if (c->worst_rel > *worst_rel) *worst_rel = c->worst_rel, s->worst_rel = c->i_rel;
  for (int k = 0; k < 2; k++) {
    r[k]->fail_count += c->rule[k].fail_count;
    if (c->worst[k] > worst[k]) {
      worst[k] = c->worst[k];
      r[k]->worst = c->rule[k].worst, r[k]->allowed = c->rule[k].allowed;
      r[k]->worst_got = c->rule[k].worst_got, r[k]->worst_ref = c->rule[k].worst_ref;
    }
  }
}

/* max_rel over [i0, i1) (|b| >= floor), and the |a - b| whose q99 bin is bin packed at out (their count). */
static size_t chunk_tail(double *max_rel, double *out, const double *got, const double *b, size_t i0, size_t i1,
                         double floor, size_t bin) {
  size_t m = 0;
  double mr = 0;
  for (size_t i = i0; i < i1; i++) {
    double a = got[i], d, r;
    if (!isfinite(a) || !isfinite(b[i])) continue;
    d = fabs(a - b[i]);
    if (q99_bin(d) == bin) out[m++] = d;
    r = b[i] != 0 ? d / fabs(b[i]) : (d == 0 ? 0 : INFINITY);
    if (fabs(b[i]) >= floor && b[i] != 0 && r > mr) mr = r;
  }
  *max_rel = mr;
  return m;
}

/* Chunk c's packed values (count[c] of them at c * CHUNK) joined at the front of v, in chunk order; their total. */
static size_t join_chunks(double *v, const size_t *count, size_t nchunks) {
  size_t at = 0;
  for (size_t c = 0; c < nchunks; c++) {
    if (at != c * CHUNK) memmove(v + at, v + c * CHUNK, count[c] * sizeof *v);
    at += count[c];
  }
  return at;
}

/* The sum of v[0..n-1] by chunks in parallel, the chunks' sums added in chunk order: an order fixed by n alone (and
   exact for the integer ULP distances below 2^53 whatever the order). */
static double ordered_sum(const double *v, size_t n) {
  size_t nchunks = (n + CHUNK - 1) / CHUNK;
  double *part = nchunks > 1 ? malloc(nchunks * sizeof *part) : NULL, sum = 0;
  if (part == NULL) {
    for (size_t i = 0; i < n; i++)
      sum += v[i];
    return sum;
  }
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < nchunks; c++) {
    double x = 0;
    for (size_t i = c * CHUNK; i < n && i < (c + 1) * CHUNK; i++)
      x += v[i];
    part[c] = x;
  }
  for (size_t c = 0; c < nchunks; c++)
    sum += part[c];
  free(part);
  return sum;
}

/* The element pass over every chunk in parallel, merged in order into s and the elementwise rules r; hist gets the
   q99 histogram, u the ULPs packed; *used and *usum their count and sum, *max_b the largest finite |b|. */
static int element_pass(aa_score_out_t *s, aa_rule_result_t *r[2], size_t *hist, size_t *used, double *usum,
                        double *max_b, const aa_tensor_t *got, const aa_oracle_out_t *ref, aa_fmt_t ulp_fmt,
                        int shared, double *u, size_t n, aa_error_t *err) {
  size_t nchunks = (n + CHUNK - 1) / CHUNK, seen = 0;
  size_t *count = calloc(nchunks, sizeof *count);
  chunk_t *c = malloc(nchunks * sizeof *c);
  double worst[2] = {-1, -1}, worst_abs = -1, worst_rel = -1;
  if (c == NULL || count == NULL) {
    free(c), free(count);
    return aa_error_set(err, AA_ENOMEM, "%s: out of memory", s->name);
  }
#pragma omp parallel if (nchunks > 1)
  {
    size_t *h = hist + (size_t)aa__thread() * Q99_BINS; /* this thread's histogram (the caller adds them up) */
#pragma omp for schedule(static)
    for (size_t k = 0; k < nchunks; k++) {
      c[k].rule[0] = *r[0], c[k].rule[1] = *r[1];
      chunk_pass(&c[k], got, ref, ulp_fmt, shared, u, k * CHUNK, k + 1 < nchunks ? (k + 1) * CHUNK : n, h);
    }
  }
  *max_b = 0, *usum = 0, *used = 0;
  for (size_t k = 0; k < nchunks; k++) {
    chunk_merge(s, r, worst, &worst_abs, &worst_rel, &seen, &c[k]);
    *max_b = fmax(*max_b, c[k].max_b);
    count[k] = c[k].used;
    *used += c[k].used;
  }
  if (!shared) join_chunks(u, count, nchunks);
  *usum = ordered_sum(u, *used);
  s->max_rel_any = worst_rel < 0 ? NAN : worst_rel;
  {
    size_t nan = 0, inf = 0;
    for (size_t k = 0; k < nchunks; k++)
      nan += c[k].nan, inf += c[k].inf;
    for (int k = 0; k < 2; k++) {
      r[k]->ratio = nan ? NAN : inf ? INFINITY : (worst[k] < 0 ? 0 : worst[k]);
      r[k]->pass = nan == 0 && inf == 0 && r[k]->fail_count == 0;
    }
  }
  free(c), free(count);
  return AA_OK;
}

/* The 0.99 quantile of |a - b| over the used finite elements (the ceil(0.99 used)-th smallest) from the histogram
   of their top bits (hist, nthreads of them added here) and a selection within the one bin that holds it; max_rel
   over |b| >= floor on the way. v: room for n values. */
static int q99_and_max_rel(double *q99, double *max_rel, size_t *hist, int nthreads, const double *got,
                           const double *b, size_t n, size_t used, double floor, double *v, aa_error_t *err,
                           const char *name) {
  size_t nchunks = (n + CHUNK - 1) / CHUNK, k = (size_t)ceil(0.99 * (double)used), bin = 0, below = 0, m, *count;
  double *mr;
  for (int t = 1; t < nthreads; t++)
    for (size_t i = 0; i < Q99_BINS; i++)
      hist[i] += hist[(size_t)t * Q99_BINS + i];
  k = (k > 0 ? k : 1) - 1;
  while (below + hist[bin] <= k)
    below += hist[bin++];
  count = malloc(nchunks * sizeof *count);
  mr = malloc(nchunks * sizeof *mr);
  if (count == NULL || mr == NULL) {
    free(count), free(mr);
    return aa_error_set(err, AA_ENOMEM, "%s: out of memory", name);
  }
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (size_t c = 0; c < nchunks; c++)
    count[c] =
        chunk_tail(&mr[c], v + c * CHUNK, got, b, c * CHUNK, c + 1 < nchunks ? (c + 1) * CHUNK : n, floor, bin);
  *max_rel = 0;
  for (size_t c = 0; c < nchunks; c++)
    *max_rel = fmax(*max_rel, mr[c]);
  m = join_chunks(v, count, nchunks);
  free(count), free(mr);
  *q99 = select_kth(v, m, k - below); /* the selection over every |a - b|, restricted to the bin that holds it */
  return AA_OK;
}

int aa_score_compare(aa_score_out_t *s, const char *name, const aa_tensor_t *got, const aa_oracle_out_t *ref,
                     aa_fmt_t data_fmt, aa_fmt_t ulp_fmt, double atol, double rtol, aa_error_t *err) {
  size_t n = aa_tensor_numel(got), used = 0, *hist = NULL;
  double *u = NULL, max_b = 0, trtol, tatol, usum = 0;
  int rc, shared, nthreads = aa__threads();
  aa_rule_result_t *r[2] = {&s->rule[AA_RULE_ABSREL], &s->rule[AA_RULE_TORCH]};
  memset(s, 0, sizeof *s);
  s->name = name;
  s->data_fmt = data_fmt;
  if (ulp_fmt == AA_FMT_FP64) ulp_fmt = AA_FMT_FP32;
  if (ulp_fmt != AA_FMT_BF16 && ulp_fmt != AA_FMT_FP16 && ulp_fmt != AA_FMT_FP32)
    return aa_error_set(err, AA_EINVAL, "%s: ULPs are counted in bf16, fp16 or fp32", name);
  s->ulp_fmt = ulp_fmt;
  s->oracle_relerr_bound = ref->relerr_bound;
  /* the legacy metrics' ULPs are these when they count in ulp_fmt (bf16, fp32): taken from their pass */
  shared = aa_score_metrics_ulp_fmt(s) == ulp_fmt;
  if (n > 0 &&
      ((u = malloc(n * sizeof *u)) == NULL || (hist = calloc((size_t)nthreads * Q99_BINS, sizeof *hist)) == NULL)) {
    free(u);
    return aa_error_set(err, AA_ENOMEM, "%s: out of memory", name);
  }
  if ((rc = aa_metrics_compare_ulps(&s->m, got, ref, aa_score_metrics_ulp_fmt(s), atol, rtol, shared ? u : NULL,
                                    err)) != AA_OK)
    goto out;
  aa_rule_torch_tol(&trtol, &tatol, data_fmt);
  *r[0] = (aa_rule_result_t){1, 0, 0, 0, atol, rtol, NAN, 0, 0, NAN, NAN};
  *r[1] = (aa_rule_result_t){1, 0, 0, 0, tatol, trtol, NAN, 0, 0, NAN, NAN};
  s->worst_got = s->worst_ref = NAN;
  if (n == 0) {
    s->max_rel_any = NAN;
    r[0]->pass = r[1]->pass = 1;
  } else if ((rc = element_pass(s, r, hist, &used, &usum, &max_b, got, ref, ulp_fmt, shared, u, n, err)) != AA_OK)
    goto out;
  s->rel_floor = ldexp(max_b, -4); /* the top four binades (score.h) */
  if (used > 0) {
    order_stats(&s->ulp_median, &s->ulp_p99, &s->ulp_max, u, used);
    s->ulp_mean = usum / (double)used;
    s->ulp_normwise = s->m.max_abs / fmt_ulp(max_b, ulp_fmt);
    /* u, its order statistics taken, holds the |e| of q99's bin */
    if ((rc = q99_and_max_rel(&s->abs_q99, &s->max_rel, hist, nthreads, got->data, ref->val.data, n, used,
                              s->rel_floor, u, err, name)) != AA_OK)
      goto out;
  } else {
    s->ulp_median = s->ulp_p99 = s->ulp_max = s->ulp_mean = s->ulp_normwise = s->max_rel = NAN;
    s->abs_q99 = NAN;
  }
  rc = systematic(s, got, ref->val.data, n, err);
out:
  free(u);
  free(hist);
  return rc;
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

/* measured / limit: 0/0 = 0, x/0 = Inf, NaN stays NaN. */
static double over(double x, double lim) {
  if (isnan(x) || isnan(lim)) return NAN;
  return lim > 0 ? x / lim : (x == 0 ? 0 : INFINITY);
}

void aa_score_apply_expect(aa_score_out_t *s, const aa_score_out_t *rec) {
  double sig_s = fmax(s->scale_sigma, rec->scale_sigma), sig_o = fmax(s->offset_sigma, rec->offset_sigma);
  double got[AA_EXPECT_NSTAT] = {s->m.rel_l2,        s->abs_q99,     fabs(s->ls_scale),
                                 fabs(s->ls_offset), s->row_err_max, s->head_rel_l2_max};
  double ref[AA_EXPECT_NSTAT] = {rec->m.rel_l2,  rec->abs_q99,     rec->ls_scale,
                                 rec->ls_offset, rec->row_err_max, rec->head_rel_l2_max};
  double lim[AA_EXPECT_NSTAT] = {
      AA_EXPECT_BAND_L2 * rec->m.rel_l2,         AA_EXPECT_BAND_Q99 * rec->abs_q99,
      fabs(rec->ls_scale) + AA_EXPECT_Z * sig_s, fabs(rec->ls_offset) + AA_EXPECT_Z * sig_o,
      AA_EXPECT_BAND_ROW * rec->row_err_max,     AA_EXPECT_BAND_HEAD * rec->head_rel_l2_max};
  aa_rule_result_t *r = &s->rule[AA_RULE_EXPECT];
  int k = 0;
  for (int i = 0; i < AA_EXPECT_NSTAT; i++) {
    s->expect_ratio[i] = over(got[i], lim[i]);
    s->expect_limit[i] = lim[i];
    s->expect_ref[i] = ref[i];
    if (isnan(s->expect_ratio[i]) || s->expect_ratio[i] > s->expect_ratio[k]) k = isnan(s->expect_ratio[k]) ? k : i;
  }
  s->expect_stat = k;
  *r = (aa_rule_result_t){1, 0, s->expect_ratio[k], lim[k], 0, 0, NAN, 0, s->worst_abs, s->worst_got, s->worst_ref};
  if (s->m.nan > 0)
    r->ratio = NAN;
  else if (s->m.inf > 0)
    r->ratio = INFINITY;
  r->pass = s->m.nan == 0 && s->m.inf == 0 && r->ratio <= 1;
  r->fail_count = r->pass ? 0 : 1;
}

void aa_score_apply_expect_finite(aa_score_out_t *s) {
  aa_rule_result_t *r = &s->rule[AA_RULE_EXPECT];
  for (int i = 0; i < AA_EXPECT_NSTAT; i++) {
    s->expect_ratio[i] = 0;
    s->expect_limit[i] = s->expect_ref[i] = NAN; /* no band: nothing to compare with */
  }
  s->expect_stat = AA_EXPECT_REL_L2;
  *r = (aa_rule_result_t){1, 0, 0, NAN, 0, 0, NAN, 0, s->worst_abs, s->worst_got, s->worst_ref};
  r->ratio = s->m.nan > 0 ? NAN : s->m.inf > 0 ? INFINITY : 0;
  r->pass = s->m.nan == 0 && s->m.inf == 0;
  r->fail_count = r->pass ? 0 : 1;
}

int aa_score_exact_finite(const aa_oracle_out_t *ref, const char *name, aa_fmt_t data_fmt, aa_error_t *err) {
  size_t n = aa_tensor_numel(&ref->val), bad = 0;
  double big = 0;
  aa_round_opts_t ro = {AA_FMT_FP16, AA_RND_NE, 1, 0};
  /* a count and a maximum: the same for any thread count */
#pragma omp parallel for reduction(+ : bad) reduction(max : big) schedule(static) if (n >= 2 * CHUNK)
  for (size_t i = 0; i < n; i++) {
    double r = data_fmt == AA_FMT_FP32   ? ref->fp32.data[i]
               : data_fmt == AA_FMT_BF16 ? ref->bf16.data[i]
               : data_fmt == AA_FMT_FP16 ? aa_round(ref->val.data[i], &ro, NULL)
                                         : ref->val.data[i];
    if (!isfinite(r)) {
      bad++;
      if (fabs(ref->val.data[i]) > big) big = fabs(ref->val.data[i]); /* a NaN is passed over, as fmax does */
    }
  }
  if (bad == 0) return AA_OK;
  return aa_error_set(err, AA_ERANGE,
                      "the exact %s is not finite in %s at %zu of %zu elements (|%s| up to %.3g, past %s's largest "
                      "value %.3g): no rule can judge a kernel there; scale the inputs down",
                      name, aa_fmt_info(data_fmt)->name, bad, n, name, big, aa_fmt_info(data_fmt)->name,
                      aa_fmt_info(data_fmt)->max_finite);
}
