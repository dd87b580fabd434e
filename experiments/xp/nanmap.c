/* attnacc: the `nanmap` experiment: where each recipe's outputs turn NaN, Inf or overflow, over input scale and
 * length. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xp/xp.h"

static const char *const first_cols[] = {"first_site", "first_h", "first_i", "first_j",   "first_value",
                                         "first_a",    "first_b", "first_c", "first_text"};

int xp_first_columns(aa_sweep_t *sw, aa_error_t *err) {
  return xp_columns(sw, first_cols, sizeof first_cols / sizeof first_cols[0], err);
}

void xp_first_set(aa_sweep_rows_t *rows, const aa_attn_first_t *f) {
  char text[400];
  if (!f->found) return;
  aa_attn_first_format(text, sizeof text, f);
  aa_sweep_set_str(rows, "first_site", aa_attn_first_site_name(f->site));
  aa_sweep_set_int(rows, "first_h", (int64_t)f->h);
  aa_sweep_set_int(rows, "first_i", (int64_t)f->i);
  aa_sweep_set_int(rows, "first_j", (int64_t)f->j);
  aa_sweep_set_double(rows, "first_value", f->value);
  aa_sweep_set_double(rows, "first_a", f->a);
  aa_sweep_set_double(rows, "first_b", f->b);
  aa_sweep_set_double(rows, "first_c", f->c);
  aa_sweep_set_str(rows, "first_text", text);
}

int xp_cell_masks(aa_problem_t *pb, uint8_t **mask, const aa_cell_t *cell, aa_error_t *err) {
  int64_t pad = aa_cell_int(cell, "key_pad", 0);
  *mask = NULL;
  if (pad < 0 || (size_t)pad >= pb->n_k)
    return aa_error_set(err, AA_EINVAL, "cell's key_pad %lld leaves no key of %zu", (long long)pad, pb->n_k);
  pb->key_pad = (size_t)pad;
  if (aa_cell_int(cell, "empty_row", 0) == 0) return AA_OK;
  if ((*mask = malloc(pb->n_q * pb->n_k)) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  memset(*mask, 1, pb->n_q * pb->n_k);
  memset(*mask, 0, pb->n_k); /* row 0 attends to nothing: softmax over no key */
  pb->mask = *mask;
  pb->mask_hstride = 0;
  return AA_OK;
}

/* --dists and --logit-offsets: axes only when given, so the default grid stays as it was. */
static int nanmap_extra_axes(aa_sweep_t *sw, const xp_opts_t *o, aa_error_t *err) {
  const char *names[AA_DIST_COUNT];
  char buf[256];
  double offs[16];
  size_t nd = 0, no = 0;
  int rc;
  if (xp_opt(o, "dists") != NULL) {
    if (xp_opt_strs(names, &nd, AA_DIST_COUNT, buf, sizeof buf, o, "dists", NULL)) return AA_EINVAL;
    for (size_t i = 0; i < nd; i++)
      if (aa_layout_dist_from_name(names[i]) < 0)
        return aa_error_set(err, AA_EINVAL, "--dists: '%s' is not a distribution of lib/layout.h", names[i]);
    if ((rc = aa_sweep_axis_str(sw, "dist", names, nd, 0, err)) != AA_OK) return rc;
  }
  if (xp_opt(o, "logit-offsets") == NULL) return AA_OK;
  if (xp_opt_doubles(offs, &no, 16, o, "logit-offsets", NULL, -0x1p40, 0x1p40, 0)) return AA_EINVAL;
  return aa_sweep_axis_double(sw, "logit_offset", offs, no, 0, err);
}

/* --sigma S[,S...]: the map's axis is log2_sigma, integers when every S is a power of two (the grid, and its hash,
   as before); otherwise the axis holds log2 S as doubles, so that the all-133120 input of pytorch 121558 (2^17 +
   2^11: exp2 of its log2 rounds back to 133120 in BF16) has a column. *frac = 1 then. 0, or 2 after a message. */
static int log2_sigmas(int64_t *sig, double *lsig, size_t *n, int *frac, const xp_opts_t *o) {
  double v[64];
  size_t k;
  *frac = 0;
  if (xp_opt(o, "sigma") == NULL) return 0;
  if (xp_opt_doubles(v, &k, 64, o, "sigma", "", 0, 1e308, 1)) return 2;
  for (size_t i = 0; i < k; i++) {
    int e;
    *frac |= frexp(v[i], &e) != 0.5;
    sig[i] = e - 1;
    lsig[i] = log2(v[i]);
  }
  *n = k;
  return 0;
}

/* Inputs are sigma * N(0,1) rounded to BF16, sigma = 2^log2_sigma. Scores
   S = q.k / sqrt(d) grow like sigma^2 and the gradients dQ, dK like
   sigma^3 (dS = P (dP - D) with dP ~ sigma^2, times K ~ sigma), so FP32/BF16
   (largest finite 2^128) overflow the gradients near sigma = 2^42 and the
   scores near 2^62; tiny sigma underflows dQ (~sigma^3) below 2^-149 near
   sigma = 2^-50. The grid spans both ends with a dense middle where the
   softmax turns one-hot (sigma 4..256). The oracle is exact whatever the
   scale, so rel_l2 stays meaningful where the recipes fail (its certified
   bound and uncertified count are in the rows). Small d and n keep the
   oracle cheap: near one-hot rows fall back to MPFR for most elements. */
/* The map's axes (--key-pads, --n-q, --empty-row, --log2-sigmas, --d): only when given, as above. An integer list
   option as an axis; *given = 0 when the option is absent. */
static int nanmap_int_axis(aa_sweep_t *sw, const xp_opts_t *o, const char *opt, const char *axis, int64_t lo,
                           int64_t hi, aa_error_t *err) {
  int64_t v[32];
  size_t k = 0;
  if (xp_opt(o, opt) == NULL) return AA_OK;
  if (xp_opt_ints(v, &k, 32, o, opt, NULL, lo, hi)) return AA_EINVAL;
  return aa_sweep_axis_int(sw, axis, v, k, 0, err);
}

static int nanmap_map_axes(aa_sweep_t *sw, const xp_opts_t *o, aa_error_t *err) {
  int rc;
  if ((rc = nanmap_int_axis(sw, o, "key-pads", "key_pad", 0, 1 << 20, err)) ||
      (rc = nanmap_int_axis(sw, o, "n-q", "n_q", 0, 1 << 20, err)))
    return rc;
  return nanmap_int_axis(sw, o, "empty-row", "empty_row", 0, 1, err);
}

/* The first-offence columns (xp_first_columns) change the grid's hash: only with --first or a map option. */
static int nanmap_wants_first(const xp_opts_t *o) {
  static const char *const opts[] = {"first", "key-pads", "n-q", "empty-row", "log2-sigmas"};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    if (xp_opt(o, opts[i]) != NULL) return 1;
  return 0;
}

static int nanmap_declare(aa_sweep_t *sw, const xp_opts_t *o, xp_ctx_t *ctx, aa_error_t *err) {
  static const int64_t ns_full[] = {32, 128, 512};
  static const int64_t ns_quick[] = {32, 128};
  static const int64_t sig_full[] = {-56, -48, -40, -24, -8, 0, 2, 4, 6, 8, 12, 16, 24, 32, 40, 44, 48, 56, 62, 64};
  static const int64_t sig_quick[] = {-56, -40, 0, 4, 8, 16, 32, 44, 56, 64};
  int64_t sig[64];
  double lsig[64];
  int frac;
  size_t seeds = 1, heads = 1,
         nsig = o->quick ? sizeof sig_quick / sizeof sig_quick[0] : sizeof sig_full / sizeof sig_full[0];
  int rc;
  ctx->d = 32;
  memcpy(sig, o->quick ? sig_quick : sig_full, nsig * sizeof *sig);
  if (xp_opt_size(&seeds, o, "seeds", 1, 1000000) || xp_opt_size(&heads, o, "heads", 1, 4096) ||
      log2_sigmas(sig, lsig, &nsig, &frac, o))
    return AA_EINVAL;
  if (xp_opt(o, "log2-sigmas") != NULL && xp_opt_ints(sig, &nsig, 64, o, "log2-sigmas", NULL, -140, 140))
    return AA_EINVAL;
  if (xp_opt(o, "log2-sigmas") != NULL) frac = 0; /* integers replacing --sigma's */
  if ((rc = nanmap_extra_axes(sw, o, err)) != AA_OK) return rc;
  if ((rc = nanmap_map_axes(sw, o, err)) != AA_OK) return rc;
  ctx->first_cols = nanmap_wants_first(o);
  if ((rc = xp_recipes_from_opts(ctx, o, err)) ||
      (rc = xp_axis_n(sw, o, o->quick ? ns_quick : ns_full, o->quick ? 2 : 3, err)) ||
      (rc = xp_axis_masks(sw, o, err)) ||
      (rc = frac ? aa_sweep_axis_double(sw, "log2_sigma", lsig, nsig, 0, err)
                 : aa_sweep_axis_int(sw, "log2_sigma", sig, nsig, 0, err)) ||
      (rc = xp_axis_dims(sw, o, 32, heads, err)) ||
      /* an axis only when given: the map's folders without it keep their grid hash */
      (xp_opt(o, "heads") && (rc = xp_axis_fixed_int(sw, "heads", (int64_t)heads, err))) ||
      (rc = xp_axis_seeds(sw, seeds, err)) || (rc = xp_axis_recipes(sw, ctx, err)) ||
      (rc = xp_attn_columns(sw, err)) || (ctx->first_cols && (rc = xp_first_columns(sw, err))))
    return rc;
  return aa_sweep_build(sw, NULL, NULL, err);
}

static const cli_opt_t params[] = {
    XP_OPTS_ATTN,
    {"heads", "H", "1", "query heads per cell"},
    XP_OPTS_SHAPE,
    {"sigma", "S[,S...]", "2^-56..2^64",
     "input scales replacing the map's (powers of two, or any: the log2_sigma axis then holds doubles)"},
    XP_OPTS_ORACLE,
    {"dists", "NAME[,NAME...]", "normal",
     "input distributions as an axis (lib/layout.h: normal, constant, near-constant, huge-keys, massive, ...)"},
    {"logit-offsets", "C[,C...]", "0", "constants added to every score as an axis (problem.h): LSE far from 0"},
    {"key-pads", "P[,P...]", "0", "padded keys at the end of every sequence as an axis (problem.h key_pad)"},
    {"n-q", "M[,M...]", "n", "query rows as an axis (0: n_q = n; 1: decode)"},
    {"empty-row", "0|1|0,1", "0", "1: query row 0 of every head masked out entirely (a boolean mask)"},
    {"log2-sigmas", "E[,E...]", "experiment's", "input scales 2^E replacing the experiment's"},
    {"first", NULL, NULL,
     "columns first_*: where each output's first NaN/Inf was created (on with --key-pads, --n-q, --empty-row, "
     "--log2-sigmas)"}};

const xp_experiment_t xp_nanmap = {
    .name = "nanmap",
    .summary = "NaN/Inf/overflow regions of each recipe over input scale sigma and length, dense and causal",
    .description = "Cells: n (32, 128, 512; --quick: 32, 128) x mask x log2_sigma (-56..64, 20 values;\n"
                   "--quick: 10; or --sigma) x d (32; or --d) (x heads, kv_heads with --heads, --kv-heads)\n"
                   "x seed; inputs sigma * N(0,1) in BF16 from aa_cell_seed; the\n"
                   "rows and columns of table4 (ref_max_abs and ref_overflow say where the exact values\n"
                   "leave the format; error holds a recipe's refusal). --dists and --logit-offsets add the\n"
                   "axes dist and logit_offset (magnitudes where kernels give NaN: ties, huge keys, LSE\n"
                   "below -88.7 or above 88.7).",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .declare = nanmap_declare,
    .eval = xp_attn_eval,
    .finish = xp_attn_finish,
};
