/* attnacc: the result folder's protocol: meta.json (provenance) and the reader of results.csv. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "internal.h"
#include "version.h"

void aa_sweep_journal_path(char *buf, size_t cap, const char *dir, size_t shard, size_t nshards) {
  snprintf(buf, cap, "%s/journal-%zu-of-%zu.txt", dir, shard, nshards);
}

/* ---- meta.json ---- */

static json_t *meta_recipes(const aa_sweep_meta_t *m) {
  json_t *a = json_array();
  int bad = a == NULL;
  for (size_t i = 0; i < m->nrecipes && !bad; i++) {
    json_t *r = json_object();
    bad |= aa_json_set(r, "name", aa_json_str(m->recipes[i].name));
    bad |= aa_json_set(r, "hash", aa_json_str(m->recipes[i].hash));
    bad |= aa_json_set(r, "text", aa_json_str(m->recipes[i].text));
    bad |= aa_json_push(a, r);
  }
  return bad ? (json_decref(a), NULL) : a;
}

static json_t *meta_command(const aa_sweep_meta_t *m) {
  json_t *cmd = json_array();
  int bad = cmd == NULL;
  for (int i = 0; i < m->argc && !bad; i++)
    bad |= aa_json_push(cmd, aa_json_str(m->argv[i]));
  return bad ? (json_decref(cmd), NULL) : cmd;
}

int aa_sweep_meta_stage(aa_fileset_t *fs, const char *dir, const aa_sweep_t *sw, const aa_sweep_meta_t *meta,
                        aa_error_t *err) {
  static const aa_sweep_meta_t none = {0};
  const aa_sweep_meta_t *m = meta != NULL ? meta : &none;
  char path[4096], gh[33], *text;
  size_t len;
  aa_hash128_t g = aa_sweep_grid_hash(sw);
  json_t *j = json_object();
  int rc, bad = j == NULL;
  aa_hash128_hex(gh, &g);
  bad |= aa_json_set(j, "experiment", aa_json_str(m->experiment));
  bad |= aa_json_set(j, "quick", aa_json_bool(m->quick));
  bad |= aa_json_set(j, "version", aa_json_str(AA_VERSION));
  bad |= aa_json_set(j, "git", aa_json_str(AA_GIT_HASH));
  if (m->seeds != NULL) bad |= aa_json_set(j, "seeds", aa_json_str(m->seeds));
  bad |= aa_json_set(j, "grid_hash", aa_json_str(gh));
  bad |= aa_json_set(j, "cells", aa_json_u64(aa_sweep_ncells(sw)));
  bad |= aa_json_set(j, "command", meta_command(m));
  bad |= aa_json_set(j, "recipes", meta_recipes(m));
  text = bad ? NULL : aa_json_text(j, 0, &len);
  json_decref(j);
  if (text == NULL) return aa_error_set(err, AA_ENOMEM, "sweep: out of memory for %s", AA_SWEEP_META_JSON);
  snprintf(path, sizeof path, "%s/%s", dir, AA_SWEEP_META_JSON);
  rc = aa_fileset_add(fs, path, text, len, err);
  free(text);
  return rc;
}

int aa_sweep_meta_copy(const char *out_dir, const char *in_dir, aa_error_t *err) {
  char a[4096], b[4096], *data;
  size_t len;
  int rc;
  snprintf(a, sizeof a, "%s/%s", in_dir, AA_SWEEP_META_JSON);
  snprintf(b, sizeof b, "%s/%s", out_dir, AA_SWEEP_META_JSON);
  if (strcmp(a, b) == 0 || aa_file_read(&data, &len, a, NULL) != AA_OK) return AA_OK;
  rc = aa_file_write(b, data, len, err);
  free(data);
  return rc;
}

/* ---- results.csv ---- */

void aa_results_free(aa_results_t *c) {
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

static void row_free(aa_results_row_t *r) {
  for (size_t i = 0; i < r->nf; i++)
    free(r->f[i]);
  free(r->f);
  r->f = NULL;
  r->nf = 0;
}

/* One field starting at *p (quoted or not), malloc'd; *p moves past it. */
static char *csv_field(const char **p) {
  const char *s = *p;
  size_t cap = 0;
  int inq = 0;
  /* an upper bound of the length: to the end of the line, or further inside quotes */
  for (const char *q = s; *q && (inq || (*q != '\n' && *q != '\r')); q++, cap++)
    if (*q == '"') inq = !inq;
  char *field = malloc(cap + 1);
  size_t k = 0;
  if (field == NULL) return NULL;
  if (*s == '"')
    for (s++; *s != '\0';) {
      if (*s == '"' && s[1] == '"') {
        field[k++] = '"';
        s += 2;
      } else if (*s == '"') {
        s++;
        break;
      } else
        field[k++] = *s++;
    }
  while (*s && *s != ',' && *s != '\n' && *s != '\r')
    field[k++] = *s++;
  field[k] = '\0';
  *p = s;
  return field;
}

/* One record starting at *p: 1, 0 at the end of the text, -1 out of memory. */
static int csv_record(aa_results_row_t *out, const char **p) {
  const char *s = *p;
  size_t cap = 16;
  out->nf = 0;
  if (*s == '\0') return 0;
  if ((out->f = malloc(cap * sizeof *out->f)) == NULL) return -1;
  for (;;) {
    char *field = csv_field(&s);
    if (field == NULL) return row_free(out), -1;
    if (out->nf == cap) {
      char **g = realloc(out->f, 2 * cap * sizeof *g);
      if (g == NULL) return free(field), row_free(out), -1;
      out->f = g;
      cap *= 2;
    }
    out->f[out->nf++] = field;
    if (*s != ',') break;
    s++;
  }
  if (*s == '\r') s++;
  if (*s == '\n') s++;
  *p = s;
  return 1;
}

static int push_row(aa_results_t *c, aa_results_row_t *r) {
  if (r->nf == 1 && r->f[0][0] == '\0') return row_free(r), 0; /* a blank line */
  if (c->nrows == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 256;
    aa_results_row_t *g = realloc(c->rows, cap * sizeof *g);
    if (g == NULL) return row_free(r), -1;
    c->rows = g;
    c->cap = cap;
  }
  c->rows[c->nrows++] = *r;
  return 0;
}

int aa_results_read(aa_results_t *c, const char *path, aa_error_t *err) {
  char *text;
  size_t len;
  const char *p;
  aa_results_row_t r;
  int got, rc;
  memset(c, 0, sizeof *c);
  if ((rc = aa_file_read(&text, &len, path, err)) != AA_OK) return rc;
  for (p = text; *p == '#';) { /* comment lines before the header */
    const char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (c->comment[0] == '\0') snprintf(c->comment, sizeof c->comment, "%.*s", (int)l, p);
    p = e ? e + 1 : p + l;
  }
  if ((got = csv_record(&r, &p)) <= 0) {
    free(text);
    return got < 0 ? aa_error_set(err, AA_ENOMEM, "%s: out of memory", path)
                   : aa_error_set(err, AA_EIO, "%s: no header line", path);
  }
  c->hdr = r.f;
  c->ncol = r.nf;
  while ((got = csv_record(&r, &p)) > 0)
    if (push_row(c, &r) != 0) got = -1;
  free(text);
  if (got < 0) {
    aa_results_free(c);
    return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  }
  return AA_OK;
}

int aa_sweep_results_open(aa_results_t *c, const char *dir, aa_error_t *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, AA_SWEEP_RESULTS_CSV);
  return aa_results_read(c, path, err);
}

int aa_results_col(const aa_results_t *c, const char *name) {
  for (size_t i = 0; i < c->ncol; i++)
    if (strcmp(c->hdr[i], name) == 0) return (int)i;
  return -1;
}

const char *aa_results_cell(const aa_results_t *c, size_t r, int col) {
  if (r >= c->nrows || col < 0 || (size_t)col >= c->rows[r].nf) return "";
  return c->rows[r].f[col];
}

double aa_results_num(const char *s) {
  char *end;
  double x;
  if (s == NULL || *s == '\0') return NAN;
  x = strtod(s, &end);
  return end == s ? NAN : x;
}

double aa_results_value(const aa_results_t *c, size_t r, const char *name) {
  return aa_results_num(aa_results_cell(c, r, aa_results_col(c, name)));
}
