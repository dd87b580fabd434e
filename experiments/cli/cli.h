/* attnacc: helpers shared by the subcommands (options, numbers, JSON text, atomic files, inputs, metric reports). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_CLI_H
#define AA_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attnacc.h"
#include "common/json.h"

/* ---- messages ---- */
void cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Exit status for a library status: 1 for out-of-memory and I/O failures
   while computing or writing, 2 for everything caused by the input. */
int cli_exit_status(int status);
/* The exit status of the process once stdout is flushed and closed, for
   main to return: status, or 1 (when status is 0) after a message
   "attnacc CMD: standard output: ..." when any write to stdout failed (a
   full disk, /dev/full), so that a lost report never exits 0. */
int cli_close_stdout(const char *cmd, int status);

/* ---- options ---- */
typedef struct {
  const char *name;    /* without the leading "--" */
  const char *metavar; /* NULL for a flag */
  const char *def;     /* default shown in --help (NULL: none) */
  const char *help;
} cli_opt_t;

#define CLI_MAX_OPTS 48
typedef struct {
  const cli_opt_t *opts;
  size_t n;
  const char *val[CLI_MAX_OPTS]; /* NULL when absent; "1" for a given flag */
} cli_args_t;

/* Parse "--name value", "--name=value" and flags. Returns -1 to continue,
   otherwise the exit status (0 after printing --help, 2 after an error). */
int cli_args_parse(cli_args_t *a, const char *cmd, const char *usage, const char *desc, const cli_opt_t *opts,
                   size_t n, int argc, char **argv);
const char *cli_get(const cli_args_t *a, const char *name);

/* Numbers: the whole text must be a number in range; on error a message
   "attnacc CMD: --OPT: ..." is printed and 2 returned. */
int cli_size(size_t *out, const char *cmd, const char *opt, const char *s, size_t min, size_t max);
int cli_u64(uint64_t *out, const char *cmd, const char *opt, const char *s);
int cli_double(double *out, const char *cmd, const char *opt, const char *s, double min, double max, int min_open);

/* --oracle-target: "2^-E" (E an integer) or a decimal number, within the
   oracle's [2^-96, 2^-8]; 2 after a message on error. */
int cli_oracle_target(double *out, const char *cmd, const char *s);
#define CLI_OPT_ORACLE_TARGET                                                                                        \
  {                                                                                                                  \
    "oracle-target", "2^-E|X", "2^-48",                                                                              \
        "certified relative accuracy of every oracle element (2^-96..2^-8); looser skips MPFR recomputes"            \
  }

/* The limits of the up-front resource estimate (lim_check, cli/limits.h). */
#define CLI_OPTS_LIMITS                                                                                              \
  {"max-memory", "BYTES[K|M|G|T]", "3/4 of physical memory, at most MemAvailable",                                   \
   "refuse a problem whose memory estimate exceeds BYTES (K, M, G, T: powers of 1024)"},                             \
  {                                                                                                                  \
    "max-seconds", "S", "3600",                                                                                      \
        "refuse a problem whose time estimate (fast oracle and emulation on the threads) exceeds S seconds"          \
  }

/* Option rows of the commands that run the oracle on one problem, and
   their parser: oo initialised, then --oracle, --prec (64..4096, the
   oracle's range) and --oracle-target applied, --force remembered for
   cli_oracle_run; 0, or 2 after a message. --max-memory, --max-seconds
   (and --force) are read by lim_check (cli/limits.h). */
#define CLI_OPTS_ORACLE                                                                                              \
  {"oracle", "mpfr|fast", "fast", "oracle path"},                                                                    \
      {"prec", "BITS", "128", "oracle MPFR precision in bits (64 to 4096)"}, CLI_OPT_ORACLE_TARGET,                  \
      {"device", "auto|cpu|cuda", "auto", "where the fast oracle runs (cuda: a GPU, build with --with-cuda)"},       \
      {"cache", "DIR", NULL,                                                                                         \
       "oracle cache (the sweeps' format, lib/sweep.h): the result for the same inputs and oracle settings is "      \
       "read from DIR instead of computed, else computed and stored"},                                               \
      {"force", NULL, NULL,                                                                                          \
       "run even when a time estimate exceeds its limit (mpfr oracle: one hour; --max-seconds)"},                    \
      CLI_OPTS_LIMITS
int cli_oracle_opts(aa_oracle_opts_t *oo, const cli_args_t *a, const char *cmd);
/* --device auto|cpu|cuda into *dev (without the option, *dev as it is), and so the emulation's of cli_run_variant:
   0, or 2 after a message (a bad name; cuda without a GPU or without CUDA in this build). */
int cli_device_opt(aa_oracle_device_t *dev, const cli_args_t *a, const char *cmd);
/* --cache DIR of the last cli_oracle_opts (NULL: none), for the naive reference's entries beside the oracle's. */
const char *cli_oracle_cache(void);

/* ---- the problem options, declared once ----
   Rows for the commands that draw one attention problem (run, explain,
   determinism, ...): its shape, the seeded draw, the mask and scale. A
   command takes the groups it has; cli_problem_opts_parse reads whichever
   of them its table holds. */
#define CLI_OPTS_PROBLEM_SHAPE                                                                                       \
  {"n", "N", "1024", "sequence length (queries and keys)"}, {"d", "D", "128", "head dimension"},                     \
      {"heads", "H", "1", "query heads"}, {                                                                          \
    "kv-heads", "HKV", "= heads", "key/value heads (GQA); must divide heads"                                         \
  }
#define CLI_OPTS_PROBLEM_DRAW                                                                                        \
  {"seed", "S", "1", "seed of the input draw (0 to 2^64-1; every command draws the same inputs for one seed)"},      \
      {"dist", "normal|uniform|outlier|constant|near-constant|huge-keys|massive", "normal",                          \
       "input distribution: sigma*N(0,1), sigma*U[0,1), sigma*(N(0,1) + N(0,100) Bernoulli(0.001)), every value "    \
       "sigma (ties), sigma*(1 + N(0,1)/256), 1/64 of the keys x64, or head 0 of q and k with +32 sigma on channel " \
       "0 (lib/layout.h)"},                                                                                          \
  {                                                                                                                  \
    "sigma", "X", "1", "scale of the input distribution (> 0)"                                                       \
  }
#define CLI_OPT_CAUSAL                                                                                               \
  { "causal", NULL, NULL, "causal mask (query i sees keys 0..i)" }
#define CLI_OPT_SCALE                                                                                                \
  { "scale", "S", "1/sqrt(d)", "softmax scale (> 0)" }
typedef struct {
  size_t n, d, heads, kv_heads; /* kv_heads 0: as many as heads */
  uint64_t seed;
  int dist; /* --dist as an AA_DIST_* of lib/layout.h */
  double sigma;
  double scale; /* 0: 1/sqrt(d) */
  int causal;
} cli_problem_opts_t;
const char *cli_dist_name(int dist);               /* aa_layout_dist_name */
void cli_problem_opts_init(cli_problem_opts_t *p); /* the defaults shown in the rows above */
/* Read the problem options that are given (n, d, heads, kv-heads at most
   max_n, max_dim, max_dim); 0, or 2 after a message "attnacc CMD: --OPT: ...". */
int cli_problem_opts_parse(cli_problem_opts_t *p, const cli_args_t *a, const char *cmd, size_t max_n, size_t max_dim);

/* ---- a growing string ---- */
/* lib/common's buffer under the name the commands used before it existed
   (new code says aa_buf_t). */
typedef aa_buf_t cli_sb_t;
#define cli_sb_printf aa_buf_printf
#define cli_sb_free aa_buf_free

/* ---- files ---- */
/* Output files go through lib/common: aa_file_write, aa_fileset_t, aa_mkdir_p. */
/* Check early that a file can later be created at path (its folder exists
   and is writable), so that a long computation does not end in an error. */
int cli_check_out_file(const char *path, aa_error_t *err);
/* Same for a folder that --save will create (mkdir -p) at the end. */
int cli_check_out_dir(const char *dir, aa_error_t *err);
double cli_now(void); /* monotonic seconds, for the "seconds" fields only */

/* ---- inputs ---- */
typedef struct {
  aa_tensor_t q, k, v, dO; /* [heads, n_q, d], [kv_heads, n_k, d] x2, [heads, n_q, d] */
  aa_tensor_t sinks;       /* [heads, num_sinks] or empty */
} cli_inputs_t;
void cli_inputs_free(cli_inputs_t *in);

/* Draw q, k, v, dO from pcg64 streams aa_rng_derive(seed, {id, head}) with
   id 0 = q, 1 = k, 2 = v, 3 = dO, element by element in row-major [n, d]
   order: sigma * N(0,1) (dist normal) or sigma * U[0,1) (dist uniform),
   formed in double, then rounded to io_fmt (RNE). Sinks (id 4) are N(0,1)
   logits, num_sinks per head, rounded likewise. */
int cli_inputs_draw(cli_inputs_t *in, uint64_t seed, int uniform, double sigma, size_t n, size_t d, size_t heads,
                    size_t kv_heads, size_t num_sinks, aa_fmt_t io_fmt, aa_error_t *err);
/* The same with n_q query rows (q, dO) and n_k key rows (k, v). */
int cli_inputs_draw_qk(cli_inputs_t *in, uint64_t seed, int uniform, double sigma, size_t n_q, size_t n_k, size_t d,
                       size_t heads, size_t kv_heads, size_t num_sinks, aa_fmt_t io_fmt, aa_error_t *err);
/* The problem features (lib/problem.h: alignment, softcap, ALiBi, windows) that are on (alignment, two-sided
   window, softcap, ALiBi) as " key=value" words appended to the problem
   line; "" when none is on (their JSON: cli_json_problem). */
void cli_problem_features(char *buf, size_t cap, const aa_problem_t *pb);
/* Read DIR/q.npy, k.npy, v.npy, do.npy ([N, d] or [H, N, d]) and the
   optional sinks.npy ([H, K], or [K] for one head), checking the shapes
   against each other with messages naming the files. */
int cli_inputs_load(cli_inputs_t *in, const char *dir, aa_error_t *err);
/* Count NaN/Inf over every input; AA_ENAN with a message naming the tensor. */
int cli_inputs_check_finite(const cli_inputs_t *in, aa_error_t *err);
/* Stage the inputs as DIR/q.npy, k.npy, v.npy, do.npy (and sinks.npy) in
   format fmt into the file set stg (aa_fileset_mkdir_p creates dir): they
   appear with the set's other files on aa_fileset_commit, or not at all. */
int cli_stage_inputs(aa_fileset_t *stg, const cli_inputs_t *in, const char *dir, aa_fmt_t fmt, aa_error_t *err);

/* The oracle on the inputs, timed into *seconds: 0, or the exit status
   after the message "attnacc CMD: oracle: ...". The mpfr path first
   prints its time estimate (aa_oracle_mpfr_seconds over the threads) on
   stderr and refuses (2) beyond LIM_MPFR_SECONDS unless --force was given
   to cli_oracle_opts. */
int cli_oracle_run(aa_oracle_result_t *res, double *seconds, const char *cmd, const aa_problem_t *pb,
                   const cli_inputs_t *in, const aa_oracle_opts_t *oo);

/* Version of the JSON document of run and score (experiments/README-json.md). */
#define CLI_SCHEMA_VERSION 2

/* ---- one compared variant ----
   The evaluation path is the library's (lib/score.h, aa_eval_*); these are
   its types and functions under the names the commands used before it
   moved there (new code says aa_eval_*). */
#define CLI_MAX_OUT AA_EVAL_MAX_OUT
typedef aa_eval_out_t cli_out_t;
typedef aa_eval_variant_t cli_variant_t;
#define cli_compare aa_eval_compare
#define cli_oracle_bound aa_eval_oracle_bound
#define cli_verdict aa_eval_verdict
#define cli_apply_fa aa_eval_apply_fa
#define cli_variant_free aa_eval_variant_free

/* Everything a report prints besides the per-variant rows. */
typedef struct {
  const char *cmd;
  int seed_known;
  uint64_t seed;
  const char *dist; /* NULL when the inputs came from files */
  double sigma;
  const char *inputs_dir; /* NULL when drawn */
  const aa_problem_t *pb;
  const aa_oracle_opts_t *oo;
  const aa_oracle_result_t *oracle;
  double oracle_seconds;
} cli_report_t;

/* What a report knows beyond cli_report_t (kept apart so that the commands
   that do not set it are unaffected): the caller's layout (auto: [H, N, d])
   and the dims of q and k in it, for indices in messages, and the rules that
   decide the verdict (none: no verdict is reported). Set once by `score`
   before printing; the defaults are auto and no verdict. */
typedef struct {
  aa_layout_t layout;
  aa_dims_t qdims, kdims;
  const aa_rule_t *verdict_rules;
  int n_verdict;
  const char *naive;  /* the naive reference's recipe name (fa, sdpa), NULL: "the naive reference" */
  const char *expect; /* the expect rule's recipe name, NULL: not run */
  /* score --rows: row r of o, dq and lse is query row row_map[r] of the caller's arrays (NULL: every row) */
  const size_t *row_map;
} cli_report_extra_t;
void cli_set_report_extra(const cli_report_extra_t *x);
const cli_report_extra_t *cli_report_extra(void);
/* Where the report's outputs sit in the caller's arrays (its layout; lib/score.h). */
void cli_place(aa_eval_place_t *p, const cli_report_t *rep);
/* The index of folded element i of output o in the report's layout into
   idx ((b, h, n, d), (h, n, d), or (h, k) for dsinks); returns its length. */
int cli_index(size_t idx[4], const cli_report_t *rep, const cli_out_t *o, size_t i);
/* The line that explains why output o fails rule (worst element, value, oracle, error). */
void cli_failure_line(char *buf, size_t cap, const cli_report_t *rep, const cli_out_t *o, aa_rule_t rule);

/* --rule (aa_eval_rules_parse); 0, or 2 after a message "attnacc CMD: --rule: ...". */
int cli_rules_parse(aa_rule_t *rules, int *n, double *atol, double *rtol, const char *cmd, const char *s);
/* The rule ratios of every output, and one line per failure naming the
   worst element (index in the report's layout, value, oracle, error). */
void cli_print_rules(FILE *f, const cli_report_t *rep, const cli_variant_t *vs, size_t nv);
/* One line per failed (output, rule) of v into buf: the first failure only
   (for stderr). Returns 0 when none failed. */
int cli_first_failure(char *buf, size_t cap, const cli_report_t *rep, const cli_variant_t *v);
void cli_print_table(FILE *f, const cli_report_t *rep, const cli_variant_t *vs, size_t nv);
/* A progress line on stderr, only when it is a terminal and the step is
   expected to take more than about two seconds (work = heads n_q n_k d;
   the oracle does about 1.5e8 of these per second per core); the next call
   or cli_progress_end() erases it. */
void cli_progress(const char *cmd, const char *what, double work);
void cli_progress_end(void);
/* The JSON document of run and score (schema version 2, experiments/README-json.md):
   {"schema_version", "attnacc": {version, git}, "command", "seed", "inputs",
   "problem", ["layout",] "oracle", "runs": [one object per variant]}, the
   same shape for one variant or many; NULL when out of memory. Its parts,
   for documents that hold several problems (a varlen batch): */
json_t *cli_json_doc(const cli_report_t *rep, const cli_variant_t *vs, size_t nv);
json_t *cli_json_problem(const cli_report_t *rep);
json_t *cli_json_oracle(const cli_report_t *rep);
json_t *cli_json_runs(const cli_report_t *rep, const cli_variant_t *vs, size_t nv);
json_t *cli_json_run(const cli_report_t *rep, const cli_variant_t *v);

/* aa_eval_run with the default scoring, the emulation (aa_eval_attn)
   timed into v->seconds: the evaluation of every command and experiment. */
int cli_run_variant(cli_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                    const cli_inputs_t *in, const aa_oracle_result_t *oracle, aa_error_t *err);
/* The run command's body (experiments/cmd/run.c) under the name cmd. given:
   the recipes to run instead of --variant/--recipe (NULL: those options).
   hook: called with the report and the compared variants in place of the
   naive reference, the table and every output file (NULL: run's report);
   its return value is the exit status. argv is parsed with run's options. */
typedef int (*cli_run_hook_t)(void *ctx, const cli_report_t *rep, const aa_recipe_t *recipes, const cli_variant_t *vs,
                              size_t n);
/* Parse argv with run's option table (its messages name cmd): -1 to go
   on, else the exit status, as cli_args_parse. For front ends that add to
   run (explain) and read its problem options without a parser of their own. */
int cli_run_args(cli_args_t *a, const char *cmd, int argc, char **argv);
int cli_run_main(const char *cmd, const aa_recipe_t *given, size_t ngiven, cli_run_hook_t hook, void *hctx, int argc,
                 char **argv);
/* Stage o, lse, dq, dk, dv (and dsinks) of res into dir, each in its own format (cli_npy_fmt). */
int cli_stage_outputs(aa_fileset_t *stg, const aa_attn_result_t *res, const char *dir, aa_error_t *err);
/* The format a tensor of format f is written in (.npy has no fp8 dtype: fp32). */
aa_fmt_t cli_npy_fmt(aa_fmt_t f);
const char *cli_fmt_name(aa_fmt_t f);
void cli_shape_str(char *buf, size_t cap, const aa_tensor_t *t);
/* [N, d] becomes [1, N, d]; 1-D is refused with a message naming file. */
int cli_as_3d(aa_tensor_t *t, const char *file, aa_error_t *err);
/* Thread count for OpenMP regions of the emulation (0 = leave the default). */
void cli_set_threads(size_t threads);

/* Stage the oracle's values (FP64, '<f8') of o, lse, dq, dk, dv (and dsinks) into dir. */
int cli_stage_oracle(aa_fileset_t *stg, const aa_oracle_result_t *r, const char *dir, aa_error_t *err);

#endif
