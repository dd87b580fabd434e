/* attnacc: status names, error messages (filled and escaped: aa_escape) and checked size arithmetic. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

const char *aa_status_str(int status) {
  switch (status) {
  case AA_OK:
    return "success";
  case AA_EINVAL:
    return "invalid argument";
  case AA_ENOMEM:
    return "out of memory or impossible size";
  case AA_EIO:
    return "input/output error";
  case AA_EFORMAT:
    return "malformed or unsupported file";
  case AA_ESHAPE:
    return "wrong or mismatched shape";
  case AA_ENAN:
    return "NaN or Inf in input";
  case AA_EUNSUPPORTED:
    return "unsupported";
  case AA_ERANGE:
    return "value out of range";
  case AA_ENOTFOUND:
    return "not found";
  default:
    return "unknown status";
  }
}

char *aa_escape(char *dst, size_t cap, const char *text) {
  static const char hex[] = "0123456789abcdef";
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
    char e[4];
    size_t n = 2;
    e[0] = '\\';
    if (*p >= ' ' && *p <= '~') {
      e[0] = (char)*p;
      n = 1;
    } else if (*p == '\n' || *p == '\r' || *p == '\t') {
      e[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
    } else {
      e[1] = 'x';
      e[2] = hex[*p >> 4];
      e[3] = hex[*p & 15];
      n = 4;
    }
    if (k + n >= cap) break;
    memcpy(dst + k, e, n);
    k += n;
  }
  dst[k] = '\0';
  return dst;
}

int aa_error_set(aa_error_t *err, int status, const char *fmt, ...) {
  if (err != NULL) {
    char raw[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    aa_escape(err->msg, sizeof err->msg, raw);
  }
  return status;
}

void aa_error_prefix(aa_error_t *err, const char *prefix) {
  size_t pl, ml, cap = sizeof err->msg;
  if (err == NULL) return;
  pl = strlen(prefix) + 2;
  if (pl >= cap) return;
  if (strncmp(err->msg, prefix, pl - 2) == 0 && strncmp(err->msg + pl - 2, ": ", 2) == 0) return;
  ml = strnlen(err->msg, cap - 1);
  if (ml > cap - 1 - pl) ml = cap - 1 - pl;
  memmove(err->msg + pl, err->msg, ml);
  memcpy(err->msg, prefix, pl - 2);
  err->msg[pl - 2] = ':';
  err->msg[pl - 1] = ' ';
  err->msg[pl + ml] = '\0';
}

int aa_size_mul(size_t *out, size_t a, size_t b) {
  if (a != 0 && b > SIZE_MAX / a) return AA_ENOMEM;
  *out = a * b;
  return AA_OK;
}
