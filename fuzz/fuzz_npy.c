/* attnacc: libFuzzer harness of the .npy parser (also the .npz members' parser): any bytes give an array or an
 * error, never a crash or a leak, with and without '<i2' read as BF16 bits; an accepted array is exactly the bytes
 * after its header. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "npy.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (unsigned flags = 0; flags <= AA_NPY_BF16_BITS; flags += AA_NPY_BF16_BITS) {
    aa_ndarray_t a;
    memset(&a, 0, sizeof a);
    aa_error_t err;
    err.msg[0] = '\0';
    if (aa_npy_parse_nd(&a, data, size, "fuzz.npy", flags, &err) == AA_OK) {
      /* the data start after magic, version, header length (u16 for 1.0, u32 after) and header */
      AA_FUZZ_CHECK(size >= 12, "an accepted .npy shorter than its preamble");
      size_t off =
          data[6] == 1
              ? 10 + (size_t)(data[8] | data[9] << 8)
              : 12 + ((size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 | (size_t)data[11] << 24);
      aa_fuzz_check_array(&a);
      AA_FUZZ_CHECK(off <= size && aa_fuzz_claimed_bytes(&a) == size - off,
                    "numel * itemsize is not the bytes after the header");
    } else {
      AA_FUZZ_CHECK(err.msg[0] != '\0', "a refused .npy has a message");
    }
    aa_ndarray_free(&a);
  }
  return 0;
}
