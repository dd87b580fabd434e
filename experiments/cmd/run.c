/* attnacc: the `run` command: draw or read one problem, run the oracle once, emulate each variant and report the
 * metrics. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/dropout.h"
#include "cli/features.h"
#include "cli/limits.h"
#include "cli/masks.h"
#include "commands.h"

#define MAX_VARIANTS 32

static const cli_opt_t opts[] = {
    {"variant", "SPEC[,SPEC...]", NULL,
     "recipes to emulate: preset NAMEs (attnacc list shows them), recipe files (ending in .recipe or with a /) "
     "or NAME:key=value,... (the preset with overrides, named as written)"},
    {"recipe", "FILE", NULL, "a recipe file (key = value lines) to emulate, after the --variant presets"},
    CLI_OPTS_PROBLEM_SHAPE,
    CLI_OPTS_PROBLEM_DRAW,
    CLI_OPT_SCALE,
    CLI_OPT_CAUSAL,
    {"window", "W|L,R", "0 = none", "sliding window of W keys (needs --causal), or flash-attn window_size L,R"},
    {"sinks", "K", "0", "attention-sink logits per head, drawn N(0,1)"},
    CLI_OPTS_ORACLE,
    {"inputs", "DIR", NULL, "read q.npy k.npy v.npy do.npy [sinks.npy] from DIR instead of drawing"},
    {"json", NULL, NULL, "print the JSON document (experiments/README-json.md) instead of the table"},
    {"out", "FILE", NULL, "also write the JSON document to FILE (atomically)"},
    {"save", "DIR", NULL,
     "write the inputs and each variant's o/lse/dq/dk/dv as .npy into DIR (lse: the natural-log LSE the backward "
     "read, in fwd.lse_fmt)"},
    {"save-oracle", "DIR", NULL, "write the oracle's o/lse/dq/dk/dv (FP64, '<f8') into DIR"},
    {"threads", "T", "0 = all", "threads for the oracle and the emulation (results do not depend on it)"},
    DROPOUT_CLI_OPTS,
    FEATURES_CLI_OPTS,
    /* masks (experiments/cli/masks.c) */
    MASKS_CLI_OPTS,
};

static const char usage_line[] = "--variant SPEC[,SPEC...] | --recipe FILE [OPTIONS]";
static const char description[] =
    "Emulate recipes (variants) on one attention problem and compare their outputs with\n"
    "the exact oracle.\n\n"
    "Each variant's o, dq, dk, dv (and dsinks) give one row each: rel_l2 (over finite\n"
    "elements), max_abs, max_ulp and mean_ulp (ULPs of the recipe's output format, bf16\n"
    "or fp32, against the correctly rounded oracle value), NaN/Inf counts, pass (every\n"
    "element has |a - b| <= 0.01 + 0.01 |b|; any NaN/Inf fails) and the flash-attention\n"
    "rule (max_abs <= 2x (o) or 3x (gradients) the max_abs of naive-bf16 on the same\n"
    "inputs; only when the inputs are bf16).\n\n"
    "Inputs: q, k, v, dO (and sinks) are drawn from pcg64 streams\n"
    "aa_rng_derive(seed, {id, head}) with id 0 = q, 1 = k, 2 = v, 3 = dO, 4 = sinks,\n"
    "element by element in row-major [n, d] order, as sigma*N(0,1) (normal) or\n"
    "sigma*U[0,1), i.e. uniform on [0, sigma) (uniform), or sigma*(N(0,1) + 10 N(0,1) B)\n"
    "with B a Bernoulli(0.001) draw (outlier: the FA3 paper's FP8 setting; three draws\n"
    "per element: normal, uniform, outlier normal), or constant, near-constant, huge-keys,\n"
    "massive (magnitudes where kernels give NaN: every value sigma; sigma (1 + z/256);\n"
    "each key row x64 with probability 1/64; +32 sigma on channel 0 of head 0 of q and\n"
    "k; lib/layout.h), formed in double and rounded\n"
    "to nearest even into the narrowest io format of the variants (bf16 for the\n"
    "presets but exact-fp64; it must be contained in the others). Sink logits are\n"
    "N(0,1), not scaled by sigma. With --inputs, q.npy and do.npy are [N, d] or\n"
    "[H, N, d], k.npy and v.npy [N_k, d] or [HKV, N_k, d], sinks.npy [H, K]; values not\n"
    "in that format are rounded to it (a note says how many). Exit status: 0 done\n"
    "(whatever the metrics), 2 bad "
    "usage or input, 1 failure while computing or writing." DROPOUT_CLI_HELP FEATURES_CLI_HELP MASKS_CLI_HELP;

static void list_presets(char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < aa_recipe_preset_count() && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", aa_recipe_preset_name(i));
}

/* 1 when every value of format a is a value of format b. */
static int fmt_within(aa_fmt_t a, aa_fmt_t b) {
  const aa_fmt_info_t *x = aa_fmt_info(a), *y = aa_fmt_info(b);
  if (a == b) return 1;
  if (x == NULL || y == NULL) return 0;
  return x->prec <= y->prec && x->emax <= y->emax && x->emin >= y->emin && x->emin - x->prec >= y->emin - y->prec &&
         (!x->has_inf || y->has_inf);
}

/* Everything one run holds, so that each step below reads as one thing and run_free releases it all. */
typedef struct {
  const char *cmd;
  cli_args_t a;
  aa_recipe_t *recipes; /* nrec, and room for one more (the naive reference) */
  size_t nrec;
  aa_fmt_t io_fmt; /* the narrowest io format of the recipes: the inputs' */
  cli_problem_opts_t po;
  size_t n_q, n_k, num_sinks, threads;
  features_cli_t fc;
  masks_cli_t mc; /* --mask, --key-len, --logit-offset */
  dropout_cli_t dc;
  const char *inputs_dir, *out_file, *save_dir, *save_oracle;
  cli_inputs_t in;
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  int have_oracle;
  double oracle_seconds;
  cli_variant_t *vs, naive_v;
  aa_attn_result_t *res, naive_res;
  int naive_is; /* index of naive-bf16 among the recipes, or -1 */
  char *jtext;  /* the JSON document (--json, --out) */
  size_t jlen;
  aa_error_t err;
} run_t;

static void run_free(run_t *R) {
  free(R->jtext);
  dropout_cli_free(&R->dc);
  features_cli_free(&R->fc);
  masks_cli_free(&R->mc);
  for (size_t i = 0; R->vs != NULL && i < R->nrec; i++)
    cli_variant_free(&R->vs[i]);
  for (size_t i = 0; R->res != NULL && i < R->nrec; i++)
    aa_attn_result_free(&R->res[i]);
  aa_attn_result_free(&R->naive_res);
  cli_variant_free(&R->naive_v);
  free(R->vs);
  free(R->res);
  if (R->have_oracle) aa_oracle_result_free(&R->oracle);
  cli_inputs_free(&R->in);
  free(R->recipes);
}

/* A library failure: its message, and the exit status for it. */
static int fail(const run_t *R, int rc) {
  cli_error(R->cmd, "%s", R->err.msg);
  return cli_exit_status(rc);
}

/* One --variant spec as recipe number nrec (unknown names list the presets). */
static int add_spec(run_t *R, const char *name) {
  int rc;
  if (R->nrec == MAX_VARIANTS) {
    cli_error(R->cmd, "--variant: at most %d variants per run", MAX_VARIANTS);
    return 2;
  }
  for (size_t i = 0; i < R->nrec; i++)
    if (strcmp(R->recipes[i].name, name) == 0) {
      cli_error(R->cmd, "--variant: '%s' is given twice", name);
      return 2;
    }
  if ((rc = aa_recipe_from_spec(&R->recipes[R->nrec], name, &R->err)) != AA_OK) {
    char known[1024];
    list_presets(known, sizeof known);
    if (rc == AA_ENOTFOUND)
      cli_error(R->cmd, "unknown variant '%s' (known: %s)", name, known);
    else
      cli_error(R->cmd, "--variant: %s", R->err.msg);
    return cli_exit_status(rc);
  }
  R->nrec++;
  return 0;
}

/* --variant SPEC[,SPEC...], split by the library's rule (aa_recipe_spec_next). */
static int add_variants(run_t *R, const char *s) {
  for (const char *p = s; p != NULL;) {
    char name[128];
    size_t len = aa_recipe_spec_next(name, sizeof name, &p);
    int st;
    if (len == 0 || len >= sizeof name) {
      cli_error(R->cmd, "--variant: empty or overlong name in '%s'", s);
      return 2;
    }
    if ((st = add_spec(R, name)) != 0) return st;
  }
  return 0;
}

/* --recipe FILE as recipe number nrec. A file that starts from a preset
   keeps the preset's name unless it sets its own; it is named after the
   file when it differs from that preset or repeats a --variant name, so the
   rows stay distinguishable. */
static int add_recipe_file(run_t *R, const char *path) {
  aa_recipe_t *r = &R->recipes[R->nrec], base;
  int rc, rename;
  if (access(path, R_OK) != 0) {
    cli_error(R->cmd, "--recipe: %s: cannot read the file", path);
    return 2;
  }
  if ((rc = aa_recipe_parse_file(r, path, &R->err)) != AA_OK) return fail(R, rc);
  rename = r->name[0] == '\0';
  for (size_t i = 0; i < R->nrec; i++)
    if (strcmp(R->recipes[i].name, r->name) == 0) rename = 1;
  if (!rename && aa_recipe_preset(&base, r->name, NULL) == AA_OK) rename = !aa_recipe_equal(&base, r);
  if (rename) {
    const char *b = strrchr(path, '/');
    size_t len;
    b = b ? b + 1 : path;
    len = strcspn(b, ".");
    if (len == 0) len = strlen(b);
    if (len >= sizeof r->name) len = sizeof r->name - 1;
    memcpy(r->name, b, len);
    r->name[len] = '\0';
  }
  R->nrec++;
  return 0;
}

/* The inputs are drawn in (or rounded to) the narrowest io format, which
   must be contained in every other (bf16 in fp32 in fp64), so that all
   variants and the oracle see the same values. */
static int common_io_fmt(run_t *R) {
  R->io_fmt = R->recipes[0].io_fmt;
  for (size_t i = 1; i < R->nrec; i++)
    if (fmt_within(R->recipes[i].io_fmt, R->io_fmt)) R->io_fmt = R->recipes[i].io_fmt;
  for (size_t i = 0; i < R->nrec; i++)
    if (!fmt_within(R->io_fmt, R->recipes[i].io_fmt)) {
      cli_error(R->cmd,
                "variants %s and %s have io formats %s and %s, neither of which holds the other: run them separately",
                R->recipes[0].name, R->recipes[i].name, cli_fmt_name(R->recipes[0].io_fmt),
                cli_fmt_name(R->recipes[i].io_fmt));
      return 2;
    }
  return 0;
}

/* The recipes: given by the caller (explain), or --variant and --recipe. */
static int take_recipes(run_t *R, const aa_recipe_t *given, size_t ngiven) {
  const char *s;
  int st;
  if ((R->recipes = calloc((given != NULL ? ngiven : MAX_VARIANTS) + 1, sizeof *R->recipes)) == NULL) {
    cli_error(R->cmd, "out of memory");
    return 1;
  }
  if (given != NULL) {
    memcpy(R->recipes, given, ngiven * sizeof *R->recipes);
    R->nrec = ngiven;
  } else if ((s = cli_get(&R->a, "variant")) != NULL && (st = add_variants(R, s)) != 0) {
    return st;
  }
  if (given == NULL && (s = cli_get(&R->a, "recipe")) != NULL && (st = add_recipe_file(R, s)) != 0) return st;
  if (R->nrec == 0) {
    cli_error(R->cmd, "give --variant SPEC[,SPEC...] or --recipe FILE (attnacc list shows the presets)");
    return 2;
  }
  return common_io_fmt(R);
}

/* The numbers and paths of the options; every output must be creatable
   before any work is done. */
static int read_options(run_t *R) {
  const cli_args_t *a = &R->a;
  const char *s;
  if (cli_problem_opts_parse(&R->po, a, R->cmd, SIZE_MAX, SIZE_MAX)) return 2;
  R->n_q = R->n_k = R->po.n;
  if (features_cli_lengths(&R->fc, R->cmd, a, &R->n_q, &R->n_k)) return 2;
  R->po.n = R->n_q > R->n_k ? R->n_q : R->n_k; /* for the size checks */
  if (((s = cli_get(a, "sinks")) && cli_size(&R->num_sinks, R->cmd, "sinks", s, 0, 1u << 20)) ||
      ((s = cli_get(a, "threads")) && cli_size(&R->threads, R->cmd, "threads", s, 0, 4096)) ||
      cli_oracle_opts(&R->oo, a, R->cmd))
    return 2;
  R->oo.threads = (int)R->threads;
  R->inputs_dir = cli_get(a, "inputs");
  R->out_file = cli_get(a, "out");
  R->save_dir = cli_get(a, "save");
  R->save_oracle = cli_get(a, "save-oracle");
  if (R->fc.batch > 0 && (R->save_dir || R->save_oracle || cli_get(a, "dropout") || cli_get(a, "sinks") ||
                          (R->out_file && !cli_get(a, "json")))) {
    cli_error(R->cmd, "--cu-seqlens: --save, --save-oracle, --dropout and --sinks are not available for a varlen "
                      "batch, and --out needs --json");
    return 2;
  }
  if ((R->out_file && cli_check_out_file(R->out_file, &R->err)) ||
      (R->save_dir && cli_check_out_dir(R->save_dir, &R->err)) ||
      (R->save_oracle && cli_check_out_dir(R->save_oracle, &R->err))) {
    cli_error(R->cmd, "%s", R->err.msg);
    return 2;
  }
  return 0;
}

/* Round every input to the io format (values from files); a note says how many changed. */
static void round_inputs(run_t *R) {
  aa_tensor_t *ts[5] = {&R->in.q, &R->in.k, &R->in.v, &R->in.dO, &R->in.sinks};
  aa_round_opts_t ro = {R->io_fmt, AA_RND_NE, 1, 0};
  size_t changed = 0;
  for (int i = 0; i < 5; i++) {
    size_t m = aa_tensor_numel(ts[i]);
    for (size_t j = 0; j < m; j++) {
      double r = aa_round(ts[i]->data[j], &ro, NULL);
      if (r != ts[i]->data[j] && !isnan(r)) changed++;
      ts[i]->data[j] = r;
    }
    ts[i]->fmt = R->io_fmt;
  }
  if (changed > 0)
    fprintf(stderr,
            "attnacc run: note: %zu input values were rounded to %s (the narrowest io format of the variants)\n",
            changed, cli_fmt_name(R->io_fmt));
}

/* --inputs DIR: the files' shapes replace the options, which must agree when given. */
static int load_inputs(run_t *R) {
  static const char *const given[4] = {"n", "d", "heads", "kv-heads"};
  static const char *const file[4] = {"q.npy's n", "q.npy's d", "q.npy's heads", "k.npy's heads"};
  cli_problem_opts_t *p = &R->po;
  int rc;
  if ((rc = cli_inputs_load(&R->in, R->inputs_dir, &R->err)) != AA_OK) {
    cli_error(R->cmd, "%s", R->err.msg);
    return 2;
  }
  size_t want[4] = {p->n, p->d, p->heads, p->kv_heads},
         have[4] = {R->in.q.shape[1], R->in.q.shape[2], R->in.q.shape[0], R->in.k.shape[0]};
  for (int i = 0; i < 4; i++)
    if (cli_get(&R->a, given[i]) != NULL && want[i] != have[i]) {
      cli_error(R->cmd, "--%s %zu does not match %s = %zu", given[i], want[i], file[i], have[i]);
      return 2;
    }
  p->n = have[0], p->d = have[1], p->heads = have[2], p->kv_heads = have[3];
  if (lim_check(R->cmd, &R->a, have[0], R->in.k.shape[1], have[1], have[2], have[3], R->nrec + 1, R->oo.threads))
    return 2;
  if (cli_get(&R->a, "sinks") != NULL && R->num_sinks != (R->in.sinks.data ? R->in.sinks.shape[1] : 0)) {
    cli_error(R->cmd, "--sinks %zu does not match %s", R->num_sinks,
              R->in.sinks.data ? "the K of sinks.npy" : "the inputs (no sinks.npy)");
    return 2;
  }
  R->num_sinks = R->in.sinks.data ? R->in.sinks.shape[1] : 0;
  round_inputs(R);
  return 0;
}

/* The seeded draw, after refusing sizes that cannot work: the operation
   count heads * n^2 * d must fit a size_t, and the estimate of the
   tensors this command holds at once (one output set per variant and
   naive-bf16) and of its time must be within --max-memory and
   --max-seconds (lim_check). */
static int draw_inputs(run_t *R) {
  cli_problem_opts_t *p = &R->po;
  size_t work;
  int rc;
  if (p->kv_heads == 0) p->kv_heads = p->heads;
  if (aa_size_mul(&work, p->heads, p->n) || aa_size_mul(&work, work, p->n) || aa_size_mul(&work, work, p->d)) {
    cli_error(R->cmd,
              "problem too large: n = %zu, d = %zu, heads = %zu, kv_heads = %zu overflows the size arithmetic", p->n,
              p->d, p->heads, p->kv_heads);
    return 2;
  }
  if (lim_check(R->cmd, &R->a, R->n_q, R->n_k, p->d, p->heads, p->kv_heads, R->nrec + 1, R->oo.threads)) return 2;
  if (p->heads % p->kv_heads != 0) {
    cli_error(R->cmd, "--kv-heads %zu does not divide --heads %zu", p->kv_heads, p->heads);
    return 2;
  }
  if ((rc = cli_inputs_draw_qk(&R->in, p->seed, p->dist, p->sigma, R->n_q, R->n_k, p->d, p->heads, p->kv_heads,
                               R->num_sinks, R->io_fmt, &R->err)) != AA_OK)
    return fail(R, rc);
  return 0;
}

/* The problem from the inputs and the options; NaN/Inf inputs refused (the oracle has no meaning for them). */
static int build_problem(run_t *R) {
  aa_problem_t *pb = &R->pb;
  if (R->inputs_dir != NULL && (cli_get(&R->a, "n-q") != NULL || R->fc.batch > 0) &&
      (R->in.q.shape[1] != R->n_q || R->in.k.shape[1] != R->n_k)) {
    cli_error(R->cmd, "--n-q / --cu-seqlens: q.npy has %zu rows and k.npy %zu, the options say %zu and %zu",
              R->in.q.shape[1], R->in.k.shape[1], R->n_q, R->n_k);
    return 2;
  }
  aa_problem_init(pb, R->in.q.shape[1], R->in.k.shape[1], R->po.d, R->po.heads, R->po.kv_heads);
  pb->causal = R->po.causal;
  if (features_cli_problem(&R->fc, R->cmd, &R->a, pb)) return 2;
  if (masks_cli_problem(&R->mc, R->cmd, &R->a, 1, pb)) return 2;
  if (cli_get(&R->a, "scale") != NULL) {
    pb->scale_default = 0;
    pb->scale = R->po.scale;
  }
  pb->num_sinks = R->num_sinks;
  pb->sinks = R->num_sinks ? R->in.sinks.data : NULL;
  if (aa_problem_check(pb, &R->err) != AA_OK) {
    cli_error(R->cmd, "%s", R->err.msg);
    return 2;
  }
  if (cli_inputs_check_finite(&R->in, &R->err) != AA_OK) {
    cli_error(R->cmd, "%s%s", R->inputs_dir ? "" : "the drawn input ", R->err.msg);
    return 2;
  }
  return 0;
}

/* Dropout: the forward's mask goes to the oracle, each variant's backward
   redraws (experiments/cli/dropout.c). */
static int setup_dropout(run_t *R) {
  const cli_args_t *a = &R->a;
  int st, rc;
  if ((st = dropout_cli_setup(&R->dc, R->cmd, cli_get(a, "dropout"), cli_get(a, "dropout-scheme"),
                              cli_get(a, "dropout-seed"), cli_get(a, "dropout-seeds"), R->po.seed,
                              &R->recipes[0].dropout)) != 0)
    return st;
  if (!R->dc.on) return 0;
  for (size_t i = 0; i < R->nrec; i++)
    R->recipes[i].dropout = R->dc.d;
  if ((rc = dropout_cli_draw(&R->dc, &R->pb, &R->err)) != AA_OK) return fail(R, rc);
  return 0;
}

static cli_report_t report_of(const run_t *R) {
  return (cli_report_t){R->cmd,
                        1,
                        R->po.seed,
                        R->inputs_dir ? NULL : cli_dist_name(R->po.dist),
                        R->po.sigma,
                        R->inputs_dir,
                        &R->pb,
                        &R->oo,
                        R->have_oracle ? &R->oracle : NULL,
                        R->oracle_seconds};
}

/* The oracle once, then each variant through the evaluation path (a progress line on a terminal for large problems).
 */
static int evaluate_variants(run_t *R) {
  const aa_problem_t *pb = &R->pb;
  const double work = (double)pb->heads * (double)pb->n_q * (double)pb->n_k * (double)pb->d;
  int rc;
  cli_progress(R->cmd, "running the oracle", work);
  rc = cli_oracle_run(&R->oracle, &R->oracle_seconds, R->cmd, pb, &R->in, &R->oo);
  cli_progress_end();
  if (rc != 0) return rc;
  R->have_oracle = 1;
  R->vs = calloc(R->nrec, sizeof *R->vs);
  R->res = calloc(R->nrec, sizeof *R->res);
  if (R->vs == NULL || R->res == NULL) {
    cli_error(R->cmd, "out of memory");
    return 1;
  }
  for (size_t i = 0; i < R->nrec; i++) {
    char what[160];
    snprintf(what, sizeof what, "emulating %s (%zu of %zu)", R->recipes[i].name, i + 1, R->nrec);
    cli_progress(R->cmd, what, work);
    rc = cli_run_variant(&R->vs[i], &R->res[i], &R->recipes[i], pb, &R->in, &R->oracle, &R->err);
    cli_progress_end();
    if (rc != AA_OK) return fail(R, rc);
    if (strcmp(R->recipes[i].name, "naive-bf16") == 0 && R->naive_is < 0) R->naive_is = (int)i;
  }
  return 0;
}

/* The flash-attention rule (bf16 inputs only): against naive-bf16 among the
   variants, else a run of the preset on the same inputs (not reported). */
static int naive_reference(run_t *R) {
  const cli_variant_t *nv = NULL;
  int rc;
  if (R->io_fmt != AA_FMT_BF16) return 0;
  if (R->naive_is >= 0)
    nv = &R->vs[R->naive_is];
  else if (aa_recipe_preset(&R->recipes[R->nrec], "naive-bf16", &R->err) == AA_OK) {
    rc = cli_run_variant(&R->naive_v, &R->naive_res, &R->recipes[R->nrec], &R->pb, &R->in, &R->oracle, &R->err);
    if (rc != AA_OK) return fail(R, rc);
    nv = &R->naive_v;
  }
  for (size_t i = 0; nv != NULL && i < R->nrec; i++)
    cli_apply_fa(&R->vs[i], nv);
  return 0;
}

/* The JSON document (schema 2), with the dropout member when dropout is on. */
static int make_json(run_t *R, const cli_report_t *rep) {
  json_t *doc = cli_json_doc(rep, R->vs, R->nrec);
  if (R->dc.on && aa_json_set(doc, "dropout", dropout_cli_json(&R->dc)) != 0) {
    json_decref(doc);
    doc = NULL;
  }
  R->jtext = aa_json_text(doc, 0, &R->jlen);
  json_decref(doc);
  if (R->jtext != NULL) return 0;
  cli_error(R->cmd, "out of memory");
  return 1;
}

/* Every output file (--out, --save, --save-oracle) is written to a
   temporary first and renamed once all are written: out of space or any
   other failure leaves none of them (and no folder this run created). */
static int write_files(run_t *R) {
  const char *what = NULL;
  aa_fileset_t stg;
  int rc = AA_OK;
  aa_fileset_init(&stg);
  if (R->out_file != NULL && (rc = aa_fileset_add(&stg, R->out_file, R->jtext, R->jlen, &R->err)) != AA_OK)
    what = "--out";
  if (what == NULL && R->save_dir != NULL) {
    what = "--save";
    if ((rc = cli_stage_inputs(&stg, &R->in, R->save_dir, cli_npy_fmt(R->io_fmt), &R->err)) == AA_OK) {
      for (size_t i = 0; i < R->nrec && rc == AA_OK; i++) {
        char sub[4096];
        if (R->nrec == 1)
          snprintf(sub, sizeof sub, "%s", R->save_dir);
        else
          snprintf(sub, sizeof sub, "%s/%s", R->save_dir, R->recipes[i].name);
        rc = cli_stage_outputs(&stg, &R->res[i], sub, &R->err);
      }
    }
    if (rc == AA_OK) what = NULL;
  }
  if (what == NULL && R->save_oracle != NULL &&
      (rc = cli_stage_oracle(&stg, &R->oracle, R->save_oracle, &R->err)) != AA_OK)
    what = "--save-oracle";
  if (what == NULL && (rc = aa_fileset_commit(&stg, &R->err)) != AA_OK) what = "output";
  if (what != NULL) aa_fileset_abort(&stg);
  aa_fileset_free(&stg);
  if (what == NULL) return 0;
  cli_error(R->cmd, "%s: %s", what, R->err.msg);
  return 1;
}

/* The report: the files, then the JSON or the table on stdout. */
static int report(run_t *R) {
  cli_report_t rep = report_of(R);
  int st;
  if ((cli_get(&R->a, "json") != NULL || R->out_file != NULL) && (st = make_json(R, &rep)) != 0) return st;
  if ((st = write_files(R)) != 0) return st;
  if (cli_get(&R->a, "json") != NULL)
    fwrite(R->jtext, 1, R->jlen, stdout);
  else {
    cli_print_table(stdout, &rep, R->vs, R->nrec);
    dropout_cli_print(stdout, &R->dc);
  }
  return fflush(stdout) != 0 ? 1 : 0;
}

static int run_steps(run_t *R, const aa_recipe_t *given, size_t ngiven, cli_run_hook_t hook, void *hctx) {
  int st;
  if ((st = take_recipes(R, given, ngiven)) || (st = read_options(R)) ||
      (st = R->inputs_dir != NULL ? load_inputs(R) : draw_inputs(R)) || (st = build_problem(R)) ||
      (st = setup_dropout(R)))
    return st;
  cli_set_threads(R->threads);
  if (R->fc.batch > 0) { /* a varlen batch: each sequence its own problem (experiments/cmd/run_varlen.c) */
    cli_report_t rep = report_of(R);
    return features_cli_run_varlen(&R->fc, R->cmd, &rep, &R->in, R->recipes, R->nrec, cli_get(&R->a, "json") != NULL,
                                   R->out_file);
  }
  if ((st = evaluate_variants(R)) != 0) return st;
  if (hook != NULL) { /* another command's report (explain): no naive reference, no files */
    cli_report_t rep = report_of(R);
    return hook(hctx, &rep, R->recipes, R->vs, R->nrec);
  }
  if ((st = naive_reference(R)) != 0) return st;
  return report(R);
}

int aa_cmd_run(int argc, char **argv) {
  return cli_run_main("run", NULL, 0, NULL, NULL, argc, argv);
}

int cli_run_args(cli_args_t *a, const char *cmd, int argc, char **argv) {
  return cli_args_parse(a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, argv);
}

int cli_run_main(const char *cmd, const aa_recipe_t *given, size_t ngiven, cli_run_hook_t hook, void *hctx, int argc,
                 char **argv) {
  run_t R;
  int status;
  memset(&R, 0, sizeof R);
  R.cmd = cmd;
  R.naive_is = -1;
  cli_problem_opts_init(&R.po);
  if ((status = cli_args_parse(&R.a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, argv)) >=
      0)
    return status;
  status = run_steps(&R, given, ngiven, hook, hctx);
  run_free(&R);
  return status;
}
