/* attnacc: internal declarations shared by the tensor module's readers (checked sizes, the .npy byte-source reader).
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_TENSOR_INTERNAL_H
#define AA_TENSOR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "npy.h"

/* The sizes of an array a file declares. */
typedef struct {
  size_t numel;  /* the product of the axes */
  size_t nbytes; /* numel * itemsize: what it takes in the file */
  size_t dbytes; /* max(numel, 1) * sizeof(double): its values in memory */
} aa__extent_t;

/* Every reader (.npy, .npz members, .safetensors) sizes what a file declares
   here and nowhere else, before allocating or reading anything of that size:
   the product of the ndim axes of shape, times itemsize, and the bytes of the
   doubles that hold the values, each product checked. avail is the most the
   file can hold for the array (the bytes after a .npy header, a zip member's
   declared size less its header, a tensor's data_offsets span). AA_OK;
   AA_ERANGE when a product does not fit size_t (e is then zeroed);
   AA_EFORMAT when nbytes exceeds avail (e is filled, for the message). The
   caller writes the message and decides whether fewer bytes than avail are
   an error too. */
int aa__extent(aa__extent_t *e, const size_t *shape, int ndim, size_t itemsize, uint64_t avail);

/* Where the .npy reader takes its bytes from: a file, a buffer, a member of
   an .npz being inflated. read gives up to n bytes and returns how many
   (fewer only at the end or on an error); size is what the source says it
   holds (a file's size, a zip member's declared size), against which the
   header's shape is checked before the data are read. */
typedef struct {
  size_t (*read)(void *ctx, void *buf, size_t n);
  void *ctx;
  uint64_t size;
} aa__src_t;

/* The .npy reader on a source: up to maxdim axes into out; name is used in
   messages. The data must end exactly where the source does. */
int aa__npy_read_src(aa_ndarray_t *out, const aa__src_t *src, const char *name, int maxdim, unsigned flags,
                     aa_error_t *err);

/* One little-endian item of format fmt (bf16, fp16, fp32; anything else as
   fp64) at p, as the double it encodes: the readers' one decoder. */
double aa__decode_le(const unsigned char *p, aa_fmt_t fmt);

#endif
