/* attnacc: the table of emulated formats and the name lookups for formats and rounding modes. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <ctype.h>
#include <stddef.h>

#include "common.h"
#include "fmt-impl.h"

/* prec counts the implicit bit; emin is the exponent of the smallest normal,
   emax that of the largest finite binade. e4m3 (OCP "fn") reuses the top
   exponent field for finite values: max = 1.75 * 2^8 = 448; e5m2 is
   IEEE-like: max = 1.75 * 2^15 = 57344. */
const aa_fmt_info_t aa_fmt_infos_[AA_FMT_COUNT] = {
    {"bf16", 16, 8, -126, 127, 1, 0x1.fep+127},
    {"fp16", 16, 11, -14, 15, 1, 0x1.ffcp+15},
    {"fp32", 32, 24, -126, 127, 1, 0x1.fffffep+127},
    {"fp64", 64, 53, -1022, 1023, 1, 0x1.fffffffffffffp+1023},
    {"e4m3", 8, 4, -6, 8, 0, 0x1.cp+8},
    {"e5m2", 8, 3, -14, 15, 1, 0x1.cp+15},
};

const int aa_fmt_bias_[AA_FMT_COUNT] = {127, 15, 127, 1023, 7, 15};

const aa_fmt_info_t *aa_fmt_info(aa_fmt_t fmt) {
  if ((int)fmt < 0 || fmt >= AA_FMT_COUNT) return NULL;
  return &aa_fmt_infos_[fmt];
}

/* ASCII case-insensitive equality (the C locale's tolower is enough here). */
static int name_eq(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return *a == *b;
}

int aa_fmt_from_name(aa_fmt_t *out, const char *name) {
  static const struct {
    const char *name;
    aa_fmt_t fmt;
  } names[] = {{"bf16", AA_FMT_BF16},   {"bfloat16", AA_FMT_BF16}, {"fp16", AA_FMT_FP16},
               {"half", AA_FMT_FP16},   {"binary16", AA_FMT_FP16}, {"fp32", AA_FMT_FP32},
               {"single", AA_FMT_FP32}, {"binary32", AA_FMT_FP32}, {"fp64", AA_FMT_FP64},
               {"double", AA_FMT_FP64}, {"binary64", AA_FMT_FP64}, {"e4m3", AA_FMT_E4M3},
               {"e4m3fn", AA_FMT_E4M3}, {"fp8e4m3", AA_FMT_E4M3},  {"fp8_e4m3", AA_FMT_E4M3},
               {"e5m2", AA_FMT_E5M2},   {"fp8e5m2", AA_FMT_E5M2},  {"fp8_e5m2", AA_FMT_E5M2}};
  if (name == NULL) return AA_ENOTFOUND;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (name_eq(name, names[i].name)) {
      if (out) *out = names[i].fmt;
      return AA_OK;
    }
  return AA_ENOTFOUND;
}

static const char *const rnd_names[AA_RND_COUNT] = {"rne", "rz", "ru", "rd", "ro", "rs"};

const char *aa_rnd_name(aa_rnd_t rnd) {
  if ((int)rnd < 0 || rnd >= AA_RND_COUNT) return "?";
  return rnd_names[rnd];
}

int aa_rnd_from_name(aa_rnd_t *out, const char *name) {
  static const struct {
    const char *name;
    aa_rnd_t rnd;
  } alias[] = {{"ne", AA_RND_NE},       {"nearest", AA_RND_NE}, {"z", AA_RND_Z}, {"zero", AA_RND_Z},
               {"u", AA_RND_U},         {"up", AA_RND_U},       {"d", AA_RND_D}, {"down", AA_RND_D},
               {"o", AA_RND_O},         {"odd", AA_RND_O},      {"s", AA_RND_S}, {"sr", AA_RND_S},
               {"stochastic", AA_RND_S}};
  if (name == NULL) return AA_ENOTFOUND;
  for (int i = 0; i < AA_RND_COUNT; i++)
    if (name_eq(name, rnd_names[i])) {
      if (out) *out = (aa_rnd_t)i;
      return AA_OK;
    }
  for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
    if (name_eq(name, alias[i].name)) {
      if (out) *out = alias[i].rnd;
      return AA_OK;
    }
  return AA_ENOTFOUND;
}
