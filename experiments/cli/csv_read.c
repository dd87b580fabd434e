/* attnacc: a small RFC 4180 reader of result CSV files (the report and the experiments' summaries). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xp/xp.h"

char *xp_slurp(const char *path, size_t *len) {
  char *data;
  size_t n;
  if (aa_file_read(&data, &n, path, NULL) != AA_OK) return NULL;
  if (len) *len = n;
  return data;
}

void xp_csv_free(xp_csv_t *c) {
  for (size_t i = 0; i < c->ncol; i++)
    free(c->hdr[i]);
  free(c->hdr);
  for (size_t r = 0; r < c->nrows; r++) {
    for (size_t i = 0; i < c->rows[r].nf; i++)
      free(c->rows[r].f[i]);
    free(c->rows[r].f);
  }
  free(c->rows);
  memset(c, 0, sizeof *c);
}

/* Parse one record starting at *p; returns 0 at the end of the text. */
static int csv_record(xp_csv_row_t *out, const char **p) {
  const char *s = *p;
  size_t cap = 16;
  if (*s == '\0') return 0;
  out->nf = 0;
  out->f = malloc(cap * sizeof *out->f);
  for (;;) {
    /* an upper bound of the field's length: up to the end of the line, or
       further while inside quotes */
    size_t cap_f = 0;
    int inq = 0;
    for (const char *q = s; *q; q++, cap_f++) {
      if (*q == '"') inq = !inq;
      if (!inq && (*q == '\n' || *q == '\r')) break;
    }
    char *field = malloc(cap_f + 1);
    size_t k = 0;
    if (field == NULL) break;
    if (*s == '"') {
      s++;
      for (;;) {
        if (*s == '\0') break;
        if (*s == '"') {
          if (s[1] == '"') {
            field[k++] = '"';
            s += 2;
            continue;
          }
          s++;
          break;
        }
        field[k++] = *s++;
      }
    }
    while (*s && *s != ',' && *s != '\n' && *s != '\r')
      field[k++] = *s++;
    field[k] = '\0';
    if (out->nf == cap) out->f = realloc(out->f, (cap *= 2) * sizeof *out->f);
    out->f[out->nf++] = field;
    if (*s == ',') {
      s++;
      continue;
    }
    if (*s == '\r') s++;
    if (*s == '\n') s++;
    break;
  }
  *p = s;
  return 1;
}

int xp_csv_read(xp_csv_t *c, const char *path) {
  char *text = xp_slurp(path, NULL);
  const char *p;
  xp_csv_row_t r;
  memset(c, 0, sizeof *c);
  if (text == NULL) return -1;
  p = text;
  while (*p == '#') { /* comment lines (legacy table3.csv files carry their provenance there) */
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (c->comment[0] == '\0') snprintf(c->comment, sizeof c->comment, "%.*s", (int)len, p);
    p = e ? e + 1 : p + len;
  }
  if (!csv_record(&r, &p)) {
    free(text);
    return -1;
  }
  c->hdr = r.f;
  c->ncol = r.nf;
  while (csv_record(&r, &p)) {
    if (r.nf == 1 && r.f[0][0] == '\0') {
      free(r.f[0]);
      free(r.f);
      continue;
    }
    if (c->nrows == c->cap) c->rows = realloc(c->rows, (c->cap = c->cap ? 2 * c->cap : 256) * sizeof *c->rows);
    c->rows[c->nrows++] = r;
  }
  free(text);
  return 0;
}

int xp_csv_col(const xp_csv_t *c, const char *name) {
  for (size_t i = 0; i < c->ncol; i++)
    if (strcmp(c->hdr[i], name) == 0) return (int)i;
  return -1;
}

const char *xp_csv_cell(const xp_csv_t *c, size_t r, int col) {
  if (col < 0 || (size_t)col >= c->rows[r].nf) return "";
  return c->rows[r].f[col];
}

double xp_csv_num(const char *s) {
  char *end;
  double x;
  if (s == NULL || *s == '\0') return NAN;
  x = strtod(s, &end);
  return end == s ? NAN : x;
}
