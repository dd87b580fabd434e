/* attnacc: the `closest` command: which preset a user's kernel is closest to, by its error profile per tensor. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/features.h"
#include "cli/limits.h"
#include "cli/sources.h"
#include "commands.h"

static const cli_opt_t opts[] = {
    {"inputs", "PATH", NULL, "q, k, v, do: a folder of NAME.npy, an .npz or a .safetensors file (required)"},
    {"grads", "PATH", NULL, "the kernel's dq, dk, dv [, o], the same kinds of PATH (required)"},
    {"layout", "bhnd|bnhd|hnd|nd|nhd", "inferred",
     "axes of every array: [B,H,N,d], [B,N,H,d], [H,N,d], [N,d] or [N,H,d] (3 axes: hnd unless nhd is given)"},
    {"bf16-bits", NULL, NULL, "read '<i2' (int16) arrays as BF16 bit patterns (torch: t.view(torch.int16))"},
    {"variants", "SPEC[,SPEC...]", "fa2,fa2-h100,efficient-h100,cudnn-h100,flex-h100,fa3-fp8,naive-bf16",
     "presets, recipe files or NAME:key=value specs to rank"},
    CLI_OPT_CAUSAL,
    {"window", "W|L,R", "0 = none", "sliding window of W keys (needs --causal), or flash-attn window_size L,R"},
    FEATURES_CLI_PROBLEM_OPTS,
    CLI_OPT_SCALE,
    CLI_OPTS_ORACLE,
    {"threads", "T", "0 = all", "threads for the oracle and the emulation (results do not depend on it)"},
};

static const char usage_line[] = "--inputs PATH --grads PATH [--variants SPEC,...] [OPTIONS]";
static const char description[] =
    "Score a kernel's outputs against the oracle and against each preset's prediction\n"
    "on the same inputs. --inputs holds the q, k, v, do the kernel ran on, --grads its\n"
    "dq, dk, dv and optionally o, each as score reads them: a folder of NAME.npy, an .npz\n"
    "archive or a .safetensors file; dtypes '<u2' BF16 bits, '<f2', '<f4', '<f8' ('<i2' as\n"
    "BF16 bits with --bf16-bits); layouts [B, H, N, d], [B, N, H, d], [H, N, d], [N, d],\n"
    "[N, H, d] (--layout, else inferred when only one fits); k and v may have fewer heads.\n"
    "For every recipe of --variants the emulation runs on the inputs, and its rel_l2 per\n"
    "tensor is set beside the kernel's: ratio = preset / kernel. The distance of a preset\n"
    "is the RMS over the tensors of log(ratio), printed as a percentage (exp(rms) - 1);\n"
    "the presets are listed from the closest. Two presets within 0.5 % of each other are\n"
    "not told apart by the profile at this size: then more inputs (other seeds, longer n,\n"
    "causal) decide. The problem's options are score's (--causal, --window W or L,R,\n"
    "--causal-align, --softcap, --alibi*, --scale, --oracle, --threads).\n"
    "Exit status: 0 done, 2 bad usage or input, 1 failure while computing.";

#define CLOSEST_MAX 48
static const char *const outs[4] = {"o", "dq", "dk", "dv"};
static const char default_variants[] = "fa2,fa2-h100,efficient-h100,cudnn-h100,flex-h100,fa3-fp8,naive-bf16";

/* One closest run: options, the recipes, the arrays, the problem, the oracle, the kernel's and each recipe's
   evaluation. */
typedef struct {
  const char *cmd;
  cli_args_t a;
  aa_error_t err;
  aa_recipe_t rs[CLOSEST_MAX];
  size_t nr, threads;
  cli_sources_t src;
  features_cli_t fc;
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  int have_oracle;
  double oracle_seconds;
  cli_variant_t kernel, v[CLOSEST_MAX];
} closest_t;

static double rel(const cli_variant_t *v, const char *name) {
  for (int i = 0; i < v->nout; i++)
    if (!strcmp(v->out[i].name, name)) return v->out[i].m.rel_l2;
  return NAN;
}

/* The kernel's rel_l2, then the recipes from the closest. */
static int print_ranking(const closest_t *x) {
  double kr[4], dist[CLOSEST_MAX];
  size_t order[CLOSEST_MAX], n = x->nr;
  const aa_problem_t *pb = &x->pb;
  printf("problem: n_q=%zu n_k=%zu d=%zu heads=%zu kv_heads=%zu causal=%s inputs=%s\n", pb->n_q, pb->n_k, pb->d,
         pb->heads, pb->kv_heads, pb->causal ? "yes" : "no", x->src.inputs_src);
  printf("layout: %s %s; kernel (%s) rel_l2:", aa_layout_name(x->src.layout), aa_layout_axes(x->src.layout),
         x->src.grads_src);
  for (int o = 0; o < 4; o++)
    kr[o] = rel(&x->kernel, outs[o]), printf(" %s %.4e", outs[o], kr[o]);
  printf("\n%-24s %-10s %-10s %-10s %-10s %s\n", "preset", "o ratio", "dq ratio", "dk ratio", "dv ratio", "distance");
  for (size_t i = 0; i < n; i++) {
    double s = 0;
    int m = 0;
    for (int o = 0; o < 4; o++) {
      double r = rel(&x->v[i], outs[o]) / kr[o];
      if (isfinite(r) && r > 0) s += log(r) * log(r), m++;
    }
    dist[i] = m ? exp(sqrt(s / m)) - 1 : INFINITY;
    order[i] = i;
  }
  for (size_t i = 1; i < n; i++) /* insertion sort by distance: n is small */
    for (size_t j = i; j > 0 && dist[order[j]] < dist[order[j - 1]]; j--) {
      size_t t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  for (size_t k = 0; k < n; k++) {
    size_t i = order[k];
    printf("%-24s", x->rs[i].name);
    for (int o = 0; o < 4; o++)
      printf(" %-10.4f", rel(&x->v[i], outs[o]) / kr[o]);
    printf(" %.2f%%\n", 100 * dist[i]);
  }
  if (n > 0) {
    printf("closest: %s (%.2f%%)", x->rs[order[0]].name, 100 * dist[order[0]]);
    if (n > 1 && dist[order[1]] - dist[order[0]] < 0.005)
      printf("; %s is within 0.5%% of it: not told apart by this profile", x->rs[order[1]].name);
    printf("\n");
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

static int fail(closest_t *x) {
  cli_error(x->cmd, "%s", x->err.msg);
  return 2;
}

/* --variants into recipes. */
static int closest_recipes(closest_t *x) {
  const char *variants = cli_get(&x->a, "variants") ? cli_get(&x->a, "variants") : default_variants;
  for (const char *p = variants; p != NULL;) {
    char tok[4096];
    size_t len = aa_recipe_spec_next(tok, sizeof tok, &p);
    if (len == 0 || len >= sizeof tok) {
      cli_error(x->cmd, "--variants: empty or overlong item in '%s'", variants);
      return 2;
    }
    if (x->nr == CLOSEST_MAX) {
      cli_error(x->cmd, "--variants: more than %d recipes", CLOSEST_MAX);
      return 2;
    }
    if (aa_recipe_from_spec(&x->rs[x->nr], tok, &x->err) != AA_OK) {
      cli_error(x->cmd, "--variants: %s", x->err.msg);
      return 2;
    }
    x->nr++;
  }
  return 0;
}

/* Options, then the inputs (score's reader), the problem and its checks. */
static int closest_setup(closest_t *x) {
  const char *s, *in = cli_get(&x->a, "inputs"), *gr = cli_get(&x->a, "grads");
  const aa_dims_t *q = &x->src.qd, *k = &x->src.kd;
  if (in == NULL || gr == NULL) {
    cli_error(x->cmd, "give --inputs PATH (what the kernel ran on) and --grads PATH (its dq, dk, dv [, o])");
    return 2;
  }
  x->src.layout = AA_LAYOUT_AUTO;
  if ((s = cli_get(&x->a, "layout")) && aa_layout_from_name(&x->src.layout, s) != AA_OK) {
    cli_error(x->cmd, "--layout: '%s' is not bhnd, bnhd, hnd, nd, nhd or auto", s);
    return 2;
  }
  if (cli_get(&x->a, "bf16-bits") != NULL) x->src.flags |= AA_NPY_BF16_BITS;
  if ((s = cli_get(&x->a, "threads")) && cli_size(&x->threads, x->cmd, "threads", s, 0, 4096)) return 2;
  if (cli_oracle_opts(&x->oo, &x->a, x->cmd)) return 2;
  x->oo.threads = (int)x->threads;
  if (closest_recipes(x) || cli_sources_open(&x->src, x->cmd, in, gr) || cli_sources_read_inputs(&x->src)) return 2;
  /* the kernel's outputs and one set per recipe */
  if (lim_check(x->cmd, &x->a, q->n, k->n, q->d, q->b * q->h, k->b * k->h, 1 + x->nr, x->oo.threads)) return 2;
  if (cli_sources_import_inputs(&x->src) || cli_sources_problem(&x->pb, &x->fc, &x->src, &x->a)) return 2;
  if (aa_problem_check(&x->pb, &x->err) != AA_OK || cli_inputs_check_finite(&x->src.in, &x->err) != AA_OK)
    return fail(x);
  return cli_sources_read_outputs(&x->src);
}

/* The oracle once; the kernel's outputs and every recipe's against it. */
static int closest_evaluate(closest_t *x) {
  cli_set_threads(x->threads);
  if (cli_oracle_run(&x->oracle, &x->oracle_seconds, x->cmd, &x->pb, &x->src.in, &x->oo) != 0) return 2;
  x->have_oracle = 1;
  if (aa_eval_given(&x->kernel, x->src.g, &x->oracle, NULL, &x->err) != AA_OK) return fail(x);
  for (size_t i = 0; i < x->nr; i++) {
    aa_attn_result_t res;
    int rc = cli_run_variant(&x->v[i], &res, &x->rs[i], &x->pb, &x->src.in, &x->oracle, &x->err);
    aa_attn_result_free(&res);
    if (rc != AA_OK) {
      cli_error(x->cmd, "%s: %s", x->rs[i].name, x->err.msg);
      return rc == AA_ENOMEM ? 1 : 2;
    }
  }
  return 0;
}

int aa_cmd_closest(int argc, char **argv) {
  closest_t *x = calloc(1, sizeof *x);
  int rc;
  if (x == NULL) {
    cli_error("closest", "out of memory");
    return 1;
  }
  x->cmd = "closest";
  rc = cli_args_parse(&x->a, x->cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, argv);
  if (rc < 0) {
    rc = closest_setup(x);
    if (rc == 0) rc = closest_evaluate(x);
    if (rc == 0) rc = print_ranking(x);
  }
  cli_variant_free(&x->kernel);
  for (size_t i = 0; i < x->nr; i++)
    cli_variant_free(&x->v[i]);
  if (x->have_oracle) aa_oracle_result_free(&x->oracle);
  features_cli_free(&x->fc);
  cli_sources_free(&x->src);
  free(x);
  return rc;
}
