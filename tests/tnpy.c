/* attnacc: tests of the .npy reader and writer: round trips, hand-built headers of versions 1.0-3.0, refusals. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy.h"
#include "tests.h"

static char dir[64];

static void path_in(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", dir, name);
}

static uint64_t bits64(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Write raw bytes: magic, version, header length of the right width, header text, data. */
static void write_raw(const char *name, int major, int minor, const char *header, const void *data, size_t nbytes) {
  char p[256];
  FILE *f;
  size_t hl = strlen(header);
  path_in(p, sizeof p, name);
  f = fopen(p, "wb");
  if (f == NULL) {
    perror(p);
    exit(1);
  }
  fwrite("\x93NUMPY", 1, 6, f);
  fputc(major, f);
  fputc(minor, f);
  if (major == 1) {
    fputc((int)(hl & 0xff), f);
    fputc((int)(hl >> 8), f);
  } else {
    for (int i = 0; i < 4; i++)
      fputc((int)((hl >> (8 * i)) & 0xff), f);
  }
  fwrite(header, 1, hl, f);
  if (nbytes) fwrite(data, 1, nbytes, f);
  fclose(f);
}

static size_t read_file(const char *name, unsigned char *buf, size_t cap) {
  char p[256];
  FILE *f;
  size_t n;
  path_in(p, sizeof p, name);
  f = fopen(p, "rb");
  if (f == NULL) return 0;
  n = fread(buf, 1, cap, f);
  fclose(f);
  return n;
}

/* Round trip: values exactly representable in fmt (incl. -0, subnormals,
   the largest finite value, Inf and NaN) must come back bit for bit, and the
   data bytes of the first elements must be the hand-known encodings. */
static void test_roundtrip(aa_fmt_t fmt, const char *descr, const double *vals, size_t nv,
                           const unsigned char *first_bytes, size_t nfirst) {
  for (int ndim = 1; ndim <= 3; ndim++) {
    size_t shape[3];
    aa_tensor_t t, r;
    aa_error_t err = {{0}};
    char name[64], p[256];
    unsigned char buf[4096];
    size_t len, hlen;
    int rc;
    if (ndim == 1)
      shape[0] = nv;
    else if (ndim == 2)
      shape[0] = 1, shape[1] = nv;
    else
      shape[0] = 1, shape[1] = 1, shape[2] = nv;
    if (aa_tensor_alloc(&t, ndim, shape, AA_FMT_FP64) != AA_OK) {
      AA_FAIL("tnpy alloc: returned an error");
      return;
    }
    memcpy(t.data, vals, nv * sizeof *vals);
    snprintf(name, sizeof name, "rt_%s_%d.npy", descr + 1, ndim);
    path_in(p, sizeof p, name);
    rc = aa_npy_write(p, &t, fmt, &err);
    AA_CHECK(rc == AA_OK, "tnpy write %s %d-D: status %d (%s)", descr, ndim, rc, err.msg);
    len = read_file(name, buf, sizeof buf);
    AA_CHECK(len > 10 && memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0, "tnpy write %s: magic/version 1.0", descr);
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    AA_CHECK((10 + hlen) % 64 == 0, "tnpy write %s: data offset %zu is not a multiple of 64", descr, 10 + hlen);
    AA_CHECK(buf[10 + hlen - 1] == '\n', "tnpy write %s: header does not end in newline", descr);
    {
      char want[32];
      snprintf(want, sizeof want, "'descr': '%s'", descr);
      AA_CHECK(strstr((char *)buf + 10, want) != NULL, "tnpy write %s: header lacks %s", descr, want);
    }
    AA_CHECK(len == 10 + hlen +
                        nv * (size_t)(fmt == AA_FMT_FP64   ? 8
                                      : fmt == AA_FMT_FP32 ? 4
                                                           : 2),
             "tnpy write %s: file length %zu", descr, len);
    AA_CHECK(memcmp(buf + 10 + hlen, first_bytes, nfirst) == 0, "tnpy write %s: data bytes differ from the encoding",
             descr);
    rc = aa_npy_read(&r, p, &err);
    AA_CHECK(rc == AA_OK, "tnpy read %s %d-D: status %d (%s)", descr, ndim, rc, err.msg);
    if (rc == AA_OK) {
      AA_CHECK(r.ndim == ndim && r.fmt == fmt, "tnpy read %s: ndim %d fmt %d", descr, r.ndim, (int)r.fmt);
      for (int i = 0; i < ndim; i++)
        AA_CHECK(r.shape[i] == shape[i], "tnpy read %s: axis %d is %zu", descr, i, r.shape[i]);
      for (size_t i = 0; i < nv && aa_tensor_numel(&r) == nv; i++) {
        int same = isnan(vals[i]) ? isnan(r.data[i]) : bits64(vals[i]) == bits64(r.data[i]);
        AA_CHECK(same, "tnpy round trip %s %d-D: element %zu: wrote %a (0x%016llx) read %a (0x%016llx)", descr, ndim,
                 i, vals[i], (unsigned long long)bits64(vals[i]), r.data[i], (unsigned long long)bits64(r.data[i]));
      }
      aa_tensor_free(&r);
    }
    aa_tensor_free(&t);
  }
}

/* Writing rounds to the target format (RNE): known halfway cases. */
static void test_write_rounding(void) {
  struct {
    aa_fmt_t fmt;
    double in, want;
  } cases[] = {
      {AA_FMT_BF16, 1.0 + 0x1p-8, 1.0},                    /* tie between 1 and 1 + 2^-7: even is 1 */
      {AA_FMT_BF16, 1.0 + 3 * 0x1p-8, 1.0 + 0x1p-6},       /* tie: even is 1 + 2^-6 */
      {AA_FMT_BF16, 1.0 + 0x1p-8 + 0x1p-30, 1.0 + 0x1p-7}, /* just above the tie: up */
      {AA_FMT_BF16, 0x1p-134, 0.0},                        /* half the smallest subnormal 2^-133: even is 0 */
      {AA_FMT_BF16, 0x1.8p-133, 0x1p-132},                 /* 1.5 subnormal ulps: even is 2 */
      {AA_FMT_BF16, 0x1.ffp127, INFINITY},                 /* max 0x1.fep127 + half ulp: tie to even = overflow */
      {AA_FMT_FP16, 1.0 + 0x1p-11, 1.0},
      {AA_FMT_FP16, 65520.0, INFINITY}, /* max 65504 + half ulp 16: tie to even = overflow */
      {AA_FMT_FP16, 65519.0, 65504.0},
      {AA_FMT_FP16, 0x1p-25, 0.0}, /* half the smallest subnormal 2^-24 */
      {AA_FMT_FP16, 0x1.8p-24, 0x1p-23},
      {AA_FMT_FP32, 1.0 + 0x1p-24, 1.0},
      {AA_FMT_FP32, -(1.0 + 3 * 0x1p-24), -(1.0 + 0x1p-22)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t shape[1] = {1};
    aa_tensor_t t, r;
    aa_error_t err = {{0}};
    char p[256];
    int rc;
    aa_tensor_alloc(&t, 1, shape, AA_FMT_FP64);
    t.data[0] = cases[i].in;
    path_in(p, sizeof p, "round.npy");
    rc = aa_npy_write(p, &t, cases[i].fmt, &err);
    if (rc == AA_OK) rc = aa_npy_read(&r, p, &err);
    AA_CHECK(rc == AA_OK, "tnpy write rounding %zu: status %d (%s)", i, rc, err.msg);
    if (rc == AA_OK) {
      AA_CHECK(r.data[0] == cases[i].want, "tnpy write rounding %zu (fmt %d): %a became %a, want %a", i,
               (int)cases[i].fmt, cases[i].in, r.data[0], cases[i].want);
      aa_tensor_free(&r);
    }
    aa_tensor_free(&t);
  }
}

/* Headers as other writers produce them: any key order, spacing, double
   quotes, trailing comma or none, version 2.0 and 3.0 lengths. */
static void test_headers(void) {
  const float f4[6] = {1.0f, -2.5f, 0.375f, 1e-40f, 3.0f, -0.0f};
  const unsigned char u2[4] = {0x80, 0x3f, 0xc0, 0xbf}; /* BF16 1.0, -1.5 */
  struct {
    int major;
    const char *hdr;
    int ndim;
    size_t s0, s1;
  } cases[] = {
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n", 2, 2, 3},
      {1, "{ 'shape':(2,3) ,'fortran_order' :False,   'descr':'<f4'  }\n", 2, 2, 3},
      {1, "{\"fortran_order\": False, \"descr\": \"<f4\", \"shape\": (6,)}      \n", 1, 6, 0},
      {2, "{'descr':'<f4','fortran_order':False,'shape':(3,2,),}\n", 2, 3, 2},
      {3, "{'shape': ( 1 , 6 ), 'descr': '<f4', 'fortran_order': False}   \n", 2, 1, 6},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char p[256];
    aa_tensor_t r;
    aa_error_t err = {{0}};
    int rc;
    write_raw("hdr.npy", cases[i].major, 0, cases[i].hdr, f4, sizeof f4);
    path_in(p, sizeof p, "hdr.npy");
    rc = aa_npy_read(&r, p, &err);
    AA_CHECK(rc == AA_OK, "tnpy header %zu (version %d.0 \"%s\"): status %d (%s)", i, cases[i].major, cases[i].hdr,
             rc, err.msg);
    if (rc != AA_OK) continue;
    AA_CHECK(r.ndim == cases[i].ndim && r.shape[0] == cases[i].s0 &&
                 (cases[i].ndim == 1 || r.shape[1] == cases[i].s1),
             "tnpy header %zu: shape read as %d-D [%zu, %zu]", i, r.ndim, r.shape[0], r.shape[1]);
    AA_CHECK(r.fmt == AA_FMT_FP32, "tnpy header %zu: fmt %d", i, (int)r.fmt);
    for (int j = 0; j < 6; j++)
      AA_CHECK(bits64(r.data[j]) == bits64((double)f4[j]), "tnpy header %zu: element %d read %a want %a", i, j,
               r.data[j], (double)f4[j]);
    aa_tensor_free(&r);
  }
  {
    char p[256];
    aa_tensor_t r;
    aa_error_t err = {{0}};
    write_raw("bf.npy", 1, 0, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }\n", u2, sizeof u2);
    path_in(p, sizeof p, "bf.npy");
    AA_CHECK(aa_npy_read(&r, p, &err) == AA_OK, "tnpy '<u2': %s", err.msg);
    AA_CHECK(r.fmt == AA_FMT_BF16 && r.data[0] == 1.0 && r.data[1] == -1.5,
             "tnpy '<u2': bits 0x3f80 0xbfc0 read as %a %a (fmt %d), want 1 and -1.5", r.data[0], r.data[1],
             (int)r.fmt);
    aa_tensor_free(&r);
  }
}

/* Every refusal is AA_EFORMAT (AA_EIO for an absent file) and names the file and the reason. */
static void test_refusals(void) {
  unsigned char data[64] = {0};
  struct {
    const char *name;
    int major, minor;
    const char *hdr;
    size_t nbytes;
    const char *reason;
  } cases[] = {
      {"v4.npy", 4, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 8, "version 4.0"},
      {"v11.npy", 1, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 8, "version 1.1"},
      {"be.npy", 1, 0, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", 8, "big-endian dtype '>f4'"},
      {"fo.npy", 1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", 16, "fortran_order"},
      {"u1.npy", 1, 0, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }\n", 2, "unsupported dtype '|u1'"},
      {"i4.npy", 1, 0, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", 8, "unsupported dtype '<i4'"},
      {"c8.npy", 1, 0, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }\n", 16, "unsupported dtype"},
      {"st.npy", 1, 0, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", 8, "structured"},
      {"d4.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 1), }\n", 8, "4 axes"},
      {"d0.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 4, "0 axes"},
      {"tr.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }\n", 60, "truncated"},
      {"tb.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", 16, "trailing"},
      {"ab.npy", 1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }\n",
       8, "absurd"},
      {"ab2.npy", 1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999, 2), }\n", 8,
       "absurd"},
      {"big.npy", 1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000), }\n", 8, "truncated"},
      {"nokey.npy", 1, 0, "{'descr': '<f4', 'shape': (2,), }\n", 8, "fortran_order"},
      {"extra.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n", 8, "unexpected key"},
      {"dup.npy", 1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\n", 8, "repeats"},
      {"junk.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x\n", 8, "malformed"},
      {"notdict.npy", 1, 0, "['descr', '<f4']\n", 8, "not a Python dict"},
      {"fortx.npy", 1, 0, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}\n", 8, "fortran_order"},
      {"shp.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}\n", 8, "shape"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char p[256];
    aa_tensor_t r;
    aa_error_t err = {{0}};
    int rc;
    write_raw(cases[i].name, cases[i].major, cases[i].minor, cases[i].hdr, data, cases[i].nbytes);
    path_in(p, sizeof p, cases[i].name);
    rc = aa_npy_read(&r, p, &err);
    AA_CHECK(rc == AA_EFORMAT, "tnpy refusal %s: status %d, want AA_EFORMAT (%s)", cases[i].name, rc, err.msg);
    AA_CHECK(strstr(err.msg, cases[i].name) != NULL, "tnpy refusal %s: message \"%s\" does not name the file",
             cases[i].name, err.msg);
    AA_CHECK(strstr(err.msg, cases[i].reason) != NULL, "tnpy refusal %s: message \"%s\" does not say \"%s\"",
             cases[i].name, err.msg, cases[i].reason);
    AA_CHECK(r.data == NULL, "tnpy refusal %s: tensor left allocated", cases[i].name);
    if (rc == AA_OK) aa_tensor_free(&r);
  }
  { /* bad magic, and a file shorter than the prefix */
    char p[256];
    aa_tensor_t r;
    aa_error_t err = {{0}};
    FILE *f;
    path_in(p, sizeof p, "magic.npy");
    f = fopen(p, "wb");
    fwrite("\x93NUMPZ\x01\x00\x10\x00{}", 1, 12, f);
    fclose(f);
    AA_CHECK(aa_npy_read(&r, p, &err) == AA_EFORMAT && strstr(err.msg, "magic.npy") && strstr(err.msg, "magic"),
             "tnpy refusal bad magic: \"%s\"", err.msg);
    path_in(p, sizeof p, "short.npy");
    f = fopen(p, "wb");
    fwrite("\x93NUMPY\x01\x00\x40", 1, 9, f);
    fclose(f);
    AA_CHECK(aa_npy_read(&r, p, &err) == AA_EFORMAT && strstr(err.msg, "short.npy") && strstr(err.msg, "truncated"),
             "tnpy refusal truncated header: \"%s\"", err.msg);
    path_in(p, sizeof p, "absent.npy");
    AA_CHECK(aa_npy_read(&r, p, &err) == AA_EIO && strstr(err.msg, "absent.npy"), "tnpy absent file: \"%s\"",
             err.msg);
  }
}

static int count_entries(const char *d) {
  DIR *dp = opendir(d);
  struct dirent *e;
  int n = 0;
  if (dp == NULL) return -1;
  while ((e = readdir(dp)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(dp);
  return n;
}

/* Atomic write: a failure leaves nothing, a success leaves no temporary,
   and overwriting replaces the old file. */
static void test_atomic(void) {
  char sub[128], p[256];
  size_t shape[2] = {2, 2};
  aa_tensor_t t, r;
  aa_error_t err = {{0}};
  int rc;
  snprintf(sub, sizeof sub, "%s/atomic", dir);
  mkdir(sub, 0777);
  aa_tensor_alloc(&t, 2, shape, AA_FMT_FP64);
  t.data[0] = 1, t.data[1] = 2, t.data[2] = 3, t.data[3] = 4;
  snprintf(p, sizeof p, "%s/missing/x.npy", sub);
  rc = aa_npy_write(p, &t, AA_FMT_FP32, &err);
  AA_CHECK(rc == AA_EIO && strstr(err.msg, "x.npy") != NULL, "tnpy atomic: write into a missing folder gave %d (%s)",
           rc, err.msg);
  AA_CHECK(count_entries(sub) == 0, "tnpy atomic: failed write left %d entries", count_entries(sub));
  snprintf(p, sizeof p, "%s/a.npy", sub);
  AA_CHECK(aa_npy_write(p, &t, AA_FMT_FP32, &err) == AA_OK, "tnpy atomic: write: %s", err.msg);
  t.data[0] = -7;
  AA_CHECK(aa_npy_write(p, &t, AA_FMT_BF16, &err) == AA_OK, "tnpy atomic: overwrite: %s", err.msg);
  AA_CHECK(count_entries(sub) == 1, "tnpy atomic: %d entries after two writes, want 1", count_entries(sub));
  rc = aa_npy_read(&r, p, &err);
  AA_CHECK(rc == AA_OK && r.fmt == AA_FMT_BF16 && r.data[0] == -7, "tnpy atomic: overwritten file reads %s %a",
           err.msg, rc == AA_OK ? r.data[0] : 0.0);
  if (rc == AA_OK) aa_tensor_free(&r);
  rc = aa_npy_write(p, &t, AA_FMT_E4M3, &err);
  AA_CHECK(rc == AA_EUNSUPPORTED, "tnpy: writing e4m3 gave %d, want AA_EUNSUPPORTED", rc);
  aa_tensor_free(&t);
}

static void cleanup(void) {
  DIR *dp;
  struct dirent *e;
  char p[512];
  snprintf(p, sizeof p, "%s/atomic", dir);
  if ((dp = opendir(p)) != NULL) {
    while ((e = readdir(dp)) != NULL) {
      char q[768];
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(q, sizeof q, "%s/%s", p, e->d_name);
      unlink(q);
    }
    closedir(dp);
    rmdir(p);
  }
  if ((dp = opendir(dir)) != NULL) {
    while ((e = readdir(dp)) != NULL) {
      char q[768];
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(q, sizeof q, "%s/%s", dir, e->d_name);
      unlink(q);
    }
    closedir(dp);
  }
  rmdir(dir);
}

int main(void) {
  /* Encodings written out by hand from the IEEE/BF16 layouts. */
  const double bf[] = {1.0, -2.0, 0x1p-133, -0.0, 0x1.fep127, INFINITY, -INFINITY, NAN, 0x1.5p-126, 3.0};
  const unsigned char bf_bytes[] = {0x80, 0x3f, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x80, 0x7f, 0x7f};
  const double h[] = {1.0, -2.0, 0x1p-24, 65504.0, -0.0, INFINITY, NAN, 0x1.ff8p-15, 0.333251953125};
  const unsigned char h_bytes[] = {0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0xff, 0x7b, 0x00, 0x80};
  const double s[] = {1.0, -2.0, 0x1p-149, 0x1.fffffep127, -0.0, INFINITY, NAN, 0.1f};
  const unsigned char s_bytes[] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x00};
  const double d[] = {1.0, -2.0, 0x1p-1074, 0x1.fffffffffffffp1023, -0.0, INFINITY, NAN, 0.1};
  const unsigned char d_bytes[] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0xc0};

  snprintf(dir, sizeof dir, "tnpy-tmp.XXXXXX");
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  printf("tnpy: working in %s\n", dir);
  test_roundtrip(AA_FMT_BF16, "<u2", bf, sizeof bf / sizeof bf[0], bf_bytes, sizeof bf_bytes);
  test_roundtrip(AA_FMT_FP16, "<f2", h, sizeof h / sizeof h[0], h_bytes, sizeof h_bytes);
  test_roundtrip(AA_FMT_FP32, "<f4", s, sizeof s / sizeof s[0], s_bytes, sizeof s_bytes);
  test_roundtrip(AA_FMT_FP64, "<f8", d, sizeof d / sizeof d[0], d_bytes, sizeof d_bytes);
  test_write_rounding();
  test_headers();
  test_refusals();
  test_atomic();
  if (aa_test_failures == 0) cleanup();
  return aa_test_finish("tnpy");
}
