/* attnacc: models of the sm90 (H100/H200) special-function results FA2 uses: MUFU.EX2/LG2, expf, logf, __logf. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <string.h>

#include "exp-impl.h"
#include "sm90-core.h"

/* The models themselves are in sm90-core.h (shared with the GPU emulation, which must give the same bits); the
   exported names of exp.h call them. */
uint32_t aa_sfu_square_sm90(uint32_t t) {
  return aa_core_sfu_square(t);
}
uint32_t aa_ex2_sm90_mantissa(uint32_t f23) {
  return aa_core_ex2_mantissa(f23);
}
float aa_ex2_sm90_ftz(float x) {
  return aa_core_ex2_ftz(x);
}
float aa_exp2f_sm90(float x) {
  return aa_core_exp2f(x);
}
float aa_expf_sm90(float a) {
  return aa_core_expf(a);
}
float aa_logf_sm90(float x) {
  return aa_core_logf(x);
}
float aa_lg2_sm90_ftz(float x) {
  return aa_core_lg2_ftz(x);
}
float aa_logf_fast_sm90(float x) {
  return aa_core_logf_fast(x);
}
