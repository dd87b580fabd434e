/* attnacc: content-addressed on-disk cache of oracle results (key, binary entry format, atomic put, checked get). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define OC_MAGIC "AAORACLE"
/* 2: n_uncertified in place of the timings (the library reads no clock); 3: the tensors as raw arrays, the fp32
   and bf16 roundings as their exceptions to a rounding of val, a fast checksum (a 2M-element entry took 2.6 s to
   write and 0.9 s to read in version 2, most of it FNV-1a over 200 MB and per-value calls) */
#define OC_VERSION 3u

/* ---- a fast 128-bit hash for the entry's checksum and the key's tensor values: 4 lanes of xxHash64's round over
   64-bit words (several GB/s, where the byte-serial FNV-1a 128 does 0.3 GB/s), two avalanches of the lanes and
   the length for 128 bits, fed in blocks of 32 bytes. */
#define P1 UINT64_C(0x9E3779B185EBCA87)
#define P2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define P3 UINT64_C(0x165667B19E3779F9)

typedef struct {
  uint64_t lane[4];
  uint64_t len;
} lanes_t;

static uint64_t rotl(uint64_t x, int r) {
  return x << r | x >> (64 - r);
}
static uint64_t load_le64(const unsigned char *p) {
  uint64_t u;
  memcpy(&u, p, 8); /* one load, swapped on a big-endian host */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  u = __builtin_bswap64(u);
#endif
  return u;
}
static uint64_t avalanche(uint64_t h) {
  h ^= h >> 33, h *= P2, h ^= h >> 29, h *= P3;
  return h ^ (h >> 32);
}
static void lanes_init(lanes_t *s) {
  *s = (lanes_t){{P1 + P2, P2, 0, UINT64_C(0) - P1}, 0};
}
/* the whole 32-byte blocks of p[0..len-1]; returns the bytes consumed */
static size_t lanes_blocks(lanes_t *s, const unsigned char *p, size_t len) {
  size_t i = 0;
  for (; len - i >= 32; i += 32)
    for (int j = 0; j < 4; j++)
      s->lane[j] = rotl(s->lane[j] + load_le64(p + i + 8 * (size_t)j) * P2, 31) * P1;
  s->len += i;
  return i;
}
/* the last bytes (fewer than 32), then the digest */
static aa_hash128_t lanes_end(lanes_t *s, const unsigned char *tail, size_t n) {
  const uint64_t *l = s->lane;
  uint64_t h = rotl(l[0], 1) + rotl(l[1], 7) + rotl(l[2], 12) + rotl(l[3], 18) + s->len + n;
  for (size_t i = 0; i < n; i++)
    h = rotl(h ^ (tail[i] * P3), 11) * P1;
  return (aa_hash128_t){avalanche(h), avalanche(h ^ l[0] ^ rotl(l[2], 32)) ^ avalanche(l[1] + l[3])};
}

/* The checksum of an entry's image. It detects damage; a collision costs nothing worse than a recomputation. */
static aa_hash128_t checksum(const unsigned char *p, size_t len) {
  lanes_t s;
  lanes_init(&s);
  size_t used = lanes_blocks(&s, p, len);
  return lanes_end(&s, p + used, len - used);
}

static int little_endian(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

/* The hash of n doubles as little-endian words (the same on every host): in chunks of 4096, copied as they are on a
   little-endian host. */
static aa_hash128_t hash_doubles(const double *x, size_t n) {
  unsigned char buf[4096 * 8];
  lanes_t s;
  size_t i = 0, m = 0;
  lanes_init(&s);
  for (; i < n; i += m) {
    m = n - i < 4096 ? n - i : 4096;
    if (little_endian())
      memcpy(buf, x + i, m * 8);
    else
      for (size_t j = 0; j < m; j++) {
        uint64_t u;
        memcpy(&u, &x[i + j], 8);
        for (int b = 0; b < 8; b++)
          buf[8 * j + (size_t)b] = (unsigned char)(u >> (8 * b));
      }
    if (lanes_blocks(&s, buf, m * 8) != m * 8) break; /* the last chunk, not a multiple of 4 doubles */
  }
  size_t tail = (m * 8) % 32;
  return lanes_end(&s, buf + m * 8 - tail, tail);
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
  /* the values through the fast hash, its digest through FNV: the key of [2, 8, 1024, 128] took 0.19 s byte-serial */
  aa_hash128_t d = hash_doubles(t->data, n);
  hash_u64(h, d.hi);
  hash_u64(h, d.lo);
}

int aa_oracle_cache_key(aa_hash128_t *key, const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k,
                        const aa_tensor_t *v, const aa_tensor_t *dO, const aa_oracle_opts_t *opts, aa_error_t *err) {
  if (key == NULL || pb == NULL || q == NULL || k == NULL || v == NULL || dO == NULL || opts == NULL)
    return aa_error_set(err, AA_EINVAL, "oracle cache key: NULL argument");
  aa_hash128_t h;
  aa_hash128_init(&h);
  aa_hash128_update(&h, "aa-oracle-key-2", 16); /* 2: the values by hash_doubles */
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

/* ---- writing into a buffer of known size (little endian) ---- */
typedef struct {
  unsigned char *p;
  size_t pos;
} wr_t;

static void w_u64(wr_t *w, uint64_t u) {
  for (int i = 0; i < 8; i++)
    w->p[w->pos++] = (unsigned char)(u >> (8 * i));
}
static void w_u32(wr_t *w, uint32_t u) {
  for (int i = 0; i < 4; i++)
    w->p[w->pos++] = (unsigned char)(u >> (8 * i));
}
static uint64_t bits_of(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}
static double of_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}
static void w_f64(wr_t *w, double d) {
  w_u64(w, bits_of(d));
}
/* n doubles as raw little-endian words: one copy on a little-endian host */
static void w_f64s(wr_t *w, const double *x, size_t n) {
  if (little_endian() && n > 0)
    memcpy(w->p + w->pos, x, n * 8), w->pos += n * 8;
  else
    for (size_t i = 0; i < n; i++)
      w_f64(w, x[i]);
}

/* x rounded to nearest even at `keep` significand bits past the leading one, on the bits of the double (exponent
   range unbounded): the fp32 (keep 23) and bf16 (keep 7) rounding of val except where the exact value lies within
   relerr_bound of a midpoint, or outside the format's normal range. Those elements are stored as exceptions. */
static uint64_t round_bits(uint64_t u, int keep) {
  int drop = 52 - keep;
  if (((u >> 52) & 0x7ff) == 0x7ff) return u; /* Inf, NaN */
  u += (UINT64_C(1) << (drop - 1)) - 1 + ((u >> drop) & 1);
  return u & ~((UINT64_C(1) << drop) - 1);
}

/* How a rounding tensor (fp32 or bf16) of an output is stored: 1 as exceptions to round_bits(val, keep) (same shape
   as val), 0 as its raw doubles. */
static int derivable(const aa_tensor_t *t, const aa_tensor_t *val) {
  if (t->data == NULL || val->data == NULL || t->ndim != val->ndim) return 0;
  for (int i = 0; i < 3; i++)
    if (t->shape[i] != val->shape[i]) return 0;
  return 1;
}
static size_t exceptions(const aa_tensor_t *t, const aa_tensor_t *val, int keep) {
  size_t n = aa_tensor_numel(t), e = 0;
  for (size_t i = 0; i < n; i++)
    e += round_bits(bits_of(val->data[i]), keep) != bits_of(t->data[i]);
  return e;
}

static const int keep_bits[3] = {0, 23, 7}; /* val, fp32, bf16 */

static const aa_tensor_t *tensor_of(const aa_oracle_out_t *o, int j) {
  return j == 0 ? &o->val : j == 1 ? &o->fp32 : &o->bf16;
}

/* The bytes put_tensor writes for tensor j of o (nexc: its exceptions, when derivable). */
static size_t tensor_size(const aa_oracle_out_t *o, int j, size_t *nexc) {
  const aa_tensor_t *t = tensor_of(o, j);
  size_t head = 4 + 4 + 3 * 8 + 1, n = t->data != NULL ? aa_tensor_numel(t) : 0;
  *nexc = 0;
  if (t->data == NULL) return head;
  if (j == 0 || !derivable(t, &o->val)) return head + (j > 0) + 8 * n;
  *nexc = exceptions(t, &o->val, keep_bits[j]);
  return head + 1 + 8 + 16 * *nexc;
}

/* Tensor j of o: u32 ndim, u32 fmt, 3 x u64 shape, u8 present; then for val its doubles, for fp32 and bf16 a u8
   coding (0: the doubles; 1: u64 count, then (u64 index, u64 bits) per element that is not round_bits(val)). */
static void put_tensor(wr_t *w, const aa_oracle_out_t *o, int j, size_t nexc) {
  const aa_tensor_t *t = tensor_of(o, j);
  size_t n = aa_tensor_numel(t);
  w_u32(w, (uint32_t)t->ndim);
  w_u32(w, (uint32_t)t->fmt);
  for (int i = 0; i < 3; i++)
    w_u64(w, t->shape[i]);
  w->p[w->pos++] = t->data != NULL;
  if (t->data == NULL) return;
  if (j > 0) w->p[w->pos++] = (unsigned char)derivable(t, &o->val);
  if (j == 0 || !derivable(t, &o->val)) {
    w_f64s(w, t->data, n);
    return;
  }
  w_u64(w, nexc);
  for (size_t i = 0; i < n; i++) {
    uint64_t u = bits_of(t->data[i]);
    if (round_bits(bits_of(o->val.data[i]), keep_bits[j]) != u) w_u64(w, i), w_u64(w, u);
  }
}

static void entry_path(char *out, size_t size, const char *dir, const aa_hash128_t *key) {
  char hex[33];
  aa_hash128_hex(hex, key);
  snprintf(out, size, "%s/%s.aaoc", dir, hex);
}

/* The entry's image (malloc'd, *len bytes), NULL when out of memory. */
static unsigned char *entry_image(size_t *len, const aa_hash128_t *key, const aa_oracle_result_t *res) {
  size_t nexc[6][3], size = 8 + 4 + 16 + 16 + 16;
  wr_t w = {NULL, 0};
  for (int i = 0; i < 6; i++) {
    size += 8;
    for (int j = 0; j < 3; j++)
      size += tensor_size(outputs((aa_oracle_result_t *)res, i), j, &nexc[i][j]);
  }
  if ((w.p = malloc(size)) == NULL) return NULL;
  memcpy(w.p, OC_MAGIC, 8);
  w.pos = 8;
  w_u32(&w, OC_VERSION);
  w_u64(&w, key->hi);
  w_u64(&w, key->lo);
  for (int i = 0; i < 6; i++) {
    const aa_oracle_out_t *o = outputs((aa_oracle_result_t *)res, i);
    w_f64(&w, o->relerr_bound);
    for (int j = 0; j < 3; j++)
      put_tensor(&w, o, j, nexc[i][j]);
  }
  w_u64(&w, res->n_recomputed);
  w_u64(&w, res->n_uncertified);
  aa_hash128_t h = checksum(w.p, w.pos);
  w_u64(&w, h.hi);
  w_u64(&w, h.lo);
  *len = w.pos;
  return w.p;
}

int aa_oracle_cache_put(const char *dir, const aa_hash128_t *key, const aa_oracle_result_t *res, aa_error_t *err) {
  if (dir == NULL || key == NULL || res == NULL)
    return aa_error_set(err, AA_EINVAL, "oracle cache put: NULL argument");
  size_t len;
  unsigned char *img = entry_image(&len, key, res);
  if (img == NULL) return aa_error_set(err, AA_ENOMEM, "oracle cache put: out of memory");
  int st = aa_mkdir_p(dir, err);
  if (st == AA_OK) {
    /* aa_file_write's temporary is unique per thread and process, so
       concurrent writers of one key never share one; the rename makes the
       entry appear whole. */
    char path[4096];
    entry_path(path, sizeof path, dir, key);
    st = aa_file_write(path, img, len, err);
  }
  free(img);
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
  uint64_t u = load_le64(r->p + r->pos);
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
  return of_bits(get_u64(r));
}
static int get_u8(rd_t *r) {
  if (r->bad || r->pos >= r->len) {
    r->bad = 1;
    return -1;
  }
  return r->p[r->pos++];
}

/* n doubles of raw little-endian words into x (the caller checked that the image holds them) */
static void get_f64s(rd_t *r, double *x, size_t n) {
  if (little_endian() && n > 0)
    memcpy(x, r->p + r->pos, n * 8), r->pos += n * 8;
  else
    for (size_t i = 0; i < n; i++)
      x[i] = get_f64(r);
}

/* The values of a derived tensor: round_bits of val, then the exceptions (indices within the tensor). */
static int get_derived(rd_t *r, aa_tensor_t *t, const aa_tensor_t *val, int keep) {
  size_t n = aa_tensor_numel(t), nexc = (size_t)get_u64(r);
  if (!derivable(t, val) || r->bad || nexc > n || nexc > (r->len - r->pos) / 16) return 0;
  for (size_t i = 0; i < n; i++)
    t->data[i] = of_bits(round_bits(bits_of(val->data[i]), keep));
  for (size_t e = 0; e < nexc; e++) {
    size_t i = (size_t)get_u64(r);
    uint64_t u = get_u64(r);
    if (i >= n) return 0;
    t->data[i] = of_bits(u);
  }
  return !r->bad;
}

/* Tensor j of o (put_tensor's format); 0 when malformed. */
static int get_tensor(rd_t *r, aa_oracle_out_t *o, int j) {
  aa_tensor_t *t = (aa_tensor_t *)tensor_of(o, j);
  uint32_t ndim = get_u32(r), fmt = get_u32(r);
  size_t shape[3], n = 1;
  int present, coding = 0;
  for (int i = 0; i < 3; i++)
    shape[i] = (size_t)get_u64(r);
  if ((present = get_u8(r)) < 0) return 0;
  *t = (aa_tensor_t){0};
  if (!present) return ndim <= 3 && fmt < AA_FMT_COUNT;
  if (ndim < 1 || ndim > 3 || fmt >= AA_FMT_COUNT) return 0;
  for (int i = 0; i < 3; i++)
    if (aa_size_mul(&n, n, shape[i])) return 0;
  for (uint32_t i = ndim; i < 3; i++)
    if (shape[i] != 1) return 0;
  if (j > 0 && (coding = get_u8(r)) != 0 && coding != 1) return 0;
  if (coding == 0 && n > (r->len - r->pos) / 8) return 0; /* the file cannot hold that many values */
  if (aa_tensor_alloc(t, (int)ndim, shape, (aa_fmt_t)fmt) != AA_OK) return 0;
  if (coding == 1) return get_derived(r, t, &o->val, keep_bits[j]);
  get_f64s(r, t->data, n);
  return 1;
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

/* The entry at path mapped read-only (*len bytes; unmap with munmap), or read whole where it cannot be mapped
   (*mapped 0: free it). AA_ENOTFOUND when absent, AA_EIO when unreadable. */
static int map_entry(unsigned char **img, size_t *len, int *mapped, const char *path, aa_error_t *err) {
  struct stat st;
  int fd = open(path, O_RDONLY), rc;
  *mapped = 0;
  if (fd < 0) return errno == ENOENT ? AA_ENOTFOUND : AA_EIO;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      close(fd);
      *img = m, *len = (size_t)st.st_size, *mapped = 1;
      return AA_OK;
    }
  }
  close(fd);
  rc = aa_file_read((char **)img, len, path, err);
  return rc == AA_OK || rc == AA_ENOTFOUND ? rc : AA_EIO;
}

/* Why the image of an entry cannot be the entry of key (NULL: it can); r then reads its outputs. */
static const char *check_image(rd_t *r, const unsigned char *img, size_t len, const aa_hash128_t *key) {
  if (len < 8 + 4 + 16 + 16 || memcmp(img, OC_MAGIC, 8) != 0) return "bad magic or too short";
  aa_hash128_t h = checksum(img, len - 16);
  if (h.hi != load_le64(img + len - 16) || h.lo != load_le64(img + len - 8)) return "checksum mismatch";
  *r = (rd_t){img, len - 16, 8, 0};
  if (get_u32(r) != OC_VERSION) return "other version";
  uint64_t hi = get_u64(r), lo = get_u64(r);
  return hi != key->hi || lo != key->lo ? "key mismatch" : NULL;
}

int aa_oracle_cache_get(aa_oracle_result_t *out, const char *dir, const aa_hash128_t *key, aa_error_t *err) {
  if (out == NULL || dir == NULL || key == NULL)
    return aa_error_set(err, AA_EINVAL, "oracle cache get: NULL argument");
  *out = (aa_oracle_result_t){0};
  char path[4096];
  unsigned char *img;
  size_t len;
  int mapped;
  entry_path(path, sizeof path, dir, key);
  int st = map_entry(&img, &len, &mapped, path, err);
  if (st == AA_ENOTFOUND) return st;
  if (st != AA_OK) return aa_error_set(err, AA_ENOTFOUND, "%s: unreadable entry, treated as a miss", path);
  rd_t r;
  const char *why = check_image(&r, img, len, key);
  for (int i = 0; why == NULL && i < 6; i++) {
    aa_oracle_out_t *o = outputs(out, i);
    o->relerr_bound = get_f64(&r);
    for (int j = 0; j < 3 && why == NULL; j++)
      if (!get_tensor(&r, o, j)) why = "bad tensor";
  }
  if (why == NULL) {
    out->n_recomputed = (size_t)get_u64(&r);
    out->n_uncertified = (size_t)get_u64(&r);
    if (r.bad || r.pos != r.len) why = "bad length";
  }
  if (mapped)
    munmap(img, len);
  else
    free(img);
  if (why != NULL) {
    free_partial(out);
    return aa_error_set(err, AA_ENOTFOUND, "%s: %s, treated as a miss", path, why);
  }
  return AA_OK;
}
