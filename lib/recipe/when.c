/* attnacc: conditional recipe keys (`when COND: key = value`): parsing, canonical text, matching, resolution. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe-impl.h"

static const char *const var_names[AA_WHEN_VAR_COUNT] = {"n", "n_q", "n_k", "d"};
static const char *const op_names[AA_WHEN_OP_COUNT] = {">=", ">", "<=", "<", "==", "!="};

/* One word of a condition: [start, end) of the text, blanks skipped. */
static const char *next_word(const char *s, const char **end) {
  while (isspace((unsigned char)*s))
    s++;
  const char *e = s;
  while (*e != '\0' && !isspace((unsigned char)*e))
    e++;
  *end = e;
  return s;
}

static int word_is(const char *s, const char *e, const char *w) {
  return (size_t)(e - s) == strlen(w) && !strncmp(s, w, (size_t)(e - s));
}

/* A comparison term "VAR OP INT" (blanks around OP optional, e.g. n>=32768). */
static int parse_term(aa_recipe_when_term_t *t, const char *s, const char *e, const char *cond, aa_error_t *err) {
  char buf[96];
  if ((size_t)(e - s) >= sizeof buf) return aa_error_set(err, AA_EINVAL, "condition '%s': term too long", cond);
  memcpy(buf, s, (size_t)(e - s));
  buf[e - s] = '\0';
  size_t v = strspn(buf, "abcdefghijklmnopqrstuvwxyz_");
  int var = -1;
  for (int i = 0; i < AA_WHEN_VAR_COUNT; i++)
    if (strlen(var_names[i]) == v && !strncmp(buf, var_names[i], v)) var = i;
  if (var < 0)
    return aa_error_set(
        err, AA_EINVAL,
        "condition '%s': unknown term '%s' (expected causal, dense, masked, unmasked, or n, n_q, n_k, d compared "
        "with >=, >, <=, <, ==, != to an integer)",
        cond, buf);
  char *p = buf + v;
  while (isspace((unsigned char)*p))
    p++;
  int op = -1;
  for (int i = 0; i < AA_WHEN_OP_COUNT && op < 0; i++) /* two-character operators are listed first */
    if (!strncmp(p, op_names[i], strlen(op_names[i]))) op = i;
  if (op < 0) return aa_error_set(err, AA_EINVAL, "condition '%s': term '%s' has no comparison operator", cond, buf);
  p += strlen(op_names[op]);
  while (isspace((unsigned char)*p))
    p++;
  char *end;
  errno = 0;
  unsigned long long u = *p >= '0' && *p <= '9' ? strtoull(p, &end, 10) : 0;
  if (*p < '0' || *p > '9' || errno != 0 || *end != '\0' || u > ((unsigned long long)1 << 40))
    return aa_error_set(err, AA_EINVAL, "condition '%s': term '%s' needs an integer 0..2^40", cond, buf);
  t->var = (aa_recipe_when_var_t)var;
  t->op = (aa_recipe_when_op_t)op;
  t->value = (uint64_t)u;
  return AA_OK;
}

/* A two-way word term (`causal`/`dense`, `masked`/`unmasked`) into *flag (1 for yes, 0 for no): 1 when [s, e) is
   one of the two words, *st set to an error when the condition already holds the other. */
static int flag_word(int *flag, const char *s, const char *e, const char *yes, const char *no, const char *cond,
                     int *st, aa_error_t *err) {
  if (!word_is(s, e, yes) && !word_is(s, e, no)) return 0;
  int m = word_is(s, e, yes);
  if (*flag >= 0 && *flag != m)
    *st = aa_error_set(err, AA_EINVAL, "condition '%s': both %s and %s (never true)", cond, yes, no);
  *flag = m;
  return 1;
}

/* Split "TERM and TERM ..." at the word `and`; a comparison may be written
   with blanks around its operator, so a term runs up to the next `and`. */
int aa_recipe_when_parse(aa_recipe_when_t *w, const char *cond, aa_error_t *err) {
  memset(w, 0, sizeof *w);
  w->mask = -1;
  w->masked = -1;
  const char *s = cond, *e;
  int expect_term = 1;
  for (;;) {
    s = next_word(s, &e);
    if (s == e) break;
    if (word_is(s, e, "and")) {
      if (expect_term) return aa_error_set(err, AA_EINVAL, "condition '%s': 'and' without a term before it", cond);
      expect_term = 1;
      s = e;
      continue;
    }
    if (!expect_term) return aa_error_set(err, AA_EINVAL, "condition '%s': terms must be joined by 'and'", cond);
    expect_term = 0;
    int st = AA_OK;
    if (flag_word(&w->masked, s, e, "masked", "unmasked", cond, &st, err) ||
        flag_word(&w->mask, s, e, "causal", "dense", cond, &st, err)) {
      if (st != AA_OK) return st;
      s = e;
      continue;
    }
    /* A comparison: up to the next word `and` or the end. */
    const char *t0 = s, *t1 = e;
    for (const char *q = e;;) {
      const char *qe, *qs = next_word(q, &qe);
      if (qs == qe || word_is(qs, qe, "and")) break;
      t1 = qe;
      q = qe;
    }
    if (w->nterms == AA_RECIPE_WHEN_TERMS)
      return aa_error_set(err, AA_EINVAL, "condition '%s': more than %d comparisons", cond, AA_RECIPE_WHEN_TERMS);
    st = parse_term(&w->term[w->nterms], t0, t1, cond, err);
    if (st != AA_OK) return st;
    w->nterms++;
    s = t1;
  }
  if (expect_term)
    return aa_error_set(err, AA_EINVAL, "condition '%s': %s", cond,
                        w->mask < 0 && w->masked < 0 && w->nterms == 0 ? "empty condition" : "ends with 'and'");
  return AA_OK;
}

size_t aa_recipe_when_cond_text(char *buf, size_t len, const aa_recipe_when_t *w) {
  size_t need = 0;
  const char *sep = "";
  int n;
  if (w->mask >= 0) {
    n = snprintf(buf != NULL && need < len ? buf + need : NULL, need < len ? len - need : 0, "%s",
                 w->mask ? "causal" : "dense");
    need += n > 0 ? (size_t)n : 0;
    sep = " and ";
  }
  if (w->masked >= 0) {
    n = snprintf(buf != NULL && need < len ? buf + need : NULL, need < len ? len - need : 0, "%s%s", sep,
                 w->masked ? "masked" : "unmasked");
    need += n > 0 ? (size_t)n : 0;
    sep = " and ";
  }
  for (size_t i = 0; i < w->nterms; i++) {
    n = snprintf(buf != NULL && need < len ? buf + need : NULL, need < len ? len - need : 0, "%s%s %s %llu", sep,
                 var_names[w->term[i].var], op_names[w->term[i].op], (unsigned long long)w->term[i].value);
    need += n > 0 ? (size_t)n : 0;
    sep = " and ";
  }
  if (buf != NULL && len > 0 && need >= len) buf[len - 1] = '\0';
  return need;
}

size_t aa_recipe_when_format(char *buf, size_t len, const aa_recipe_when_t *w) {
  char cond[256];
  aa_recipe_when_cond_text(cond, sizeof cond, w);
  int n = snprintf(buf, len, "when %s: %s = %s\n", cond, w->key, w->value);
  return n > 0 ? (size_t)n : 0;
}

static int compare(uint64_t a, aa_recipe_when_op_t op, uint64_t b) {
  switch (op) {
  case AA_WHEN_GE:
    return a >= b;
  case AA_WHEN_GT:
    return a > b;
  case AA_WHEN_LE:
    return a <= b;
  case AA_WHEN_LT:
    return a < b;
  case AA_WHEN_EQ:
    return a == b;
  case AA_WHEN_NE:
    return a != b;
  default:
    return 0;
  }
}

int aa_recipe_when_matches(const aa_recipe_when_t *w, const aa_recipe_case_t *c) {
  if (w->mask >= 0 && w->mask != (c->causal != 0)) return 0;
  if (w->masked >= 0 && w->masked != (c->masked != 0)) return 0;
  for (size_t i = 0; i < w->nterms; i++) {
    uint64_t x = w->term[i].var == AA_WHEN_N || w->term[i].var == AA_WHEN_NK ? c->n_k
                 : w->term[i].var == AA_WHEN_NQ                              ? c->n_q
                                                                             : c->d;
    if (!compare(x, w->term[i].op, w->term[i].value)) return 0;
  }
  return 1;
}

int aa_recipe_resolve(aa_recipe_t *out, const aa_recipe_t *r, const aa_recipe_case_t *c, aa_error_t *err) {
  if (out == NULL || r == NULL || c == NULL) return aa_error_set(err, AA_EINVAL, "recipe_resolve: NULL argument");
  if (r->nwhen > AA_RECIPE_WHEN_MAX)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': %zu conditional keys (at most %d)", r->name, r->nwhen,
                        AA_RECIPE_WHEN_MAX);
  aa_recipe_t res = *r;
  res.nwhen = 0;
  for (size_t i = 0; i < r->nwhen; i++) { /* file order: a later matching line wins */
    const aa_recipe_when_t *w = &r->when[i];
    if (!aa_recipe_when_matches(w, c)) continue;
    aa_error_t e;
    e.msg[0] = '\0';
    if (aa_recipe_set(&res, w->key, w->value, &e) != AA_OK) {
      char line[512];
      aa_recipe_when_format(line, sizeof line, w);
      line[strcspn(line, "\n")] = '\0';
      return aa_error_set(err, AA_EINVAL, "recipe '%s': '%s': %s", r->name, line, e.msg);
    }
  }
  aa_error_t e;
  e.msg[0] = '\0';
  if (aa_recipe_check(&res, &e) != AA_OK)
    return aa_error_set(err, AA_EINVAL, "recipe '%s' resolved for %s n_q=%zu n_k=%zu d=%zu: %s", r->name,
                        c->causal ? "causal" : "dense", c->n_q, c->n_k, c->d, e.msg);
  memcpy(out, &res, sizeof res);
  return AA_OK;
}
