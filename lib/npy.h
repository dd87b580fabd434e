/* attnacc: NumPy .npy reader and writer (format 1.0-3.0, little-endian, C order). */
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
   values are rounded to fmt (RNE). The file appears atomically (written to a
   temporary name in the same folder, then renamed), so a failure leaves no
   partial file. */
int aa_npy_write(const char *path, const aa_tensor_t *t, aa_fmt_t fmt, aa_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
