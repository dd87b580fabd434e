/* attnacc: tensor-core block accumulation models (REFERENCES section 6): exact products, blocks of k aligned to the
 * largest exponent, truncated to F fractional bits, RZ to fp32. */
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

float aa_gemm_tc_block(const double *t, size_t n, int frac_bits) {
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
  return rz32((double)s * down);
}

/* The definition of gemm.h, literally: per output, blocks of k consecutive
   k-indices, the running fp32 accumulator entering each block as its first
   term. */
void aa_gemm_ref_tc(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                    int transB, size_t M, size_t N, size_t K, int accumulate, aa_accum_t model) {
  int bk = 16, fb = 25;
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
        acc = aa_gemm_tc_block(t, nb + 1, fb);
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

int aa_gemm_fast_tc(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
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
  for (size_t i = 0; i < M; i++) {
    const float *ar = pa + i * K;
    for (size_t j0 = 0; j0 < N; j0 += TC_NB) {
      size_t w = N - j0 < TC_NB ? N - j0 : TC_NB;
      double *c = C + i * ldc + j0;
      if (tc_row(c, ar, pb, lp, j0, w, K, bk, fb, accumulate) == 0) continue;
      for (size_t x = 0; x < w; x++) { /* non-finite terms: the reference steps */
        double t[33];
        float acc = accumulate ? (float)c[x] : 0.0f;
        for (size_t k0 = 0; k0 < K; k0 += (size_t)bk) {
          size_t n = K - k0 < (size_t)bk ? K - k0 : (size_t)bk;
          t[0] = acc;
          for (size_t k = 0; k < n; k++)
            t[1 + k] = (double)ar[k0 + k] * (double)pb[(k0 + k) * lp + j0 + x];
          acc = aa_gemm_tc_block(t, n + 1, fb);
        }
        c[x] = acc;
      }
    }
  }
  free(pa);
  free(pb);
  return AA_OK;
}
