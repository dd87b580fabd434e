/* attnacc: CUDA kernels of aa_gemm's fp32-seq and tensor-core block models (tc-kK-fF), bit-identical to the CPU's. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_GEMM_CUDA_EMULATE /* tests/tgemm_cuda_emu.cpp runs the device code below on CPU threads */
#include <cuda_runtime.h>
#endif
#include <stdint.h>

#include "gemm-cuda.h"
#include "tc-core.h"

/* #pragma unroll, silent where tests/tgemm_cuda_emu.cpp compiles this file with the host compiler */
#ifdef AA_GEMM_CUDA_EMULATE
#define GM_UNROLL(n)
#else
#define GM_UNROLL(n) _Pragma(#n)
#endif

/* aa_status_t values of lib/common.h (not included: it is C, and only three are needed). */
#define GM_OK 0
#define GM_ENOMEM 2
#define GM_EUNSUPPORTED 7

/* A block of GM_THREADS x GM_THREADS threads computes a GM_TILE x GM_TILE
   tile of C, each thread a GM_R x GM_R sub-tile (rows ty*GM_R.., columns
   tx*GM_R..), so that a thread's operands are 4 consecutive words of shared
   memory (one 128-bit load; the tc kernel's binary64 magnitudes two, gm_mag).
   k advances by GM_KT, a multiple of every block length, so a tc block never
   straddles two loads of shared memory. */
#define GM_R 4
#define GM_THREADS 16
#define GM_TILE (GM_R * GM_THREADS)
#define GM_KT 32
/* An operand's alignment exponent in shared memory: Inf and NaN get
   GM_ESPEC, so that any block holding one (0 * Inf included: GM_ESPEC +
   AA_TC_ENONE) has a block exponent of at least GM_ESPEC_MIN, which no
   finite block reaches (their exponents are at most 254). */
#define GM_ESPEC 8192
#define GM_ESPEC_MIN 1024

struct gm_args {
  double *C;
  const double *A, *B;
  size_t ldc, lda, ldb, M, N, K;
  int transA, transB, accumulate, frac_bits, out_bits;
};

/* op(A)[i][k] and op(B)[k][j] as fp32 (RNE, the identity for the values callers pass); 0 outside the arrays. */
__device__ static float gm_opa(const gm_args &g, size_t i, size_t k) {
  if (i >= g.M || k >= g.K) return 0.0f;
  return (float)(g.transA ? g.A[k * g.lda + i] : g.A[i * g.lda + k]);
}
__device__ static float gm_opb(const gm_args &g, size_t k, size_t j) {
  if (j >= g.N || k >= g.K) return 0.0f;
  return (float)(g.transB ? g.B[j * g.ldb + k] : g.B[k * g.ldb + j]);
}

/* The next k-step's raw operands are copied from global memory into shared memory by cp.async while the current
   step computes (gm_tc). Each thread copies exactly the elements that it later unpacks, so its own wait is all the
   ordering the staging needs. */
struct gm_stage {
  double a[GM_TILE * GM_KT], b[GM_TILE * GM_KT];
};
#ifdef AA_GEMM_CUDA_EMULATE
static void gm_cp8(double *dst, const double *src, int valid) {
  *dst = valid ? *src : 0.0;
}
static void gm_cp_commit(void) {}
static void gm_cp_wait(void) {}
#else
/* 8 bytes from src to dst (shared), or 8 zero bytes when !valid (cp.async's zero fill: src_size 0 reads nothing) */
__device__ __forceinline__ static void gm_cp8(double *dst, const double *src, int valid) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 8 : 0));
}
__device__ __forceinline__ static void gm_cp_commit(void) {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ static void gm_cp_wait(void) {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
#endif

/* Element e (0 .. GM_TILE * GM_KT) of this k-step's tile of op(A) (rows i0.., k0..) or op(B): where the array is
   k-contiguous in global memory, a warp takes 8 consecutive k of 4 rows (whole 32-byte sectors), else 32
   consecutive rows of one k; with the swizzle of gm_slot, both store to 32 distinct banks. */
__device__ static void gm_index(int kcontig, int e, int *r, int *k) {
  if (kcontig) {
    int w = e / 32, l = e % 32;
    *r = (w % 16) * 4 + l / 8, *k = (w / 16) * 8 + l % 8;
  } else
    *r = e % GM_TILE, *k = e / GM_TILE;
}
/* Word of row r in shared row k: groups of 4 (one thread's 128-bit load) permuted by k, so the stores above are
   conflict-free and a load by every thread of one k stays a permutation (gm_quad). */
__device__ static int gm_slot(int k, int r) {
  return ((r / 4) ^ (k & 7)) * 4 + (r & 3);
}
__device__ static int gm_quad(int k, int t) {
  return t ^ (k & 7);
}

/* The initial accumulators of a thread's sub-tile: fl32(C) or +0. */
__device__ __forceinline__ static void gm_acc_init(const gm_args &g, float acc[GM_R][GM_R], size_t i0, size_t j0) {
  for (int r = 0; r < GM_R; r++)
    for (int c = 0; c < GM_R; c++)
      acc[r][c] = g.accumulate && i0 + r < g.M && j0 + c < g.N ? (float)g.C[(i0 + r) * g.ldc + j0 + c] : 0.0f;
}
__device__ __forceinline__ static void gm_acc_store(const gm_args &g, float acc[GM_R][GM_R], size_t i0, size_t j0) {
  for (int r = 0; r < GM_R; r++)
    for (int c = 0; c < GM_R; c++)
      if (i0 + r < g.M && j0 + c < g.N) g.C[(i0 + r) * g.ldc + j0 + c] = acc[r][c];
}

/* ---- fp32-seq: acc = fmaf(a_k, b_k, acc) in k order (aa_seq32_step); only k < K, since fmaf(0, 0, -0) is +0 ---- */

__global__ void __launch_bounds__(GM_THREADS *GM_THREADS) gm_seq32(gm_args g) {
  __shared__ float4 sa[GM_KT][GM_THREADS], sb[GM_KT][GM_THREADS];
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * GM_THREADS + tx;
  const size_t bi = (size_t)blockIdx.y * GM_TILE, bj = (size_t)blockIdx.x * GM_TILE;
  float acc[GM_R][GM_R];
  gm_acc_init(g, acc, bi + ty * GM_R, bj + tx * GM_R);
  for (size_t k0 = 0; k0 < g.K; k0 += GM_KT) {
    for (int e = t; e < GM_TILE * GM_KT; e += GM_THREADS * GM_THREADS) {
      int r, k;
      gm_index(!g.transA, e, &r, &k);
      ((float *)sa[k])[gm_slot(k, r)] = gm_opa(g, bi + r, k0 + k);
      gm_index(g.transB, e, &r, &k);
      ((float *)sb[k])[gm_slot(k, r)] = gm_opb(g, k0 + k, bj + r);
    }
    __syncthreads();
    const int kn = g.K - k0 < GM_KT ? (int)(g.K - k0) : GM_KT;
    for (int k = 0; k < kn; k++) {
      float4 a4 = sa[k][gm_quad(k, ty)], b4 = sb[k][gm_quad(k, tx)];
      const float a[GM_R] = {a4.x, a4.y, a4.z, a4.w}, b[GM_R] = {b4.x, b4.y, b4.z, b4.w};
      for (int r = 0; r < GM_R; r++)
        for (int c = 0; c < GM_R; c++)
          acc[r][c] = aa_seq32_step(acc[r][c], a[r], b[c]);
    }
    __syncthreads();
  }
  gm_acc_store(g, acc, bi + ty * GM_R, bj + tx * GM_R);
}

/* ---- tc-kK-fF: the integer core of tc-core.h on operands unpacked once into shared memory ---- */

/* One operand tile, unpacked (aa_tc_unpack): magnitudes |x| as doubles (exact; an Inf or NaN keeps its fp32 bits in
   the low word instead, for gm_special_operand), alignment exponents (GM_ESPEC for Inf/NaN, AA_TC_ENONE for zeros)
   as int16 (every one fits, and so does any sum of two: |sum| <= 2 GM_ESPEC = 16384), twice: alone (e16), and
   repeated in both halves of a word (e2), so that the block exponent takes two outputs a VIADDMNMX.S16x2 (the row
   operand's e2 word against two column operands' e16 pair), signs as +1 or -1 (a product's sign is then one
   multiplication, and a signed term one multiply-add). 36 KB: the two operands take dynamic shared memory
   (gm_tc_smem). */
struct gm_unpacked {
  double2 mag[2][GM_KT][GM_THREADS]; /* the first and the second pair of each group of 4 (gm_mag) */
  uint4 e2[GM_KT][GM_THREADS];
  int4 sgn[GM_KT][GM_THREADS];
  union {
    int16_t h[GM_TILE];  /* written an element at a time */
    uint2 q[GM_THREADS]; /* read a group of 4 at a time */
  } e16[GM_KT];
};

/* The magnitude of slot w (gm_slot) in row k. A thread's 4 magnitudes are two 128-bit loads, one from each half:
   16 threads of one k then read 256 consecutive bytes of each half, no bank conflict (4 consecutive doubles would be
   32 bytes a thread, and every fourth thread would share banks). */
__device__ static double &gm_mag(gm_unpacked &s, int k, int w) {
  double2 &p = s.mag[(w >> 1) & 1][k][w >> 2];
  return (w & 1) ? p.y : p.x;
}
__device__ static double gm_mag(const gm_unpacked &s, int k, int w) {
  const double2 &p = s.mag[(w >> 1) & 1][k][w >> 2];
  return (w & 1) ? p.y : p.x;
}

/* Where an element (row r, k) of an operand tile goes: its magnitude, exponent and sign words (gm_slot). */
struct gm_dst {
  double *mag;
  uint32_t *e2;
  int32_t *sgn;
  int16_t *e16;
};
__device__ static gm_dst gm_dst_of(gm_unpacked &s, int k, int r) {
  const int w = gm_slot(k, r);
  return {&gm_mag(s, k, w), &((uint32_t *)&s.e2[k][0])[w], &((int32_t *)&s.sgn[k][0])[w], &s.e16[k].h[w]};
}
/* x unpacked into the words dk k further on from d (a row of mag, e2 and sgn is GM_THREADS vectors long). */
__device__ static void gm_put(const gm_dst &d, int dk, float x) {
  const uint32_t bits = aa_tc_f2u(x);
  aa_tc_op_t o = aa_tc_unpack(bits);
  const int32_t e = o.spec ? GM_ESPEC : o.e;
  d.mag[dk * 2 * GM_THREADS] = o.spec ? aa_hd_u2d(bits) : (double)fabsf(x);
  d.e2[dk * 4 * GM_THREADS] = ((uint32_t)e << 16) | ((uint32_t)e & 0xffffu);
  d.sgn[dk * 4 * GM_THREADS] = o.neg | 1;
  d.e16[dk * GM_TILE] = (int16_t)e;
}

/* An operand back from its unpacked form, as far as a product with Inf or NaN can tell: Inf and NaN themselves, a
   zero of its sign, and +-1 for any finite nonzero value (its magnitude cannot change an infinite product). */
__device__ static float gm_special_operand(const gm_unpacked &s, int k, int col) {
  const int w = gm_slot(k, col);
  int32_t e = s.e16[k].h[w], sgn = ((const int32_t *)&s.sgn[k][0])[w];
  uint32_t sign = sgn < 0 ? 0x80000000u : 0;
  if (e == GM_ESPEC) return aa_tc_u2f((uint32_t)aa_hd_d2u(gm_mag(s, k, w)));
  return aa_tc_u2f(sign | (e == AA_TC_ENONE ? 0u : 0x3f800000u));
}

/* A block that holds an Inf or NaN term (rare): the IEEE sum of the non-finite terms, as aa_tc_block. Not inlined,
   so that the loop over a thread's outputs that calls it unrolls (a rolled loop indexes acc, E and S dynamically,
   which puts them in local memory) without 16 copies of this loop. */
__device__ __noinline__ static float gm_special_sum(float acc, const gm_unpacked &sa, const gm_unpacked &sb, int kb,
                                                    int bk, int row, int col) {
  float s = aa_tc_unpack(aa_tc_f2u(acc)).spec ? acc : 0.0f;
  GM_UNROLL(unroll 1)
  for (int k = kb; k < kb + bk; k++) {
    float a = gm_special_operand(sa, k, row), b = gm_special_operand(sb, k, col);
    if (aa_tc_spec_pair(a, b)) s += a * b;
  }
  return s;
}

/* The end of a block in binary64 (see gm_tc_block), and the exponent maximum: instructions with host twins for
   the emulation, each giving the instruction's result. __dadd_rz's twin corrects the RNE sum by the sign of its exact
   error (TwoSum);
   __double2float_rz's corrects the RNE conversion when it rounded away from zero (Inf included: it steps back to
   the largest finite value, as RZ gives). */
#ifdef AA_GEMM_CUDA_EMULATE
static double gm_hilo(uint32_t hi, uint32_t lo) {
  uint64_t u = (uint64_t)hi << 32 | lo;
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}
static double gm_dadd_rz(double a, double b) {
  double s = a + b, bb = s - a, err = (a - (s - bb)) + (b - bb);
  return (s > 0 && err < 0) || (s < 0 && err > 0) ? nextafter(s, 0.0) : s;
}
static float gm_d2f_rz(double x) {
  float f = (float)x;
  return fabs((double)f) > fabs(x) ? nextafterf(f, 0.0f) : f;
}
static uint32_t gm_addmax2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r = 0;
  for (int h = 0; h < 32; h += 16) {
    int32_t s = (int16_t)(a >> h) + (int16_t)(b >> h), m = (int16_t)(c >> h);
    r |= ((uint32_t)max(s, m) & 0xffffu) << h;
  }
  return r;
}
/* __fma_rz's twin for the operands gm_tc_block gives it: a b is exact in binary64 (two fp32 magnitudes), so the
   fused result is the RZ sum of a b and c */
static double gm_fma_rz(double a, double b, double c) {
  return gm_dadd_rz(a * b, c);
}
#else
/* max(a + b, c) in each 16-bit half (no sum here overflows): one VIADDMNMX.S16x2, a DPX instruction of sm_90
   (emulated in several on older GPUs) */
__device__ __forceinline__ static uint32_t gm_addmax2(uint32_t a, uint32_t b, uint32_t c) {
  return __viaddmax_s16x2(a, b, c);
}
__device__ __forceinline__ static double gm_hilo(uint32_t hi, uint32_t lo) {
  return __hiloint2double((int)hi, (int)lo);
}
__device__ __forceinline__ static double gm_dadd_rz(double a, double b) {
  return __dadd_rz(a, b);
}
__device__ __forceinline__ static float gm_d2f_rz(double x) {
  return __double2float_rz(x);
}
__device__ __forceinline__ static double gm_fma_rz(double a, double b, double c) {
  return __fma_rz(a, b, c);
}
#endif
/* The words of a double (no instruction: the halves of its register pair). */
__device__ __forceinline__ static uint32_t gm_hi(double x) {
  return (uint32_t)(aa_hd_d2u(x) >> 32);
}
__device__ __forceinline__ static uint32_t gm_lo(double x) {
  return (uint32_t)aa_hd_d2u(x);
}
/* An int32 as a double without a conversion instruction (a quarter-rate pipe): 2^52 + 2^31 + p built from its bits,
   less 2^52 + 2^31 (both exact). */
__device__ __forceinline__ static double gm_i2d(int32_t p) {
  return gm_hilo(0x43300000u, (uint32_t)p ^ 0x80000000u) - 0x1.00000800p52;
}

/* The accumulator's part in the block exponent: its alignment exponent (aa_tc_unpack's e: max(biased, 1) - 127,
   AA_TC_ENONE for a zero), GM_ESPEC for Inf or NaN; in fewer instructions than the whole unpacking. */
__device__ __forceinline__ static int32_t gm_acc_e(uint32_t bits) {
  const int32_t be = (bits >> 23) & 255, e = (bits & 0x7fffffffu) == 0 ? AA_TC_ENONE : max(be, 1) - 127;
  return be == 255 ? GM_ESPEC : e;
}

/* Words of a 128-bit shared load as an array. */
#define GM_SPLIT4(v)                                                                                                 \
  { (v).x, (v).y, (v).z, (v).w }

/* One block of BK k-indices from shared k = kb for the thread's sub-tile (definition in gemm.h): the block
   exponent E over the accumulator and the products, then the exact sum of the truncated terms, then the RZ
   rounding; zero-padded k beyond K are zero products, which take no part (the last, shorter block of the
   definition). A product's term is one DFMA.RZ: with C = 2^(E - F + 52), |a| |b| + C lies in [C, 2C) (|a b| <
   2^(E + 2) <= C for F <= 50), where the binary64 grid is 2^(E - F) exactly, so RZ leaves C + trunc(|a b| / 2^(E -
   F)) 2^(E - F): the term itself, in those units, is the result's low word (below 2^(F + 2) <= 2^27, it never
   reaches the high word). The terms sum exactly in an int32, up to 16 of them (|sum| <= 16 (2^27 - 1) < 2^31); a
   block of 32 adds two such partial sums in 64 bits. Every loop is unrolled whole (the exponent loop by 8, so that
   k % 8 of gm_quad is a constant): the arrays indexed by r, q and k stay in registers. Per product: half a
   VIADDMNMX.S16x2 (the exponent sum and maximum of two outputs at once), the DFMA.RZ, the sign (sa sb) and the
   signed multiply-add into the partial sum (two IMAD); 8.3 instructions a product in all, unpacking and block ends
   included (Nsight Compute on the H200, experiments/README-gpu.md 9.8). C's biased exponent E - F + 1075 is clamped
   to [75, 2047]: 75 keeps 2^(E - F) normal where a lower E means that every term is zero (the result is then +0
   whatever the scale); 2047 (C = Inf) marks a block with an Inf or NaN, whose exponent is at least GM_ESPEC_MIN,
   above any finite block's 254. */
template <int BK>
__device__ __forceinline__ static void gm_tc_block(const gm_args &g, const gm_unpacked &sa, const gm_unpacked &sb,
                                                   int kb, int ty, int tx, float acc[GM_R][GM_R]) {
  double C[GM_R][GM_R];
  {
    uint32_t E2[GM_R]
               [GM_R / 2]; /* the products' exponent maxima of columns 2p and 2p + 1 in the halves of E2[r][p] */
    for (int r = 0; r < GM_R; r++)
      for (int p = 0; p < GM_R / 2; p++)
        E2[r][p] = 0x80008000u; /* -32768, below every sum */
    GM_UNROLL(unroll 8)         /* not whole: the compiler would keep every exponent loaded here for the sums below */
    for (int j = 0; j < BK; j++) {
      const int k = kb + j, k7 = (BK % 8 == 0 ? j : k) & 7; /* kb is a multiple of 8 when BK is */
      const uint4 a4 = sa.e2[k][gm_quad(k7, ty)];
      const uint2 b2 = sb.e16[k].q[gm_quad(k7, tx)];
      const uint32_t ea[GM_R] = GM_SPLIT4(a4), eb[GM_R / 2] = {b2.x, b2.y};
      for (int r = 0; r < GM_R; r++)
        for (int p = 0; p < GM_R / 2; p++)
          E2[r][p] = gm_addmax2(ea[r], eb[p], E2[r][p]);
    }
    for (int r = 0; r < GM_R; r++)
      for (int q = 0; q < GM_R; q++) {
        const int32_t Ep = (int32_t)(E2[r][q / 2] << (16 - 16 * (q % 2))) >> 16;
        const int32_t E = max(gm_acc_e(aa_tc_f2u(acc[r][q])), Ep);
        C[r][q] = gm_hilo((uint32_t)min(max(E - g.frac_bits + 1075, 75), 2047) << 20, 0);
      }
  }
  constexpr int G = BK < 16 ? BK : 16; /* terms per int32 partial sum */
  int32_t P[BK / G][GM_R][GM_R] = {};  /* the partial sums, added in 64 bits at the end */
  GM_UNROLL(unroll)
  for (int p = 0; p < BK / G; p++)
    GM_UNROLL(unroll)
  for (int k = kb + p * G; k < kb + p * G + G; k++) {
    const int qa = gm_quad(k, ty), qb = gm_quad(k, tx);
    const double2 a01 = sa.mag[0][k][qa], a23 = sa.mag[1][k][qa], b01 = sb.mag[0][k][qb], b23 = sb.mag[1][k][qb];
    const double ma[GM_R] = {a01.x, a01.y, a23.x, a23.y}, mb[GM_R] = {b01.x, b01.y, b23.x, b23.y};
    const int32_t na[GM_R] = GM_SPLIT4(sa.sgn[k][qa]), nb[GM_R] = GM_SPLIT4(sb.sgn[k][qb]);
    for (int r = 0; r < GM_R; r++)
      for (int q = 0; q < GM_R; q++) {
        int32_t t = (int32_t)gm_lo(gm_fma_rz(ma[r], mb[q], C[r][q]));
        P[p][r][q] += t * (na[r] * nb[q]);
      }
  }
  for (int r = 0; r < GM_R; r++)
    for (int q = 0; q < GM_R; q++) {
      const uint32_t chi = gm_hi(C[r][q]); /* 2^(qe + 52) for qe = E - F, clamped */
      if (chi >> 20 == 2047) {
        acc[r][q] = gm_special_sum(acc[r][q], sa, sb, kb, BK, ty * GM_R + r, tx * GM_R + q);
      } else {
        /* acc truncated to a multiple of 2^qe (aa_tc_acc_term): |acc| < 2^(E + 1) <= 2^(qe + 26), so adding
           +-C of acc's sign lands where the unit in the last place is 2^qe, and RZ there truncates |acc| */
        const double big = gm_hilo((aa_tc_f2u(acc[r][q]) & 0x80000000u) | chi, 0);
        const double tacc = gm_dadd_rz((double)acc[r][q], big) - big;
        double sum = gm_i2d(P[0][r][q]);
        GM_UNROLL(unroll)
        for (int p = 1; p < BK / G; p++)
          sum += gm_i2d(P[p][r][q]);
        /* S 2^qe + tacc in one DFMA (written out: the build has -fmad=false), exact (|S| < 2^33 and tacc a multiple
           of 2^qe below 2^(qe + 26)), then RZ to fp32 (subnormals; |sum| >= 2^128 to +-Inf for an fp32 result, as
           aa_tc_round_bits), then to out_bits fractional bits: RZ onto a grid of powers of two after RZ onto a finer
           one is RZ onto the coarser one. */
        const double exact = fma(sum, gm_hilo(chi - (52u << 20), 0), tacc);
        acc[r][q] = g.out_bits == 23 && fabs(exact) >= 0x1p128 /* +-Inf, as the H200 gives (tc-core.h) */
                        ? (float)exact
                        : aa_tc_u2f(aa_tc_f2u(gm_d2f_rz(exact)) & ~((1u << (23 - g.out_bits)) - 1));
      }
    }
}

/* A thread's share of a k-step's tile of one operand: the elements e = t + 256 i (i = 0 .. 7) of gm_index, in
   closed form: row r0 + (i & 1) dr, k k0 + (i & 1) dk + 8 (i >> 1) (where the array is k-contiguous: rows
   (t / 32) 4 + (t % 32) / 8 and 32 more, k t % 8 + 8 (i >> 1); else row t % 64, k t / 64 + 4 i). Element i + 2 is
   element i 8 k further on, so only two elements' addresses are computed; the others are constant offsets. */
struct gm_share {
  int r0, k0, dr, dk;
};
__device__ static gm_share gm_share_of(int kcontig, int t) {
  if (kcontig) return {(t >> 5) * 4 + ((t & 31) >> 3), t & 7, 32, 0};
  return {t & 63, t >> 6, 0, 4};
}
#define GM_SHARE 8 /* elements of one operand a thread copies and unpacks per k-step */

/* This thread's share of op(X) (rows of op(X) from x0, k from k0; X is k-contiguous when kcontig) copied into the
   stage (gm_cp8); zeros outside the rows or k < K, as gm_opa and gm_opb give. */
__device__ static void gm_stage_share(const double *X, size_t ld, int kcontig, size_t rows, size_t K, size_t x0,
                                      size_t k0, double *stage, int t) {
  const gm_share s = gm_share_of(kcontig, t);
  const size_t step8 = kcontig ? 8 : 8 * ld; /* 8 k further on */
  GM_UNROLL(unroll)
  for (int h = 0; h < 2; h++) {
    const size_t r = x0 + s.r0 + h * s.dr, kk = k0 + s.k0 + h * s.dk;
    const double *p = X + (kcontig ? r * ld + kk : kk * ld + r);
    GM_UNROLL(unroll)
    for (int i = h; i < GM_SHARE; i += 2) {
      const int ok = r < rows && kk + 8 * (i >> 1) < K;
      gm_cp8(&stage[t + GM_THREADS * GM_THREADS * i], ok ? p + (i >> 1) * step8 : X, ok);
    }
  }
}
__device__ static void gm_stage_issue(const gm_args &g, gm_stage &st, size_t bi, size_t bj, size_t k0, int t) {
  gm_stage_share(g.A, g.lda, !g.transA, g.M, g.K, bi, k0, st.a, t);
  gm_stage_share(g.B, g.ldb, g.transB, g.N, g.K, bj, k0, st.b, t);
  gm_cp_commit();
}

/* This thread's staged share unpacked (fp32 RNE, as gm_opa) into the operand tile. */
__device__ static void gm_unpack_share(int kcontig, const double *stage, gm_unpacked &s, int t) {
  const gm_share sh = gm_share_of(kcontig, t);
  GM_UNROLL(unroll)
  for (int h = 0; h < 2; h++) {
    const gm_dst d = gm_dst_of(s, sh.k0 + h * sh.dk, sh.r0 + h * sh.dr);
    GM_UNROLL(unroll)
    for (int i = h; i < GM_SHARE; i += 2)
      gm_put(d, 8 * (i >> 1), (float)stage[t + GM_THREADS * GM_THREADS * i]);
  }
}
__device__ static void gm_stage_unpack(const gm_args &g, const gm_stage &st, gm_unpacked &sa, gm_unpacked &sb,
                                       int t) {
  gm_cp_wait();
  gm_unpack_share(!g.transA, st.a, sa, t);
  gm_unpack_share(g.transB, st.b, sb, t);
}

/* Two blocks per SM (at most 128 registers a thread; 2 x 104 KB of shared memory: the unpacked tiles and the stage),
   so that one block's unpacking overlaps the other's arithmetic; the next k-step's loads overlap this one's. */
static const size_t gm_tc_smem = 2 * sizeof(gm_unpacked) + sizeof(gm_stage);
template <int BK> __global__ void __launch_bounds__(GM_THREADS *GM_THREADS, 2) gm_tc(gm_args g) {
#ifdef AA_GEMM_CUDA_EMULATE
  __shared__ gm_unpacked sa, sb;
  __shared__ gm_stage st;
#else
  extern __shared__ __align__(16) unsigned char gm_smem[]; /* aligned for the 128-bit loads of mag's doubles */
  gm_unpacked &sa = *(gm_unpacked *)gm_smem, &sb = *(gm_unpacked *)(gm_smem + sizeof(gm_unpacked));
  gm_stage &st = *(gm_stage *)(gm_smem + 2 * sizeof(gm_unpacked));
#endif
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * GM_THREADS + tx;
  const size_t bi = (size_t)blockIdx.y * GM_TILE, bj = (size_t)blockIdx.x * GM_TILE;
  const size_t i0 = bi + ty * GM_R, j0 = bj + tx * GM_R;
  float acc[GM_R][GM_R];
  gm_stage_issue(g, st, bi, bj, 0, t);
  gm_acc_init(g, acc, i0, j0);
  for (size_t k0 = 0; k0 < g.K; k0 += GM_KT) {
    gm_stage_unpack(g, st, sa, sb, t);
    __syncthreads();
    if (k0 + GM_KT < g.K) gm_stage_issue(g, st, bi, bj, k0 + GM_KT, t);
    for (int kb = 0; kb < GM_KT && k0 + kb < g.K; kb += BK)
      gm_tc_block<BK>(g, sa, sb, kb, ty, tx, acc);
    __syncthreads();
  }
  gm_acc_store(g, acc, i0, j0);
}

/* ---- host side ---- */
#ifndef AA_GEMM_CUDA_EMULATE

extern "C" int aa_gmcu_devices(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no device" error */
    return 0;
  }
  return n;
}

/* Elements spanned by a rows x cols array of row stride ld (0 when empty). */
static size_t gm_extent(size_t ld, size_t rows, size_t cols) {
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}

/* gm_tc<BK> with its dynamic shared memory (allowed above 48 KB once per kernel; the setting is the device's, so it
   is made on every launch: one cheap call against a kernel of milliseconds). */
template <int BK> static int gm_launch_tc(dim3 grid, dim3 block, const gm_args &g) {
  if (cudaFuncSetAttribute(gm_tc<BK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gm_tc_smem) != cudaSuccess)
    return GM_EUNSUPPORTED;
  gm_tc<BK><<<grid, block, gm_tc_smem>>>(g);
  if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return GM_EUNSUPPORTED;
  return GM_OK;
}

static int gm_launch(const aa_gmcu_job_t *j, double *C, const double *A, const double *B) {
  gm_args g = {C,    A,    B,         j->ldc,    j->lda,        j->ldb,       j->M,
               j->N, j->K, j->transA, j->transB, j->accumulate, j->frac_bits, j->out_bits};
  dim3 block(GM_THREADS, GM_THREADS),
      grid((unsigned)((j->N + GM_TILE - 1) / GM_TILE), (unsigned)((j->M + GM_TILE - 1) / GM_TILE));
  switch (j->block_k) {
  case 0:
    gm_seq32<<<grid, block>>>(g);
    break;
  case 4:
    return gm_launch_tc<4>(grid, block, g);
  case 8:
    return gm_launch_tc<8>(grid, block, g);
  case 16:
    return gm_launch_tc<16>(grid, block, g);
  case 32:
    return gm_launch_tc<32>(grid, block, g);
  default:
    return GM_EUNSUPPORTED;
  }
  if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return GM_EUNSUPPORTED;
  return GM_OK;
}

extern "C" int aa_gmcu_run(const aa_gmcu_job_t *j, int on_device) {
  if (!aa_hd_use_gpu()) return GM_EUNSUPPORTED;
  if ((j->M + GM_TILE - 1) / GM_TILE > 65535) return GM_EUNSUPPORTED; /* the grid's y limit: M > 4194240 */
  if (on_device) return gm_launch(j, j->C, j->A, j->B);
  size_t na = j->transA ? gm_extent(j->lda, j->K, j->M) : gm_extent(j->lda, j->M, j->K);
  size_t nb = j->transB ? gm_extent(j->ldb, j->N, j->K) : gm_extent(j->ldb, j->K, j->N);
  size_t nc = gm_extent(j->ldc, j->M, j->N);
  double *dA = NULL, *dB = NULL, *dC = NULL;
  int st = GM_ENOMEM;
  if ((na == 0 || cudaMalloc(&dA, na * sizeof(double)) == cudaSuccess) &&
      (nb == 0 || cudaMalloc(&dB, nb * sizeof(double)) == cudaSuccess) &&
      cudaMalloc(&dC, nc * sizeof(double)) == cudaSuccess) {
    st = GM_EUNSUPPORTED;
    /* C goes in whole (the gaps between rows when ldc > N come back unchanged) */
    if ((na == 0 || cudaMemcpy(dA, j->A, na * sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess) &&
        (nb == 0 || cudaMemcpy(dB, j->B, nb * sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess) &&
        cudaMemcpy(dC, j->C, nc * sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess) {
      st = gm_launch(j, dC, dA, dB);
      if (st == GM_OK && cudaMemcpy(j->C, dC, nc * sizeof(double), cudaMemcpyDeviceToHost) != cudaSuccess)
        st = GM_EUNSUPPORTED;
    }
  }
  cudaGetLastError();
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  return st;
}
#endif
