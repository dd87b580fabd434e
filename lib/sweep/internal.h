/* attnacc: internal declarations shared by the sources of the sweep module. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_SWEEP_INTERNAL_H
#define AA_SWEEP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sweep.h"

#define AA_SWEEP_NAME_MAX 63

typedef struct {
  char *name;
  aa_val_kind_t kind;
  unsigned flags;
  size_t n;
  aa_val_t *vals; /* strings owned */
} aa_sweep_axis_t;

typedef struct {
  char *name;
  unsigned flags;
} aa_sweep_col_t;

struct aa_sweep_s {
  size_t naxes, ncolsdecl;
  aa_sweep_axis_t *axes;
  aa_sweep_col_t *colsdecl;
  int built;
  const char **axis_names; /* naxes */
  size_t ncells;
  aa_cell_t *cells;
  aa_val_t *cellvals; /* ncells * naxes, strings point into axes */
  /* Final column layout: coordinates, metrics, timings. */
  size_t ncols;
  const char **colnames;
  char *colkind;   /* 'c', 'm' or 't' */
  size_t *declpos; /* declared column -> final position */
  aa_hash128_t grid;
  char *header; /* journal header line, with its newline */
};

struct aa_sweep_rows_s {
  const aa_sweep_t *sw;
  const aa_cell_t *cell;
  size_t nrows, cap;
  aa_val_t *vals; /* nrows * sw->ncols; metric strings owned */
  int status;
  aa_error_t err;
};

int aa__sweep_name_ok(const char *name);
void aa__rows_init(aa_sweep_rows_t *rows, const aa_sweep_t *sw);
void aa__rows_reset(aa_sweep_rows_t *rows, const aa_cell_t *cell);
void aa__rows_free(aa_sweep_rows_t *rows);

/* Shortest decimal that reads back to v ("nan", "inf", "-inf" otherwise). */
void aa__fmt_double(char out[40], double v);

/* Append the journal record (row lines + trailer) of a finished cell. */
void aa__journal_record(aa_buf_t *b, const aa_sweep_rows_t *rows);

/* One complete cell found in a journal. */
typedef struct {
  size_t index;
  aa_hash128_t id;
  size_t nrows;
  char *text; /* its row lines (each ends in '\n'), owned */
  size_t len;
} aa_sweep_rec_t;

typedef struct {
  char *header; /* header line of the journals (with newline) or NULL */
  aa_hash128_t grid;
  size_t ncells, ncols;
  char **colnames;
  char *colkind;
  size_t nrecs, cap;
  aa_sweep_rec_t *recs;
} aa_sweep_set_t;

/* Parse a journal's bytes into set (header must match set->header when set).
   *valid_end receives the offset just after the last complete record (or
   the header). */
int aa__journal_parse(aa_sweep_set_t *set, const char *data, size_t len, size_t *valid_end, const char *path,
                      aa_error_t *err);
/* Read every journal-*.txt of dir into set. */
int aa__journal_load_dir(aa_sweep_set_t *set, const char *dir, aa_error_t *err);
void aa__set_free(aa_sweep_set_t *set);
/* Sort by index, drop duplicates; AA_ENOTFOUND when an index is missing. */
int aa__set_finish(aa_sweep_set_t *set, aa_error_t *err);
/* Write results.csv, results.jsonl, results.canon.csv of a finished set. */
int aa__write_results(const char *dir, const aa_sweep_set_t *set, aa_error_t *err);
int aa__parse_header(aa_sweep_set_t *set, const char *line, size_t len);

#endif
