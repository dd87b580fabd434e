/* attnacc: libFuzzer harness of the .npz archive (libzip, then the .npy parser): any file gives the array "q" or an
 * error, never a crash or a leak. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "npy.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  aa_fuzz_named_reader(data, size, ".npz", aa_npz_read);
  return 0;
}
