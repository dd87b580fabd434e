/* attnacc: the experiment registry of `attnacc sweep` (grids of attention cells) and the shared cell evaluation. */
#ifndef AA_EXPERIMENTS_H
#define AA_EXPERIMENTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "attnacc.h"
#include "sweep.h"

/* Settings of one sweep, filled by `attnacc sweep` from its options before
   the experiment declares its grid. Zero / NULL fields mean "the
   experiment's default". */
typedef struct {
  int quick;                  /* --quick: the short grid */
  size_t seeds;               /* --seeds K: seed axis 1..K */
  size_t heads;               /* --heads H: heads per cell */
  const char *const *recipes; /* --variants: preset names (nrecipes of them) */
  size_t nrecipes;
  const char *ns;    /* --n LIST: comma-separated lengths replacing the experiment's */
  const char *masks; /* --masks LIST: "dense", "causal" or both (default both) */
} xp_opts_t;

/* What the cell evaluation needs besides the cell's coordinates: the
   recipes by name, the oracle cache and the inner thread count. Shared by
   every worker thread; the lock serialises the oracle of one fixture so two
   threads never compute the same oracle at once. */
#define XP_MAX_RECIPES 48
typedef struct {
  aa_recipe_t recipe[XP_MAX_RECIPES];
  char recipe_hash[XP_MAX_RECIPES][17]; /* low 64 bits of FNV-1a 128 of aa_recipe_format text, hex */
  size_t nrecipes;
  const char *cache_dir; /* NULL: no oracle cache */
  int inner_threads;     /* OpenMP threads inside one cell (0 = default) */
  aa_oracle_path_t oracle_path;
  /* defaults of the coordinates an experiment may leave out of its grid */
  size_t d, heads;
  double sigma;
  int uniform;
  /* fixtures whose oracle is being computed right now */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  aa_hash128_t busy[64];
  size_t nbusy;
  unsigned delay_ms; /* test hook (ATTNACC_SWEEP_CELL_DELAY_MS): sleep after each cell */
} xp_ctx_t;

typedef struct {
  const char *name;
  const char *summary; /* one line for `attnacc list` */
  int hidden;          /* 1: not listed (test grids) */
  /* Declare the axes, columns and filter, then aa_sweep_build. The recipe
     list in ctx is already filled (from --variants or xp_default_recipes). */
  int (*declare)(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err);
  aa_sweep_eval_fn eval; /* called with the xp_ctx_t as context */
} xp_experiment_t;

extern const xp_experiment_t xp_experiments[];
extern const size_t xp_experiment_count;
const xp_experiment_t *xp_find(const char *name);

/* The default recipe list: every preset whose io format is BF16, with no
   dropout (the presets that model a backward kernel on BF16 tensors), in
   preset order. Decided at run time, so presets added later join in. */
size_t xp_default_recipes(const char **names, size_t cap);
/* Fill ctx's recipes from names; AA_ENOTFOUND names an unknown preset. */
int xp_ctx_set_recipes(xp_ctx_t *ctx, const char *const *names, size_t n, aa_error_t *err);
void xp_ctx_init(xp_ctx_t *ctx);
void xp_ctx_destroy(xp_ctx_t *ctx);

/* Columns every attention cell writes (in this order), and the evaluation:
   coordinates "n", "mask" ("dense" | "causal"), "seed" (integer), and
   optionally "d", "heads", "log2_sigma" (integer: sigma = 2^v) or "sigma"
   (double); inputs q, k, v, dO drawn with cli_inputs_draw from
   aa_cell_seed(cell), in BF16; the oracle once, through the cache; then
   every recipe of ctx (the NOSEED axis "recipes" names them), one row per
   recipe and output o, dq, dk, dv (column "recipe" says which). */
int xp_attn_columns(aa_sweep_t *sw, aa_error_t *err);
int xp_attn_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *ctx);

/* The recipe axis from ctx (flag NOSEED: every recipe sees the same inputs). */
int xp_axis_recipes(aa_sweep_t *sw, const xp_ctx_t *ctx, aa_error_t *err);
/* Mask axis: opts->masks when given (checked), else dense and causal. */
int xp_axis_masks(aa_sweep_t *sw, const xp_opts_t *o, aa_error_t *err);
/* Seed axis 1..k. */
int xp_axis_seeds(aa_sweep_t *sw, size_t k, aa_error_t *err);
/* Length axis: opts->ns when given, else the n values given. */
int xp_axis_n(aa_sweep_t *sw, const xp_opts_t *o, const int64_t *ns, size_t count, aa_error_t *err);

/* Experiments (one file each). */
int xp_table4_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err);
int xp_nanmap_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err);
int xp_smoke_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err);

#endif
