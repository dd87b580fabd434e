/* attnacc: one tensor of a .safetensors file (header length, JSON header, raw little-endian data). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "npy.h"

/* The format (safetensors' own specification, README "Format"): an unsigned
   little-endian 64-bit header size N, N bytes of UTF-8 JSON, an object whose
   keys are tensor names (plus the optional "__metadata__", string to string)
   and whose values are {"dtype": "F32", "shape": [..], "data_offsets":
   [begin, end]}, offsets relative to the first byte after the header. */

#define ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */

typedef struct {
  const char *s, *end;
} cur_t;

static void ws(cur_t *c) {
  while (c->s < c->end && (*c->s == ' ' || *c->s == '\t' || *c->s == '\n' || *c->s == '\r'))
    c->s++;
}

/* A JSON string into out (escapes other than \" and \\ are kept verbatim; names need no more). */
static int jstr(cur_t *c, char *out, size_t cap) {
  size_t n = 0;
  ws(c);
  if (c->s >= c->end || *c->s != '"') return -1;
  c->s++;
  while (c->s < c->end && *c->s != '"') {
    char ch = *c->s++;
    if (ch == '\\' && c->s < c->end) ch = *c->s++;
    if (n + 1 < cap) out[n++] = ch;
  }
  if (c->s >= c->end) return -1;
  c->s++;
  if (cap) out[n] = '\0';
  return 0;
}

static int jskip(cur_t *c, int depth);

static int jskip_seq(cur_t *c, char close, int depth, int keyed) {
  c->s++;
  ws(c);
  if (c->s < c->end && *c->s == close) {
    c->s++;
    return 0;
  }
  for (;;) {
    if (keyed) {
      char k[8];
      if (jstr(c, k, sizeof k) != 0) return -1;
      ws(c);
      if (c->s >= c->end || *c->s != ':') return -1;
      c->s++;
    }
    if (jskip(c, depth + 1) != 0) return -1;
    ws(c);
    if (c->s < c->end && *c->s == ',') {
      c->s++;
      continue;
    }
    if (c->s < c->end && *c->s == close) {
      c->s++;
      return 0;
    }
    return -1;
  }
}

static int jskip(cur_t *c, int depth) {
  ws(c);
  if (depth > 32 || c->s >= c->end) return -1;
  if (*c->s == '"') return jstr(c, NULL, 0);
  if (*c->s == '{') return jskip_seq(c, '}', depth, 1);
  if (*c->s == '[') return jskip_seq(c, ']', depth, 0);
  while (c->s < c->end && (strchr("+-.0123456789eE", *c->s) != NULL || (*c->s >= 'a' && *c->s <= 'z')))
    c->s++; /* numbers, true, false, null */
  return 0;
}

/* An array of non-negative integers. */
static int juints(cur_t *c, uint64_t *v, int cap, int *n) {
  *n = 0;
  ws(c);
  if (c->s >= c->end || *c->s != '[') return -1;
  c->s++;
  for (;;) {
    uint64_t x = 0;
    int digits = 0;
    ws(c);
    if (c->s < c->end && *c->s == ']' && *n == 0) {
      c->s++;
      return 0;
    }
    while (c->s < c->end && *c->s >= '0' && *c->s <= '9') {
      if (x > (UINT64_MAX - 9) / 10) return -1;
      x = x * 10 + (uint64_t)(*c->s++ - '0');
      digits++;
    }
    if (!digits) return -1;
    if (*n < cap) v[*n] = x;
    (*n)++;
    ws(c);
    if (c->s < c->end && *c->s == ',') {
      c->s++;
      continue;
    }
    if (c->s < c->end && *c->s == ']') {
      c->s++;
      return 0;
    }
    return -1;
  }
}

typedef struct {
  char dtype[16];
  uint64_t shape[8], off[2];
  int ndim, noff, found;
} st_info_t;

/* The object of one tensor. */
static int tensor_obj(cur_t *c, st_info_t *t) {
  ws(c);
  if (c->s >= c->end || *c->s != '{') return -1;
  c->s++;
  for (;;) {
    char k[32];
    ws(c);
    if (c->s < c->end && *c->s == '}') {
      c->s++;
      return 0;
    }
    if (jstr(c, k, sizeof k) != 0) return -1;
    ws(c);
    if (c->s >= c->end || *c->s != ':') return -1;
    c->s++;
    if (strcmp(k, "dtype") == 0) {
      if (jstr(c, t->dtype, sizeof t->dtype) != 0) return -1;
    } else if (strcmp(k, "shape") == 0) {
      if (juints(c, t->shape, 8, &t->ndim) != 0) return -1;
    } else if (strcmp(k, "data_offsets") == 0) {
      if (juints(c, t->off, 2, &t->noff) != 0) return -1;
    } else if (jskip(c, 1) != 0) {
      return -1;
    }
    ws(c);
    if (c->s < c->end && *c->s == ',') c->s++;
  }
}

/* "__metadata__": look for "bf16_bits": "true". */
static int metadata_obj(cur_t *c, int *bf16_bits) {
  ws(c);
  if (c->s >= c->end || *c->s != '{') return jskip(c, 1);
  c->s++;
  for (;;) {
    char k[64], v[64];
    ws(c);
    if (c->s < c->end && *c->s == '}') {
      c->s++;
      return 0;
    }
    if (jstr(c, k, sizeof k) != 0) return -1;
    ws(c);
    if (c->s >= c->end || *c->s != ':') return -1;
    c->s++;
    ws(c);
    if (c->s < c->end && *c->s == '"') {
      if (jstr(c, v, sizeof v) != 0) return -1;
      if (strcmp(k, "bf16_bits") == 0 && strcmp(v, "true") == 0) *bf16_bits = 1;
    } else if (jskip(c, 1) != 0) {
      return -1;
    }
    ws(c);
    if (c->s < c->end && *c->s == ',') c->s++;
  }
}

static double decode(const unsigned char *p, const char *dtype) {
  if (strcmp(dtype, "F64") == 0) {
    uint64_t u = 0;
    double d;
    for (int i = 7; i >= 0; i--)
      u = u << 8 | p[i];
    memcpy(&d, &u, sizeof d);
    return d;
  }
  if (strcmp(dtype, "F32") == 0) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
  }
  if (strcmp(dtype, "F16") == 0) return aa_fmt_decode((uint64_t)(p[0] | (unsigned)p[1] << 8), AA_FMT_FP16);
  return aa_fmt_decode((uint64_t)(p[0] | (unsigned)p[1] << 8), AA_FMT_BF16); /* BF16, and I16 as BF16 bits */
}

int aa_safetensors_read(aa_ndarray_t *out, const char *path, const char *name, unsigned flags, aa_error_t *err) {
  FILE *f;
  struct stat stt;
  unsigned char pre[8];
  uint64_t hlen = 0, numel = 1;
  char *hdr = NULL, key[256], names[300];
  size_t nused = 0, item;
  int rc = AA_OK, bf16_bits = (flags & AA_NPY_BF16_BITS) != 0;
  st_info_t t;
  cur_t c;
  *out = (aa_ndarray_t){0};
  memset(&t, 0, sizeof t);
  names[0] = '\0';
  f = fopen(path, "rb");
  if (f == NULL) return aa_error_set(err, AA_EIO, "%s: cannot open: %s", path, strerror(errno));
  if (fstat(fileno(f), &stt) != 0 || !S_ISREG(stt.st_mode)) {
    rc = aa_error_set(err, AA_EIO, "%s: not a regular file", path);
    goto done;
  }
  if (fread(pre, 1, 8, f) != 8) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: not a .safetensors file (shorter than its 8-byte header size)", path);
    goto done;
  }
  for (int i = 7; i >= 0; i--)
    hlen = hlen << 8 | pre[i];
  if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > (uint64_t)stt.st_size - 8) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: not a .safetensors file (header size %llu for a file of %lld bytes)",
                      path, (unsigned long long)hlen, (long long)stt.st_size);
    goto done;
  }
  if ((hdr = malloc((size_t)hlen)) == NULL || fread(hdr, 1, (size_t)hlen, f) != (size_t)hlen) {
    rc = aa_error_set(err, hdr ? AA_EFORMAT : AA_ENOMEM, "%s: cannot read the header", path);
    goto done;
  }
  c = (cur_t){hdr, hdr + hlen};
  ws(&c);
  if (c.s >= c.end || *c.s != '{') goto bad_json;
  c.s++;
  for (;;) {
    ws(&c);
    if (c.s < c.end && *c.s == '}') break;
    if (jstr(&c, key, sizeof key) != 0) goto bad_json;
    ws(&c);
    if (c.s >= c.end || *c.s != ':') goto bad_json;
    c.s++;
    if (strcmp(key, "__metadata__") == 0) {
      if (metadata_obj(&c, &bf16_bits) != 0) goto bad_json;
    } else if (strcmp(key, name) == 0) {
      if (tensor_obj(&c, &t) != 0) goto bad_json;
      t.found = 1;
    } else {
      if (nused + 1 < sizeof names)
        nused += (size_t)snprintf(names + nused, sizeof names - nused, "%s%s", nused ? ", " : "", key);
      if (jskip(&c, 1) != 0) goto bad_json;
    }
    ws(&c);
    if (c.s < c.end && *c.s == ',') c.s++;
  }
  if (!t.found) {
    rc = aa_error_set(err, AA_ENOTFOUND, "%s: no tensor '%s' (tensors: %s)", path, name, names[0] ? names : "none");
    goto done;
  }
  if (strcmp(t.dtype, "I16") == 0 && bf16_bits) strcpy(t.dtype, "BF16");
  if (strcmp(t.dtype, "BF16") == 0 || strcmp(t.dtype, "F16") == 0)
    item = 2;
  else if (strcmp(t.dtype, "F32") == 0)
    item = 4;
  else if (strcmp(t.dtype, "F64") == 0)
    item = 8;
  else {
    rc = aa_error_set(
        err, AA_EFORMAT,
        "%s: tensor '%s' has dtype %s (accepted: BF16, F16, F32, F64; I16 as BF16 bits with --bf16-bits)", path, name,
        t.dtype);
    goto done;
  }
  if (t.ndim < 1 || t.ndim > AA_NDARRAY_MAX_DIM || t.noff != 2) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: tensor '%s' has %d axes (need 1 to %d) or no data_offsets pair", path,
                      name, t.ndim, AA_NDARRAY_MAX_DIM);
    goto done;
  }
  for (int i = 0; i < t.ndim; i++) {
    size_t m;
    if (t.shape[i] > SIZE_MAX || aa_size_mul(&m, (size_t)numel, (size_t)t.shape[i]) != AA_OK) {
      rc = aa_error_set(err, AA_EFORMAT, "%s: tensor '%s' has an absurd shape", path, name);
      goto done;
    }
    numel = m;
  }
  if (t.off[1] < t.off[0] || t.off[1] - t.off[0] != numel * item || t.off[1] > (uint64_t)stt.st_size - 8 - hlen) {
    rc = aa_error_set(
        err, AA_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] do not hold %llu x %zu bytes inside the file",
        path, name, (unsigned long long)t.off[0], (unsigned long long)t.off[1], (unsigned long long)numel, item);
    goto done;
  }
  if ((out->data = malloc((numel ? (size_t)numel : 1) * sizeof(double))) == NULL) {
    rc = aa_error_set(err, AA_ENOMEM, "%s: cannot allocate tensor '%s'", path, name);
    goto done;
  }
  out->ndim = t.ndim;
  out->fmt = item == 8                     ? AA_FMT_FP64
             : item == 4                   ? AA_FMT_FP32
             : strcmp(t.dtype, "F16") == 0 ? AA_FMT_FP16
                                           : AA_FMT_BF16;
  for (int i = 0; i < t.ndim; i++)
    out->shape[i] = (size_t)t.shape[i];
  if (fseek(f, (long)(8 + hlen + t.off[0]), SEEK_SET) != 0) {
    aa_ndarray_free(out);
    rc = aa_error_set(err, AA_EIO, "%s: cannot seek to tensor '%s'", path, name);
    goto done;
  }
  {
    unsigned char buf[1 << 16];
    size_t per = sizeof buf / item, got = 0;
    while (got < numel) {
      size_t want = numel - got < per ? (size_t)(numel - got) : per;
      if (fread(buf, item, want, f) != want) {
        aa_ndarray_free(out);
        rc = aa_error_set(err, AA_EIO, "%s: read error in tensor '%s'", path, name);
        goto done;
      }
      for (size_t i = 0; i < want; i++)
        out->data[got + i] = decode(buf + i * item, t.dtype);
      got += want;
    }
  }
  goto done;
bad_json:
  rc = aa_error_set(err, AA_EFORMAT, "%s: malformed JSON header near byte %td", path, c.s - hdr);
done:
  free(hdr);
  fclose(f);
  return rc;
}
