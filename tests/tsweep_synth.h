/* attnacc: declarations of the synthetic sweep shared by the sweep tests. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_TSWEEP_SYNTH_H
#define AA_TSWEEP_SYNTH_H

#include "sweep.h"

typedef struct {
  long delay_us;   /* sleep per cell, to make killing realistic */
  long fail_index; /* cell index whose eval fails, or -1 */
} tsw_ctx_t;

extern const char *const tsw_recipes[3];
extern const int64_t tsw_ns[4];
extern const char *const tsw_dists[2];
extern const double tsw_sigmas[3];
extern const char *const tsw_tensors[4];

#define TSW_NCELLS 66 /* 3 * 4 * 2 * 3 = 72 minus the 3 * 2 cells with n = 128 and sigma = 1e-3 */

int tsw_keep(int64_t n, double sigma);
int tsw_grid(aa_sweep_t **out, aa_error_t *err);
void tsw_expect(double *metric, int64_t *count, const char **note, uint64_t seed, int64_t n, const char *recipe,
                double sigma, int t);
int tsw_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *ctx);

#endif
