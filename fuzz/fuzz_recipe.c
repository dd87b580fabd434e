/* attnacc: libFuzzer harness of the recipe parser: any text is a recipe or an error, and a recipe survives
 * format-then-parse unchanged. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "fuzz.h"
#include "recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0'; /* the parser reads a string: bytes after a NUL are not part of it */
  aa_recipe_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  aa_error_t err;
  if (a != NULL && b != NULL && aa_recipe_parse_string(a, text, "fuzz.recipe", &err) == AA_OK) {
    size_t need = aa_recipe_format(NULL, 0, a);
    char *t1 = malloc(need + 1), *t2 = malloc(need + 1);
    AA_FUZZ_CHECK(t1 != NULL && t2 != NULL, "out of memory for the formatted recipe");
    AA_FUZZ_CHECK(aa_recipe_format(t1, need + 1, a) == need, "format length differs between calls");
    AA_FUZZ_CHECK(aa_recipe_parse_string(b, t1, "formatted.recipe", &err) == AA_OK,
                  "the formatted text of a parsed recipe does not parse");
    AA_FUZZ_CHECK(aa_recipe_equal(a, b), "format then parse changed a field");
    AA_FUZZ_CHECK(aa_recipe_format(t2, need + 1, b) == need && memcmp(t1, t2, need) == 0,
                  "format then parse changed the formatted text");
    free(t1);
    free(t2);
  }
  free(a);
  free(b);
  free(text);
  return 0;
}
