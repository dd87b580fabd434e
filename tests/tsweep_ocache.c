/* attnacc: tests of the oracle cache: bit-exact round trip, key sensitivity, corrupt/truncated/foreign entries are
 * misses. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "rng.h"
#include "sweep.h"
#include "tests.h"

#define DIR "tsweep_ocache.dir"

static void fill(aa_tensor_t *t, int ndim, size_t a, size_t b, size_t c, aa_fmt_t fmt, aa_pcg64_t *rng) {
  size_t shape[3] = {a, b, c};
  aa_tensor_alloc(t, ndim, shape, fmt);
  size_t n = aa_tensor_numel(t);
  for (size_t i = 0; i < n; i++) {
    uint64_t u = aa_pcg64_next(rng); /* arbitrary bit patterns: NaN payloads, subnormals, -0 included */
    memcpy(&t->data[i], &u, 8);
  }
}

static int same_bits(const aa_tensor_t *a, const aa_tensor_t *b) {
  if (a->ndim != b->ndim || a->fmt != b->fmt || (a->data == NULL) != (b->data == NULL)) return 0;
  for (int i = 0; i < 3; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  size_t n = aa_tensor_numel(a);
  return n == 0 || memcmp(a->data, b->data, n * sizeof(double)) == 0;
}

static void free_res(aa_oracle_result_t *r) {
  aa_oracle_out_t *o[6] = {&r->o, &r->lse, &r->dq, &r->dk, &r->dv, &r->dsinks};
  for (int i = 0; i < 6; i++) {
    aa_tensor_free(&o[i]->val);
    aa_tensor_free(&o[i]->fp32);
    aa_tensor_free(&o[i]->bf16);
  }
}

static int same_result(const aa_oracle_result_t *x, const aa_oracle_result_t *y) {
  const aa_oracle_out_t *a[6] = {&x->o, &x->lse, &x->dq, &x->dk, &x->dv, &x->dsinks};
  const aa_oracle_out_t *b[6] = {&y->o, &y->lse, &y->dq, &y->dk, &y->dv, &y->dsinks};
  for (int i = 0; i < 6; i++)
    if (!same_bits(&a[i]->val, &b[i]->val) || !same_bits(&a[i]->fp32, &b[i]->fp32) ||
        !same_bits(&a[i]->bf16, &b[i]->bf16) || memcmp(&a[i]->relerr_bound, &b[i]->relerr_bound, 8) != 0)
      return 0;
  return x->n_recomputed == y->n_recomputed && x->n_uncertified == y->n_uncertified;
}

/* A fake oracle result of the right shapes (heads 2, kv_heads 1, n 5, d 3). */
static void fake_result(aa_oracle_result_t *res, aa_pcg64_t *rng) {
  memset(res, 0, sizeof *res);
  aa_oracle_out_t *o[5] = {&res->o, &res->dq, &res->lse, &res->dk, &res->dv};
  for (int i = 0; i < 5; i++) {
    size_t h = i >= 3 ? 1 : 2;
    int nd = i == 2 ? 2 : 3;
    fill(&o[i]->val, nd, h, 5, nd == 3 ? 3 : 1, AA_FMT_FP64, rng);
    fill(&o[i]->fp32, nd, h, 5, nd == 3 ? 3 : 1, AA_FMT_FP32, rng);
    fill(&o[i]->bf16, nd, h, 5, nd == 3 ? 3 : 1, AA_FMT_BF16, rng);
    o[i]->relerr_bound = ldexp(1.0, -100 - i);
  }
  res->n_recomputed = 17;
  res->n_uncertified = 3;
}

/* An oracle-like result: val normal draws, fp32 and bf16 their correct roundings (aa_round, an independent
   rounding) except at two elements in thirteen, which is one format ulp off (as where the exact value lies across a
   midpoint from val) or a NaN with a payload. Round trip bit-identical; the entry smaller than val, fp32 and bf16
   as raw doubles (the roundings stored as exceptions). */
static void test_mostly_rounded(aa_pcg64_t *rng) {
  aa_oracle_result_t res, got;
  aa_error_t err = {{0}};
  aa_hash128_t key = {0x1234, 0x5678};
  size_t n = 3 * 40 * 16, shape[3] = {3, 40, 16};
  aa_round_opts_t r32 = {AA_FMT_FP32, AA_RND_NE, 1, 0}, r16 = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  char hex[33], path[256];
  FILE *f;
  long len = -1;
  memset(&res, 0, sizeof res);
  aa_tensor_alloc(&res.o.val, 3, shape, AA_FMT_FP64);
  aa_tensor_alloc(&res.o.fp32, 3, shape, AA_FMT_FP32);
  aa_tensor_alloc(&res.o.bf16, 3, shape, AA_FMT_BF16);
  for (size_t i = 0; i < n; i++) {
    double x = ldexp(aa_pcg64_normal(rng), i % 97 == 0 ? -140 : (int)(i % 40) - 20); /* a few subnormals */
    res.o.val.data[i] = x;
    res.o.fp32.data[i] = aa_round(x, &r32, NULL);
    res.o.bf16.data[i] = aa_round(x, &r16, NULL);
    if (i % 13 == 3) res.o.fp32.data[i] = nextafterf((float)res.o.fp32.data[i], INFINITY);
    if (i % 13 == 5) {
      uint64_t u = UINT64_C(0x7ff8000000000000) | i;
      memcpy(&res.o.bf16.data[i], &u, 8);
    }
  }
  res.o.relerr_bound = 0x1p-50;
  AA_CHECK(aa_oracle_cache_put(DIR "/mostly", &key, &res, &err) == AA_OK, "put: %s", err.msg);
  int st = aa_oracle_cache_get(&got, DIR "/mostly", &key, &err);
  AA_CHECK(st == AA_OK && same_result(&res, &got), "rounded round trip: status %d (%s) or bits differ", st, err.msg);
  if (st == AA_OK) free_res(&got);
  aa_hash128_hex(hex, &key);
  snprintf(path, sizeof path, DIR "/mostly/%s.aaoc", hex);
  if ((f = fopen(path, "rb")) != NULL && fseek(f, 0, SEEK_END) == 0) len = ftell(f);
  if (f != NULL) fclose(f);
  /* 8 n for val, 16 bytes per exception (2 n / 13 and the subnormals), against 24 n raw */
  AA_CHECK(len > 0 && (size_t)len < 12 * n, "entry of %ld bytes: the roundings not stored as exceptions (raw: %zu)",
           len, 24 * n);
  free_res(&res);
}

/* The key is a function of the inputs and the settings that change the result, and only of those. */
static void test_key(aa_hash128_t *key_out, aa_pcg64_t *rng) {
  aa_problem_t pb;
  aa_error_t err = {{0}};
  aa_problem_init(&pb, 5, 5, 3, 2, 1);
  aa_tensor_t q, k, v, dO;
  fill(&q, 3, 2, 5, 3, AA_FMT_BF16, rng);
  fill(&k, 3, 1, 5, 3, AA_FMT_BF16, rng);
  fill(&v, 3, 1, 5, 3, AA_FMT_BF16, rng);
  fill(&dO, 3, 2, 5, 3, AA_FMT_BF16, rng);
  aa_oracle_opts_t oo;
  aa_oracle_opts_init(&oo);
  aa_hash128_t key, key2;
  AA_CHECK(aa_oracle_cache_key(&key, &pb, &q, &k, &v, &dO, &oo, &err) == AA_OK, "key: %s", err.msg);
  oo.threads = 7;
  aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
  AA_CHECK(key.hi == key2.hi && key.lo == key2.lo, "key depends on the thread count");
  oo.prec = 200;
  aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
  AA_CHECK(key.hi != key2.hi || key.lo != key2.lo, "key ignores the precision");
  oo.prec = 128;
  oo.target = 0x1p-24;
  aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
  AA_CHECK(key.hi != key2.hi || key.lo != key2.lo, "key ignores the accuracy target");
  oo.target = AA_ORACLE_TARGET_DEFAULT;
  uint64_t u;
  memcpy(&u, &v.data[7], 8);
  u ^= 1;
  memcpy(&v.data[7], &u, 8);
  aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
  AA_CHECK(key.hi != key2.hi || key.lo != key2.lo, "key ignores the last bit of v[7]");
  u ^= 1;
  memcpy(&v.data[7], &u, 8);
  pb.causal = 1;
  aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
  AA_CHECK(key.hi != key2.hi || key.lo != key2.lo, "key ignores the causal mask");
  pb.causal = 0;
  {
    static const int32_t cu[3] = {0, 2, 5}; /* two packed sequences of 2 and 3 rows: another problem */
    pb.varlen_batch = 2, pb.cu_seqlens_q = pb.cu_seqlens_k = cu;
    aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
    AA_CHECK(key.hi != key2.hi || key.lo != key2.lo, "key ignores a varlen batch");
    pb.varlen_batch = 0, pb.cu_seqlens_q = pb.cu_seqlens_k = NULL;
  }
  {
    uint8_t mask[25];
    double bias[25];
    aa_hash128_t key3;
    memset(mask, 1, sizeof mask);
    for (int e = 0; e < 25; e++)
      bias[e] = 0;
    pb.logit_offset = -150; /* the same softmax, another LSE */
    aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
    AA_CHECK(key.hi != key2.hi || key.lo != key2.lo, "key ignores the logit offset");
    pb.logit_offset = 0, pb.key_pad = 1;
    aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
    AA_CHECK(key.hi != key2.hi || key.lo != key2.lo, "key ignores key padding");
    pb.key_pad = 0, pb.mask = mask;
    mask[7] = 0;
    aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
    mask[7] = 1;
    aa_oracle_cache_key(&key3, &pb, &q, &k, &v, &dO, &oo, &err);
    AA_CHECK(key3.hi != key2.hi || key3.lo != key2.lo, "key ignores a masked entry of the attention mask");
    pb.mask = NULL, pb.bias = bias;
    aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
    bias[3] = 0.5;
    aa_oracle_cache_key(&key3, &pb, &q, &k, &v, &dO, &oo, &err);
    AA_CHECK(key3.hi != key2.hi || key3.lo != key2.lo, "key ignores an entry of the attention bias");
    pb.bias = NULL;
  }
  aa_oracle_cache_key(&key2, &pb, &q, &k, &v, &dO, &oo, &err);
  AA_CHECK(key.hi == key2.hi && key.lo == key2.lo, "key is not a function of its inputs");

  *key_out = key;
  aa_tensor_free(&q);
  aa_tensor_free(&k);
  aa_tensor_free(&v);
  aa_tensor_free(&dO);
}

/* Miss, put, hit with identical bits; a damaged entry is a miss; a put repairs it. */
static void test_round_trip(const aa_hash128_t *kp, const aa_oracle_result_t *rp) {
  aa_hash128_t key = *kp;
  aa_error_t err = {{0}};
  aa_oracle_result_t got;
  AA_CHECK(aa_oracle_cache_get(&got, DIR, &key, &err) == AA_ENOTFOUND, "empty cache: not a miss");
  AA_CHECK(aa_oracle_cache_put(DIR, &key, rp, &err) == AA_OK, "put: %s", err.msg);
  int st = aa_oracle_cache_get(&got, DIR, &key, &err);
  AA_CHECK(st == AA_OK && same_result(rp, &got), "round trip: status %d (%s) or bits differ", st, err.msg);
  AA_CHECK(got.dsinks.val.data == NULL && got.dsinks.val.ndim == 0, "empty dsinks not empty after the round trip");
  if (st == AA_OK) free_res(&got);

  /* Damage the entry in several ways: each must read as a miss. */
  char hex[33], path[256];
  aa_hash128_hex(hex, &key);
  snprintf(path, sizeof path, DIR "/%s.aaoc", hex);
  FILE *f = fopen(path, "rb");
  static unsigned char img[1 << 16];
  size_t len = fread(img, 1, sizeof img, f);
  fclose(f);
  size_t spots[4] = {3, 40, len / 2, len - 1};
  for (int i = 0; i < 4; i++) {
    img[spots[i]] ^= 0x10;
    f = fopen(path, "wb");
    fwrite(img, 1, len, f);
    fclose(f);
    st = aa_oracle_cache_get(&got, DIR, &key, &err);
    AA_CHECK(st == AA_ENOTFOUND, "byte %zu of %zu flipped: status %d, not a miss", spots[i], len, st);
    if (st == AA_OK) free_res(&got);
    img[spots[i]] ^= 0x10;
  }
  f = fopen(path, "wb");
  fwrite(img, 1, len - 9, f);
  fclose(f);
  st = aa_oracle_cache_get(&got, DIR, &key, &err);
  AA_CHECK(st == AA_ENOTFOUND, "truncated entry: status %d, not a miss", st);
  /* A whole, valid entry stored under another key's name is a mismatch. */
  char other[256];
  aa_hash128_t key3 = key;
  key3.lo ^= 1;
  aa_hash128_hex(hex, &key3);
  snprintf(other, sizeof other, DIR "/%s.aaoc", hex);
  f = fopen(other, "wb");
  fwrite(img, 1, len, f);
  fclose(f);
  st = aa_oracle_cache_get(&got, DIR, &key3, &err);
  AA_CHECK(st == AA_ENOTFOUND && strstr(err.msg, "key mismatch"), "entry under a foreign key: status %d (%s)", st,
           err.msg);
  /* Put again over the damaged entry repairs it. */
  AA_CHECK(aa_oracle_cache_put(DIR, &key, rp, &err) == AA_OK, "second put: %s", err.msg);
  st = aa_oracle_cache_get(&got, DIR, &key, &err);
  AA_CHECK(st == AA_OK && same_result(rp, &got), "after the repair: %d %s", st, err.msg);
  if (st == AA_OK) free_res(&got);
}

/* The wrapper with the real oracle on a small problem: miss, then hit,
   both bit-identical to a direct aa_oracle_run; a corrupt entry is
   recomputed. */
static void test_wrapper(aa_pcg64_t *rng) {
  aa_error_t err = {{0}};
  char hex[33], path[256];
  FILE *f;
  int st;
  aa_problem_t pb2;
  aa_problem_init(&pb2, 4, 4, 2, 2, 1);
  pb2.causal = 1;
  aa_tensor_t t[4];
  size_t sq[3] = {2, 4, 2}, sk[3] = {1, 4, 2};
  for (int i = 0; i < 4; i++) {
    aa_tensor_alloc(&t[i], 3, i == 1 || i == 2 ? sk : sq, AA_FMT_FP64);
    for (size_t j = 0; j < aa_tensor_numel(&t[i]); j++)
      t[i].data[j] = ldexp(aa_pcg64_normal(rng), 0);
    aa_tensor_round(&t[i], AA_FMT_BF16);
  }
  aa_oracle_opts_t o2;
  aa_oracle_opts_init(&o2);
  o2.threads = 1;
  aa_oracle_result_t direct, c1, c2;
  int hit = -1;
  st = aa_oracle_run(&direct, &pb2, &t[0], &t[1], &t[2], &t[3], &o2, &err);
  if (st != AA_OK) {
    printf("tsweep_ocache: aa_oracle_run failed (%s): wrapper checks skipped\n", err.msg);
  } else {
    st = aa_oracle_cached_run(&c1, &hit, DIR "/real", &pb2, &t[0], &t[1], &t[2], &t[3], &o2, &err);
    AA_CHECK(st == AA_OK && hit == 0 && same_result(&direct, &c1),
             "cached run, first call: status %d hit %d or bits differ", st, hit);
    st = aa_oracle_cached_run(&c2, &hit, DIR "/real", &pb2, &t[0], &t[1], &t[2], &t[3], &o2, &err);
    AA_CHECK(st == AA_OK && hit == 1 && same_result(&c1, &c2),
             "cached run, second call: status %d hit %d or bits differ", st, hit);
    if (st == AA_OK) aa_oracle_result_free(&c2);
    aa_hash128_t k2;
    aa_oracle_cache_key(&k2, &pb2, &t[0], &t[1], &t[2], &t[3], &o2, &err);
    aa_hash128_hex(hex, &k2);
    snprintf(path, sizeof path, DIR "/real/%s.aaoc", hex);
    f = fopen(path, "r+b");
    if (f != NULL) {
      fseek(f, 100, SEEK_SET);
      fputc(0x5a, f);
      fclose(f);
    }
    st = aa_oracle_cached_run(&c2, &hit, DIR "/real", &pb2, &t[0], &t[1], &t[2], &t[3], &o2, &err);
    AA_CHECK(f != NULL && st == AA_OK && hit == 0 && same_result(&direct, &c2),
             "cached run over a corrupt entry: status %d hit %d or bits differ", st, hit);
    if (st == AA_OK) aa_oracle_result_free(&c2);
    aa_oracle_result_free(&c1);
    aa_oracle_result_free(&direct);
  }
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&t[i]);
}

int main(void) {
  uint64_t seed = aa_test_seed("tsweep_ocache");
  if (system("rm -rf " DIR) != 0) return 99;
  aa_pcg64_t rng;
  aa_rng_derive(&rng, seed, NULL, 0);
  aa_oracle_result_t res;
  aa_hash128_t key;
  fake_result(&res, &rng);
  test_key(&key, &rng);
  test_round_trip(&key, &res);
  test_mostly_rounded(&rng);
  test_wrapper(&rng);
  free_res(&res);
  int rc = aa_test_finish("tsweep_ocache");
  if (rc == 0 && system("rm -rf " DIR) != 0) return 99;
  return rc;
}
