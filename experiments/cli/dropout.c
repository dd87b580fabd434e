/* attnacc: dropout options of the run command: mask draws, forward/backward mismatch, keep rates, E[O] bias. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "cli/dropout.h"

int dropout_cli_setup(dropout_cli_t *dc, const char *cmd, const char *p_s, const char *scheme_s, const char *seed_s,
                      const char *seeds_s, uint64_t default_seed, const aa_dropout_t *base) {
  aa_error_t err;
  size_t k = 32;
  memset(dc, 0, sizeof *dc);
  if (base != NULL)
    dc->d = *base;
  else
    aa_dropout_default(&dc->d);
  if (p_s == NULL) {
    if (scheme_s != NULL || seed_s != NULL || seeds_s != NULL) {
      cli_error(cmd, "--dropout-scheme, --dropout-seed and --dropout-seeds need --dropout P");
      return 2;
    }
    return 0;
  }
  if (cli_double(&dc->d.p, cmd, "dropout", p_s, 0, 1, 0)) return 2;
  if (dc->d.p >= 1) {
    cli_error(cmd, "--dropout: %s is not below 1", p_s);
    return 2;
  }
  if (scheme_s != NULL) {
    if (aa_dropout_set(&dc->d, "scheme", scheme_s, &err) != AA_OK || dc->d.scheme == AA_DROPOUT_NONE) {
      cli_error(cmd, "--dropout-scheme: '%s' is not tile-seeded, position-keyed or u8-threshold", scheme_s);
      return 2;
    }
  } else if (dc->d.scheme == AA_DROPOUT_NONE)
    dc->d.scheme = AA_DROPOUT_POSITION_KEYED;
  dc->d.seed = default_seed;
  if (seed_s != NULL && cli_u64(&dc->d.seed, cmd, "dropout-seed", seed_s)) return 2;
  if (seeds_s != NULL && cli_size(&k, cmd, "dropout-seeds", seeds_s, 1, 100000)) return 2;
  dc->nseeds = (unsigned)k;
  dc->on = 1;
  return 0;
}

int dropout_cli_draw(dropout_cli_t *dc, aa_problem_t *pb, aa_error_t *err) {
  int rc;
  size_t n;
  if (!dc->on) return AA_OK;
  if (aa_size_mul(&n, pb->heads, pb->n_q) != AA_OK || aa_size_mul(&n, n, pb->n_k) != AA_OK)
    return aa_error_set(err, AA_ENOMEM, "dropout: mask too large");
  dc->elements = n;
  dc->fwd = malloc(n ? n : 1);
  dc->bwd = malloc(n ? n : 1);
  if (dc->fwd == NULL || dc->bwd == NULL) return aa_error_set(err, AA_ENOMEM, "dropout: out of memory");
  if ((rc = aa_dropout_mask_fwd(dc->fwd, &dc->keep_scale, &dc->d, pb->heads, pb->n_q, pb->n_k, err)) != AA_OK ||
      (rc = aa_dropout_mask_bwd(dc->bwd, NULL, &dc->d, pb->heads, pb->n_q, pb->n_k, err)) != AA_OK)
    return rc;
  aa_dropout_fwd_tiles(&dc->fwd_tq, &dc->fwd_tk, &dc->d, pb->n_q, pb->n_k);
  aa_dropout_bwd_tiles(&dc->bwd_tq, &dc->bwd_tk, &dc->d, pb->n_q, pb->n_k);
  dc->mismatch_count = aa_dropout_mismatch_count(dc->fwd, dc->bwd, n);
  dc->mismatch = aa_dropout_mismatch(dc->fwd, dc->bwd, n);
  dc->keep_rate = aa_dropout_keep_rate(dc->fwd, n);
  dc->expected_keep = aa_dropout_expected_keep(&dc->d);
  dc->implied_bias = aa_dropout_implied_bias(&dc->d);
  if ((rc = aa_dropout_bias_estimate(&dc->bias_mean, &dc->bias_hw, &dc->d, pb->heads, pb->n_q, pb->n_k, dc->nseeds,
                                     err)) != AA_OK)
    return rc;
  pb->keep = dc->fwd;
  pb->keep_scale = dc->keep_scale;
  return AA_OK;
}

static json_t *pair(size_t a, size_t b) {
  json_t *p = json_array();
  if (aa_json_push(p, aa_json_u64(a)) | aa_json_push(p, aa_json_u64(b))) {
    json_decref(p);
    return NULL;
  }
  return p;
}

json_t *dropout_cli_json(const dropout_cli_t *dc) {
  json_t *j = json_object();
  int bad = aa_json_set(j, "scheme", aa_json_str(aa_dropout_scheme_name(dc->d.scheme)));
  bad |= aa_json_set(j, "p", aa_json_num(dc->d.p));
  bad |= aa_json_set(j, "seed", aa_json_u64(dc->d.seed));
  bad |= aa_json_set(j, "fwd_tile", pair(dc->fwd_tq, dc->fwd_tk));
  bad |= aa_json_set(j, "bwd_tile", pair(dc->bwd_tq, dc->bwd_tk));
  bad |= aa_json_set(j, "tile_count", aa_json_str(aa_dropout_count_name(dc->d.tile_count)));
  bad |= aa_json_set(j, "mask_elements", aa_json_u64(dc->elements));
  bad |= aa_json_set(j, "mismatch_count", aa_json_u64(dc->mismatch_count));
  bad |= aa_json_set(j, "mismatch_fraction", aa_json_num(dc->mismatch));
  bad |= aa_json_set(j, "keep_rate_realised", aa_json_num(dc->keep_rate));
  bad |= aa_json_set(j, "keep_rate_nominal", aa_json_num(1.0 - dc->d.p));
  bad |= aa_json_set(j, "keep_rate_expected", aa_json_num(dc->expected_keep));
  bad |= aa_json_set(j, "keep_scale", aa_json_num(dc->keep_scale));
  bad |= aa_json_set(j, "o_bias_implied", aa_json_num(dc->implied_bias));
  bad |= aa_json_set(j, "o_bias_estimate", aa_json_num(dc->bias_mean));
  bad |= aa_json_set(j, "o_bias_ci95", aa_json_num(dc->bias_hw));
  bad |= aa_json_set(j, "o_bias_seeds", aa_json_u64(dc->nseeds));
  return bad ? (json_decref(j), NULL) : j;
}

void dropout_cli_print(FILE *f, const dropout_cli_t *dc) {
  if (!dc->on) return;
  fprintf(f,
          "dropout: scheme %s, p %.15g, seed %llu; forward tiles %zu x %zu, backward %zu x %zu (%s counts)\n"
          "  backward redraw differs from the forward mask in %zu of %zu bits (fraction %.6g)\n"
          "  keep rate: realised %.6f, nominal %.6f, exact for the scheme %.9f; rescale %.9g\n"
          "  E[O] bias from the rescale: exact %.6g, estimate %.6g +- %.2g (95%%, %u masks)\n",
          aa_dropout_scheme_name(dc->d.scheme), dc->d.p, (unsigned long long)dc->d.seed, dc->fwd_tq, dc->fwd_tk,
          dc->bwd_tq, dc->bwd_tk, aa_dropout_count_name(dc->d.tile_count), dc->mismatch_count, dc->elements,
          dc->mismatch, dc->keep_rate, 1.0 - dc->d.p, dc->expected_keep, dc->keep_scale, dc->implied_bias,
          dc->bias_mean, dc->bias_hw, dc->nseeds);
}

void dropout_cli_free(dropout_cli_t *dc) {
  free(dc->fwd);
  free(dc->bwd);
  dc->fwd = dc->bwd = NULL;
}
