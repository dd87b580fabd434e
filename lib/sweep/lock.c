/* attnacc: the sweep folder lock (aa_sweep_lock), which also removes the temporaries that killed runs left. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Whether name is a temporary of aa_ofile_open: "<file>.tmp.<pid>.<count>". */
static int is_temporary(const char *name) {
  const char *t = NULL;
  for (const char *p = strstr(name, ".tmp."); p != NULL; p = strstr(p + 1, ".tmp."))
    t = p;
  if (t == NULL || t == name) return 0;
  t += 5;
  size_t a = strspn(t, "0123456789");
  if (a == 0 || t[a] != '.') return 0;
  size_t b = strspn(t + a + 1, "0123456789");
  return b > 0 && t[a + 1 + b] == '\0';
}

/* Remove the regular files of the folder dfd that are temporaries (with
   cache_only, those of oracle cache entries alone), and with depth 1 those
   of oracle cache entries in its subfolders (the default cache is
   DIR/oracle-cache). Only called while the folder is locked exclusively: no
   other run is in it, so every temporary there belongs to a run that was
   killed before it could rename or remove it; a cache shared with a run
   elsewhere loses at most one entry, and the cache is best effort. Best
   effort too: a file that cannot be removed stays. */
static void remove_temporaries(int dfd, int cache_only, int depth) {
  int d2 = dup(dfd);
  DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
  struct dirent *de;
  if (d == NULL) {
    if (d2 >= 0) close(d2);
    return;
  }
  while ((de = readdir(d)) != NULL) {
    struct stat st;
    if (de->d_name[0] == '.' || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode) && is_temporary(de->d_name) && (!cache_only || strstr(de->d_name, ".aaoc.tmp.") != NULL))
      unlinkat(dfd, de->d_name, 0);
    else if (S_ISDIR(st.st_mode) && depth > 0) {
      int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        remove_temporaries(sub, 1, depth - 1);
        close(sub);
      }
    }
  }
  closedir(d);
}

int aa_sweep_lock(int *fd, const char *dir, aa_error_t *err) {
  int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  *fd = -1;
  if (d < 0) return aa_error_set(err, errno == ENOENT ? AA_ENOTFOUND : AA_EIO, "%s: %s", dir, strerror(errno));
  /* Exclusive at once, or another run is in the folder: its temporaries
     are alive, and the cleaning waits for a run that finds it free. */
  if (flock(d, LOCK_EX | LOCK_NB) == 0) remove_temporaries(d, 0, 1);
  while (flock(d, LOCK_SH) != 0) {
    if (errno == EINTR) continue;
    int e = errno;
    close(d);
    return aa_error_set(err, AA_EIO, "%s: cannot lock the folder: %s", dir, strerror(e));
  }
  *fd = d;
  return AA_OK;
}

void aa_sweep_unlock(int fd) {
  if (fd >= 0) close(fd); /* closing the last descriptor releases the flock */
}
