/* attnacc: the recipe key table, aa_recipe_set (one key), aa_recipe_format (canonical text) and aa_recipe_equal. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe-impl.h"

static const char *const softmax_names[] = {"online-lse", "two-pass", "fixed-shift", "guarded", NULL};
static const char *const bwdnorm_names[] = {"lse", "recip", NULL};
static const char *const fold_names[] = {"q", "s", "exp", NULL};
static const char *const expform_names[] = {"natural", "exp2-fma", NULL};
static const char *const expimpl_names[] = {"exact", NULL};
static const char *const ckpt_names[] = {"lse", "negmax-recip", NULL};
static const char *const norm_names[] = {"divide", "reciprocal", NULL};
static const char *const dsrc_names[] = {"o-do", "p-dp", NULL};
static const char *const gscale_names[] = {"none", "tile", "end", NULL};
static const char *const kvacc_names[] = {"chain", "add", NULL};
static const char *const gqa_names[] = {"accumulate", "sum-rounded", NULL};

#define K_(name, type, field, names)                                                                                 \
  { name, type, offsetof(aa_recipe_t, field), names }

/* Order = order of aa_recipe_format output and of KEYS.md. */
const aa_recipe_key_t aa_recipe_keys[] = {
    K_("name", AA_KEY_STRING, name, NULL),
    K_("io", AA_KEY_FMT, io_fmt, NULL),
    K_("alu", AA_KEY_FMT, alu_fmt, NULL),
    K_("scale_fmt", AA_KEY_FMT, scale_fmt, NULL),
    K_("scale_fold", AA_KEY_ENUM, scale_fold, fold_names),
    K_("q_scale_fmt", AA_KEY_FMT, q_scale_fmt, NULL),
    K_("s_fmt", AA_KEY_FMT, s_fmt, NULL),
    K_("exp_form", AA_KEY_ENUM, exp_form, expform_names),
    K_("exp", AA_KEY_ENUM, exp_impl, expimpl_names),
    K_("fwd.softmax", AA_KEY_ENUM, fwd_softmax, softmax_names),
    K_("fwd.tile_q", AA_KEY_SIZE, fwd_tile_q, NULL),
    K_("fwd.tile_k", AA_KEY_SIZE, fwd_tile_k, NULL),
    K_("fwd.acc_qk", AA_KEY_ACCUM, fwd_acc_qk, NULL),
    K_("fwd.acc_pv", AA_KEY_ACCUM, fwd_acc_pv, NULL),
    K_("fwd.p_fmt", AA_KEY_FMT, fwd_p_fmt, NULL),
    K_("fwd.rowsum_fmt", AA_KEY_FMT, fwd_rowsum_fmt, NULL),
    K_("fwd.rowsum_rounded", AA_KEY_BOOL, fwd_rowsum_rounded, NULL),
    K_("fwd.rescale_threshold", AA_KEY_DOUBLE, fwd_rescale_threshold, NULL),
    K_("fwd.shift", AA_KEY_DOUBLE, fwd_shift, NULL),
    K_("fwd.guard_lo", AA_KEY_DOUBLE, fwd_guard_lo, NULL),
    K_("fwd.guard_hi", AA_KEY_DOUBLE, fwd_guard_hi, NULL),
    K_("fwd.sub_q", AA_KEY_SIZE, fwd_sub_q, NULL),
    K_("fwd.o_acc_fmt", AA_KEY_FMT, fwd_o_acc_fmt, NULL),
    K_("fwd.checkpoint", AA_KEY_ENUM, fwd_checkpoint, ckpt_names),
    K_("fwd.lse_fmt", AA_KEY_FMT, fwd_lse_fmt, NULL),
    K_("fwd.o_norm", AA_KEY_ENUM, fwd_o_norm, norm_names),
    K_("bwd.tile_q", AA_KEY_SIZE, bwd_tile_q, NULL),
    K_("bwd.tile_k", AA_KEY_SIZE, bwd_tile_k, NULL),
    K_("bwd.tile_k_short", AA_KEY_SIZE, bwd_tile_k_short, NULL),
    K_("bwd.sub_k", AA_KEY_SIZE, bwd_sub_k, NULL),
    K_("bwd.section", AA_KEY_SIZE, bwd_section, NULL),
    K_("bwd.section_per_d", AA_KEY_SIZE, bwd_section_per_d, NULL),
    K_("bwd.q_group", AA_KEY_SIZE, bwd_q_group, NULL),
    K_("bwd.d_tile", AA_KEY_SIZE, bwd_d_tile, NULL),
    K_("bwd.skip_masked", AA_KEY_BOOL, bwd_skip_masked, NULL),
    K_("bwd.norm", AA_KEY_ENUM, bwd_norm, bwdnorm_names),
    K_("bwd.do_fmt", AA_KEY_FMT, bwd_do_fmt, NULL),
    K_("bwd.acc_qk", AA_KEY_ACCUM, bwd_acc_qk, NULL),
    K_("bwd.acc_dp", AA_KEY_ACCUM, bwd_acc_dp, NULL),
    K_("bwd.acc_dv", AA_KEY_ACCUM, bwd_acc_dv, NULL),
    K_("bwd.acc_dk", AA_KEY_ACCUM, bwd_acc_dk, NULL),
    K_("bwd.acc_dq", AA_KEY_ACCUM, bwd_acc_dq, NULL),
    K_("bwd.p_dv_fmt", AA_KEY_FMT, bwd_p_dv_fmt, NULL),
    K_("bwd.p_ds_fmt", AA_KEY_FMT, bwd_p_ds_fmt, NULL),
    K_("bwd.dp_fmt", AA_KEY_FMT, bwd_dp_fmt, NULL),
    K_("bwd.d_source", AA_KEY_ENUM, bwd_d_source, dsrc_names),
    K_("bwd.d_fmt", AA_KEY_FMT, bwd_d_fmt, NULL),
    K_("bwd.ds_fmt", AA_KEY_FMT, bwd_ds_fmt, NULL),
    K_("bwd.ds_scale", AA_KEY_BOOL, bwd_ds_scale, NULL),
    K_("bwd.dq_acc_fmt", AA_KEY_FMT, bwd_dq_acc_fmt, NULL),
    K_("bwd.dq_scale", AA_KEY_ENUM, bwd_dq_scale, gscale_names),
    K_("bwd.dk_scale", AA_KEY_ENUM, bwd_dk_scale, gscale_names),
    K_("bwd.dq_section_fmt", AA_KEY_FMT, bwd_dq_section_fmt, NULL),
    K_("bwd.dkv_acc_fmt", AA_KEY_FMT, bwd_dkv_acc_fmt, NULL),
    K_("bwd.dkv_accumulate", AA_KEY_ENUM, bwd_dkv_accumulate, kvacc_names),
    K_("bwd.dsinks_fmt", AA_KEY_FMT, bwd_dsinks_fmt, NULL),
    K_("bwd.gqa_reduce", AA_KEY_ENUM, bwd_gqa_reduce, gqa_names),
};
const size_t aa_recipe_nkeys = sizeof aa_recipe_keys / sizeof aa_recipe_keys[0];

static int parse_bool(int *out, const char *v) {
  if (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "true")) {
    *out = 1;
    return 0;
  }
  if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "false")) {
    *out = 0;
    return 0;
  }
  return -1;
}

static void list_names(char *buf, size_t len, const char *const *names) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; names[i] != NULL && used < len; i++) {
    int w = snprintf(buf + used, len - used, "%s%s", i ? "|" : "", names[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

int aa_recipe_set(aa_recipe_t *r, const char *key, const char *value, aa_error_t *err) {
  if (r == NULL || key == NULL || value == NULL) return aa_error_set(err, AA_EINVAL, "recipe_set: NULL argument");
  if (!strcmp(key, "base")) {
    aa_recipe_t tmp;
    int st = aa_recipe_preset(&tmp, value, err);
    if (st != AA_OK) return aa_error_set(err, AA_EINVAL, "key 'base': unknown preset '%s'", value);
    *r = tmp;
    return AA_OK;
  }
  if (!strncmp(key, "dropout_", 8)) {
    /* The dropout scheme and its parameters live in lib/dropout.h. */
    int st = aa_dropout_set(&r->dropout, key + 8, value, err);
    if (st == AA_ENOTFOUND) return aa_error_set(err, AA_EINVAL, "unknown key '%s' (value '%s')", key, value);
    return st;
  }
  if (!strcmp(key, "softcap.tanh")) {
    if (strcmp(value, "exact") != 0 && strcmp(value, "approx") != 0)
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected exact|approx)", key, value);
    r->softcap_tanh = !strcmp(value, "approx") ? AA_TANH_APPROX : AA_TANH_EXACT;
    return AA_OK;
  }
  if (!strcmp(key, "alibi.causal")) {
    if (strcmp(value, "abs") != 0 && strcmp(value, "col") != 0)
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected abs|col)", key, value);
    r->alibi_causal_col = !strcmp(value, "col");
    return AA_OK;
  }
  if (!strcmp(key, "fwd.k_order") || !strcmp(key, "bwd.q_order")) {
    if (strcmp(value, "asc") != 0 && strcmp(value, "desc") != 0)
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected asc|desc)", key, value);
    *(key[0] == 'f' ? &r->fwd_k_desc : &r->bwd_q_desc) = !strcmp(value, "desc");
    return AA_OK;
  }
  if (!strcmp(key, "fwd.splits") || !strcmp(key, "fwd.split_sms")) {
    char *end;
    errno = 0;
    unsigned long long u = strtoull(value, &end, 10);
    if (value[0] < '0' || value[0] > '9' || errno != 0 || *end != '\0' || u > 4096)
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected an integer 0..4096)", key, value);
    *(!strcmp(key, "fwd.split_sms") ? &r->fwd_split_sms : &r->fwd_splits) = (size_t)u;
    return AA_OK;
  }
  if (!strcmp(key, "fwd.exp") || !strcmp(key, "bwd.exp")) {
    /* The weight's exp construction, a lib/exp.h spec (KEYS.md). */
    aa_exp_t e;
    aa_error_t e2;
    e2.msg[0] = '\0';
    if (aa_exp_parse(&e, value, &e2) != AA_OK)
      return aa_error_set(err, AA_EINVAL, "key '%s': bad construction '%s' (%s)", key, value, e2.msg);
    *(!strcmp(key, "fwd.exp") ? &r->fwd_exp : &r->bwd_exp) = e;
    return AA_OK;
  }
  if (!strcmp(key, "mixed_precision")) {
    int on;
    if (parse_bool(&on, value) != 0)
      return aa_error_set(err, AA_EINVAL, "key 'mixed_precision': bad value '%s' (expected on|off)", value);
    /* seed 000 L101: dy_o_sum is float32 "when mixed_precision"; REFERENCES
       section 3: dQ reduced per K tile in the mixed dtype (fp32 only with
       mixed_precision); the dK/dV section accumulators and dsinks_local use
       the same mixed dtype. */
    aa_fmt_t f = on ? AA_FMT_FP32 : r->io_fmt;
    r->bwd_d_fmt = r->bwd_dq_acc_fmt = r->bwd_dkv_acc_fmt = r->bwd_dsinks_fmt = f;
    return AA_OK;
  }
  if (!strncmp(key, "dq_reduce", 9) && (key[9] == '\0' || key[9] == '_')) {
    /* The dQ reduction strategy and its parameters (lib/reduce.h). */
    const char *sub = key[9] == '\0' ? "kind" : key + 10;
    if (!strcmp(sub, "add_fmt") || !strcmp(sub, "acc_fmt") || !strcmp(sub, "section") || !strcmp(sub, "store_fmt"))
      return aa_error_set(err, AA_EINVAL,
                          "key '%s': set by the pipeline (alu, bwd.dq_acc_fmt, bwd.section, bwd.dq_section_fmt)",
                          key);
    int st = aa_reduce_set(&r->bwd_dq_reduce, sub, value, err);
    if (st == AA_ENOTFOUND) return aa_error_set(err, AA_EINVAL, "unknown key '%s' (value '%s')", key, value);
    return st;
  }
  for (size_t i = 0; i < aa_recipe_nkeys; i++) {
    const aa_recipe_key_t *k = &aa_recipe_keys[i];
    if (strcmp(k->key, key) != 0) continue;
    char *field = (char *)r + k->offset;
    switch (k->type) {
    case AA_KEY_STRING: {
      size_t n = strlen(value);
      if (n >= sizeof r->name)
        return aa_error_set(err, AA_EINVAL, "key '%s': value '%s' longer than %zu characters", key, value,
                            sizeof r->name - 1);
      memcpy(field, value, n + 1);
      return AA_OK;
    }
    case AA_KEY_FMT: {
      aa_fmt_t f;
      if (aa_fmt_from_name(&f, value) != AA_OK)
        return aa_error_set(err, AA_EINVAL, "key '%s': unknown format '%s' (expected bf16|fp16|fp32|fp64|e4m3|e5m2)",
                            key, value);
      memcpy(field, &f, sizeof f);
      return AA_OK;
    }
    case AA_KEY_ACCUM: {
      aa_accum_t a;
      if (aa_accum_from_name(&a, value) != AA_OK)
        return aa_error_set(err, AA_EINVAL, "key '%s': unknown accumulation model '%s'", key, value);
      memcpy(field, &a, sizeof a);
      return AA_OK;
    }
    case AA_KEY_ENUM: {
      for (int j = 0; k->names[j] != NULL; j++)
        if (!strcmp(k->names[j], value)) {
          memcpy(field, &j, sizeof j);
          return AA_OK;
        }
      char opts[256];
      list_names(opts, sizeof opts, k->names);
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected %s)", key, value, opts);
    }
    case AA_KEY_SIZE: {
      char *end;
      errno = 0;
      if (value[0] < '0' || value[0] > '9') goto bad_number;
      unsigned long long u = strtoull(value, &end, 10);
      if (errno != 0 || *end != '\0' || u > (unsigned long long)(1u << 30)) goto bad_number;
      size_t s = (size_t)u;
      memcpy(field, &s, sizeof s);
      return AA_OK;
    bad_number:
      return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected an integer 0..2^30)", key, value);
    }
    case AA_KEY_DOUBLE: {
      char *end;
      errno = 0;
      double d = strtod(value, &end);
      if (errno != 0 || end == value || *end != '\0' || isnan(d))
        return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected a number)", key, value);
      memcpy(field, &d, sizeof d);
      return AA_OK;
    }
    case AA_KEY_BOOL: {
      int b;
      if (parse_bool(&b, value) != 0)
        return aa_error_set(err, AA_EINVAL, "key '%s': bad value '%s' (expected on|off)", key, value);
      memcpy(field, &b, sizeof b);
      return AA_OK;
    }
    }
  }
  return aa_error_set(err, AA_EINVAL, "unknown key '%s' (value '%s')", key, value);
}

/* Text of one field's value (shared by format and equal). */
static void value_text(char *buf, size_t len, const aa_recipe_key_t *k, const aa_recipe_t *r) {
  const char *field = (const char *)r + k->offset;
  switch (k->type) {
  case AA_KEY_STRING:
    snprintf(buf, len, "%s", field);
    break;
  case AA_KEY_FMT: {
    aa_fmt_t f;
    memcpy(&f, field, sizeof f);
    const aa_fmt_info_t *info = aa_fmt_info(f);
    snprintf(buf, len, "%s", info != NULL ? info->name : "?");
    break;
  }
  case AA_KEY_ACCUM: {
    aa_accum_t a;
    memcpy(&a, field, sizeof a);
    const char *n = aa_accum_name(a);
    snprintf(buf, len, "%s", n != NULL ? n : "?");
    break;
  }
  case AA_KEY_ENUM: {
    int j, cnt = 0;
    memcpy(&j, field, sizeof j);
    while (k->names[cnt] != NULL)
      cnt++;
    snprintf(buf, len, "%s", j >= 0 && j < cnt ? k->names[j] : "?");
    break;
  }
  case AA_KEY_SIZE: {
    size_t s;
    memcpy(&s, field, sizeof s);
    snprintf(buf, len, "%zu", s);
    break;
  }
  case AA_KEY_DOUBLE: {
    double d;
    memcpy(&d, field, sizeof d);
    if (isinf(d))
      snprintf(buf, len, "%s", d > 0 ? "inf" : "-inf");
    else
      snprintf(buf, len, "%.17g", d);
    break;
  }
  case AA_KEY_BOOL: {
    int b;
    memcpy(&b, field, sizeof b);
    snprintf(buf, len, "%s", b ? "on" : "off");
    break;
  }
  }
}

size_t aa_recipe_format(char *buf, size_t len, const aa_recipe_t *r) {
  size_t need = 0;
  char val[96];
  for (size_t i = 0; i < aa_recipe_nkeys; i++) {
    value_text(val, sizeof val, &aa_recipe_keys[i], r);
    int w = snprintf(buf != NULL && need < len ? buf + need : NULL, buf != NULL && need < len ? len - need : 0,
                     "%s = %s\n", aa_recipe_keys[i].key, val);
    if (w > 0) need += (size_t)w;
  }
  if (r->dropout.scheme != AA_DROPOUT_NONE) {
    /* Only when on, so that the text (and hashes) of dropout-free recipes
       stay as they were. */
    size_t w = aa_dropout_format(buf != NULL && need < len ? buf + need : NULL,
                                 buf != NULL && need < len ? len - need : 0, &r->dropout, "dropout_");
    need += w;
  }
  if (r->bwd_dq_reduce.kind != AA_REDUCE_FP32_ORDERED) {
    /* Only when not the default fp32-ordered, so that the text (and
       hashes) of recipes that reduce dQ in order stay as they were. */
    need +=
        aa_reduce_format(buf != NULL && need < len ? buf + need : NULL, buf != NULL && need < len ? len - need : 0,
                         &r->bwd_dq_reduce, "dq_reduce_", AA_REDUCE_FMT_USED | AA_REDUCE_FMT_PIPELINE);
  }
  if (r->fwd_k_desc || r->fwd_splits != 0 || r->fwd_split_sms != 0 || r->bwd_q_desc) {
    /* Only when not the defaults, like the dropout and dq_reduce keys. */
    int w = snprintf(buf != NULL && need < len ? buf + need : NULL, buf != NULL && need < len ? len - need : 0,
                     "fwd.k_order = %s\nfwd.splits = %zu\nfwd.split_sms = %zu\nbwd.q_order = %s\n",
                     r->fwd_k_desc ? "desc" : "asc", r->fwd_splits, r->fwd_split_sms, r->bwd_q_desc ? "desc" : "asc");
    if (w > 0) need += (size_t)w;
  }
  if (!aa_recipe_exp_is_default(&r->fwd_exp) || !aa_recipe_exp_is_default(&r->bwd_exp)) {
    /* Only when not `exact`, like the dropout and dq_reduce keys. */
    char fe[160], be[160];
    aa_exp_describe(fe, sizeof fe, &r->fwd_exp);
    aa_exp_describe(be, sizeof be, &r->bwd_exp);
    int w = snprintf(buf != NULL && need < len ? buf + need : NULL, buf != NULL && need < len ? len - need : 0,
                     "fwd.exp = %s\nbwd.exp = %s\n", fe, be);
    if (w > 0) need += (size_t)w;
  }
  if (r->softcap_tanh != AA_TANH_EXACT) { /* only when not exact, like the dropout and dq_reduce keys */
    int w = snprintf(buf != NULL && need < len ? buf + need : NULL, buf != NULL && need < len ? len - need : 0,
                     "softcap.tanh = approx\n");
    if (w > 0) need += (size_t)w;
  }
  if (r->alibi_causal_col) { /* only when col */
    int w = snprintf(buf != NULL && need < len ? buf + need : NULL, buf != NULL && need < len ? len - need : 0,
                     "alibi.causal = col\n");
    if (w > 0) need += (size_t)w;
  }
  if (buf != NULL && len > 0 && need >= len) buf[len - 1] = '\0';
  return need;
}

int aa_recipe_exp_is_default(const aa_exp_t *e) {
  aa_exp_t def;
  char a[160], b[160];
  if (e->kind != AA_EXP_EXACT) return 0;
  aa_exp_init(&def, "exact", NULL);
  aa_exp_describe(a, sizeof a, e);
  aa_exp_describe(b, sizeof b, &def);
  return !strcmp(a, b);
}

int aa_recipe_equal(const aa_recipe_t *a, const aa_recipe_t *b) {
  char va[96], vb[96];
  for (size_t i = 1; i < aa_recipe_nkeys; i++) { /* key 0 is the name */
    value_text(va, sizeof va, &aa_recipe_keys[i], a);
    value_text(vb, sizeof vb, &aa_recipe_keys[i], b);
    if (strcmp(va, vb) != 0) return 0;
    if (aa_recipe_keys[i].type == AA_KEY_DOUBLE &&
        memcmp((const char *)a + aa_recipe_keys[i].offset, (const char *)b + aa_recipe_keys[i].offset,
               sizeof(double)) != 0)
      return 0;
  }
  if (a->dropout.scheme != b->dropout.scheme) return 0;
  if (a->dropout.scheme != AA_DROPOUT_NONE) {
    char da[512], db[512];
    aa_dropout_format(da, sizeof da, &a->dropout, "");
    aa_dropout_format(db, sizeof db, &b->dropout, "");
    if (strcmp(da, db) != 0 || memcmp(&a->dropout.p, &b->dropout.p, sizeof(double)) != 0) return 0;
  }
  if (!aa_reduce_equal(&a->bwd_dq_reduce, &b->bwd_dq_reduce)) return 0;
  if (a->fwd_k_desc != b->fwd_k_desc || a->fwd_splits != b->fwd_splits || a->fwd_split_sms != b->fwd_split_sms ||
      a->bwd_q_desc != b->bwd_q_desc || a->softcap_tanh != b->softcap_tanh ||
      a->alibi_causal_col != b->alibi_causal_col)
    return 0;
  {
    char ea[160], eb[160];
    aa_exp_describe(ea, sizeof ea, &a->fwd_exp);
    aa_exp_describe(eb, sizeof eb, &b->fwd_exp);
    if (strcmp(ea, eb) != 0) return 0;
    aa_exp_describe(ea, sizeof ea, &a->bwd_exp);
    aa_exp_describe(eb, sizeof eb, &b->bwd_exp);
    if (strcmp(ea, eb) != 0) return 0;
  }
  return 1;
}
