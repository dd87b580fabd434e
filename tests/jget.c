/* attnacc: test helper: validate a JSON file with jansson and print the values at dotted paths
 * (runs.0.outputs.dq.rel_l2). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value at path (keys and array indices separated by dots), or NULL. */
static json_t *at(json_t *v, const char *path) {
  char *p = strdup(path), *save = NULL;
  for (char *k = strtok_r(p, ".", &save); k != NULL && v != NULL; k = strtok_r(NULL, ".", &save)) {
    if (json_is_array(v)) {
      char *end;
      unsigned long i = strtoul(k, &end, 10);
      v = *end == '\0' ? json_array_get(v, i) : NULL;
    } else {
      v = json_object_get(v, k);
    }
  }
  free(p);
  return v;
}

static void print(const json_t *v) {
  char *s;
  switch (json_typeof(v)) {
  case JSON_STRING:
    fwrite(json_string_value(v), 1, json_string_length(v), stdout);
    break;
  case JSON_INTEGER:
    printf("%lld", (long long)json_integer_value(v));
    break;
  case JSON_REAL:
    printf("%.17g", json_real_value(v));
    break;
  default: /* objects, arrays, true, false, null as compact JSON */
    s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    fputs(s != NULL ? s : "?", stdout);
    free(s);
  }
  putchar('\n');
}

int main(int argc, char **argv) {
  json_error_t e;
  json_t *doc;
  int rc = 0;
  if (argc < 2) {
    fprintf(stderr,
            "usage: jget FILE|- [PATH...]: exit 2 when FILE is not one valid JSON text, 1 when a PATH is absent\n");
    return 2;
  }
  doc = strcmp(argv[1], "-") == 0 ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &e)
                                  : json_load_file(argv[1], JSON_REJECT_DUPLICATES, &e);
  if (doc == NULL) {
    fprintf(stderr, "jget: %s: line %d column %d: %s\n", argv[1], e.line, e.column, e.text);
    return 2;
  }
  for (int i = 2; i < argc; i++) {
    json_t *v = at(doc, argv[i]);
    if (v == NULL) {
      fprintf(stderr, "jget: %s: no %s\n", argv[1], argv[i]);
      rc = 1;
      continue;
    }
    print(v);
  }
  json_decref(doc);
  return rc;
}
