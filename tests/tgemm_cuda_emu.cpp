/* attnacc: the GPU gemm kernels' device code run on CPU threads (one per CUDA thread, a barrier per __syncthreads)
 * against aa_gemm, bit for bit: the kernels' logic checked on a machine without a GPU. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

/* tests/cuda-emu.h: CUDA for the host compiler; a block runs as GM_THREADS^2 std::threads. The device-only lines
   not run here are single instructions whose C twins sit beside them: the __CUDA_ARCH__ branches of tc-core.h
   (__clzll, __float_as_uint), and in the kernel file __fma_rz, __dadd_rz, __double2float_rz, __viaddmax_s32 and the
   cp.async copy, commit and wait (a plain copy here: each thread waits only for its own copies). */
#include "cuda-emu.h"

#define AA_GEMM_CUDA_EMULATE 1
#include "gemm_cuda_kern.cu"

#include "gemm.h"
#include "rng.h"

/* One launch of the grid, GM_THREADS^2 threads a block. */
template <typename F> static void launch(dim3 grid, F kern) {
  emu_launch(grid, dim3(GM_THREADS, GM_THREADS), kern);
}

/* The kernel of gm_launch (gemm_cuda_kern.cu) for the model's row. */
static void run_kernel(const gm_args &g, const aa_accum_info_t *m) {
  dim3 grid((unsigned)((g.N + GM_TILE - 1) / GM_TILE), (unsigned)((g.M + GM_TILE - 1) / GM_TILE));
  switch (m->sum == AA_SUM_BLOCK ? m->block_k : 0) {
  case 0:
    launch(grid, [=] { gm_seq32(g); });
    break;
  case 4:
    launch(grid, [=] { gm_tc<4>(g); });
    break;
  case 8:
    launch(grid, [=] { gm_tc<8>(g); });
    break;
  case 16:
    launch(grid, [=] { gm_tc<16>(g); });
    break;
  default:
    launch(grid, [=] { gm_tc<32>(g); });
    break;
  }
}

/* Operand values: 0 BF16-like, 1 FP32, 2 FP32 over exponents -140..120, 3 edge values (Inf, NaN, subnormals,
   +-FLT_MAX, 2^+-100); 1/16 signed zeros. */
static double draw(aa_pcg64_t *rng, int kind) {
  static const double edges[] = {INFINITY,        -INFINITY, NAN,       0x1p-149,       -0x1p-149,
                                 0x1.fffffcp-127, 0x1p100,   -0x1p-100, 0x1.fffffep127, -0x1.fffffep127};
  uint64_t r = aa_pcg64_next(rng);
  if ((r & 15) == 0) return (r & 16) ? -0.0 : 0.0;
  if (kind == 3 && (r >> 40) % 4 == 0) return edges[(r >> 44) % 10];
  int bits = kind == 0 ? 8 : 24;
  uint64_t mant = (UINT64_C(1) << (bits - 1)) | ((r >> 8) & ((UINT64_C(1) << (bits - 1)) - 1));
  int lo = kind == 0 ? -8 : kind == 1 ? -20 : -140, hi = kind == 0 ? 8 : kind == 1 ? 20 : 120;
  double v =
      (double)(float)ldexp((double)mant, lo + (int)(aa_pcg64_next(rng) % (uint64_t)(hi - lo + 1)) - (bits - 1));
  return (r >> 5) & 1 ? -v : v;
}

static unsigned long long bits64(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return (unsigned long long)u;
}
/* tests/tests.h's helpers (a C header) for C++: bitwise equality with any NaN equal to any NaN; the seed. */
static bool same(double a, double b) {
  return (a != a && b != b) || bits64(a) == bits64(b);
}
static uint64_t test_seed(void) {
  const char *s = getenv("ATTNACC_SEED");
  uint64_t seed = s != NULL ? strtoull(s, NULL, 0) : UINT64_C(20261130);
  printf("tgemm_cuda_emu: seed %llu (set ATTNACC_SEED to change; include it in bug reports)\n",
         (unsigned long long)seed);
  return seed;
}

/* One case: the emulated kernel's C against aa_gemm's over C's whole extent. */
static int one_case(aa_pcg64_t *rng, aa_accum_t model, const size_t *shape, int tA, int tB, int acc, int kind) {
  const size_t M = shape[0], N = shape[1], K = shape[2];
  const size_t lda = (tA ? M : K) + 3, ldb = (tB ? K : N) + 1, ldc = N + 2;
  std::vector<double> A((tA ? K : M) * lda + 1), B((tB ? N : K) * ldb + 1), C(M * ldc), want;
  for (auto *v : {&A, &B, &C})
    for (auto &x : *v)
      x = draw(rng, kind);
  want = C;
  aa_gemm(want.data(), ldc, A.data(), lda, tA, B.data(), ldb, tB, M, N, K, acc, model);
  const aa_accum_info_t *m = aa_accum_info(model);
  gm_args g = {C.data(), A.data(), B.data(), ldc, lda, ldb, M, N, K, tA, tB, acc, m->frac_bits, m->out_bits};
  run_kernel(g, m);
  for (size_t x = 0; x < C.size(); x++)
    if (!same(C[x], want[x])) {
      printf("FAIL %s M=%zu N=%zu K=%zu tA=%d tB=%d acc=%d kind=%d: C[%zu][%zu] emulated GPU %a (0x%016llx) CPU %a "
             "(0x%016llx)\n",
             m->name, M, N, K, tA, tB, acc, kind, x / ldc, x % ldc, C[x], bits64(C[x]), want[x], bits64(want[x]));
      return 0;
    }
  return 1;
}

int main() {
  uint64_t seed = test_seed();
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 29);
  /* one block, two blocks either way (rows and columns beyond M, N), K within one k-step, across several, 0; full
     64 x 64 tiles over several whole k-steps beside partial ones (130 x 128 x 100) */
  static const size_t shapes[][3] = {{7, 5, 3}, {65, 33, 17}, {3, 70, 97}, {70, 67, 45}, {5, 7, 0}, {130, 128, 100}};
  int pass = 0, fail = 0;
  for (int mi = 0; mi < AA_ACC_COUNT; mi++) {
    const aa_accum_info_t *m = &aa_accum_table[mi];
    /* the rows of gpu_row (lib/gemm/cuda.c) */
    if (!(mi == AA_ACC_FP32_SEQ || (m->sum == AA_SUM_BLOCK && m->block_k >= 4 && 32 % m->block_k == 0))) continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int t = 0; t < 4; t++)
        for (int kind : {(int)(s + t) % 3, 3}) {
          int ok = one_case(&rng, (aa_accum_t)mi, shapes[s], t & 1, t >> 1, (int)(s + t + kind) & 1, kind);
          ok ? pass++ : fail++;
        }
    printf("  %-16s emulated kernel against aa_gemm: %s\n", m->name, fail ? "DIFFERENT" : "same bits");
  }
  printf("%d passed, %d failed\n", pass, fail);
  return fail ? 1 : 0;
}
