/* attnacc: the synthetic sweep run with aa_sweep_run_mpi; each rank writes its own folder (no shared files), rank 0
 * merges. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "sweep/sweep-mpi.h"
#include "tests.h"
#include "tsweep_synth.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 2) {
    if (rank == 0) printf("usage: tsweep_mpi OUT_DIR\n");
    MPI_Finalize();
    return 2;
  }
  aa_sweep_t *sw;
  aa_error_t err = {{0}};
  int rc = 0;
  if (tsw_grid(&sw, &err) != AA_OK) {
    printf("FAIL tsweep_mpi: grid: %s\n", err.msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/rank%d", argv[1], rank);
  aa_sweep_opts_t o;
  aa_sweep_opts_init(&o);
  o.out_dir = dir;
  o.threads = 2;
  tsw_ctx_t ctx = {1000, -1};
  aa_sweep_progress_t pr;
  int st = aa_sweep_run_mpi(&pr, sw, tsw_eval, &ctx, &o, &err);
  if (st != AA_OK) {
    printf("FAIL tsweep_mpi: rank %d of %d: status %d: %s\n", rank, size, st, err.msg);
    rc = 1;
  } else if (pr.total != (TSW_NCELLS - (size_t)rank + (size_t)size - 1) / (size_t)size || pr.done != pr.total) {
    printf("FAIL tsweep_mpi: rank %d of %d ran %zu of %zu cells\n", rank, size, pr.done, pr.total);
    rc = 1;
  } else if (rank == 0 && !pr.complete) {
    printf("FAIL tsweep_mpi: rank 0 did not merge\n");
    rc = 1;
  }
  aa_sweep_free(sw);
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && worst == 0) printf("tsweep_mpi: %d rank(s) ok\n", size);
  MPI_Finalize();
  return worst;
}
