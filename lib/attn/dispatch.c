/* attnacc: FA2's forward kernel, split count and tile sizes for a problem on sm90 (PyTorch's flash backend). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "attn-impl.h"

/* flash_api.cpp:281-313. The float arithmetic follows the source: n_waves is
   a float quotient, eff = n_waves / ceil(n_waves), and the threshold test
   compares a float with the double 0.85 * max_efficiency. */
size_t aa_fa2_num_splits(size_t units, size_t num_sms, size_t n_blocks, size_t max_splits) {
  if ((float)units >= 0.8f * (float)num_sms) return 1;
  if (num_sms < max_splits) max_splits = num_sms;
  if (n_blocks < max_splits) max_splits = n_blocks;
  if (max_splits > 128) max_splits = 128; /* FA2 caps num_splits at 128 (flash_api.cpp:343) */
  float eff[129], best = 0;
  for (size_t s = 1; s <= max_splits; s++) {
    /* eligible when ceil(n_blocks / s) differs from ceil(n_blocks / (s - 1)) (flash_api.cpp:293-295) */
    int eligible = s == 1 || (n_blocks + s - 1) / s != (n_blocks + s - 2) / (s - 1);
    eff[s] = 0;
    if (!eligible) continue;
    float waves = (float)(units * s) / (float)num_sms;
    eff[s] = waves / ceilf(waves);
    if (eff[s] > best) best = eff[s];
  }
  for (size_t s = 1; s <= max_splits; s++)
    if (eff[s] > 0 && (double)eff[s] >= 0.85 * (double)best) return s;
  return 1;
}

/* A window FA2 keeps: mha_fwd turns a side >= seqlen_k into -1 (none). */
static int has_window(const aa_problem_t *pb) {
  if (pb->window > 0) return 1;
  if (!pb->local) return 0;
  return (pb->window_left != AA_WINDOW_INF && pb->window_left < pb->n_k) ||
         (pb->window_right != AA_WINDOW_INF && pb->window_right < pb->n_k);
}

int aa_fa2_ngroups_swapped(const aa_problem_t *pb, int dropout) {
  return pb->n_q == 1 && pb->heads > pb->kv_heads && !has_window(pb) && !dropout && pb->d % 8 == 0 &&
         pb->alibi == AA_ALIBI_NONE;
}

int aa_fa2_seen(size_t *heads, size_t *n_q, const aa_problem_t *pb, int dropout) {
  int swapped = aa_fa2_ngroups_swapped(pb, dropout);
  *heads = swapped ? pb->kv_heads : pb->heads;
  *n_q = swapped ? pb->heads / pb->kv_heads : pb->n_q;
  return swapped;
}

size_t aa_fa2_headdim(size_t d) {
  static const size_t dims[] = {32, 64, 96, 128, 192, 256};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    if (d <= dims[i]) return dims[i];
  return 0;
}

/* set_params_splitkv (flash_api.cpp:323-335): block_n of the splitkv kernel, 64-row query blocks */
size_t aa_fa2_splitkv_block_n(size_t d) {
  return d <= 64 ? 256 : d <= 128 ? 128 : 64;
}

int aa_fa2_dispatch(aa_fa2_dispatch_t *out, size_t batch_heads, size_t n_q, size_t n_k, size_t d, size_t num_sms,
                    int dropout, aa_error_t *err) {
  size_t hd = aa_fa2_headdim(d);
  if (out == NULL || hd == 0 || d == 0 || num_sms == 0 || batch_heads == 0 || n_q == 0 || n_k == 0)
    return aa_error_set(err, AA_EINVAL,
                        "fa2 dispatch: needs 1 <= d <= 256, num_sms > 0 and a non-empty problem (d = %zu, "
                        "num_sms = %zu, heads = %zu, n_q = %zu, n_k = %zu)",
                        d, num_sms, batch_heads, n_q, n_k);
  size_t split_n = aa_fa2_splitkv_block_n(d);
  size_t units = batch_heads * ((n_q + 63) / 64);
  out->num_splits = dropout ? 1 : aa_fa2_num_splits(units, 2 * num_sms, (n_k + split_n - 1) / split_n, 128);
  if (out->num_splits > 1) {
    out->fwd_tile_q = 64; /* run_mha_fwd_splitkv_dispatch: kBlockM = 64 (flash_fwd_launch_template.h:181) */
    out->fwd_tile_k = split_n;
  } else {
    /* run_mha_fwd_hdimXX, sm90 branches (is_sm8x false) */
    switch (hd) {
    case 32:
      out->fwd_tile_q = 128, out->fwd_tile_k = 128;
      break;
    case 64:
      out->fwd_tile_q = 128, out->fwd_tile_k = dropout ? 64 : 128;
      break;
    case 96:
      out->fwd_tile_q = 128, out->fwd_tile_k = 64;
      break;
    case 128:
      out->fwd_tile_q = 128, out->fwd_tile_k = dropout ? 32 : 64;
      break;
    case 192:
      out->fwd_tile_q = dropout ? 64 : 128, out->fwd_tile_k = 64;
      break;
    default:
      out->fwd_tile_q = 64, out->fwd_tile_k = 64;
      break;
    }
  }
  /* run_mha_bwd_hdimXX with max_smem_per_block >= 176 KiB (sm90) */
  out->bwd_tile_q = hd <= 64 ? 128 : 64;
  out->bwd_tile_k = hd <= 128 ? 128 : 64;
  return AA_OK;
}
