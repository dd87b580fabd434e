/* attnacc: the growable byte and text buffer (aa_buf_t). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Room for n more bytes and the NUL; 0 (and oom set) when impossible. */
static int reserve(aa_buf_t *b, size_t n) {
  if (b->oom) return 0;
  if (n > SIZE_MAX - 1 - b->len) {
    b->oom = 1;
    return 0;
  }
  if (b->len + n + 1 <= b->cap && b->buf != NULL) return 1;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n + 1)
    cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : 2 * cap;
  char *p = realloc(b->buf, cap);
  if (p == NULL) {
    b->oom = 1;
    return 0;
  }
  b->buf = p;
  b->cap = cap;
  return 1;
}

void aa_buf_put(aa_buf_t *b, const void *data, size_t n) {
  if (!reserve(b, n)) return;
  if (n > 0) memcpy(b->buf + b->len, data, n);
  b->len += n;
  b->buf[b->len] = '\0';
}

void aa_buf_puts(aa_buf_t *b, const char *s) {
  aa_buf_put(b, s, strlen(s));
}

void aa_buf_printf(aa_buf_t *b, const char *fmt, ...) {
  va_list ap;
  if (b->oom) return;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = 1;
    return;
  }
  if (!reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

const char *aa_buf_str(const aa_buf_t *b) {
  return b->buf != NULL ? b->buf : "";
}

void aa_buf_free(aa_buf_t *b) {
  free(b->buf);
  *b = (aa_buf_t){0};
}
