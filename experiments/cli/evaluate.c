/* attnacc: the one evaluation path: the oracle on a problem, a recipe or given outputs against it, metrics, rules and
 * verdicts. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/limits.h"
#include "config.h"

/* --force of the last cli_oracle_opts, for cli_oracle_run (one command per process). */
static int oracle_force = 0;

#ifdef AA_HAVE_CUDA
#define AA_HAVE_CUDA_P 1
#else
#define AA_HAVE_CUDA_P 0
#endif

int cli_oracle_opts(aa_oracle_opts_t *oo, const cli_args_t *a, const char *cmd) {
  const char *s;
  size_t prec = 128;
  aa_oracle_opts_init(oo);
  oracle_force = cli_get(a, "force") != NULL;
  if ((s = cli_get(a, "oracle")) != NULL && aa_oracle_path_from_name(&oo->path, s) != AA_OK) {
    cli_error(cmd, "--oracle: '%s' is not mpfr or fast", s);
    return 2;
  }
  if ((s = cli_get(a, "prec")) && cli_size(&prec, cmd, "prec", s, 64, 4096)) return 2;
  oo->prec = (int)prec;
  if ((s = cli_get(a, "oracle-target")) && cli_oracle_target(&oo->target, cmd, s)) return 2;
  if ((s = cli_get(a, "device")) != NULL) {
    if (aa_oracle_device_from_name(&oo->device, s) != AA_OK) {
      cli_error(cmd, "--device: '%s' is not auto, cpu or cuda", s);
      return 2;
    }
    if (oo->device == AA_ORACLE_DEVICE_CUDA && !aa_oracle_cuda_available()) {
      cli_error(cmd, "--device cuda: %s",
                AA_HAVE_CUDA_P ? "no CUDA GPU is present"
                               : "this attnacc was built without CUDA (configure --with-cuda)");
      return 2;
    }
  }
  return 0;
}

/* Put "prefix: " in front of err's message (truncating its end if needed),
   unless it already starts so: the library's own messages may name the
   module (lib/oracle says "oracle: ..."), and one name is enough. */
static void err_prefix(aa_error_t *err, const char *prefix) {
  size_t pl, ml, cap = sizeof err->msg;
  if (err == NULL) return;
  pl = strlen(prefix) + 2;
  if (pl >= cap) return;
  if (strncmp(err->msg, prefix, pl - 2) == 0 && strncmp(err->msg + pl - 2, ": ", 2) == 0) return;
  ml = strnlen(err->msg, cap - 1);
  if (ml > cap - 1 - pl) ml = cap - 1 - pl;
  memmove(err->msg + pl, err->msg, ml);
  memcpy(err->msg, prefix, pl - 2);
  err->msg[pl - 2] = ':';
  err->msg[pl - 1] = ' ';
  err->msg[pl + ml] = '\0';
}

int cli_oracle_run(aa_oracle_result_t *res, double *seconds, const char *cmd, const aa_problem_t *pb,
                   const cli_inputs_t *in, const aa_oracle_opts_t *oo) {
  aa_error_t err = {{0}};
  double t0;
  int rc;
  if (oo->path == AA_ORACLE_MPFR) {
    int threads = lim_threads(oo->threads);
    double est = aa_oracle_mpfr_seconds(pb, oo) / threads;
    char t[48], lim[48];
    lim_duration(t, sizeof t, est);
    lim_duration(lim, sizeof lim, LIM_MPFR_SECONDS);
    if (est > LIM_MPFR_SECONDS && !oracle_force) {
      cli_error(cmd,
                "the mpfr oracle would take about %s on %d thread%s (estimate; limit %s): use --oracle fast, a "
                "smaller problem, or --force",
                t, threads, threads == 1 ? "" : "s", lim);
      return 2;
    }
    fprintf(stderr, "attnacc %s: note: the mpfr oracle should take about %s on %d thread%s (estimate)\n", cmd, t,
            threads, threads == 1 ? "" : "s");
  }
  t0 = cli_now();
  rc = aa_oracle_run(res, pb, &in->q, &in->k, &in->v, &in->dO, oo, &err);
  *seconds = cli_now() - t0;
  if (rc == AA_OK && res->device == AA_ORACLE_DEVICE_CUDA)
    fprintf(stderr, "attnacc %s: note: the fast oracle ran on the GPU (%.3g s)\n", cmd, *seconds);
  else if (rc == AA_OK && oo->device == AA_ORACLE_DEVICE_CUDA && oo->path == AA_ORACLE_FAST)
    fprintf(stderr,
            "attnacc %s: note: --device cuda: this problem's features need the CPU oracle (the GPU takes "
            "dense, causal and windowed masks, GQA, d <= 256)\n",
            cmd);
  if (rc == AA_OK) return 0;
  err_prefix(&err, "oracle");
  cli_error(cmd, "%s", err.msg);
  return cli_exit_status(rc);
}

int cli_compare(cli_out_t *out, const char *name, const aa_tensor_t *t, const aa_oracle_out_t *ref, aa_error_t *err) {
  int rc;
  out->name = name;
  out->ulp_fmt = t->fmt == AA_FMT_BF16 ? AA_FMT_BF16 : AA_FMT_FP32;
  out->relerr_bound = ref->relerr_bound;
  out->fa_applied = 0;
  rc = aa_metrics_compare(&out->m, t, ref, out->ulp_fmt, AA_METRICS_ATOL, AA_METRICS_RTOL, err);
  if (rc == AA_OK) rc = cli_score_out(out, t, ref, -1, -1, -1, err);
  if (rc != AA_OK) err_prefix(err, name);
  return rc;
}

int cli_score_out(cli_out_t *out, const aa_tensor_t *t, const aa_oracle_out_t *ref, int ulp_fmt, double atol,
                  double rtol, aa_error_t *err) {
  aa_fmt_t uf = ulp_fmt >= 0                                                              ? (aa_fmt_t)ulp_fmt
                : t->fmt == AA_FMT_BF16 || t->fmt == AA_FMT_FP16 || t->fmt == AA_FMT_FP32 ? t->fmt
                                                                                          : AA_FMT_FP32;
  return aa_score_compare(&out->s, out->name, t, ref, t->fmt, uf, atol >= 0 ? atol : AA_METRICS_ATOL,
                          rtol >= 0 ? rtol : AA_METRICS_RTOL, err);
}

int cli_rules_parse(aa_rule_t *rules, int *n, double *atol, double *rtol, const char *cmd, const char *s) {
  char buf[256], *tok, *save = NULL;
  int have[AA_RULE_COUNT] = {0};
  *n = 0;
  if (strlen(s) >= sizeof buf) {
    cli_error(cmd, "--rule: '%s' is too long", s);
    return 2;
  }
  strcpy(buf, s);
  for (tok = strtok_r(buf, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
    aa_rule_t r;
    if (strcmp(tok, "all") == 0) {
      for (int i = 0; i < AA_RULE_COUNT; i++)
        if (!have[i]++) rules[(*n)++] = (aa_rule_t)i;
      continue;
    }
    if (aa_rule_from_name(&r, tok) != AA_OK) {
      cli_error(cmd, "--rule: '%s' is not fa, torch, sdpa, abs-rel or all", tok);
      return 2;
    }
    if (r == AA_RULE_ABSREL) {
      /* optional ATOL RTOL after abs-rel */
      char *save2 = save;
      char *a = strtok_r(NULL, ", ", &save2), *b = a ? strtok_r(NULL, ", ", &save2) : NULL;
      char *end;
      if (a != NULL && ((a[0] >= '0' && a[0] <= '9') || a[0] == '.')) {
        if (b == NULL) {
          cli_error(cmd, "--rule abs-rel: give both ATOL and RTOL (e.g. --rule abs-rel,1e-3,1e-2)");
          return 2;
        }
        *atol = strtod(a, &end);
        if (*end != '\0' || !(*atol >= 0) || !isfinite(*atol)) {
          cli_error(cmd, "--rule abs-rel: ATOL '%s' is not a number >= 0", a);
          return 2;
        }
        *rtol = strtod(b, &end);
        if (*end != '\0' || !(*rtol >= 0) || !isfinite(*rtol)) {
          cli_error(cmd, "--rule abs-rel: RTOL '%s' is not a number >= 0", b);
          return 2;
        }
        save = save2;
      }
    }
    if (!have[r]++) rules[(*n)++] = r;
  }
  if (*n == 0) {
    cli_error(cmd, "--rule: no rule given");
    return 2;
  }
  return 0;
}

int cli_verdict(const cli_variant_t *v, const aa_rule_t *rules, int n) {
  for (int j = 0; j < v->nout; j++)
    for (int i = 0; i < n; i++) {
      const aa_rule_result_t *r = &v->out[j].s.rule[rules[i]];
      if (!r->applied || !r->pass) return 0;
    }
  return 1;
}

double cli_oracle_bound(const aa_oracle_result_t *r) {
  double b = 0;
  const aa_oracle_out_t *outs[5] = {&r->o, &r->dq, &r->dk, &r->dv, &r->dsinks};
  for (int i = 0; i < 5; i++)
    if (outs[i]->val.data != NULL && aa_tensor_numel(&outs[i]->val) > 0 && !(outs[i]->relerr_bound <= b))
      b = outs[i]->relerr_bound;
  return b;
}

void cli_variant_free(cli_variant_t *v) {
  free(v->recipe_text);
  v->recipe_text = NULL;
}

int cli_run_variant(cli_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                    const cli_inputs_t *in, const aa_oracle_result_t *oracle, aa_error_t *err) {
  double t0;
  int rc;
  size_t need;
  memset(res, 0, sizeof *res);
  v->refused[0] = '\0';
  snprintf(v->variant, sizeof v->variant, "%s", r->name);
  {
    char probe[2];
    need = aa_recipe_format(probe, sizeof probe, r);
  }
  v->recipe_text = malloc(need + 1);
  if (v->recipe_text == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  aa_recipe_format(v->recipe_text, need + 1, r);
  t0 = cli_now();
  rc = aa_attn_run(res, pb, r, &in->q, &in->k, &in->v, &in->dO, err);
  v->seconds = cli_now() - t0;
  if (rc != AA_OK) {
    snprintf(v->refused, sizeof v->refused, "%s", err->msg[0] ? err->msg : aa_status_str(rc));
    err_prefix(err, r->name);
    return rc;
  }
  /* The summary lines describe the recipe that ran: with conditional keys,
     the one resolved for this problem (aa_attn_run resolved it the same way). */
  aa_recipe_t *resolved = NULL;
  if (r->nwhen > 0 && (resolved = malloc(sizeof *resolved)) != NULL) {
    aa_recipe_case_t c = {.causal = pb->causal, .n_q = pb->n_q, .n_k = pb->n_k, .d = pb->d};
    if (aa_recipe_resolve(resolved, r, &c, NULL) == AA_OK) r = resolved;
  }
  snprintf(v->dq_reduce, sizeof v->dq_reduce, "%s", aa_reduce_kind_name(r->bwd_dq_reduce.kind));
  v->dq_stats = res->dq_reduce;
  {
    static const char *const sm[] = {"online-lse", "two-pass", "fixed-shift", "guarded"};
    snprintf(v->softmax, sizeof v->softmax, "%s",
             (unsigned)r->fwd_softmax < sizeof sm / sizeof sm[0] ? sm[r->fwd_softmax] : "?");
    v->fwd_tiles = res->fwd_q_tiles * pb->heads;
    v->tiles_flagged = res->tiles_flagged;
    v->rows_recovered = res->rows_recovered;
  }
  free(resolved);
  v->nout = 0;
  if ((rc = cli_compare(&v->out[v->nout++], "o", &res->o, &oracle->o, err)) ||
      (rc = cli_compare(&v->out[v->nout++], "dq", &res->dq, &oracle->dq, err)) ||
      (rc = cli_compare(&v->out[v->nout++], "dk", &res->dk, &oracle->dk, err)) ||
      (rc = cli_compare(&v->out[v->nout++], "dv", &res->dv, &oracle->dv, err)))
    return rc;
  if (pb->num_sinks > 0 && (rc = cli_compare(&v->out[v->nout++], "dsinks", &res->dsinks, &oracle->dsinks, err)))
    return rc;
  v->nonfinite = 0;
  for (int j = 0; j < v->nout; j++)
    if (v->out[j].m.nan + v->out[j].m.inf > 0) v->nonfinite = 1;
  return AA_OK;
}

void cli_apply_fa(cli_variant_t *v, const cli_variant_t *naive) {
  for (int i = 0; i < v->nout; i++)
    for (int j = 0; j < naive->nout; j++)
      if (strcmp(v->out[i].name, naive->out[j].name) == 0) {
        double factor = strcmp(v->out[i].name, "o") == 0 ? AA_METRICS_FA_FACTOR_FWD : AA_METRICS_FA_FACTOR_BWD;
        aa_metrics_fa_rule(&v->out[i].m, &naive->out[j].m, factor);
        aa_score_apply_naive(&v->out[i].s, &naive->out[j].s);
        v->out[i].fa_applied = 1;
      }
}

int cli_evaluate_given(cli_variant_t *v, const aa_tensor_t g[5], const aa_oracle_result_t *oracle, int ulp_fmt,
                       double atol, double rtol, aa_error_t *err) {
  static const char *const names[5] = {"o", "dq", "dk", "dv", "dsinks"};
  const aa_oracle_out_t *ref[5] = {&oracle->o, &oracle->dq, &oracle->dk, &oracle->dv, &oracle->dsinks};
  int rc;
  snprintf(v->variant, sizeof v->variant, "external");
  for (int i = 0; i < 5; i++) {
    cli_out_t *o;
    if (g[i].data == NULL) continue;
    if ((rc = aa_score_exact_finite(ref[i], names[i], g[i].fmt, err)) != AA_OK) return rc;
    o = &v->out[v->nout++];
    if ((rc = cli_compare(o, names[i], &g[i], ref[i], err)) != AA_OK ||
        ((ulp_fmt >= 0 || atol >= 0) && (rc = cli_score_out(o, &g[i], ref[i], ulp_fmt, atol, rtol, err))))
      return rc;
  }
  return AA_OK;
}

int cli_apply_naive(cli_variant_t *v, cli_variant_t *naive, const aa_attn_result_t *naive_res,
                    const aa_oracle_result_t *oracle, int ulp_fmt, double atol, double rtol, aa_error_t *err) {
  const aa_tensor_t *nt[5] = {&naive_res->o, &naive_res->dq, &naive_res->dk, &naive_res->dv, &naive_res->dsinks};
  const aa_oracle_out_t *ref[5] = {&oracle->o, &oracle->dq, &oracle->dk, &oracle->dv, &oracle->dsinks};
  int rc;
  for (int i = 0; i < v->nout; i++)
    for (int j = 0; j < naive->nout; j++)
      if (strcmp(v->out[i].name, naive->out[j].name) == 0) {
        if ((ulp_fmt >= 0 || atol >= 0) &&
            (rc = cli_score_out(&naive->out[j], nt[j], ref[j], ulp_fmt, atol, rtol, err)) != AA_OK)
          return rc;
        aa_score_apply_naive(&v->out[i].s, &naive->out[j].s);
      }
  return AA_OK;
}
