/* attnacc: tests of aa_batch_decide and aa_batch_forward: FA2's split decision from the whole batch, and its bits. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attnacc.h"
#include "tests.h"

/* Split counts worked by hand from flash_api.cpp num_splits_heuristic (units
   >= 0.8 x 264 -> 1; else the smallest eligible s whose efficiency
   waves / ceil(waves), waves = units s / 264, reaches 0.85 of the best;
   s is eligible when ceil(blocks / s) != ceil(blocks / (s - 1))) and
   set_params_splitkv (units = batch x heads x ceil(n_q / 64), 128-key
   blocks at d = 128, 2 x 132 "SMs" on the H200). */
static const struct {
  const char *what;
  size_t n_q, n_k, heads, kv_heads, batch;
  size_t units, splits;
} by_hand[] = {
    /* 4 key blocks: s = 3 is not eligible (ceil(4/3) = ceil(4/2) = 2); eff s = 1, 2, 4: 4/264, 8/264, 16/264;
       0.85 x 16/264 is only reached at 4 */
    {"n_q 128, 2 heads, B 1", 128, 512, 2, 2, 1, 4, 4},
    {"n_q 128, 2 heads, B 2", 128, 512, 2, 2, 2, 8, 4},
    /* 64 units: s = 4 gives 256 / 264 = 0.970, the best; s = 2 gives 0.485 < 0.824 */
    {"n_q 128, 2 heads, B 16", 128, 512, 2, 2, 16, 64, 4},
    /* 128 units: s = 2 gives 256 / 264 = 0.970, s = 4 gives 512 / 264 / 2 = 0.970 too: the first wins */
    {"n_q 128, 2 heads, B 32", 128, 512, 2, 2, 32, 128, 2},
    /* 256 units >= 211.2: one split */
    {"n_q 128, 2 heads, B 64", 128, 512, 2, 2, 64, 256, 1},
    /* 16 heads x 16 query blocks = 256 units fill the GPU at B = 1 already */
    {"n_q 1000, 16 heads, B 1", 1000, 512, 16, 16, 1, 256, 1},
    {"n_q 1000, 16 heads, B 128", 1000, 512, 16, 16, 128, 32768, 1},
    /* decode with GQA 8:1, transposed to 1 head of 8 rows (mha_fwd seqlenq_ngroups_swapped): units = B;
       32 blocks, eligible s: 1..8, 11, 16, 32; eff = B s / 264 below one wave, 0.85 of s = 32's first
       reached at 32 (27.2 <= s) */
    {"decode GQA 8:1, B 1", 1, 4096, 8, 1, 1, 1, 32},
    /* without the transpose it would be 16 units and 16 splits */
    {"decode GQA 8:1, B 2", 1, 4096, 8, 1, 2, 2, 32},
    /* 16 units: s = 16 gives 256/264 = 0.970, s = 32 gives 512/264/2 = 0.970: 16 first; s = 11 gives 0.667 */
    {"decode GQA 8:1, B 16", 1, 4096, 8, 1, 16, 16, 16},
    /* MHA decode, 2 heads: 2 B units; B = 64: 128 units, 4 blocks: s = 2 gives 0.970 */
    {"decode MHA 2 heads, B 64", 1, 512, 2, 2, 64, 128, 2},
};

static void test_decisions(const aa_recipe_t *r) {
  for (size_t i = 0; i < sizeof by_hand / sizeof by_hand[0]; i++) {
    aa_problem_t pb;
    aa_problem_init(&pb, by_hand[i].n_q, by_hand[i].n_k, 128, by_hand[i].heads, by_hand[i].kv_heads);
    aa_batch_t b = {.batch = by_hand[i].batch, .num_sms = 132};
    aa_batch_decision_t dec;
    aa_error_t err = {{0}};
    int st = aa_batch_decide(&dec, &pb, r, &b, &err);
    AA_CHECK(st == AA_OK, "%s: decide failed: %s", by_hand[i].what, err.msg);
    if (st != AA_OK) continue;
    AA_CHECK(dec.batch_dependent && dec.units == by_hand[i].units && dec.num_splits == by_hand[i].splits,
             "%s: units %zu, %zu splits; by hand %zu units, %zu splits", by_hand[i].what, dec.units, dec.num_splits,
             by_hand[i].units, by_hand[i].splits);
    /* one split runs the standard kernel, 128 x 64 at d = 128; more run splitkv's 64 x 128 */
    size_t tq = dec.num_splits > 1 ? 64 : 128, tk = dec.num_splits > 1 ? 128 : 64;
    AA_CHECK(dec.fwd_tile_q == tq && dec.fwd_tile_k == tk, "%s: tiles %zux%zu, expected %zux%zu", by_hand[i].what,
             dec.fwd_tile_q, dec.fwd_tile_k, tq, tk);
  }
}

static int same_bits(const aa_tensor_t *a, const aa_tensor_t *b, size_t *differ) {
  *differ = 0;
  for (size_t e = 0; e < aa_tensor_numel(a); e++)
    *differ += a->data[e] != b->data[e];
  return *differ == 0;
}

/* q [sq], k and v [sk], BF16, normal draws from the stream (seed, tag); 0, or -1 out of memory. */
static int draw_qkv(aa_tensor_t *q, aa_tensor_t *k, aa_tensor_t *v, const size_t sq[3], const size_t sk[3],
                    uint64_t seed, uint64_t tag) {
  aa_pcg64_t rng;
  aa_tensor_t *in[3] = {q, k, v};
  aa_rng_derive(&rng, seed, &tag, 1);
  if (aa_tensor_alloc(q, 3, sq, AA_FMT_BF16) || aa_tensor_alloc(k, 3, sk, AA_FMT_BF16) ||
      aa_tensor_alloc(v, 3, sk, AA_FMT_BF16))
    return -1;
  for (int t = 0; t < 3; t++) {
    for (size_t e = 0; e < aa_tensor_numel(in[t]); e++)
      in[t]->data[e] = aa_pcg64_normal(&rng);
    aa_tensor_round(in[t], AA_FMT_BF16);
  }
  return 0;
}

/* The bits: B = 2 (same 4 splits as B = 1) keeps every bit, B = 32 (2 splits) and B = 64 (the standard kernel)
   change some; B = 1 through the batch path equals aa_attn_run on the problem alone. */
static void test_bits(const aa_recipe_t *r, uint64_t seed) {
  aa_problem_t pb;
  aa_problem_init(&pb, 128, 512, 128, 2, 2);
  aa_tensor_t q = {0}, k = {0}, v = {0};
  size_t sq[3] = {2, 128, 128}, sk[3] = {2, 512, 128};
  if (draw_qkv(&q, &k, &v, sq, sk, seed, 1) != 0) {
    AA_FAIL("bits: out of memory");
    aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v);
    return;
  }
  size_t batches[4] = {1, 2, 32, 64};
  int want_same[4] = {1, 1, 0, 0};
  aa_attn_result_t res[4], alone;
  memset(res, 0, sizeof res);
  memset(&alone, 0, sizeof alone);
  aa_error_t err = {{0}};
  for (int i = 0; i < 4; i++) {
    aa_batch_t b = {.batch = batches[i], .num_sms = 132};
    aa_batch_decision_t dec;
    if (aa_batch_forward(&res[i], &dec, &pb, r, &b, &q, &k, &v, &err) != AA_OK) {
      AA_FAIL("bits: B %zu: %s (seed %llu)", batches[i], err.msg, (unsigned long long)seed);
      goto done;
    }
  }
  if (aa_attn_run(&alone, &pb, r, &q, &k, &v, NULL, &err) != AA_OK) {
    AA_FAIL("bits: aa_attn_run: %s", err.msg);
    goto done;
  }
  size_t differ;
  AA_CHECK(same_bits(&res[0].o, &alone.o, &differ), "bits: B = 1 differs from aa_attn_run alone in %zu elements",
           differ);
  for (int i = 1; i < 4; i++)
    AA_CHECK(same_bits(&res[i].o, &res[0].o, &differ) == want_same[i],
             "bits: B %zu %s B = 1 (%zu elements differ; seed %llu)", batches[i],
             want_same[i] ? "should equal" : "should differ from", differ, (unsigned long long)seed);
done:
  for (int i = 0; i < 4; i++)
    aa_attn_result_free(&res[i]);
  aa_attn_result_free(&alone);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v);
}

/* Decode with GQA (n_q 1, 16 query heads on 1 KV head, n_k 4096, d 128): mha_fwd folds the 16 heads into query
   rows (seqlenq_ngroups_swapped), so FA2 sees 1 head x 1 m-block = 1 work unit over 32 key blocks of 128. By hand
   from num_splits_heuristic with 264 "SMs": efficiency s / 264 grows with s, so every eligible s >= 0.85 x 32 = 27.2
   qualifies, and of 27..32 only s = 32 is eligible (ceil(32/s) != ceil(32/(s-1)) fails for 27..31): 32 splits.
   Without the fold it would be 16 heads = 16 units and 16 splits. aa_attn_run on the problem alone (tiling = fa2)
   must take the same decision as the batch path at B = 1: the same bits. */
static void test_decode_gqa(const aa_recipe_t *r, uint64_t seed) {
  aa_problem_t pb;
  aa_problem_init(&pb, 1, 4096, 128, 16, 1);
  aa_tensor_t q = {0}, k = {0}, v = {0};
  size_t sq[3] = {16, 1, 128}, sk[3] = {1, 4096, 128};
  aa_attn_result_t one = {0}, alone = {0};
  aa_batch_t b = {.batch = 1, .num_sms = 132};
  aa_batch_decision_t dec;
  aa_error_t err = {{0}};
  size_t differ;
  if (draw_qkv(&q, &k, &v, sq, sk, seed, 2) != 0) {
    AA_FAIL("decode: out of memory");
    goto done;
  }
  if (aa_batch_forward(&one, &dec, &pb, r, &b, &q, &k, &v, &err) != AA_OK ||
      aa_attn_run(&alone, &pb, r, &q, &k, &v, NULL, &err) != AA_OK) {
    AA_FAIL("decode: %s", err.msg);
    goto done;
  }
  AA_CHECK(dec.ngroups_swapped && dec.num_splits == 32, "decode: swapped %d, %zu splits (want 1, 32)",
           dec.ngroups_swapped, dec.num_splits);
  AA_CHECK(same_bits(&one.o, &alone.o, &differ), "decode: aa_attn_run alone differs from B = 1 in %zu elements",
           differ);
done:
  aa_attn_result_free(&one);
  aa_attn_result_free(&alone);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v);
}

/* The split-KV combine against the source's formula (FA2 flash_fwd_kernel.h, combine_attn_seqk_parallel): each
   of 3 splits holds one key (fwd.tile_k = 1), so split s has lse_s = s_s and O_s = v_s exactly (one key: the
   row maximum is the score, the weight exp2(fma(s, c, -fl(s c))) rounds to 1 in FP32). The combine then does,
   in FP32 with the recipe's exp (correctly rounded, fa2 has no sm90 SFU model):
     m = max_s lse_s; l = sum_s exp(lse_s - m) in split order; lse = log(l) + m;
     O = sum_s exp(lse_s - lse) * O_s as FMAs in split order, stored in BF16.
   Written here in C float and double, independent of the library's code. */
static void test_combine(void) {
  static const double sc[3] = {0.5, -1.25, 2.0}, vv[3][2] = {{1.5, -0.75}, {0.375, 2.25}, {-3, 0.625}};
  aa_problem_t pb;
  aa_recipe_t r;
  aa_error_t err = {{0}};
  aa_tensor_t q = {0}, k = {0}, v = {0};
  size_t sq[3] = {1, 1, 2}, sk[3] = {1, 3, 2};
  aa_attn_result_t res = {0};
  aa_problem_init(&pb, 1, 3, 2, 1, 1);
  pb.scale_default = 0;
  pb.scale = 1;
  if (aa_recipe_from_spec(&r, "fa2:fwd.splits=3,fwd.tile_k=1", &err) != AA_OK ||
      aa_tensor_alloc(&q, 3, sq, AA_FMT_BF16) || aa_tensor_alloc(&k, 3, sk, AA_FMT_BF16) ||
      aa_tensor_alloc(&v, 3, sk, AA_FMT_BF16)) {
    AA_FAIL("combine: setup: %s", err.msg);
    goto done;
  }
  q.data[0] = 1, q.data[1] = 0;
  for (int j = 0; j < 3; j++)
    k.data[2 * j] = sc[j], k.data[2 * j + 1] = 0, v.data[2 * j] = vv[j][0], v.data[2 * j + 1] = vv[j][1];
  if (aa_attn_run(&res, &pb, &r, &q, &k, &v, NULL, &err) != AA_OK) {
    AA_FAIL("combine: aa_attn_run: %s", err.msg);
    goto done;
  }
  float m = 2.0f, l = 0, lse, acc[2] = {0, 0};
  for (int j = 0; j < 3; j++)
    l = l + (float)exp((double)((float)sc[j] - m));
  lse = (float)log((double)l) + m;
  for (int j = 0; j < 3; j++) {
    float w = (float)exp((double)((float)sc[j] - lse));
    for (int c = 0; c < 2; c++)
      acc[c] = fmaf(w, (float)vv[j][c], acc[c]);
  }
  AA_CHECK(res.lse.data[0] == (double)lse, "combine: lse %a, the source's formula gives %a", res.lse.data[0],
           (double)lse);
  for (int c = 0; c < 2; c++) {
    double want = (double)aa_bf16_rne(acc[c]);
    AA_CHECK(res.o.data[c] == want, "combine: o[%d] = %a, the source's formula gives %a", c, res.o.data[c], want);
  }
done:
  aa_attn_result_free(&res);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v);
}

/* r's decision for pb at B = 1, 2, 4, ..., 128: never batch-dependent, always want_splits splits over key tiles
   of want_tile_k. */
static void batch_free_decisions(const aa_problem_t *pb, const aa_recipe_t *r, size_t want_splits,
                                 size_t want_tile_k) {
  aa_error_t err = {{0}};
  for (size_t B = 1; B <= 128; B *= 2) {
    aa_batch_t bt = {.batch = B, .num_sms = 132};
    aa_batch_decision_t dec;
    int st = aa_batch_decide(&dec, pb, r, &bt, &err);
    AA_CHECK(st == AA_OK && !dec.batch_dependent && dec.num_splits == want_splits && dec.fwd_tile_k == want_tile_k,
             "%s at B %zu, n_k %zu: batch_dependent %d, %zu splits, key tile %zu (want 0, %zu, %zu): %s", r->name, B,
             pb->n_k, dec.batch_dependent, dec.num_splits, dec.fwd_tile_k, want_splits, want_tile_k, err.msg);
  }
}

/* A fixed split size (fwd.split_keys, preset fa2-h100-bi): ceil(n_k / S) splits at every batch size, reported
   batch-independent; S = 256 keys over 128-key tiles cuts n_k = 512 exactly as fwd.splits = 2 does (2 blocks
   each), so the bits are those; an S that is not a multiple of the key tile is refused. */
static void test_split_keys(void) {
  aa_problem_t pb;
  aa_recipe_t bi, a, b;
  aa_error_t err = {{0}};
  aa_tensor_t q = {0}, k = {0}, v = {0};
  size_t sq[3] = {1, 64, 64}, sk[3] = {1, 512, 64}, diff;
  aa_attn_result_t ra = {0}, rb = {0};
  aa_problem_init(&pb, 64, 20000, 128, 2, 2);
  if (aa_recipe_preset(&bi, "fa2-h100-bi", &err) != AA_OK) {
    AA_FAIL("split_keys: preset fa2-h100-bi: %s", err.msg);
    return;
  }
  batch_free_decisions(&pb, &bi, 5, 128);
  aa_problem_init(&pb, 64, 512, 64, 1, 1);
  if (aa_recipe_from_spec(&a, "fa2:fwd.split_keys=256,fwd.tile_k=128", &err) != AA_OK ||
      aa_recipe_from_spec(&b, "fa2:fwd.splits=2,fwd.tile_k=128", &err) != AA_OK ||
      aa_tensor_alloc(&q, 3, sq, AA_FMT_BF16) || aa_tensor_alloc(&k, 3, sk, AA_FMT_BF16) ||
      aa_tensor_alloc(&v, 3, sk, AA_FMT_BF16)) {
    AA_FAIL("split_keys: setup: %s", err.msg);
    goto done;
  }
  aa_tensor_t *in[3] = {&q, &k, &v};
  for (int t = 0; t < 3; t++)
    for (size_t e = 0; e < aa_tensor_numel(in[t]); e++)
      in[t]->data[e] = aa_bf16_rne((float)sin(0.37 * (double)e + t));
  if (aa_attn_run(&ra, &pb, &a, &q, &k, &v, NULL, &err) != AA_OK ||
      aa_attn_run(&rb, &pb, &b, &q, &k, &v, NULL, &err) != AA_OK) {
    AA_FAIL("split_keys: %s", err.msg);
    goto done;
  }
  AA_CHECK(same_bits(&ra.o, &rb.o, &diff), "split_keys 256 differs from fwd.splits 2 at n_k 512 in %zu elements",
           diff);
  aa_attn_result_free(&ra);
  AA_CHECK(aa_recipe_from_spec(&a, "fa2:fwd.split_keys=200,fwd.tile_k=128", &err) == AA_OK &&
               aa_attn_run(&ra, &pb, &a, &q, &k, &v, NULL, &err) == AA_EINVAL && strstr(err.msg, "multiple"),
           "split_keys 200 over 128-key tiles not refused: %s", err.msg);
done:
  aa_attn_result_free(&ra);
  aa_attn_result_free(&rb);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v);
}

/* A recipe with fixed tiles and no split heuristic (fa2) ignores the batch; a varlen problem and B = 0 are refused.
 */
static void test_fixed_and_refused(void) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  aa_problem_t pb;
  aa_problem_init(&pb, 128, 512, 128, 2, 2);
  if (aa_recipe_preset(&r, "fa2", &err) != AA_OK) {
    AA_FAIL("preset fa2: %s", err.msg);
    return;
  }
  batch_free_decisions(&pb, &r, r.fwd_splits > 1 ? r.fwd_splits : 1, r.fwd_tile_k);
  aa_batch_t zero = {.batch = 0, .num_sms = 132};
  aa_batch_decision_t dec;
  AA_CHECK(aa_batch_decide(&dec, &pb, &r, &zero, &err) == AA_EINVAL && strstr(err.msg, "batch size"),
           "B = 0 not refused: %s", err.msg);
}

int main(void) {
  uint64_t seed = aa_test_seed("tinvariance");
  aa_recipe_t r;
  aa_error_t err = {{0}};
  if (aa_recipe_preset(&r, "fa2-h100", &err) != AA_OK) {
    AA_FAIL("preset fa2-h100: %s", err.msg);
    return aa_test_finish("tinvariance");
  }
  test_decisions(&r);
  test_bits(&r, seed);
  test_decode_gqa(&r, seed);
  test_combine();
  test_split_keys();
  test_fixed_and_refused();
  return aa_test_finish("tinvariance");
}
