/* attnacc: sweep grids: axes, result columns, enumeration with a filter, cell lookup and content hashes. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int aa__sweep_name_ok(const char *name) {
  size_t n = name != NULL ? strlen(name) : 0;
  if (n == 0 || n > AA_SWEEP_NAME_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return 0;
  }
  return 1;
}

int aa_sweep_new(aa_sweep_t **out, aa_error_t *err) {
  *out = calloc(1, sizeof **out);
  if (*out == NULL) return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
  return AA_OK;
}

void aa_sweep_free(aa_sweep_t *sw) {
  if (sw == NULL) return;
  for (size_t a = 0; a < sw->naxes; a++) {
    if (sw->axes[a].kind == AA_VAL_STR)
      for (size_t i = 0; i < sw->axes[a].n; i++)
        free((char *)sw->axes[a].vals[i].s);
    free(sw->axes[a].vals);
    free(sw->axes[a].name);
  }
  for (size_t c = 0; c < sw->ncolsdecl; c++)
    free(sw->colsdecl[c].name);
  free(sw->axes);
  free(sw->colsdecl);
  free(sw->axis_names);
  free(sw->cells);
  free(sw->cellvals);
  free(sw->colnames);
  free(sw->colkind);
  free(sw->declpos);
  free(sw->header);
  free(sw);
}

static int name_taken(const aa_sweep_t *sw, const char *name) {
  for (size_t a = 0; a < sw->naxes; a++)
    if (strcmp(sw->axes[a].name, name) == 0) return 1;
  for (size_t c = 0; c < sw->ncolsdecl; c++)
    if (strcmp(sw->colsdecl[c].name, name) == 0) return 1;
  return 0;
}

static int check_new_name(aa_sweep_t *sw, const char *name, aa_error_t *err) {
  if (sw->built) return aa_error_set(err, AA_EINVAL, "sweep: '%s' declared after aa_sweep_build", name);
  if (!aa__sweep_name_ok(name))
    return aa_error_set(err, AA_EINVAL, "sweep: bad name '%s' (1..63 of A-Za-z0-9_.-)", name ? name : "(null)");
  if (name_taken(sw, name)) return aa_error_set(err, AA_EINVAL, "sweep: name '%s' declared twice", name);
  return AA_OK;
}

static int add_axis(aa_sweep_t *sw, const char *name, aa_val_kind_t kind, const void *vals, size_t n, unsigned flags,
                    aa_error_t *err) {
  int st = check_new_name(sw, name, err);
  if (st) return st;
  if (n == 0 || vals == NULL) return aa_error_set(err, AA_EINVAL, "sweep: axis '%s' has no values", name);
  aa_sweep_axis_t *axes = realloc(sw->axes, (sw->naxes + 1) * sizeof *axes);
  if (axes == NULL) return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
  sw->axes = axes;
  aa_sweep_axis_t *ax = &axes[sw->naxes];
  *ax = (aa_sweep_axis_t){strdup(name), kind, flags, n, calloc(n, sizeof(aa_val_t))};
  if (ax->name == NULL || ax->vals == NULL) goto oom;
  for (size_t i = 0; i < n; i++) {
    ax->vals[i].kind = kind;
    if (kind == AA_VAL_INT)
      ax->vals[i].i = ((const int64_t *)vals)[i];
    else if (kind == AA_VAL_DOUBLE)
      ax->vals[i].d = ((const double *)vals)[i];
    else {
      const char *s = ((const char *const *)vals)[i];
      if (s == NULL) s = "";
      if ((ax->vals[i].s = strdup(s)) == NULL) goto oom;
    }
  }
  /* Repeated values would make two cells with one id and one seed. */
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < i; j++) {
      const aa_val_t *a = &ax->vals[i], *b = &ax->vals[j];
      int same = kind == AA_VAL_INT      ? a->i == b->i
                 : kind == AA_VAL_DOUBLE ? memcmp(&a->d, &b->d, sizeof a->d) == 0
                                         : strcmp(a->s, b->s) == 0;
      if (same) {
        if (kind == AA_VAL_STR)
          for (size_t k = 0; k < n; k++)
            free((char *)ax->vals[k].s);
        free(ax->vals);
        free(ax->name);
        return aa_error_set(err, AA_EINVAL, "sweep: axis '%s' repeats value %zu as value %zu", name, j, i);
      }
    }
  sw->naxes++;
  return AA_OK;
oom:
  if (ax->vals != NULL && kind == AA_VAL_STR)
    for (size_t i = 0; i < n; i++)
      free((char *)ax->vals[i].s);
  free(ax->vals);
  free(ax->name);
  return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
}

int aa_sweep_axis_int(aa_sweep_t *sw, const char *name, const int64_t *vals, size_t n, unsigned flags,
                      aa_error_t *err) {
  return add_axis(sw, name, AA_VAL_INT, vals, n, flags, err);
}
int aa_sweep_axis_double(aa_sweep_t *sw, const char *name, const double *vals, size_t n, unsigned flags,
                         aa_error_t *err) {
  return add_axis(sw, name, AA_VAL_DOUBLE, vals, n, flags, err);
}
int aa_sweep_axis_str(aa_sweep_t *sw, const char *name, const char *const *vals, size_t n, unsigned flags,
                      aa_error_t *err) {
  return add_axis(sw, name, AA_VAL_STR, vals, n, flags, err);
}

int aa_sweep_column(aa_sweep_t *sw, const char *name, unsigned flags, aa_error_t *err) {
  int st = check_new_name(sw, name, err);
  if (st) return st;
  aa_sweep_col_t *c = realloc(sw->colsdecl, (sw->ncolsdecl + 1) * sizeof *c);
  if (c == NULL) return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
  sw->colsdecl = c;
  if ((c[sw->ncolsdecl].name = strdup(name)) == NULL) return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
  c[sw->ncolsdecl].flags = flags;
  sw->ncolsdecl++;
  return AA_OK;
}

/* Serialise one coordinate for the content hashes (documented in sweep.h). */
static void hash_coord(aa_hash128_t *h, const char *name, const aa_val_t *v) {
  unsigned char b[9];
  aa_hash128_update(h, name, strlen(name) + 1);
  if (v->kind == AA_VAL_STR) {
    b[0] = 's';
    aa_hash128_update(h, b, 1);
    aa_hash128_update(h, v->s, strlen(v->s) + 1);
    return;
  }
  uint64_t u;
  if (v->kind == AA_VAL_INT) {
    b[0] = 'i';
    u = (uint64_t)v->i;
  } else {
    b[0] = 'd';
    memcpy(&u, &v->d, 8);
  }
  for (int i = 0; i < 8; i++)
    b[1 + i] = (unsigned char)(u >> (8 * i));
  aa_hash128_update(h, b, 9);
}

/* Hash the coordinates in name order; skip NOSEED axes when seed_only. */
static aa_hash128_t cell_hash(const aa_sweep_axis_t *axes, size_t naxes, const aa_val_t *vals, int seed_only) {
  aa_hash128_t h;
  aa_hash128_init(&h);
  const char *last = NULL;
  /* Selection by repeated minimum: axes are few, and this keeps the cell
     structure free of a per-cell sorted copy. */
  for (size_t k = 0; k < naxes; k++) {
    size_t best = naxes;
    for (size_t a = 0; a < naxes; a++) {
      if (last != NULL && strcmp(axes[a].name, last) <= 0) continue;
      if (best == naxes || strcmp(axes[a].name, axes[best].name) < 0) best = a;
    }
    if (best == naxes) break;
    last = axes[best].name;
    if (seed_only && (axes[best].flags & AA_AXIS_NOSEED)) continue;
    hash_coord(&h, axes[best].name, &vals[best]);
  }
  return h;
}

uint64_t aa_cell_seed(const aa_cell_t *cell) {
  return cell->seed;
}

static int build_layout(aa_sweep_t *sw, aa_error_t *err) {
  sw->ncols = sw->naxes + sw->ncolsdecl;
  sw->colnames = calloc(sw->ncols + 1, sizeof *sw->colnames);
  sw->colkind = calloc(sw->ncols + 1, 1);
  sw->declpos = calloc(sw->ncolsdecl + 1, sizeof *sw->declpos);
  if (sw->colnames == NULL || sw->colkind == NULL || sw->declpos == NULL)
    return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
  size_t k = 0;
  for (size_t a = 0; a < sw->naxes; a++) {
    sw->colnames[k] = sw->axes[a].name;
    sw->colkind[k++] = 'c';
  }
  for (int pass = 0; pass < 2; pass++)
    for (size_t c = 0; c < sw->ncolsdecl; c++) {
      int timing = (sw->colsdecl[c].flags & AA_COL_TIMING) != 0;
      if (timing != pass) continue;
      sw->declpos[c] = k;
      sw->colnames[k] = sw->colsdecl[c].name;
      sw->colkind[k++] = timing ? 't' : 'm';
    }
  return AA_OK;
}

int aa_sweep_build(aa_sweep_t *sw, aa_sweep_filter_fn filter, void *ctx, aa_error_t *err) {
  if (sw->built) return aa_error_set(err, AA_EINVAL, "sweep: built twice");
  if (sw->naxes == 0) return aa_error_set(err, AA_EINVAL, "sweep: no axes");
  size_t total = 1;
  for (size_t a = 0; a < sw->naxes; a++)
    if (aa_size_mul(&total, total, sw->axes[a].n) != AA_OK || total > SIZE_MAX / (sw->naxes * sizeof(aa_val_t)))
      return aa_error_set(err, AA_ENOMEM, "sweep: grid too large");
  int st = build_layout(sw, err);
  if (st) return st;
  const char **nb = calloc(sw->naxes + 1, sizeof *nb);
  aa_val_t *vals = calloc(total * sw->naxes, sizeof *vals);
  aa_cell_t *cells = calloc(total, sizeof *cells);
  size_t *digit = calloc(sw->naxes, sizeof *digit);
  if (nb == NULL || vals == NULL || cells == NULL || digit == NULL) {
    free(nb);
    free(vals);
    free(cells);
    free(digit);
    return aa_error_set(err, AA_ENOMEM, "sweep: out of memory for %zu cells", total);
  }
  for (size_t a = 0; a < sw->naxes; a++)
    nb[a] = sw->axes[a].name;
  sw->axis_names = nb;
  const char *const *names = nb;
  size_t kept = 0;
  for (size_t g = 0; g < total; g++) {
    aa_val_t *v = &vals[kept * sw->naxes];
    for (size_t a = 0; a < sw->naxes; a++)
      v[a] = sw->axes[a].vals[digit[a]];
    aa_cell_t *c = &cells[kept];
    aa_hash128_t sh = cell_hash(sw->axes, sw->naxes, v, 1);
    *c = (aa_cell_t){kept, g, cell_hash(sw->axes, sw->naxes, v, 0), sh.hi ^ sh.lo, sw->naxes, names, v};
    if (filter == NULL || filter(c, ctx)) kept++;
    /* Odometer: the last axis varies fastest. */
    for (size_t a = sw->naxes; a-- > 0;) {
      if (++digit[a] < sw->axes[a].n) break;
      digit[a] = 0;
    }
  }
  free(digit);
  sw->cells = cells;
  sw->cellvals = vals;
  sw->ncells = kept;
  /* Grid hash and journal header. */
  aa_buf_t hb = {0};
  aa_buf_puts(&hb, "cols=");
  for (size_t k = 0; k < sw->ncols; k++)
    aa_buf_printf(&hb, "%s%s:%c", k ? "," : "", sw->colnames[k], sw->colkind[k]);
  aa_hash128_t gh;
  aa_hash128_init(&gh);
  if (hb.buf != NULL) aa_hash128_update(&gh, hb.buf, hb.len);
  for (size_t i = 0; i < kept; i++) {
    unsigned char b[16];
    for (int j = 0; j < 8; j++) {
      b[j] = (unsigned char)(cells[i].id.hi >> (8 * j));
      b[8 + j] = (unsigned char)(cells[i].id.lo >> (8 * j));
    }
    aa_hash128_update(&gh, b, 16);
  }
  sw->grid = gh;
  char hex[33];
  aa_hash128_hex(hex, &gh);
  aa_buf_t line = {0};
  aa_buf_printf(&line, "#aasweep 1 grid=%s cells=%zu %s\n", hex, kept, hb.buf != NULL ? hb.buf : "");
  aa_buf_free(&hb);
  if (line.oom) {
    aa_buf_free(&line);
    return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
  }
  sw->header = line.buf;
  sw->built = 1;
  return AA_OK;
}

size_t aa_sweep_ncells(const aa_sweep_t *sw) {
  return sw->built ? sw->ncells : 0;
}

const aa_cell_t *aa_sweep_cell(const aa_sweep_t *sw, size_t index) {
  return sw->built && index < sw->ncells ? &sw->cells[index] : NULL;
}

aa_hash128_t aa_sweep_grid_hash(const aa_sweep_t *sw) {
  return sw->grid;
}

int aa_cell_find(const aa_cell_t *cell, const char *name) {
  for (size_t a = 0; a < cell->ncoords; a++)
    if (strcmp(cell->names[a], name) == 0) return (int)a;
  return -1;
}

int64_t aa_cell_int(const aa_cell_t *cell, const char *name, int64_t dflt) {
  int a = aa_cell_find(cell, name);
  return a >= 0 && cell->vals[a].kind == AA_VAL_INT ? cell->vals[a].i : dflt;
}

double aa_cell_double(const aa_cell_t *cell, const char *name, double dflt) {
  int a = aa_cell_find(cell, name);
  if (a < 0) return dflt;
  if (cell->vals[a].kind == AA_VAL_DOUBLE) return cell->vals[a].d;
  if (cell->vals[a].kind == AA_VAL_INT) return (double)cell->vals[a].i;
  return dflt;
}

const char *aa_cell_str(const aa_cell_t *cell, const char *name, const char *dflt) {
  int a = aa_cell_find(cell, name);
  return a >= 0 && cell->vals[a].kind == AA_VAL_STR ? cell->vals[a].s : dflt;
}
