/* attnacc: JSON values built with libjansson (lib/common/json.h). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms, no
   surrogates, at most U+10FFFF), or 0 when the byte at s starts none. */
static size_t utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  size_t n, i;
  unsigned cp, min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, cp = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, cp = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

json_t *aa_json_str(const char *s) {
  static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD REPLACEMENT CHARACTER */
  size_t len, bad = 0, i, o;
  char *t;
  json_t *j;
  if (s == NULL) return json_null();
  len = strlen(s);
  for (i = 0; i < len;) {
    size_t n = utf8_len((const unsigned char *)s + i);
    if (n == 0) bad++, n = 1;
    i += n;
  }
  if (bad == 0) return json_stringn(s, len);
  if ((t = malloc(len + 2 * bad + 1)) == NULL) return NULL;
  for (i = o = 0; i < len;) {
    size_t n = utf8_len((const unsigned char *)s + i);
    if (n == 0) {
      memcpy(t + o, repl, 3);
      o += 3, i++;
    } else {
      memcpy(t + o, s + i, n);
      o += n, i += n;
    }
  }
  j = json_stringn(t, o);
  free(t);
  return j;
}

json_t *aa_json_num(double x) {
  if (!isfinite(x)) return json_null();
  if (x == floor(x) && fabs(x) <= 0x1p53 && !(x == 0 && signbit(x))) return json_integer((json_int_t)x);
  return json_real(x);
}

json_t *aa_json_u64(uint64_t x) {
  char buf[24];
  if (x <= (uint64_t)INT64_MAX) return json_integer((json_int_t)x);
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)x);
  return json_string(buf);
}

json_t *aa_json_bool(int b) {
  return json_boolean(b);
}

int aa_json_set(json_t *obj, const char *key, json_t *v) {
  if (obj == NULL || v == NULL) {
    json_decref(v);
    return -1;
  }
  return json_object_set_new(obj, key, v);
}

int aa_json_push(json_t *arr, json_t *v) {
  if (arr == NULL || v == NULL) {
    json_decref(v);
    return -1;
  }
  return json_array_append_new(arr, v);
}

char *aa_json_text(const json_t *doc, int compact, size_t *len) {
  size_t flags = JSON_REAL_PRECISION(17) | (compact ? JSON_COMPACT : JSON_INDENT(2));
  char *s = doc != NULL ? json_dumps(doc, flags) : NULL, *t;
  size_t n;
  if (s == NULL) return NULL;
  n = strlen(s);
  if ((t = realloc(s, n + 2)) == NULL) {
    free(s);
    return NULL;
  }
  t[n] = '\n';
  t[n + 1] = '\0';
  if (len != NULL) *len = n + 1;
  return t;
}
