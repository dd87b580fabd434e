/* attnacc: the oracle's fast path on an NVIDIA GPU: the rows kernel of fast_rows.c run by fast_cuda_kern.cu, with the
 * LSE and 1/Z of each row in MPFR on the CPU between the two forward kernels. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "fast-common.h"
#include "oracle-cuda.h"

int aa_oracle_cuda_devices(void) {
  return aa_orcu_devices();
}

/* Visible keys of every query as intervals that move right with i (dense, causal, windows), so that the visible
   queries of a key are an interval too: [first i with rhi > j, first i with rlo > j). Packing bounds may break
   that, and the other features (sinks, dropout, softcap, ALiBi, an attention mask, bias, key padding or logit
   offset) are not in the kernels: 0, the CPU runs. */
int aa_oracle_cuda_supports(const aa_or_ctx_t *cx) {
  const aa_problem_t *pb = cx->pb;
  if (cx->ns != 0 || pb->keep != NULL || cx->mod || pb->bound_min != NULL || pb->varlen_batch != 0 ||
      aa_problem_has_mask(pb))
    return 0;
  if (cx->d < 1 || cx->d > AA_ORCU_MAXD || cx->ks != 1.0) return 0;
  size_t plo = 0, phi = 0;
  for (size_t i = 0; i < cx->n_q; i++) {
    size_t lo, hi;
    aa_problem_row_keys(pb, i, &lo, &hi);
    if (hi < lo) hi = lo;
    if (lo < plo || hi < phi) return 0;
    plo = lo;
    phi = hi;
  }
  return 1;
}

/* Whether device auto should take the GPU: the rows kernel's bound of an n-term sum grows as n^2 (kappa), where
   the tiled kernel's grows with the tiles, so past a few thousand terms elements miss a tight target and go to the
   MPFR engine, which then dominates. Measured on an H200 (one head, d 128, BF16 normal inputs, target 2^-48): at
   n = 8192 no element was recomputed and the GPU took 0.64 s against 3.5 s for the tiled kernel on 16 cores; at
   n = 32768 the GPU kernels took 5.1 s (1.3 s since k_dots) but the MPFR recompute had not ended after 9 minutes. So
   auto takes the GPU for sums of at most 8192 terms, or for targets of 2^-40 and looser; device cuda always does. */
int aa_oracle_cuda_auto_ok(const aa_or_ctx_t *cx) {
  size_t longest = cx->n_k > cx->group * cx->n_q ? cx->n_k : cx->group * cx->n_q;
  return longest <= 8192 || cx->target >= 0x1p-40;
}

static int fail(aa_error_t *err, const char *msg) {
  return aa_error_set(err, AA_EUNSUPPORTED, "oracle on the GPU: %s", msg);
}

/* Each query's visible keys [rlo, rhi) and each key's visible queries [clo, chi), as intervals
   (aa_oracle_cuda_supports checked that rlo and rhi never decrease). */
static void visible_intervals(const aa_or_ctx_t *cx, int64_t *rlo, int64_t *rhi, int64_t *clo, int64_t *chi) {
  size_t nq = cx->n_q, nk = cx->n_k;
  for (size_t i = 0; i < nq; i++) {
    size_t lo, hi;
    aa_problem_row_keys(cx->pb, i, &lo, &hi);
    rlo[i] = (int64_t)lo;
    rhi[i] = (int64_t)(hi < lo ? lo : hi);
  }
  for (size_t j = 0, a = 0, b = 0; j < nk; j++) {
    while (a < nq && rhi[a] <= (int64_t)j)
      a++;
    while (b < nq && rlo[b] <= (int64_t)j)
      b++;
    clo[j] = (int64_t)a;
    chi[j] = (int64_t)(b > a ? b : a);
  }
}

static aa_orcu_params_t cuda_params(const aa_or_ctx_t *cx) {
  aa_orcu_params_t par;
  par.n_q = cx->n_q;
  par.n_k = cx->n_k;
  par.d = cx->d;
  par.heads = cx->heads;
  par.kvh = cx->kvh;
  par.group = cx->group;
  par.sig = cx->sig;
  par.sig_rel = cx->sig_rel;
  par.floor_unit = cx->floor_unit;
  par.target = cx->target;
  par.tab = cx->tab;
  return par;
}

/* Between the two forward kernels, on the CPU: per row, the LSE (settled) and 1/Z (izh, izl) from the GPU's shift
   M (mh, ml) and normaliser Z (zs, zc, relative bound epsz), by lse_from_z (fast-common.h) as fwd_row calls it;
   an empty row as fwd_row leaves it. */
static void cuda_lse(aa_or_ctx_t *cx, const int64_t *rlo, const int64_t *rhi, double *const rowv[7]) {
  const double *mh = rowv[0], *ml = rowv[1], *zs = rowv[2], *zc = rowv[3], *epsz = rowv[4];
  double *izh = rowv[5], *izl = rowv[6];
  size_t nr = cx->heads * cx->n_q, nq = cx->n_q;
  int nt = cx->threads;
  if (!mpfr_buildopt_tls_p()) nt = 1;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
#endif
  {
    mpfr_t mz, mlz;
    mpfr_inits2(256, mz, mlz, (mpfr_ptr)0);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (size_t r = 0; r < nr; r++) {
      size_t lo = (size_t)rlo[r % nq], hi = (size_t)rhi[r % nq];
      cx->row_empty[r] = hi == lo;
      if (hi == lo) {
        aa_oracle_settle_empty_lse(cx, r);
        cx->lse_h[r] = -INFINITY;
        cx->lse_l[r] = cx->e_lse[r] = 0;
        izh[r] = izl[r] = 0;
        continue;
      }
      aa_or_dd_t iz = lse_from_z(cx, r, zs[r], zc[r], aa_or_dd(mh[r], ml[r]), epsz[r], mz, mlz);
      izh[r] = iz.hi;
      izl[r] = iz.lo;
    }
    mpfr_clears(mz, mlz, (mpfr_ptr)0);
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
  }
}

/* Writes zeros over an output's host arrays of n elements on nt threads, before its download: fresh pages are
   faulted in on first write, and cudaMemcpy into untouched pages ran at 1.3 GB/s on the H200's host (0.31 s for
   dQ, dK and dV at n 32768, d 128), one thread taking every fault; spread over the threads the faults cost a few
   hundredths. The values do not matter: the GPU writes every element. */
static void pretouch(const aa_orcu_out_t *o, size_t n, int nt) {
  char *arr[5] = {(char *)o->val, (char *)o->f32, (char *)o->b16, (char *)o->rel, (char *)o->todo};
  size_t len[5] = {n * sizeof(double), n * sizeof(double), n * sizeof(double), n * sizeof(double), n}, blk = 1 << 16;
  for (int u = 0; u < 5; u++) {
    long nb = (long)((len[u] + blk - 1) / blk);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (long b = 0; b < nb; b++) {
      size_t at = (size_t)b * blk;
      memset(arr[u] + at, 0, len[u] - at < blk ? len[u] - at : blk);
    }
  }
}

/* The GPU's part once the inputs are up: forward (Z, then the LSE on the CPU, then O and D), backward. */
static int cuda_kernels(aa_or_ctx_t *cx, aa_orcu_t *H, const int64_t *rlo, const int64_t *rhi, double *const rowv[7],
                        char *msg, size_t msglen) {
  if (aa_orcu_fwd_z(H, rowv[0], rowv[1], rowv[2], rowv[3], rowv[4], msg, msglen) != 0) return -1;
  double t0 = aa_wall_seconds();
  cuda_lse(cx, rlo, rhi, rowv);
  if (getenv("AA_ORACLE_CUDA_TIMES") != NULL)
    fprintf(stderr, "oracle cuda: LSE on the CPU %.3f s\n", aa_wall_seconds() - t0);
  aa_orcu_out_t oo[AA_OR_NT];
  for (int t = 0; t < AA_OR_NT; t++) {
    aa_oracle_out_t *o = cx->w[t].out;
    oo[t] = (aa_orcu_out_t){o->val.data, o->fp32.data, o->bf16.data, cx->w[t].rel, cx->w[t].todo};
  }
  size_t nq = cx->heads * cx->n_q * cx->d, nk = cx->kvh * cx->n_k * cx->d;
  pretouch(&oo[AA_OR_O], nq, cx->threads);
  if (aa_orcu_fwd_o(H, cx->lse_h, cx->lse_l, cx->e_lse, rowv[5], rowv[6], cx->d_h, cx->d_l, cx->e_d, &oo[AA_OR_O],
                    msg, msglen) != 0)
    return -1;
  pretouch(&oo[AA_OR_DQ], nq, cx->threads);
  pretouch(&oo[AA_OR_DK], nk, cx->threads);
  pretouch(&oo[AA_OR_DV], nk, cx->threads);
  return aa_orcu_bwd(H, &oo[AA_OR_DQ], &oo[AA_OR_DK], &oo[AA_OR_DV], msg, msglen);
}

int aa_oracle_fast_run_cuda(aa_or_ctx_t *cx, aa_error_t *err) {
  size_t nr = cx->heads * cx->n_q, nq = cx->n_q, nk = cx->n_k;
  char msg[256] = "";
  int st = AA_OK;
  spans_t sp;
  int64_t *rlo = malloc((nq + 1) * sizeof *rlo), *rhi = malloc((nq + 1) * sizeof *rhi);
  int64_t *clo = malloc((nk + 1) * sizeof *clo), *chi = malloc((nk + 1) * sizeof *chi);
  double *rowv[7]; /* per row: the shift M (hi, lo), Z (hi, lo), Z's relative bound, 1/Z (hi, lo) */
  for (int u = 0; u < 7; u++)
    rowv[u] = malloc((nr + 1) * sizeof(double));
  int ok = fast_begin(cx, &sp);
  ok = ok && rlo && rhi && clo && chi;
  for (int u = 0; u < 7; u++)
    ok = ok && rowv[u] != NULL;
  if (!ok) {
    st = aa_error_set(err, AA_ENOMEM, "oracle: out of memory in the GPU fast path");
    goto done;
  }
  visible_intervals(cx, rlo, rhi, clo, chi);
  aa_orcu_params_t par = cuda_params(cx);
  aa_orcu_spans_t dsp = {sp.xq, sp.xdo, sp.xk, sp.xv, sp.lq, sp.ldo, sp.lk, sp.lv};
  aa_orcu_t *H = NULL;
  double t0 = aa_wall_seconds();
  if (aa_orcu_begin(&H, &par, cx->q, cx->k, cx->v, cx->dO, &dsp, rlo, rhi, clo, chi, msg, sizeof msg) != 0 ||
      cuda_kernels(cx, H, rlo, rhi, rowv, msg, sizeof msg) != 0)
    st = fail(err, msg);
  aa_orcu_end(H);
  if (getenv("AA_ORACLE_CUDA_TIMES") != NULL)
    fprintf(stderr, "oracle cuda: all of the GPU path %.3f s\n", aa_wall_seconds() - t0);
done:
  free(rlo);
  free(rhi);
  free(clo);
  free(chi);
  for (int u = 0; u < 7; u++)
    free(rowv[u]);
  spans_free(&sp);
  return st;
}
