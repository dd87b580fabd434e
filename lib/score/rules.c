/* attnacc: names and constants of the pass rules (abs-rel, torch, fa, sdpa, expect) and the references they
 * compare with (the naive reference, a recipe in the kernel's format). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "score.h"

static const char *const names[AA_RULE_COUNT] = {"abs-rel", "torch", "fa", "sdpa", "expect"};
static const char *const stat_names[AA_EXPECT_NSTAT] = {"rel-l2", "q99", "scale", "offset", "row", "head"};

const char *aa_expect_stat_name(aa_expect_stat_t s) {
  return (unsigned)s < AA_EXPECT_NSTAT ? stat_names[s] : "?";
}

const char *aa_rule_name(aa_rule_t r) {
  return (unsigned)r < AA_RULE_COUNT ? names[r] : "?";
}

int aa_rule_from_name(aa_rule_t *out, const char *name) {
  int i = aa_name_index(name, names, AA_RULE_COUNT);
  if (i < 0) return AA_EINVAL;
  *out = (aa_rule_t)i;
  return AA_OK;
}

/* torch.testing.assert_close's defaults ([pytorch-sdpa]; PyTorch
   torch/testing/_comparison.py:45-53, the table _DTYPE_PRECISIONS, as
   shipped by Debian's python3-torch 1.13): float16 (1e-3, 1e-5), bfloat16
   (1.6e-2, 1e-5), float32 (1.3e-6, 1e-5), float64 (1e-7, 1e-7). Comparing
   an output with an FP64 expected value, assert_close takes the larger of
   the two dtypes' tolerances, i.e. the output's: so does this rule
   (tests/test_python.py checks the verdicts against assert_close). */
void aa_rule_torch_tol(double *rtol, double *atol, aa_fmt_t fmt) {
  switch (fmt) {
  case AA_FMT_FP16:
    *rtol = 1e-3, *atol = 1e-5;
    break;
  case AA_FMT_FP32:
    *rtol = 1.3e-6, *atol = 1e-5;
    break;
  case AA_FMT_FP64:
    *rtol = 1e-7, *atol = 1e-7;
    break;
  default: /* bf16, and the FP8 formats (assert_close has no defaults for them; bf16's are the loosest) */
    *rtol = 1.6e-2, *atol = 1e-5;
    break;
  }
}

/* flash-attention tests/test_flash_attn.py (FA2): 2x for the forward
   output, 3x for dq, dk, dv ([fa2] tests, [pytorch-sdpa]). */
double aa_rule_fa_factor(const char *out_name) {
  return strcmp(out_name, "o") == 0 ? AA_METRICS_FA_FACTOR_FWD : AA_METRICS_FA_FACTOR_BWD;
}

/* PyTorch test/test_transformers.py, flash backend's fudge factors
   ([fa2] tests, [pytorch-sdpa]). dsinks has none there: o's is used. */
double aa_rule_sdpa_fudge(const char *out_name) {
  if (strcmp(out_name, "dq") == 0) return 180.0;
  if (strcmp(out_name, "dk") == 0) return 16.0;
  return 4.0; /* o, dv, dsinks */
}

int aa_score_recipe_to_fmt(aa_recipe_t *r, aa_fmt_t fmt, aa_error_t *err) {
  int rc;
  size_t len;
  if (fmt != AA_FMT_BF16 && fmt != AA_FMT_FP16 && fmt != AA_FMT_FP32)
    return aa_error_set(err, AA_EINVAL, "a recipe is put in bf16, fp16 or fp32 only, not %s", aa_fmt_info(fmt)->name);
  if (fmt == AA_FMT_BF16) return AA_OK;
  /* Same algorithm, every BF16 rounding step in fmt: FA2 and PyTorch's math
     attention round P and dS to the inputs' dtype. The format keys come
     from the key table, so that a new one cannot be missed. */
  const char *to = aa_fmt_info(fmt)->name;
  for (size_t i = 0; i < aa_recipe_key_count(); i++) {
    aa_recipe_key_info_t k;
    char v[32];
    if (aa_recipe_key_info(&k, i) != AA_OK || strcmp(k.values, "format") != 0 ||
        (k.flags & (AA_RECIPE_KEY_MACRO | AA_RECIPE_KEY_FAMILY)) != 0)
      continue;
    if (aa_recipe_value(v, sizeof v, r, k.key) == AA_OK && strcmp(v, "bf16") == 0 &&
        (rc = aa_recipe_set(r, k.key, to, err)) != AA_OK)
      return rc;
  }
  len = strlen(r->name);
  if (len + 6 > sizeof r->name) len = sizeof r->name - 6;
  snprintf(r->name + len, sizeof r->name - len, "-%s", to);
  return AA_OK;
}

int aa_score_naive_recipe(aa_recipe_t *r, aa_fmt_t fmt, aa_error_t *err) {
  int rc;
  if (fmt != AA_FMT_BF16 && fmt != AA_FMT_FP16 && fmt != AA_FMT_FP32)
    return aa_error_set(err, AA_EINVAL, "the naive reference exists for bf16, fp16 and fp32 inputs only");
  if (r == NULL) return aa_error_set(err, AA_EINVAL, "aa_score_naive_recipe: NULL recipe");
  if ((rc = aa_recipe_preset(r, "naive-bf16", err)) != AA_OK || (rc = aa_score_recipe_to_fmt(r, fmt, err)) != AA_OK)
    return rc;
  if (fmt != AA_FMT_BF16) strcpy(r->name, fmt == AA_FMT_FP16 ? "naive-fp16" : "naive-fp32");
  return AA_OK;
}

/* x (not NaN) is an FP32 value, and a BF16 one: the round trip through float is exact (RNE, subnormals kept,
   overflow to Inf: what aa_round gives for these formats), and BF16 is FP32 with the low 16 bits zero (the same
   exponent range, subnormals included). A cast where aa_round is a call per element (9 % of a warm score's CPU time).
 */
static int holds_fp32(double x) {
  return (double)(float)x == x;
}
static int holds_bf16(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (double)f == x && (u & 0xffffu) == 0;
}

double aa_score_oracle_target(aa_fmt_t kernel_fmt) {
  return kernel_fmt == AA_FMT_FP64 ? AA_ORACLE_TARGET_DEFAULT : AA_SCORE_ORACLE_TARGET;
}

aa_fmt_t aa_score_infer_fmt(const aa_tensor_t *t) {
  size_t n = aa_tensor_numel(t);
  int ok[3] = {1, 1, 1};
  aa_round_opts_t ro = {AA_FMT_FP16, AA_RND_NE, 1, 0};
  for (size_t i = 0; i < n && ok[0]; i++)
    if (t->data[i] == t->data[i] && !holds_bf16(t->data[i])) ok[0] = 0;
  for (size_t i = 0; i < n && ok[1]; i++)
    if (t->data[i] == t->data[i] && aa_round(t->data[i], &ro, NULL) != t->data[i]) ok[1] = 0;
  for (size_t i = 0; i < n && ok[2] && !ok[0]; i++) /* every BF16 value is an FP32 one */
    if (t->data[i] == t->data[i] && !holds_fp32(t->data[i])) ok[2] = 0;
  /* bf16 and fp16 overlap (small integers, powers of two); prefer bf16, the
     usual attention dtype, only when fp16 does not also hold everything. */
  if (ok[0] && !ok[1]) return AA_FMT_BF16;
  if (ok[1] && !ok[0]) return AA_FMT_FP16;
  if (ok[0]) return AA_FMT_BF16;
  if (ok[2]) return AA_FMT_FP32;
  return AA_FMT_FP64;
}
