/* attnacc: AVX-512 fp32 path of the tensor-core block models: exact fp32 products, int32 block sums, one kernel per
 * block length. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm-impl.h"
#include "tc-impl.h"

/* When every product a_k b_k is exactly representable as a normal fp32
   number or zero (checked while packing: no Inf, NaN or subnormal operand,
   significand lengths adding up to at most 24 bits, exponents that keep
   every nonzero product in [2^-126, 2^128)), a block needs no binary64:
     pass 1  p = a b in fp32 (exact), kept; mx = the largest 2^E over the
             block's terms: 2^(e(a)+e(b)) for a product, from the sums of
             the operands' exponent words in 16-bit lanes (pae, pbe:
             tc_ew; a zero operand takes no part), and 2^e(acc) for the
             accumulator (gemm.h's alignment rule), so E = the exponent
             field of mx;
     pass 2  each term times 2^(F-E) (exact: a power of two; a term that
             underflows there is below 1, as its exact value is, and
             truncates to 0 like it), converted to int32 by truncation
             toward zero (vcvttps2dq: exactly t' / 2^(E-F)), summed in int32;
             a product's |t'| / 2^(E-F) < 2^(F+2) (its significand product
             is below 4), the accumulator's < 2^(F+1), so the terms fit when
             bk (2^(F+2) - 1) + 2^(F+1) <= 2^31; otherwise (tc-k16-f25:
             16 products fit, with the accumulator they may not;
             tc-fp8-k32-f25: 32 products may not) every add after the
             16th product and the accumulator's term, added last, are
             checked for overflow (a lane that overflows sends its tile
             back);
     result  the sum converted to fp32 rounding toward zero (24 significant
             bits), times 2^(E-F): exact because the lanes' E is kept in
             [F-125, 120], where every nonzero result is normal and finite,
             so this is RZ_fp32 of the exact sum. A zero sum gives +0. A
             narrower result (out_bits < 23: e8m13 of tc-fp8-k32-f13) then
             drops the low 23 - out_bits bits of that normal fp32 number
             (truncating twice toward zero is truncating once to the
             coarser grid); in the window it is normal in that format too
             (same exponent range) and below its largest value
             (33 2^121 < 2^127).
   The window on E also makes products that underflow harmless: none do
   (checked), and quanta 2^(E-F) stay above 2^-126. A lane whose E leaves
   the window (a huge or tiny accumulator, an Inf or NaN one) makes its
   tile return 1; the caller recomputes that tile from the untouched C by
   the binary64 path, so the bits never depend on the path. */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TC_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw")))
#define TC_INLINE inline __attribute__((always_inline))

#define TC_MR 4  /* rows of a tile */
#define TC_NR 32 /* columns of a tile: two zmm of fp32 */

/* The block exponent E = max over k of e(a_k) + e(b_k) is formed in 16-bit
   lanes (32 per vector, a row of a tile in one: half the instructions of
   fp32 lanes). A word holds an exponent sum shifted left by 7, so that
   placed in the high half of a 32-bit lane it is the exponent field of
   2^E as fp32 (0 when every product is zero): op(A)'s word is
   (field - 127) << 7, op(B)'s field << 7, a zero either way -32768, and
   the saturating sum (vpaddsw) of two nonzero operands' words is
   (e(a) + e(b) + 127) << 7, in [1, 253] << 7 where the exact path runs
   (tc_fast32's exponent check), while any sum with a zero word is
   negative, so a running maximum from 0 takes no part of it. */
static inline uint16_t tc_ew(uint32_t u, int bias) {
  const int f = (int)(u >> 23 & 255u);
  return (uint16_t)((u & 0x7fffffffu) == 0 ? -32768 : (f - bias) * 128);
}
/* op(A)'s word in both halves of a 32-bit lane (a 32-bit broadcast then fills a vector with it) */
static inline uint32_t tc_ew_a(uint32_t u) {
  return (uint32_t)tc_ew(u, 127) * 0x10001u;
}

typedef struct {
  int ok;
  uint32_t orm;   /* OR of the significand fields of the nonzero values */
  int emin, emax; /* unbiased exponents of the nonzero values */
  int any;        /* a nonzero value was seen */
} tc_stat_t;

TC_AVX512 static void tc_stat_row(tc_stat_t *st, const float *x, size_t n) {
  uint32_t bad = 0, orm = 0, emax = 0, emin1 = UINT32_MAX;
  AA_OMP(omp simd reduction(| : bad, orm) reduction(max : emax) reduction(min : emin1))
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, x + i, sizeof u);
    uint32_t ef = (u >> 23) & 0xffu, m = u & 0x7fffffu, e1 = ef - 1u; /* zeros: e1 wraps to UINT32_MAX */
    bad |= (ef + 1u) >> 8 | (e1 >> 31 & (m != 0));                    /* Inf/NaN (ef = 255), subnormal */
    orm |= m;
    emax = ef > emax ? ef : emax;
    emin1 = e1 < emin1 ? e1 : emin1;
  }
  if (bad) st->ok = 0;
  st->orm |= orm;
  if (emin1 == UINT32_MAX) return; /* zeros only */
  int lo = (int)emin1 + 1 - 127, hi = (int)emax - 127;
  if (!st->any || lo < st->emin) st->emin = lo;
  if (!st->any || hi > st->emax) st->emax = hi;
  st->any = 1;
}

/* The exponent words (tc_ew) of 16 fp32 values, one per 32-bit lane. */
TC_AVX512 static inline __m512i tc_ew16(__m512i u, int bias) {
  const __m512i f = _mm512_and_si512(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(255));
  const __m512i w = _mm512_slli_epi32(_mm512_sub_epi32(f, _mm512_set1_epi32(bias)), 7);
  return _mm512_mask_mov_epi32(_mm512_set1_epi32(-32768), _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7fffffff)),
                               w);
}

/* xa[i] = tc_ew_a(x[i]) for i < n */
TC_AVX512 static void tc_enc_a(uint32_t *xa, const float *x, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = tc_ew16(_mm512_loadu_si512(x + i), 127);
    _mm512_storeu_si512(xa + i,
                        _mm512_or_si512(_mm512_and_si512(w, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(w, 16)));
  }
  for (; i < n; i++) {
    uint32_t u;
    memcpy(&u, x + i, sizeof u);
    xa[i] = tc_ew_a(u);
  }
}

/* Rows of NR values of x: their words tc_ew(u, 0) in the order tc_products reads them back (vpunpck{l,h}wd take
   words 0-3 and 4-7 of each 128-bit lane, so column c < 16 sits at word 8 (c / 4) + c mod 4, column 16 + c at
   8 (c / 4) + 4 + c mod 4), the order in which vpackssdw interleaves its two sources (the words fit: no
   saturation). */
TC_AVX512 static void tc_enc_b(uint16_t *xb, const float *x, size_t rows) {
  for (size_t r = 0; r < rows; r++) {
    const __m512i lo = tc_ew16(_mm512_loadu_si512(x + r * TC_NR), 0),
                  hi = tc_ew16(_mm512_loadu_si512(x + r * TC_NR + 16), 0);
    _mm512_storeu_si512(xb + r * TC_NR, _mm512_packs_epi32(lo, hi));
  }
}

/* significant bits of the longest significand seen (1 .. 24) */
static int tc_stat_bits(const tc_stat_t *st) {
  return 24 - __builtin_ctz(st->orm | 0x800000u);
}

#define TC_BKMAX 32
#define TC_EBMAX (120 + 127)
/* An FP32 exponent field value e placed at bit 23 as a 32-bit lane: formed
   unsigned (e << 23 overflows int from e = 256 on), the lane holds the bits. */
#define TC_FIELD(e) ((int)((uint32_t)(e) << 23))

/* Pass 1 of a block, shared by the tc models and cdna3: the exact fp32
   products a_k b_k of the MR x NR tile into buf, and mxe = max over k of
   2^(e(a_k) + e(b_k)) as fp32 bits (+0 when every product is zero), from
   the operands' exponent words (pae, pbe: tc_ew) summed in 16-bit lanes. */
TC_AVX512 static TC_INLINE void tc_products(__m512 buf[][TC_MR][2], __m512 mxe[TC_MR][2], const float *pa,
                                            const uint32_t *pae, size_t lda, const float *pb, const uint16_t *pbe,
                                            size_t ldb, const size_t n) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i mw[TC_MR] = {zero, zero, zero, zero}; /* exponent words (tc_ew), a row of the tile each */
#pragma GCC unroll 8
  for (size_t k = 0; k < n; k++) {
    const __m512 b0 = _mm512_loadu_ps(pb + k * ldb), b1 = _mm512_loadu_ps(pb + k * ldb + 16);
    const __m512i eb = _mm512_loadu_si512(pbe + k * ldb);
#pragma GCC unroll 8
    for (int r = 0; r < TC_MR; r++) {
      const __m512 a = _mm512_set1_ps(pa[(size_t)r * lda + k]);
      buf[k][r][0] = _mm512_mul_ps(a, b0);
      buf[k][r][1] = _mm512_mul_ps(a, b1);
      mw[r] = _mm512_max_epi16(mw[r], _mm512_adds_epi16(_mm512_set1_epi32((int)pae[(size_t)r * lda + k]), eb));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < TC_MR; r++) { /* a word w into the high half of a 32-bit lane: the fp32 bits of 2^E */
    mxe[r][0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, mw[r]));
    mxe[r][1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, mw[r]));
  }
}

/* One block of n <= bk values of k for the MR x NR accumulators ac (pa: MR
   rows of op(A), stride lda; pb: n rows of op(B), stride ldb). Returns the
   lanes (of the OR over the tile) whose E left the window or whose sum
   overflowed: their ac is then meaningless. */
TC_AVX512 static TC_INLINE __mmask16 tc_block(__m512 ac[TC_MR][2], const float *pa, const uint32_t *pae, size_t lda,
                                              const float *pb, const uint16_t *pbe, size_t ldb, const size_t n,
                                              const int fb, const int ob, const int wide, const int narrow) {
  __m512 buf[TC_BKMAX][TC_MR][2], mx[TC_MR][2];
  const __m512i expm = _mm512_set1_epi32(0x7f800000), ebmin = _mm512_set1_epi32(TC_FIELD(fb + 2)),
                span = _mm512_set1_epi32(TC_FIELD(TC_EBMAX - (fb + 2))), upk = _mm512_set1_epi32(TC_FIELD(fb + 254)),
                dnk = _mm512_set1_epi32(TC_FIELD(254)),
                outm = _mm512_set1_epi32((int)(UINT32_MAX << (23 - ob))); /* the result's significand bits */
  tc_products(buf, mx, pa, pae, lda, pb, pbe, ldb, n);
#pragma GCC unroll 8
  for (int r = 0; r < TC_MR; r++) /* the accumulator's 2^e(acc) joins the maximum */
    for (int v = 0; v < 2; v++)
      mx[r][v] = _mm512_max_ps(mx[r][v], _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(ac[r][v]), expm)));
  __m512 up[TC_MR][2];
  __m512i s[TC_MR][2];
  __mmask16 bad = 0;
#pragma GCC unroll 8
  for (int r = 0; r < TC_MR; r++)
    for (int v = 0; v < 2; v++) {
      /* the exponent field of 2^E (in place), so 2^(F-E) = (F + 254 - field) << 23 */
      const __m512i mb = _mm512_castps_si512(mx[r][v]), eb = _mm512_and_si512(mb, expm),
                    ab = _mm512_and_si512(_mm512_castps_si512(ac[r][v]), _mm512_set1_epi32(0x7fffffff));
      /* out of the window, unless every term is zero (mx = +0: the sum is 0 at any scale); a subnormal
         accumulator (nonzero, exponent field 0) is out of it */
      bad |= _mm512_mask_cmpgt_epu32_mask(_mm512_test_epi32_mask(mb, mb), _mm512_sub_epi32(eb, ebmin), span) |
             _mm512_mask_cmpeq_epi32_mask(_mm512_test_epi32_mask(ab, ab), _mm512_and_si512(ab, expm),
                                          _mm512_setzero_si512());
      up[r][v] = _mm512_castsi512_ps(_mm512_sub_epi32(upk, _mm512_max_epi32(eb, ebmin))); /* 2^(F-E) */
      s[r][v] = wide ? _mm512_setzero_si512() : _mm512_cvttps_epi32(_mm512_mul_ps(ac[r][v], up[r][v]));
    }
#pragma GCC unroll 8
  for (size_t k = 0; k < n; k++)
#pragma GCC unroll 8
    for (int r = 0; r < TC_MR; r++)
      for (int v = 0; v < 2; v++) {
        const __m512i x = _mm512_cvttps_epi32(_mm512_mul_ps(buf[k][r][v], up[r][v]));
        if (k < 16) { /* 16 products below 2^(F+2) <= 2^27 each fit in int32 */
          s[r][v] = _mm512_add_epi32(s[r][v], x);
        } else { /* tc-fp8-k32-f25's last 16: signed overflow where (s ^ t) & (x ^ t) has its sign bit */
          const __m512i t = _mm512_add_epi32(s[r][v], x);
          bad |= _mm512_movepi32_mask(_mm512_ternarylogic_epi32(s[r][v], x, t, 0x42));
          s[r][v] = t;
        }
      }
#pragma GCC unroll 8
  for (int r = 0; r < TC_MR; r++)
    for (int v = 0; v < 2; v++) {
      if (wide) { /* the accumulator's term last: signed overflow where (s ^ t) & (a ^ t) has its sign bit */
        const __m512i a = _mm512_cvttps_epi32(_mm512_mul_ps(ac[r][v], up[r][v])), t = _mm512_add_epi32(s[r][v], a);
        bad |= _mm512_movepi32_mask(_mm512_ternarylogic_epi32(s[r][v], a, t, 0x42));
        s[r][v] = t;
      }
      const __m512 dn = _mm512_castsi512_ps(_mm512_sub_epi32(dnk, _mm512_castps_si512(up[r][v]))); /* 2^(E-F) */
      ac[r][v] = _mm512_mul_ps(_mm512_cvt_roundepi32_ps(s[r][v], _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), dn);
      if (narrow) ac[r][v] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(ac[r][v]), outm));
    }
  return bad;
}

/* The MR x NR accumulators: loaded from acc (store 0) or stored to it. */
TC_AVX512 static TC_INLINE void tc_tile_io(__m512 ac[TC_MR][2], float *acc, size_t ldc, int store) {
#pragma GCC unroll 8
  for (int r = 0; r < TC_MR; r++)
    for (int v = 0; v < 2; v++)
      if (store)
        _mm512_storeu_ps(acc + (size_t)r * ldc + 16 * v, ac[r][v]);
      else
        ac[r][v] = _mm512_loadu_ps(acc + (size_t)r * ldc + 16 * v);
}

/* One MR x NR tile over kc values of k (a multiple of bk unless it ends K):
   acc (row stride ldc) holds the fp32 accumulators on entry and exit, pa
   MR rows of op(A) (stride lda), pb kc rows of op(B) (stride ldb). Returns
   1, acc then undefined, when a lane left the window. wide: bk products
   and the accumulator may overflow int32 (tc_wide); narrow: the result has
   fewer than 23 fractional bits. Inlined into one function per shape
   (bk, wide, narrow) of the current rows, so that the block's loops and
   branches are fixed at compile time, as they were with one kernel per
   model; F and the result's bits are read once per call. */
TC_AVX512 static TC_INLINE int tc_kern(float *acc, size_t ldc, const float *pa, const uint32_t *pae, size_t lda,
                                       const float *pb, const uint16_t *pbe, size_t ldb, size_t kc, const int bk,
                                       const int fb, const int ob, const int wide, const int narrow) {
  __m512 ac[TC_MR][2];
  tc_tile_io(ac, acc, ldc, 0);
  __mmask16 bad = 0;
  size_t k0 = 0;
  for (; k0 + (size_t)bk <= kc; k0 += (size_t)bk)
    bad |= tc_block(ac, pa + k0, pae + k0, lda, pb + k0 * ldb, pbe + k0 * ldb, ldb, (size_t)bk, fb, ob, wide, narrow);
  if (k0 < kc)
    bad |= tc_block(ac, pa + k0, pae + k0, lda, pb + k0 * ldb, pbe + k0 * ldb, ldb, kc - k0, fb, ob, wide, narrow);
  tc_tile_io(ac, acc, ldc, 1);
  return bad != 0;
}

/* Products are below 2^(F+2) after scaling (16 of them fit in int32 for
   F <= 25; tc_block checks the later ones), the accumulator below 2^(F+1):
   1 when bk of them and the accumulator may not fit. */
static int tc_wide(int bk, int fb) {
  return ((int64_t)bk << (fb + 2)) - bk + ((int64_t)1 << (fb + 1)) > INT32_MAX;
}

/* pae, pbe: the exponent fields of pa, pb; bk, fb, ob: the row's K, F and result bits (cdna3 has its own) */
typedef int (*tc_kern_fn)(float *acc, size_t ldc, const float *pa, const uint32_t *pae, size_t lda, const float *pb,
                          const uint16_t *pbe, size_t ldb, size_t kc, int bk, int fb, int ob);
#define TC_KERN(name, bkc, widec, narrowc)                                                                           \
  TC_AVX512 static int name(float *acc, size_t ldc, const float *pa, const uint32_t *pae, size_t lda,                \
                            const float *pb, const uint16_t *pbe, size_t ldb, size_t kc, int bk, int fb, int ob) {   \
    (void)bk;                                                                                                        \
    return tc_kern(acc, ldc, pa, pae, lda, pb, pbe, ldb, kc, bkc, fb, ob, widec, narrowc);                           \
  }
/* the shapes of the current rows (tc_kernel_of picks by the row's fields) and one for any other row */
TC_KERN(tc_kern_4, 4, 0, 0)
TC_KERN(tc_kern_8, 8, 0, 0)
TC_KERN(tc_kern_16w, 16, 1, 0)
TC_KERN(tc_kern_32n, 32, 0, 1)
TC_KERN(tc_kern_32w, 32, 1, 0)
TC_KERN(tc_kern_any, bk, tc_wide(bk, fb), ob < 23)

/* ---- cdna3-k8-f24 (gemm.h): groups of 8, two stages, RNE ----

   Under the same operand conditions: pass 1 keeps the exact fp32 products
   and the largest 2^(e(a)+e(b)) over the nonzero ones (tc_products: a
   zero operand takes no part); pass 2 sums trunc(p 2^(24-e_p)) in int32
   (|p| < 2^(e_p+2): 8 terms below 2^29); stage 2 runs in binary64, where
     acc' 2^(E-31) = floor(acc 2^-E 2^24) 2^E 2^-24   and
     S'   2^(E-31) = (S >> max(d, 0)) 2^max(e_p, E-7) 2^-24,  d = E - e_p - 7,
   (an arithmetic shift is the floor) are exact, as is their sum (all
   multiples of 2^(E-31), below 2^(E+27)), so one RNE conversion to fp32
   gives the definition's result, subnormals and overflow to Inf included.
   Lanes leave the window (their tile then takes the literal steps) for a
   non-finite accumulator, e_p < -102 (2^(24-e_p) is not a normal fp32
   number) or E = 127 (2^-E is not). */
#define CD_G 8

/* binary64 stage 2 of 8 lanes: RNE_fp32(floor(acc sE 2^24) eE 2^-24 + Sv sS 2^-24) */
TC_AVX512 static TC_INLINE __m256 cd_stage2(__m256 acc, __m256 sE, __m256 eE, __m256i Sv, __m256 sS) {
  const __m512d two24 = _mm512_set1_pd(0x1p24), twom24 = _mm512_set1_pd(0x1p-24);
  __m512d a = _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(acc), _mm512_cvtps_pd(sE)), two24);
  a = _mm512_mul_pd(_mm512_roundscale_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), _mm512_cvtps_pd(eE));
  const __m512d r = _mm512_fmadd_pd(_mm512_cvtepi32_pd(Sv), _mm512_cvtps_pd(sS), a); /* exact: see above */
  return _mm512_cvtpd_ps(_mm512_mul_pd(r, twom24));
}

TC_AVX512 static TC_INLINE __m512 cd_join(__m256 lo, __m256 hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

TC_AVX512 static TC_INLINE __mmask16 cd_block(__m512 ac[TC_MR][2], const float *pa, const uint32_t *pae, size_t lda,
                                              const float *pb, const uint16_t *pbe, size_t ldb, const size_t n) {
  __m512 buf[CD_G][TC_MR][2], mxe[TC_MR][2];
  const __m512i expm = _mm512_set1_epi32(0x7f800000), epmin = _mm512_set1_epi32(TC_FIELD(25)),
                one = _mm512_set1_epi32(TC_FIELD(1)), sev = _mm512_set1_epi32(TC_FIELD(7)),
                upk = _mm512_set1_epi32(TC_FIELD(278)), sEk = _mm512_set1_epi32(TC_FIELD(254)),
                zero = _mm512_setzero_si512();
  tc_products(buf, mxe, pa, pae, lda, pb, pbe, ldb, n);
  __mmask16 bad = 0;
#pragma GCC unroll 8
  for (int r = 0; r < TC_MR; r++)
    for (int v = 0; v < 2; v++) {
      const __m512i ep = _mm512_castps_si512(mxe[r][v]), ab = _mm512_castps_si512(ac[r][v]),
                    ae = _mm512_and_si512(ab, expm);
      /* e_p present and below -102; a non-finite accumulator */
      bad |=
          _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(ep, ep), ep, epmin) | _mm512_cmpeq_epi32_mask(ae, expm);
      /* fields (<< 23) of e(acc) = max(floor(log2 |acc|), -126) for a nonzero accumulator, then of E */
      const __m512i ea =
          _mm512_mask_max_epu32(ae, _mm512_test_epi32_mask(ab, _mm512_set1_epi32(0x7fffffff)), ae, one);
      const __m512i E = _mm512_max_epu32(_mm512_max_epu32(ep, ea), one), epc = _mm512_max_epu32(ep, epmin);
      bad |= _mm512_cmpeq_epi32_mask(E, _mm512_set1_epi32(TC_FIELD(254)));
      const __m512 up = _mm512_castsi512_ps(_mm512_sub_epi32(upk, epc)); /* 2^(24-e_p) */
      __m512i S = zero;
#pragma GCC unroll 8
      for (size_t k = 0; k < n; k++)
        S = _mm512_add_epi32(S, _mm512_cvttps_epi32(_mm512_mul_ps(buf[k][r][v], up)));
      const __m512i d = _mm512_srai_epi32(_mm512_sub_epi32(_mm512_sub_epi32(E, epc), sev), 23);
      const __m512i Sv = _mm512_srav_epi32(S, _mm512_max_epi32(d, zero));
      const __m512 sE = _mm512_castsi512_ps(_mm512_sub_epi32(sEk, E)), eE = _mm512_castsi512_ps(E),
                   sS = _mm512_castsi512_ps(_mm512_max_epi32(epc, _mm512_sub_epi32(E, sev)));
      const __m256 lo = cd_stage2(_mm512_castps512_ps256(ac[r][v]), _mm512_castps512_ps256(sE),
                                  _mm512_castps512_ps256(eE), _mm512_castsi512_si256(Sv), _mm512_castps512_ps256(sS));
      const __m256 hi =
          cd_stage2(_mm512_extractf32x8_ps(ac[r][v], 1), _mm512_extractf32x8_ps(sE, 1), _mm512_extractf32x8_ps(eE, 1),
                    _mm512_extracti32x8_epi32(Sv, 1), _mm512_extractf32x8_ps(sS, 1));
      ac[r][v] = cd_join(lo, hi);
    }
  return bad;
}

TC_AVX512 static int cd_kern(float *acc, size_t ldc, const float *pa, const uint32_t *pae, size_t lda,
                             const float *pb, const uint16_t *pbe, size_t ldb, size_t kc, int bk, int fb, int ob) {
  (void)bk, (void)fb, (void)ob; /* groups of 8 at 24 and 31 bits (aa_gemm_check admits no other cdna3 row) */
  __m512 ac[TC_MR][2];
  tc_tile_io(ac, acc, ldc, 0);
  __mmask16 bad = 0;
  size_t k0 = 0;
  for (; k0 + CD_G <= kc; k0 += CD_G)
    bad |= cd_block(ac, pa + k0, pae + k0, lda, pb + k0 * ldb, pbe + k0 * ldb, ldb, CD_G);
  if (k0 < kc) bad |= cd_block(ac, pa + k0, pae + k0, lda, pb + k0 * ldb, pbe + k0 * ldb, ldb, kc - k0);
  tc_tile_io(ac, acc, ldc, 1);
  return bad != 0;
}

/* The kernel of a row: by its alignment rule and its shape (block length, wide sums, narrow result). */
static tc_kern_fn tc_kernel_of(const aa_accum_info_t *m) {
  static const struct {
    int bk, wide, narrow;
    tc_kern_fn fn;
  } shapes[] = {{4, 0, 0, tc_kern_4},
                {8, 0, 0, tc_kern_8},
                {16, 1, 0, tc_kern_16w},
                {32, 0, 1, tc_kern_32n},
                {32, 1, 0, tc_kern_32w}};
  if (m->sum == AA_SUM_BLOCK2) return cd_kern;
  const int wide = tc_wide(m->block_k, m->frac_bits), narrow = m->out_bits < 23;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    if (shapes[i].bk == m->block_k && shapes[i].wide == wide && shapes[i].narrow == narrow) return shapes[i].fn;
  return tc_kern_any;
}

int aa_gemm_tc_fast32_available(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw");
}

/* d[j * ldd + i] = (float)s[i * lds + j] for i, j < 8: rows of 8 doubles
   transposed in registers (pairs, then 128-bit lanes twice), each column
   rounded to fp32 (RNE, as the scalar conversion). */
TC_AVX512 static void tc_t8x8(float *d, size_t ldd, const double *s, size_t lds) {
  __m512d x[8], y[8];
  for (int i = 0; i < 8; i++)
    x[i] = _mm512_loadu_pd(s + (size_t)i * lds);
  for (int i = 0; i < 8; i += 2) {
    y[i] = _mm512_unpacklo_pd(x[i], x[i + 1]);
    y[i + 1] = _mm512_unpackhi_pd(x[i], x[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) { /* x[h + m] holds columns m (+4) of rows h..h+3 */
    x[h] = _mm512_shuffle_f64x2(y[h], y[h + 2], 0x88);
    x[h + 1] = _mm512_shuffle_f64x2(y[h + 1], y[h + 3], 0x88);
    x[h + 2] = _mm512_shuffle_f64x2(y[h], y[h + 2], 0xdd);
    x[h + 3] = _mm512_shuffle_f64x2(y[h + 1], y[h + 3], 0xdd);
  }
  for (int m = 0; m < 4; m++) {
    _mm256_storeu_ps(d + (size_t)m * ldd, _mm512_cvtpd_ps(_mm512_shuffle_f64x2(x[m], x[m + 4], 0x88)));
    _mm256_storeu_ps(d + (size_t)(m + 4) * ldd, _mm512_cvtpd_ps(_mm512_shuffle_f64x2(x[m], x[m + 4], 0xdd)));
  }
}

/* st |= mine: the statistics of two parts of one operand joined. */
static void tc_stat_join(tc_stat_t *st, const tc_stat_t *mine) {
  st->ok &= mine->ok;
  st->orm |= mine->orm;
  if (mine->any) {
    if (!st->any || mine->emin < st->emin) st->emin = mine->emin;
    if (!st->any || mine->emax > st->emax) st->emax = mine->emax;
    st->any = 1;
  }
}

/* dst[r * ldd + c] = (float)src(r, c) for r < rows, c < cols, where src(r,
   c) is S[r * lds + c] or, with trans, S[c * lds + r]; rows up to rp are
   zero; dste gets the exponent words (tc_ew_a). Transposed in 8 x 8
   blocks: eight lines each way stay in L1 even when both strides are
   multiples of 4 KiB (all in one cache set). */
TC_AVX512 static void tc_pack(float *dst, uint32_t *dste, size_t ldd, const double *S, size_t lds, int trans,
                              size_t rows, size_t rp, size_t cols, tc_stat_t *st) {
  const size_t nb = (rp + 7) / 8; /* bands of 8 rows, one task each */
  tc_stat_t all = *st;
  AA_OMP(omp parallel if (rp * ldd > ((size_t)1 << 20))) {
    tc_stat_t mine = {1, 0, 0, 0, 0};
    AA_OMP(omp for schedule(static))
    for (size_t bi = 0; bi < nb; bi++) {
      const size_t r0 = bi * 8, r1 = rp - r0 < 8 ? rp : r0 + 8, rv = rows < r1 ? rows : r1;
      if (trans)
        for (size_t c0 = 0; c0 < cols; c0 += 8) {
          const size_t c1 = cols - c0 < 8 ? cols : c0 + 8;
          if (c1 - c0 == 8 && rv - r0 == 8) {
            tc_t8x8(dst + r0 * ldd + c0, ldd, S + c0 * lds + r0, lds);
            continue;
          }
          for (size_t c = c0; c < c1; c++)
            for (size_t r = r0; r < rv; r++)
              dst[r * ldd + c] = (float)S[c * lds + r];
        }
      else
        for (size_t r = r0; r < rv; r++) {
          float *restrict dr = dst + r * ldd;
          const double *restrict sr = S + r * lds;
          AA_OMP(omp simd)
          for (size_t c = 0; c < cols; c++)
            dr[c] = (float)sr[c];
        }
      for (size_t r = r0; r < r1; r++)
        for (size_t c = r < rows ? cols : 0; c < ldd; c++)
          dst[r * ldd + c] = 0.0f;
      tc_stat_row(&mine, dst + r0 * ldd, (r1 - r0) * ldd);
      tc_enc_a(dste + r0 * ldd, dst + r0 * ldd, (r1 - r0) * ldd); /* the zero padding takes no part */
    }
    AA_OMP(omp critical(tc_pack_stat))
    tc_stat_join(&all, &mine);
  }
  *st = all;
}

/* op(B) (K x N; S[k * lds + j], or with trans S[j * lds + k]) as fp32 in
   strips of NR columns, dst[(s K + k) NR + c] = op(B)[k][s NR + c], zero
   beyond column N, so that a tile reads its op(B) as one stream (rows of a
   K x np matrix lie np floats apart, often a multiple of 4 KiB: a strip of
   them would fill a few L1 sets); dste gets the exponent words (tc_enc_b). Written
   straight from S, in tasks of one strip and 8 values of k. */
TC_AVX512 static void tc_pack_strips(float *dst, uint16_t *dste, const double *S, size_t lds, int trans, size_t K,
                                     size_t N, size_t np, tc_stat_t *st) {
  const size_t nkb = (K + 7) / 8, ntask = np / TC_NR * nkb;
  tc_stat_t all = *st;
  AA_OMP(omp parallel if (np * K > ((size_t)1 << 20))) {
    tc_stat_t mine = {1, 0, 0, 0, 0};
    AA_OMP(omp for schedule(static))
    for (size_t t = 0; t < ntask; t++) {
      const size_t j0 = t / nkb * TC_NR, k0 = t % nkb * 8, k1 = K - k0 < 8 ? K : k0 + 8,
                   w = N - j0 < TC_NR ? N - j0 : TC_NR;
      float *d = dst + (j0 * K + k0 * TC_NR); /* strip j0 / NR starts at j0 K */
      for (size_t c0 = 0; trans && c0 < w; c0 += 8) {
        if (k1 - k0 == 8 && w - c0 >= 8) { /* d[k NR + c0 + i] = S[(j0 + c0 + i) lds + k0 + k] */
          tc_t8x8(d + c0, TC_NR, S + (j0 + c0) * lds + k0, lds);
          continue;
        }
        for (size_t k = k0; k < k1; k++)
          for (size_t c = c0; c < w && c < c0 + 8; c++)
            d[(k - k0) * TC_NR + c] = (float)S[(j0 + c) * lds + k];
      }
      for (size_t k = k0; !trans && k < k1; k++) {
        float *restrict dr = d + (k - k0) * TC_NR;
        const double *restrict sr = S + k * lds + j0;
        AA_OMP(omp simd)
        for (size_t c = 0; c < w; c++)
          dr[c] = (float)sr[c];
      }
      for (size_t k = k0; k < k1; k++)
        for (size_t c = w; c < TC_NR; c++)
          d[(k - k0) * TC_NR + c] = 0.0f;
      tc_stat_row(&mine, d, (k1 - k0) * TC_NR);
      tc_enc_b(dste + (d - dst), d, k1 - k0);
    }
    AA_OMP(omp critical(tc_pack_stat))
    tc_stat_join(&all, &mine);
  }
  *st = all;
}

#define TC_MB 64  /* rows of a task (a multiple of TC_MR) */
#define TC_KC 256 /* k values per pass over a column block, at most (tc_rows makes it a multiple of bk) */
#define TC_NC 256 /* columns of a block (a multiple of TC_NR) */

typedef struct {
  double *C;
  size_t ldc, M, N, K, np;
  const float *pa;     /* op(A) rows (M x K) */
  const float *tb;     /* op(B) in strips of NR columns, each K x NR (tc_pack_strips) */
  const uint32_t *pae; /* the exponent words of pa (tc_ew_a) and tb (tc_enc_b) */
  const uint16_t *tbe;
  int accumulate, bk, fb, ob, cdna3;
  tc_kern_fn kern;
} tc_job_t;

/* A tile of cdna3 by the literal groups (aa_gemm_cdna3_group) from the
   packed operands, where some lane left the window. */
static void cd_tile_ref(const tc_job_t *jb, size_t i0, size_t rows, size_t j0, size_t cols) {
  float b[CD_G];
  for (size_t i = i0; i < i0 + rows; i++)
    for (size_t j = j0; j < j0 + cols; j++) {
      double *c = jb->C + i * jb->ldc + j;
      float acc = jb->accumulate ? (float)*c : 0.0f;
      for (size_t k0 = 0; k0 < jb->K; k0 += CD_G) {
        const size_t n = jb->K - k0 < CD_G ? jb->K - k0 : CD_G;
        for (size_t k = 0; k < n; k++)
          b[k] = jb->tb[j0 * jb->K + (k0 + k) * TC_NR + j - j0]; /* strip j0 / NR starts at j0 K */
        acc = aa_gemm_cdna3_group(acc, jb->pa + i * jb->K + k0, b, n);
      }
      *c = acc;
    }
}

/* Rows [i0, i0 + rows) of C: accumulators in acc (TC_MB x np fp32), the
   tiles that left the window flagged in bad and redone by the binary64
   steps from the untouched C. */
TC_AVX512 static void tc_rows(const tc_job_t *jb, size_t i0, size_t rows, float *acc, unsigned char *bad) {
  const size_t np = jb->np, N = jb->N, K = jb->K, ntc = np / TC_NR, tiles = (rows + TC_MR - 1) / TC_MR;
  for (size_t r = 0; r < tiles * TC_MR; r++) {
    float *restrict ar = acc + r * np;
    size_t j = 0;
    if (jb->accumulate && r < rows) {
      const double *restrict cr = jb->C + (i0 + r) * jb->ldc;
      AA_OMP(omp simd)
      for (size_t x = 0; x < N; x++)
        ar[x] = (float)cr[x];
      j = N;
    }
    for (; j < np; j++)
      ar[j] = 0.0f;
  }
  memset(bad, 0, tiles * ntc);
  const size_t kp = TC_KC / (size_t)jb->bk * (size_t)jb->bk; /* a pass ends on a block boundary */
  for (size_t k0 = 0; k0 < K; k0 += kp) {
    const size_t kc = K - k0 < kp ? K - k0 : kp;
    for (size_t jj = 0; jj < np; jj += TC_NR) /* a strip of op(B) (kc x NR) stays in L1 across the row tiles */
      for (size_t t = 0; t < tiles; t++) {
        unsigned char *b = bad + t * ntc + jj / TC_NR;
        if (*b == 0) {
          const size_t oa = (i0 + t * TC_MR) * K + k0, ob = (jj / TC_NR * K + k0) * TC_NR;
          *b = (unsigned char)jb->kern(acc + t * TC_MR * np + jj, np, jb->pa + oa, jb->pae + oa, K, jb->tb + ob,
                                       jb->tbe + ob, TC_NR, kc, jb->bk, jb->fb, jb->ob);
        }
      }
  }
  for (size_t t = 0; t < tiles; t++)
    for (size_t c = 0; c < ntc; c++) {
      const size_t r0 = t * TC_MR, nr = rows - r0 < TC_MR ? rows - r0 : TC_MR, j0 = c * TC_NR,
                   nc = N - j0 < TC_NR ? N - j0 : TC_NR;
      if (j0 >= N) continue;
      if (bad[t * ntc + c] && jb->cdna3) {
        cd_tile_ref(jb, i0 + r0, nr, j0, nc);
        continue;
      }
      if (bad[t * ntc + c]) {
        aa_gemm_tc_tile_f64(jb->C + j0, jb->ldc, jb->pa, jb->tb + j0 * K, TC_NR, i0 + r0, nr, 0, nc, K, jb->bk,
                            jb->fb, jb->ob, jb->accumulate);
        continue;
      }
      for (size_t r = r0; r < r0 + nr; r++) {
        double *restrict cr = jb->C + (i0 + r) * jb->ldc + j0;
        const float *restrict ar = acc + r * np + j0;
        AA_OMP(omp simd)
        for (size_t j = 0; j < nc; j++)
          cr[j] = ar[j];
      }
    }
}

/* The tiles of C (the packing done), each thread taking blocks of TC_MB rows. */
TC_AVX512 static int tc_run(const tc_job_t *jb) {
  const size_t nblk = (jb->M + TC_MB - 1) / TC_MB, np = jb->np;
  int st = AA_OK;
  AA_OMP(omp parallel if (nblk > 1)) {
    float *acc = malloc(TC_MB * np * sizeof *acc);
    unsigned char *bad = malloc(TC_MB / TC_MR * (np / TC_NR));
    if (acc == NULL || bad == NULL) {
      AA_OMP(omp atomic write)
      st = AA_ENOMEM;
    }
    AA_OMP(omp for schedule(dynamic, 1))
    for (size_t bi = 0; bi < nblk; bi++)
      if (acc != NULL && bad != NULL)
        tc_rows(jb, bi * TC_MB, jb->M - bi * TC_MB < TC_MB ? jb->M - bi * TC_MB : TC_MB, acc, bad);
    free(acc);
    free(bad);
  }
  return st;
}

/* Compiled for AVX-512 throughout, so that the packing, the operand checks
   and the copies vectorise too. */
TC_AVX512 int aa_gemm_tc_fast32(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B,
                                size_t ldb, int transB, size_t M, size_t N, size_t K, int accumulate,
                                const aa_accum_info_t *m) {
  tc_job_t jb = {.C = C,
                 .ldc = ldc,
                 .M = M,
                 .N = N,
                 .K = K,
                 .np = (N + TC_NR - 1) / TC_NR * TC_NR,
                 .accumulate = accumulate,
                 .bk = m->block_k,
                 .fb = m->frac_bits,
                 .ob = m->out_bits,
                 .cdna3 = m->sum == AA_SUM_BLOCK2,
                 .kern = tc_kernel_of(m)};
  const size_t mp = (M + TC_MR - 1) / TC_MR * TC_MR, np = jb.np;
  size_t na, nb;
  if (aa_size_mul(&na, mp, K) != AA_OK || aa_size_mul(&nb, np, K) != AA_OK || na + nb < na) return AA_ENOMEM;
  /* op(A) and op(B) in one block, their exponent fields in another */
  float *pa = malloc((na + nb) * sizeof *pa), *tb = pa + na;
  uint32_t *te = malloc(na * sizeof *te);
  uint16_t *tbe = malloc(nb * sizeof *tbe);
  int st = pa != NULL && te != NULL && tbe != NULL ? AA_OK : AA_ENOMEM;
  tc_stat_t sa = {1, 0, 0, 0, 0}, sb = {1, 0, 0, 0, 0};
  if (st == AA_OK) {
    tc_pack(pa, te, K, A, lda, transA, M, mp, K, &sa);
    tc_pack_strips(tb, tbe, B, ldb, transB, K, N, np, &sb);
  }
  const int exact = st == AA_OK && jb.kern != NULL && sa.ok && sb.ok && tc_stat_bits(&sa) + tc_stat_bits(&sb) <= 24 &&
                    (!sa.any || !sb.any || (sa.emin + sb.emin >= -126 && sa.emax + sb.emax <= 126));
  jb.pa = pa, jb.tb = tb, jb.pae = te, jb.tbe = tbe;
  if (st == AA_OK && exact)
    st = tc_run(&jb);
  else if (st == AA_OK && jb.cdna3)
    aa_gemm_ref_cdna3(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
  else if (st == AA_OK) { /* the binary64 path on the same packing, strip by strip (NR is a multiple of 8) */
    AA_OMP(omp parallel for schedule(static))
    for (size_t i = 0; i < M; i++)
      for (size_t j0 = 0; j0 < N; j0 += TC_NR)
        aa_gemm_tc_tile_f64(C + j0, ldc, pa, tb + j0 * K, TC_NR, i, 1, 0, N - j0 < TC_NR ? N - j0 : TC_NR, K, jb.bk,
                            jb.fb, jb.ob, accumulate);
  }
  free(pa);
  free(te);
  free(tbe);
  return st;
}

#else /* no x86-64 AVX-512 in this build: the binary64 path only */

int aa_gemm_tc_fast32_available(void) {
  return 0;
}

int aa_gemm_tc_fast32(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                      int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m) {
  return aa_gemm_tc_packed_f64(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, m);
}
#endif
