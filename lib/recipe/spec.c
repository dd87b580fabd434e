/* attnacc: aa_recipe_from_spec, the one grammar of a variant (preset, recipe file, NAME:key=value,..., recipe text).
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "recipe.h"

size_t aa_recipe_spec_next(char *out, size_t cap, const char **p) {
  const char *s = *p, *comma = strchr(s, ',');
  size_t len;
  while (comma != NULL && strchr(s, ':') != NULL && strchr(s, ':') < comma) {
    const char *nx = comma + 1, *eq = strchr(nx, '='), *end = strchr(nx, ',');
    size_t head = eq != NULL ? (size_t)(eq - nx) : 0;
    if (eq == NULL || (end != NULL && eq > end) || memchr(nx, ':', head) != NULL || memchr(nx, '/', head) != NULL)
      break;
    comma = end;
  }
  len = comma ? (size_t)(comma - s) : strlen(s);
  if (cap > 0) snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), s);
  *p = comma ? comma + 1 : NULL;
  return len;
}

int aa_recipe_from_spec(aa_recipe_t *out, const char *spec, aa_error_t *err) {
  if (out == NULL || spec == NULL) return aa_error_set(err, AA_EINVAL, "recipe_from_spec: NULL argument");
  size_t n = strlen(spec);
  if (n == 0) return aa_error_set(err, AA_EINVAL, "empty variant");
  const char *colon = strchr(spec, ':'), *eq = strchr(spec, '=');
  int file = colon == NULL && (strchr(spec, '/') != NULL || (n > 7 && !strcmp(spec + n - 7, ".recipe")));
  if (strchr(spec, '\n') != NULL || (!file && eq != NULL && (colon == NULL || eq < colon))) {
    /* recipe text: a line break, or a '=' before any ':' (NAME:key=value has its ':' first; a value may hold
       one, as in fwd.exp = poly:deg=3) */
    int st = aa_recipe_parse_string(out, spec, "recipe text", err);
    if (st != AA_OK) return st;
  } else if (file) {
    FILE *f = fopen(spec, "rb"); /* a file that cannot be read is the caller's mistake, not an I/O failure */
    if (f == NULL) return aa_error_set(err, AA_EINVAL, "%s: cannot read the recipe file: %s", spec, strerror(errno));
    int named = 0; /* does the file set `name` itself? (`base = fa2` alone would name it fa2) */
    char line[1024];
    while (!named && fgets(line, sizeof line, f) != NULL) {
      const char *p = line + strspn(line, " \t");
      named = !strncmp(p, "name", 4) && (p[4] == '=' || p[4] == ' ' || p[4] == '\t');
    }
    fclose(f);
    int st = aa_recipe_parse_file(out, spec, err);
    if (st != AA_OK) return st;
    if (!named) { /* the file's base name names it, so my.recipe with `base = fa2` is "my", not a second "fa2" */
      const char *b = strrchr(spec, '/') != NULL ? strrchr(spec, '/') + 1 : spec;
      size_t bn = strlen(b);
      if (bn > 7 && !strcmp(b + bn - 7, ".recipe")) bn -= 7;
      if (bn > 0 && bn < sizeof out->name) {
        memcpy(out->name, b, bn);
        out->name[bn] = '\0';
      }
    }
  } else if (colon == NULL) {
    int st = aa_recipe_preset(out, spec, err);
    if (st != AA_OK) return st;
  } else {
    char base[64], buf[1024];
    if ((size_t)(colon - spec) >= sizeof base)
      return aa_error_set(err, AA_EINVAL, "variant '%s': preset name too long", spec);
    memcpy(base, spec, (size_t)(colon - spec));
    base[colon - spec] = '\0';
    if (n >= sizeof out->name)
      return aa_error_set(err, AA_EINVAL, "variant '%s': longer than %zu characters (write a recipe file)", spec,
                          sizeof out->name - 1);
    int st = aa_recipe_preset(out, base, err);
    if (st != AA_OK) return st;
    snprintf(buf, sizeof buf, "%s", colon + 1);
    if (buf[0] == '\0') return aa_error_set(err, AA_EINVAL, "variant '%s': no key=value after ':'", spec);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
      char *eq = strchr(kv, '=');
      if (eq == NULL || eq == kv || eq[1] == '\0')
        return aa_error_set(err, AA_EINVAL, "variant '%s': '%s' is not key=value", spec, kv);
      *eq = '\0';
      if (!strcmp(kv, "base") || !strcmp(kv, "name"))
        return aa_error_set(err, AA_EINVAL, "variant '%s': key '%s' cannot be overridden in a spec", spec, kv);
      aa_error_t e;
      e.msg[0] = '\0';
      if (aa_recipe_set(out, kv, eq + 1, &e) != AA_OK)
        return aa_error_set(err, AA_EINVAL, "variant '%s': %s", spec, e.msg);
    }
    snprintf(out->name, sizeof out->name, "%s", spec);
  }
  aa_error_t e;
  e.msg[0] = '\0';
  if (aa_recipe_check(out, &e) != AA_OK) return aa_error_set(err, AA_EINVAL, "variant '%s': %s", spec, e.msg);
  return AA_OK;
}
