/* attnacc: staged output files: every file of a set is written to a temporary first and renamed last, so a failure
 * leaves none of them. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_STAGE_H
#define AA_STAGE_H

#include <stddef.h>

#include "attnacc.h"

/* A set of files to appear together: stage_* write each to a temporary
   name beside its final path (same folder, so the rename is atomic);
   stage_commit renames them all; stage_abort removes the temporaries and
   the folders stage_mkdir_p created. Out of space, a failing write or
   rename names the final file in err. A rename failing in the middle of
   commit (not a space failure: renames need no data blocks) can still
   leave part of the set; commit then removes what it had not renamed. */
typedef struct {
  char **tmp, **final; /* n staged files */
  size_t n, cap;
  char **made; /* folders created by stage_mkdir_p, parents first */
  size_t nmade, capmade;
} stage_t;

void stage_init(stage_t *s);
/* mkdir -p, remembering the folders it created (removed again by stage_abort). */
int stage_mkdir_p(stage_t *s, const char *dir, aa_error_t *err);
/* Stage bytes for path (fsync'd). */
int stage_data(stage_t *s, const char *path, const void *data, size_t len, aa_error_t *err);
/* Stage t as a .npy file for path (aa_npy_write to the temporary). */
int stage_npy(stage_t *s, const char *path, const aa_tensor_t *t, aa_fmt_t fmt, aa_error_t *err);
/* dir/file, for the stage_* calls; NULL when out of memory (caller frees). */
char *stage_join(const char *dir, const char *file);
int stage_commit(stage_t *s, aa_error_t *err);
void stage_abort(stage_t *s);
void stage_free(stage_t *s); /* after commit or abort */

#endif
