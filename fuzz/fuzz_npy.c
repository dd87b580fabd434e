/* attnacc: libFuzzer harness of the .npy parser (also the .npz members' parser): any bytes give an array or an
 * error, never a crash or a leak, with and without '<i2' read as BF16 bits. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "npy.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (unsigned flags = 0; flags <= AA_NPY_BF16_BITS; flags += AA_NPY_BF16_BITS) {
    aa_ndarray_t a;
    memset(&a, 0, sizeof a);
    aa_error_t err;
    err.msg[0] = '\0';
    if (aa_npy_parse_nd(&a, data, size, "fuzz.npy", flags, &err) == AA_OK)
      aa_fuzz_check_array(&a);
    else
      AA_FUZZ_CHECK(err.msg[0] != '\0', "a refused .npy has a message");
    aa_ndarray_free(&a);
  }
  return 0;
}
