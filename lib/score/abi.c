/* attnacc: the ABI version and structure sizes of the flat entry points, for foreign callers to check the library. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <string.h>

#include "score.h"

int aa_abi_version(void) {
  return AA_ABI_VERSION;
}

size_t aa_abi_struct_size(const char *name) {
  static const struct {
    const char *name;
    size_t size;
  } t[] = {
      {"aa_flat_tensor_t", sizeof(aa_flat_tensor_t)},   {"aa_flat_opts_t", sizeof(aa_flat_opts_t)},
      {"aa_flat_out_t", sizeof(aa_flat_out_t)},         {"aa_flat_info_t", sizeof(aa_flat_info_t)},
      {"aa_problem_cost_t", sizeof(aa_problem_cost_t)},
  };
  if (name == NULL) return 0;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(name, t[i].name) == 0) return t[i].size;
  return 0;
}
