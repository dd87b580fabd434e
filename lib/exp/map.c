/* attnacc: error map of exp constructions over intervals of FP32 inputs or over samples (OpenMP, thread-count
 * independent). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "exp-impl.h"

void aa_exp_widen_bf16(float *out, const uint16_t *h, size_t n);

#define BLK 4096 /* inputs per block: the unit of work and of partial sums */
#define RUNS_PER_BLK 8

const char *aa_exp_cls_name(int cls) {
  static const char *names[AA_EXP_NCLS] = {"nan", "inf", "negative", "zero", "subnormal"};
  return cls >= 0 && cls < AA_EXP_NCLS ? names[cls] : "?";
}

/* Partial result of one block for one construction. Runs are kept as index
   ranges in the input sequence so blocks can be stitched in order. */
typedef struct {
  uint64_t valid, mismatch;
  double min_ratio, max_ratio, max_rel, sum_rel;
  uint64_t argmin, argmax, argrel;
  uint64_t cls_count[AA_EXP_NCLS], cls_runs[AA_EXP_NCLS];
  int nrun[AA_EXP_NCLS], trunc[AA_EXP_NCLS];
  uint64_t run_lo[AA_EXP_NCLS][RUNS_PER_BLK], run_hi[AA_EXP_NCLS][RUNS_PER_BLK];
  int first_cls, last_cls, last_stored;
  uint64_t ref_checked;
  double ref_max;
} part_t;

/* Global merge state for one construction. */
typedef struct {
  uint64_t lo[AA_EXP_NCLS][AA_EXP_MAX_RANGES], hi[AA_EXP_NCLS][AA_EXP_MAX_RANGES];
  int open[AA_EXP_NCLS];  /* the last stored range may still grow (its run reached the last block's end) */
  int prev_last, started; /* class at the end of the previous block */
  uint64_t argmin, argmax, argrel;
} merge_t;

typedef struct {
  const float *arr; /* samples, or NULL for keys */
  uint32_t key_lo;
} source_t;

static inline float src_x(const source_t *s, uint64_t idx) {
  return s->arr != NULL ? s->arr[idx] : aa_exp_unkey((uint32_t)(s->key_lo + idx));
}

/* libm exp2 with the cheap ends answered directly (the underflow and
   overflow paths of libm set errno and are slow; half of all bit patterns
   have |x| >= 2^10). */
static inline double ref_of(float x) {
  if (x < -1100.0f) return 0.0;
  if (x > 1100.0f) return INFINITY;
  return exp2((double)x);
}

/* Relative error of the libm reference against MPFR (the reference's own
   certification); MPFR at 113 bits is exact to far below 2^-52. */
static double ref_error(float x, double ref) {
  mpfr_t xx, r;
  mpfr_init2(xx, 24);
  mpfr_init2(r, 113);
  mpfr_set_flt(xx, x, MPFR_RNDN);
  mpfr_exp2(r, xx, MPFR_RNDN);
  double out = 0;
  if (mpfr_regular_p(r) && ref > 0 && isfinite(ref) && ref > 0x1p-1022) {
    mpfr_sub_d(r, r, ref, MPFR_RNDN);
    mpfr_div_d(r, r, ref, MPFR_RNDN);
    out = fabs(mpfr_get_d(r, MPFR_RNDN));
  }
  mpfr_clear(xx);
  mpfr_clear(r);
  return out;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define AA_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define AA_CLONES
#endif

/* RNE of a positive normal double to p = 53 - drop bits on its bit pattern
   (the carry into the exponent is the correct rounding up to the next
   binade). Only valid for v >= 2^-126; the caller flags smaller values. */
static inline double rne_bits(double v, int drop) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  u += (UINT64_C(1) << (drop - 1)) - 1 + ((u >> drop) & 1);
  u &= ~((UINT64_C(1) << drop) - 1);
  memcpy(&v, &u, sizeof v);
  return v;
}

/* Pass 1, straight-line and vectorisable: class, validity, ratio, relative
   error, and the correct-rounding comparison. mis[i] = 0 equal, 1 differs,
   2 undecided (the libm value is within 2^-49 of a rounding boundary, or in
   the BF16 subnormal range): those few go to the exact path afterwards. */
AA_CLONES static void stats_pass(uint8_t *cls, uint8_t *mis, double *ratio, double *rel, const double *ref,
                                 const float *out, const uint16_t *out16, size_t m, int bf16) {
  for (size_t i = 0; i < m; i++) {
    float v = out[i];
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    uint32_t a = u & 0x7fffffffu;
    cls[i] = a > 0x7f800000u    ? AA_EXP_CLS_NAN
             : a == 0x7f800000u ? AA_EXP_CLS_INF
             : a == 0           ? AA_EXP_CLS_ZERO
             : (u >> 31)        ? AA_EXP_CLS_NEG
             : a < 0x00800000u  ? AA_EXP_CLS_SUBNORMAL
                                : AA_EXP_NCLS;
    double r = ref[i], dv = (double)v;
    int valid = r > 0 && r < INFINITY && dv >= 0 && dv < INFINITY;
    double rr = valid ? r : 1.0;
    ratio[i] = valid ? dv / rr : NAN;
    rel[i] = valid ? fabs(dv - rr) / rr : -1.0;
    double lo = rr * (1.0 - 0x1p-49), hi = rr * (1.0 + 0x1p-49);
    uint8_t mm;
    if (bf16) {
      double ql = rne_bits(lo, 45), qh = rne_bits(hi, 45);
      float qf = (float)ql;
      uint32_t qb;
      memcpy(&qb, &qf, sizeof qb);
      int undecided = ql != qh || lo < 0x1p-126 || ql >= 0x1p128;
      mm = undecided ? 2 : (uint16_t)(qb >> 16) != out16[i];
    } else {
      float fl = (float)lo, fh = (float)hi;
      uint32_t qb;
      memcpy(&qb, &fl, sizeof qb);
      mm = fl != fh ? 2 : qb != u;
    }
    mis[i] = valid ? mm : 0;
  }
}

static void block_stats(part_t *p, const float *x, const double *ref, const float *out, const uint16_t *out16,
                        size_t m, uint64_t base, int bf16, int shifted, uint8_t *cls, uint8_t *mis, double *ratio,
                        double *rel) {
  memset(p, 0, sizeof *p);
  p->min_ratio = INFINITY;
  p->max_ratio = -INFINITY;
  p->max_rel = -1;
  stats_pass(cls, mis, ratio, rel, ref, out, out16, m, bf16);
  for (size_t i = 0; i < m; i++) {
    double rl = rel[i];
    if (rl < 0) continue;
    p->valid++;
    p->sum_rel += rl;
    if (ratio[i] < p->min_ratio) {
      p->min_ratio = ratio[i];
      p->argmin = base + i;
    }
    if (ratio[i] > p->max_ratio) {
      p->max_ratio = ratio[i];
      p->argmax = base + i;
    }
    if (rl > p->max_rel) {
      p->max_rel = rl;
      p->argrel = base + i;
    }
  }
  if (!shifted) {
    for (size_t i = 0; i < m; i++) {
      if (mis[i] == 1)
        p->mismatch++;
      else if (mis[i] == 2) {
        if (bf16)
          p->mismatch += out16[i] != aa_exp2_cr_bf16_ref(x[i], ref[i]);
        else
          p->mismatch += aa_f32_bits(out[i]) != aa_f32_bits(aa_exp2_cr_f32_ref(x[i], ref[i]));
      }
    }
  }
  /* runs: scan for class changes */
  int prev = -1, stored = -1; /* class of the current run, its slot in run_lo/run_hi or -1 */
  for (size_t i = 0; i < m; i++) {
    int c = cls[i];
    if (c == prev) continue;
    if (prev >= 0 && prev < AA_EXP_NCLS && stored >= 0) p->run_hi[prev][stored] = base + i - 1;
    stored = -1;
    if (c < AA_EXP_NCLS) {
      p->cls_runs[c]++;
      if (p->nrun[c] < RUNS_PER_BLK) {
        stored = p->nrun[c]++;
        p->run_lo[c][stored] = base + i;
      } else {
        p->trunc[c] = 1;
      }
    }
    if (i == 0) p->first_cls = c;
    prev = c;
  }
  /* local counters (a counter in memory indexed by class is a store-forwarding chain) */
  uint32_t n0 = 0, n1 = 0, n2 = 0, n3 = 0, n4 = 0;
  for (size_t i = 0; i < m; i++) {
    uint8_t c = cls[i];
    n0 += c == 0;
    n1 += c == 1;
    n2 += c == 2;
    n3 += c == 3;
    n4 += c == 4;
  }
  p->cls_count[0] = n0;
  p->cls_count[1] = n1;
  p->cls_count[2] = n2;
  p->cls_count[3] = n3;
  p->cls_count[4] = n4;
  if (prev >= 0 && prev < AA_EXP_NCLS && stored >= 0) p->run_hi[prev][stored] = base + m - 1;
  p->last_cls = prev;
  p->last_stored = stored >= 0;
}

static void merge(aa_exp_map_t *o, merge_t *g, const part_t *p) {
  o->valid += p->valid;
  o->cr_mismatch += p->mismatch;
  o->sum_rel_err += p->sum_rel;
  if (p->valid) {
    if (p->min_ratio < o->min_ratio) {
      o->min_ratio = p->min_ratio;
      g->argmin = p->argmin;
    }
    if (p->max_ratio > o->max_ratio) {
      o->max_ratio = p->max_ratio;
      g->argmax = p->argmax;
    }
    if (p->max_rel > o->max_rel_err) {
      o->max_rel_err = p->max_rel;
      g->argrel = p->argrel;
    }
  }
  for (int c = 0; c < AA_EXP_NCLS; c++) {
    /* a run that crosses the block boundary was counted in both blocks */
    int cont = g->started && g->prev_last == c && p->first_cls == c;
    o->cls_count[c] += p->cls_count[c];
    o->cls_runs[c] += p->cls_runs[c] - (cont ? 1 : 0);
    if (p->trunc[c]) o->ranges_truncated[c] = 1;
    int open = 0;
    for (int r = 0; r < p->nrun[c]; r++) {
      if (r == 0 && cont) {
        if (g->open[c]) g->hi[c][o->nranges[c] - 1] = p->run_hi[c][r];
        open = g->open[c];
      } else if (o->nranges[c] < AA_EXP_MAX_RANGES) {
        g->lo[c][o->nranges[c]] = p->run_lo[c][r];
        g->hi[c][o->nranges[c]] = p->run_hi[c][r];
        o->nranges[c]++;
        open = 1;
      } else {
        o->ranges_truncated[c] = 1;
        open = 0;
      }
    }
    g->open[c] = p->last_cls == c && p->last_stored ? open : 0;
  }
  g->prev_last = p->last_cls;
  g->started = 1;
  o->ref_checked += p->ref_checked;
  if (p->ref_max > o->ref_observed_max_relerr) o->ref_observed_max_relerr = p->ref_max;
}

/* One thread's scratch for a block of BLK inputs. */
typedef struct {
  float *x, *o, *xin; /* the inputs, a construction's outputs, the inputs less the shift */
  double *ref, *ratio;
  uint16_t *o16;
  uint8_t *cls;
} scratch_t;

static int scratch_alloc(scratch_t *w) {
  w->x = malloc(sizeof(float) * BLK * 3);
  w->ref = malloc(sizeof(double) * BLK);
  w->o16 = malloc(sizeof(uint16_t) * BLK);
  w->ratio = malloc(sizeof(double) * BLK * 2);
  w->cls = malloc(BLK * 2);
  w->o = w->x != NULL ? w->x + BLK : NULL;
  w->xin = w->x != NULL ? w->x + 2 * BLK : NULL;
  return w->x != NULL && w->ref != NULL && w->o16 != NULL && w->ratio != NULL && w->cls != NULL;
}

static void scratch_free(scratch_t *w) {
  free(w->x);
  free(w->ref);
  free(w->o16);
  free(w->ratio);
  free(w->cls);
}

/* The m inputs from `base` and their exact exp2 (the kernel subtracts the
   shift in FP32; the reference does not round). */
static void block_inputs(scratch_t *w, const source_t *src, uint64_t base, size_t m, float sh) {
  if (src->arr != NULL)
    memcpy(w->x, src->arr + base, sizeof(float) * m);
  else
    for (size_t i = 0; i < m; i++)
      w->x[i] = aa_exp_unkey((uint32_t)(src->key_lo + base + i));
  if (sh != 0.0f) {
    for (size_t i = 0; i < m; i++)
      w->xin[i] = w->x[i] - sh;
    for (size_t i = 0; i < m; i++)
      w->ref[i] = exp2((double)w->x[i] - (double)sh);
  } else {
    memcpy(w->xin, w->x, sizeof(float) * m);
    for (size_t i = 0; i < m; i++)
      w->ref[i] = ref_of(w->x[i]);
  }
}

/* Construction e's outputs of the block into w->o (and w->o16 when it rounds to BF16). */
static void block_outputs(scratch_t *w, const aa_exp_t *e, int bf16, size_t m, float sh) {
  if (e->kind == AA_EXP_EXACT && e->order == AA_EXP_ORDER_FP32 && sh == 0.0f) {
    /* `exact` from the reference already computed (same function as aa_exp_eval) */
    for (size_t i = 0; i < m; i++)
      w->o[i] = aa_exp2_cr_f32_ref(w->x[i], w->ref[i]);
    if (bf16) {
      for (size_t i = 0; i < m; i++)
        w->o16[i] = aa_exp_cvt16(w->o[i], e->cvt);
      aa_exp_widen_bf16(w->o, w->o16, m);
    }
  } else if (bf16) {
    aa_exp_eval_bf16_batch(w->o16, w->xin, m, e);
    aa_exp_widen_bf16(w->o, w->o16, m);
  } else {
    aa_exp_eval_batch(w->o, w->xin, m, e);
  }
}

/* Block `blk` of the inputs through every construction, into parts[bi * ne + c]. */
static void map_block(part_t *parts, scratch_t *w, const aa_exp_t *e, int ne, const int *bf16, const source_t *src,
                      uint64_t n, uint64_t blk, uint64_t stride, float sh) {
  uint64_t base = blk * BLK, checked = 0;
  size_t m = (size_t)(n - base < BLK ? n - base : BLK);
  double rmax = 0;
  block_inputs(w, src, base, m, sh);
  if (stride) /* the reference itself against MPFR, every stride-th input */
    for (uint64_t idx = (base + stride - 1) / stride * stride; idx < base + m; idx += stride) {
      double re = ref_error(w->xin[idx - base], exp2((double)w->xin[idx - base]));
      checked++;
      if (re > rmax) rmax = re;
    }
  for (int c = 0; c < ne; c++) {
    part_t *p = &parts[c];
    block_outputs(w, &e[c], bf16[c], m, sh);
    block_stats(p, w->x, w->ref, w->o, w->o16, m, base, bf16[c], sh != 0.0f, w->cls, w->cls + BLK, w->ratio,
                w->ratio + BLK);
    p->ref_checked = checked;
    p->ref_max = rmax;
  }
}

static void map_init(aa_exp_map_t *out, int *bf16, const aa_exp_t *e, int ne, uint64_t n,
                     const aa_exp_map_opts_t *opts) {
  for (int c = 0; c < ne; c++) {
    const aa_exp_info_t *in = aa_exp_info(e[c].kind);
    bf16[c] = opts->out_bf16 || (in != NULL && in->bf16_native);
    memset(&out[c], 0, sizeof out[c]);
    out[c].inputs = n;
    out[c].min_ratio = INFINITY;
    out[c].max_ratio = -INFINITY;
    out[c].max_rel_err = -1;
  }
}

/* The means, and the arg-extremes and ranges as inputs rather than indices. */
static void map_finish(aa_exp_map_t *o, const merge_t *g, const source_t *src) {
  o->mean_rel_err = o->valid ? o->sum_rel_err / (double)o->valid : NAN;
  if (!o->valid) {
    o->min_ratio = o->max_ratio = o->max_rel_err = NAN;
  } else {
    o->argmin_ratio = src_x(src, g->argmin);
    o->argmax_ratio = src_x(src, g->argmax);
    o->argmax_rel_err = src_x(src, g->argrel);
  }
  for (int k = 0; k < AA_EXP_NCLS; k++)
    for (int r = 0; r < o->nranges[k]; r++) {
      o->ranges[k][r].lo = src_x(src, g->lo[k][r]);
      o->ranges[k][r].hi = src_x(src, g->hi[k][r]);
    }
}

static int map_run(aa_exp_map_t *out, const aa_exp_t *e, int ne, const source_t *src, uint64_t n,
                   const aa_exp_map_opts_t *opts, aa_error_t *err) {
  if (out == NULL || e == NULL || ne < 1) return aa_error_set(err, AA_EINVAL, "aa_exp_map: bad arguments");
  if (n == 0) return aa_error_set(err, AA_EINVAL, "aa_exp_map: no inputs");
  aa_exp_map_opts_t def = {0, 4096, 0, 0.0f};
  if (opts == NULL) opts = &def;
  uint64_t stride = opts->ref_check > 0 ? (n + (uint64_t)opts->ref_check - 1) / (uint64_t)opts->ref_check : 0;
  int nthreads = 1;
#ifdef _OPENMP
  nthreads = opts->threads > 0 ? opts->threads : omp_get_max_threads();
#endif
  uint64_t nblk = (n + BLK - 1) / BLK;
  /* large superblocks: few barriers, so a thread descheduled on a shared
     machine costs little spin-waiting in the others */
  uint64_t sb = (uint64_t)nthreads * 256;
  int *bf16 = calloc((size_t)ne, sizeof *bf16);
  merge_t *g = calloc((size_t)ne, sizeof *g);
  part_t *parts = malloc(sizeof(part_t) * (size_t)sb * (size_t)ne);
  int ok = bf16 != NULL && g != NULL && parts != NULL;
  if (ok) map_init(out, bf16, e, ne, n, opts);
  for (uint64_t b0 = 0; ok && b0 < nblk; b0 += sb) {
    uint64_t nb = nblk - b0 < sb ? nblk - b0 : sb;
#pragma omp parallel num_threads(nthreads)
    {
      scratch_t w;
      int mine = scratch_alloc(&w);
      if (!mine) {
#pragma omp atomic write
        ok = 0;
      }
      /* every thread reaches the worksharing loop, even one without buffers */
#pragma omp for schedule(dynamic, 1)
      for (uint64_t bi = 0; bi < nb; bi++)
        if (mine) map_block(&parts[(size_t)bi * (size_t)ne], &w, e, ne, bf16, src, n, b0 + bi, stride, opts->shift);
      scratch_free(&w);
      /* MPFR caches constants per thread (the reference's exp2); a pooled
         thread would otherwise keep them past the library call. */
      mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    }
    for (uint64_t bi = 0; ok && bi < nb; bi++)
      for (int c = 0; c < ne; c++)
        merge(&out[c], &g[c], &parts[(size_t)bi * (size_t)ne + (size_t)c]);
  }
  for (int c = 0; c < ne && ok; c++)
    map_finish(&out[c], &g[c], src);
  free(bf16);
  free(g);
  free(parts);
  return ok ? AA_OK : aa_error_set(err, AA_ENOMEM, "aa_exp_map: out of memory");
}

int aa_exp_map_keys(aa_exp_map_t *out, const aa_exp_t *e, int ne, uint32_t key_lo, uint32_t key_hi,
                    const aa_exp_map_opts_t *opts, aa_error_t *err) {
  if (key_lo > key_hi) return aa_error_set(err, AA_EINVAL, "aa_exp_map_keys: empty key range");
  source_t s = {NULL, key_lo};
  return map_run(out, e, ne, &s, (uint64_t)key_hi - key_lo + 1, opts, err);
}

int aa_exp_map_interval(aa_exp_map_t *out, const aa_exp_t *e, int ne, float lo, float hi,
                        const aa_exp_map_opts_t *opts, aa_error_t *err) {
  if (lo != lo || hi != hi || lo > hi)
    return aa_error_set(err, AA_EINVAL, "bad interval [%a, %a]: need lo <= hi, no NaN", (double)lo, (double)hi);
  return aa_exp_map_keys(out, e, ne, aa_exp_key(lo), aa_exp_key(hi), opts, err);
}

static int cmp_key(const void *a, const void *b) {
  uint32_t ka = aa_exp_key(*(const float *)a), kb = aa_exp_key(*(const float *)b);
  return ka < kb ? -1 : ka > kb;
}

int aa_exp_map_samples(aa_exp_map_t *out, const aa_exp_t *e, int ne, float *x, size_t n,
                       const aa_exp_map_opts_t *opts, aa_error_t *err) {
  if (x == NULL || n == 0) return aa_error_set(err, AA_EINVAL, "aa_exp_map_samples: no samples");
  for (size_t i = 0; i < n; i++)
    if (x[i] != x[i]) return aa_error_set(err, AA_ENAN, "aa_exp_map_samples: sample %zu is NaN", i);
  qsort(x, n, sizeof *x, cmp_key);
  source_t s = {x, 0};
  return map_run(out, e, ne, &s, n, opts, err);
}
