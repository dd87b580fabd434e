/* attnacc: the file readers refuse what a file cannot hold: size overflows, malformed safetensors headers, duplicate
 * and bomb .npz members. `treaders --write DIR` writes the crafted files instead. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "npy.h"
#include "tests.h"

#ifdef AA_HAVE_LIBZIP
#include <zip.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define TR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TR_ASAN 1
#endif
#endif

static char dir[400];

static void path_in(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", dir, name);
}

static void write_bytes(const char *name, const void *data, size_t len) {
  char p[512];
  FILE *f;
  path_in(p, sizeof p, name);
  if ((f = fopen(p, "wb")) == NULL || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
    perror(p);
    exit(1);
  }
}

/* A .safetensors file: the header (hlen bytes, which may hold a NUL) and
   dlen zero bytes of data, the layout of the format's specification. */
typedef struct {
  const char *name;
  const char *json;
  size_t hlen; /* 0: strlen(json) */
  size_t dlen;
  int status;       /* what aa_safetensors_read of "q" must return */
  const char *must; /* a part of the message (beside the path) */
} st_case_t;

/* The three size overflows of the issue: numel * itemsize wraps to the bytes
   the offsets span (or to 0), and the 64 KiB of data are one read buffer's
   worth, so a reader that believed the shape would write that much into
   the few bytes it allocated. fuzz/corpus/safetensors holds these files. */
/* The entry of an F32 tensor: shape and data_offsets as JSON text. */
#define ST_F32(shape, offsets) "{\"dtype\":\"F32\",\"shape\":[" shape "],\"data_offsets\":[" offsets "]}"
#define NUL_KEY "{\"q\0x\":" ST_F32("1", "0,4") "}"

static const st_case_t st_cases[] = {
    {"overflow-f32-2p62.safetensors", "{\"q\":" ST_F32("4611686018427387905", "0,4") "}", 0, 65536, AA_EFORMAT,
     "'q': the size of its shape of F32 overflows"},
    {"overflow-f64-2p61.safetensors",
     "{\"q\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}}", 0, 65536, AA_EFORMAT,
     "'q': the size of its shape of F64 overflows"},
    {"overflow-bf16-2p31x2p32.safetensors",
     "{\"q\":{\"dtype\":\"BF16\",\"shape\":[2147483648,4294967296],\"data_offsets\":[0,0]}}", 0, 65536, AA_EFORMAT,
     "'q': the size of its shape of BF16 overflows"},
    {"offsets-2p63.safetensors", "{\"q\":" ST_F32("1", "9223372036854775808,9223372036854775812") "}", 0, 4,
     AA_EFORMAT, "too big integer"},
    {"ok-zero-size.safetensors", "{\"q\":" ST_F32("0,3", "0,0") ",\"k\":" ST_F32("1", "0,4") "}  ", 0, 4, AA_OK, ""},
    {"ok-tiled.safetensors",
     "{\"__metadata__\":{\"format\":\"pt\"},\"k\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]},"
     "\"z\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[8,8]},\"q\":" ST_F32("2", "0,8") "}",
     0, 16, AA_OK, ""},
    {"meta-number.safetensors", "{\"__metadata__\":5,\"q\":" ST_F32("1", "0,4") "}", 0, 4, AA_EFORMAT,
     "'__metadata__' is not an object"},
    {"meta-value-number.safetensors", "{\"__metadata__\":{\"bf16_bits\":1},\"q\":" ST_F32("1", "0,4") "}", 0, 4,
     AA_EFORMAT, "'__metadata__' key 'bf16_bits' is not a string"},
    {"nul-key.safetensors", NUL_KEY, sizeof NUL_KEY - 1, 4, AA_EFORMAT, "control character 0x0 near '\"q'"},
    {"nul-escape-key.safetensors", "{\"q\\u0000x\":" ST_F32("1", "0,4") "}", 0, 4, AA_EFORMAT,
     "NUL byte in object key"},
    {"trailing-garbage.safetensors", "{\"q\":" ST_F32("1", "0,4") "}x", 0, 4, AA_EFORMAT,
     "end of file expected near 'x'"},
    {"overlap.safetensors", "{\"q\":" ST_F32("2", "0,8") ",\"k\":" ST_F32("2", "0,8") "}", 0, 8, AA_EFORMAT,
     "overlap"},
    {"overlap-partial.safetensors", "{\"q\":" ST_F32("2", "0,8") ",\"k\":" ST_F32("2", "4,12") "}", 0, 12, AA_EFORMAT,
     "tensors 'q' and 'k' overlap"},
    {"out-of-range.safetensors", "{\"q\":" ST_F32("2", "0,8") "}", 0, 4, AA_EFORMAT,
     "tensor 'q': data_offsets are not an ordered pair inside the data region of 4 bytes"},
    {"hole.safetensors", "{\"q\":" ST_F32("1", "4,8") "}", 0, 8, AA_EFORMAT,
     "tensor 'q': data bytes 0 to 4 before it belong to no tensor"},
    {"uncovered-tail.safetensors", "{\"q\":" ST_F32("1", "0,4") "}", 0, 8, AA_EFORMAT,
     "the tensors cover 4 of the 8 data bytes"},
    {"duplicate-key.safetensors", "{\"q\":" ST_F32("1", "0,4") ",\"q\":" ST_F32("2", "4,12") "}", 0, 12, AA_EFORMAT,
     "duplicate object key near '\"q\"'"},
    {"duplicate-inner-key.safetensors",
     "{\"q\":{\"dtype\":\"F32\",\"shape\":[1],\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, AA_EFORMAT,
     "duplicate object key near '\"shape\"'"},
    {"negative-axis.safetensors", "{\"q\":" ST_F32("-1", "0,4") "}", 0, 4, AA_EFORMAT,
     "tensor 'q': axis 0 of its shape is not a non-negative integer"},
    {"not-object.safetensors", "[1,2]", 0, 0, AA_EFORMAT, "not an object"},
};

static void write_st(const st_case_t *c) {
  size_t hl = c->hlen ? c->hlen : strlen(c->json), n = 8 + hl + c->dlen;
  unsigned char *b = calloc(n, 1);
  if (b == NULL) exit(1);
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(((uint64_t)hl >> (8 * i)) & 0xff);
  memcpy(b + 8, c->json, hl);
  write_bytes(c->name, b, n);
  free(b);
}

static void test_safetensors(void) {
  for (size_t i = 0; i < sizeof st_cases / sizeof st_cases[0]; i++) {
    const st_case_t *c = &st_cases[i];
    char p[512];
    aa_ndarray_t a;
    aa_error_t err = {{0}};
    int rc;
    write_st(c);
    path_in(p, sizeof p, c->name);
    rc = aa_safetensors_read(&a, p, "q", 0, &err);
    if (c->status == AA_OK)
      AA_CHECK(rc == AA_OK && a.ndim >= 1 && a.data != NULL && (a.shape[0] == 0 || a.data[0] == 0),
               "treaders %s: refused: %s", c->name, err.msg);
    else
      AA_CHECK(rc == c->status && strstr(err.msg, p) && strstr(err.msg, c->must) && !strchr(err.msg, '\n'),
               "treaders %s: status %d (want %d), message '%s' (want the path and '%s' on one line)", c->name, rc,
               c->status, rc == AA_OK ? "" : err.msg, c->must);
    aa_ndarray_free(&a);
  }
  {
    char p[512];
    aa_ndarray_t a;
    aa_error_t err = {{0}};
    path_in(p, sizeof p, "ok-zero-size.safetensors");
    AA_CHECK(aa_safetensors_read(&a, p, "q", 0, &err) == AA_OK && a.ndim == 2 && a.shape[0] == 0 && a.shape[1] == 3 &&
                 a.data != NULL,
             "treaders: a [0, 3] tensor: %s", err.msg);
    aa_ndarray_free(&a);
    path_in(p, sizeof p, "ok-tiled.safetensors");
    AA_CHECK(aa_safetensors_read(&a, p, "k", 0, &err) == AA_EFORMAT && strstr(err.msg, "dtype I64"),
             "treaders: an I64 tensor of a valid file: '%s'", err.msg);
  }
}

/* A version 1.0 .npy of header dict text hdr (padded to 64 bytes) and
   dlen bytes of data, each byte fill, into a malloc'd buffer. */
static unsigned char *npy_bytes(size_t *len, const char *hdr, size_t dlen, unsigned char fill) {
  size_t hl = strlen(hdr) + 1, pad = (64 - (10 + hl) % 64) % 64;
  unsigned char *b;
  *len = 10 + hl + pad + dlen;
  if ((b = malloc(*len)) == NULL) exit(1);
  memcpy(b, "\x93NUMPY\x01\x00", 8);
  b[8] = (unsigned char)((hl + pad) & 0xff);
  b[9] = (unsigned char)((hl + pad) >> 8);
  memcpy(b + 10, hdr, hl - 1);
  memset(b + 10 + hl - 1, ' ', pad);
  b[10 + hl + pad - 1] = '\n';
  memset(b + 10 + hl + pad, fill, dlen);
  return b;
}

/* .npy headers whose shape overflows or exceeds the file (fuzz/corpus/npy). */
static const struct {
  const char *name, *hdr;
  size_t dlen;
  const char *must;
} npy_cases[] = {
    {"overflow-f4-2p62.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387905,), }", 4,
     "overflows 64 bits"},
    {"overflow-f8-2p31x2p32.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2147483648, 4294967296), }", 0,
     "overflows 64 bits"},
    {"declares-8tib.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }", 8,
     "truncated data"},
};

static void write_npy(size_t i) {
  size_t len;
  unsigned char *b = npy_bytes(&len, npy_cases[i].hdr, npy_cases[i].dlen, 0);
  write_bytes(npy_cases[i].name, b, len);
  free(b);
}

static void test_npy(void) {
  for (size_t i = 0; i < sizeof npy_cases / sizeof npy_cases[0]; i++) {
    char p[512];
    aa_ndarray_t a;
    aa_error_t err = {{0}};
    write_npy(i);
    path_in(p, sizeof p, npy_cases[i].name);
    AA_CHECK(aa_npy_read_nd(&a, p, 0, &err) == AA_EFORMAT && strstr(err.msg, npy_cases[i].must),
             "treaders %s: '%s' (want '%s')", npy_cases[i].name, err.msg, npy_cases[i].must);
    aa_ndarray_free(&a);
  }
}

#ifdef AA_HAVE_LIBZIP
/* An archive of the members names[i] = bytes[i] (deflated or stored), by libzip. */
static void write_zip(const char *name, int n, const char *const *names, unsigned char *const *bytes,
                      const size_t *lens, int deflate) {
  char p[512];
  int zerr = 0;
  zip_t *za;
  path_in(p, sizeof p, name);
  if ((za = zip_open(p, ZIP_CREATE | ZIP_TRUNCATE, &zerr)) == NULL) {
    printf("FAIL treaders: cannot create %s (libzip error %d)\n", p, zerr);
    exit(1);
  }
  for (int i = 0; i < n; i++) {
    zip_source_t *s = zip_source_buffer(za, bytes[i], lens[i], 0);
    zip_int64_t idx = s ? zip_file_add(za, names[i], s, ZIP_FL_OVERWRITE) : -1;
    if (idx < 0 || zip_set_file_compression(za, (zip_uint64_t)idx, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0) {
      printf("FAIL treaders: cannot add %s to %s: %s\n", names[i], p, zip_strerror(za));
      exit(1);
    }
  }
  if (zip_close(za) != 0) {
    printf("FAIL treaders: cannot write %s: %s\n", p, zip_strerror(za));
    exit(1);
  }
}

/* The whole of a file of dir, malloc'd. */
static unsigned char *slurp(const char *name, size_t *len) {
  char p[512];
  struct stat st;
  unsigned char *b;
  FILE *f;
  path_in(p, sizeof p, name);
  if (stat(p, &st) != 0 || (b = malloc((size_t)st.st_size)) == NULL || (f = fopen(p, "rb")) == NULL) exit(1);
  *len = fread(b, 1, (size_t)st.st_size, f);
  fclose(f);
  return b;
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/* Rewrite the uncompressed size of every entry (local header and central
   directory) to size: an archive whose directory lies. */
static void patch_sizes(const char *name, uint32_t size) {
  size_t len;
  unsigned char *b = slurp(name, &len);
  for (size_t i = 0; i + 46 <= len; i++) {
    if (memcmp(b + i, "PK\x03\x04", 4) == 0) put32(b + i + 22, size);
    if (memcmp(b + i, "PK\x01\x02", 4) == 0) put32(b + i + 24, size);
  }
  write_bytes(name, b, len);
  free(b);
}

/* Rename every member called from to to (same length) in place: libzip
   will not write two members of one name, NumPy's zipfile will. */
static void patch_names(const char *name, const char *from, const char *to) {
  size_t len, n = strlen(from);
  unsigned char *b = slurp(name, &len);
  for (size_t i = 0; i + n <= len; i++)
    if (memcmp(b + i, from, n) == 0) memcpy(b + i, to, n);
  write_bytes(name, b, len);
  free(b);
}

/* bomb-shape.npz: q.npy's header declares 2^28 doubles (2 GiB), its 64 MiB
   of zeros deflate to about 64 KiB, and the directory tells the truth.
   bomb-ratio.npz: q.npy declares 2^27 doubles (1 GiB) and has 1 MiB, and the
   directory is rewritten to agree with the header: more than deflate's
   ratio allows from the compressed size. duplicate.npz: two members q.npy,
   [1.0] and then [2.0]. overflow.npz: a shape of 2^62 + 1 '<f4';
   ok-zero-size.npz: a valid [0, 3]. */
#define BOMB_DATA ((size_t)64 << 20)
static void write_npz(void) {
  size_t len[2];
  unsigned char *b[2];
  const char *q[1] = {"q.npy"}, *qx[2] = {"q.npy", "x.npy"};
  b[0] = npy_bytes(&len[0], "{'descr': '<f8', 'fortran_order': False, 'shape': (268435456,), }", BOMB_DATA, 0);
  write_zip("bomb-shape.npz", 1, q, b, len, 1);
  free(b[0]);
  b[0] = npy_bytes(&len[0], "{'descr': '<f8', 'fortran_order': False, 'shape': (134217728,), }", 1u << 20, 0);
  write_zip("bomb-ratio.npz", 1, q, b, len, 1);
  patch_sizes("bomb-ratio.npz", (uint32_t)(len[0] - (1u << 20) + ((size_t)1 << 30)));
  free(b[0]);
  b[0] = npy_bytes(&len[0], "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8, 0);
  b[1] = npy_bytes(&len[1], "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8, 0);
  memcpy(b[0] + len[0] - 8, &(double){1.0}, 8); /* little-endian host (configure) */
  memcpy(b[1] + len[1] - 8, &(double){2.0}, 8);
  write_zip("duplicate.npz", 2, qx, b, len, 0);
  patch_names("duplicate.npz", "x.npy", "q.npy");
  free(b[0]);
  free(b[1]);
  b[0] = npy_bytes(&len[0], "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387905,), }", 4, 0);
  write_zip("overflow.npz", 1, q, b, len, 1);
  free(b[0]);
  b[0] = npy_bytes(&len[0], "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 0, 0);
  write_zip("ok-zero-size.npz", 1, q, b, len, 0);
  free(b[0]);
}

/* The size of this process's address space, or 0 where /proc does not say. */
static size_t vm_bytes(void) {
  unsigned long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return 0;
  if (fscanf(f, "%lu", &pages) != 1) pages = 0;
  fclose(f);
  return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* aa_npz_read of "q" in a child whose address space may grow by at most
   room bytes (none under AddressSanitizer, whose shadow memory a limit
   would break): its status, or -1 when it did not exit. */
static int npz_status_limited(const char *p, size_t room) {
  pid_t pid;
  int ws;
  fflush(stdout); /* or the child's exit would print the parent's pending output again */
  pid = fork();
  if (pid == 0) {
    aa_ndarray_t a;
    aa_error_t err = {{0}};
    size_t vm = vm_bytes();
#ifndef TR_ASAN
    if (vm > 0) setrlimit(RLIMIT_AS, &(struct rlimit){vm + room, vm + room});
#else
    (void)vm, (void)room;
#endif
    int rc = aa_npz_read(&a, p, "q", 0, &err);
    if (rc != AA_OK) printf("treaders: child: %s\n", err.msg);
    fflush(stdout);
    _exit(rc);
  }
  if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws)) return -1;
  return WEXITSTATUS(ws);
}

static void test_npz(void) {
  char p[512];
  aa_ndarray_t a;
  aa_error_t err = {{0}};
  int rc;
  write_npz();
  path_in(p, sizeof p, "duplicate.npz");
  rc = aa_npz_read(&a, p, "q", 0, &err);
  AA_CHECK(rc == AA_EFORMAT && strstr(err.msg, p) && strstr(err.msg, "duplicate member 'q.npy'"),
           "treaders duplicate.npz: status %d (value %a), message '%s'", rc, rc == AA_OK ? a.data[0] : 0.0,
           rc == AA_OK ? "" : err.msg);
  aa_ndarray_free(&a);
  /* 16 MiB of room: the reader needs libzip's inflate state and one 64 KiB
     buffer, not the 64 MiB the member inflates to nor the 2 GiB declared. */
  path_in(p, sizeof p, "bomb-shape.npz");
  rc = npz_status_limited(p, (size_t)16 << 20);
  AA_CHECK(rc == AA_EFORMAT, "treaders bomb-shape.npz: status %d in 16 MiB of memory (want %d, the shape refused)",
           rc, AA_EFORMAT);
  rc = aa_npz_read(&a, p, "q", 0, &err);
  AA_CHECK(rc == AA_EFORMAT && strstr(err.msg, "bomb-shape.npz[q.npy]: truncated data: shape [268435456]"),
           "treaders bomb-shape.npz: '%s'", err.msg);
  path_in(p, sizeof p, "bomb-ratio.npz");
  rc = aa_npz_read(&a, p, "q", 0, &err);
  AA_CHECK(rc == AA_EFORMAT && strstr(err.msg, "bomb-ratio.npz[q.npy]") && strstr(err.msg, "more than deflate's"),
           "treaders bomb-ratio.npz: status %d, '%s'", rc, err.msg);
  aa_ndarray_free(&a);
  path_in(p, sizeof p, "overflow.npz");
  AA_CHECK(aa_npz_read(&a, p, "q", 0, &err) == AA_EFORMAT && strstr(err.msg, "overflows 64 bits"),
           "treaders overflow.npz: '%s'", err.msg);
  path_in(p, sizeof p, "ok-zero-size.npz");
  AA_CHECK(aa_npz_read(&a, p, "q", 0, &err) == AA_OK && a.ndim == 2 && a.shape[0] == 0 && a.shape[1] == 3,
           "treaders ok-zero-size.npz: %s", err.msg);
  aa_ndarray_free(&a);
}
#endif

int main(int argc, char **argv) {
  if (argc == 3 &&
      strcmp(argv[1], "--write") == 0) { /* the crafted files, for tests/treaders_cli.sh and fuzz/corpus */
    snprintf(dir, sizeof dir, "%s", argv[2]);
    for (size_t i = 0; i < sizeof st_cases / sizeof st_cases[0]; i++)
      write_st(&st_cases[i]);
    for (size_t i = 0; i < sizeof npy_cases / sizeof npy_cases[0]; i++)
      write_npy(i);
#ifdef AA_HAVE_LIBZIP
    write_npz();
#endif
    return 0;
  }
  const char *base = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/treaders.XXXXXX", base && *base ? base : "/tmp");
  if (mkdtemp(dir) == NULL) {
    printf("FAIL treaders: cannot create a temporary folder\n");
    return 1;
  }
  test_safetensors();
  test_npy();
#ifdef AA_HAVE_LIBZIP
  test_npz();
#else
  printf("treaders: built without libzip: the .npz cases are not run\n");
#endif
  if (aa_test_failures == 0) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("treaders: could not remove %s\n", dir);
  }
  return aa_test_finish("treaders");
}
