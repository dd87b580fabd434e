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
#include "cli/rows.h"
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
    {"rule", "RULES", "fa; torch for fp64 inputs",
     "rules deciding the exit status: fa, torch, sdpa, abs-rel [ATOL RTOL], comma-separated, or all"},
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
     "score K query rows drawn at random (pcg32, --rows-seed): o, lse and dq of those rows exactly; dk and dv "
     "are not scored (each needs every row's P)"},
    {"rows-seed", "S", "1", "seed of the --rows draw"},
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
    "naive reference in the inputs' dtype runs only for the rules that read it (fa, sdpa).\n"
    "--rows K scores K query rows drawn at random (o, lse, dq; not dk, dv), at about K/Nq\n"
    "of the oracle's cost.\n"
    "Exit status: 0 every chosen rule passes, 1 one fails (0 with --no-fail),\n"
    "2 bad usage or input, or a failure while computing or writing.";

typedef enum { SRC_DIR, SRC_NPZ, SRC_ST } src_kind_t;

static int src_kind(src_kind_t *k, const char *path, const char *opt, aa_error_t *err) {
  struct stat st;
  size_t n = strlen(path);
  if (stat(path, &st) != 0) return aa_error_set(err, AA_EIO, "--%s %s: no such file or folder", opt, path);
  if (S_ISDIR(st.st_mode)) {
    *k = SRC_DIR;
    return AA_OK;
  }
  if (n >= 4 && strcmp(path + n - 4, ".npz") == 0) {
    *k = SRC_NPZ;
    return AA_OK;
  }
  if (n >= 12 && strcmp(path + n - 12, ".safetensors") == 0) {
    *k = SRC_ST;
    return AA_OK;
  }
  return aa_error_set(err, AA_EFORMAT, "--%s %s: not a folder, an .npz or a .safetensors file", opt, path);
}

/* One named array of a source; *present = 0 when optional and absent. label gets its name for messages. */
static int load_arr(aa_ndarray_t *a, char *label, size_t cap, const char *src, src_kind_t kind, const char *name,
                    int optional, unsigned flags, int *present, aa_error_t *err) {
  int rc;
  *present = 0;
  *a = (aa_ndarray_t){0};
  if (kind == SRC_DIR) {
    size_t len = strlen(src) + strlen(name) + 6;
    char *p = malloc(len);
    if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
    snprintf(p, len, "%s/%s.npy", src, name);
    snprintf(label, cap, "%s.npy", name);
    if (optional && access(p, F_OK) != 0) {
      free(p);
      return AA_OK;
    }
    rc = aa_npy_read_nd(a, p, flags, err);
    free(p);
  } else {
    snprintf(label, cap, "%s[%s]", src, name);
    rc = kind == SRC_NPZ ? aa_npz_read(a, src, name, flags, err) : aa_safetensors_read(a, src, name, flags, err);
    if (rc == AA_ENOTFOUND && optional) return AA_OK;
  }
  if (rc == AA_OK) *present = 1;
  return rc;
}

static void nd_str(char *buf, size_t cap, const aa_ndarray_t *a) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < a->ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%zu", i ? ", " : "", a->shape[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

static int same_nd(const aa_ndarray_t *a, const aa_ndarray_t *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

/* [N, d] -> [1, N, d], so that one-head arrays mix with [H, N, d] ones as before layouts existed. */
static void promote_2d(aa_ndarray_t *a) {
  if (a->data == NULL || a->ndim != 2) return;
  a->shape[2] = a->shape[1];
  a->shape[1] = a->shape[0];
  a->shape[0] = 1;
  a->ndim = 3;
}

static int any_3d(const aa_ndarray_t *a, int n) {
  for (int i = 0; i < n; i++)
    if (a[i].data != NULL && a[i].ndim == 3) return 1;
  return 0;
}

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

/* The state of one score run: options, the arrays as read, the problem, the oracle and the evaluation. */
typedef struct {
  const char *cmd;
  cli_args_t a;
  aa_error_t err;
  const char *inputs_src, *grads_src, *out_file, *save_oracle;
  size_t threads, nrows;
  uint64_t rows_seed;
  double scale, oracle_seconds, atol, rtol, dropout_p;
  int ulp_fmt, kernel_fmt, nrules, have_oracle, have_naive, have_snaive;
  unsigned flags;
  aa_rule_t rules[AA_RULE_COUNT];
  src_kind_t ik, gk;
  aa_layout_t layout;
  features_cli_t fc;
  aa_dims_t qd, kd;
  aa_ndarray_t raw[6], graw[6]; /* q, k, v, do, sinks, keep; o, dq, dk, dv, dsinks, lse */
  char label[6][320], glabel[6][320];
  uint8_t *keep;    /* the kernel's dropout keep mask, folded [B*H][Nq][Nk] */
  aa_tensor_t glse; /* the kernel's lse, folded [B*H, Nq] */
  aa_eval_lse_t lse;
  rows_cli_t rows;
  cli_inputs_t in;
  aa_tensor_t g[5];
  aa_problem_t pb, pb_full; /* the problem scored, and the whole one (they differ with --rows) */
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  cli_variant_t v, naive_v, snaive_v;
  aa_attn_result_t naive_res;
  aa_recipe_t naive_r;
  aa_fmt_t in_fmt;
  char *jtext;
  size_t jlen;
  cli_report_t rep;
  cli_report_extra_t ex;
} score_t;

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
  if ((s = cli_get(a, "scale")) && cli_double(&S->scale, cmd, "scale", s, 0, 1e300, 1)) return 2;
  if ((s = cli_get(a, "threads")) && cli_size(&S->threads, cmd, "threads", s, 0, 4096)) return 2;
  if ((s = cli_get(a, "layout")) && aa_layout_from_name(&S->layout, s) != AA_OK) {
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
    if (S->layout == AA_LAYOUT_AUTO) S->layout = AA_LAYOUT_NHD;
    if (S->layout != AA_LAYOUT_NHD) {
      cli_error(cmd, "--cu-seqlens needs the packed layout nhd ([total, H, d]), not --layout %s",
                aa_layout_name(S->layout));
      return 2;
    }
    if (features_cli_lengths(&S->fc, cmd, a, &tq, &tk)) return 2;
  }
  if ((s = cli_get(a, "rule")) && cli_rules_parse(S->rules, &S->nrules, &S->atol, &S->rtol, cmd, s)) return 2;
  if (cli_get(a, "bf16-bits") != NULL) S->flags |= AA_NPY_BF16_BITS;
  if (cli_oracle_opts(&S->oo, a, cmd)) return 2;
  S->oo.threads = (int)S->threads;
  if ((S->out_file && (rc = cli_check_out_file(S->out_file, &S->err))) ||
      (S->save_oracle && (rc = cli_check_out_dir(S->save_oracle, &S->err))) ||
      (rc = src_kind(&S->ik, S->inputs_src, "inputs", &S->err)) ||
      (rc = src_kind(&S->gk, S->grads_src, "grads", &S->err)))
    return fail(S, NULL);
  return 0;
}

/* q and k agree in axes, the layout resolves, v matches k and dO matches q; the layout's dims. */
static int score_resolve_layout(score_t *S) {
  char sa[96], sb2[96];
  const aa_ndarray_t *q = &S->raw[0], *k = &S->raw[1];
  if (q->ndim != k->ndim) {
    nd_str(sa, sizeof sa, q);
    nd_str(sb2, sizeof sb2, k);
    cli_error(S->cmd, "%s: shape %s has %d axes but %s's %s has %d", S->label[1], sb2, k->ndim, S->label[0], sa,
              q->ndim);
    return 2;
  }
  if (aa_layout_resolve(&S->layout, S->layout, q->ndim, q->shape, k->shape, &S->err) != AA_OK) return fail(S, NULL);
  for (int i = 2; i < 4; i++)
    if (!same_nd(&S->raw[i], &S->raw[i == 2 ? 1 : 0])) {
      nd_str(sa, sizeof sa, &S->raw[i]);
      nd_str(sb2, sizeof sb2, &S->raw[i == 2 ? 1 : 0]);
      cli_error(S->cmd, "%s: shape %s does not match %s's %s", S->label[i], sa, S->label[i == 2 ? 1 : 0], sb2);
      return 2;
    }
  aa_layout_dims(&S->qd, S->layout, q->ndim, q->shape);
  aa_layout_dims(&S->kd, S->layout, k->ndim, k->shape);
  return 0;
}

/* The optional sinks [H, K] or [K] (batch 1 only). */
static int score_sinks(score_t *S) {
  const aa_ndarray_t *r = &S->raw[4];
  size_t shp[2] = {r->ndim == 1 ? 1 : r->shape[0], r->shape[r->ndim - 1]};
  char sa[96];
  nd_str(sa, sizeof sa, r);
  if (r->ndim > 2 || shp[0] != S->qd.h || S->qd.b != 1) {
    cli_error(S->cmd, "%s: shape %s is not [H, K] with H = %zu query heads%s", S->label[4], sa, S->qd.h,
              S->qd.b != 1 ? " (sinks need batch 1)" : "");
    return 2;
  }
  if (aa_tensor_alloc(&S->in.sinks, 2, shp, r->fmt) != AA_OK) {
    cli_error(S->cmd, "out of memory");
    return 2;
  }
  memcpy(S->in.sinks.data, r->data, shp[0] * shp[1] * sizeof(double));
  return 0;
}

/* An array of the folded heads followed by the axes rest[0..nrest-1]: [B, H, rest] (4-axis layouts: flash-attn's
   softmax_lse and dropout mask are head-major whatever q's layout), [H, rest] or [rest] (one head); 0, or 2 after a
   message naming what it should be. */
static int check_headmajor(score_t *S, const aa_ndarray_t *r, const char *label, const size_t *rest, int nrest,
                           const char *what) {
  int np = r->ndim - nrest, ok = np >= 0 && np <= 2;
  char sa[96];
  for (int i = 0; ok && i < nrest; i++)
    ok = r->shape[np + i] == rest[i];
  if (ok)
    ok = np == 2   ? r->shape[0] == S->qd.b && r->shape[1] == S->qd.h
         : np == 1 ? S->qd.b == 1 && r->shape[0] == S->qd.h
                   : S->qd.b * S->qd.h == 1;
  if (ok) return 0;
  nd_str(sa, sizeof sa, r);
  cli_error(S->cmd, "%s: shape %s is not %s = [%zu, %zu, %zu%s] (B, H of q; [H, ...] with one batch)", label, sa,
            what, S->qd.b, S->qd.h, rest[0], nrest > 1 ? ", Nk" : "");
  return 2;
}

/* The keep mask of --dropout P: 0/1 values [B, H, Nq, Nk], folded into [B*H][Nq][Nk] for the problem. */
static int score_keep(score_t *S) {
  const aa_ndarray_t *r = &S->raw[5];
  size_t rest[2] = {S->qd.n, S->kd.n}, n;
  if ((r->data != NULL) != (S->dropout_p > 0)) {
    cli_error(S->cmd,
              r->data != NULL ? "%s: a keep mask needs --dropout P (the kernel's dropout probability)"
                              : "--dropout needs the kernel's keep mask: the array keep in %s",
              r->data != NULL ? S->label[5] : S->inputs_src);
    return 2;
  }
  if (r->data == NULL) return 0;
  if (check_headmajor(S, r, S->label[5], rest, 2, "[B, H, Nq, Nk]")) return 2;
  n = S->qd.b * S->qd.h * rest[0] * rest[1];
  if ((S->keep = malloc(n)) == NULL) {
    cli_error(S->cmd, "out of memory");
    return 2;
  }
  for (size_t i = 0; i < n; i++) {
    if (r->data[i] != 0 && r->data[i] != 1) {
      cli_error(S->cmd, "%s: element %zu is %g; a keep mask holds 0 (dropped) and 1 (kept)", S->label[5], i,
                r->data[i]);
      return 2;
    }
    S->keep[i] = r->data[i] == 1;
  }
  return 0;
}

/* Read q, k, v, do (and sinks, keep), resolve the layout, fold into [B*H, N, d]; the widest input format. */
static int score_read_inputs(score_t *S) {
  static const char *iname[6] = {"q", "k", "v", "do", "sinks", "keep"};
  aa_tensor_t *dst[4] = {&S->in.q, &S->in.k, &S->in.v, &S->in.dO};
  int present;
  for (int i = 0; i < 6; i++)
    if (load_arr(&S->raw[i], S->label[i], sizeof S->label[i], S->inputs_src, S->ik, iname[i], i >= 4, S->flags,
                 &present, &S->err))
      return fail(S, NULL);
  if (S->layout != AA_LAYOUT_ND && S->layout != AA_LAYOUT_NHD && any_3d(S->raw, 4))
    for (int i = 0; i < 4; i++)
      promote_2d(&S->raw[i]);
  if (score_resolve_layout(S)) return 2;
  /* two output sets: the given outputs and the naive reference */
  if (lim_check(S->cmd, &S->a, S->qd.n, S->kd.n, S->qd.d, S->qd.b * S->qd.h, S->kd.b * S->kd.h, 2, S->oo.threads))
    return 2;
  for (int i = 0; i < 4; i++) {
    const aa_ndarray_t *r = &S->raw[i];
    if (aa_layout_import(dst[i], r->data, r->fmt, S->layout, r->ndim, r->shape, &S->err)) return fail(S, S->label[i]);
    /* the widest input format: the naive reference's (bf16 < fp16 < fp32 < fp64 by range of values held) */
    if (r->fmt == AA_FMT_FP64 || (r->fmt == AA_FMT_FP32 && S->in_fmt != AA_FMT_FP64) ||
        (r->fmt == AA_FMT_FP16 && S->in_fmt == AA_FMT_BF16))
      S->in_fmt = r->fmt;
  }
  if (score_keep(S)) return 2;
  return S->raw[4].data != NULL ? score_sinks(S) : 0;
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
  const aa_tensor_t *ts[4] = {&S->in.q, &S->in.k, &S->in.v, &S->in.dO};
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
    S->in_fmt = (aa_fmt_t)S->kernel_fmt;
    if (S->ulp_fmt < 0 && S->kernel_fmt != AA_FMT_FP64) S->ulp_fmt = S->kernel_fmt; /* ULPs of the kernel's format */
  } else if ((S->in_fmt == AA_FMT_FP32 || S->in_fmt == AA_FMT_FP64) &&
             (narrow == AA_FMT_BF16 || narrow == AA_FMT_FP16))
    fprintf(stderr,
            "attnacc %s: note: the inputs are stored as %s but every value is %s; if the kernel computes in %s, "
            "give --kernel-fmt %s (the fa and sdpa rules compare with a naive reference in the kernel's format)\n",
            S->cmd, cli_fmt_name(S->in_fmt), cli_fmt_name(narrow), cli_fmt_name(narrow), cli_fmt_name(narrow));
  return 0;
}

/* run's problem features (--causal-align, --window W|L,R, --softcap, --alibi...; features_cli_problem) on the
   folded heads: ALiBi slopes are per head of q (flash-attn's alibi_slopes [H]), the same for every batch. */
static int score_features(score_t *S) {
  aa_problem_t *pb = &S->pb;
  size_t heads = pb->heads, h = S->qd.h;
  double *all;
  pb->heads = h;
  int rc = features_cli_problem(&S->fc, S->cmd, &S->a, pb);
  pb->heads = heads;
  if (rc || S->fc.slopes == NULL || heads == h) return rc;
  if ((all = realloc(S->fc.slopes, heads * sizeof *all)) == NULL) {
    cli_error(S->cmd, "out of memory");
    return 2;
  }
  for (size_t i = h; i < heads; i++)
    all[i] = all[i % h];
  S->fc.slopes = all;
  pb->alibi_slopes = all;
  return 0;
}

/* The problem (mask, features, dropout, scale, sinks, varlen) and its checks; the default rule. */
static int score_problem(score_t *S) {
  aa_problem_t *pb = &S->pb;
  aa_problem_init(pb, S->qd.n, S->kd.n, S->qd.d, S->qd.b * S->qd.h, S->kd.b * S->kd.h);
  pb->causal = cli_get(&S->a, "causal") != NULL;
  if (score_features(S)) return 2;
  if (S->keep != NULL) {
    pb->keep = S->keep;
    pb->keep_scale = 1 / (1 - S->dropout_p);
  }
  if (cli_get(&S->a, "scale") != NULL) {
    pb->scale_default = 0;
    pb->scale = S->scale;
  }
  if (S->in.sinks.data != NULL) {
    pb->num_sinks = S->in.sinks.shape[1];
    pb->sinks = S->in.sinks.data;
  }
  pb->varlen_batch = S->fc.batch; /* aa_problem_check matches the offsets with the packed lengths */
  pb->cu_seqlens_q = S->fc.cu_q;
  pb->cu_seqlens_k = S->fc.cu_k;
  if (aa_problem_check(pb, &S->err) != AA_OK) return fail(S, NULL);
  if (cli_inputs_check_finite(&S->in, &S->err) != AA_OK) return fail(S, NULL);
  if (S->nrules == 0) S->rules[S->nrules++] = aa_eval_default_rule(S->in_fmt);
  if (aa_eval_rules_usable(S->rules, S->nrules, S->in_fmt, &S->err) != AA_OK) {
    cli_error(S->cmd, "--%s", S->err.msg);
    return 2;
  }
  return 0;
}

/* The kernel's optional lse [B, H, Nq] (natural log, softmax scale included: flash-attn's softmax_lse), folded. */
static int score_read_lse(score_t *S) {
  aa_ndarray_t *gr = &S->graw[5];
  size_t shp[2] = {S->qd.b * S->qd.h, S->qd.n};
  int present;
  if (load_arr(gr, S->glabel[5], sizeof S->glabel[5], S->grads_src, S->gk, "lse", 1, S->flags, &present, &S->err))
    return fail(S, NULL);
  if (!present) return 0;
  if (check_headmajor(S, gr, S->glabel[5], &shp[1], 1, "[B, H, Nq]")) return 2;
  if (aa_tensor_alloc(&S->glse, 2, shp, gr->fmt) != AA_OK) {
    cli_error(S->cmd, "out of memory");
    return 2;
  }
  memcpy(S->glse.data, gr->data, shp[0] * shp[1] * sizeof(double));
  return 0;
}

/* The kernel's o (optional), dq, dk, dv and (with sinks) dsinks, in the inputs' layout. */
static int score_read_outputs(score_t *S) {
  static const char *gname[5] = {"o", "dq", "dk", "dv", "dsinks"};
  for (int i = 0; i < 5; i++) {
    int li = i == 0 || i == 1 ? 0 : i == 4 ? 4 : 1, present;
    const aa_ndarray_t *like = &S->raw[li];
    aa_ndarray_t *gr = &S->graw[i];
    char sa[96], sb2[96];
    if (i == 4 && S->in.sinks.data == NULL) continue;
    if (load_arr(gr, S->glabel[i], sizeof S->glabel[i], S->grads_src, S->gk, gname[i], i == 0 || i == 4, S->flags,
                 &present, &S->err))
      return fail(S, NULL);
    if (!present) continue;
    if (i < 4 && like->ndim == 3) promote_2d(gr);
    if (!same_nd(gr, like)) {
      nd_str(sa, sizeof sa, gr);
      nd_str(sb2, sizeof sb2, like);
      cli_error(S->cmd, "%s: shape %s does not match %s's %s", S->glabel[i], sa, S->label[li], sb2);
      return 2;
    }
    if (i == 4) {
      size_t shp[2] = {S->in.sinks.shape[0], S->in.sinks.shape[1]};
      if (aa_tensor_alloc(&S->g[4], 2, shp, gr->fmt) != AA_OK) {
        cli_error(S->cmd, "out of memory");
        return 2;
      }
      memcpy(S->g[4].data, gr->data, shp[0] * shp[1] * sizeof(double));
    } else if (aa_layout_import(&S->g[i], gr->data, gr->fmt, S->layout, gr->ndim, gr->shape, &S->err)) {
      return fail(S, S->glabel[i]);
    }
  }
  return score_read_lse(S);
}

/* --rows K: the problem and the arrays cut down to K drawn query rows; dk, dv and dsinks (sums over every row) are
   dropped from the scoring, with a note. */
static int score_rows(score_t *S) {
  aa_tensor_t *cut[5] = {&S->in.q, &S->in.dO, &S->g[0], &S->g[1], &S->glse};
  if (S->nrows >= S->pb.n_q) { /* every row: the whole problem */
    S->nrows = 0;
    return 0;
  }
  S->pb_full = S->pb;
  if (rows_cli_draw(&S->rows, S->nrows, S->rows_seed, S->pb.n_q, &S->err) ||
      rows_cli_problem(&S->rows, &S->pb, &S->err))
    return fail(S, NULL);
  for (int i = 0; i < 5; i++)
    if (rows_cli_cut(&S->rows, cut[i], &S->err)) return fail(S, NULL);
  if (S->g[2].data != NULL || S->g[3].data != NULL || S->g[4].data != NULL)
    fprintf(stderr, "attnacc %s: note: --rows %zu: dk, dv%s are not scored (each sums over every query row)\n",
            S->cmd, S->nrows, S->g[4].data != NULL ? " and dsinks" : "");
  for (int i = 2; i < 5; i++)
    aa_tensor_free(&S->g[i]);
  S->qd.n = S->nrows;
  return 0;
}

/* The oracle, then the given outputs compared with it. */
static int score_oracle(score_t *S) {
  const aa_problem_t *pb = &S->pb;
  int rc;
  cli_set_threads(S->threads);
  cli_progress(S->cmd, "running the oracle", (double)pb->heads * (double)pb->n_q * (double)pb->n_k * (double)pb->d);
  rc = cli_oracle_run(&S->oracle, &S->oracle_seconds, S->cmd, pb, &S->in, &S->oo);
  cli_progress_end();
  if (rc != 0) return 2;
  S->have_oracle = 1;
  if (aa_eval_given(&S->v, S->g, &S->oracle, &(aa_eval_opts_t){S->ulp_fmt, S->atol, S->rtol}, &S->err) != AA_OK)
    return fail(S, NULL);
  if (S->glse.data != NULL &&
      (aa_eval_lse_prepare(&S->lse, &S->glse, &S->oracle.lse, &S->err) != AA_OK ||
       aa_eval_lse(&S->v, &S->lse, &(aa_eval_opts_t){S->ulp_fmt, S->atol, S->rtol}, &S->err) != AA_OK))
    return fail(S, NULL);
  return 0;
}

/* The naive reference in the inputs' own dtype, through --cache when given: the fa and sdpa rules. */
static int score_naive_own_dtype(score_t *S) {
  aa_tensor_t *ts[5] = {&S->in.q, &S->in.k, &S->in.v, &S->in.dO, &S->in.sinks};
  const aa_tensor_t *in[4] = {&S->in.q, &S->in.k, &S->in.v, &S->in.dO};
  const aa_problem_t *pb = &S->pb;
  int rc, hit = 0;
  for (int i = 0; i < 5; i++)
    if (ts[i]->data != NULL) ts[i]->fmt = S->in_fmt;
  cli_progress(S->cmd, "running the naive reference",
               (double)pb->heads * (double)pb->n_q * (double)pb->n_k * (double)pb->d / 4);
  rc = aa_eval_naive_cached(&S->snaive_v, &hit, S->in_fmt, pb, in, &S->oracle, &S->oo, cli_oracle_cache(), &S->err);
  cli_progress_end();
  if (rc != AA_OK) return fail(S, NULL);
  if (hit) fprintf(stderr, "attnacc %s: note: the naive reference's errors read from the cache\n", S->cmd);
  S->have_snaive = 1;
  aa_eval_apply_naive(&S->v, &S->snaive_v);
  return 0;
}

/* The naive reference runs only for the rules that read it (fa, sdpa), and exists only below fp64. */
static int needs_naive(const score_t *S) {
  for (int i = 0; i < S->nrules; i++)
    if (S->rules[i] == AA_RULE_FA || S->rules[i] == AA_RULE_SDPA) return S->in_fmt != AA_FMT_FP64;
  return 0;
}

/* --fa (legacy): the fa_* fields from naive-bf16, which needs bf16 inputs; the rules keep the own-dtype naive's. */
static int score_legacy_fa(score_t *S) {
  aa_tensor_t *ts[5] = {&S->in.q, &S->in.k, &S->in.v, &S->in.dO, &S->in.sinks};
  aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  aa_score_out_t keep[CLI_MAX_OUT];
  for (int i = 0; i < 5; i++) {
    size_t m = aa_tensor_numel(ts[i]);
    for (size_t j = 0; j < m; j++)
      if (aa_round(ts[i]->data[j], &ro, NULL) != ts[i]->data[j] && ts[i]->data[j] == ts[i]->data[j]) {
        cli_error(S->cmd, "--fa needs bf16 inputs, but %s holds values that are not bf16", S->label[i]);
        return 2;
      }
  }
  for (int i = 0; i < 5; i++)
    ts[i]->fmt = AA_FMT_BF16;
  if (aa_recipe_preset(&S->naive_r, "naive-bf16", &S->err) != AA_OK) return fail(S, "--fa");
  S->have_naive = 1;
  if (cli_run_variant(&S->naive_v, &S->naive_res, &S->naive_r, &S->pb, &S->in, &S->oracle, &S->err) != AA_OK)
    return fail(S, NULL);
  for (int i = 0; i < S->v.nout; i++)
    keep[i] = S->v.out[i].s;
  cli_apply_fa(&S->v, &S->naive_v);
  for (int i = 0; i < S->v.nout; i++)
    S->v.out[i].s = keep[i];
  return 0;
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

/* The "rows" member of --rows: how many, of how many, the seed and the rows; what is scored. */
static json_t *rows_json(const score_t *S) {
  json_t *j = json_object(), *idx = json_array(), *sc = json_array();
  int bad = aa_json_set(j, "k", aa_json_u64(S->nrows));
  bad |= aa_json_set(j, "n_q", aa_json_u64(S->rows.n_q));
  bad |= aa_json_set(j, "seed", aa_json_u64(S->rows_seed));
  bad |= aa_json_set(j, "draw", json_string("pcg32 (seed, 0x726f7773), partial Fisher-Yates, sorted"));
  for (size_t i = 0; i < S->nrows; i++)
    bad |= aa_json_push(idx, aa_json_u64(S->rows.rows[i]));
  bad |= aa_json_set(j, "rows", idx);
  for (int i = 0; i < S->v.nout; i++)
    bad |= aa_json_push(sc, json_string(S->v.out[i].name));
  bad |= aa_json_set(j, "scored", sc);
  return bad ? (json_decref(j), NULL) : j;
}

/* The JSON (for --json and --out), --out and --save-oracle, then the table or the JSON on stdout. */
static int score_write(score_t *S) {
  int rc;
  S->ex = (cli_report_extra_t){
      S->layout, S->qd, S->kd, S->rules, S->nrules, S->have_snaive ? S->snaive_v.variant : NULL, S->rows.rows};
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
    printf("layout: %s %s, B=%zu H=%zu H_kv=%zu, inputs %s\n", aa_layout_name(S->layout), aa_layout_axes(S->layout),
           S->qd.b, S->qd.h, S->kd.h, cli_fmt_name(S->in_fmt));
    if (S->fc.batch > 0)
      printf("varlen batch: %zu sequences, %zu queries, %zu keys\n", S->fc.batch, S->qd.n, S->kd.n);
    if (S->nrows > 0)
      printf("rows: %zu of %zu query rows drawn (--rows-seed %llu); o, lse and dq of those rows scored, dk and dv "
             "not (they sum over every row)\n",
             S->nrows, S->rows.n_q, (unsigned long long)S->rows_seed);
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
  if (cli_get(&S->a, "layout") == NULL && S->layout == AA_LAYOUT_HND)
    fprintf(stderr, "attnacc score: the arrays were read as hnd [H, N, d] (3 axes); if they are flash-attn's "
                    "[N, H, d], give --layout nhd\n");
  return no_fail ? 0 : 1;
}

static void score_free(score_t *S) {
  features_cli_free(&S->fc);
  rows_cli_free(&S->rows);
  free(S->jtext);
  free(S->keep);
  aa_tensor_free(&S->glse);
  aa_eval_lse_free(&S->lse);
  for (int i = 0; i < 6; i++) {
    if (i < 5) aa_tensor_free(&S->g[i]);
    aa_ndarray_free(&S->raw[i]);
    aa_ndarray_free(&S->graw[i]);
  }
  if (S->have_naive) aa_attn_result_free(&S->naive_res);
  cli_variant_free(&S->naive_v);
  cli_variant_free(&S->snaive_v);
  cli_variant_free(&S->v);
  if (S->have_oracle) aa_oracle_result_free(&S->oracle);
  cli_inputs_free(&S->in);
}

int aa_cmd_score(int argc, char **argv) {
  char joined[256], **av;
  int rc;
  score_t *S = calloc(1, sizeof *S);
  if (S == NULL || (av = join_rule_words(&argc, argv, joined, sizeof joined)) == NULL) {
    free(S);
    cli_error("score", "out of memory");
    return 2;
  }
  S->cmd = "score";
  S->atol = S->rtol = -1;
  S->ulp_fmt = -1;
  S->kernel_fmt = -1;
  S->rows_seed = 1;
  S->layout = AA_LAYOUT_AUTO;
  S->in_fmt = AA_FMT_BF16;
  rc = cli_args_parse(&S->a, S->cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, av);
  if (rc < 0) {
    rc = score_options(S);
    if (rc == 0) rc = score_read_inputs(S);
    if (rc == 0) rc = score_kernel_fmt(S);
    if (rc == 0) rc = score_problem(S);
    if (rc == 0) rc = score_read_outputs(S);
    if (rc == 0 && S->nrows > 0) rc = score_rows(S);
    if (rc == 0) rc = score_oracle(S);
    if (rc == 0 && needs_naive(S)) rc = score_naive_own_dtype(S);
    if (rc == 0 && cli_get(&S->a, "fa") != NULL) rc = score_legacy_fa(S);
    if (rc == 0) rc = score_write(S);
    if (rc == 0) rc = score_verdict(S);
  }
  score_free(S);
  free(S);
  free(av);
  return rc;
}
