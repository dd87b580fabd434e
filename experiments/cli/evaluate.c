/* attnacc: the command's glue over the library's evaluation path (lib/score.h, aa_eval_*): oracle options and its
 * timed run with notes and limits, --rule's messages, the emulation's timing. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/limits.h"
#include "config.h"

/* --force and --cache of the last cli_oracle_opts, for cli_oracle_run (one command per process). */
static int oracle_force = 0;
static const char *oracle_cache = NULL;

#ifdef AA_HAVE_CUDA
#define AA_HAVE_CUDA_P 1
#else
#define AA_HAVE_CUDA_P 0
#endif

/* --device for the emulation too: auto and cuda run on the GPU what its emulation implements (aa_attn_run_device);
   without the option, the oracle's default (auto). */
static aa_attn_device_t emu_device = AA_ATTN_DEVICE_CPU;

int cli_device_opt(aa_oracle_device_t *dev, const cli_args_t *a, const char *cmd) {
  const char *s = cli_get(a, "device");
  if (s != NULL && aa_oracle_device_from_name(dev, s) != AA_OK) {
    cli_error(cmd, "--device: '%s' is not auto, cpu or cuda", s);
    return 2;
  }
  emu_device = aa_eval_device(*dev);
  if (*dev == AA_ORACLE_DEVICE_CUDA && !aa_oracle_cuda_available()) {
    cli_error(cmd, "--device cuda: %s",
              AA_HAVE_CUDA_P ? "no CUDA GPU is present"
                             : "this attnacc was built without CUDA (configure --with-cuda)");
    return 2;
  }
  return 0;
}

int cli_oracle_opts(aa_oracle_opts_t *oo, const cli_args_t *a, const char *cmd) {
  const char *s;
  size_t prec = 128;
  aa_oracle_opts_init(oo);
  oracle_force = cli_get(a, "force") != NULL;
  oracle_cache = cli_get(a, "cache");
  if ((s = cli_get(a, "oracle")) != NULL && aa_oracle_path_from_name(&oo->path, s) != AA_OK) {
    cli_error(cmd, "--oracle: '%s' is not mpfr or fast", s);
    return 2;
  }
  if ((s = cli_get(a, "prec")) && cli_size(&prec, cmd, "prec", s, 64, 4096)) return 2;
  oo->prec = (int)prec;
  if ((s = cli_get(a, "oracle-target")) && cli_oracle_target(&oo->target, cmd, s)) return 2;
  return cli_device_opt(&oo->device, a, cmd);
}

const char *cli_oracle_cache(void) {
  return oracle_cache;
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
  if (oracle_cache != NULL) {
    int hit = 0;
    rc = aa_oracle_cached_run(res, &hit, oracle_cache, pb, &in->q, &in->k, &in->v, &in->dO, oo, &err);
    if (rc == AA_OK && hit) fprintf(stderr, "attnacc %s: note: oracle read from the cache %s\n", cmd, oracle_cache);
  } else
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
  aa_error_prefix(&err, "oracle");
  cli_error(cmd, "%s", err.msg);
  return cli_exit_status(rc);
}

int cli_rules_parse(aa_rule_t *rules, int *n, double *atol, double *rtol, const char *cmd, const char *s) {
  aa_error_t err = {{0}};
  if (aa_eval_rules_parse(rules, n, atol, rtol, s, &err) == AA_OK) return 0;
  cli_error(cmd, "--rule: %s", err.msg);
  return 2;
}

int cli_run_variant(cli_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                    const cli_inputs_t *in, const aa_oracle_result_t *oracle, aa_error_t *err) {
  double t0 = cli_now();
  int rc = aa_eval_attn_device(v, res, r, pb, &in->q, &in->k, &in->v, &in->dO, emu_device, err);
  v->seconds = cli_now() - t0;
  if (rc == AA_OK && res->fwd_device == AA_ATTN_DEVICE_CUDA)
    fprintf(stderr, "attnacc: note: the emulation's forward of %s ran on the GPU, its backward on the %s\n", r->name,
            res->bwd_device == AA_ATTN_DEVICE_CUDA ? "GPU" : "CPU");
  return rc != AA_OK ? rc : aa_eval_outputs(v, res, pb, oracle, NULL, err);
}
