/* attnacc: the emulation of the problem features (softcap, ALiBi, alignment, windows): binary64 recipes (each
 * pipeline structure) against the oracle, and the softcap.tanh key. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "oracle.h"
#include "rng.h"
#include "tests.h"

typedef struct {
  size_t nq, nk, heads, kvh;
  int causal, br, local;
  long L, R;
  double cap;
  int alibi;
} ecfg_t;

static uint64_t seed;
static int approx_changed; /* configurations where softcap.tanh = approx changed fa2's LSE or dQ */

static void fill(aa_tensor_t *t, aa_pcg64_t *r, double amp) {
  for (size_t i = 0; i < aa_tensor_numel(t); i++)
    t->data[i] = (double)aa_bf16_rne((float)(aa_pcg64_normal(r) * amp));
}

static double rel_max(const aa_tensor_t *a, const aa_tensor_t *b) { /* max |a - b| / max |b| */
  double e = 0, m = 0;
  for (size_t i = 0; i < aa_tensor_numel(b); i++) {
    e = fmax(e, fabs(a->data[i] - b->data[i]));
    m = fmax(m, fabs(b->data[i]));
  }
  return m > 0 ? e / m : e;
}

static void set(aa_recipe_t *r, const char *k, const char *v) {
  aa_error_t err = {{0}};
  if (aa_recipe_set(r, k, v, &err) != AA_OK) AA_FAIL("recipe_set %s = %s: %s", k, v, err.msg);
}

static void run_cfg(const ecfg_t *c, const char *name, uint64_t s) {
  const size_t d = 16;
  aa_pcg64_t r;
  aa_pcg64_seed(&r, s, 3);
  aa_problem_t pb;
  double slopes[4] = {0.5, 0.171875, 0.0625, 0.3};
  aa_problem_init(&pb, c->nq, c->nk, d, c->heads, c->kvh);
  pb.causal = c->causal;
  pb.align = c->br ? AA_ALIGN_BOTTOM_RIGHT : AA_ALIGN_TOP_LEFT;
  pb.local = c->local;
  pb.window_left = c->L < 0 ? AA_WINDOW_INF : (size_t)c->L;
  pb.window_right = c->R < 0 ? AA_WINDOW_INF : (size_t)c->R;
  pb.softcap = c->cap;
  pb.alibi = c->alibi == 1 ? AA_ALIBI_FLASH : c->alibi == 2 ? AA_ALIBI_TORCH : AA_ALIBI_NONE;
  pb.alibi_slopes = slopes;
  size_t sq[3] = {c->heads, c->nq, d}, sk[3] = {c->kvh, c->nk, d};
  aa_tensor_t q, k, v, dO;
  aa_tensor_alloc(&q, 3, sq, AA_FMT_BF16);
  aa_tensor_alloc(&dO, 3, sq, AA_FMT_BF16);
  aa_tensor_alloc(&k, 3, sk, AA_FMT_BF16);
  aa_tensor_alloc(&v, 3, sk, AA_FMT_BF16);
  fill(&q, &r, 2);
  fill(&k, &r, 2);
  fill(&v, &r, 1);
  fill(&dO, &r, 1);
  aa_error_t err = {{0}};
  aa_oracle_result_t orc;
  if (aa_oracle_run(&orc, &pb, &q, &k, &v, &dO, NULL, &err) != AA_OK) {
    AA_FAIL("%s: oracle: %s", name, err.msg);
    goto done;
  }
  /* binary64 recipes of three pipeline structures: FA2's exp fold (the softcap folded into the exp coefficient
     and the gradient scale), Q scaled at load with exp2 (NKI's), two-pass whole rows */
  for (int rv = 0; rv < 3; rv++) {
    aa_recipe_t rec;
    aa_recipe_preset(&rec, "exact-fp64", NULL);
    set(&rec, "fwd.tile_q", "8");
    set(&rec, "fwd.tile_k", "8");
    set(&rec, "bwd.tile_q", "8");
    set(&rec, "bwd.tile_k", "8");
    if (rv == 1) {
      set(&rec, "scale_fold", "q");
      set(&rec, "exp_form", "exp2-fma");
      set(&rec, "bwd.dk_scale", "none");
    }
    if (rv == 2) {
      set(&rec, "fwd.softmax", "two-pass");
      set(&rec, "scale_fold", "s");
      set(&rec, "fwd.tile_k", "0");
      set(&rec, "bwd.tile_k", "0");
      set(&rec, "bwd.d_source", "p-dp");
      set(&rec, "bwd.ds_scale", "on");
      set(&rec, "bwd.dq_scale", "none");
      set(&rec, "bwd.dk_scale", "none");
    }
    aa_attn_result_t res;
    if (aa_attn_run(&res, &pb, &rec, &q, &k, &v, &dO, &err) != AA_OK) {
      AA_FAIL("%s (structure %d): attn_run: %s", name, rv, err.msg);
      continue;
    }
    const aa_tensor_t *e[4] = {&res.o, &res.dq, &res.dk, &res.dv};
    const aa_oracle_out_t *o[4] = {&orc.o, &orc.dq, &orc.dk, &orc.dv};
    const char *on[4] = {"o", "dq", "dk", "dv"};
    for (int t = 0; t < 4; t++) {
      double x = rel_max(e[t], &o[t]->val);
      AA_CHECK(x <= 1e-12, "%s (structure %d): binary64 emulation %s within 1e-12 of the oracle: %g, seed %llu", name,
               rv, on[t], x, (unsigned long long)s);
    }
    for (size_t i = 0; i < c->heads * c->nq; i++) {
      double a = res.lse.data[i], b = orc.lse.val.data[i];
      AA_CHECK(a == b || fabs(a - b) <= 1e-12 * (1 + fabs(b)), "%s (structure %d): LSE[%zu] %a vs oracle %a", name,
               rv, i, a, b);
    }
    aa_attn_result_free(&res);
  }
  if (c->alibi == 1 && c->causal &&
      !c->local) { /* alibi.causal = col: same outputs, LSE shifted by slope (i + n_k - n_q) */
    aa_recipe_t rec;
    aa_recipe_preset(&rec, "exact-fp64", NULL);
    set(&rec, "alibi.causal", "col");
    aa_attn_result_t res;
    if (aa_attn_run(&res, &pb, &rec, &q, &k, &v, &dO, &err) == AA_OK) {
      const aa_tensor_t *e[4] = {&res.o, &res.dq, &res.dk, &res.dv};
      const aa_oracle_out_t *o[4] = {&orc.o, &orc.dq, &orc.dk, &orc.dv};
      for (int t = 0; t < 4; t++)
        AA_CHECK(rel_max(e[t], &o[t]->val) <= 1e-12, "%s: alibi.causal = col keeps output %d: %g", name, t,
                 rel_max(e[t], &o[t]->val));
      for (size_t hh = 0; hh < c->heads; hh++)
        for (size_t i = 0; i < c->nq; i++) {
          double a0 = res.lse.data[hh * c->nq + i], b0 = orc.lse.val.data[hh * c->nq + i];
          if (isinf(b0)) continue;
          double want = b0 + slopes[hh] * ((double)i + (double)c->nk - (double)c->nq);
          AA_CHECK(fabs(a0 - want) <= 1e-12 * (1 + fabs(want)), "%s: alibi.causal = col LSE[%zu, %zu] %a, want %a",
                   name, hh, i, a0, want);
        }
      aa_attn_result_free(&res);
    } else {
      AA_FAIL("%s: alibi.causal = col: %s", name, err.msg);
    }
  }
  if (c->cap > 0) { /* softcap.tanh = approx changes the FA2 result, by about 2^-18 of the tanh */
    aa_recipe_t a, b;
    aa_recipe_preset(&a, "fa2", NULL);
    aa_recipe_preset(&b, "fa2", NULL);
    set(&b, "softcap.tanh", "approx");
    AA_CHECK(!aa_recipe_equal(&a, &b), "softcap.tanh = approx makes a different recipe");
    aa_attn_result_t ra, rb;
    if (aa_attn_run(&ra, &pb, &a, &q, &k, &v, &dO, &err) == AA_OK &&
        aa_attn_run(&rb, &pb, &b, &q, &k, &v, &dO, &err) == AA_OK) {
      /* the FP32 LSE or dQ's BF16 dS see the tanh's 2^-18-sized error; BF16 O of small problems may not */
      double x = fmax(rel_max(&ra.lse, &rb.lse), rel_max(&ra.dq, &rb.dq)), ea = rel_max(&ra.o, &orc.o.val),
             eb = rel_max(&rb.o, &orc.o.val);
      AA_CHECK(x < 0.05, "%s: fa2 LSE or dQ with exact vs approx tanh differ, not wildly: %g", name, x);
      approx_changed += x > 0;
      AA_CHECK(ea < 0.05 && eb < 0.05, "%s: fa2 O within 5%% of the oracle (exact tanh %g, approx %g)", name, ea, eb);
      aa_attn_result_free(&ra);
      aa_attn_result_free(&rb);
    } else {
      AA_FAIL("%s: fa2: %s", name, err.msg);
    }
  }
  aa_oracle_result_free(&orc);
done:
  aa_tensor_free(&q);
  aa_tensor_free(&k);
  aa_tensor_free(&v);
  aa_tensor_free(&dO);
}

int main(void) {
  seed = aa_test_seed("tattn_features");
  /* nq nk heads kvh causal br local L R cap alibi */
  const ecfg_t cfgs[] = {
      {20, 20, 2, 1, 0, 0, 0, -1, -1, 1.5, 0}, /* softcap, GQA */
      {9, 30, 2, 2, 1, 1, 0, -1, -1, 0, 1},    /* flash ALiBi, bottom-right causal */
      {30, 17, 1, 1, 0, 1, 1, 5, 3, 0, 2},     /* torch ALiBi, two-sided window, empty rows */
      {25, 19, 2, 1, 1, 1, 1, 6, -1, 2.5, 1},  /* everything */
      {16, 40, 1, 1, 1, 0, 0, -1, -1, 3, 0},   /* top-left causal n_q < n_k */
  };
  const char *names[] = {"softcap", "alibi-flash-br", "alibi-torch-window", "all", "tl-causal-softcap"};
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
    run_cfg(&cfgs[i], names[i], seed + i);
  AA_CHECK(approx_changed > 0, "softcap.tanh = approx changes fa2's LSE or dQ somewhere");
  return aa_test_finish("tattn_features");
}
