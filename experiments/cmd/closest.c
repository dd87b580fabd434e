/* attnacc: the `closest` command: which preset a user's kernel is closest to, by its error profile per tensor. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commands.h"

static const char usage_line[] =
    "usage: attnacc closest --inputs DIR --grads DIR [--variants SPEC,...] [run's options]";
static const char description[] =
    "Score a kernel's outputs against the oracle and against each preset's prediction\n"
    "on the same inputs: DIR of --grads holds the kernel's dq.npy, dk.npy, dv.npy and\n"
    "optionally o.npy ([N, d] or [H, N, d], the shapes of the inputs; '<u2' BF16 bits,\n"
    "'<f2', '<f4', '<f8'), --inputs the q, k, v, do it ran on (as `attnacc run --inputs`).\n"
    "For every preset of --variants (default: the kernel presets fa2, fa2-h100,\n"
    "efficient-h100, cudnn-h100, flex-h100, fa3-fp8 and naive-bf16) the emulation runs\n"
    "on the inputs, and its rel_l2 per tensor is set beside the kernel's: ratio =\n"
    "preset / kernel. The distance of a preset is the RMS over the tensors of\n"
    "log(ratio), printed as a percentage (exp(rms) - 1); the presets are listed from\n"
    "the closest. Two presets within 0.5 % of each other are not told apart by the\n"
    "profile at this size: then more inputs (other seeds, longer n, causal) decide.\n"
    "Other options are those of attnacc run (--causal, --window, --scale, --threads,\n"
    "--oracle...); --save, --json, --out and --recipe are refused.\n"
    "Exit status: 0 done, 2 bad usage or input, 1 failure while computing.";

#define CLOSEST_MAX 48
static const char *const outs[4] = {"o", "dq", "dk", "dv"};
static const char default_variants[] = "fa2,fa2-h100,efficient-h100,cudnn-h100,flex-h100,fa3-fp8,naive-bf16";

typedef struct {
  const char *grads;
} closest_t;

static double rel(const cli_variant_t *v, const char *name) {
  for (int i = 0; i < v->nout; i++)
    if (!strcmp(v->out[i].name, name)) return v->out[i].m.rel_l2;
  return NAN;
}

/* The kernel's rel_l2 per tensor (NaN for an absent optional o); 0 or the exit status after a message. */
static int kernel_rel(double kr[4], const char *cmd, const char *dir, const aa_oracle_result_t *orc) {
  const aa_oracle_out_t *ref[4] = {&orc->o, &orc->dq, &orc->dk, &orc->dv};
  for (int o = 0; o < 4; o++) {
    char path[4096];
    aa_tensor_t t = {0};
    aa_error_t err = {{0}};
    cli_out_t co;
    kr[o] = NAN;
    snprintf(path, sizeof path, "%s/%s.npy", dir, outs[o]);
    if (o == 0) {
      FILE *f = fopen(path, "rb");
      if (f == NULL) continue; /* o is optional */
      fclose(f);
    }
    int rc = aa_npy_read(&t, path, &err);
    if (rc == AA_OK) rc = cli_as_3d(&t, path, &err);
    if (rc == AA_OK) rc = cli_compare(&co, outs[o], &t, ref[o], &err);
    aa_tensor_free(&t);
    if (rc != AA_OK) {
      cli_error(cmd, "--grads: %s", err.msg);
      return 2;
    }
    kr[o] = co.m.rel_l2;
  }
  return 0;
}

static int report(void *ctx, const cli_report_t *rep, const aa_recipe_t *recipes, const cli_variant_t *vs, size_t n) {
  const closest_t *x = ctx;
  double kr[4], dist[CLOSEST_MAX];
  size_t order[CLOSEST_MAX];
  int st = kernel_rel(kr, rep->cmd, x->grads, rep->oracle);
  if (st != 0) return st;
  const aa_problem_t *pb = rep->pb;
  printf("problem: n_q=%zu n_k=%zu d=%zu heads=%zu kv_heads=%zu causal=%s inputs=%s\n", pb->n_q, pb->n_k, pb->d,
         pb->heads, pb->kv_heads, pb->causal ? "yes" : "no", rep->inputs_dir != NULL ? rep->inputs_dir : "drawn");
  printf("kernel (%s) rel_l2:", x->grads);
  for (int o = 0; o < 4; o++)
    printf(" %s %.4e", outs[o], kr[o]);
  printf("\n%-24s %-10s %-10s %-10s %-10s %s\n", "preset", "o ratio", "dq ratio", "dk ratio", "dv ratio", "distance");
  for (size_t i = 0; i < n; i++) {
    double s = 0;
    int m = 0;
    for (int o = 0; o < 4; o++) {
      double r = rel(&vs[i], outs[o]) / kr[o];
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
    printf("%-24s", recipes[i].name);
    for (int o = 0; o < 4; o++)
      printf(" %-10.4f", rel(&vs[i], outs[o]) / kr[o]);
    printf(" %.2f%%\n", 100 * dist[i]);
  }
  if (n > 0) {
    printf("closest: %s (%.2f%%)", recipes[order[0]].name, 100 * dist[order[0]]);
    if (n > 1 && dist[order[1]] - dist[order[0]] < 0.005)
      printf("; %s is within 0.5%% of it: not told apart by this profile", recipes[order[1]].name);
    printf("\n");
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

/* argv without --grads and --variants (kept for cli_run_main), those two read here. */
static int split_args(char **rest, int *nrest, const char **grads, const char **variants, const char *cmd, int argc,
                      char **argv) {
  static const char *const refused[] = {"recipe", "json", "out", "save", "save-oracle", "variant"};
  *nrest = 0;
  rest[(*nrest)++] = argv[0];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], **dst = NULL;
    if (!strcmp(a, "--grads")) dst = grads;
    if (!strcmp(a, "--variants")) dst = variants;
    if (dst != NULL) {
      if (i + 1 >= argc) {
        cli_error(cmd, "%s needs a value", a);
        return 2;
      }
      *dst = argv[++i];
      continue;
    }
    for (size_t j = 0; j < sizeof refused / sizeof refused[0]; j++) {
      size_t l = strlen(refused[j]);
      if (!strncmp(a, "--", 2) && !strncmp(a + 2, refused[j], l) && (a[2 + l] == '\0' || a[2 + l] == '=')) {
        cli_error(cmd, "--%s is not available in closest", refused[j]);
        return 2;
      }
    }
    rest[(*nrest)++] = argv[i];
  }
  return 0;
}

int aa_cmd_closest(int argc, char **argv) {
  const char *cmd = "closest", *grads = NULL, *variants = default_variants;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("%s\n\n%s\n", usage_line, description);
      return fflush(stdout) == 0 ? 0 : 1;
    }
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  aa_recipe_t *rs = calloc(CLOSEST_MAX, sizeof *rs);
  int nrest = 0, status = 2, have_inputs = 0;
  size_t nr = 0;
  if (rest == NULL || rs == NULL) {
    cli_error(cmd, "out of memory");
    free(rest), free(rs);
    return 1;
  }
  if ((status = split_args(rest, &nrest, &grads, &variants, cmd, argc, argv)) != 0) goto out;
  status = 2;
  for (int i = 1; i < nrest; i++)
    have_inputs |= !strcmp(rest[i], "--inputs") || !strncmp(rest[i], "--inputs=", 9);
  if (grads == NULL || !have_inputs) {
    cli_error(cmd, "give --inputs DIR (what the kernel ran on) and --grads DIR (its dq, dk, dv [, o])");
    goto out;
  }
  for (const char *p = variants; p != NULL;) {
    char tok[4096];
    size_t len = aa_recipe_spec_next(tok, sizeof tok, &p);
    if (len == 0 || len >= sizeof tok) {
      cli_error(cmd, "--variants: empty or overlong item in '%s'", variants);
      goto out;
    }
    aa_error_t err = {{0}};
    if (nr == CLOSEST_MAX) {
      cli_error(cmd, "--variants: more than %d recipes", CLOSEST_MAX);
      goto out;
    }
    if (aa_recipe_from_spec(&rs[nr], tok, &err) != AA_OK) {
      cli_error(cmd, "--variants: %s", err.msg);
      goto out;
    }
    nr++;
  }
  closest_t x = {grads};
  status = cli_run_main(cmd, rs, nr, report, &x, nrest, rest);
out:
  free(rest);
  free(rs);
  return status;
}
