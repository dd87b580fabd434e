/* attnacc: the rows an eval callback fills for one cell, value formatting and the journal record of a cell. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The shortest of %.1g..%.17g that strtod reads back to the same double:
   exact, and the same text on every run (results.canon.csv relies on it). */
void aa__fmt_double(char out[40], double v) {
  if (isnan(v)) {
    strcpy(out, "nan");
    return;
  }
  if (isinf(v)) {
    strcpy(out, v > 0 ? "inf" : "-inf");
    return;
  }
  for (int p = 1; p <= 17; p++) {
    snprintf(out, 40, "%.*g", p, v);
    if (strtod(out, NULL) == v) return;
  }
}

void aa__rows_init(aa_sweep_rows_t *rows, const aa_sweep_t *sw) {
  *rows = (aa_sweep_rows_t){.sw = sw};
}

static void clear_rows(aa_sweep_rows_t *rows) {
  size_t nc = rows->sw->ncols, na = rows->sw->naxes;
  for (size_t r = 0; r < rows->nrows; r++)
    for (size_t c = na; c < nc; c++)
      if (rows->vals[r * nc + c].kind == AA_VAL_STR) free((char *)rows->vals[r * nc + c].s);
  rows->nrows = 0;
}

void aa__rows_reset(aa_sweep_rows_t *rows, const aa_cell_t *cell) {
  clear_rows(rows);
  rows->cell = cell;
  rows->status = AA_OK;
  rows->err.msg[0] = '\0';
}

void aa__rows_free(aa_sweep_rows_t *rows) {
  clear_rows(rows);
  free(rows->vals);
  *rows = (aa_sweep_rows_t){0};
}

aa_error_t *aa_sweep_rows_error(aa_sweep_rows_t *rows) {
  return &rows->err;
}

static int fail(aa_sweep_rows_t *rows, int st, const char *fmt, const char *arg) {
  if (rows->status == AA_OK) {
    rows->status = st;
    aa_error_set(&rows->err, st, fmt, arg);
  }
  return st;
}

int aa_sweep_row_new(aa_sweep_rows_t *rows) {
  size_t nc = rows->sw->ncols;
  if (rows->nrows == rows->cap) {
    size_t cap = rows->cap ? 2 * rows->cap : 4;
    aa_val_t *v = realloc(rows->vals, cap * nc * sizeof *v);
    if (v == NULL) return fail(rows, AA_ENOMEM, "sweep: out of memory for rows%s", "");
    rows->vals = v;
    rows->cap = cap;
  }
  aa_val_t *r = &rows->vals[rows->nrows * nc];
  for (size_t c = 0; c < nc; c++)
    r[c] = (aa_val_t){0};
  for (size_t a = 0; a < rows->sw->naxes; a++)
    r[a] = rows->cell->vals[a];
  rows->nrows++;
  return AA_OK;
}

static aa_val_t *slot(aa_sweep_rows_t *rows, const char *col, int *st) {
  const aa_sweep_t *sw = rows->sw;
  *st = AA_OK;
  if (rows->nrows == 0) {
    *st = fail(rows, AA_EINVAL, "sweep: column '%s' set before aa_sweep_row_new", col);
    return NULL;
  }
  for (size_t c = 0; c < sw->ncolsdecl; c++)
    if (strcmp(sw->colsdecl[c].name, col) == 0) {
      aa_val_t *v = &rows->vals[(rows->nrows - 1) * sw->ncols + sw->declpos[c]];
      if (v->kind == AA_VAL_STR) free((char *)v->s);
      *v = (aa_val_t){0};
      return v;
    }
  *st = fail(rows, AA_EINVAL, "sweep: '%s' is not a declared result column", col);
  return NULL;
}

int aa_sweep_set_int(aa_sweep_rows_t *rows, const char *col, int64_t x) {
  int st;
  aa_val_t *v = slot(rows, col, &st);
  if (v != NULL) *v = (aa_val_t){.kind = AA_VAL_INT, .i = x};
  return st;
}

int aa_sweep_set_double(aa_sweep_rows_t *rows, const char *col, double x) {
  int st;
  aa_val_t *v = slot(rows, col, &st);
  if (v != NULL) *v = (aa_val_t){.kind = AA_VAL_DOUBLE, .d = x};
  return st;
}

int aa_sweep_set_str(aa_sweep_rows_t *rows, const char *col, const char *x) {
  int st;
  aa_val_t *v = slot(rows, col, &st);
  if (v == NULL) return st;
  char *s = strdup(x != NULL ? x : "");
  if (s == NULL) return fail(rows, AA_ENOMEM, "sweep: out of memory for '%s'", col);
  *v = (aa_val_t){.kind = AA_VAL_STR, .s = s};
  return AA_OK;
}

/* Journal field of one value (format in sweep.h). */
static void journal_field(aa_buf_t *b, const aa_val_t *v) {
  char num[40];
  switch (v->kind) {
  case AA_VAL_INT:
    aa_buf_printf(b, "i%lld", (long long)v->i);
    break;
  case AA_VAL_DOUBLE:
    aa__fmt_double(num, v->d);
    aa_buf_printf(b, "d%s", num);
    break;
  case AA_VAL_STR:
    aa_buf_put(b, "s", 1);
    for (const char *p = v->s; *p; p++) {
      switch (*p) {
      case '\\':
        aa_buf_put(b, "\\\\", 2);
        break;
      case '\t':
        aa_buf_put(b, "\\t", 2);
        break;
      case '\n':
        aa_buf_put(b, "\\n", 2);
        break;
      case '\r':
        aa_buf_put(b, "\\r", 2);
        break;
      default:
        aa_buf_put(b, p, 1);
      }
    }
    break;
  default:
    break;
  }
}

void aa__journal_record(aa_buf_t *b, const aa_sweep_rows_t *rows) {
  size_t nc = rows->sw->ncols, start = b->len;
  for (size_t r = 0; r < rows->nrows; r++) {
    for (size_t c = 0; c < nc; c++) {
      if (c) aa_buf_put(b, "\t", 1);
      journal_field(b, &rows->vals[r * nc + c]);
    }
    aa_buf_put(b, "\n", 1);
  }
  aa_hash128_t h;
  aa_hash128_init(&h);
  if (!b->oom) aa_hash128_update(&h, b->buf + start, b->len - start);
  char hex[33];
  aa_hash128_hex(hex, &rows->cell->id);
  aa_buf_printf(b, "#done %zu %s %zu %016llx\n", rows->cell->index, hex, rows->nrows, (unsigned long long)h.lo);
}
