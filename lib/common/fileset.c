/* attnacc: sets of output files renamed into place together (aa_fileset_t). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common-impl.h"

void aa_fileset_init(aa_fileset_t *s) {
  *s = (aa_fileset_t){0};
}

int aa_fileset_mkdir_p(aa_fileset_t *s, const char *dir, aa_error_t *err) {
  return aa__mkdir_p_made(dir, s, err);
}

int aa_fileset_take(aa_fileset_t *s, aa_ofile_t *o, aa_error_t *err) {
  int rc = aa_ofile_finish(o, err);
  if (rc != AA_OK) return rc; /* finish removed the temporary */
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    aa_ofile_t *f = realloc(s->files, cap * sizeof *f);
    if (f == NULL) {
      rc = aa_error_set(err, AA_ENOMEM, "%s: out of memory", o->path);
      aa_ofile_abort(o);
      return rc;
    }
    s->files = f;
    s->cap = cap;
  }
  s->files[s->n++] = *o;
  *o = (aa_ofile_t){0};
  return AA_OK;
}

int aa_fileset_add(aa_fileset_t *s, const char *path, const void *data, size_t len, aa_error_t *err) {
  aa_ofile_t o;
  int rc = aa_ofile_open(&o, path, err);
  if (rc != AA_OK) return rc;
  if (len > 0 && fwrite(data, 1, len, o.f) != len && !ferror(o.f)) errno = EIO;
  return aa_fileset_take(s, &o, err);
}

int aa_fileset_commit(aa_fileset_t *s, aa_error_t *err) {
  int rc = AA_OK;
  for (size_t i = 0; i < s->n; i++) /* after a failed rename the rest is removed; what was renamed stays */
    if (rc == AA_OK)
      rc = aa_ofile_rename(&s->files[i], err);
    else
      aa_ofile_abort(&s->files[i]);
  s->n = 0;
  return rc;
}

void aa_fileset_abort(aa_fileset_t *s) {
  for (size_t i = 0; i < s->n; i++)
    aa_ofile_abort(&s->files[i]);
  s->n = 0;
  for (size_t i = s->nmade; i-- > 0;)
    rmdir(s->made[i]); /* only when empty: a folder someone else filled meanwhile stays */
}

void aa_fileset_free(aa_fileset_t *s) {
  for (size_t i = 0; i < s->n; i++)
    aa_ofile_abort(&s->files[i]);
  for (size_t i = 0; i < s->nmade; i++)
    free(s->made[i]);
  free(s->files);
  free(s->made);
  aa_fileset_init(s);
}
