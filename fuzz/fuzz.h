/* attnacc: helpers shared by the libFuzzer harnesses (the input as a file, for readers that take a path). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_FUZZ_H
#define AA_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Write the input to one file per process (under TMPDIR) and return its
   path: the .npy, .npz and .safetensors readers take paths, and a file is
   what a user gives them. Aborts when the file cannot be written, so a
   broken set-up is not mistaken for a clean run. */
static inline const char *aa_fuzz_file(const uint8_t *data, size_t size, const char *suffix) {
  static char path[4096];
  if (path[0] == '\0') {
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/attnacc-fuzz-%ld%s", dir && *dir ? dir : "/tmp", (long)getpid(), suffix);
  }
  FILE *f = fopen(path, "wb");
  if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror(path);
    abort();
  }
  return path;
}

/* A property of the code under test failed: say which, then crash so the
   fuzzer keeps the input. */
#define AA_FUZZ_CHECK(cond, what)                                                                                    \
  do {                                                                                                               \
    if (!(cond)) {                                                                                                   \
      fprintf(stderr, "fuzz: %s\n", what);                                                                           \
      abort();                                                                                                       \
    }                                                                                                                \
  } while (0)

#ifdef AA_NPY_H
#include <math.h>

#include "fmt.h"

/* The bytes an accepted array claims, numel * itemsize, with every partial
   product of its axes checked here by the compiler's builtin (a second
   computation, not the library's aa__extent): an accepted shape must fit. */
static inline size_t aa_fuzz_claimed_bytes(const aa_ndarray_t *a) {
  size_t n = 1, item = a->fmt == AA_FMT_FP64 ? 8 : a->fmt == AA_FMT_FP32 ? 4 : 2;
  AA_FUZZ_CHECK(a->ndim >= 1 && a->ndim <= AA_NDARRAY_MAX_DIM, "axis count out of range");
  for (int i = 0; i < a->ndim; i++)
    AA_FUZZ_CHECK(!__builtin_mul_overflow(n, a->shape[i], &n), "the axes of an accepted array overflow");
  AA_FUZZ_CHECK(!__builtin_mul_overflow(n, item, &n), "numel * itemsize of an accepted array overflows");
  return n;
}

/* An array a reader accepted: its axes multiply to a size the reader held,
   and every value is exact in the format it is tagged with (npy.h). */
static inline void aa_fuzz_check_array(const aa_ndarray_t *a) {
  size_t n = aa_fuzz_claimed_bytes(a) / (a->fmt == AA_FMT_FP64 ? 8 : a->fmt == AA_FMT_FP32 ? 4 : 2);
  AA_FUZZ_CHECK(a->data != NULL, "an accepted array without data");
  for (size_t i = 0; i < n; i++) { /* touching each value: ASan checks the buffer holds n of them */
    double v = a->data[i], back = aa_fmt_decode(aa_fmt_encode(v, a->fmt), a->fmt);
    AA_FUZZ_CHECK(back == v || (isnan(v) && isnan(back)), "a value read is not exact in its format");
  }
}

/* The bytes of "q" in the input, by the harness's own reading of the
   format; exact 0: only an upper bound (an .npz member inflates to at most
   what deflate's ratio allows). */
typedef uint64_t (*aa_fuzz_span_fn)(const uint8_t *data, size_t size, int *exact);

/* A harness of a reader that takes a path and an array name: the input as
   a file, the array "q" read with and without '<i2' as BF16 bits, and
   what it accepts holds exactly (or at most) the bytes span finds. */
typedef int (*aa_fuzz_reader_fn)(aa_ndarray_t *out, const char *path, const char *name, unsigned flags,
                                 aa_error_t *err);
static inline void aa_fuzz_named_reader(const uint8_t *data, size_t size, const char *suffix, aa_fuzz_reader_fn read,
                                        aa_fuzz_span_fn span) {
  const char *path = aa_fuzz_file(data, size, suffix);
  for (unsigned flags = 0; flags <= AA_NPY_BF16_BITS; flags += AA_NPY_BF16_BITS) {
    aa_ndarray_t a;
    memset(&a, 0, sizeof a);
    aa_error_t err;
    err.msg[0] = '\0';
    if (read(&a, path, "q", flags, &err) == AA_OK) {
      int exact = 1;
      uint64_t have = span(data, size, &exact);
      aa_fuzz_check_array(&a);
      if (exact)
        AA_FUZZ_CHECK(aa_fuzz_claimed_bytes(&a) == have, "numel * itemsize is not the bytes the file holds");
      else
        AA_FUZZ_CHECK(aa_fuzz_claimed_bytes(&a) <= have, "numel * itemsize exceeds what the file can hold");
    } else {
      AA_FUZZ_CHECK(err.msg[0] != '\0', "a refused file has a message");
    }
    aa_ndarray_free(&a);
  }
}
#endif

#endif
