/* attnacc: which GPU a thread's GPU work runs on: one device per MPI rank of a node, then per sweep worker. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>

#include "common.h"

/* A thread's slot, set by whoever spreads work over threads (the sweep's workers); -1 for none. */
static _Thread_local int thread_slot = -1;

int aa_gpu_pick(int ndev, int local_rank, int local_size, int slot) {
  if (ndev < 1) return 0;
  if (local_rank < 0) local_rank = 0;
  if (local_size < 1) local_size = 1;
  if (slot < 0) slot = 0;
  long long i = (long long)local_rank + (long long)slot * local_size;
  return (int)(i % ndev);
}

void aa_gpu_thread_slot(int slot) {
  thread_slot = slot;
}

/* The first of the environment variables names that holds a number >= 0, else def. */
static int env_int(const char *const *names, int def) {
  for (; *names != NULL; names++) {
    const char *v = getenv(*names);
    long x;
    if (v != NULL && aa_parse_long(&x, v) && x >= 0 && x < 1 << 20) return (int)x;
  }
  return def;
}

int aa_gpu_index(int ndev) {
  static const char *const rank[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
  static const char *const size[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE", NULL};
  return aa_gpu_pick(ndev, env_int(rank, 0), env_int(size, 1), thread_slot);
}
