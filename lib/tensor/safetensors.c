/* attnacc: one tensor of a .safetensors file (header length, JSON header, raw little-endian data). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "internal.h"

/* The format (safetensors' own specification, README "Format"): an unsigned
   little-endian 64-bit header size N, N bytes of UTF-8 JSON, an object whose
   keys are tensor names (plus the optional "__metadata__", string to string)
   and whose values are {"dtype": "F32", "shape": [..], "data_offsets":
   [begin, end]}, offsets relative to the first byte after the header. The
   specification also says the data region is "entirely indexed" with no
   holes and no overlaps; the whole header is checked so before any tensor is
   read, as the reference implementation does. */

#define ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */
#define ST_MAX_AXES 64             /* far above any real tensor; bounds the shape buffer */

/* Bytes per element of the specification's dtypes; 0 for others (sub-byte
   formats, names this reader does not know), whose size is not checked. */
static size_t dtype_size(const char *d) {
  static const struct {
    const char *name;
    size_t size;
  } known[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
               {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
               {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(d, known[i].name) == 0) return known[i].size;
  return 0;
}

/* One tensor of the header, as checked. */
typedef struct {
  const char *name, *dtype;
  size_t shape[ST_MAX_AXES];
  int ndim;
  uint64_t begin, end;
} st_tensor_t;

/* A non-negative JSON integer (jansson's are signed 64-bit, so a value of
   2^63 or more is already refused by the parser as "too big"). */
static int json_uint(uint64_t *v, const json_t *j) {
  if (!json_is_integer(j) || json_integer_value(j) < 0) return -1;
  *v = (uint64_t)json_integer_value(j);
  return 0;
}

/* The entry of tensor key into t, checked against the data region of dlen
   bytes: fields present and typed, offsets ordered and inside the region,
   and the span exactly numel * itemsize bytes (sized by aa__extent). */
static int tensor_entry(st_tensor_t *t, const char *key, json_t *v, uint64_t dlen, const char *path,
                        aa_error_t *err) {
  json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
         *of = json_object_get(v, "data_offsets");
  aa__extent_t e;
  size_t item;
  t->name = key;
  if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(of) ||
      json_array_size(of) != 2)
    return aa_error_set(err, AA_EFORMAT,
                        "%s: tensor '%s' is not an object with a string dtype, a shape array and a data_offsets pair",
                        path, key);
  t->dtype = json_string_value(dt);
  if (json_array_size(sh) > ST_MAX_AXES)
    return aa_error_set(err, AA_EFORMAT, "%s: tensor '%s' has %zu axes (at most %d)", path, key, json_array_size(sh),
                        ST_MAX_AXES);
  t->ndim = (int)json_array_size(sh);
  for (int i = 0; i < t->ndim; i++) {
    uint64_t d;
    if (json_uint(&d, json_array_get(sh, (size_t)i)) != 0 || d > SIZE_MAX)
      return aa_error_set(err, AA_EFORMAT, "%s: tensor '%s': axis %d of its shape is not a non-negative integer",
                          path, key, i);
    t->shape[i] = (size_t)d;
  }
  if (json_uint(&t->begin, json_array_get(of, 0)) != 0 || json_uint(&t->end, json_array_get(of, 1)) != 0 ||
      t->begin > t->end || t->end > dlen)
    return aa_error_set(err, AA_EFORMAT,
                        "%s: tensor '%s': data_offsets are not an ordered pair inside the data region of %llu bytes",
                        path, key, (unsigned long long)dlen);
  if ((item = dtype_size(t->dtype)) == 0) return AA_OK;
  switch (aa__extent(&e, t->shape, t->ndim, item, t->end - t->begin)) {
  case AA_ERANGE:
    return aa_error_set(err, AA_EFORMAT, "%s: tensor '%s': the size of its shape of %s overflows 64 bits", path, key,
                        t->dtype);
  case AA_OK:
    if ((uint64_t)e.nbytes == t->end - t->begin) return AA_OK;
    /* fall through */
  default:
    return aa_error_set(err, AA_EFORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu] do not hold %zu x %zu bytes of %s", path, key,
                        (unsigned long long)t->begin, (unsigned long long)t->end, e.numel, item, t->dtype);
  }
}

static int by_offset(const void *a, const void *b) {
  const st_tensor_t *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* The spans, sorted, tile [0, dlen): each begins where the one before ends. */
static int tiling(st_tensor_t *t, size_t n, uint64_t dlen, const char *path, aa_error_t *err) {
  uint64_t at = 0;
  qsort(t, n, sizeof *t, by_offset);
  for (size_t i = 0; i < n; i++) {
    if (t[i].begin < at)
      return aa_error_set(
          err, AA_EFORMAT, "%s: tensors '%s' and '%s' overlap (data_offsets [%llu, %llu] and [%llu, %llu])", path,
          t[i - 1].name, t[i].name, (unsigned long long)t[i - 1].begin, (unsigned long long)t[i - 1].end,
          (unsigned long long)t[i].begin, (unsigned long long)t[i].end);
    if (t[i].begin > at)
      return aa_error_set(
          err, AA_EFORMAT,
          "%s: tensor '%s': data bytes %llu to %llu before it belong to no tensor (the format has no holes)", path,
          t[i].name, (unsigned long long)at, (unsigned long long)t[i].begin);
    at = t[i].end;
  }
  if (at != dlen)
    return aa_error_set(err, AA_EFORMAT,
                        "%s: the tensors cover %llu of the %llu data bytes (the format has no trailing bytes)", path,
                        (unsigned long long)at, (unsigned long long)dlen);
  return AA_OK;
}

/* The header object, every entry checked: "__metadata__" an object of
   strings (its "bf16_bits": "true" sets *bf16_bits), the rest tensors
   tiling the data region. t gets them (room for json_object_size(root)),
   *want the index of name in t or -1; names the tensor names for messages. */
static int header_entries(st_tensor_t *t, size_t *nt, long *want, char *names, size_t cap, json_t *root,
                          const char *name, uint64_t dlen, int *bf16_bits, const char *path, aa_error_t *err) {
  const char *key;
  size_t used = 0;
  json_t *v;
  int rc;
  *nt = 0;
  *want = -1;
  names[0] = '\0';
  /* No key holds a NUL: jansson (2.6 on; configure asks 2.10) refuses one in
     the text ("control character 0x0") and escaped ("NUL byte in object key
     not supported"), so a key is never read short; tests/treaders has both. */
  json_object_foreach(root, key, v) {
    if (strcmp(key, "__metadata__") == 0) {
      const char *mk;
      json_t *mv;
      if (!json_is_object(v)) return aa_error_set(err, AA_EFORMAT, "%s: '__metadata__' is not an object", path);
      json_object_foreach(v, mk, mv) {
        if (!json_is_string(mv))
          return aa_error_set(err, AA_EFORMAT, "%s: '__metadata__' key '%s' is not a string", path, mk);
        if (strcmp(mk, "bf16_bits") == 0 && strcmp(json_string_value(mv), "true") == 0) *bf16_bits = 1;
      }
      continue;
    }
    if ((rc = tensor_entry(&t[*nt], key, v, dlen, path, err)) != AA_OK) return rc;
    (*nt)++;
    if (used + 1 < cap) used += (size_t)snprintf(names + used, cap - used, "%s%s", used ? ", " : "", key);
  }
  if ((rc = tiling(t, *nt, dlen, path, err)) != AA_OK) return rc;
  for (size_t i = 0; i < *nt; i++)
    if (strcmp(t[i].name, name) == 0) *want = (long)i;
  return AA_OK;
}

/* The checked tensor t of the file f, whose data region starts at base. */
static int read_tensor(aa_ndarray_t *out, FILE *f, uint64_t base, const st_tensor_t *t, int bf16_bits,
                       const char *path, aa_error_t *err) {
  const char *dtype = strcmp(t->dtype, "I16") == 0 && bf16_bits ? "BF16" : t->dtype;
  size_t item = dtype_size(dtype), got = 0;
  aa__extent_t e;
  if (strcmp(dtype, "BF16") != 0 && strcmp(dtype, "F16") != 0 && strcmp(dtype, "F32") != 0 &&
      strcmp(dtype, "F64") != 0)
    return aa_error_set(
        err, AA_EFORMAT,
        "%s: tensor '%s' has dtype %s (accepted: BF16, F16, F32, F64; I16 as BF16 bits with --bf16-bits)", path,
        t->name, t->dtype);
  if (t->ndim < 1 || t->ndim > AA_NDARRAY_MAX_DIM)
    return aa_error_set(err, AA_EFORMAT, "%s: tensor '%s' has %d axes (need 1 to %d)", path, t->name, t->ndim,
                        AA_NDARRAY_MAX_DIM);
  if (aa__extent(&e, t->shape, t->ndim, item, t->end - t->begin) != AA_OK) /* checked by tensor_entry already */
    return aa_error_set(err, AA_EFORMAT, "%s: tensor '%s' does not fit its data_offsets", path, t->name);
  if ((out->data = malloc(e.dbytes)) == NULL)
    return aa_error_set(err, AA_ENOMEM, "%s: cannot allocate tensor '%s'", path, t->name);
  out->ndim = t->ndim;
  out->fmt = item == 8                   ? AA_FMT_FP64
             : item == 4                 ? AA_FMT_FP32
             : strcmp(dtype, "F16") == 0 ? AA_FMT_FP16
                                         : AA_FMT_BF16;
  for (int i = 0; i < t->ndim; i++)
    out->shape[i] = t->shape[i];
  if (fseeko(f, (off_t)(base + t->begin), SEEK_SET) != 0) {
    aa_ndarray_free(out);
    return aa_error_set(err, AA_EIO, "%s: cannot seek to tensor '%s'", path, t->name);
  }
  unsigned char buf[1 << 16];
  size_t per = sizeof buf / item;
  while (got < e.numel) {
    size_t want = e.numel - got < per ? e.numel - got : per;
    if (fread(buf, item, want, f) != want) {
      aa_ndarray_free(out);
      return aa_error_set(err, AA_EIO, "%s: read error in tensor '%s'", path, t->name);
    }
    for (size_t i = 0; i < want; i++)
      out->data[got + i] = aa__decode_le(buf + i * item, out->fmt);
    got += want;
  }
  return AA_OK;
}

int aa_safetensors_read(aa_ndarray_t *out, const char *path, const char *name, unsigned flags, aa_error_t *err) {
  FILE *f;
  struct stat stt;
  unsigned char pre[8];
  uint64_t hlen = 0, dlen;
  char *hdr = NULL, names[300];
  int rc = AA_OK, bf16_bits = (flags & AA_NPY_BF16_BITS) != 0;
  json_t *root = NULL;
  json_error_t jerr;
  st_tensor_t *t = NULL;
  size_t nt = 0;
  long want = -1;
  *out = (aa_ndarray_t){0};
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
  dlen = (uint64_t)stt.st_size - 8 - hlen;
  if ((hdr = malloc((size_t)hlen)) == NULL || fread(hdr, 1, (size_t)hlen, f) != (size_t)hlen) {
    rc = aa_error_set(err, hdr ? AA_EFORMAT : AA_ENOMEM, "%s: cannot read the header", path);
    goto done;
  }
  /* Duplicate keys at any depth are refused (the later would silently win);
     the default end-of-input check refuses anything but whitespace after the
     closing brace (the specification pads with spaces). */
  if ((root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: malformed JSON header: %s (byte %d)", path, jerr.text, jerr.position);
    goto done;
  }
  if (!json_is_object(root)) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: malformed JSON header: not an object", path);
    goto done;
  }
  if ((t = calloc(json_object_size(root) + 1, sizeof *t)) == NULL) {
    rc = aa_error_set(err, AA_ENOMEM, "%s: cannot allocate the header's %zu entries", path, json_object_size(root));
    goto done;
  }
  rc = header_entries(t, &nt, &want, names, sizeof names, root, name, dlen, &bf16_bits, path, err);
  if (rc == AA_OK && want < 0)
    rc = aa_error_set(err, AA_ENOTFOUND, "%s: no tensor '%s' (tensors: %s)", path, name, names[0] ? names : "none");
  if (rc == AA_OK) rc = read_tensor(out, f, 8 + hlen, &t[want], bf16_bits, path, err);
done:
  free(t);
  json_decref(root);
  free(hdr);
  fclose(f);
  return rc;
}
