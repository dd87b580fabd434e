/* attnacc: the named recipe presets (recipe files lib/recipe/presets/NAME.recipe, compiled in) and their lookup. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <string.h>

#include "recipe-impl.h"

/* A preset is literally a recipe file: its text (presets-text.c, generated
   at build time from the files lib/recipe/presets/NAME.recipe by presets-gen.awk) is
   parsed by the parser users' files go through, `base = OTHER` included.
   The comments of each file say what it models and where from. */

size_t aa_recipe_preset_count(void) {
  return aa_recipe_npresets;
}

const char *aa_recipe_preset_name(size_t i) {
  return i < aa_recipe_npresets ? aa_recipe_preset_texts[i].name : NULL;
}

const char *aa_recipe_preset_describe(size_t i) {
  return i < aa_recipe_npresets ? aa_recipe_preset_texts[i].describe : NULL;
}

const char *aa_recipe_preset_text(const char *name) {
  if (name == NULL) return NULL;
  for (size_t i = 0; i < aa_recipe_npresets; i++)
    if (!strcmp(aa_recipe_preset_texts[i].name, name)) return aa_recipe_preset_texts[i].text;
  return NULL;
}

int aa_recipe_preset(aa_recipe_t *out, const char *name, aa_error_t *err) {
  if (out == NULL || name == NULL) return aa_error_set(err, AA_EINVAL, "recipe_preset: NULL argument");
  const char *text = aa_recipe_preset_text(name);
  if (text == NULL) return aa_error_set(err, AA_ENOTFOUND, "unknown recipe preset '%s'", name);
  char where[96];
  snprintf(where, sizeof where, "preset %s", name);
  /* The build checks every preset (tests/trecipe, tests/tpresets): a parse
     failure here is a bug in a preset file, reported as such. */
  int st = aa_recipe_parse_string(out, text, where, err);
  if (st == AA_OK && strcmp(out->name, name) != 0)
    return aa_error_set(err, AA_EFORMAT, "preset %s: its file names it '%s'", name, out->name);
  return st;
}
