/* attnacc: what tests/tattn_cuda_emu and tests/tattn_cuda share: problem shapes, random inputs, the CPU against
 * another device, bit for bit. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_TESTS_TATTN_CUDA_CASES_H
#define AA_TESTS_TATTN_CUDA_CASES_H
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "rng.h"
#include "tests.h"

/* One random problem: sizes, mask, GQA and input format. */
typedef struct {
  size_t n_q, n_k, d, heads, kv_heads;
  int causal;
  aa_fmt_t io;
} shape_t;

static const shape_t shapes[] = {
    {70, 1000, 64, 2, 1, 0, AA_FMT_BF16}, /* GQA; four key blocks of 256: split-KV with a combine */
    {70, 1000, 64, 2, 1, 1, AA_FMT_BF16}, /* the same causal (bottom-right: the first rows see few keys) */
    {129, 77, 128, 1, 1, 1, AA_FMT_FP16}, /* one split: 128 x 64 tiles, a partial q tile, odd lengths */
    {33, 515, 40, 3, 3, 0, AA_FMT_FP16},  /* d = 40 (hdim 64 kernel), n_k odd */
    {5, 300, 256, 2, 2, 1, AA_FMT_BF16},  /* d = 256, n_q < n_k causal */
    {200, 130, 96, 4, 2, 1, AA_FMT_FP16}, /* n_q > n_k causal: rows with no key */
    /* dense d = 128 GQA: tlx's dense route (recip, quadratic exp, tile_k 256: three dQ partials, the last short) */
    {130, 520, 128, 2, 1, 0, AA_FMT_BF16},
};

/* Values of io spread over [-scale, scale): scores large enough for the exp to matter. */
static void fill(aa_tensor_t *t, size_t h, size_t n, size_t d, aa_fmt_t io, double scale, aa_pcg32_t *rng) {
  size_t s[3] = {h, n, d};
  aa_tensor_alloc(t, 3, s, io);
  aa_round_opts_t o = {io, AA_RND_NE, 1, 0};
  for (size_t i = 0; i < h * n * d; i++)
    t->data[i] = aa_round(scale * ((double)aa_pcg32_next(rng) / 4294967296.0 * 2 - 1), &o, NULL);
}

static int same_tensor(const aa_tensor_t *a, const aa_tensor_t *b, size_t *first) {
  size_t n = aa_tensor_numel(a);
  for (size_t i = 0; i < n; i++)
    if (!aa_test_same(a->data[i], b->data[i])) {
      *first = i;
      return 0;
    }
  return 1;
}

/* The fixed-shift and guarded forwards' per-row checkpoint and per-tile flags (forward_fixed.c), CPU run a against
   run b; rows and tiles counted where they are the same (NULL arrays of other recipes compare equal). */
static int same_shifted(const aa_attn_result_t *a, const aa_attn_result_t *b) {
  size_t nr = a->recip.data != NULL ? aa_tensor_numel(&a->recip) : 0, i = 0;
  if ((a->row_ckpt == NULL) != (b->row_ckpt == NULL) || a->fwd_q_tiles != b->fwd_q_tiles) return 0;
  if (a->tiles_flagged != b->tiles_flagged || a->rows_recovered != b->rows_recovered ||
      a->contractions_skipped != b->contractions_skipped)
    return 0;
  if (nr == 0) return 1;
  if (!same_tensor(&a->recip, &b->recip, &i) || !same_tensor(&a->shift, &b->shift, &i)) return 0;
  return memcmp(a->row_ckpt, b->row_ckpt, nr) == 0 &&
         memcmp(a->tile_flagged, b->tile_flagged, a->recip.shape[0] * a->fwd_q_tiles) == 0; /* heads x tiles */
}

/* Spread of Q and K (3: scores large enough for the exp to matter; larger values push the fixed-shift weights out
   of their range, so that tiles are flagged and recovered). */
static double cases_qk_scale = 3.0;
static size_t cases_flagged = 0, cases_recovered = 0; /* the last compare's CPU run: tiles flagged, rows recovered */

/* Checks made and failed (tests.h's AA_CHECK counts the failures): GPU-side tests print both. */
static int cases_checks = 0;
static size_t cases_redone = 0;       /* rows the host redid after a doubtful libm rounding (aa_attn_result_t) */
static int cases_bwd_took = 0;        /* the last compare's backward ran on the other device */
static int cases_bwd_finite = 0;      /* the last compare's CPU run created no NaN or Inf (attn.h aa_attn_first_t) */
static size_t cases_pairs_redone = 0; /* the same for the backward's pairs (aa_attn_result_t) */
#define CASE_CHECK(...)                                                                                              \
  do {                                                                                                               \
    cases_checks++;                                                                                                  \
    AA_CHECK(__VA_ARGS__);                                                                                           \
  } while (0)

/* The backward's outputs and counters of the CPU run a against run b on dev. */
static void compare_bwd(const char *spec, const shape_t *sh, const aa_attn_result_t *a, const aa_attn_result_t *b,
                        aa_attn_device_t dev) {
  static const char *const names[] = {"dQ", "dK", "dV"};
  const aa_tensor_t *ta[] = {&a->dq, &a->dk, &a->dv}, *tb[] = {&b->dq, &b->dk, &b->dv};
  cases_bwd_took = b->bwd_device == dev;
  cases_bwd_finite = !a->first.found;
  cases_pairs_redone += b->bwd_pairs_redone;
  CASE_CHECK(a->bwd_device == AA_ATTN_DEVICE_CPU && (cases_bwd_took || b->bwd_device == AA_ATTN_DEVICE_CPU),
             "%s: backward devices %s and %s", spec, aa_attn_device_name(a->bwd_device),
             aa_attn_device_name(b->bwd_device));
  for (int t = 0; t < 3; t++) {
    size_t i = 0;
    CASE_CHECK(same_tensor(ta[t], tb[t], &i), "%s n_q %zu n_k %zu d %zu causal %d: %s[%zu] = %a on the CPU, %a on %s",
               spec, sh->n_q, sh->n_k, sh->d, sh->causal, names[t], i, ta[t]->data[i], tb[t]->data[i],
               aa_attn_device_name(b->bwd_device));
  }
  CASE_CHECK(a->tiles_skipped == b->tiles_skipped && a->dq_reduce.tiles == b->dq_reduce.tiles &&
                 a->dq_reduce.partials == b->dq_reduce.partials,
             "%s: tiles skipped %zu/%zu, dq_reduce tiles %llu/%llu partials %llu/%llu", spec, a->tiles_skipped,
             b->tiles_skipped, (unsigned long long)a->dq_reduce.tiles, (unsigned long long)b->dq_reduce.tiles,
             (unsigned long long)a->dq_reduce.partials, (unsigned long long)b->dq_reduce.partials);
  const aa_reduce_stats_t *ra = &a->dq_reduce, *rb = &b->dq_reduce; /* the fixed dq_reduce's */
  CASE_CHECK(ra->conv_failures == rb->conv_failures && ra->sum_failures == rb->sum_failures &&
                 ra->budget_failures == rb->budget_failures && ra->fp64_recomputes == rb->fp64_recomputes,
             "%s: dq_reduce conversion, sum, budget failures and FP64 recomputes %llu/%llu/%llu/%llu on the CPU, "
             "%llu/%llu/%llu/%llu",
             spec, (unsigned long long)ra->conv_failures, (unsigned long long)ra->sum_failures,
             (unsigned long long)ra->budget_failures, (unsigned long long)ra->fp64_recomputes,
             (unsigned long long)rb->conv_failures, (unsigned long long)rb->sum_failures,
             (unsigned long long)rb->budget_failures, (unsigned long long)rb->fp64_recomputes);
}

/* The CPU against dev for one preset on one shape; returns 1 when the GPU path took the forward. */
static int compare(const char *preset, const shape_t *sh, aa_pcg32_t *rng, aa_attn_device_t dev) {
  char spec[128];
  aa_recipe_t r;
  aa_problem_t pb;
  aa_error_t err = {{0}};
  aa_tensor_t q, k, v, dO;
  aa_attn_result_t a, b;
  int took = 0;
  if (sh->io == AA_FMT_FP16)
    snprintf(spec, sizeof spec, "%s:io=fp16,fwd.p_fmt=fp16,q_scale_fmt=fp16", preset);
  else
    snprintf(spec, sizeof spec, "%s", preset);
  if (aa_recipe_from_spec(&r, spec, &err) != AA_OK) return 0; /* a preset without those keys */
  aa_problem_init(&pb, sh->n_q, sh->n_k, sh->d, sh->heads, sh->kv_heads);
  pb.causal = sh->causal;
  fill(&q, sh->heads, sh->n_q, sh->d, r.io_fmt, cases_qk_scale, rng);
  fill(&k, sh->kv_heads, sh->n_k, sh->d, r.io_fmt, cases_qk_scale, rng);
  fill(&v, sh->kv_heads, sh->n_k, sh->d, r.io_fmt, 1.0, rng);
  fill(&dO, sh->heads, sh->n_q, sh->d, r.io_fmt, 1.0, rng);
  int sa = aa_attn_run_device(&a, &pb, &r, &q, &k, &v, &dO, AA_ATTN_DEVICE_CPU, &err);
  int sb = aa_attn_run_device(&b, &pb, &r, &q, &k, &v, &dO, dev, &err);
  cases_bwd_took = cases_bwd_finite = 0;
  CASE_CHECK(sa == sb, "%s n_q %zu n_k %zu d %zu: status %d on the CPU, %d on the other device", spec, sh->n_q,
             sh->n_k, sh->d, sa, sb);
  if (sa == AA_OK && sb == AA_OK) {
    size_t i = 0;
    took = b.fwd_device == dev;
    cases_redone += b.fwd_rows_redone;
    CASE_CHECK(a.fwd_device == AA_ATTN_DEVICE_CPU, "%s: the CPU run says %s", spec,
               aa_attn_device_name(a.fwd_device));
    CASE_CHECK(took || b.fwd_device == AA_ATTN_DEVICE_CPU, "%s: %s run says %s", spec, aa_attn_device_name(dev),
               aa_attn_device_name(b.fwd_device));
    CASE_CHECK(same_tensor(&a.o, &b.o, &i), "%s n_q %zu n_k %zu d %zu causal %d: O[%zu] = %a on the CPU, %a on %s",
               spec, sh->n_q, sh->n_k, sh->d, sh->causal, i, a.o.data[i], b.o.data[i],
               aa_attn_device_name(b.fwd_device));
    CASE_CHECK(same_tensor(&a.lse, &b.lse, &i), "%s n_q %zu n_k %zu causal %d: LSE[%zu] = %a on the CPU, %a on %s",
               spec, sh->n_q, sh->n_k, sh->causal, i, a.lse.data[i], b.lse.data[i],
               aa_attn_device_name(b.fwd_device));
    CASE_CHECK(a.p_cast == b.p_cast && a.p_over == b.p_over && a.p_under == b.p_under && a.p_max == b.p_max,
               "%s: P casts %zu/%zu/%zu max %a on the CPU, %zu/%zu/%zu max %a", spec, a.p_cast, a.p_over, a.p_under,
               a.p_max, b.p_cast, b.p_over, b.p_under, b.p_max);
    cases_flagged = a.tiles_flagged, cases_recovered = a.rows_recovered;
    CASE_CHECK(same_shifted(&a, &b),
               "%s n_q %zu n_k %zu causal %d: saved (shift, 1/l), flags or counts differ (tiles flagged %zu/%zu, "
               "rows recovered %zu/%zu, contractions skipped %zu/%zu)",
               spec, sh->n_q, sh->n_k, sh->causal, a.tiles_flagged, b.tiles_flagged, a.rows_recovered,
               b.rows_recovered, a.contractions_skipped, b.contractions_skipped);
    compare_bwd(spec, sh, &a, &b, dev);
  }
  if (sa == AA_OK) aa_attn_result_free(&a);
  if (sb == AA_OK) aa_attn_result_free(&b);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v), aa_tensor_free(&dO);
  return took;
}

#endif
