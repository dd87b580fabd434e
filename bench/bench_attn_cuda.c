/* attnacc: a preset's emulation (forward and backward; fa2-h100 by default) on the GPU beside the CPU (same build,
 * same bits), one head. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
/* usage: bench_attn_cuda [N D [REPS [CPU_MAX_N [PRESET]]]] (default 4096 128 3 8192 fa2-h100): one head on the GPU
   (cuda-emu, host threads, without one), n_q = n_k = N, dense and causal, BF16 inputs and dO from a PCG stream,
   forward and backward timed together (item 9 of issue 28); the GPU's median of REPS runs; the CPU runs once when N
   <= CPU_MAX_N, and then the outputs must have the same bits. One line per mask; exit 1 on a bit difference or a
   failed run. */
#include <stdio.h>
#include <stdlib.h>

#include "attn.h"
#include "bench-util.h"
#include "gemm.h"
#include "rng.h"

static void fill(aa_tensor_t *t, size_t n, size_t d, double scale, aa_pcg32_t *rng) {
  size_t s[3] = {1, n, d};
  aa_round_opts_t o = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  aa_tensor_alloc(t, 3, s, AA_FMT_BF16);
  for (size_t i = 0; i < n * d; i++)
    t->data[i] = aa_round(scale * ((double)aa_pcg32_next(rng) / 4294967296.0 * 2 - 1), &o, NULL);
}

static int same(const aa_tensor_t *a, const aa_tensor_t *b) {
  for (size_t i = 0; i < aa_tensor_numel(a); i++)
    if (memcmp(&a->data[i], &b->data[i], sizeof(double)) != 0) return 0;
  return 1;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 4096, d = argc > 2 ? strtoul(argv[2], NULL, 10) : 128;
  int reps = argc > 3 ? atoi(argv[3]) : 3;
  size_t cpu_max = argc > 4 ? strtoul(argv[4], NULL, 10) : 8192;
  const char *preset = argc > 5 ? argv[5] : "fa2-h100";
  if (n == 0 || d == 0 || d > 256 || reps < 1 || reps > 128) {
    fprintf(stderr, "usage: bench_attn_cuda [N D [REPS [CPU_MAX_N [PRESET]]]] (1 <= D <= 256, 1 <= REPS <= 128)\n");
    return 2;
  }
  /* without a GPU the GPU path's code runs on host threads (cuda-emu): the bench still checks its bits */
  aa_attn_device_t dev = aa_gemm_cuda_devices() > 0 ? AA_ATTN_DEVICE_CUDA : AA_ATTN_DEVICE_CUDA_EMU;
  if (dev == AA_ATTN_DEVICE_CUDA_EMU && argc < 2) { /* make bench on a machine without a GPU: named sizes only */
    printf("bench_attn_cuda: no CUDA GPU: skipped (give N D to time the GPU path's code on host threads)\n");
    return 77;
  }
  aa_recipe_t r;
  aa_error_t err = {{0}};
  aa_pcg32_t rng;
  aa_tensor_t q, k, v, dO;
  aa_pcg32_seed(&rng, 28, 9);
  if (aa_recipe_preset(&r, preset, &err) != AA_OK) return fprintf(stderr, "%s\n", err.msg), 2;
  fill(&q, n, d, 3, &rng), fill(&k, n, d, 3, &rng), fill(&v, n, d, 1, &rng), fill(&dO, n, d, 1, &rng);
  int bad = 0;
  for (int causal = 0; causal < 2; causal++) {
    aa_problem_t pb;
    aa_attn_result_t g, c;
    double t[128], tc = NAN;
    aa_problem_init(&pb, n, n, d, 1, 1);
    pb.causal = causal;
    for (int i = 0; i < reps; i++) {
      double t0 = bench_now();
      if (aa_attn_run_device(&g, &pb, &r, &q, &k, &v, &dO, dev, &err) != AA_OK)
        return fprintf(stderr, "GPU run: %s\n", err.msg), 1;
      t[i] = bench_now() - t0;
      if (i + 1 < reps) aa_attn_result_free(&g);
    }
    const char *verdict = "CPU not run";
    if (n <= cpu_max) {
      double t0 = bench_now();
      if (aa_attn_run_device(&c, &pb, &r, &q, &k, &v, &dO, AA_ATTN_DEVICE_CPU, &err) != AA_OK)
        return fprintf(stderr, "CPU run: %s\n", err.msg), 1;
      tc = bench_now() - t0;
      int ok =
          same(&g.o, &c.o) && same(&g.lse, &c.lse) && same(&g.dq, &c.dq) && same(&g.dk, &c.dk) && same(&g.dv, &c.dv);
      verdict = ok ? "same bits" : "BITS DIFFER";
      bad |= !ok;
      aa_attn_result_free(&c);
    }
    printf("%s forward+backward n %zu d %zu %s: %s %.3f s (median of %d, ran on %s and %s), CPU %.3f s, "
           "%.1fx; %s\n",
           preset, n, d, causal ? "causal" : "dense", aa_attn_device_name(dev), bench_median(t, reps), reps,
           aa_attn_device_name(g.fwd_device), aa_attn_device_name(g.bwd_device), tc, tc / bench_median(t, reps),
           verdict);
    bad |= g.fwd_device != dev || g.bwd_device != dev;
    aa_attn_result_free(&g);
  }
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v), aa_tensor_free(&dO);
  return bad;
}
