/* attnacc: tests of the recipe module: presets, key setting, format/parse round trip, parser errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"
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

int main(void) {
  test_roundtrip();
  test_preset_contents();
  test_parser();
  return aa_test_finish("trecipe");
}
