/* attnacc: growable string and number sets of the report (recipes, masks, lengths, seeds): no cap, nothing dropped.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static int grow(void **v, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? 2 * *cap : 16;
  while (nc < need)
    nc *= 2;
  void *p = realloc(*v, nc * elem);
  if (p == NULL) return -1;
  *v = p;
  *cap = nc;
  return 0;
}

int rp_strs_find(const rp_strs_t *s, const char *x) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i], x) == 0) return (int)i;
  return -1;
}

int rp_strs_add(rp_strs_t *s, const char *x) {
  int i = rp_strs_find(s, x);
  char *copy;
  if (i >= 0) return i;
  if (grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v) != 0 || (copy = strdup(x)) == NULL) {
    s->oom = 1;
    return -1;
  }
  s->v[s->n] = copy;
  return (int)s->n++;
}

void rp_strs_free(rp_strs_t *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

int rp_nums_find(const rp_nums_t *s, double x) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == x) return (int)i;
  return -1;
}

int rp_nums_add(rp_nums_t *s, double x) {
  int f = rp_nums_find(s, x);
  if (f >= 0) return f;
  if (grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v) != 0) {
    s->oom = 1;
    return -1;
  }
  size_t i = s->n++;
  while (i > 0 && s->v[i - 1] > x) {
    s->v[i] = s->v[i - 1];
    i--;
  }
  s->v[i] = x;
  return (int)i;
}

void rp_nums_free(rp_nums_t *s) {
  free(s->v);
  memset(s, 0, sizeof *s);
}

void rp_md_grid_header(cli_sb_t *md, const rp_strs_t *masks, const rp_nums_t *ns, const char *suffix) {
  for (size_t mi = 0; mi < masks->n; mi++)
    for (size_t ni = 0; ni < ns->n; ni++)
      cli_sb_printf(md, " %s %.0f%s |", masks->v[mi], ns->v[ni], suffix);
  cli_sb_printf(md, "\n| --- |");
  for (size_t i = 0; i < masks->n * ns->n; i++)
    cli_sb_printf(md, " --- |");
  cli_sb_printf(md, "\n");
}

void rp_md_length_header(cli_sb_t *md, const rp_nums_t *ns) {
  for (size_t ni = 0; ni < ns->n; ni++)
    cli_sb_printf(md, " %.0f |", ns->v[ni]);
  cli_sb_printf(md, "\n| --- | --- |");
  for (size_t ni = 0; ni < ns->n; ni++)
    cli_sb_printf(md, " --- |");
  cli_sb_printf(md, "\n");
}

void rp_fmt_e(char *buf, size_t cap, double x) {
  if (isnan(x))
    snprintf(buf, cap, "-");
  else if (isinf(x))
    snprintf(buf, cap, "inf");
  else if (x == 0)
    snprintf(buf, cap, "0");
  else
    snprintf(buf, cap, "%.2e", x);
}
