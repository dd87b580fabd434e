/* attnacc: oracle entry point: options, validation, output allocation, settling of certified values, path dispatch.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "config.h"
#include "oracle-impl.h"

static const char *const path_names[AA_ORACLE_COUNT] = {"mpfr", "fast"};
static const char *const path_desc[AA_ORACLE_COUNT] = {
    "every operation in MPFR (correctly rounded sums of exact products) with a running a-priori error bound",
    "double-double kernels with certified per-element bounds; elements that miss the target (2^-48) or an undecided "
    "FP32/BF16 rounding are recomputed in MPFR"};

const char *aa_oracle_path_name(aa_oracle_path_t path) {
  return (unsigned)path < AA_ORACLE_COUNT ? path_names[path] : "unknown";
}

int aa_oracle_path_from_name(aa_oracle_path_t *out, const char *name) {
  int i = aa_name_index(name, path_names, AA_ORACLE_COUNT);
  if (i < 0) return AA_ENOTFOUND;
  *out = (aa_oracle_path_t)i;
  return AA_OK;
}

const char *aa_oracle_path_describe(aa_oracle_path_t path) {
  return (unsigned)path < AA_ORACLE_COUNT ? path_desc[path] : "unknown oracle path";
}

void aa_oracle_opts_init(aa_oracle_opts_t *opts) {
  opts->path = AA_ORACLE_FAST;
  opts->prec = 128;
  opts->threads = 0;
  opts->target = AA_ORACLE_TARGET_DEFAULT;
  opts->device = AA_ORACLE_DEVICE_AUTO;
}

static const char *const device_names[AA_ORACLE_DEVICE_COUNT] = {"auto", "cpu", "cuda"};

const char *aa_oracle_device_name(aa_oracle_device_t dev) {
  return (unsigned)dev < AA_ORACLE_DEVICE_COUNT ? device_names[dev] : "unknown";
}

int aa_oracle_device_from_name(aa_oracle_device_t *out, const char *name) {
  int i = aa_name_index(name, device_names, AA_ORACLE_DEVICE_COUNT);
  if (i < 0) return AA_ENOTFOUND;
  *out = (aa_oracle_device_t)i;
  return AA_OK;
}

int aa_oracle_cuda_available(void) {
#ifdef AA_HAVE_CUDA
  return aa_oracle_cuda_devices() > 0;
#else
  return 0;
#endif
}

static void out_free(aa_oracle_out_t *o) {
  aa_tensor_free(&o->val);
  aa_tensor_free(&o->fp32);
  aa_tensor_free(&o->bf16);
  o->relerr_bound = 0;
}

void aa_oracle_result_free(aa_oracle_result_t *res) {
  if (res == NULL) return;
  out_free(&res->o);
  out_free(&res->lse);
  out_free(&res->dq);
  out_free(&res->dk);
  out_free(&res->dv);
  out_free(&res->dsinks);
}

static int out_alloc(aa_oracle_out_t *o, int ndim, const size_t *shape) {
  int st;
  if ((st = aa_tensor_alloc(&o->val, ndim, shape, AA_FMT_FP64)) != AA_OK) return st;
  if ((st = aa_tensor_alloc(&o->fp32, ndim, shape, AA_FMT_FP32)) != AA_OK) return st;
  if ((st = aa_tensor_alloc(&o->bf16, ndim, shape, AA_FMT_BF16)) != AA_OK) return st;
  o->relerr_bound = 0;
  return AA_OK;
}

static void count_uncertified(aa_or_ctx_t *cx) {
#ifdef _OPENMP
#pragma omp atomic
#endif
  cx->n_uncertified++;
}

static void write_elem(aa_or_ctx_t *cx, int t, size_t idx, double val, double f32, double b16, double rel) {
  aa_oracle_out_t *o = cx->w[t].out;
  o->val.data[idx] = val;
  o->fp32.data[idx] = f32;
  o->bf16.data[idx] = b16;
  cx->w[t].rel[idx] = rel;
  cx->w[t].todo[idx] = 0;
}

/* |x| < AA_OR_MINMAG = 2^-900 (an MPFR number m 2^E, 1/2 <= |m| < 1, is below 2^E) */
static int below_range(mpfr_srcptr x) {
  return mpfr_zero_p(x) || (mpfr_regular_p(x) && mpfr_get_exp(x) <= -900);
}

int aa_oracle_settle_dd(aa_or_ctx_t *cx, int t, size_t idx, double h, double l, double e) {
  double val, f32, b16, rel; /* the decision: aa_or_settle_dd_core (ddcore.h, shared with the GPU) */
  if (!aa_or_settle_dd_core(&val, &f32, &b16, &rel, h, l, e, cx->target)) return 0;
  write_elem(cx, t, idx, val, f32, b16, rel);
  return 1;
}

void aa_oracle_settle_empty_lse(aa_or_ctx_t *cx, size_t r) {
  write_elem(cx, AA_OR_LSE, r, -INFINITY, -INFINITY, -INFINITY, 0);
}

/* dQ[h, i, c] = sum_j dS_ij K[j, c] over the visible keys j of row i, and
   sum_j dS_ij = sum_j P_ij dP_ij - D_i sum_j P_ij = D_i (1 - sum_j P_ij),
   since D_i = dO_i . O_i = sum_j P_ij dP_ij. Without sinks the weights sum
   to 1, so when every visible key has the same value in column c the
   element is exactly K[., c] * 0 = 0: an exact zero that no interval can
   separate from 0, certified by this identity instead. It needs dS_ij =
   P_ij (dP_ij - D_i) itself, so not with softcap (a factor 1 - tanh^2 per
   element) or dropout (kept weights rescaled); ALiBi only moves P. Two
   equal BF16 keys among the first rows of a causal or windowed problem make
   such elements common. */
static int dq_zero_by_identity(const aa_or_ctx_t *cx, int t, size_t idx) {
  const aa_problem_t *pb = cx->pb;
  if (t != AA_OR_DQ || cx->ns != 0 || cx->cap != 0 || pb->keep != NULL) return 0;
  size_t c = idx % cx->d, i = idx / cx->d % cx->n_q, h = idx / (cx->d * cx->n_q), lo, hi;
  aa_problem_row_keys(pb, i, &lo, &hi);
  const double *kc = cx->k + (h / cx->group) * cx->n_k * cx->d + c;
  size_t first = SIZE_MAX;
  for (size_t j = lo; j < hi; j++) {
    if (!aa_problem_visible_h(pb, h, i, j)) continue;
    if (first == SIZE_MAX)
      first = j;
    else if (kc[j * cx->d] != kc[first * cx->d])
      return 0;
  }
  return first != SIZE_MAX;
}

int aa_oracle_settle_mp(aa_or_ctx_t *cx, int t, size_t idx, mpfr_srcptr x, double e, int final) {
  mpfr_prec_t p = mpfr_get_prec(x) + 64;
  mpfr_t lo, hi, r;
  if (mpfr_nan_p(x) || !(e >= 0) || isinf(e)) {
    if (!final) return 0;
    count_uncertified(cx);
    write_elem(cx, t, idx, NAN, NAN, NAN, -1);
    return 1;
  }
  if (mpfr_zero_p(x) && e == 0) { /* exactly zero: no term at all, or an exact cancellation proven exact */
    write_elem(cx, t, idx, 0.0, 0.0, 0.0, 0.0);
    return 1;
  }
  mpfr_inits2(p, lo, hi, r, (mpfr_ptr)0);
  mpfr_sub_d(lo, x, e, MPFR_RNDD);
  mpfr_add_d(hi, x, e, MPFR_RNDU);
  double f32 = aa_oracle_round_mpfr(lo, 0), b16 = aa_oracle_round_mpfr(lo, 1);
  int decided = f32 == aa_oracle_round_mpfr(hi, 0) && b16 == aa_oracle_round_mpfr(hi, 1);
  int separated = mpfr_sgn(lo) > 0 || mpfr_sgn(hi) < 0;
  double val = mpfr_get_d(x, MPFR_RNDN), rel = INFINITY;
  int inrange = !mpfr_zero_p(x) && mpfr_get_exp(x) > -900 && mpfr_get_exp(x) <= 1000;
  if (separated && inrange) {
    /* rel = (|val - x| + e) / (|x| - e), rounded upward */
    mpfr_t num, den;
    mpfr_inits2(p + 64, num, den, (mpfr_ptr)0);
    mpfr_sub_d(num, x, val, MPFR_RNDN); /* exact at this precision */
    mpfr_abs(num, num, MPFR_RNDN);
    mpfr_add_d(num, num, e, MPFR_RNDU);
    mpfr_abs(den, x, MPFR_RNDN);
    mpfr_sub_d(den, den, e, MPFR_RNDD);
    mpfr_div(num, num, den, MPFR_RNDU);
    rel = mpfr_get_d(num, MPFR_RNDU);
    mpfr_clears(num, den, (mpfr_ptr)0);
  }
  /* An interval inside (-2^-900, 2^-900) certifies every guarantee of
     oracle.h at once: val is only promised for |x| >= 2^-900, and the
     FP32/BF16 roundings of anything below 2^-150 are 0. */
  int below = below_range(lo) && below_range(hi);
  int ok = 0;
  if (below) {
    write_elem(cx, t, idx, 0.0, 0.0, 0.0, 0.0);
    ok = 1;
  } else if (decided && separated && inrange && rel <= cx->target) {
    write_elem(cx, t, idx, val, f32, b16, rel);
    ok = 1;
  } else if (final && !separated && dq_zero_by_identity(cx, t, idx)) {
    write_elem(cx, t, idx, 0.0, 0.0, 0.0, 0.0);
    ok = 1;
  } else if (final) {
    /* Best effort, documented in oracle.h, and counted uncertified: an
       exact value that cannot be separated from zero is returned as 0 (its
       roundings are then those of 0 whenever decided); an undecided rounding
       uses the computed center; a decided one whose relative bound misses
       the target keeps its center, with no claim in relerr_bound. */
    count_uncertified(cx);
    if (!separated && decided)
      write_elem(cx, t, idx, 0.0, 0.0, 0.0, -1);
    else if (decided)
      write_elem(cx, t, idx, val, f32, b16, -1);
    else
      write_elem(cx, t, idx, val, aa_oracle_round_mpfr(x, 0), aa_oracle_round_mpfr(x, 1), -1);
    ok = 1;
  }
  mpfr_clears(lo, hi, r, (mpfr_ptr)0);
  return ok;
}

static int check_tensor(const aa_tensor_t *t, const char *name, size_t a, size_t b, size_t c, aa_error_t *err) {
  if (t == NULL || t->data == NULL) return aa_error_set(err, AA_EINVAL, "oracle: tensor %s is missing", name);
  if (t->shape[0] != a || t->shape[1] != b || t->shape[2] != c)
    return aa_error_set(err, AA_ESHAPE, "oracle: %s has shape [%zu, %zu, %zu], expected [%zu, %zu, %zu]", name,
                        t->shape[0], t->shape[1], t->shape[2], a, b, c);
  size_t n = a * b * c, first = SIZE_MAX;
  /* the first non-finite element, over threads (a minimum: the same for any thread count) */
#pragma omp parallel for reduction(min : first) schedule(static) if (n >= ((size_t)1 << 18))
  for (size_t i = 0; i < n; i++)
    if (!isfinite(t->data[i]) && i < first) first = i;
  if (first != SIZE_MAX)
    return aa_error_set(err, AA_ENAN, "oracle: %s[%zu] is not finite (%a)", name, first, t->data[first]);
  return AA_OK;
}

static double max_abs(const aa_tensor_t *t) {
  double m = 0;
  size_t n = aa_tensor_numel(t);
  /* a maximum over threads (finite inputs, checked first): the same for any thread count */
#pragma omp parallel for reduction(max : m) schedule(static) if (n >= ((size_t)1 << 18))
  for (size_t i = 0; i < n; i++)
    if (fabs(t->data[i]) > m) m = fabs(t->data[i]);
  return m;
}

/* A priori magnitudes of every intermediate, from the inputs' largest
   entries (|P| <= 1, sum_j P_ij <= 1, |O| <= ks max|v|): the unscaled and
   scaled scores (d mq mk, times the scale, plus the ALiBi bias; a softcap
   bounds |S| by itself), dP - D (2 ks d mdo mv), dQ (scale times that times
   mk: the weights P of a row sum to 1), dK (a key gets one P <= 1 from each
   of the group's n_q query rows), dV (ks group n_q mdo) and the LSE. The
   guarantees of oracle.h hold up to 2^1000 and the double-double arithmetic
   must not overflow: a problem whose bound passes AA_OR_MAXMAG is refused
   (AA_ERANGE) with the quantity and its bound, instead of returning
   overflowed or NaN values. The bounds are sums of non-negative terms
   evaluated in double: they can only be too large by rounding, by a factor
   under 1 + 2^-40, well inside the 2^23 margin to DBL_MAX. */
#define AA_OR_MAXMAG 0x1p1000
/* Largest finite |bias| of the problem's attention bias (its -Inf entries mask, problem.h). */
static double max_abs_bias(const aa_problem_t *pb) {
  double m = 0;
  size_t n = pb->bias == NULL ? 0 : (pb->mask_hstride != 0 ? pb->heads : 1) * pb->n_q * pb->n_k;
  for (size_t e = 0; e < n; e++)
    if (isfinite(pb->bias[e])) m = fmax(m, fabs(pb->bias[e]));
  return m;
}
static int check_range(const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v,
                       const aa_tensor_t *dO, aa_error_t *err) {
  double mq = max_abs(q), mk = max_abs(k), mv = max_abs(v), mdo = max_abs(dO), d = (double)pb->d;
  double sig = aa_problem_scale(pb) * (1 + 0x1p-50), ks = pb->keep != NULL ? pb->keep_scale : 1.0;
  double rows = (double)(pb->heads / pb->kv_heads) * (double)pb->n_q, bias = 0, sink = 0;
  if (pb->alibi != AA_ALIBI_NONE)
    for (size_t h = 0; h < pb->heads; h++)
      bias = fmax(bias, fabs(pb->alibi_slopes[h]) * (double)(pb->n_q > pb->n_k ? pb->n_q : pb->n_k));
  bias += fabs(pb->logit_offset) + max_abs_bias(pb);
  for (size_t i = 0; i < pb->heads * pb->num_sinks; i++)
    sink = fmax(sink, fabs(pb->sinks[i]));
  double qk = d * mq * mk, s = (pb->softcap > 0 ? fmin(sig * qk, pb->softcap) : sig * qk) + bias;
  double ds = 2 * ks * d * mdo * mv;
  const struct {
    const char *what;
    double bound;
  } b[] = {{"q.k", qk},
           {"the scaled score", s},
           {"the LSE", fmax(s, sink) + log((double)(pb->n_k + pb->num_sinks) + 1)},
           {"dO.v - D", ds},
           {"dQ", sig * ds * mk},
           {"dK", sig * rows * ds * mq},
           {"dV", ks * rows * mdo},
           {"O", ks * mv}};
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
    if (!(b[i].bound <= AA_OR_MAXMAG))
      return aa_error_set(err, AA_ERANGE,
                          "oracle: %s may reach %.3g, beyond the oracle's range 2^1000 (max |q| %.3g, |k| %.3g, |v| "
                          "%.3g, |dO| %.3g): scale the inputs down",
                          b[i].what, b[i].bound, mq, mk, mv, mdo);
  return AA_OK;
}

int aa_oracle_run(aa_oracle_result_t *out, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                  const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, aa_error_t *err) {
  return aa_oracle_run_kernel(out, pb, q, k, v, dO, opts, AA_OR_KERNEL_TILED, err);
}

/* The options and the kernel choice: AA_OK or the first problem found. */
static int check_opts(const aa_oracle_opts_t *opts, int kernel, aa_error_t *err) {
  if ((unsigned)opts->path >= AA_ORACLE_COUNT)
    return aa_error_set(err, AA_EINVAL, "oracle: unknown path %d", (int)opts->path);
  if (opts->prec < 64 || opts->prec > 4096)
    return aa_error_set(err, AA_EINVAL, "oracle: precision %d outside [64, 4096]", opts->prec);
  if (kernel != AA_OR_KERNEL_TILED && kernel != AA_OR_KERNEL_ROWS && kernel != AA_OR_KERNEL_TILED_DD)
    return aa_error_set(err, AA_EINVAL, "oracle: unknown fast kernel %d", kernel);
  if (opts->threads < 0) return aa_error_set(err, AA_EINVAL, "oracle: negative thread count %d", opts->threads);
  if (!(opts->target >= AA_ORACLE_TARGET_MIN && opts->target <= AA_ORACLE_TARGET_MAX))
    return aa_error_set(err, AA_EINVAL, "oracle: target accuracy %g outside [2^-96, 2^-8]", opts->target);
  if ((unsigned)opts->device >= AA_ORACLE_DEVICE_COUNT)
    return aa_error_set(err, AA_EINVAL, "oracle: unknown device %d", (int)opts->device);
  if (opts->device == AA_ORACLE_DEVICE_CUDA && opts->path == AA_ORACLE_FAST && !aa_oracle_cuda_available()) {
#ifdef AA_HAVE_CUDA
    return aa_error_set(err, AA_EUNSUPPORTED, "oracle: device cuda asked for, but no CUDA GPU is present");
#else
    return aa_error_set(err, AA_EUNSUPPORTED,
                        "oracle: device cuda asked for, but this libattnacc was built without CUDA (configure "
                        "--with-cuda)");
#endif
  }
  return AA_OK;
}

/* The problem, the four tensors (shapes, finite entries), the sink logits and the range of every intermediate. */
static int check_inputs(const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v,
                        const aa_tensor_t *dO, aa_error_t *err) {
  int st;
  if ((st = aa_problem_check(pb, err)) != AA_OK) return st;
  if ((st = check_tensor(q, "q", pb->heads, pb->n_q, pb->d, err)) != AA_OK) return st;
  if ((st = check_tensor(k, "k", pb->kv_heads, pb->n_k, pb->d, err)) != AA_OK) return st;
  if ((st = check_tensor(v, "v", pb->kv_heads, pb->n_k, pb->d, err)) != AA_OK) return st;
  if ((st = check_tensor(dO, "dO", pb->heads, pb->n_q, pb->d, err)) != AA_OK) return st;
  for (size_t i = 0; i < pb->heads * pb->num_sinks; i++)
    if (!isfinite(pb->sinks[i]))
      return aa_error_set(err, AA_ENAN, "oracle: sink logit %zu is not finite (%a)", i, pb->sinks[i]);
  return check_range(pb, q, k, v, dO, err);
}

/* What the one-sequence run checks beyond check_inputs: packing bounds inside the keys, a dropout rescale the
   double-double bounds can carry. */
static int check_rows(const aa_problem_t *pb, aa_error_t *err) {
  if (pb->bound_min != NULL)
    for (size_t i = 0; i < pb->n_q; i++)
      if (pb->bound_min[i] < 0 || pb->bound_max[i] < pb->bound_min[i] || (size_t)pb->bound_max[i] > pb->n_k)
        return aa_error_set(err, AA_EINVAL, "oracle: packing bounds of row %zu are [%d, %d) outside [0, %zu]", i,
                            (int)pb->bound_min[i], (int)pb->bound_max[i], pb->n_k);
  if (pb->keep != NULL && !(pb->keep_scale < 0x1p500))
    return aa_error_set(err, AA_EINVAL, "oracle: keep_scale %g too large", pb->keep_scale);
  return AA_OK;
}

static int outputs_alloc(aa_oracle_result_t *out, const aa_problem_t *pb, aa_error_t *err) {
  size_t sq[3] = {pb->heads, pb->n_q, pb->d}, sk[3] = {pb->kv_heads, pb->n_k, pb->d};
  size_t sl[2] = {pb->heads, pb->n_q}, ss[2] = {pb->heads, pb->num_sinks};
  if (out_alloc(&out->o, 3, sq) != AA_OK || out_alloc(&out->lse, 2, sl) != AA_OK ||
      out_alloc(&out->dq, 3, sq) != AA_OK || out_alloc(&out->dk, 3, sk) != AA_OK ||
      out_alloc(&out->dv, 3, sk) != AA_OK || (pb->num_sinks > 0 && out_alloc(&out->dsinks, 2, ss) != AA_OK)) {
    aa_oracle_result_free(out);
    return aa_error_set(err, AA_ENOMEM, "oracle: cannot allocate the outputs");
  }
  return AA_OK;
}

/* The MPFR number s (320 bits) as a double-double: hi = RN(s), lo = RN(s - hi); relative error
   <= 2^-106 (1 + 2^-52) < 2^-105. */
static aa_or_dd_t dd_of_mpfr(mpfr_t s) {
  aa_or_dd_t x;
  mpfr_t r;
  mpfr_init2(r, 320);
  x.hi = mpfr_get_d(s, MPFR_RNDN);
  mpfr_sub_d(r, s, x.hi, MPFR_RNDN);
  x.lo = mpfr_get_d(r, MPFR_RNDN);
  mpfr_clear(r);
  return x;
}

/* The constants of a run: the softmax scale and 1 / softcap as double-doubles, the underflow floor, the exp
   table. */
static void ctx_constants(aa_or_ctx_t *cx, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                          const aa_tensor_t *v, const aa_tensor_t *dO) {
  mpfr_t s;
  mpfr_init2(s, 320);
  if (pb->scale_default) { /* 1/sqrt(d) is irrational for odd log2(d) */
    mpfr_set_ui(s, (unsigned long)pb->d, MPFR_RNDN);
    mpfr_rec_sqrt(s, s, MPFR_RNDN);
    cx->sig = dd_of_mpfr(s);
    cx->sig_rel = 0x1p-105;
  } else {
    cx->sig.hi = pb->scale;
    cx->sig.lo = 0;
    cx->sig_rel = 0;
  }
  /* Absolute floor per accumulated term: bounds every effect of underflow
     (P values flushed below exp(-707), subnormal low words) on any output,
     using |P| <= 1, |dP|, |D| <= ks d M^2 and |O| <= ks M. */
  double m = fmax(1.0, fmax(fmax(max_abs(q), max_abs(k)), fmax(max_abs(v), max_abs(dO))));
  cx->floor_unit = AA_OR_TINY * m * fmax(1.0, 4.0 * cx->ks * (double)pb->d * m * m) * fmax(1.0, cx->sig.hi) *
                   fmax(1.0, cx->ks) * 4.0;
  cx->mod = aa_problem_has_score_mod(pb);
  cx->cap = pb->softcap;
  if (cx->cap > 0) { /* 1 / softcap */
    mpfr_set_d(s, cx->cap, MPFR_RNDN);
    mpfr_ui_div(s, 1, s, MPFR_RNDN);
    cx->icap = dd_of_mpfr(s);
  }
  mpfr_clear(s);
  aa_oracle_exp_tab_init(&cx->tab);
}

/* The run context of one problem, or NULL when out of memory; work_alloc adds the work arrays. */
static aa_or_ctx_t *ctx_new(const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v,
                            const aa_tensor_t *dO, const aa_oracle_opts_t *opts, int kernel) {
  aa_or_ctx_t *cx = calloc(1, sizeof *cx);
  if (cx == NULL) return NULL;
  cx->pb = pb;
  cx->q = q->data;
  cx->k = k->data;
  cx->v = v->data;
  cx->dO = dO->data;
  cx->n_q = pb->n_q;
  cx->n_k = pb->n_k;
  cx->d = pb->d;
  cx->heads = pb->heads;
  cx->kvh = pb->kv_heads;
  cx->group = pb->heads / pb->kv_heads;
  cx->ns = pb->num_sinks;
  cx->ks = pb->keep != NULL ? pb->keep_scale : 1.0;
  cx->prec = opts->prec;
  cx->target = opts->target;
  cx->tier64 = kernel == AA_OR_KERNEL_TILED && opts->target >= AA_OR_TIER64_TARGET;
#ifdef _OPENMP
  cx->threads = opts->threads > 0 ? opts->threads : omp_get_max_threads();
#else
  cx->threads = 1;
#endif
  ctx_constants(cx, pb, q, k, v, dO);
  return cx;
}

/* Per output tensor: the certified relative errors and the todo flags (every element todo). 0 when out of memory. */
static int work_alloc(aa_or_ctx_t *cx, aa_oracle_result_t *out) {
  aa_oracle_out_t *outs[AA_OR_NT] = {&out->o, &out->lse, &out->dq, &out->dk, &out->dv, &out->dsinks};
  int ok = 1;
  for (int t = 0; t < AA_OR_NT; t++) {
    cx->w[t].out = outs[t];
    cx->w[t].n = aa_tensor_numel(&outs[t]->val);
    cx->w[t].rel = calloc(cx->w[t].n + 1, sizeof(double));
    cx->w[t].todo = malloc(cx->w[t].n + 1);
    if (cx->w[t].rel == NULL || cx->w[t].todo == NULL)
      ok = 0;
    else
      memset(cx->w[t].todo, 1, cx->w[t].n + 1);
  }
  return ok;
}

/* The fast path (on the GPU where it is asked for or pays, aa_oracle_cuda_auto_ok; else the chosen CPU kernel)
   and the MPFR recompute of what it left, or the MPFR engine alone. */
static int run_path(aa_or_ctx_t *cx, const aa_oracle_opts_t *opts, int kernel, aa_oracle_result_t *out,
                    aa_error_t *err) {
  int st;
  double t = 0;
  (void)out; /* out->device: only a CUDA build can say cuda */
  if (opts->path != AA_ORACLE_FAST) return aa_oracle_mp_resolve(cx, 0, err);
  aa_phase_mark("AA_ORACLE_CUDA_TIMES", "oracle", "", &t);
#ifdef AA_HAVE_CUDA
  if (opts->device != AA_ORACLE_DEVICE_CPU && aa_oracle_cuda_supports(cx) && aa_oracle_cuda_available() &&
      (opts->device == AA_ORACLE_DEVICE_CUDA || aa_oracle_cuda_auto_ok(cx))) {
    out->device = AA_ORACLE_DEVICE_CUDA;
    st = aa_oracle_fast_run_cuda(cx, err);
  } else
#endif
    st = kernel == AA_OR_KERNEL_ROWS ? aa_oracle_fast_run_rows(cx, err) : aa_oracle_fast_run(cx, err);
  aa_phase_mark("AA_ORACLE_CUDA_TIMES", "oracle", "fast path", &t);
  if (st == AA_OK) st = aa_oracle_mp_resolve(cx, 1, err);
  aa_phase_mark("AA_ORACLE_CUDA_TIMES", "oracle", "MPFR recompute of the elements left", &t);
  return st;
}

/* The counts and each output's relerr_bound (the largest certified relative error) into out; frees cx. */
static void ctx_finish(aa_or_ctx_t *cx, aa_oracle_result_t *out) {
  aa_oracle_out_t *outs[AA_OR_NT] = {&out->o, &out->lse, &out->dq, &out->dk, &out->dv, &out->dsinks};
  out->n_recomputed = cx->n_recomputed;
  out->n_uncertified = cx->n_uncertified;
  for (int t = 0; t < AA_OR_NT; t++) {
    double m = 0;
    const double *rel = cx->w[t].rel;
    size_t n = rel != NULL ? cx->w[t].n : 0;
    /* a maximum: the same for any thread count */
#pragma omp parallel for reduction(max : m) num_threads(cx->threads) schedule(static) if (n >= ((size_t)1 << 16))
    for (size_t i = 0; i < n; i++)
      if (rel[i] > m) m = rel[i]; /* a NaN is passed over, as fmax does */
    outs[t]->relerr_bound = m;
    free(cx->w[t].rel);
    free(cx->w[t].todo);
  }
  free(cx->lse_h);
  free(cx->lse_l);
  free(cx->e_lse);
  free(cx->d_h);
  free(cx->d_l);
  free(cx->e_d);
  free(cx->row_empty);
  free(cx);
}

int aa_oracle_run_kernel(aa_oracle_result_t *out, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                         const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, int kernel,
                         aa_error_t *err) {
  aa_oracle_opts_t defo;
  int st;
  if (out == NULL || pb == NULL) return aa_error_set(err, AA_EINVAL, "oracle: NULL result or problem");
  memset(out, 0, sizeof *out);
  if (opts == NULL) {
    aa_oracle_opts_init(&defo);
    opts = &defo;
  }
  if ((st = check_opts(opts, kernel, err)) != AA_OK || (st = check_inputs(pb, q, k, v, dO, err)) != AA_OK) return st;
  if (pb->varlen_batch > 0) { /* on the CPU (oracle.h) */
    aa_oracle_opts_t cpu = *opts;
    cpu.device = AA_ORACLE_DEVICE_CPU;
    st = aa__oracle_run_varlen(out, pb, q, k, v, dO, &cpu, kernel, err);
    out->device = AA_ORACLE_DEVICE_CPU;
    return st;
  }
  if ((st = check_rows(pb, err)) != AA_OK || (st = outputs_alloc(out, pb, err)) != AA_OK) return st;
  aa_or_ctx_t *cx = ctx_new(pb, q, k, v, dO, opts, kernel);
  if (cx == NULL) {
    aa_oracle_result_free(out);
    return aa_error_set(err, AA_ENOMEM, "oracle: cannot allocate the context");
  }
  out->device = AA_ORACLE_DEVICE_CPU; /* run_path says where the fast path ran */
  double t = 0;
  aa_phase_mark("AA_ORACLE_CUDA_TIMES", "oracle", "", &t);
  if (!work_alloc(cx, out))
    st = aa_error_set(err, AA_ENOMEM, "oracle: cannot allocate the work arrays");
  else
    st = run_path(cx, opts, kernel, out, err);
  ctx_finish(cx, out);
  aa_phase_mark("AA_ORACLE_CUDA_TIMES", "oracle", "all (with the work arrays and the bounds)", &t);
  if (st != AA_OK) aa_oracle_result_free(out);
  return st;
}
