/* attnacc: tests of the sweep engine: FNV-1a 128 against GMP, grid enumeration and seeds, results files, threads,
 * shards, resume, torn journals. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <gmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "sweep.h"
#include "tests.h"
#include "tsweep_synth.h"

#define DIR "tsweep.dir"

static int same_file(const char *a, const char *b) {
  char *x = aa_test_slurp(a), *y = aa_test_slurp(b);
  int same = x != NULL && y != NULL && strcmp(x, y) == 0;
  free(x);
  free(y);
  return same;
}

static size_t count_lines(const char *s) {
  size_t n = 0;
  for (; s && *s; s++)
    n += *s == '\n';
  return n;
}

/* ---- FNV-1a 128: a second implementation in GMP integers ---- */
static void gmp_fnv(char out[33], const unsigned char *p, size_t n) {
  mpz_t h, prime, b;
  mpz_init_set_str(h, "144066263297769815596495629667062367629", 10);
  mpz_init(prime);
  mpz_ui_pow_ui(prime, 2, 88);
  mpz_add_ui(prime, prime, 0x13b);
  mpz_init(b);
  for (size_t i = 0; i < n; i++) {
    mpz_set_ui(b, p[i]);
    mpz_xor(h, h, b);
    mpz_mul(h, h, prime);
    mpz_tdiv_r_2exp(h, h, 128);
  }
  char tmp[64];
  mpz_get_str(tmp, 16, h);
  size_t l = strlen(tmp);
  memset(out, '0', 32);
  memcpy(out + 32 - l, tmp, l);
  out[32] = '\0';
  mpz_clears(h, prime, b, NULL);
}

static void test_hash(uint64_t seed) {
  unsigned char buf[1000];
  aa_pcg64_t rng;
  aa_rng_derive(&rng, seed, NULL, 0);
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (unsigned char)aa_pcg64_next(&rng);
  size_t lens[5] = {0, 1, 3, 17, 1000};
  for (int i = 0; i < 5; i++) {
    aa_hash128_t h;
    char got[33], want[33];
    aa_hash128_init(&h);
    /* Feed in two pieces: the incremental form must equal the one-shot hash. */
    aa_hash128_update(&h, buf, lens[i] / 2);
    aa_hash128_update(&h, buf + lens[i] / 2, lens[i] - lens[i] / 2);
    aa_hash128_hex(got, &h);
    gmp_fnv(want, buf, lens[i]);
    AA_CHECK(strcmp(got, want) == 0, "aa_hash128: FNV-1a 128 of %zu random bytes (seed %llu) is %s, GMP gives %s",
             lens[i], (unsigned long long)seed, got, want);
  }
  /* Published FNV-1a 128 offset basis = hash of the empty string. */
  aa_hash128_t h;
  char got[33];
  aa_hash128_init(&h);
  aa_hash128_hex(got, &h);
  AA_CHECK(strcmp(got, "6c62272e07bb014262b821756295c58d") == 0, "aa_hash128: empty hash %s", got);
}

/* ---- grid ---- */
static size_t put_coord(unsigned char *b, const char *name, char kind, const void *v) {
  size_t k = strlen(name) + 1;
  memcpy(b, name, k);
  b[k++] = (unsigned char)kind;
  if (kind == 's') {
    size_t l = strlen(v) + 1;
    memcpy(b + k, v, l);
    return k + l;
  }
  uint64_t u;
  memcpy(&u, v, 8);
  for (int i = 0; i < 8; i++)
    b[k++] = (unsigned char)(u >> (8 * i));
  return k;
}

static void test_grid(void) {
  aa_sweep_t *sw;
  aa_error_t err = {{0}};
  if (tsw_grid(&sw, &err)) {
    AA_FAIL("tsw_grid: %s", err.msg);
    return;
  }
  AA_CHECK(aa_sweep_ncells(sw) == TSW_NCELLS, "grid: %zu cells, expected %d", aa_sweep_ncells(sw), TSW_NCELLS);
  /* Nested loops in declaration order: the first axis varies slowest. */
  size_t idx = 0, g = 0;
  for (int r = 0; r < 3; r++)
    for (int n = 0; n < 4; n++)
      for (int d = 0; d < 2; d++)
        for (int s = 0; s < 3; s++, g++) {
          if (!tsw_keep(tsw_ns[n], tsw_sigmas[s])) continue;
          const aa_cell_t *c = aa_sweep_cell(sw, idx);
          if (c == NULL) {
            AA_FAIL("grid: cell %zu missing", idx);
            return;
          }
          AA_CHECK(c->index == idx && c->grid_index == g, "grid: cell %zu has index %zu grid_index %zu, want %zu",
                   idx, c->index, c->grid_index, g);
          AA_CHECK(strcmp(aa_cell_str(c, "recipe", ""), tsw_recipes[r]) == 0 &&
                       aa_cell_int(c, "n", -1) == tsw_ns[n] &&
                       strcmp(aa_cell_str(c, "dist", ""), tsw_dists[d]) == 0 &&
                       aa_cell_double(c, "sigma", NAN) == tsw_sigmas[s],
                   "grid: cell %zu coordinates differ from (r%d n%d d%d s%d)", idx, r, n, d, s);
          /* id and seed from an independent serialisation (names sorted:
             dist, n, recipe, sigma; the recipe is NOSEED) hashed with GMP. */
          unsigned char b[256];
          size_t k = 0, ks;
          k += put_coord(b + k, "dist", 's', tsw_dists[d]);
          k += put_coord(b + k, "n", 'i', &tsw_ns[n]);
          ks = k;
          unsigned char bs[256];
          memcpy(bs, b, ks);
          k += put_coord(b + k, "recipe", 's', tsw_recipes[r]);
          k += put_coord(b + k, "sigma", 'd', &tsw_sigmas[s]);
          ks += put_coord(bs + ks, "sigma", 'd', &tsw_sigmas[s]);
          char want[33], got[33], wseed[33];
          gmp_fnv(want, b, k);
          aa_hash128_hex(got, &c->id);
          AA_CHECK(strcmp(want, got) == 0, "grid: cell %zu id %s, expected %s", idx, got, want);
          gmp_fnv(wseed, bs, ks);
          uint64_t hi = strtoull((char[17]){wseed[0], wseed[1], wseed[2], wseed[3], wseed[4], wseed[5], wseed[6],
                                            wseed[7], wseed[8], wseed[9], wseed[10], wseed[11], wseed[12], wseed[13],
                                            wseed[14], wseed[15], 0},
                                 NULL, 16);
          uint64_t lo = strtoull(wseed + 16, NULL, 16);
          AA_CHECK(aa_cell_seed(c) == (hi ^ lo), "grid: cell %zu seed %016llx, expected %016llx", idx,
                   (unsigned long long)aa_cell_seed(c), (unsigned long long)(hi ^ lo));
          idx++;
        }
  AA_CHECK(idx == aa_sweep_ncells(sw), "grid: enumerated %zu", idx);
  AA_CHECK(aa_sweep_cell(sw, idx) == NULL, "grid: cell past the end is not NULL");
  const aa_cell_t *c0 = aa_sweep_cell(sw, 0);
  AA_CHECK(aa_cell_find(c0, "nope") == -1 && aa_cell_int(c0, "nope", 7) == 7 && aa_cell_int(c0, "dist", 8) == 8 &&
               aa_cell_double(c0, "n", 0) == 16.0 && strcmp(aa_cell_str(c0, "n", "x"), "x") == 0,
           "grid: getter defaults and conversions");
  /* Declaration errors. */
  aa_sweep_t *s2;
  int64_t one = 1;
  aa_sweep_new(&s2, NULL);
  AA_CHECK(aa_sweep_axis_int(s2, "a b", &one, 1, 0, &err) == AA_EINVAL, "grid: name with a space accepted");
  AA_CHECK(aa_sweep_axis_int(s2, "a", &one, 0, 0, &err) == AA_EINVAL, "grid: empty axis accepted");
  const char *twice[2] = {"x", "x"};
  AA_CHECK(aa_sweep_axis_str(s2, "s", twice, 2, 0, &err) == AA_EINVAL, "grid: repeated axis value accepted");
  AA_CHECK(aa_sweep_axis_int(s2, "a", &one, 1, 0, &err) == AA_OK, "grid: axis a: %s", err.msg);
  AA_CHECK(aa_sweep_column(s2, "a", 0, &err) == AA_EINVAL, "grid: duplicate name accepted");
  AA_CHECK(aa_sweep_build(s2, NULL, NULL, &err) == AA_OK && aa_sweep_ncells(s2) == 1, "grid: one-cell build");
  AA_CHECK(aa_sweep_axis_int(s2, "b", &one, 1, 0, &err) == AA_EINVAL, "grid: axis after build accepted");
  aa_sweep_free(s2);
  aa_sweep_free(sw);
}

/* ---- results files ---- */

/* Split one CSV record (RFC 4180 quoting, no embedded newlines). */
static int csv_split(char *line, char **f, int maxf) {
  int n = 0;
  char *p = line, *w;
  for (;;) {
    if (n == maxf) return -1;
    f[n++] = w = p;
    if (*p == '"') {
      p++;
      for (;;) {
        if (*p == '"' && p[1] == '"') {
          *w++ = '"';
          p += 2;
        } else if (*p == '"') {
          p++;
          break;
        } else if (*p == '\0') {
          return -1;
        } else {
          *w++ = *p++;
        }
      }
    } else {
      while (*p && *p != ',')
        *w++ = *p++;
    }
    if (*p == ',') {
      *w = '\0';
      p++;
      continue;
    }
    *w = '\0';
    return *p == '\0' ? n : -1;
  }
}

/* Check every value of results.canon.csv against the synthetic eval. */
static void check_canon(const char *dir, const aa_sweep_t *sw) {
  char path[256];
  snprintf(path, sizeof path, "%s/results.canon.csv", dir);
  char *s = aa_test_slurp(path);
  if (s == NULL) {
    AA_FAIL("%s: missing", path);
    return;
  }
  char *save, *line = strtok_r(s, "\n", &save);
  AA_CHECK(line && strcmp(line, "recipe,n,dist,sigma,tensor,metric,count,note") == 0, "%s: header '%s'", path,
           line ? line : "");
  size_t rows = 0;
  for (size_t i = 0; i < aa_sweep_ncells(sw); i++) {
    const aa_cell_t *c = aa_sweep_cell(sw, i);
    for (int t = 0; t < 4; t++, rows++) {
      line = strtok_r(NULL, "\n", &save);
      char *f[16];
      if (line == NULL || csv_split(line, f, 16) != 8) {
        AA_FAIL("%s: row %zu is missing or has the wrong field count", path, rows);
        free(s);
        return;
      }
      double metric;
      int64_t count;
      const char *note;
      tsw_expect(&metric, &count, &note, aa_cell_seed(c), aa_cell_int(c, "n", 0), aa_cell_str(c, "recipe", ""),
                 aa_cell_double(c, "sigma", 0), t);
      double got = strtod(f[5], NULL), sig = strtod(f[3], NULL);
      int ok = strcmp(f[0], aa_cell_str(c, "recipe", "")) == 0 && strtoll(f[1], NULL, 10) == aa_cell_int(c, "n", 0) &&
               strcmp(f[2], aa_cell_str(c, "dist", "")) == 0 && sig == aa_cell_double(c, "sigma", 0) &&
               strcmp(f[4], tsw_tensors[t]) == 0 && strtoll(f[6], NULL, 10) == count &&
               strcmp(f[7], note ? note : "") == 0 &&
               (isnan(metric) ? isnan(got) && strcmp(f[5], "nan") == 0 : got == metric);
      AA_CHECK(ok, "%s: row %zu (cell %zu, tensor %s) reads '%s'; expected metric %a count %lld", path, rows, i,
               tsw_tensors[t], line, metric, (long long)count);
    }
  }
  AA_CHECK(strtok_r(NULL, "\n", &save) == NULL, "%s: extra rows after %zu", path, rows);
  free(s);
}

static void check_jsonl(const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  char *s = aa_test_slurp(path);
  AA_CHECK(s != NULL && count_lines(s) == 4 * TSW_NCELLS, "%s: %zu lines", path, count_lines(s));
  if (s == NULL) return;
  static const char first[] =
      "{\"recipe\":\"ref\",\"n\":16,\"dist\":\"normal\",\"sigma\":0.5,\"tensor\":\"o\",\"metric\":";
  AA_CHECK(strncmp(s, first, sizeof first - 1) == 0, "%s: first line %.100s", path, s);
  AA_CHECK(strstr(s, "\"note\":\"tab\\there, \\\"quoted\\\"\"") != NULL, "%s: escaped note not found", path);
  AA_CHECK(strstr(s, "\"tensor\":\"dk\",\"metric\":\"nan\"") != NULL && strstr(s, "\"metric\":\"-inf\"") != NULL,
           "%s: non-finite metrics not written as strings", path);
  AA_CHECK(strstr(s, "\"recipe\":\"q\\\"uote back\\\\slash\"") != NULL, "%s: escaped recipe not found", path);
  AA_CHECK(strstr(s, "\"note\":null,\"seconds\":") != NULL, "%s: missing value is not null", path);
  free(s);
}

static int run(aa_sweep_progress_t *pr, const aa_sweep_t *sw, const char *dir, int threads, size_t shard,
               size_t nshard, int resume, size_t max_cells, tsw_ctx_t *ctx, aa_error_t *err) {
  aa_sweep_opts_t o;
  aa_sweep_opts_init(&o);
  o.out_dir = dir;
  o.threads = threads;
  o.shard_index = shard;
  o.shard_count = nshard;
  o.resume = resume;
  o.max_cells = max_cells;
  o.sync = 0; /* the tests do not exercise power loss; keep them light on the shared disk */
  return aa_sweep_run(pr, sw, tsw_eval, ctx, &o, err);
}

typedef struct {
  int inside, overlap;
  size_t calls, last_done;
  int monotone;
} prog_t;

static void on_progress(const aa_sweep_progress_t *p, void *ctx) {
  prog_t *pg = ctx;
  if (__atomic_fetch_add(&pg->inside, 1, __ATOMIC_SEQ_CST) != 0) pg->overlap = 1;
  if (pg->calls > 0 && p->done != pg->last_done + 1) pg->monotone = 0;
  pg->last_done = p->done;
  pg->calls++;
  __atomic_fetch_sub(&pg->inside, 1, __ATOMIC_SEQ_CST);
}

static void test_runs(void) {
  aa_sweep_t *sw;
  aa_error_t err = {{0}};
  aa_sweep_progress_t pr;
  if (tsw_grid(&sw, &err)) return;
  const char *ref = DIR "/ref";
  int st = run(&pr, sw, ref, 1, 0, 1, 0, 0, NULL, &err);
  AA_CHECK(st == AA_OK && pr.total == TSW_NCELLS && pr.done == TSW_NCELLS && pr.skipped == 0 && pr.complete,
           "run J=1: status %d (%s) total %zu done %zu complete %d", st, err.msg, pr.total, pr.done, pr.complete);
  check_canon(ref, sw);
  check_jsonl(ref);
  char *csv = aa_test_slurp(DIR "/ref/results.csv");
  AA_CHECK(csv && strncmp(csv, "recipe,n,dist,sigma,tensor,metric,count,note,seconds\n", 53) == 0 &&
               count_lines(csv) == 1 + 4 * TSW_NCELLS,
           "results.csv: header or length wrong");
  free(csv);

  /* Refuse to run into a folder with results unless resuming; a resume has nothing to do. */
  st = run(&pr, sw, ref, 1, 0, 1, 0, 0, NULL, &err);
  AA_CHECK(st == AA_EINVAL, "rerun without resume: status %d", st);
  st = run(&pr, sw, ref, 2, 0, 1, 1, 0, NULL, &err);
  AA_CHECK(st == AA_OK && pr.skipped == TSW_NCELLS && pr.done == 0 && pr.complete, "resume of a complete run: %d %s",
           st, err.msg);

  /* J = 3, with the progress callback. */
  prog_t pg = {0, 0, 0, 0, 1};
  aa_sweep_opts_t o;
  aa_sweep_opts_init(&o);
  o.out_dir = DIR "/j3";
  o.threads = 3;
  o.sync = 0;
  o.progress = on_progress;
  o.progress_ctx = &pg;
  tsw_ctx_t slow = {200, -1};
  st = aa_sweep_run(&pr, sw, tsw_eval, &slow, &o, &err);
  AA_CHECK(st == AA_OK && pr.complete, "run J=3: %d %s", st, err.msg);
  AA_CHECK(same_file(DIR "/ref/results.canon.csv", DIR "/j3/results.canon.csv"),
           "J=3: results.canon.csv differs from J=1");
  AA_CHECK(!same_file(DIR "/ref/results.csv", DIR "/j3/results.csv"),
           "J=3: results.csv equals J=1 although the timing column differs (the test's premise is broken)");
  AA_CHECK(pg.calls == TSW_NCELLS + 1 && !pg.overlap && pg.monotone,
           "progress: %zu calls (want %d), overlap %d, monotone %d", pg.calls, TSW_NCELLS + 1, pg.overlap,
           pg.monotone);

  /* Shards into separate folders, then merge. */
  const char *sh[3] = {DIR "/s0", DIR "/s1", DIR "/s2"};
  size_t sum = 0;
  for (int i = 0; i < 3; i++) {
    st = run(&pr, sw, sh[i], 2, (size_t)i, 3, 0, 0, NULL, &err);
    AA_CHECK(st == AA_OK && !pr.complete && pr.total == (TSW_NCELLS - (size_t)i + 2) / 3,
             "shard %d/3: status %d (%s) total %zu complete %d", i, st, err.msg, pr.total, pr.complete);
    sum += pr.done;
  }
  AA_CHECK(sum == TSW_NCELLS, "shards ran %zu cells", sum);
  size_t nc = 0;
  st = aa_sweep_merge(&nc, DIR "/merged", sh, 2, &err);
  AA_CHECK(st == AA_ENOTFOUND, "merge of 2 of 3 shards: status %d", st);
  st = aa_sweep_merge(&nc, DIR "/merged", sh, 3, &err);
  AA_CHECK(st == AA_OK && nc == TSW_NCELLS, "merge: %d %s", st, err.msg);
  AA_CHECK(same_file(DIR "/ref/results.canon.csv", DIR "/merged/results.canon.csv"),
           "merged shards: results.canon.csv differs from the unsharded run");
  const char *refdir[1] = {ref};
  AA_CHECK(aa_sweep_merge(NULL, ref, refdir, 1, &err) == AA_OK &&
               same_file(DIR "/ref/results.canon.csv", DIR "/merged/results.canon.csv"),
           "merge of a folder into itself");

  /* Shards sharing one folder: the last to finish writes the results. */
  st = run(&pr, sw, DIR "/shared", 1, 1, 2, 0, 0, NULL, &err);
  AA_CHECK(st == AA_OK && !pr.complete, "shared folder, shard 1/2: %d %s", st, err.msg);
  st = run(&pr, sw, DIR "/shared", 2, 0, 2, 0, 0, NULL, &err);
  AA_CHECK(st == AA_OK && pr.complete, "shared folder, shard 0/2: %d %s complete %d", st, err.msg, pr.complete);
  AA_CHECK(same_file(DIR "/ref/results.canon.csv", DIR "/shared/results.canon.csv"),
           "shards in one folder: results.canon.csv differs");

  /* A failing eval stops the sweep with the cell in the message; a resume finishes it. */
  tsw_ctx_t bad = {0, 20};
  st = run(&pr, sw, DIR "/fail", 1, 0, 1, 0, 0, &bad, &err);
  AA_CHECK(st == AA_ERANGE && strstr(err.msg, "cell 20 (") && strstr(err.msg, "synthetic failure") && pr.done == 20,
           "failing eval: status %d, done %zu, message '%s'", st, pr.done, err.msg);
  st = run(&pr, sw, DIR "/fail", 3, 0, 1, 1, 0, NULL, &err);
  AA_CHECK(st == AA_OK && pr.skipped == 20 && pr.complete &&
               same_file(DIR "/ref/results.canon.csv", DIR "/fail/results.canon.csv"),
           "resume after a failing eval: %d %s", st, err.msg);

  /* Torn tail: a half line appended after 10 cells must be cut on resume. */
  st = run(&pr, sw, DIR "/torn", 1, 0, 1, 0, 10, NULL, &err);
  AA_CHECK(st == AA_OK && pr.done == 10 && !pr.complete, "max_cells 10: %d done %zu", st, pr.done);
  FILE *f = fopen(DIR "/torn/journal-0-of-1.txt", "ab");
  fputs("sref\ti16\tsnormal\td0.5\tsGARBAGE", f);
  fclose(f);
  st = run(&pr, sw, DIR "/torn", 1, 0, 1, 1, 10, NULL, &err);
  AA_CHECK(st == AA_OK && pr.skipped == 10 && pr.done == 10, "resume over a torn tail: %d %s skipped %zu", st,
           err.msg, pr.skipped);
  /* A complete but bogus record (bad checksum) and a stray comment line. */
  f = fopen(DIR "/torn/journal-0-of-1.txt", "ab");
  fputs("# a note\nsref\ti16\tsnormal\td0.5\tso\t\td1\ti2\t\n#done 3 00000000000000000000000000000000 1 "
        "0000000000000000\n",
        f);
  fclose(f);
  char *j = aa_test_slurp(DIR "/torn/journal-0-of-1.txt");
  /* Corrupt one digit inside the 5th complete record (in the middle of the file). */
  char *p = j;
  for (int k = 0; k < 5 && p; k++)
    p = strstr(p + 1, "#done ");
  char *row = p ? strstr(p, "\td") : NULL;
  if (row) row[2] = row[2] == '1' ? '2' : '1';
  f = fopen(DIR "/torn/journal-0-of-1.txt", "wb");
  fputs(j, f);
  fclose(f);
  free(j);
  st = run(&pr, sw, DIR "/torn", 2, 0, 1, 1, 0, NULL, &err);
  AA_CHECK(st == AA_OK && pr.skipped == 19 && pr.complete, "resume over corrupt records: %d %s skipped %zu", st,
           err.msg, pr.skipped);
  AA_CHECK(same_file(DIR "/ref/results.canon.csv", DIR "/torn/results.canon.csv"),
           "torn/corrupt journal: results.canon.csv differs from the clean run");
  j = aa_test_slurp(DIR "/torn/journal-0-of-1.txt");
  AA_CHECK(j && !strstr(j, "GARBAGE") && !strstr(j, "#done 3 0000"), "torn tail still in the journal");
  free(j);

  /* A journal of another grid in the folder is refused. */
  aa_sweep_t *other;
  int64_t one = 1;
  aa_sweep_new(&other, NULL);
  aa_sweep_axis_int(other, "n", &one, 1, 0, NULL);
  aa_sweep_build(other, NULL, NULL, NULL);
  st = aa_sweep_run(&pr, other, tsw_eval, NULL, &(aa_sweep_opts_t){.out_dir = ref, .threads = 1, .resume = 1}, &err);
  AA_CHECK(st == AA_EFORMAT, "journal of another sweep accepted: status %d", st);
  aa_sweep_free(other);

  /* Undeclared column: the cell fails with AA_EINVAL. */
  aa_sweep_t *s3;
  aa_sweep_new(&s3, NULL);
  aa_sweep_axis_int(s3, "n", &one, 1, 0, NULL);
  aa_sweep_column(s3, "metric", 0, NULL);
  aa_sweep_build(s3, NULL, NULL, NULL);
  st = aa_sweep_run(&pr, s3, tsw_eval, NULL, &(aa_sweep_opts_t){.out_dir = DIR "/undecl", .threads = 1}, &err);
  AA_CHECK(st == AA_EINVAL && strstr(err.msg, "not a declared result column"), "undeclared column: %d '%s'", st,
           err.msg);
  aa_sweep_free(s3);
  aa_sweep_free(sw);
}

static void test_progress_line(void) {
  char buf[128];
  aa_sweep_progress_t p = {.total = 120, .skipped = 10, .todo = 110, .done = 40};
  aa_sweep_progress_line(buf, sizeof buf, &p, 200.0);
  /* 40 cells in 200 s = 12 per minute; 70 left at 5 s each = 350 s. */
  AA_CHECK(strcmp(buf, "sweep: 50/120 cells (10 resumed), 12.0 cells/min, 5m50s left") == 0, "progress line '%s'",
           buf);
  p.done = 0;
  aa_sweep_progress_line(buf, sizeof buf, &p, 0.0);
  AA_CHECK(strcmp(buf, "sweep: 10/120 cells (10 resumed), - cells/min, - left") == 0, "progress line at start '%s'",
           buf);
}

int main(void) {
  uint64_t seed = aa_test_seed("tsweep");
  if (system("rm -rf " DIR) != 0) return 99;
  test_hash(seed);
  test_grid();
  test_progress_line();
  test_runs();
  int rc = aa_test_finish("tsweep");
  if (rc == 0 && system("rm -rf " DIR) != 0) return 99;
  return rc;
}
