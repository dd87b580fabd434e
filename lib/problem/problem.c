/* attnacc: problem defaults, validation and the softmax scale. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>

#include "problem.h"

void aa_problem_init(aa_problem_t *pb, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads) {
  *pb = (aa_problem_t){0};
  pb->n_q = n_q;
  pb->n_k = n_k;
  pb->d = d;
  pb->heads = heads;
  pb->kv_heads = kv_heads;
  pb->scale_default = 1;
  pb->keep_scale = 1.0;
}

/* One cu_seqlens array: 0, strictly increasing, ending at total. */
static int check_cu(const int32_t *cu, size_t batch, size_t total, const char *name, aa_error_t *err) {
  if (cu == NULL) return aa_error_set(err, AA_EINVAL, "varlen batch of %zu sequences but no %s", batch, name);
  if (cu[0] != 0) return aa_error_set(err, AA_EINVAL, "%s[0] is %d, not 0", name, (int)cu[0]);
  for (size_t b = 0; b < batch; b++)
    if (cu[b + 1] <= cu[b])
      return aa_error_set(err, AA_EINVAL, "%s must increase: entry %zu is %d after %d (sequence %zu is empty)", name,
                          b + 1, (int)cu[b + 1], (int)cu[b], b);
  if ((size_t)cu[batch] != total)
    return aa_error_set(err, AA_ESHAPE, "%s ends at %d but the packed tensors hold %zu rows", name, (int)cu[batch],
                        total);
  return AA_OK;
}

/* The varlen fields, the features they do not combine with, and each
   sequence as a problem of its own (its windows and alignment). */
static int check_varlen(const aa_problem_t *pb, aa_error_t *err) {
  int st;
  if (pb->bound_min != NULL || pb->num_sinks != 0 || pb->keep != NULL)
    return aa_error_set(err, AA_EINVAL, "a varlen batch does not combine with %s",
                        pb->bound_min != NULL ? "packing bounds"
                        : pb->num_sinks       ? "sinks"
                                              : "dropout");
  if ((st = check_cu(pb->cu_seqlens_q, pb->varlen_batch, pb->n_q, "cu_seqlens_q", err)) != AA_OK) return st;
  if ((st = check_cu(pb->cu_seqlens_k, pb->varlen_batch, pb->n_k, "cu_seqlens_k", err)) != AA_OK) return st;
  for (size_t b = 0; b < pb->varlen_batch; b++) {
    aa_problem_t seq;
    size_t q0, k0;
    aa_problem_varlen_seq(&seq, pb, b, &q0, &k0);
    if ((st = aa_problem_check(&seq, err)) != AA_OK) {
      char msg[sizeof err->msg];
      if (err == NULL) return st;
      snprintf(msg, sizeof msg, "%s", err->msg);
      return aa_error_set(err, st, "sequence %zu: %s", b, msg);
    }
  }
  return AA_OK;
}

/* The attention mask, bias, key padding and logit offset (problem.h): a
   bias entry is finite (|b| <= 2^40, so that bias + offset + score stays an
   exact double-double sum) or -Inf (masked); NaN and +Inf have no softmax. */
static int check_mask(const aa_problem_t *pb, aa_error_t *err) {
  if (!(isfinite(pb->logit_offset) && fabs(pb->logit_offset) <= 0x1p40))
    return aa_error_set(err, AA_EINVAL, "logit offset must be finite with |c| <= 2^40, got %g", pb->logit_offset);
  if (pb->key_pad > pb->n_k)
    return aa_error_set(err, AA_EINVAL, "key padding of %zu keys but only %zu keys", pb->key_pad, pb->n_k);
  if (pb->key_pad > 0 && pb->varlen_batch > 0) /* each packed sequence has its own length already */
    return aa_error_set(err, AA_EINVAL, "key padding does not combine with a varlen batch");
  if (pb->mask == NULL && pb->bias == NULL) return AA_OK;
  if (pb->mask_hstride != 0 && pb->mask_hstride != pb->n_q * pb->n_k)
    return aa_error_set(err, AA_ESHAPE, "attention mask head stride %zu: need 0 (broadcast) or n_q n_k = %zu",
                        pb->mask_hstride, pb->n_q * pb->n_k);
  if (pb->varlen_batch > 0 || pb->bound_min != NULL)
    return aa_error_set(err, AA_EINVAL, "an attention mask does not combine with %s",
                        pb->varlen_batch > 0 ? "a varlen batch" : "packing bounds");
  size_t n = (pb->mask_hstride != 0 ? pb->heads : 1) * pb->n_q * pb->n_k;
  for (size_t e = 0; pb->bias != NULL && e < n; e++)
    if (!(pb->bias[e] == -INFINITY || (isfinite(pb->bias[e]) && fabs(pb->bias[e]) <= 0x1p40)))
      return aa_error_set(err, AA_EINVAL,
                          "attention bias entry %zu (head %zu, query %zu, key %zu) is %g: need -inf or finite with "
                          "|b| <= 2^40",
                          e, e / (pb->n_q * pb->n_k), e / pb->n_k % pb->n_q, e % pb->n_k, pb->bias[e]);
  return AA_OK;
}

int aa_problem_check(const aa_problem_t *pb, aa_error_t *err) {
  if (pb->n_q == 0 || pb->n_k == 0 || pb->d == 0 || pb->heads == 0 || pb->kv_heads == 0)
    return aa_error_set(err, AA_ESHAPE, "empty problem: n_q=%zu n_k=%zu d=%zu heads=%zu kv_heads=%zu", pb->n_q,
                        pb->n_k, pb->d, pb->heads, pb->kv_heads);
  if (pb->heads % pb->kv_heads != 0)
    return aa_error_set(err, AA_ESHAPE, "GQA needs heads (%zu) to be a multiple of kv_heads (%zu)", pb->heads,
                        pb->kv_heads);
  if (pb->align != AA_ALIGN_TOP_LEFT && pb->align != AA_ALIGN_BOTTOM_RIGHT)
    return aa_error_set(err, AA_EINVAL, "unknown mask alignment %d", (int)pb->align);
  if (pb->n_q > (size_t)INT32_MAX || pb->n_k > (size_t)INT32_MAX)
    return aa_error_set(err, AA_ESHAPE, "n_q = %zu and n_k = %zu must stay below 2^31", pb->n_q, pb->n_k);
  if (pb->window != 0 && !pb->causal)
    return aa_error_set(err, AA_EINVAL, "a sliding window is only valid with the causal mask");
  if (pb->local && pb->window_left != AA_WINDOW_INF && pb->window_left > (size_t)INT32_MAX)
    return aa_error_set(err, AA_EINVAL, "window left side %zu too large (at most 2^31 - 1, or unbounded)",
                        pb->window_left);
  if (pb->local && pb->window_right != AA_WINDOW_INF && pb->window_right > (size_t)INT32_MAX)
    return aa_error_set(err, AA_EINVAL, "window right side %zu too large (at most 2^31 - 1, or unbounded)",
                        pb->window_right);
  if (pb->softcap != 0 && !(isfinite(pb->softcap) && pb->softcap > 0 && pb->softcap <= 0x1p40))
    return aa_error_set(err, AA_EINVAL, "softcap must be 0 (off) or finite in (0, 2^40], got %g", pb->softcap);
  if (pb->alibi != AA_ALIBI_NONE && pb->alibi != AA_ALIBI_FLASH && pb->alibi != AA_ALIBI_TORCH)
    return aa_error_set(err, AA_EINVAL, "unknown ALiBi form %d", (int)pb->alibi);
  if (pb->alibi != AA_ALIBI_NONE) {
    if (pb->alibi_slopes == NULL) return aa_error_set(err, AA_EINVAL, "ALiBi is on but no slopes were given");
    for (size_t h = 0; h < pb->heads; h++) {
      double x = pb->alibi_slopes[h];
      /* |x| <= 2^20 keeps |bias| < 2^51; |x| >= 2^-900 keeps slope * dist exact as a double-double */
      if (!(isfinite(x) && fabs(x) <= 0x1p20 && (x == 0 || fabs(x) >= 0x1p-900)))
        return aa_error_set(err, AA_EINVAL, "ALiBi slope of head %zu is %g: need 0 or 2^-900 <= |slope| <= 2^20", h,
                            x);
    }
  }
  if ((pb->bound_min == NULL) != (pb->bound_max == NULL))
    return aa_error_set(err, AA_EINVAL, "sequence-packing bounds need both bound_min and bound_max");
  if (pb->num_sinks != 0 && pb->sinks == NULL)
    return aa_error_set(err, AA_EINVAL, "num_sinks is %zu but no sink logits were given", pb->num_sinks);
  if (!pb->scale_default && !(isfinite(pb->scale) && pb->scale > 0))
    return aa_error_set(err, AA_EINVAL, "softmax scale must be finite and positive, got %g", pb->scale);
  if (pb->keep != NULL && !(isfinite(pb->keep_scale) && pb->keep_scale > 0))
    return aa_error_set(err, AA_EINVAL, "dropout keep_scale must be finite and positive, got %g", pb->keep_scale);
  int st = check_mask(pb, err);
  if (st != AA_OK) return st;
  return pb->varlen_batch > 0 ? check_varlen(pb, err) : AA_OK;
}

void aa_problem_varlen_seq(aa_problem_t *seq, const aa_problem_t *pb, size_t b, size_t *q0, size_t *k0) {
  *seq = *pb;
  *q0 = (size_t)pb->cu_seqlens_q[b];
  *k0 = (size_t)pb->cu_seqlens_k[b];
  seq->n_q = (size_t)pb->cu_seqlens_q[b + 1] - *q0;
  seq->n_k = (size_t)pb->cu_seqlens_k[b + 1] - *k0;
  seq->varlen_batch = 0;
  seq->cu_seqlens_q = seq->cu_seqlens_k = NULL;
}

double aa_problem_scale(const aa_problem_t *pb) {
  return pb->scale_default ? 1.0 / sqrt((double)pb->d) : pb->scale;
}

void aa_problem_alibi_geometric(double *out, size_t heads) {
  size_t p = 1;
  while (p * 2 <= heads)
    p *= 2;
  for (size_t h = 0; h < heads; h++) {
    /* the first p of 2^(-8 k / p), then the odd-numbered ones of 2^(-8 k / 2p) */
    double e = h < p ? -8.0 * (double)(h + 1) / (double)p : -8.0 * (double)(2 * (h - p) + 1) / (double)(2 * p);
    out[h] = (double)(float)exp2(e);
  }
}
