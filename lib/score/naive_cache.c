/* attnacc: the naive reference through the on-disk cache: what its rules read (each output's largest error and its
 * NaN and Inf counts), stored beside the oracle cache's entries, so that a warm score emulates nothing. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"
#include "sweep.h"
#include "version.h"

static const char *const names[AA_EVAL_MAX_OUT] = {"o", "dq", "dk", "dv", "dsinks", "lse"};

/* The entry's key: the oracle cache key of the problem and the inputs as tagged (the naive format among them),
   then the naive recipe's text and the library version (an emulation change must not read an old entry). */
static int naive_key(char hex[33], const aa_problem_t *pb, const aa_tensor_t *const in[4], const aa_recipe_t *r,
                     const aa_oracle_opts_t *oo, aa_error_t *err) {
  char text[8192];
  aa_hash128_t h;
  int rc = aa_oracle_cache_key(&h, pb, in[0], in[1], in[2], in[3], oo, err);
  if (rc != AA_OK) return rc;
  aa_recipe_format(text, sizeof text, r);
  aa_hash128_update(&h, "naive-1", 7);
  aa_hash128_update(&h, text, strlen(text));
  aa_hash128_update(&h, AA_VERSION, strlen(AA_VERSION));
  aa_hash128_hex(hex, &h);
  return AA_OK;
}

/* A stored entry into naive (AA_ENOTFOUND when absent or malformed). */
static int naive_get(aa_eval_variant_t *naive, const char *path) {
  FILE *f = fopen(path, "r");
  char name[16], num[64];
  size_t nan, inf;
  int n = 0;
  if (f == NULL) return AA_ENOTFOUND;
  memset(naive, 0, sizeof *naive);
  snprintf(naive->variant, sizeof naive->variant, "naive");
  while (n < AA_EVAL_MAX_OUT && fscanf(f, "%15s %63s %zu %zu", name, num, &nan, &inf) == 4) {
    int k = 0;
    while (k < AA_EVAL_MAX_OUT && strcmp(names[k], name) != 0)
      k++;
    if (k == AA_EVAL_MAX_OUT) break;
    naive->out[n].name = names[k];
    naive->out[n].s.name = names[k];
    naive->out[n].s.m.max_abs = naive->out[n].m.max_abs = strtod(num, NULL);
    naive->out[n].s.m.nan = naive->out[n].m.nan = nan;
    naive->out[n].s.m.inf = naive->out[n].m.inf = inf;
    n++;
  }
  fclose(f);
  naive->nout = n;
  return n > 0 ? AA_OK : AA_ENOTFOUND;
}

/* naive's outputs as the entry's text (one line each: name, max_abs in %a, NaN and Inf counts), stored at path. */
static void naive_put(const aa_eval_variant_t *naive, const char *dir, const char *path) {
  char text[AA_EVAL_MAX_OUT * 96];
  size_t used = 0;
  for (int i = 0; i < naive->nout; i++) {
    const aa_metrics_t *m = &naive->out[i].s.m;
    used += (size_t)snprintf(text + used, sizeof text - used, "%s %a %zu %zu\n", naive->out[i].name, m->max_abs,
                             m->nan, m->inf);
  }
  /* best effort, as the oracle cache: a failed put only costs an emulation next time */
  if (aa_mkdir_p(dir, NULL) == AA_OK) aa_file_write(path, text, used, NULL);
}

int aa_eval_naive_cached(aa_eval_variant_t *naive, int *hit, aa_fmt_t fmt, const aa_problem_t *pb,
                         const aa_tensor_t *const in[4], const aa_oracle_result_t *oracle, const aa_oracle_opts_t *oo,
                         const char *dir, aa_error_t *err) {
  aa_recipe_t r;
  aa_attn_result_t res;
  char hex[33], path[4200];
  int rc = aa_score_naive_recipe(&r, fmt, err);
  if (hit != NULL) *hit = 0;
  if (rc == AA_OK && dir != NULL) rc = naive_key(hex, pb, in, &r, oo, err);
  if (rc != AA_OK) return rc;
  if (dir != NULL) snprintf(path, sizeof path, "%s/%s.naive", dir, hex);
  if (dir != NULL && naive_get(naive, path) == AA_OK) {
    if (hit != NULL) *hit = 1;
    return AA_OK;
  }
  rc = aa_eval_run(naive, &res, &r, pb, in[0], in[1], in[2], in[3], oracle, NULL, err);
  if (rc != AA_OK) return rc;
  /* the naive lse always, so that an entry serves a later call that scores the kernel's lse */
  rc = aa_eval_result_lse(naive, &res, oracle, err);
  aa_attn_result_free(&res);
  if (rc == AA_OK && dir != NULL) naive_put(naive, dir, path);
  return rc;
}
