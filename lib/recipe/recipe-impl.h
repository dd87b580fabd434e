/* attnacc: internal key table of the recipe module (one row per recipe-file key). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_RECIPE_IMPL_H
#define AA_RECIPE_IMPL_H

#include <stddef.h>

#include "recipe.h"

/* How a row's field is stored, parsed and written. */
typedef enum {
  AA_KEY_STRING = 0, /* char[64] */
  AA_KEY_FMT,        /* aa_fmt_t */
  AA_KEY_ACCUM,      /* aa_accum_t */
  AA_KEY_ENUM,       /* int-sized enum (or int) with a NULL-terminated name list */
  AA_KEY_SIZE,       /* size_t in 0..max */
  AA_KEY_DOUBLE,     /* double, not NaN */
  AA_KEY_BOOL,       /* int 0/1, written on/off */
  AA_KEY_EXP,        /* aa_exp_t, a lib/exp.h spec written by aa_exp_describe */
  AA_KEY_DROPOUT,    /* aa_dropout_t: the keys `dropout_<name>` (lib/dropout.h) */
  AA_KEY_REDUCE,     /* aa_reduce_t: the keys `dq_reduce` and `dq_reduce_<name>` (lib/reduce.h) */
  AA_KEY_MACRO       /* no field: `set` rewrites other fields (mixed_precision, base) */
} aa_key_type_t;

/* When format writes a row. */
typedef enum {
  AA_OMIT_NEVER = 0, /* always */
  AA_OMIT_DEFAULT,   /* only when its value is not the default */
  AA_OMIT_GROUP      /* only when some row of the same group is not at its default (then all of them) */
} aa_key_omit_t;

/* One row: everything about one key. Order of the table = order of
   aa_recipe_format's output. */
typedef struct aa_recipe_key {
  const char *key;
  aa_key_type_t type;
  size_t offset;            /* of the field in aa_recipe_t (0 for macros) */
  size_t size;              /* of that field: an enum must be int-sized, as the table stores an int there */
  const char *const *names; /* AA_KEY_ENUM: the value names, index = stored value */
  size_t max;               /* AA_KEY_SIZE: largest value */
  const char *def;          /* default, as written (the value of a file without `base`: fa2's) */
  aa_key_omit_t omit;
  int group;         /* AA_OMIT_GROUP: rows with the same number are written together */
  const char *exact; /* a rounding site: the value that makes it exact; NULL: not a rounding */
  const char *desc;  /* one line: what it models */
  const char *cite;  /* where the modelled behaviour is documented */
  int (*set)(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err); /* AA_KEY_MACRO */
} aa_recipe_key_t;

extern const aa_recipe_key_t aa_recipe_keys[];
extern const size_t aa_recipe_nkeys;

/* The per-key part of aa_recipe_check: every enumerated, format and model
   field names a value, sizes within range, the families' own checks. */
int aa_recipe_check_fields(const aa_recipe_t *r, aa_error_t *err);

/* The table's defaults: every row set to its default (a recipe file
   without `base` starts here; equal to fa2 but for the name "custom"). */
void aa_recipe_defaults(aa_recipe_t *r);

/* The preset files compiled in (presets-text.c, generated). */
typedef struct {
  const char *name, *describe, *text;
} aa_recipe_preset_text_t;
extern const aa_recipe_preset_text_t aa_recipe_preset_texts[];
extern const size_t aa_recipe_npresets;

#endif
