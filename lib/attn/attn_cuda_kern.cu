/* attnacc: the GPU emulation's kernels: one thread per (query row, split) of the FA2 split-KV forward, then the
 * combine. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn-cuda.h"

/* lib/common.h's AA_OK, AA_ENOMEM, AA_EUNSUPPORTED (that header is C only) */
#define AT_OK 0
#define AT_ENOMEM 2
#define AT_EUNSUPPORTED 7
#define AT_THREADS 64

/* AA_ATTN_CUDA_TIMES set: the seconds since the last mark on stderr, the device synchronised first (what a pass
   costs; the results do not change). */
static void at_mark(const char *what) {
  static double last = 0;
  if (getenv("AA_ATTN_CUDA_TIMES") == NULL) return;
  cudaDeviceSynchronize();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  if (what != NULL && last > 0) fprintf(stderr, "attn cuda: %s %.3f s\n", what, now - last);
  last = now;
}

/* Each thread is one CPU iteration of cuda.c's run_host: the row state and P scratch in local memory. */
__global__ void __launch_bounds__(AT_THREADS) at_split_rows(aa_core_fwd_t p, size_t nwork) {
  size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (x >= nwork) return;
  aa_core_row_t w;
  float P[AA_CORE_MAXTK];
  size_t rows = p.heads * p.n_q, row = x % rows, sp = x / rows;
  w.cast = w.over = w.under = 0, w.pmax = 0;
  aa_core_fwd_row(&p, row / p.n_q, row % p.n_q, sp, &w, P);
  if (w.doubt) return; /* the host redoes the row (cuda.c), counters included */
  atomicAdd(&p.counters[0], w.cast);
  if (w.over) atomicAdd(&p.counters[1], w.over);
  if (w.under) atomicAdd(&p.counters[2], w.under);
  atomicMax(p.pmax, (unsigned long long)__double_as_longlong(w.pmax)); /* nonnegative doubles order as their bits */
}

__global__ void __launch_bounds__(AT_THREADS) at_combine(aa_core_fwd_t p) {
  size_t row = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  float acc[AA_CORE_MAXD];
  if (row < p.heads * p.n_q) aa_core_combine_row(&p, row, acc);
}

/* Device buffers of one forward, freed together. */
struct at_bufs {
  void *b[14];
};
static void at_free(at_bufs *B) {
  for (int i = 0; i < 14; i++)
    if (B->b[i] != NULL) cudaFree(B->b[i]);
}
static int at_alloc(at_bufs *B, int i, size_t bytes, const void *src) {
  if (cudaMalloc(&B->b[i], bytes ? bytes : 1) != cudaSuccess) {
    B->b[i] = NULL;
    return 0;
  }
  if (src != NULL) return cudaMemcpy(B->b[i], src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  return cudaMemset(B->b[i], 0, bytes ? bytes : 1) == cudaSuccess;
}

extern "C" int aa_atcu_forward(const aa_core_fwd_t *hp, float *O, float *LSE, unsigned char *doubt,
                               unsigned long long *cnt, unsigned long long *pmax) {
  if (!aa_hd_use_gpu()) return AT_EUNSUPPORTED;
  aa_core_fwd_t p = *hp;
  size_t rows = p.heads * p.n_q, nQ = rows * p.d, nK = p.heads / p.group * p.n_k * p.d;
  size_t ns = p.nsplit > 1 ? p.nsplit : 0;
  at_bufs B;
  memset(&B, 0, sizeof B);
  int ok = at_alloc(&B, 0, nQ * 4, hp->Q) && at_alloc(&B, 1, nK * 4, hp->K) && at_alloc(&B, 2, nK * 4, hp->V) &&
           at_alloc(&B, 3, 2 * p.n_q * 8, hp->lo) && at_alloc(&B, 4, nQ * 4, NULL) &&
           at_alloc(&B, 5, rows * 4, NULL) && at_alloc(&B, 6, ns * nQ * 4, NULL) &&
           at_alloc(&B, 7, ns * rows * 4, NULL) && at_alloc(&B, 8, 32, NULL) &&
           at_alloc(&B, 9, rows * p.nsplit, NULL) && at_alloc(&B, 10, p.shifted ? 2 * rows * 4 : 0, NULL) &&
           at_alloc(&B, 11, p.shifted ? rows : 0, NULL);
  if (!ok) {
    at_free(&B);
    cudaGetLastError();
    return AT_ENOMEM;
  }
  p.Q = (const float *)B.b[0], p.K = (const float *)B.b[1], p.V = (const float *)B.b[2];
  p.lo = (const int64_t *)B.b[3], p.hi = (const int64_t *)B.b[3] + p.n_q;
  p.O = (float *)B.b[4], p.LSE = (float *)B.b[5], p.Os = (float *)B.b[6], p.Ls = (float *)B.b[7];
  p.counters = (unsigned long long *)B.b[8], p.pmax = (unsigned long long *)B.b[8] + 3;
  p.doubt = (unsigned char *)B.b[9];
  p.Msh = (float *)B.b[10], p.Lsum = (float *)B.b[10] + rows, p.rflag = (unsigned char *)B.b[11];
  size_t nwork = rows * p.nsplit;
  /* a deep per-thread stack: the row state and P (about 2 KiB) live in local memory */
  cudaDeviceSetLimit(cudaLimitStackSize, 16384);
  at_mark(NULL);
  at_split_rows<<<(unsigned)((nwork + AT_THREADS - 1) / AT_THREADS), AT_THREADS>>>(p, nwork);
  if (p.nsplit > 1) at_combine<<<(unsigned)((rows + AT_THREADS - 1) / AT_THREADS), AT_THREADS>>>(p);
  at_mark("forward: rows and combine");
  unsigned long long c4[4];
  int st = cudaDeviceSynchronize() == cudaSuccess &&
           cudaMemcpy(O, p.O, nQ * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(LSE, p.LSE, rows * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(c4, B.b[8], 32, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(doubt, B.b[9], rows * p.nsplit, cudaMemcpyDeviceToHost) == cudaSuccess &&
           (!p.shifted || (cudaMemcpy(hp->Msh, p.Msh, rows * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
                           cudaMemcpy(hp->Lsum, p.Lsum, rows * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
                           cudaMemcpy(hp->rflag, p.rflag, rows, cudaMemcpyDeviceToHost) == cudaSuccess));
  at_free(&B);
  if (!st) {
    cudaGetLastError();
    return AT_EUNSUPPORTED;
  }
  cnt[0] = c4[0], cnt[1] = c4[1], cnt[2] = c4[2], *pmax = c4[3];
  return AT_OK;
}

/* The backward's passes (attn-bwd-core.h): one thread per (query, key) pair, then per dK/dV element, with the fixed
   dq_reduce per dQ element and per q tile (its checks), then per dQ element; each thread is one iteration of
   cuda_bwd.c's run_host. */
#define AT_PT 16 /* the pair pass's block: 16 query rows x 16 keys of one head */

/* Bytes of shared memory at_bwd_pairs takes: Q, dO, K, V rows of its block, each padded by one float (so the 16
   keys of a warp's K reads fall in 16 banks). */
static size_t at_pairs_shared(size_t d) {
  return 4 * AT_PT * (d + 1) * sizeof(float);
}

/* Pass 1 by blocks: the block's rows of Q and dO and its keys' rows of K and V copied to shared memory once, then
   each thread one pair by aa_core_bwd_pair_at on those copies (the same values in the same order of operations, so
   the bits of one thread per pair reading global memory: run_host's). */
__global__ void __launch_bounds__(AT_PT *AT_PT) at_bwd_pairs(aa_core_bwd_t p) {
  extern __shared__ float at_sh[];
  size_t d = p.d, dp = d + 1, h = p.h0 + blockIdx.z, g = h / p.group;
  size_t i0 = (size_t)blockIdx.y * AT_PT, j0 = (size_t)blockIdx.x * AT_PT;
  float *qs = at_sh, *os = qs + AT_PT * dp, *ks = os + AT_PT * dp, *vs = ks + AT_PT * dp;
  for (size_t e = threadIdx.y * AT_PT + threadIdx.x; e < AT_PT * d; e += AT_PT * AT_PT) {
    size_t r = e / d, c = e % d, row = (h * p.n_q + i0 + r) * d + c, key = (g * p.n_k + j0 + r) * d + c;
    if (i0 + r < p.n_q) qs[r * dp + c] = p.Q[row], os[r * dp + c] = p.dO[row];
    if (j0 + r < p.n_k) ks[r * dp + c] = p.K[key], vs[r * dp + c] = p.V[key];
  }
  __syncthreads();
  size_t i = i0 + threadIdx.y, j = j0 + threadIdx.x;
  if (i >= p.n_q || j >= p.n_k) return;
  aa_core_rows_t rw = {qs + threadIdx.y * dp, ks + threadIdx.x * dp, os + threadIdx.y * dp, vs + threadIdx.x * dp};
  aa_core_bwd_pair_at(&p, h, i, j, &rw);
}
__global__ void __launch_bounds__(128) at_bwd_kv(aa_core_bwd_t p, size_t n) {
  size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (x < n) aa_core_bwd_kv(&p, p.h0 / p.group + x / (p.n_k * p.d), x / p.d % p.n_k, x % p.d);
}
__global__ void __launch_bounds__(128) at_bwd_fx_elem(aa_core_bwd_t p, size_t n) {
  size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (x < n) aa_core_bwd_fx_elem(&p, p.h0 + x / (p.n_q * p.d), x / p.d % p.n_q, x % p.d);
}
__global__ void __launch_bounds__(128) at_bwd_fx_tile(aa_core_bwd_t p, size_t n) {
  size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (x < n) aa_core_bwd_fx_tile(&p, p.h0 + x / p.nqt, x % p.nqt);
}
__global__ void __launch_bounds__(128) at_bwd_dq(aa_core_bwd_t p, size_t n) {
  size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (x < n) aa_core_bwd_dq(&p, p.h0 + x / (p.n_q * p.d), x / p.d % p.n_q, x % p.d);
}

/* The two-pass rows' statistics before the pairs, and D with dS after them (p-dp): one thread per query row. */
__global__ void __launch_bounds__(128) at_bwd_stats(aa_core_bwd_t p, size_t n) {
  size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (x < n) aa_core_bwd_stats(&p, x / p.n_q, x % p.n_q);
}
__global__ void __launch_bounds__(128) at_bwd_ds(aa_core_bwd_t p, size_t n) {
  size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (x < n) aa_core_bwd_ds_row(&p, p.h0 + x / p.n_q, x % p.n_q);
}

static unsigned at_grid(size_t n) {
  return (unsigned)((n + 127) / 128);
}

/* The doubtful pairs (pass 1's list, in device memory) again on the host with its libm, the CPU's: their Pdv and dS
   written back before passes 2 and 3 (P for dS too with p-dp; ML: the two-pass rows' statistics on the host). Returns
   the count, -1 when the list overflowed, -2 on a CUDA error. */
static long at_redo_pairs(const aa_core_bwd_t *hp, const aa_core_bwd_t *dp, float *ML) {
  unsigned long long n = 0;
  if (cudaMemcpy(&n, dp->ndoubt, 8, cudaMemcpyDeviceToHost) != cudaSuccess) return -2;
  if (n > hp->doubt_cap) return -1;
  if (n > 0 && cudaMemcpy(hp->doubt, dp->doubt, n * 8, cudaMemcpyDeviceToHost) != cudaSuccess) return -2;
  aa_core_bwd_t h = *hp;
  h.doubt_log2 = -1, h.ML = ML;
  for (unsigned long long x = 0; x < n; x++) {
    unsigned long long pr = hp->doubt[x], row = pr / h.n_k + dp->h0 * h.n_q; /* pr: in the batch's arrays */
    float pdv, ds, pds;
    int doubt = 0;
    aa_core_bwd_vals(&h, row / h.n_q, row % h.n_q, pr % h.n_k, &pdv, &ds, &pds, &doubt);
    if (cudaMemcpy(dp->Pdv + pr, &pdv, 4, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dp->dS + pr, &ds, 4, cudaMemcpyHostToDevice) != cudaSuccess ||
        (dp->Pds != NULL && cudaMemcpy(dp->Pds + pr, &pds, 4, cudaMemcpyHostToDevice) != cudaSuccess))
      return -2;
  }
  return (long)n;
}

/* The two-pass rows whose sums met a doubtful libm value (at_bwd_stats's flags) again on the host: statistics and
   pairs, written back before the doubtful pairs' redo; ML receives every row's statistics. Returns the pairs redone,
   -2 on a CUDA error or without memory; *bad: a value not finite. */
static long at_redo_rows(const aa_core_bwd_t *hp, const aa_core_bwd_t *dp, float *ML, unsigned *bad, size_t nh) {
  size_t rows = hp->heads * hp->n_q, nk = hp->n_k, r0 = dp->h0 * hp->n_q, r1 = r0 + nh * hp->n_q;
  unsigned char *flag = (unsigned char *)malloc(rows + 1);
  float *buf = (float *)malloc(3 * nk * sizeof(float));
  int ok = flag != NULL && buf != NULL && cudaMemcpy(ML, dp->ML, rows * 8, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(flag, dp->rdoubt, rows, cudaMemcpyDeviceToHost) == cudaSuccess;
  aa_core_bwd_t h = *hp;
  h.doubt_log2 = -1, h.ML = ML;
  long n = 0;
  for (size_t x = r0; ok && x < r1; x++) {
    if (!flag[x]) continue;
    size_t y = (x - r0) * nk; /* the row's pairs in the batch's arrays */
    *bad |= (unsigned)aa_core_bwd_tp_row(&h, x / h.n_q, x % h.n_q, buf, buf + nk, buf + 2 * nk);
    ok = cudaMemcpy(dp->ML + 2 * x, ML + 2 * x, 8, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(dp->Pdv + y, buf, nk * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(dp->dS + y, buf + nk, nk * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(dp->Pds + y, buf + 2 * nk, nk * 4, cudaMemcpyHostToDevice) == cudaSuccess;
    n += (long)nk;
  }
  free(flag), free(buf);
  return ok ? n : -2;
}

/* The KV heads [g0, g1) of the backward once the pair arrays are in place: their pairs from q head p->h0 = g0 group
   on, the host's redo of the doubtful ones (ML: host room for the two-pass rows' statistics), then dK/dV of those KV
   heads and dQ of their q heads. Returns the pairs redone, -1 when the doubt list overflowed, -2 on a CUDA error. */
static long at_bwd_batch(aa_core_bwd_t *p, const aa_core_bwd_t *hp, size_t g0, size_t g1, float *ML, unsigned *rbad) {
  size_t nh = (g1 - g0) * p->group, nq = nh * p->n_q, nqd = nq * p->d, nkd = (g1 - g0) * p->n_k * p->d;
  p->h0 = g0 * p->group;
  if (cudaMemset(p->ndoubt, 0, 8) != cudaSuccess) return -2;
  size_t sh = at_pairs_shared(p->d);
  dim3 grid((unsigned)((p->n_k + AT_PT - 1) / AT_PT), (unsigned)((p->n_q + AT_PT - 1) / AT_PT), (unsigned)nh);
  if (cudaFuncSetAttribute(at_bwd_pairs, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh) != cudaSuccess)
    return -2;
  at_bwd_pairs<<<grid, dim3(AT_PT, AT_PT), sh>>>(*p);
  if (cudaDeviceSynchronize() != cudaSuccess) return -2;
  at_mark("backward: pairs");
  long m = p->twopass ? at_redo_rows(hp, p, ML, rbad, nh) : 0;
  long n = m >= 0 ? at_redo_pairs(hp, p, ML) : m;
  if (n < 0) return n;
  if (p->pdp) at_bwd_ds<<<at_grid(nq), 128>>>(*p, nq);
  at_mark("backward: host redo of doubtful pairs");
  at_bwd_kv<<<at_grid(nkd), 128>>>(*p, nkd);
  at_mark("backward: dK, dV");
  if (p->dq_kind == AA_CORE_RED_FIXED) {
    at_bwd_fx_elem<<<at_grid(nqd), 128>>>(*p, nqd);
    at_bwd_fx_tile<<<at_grid(nh * p->nqt), 128>>>(*p, nh * p->nqt);
  }
  at_bwd_dq<<<at_grid(nqd), 128>>>(*p, nqd);
  at_mark("backward: dQ");
  return cudaDeviceSynchronize() == cudaSuccess ? n + m : -2;
}

/* KV heads per batch: the pair arrays (P for dV, dS, and P for dS with the two-pass or p-dp backward: 4 bytes each
   per pair) of as many KV heads as fit in 85 % of the free device memory, at most AA_ATTN_CUDA_BATCH_KV (a test
   hook); 0 when not one fits (the CPU runs the backward). */
static size_t at_batch_kv(const aa_core_bwd_t *p) {
  size_t fr = 0, tot = 0, kvh = p->heads / p->group;
  size_t per = p->group * p->n_q * p->n_k * 4 * (2 + (p->twopass || p->pdp ? 1 : 0)) + 1;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return 0;
  size_t kb = (size_t)(0.85 * (double)fr) / per;
  const char *cap = getenv("AA_ATTN_CUDA_BATCH_KV");
  if (cap != NULL && strtoul(cap, NULL, 10) > 0 && kb > strtoul(cap, NULL, 10)) kb = strtoul(cap, NULL, 10);
  return kb < kvh ? kb : kvh;
}

extern "C" int aa_atcu_backward(const aa_core_bwd_t *hp, float *dQ, float *dK, float *dV, unsigned *bad,
                                size_t *redone) {
  if (!aa_hd_use_gpu()) return AT_EUNSUPPORTED;
  aa_core_bwd_t p = *hp;
  size_t rows = p.heads * p.n_q, nQ = rows * p.d, nK = p.heads / p.group * p.n_k * p.d, kvh = p.heads / p.group;
  size_t nt = p.heads * p.nqt, fx = p.dq_kind == AA_CORE_RED_FIXED; /* the fixed dq_reduce's checks */
  at_bufs B;
  memset(&B, 0, sizeof B);
  int ok = at_alloc(&B, 0, nQ * 4, hp->Q) && at_alloc(&B, 1, nK * 4, hp->K) && at_alloc(&B, 2, nK * 4, hp->V) &&
           at_alloc(&B, 3, nQ * 4, hp->dO) && at_alloc(&B, 4, rows * 8, NULL) &&
           at_alloc(&B, 5, 2 * p.n_q * 8, hp->lo) && at_alloc(&B, 6, p.nqt * p.nkt, hp->seen) &&
           at_alloc(&B, 8, (nQ + 2 * nK) * 4 + 16, NULL) && at_alloc(&B, 9, p.doubt_cap * 8, NULL) &&
           at_alloc(&B, 10, fx * nQ * 4, NULL) && at_alloc(&B, 11, fx * nt * 16, NULL) &&
           at_alloc(&B, 12, p.twopass ? rows * 9 : 0, NULL);
  /* the pair arrays last, for a batch of KV heads that fits in what is left */
  size_t kb = ok ? at_batch_kv(&p) : 0, npb = kb * p.group * p.n_q * p.n_k;
  ok = ok && kb > 0 && at_alloc(&B, 7, 2 * npb * 4, NULL) && at_alloc(&B, 13, p.twopass || p.pdp ? npb * 4 : 0, NULL);
  ok = ok && cudaMemcpy(B.b[4], hp->B, rows * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
       cudaMemcpy((float *)B.b[4] + rows, hp->D, rows * 4, cudaMemcpyHostToDevice) == cudaSuccess;
  if (!ok) {
    at_free(&B);
    cudaGetLastError();
    return AT_ENOMEM;
  }
  p.Q = (const float *)B.b[0], p.K = (const float *)B.b[1], p.V = (const float *)B.b[2];
  p.dO = (const float *)B.b[3], p.B = (const float *)B.b[4], p.D = (const float *)B.b[4] + rows;
  p.lo = (const int64_t *)B.b[5], p.hi = (const int64_t *)B.b[5] + p.n_q, p.seen = (const unsigned char *)B.b[6];
  p.Pdv = (float *)B.b[7], p.dS = (float *)B.b[7] + npb;
  /* the flag and the counter first, so that the counter is 8-byte aligned */
  p.bad = (unsigned *)B.b[8], p.ndoubt = (unsigned long long *)((char *)B.b[8] + 8);
  p.dQ = (float *)((char *)B.b[8] + 16), p.dK = p.dQ + nQ, p.dV = p.dK + nK;
  p.doubt = (unsigned long long *)B.b[9];
  p.fxe = (unsigned *)B.b[10], p.fxt = (unsigned long long *)B.b[11];
  /* the two-pass rows' max and sum (2 floats a row), then their flags */
  p.ML = (float *)B.b[12], p.rdoubt = (unsigned char *)B.b[12] + rows * 8;
  p.Pds = p.twopass || p.pdp ? (float *)B.b[13] : NULL;
  p.tp.Q = p.Q, p.tp.K = p.K, p.tp.lo = p.lo, p.tp.hi = p.hi;
  float *ML = p.twopass ? (float *)malloc(rows * 8 + 8) : NULL;
  unsigned rbad = 0;
  long n = p.twopass && ML == NULL ? -2 : 0, total = 0;
  at_mark(NULL);
  if (p.twopass) at_bwd_stats<<<at_grid(rows), 128>>>(p, rows); /* every row's, once */
  for (size_t g0 = 0; g0 < kvh && n >= 0; g0 += kb) {
    n = at_bwd_batch(&p, hp, g0, g0 + kb < kvh ? g0 + kb : kvh, ML, &rbad);
    total += n;
  }
  free(ML);
  int st = n >= 0 && cudaDeviceSynchronize() == cudaSuccess &&
           cudaMemcpy(dQ, p.dQ, nQ * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(dK, p.dK, nK * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(dV, p.dV, nK * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(bad, p.bad, 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(hp->fxt, p.fxt, fx * nt * 16, cudaMemcpyDeviceToHost) == cudaSuccess;
  at_free(&B);
  if (!st) {
    cudaGetLastError();
    return AT_EUNSUPPORTED;
  }
  *redone = (size_t)total, *bad |= rbad;
  return AT_OK;
}
