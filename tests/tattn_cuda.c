/* attnacc: the GPU emulation against the CPU emulation, bit for bit (O, LSE, P-cast counters): every preset on fixed
 * shapes, and random shapes for the presets it implements. Exits 77 without a GPU; ends with "N passed, N failed". */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "gemm.h"
#include "rng.h"
#include "tattn_cuda_cases.h"
#include "tests.h"

/* A random shape: n_q, n_k in [1, 800], d in [1, 256], 1-4 KV heads with groups of 1-3, either mask and format. */
static shape_t random_shape(aa_pcg32_t *rng) {
  shape_t s;
  static const size_t ds[] = {16, 32, 40, 64, 80, 96, 128, 160, 192, 256, 1, 7};
  s.n_q = 1 + aa_pcg32_bounded(rng, 800);
  s.n_k = 1 + aa_pcg32_bounded(rng, 800);
  s.d = ds[aa_pcg32_bounded(rng, sizeof ds / sizeof ds[0])];
  s.kv_heads = 1 + aa_pcg32_bounded(rng, 4);
  s.heads = s.kv_heads * (1 + aa_pcg32_bounded(rng, 3));
  s.causal = (int)aa_pcg32_bounded(rng, 2);
  s.io = aa_pcg32_bounded(rng, 2) ? AA_FMT_BF16 : AA_FMT_FP16;
  return s;
}

/* Twelve random problems (BF16 ones when bf16) of a preset the GPU implements: its forward and backward must take
   the GPU on each, with the CPU's bits. */
static void random_runs(const char *preset, aa_pcg32_t *rng, int bf16) {
  size_t took = 0, btook = 0, runs = 12;
  for (size_t t = 0; t < runs; t++) {
    shape_t s = random_shape(rng);
    if (bf16) s.io = AA_FMT_BF16;
    took += (size_t)compare(preset, &s, rng, AA_ATTN_DEVICE_CUDA);
    btook += (size_t)cases_bwd_took;
  }
  cases_checks++;
  AA_CHECK(btook == runs, "%s: the GPU backward took %zu of %zu random problems", preset, btook, runs);
  cases_checks++;
  AA_CHECK(took == runs, "%s: the GPU took %zu of %zu random problems", preset, took, runs);
  printf("%-20s random problems on the GPU: %zu of %zu, backward %zu\n", preset, took, runs, btook);
}

int main(void) {
  if (aa_gemm_cuda_devices() == 0) {
    printf("tattn_cuda: no CUDA GPU (or a build without CUDA): skipped\n");
    return AA_TEST_SKIP;
  }
  aa_pcg32_t rng;
  uint64_t seed = aa_test_seed("tattn_cuda");
  aa_pcg32_seed(&rng, seed, 28);
  for (size_t p = 0; p < aa_recipe_preset_count(); p++) {
    const char *name = aa_recipe_preset_name(p);
    size_t took = 0, btook = 0, runs = sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < runs; s++) {
      took += (size_t)compare(name, &shapes[s], &rng, AA_ATTN_DEVICE_CUDA);
      btook += (size_t)cases_bwd_took;
    }
    printf("%-20s forward on the GPU for %zu of %zu problems, backward %zu\n", name, took, runs, btook);
  }
  static const char *const gpu_presets[] = {"fa2-h100",   "fa2-h100-bi", "fa2",       "efficient-h100",
                                            "cudnn-h100", "flex-h100",   "naive-bf16"};
  for (size_t p = 0; p < sizeof gpu_presets / sizeof gpu_presets[0]; p++)
    random_runs(gpu_presets[p], &rng, 0);
  /* the tlx family in BF16: their fixed shift 0 overflows FP16 weights on some draws (O is NaN on the CPU too, and a
     backward with a non-finite pair runs on the CPU, which records where: cuda_bwd.c) */
  static const char *const bf16_presets[] = {"recip",   "recip-causal", "tlx-dq",    "tlx-dq-causal",
                                             "tlx-exp", "tlx",          "tlx-causal"};
  for (size_t p = 0; p < sizeof bf16_presets / sizeof bf16_presets[0]; p++)
    random_runs(bf16_presets[p], &rng, 1);
  printf("rows redone on the host after a doubtful libm value (exact-exp presets): %zu, backward pairs %zu\n",
         cases_redone, cases_pairs_redone);
  printf("seed %llu\n%d passed, %d failed\n", (unsigned long long)seed, cases_checks - aa_test_failures,
         aa_test_failures);
  return aa_test_failures ? 1 : 0;
}
