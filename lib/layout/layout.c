/* attnacc: layout names, inference from q/k shapes, and import/export between a caller's layout and [B*H, N, d]. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <string.h>

#include "layout.h"
#include "rng.h"

static const char *const names[AA_LAYOUT_COUNT] = {"auto", "bhnd", "bnhd", "hnd", "nd", "nhd"};
static const char *const axes[AA_LAYOUT_COUNT] = {"?",         "[B, H, N, d]", "[B, N, H, d]",
                                                  "[H, N, d]", "[N, d]",       "[N, H, d]"};

const char *aa_layout_name(aa_layout_t l) {
  return (unsigned)l < AA_LAYOUT_COUNT ? names[l] : "?";
}

const char *aa_layout_axes(aa_layout_t l) {
  return (unsigned)l < AA_LAYOUT_COUNT ? axes[l] : "?";
}

int aa_layout_from_name(aa_layout_t *out, const char *name) {
  int i = aa_name_index(name, names, AA_LAYOUT_COUNT);
  if (i < 0) return AA_EINVAL;
  *out = (aa_layout_t)i;
  return AA_OK;
}

int aa_layout_ndim(aa_layout_t l) {
  switch (l) {
  case AA_LAYOUT_BHND:
  case AA_LAYOUT_BNHD:
    return 4;
  case AA_LAYOUT_HND:
  case AA_LAYOUT_NHD:
    return 3;
  case AA_LAYOUT_ND:
    return 2;
  default:
    return 0;
  }
}

int aa_layout_dims(aa_dims_t *out, aa_layout_t l, int ndim, const size_t *shape) {
  if (aa_layout_ndim(l) == 0 || ndim != aa_layout_ndim(l)) return AA_ESHAPE;
  switch (l) {
  case AA_LAYOUT_BHND:
    *out = (aa_dims_t){shape[0], shape[1], shape[2], shape[3]};
    break;
  case AA_LAYOUT_BNHD:
    *out = (aa_dims_t){shape[0], shape[2], shape[1], shape[3]};
    break;
  case AA_LAYOUT_HND:
    *out = (aa_dims_t){1, shape[0], shape[1], shape[2]};
    break;
  case AA_LAYOUT_NHD:
    *out = (aa_dims_t){1, shape[1], shape[0], shape[2]};
    break;
  default:
    *out = (aa_dims_t){1, 1, shape[0], shape[1]};
    break;
  }
  return AA_OK;
}

static void shape_str(char *buf, size_t cap, int ndim, const size_t *shape) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%zu", i ? ", " : "", shape[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* Why q and k read in l do not form a problem, or NULL when they do. */
static const char *misfit(aa_layout_t l, int ndim, const size_t *qs, const size_t *ks) {
  aa_dims_t q, k;
  if (aa_layout_dims(&q, l, ndim, qs) != AA_OK || aa_layout_dims(&k, l, ndim, ks) != AA_OK) return "axis count";
  if (q.b == 0 || q.h == 0 || q.n == 0 || q.d == 0 || k.h == 0 || k.n == 0) return "an axis is empty";
  if (q.b != k.b) return "q and k have different batch sizes";
  if (q.d != k.d) return "q and k have different head dimensions";
  if (q.h % k.h != 0) return "the kv heads do not divide the query heads";
  return NULL;
}

int aa_layout_resolve(aa_layout_t *out, aa_layout_t given, int ndim, const size_t *q_shape, const size_t *k_shape,
                      aa_error_t *err) {
  char qs[96], ks[96];
  const char *why;
  shape_str(qs, sizeof qs, ndim, q_shape);
  shape_str(ks, sizeof ks, ndim, k_shape);
  if (given != AA_LAYOUT_AUTO) {
    if ((unsigned)given >= AA_LAYOUT_COUNT) return aa_error_set(err, AA_EINVAL, "layout %d is unknown", (int)given);
    if (ndim != aa_layout_ndim(given))
      return aa_error_set(err, AA_ESHAPE, "layout %s %s needs %d axes, but q is %s", names[given], axes[given],
                          aa_layout_ndim(given), qs);
    if ((why = misfit(given, ndim, q_shape, k_shape)) != NULL)
      return aa_error_set(err, AA_ESHAPE, "layout %s %s does not fit q %s and k %s: %s", names[given], axes[given],
                          qs, ks, why);
    *out = given;
    return AA_OK;
  }
  if (ndim == 2 || ndim == 3) {
    aa_layout_t l = ndim == 2 ? AA_LAYOUT_ND : AA_LAYOUT_HND;
    if ((why = misfit(l, ndim, q_shape, k_shape)) != NULL)
      return aa_error_set(err, AA_ESHAPE, "q %s and k %s read as %s %s: %s", qs, ks, names[l], axes[l], why);
    *out = l;
    return AA_OK;
  }
  if (ndim == 4) {
    const char *w1 = misfit(AA_LAYOUT_BHND, 4, q_shape, k_shape), *w2 = misfit(AA_LAYOUT_BNHD, 4, q_shape, k_shape);
    if (w1 == NULL && w2 == NULL)
      return aa_error_set(
          err, AA_EINVAL,
          "q %s and k %s fit two layouts: bhnd %s (H=%zu, N=%zu, H_kv=%zu) and bnhd %s (N=%zu, H=%zu, "
          "H_kv=%zu); say which (--layout bhnd|bnhd, or layout= in Python)",
          qs, ks, axes[AA_LAYOUT_BHND], q_shape[1], q_shape[2], k_shape[1], axes[AA_LAYOUT_BNHD], q_shape[1],
          q_shape[2], k_shape[2]);
    if (w1 == NULL || w2 == NULL) {
      *out = w1 == NULL ? AA_LAYOUT_BHND : AA_LAYOUT_BNHD;
      return AA_OK;
    }
    return aa_error_set(err, AA_ESHAPE, "q %s and k %s fit neither bhnd %s (%s) nor bnhd %s (%s)", qs, ks,
                        axes[AA_LAYOUT_BHND], w1, axes[AA_LAYOUT_BNHD], w2);
  }
  return aa_error_set(err, AA_ESHAPE,
                      "q %s has %d axes; the layouts are [B, H, N, d], [B, N, H, d], [H, N, d], [N, d]", qs, ndim);
}

/* Offset in the caller's C-order array of (b, h, n, j). */
static size_t offset(aa_layout_t l, const aa_dims_t *m, size_t b, size_t h, size_t n, size_t j) {
  if (l == AA_LAYOUT_BNHD || l == AA_LAYOUT_NHD) return ((b * m->n + n) * m->h + h) * m->d + j;
  return ((b * m->h + h) * m->n + n) * m->d + j;
}

int aa_layout_import(aa_tensor_t *out, const double *data, aa_fmt_t fmt, aa_layout_t l, int ndim, const size_t *shape,
                     aa_error_t *err) {
  aa_dims_t m;
  size_t s[3], bh;
  *out = (aa_tensor_t){0};
  if (aa_layout_dims(&m, l, ndim, shape) != AA_OK)
    return aa_error_set(err, AA_ESHAPE, "layout %s needs %d axes, the array has %d", aa_layout_name(l),
                        aa_layout_ndim(l), ndim);
  if (aa_size_mul(&bh, m.b, m.h) != AA_OK) return aa_error_set(err, AA_ENOMEM, "batch x heads overflows");
  s[0] = bh;
  s[1] = m.n;
  s[2] = m.d;
  if (aa_tensor_alloc(out, 3, s, fmt) != AA_OK)
    return aa_error_set(err, AA_ENOMEM, "cannot allocate [%zu, %zu, %zu] doubles", s[0], s[1], s[2]);
    /* rows in parallel (each a copy of its own): the copies of a large problem's eight arrays were a tenth of a
       score on CUDA tensors, on one core */
#pragma omp parallel for schedule(static) if (bh * m.n * m.d >= ((size_t)1 << 18))
  for (size_t r = 0; r < bh * m.n; r++) {
    size_t b = r / (m.h * m.n), h = r / m.n % m.h, n = r % m.n;
    memcpy(out->data + r * m.d, data + offset(l, &m, b, h, n, 0), m.d * sizeof(double));
  }
  return AA_OK;
}

void aa_layout_export(double *dst, const aa_tensor_t *t, aa_layout_t l, const aa_dims_t *m) {
  size_t rows = m->b * m->h * m->n;
#pragma omp parallel for schedule(static) if (rows * m->d >= ((size_t)1 << 18))
  for (size_t r = 0; r < rows; r++) {
    size_t b = r / (m->h * m->n), h = r / m->n % m->h, n = r % m->n;
    memcpy(dst + offset(l, m, b, h, n, 0), t->data + r * m->d, m->d * sizeof(double));
  }
}

int aa_layout_index(size_t *idx, aa_layout_t l, const aa_dims_t *m, size_t i) {
  size_t j = i % m->d, n = (i / m->d) % m->n, bh = i / (m->d * m->n), b = bh / m->h, h = bh % m->h;
  switch (l) {
  case AA_LAYOUT_BHND:
    idx[0] = b, idx[1] = h, idx[2] = n, idx[3] = j;
    return 4;
  case AA_LAYOUT_BNHD:
    idx[0] = b, idx[1] = n, idx[2] = h, idx[3] = j;
    return 4;
  case AA_LAYOUT_HND:
    idx[0] = h, idx[1] = n, idx[2] = j;
    return 3;
  case AA_LAYOUT_NHD:
    idx[0] = n, idx[1] = h, idx[2] = j;
    return 3;
  default:
    idx[0] = n, idx[1] = j;
    return 2;
  }
}

static const char *const dist_names[AA_DIST_COUNT] = {"normal",        "uniform",   "outlier", "constant",
                                                      "near-constant", "huge-keys", "massive"};

const char *aa_layout_dist_name(int dist) {
  return dist >= 0 && dist < AA_DIST_COUNT ? dist_names[dist] : NULL;
}

int aa_layout_dist_from_name(const char *name) {
  for (int i = 0; i < AA_DIST_COUNT; i++)
    if (strcmp(name, dist_names[i]) == 0) return i;
  return -1;
}

/* One element (in units of sigma) of row r, column c of head h of tensor id, from the head's stream; *row_mul is
   the huge-keys factor drawn at the row's start. */
static double draw_elem(aa_pcg64_t *rng, int dist, uint64_t id, size_t h, size_t c, double *row_mul) {
  double z;
  switch (dist) {
  case AA_DIST_UNIFORM:
    return aa_pcg64_uniform(rng);
  case AA_DIST_OUTLIER: {
    z = aa_pcg64_normal(rng);
    double u = aa_pcg64_uniform(rng), big = aa_pcg64_normal(rng);
    return u < 0.001 ? z + 10.0 * big : z;
  }
  case AA_DIST_CONSTANT:
    return 1.0;
  case AA_DIST_NEAR_CONSTANT:
    return 1.0 + 0x1p-8 * aa_pcg64_normal(rng);
  case AA_DIST_HUGE_KEYS:
    if (c == 0 && id == 1) *row_mul = aa_pcg64_uniform(rng) < 0x1p-6 ? 64.0 : 1.0;
    return *row_mul * aa_pcg64_normal(rng);
  case AA_DIST_MASSIVE:
    z = aa_pcg64_normal(rng);
    return (id <= 1 && h == 0 && c == 0) ? z + 32.0 : z;
  default:
    return aa_pcg64_normal(rng);
  }
}

int aa_layout_draw(aa_tensor_t *t, uint64_t seed, uint64_t id, size_t heads, size_t rows, size_t cols, int uniform,
                   double sigma, aa_fmt_t fmt, aa_error_t *err) {
  size_t shape[3] = {heads, rows, cols}, per;
  aa_round_opts_t ro = {fmt, AA_RND_NE, 1, 0};
  if (uniform < 0 || uniform >= AA_DIST_COUNT)
    return aa_error_set(err, AA_EINVAL, "unknown distribution %d", uniform);
  if (aa_tensor_alloc(t, 3, shape, fmt) != AA_OK)
    return aa_error_set(err, AA_ENOMEM, "cannot allocate [%zu, %zu, %zu] doubles", heads, rows, cols);
  per = rows * cols;
  /* heads in parallel: each head draws from its own stream, so the values do not depend on the thread count */
#pragma omp parallel for schedule(dynamic, 1) if (heads > 1 && per >= 4096)
  for (size_t h = 0; h < heads; h++) {
    aa_pcg64_t rng;
    uint64_t tags[2] = {id, (uint64_t)h};
    double row_mul = 1.0;
    aa_rng_derive(&rng, seed, tags, 2);
    for (size_t i = 0; i < per; i++)
      t->data[h * per + i] = aa_round(sigma * draw_elem(&rng, uniform, id, h, i % cols, &row_mul), &ro, NULL);
  }
  return AA_OK;
}
