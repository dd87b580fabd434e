/* attnacc: hand-checkable 4 x 2 attention: every fa2 and nki rounding step written out as scalar code, bits compared.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "tests.h"

/* The inputs: small dyadic BF16 values, so every score is exact and every
   rounding in the chain below is visible by hand; a few dO and V entries
   use all 8 BF16 significand bits so that dP = dO V^T needs rounding to
   BF16 (the nki step that fa2 does not take). */
#define N 4
#define DH 2
static const double Qv[N][DH] = {{1, 0.5}, {-0.75, 1.5}, {0.25, -1}, {2, 0.125}};
static const double Kv[N][DH] = {{0.5, 1}, {1.25, -0.5}, {-1, 0.75}, {0.375, 2}};
static const double Vv[N][DH] = {{1, -2}, {0.5, 0.25}, {-1.5, 1.9921875}, {1.9921875, 0.75}};
static const double dOv[N][DH] = {{0.5078125, 1}, {-1, 0.25}, {1.5, -0.5078125}, {0.75, 0.7578125}};

static float bf(float x) { /* one RNE rounding to BF16, through the library's scalar rounding */
  aa_round_opts_t o = {AA_FMT_BF16, AA_RND_NE, 1, 0};
  return (float)aa_round((double)x, &o, NULL);
}
static float ex2(float x) {
  return (float)exp2((double)x);
} /* exp = exact: FP32 of the binary64 exp2 */
static float exn(float x) {
  return (float)exp((double)x);
}

static int visible(int causal, int i, int j) {
  return !causal || j <= i;
}

/* ---- FA2 ([fa2]), K tiles of width tk, q tiles of width tq ---- */
static void fa2_by_hand(float O[N][DH], float lse[N], float dQ[N][DH], int tk, int causal) {
  const float scale = (float)(1.0 / sqrt((double)DH));
  const float c = (float)((double)scale * 1.4426950408889634); /* scale_softmax_log2 */
  const float l2e = (float)1.4426950408889634;
  float S[N][N];
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) { /* S = Q K^T, FP32 FMA chain over d */
      float a = 0;
      for (int e = 0; e < DH; e++)
        a = fmaf((float)Qv[i][e], (float)Kv[j][e], a);
      S[i][j] = a;
    }
  /* forward: online softmax per row, rescale on every increase */
  for (int i = 0; i < N; i++) {
    float m = -INFINITY, l = 0, acc[DH] = {0, 0};
    for (int j0 = 0; j0 < N; j0 += tk) {
      float mx = -INFINITY;
      int any = 0;
      for (int j = j0; j < j0 + tk; j++)
        if (visible(causal, i, j)) {
          any = 1;
          if (S[i][j] > mx) mx = S[i][j];
        }
      if (!any) continue;
      if (mx > m) {
        if (m != -INFINITY) {
          float alpha = ex2((m - mx) * c); /* exp2((m_old - m_new) * scale_log2) */
          l = l * alpha;
          for (int e = 0; e < DH; e++)
            acc[e] = acc[e] * alpha;
        }
        m = mx;
      }
      float b = m * c; /* max_scaled */
      float P[N] = {0};
      for (int j = j0; j < j0 + tk; j++) {
        if (!visible(causal, i, j)) continue;
        float p = ex2(fmaf(S[i][j], c, -b));
        l = l + p;    /* row sum of the FP32 weights */
        P[j] = bf(p); /* BF16 before P V */
      }
      for (int e = 0; e < DH; e++)
        for (int j = j0; j < j0 + tk; j++)
          acc[e] = fmaf(P[j], (float)Vv[j][e], acc[e]);
    }
    float r = 1.0f / l;
    for (int e = 0; e < DH; e++)
      O[i][e] = bf(acc[e] * r);
    lse[i] = fmaf(m, scale, (float)log((double)l)); /* row_max*scale + log(sum) */
  }
  /* backward: D from BF16 O and dO in FP32; P = exp2(fma(S, c, -lse*log2e));
     dS = bf16(P * (dP - D)); dQ += dS K per K tile in FP32; scale at the end. */
  float D[N];
  for (int i = 0; i < N; i++) {
    float s = 0;
    for (int e = 0; e < DH; e++)
      s = s + O[i][e] * (float)dOv[i][e];
    D[i] = s;
  }
  for (int i = 0; i < N; i++) {
    float dq[DH] = {0, 0};
    for (int j0 = 0; j0 < N; j0 += tk) {
      int any = 0;
      for (int j = j0; j < j0 + tk; j++)
        any |= visible(causal, i, j);
      if (!any) continue;
      float part[DH] = {0, 0}, dS[N] = {0};
      for (int j = j0; j < j0 + tk; j++) {
        if (!visible(causal, i, j)) continue;
        float P = ex2(fmaf(S[i][j], c, -(lse[i] * l2e)));
        float dP = 0;
        for (int e = 0; e < DH; e++)
          dP = fmaf((float)dOv[i][e], (float)Vv[j][e], dP);
        dS[j] = bf((dP - D[i]) * P);
      }
      for (int e = 0; e < DH; e++)
        for (int j = j0; j < j0 + tk; j++)
          part[e] = fmaf(dS[j], (float)Kv[j][e], part[e]);
      for (int e = 0; e < DH; e++)
        dq[e] = part[e] + dq[e]; /* atomicAdd, ascending K tiles */
    }
    for (int e = 0; e < DH; e++)
      dQ[i][e] = bf(dq[e] * scale);
  }
}

/* ---- NKI ([nki-bwd]), mixed_precision on, one K tile, one section ---- */
static void nki_by_hand(float O[N][DH], float lse[N], float dQ[N][DH], int causal) {
  const float scale = (float)(1.0 / sqrt((double)DH));
  float Qs[N][DH], S[N][N];
  for (int i = 0; i < N; i++)
    for (int e = 0; e < DH; e++)
      Qs[i][e] = bf((float)Qv[i][e] * scale); /* load_q_dy: bf16(q*scale) */
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      float a = 0;
      for (int e = 0; e < DH; e++)
        a = fmaf(Qs[i][e], (float)Kv[j][e], a);
      S[i][j] = a;
    }
  for (int i = 0; i < N; i++) { /* forward: exp(S - max), O * (1/l), checkpoint (-max, 1/l) */
    float m = -INFINITY, l = 0, acc[DH] = {0, 0}, P[N] = {0};
    for (int j = 0; j < N; j++)
      if (visible(causal, i, j) && S[i][j] > m) m = S[i][j];
    for (int j = 0; j < N; j++) {
      if (!visible(causal, i, j)) continue;
      float p = exn(S[i][j] - m);
      l = l + p;
      P[j] = bf(p);
    }
    for (int e = 0; e < DH; e++)
      for (int j = 0; j < N; j++)
        acc[e] = fmaf(P[j], (float)Vv[j][e], acc[e]);
    float recip = 1.0f / l, neg_max = -m;
    for (int e = 0; e < DH; e++)
      O[i][e] = bf(acc[e] * recip);
    lse[i] = -(neg_max + (float)log((double)recip)); /* host: lse = -(neg_max + log(recip)) */
  }
  float D[N];
  for (int i = 0; i < N; i++) { /* dy_o_sum in fp32 (mixed_precision) */
    float s = 0;
    for (int e = 0; e < DH; e++)
      s = s + O[i][e] * (float)dOv[i][e];
    D[i] = s;
  }
  for (int i = 0; i < N; i++) {
    float dS[N] = {0}, psum[DH] = {0, 0}, dq[DH] = {0, 0};
    for (int j = 0; j < N; j++) {
      if (!visible(causal, i, j)) continue;
      float P = bf(exn(S[i][j] + (-lse[i]))); /* activation(exp, bias=-LSE) into bf16 softmax_y */
      float dP = 0;
      for (int e = 0; e < DH; e++)
        dP = fmaf((float)dOv[i][e], (float)Vv[j][e], dP);
      dP = bf(dP);                 /* dP in the kernel dtype */
      dS[j] = bf((dP - D[i]) * P); /* scalar_tensor_tensor(subtract, multiply) */
    }
    for (int e = 0; e < DH; e++)
      for (int j = 0; j < N; j++)
        psum[e] = fmaf(dS[j], (float)Kv[j][e], psum[e]);
    for (int e = 0; e < DH; e++)
      dq[e] = psum[e] * scale + dq[e]; /* dq_local += dq_psum * scale */
    for (int e = 0; e < DH; e++)
      dQ[i][e] = bf(bf(dq[e])); /* written in bf16 (section store, output) */
  }
}

static void compare(const char *what, const aa_attn_result_t *res, float O[N][DH], float lse[N], float dQ[N][DH]) {
  for (int i = 0; i < N; i++) {
    AA_CHECK(res->lse.data[i] == (double)lse[i], "%s: LSE[%d] %a (bits %08x), by hand %a (bits %08x)", what, i,
             res->lse.data[i], aa_f32_bits((float)res->lse.data[i]), (double)lse[i], aa_f32_bits(lse[i]));
    for (int e = 0; e < DH; e++) {
      AA_CHECK(res->o.data[i * DH + e] == (double)O[i][e], "%s: O[%d][%d] %a, by hand %a", what, i, e,
               res->o.data[i * DH + e], (double)O[i][e]);
      AA_CHECK(res->dq.data[i * DH + e] == (double)dQ[i][e], "%s: dQ[%d][%d] %a (bits %08x), by hand %a (bits %08x)",
               what, i, e, res->dq.data[i * DH + e], aa_f32_bits((float)res->dq.data[i * DH + e]), (double)dQ[i][e],
               aa_f32_bits(dQ[i][e]));
    }
  }
}

int main(void) {
  aa_tensor_t q, k, v, dO;
  size_t sh[3] = {1, N, DH};
  aa_tensor_t *ts[4] = {&q, &k, &v, &dO};
  const double(*src[4])[DH] = {Qv, Kv, Vv, dOv};
  for (int t = 0; t < 4; t++) {
    aa_tensor_alloc(ts[t], 3, sh, AA_FMT_BF16);
    memcpy(ts[t]->data, src[t], sizeof(double) * N * DH);
  }
  for (int causal = 0; causal < 2; causal++) {
    aa_problem_t pb;
    aa_problem_init(&pb, N, N, DH, 1, 1);
    pb.causal = causal;
    float O[N][DH], lse[N], dQ[N][DH];
    char what[64];
    for (int tk = 4; tk >= 2; tk -= 2) {
      aa_recipe_t r;
      aa_recipe_preset(&r, "fa2", NULL);
      if (tk == 2) { /* two K tiles: exercises the rescale and the ordered dQ adds */
        aa_recipe_set(&r, "fwd.tile_k", "2", NULL);
        aa_recipe_set(&r, "bwd.tile_k", "2", NULL);
        aa_recipe_set(&r, "bwd.tile_q", "2", NULL);
      }
      fa2_by_hand(O, lse, dQ, tk, causal);
      aa_attn_result_t res;
      aa_error_t err = {{0}};
      snprintf(what, sizeof what, "fa2 tk=%d causal=%d", tk, causal);
      if (aa_attn_run(&res, &pb, &r, &q, &k, &v, &dO, &err) != AA_OK) {
        AA_FAIL("%s: run failed: %s", what, err.msg);
        continue;
      }
      compare(what, &res, O, lse, dQ);
      aa_attn_result_free(&res);
    }
    aa_recipe_t r;
    aa_recipe_preset(&r, "nki", NULL);
    nki_by_hand(O, lse, dQ, causal);
    aa_attn_result_t res;
    aa_error_t err = {{0}};
    snprintf(what, sizeof what, "nki causal=%d", causal);
    if (aa_attn_run(&res, &pb, &r, &q, &k, &v, &dO, &err) != AA_OK) {
      AA_FAIL("%s: run failed: %s", what, err.msg);
    } else {
      compare(what, &res, O, lse, dQ);
      aa_attn_result_free(&res);
    }
  }
  /* One value by hand, independent of any code: row 0 of Q K^T is
     (1*0.5 + 0.5*1, 1*1.25 - 0.5*0.5, -1 + 0.5*0.75, 0.375 + 0.5*2)
     = (1, 1, -0.625, 1.375), exact in FP32, so LSE[0] must be
     log(sum_j exp(S0j / sqrt 2)) to FP32 accuracy. */
  {
    aa_problem_t pb;
    aa_problem_init(&pb, N, N, DH, 1, 1);
    aa_recipe_t r;
    aa_recipe_preset(&r, "fa2", NULL);
    aa_attn_result_t res;
    if (aa_attn_run(&res, &pb, &r, &q, &k, &v, &dO, NULL) == AA_OK) {
      double s0[N] = {1.0, 1.0, -0.625, 1.375}, t = 0;
      for (int j = 0; j < N; j++)
        t += exp(s0[j] / sqrt(2.0));
      AA_CHECK(fabs(res.lse.data[0] - log(t)) < 1e-6, "fa2 LSE[0] %a vs closed form %a", res.lse.data[0], log(t));
      aa_attn_result_free(&res);
    }
  }
  for (int t = 0; t < 4; t++)
    aa_tensor_free(ts[t]);
  return aa_test_finish("tattn_micro");
}
