/* attnacc: sweeps over grids of cells with resumable, shardable result files, and the on-disk oracle cache. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_SWEEP_H
#define AA_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "oracle.h"
#include "problem.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
   How an experiment uses this module

     aa_sweep_t *sw;
     aa_sweep_new(&sw, err);
     aa_sweep_axis_str(sw, "recipe", recipes, 3, AA_AXIS_NOSEED, err);
     aa_sweep_axis_int(sw, "n", ns, 6, 0, err);
     aa_sweep_axis_str(sw, "mask", masks, 2, 0, err);
     aa_sweep_axis_int(sw, "seed", seeds, 4, 0, err);
     aa_sweep_column(sw, "tensor", 0, err);          metrics, in this order
     aa_sweep_column(sw, "rel_l2", 0, err);
     aa_sweep_column(sw, "seconds_emul", AA_COL_TIMING, err);
     aa_sweep_build(sw, my_filter, NULL, err);       cartesian product, filtered
     aa_sweep_opts_t o; aa_sweep_opts_init(&o);
     o.out_dir = "out/table4"; o.threads = 4; o.resume = 1;
     aa_sweep_run(&stats, sw, my_eval, &my_ctx, &o, err);

   my_eval(cell, rows, ctx) reads its coordinates with aa_cell_int/str/double,
   draws its inputs from streams seeded with aa_cell_seed(cell) (so inputs
   are a pure function of the cell; axes flagged AA_AXIS_NOSEED, such as the
   recipe, do not change the inputs), and adds one row per output tensor:
     aa_sweep_row_new(rows);
     aa_sweep_set_str(rows, "tensor", "dq");
     aa_sweep_set_double(rows, "rel_l2", e);
   The coordinates are filled into every row automatically. eval must be
   thread-safe (cells run on opts.threads threads) and return 0, or a status
   (optionally with a message in aa_sweep_rows_error(rows)) to stop the sweep.

   Output folder (opts.out_dir):
     journal-I-of-N.txt   append-only journal of shard I of N (see below)
     results.csv          canonical tidy CSV: one row per cell and output
                          tensor, rows in cell-index order, columns =
                          coordinates (axis order), metric columns
                          (declaration order), timing columns last
     results.jsonl        the same rows as JSON objects, one per line
     results.canon.csv    results.csv without the timing columns: byte for
                          byte identical between runs, thread counts,
                          shardings and resumes of the same sweep
   The results files are written as one aa_fileset_t (lib/common.h) when the run, or a merge,
   holds every cell of the grid. Values in CSV: integers in decimal, doubles
   in the shortest decimal that reads back exactly ("nan", "inf", "-inf"
   otherwise), strings quoted when needed (RFC 4180). In JSON (built with
   libjansson, lib/common/json.h): integers up to 2^53 as integers, other
   doubles with 17 significant digits (exact), the three non-finite values as
   the strings "nan", "inf", "-inf", strings escaped by jansson with invalid
   UTF-8 bytes as U+FFFD. A column a row did not set is empty in CSV and
   null in JSON. The library reads no clock: eval measures its timing
   columns itself (clock_gettime in experiments/).

   Journal scheme (crash safety). The journal starts with a header line
     #aasweep 1 grid=<32 hex> cells=<ncells> cols=<name>:<c|m|t>,...
   Each finished cell is appended with ONE write() of a complete buffer to
   the journal opened O_APPEND (then fsync): its row lines, one field per
   column, tab-separated, each field empty (missing) or a type letter and
   the value ('i' integer, 'd' double in shortest round-trip decimal, 's'
   string with \\ \t \n \r escaped), followed by a trailer line
     #done <index> <cell id, 32 hex> <nrows> <16 hex: low 64 bits of FNV-1a 128 of the row lines>
   A cell counts as complete only when its trailer is present and the row
   count and checksum match the lines just before it, so a write cut by
   SIGKILL or power loss (a torn tail, a half line) is ignored by readers and
   its cell is run again on resume; a resumed run first truncates its own
   journal after the last complete cell, so new records never glue onto a
   torn line (aa_sweep_progress_t.discarded_* say what was cut). A killed sweep loses at most the cells in flight. A
   folder belongs to one grid: a journal whose header differs (other axes, values, filter outcome or columns) is
   refused with AA_EFORMAT. Two runs of one shard at once are refused too, with AA_EINVAL (the journal is
   flock()ed: the folder is busy). The journal is opened with O_NOFOLLOW: a journal that is a symbolic link
   is refused with AA_EINVAL and its target is never written. A run refused for any of these reasons, or for
   finished cells without resume, creates nothing in the folder: the journal is created only once the folder's
   journals have been read and accepted.

   Folder lock and temporaries. Every run (and aa_sweep_merge, on its output folder) holds aa_sweep_lock on the
   folder: a shared flock() on the folder itself (no lock file). A run that finds the folder free takes it
   exclusively for a moment first and removes every temporary there (NAME.tmp.PID.N, the aa_ofile_t
   temporaries of the results files and of a front end's meta.json) and those of oracle cache entries
   (KEY.aaoc.tmp.PID.N) in its subfolders: with nobody else in the folder they can only be what a killed run
   left (a cache shared with a run elsewhere loses at most an entry, which it recomputes). Front ends that stage files
   of their own in the folder take the lock before staging them, so that a run starting beside them never removes a
   live temporary.

   Sharding: shard I of N holds the cells with index % N == I. Shards may
   write into one shared folder (their journals have different names) or
   into separate folders merged with aa_sweep_merge; either way the merged
   results files equal those of an unsharded run.
   ------------------------------------------------------------------------ */

/* 128-bit FNV-1a (offset basis 0x6c62272e07bb014262b821756295c58d, prime
   2^88 + 0x13b), byte by byte: h ^= byte; h *= prime (mod 2^128). */
typedef struct {
  uint64_t hi, lo;
} aa_hash128_t;

void aa_hash128_init(aa_hash128_t *h);
void aa_hash128_update(aa_hash128_t *h, const void *data, size_t n);
/* 32 lowercase hex digits (hi then lo) and a NUL. */
void aa_hash128_hex(char out[33], const aa_hash128_t *h);

/* A coordinate or result value. Strings are NUL-terminated UTF-8. */
typedef enum { AA_VAL_NONE = 0, AA_VAL_INT, AA_VAL_DOUBLE, AA_VAL_STR } aa_val_kind_t;

typedef struct {
  aa_val_kind_t kind;
  int64_t i;
  double d;
  const char *s;
} aa_val_t;

/* Axis flag: the axis does not select the inputs (a recipe, an oracle
   path...), so it is left out of aa_cell_seed: cells differing only in it
   get the same inputs (and the oracle cache pays once for them). */
#define AA_AXIS_NOSEED 1u
/* Column flag: the column holds a timing in seconds; timing columns come
   last and are dropped from results.canon.csv. */
#define AA_COL_TIMING 1u

typedef struct aa_sweep_s aa_sweep_t;

/* One cell: a point of the grid. */
typedef struct {
  size_t index;             /* position among the kept cells, 0..ncells-1 (enumeration order) */
  size_t grid_index;        /* position in the unfiltered cartesian product */
  aa_hash128_t id;          /* content hash of all coordinates (see aa_cell_seed) */
  uint64_t seed;            /* aa_cell_seed(cell), computed once */
  size_t ncoords;           /* number of axes */
  const char *const *names; /* axis names, in declaration order */
  const aa_val_t *vals;     /* the cell's coordinate values, same order */
} aa_cell_t;

/* Building a sweep. Names are 1..63 characters of [A-Za-z0-9_.-], unique
   over axes and columns. Enumeration is row-major: the first declared axis
   varies slowest, the last fastest. Values are copied; an axis may not
   repeat a value (two cells would share an id and a seed). */
int aa_sweep_new(aa_sweep_t **out, aa_error_t *err);
void aa_sweep_free(aa_sweep_t *sw); /* NULL allowed */
int aa_sweep_axis_int(aa_sweep_t *sw, const char *name, const int64_t *vals, size_t n, unsigned flags,
                      aa_error_t *err);
int aa_sweep_axis_double(aa_sweep_t *sw, const char *name, const double *vals, size_t n, unsigned flags,
                         aa_error_t *err);
int aa_sweep_axis_str(aa_sweep_t *sw, const char *name, const char *const *vals, size_t n, unsigned flags,
                      aa_error_t *err);
/* Declare a result column (metric, label or timing) that eval may set. */
int aa_sweep_column(aa_sweep_t *sw, const char *name, unsigned flags, aa_error_t *err);

/* Return nonzero to keep the cell. Called once per point of the cartesian
   product, in enumeration order, with cell->index set to the index it
   will get when kept. */
typedef int (*aa_sweep_filter_fn)(const aa_cell_t *cell, void *ctx);

/* Enumerate the grid (filter may be NULL). After this the sweep is frozen:
   axes and columns can no longer be added. */
int aa_sweep_build(aa_sweep_t *sw, aa_sweep_filter_fn filter, void *ctx, aa_error_t *err);
size_t aa_sweep_ncells(const aa_sweep_t *sw);
const aa_cell_t *aa_sweep_cell(const aa_sweep_t *sw, size_t index); /* NULL when out of range */
/* Hash of the whole grid (column layout and every cell id in order). */
aa_hash128_t aa_sweep_grid_hash(const aa_sweep_t *sw);

/* Coordinates by name. The getters return dflt when the axis is absent or
   of another kind (aa_cell_double also converts an integer axis). */
int aa_cell_find(const aa_cell_t *cell, const char *name); /* position, or -1 */
int64_t aa_cell_int(const aa_cell_t *cell, const char *name, int64_t dflt);
double aa_cell_double(const aa_cell_t *cell, const char *name, double dflt);
const char *aa_cell_str(const aa_cell_t *cell, const char *name, const char *dflt);

/* Content hashes. Both are FNV-1a 128 over the coordinates sorted by name
   (strcmp order), each serialised as: the name's bytes, a 0 byte, a kind
   byte ('i', 'd' or 's'), then the value: an integer as 8 bytes little
   endian two's complement, a double as the 8 bytes little endian of its
   IEEE bit pattern, a string as its bytes and a 0 byte.
   cell->id covers every coordinate. aa_cell_seed covers the coordinates
   whose axis is not AA_AXIS_NOSEED and returns hi ^ lo of that hash: the
   seed is therefore independent of the axis declaration order, of the
   cell's index and of the NOSEED axes. Seed lib/rng.h streams from it,
   e.g. aa_rng_derive(&rng, aa_cell_seed(cell), tags, ntags). */
uint64_t aa_cell_seed(const aa_cell_t *cell);

/* Rows of one cell, filled by eval. */
typedef struct aa_sweep_rows_s aa_sweep_rows_t;

/* Start a new row (its coordinate columns are already set). */
int aa_sweep_row_new(aa_sweep_rows_t *rows);
/* Set a declared column of the current row. Errors (no row started, an
   unknown or coordinate column) are also remembered and fail the cell. */
int aa_sweep_set_int(aa_sweep_rows_t *rows, const char *col, int64_t v);
int aa_sweep_set_double(aa_sweep_rows_t *rows, const char *col, double v);
int aa_sweep_set_str(aa_sweep_rows_t *rows, const char *col, const char *v);
/* Where eval may write a message explaining a nonzero return. */
aa_error_t *aa_sweep_rows_error(aa_sweep_rows_t *rows);

typedef int (*aa_sweep_eval_fn)(const aa_cell_t *cell, aa_sweep_rows_t *out_rows, void *ctx);

/* Counters of a run, also passed to the progress callback. */
typedef struct {
  size_t total;   /* cells in this shard */
  size_t skipped; /* of which were already complete (resume) */
  size_t todo;    /* cells this run set out to do (total - skipped, or max_cells) */
  size_t done;    /* cells finished (and written) by this run so far */
  int complete;   /* at the end: every cell of the grid is in the folder and the results files were written */
  /* What opening this shard's journal cut off: the bytes after its last
     complete cell (a record torn by a kill, or junk) and how many lines
     they held (a last line without newline counts). 0 when none. */
  size_t discarded_bytes, discarded_lines;
} aa_sweep_progress_t;

/* Called once before the first cell and after each finished cell, never
   concurrently (the engine holds a lock), from a worker thread. */
typedef void (*aa_sweep_progress_fn)(const aa_sweep_progress_t *p, void *ctx);

/* One recipe a sweep evaluates, as meta.json lists it: its name, the hash
   of its canonical text (the results' recipe_hash column) and the text. */
typedef struct {
  const char *name, *hash, *text;
} aa_sweep_recipe_t;

/* What meta.json records of a sweep besides what the engine knows (the
   version, git hash, grid hash and cell count): the experiment, whether it
   ran its quick grid, how the cells' inputs are drawn, the command line and
   the recipes. Every field may be NULL / 0. */
typedef struct {
  const char *experiment;
  int quick;
  const char *seeds;
  int argc;
  char *const *argv;
  const aa_sweep_recipe_t *recipes;
  size_t nrecipes;
} aa_sweep_meta_t;

typedef struct {
  const char *out_dir; /* created (with its parents) if missing */
  int threads;         /* worker threads J >= 1; results never depend on J */
  size_t shard_index;  /* run the cells with index % shard_count == shard_index */
  size_t shard_count;  /* 0 or 1: all cells */
  int resume;          /* 1: skip complete cells; 0: fail if the folder holds finished cells of this shard */
  int sync;            /* 1 (default): fsync the journal after each cell */
  size_t max_cells;    /* stop after starting this many cells (0: no limit) */
  aa_sweep_progress_fn progress;
  void *progress_ctx;
  /* Provenance: when set, the run writes OUT/meta.json (aa_sweep_meta_stage)
     once its cells succeed, whether or not the grid is complete. */
  const aa_sweep_meta_t *meta;
} aa_sweep_opts_t;

/* threads 1, one shard, resume 0, sync 1, no limit, no progress. */
void aa_sweep_opts_init(aa_sweep_opts_t *opts);

/* Run the not yet complete cells of the shard on opts->threads threads,
   appending each to the journal; when the folder then holds every cell of
   the grid (from any journals in it), write the results files. A failing
   eval stops the sweep (cells already written stay) and its status is
   returned with the cell's coordinates in err. */
int aa_sweep_run(aa_sweep_progress_t *stats, const aa_sweep_t *sw, aa_sweep_eval_fn eval, void *ctx,
                 const aa_sweep_opts_t *opts, aa_error_t *err);

/* Lock the folder dir (which must exist) for a run: shared, after
   removing the temporaries of killed runs when no other run holds it (see
   "Folder lock and temporaries" above). *fd is the lock, for
   aa_sweep_unlock; -1 on failure. aa_sweep_run and aa_sweep_merge take it
   themselves; a front end takes it before it writes files of its own there. */
int aa_sweep_lock(int *fd, const char *dir, aa_error_t *err);
void aa_sweep_unlock(int fd); /* fd < 0: nothing */

/* Read every journal-*.txt of the folders in_dirs (they must all belong to
   one grid), and write the results files of the union into out_dir (which
   may be one of in_dirs). Fails with AA_ENOTFOUND, writing nothing, when a
   cell is missing. *ncells (optional) receives the number of cells. */
int aa_sweep_merge(size_t *ncells, const char *out_dir, const char *const *in_dirs, size_t n_in, aa_error_t *err);

/* ------------------------------------------------------------------------
   The result folder's protocol, in one place (lib/sweep/folder.c): the
   file names, the provenance file and the reader of the results.
   ------------------------------------------------------------------------ */
#define AA_SWEEP_RESULTS_CSV "results.csv"
#define AA_SWEEP_RESULTS_CANON "results.canon.csv"
#define AA_SWEEP_RESULTS_JSONL "results.jsonl"
#define AA_SWEEP_META_JSON "meta.json"
/* DIR/journal-I-of-N.txt, the journal of shard I of N. */
void aa_sweep_journal_path(char *buf, size_t cap, const char *dir, size_t shard, size_t nshards);

/* Stage DIR/meta.json into the file set fs (aa_fileset_commit renames it
   into place), so a front end commits it with its own files. Its keys, in
   order: experiment, quick, version, git, seeds (when given), grid_hash,
   cells, command, recipes [{name, hash, text}]. aa_sweep_run writes it
   itself when opts->meta is set. */
int aa_sweep_meta_stage(aa_fileset_t *fs, const char *dir, const aa_sweep_t *sw, const aa_sweep_meta_t *meta,
                        aa_error_t *err);
/* Copy IN/meta.json to OUT/meta.json when IN has one and the two are not
   the same file (a merge keeps the provenance of its first input). */
int aa_sweep_meta_copy(const char *out_dir, const char *in_dir, aa_error_t *err);

/* A results.csv as read back: the header's column names and the rows'
   fields as text (RFC 4180 quoting undone; '#' lines before the header are
   comments, the first kept in `comment`, as older table files carry their
   provenance there). */
typedef struct {
  char **f;
  size_t nf;
} aa_results_row_t;
typedef struct {
  char **hdr;
  size_t ncol;
  aa_results_row_t *rows;
  size_t nrows, cap;
  char comment[1024];
} aa_results_t;
/* Read a CSV file (AA_OK; AA_EIO / AA_ENOMEM with a message naming the file). */
int aa_results_read(aa_results_t *c, const char *path, aa_error_t *err);
/* Read DIR/results.csv. */
int aa_sweep_results_open(aa_results_t *c, const char *dir, aa_error_t *err);
void aa_results_free(aa_results_t *c);
int aa_results_col(const aa_results_t *c, const char *name);           /* index, or -1 */
const char *aa_results_cell(const aa_results_t *c, size_t r, int col); /* "" when absent */
double aa_results_num(const char *s);                                  /* NaN when empty or not a number */
/* The number in row r's column `name` (NaN when the column is absent or empty). */
double aa_results_value(const aa_results_t *c, size_t r, const char *name);

/* Format a one-line progress message such as
     "sweep: 40/120 cells (10 resumed), 12.0 cells/min, 2m30s left"
   from the counters and the seconds elapsed since the run started (the
   library reads no clock: the front end measures, and prints the line on
   stderr only when it is a terminal). Returns the snprintf length. */
int aa_sweep_progress_line(char *buf, size_t size, const aa_sweep_progress_t *p, double elapsed_seconds);

/* Sweeps spread over MPI ranks: lib/sweep/sweep-mpi.h, in a small library of its
   own that the attnacc command links, so libattnacc does not need MPI. */

/* ------------------------------------------------------------------------
   Oracle cache: a folder of files <32 hex key>.aaoc, one per oracle result.
   File: "AAORACLE" magic, u32 version (3), the 16-byte key, then for each
   output (o, lse, dq, dk, dv, dsinks) its relerr_bound and its three
   tensors (val, fp32, bf16: u32 ndim, u32 fmt, 3 x u64 shape, u8 present;
   val's doubles as raw words; fp32 and bf16 each a u8 coding, 0: the
   doubles, 1: the elements that differ from val rounded to nearest even at
   24 or 8 significant bits with an unbounded exponent, as a u64 count and
   (u64 index, u64 bits) pairs), then n_recomputed and n_uncertified (u64),
   and a trailing 128-bit checksum (xxHash64 rounds on 4 lanes) of
   everything before it. All integers and doubles little endian. Writes go through
   aa_file_write (a temporary unique per thread, renamed), so readers see
   a whole entry or none; an entry that is truncated, corrupt, of another
   version or whose key differs is treated as a miss.
   ------------------------------------------------------------------------ */

/* Key: FNV-1a 128 over the problem settings (shapes, scale, masks, bounds,
   the features beyond masks, a varlen batch's offsets, sinks, keep mask
   and scale), the four input tensors (shape, format tag, and the bits of
   every value through the checksum's 128-bit lane hash, whose digest FNV
   takes: 10x faster than FNV over the values) and the oracle settings that change the result (path, precision
   and target; not the thread count, nor the device: the GPU's certified
   roundings equal the CPU's). */
int aa_oracle_cache_key(aa_hash128_t *key, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                        const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, aa_error_t *err);
/* AA_OK and a result to free with aa_oracle_result_free on a hit;
   AA_ENOTFOUND on a miss (absent, corrupt or mismatched entry). */
int aa_oracle_cache_get(aa_oracle_result_t *out, const char *dir, const aa_hash128_t *key, aa_error_t *err);
/* Store res under key (atomic: temp file + rename). Creates dir if missing. */
int aa_oracle_cache_put(const char *dir, const aa_hash128_t *key, const aa_oracle_result_t *res, aa_error_t *err);
/* aa_oracle_run through the cache: a hit whose shapes match pb is returned
   as is, otherwise the oracle runs and its result is stored. *hit
   (optional) tells which. dir NULL means no cache. The cache is best
   effort: a failed put does not fail the call. */
int aa_oracle_cached_run(aa_oracle_result_t *out, int *hit, const char *dir, const aa_problem_t *pb,
                         const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO,
                         const aa_oracle_opts_t *opts, aa_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
