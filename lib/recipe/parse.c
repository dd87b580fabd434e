/* attnacc: the recipe-file parser (`key = value` lines, '#' comments, optional first `base = PRESET`). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "recipe-impl.h"

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
  return s;
}

/* The keys seen so far with the line of each: a key given twice is an error
   naming both lines (the second would silently override the first). The
   list grows with the file; a recipe has about a hundred keys at most. */
#define SEEN_KEY 320 /* "when COND: key" for a conditional key */

typedef struct {
  char (*key)[SEEN_KEY];
  int *line;
  size_t n, cap;
} seen_t;

/* 0 when key is new (and now recorded), the line of its first occurrence
   when repeated, -1 when out of memory. key is already normalised
   (seen_name). */
static int seen_add(seen_t *s, const char *key, int lineno) {
  char k[SEEN_KEY];
  snprintf(k, sizeof k, "%s", key);
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->key[i], k)) return s->line[i];
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    char(*nk)[SEEN_KEY] = realloc(s->key, cap * sizeof *nk);
    if (nk == NULL) return -1;
    s->key = nk;
    int *nl = realloc(s->line, cap * sizeof *nl);
    if (nl == NULL) return -1;
    s->line = nl;
    s->cap = cap;
  }
  memcpy(s->key[s->n], k, sizeof k);
  s->line[s->n++] = lineno;
  return 0;
}

/* The name a key is recorded under: `dq_reduce` and `dq_reduce_kind` name
   one setting; a conditional key is recorded with its canonical condition,
   so the same key may appear once per condition. */
static void seen_name(char *buf, size_t len, const aa_recipe_when_t *w, const char *key) {
  const char *k = !strcmp(key, "dq_reduce") ? "dq_reduce_kind" : key;
  if (w == NULL) {
    snprintf(buf, len, "%s", k);
    return;
  }
  char cond[256];
  aa_recipe_when_cond_text(cond, sizeof cond, w);
  snprintf(buf, len, "when %s: %s", cond, k);
}

static int parse_lines(aa_recipe_t *out, const char *text, const char *path, seen_t *seen, aa_error_t *err);

int aa_recipe_parse_string(aa_recipe_t *out, const char *text, const char *path, aa_error_t *err) {
  if (out == NULL || text == NULL) return aa_error_set(err, AA_EINVAL, "recipe_parse: NULL argument");
  if (path == NULL) path = "<string>";
  seen_t seen = {0};
  int st = parse_lines(out, text, path, &seen, err);
  free(seen.key);
  free(seen.line);
  return st;
}

/* Record `when COND: key = value` in r after checking the key and value on
   a copy of r as it stands (so a bad one is an error at its own line). */
static int add_when(aa_recipe_t *r, aa_recipe_when_t *w, const char *key, const char *val, const char *path,
                    int lineno, aa_error_t *err) {
  if (!strcmp(key, "base") || !strcmp(key, "name") || !strcmp(key, "when"))
    return aa_error_set(err, AA_EFORMAT, "%s:%d: key '%s' cannot be conditional", path, lineno, key);
  if (strlen(key) >= sizeof w->key || strlen(val) >= sizeof w->value)
    return aa_error_set(err, AA_EFORMAT, "%s:%d: conditional key '%s': key or value too long", path, lineno, key);
  aa_recipe_t *tmp = malloc(sizeof *tmp);
  if (tmp == NULL) return aa_error_set(err, AA_ENOMEM, "%s:%d: out of memory", path, lineno);
  *tmp = *r;
  aa_error_t e;
  e.msg[0] = '\0';
  int st = aa_recipe_set(tmp, key, val, &e);
  free(tmp);
  if (st != AA_OK) return aa_error_set(err, st, "%s:%d: %s", path, lineno, e.msg);
  snprintf(w->key, sizeof w->key, "%s", key);
  snprintf(w->value, sizeof w->value, "%s", val);
  /* The same key under the same condition as an inherited line (base =
     PRESET) replaces that line in place, so the recipe holds each
     (condition, key) once and its formatted text parses again. */
  char mine[SEEN_KEY], other[SEEN_KEY];
  seen_name(mine, sizeof mine, w, key);
  for (size_t i = 0; i < r->nwhen; i++) {
    seen_name(other, sizeof other, &r->when[i], r->when[i].key);
    if (!strcmp(mine, other)) {
      r->when[i] = *w;
      return AA_OK;
    }
  }
  if (r->nwhen == AA_RECIPE_WHEN_MAX)
    return aa_error_set(err, AA_EFORMAT, "%s:%d: more than %d conditional keys", path, lineno, AA_RECIPE_WHEN_MAX);
  r->when[r->nwhen++] = *w;
  return AA_OK;
}

static int parse_lines(aa_recipe_t *out, const char *text, const char *path, seen_t *seen, aa_error_t *err) {
  aa_recipe_t r;
  /* Without `base`, a file starts from the table's defaults: fa2's values,
     named "custom" (tests/trecipe checks that the two agree). */
  aa_recipe_defaults(&r);
  int lineno = 0, nkeys = 0;
  const char *p = text;
  char line[1024];
  while (*p != '\0') {
    const char *eol = strchr(p, '\n');
    size_t n = eol != NULL ? (size_t)(eol - p) : strlen(p);
    lineno++;
    if (n >= sizeof line)
      return aa_error_set(err, AA_EFORMAT, "%s:%d: line longer than %zu characters", path, lineno, sizeof line - 1);
    memcpy(line, p, n);
    line[n] = '\0';
    p += n + (eol != NULL);
    char *hash = strchr(line, '#');
    if (hash != NULL) *hash = '\0';
    char *s = trim(line);
    if (*s == '\0') continue;
    aa_recipe_when_t when, *w = NULL;
    if (!strncmp(s, "when", 4) && isspace((unsigned char)s[4])) {
      char *colon = strchr(s, ':');
      if (colon == NULL)
        return aa_error_set(err, AA_EFORMAT, "%s:%d: conditional key without ':' (when COND: key = value)", path,
                            lineno);
      *colon = '\0';
      aa_error_t e;
      e.msg[0] = '\0';
      if (aa_recipe_when_parse(&when, s + 4, &e) != AA_OK)
        return aa_error_set(err, AA_EFORMAT, "%s:%d: %s", path, lineno, e.msg);
      w = &when;
      s = trim(colon + 1);
    }
    char *eq = strchr(s, '=');
    if (eq == NULL) return aa_error_set(err, AA_EFORMAT, "%s:%d: missing '=' in '%s'", path, lineno, s);
    *eq = '\0';
    char *key = trim(s), *val = trim(eq + 1);
    if (*key == '\0') return aa_error_set(err, AA_EFORMAT, "%s:%d: empty key", path, lineno);
    if (*val == '\0') return aa_error_set(err, AA_EFORMAT, "%s:%d: key '%s' has no value", path, lineno, key);
    if (!strcmp(key, "base") && nkeys != 0)
      return aa_error_set(err, AA_EFORMAT, "%s:%d: 'base' must be the first key", path, lineno);
    if (w != NULL) {
      int st = add_when(&r, w, key, val, path, lineno, err);
      if (st != AA_OK) return st;
    }
    if (strlen(key) < 64) { /* a longer key is unknown: aa_recipe_set says so */
      char name[SEEN_KEY];
      seen_name(name, sizeof name, w, key);
      int first = seen_add(seen, name, lineno);
      if (first < 0) return aa_error_set(err, AA_ENOMEM, "%s:%d: out of memory", path, lineno);
      if (first > 0)
        return aa_error_set(err, AA_EFORMAT, "%s:%d: key '%s' given twice (first at %s:%d)", path, lineno, key, path,
                            first);
    }
    nkeys++;
    if (w != NULL) continue; /* recorded by add_when */
    aa_error_t e;
    e.msg[0] = '\0';
    int st = aa_recipe_set(&r, key, val, &e);
    if (st != AA_OK) return aa_error_set(err, st, "%s:%d: %s", path, lineno, e.msg);
  }
  *out = r;
  return AA_OK;
}

int aa_recipe_parse_file(aa_recipe_t *out, const char *path, aa_error_t *err) {
  if (out == NULL || path == NULL) return aa_error_set(err, AA_EINVAL, "recipe_parse_file: NULL argument");
  FILE *f = fopen(path, "rb");
  if (f == NULL) return aa_error_set(err, AA_EIO, "%s: cannot open: %s", path, strerror(errno));
  {
    /* A folder is the caller's mistake, not a read failure (glibc opens a
       folder; only the first read fails, with EISDIR). Pipes stay allowed. */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
      fclose(f);
      return aa_error_set(err, AA_EINVAL, "%s: is a folder, not a recipe file", path);
    }
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  if (buf == NULL) {
    fclose(f);
    return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  }
  for (;;) {
    if (len + 1 >= cap) {
      if (cap > ((size_t)1 << 24)) {
        free(buf);
        fclose(f);
        return aa_error_set(err, AA_EFORMAT, "%s: recipe file larger than 16 MiB", path);
      }
      char *nb = realloc(buf, cap * 2);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - 1 - len, f);
    len += got;
    if (got == 0) break;
  }
  int rd_err = ferror(f);
  fclose(f);
  if (rd_err) {
    free(buf);
    return aa_error_set(err, AA_EIO, "%s: read error", path);
  }
  buf[len] = '\0';
  if (strlen(buf) != len) {
    free(buf);
    return aa_error_set(err, AA_EFORMAT, "%s: NUL byte in recipe file", path);
  }
  int st = aa_recipe_parse_string(out, buf, path, err);
  free(buf);
  return st;
}
