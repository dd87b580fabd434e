/* attnacc: libFuzzer harness of the .npy reader: any bytes give a tensor or an error, never a crash or a leak. */
#include <math.h>

#include "fmt.h"
#include "fuzz.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = aa_fuzz_file(data, size, ".npy");
  aa_tensor_t t;
  memset(&t, 0, sizeof t);
  aa_error_t err;
  int st = aa_npy_read(&t, path, &err);
  if (st == AA_OK) {
    /* every value the header promised is there and exact in the tagged format (tensor.h) */
    size_t n = aa_tensor_numel(&t);
    for (size_t i = 0; i < n; i++) {
      double v = t.data[i], back = aa_fmt_decode(aa_fmt_encode(v, t.fmt), t.fmt);
      AA_FUZZ_CHECK(back == v || (isnan(v) && isnan(back)), "a value read is not exact in its format");
    }
    aa_tensor_free(&t);
  } else {
    AA_FUZZ_CHECK(err.msg[0] != '\0', "a refused .npy has a message");
  }
  return 0;
}
