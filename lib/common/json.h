/* attnacc: JSON values built with libjansson, for the library's results.jsonl and the command's JSON (internal,
 * not installed): one place for string sanitising, number format and text. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_COMMON_JSON_H
#define AA_COMMON_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A string (NULL: null). Text that is not valid UTF-8 (a path or recipe
   name given as raw bytes) has each byte that does not start a valid
   sequence replaced by U+FFFD, so the document stays valid JSON; quotes,
   backslashes and control characters are escaped by jansson. */
json_t *aa_json_str(const char *s);
/* A number: integers within +-2^53 as JSON integers, others as reals of
   17 significant digits; NaN and infinities as null (JSON has none). */
json_t *aa_json_num(double x);
/* An unsigned integer (a seed, a count): a JSON integer up to 2^63 - 1,
   beyond that its decimal text as a string (jansson's integers are signed
   64-bit). */
json_t *aa_json_u64(uint64_t x);
json_t *aa_json_bool(int b);
/* Set obj[key] = v, taking v's reference; returns 0, or -1 when obj or v is
   NULL (out of memory), so callers can OR the results and test once. */
int aa_json_set(json_t *obj, const char *key, json_t *v);
/* Append v to the array arr, taking v's reference; 0 or -1 as above. */
int aa_json_push(json_t *arr, json_t *v);
/* The document as text (indent 2 spaces and a final newline; compact 1:
   one line, for JSON lines), malloc'd; NULL when out of memory. */
char *aa_json_text(const json_t *doc, int compact, size_t *len);

#endif
