/* attnacc: the GPU emulation's per-row code run on host threads (device cuda-emu) against the CPU emulation, bit for
 * bit: O, LSE and the P-cast counters of random problems, every preset; its FP16/BF16 rounding against aa_round. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../lib/attn/attn-core.h"
#include "attn.h"
#include "rng.h"
#include "tattn_cuda_cases.h"
#include "tests.h"

/* attn-core.h's FP16 and BF16 rounding against aa_round (the fmt module's, an independent implementation): random
   bit patterns over every exponent, and the edges (half-way cases, FP16's largest finite and overflow, subnormals).
 */
static void rounding(aa_pcg32_t *rng) {
  static const uint32_t edges[] = {0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x33800000u, 0x33000000u,
                                   0x33000001u, 0x387fc000u, 0x38800000u, 0x00000001u, 0x7f7fffffu, 0x3f808000u,
                                   0x3f818000u, 0x80000000u, 0x00000000u, 0x7f800000u};
  aa_round_opts_t o16 = {AA_FMT_FP16, AA_RND_NE, 1, 0}, ob = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  size_t bad = 0, n = 200000;
  for (size_t t = 0; t < n + sizeof edges / sizeof edges[0]; t++) {
    uint32_t u = t < n ? aa_pcg32_next(rng) : edges[t - n];
    if (((u >> 23) & 255) == 255 && (u & 0x7fffffu)) continue; /* NaN */
    float x = aa_core_u2f(u);
    for (int s = 0; s < 2; s++) {
      float y = aa_core_u2f(aa_core_f2u(x) ^ ((uint32_t)s << 31));
      double w16 = aa_round(y, &o16, NULL), wb = aa_round(y, &ob, NULL);
      if (!aa_test_same(aa_core_rnd16(y, AA_CORE_FP16), w16) || !aa_test_same(aa_core_rnd16(y, AA_CORE_BF16), wb)) {
        if (bad++ < 5)
          AA_FAIL("rounding of %a: fp16 %a (aa_round %a), bf16 %a (aa_round %a)", (double)y,
                  (double)aa_core_rnd16(y, AA_CORE_FP16), w16, (double)aa_core_rnd16(y, AA_CORE_BF16), wb);
      }
    }
  }
  AA_CHECK(bad == 0, "%zu roundings differ from aa_round", bad);
}

int main(void) {
  aa_pcg32_t rng;
  aa_pcg32_seed(&rng, aa_test_seed("tattn_cuda_emu"), 28);
  rounding(&rng);
  /* the first shape runs FA2's split-KV kernel and its combine (FA2's dispatch on 132 SMs), the third one split */
  aa_fa2_dispatch_t dp;
  AA_CHECK(aa_fa2_dispatch(&dp, 2, 70, 1000, 64, 132, 0, NULL) == AA_OK && dp.num_splits > 1,
           "shape 0 should be split-KV (%zu splits)", dp.num_splits);
  AA_CHECK(aa_fa2_dispatch(&dp, 1, 129, 77, 128, 132, 0, NULL) == AA_OK && dp.num_splits == 1,
           "shape 2 should be one split (%zu splits)", dp.num_splits);
  /* what the GPU forward implements (lib/attn/cuda.c): these presets must take it on every shape */
  static const char *const gpu_presets[] = {"fa2-h100", "fa2-h100-bi", "fa2", "efficient-h100", "cudnn-h100",
                                            "flex-h100", "fa2-fixed", "triton-tutorial", "naive-bf16",
                                            /* the fixed-shift and guarded forwards, the quadratic BF16 exp */
                                            "recip", "recip-causal", "tlx-dq", "tlx-dq-causal", "tlx-exp", "tlx",
                                            "tlx-causal"};
  /* what the GPU backward implements (lib/attn/cuda_bwd.c) */
  static const char *const bwd_presets[] = {"fa2-h100", "fa2-h100-bi", "fa2", "efficient-h100", "cudnn-h100",
                                            "flex-h100", "naive-bf16",
                                            /* the tlx family (bwd.norm = recip, quadratic exp, dq_reduce kinds) */
                                            "recip-causal", "tlx", "tlx-causal", "tlx-dq-causal", "fa2-fixed"};
  /* the same on every problem whose CPU run stays finite (at least half of them): the fixed shift 0 of the dense
     recip route overflows FP16 weights on some draws, O is NaN there, and a backward with a non-finite pair runs on
     the CPU, which records where (cuda_bwd.c) */
  static const char *const bwd_finite_presets[] = {"recip", "tlx-dq", "tlx-exp"};
  for (size_t p = 0; p < aa_recipe_preset_count(); p++) {
    const char *name = aa_recipe_preset_name(p);
    size_t took = 0, btook = 0, finite = 0, runs = sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < runs; s++) {
      took += (size_t)compare(name, &shapes[s], &rng, AA_ATTN_DEVICE_CUDA_EMU);
      btook += (size_t)cases_bwd_took;
      finite += (size_t)cases_bwd_finite;
    }
    for (size_t g = 0; g < sizeof bwd_presets / sizeof bwd_presets[0]; g++)
      AA_CHECK(strcmp(name, bwd_presets[g]) != 0 || btook == runs, "%s: backward on the GPU path for %zu of %zu",
               name, btook, runs);
    for (size_t g = 0; g < sizeof bwd_finite_presets / sizeof bwd_finite_presets[0]; g++)
      AA_CHECK(strcmp(name, bwd_finite_presets[g]) != 0 || (btook == finite && 2 * finite >= runs),
               "%s: backward on the GPU path for %zu of the %zu of %zu problems without a NaN or Inf", name, btook,
               finite, runs);
    for (size_t g = 0; g < sizeof gpu_presets / sizeof gpu_presets[0]; g++)
      AA_CHECK(strcmp(name, gpu_presets[g]) != 0 || took == runs, "%s took the GPU path for %zu of %zu problems",
               name, took, runs);
    printf("%-20s forward on the GPU path for %zu of %zu problems, backward %zu\n", name, took, runs, btook);
  }
  /* large scores: the fixed-shift weights leave their range, tiles are flagged and the guarded ones recovered */
  static const char *const shifted[] = {"recip", "recip-causal", "tlx-dq", "tlx-dq-causal", "tlx"};
  cases_qk_scale = 40.0;
  size_t flagged = 0, recovered = 0;
  for (size_t p = 0; p < sizeof shifted / sizeof shifted[0]; p++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      AA_CHECK(compare(shifted[p], &shapes[s], &rng, AA_ATTN_DEVICE_CUDA_EMU), "%s at scale 40: not on the GPU path",
               shifted[p]);
      flagged += cases_flagged, recovered += cases_recovered;
    }
  cases_qk_scale = 3.0;
  printf("scale 40, fixed-shift presets: %zu tiles flagged, %zu rows recovered (CPU and GPU path equal)\n", flagged,
         recovered);
  AA_CHECK(flagged > 0 && recovered > 0, "no tile flagged or no row recovered: the tile steps are not exercised");
  /* the exact-exp presets (fa2, flex-h100, ...) flag rows on host threads (2^20-ulp margin): the redo ran */
  printf("rows redone on the host after a doubtful libm value: %zu, backward pairs %zu\n", cases_redone,
         cases_pairs_redone);
  AA_CHECK(cases_redone > 0, "no row was redone: the doubtful-rounding path is not exercised");
  AA_CHECK(cases_pairs_redone > 0, "no backward pair was redone: the doubtful-rounding path is not exercised");
  return aa_test_finish("tattn_cuda_emu");
}
