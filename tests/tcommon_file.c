/* attnacc: tests of the common module's files: atomic writer, file sets, mkdir -p, failures and concurrent writers.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "tests.h"

static char top[64];

/* Names in dir, sorted and joined by spaces ("" when empty, "?" when unreadable). */
static void listing(char *out, size_t cap, const char *dir) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  size_t len = 0;
  out[0] = '\0';
  if (n < 0) {
    snprintf(out, cap, "?");
    return;
  }
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i]->d_name, ".") != 0 && strcmp(names[i]->d_name, "..") != 0 && len < cap)
      len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", names[i]->d_name);
    free(names[i]);
  }
  free(names);
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int has_text(const char *path, const char *want) {
  char *got = aa_test_slurp(path);
  int same = got != NULL && strcmp(got, want) == 0;
  free(got);
  return same;
}

static void test_write_and_read(void) {
  char p[128], l[512];
  aa_error_t err = {{0}};
  snprintf(p, sizeof p, "%s/a.txt", top);
  AA_CHECK(aa_file_write(p, "first\n", 6, &err) == AA_OK && has_text(p, "first\n"), "write: new file: %s", err.msg);
  AA_CHECK(aa_file_write(p, "second", 6, &err) == AA_OK && has_text(p, "second"), "write: overwrite: %s", err.msg);
  AA_CHECK(aa_file_write(p, "", 0, &err) == AA_OK && has_text(p, ""), "write: empty: %s", err.msg);
  char *data = NULL;
  size_t len = 9;
  AA_CHECK(aa_file_read(&data, &len, p, &err) == AA_OK && data != NULL && len == 0 && data[0] == '\0',
           "read: an empty file is \"\"");
  free(data);
  snprintf(l, sizeof l, "%s/nothing", top);
  AA_CHECK(aa_file_read(&data, &len, l, &err) == AA_ENOTFOUND && strstr(err.msg, "nothing") != NULL,
           "read: a missing file is AA_ENOTFOUND naming it: %s", err.msg);
  listing(l, sizeof l, top);
  AA_CHECK(strcmp(l, "a.txt") == 0, "write: no temporary left beside a.txt: [%s]", l);
  unlink(p);
  /* devices are written in place, never replaced */
  AA_CHECK(aa_file_write("/dev/null", "x", 1, &err) == AA_OK, "write: /dev/null: %s", err.msg);
  struct stat st;
  AA_CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "write: /dev/null is still a device");
  if (access("/dev/full", W_OK) == 0) {
    int rc = aa_file_write("/dev/full", "x", 1, &err);
    AA_CHECK(rc == AA_EIO && strstr(err.msg, "/dev/full: cannot write") != NULL, "write: /dev/full: %d %s", rc,
             err.msg);
    AA_CHECK(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode), "write: /dev/full is still a device");
  }
}

/* A folder where nothing can be created: missing, or (when not root, whom
   permissions do not stop) read-only. */
static void test_unwritable(void) {
  char p[160], d[128], l[512];
  aa_error_t err = {{0}};
  snprintf(p, sizeof p, "%s/missing/x.txt", top);
  int rc = aa_file_write(p, "x", 1, &err);
  AA_CHECK(rc == AA_EIO && strncmp(err.msg, p, strlen(p)) == 0 && strstr(err.msg, "cannot create") != NULL,
           "unwritable: missing folder: status %d, message [%s] names the file", rc, err.msg);
  snprintf(d, sizeof d, "%s/ro", top);
  mkdir(d, 0777);
  snprintf(p, sizeof p, "%s/ro/x.txt", top);
  if (geteuid() != 0 && chmod(d, 0555) == 0) {
    rc = aa_file_write(p, "x", 1, &err);
    AA_CHECK(rc == AA_EIO && strncmp(err.msg, p, strlen(p)) == 0, "unwritable: read-only folder: %d [%s]", rc,
             err.msg);
    listing(l, sizeof l, d);
    AA_CHECK(l[0] == '\0', "unwritable: read-only folder holds [%s]", l);
    chmod(d, 0777);
  }
  if (is_dir("/proc/self")) { /* nobody, root included, creates files there */
    rc = aa_file_write("/proc/self/attnacc-x", "x", 1, &err);
    AA_CHECK(rc == AA_EIO && strstr(err.msg, "/proc/self/attnacc-x: cannot create") != NULL,
             "unwritable: /proc: [%s]", err.msg);
  }
  rmdir(d);
}

/* Writes failing after the temporary exists: a file size limit (RLIMIT_FSIZE
   makes write fail with EFBIG once the file would pass it, as a full disk
   makes it fail with ENOSPC; tnospace.sh tests the real full disk). */
static void test_failed_writes(void) {
  enum { BIG = 1 << 20 };
  char p[128], q[128], dir[128], l[512];
  aa_error_t err = {{0}};
  char *big = calloc(BIG, 1);
  struct rlimit old, lim;
  if (big == NULL || getrlimit(RLIMIT_FSIZE, &old) != 0) {
    free(big);
    return;
  }
  snprintf(dir, sizeof dir, "%s/fsize", top);
  mkdir(dir, 0777);
  snprintf(p, sizeof p, "%s/fsize/keep.txt", top);
  snprintf(q, sizeof q, "%s/fsize/new.bin", top);
  AA_CHECK(aa_file_write(p, "old", 3, &err) == AA_OK, "failed writes: setup: %s", err.msg);
  signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 65536;
  if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
    printf("tcommon_file: cannot lower RLIMIT_FSIZE: the failed-write part is skipped\n");
    free(big);
    return;
  }
  int rc1 = aa_file_write(p, big, BIG, &err);
  int named = strncmp(err.msg, p, strlen(p)) == 0 && strstr(err.msg, "cannot write") != NULL;
  aa_ofile_t o;
  int rc2 = aa_ofile_open(&o, q, NULL);
  if (rc2 == AA_OK) {
    fwrite(big, 1, BIG, o.f); /* fails part way; commit sees it */
    rc2 = aa_ofile_commit(&o, NULL);
  }
  aa_fileset_t s;
  aa_fileset_init(&s);
  char a[160], b[160], sub[160];
  snprintf(sub, sizeof sub, "%s/fsize/set/deep", top);
  snprintf(a, sizeof a, "%s/fsize/set/deep/one.txt", top);
  snprintf(b, sizeof b, "%s/fsize/set/deep/two.bin", top);
  int rc3 = aa_fileset_mkdir_p(&s, sub, &err);
  if (rc3 == AA_OK) rc3 = aa_fileset_add(&s, a, "small", 5, &err);
  int rc4 = rc3 == AA_OK ? aa_fileset_add(&s, b, big, BIG, &err) : AA_OK;
  aa_fileset_abort(&s);
  aa_fileset_free(&s);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, SIG_DFL);
  AA_CHECK(rc1 == AA_EIO && named, "failed writes: status %d, message [%s] names %s", rc1, err.msg, p);
  AA_CHECK(has_text(p, "old"), "failed writes: the old file is untouched");
  AA_CHECK(rc2 == AA_EIO, "failed writes: a stream write error fails commit (status %d)", rc2);
  AA_CHECK(rc3 == AA_OK && rc4 == AA_EIO, "failed writes: set: first file %d, second %d", rc3, rc4);
  listing(l, sizeof l, dir);
  AA_CHECK(strcmp(l, "keep.txt") == 0,
           "failed writes: the folder holds only keep.txt (no temporary, no set "
           "folder): [%s]",
           l);
  unlink(p);
  rmdir(dir);
  free(big);
}

static void test_fileset(void) {
  char a[160], b[160], c[160], sub[160], l[512];
  aa_error_t err = {{0}};
  aa_fileset_t s;
  snprintf(sub, sizeof sub, "%s/fs/x", top);
  snprintf(a, sizeof a, "%s/fs/x/a.txt", top);
  snprintf(b, sizeof b, "%s/fs/x/b.txt", top);
  snprintf(c, sizeof c, "%s/fs/c.txt", top);
  aa_fileset_init(&s);
  int rc = aa_fileset_mkdir_p(&s, sub, &err);
  if (rc == AA_OK) rc = aa_fileset_add(&s, a, "A", 1, &err);
  if (rc == AA_OK) rc = aa_fileset_add(&s, b, "B", 1, &err);
  AA_CHECK(rc == AA_OK && access(a, F_OK) != 0 && access(b, F_OK) != 0, "fileset: nothing visible before commit");
  if (rc == AA_OK) rc = aa_fileset_commit(&s, &err);
  AA_CHECK(rc == AA_OK && has_text(a, "A") && has_text(b, "B"), "fileset: commit renames all: %s", err.msg);
  listing(l, sizeof l, sub);
  AA_CHECK(strcmp(l, "a.txt b.txt") == 0, "fileset: no temporaries after commit: [%s]", l);
  aa_fileset_free(&s);
  /* abort: the temporaries go, and only the folders the set created */
  aa_fileset_init(&s);
  snprintf(sub, sizeof sub, "%s/fs/new/deeper", top);
  rc = aa_fileset_mkdir_p(&s, sub, &err);
  if (rc == AA_OK) rc = aa_fileset_add(&s, c, "C", 1, &err);
  aa_fileset_abort(&s);
  aa_fileset_free(&s);
  snprintf(sub, sizeof sub, "%s/fs", top);
  listing(l, sizeof l, sub);
  AA_CHECK(rc == AA_OK && strcmp(l, "x") == 0, "fileset: abort leaves the folder as it was: [%s]", l);
  unlink(a);
  unlink(b);
  snprintf(sub, sizeof sub, "%s/fs/x", top);
  rmdir(sub);
  snprintf(sub, sizeof sub, "%s/fs", top);
  rmdir(sub);
}

static void test_mkdir(void) {
  char p[160], f[160];
  aa_error_t err = {{0}};
  snprintf(p, sizeof p, "%s/m/n//o/", top);
  AA_CHECK(aa_mkdir_p(p, &err) == AA_OK && is_dir(p), "mkdir: nested with // and a trailing /: %s", err.msg);
  AA_CHECK(aa_mkdir_p(p, &err) == AA_OK, "mkdir: existing: %s", err.msg);
  AA_CHECK(aa_mkdir_p(top, &err) == AA_OK && aa_mkdir_p("/", &err) == AA_OK, "mkdir: existing top and /");
  snprintf(f, sizeof f, "%s/m/file", top);
  aa_file_write(f, "x", 1, NULL);
  snprintf(p, sizeof p, "%s/m/file/sub", top);
  int rc = aa_mkdir_p(p, &err);
  AA_CHECK(rc == AA_EIO && strstr(err.msg, "file exists and is not a folder") != NULL,
           "mkdir: a file in the way: %d [%s]", rc, err.msg);
  rc = aa_mkdir_p(f, &err);
  AA_CHECK(rc == AA_EIO && strstr(err.msg, "not a folder") != NULL, "mkdir: the path is a file: %d [%s]", rc,
           err.msg);
  AA_CHECK(aa_mkdir_p("", &err) == AA_EINVAL, "mkdir: \"\" refused");
  unlink(f);
  snprintf(p, sizeof p, "%s/m/n/o", top);
  rmdir(p);
  snprintf(p, sizeof p, "%s/m/n", top);
  rmdir(p);
  snprintf(p, sizeof p, "%s/m", top);
  rmdir(p);
}

/* ---- concurrent writers ---- */
enum { THREADS = 8, ROUNDS = 40 };
typedef struct {
  int id;
  int bad;
} job_t;

/* Content of write (id, round): a header "id round len\n" and len bytes
   derived from the three, so any mix of two writes is detected. */
static size_t content(char *buf, int id, int round) {
  size_t len = 1000 + (size_t)((id * 7919 + round * 104729) % 60000);
  int h = snprintf(buf, 64, "%d %d %zu\n", id, round, len);
  for (size_t i = 0; i < len; i++)
    buf[h + i] = (char)('A' + (id * 31 + round * 17 + (int)i) % 53);
  return (size_t)h + len;
}

static int whole(const char *data, size_t n) {
  int id, round;
  size_t len;
  char want[64 + 61000];
  if (sscanf(data, "%d %d %zu", &id, &round, &len) != 3 || id < 0 || id >= THREADS || round < 0 || round >= ROUNDS)
    return 0;
  size_t m = content(want, id, round);
  return m == n && memcmp(want, data, n) == 0;
}

static void *writer(void *arg) {
  job_t *j = arg;
  char *buf = malloc(64 + 61000), same[160], own[160];
  snprintf(same, sizeof same, "%s/conc/same.txt", top);
  snprintf(own, sizeof own, "%s/conc/own-%d.txt", top, j->id);
  for (int r = 0; buf != NULL && r < ROUNDS; r++) {
    size_t n = content(buf, j->id, r);
    aa_error_t err;
    if (aa_file_write(r % 2 ? same : own, buf, n, &err) != AA_OK) {
      printf("FAIL concurrent: thread %d round %d: %s\n", j->id, r, err.msg);
      j->bad++;
    }
    char *got;
    size_t gl;
    if (aa_file_read(&got, &gl, same, NULL) == AA_OK) { /* read while others rename over it */
      if (!whole(got, gl)) j->bad++;
      free(got);
    }
  }
  free(buf);
  return NULL;
}

static void test_concurrent(void) {
  char dir[128], l[1024], want[1024] = "", p[160];
  snprintf(dir, sizeof dir, "%s/conc", top);
  mkdir(dir, 0777);
  pthread_t t[THREADS];
  job_t jobs[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i] = (job_t){i, 0};
    if (pthread_create(&t[i], NULL, writer, &jobs[i]) != 0) jobs[i].id = -1;
  }
  int bad = 0;
  for (int i = 0; i < THREADS; i++)
    if (jobs[i].id >= 0) {
      pthread_join(t[i], NULL);
      bad += jobs[i].bad;
    }
  AA_CHECK(bad == 0, "concurrent: %d failed writes or torn reads", bad);
  for (int i = 0; i < THREADS; i++) {
    char *got;
    size_t gl;
    snprintf(p, sizeof p, "%s/conc/own-%d.txt", top, i);
    int ok = aa_file_read(&got, &gl, p, NULL) == AA_OK && whole(got, gl) && atoi(got) == i;
    if (ok) free(got);
    AA_CHECK(ok, "concurrent: own-%d.txt is one whole write of its thread", i);
    unlink(p);
  }
  snprintf(p, sizeof p, "%s/conc/same.txt", top);
  char *got;
  size_t gl;
  int ok = aa_file_read(&got, &gl, p, NULL) == AA_OK && whole(got, gl);
  if (ok) free(got);
  AA_CHECK(ok, "concurrent: same.txt is one whole write");
  unlink(p);
  listing(l, sizeof l, dir);
  AA_CHECK(strcmp(l, want) == 0, "concurrent: temporaries left: [%s]", l);
  rmdir(dir);
}

int main(void) {
  snprintf(top, sizeof top, "%s", "/tmp/tcommon_file.XXXXXX");
  if (mkdtemp(top) == NULL) {
    printf("FAIL tcommon_file: cannot create a temporary folder\n");
    return 1;
  }
  test_write_and_read();
  test_unwritable();
  test_failed_writes();
  test_fileset();
  test_mkdir();
  test_concurrent();
  char l[512];
  listing(l, sizeof l, top);
  AA_CHECK(l[0] == '\0', "tcommon_file: the test folder holds [%s] at the end", l);
  rmdir(top);
  return aa_test_finish("tcommon_file");
}
