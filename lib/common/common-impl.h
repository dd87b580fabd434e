/* attnacc: internal declarations shared by the file sources of the common module. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_COMMON_IMPL_H
#define AA_COMMON_IMPL_H

#include "common.h"

/* mkdir -p that appends the folders it created (parents first) to the
   set's made list, for aa_fileset_abort to remove (made NULL: not recorded). */
int aa__mkdir_p_made(const char *dir, aa_fileset_t *made, aa_error_t *err);

#endif
