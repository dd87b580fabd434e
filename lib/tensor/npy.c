/* attnacc: NumPy .npy reader (format 1.0-3.0) and atomic version 1.0 writer for BF16/FP16/FP32/FP64 tensors. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* The format is described in NumPy's "NEP 1 / numpy.lib.format" text:
   magic "\x93NUMPY", one byte major, one byte minor version, a little-endian
   header length (u16 for 1.0, u32 for 2.0 and 3.0), then an ASCII (latin1;
   UTF-8 for 3.0) Python dict literal with keys 'descr', 'fortran_order' and
   'shape', padded with spaces and ended by '\n'. The data follows. */

#define NPY_MAX_HEADER (1u << 20) /* far above anything a 3-axis header needs */

typedef struct {
  const char *s, *end;
} npy_cursor_t;

static void skip_ws(npy_cursor_t *c) {
  while (c->s < c->end && (*c->s == ' ' || *c->s == '\t' || *c->s == '\n' || *c->s == '\r'))
    c->s++;
}

/* A Python string literal in single or double quotes (no escapes are needed
   for any valid key or dtype; a backslash is refused). */
static int parse_str(npy_cursor_t *c, char *out, size_t cap) {
  char q;
  size_t n = 0;
  if (c->s >= c->end || (*c->s != '\'' && *c->s != '"')) return -1;
  q = *c->s++;
  while (c->s < c->end && *c->s != q) {
    if (*c->s == '\\' || n + 1 >= cap) return -1;
    out[n++] = *c->s++;
  }
  if (c->s >= c->end) return -1;
  c->s++;
  out[n] = '\0';
  return 0;
}

static int match_word(npy_cursor_t *c, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(c->end - c->s) < n || memcmp(c->s, w, n) != 0) return 0;
  c->s += n;
  return 1;
}

/* A shape tuple: '(' [int {',' int} [',']] ')'. Returns the axis count or -1;
 *overflow is set for an integer that does not fit size_t. */
static int parse_shape(npy_cursor_t *c, size_t *shape, int cap, int *overflow) {
  int n = 0;
  *overflow = 0;
  if (c->s >= c->end || *c->s != '(') return -1;
  c->s++;
  for (;;) {
    size_t v = 0;
    int digits = 0;
    skip_ws(c);
    if (c->s < c->end && *c->s == ')') {
      c->s++;
      return n;
    }
    while (c->s < c->end && *c->s >= '0' && *c->s <= '9') {
      unsigned dgt = (unsigned)(*c->s - '0');
      if (v > (SIZE_MAX - dgt) / 10)
        *overflow = 1;
      else
        v = v * 10 + dgt;
      c->s++;
      digits++;
    }
    if (digits == 0) return -1;
    if (c->s < c->end && *c->s == 'L') c->s++; /* Python 2 long literal */
    if (n < cap) shape[n] = v;
    n++;
    skip_ws(c);
    if (c->s < c->end && *c->s == ',') {
      c->s++;
      continue;
    }
    if (c->s < c->end && *c->s == ')') {
      c->s++;
      return n;
    }
    return -1;
  }
}

typedef struct {
  char descr[64];
  int fortran;
  int ndim; /* number of axes as written (may exceed 3: refused later) */
  size_t shape[8];
  int shape_overflow;
} npy_header_t;

/* Parse the header dict in any key order, with any spacing and an optional
   trailing comma; after '}' only whitespace (the padding) may follow. */
static int parse_header(npy_header_t *h, const char *txt, size_t len, const char *path, aa_error_t *err) {
  npy_cursor_t c = {txt, txt + len};
  int have_descr = 0, have_fortran = 0, have_shape = 0;
  skip_ws(&c);
  if (c.s >= c.end || *c.s != '{') return aa_error_set(err, AA_EFORMAT, "%s: header is not a Python dict", path);
  c.s++;
  for (;;) {
    char key[64];
    skip_ws(&c);
    if (c.s < c.end && *c.s == '}') {
      c.s++;
      break;
    }
    if (parse_str(&c, key, sizeof key) != 0)
      return aa_error_set(err, AA_EFORMAT, "%s: malformed header (expected a quoted key at offset %td)", path,
                          c.s - txt);
    skip_ws(&c);
    if (c.s >= c.end || *c.s != ':')
      return aa_error_set(err, AA_EFORMAT, "%s: malformed header (expected ':' after '%s')", path, key);
    c.s++;
    skip_ws(&c);
    if (strcmp(key, "descr") == 0) {
      if (have_descr++) return aa_error_set(err, AA_EFORMAT, "%s: header repeats the key 'descr'", path);
      if (c.s < c.end && *c.s == '[')
        return aa_error_set(err, AA_EFORMAT,
                            "%s: structured dtypes are not supported (need '<u2', '<f2', '<f4' or '<f8')", path);
      if (parse_str(&c, h->descr, sizeof h->descr) != 0)
        return aa_error_set(err, AA_EFORMAT, "%s: malformed header (the value of 'descr' is not a string)", path);
    } else if (strcmp(key, "fortran_order") == 0) {
      if (have_fortran++) return aa_error_set(err, AA_EFORMAT, "%s: header repeats the key 'fortran_order'", path);
      if (match_word(&c, "True"))
        h->fortran = 1;
      else if (match_word(&c, "False"))
        h->fortran = 0;
      else
        return aa_error_set(err, AA_EFORMAT, "%s: malformed header ('fortran_order' is not True or False)", path);
    } else if (strcmp(key, "shape") == 0) {
      if (have_shape++) return aa_error_set(err, AA_EFORMAT, "%s: header repeats the key 'shape'", path);
      h->ndim = parse_shape(&c, h->shape, 8, &h->shape_overflow);
      if (h->ndim < 0)
        return aa_error_set(err, AA_EFORMAT, "%s: malformed header ('shape' is not a tuple of integers)", path);
    } else {
      return aa_error_set(err, AA_EFORMAT, "%s: header has an unexpected key '%s'", path, key);
    }
    skip_ws(&c);
    if (c.s < c.end && *c.s == ',') {
      c.s++;
      continue;
    }
    if (c.s < c.end && *c.s == '}') {
      c.s++;
      break;
    }
    return aa_error_set(err, AA_EFORMAT, "%s: malformed header (expected ',' or '}' after '%s')", path, key);
  }
  skip_ws(&c);
  if (c.s != c.end) {
    /* NumPy pads with spaces; tolerate NUL padding written by some tools. */
    while (c.s < c.end && *c.s == '\0')
      c.s++;
    if (c.s != c.end) return aa_error_set(err, AA_EFORMAT, "%s: malformed header (text after the closing '}')", path);
  }
  if (!have_descr || !have_fortran || !have_shape)
    return aa_error_set(err, AA_EFORMAT, "%s: header lacks the key '%s'", path,
                        !have_descr     ? "descr"
                        : !have_fortran ? "fortran_order"
                                        : "shape");
  return AA_OK;
}

/* Map a dtype string to a format and item size; messages say why not. */
static int dtype_lookup(aa_fmt_t *fmt, size_t *itemsize, const char *descr, const char *path, aa_error_t *err) {
  static const struct {
    const char *name;
    aa_fmt_t fmt;
    size_t size;
  } known[] = {{"<u2", AA_FMT_BF16, 2}, {"<f2", AA_FMT_FP16, 2}, {"<f4", AA_FMT_FP32, 4}, {"<f8", AA_FMT_FP64, 8}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(descr, known[i].name) == 0) {
      *fmt = known[i].fmt;
      *itemsize = known[i].size;
      return AA_OK;
    }
  if (descr[0] == '>')
    return aa_error_set(err, AA_EFORMAT, "%s: big-endian dtype '%s' is not supported (need little-endian '<')", path,
                        descr);
  return aa_error_set(err, AA_EFORMAT,
                      "%s: unsupported dtype '%s' (accepted: '<u2' BF16 bit patterns, '<f2', '<f4', '<f8')", path,
                      descr);
}

/* Exact IEEE binary16 decode (every half value is a double). */
static double half_to_double(uint16_t b) {
  int e = (b >> 10) & 0x1f;
  double m = (double)(b & 0x3ff), v;
  if (e == 0x1f)
    v = (b & 0x3ff) ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp(m, -24);
  else
    v = ldexp(m + 1024.0, e - 25);
  return (b & 0x8000) ? -v : v;
}

double aa__decode_le(const unsigned char *p, aa_fmt_t fmt) {
  switch (fmt) {
  case AA_FMT_BF16:
    return (double)aa_bf16_to_f32((uint16_t)(p[0] | (unsigned)p[1] << 8));
  case AA_FMT_FP16:
    return half_to_double((uint16_t)(p[0] | (unsigned)p[1] << 8));
  case AA_FMT_FP32: {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return (double)aa_f32_from_bits(u);
  }
  default: {
    uint64_t u = 0;
    double d;
    for (int i = 7; i >= 0; i--)
      u = u << 8 | p[i];
    memcpy(&d, &u, sizeof d);
    return d;
  }
  }
}

static void format_shape(char *buf, size_t cap, const size_t *shape, int ndim) {
  size_t used = 0;
  used += (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%zu", i ? ", " : "", shape[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* The magic, the version and the header text (malloc'd into *hdr, NUL-terminated, *hlen_out bytes); *data_off is
   where the data start. */
static int read_preamble(char **hdr, size_t *hlen_out, size_t *data_off, const aa__src_t *src, const char *path,
                         aa_error_t *err) {
  unsigned char pre[12];
  size_t hlen;
  int major, minor;
  *hdr = NULL;
  if (src->read(src->ctx, pre, 8) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0)
    return aa_error_set(err, AA_EFORMAT, "%s: not a .npy file (bad magic)", path);
  major = pre[6];
  minor = pre[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    return aa_error_set(err, AA_EFORMAT, "%s: .npy format version %d.%d is not supported (need 1.0, 2.0 or 3.0)",
                        path, major, minor);
  if (major == 1) {
    if (src->read(src->ctx, pre + 8, 2) != 2) goto truncated;
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    *data_off = 10 + hlen;
  } else {
    if (src->read(src->ctx, pre + 8, 4) != 4) goto truncated;
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    *data_off = 12 + hlen;
    if (hlen > NPY_MAX_HEADER) return aa_error_set(err, AA_EFORMAT, "%s: header length %zu is absurd", path, hlen);
  }
  if (*data_off > src->size) goto truncated;
  if ((*hdr = malloc(hlen + 1)) == NULL) return aa_error_set(err, AA_ENOMEM, "%s: cannot allocate the header", path);
  if (src->read(src->ctx, *hdr, hlen) != hlen) goto truncated;
  (*hdr)[hlen] = '\0';
  *hlen_out = hlen;
  return AA_OK;
truncated:
  return aa_error_set(err, AA_EFORMAT, "%s: truncated header", path);
}

/* The header's layout and shape against what the reader takes and the
   `have` bytes that follow the header: *ext sizes the data. */
static int check_shape(aa__extent_t *ext, const npy_header_t *h, size_t itemsize, uint64_t have, int maxdim,
                       const char *path, aa_error_t *err) {
  char shp[160];
  int fit;
  if (h->fortran)
    return aa_error_set(err, AA_EFORMAT, "%s: fortran_order True is not supported (save in C order)", path);
  if (h->ndim < 1 || h->ndim > maxdim)
    return aa_error_set(err, AA_EFORMAT, "%s: %d axes are not supported (need 1 to %d)", path, h->ndim, maxdim);
  format_shape(shp, sizeof shp, h->shape, h->ndim);
  if (h->shape_overflow)
    return aa_error_set(err, AA_EFORMAT, "%s: shape is absurd (an axis does not fit in 64 bits)", path);
  fit = aa__extent(ext, h->shape, h->ndim, itemsize, have);
  if (fit == AA_ERANGE)
    return aa_error_set(err, AA_EFORMAT, "%s: shape %s of '%s' is absurd (its size overflows 64 bits)", path, shp,
                        h->descr);
  if (fit != AA_OK)
    return aa_error_set(err, AA_EFORMAT,
                        "%s: truncated data: shape %s of '%s' needs %zu x %zu bytes, the file holds %ju", path, shp,
                        h->descr, ext->numel, itemsize, (uintmax_t)have);
  if (have != (uint64_t)ext->nbytes)
    return aa_error_set(err, AA_EFORMAT, "%s: %ju trailing bytes after the data of shape %s of '%s'", path,
                        (uintmax_t)(have - ext->nbytes), shp, h->descr);
  return AA_OK;
}

/* The ext->numel items of format fmt from src into out->data, decoded to double. */
static int read_items(aa_ndarray_t *out, const aa__src_t *src, const aa__extent_t *ext, aa_fmt_t fmt, size_t itemsize,
                      const char *path, aa_error_t *err) {
  unsigned char buf[1 << 16];
  size_t per = sizeof buf / itemsize;
  for (size_t got = 0; got < ext->numel;) {
    size_t want = ext->numel - got < per ? ext->numel - got : per;
    if (src->read(src->ctx, buf, want * itemsize) != want * itemsize)
      return aa_error_set(err, AA_EIO, "%s: read error in the data", path);
    for (size_t i = 0; i < want; i++) /* itemsize 1: a boolean mask as its additive form (AA_NPY_BOOL_BIAS) */
      out->data[got + i] = itemsize == 1 ? (buf[i] ? 0.0 : -INFINITY) : aa__decode_le(buf + i * itemsize, fmt);
    got += want;
  }
  /* A source that gives more than it declared (a zip member longer than
     its directory entry) is not the array its header describes. */
  if (src->read(src->ctx, buf, 1) != 0)
    return aa_error_set(err, AA_EFORMAT, "%s: data continue past the %ju bytes declared", path, (uintmax_t)src->size);
  return AA_OK;
}

/* The reader proper. The shape the header declares is sized by aa__extent
   against the bytes the source says follow the header, so nothing of a
   declared size is allocated before it is known to fit the file. */
int aa__npy_read_src(aa_ndarray_t *out, const aa__src_t *src, const char *path, int maxdim, unsigned flags,
                     aa_error_t *err) {
  char *hdr = NULL, shp[160];
  npy_header_t h;
  aa_fmt_t fmt = AA_FMT_FP64;
  size_t itemsize = 8, data_off = 0, hlen = 0;
  aa__extent_t ext;
  int st;
  *out = (aa_ndarray_t){0};
  memset(&h, 0, sizeof h);
  if ((st = read_preamble(&hdr, &hlen, &data_off, src, path, err)) != AA_OK ||
      (st = parse_header(&h, hdr, hlen, path, err)) != AA_OK)
    goto done;
  if ((flags & AA_NPY_BF16_BITS) && strcmp(h.descr, "<i2") == 0) strcpy(h.descr, "<u2"); /* BF16 bits, by request */
  int boolean = (flags & AA_NPY_BOOL_BIAS) && strcmp(h.descr, "|b1") == 0;
  if (boolean) itemsize = 1;
  if ((!boolean && (st = dtype_lookup(&fmt, &itemsize, h.descr, path, err)) != AA_OK) ||
      (st = check_shape(&ext, &h, itemsize, src->size - data_off, maxdim, path, err)) != AA_OK)
    goto done;
  if ((out->data = malloc(ext.dbytes)) == NULL) {
    format_shape(shp, sizeof shp, h.shape, h.ndim);
    st = aa_error_set(err, AA_ENOMEM, "%s: cannot allocate a tensor of shape %s", path, shp);
    goto done;
  }
  out->ndim = h.ndim;
  out->fmt = fmt;
  out->boolean = boolean;
  for (int i = 0; i < h.ndim; i++)
    out->shape[i] = h.shape[i];
  if ((st = read_items(out, src, &ext, fmt, itemsize, path, err)) != AA_OK) aa_ndarray_free(out);
done:
  free(hdr);
  return st;
}

void aa_ndarray_free(aa_ndarray_t *a) {
  free(a->data);
  *a = (aa_ndarray_t){0};
}

static size_t file_read(void *ctx, void *buf, size_t n) {
  return fread(buf, 1, n, (FILE *)ctx);
}

typedef struct {
  const unsigned char *p;
  size_t len, pos;
} mem_src_t;

static size_t mem_read(void *ctx, void *buf, size_t n) {
  mem_src_t *m = ctx;
  if (n > m->len - m->pos) n = m->len - m->pos;
  memcpy(buf, m->p + m->pos, n);
  m->pos += n;
  return n;
}

static int read_file(aa_ndarray_t *out, const char *path, int maxdim, unsigned flags, aa_error_t *err) {
  struct stat st;
  FILE *f;
  int rc;
  *out = (aa_ndarray_t){0};
  f = fopen(path, "rb");
  if (f == NULL) return aa_error_set(err, AA_EIO, "%s: cannot open: %s", path, strerror(errno));
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
    rc = aa_error_set(err, AA_EIO, "%s: not a regular file", path);
  else
    rc = aa__npy_read_src(out, &(aa__src_t){file_read, f, (uint64_t)st.st_size}, path, maxdim, flags, err);
  fclose(f);
  return rc;
}

int aa_npy_read_nd(aa_ndarray_t *out, const char *path, unsigned flags, aa_error_t *err) {
  return read_file(out, path, AA_NDARRAY_MAX_DIM, flags, err);
}

int aa_npy_parse_nd(aa_ndarray_t *out, const void *buf, size_t len, const char *name, unsigned flags,
                    aa_error_t *err) {
  mem_src_t m = {buf, len, 0};
  *out = (aa_ndarray_t){0};
  if (len == 0) return aa_error_set(err, AA_EFORMAT, "%s: empty (not a .npy file)", name);
  return aa__npy_read_src(out, &(aa__src_t){mem_read, &m, len}, name, AA_NDARRAY_MAX_DIM, flags, err);
}

int aa_npy_read(aa_tensor_t *out, const char *path, aa_error_t *err) {
  aa_ndarray_t a;
  int rc = read_file(&a, path, 3, 0, err);
  *out = (aa_tensor_t){0};
  if (rc != AA_OK) return rc;
  out->data = a.data;
  out->ndim = a.ndim;
  out->fmt = a.fmt;
  for (int i = 0; i < 3; i++)
    out->shape[i] = i < a.ndim ? a.shape[i] : 1;
  return AA_OK;
}

/* ---- writing ---- */

/* Round the double x to a binary format with prec significand bits, smallest
   normal exponent emin and largest binade emax: round to nearest, ties to
   even, subnormals kept, overflow to Inf (IEEE 754 default). x / quantum is
   exact (power-of-two scaling), and rint() rounds ties to even in the
   default rounding mode, so this is a single correct rounding. */
static double round_binary(double x, int prec, int emin, int emax) {
  int e;
  double q, r;
  if (!isfinite(x) || x == 0) return x;
  frexp(x, &e); /* |x| = f 2^e, f in [0.5, 1): leading bit 2^(e-1) */
  e = e - 1 < emin ? emin : e - 1;
  q = ldexp(1.0, e - prec + 1);
  r = rint(x / q) * q;
  if (fabs(r) >= ldexp(1.0, emax + 1)) return copysign(INFINITY, x);
  return r;
}

static uint16_t double_to_half_bits(double x) {
  uint16_t s = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  int e;
  if (isnan(x)) return 0x7e00;
  a = round_binary(a, 11, -14, 15);
  if (isinf(a)) return s | 0x7c00;
  if (a == 0) return s;
  frexp(a, &e);
  if (e - 1 < -14) return s | (uint16_t)ldexp(a, 24); /* subnormal: a = m 2^-24 */
  return s | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(ldexp(a, 11 - e) - 1024.0);
}

static void encode_item(unsigned char *p, double x, aa_fmt_t fmt) {
  switch (fmt) {
  case AA_FMT_BF16: {
    /* The BF16-rounded value is an FP32 value, so its FP32 bits end in 16 zeros. */
    uint16_t b = isnan(x) ? (signbit(x) ? 0xffc0 : 0x7fc0)
                          : (uint16_t)(aa_f32_bits((float)round_binary(x, 8, -126, 127)) >> 16);
    p[0] = (unsigned char)b;
    p[1] = (unsigned char)(b >> 8);
    break;
  }
  case AA_FMT_FP16: {
    uint16_t b = double_to_half_bits(x);
    p[0] = (unsigned char)b;
    p[1] = (unsigned char)(b >> 8);
    break;
  }
  case AA_FMT_FP32: {
    uint32_t u = aa_f32_bits((float)x); /* C conversion rounds to nearest even */
    for (int i = 0; i < 4; i++)
      p[i] = (unsigned char)(u >> (8 * i));
    break;
  }
  default: {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    for (int i = 0; i < 8; i++)
      p[i] = (unsigned char)(u >> (8 * i));
    break;
  }
  }
}

/* The version 1.0 header of t in fmt, padded with spaces and a final '\n'
   so that the data start at a multiple of 64 bytes, as NumPy does. */
static int npy_header(char hdr[256], size_t *hlen, size_t *itemsize, const char *path, const aa_tensor_t *t,
                      aa_fmt_t fmt, aa_error_t *err) {
  const char *descr;
  char shp[128];
  switch (fmt) {
  case AA_FMT_BF16:
    descr = "<u2", *itemsize = 2;
    break;
  case AA_FMT_FP16:
    descr = "<f2", *itemsize = 2;
    break;
  case AA_FMT_FP32:
    descr = "<f4", *itemsize = 4;
    break;
  case AA_FMT_FP64:
    descr = "<f8", *itemsize = 8;
    break;
  default:
    return aa_error_set(err, AA_EUNSUPPORTED, "%s: .npy has no dtype for format %d (use bf16, fp16, fp32 or fp64)",
                        path, (int)fmt);
  }
  if (t == NULL || t->ndim < 1 || t->ndim > 3 || t->data == NULL)
    return aa_error_set(err, AA_EINVAL, "%s: nothing to write (empty tensor)", path);
  if (t->ndim == 1)
    snprintf(shp, sizeof shp, "(%zu,)", t->shape[0]);
  else if (t->ndim == 2)
    snprintf(shp, sizeof shp, "(%zu, %zu)", t->shape[0], t->shape[1]);
  else
    snprintf(shp, sizeof shp, "(%zu, %zu, %zu)", t->shape[0], t->shape[1], t->shape[2]);
  int n = snprintf(hdr, 256, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shp);
  size_t len = (size_t)n + 1, total = 10 + len;
  if (total % 64) len += 64 - total % 64;
  if (len > 65535 || len >= 256) return aa_error_set(err, AA_EINVAL, "%s: header too long", path);
  memset(hdr + n, ' ', len - (size_t)n - 1);
  hdr[len - 1] = '\n';
  *hlen = len;
  return AA_OK;
}

/* Magic, header and data into f; a failed write shows in ferror(f). */
static void npy_stream(FILE *f, const char *hdr, size_t hlen, size_t itemsize, const aa_tensor_t *t, aa_fmt_t fmt) {
  unsigned char pre[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
  unsigned char buf[1 << 15];
  size_t numel = aa_tensor_numel(t), per = sizeof buf / itemsize, done = 0;
  if (fwrite(pre, 1, 10, f) != 10 || fwrite(hdr, 1, hlen, f) != hlen) return;
  while (done < numel) {
    size_t k = numel - done < per ? numel - done : per;
    for (size_t i = 0; i < k; i++)
      encode_item(buf + i * itemsize, t->data[done + i], fmt);
    if (fwrite(buf, itemsize, k, f) != k) return;
    done += k;
  }
}

/* Validate, then stream t into a fresh aa_ofile_t o for path: nothing is
   created when t cannot be written. */
static int npy_open_write(aa_ofile_t *o, const char *path, const aa_tensor_t *t, aa_fmt_t fmt, aa_error_t *err) {
  char hdr[256];
  size_t hlen = 0, itemsize = 1;
  int rc = npy_header(hdr, &hlen, &itemsize, path, t, fmt, err);
  if (rc == AA_OK) rc = aa_ofile_open(o, path, err);
  if (rc == AA_OK) npy_stream(o->f, hdr, hlen, itemsize, t, fmt);
  return rc;
}

int aa_npy_write(const char *path, const aa_tensor_t *t, aa_fmt_t fmt, aa_error_t *err) {
  aa_ofile_t o;
  int rc = npy_open_write(&o, path, t, fmt, err);
  return rc != AA_OK ? rc : aa_ofile_commit(&o, err);
}

int aa_npy_write_set(aa_fileset_t *set, const char *path, const aa_tensor_t *t, aa_fmt_t fmt, aa_error_t *err) {
  aa_ofile_t o;
  int rc = npy_open_write(&o, path, t, fmt, err);
  return rc != AA_OK ? rc : aa_fileset_take(set, &o, err);
}
