/* attnacc: emulated number formats (bf16, fp16, fp32, fp64, fp8 e4m3/e5m2), rounding modes and conversions. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_FMT_H
#define AA_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  AA_FMT_BF16 = 0,
  AA_FMT_FP16,
  AA_FMT_FP32,
  AA_FMT_FP64,
  AA_FMT_E4M3, /* OCP FP8 E4M3 (fn): no infinities, one NaN pattern per sign, max 448 */
  AA_FMT_E5M2, /* OCP FP8 E5M2: IEEE-like with infinities, max 57344 */
  AA_FMT_COUNT
} aa_fmt_t;

typedef enum {
  AA_RND_NE = 0, /* round to nearest, ties to even */
  AA_RND_Z,      /* toward zero */
  AA_RND_U,      /* toward +infinity */
  AA_RND_D,      /* toward -infinity */
  AA_RND_O,      /* round to odd (sticky last bit) */
  AA_RND_S,      /* stochastic: up with probability (x - down) / (up - down) */
  AA_RND_COUNT
} aa_rnd_t;

/* Static description of a format. A finite non-zero value is
   +-m * 2^(e - prec + 1) with 2^(prec-1) <= m < 2^prec for normals,
   emin <= e <= emax; subnormals have e = emin and m < 2^(prec-1). */
typedef struct {
  const char *name;  /* "bf16", "fp16", "fp32", "fp64", "e4m3", "e5m2" */
  int bits;          /* storage width */
  int prec;          /* significand bits including the implicit one */
  int emin;          /* exponent of the smallest normal (2^emin) */
  int emax;          /* exponent of the largest finite binade */
  int has_inf;       /* 0 for e4m3 */
  double max_finite; /* largest finite value */
} aa_fmt_info_t;

/* How a value is rounded into a format. */
typedef struct {
  aa_fmt_t fmt;
  aa_rnd_t rnd;
  int subnormals; /* 1: keep subnormals; 0: flush results below 2^emin to signed zero */
  int saturate;   /* 1: overflow gives +-max_finite; 0: +-Inf (NaN for e4m3, which has no Inf) */
} aa_round_opts_t;

const aa_fmt_info_t *aa_fmt_info(aa_fmt_t fmt);
/* Name lookup; returns AA_OK or AA_ENOTFOUND. */
int aa_fmt_from_name(aa_fmt_t *out, const char *name);
const char *aa_rnd_name(aa_rnd_t rnd); /* "rne", "rz", "ru", "rd", "ro", "rs" */
int aa_rnd_from_name(aa_rnd_t *out, const char *name);

/* Round the double x into the format described by opts and return the
   result as a double (exactly representable in the format). NaN stays NaN.
   rng is used only for AA_RND_S (may be NULL otherwise). Inputs are doubles,
   so a product of two fp32 values or any fp32 value is rounded once.
   Exact semantics (tested against MPFR in tests/tfmt*.c; details in
   lib/fmt/round.c):
   - x is rounded to prec bits on the grid 2^(max(e, emin) - prec + 1)
     (subnormal grid below 2^emin), with no upper exponent bound; a result
     above max_finite is an overflow (e4m3: 464 rounds to 448 under RNE,
     anything that would round to 480 or more overflows).
   - Overflow gives +-max_finite in modes that round |x| down (RZ, RD of a
     positive, RU of a negative) and in RO; otherwise +-max_finite if
     saturate, else +-Inf (NaN for e4m3). Infinite inputs give +-max_finite
     if saturate, else +-Inf (NaN for e4m3).
   - subnormals == 0 flushes AFTER rounding: a rounded result below 2^emin
     in magnitude becomes a zero with the sign of x (even in RU/RD).
   - AA_RND_O: truncate, then set the last significand bit (of the
     subnormal grid below 2^emin) if inexact; overflow follows RZ.
   - AA_RND_S: every call consumes exactly one aa_pcg32_next output r (also
     for exact or special inputs); with t = the first 32 bits of the
     fraction (|x| - down) / ulp, the result is up iff r < t, so
     P(up) = t / 2^32: exact when the fraction has <= 32 significant bits,
     otherwise low by less than 2^-32. With rng == NULL it acts as RZ. */
double aa_round(double x, const aa_round_opts_t *opts, aa_pcg32_t *rng);

/* out[i] = aa_round(x[i], opts, rng) for i < n (out may alias x), with the
   option decoding hoisted out of the loop. AA_RND_S draws in index order.
   Returns AA_EINVAL for an invalid format/mode or AA_RND_S without rng. */
int aa_round_n(double *out, const double *x, size_t n, const aa_round_opts_t *opts, aa_pcg32_t *rng);

/* Bit pattern of a value already representable in fmt, and back.
   Encoding an unrepresentable value is undefined; round it first.
   NaN encodes as the quiet pattern (e4m3: S.1111.111), Inf as the
   all-ones exponent (e4m3 has none: NaN). Patterns sit in the low bits. */
uint64_t aa_fmt_encode(double x, aa_fmt_t fmt);
double aa_fmt_decode(uint64_t bits, aa_fmt_t fmt);

/* Fast paths used in the emulation hot loops (bit-exact with aa_round in
   RNE, subnormals kept, Inf on overflow). */
static inline float aa_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline uint32_t aa_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
/* FP32 -> BF16 bits, round to nearest even; NaN becomes a quiet NaN. */
static inline uint16_t aa_bf16_bits_rne(float f) {
  uint32_t u = aa_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float aa_bf16_to_f32(uint16_t b) {
  return aa_f32_from_bits((uint32_t)b << 16);
}
/* FP32 value rounded to the nearest BF16 (RNE), returned as FP32. */
static inline float aa_bf16_rne(float f) {
  return aa_bf16_to_f32(aa_bf16_bits_rne(f));
}

#ifdef __cplusplus
}
#endif
#endif
