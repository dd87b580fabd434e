/* attnacc: tensor-core block accumulation models ([mma-sim]): exact products, blocks of k aligned to the
 * largest exponent, truncated to F fractional bits, RZ to fp32. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm-impl.h"
#include "tc-core.h"
#include "tc-impl.h"

/* Round a double toward zero to binary32 (subnormals kept; |x| >= 2^128 gives
   +-Inf, as the H200's tensor cores do, where IEEE RZ would give FLT_MAX:
   fixtures/h200-fa2/probe_tc_overflow.py): the RNE conversion gives one of
   the two binary32 neighbours of x; when it lies further from zero than x,
   the neighbour towards zero is the RZ result. */
static float rz32(double x) {
  float f = (float)x;
  if (fabs((double)f) > fabs(x) && fabs(x) < 0x1p128) f = nextafterf(f, 0.0f);
  return f;
}

static double pow2(int e) {
  union {
    uint64_t u;
    double d;
  } v = {(uint64_t)(e + 1023) << 52};
  return v.d;
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

/* The alignment exponent of an operand or accumulator x != 0:
   max(floor(log2 |x|), -126) (gemm.h); the exponent of a nonzero product
   is the sum of its operands'. */
int aa_gemm_tc_exp(double x) {
  int e;
  frexp(x, &e);
  return e - 1 < -126 ? -126 : e - 1;
}

float aa_gemm_tc_block(const double *t, const int *et, size_t n, int frac_bits) {
  return aa_gemm_tc_block_out(t, et, n, frac_bits, 23);
}

float aa_gemm_tc_block_out(const double *t, const int *et, size_t n, int frac_bits, int out_bits) {
  double s = aa_gemm_tc_block_sum(t, et, n, frac_bits);
  if (!(fabs(s) <= DBL_MAX)) return (float)s; /* Inf/NaN terms: their IEEE sum */
  if (s == 0) return 0.0f;                    /* an exact zero sum is +0 */
  return rz_narrow(s, out_bits);
}

double aa_gemm_tc_block_sum(const double *t, const int *et, size_t n, int frac_bits) {
  int nonfinite = 0, any = 0, E = 0;
  for (size_t i = 0; i < n; i++) {
    double a = fabs(t[i]);
    if (!(a <= DBL_MAX))
      nonfinite = 1;
    else if (a != 0 && (!any || et[i] > E))
      E = et[i], any = 1;
  }
  if (nonfinite) {
    /* Inf/NaN: the IEEE sum of the special terms (NaN for Inf - Inf, an
       Inf product, or a NaN); finite terms cannot change it. */
    double s = 0;
    for (size_t i = 0; i < n; i++)
      if (!(fabs(t[i]) <= DBL_MAX)) s += t[i];
    return s;
  }
  if (!any) return 0.0; /* every term is a zero of either sign: +0 */
  /* E = max et_i over the nonzero terms (a zero accumulator or product
     takes no part). A product's et is the sum of its operands' exponents,
     so it lies below 2^(E+2), the accumulator below 2^(E+1): every term
     scaled by 2^(F-E) is below 2^(F+2) in magnitude, and the conversion to
     int64 truncates it toward zero exactly (the scaling is a power of two
     and products of fp32 values are exact in binary64, far from its
     underflow: |t| >= 2^-298, 2^(F-E) >= 2^-230). */
  int shift = frac_bits - E;
  /* shift lies in [-230, 277] (E from -252 to 255, F <= 25), so 2^shift
     and 2^-shift are normal binary64 numbers, built from their bits. */
  double up = pow2(shift), down = pow2(-shift);
  int64_t s = 0;
  for (size_t i = 0; i < n; i++)
    s += (int64_t)(t[i] * up);
  /* |s| < n 2^(F+2) < 2^53: exact as a double, and so is the scaling back. */
  return (double)s * down;
}

/* One block of the definition (gemm.h): the accumulator, then the exact
   products a[k] b[k sb] for k < n, aligned, truncated to fb fractional
   bits, summed and truncated to ob; by the integer core the GPU kernels
   share (tc-core.h). */
static float tc_step(float acc, const float *a, const float *b, size_t sb, size_t n, int fb, int ob) {
  return aa_tc_block(acc, a, b, sb, n, fb, ob);
}

/* The definition of gemm.h, literally: per output, blocks of k consecutive
   k-indices, the running fp32 accumulator entering each block as its first
   term. */
void aa_gemm_ref_tc(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                    int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m) {
  const size_t bk = (size_t)m->block_k;
  float a[32], b[32];
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      float acc = accumulate ? (float)C[i * ldc + j] : 0.0f;
      for (size_t k0 = 0; k0 < K; k0 += bk) {
        size_t nb = K - k0 < bk ? K - k0 : bk;
        for (size_t k = 0; k < nb; k++) {
          a[k] = (float)aa_gemm_opa(A, lda, transA, i, k0 + k);
          b[k] = (float)aa_gemm_opb(B, ldb, transB, k0 + k, j);
        }
        acc = tc_step(acc, a, b, 1, nb, m->frac_bits, m->out_bits);
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

/* e(x) = max(floor(log2 |x|), -126) lane-wise, from the binary64 bits of nonzero finite fp32 values (normal
   there); a macro like tc_fabs */
#define tc_exp8(x, emin)                                                                                             \
  ({                                                                                                                 \
    tc_v8l e_ = ((((tc_v8l)(x) >> 52) & 2047) - 1023);                                                               \
    (e_ & ~(e_ < (emin))) | ((emin) & (e_ < (emin)));                                                                \
  })

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
  const tc_v8l none = (tc_v8l){0} - 100000, emin = (tc_v8l){0} - 126;
  for (size_t k0 = 0; k0 < K; k0 += (size_t)bk) {
    size_t n = K - k0 < (size_t)bk ? K - k0 : (size_t)bk;
    tc_v8d accd = __builtin_convertvector(acc, tc_v8d), mx = tc_fabs(accd);
    tc_v8l nan = accd != accd;
    /* E: the largest alignment exponent over the nonzero terms (gemm.h):
       the accumulator's, and e(a) + e(b) for each nonzero product, where
       e(x) = max(floor(log2 |x|), -126), read from the binary64 bits (fp32
       values are normal there); `none` marks a lane with no nonzero term. */
    tc_v8l E = (tc_exp8(accd, emin) & (accd != 0)) | (none & ~(accd != 0));
    for (size_t k = 0; k < n; k++) {
      tc_v8f bf;
      memcpy(&bf, pb + (k0 + k) * ldb + j0, sizeof bf);
      tc_v8d bd = __builtin_convertvector(bf, tc_v8d);
      pr[k] = (double)ar[k0 + k] * bd;
      tc_v8d p = tc_fabs(pr[k]);
      tc_v8l gt = p > mx;
      nan |= p != p; /* Inf * 0 */
      mx = (tc_v8d)(((tc_v8l)p & gt) | ((tc_v8l)mx & ~gt));
      if (ar[k0 + k] == 0) continue;
      tc_v8l ek = tc_exp8(bd, emin) + aa_gemm_tc_exp(ar[k0 + k]), take = (pr[k] != 0) & (ek > E);
      E = (ek & take) | (E & ~take);
    }
    tc_v8l eb = (tc_v8l)mx >> 52;    /* biased exponent of max |t| (sign bit clear) */
    tc_v8l inf = (eb == 2047) | nan; /* an Inf or NaN term */
    for (size_t x = 0; x < nb; x++)
      if (inf[x]) return 1;
    /* A lane of zeros only gets scale 1: its sum is the integer 0, giving
       +0 as the definition says. */
    tc_v8l sh = ((tc_v8l){0} + fb - E) & ~((E == none) | inf);
    tc_v8d up = (tc_v8d)((sh + 1023) << 52), down = (tc_v8d)((1023 - sh) << 52);
    tc_v8l s = __builtin_convertvector(accd * up, tc_v8l);
    for (size_t k = 0; k < n; k++)
      s += __builtin_convertvector(pr[k] * up, tc_v8l);
    tc_v8d v = __builtin_convertvector(s, tc_v8d) * down;
    tc_v8f f = __builtin_convertvector(v, tc_v8f);
    tc_v8l away = (tc_fabs(__builtin_convertvector(f, tc_v8d)) > tc_fabs(v)) & (tc_fabs(v) < 0x1p128);
    /* RZ: one step back toward zero where the RNE conversion went away from it (below 2^128: an overflow stays
       +-Inf, as on the H200, rz32) */
    acc = (tc_v8f)((tc_v8i)f + __builtin_convertvector(away, tc_v8i));
  }
  for (size_t x = 0; x < nb; x++)
    c[x] = acc[x];
  return 0;
}

void aa_gemm_tc_tile_f64(double *C, size_t ldc, const float *pa, const float *pb, size_t lp, size_t i0, size_t rows,
                         size_t j0, size_t cols, size_t K, int bk, int fb, int ob, int accumulate) {
  for (size_t i = i0; i < i0 + rows; i++) {
    const float *ar = pa + i * K;
    for (size_t jj = j0; jj < j0 + cols; jj += TC_NB) {
      size_t w = j0 + cols - jj < TC_NB ? j0 + cols - jj : TC_NB;
      double *c = C + i * ldc + jj;
      /* tc_row rounds to fp32 only: e8m13 results take the reference steps */
      if (ob == 23 && tc_row(c, ar, pb, lp, jj, w, K, bk, fb, accumulate) == 0) continue;
      for (size_t x = 0; x < w; x++) { /* non-finite terms: the reference steps */
        float acc = accumulate ? (float)c[x] : 0.0f;
        for (size_t k0 = 0; k0 < K; k0 += (size_t)bk) {
          size_t n = K - k0 < (size_t)bk ? K - k0 : (size_t)bk;
          acc = tc_step(acc, ar + k0, pb + k0 * lp + jj + x, lp, n, fb, ob);
        }
        c[x] = acc;
      }
    }
  }
}

int aa_gemm_tc_packed_f64(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                          int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m) {
  const int bk = m->block_k, fb = m->frac_bits, ob = m->out_bits;
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
    aa_gemm_tc_tile_f64(C, ldc, pa, pb, lp, i, 1, 0, N, K, bk, fb, ob, accumulate);
  free(pa);
  free(pb);
  return AA_OK;
}

int aa_gemm_fast_tc(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                    int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m) {
  if (aa_gemm_isa() == AA_ISA_AVX512 && aa_gemm_tc_fast32_available())
    return aa_gemm_tc_fast32(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, m);
  if (m->sum == AA_SUM_BLOCK2) {
    aa_gemm_ref_cdna3(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate);
    return AA_OK;
  }
  return aa_gemm_tc_packed_f64(C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, m);
}

/* ---- AMD CDNA3 (gemm.h, cdna3-k8-f24) ---- */

/* max(floor(log2 |x|), -126) of a nonzero fp32 value */
static int cdna3_exp(float x) {
  int e;
  frexpf(x, &e);
  return e - 1 < -126 ? -126 : e - 1;
}

float aa_gemm_cdna3_group(float acc, const float *a, const float *b, size_t n) {
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

void aa_gemm_ref_cdna3(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
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
        acc = aa_gemm_cdna3_group(acc, a, b, n);
      }
      C[i * ldc + j] = acc;
    }
}
