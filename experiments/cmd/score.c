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
#include "commands.h"

static const cli_opt_t opts[] = {
    {"inputs", "PATH", NULL,
     "q, k, v, do [, sinks]: a folder of NAME.npy, an .npz or a .safetensors file (required)"},
    {"grads", "PATH", NULL, "dq, dk, dv [, o] [, dsinks], the same kinds of PATH (required; may equal --inputs)"},
    {"layout", "bhnd|bnhd|hnd|nd|nhd", "inferred",
     "axes of every array: [B,H,N,d], [B,N,H,d], [H,N,d], [N,d] or [N,H,d] (3 axes: hnd unless nhd is given)"},
    CLI_OPT_CAUSAL,
    {"cu-seqlens", "FILE", NULL,
     "varlen batch: packed [total, H, d] arrays; FILE line 1 cu_seqlens_q, optional line 2 cu_seqlens_k"},
    {"window", "W", "0 = none", "sliding window of W keys (needs --causal)"},
    CLI_OPT_SCALE,
    CLI_OPTS_ORACLE,
    {"rule", "RULES", "fa; torch for fp64 inputs",
     "rules deciding the exit status: fa, torch, sdpa, abs-rel [ATOL RTOL], comma-separated, or all"},
    {"no-fail", NULL, NULL, "exit 0 even when a rule fails (the verdict is still printed)"},
    {"ulp-fmt", "bf16|fp16|fp32", "the data's own", "format ULP distances are counted in"},
    {"bf16-bits", NULL, NULL, "read '<i2' (int16) arrays as BF16 bit patterns (torch: t.view(torch.int16))"},
    {"fa", NULL, NULL, "legacy: also fill the fa_* fields with naive-bf16 (needs bf16-representable inputs)"},
    {"allow-nan", NULL, NULL, "accept NaN/Inf in the inputs (refused otherwise)"},
    {"json", NULL, NULL, "print the JSON document (experiments/README-json.md) instead of the table"},
    {"out", "FILE", NULL, "also write the JSON document to FILE (atomically)"},
    {"save-oracle", "DIR", NULL, "write the oracle's o/lse/dq/dk/dv (FP64, '<f8') into DIR"},
    {"threads", "T", "0 = all", "threads for the oracle (results do not depend on it)"},
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
    "Runs the oracle, prints the metrics of `attnacc run` (variant \"external\"), the robust\n"
    "measures and every rule's ratio to what it allows, then the verdict by --rule.\n"
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

int aa_cmd_score(int argc, char **argv) {
  const char *cmd = "score";
  cli_args_t a;
  aa_error_t err = {{0}};
  const char *s, *inputs_src, *grads_src, *out_file, *save_oracle;
  size_t window = 0, threads = 0;
  double scale = 0, oracle_seconds, atol = -1, rtol = -1;
  int rc, status = 2, present, have_oracle = 0, have_naive = 0, have_snaive = 0, ulp_fmt = -1, nrules = 0;
  unsigned flags = 0;
  aa_rule_t rules[AA_RULE_COUNT];
  src_kind_t ik, gk;
  aa_layout_t layout = AA_LAYOUT_AUTO;
  features_cli_t fc = {0};
  aa_dims_t qd, kd;
  aa_ndarray_t raw[5], graw[5];
  char label[5][320], glabel[5][320], joined[256], **av;
  cli_inputs_t in = {0};
  aa_tensor_t g[5];
  const char *gname[5] = {"o", "dq", "dk", "dv", "dsinks"};
  const char *iname[5] = {"q", "k", "v", "do", "sinks"};
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  cli_variant_t v, naive_v, snaive_v;
  aa_attn_result_t naive_res, snaive_res;
  aa_recipe_t naive_r, snaive_r;
  aa_fmt_t in_fmt = AA_FMT_BF16;
  char *jtext = NULL;
  size_t jlen = 0;
  cli_report_t rep;
  cli_report_extra_t ex;

  memset(g, 0, sizeof g);
  memset(raw, 0, sizeof raw);
  memset(graw, 0, sizeof graw);
  memset(&v, 0, sizeof v);
  memset(&naive_v, 0, sizeof naive_v);
  memset(&snaive_v, 0, sizeof snaive_v);
  memset(&naive_res, 0, sizeof naive_res);
  memset(&snaive_res, 0, sizeof snaive_res);
  memset(&oracle, 0, sizeof oracle);
  if ((av = join_rule_words(&argc, argv, joined, sizeof joined)) == NULL) {
    cli_error(cmd, "out of memory");
    return 2;
  }
  rc = cli_args_parse(&a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, av);
  if (rc >= 0) {
    free(av);
    return rc;
  }
  inputs_src = cli_get(&a, "inputs");
  grads_src = cli_get(&a, "grads");
  out_file = cli_get(&a, "out");
  save_oracle = cli_get(&a, "save-oracle");
  if (inputs_src == NULL || grads_src == NULL) {
    cli_error(cmd, "give --inputs PATH and --grads PATH (see attnacc score --help)");
    goto out;
  }
  if ((s = cli_get(&a, "window")) && cli_size(&window, cmd, "window", s, 0, SIZE_MAX)) goto out;
  if ((s = cli_get(&a, "scale")) && cli_double(&scale, cmd, "scale", s, 0, 1e300, 1)) goto out;
  if ((s = cli_get(&a, "threads")) && cli_size(&threads, cmd, "threads", s, 0, 4096)) goto out;
  if ((s = cli_get(&a, "layout")) && aa_layout_from_name(&layout, s) != AA_OK) {
    cli_error(cmd, "--layout: '%s' is not bhnd, bnhd, hnd, nd, nhd or auto", s);
    goto out;
  }
  if ((s = cli_get(&a, "ulp-fmt")) != NULL) {
    aa_fmt_t f;
    if (aa_fmt_from_name(&f, s) != AA_OK || (f != AA_FMT_BF16 && f != AA_FMT_FP16 && f != AA_FMT_FP32)) {
      cli_error(cmd, "--ulp-fmt: '%s' is not bf16, fp16 or fp32", s);
      goto out;
    }
    ulp_fmt = (int)f;
  }
  if (cli_get(&a, "cu-seqlens") != NULL) {
    size_t tq = 0, tk = 0;
    if (layout == AA_LAYOUT_AUTO) layout = AA_LAYOUT_NHD;
    if (layout != AA_LAYOUT_NHD) {
      cli_error(cmd, "--cu-seqlens needs the packed layout nhd ([total, H, d]), not --layout %s",
                aa_layout_name(layout));
      goto out;
    }
    if (features_cli_lengths(&fc, cmd, &a, &tq, &tk)) goto out;
  }
  if ((s = cli_get(&a, "rule")) && cli_rules_parse(rules, &nrules, &atol, &rtol, cmd, s)) goto out;
  if (cli_get(&a, "bf16-bits") != NULL) flags |= AA_NPY_BF16_BITS;
  if (cli_oracle_opts(&oo, &a, cmd)) goto out;
  oo.threads = (int)threads;
  if ((out_file && (rc = cli_check_out_file(out_file, &err))) ||
      (save_oracle && (rc = cli_check_out_dir(save_oracle, &err))) ||
      (rc = src_kind(&ik, inputs_src, "inputs", &err)) || (rc = src_kind(&gk, grads_src, "grads", &err))) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }

  /* ---- inputs: read, resolve the layout, fold into [B*H, N, d] ---- */
  for (int i = 0; i < 5; i++)
    if ((rc =
             load_arr(&raw[i], label[i], sizeof label[i], inputs_src, ik, iname[i], i == 4, flags, &present, &err))) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
  if (layout != AA_LAYOUT_ND && layout != AA_LAYOUT_NHD && any_3d(raw, 4))
    for (int i = 0; i < 4; i++)
      promote_2d(&raw[i]);
  {
    char sa[96], sb2[96];
    const aa_ndarray_t *q = &raw[0], *k = &raw[1];
    if (q->ndim != k->ndim) {
      nd_str(sa, sizeof sa, q);
      nd_str(sb2, sizeof sb2, k);
      cli_error(cmd, "%s: shape %s has %d axes but %s's %s has %d", label[1], sb2, k->ndim, label[0], sa, q->ndim);
      goto out;
    }
    if ((rc = aa_layout_resolve(&layout, layout, q->ndim, q->shape, k->shape, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
    for (int i = 2; i < 4; i++)
      if (!same_nd(&raw[i], &raw[i == 2 ? 1 : 0])) {
        nd_str(sa, sizeof sa, &raw[i]);
        nd_str(sb2, sizeof sb2, &raw[i == 2 ? 1 : 0]);
        cli_error(cmd, "%s: shape %s does not match %s's %s", label[i], sa, label[i == 2 ? 1 : 0], sb2);
        goto out;
      }
    aa_layout_dims(&qd, layout, q->ndim, q->shape);
    aa_layout_dims(&kd, layout, k->ndim, k->shape);
  }
  {
    aa_tensor_t *dst[4] = {&in.q, &in.k, &in.v, &in.dO};
    for (int i = 0; i < 4; i++) {
      if ((rc = aa_layout_import(dst[i], raw[i].data, raw[i].fmt, layout, raw[i].ndim, raw[i].shape, &err))) {
        cli_error(cmd, "%s: %s", label[i], err.msg);
        goto out;
      }
      /* the widest input format: the naive reference's (bf16 < fp16 < fp32 < fp64 by range of values held) */
      if (raw[i].fmt == AA_FMT_FP64 || (raw[i].fmt == AA_FMT_FP32 && in_fmt != AA_FMT_FP64) ||
          (raw[i].fmt == AA_FMT_FP16 && in_fmt == AA_FMT_BF16))
        in_fmt = raw[i].fmt;
    }
  }
  if (raw[4].data != NULL) { /* sinks [H, K] or [K] */
    size_t shp[2] = {raw[4].ndim == 1 ? 1 : raw[4].shape[0], raw[4].shape[raw[4].ndim - 1]};
    char sa[96];
    nd_str(sa, sizeof sa, &raw[4]);
    if (raw[4].ndim > 2 || shp[0] != qd.h || qd.b != 1) {
      cli_error(cmd, "%s: shape %s is not [H, K] with H = %zu query heads%s", label[4], sa, qd.h,
                qd.b != 1 ? " (sinks need batch 1)" : "");
      goto out;
    }
    if (aa_tensor_alloc(&in.sinks, 2, shp, raw[4].fmt) != AA_OK) {
      cli_error(cmd, "out of memory");
      goto out;
    }
    memcpy(in.sinks.data, raw[4].data, shp[0] * shp[1] * sizeof(double));
  }
  aa_problem_init(&pb, qd.n, kd.n, qd.d, qd.b * qd.h, kd.b * kd.h);
  pb.causal = cli_get(&a, "causal") != NULL;
  pb.window = window;
  if (cli_get(&a, "scale") != NULL) {
    pb.scale_default = 0;
    pb.scale = scale;
  }
  if (in.sinks.data != NULL) {
    pb.num_sinks = in.sinks.shape[1];
    pb.sinks = in.sinks.data;
  }
  pb.varlen_batch = fc.batch; /* aa_problem_check matches the offsets with the packed lengths */
  pb.cu_seqlens_q = fc.cu_q;
  pb.cu_seqlens_k = fc.cu_k;
  if ((rc = aa_problem_check(&pb, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  if (cli_get(&a, "allow-nan") == NULL && (rc = cli_inputs_check_finite(&in, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  if (nrules == 0) { /* the default rule: fa where a naive reference exists, else torch */
    rules[0] = in_fmt == AA_FMT_FP64 ? AA_RULE_TORCH : AA_RULE_FA;
    nrules = 1;
  }
  for (int r = 0; r < nrules; r++)
    if ((rules[r] == AA_RULE_FA || rules[r] == AA_RULE_SDPA) && in_fmt == AA_FMT_FP64) {
      cli_error(cmd,
                "--rule %s needs a naive reference in the inputs' dtype, which exists for bf16, fp16 and fp32 "
                "inputs; these are fp64 (use --rule torch or abs-rel)",
                aa_rule_name(rules[r]));
      goto out;
    }

  /* ---- the kernel's outputs, in the same layout ---- */
  for (int i = 0; i < 5; i++) {
    const aa_ndarray_t *like = &raw[i == 0 || i == 1 ? 0 : i == 4 ? 4 : 1];
    const char *like_label = label[i == 0 || i == 1 ? 0 : i == 4 ? 4 : 1];
    char sa[96], sb2[96];
    if (i == 4 && in.sinks.data == NULL) continue;
    if ((rc = load_arr(&graw[i], glabel[i], sizeof glabel[i], grads_src, gk, gname[i], i == 0 || i == 4, flags,
                       &present, &err))) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
    if (!present) continue;
    if (i < 4 && like->ndim == 3) promote_2d(&graw[i]);
    if (!same_nd(&graw[i], like)) {
      nd_str(sa, sizeof sa, &graw[i]);
      nd_str(sb2, sizeof sb2, like);
      cli_error(cmd, "%s: shape %s does not match %s's %s", glabel[i], sa, like_label, sb2);
      goto out;
    }
    if (i == 4) {
      size_t shp[2] = {in.sinks.shape[0], in.sinks.shape[1]};
      if (aa_tensor_alloc(&g[4], 2, shp, graw[4].fmt) != AA_OK) {
        cli_error(cmd, "out of memory");
        goto out;
      }
      memcpy(g[4].data, graw[4].data, shp[0] * shp[1] * sizeof(double));
    } else if ((rc = aa_layout_import(&g[i], graw[i].data, graw[i].fmt, layout, graw[i].ndim, graw[i].shape, &err))) {
      cli_error(cmd, "%s: %s", glabel[i], err.msg);
      goto out;
    }
  }
  cli_set_threads(threads);

  cli_progress(cmd, "running the oracle", (double)pb.heads * (double)pb.n_q * (double)pb.n_k * (double)pb.d);
  rc = cli_oracle_run(&oracle, &oracle_seconds, cmd, &pb, &in, &oo);
  cli_progress_end();
  if (rc != 0) goto out;
  have_oracle = 1;

  if ((rc = cli_evaluate_given(&v, g, &oracle, ulp_fmt, atol, rtol, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  if (cli_get(&a, "fa") != NULL) {
    const aa_tensor_t *ts[5] = {&in.q, &in.k, &in.v, &in.dO, &in.sinks};
    aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
    for (int i = 0; i < 5; i++) {
      size_t m = aa_tensor_numel(ts[i]);
      for (size_t j = 0; j < m; j++)
        if (aa_round(ts[i]->data[j], &ro, NULL) != ts[i]->data[j] && ts[i]->data[j] == ts[i]->data[j]) {
          cli_error(cmd, "--fa needs bf16 inputs, but %s holds values that are not bf16", label[i]);
          goto out;
        }
    }
  }
  /* The naive reference in the inputs' own dtype (fa and sdpa rules); with
     --fa and bf16 inputs it is also the legacy fa_* fields' naive-bf16. */
  if (in_fmt != AA_FMT_FP64) {
    aa_tensor_t *ts[5] = {&in.q, &in.k, &in.v, &in.dO, &in.sinks};
    if ((rc = aa_score_naive_recipe(&snaive_r, in_fmt, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
    for (int i = 0; i < 5; i++)
      if (ts[i]->data != NULL) ts[i]->fmt = in_fmt;
    cli_progress(cmd, "running the naive reference",
                 (double)pb.heads * (double)pb.n_q * (double)pb.n_k * (double)pb.d / 4);
    rc = cli_run_variant(&snaive_v, &snaive_res, &snaive_r, &pb, &in, &oracle, &err);
    cli_progress_end();
    if (rc != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
    have_snaive = 1;
    if ((rc = cli_apply_naive(&v, &snaive_v, &snaive_res, &oracle, ulp_fmt, atol, rtol, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
  }
  if (cli_get(&a, "fa") != NULL) {
    aa_tensor_t *ts[5] = {&in.q, &in.k, &in.v, &in.dO, &in.sinks};
    aa_score_out_t keep[CLI_MAX_OUT];
    for (int i = 0; i < 5; i++)
      ts[i]->fmt = AA_FMT_BF16;
    if ((rc = aa_recipe_preset(&naive_r, "naive-bf16", &err)) != AA_OK) {
      cli_error(cmd, "--fa: %s", err.msg);
      goto out;
    }
    have_naive = 1;
    if ((rc = cli_run_variant(&naive_v, &naive_res, &naive_r, &pb, &in, &oracle, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
    for (int i = 0; i < v.nout; i++)
      keep[i] = v.out[i].s; /* the fa/sdpa rules stay those of the inputs' own dtype */
    cli_apply_fa(&v, &naive_v);
    for (int i = 0; i < v.nout; i++)
      v.out[i].s = keep[i];
  }

  ex = (cli_report_extra_t){layout, qd, kd, rules, nrules, have_snaive ? snaive_r.name : NULL};
  cli_set_report_extra(&ex);
  rep = (cli_report_t){cmd, 0, 0, NULL, 0, inputs_src, &pb, &oo, &oracle, oracle_seconds};
  if (cli_get(&a, "json") != NULL || out_file != NULL) {
    json_t *doc = cli_json_doc(&rep, &v, 1);
    jtext = cli_json_text(doc, 0, &jlen);
    json_decref(doc);
    if (jtext == NULL) {
      cli_error(cmd, "out of memory");
      goto out;
    }
  }
  if (out_file != NULL && (rc = aa_file_write(out_file, jtext, jlen, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  if (save_oracle != NULL && (rc = cli_save_oracle(&oracle, save_oracle, &err)) != AA_OK) {
    cli_error(cmd, "--save-oracle: %s", err.msg);
    goto out;
  }
  if (cli_get(&a, "json") != NULL) {
    fwrite(jtext, 1, jlen, stdout);
  } else {
    cli_print_table(stdout, &rep, &v, 1);
    printf("layout: %s %s, B=%zu H=%zu H_kv=%zu, inputs %s\n", aa_layout_name(layout), aa_layout_axes(layout), qd.b,
           qd.h, kd.h, cli_fmt_name(in_fmt));
    if (fc.batch > 0) printf("varlen batch: %zu sequences, %zu queries, %zu keys\n", fc.batch, qd.n, kd.n);
    cli_print_rules(stdout, &rep, &v, 1);
  }
  if (fflush(stdout) != 0) goto out;
  if (cli_verdict(&v, rules, nrules)) {
    status = 0;
  } else {
    char line[1024];
    cli_first_failure(line, sizeof line, &rep, &v);
    fprintf(stderr, "attnacc score: FAIL: %s%s\n", line, cli_get(&a, "no-fail") ? " (--no-fail: exit 0)" : "");
    if (cli_get(&a, "layout") == NULL && layout == AA_LAYOUT_HND)
      fprintf(stderr, "attnacc score: the arrays were read as hnd [H, N, d] (3 axes); if they are flash-attn's "
                      "[N, H, d], give --layout nhd\n");
    status = cli_get(&a, "no-fail") ? 0 : 1;
  }

out:
  features_cli_free(&fc);
  free(av);
  free(jtext);
  for (int i = 0; i < 5; i++) {
    aa_tensor_free(&g[i]);
    aa_ndarray_free(&raw[i]);
    aa_ndarray_free(&graw[i]);
  }
  if (have_naive) aa_attn_result_free(&naive_res);
  if (have_snaive) aa_attn_result_free(&snaive_res);
  cli_variant_free(&naive_v);
  cli_variant_free(&snaive_v);
  cli_variant_free(&v);
  if (have_oracle) aa_oracle_result_free(&oracle);
  cli_inputs_free(&in);
  return status;
}
