/* attnacc: small helpers shared by the test programs (seed, iteration multiplier, failure printing, file reading). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_TESTS_H
#define AA_TESTS_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit code the automake harness reads as "skipped". */
#define AA_TEST_SKIP 77

/* Seed: fixed by default, overridable by ATTNACC_SEED; always printed so a
   failure can be reproduced ("include this in bug reports"). */
static inline uint64_t aa_test_seed(const char *prog) {
  const char *s = getenv("ATTNACC_SEED");
  uint64_t seed = s != NULL ? strtoull(s, NULL, 0) : UINT64_C(20261130);
  printf("%s: seed %" PRIu64 " (set ATTNACC_SEED to change; include it in bug reports)\n", prog, seed);
  return seed;
}

/* Iteration multiplier from ATTNACC_TEST_MULTIPLIER (default 1). */
static inline double aa_test_multiplier(void) {
  const char *s = getenv("ATTNACC_TEST_MULTIPLIER");
  double m = s != NULL ? atof(s) : 1.0;
  return m > 0 ? m : 1.0;
}

/* Expensive tests run only when ATTNACC_CHECK_EXPENSIVE is set. */
static inline int aa_test_expensive(void) {
  const char *s = getenv("ATTNACC_CHECK_EXPENSIVE");
  return s != NULL && *s != '\0' && strcmp(s, "0") != 0;
}

static int aa_test_failures = 0;

/* FAIL <what>: <property>, then the caller prints inputs in %a and bits. */
#define AA_FAIL(...)                                                                                                 \
  do {                                                                                                               \
    printf("FAIL ");                                                                                                 \
    printf(__VA_ARGS__);                                                                                             \
    printf("\n");                                                                                                    \
    aa_test_failures++;                                                                                              \
  } while (0)

#define AA_CHECK(cond, ...)                                                                                          \
  do {                                                                                                               \
    if (!(cond)) AA_FAIL(__VA_ARGS__);                                                                               \
  } while (0)

/* Whole file as a NUL-terminated string (malloc'd), or NULL when unreadable. */
static inline char *aa_test_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 1 << 16, len = 0, n;
  char *p = malloc(cap);
  while (p != NULL && (n = fread(p + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 2) {
      char *q = realloc(p, cap *= 2);
      if (q == NULL) free(p);
      p = q;
    }
  }
  fclose(f);
  if (p != NULL) p[len] = '\0';
  return p;
}

/* tests/data/NAME under $top_srcdir (the build tree's . without it), opened for reading; NULL, with a failure
   counted, when it cannot be. */
static inline FILE *aa_test_open_data(const char *name) {
  const char *top = getenv("top_srcdir");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/%s", top != NULL ? top : ".", name);
  FILE *f = fopen(path, "r");
  AA_CHECK(f != NULL, "%s: cannot open", path);
  return f;
}

/* Bitwise equality of doubles, any NaN equal to any NaN (signed zeros differ). */
static inline int aa_test_same(double a, double b) {
  uint64_t u, v;
  memcpy(&u, &a, sizeof u);
  memcpy(&v, &b, sizeof v);
  return (a != a && b != b) || u == v;
}

static inline int aa_test_finish(const char *prog) {
  if (aa_test_failures) {
    printf("%s: %d failure(s)\n", prog, aa_test_failures);
    return 1;
  }
  printf("%s: ok\n", prog);
  return 0;
}

#endif
