/* attnacc: NumPy .npy reader and writer (format 1.0-3.0, little-endian, C order). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_NPY_H
#define AA_NPY_H

#include "common.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a .npy file of dtype '<u2' (BF16 bit patterns), '<f2', '<f4' or '<f8'
   with 1 to 3 axes into out (fmt BF16, FP16, FP32 or FP64). Anything else
   (big-endian, Fortran order, other dtypes, truncated data, bad header) is
   refused with AA_EFORMAT and a message naming the file and the reason. */
int aa_npy_read(aa_tensor_t *out, const char *path, aa_error_t *err);

/* Write t as a version 1.0 .npy with the dtype of fmt ('<u2' for BF16);
   values are rounded to fmt (RNE). The file appears atomically (an
   aa_ofile_t of lib/common.h: a temporary in the same folder, fsync,
   rename), so a failure leaves no partial file; messages name path. */
int aa_npy_write(const char *path, const aa_tensor_t *t, aa_fmt_t fmt, aa_error_t *err);
/* The same as one file of a set (lib/common.h): on disk under its
   temporary name until aa_fileset_commit renames the whole set. */
int aa_npy_write_set(aa_fileset_t *set, const char *path, const aa_tensor_t *t, aa_fmt_t fmt, aa_error_t *err);

/* An array of 1 to AA_NDARRAY_MAX_DIM axes read from a file, values exact
   in fmt, C order (the general form behind aa_npy_read; the layout module
   folds 4-axis attention arrays into [B*H, N, d] tensors). */
#define AA_NDARRAY_MAX_DIM 4
typedef struct {
  double *data;
  int ndim;
  size_t shape[AA_NDARRAY_MAX_DIM];
  aa_fmt_t fmt;
  int boolean; /* 1: read from '|b1' as its additive form (AA_NPY_BOOL_BIAS below) */
} aa_ndarray_t;
void aa_ndarray_free(aa_ndarray_t *a); /* safe on a zeroed or freed array */

/* Flags of the readers below. AA_NPY_BF16_BITS: '<i2' (int16, e.g. torch's
   t.view(torch.int16).numpy()) holds BF16 bit patterns, like '<u2'. */
#define AA_NPY_BF16_BITS 1u
/* AA_NPY_BOOL_BIAS: '|b1' (a boolean attention mask, True attends) is read
   as the additive mask SDPA makes of it: 0 where True, -Inf where False
   (fmt FP64). */
#define AA_NPY_BOOL_BIAS 2u

/* aa_npy_read with up to 4 axes and flags. */
int aa_npy_read_nd(aa_ndarray_t *out, const char *path, unsigned flags, aa_error_t *err);
/* The same on the bytes of a .npy held in memory (an .npz member); name is
   used in messages. */
int aa_npy_parse_nd(aa_ndarray_t *out, const void *buf, size_t len, const char *name, unsigned flags,
                    aa_error_t *err);

/* One array of an .npz archive (np.savez: stored; np.savez_compressed:
   deflated), read with libzip: member "NAME.npy". AA_ENOTFOUND when the
   archive has no such member (message naming the members it has),
   AA_EUNSUPPORTED when attnacc was built without libzip (the message says
   how to install it), AA_EFORMAT for a file that is not a zip archive, one
   with two members of one name (NumPy reads the last, libzip the first), a
   member neither stored nor deflated, or a member whose .npy header declares
   more than its directory entry's size, or whose entry claims more than
   deflate's 1032:1 gives from its compressed size. The member is inflated as
   it is read, after its header's shape is checked, so memory follows the
   declared shape, never the archive's claims. */
int aa_npz_read(aa_ndarray_t *out, const char *path, const char *name, unsigned flags, aa_error_t *err);

/* One tensor of a .safetensors file (8-byte little-endian header length, a
   JSON header {name: {"dtype", "shape", "data_offsets"}}, then the data):
   dtypes BF16, F16, F32, F64, and I16 as BF16 bits when flags has
   AA_NPY_BF16_BITS or the header's "__metadata__" has "bf16_bits": "true".
   AA_ENOTFOUND when the name is absent (message naming the tensors present).
   The whole header is checked first, as the format's specification states
   it, and AA_EFORMAT names the file and key of the first fault: JSON that
   is malformed, has duplicate keys, a NUL in a key or anything but spaces
   after it; "__metadata__" not an object of strings; a tensor whose shape
   times its dtype's size overflows or differs from its data_offsets span;
   offsets outside the data region, overlapping, or leaving bytes of it in
   no tensor (the format has no holes and no trailing data). */
int aa_safetensors_read(aa_ndarray_t *out, const char *path, const char *name, unsigned flags, aa_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
