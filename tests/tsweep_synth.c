/* attnacc: the synthetic sweep shared by the sweep tests (grid, filter, a deterministic eval with a tunable delay).
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "rng.h"
#include "sweep.h"
#include "tsweep_synth.h"

const char *const tsw_recipes[3] = {"ref", "fast,x", "q\"uote back\\slash"};
const int64_t tsw_ns[4] = {16, 32, 64, 128};
const char *const tsw_dists[2] = {"normal", "uniform"};
const double tsw_sigmas[3] = {0.5, 1.0, 1e-3};
const char *const tsw_tensors[4] = {"o", "dq", "dk", "dv"};

int tsw_keep(int64_t n, double sigma) {
  return !(n == 128 && sigma == 1e-3);
}

static int filter(const aa_cell_t *cell, void *ctx) {
  (void)ctx;
  return tsw_keep(aa_cell_int(cell, "n", -1), aa_cell_double(cell, "sigma", NAN));
}

int tsw_grid(aa_sweep_t **out, aa_error_t *err) {
  aa_sweep_t *sw;
  int st = aa_sweep_new(&sw, err);
  if (st) return st;
  if ((st = aa_sweep_axis_str(sw, "recipe", tsw_recipes, 3, AA_AXIS_NOSEED, err)) ||
      (st = aa_sweep_axis_int(sw, "n", tsw_ns, 4, 0, err)) ||
      (st = aa_sweep_axis_str(sw, "dist", tsw_dists, 2, 0, err)) ||
      (st = aa_sweep_axis_double(sw, "sigma", tsw_sigmas, 3, 0, err)) ||
      (st = aa_sweep_column(sw, "tensor", 0, err)) || (st = aa_sweep_column(sw, "seconds", AA_COL_TIMING, err)) ||
      (st = aa_sweep_column(sw, "metric", 0, err)) || (st = aa_sweep_column(sw, "count", 0, err)) ||
      (st = aa_sweep_column(sw, "note", 0, err)) || (st = aa_sweep_build(sw, filter, NULL, err))) {
    aa_sweep_free(sw);
    return st;
  }
  *out = sw;
  return AA_OK;
}

/* The synthetic result of one row: drawn from a stream seeded by the cell
   seed and the tensor number, scaled by the recipe number, so that cells
   differing only in the recipe share the draw but not the metric. */
void tsw_expect(double *metric, int64_t *count, const char **note, uint64_t seed, int64_t n, const char *recipe,
                double sigma, int t) {
  aa_pcg64_t rng;
  uint64_t tag = (uint64_t)t;
  aa_rng_derive(&rng, seed, &tag, 1);
  int r = 0;
  while (r < 2 && strcmp(tsw_recipes[r], recipe) != 0)
    r++;
  *metric = aa_pcg64_uniform(&rng) * sigma * (double)n * (r + 1);
  *count = (int64_t)(aa_pcg64_next(&rng) % 1000);
  *note = NULL;
  if (t == 1 && n == 16) *note = "tab\there, \"quoted\"";
  if (t == 2 && n == 32) *metric = sigma == 0.5 ? NAN : sigma == 1.0 ? INFINITY : -INFINITY;
}

static unsigned long tsw_clock_ticks;

int tsw_eval(const aa_cell_t *cell, aa_sweep_rows_t *rows, void *ctx) {
  const tsw_ctx_t *c = ctx;
  if (c != NULL && c->fail_index >= 0 && (size_t)c->fail_index == cell->index) {
    aa_error_set(aa_sweep_rows_error(rows), AA_ERANGE, "synthetic failure");
    return AA_ERANGE;
  }
  if (c != NULL && c->delay_us > 0) {
    struct timespec ts = {c->delay_us / 1000000, (long)(c->delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  int64_t n = aa_cell_int(cell, "n", -1);
  const char *recipe = aa_cell_str(cell, "recipe", "?");
  double sigma = aa_cell_double(cell, "sigma", NAN);
  for (int t = 0; t < 4; t++) {
    double metric;
    int64_t count;
    const char *note;
    tsw_expect(&metric, &count, &note, aa_cell_seed(cell), n, recipe, sigma, t);
    int st = aa_sweep_row_new(rows);
    if (!st) st = aa_sweep_set_str(rows, "tensor", tsw_tensors[t]);
    if (!st) st = aa_sweep_set_double(rows, "metric", metric);
    if (!st) st = aa_sweep_set_int(rows, "count", count);
    if (!st && note != NULL) st = aa_sweep_set_str(rows, "note", note);
    /* A stand-in timing that differs from run to run. */
    if (!st)
      st = aa_sweep_set_double(rows, "seconds",
                               1e-3 * (double)__atomic_add_fetch(&tsw_clock_ticks, 1, __ATOMIC_RELAXED));
    if (st) return st;
  }
  return AA_OK;
}
