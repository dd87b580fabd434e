/* attnacc: the one overflow-checked sizing of an array a file declares (lib/tensor/internal.h). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "internal.h"

int aa__extent(aa__extent_t *e, const size_t *shape, int ndim, size_t itemsize, uint64_t avail) {
  size_t n = 1;
  *e = (aa__extent_t){0};
  for (int i = 0; i < ndim; i++)
    if (aa_size_mul(&n, n, shape[i]) != AA_OK) return AA_ERANGE;
  /* A zero-element array still gets one double, so that its data pointer is
     not NULL (readers and the fuzz harnesses take NULL for "nothing read"). */
  if (aa_size_mul(&e->nbytes, n, itemsize) != AA_OK ||
      aa_size_mul(&e->dbytes, n > 0 ? n : 1, sizeof(double)) != AA_OK) {
    *e = (aa__extent_t){0};
    return AA_ERANGE;
  }
  e->numel = n;
  return (uint64_t)e->nbytes > avail ? AA_EFORMAT : AA_OK;
}
