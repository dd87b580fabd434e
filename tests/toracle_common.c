/* attnacc: helpers shared by the oracle tests (included, not compiled alone): problem generation and comparisons. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "oracle.h"
#include "problem.h"
#include "rng.h"
#include "tensor.h"
#include "tests.h"

static uint64_t tor_bits(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

typedef struct {
  size_t n, d, heads, kvh;
  int causal;
  size_t window;
  int packing; /* 1: random segments; 2: also some empty rows */
  size_t ns;
  int dropout;
  int scale_given;
  int fp32;   /* inputs FP32 instead of BF16 */
  double amp; /* input amplitude */
} tor_cfg_t;

typedef struct {
  aa_problem_t pb;
  aa_tensor_t q, k, v, dO;
  int32_t *bmin, *bmax;
  double *sinks;
  uint8_t *keep;
} tor_case_t;

static double tor_draw(aa_pcg64_t *r, const tor_cfg_t *c) {
  double x = aa_pcg64_normal(r) * c->amp;
  return c->fp32 ? (double)(float)x : (double)aa_bf16_rne((float)x); /* lib/fmt.h: inputs need only be BF16 values */
}

static void tor_make(tor_case_t *tc, const tor_cfg_t *c, uint64_t seed) {
  aa_pcg64_t r;
  uint64_t tag[2] = {0x0ac1e, (uint64_t)c->n * 1000 + c->d};
  aa_rng_derive(&r, seed, tag, 2);
  memset(tc, 0, sizeof *tc);
  aa_problem_init(&tc->pb, c->n, c->n, c->d, c->heads, c->kvh);
  size_t sq[3] = {c->heads, c->n, c->d}, sk[3] = {c->kvh, c->n, c->d};
  aa_tensor_alloc(&tc->q, 3, sq, AA_FMT_BF16);
  aa_tensor_alloc(&tc->dO, 3, sq, AA_FMT_BF16);
  aa_tensor_alloc(&tc->k, 3, sk, AA_FMT_BF16);
  aa_tensor_alloc(&tc->v, 3, sk, AA_FMT_BF16);
  for (size_t i = 0; i < aa_tensor_numel(&tc->q); i++)
    tc->q.data[i] = tor_draw(&r, c);
  for (size_t i = 0; i < aa_tensor_numel(&tc->k); i++)
    tc->k.data[i] = tor_draw(&r, c);
  for (size_t i = 0; i < aa_tensor_numel(&tc->v); i++)
    tc->v.data[i] = tor_draw(&r, c);
  for (size_t i = 0; i < aa_tensor_numel(&tc->dO); i++)
    tc->dO.data[i] = tor_draw(&r, c);
  tc->pb.causal = c->causal;
  tc->pb.window = c->window;
  if (c->scale_given) {
    tc->pb.scale_default = 0;
    tc->pb.scale = 0.3;
  }
  if (c->packing) {
    tc->bmin = malloc(c->n * sizeof(int32_t));
    tc->bmax = malloc(c->n * sizeof(int32_t));
    size_t start = 0;
    while (start < c->n) { /* segments of random length; keys of the segment [start, end) */
      size_t len = 1 + aa_pcg64_next(&r) % (c->n / 3 + 1), end = start + len > c->n ? c->n : start + len;
      for (size_t i = start; i < end; i++) {
        tc->bmin[i] = (int32_t)start;
        tc->bmax[i] = (int32_t)end;
        if (c->packing == 2 && aa_pcg64_next(&r) % 5 == 0) tc->bmax[i] = tc->bmin[i]; /* empty row */
      }
      start = end;
    }
    tc->pb.bound_min = tc->bmin;
    tc->pb.bound_max = tc->bmax;
  }
  if (c->ns) {
    tc->sinks = malloc(c->heads * c->ns * sizeof(double));
    for (size_t i = 0; i < c->heads * c->ns; i++)
      tc->sinks[i] = aa_pcg64_normal(&r) + 0.5;
    tc->pb.num_sinks = c->ns;
    tc->pb.sinks = tc->sinks;
  }
  if (c->dropout) {
    tc->keep = malloc(c->heads * c->n * c->n);
    for (size_t i = 0; i < c->heads * c->n * c->n; i++)
      tc->keep[i] = aa_pcg64_next(&r) % 10 != 0;
    tc->pb.keep = tc->keep;
    tc->pb.keep_scale = 1.0 / 0.9;
  }
}

static void tor_free(tor_case_t *tc) {
  aa_tensor_free(&tc->q);
  aa_tensor_free(&tc->k);
  aa_tensor_free(&tc->v);
  aa_tensor_free(&tc->dO);
  free(tc->bmin);
  free(tc->bmax);
  free(tc->sinks);
  free(tc->keep);
}

static int tor_run(aa_oracle_result_t *res, const tor_case_t *tc, aa_oracle_path_t path, int prec, int threads) {
  aa_oracle_opts_t o;
  aa_oracle_opts_init(&o);
  o.path = path;
  o.prec = prec;
  o.threads = threads;
  aa_error_t err = {{0}};
  int st = aa_oracle_run(res, &tc->pb, &tc->q, &tc->k, &tc->v, &tc->dO, &o, &err);
  if (st != AA_OK) AA_FAIL("oracle run (%s, prec %d): status %d: %s", aa_oracle_path_name(path), prec, st, err.msg);
  return st;
}

static const char *const tor_names[6] = {"O", "LSE", "dQ", "dK", "dV", "dsinks"};

static const aa_oracle_out_t *tor_out(const aa_oracle_result_t *r, int t) {
  const aa_oracle_out_t *o[6] = {&r->o, &r->lse, &r->dq, &r->dk, &r->dv, &r->dsinks};
  return o[t];
}

#ifndef TOR_NO_COMPARE
/* Every element: |a - b| <= (rel_a + rel_b) |b| (1 + 2^-40), identical
   FP32/BF16 roundings, no NaN. Returns the number of failures. */
static int tor_compare(const aa_oracle_result_t *a, const aa_oracle_result_t *b, const char *what, uint64_t seed,
                       int check_bits) {
  int fails = 0;
  for (int t = 0; t < 6; t++) {
    const aa_oracle_out_t *x = tor_out(a, t), *y = tor_out(b, t);
    size_t n = aa_tensor_numel(&x->val);
    if (n != aa_tensor_numel(&y->val)) {
      AA_FAIL("%s %s: sizes differ (%zu, %zu)", what, tor_names[t], n, aa_tensor_numel(&y->val));
      return 1;
    }
    double tol = (x->relerr_bound + y->relerr_bound) * (1 + 0x1p-40);
    for (size_t i = 0; i < n && fails < 10; i++) {
      double u = x->val.data[i], w = y->val.data[i];
      int same = check_bits ? tor_bits(u) == tor_bits(w) && tor_bits(x->fp32.data[i]) == tor_bits(y->fp32.data[i]) &&
                                  tor_bits(x->bf16.data[i]) == tor_bits(y->bf16.data[i])
                            : (u == w || fabs(u - w) <= tol * fabs(w)) && x->fp32.data[i] == y->fp32.data[i] &&
                                  x->bf16.data[i] == y->bf16.data[i];
      if (isnan(u) || isnan(w) || !same) {
        AA_FAIL("%s %s[%zu]: values agree within the bounds and roundings match: %a vs %a (bits %016llx %016llx), "
                "fp32 %a vs %a, bf16 %a vs %a, bounds %a %a, seed %llu",
                what, tor_names[t], i, u, w, (unsigned long long)tor_bits(u), (unsigned long long)tor_bits(w),
                x->fp32.data[i], y->fp32.data[i], x->bf16.data[i], y->bf16.data[i], x->relerr_bound, y->relerr_bound,
                (unsigned long long)seed);
        fails++;
      }
    }
  }
  return fails;
}
#endif
