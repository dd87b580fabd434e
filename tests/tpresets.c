/* attnacc: regression guard: every preset's canonical text equals the copy stored in tests/data/presets. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"
#include "tests.h"

/* The stored copies were written by `tests/tpresets --write DIR` before the
   key table became wholly data and before presets became
   recipe text: a change of any preset's text, or of the canonical
   format, fails here. A deliberate change of a preset updates its file in
   the same commit. */

int main(int argc, char **argv) {
  static char text[1 << 16];
  const char *dir = NULL, *top = getenv("top_srcdir");
  char path[4096];
  int write = argc == 3 && !strcmp(argv[1], "--write");
  if (write)
    dir = argv[2];
  else
    snprintf(path, sizeof path, "%s/tests/data/presets", top != NULL ? top : ".");
  if (dir == NULL) dir = path;
  for (size_t i = 0; i < aa_recipe_preset_count(); i++) {
    const char *name = aa_recipe_preset_name(i);
    aa_recipe_t r;
    aa_error_t err = {{0}};
    char file[4200];
    snprintf(file, sizeof file, "%s/%s.recipe", dir, name);
    if (aa_recipe_preset(&r, name, &err) != AA_OK) {
      AA_FAIL("preset %s: lookup: %s", name, err.msg);
      continue;
    }
    size_t need = aa_recipe_format(text, sizeof text, &r);
    AA_CHECK(need < sizeof text, "preset %s: text longer than %zu", name, sizeof text);
    if (write) {
      FILE *f = fopen(file, "wb");
      if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) AA_FAIL("cannot write %s", file);
      continue;
    }
    char *want = aa_test_slurp(file);
    if (want == NULL) {
      AA_FAIL("preset %s: no stored copy %s", name, file);
      continue;
    }
    if (strcmp(want, text) != 0) {
      size_t k = 0;
      while (want[k] != '\0' && want[k] == text[k])
        k++;
      AA_FAIL("preset %s: canonical text differs from %s at byte %zu: stored '%.60s' now '%.60s'", name, file, k,
              want + k, text + k);
    }
    free(want);
  }
  /* The stored set is the preset set: 15 presets when the copies were made. */
  AA_CHECK(aa_recipe_preset_count() >= 15, "only %zu presets (15 were stored)", aa_recipe_preset_count());
  return aa_test_finish("tpresets");
}
