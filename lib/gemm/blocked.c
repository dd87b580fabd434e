/* attnacc: cache-blocked gemm driver (packing, k blocks, OpenMP over row blocks) and run-time kernel choice. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AA_GEMM_X86 1
#endif

#include "gemm-impl.h"

/* Why this is bit-exact: every output keeps its own accumulator and sees
   exactly the operations acc = fma(a_k, b_k, acc) for k = 0, 1, ..., K-1 in
   that order; the kernels only compute many outputs side by side (lanes
   across j, registers across i) and advance all their chains in lockstep.
   Splitting K into blocks of KC stores the accumulator into C as a double
   (exact for fp32 and fp64) and reloads it (exact), so the chain is
   unchanged. Padding lanes of edge tiles compute values never stored. Each
   output is computed by one thread, so the thread count changes nothing. */

/* k block: the MR x KC A micro-panel and the KC x NR B micro-panel (12 KiB
   and 32 KiB for the fp32 AVX-512 kernel) stay in L1, the MC x KC A block in L2 */
#define KC 256
#define MC_TILES 8 /* row block = MC_TILES * MR rows per task */
/* Bytes of packed B kept at once: the whole K extent of a column block is
   packed, so each thread streams its rows of A through all of K (one pass
   over A, row after row) while B stays in cache. */
#define PB_BYTES ((size_t)16 << 20)
/* Outputs above this size are written with non-temporal stores: C is then
   far larger than the caches and would only be read back for ownership. */
#define STREAM_BYTES ((size_t)64 << 20)
#define TILE_MAX 512 /* largest mr * nr of any kernel */

/* ---- run-time choice of the instruction set ---- */

static int forced = -1;
static const char *const isa_names[AA_ISA_COUNT] = {"avx512f", "avx2-fma", "scalar"};

static int isa_supported(int isa) {
#ifdef AA_GEMM_X86
  __builtin_cpu_init();
  if (isa == AA_ISA_AVX512) return __builtin_cpu_supports("avx512f");
  if (isa == AA_ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return 1;
#else
  return isa == AA_ISA_SCALAR;
#endif
}

/* ATTNACC_GEMM_KERNEL names a kernel (isa_names) that the run-time choice
   takes instead of the best one, when this CPU can run it (so that a whole
   test or benchmark run exercises a portable path); read once. */
static int env_isa(void) {
  static int cached = -2; /* -2: not read yet; -1: unset, unknown or unsupported */
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v != -2) return v;
  const char *e = getenv("ATTNACC_GEMM_KERNEL");
  v = -1;
  for (int i = 0; e != NULL && i < AA_ISA_COUNT; i++)
    if (strcmp(e, isa_names[i]) == 0 && isa_supported(i)) v = i;
  __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  return v;
}

int aa_gemm_isa(void) {
  if (forced >= 0) return forced;
  const int e = env_isa();
  if (e >= 0) return e;
  for (int i = 0; i < AA_ISA_COUNT; i++)
    if (isa_supported(i)) return i;
  return AA_ISA_SCALAR;
}

const char *aa_gemm_kernel_name(void) {
  return isa_names[aa_gemm_isa()];
}

int aa_gemm_force_kernel(const char *name) {
  if (name == NULL || strcmp(name, "auto") == 0) {
    forced = -1;
    return AA_OK;
  }
  for (int i = 0; i < AA_ISA_COUNT; i++)
    if (strcmp(name, isa_names[i]) == 0) {
      if (!isa_supported(i)) return AA_EUNSUPPORTED;
      forced = i;
      return AA_OK;
    }
  return AA_ENOTFOUND;
}

/* ---- packing (op(A) and op(B) converted to the kernel's element type) ---- */

/* A micro-panels: rows i0 .. i0+mc of op(A), columns p0 .. p0+kc, as
   ceil(mc/mr) panels of kc x mr elements (k major); rows past mc are 0. */
#define DEFINE_PACK(T, SUF)                                                                                          \
  static void pack_a_##SUF(T *pa, const double *A, size_t lda, int transA, size_t i0, size_t mc, size_t p0,          \
                           size_t kc, size_t mr) {                                                                   \
    for (size_t s = 0; s < mc; s += mr, pa += kc * mr) {                                                             \
      size_t rows = mc - s < mr ? mc - s : mr;                                                                       \
      if (transA) {                                                                                                  \
        for (size_t k = 0; k < kc; k++) {                                                                            \
          const double *src = A + (p0 + k) * lda + i0 + s;                                                           \
          T *dst = pa + k * mr;                                                                                      \
          size_t r = 0;                                                                                              \
          for (; r < rows; r++)                                                                                      \
            dst[r] = (T)src[r];                                                                                      \
          for (; r < mr; r++)                                                                                        \
            dst[r] = 0;                                                                                              \
        }                                                                                                            \
      } else {                                                                                                       \
        size_t r = 0;                                                                                                \
        for (; r < rows; r++) {                                                                                      \
          const double *src = A + (i0 + s + r) * lda + p0;                                                           \
          for (size_t k = 0; k < kc; k++)                                                                            \
            pa[k * mr + r] = (T)src[k];                                                                              \
        }                                                                                                            \
        for (; r < mr; r++)                                                                                          \
          for (size_t k = 0; k < kc; k++)                                                                            \
            pa[k * mr + r] = 0;                                                                                      \
      }                                                                                                              \
    }                                                                                                                \
  }                                                                                                                  \
  /* one B micro-panel: columns j0 .. j0+cols of op(B) (cols <= nr), rows p0 .. p0+kc, kc x nr (k major) */          \
  static void pack_b_##SUF(T *pb, const double *B, size_t ldb, int transB, size_t j0, size_t cols, size_t p0,        \
                           size_t kc, size_t nr) {                                                                   \
    if (transB) {                                                                                                    \
      size_t c = 0;                                                                                                  \
      for (; c < cols; c++) {                                                                                        \
        const double *src = B + (j0 + c) * ldb + p0;                                                                 \
        for (size_t k = 0; k < kc; k++)                                                                              \
          pb[k * nr + c] = (T)src[k];                                                                                \
      }                                                                                                              \
      for (; c < nr; c++)                                                                                            \
        for (size_t k = 0; k < kc; k++)                                                                              \
          pb[k * nr + c] = 0;                                                                                        \
    } else {                                                                                                         \
      for (size_t k = 0; k < kc; k++) {                                                                              \
        const double *src = B + (p0 + k) * ldb + j0;                                                                 \
        T *dst = pb + k * nr;                                                                                        \
        size_t c = 0;                                                                                                \
        for (; c < cols; c++)                                                                                        \
          dst[c] = (T)src[c];                                                                                        \
        for (; c < nr; c++)                                                                                          \
          dst[c] = 0;                                                                                                \
      }                                                                                                              \
    }                                                                                                                \
  }
DEFINE_PACK(float, f32)
DEFINE_PACK(double, f64)

static void pack_a(const aa_gemm_kern_t *kd, void *pa, const double *A, size_t lda, int transA, size_t i0, size_t mc,
                   size_t p0, size_t kc) {
  if (kd->esize == sizeof(float))
    pack_a_f32(pa, A, lda, transA, i0, mc, p0, kc, (size_t)kd->mr);
  else
    pack_a_f64(pa, A, lda, transA, i0, mc, p0, kc, (size_t)kd->mr);
}

static void pack_b(const aa_gemm_kern_t *kd, void *pb, const double *B, size_t ldb, int transB, size_t j0,
                   size_t cols, size_t p0, size_t kc) {
  if (kd->esize == sizeof(float))
    pack_b_f32(pb, B, ldb, transB, j0, cols, p0, kc, (size_t)kd->nr);
  else
    pack_b_f64(pb, B, ldb, transB, j0, cols, p0, kc, (size_t)kd->nr);
}

static void *alloc64(size_t n) {
  void *p = NULL;
  return posix_memalign(&p, 64, n ? n : 64) == 0 ? p : NULL;
}

int aa_gemm_blocked(const aa_gemm_kern_t *kd, double *C, size_t ldc, const double *A, size_t lda, int transA,
                    const double *B, size_t ldb, int transB, size_t M, size_t N, size_t K, int accumulate) {
  const size_t mr = (size_t)kd->mr, nr = (size_t)kd->nr, mc = MC_TILES * mr, es = kd->esize;
  const size_t kcmax = K < KC ? K : KC;
  const size_t nkb = (K + KC - 1) / KC; /* k blocks */
  /* column block: as many nr-strips as fit PB_BYTES with all of K, at least one */
  size_t nc = PB_BYTES / (K * es) / nr * nr;
  if (nc < nr) nc = nr;
  if (nc > (N + nr - 1) / nr * nr) nc = (N + nr - 1) / nr * nr;
  const int stream = M * N * sizeof(double) > STREAM_BYTES && ldc % 8 == 0 && ((uintptr_t)C & 63) == 0;
  int nthreads = 1;
#ifdef _OPENMP
  nthreads = omp_get_max_threads();
#endif
  char *pb = alloc64(K * nc * es);
  char *pa = alloc64((size_t)nthreads * kcmax * mc * es);
  if (pb == NULL || pa == NULL) {
    free(pb);
    free(pa);
    return AA_ENOMEM;
  }
  const size_t nblocks_m = (M + mc - 1) / mc;
  aa_gemm_kern_fn kern = kd->kern;

  AA_OMP(omp parallel num_threads(nthreads)) {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    char *mypa = pa + (size_t)tid * kcmax * mc * es;
    double tile[TILE_MAX];
    for (size_t j0 = 0; j0 < N; j0 += nc) {
      const size_t ncb = N - j0 < nc ? N - j0 : nc;
      const size_t nstrips = (ncb + nr - 1) / nr;
      /* B panel layout: k block kb, strip s at element kb * KC * nc + s * kc * nr */
      AA_OMP(omp for schedule(static))
      for (size_t t = 0; t < nkb * nstrips; t++) {
        const size_t kb = t / nstrips, s = t % nstrips, p0 = kb * KC, kc = K - p0 < KC ? K - p0 : KC;
        const size_t cols = ncb - s * nr < nr ? ncb - s * nr : nr;
        pack_b(kd, pb + (kb * KC * nc + s * kc * nr) * es, B, ldb, transB, j0 + s * nr, cols, p0, kc);
      }
      AA_OMP(omp for schedule(dynamic, 1))
      for (size_t bm = 0; bm < nblocks_m; bm++) {
        const size_t i0 = bm * mc, rows_blk = M - i0 < mc ? M - i0 : mc;
        for (size_t kb = 0; kb < nkb; kb++) {
          const size_t p0 = kb * KC, kc = K - p0 < KC ? K - p0 : KC;
          /* the first k block starts each chain from C (accumulate) or +0;
             the last one may bypass the caches */
          const int mode = (accumulate || kb > 0 ? AA_KERN_LOAD : 0) | (stream && kb == nkb - 1 ? AA_KERN_STREAM : 0);
          pack_a(kd, mypa, A, lda, transA, i0, rows_blk, p0, kc);
          const char *pbk = pb + kb * KC * nc * es;
          for (size_t s = 0; s < nstrips; s++) {
            const size_t jj = j0 + s * nr, cols = ncb - s * nr < nr ? ncb - s * nr : nr;
            for (size_t t = 0; t < rows_blk; t += mr) {
              const size_t rows = rows_blk - t < mr ? rows_blk - t : mr;
              double *c = C + (i0 + t) * ldc + jj;
              const char *pat = mypa + (t / mr) * kc * mr * es, *pbs = pbk + s * kc * nr * es;
              if (rows == mr && cols == nr) {
                kern(kc, pat, pbs, c, ldc, mode);
              } else {
                memset(tile, 0, sizeof tile);
                if (mode & AA_KERN_LOAD)
                  for (size_t r = 0; r < rows; r++)
                    memcpy(tile + r * nr, c + r * ldc, cols * sizeof(double));
                kern(kc, pat, pbs, tile, nr, mode & AA_KERN_LOAD);
                for (size_t r = 0; r < rows; r++)
                  memcpy(c + r * ldc, tile + r * nr, cols * sizeof(double));
              }
            }
          }
        }
      }
    }
#ifdef AA_GEMM_X86
    /* non-temporal stores are weakly ordered: fence before the closing barrier */
    if (stream) _mm_sfence();
#endif
  }
  free(pb);
  free(pa);
  return AA_OK;
}
