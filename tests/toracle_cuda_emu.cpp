/* attnacc: the GPU oracle's k_dots (fast_cuda_kern.cu) run on CPU threads against the kernels' own per-pair path,
 * bit for bit: every visible pair's S and dP with their bounds, on a machine without a GPU. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

/* tests/cuda-emu.h: CUDA for the host compiler; a block of k_dots runs as 256 std::threads. */
#include "cuda-emu.h"

#define AA_ORCU_EMULATE 1
#include "fast_cuda_kern.cu"

#include "rng.h"

/* The per-pair path that k_dots replaces (score() and dprod() forming the dot products in the pair's own
   thread, as the kernels do when the pair arrays do not fit) was checked bit for bit against the CPU's rows kernel
   on an H200 (tests/toracle_cuda); here k_dots' arrays must give the same bits as that path for every visible
   pair, with rows whose spans make the products exact (the plain sum) and rows where they do not. */

/* A row of d values: 0 small integers (exact products and sums), 1 BF16-like normals, 2 zeros, 3 BF16-like
   significands over exponents -60..60, 4 full binary64 significands (products with a rounding error). */
static void draw_row(aa_pcg64_t *rng, double *x, size_t d, int kind) {
  for (size_t c = 0; c < d; c++) {
    uint64_t r = aa_pcg64_next(rng);
    if (kind == 2) {
      x[c] = 0;
    } else if (kind == 0) {
      x[c] = (double)((int)(r % 31) - 15);
    } else if (kind == 4) {
      x[c] = ((r >> 63) ? -1 : 1) * std::ldexp((double)(r >> 11 | UINT64_C(1) << 52), -52 - (int)(r % 3));
    } else {
      double m = (double)(128 + (r >> 8) % 128) / 128.0,
             e = kind == 1 ? (double)((int)(r >> 20) % 5 - 2) : (double)((int)((r >> 20) % 121) - 60);
      x[c] = ((r >> 40) & 1 ? -1 : 1) * ldexp(m, (int)e);
    }
  }
}

/* The span of a row (fast-common.h's definition, written again): max|x| / 2^l with l the lowest set bit's
   exponent over the row; 0 and 0 for a zero row. */
static void row_span(const double *x, size_t d, double *sp, int *lb) {
  double m = 0;
  int l = 1 << 30;
  for (size_t c = 0; c < d; c++) {
    if (x[c] == 0) continue;
    m = std::fmax(m, std::fabs(x[c]));
    int e;
    double f = std::frexp(std::fabs(x[c]), &e); /* |x| = f 2^e, f in [0.5, 1) */
    int low = e - 53;
    uint64_t mant = (uint64_t)std::ldexp(f, 53);
    while ((mant & 1) == 0)
      mant >>= 1, low++;
    l = std::min(l, low);
  }
  *sp = m == 0 ? 0 : std::ldexp(m, -l);
  *lb = m == 0 ? 0 : l;
}

static bool same(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

/* One problem: heads, kvh, n_q, n_k, d and the visible keys [rlo, rhi) of each query (dense 0, causal 1, a band
   2, with the first rows empty 3). Counts the pairs by exactness of S into nex[2]. */
static int one_problem(aa_pcg64_t *rng, size_t heads, size_t kvh, size_t nq, size_t nk, size_t d, int mask,
                       size_t nex[2]) {
  size_t nr = heads * nq, nc = kvh * nk;
  std::vector<double> q(nr * d), dO(nr * d), k(nc * d), v(nc * d), xq(nr), xdo(nr), xk(nc), xv(nc);
  std::vector<int> lq(nr), ldo(nr), lk(nc), lv(nc);
  for (size_t r = 0; r < nr; r++) {
    draw_row(rng, &q[r * d], d, (int)(aa_pcg64_next(rng) % 5));
    draw_row(rng, &dO[r * d], d, (int)(aa_pcg64_next(rng) % 5));
    row_span(&q[r * d], d, &xq[r], &lq[r]);
    row_span(&dO[r * d], d, &xdo[r], &ldo[r]);
  }
  for (size_t r = 0; r < nc; r++) {
    draw_row(rng, &k[r * d], d, (int)(aa_pcg64_next(rng) % 5));
    draw_row(rng, &v[r * d], d, (int)(aa_pcg64_next(rng) % 5));
    row_span(&k[r * d], d, &xk[r], &lk[r]);
    row_span(&v[r * d], d, &xv[r], &lv[r]);
  }
  std::vector<int64_t> rlo(nq), rhi(nq);
  for (size_t i = 0; i < nq; i++) {
    int64_t lo = 0, hi = (int64_t)nk, at = (int64_t)(i * nk / nq);
    if (mask == 1) hi = std::min<int64_t>(hi, at + 1);
    if (mask == 2) lo = std::max<int64_t>(0, at - 20), hi = std::min<int64_t>(hi, at + 10);
    if (mask == 3 && i < 5) hi = 0;
    rlo[i] = lo;
    rhi[i] = std::max(hi, lo);
  }
  aa_orcu_params_t par;
  std::memset(&par, 0, sizeof par);
  par.n_q = nq, par.n_k = nk, par.d = d, par.heads = heads, par.kvh = kvh, par.group = heads / kvh;
  par.sig = aa_or_dd(1 / std::sqrt((double)d), mask == 0 ? 0x1p-60 : 0);
  par.sig_rel = 0x1p-105;
  kdev_t D;
  std::memset(&D, 0, sizeof D);
  D.p = &par, D.q = q.data(), D.k = k.data(), D.v = v.data(), D.dO = dO.data();
  D.xq = xq.data(), D.xdo = xdo.data(), D.xk = xk.data(), D.xv = xv.data();
  D.lq = lq.data(), D.ldo = ldo.data(), D.lk = lk.data(), D.lv = lv.data();
  D.rlo = rlo.data(), D.rhi = rhi.data();
  const kdev_t D0 = D; /* no pair arrays: each pair formed on its own */
  std::vector<double> arr[6];
  double **pa[] = {&D.sh, &D.sl, &D.se, &D.dph, &D.dpl, &D.dpe};
  for (int u = 0; u < 6; u++) {
    arr[u].assign(nr * nk, NAN);
    *pa[u] = arr[u].data();
  }
  dim3 grid((unsigned)((nk + TK - 1) / TK), (unsigned)((nq + TR - 1) / TR), (unsigned)heads);
  emu_launch(grid, dim3(256), [=] { k_dots(D); });
  size_t bad = 0, pairs = 0;
  for (size_t h = 0; h < heads; h++)
    for (size_t i = 0; i < nq; i++)
      for (int64_t j = rlo[i]; j < rhi[i]; j++) {
        size_t r = h * nq + i, kk = h / par.group * nk + (size_t)j;
        double e0, e1, f0, f1;
        aa_or_dd_t S0 = score(D0, &par, r, kk, &e0), S1 = score(D, &par, r, kk, &e1);
        aa_or_dd_t P0 = dprod(D0, &par, r, kk, &f0), P1 = dprod(D, &par, r, kk, &f1);
        bool ok = same(S0.hi, S1.hi) && same(S0.lo, S1.lo) && same(e0, e1) && same(P0.hi, P1.hi) &&
                  same(P0.lo, P1.lo) && same(f0, f1);
        if (!ok && bad++ < 3)
          printf("FAIL: h %zu i %zu j %lld: S %a %a (%a) / %a %a (%a), dP %a %a (%a) / %a %a (%a)\n", h, i,
                 (long long)j, S0.hi, S0.lo, e0, S1.hi, S1.lo, e1, P0.hi, P0.lo, f0, P1.hi, P1.lo, f1);
        nex[e0 == 0]++;
        pairs++;
      }
  printf("  heads %zu kvh %zu n_q %zu n_k %zu d %zu mask %d: %zu visible pairs, %s\n", heads, kvh, nq, nk, d, mask,
         pairs, bad ? "DIFFERENT" : "same bits");
  return bad == 0;
}

int main() {
  const char *s = getenv("ATTNACC_SEED");
  uint64_t seed = s != NULL ? strtoull(s, NULL, 0) : UINT64_C(20261130);
  printf("toracle_cuda_emu: seed %llu (set ATTNACC_SEED to change; include it in bug reports)\n",
         (unsigned long long)seed);
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 31);
  /* tiles cut by n_q, n_k and d (chunks of 32 columns), GQA, tiles skipped by causal and band masks, empty rows */
  static const size_t shapes[][6] = {{2, 1, 45, 70, 40, 0}, {1, 1, 77, 77, 128, 1}, {3, 3, 64, 100, 17, 2},
                                     {2, 2, 33, 31, 64, 3}, {4, 2, 20, 50, 96, 1},  {1, 1, 1, 1, 1, 0},
                                     {1, 1, 40, 40, 256, 0}};
  int pass = 0, fail = 0;
  size_t nex[2] = {0, 0};
  for (const auto &sh : shapes)
    one_problem(&rng, sh[0], sh[1], sh[2], sh[3], sh[4], (int)sh[5], nex) ? pass++ : fail++;
  /* both kinds of pair occurred, or the exact branch went untested */
  printf("  pairs with exact S: %zu, with a rounded S: %zu\n", nex[1], nex[0]);
  (nex[0] > 0 && nex[1] > 0) ? pass++ : fail++;
  printf("%d passed, %d failed\n", pass, fail);
  return fail ? 1 : 0;
}
