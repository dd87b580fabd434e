/* attnacc: the git commit of the build, from lib/githash.h (regenerated at every make, see build-aux/githash). */
#include "githash.h"
#include "version.h"

const char *aa_git_hash(void) {
  return AA_GIT_HASH_TEXT;
}
