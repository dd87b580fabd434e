/* attnacc: score --rows K: K query rows drawn at random and one key/value head group, and the problem and folded
 * arrays cut down to each. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "cli/rows.h"

void rows_cli_free(rows_cli_t *r) {
  free(r->rows);
  free(r->lo);
  free(r->hi);
  free(r->keep);
  *r = (rows_cli_t){0};
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

int rows_cli_draw(rows_cli_t *r, size_t k, uint64_t seed, size_t n_q, aa_error_t *err) {
  aa_pcg32_t rng;
  size_t *perm;
  if (k == 0 || k >= n_q || n_q > UINT32_MAX)
    return aa_error_set(err, AA_EINVAL, "--rows %zu: need 1 <= K < %zu (the query rows)", k, n_q);
  perm = malloc(n_q * sizeof *perm);
  r->rows = malloc(k * sizeof *r->rows);
  if (perm == NULL || r->rows == NULL) {
    free(perm);
    return aa_error_set(err, AA_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n_q; i++)
    perm[i] = i;
  aa_pcg32_seed(&rng, seed, 0x726f7773u); /* "rows" */
  for (size_t i = 0; i < k; i++) {        /* the first k of a Fisher-Yates shuffle: a uniform k-subset */
    size_t j = i + aa_pcg32_bounded(&rng, (uint32_t)(n_q - i)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  memcpy(r->rows, perm, k * sizeof *r->rows);
  free(perm);
  qsort(r->rows, k, sizeof *r->rows, cmp_size);
  r->k = k;
  r->seed = seed;
  r->n_q = n_q;
  return AA_OK;
}

/* The keep mask's rows [heads][k][n_k]. */
static int cut_keep(rows_cli_t *r, const aa_problem_t *pb) {
  size_t nk = pb->n_k;
  r->keep = malloc(pb->heads * r->k * nk);
  if (r->keep == NULL) return AA_ENOMEM;
  for (size_t h = 0; h < pb->heads; h++)
    for (size_t i = 0; i < r->k; i++)
      memcpy(r->keep + (h * r->k + i) * nk, pb->keep + (h * r->n_q + r->rows[i]) * nk, nk);
  return AA_OK;
}

int rows_cli_problem(rows_cli_t *r, aa_problem_t *pb, aa_error_t *err) {
  if (pb->alibi != AA_ALIBI_NONE || pb->varlen_batch > 0 || pb->bound_min != NULL)
    return aa_error_set(err, AA_EINVAL, "--rows: not available with %s (%s)",
                        pb->alibi != AA_ALIBI_NONE ? "ALiBi"
                        : pb->varlen_batch         ? "--cu-seqlens"
                                                   : "packing bounds",
                        pb->alibi != AA_ALIBI_NONE ? "its bias depends on the row index" : "score every row");
  if (pb->mask != NULL || pb->bias != NULL) /* problem.h: a mask does not combine with packing bounds */
    return aa_error_set(err, AA_EINVAL,
                        "--rows: not available with --mask (the drawn rows are packing bounds, which an attention "
                        "mask does not combine with); score every row");
  r->lo = malloc(r->k * sizeof *r->lo);
  r->hi = malloc(r->k * sizeof *r->hi);
  if (r->lo == NULL || r->hi == NULL || (pb->keep != NULL && cut_keep(r, pb) != AA_OK))
    return aa_error_set(err, AA_ENOMEM, "out of memory");
  for (size_t i = 0; i < r->k; i++) {
    size_t lo, hi;
    aa_problem_row_keys(pb, r->rows[i], &lo, &hi);
    r->lo[i] = (int32_t)lo;
    r->hi[i] = (int32_t)hi;
  }
  /* the bounds carry every mask: causal, windows and alignment are then off */
  pb->n_q = r->k;
  pb->causal = 0;
  pb->window = 0;
  pb->local = 0;
  pb->align = AA_ALIGN_TOP_LEFT;
  pb->bound_min = r->lo;
  pb->bound_max = r->hi;
  if (pb->keep != NULL) pb->keep = r->keep;
  return AA_OK;
}

int rows_cli_cut(const rows_cli_t *r, aa_tensor_t *t, aa_error_t *err) {
  size_t heads = t->shape[0], inner = 1, shp[3];
  aa_tensor_t out;
  if (t->data == NULL) return AA_OK;
  if (t->ndim < 2 || t->shape[1] != r->n_q)
    return aa_error_set(err, AA_ESHAPE, "--rows: an array has no axis of the %zu query rows", r->n_q);
  for (int a = 2; a < t->ndim; a++)
    inner *= t->shape[a];
  memcpy(shp, t->shape, (size_t)t->ndim * sizeof *shp);
  shp[1] = r->k;
  if (aa_tensor_alloc(&out, t->ndim, shp, t->fmt) != AA_OK) return aa_error_set(err, AA_ENOMEM, "out of memory");
  for (size_t h = 0; h < heads; h++)
    for (size_t i = 0; i < r->k; i++)
      memcpy(out.data + (h * r->k + i) * inner, t->data + (h * r->n_q + r->rows[i]) * inner, inner * sizeof *t->data);
  aa_tensor_free(t);
  *t = out;
  return AA_OK;
}

void rows_cli_group_free(rows_cli_group_t *g) {
  free(g->keep);
  free(g->sinks);
  *g = (rows_cli_group_t){0};
}

int rows_cli_group_draw(rows_cli_group_t *g, uint64_t seed, size_t heads, size_t kv_heads, aa_error_t *err) {
  aa_pcg32_t rng;
  if (kv_heads == 0 || heads % kv_heads != 0 || kv_heads > UINT32_MAX)
    return aa_error_set(err, AA_EINVAL, "--rows: %zu query heads do not split into groups of %zu kv heads", heads,
                        kv_heads);
  aa_pcg32_seed(&rng, seed, 0x6b76u); /* "kv": a stream of its own, so the rows drawn do not move the group */
  g->index = aa_pcg32_bounded(&rng, (uint32_t)kv_heads);
  g->kv_heads = kv_heads;
  g->group = heads / kv_heads;
  return AA_OK;
}

int rows_cli_group_problem(rows_cli_group_t *g, aa_problem_t *pb, aa_error_t *err) {
  size_t nkeep = g->group * pb->n_q * pb->n_k, first = g->index * g->group;
  /* the per-head arrays sliced here are keep and sinks; ALiBi slopes and masks are refused with the rows */
  if (pb->alibi != AA_ALIBI_NONE || pb->varlen_batch > 0 || pb->bound_min != NULL || pb->mask != NULL ||
      pb->bias != NULL)
    return aa_error_set(err, AA_EINVAL,
                        "--rows: the kv head group is not cut from a problem with ALiBi, varlen, "
                        "packing bounds or a mask");
  if (pb->keep != NULL) {
    if ((g->keep = malloc(nkeep)) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
    memcpy(g->keep, pb->keep + first * pb->n_q * pb->n_k, nkeep);
    pb->keep = g->keep;
  }
  if (pb->sinks != NULL && pb->num_sinks > 0) {
    if ((g->sinks = malloc(g->group * pb->num_sinks * sizeof *g->sinks)) == NULL)
      return aa_error_set(err, AA_ENOMEM, "out of memory");
    memcpy(g->sinks, pb->sinks + first * pb->num_sinks, g->group * pb->num_sinks * sizeof *g->sinks);
    pb->sinks = g->sinks;
  }
  pb->heads = g->group;
  pb->kv_heads = 1;
  return AA_OK;
}

int rows_cli_group_slice(const rows_cli_group_t *g, aa_tensor_t *out, const aa_tensor_t *t, int kv, aa_error_t *err) {
  size_t heads = kv ? g->kv_heads : g->kv_heads * g->group, count = kv ? 1 : g->group, inner = 1, shp[3];
  *out = (aa_tensor_t){0};
  if (t->data == NULL) return AA_OK;
  if (t->ndim < 1 || t->shape[0] != heads)
    return aa_error_set(err, AA_ESHAPE, "--rows: an array has %zu heads, not the %zu %s heads",
                        t->ndim ? t->shape[0] : 0, heads, kv ? "kv" : "query");
  for (int a = 1; a < t->ndim; a++)
    inner *= t->shape[a];
  memcpy(shp, t->shape, (size_t)t->ndim * sizeof *shp);
  shp[0] = count;
  if (aa_tensor_alloc(out, t->ndim, shp, t->fmt) != AA_OK) return aa_error_set(err, AA_ENOMEM, "out of memory");
  memcpy(out->data, t->data + g->index * count * inner, count * inner * sizeof *t->data);
  return AA_OK;
}

void rows_cli_group_lift(const rows_cli_group_t *g, aa_score_out_t *s, size_t n_k, size_t d) {
  size_t rows = g->index * n_k, elems = rows * d;
  s->worst_abs += elems;
  s->worst_rel += elems;
  if (s->m.nan + s->m.inf > 0) s->first_nonfinite += elems; /* else 0, as aa_score_compare leaves it */
  s->row_worst += rows;
  s->head_worst += g->index;
  for (int r = 0; r < AA_RULE_COUNT; r++)
    s->rule[r].worst += elems;
}
