/* attnacc: name-table lookup and whole-string integer parsing shared by the modules' key=value setters. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

int aa_name_index(const char *name, const char *const *names, int n) {
  for (int i = 0; name != NULL && i < n; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return -1;
}

int aa_parse_u64(uint64_t *out, const char *text) {
  char *end;
  if (*text == '-' || *text == '\0') return 0;
  errno = 0;
  unsigned long long x = strtoull(text, &end, 0);
  if (errno || *end != '\0') return 0;
  *out = (uint64_t)x;
  return 1;
}

int aa_parse_long(long *out, const char *text) {
  char *end;
  if (*text == '\0') return 0;
  errno = 0;
  long x = strtol(text, &end, 0);
  if (errno || *end != '\0') return 0;
  *out = x;
  return 1;
}
