/* attnacc: the `score` command: compare a kernel's outputs (.npy folders, .npz, .safetensors; any layout) with the
 * oracle and give a verdict by the chosen rules. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/features.h"
#include "cli/limits.h"
#include "cli/masks.h"
#include "cli/rows.h"
#include "cli/sources.h"
#include "commands.h"

static const cli_opt_t opts[] = {
    {"inputs", "PATH", NULL,
     "q, k, v, do [, sinks] [, keep]: a folder of NAME.npy, an .npz or a .safetensors file (required)"},
    {"grads", "PATH", NULL,
     "dq, dk, dv [, o] [, lse] [, dsinks], the same kinds of PATH (required; may equal --inputs)"},
    {"layout", "bhnd|bnhd|hnd|nd|nhd", "inferred",
     "axes of every array: [B,H,N,d], [B,N,H,d], [H,N,d], [N,d] or [N,H,d] (3 axes: hnd unless nhd is given)"},
    CLI_OPT_CAUSAL,
    {"cu-seqlens", "FILE", NULL,
     "varlen batch: packed [total, H, d] arrays; FILE line 1 cu_seqlens_q, optional line 2 cu_seqlens_k"},
    {"window", "W|L,R", "0 = none", "sliding window of W keys (needs --causal), or flash-attn window_size L,R"},
    FEATURES_CLI_PROBLEM_OPTS,
    {"dropout", "P", "0 = off",
     "the kernel's dropout: its keep mask is the array keep of --inputs ([B, H, Nq, Nk] whatever the layout, "
     "[H, Nq, Nk] with one batch; 0 drop, 1 keep), kept weights scaled by 1/(1-P)"},
    CLI_OPT_SCALE,
    CLI_OPTS_ORACLE,
    {"rule", "RULES", "expect; torch for fp64 kernels",
     "rules deciding the exit status: expect, fa, torch, sdpa, abs-rel [ATOL RTOL], comma-separated, or all"},
    {"expect", "RECIPE", "fa2; naive-fp32 for fp32 kernels",
     "the expect rule's recipe (a preset, file or NAME:key=value), run on the same inputs in the kernel's format"},
    {"no-fail", NULL, NULL, "exit 0 even when a rule fails (the verdict is still printed)"},
    {"ulp-fmt", "bf16|fp16|fp32", "the data's own", "format ULP distances are counted in"},
    {"kernel-fmt", "bf16|fp16|fp32|fp64", "the inputs' storage dtype",
     "the format the kernel computes in; the naive reference of fa and sdpa runs in it (a BF16 kernel whose "
     "tensors were saved as fp32: bf16)"},
    {"bf16-bits", NULL, NULL, "read '<i2' (int16) arrays as BF16 bit patterns (torch: t.view(torch.int16))"},
    {"fa", NULL, NULL, "legacy: also fill the fa_* fields with naive-bf16 (needs bf16-representable inputs)"},
    {"json", NULL, NULL, "print the JSON document (experiments/README-json.md) instead of the table"},
    {"out", "FILE", NULL, "also write the JSON document to FILE (atomically)"},
    {"save-oracle", "DIR", NULL, "write the oracle's o/lse/dq/dk/dv (FP64, '<f8') into DIR"},
    {"threads", "T", "0 = all", "threads for the oracle (results do not depend on it)"},
    {"rows", "K", "all",
     "score K query rows drawn at random (pcg32, --rows-seed): o, lse and dq of those rows exactly (about K/Nq "
     "of the oracle's cost), and dk and dv of one key/value head drawn with them, over every row of its query heads "
     "(1/(B*H_kv) of the whole problem's); dsinks is not scored"},
    {"rows-seed", "S", "1", "seed of the --rows draws (the rows and the kv head, each on its own stream)"},
    /* masks (experiments/cli/masks.c) */
    MASKS_CLI_OPTS,
};

static const char usage_line[] = "--inputs PATH --grads PATH [OPTIONS]";
static const char description[] =
    "Score a kernel's outputs: compare the o, dq, dk, dv it computed on given inputs with\n"
    "the exact oracle and give a verdict (exit status 1 when a rule fails).\n\n"
    "Read the inputs q, k, v, do (and the optional sinks) from --inputs and the kernel's\n"
    "dq, dk, dv and the optional o (and dsinks with sinks) from --grads: folders of .npy\n"
    "files, .npz archives (np.savez, np.savez_compressed) or .safetensors files. dtypes:\n"
    "'<u2' BF16 bit patterns, '<f2', '<f4', '<f8' (safetensors BF16, F16, F32, F64); with\n"
    "--bf16-bits '<i2' (and safetensors I16) are BF16 bits too. Values are taken exactly.\n"
    "Layouts: [B, H, N, d] (SDPA), [B, N, H, d] (flash-attn), [H, N, d], [N, d]; k and v\n"
    "may have fewer heads (GQA). Without --layout it is inferred when only one fits.\n"
    "Varlen batches (flash_attn_varlen_func): --cu-seqlens FILE with packed [total, H, d]\n"
    "arrays; each sequence is its own problem (masks apply within it), and the metrics\n"
    "and rules cover all packed elements.\n"
    "Problem features are run's: --causal-align, --window W or L,R, --softcap, --alibi,\n"
    "--alibi-form, --alibi-slopes (H slopes of q's heads, the same for every batch), the\n"
    "sinks array, and --dropout P with the kernel's keep mask (array keep, [B, H, Nq, Nk]\n"
    "of 0 and 1, head-major as flash-attn returns it). An lse array in --grads ([B, H, Nq],\n"
    "natural log with the softmax scale, flash-attn's softmax_lse) is scored too; where\n"
    "a row sees no key the oracle's -Inf and flash-attn's +Inf are both accepted.\n"
    "Runs the oracle, prints the metrics of `attnacc run` (variant \"external\"), the robust\n"
    "measures and every rule's ratio to what it allows, then the verdict by --rule. The\n"
    "naive reference in the inputs' dtype runs only for the rules that read it (fa, sdpa;\n"
    "--rule all gives every rule's ratio).\n"
    "--rows K scores o, lse and dq of K query rows drawn at random, and dk and dv of one\n"
    "key/value head drawn with them (every row of its query heads), at about K/Nq of the\n"
    "oracle's cost for o and dq plus 1/(B*H_kv) of the whole problem's for dk and dv.\n"
    "Without --oracle-target the oracle is certified to 2^-32 (2^-48 when the kernel computes\n"
    "in FP64): far below any kernel's error, and its binary64 tier makes a cold score fast.\n"
    "The default rule, expect, runs the recipe --expect (fa2) on the same inputs in the\n"
    "kernel's format and passes when each output's rel_l2, 0.99 quantile of |error|, worst\n"
    "row and worst head lie within a band of the recipe's and its least-squares scale and\n"
    "offset against the oracle within 8 standard errors (README.md, \"The default verdict\").\n"
    "Exit status: 0 every chosen rule passes, 1 one fails (0 with --no-fail),\n"
    "2 bad usage or input, or a failure while computing or writing." MASKS_CLI_HELP;

/* --rule "abs-rel ATOL RTOL" spelt as three words: join them into one argument. */
static char **join_rule_words(int *argc, char **argv, char *joined, size_t cap) {
  char **out = malloc(((size_t)*argc + 1) * sizeof *out);
  int n = 0;
  if (out == NULL) return NULL;
  for (int i = 0; i < *argc; i++) {
    out[n++] = argv[i];
    if (strcmp(argv[i], "--rule") == 0 && i + 3 < *argc) {
      const char *r = argv[i + 1];
      size_t rl = strlen(r);
      if (rl >= 7 && strcmp(r + rl - 7, "abs-rel") == 0 && argv[i + 2][0] != '-' && argv[i + 3][0] != '-') {
        snprintf(joined, cap, "%s,%s,%s", r, argv[i + 2], argv[i + 3]);
        out[n++] = joined;
        i += 3;
      }
    }
  }
  out[n] = NULL;
  *argc = n;
  return out;
}

/* --rows: the pass over one kv head group (rows.h), whose dk and dv are scored: its problem and arrays cut from the
   whole ones, its oracle, the kernel's outputs compared with it, its expect recipe's and naive reference's runs. */
typedef struct {
  rows_cli_group_t g;
  aa_problem_t pb;
  cli_inputs_t in;      /* q, dO of the group's query heads; k, v of its kv head */
  aa_tensor_t given[5]; /* the kernel's dk, dv of the kv head (o, dq, dsinks empty: not compared here) */
  aa_oracle_result_t oracle;
  int have_oracle;
  cli_variant_t v, rec_v, snaive_v;
} kv_pass_t;

/* The state of one score run: options, the arrays as read, the problem, the oracle and the evaluation. */
typedef struct {
  const char *cmd;
  cli_args_t a;
  aa_error_t err;
  const char *inputs_src, *grads_src, *out_file, *save_oracle;
  size_t threads, nrows;
  uint64_t rows_seed;
  double scale, oracle_seconds, atol, rtol, dropout_p;
  int ulp_fmt, kernel_fmt, nrules, have_oracle, have_naive, have_snaive, have_rec;
  aa_fmt_t expect_fmt; /* the format of the kernel the expect rule judges */
  aa_rule_t rules[AA_RULE_COUNT];
  features_cli_t fc;
  masks_cli_t mc;    /* --mask, --key-len, --logit-offset */
  cli_sources_t src; /* the arrays as read, the layout, the inputs and the kernel's outputs (lse, keep too) */
  uint8_t *keep;     /* the kernel's dropout keep mask, folded [B*H][Nq][Nk] */
  aa_eval_lse_t lse;
  rows_cli_t rows;
  kv_pass_t kv;
  aa_problem_t pb, pb_full; /* the problem scored, and the whole one (they differ with --rows) */
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  cli_variant_t v, naive_v, snaive_v, rec_v;
  aa_attn_result_t naive_res;
  aa_recipe_t naive_r;
  char *jtext;
  size_t jlen;
  cli_report_t rep;
  cli_report_extra_t ex;
} score_t;

/* What the oracle, naive and expect steps work on: the main pass (the problem scored, its rows cut by --rows), or
   the kv head group's pass of --rows. */
typedef struct {
  const aa_problem_t *pb;
  cli_inputs_t *in;
  aa_oracle_result_t *oracle;
  int *have_oracle;
  cli_variant_t *v, *rec_v, *snaive_v;
} pass_t;

static pass_t main_pass(score_t *S) {
  return (pass_t){&S->pb, &S->src.in, &S->oracle, &S->have_oracle, &S->v, &S->rec_v, &S->snaive_v};
}

static pass_t kv_pass(score_t *S) {
  kv_pass_t *K = &S->kv;
  return (pass_t){&K->pb, &K->in, &K->oracle, &K->have_oracle, &K->v, &K->rec_v, &K->snaive_v};
}

/* Each step returns 0, or nonzero after a message (the command then exits 2). */
static int fail(score_t *S, const char *prefix) {
  if (prefix != NULL)
    cli_error(S->cmd, "%s: %s", prefix, S->err.msg);
  else
    cli_error(S->cmd, "%s", S->err.msg);
  return 2;
}

/* Options after the table parse: sources, numbers, layout, ULP format, varlen, rules, oracle, output checks. */
static int score_options(score_t *S) {
  const char *s, *cmd = S->cmd;
  cli_args_t *a = &S->a;
  int rc;
  S->inputs_src = cli_get(a, "inputs");
  S->grads_src = cli_get(a, "grads");
  S->out_file = cli_get(a, "out");
  S->save_oracle = cli_get(a, "save-oracle");
  if (cli_get(a, "rows") != NULL && S->save_oracle != NULL) {
    cli_error(cmd, "--rows: --save-oracle would hold the drawn rows' problem only; leave one out");
    return 2;
  }
  if (S->inputs_src == NULL || S->grads_src == NULL) {
    cli_error(cmd, "give --inputs PATH and --grads PATH (see attnacc score --help)");
    return 2;
  }
  if ((s = cli_get(a, "dropout")) && cli_double(&S->dropout_p, cmd, "dropout", s, 0, 1, 1)) return 2;
  if (S->dropout_p >= 1) {
    cli_error(cmd, "--dropout: %s is not a probability below 1", s);
    return 2;
  }
  if ((s = cli_get(a, "rows")) && cli_size(&S->nrows, cmd, "rows", s, 1, INT32_MAX)) return 2;
  if ((s = cli_get(a, "rows-seed")) && cli_u64(&S->rows_seed, cmd, "rows-seed", s)) return 2;
  if ((s = cli_get(a, "scale")) && cli_double(&S->scale, cmd, "scale", s, 0, 1e300, 1))
    return 2; /* checked before any file is read */
  if ((s = cli_get(a, "threads")) && cli_size(&S->threads, cmd, "threads", s, 0, 4096)) return 2;
  if ((s = cli_get(a, "layout")) && aa_layout_from_name(&S->src.layout, s) != AA_OK) {
    cli_error(cmd, "--layout: '%s' is not bhnd, bnhd, hnd, nd, nhd or auto", s);
    return 2;
  }
  if ((s = cli_get(a, "ulp-fmt")) != NULL) {
    aa_fmt_t f;
    if (aa_fmt_from_name(&f, s) != AA_OK || (f != AA_FMT_BF16 && f != AA_FMT_FP16 && f != AA_FMT_FP32)) {
      cli_error(cmd, "--ulp-fmt: '%s' is not bf16, fp16 or fp32", s);
      return 2;
    }
    S->ulp_fmt = (int)f;
  }
  if ((s = cli_get(a, "kernel-fmt")) != NULL) {
    aa_fmt_t f;
    if (aa_fmt_from_name(&f, s) != AA_OK ||
        (f != AA_FMT_BF16 && f != AA_FMT_FP16 && f != AA_FMT_FP32 && f != AA_FMT_FP64)) {
      cli_error(cmd, "--kernel-fmt: '%s' is not bf16, fp16, fp32 or fp64", s);
      return 2;
    }
    S->kernel_fmt = (int)f;
  }
  if (cli_get(a, "cu-seqlens") != NULL) {
    size_t tq = 0, tk = 0;
    if (S->src.layout == AA_LAYOUT_AUTO) S->src.layout = AA_LAYOUT_NHD;
    if (S->src.layout != AA_LAYOUT_NHD) {
      cli_error(cmd, "--cu-seqlens needs the packed layout nhd ([total, H, d]), not --layout %s",
                aa_layout_name(S->src.layout));
      return 2;
    }
    if (features_cli_lengths(&S->fc, cmd, a, &tq, &tk)) return 2;
  }
  if ((s = cli_get(a, "rule")) && cli_rules_parse(S->rules, &S->nrules, &S->atol, &S->rtol, cmd, s)) return 2;
  if (cli_get(a, "bf16-bits") != NULL) S->src.flags |= AA_NPY_BF16_BITS;
  if (cli_oracle_opts(&S->oo, a, cmd)) return 2;
  S->oo.threads = (int)S->threads;
  if ((S->out_file && (rc = cli_check_out_file(S->out_file, &S->err))) ||
      (S->save_oracle && (rc = cli_check_out_dir(S->save_oracle, &S->err))))
    return fail(S, NULL);
  return cli_sources_open(&S->src, cmd, S->inputs_src, S->grads_src);
}

/* The inputs (cli/sources.c), with the resource check between reading and converting them. */
static int score_read_inputs(score_t *S) {
  const aa_dims_t *q = &S->src.qd, *k = &S->src.kd;
  if (cli_sources_read_inputs(&S->src)) return 2;
  /* two output sets: the given outputs and the naive reference */
  if (lim_check(S->cmd, &S->a, q->n, k->n, q->d, q->b * q->h, k->b * k->h, 2, S->oo.threads)) return 2;
  if (cli_sources_import_inputs(&S->src)) return 2;
  return cli_sources_keep(&S->src, S->dropout_p, &S->keep);
}

/* The format the kernel computes in: --kernel-fmt (every input must hold only its values), else the storage
   dtype, with a note when wider storage holds only BF16 or FP16 values (the naive reference of fa and sdpa
   follows this format: a BF16 kernel judged against an FP32 naive reference fails by orders of magnitude). */
static int holds_only(const aa_tensor_t *t, aa_fmt_t fmt) {
  aa_round_opts_t ro = {fmt, AA_RND_NE, 1, 0};
  for (size_t i = 0, n = aa_tensor_numel(t); i < n; i++)
    if (aa_round(t->data[i], &ro, NULL) != t->data[i]) return 0;
  return 1;
}

static int score_kernel_fmt(score_t *S) {
  const aa_tensor_t *ts[4] = {&S->src.in.q, &S->src.in.k, &S->src.in.v, &S->src.in.dO};
  static const char *const names[4] = {"q", "k", "v", "do"};
  aa_fmt_t narrow = AA_FMT_BF16;
  for (int i = 0; i < 4; i++) {
    aa_fmt_t f = aa_score_infer_fmt(ts[i]);
    if (S->kernel_fmt >= 0 && !holds_only(ts[i], (aa_fmt_t)S->kernel_fmt)) {
      cli_error(S->cmd, "--kernel-fmt %s: %s holds values that are not %s (they need %s)",
                cli_fmt_name((aa_fmt_t)S->kernel_fmt), names[i], cli_fmt_name((aa_fmt_t)S->kernel_fmt),
                cli_fmt_name(f));
      return 2;
    }
    if (f == AA_FMT_FP32 || f == AA_FMT_FP64 || (f == AA_FMT_FP16 && narrow == AA_FMT_BF16)) narrow = f;
  }
  if (S->kernel_fmt >= 0) {
    S->src.in_fmt = (aa_fmt_t)S->kernel_fmt;
    if (S->ulp_fmt < 0 && S->kernel_fmt != AA_FMT_FP64) S->ulp_fmt = S->kernel_fmt; /* ULPs of the kernel's format */
  } else if ((S->src.in_fmt == AA_FMT_FP32 || S->src.in_fmt == AA_FMT_FP64) &&
             (narrow == AA_FMT_BF16 || narrow == AA_FMT_FP16))
    fprintf(stderr,
            "attnacc %s: note: the inputs are stored as %s but every value is %s; if the kernel computes in %s, "
            "give --kernel-fmt %s (the fa and sdpa rules compare with a naive reference in the kernel's format)\n",
            S->cmd, cli_fmt_name(S->src.in_fmt), cli_fmt_name(narrow), cli_fmt_name(narrow), cli_fmt_name(narrow));
  return 0;
}

/* The problem (mask, features, dropout, scale, sinks, varlen, attention masks) and its checks. */
static int score_problem(score_t *S) {
  aa_problem_t *pb = &S->pb;
  if (cli_sources_problem(pb, &S->fc, &S->src, &S->a)) return 2;
  if (S->keep != NULL) {
    pb->keep = S->keep;
    pb->keep_scale = 1 / (1 - S->dropout_p);
  }
  pb->varlen_batch = S->fc.batch; /* aa_problem_check matches the offsets with the packed lengths */
  pb->cu_seqlens_q = S->fc.cu_q;
  pb->cu_seqlens_k = S->fc.cu_k;
  /* masks: the batch elements are the folded heads' outer index (b H + h) */
  if (masks_cli_problem(&S->mc, S->cmd, &S->a, S->src.qd.b, pb)) return 2;
  if (aa_problem_check(pb, &S->err) != AA_OK) return fail(S, NULL);
  if (cli_inputs_check_finite(&S->src.in, &S->err) != AA_OK) return fail(S, NULL);
  return 0;
}

/* The kernel's format for the expect rule (--kernel-fmt, else inferred from the values of the inputs and
   outputs, with a note when narrower than their storage), then the default rule and the rules' check. */
static int score_rules(score_t *S) {
  const aa_tensor_t in[4] = {S->src.in.q, S->src.in.k, S->src.in.v, S->src.in.dO};
  int inferred = 0;
  S->expect_fmt =
      S->kernel_fmt >= 0 ? (aa_fmt_t)S->kernel_fmt : aa_eval_kernel_fmt(&inferred, S->src.in_fmt, in, 4, S->src.g, 5);
  if (inferred)
    fprintf(stderr,
            "attnacc %s: warning: every input and output value is %s though stored as %s: the expect rule judges a "
            "%s kernel; give --kernel-fmt to say which precision the kernel computes in\n",
            S->cmd, cli_fmt_name(S->expect_fmt), cli_fmt_name(S->src.in_fmt), cli_fmt_name(S->expect_fmt));
  if (S->nrules == 0) S->rules[S->nrules++] = aa_eval_default_rule(S->expect_fmt);
  for (int i = 0; i < S->nrules; i++) {
    aa_fmt_t f = S->rules[i] == AA_RULE_EXPECT ? S->expect_fmt : S->src.in_fmt;
    if (aa_eval_rules_usable(&S->rules[i], 1, f, &S->err) != AA_OK) {
      cli_error(S->cmd, "--%s", S->err.msg);
      return 2;
    }
  }
  return 0;
}

/* The expect rule: its recipe in the kernel's format run on the inputs (tagged with its io format), through --cache
   when given (the statistics the rule reads). */
static int score_expect(score_t *S, const pass_t *P) {
  cli_inputs_t *in = P->in;
  aa_tensor_t *ts[5] = {&in->q, &in->k, &in->v, &in->dO, &in->sinks};
  const aa_tensor_t *tin[4] = {&in->q, &in->k, &in->v, &in->dO};
  const aa_problem_t *pb = P->pb;
  aa_recipe_t r;
  int rc, hit = 0, want = cli_get(&S->a, "expect") != NULL;
  for (int i = 0; i < S->nrules; i++)
    want |= S->rules[i] == AA_RULE_EXPECT;
  if (!want || S->expect_fmt == AA_FMT_FP64) return 0;
  if (aa_eval_expect_recipe(&r, cli_get(&S->a, "expect"), S->expect_fmt, &S->err) != AA_OK) return fail(S, NULL);
  for (int i = 0; i < 5; i++)
    if (ts[i]->data != NULL) ts[i]->fmt = r.io_fmt;
  cli_progress(S->cmd, "running the expect recipe",
               (double)pb->heads * (double)pb->n_q * (double)pb->n_k * (double)pb->d / 4);
  rc = aa_eval_recipe_cached(P->rec_v, &hit, &r, 0, pb, tin, P->oracle, &S->oo, cli_oracle_cache(), &S->err);
  cli_progress_end();
  S->have_rec = 1;
  if (rc != AA_OK) return fail(S, "expect");
  if (hit) fprintf(stderr, "attnacc %s: note: the expect recipe's statistics read from the cache\n", S->cmd);
  aa_eval_apply_expect(P->v, P->rec_v);
  return 0;
}

/* --rows: the kv head group drawn, and its problem and arrays cut from the whole ones (before the rows are). */
static int score_kv_cut(score_t *S) {
  kv_pass_t *K = &S->kv;
  const cli_inputs_t *in = &S->src.in;
  const aa_tensor_t *g = S->src.g;
  K->pb = S->pb_full;
  if (rows_cli_group_draw(&K->g, S->rows_seed, K->pb.heads, K->pb.kv_heads, &S->err) ||
      rows_cli_group_problem(&K->g, &K->pb, &S->err) || rows_cli_group_slice(&K->g, &K->in.q, &in->q, 0, &S->err) ||
      rows_cli_group_slice(&K->g, &K->in.dO, &in->dO, 0, &S->err) ||
      rows_cli_group_slice(&K->g, &K->in.k, &in->k, 1, &S->err) ||
      rows_cli_group_slice(&K->g, &K->in.v, &in->v, 1, &S->err) ||
      rows_cli_group_slice(&K->g, &K->given[2], &g[2], 1, &S->err) ||
      rows_cli_group_slice(&K->g, &K->given[3], &g[3], 1, &S->err) || aa_problem_check(&K->pb, &S->err) != AA_OK)
    return fail(S, NULL);
  return 0;
}

/* --rows K: the problem and the arrays cut down to K drawn query rows, and the kv head group's cut for dk and dv
   (score_kv_group); dk, dv and dsinks (sums over every row) leave the rows' pass, and dsinks is not scored. */
static int score_rows(score_t *S) {
  aa_tensor_t *g = S->src.g, *cut[5] = {&S->src.in.q, &S->src.in.dO, &g[0], &g[1], &S->src.lse};
  if (S->nrows >= S->pb.n_q) { /* every row: the whole problem */
    S->nrows = 0;
    return 0;
  }
  S->pb_full = S->pb;
  if (rows_cli_draw(&S->rows, S->nrows, S->rows_seed, S->pb.n_q, &S->err) ||
      rows_cli_problem(&S->rows, &S->pb, &S->err))
    return fail(S, NULL);
  if (score_kv_cut(S)) return 2;
  for (int i = 0; i < 5; i++)
    if (rows_cli_cut(&S->rows, cut[i], &S->err)) return fail(S, NULL);
  if (g[4].data != NULL)
    fprintf(stderr, "attnacc %s: note: --rows %zu: dsinks is not scored (it sums over every query row)\n", S->cmd,
            S->nrows);
  for (int i = 2; i < 5; i++)
    aa_tensor_free(&g[i]);
  S->src.qd.n = S->nrows;
  return 0;
}

/* Pass P's oracle (its seconds added to the report's), then the kernel's outputs g compared with it into P->v. */
static int pass_oracle(score_t *S, const pass_t *P, const aa_tensor_t g[5]) {
  const aa_problem_t *pb = P->pb;
  double seconds = 0;
  int rc;
  cli_progress(S->cmd, "running the oracle", (double)pb->heads * (double)pb->n_q * (double)pb->n_k * (double)pb->d);
  rc = cli_oracle_run(P->oracle, &seconds, S->cmd, pb, P->in, &S->oo);
  cli_progress_end();
  if (rc != 0) return 2;
  *P->have_oracle = 1;
  S->oracle_seconds += seconds;
  double t = aa_wall_seconds(); /* AA_SCORE_TIMES: the comparison apart from the oracle's seconds above */
  if (aa_eval_given(P->v, g, P->oracle, &(aa_eval_opts_t){S->ulp_fmt, S->atol, S->rtol}, &S->err) != AA_OK)
    return fail(S, NULL);
  aa_phase_mark("AA_SCORE_TIMES", "attnacc score", "  of which the comparison", &t);
  return 0;
}

/* The oracle, then the given outputs (and the lse) compared with it. */
static int score_oracle(score_t *S) {
  pass_t P = main_pass(S);
  int rc;
  cli_set_threads(S->threads);
  if ((rc = pass_oracle(S, &P, S->src.g)) != 0) return rc;
  if (S->src.lse.data != NULL &&
      (aa_eval_lse_prepare(&S->lse, &S->src.lse, &S->oracle.lse, &S->err) != AA_OK ||
       aa_eval_lse(&S->v, &S->lse, &(aa_eval_opts_t){S->ulp_fmt, S->atol, S->rtol}, &S->err) != AA_OK))
    return fail(S, NULL);
  return 0;
}

/* The naive reference in the inputs' own dtype, through --cache when given: the fa and sdpa rules. */
static int score_naive_own_dtype(score_t *S, const pass_t *P) {
  cli_inputs_t *in = P->in;
  aa_tensor_t *ts[5] = {&in->q, &in->k, &in->v, &in->dO, &in->sinks};
  const aa_tensor_t *tin[4] = {&in->q, &in->k, &in->v, &in->dO};
  const aa_problem_t *pb = P->pb;
  int rc, hit = 0;
  for (int i = 0; i < 5; i++)
    if (ts[i]->data != NULL) ts[i]->fmt = S->src.in_fmt;
  cli_progress(S->cmd, "running the naive reference",
               (double)pb->heads * (double)pb->n_q * (double)pb->n_k * (double)pb->d / 4);
  rc =
      aa_eval_naive_cached(P->snaive_v, &hit, S->src.in_fmt, pb, tin, P->oracle, &S->oo, cli_oracle_cache(), &S->err);
  cli_progress_end();
  if (rc != AA_OK) return fail(S, NULL);
  if (hit) fprintf(stderr, "attnacc %s: note: the naive reference's errors read from the cache\n", S->cmd);
  S->have_snaive = 1;
  aa_eval_apply_naive(P->v, P->snaive_v);
  return 0;
}

/* The naive reference runs only for the rules that read it (fa, sdpa; --rule all among them), and exists only
   below fp64: the default rule (expect, torch for fp64) reads nothing of it, so a default score skips its
   emulation (a fifth of a cold score's time) and reports fa and sdpa as not applied. */
static int needs_naive(const score_t *S) {
  for (int i = 0; i < S->nrules; i++)
    if (S->rules[i] == AA_RULE_FA || S->rules[i] == AA_RULE_SDPA) return S->src.in_fmt != AA_FMT_FP64;
  return 0;
}

/* --fa (legacy): the fa_* fields from naive-bf16, which needs bf16 inputs; the rules keep the own-dtype naive's. */
static int score_legacy_fa(score_t *S) {
  aa_tensor_t *ts[5] = {&S->src.in.q, &S->src.in.k, &S->src.in.v, &S->src.in.dO, &S->src.in.sinks};
  aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  aa_score_out_t keep[CLI_MAX_OUT];
  for (int i = 0; i < 5; i++) {
    size_t m = aa_tensor_numel(ts[i]);
    for (size_t j = 0; j < m; j++)
      if (aa_round(ts[i]->data[j], &ro, NULL) != ts[i]->data[j] && ts[i]->data[j] == ts[i]->data[j]) {
        cli_error(S->cmd, "--fa needs bf16 inputs, but %s holds values that are not bf16", S->src.label[i]);
        return 2;
      }
  }
  for (int i = 0; i < 5; i++)
    ts[i]->fmt = AA_FMT_BF16;
  if (aa_recipe_preset(&S->naive_r, "naive-bf16", &S->err) != AA_OK) return fail(S, "--fa");
  S->have_naive = 1;
  if (cli_run_variant(&S->naive_v, &S->naive_res, &S->naive_r, &S->pb, &S->src.in, &S->oracle, &S->err) != AA_OK)
    return fail(S, NULL);
  for (int i = 0; i < S->v.nout; i++)
    keep[i] = S->v.out[i].s;
  cli_apply_fa(&S->v, &S->naive_v);
  for (int i = 0; i < S->v.nout; i++)
    S->v.out[i].s = keep[i];
  return 0;
}

/* The kv head group's dk and dv into S->v before the lse (a full score's order: o, dq, dk, dv, lse), their indices
   moved to the caller's kv heads. The rows' oracle's dk and dv (sums over the drawn rows alone, compared with
   nothing) are swapped for the group's, so that the report's oracle bound is that of what was scored; its counts
   add the group's. */
static int kv_merge(score_t *S) {
  kv_pass_t *K = &S->kv;
  cli_variant_t *v = &S->v;
  int at = v->nout;
  aa_oracle_out_t t;
  if (v->nout + K->v.nout > CLI_MAX_OUT) {
    cli_error(S->cmd, "--rows: no room for the kv head group's %d outputs", K->v.nout);
    return 2;
  }
  if (at > 0 && strcmp(v->out[at - 1].name, "lse") == 0) at--;
  memmove(&v->out[at + K->v.nout], &v->out[at], (size_t)(v->nout - at) * sizeof *v->out);
  for (int i = 0; i < K->v.nout; i++) {
    v->out[at + i] = K->v.out[i];
    rows_cli_group_lift(&K->g, &v->out[at + i].s, K->pb.n_k, K->pb.d);
  }
  v->nout += K->v.nout;
  t = S->oracle.dk, S->oracle.dk = K->oracle.dk, K->oracle.dk = t;
  t = S->oracle.dv, S->oracle.dv = K->oracle.dv, K->oracle.dv = t;
  S->oracle.n_recomputed += K->oracle.n_recomputed;
  S->oracle.n_uncertified += K->oracle.n_uncertified;
  return 0;
}

/* --rows: the kv head group's pass, the main pass's steps on the group's problem (the oracle, the kernel's dk and
   dv, the naive reference when a rule reads it, the expect recipe: each cached under the group problem's key);
   then its dk and dv join the scored outputs. Last, after the rows' pass has read its oracle's dk and dv. */
static int score_kv_group(score_t *S) {
  pass_t P = kv_pass(S);
  int rc;
  if ((rc = pass_oracle(S, &P, S->kv.given)) != 0) return rc;
  if (needs_naive(S) && (rc = score_naive_own_dtype(S, &P)) != 0) return rc;
  if ((rc = score_expect(S, &P)) != 0) return rc;
  return kv_merge(S);
}

/* --out and --save-oracle are one file set (as run's --out, --save and
   --save-oracle): staged, then renamed together, so a failure in either
   leaves neither (and no folder this run created). The report is renamed
   last: one that cannot move its oracle files into place leaves no --out. */
static int score_write_files(score_t *S) {
  const char *what = NULL;
  aa_fileset_t stg;
  aa_fileset_init(&stg);
  if (S->save_oracle != NULL && cli_stage_oracle(&stg, &S->oracle, S->save_oracle, &S->err) != AA_OK)
    what = "--save-oracle";
  else if (S->out_file != NULL && aa_fileset_add(&stg, S->out_file, S->jtext, S->jlen, &S->err) != AA_OK)
    what = "--out";
  else if (aa_fileset_commit(&stg, &S->err) != AA_OK)
    what = "output";
  if (what != NULL) aa_fileset_abort(&stg);
  aa_fileset_free(&stg);
  return what != NULL ? fail(S, what) : 0;
}

/* The "kv_group" member of "rows": the kv head group whose dk and dv are scored, folded and as (batch, kv head),
   with its folded query heads. */
static json_t *kv_group_json(const score_t *S) {
  const rows_cli_group_t *g = &S->kv.g;
  json_t *j = json_object(), *qh = json_array();
  int bad = aa_json_set(j, "index", aa_json_u64(g->index));
  bad |= aa_json_set(j, "batch", aa_json_u64(g->index / S->src.kd.h));
  bad |= aa_json_set(j, "kv_head", aa_json_u64(g->index % S->src.kd.h));
  for (size_t h = 0; h < g->group; h++)
    bad |= aa_json_push(qh, aa_json_u64(g->index * g->group + h));
  bad |= aa_json_set(j, "query_heads", qh);
  bad |= aa_json_set(j, "draw", json_string("pcg32 (seed, 0x6b76), one bounded draw over the folded kv heads"));
  return bad ? (json_decref(j), NULL) : j;
}

/* The "rows" member of --rows: how many, of how many, the seed and the rows; the kv head group; what is scored. */
static json_t *rows_json(const score_t *S) {
  json_t *j = json_object(), *idx = json_array(), *sc = json_array();
  int bad = aa_json_set(j, "k", aa_json_u64(S->nrows));
  bad |= aa_json_set(j, "n_q", aa_json_u64(S->rows.n_q));
  bad |= aa_json_set(j, "seed", aa_json_u64(S->rows_seed));
  bad |= aa_json_set(j, "draw", json_string("pcg32 (seed, 0x726f7773), partial Fisher-Yates, sorted"));
  for (size_t i = 0; i < S->nrows; i++)
    bad |= aa_json_push(idx, aa_json_u64(S->rows.rows[i]));
  bad |= aa_json_set(j, "rows", idx);
  bad |= aa_json_set(j, "kv_group", kv_group_json(S));
  for (int i = 0; i < S->v.nout; i++)
    bad |= aa_json_push(sc, json_string(S->v.out[i].name));
  bad |= aa_json_set(j, "scored", sc);
  return bad ? (json_decref(j), NULL) : j;
}

/* The JSON (for --json and --out), --out and --save-oracle, then the table or the JSON on stdout. */
static int score_write(score_t *S) {
  int rc;
  S->ex = (cli_report_extra_t){S->src.layout,
                               S->src.qd,
                               S->src.kd,
                               S->rules,
                               S->nrules,
                               S->have_snaive ? S->snaive_v.variant : NULL,
                               S->have_rec ? S->rec_v.variant : NULL,
                               S->rows.rows};
  cli_set_report_extra(&S->ex);
  S->rep = (cli_report_t){
      S->cmd, 0, 0, NULL, 0, S->inputs_src, S->nrows ? &S->pb_full : &S->pb, &S->oo, &S->oracle, S->oracle_seconds};
  if (cli_get(&S->a, "json") != NULL || S->out_file != NULL) {
    json_t *doc = cli_json_doc(&S->rep, &S->v, 1);
    if (S->nrows > 0 && aa_json_set(doc, "rows", rows_json(S)) != 0) {
      json_decref(doc);
      doc = NULL;
    }
    S->jtext = aa_json_text(doc, 0, &S->jlen);
    json_decref(doc);
    if (S->jtext == NULL) {
      cli_error(S->cmd, "out of memory");
      return 2;
    }
  }
  if ((rc = score_write_files(S)) != 0) return rc;
  if (cli_get(&S->a, "json") != NULL) {
    fwrite(S->jtext, 1, S->jlen, stdout);
  } else {
    cli_print_table(stdout, &S->rep, &S->v, 1);
    printf("layout: %s %s, B=%zu H=%zu H_kv=%zu, inputs %s\n", aa_layout_name(S->src.layout),
           aa_layout_axes(S->src.layout), S->src.qd.b, S->src.qd.h, S->src.kd.h, cli_fmt_name(S->src.in_fmt));
    if (S->fc.batch > 0)
      printf("varlen batch: %zu sequences, %zu queries, %zu keys\n", S->fc.batch, S->src.qd.n, S->src.kd.n);
    if (S->nrows > 0)
      printf("rows: %zu of %zu query rows drawn (--rows-seed %llu); o, lse and dq of those rows scored; dk and dv of "
             "kv head group %zu (batch %zu, kv head %zu; query heads %zu..%zu folded) scored over every row\n",
             S->nrows, S->rows.n_q, (unsigned long long)S->rows_seed, S->kv.g.index, S->kv.g.index / S->src.kd.h,
             S->kv.g.index % S->src.kd.h, S->kv.g.index * S->kv.g.group, (S->kv.g.index + 1) * S->kv.g.group - 1);
    if (S->lse.empty > 0)
      printf("lse: %zu rows see no key (oracle -Inf, flash-attn +Inf: either accepted there)\n", S->lse.empty);
    cli_print_rules(stdout, &S->rep, &S->v, 1);
  }
  /* ferror too: a failed fwrite of the JSON leaves nothing for fflush to fail on */
  return fflush(stdout) != 0 || ferror(stdout) ? 2 : 0;
}

/* The exit status by the chosen rules: 0 pass, 1 fail (0 with --no-fail); a failure names the worst element. */
static int score_verdict(score_t *S) {
  char line[1024];
  int no_fail = cli_get(&S->a, "no-fail") != NULL;
  if (cli_verdict(&S->v, S->rules, S->nrules)) return 0;
  cli_first_failure(line, sizeof line, &S->rep, &S->v);
  fprintf(stderr, "attnacc score: FAIL: %s%s\n", line, no_fail ? " (--no-fail: exit 0)" : "");
  if (cli_get(&S->a, "layout") == NULL && S->src.layout == AA_LAYOUT_HND)
    fprintf(stderr, "attnacc score: the arrays were read as hnd [H, N, d] (3 axes); if they are flash-attn's "
                    "[N, H, d], give --layout nhd\n");
  return no_fail ? 0 : 1;
}

static void score_free(score_t *S) {
  features_cli_free(&S->fc);
  masks_cli_free(&S->mc);
  rows_cli_free(&S->rows);
  rows_cli_group_free(&S->kv.g);
  cli_inputs_free(&S->kv.in);
  for (int i = 0; i < 5; i++)
    aa_tensor_free(&S->kv.given[i]);
  cli_variant_free(&S->kv.rec_v);
  cli_variant_free(&S->kv.snaive_v);
  cli_variant_free(&S->kv.v);
  if (S->kv.have_oracle) aa_oracle_result_free(&S->kv.oracle);
  free(S->jtext);
  free(S->keep);
  aa_eval_lse_free(&S->lse);
  if (S->have_naive) aa_attn_result_free(&S->naive_res);
  cli_variant_free(&S->rec_v);
  cli_variant_free(&S->naive_v);
  cli_variant_free(&S->snaive_v);
  cli_variant_free(&S->v);
  if (S->have_oracle) aa_oracle_result_free(&S->oracle);
  cli_sources_free(&S->src);
}

int aa_cmd_score(int argc, char **argv) {
  char joined[256], **av;
  int rc;
  pass_t mp; /* the main pass */
  score_t *S = calloc(1, sizeof *S);
  if (S == NULL || (av = join_rule_words(&argc, argv, joined, sizeof joined)) == NULL) {
    free(S);
    cli_error("score", "out of memory");
    return 2;
  }
  mp = main_pass(S);
  S->cmd = "score";
  S->atol = S->rtol = -1;
  S->ulp_fmt = -1;
  S->kernel_fmt = -1;
  S->rows_seed = 1;
  S->src.layout = AA_LAYOUT_AUTO;
  rc = cli_args_parse(&S->a, S->cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, av);
  if (rc < 0) {
    /* AA_SCORE_TIMES=1: each step's seconds on stderr, as the Python path prints them (lib/score/flat.c) */
    double t = 0;
    aa_phase_mark("AA_SCORE_TIMES", "attnacc score", "", &t);
#define STEP(cond, call, what)                                                                                       \
  if (cond) {                                                                                                        \
    rc = call;                                                                                                       \
    aa_phase_mark("AA_SCORE_TIMES", "attnacc score", what, &t);                                                      \
  }
    rc = score_options(S);
    STEP(rc == 0, score_read_inputs(S), "inputs read")
    STEP(rc == 0, score_kernel_fmt(S), "kernel format")
    if (rc == 0 && cli_get(&S->a, "oracle-target") == NULL) S->oo.target = aa_score_oracle_target(S->src.in_fmt);
    STEP(rc == 0, score_problem(S), "problem")
    STEP(rc == 0, cli_sources_read_outputs(&S->src), "outputs read")
    STEP(rc == 0, score_rules(S), "rules")
    STEP(rc == 0 && S->nrows > 0, score_rows(S), "rows drawn")
    STEP(rc == 0, score_oracle(S), "oracle and comparison")
    STEP(rc == 0 && needs_naive(S), score_naive_own_dtype(S, &mp), "naive reference")
    STEP(rc == 0, score_expect(S, &mp), "expect recipe")
    STEP(rc == 0 && cli_get(&S->a, "fa") != NULL, score_legacy_fa(S), "legacy fa")
    STEP(rc == 0 && S->nrows > 0, score_kv_group(S), "kv group")
    STEP(rc == 0, score_write(S), "written")
    if (rc == 0) rc = score_verdict(S);
#undef STEP
  }
  score_free(S);
  free(S);
  free(av);
  return rc;
}
