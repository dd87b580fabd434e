/* attnacc: status names, error-message filling and checked size arithmetic. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdarg.h>
#include <stdio.h>

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

int aa_error_set(aa_error_t *err, int status, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return status;
}

int aa_size_mul(size_t *out, size_t a, size_t b) {
  if (a != 0 && b > SIZE_MAX / a) return AA_ENOMEM;
  *out = a * b;
  return AA_OK;
}
