/* attnacc: the experiment registry of `attnacc sweep`, its option helpers and the shared cell evaluation. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_EXPERIMENTS_H
#define AA_EXPERIMENTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "attnacc.h"
#include "cli/cli.h"
#include "sweep.h"

/* Settings of one sweep, filled by the driver (sweep.c) before the
   experiment declares its grid. The experiment reads its own options from
   args (cli_get, or the xp_opt_* helpers below). */
typedef struct {
  const char *cmd;        /* for messages: "sweep", or the shortcut's name ("normmap") */
  const cli_args_t *args; /* the common options and the experiment's own */
  const char *out_dir;    /* the result folder (finish reads its results.csv) */
  int quick;              /* --quick, for experiments that have it */
} xp_opts_t;

/* What the cell evaluation needs besides the cell's coordinates: the
   recipes by name, the oracle cache and the inner thread count. Shared by
   every worker thread; the lock serialises the oracle of one fixture so two
   threads never compute the same oracle at once. */
#define XP_MAX_RECIPES 48
typedef struct {
  aa_recipe_t recipe[XP_MAX_RECIPES];
  char recipe_hash[XP_MAX_RECIPES][17]; /* low 64 bits of FNV-1a 128 of aa_recipe_format text, hex */
  size_t nrecipes;                      /* listed in meta.json (text and hash) */
  const char *cache_dir;                /* NULL: no oracle cache */
  int inner_threads;                    /* OpenMP threads inside one cell (0 = default) */
  aa_oracle_path_t oracle_path;
  aa_oracle_device_t oracle_device; /* --device (the emulation's is cli_device_opt's) */
  double oracle_target;             /* --oracle-target (an experiment may change the default in declare) */
  /* defaults of the coordinates an experiment may leave out of its grid */
  size_t d, heads;
  double sigma;
  int uniform;
  /* fixtures whose oracle is being computed right now */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  aa_hash128_t busy[64];
  size_t nbusy;
  unsigned delay_ms;       /* test hook (ATTNACC_SWEEP_CELL_DELAY_MS): sleep after each cell */
  const char *naive_added; /* the name of the naive reference xp_add_naive_reference added, or NULL */
  int stdout_owned;        /* set by declare when finish prints a machine-readable text (JSON) on stdout: the
                              driver's own lines then go to stderr */
  void *priv;              /* the experiment's private state (freed by its release hook) */
  int first_cols;          /* xp_attn_eval fills the columns of xp_first_columns */
} xp_ctx_t;

typedef struct {
  const char *name;
  const char *summary;     /* one line for `attnacc list` */
  int hidden;              /* 1: not listed (test grids) */
  const char *description; /* what a cell does, its columns and its options, for --help */
  const char *inputs;      /* how the cells' inputs are drawn, for meta.json ("seeds") */
  const cli_opt_t *params; /* the experiment's own options (besides the driver's) */
  size_t nparams;
  /* Read the options, declare the axes, columns and filter, then
     aa_sweep_build. Returns a status with a message in err, or a status
     with an empty err after printing the message itself (xp_opt_*). */
  int (*declare)(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err);
  aa_sweep_eval_fn eval; /* called with the xp_ctx_t as context */
  /* Optional: run once the folder holds every cell (after the results
     files are written, on MPI rank 0 only; also after --merge when the
     experiment and its options are given): summaries and verdicts read
     from o->out_dir/results.csv. */
  int (*finish)(const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err);
  void (*release)(xp_ctx_t *ctx); /* optional: free ctx->priv (xp_free_priv for one malloc'd block) */
} xp_experiment_t;

void xp_free_priv(xp_ctx_t *ctx);

extern const xp_experiment_t *const xp_experiments[];
extern const size_t xp_experiment_count;
const xp_experiment_t *xp_find(const char *name);

/* The driver: `attnacc sweep` (experiment NULL: taken from --experiment)
   and the shortcuts (`attnacc normmap ARGS` is xp_main("normmap",
   "normmap", ...)). Returns the exit status. */
int xp_main(const char *cmd, const char *experiment, int argc, char **argv);

/* ---- option helpers for declare: each leaves *out alone when the option
   is absent, and returns 0, or 2 after printing "attnacc CMD: --NAME: ..." */
const char *xp_opt(const xp_opts_t *o, const char *name); /* the value, or NULL */
int xp_opt_size(size_t *out, const xp_opts_t *o, const char *name, size_t min, size_t max);
int xp_opt_u64(uint64_t *out, const xp_opts_t *o, const char *name);
int xp_opt_double(double *out, const xp_opts_t *o, const char *name, double min, double max, int min_open);
/* Comma-separated lists (the option's value, else dflt): at most cap
   distinct items. xp_opt_strs keeps the item texts in buf (of size bufcap). */
int xp_opt_ints(int64_t *out, size_t *n, size_t cap, const xp_opts_t *o, const char *name, const char *dflt,
                int64_t min, int64_t max);
int xp_opt_doubles(double *out, size_t *n, size_t cap, const xp_opts_t *o, const char *name, const char *dflt,
                   double min, double max, int min_open);
int xp_opt_strs(const char **out, size_t *n, size_t cap, char *buf, size_t bufcap, const xp_opts_t *o,
                const char *name, const char *dflt);

/* Shared option rows (cli_opt_t initialisers) of the experiments that run the oracle. */
#define XP_OPTS_ORACLE                                                                                               \
  {"oracle", "mpfr|fast", "fast", "oracle path"}, CLI_OPT_ORACLE_TARGET, {                                           \
    "cache", "DIR|none", "OUT/oracle-cache", "on-disk oracle cache (shared by sweeps over the same fixtures)"        \
  }

/* The default recipe list: every preset whose io format is BF16, with no
   dropout (the presets that model a backward kernel on BF16 tensors), in
   preset order. Decided at run time, so presets added later join in. */
size_t xp_default_recipes(const char **names, size_t cap);
/* Fill ctx's recipes from variant specs (aa_recipe_from_spec: preset, recipe
   file, NAME:key=value,...); AA_ENOTFOUND names an unknown preset, two
   variants of one name are AA_EINVAL. */
int xp_ctx_set_recipes(xp_ctx_t *ctx, const char *const *names, size_t n, aa_error_t *err);
/* Append one recipe (skipped when one of that name is already there), with its text hash. */
int xp_ctx_add_recipe(xp_ctx_t *ctx, const aa_recipe_t *r, aa_error_t *err);
/* A list of variant specs (--variants, normmap's --dense and --causal), split
   by the library's rule (aa_recipe_spec_next: NAME:key=value,key=value is one
   item) into buf; as xp_opt_strs otherwise. */
int xp_opt_specs(const char **out, size_t *n, size_t cap, char *buf, size_t bufcap, const xp_opts_t *o,
                 const char *name, const char *dflt);
/* ctx's recipes from --variants (default xp_default_recipes). */
int xp_recipes_from_opts(xp_ctx_t *ctx, const xp_opts_t *o, aa_error_t *err);
/* With --variants and without --no-naive: add lib/score's naive BF16 reference (aa_score_naive_recipe) unless a
   recipe of ctx computes it already, so that the flash-attention rule can be evaluated (ctx->naive_added names it:
   the sweep's account says so). */
int xp_add_naive_reference(xp_ctx_t *ctx, const xp_opts_t *o, aa_error_t *err);
void xp_ctx_init(xp_ctx_t *ctx);
void xp_ctx_destroy(xp_ctx_t *ctx);
/* Set the OpenMP thread count of the calling worker to ctx->inner_threads (when > 0). */
void xp_cell_threads(const xp_ctx_t *ctx);
/* Oracle opts from ctx (path, inner threads). */
void xp_oracle_opts(aa_oracle_opts_t *oo, const xp_ctx_t *ctx);

/* The oracle of one fixture through ctx's disk cache (none when
   cache_dir is NULL). Cells that share a fixture (the recipes of one
   fixture, the runs of the determinism experiment, the dropout settings
   with one forward mask) wait for the thread computing it and then read
   the cache, so each fixture pays once. *hit (optional): served from the cache. */
int xp_oracle(aa_oracle_result_t *res, int *hit, xp_ctx_t *ctx, const aa_problem_t *pb, const aa_tensor_t *q,
              const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *oo,
              aa_error_t *err);

/* Columns every attention cell writes (in this order), and the evaluation:
   coordinates "n", "mask" ("dense" | "causal"), "seed" (integer), and
   optionally "d", "heads", "log2_sigma" (integer: sigma = 2^v) or "sigma"
   (double); inputs q, k, v, dO drawn with cli_inputs_draw from
   aa_cell_seed(cell), in BF16; the oracle once, through the cache; then
   every recipe of ctx (the NOSEED axis "recipes" names them), one row per
   recipe and output o, dq, dk, dv (column "recipe" says which). */
int xp_attn_columns(aa_sweep_t *sw, aa_error_t *err);
/* The first-offence columns (ctx->first_cols): per recipe and output, the site where the run's first NaN or Inf
   was created (aa_attn_first_t: first_site, first_h, first_i, first_j, first_value, first_a, first_b, first_c)
   and first_text, its sentence; empty when every value stayed finite. The cell coordinates n_q (0: n), key_pad
   and empty_row (1: query row 0 of every head fully masked) shape the problem (xp_cell_masks). */
int xp_first_columns(aa_sweep_t *sw, aa_error_t *err);
void xp_first_set(aa_sweep_rows_t *rows, const aa_attn_first_t *f);
/* The cell's n_q, key_pad and empty_row into pb (already initialised with n_q = n_k = n and whose inputs have
   n_q query rows); *mask receives the boolean mask to free after the run (NULL: none). */
int xp_cell_masks(aa_problem_t *pb, uint8_t **mask, const aa_cell_t *cell, aa_error_t *err);
int xp_attn_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *ctx);
/* finish of the attention grids: the oracle's and the emulation's seconds
   summed over the folder's cells (per recipe), on stdout. */
int xp_attn_finish(const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err);
/* The options of the attention grids (table4, nanmap, smoke): --quick, --variants, --seeds, --n, --masks. */
/* The label prefix of table3's construction whose parameters are searched so that its sampled ratio range matches
   the published one ([blackwell-fa] Table 3): its ratio columns agree by construction (the report says so). */
#define XP_TABLE3_FITTED "quadratic-bf16 search best"

/* --d and --kv-heads of table4 and nanmap (xp_axis_dims). */
#define XP_OPTS_SHAPE                                                                                                \
  {"d", "D[,D...]", "experiment's", "head dimensions (an axis)"}, {                                                  \
    "kv-heads", "K", "heads", "key/value heads (GQA: K divides the query heads)"                                     \
  }

#define XP_OPTS_ATTN                                                                                                 \
  {"quick", NULL, NULL, "the experiment's short grid"},                                                              \
      {"variants", "SPEC[,SPEC...]", "every BF16 preset without dropout",                                            \
       "recipes to run in each cell: a preset NAME, a recipe FILE (ends in .recipe or has a /), or "                 \
       "NAME:key=value,... (the preset with overrides, named as written)"},                                          \
      {"seeds", "K", "1 (smoke: 2)", "seeds 1..K per grid point (inputs from aa_cell_seed of the cell)"},            \
      {"n", "N[,N...]", "experiment's", "lengths replacing the experiment's"}, {                                     \
    "masks", "dense|causal|dense,causal", "dense,causal", "masks of the grid"                                        \
  }

/* The recipe axis from ctx (flag NOSEED: every recipe sees the same inputs). */
int xp_axis_recipes(aa_sweep_t *sw, const xp_ctx_t *ctx, aa_error_t *err);
/* Mask axis from --masks (checked), else dense and causal. */
int xp_axis_masks(aa_sweep_t *sw, const xp_opts_t *o, aa_error_t *err);
/* Seed axis 1..k. */
int xp_axis_seeds(aa_sweep_t *sw, size_t k, aa_error_t *err);
/* Length axis from --n, else the n values given. */
int xp_axis_n(aa_sweep_t *sw, const xp_opts_t *o, const int64_t *ns, size_t count, aa_error_t *err);
/* The problem shape axes of the attention grids: "d" from --d D[,D...] (else d_default) and "kv_heads" from
   --kv-heads K (K must divide heads; absent: no axis, kv_heads = heads); "sigma" from --sigma S[,S...] (absent:
   no axis, sigma 1). */
int xp_axis_dims(aa_sweep_t *sw, const xp_opts_t *o, int64_t d_default, size_t heads, aa_error_t *err);
int xp_axis_sigma(aa_sweep_t *sw, const xp_opts_t *o, aa_error_t *err);
/* A one-value NOSEED axis: a setting that holds for the whole grid. It
   makes the setting part of the grid (a folder of other settings is
   refused on --resume) and a column of every row, without changing any
   cell's aa_cell_seed. */
int xp_axis_fixed_int(aa_sweep_t *sw, const char *name, int64_t v, aa_error_t *err);
int xp_axis_fixed_double(aa_sweep_t *sw, const char *name, double v, aa_error_t *err);
int xp_axis_fixed_str(aa_sweep_t *sw, const char *name, const char *v, aa_error_t *err);
/* Declare columns in order; names ending in '@' are timing columns (the '@' is dropped). */
int xp_columns(aa_sweep_t *sw, const char *const *names, size_t n, aa_error_t *err);

/* results.csv is read back with the library's reader (aa_results_*, aa_sweep_results_open in lib/sweep.h). */

/* The FP8 experiments' shared steps (fp8.c): q scaled so the scaled logits of the first 256 queries and keys have
   the sample std logit_std (flash-attention 4f3b9be2 tests/cute/test_fp8_rescale_saturation.py:51-53), and
   Pearson's correlation of a against the reference b with *rel_l2 = ||a - b|| / ||b||. */
void xp_fp8_calibrate(aa_tensor_t *q, const aa_tensor_t *k, double logit_std);
double xp_fp8_pearson(const aa_tensor_t *a, const aa_tensor_t *b, double *rel_l2);
/* The experiments (one file each; smoke, the tests' tiny grid, in xp/registry.c). */
extern const xp_experiment_t xp_table4, xp_nanmap, xp_smoke, xp_normmap, xp_dqbudget, xp_table3, xp_determinism,
    xp_dropout_map, xp_fp8, xp_fp8_rescale, xp_lowpmap;

#endif
