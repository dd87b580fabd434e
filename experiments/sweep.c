/* attnacc: the `sweep` command: run a registered experiment's grid with lib/sweep (threads, shards, resume, MPI,
 * merge). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "config.h"
#include "experiments.h"

#ifdef AA_HAVE_MPI
#include <mpi.h>
#endif

static const cli_opt_t opts[] = {
    {"experiment", "NAME", NULL, "the experiment (attnacc list shows them)"},
    {"quick", NULL, NULL, "the experiment's short grid"},
    {"out", "DIR", "results/NAME or results/NAME-quick", "result folder"},
    {"jobs", "J", "1", "cells run at once (threads); each cell then uses one thread; results do not depend on J"},
    {"resume", NULL, NULL, "skip the cells already in the folder (after a crash or kill)"},
    {"shard", "I/N", "0/1", "run only the cells with index % N == I (merge the shards with --merge)"},
    {"variants", "NAME[,NAME...]", "every BF16 preset without dropout", "recipes to run in each cell"},
    {"seeds", "K", "experiment's", "seeds 1..K per grid point"},
    {"heads", "H", "1", "query heads per cell (table4)"},
    {"n", "N[,N...]", "experiment's", "lengths replacing the experiment's"},
    {"masks", "dense|causal|dense,causal", "dense,causal", "masks of the grid"},
    {"cache", "DIR|none", "OUT/oracle-cache", "on-disk oracle cache (shared by sweeps over the same fixtures)"},
    {"oracle", "mpfr|fast", "fast", "oracle path"},
    {"merge", NULL, NULL, "merge the shard folders given after the options into --out"},
};

static const char usage_line[] =
    "--experiment NAME [--quick] [--out DIR] [--jobs J] [--resume] [--shard I/N] [--variants LIST] [--seeds K]\n"
    "       attnacc sweep --merge --out DIR SHARD_DIR...";
static const char description[] =
    "Run the grid of a registered experiment (attnacc list) and write DIR/results.csv (one\n"
    "row per cell, recipe and output tensor: coordinates, metrics, the oracle's and the\n"
    "emulation's seconds), its JSON-lines twin results.jsonl, results.canon.csv (without\n"
    "the timing columns: identical bytes for any --jobs, sharding or resume) and meta.json\n"
    "(experiment, recipe texts and their hashes, version and git hash). Each cell's\n"
    "inputs are a pure function of its coordinates (aa_cell_seed): the same bits on any\n"
    "machine, thread count or shard. Finished cells are appended to a journal at once, so\n"
    "a killed sweep loses only the cells in flight and --resume continues it. The oracle\n"
    "of each fixture is computed once per cell and cached on disk (--cache).\n"
    "Many machines: run --shard I/N on each (e.g. I = $SLURM_ARRAY_TASK_ID) into its own\n"
    "folder, then attnacc sweep --merge --out DIR SHARD_DIR...; with an MPI build,\n"
    "mpirun -np K attnacc sweep ... spreads the cells over the ranks by itself.\n"
    "A progress line goes to stderr when it is a terminal. Exit status: 0 done, 2 bad\n"
    "usage or a folder of another grid, 1 failure while computing or writing.";

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

/* ---- meta.json: provenance of the result folder ---- */
static int write_meta(const char *dir, const char *experiment, const xp_opts_t *o, const xp_ctx_t *ctx,
                      const aa_sweep_t *sw, int argc, char **argv, aa_error_t *err) {
  cli_sb_t sb = {0};
  char path[4096], gh[33];
  aa_hash128_t g = aa_sweep_grid_hash(sw);
  int rc;
  aa_hash128_hex(gh, &g);
  cli_sb_printf(&sb, "{\n  \"experiment\": ");
  cli_sb_json_str(&sb, experiment);
  cli_sb_printf(&sb, ",\n  \"quick\": %s,\n  \"version\": ", o->quick ? "true" : "false");
  cli_sb_json_str(&sb, AA_VERSION);
  cli_sb_printf(&sb, ",\n  \"git\": ");
  cli_sb_json_str(&sb, AA_GIT_HASH);
  cli_sb_printf(&sb,
                ",\n  \"grid_hash\": \"%s\",\n  \"cells\": %zu,\n  \"seeds\": \"axis 'seed'; inputs drawn from "
                "aa_cell_seed (column input_seed)\",\n  \"command\": [",
                gh, aa_sweep_ncells(sw));
  for (int i = 0; i < argc; i++) {
    cli_sb_printf(&sb, "%s", i ? ", " : "");
    cli_sb_json_str(&sb, argv[i]);
  }
  cli_sb_printf(&sb, "],\n  \"recipes\": [");
  for (size_t i = 0; i < ctx->nrecipes; i++) {
    char probe[2], *text;
    size_t need = aa_recipe_format(probe, sizeof probe, &ctx->recipe[i]);
    if ((text = malloc(need + 1)) == NULL) {
      cli_sb_free(&sb);
      return aa_error_set(err, AA_ENOMEM, "out of memory");
    }
    aa_recipe_format(text, need + 1, &ctx->recipe[i]);
    cli_sb_printf(&sb, "%s\n    {\"name\": ", i ? "," : "");
    cli_sb_json_str(&sb, ctx->recipe[i].name);
    cli_sb_printf(&sb, ", \"hash\": \"%s\", \"text\": ", ctx->recipe_hash[i]);
    cli_sb_json_str(&sb, text);
    cli_sb_printf(&sb, "}");
    free(text);
  }
  cli_sb_printf(&sb, "\n  ]\n}\n");
  if (sb.oom) {
    cli_sb_free(&sb);
    return aa_error_set(err, AA_ENOMEM, "out of memory");
  }
  snprintf(path, sizeof path, "%s/meta.json", dir);
  rc = cli_write_atomic(path, sb.buf, sb.len, err);
  cli_sb_free(&sb);
  return rc;
}

/* Copy IN/meta.json to OUT/meta.json (merge), when present and not the same file. */
static void copy_meta(const char *out, const char *in) {
  char a[4096], b[4096], *data = NULL;
  size_t len = 0, cap = 0;
  FILE *f;
  snprintf(a, sizeof a, "%s/meta.json", in);
  snprintf(b, sizeof b, "%s/meta.json", out);
  if (strcmp(a, b) == 0 || (f = fopen(a, "rb")) == NULL) return;
  for (;;) {
    if (len == cap) {
      char *p = realloc(data, cap = cap ? 2 * cap : 65536);
      if (p == NULL) break;
      data = p;
    }
    size_t got = fread(data + len, 1, cap - len, f);
    if (got == 0) break;
    len += got;
  }
  fclose(f);
  if (data != NULL) cli_write_atomic(b, data, len, NULL);
  free(data);
}

static int is_flag(const char *name) {
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    if (strcmp(opts[i].name, name) == 0) return opts[i].metavar == NULL;
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

static int split_list(const char **names, size_t cap, char *buf) {
  size_t n = 0;
  for (char *p = buf; *p;) {
    char *c = strchr(p, ',');
    if (c) *c = '\0';
    if (*p == '\0' || n == cap) return -1;
    for (size_t j = 0; j < n; j++)
      if (strcmp(names[j], p) == 0) return -1;
    names[n++] = p;
    if (!c) break;
    p = c + 1;
  }
  return (int)n;
}

static int do_merge(const char *cmd, const char *out, const char *const *dirs, size_t ndirs) {
  aa_error_t err = {{0}};
  size_t ncells = 0;
  int rc;
  if (out == NULL || ndirs == 0) {
    cli_error(cmd, "--merge needs --out DIR and at least one shard folder after the options");
    return 2;
  }
  if ((rc = aa_sweep_merge(&ncells, out, dirs, ndirs, &err)) != AA_OK) {
    cli_error(cmd, "merge: %s", err.msg);
    return rc == AA_ENOMEM || rc == AA_EIO ? 1 : 2;
  }
  copy_meta(out, dirs[0]);
  printf("attnacc sweep: merged %zu cells from %zu folders into %s/results.csv\n", ncells, ndirs, out);
  return fflush(stdout) == 0 ? 0 : 1;
}

int aa_cmd_sweep(int argc, char **argv) {
  const char *cmd = "sweep";
  cli_args_t a;
  aa_error_t err = {{0}};
  char **oargv = NULL, out_default[512], cache_default[4096], *variants_buf = NULL;
  const char **pos = NULL, *names[XP_MAX_RECIPES], *s, *out, *cache;
  size_t npos = 0, jobs = 1, shard_i = 0, shard_n = 1;
  int oargc = 0, rc, status = 2, use_mpi = 0, mpi_rank = 0, mpi_size = 1;
  const xp_experiment_t *xp;
  xp_opts_t o;
  xp_ctx_t *ctx = NULL;
  aa_sweep_t *sw = NULL;
  aa_sweep_opts_t so;
  aa_sweep_progress_t stats;
  progress_t pr = {0, 0};

  /* Shard folders of --merge are plain arguments: set them apart first. */
  oargv = calloc((size_t)argc + 1, sizeof *oargv);
  pos = calloc((size_t)argc + 1, sizeof *pos);
  if (oargv == NULL || pos == NULL) {
    cli_error(cmd, "out of memory");
    status = 1;
    goto out;
  }
  for (int i = 0; i < argc; i++) {
    if (i > 0 && strncmp(argv[i], "--", 2) != 0 && strcmp(argv[i], "-h") != 0 &&
        !(i > 1 && strncmp(argv[i - 1], "--", 2) == 0 && strchr(argv[i - 1], '=') == NULL &&
          !is_flag(argv[i - 1] + 2)))
      pos[npos++] = argv[i];
    else
      oargv[oargc++] = argv[i];
  }
  if ((rc = cli_args_parse(&a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], oargc, oargv)) >=
      0) {
    status = rc;
    goto out;
  }
  if (cli_get(&a, "merge") != NULL) {
    status = do_merge(cmd, cli_get(&a, "out"), pos, npos);
    goto out;
  }
  if (npos > 0) {
    cli_error(cmd, "unexpected argument '%s' (shard folders go with --merge)", pos[0]);
    goto out;
  }
  if ((s = cli_get(&a, "experiment")) == NULL) {
    cli_error(cmd, "give --experiment NAME (attnacc list shows them)");
    goto out;
  }
  if ((xp = xp_find(s)) == NULL) {
    char known[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < xp_experiment_count; i++)
      if (!xp_experiments[i].hidden)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", xp_experiments[i].name);
    cli_error(cmd, "unknown experiment '%s' (known: %s)", s, known);
    goto out;
  }
  memset(&o, 0, sizeof o);
  o.quick = cli_get(&a, "quick") != NULL;
  if ((s = cli_get(&a, "jobs")) && cli_size(&jobs, cmd, "jobs", s, 1, 1024)) goto out;
  if ((s = cli_get(&a, "seeds")) && cli_size(&o.seeds, cmd, "seeds", s, 1, 1000000)) goto out;
  if ((s = cli_get(&a, "heads")) && cli_size(&o.heads, cmd, "heads", s, 1, 4096)) goto out;
  if ((s = cli_get(&a, "shard")) && parse_shard(&shard_i, &shard_n, s) != 0) {
    cli_error(cmd, "--shard: '%s' is not I/N with 0 <= I < N", s);
    goto out;
  }
  o.ns = cli_get(&a, "n");
  o.masks = cli_get(&a, "masks");
  if ((ctx = malloc(sizeof *ctx)) == NULL) {
    cli_error(cmd, "out of memory");
    status = 1;
    goto out;
  }
  xp_ctx_init(ctx);
  if ((s = cli_get(&a, "oracle")) != NULL && aa_oracle_path_from_name(&ctx->oracle_path, s) != AA_OK) {
    cli_error(cmd, "--oracle: '%s' is not mpfr or fast", s);
    goto out;
  }
  if ((s = cli_get(&a, "variants")) != NULL) {
    int k;
    if ((variants_buf = strdup(s)) == NULL || (k = split_list(names, XP_MAX_RECIPES, variants_buf)) <= 0) {
      cli_error(cmd, "--variants: '%s' is not a list of distinct names", s);
      goto out;
    }
    o.nrecipes = (size_t)k;
  } else {
    o.nrecipes = xp_default_recipes(names, XP_MAX_RECIPES);
  }
  o.recipes = names;
  if ((rc = xp_ctx_set_recipes(ctx, names, o.nrecipes, &err)) != AA_OK) {
    cli_error(cmd, "--variants: %s (attnacc list shows the presets)", err.msg);
    goto out;
  }
  if ((s = getenv("ATTNACC_SWEEP_CELL_DELAY_MS")) != NULL) ctx->delay_ms = (unsigned)strtoul(s, NULL, 10);

  if ((rc = aa_sweep_new(&sw, &err)) != AA_OK || (rc = xp->declare(sw, &o, ctx, &err)) != AA_OK) {
    cli_error(cmd, "%s: %s", xp->name, err.msg);
    status = cli_exit_status(rc);
    goto out;
  }
  if ((out = cli_get(&a, "out")) == NULL) {
    snprintf(out_default, sizeof out_default, "results/%s%s", xp->name, o.quick ? "-quick" : "");
    out = out_default;
  }
  cache = cli_get(&a, "cache");
  if (cache == NULL) {
    snprintf(cache_default, sizeof cache_default, "%s/oracle-cache", out);
    cache = cache_default;
  }
  ctx->cache_dir = strcmp(cache, "none") == 0 ? NULL : cache;
  /* The oracle and the emulation use OpenMP inside a cell: with J cells at
     once each keeps one thread, so the cores are not oversubscribed (the
     library's results do not depend on the thread count). */
  ctx->inner_threads = jobs > 1 ? 1 : 0;

#ifdef AA_HAVE_MPI
  {
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    if (ws == NULL) ws = getenv("PMI_SIZE");
    if (ws != NULL && atoi(ws) > 1) {
      if (cli_get(&a, "shard") != NULL) {
        cli_error(cmd, "--shard is set by the MPI rank under mpirun: leave it out");
        goto out;
      }
      MPI_Init(NULL, NULL);
      MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
      MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
      use_mpi = 1;
    }
  }
#endif
  if ((rc = cli_mkdir_p(out, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    status = 1;
    goto out;
  }
  aa_sweep_opts_init(&so);
  so.out_dir = out;
  so.threads = (int)jobs;
  so.shard_index = shard_i;
  so.shard_count = shard_n;
  so.resume = cli_get(&a, "resume") != NULL;
  pr.on = isatty(2) && mpi_rank == 0;
  pr.t0 = cli_now();
  so.progress = progress;
  so.progress_ctx = &pr;
  memset(&stats, 0, sizeof stats);
#ifdef AA_HAVE_MPI
  if (use_mpi)
    rc = aa_sweep_run_mpi(&stats, sw, xp->eval, ctx, &so, &err);
  else
#endif
    rc = aa_sweep_run(&stats, sw, xp->eval, ctx, &so, &err);
  if (pr.on) fprintf(stderr, "\n");
  if (rc != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    if (rc == AA_EFORMAT)
      fprintf(stderr, "attnacc sweep: (a folder holds one grid: use another --out, or the same options as before)\n");
    if (rc == AA_EINVAL && !so.resume)
      fprintf(stderr, "attnacc sweep: (add --resume to continue a sweep in this folder)\n");
    status = cli_exit_status(rc);
    goto out;
  }
  /* Provenance, written once the folder is known to hold this grid. */
  if (mpi_rank == 0 && (rc = write_meta(out, xp->name, &o, ctx, sw, argc, argv, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    status = 1;
    goto out;
  }
  if (mpi_rank == 0) {
    if (use_mpi)
      printf("attnacc sweep: %s: %zu cells over %d ranks; rank 0: %zu cells (%zu resumed, %zu run) in %.1f s\n",
             xp->name, aa_sweep_ncells(sw), mpi_size, stats.total, stats.skipped, stats.done, cli_now() - pr.t0);
    else
      printf("attnacc sweep: %s: %zu cells (%zu resumed, %zu run) in %.1f s\n", xp->name, stats.total, stats.skipped,
             stats.done, cli_now() - pr.t0);
    if (stats.complete)
      printf("results: %s/results.csv\n", out);
    else
      printf("shard %zu/%zu done; when every shard is done: attnacc sweep --merge --out DIR SHARD_DIR...\n", shard_i,
             shard_n);
  }
  status = fflush(stdout) == 0 ? 0 : 1;

out:
#ifdef AA_HAVE_MPI
  if (use_mpi) MPI_Finalize();
#endif
  (void)use_mpi;
  aa_sweep_free(sw);
  if (ctx != NULL) {
    xp_ctx_destroy(ctx);
    free(ctx);
  }
  free(variants_buf);
  free(oargv);
  free(pos);
  return status;
}
