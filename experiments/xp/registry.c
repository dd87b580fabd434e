/* attnacc: the experiment registry of `attnacc sweep`, option helpers, shared axes and the attention cell. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "xp/xp.h"

const xp_experiment_t *const xp_experiments[] = {&xp_table4,      &xp_nanmap,      &xp_normmap,     &xp_dqbudget,
                                                 &xp_table3,      &xp_determinism, &xp_dropout_map, &xp_fp8,
                                                 &xp_fp8_rescale, &xp_lowpmap,     &xp_smoke};
const size_t xp_experiment_count = sizeof xp_experiments / sizeof xp_experiments[0];

const xp_experiment_t *xp_find(const char *name) {
  for (size_t i = 0; i < xp_experiment_count; i++)
    if (strcmp(xp_experiments[i]->name, name) == 0) return xp_experiments[i];
  return NULL;
}

/* ---- options ---- */

const char *xp_opt(const xp_opts_t *o, const char *name) {
  return cli_get(o->args, name);
}

int xp_opt_size(size_t *out, const xp_opts_t *o, const char *name, size_t min, size_t max) {
  const char *s = xp_opt(o, name);
  return s ? cli_size(out, o->cmd, name, s, min, max) : 0;
}

int xp_opt_u64(uint64_t *out, const xp_opts_t *o, const char *name) {
  const char *s = xp_opt(o, name);
  return s ? cli_u64(out, o->cmd, name, s) : 0;
}

int xp_opt_double(double *out, const xp_opts_t *o, const char *name, double min, double max, int min_open) {
  const char *s = xp_opt(o, name);
  return s ? cli_double(out, o->cmd, name, s, min, max, min_open) : 0;
}

int xp_opt_strs(const char **out, size_t *n, size_t cap, char *buf, size_t bufcap, const xp_opts_t *o,
                const char *name, const char *dflt) {
  const char *s = xp_opt(o, name);
  size_t k = 0;
  if (s == NULL) s = dflt;
  if (strlen(s) >= bufcap) {
    cli_error(o->cmd, "--%s: list too long", name);
    return 2;
  }
  strcpy(buf, s);
  for (char *p = buf;;) {
    char *c = strchr(p, ',');
    if (c) *c = '\0';
    if (*p == '\0') {
      cli_error(o->cmd, "--%s: '%s' has an empty item", name, s);
      return 2;
    }
    if (k == cap) {
      cli_error(o->cmd, "--%s: at most %zu items", name, cap);
      return 2;
    }
    for (size_t j = 0; j < k; j++)
      if (strcmp(out[j], p) == 0) {
        cli_error(o->cmd, "--%s: '%s' is repeated", name, p);
        return 2;
      }
    out[k++] = p;
    if (!c) break;
    p = c + 1;
  }
  *n = k;
  return 0;
}

int xp_opt_ints(int64_t *out, size_t *n, size_t cap, const xp_opts_t *o, const char *name, const char *dflt,
                int64_t min, int64_t max) {
  const char *items[256];
  char buf[4096];
  size_t k;
  if (cap > 256) cap = 256;
  if (xp_opt_strs(items, &k, cap, buf, sizeof buf, o, name, dflt)) return 2;
  for (size_t i = 0; i < k; i++) {
    uint64_t v;
    if (cli_u64(&v, o->cmd, name, items[i])) return 2;
    if ((int64_t)v < min || (int64_t)v > max || v > (uint64_t)INT64_MAX) {
      cli_error(o->cmd, "--%s: %s is out of range (must be between %lld and %lld)", name, items[i], (long long)min,
                (long long)max);
      return 2;
    }
    out[i] = (int64_t)v;
  }
  *n = k;
  return 0;
}

int xp_opt_doubles(double *out, size_t *n, size_t cap, const xp_opts_t *o, const char *name, const char *dflt,
                   double min, double max, int min_open) {
  const char *items[256];
  char buf[4096];
  size_t k;
  if (cap > 256) cap = 256;
  if (xp_opt_strs(items, &k, cap, buf, sizeof buf, o, name, dflt)) return 2;
  for (size_t i = 0; i < k; i++)
    if (cli_double(&out[i], o->cmd, name, items[i], min, max, min_open)) return 2;
  *n = k;
  return 0;
}

/* ---- recipes ---- */

size_t xp_default_recipes(const char **names, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < aa_recipe_preset_count() && n < cap; i++) {
    aa_recipe_t r;
    const char *name = aa_recipe_preset_name(i);
    if (aa_recipe_preset(&r, name, NULL) != AA_OK) continue;
    if (r.io_fmt != AA_FMT_BF16 || r.dropout.scheme != AA_DROPOUT_NONE) continue;
    names[n++] = name;
  }
  return n;
}

void xp_ctx_init(xp_ctx_t *ctx) {
  memset(ctx, 0, sizeof *ctx);
  ctx->d = 128;
  ctx->heads = 1;
  ctx->sigma = 1.0;
  ctx->oracle_path = AA_ORACLE_FAST;
  ctx->oracle_target = AA_ORACLE_TARGET_DEFAULT;
  pthread_mutex_init(&ctx->lock, NULL);
  pthread_cond_init(&ctx->cond, NULL);
}

void xp_free_priv(xp_ctx_t *ctx) {
  free(ctx->priv);
  ctx->priv = NULL;
}

void xp_ctx_destroy(xp_ctx_t *ctx) {
  pthread_mutex_destroy(&ctx->lock);
  pthread_cond_destroy(&ctx->cond);
}

int xp_ctx_add_recipe(xp_ctx_t *ctx, const aa_recipe_t *r, aa_error_t *err) {
  size_t need, i = ctx->nrecipes;
  char *text, probe[2];
  aa_hash128_t h;
  for (size_t j = 0; j < ctx->nrecipes; j++)
    if (strcmp(ctx->recipe[j].name, r->name) == 0) return AA_OK;
  if (i == XP_MAX_RECIPES) return aa_error_set(err, AA_EINVAL, "at most %d recipes", XP_MAX_RECIPES);
  ctx->recipe[i] = *r;
  /* The recipe text hash ties every row to the exact rounding recipe that
     produced it, even if a preset of the same name changes later. */
  need = aa_recipe_format(probe, sizeof probe, r);
  if ((text = malloc(need + 1)) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  aa_recipe_format(text, need + 1, r);
  aa_hash128_init(&h);
  aa_hash128_update(&h, text, strlen(text));
  free(text);
  snprintf(ctx->recipe_hash[i], sizeof ctx->recipe_hash[i], "%016llx", (unsigned long long)h.lo);
  ctx->nrecipes = i + 1;
  return AA_OK;
}

int xp_ctx_set_recipes(xp_ctx_t *ctx, const char *const *names, size_t n, aa_error_t *err) {
  int rc;
  if (n == 0) return aa_error_set(err, AA_EINVAL, "no recipes");
  if (n > XP_MAX_RECIPES) return aa_error_set(err, AA_EINVAL, "at most %d recipes", XP_MAX_RECIPES);
  ctx->nrecipes = 0;
  for (size_t i = 0; i < n; i++) {
    aa_recipe_t r;
    if ((rc = aa_recipe_from_spec(&r, names[i], err)) != AA_OK) return rc;
    for (size_t j = 0; j < ctx->nrecipes; j++)
      if (strcmp(ctx->recipe[j].name, r.name) == 0)
        return aa_error_set(err, AA_EINVAL, "two variants are named '%s' (set `name` in the recipe file)", r.name);
    if ((rc = xp_ctx_add_recipe(ctx, &r, err)) != AA_OK) return rc;
  }
  return AA_OK;
}

int xp_opt_specs(const char **out, size_t *n, size_t cap, char *buf, size_t bufcap, const xp_opts_t *o,
                 const char *name, const char *dflt) {
  const char *s = xp_opt(o, name);
  size_t k = 0, used = 0;
  if (s == NULL) s = dflt;
  for (const char *p = s; p != NULL;) {
    size_t len = aa_recipe_spec_next(buf + used, bufcap - used, &p);
    if (len == 0) {
      cli_error(o->cmd, "--%s: '%s' has an empty item", name, s);
      return 2;
    }
    if (used + len >= bufcap || k == cap) {
      cli_error(o->cmd, "--%s: list too long (at most %zu items)", name, cap);
      return 2;
    }
    for (size_t j = 0; j < k; j++)
      if (strcmp(out[j], buf + used) == 0) {
        cli_error(o->cmd, "--%s: '%s' is repeated", name, buf + used);
        return 2;
      }
    out[k++] = buf + used;
    used += len + 1;
  }
  *n = k;
  return 0;
}

int xp_recipes_from_opts(xp_ctx_t *ctx, const xp_opts_t *o, aa_error_t *err) {
  const char *names[XP_MAX_RECIPES];
  char buf[XP_MAX_RECIPES * 65];
  size_t n;
  int rc;
  if (xp_opt(o, "variants") != NULL) {
    if (xp_opt_specs(names, &n, XP_MAX_RECIPES, buf, sizeof buf, o, "variants", "")) return AA_EINVAL;
  } else {
    n = xp_default_recipes(names, XP_MAX_RECIPES);
  }
  if ((rc = xp_ctx_set_recipes(ctx, names, n, err)) != AA_OK) {
    char m[sizeof err->msg];
    snprintf(m, sizeof m, "%s", err->msg);
    aa_error_set(err, rc, "--variants: %.400s%s", m, rc == AA_ENOTFOUND ? " (attnacc list shows the presets)" : "");
  }
  return rc;
}

int xp_add_naive_reference(xp_ctx_t *ctx, const xp_opts_t *o, aa_error_t *err) {
  aa_recipe_t naive;
  int rc;
  if (xp_opt(o, "variants") == NULL) return AA_OK; /* the default list holds naive-bf16 */
  if ((rc = aa_score_naive_recipe(&naive, AA_FMT_BF16, err)) != AA_OK) return rc;
  for (size_t i = 0; i < ctx->nrecipes; i++)
    if (aa_recipe_equal(&ctx->recipe[i], &naive)) return AA_OK; /* by its numerics, whatever its name */
  if ((rc = xp_ctx_add_recipe(ctx, &naive, err)) == AA_OK) ctx->naive_added = ctx->recipe[ctx->nrecipes - 1].name;
  return rc;
}

void xp_cell_threads(const xp_ctx_t *ctx) {
  /* the OpenMP thread count is per calling thread: set it in each worker */
  if (ctx->inner_threads > 0) cli_set_threads((size_t)ctx->inner_threads);
}

void xp_oracle_opts(aa_oracle_opts_t *oo, const xp_ctx_t *ctx) {
  aa_oracle_opts_init(oo);
  oo->path = ctx->oracle_path;
  oo->device = ctx->oracle_device;
  oo->target = ctx->oracle_target;
  oo->threads = ctx->inner_threads;
}

/* ---- axes ---- */

int xp_axis_recipes(aa_sweep_t *sw, const xp_ctx_t *ctx, aa_error_t *err) {
  char list[XP_MAX_RECIPES * 65] = "";
  const char *v[1] = {list};
  size_t used = 0;
  for (size_t i = 0; i < ctx->nrecipes; i++)
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? "+" : "", ctx->recipe[i].name);
  return aa_sweep_axis_str(sw, "recipes", v, 1, AA_AXIS_NOSEED, err);
}

int xp_axis_masks(aa_sweep_t *sw, const xp_opts_t *o, aa_error_t *err) {
  static const char *const both[] = {"dense", "causal"};
  const char *m = xp_opt(o, "masks"), *v[2];
  size_t k = 0;
  if (m == NULL) return aa_sweep_axis_str(sw, "mask", both, 2, 0, err);
  if (strcmp(m, "dense") == 0 || strcmp(m, "causal") == 0) {
    v[k++] = m;
  } else if (strcmp(m, "dense,causal") == 0) {
    v[k++] = "dense";
    v[k++] = "causal";
  } else {
    return aa_error_set(err, AA_EINVAL, "--masks: '%s' is not dense, causal or dense,causal", m);
  }
  return aa_sweep_axis_str(sw, "mask", v, k, 0, err);
}

int xp_axis_seeds(aa_sweep_t *sw, size_t k, aa_error_t *err) {
  int64_t *v;
  int rc;
  if (k == 0) k = 1;
  if ((v = malloc(k * sizeof *v)) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  for (size_t i = 0; i < k; i++)
    v[i] = (int64_t)i + 1;
  rc = aa_sweep_axis_int(sw, "seed", v, k, 0, err);
  free(v);
  return rc;
}

int xp_axis_n(aa_sweep_t *sw, const xp_opts_t *o, const int64_t *ns, size_t count, aa_error_t *err) {
  int64_t v[64];
  size_t k;
  if (xp_opt(o, "n") == NULL) return aa_sweep_axis_int(sw, "n", ns, count, 0, err);
  if (xp_opt_ints(v, &k, 64, o, "n", "", 1, 1 << 20)) return AA_EINVAL;
  return aa_sweep_axis_int(sw, "n", v, k, 0, err);
}

/* --d as an axis (the experiment's default d when absent); --kv-heads as an axis only when given, so that a
   grid without it keeps the hash of its folder. GQA needs every query head count a multiple of the KV heads. */
int xp_axis_dims(aa_sweep_t *sw, const xp_opts_t *o, int64_t d_default, size_t heads, aa_error_t *err) {
  int64_t d[64], kv;
  size_t nd = 1, k = 0;
  int rc;
  d[0] = d_default;
  if (xp_opt(o, "d") != NULL && xp_opt_ints(d, &nd, 64, o, "d", "", 1, 1024)) return AA_EINVAL;
  if ((rc = aa_sweep_axis_int(sw, "d", d, nd, 0, err)) != AA_OK) return rc;
  if (xp_opt(o, "kv-heads") == NULL) return AA_OK;
  if (xp_opt_size(&k, o, "kv-heads", 1, 4096)) return AA_EINVAL;
  if (heads % k != 0)
    return aa_error_set(err, AA_EINVAL, "--kv-heads: %zu does not divide the %zu query heads (--heads)", k, heads);
  kv = (int64_t)k;
  return aa_sweep_axis_int(sw, "kv_heads", &kv, 1, 0, err);
}

/* --sigma S[,S...] as the axis "sigma" (inputs sigma * N(0,1)); absent: no axis, sigma 1. */
int xp_axis_sigma(aa_sweep_t *sw, const xp_opts_t *o, aa_error_t *err) {
  double v[64];
  size_t k;
  if (xp_opt(o, "sigma") == NULL) return AA_OK;
  if (xp_opt_doubles(v, &k, 64, o, "sigma", "", 0, 1e300, 1)) return AA_EINVAL;
  return aa_sweep_axis_double(sw, "sigma", v, k, 0, err);
}

int xp_axis_fixed_int(aa_sweep_t *sw, const char *name, int64_t v, aa_error_t *err) {
  return aa_sweep_axis_int(sw, name, &v, 1, AA_AXIS_NOSEED, err);
}

int xp_axis_fixed_double(aa_sweep_t *sw, const char *name, double v, aa_error_t *err) {
  return aa_sweep_axis_double(sw, name, &v, 1, AA_AXIS_NOSEED, err);
}

int xp_axis_fixed_str(aa_sweep_t *sw, const char *name, const char *v, aa_error_t *err) {
  return aa_sweep_axis_str(sw, name, &v, 1, AA_AXIS_NOSEED, err);
}

int xp_columns(aa_sweep_t *sw, const char *const *names, size_t n, aa_error_t *err) {
  int rc = AA_OK;
  for (size_t i = 0; i < n && rc == AA_OK; i++) {
    size_t len = strlen(names[i]);
    char name[64];
    if (len > 0 && names[i][len - 1] == '@') {
      snprintf(name, sizeof name, "%.*s", (int)(len - 1), names[i]);
      rc = aa_sweep_column(sw, name, AA_COL_TIMING, err);
    } else {
      rc = aa_sweep_column(sw, names[i], 0, err);
    }
  }
  return rc;
}

/* ---- the attention cell ---- */

static const char *const attn_cols[] = {
    "recipe",       "tensor",      "count",        "nan",          "inf",
    "rel_l2",       "max_abs",     "max_ulp",      "mean_ulp",     "fail_count",
    "pass",         "ref_max_abs", "ref_overflow", "oracle_bound", "oracle_uncertified",
    "recipe_hash",  "input_seed",  "version",      "error",        "seconds_oracle@",
    "seconds_emul@"};

int xp_attn_columns(aa_sweep_t *sw, aa_error_t *err) {
  return xp_columns(sw, attn_cols, sizeof attn_cols / sizeof attn_cols[0], err);
}

static int busy_find(const xp_ctx_t *ctx, const aa_hash128_t *k) {
  for (size_t i = 0; i < ctx->nbusy; i++)
    if (ctx->busy[i].hi == k->hi && ctx->busy[i].lo == k->lo) return (int)i;
  return -1;
}

int xp_oracle(aa_oracle_result_t *res, int *hit, xp_ctx_t *ctx, const aa_problem_t *pb, const aa_tensor_t *q,
              const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *oo,
              aa_error_t *err) {
  aa_hash128_t key;
  int rc, slot = 0;
  if (hit) *hit = 0;
  if (ctx->cache_dir == NULL) return aa_oracle_run(res, pb, q, k, v, dO, oo, err);
  if ((rc = aa_oracle_cache_key(&key, pb, q, k, v, dO, oo, err)) != AA_OK) return rc;
  pthread_mutex_lock(&ctx->lock);
  while (busy_find(ctx, &key) >= 0 || ctx->nbusy == sizeof ctx->busy / sizeof ctx->busy[0])
    pthread_cond_wait(&ctx->cond, &ctx->lock);
  ctx->busy[ctx->nbusy++] = key;
  pthread_mutex_unlock(&ctx->lock);
  rc = aa_oracle_cached_run(res, hit, ctx->cache_dir, pb, q, k, v, dO, oo, err);
  pthread_mutex_lock(&ctx->lock);
  slot = busy_find(ctx, &key);
  if (slot >= 0) ctx->busy[slot] = ctx->busy[--ctx->nbusy];
  pthread_cond_broadcast(&ctx->cond);
  pthread_mutex_unlock(&ctx->lock);
  return rc;
}

static void ref_stats(double *max_abs, size_t *overflow, const aa_oracle_out_t *ref, aa_fmt_t f) {
  const aa_tensor_t *r = f == AA_FMT_BF16 ? &ref->bf16 : &ref->fp32;
  size_t n = aa_tensor_numel(&ref->val);
  double m = 0;
  size_t ov = 0;
  for (size_t i = 0; i < n; i++) {
    double a = fabs(ref->val.data[i]);
    if (a > m) m = a;
    if (r->data != NULL && isinf(r->data[i])) ov++;
  }
  *max_abs = m;
  *overflow = ov;
}

/* The columns every row of one recipe's cell shares (the oracle's and the recipe's facts). */
static void set_common(aa_sweep_rows_t *rows, const aa_recipe_t *r, const char *tensor, const char *rhash,
                       const aa_oracle_out_t *ref, aa_fmt_t uf, const aa_oracle_result_t *oracle, double t_oracle,
                       double t_emul, const char *seedhex, const char *version) {
  double ref_max;
  size_t ref_ov;
  aa_sweep_row_new(rows);
  aa_sweep_set_str(rows, "recipe", r->name);
  aa_sweep_set_str(rows, "tensor", tensor);
  ref_stats(&ref_max, &ref_ov, ref, uf);
  aa_sweep_set_double(rows, "ref_max_abs", ref_max);
  aa_sweep_set_int(rows, "ref_overflow", (int64_t)ref_ov);
  aa_sweep_set_double(rows, "oracle_bound", ref->relerr_bound);
  aa_sweep_set_int(rows, "oracle_uncertified", (int64_t)oracle->n_uncertified);
  aa_sweep_set_str(rows, "recipe_hash", rhash);
  aa_sweep_set_str(rows, "input_seed", seedhex);
  aa_sweep_set_str(rows, "version", version);
  aa_sweep_set_double(rows, "seconds_oracle", t_oracle);
  aa_sweep_set_double(rows, "seconds_emul", t_emul);
}

/* One recipe on the cell's fixture through the evaluation path of run and
   score (cli_run_variant): rows for o, dq, dk, dv. */
static int eval_recipe(aa_sweep_rows_t *rows, const aa_recipe_t *r, const char *rhash, const aa_problem_t *pb,
                       const cli_inputs_t *in, const aa_oracle_result_t *oracle, double t_oracle, const char *seedhex,
                       const char *version, int first_cols, aa_error_t *err) {
  const aa_oracle_out_t *refs[4] = {&oracle->o, &oracle->dq, &oracle->dk, &oracle->dv};
  static const char *const outs[4] = {"o", "dq", "dk", "dv"};
  aa_attn_result_t res;
  cli_variant_t v;
  aa_error_t e1 = {{0}};
  int rc;
  memset(&v, 0, sizeof v);
  rc = cli_run_variant(&v, &res, r, pb, in, oracle, &e1);
  if (rc == AA_ENOMEM || rc == AA_EIO || (rc != AA_OK && v.refused[0] == '\0')) {
    snprintf(err->msg, sizeof err->msg, "%.460s", e1.msg);
    aa_attn_result_free(&res);
    cli_variant_free(&v);
    return rc == AA_ENOMEM || rc == AA_EIO ? rc : AA_EINVAL;
  }
  for (int t = 0; t < 4; t++) {
    /* ULPs of the recipe's output format: bf16, else fp32 (cli_compare) */
    aa_fmt_t uf = r->io_fmt == AA_FMT_BF16 ? AA_FMT_BF16 : AA_FMT_FP32;
    set_common(rows, r, outs[t], rhash, refs[t], uf, oracle, t_oracle, v.seconds, seedhex, version);
    if (rc != AA_OK) {
      /* A recipe that refuses the problem (a NaN it detects, a range it
         cannot hold) is a result of the map, not a failure of the sweep. */
      aa_sweep_set_str(rows, "error", v.refused);
      aa_sweep_set_int(rows, "pass", 0);
      continue;
    }
    const aa_metrics_t *m = &v.out[t].m;
    aa_sweep_set_int(rows, "count", (int64_t)m->count);
    aa_sweep_set_int(rows, "nan", (int64_t)m->nan);
    aa_sweep_set_int(rows, "inf", (int64_t)m->inf);
    aa_sweep_set_double(rows, "rel_l2", m->rel_l2);
    aa_sweep_set_double(rows, "max_abs", m->max_abs);
    aa_sweep_set_double(rows, "max_ulp", m->max_ulp);
    aa_sweep_set_double(rows, "mean_ulp", m->mean_ulp);
    aa_sweep_set_int(rows, "fail_count", (int64_t)m->fail_count);
    aa_sweep_set_int(rows, "pass", m->pass);
    if (first_cols) xp_first_set(rows, &res.first);
  }
  aa_attn_result_free(&res);
  cli_variant_free(&v);
  return AA_OK;
}

/* Where the time went, from results.csv: the oracle's seconds once per cell
   (the rows of the first recipe's o), the emulation's once per cell and
   recipe (the o rows), summed over the cells of the folder. */
int xp_attn_finish(const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  aa_results_t c;
  double orc = 0, emul[XP_MAX_RECIPES] = {0}, total = 0;
  size_t cells = 0;
  int rc;
  if ((rc = aa_sweep_results_open(&c, o->out_dir, err)) != AA_OK) return rc;
  int c_rec = aa_results_col(&c, "recipe"), c_t = aa_results_col(&c, "tensor"),
      c_so = aa_results_col(&c, "seconds_oracle"), c_se = aa_results_col(&c, "seconds_emul");
  for (size_t r = 0; c_rec >= 0 && c_t >= 0 && c_so >= 0 && c_se >= 0 && r < c.nrows; r++) {
    if (strcmp(aa_results_cell(&c, r, c_t), "o") != 0) continue;
    const char *name = aa_results_cell(&c, r, c_rec);
    for (size_t k = 0; k < ctx->nrecipes; k++)
      if (strcmp(name, ctx->recipe[k].name) == 0) {
        double se = aa_results_num(aa_results_cell(&c, r, c_se)), so = aa_results_num(aa_results_cell(&c, r, c_so));
        if (isfinite(se)) emul[k] += se;
        if (k == 0 && isfinite(so)) {
          orc += so;
          cells++;
        }
        break;
      }
  }
  aa_results_free(&c);
  for (size_t k = 0; k < ctx->nrecipes; k++)
    total += emul[k];
  FILE *f = ctx->stdout_owned ? stderr : stdout;
  fprintf(f, "time over %zu cells: oracle %.1f s, emulation %.1f s (", cells, orc, total);
  for (size_t k = 0; k < ctx->nrecipes; k++)
    fprintf(f, "%s%s %.1f", k ? ", " : "", ctx->recipe[k].name, emul[k]);
  fprintf(f, "); per cell and recipe in columns seconds_oracle, seconds_emul\n");
  return AA_OK;
}

int xp_attn_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *vctx) {
  xp_ctx_t *ctx = vctx;
  aa_error_t *err = aa_sweep_rows_error(rows);
  const char *mask = aa_cell_str(cell, "mask", "dense");
  size_t n = (size_t)aa_cell_int(cell, "n", 0), d = (size_t)aa_cell_int(cell, "d", (int64_t)ctx->d),
         heads = (size_t)aa_cell_int(cell, "heads", (int64_t)ctx->heads),
         kv_heads = (size_t)aa_cell_int(cell, "kv_heads", (int64_t)heads);
  double sigma, t0, t_oracle;
  uint64_t seed = aa_cell_seed(cell);
  cli_inputs_t in = {0};
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  int rc, have_oracle = 0;
  char seedhex[24], version[96];
  uint8_t *cmask = NULL;

  memset(&oracle, 0, sizeof oracle);
  if (aa_cell_find(cell, "log2_sigma") >= 0) /* an integer axis, or nanmap's doubles for sigmas like 133120 */
    sigma = exp2(aa_cell_double(cell, "log2_sigma", 0));
  else
    sigma = aa_cell_double(cell, "sigma", ctx->sigma);
  if (n == 0 || d == 0 || heads == 0 || kv_heads == 0 || heads % kv_heads)
    return aa_error_set(err, AA_EINVAL, "cell has n, d or heads 0, or kv_heads not dividing heads");
  snprintf(seedhex, sizeof seedhex, "%llu", (unsigned long long)seed);
  snprintf(version, sizeof version, "%s+%s", AA_VERSION, AA_GIT_HASH);
  xp_cell_threads(ctx);

  /* Inputs are BF16 for every recipe (a recipe with a wider io format holds
     every BF16 value), so all recipes of the cell see the same values and
     share one oracle. */
  /* a cell coordinate "outlier" = 1 draws the FA3 FP8 setting (AA_DIST_OUTLIER, the fp8 experiment); "dist" names
     a distribution of lib/layout.h and "logit_offset" shifts every score (problem.h; nanmap --dists,
     --logit-offsets) */
  int dist = aa_cell_find(cell, "outlier") >= 0 && aa_cell_int(cell, "outlier", 0) ? AA_DIST_OUTLIER : ctx->uniform;
  if (aa_cell_find(cell, "dist") >= 0 && (dist = aa_layout_dist_from_name(aa_cell_str(cell, "dist", ""))) < 0)
    return aa_error_set(err, AA_EINVAL, "cell has an unknown dist '%s'", aa_cell_str(cell, "dist", ""));
  /* nanmap's n_q (0: n), key_pad and empty_row (xp_cell_masks) */
  size_t n_q = aa_cell_int(cell, "n_q", 0) > 0 ? (size_t)aa_cell_int(cell, "n_q", 0) : n;
  if ((rc = cli_inputs_draw_qk(&in, seed, dist, sigma, n_q, n, d, heads, kv_heads, 0, AA_FMT_BF16, err)) != AA_OK)
    goto out;
  aa_problem_init(&pb, n_q, n, d, heads, kv_heads);
  pb.causal = strcmp(mask, "causal") == 0;
  pb.logit_offset = aa_cell_double(cell, "logit_offset", 0.0);
  if ((rc = xp_cell_masks(&pb, &cmask, cell, err)) != AA_OK) goto out;
  if ((rc = aa_problem_check(&pb, err)) != AA_OK) goto out;
  xp_oracle_opts(&oo, ctx);

  t0 = cli_now();
  rc = xp_oracle(&oracle, NULL, ctx, &pb, &in.q, &in.k, &in.v, &in.dO, &oo, err);
  t_oracle = cli_now() - t0;
  if (rc != AA_OK) goto out;
  have_oracle = 1;
  for (size_t i = 0; i < ctx->nrecipes; i++)
    if ((rc = eval_recipe(rows, &ctx->recipe[i], ctx->recipe_hash[i], &pb, &in, &oracle, t_oracle, seedhex, version,
                          ctx->first_cols, err)) != AA_OK)
      goto out;
  if (ctx->delay_ms > 0) {
    struct timespec ts = {(time_t)(ctx->delay_ms / 1000), (long)(ctx->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
out:
  if (have_oracle) aa_oracle_result_free(&oracle);
  cli_inputs_free(&in);
  free(cmask);
  return rc;
}

/* ---- the smoke grid (tests) ---- */

static const cli_opt_t attn_opts[] = {XP_OPTS_ATTN, XP_OPTS_ORACLE};

static int smoke_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const int64_t ns[] = {16, 32, 48};
  size_t seeds = 2;
  int rc;
  ctx->d = 8;
  if (xp_opt_size(&seeds, o, "seeds", 1, 1000000)) return AA_EINVAL;
  if ((rc = xp_recipes_from_opts(ctx, o, err)) || (rc = xp_axis_recipes(sw, ctx, err)) ||
      (rc = xp_axis_n(sw, o, ns, o->quick ? 2 : 3, err)) || (rc = xp_axis_masks(sw, o, err)) ||
      (rc = xp_axis_seeds(sw, seeds, err)) || (rc = xp_attn_columns(sw, err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

const xp_experiment_t xp_smoke = {
    .name = "smoke",
    .summary = "a tiny grid (n <= 48, d = 8) for the tests of the sweep command",
    .hidden = 1,
    .description = "Recipes x n = 16, 32, 48 (--quick: 16, 32) x dense/causal x seeds 1..2, d = 8: the\n"
                   "attention cell of table4 on a grid small enough for the tests.",
    .params = attn_opts,
    .nparams = sizeof attn_opts / sizeof attn_opts[0],
    .declare = smoke_declare,
    .eval = xp_attn_eval,
};
