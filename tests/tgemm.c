/* attnacc: tests of aa_gemm: every model against an MPFR model of the same arithmetic, fast paths against the scalar
 * loops, exact sums. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <gmp.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm.h"
#include "rng.h"
#include "tests.h"

static uint64_t seed;

/* ---- random operands ---- */

/* kind 0: bf16 values (8-bit significand), exponents in [-8, 8];
   kind 1: fp32 values, exponents in [-20, 20];
   kind 2: fp32 values with exponents in [-75, 70], so products and sums
   reach fp32 subnormals and overflow to infinity;
   with probability 1/16 a signed zero. */
static double rand_value(aa_pcg64_t *rng, int kind) {
  uint64_t r = aa_pcg64_next(rng);
  if ((r & 15) == 0) return (r & 16) ? -0.0 : 0.0;
  int sign = (r >> 5) & 1;
  int bits = kind == 0 ? 8 : 24;
  uint64_t m = (UINT64_C(1) << (bits - 1)) | ((r >> 8) & ((UINT64_C(1) << (bits - 1)) - 1));
  int lo = kind == 0 ? -8 : kind == 1 ? -20 : -75, hi = kind == 0 ? 8 : kind == 1 ? 20 : 70;
  int e = lo + (int)(aa_pcg64_next(rng) % (uint64_t)(hi - lo + 1));
  double v = ldexp((double)m, e - (bits - 1));
  return sign ? -v : v;
}

/* fp64 operands: 53-bit significands, exponents in [-30, 30]. */
static double rand_double(aa_pcg64_t *rng) {
  uint64_t r = aa_pcg64_next(rng);
  if ((r & 15) == 0) return (r & 16) ? -0.0 : 0.0;
  double m = (double)((aa_pcg64_next(rng) >> 11) | (UINT64_C(1) << 52));
  int e = -30 + (int)(aa_pcg64_next(rng) % 61);
  double v = ldexp(m, e - 52);
  return (r & 32) ? -v : v;
}

static uint64_t bits64(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Equal bits, or both NaN (NaN payloads are not part of the models). */
static int same(double x, double y) {
  return (isnan(x) && isnan(y)) || bits64(x) == bits64(y);
}

/* ---- MPFR models: precision p with the target format's exponent range and subnormals ---- */

typedef struct {
  mpfr_prec_t prec;
  mpfr_exp_t emin, emax;
} mfmt_t;

static const mfmt_t MF32 = {24, -148, 128};   /* binary32: smallest subnormal 2^-149 = 0.5 * 2^-148 */
static const mfmt_t MF64 = {53, -1073, 1024}; /* binary64 */

static void mset_range(const mfmt_t *f) {
  mpfr_set_emin(f->emin);
  mpfr_set_emax(f->emax);
}
static void mreset_range(void) {
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
}

/* x = fma(a, b, x) or x = a + b rounded once into the format. */
static void mfma(mpfr_t x, const mpfr_t a, const mpfr_t b) {
  int t = mpfr_fma(x, a, b, x, MPFR_RNDN);
  mpfr_subnormalize(x, t, MPFR_RNDN);
}
static void madd(mpfr_t x, const mpfr_t a, const mpfr_t b) {
  int t = mpfr_add(x, a, b, MPFR_RNDN);
  mpfr_subnormalize(x, t, MPFR_RNDN);
}
static void mmul(mpfr_t x, const mpfr_t a, const mpfr_t b) {
  int t = mpfr_mul(x, a, b, MPFR_RNDN);
  mpfr_subnormalize(x, t, MPFR_RNDN);
}
static void mset(mpfr_t x, double d) {
  int t = mpfr_set_d(x, d, MPFR_RNDN);
  mpfr_subnormalize(x, t, MPFR_RNDN);
}

static double opa(const double *A, size_t lda, int tA, size_t i, size_t k) {
  return tA ? A[k * lda + i] : A[i * lda + k];
}
static double opb(const double *B, size_t ldb, int tB, size_t k, size_t j) {
  return tB ? B[j * ldb + k] : B[k * ldb + j];
}

/* Model of one output element. The pairwise tree is built here by a
   binary counter (merge equal-sized partial sums as products stream in,
   then fold the leftover stack from the top), a different algorithm from
   the recursive split that defines it in gemm.h. */
static double model_elem(aa_accum_t model, double cin, int accumulate, const double *A, size_t lda, int tA,
                         const double *B, size_t ldb, int tB, size_t i, size_t j, size_t K) {
  const mfmt_t *f = model == AA_ACC_FP64_SEQ ? &MF64 : &MF32;
  mset_range(f);
  mpfr_t acc, a, b, prod;
  mpfr_inits2(f->prec, acc, a, b, prod, (mpfr_ptr)0);
  double out;
  if (model != AA_ACC_FP32_PAIRWISE) {
    if (accumulate)
      mset(acc, cin);
    else
      mpfr_set_zero(acc, +1);
    for (size_t k = 0; k < K; k++) {
      mset(a, opa(A, lda, tA, i, k));
      mset(b, opb(B, ldb, tB, k, j));
      mfma(acc, a, b);
    }
  } else {
    mpfr_t stack[40];
    size_t size[40];
    int top = 0;
    for (size_t k = 0; k < K; k++) {
      mset(a, opa(A, lda, tA, i, k));
      mset(b, opb(B, ldb, tB, k, j));
      mpfr_init2(stack[top], f->prec);
      mmul(stack[top], a, b);
      size[top++] = 1;
      while (top >= 2 && size[top - 1] == size[top - 2]) {
        madd(stack[top - 2], stack[top - 2], stack[top - 1]);
        size[top - 2] *= 2;
        mpfr_clear(stack[--top]);
      }
    }
    while (top >= 2) {
      madd(stack[top - 2], stack[top - 2], stack[top - 1]);
      mpfr_clear(stack[--top]);
    }
    if (accumulate) {
      mset(a, cin);
      madd(acc, a, stack[0]);
    } else
      mpfr_set(acc, stack[0], MPFR_RNDN);
    mpfr_clear(stack[0]);
  }
  out = mpfr_get_d(acc, MPFR_RNDN);
  mpfr_clears(acc, a, b, prod, (mpfr_ptr)0);
  mreset_range();
  return out;
}

typedef struct {
  size_t M, N, K, lda, ldb, ldc;
  int tA, tB, acc, kind;
  aa_accum_t model;
  double *A, *B, *C0;
} case_t;

static void case_free(case_t *c) {
  free(c->A);
  free(c->B);
  free(c->C0);
}

static void case_make(case_t *c, aa_pcg64_t *rng, size_t M, size_t N, size_t K, aa_accum_t model, int kind) {
  c->M = M, c->N = N, c->K = K, c->model = model, c->kind = kind;
  c->tA = (int)(aa_pcg64_next(rng) & 1);
  c->tB = (int)(aa_pcg64_next(rng) & 1);
  c->acc = (int)(aa_pcg64_next(rng) & 1);
  size_t ra = c->tA ? K : M, wa = c->tA ? M : K, rb = c->tB ? N : K, wb = c->tB ? K : N;
  c->lda = wa + aa_pcg64_next(rng) % 4;
  c->ldb = wb + aa_pcg64_next(rng) % 4;
  c->ldc = N + aa_pcg64_next(rng) % 4;
  c->A = malloc((ra * c->lda + 1) * sizeof(double));
  c->B = malloc((rb * c->ldb + 1) * sizeof(double));
  c->C0 = malloc((M * c->ldc + 1) * sizeof(double));
  if (!c->A || !c->B || !c->C0) {
    printf("FAIL tgemm: out of memory\n");
    exit(1);
  }
  for (size_t t = 0; t < ra * c->lda; t++)
    c->A[t] = model == AA_ACC_FP64_SEQ ? rand_double(rng) : rand_value(rng, kind);
  for (size_t t = 0; t < rb * c->ldb; t++)
    c->B[t] = model == AA_ACC_FP64_SEQ ? rand_double(rng) : rand_value(rng, kind);
  for (size_t t = 0; t < M * c->ldc; t++)
    c->C0[t] = model == AA_ACC_FP64_SEQ ? rand_double(rng) : rand_value(rng, kind == 0 ? 1 : kind);
}

static double *case_run(const case_t *c, int ref) {
  double *C = malloc((c->M * c->ldc + 1) * sizeof(double));
  if (C == NULL) exit(1);
  memcpy(C, c->C0, c->M * c->ldc * sizeof(double));
  int st = (ref ? aa_gemm_ref : aa_gemm)(C, c->ldc, c->A, c->lda, c->tA, c->B, c->ldb, c->tB, c->M, c->N, c->K,
                                         c->acc, c->model);
  if (st != AA_OK)
    AA_FAIL("tgemm %s: status %d on a valid call (seed %llu)", ref ? "aa_gemm_ref" : "aa_gemm", st,
            (unsigned long long)seed);
  return C;
}

static void print_case(const case_t *c, const char *what) {
  printf(
      "  %s model %s M=%zu N=%zu K=%zu transA=%d transB=%d accumulate=%d lda=%zu ldb=%zu ldc=%zu kind=%d seed %llu\n",
      what, aa_accum_name(c->model), c->M, c->N, c->K, c->tA, c->tB, c->acc, c->lda, c->ldb, c->ldc, c->kind,
      (unsigned long long)seed);
}

/* Compare got with want on the M x N block; padding columns must be untouched. */
static int compare(const case_t *c, const double *got, const double *want, const char *what) {
  int bad = 0;
  for (size_t i = 0; i < c->M; i++)
    for (size_t j = 0; j < c->ldc; j++) {
      size_t t = i * c->ldc + j;
      const double w = j < c->N ? want[t] : c->C0[t];
      if (!same(got[t], w)) {
        if (bad < 3) {
          AA_FAIL("tgemm %s: C[%zu][%zu] not bitwise equal", what, i, j);
          printf("  got %a (0x%016llx) want %a (0x%016llx), C_in %a\n", got[t], (unsigned long long)bits64(got[t]), w,
                 (unsigned long long)bits64(w), c->C0[t]);
          if (j < c->N && c->K > 0)
            printf("  a[i][0] %a b[0][j] %a\n", opa(c->A, c->lda, c->tA, i, 0), opb(c->B, c->ldb, c->tB, 0, j));
          print_case(c, what);
        }
        bad++;
      }
    }
  return bad;
}

/* (a) fast path and reference loop against the MPFR model, small random shapes. */
static void test_mpfr(aa_pcg64_t *rng, int iters) {
  for (int it = 0; it < iters; it++) {
    aa_accum_t model = (aa_accum_t)(it % (AA_ACC_FP64_SEQ + 1)); /* tc-* models: their own model in tgemm_tc.c */
    int kind = (int)(aa_pcg64_next(rng) % 3);
    size_t M = 1 + aa_pcg64_next(rng) % 40, N = 1 + aa_pcg64_next(rng) % 40, K = 1 + aa_pcg64_next(rng) % 70;
    if (it % 7 == 0) M = 1 + aa_pcg64_next(rng) % 70; /* occasionally the full 1..70 range */
    if (it % 11 == 0) N = 1 + aa_pcg64_next(rng) % 70;
    case_t c;
    case_make(&c, rng, M, N, K, model, kind);
    double *want = malloc((M * c.ldc + 1) * sizeof(double));
    if (want == NULL) exit(1);
    memcpy(want, c.C0, M * c.ldc * sizeof(double));
    for (size_t i = 0; i < M; i++)
      for (size_t j = 0; j < N; j++)
        want[i * c.ldc + j] =
            model_elem(model, c.C0[i * c.ldc + j], c.acc, c.A, c.lda, c.tA, c.B, c.ldb, c.tB, i, j, K);
    double *fast = case_run(&c, 0), *ref = case_run(&c, 1);
    compare(&c, fast, want, "aa_gemm vs MPFR");
    compare(&c, ref, want, "aa_gemm_ref vs MPFR");
    free(fast);
    free(ref);
    free(want);
    case_free(&c);
  }
}

/* The pairwise tree on K up to 1100 (several levels, ragged tails, the
   heap path of the reference) against MPFR, on a thin shape. */
static void test_mpfr_long_pairwise(aa_pcg64_t *rng) {
  static const size_t Ks[] = {255, 256, 257, 1023, 1100};
  for (size_t t = 0; t < sizeof Ks / sizeof Ks[0]; t++) {
    case_t c;
    case_make(&c, rng, 3, 5, Ks[t], AA_ACC_FP32_PAIRWISE, 1);
    double *want = malloc((c.M * c.ldc + 1) * sizeof(double));
    memcpy(want, c.C0, c.M * c.ldc * sizeof(double));
    for (size_t i = 0; i < c.M; i++)
      for (size_t j = 0; j < c.N; j++)
        want[i * c.ldc + j] =
            model_elem(c.model, c.C0[i * c.ldc + j], c.acc, c.A, c.lda, c.tA, c.B, c.ldb, c.tB, i, j, c.K);
    double *fast = case_run(&c, 0), *ref = case_run(&c, 1);
    compare(&c, fast, want, "aa_gemm vs MPFR (long pairwise)");
    compare(&c, ref, want, "aa_gemm_ref vs MPFR (long pairwise)");
    free(fast);
    free(ref);
    free(want);
    case_free(&c);
  }
}

/* (b) fast paths (every kernel this CPU runs, threads 1 and 2) against the
   scalar reference loops on shapes with edge tiles and several K blocks. */
static void test_fast_vs_ref(aa_pcg64_t *rng) {
  static const size_t shapes[][3] = {{97, 131, 300}, {1, 1, 1},     {17, 33, 1},    {40, 7, 1500},
                                     {130, 66, 129}, {9, 200, 513}, {5, 2900, 1500}};
  static const char *const kernels[] = {"avx512f", "avx2-fma", "scalar"};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int m = 0; m < AA_ACC_COUNT; m++) {
      case_t c;
      case_make(&c, rng, shapes[s][0], shapes[s][1], shapes[s][2], (aa_accum_t)m, (int)(s % 2));
      double *ref = case_run(&c, 1);
      for (size_t kk = 0; kk < sizeof kernels / sizeof kernels[0]; kk++) {
        int st = aa_gemm_force_kernel(kernels[kk]);
        if (st == AA_EUNSUPPORTED) continue;
        AA_CHECK(st == AA_OK, "tgemm aa_gemm_force_kernel(%s): status %d", kernels[kk], st);
        for (int threads = 1; threads <= 2; threads++) {
#ifdef _OPENMP
          omp_set_num_threads(threads);
#else
          if (threads == 2) continue;
#endif
          double *fast = case_run(&c, 0);
          char what[96];
          snprintf(what, sizeof what, "fast path (kernel %s, %d thread(s)) vs scalar loop", kernels[kk], threads);
          compare(&c, fast, ref, what);
          free(fast);
        }
      }
      aa_gemm_force_kernel(NULL);
      free(ref);
      case_free(&c);
    }
#ifdef _OPENMP
  omp_set_num_threads(omp_get_num_procs());
#endif
}

/* (c) small integers times powers of two: every partial sum is an integer
   below 2^20, so every model returns the exact integer sum, computed here
   in int64 arithmetic. (Not tc-fp8-k32-f13 and the promoted rows with an
   e8m13 or fp16 step: 13 or 10 fractional bits cannot hold sums of 19 bits.) */
static void test_exact(aa_pcg64_t *rng, int iters) {
  for (int it = 0; it < iters; it++) {
    aa_accum_t model = (aa_accum_t)(it % AA_ACC_COUNT);
    const aa_accum_info_t *row = aa_accum_info(model);
    if (row->out_bits < 23 || (row->sum == AA_SUM_PROMOTED && row->inner_bits < 23)) continue;
    size_t M = 1 + aa_pcg64_next(rng) % 50, N = 1 + aa_pcg64_next(rng) % 50, K = 1 + aa_pcg64_next(rng) % 70;
    if (it % 5 == 0) N = 64 + aa_pcg64_next(rng) % 40; /* reach full vector tiles */
    case_t c;
    case_make(&c, rng, M, N, K, model, 0);
    size_t ra = c.tA ? K : M, rb = c.tB ? N : K;
    int64_t *ia = malloc(ra * c.lda * sizeof *ia), *ib = malloc(rb * c.ldb * sizeof *ib);
    /* |value| <= 8 * 2^3 = 64, so |product| <= 2^12 and |sum| < 71 * 2^12 + 2^12 < 2^19 */
    for (size_t t = 0; t < ra * c.lda; t++) {
      int64_t ia_small = (int64_t)(aa_pcg64_next(rng) % 17) - 8; /* a multiply: a negative left shift is undefined */
      ia[t] = ia_small * ((int64_t)1 << (aa_pcg64_next(rng) % 4));
      c.A[t] = (double)ia[t];
    }
    for (size_t t = 0; t < rb * c.ldb; t++) {
      int64_t ib_small = (int64_t)(aa_pcg64_next(rng) % 17) - 8; /* a multiply: a negative left shift is undefined */
      ib[t] = ib_small * ((int64_t)1 << (aa_pcg64_next(rng) % 4));
      c.B[t] = (double)ib[t];
    }
    for (size_t t = 0; t < M * c.ldc; t++)
      c.C0[t] = (double)((int64_t)(aa_pcg64_next(rng) % 8193) - 4096);
    double *fast = case_run(&c, 0);
    for (size_t i = 0; i < M; i++)
      for (size_t j = 0; j < N; j++) {
        int64_t s = c.acc ? (int64_t)c.C0[i * c.ldc + j] : 0;
        for (size_t k = 0; k < K; k++)
          s += (c.tA ? ia[k * c.lda + i] : ia[i * c.lda + k]) * (c.tB ? ib[j * c.ldb + k] : ib[k * c.ldb + j]);
        double got = fast[i * c.ldc + j];
        if (got != (double)s) {
          AA_FAIL("tgemm exact sums: C[%zu][%zu] = %a (0x%016llx), exact %lld", i, j, got,
                  (unsigned long long)bits64(got), (long long)s);
          print_case(&c, "exact");
        }
      }
    free(fast);
    free(ia);
    free(ib);
    case_free(&c);
  }
}

/* Argument checks and the documented edge cases. */
static void test_args(void) {
  double A[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, B[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  double C[12];
  for (int m = 0; m < AA_ACC_COUNT; m++) {
    aa_accum_t model = (aa_accum_t)m;
    AA_CHECK(aa_gemm(C, 3, A, 1, 0, B, 3, 0, 2, 3, 2, 0, model) == AA_EINVAL, "tgemm args: lda < K accepted (%s)",
             aa_accum_name(model));
    AA_CHECK(aa_gemm(C, 3, A, 1, 1, B, 3, 0, 2, 3, 2, 0, model) == AA_EINVAL,
             "tgemm args: transA lda < M accepted (%s)", aa_accum_name(model));
    AA_CHECK(aa_gemm(C, 3, A, 2, 0, B, 2, 0, 2, 3, 2, 0, model) == AA_EINVAL, "tgemm args: ldb < N accepted (%s)",
             aa_accum_name(model));
    AA_CHECK(aa_gemm(C, 3, A, 2, 0, B, 1, 1, 2, 3, 2, 0, model) == AA_EINVAL,
             "tgemm args: transB ldb < K accepted (%s)", aa_accum_name(model));
    AA_CHECK(aa_gemm(C, 2, A, 2, 0, B, 3, 0, 2, 3, 2, 0, model) == AA_EINVAL, "tgemm args: ldc < N accepted (%s)",
             aa_accum_name(model));
    AA_CHECK(aa_gemm(NULL, 3, A, 2, 0, B, 3, 0, 2, 3, 2, 0, model) == AA_EINVAL, "tgemm args: NULL C accepted (%s)",
             aa_accum_name(model));
    AA_CHECK(aa_gemm(C, 3, NULL, 2, 0, B, 3, 0, 2, 3, 2, 0, model) == AA_EINVAL, "tgemm args: NULL A accepted (%s)",
             aa_accum_name(model));
    AA_CHECK(aa_gemm(C, 3, A, 2, 0, NULL, 3, 0, 2, 3, 2, 0, model) == AA_EINVAL, "tgemm args: NULL B accepted (%s)",
             aa_accum_name(model));
    AA_CHECK(aa_gemm(NULL, 0, NULL, 0, 0, NULL, 0, 0, 0, 5, 5, 0, model) == AA_OK, "tgemm args: M = 0 refused (%s)",
             aa_accum_name(model));
    AA_CHECK(aa_gemm(NULL, 0, NULL, 0, 0, NULL, 0, 0, 5, 0, 5, 1, model) == AA_OK, "tgemm args: N = 0 refused (%s)",
             aa_accum_name(model));
    /* K = 0: C = +0 without accumulate, unchanged with it; A and B are not read */
    for (int t = 0; t < 12; t++)
      C[t] = -1.5;
    AA_CHECK(aa_gemm(C, 4, NULL, 0, 0, NULL, 0, 0, 3, 3, 0, 0, model) == AA_OK, "tgemm args: K = 0 refused (%s)",
             aa_accum_name(model));
    for (int t = 0; t < 12; t++) {
      double w = t % 4 == 3 ? -1.5 : 0.0;
      AA_CHECK(bits64(C[t]) == bits64(w), "tgemm K = 0: C[%d] = %a, want %a (%s)", t, C[t], w, aa_accum_name(model));
    }
    for (int t = 0; t < 12; t++)
      C[t] = -1.5;
    AA_CHECK(aa_gemm(C, 4, NULL, 0, 0, NULL, 0, 0, 3, 3, 0, 1, model) == AA_OK, "tgemm args: K = 0 refused (%s)",
             aa_accum_name(model));
    for (int t = 0; t < 12; t++)
      AA_CHECK(C[t] == -1.5, "tgemm K = 0 accumulate: C[%d] = %a changed (%s)", t, C[t], aa_accum_name(model));
  }
  AA_CHECK(aa_gemm(C, 3, A, 2, 0, B, 3, 0, 2, 3, 2, 0, AA_ACC_COUNT) == AA_EINVAL,
           "tgemm args: model AA_ACC_COUNT accepted");
  /* names round-trip */
  for (int m = 0; m < AA_ACC_COUNT; m++) {
    aa_accum_t back = AA_ACC_COUNT;
    AA_CHECK(aa_accum_from_name(&back, aa_accum_name((aa_accum_t)m)) == AA_OK && back == (aa_accum_t)m,
             "tgemm names: '%s' does not map back to %d", aa_accum_name((aa_accum_t)m), m);
    AA_CHECK(strlen(aa_accum_describe((aa_accum_t)m)) > 10, "tgemm names: no description for %d", m);
  }
  aa_accum_t dummy;
  AA_CHECK(aa_accum_from_name(&dummy, "fp32-nonsense") == AA_ENOTFOUND, "tgemm names: unknown name accepted");
  AA_CHECK(aa_gemm_force_kernel("nonsense") == AA_ENOTFOUND, "tgemm force_kernel: unknown kernel accepted");
}

/* Known values: a 2 x 2 x 3 product whose fp32 chain differs from the
   exact sum, worked out by hand. fp32-seq: acc = fma(1, 2^24, 0) = 2^24;
   fma(1, 1, 2^24) = 2^24 + 1 rounds to 2^24 (tie to even); fma(1, 1, 2^24)
   = 2^24 again. Pairwise: (2^24 + 1) -> 2^24, then + 1 -> 2^24 as well;
   with k order (1, 1, 2^24): seq gives 2 + 2^24 exactly, pairwise
   (1 + 1) + 2^24 = 2^24 + 2. fp64 keeps every sum exact. */
static void test_known(void) {
  double A[3] = {1, 1, 1}, B1[3] = {0x1p24, 1, 1}, B2[3] = {1, 1, 0x1p24};
  struct {
    const double *B;
    aa_accum_t m;
    double want;
  } t[] = {{B1, AA_ACC_FP32_SEQ, 0x1p24},          {B1, AA_ACC_FP32_PAIRWISE, 0x1p24},
           {B1, AA_ACC_FP64_SEQ, 0x1p24 + 2},      {B2, AA_ACC_FP32_SEQ, 0x1p24 + 2},
           {B2, AA_ACC_FP32_PAIRWISE, 0x1p24 + 2}, {B2, AA_ACC_FP64_SEQ, 0x1p24 + 2}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    double C = 0;
    aa_gemm(&C, 1, A, 3, 0, t[i].B, 1, 0, 1, 1, 3, 0, t[i].m);
    AA_CHECK(C == t[i].want, "tgemm known value %zu (%s): got %a want %a", i, aa_accum_name(t[i].m), C, t[i].want);
  }
}

int main(void) {
  seed = aa_test_seed("tgemm");
  printf("tgemm: fp32-seq kernel on this CPU: %s\n", aa_gemm_kernel_name());
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 0x6a656d6d);
  double mult = aa_test_multiplier();
  if (aa_test_expensive()) mult *= 10;
  test_args();
  test_known();
  test_exact(&rng, (int)(60 * mult));
  test_mpfr(&rng, (int)(90 * mult));
  test_mpfr_long_pairwise(&rng);
  test_fast_vs_ref(&rng);
  return aa_test_finish("tgemm");
}
