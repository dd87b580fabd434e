/* attnacc: property test of the oracle's certificate over the whole exponent range it accepts (tgeneric style). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
/* Random problems: input scales 10^-30 to 10^30 per tensor, rows of mixed
   magnitude, exact and near ties at the row maximum, fully masked rows
   (bottom-right causal with n_q > n_k, windows), sinks, GQA, d from 1 to
   512. Each is run through the oracle (fast path; the mpfr path on every
   fourth problem; targets 2^-48, 2^-24 and 2^-96) and through an independent reference written here from
   the equations, in plain MPFR at RP and RP + 512 bits. Every element whose
   reference is resolved (the two precisions agree to 2^-200) must satisfy
   the guarantees of oracle.h: fp32/bf16 are RN of the exact value, val is
   within relerr_bound (<= target) for |x| in [2^-900, 2^1000], exact zeros
   and empty rows as documented. An element that breaks them is allowed
   only if the oracle counted it uncertified: failures <= n_uncertified.
   A refusal (AA_ERANGE) must not happen while every input is within 1e80.
   Iterations: 40 by default, 600 under ATTNACC_CHECK_EXPENSIVE, times
   ATTNACC_TEST_MULTIPLIER; ATTNACC_SEED changes the draw, ATTNACC_PROPERTY_ONLY=N replays problem N alone (both
   paths). */
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oracle.h"
#include "problem.h"
#include "rng.h"
#include "tensor.h"
#include "tests.h"

#define RP 1024

typedef struct {
  size_t nq, nk, d, H, kvh, ns;
  aa_problem_t pb;
  aa_tensor_t q, k, v, dO;
  double *sinks;
  char what[200];
} prop_case_t;

/* ---- the draw ---- */

static double unif(aa_pcg64_t *r, double a, double b) {
  return a + (b - a) * aa_pcg64_uniform(r);
}

/* one tensor [rows][d]: normal draws times 10^e (e per tensor), rows
   optionally of mixed magnitude, optionally rounded to BF16-like 8 bits */
static void fill(aa_pcg64_t *r, aa_tensor_t *t, size_t rows, size_t d, double e, double mix, int short_mant) {
  for (size_t i = 0; i < rows; i++) {
    double f = pow(10.0, e + (mix > 0 ? unif(r, -mix, mix) : 0));
    for (size_t c = 0; c < d; c++) {
      double x = aa_pcg64_normal(r) * f;
      if (short_mant && x != 0) {
        int ex;
        double m = frexp(x, &ex);
        x = ldexp(nearbyint(ldexp(m, 8)), ex - 8);
      }
      t->data[i * d + c] = x;
    }
  }
}

static size_t pick_d(aa_pcg64_t *r) {
  static const size_t ds[] = {1, 2, 3, 5, 8, 16, 33, 64, 80, 128, 256, 512};
  return ds[aa_pcg64_next(r) % (sizeof ds / sizeof ds[0])];
}

static void draw(prop_case_t *pc, aa_pcg64_t *r) {
  memset(pc, 0, sizeof *pc);
  pc->d = pick_d(r);
  size_t maxn = pc->d >= 256 ? 6 : pc->d >= 64 ? 12 : 24;
  pc->nq = 1 + aa_pcg64_next(r) % maxn;
  pc->nk = 1 + aa_pcg64_next(r) % maxn;
  pc->H = 1 + aa_pcg64_next(r) % 2;
  pc->kvh = aa_pcg64_next(r) % 2 ? pc->H : 1;
  pc->ns = aa_pcg64_next(r) % 4 == 0;
  aa_problem_init(&pc->pb, pc->nq, pc->nk, pc->d, pc->H, pc->kvh);
  unsigned mask = (unsigned)(aa_pcg64_next(r) % 4);
  if (mask >= 1) {
    pc->pb.causal = 1;
    pc->pb.align = mask >= 2 ? AA_ALIGN_BOTTOM_RIGHT : AA_ALIGN_TOP_LEFT; /* n_q > n_k: fully masked rows */
  }
  if (mask == 3) pc->pb.window = 1 + aa_pcg64_next(r) % 3;
  if (aa_pcg64_next(r) % 3 == 0) {
    pc->pb.scale_default = 0;
    pc->pb.scale = pow(2.0, unif(r, -4, 4));
  }
  /* scales: q and k set the logits' magnitude, v and dO the gradients' */
  double eq = unif(r, -30, 30), ek = unif(r, -30, 30), ev = unif(r, -30, 30), edo = unif(r, -30, 30);
  if (aa_pcg64_next(r) % 2) ek = -eq + unif(r, -3, 16); /* many problems with |S| from 1e-3 to 1e16 */
  if (aa_pcg64_next(r) % 8 == 0) { /* the edges: products near the subnormals, refusals above 2^1000 */
    double *e[4] = {&eq, &ek, &ev, &edo};
    unsigned which = (unsigned)(aa_pcg64_next(r) % 6);
    if (which < 4) {
      *e[which] = unif(r, -160, 160);
    } else { /* q and k, or v and dO, both huge */
      *e[2 * (which - 4)] = unif(r, 140, 160);
      *e[2 * (which - 4) + 1] = unif(r, 140, 160);
    }
  }
  double mix = aa_pcg64_next(r) % 3 == 0 ? unif(r, 1, 8) : 0;
  int sm = (int)(aa_pcg64_next(r) % 2);
  size_t sq[3] = {pc->H, pc->nq, pc->d}, sk[3] = {pc->kvh, pc->nk, pc->d};
  aa_tensor_alloc(&pc->q, 3, sq, AA_FMT_FP64);
  aa_tensor_alloc(&pc->dO, 3, sq, AA_FMT_FP64);
  aa_tensor_alloc(&pc->k, 3, sk, AA_FMT_FP64);
  aa_tensor_alloc(&pc->v, 3, sk, AA_FMT_FP64);
  fill(r, &pc->q, pc->H * pc->nq, pc->d, eq, mix, sm);
  fill(r, &pc->k, pc->kvh * pc->nk, pc->d, ek, mix, sm);
  fill(r, &pc->v, pc->kvh * pc->nk, pc->d, ev, 0, sm);
  fill(r, &pc->dO, pc->H * pc->nq, pc->d, edo, 0, sm);
  unsigned tie = (unsigned)(aa_pcg64_next(r) % 4);
  if (tie >= 2 && pc->nk > 1) /* keys equal to key 0: exact ties at the row max; 3: one ulp apart */
    for (size_t g = 0; g < pc->kvh; g++)
      for (size_t j = 1; j < pc->nk; j += 2) {
        double *kj = pc->k.data + (g * pc->nk + j) * pc->d, *k0 = pc->k.data + g * pc->nk * pc->d;
        memcpy(kj, k0, pc->d * sizeof(double));
        if (tie == 3) kj[0] = nextafter(kj[0], INFINITY);
      }
  if (pc->ns) {
    pc->sinks = malloc(pc->H * sizeof(double));
    for (size_t h = 0; h < pc->H; h++)
      pc->sinks[h] = aa_pcg64_normal(r) * 4;
    pc->pb.num_sinks = 1;
    pc->pb.sinks = pc->sinks;
  }
  snprintf(pc->what, sizeof pc->what,
           "H %zu/%zu n_q %zu n_k %zu d %zu mask %u window %zu scale %s sinks %zu exps q %.1f k %.1f v %.1f dO %.1f "
           "mix %.1f tie %u",
           pc->H, pc->kvh, pc->nq, pc->nk, pc->d, mask, pc->pb.window, pc->pb.scale_default ? "1/sqrt(d)" : "given",
           pc->ns, eq, ek, ev, edo, mix, tie);
}

static void case_free(prop_case_t *pc) {
  aa_tensor_free(&pc->q);
  aa_tensor_free(&pc->k);
  aa_tensor_free(&pc->v);
  aa_tensor_free(&pc->dO);
  free(pc->sinks);
}

/* ---- the independent reference ---- */

enum { T_O, T_LSE, T_DQ, T_DK, T_DV, T_DS, T_N };
static const char *const tname[T_N] = {"O", "LSE", "dQ", "dK", "dV", "dsinks"};

typedef struct {
  mpfr_t *x[T_N];
  size_t n[T_N];
} ref_t;

static mpfr_t *arr(size_t n, mpfr_prec_t p) {
  mpfr_t *a = malloc((n + 1) * sizeof(mpfr_t));
  for (size_t i = 0; i < n; i++) {
    mpfr_init2(a[i], p);
    mpfr_set_zero(a[i], 1);
  }
  return a;
}

static void ref_free(ref_t *R) {
  for (int t = 0; t < T_N; t++) {
    for (size_t i = 0; i < R->n[t]; i++)
      mpfr_clear(R->x[t][i]);
    free(R->x[t]);
  }
}

/* sum_c a[c] b[c] (doubles) at precision p: exact products, one rounding */
static void dot(mpfr_ptr out, const double *a, const double *b, size_t d, mpfr_t t) {
  mpfr_set_zero(out, 1);
  for (size_t c = 0; c < d; c++) {
    mpfr_set_d(t, a[c], MPFR_RNDN);
    mpfr_mul_d(t, t, b[c], MPFR_RNDN);
    mpfr_add(out, out, t, MPFR_RNDN);
  }
}

/* Straight from the equations, the softmax shifted by the row's largest
   logit M (LSE = M + log sum exp(S - M)) so that no exp overflows. */
static void ref_run(ref_t *R, const prop_case_t *pc, mpfr_prec_t p) {
  const aa_problem_t *pb = &pc->pb;
  size_t nq = pc->nq, nk = pc->nk, d = pc->d, H = pc->H, G = H / pc->kvh, ns = pc->ns;
  size_t nt[T_N] = {H * nq * d, H * nq, H * nq * d, pc->kvh * nk * d, pc->kvh * nk * d, H * ns};
  for (int t = 0; t < T_N; t++) {
    R->n[t] = nt[t];
    R->x[t] = arr(nt[t], p);
  }
  mpfr_t sc, t, M, Z, D, *S = arr(nk, p), *P = arr(nk, p), *dS = arr(nk, p), *o = arr(d, p);
  mpfr_inits2(p, sc, t, M, Z, D, (mpfr_ptr)0);
  if (pb->scale_default) {
    mpfr_set_ui(sc, (unsigned long)d, MPFR_RNDN);
    mpfr_rec_sqrt(sc, sc, MPFR_RNDN);
  } else {
    mpfr_set_d(sc, pb->scale, MPFR_RNDN);
  }
  for (size_t h = 0; h < H; h++) {
    size_t g = h / G;
    for (size_t i = 0; i < nq; i++) {
      size_t row = h * nq + i, nv = 0;
      const double *qi = pc->q.data + row * d, *doi = pc->dO.data + row * d;
      int vis[64];
      mpfr_set_inf(M, -1);
      for (size_t j = 0; j < nk; j++) {
        vis[j] = aa_problem_visible(pb, i, j);
        if (!vis[j]) continue;
        nv++;
        dot(S[j], qi, pc->k.data + (g * nk + j) * d, d, t);
        mpfr_mul(S[j], S[j], sc, MPFR_RNDN);
        if (mpfr_greater_p(S[j], M)) mpfr_set(M, S[j], MPFR_RNDN);
      }
      if (ns && mpfr_cmp_d(M, pc->sinks[h]) < 0) mpfr_set_d(M, pc->sinks[h], MPFR_RNDN);
      if (nv + ns == 0) { /* oracle.h: O = 0, LSE = -Inf, no gradient */
        mpfr_set_inf(R->x[T_LSE][row], -1);
        continue;
      }
      mpfr_set_zero(Z, 1);
      for (size_t j = 0; j < nk; j++) {
        if (!vis[j]) continue;
        mpfr_sub(t, S[j], M, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_add(Z, Z, t, MPFR_RNDN);
      }
      if (ns) {
        mpfr_d_sub(t, pc->sinks[h], M, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_add(Z, Z, t, MPFR_RNDN);
      }
      mpfr_log(Z, Z, MPFR_RNDN);
      mpfr_add(R->x[T_LSE][row], Z, M, MPFR_RNDN);
      for (size_t c = 0; c < d; c++)
        mpfr_set_zero(o[c], 1);
      for (size_t j = 0; j < nk; j++) {
        if (!vis[j]) continue;
        mpfr_sub(t, S[j], R->x[T_LSE][row], MPFR_RNDN);
        mpfr_exp(P[j], t, MPFR_RNDN);
        for (size_t c = 0; c < d; c++) {
          mpfr_mul_d(t, P[j], pc->v.data[(g * nk + j) * d + c], MPFR_RNDN);
          mpfr_add(o[c], o[c], t, MPFR_RNDN);
        }
      }
      mpfr_set_zero(D, 1);
      for (size_t c = 0; c < d; c++) {
        mpfr_set(R->x[T_O][row * d + c], o[c], MPFR_RNDN);
        mpfr_mul_d(t, o[c], doi[c], MPFR_RNDN);
        mpfr_add(D, D, t, MPFR_RNDN);
      }
      for (size_t j = 0; j < nk; j++) {
        if (!vis[j]) continue;
        dot(dS[j], doi, pc->v.data + (g * nk + j) * d, d, t);
        mpfr_sub(dS[j], dS[j], D, MPFR_RNDN);
        mpfr_mul(dS[j], dS[j], P[j], MPFR_RNDN);
        for (size_t c = 0; c < d; c++) {
          size_t kc = (g * nk + j) * d + c;
          mpfr_mul_d(t, dS[j], pc->k.data[kc], MPFR_RNDN);
          mpfr_add(R->x[T_DQ][row * d + c], R->x[T_DQ][row * d + c], t, MPFR_RNDN);
          mpfr_mul_d(t, dS[j], qi[c], MPFR_RNDN);
          mpfr_mul(t, t, sc, MPFR_RNDN);
          mpfr_add(R->x[T_DK][kc], R->x[T_DK][kc], t, MPFR_RNDN);
          mpfr_mul_d(t, P[j], doi[c], MPFR_RNDN);
          mpfr_add(R->x[T_DV][kc], R->x[T_DV][kc], t, MPFR_RNDN);
        }
      }
      for (size_t c = 0; c < d; c++)
        mpfr_mul(R->x[T_DQ][row * d + c], R->x[T_DQ][row * d + c], sc, MPFR_RNDN);
      if (ns) { /* dsink = -P_sink D */
        mpfr_d_sub(t, pc->sinks[h], R->x[T_LSE][row], MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_mul(t, t, D, MPFR_RNDN);
        mpfr_sub(R->x[T_DS][h], R->x[T_DS][h], t, MPFR_RNDN);
      }
    }
  }
  mpfr_clears(sc, t, M, Z, D, (mpfr_ptr)0);
  for (size_t j = 0; j < nk; j++) {
    mpfr_clear(S[j]);
    mpfr_clear(P[j]);
    mpfr_clear(dS[j]);
  }
  for (size_t c = 0; c < d; c++)
    mpfr_clear(o[c]);
  free(S);
  free(P);
  free(dS);
  free(o);
}

/* ---- correct roundings, independent of lib/fmt ---- */

/* mpfr_cmpabs against 2^e */
static int cmpabs_pow2(mpfr_srcptr x, long e) {
  mpfr_t p;
  mpfr_init2(p, 2);
  mpfr_set_ui_2exp(p, 1, e, MPFR_RNDN);
  int c = mpfr_cmpabs(x, p);
  mpfr_clear(p);
  return c;
}

/* RN of x to a binary format with prec bits, normal range from 2^emin_n
   (the smallest normal), subnormal quantum 2^(emin_n - prec + 1), overflow
   at 2^128 (FP32 and BF16 share the exponent range). */
static double round_to(mpfr_srcptr x, int prec) {
  if (mpfr_inf_p(x)) return mpfr_sgn(x) > 0 ? INFINITY : -INFINITY;
  if (mpfr_zero_p(x)) return 0.0;
  mpfr_t y;
  mpfr_init2(y, mpfr_get_prec(x) + 8);
  double out;
  if (cmpabs_pow2(x, -126) >= 0) {
    mpfr_t z;
    mpfr_init2(z, prec);
    mpfr_set(z, x, MPFR_RNDN);
    out = cmpabs_pow2(z, 128) >= 0 ? (mpfr_sgn(z) > 0 ? INFINITY : -INFINITY) : mpfr_get_d(z, MPFR_RNDN);
    mpfr_clear(z);
  } else {
    int q = -126 - prec + 1; /* subnormal quantum exponent */
    mpfr_mul_2si(y, x, -q, MPFR_RNDN);
    mpfr_rint(y, y, MPFR_RNDN); /* ties to even */
    out = ldexp(mpfr_get_d(y, MPFR_RNDN), q);
  }
  mpfr_clear(y);
  return out == 0 ? 0.0 : out; /* the oracle returns zeros as +0 */
}

/* ---- the check of one problem ---- */

typedef struct {
  size_t problems, refused, elements, checked_val, unresolved, failures, uncertified, broken_problems;
} tally_t;

/* Returns the number of elements that break a guarantee. */
static size_t check_out(const aa_oracle_result_t *res, const ref_t *R1, const ref_t *R2, tally_t *tl,
                        const char *path, int verbose) {
  const aa_oracle_out_t *outs[T_N] = {&res->o, &res->lse, &res->dq, &res->dk, &res->dv, &res->dsinks};
  size_t bad = 0;
  mpfr_t diff;
  mpfr_init2(diff, RP + 512);
  for (int t = 0; t < T_N; t++) {
    const aa_oracle_out_t *o = outs[t];
    double bound = o->relerr_bound * (1 + 0x1p-40);
    for (size_t e = 0; e < R2->n[t]; e++) {
      mpfr_srcptr x = R2->x[t][e], x1 = R1->x[t][e];
      double val = o->val.data[e], f32 = o->fp32.data[e], b16 = o->bf16.data[e];
      int ok = 1;
      if (!verbose) tl->elements++;
      /* resolved: both precisions agree to 2^-200 relative (or both exactly 0 / inf) */
      int resolved;
      if (mpfr_inf_p(x) || mpfr_zero_p(x)) {
        resolved = mpfr_equal_p(x, x1);
      } else {
        mpfr_sub(diff, x, x1, MPFR_RNDN);
        resolved = mpfr_zero_p(diff) || mpfr_get_exp(diff) < mpfr_get_exp(x) - 200;
      }
      if (!resolved) {
        if (!verbose) tl->unresolved++;
        /* deep cancellation: only the roundings, where both precisions agree */
        if (round_to(x, 24) == round_to(x1, 24)) ok &= f32 == round_to(x, 24);
        if (round_to(x, 8) == round_to(x1, 8)) ok &= b16 == round_to(x, 8);
      } else if (mpfr_inf_p(x)) { /* an empty row's LSE */
        ok = val == -INFINITY && f32 == -INFINITY && b16 == -INFINITY;
      } else if (mpfr_zero_p(x)) {
        ok = val == 0 && f32 == 0 && b16 == 0;
      } else {
        ok &= f32 == round_to(x, 24) && b16 == round_to(x, 8);
        if (mpfr_get_exp(x) > -899 && mpfr_get_exp(x) <= 1000) {
          if (!verbose) tl->checked_val++;
          mpfr_sub_d(diff, x, val, MPFR_RNDN);
          mpfr_div(diff, diff, x, MPFR_RNDU);
          double rel = fabs(mpfr_get_d(diff, MPFR_RNDU));
          ok &= rel <= bound;
          if (!(rel <= bound) && verbose)
            printf("  %s %s[%zu]: val %a, exact ~ %.17g, relative error %.3g > certified bound %.3g\n", path,
                   tname[t], e, val, mpfr_get_d(x, MPFR_RNDN), rel, bound);
        }
      }
      if (!ok) {
        bad++;
        if (verbose && bad <= 4)
          printf("  %s %s[%zu]: val %a fp32 %a bf16 %a; exact ~ %.17g (RN32 %a, RNbf16 %a)%s\n", path, tname[t], e,
                 val, f32, b16, mpfr_get_d(x, MPFR_RNDN), round_to(x, 24), round_to(x, 8),
                 resolved ? "" : " (unresolved reference)");
      }
    }
  }
  mpfr_clear(diff);
  return bad;
}

static void one_problem(aa_pcg64_t *r, size_t it, uint64_t seed, tally_t *tl) {
  prop_case_t pc;
  draw(&pc, r);
  ref_t R1, R2;
  ref_run(&R1, &pc, RP);
  ref_run(&R2, &pc, RP + 512);
  for (int pass = 0; pass < (it % 4 == 0 || getenv("ATTNACC_PROPERTY_ONLY") != NULL ? 2 : 1); pass++) {
    aa_oracle_opts_t opts;
    aa_oracle_opts_init(&opts);
    opts.path = pass == 0 ? AA_ORACLE_FAST : AA_ORACLE_MPFR;
    opts.threads = 2;
    if (it % 5 == 1) opts.target = 0x1p-24; /* a loose target (maps of BF16 errors) */
    if (it % 5 == 2) opts.target = AA_ORACLE_TARGET_MIN;
    aa_oracle_result_t res;
    aa_error_t err = {{0}};
    int st = aa_oracle_run(&res, &pc.pb, &pc.q, &pc.k, &pc.v, &pc.dO, &opts, &err);
    const char *path = aa_oracle_path_name(opts.path);
    tl->problems++;
    if (st == AA_ERANGE) {
      tl->refused++;
      /* a refusal must be justified: every bound of oracle.h is a product
         of at most three input maxima and factors below 1e7 here (d <= 512,
         n <= 24, two heads, scale <= 16), so inputs all within 1e80 stay
         below 1e247 and must be accepted */
      double mx = 0;
      const aa_tensor_t *ts[4] = {&pc.q, &pc.k, &pc.v, &pc.dO};
      for (int a = 0; a < 4; a++)
        for (size_t e = 0; e < aa_tensor_numel(ts[a]); e++)
          mx = fmax(mx, fabs(ts[a]->data[e]));
      AA_CHECK(mx > 1e80, "toracle_property: problem %zu (seed %llu, %s): refused (%s) with every input within %.3g",
               it, (unsigned long long)seed, pc.what, err.msg, mx);
      continue;
    }
    if (st != AA_OK) {
      AA_FAIL("toracle_property: problem %zu (seed %llu, %s): %s oracle status %d: %s", it, (unsigned long long)seed,
              pc.what, path, st, err.msg);
      continue;
    }
    AA_CHECK(res.o.relerr_bound <= opts.target && res.dq.relerr_bound <= opts.target &&
                 res.dk.relerr_bound <= opts.target && res.dv.relerr_bound <= opts.target &&
                 res.lse.relerr_bound <= opts.target,
             "toracle_property: problem %zu: a certified bound exceeds the target", it);
    size_t bad = check_out(&res, &R1, &R2, tl, path, 0);
    tl->uncertified += res.n_uncertified;
    if (bad > res.n_uncertified) {
      tl->failures += bad - res.n_uncertified;
      tl->broken_problems++;
      AA_FAIL("toracle_property: problem %zu (seed %llu, %s path, %s): %zu elements break the certificate, %zu "
              "counted uncertified",
              it, (unsigned long long)seed, path, pc.what, bad, res.n_uncertified);
      check_out(&res, &R1, &R2, tl, path, 1);
    }
    aa_oracle_result_free(&res);
  }
  ref_free(&R1);
  ref_free(&R2);
  case_free(&pc);
}

int main(void) {
  uint64_t seed = aa_test_seed("toracle_property");
  double mult = aa_test_multiplier();
  size_t iters = (size_t)((aa_test_expensive() ? 600 : 40) * mult);
  aa_pcg64_t r;
  uint64_t tag[1] = {0x9e0e71c};
  aa_rng_derive(&r, seed, tag, 1);
  tally_t tl = {0};
  const char *only = getenv("ATTNACC_PROPERTY_ONLY"); /* replay one problem of a failing run */
  for (size_t it = 0; it < iters; it++) {
    if (only != NULL && (size_t)atol(only) != it) {
      prop_case_t skip;
      draw(&skip, &r);
      case_free(&skip);
      continue;
    }
    one_problem(&r, it, seed, &tl);
  }
  printf(
      "toracle_property: %zu oracle runs of %zu problems, %zu refused (range), %zu elements checked (%zu against "
      "the certified bound, %zu with an unresolved reference), %zu uncertified, %zu elements broke the certificate "
      "in %zu runs\n",
      tl.problems, iters, tl.refused, tl.elements, tl.checked_val, tl.unresolved, tl.uncertified, tl.failures,
      tl.broken_problems);
  return aa_test_finish("toracle_property");
}
