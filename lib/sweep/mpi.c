/* attnacc: sweeps spread over MPI ranks: each rank runs its shard, rank 0 gathers the journals and merges. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sweep-mpi.h"

#define TAG_LEN 7101
#define TAG_DATA 7102
#define CHUNK ((size_t)1 << 20) /* pieces of 1 MiB: int counts, and rank 0 can always drain them */

static int agree(int st) {
  int worst = st;
  MPI_Allreduce(&st, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

int aa_sweep_run_mpi(aa_sweep_progress_t *stats, const aa_sweep_t *sw, aa_sweep_eval_fn eval, void *ctx,
                     const aa_sweep_opts_t *opts, aa_error_t *err) {
  int rank = 0, size = 1, init = 0;
  MPI_Initialized(&init);
  if (!init) return aa_error_set(err, AA_EINVAL, "sweep: MPI is not initialised");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (opts == NULL || opts->out_dir == NULL) return aa_error_set(err, AA_EINVAL, "sweep: opts->out_dir is required");
  aa_sweep_opts_t o = *opts;
  o.shard_index = (size_t)rank;
  o.shard_count = (size_t)size;
  if (rank != 0) o.meta = NULL; /* one provenance file, from rank 0 */
  int st = aa_sweep_run(stats, sw, eval, ctx, &o, err);
  int worst = agree(st);
  if (worst != AA_OK) {
    if (st == AA_OK) aa_error_set(err, worst, "sweep: another rank failed (%s)", aa_status_str(worst));
    return worst;
  }
  if (size == 1) return AA_OK;

  /* Ship every rank's journal to rank 0 (folders need not be shared). */
  char path[4096];
  if (rank != 0) {
    char *data = NULL;
    size_t len = 0;
    aa_sweep_journal_path(path, sizeof path, opts->out_dir, (size_t)rank, (size_t)size);
    uint64_t n = aa_file_read(&data, &len, path, err) == AA_OK ? (uint64_t)len : UINT64_MAX;
    MPI_Send(&n, 1, MPI_UINT64_T, 0, TAG_LEN, MPI_COMM_WORLD);
    for (size_t off = 0; n != UINT64_MAX && off < len; off += CHUNK) {
      size_t piece = len - off < CHUNK ? len - off : CHUNK;
      MPI_Send(data + off, (int)piece, MPI_CHAR, 0, TAG_DATA, MPI_COMM_WORLD);
    }
    free(data);
    st = n == UINT64_MAX ? AA_EIO : AA_OK;
  } else {
    for (int r = 1; r < size; r++) {
      uint64_t n;
      MPI_Recv(&n, 1, MPI_UINT64_T, r, TAG_LEN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (n == UINT64_MAX) {
        if (st == AA_OK) st = aa_error_set(err, AA_EIO, "sweep: rank %d could not read its journal", r);
        continue;
      }
      char *data = n < SIZE_MAX ? malloc(n > 0 ? (size_t)n : 1) : NULL;
      char *scratch = data == NULL ? malloc(CHUNK) : NULL;
      for (uint64_t off = 0; off < n; off += CHUNK) {
        size_t piece = n - off < CHUNK ? (size_t)(n - off) : CHUNK;
        /* Without memory for the journal, still drain the sender so no rank blocks. */
        MPI_Recv(data != NULL ? data + off : scratch, (int)piece, MPI_CHAR, r, TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
      }
      free(scratch);
      if (data == NULL) {
        if (st == AA_OK) st = aa_error_set(err, AA_ENOMEM, "sweep: out of memory for rank %d's journal", r);
        continue;
      }
      aa_sweep_journal_path(path, sizeof path, opts->out_dir, (size_t)r, (size_t)size);
      /* On a shared folder the file is already there, byte for byte. */
      char *have = NULL;
      size_t hl = 0;
      int same = aa_file_read(&have, &hl, path, NULL) == AA_OK && hl == n && memcmp(have, data, hl) == 0;
      free(have);
      if (!same && st == AA_OK) st = aa_file_write(path, data, (size_t)n, err);
      free(data);
    }
    size_t ncells = 0;
    const char *dirs[1] = {opts->out_dir};
    if (st == AA_OK) st = aa_sweep_merge(&ncells, opts->out_dir, dirs, 1, err);
    if (st == AA_OK && stats != NULL) stats->complete = 1;
  }
  /* Every rank returns rank 0's verdict. */
  MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (st != AA_OK && rank != 0) aa_error_set(err, st, "sweep: rank 0 could not merge (%s)", aa_status_str(st));
  return st;
}
