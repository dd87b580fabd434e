/* attnacc: the one sweep driver: `attnacc sweep` and the experiment shortcuts (threads, shards, resume, MPI). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/limits.h"
#include "commands.h"
#include "config.h"
#include "report/report.h"
#include "xp/xp.h"

#define SW_GPUS 16 /* GPUs whose cells are counted for the account of a run */

#ifdef AA_HAVE_MPI
#include <mpi.h>

#include "sweep/sweep-mpi.h"
#endif

/* The driver's own options, valid for every experiment; the experiment's
   options (xp_experiment_t.params) follow them in one table. */
static const cli_opt_t common[] = {
    {"experiment", "NAME", NULL, "the experiment (attnacc list shows them)"},
    {"out", "DIR", "results/NAME (results/NAME-quick with --quick)",
     "result folder: results.csv, results.jsonl, results.canon.csv, meta.json, journals"},
    {"jobs", "J", "1", "cells run at once (threads); results do not depend on J"},
    {"threads", "T", "1 with --jobs > 1, else all",
     "OpenMP threads inside one cell (oracle, emulation); results do not depend on T"},
    {"resume", NULL, NULL, "skip the cells already in the folder (after a crash or kill)"},
    {"shard", "I/N", "0/1", "run only the cells with index % N == I (merge the shards with --merge)"},
    {"max-cells", "C", "0 = all", "stop after starting C cells (continue later with --resume)"},
    {"merge", NULL, NULL, "merge the shard folders given after the options into --out"},
    {"force", NULL, NULL, "run even when a time estimate exceeds its limit (mpfr oracle: one hour; --max-seconds)"},
    {"device", "auto|cpu|cuda", "auto",
     "where the fast oracle and the emulation run (auto: the GPU where present and implemented); every value is the "
     "same, only the oracle's certified bound (oracle_bound) is the GPU kernel's own there"},
    CLI_OPTS_LIMITS,
};

static const char engine_text[] =
    "Results go to DIR/results.csv (one row per cell and result: the cell's coordinates,\n"
    "then the experiment's columns, timing columns last), its JSON-lines twin\n"
    "results.jsonl, results.canon.csv (without the timing columns: identical bytes for any\n"
    "--jobs, sharding or resume) and meta.json (experiment, version, git hash, command line,\n"
    "recipe texts and their hashes). Each cell is a pure function of its coordinates (and\n"
    "of the experiment's options, which are part of the grid): the same bits on any\n"
    "machine, thread count or shard. Finished cells are appended to a journal at once, so\n"
    "a killed sweep loses only the cells in flight and --resume continues it; a folder\n"
    "holds one grid (other options are refused). Oracles go through an on-disk cache\n"
    "(--cache, default OUT/oracle-cache) where an experiment runs one.\n"
    "Many machines: run --shard I/N on each (e.g. I = $SLURM_ARRAY_TASK_ID) into its own\n"
    "folder, then --merge --out DIR SHARD_DIR... (with the experiment's options, the\n"
    "experiment's summary is printed after the merge); with an MPI build, mpirun -np K\n"
    "spreads the cells over the ranks by itself. A progress line goes to stderr when it\n"
    "is a terminal. Exit status: 0 done, 2 bad usage or a folder of another grid, 1\n"
    "failure while computing or writing.";

/* ---- progress on a terminal ---- */
typedef struct {
  double t0;
  int on;
} progress_t;

static void progress(const aa_sweep_progress_t *p, void *vctx) {
  progress_t *pr = vctx;
  char line[256];
  if (!pr->on) return;
  aa_sweep_progress_line(line, sizeof line, p, cli_now() - pr->t0);
  fprintf(stderr, "\r%s   ", line);
  fflush(stderr);
}

/* ---- meta.json: the provenance the library writes into the result folder ---- */

typedef struct {
  aa_sweep_meta_t m;
  aa_sweep_recipe_t *recipes;
  char **texts;
} sweep_meta_t;

static void meta_free(sweep_meta_t *M) {
  for (size_t i = 0; M->texts != NULL && i < M->m.nrecipes; i++)
    free(M->texts[i]);
  free(M->texts);
  free(M->recipes);
  memset(M, 0, sizeof *M);
}

/* The experiment, the command line and ctx's recipes (name, hash, canonical text). */
static int meta_build(sweep_meta_t *M, const xp_experiment_t *xp, const xp_opts_t *o, const xp_ctx_t *ctx, int argc,
                      char **argv, aa_error_t *err) {
  size_t n = ctx->nrecipes;
  memset(M, 0, sizeof *M);
  M->m =
      (aa_sweep_meta_t){.experiment = xp->name, .quick = o->quick, .seeds = xp->inputs, .argc = argc, .argv = argv};
  M->recipes = calloc(n + 1, sizeof *M->recipes);
  M->texts = calloc(n + 1, sizeof *M->texts);
  if (M->recipes == NULL || M->texts == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++, M->m.nrecipes++) {
    char probe[2];
    size_t need = aa_recipe_format(probe, sizeof probe, &ctx->recipe[i]);
    if ((M->texts[i] = malloc(need + 1)) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
    aa_recipe_format(M->texts[i], need + 1, &ctx->recipe[i]);
    M->recipes[i] = (aa_sweep_recipe_t){ctx->recipe[i].name, ctx->recipe_hash[i], M->texts[i]};
  }
  M->m.recipes = M->recipes;
  return AA_OK;
}

/* ---- limits checked before any cell runs ---- */

typedef struct {
  uint64_t seed;
  double seconds;
} fixture_t;

static int fixture_cmp(const void *a, const void *b) {
  uint64_t x = ((const fixture_t *)a)->seed, y = ((const fixture_t *)b)->seed;
  return x < y ? -1 : x > y;
}

/* The largest cell (worst, max_bytes) and --jobs of them at once must fit in the memory limit
   (lim_mem_limit: --max-memory, else what is available). */
static int check_memory(const char *cmd, const cli_args_t *a, const aa_sweep_t *sw, const xp_ctx_t *ctx, size_t jobs,
                        size_t nshard, uint64_t max_bytes, size_t worst) {
  const char *src;
  double limit;
  uint64_t avail;
  size_t at_once = jobs < nshard ? jobs : nshard;
  if (lim_mem_limit(&limit, &src, cmd, a)) return 2;
  avail = limit < 1.8e19 ? (uint64_t)limit : UINT64_MAX;
  if (avail > 0 && max_bytes > avail) {
    const aa_cell_t *c = aa_sweep_cell(sw, worst);
    char need[48], lim[48];
    lim_bytes(need, sizeof need, (double)max_bytes);
    lim_bytes(lim, sizeof lim, limit);
    cli_error(cmd, "cell %zu (n = %lld, d = %lld) needs about %s (estimate), limit %s (%s): use --max-memory BYTES",
              worst, (long long)aa_cell_int(c, "n", 0), (long long)aa_cell_int(c, "d", (int64_t)ctx->d), need, lim,
              src);
    return 2;
  }
  if (avail > 0 && at_once > 1 && (double)max_bytes * (double)at_once > (double)avail) {
    cli_error(cmd, "--jobs %zu: %zu cells at once need up to %.3g GiB, %.3g GiB available (%s): use fewer --jobs",
              jobs, at_once, (double)max_bytes * (double)at_once / 1073741824.0, (double)avail / 1073741824.0, src);
    return 2;
  }
  return 0;
}

/* The mpfr oracle's estimated wall time over the cells' distinct fixtures (mpfr_core core-seconds):
   refused beyond LIM_MPFR_SECONDS unless --force, else a note. */
static int check_mpfr_time(const char *cmd, const xp_ctx_t *ctx, size_t jobs, size_t nshard, size_t nfix,
                           double mpfr_core, int force) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double par = (double)jobs * lim_threads(ctx->inner_threads), wall;
  char t[48], lim[48];
  if (cores > 0 && par > (double)cores) par = (double)cores;
  wall = mpfr_core / par;
  lim_duration(t, sizeof t, wall);
  lim_duration(lim, sizeof lim, LIM_MPFR_SECONDS);
  if (wall > LIM_MPFR_SECONDS && !force) {
    cli_error(cmd,
              "the mpfr oracle of %zu cells (%zu oracle runs) would take about %s on %.0f threads (estimate, "
              "finished cells included; limit %s): use --oracle fast, fewer or smaller cells, or --force",
              nshard, nfix, t, par, lim);
    return 2;
  }
  fprintf(stderr,
          "attnacc %s: note: the mpfr oracle of %zu cells (%zu oracle runs) should take about %s on %.0f "
          "threads (estimate)\n",
          cmd, nshard, nfix, t, par);
  return 0;
}

/* Memory and mpfr time of the shard's attention cells (those with an "n"
   coordinate; d, heads and kv_heads from the cell or ctx's defaults), from
   the same estimates as `attnacc run`: refuse (2, after a message) cells
   that cannot fit in the memory limit, --jobs J cells at once that do
   not, the slowest cell beyond --max-seconds (lim_check) and an mpfr
   oracle estimated beyond LIM_MPFR_SECONDS, both unless --force. */
static int check_cells(const char *cmd, const cli_args_t *a, const aa_sweep_t *sw, const xp_ctx_t *ctx, size_t jobs,
                       size_t shard_i, size_t shard_n) {
  size_t ncells = aa_sweep_ncells(sw), nshard = 0, worst = 0, nfix = 0, slow[5] = {0};
  uint64_t max_bytes = 0;
  double max_secs = -1;
  int force = cli_get(a, "force") != NULL;
  fixture_t *fix = NULL;
  double mpfr_core = 0;
  aa_oracle_opts_t oo;
  int mpfr = ctx->oracle_path == AA_ORACLE_MPFR, rc = 0;
  xp_oracle_opts(&oo, ctx);
  if (mpfr && (fix = calloc(ncells + 1, sizeof *fix)) == NULL) {
    cli_error(cmd, "out of memory");
    return 1;
  }
  for (size_t i = shard_i; i < ncells; i += shard_n) {
    const aa_cell_t *c = aa_sweep_cell(sw, i);
    int64_t n = aa_cell_int(c, "n", 0), d = aa_cell_int(c, "d", (int64_t)ctx->d),
            heads = aa_cell_int(c, "heads", (int64_t)ctx->heads), kv = aa_cell_int(c, "kv_heads", heads);
    uint64_t bytes;
    if (n <= 0 || d <= 0 || heads <= 0 || kv <= 0) continue; /* not an attention cell */
    nshard++;
    if (!lim_attn_bytes(&bytes, (size_t)n, (size_t)n, (size_t)d, (size_t)heads, (size_t)kv, 1)) bytes = UINT64_MAX;
    if (bytes > max_bytes) {
      max_bytes = bytes;
      worst = i;
    }
    if ((double)heads * (double)n * (double)n * (double)d > max_secs) {
      size_t cell[5] = {(size_t)n, (size_t)d, (size_t)heads, (size_t)kv, 1};
      max_secs = (double)heads * (double)n * (double)n * (double)d; /* aa_problem_cost's seconds grow with it */
      memcpy(slow, cell, sizeof slow);
    }
    if (mpfr) {
      aa_problem_t pb;
      aa_problem_init(&pb, (size_t)n, (size_t)n, (size_t)d, (size_t)heads, (size_t)kv);
      fix[nfix].seed = aa_cell_seed(c);
      fix[nfix++].seconds = aa_oracle_mpfr_seconds(&pb, &oo);
    }
  }
  if (mpfr && ctx->cache_dir != NULL && nfix > 1) {
    /* Cells of one fixture (the same seed: the same coordinates but for
       NOSEED axes) share one oracle through the cache. */
    size_t k = 1;
    qsort(fix, nfix, sizeof *fix, fixture_cmp);
    for (size_t j = 1; j < nfix; j++)
      if (fix[j].seed != fix[k - 1].seed) fix[k++] = fix[j];
    nfix = k;
  }
  for (size_t j = 0; j < nfix; j++)
    mpfr_core += fix[j].seconds;
  free(fix);
  if (nshard == 0) return 0;
  if ((rc = check_memory(cmd, a, sw, ctx, jobs, nshard, max_bytes, worst)) != 0 ||
      (rc = lim_check(cmd, a, slow[0], slow[0], slow[1], slow[2], slow[3], 1, ctx->inner_threads)) != 0)
    return rc;
  if (mpfr) rc = check_mpfr_time(cmd, ctx, jobs, nshard, nfix, mpfr_core, force);
  return rc;
}

/* The option table of one invocation: the common options (without
   --experiment for a shortcut) followed by the experiment's own. */
typedef struct {
  cli_opt_t opt[CLI_MAX_OPTS];
  size_t n;
} table_t;

static int table_build(table_t *t, const xp_experiment_t *xp, int shortcut) {
  t->n = 0;
  for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
    if (!(shortcut && strcmp(common[i].name, "experiment") == 0)) t->opt[t->n++] = common[i];
  for (size_t i = 0; xp != NULL && i < xp->nparams; i++) {
    for (size_t j = 0; j < t->n; j++)
      if (strcmp(t->opt[j].name, xp->params[i].name) == 0) return -1;
    if (t->n == CLI_MAX_OPTS) return -1;
    t->opt[t->n++] = xp->params[i];
  }
  return 0;
}

static int is_flag(const table_t *t, const char *name) {
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->opt[i].name, name) == 0) return t->opt[i].metavar == NULL;
  return 1;
}

static int parse_shard(size_t *i, size_t *n, const char *s) {
  char *end;
  unsigned long long a, b;
  errno = 0;
  a = strtoull(s, &end, 10);
  if (end == s || *end != '/' || errno) return -1;
  s = end + 1;
  b = strtoull(s, &end, 10);
  if (end == s || *end != '\0' || errno || b == 0 || a >= b || b > 1000000) return -1;
  *i = (size_t)a;
  *n = (size_t)b;
  return 0;
}

static void known_experiments(char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < xp_experiment_count && used < cap; i++)
    if (!xp_experiments[i]->hidden)
      used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", xp_experiments[i]->name);
}

static int do_merge(const char *cmd, const char *out, const char *const *dirs, size_t ndirs) {
  aa_error_t err = {{0}};
  size_t ncells = 0;
  int rc;
  if (out == NULL || ndirs == 0) {
    cli_error(cmd, "--merge needs --out DIR and at least one shard folder after the options");
    return 2;
  }
  if (cli_check_out_dir(out, &err) != AA_OK) { /* a file, or a folder that cannot be created: the input's fault */
    cli_error(cmd, "--out: %s", err.msg);
    return 2;
  }
  if ((rc = aa_sweep_merge(&ncells, out, dirs, ndirs, &err)) != AA_OK) {
    cli_error(cmd, "merge: %s", err.msg);
    return rc == AA_ENOMEM || rc == AA_EIO ? 1 : 2;
  }
  if (aa_sweep_meta_copy(out, dirs[0], &err) != AA_OK) {
    cli_error(cmd, "merge: %s", err.msg);
    return 1;
  }
  printf("attnacc %s: merged %zu cells from %zu folders into %s/results.csv\n", cmd, ncells, ndirs, out);
  return fflush(stdout) == 0 ? 0 : 1;
}

/* The help text: the engine's (sweep alone), or the experiment's description. */
static void help_text(cli_sb_t *sb, const char *cmd, const xp_experiment_t *xp, int shortcut) {
  if (xp == NULL) {
    char known[512];
    known_experiments(known, sizeof known);
    cli_sb_printf(sb,
                  "Run the grid of a registered experiment:\n  %s\n(attnacc list shows them with a "
                  "summary; attnacc sweep --experiment NAME --help lists its options).\n\n%s",
                  known, engine_text);
    return;
  }
  /* The engine's paragraph once, in `attnacc sweep --help`; an experiment's help points there. */
  cli_sb_printf(sb, "%s: %s.\n\n%s\n\n", xp->name, xp->summary, xp->description);
  if (shortcut) cli_sb_printf(sb, "attnacc %s ARGS is attnacc sweep --experiment %s ARGS. ", cmd, xp->name);
  cli_sb_printf(sb, "The sweep engine runs it: `attnacc sweep --help` describes the result files, --resume,\n"
                    "sharding, the oracle cache and the exit status.");
}

/* Everything one sweep command holds, so that each step below reads as one thing. */
typedef struct {
  const char *cmd;
  int argc;
  char **argv;
  const xp_experiment_t *xp;
  int shortcut; /* attnacc NAME ARGS (the experiment is the command) */
  cli_args_t a;
  char **oargv; /* the options, apart from the shard folders of --merge (pos) */
  const char **pos;
  int oargc;
  size_t npos;
  table_t *tab;
  cli_sb_t desc;
  xp_opts_t o;
  xp_ctx_t *ctx;
  aa_sweep_t *sw;
  size_t jobs, threads, max_cells, shard_i, shard_n;
  const char *out;
  char out_default[512], cache_default[4096];
  int use_mpi, mpi_rank, mpi_size;
  FILE *info; /* the driver's own lines: stdout, or stderr when the experiment prints JSON there */
  sweep_meta_t meta;
  progress_t pr;
  aa_sweep_progress_t stats;
  aa_error_t err;
  int ngpu;                         /* GPUs the cells may use (0: --device cpu, or none) */
  atomic_int next_slot;             /* the next worker's GPU slot */
  atomic_size_t gpu_cells[SW_GPUS]; /* cells run with each GPU current (the first SW_GPUS) */
} sweep_cmd_t;

static void sweep_free(sweep_cmd_t *S) {
  meta_free(&S->meta);
#ifdef AA_HAVE_MPI
  if (S->use_mpi) MPI_Finalize();
#endif
  aa_sweep_free(S->sw);
  if (S->ctx != NULL) {
    if (S->xp != NULL && S->xp->release != NULL) S->xp->release(S->ctx);
    xp_ctx_destroy(S->ctx);
    free(S->ctx);
  }
  cli_sb_free(&S->desc);
  free(S->tab);
  free(S->oargv);
  free(S->pos);
}

/* The experiment comes first: its options join the table. */
static int find_experiment(sweep_cmd_t *S, const char *experiment) {
  const char *xname = experiment;
  for (int i = 1; !S->shortcut && i < S->argc; i++) {
    if (strcmp(S->argv[i], "--experiment") == 0 && i + 1 < S->argc)
      xname = S->argv[i + 1];
    else if (strncmp(S->argv[i], "--experiment=", 13) == 0)
      xname = S->argv[i] + 13;
  }
  if (xname != NULL && (S->xp = xp_find(xname)) == NULL) {
    char known[512];
    known_experiments(known, sizeof known);
    cli_error(S->cmd, "unknown experiment '%s' (known: %s)", xname, known);
    return 2;
  }
  return 0;
}

/* The option table (the engine's and the experiment's), the shard folders
   of --merge set apart as plain arguments, then the parse: -1 to go on,
   else the exit status. */
static int parse_args(sweep_cmd_t *S) {
  char usage[512];
  int rc;
  S->oargv = calloc((size_t)S->argc + 1, sizeof *S->oargv);
  S->pos = calloc((size_t)S->argc + 1, sizeof *S->pos);
  S->tab = malloc(sizeof *S->tab);
  if (S->oargv == NULL || S->pos == NULL || S->tab == NULL) {
    cli_error(S->cmd, "out of memory");
    return 1;
  }
  if (table_build(S->tab, S->xp, S->shortcut) != 0) {
    /* a programming error in the experiment's table */
    cli_error(S->cmd, "%s: its options collide with the common ones or exceed %d", S->xp->name, CLI_MAX_OPTS);
    return 1;
  }
  for (int i = 0; i < S->argc; i++) {
    char **v = S->argv;
    if (i > 0 && strncmp(v[i], "--", 2) != 0 && strcmp(v[i], "-h") != 0 &&
        !(i > 1 && strncmp(v[i - 1], "--", 2) == 0 && strchr(v[i - 1], '=') == NULL &&
          !is_flag(S->tab, v[i - 1] + 2)))
      S->pos[S->npos++] = v[i];
    else
      S->oargv[S->oargc++] = v[i];
  }
  if (S->shortcut)
    snprintf(usage, sizeof usage, "[options]\n       attnacc %s --merge --out DIR SHARD_DIR... [options]", S->cmd);
  else if (S->xp != NULL)
    snprintf(usage, sizeof usage, "--experiment %s [options]\n       attnacc sweep --merge --out DIR SHARD_DIR...",
             S->xp->name);
  else
    snprintf(usage, sizeof usage, "--experiment NAME [options]\n       attnacc sweep --merge --out DIR SHARD_DIR...");
  help_text(&S->desc, S->cmd, S->xp, S->shortcut);
  if (S->desc.oom) {
    cli_error(S->cmd, "out of memory");
    return 1;
  }
  if ((rc = cli_args_parse(&S->a, S->cmd, usage, S->desc.buf, S->tab->opt, S->tab->n, S->oargc, S->oargv)) >= 0)
    return rc;
  S->o.cmd = S->cmd;
  S->o.args = &S->a;
  S->o.quick = cli_get(&S->a, "quick") != NULL;
  return -1;
}

/* The engine's numbers and the result folder; a file, or a folder that
   cannot be created (read-only or pseudo file system, no permission), is
   bad input: refused before any work. */
static int read_engine_opts(sweep_cmd_t *S) {
  const cli_args_t *a = &S->a;
  const char *s;
  int rc;
  if (((s = cli_get(a, "jobs")) && cli_size(&S->jobs, S->cmd, "jobs", s, 1, 1024)) ||
      ((s = cli_get(a, "threads")) && cli_size(&S->threads, S->cmd, "threads", s, 0, 4096)) ||
      ((s = cli_get(a, "max-cells")) && cli_size(&S->max_cells, S->cmd, "max-cells", s, 0, SIZE_MAX)))
    return 2;
  if ((s = cli_get(a, "shard")) && parse_shard(&S->shard_i, &S->shard_n, s) != 0) {
    cli_error(S->cmd, "--shard: '%s' is not I/N with 0 <= I < N", s);
    return 2;
  }
  if ((S->out = cli_get(a, "out")) == NULL) {
    snprintf(S->out_default, sizeof S->out_default, "results/%s%s", S->xp->name, S->o.quick ? "-quick" : "");
    S->out = S->out_default;
  }
  S->o.out_dir = S->out;
  if ((rc = cli_check_out_dir(S->out, &S->err)) != AA_OK) {
    cli_error(S->cmd, "--out: %s", S->err.msg);
    return rc == AA_ENOMEM ? 1 : 2;
  }
  return 0;
}

/* The context the cells share: oracle path and target, cache, threads. */
static int make_ctx(sweep_cmd_t *S) {
  const char *s, *cache;
  if ((S->ctx = malloc(sizeof *S->ctx)) == NULL) {
    cli_error(S->cmd, "out of memory");
    return 1;
  }
  xp_ctx_init(S->ctx);
  if ((s = cli_get(&S->a, "oracle")) != NULL && aa_oracle_path_from_name(&S->ctx->oracle_path, s) != AA_OK) {
    cli_error(S->cmd, "--oracle: '%s' is not mpfr or fast", s);
    return 2;
  }
  if ((s = cli_get(&S->a, "oracle-target")) != NULL && cli_oracle_target(&S->ctx->oracle_target, S->cmd, s)) return 2;
  /* --oracle-cache: normmap's older name of --cache */
  if ((cache = cli_get(&S->a, "cache")) == NULL) cache = cli_get(&S->a, "oracle-cache");
  if (cache == NULL) {
    snprintf(S->cache_default, sizeof S->cache_default, "%s/oracle-cache", S->out);
    cache = S->cache_default;
  }
  S->ctx->cache_dir = strcmp(cache, "none") == 0 ? NULL : cache;
  if (cli_device_opt(&S->ctx->oracle_device, &S->a, S->cmd)) return 2;
  /* The oracle and the emulation use OpenMP inside a cell: with J cells at
     once each keeps one thread unless --threads says otherwise, so the
     cores are not oversubscribed (results do not depend on the count). */
  S->ctx->inner_threads = S->threads > 0 ? (int)S->threads : S->jobs > 1 ? 1 : 0;
  if (S->threads > 0) cli_set_threads(S->threads);
  if ((s = getenv("ATTNACC_SWEEP_CELL_DELAY_MS")) != NULL) S->ctx->delay_ms = (unsigned)strtoul(s, NULL, 10);
  return 0;
}

/* The experiment's grid (its options read, its axes and columns declared). */
static int declare(sweep_cmd_t *S) {
  int rc;
  if ((rc = aa_sweep_new(&S->sw, &S->err)) != AA_OK ||
      (rc = S->xp->declare(S->sw, &S->o, S->ctx, &S->err)) != AA_OK) {
    if (S->err.msg[0]) cli_error(S->cmd, "%s", S->err.msg); /* else the option helpers said it */
    return cli_exit_status(rc);
  }
  if (S->ctx->stdout_owned) S->info = stderr;
  return 0;
}

static int finish(sweep_cmd_t *S) {
  int rc = S->xp->finish(&S->o, S->ctx, &S->err);
  /* the grids the report aggregates as table4 (recipe x mask x n x output) end with their verdicts */
  if (rc == AA_OK && (strcmp(S->xp->name, "table4") == 0 || strcmp(S->xp->name, "smoke") == 0))
    rp_print_verdicts(S->ctx->stdout_owned ? stderr : stdout, S->out);
  if (rc == AA_OK) return 0;
  cli_error(S->cmd, "%s", S->err.msg);
  return cli_exit_status(rc);
}

/* Under mpirun each rank takes its own shard. */
static int mpi_start(sweep_cmd_t *S) {
#ifdef AA_HAVE_MPI
  const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
  if (ws == NULL) ws = getenv("PMI_SIZE");
  if (ws != NULL && atoi(ws) > 1) {
    if (cli_get(&S->a, "shard") != NULL) {
      cli_error(S->cmd, "--shard is set by the MPI rank under mpirun: leave it out");
      return 2;
    }
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &S->mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &S->mpi_size);
    S->use_mpi = 1;
  }
#else
  (void)S;
#endif
  return 0;
}

/* The engine's messages after a failed run: what went wrong, and what to do. */
static int run_failed(const sweep_cmd_t *S, int rc, int resume) {
  cli_error(S->cmd, "%s", S->err.msg);
  if (rc == AA_EFORMAT)
    fprintf(stderr, "attnacc %s: (a folder holds one grid: use another --out, or the same options as before)\n",
            S->cmd);
  if (rc == AA_EINVAL && !resume && S->stats.skipped > 0) /* not for a busy folder or a linked journal */
    fprintf(stderr, "attnacc %s: (add --resume to continue a sweep in this folder)\n", S->cmd);
  return cli_exit_status(rc);
}

/* A cell on its worker's GPU: each worker thread takes a slot at its first cell (lib/common.h aa_gpu_index: the
   ranks of a node first, then the workers), so that --jobs J, or J ranks under mpirun, spread the cells' GPU work
   over a machine's GPUs. Values do not depend on the GPU; the account of the run says where cells ran. */
static int eval_on_gpu(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *arg) {
  sweep_cmd_t *S = arg;
  static _Thread_local int slotted;
  if (!slotted) {
    aa_gpu_thread_slot(atomic_fetch_add(&S->next_slot, 1));
    slotted = 1;
  }
  if (S->ngpu > 0) {
    int g = aa_gpu_index(S->ngpu);
    if (g < SW_GPUS) atomic_fetch_add(&S->gpu_cells[g], 1);
  }
  return S->xp->eval(cell, rows, S->ctx);
}

/* The cells: the engine runs them and, once they succeed, writes the
   results files and the provenance (meta.json, from rank 0 under MPI). */
static int run_cells(sweep_cmd_t *S) {
  aa_sweep_opts_t so;
  const char *out = S->out;
  int rc;
  if ((rc = meta_build(&S->meta, S->xp, &S->o, S->ctx, S->argc, S->argv, &S->err)) != AA_OK) {
    cli_error(S->cmd, "%s", S->err.msg);
    return 1;
  }
  aa_sweep_opts_init(&so);
  so.out_dir = out;
  so.threads = (int)S->jobs;
  so.shard_index = S->shard_i;
  so.shard_count = S->shard_n;
  so.resume = cli_get(&S->a, "resume") != NULL;
  so.max_cells = S->max_cells;
  S->pr.on = isatty(2) && S->mpi_rank == 0;
  S->pr.t0 = cli_now();
  so.progress = progress;
  so.progress_ctx = &S->pr;
  so.meta = &S->meta.m;
  S->ngpu = S->ctx->oracle_device == AA_ORACLE_DEVICE_CPU ? 0 : aa_gemm_cuda_devices();
#ifdef AA_HAVE_MPI
  if (S->use_mpi)
    rc = aa_sweep_run_mpi(&S->stats, S->sw, eval_on_gpu, S, &so, &S->err);
  else
#endif
    rc = aa_sweep_run(&S->stats, S->sw, eval_on_gpu, S, &so, &S->err);
  if (S->pr.on) fprintf(stderr, "\n");
  if (S->stats.discarded_bytes > 0) /* say what resuming cut off: the engine only reports it */
    fprintf(stderr,
            "attnacc %s: %s/journal-%zu-of-%zu.txt: discarded a torn or junk tail of %zu bytes (%zu line%s) after "
            "the last complete cell; any cell it held runs again\n",
            S->cmd, out, S->use_mpi ? (size_t)S->mpi_rank : S->shard_i, S->use_mpi ? (size_t)S->mpi_size : S->shard_n,
            S->stats.discarded_bytes, S->stats.discarded_lines, S->stats.discarded_lines == 1 ? "" : "s");
  if (rc != AA_OK) return run_failed(S, rc, so.resume);
  return 0;
}

/* Where this process's cells ran, when they could use a GPU: "cells on GPUs: 0 (6 cells), 1 (6 cells) of 2". */
static void gpu_account(sweep_cmd_t *S) {
  if (S->ngpu <= 0 || S->stats.done == 0) return;
  fprintf(S->info, "attnacc %s: %scells on GPUs:", S->cmd, S->use_mpi ? "rank 0's " : "");
  for (int g = 0; g < S->ngpu && g < SW_GPUS; g++) {
    size_t c = atomic_load(&S->gpu_cells[g]);
    if (c > 0) fprintf(S->info, " %d (%zu cell%s)", g, c, c == 1 ? "" : "s");
  }
  fprintf(S->info, " of %d (--device %s)\n", S->ngpu, aa_oracle_device_name(S->ctx->oracle_device));
}

/* Rank 0's account of the run, then the experiment's summary when the folder is complete. */
static int report_run(sweep_cmd_t *S) {
  const aa_sweep_progress_t *st = &S->stats;
  char label[80] = "";
  if (S->mpi_rank != 0) return 0;
  if (!S->shortcut) snprintf(label, sizeof label, "%s: ", S->xp->name);
  if (S->use_mpi)
    fprintf(S->info, "attnacc %s: %s%zu cells over %d ranks; rank 0: %zu cells (%zu resumed, %zu run) in %.1f s\n",
            S->cmd, label, aa_sweep_ncells(S->sw), S->mpi_size, st->total, st->skipped, st->done,
            cli_now() - S->pr.t0);
  else
    fprintf(S->info, "attnacc %s: %s%zu cells (%zu resumed, %zu run) in %.1f s\n", S->cmd, label, st->total,
            st->skipped, st->done, cli_now() - S->pr.t0);
  gpu_account(S);
  if (S->ctx->naive_added != NULL)
    fprintf(S->info,
            "note: added %s to --variants: the flash-attention rule compares each recipe with it (--no-naive: leave "
            "it out)\n",
            S->ctx->naive_added);
  if (st->complete)
    fprintf(S->info, "results: %s/results.csv\n", S->out);
  else if (S->max_cells > 0 && st->skipped + st->done < st->total)
    fprintf(S->info, "stopped after --max-cells %zu; rerun with --resume to continue\n", S->max_cells);
  else
    fprintf(S->info, "shard %zu/%zu done; when every shard is done: attnacc %s --merge --out DIR SHARD_DIR...\n",
            S->shard_i, S->shard_n, S->cmd);
  fflush(S->info);
  return st->complete && S->xp->finish != NULL ? finish(S) : 0;
}

static int sweep_steps(sweep_cmd_t *S, const char *experiment) {
  int st;
  int merge;
  if ((st = find_experiment(S, experiment)) != 0 || (st = parse_args(S)) >= 0) return st;
  merge = cli_get(&S->a, "merge") != NULL;
  if (merge) {
    if ((st = do_merge(S->cmd, cli_get(&S->a, "out"), S->pos, S->npos)) != 0 || S->xp == NULL ||
        S->xp->finish == NULL)
      return st;
  } else if (S->npos > 0) {
    cli_error(S->cmd, "unexpected argument '%s' (shard folders go with --merge)", S->pos[0]);
    return 2;
  }
  if (S->xp == NULL) {
    cli_error(S->cmd, "give --experiment NAME (attnacc list shows them)");
    return 2;
  }
  if ((st = read_engine_opts(S)) || (st = make_ctx(S)) || (st = declare(S))) return st;
  if (merge) /* merged above: the experiment's summary of the merged folder */
    return (st = finish(S)) != 0 ? st : fflush(stdout) == 0 ? 0 : 1;
  /* Before any cell: memory and the mpfr oracle's time (under MPI the
     whole grid, since ranks pick their shards later). */
  if ((st = check_cells(S->cmd, &S->a, S->sw, S->ctx, S->jobs, S->shard_i, S->shard_n)) || (st = mpi_start(S)) ||
      (st = run_cells(S)) || (st = report_run(S)))
    return st;
  return fflush(stdout) == 0 ? 0 : 1;
}

int xp_main(const char *cmd, const char *experiment, int argc, char **argv) {
  sweep_cmd_t S;
  int status;
  memset(&S, 0, sizeof S);
  S.cmd = cmd;
  S.argc = argc;
  S.argv = argv;
  S.shortcut = experiment != NULL;
  S.jobs = 1;
  S.shard_n = 1;
  S.mpi_size = 1;
  S.info = stdout;
  status = sweep_steps(&S, experiment);
  sweep_free(&S);
  return status;
}

/* ---- the commands: sweep, and the shortcuts of the experiments that were commands before ---- */
int aa_cmd_sweep(int argc, char **argv) {
  return xp_main("sweep", NULL, argc, argv);
}
int aa_cmd_normmap(int argc, char **argv) {
  return xp_main("normmap", "normmap", argc, argv);
}
int aa_cmd_dqbudget(int argc, char **argv) {
  return xp_main("dq-budget", "dq-budget", argc, argv);
}
int aa_cmd_table3(int argc, char **argv) {
  return xp_main("table3", "table3", argc, argv);
}
int aa_cmd_determinism(int argc, char **argv) {
  return xp_main("determinism", "determinism", argc, argv);
}
int aa_cmd_dropout_map(int argc, char **argv) {
  return xp_main("dropout-map", "dropout-map", argc, argv);
}
