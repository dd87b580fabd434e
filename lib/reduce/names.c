/* attnacc: reduce strategy names, defaults, parameter parsing, canonical text, checks and equality. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce-impl.h"

static const char *const kind_names[AA_REDUCE_COUNT] = {"fp32-ordered",      "fp32-ordered-desc", "fp32-atomic",
                                                        "fp32-splits",       "bf16-pair",         "fixed",
                                                        "section-roundtrip", "fp32-jitter"};
static const char *const pair_names[AA_PAIR_COUNT] = {"tree", "chain"};
static const char *const split_names[AA_SPLIT_COUNT] = {"strided", "contiguous"};

void aa_reduce_default(aa_reduce_t *out) {
  memset(out, 0, sizeof *out);
  out->kind = AA_REDUCE_FP32_ORDERED;
  out->add_fmt = AA_FMT_FP32;
  out->acc_fmt = AA_FMT_FP32;
  out->order_seed = 0;
  out->splits = 1;
  out->split_layout = AA_SPLIT_STRIDED;
  out->pair = AA_PAIR_TREE;
  out->scale_exp = 16;
  out->width = 32;
  out->section = 0;
  out->store_fmt = AA_FMT_BF16;
}

const char *aa_reduce_kind_name(aa_reduce_kind_t kind) {
  return (unsigned)kind < AA_REDUCE_COUNT ? kind_names[kind] : "?";
}
const char *aa_reduce_pair_name(aa_reduce_pair_t p) {
  return (unsigned)p < AA_PAIR_COUNT ? pair_names[p] : "?";
}
const char *aa_reduce_split_name(aa_reduce_split_t s) {
  return (unsigned)s < AA_SPLIT_COUNT ? split_names[s] : "?";
}

int aa_reduce_kind_from_name(aa_reduce_kind_t *out, const char *name) {
  int i = aa_name_index(name, kind_names, AA_REDUCE_COUNT);
  if (i < 0) return AA_ENOTFOUND;
  *out = (aa_reduce_kind_t)i;
  return AA_OK;
}

int aa_reduce_set(aa_reduce_t *s, const char *key, const char *value, aa_error_t *err) {
  uint64_t u;
  long l;
  int i;
  if (key == NULL || value == NULL) return aa_error_set(err, AA_EINVAL, "dq_reduce: missing key or value");
#define BAD() return aa_error_set(err, AA_EINVAL, "dq_reduce_%s: invalid value '%s'", key, value)
  if (!strcmp(key, "kind")) {
    aa_reduce_kind_t k;
    if (aa_reduce_kind_from_name(&k, value) != AA_OK)
      return aa_error_set(err, AA_EINVAL,
                          "dq_reduce: unknown strategy '%s' (fp32-ordered, fp32-ordered-desc, fp32-atomic, "
                          "fp32-splits, bf16-pair, fixed, section-roundtrip, fp32-jitter)",
                          value);
    s->kind = k;
  } else if (!strcmp(key, "order_seed")) {
    if (!aa_parse_u64(&u, value)) BAD();
    s->order_seed = u;
  } else if (!strcmp(key, "swap_prob")) {
    char *end;
    double p;
    errno = 0;
    p = strtod(value, &end);
    if (end == value || *end != '\0' || errno || !(p >= 0 && p <= 0.5)) BAD();
    s->swap_prob = p;
  } else if (!strcmp(key, "splits")) {
    if (!aa_parse_u64(&u, value) || u < 1 || u > 65536) BAD();
    s->splits = (unsigned)u;
  } else if (!strcmp(key, "split_layout")) {
    if ((i = aa_name_index(value, split_names, AA_SPLIT_COUNT)) < 0) BAD();
    s->split_layout = (aa_reduce_split_t)i;
  } else if (!strcmp(key, "pair")) {
    if ((i = aa_name_index(value, pair_names, AA_PAIR_COUNT)) < 0) BAD();
    s->pair = (aa_reduce_pair_t)i;
  } else if (!strcmp(key, "scale_exp")) {
    if (!aa_parse_long(&l, value) || l < -200 || l > 200) BAD();
    s->scale_exp = (int)l;
  } else if (!strcmp(key, "width")) {
    if (!aa_parse_u64(&u, value) || u < 2 || u > 32) BAD();
    s->width = (unsigned)u;
  } else if (!strcmp(key, "section")) {
    if (!aa_parse_u64(&u, value)) BAD();
    s->section = (size_t)u;
  } else if (!strcmp(key, "probe")) {
    if (!strcmp(value, "on") || !strcmp(value, "1"))
      s->probe = 1;
    else if (!strcmp(value, "off") || !strcmp(value, "0"))
      s->probe = 0;
    else
      BAD();
  } else if (!strcmp(key, "store_fmt") || !strcmp(key, "add_fmt") || !strcmp(key, "acc_fmt")) {
    aa_fmt_t f;
    if (aa_fmt_from_name(&f, value) != AA_OK) BAD();
    if (key[1] == 't')
      s->store_fmt = f;
    else if (key[1] == 'd')
      s->add_fmt = f;
    else
      s->acc_fmt = f;
  } else {
    return aa_error_set(err, AA_ENOTFOUND, "dq_reduce: unknown parameter '%s'", key);
  }
#undef BAD
  return AA_OK;
}

size_t aa_reduce_format(char *buf, size_t len, const aa_reduce_t *s, const char *prefix, unsigned flags) {
  char head[64];
  size_t need = 0, pl = strlen(prefix);
  int used = (flags & AA_REDUCE_FMT_USED) != 0, arith = !(flags & AA_REDUCE_FMT_PIPELINE);
  aa_reduce_kind_t k = s->kind;
  if (pl >= sizeof head) pl = sizeof head - 1;
  memcpy(head, prefix, pl);
  head[pl] = '\0';
  if (pl > 0 && head[pl - 1] == '_') head[pl - 1] = '\0';
#define PUT(...)                                                                                                     \
  do {                                                                                                               \
    int w_ = snprintf(buf != NULL && need < len ? buf + need : NULL, buf != NULL && need < len ? len - need : 0,     \
                      __VA_ARGS__);                                                                                  \
    if (w_ > 0) need += (size_t)w_;                                                                                  \
  } while (0)
  PUT("%s = %s\n", head, aa_reduce_kind_name(k));
  if (!used || k == AA_REDUCE_FP32_ATOMIC || k == AA_REDUCE_FP32_JITTER)
    PUT("%sorder_seed = %" PRIu64 "\n", prefix, s->order_seed);
  if (k == AA_REDUCE_FP32_JITTER) { /* only here: the text of every other strategy stays as it was */
    char num[32];
    snprintf(num, sizeof num, "%.15g", s->swap_prob);
    if (strtod(num, NULL) != s->swap_prob) snprintf(num, sizeof num, "%.17g", s->swap_prob);
    PUT("%sswap_prob = %s\n", prefix, num);
  }
  if (!used || k == AA_REDUCE_FP32_SPLITS) {
    PUT("%ssplits = %u\n", prefix, s->splits);
    PUT("%ssplit_layout = %s\n", prefix, aa_reduce_split_name(s->split_layout));
  }
  if (!used || k == AA_REDUCE_BF16_PAIR) PUT("%spair = %s\n", prefix, aa_reduce_pair_name(s->pair));
  if (!used || k == AA_REDUCE_FIXED) {
    PUT("%sscale_exp = %d\n", prefix, s->scale_exp);
    PUT("%swidth = %u\n", prefix, s->width);
    if (!used || s->probe) PUT("%sprobe = %s\n", prefix, s->probe ? "on" : "off");
  }
  if (arith && (!used || k == AA_REDUCE_SECTION_ROUNDTRIP)) {
    PUT("%ssection = %zu\n", prefix, s->section);
    PUT("%sstore_fmt = %s\n", prefix, aa_fmt_info(s->store_fmt)->name);
  }
  if (arith) {
    PUT("%sadd_fmt = %s\n", prefix, aa_fmt_info(s->add_fmt)->name);
    PUT("%sacc_fmt = %s\n", prefix, aa_fmt_info(s->acc_fmt)->name);
  }
#undef PUT
  if (buf != NULL && len > 0 && need >= len) buf[len - 1] = '\0';
  return need;
}

int aa_reduce_check(const aa_reduce_t *s, aa_error_t *err) {
  if ((unsigned)s->kind >= AA_REDUCE_COUNT)
    return aa_error_set(err, AA_EINVAL, "dq_reduce: invalid kind %d", s->kind);
  if ((unsigned)s->add_fmt >= AA_FMT_COUNT || (unsigned)s->acc_fmt >= AA_FMT_COUNT ||
      (unsigned)s->store_fmt >= AA_FMT_COUNT)
    return aa_error_set(err, AA_EINVAL, "dq_reduce: invalid format");
  if (s->splits < 1) return aa_error_set(err, AA_EINVAL, "dq_reduce_splits must be >= 1");
  if ((unsigned)s->split_layout >= AA_SPLIT_COUNT || (unsigned)s->pair >= AA_PAIR_COUNT)
    return aa_error_set(err, AA_EINVAL, "dq_reduce: invalid split_layout or pair");
  if (s->width < 2 || s->width > 32)
    return aa_error_set(err, AA_EINVAL, "dq_reduce_width = %u: must be in 2..32", s->width);
  if (s->scale_exp < -200 || s->scale_exp > 200)
    return aa_error_set(err, AA_EINVAL, "dq_reduce_scale_exp = %d: must be in -200..200", s->scale_exp);
  if (!(s->swap_prob >= 0 && s->swap_prob <= 0.5))
    return aa_error_set(err, AA_EINVAL, "dq_reduce_swap_prob = %g: must be in 0..0.5", s->swap_prob);
  return AA_OK;
}

int aa_reduce_equal(const aa_reduce_t *a, const aa_reduce_t *b) {
  if (a->kind != b->kind || a->add_fmt != b->add_fmt || a->acc_fmt != b->acc_fmt) return 0;
  switch (a->kind) {
  case AA_REDUCE_FP32_ATOMIC:
    return a->order_seed == b->order_seed;
  case AA_REDUCE_FP32_JITTER:
    return a->order_seed == b->order_seed && a->swap_prob == b->swap_prob;
  case AA_REDUCE_FP32_SPLITS:
    return a->splits == b->splits && (a->splits == 1 || a->split_layout == b->split_layout);
  case AA_REDUCE_BF16_PAIR:
    return a->pair == b->pair;
  case AA_REDUCE_FIXED:
    return a->scale_exp == b->scale_exp && a->width == b->width;
  case AA_REDUCE_SECTION_ROUNDTRIP:
    return a->section == b->section && a->store_fmt == b->store_fmt;
  default:
    return 1;
  }
}

void aa_reduce_stats_add(aa_reduce_stats_t *to, const aa_reduce_stats_t *from) {
  to->tiles += from->tiles;
  to->partials += from->partials;
  to->conv_failures += from->conv_failures;
  to->sum_failures += from->sum_failures;
  to->budget_failures += from->budget_failures;
  to->fp64_recomputes += from->fp64_recomputes;
  to->probe_tiles += from->probe_tiles;
  for (int k = 0; k < AA_REDUCE_PROBE; k++) {
    to->probe_fail[k] += from->probe_fail[k];
    to->probe_err2[k] += from->probe_err2[k];
  }
  to->probe_ref2 += from->probe_ref2;
}
