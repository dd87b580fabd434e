/* attnacc: staged output files: every file of a set is written to a temporary first and renamed last, so a failure
 * leaves none of them. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/stage.h"
#include "sweep/internal.h"

void stage_init(stage_t *s) {
  memset(s, 0, sizeof *s);
}

char *stage_join(const char *dir, const char *file) {
  size_t len = strlen(dir) + strlen(file) + 2;
  char *p = malloc(len);
  if (p != NULL) snprintf(p, len, "%s/%s", dir, file);
  return p;
}

static int grow(char ***a, char ***b, size_t n, size_t *cap) {
  if (n < *cap) return 1;
  size_t c = *cap ? 2 * *cap : 16;
  char **na = realloc(*a, c * sizeof *na);
  if (na == NULL) return 0;
  *a = na;
  if (b != NULL) {
    char **nb = realloc(*b, c * sizeof *nb);
    if (nb == NULL) return 0;
    *b = nb;
  }
  *cap = c;
  return 1;
}

int stage_mkdir_p(stage_t *s, const char *dir, aa_error_t *err) {
  char *p = strdup(dir);
  int rc = AA_OK;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  for (char *c = p + 1;; c++) {
    if (*c != '/' && *c != '\0') continue;
    char keep = *c;
    struct stat st;
    *c = '\0';
    if (mkdir(p, 0777) == 0) {
      char *m = strdup(p);
      if (m == NULL || !grow(&s->made, NULL, s->nmade, &s->capmade)) {
        free(m);
        rc = aa_error_set(err, AA_ENOMEM, "out of memory");
        break;
      }
      s->made[s->nmade++] = m;
    } else if (errno != EEXIST) {
      rc = aa_error_set(err, AA_EIO, "%s: cannot create the folder %s: %s", dir, p, strerror(errno));
      break;
    }
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
      rc = aa_error_set(err, AA_EIO, "%s: %s is not a folder", dir, p);
      break;
    }
    *c = keep;
    if (keep == '\0') break;
  }
  free(p);
  return rc;
}

/* Record a staged file; on failure the temporary is removed. */
static int add(stage_t *s, const char *path, char *tmp, aa_error_t *err) {
  char *f = strdup(path);
  if (f == NULL || !grow(&s->tmp, &s->final, s->n, &s->cap)) {
    free(f);
    unlink(tmp);
    free(tmp);
    return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  }
  s->tmp[s->n] = tmp;
  s->final[s->n++] = f;
  return AA_OK;
}

static char *tmp_name(const char *path) {
  static unsigned count = 0;
  size_t cap = strlen(path) + 48;
  char *t = malloc(cap);
  if (t != NULL) snprintf(t, cap, "%s.tmp%ld.s%u", path, (long)getpid(), count++);
  return t;
}

int stage_data(stage_t *s, const char *path, const void *data, size_t len, aa_error_t *err) {
  char buf[4096];
  int rc = aa__write_temp(buf, path, data, len, err); /* the sweep's writer: unique name, fsync, messages name path */
  if (rc != AA_OK) return rc;
  char *tmp = strdup(buf);
  if (tmp == NULL) {
    unlink(buf);
    return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  }
  return add(s, path, tmp, err);
}

int stage_npy(stage_t *s, const char *path, const aa_tensor_t *t, aa_fmt_t fmt, aa_error_t *err) {
  char *tmp = tmp_name(path);
  int rc;
  if (tmp == NULL) return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  if ((rc = aa_npy_write(tmp, t, fmt, err)) != AA_OK) {
    /* aa_npy_write names the temporary: name the file the user asked for. */
    size_t tl = strlen(tmp);
    if (err != NULL && strncmp(err->msg, tmp, tl) == 0) {
      char rest[sizeof err->msg];
      snprintf(rest, sizeof rest, "%s", err->msg + tl);
      snprintf(err->msg, sizeof err->msg, "%s%s", path, rest);
    }
    free(tmp);
    return rc;
  }
  return add(s, path, tmp, err);
}

int stage_commit(stage_t *s, aa_error_t *err) {
  for (size_t i = 0; i < s->n; i++) {
    if (rename(s->tmp[i], s->final[i]) != 0) {
      int e = errno;
      for (size_t j = i; j < s->n; j++) { /* the rest is removed; what was renamed stays */
        unlink(s->tmp[j]);
        free(s->tmp[j]);
        s->tmp[j] = NULL;
      }
      return aa_error_set(err, AA_EIO, "%s: cannot rename into place: %s", s->final[i], strerror(e));
    }
    free(s->tmp[i]);
    s->tmp[i] = NULL;
  }
  return AA_OK;
}

void stage_abort(stage_t *s) {
  for (size_t i = 0; i < s->n; i++)
    if (s->tmp[i] != NULL) {
      unlink(s->tmp[i]);
      free(s->tmp[i]);
      s->tmp[i] = NULL;
    }
  for (size_t i = s->nmade; i-- > 0;)
    rmdir(s->made[i]); /* only when empty: a folder someone else filled meanwhile stays */
}

void stage_free(stage_t *s) {
  for (size_t i = 0; i < s->n; i++) {
    free(s->tmp[i]);
    free(s->final[i]);
  }
  for (size_t i = 0; i < s->nmade; i++)
    free(s->made[i]);
  free(s->tmp);
  free(s->final);
  free(s->made);
  stage_init(s);
}
