/* attnacc: libFuzzer harness of the .npz archive (libzip, then the .npy parser): any file gives the array "q" or an
 * error, never a crash or a leak, and an accepted array is no more than its member can inflate to. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "npy.h"

#include "fuzz.h"

/* Deflate gives at most about 1032 bytes a compressed byte (zlib's figure),
   and a member's compressed bytes lie in the archive. */
static uint64_t npz_bound(const uint8_t *data, size_t size, int *exact) {
  (void)data;
  *exact = 0;
  return (uint64_t)size * 1032u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  aa_fuzz_named_reader(data, size, ".npz", aa_npz_read, npz_bound);
  return 0;
}
