/* attnacc: the git commit of the build, from lib/githash.h (regenerated at every make, see build-aux/githash). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "githash.h"
#include "version.h"

const char *aa_git_hash(void) {
  return AA_GIT_HASH_TEXT;
}
