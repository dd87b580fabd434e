/* attnacc: checks made before the work that output files can be written, the clock and threads of the command. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/limits.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- files ---- */

/* The folder part of path ("." when there is none), malloc'd. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  char *d;
  if (slash == NULL) return strdup(".");
  if (slash == path) return strdup("/");
  d = malloc((size_t)(slash - path) + 1);
  if (d != NULL) {
    memcpy(d, path, (size_t)(slash - path));
    d[slash - path] = '\0';
  }
  return d;
}

/* Whether a file can be created in the folder dir: access(W_OK) is not
   enough (root passes it on /proc and /sys, where creating fails), so
   create and remove a probe file. 0, or the errno of the failure. */
static int probe_create(const char *dir) {
  static unsigned count = 0;
  size_t cap = strlen(dir) + 64;
  char *p = malloc(cap);
  int fd, e = 0;
  if (p == NULL) return ENOMEM;
  for (int tries = 0;; tries++) {
    snprintf(p, cap, "%s/.attnacc-probe.%ld.%u", dir, (long)getpid(), count++);
    fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0 || errno != EEXIST || tries > 100) break;
  }
  if (fd < 0)
    e = errno;
  else {
    close(fd);
    unlink(p);
  }
  free(p);
  return e;
}

int cli_check_out_file(const char *path, aa_error_t *err) {
  struct stat st;
  char *dir;
  int rc = AA_OK, e;
  if (path[0] == '\0') return aa_error_set(err, AA_EINVAL, "empty output file name");
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return aa_error_set(err, AA_EIO, "%s: is a folder", path);
  if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) /* written in place */
    return access(path, W_OK) == 0 ? AA_OK : aa_error_set(err, AA_EIO, "%s: not writable: %s", path, strerror(errno));
  dir = dir_of(path);
  if (dir == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    rc = aa_error_set(err, AA_EIO, "%s: the folder %s does not exist", path, dir);
  else if (access(dir, W_OK) != 0)
    rc = aa_error_set(err, AA_EIO, "%s: the folder %s is not writable", path, dir);
  else if ((e = probe_create(dir)) != 0)
    rc = aa_error_set(err, AA_EIO, "%s: cannot create a file in the folder %s: %s", path, dir, strerror(e));
  free(dir);
  return rc;
}

int cli_check_out_dir(const char *dir, aa_error_t *err) {
  struct stat st;
  char *p = strdup(dir);
  int rc = AA_OK;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  if (dir[0] == '\0') rc = aa_error_set(err, AA_EINVAL, "empty folder name");
  /* Walk up to the first existing ancestor: it must be a writable folder. */
  while (rc == AA_OK) {
    if (stat(p, &st) == 0) {
      int e;
      if (!S_ISDIR(st.st_mode))
        rc = aa_error_set(err, AA_EIO, "%s: %s exists and is not a folder", dir, p);
      else if (access(p, W_OK) != 0)
        rc = aa_error_set(err, AA_EIO, "%s: the folder %s is not writable", dir, p);
      else if ((e = probe_create(p)) != 0)
        rc = aa_error_set(err, AA_EIO, "%s: cannot create anything in the folder %s: %s", dir, p, strerror(e));
      break;
    }
    {
      char *up = dir_of(p);
      if (up == NULL) {
        rc = aa_error_set(err, AA_ENOMEM, "out of memory");
        break;
      }
      free(p);
      p = up;
    }
  }
  free(p);
  return rc;
}

int cli_close_stdout(const char *cmd, int status) {
  /* ferror: an earlier fwrite may have failed with nothing left to flush,
     so fclose alone would succeed. */
  int failed_before = ferror(stdout) != 0;
  int closed = fclose(stdout) == 0, e = errno;
  /* EBADF with nothing written: stdout was closed (>&-) and not needed */
  if (!failed_before && (closed || e == EBADF)) return status;
  cli_error(cmd, "standard output: %s", closed ? "a write failed" : strerror(e));
  return status != 0 ? status : 1;
}

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_set_threads(size_t threads) {
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads((int)threads);
#else
  (void)threads;
#endif
}
