/* attnacc: tests of the recipe module: presets, key setting, format/parse round trip, parser errors. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"
#include "recipe/recipe-impl.h"
#include "tests.h"

static char buf[16384];

/* Every preset formats, parses back to the same recipe, and passes the check. */
static void test_roundtrip(void) {
  for (size_t i = 0; i < aa_recipe_preset_count(); i++) {
    const char *name = aa_recipe_preset_name(i);
    aa_recipe_t r, back;
    aa_error_t err = {{0}};
    if (aa_recipe_preset(&r, name, &err) != AA_OK) {
      AA_FAIL("preset %s: lookup failed: %s", name, err.msg);
      continue;
    }
    AA_CHECK(strcmp(r.name, name) == 0, "preset %s: name field is '%s'", name, r.name);
    AA_CHECK(aa_recipe_check(&r, &err) == AA_OK, "preset %s: check failed: %s", name, err.msg);
    AA_CHECK(aa_recipe_preset_describe(i) != NULL && strlen(aa_recipe_preset_describe(i)) > 10,
             "preset %s: no description", name);
    size_t need = aa_recipe_format(NULL, 0, &r);
    size_t got = aa_recipe_format(buf, sizeof buf, &r);
    AA_CHECK(need == got && got == strlen(buf), "preset %s: format length %zu/%zu/%zu", name, need, got, strlen(buf));
    if (aa_recipe_parse_string(&back, buf, "roundtrip", &err) != AA_OK) {
      AA_FAIL("preset %s: parse of its own format failed: %s", name, err.msg);
      continue;
    }
    AA_CHECK(aa_recipe_equal(&r, &back) && strcmp(r.name, back.name) == 0,
             "preset %s: format -> parse is not the identity", name);
    /* A truncated buffer stays NUL-terminated and reports the full length. */
    char small[32];
    AA_CHECK(aa_recipe_format(small, sizeof small, &r) == need && strlen(small) == sizeof small - 1,
             "preset %s: truncated format", name);
  }
  aa_recipe_t r;
  aa_error_t err = {{0}};
  AA_CHECK(aa_recipe_preset(&r, "no-such-kernel", &err) == AA_ENOTFOUND && strstr(err.msg, "no-such-kernel"),
           "unknown preset: status/message '%s'", err.msg);
}

/* The presets differ where the brief says they must (independent of formatting). */
static void test_preset_contents(void) {
  aa_recipe_t nki, nkib, fa2, nv;
  aa_recipe_preset(&nki, "nki", NULL);
  aa_recipe_preset(&nkib, "nki-bf16", NULL);
  aa_recipe_preset(&fa2, "fa2", NULL);
  aa_recipe_preset(&nv, "naive-bf16", NULL);
  AA_CHECK(nki.bwd_dq_acc_fmt == AA_FMT_FP32 && nkib.bwd_dq_acc_fmt == AA_FMT_BF16, "nki mixed_precision dQ acc");
  AA_CHECK(nki.bwd_d_fmt == AA_FMT_FP32 && nkib.bwd_d_fmt == AA_FMT_BF16, "nki mixed_precision D");
  AA_CHECK(nki.bwd_dp_fmt == AA_FMT_BF16 && fa2.bwd_dp_fmt == AA_FMT_FP32, "dP format nki bf16 / fa2 fp32");
  AA_CHECK(nki.scale_fold == AA_SCALE_Q && fa2.scale_fold == AA_SCALE_EXP && nv.scale_fold == AA_SCALE_S,
           "scale placement");
  AA_CHECK(nki.bwd_section == 8192 && nki.bwd_tile_k == 512 && nki.bwd_sub_k == 128 && nki.bwd_tile_q == 128,
           "nki tiles");
  AA_CHECK(nki.bwd_dq_section_fmt == AA_FMT_BF16, "nki dQ section round trip in the output dtype");
  AA_CHECK(fa2.exp_form == AA_EXPFORM_EXP2_FMA && nki.exp_form == AA_EXPFORM_NATURAL, "exp forms");
  /* `mixed_precision = off` on nki gives exactly nki-bf16. */
  aa_recipe_t t = nki;
  AA_CHECK(aa_recipe_set(&t, "mixed_precision", "off", NULL) == AA_OK && aa_recipe_equal(&t, &nkib),
           "nki + mixed_precision=off != nki-bf16");
}

static void expect_error(const char *text, int line, const char *needle) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  int st = aa_recipe_parse_string(&r, text, "t.recipe", &err);
  char want[64];
  snprintf(want, sizeof want, "t.recipe:%d:", line);
  AA_CHECK(st != AA_OK, "parse of bad text succeeded: <<%s>>", text);
  AA_CHECK(strstr(err.msg, want) != NULL, "error message '%s' does not name line %d", err.msg, line);
  AA_CHECK(strstr(err.msg, needle) != NULL, "error message '%s' does not mention '%s'", err.msg, needle);
}

static void test_parser(void) {
  expect_error("base = nki\n\n# comment\nbwd.tile_k = 256\nno_such_key = 3\n", 5, "no_such_key");
  expect_error("io = bf16\nbwd.dp_fmt = fp31\n", 2, "fp31");
  expect_error("fwd.tile_q = 128\nbwd.tile_q 64\n", 2, "=");
  expect_error("bwd.skip_masked = maybe\n", 1, "maybe");
  expect_error("bwd.tile_q = -4\n", 1, "-4");
  expect_error("bwd.tile_q = 12x\n", 1, "12x");
  expect_error("fwd.rescale_threshold = nan\n", 1, "nan");
  expect_error("exp_form = exp3\n", 1, "exp3");
  expect_error("io = bf16\nbase = nki\n", 2, "base");
  expect_error("base = tpu\n", 1, "tpu");
  expect_error("bwd.acc_dq = fp17-seq\n", 1, "fp17-seq");
  expect_error("bwd.dq_scale =\n", 1, "bwd.dq_scale");

  /* base then overrides, comments and odd spacing. */
  aa_recipe_t r, nki;
  aa_error_t err = {{0}};
  const char *txt = "# my variant\n  base   =   nki   # start from NKI\n\nbwd.section=256\n"
                    "bwd.dp_fmt = fp32\nname = nki-fp32dp\nfwd.rescale_threshold = 8\n";
  int st = aa_recipe_parse_string(&r, txt, "v.recipe", &err);
  AA_CHECK(st == AA_OK, "valid text rejected: %s", err.msg);
  aa_recipe_preset(&nki, "nki", NULL);
  AA_CHECK(r.bwd_section == 256 && r.bwd_dp_fmt == AA_FMT_FP32 && r.fwd_rescale_threshold == 8.0 &&
               strcmp(r.name, "nki-fp32dp") == 0,
           "overrides not applied");
  AA_CHECK(r.bwd_dq_acc_fmt == nki.bwd_dq_acc_fmt && r.scale_fold == nki.scale_fold && r.bwd_tile_k == 512,
           "base values lost");
  nki.bwd_section = 256;
  nki.bwd_dp_fmt = AA_FMT_FP32;
  nki.fwd_rescale_threshold = 8;
  AA_CHECK(aa_recipe_equal(&r, &nki), "base + overrides differs from the preset edited by hand");

  /* The same through a file, and a missing file. */
  char path[] = "trecipe-tmp.recipe";
  FILE *f = fopen(path, "w");
  if (f != NULL) {
    fputs(txt, f);
    fclose(f);
    aa_recipe_t r2;
    AA_CHECK(aa_recipe_parse_file(&r2, path, &err) == AA_OK && aa_recipe_equal(&r, &r2), "parse_file differs");
    f = fopen(path, "w");
    fputs("base = fa2\nbwd.ds_fmt = bf16\nbwd.tile_q 3\n", f);
    fclose(f);
    AA_CHECK(aa_recipe_parse_file(&r2, path, &err) != AA_OK && strstr(err.msg, "trecipe-tmp.recipe:3:") != NULL,
             "file error does not name file and line: '%s'", err.msg);
    remove(path);
  }
  AA_CHECK(aa_recipe_parse_file(&r, "/nonexistent/x.recipe", &err) == AA_EIO && strstr(err.msg, "/nonexistent"),
           "missing file: '%s'", err.msg);

  /* Inconsistent recipes are caught by the check. */
  aa_recipe_t bad;
  aa_recipe_preset(&bad, "fa2", NULL);
  aa_recipe_set(&bad, "bwd.dq_scale", "none", NULL);
  AA_CHECK(aa_recipe_check(&bad, &err) == AA_EINVAL, "dQ without the scale accepted");
  aa_recipe_preset(&bad, "nki", NULL);
  aa_recipe_set(&bad, "bwd.dk_scale", "end", NULL);
  AA_CHECK(aa_recipe_check(&bad, &err) == AA_EINVAL, "dK scaled twice accepted");
  aa_recipe_preset(&bad, "naive-bf16", NULL);
  aa_recipe_set(&bad, "bwd.tile_k", "128", NULL);
  AA_CHECK(aa_recipe_check(&bad, &err) == AA_EINVAL, "two-pass with a K tile accepted");
}

/* The key table against KEYS.md (the documentation a user reads): every
   stored key has a row there whose default column is the table's default
   and whose values column names every enumerated value; every key row of
   KEYS.md is a key of the table (or of the dropout_/dq_reduce_ families). */
static void test_keys_doc(void) {
  const char *top = getenv("top_srcdir");
  char path[4096], want[128];
  snprintf(path, sizeof path, "%s/lib/recipe/KEYS.md", top != NULL ? top : ".");
  char *md = aa_test_slurp(path);
  if (md == NULL) {
    AA_FAIL("KEYS.md: cannot read %s", path);
    return;
  }
  char *stop = strstr(md, "\n## Preset values");
  if (stop != NULL) *stop = '\0';
  for (size_t i = 0; i < aa_recipe_key_count(); i++) {
    aa_recipe_key_info_t k;
    AA_CHECK(aa_recipe_key_info(&k, i) == AA_OK, "key %zu: no info", i);
    if (k.flags & AA_RECIPE_KEY_MACRO) {
      snprintf(want, sizeof want, "`%s", k.key);
      AA_CHECK(strstr(md, want) != NULL, "KEYS.md does not mention the macro key %s", k.key);
      continue;
    }
    const char *name = !strcmp(k.key, "dropout_*") ? "dropout_scheme" : k.key;
    snprintf(want, sizeof want, "\n| `%s` | ", name);
    const char *row = strstr(md, want);
    if (row == NULL) {
      AA_FAIL("KEYS.md has no row for key %s", name);
      continue;
    }
    const char *vals = row + strlen(want), *bar = strstr(vals, " | ");
    const char *def = bar != NULL ? bar + 3 : NULL, *bar2 = def != NULL ? strstr(def, " | ") : NULL;
    if (bar == NULL || bar2 == NULL) {
      AA_FAIL("KEYS.md row of %s: not | key | values | default | ... |", name);
      continue;
    }
    AA_CHECK(strlen(k.def) == (size_t)(bar2 - def) && !strncmp(def, k.def, strlen(k.def)),
             "key %s: the table's default is '%s', KEYS.md says '%.*s'", name, k.def, (int)(bar2 - def), def);
    for (int j = 0; k.names != NULL && k.names[j] != NULL; j++) {
      char v[96];
      snprintf(v, sizeof v, "%.*s", (int)(bar - vals), vals);
      const char *hit = strstr(v, k.names[j]);
      size_t l = strlen(k.names[j]);
      /* a whole word of the values column (so "lse" is not found in "online-lse") */
      while (hit != NULL &&
             !((hit == v || hit[-1] == ' ' || hit[-1] == ',') && (hit[l] == '\0' || hit[l] == ',' || hit[l] == ' ')))
        hit = strstr(hit + 1, k.names[j]);
      AA_CHECK(hit != NULL, "key %s: KEYS.md's values column '%s' lacks '%s'", name, v, k.names[j]);
    }
  }
  for (const char *p = strstr(md, "\n| `"); p != NULL; p = strstr(p + 1, "\n| `")) {
    char key[96];
    const char *b = p + 4, *e = strchr(b, '`');
    if (e == NULL || e - b >= (ptrdiff_t)sizeof key) continue;
    snprintf(key, sizeof key, "%.*s", (int)(e - b), b);
    int found = !strncmp(key, "dropout_", 8) || !strncmp(key, "dq_reduce_", 10);
    for (size_t i = 0; i < aa_recipe_key_count() && !found; i++) {
      aa_recipe_key_info_t k;
      aa_recipe_key_info(&k, i);
      found = !strcmp(k.key, key);
    }
    AA_CHECK(found, "KEYS.md has a row for '%s', which is not a recipe key", key);
  }
  free(md);
}

/* The table's defaults are fa2's values (a file without base starts there),
   every enumerated value of every key survives format -> parse, and a
   preset is the recipe file aa_recipe_preset_text gives. */
static void test_table(void) {
  aa_recipe_t def, fa2, r, back;
  aa_error_t err = {{0}};
  AA_CHECK(aa_recipe_parse_string(&def, "", "empty", &err) == AA_OK, "empty recipe text: %s", err.msg);
  aa_recipe_preset(&fa2, "fa2", NULL);
  AA_CHECK(aa_recipe_equal(&def, &fa2) && !strcmp(def.name, "custom"),
           "a recipe file without base is not fa2 named custom (name '%s')", def.name);
  for (size_t i = 0; i < aa_recipe_key_count(); i++) {
    aa_recipe_key_info_t k;
    aa_recipe_key_info(&k, i);
    if (k.names == NULL) continue;
    for (int j = 0; k.names[j] != NULL; j++) {
      aa_recipe_preset(&r, "fa2", NULL);
      if (aa_recipe_set(&r, k.key, k.names[j], &err) != AA_OK) {
        AA_FAIL("key %s = %s refused: %s", k.key, k.names[j], err.msg);
        continue;
      }
      aa_recipe_format(buf, sizeof buf, &r);
      char v[64];
      AA_CHECK(aa_recipe_parse_string(&back, buf, "enum", &err) == AA_OK && aa_recipe_equal(&r, &back) &&
                   aa_recipe_value(v, sizeof v, &back, k.key) == AA_OK && !strcmp(v, k.names[j]),
               "key %s = %s does not survive format -> parse", k.key, k.names[j]);
    }
  }
  const char *t = aa_recipe_preset_text("tlx");
  AA_CHECK(t != NULL && !strncmp(t, "# tlx: ", 7) && strstr(t, "\nbase = recip ") != NULL &&
               strstr(t, "\nwhen causal: ") != NULL,
           "preset tlx's text is not its recipe file (base = recip, conditional keys)");
  AA_CHECK(aa_recipe_preset_text("nope") == NULL, "text of an unknown preset");
  /* Specs: NAME:key=value,... is the preset with the keys set, named as written. */
  AA_CHECK(aa_recipe_from_spec(&r, "fa2:bwd.ds_fmt=fp32,bwd.dp_fmt=bf16", &err) == AA_OK &&
               !strcmp(r.name, "fa2:bwd.ds_fmt=fp32,bwd.dp_fmt=bf16") && r.bwd_ds_fmt == AA_FMT_FP32 &&
               r.bwd_dp_fmt == AA_FMT_BF16 && r.bwd_p_dv_fmt == fa2.bwd_p_dv_fmt,
           "spec fa2:bwd.ds_fmt=fp32,bwd.dp_fmt=bf16: %s", err.msg);
  AA_CHECK(aa_recipe_from_spec(&r, "nope:io=fp32", &err) == AA_ENOTFOUND, "spec with an unknown preset");
  AA_CHECK(aa_recipe_from_spec(&r, "fa2:", &err) == AA_EINVAL, "spec without key=value");
  AA_CHECK(aa_recipe_from_spec(&r, "fa2:io", &err) == AA_EINVAL, "spec item without '='");
  AA_CHECK(aa_recipe_from_spec(&r, "fa2:name=x", &err) == AA_EINVAL, "spec overriding the name");
  AA_CHECK(aa_recipe_from_spec(&r, "fa2:bwd.dq_scale=none", &err) == AA_EINVAL, "spec failing the check");
  AA_CHECK(aa_recipe_from_spec(&r, "nki-bf16", &err) == AA_OK && r.bwd_d_fmt == AA_FMT_BF16 &&
               r.bwd_dq_acc_fmt == AA_FMT_BF16 && r.scale_fold == AA_SCALE_Q,
           "preset nki-bf16 through a spec");
}

/* The table stores each value through memcpy at the row's offset: an enum
   as an int, a format as aa_fmt_t, a model as aa_accum_t. A field of
   another size (an enum the compiler made a char, a field retyped) would
   be written partly or past its end, so every row's field size must be
   the size its type stores. */
static void test_field_sizes(void) {
  for (size_t i = 0; i < aa_recipe_nkeys; i++) {
    const aa_recipe_key_t *k = &aa_recipe_keys[i];
    size_t want = k->type == AA_KEY_ENUM    ? sizeof(int)
                  : k->type == AA_KEY_FMT   ? sizeof(aa_fmt_t)
                  : k->type == AA_KEY_ACCUM ? sizeof(aa_accum_t)
                                            : k->size;
    AA_CHECK(k->size == want, "key %s: field of %zu bytes, the table stores %zu", k->key, k->size, want);
  }
}

/* One rule splits every list of specs (run --variant, sweep --variants, closest --variants): a NAME:key=value
   spec runs on over commas while the next item is a key=value; a preset, a path or another NAME: starts a new one. */
static void test_spec_list(void) {
  static const char *const want[] = {"fa2:bwd.ds_fmt=fp32,fwd.p_fmt=fp32", "fa2-h100", "dir/my.recipe",
                                     "tlx:fwd.tile_k=64", "nki"};
  const char *p = "fa2:bwd.ds_fmt=fp32,fwd.p_fmt=fp32,fa2-h100,dir/my.recipe,tlx:fwd.tile_k=64,nki";
  char out[64];
  size_t i = 0;
  while (p != NULL && i < 5) {
    size_t len = aa_recipe_spec_next(out, sizeof out, &p);
    AA_CHECK(len == strlen(want[i]) && strcmp(out, want[i]) == 0, "spec list item %zu: '%s', want '%s'", i, out,
             want[i]);
    i++;
  }
  AA_CHECK(i == 5 && p == NULL, "spec list: %zu items, %s left", i, p != NULL ? p : "nothing");
  p = "fa2,,nki";
  aa_recipe_spec_next(out, sizeof out, &p);
  AA_CHECK(aa_recipe_spec_next(out, sizeof out, &p) == 0, "spec list: an empty item is not reported as empty");
  p = "fa2:bwd.ds_fmt=fp32,fwd.p_fmt=fp32";
  AA_CHECK(aa_recipe_spec_next(out, 8, &p) >= 8 && strlen(out) == 7, "spec list: a long item is not reported");
}

int main(void) {
  test_field_sizes();
  test_spec_list();
  test_roundtrip();
  test_preset_contents();
  test_parser();
  test_keys_doc();
  test_table();
  return aa_test_finish("trecipe");
}
