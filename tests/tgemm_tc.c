/* attnacc: tests of the tensor-core accumulation models (tc-*, cdna3-k8-f24) against MPFR models, hand-derived
 * cases and the literal loops. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn.h"
#include "gemm.h"
#include "rng.h"
#include "tests.h"

static uint32_t bits32(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* ---- the independent model: MPFR, written from [mma-sim] ----
   Each block: exact products (precision 64 holds any 24 x 24-bit product),
   E the largest alignment exponent of a nonzero term (the accumulator's
   floor(log2 |acc|); for a product the sum of its operands' floor(log2),
   each at least -126: MMA-Sim's rule, which reproduced every one of 1.57
   million mma.sync steps on the H200, experiments/README-gpu.md section 6),
   each term multiplied by
   2^(F-E) and truncated to an integer with mpfr_trunc, the integers summed
   exactly in precision 128, scaled back, then rounded toward zero to a
   binary32 emulated by MPFR (precision 24, emin -148, emax 128,
   mpfr_subnormalize), whose RZ overflow is the largest finite number; for
   an e8m13 result precision 14 and emin -138 (subnormals in multiples of
   2^-139). */
/* max(floor(log2 |x|), -126) of a nonzero value (mpfr: |x| = m 2^exp with m in [1/2, 1)) */
static long op_exp(mpfr_srcptr x) {
  long e = (long)mpfr_get_exp(x) - 1;
  return e < -126 ? -126 : e;
}

/* s rounded (rnd) into r (precision ob + 1) with fp32's exponent range:
   subnormals in multiples of 2^(-126-ob), overflow as rnd gives it */
static float mpfr_round_range(mpfr_t r, mpfr_srcptr s, long lo, long hi, mpfr_rnd_t rnd);
static float mpfr_round32(mpfr_t r, mpfr_srcptr s, int ob, mpfr_rnd_t rnd) {
  return mpfr_round_range(r, s, -125 - ob, 128, rnd); /* smallest subnormal 2^(-126-ob) = 0.5 2^emin */
}
/* binary16 (r of precision 11): subnormals in multiples of 2^-24, 65520 and above overflow */
static float mpfr_round16(mpfr_t r, mpfr_srcptr s, mpfr_rnd_t rnd) {
  return mpfr_round_range(r, s, -23, 16, rnd);
}
/* s rounded (rnd) into r with MPFR's exponent range [lo, hi] */
static float mpfr_round_range(mpfr_t r, mpfr_srcptr s, long lo, long hi, mpfr_rnd_t rnd) {
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_set_emin(lo);
  mpfr_set_emax(hi);
  int inex = mpfr_set(r, s, rnd);
  inex = mpfr_check_range(r, inex, rnd);
  mpfr_subnormalize(r, inex, rnd);
  float out = mpfr_get_flt(r, rnd);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  return out;
}

/* One block; its exact sum rounded toward zero to ob fractional bits in
   fp32's range, or with fp16 set to nearest (ties to even) in binary16's. */
static float mpfr_block_r(const float *acc, const float *a, const float *b, size_t n, int F, int ob, int fp16);
static float mpfr_block(const float *acc, const float *a, const float *b, size_t n, int F, int ob) {
  return mpfr_block_r(acc, a, b, n, F, ob, 0);
}
static float mpfr_block_r(const float *acc, const float *a, const float *b, size_t n, int F, int ob, int fp16) {
  mpfr_t t[40], s, r;
  size_t nt = 0;
  int special = 0;
  double sp = 0;
  mpfr_inits2(64, s, (mpfr_ptr)0);
  mpfr_init2(r, ob + 1);
  mpfr_set_prec(s, 128);
  long et[40]; /* alignment exponents: e(acc), e(a) + e(b), e(x) = max(floor(log2 |x|), -126) */
  for (size_t i = 0; i < n + 1; i++)
    mpfr_init2(t[i], 64);
  mpfr_set_flt(t[nt], *acc, MPFR_RNDN);
  et[nt] = *acc != 0 ? op_exp(t[nt]) : 0;
  nt++;
  for (size_t i = 0; i < n; i++) {
    mpfr_set_flt(t[nt], a[i], MPFR_RNDN);
    mpfr_t bb;
    mpfr_init2(bb, 24);
    mpfr_set_flt(bb, b[i], MPFR_RNDN);
    et[nt] = a[i] != 0 && b[i] != 0 && isfinite(a[i]) && isfinite(b[i]) ? op_exp(t[nt]) + op_exp(bb) : 0;
    mpfr_mul(t[nt], t[nt], bb, MPFR_RNDN); /* exact */
    mpfr_clear(bb);
    nt++;
  }
  for (size_t i = 0; i < nt; i++)
    if (mpfr_nan_p(t[i]) || mpfr_inf_p(t[i])) {
      special = 1;
      sp += mpfr_get_d(t[i], MPFR_RNDN);
    }
  float out;
  if (special) {
    out = (float)sp;
  } else {
    mpfr_exp_t E = 0;
    int any = 0;
    for (size_t i = 0; i < nt; i++)
      if (!mpfr_zero_p(t[i]) && (!any || et[i] > E)) {
        E = et[i];
        any = 1;
      }
    mpfr_set_ui(s, 0, MPFR_RNDN);
    if (any)
      for (size_t i = 0; i < nt; i++) {
        mpfr_mul_2si(t[i], t[i], (long)F - E, MPFR_RNDN);
        mpfr_trunc(t[i], t[i]);
        mpfr_add(s, s, t[i], MPFR_RNDN); /* integers below 2^(F+8): exact */
      }
    mpfr_mul_2si(s, s, E - F, MPFR_RNDN);
    out = fp16 ? mpfr_round16(r, s, MPFR_RNDN) : mpfr_round32(r, s, ob, MPFR_RNDZ);
    if (mpfr_zero_p(s)) out = 0.0f; /* an exact zero sum is +0; a nonzero one truncated to 0 keeps its sign */
  }
  for (size_t i = 0; i < n + 1; i++)
    mpfr_clear(t[i]);
  mpfr_clears(s, r, (mpfr_ptr)0);
  return out;
}

/* ---- the MPFR test rows: one per row of aa_accum_table ----
   Each model's parameters (alignment rule, block k, fractional bits F,
   result fractional bits, result rounding) written here from MMA-Sim
   (microsoft/MMA-Sim c785138, mmasim/simulator/nv_ptx.py:17-26, 147-159,
   186-190; amd.py:39-43), [mma-sim] and IEEE 754, not
   read from the library, with the MPFR function that computes one output
   element. test_table fails for a library row without a test row here, or
   whose fields differ from it. */
typedef struct tmodel tmodel_t;
typedef double (*melem_fn)(const tmodel_t *tm, double cin, int accumulate, const double *A, size_t lda, int tA,
                           const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K);
struct tmodel {
  const char *name;
  aa_sum_t sum;
  int k, F, ob;
  aa_rnd_t rnd;
  melem_fn elem;
};

/* op(A)[i][k] and op(B)[k][j] as fp32 values (every operand here is one) */
static float opa32(const double *A, size_t lda, int tA, size_t i, size_t k) {
  return (float)(tA ? A[k * lda + i] : A[i * lda + k]);
}
static float opb32(const double *B, size_t ldb, int tB, size_t k, size_t j) {
  return (float)(tB ? B[j * ldb + k] : B[k * ldb + j]);
}

static double tc_elem(const tmodel_t *tm, double cin, int accumulate, const double *A, size_t lda, int tA,
                      const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K) {
  int bk = tm->k, F = tm->F;
  float acc = accumulate ? (float)cin : 0.0f, a[32], b[32];
  for (size_t k0 = 0; k0 < K; k0 += (size_t)bk) {
    size_t n = K - k0 < (size_t)bk ? K - k0 : (size_t)bk;
    for (size_t k = 0; k < n; k++) {
      a[k] = opa32(A, lda, tA, i, k0 + k);
      b[k] = opb32(B, ldb, tB, k0 + k, j);
    }
    acc = mpfr_block(&acc, a, b, n, F, tm->ob);
  }
  return acc;
}

static float mpfr_cdna3_group(float acc, const float *a, const float *b, size_t n);

static double cdna3_elem(const tmodel_t *tm, double cin, int accumulate, const double *A, size_t lda, int tA,
                         const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K) {
  size_t g = (size_t)tm->k;
  float acc = accumulate ? (float)cin : 0.0f, a[8], b[8];
  for (size_t k0 = 0; k0 < K; k0 += g) {
    size_t n = K - k0 < g ? K - k0 : g;
    for (size_t k = 0; k < n; k++) {
      a[k] = opa32(A, lda, tA, i, k0 + k);
      b[k] = opb32(B, ldb, tB, k0 + k, j);
    }
    acc = mpfr_cdna3_group(acc, a, b, n);
  }
  return acc;
}

/* IEEE 754 binary formats by MPFR: precision ob + 1 and the exponent range
   of binary32 (ob 23) or binary64 (ob 52), subnormals by mpfr_subnormalize
   after each correctly rounded (RNE) operation. */
static void ieee_range(int ob) {
  mpfr_set_emin(ob == 52 ? -1073 : -148);
  mpfr_set_emax(ob == 52 ? 1024 : 128);
}

/* fp32-seq / fp64-seq: acc = RNE(a_k b_k + acc), one rounding per step */
static double chain_elem(const tmodel_t *tm, double cin, int accumulate, const double *A, size_t lda, int tA,
                         const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K) {
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  ieee_range(tm->ob);
  mpfr_t acc, x, y;
  mpfr_inits2(tm->ob + 1, acc, x, y, (mpfr_ptr)0);
  mpfr_set_d(acc, !accumulate ? 0.0 : tm->ob == 52 ? cin : (float)cin, MPFR_RNDN); /* fp32 models read fl32(C) */
  for (size_t k = 0; k < K; k++) {
    mpfr_set_flt(x, opa32(A, lda, tA, i, k), MPFR_RNDN);
    mpfr_set_flt(y, opb32(B, ldb, tB, k, j), MPFR_RNDN);
    mpfr_subnormalize(acc, mpfr_fma(acc, x, y, acc, MPFR_RNDN), MPFR_RNDN);
  }
  double out = mpfr_get_d(acc, MPFR_RNDN);
  mpfr_clears(acc, x, y, (mpfr_ptr)0);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  return out;
}

/* pw(p_0 .. p_{n-1}) by the recursive split of gemm.h: left part the largest power of two below n */
static void pw_sum(mpfr_t out, mpfr_t *p, size_t n) {
  if (n == 1) {
    mpfr_set(out, p[0], MPFR_RNDN);
    return;
  }
  size_t m = 1;
  while (2 * m < n)
    m *= 2;
  mpfr_t r;
  mpfr_init2(r, mpfr_get_prec(out));
  pw_sum(out, p, m);
  pw_sum(r, p + m, n - m);
  mpfr_subnormalize(out, mpfr_add(out, out, r, MPFR_RNDN), MPFR_RNDN);
  mpfr_clear(r);
}

static double pairwise_elem(const tmodel_t *tm, double cin, int accumulate, const double *A, size_t lda, int tA,
                            const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K) {
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  ieee_range(tm->ob);
  mpfr_t *p = malloc(K * sizeof *p), x, y, s;
  if (p == NULL) exit(1);
  mpfr_inits2(tm->ob + 1, x, y, s, (mpfr_ptr)0);
  for (size_t k = 0; k < K; k++) {
    mpfr_init2(p[k], tm->ob + 1);
    mpfr_set_flt(x, opa32(A, lda, tA, i, k), MPFR_RNDN);
    mpfr_set_flt(y, opb32(B, ldb, tB, k, j), MPFR_RNDN);
    mpfr_subnormalize(p[k], mpfr_mul(p[k], x, y, MPFR_RNDN), MPFR_RNDN);
  }
  pw_sum(s, p, K);
  if (accumulate) {
    mpfr_set_flt(x, (float)cin, MPFR_RNDN);
    mpfr_subnormalize(s, mpfr_add(s, x, s, MPFR_RNDN), MPFR_RNDN);
  }
  double out = mpfr_get_d(s, MPFR_RNDN);
  for (size_t k = 0; k < K; k++)
    mpfr_clear(p[k]);
  free(p);
  mpfr_clears(x, y, s, (mpfr_ptr)0);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  return out;
}

/* The promoted rows' own parameters (gemm.h, AA_SUM_PROMOTED), written
   from the H200 fits ([h200-fp8]: fixtures/h200-fp8 and its section of
   experiments/README-gpu.md): chunk P, granule g, the inner blocks' result bits and rounding, the
   result's exponent bits (0 fp32, 5 fp16). */
typedef struct {
  const char *name;
  int P, g, ib;
  aa_rnd_t irnd;
  int ebits;
} tpromo_t;
static const tpromo_t tpromos[] = {
    {"sm90-fp8-mma-f32", 32, 2, 23, AA_RND_Z, 0},
    {"sm90-fp8-mma-f16", 32, 2, 10, AA_RND_NE, 5},
    {"tc-fp8-k32-f13-p128", 128, 32, 13, AA_RND_Z, 0},
};
static const tpromo_t *tpromo_of(const char *name) {
  for (size_t i = 0; i < sizeof tpromos / sizeof tpromos[0]; i++)
    if (strcmp(tpromos[i].name, name) == 0) return &tpromos[i];
  return NULL;
}

/* RNE(x + y) into binary32 or binary16 (fp16): the exact sum (precision
   2200 holds any two doubles' sum) rounded once by MPFR. */
static double mpfr_add_out(double x, double y, int fp16) {
  mpfr_t s, r;
  mpfr_init2(s, 2200);
  mpfr_init2(r, fp16 ? 11 : 24);
  mpfr_set_d(s, x, MPFR_RNDN);
  mpfr_add_d(s, s, y, MPFR_RNDN);
  double out = fp16 ? mpfr_round16(r, s, MPFR_RNDN) : mpfr_round32(r, s, 23, MPFR_RNDN);
  mpfr_clears(s, r, (mpfr_ptr)0);
  return out;
}

/* Promoted: chunks of P k from d = +0, inner block b taking the chunk
   positions q with (q / g) mod (P / K) == b, then acc = RNE(acc + d). */
static double promo_elem(const tmodel_t *tm, double cin, int accumulate, const double *A, size_t lda, int tA,
                         const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K) {
  const tpromo_t *tp = tpromo_of(tm->name);
  if (tp == NULL) exit(99);
  const int fp16 = tp->ebits == 5;
  const size_t P = (size_t)tp->P, nb = P / (size_t)tm->k;
  double acc = accumulate ? mpfr_add_out(cin, 0.0, fp16) : 0.0;
  for (size_t k0 = 0; k0 < K; k0 += P) {
    float d = 0.0f, a[32], b[32];
    for (size_t blk = 0; blk < nb; blk++) {
      size_t n = 0;
      for (size_t q = 0; q < P && k0 + q < K; q++)
        if ((q / (size_t)tp->g) % nb == blk) {
          a[n] = opa32(A, lda, tA, i, k0 + q);
          b[n++] = opb32(B, ldb, tB, k0 + q, j);
        }
      if (n > 0) d = mpfr_block_r(&d, a, b, n, tm->F, tp->ib, tp->irnd == AA_RND_NE);
    }
    acc = mpfr_add_out(acc, d, fp16);
  }
  return acc;
}

/* ---- block-scaled rows (AA_SUM_SCALED), written from MMA-Sim c785138 ----
   arithmetic.py:76-95 (extract_significand_exponent: the exponent of a
   nonzero value, at least its format's emin), 115-129 (fused_sum), 132-193
   (nv_fused_dot_add with scales: k = 32, one term per product, exponent
   ea + eb + esa + esb), 196-224 (nv_fused_dot_add_with_block_scale: k = 64,
   one term per 16 products, exponent esa + esb alone, abs of UE4M3
   scales, final RZ to fp32); nv_ptx.py:103 and 223 (F = 35 for k = 64,
   else 25). Zero terms take no part (gemm.h says where MMA-Sim differs). */
typedef struct {
  int k, F, emin_a, emin_b, semin;
} sparams_t;

static long clamp_exp(double x, int emin) {
  int e;
  frexp(x, &e);
  return e - 1 < emin ? emin : e - 1;
}

/* one instruction: acc, then n k-values with per-k scales */
static float mpfr_scaled(float acc, const double *a, const double *b, const double *sa, const double *sb, size_t n,
                         const sparams_t *p) {
  mpfr_t t[34], g, s, r;
  long et[34];
  size_t nt = 0;
  double sp = 0;
  int special = 0;
  mpfr_inits2(400, g, s, (mpfr_ptr)0);
  mpfr_init2(r, 24);
  for (size_t i = 0; i < 34; i++)
    mpfr_init2(t[i], 400);
  mpfr_set_flt(t[nt], acc, MPFR_RNDN);
  et[nt++] = acc != 0 ? clamp_exp(acc, -126) : 0;
  for (size_t k = 0; k < n; k += p->k == 32 ? 1 : 16) {
    double s0 = fabs(sa[k]), s1 = fabs(sb[k]);
    long es = clamp_exp(s0, p->semin) + clamp_exp(s1, p->semin);
    if (p->k == 32) {
      mpfr_set_d(t[nt], a[k], MPFR_RNDN);
      mpfr_mul_d(t[nt], t[nt], b[k], MPFR_RNDN);
      et[nt] = a[k] != 0 && b[k] != 0 ? clamp_exp(a[k], p->emin_a) + clamp_exp(b[k], p->emin_b) + es : 0;
    } else { /* the group sum in binary64, k order (exact for E2M1 values) */
      mpfr_set_prec(g, 53);
      mpfr_set_zero(g, 1);
      for (size_t u = k; u < k + 16 && u < n; u++) {
        mpfr_t pr;
        mpfr_init2(pr, 53);
        mpfr_set_d(pr, a[u], MPFR_RNDN);
        mpfr_mul_d(pr, pr, b[u], MPFR_RNDN); /* exact: fp32 operands */
        mpfr_add(g, g, pr, MPFR_RNDN);
        mpfr_clear(pr);
      }
      mpfr_set(t[nt], g, MPFR_RNDN);
      et[nt] = es;
    }
    mpfr_mul_d(t[nt], t[nt], s0, MPFR_RNDN);
    mpfr_mul_d(t[nt], t[nt], s1, MPFR_RNDN);
    nt++;
  }
  for (size_t i = 0; i < nt; i++)
    if (!mpfr_number_p(t[i])) special = 1, sp += mpfr_get_d(t[i], MPFR_RNDN);
  float out = (float)sp;
  if (!special) {
    long E = 0;
    int any = 0;
    for (size_t i = 0; i < nt; i++)
      if (!mpfr_zero_p(t[i]) && (!any || et[i] > E)) E = et[i], any = 1;
    mpfr_set_zero(s, 1);
    for (size_t i = 0; any && i < nt; i++) {
      mpfr_mul_2si(t[i], t[i], p->F - E, MPFR_RNDN);
      mpfr_trunc(t[i], t[i]);
      mpfr_add(s, s, t[i], MPFR_RNDN);
    }
    mpfr_mul_2si(s, s, E - p->F, MPFR_RNDN);
    out = mpfr_zero_p(s) ? 0.0f : mpfr_round32(r, s, 23, MPFR_RNDZ);
  }
  for (size_t i = 0; i < 34; i++)
    mpfr_clear(t[i]);
  mpfr_clears(g, s, r, (mpfr_ptr)0);
  return out;
}

/* A whole output element: instructions of p->k along K; sa/sb the per-k scales (NULL: 1) */
static float scaled_chain(float acc, const double *a, const double *b, const double *sa, const double *sb, size_t K,
                          const sparams_t *p) {
  double one[64];
  for (size_t k = 0; k < 64; k++)
    one[k] = 1.0;
  for (size_t k0 = 0; k0 < K; k0 += (size_t)p->k) {
    size_t n = K - k0 < (size_t)p->k ? K - k0 : (size_t)p->k;
    acc = mpfr_scaled(acc, a + k0, b + k0, sa ? sa + k0 : one, sb ? sb + k0 : one, n, p);
  }
  return acc;
}

static double scaled_elem(const tmodel_t *tm, double cin, int accumulate, const double *A, size_t lda, int tA,
                          const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K) {
  sparams_t p = {tm->k, tm->F, -126, -126, -127}; /* aa_gemm: every scale 1, fp32's clamp */
  double *a = malloc(K * sizeof *a), *b = malloc(K * sizeof *b);
  if (a == NULL || b == NULL) exit(1);
  for (size_t k = 0; k < K; k++)
    a[k] = opa32(A, lda, tA, i, k), b[k] = opb32(B, ldb, tB, k, j);
  float out = scaled_chain(accumulate ? (float)cin : 0.0f, a, b, NULL, NULL, K, &p);
  free(a);
  free(b);
  return out;
}

static const tmodel_t tmodels[] = {
    {"fp32-seq", AA_SUM_CHAIN, 0, 0, 23, AA_RND_NE, chain_elem},
    {"fp32-pairwise", AA_SUM_PAIRWISE, 0, 0, 23, AA_RND_NE, pairwise_elem},
    {"fp64-seq", AA_SUM_CHAIN, 0, 0, 52, AA_RND_NE, chain_elem},
    {"tc-k16-f25", AA_SUM_BLOCK, 16, 25, 23, AA_RND_Z, tc_elem},
    {"tc-k8-f24", AA_SUM_BLOCK, 8, 24, 23, AA_RND_Z, tc_elem},
    {"tc-k4-f23", AA_SUM_BLOCK, 4, 23, 23, AA_RND_Z, tc_elem},
    {"tc-fp8-k32-f13", AA_SUM_BLOCK, 32, 13, 13, AA_RND_Z, tc_elem},
    {"tc-fp8-k32-f25", AA_SUM_BLOCK, 32, 25, 23, AA_RND_Z, tc_elem},
    {"cdna3-k8-f24", AA_SUM_BLOCK2, 8, 24, 23, AA_RND_NE, cdna3_elem},
    {"sm90-fp8-mma-f32", AA_SUM_PROMOTED, 16, 25, 23, AA_RND_NE, promo_elem},
    {"sm90-fp8-mma-f16", AA_SUM_PROMOTED, 16, 25, 10, AA_RND_NE, promo_elem},
    {"tc-fp8-k32-f13-p128", AA_SUM_PROMOTED, 32, 13, 23, AA_RND_NE, promo_elem},
    {"tc-mxfp8-k32-f25", AA_SUM_SCALED, 32, 25, 23, AA_RND_Z, scaled_elem},
    {"tc-mxfp4-k64-f35", AA_SUM_SCALED, 64, 35, 23, AA_RND_Z, scaled_elem},
    {"tc-nvfp4-k64-f35", AA_SUM_SCALED, 64, 35, 23, AA_RND_Z, scaled_elem},
    {"tc-k8-f25", AA_SUM_BLOCK, 8, 25, 23, AA_RND_Z, tc_elem},
};
#define NTM ((int)(sizeof tmodels / sizeof tmodels[0]))

/* The test row of a library model, by name (NULL: none) */
static const tmodel_t *tmodel_of(aa_accum_t m) {
  for (int i = 0; i < NTM; i++)
    if (strcmp(tmodels[i].name, aa_accum_name(m)) == 0) return &tmodels[i];
  return NULL;
}

/* The library's models by alignment rule, in table order: the tc block
   models, and every model with a packed fast path (those and cdna3). */
static aa_accum_t tc_models[AA_ACC_COUNT], fast_models[AA_ACC_COUNT];
static int ntc, nfast;

static void models_init(void) {
  for (int m = 0; m < AA_ACC_COUNT; m++) {
    const aa_accum_info_t *r = &aa_accum_table[m];
    if (r->sum == AA_SUM_BLOCK) tc_models[ntc++] = r->model;
    if (r->sum == AA_SUM_BLOCK || r->sum == AA_SUM_BLOCK2) fast_models[nfast++] = r->model;
  }
}

static double model_elem(aa_accum_t model, double cin, int accumulate, const double *A, size_t lda, int tA,
                         const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K) {
  const tmodel_t *tm = tmodel_of(model);
  if (tm == NULL) exit(99); /* test_table has reported it */
  return tm->elem(tm, cin, accumulate, A, lda, tA, B, ldb, tB, i, j, K);
}

/* Values: kind 0 bf16 normals N(0,1), kind 1 fp32 with a wide exponent
   spread (forces alignment losses and cancellations), kind 2 bf16 with
   exact zeros, negatives and tiny/subnormal magnitudes. */
static double rand_value(aa_pcg64_t *rng, int kind) {
  double x = aa_pcg64_normal(rng);
  if (kind == 0) return (double)(float)((float)x); /* fp32, then to bf16 below */
  if (kind == 1) return (float)ldexp(x, (int)(aa_pcg64_next(rng) % 41) - 20);
  uint64_t u = aa_pcg64_next(rng) % 8;
  if (u == 0) return 0.0;
  if (u == 1) return (float)ldexp(x, -70 - (int)(aa_pcg64_next(rng) % 10)); /* products near 2^-149 */
  return (float)ldexp(x, (int)(aa_pcg64_next(rng) % 7) - 3);
}

static double to_bf16(double x) {
  float f = (float)x;
  uint32_t u = bits32(f);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; /* RNE to bf16 (finite inputs) */
  memcpy(&f, &u, sizeof f);
  return f;
}

typedef struct {
  aa_accum_t model;
  size_t M, N, K, lda, ldb, ldc;
  int tA, tB, acc, kind;
  double *A, *B, *C0;
} case_t;

static void case_make(case_t *c, aa_pcg64_t *rng, size_t M, size_t N, size_t K, aa_accum_t model, int kind) {
  c->model = model, c->M = M, c->N = N, c->K = K, c->kind = kind;
  c->tA = (int)(aa_pcg64_next(rng) & 1), c->tB = (int)(aa_pcg64_next(rng) & 1),
  c->acc = (int)(aa_pcg64_next(rng) & 1);
  size_t ra = c->tA ? K : M, ca = c->tA ? M : K, rb = c->tB ? N : K, cb = c->tB ? K : N;
  c->lda = ca + aa_pcg64_next(rng) % 3, c->ldb = cb + aa_pcg64_next(rng) % 3, c->ldc = N + aa_pcg64_next(rng) % 3;
  c->A = malloc(ra * c->lda * sizeof(double));
  c->B = malloc(rb * c->ldb * sizeof(double));
  c->C0 = malloc(M * c->ldc * sizeof(double));
  if (c->A == NULL || c->B == NULL || c->C0 == NULL) exit(1);
  for (size_t t = 0; t < ra * c->lda; t++)
    c->A[t] = kind == 1 ? rand_value(rng, 1) : to_bf16(rand_value(rng, kind));
  for (size_t t = 0; t < rb * c->ldb; t++)
    c->B[t] = kind == 1 ? rand_value(rng, 1) : to_bf16(rand_value(rng, kind));
  for (size_t t = 0; t < M * c->ldc; t++)
    c->C0[t] = (float)ldexp(aa_pcg64_normal(rng), (int)(aa_pcg64_next(rng) % 9) - 2);
}

static void case_free(case_t *c) {
  free(c->A);
  free(c->B);
  free(c->C0);
}

static double *case_run(const case_t *c, int ref) {
  double *C = malloc(c->M * c->ldc * sizeof(double));
  if (C == NULL) exit(1);
  memcpy(C, c->C0, c->M * c->ldc * sizeof(double));
  int st = (ref ? aa_gemm_ref : aa_gemm)(C, c->ldc, c->A, c->lda, c->tA, c->B, c->ldb, c->tB, c->M, c->N, c->K,
                                         c->acc, c->model);
  AA_CHECK(st == AA_OK, "tgemm_tc %s: status %d", ref ? "aa_gemm_ref" : "aa_gemm", st);
  return C;
}

static uint64_t seed;

static int compare(const case_t *c, const double *got, const double *want, const char *what) {
  int bad = 0;
  const tmodel_t *tm = tmodel_of(c->model);
  const int f64 = tm != NULL && tm->ob == 52; /* fp64-seq: binary64 results */
  for (size_t i = 0; i < c->M; i++)
    for (size_t j = 0; j < c->N; j++) {
      double g = got[i * c->ldc + j], w = want[i * c->ldc + j];
      if (isnan(g) && isnan(w)) continue; /* NaN payloads are not part of the model */
      if (f64 ? memcmp(&g, &w, sizeof g) != 0 : bits32((float)g) != bits32((float)w) || g != (double)(float)g) {
        if (bad < 3)
          AA_FAIL("tgemm_tc %s: %s M=%zu N=%zu K=%zu tA=%d tB=%d acc=%d kind=%d C[%zu][%zu] = %a (0x%08x), want %a "
                  "(0x%08x), C_in %a, seed %llu",
                  what, aa_accum_name(c->model), c->M, c->N, c->K, c->tA, c->tB, c->acc, c->kind, i, j, g,
                  bits32((float)g), w, bits32((float)w), c->C0[i * c->ldc + j], (unsigned long long)seed);
        if (bad < 3 && c->K <= 4)
          for (size_t k = 0; k < c->K; k++)
            printf("  k=%zu a=%a b=%a\n", k, c->tA ? c->A[k * c->lda + i] : c->A[i * c->lda + k],
                   c->tB ? c->B[j * c->ldb + k] : c->B[k * c->ldb + j]);
        bad++;
      }
    }
  return bad;
}

/* Case c (freed) on both paths against its model's MPFR test row. */
static void check_mpfr(case_t *c) {
  double *want = malloc(c->M * c->ldc * sizeof(double));
  if (want == NULL) exit(1);
  memcpy(want, c->C0, c->M * c->ldc * sizeof(double));
  for (size_t i = 0; i < c->M; i++)
    for (size_t j = 0; j < c->N; j++)
      want[i * c->ldc + j] =
          model_elem(c->model, c->C0[i * c->ldc + j], c->acc, c->A, c->lda, c->tA, c->B, c->ldb, c->tB, i, j, c->K);
  double *fast = case_run(c, 0), *ref = case_run(c, 1);
  compare(c, fast, want, "aa_gemm vs MPFR model");
  compare(c, ref, want, "aa_gemm_ref vs MPFR model");
  free(fast);
  free(ref);
  free(want);
  case_free(c);
}

/* Random shapes against the MPFR model, both paths. */
static void test_mpfr(aa_pcg64_t *rng, int iters) {
  for (int it = 0; it < iters; it++) {
    aa_accum_t model = tc_models[it % ntc];
    int kind = (int)(aa_pcg64_next(rng) % 3);
    size_t M = 1 + aa_pcg64_next(rng) % 12, N = 1 + aa_pcg64_next(rng) % 12, K = 1 + aa_pcg64_next(rng) % 70;
    case_t c;
    case_make(&c, rng, M, N, K, model, kind);
    check_mpfr(&c);
  }
}

/* The threaded packed path against the reference loop, threads 1 and 2. */
static void test_fast_vs_ref(aa_pcg64_t *rng) {
  static const size_t shapes[][3] = {{37, 41, 300}, {1, 1, 1}, {9, 70, 129}, {64, 64, 128}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int m = 0; m < nfast; m++) {
      case_t c;
      case_make(&c, rng, shapes[s][0], shapes[s][1], shapes[s][2], fast_models[m], (int)(s % 3));
      double *ref = case_run(&c, 1);
      for (int threads = 1; threads <= 2; threads++) {
#ifdef _OPENMP
        omp_set_num_threads(threads);
#else
        if (threads == 2) continue;
#endif
        double *fast = case_run(&c, 0);
        compare(&c, fast, ref, threads == 1 ? "packed path (1 thread) vs loop" : "packed path (2 threads) vs loop");
        free(fast);
      }
      free(ref);
      case_free(&c);
    }
}

/* ---- the fp32 fast path against the previous (binary64) path ----
   aa_gemm_force_kernel("scalar") sends the tc models to the binary64
   packed path, the implementation before the fp32 one; the run-time
   choice takes the fp32 path on AVX-512 CPUs when every product is an
   exact normal fp32 number. Both must give the same bits on every input,
   including those that make the fp32 path hand tiles back. */

/* x rounded to nbits significant bits (RNE; finite x) */
static float round_bits(double x, int nbits) {
  if (x == 0) return 0.0f;
  int e;
  frexp(x, &e);
  return (float)ldexp(nearbyint(ldexp(x, nbits - e)), e - nbits);
}

/* kinds: 0 bf16 N(0,1); 1 bf16 with zeros and exponents spread over +-20;
   2 11-bit significands (fp16-like); 3 huge (block exponents near the top
   of the fp32 path's window and beyond); 4 tiny (products near 2^-110,
   below the window); 5 full fp32 significands (the fp32 path refuses);
   6 products below 2^-126 (refused too); 7 mostly zeros. */
static double fast_value(aa_pcg64_t *rng, int kind) {
  double x = aa_pcg64_normal(rng);
  uint64_t u = aa_pcg64_next(rng);
  switch (kind) {
  case 0:
    return round_bits(x, 8);
  case 1:
    return u % 4 == 0 ? 0.0 : round_bits(ldexp(x, (int)(u >> 8) % 41 - 20), 8);
  case 2:
    return round_bits(x, 11);
  case 3:
    return round_bits(ldexp(x, u % 3 == 0 ? 56 + (int)(u >> 8) % 6 : (int)(u >> 8) % 9 - 4), 8);
  case 4: /* |x| in [1, 2) 2^-(52..57): products from 2^-114 to 2^-102, block exponents below F - 125 */
    return u % 5 == 0 ? 0.0 : round_bits(ldexp(copysign(1 + fmod(fabs(x), 1.0), x), -52 - (int)(u >> 8) % 6), 8);
  case 5:
    return (float)x;
  case 7: /* mostly zeros: whole blocks of zero products, where the accumulator (subnormal, huge, -0) is the only term
           */
    return u % 8 == 0 ? round_bits(x, 8) : 0.0;
  default: /* |x| in [1, 2) 2^-(70..80): products that underflow fp32 (the fp32 path refuses the call) */
    return round_bits(ldexp(copysign(1 + fmod(fabs(x), 1.0), x), -70 - (int)(u >> 8) % 11), 8);
  }
}

static double fast_cin(aa_pcg64_t *rng) {
  uint64_t u = aa_pcg64_next(rng) % 64;
  if (u == 0) return FLT_MAX;
  if (u == 1) return -0x1.8p126;
  if (u == 2) return 0x1p-140;  /* subnormal */
  if (u == 3) return -0x1p-110; /* below the window when the products are zero */
  if (u == 4) return -0.0;
  if (u == 5) return INFINITY;
  return round_bits(ldexp(aa_pcg64_normal(rng), (int)(aa_pcg64_next(rng) % 9) - 2), 24);
}

/* Accumulators the fast path keeps (normal values, -0) but for rare
   subnormals: a tile holding none of fast_cin's huge or infinite values
   stays on the fp32 path, so its lanes meet the accumulator-only blocks of
   kind 7 there. */
static double fast_cin_mild(aa_pcg64_t *rng) {
  uint64_t u = aa_pcg64_next(rng) % 256;
  if (u == 0) return 0x1p-140;
  if (u == 1) return -0x3p-140;
  if (u == 2) return -0.0;
  return round_bits(ldexp(aa_pcg64_normal(rng), (int)(aa_pcg64_next(rng) % 9) - 2), 24);
}

static void test_fast_vs_f64(aa_pcg64_t *rng, int iters) {
  for (int it = 0; it < iters; it++) {
    aa_accum_t model = fast_models[it % nfast];
    int kind = (int)(aa_pcg64_next(rng) % 8), kindb = aa_pcg64_next(rng) % 3 ? kind : (int)(aa_pcg64_next(rng) % 8);
    size_t M = 1 + aa_pcg64_next(rng) % 70, N = 1 + aa_pcg64_next(rng) % 70, K = 1 + aa_pcg64_next(rng) % 300;
    if (it % 17 == 0) K = 256 + 1 + aa_pcg64_next(rng) % 400; /* more than one k chunk of the fp32 path */
    case_t c;
    case_make(&c, rng, M, N, K, model, 0);
    size_t ra = c.tA ? K : M, rb = c.tB ? N : K;
    for (size_t t = 0; t < ra * c.lda; t++)
      c.A[t] = fast_value(rng, kind);
    for (size_t t = 0; t < rb * c.ldb; t++)
      c.B[t] = fast_value(rng, kindb);
    for (size_t t = 0; t < M * c.ldc; t++)
      c.C0[t] = it % 4 == 1 ? fast_cin_mild(rng) : fast_cin(rng);
    c.kind = 10 + kind;
    double *fast = case_run(&c, 0);
    AA_CHECK(aa_gemm_force_kernel("scalar") == AA_OK, "tgemm_tc: force scalar");
    double *old = case_run(&c, 0);
    aa_gemm_force_kernel(NULL);
    compare(&c, fast, old, "fp32 path vs binary64 path");
    if (it % 8 == 0) {
      double *ref = case_run(&c, 1);
      compare(&c, fast, ref, "fp32 path vs loop");
      free(ref);
    }
    free(fast);
    free(old);
    case_free(&c);
  }
}

/* Large operands (packed by several threads, their checks merged): bf16
   values with, in one case, a single full-precision fp32 value of large
   magnitude deep inside A, which the fp32 path must refuse (its products
   are not exact in fp32). */
static void test_fast_large(aa_pcg64_t *rng) {
  for (int t = 0; t < 6; t++) {
    case_t c;
    case_make(&c, rng, 1100, 40, 1000, fast_models[(t * 5) % nfast], 0);
    size_t ra = c.tA ? c.K : c.M, rb = c.tB ? c.N : c.K;
    for (size_t x = 0; x < ra * c.lda; x++)
      c.A[x] = fast_value(rng, 1);
    for (size_t x = 0; x < rb * c.ldb; x++)
      c.B[x] = fast_value(rng, 0);
    if (t % 3 == 2) c.A[(ra - 3) * c.lda + 5] = 0x1.921fb6p+4; /* 8 pi in fp32: 24 significant bits */
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    double *fast = case_run(&c, 0);
    AA_CHECK(aa_gemm_force_kernel("scalar") == AA_OK, "tgemm_tc: force scalar");
    double *old = case_run(&c, 0);
    aa_gemm_force_kernel(NULL);
    compare(&c, fast, old,
            t % 3 == 2 ? "large, one fp32 operand: fp32 path vs binary64" : "large: fp32 path vs binary64");
    free(fast);
    free(old);
    case_free(&c);
  }
}

/* End to end: fa2-h100 (every product on tc-k16-f25) gives the same o, dq,
   dk and dv bits with the run-time path and with the binary64 path, dense
   and causal (sigma 2, so that P spans many binades). */
static void test_attn_e2e(aa_pcg64_t *rng) {
  size_t n = 300, d = 64, shape[3] = {1, n, d};
  aa_tensor_t q = {0}, k = {0}, v = {0}, dO = {0}, *ts[4] = {&q, &k, &v, &dO};
  for (int i = 0; i < 4; i++) {
    AA_CHECK(aa_tensor_alloc(ts[i], 3, shape, AA_FMT_FP64) == AA_OK, "tgemm_tc e2e: alloc");
    for (size_t e = 0; e < n * d; e++)
      ts[i]->data[e] = 2 * aa_pcg64_normal(rng);
    aa_tensor_round(ts[i], AA_FMT_BF16);
  }
  aa_problem_t pb;
  aa_problem_init(&pb, n, n, d, 1, 1);
  for (int causal = 0; causal < 2; causal++) {
    pb.causal = causal;
    aa_recipe_t r;
    aa_error_t err;
    aa_attn_result_t a, b;
    AA_CHECK(aa_recipe_preset(&r, "fa2-h100", &err) == AA_OK, "tgemm_tc e2e: preset");
    aa_gemm_force_kernel(NULL);
    int sa = aa_attn_run(&a, &pb, &r, &q, &k, &v, &dO, &err);
    aa_gemm_force_kernel("scalar");
    int sb = aa_attn_run(&b, &pb, &r, &q, &k, &v, &dO, &err);
    aa_gemm_force_kernel(NULL);
    AA_CHECK(sa == AA_OK && sb == AA_OK, "tgemm_tc e2e: aa_attn_run %d %d", sa, sb);
    if (sa != AA_OK || sb != AA_OK) continue;
    const aa_tensor_t *x[4] = {&a.o, &a.dq, &a.dk, &a.dv}, *y[4] = {&b.o, &b.dq, &b.dk, &b.dv};
    static const char *const nm[4] = {"o", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++) {
      size_t m = aa_tensor_numel(x[i]), diff = 0;
      for (size_t e = 0; e < m; e++)
        diff += memcmp(&x[i]->data[e], &y[i]->data[e], sizeof(double)) != 0;
      AA_CHECK(diff == 0,
               "tgemm_tc e2e: fa2-h100 %s (causal %d): %zu of %zu elements differ between the paths, seed %llu",
               nm[i], causal, diff, m, (unsigned long long)seed);
    }
    aa_attn_result_free(&a);
    aa_attn_result_free(&b);
  }
  for (int i = 0; i < 4; i++)
    aa_tensor_free(ts[i]);
}

/* Hand-derived single-element cases: a row of K values times a column of
   ones (or given b), expected bits worked out below from the definition. */
static void one(aa_accum_t model, const char *what, float cin, int accumulate, const float *a, const float *b,
                size_t K, float want) {
  double A[64], B[64], C[1] = {cin};
  for (size_t k = 0; k < K; k++) {
    A[k] = a[k];
    B[k] = b != NULL ? b[k] : 1.0;
  }
  for (int ref = 0; ref < 2; ref++) {
    C[0] = cin;
    int st = (ref ? aa_gemm_ref : aa_gemm)(C, 1, A, K, 0, B, 1, 0, 1, 1, K, accumulate, model);
    float g = (float)C[0];
    int same = isnan(want) ? isnan(g) : bits32(g) == bits32(want);
    AA_CHECK(st == AA_OK && same,
             "tgemm_tc case %s (%s, %s): got %a (0x%08x), want %a (0x%08x), C_in %a, accumulate %d", what,
             aa_accum_name(model), ref ? "ref" : "fast", g, bits32(g), want, bits32(want), cin, accumulate);
  }
}

static void test_cases(void) {
  const aa_accum_t T16 = AA_ACC_TC_K16_F25, T8 = AA_ACC_TC_K8_F24;
  float a[64];
  /* 1 + 15 * 2^-25 in one block of 16: E = 0, F = 25 keeps each 2^-25,
     the exact sum 1 + 15 2^-25 = 1 + 3.75 2^-23 truncates to 1 + 3 2^-23.
     (An fp32 FMA chain gives 1: each 2^-25 is below half an ulp.) With
     F = 24 (blocks of 8) each 2^-25 truncates to 0: the result is 1. */
  a[0] = 1;
  for (int k = 1; k < 16; k++)
    a[k] = 0x1p-25f;
  one(T16, "1 + 15 ulp/4", 0, 0, a, NULL, 16, 1 + 0x3p-23f);
  one(T8, "1 + 15 ulp/4", 0, 0, a, NULL, 16, 1.0f);
  /* The same 15 small terms without the 1 (E = -25): exact, 15 2^-25. */
  one(T16, "15 * 2^-25 alone", 0, 0, a + 1, NULL, 15, 15 * 0x1p-25f);
  /* Accumulator as the large term: C = 1, products 2^-25 x 16 -> same as
     above but 16 small terms: 1 + 16 2^-25 = 1 + 4 2^-23 exactly. */
  for (int k = 0; k < 16; k++)
    a[k] = 0x1p-25f;
  one(T16, "C = 1 + 16 ulp/4", 1.0f, 1, a, NULL, 16, 1 + 0x4p-23f);
  /* accumulate off: C ignored, the block is 16 2^-25 = 2^-21 exactly. */
  one(T16, "accumulate off", 1.0f, 0, a, NULL, 16, 0x1p-21f);
  /* Two blocks (K = 17): block 1 = 16 2^-25 from +0 -> 2^-21; block 2 =
     acc 2^-21 + product 1: E = 0, 2^-21 kept (multiple of 2^-25): 1 + 2^-21. */
  a[16] = 1;
  one(T16, "two blocks", 0, 0, a, NULL, 17, 1 + 0x1p-21f);
  /* Truncation toward zero of a negative term: 1 + (-3 2^-26): the term is
     -1.5 2^-25, truncated to -2^-25; 1 - 2^-25 truncates (RZ, 24 bits) to
     1 - 2^-24. */
  a[0] = 1, a[1] = -0x3p-26f;
  one(T16, "negative truncation", 0, 0, a, NULL, 2, 1 - 0x1p-24f);
  /* Cancellation: C = 1, products -1 and 2^-30: 2^-30 lies below 2^-25,
     truncated to 0; the exact sum is 0 -> +0 (an FMA chain gives 2^-30). */
  a[0] = -1, a[1] = 0x1p-30f;
  one(T16, "cancellation", 1.0f, 1, a, NULL, 2, 0.0f);
  /* ... while the same small product survives in a block of its own (K =
     17 puts it alone with the accumulator 0 of block 1): exactly 2^-30. */
  for (int k = 0; k < 16; k++)
    a[k] = (k % 2) ? -1.0f : 1.0f;
  a[16] = 0x1p-30f;
  one(T16, "cancel then small", 0, 0, a, NULL, 17, 0x1p-30f);
  /* A zero accumulator takes no part in E: C = +0, product 3 2^-40 is exact. */
  a[0] = 0x3p-40f;
  one(T16, "zero accumulator", 0.0f, 1, a, NULL, 1, 0x3p-40f);
  /* Signed zeros: (-0) * 1 with accumulate off gives +0. */
  a[0] = -0.0f;
  one(T16, "negative zero", 0.0f, 0, a, NULL, 1, 0.0f);
  one(T16, "negative zero acc", -0.0f, 1, a, NULL, 1, 0.0f);
  /* Significand product in [2, 4): a = b = 1.5 gives 2.25 = 1.125 2^1, so
     E = 1 and the quantum is 2^-24: with 2^-25 * 3 added it truncates to 2^-24
     (E = 0 would have kept 3 2^-25). 2.25 + 2^-24 rounds RZ at ulp 2^-22 to 2.25. */
  {
    float aa[2] = {1.5f, 0x3p-25f}, bb[2] = {1.5f, 1.0f};
    one(T16, "product exponent from the value", 0, 0, aa, bb, 2, 2.25f);
    float cc[3] = {1.5f, 0x3p-25f, 0x3p-25f}, dd[3] = {1.5f, 1.0f, 1.0f};
    /* 2.25 + 2 2^-24 = 2.25 + 2^-23: still below the ulp 2^-22 -> 2.25 */
    one(T16, "two truncated terms", 0, 0, cc, dd, 3, 2.25f);
  }
  /* Subnormal results: 2^-140 * 2^-10 = 2^-150 alone truncates to +0;
     3 2^-150 truncates to 2^-149 (RZ at the subnormal quantum). */
  {
    float aa[1] = {0x1p-140f}, bb[1] = {0x1p-10f}, cc[1] = {0x3p-140f}, nn[1] = {-0x1p-140f};
    one(T16, "subnormal to zero", 0, 0, aa, bb, 1, 0.0f);
    one(T16, "negative subnormal to -0", 0, 0, nn, bb, 1, -0.0f);
    one(T16, "subnormal RZ", 0, 0, cc, bb, 1, 0x1p-149f);
  }
  /* Overflow, as the H200's mma.sync and wgmma give it (fixtures/h200-fa2/probe_tc_overflow.py, the hardware's
     own results): C = FLT_MAX plus the product FLT_MAX * 1, exact 2 FLT_MAX >= 2^128, is +Inf (IEEE RZ would give
     FLT_MAX); negative likewise; a sum in [FLT_MAX, 2^128) truncates to FLT_MAX; and a block whose exact sum is
     finite stays finite though its terms in sequence overflow (2^127 + 2^127 - 2^127 = 2^127 on the H200). */
  a[0] = FLT_MAX;
  one(T16, "overflow to Inf", FLT_MAX, 1, a, NULL, 1, INFINITY);
  a[0] = -FLT_MAX;
  one(T16, "negative overflow to -Inf", -FLT_MAX, 1, a, NULL, 1, -INFINITY);
  a[0] = 0x1p103f;
  one(T16, "below 2^128: RZ to FLT_MAX", FLT_MAX, 1, a, NULL, 1, FLT_MAX);
  {
    float big[3] = {0x1p127f, 0x1p127f, -0x1p127f};
    one(T16, "finite block of overflowing terms", 0.0f, 0, big, NULL, 3, 0x1p127f);
  }
  /* Products beyond fp32 are exact: 2^100 * 2^100 - 2^100 * 2^100 = 0. */
  {
    float aa[2] = {0x1p100f, -0x1p100f}, bb[2] = {0x1p100f, 0x1p100f};
    one(T16, "huge products cancel", 0, 0, aa, bb, 2, 0.0f);
  }
  /* Inf and NaN. */
  a[0] = INFINITY, a[1] = 1;
  one(T16, "Inf operand", 0, 0, a, NULL, 2, INFINITY);
  a[0] = INFINITY, a[1] = -INFINITY;
  one(T16, "Inf - Inf", 0, 0, a, NULL, 2, NAN);
  {
    float aa[1] = {INFINITY}, bb[1] = {0};
    one(T16, "Inf * 0", 0, 0, aa, bb, 1, NAN);
  }
  a[0] = 1;
  one(T16, "Inf accumulator", INFINITY, 1, a, NULL, 1, INFINITY);
}

/* ---- cdna3-k8-f24 against its own MPFR model, written from MMA-Sim
   (mmasim/simulator/amd.py:39-43 and 87-98; arithmetic.py:227-285, the
   branch without FP8) and the definition in gemm.h ---- */

static float mpfr_cdna3_group(float acc, const float *a, const float *b, size_t n) {
  mpfr_t x, y, p[8], S, A, R, r;
  mpfr_inits2(256, S, A, R, (mpfr_ptr)0);
  mpfr_inits2(24, x, y, (mpfr_ptr)0);
  mpfr_init2(r, 24);
  double sp = isfinite(acc) ? 0.0 : (double)acc;
  int special = !isfinite(acc), any = 0;
  long ep = 0, ea[8] = {0};
  for (size_t i = 0; i < n; i++) {
    mpfr_init2(p[i], 64);
    mpfr_set_flt(x, a[i], MPFR_RNDN);
    mpfr_set_flt(y, b[i], MPFR_RNDN);
    mpfr_mul(p[i], x, y, MPFR_RNDN); /* exact */
    if (mpfr_nan_p(p[i])) {
      special = 1, sp += NAN;
    } else if (mpfr_inf_p(p[i]) || mpfr_get_exp(p[i]) > 128) {
      special = 1,
      sp += mpfr_sgn(p[i]) > 0 ? INFINITY : -INFINITY; /* |p| >= 2^128 (exponent above 128) counts as Inf */
    } else if (!mpfr_zero_p(p[i])) {
      ea[i] = op_exp(x) + op_exp(y);
      if (!any || ea[i] > ep) ep = ea[i];
      any = 1;
    }
  }
  float out;
  if (special) {
    out = (float)sp;
  } else {
    mpfr_set_ui(S, 0, MPFR_RNDN);
    for (size_t i = 0; i < n && any; i++)
      if (!mpfr_zero_p(p[i])) {
        mpfr_mul_2si(p[i], p[i], 24 - ep, MPFR_RNDN);
        mpfr_trunc(p[i], p[i]);
        mpfr_mul_2si(p[i], p[i], ep - 24, MPFR_RNDN);
        mpfr_add(S, S, p[i], MPFR_RNDN); /* exact in 256 bits */
      }
    mpfr_set_flt(A, acc, MPFR_RNDN);
    long E = ep;
    int have = any;
    if (acc != 0 && (!have || op_exp(A) > E)) E = op_exp(A), have = 1;
    if (!have) {
      out = 0.0f;
    } else {
      mpfr_mul_2si(S, S, 31 - E, MPFR_RNDN);
      mpfr_floor(S, S);
      mpfr_mul_2si(S, S, E - 31, MPFR_RNDN);
      mpfr_mul_2si(A, A, 24 - E, MPFR_RNDN);
      mpfr_floor(A, A);
      mpfr_mul_2si(A, A, E - 24, MPFR_RNDN);
      mpfr_add(R, S, A, MPFR_RNDN); /* exact */
      if (mpfr_zero_p(R)) {
        out = 0.0f;
      } else {
        out = mpfr_round32(r, R, 23, MPFR_RNDN);
      }
    }
  }
  for (size_t i = 0; i < n; i++)
    mpfr_clear(p[i]);
  mpfr_clears(S, A, R, x, y, r, (mpfr_ptr)0);
  return out;
}

static void test_cdna3(aa_pcg64_t *rng, int iters) {
  for (int it = 0; it < iters; it++) {
    int kind = (int)(aa_pcg64_next(rng) % 3);
    size_t M = 1 + aa_pcg64_next(rng) % 9, N = 1 + aa_pcg64_next(rng) % 9, K = 1 + aa_pcg64_next(rng) % 40;
    if (it % 4 == 0) /* bf16 normals on whole tiles (4 x 32) of the packed fast path */
      kind = 0, M = 1 + aa_pcg64_next(rng) % 40, N = 1 + aa_pcg64_next(rng) % 70, K = 1 + aa_pcg64_next(rng) % 70;
    case_t c;
    case_make(&c, rng, M, N, K, AA_ACC_CDNA3_K8_F24, kind);
    check_mpfr(&c);
  }
}

/* Hand-derived cases of the new models. */
static void test_new_cases(void) {
  float a[64] = {0}, z[64] = {0};
  /* A100 m16n8k16 = two k = 8 halves (MMA-Sim nv_ptx.py:35-44, 73-87):
     1 + 2^-24 in each half truncates (RZ at ulp 2^-23) to 1 twice, so
     tc-k8-f24 gives 1; one fused block of 16 at F = 24 would keep both
     2^-24 terms: 1 + 2^-23. The MPFR model agrees on both counts. */
  a[0] = 1, a[1] = 0x1p-24f, a[8] = 0x1p-24f;
  float ones[64];
  for (int k = 0; k < 64; k++)
    ones[k] = 1;
  one(AA_ACC_TC_K8_F24, "k16 as two k8 halves", 0, 0, a, NULL, 16, 1.0f);
  float h = 0, whole = 0;
  h = mpfr_block(&h, a, ones, 8, 24, 23);
  h = mpfr_block(&h, a + 8, ones, 8, 24, 23);
  whole = mpfr_block(&whole, a, ones, 16, 24, 23);
  AA_CHECK(h == 1.0f && whole == 1 + 0x1p-23f,
           "tgemm_tc split-k: MPFR halves %a (want 1), one block %a (want 1+2^-23)", h, whole);
  /* V100, blocks of 4 at F = 23: 1 + 4 2^-24 over K = 5: each 2^-24 lies
     below the quantum 2^-23 of its block: 1. tc-k8-f24 (one block, quantum
     2^-24) keeps them: 1 + 2^-22. */
  memcpy(a, z, sizeof a);
  a[0] = 1;
  for (int k = 1; k < 5; k++)
    a[k] = 0x1p-24f;
  one(AA_ACC_TC_K4_F23, "v100 quantum", 0, 0, a, NULL, 5, 1.0f);
  one(AA_ACC_TC_K8_F24, "a100 quantum", 0, 0, a, NULL, 5, 1 + 0x1p-22f);
  /* Hopper FP8: 1 + 2^-13 + 1.5 2^-13: the second truncates to 2^-13:
     1 + 2^-12, an e8m13 value. 1 + 1 + 2^-13 = 2 + 2^-13 needs 15 bits:
     the e8m13 result truncates it to 2 (fp32 keeps it: tc-fp8-k32-f25). */
  memcpy(a, z, sizeof a);
  a[0] = 1, a[1] = 0x1p-13f, a[2] = 0x3p-14f;
  one(AA_ACC_TC_FP8_K32_F13, "fp8 quantum", 0, 0, a, NULL, 3, 1 + 0x1p-12f);
  a[1] = 1, a[2] = 0x1p-13f;
  one(AA_ACC_TC_FP8_K32_F13, "e8m13 result", 0, 0, a, NULL, 3, 2.0f);
  one(AA_ACC_TC_FP8_K32_F25, "fp32 result", 0, 0, a, NULL, 3, 2 + 0x1p-13f);
  /* e8m13 subnormals: multiples of 2^-139. 3 2^-140 -> 2^-139; 2^-140 -> +0. */
  {
    float aa[1] = {0x3p-70f}, bb[1] = {0x1p-70f}, cc[1] = {0x1p-70f};
    one(AA_ACC_TC_FP8_K32_F13, "e8m13 subnormal", 0, 0, aa, bb, 1, 0x1p-139f);
    one(AA_ACC_TC_FP8_K32_F13, "e8m13 underflow", 0, 0, cc, bb, 1, 0.0f);
  }
  /* CDNA3. C = 1, product -5 2^-27: the products alone set e_p, so stage 1
     keeps it exactly, and stage 2 (a multiple of 2^-31) too; 1 - 5 2^-27
     rounds to nearest: 1 - 2^-24. tc-k8-f24 aligns the product to the
     accumulator (quantum 2^-24) and truncates it to 0: 1. */
  memcpy(a, z, sizeof a);
  a[0] = -0x5p-27f;
  one(AA_ACC_CDNA3_K8_F24, "cdna3 two stages, nearest", 1.0f, 1, a, NULL, 1, 1 - 0x1p-24f);
  one(AA_ACC_TC_K8_F24, "a100 alignment to the accumulator", 1.0f, 1, a, NULL, 1, 1.0f);
  /* C = -(1 + 2^-23), product 2 * 2 (e_p = 2): the accumulator is rounded
     down to a multiple of 2^-22: -(1 + 2^-22); 4 - 1 - 2^-22 = 3 - 2^-22
     exactly (the exact sum 3 - 2^-23 would round to 3). */
  {
    float aa[1] = {2}, bb[1] = {2};
    one(AA_ACC_CDNA3_K8_F24, "cdna3 accumulator rounded down", -(1 + 0x1p-23f), 1, aa, bb, 1, 3 - 0x1p-22f);
    /* a product of 2^64 * 2^64 = 2^128 counts as +Inf */
    float cc[1] = {0x1p64f};
    float dd[1] = {0x1p64f};
    one(AA_ACC_CDNA3_K8_F24, "cdna3 product 2^128 is Inf", 0, 0, cc, dd, 1, INFINITY);
  }
  /* A subnormal accumulator and zero products: the accumulator is the only
     nonzero term, E = -140, and its truncation to 2^(E-F) keeps it: C stays
     2^-140 (fp32 results); an e8m13 result has subnormals in multiples of
     2^-139 and truncates it to +0, and -1.5 2^-139 to -2^-139. cdna3:
     E = e(acc) = -126, acc rounded down to a multiple of 2^-150 is itself. */
  memcpy(a, z, sizeof a);
  for (int m = 0; m < nfast; m++) {
    const aa_accum_t fm = fast_models[m];
    one(fm, "subnormal accumulator, zero products", 0x1p-140f, 1, a, NULL, 3,
        fm == AA_ACC_TC_FP8_K32_F13 ? 0.0f : 0x1p-140f);
    one(fm, "negative subnormal accumulator, zero products", -0x3p-140f, 1, a, NULL, 20,
        fm == AA_ACC_TC_FP8_K32_F13 ? -0x1p-139f : -0x3p-140f);
  }
  /* Groups of 8: nine products 1 with C = 2^24: group 1 gives 2^24 + 8
     exactly, group 2 adds 1: 2^24 + 9 is a tie between 2^24 + 8 and 2^24 +
     10, to even: 2^24 + 8. */
  for (int k = 0; k < 9; k++)
    a[k] = 1;
  one(AA_ACC_CDNA3_K8_F24, "cdna3 groups of 8", 0x1p24f, 1, a, NULL, 9, 0x1p24f + 8);
}

static void test_names(void) {
  aa_accum_t m;
  AA_CHECK(aa_accum_from_name(&m, "tc-k16-f25") == AA_OK && m == AA_ACC_TC_K16_F25, "tgemm_tc names: tc-k16-f25");
  AA_CHECK(aa_accum_from_name(&m, "tc-k8-f24") == AA_OK && m == AA_ACC_TC_K8_F24, "tgemm_tc names: tc-k8-f24");
  AA_CHECK(strcmp(aa_accum_name(AA_ACC_TC_K8_F24), "tc-k8-f24") == 0, "tgemm_tc names: name of tc-k8-f24");
  int k = 0, f = 0;
  AA_CHECK(aa_accum_tc_params(AA_ACC_TC_K16_F25, &k, &f) == AA_OK && k == 16 && f == 25, "tgemm_tc params k16");
  AA_CHECK(aa_accum_tc_params(AA_ACC_TC_K8_F24, &k, &f) == AA_OK && k == 8 && f == 24, "tgemm_tc params k8");
  AA_CHECK(aa_accum_tc_params(AA_ACC_FP32_SEQ, &k, &f) == AA_ENOTFOUND, "tgemm_tc params of fp32-seq");
  AA_CHECK(strstr(aa_accum_describe(AA_ACC_TC_K16_F25), "25 fractional") != NULL, "tgemm_tc describe k16");
  AA_CHECK(aa_accum_from_name(&m, "cdna3-k8-f24") == AA_OK && m == AA_ACC_CDNA3_K8_F24, "tgemm_tc names: cdna3");
  AA_CHECK(aa_accum_tc_params(AA_ACC_CDNA3_K8_F24, &k, &f) == AA_OK && k == 8 && f == 24, "tgemm_tc params cdna3");
}

/* 1 when key is "" or has its anchor <a id="key"> in REFERENCES.md of the
   source tree ($srcdir, set by make check, else the configured one). */
static int ref_key(const char *key) {
  if (key[0] == '\0') return 1;
  const char *dir = getenv("srcdir");
  char path[4096], line[1024], want[256];
  snprintf(path, sizeof path, "%s/REFERENCES.md", dir != NULL ? dir : AA_TOP_SRCDIR);
  snprintf(want, sizeof want, "<a id=\"%s\">", key);
  FILE *f = fopen(path, "r");
  AA_CHECK(f != NULL, "tgemm_tc table: cannot read %s", path);
  int found = 0;
  while (f != NULL && !found && fgets(line, sizeof line, f) != NULL)
    found = strstr(line, want) != NULL;
  if (f != NULL) fclose(f);
  return found;
}

/* The library's table of models against the MPFR test rows above: every
   row has a test row with the same parameters (so no model can be added
   without its independent model here), its fields are consistent, and a
   few random products of every row, on both paths, match its MPFR model
   bit for bit (a row that no path serves fails here with its status). The
   rows of the test table name library rows too. */
static void test_table(aa_pcg64_t *rng, int iters) {
  for (int m = 0; m < AA_ACC_COUNT; m++) {
    const aa_accum_info_t *r = &aa_accum_table[m];
    AA_CHECK(r->model == (aa_accum_t)m && aa_accum_info((aa_accum_t)m) == r, "tgemm_tc table: row %d holds model %d",
             m, (int)r->model);
    AA_CHECK(r->name != NULL && r->description != NULL && strlen(r->description) > 10 && r->cite != NULL,
             "tgemm_tc table: row %d lacks a name, description or citation", m);
    if (r->name == NULL || r->cite == NULL) continue;
    /* a block model cites its source, a key of REFERENCES.md; the IEEE models cite none */
    const int promoted = r->sum == AA_SUM_PROMOTED;
    AA_CHECK((r->sum == AA_SUM_BLOCK || r->sum == AA_SUM_BLOCK2 || r->sum == AA_SUM_SCALED || promoted) ==
                     (r->cite[0] != '\0') &&
                 ref_key(r->cite),
             "tgemm_tc table: %s cites '%s', not a key of REFERENCES.md", r->name, r->cite);
    const tmodel_t *tm = tmodel_of((aa_accum_t)m);
    AA_CHECK(tm != NULL, "tgemm_tc table: model %s has no MPFR test row in tests/tgemm_tc.c", r->name);
    if (tm == NULL) continue;
    AA_CHECK(tm->sum == r->sum && tm->k == r->block_k && tm->F == r->frac_bits && tm->ob == r->out_bits &&
                 tm->rnd == r->rnd,
             "tgemm_tc table: %s is (rule %d, K %d, F %d, %d result bits, rounding %d) in the library, (%d, %d, %d, "
             "%d, %d) in its test row",
             r->name, (int)r->sum, r->block_k, r->frac_bits, r->out_bits, (int)r->rnd, (int)tm->sum, tm->k, tm->F,
             tm->ob, (int)tm->rnd);
    const tpromo_t *tp = tpromo_of(r->name);
    AA_CHECK(promoted ? tp != NULL && tp->P == r->promote_k && tp->g == r->k_granule && tp->ib == r->inner_bits &&
                            tp->irnd == r->inner_rnd && tp->ebits == r->out_ebits
                      : r->promote_k == 0 && r->k_granule == 0 && r->inner_bits == 0 && r->out_ebits == 0,
             "tgemm_tc table: the promotion fields of %s differ from its test row", r->name);
    int k = -1, f = -1, blocked = r->sum == AA_SUM_BLOCK || r->sum == AA_SUM_BLOCK2 || promoted;
    AA_CHECK((aa_accum_tc_params((aa_accum_t)m, &k, &f) == AA_OK) == blocked &&
                 (!blocked || (k == r->block_k && f == r->frac_bits)),
             "tgemm_tc table: aa_accum_tc_params of %s", r->name);
    for (int it = 0; it < iters; it++) {
      int kind = (int)(aa_pcg64_next(rng) % 3);
      size_t M = 1 + aa_pcg64_next(rng) % 9, N = 1 + aa_pcg64_next(rng) % 40, K = 1 + aa_pcg64_next(rng) % 70;
      case_t c;
      case_make(&c, rng, M, N, K, (aa_accum_t)m, kind);
      check_mpfr(&c);
    }
  }
  for (int i = 0; i < NTM; i++)
    AA_CHECK(aa_accum_from_name(NULL, tmodels[i].name) == AA_OK, "tgemm_tc table: test row %s names no model",
             tmodels[i].name);
}

/* The promoted rows against their MPFR models on shapes of several chunks
   (K up to 300: three chunks of 128, ten of 32), every operand kind. */
static void test_promoted(aa_pcg64_t *rng, int iters) {
  for (int it = 0; it < iters; it++)
    for (int m = 0; m < AA_ACC_COUNT; m++) {
      if (aa_accum_table[m].sum != AA_SUM_PROMOTED) continue;
      size_t M = 1 + aa_pcg64_next(rng) % 5, N = 1 + aa_pcg64_next(rng) % 9, K = 1 + aa_pcg64_next(rng) % 300;
      case_t c;
      case_make(&c, rng, M, N, K, (aa_accum_t)m, it % 3);
      check_mpfr(&c);
    }
}

/* The int32 sums of the fp32 path at their limit: 32 equal FP8 products 1.875^2 = 3.515625 align to E = 0
   (operand exponents), so each is 3.515625 2^25 after scaling and the 32 of tc-fp8-k32-f25 sum to
   3774873600 > 2^31; for tc-k16-f25, 16 BF16 products (2 - 2^-7)^2 sum to 2130706432 and an accumulator
   of 1.99 (E stays 0) takes them past 2^31. Both must leave the fast path and give the exact sums rounded
   toward zero: 112.5, and RZ(63.5009765625 + fl32(1.99)). */
static float rz_f32(double x) {
  float f = (float)x;
  if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
  return f;
}

static void test_int32_edge(void) {
  double A[32 * 32], B[32 * 32], C[32 * 32];
  for (size_t i = 0; i < 32 * 32; i++)
    A[i] = B[i] = 1.875;
  AA_CHECK(aa_gemm(C, 32, A, 32, 0, B, 32, 0, 32, 32, 32, 0, AA_ACC_TC_FP8_K32_F25) == AA_OK, "int32 edge: fp8 gemm");
  size_t bad = 0;
  for (size_t i = 0; i < 32 * 32; i++)
    bad += C[i] != 112.5;
  AA_CHECK(bad == 0, "int32 edge: tc-fp8-k32-f25 gives %zu elements other than 112.5 (first %a)", bad, C[0]);
  const double b = 1.9921875, c0 = (float)1.99;
  for (size_t i = 0; i < 32 * 32; i++)
    A[i] = B[i] = b, C[i] = c0;
  AA_CHECK(aa_gemm(C, 32, A, 32, 0, B, 32, 0, 32, 32, 16, 1, AA_ACC_TC_K16_F25) == AA_OK, "int32 edge: k16 gemm");
  double want = rz_f32(16 * b * b + c0); /* exact in binary64: every term is a multiple of 2^-25 */
  bad = 0;
  for (size_t i = 0; i < 32 * 32; i++)
    bad += C[i] != want;
  AA_CHECK(bad == 0, "int32 edge: tc-k16-f25 gives %zu elements other than %a (first %a)", bad, want, C[0]);
}

/* ---- block-scaled products with their scales (aa_gemm_scaled) ---- */
/* The scale formats per row, from the PTX ISA (kind::mxf8f6f4: E8M0 per
   32; kind::mxf4nvf4: E8M0 per 32 for MXFP4, UE4M3 per 16 for NVFP4),
   written here, not read from the library's rows. */
static sparams_t sparams_of(const char *name, int *sblock) {
  if (strcmp(name, "tc-nvfp4-k64-f35") == 0) return *sblock = 16, (sparams_t){64, 35, 0, 0, -6};
  if (strcmp(name, "tc-mxfp4-k64-f35") == 0) return *sblock = 32, (sparams_t){64, 35, 0, 0, -127};
  return *sblock = 32, (sparams_t){32, 25, -6, -14, -127}; /* A E4M3, B E5M2 */
}

static double draw_elem(aa_pcg64_t *rng, const sparams_t *p, int b_side) {
  static const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  uint64_t u = aa_pcg64_next(rng);
  if (p->k == 64) return (u & 8 ? -1 : 1) * e2m1[u & 7];
  double v = aa_fmt_decode(u & 0xff, b_side ? AA_FMT_E5M2 : AA_FMT_E4M3);
  return isfinite(v) ? v : 0.0;
}

static double draw_scale(aa_pcg64_t *rng, const sparams_t *p) {
  uint64_t u = aa_pcg64_next(rng);
  if (p->semin == -6) { /* UE4M3: any finite code, a negative one now and then (MMA-Sim takes |s|) */
    double v = aa_fmt_decode(u & 0x7e, AA_FMT_E4M3);
    return u & 0x100 && u & 0x200 ? -v : v;
  }
  int k = (int)(u % 41) - 20; /* E8M0: mostly near 1, sometimes at the range's ends */
  if (u % 17 == 0) k = (int)((u >> 8) % 2 ? 100 : -110);
  return ldexp(1.0, k);
}

static void test_scaled(aa_pcg64_t *rng, int iters) {
  static const char *const rows[] = {"tc-mxfp8-k32-f25", "tc-mxfp4-k64-f35", "tc-nvfp4-k64-f35"};
  for (int it = 0; it < iters; it++) {
    aa_accum_t model;
    int sbk;
    if (aa_accum_from_name(&model, rows[it % 3]) != AA_OK) {
      AA_FAIL("tgemm_tc scaled: no row %s", rows[it % 3]);
      return;
    }
    sparams_t p = sparams_of(rows[it % 3], &sbk);
    size_t M = 1 + aa_pcg64_next(rng) % 4, N = 1 + aa_pcg64_next(rng) % 5, K = sbk * (1 + aa_pcg64_next(rng) % 6);
    size_t nkb = K / (size_t)sbk;
    double A[4 * 192], B[192 * 5], sa[4 * 12], sb[12 * 5], C[4 * 5], C0[4 * 5];
    for (size_t x = 0; x < M * K; x++)
      A[x] = draw_elem(rng, &p, 0);
    for (size_t x = 0; x < K * N; x++)
      B[x] = draw_elem(rng, &p, 1);
    for (size_t x = 0; x < M * nkb; x++)
      sa[x] = draw_scale(rng, &p);
    for (size_t x = 0; x < nkb * N; x++)
      sb[x] = draw_scale(rng, &p);
    for (size_t x = 0; x < M * N; x++)
      C[x] = C0[x] = it % 4 ? (float)ldexp(aa_pcg64_normal(rng), (int)(aa_pcg64_next(rng) % 30) - 10) : 0.0;
    aa_gemm_scales_t sc = {sa, sb, p.emin_a, p.emin_b};
    int acc = it % 5 != 0;
    AA_CHECK(aa_gemm_scaled(C, N, A, K, B, N, M, N, K, acc, model, &sc) == AA_OK, "tgemm_tc scaled: status");
    for (size_t i = 0; i < M; i++)
      for (size_t j = 0; j < N; j++) {
        double a[192], b[192], ka[192], kb[192];
        for (size_t k = 0; k < K; k++)
          a[k] = A[i * K + k], b[k] = B[k * N + j], ka[k] = sa[i * nkb + k / sbk], kb[k] = sb[k / sbk * N + j];
        float want = scaled_chain(acc ? (float)C0[i * N + j] : 0.0f, a, b, ka, kb, K, &p);
        if (bits32((float)C[i * N + j]) != bits32(want))
          AA_FAIL("tgemm_tc scaled %s M=%zu N=%zu K=%zu acc=%d C[%zu][%zu] = %a, MPFR %a (seed %llu)", rows[it % 3],
                  M, N, K, acc, i, j, C[i * N + j], want, (unsigned long long)seed);
      }
  }
}

/* Worked examples, derived by hand from MMA-Sim's source (arithmetic.py
   lines above), where the model differs from the exact sum rounded
   toward zero. */
static float scaled1(const char *row, const double *a, const double *b, size_t K, const double *sa, const double *sb,
                     double c, int emin) {
  aa_accum_t m;
  double C = c;
  aa_gemm_scales_t s = {sa, sb, emin, emin};
  if (aa_accum_from_name(&m, row) != AA_OK || aa_gemm_scaled(&C, 1, a, K, b, 1, 1, 1, K, 1, m, &s) != AA_OK)
    return NAN;
  return (float)C;
}

static void test_scaled_cases(void) {
  double a[64] = {0}, b[64] = {0}, sa[4], sb[4];
  /* NVFP4: 6 x 6 with UE4M3 scales 448 x 448 (exponent 8 + 8 = 16): the term 36 * 448^2 = 7225344 sets
     E = 16, so the accumulator -2^-20 is truncated toward zero on the grid 2^(16-35) = 2^-19, to 0: the
     result is 7225344, where the exact sum rounded toward zero is 7225343.5 */
  a[0] = b[0] = 6;
  for (int x = 0; x < 4; x++)
    sa[x] = sb[x] = x == 0 ? 448 : 1;
  float got = scaled1("tc-nvfp4-k64-f35", a, b, 64, sa, sb, -0x1p-20, 0);
  AA_CHECK(got == 7225344.0f, "scaled case nvfp4: %a, want 7225344 (exact RZ would give 7225343.5)", got);
  /* MXFP4: group 0 (k 0..15) holds 16 products -6 x 6 = -576 with scales 1 x 1 (exponent 0); group 2
     (k 32..47) holds 0.5 x 0.5 with scales 2^30 x 2^30, the term 2^58 with exponent 60 alone (not the
     group sum's): E = 60, the grid 2^25 truncates -576 to 0 and the result is 2^58; the exact sum 2^58 -
     576 rounds toward zero to 2^58 - 2^34 */
  memset(a, 0, sizeof a), memset(b, 0, sizeof b);
  for (int k = 0; k < 16; k++)
    a[k] = -6, b[k] = 6;
  a[32] = b[32] = 0.5;
  sa[0] = sb[0] = 1, sa[1] = sb[1] = 0x1p30;
  got = scaled1("tc-mxfp4-k64-f35", a, b, 64, sa, sb, 0, 0);
  AA_CHECK(got == 0x1p58f, "scaled case mxfp4: %a, want 0x1p58 (exact RZ would give 0x1.fffffep57)", got);
  /* MXFP8: E4M3's smallest subnormal 2^-9 squared is 2^-18, but its exponent is taken as -6 + -6 = -12
     (E4M3's emin): E = -12, grid 2^-37, and the accumulator 2^-30 + 2^-40 loses its 2^-40: 2^-18 + 2^-30.
     With fp32's clamp (aa_gemm, emin -126) E = -18, grid 2^-43, and 2^-40 stays */
  memset(a, 0, sizeof a), memset(b, 0, sizeof b);
  a[0] = b[0] = 0x1p-9;
  sa[0] = sb[0] = 1;
  got = scaled1("tc-mxfp8-k32-f25", a, b, 32, sa, sb, 0x1p-30 + 0x1p-40, -6);
  AA_CHECK(got == 0x1p-18f + 0x1p-30f, "scaled case mxfp8 e4m3: %a, want %a", got, 0x1p-18 + 0x1p-30);
  got = scaled1("tc-mxfp8-k32-f25", a, b, 32, sa, sb, 0x1p-30 + 0x1p-40, -126);
  AA_CHECK(got == (float)(0x1p-18 + 0x1p-30 + 0x1p-40), "scaled case mxfp8 fp32 clamp: %a", got);
  /* aa_gemm with every scale 1 on the MXFP8 row is tc-fp8-k32-f25 (same k, F, RZ; scales 2^0) */
  double A[3 * 40], B[40 * 2], C1[6], C2[6];
  for (int x = 0; x < 120; x++)
    A[x] = aa_fmt_decode((unsigned)(x * 37 + 11) & 0x77, AA_FMT_E4M3);
  for (int x = 0; x < 80; x++)
    B[x] = aa_fmt_decode((unsigned)(x * 53 + 5) & 0xf7, AA_FMT_E4M3);
  int st1 = aa_gemm(C1, 2, A, 40, 0, B, 2, 0, 3, 2, 40, 0, AA_ACC_TC_MXFP8_K32_F25);
  int st2 = aa_gemm(C2, 2, A, 40, 0, B, 2, 0, 3, 2, 40, 0, AA_ACC_TC_FP8_K32_F25);
  AA_CHECK(st1 == AA_OK && st2 == AA_OK && memcmp(C1, C2, sizeof C1) == 0,
           "scaled: tc-mxfp8-k32-f25 with unit scales differs from tc-fp8-k32-f25");
  /* NaN scale: the output is NaN (arithmetic.py:204-205) */
  sa[0] = NAN;
  got = scaled1("tc-nvfp4-k64-f35", a, b, 64, sa, sb, 1.0, 0);
  AA_CHECK(isnan(got), "scaled case NaN scale: %a, want NaN", got);
}

int main(void) {
  seed = aa_test_seed("tgemm_tc");
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 13);
  int iters = (int)(400 * aa_test_multiplier());
  models_init();
  aa_pcg64_t rng_table; /* a stream of its own: the draws of the tests below stay as they were */
  aa_pcg64_seed(&rng_table, seed, 14);
  test_table(&rng_table, (int)(6 * aa_test_multiplier()));
  test_names();
  test_cases();
  test_new_cases();
  test_cdna3(&rng, (int)(200 * aa_test_multiplier()));
  test_mpfr(&rng, iters);
  test_fast_vs_ref(&rng);
  printf("tgemm_tc: run-time kernel %s (the fp32 tc path needs avx512f, avx512dq and avx512bw)\n",
         aa_gemm_kernel_name());
  test_fast_vs_f64(&rng, (int)(300 * aa_test_multiplier()));
  test_fast_large(&rng);
  test_int32_edge();
  aa_pcg64_t rng_promo; /* a stream of its own, as rng_table */
  aa_pcg64_seed(&rng_promo, seed, 15);
  test_promoted(&rng_promo, (int)(30 * aa_test_multiplier()));
  aa_pcg64_t rng_scaled; /* its own stream too */
  aa_pcg64_seed(&rng_scaled, seed, 16);
  test_scaled(&rng_scaled, (int)(60 * aa_test_multiplier()));
  test_scaled_cases();
  test_attn_e2e(&rng);
  return aa_test_finish("tgemm_tc");
}
