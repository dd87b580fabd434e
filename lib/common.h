/* attnacc: status codes and the error-detail buffer shared by every module. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_COMMON_H
#define AA_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every library function that can fail returns one of these (0 = success).
   The library never prints and never exits; the front end turns a status
   plus the optional aa_error_t text into a message. */
typedef enum {
  AA_OK = 0,
  AA_EINVAL = 1,       /* an argument or option value is invalid */
  AA_ENOMEM = 2,       /* allocation failed or the size is impossible */
  AA_EIO = 3,          /* a file could not be opened, read or written */
  AA_EFORMAT = 4,      /* a file is malformed or of an unsupported kind */
  AA_ESHAPE = 5,       /* tensor shapes are wrong or do not match */
  AA_ENAN = 6,         /* an input holds NaN or Inf where none is allowed */
  AA_EUNSUPPORTED = 7, /* a valid request this build or recipe cannot do */
  AA_ERANGE = 8,       /* a value is outside the range a mechanism admits */
  AA_ENOTFOUND = 9     /* a named thing (recipe, model, file) does not exist */
} aa_status_t;

/* Optional detail for a failed call: a one-line message naming the problem
   (file, line, key, shape). Functions take it as their last argument; NULL
   is always allowed. */
typedef struct {
  char msg[512];
} aa_error_t;

/* Short English name of a status ("invalid argument", ...). */
const char *aa_status_str(int status);

/* Fill err (if non-NULL) with a printf-style message and return status. */
int aa_error_set(aa_error_t *err, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Overflow-checked size product: returns 0 and sets *out, or AA_ENOMEM. */
int aa_size_mul(size_t *out, size_t a, size_t b);

/* Position of name among names[0..n-1], or -1 (name NULL: -1): the
   name <-> enum tables of the modules. */
int aa_name_index(const char *name, const char *const *names, int n);
/* The whole text as an integer (decimal, 0x hex or 0 octal, as strtoull /
   strtol with base 0): 1 and *out set, or 0 (empty, trailing text, out of
   range; aa_parse_u64 also refuses a minus sign). */
int aa_parse_u64(uint64_t *out, const char *text);
int aa_parse_long(long *out, const char *text);

#ifdef __cplusplus
}
#endif
#endif
