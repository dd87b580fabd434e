/* attnacc: sweeps spread over MPI ranks (built only with MPI; linked by the attnacc command, not by libattnacc). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_SWEEP_SWEEP_MPI_H
#define AA_SWEEP_SWEEP_MPI_H

#include "sweep.h"

/* Rank r of size s runs shard r of s (opts->shard_* are ignored) into
   opts->out_dir; the journals of the other ranks are sent to rank 0, which
   writes them into its out_dir and merges. Collective over MPI_COMM_WORLD;
   MPI must be initialised by the caller. Every rank returns the same status. */
int aa_sweep_run_mpi(aa_sweep_progress_t *stats, const aa_sweep_t *sw, aa_sweep_eval_fn eval, void *ctx,
                     const aa_sweep_opts_t *opts, aa_error_t *err);

#endif
