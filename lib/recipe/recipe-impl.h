/* attnacc: internal key table of the recipe module (one row per recipe-file key). */
#ifndef AA_RECIPE_IMPL_H
#define AA_RECIPE_IMPL_H

#include <stddef.h>

#include "recipe.h"

typedef enum {
  AA_KEY_STRING = 0, /* char[64] */
  AA_KEY_FMT,        /* aa_fmt_t */
  AA_KEY_ACCUM,      /* aa_accum_t */
  AA_KEY_ENUM,       /* int-sized enum with a NULL-terminated name list */
  AA_KEY_SIZE,       /* size_t */
  AA_KEY_DOUBLE,     /* double */
  AA_KEY_BOOL        /* int 0/1, written on/off */
} aa_key_type_t;

typedef struct {
  const char *key;
  aa_key_type_t type;
  size_t offset;
  const char *const *names; /* AA_KEY_ENUM only */
} aa_recipe_key_t;

extern const aa_recipe_key_t aa_recipe_keys[];
extern const size_t aa_recipe_nkeys;

#endif
