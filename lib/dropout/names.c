/* attnacc: dropout scheme names, defaults, parameter parsing, canonical text, checks, rescale, keep rates. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropout-impl.h"

static const char *const scheme_names[AA_DROPOUT_SCHEME_COUNT] = {"none", "tile-seeded", "position-keyed",
                                                                  "u8-threshold"};
static const char *const count_names[AA_DROPOUT_COUNT_COUNT] = {"ceil", "floor"};

void aa_dropout_default(aa_dropout_t *out) {
  memset(out, 0, sizeof *out);
  out->scheme = AA_DROPOUT_NONE;
  out->p = 0.0;
  out->seed = 0;
  out->batch = 0;
  /* Twin: forward B_P_SIZE x B_F_SIZE = 128 x 512; backward q tile 128, k
     tile 512 when seqlen_k >= 512 else 128 (_flash_attn_bwd_core). */
  out->fwd_tile_q = 128;
  out->fwd_tile_k = 512;
  out->bwd_tile_q = 128;
  out->bwd_tile_k = 512;
  out->bwd_tile_k_short = 128;
  out->tile_count = AA_DROPOUT_COUNT_CEIL;
}

const char *aa_dropout_scheme_name(aa_dropout_scheme_t s) {
  return (unsigned)s < AA_DROPOUT_SCHEME_COUNT ? scheme_names[s] : "?";
}
const char *aa_dropout_count_name(aa_dropout_count_t c) {
  return (unsigned)c < AA_DROPOUT_COUNT_COUNT ? count_names[c] : "?";
}

int aa_dropout_scheme_from_name(aa_dropout_scheme_t *out, const char *name) {
  int i = aa_name_index(name, scheme_names, AA_DROPOUT_SCHEME_COUNT);
  if (i < 0) return AA_ENOTFOUND;
  *out = (aa_dropout_scheme_t)i;
  return AA_OK;
}

int aa_dropout_set(aa_dropout_t *d, const char *key, const char *value, aa_error_t *err) {
  uint64_t u;
  if (key == NULL || value == NULL) return aa_error_set(err, AA_EINVAL, "dropout: missing key or value");
#define BAD() return aa_error_set(err, AA_EINVAL, "dropout_%s: invalid value '%s'", key, value)
  if (!strcmp(key, "scheme")) {
    aa_dropout_scheme_t s;
    if (aa_dropout_scheme_from_name(&s, value) != AA_OK)
      return aa_error_set(err, AA_EINVAL,
                          "dropout_scheme: unknown scheme '%s' (none, tile-seeded, position-keyed, u8-threshold)",
                          value);
    d->scheme = s;
  } else if (!strcmp(key, "p")) {
    char *end;
    errno = 0;
    double p = strtod(value, &end);
    if (*value == '\0' || errno || *end != '\0' || !(p >= 0 && p < 1)) BAD();
    d->p = p;
  } else if (!strcmp(key, "seed")) {
    if (!aa_parse_u64(&u, value)) BAD();
    d->seed = u;
  } else if (!strcmp(key, "batch")) {
    if (!aa_parse_u64(&u, value)) BAD();
    d->batch = u;
  } else if (!strcmp(key, "fwd_tile_q") || !strcmp(key, "fwd_tile_k") || !strcmp(key, "bwd_tile_q") ||
             !strcmp(key, "bwd_tile_k") || !strcmp(key, "bwd_tile_k_short")) {
    if (!aa_parse_u64(&u, value) || u < 1 || u > (UINT64_C(1) << 32)) BAD();
    if (!strcmp(key, "fwd_tile_q"))
      d->fwd_tile_q = (size_t)u;
    else if (!strcmp(key, "fwd_tile_k"))
      d->fwd_tile_k = (size_t)u;
    else if (!strcmp(key, "bwd_tile_q"))
      d->bwd_tile_q = (size_t)u;
    else if (!strcmp(key, "bwd_tile_k"))
      d->bwd_tile_k = (size_t)u;
    else
      d->bwd_tile_k_short = (size_t)u;
  } else if (!strcmp(key, "tile_count")) {
    if (!strcmp(value, "ceil"))
      d->tile_count = AA_DROPOUT_COUNT_CEIL;
    else if (!strcmp(value, "floor"))
      d->tile_count = AA_DROPOUT_COUNT_FLOOR;
    else
      BAD();
  } else {
    return aa_error_set(err, AA_ENOTFOUND, "dropout: unknown parameter '%s'", key);
  }
#undef BAD
  return AA_OK;
}

size_t aa_dropout_format(char *buf, size_t len, const aa_dropout_t *d, const char *prefix) {
  /* %.17g round-trips the binary64 p through aa_dropout_set. */
  int n = snprintf(buf, len,
                   "%sscheme = %s\n%sp = %.17g\n%sseed = %" PRIu64 "\n%sbatch = %" PRIu64
                   "\n%sfwd_tile_q = %zu\n%sfwd_tile_k = %zu\n%sbwd_tile_q = %zu\n%sbwd_tile_k = %zu\n"
                   "%sbwd_tile_k_short = %zu\n%stile_count = %s\n",
                   prefix, aa_dropout_scheme_name(d->scheme), prefix, d->p, prefix, d->seed, prefix, d->batch, prefix,
                   d->fwd_tile_q, prefix, d->fwd_tile_k, prefix, d->bwd_tile_q, prefix, d->bwd_tile_k, prefix,
                   d->bwd_tile_k_short, prefix, aa_dropout_count_name(d->tile_count));
  return n < 0 ? 0 : (size_t)n;
}

int aa_dropout_check(const aa_dropout_t *d, aa_error_t *err) {
  if (d == NULL) return aa_error_set(err, AA_EINVAL, "dropout: NULL parameters");
  if ((unsigned)d->scheme >= AA_DROPOUT_SCHEME_COUNT)
    return aa_error_set(err, AA_EINVAL, "dropout: invalid scheme %d", (int)d->scheme);
  if ((unsigned)d->tile_count >= AA_DROPOUT_COUNT_COUNT)
    return aa_error_set(err, AA_EINVAL, "dropout: invalid tile_count %d", (int)d->tile_count);
  if (!(d->p >= 0 && d->p < 1)) return aa_error_set(err, AA_EINVAL, "dropout_p = %g: must be in [0, 1)", d->p);
  if (d->fwd_tile_q < 1 || d->fwd_tile_k < 1 || d->bwd_tile_q < 1 || d->bwd_tile_k < 1 || d->bwd_tile_k_short < 1)
    return aa_error_set(err, AA_EINVAL, "dropout: tile widths must be >= 1");
  return AA_OK;
}

double aa_dropout_keep_scale(const aa_dropout_t *d) {
  switch (d->scheme) {
  case AA_DROPOUT_TILE_SEEDED:
  case AA_DROPOUT_POSITION_KEYED:
    return 1.0 / (1.0 - d->p); /* twin: nl.multiply(y, 1 / (1 - dropout_p)) */
  case AA_DROPOUT_U8_THRESHOLD: {
    /* FA2 rp_dropout = 1.f / p_dropout with p_dropout = 1.f - p in float. */
    float keep = 1.0f - (float)d->p;
    return (double)(1.0f / keep);
  }
  default:
    return 1.0;
  }
}

double aa_dropout_expected_keep(const aa_dropout_t *d) {
  switch (d->scheme) {
  case AA_DROPOUT_TILE_SEEDED:
  case AA_DROPOUT_POSITION_KEYED:
    return ldexp((double)aa_dropout_t32(d->p), -32);
  case AA_DROPOUT_U8_THRESHOLD:
    return (aa_dropout_t8(d->p) + 1) / 256.0;
  default:
    return 1.0;
  }
}

double aa_dropout_implied_bias(const aa_dropout_t *d) {
  return aa_dropout_expected_keep(d) * aa_dropout_keep_scale(d) - 1.0;
}
