/* attnacc: the `score` command: compare gradients stored as .npy files (from any kernel) with the oracle. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

static const cli_opt_t opts[] = {
    {"inputs", "DIR", NULL, "folder with q.npy k.npy v.npy do.npy [sinks.npy] (required)"},
    {"grads", "DIR", NULL, "folder with dq.npy dk.npy dv.npy [o.npy] [dsinks.npy] (required)"},
    {"causal", NULL, NULL, "causal mask (query i sees keys 0..i)"},
    {"window", "W", "0 = none", "sliding window of W keys (needs --causal)"},
    {"scale", "S", "1/sqrt(d)", "softmax scale (> 0)"},
    CLI_OPTS_ORACLE,
    {"fa", NULL, NULL, "also run naive-bf16 on the inputs and apply the flash-attention rule"},
    {"allow-nan", NULL, NULL, "accept NaN/Inf in the inputs (refused otherwise)"},
    {"json", NULL, NULL, "print one JSON object instead of the table"},
    {"out", "FILE", NULL, "also write the JSON object to FILE (atomically)"},
    {"save-oracle", "DIR", NULL, "write the oracle's o/lse/dq/dk/dv (FP64, '<f8') into DIR"},
    {"threads", "T", "0 = all", "threads for the oracle (results do not depend on it)"},
};

static const char usage_line[] = "--inputs DIR --grads DIR [OPTIONS]";
static const char description[] =
    "Read the inputs from --inputs (any dtype: '<u2' BF16 bit patterns, '<f2', '<f4',\n"
    "'<f8'; values are taken exactly) and the gradients dq.npy, dk.npy, dv.npy and the\n"
    "optional o.npy (and dsinks.npy when sinks.npy is present) from --grads, in any of\n"
    "those dtypes; other files are ignored. Run the oracle and print the same metrics\n"
    "and JSON as `attnacc run`, with variant \"external\". ULP distances are taken in the\n"
    "file's own format when it is bf16 ('<u2') or fp32 ('<f4'), else in fp32. The\n"
    "flash-attention rule needs --fa (which needs bf16-representable inputs).\n"
    "Exit status: 0 done, 2 bad usage or input, 1 failure while computing or writing.";

static int load_grad(aa_tensor_t *t, const char *dir, const char *file, const aa_tensor_t *like,
                     const char *like_file, int optional, int *present, aa_error_t *err) {
  size_t len = strlen(dir) + strlen(file) + 2;
  char *p = malloc(len), a[96], b[96];
  int rc;
  *present = 0;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  snprintf(p, len, "%s/%s", dir, file);
  if (optional && access(p, F_OK) != 0) {
    free(p);
    return AA_OK;
  }
  rc = aa_npy_read(t, p, err);
  free(p);
  if (rc != AA_OK) return rc;
  if (like->ndim == 2) { /* dsinks [H, K] */
    if (t->ndim != 2 || t->shape[0] != like->shape[0] || t->shape[1] != like->shape[1]) rc = AA_ESHAPE;
  } else if ((rc = cli_as_3d(t, file, err)) != AA_OK) {
    return rc;
  } else if (memcmp(t->shape, like->shape, sizeof t->shape) != 0) {
    rc = AA_ESHAPE;
  }
  if (rc != AA_OK) {
    cli_shape_str(a, sizeof a, t);
    cli_shape_str(b, sizeof b, like);
    return aa_error_set(err, AA_ESHAPE, "%s: shape %s does not match %s's %s", file, a, like_file, b);
  }
  *present = 1;
  return AA_OK;
}

int aa_cmd_score(int argc, char **argv) {
  const char *cmd = "score";
  cli_args_t a;
  aa_error_t err = {{0}};
  const char *s, *inputs_dir, *grads_dir, *out_file, *save_oracle;
  size_t window = 0, threads = 0;
  double scale = 0, oracle_seconds;
  int rc, status = 2, present, have_oracle = 0, have_naive = 0;
  cli_inputs_t in = {0};
  aa_tensor_t g[5];
  const char *gname[5] = {"o", "dq", "dk", "dv", "dsinks"};
  aa_problem_t pb;
  aa_oracle_opts_t oo;
  aa_oracle_result_t oracle;
  cli_variant_t v, naive_v;
  aa_attn_result_t naive_res;
  aa_recipe_t naive_r;
  cli_sb_t sb = {0};
  cli_report_t rep;

  memset(g, 0, sizeof g);
  memset(&v, 0, sizeof v);
  memset(&naive_v, 0, sizeof naive_v);
  memset(&naive_res, 0, sizeof naive_res);
  memset(&oracle, 0, sizeof oracle);
  if ((rc = cli_args_parse(&a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, argv)) >= 0)
    return rc;
  inputs_dir = cli_get(&a, "inputs");
  grads_dir = cli_get(&a, "grads");
  out_file = cli_get(&a, "out");
  save_oracle = cli_get(&a, "save-oracle");
  if (inputs_dir == NULL || grads_dir == NULL) {
    cli_error(cmd, "give --inputs DIR and --grads DIR (see attnacc score --help)");
    return 2;
  }
  if ((s = cli_get(&a, "window")) && cli_size(&window, cmd, "window", s, 0, SIZE_MAX)) return 2;
  if ((s = cli_get(&a, "scale")) && cli_double(&scale, cmd, "scale", s, 0, 1e300, 1)) return 2;
  if ((s = cli_get(&a, "threads")) && cli_size(&threads, cmd, "threads", s, 0, 4096)) return 2;
  if (cli_oracle_opts(&oo, &a, cmd)) return 2;
  oo.threads = (int)threads;
  if ((out_file && (rc = cli_check_out_file(out_file, &err))) ||
      (save_oracle && (rc = cli_check_out_dir(save_oracle, &err)))) {
    cli_error(cmd, "%s", err.msg);
    return 2;
  }

  if ((rc = cli_inputs_load(&in, inputs_dir, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  aa_problem_init(&pb, in.q.shape[1], in.k.shape[1], in.q.shape[2], in.q.shape[0], in.k.shape[0]);
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
  if ((rc = aa_problem_check(&pb, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  if (cli_get(&a, "allow-nan") == NULL && (rc = cli_inputs_check_finite(&in, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    goto out;
  }
  {
    const aa_tensor_t *like[5] = {&in.q, &in.q, &in.k, &in.k, &in.sinks};
    const char *like_file[5] = {"q.npy", "q.npy", "k.npy", "k.npy", "sinks.npy"};
    const char *file[5] = {"o.npy", "dq.npy", "dk.npy", "dv.npy", "dsinks.npy"};
    for (int i = 0; i < 5; i++) {
      if (i == 4 && in.sinks.data == NULL) continue;
      if ((rc = load_grad(&g[i], grads_dir, file[i], like[i], like_file[i], i == 0 || i == 4, &present, &err))) {
        cli_error(cmd, "%s", err.msg);
        goto out;
      }
    }
  }
  cli_set_threads(threads);

  if ((rc = cli_oracle_run(&oracle, &oracle_seconds, cmd, &pb, &in, &oo)) != 0) {
    status = rc;
    goto out;
  }
  have_oracle = 1;

  snprintf(v.variant, sizeof v.variant, "external");
  {
    const aa_oracle_out_t *ref[5] = {&oracle.o, &oracle.dq, &oracle.dk, &oracle.dv, &oracle.dsinks};
    for (int i = 0; i < 5; i++) {
      if (g[i].data == NULL) continue;
      if ((rc = cli_compare(&v.out[v.nout++], gname[i], &g[i], ref[i], &err)) != AA_OK) {
        cli_error(cmd, "%s", err.msg);
        status = cli_exit_status(rc);
        goto out;
      }
    }
  }
  if (cli_get(&a, "fa") != NULL) {
    const aa_tensor_t *ts[5] = {&in.q, &in.k, &in.v, &in.dO, &in.sinks};
    aa_round_opts_t ro = {AA_FMT_BF16, AA_RND_NE, 1, 0};
    for (int i = 0; i < 5; i++) {
      size_t m = aa_tensor_numel(ts[i]);
      for (size_t j = 0; j < m; j++)
        if (aa_round(ts[i]->data[j], &ro, NULL) != ts[i]->data[j] && ts[i]->data[j] == ts[i]->data[j]) {
          cli_error(cmd, "--fa needs bf16 inputs, but %s holds values that are not bf16",
                    (const char *[]){"q.npy", "k.npy", "v.npy", "do.npy", "sinks.npy"}[i]);
          goto out;
        }
      ((aa_tensor_t *)ts[i])->fmt = AA_FMT_BF16;
    }
    if ((rc = aa_recipe_preset(&naive_r, "naive-bf16", &err)) != AA_OK) {
      cli_error(cmd, "--fa: %s", err.msg);
      status = 1;
      goto out;
    }
    have_naive = 1;
    if ((rc = cli_run_variant(&naive_v, &naive_res, &naive_r, &pb, &in, &oracle, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      status = cli_exit_status(rc);
      goto out;
    }
    cli_apply_fa(&v, &naive_v);
  }

  rep = (cli_report_t){cmd, 0, 0, NULL, 0, inputs_dir, &pb, &oo, &oracle, oracle_seconds};
  if (cli_get(&a, "json") != NULL || out_file != NULL) {
    cli_json(&sb, &rep, &v, 1);
    if (sb.oom) {
      cli_error(cmd, "out of memory");
      status = 1;
      goto out;
    }
  }
  if (out_file != NULL && (rc = cli_write_atomic(out_file, sb.buf, sb.len, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    status = 1;
    goto out;
  }
  if (save_oracle != NULL && (rc = cli_save_oracle(&oracle, save_oracle, &err)) != AA_OK) {
    cli_error(cmd, "--save-oracle: %s", err.msg);
    status = 1;
    goto out;
  }
  if (cli_get(&a, "json") != NULL)
    fwrite(sb.buf, 1, sb.len, stdout);
  else
    cli_print_table(stdout, &rep, &v, 1);
  status = fflush(stdout) == 0 ? 0 : 1;

out:
  cli_sb_free(&sb);
  for (int i = 0; i < 5; i++)
    aa_tensor_free(&g[i]);
  if (have_naive) aa_attn_result_free(&naive_res);
  cli_variant_free(&naive_v);
  cli_variant_free(&v);
  if (have_oracle) aa_oracle_result_free(&oracle);
  cli_inputs_free(&in);
  return status;
}
