/* attnacc: mkdir -p, whole-file reads and the atomic output file (temporary, fsync, rename). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common-impl.h"

static int remember(aa_fileset_t *s, const char *folder) {
  if (s->nmade == s->capmade) {
    size_t cap = s->capmade ? 2 * s->capmade : 8;
    char **m = realloc(s->made, cap * sizeof *m);
    if (m == NULL) return 0;
    s->made = m;
    s->capmade = cap;
  }
  return (s->made[s->nmade] = strdup(folder)) != NULL ? (s->nmade++, 1) : 0;
}

int aa__mkdir_p_made(const char *dir, aa_fileset_t *made, aa_error_t *err) {
  if (dir == NULL || dir[0] == '\0') return aa_error_set(err, AA_EINVAL, "empty folder name");
  char *p = strdup(dir);
  int rc = AA_OK;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "%s: out of memory", dir);
  /* One level at a time from the top: each prefix ending before a '/' (and
     the whole path) must end up a folder. */
  for (char *c = p + 1;; c++) {
    if (*c != '/' && *c != '\0') continue;
    char keep = *c;
    struct stat st;
    *c = '\0';
    if (mkdir(p, 0777) == 0) {
      if (made != NULL && !remember(made, p)) {
        rc = aa_error_set(err, AA_ENOMEM, "%s: out of memory", dir);
        break;
      }
    } else if (errno != EEXIST) {
      rc = aa_error_set(err, AA_EIO, "%s: cannot create the folder %s: %s", dir, p, strerror(errno));
      break;
    }
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
      rc = aa_error_set(err, AA_EIO, "%s: %s exists and is not a folder", dir, p);
      break;
    }
    *c = keep;
    while (keep == '/' && c[1] == '/') /* "a//b": one level */
      c++;
    if (keep == '\0' || c[1] == '\0') break;
  }
  free(p);
  return rc;
}

int aa_mkdir_p(const char *dir, aa_error_t *err) {
  return aa__mkdir_p_made(dir, NULL, err);
}

int aa_file_read(char **data, size_t *len, const char *path, aa_error_t *err) {
  *data = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (f == NULL) return aa_error_set(err, errno == ENOENT ? AA_ENOTFOUND : AA_EIO, "%s: %s", path, strerror(errno));
  aa_buf_t b = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    aa_buf_put(&b, chunk, n);
  int bad = ferror(f), e = errno;
  fclose(f);
  if (!bad) aa_buf_put(&b, "", 0); /* an empty file is "" too */
  if (bad || b.oom) {
    aa_buf_free(&b);
    return bad ? aa_error_set(err, AA_EIO, "%s: cannot read: %s", path, strerror(e))
               : aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  }
  *data = b.buf;
  *len = b.len;
  return AA_OK;
}

static int in_place(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
}

int aa_ofile_open(aa_ofile_t *o, const char *path, aa_error_t *err) {
  static atomic_uint count = 0; /* with the pid: unique among the threads and processes */
  *o = (aa_ofile_t){0};
  if (path == NULL || path[0] == '\0') return aa_error_set(err, AA_EINVAL, "empty output file name");
  if ((o->path = strdup(path)) == NULL) return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  if (in_place(path)) {
    if ((o->f = fopen(path, "wb")) != NULL) return AA_OK;
    int e = errno;
    aa_ofile_abort(o);
    return aa_error_set(err, AA_EIO, "%s: cannot open: %s", path, strerror(e));
  }
  size_t cap = strlen(path) + 48;
  int fd = -1;
  if ((o->tmp = malloc(cap)) == NULL) {
    aa_ofile_abort(o);
    return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  }
  /* O_EXCL: a stale temporary of an earlier process with the same pid is
     never reused or clobbered; the next number is tried instead. */
  for (int tries = 0; fd < 0 && tries < 100; tries++) {
    snprintf(o->tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&count, 1u));
    fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd >= 0 && (o->f = fdopen(fd, "wb")) == NULL) {
    int e = errno;
    close(fd);
    unlink(o->tmp);
    errno = e;
  }
  if (o->f == NULL) {
    int e = errno;
    free(o->tmp);
    o->tmp = NULL; /* nothing to remove: not created, or removed above */
    aa_ofile_abort(o);
    return aa_error_set(err, AA_EIO, "%s: cannot create: %s", path, strerror(e));
  }
  return AA_OK;
}

int aa_ofile_finish(aa_ofile_t *o, aa_error_t *err) {
  if (o->f == NULL) return AA_OK; /* finished before */
  int e = 0;
  if (ferror(o->f)) e = errno != 0 ? errno : EIO;
  if (e == 0 && fflush(o->f) != 0) e = errno;
  /* fsync: the data on disk before the rename makes them visible (a crash
     must not leave a renamed but empty file). A device or pipe has nothing to sync. */
  if (e == 0 && o->tmp != NULL && fsync(fileno(o->f)) != 0) e = errno;
  if (fclose(o->f) != 0 && e == 0) e = errno;
  o->f = NULL;
  if (e == 0) return AA_OK;
  char path[4096];
  snprintf(path, sizeof path, "%s", o->path);
  aa_ofile_abort(o);
  return aa_error_set(err, AA_EIO, "%s: cannot write: %s", path, strerror(e));
}

int aa_ofile_rename(aa_ofile_t *o, aa_error_t *err) {
  int rc = AA_OK;
  if (o->tmp != NULL && rename(o->tmp, o->path) != 0)
    rc = aa_error_set(err, AA_EIO, "%s: cannot rename into place: %s", o->path, strerror(errno));
  if (rc == AA_OK) {
    free(o->tmp);
    o->tmp = NULL; /* renamed: nothing left to remove */
  }
  aa_ofile_abort(o);
  return rc;
}

int aa_ofile_commit(aa_ofile_t *o, aa_error_t *err) {
  int rc = aa_ofile_finish(o, err);
  return rc != AA_OK ? rc : aa_ofile_rename(o, err);
}

void aa_ofile_abort(aa_ofile_t *o) {
  if (o->f != NULL) fclose(o->f);
  if (o->tmp != NULL) unlink(o->tmp);
  free(o->tmp);
  free(o->path);
  *o = (aa_ofile_t){0};
}

int aa_file_write(const char *path, const void *data, size_t len, aa_error_t *err) {
  aa_ofile_t o;
  int rc = aa_ofile_open(&o, path, err);
  if (rc != AA_OK) return rc;
  if (len > 0 && fwrite(data, 1, len, o.f) != len && !ferror(o.f)) errno = EIO;
  return aa_ofile_commit(&o, err);
}
