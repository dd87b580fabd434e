/* attnacc: the references of the rules through the on-disk cache: what the fa, sdpa and expect rules read of the
 * naive reference's and the expect recipe's outputs, stored beside the oracle cache's entries, so that a warm score
 * emulates nothing. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"
#include "sweep.h"
#include "version.h"

static const char *const names[AA_EVAL_MAX_OUT] = {"o", "dq", "dk", "dv", "dsinks", "lse"};

/* The statistics an entry keeps of each output: those aa_score_apply_naive and aa_score_apply_expect read. */
#define NSTAT 10

static double *stat_field(aa_score_out_t *s, int i) {
  double *f[NSTAT] = {&s->m.max_abs,   &s->m.rel_l2,     &s->abs_q99,     &s->ls_scale,        &s->ls_offset,
                      &s->scale_sigma, &s->offset_sigma, &s->row_err_max, &s->head_rel_l2_max, &s->err_corr};
  return f[i];
}

/* The entry's key: the oracle cache key of the problem and the inputs as tagged (the recipe's format among them),
   then the recipe's text, whether its lse is scored and the library version (an emulation change must not read an
   old entry). */
static int ref_key(char hex[33], const aa_problem_t *pb, const aa_tensor_t *const in[4], const aa_recipe_t *r,
                   int with_lse, const aa_oracle_opts_t *oo, aa_error_t *err) {
  char text[8192];
  aa_hash128_t h;
  int rc = aa_oracle_cache_key(&h, pb, in[0], in[1], in[2], in[3], oo, err);
  if (rc != AA_OK) return rc;
  aa_recipe_format(text, sizeof text, r);
  aa_hash128_update(&h, with_lse ? "ref-lse-2" : "ref-2", with_lse ? 9 : 5);
  aa_hash128_update(&h, text, strlen(text));
  aa_hash128_update(&h, AA_VERSION, strlen(AA_VERSION));
  aa_hash128_hex(hex, &h);
  return AA_OK;
}

/* One line of an entry into output n of v; 0 when it is not one. */
static int read_line(aa_eval_variant_t *v, int n, FILE *f) {
  char name[16], num[NSTAT][64];
  size_t nan, inf;
  int k = 0;
  if (fscanf(f, "%15s %zu %zu", name, &nan, &inf) != 3) return 0;
  for (int i = 0; i < NSTAT; i++)
    if (fscanf(f, "%63s", num[i]) != 1) return 0;
  while (k < AA_EVAL_MAX_OUT && strcmp(names[k], name) != 0)
    k++;
  if (k == AA_EVAL_MAX_OUT) return 0;
  v->out[n].name = v->out[n].s.name = names[k];
  v->out[n].s.m.nan = v->out[n].m.nan = nan;
  v->out[n].s.m.inf = v->out[n].m.inf = inf;
  for (int i = 0; i < NSTAT; i++)
    *stat_field(&v->out[n].s, i) = strtod(num[i], NULL);
  v->out[n].m.max_abs = v->out[n].s.m.max_abs;
  v->out[n].m.rel_l2 = v->out[n].s.m.rel_l2;
  return 1;
}

/* A stored entry into v, named name (AA_ENOTFOUND when absent or malformed). */
static int ref_get(aa_eval_variant_t *v, const char *name, const char *path) {
  FILE *f = fopen(path, "r");
  int n = 0;
  if (f == NULL) return AA_ENOTFOUND;
  memset(v, 0, sizeof *v);
  snprintf(v->variant, sizeof v->variant, "%s", name);
  while (n < AA_EVAL_MAX_OUT && read_line(v, n, f))
    n++;
  fclose(f);
  v->nout = n;
  return n > 0 ? AA_OK : AA_ENOTFOUND;
}

/* v's outputs as the entry's text (one line each: name, NaN and Inf counts, the statistics in %a), stored at path. */
static void ref_put(const aa_eval_variant_t *v, const char *dir, const char *path) {
  char text[AA_EVAL_MAX_OUT * (48 + NSTAT * 26)];
  size_t used = 0;
  for (int i = 0; i < v->nout && used < sizeof text; i++) {
    aa_score_out_t s = v->out[i].s;
    used += (size_t)snprintf(text + used, sizeof text - used, "%s %zu %zu", v->out[i].name, s.m.nan, s.m.inf);
    for (int k = 0; k < NSTAT && used < sizeof text; k++)
      used += (size_t)snprintf(text + used, sizeof text - used, " %a", *stat_field(&s, k));
    if (used < sizeof text) text[used++] = '\n';
  }
  /* best effort, as the oracle cache: a failed put only costs an emulation next time */
  if (used < sizeof text && aa_mkdir_p(dir, NULL) == AA_OK) aa_file_write(path, text, used, NULL);
}

int aa_eval_recipe_cached(aa_eval_variant_t *v, int *hit, const aa_recipe_t *r, int with_lse, const aa_problem_t *pb,
                          const aa_tensor_t *const in[4], const aa_oracle_result_t *oracle,
                          const aa_oracle_opts_t *oo, const char *dir, aa_error_t *err) {
  aa_attn_result_t res;
  char hex[33], path[4200];
  int rc = AA_OK;
  if (hit != NULL) *hit = 0;
  if (dir != NULL && (rc = ref_key(hex, pb, in, r, with_lse, oo, err)) != AA_OK) return rc;
  if (dir != NULL) snprintf(path, sizeof path, "%s/%s.ref", dir, hex);
  if (dir != NULL && ref_get(v, r->name, path) == AA_OK) {
    if (hit != NULL) *hit = 1;
    return AA_OK;
  }
  /* the emulation where the oracle was asked to run (values do not depend on it, so the key leaves it out) */
  rc = aa_eval_attn_device(v, &res, r, pb, in[0], in[1], in[2], in[3], aa_eval_device(oo->device), err);
  if (rc == AA_OK) rc = aa_eval_outputs(v, &res, pb, oracle, NULL, err);
  if (rc != AA_OK) {
    aa_attn_result_free(&res);
    return rc;
  }
  if (with_lse) rc = aa_eval_result_lse(v, &res, oracle, err);
  aa_attn_result_free(&res);
  if (rc == AA_OK && dir != NULL) ref_put(v, dir, path);
  return rc;
}

int aa_eval_naive_cached(aa_eval_variant_t *naive, int *hit, aa_fmt_t fmt, const aa_problem_t *pb,
                         const aa_tensor_t *const in[4], const aa_oracle_result_t *oracle, const aa_oracle_opts_t *oo,
                         const char *dir, aa_error_t *err) {
  aa_recipe_t r;
  int rc = aa_score_naive_recipe(&r, fmt, err);
  /* the naive lse always, so that an entry serves a later call that scores the kernel's lse */
  return rc != AA_OK ? rc : aa_eval_recipe_cached(naive, hit, &r, 1, pb, in, oracle, oo, dir, err);
}
