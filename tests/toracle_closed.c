/* attnacc: oracle tests against closed forms, a naive MPFR reference, finite differences of the forward loss, and
 * empty rows. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#define TOR_NO_COMPARE
#include "toracle_common.c"

#define RP 256 /* reference precision */

/* Naive reference at RP bits, straight from the equations ([nki-bwd]): returns
   the loss L = sum O*dO and, when grads, every output. Inputs from tc with
   optional perturbation of one input element (which: 0 q, 1 k, 2 v, 3 sink). */
typedef struct {
  mpfr_t *o, *lse, *dq, *dk, *dv, *ds, loss;
  double max_identity_gap; /* max over rows |rowsum(O dO) - rowsum(P dP)| / scale */
} ref_t;

static mpfr_t *mk(size_t n) {
  mpfr_t *a = malloc((n + 1) * sizeof(mpfr_t));
  for (size_t i = 0; i < n; i++) {
    mpfr_init2(a[i], RP);
    mpfr_set_zero(a[i], 1);
  }
  return a;
}
static void rm(mpfr_t *a, size_t n) {
  for (size_t i = 0; i < n; i++)
    mpfr_clear(a[i]);
  free(a);
}

static void ref_run(ref_t *R, const tor_case_t *tc, int which, size_t at, double hstep, int grads) {
  const aa_problem_t *pb = &tc->pb;
  size_t nq = pb->n_q, nk = pb->n_k, d = pb->d, H = pb->heads, G = H / pb->kv_heads, ns = pb->num_sinks;
  mpfr_t *q = mk(H * nq * d), *k = mk(pb->kv_heads * nk * d), *v = mk(pb->kv_heads * nk * d), *sk = mk(H * ns + 1);
  for (size_t i = 0; i < H * nq * d; i++)
    mpfr_set_d(q[i], tc->q.data[i], MPFR_RNDN);
  for (size_t i = 0; i < pb->kv_heads * nk * d; i++) {
    mpfr_set_d(k[i], tc->k.data[i], MPFR_RNDN);
    mpfr_set_d(v[i], tc->v.data[i], MPFR_RNDN);
  }
  for (size_t i = 0; i < H * ns; i++)
    mpfr_set_d(sk[i], pb->sinks[i], MPFR_RNDN);
  mpfr_t *tgt = which == 0 ? q : which == 1 ? k : which == 2 ? v : sk;
  if (which >= 0) mpfr_add_d(tgt[at], tgt[at], hstep, MPFR_RNDN);
  mpfr_t sc, t, z, P, dP, D, x;
  mpfr_inits2(RP, sc, t, z, P, dP, D, x, (mpfr_ptr)0);
  if (pb->scale_default) {
    mpfr_set_ui(sc, (unsigned long)d, MPFR_RNDN);
    mpfr_rec_sqrt(sc, sc, MPFR_RNDN);
  } else {
    mpfr_set_d(sc, pb->scale, MPFR_RNDN);
  }
  mpfr_set_zero(R->loss, 1);
  R->max_identity_gap = 0;
  mpfr_t *S = mk(nk), *Pr = mk(nk), *dPr = mk(nk);
  for (size_t h = 0; h < H; h++) {
    size_t g = h / G;
    for (size_t i = 0; i < nq; i++) {
      size_t row = h * nq + i, nvis = 0;
      mpfr_set_zero(z, 1);
      for (size_t j = 0; j < nk; j++) {
        if (!aa_problem_visible(pb, i, j)) continue;
        mpfr_set_zero(S[j], 1);
        for (size_t c = 0; c < d; c++) {
          mpfr_mul(t, q[row * d + c], k[(g * nk + j) * d + c], MPFR_RNDN);
          mpfr_add(S[j], S[j], t, MPFR_RNDN);
        }
        mpfr_mul(S[j], S[j], sc, MPFR_RNDN);
        mpfr_exp(t, S[j], MPFR_RNDN);
        mpfr_add(z, z, t, MPFR_RNDN);
        nvis++;
      }
      for (size_t s = 0; s < ns; s++) {
        mpfr_exp(t, sk[h * ns + s], MPFR_RNDN);
        mpfr_add(z, z, t, MPFR_RNDN);
      }
      if (nvis + ns == 0) {
        if (grads) mpfr_set_inf(R->lse[row], -1);
        continue;
      }
      mpfr_log(x, z, MPFR_RNDN);
      if (grads) mpfr_set(R->lse[row], x, MPFR_RNDN);
      mpfr_set_zero(D, 1);
      for (size_t c = 0; c < d; c++) {
        mpfr_set_zero(t, 1);
        for (size_t j = 0; j < nk; j++) {
          if (!aa_problem_visible(pb, i, j) || (tc->keep && !tc->keep[row * nk + j])) continue;
          mpfr_sub(P, S[j], x, MPFR_RNDN);
          mpfr_exp(P, P, MPFR_RNDN);
          mpfr_mul_d(P, P, pb->keep ? pb->keep_scale : 1.0, MPFR_RNDN);
          mpfr_fma(t, P, v[(g * nk + j) * d + c], t, MPFR_RNDN);
        }
        if (grads) mpfr_set(R->o[row * d + c], t, MPFR_RNDN);
        mpfr_mul_d(t, t, tc->dO.data[row * d + c], MPFR_RNDN);
        mpfr_add(R->loss, R->loss, t, MPFR_RNDN);
        mpfr_add(D, D, t, MPFR_RNDN);
      }
      if (!grads) continue;
      /* backward by the formulas; rowsum(P dP) for the identity */
      mpfr_t pdp;
      mpfr_init2(pdp, RP);
      mpfr_set_zero(pdp, 1);
      for (size_t j = 0; j < nk; j++) {
        if (!aa_problem_visible(pb, i, j)) continue;
        mpfr_sub(Pr[j], S[j], x, MPFR_RNDN);
        mpfr_exp(Pr[j], Pr[j], MPFR_RNDN);
        mpfr_set_zero(dPr[j], 1);
        int kept = tc->keep == NULL || tc->keep[row * nk + j];
        if (kept) {
          for (size_t c = 0; c < d; c++) {
            mpfr_mul_d(t, v[(g * nk + j) * d + c], tc->dO.data[row * d + c], MPFR_RNDN);
            mpfr_add(dPr[j], dPr[j], t, MPFR_RNDN);
          }
          mpfr_mul_d(dPr[j], dPr[j], pb->keep ? pb->keep_scale : 1.0, MPFR_RNDN);
        }
        mpfr_fma(pdp, Pr[j], dPr[j], pdp, MPFR_RNDN);
        /* dV_j += keep ks P dO_i */
        if (kept)
          for (size_t c = 0; c < d; c++) {
            mpfr_mul_d(t, Pr[j], tc->dO.data[row * d + c], MPFR_RNDN);
            mpfr_mul_d(t, t, pb->keep ? pb->keep_scale : 1.0, MPFR_RNDN);
            mpfr_add(R->dv[(g * nk + j) * d + c], R->dv[(g * nk + j) * d + c], t, MPFR_RNDN);
          }
        mpfr_sub(dP, dPr[j], D, MPFR_RNDN);
        mpfr_mul(dP, dP, Pr[j], MPFR_RNDN); /* dS */
        mpfr_mul(dP, dP, sc, MPFR_RNDN);
        for (size_t c = 0; c < d; c++) {
          mpfr_fma(R->dq[row * d + c], dP, k[(g * nk + j) * d + c], R->dq[row * d + c], MPFR_RNDN);
          mpfr_fma(R->dk[(g * nk + j) * d + c], dP, q[row * d + c], R->dk[(g * nk + j) * d + c], MPFR_RNDN);
        }
      }
      mpfr_sub(pdp, pdp, D, MPFR_RNDN);
      R->max_identity_gap = fmax(R->max_identity_gap, fabs(mpfr_get_d(pdp, MPFR_RNDA)));
      mpfr_clear(pdp);
      for (size_t s = 0; s < ns; s++) {
        mpfr_sub(t, sk[h * ns + s], x, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_mul(t, t, D, MPFR_RNDN);
        mpfr_sub(R->ds[h * ns + s], R->ds[h * ns + s], t, MPFR_RNDN);
      }
    }
  }
  rm(S, nk);
  rm(Pr, nk);
  rm(dPr, nk);
  rm(q, H * nq * d);
  rm(k, pb->kv_heads * nk * d);
  rm(v, pb->kv_heads * nk * d);
  rm(sk, H * ns + 1);
  mpfr_clears(sc, t, z, P, dP, D, x, (mpfr_ptr)0);
}

static void ref_init(ref_t *R, const tor_case_t *tc) {
  const aa_problem_t *pb = &tc->pb;
  R->o = mk(pb->heads * pb->n_q * pb->d);
  R->lse = mk(pb->heads * pb->n_q);
  R->dq = mk(pb->heads * pb->n_q * pb->d);
  R->dk = mk(pb->kv_heads * pb->n_k * pb->d);
  R->dv = mk(pb->kv_heads * pb->n_k * pb->d);
  R->ds = mk(pb->heads * pb->num_sinks + 1);
  mpfr_init2(R->loss, RP);
}
static void ref_free(ref_t *R, const tor_case_t *tc) {
  const aa_problem_t *pb = &tc->pb;
  rm(R->o, pb->heads * pb->n_q * pb->d);
  rm(R->lse, pb->heads * pb->n_q);
  rm(R->dq, pb->heads * pb->n_q * pb->d);
  rm(R->dk, pb->kv_heads * pb->n_k * pb->d);
  rm(R->dv, pb->kv_heads * pb->n_k * pb->d);
  rm(R->ds, pb->heads * pb->num_sinks + 1);
  mpfr_clear(R->loss);
}

/* oracle output vs reference values: within relerr_bound, correct FP32 rounding */
static void cmp_ref(const aa_oracle_out_t *o, mpfr_t *ref, size_t n, const char *what, uint64_t seed) {
  int fails = 0;
  for (size_t i = 0; i < n && fails < 5; i++) {
    double r = mpfr_get_d(ref[i], MPFR_RNDN), v = o->val.data[i];
    double tol = o->relerr_bound * fabs(r) * (1 + 0x1p-30) + 0x1p-200 * (1 + fabs(r));
    float f = mpfr_get_flt(ref[i], MPFR_RNDN);
    int ok = (v == r || fabs(v - r) <= tol) && (o->fp32.data[i] == (double)f || (isinf(r) && v == r));
    if (!ok) {
      AA_FAIL("%s[%zu]: oracle %a (bits %016llx, fp32 %a) within %a of the reference %a (fp32 %a), seed %llu", what,
              i, v, (unsigned long long)tor_bits(v), o->fp32.data[i], o->relerr_bound, r, (double)f,
              (unsigned long long)seed);
      fails++;
    }
  }
}

static void test_reference(uint64_t seed) {
  /* small problem with everything on: GQA, causal, sinks, dropout */
  tor_cfg_t c = {12, 4, 2, 1, 1, 0, 0, 2, 1, 0, 0, 1.0};
  tor_case_t tc;
  tor_make(&tc, &c, seed + 5);
  ref_t R;
  ref_init(&R, &tc);
  ref_run(&R, &tc, -1, 0, 0, 1);
  AA_CHECK(R.max_identity_gap < 0x1p-200, "identity rowsum(O dO) = rowsum(P dP): gap %a, seed %llu",
           R.max_identity_gap, (unsigned long long)seed);
  for (int path = 0; path < 2; path++) {
    aa_oracle_result_t r;
    if (tor_run(&r, &tc, (aa_oracle_path_t)path, 128, 0) != AA_OK) continue;
    const char *pn = aa_oracle_path_name((aa_oracle_path_t)path);
    char w[64];
    size_t nq = tc.pb.heads * tc.pb.n_q * tc.pb.d, nk = tc.pb.kv_heads * tc.pb.n_k * tc.pb.d;
    snprintf(w, sizeof w, "reference O (%s)", pn);
    cmp_ref(&r.o, R.o, nq, w, seed);
    snprintf(w, sizeof w, "reference LSE (%s)", pn);
    cmp_ref(&r.lse, R.lse, tc.pb.heads * tc.pb.n_q, w, seed);
    snprintf(w, sizeof w, "reference dQ (%s)", pn);
    cmp_ref(&r.dq, R.dq, nq, w, seed);
    snprintf(w, sizeof w, "reference dK (%s)", pn);
    cmp_ref(&r.dk, R.dk, nk, w, seed);
    snprintf(w, sizeof w, "reference dV (%s)", pn);
    cmp_ref(&r.dv, R.dv, nk, w, seed);
    snprintf(w, sizeof w, "reference dsinks (%s)", pn);
    cmp_ref(&r.dsinks, R.ds, tc.pb.heads * tc.pb.num_sinks, w, seed);
    /* the identity with the oracle's O: rowsum(O dO) vs the reference rowsum(P dP) (= D) */
    aa_oracle_result_free(&r);
  }
  /* finite differences of L = sum O dO, central, h = 2^-40: the O(h^2)
     truncation is ~ h^2 |L'''| < 2^-70 here; check |fd - grad| <= 2^-60 (1 + |grad|) */
  aa_pcg64_t rng;
  aa_pcg64_seed(&rng, seed, 9);
  mpfr_t lp, lm;
  mpfr_inits2(RP, lp, lm, (mpfr_ptr)0);
  const double hstep = 0x1p-40;
  for (int which = 0; which < 4; which++) {
    size_t n = which == 0  ? tc.pb.heads * tc.pb.n_q * tc.pb.d
               : which < 3 ? tc.pb.kv_heads * tc.pb.n_k * tc.pb.d
                           : tc.pb.heads * tc.pb.num_sinks;
    mpfr_t *g = which == 0 ? R.dq : which == 1 ? R.dk : which == 2 ? R.dv : R.ds;
    for (int rep = 0; rep < 4; rep++) {
      size_t at = aa_pcg64_next(&rng) % n;
      ref_t Rp = R;
      ref_run(&Rp, &tc, which, at, hstep, 0);
      mpfr_set(lp, Rp.loss, MPFR_RNDN);
      ref_run(&Rp, &tc, which, at, -hstep, 0);
      mpfr_set(lm, Rp.loss, MPFR_RNDN);
      mpfr_sub(lp, lp, lm, MPFR_RNDN);
      mpfr_div_d(lp, lp, 2 * hstep, MPFR_RNDN);
      double fd = mpfr_get_d(lp, MPFR_RNDN), gr = mpfr_get_d(g[at], MPFR_RNDN);
      AA_CHECK(fabs(fd - gr) <= 0x1p-60 * (1 + fabs(gr)),
               "finite difference of the loss matches the gradient (%s[%zu]): fd %a, grad %a, seed %llu",
               (const char *[]){"q", "k", "v", "sink"}[which], at, fd, gr, (unsigned long long)seed);
    }
  }
  /* restore the loss of the unperturbed problem for later users */
  mpfr_clears(lp, lm, (mpfr_ptr)0);
  ref_free(&R, &tc);
  tor_free(&tc);
}

/* q = 0: uniform attention, O = mean of visible v, LSE = log(#visible),
   dV_j = sum_i dO_i / #visible_i; identical k rows: dQ = 0 exactly. */
static void test_uniform(uint64_t seed) {
  for (int variant = 0; variant < 2; variant++) {
    tor_cfg_t c = {24, 8, 2, 1, 1, 0, 0, 0, 0, 0, 0, 1.0};
    tor_case_t tc;
    tor_make(&tc, &c, seed + 11 + variant);
    size_t n = c.n, d = c.d;
    if (variant == 0)
      memset(tc.q.data, 0, aa_tensor_numel(&tc.q) * sizeof(double));
    else
      for (size_t j = 1; j < n; j++)
        memcpy(tc.k.data + j * d, tc.k.data, d * sizeof(double));
    mpfr_t *O = mk(c.heads * n * d), *L = mk(c.heads * n), *dV = mk(n * d), t;
    mpfr_init2(t, RP);
    for (size_t h = 0; h < c.heads; h++)
      for (size_t i = 0; i < n; i++) {
        mpfr_set_ui(L[h * n + i], (unsigned long)(i + 1), MPFR_RNDN);
        mpfr_log(L[h * n + i], L[h * n + i], MPFR_RNDN);
        if (variant == 1) { /* all scores equal to S_i = scale q_i . k_0 */
          mpfr_set_zero(t, 1);
          for (size_t cc = 0; cc < d; cc++) {
            mpfr_set_d(O[0], tc.q.data[(h * n + i) * d + cc], MPFR_RNDN);
            mpfr_mul_d(O[0], O[0], tc.k.data[cc], MPFR_RNDN);
            mpfr_add(t, t, O[0], MPFR_RNDN);
          }
          mpfr_div_d(t, t, sqrt((double)d), MPFR_RNDN); /* d = 8: sqrt not exact, use MPFR */
          mpfr_set_ui(O[0], (unsigned long)d, MPFR_RNDN);
          mpfr_sqrt(O[0], O[0], MPFR_RNDN);
          mpfr_set_zero(t, 1);
          for (size_t cc = 0; cc < d; cc++) {
            mpfr_set_d(O[1], tc.q.data[(h * n + i) * d + cc], MPFR_RNDN);
            mpfr_mul_d(O[1], O[1], tc.k.data[cc], MPFR_RNDN);
            mpfr_add(t, t, O[1], MPFR_RNDN);
          }
          mpfr_div(t, t, O[0], MPFR_RNDN);
          mpfr_add(L[h * n + i], L[h * n + i], t, MPFR_RNDN);
        }
      }
    for (size_t h = 0; h < c.heads; h++)
      for (size_t i = 0; i < n; i++)
        for (size_t cc = 0; cc < d; cc++) {
          mpfr_ptr o = O[(h * n + i) * d + cc];
          mpfr_set_zero(o, 1);
          for (size_t j = 0; j <= i; j++)
            mpfr_add_d(o, o, tc.v.data[j * d + cc], MPFR_RNDN);
          mpfr_div_ui(o, o, (unsigned long)(i + 1), MPFR_RNDN);
          for (size_t j = 0; j <= i; j++) {
            mpfr_set_d(t, tc.dO.data[(h * n + i) * d + cc], MPFR_RNDN);
            mpfr_div_ui(t, t, (unsigned long)(i + 1), MPFR_RNDN);
            mpfr_add(dV[j * d + cc], dV[j * d + cc], t, MPFR_RNDN);
          }
        }
    for (int path = 0; path < 2; path++) {
      aa_oracle_result_t r;
      if (tor_run(&r, &tc, (aa_oracle_path_t)path, 128, 0) != AA_OK) continue;
      char w[64];
      const char *vn = variant ? "equal keys" : "q = 0", *pn = aa_oracle_path_name((aa_oracle_path_t)path);
      snprintf(w, sizeof w, "%s O = mean v (%s)", vn, pn);
      cmp_ref(&r.o, O, c.heads * n * d, w, seed);
      snprintf(w, sizeof w, "%s LSE = log #visible + S (%s)", vn, pn);
      cmp_ref(&r.lse, L, c.heads * n, w, seed);
      snprintf(w, sizeof w, "%s dV = sum dO / #visible (%s)", vn, pn);
      cmp_ref(&r.dv, dV, n * d, w, seed);
      if (variant == 1)
        for (size_t i = 0; i < c.heads * n * d; i++)
          if (r.dq.val.data[i] != 0 || r.dq.fp32.data[i] != 0 || r.dq.bf16.data[i] != 0) {
            AA_FAIL("equal keys: dQ[%zu] = 0 exactly (%s): got %a / %a / %a, seed %llu", i, pn, r.dq.val.data[i],
                    r.dq.fp32.data[i], r.dq.bf16.data[i], (unsigned long long)seed);
            break;
          }
      aa_oracle_result_free(&r);
    }
    rm(O, c.heads * n * d);
    rm(L, c.heads * n);
    rm(dV, n * d);
    mpfr_clear(t);
    tor_free(&tc);
  }
}

/* Rows without visible keys: O = 0, LSE = -Inf, dQ row 0, no NaN anywhere. */
static void test_empty_rows(uint64_t seed) {
  tor_cfg_t c = {40, 16, 2, 1, 0, 0, 2, 0, 0, 0, 0, 1.0};
  tor_case_t tc;
  tor_make(&tc, &c, seed + 21);
  tc.bmax[0] = tc.bmin[0]; /* at least one empty row */
  for (int path = 0; path < 2; path++) {
    aa_oracle_result_t r;
    if (tor_run(&r, &tc, (aa_oracle_path_t)path, 128, 0) != AA_OK) continue;
    const char *pn = aa_oracle_path_name((aa_oracle_path_t)path);
    size_t nempty = 0;
    for (size_t h = 0; h < c.heads; h++)
      for (size_t i = 0; i < c.n; i++) {
        if (tc.bmin[i] != tc.bmax[i]) continue;
        nempty++;
        size_t row = h * c.n + i;
        AA_CHECK(r.lse.val.data[row] == -INFINITY && r.lse.fp32.data[row] == -INFINITY &&
                     r.lse.bf16.data[row] == -INFINITY,
                 "empty row %zu: LSE = -Inf (%s), got %a", i, pn, r.lse.val.data[row]);
        for (size_t cc = 0; cc < c.d; cc++)
          AA_CHECK(r.o.val.data[row * c.d + cc] == 0 && r.dq.val.data[row * c.d + cc] == 0 &&
                       r.o.fp32.data[row * c.d + cc] == 0 && r.dq.bf16.data[row * c.d + cc] == 0,
                   "empty row %zu: O = dQ = 0 (%s), got %a %a", i, pn, r.o.val.data[row * c.d + cc],
                   r.dq.val.data[row * c.d + cc]);
      }
    AA_CHECK(nempty > 0, "the packing draw has empty rows");
    for (int t = 0; t < 6; t++) {
      size_t nan, inf;
      aa_tensor_count_nonfinite(&tor_out(&r, t)->val, &nan, &inf);
      AA_CHECK(nan == 0 && (t == 1 || inf == 0), "empty rows: no NaN/Inf in %s (%s): %zu NaN %zu Inf, seed %llu",
               tor_names[t], pn, nan, inf, (unsigned long long)seed);
    }
    aa_oracle_result_free(&r);
  }
  tor_free(&tc);
}

/* Causal row 1 sees keys 0 and 1; with K[1, c] = K[0, c] in some columns,
   dQ[., 1, c] = K[0, c] (dS_10 + dS_11) = 0 exactly (sum_j dS_ij = 0 when
   the weights sum to 1): certified exact zeros, on both paths, and no
   element left uncertified. With sinks the weights of the keys sum to less
   than 1 and the same columns are not zero (D_i (1 - sum_j P_ij) K[0, c]):
   the oracle must not claim them. */
static void test_equal_keys(uint64_t seed) {
  for (size_t ns = 0; ns <= 1; ns++) {
    tor_cfg_t c = {24, 8, 2, 1, 1, 0, 0, ns, 0, 0, 0, 1.0};
    tor_case_t tc;
    tor_make(&tc, &c, seed + 33);
    for (size_t cc = 0; cc < c.d; cc += 2)
      tc.k.data[1 * c.d + cc] = tc.k.data[0 * c.d + cc];
    for (int path = 0; path < 2; path++) {
      aa_oracle_result_t r;
      if (tor_run(&r, &tc, (aa_oracle_path_t)path, 128, 0) != AA_OK) continue;
      const char *pn = aa_oracle_path_name((aa_oracle_path_t)path);
      for (size_t h = 0; h < c.heads; h++)
        for (size_t cc = 0; cc < c.d; cc += 2) {
          double v = r.dq.val.data[(h * c.n + 1) * c.d + cc];
          if (ns == 0)
            AA_CHECK(v == 0 && r.dq.bf16.data[(h * c.n + 1) * c.d + cc] == 0,
                     "equal keys: dQ[%zu, 1, %zu] = 0 exactly (%s), got %a, seed %llu", h, cc, pn, v,
                     (unsigned long long)seed);
          else
            AA_CHECK(v != 0, "equal keys with a sink: dQ[%zu, 1, %zu] is not zero (%s), seed %llu", h, cc, pn,
                     (unsigned long long)seed);
        }
      if (ns == 0)
        AA_CHECK(r.n_uncertified == 0, "equal keys: %zu elements uncertified (%s), seed %llu", r.n_uncertified, pn,
                 (unsigned long long)seed);
      aa_oracle_result_free(&r);
    }
    tor_free(&tc);
  }
}

int main(void) {
  uint64_t seed = aa_test_seed("toracle_closed");
  test_reference(seed);
  test_uniform(seed);
  test_empty_rows(seed);
  test_equal_keys(seed);
  return aa_test_finish("toracle_closed");
}
