/* attnacc: the ABI version, structure sizes and result-structure fields of the flat entry points, for foreign
 * callers to check the library and read its results without mirroring them by hand. */
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

typedef struct {
  const char *name;
  size_t offset;
  int kind;
  size_t rows, cols;
} field_t;

/* The element kind and shape come from the declaration itself (_Generic, sizeof): a field changed in lib/score.h
   changes here without an edit, and a field left out shows as a gap (tests/teval checks there is none). */
#define KIND(x) _Generic((x), int : 'i', size_t : 'z', double : 'd', char : 'c')
#define SCALAR(T, f)                                                                                                 \
  { #f, offsetof(T, f), KIND(((T *)0)->f), 1, 1 }
#define ARRAY(T, f)                                                                                                  \
  { #f, offsetof(T, f), KIND(((T *)0)->f[0]), 1, sizeof(((T *)0)->f) / sizeof(((T *)0)->f[0]) }
#define ARRAY2(T, f)                                                                                                 \
  {                                                                                                                  \
#f, offsetof(T, f), KIND(((T *)0)->f[0][0]), sizeof(((T *)0)->f) / sizeof(((T *)0)->f[0]),                       \
        sizeof(((T *)0)->f[0]) / sizeof(((T *)0)->f[0][0])                                                           \
  }
#define O(f) SCALAR(aa_flat_out_t, f)
#define OA(f) ARRAY(aa_flat_out_t, f)
#define I(f) SCALAR(aa_flat_info_t, f)

static const field_t out_fields[] = {
    OA(name),
    O(present),
    O(data_fmt),
    O(ulp_fmt),
    O(count),
    O(nan),
    O(inf),
    O(rel_l2),
    O(max_abs),
    O(max_rel),
    O(rel_floor),
    O(max_rel_any),
    O(ulp_median),
    O(ulp_p99),
    O(ulp_max),
    O(ulp_mean),
    O(ulp_normwise),
    O(oracle_relerr_bound),
    O(idx_ndim),
    OA(worst_abs_idx),
    OA(worst_rel_idx),
    O(worst_got),
    O(worst_ref),
    O(worst_rel_got),
    O(worst_rel_ref),
    OA(rule_applied),
    OA(rule_pass),
    OA(rule_ratio),
    OA(rule_allowed),
    OA(rule_atol),
    OA(rule_rtol),
    OA(rule_naive_max_abs),
    OA(rule_fail_count),
    ARRAY2(aa_flat_out_t, rule_worst_idx),
    OA(rule_worst_got),
    OA(rule_worst_ref),
    O(ls_scale),
    O(ls_offset),
    O(scale_sigma),
    O(offset_sigma),
    O(err_corr),
    O(abs_q99),
    O(row_err_max),
    O(head_rel_l2_max),
    O(row_worst),
    O(head_worst),
    OA(expect_ratio),
    OA(expect_limit),
    OA(expect_ref),
    O(expect_stat),
};

static const field_t info_fields[] = {
    I(layout),
    I(b),
    I(h),
    I(h_kv),
    I(n_q),
    I(n_k),
    I(d),
    I(scale),
    I(input_fmt),
    I(oracle_relerr_bound),
    I(oracle_recomputed),
    I(oracle_uncertified),
    I(rounded),
    ARRAY(aa_flat_info_t, recipe),
    I(kernel_fmt),
    I(kernel_fmt_inferred),
    ARRAY(aa_flat_info_t, expect),
};

const char *aa_abi_field(const char *strct, size_t i, size_t *offset, int *kind, size_t *rows, size_t *cols) {
  const field_t *t;
  size_t n;
  if (strct != NULL && strcmp(strct, "aa_flat_out_t") == 0)
    t = out_fields, n = sizeof out_fields / sizeof out_fields[0];
  else if (strct != NULL && strcmp(strct, "aa_flat_info_t") == 0)
    t = info_fields, n = sizeof info_fields / sizeof info_fields[0];
  else
    return NULL;
  if (i >= n) return NULL;
  if (offset != NULL) *offset = t[i].offset;
  if (kind != NULL) *kind = t[i].kind;
  if (rows != NULL) *rows = t[i].rows;
  if (cols != NULL) *cols = t[i].cols;
  return t[i].name;
}
