/* attnacc: the `table4` experiment: the paper's accuracy grid (seed 003, REFERENCES section 2) over every backward
 * recipe. */
#include "experiments.h"

/* REFERENCES section 2, "benchmark grid": BF16, head dim 128, lengths
   1024..32768 (six), dense and causal, forward (o) and backward (dq, dk,
   dv). The paper runs 16 heads with the batch varied so that tokens stay
   fixed; one head per cell with more seeds measures the same per-element
   error distribution at a fraction of the oracle time (--heads restores
   more heads). --quick stops at 4096 so that the whole grid runs in a few
   minutes on two cores (the oracle at 4096 takes about 7 s unloaded). */
int xp_table4_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const int64_t ns[] = {1024, 2048, 4096, 8192, 16384, 32768};
  int64_t heads = (int64_t)(o->heads ? o->heads : 1), d = 128;
  int rc;
  ctx->d = 128;
  /* Axis order: length slowest, so that a sweep fills the short lengths of
     every recipe first and the table grows left to right. */
  if ((rc = xp_axis_n(sw, o, ns, o->quick ? 3 : 6, err)) || (rc = xp_axis_masks(sw, o, err)) ||
      (rc = aa_sweep_axis_int(sw, "d", &d, 1, 0, err)) || (rc = aa_sweep_axis_int(sw, "heads", &heads, 1, 0, err)) ||
      (rc = xp_axis_seeds(sw, o->seeds ? o->seeds : 1, err)) || (rc = xp_axis_recipes(sw, ctx, err)) ||
      (rc = xp_attn_columns(sw, err)))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}
