/* attnacc: content-addressed on-disk cache of oracle results (key, binary entry format, atomic put, checked get). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define OC_MAGIC "AAORACLE"
#define OC_VERSION 2u /* 2: n_uncertified in place of the timings (the library reads no clock) */

static void put_u64(aa_buf_t *b, uint64_t u) {
  unsigned char x[8];
  for (int i = 0; i < 8; i++)
    x[i] = (unsigned char)(u >> (8 * i));
  aa_buf_put(b, x, 8);
}
static void put_u32(aa_buf_t *b, uint32_t u) {
  unsigned char x[4];
  for (int i = 0; i < 4; i++)
    x[i] = (unsigned char)(u >> (8 * i));
  aa_buf_put(b, x, 4);
}
static void put_f64(aa_buf_t *b, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  put_u64(b, u);
}

/* Key material goes through the same little-endian serialisers. */
static void hash_u64(aa_hash128_t *h, uint64_t u) {
  unsigned char x[8];
  for (int i = 0; i < 8; i++)
    x[i] = (unsigned char)(u >> (8 * i));
  aa_hash128_update(h, x, 8);
}
static void hash_f64(aa_hash128_t *h, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  hash_u64(h, u);
}
static void hash_tensor(aa_hash128_t *h, const aa_tensor_t *t) {
  size_t n = aa_tensor_numel(t);
  hash_u64(h, (uint64_t)t->ndim);
  for (int i = 0; i < 3; i++)
    hash_u64(h, t->shape[i]);
  hash_u64(h, (uint64_t)t->fmt);
  hash_u64(h, n);
  for (size_t i = 0; i < n; i++)
    hash_f64(h, t->data[i]);
}

int aa_oracle_cache_key(aa_hash128_t *key, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                        const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, aa_error_t *err) {
  if (key == NULL || pb == NULL || q == NULL || k == NULL || v == NULL || dO == NULL || opts == NULL)
    return aa_error_set(err, AA_EINVAL, "oracle cache key: NULL argument");
  aa_hash128_t h;
  aa_hash128_init(&h);
  aa_hash128_update(&h, "aa-oracle-key-1", 16);
  hash_u64(&h, pb->n_q);
  hash_u64(&h, pb->n_k);
  hash_u64(&h, pb->d);
  hash_u64(&h, pb->heads);
  hash_u64(&h, pb->kv_heads);
  hash_u64(&h, (uint64_t)pb->scale_default);
  hash_f64(&h, pb->scale_default ? 0.0 : pb->scale);
  hash_u64(&h, (uint64_t)pb->causal);
  hash_u64(&h, pb->window);
  hash_u64(&h, pb->bound_min != NULL);
  if (pb->bound_min != NULL) {
    if (pb->bound_max == NULL) return aa_error_set(err, AA_EINVAL, "oracle cache key: bound_min without bound_max");
    for (size_t i = 0; i < pb->n_q; i++) {
      hash_u64(&h, (uint64_t)(int64_t)pb->bound_min[i]);
      hash_u64(&h, (uint64_t)(int64_t)pb->bound_max[i]);
    }
  }
  if (pb->align != AA_ALIGN_TOP_LEFT || pb->local || pb->softcap != 0 || pb->alibi != AA_ALIBI_NONE) {
    /* problem features beyond masks (lib/problem.h), hashed only when on so that the keys of other problems stay as
     * they were */
    hash_u64(&h, 0x14fea7);
    hash_u64(&h, (uint64_t)pb->align);
    hash_u64(&h, (uint64_t)pb->local);
    hash_u64(&h, pb->local ? pb->window_left : 0);
    hash_u64(&h, pb->local ? pb->window_right : 0);
    hash_f64(&h, pb->softcap);
    hash_u64(&h, (uint64_t)pb->alibi);
    if (pb->alibi != AA_ALIBI_NONE && pb->alibi_slopes != NULL)
      for (size_t i = 0; i < pb->heads; i++)
        hash_f64(&h, pb->alibi_slopes[i]);
  }
  if (pb->varlen_batch > 0) { /* a varlen batch, hashed only when on (other keys stay as they were) */
    const int32_t *ck = pb->cu_seqlens_k != NULL ? pb->cu_seqlens_k : pb->cu_seqlens_q;
    hash_u64(&h, 0x7a41e9);
    hash_u64(&h, pb->varlen_batch);
    for (size_t i = 0; i <= pb->varlen_batch && pb->cu_seqlens_q != NULL && ck != NULL; i++) {
      hash_u64(&h, (uint64_t)(int64_t)pb->cu_seqlens_q[i]);
      hash_u64(&h, (uint64_t)(int64_t)ck[i]);
    }
  }
  if (aa_problem_has_mask(pb) || pb->logit_offset != 0) { /* attention mask, bias, padding, offset: only when on */
    size_t n = (pb->mask_hstride != 0 ? pb->heads : 1) * pb->n_q * pb->n_k;
    hash_u64(&h, 0x3a5c0f);
    hash_u64(&h, pb->key_pad);
    hash_f64(&h, pb->logit_offset);
    hash_u64(&h, pb->mask_hstride != 0);
    hash_u64(&h, pb->mask != NULL);
    if (pb->mask != NULL) aa_hash128_update(&h, pb->mask, n);
    hash_u64(&h, pb->bias != NULL);
    for (size_t i = 0; pb->bias != NULL && i < n; i++)
      hash_f64(&h, pb->bias[i]);
  }
  hash_u64(&h, pb->num_sinks);
  hash_u64(&h, pb->sinks != NULL);
  if (pb->sinks != NULL)
    for (size_t i = 0; i < pb->heads * pb->num_sinks; i++)
      hash_f64(&h, pb->sinks[i]);
  hash_u64(&h, pb->keep != NULL);
  if (pb->keep != NULL) {
    size_t n;
    if (aa_size_mul(&n, pb->heads, pb->n_q) || aa_size_mul(&n, n, pb->n_k))
      return aa_error_set(err, AA_ENOMEM, "oracle cache key: impossible keep-mask size");
    aa_hash128_update(&h, pb->keep, n);
    hash_f64(&h, pb->keep_scale);
  }
  hash_tensor(&h, q);
  hash_tensor(&h, k);
  hash_tensor(&h, v);
  hash_tensor(&h, dO);
  /* The thread count is left out: the oracle's results never depend on it. */
  hash_u64(&h, (uint64_t)opts->path);
  hash_u64(&h, (uint64_t)(int64_t)opts->prec);
  /* Hashed only when not the default, so that caches written before the
     target existed (all at 2^-48) keep their keys. */
  if (opts->target != AA_ORACLE_TARGET_DEFAULT) hash_f64(&h, opts->target);
  *key = h;
  return AA_OK;
}

static aa_oracle_out_t *outputs(aa_oracle_result_t *r, int i) {
  aa_oracle_out_t *o[6] = {&r->o, &r->lse, &r->dq, &r->dk, &r->dv, &r->dsinks};
  return o[i];
}

static void put_tensor(aa_buf_t *b, const aa_tensor_t *t) {
  size_t n = aa_tensor_numel(t);
  put_u32(b, (uint32_t)t->ndim);
  put_u32(b, (uint32_t)t->fmt);
  for (int i = 0; i < 3; i++)
    put_u64(b, t->shape[i]);
  unsigned char present = t->data != NULL;
  aa_buf_put(b, &present, 1);
  for (size_t i = 0; i < n; i++)
    put_f64(b, t->data[i]);
}

static void entry_path(char *out, size_t size, const char *dir, const aa_hash128_t *key) {
  char hex[33];
  aa_hash128_hex(hex, key);
  snprintf(out, size, "%s/%s.aaoc", dir, hex);
}

int aa_oracle_cache_put(const char *dir, const aa_hash128_t *key, const aa_oracle_result_t *res, aa_error_t *err) {
  if (dir == NULL || key == NULL || res == NULL)
    return aa_error_set(err, AA_EINVAL, "oracle cache put: NULL argument");
  aa_buf_t b = {0};
  aa_buf_put(&b, OC_MAGIC, 8);
  put_u32(&b, OC_VERSION);
  put_u64(&b, key->hi);
  put_u64(&b, key->lo);
  for (int i = 0; i < 6; i++) {
    const aa_oracle_out_t *o = outputs((aa_oracle_result_t *)res, i);
    put_f64(&b, o->relerr_bound);
    put_tensor(&b, &o->val);
    put_tensor(&b, &o->fp32);
    put_tensor(&b, &o->bf16);
  }
  put_u64(&b, res->n_recomputed);
  put_u64(&b, res->n_uncertified);
  aa_hash128_t h;
  aa_hash128_init(&h);
  if (!b.oom) aa_hash128_update(&h, b.buf, b.len);
  put_u64(&b, h.hi);
  put_u64(&b, h.lo);
  if (b.oom) {
    aa_buf_free(&b);
    return aa_error_set(err, AA_ENOMEM, "oracle cache put: out of memory");
  }
  int st = aa_mkdir_p(dir, err);
  if (st == AA_OK) {
    /* aa_file_write's temporary is unique per thread and process, so
       concurrent writers of one key never share one; the rename makes the
       entry appear whole. */
    char path[4096];
    entry_path(path, sizeof path, dir, key);
    st = aa_file_write(path, b.buf, b.len, err);
  }
  aa_buf_free(&b);
  return st;
}

/* Bounded little-endian reader over a file image. */
typedef struct {
  const unsigned char *p;
  size_t len, pos;
  int bad;
} rd_t;

static uint64_t get_u64(rd_t *r) {
  if (r->bad || r->len - r->pos < 8) {
    r->bad = 1;
    return 0;
  }
  uint64_t u = 0;
  for (int i = 7; i >= 0; i--)
    u = u << 8 | r->p[r->pos + (size_t)i];
  r->pos += 8;
  return u;
}
static uint32_t get_u32(rd_t *r) {
  if (r->bad || r->len - r->pos < 4) {
    r->bad = 1;
    return 0;
  }
  uint32_t u = 0;
  for (int i = 3; i >= 0; i--)
    u = u << 8 | r->p[r->pos + (size_t)i];
  r->pos += 4;
  return u;
}
static double get_f64(rd_t *r) {
  uint64_t u = get_u64(r);
  double d;
  memcpy(&d, &u, 8);
  return d;
}

static int get_tensor(rd_t *r, aa_tensor_t *t) {
  uint32_t ndim = get_u32(r), fmt = get_u32(r);
  size_t shape[3];
  for (int i = 0; i < 3; i++)
    shape[i] = (size_t)get_u64(r);
  if (r->bad || r->pos >= r->len) return 0;
  unsigned char present = r->p[r->pos++];
  *t = (aa_tensor_t){0};
  if (!present) return ndim <= 3 && fmt < AA_FMT_COUNT;
  if (ndim < 1 || ndim > 3 || fmt >= AA_FMT_COUNT) return 0;
  size_t n = 1;
  for (int i = 0; i < 3; i++)
    if (aa_size_mul(&n, n, shape[i])) return 0;
  if (n > (r->len - r->pos) / 8) return 0; /* the file cannot hold that many values */
  for (uint32_t i = ndim; i < 3; i++)
    if (shape[i] != 1) return 0;
  if (aa_tensor_alloc(t, (int)ndim, shape, (aa_fmt_t)fmt) != AA_OK) return 0;
  for (size_t i = 0; i < n; i++)
    t->data[i] = get_f64(r);
  return !r->bad;
}

static void free_partial(aa_oracle_result_t *res) {
  for (int i = 0; i < 6; i++) {
    aa_oracle_out_t *o = outputs(res, i);
    aa_tensor_free(&o->val);
    aa_tensor_free(&o->fp32);
    aa_tensor_free(&o->bf16);
  }
  *res = (aa_oracle_result_t){0};
}

int aa_oracle_cache_get(aa_oracle_result_t *out, const char *dir, const aa_hash128_t *key, aa_error_t *err) {
  if (out == NULL || dir == NULL || key == NULL)
    return aa_error_set(err, AA_EINVAL, "oracle cache get: NULL argument");
  *out = (aa_oracle_result_t){0};
  char path[4096], *data;
  size_t len;
  entry_path(path, sizeof path, dir, key);
  int st = aa_file_read(&data, &len, path, err);
  if (st == AA_ENOTFOUND) return st;
  if (st != AA_OK) return aa_error_set(err, AA_ENOTFOUND, "%s: unreadable entry, treated as a miss", path);
  rd_t r = {(const unsigned char *)data, len, 0, 0};
  const char *why = NULL;
  if (len < 8 + 4 + 16 + 16 || memcmp(data, OC_MAGIC, 8) != 0) why = "bad magic or too short";
  if (why == NULL) {
    aa_hash128_t h, want;
    aa_hash128_init(&h);
    aa_hash128_update(&h, data, len - 16);
    rd_t tr = {(const unsigned char *)data, len, len - 16, 0};
    want.hi = get_u64(&tr);
    want.lo = get_u64(&tr);
    if (h.hi != want.hi || h.lo != want.lo) why = "checksum mismatch";
    r.len = len - 16;
  }
  if (why == NULL) {
    r.pos = 8;
    if (get_u32(&r) != OC_VERSION) why = "other version";
    uint64_t hi = get_u64(&r), lo = get_u64(&r);
    if (why == NULL && (hi != key->hi || lo != key->lo)) why = "key mismatch";
  }
  for (int i = 0; why == NULL && i < 6; i++) {
    aa_oracle_out_t *o = outputs(out, i);
    o->relerr_bound = get_f64(&r);
    if (!get_tensor(&r, &o->val) || !get_tensor(&r, &o->fp32) || !get_tensor(&r, &o->bf16)) why = "bad tensor";
  }
  if (why == NULL) {
    out->n_recomputed = (size_t)get_u64(&r);
    out->n_uncertified = (size_t)get_u64(&r);
    if (r.bad || r.pos != r.len) why = "bad length";
  }
  free(data);
  if (why != NULL) {
    free_partial(out);
    return aa_error_set(err, AA_ENOTFOUND, "%s: %s, treated as a miss", path, why);
  }
  return AA_OK;
}
