/* attnacc: precision recipes (data describing how a kernel rounds), presets and the recipe-file parser. */
#ifndef AA_RECIPE_H
#define AA_RECIPE_H

#include <stddef.h>

#include "common.h"
#include "fmt.h"
#include "gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A recipe is data: for every intermediate the format it is rounded to, the
   accumulation model of every product, tile sizes, the softmax scheme and the
   dQ reduction. The attn module runs any recipe; presets name real kernels.
   (The full field list is owned by the recipe module; see recipe.h below.) */
typedef struct aa_recipe aa_recipe_t;

/* ---- fields ---- */
struct aa_recipe {
  char name[64];
  aa_fmt_t io_fmt; /* format of q, k, v, dO as loaded and of O, dQ, dK, dV as stored */
  /* The recipe module extends this struct (see lib/recipe/). */
  int placeholder_;
};

/* Presets. */
size_t aa_recipe_preset_count(void);
const char *aa_recipe_preset_name(size_t i);
const char *aa_recipe_preset_describe(size_t i);
int aa_recipe_preset(aa_recipe_t *out, const char *name, aa_error_t *err); /* AA_ENOTFOUND names the preset */

/* Set one key; an unknown key or value gives AA_EINVAL naming both. */
int aa_recipe_set(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err);
/* Parse a recipe file of `key = value` lines ('#' comments, blank lines);
   the optional first key `base = PRESET` starts from a preset. Errors name
   the file and line. */
int aa_recipe_parse_file(aa_recipe_t *out, const char *path, aa_error_t *err);
/* Canonical `key = value` text of every field (for result files); returns
   the length it needs (snprintf-style). */
size_t aa_recipe_format(char *buf, size_t len, const aa_recipe_t *r);

#ifdef __cplusplus
}
#endif
#endif
