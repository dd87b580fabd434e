/* attnacc: libFuzzer harness of the .safetensors reader (header JSON, dtypes, offsets): any file gives the array "q"
 * or an error, never a crash or a leak, and an accepted "q" is exactly the bytes its data_offsets span. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <jansson.h>

#include "npy.h"

#include "fuzz.h"

/* end - begin of q's data_offsets, read here with jansson from the header
   whose length the first 8 bytes give (the reader accepted the file, so
   they are well-formed). */
static uint64_t st_span(const uint8_t *data, size_t size, int *exact) {
  uint64_t hlen = 0, span;
  json_t *root, *off;
  *exact = 1;
  AA_FUZZ_CHECK(size >= 8, "an accepted .safetensors shorter than 8 bytes");
  for (int i = 7; i >= 0; i--)
    hlen = hlen << 8 | data[i];
  AA_FUZZ_CHECK(hlen <= size - 8, "an accepted header longer than the file");
  root = json_loadb((const char *)data + 8, (size_t)hlen, 0, NULL);
  off = json_object_get(json_object_get(root, "q"), "data_offsets");
  AA_FUZZ_CHECK(json_is_integer(json_array_get(off, 0)) && json_is_integer(json_array_get(off, 1)),
                "an accepted tensor without integer data_offsets");
  span = (uint64_t)(json_integer_value(json_array_get(off, 1)) - json_integer_value(json_array_get(off, 0)));
  AA_FUZZ_CHECK(span <= size - 8 - hlen, "an accepted tensor spans past the file");
  json_decref(root);
  return span;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  aa_fuzz_named_reader(data, size, ".safetensors", aa_safetensors_read, st_span);
  return 0;
}
