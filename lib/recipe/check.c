/* attnacc: aa_recipe_check: each key's range (the key table) and the rules between keys. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "recipe-impl.h"

/* fwd.lse_form, bwd.exp_form, bwd.twopass_p (lib/recipe.h): the paths that read them. */
static int check_lse_chain(const aa_recipe_t *r, aa_error_t *err) {
  int exp2 = r->exp_form == AA_EXPFORM_EXP2_FMA || r->exp_form == AA_EXPFORM_EXP2_MULSUB;
  int split = r->fwd_k_desc || r->fwd_splits > 1 || r->fwd_split_sms > 0 || r->fwd_split_keys > 0;
  if (r->fwd_lse_form != AA_LSE_FMA &&
      (r->fwd_checkpoint != AA_CKPT_LSE || split ||
       (r->fwd_softmax != AA_SOFTMAX_ONLINE_LSE && r->fwd_softmax != AA_SOFTMAX_TWO_PASS)))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': fwd.lse_form other than fma needs fwd.checkpoint = lse, fwd.softmax = "
                        "online-lse or two-pass and no split-KV forward",
                        r->name);
  if (aa_recipe_lse_log2(r) && !exp2)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': fwd.lse_form = %s needs exp_form exp2-fma or exp2-mul-sub",
                        r->name,
                        r->fwd_lse_form == AA_LSE_LOG2_MAX   ? "log2-max"
                        : r->fwd_lse_form == AA_LSE_LOG2_LN2 ? "log2-ln2"
                                                             : "log2-ln2-fma");
  if (r->mask_enter == AA_MASKAT_SCALE_FMA && r->scale_fold != AA_SCALE_S)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': mask.enter = scale-fma needs scale_fold = s", r->name);
  if (r->bwd_exp_form != 0 && (r->bwd_norm != AA_BWDNORM_LSE || r->bwd_k_prescale))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': bwd.exp_form other than fwd needs bwd.norm = lse and "
                        "bwd.k_prescale = off",
                        r->name);
  if (r->bwd_scale_fold != 0 && (r->bwd_scale_fold - 1 == AA_SCALE_Q || r->scale_fold == AA_SCALE_Q ||
                                 r->bwd_norm != AA_BWDNORM_LSE || r->bwd_k_prescale))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': bwd.scale_fold other than fwd needs it and scale_fold to be s or exp, "
                        "bwd.norm = lse and bwd.k_prescale = off",
                        r->name);
  if (r->bwd_twopass_lse && r->fwd_softmax != AA_SOFTMAX_TWO_PASS)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': bwd.twopass_p = lse needs fwd.softmax = two-pass", r->name);
  return AA_OK;
}

int aa_recipe_check(const aa_recipe_t *r, aa_error_t *err) {
  if (r == NULL) return aa_error_set(err, AA_EINVAL, "recipe_check: NULL recipe");
  if (r->nwhen > AA_RECIPE_WHEN_MAX)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': %zu conditional keys (at most %d)", r->name, r->nwhen,
                        AA_RECIPE_WHEN_MAX);
  {
    int st = aa_recipe_check_fields(r, err); /* every key's own range (the table's loop) */
    if (st != AA_OK) return st;
  }
  /* Each gradient must receive the softmax scale exactly once. */
  int dq_n = (r->bwd_ds_scale != 0) + (r->bwd_dq_scale != AA_GSCALE_NONE);
  if (dq_n != 1)
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': dQ receives the softmax scale %d times (bwd.ds_scale, bwd.dq_scale); need 1",
                        r->name, dq_n);
  if (r->scale_fold == AA_SCALE_Q && r->bwd_ds_scale)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': scale_fold = q already scales dK; bwd.ds_scale must be off",
                        r->name);
  int dk_n = (r->bwd_ds_scale != 0) + (r->scale_fold == AA_SCALE_Q) + (r->bwd_dk_scale != AA_GSCALE_NONE);
  if (dk_n != 1)
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': dK receives the softmax scale %d times (scale_fold = q, bwd.ds_scale, "
                        "bwd.dk_scale); need 1",
                        r->name, dk_n);
  if (r->fwd_exp_emu_freq > 0 && (r->fwd_softmax != AA_SOFTMAX_ONLINE_LSE || r->fwd_tile_k == 0 ||
                                  r->fwd_tile_k % 32 != 0 || r->alu_fmt != AA_FMT_FP32))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': fwd.exp_emu_freq needs fwd.softmax = online-lse, fwd.tile_k a multiple of 32 "
                        "and alu = fp32",
                        r->name);
  if (r->fwd_p_scale_exp != 0 && r->fwd_softmax != AA_SOFTMAX_ONLINE_LSE)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': fwd.p_scale_exp needs fwd.softmax = online-lse", r->name);
  if (!(r->quant_p_scale > 0 && isfinite(r->quant_p_scale)) || !(r->quant_fp8_max > 0 && r->quant_fp8_max <= 448))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': quant.p_scale must be > 0 and finite, quant.fp8_max in (0, 448]", r->name);
  if (r->quant_p_scale != 1 && r->fwd_softmax != AA_SOFTMAX_ONLINE_LSE)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': quant.p_scale needs fwd.softmax = online-lse", r->name);
  if (r->fwd_sink_end &&
      (r->fwd_softmax != AA_SOFTMAX_ONLINE_LSE || r->fwd_splits > 1 || r->fwd_split_sms > 0 || r->fwd_split_keys > 0))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': fwd.sink_at = end needs fwd.softmax = online-lse without splits", r->name);
  if (r->bwd_dk_scale == AA_GSCALE_TILE)
    return aa_error_set(err, AA_EINVAL, "recipe '%s': bwd.dk_scale = tile is not supported (use end or none)",
                        r->name);
  if (r->fwd_softmax == AA_SOFTMAX_TWO_PASS && (r->fwd_tile_k != 0 || r->bwd_tile_k != 0 || r->bwd_section != 0))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': fwd.softmax = two-pass needs whole-row tiles (fwd.tile_k = bwd.tile_k = "
                        "bwd.section = 0)",
                        r->name);
  if (r->bwd_d_source == AA_DSRC_P_DP && (r->bwd_tile_k != 0 || r->bwd_section != 0))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': bwd.d_source = p-dp needs the whole key row in one tile (bwd.tile_k = "
                        "bwd.section = 0)",
                        r->name);
  if ((r->fwd_k_desc || r->fwd_splits > 1 || r->fwd_split_sms > 0 || r->fwd_split_keys > 0) &&
      (r->fwd_softmax != AA_SOFTMAX_ONLINE_LSE || r->fwd_checkpoint != AA_CKPT_LSE ||
       r->dropout.scheme != AA_DROPOUT_NONE))
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': fwd.k_order = desc, fwd.splits, fwd.split_sms and fwd.split_keys need "
                        "fwd.softmax = online-lse, "
                        "fwd.checkpoint = lse and no dropout",
                        r->name);
  if ((!aa_recipe_exp_is_default(&r->fwd_exp) || !aa_recipe_exp_is_default(&r->bwd_exp)) && r->alu_fmt != AA_FMT_FP32)
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': fwd.exp / bwd.exp constructions other than exact evaluate FP32 arguments "
                        "(alu = fp32)",
                        r->name);
  if (r->bwd_k_prescale && (!(r->exp_form == AA_EXPFORM_EXP2_FMA || r->exp_form == AA_EXPFORM_EXP2_MULSUB) ||
                            r->scale_fold != AA_SCALE_EXP || r->bwd_dq_scale != AA_GSCALE_END ||
                            r->bwd_norm != AA_BWDNORM_LSE || r->fwd_softmax != AA_SOFTMAX_ONLINE_LSE))
    return aa_error_set(
        err, AA_EINVAL,
        "recipe '%s': bwd.k_prescale = on needs exp_form = exp2-fma or exp2-mul-sub, scale_fold = exp, "
        "bwd.dq_scale = end, bwd.norm = lse and fwd.softmax = online-lse",
        r->name);
  {
    int st = check_lse_chain(r, err);
    if (st != AA_OK) return st;
  }
  if (r->bwd_q_group == 0) return aa_error_set(err, AA_EINVAL, "recipe '%s': bwd.q_group must be >= 1", r->name);
  if (!(r->fwd_rescale_threshold >= 0))
    return aa_error_set(err, AA_EINVAL, "recipe '%s': fwd.rescale_threshold must be >= 0", r->name);
  /* Normalisation variants ([blackwell-fa] sections 3.1, 3.2, 3.5). */
  int shifted = r->fwd_softmax == AA_SOFTMAX_FIXED_SHIFT || r->fwd_softmax == AA_SOFTMAX_GUARDED;
  if (!isfinite(r->fwd_shift)) return aa_error_set(err, AA_EINVAL, "recipe '%s': fwd.shift must be finite", r->name);
  if (shifted && !(r->fwd_guard_lo < r->fwd_guard_hi))
    return aa_error_set(err, AA_EINVAL, "recipe '%s': fwd.guard_lo must be below fwd.guard_hi", r->name);
  if (r->bwd_norm == AA_BWDNORM_RECIP && !shifted)
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': bwd.norm = recip needs a forward that saves reciprocals (fwd.softmax = "
                        "fixed-shift or guarded)",
                        r->name);
  if (r->bwd_norm == AA_BWDNORM_RECIP && r->bwd_d_source != AA_DSRC_O_DO)
    return aa_error_set(err, AA_EINVAL,
                        "recipe '%s': bwd.norm = recip forms D from the scaled dO (bwd.d_source = o-do)", r->name);
  return AA_OK;
}
