/* attnacc: libFuzzer harness of the .npz archive (libzip, then the .npy parser): any file gives the array "q" or an
 * error, never a crash or a leak. */
#include "npy.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = aa_fuzz_file(data, size, ".npz");
  for (unsigned flags = 0; flags <= AA_NPY_BF16_BITS; flags += AA_NPY_BF16_BITS) {
    aa_ndarray_t a;
    memset(&a, 0, sizeof a);
    aa_error_t err;
    err.msg[0] = '\0';
    int st = aa_npz_read(&a, path, "q", flags, &err);
    if (st == AA_OK)
      aa_fuzz_check_array(&a);
    else
      AA_FUZZ_CHECK(err.msg[0] != '\0', "a refused file has a message");
    aa_ndarray_free(&a);
  }
  return 0;
}
