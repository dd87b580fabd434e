/* attnacc: the block-scaled tensor-core models (tc-mxfp8-k32-f25, tc-mxfp4-k64-f35, tc-nvfp4-k64-f35) and
 * aa_gemm_scaled. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <math.h>
#include <mpfr.h>

#include "gemm-impl.h"

/* MMA-Sim's extract_significand_exponent (arithmetic.py:76-95): the
   exponent of a nonzero x, at least the format's emin (a subnormal keeps
   emin and a significand below 1). Zeros take no part here (gemm.h). */
static int sig_exp(double x, int emin) {
  int e = ilogb(x);
  return e < emin ? emin : e;
}

/* x rounded toward zero to binary32: subnormals kept, overflow FLT_MAX. */
static float rz_f32(double x) {
  float f = (float)x;
  if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
  return f;
}

/* The exact sum of the t[i] truncated toward zero to multiples of 2^q, by
   MPFR: the fallback for terms too far above 2^q for 128-bit integers
   (only operands far outside the element formats get there). */
static float sum_mpfr(const double *t, size_t n, int q) {
  mpfr_t s, x;
  mpfr_inits2(2400, s, x, (mpfr_ptr)0); /* 2^-1074 .. 2^1024 and the sign: exact */
  mpfr_set_zero(s, 1);
  for (size_t i = 0; i < n; i++) {
    mpfr_set_d(x, t[i], MPFR_RNDN);
    mpfr_mul_2si(x, x, -q, MPFR_RNDN);
    mpfr_trunc(x, x);
    mpfr_mul_2si(x, x, q, MPFR_RNDN);
    mpfr_add(s, s, x, MPFR_RNDN);
  }
  float out = mpfr_zero_p(s) ? 0.0f : rz_f32(mpfr_get_d(s, MPFR_RNDZ));
  mpfr_clears(s, x, (mpfr_ptr)0);
  return out;
}

/* MMA-Sim's fused_sum (arithmetic.py:115-129) and the final RZ of
   nv_fused_dot_add_with_block_scale (:222-224): E the largest et[i] of a
   nonzero term, every term truncated toward zero to a multiple of
   2^(E - F), the exact sum rounded toward zero to binary32. Non-finite
   terms give their IEEE sum. */
static float fused_rz(const double *t, const int *et, size_t n, int F) {
  int any = 0, E = 0, special = 0;
  double sp = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(t[i]))
      special = 1, sp += t[i];
    else if (t[i] != 0 && (!any || et[i] > E))
      E = et[i], any = 1;
  }
  if (special) return (float)sp;
  if (!any) return 0.0f;
  __int128 s = 0;
  for (size_t i = 0; i < n; i++) {
    double v = ldexp(t[i], F - E);
    if (!(fabs(v) < 0x1p120)) return sum_mpfr(t, n, E - F);
    s += (__int128)v; /* the conversion truncates toward zero: exactly the model's truncation */
  }
  if (s == 0) return 0.0f; /* an exact zero sum is +0 (MMA-Sim's 0.0) */
  unsigned __int128 a = s < 0 ? -(unsigned __int128)s : (unsigned __int128)s;
  int len = 0;
  for (unsigned __int128 b = a; b != 0; b >>= 1)
    len++;
  if (len > 53) a = a >> (len - 53) << (len - 53); /* RZ to 53 bits, then the conversion is exact */
  double d = ldexp((double)a, E - F);
  return rz_f32(s < 0 ? -d : d); /* RZ of an RZ on a finer grid */
}

/* One instruction (block_k consecutive k from k0, n of them) of output
   (i, j): the terms, then fused_rz. kind::mxf8f6f4 (k = 32): one term per
   product, exponent e(a) + e(b) + e(sa) + e(sb), scales of E8M0 (MMA-Sim
   nv_ptx.py:122-131, arithmetic.py:132-156); kind::mxf4nvf4 (k = 64): one
   term per 16 products, their exact sum times the two scales, exponent
   e(sa) + e(sb) alone (nv_ptx.py:132-142, arithmetic.py:196-221). */
typedef struct {
  const double *A, *B, *sa, *sb;
  size_t lda, ldb, nkb, N;
  int tA, tB, emin_a, emin_b;
} scaled_args_t;

static double scale_a(const scaled_args_t *g, size_t i, size_t kb) {
  return g->sa ? fabs(g->sa[i * g->nkb + kb]) : 1.0; /* ue4m3 scales: MMA-Sim takes abs (arithmetic.py:206-208) */
}
static double scale_b(const scaled_args_t *g, size_t kb, size_t j) {
  return g->sb ? fabs(g->sb[kb * g->N + j]) : 1.0;
}

static float scaled_step(float acc, const scaled_args_t *g, const aa_accum_info_t *m, size_t i, size_t j, size_t k0,
                         size_t n) {
  double t[33];
  int et[33], semin = m->scale_emin;
  size_t nt = 1, sbk = (size_t)m->scale_block;
  t[0] = acc, et[0] = acc != 0 ? sig_exp(acc, -126) : 0;
  for (size_t k = 0; k < n; k += m->block_k == 32 ? 1 : 16) {
    double s0 = scale_a(g, i, (k0 + k) / sbk), s1 = scale_b(g, (k0 + k) / sbk, j);
    int es = sig_exp(s0, semin) + sig_exp(s1, semin);
    if (m->block_k == 32) {
      double a = aa_gemm_opa(g->A, g->lda, g->tA, i, k0 + k), b = aa_gemm_opb(g->B, g->ldb, g->tB, k0 + k, j);
      double p = a * b * s0 * s1; /* exact: fp32 x fp32 times powers of two */
      t[nt] = p, et[nt++] = p != 0 ? sig_exp(a, g->emin_a) + sig_exp(b, g->emin_b) + es : 0;
      continue;
    }
    double gs = 0; /* exact for E2M1 operands; otherwise binary64 in k order */
    for (size_t u = k; u < k + 16 && u < n; u++)
      gs += aa_gemm_opa(g->A, g->lda, g->tA, i, k0 + u) * aa_gemm_opb(g->B, g->ldb, g->tB, k0 + u, j);
    t[nt] = gs * s0 * s1, et[nt++] = es;
  }
  return fused_rz(t, et, nt, m->frac_bits);
}

static void scaled_run(double *C, size_t ldc, const scaled_args_t *g, size_t M, size_t K, int accumulate,
                       const aa_accum_info_t *m) {
  AA_OMP(omp parallel for schedule(static))
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < g->N; j++) {
      float acc = accumulate ? (float)C[i * ldc + j] : 0.0f;
      for (size_t k0 = 0; k0 < K; k0 += (size_t)m->block_k) {
        size_t n = K - k0 < (size_t)m->block_k ? K - k0 : (size_t)m->block_k;
        acc = scaled_step(acc, g, m, i, j, k0, n);
      }
      C[i * ldc + j] = acc;
    }
}

void aa_gemm_ref_scaled(double *C, size_t ldc, const double *A, size_t lda, int transA, const double *B, size_t ldb,
                        int transB, size_t M, size_t N, size_t K, int accumulate, const aa_accum_info_t *m) {
  scaled_args_t g = {A, B, NULL, NULL, lda, ldb, 0, N, transA, transB, -126, -126};
  scaled_run(C, ldc, &g, M, K, accumulate, m);
}

int aa_gemm_scaled(double *C, size_t ldc, const double *A, size_t lda, const double *B, size_t ldb, size_t M,
                   size_t N, size_t K, int accumulate, aa_accum_t model, const aa_gemm_scales_t *s) {
  const aa_accum_info_t *m = aa_accum_info(model);
  if (m == NULL || m->sum != AA_SUM_SCALED || s == NULL || (s->sa == NULL) != (s->sb == NULL)) return AA_EINVAL;
  if (s->sa != NULL && K % (size_t)m->scale_block != 0) return AA_EINVAL;
  int st = aa_gemm_check(C, ldc, A, lda, 0, B, ldb, 0, M, N, K, model);
  if (st != AA_OK || M == 0 || N == 0) return st;
  if (K == 0) {
    aa_gemm_k0(C, ldc, M, N, accumulate, 1);
    return AA_OK;
  }
  scaled_args_t g = {A, B, s->sa, s->sb, lda, ldb, K / (size_t)m->scale_block, N, 0, 0, s->emin_a, s->emin_b};
  scaled_run(C, ldc, &g, M, K, accumulate, m);
  return AA_OK;
}
