/* attnacc: tensor-core block accumulation models (REFERENCES section 6): exact products, blocks of k aligned to the
 * largest exponent, truncated to F fractional bits, RZ to fp32. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm-impl.h"
#include "tc-impl.h"

int aa_accum_tc_params(aa_accum_t model, int *block_k, int *frac_bits) {
  int k, f;
  switch (model) {
  case AA_ACC_TC_K16_F25:
    k = 16, f = 25;
    break; /* H100 / H200 / B200 (REFERENCES section 6) */
  case AA_ACC_TC_K8_F24:
    k = 8, f = 24;
    break; /* A100 / Ada */
  case AA_ACC_TC_K4_F23:
    k = 4, f = 23;
    break; /* V100 (REFERENCES section 11) */
  case AA_ACC_TC_FP8_K32_F13:
    k = 32, f = 13;
    break; /* H100 / H200 FP8 wgmma */
  case AA_ACC_TC_FP8_K32_F25:
    k = 32, f = 25;
    break; /* B200 FP8 */
  case AA_ACC_CDNA3_K8_F24:
    k = 8, f = 24;
    break; /* MI300 */
  default:
    return AA_ENOTFOUND;
  }
  if (block_k != NULL) *block_k = k;
  if (frac_bits != NULL) *frac_bits = f;
  return AA_OK;
}

/* Round a double toward zero to binary32 (subnormals kept, overflow to
   +-FLT_MAX as IEEE RZ prescribes): the RNE conversion gives one of the two
   binary32 neighbours of x; when it lies further from zero than x, the
   neighbour towards zero is the RZ result. */
static float rz32(double x) {
  float f = (float)x;
  if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
  return f;
}

static double pow2(int e) {
  union {
    uint64_t u;
    double d;
  } v = {(uint64_t)(e + 1023) << 52};
  return v.d;
}

/* Fractional bits of the result's significand: 13 for the e8m13 result of
   Hopper's FP8 wgmma, 23 (fp32) otherwise. */
int aa_gemm_tc_out_bits(aa_accum_t model) {
  return model == AA_ACC_TC_FP8_K32_F13 ? 13 : 23;
}

/* Round a nonzero double toward zero to of fractional bits, fp32's
   exponent range (subnormals in multiples of 2^(-126-of)), overflow to the
   largest finite value: exact steps in binary64. */
static float rz_narrow(double x, int of) {
  if (of == 23) return rz32(x);
  int e;
  frexp(x, &e);
  int q = (e - 1 < -126 ? -126 : e - 1) - of;
  double t = ldexp(trunc(ldexp(fabs(x), -q)), q), mx = ldexp(2.0 - ldexp(1.0, -of), 127);
  return (float)copysign(t > mx ? mx : t, x);
}

float aa_gemm_tc_block(const double *t, size_t n, int frac_bits) {
  return aa_gemm_tc_block_out(t, n, frac_bits, 23);
}

float aa_gemm_tc_block_out(const double *t, size_t n, int frac_bits, int out_bits) {
  double mx = 0;
  int nonfinite = 0;
  for (size_t i = 0; i < n; i++) {
    double a = fabs(t[i]);
    if (!(a <= DBL_MAX))
      nonfinite = 1;
    else if (a > mx)
      mx = a;
  }
  if (nonfinite) {
    /* Inf/NaN: the IEEE sum of the special terms (NaN for Inf - Inf, an
       Inf product, or a NaN); finite terms cannot change it. */
    double s = 0;
    for (size_t i = 0; i < n; i++)
      if (!(fabs(t[i]) <= DBL_MAX)) s += t[i];
    return (float)s;
  }
  if (mx == 0) return 0.0f; /* every term is a zero of either sign: +0 */
  /* E = floor(log2(max |t_i|)) over the nonzero terms (a zero accumulator
     takes no part). frexp gives mx = m 2^e with m in [0.5, 1), so E = e - 1.
     Every term scaled by 2^(F-E) is below 2^(F+1) in magnitude, so the
     conversion to int64 truncates it toward zero exactly (the scaling is a
     power of two and products of fp32 values are exact in binary64, far
     from its underflow: |t| >= 2^-298, 2^(F-E) >= 2^-230). */
  int e;
  frexp(mx, &e);
  int shift = frac_bits - (e - 1);
  /* shift lies in [-231, 323] (E from -298 to 255, F <= 25), so 2^shift
     and 2^-shift are normal binary64 numbers, built from their bits. */
  double up = pow2(shift), down = pow2(-shift);
  int64_t s = 0;
  for (size_t i = 0; i < n; i++)
    s += (int64_t)(t[i] * up);
  /* |s| < n 2^(F+1) < 2^53: exact as a double, and so is the scaling back. */
  if (s == 0) return 0.0f;
  return rz_narrow((double)s * down, out_bits);
}

/* The definition of gemm.h, literally: per output, blocks of k consecutive
   k-indices, the running fp32 accumulator entering each block as its first
   term. */
void aa_gemm_ref_tc(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                    int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  int bk = 16, fb = 25, ob = aa_gemm_tc_out_bits(model);
  aa_accum_tc_params(model, &bk, &fb);
  double t[33];
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      float acc = accumulate ? (float)C[i * ldc + j] : 0.0f;
      for (size_t k0 = 0; k0 < K; k0 += (size_t)bk) {
        size_t nb = K - k0 < (size_t)bk ? K - k0 : (size_t)bk;
        t[0] = acc;
        for (size_t k = 0; k < nb; k++)
          t[1 + k] = (double)(float)aa_gemm_opa(A, lda, transA, i, k0 + k) *
                     (double)(float)aa_gemm_opb(B, ldb, transB, k0 + k, j);
        acc = aa_gemm_tc_block_out(t, nb + 1, fb, ob);
      }
      C[i * ldc + j] = acc;
    }
}

/* Same arithmetic, vectorised across TC_NB adjacent output columns of one
   row: operands packed once as fp32 (op(A) rows k-contiguous, op(B) as
   K x ldb rows j-contiguous, zero-padded), each column keeping its own
   accumulator and block exponent. Every step is exact or the same RZ as
   aa_gemm_tc_block (the block exponent is read from the bits of max |t|:
   products of fp32 values and fp32 accumulators are normal binary64
   numbers), so the bits equal the reference loop's. Returns 1, leaving c
   alone, when some block of a live column holds a non-finite term: the
   caller then redoes the segment with aa_gemm_tc_block. */
#define TC_NB 8
typedef double tc_v8d __attribute__((vector_size(64)));
typedef float tc_v8f __attribute__((vector_size(32)));
typedef int64_t tc_v8l __attribute__((vector_size(64)));
typedef int32_t tc_v8i __attribute__((vector_size(32)));

/* |x| lane-wise (a macro: vectors passed by value trip -Wpsabi in the default clone) */
#define tc_fabs(x) ((tc_v8d)((tc_v8l)(x) & ((tc_v8l){0} + INT64_MAX)))

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
static int
tc_row(double *c, const float *ar, const float *pb, size_t ldb, size_t j0, size_t nb, size_t K, int bk, int fb,
       int accumulate) {
  float a0[TC_NB];
  for (size_t x = 0; x < TC_NB; x++)
    a0[x] = accumulate && x < nb ? (float)c[x] : 0.0f;
  tc_v8f acc;
  memcpy(&acc, a0, sizeof acc);
  tc_v8d pr[32]; /* the block's exact products (bk <= 32) */
  for (size_t k0 = 0; k0 < K; k0 += (size_t)bk) {
    size_t n = K - k0 < (size_t)bk ? K - k0 : (size_t)bk;
    tc_v8d accd = __builtin_convertvector(acc, tc_v8d), mx = tc_fabs(accd);
    tc_v8l nan = accd != accd;
    for (size_t k = 0; k < n; k++) {
      tc_v8f bf;
      memcpy(&bf, pb + (k0 + k) * ldb + j0, sizeof bf);
      pr[k] = (double)ar[k0 + k] * __builtin_convertvector(bf, tc_v8d);
      tc_v8d p = tc_fabs(pr[k]);
      tc_v8l gt = p > mx;
      nan |= p != p; /* Inf * 0 */
      mx = (tc_v8d)(((tc_v8l)p & gt) | ((tc_v8l)mx & ~gt));
    }
    tc_v8l eb = (tc_v8l)mx >> 52;    /* biased exponent of max |t| (sign bit clear) */
    tc_v8l inf = (eb == 2047) | nan; /* an Inf or NaN term */
    for (size_t x = 0; x < nb; x++)
      if (inf[x]) return 1;
    /* A lane of zeros only (eb = 0) gets scale 1: its sum is the integer 0,
       giving +0 as the definition says. */
    tc_v8l sh = ((tc_v8l){0} + fb - (eb - 1023)) & ~((eb == 0) | inf);
    tc_v8d up = (tc_v8d)((sh + 1023) << 52), down = (tc_v8d)((1023 - sh) << 52);
    tc_v8l s = __builtin_convertvector(accd * up, tc_v8l);
    for (size_t k = 0; k < n; k++)
      s += __builtin_convertvector(pr[k] * up, tc_v8l);
    tc_v8d v = __builtin_convertvector(s, tc_v8d) * down;
    tc_v8f f = __builtin_convertvector(v, tc_v8f);
    tc_v8l away = tc_fabs(__builtin_convertvector(f, tc_v8d)) > tc_fabs(v);
    /* RZ: one step back toward zero where the RNE conversion went away from it (Inf -> FLT_MAX) */
    acc = (tc_v8f)((tc_v8i)f + __builtin_convertvector(away, tc_v8i));
  }
  for (size_t x = 0; x < nb; x++)
    c[x] = acc[x];
  return 0;
}

/* The tile of rows [i0, i0 + rows) and columns [j0, j0 + cols) of C from
   the packed fp32 operands (pa: M x K rows, pb: K x lp, lp a multiple of
   TC_NB), by tc_row and, where it meets a non-finite term, the reference
   steps. */
static void tc_tile_f64(double *C, size_t ldc, const float *pa, const float *pb, size_t lp, size_t i0, size_t rows,
                        size_t j0, size_t cols, size_t K, int bk, int fb, int accumulate) {
  for (size_t i = i0; i < i0 + rows; i++) {
    const float *ar = pa + i * K;
    for (size_t jj = j0; jj < j0 + cols; jj += TC_NB) {
      size_t w = j0 + cols - jj < TC_NB ? j0 + cols - jj : TC_NB;
      double *c = C + i * ldc + jj;
      if (tc_row(c, ar, pb, lp, jj, w, K, bk, fb, accumulate) == 0) continue;
      for (size_t x = 0; x < w; x++) { /* non-finite terms: the reference steps */
        double t[33];
        float acc = accumulate ? (float)c[x] : 0.0f;
        for (size_t k0 = 0; k0 < K; k0 += (size_t)bk) {
          size_t n = K - k0 < (size_t)bk ? K - k0 : (size_t)bk;
          t[0] = acc;
          for (size_t k = 0; k < n; k++)
            t[1 + k] = (double)ar[k0 + k] * (double)pb[(k0 + k) * lp + jj + x];
          acc = aa_gemm_tc_block(t, n + 1, fb);
        }
        c[x] = acc;
      }
    }
  }
}

int aa_gemm_tc_packed_f64(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  int bk = 16, fb = 25;
  aa_accum_tc_params(model, &bk, &fb);
  size_t lp = (N + TC_NB - 1) / TC_NB * TC_NB, na, nb;
  if (aa_size_mul(&na, M, K) != AA_OK || aa_size_mul(&nb, lp, K) != AA_OK) return AA_ENOMEM;
  float *pa = malloc(na * sizeof *pa), *pb = calloc(nb, sizeof *pb);
  if (pa == NULL || pb == NULL) {
    free(pa);
    free(pb);
    return AA_ENOMEM;
  }
  for (size_t i = 0; i < M; i++)
    for (size_t k = 0; k < K; k++)
      pa[i * K + k] = (float)aa_gemm_opa(A, lda, transA, i, k);
  for (size_t k = 0; k < K; k++)
    for (size_t j = 0; j < N; j++)
      pb[k * lp + j] = (float)aa_gemm_opb(B, ldb, transB, k, j);
  AA_OMP(omp parallel for schedule(static))
  for (size_t i = 0; i < M; i++)
    tc_tile_f64(C, ldc, pa, pb, lp, i, 1, 0, N, K, bk, fb, accumulate);
  free(pa);
  free(pb);
  return AA_OK;
}

/* ---- fp32 fast path: products exact in fp32, integer sums ----

   When every product a_k b_k is exactly representable as a normal fp32
   number or zero (checked while packing: no Inf, NaN or subnormal operand,
   significand lengths adding up to at most 24 bits, exponents that keep
   every nonzero product in [2^-126, 2^128)), a block needs no binary64:
     pass 1  p = a b in fp32 (exact), kept; mx = max |t| over the block's
             terms (the accumulator first), so E = the exponent field of mx
             (mx is an exact term, a normal number or 0);
     pass 2  each term times 2^(F-E) (exact: a power of two; a term that
             underflows there is below 1, as its exact value is, and
             truncates to 0 like it), converted to int32 by truncation
             toward zero (vcvttps2dq: exactly t' / 2^(E-F)), summed in int32
             (|sum| < (bk+1) 2^(F+1) <= 2^31 is required of the model);
     result  the sum converted to fp32 rounding toward zero (24 significant
             bits), times 2^(E-F): exact because the lanes' E is kept in
             [F-125, 120], where every nonzero result is normal and finite,
             so this is RZ_fp32 of the exact sum. A zero sum gives +0.
   The window on E also makes products that underflow harmless: none do
   (checked), and quanta 2^(E-F) stay above 2^-126. A lane whose E leaves
   the window (a huge or tiny accumulator, an Inf or NaN one) makes its
   tile return 1; the caller recomputes that tile from the untouched C by
   the binary64 path above, so the bits never depend on the path. */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TC_X86 1
#define TC_AVX512 __attribute__((target("avx512f,avx512dq")))

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

/* significant bits of the longest significand seen (1 .. 24) */
static int tc_stat_bits(const tc_stat_t *st) {
  return 24 - __builtin_ctz(st->orm | 0x800000u);
}

#define T5_MR 4  /* rows of a tile */
#define T5_NR 32 /* columns of a tile: two zmm of fp32 */
#define T_EBMAX (120 + 127)

/* One MR x NR tile over kc values of k (a multiple of bk unless it ends K):
   acc (row stride ldc) holds the fp32 accumulators on entry and exit, pa
   MR rows of op(A) (stride lda), pb kc rows of op(B) (stride ldb). Returns
   1, acc then undefined, when a lane's E leaves the window. */
TC_AVX512 static int tc_kern_avx512(float *acc, size_t ldc, const float *pa, size_t lda, const float *pb, size_t ldb,
                                    size_t kc, int bk, int fb) {
  __m512 ac[T5_MR][2], buf[32][T5_MR][2];
  const __m512i absm = _mm512_set1_epi32(0x7fffffff), ebmin = _mm512_set1_epi32(fb + 2),
                span = _mm512_set1_epi32(T_EBMAX - (fb + 2)), upk = _mm512_set1_epi32(fb + 254),
                dnk = _mm512_set1_epi32(254 << 23), zero = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int r = 0; r < T5_MR; r++) {
    ac[r][0] = _mm512_loadu_ps(acc + (size_t)r * ldc);
    ac[r][1] = _mm512_loadu_ps(acc + (size_t)r * ldc + 16);
  }
  for (size_t k0 = 0; k0 < kc; k0 += (size_t)bk) {
    const size_t n = kc - k0 < (size_t)bk ? kc - k0 : (size_t)bk;
    __m512 mx[T5_MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < T5_MR; r++)
      for (int v = 0; v < 2; v++)
        mx[r][v] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(ac[r][v]), absm));
#pragma GCC unroll 4
    for (size_t k = 0; k < n; k++) {
      const float *b = pb + (k0 + k) * ldb;
      __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
      for (int r = 0; r < T5_MR; r++) {
        __m512 a = _mm512_set1_ps(pa[(size_t)r * lda + k0 + k]);
        __m512 p0 = _mm512_mul_ps(a, b0), p1 = _mm512_mul_ps(a, b1);
        buf[k][r][0] = p0;
        buf[k][r][1] = p1;
        mx[r][0] = _mm512_range_ps(mx[r][0], p0, 0x0b); /* max |.|, sign cleared */
        mx[r][1] = _mm512_range_ps(mx[r][1], p1, 0x0b);
      }
    }
    __m512 up[T5_MR][2];
    __m512i s[T5_MR][2];
    __mmask16 bad = 0;
#pragma GCC unroll 8
    for (int r = 0; r < T5_MR; r++)
      for (int v = 0; v < 2; v++) {
        __m512i eb = _mm512_srli_epi32(_mm512_castps_si512(mx[r][v]), 23);
        /* out of the window, unless every term is zero (eb = 0: the sum is 0 at any scale) */
        bad |= _mm512_mask_cmpgt_epu32_mask(_mm512_cmpneq_epi32_mask(eb, zero), _mm512_sub_epi32(eb, ebmin), span);
        eb = _mm512_max_epi32(eb, ebmin);
        up[r][v] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(upk, eb), 23)); /* 2^(F-E) */
        s[r][v] = _mm512_cvttps_epi32(_mm512_mul_ps(ac[r][v], up[r][v]));
      }
    if (bad) return 1;
#pragma GCC unroll 4
    for (size_t k = 0; k < n; k++)
#pragma GCC unroll 8
      for (int r = 0; r < T5_MR; r++)
        for (int v = 0; v < 2; v++)
          s[r][v] = _mm512_add_epi32(s[r][v], _mm512_cvttps_epi32(_mm512_mul_ps(buf[k][r][v], up[r][v])));
#pragma GCC unroll 8
    for (int r = 0; r < T5_MR; r++)
      for (int v = 0; v < 2; v++) {
        __m512 dn = _mm512_castsi512_ps(_mm512_sub_epi32(dnk, _mm512_castps_si512(up[r][v]))); /* 2^(E-F) */
        ac[r][v] = _mm512_mul_ps(_mm512_cvt_roundepi32_ps(s[r][v], _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), dn);
      }
  }
#pragma GCC unroll 8
  for (int r = 0; r < T5_MR; r++) {
    _mm512_storeu_ps(acc + (size_t)r * ldc, ac[r][0]);
    _mm512_storeu_ps(acc + (size_t)r * ldc + 16, ac[r][1]);
  }
  return 0;
}

static int tc_have_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}

/* dst[r * ldd + c] = (float)src(r, c) for r < rows, c < cols, where src(r,
   c) is S[r * lds + c] or, with trans, S[c * lds + r]; rows up to rp are
   zero. Transposed in 8 x 8 blocks: eight lines each way stay in L1 even
   when both strides are multiples of 4 KiB (all in one cache set). */
TC_AVX512 static void tc_pack(float *dst, size_t ldd, const double *S, size_t lds, int trans, size_t rows, size_t rp,
                              size_t cols, tc_stat_t *st) {
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
      tc_stat_row(&mine, dst + r0 * ldd, (r1 - r0) * ldd); /* the zero padding takes no part */
    }
    AA_OMP(omp critical(tc_pack_stat)) {
      all.ok &= mine.ok;
      all.orm |= mine.orm;
      if (mine.any) {
        if (!all.any || mine.emin < all.emin) all.emin = mine.emin;
        if (!all.any || mine.emax > all.emax) all.emax = mine.emax;
        all.any = 1;
      }
    }
  }
  *st = all;
}

#define TC_MB 64  /* rows of a task (a multiple of T5_MR) */
#define TC_KC 256 /* k values per pass over a column block (a multiple of every bk) */
#define TC_NC 256 /* columns of a block (a multiple of T5_NR) */

/* The fp32 path (compiled for AVX-512 throughout, so that the packing,
   the operand checks and the copies vectorise too). */
TC_AVX512 static int tc_fast32(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B,
                               size_t ldb, int transB, size_t M, size_t N, size_t K, int accumulate, int bk, int fb) {
  const size_t mp = (M + T5_MR - 1) / T5_MR * T5_MR, np = (N + T5_NR - 1) / T5_NR * T5_NR;
  size_t na, nb;
  if (aa_size_mul(&na, mp, K) != AA_OK || aa_size_mul(&nb, np, K) != AA_OK) return AA_ENOMEM;
  float *pa = malloc(na * sizeof *pa), *pb = malloc(nb * sizeof *pb);
  if (pa == NULL || pb == NULL) {
    free(pa);
    free(pb);
    return AA_ENOMEM;
  }
  tc_stat_t sa = {1, 0, 0, 0, 0}, sb = {1, 0, 0, 0, 0};
  tc_pack(pa, K, A, lda, transA, M, mp, K, &sa);
  tc_pack(pb, np, B, ldb, transB, K, K, N, &sb);
  int exact = sa.ok && sb.ok && tc_stat_bits(&sa) + tc_stat_bits(&sb) <= 24 &&
              (!sa.any || !sb.any || (sa.emin + sb.emin >= -126 && sa.emax + sb.emax <= 126));
  if (!exact) {
    /* the previous path, on the same packing (pb's row length np is a multiple of TC_NB) */
    AA_OMP(omp parallel for schedule(static))
    for (size_t i = 0; i < M; i++)
      tc_tile_f64(C, ldc, pa, pb, np, i, 1, 0, N, K, bk, fb, accumulate);
    free(pa);
    free(pb);
    return AA_OK;
  }
  const size_t nblk = (M + TC_MB - 1) / TC_MB, ntc = np / T5_NR;
  int st = AA_OK;
  AA_OMP(omp parallel if (nblk > 1)) {
    float *acc = malloc(TC_MB * np * sizeof *acc);
    unsigned char *bad = malloc(TC_MB / T5_MR * ntc);
    if (acc == NULL || bad == NULL) {
      AA_OMP(omp atomic write)
      st = AA_ENOMEM;
    }
    AA_OMP(omp for schedule(dynamic, 1))
    for (size_t bi = 0; bi < nblk; bi++) {
      if (acc == NULL || bad == NULL) continue;
      const size_t i0 = bi * TC_MB, rows = M - i0 < TC_MB ? M - i0 : TC_MB, tiles = (rows + T5_MR - 1) / T5_MR;
      for (size_t r = 0; r < tiles * T5_MR; r++) {
        float *restrict ar = acc + r * np;
        size_t j = 0;
        if (accumulate && r < rows) {
          const double *restrict cr = C + (i0 + r) * ldc;
          AA_OMP(omp simd)
          for (size_t x = 0; x < N; x++)
            ar[x] = (float)cr[x];
          j = N;
        }
        for (; j < np; j++)
          ar[j] = 0.0f;
      }
      memset(bad, 0, tiles * ntc);
      for (size_t k0 = 0; k0 < K; k0 += TC_KC) {
        const size_t kc = K - k0 < TC_KC ? K - k0 : TC_KC;
        for (size_t j0 = 0; j0 < np; j0 += TC_NC) {
          const size_t jn = np - j0 < TC_NC ? np - j0 : TC_NC;
          for (size_t t = 0; t < tiles; t++)
            for (size_t jj = j0; jj < j0 + jn; jj += T5_NR) {
              unsigned char *b = bad + t * ntc + jj / T5_NR;
              if (*b) continue;
              *b = (unsigned char)tc_kern_avx512(acc + t * T5_MR * np + jj, np, pa + (i0 + t * T5_MR) * K + k0, K,
                                                 pb + k0 * np + jj, np, kc, bk, fb);
            }
        }
      }
      for (size_t t = 0; t < tiles; t++)
        for (size_t c = 0; c < ntc; c++) {
          const size_t r0 = t * T5_MR, nr = rows - r0 < T5_MR ? rows - r0 : T5_MR, j0 = c * T5_NR,
                       nc = N - j0 < T5_NR ? N - j0 : T5_NR;
          if (j0 >= N) continue;
          if (bad[t * ntc + c]) {
            tc_tile_f64(C, ldc, pa, pb, np, i0 + r0, nr, j0, nc, K, bk, fb, accumulate);
            continue;
          }
          for (size_t r = r0; r < r0 + nr; r++) {
            double *restrict cr = C + (i0 + r) * ldc + j0;
            const float *restrict ar = acc + r * np + j0;
            AA_OMP(omp simd)
            for (size_t j = 0; j < nc; j++)
              cr[j] = ar[j];
          }
        }
    }
    free(acc);
    free(bad);
  }
  free(pa);
  free(pb);
  return st;
}
#endif

int aa_gemm_fast_tc(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                    int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  int bk = 16, fb = 25;
  aa_accum_tc_params(model, &bk, &fb);
  if (aa_gemm_tc_out_bits(model) != 23) { /* e8m13 results: the packed paths round to fp32 only */
    aa_gemm_ref_tc(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, model);
    return AA_OK;
  }
#ifdef TC_X86
  if (aa_gemm_isa() == AA_ISA_AVX512 && tc_have_avx512() && ((int64_t)(bk + 1) << (fb + 1)) <= INT32_MAX)
    return tc_fast32(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, bk, fb);
#endif
  return aa_gemm_tc_packed_f64(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, model);
}

/* ---- AMD CDNA3 (gemm.h, cdna3-k8-f24) ---- */

/* max(floor(log2 |x|), -126) of a nonzero fp32 value */
static int cdna3_exp(float x) {
  int e;
  frexpf(x, &e);
  return e - 1 < -126 ? -126 : e - 1;
}

/* One group: the incoming fp32 accumulator and n <= 8 operand pairs. */
static float cdna3_group(float acc, const float *a, const float *b, size_t n) {
  double p[8], spec = 0;
  int nonfinite = !isfinite(acc), ep = INT32_MIN;
  if (nonfinite) spec = acc;
  for (size_t i = 0; i < n; i++) {
    p[i] = (double)a[i] * (double)b[i];
    if (!(fabs(p[i]) < 0x1p128)) { /* Inf, NaN, or a product counted as Inf (arithmetic.py:243-259) */
      spec += isnan(p[i]) ? p[i] : copysign(INFINITY, p[i]);
      nonfinite = 1;
    } else if (p[i] != 0) {
      int e = cdna3_exp(a[i]) + cdna3_exp(b[i]);
      if (e > ep) ep = e;
    }
  }
  if (nonfinite) return (float)spec;
  /* stage 1: |p_i| < 4 2^ep, so each truncated term is an integer multiple
     of 2^(ep-24) below 2^26, their sum below 2^29 */
  int64_t S = 0;
  if (ep != INT32_MIN)
    for (size_t i = 0; i < n; i++)
      if (p[i] != 0) S += (int64_t)ldexp(p[i], 24 - ep); /* exact scaling, truncating conversion */
  int E = ep;
  if (acc != 0 && cdna3_exp(acc) > E) E = cdna3_exp(acc);
  if (E == INT32_MIN) return 0.0f; /* no nonzero term */
  /* stage 2 in units of 2^(E-31): S' = floor(S 2^(ep-24) / 2^(E-31)), an
     arithmetic shift (floor) by E - ep - 7 when positive; acc' = floor(acc
     2^(24-E)) 2^7 (acc times a power of two is exact in binary64) */
  int64_t Sp = 0;
  if (ep != INT32_MIN) {
    int sh = E - ep - 7;
    if (sh <= 0)
      Sp = S * ((int64_t)1 << -sh);
    else if (sh < 63)
      Sp = S >= 0 ? S >> sh : -((-S - 1) >> sh) - 1; /* floor(S / 2^sh) */
    else
      Sp = S < 0 ? -1 : 0;
  }
  int64_t Ap = (int64_t)floor(ldexp((double)acc, 24 - E)) * 128;
  int64_t R = Sp + Ap; /* |R| < 2^37: exact in binary64 */
  if (R == 0) return 0.0f;
  return (float)ldexp((double)R, E - 31); /* RNE to fp32 (subnormals, overflow to Inf) */
}

void aa_gemm_cdna3(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                   int transB, size_t M, size_t N, size_t K, int accumulate) {
  AA_OMP(omp parallel for schedule(static) if (M * N * K > 65536))
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      float acc = accumulate ? (float)C[i * ldc + j] : 0.0f, a[8], b[8];
      for (size_t k0 = 0; k0 < K; k0 += 8) {
        size_t n = K - k0 < 8 ? K - k0 : 8;
        for (size_t k = 0; k < n; k++) {
          a[k] = (float)aa_gemm_opa(A, lda, transA, i, k0 + k);
          b[k] = (float)aa_gemm_opb(B, ldb, transB, k0 + k, j);
        }
        acc = cdna3_group(acc, a, b, n);
      }
      C[i * ldc + j] = acc;
    }
}
