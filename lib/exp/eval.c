/* attnacc: scalar, packed and batch evaluation of the exp constructions, and their effective encoded exponent. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "exp-impl.h"

/* BF16 half of one result: BF16-native constructions already wrote BF16
   bits; FP32-native results go through the cvt conversion. */
static inline uint16_t half_of(const aa_exp_t *e, float x) {
  float in = aa_exp_input(e, x);
  switch (e->kind) {
  case AA_EXP_SCHRAUDOLPH_BF16:
    return (uint16_t)aa_exp_sbf16_int(e, in);
  case AA_EXP_QUADRATIC_BF16:
    return (uint16_t)aa_exp_quad_signed(e, x);
  case AA_EXP_SCHRAUDOLPH_FP32:
    return aa_exp_cvt16(aa_f32_from_bits((uint32_t)aa_exp_sfp32_int(e, in)), e->cvt);
  case AA_EXP_FA4_POLY:
    return aa_exp_cvt16(aa_f32_from_bits(aa_exp_fa4_bits(e, in)), e->cvt);
  case AA_EXP_EX2_SM90:
    return aa_exp_cvt16(aa_exp2f_sm90(in), e->cvt);
  default:
    return aa_exp_cvt16(aa_exp2_cr_f32(in), e->cvt);
  }
}

float aa_exp_eval(const aa_exp_t *e, float x) {
  float in = aa_exp_input(e, x);
  switch (e->kind) {
  case AA_EXP_SCHRAUDOLPH_FP32:
    return aa_f32_from_bits((uint32_t)aa_exp_sfp32_int(e, in));
  case AA_EXP_SCHRAUDOLPH_BF16:
    return aa_bf16_to_f32((uint16_t)aa_exp_sbf16_int(e, in));
  case AA_EXP_QUADRATIC_BF16:
    return aa_bf16_to_f32((uint16_t)aa_exp_quad_signed(e, x));
  case AA_EXP_FA4_POLY:
    return aa_f32_from_bits(aa_exp_fa4_bits(e, in));
  case AA_EXP_EX2_SM90:
    return aa_exp2f_sm90(in);
  default:
    return aa_exp2_cr_f32(in);
  }
}

/* The pair is evaluated lane by lane, as the two halves of a bf16x2
   instruction: no carry or borrow crosses from the low half into the high
   half (the 16-bit exponent adds are per-half, like vadd2/HADD2). */
uint32_t aa_exp_eval_packed(const aa_exp_t *e, float x0, float x1) {
  uint16_t lo = half_of(e, x0);
  uint16_t hi = half_of(e, x1);
  return (uint32_t)lo | ((uint32_t)hi << 16);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define AA_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define AA_CLONES
#endif

/* One loop per construction with the switch outside, so each loop body is
   straight-line and the compiler can vectorise it in every clone. */
AA_CLONES static void batch_sfp32(float *out, const float *x, size_t n, const aa_exp_t *e) {
  for (size_t i = 0; i < n; i++)
    out[i] = aa_f32_from_bits((uint32_t)aa_exp_sfp32_int(e, aa_exp_input(e, x[i])));
}
AA_CLONES static void batch_sbf16(uint16_t *out, const float *x, size_t n, const aa_exp_t *e) {
  for (size_t i = 0; i < n; i++)
    out[i] = (uint16_t)aa_exp_sbf16_int(e, aa_exp_input(e, x[i]));
}
AA_CLONES static void batch_quad(uint16_t *out, const float *x, size_t n, const aa_exp_t *e) {
  for (size_t i = 0; i < n; i++)
    out[i] = (uint16_t)aa_exp_quad_signed(e, x[i]);
}
AA_CLONES static void batch_fa4(float *out, const float *x, size_t n, const aa_exp_t *e) {
  for (size_t i = 0; i < n; i++)
    out[i] = aa_f32_from_bits(aa_exp_fa4_bits(e, aa_exp_input(e, x[i])));
}
AA_CLONES static void batch_cvt(uint16_t *out, const float *v, size_t n, aa_rnd_t cvt) {
  for (size_t i = 0; i < n; i++)
    out[i] = aa_exp_cvt16(v[i], cvt);
}
AA_CLONES static void batch_widen(float *out, const uint16_t *h, size_t n) {
  for (size_t i = 0; i < n; i++)
    out[i] = aa_bf16_to_f32(h[i]);
}

void aa_exp_eval_batch(float *out, const float *x, size_t n, const aa_exp_t *e) {
  switch (e->kind) {
  case AA_EXP_SCHRAUDOLPH_FP32:
    batch_sfp32(out, x, n, e);
    return;
  case AA_EXP_FA4_POLY:
    batch_fa4(out, x, n, e);
    return;
  case AA_EXP_SCHRAUDOLPH_BF16:
  case AA_EXP_QUADRATIC_BF16: {
    uint16_t h[256];
    for (size_t i0 = 0; i0 < n; i0 += 256) {
      size_t m = n - i0 < 256 ? n - i0 : 256;
      if (e->kind == AA_EXP_SCHRAUDOLPH_BF16)
        batch_sbf16(h, x + i0, m, e);
      else
        batch_quad(h, x + i0, m, e);
      batch_widen(out + i0, h, m);
    }
    return;
  }
  case AA_EXP_EX2_SM90:
    for (size_t i = 0; i < n; i++)
      out[i] = aa_exp2f_sm90(aa_exp_input(e, x[i]));
    return;
  default:
    for (size_t i = 0; i < n; i++)
      out[i] = aa_exp2_cr_f32(aa_exp_input(e, x[i]));
    return;
  }
}

void aa_exp_eval_bf16_batch(uint16_t *out, const float *x, size_t n, const aa_exp_t *e) {
  switch (e->kind) {
  case AA_EXP_SCHRAUDOLPH_BF16:
    batch_sbf16(out, x, n, e);
    return;
  case AA_EXP_QUADRATIC_BF16:
    batch_quad(out, x, n, e);
    return;
  default: {
    float tmp[256];
    for (size_t i0 = 0; i0 < n; i0 += 256) {
      size_t m = n - i0 < 256 ? n - i0 : 256;
      aa_exp_eval_batch(tmp, x + i0, m, e);
      batch_cvt(out + i0, tmp, m, e->cvt);
    }
    return;
  }
  }
}

/* Exposed for the map: widen BF16 halves to FP32 values. */
void aa_exp_widen_bf16(float *out, const uint16_t *h, size_t n);
void aa_exp_widen_bf16(float *out, const uint16_t *h, size_t n) {
  batch_widen(out, h, n);
}

double aa_exp_encoded_exponent(const aa_exp_t *e, float x, int out_bf16) {
  float in = aa_exp_input(e, x);
  switch (e->kind) {
  case AA_EXP_SCHRAUDOLPH_FP32:
    return (double)aa_exp_sfp32_int(e, in) / 0x1p23 - 127.0;
  case AA_EXP_SCHRAUDOLPH_BF16:
    return (double)aa_exp_sbf16_int(e, in) / 128.0 - 127.0;
  case AA_EXP_QUADRATIC_BF16:
    return (double)aa_exp_quad_signed(e, x) / 128.0 - 127.0;
  case AA_EXP_FA4_POLY:
    return (double)aa_exp_fa4_signed(e, in) / 0x1p23 - 127.0;
  default: {
    float v = e->kind == AA_EXP_EX2_SM90 ? aa_exp2f_sm90(in) : aa_exp2_cr_f32(in);
    if (out_bf16) return (double)aa_exp_cvt16(v, e->cvt) / 128.0 - 127.0;
    return (double)aa_f32_bits(v) / 0x1p23 - 127.0;
  }
  }
}
