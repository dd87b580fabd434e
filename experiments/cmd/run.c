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
#include "commands.h"

#define MAX_VARIANTS 32

static const char *dist_name(int dist) {
  return dist == AA_DIST_OUTLIER ? "outlier" : dist == AA_DIST_UNIFORM ? "uniform" : "normal";
}

static const cli_opt_t opts[] = {
    {"variant", "SPEC[,SPEC...]", NULL,
     "recipes to emulate: preset NAMEs (attnacc list shows them), recipe files (ending in .recipe or with a /) "
     "or NAME:key=value,... (the preset with overrides, named as written)"},
    {"recipe", "FILE", NULL, "a recipe file (key = value lines) to emulate, after the --variant presets"},
    {"n", "N", "1024", "sequence length (queries and keys; keys only with --n-q)"},
    {"d", "D", "128", "head dimension"},
    {"heads", "H", "1", "query heads"},
    {"kv-heads", "HKV", "= heads", "key/value heads (GQA); must divide heads"},
    {"seed", "S", "1", "seed of the input draw (0 to 2^64-1)"},
    {"dist", "normal|uniform|outlier", "normal",
     "input distribution: sigma*N(0,1), sigma*U[0,1), or sigma*(N(0,1) + N(0,100) Bernoulli(0.001)) (FA3's FP8 "
     "setting)"},
    {"sigma", "X", "1", "scale of the input distribution (> 0)"},
    {"scale", "S", "1/sqrt(d)", "softmax scale (> 0)"},
    {"causal", NULL, NULL, "causal mask (query i sees keys 0..i; i + n_k - n_q with --causal-align bottom-right)"},
    {"window", "W|L,R", "0 = none", "sliding window of W keys (needs --causal), or flash-attn window_size L,R"},
    {"sinks", "K", "0", "attention-sink logits per head, drawn N(0,1)"},
    CLI_OPTS_ORACLE,
    {"inputs", "DIR", NULL, "read q.npy k.npy v.npy do.npy [sinks.npy] from DIR instead of drawing"},
    {"allow-nan", NULL, NULL, "accept NaN/Inf in the inputs (refused otherwise)"},
    {"json", NULL, NULL, "print one JSON object instead of the table"},
    {"out", "FILE", NULL, "also write the JSON object to FILE (atomically)"},
    {"save", "DIR", NULL, "write the inputs and each variant's o/dq/dk/dv as .npy into DIR"},
    {"save-oracle", "DIR", NULL, "write the oracle's o/lse/dq/dk/dv (FP64, '<f8') into DIR"},
    {"threads", "T", "0 = all", "threads for the oracle and the emulation (results do not depend on it)"},
    DROPOUT_CLI_OPTS,
    FEATURES_CLI_OPTS,
};

static const char usage_line[] = "--variant SPEC[,SPEC...] | --recipe FILE [OPTIONS]";
static const char description[] =
    "Emulate each variant on one attention problem, compare o, dq, dk, dv (and dsinks)\n"
    "with the oracle and print one row per variant and output: rel_l2 (over finite\n"
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
    "per element: normal, uniform, outlier normal), formed in double and rounded\n"
    "to nearest even into the narrowest io format of the variants (bf16 for the\n"
    "presets but exact-fp64; it must be contained in the others). Sink logits are\n"
    "N(0,1), not scaled by sigma. With --inputs, q.npy and do.npy are [N, d] or\n"
    "[H, N, d], k.npy and v.npy [N_k, d] or [HKV, N_k, d], sinks.npy [H, K]; values not\n"
    "in that format are rounded to it (a note says how many). Exit status: 0 done\n"
    "(whatever the metrics), 2 bad "
    "usage or input, 1 failure while computing or writing." DROPOUT_CLI_HELP FEATURES_CLI_HELP;

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

/* Stage DIR/NAME.npy of each tensor with data (the file lists of cli_inputs_save, cli_save_outputs and
   cli_save_oracle). */
static int stage_set(aa_fileset_t *stg, const char *dir, const char *const *names, const aa_tensor_t *const *ts,
                     const aa_fmt_t *fmts, int n, aa_error_t *err) {
  int rc = aa_fileset_mkdir_p(stg, dir, err);
  for (int i = 0; i < n && rc == AA_OK; i++) {
    char p[4096];
    if (ts[i]->data == NULL || aa_tensor_numel(ts[i]) == 0) continue;
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, names[i]) >= sizeof p)
      return aa_error_set(err, AA_EINVAL, "%s: folder name too long", dir);
    rc = aa_npy_write_set(stg, p, ts[i], fmts[i], err);
  }
  return rc;
}

static int stage_inputs(aa_fileset_t *stg, const cli_inputs_t *in, const char *dir, aa_fmt_t fmt, aa_error_t *err) {
  const char *names[5] = {"q.npy", "k.npy", "v.npy", "do.npy", "sinks.npy"};
  const aa_tensor_t *ts[5] = {&in->q, &in->k, &in->v, &in->dO, &in->sinks};
  const aa_fmt_t fmts[5] = {fmt, fmt, fmt, fmt, fmt};
  return stage_set(stg, dir, names, ts, fmts, 5, err);
}

static int stage_outputs(aa_fileset_t *stg, const aa_attn_result_t *res, const char *dir, aa_error_t *err) {
  const char *names[5] = {"o.npy", "dq.npy", "dk.npy", "dv.npy", "dsinks.npy"};
  const aa_tensor_t *ts[5] = {&res->o, &res->dq, &res->dk, &res->dv, &res->dsinks};
  aa_fmt_t fmts[5];
  for (int i = 0; i < 5; i++)
    fmts[i] = cli_npy_fmt(ts[i]->fmt);
  return stage_set(stg, dir, names, ts, fmts, 5, err);
}

static int stage_oracle(aa_fileset_t *stg, const aa_oracle_result_t *r, const char *dir, aa_error_t *err) {
  const char *names[6] = {"o.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy", "dsinks.npy"};
  const aa_tensor_t *ts[6] = {&r->o.val, &r->lse.val, &r->dq.val, &r->dk.val, &r->dv.val, &r->dsinks.val};
  const aa_fmt_t fmts[6] = {AA_FMT_FP64, AA_FMT_FP64, AA_FMT_FP64, AA_FMT_FP64, AA_FMT_FP64, AA_FMT_FP64};
  return stage_set(stg, dir, names, ts, fmts, 6, err);
}

int aa_cmd_run(int argc, char **argv) {
  return cli_run_main("run", NULL, 0, NULL, NULL, argc, argv);
}

int cli_run_main(const char *cmd, const aa_recipe_t *given, size_t ngiven, cli_run_hook_t hook, void *hctx, int argc,
                 char **argv) {
  cli_args_t a;
  aa_error_t err = {{0}};
  aa_recipe_t *recipes = NULL;
  size_t nrec = 0;
  size_t n = 1024, n_q = 0, n_k = 0, d = 128, heads = 1, kv_heads = 0, num_sinks = 0, threads = 0;
  features_cli_t fc = {0};
  uint64_t seed = 1;
  double sigma = 1, scale = 0;
  int uniform = 0, rc, status = 2;
  const char *s, *inputs_dir, *out_file, *save_dir, *save_oracle;
  aa_fmt_t io_fmt;
  cli_inputs_t in = {0};
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  int have_oracle = 0;
  cli_variant_t *vs = NULL, naive_v;
  aa_attn_result_t *res = NULL, naive_res;
  int have_naive = 0, naive_is = -1;
  cli_sb_t sb = {0};
  cli_report_t rep;
  dropout_cli_t dc = {0};
  double oracle_seconds;

  memset(&naive_v, 0, sizeof naive_v);
  memset(&naive_res, 0, sizeof naive_res);
  memset(&oracle, 0, sizeof oracle);
  if ((rc = cli_args_parse(&a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, argv)) >= 0)
    return rc;

  /* ---- the variants ---- */
  recipes = calloc((given != NULL ? ngiven : MAX_VARIANTS) + 1, sizeof *recipes);
  if (recipes == NULL) {
    cli_error(cmd, "out of memory");
    return 1;
  }
  if (given != NULL) {
    memcpy(recipes, given, ngiven * sizeof *recipes);
    nrec = ngiven;
  } else if ((s = cli_get(&a, "variant")) != NULL) {
    const char *p = s;
    for (;;) {
      /* A spec NAME:key=value,key=value runs on over commas while the next
         item is a key=value (no ':' or '/' before its '='). */
      const char *comma = strchr(p, ',');
      while (comma != NULL && strchr(p, ':') != NULL && strchr(p, ':') < comma) {
        const char *nx = comma + 1, *eq = strchr(nx, '='), *end = strchr(nx, ',');
        size_t head = eq != NULL ? (size_t)(eq - nx) : 0;
        if (eq == NULL || (end != NULL && eq > end) || memchr(nx, ':', head) != NULL || memchr(nx, '/', head) != NULL)
          break;
        comma = end;
      }
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      char name[128];
      if (len == 0 || len >= sizeof name) {
        cli_error(cmd, "--variant: empty or overlong name in '%s'", s);
        goto out;
      }
      if (nrec == MAX_VARIANTS) {
        cli_error(cmd, "--variant: at most %d variants per run", MAX_VARIANTS);
        goto out;
      }
      memcpy(name, p, len);
      name[len] = '\0';
      for (size_t i = 0; i < nrec; i++)
        if (strcmp(recipes[i].name, name) == 0) {
          cli_error(cmd, "--variant: '%s' is given twice", name);
          goto out;
        }
      if ((rc = aa_recipe_from_spec(&recipes[nrec], name, &err)) != AA_OK) {
        char known[1024];
        list_presets(known, sizeof known);
        if (rc == AA_ENOTFOUND)
          cli_error(cmd, "unknown variant '%s' (known: %s)", name, known);
        else
          cli_error(cmd, "--variant: %s", err.msg);
        status = cli_exit_status(rc);
        goto out;
      }
      nrec++;
      if (comma == NULL) break;
      p = comma + 1;
    }
  }
  if (given == NULL && (s = cli_get(&a, "recipe")) != NULL) {
    if (access(s, R_OK) != 0) {
      cli_error(cmd, "--recipe: %s: cannot read the file", s);
      goto out;
    }
    if ((rc = aa_recipe_parse_file(&recipes[nrec], s, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      status = cli_exit_status(rc);
      goto out;
    }
    {
      /* A file that starts from a preset keeps the preset's name unless it
         sets its own; name it after the file when it differs from that
         preset or repeats a --variant name, so the rows stay distinguishable. */
      aa_recipe_t base;
      int rename = recipes[nrec].name[0] == '\0';
      for (size_t i = 0; i < nrec; i++)
        if (strcmp(recipes[i].name, recipes[nrec].name) == 0) rename = 1;
      if (!rename && aa_recipe_preset(&base, recipes[nrec].name, NULL) == AA_OK)
        rename = !aa_recipe_equal(&base, &recipes[nrec]);
      if (rename) {
        const char *b = strrchr(s, '/');
        size_t len;
        b = b ? b + 1 : s;
        len = strcspn(b, ".");
        if (len == 0) len = strlen(b);
        if (len >= sizeof recipes[nrec].name) len = sizeof recipes[nrec].name - 1;
        memcpy(recipes[nrec].name, b, len);
        recipes[nrec].name[len] = '\0';
      }
    }
    nrec++;
  }
  if (nrec == 0) {
    cli_error(cmd, "give --variant SPEC[,SPEC...] or --recipe FILE (attnacc list shows the presets)");
    goto out;
  }
  /* The inputs are drawn in (or rounded to) the narrowest io format, which
     must be contained in every other (bf16 in fp32 in fp64), so that all
     variants and the oracle see the same values. */
  io_fmt = recipes[0].io_fmt;
  for (size_t i = 1; i < nrec; i++)
    if (fmt_within(recipes[i].io_fmt, io_fmt)) io_fmt = recipes[i].io_fmt;
  for (size_t i = 0; i < nrec; i++)
    if (!fmt_within(io_fmt, recipes[i].io_fmt)) {
      cli_error(cmd,
                "variants %s and %s have io formats %s and %s, neither of which holds the other: run them separately",
                recipes[0].name, recipes[i].name, cli_fmt_name(recipes[0].io_fmt), cli_fmt_name(recipes[i].io_fmt));
      goto out;
    }

  /* ---- numbers ---- */
  if ((s = cli_get(&a, "n")) && cli_size(&n, cmd, "n", s, 1, SIZE_MAX)) goto out;
  n_q = n_k = n;
  if (features_cli_lengths(&fc, cmd, &a, &n_q, &n_k)) goto out;
  n = n_q > n_k ? n_q : n_k; /* for the size checks below */
  if ((s = cli_get(&a, "d")) && cli_size(&d, cmd, "d", s, 1, SIZE_MAX)) goto out;
  if ((s = cli_get(&a, "heads")) && cli_size(&heads, cmd, "heads", s, 1, SIZE_MAX)) goto out;
  if ((s = cli_get(&a, "kv-heads")) && cli_size(&kv_heads, cmd, "kv-heads", s, 1, SIZE_MAX)) goto out;
  if ((s = cli_get(&a, "seed")) && cli_u64(&seed, cmd, "seed", s)) goto out;
  if ((s = cli_get(&a, "dist")) != NULL) {
    if (strcmp(s, "uniform") == 0)
      uniform = AA_DIST_UNIFORM;
    else if (strcmp(s, "outlier") == 0)
      uniform = AA_DIST_OUTLIER;
    else if (strcmp(s, "normal") != 0) {
      cli_error(cmd, "--dist: '%s' is not normal, uniform or outlier", s);
      goto out;
    }
  }
  if ((s = cli_get(&a, "sigma")) && cli_double(&sigma, cmd, "sigma", s, 0, 1e300, 1)) goto out;
  if ((s = cli_get(&a, "scale")) && cli_double(&scale, cmd, "scale", s, 0, 1e300, 1)) goto out;
  if ((s = cli_get(&a, "sinks")) && cli_size(&num_sinks, cmd, "sinks", s, 0, 1u << 20)) goto out;
  if ((s = cli_get(&a, "threads")) && cli_size(&threads, cmd, "threads", s, 0, 4096)) goto out;
  if (cli_oracle_opts(&oo, &a, cmd)) goto out;
  oo.threads = (int)threads;
  inputs_dir = cli_get(&a, "inputs");
  out_file = cli_get(&a, "out");
  save_dir = cli_get(&a, "save");
  save_oracle = cli_get(&a, "save-oracle");
  if (fc.batch > 0 && (save_dir || save_oracle || cli_get(&a, "dropout") || cli_get(&a, "sinks") ||
                       (out_file && !cli_get(&a, "json")))) {
    cli_error(cmd, "--cu-seqlens: --save, --save-oracle, --dropout and --sinks are not available for a varlen batch, "
                   "and --out needs --json");
    goto out;
  }

  /* ---- outputs must be creatable before any work is done ---- */
  if ((out_file && (rc = cli_check_out_file(out_file, &err))) ||
      (save_dir && (rc = cli_check_out_dir(save_dir, &err))) ||
      (save_oracle && (rc = cli_check_out_dir(save_oracle, &err)))) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }

  /* ---- inputs ---- */
  if (inputs_dir != NULL) {
    size_t changed = 0;
    const char *given[4] = {"n", "d", "heads", "kv-heads"};
    if ((rc = cli_inputs_load(&in, inputs_dir, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
    {
      size_t want[4] = {n, d, heads, kv_heads},
             have[4] = {in.q.shape[1], in.q.shape[2], in.q.shape[0], in.k.shape[0]};
      const char *file[4] = {"q.npy's n", "q.npy's d", "q.npy's heads", "k.npy's heads"};
      for (int i = 0; i < 4; i++)
        if (cli_get(&a, given[i]) != NULL && want[i] != have[i]) {
          cli_error(cmd, "--%s %zu does not match %s = %zu", given[i], want[i], file[i], have[i]);
          goto out;
        }
    }
    n = in.q.shape[1];
    d = in.q.shape[2];
    heads = in.q.shape[0];
    kv_heads = in.k.shape[0];
    if (cli_get(&a, "sinks") != NULL && num_sinks != (in.sinks.data ? in.sinks.shape[1] : 0)) {
      cli_error(cmd, "--sinks %zu does not match %s", num_sinks,
                in.sinks.data ? "the K of sinks.npy" : "the inputs (no sinks.npy)");
      goto out;
    }
    num_sinks = in.sinks.data ? in.sinks.shape[1] : 0;
    {
      aa_tensor_t *ts[5] = {&in.q, &in.k, &in.v, &in.dO, &in.sinks};
      aa_round_opts_t ro = {io_fmt, AA_RND_NE, 1, 0};
      for (int i = 0; i < 5; i++) {
        size_t m = aa_tensor_numel(ts[i]);
        for (size_t j = 0; j < m; j++) {
          double r = aa_round(ts[i]->data[j], &ro, NULL);
          if (r != ts[i]->data[j] && !isnan(r)) changed++;
          ts[i]->data[j] = r;
        }
        ts[i]->fmt = io_fmt;
      }
    }
    if (changed > 0)
      fprintf(stderr,
              "attnacc run: note: %zu input values were rounded to %s (the narrowest io format of the variants)\n",
              changed, cli_fmt_name(io_fmt));
  } else {
    /* Refuse sizes that cannot work: the operation count heads * n^2 * d
       must fit a size_t, and the tensors this command holds at once (the
       inputs, three oracle copies of each output, one output set per
       variant and naive-bf16) must fit in the memory still available
       (MemAvailable, not the machine's total: other processes hold the rest). */
    size_t work;
    uint64_t bytes, mem;
    const char *memsrc;
    if (kv_heads == 0) kv_heads = heads;
    if (aa_size_mul(&work, heads, n) || aa_size_mul(&work, work, n) || aa_size_mul(&work, work, d) ||
        !lim_attn_bytes(&bytes, n, n, d, heads, kv_heads, nrec + 1)) {
      cli_error(cmd, "problem too large: n = %zu, d = %zu, heads = %zu, kv_heads = %zu overflows the size arithmetic",
                n, d, heads, kv_heads);
      goto out;
    }
    mem = lim_mem_available(&memsrc);
    if (mem > 0 && bytes > mem) {
      cli_error(cmd,
                "problem too large: n = %zu, d = %zu, heads = %zu needs at least %.3g GiB, %.3g GiB available (%s)",
                n, d, heads, (double)bytes / 1073741824.0, (double)mem / 1073741824.0, memsrc);
      goto out;
    }
    if (heads % kv_heads != 0) {
      cli_error(cmd, "--kv-heads %zu does not divide --heads %zu", kv_heads, heads);
      goto out;
    }
    if ((double)work > 1e12)
      fprintf(stderr,
              "attnacc run: note: heads * n^2 * d = %.3g; the oracle and each variant do several such "
              "sweeps, expect hours\n",
              (double)work);
    if ((rc = cli_inputs_draw_qk(&in, seed, uniform, sigma, n_q, n_k, d, heads, kv_heads, num_sinks, io_fmt, &err)) !=
        AA_OK) {
      cli_error(cmd, "%s", err.msg);
      status = cli_exit_status(rc);
      goto out;
    }
  }

  /* ---- the problem ---- */
  if (inputs_dir != NULL && (cli_get(&a, "n-q") != NULL || fc.batch > 0) &&
      (in.q.shape[1] != n_q || in.k.shape[1] != n_k)) {
    cli_error(cmd, "--n-q / --cu-seqlens: q.npy has %zu rows and k.npy %zu, the options say %zu and %zu",
              in.q.shape[1], in.k.shape[1], n_q, n_k);
    goto out;
  }
  aa_problem_init(&pb, in.q.shape[1], in.k.shape[1], d, heads, kv_heads);
  pb.causal = cli_get(&a, "causal") != NULL;
  if (features_cli_problem(&fc, cmd, &a, &pb)) goto out;
  if (cli_get(&a, "scale") != NULL) {
    pb.scale_default = 0;
    pb.scale = scale;
  }
  pb.num_sinks = num_sinks;
  pb.sinks = num_sinks ? in.sinks.data : NULL;
  if ((rc = aa_problem_check(&pb, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  if (cli_get(&a, "allow-nan") == NULL && (rc = cli_inputs_check_finite(&in, &err)) != AA_OK) {
    cli_error(cmd, "%s%s", inputs_dir ? "" : "the drawn input ", err.msg);
    goto out;
  }
  /* ---- dropout: the forward's mask goes to the oracle, each variant's
     backward redraws (experiments/cli/dropout.c) ---- */
  if ((status = dropout_cli_setup(&dc, cmd, cli_get(&a, "dropout"), cli_get(&a, "dropout-scheme"),
                                  cli_get(&a, "dropout-seed"), cli_get(&a, "dropout-seeds"), seed,
                                  &recipes[0].dropout)) != 0)
    goto out;
  status = 2;
  if (dc.on) {
    for (size_t i = 0; i < nrec; i++)
      recipes[i].dropout = dc.d;
    if ((rc = dropout_cli_draw(&dc, &pb, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      status = cli_exit_status(rc);
      goto out;
    }
  }
  cli_set_threads(threads);
  if (fc.batch > 0) { /* a varlen batch: each sequence its own problem (experiments/cmd/run_varlen.c) */
    rep = (cli_report_t){cmd, 1, seed, inputs_dir ? NULL : dist_name(uniform), sigma, inputs_dir, &pb, &oo, NULL, 0};
    status = features_cli_run_varlen(&fc, cmd, &rep, &in, recipes, nrec, cli_get(&a, "json") != NULL, out_file);
    goto out;
  }

  /* ---- oracle, variants, naive reference (a progress line on a terminal for large problems) ---- */
  const double work = (double)pb.heads * (double)pb.n_q * (double)pb.n_k * (double)pb.d;
  cli_progress(cmd, "running the oracle", work);
  rc = cli_oracle_run(&oracle, &oracle_seconds, cmd, &pb, &in, &oo);
  cli_progress_end();
  if (rc != 0) {
    status = rc;
    goto out;
  }
  have_oracle = 1;
  vs = calloc(nrec, sizeof *vs);
  res = calloc(nrec, sizeof *res);
  if (vs == NULL || res == NULL) {
    cli_error(cmd, "out of memory");
    status = 1;
    goto out;
  }
  for (size_t i = 0; i < nrec; i++) {
    char what[160];
    snprintf(what, sizeof what, "emulating %s (%zu of %zu)", recipes[i].name, i + 1, nrec);
    cli_progress(cmd, what, work);
    rc = cli_run_variant(&vs[i], &res[i], &recipes[i], &pb, &in, &oracle, &err);
    cli_progress_end();
    if (rc != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      status = cli_exit_status(rc);
      goto out;
    }
    if (strcmp(recipes[i].name, "naive-bf16") == 0 && naive_is < 0) naive_is = (int)i;
  }
  if (hook != NULL) { /* another command's report (explain): no naive reference, no files */
    rep = (cli_report_t){cmd, 1,       seed,          inputs_dir ? NULL : dist_name(uniform), sigma, inputs_dir, &pb,
                         &oo, &oracle, oracle_seconds};
    status = hook(hctx, &rep, recipes, vs, nrec);
    goto out;
  }
  if (io_fmt == AA_FMT_BF16) {
    const cli_variant_t *nv = NULL;
    if (naive_is >= 0)
      nv = &vs[naive_is];
    else if (aa_recipe_preset(&recipes[nrec], "naive-bf16", &err) == AA_OK) {
      if ((rc = cli_run_variant(&naive_v, &naive_res, &recipes[nrec], &pb, &in, &oracle, &err)) != AA_OK) {
        cli_error(cmd, "%s", err.msg);
        status = cli_exit_status(rc);
        goto out;
      }
      have_naive = 1;
      nv = &naive_v;
    }
    if (nv != NULL)
      for (size_t i = 0; i < nrec; i++)
        cli_apply_fa(&vs[i], nv);
  }

  /* ---- report ---- */
  rep = (cli_report_t){cmd, 1,       seed,          inputs_dir ? NULL : dist_name(uniform), sigma, inputs_dir, &pb,
                       &oo, &oracle, oracle_seconds};
  if (cli_get(&a, "json") != NULL || out_file != NULL) {
    cli_json(&sb, &rep, vs, nrec);
    dropout_cli_json(&sb, &dc);
    if (sb.oom) {
      cli_error(cmd, "out of memory");
      status = 1;
      goto out;
    }
  }
  /* Every output file (--out, --save, --save-oracle) is written to a
     temporary first and renamed once all are written: out of space or any
     other failure leaves none of them (and no folder this run created). */
  {
    const char *what = NULL;
    aa_fileset_t stg;
    aa_fileset_init(&stg); /* a device or pipe such as /dev/stdout is written in place at once */
    if (out_file != NULL && (rc = aa_fileset_add(&stg, out_file, sb.buf, sb.len, &err)) != AA_OK) what = "--out";
    if (what == NULL && save_dir != NULL) {
      what = "--save";
      if ((rc = stage_inputs(&stg, &in, save_dir, cli_npy_fmt(io_fmt), &err)) == AA_OK) {
        for (size_t i = 0; i < nrec && rc == AA_OK; i++) {
          char sub[4096];
          if (nrec == 1)
            snprintf(sub, sizeof sub, "%s", save_dir);
          else
            snprintf(sub, sizeof sub, "%s/%s", save_dir, recipes[i].name);
          rc = stage_outputs(&stg, &res[i], sub, &err);
        }
      }
      if (rc == AA_OK) what = NULL;
    }
    if (what == NULL && save_oracle != NULL && (rc = stage_oracle(&stg, &oracle, save_oracle, &err)) != AA_OK)
      what = "--save-oracle";
    if (what == NULL && (rc = aa_fileset_commit(&stg, &err)) != AA_OK) what = "output";
    if (what != NULL) {
      aa_fileset_abort(&stg);
      aa_fileset_free(&stg);
      cli_error(cmd, "%s: %s", what, err.msg);
      status = 1;
      goto out;
    }
    aa_fileset_free(&stg);
  }
  if (cli_get(&a, "json") != NULL)
    fwrite(sb.buf, 1, sb.len, stdout);
  else {
    cli_print_table(stdout, &rep, vs, nrec);
    dropout_cli_print(stdout, &dc);
  }
  if (fflush(stdout) != 0) {
    status = 1;
    goto out;
  }
  status = 0;

out:
  cli_sb_free(&sb);
  dropout_cli_free(&dc);
  features_cli_free(&fc);
  if (vs != NULL)
    for (size_t i = 0; i < nrec; i++)
      cli_variant_free(&vs[i]);
  if (res != NULL)
    for (size_t i = 0; i < nrec; i++)
      aa_attn_result_free(&res[i]);
  if (have_naive) aa_attn_result_free(&naive_res);
  cli_variant_free(&naive_v);
  free(vs);
  free(res);
  if (have_oracle) aa_oracle_result_free(&oracle);
  cli_inputs_free(&in);
  free(recipes);
  return status;
}
