/* attnacc: aa_round, rounding a double into an emulated format with integer operations on its bit pattern. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>

#include "common.h"
#include "fmt-impl.h"

/* Semantics (the MPFR model in tests/tfmt_model.c implements the same rules):

   1. x is rounded to precision prec with the format's exponent range bounded
      below only: the quantum is 2^(max(e, emin) - prec + 1), where
      2^e <= |x| < 2^(e+1), so values below 2^emin land on the subnormal grid
      (MPFR: emin' = emin - prec + 2 plus mpfr_subnormalize).
   2. Overflow: if the magnitude of that result exceeds max_finite (for e4m3
      this is 448, so 464 = midpoint(448, 480) rounds to 448 under RNE by
      ties-to-even and anything above overflows), the result is
      - +-max_finite when the mode rounds toward zero for this sign (RZ, RO,
        RD of a positive, RU of a negative): IEEE 754 7.4, no Inf from a
        finite input;
      - otherwise +-max_finite if saturate, else +-Inf, or NaN for e4m3.
      Infinite inputs give +-max_finite when saturate is set (the result of
      a saturating conversion is never infinite), else +-Inf (NaN for e4m3).
   3. Flush (subnormals == 0) happens AFTER step 1-2: a result whose
      magnitude is below 2^emin becomes a zero of the sign of x. So RU of a
      tiny positive value gives +0 under flushing, like output-FTZ hardware.
   4. RO (round to odd) is RZ on the grid of step 1 with the last
      significand bit ORed with the inexact flag; on the subnormal grid that
      bit is the last subnormal bit (so 0 < |x| < min subnormal gives the
      min subnormal). Overflow follows RZ (+-max_finite); e4m3's max 448 has
      an even significand and is the one place an inexact RO result is even.
   5. RS (stochastic) always consumes exactly one aa_pcg32_next output per
      call when rng != NULL (even for exact or special inputs, so element i
      of a tensor uses output i). With d = |x| - down, ulp = up - down and
      t = floor(2^32 d / ulp), the result is |up| iff r < t: the probability
      is t / 2^32: exactly d / ulp when the dropped bits beyond the first
      32 below the kept ones are zero (always when at most 32 bits are
      dropped, e.g. fp32 -> bf16 or bf16 -> fp8, or products of two bf16
      values rounded to bf16), otherwise below d / ulp by less than 2^-32.
      With rng == NULL, RS behaves as RZ. */
/* tiny = 2^emin, hoisted by the callers. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline double
round_one(double x, const aa_fmt_info_t *f, aa_rnd_t rnd, int subnormals, int saturate, double tiny,
          aa_pcg32_t *rng) {
  uint32_t r = 0;
  if (rnd == AA_RND_S && rng != NULL) r = aa_pcg32_next(rng);

  const uint64_t u = aa_f64_bits(x);
  const uint64_t sign = u & AA_F64_SIGN;
  const uint64_t ax = u ^ sign;
  if (ax >= AA_F64_INF) {
    if (ax > AA_F64_INF) return x + x; /* NaN: quiet it */
    if (saturate) return aa_f64_from_bits(sign | aa_f64_bits(f->max_finite));
    return f->has_inf ? x : copysign(NAN, x);
  }
  if (ax == 0) return x;

  /* |x| = M * 2^E with M < 2^53; e = floor(log2 |x|). */
  const int be = (int)(ax >> 52);
  uint64_t M;
  int E, e;
  if (be != 0) {
    M = (ax & AA_F64_FRAC) | AA_F64_HIDDEN;
    E = be - 1075;
    e = be - 1023;
  } else {
    M = ax;
    E = -1074;
    e = 63 - __builtin_clzll(M) - 1074;
  }
  const int q = (e > f->emin ? e : f->emin) - (f->prec - 1); /* quantum exponent */
  const int s = q - E;                                       /* bits to drop */
  double mag;
  if (s <= 0) {
    mag = aa_f64_from_bits(ax); /* already on the grid (fp64, or short significands) */
  } else {
    uint64_t trunc, rem;
    if (s < 64) {
      trunc = M >> s;
      rem = M & ((UINT64_C(1) << s) - 1);
    } else {
      trunc = 0; /* M < 2^53 <= 2^(s-1): below half an ulp, but inexact */
      rem = M;
    }
    const uint64_t inexact = rem != 0;
    /* Branch-free increments: the mode is loop-invariant in aa_round_n,
       the data-dependent decisions are not. */
    switch (rnd) {
    case AA_RND_NE:
      /* Adding half - 1 plus the kept last bit carries into the kept part
         exactly when rem > half, or rem == half with an odd last bit.
         M + 2^62 cannot overflow since M < 2^53. */
      if (s < 64) trunc = (M + ((UINT64_C(1) << (s - 1)) - 1) + (trunc & 1)) >> s;
      break;
    case AA_RND_Z:
      break;
    case AA_RND_U:
      trunc += inexact & (sign == 0);
      break;
    case AA_RND_D:
      trunc += inexact & (sign != 0);
      break;
    case AA_RND_O:
      trunc |= inexact;
      break;
    case AA_RND_S: {
      /* t = floor(2^32 * rem / 2^s): the first 32 bits of the fraction
         (0 when exact, so exact values never move). */
      uint64_t t;
      if (s <= 32)
        t = rem << (32 - s);
      else
        t = s - 32 < 64 ? rem >> (s - 32) : 0;
      trunc += (uint64_t)r < t;
      break;
    }
    default:
      return NAN;
    }
    /* trunc <= 2^prec <= 2^53, so the conversion and the scaling are exact
       (q >= -1074; trunc * 2^q overflows to Inf only past fp64's range). */
    mag = (double)trunc * aa_pow2(q);
  }

  if (mag > f->max_finite) {
    int toward_zero = rnd == AA_RND_Z || rnd == AA_RND_O || (rnd == AA_RND_D && !sign) || (rnd == AA_RND_U && sign) ||
                      (rnd == AA_RND_S && rng == NULL);
    if (toward_zero || saturate)
      mag = f->max_finite;
    else if (f->has_inf)
      mag = INFINITY;
    else
      mag = NAN;
  } else if (!subnormals && mag < tiny) {
    mag = 0.0;
  }
  return aa_f64_from_bits(aa_f64_bits(mag) | sign);
}

double aa_round(double x, const aa_round_opts_t *opts, aa_pcg32_t *rng) {
  if ((unsigned)opts->fmt >= AA_FMT_COUNT || (unsigned)opts->rnd >= AA_RND_COUNT) return NAN;
  const aa_fmt_info_t *f = &aa_fmt_infos_[opts->fmt];
  return round_one(x, f, opts->rnd, opts->subnormals, opts->saturate, aa_pow2(f->emin), rng);
}

double aa_round_info(double x, const aa_fmt_info_t *f, aa_rnd_t rnd, int subnormals, int saturate) {
  if ((unsigned)rnd >= AA_RND_COUNT || rnd == AA_RND_S) return NAN;
  return round_one(x, f, rnd, subnormals, saturate, aa_pow2(f->emin), NULL);
}

/* The loop is specialised per rounding mode so that the mode switch inside
   round_one folds away. */
int aa_round_n(double *out, const double *x, size_t n, const aa_round_opts_t *opts, aa_pcg32_t *rng) {
  if ((unsigned)opts->fmt >= AA_FMT_COUNT || (unsigned)opts->rnd >= AA_RND_COUNT) return AA_EINVAL;
  if (opts->rnd == AA_RND_S && rng == NULL) return AA_EINVAL;
  const aa_fmt_info_t *f = &aa_fmt_infos_[opts->fmt];
  const int sub = opts->subnormals, sat = opts->saturate;
  const double tiny = aa_pow2(f->emin);
  switch (opts->rnd) {
#define AA_ROUND_LOOP(R)                                                                                             \
  case R:                                                                                                            \
    for (size_t i = 0; i < n; i++)                                                                                   \
      out[i] = round_one(x[i], f, R, sub, sat, tiny, rng);                                                           \
    break;
    AA_ROUND_LOOP(AA_RND_NE)
    AA_ROUND_LOOP(AA_RND_Z)
    AA_ROUND_LOOP(AA_RND_U)
    AA_ROUND_LOOP(AA_RND_D)
    AA_ROUND_LOOP(AA_RND_O)
    AA_ROUND_LOOP(AA_RND_S)
#undef AA_ROUND_LOOP
  default:
    return AA_EINVAL;
  }
  return AA_OK;
}
