/* attnacc: CUDA kernels of the oracle's fast path: the row-by-row kernel of fast_rows.c, element for element and in
 * the same order, so that every value is bit-identical to the CPU's (forward Z, forward O and D, dQ rows, dK/dV
 * columns, each element settled on the GPU). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#ifndef AA_ORCU_EMULATE /* tests/toracle_cuda_emu.cpp runs the device code below on CPU threads */
#include <cuda_runtime.h>
#endif

#include "oracle-cuda.h"

/* Work split, as fast_rows.c: one block per query row (forward, dQ) or key column (dK, dV). A block takes the keys
   (queries) in chunks of NT: each thread forms one pair (S, P, dS: two dot products in the CPU's order), then each
   thread accumulates its columns c over the chunk's pairs in order, which is the CPU's acc_block with one
   element per thread instead of one per vector lane. Sums across pairs (Z, D) stay sequential in one thread. */
#define NT AA_ORCU_THREADS
#define CPT (AA_ORCU_MAXD / NT)
#define ZB 64 /* terms per block of the normaliser sum Z, as fast_rows.c */
#define U2 AA_OR_U2

struct kdev_t {
  const aa_orcu_params_t *p;
  const double *q, *k, *v, *dO;
  const double *xq, *xdo, *xk, *xv;
  const int *lq, *ldo, *lk, *lv;
  const int64_t *rlo, *rhi, *clo, *chi;
  double *mh, *ml, *zs, *zc, *epsz, *lse_h, *lse_l, *e_lse, *iz_h, *iz_l, *d_h, *d_l, *e_d;
  /* Every pair's S (hi, lo, bound) and dP (hi, lo, bound), row r = h n_q + i by key j: index r n_k + j, as
     k_dots wrote them; NULL when they did not fit in the GPU's memory, then each kernel forms its own. */
  double *sh, *sl, *se, *dph, *dpl, *dpe;
};

struct dout_t {
  double *val, *f32, *b16, *rel;
  uint8_t *todo;
};

struct aa_orcu {
  kdev_t D;
  aa_orcu_params_t hp;
  size_t nq_all, nk_all; /* heads n_q, kvh n_k */
  void *allocs[64];
  int nalloc;
  int dev; /* the device of every call on this handle (aa_gpu_index at aa_orcu_begin) */
};

/* The parameters (the exp table above all, read at random indices) in shared memory. */
__device__ static void load_params(aa_orcu_params_t *sp, const aa_orcu_params_t *gp) {
  const int *src = (const int *)gp;
  int *dst = (int *)sp;
  for (size_t u = threadIdx.x; u < sizeof(aa_orcu_params_t) / sizeof(int); u += blockDim.x)
    dst[u] = src[u];
  __syncthreads();
}

/* aa_oracle_dot_plain: used only when every product and partial sum is exact, so any order gives its bits. */
__device__ static double dot_plain(const double *a, const double *b, size_t n) {
  double s = 0;
  for (size_t c = 0; c < n; c++)
    s += a[c] * b[c];
  return s;
}

__device__ static aa_or_dd_t dot_dd(const double *a, const double *b, size_t n, int exact, double *bound) {
  if (exact) {
    *bound = 0;
    return aa_or_dd(dot_plain(a, b, n), 0);
  }
  return aa_or_dot_comp(a, b, n, bound);
}

/* S from a finished dot product tt with bound et, as block_s */
__device__ static aa_or_dd_t score_of(const aa_orcu_params_t *p, aa_or_dd_t tt, double et, double *eS) {
  aa_or_dd_t S = tt.lo == 0 ? aa_or_dd_mul_d(p->sig, tt.hi) : aa_or_dd_mul(p->sig, tt);
  *eS = 1.01 * (p->sig.hi * et + (p->sig_rel + 5 * U2) * fabs(S.hi));
  return S;
}

/* fast_rows.c block_s (no score modifiers on the GPU) */
__device__ static aa_or_dd_t score(const kdev_t &D, const aa_orcu_params_t *p, size_t r, size_t kk, double *eS) {
  if (D.sh != NULL) {
    size_t ix = r * p->n_k + kk % p->n_k;
    *eS = D.se[ix];
    return aa_or_dd(D.sh[ix], D.sl[ix]);
  }
  size_t d = p->d;
  double et;
  aa_or_dd_t tt =
      dot_dd(D.q + r * d, D.k + kk * d, d, aa_or_exact_pair(D.xq[r], D.lq[r], D.xk[kk], D.lk[kk], d), &et);
  return score_of(p, tt, et, eS);
}

/* dP = dO_r . v_kk, as pair() forms it (the fast_two_sum of the dot product), with its bound */
__device__ static aa_or_dd_t dprod(const kdev_t &D, const aa_orcu_params_t *p, size_t r, size_t kk, double *edp) {
  if (D.dph != NULL) {
    size_t ix = r * p->n_k + kk % p->n_k;
    *edp = D.dpe[ix];
    return aa_or_dd(D.dph[ix], D.dpl[ix]);
  }
  size_t d = p->d;
  aa_or_dd_t dP =
      dot_dd(D.dO + r * d, D.v + kk * d, d, aa_or_exact_pair(D.xdo[r], D.ldo[r], D.xv[kk], D.lv[kk], d), edp);
  return aa_or_fast_two_sum(dP.hi, dP.lo);
}

struct pair_t {
  double ph, pl, eP, ch, cl, ec;
};

/* fast_rows.c block_pairs with want_ds (no dropout) */
__device__ static void pair(const kdev_t &D, const aa_orcu_params_t *p, size_t r, size_t kk, pair_t *o) {
  double eS;
  aa_or_dd_t S = score(D, p, r, kk, &eS), L = aa_or_dd(D.lse_h[r], D.lse_l[r]);
  aa_or_dd_t x = aa_or_dd_add(S, aa_or_dd_neg(L));
  double ex = eS + D.e_lse[r] + 4 * U2 * (fabs(S.hi) + fabs(L.hi));
  aa_or_dd_exp1(&o->ph, &o->pl, x.hi, x.lo, &p->tab);
  double epsP = aa_or_exp_eps(x.hi, ex);
  o->eP = 1.01 * epsP * o->ph;
  double edp;
  aa_or_dd_t dP = dprod(D, p, r, kk, &edp);
  aa_or_dd_t Dd = aa_or_dd(D.d_h[r], D.d_l[r]);
  aa_or_dd_t df = aa_or_dd_add(dP, aa_or_dd_neg(Dd));
  double ediff = edp + D.e_d[r] + 4 * U2 * (fabs(dP.hi) + fabs(Dd.hi));
  aa_or_dd_t P = aa_or_dd(o->ph, o->pl);
  aa_or_dd_t dS = aa_or_dd_mul(P, df);
  o->ch = dS.hi;
  o->cl = dS.lo;
  o->ec = 1.01 * (P.hi * ediff + epsP * P.hi * (fabs(df.hi) + ediff)) + 5 * U2 * fabs(dS.hi);
}

/* acc_block's element step */
__device__ static inline void acc(double *s, double *cc, double *a, double *b, double xh, double xl, double ex,
                                  double yy) {
  double p = xh * yy, e = fma(xh, yy, -p), l = xl * yy;
  double sv = *s, ss = sv + p, bv = ss - sv, tt = (sv - (ss - bv)) + (p - bv);
  *s = ss;
  *cc += (tt + e) + l;
  *a += fabs(p);
  *b += ex * fabs(yy);
}

/* finish of fast-common.h, the settle on the GPU */
__device__ static void finish(const aa_orcu_params_t *p, const dout_t &o, size_t idx, double s, double cc, double a,
                              double b, size_t n, aa_or_dd_t f, double frel, aa_or_dd_t *v, double *e) {
  int zero = aa_or_finish_core(v, e, s, cc, a, b, n, f, frel, p->floor_unit);
  double val = 0, f32 = 0, b16 = 0, rel = 0;
  int ok = zero ? 1 : aa_or_settle_dd_core(&val, &f32, &b16, &rel, v->hi, v->lo, *e, p->target);
  o.val[idx] = val;
  o.f32[idx] = f32;
  o.b16[idx] = b16;
  o.rel[idx] = rel;
  o.todo[idx] = (uint8_t)!ok;
}

/* The CPU's row_max_dd keeps the first key of the largest (hi, lo): so does this order with the key as tie break. */
__device__ static inline int better(double h1, double l1, long long j1, double h2, double l2, long long j2) {
  return h1 > h2 || (h1 == h2 && (l1 > l2 || (l1 == l2 && j1 < j2)));
}

/* Every pair's two dot products once, for all the kernels below: S = sig (q_r . k_j) and dP = dO_r . v_j, each
   aa_or_dot_comp's chain over c in order (so the same bits as score() and pair() forming them one by one; where
   the spans make the pair exact, dot_plain's sum is the chain's s and its low word 0, so only the bound changes).
   Tiles of TR rows by TK keys, the columns in chunks of CH through shared memory; a thread holds 2 rows by 2 keys.
   Cost per pair and column: 4 shared loads for 4 chained steps of 11 FP64 operations, where score() per thread
   made one uncached, uncoalesced load per step (a warp's 32 keys in 32 cache lines). */
#define TR 32
#define TK 32
#define CH 32
struct dstate_t {
  double s, cc, ab;
};

__device__ static inline void dstep(dstate_t *z, double x, double y) {
  double p = x * y, e = fma(x, y, -p);
  double ss = z->s + p, bv = ss - z->s, t = (z->s - (ss - bv)) + (p - bv);
  z->s = ss;
  z->cc += t + e;
  z->ab += fabs(p);
}

/* aa_or_dot_comp's ending; dot_plain's (s, 0) and bound 0 where exact */
__device__ static inline aa_or_dd_t dend(const dstate_t &z, size_t n, int exact, double *bound) {
  if (exact) {
    *bound = 0;
    return aa_or_dd(z.s, 0);
  }
  *bound = aa_or_kappa(n) * z.ab * aa_or_infl(n) + (double)(n + 1) * 0x1p-1070;
  return aa_or_two_sum(z.s, z.cc);
}

__global__ void __launch_bounds__(256) k_dots(kdev_t D) {
  __shared__ double qs[TR][CH + 1], os[TR][CH + 1], ks[TK][CH + 1], vs[TK][CH + 1];
  const aa_orcu_params_t *p = D.p;
  size_t nq = p->n_q, nk = p->n_k, d = p->d, h = blockIdx.z, g = h / p->group;
  size_t i0 = (size_t)blockIdx.y * TR, j0 = (size_t)blockIdx.x * TK;
  size_t ilast = i0 + TR <= nq ? i0 + TR - 1 : nq - 1;
  if (D.rhi[ilast] <= (long long)j0 || D.rlo[i0] >= (long long)(j0 + TK)) return; /* no visible pair in the tile */
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  dstate_t zs[2][2] = {}, zp[2][2] = {};
  const double *Q = D.q + (h * nq) * d, *O = D.dO + (h * nq) * d, *K = D.k + (g * nk) * d, *V = D.v + (g * nk) * d;
  for (size_t c0 = 0; c0 < d; c0 += CH) {
    int cn = d - c0 < CH ? (int)(d - c0) : CH;
    for (int e = threadIdx.x; e < TR * CH; e += 256) {
      int a = e / CH, c = e % CH;
      int okc = c < cn;
      qs[a][c] = okc && i0 + a < nq ? Q[(i0 + a) * d + c0 + c] : 0;
      os[a][c] = okc && i0 + a < nq ? O[(i0 + a) * d + c0 + c] : 0;
      ks[a][c] = okc && j0 + a < nk ? K[(j0 + a) * d + c0 + c] : 0;
      vs[a][c] = okc && j0 + a < nk ? V[(j0 + a) * d + c0 + c] : 0;
    }
    __syncthreads();
    for (int c = 0; c < cn; c++) {
      double qa[2] = {qs[ty][c], qs[ty + 16][c]}, oa[2] = {os[ty][c], os[ty + 16][c]};
      double ka[2] = {ks[tx][c], ks[tx + 16][c]}, va[2] = {vs[tx][c], vs[tx + 16][c]};
      for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
          dstep(&zs[a][b], qa[a], ka[b]);
          dstep(&zp[a][b], oa[a], va[b]);
        }
    }
    __syncthreads();
  }
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) {
      size_t i = i0 + ty + 16 * a, j = j0 + tx + 16 * b;
      if (i >= nq || j >= nk) continue;
      size_t r = h * nq + i, kk = g * nk + j, ix = r * nk + j;
      double et, eS;
      aa_or_dd_t tt = dend(zs[a][b], d, aa_or_exact_pair(D.xq[r], D.lq[r], D.xk[kk], D.lk[kk], d), &et);
      aa_or_dd_t S = score_of(p, tt, et, &eS);
      D.sh[ix] = S.hi;
      D.sl[ix] = S.lo;
      D.se[ix] = eS;
      aa_or_dd_t dP = dend(zp[a][b], d, aa_or_exact_pair(D.xdo[r], D.ldo[r], D.xv[kk], D.lv[kk], d), &et);
      dP = aa_or_fast_two_sum(dP.hi, dP.lo);
      D.dph[ix] = dP.hi;
      D.dpl[ix] = dP.lo;
      D.dpe[ix] = et;
    }
}

/* fwd_row passes 1 and 2: the shift M and Z, in blocks of ZB terms as the CPU. */
__global__ void __launch_bounds__(NT) k_fwd_z(kdev_t D) {
  __shared__ aa_orcu_params_t P;
  __shared__ double smh[NT], sml[NT], eh[NT], el[NT], bs2[NT / ZB], bc2[NT / ZB];
  __shared__ long long sj[NT];
  load_params(&P, D.p);
  const aa_orcu_params_t *p = &P;
  size_t r = blockIdx.x, h = r / p->n_q, i = r % p->n_q, g = h / p->group, tid = threadIdx.x;
  long long lo = D.rlo[i], hi = D.rhi[i];
  if (hi <= lo) {
    if (tid == 0) {
      D.mh[r] = -INFINITY;
      D.ml[r] = D.zs[r] = D.zc[r] = D.epsz[r] = 0;
    }
    return;
  }
  size_t m = (size_t)(hi - lo);
  double Mh = -INFINITY, Ml = 0, eS;
  long long Mj = LLONG_MAX;
  for (long long j = lo + (long long)tid; j < hi; j += NT) {
    aa_or_dd_t S = score(D, p, r, g * p->n_k + (size_t)j, &eS);
    if (better(S.hi, S.lo, j, Mh, Ml, Mj)) {
      Mh = S.hi;
      Ml = S.lo;
      Mj = j;
    }
  }
  smh[tid] = Mh;
  sml[tid] = Ml;
  sj[tid] = Mj;
  __syncthreads();
  for (unsigned w = NT / 2; w > 0; w /= 2) {
    if (tid < w && better(smh[tid + w], sml[tid + w], sj[tid + w], smh[tid], sml[tid], sj[tid])) {
      smh[tid] = smh[tid + w];
      sml[tid] = sml[tid + w];
      sj[tid] = sj[tid + w];
    }
    __syncthreads();
  }
  aa_or_dd_t M = aa_or_dd(smh[0], sml[0]), nM = aa_or_dd_neg(M);
  double mx = M.hi, epsE = 0;
  aa_or_dd_t Zd = aa_or_two_sum(0, 0);
  size_t nblk = 0;
  __syncthreads();
  for (long long j0 = lo; j0 < hi; j0 += NT) {
    long long j = j0 + (long long)tid;
    if (j < hi) {
      aa_or_dd_t S = score(D, p, r, g * p->n_k + (size_t)j, &eS);
      aa_or_dd_t x = aa_or_dd_add(S, nM);
      aa_or_dd_exp1(&eh[tid], &el[tid], x.hi, x.lo, &p->tab);
      double ex = eS + 4 * U2 * (fabs(S.hi) + fabs(mx));
      epsE = fmax(epsE, aa_or_exp_eps(x.hi, ex));
    }
    __syncthreads();
    if (tid < NT / ZB && j0 + (long long)(tid * ZB) < hi) {
      double bs = 0, bc = 0;
      for (size_t u = tid * ZB; u < (tid + 1) * ZB && j0 + (long long)u < hi; u++) {
        aa_or_dd_t t2 = aa_or_two_sum(bs, eh[u]);
        bs = t2.hi;
        bc += t2.lo + el[u];
      }
      bs2[tid] = bs;
      bc2[tid] = bc;
    }
    __syncthreads();
    if (tid == 0)
      for (size_t u = 0; u < NT / ZB && j0 + (long long)(u * ZB) < hi; u++, nblk++)
        Zd = aa_or_dd_add(Zd, aa_or_two_sum(bs2[u], bc2[u]));
    __syncthreads();
  }
  smh[tid] = epsE;
  __syncthreads();
  for (unsigned w = NT / 2; w > 0; w /= 2) {
    if (tid < w) smh[tid] = fmax(smh[tid], smh[tid + w]);
    __syncthreads();
  }
  if (tid == 0) {
    D.mh[r] = M.hi;
    D.ml[r] = M.lo;
    D.zs[r] = Zd.hi;
    D.zc[r] = Zd.lo;
    D.epsz[r] = 1.01 * (smh[0] + aa_or_kappa(ZB) + 5 * U2 * (double)(nblk + 1)) + (double)m * 0x1p-1018;
  }
}

/* fwd_row pass 3 and D: P = E / Z, O = sum P v, D = O . dO */
__global__ void __launch_bounds__(NT) k_fwd_o(kdev_t D, dout_t O) {
  __shared__ aa_orcu_params_t P;
  __shared__ double ch[NT], cl[NT], ec[NT], soh[AA_ORCU_MAXD], sol[AA_ORCU_MAXD], soe[AA_ORCU_MAXD];
  load_params(&P, D.p);
  const aa_orcu_params_t *p = &P;
  size_t r = blockIdx.x, h = r / p->n_q, i = r % p->n_q, g = h / p->group, tid = threadIdx.x, d = p->d;
  long long lo = D.rlo[i], hi = D.rhi[i];
  size_t m = hi > lo ? (size_t)(hi - lo) : 0;
  double s[CPT], cc[CPT], a[CPT], b[CPT];
  for (int u = 0; u < CPT; u++)
    s[u] = cc[u] = a[u] = b[u] = 0;
  const double *V = D.v + g * p->n_k * d;
  if (m > 0) {
    aa_or_dd_t M = aa_or_dd(D.mh[r], D.ml[r]), nM = aa_or_dd_neg(M), iz = aa_or_dd(D.iz_h[r], D.iz_l[r]);
    double mx = M.hi, pz = 1.01 * (D.epsz[r] + 0x1p-105);
    for (long long j0 = lo; j0 < hi; j0 += NT) {
      long long j = j0 + (long long)tid;
      if (j < hi) {
        double eS, Eh, El;
        aa_or_dd_t S = score(D, p, r, g * p->n_k + (size_t)j, &eS);
        aa_or_dd_t x = aa_or_dd_add(S, nM);
        aa_or_dd_exp1(&Eh, &El, x.hi, x.lo, &p->tab);
        double ree = aa_or_exp_eps(x.hi, eS + 4 * U2 * (fabs(S.hi) + fabs(mx)));
        aa_or_dd_t Pv = aa_or_dd_mul(aa_or_dd(Eh, El), iz);
        ch[tid] = Pv.hi;
        cl[tid] = Pv.lo;
        ec[tid] = 1.01 * (ree + pz + 5 * U2) * Pv.hi;
      }
      __syncthreads();
      long long nb = hi - j0 < NT ? hi - j0 : NT;
      for (int u = 0; u < CPT; u++) {
        size_t c = tid + (size_t)u * NT;
        if (c < d)
          for (long long t = 0; t < nb; t++)
            acc(&s[u], &cc[u], &a[u], &b[u], ch[t], cl[t], ec[t], V[(size_t)(j0 + t) * d + c]);
      }
      __syncthreads();
    }
  }
  for (int u = 0; u < CPT; u++) {
    size_t c = tid + (size_t)u * NT;
    if (c < d) {
      aa_or_dd_t v;
      double e;
      finish(p, O, r * d + c, s[u], cc[u], a[u], b[u], m, aa_or_dd(1, 0), 0, &v, &e);
      soh[c] = v.hi;
      sol[c] = v.lo;
      soe[c] = e;
    }
  }
  __syncthreads();
  if (tid == 0) {
    if (m == 0) {
      D.d_h[r] = D.d_l[r] = D.e_d[r] = 0;
      return;
    }
    const double *doi = D.dO + r * d;
    double ds = 0, dc = 0, da = 0, db = 0;
    for (size_t c = 0; c < d; c++) {
      double oh = soh[c], ol = sol[c], oe = soe[c];
      double y = doi[c], pp = oh * y, e = fma(oh, y, -pp), l = ol * y;
      aa_or_dd_t t2 = aa_or_two_sum(ds, pp);
      ds = t2.hi;
      dc += (t2.lo + e) + l;
      da += fabs(pp);
      db += oe * fabs(y);
    }
    aa_or_dd_t Dd = aa_or_two_sum(ds, dc);
    D.d_h[r] = Dd.hi;
    D.d_l[r] = Dd.lo;
    D.e_d[r] = db * aa_or_infl(d) + aa_or_kappa(d) * da + (double)(d + 1) * p->floor_unit;
  }
}

/* dq_row */
__global__ void __launch_bounds__(NT) k_dq(kdev_t D, dout_t O) {
  __shared__ aa_orcu_params_t P;
  __shared__ double ch[NT], cl[NT], ec[NT];
  load_params(&P, D.p);
  const aa_orcu_params_t *p = &P;
  size_t r = blockIdx.x, h = r / p->n_q, i = r % p->n_q, g = h / p->group, tid = threadIdx.x, d = p->d;
  long long lo = D.rlo[i], hi = D.rhi[i];
  size_t m = hi > lo ? (size_t)(hi - lo) : 0;
  double s[CPT], cc[CPT], a[CPT], b[CPT];
  for (int u = 0; u < CPT; u++)
    s[u] = cc[u] = a[u] = b[u] = 0;
  const double *K = D.k + g * p->n_k * d;
  for (long long j0 = lo; j0 < hi; j0 += NT) {
    long long j = j0 + (long long)tid;
    if (j < hi) {
      pair_t w;
      pair(D, p, r, g * p->n_k + (size_t)j, &w);
      ch[tid] = w.ch;
      cl[tid] = w.cl;
      ec[tid] = w.ec;
    }
    __syncthreads();
    long long nb = hi - j0 < NT ? hi - j0 : NT;
    for (int u = 0; u < CPT; u++) {
      size_t c = tid + (size_t)u * NT;
      if (c < d)
        for (long long t = 0; t < nb; t++)
          acc(&s[u], &cc[u], &a[u], &b[u], ch[t], cl[t], ec[t], K[(size_t)(j0 + t) * d + c]);
    }
    __syncthreads();
  }
  for (int u = 0; u < CPT; u++) {
    size_t c = tid + (size_t)u * NT;
    if (c < d) {
      aa_or_dd_t v;
      double e;
      finish(p, O, r * d + c, s[u], cc[u], a[u], b[u], m, p->sig, p->sig_rel, &v, &e);
    }
  }
}

/* kv_col: the visible queries of key j are an interval [clo, chi) per head of the group, taken head by head */
__global__ void __launch_bounds__(NT) k_kv(kdev_t D, dout_t OK, dout_t OV) {
  __shared__ aa_orcu_params_t P;
  __shared__ double ch[NT], cl[NT], ec[NT], ph[NT], pl[NT], eP[NT];
  __shared__ size_t rows[NT];
  load_params(&P, D.p);
  const aa_orcu_params_t *p = &P;
  size_t kk = blockIdx.x, g = kk / p->n_k, j = kk % p->n_k, tid = threadIdx.x, d = p->d;
  long long ilo = D.clo[j], ihi = D.chi[j];
  size_t len = ihi > ilo ? (size_t)(ihi - ilo) : 0, total = p->group * len;
  double s[CPT], cc[CPT], a[CPT], b[CPT], s2[CPT], cc2[CPT], a2[CPT], b2[CPT];
  for (int u = 0; u < CPT; u++)
    s[u] = cc[u] = a[u] = b[u] = s2[u] = cc2[u] = a2[u] = b2[u] = 0;
  for (size_t t0 = 0; t0 < total; t0 += NT) {
    size_t t = t0 + tid;
    if (t < total) {
      size_t hh = t / len, i = (size_t)ilo + t % len, r = (g * p->group + hh) * p->n_q + i;
      pair_t w;
      pair(D, p, r, kk, &w);
      ch[tid] = w.ch;
      cl[tid] = w.cl;
      ec[tid] = w.ec;
      ph[tid] = w.ph;
      pl[tid] = w.pl;
      eP[tid] = w.eP;
      rows[tid] = r;
    }
    __syncthreads();
    size_t nb = total - t0 < NT ? total - t0 : NT;
    for (int u = 0; u < CPT; u++) {
      size_t c = tid + (size_t)u * NT;
      if (c < d)
        for (size_t t1 = 0; t1 < nb; t1++) {
          acc(&s[u], &cc[u], &a[u], &b[u], ch[t1], cl[t1], ec[t1], D.q[rows[t1] * d + c]);
          acc(&s2[u], &cc2[u], &a2[u], &b2[u], ph[t1], pl[t1], eP[t1], D.dO[rows[t1] * d + c]);
        }
    }
    __syncthreads();
  }
  for (int u = 0; u < CPT; u++) {
    size_t c = tid + (size_t)u * NT;
    if (c < d) {
      aa_or_dd_t v;
      double e;
      finish(p, OK, kk * d + c, s[u], cc[u], a[u], b[u], total, p->sig, p->sig_rel, &v, &e);
      finish(p, OV, kk * d + c, s2[u], cc2[u], a2[u], b2[u], total, aa_or_dd(1, 0), 0, &v, &e);
    }
  }
}

/* ---- host side ---- */
#ifndef AA_ORCU_EMULATE

static int fail(cudaError_t ce, const char *what, char *msg, size_t msglen) {
  snprintf(msg, msglen, "CUDA: %s: %s", what, cudaGetErrorString(ce));
  return -1;
}
#define CK(call, what)                                                                                               \
  do {                                                                                                               \
    cudaError_t ce_ = (call);                                                                                        \
    if (ce_ != cudaSuccess) return fail(ce_, what, msg, msglen);                                                     \
  } while (0)

extern "C" int aa_orcu_devices(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

static void *dalloc(aa_orcu_t *H, size_t bytes) {
  void *ptr = NULL;
  if (H->nalloc >= 64 || cudaMalloc(&ptr, bytes ? bytes : 8) != cudaSuccess) return NULL;
  H->allocs[H->nalloc++] = ptr;
  return ptr;
}

static void *dput(aa_orcu_t *H, const void *src, size_t bytes) {
  void *ptr = dalloc(H, bytes);
  if (ptr != NULL && bytes > 0 && cudaMemcpy(ptr, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) return NULL;
  return ptr;
}

static void pairs_alloc(aa_orcu_t *H, size_t npairs);

/* Seconds of the phases (k_dots and each kernel, with its transfers) on stderr when AA_ORACLE_CUDA_TIMES is set. */
static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static void tmark(aa_orcu_t *H, const char *what, double t0) {
  if (getenv("AA_ORACLE_CUDA_TIMES") != NULL)
    fprintf(stderr, "oracle cuda: %s %.3f s%s\n", what, wall() - t0, H->D.sh != NULL ? "" : " (no pair arrays)");
}

extern "C" void aa_orcu_end(aa_orcu_t *H) {
  if (H == NULL) return;
  cudaSetDevice(H->dev);
  for (int u = 0; u < H->nalloc; u++)
    cudaFree(H->allocs[u]);
  delete H;
}

extern "C" int aa_orcu_begin(aa_orcu_t **out, const aa_orcu_params_t *p, const double *q, const double *k,
                             const double *v, const double *dO, const aa_orcu_spans_t *sp, const int64_t *rlo,
                             const int64_t *rhi, const int64_t *clo, const int64_t *chi, char *msg, size_t msglen) {
  aa_orcu_t *H = new aa_orcu_t();
  *out = H;
  H->hp = *p;
  size_t nr = p->heads * p->n_q, nc = p->kvh * p->n_k, d = p->d;
  H->nq_all = nr;
  H->nk_all = nc;
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev), "count the devices");
  H->dev = aa_gpu_index(ndev);
  CK(cudaSetDevice(H->dev), "select the device");
  kdev_t &D = H->D;
  int ok = 1;
#define PUT(dst, src, bytes)                                                                                         \
  do {                                                                                                               \
    (dst) = (decltype(dst))dput(H, (src), (bytes));                                                                  \
    if ((dst) == NULL) ok = 0;                                                                                       \
  } while (0)
  PUT(D.p, p, sizeof *p);
  PUT(D.q, q, nr * d * sizeof(double));
  PUT(D.dO, dO, nr * d * sizeof(double));
  PUT(D.k, k, nc * d * sizeof(double));
  PUT(D.v, v, nc * d * sizeof(double));
  PUT(D.xq, sp->xq, nr * sizeof(double));
  PUT(D.xdo, sp->xdo, nr * sizeof(double));
  PUT(D.xk, sp->xk, nc * sizeof(double));
  PUT(D.xv, sp->xv, nc * sizeof(double));
  PUT(D.lq, sp->lq, nr * sizeof(int));
  PUT(D.ldo, sp->ldo, nr * sizeof(int));
  PUT(D.lk, sp->lk, nc * sizeof(int));
  PUT(D.lv, sp->lv, nc * sizeof(int));
  PUT(D.rlo, rlo, p->n_q * sizeof(int64_t));
  PUT(D.rhi, rhi, p->n_q * sizeof(int64_t));
  PUT(D.clo, clo, p->n_k * sizeof(int64_t));
  PUT(D.chi, chi, p->n_k * sizeof(int64_t));
  double **rowv[] = {&D.mh,    &D.ml,   &D.zs,   &D.zc,  &D.epsz, &D.lse_h, &D.lse_l,
                     &D.e_lse, &D.iz_h, &D.iz_l, &D.d_h, &D.d_l,  &D.e_d};
  for (size_t u = 0; u < sizeof rowv / sizeof rowv[0]; u++)
    if ((*rowv[u] = (double *)dalloc(H, nr * sizeof(double))) == NULL) ok = 0;
  if (!ok) return fail(cudaGetLastError(), "cannot allocate or upload the inputs", msg, msglen);
  pairs_alloc(H, nr * p->n_k);
  return 0;
}

/* The pair arrays of k_dots (6 doubles a pair) where they fit beside the outputs (4 tensors of 4 doubles and a
   byte per element) with 1 GiB to spare; else none, and the kernels form S and dP themselves. */
static void pairs_alloc(aa_orcu_t *H, size_t npairs) {
  size_t fr = 0, tot = 0, outs = (H->nq_all + 3 * H->nk_all) * H->hp.d * 33, need = 6 * npairs * sizeof(double);
  if (getenv("AA_ORACLE_CUDA_NOPAIRS") != NULL || cudaMemGetInfo(&fr, &tot) != cudaSuccess ||
      need + outs + ((size_t)1 << 30) > fr) {
    cudaGetLastError();
    return;
  }
  double **pa[] = {&H->D.sh, &H->D.sl, &H->D.se, &H->D.dph, &H->D.dpl, &H->D.dpe};
  for (int u = 0; u < 6; u++)
    if ((*pa[u] = (double *)dalloc(H, npairs * sizeof(double))) == NULL) {
      cudaGetLastError();
      for (int w = 0; w < 6; w++)
        *pa[w] = NULL; /* freed with the rest at aa_orcu_end */
      return;
    }
}

extern "C" int aa_orcu_fwd_z(aa_orcu_t *H, double *mh, double *ml, double *zs, double *zc, double *epsz, char *msg,
                             size_t msglen) {
  CK(cudaSetDevice(H->dev), "select the device");
  size_t nr = H->nq_all, by = nr * sizeof(double);
  double t0 = wall();
  if (H->D.sh != NULL && H->hp.n_q > 0 && H->hp.n_k > 0) { /* (an empty grid is a launch error) */
    dim3 grid((unsigned)((H->hp.n_k + TK - 1) / TK), (unsigned)((H->hp.n_q + TR - 1) / TR), (unsigned)H->hp.heads);
    k_dots<<<grid, 256>>>(H->D);
    CK(cudaGetLastError(), "launch of the dot products kernel");
    CK(cudaDeviceSynchronize(), "dot products kernel");
    tmark(H, "k_dots", t0);
    t0 = wall();
  }
  k_fwd_z<<<(unsigned)nr, NT>>>(H->D);
  CK(cudaGetLastError(), "launch of the forward Z kernel");
  CK(cudaDeviceSynchronize(), "forward Z kernel");
  CK(cudaMemcpy(mh, H->D.mh, by, cudaMemcpyDeviceToHost), "download");
  CK(cudaMemcpy(ml, H->D.ml, by, cudaMemcpyDeviceToHost), "download");
  CK(cudaMemcpy(zs, H->D.zs, by, cudaMemcpyDeviceToHost), "download");
  CK(cudaMemcpy(zc, H->D.zc, by, cudaMemcpyDeviceToHost), "download");
  CK(cudaMemcpy(epsz, H->D.epsz, by, cudaMemcpyDeviceToHost), "download");
  tmark(H, "k_fwd_z", t0);
  return 0;
}

/* Device buffers of one output tensor of n elements, and their download into the host arrays. */
static int out_alloc(aa_orcu_t *H, dout_t *o, size_t n) {
  o->val = (double *)dalloc(H, n * sizeof(double));
  o->f32 = (double *)dalloc(H, n * sizeof(double));
  o->b16 = (double *)dalloc(H, n * sizeof(double));
  o->rel = (double *)dalloc(H, n * sizeof(double));
  o->todo = (uint8_t *)dalloc(H, n);
  return o->val && o->f32 && o->b16 && o->rel && o->todo;
}

static cudaError_t out_get(const aa_orcu_out_t *h, const dout_t *o, size_t n) {
  cudaError_t ce;
  if ((ce = cudaMemcpy(h->val, o->val, n * sizeof(double), cudaMemcpyDeviceToHost)) != cudaSuccess) return ce;
  if ((ce = cudaMemcpy(h->f32, o->f32, n * sizeof(double), cudaMemcpyDeviceToHost)) != cudaSuccess) return ce;
  if ((ce = cudaMemcpy(h->b16, o->b16, n * sizeof(double), cudaMemcpyDeviceToHost)) != cudaSuccess) return ce;
  if ((ce = cudaMemcpy(h->rel, o->rel, n * sizeof(double), cudaMemcpyDeviceToHost)) != cudaSuccess) return ce;
  return cudaMemcpy(h->todo, o->todo, n, cudaMemcpyDeviceToHost);
}

extern "C" int aa_orcu_fwd_o(aa_orcu_t *H, const double *lse_h, const double *lse_l, const double *e_lse,
                             const double *iz_h, const double *iz_l, double *d_h, double *d_l, double *e_d,
                             const aa_orcu_out_t *o, char *msg, size_t msglen) {
  CK(cudaSetDevice(H->dev), "select the device");
  size_t nr = H->nq_all, by = nr * sizeof(double), n = nr * H->hp.d;
  double t0 = wall();
  CK(cudaMemcpy(H->D.lse_h, lse_h, by, cudaMemcpyHostToDevice), "upload");
  CK(cudaMemcpy(H->D.lse_l, lse_l, by, cudaMemcpyHostToDevice), "upload");
  CK(cudaMemcpy(H->D.e_lse, e_lse, by, cudaMemcpyHostToDevice), "upload");
  CK(cudaMemcpy(H->D.iz_h, iz_h, by, cudaMemcpyHostToDevice), "upload");
  CK(cudaMemcpy(H->D.iz_l, iz_l, by, cudaMemcpyHostToDevice), "upload");
  dout_t O;
  if (!out_alloc(H, &O, n)) return fail(cudaErrorMemoryAllocation, "outputs of the forward", msg, msglen);
  k_fwd_o<<<(unsigned)nr, NT>>>(H->D, O);
  CK(cudaGetLastError(), "launch of the forward O kernel");
  CK(cudaDeviceSynchronize(), "forward O kernel");
  CK(cudaMemcpy(d_h, H->D.d_h, by, cudaMemcpyDeviceToHost), "download");
  CK(cudaMemcpy(d_l, H->D.d_l, by, cudaMemcpyDeviceToHost), "download");
  CK(cudaMemcpy(e_d, H->D.e_d, by, cudaMemcpyDeviceToHost), "download");
  CK(out_get(o, &O, n), "download of O");
  tmark(H, "k_fwd_o", t0);
  return 0;
}

extern "C" int aa_orcu_bwd(aa_orcu_t *H, const aa_orcu_out_t *dq, const aa_orcu_out_t *dk, const aa_orcu_out_t *dv,
                           char *msg, size_t msglen) {
  CK(cudaSetDevice(H->dev), "select the device");
  size_t nr = H->nq_all, nc = H->nk_all, d = H->hp.d;
  dout_t Q, K, V;
  if (!out_alloc(H, &Q, nr * d) || !out_alloc(H, &K, nc * d) || !out_alloc(H, &V, nc * d))
    return fail(cudaErrorMemoryAllocation, "outputs of the backward", msg, msglen);
  double t0 = wall();
  k_dq<<<(unsigned)nr, NT>>>(H->D, Q);
  CK(cudaGetLastError(), "launch of the dQ kernel");
  CK(cudaDeviceSynchronize(), "dQ kernel");
  tmark(H, "k_dq", t0);
  t0 = wall();
  k_kv<<<(unsigned)nc, NT>>>(H->D, K, V);
  CK(cudaGetLastError(), "launch of the dK/dV kernel");
  CK(cudaDeviceSynchronize(), "backward kernels");
  tmark(H, "k_kv", t0);
  t0 = wall();
  CK(out_get(dq, &Q, nr * d), "download of dQ");
  CK(out_get(dk, &K, nc * d), "download of dK");
  CK(out_get(dv, &V, nc * d), "download of dV");
  tmark(H, "download of dQ, dK, dV", t0);
  return 0;
}
#endif
