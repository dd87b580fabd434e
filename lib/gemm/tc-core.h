/* attnacc: the integer core of the tensor-core block models (tc-kK-fF), written once for the CPU (C) and the GPU
 * (CUDA). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_GEMM_TC_CORE_H
#define AA_GEMM_TC_CORE_H

#include <stddef.h>
#include <stdint.h>
#ifndef __CUDACC__
#include <math.h>
#include <string.h>
#endif

#include "../hd.h"

/* An fp32 operand x = (-1)^s m 2^(e - 23), with e its alignment exponent
   max(floor(log2 |x|), -126) of gemm.h: m has the hidden bit for normal
   numbers, and a subnormal's m < 2^23 sits at e = -126, so the rule holds
   for both. A zero gets AA_TC_ENONE, far below any real exponent (even
   added to another), so a zero product or accumulator never sets the
   block exponent, and its m = 0 adds nothing whatever the shift. */
#define AA_TC_ENONE (-4096)
typedef struct {
  uint32_t m8;  /* m << 8: the significand at the top of 32 bits (m < 2^24) */
  int32_t e;    /* alignment exponent, AA_TC_ENONE for zeros */
  int32_t neg;  /* 0, or -1 for a negative x */
  int32_t spec; /* 1 for Inf or NaN */
} aa_tc_op_t;

static inline AA_HD aa_tc_op_t aa_tc_unpack(uint32_t bits) {
  aa_tc_op_t o;
  uint32_t be = (bits >> 23) & 255, frac = bits & 0x7fffffu;
  uint32_t m = be != 0 ? frac | 0x800000u : frac;
  o.m8 = m << 8;
  o.e = m == 0 ? AA_TC_ENONE : (be != 0 ? (int32_t)be - 127 : -126);
  o.neg = (int32_t)(bits >> 31) * -1;
  o.spec = be == 255;
  return o;
}

/* |a b| truncated to a multiple of 2^(E - F), in those units, for a block
   exponent E >= e(a) + e(b) and shift = E - F - (e(a) + e(b)) + 30 >= 0
   (F <= 30): the exact product ma mb 2^(e(a) + e(b) - 46) over
   2^(E - F) is ma mb / 2^(shift + 16); the high word of
   (ma 2^8)(mb 2^8) is floor(ma mb / 2^16), and flooring twice is flooring
   once. Below 2^(F + 2). */
static inline AA_HD uint32_t aa_tc_mulhi(uint32_t x, uint32_t y) {
#ifdef __CUDA_ARCH__
  return __umulhi(x, y);
#else
  return (uint32_t)(((uint64_t)x * y) >> 32);
#endif
}
static inline AA_HD uint32_t aa_tc_prod_term(uint32_t ma8, uint32_t mb8, int32_t shift) {
  uint32_t hi = aa_tc_mulhi(ma8, mb8);
#ifdef __CUDA_ARCH__
  uint32_t r; /* PTX shr clamps a shift beyond 32 to 32, giving the 0 of the C branch in one instruction */
  asm("shr.b32 %0, %1, %2;" : "=r"(r) : "r"(hi), "r"((uint32_t)shift));
  return r;
#else
  return shift >= 32 ? 0u : hi >> shift;
#endif
}

/* The accumulator's term: |acc| = m 2^(e - 23) truncated to a multiple of
   2^(E - F), in those units: shift = E - F - e + 23, at least -2 when
   m != 0 (e <= E, F <= 25), so m 2^2 < 2^26 fits; a zero (e = AA_TC_ENONE)
   gives a large shift and 0. */
static inline AA_HD uint32_t aa_tc_acc_term(uint32_t m, int32_t shift) {
  if (shift < 0) return m << -shift;
  return shift >= 32 ? 0u : m >> shift;
}

/* The block sum S 2^q (S an integer, q = E - F) rounded toward zero to
   out_bits fractional bits in fp32's exponent range, as fp32 bits (gemm.h:
   subnormals in multiples of 2^(-126 - out_bits), |S 2^q| >= 2^128 to +-Inf
   for fp32 (out_bits 23, as the H200 gives) and to the largest finite value
   (2 - 2^-out_bits) 2^127 for e8m13, an exact zero +0, a nonzero sum below
   the smallest step a zero of its own sign). */
static inline AA_HD int aa_tc_top_bit(uint64_t u) {
#ifdef __CUDA_ARCH__
  return 63 - __clzll((long long)u);
#else
  return 63 - __builtin_clzll(u);
#endif
}
static inline AA_HD uint32_t aa_tc_round_bits(int64_t S, int32_t q, int out_bits) {
  if (S == 0) return 0;
  uint32_t sign = S < 0 ? 0x80000000u : 0;
  uint64_t u = S < 0 ? 0 - (uint64_t)S : (uint64_t)S;
  int32_t v = aa_tc_top_bit(u) + q; /* floor(log2 |S 2^q|) */
  if (v > 127) /* |S| >= 2^128: +-Inf for an FP32 result, as the H200's mma.sync and wgmma give (not RZ's FLT_MAX:
                   fixtures/h200-fa2/probe_tc_overflow.py); e8m13 keeps [mma-sim]'s largest finite value */
    return sign | (out_bits == 23 ? 0x7f800000u : 0x7f7fffffu & ~((1u << (23 - out_bits)) - 1));
  int32_t lsb = (v < -126 ? -126 : v) - out_bits; /* the step kept */
  int32_t r = lsb - q;
  uint64_t m = r <= 0 ? u << -r : (r >= 64 ? 0 : u >> r); /* < 2^(out_bits + 1): r <= 0 only when u is small */
  if (m == 0) return sign;
  /* m 2^lsb as fp32: the significand m 2^(23 - out_bits) and, for a normal
     result, the biased exponent lsb - (23 - out_bits) + 150 added above it
     (the hidden bit then carries into the exponent field); a subnormal has
     lsb - (23 - out_bits) = -149 and adds 0. */
  uint32_t M = (uint32_t)m << (23 - out_bits);
  int32_t Q = lsb - (23 - out_bits);
  return sign | (M + ((uint32_t)(Q + 149) << 23));
}

/* The shift that aligns a product of alignment exponent eab to the block:
   the argument of aa_tc_prod_term. */
static inline AA_HD int32_t aa_tc_prod_shift(int32_t E, int frac_bits, int32_t eab) {
  return E - frac_bits - eab + 30;
}
static inline AA_HD int32_t aa_tc_acc_shift(int32_t E, int frac_bits, int32_t eacc) {
  return E - frac_bits - eacc + 23;
}

/* The bits of an fp32 value and back. */
static inline AA_HD uint32_t aa_tc_f2u(float x) {
  return aa_hd_f2u(x);
}
static inline AA_HD float aa_tc_u2f(uint32_t u) {
  return aa_hd_u2f(u);
}

/* A term t of sign mask neg (0 or -1) added into an integer sum. */
static inline AA_HD int64_t aa_tc_signed(uint32_t t, int32_t neg) {
  return neg ? -(int64_t)t : (int64_t)t;
}

/* One block of the tc-kK-fF definition (gemm.h): the accumulator acc and
   the exact products a[k] b[k bstride], k < n, aligned to the largest
   exponent of a nonzero term, truncated to frac_bits fractional bits
   (<= 25), summed exactly, rounded toward zero to out_bits; with an Inf or
   NaN term, the IEEE sum of those terms alone. */
static inline AA_HD int32_t aa_tc_spec_pair(float a, float b) {
  return aa_tc_unpack(aa_tc_f2u(a)).spec | aa_tc_unpack(aa_tc_f2u(b)).spec;
}
static inline AA_HD float aa_tc_block(float acc, const float *a, const float *b, size_t bstride, size_t n,
                                      int frac_bits, int out_bits) {
  aa_tc_op_t c = aa_tc_unpack(aa_tc_f2u(acc));
  int32_t E = c.e, spec = c.spec;
  for (size_t k = 0; k < n; k++) {
    aa_tc_op_t x = aa_tc_unpack(aa_tc_f2u(a[k])), y = aa_tc_unpack(aa_tc_f2u(b[k * bstride]));
    spec |= x.spec | y.spec;
    E = x.e + y.e > E ? x.e + y.e : E;
  }
  if (spec) { /* the IEEE sum of the non-finite terms (finite ones cannot change it) */
    float s = c.spec ? acc : 0.0f;
    for (size_t k = 0; k < n; k++)
      if (aa_tc_spec_pair(a[k], b[k * bstride])) s += a[k] * b[k * bstride];
    return s;
  }
  int64_t S = aa_tc_signed(aa_tc_acc_term(c.m8 >> 8, aa_tc_acc_shift(E, frac_bits, c.e)), c.neg);
  for (size_t k = 0; k < n; k++) {
    aa_tc_op_t x = aa_tc_unpack(aa_tc_f2u(a[k])), y = aa_tc_unpack(aa_tc_f2u(b[k * bstride]));
    S += aa_tc_signed(aa_tc_prod_term(x.m8, y.m8, aa_tc_prod_shift(E, frac_bits, x.e + y.e)), x.neg ^ y.neg);
  }
  return aa_tc_u2f(aa_tc_round_bits(S, E - frac_bits, out_bits));
}

/* One step of fp32-seq (gemm.h): one fused multiply-add in binary32, RNE, subnormals kept. */
static inline AA_HD float aa_seq32_step(float acc, float a, float b) {
  return fmaf(a, b, acc);
}

#endif
