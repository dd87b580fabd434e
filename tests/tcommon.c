/* attnacc: tests of the common module's name lookup, integer parsing, message escaping, growable buffer and CSV
 * writer. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <unistd.h>

#include "common.h"
#include "rng.h"
#include "sweep.h"
#include "tests.h"

static void test_names_and_numbers(void) {
  static const char *const names[3] = {"asc", "desc", "tree"};
  AA_CHECK(aa_name_index("asc", names, 3) == 0 && aa_name_index("tree", names, 3) == 2, "names found at their index");
  AA_CHECK(aa_name_index("Tree", names, 3) == -1 && aa_name_index("", names, 3) == -1, "lookup is exact");
  AA_CHECK(aa_name_index(NULL, names, 3) == -1 && aa_name_index("asc", names, 0) == -1, "NULL name, empty table");

  uint64_t u = 7;
  AA_CHECK(aa_parse_u64(&u, "18446744073709551615") && u == UINT64_MAX, "2^64 - 1 parses");
  AA_CHECK(aa_parse_u64(&u, "0x10") && u == 16 && aa_parse_u64(&u, "010") && u == 8, "hex and octal as base 0");
  u = 7;
  AA_CHECK(!aa_parse_u64(&u, "18446744073709551616") && u == 7, "2^64 refused, output untouched");
  AA_CHECK(!aa_parse_u64(&u, "-1") && !aa_parse_u64(&u, "") && !aa_parse_u64(&u, "12x") && u == 7,
           "minus, empty and trailing text refused");
  long l = 3;
  AA_CHECK(aa_parse_long(&l, "-200") && l == -200, "negative long parses");
  AA_CHECK(!aa_parse_long(&l, "9223372036854775808") && !aa_parse_long(&l, "1.5") && l == -200,
           "overflow and fractions refused");
}

/* The byte at position i of the test pattern: a function of i alone, so the
   expected text never comes from the buffer under test. */
static char pattern(size_t i) {
  return (char)('a' + (i * 7 + i / 251) % 26);
}

static void test_buffer(void) {
  aa_buf_t b = {0};
  AA_CHECK(aa_buf_str(&b)[0] == '\0' && b.len == 0, "buf: empty buffer reads as \"\"");
  aa_buf_put(&b, "", 0);
  AA_CHECK(b.buf != NULL && b.buf[0] == '\0' && b.len == 0, "buf: an empty put allocates the NUL");
  /* Pieces of every length 0..999 (crossing the first capacity and every doubling), then one 3 MiB put. */
  size_t want = 0;
  for (size_t n = 0; n < 1000; n++) {
    char piece[1000];
    for (size_t i = 0; i < n; i++)
      piece[i] = pattern(want + i);
    aa_buf_put(&b, piece, n);
    want += n;
  }
  size_t big = (size_t)3 << 20;
  char *chunk = malloc(big);
  if (chunk == NULL) {
    AA_FAIL("buf: test allocation");
    return;
  }
  for (size_t i = 0; i < big; i++)
    chunk[i] = pattern(want + i);
  aa_buf_put(&b, chunk, big);
  want += big;
  free(chunk);
  size_t bad = SIZE_MAX;
  for (size_t i = 0; i < want && !b.oom && b.len == want; i++)
    if (b.buf[i] != pattern(i)) {
      bad = i;
      break;
    }
  AA_CHECK(!b.oom && b.len == want && bad == SIZE_MAX && b.buf[want] == '\0',
           "buf: %zu bytes in pieces: len %zu, first wrong byte at %zu, oom %d", want, b.len, bad, b.oom);
  aa_buf_free(&b);
  AA_CHECK(b.buf == NULL && b.len == 0 && b.cap == 0, "buf: free zeroes");

  /* printf: short, then longer than any internal scratch (a 100000-character %s). */
  char *s = malloc(100001);
  if (s == NULL) return;
  for (size_t i = 0; i < 100000; i++)
    s[i] = pattern(i);
  s[100000] = '\0';
  aa_buf_printf(&b, "%d-%s", 42, "x");
  aa_buf_printf(&b, "[%s]", s);
  int ok = b.len == 4 + 100002 && memcmp(b.buf, "42-x[", 5) == 0 && memcmp(b.buf + 5, s, 100000) == 0 &&
           strcmp(b.buf + 100005, "]") == 0;
  AA_CHECK(ok, "buf: printf of a 100000-character field: len %zu", b.len);
  aa_buf_puts(&b, "tail");
  AA_CHECK(strcmp(aa_buf_str(&b) + b.len - 4, "tail") == 0 && strlen(b.buf) == b.len, "buf: puts appends, NUL ends");
  free(s);
  aa_buf_free(&b);
}

/* One record of fields into text. */
static void csv_record(aa_buf_t *b, const char *const *f, int n) {
  aa_csv_t c;
  aa_csv_init(&c, b);
  for (int i = 0; i < n; i++)
    aa_csv_str(&c, f[i]);
  aa_csv_end(&c);
}

/* The examples of RFC 4180 section 2, written as the RFC writes them
   (quoted where rules 5-7 require; LF ends a record here, section 2 rule 1
   says CRLF, lib/common.h says why). */
static void test_csv_rfc(void) {
  static const struct {
    const char *f[3];
    const char *text;
  } ex[] = {
      {{"aaa", "bbb", "ccc"}, "aaa,bbb,ccc\n"},                           /* rules 1, 4 */
      {{"aaa", "b\r\nbb", "ccc"}, "aaa,\"b\r\nbb\",ccc\n"},               /* rule 6: a line break */
      {{"aaa", "b\"bb", "ccc"}, "aaa,\"b\"\"bb\",ccc\n"},                 /* rule 7: a quote doubled */
      {{"a,b", "", "c"}, "\"a,b\",,c\n"},                                 /* rule 6: a comma; an empty field */
      {{" lead", "trail ", "in side"}, "\" lead\",\"trail \",in side\n"}, /* spaces kept (rule 4) */
      {{"\"", "\"\"", "x\"y"}, "\"\"\"\",\"\"\"\"\"\",\"x\"\"y\"\n"},
      {{"cr\r", "lf\n", ""}, "\"cr\r\",\"lf\n\",\n"},
  };
  for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
    aa_buf_t b = {0};
    csv_record(&b, ex[i].f, 3);
    AA_CHECK(strcmp(aa_buf_str(&b), ex[i].text) == 0, "csv: RFC 4180 example %zu: got [%s] want [%s]", i,
             aa_buf_str(&b), ex[i].text);
    aa_buf_free(&b);
  }
  aa_buf_t b = {0};
  aa_csv_t c;
  aa_csv_init(&c, &b);
  aa_csv_printf(&c, "%.17g", 0.1); /* the double nearest 0.1 is 0.1000000000000000055511151231257827 */
  aa_csv_printf(&c, "%s,%d", "k", 3);
  aa_csv_str(&c, NULL);
  aa_csv_end(&c);
  AA_CHECK(strcmp(aa_buf_str(&b), "0.10000000000000001,\"k,3\",\n") == 0,
           "csv: printf fields quoted like any other: [%s]", aa_buf_str(&b));
  aa_buf_free(&b);
}

/* Random fields over an alphabet heavy in the special characters, written
   and read back through the results reader (lib/sweep/folder.c,
   a separate implementation of RFC 4180). */
static void test_csv_roundtrip(uint64_t seed) {
  static const char alphabet[] = {'a', 'Z', '0', ',', '"', '\n', '\r', ' ', ';', '\t', '#', '\xc3', '\xa9'};
  enum { ROWS = 300, COLS = 5, MAXLEN = 12 };
  static char field[ROWS][COLS][MAXLEN + 1];
  aa_pcg64_t rng;
  aa_rng_derive(&rng, seed, NULL, 0);
  aa_buf_t b = {0};
  const char *hdr[COLS] = {"c0", "c1", "c2", "c3", "c4"};
  csv_record(&b, hdr, COLS);
  for (int r = 0; r < ROWS; r++) {
    const char *f[COLS];
    for (int c = 0; c < COLS; c++) {
      size_t len = (size_t)(aa_pcg64_next(&rng) % (MAXLEN + 1));
      for (size_t i = 0; i < len; i++)
        field[r][c][i] = alphabet[aa_pcg64_next(&rng) % sizeof alphabet];
      field[r][c][len] = '\0';
      f[c] = field[r][c];
    }
    if (field[r][0][0] == '\0') field[r][0][0] = 'a', field[r][0][1] = '\0'; /* the reader skips blank lines */
    csv_record(&b, f, COLS);
  }
  char dir[] = "/tmp/tcommon.XXXXXX", path[64];
  aa_error_t err = {{0}};
  if (mkdtemp(dir) == NULL) {
    AA_FAIL("csv round trip: cannot create a temporary folder");
    return;
  }
  snprintf(path, sizeof path, "%s/t.csv", dir);
  int st = aa_file_write(path, b.buf, b.len, &err);
  AA_CHECK(st == AA_OK, "csv round trip: write: %s", err.msg);
  aa_results_t t;
  if (st == AA_OK && aa_results_read(&t, path, NULL) == 0) {
    int bad = t.ncol != COLS || t.nrows != ROWS;
    for (size_t r = 0; !bad && r < t.nrows; r++)
      for (int c = 0; c < COLS; c++)
        if (strcmp(aa_results_cell(&t, r, c), field[r][c]) != 0) {
          AA_FAIL("csv round trip: row %zu col %d: read [%s] wrote [%s], seed %llu", r, c, aa_results_cell(&t, r, c),
                  field[r][c], (unsigned long long)seed);
          bad = 1;
          break;
        }
    AA_CHECK(!bad, "csv round trip: %zu x %zu read, %d x %d written, seed %llu", t.nrows, t.ncol, ROWS, COLS,
             (unsigned long long)seed);
    aa_results_free(&t);
  } else {
    AA_FAIL("csv round trip: the reader refused %s", path);
  }
  unlink(path);
  rmdir(dir);
  aa_buf_free(&b);
}

/* aa_escape: every byte alone (its expected form built here from the rule,
   not from the function), then random strings: idempotent, and a cut never
   splits an escape (the cut output is a prefix of the whole one, ending at
   an escape boundary). aa_error_set's message is escaped. */
static void test_escape(uint64_t seed) {
  static const char hex[] = "0123456789abcdef";
  char in[2] = {0, 0}, out[16], want[8];
  for (int c = 1; c < 256; c++) {
    in[0] = (char)c;
    if (c >= 0x20 && c <= 0x7e)
      snprintf(want, sizeof want, "%c", c);
    else if (c == '\n' || c == '\r' || c == '\t')
      snprintf(want, sizeof want, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
    else
      snprintf(want, sizeof want, "\\x%c%c", hex[c >> 4], hex[c & 15]);
    AA_CHECK(strcmp(aa_escape(out, sizeof out, in), want) == 0, "escape: byte 0x%02x gives [%s], want [%s]", c, out,
             want);
  }
  aa_pcg64_t r;
  const uint64_t id = 1; /* a stream of its own (the CSV test draws from stream NULL) */
  aa_rng_derive(&r, seed, &id, 1);
  for (int it = 0; it < 2000; it++) {
    char s[64], full[4 * sizeof s], twice[4 * sizeof s], cut[32];
    size_t n = 1 + aa_pcg64_next(&r) % (sizeof s - 1);
    for (size_t i = 0; i < n; i++)
      s[i] = (char)(1 + aa_pcg64_next(&r) % 255);
    s[n] = '\0';
    aa_escape(full, sizeof full, s);
    aa_escape(twice, sizeof twice, full);
    AA_CHECK(strcmp(full, twice) == 0, "escape: not idempotent on iteration %d: [%s] then [%s]", it, full, twice);
    for (const char *p = full; *p; p++)
      AA_CHECK(*p >= 0x20 && *p <= 0x7e, "escape: byte 0x%02x left in the output (iteration %d)", (unsigned char)*p,
               it);
    size_t cap = 1 + aa_pcg64_next(&r) % sizeof cut, k = strlen(aa_escape(cut, cap, s)), off = 0;
    int boundary = k == 0; /* k is where the escape of some byte of s ends */
    for (size_t i = 0; s[i] != '\0' && off < k; i++) {
      unsigned char c = (unsigned char)s[i];
      off += c >= 0x20 && c <= 0x7e ? 1 : c == '\n' || c == '\r' || c == '\t' ? 2 : 4;
      boundary |= off == k;
    }
    AA_CHECK(k < cap && strncmp(cut, full, k) == 0 && boundary && (k + 4 >= cap || full[k] == '\0'),
             "escape: cut to %zu bytes gives [%s] of [%s] (iteration %d)", cap, cut, full, it);
  }
  aa_error_t err;
  AA_CHECK(aa_error_set(&err, AA_EFORMAT, "key '%s'", "a\033[2J\nb") == AA_EFORMAT &&
               strcmp(err.msg, "key 'a\\x1b[2J\\nb'") == 0,
           "escape: aa_error_set gave [%s]", err.msg);
}

/* The GPU of a rank's worker: every (rank, slot) of a node on its own GPU while there are enough, counted against a
   direct enumeration (each GPU takes ceil or floor of its share), and the node rank read from the environment. */
static void test_gpu_pick(void) {
  for (int ndev = 1; ndev <= 8; ndev++)
    for (int ranks = 1; ranks <= 8; ranks++)
      for (int jobs = 1; jobs <= 4; jobs++) {
        int uses[8] = {0}, distinct = 1;
        for (int r = 0; r < ranks; r++)
          for (int w = 0; w < jobs; w++) {
            int g = aa_gpu_pick(ndev, r, ranks, w);
            if (g < 0 || g >= ndev)
              distinct = 0;
            else
              uses[g]++;
          }
        int total = ranks * jobs, lo = total / ndev, hi = lo + (total % ndev != 0);
        for (int g = 0; g < ndev; g++)
          if (uses[g] < lo || uses[g] > hi) distinct = 0;
        AA_CHECK(distinct, "gpu: %d ranks x %d workers spread evenly over %d GPUs", ranks, jobs, ndev);
      }
  AA_CHECK(aa_gpu_pick(0, 3, 4, 2) == 0 && aa_gpu_pick(4, -1, 0, -1) == 0, "gpu: no device, or no rank, is 0");
  AA_CHECK(aa_gpu_index(4) == 0, "gpu: a process outside MPI, no slot: device 0");
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  AA_CHECK(aa_gpu_index(8) == 3 && aa_gpu_index(2) == 1, "gpu: local rank 3 of 4 takes device 3 of 8, 1 of 2");
  aa_gpu_thread_slot(1);
  AA_CHECK(aa_gpu_index(8) == 7 && aa_gpu_index(16) == 7, "gpu: its worker 1 takes device 3 + 4 = 7");
  aa_gpu_thread_slot(-1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);
  AA_CHECK(aa_gpu_index(8) == 0, "gpu: a malformed rank reads as rank 0");
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

int main(void) {
  uint64_t seed = aa_test_seed("tcommon");
  test_names_and_numbers();
  test_escape(seed);
  test_buffer();
  test_csv_rfc();
  test_csv_roundtrip(seed);
  test_gpu_pick();
  return aa_test_finish("tcommon");
}
