/* attnacc: the `dq-budget` command: fixed-point dQ budget map (fallback fraction and added error against n, mask,
 * sigma and scale exponent). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const cli_opt_t opts[] = {
    {"out", "DIR", NULL, "sweep folder (results.csv, results.jsonl, journals); required"},
    {"n", "N[,N...]", "1024,2048,4096,8192,16384,32768", "sequence lengths"},
    {"masks", "dense,causal", "dense,causal", "masks"},
    {"sigma", "X[,X...]", "1", "input scales (inputs sigma*N(0,1), bf16)"},
    {"d", "D", "128", "head dimension"},
    {"heads", "H", "1", "heads"},
    {"width", "W", "16", "fixed-point word width (16: packed pairs)"},
    {"scale-exp", "S", "12", "centre of the probed scale exponents (S-8..S+8)"},
    {"variant", "NAME", "fa2-fixed", "preset whose dQ reduction is switched to fixed with the probe on"},
    {"seed", "S", "1", "base seed (mixed with the cell coordinates)"},
    {"resume", NULL, NULL, "skip cells already in the folder"},
    {"threads", "T", "0 = all", "OpenMP threads of the emulation"},
};

static const char usage_line[] = "--out DIR [--n LIST] [--masks LIST] [--sigma LIST] [--scale-exp S] [--width W]";
static const char description[] =
    "For every (mask, sigma, n) cell: draw inputs, run the recipe with dq_reduce = fixed\n"
    "and the probe on, and write one row per probed scale exponent s (S-8..S+8):\n"
    "tiles, fail_tiles (tiles failing the conversion or recovered-sum budget, which\n"
    "would be recomputed in FP64), fail_frac, and red_rel_l2: the relative l2\n"
    "distance of the reduced FP32 dQ accumulator (before scale and BF16 rounding)\n"
    "from the FP32 ascending sum of the same partials, failing tiles counted at their\n"
    "FP64 recompute (0). Rows go to DIR/results.csv through the sweep engine\n"
    "(resumable). Plot: gnuplot -e \"csv='DIR/results.csv'; out='x.png'\" plots/dqbudget.gp";

typedef struct {
  aa_recipe_t base;
  size_t d, heads;
  uint64_t seed;
} ctx_t;

static int eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *vctx) {
  const ctx_t *cx = vctx;
  size_t n = (size_t)aa_cell_int(cell, "n", 0);
  double sigma = aa_cell_double(cell, "sigma", 1);
  int causal = strcmp(aa_cell_str(cell, "mask", "dense"), "causal") == 0;
  aa_error_t *err = aa_sweep_rows_error(rows);
  cli_inputs_t in = {0};
  aa_problem_t pb;
  aa_attn_result_t res;
  int st = cli_inputs_draw(&in, aa_cell_seed(cell) ^ cx->seed, 0, sigma, n, cx->d, cx->heads, cx->heads, 0,
                           cx->base.io_fmt, err);
  if (st != AA_OK) return st;
  aa_problem_init(&pb, n, n, cx->d, cx->heads, cx->heads);
  pb.causal = causal;
  double t0 = cli_now();
  st = aa_attn_run(&res, &pb, &cx->base, &in.q, &in.k, &in.v, &in.dO, err);
  double secs = cli_now() - t0;
  cli_inputs_free(&in);
  if (st != AA_OK) return st;
  const aa_reduce_stats_t *s = &res.dq_reduce;
  for (int k = 0; k < AA_REDUCE_PROBE; k++) {
    aa_sweep_row_new(rows);
    aa_sweep_set_int(rows, "scale_exp", cx->base.bwd_dq_reduce.scale_exp + k - AA_REDUCE_PROBE / 2);
    aa_sweep_set_int(rows, "width", cx->base.bwd_dq_reduce.width);
    aa_sweep_set_int(rows, "tiles", (int64_t)s->probe_tiles);
    aa_sweep_set_int(rows, "fail_tiles", (int64_t)s->probe_fail[k]);
    aa_sweep_set_double(rows, "fail_frac", s->probe_tiles ? (double)s->probe_fail[k] / (double)s->probe_tiles : 0);
    aa_sweep_set_double(rows, "red_rel_l2", s->probe_ref2 > 0 ? sqrt(s->probe_err2[k] / s->probe_ref2) : 0);
    aa_sweep_set_double(rows, "seconds", secs);
  }
  aa_attn_result_free(&res);
  return AA_OK;
}

/* Split "a,b,c" into at most max items (pointers into buf). */
static size_t split(char *buf, char **items, size_t max) {
  size_t k = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL && k < max; t = strtok_r(NULL, ",", &save))
    items[k++] = t;
  return k;
}

int aa_cmd_dqbudget(int argc, char **argv) {
  const char *cmd = "dq-budget";
  cli_args_t a;
  aa_error_t err = {{0}};
  ctx_t cx;
  size_t threads = 0, width = 16;
  double sc = 12;
  int rc, status = 2;
  const char *s, *out;
  char nbuf[512], mbuf[64], sbuf[512];
  char *items[32];
  int64_t ns[32];
  double sigmas[32];
  const char *masks[2];
  size_t nn, nm, nsig;
  aa_sweep_t *sw = NULL;

  if ((rc = cli_args_parse(&a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, argv)) >= 0)
    return rc;
  if ((out = cli_get(&a, "out")) == NULL) {
    cli_error(cmd, "--out DIR is required");
    return 2;
  }
  memset(&cx, 0, sizeof cx);
  cx.d = 128;
  cx.heads = 1;
  cx.seed = 1;
  if (aa_recipe_preset(&cx.base, (s = cli_get(&a, "variant")) ? s : "fa2-fixed", &err) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    return 2;
  }
  if ((s = cli_get(&a, "d")) && cli_size(&cx.d, cmd, "d", s, 1, 4096)) return 2;
  if ((s = cli_get(&a, "heads")) && cli_size(&cx.heads, cmd, "heads", s, 1, 4096)) return 2;
  if ((s = cli_get(&a, "width")) && cli_size(&width, cmd, "width", s, 2, 32)) return 2;
  if ((s = cli_get(&a, "scale-exp")) && cli_double(&sc, cmd, "scale-exp", s, -190, 190, 0)) return 2;
  if ((s = cli_get(&a, "seed")) && cli_u64(&cx.seed, cmd, "seed", s)) return 2;
  if ((s = cli_get(&a, "threads")) && cli_size(&threads, cmd, "threads", s, 0, 4096)) return 2;
  cx.base.bwd_dq_reduce.kind = AA_REDUCE_FIXED;
  cx.base.bwd_dq_reduce.width = (unsigned)width;
  cx.base.bwd_dq_reduce.scale_exp = (int)lround(sc);
  cx.base.bwd_dq_reduce.probe = 1;
  if ((rc = aa_recipe_check(&cx.base, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    return 2;
  }
  snprintf(nbuf, sizeof nbuf, "%s", (s = cli_get(&a, "n")) ? s : "1024,2048,4096,8192,16384,32768");
  nn = split(nbuf, items, 32);
  for (size_t i = 0; i < nn; i++) {
    size_t v;
    if (cli_size(&v, cmd, "n", items[i], 1, 1u << 20)) return 2;
    ns[i] = (int64_t)v;
  }
  snprintf(mbuf, sizeof mbuf, "%s", (s = cli_get(&a, "masks")) ? s : "dense,causal");
  nm = split(mbuf, items, 2);
  for (size_t i = 0; i < nm; i++) {
    if (strcmp(items[i], "dense") && strcmp(items[i], "causal")) {
      cli_error(cmd, "--masks: '%s' is not dense or causal", items[i]);
      return 2;
    }
    masks[i] = items[i];
  }
  snprintf(sbuf, sizeof sbuf, "%s", (s = cli_get(&a, "sigma")) ? s : "1");
  nsig = split(sbuf, items, 32);
  for (size_t i = 0; i < nsig; i++)
    if (cli_double(&sigmas[i], cmd, "sigma", items[i], 0, 1e300, 1)) return 2;
  cli_set_threads(threads);

  const char *cols[] = {"scale_exp", "width", "tiles", "fail_tiles", "fail_frac", "red_rel_l2"};
  if ((rc = aa_sweep_new(&sw, &err)) || (rc = aa_sweep_axis_str(sw, "mask", masks, nm, 0, &err)) ||
      (rc = aa_sweep_axis_double(sw, "sigma", sigmas, nsig, 0, &err)) ||
      (rc = aa_sweep_axis_int(sw, "n", ns, nn, 0, &err)))
    goto fail;
  for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
    if ((rc = aa_sweep_column(sw, cols[i], 0, &err))) goto fail;
  if ((rc = aa_sweep_column(sw, "seconds", AA_COL_TIMING, &err)) || (rc = aa_sweep_build(sw, NULL, NULL, &err)))
    goto fail;
  aa_sweep_opts_t o;
  aa_sweep_opts_init(&o);
  o.out_dir = out;
  o.resume = cli_get(&a, "resume") != NULL;
  aa_sweep_progress_t stats;
  if ((rc = aa_sweep_run(&stats, sw, eval, &cx, &o, &err))) goto fail;
  printf("dq-budget: %zu cells (%zu resumed) in %s/results.csv\n", stats.total, stats.skipped, out);
  status = 0;
  aa_sweep_free(sw);
  return status;
fail:
  cli_error(cmd, "%s", err.msg);
  aa_sweep_free(sw);
  return cli_exit_status(rc);
}
