/* attnacc: the attention-mask options of run and score: a mask file broadcast over batch and heads as SDPA takes
 * it, per-sequence key lengths, a logit offset. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/masks.h"

void masks_cli_free(masks_cli_t *mc) {
  free(mc->bias);
  aa_ndarray_free(&mc->file);
  *mc = (masks_cli_t){0};
}

/* The mask's batch and head extents (1 = broadcast) from its shape; 2 after a message when it does not fit. */
static int mask_extents(size_t *mb, size_t *mh, const aa_ndarray_t *m, const char *cmd, const char *file, size_t B,
                        size_t H, const aa_problem_t *pb) {
  int nd = m->ndim;
  *mb = nd == 4 ? m->shape[0] : 1;
  *mh = nd >= 3 ? m->shape[nd - 3] : 1;
  if (nd >= 2 && m->shape[nd - 2] == pb->n_q && m->shape[nd - 1] == pb->n_k && (*mb == 1 || *mb == B) &&
      (*mh == 1 || *mh == H))
    return 0;
  char s[96];
  size_t u = 0;
  for (int i = 0; i < nd && u < sizeof s; i++)
    u += (size_t)snprintf(s + u, sizeof s - u, "%s%zu", i ? ", " : "", m->shape[i]);
  cli_error(cmd,
            "--mask: %s has shape [%s]; the problem needs [%zu, %zu], [1|%zu, %zu, %zu] or [1|%zu, 1|%zu, %zu, %zu]",
            file, s, pb->n_q, pb->n_k, H, pb->n_q, pb->n_k, B, H, pb->n_q, pb->n_k);
  return 2;
}

/* --key-len: one length, or one per batch element, each in [0, n_k]. */
static int parse_lens(size_t *lens, size_t *nl, const char *cmd, const char *s, size_t B, size_t n_k) {
  *nl = 0;
  for (const char *p = s; *p != '\0';) {
    char *end;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (end == p || errno != 0 || x < 0 || (size_t)x > n_k || (*end != ',' && *end != '\0') || *nl == B) {
      cli_error(cmd, "--key-len: '%s' is not one length or %zu lengths (one per batch element) in [0, %zu]", s, B,
                n_k);
      return 2;
    }
    lens[(*nl)++] = (size_t)x;
    p = *end == ',' ? end + 1 : end;
  }
  if (*nl != 1 && *nl != B) {
    cli_error(cmd, "--key-len: %zu lengths for a batch of %zu (give one, or one per batch element)", *nl, B);
    return 2;
  }
  return 0;
}

/* The bias over every folded head b H + h (aa_problem_mask_expand). */
static int expand(masks_cli_t *mc, const char *cmd, aa_problem_t *pb, size_t B, size_t mb, size_t mh,
                  const size_t *lens, size_t nl) {
  size_t nn = pb->n_q * pb->n_k;
  if ((mc->bias = malloc(pb->heads * nn * sizeof *mc->bias)) == NULL) {
    cli_error(cmd, "--mask: cannot allocate the mask of %zu heads of [%zu, %zu]", pb->heads, pb->n_q, pb->n_k);
    return 2;
  }
  aa_problem_mask_expand(mc->bias, mc->file.data, mb, mh, B, pb->heads / B, pb->n_q, pb->n_k, lens, nl);
  pb->bias = mc->bias;
  pb->bias_bool = mc->file.boolean; /* a boolean --mask: its -Inf entries are SDPA's bool mask (mask.score = fill) */
  pb->mask_hstride = nn;
  return 0;
}

int masks_cli_problem(masks_cli_t *mc, const char *cmd, const cli_args_t *a, size_t batch, aa_problem_t *pb) {
  const char *s;
  size_t B = batch ? batch : 1, H = pb->heads / B, mb = 1, mh = 1, nl = 0, *lens = NULL;
  aa_error_t err = {0};
  int rc = 0;
  if ((s = cli_get(a, "logit-offset")) != NULL &&
      cli_double(&pb->logit_offset, cmd, "logit-offset", s, -0x1p40, 0x1p40, 0))
    return 2;
  if ((s = cli_get(a, "mask")) != NULL) {
    if (aa_npy_read_nd(&mc->file, s, AA_NPY_BOOL_BIAS, &err) != AA_OK) {
      cli_error(cmd, "--mask: %s", err.msg);
      return 2;
    }
    if (mc->file.ndim < 2 || mask_extents(&mb, &mh, &mc->file, cmd, s, B, H, pb)) {
      if (mc->file.ndim < 2) cli_error(cmd, "--mask: %s has one axis; it needs [n_q, n_k] at least", s);
      return 2;
    }
  }
  if ((s = cli_get(a, "key-len")) != NULL) {
    if ((lens = malloc(B * sizeof *lens)) == NULL || parse_lens(lens, &nl, cmd, s, B, pb->n_k)) {
      free(lens);
      return 2;
    }
  }
  if (mb == 1 && mh == 1 && nl <= 1) { /* one mask for every head: no copy */
    pb->bias = mc->file.data;
    pb->bias_bool = mc->file.boolean;
    pb->mask_hstride = 0;
    pb->key_pad = nl == 1 ? pb->n_k - lens[0] : 0;
  } else {
    rc = expand(mc, cmd, pb, B, mb, mh, lens, nl);
  }
  free(lens);
  return rc;
}
