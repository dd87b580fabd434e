/* attnacc: the CSV writer (RFC 4180 quoting) over an aa_buf_t. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

void aa_csv_init(aa_csv_t *c, aa_buf_t *out) {
  c->out = out;
  c->nfield = 0;
}

static int needs_quotes(const char *s, size_t n) {
  if (n > 0 && (s[0] == ' ' || s[n - 1] == ' ')) return 1;
  for (size_t i = 0; i < n; i++)
    if (s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r') return 1;
  return 0;
}

void aa_csv_field(aa_csv_t *c, const char *s, size_t n) {
  aa_buf_t *b = c->out;
  if (c->nfield++ > 0) aa_buf_put(b, ",", 1);
  if (!needs_quotes(s, n)) {
    aa_buf_put(b, s, n);
    return;
  }
  aa_buf_put(b, "\"", 1);
  for (const char *p = s, *end = s + n; p < end;) {
    const char *q = memchr(p, '"', (size_t)(end - p));
    size_t run = q != NULL ? (size_t)(q - p) + 1 : (size_t)(end - p);
    aa_buf_put(b, p, run); /* up to and including a quote, which is then doubled */
    if (q != NULL) aa_buf_put(b, "\"", 1);
    p += run;
  }
  aa_buf_put(b, "\"", 1);
}

void aa_csv_str(aa_csv_t *c, const char *s) {
  aa_csv_field(c, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

void aa_csv_printf(aa_csv_t *c, const char *fmt, ...) {
  char small[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    c->out->oom = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    aa_csv_field(c, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (big == NULL) {
    c->out->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  aa_csv_field(c, big, (size_t)n);
  free(big);
}

void aa_csv_end(aa_csv_t *c) {
  aa_buf_put(c->out, "\n", 1);
  c->nfield = 0;
}
