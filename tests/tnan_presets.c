/* attnacc: the H200 presets' NaN/Inf census on all-constant inputs equals the H200's (README-gpu section 8). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "layout.h"
#include "tests.h"

/* Cells of fixtures/h200-nan/nan.json, the calibration grid (PyTorch 2.11, cuDNN 9.19, H200): B = 2, H = 4 (8
   heads), q = k = 133120 in every element (pytorch 121558), the NaN and Inf counts of o, dq, dk, dv each backend
   gave, copied from nan.json. Every score of a row is then the same ~2e11, whose FP32 ulp (16384) is far beyond
   the exp range: whether the backward's exp argument at the row maximum is exactly 0 or one ulp off (every weight
   Inf) is decided by how the kernel rounds S*scale, the max and the LSE (lib/recipe.h aa_lse_form_t). In an
   unmasked cell every weight of a head is Inf or none is, so the counts do not depend on v and dO (only on both
   signs appearing in each column, which any normal draw of this size gives): the test draws its own. Under a
   causal mask the NaN/Inf split depends on the values: presence only. */
typedef struct {
  const char *spec;      /* preset (or NAME:key=value) standing for the backend */
  size_t n_q, n_k, d;    /* the cell */
  int causal, presence;  /* presence: compare only whether each output has a non-finite element */
  size_t nan[4], inf[4]; /* o, dq, dk, dv on the H200 */
  double offset;         /* a logit offset (nan.json's offset-200 cells: an additive -200 attn_mask); 0: none */
} nan_cell_t;

#define ALLNAN(n)                                                                                                    \
  {0, n, n, n}, {                                                                                                    \
    0, 0, 0, 0                                                                                                       \
  }
#define NONE                                                                                                         \
  {0, 0, 0, 0}, {                                                                                                    \
    0, 0, 0, 0                                                                                                       \
  }
/* n_q = 1: one query row; dq 8 x 128 NaN, every dk and dv element Inf (8 x 1024 x 128) */
#define DECODE                                                                                                       \
  {0, 1024, 0, 0}, {                                                                                                 \
    0, 0, 1048576, 1048576                                                                                           \
  }

static const nan_cell_t cells[] = {
    /* d = 64 (scale 1/8, a power of two): every chain cancels; nan.json cells 64/64/64 none, 1/1024/64 none */
    {"fa2-h100", 64, 64, 64, 0, 0, NONE, 0},
    {"efficient-h100", 64, 64, 64, 0, 0, NONE, 0},
    {"cudnn-h100", 64, 64, 64, 0, 0, NONE, 0},
    {"flex-eager-h100", 64, 64, 64, 0, 0, NONE, 0},
    {"naive-bf16", 64, 64, 64, 0, 0, NONE, 0},
    {"efficient-h100", 1, 1024, 64, 0, 0, NONE, 0},
    /* d = 128: flash, efficient and FlexAttention overflow, cuDNN does not (64/64/128 none: its backward weights
       vanish, gradients 0) */
    {"fa2-h100", 64, 64, 128, 0, 0, ALLNAN(65536), 0},
    {"efficient-h100", 64, 64, 128, 0, 0, ALLNAN(65536), 0},
    {"flex-eager-h100", 64, 64, 128, 0, 0, ALLNAN(65536), 0},
    {"cudnn-h100", 64, 64, 128, 0, 0, NONE, 0},
    {"naive-bf16", 64, 64, 128, 0, 0, NONE, 0},
    /* decode, 1/1024/128 none: cuDNN overflows too */
    {"fa2-h100", 1, 1024, 128, 0, 0, DECODE, 0},
    {"efficient-h100", 1, 1024, 128, 0, 0, DECODE, 0},
    {"cudnn-h100", 1, 1024, 128, 0, 0, DECODE, 0},
    {"flex-eager-h100", 1, 1024, 128, 0, 0, DECODE, 0},
    {"naive-bf16", 1, 1024, 128, 0, 0, NONE, 0},
    /* causal 64/64/128: NaN and Inf in dq, dk, dv for efficient and FlexAttention, none for cuDNN */
    {"efficient-h100", 64, 64, 128, 1, 1, ALLNAN(1), 0},
    {"flex-eager-h100", 64, 64, 128, 1, 1, ALLNAN(1), 0},
    {"cudnn-h100", 64, 64, 128, 1, 1, NONE, 0},
    /* masked (offset-200) at d = 128: cuDNN's masked graph overflows as the efficient backend does, the decode row
       as the unmasked decode (cudnn-h100's `when masked` lines); nan.json cells 64/64/128, 192/192/128, 1/1024/128
       offset-200 */
    {"cudnn-h100", 64, 64, 128, 0, 0, ALLNAN(65536), -200},
    {"cudnn-h100", 192, 192, 128, 0, 0, ALLNAN(196608), -200},
    {"efficient-h100", 64, 64, 128, 0, 0, ALLNAN(65536), -200},
    {"cudnn-h100", 1, 1024, 128, 0, 0, DECODE, -200},
    /* cuDNN at other head dimensions (fixtures/h200-nan/nan_dsweep.json, nan_heldout2.json; README-gpu 8.7): the
       backward's exp argument at the row max overflows at d 48, 80, 112 and vanishes at d 40 (gradients 0) */
    {"cudnn-h100", 64, 64, 48, 0, 0, ALLNAN(24576), 0},
    {"cudnn-h100", 64, 64, 80, 0, 0, ALLNAN(40960), 0},
    {"cudnn-h100", 64, 64, 112, 0, 0, ALLNAN(57344), 0},
    {"cudnn-h100", 64, 64, 40, 0, 0, NONE, 0},
    {"cudnn-h100", 1, 64, 112, 0, 0, {0, 896, 0, 0}, {0, 0, 57344, 57344}, 0},
    {"cudnn-h100", 1, 777, 80, 0, 0, {0, 640, 0, 0}, {0, 0, 497280, 497280}, 0},
};

/* The census of one spec on one cell: counts[o][0] NaN, counts[o][1] Inf; -1 when the run fails. */
static int census(size_t counts[4][2], const char *spec, const nan_cell_t *c) {
  aa_tensor_t t[4] = {{0}};
  aa_attn_result_t res;
  aa_recipe_t r;
  aa_problem_t pb;
  aa_error_t err = {{0}};
  size_t shape[2][3] = {{8, c->n_q, c->d}, {8, c->n_k, c->d}};
  int st = aa_recipe_from_spec(&r, spec, &err);
  for (int i = 0; i < 2 && st == AA_OK; i++) { /* q, k: the constant 133120 = 2^17 + 2^11 (exact in BF16) */
    st = aa_tensor_alloc(&t[i], 3, shape[i], r.io_fmt);
    for (size_t e = 0; st == AA_OK && e < aa_tensor_numel(&t[i]); e++)
      t[i].data[e] = 133120.0;
  }
  if (st == AA_OK) st = aa_layout_draw(&t[2], 7, 2, 8, c->n_k, c->d, AA_DIST_NORMAL, 1.0, r.io_fmt, &err);
  if (st == AA_OK) st = aa_layout_draw(&t[3], 7, 3, 8, c->n_q, c->d, AA_DIST_NORMAL, 1.0, r.io_fmt, &err);
  aa_problem_init(&pb, c->n_q, c->n_k, c->d, 8, 8);
  pb.causal = c->causal;
  pb.logit_offset = c->offset;
  memset(&res, 0, sizeof res);
  if (st == AA_OK) st = aa_attn_run(&res, &pb, &r, &t[0], &t[1], &t[2], &t[3], &err);
  if (st == AA_OK) {
    const aa_tensor_t *out[4] = {&res.o, &res.dq, &res.dk, &res.dv};
    for (int o = 0; o < 4; o++)
      aa_tensor_count_nonfinite(out[o], &counts[o][0], &counts[o][1]);
  } else {
    printf("%s: %s\n", spec, err.msg);
  }
  aa_attn_result_free(&res);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&t[i]);
  return st == AA_OK ? 0 : -1;
}

static void check_cell(const nan_cell_t *c) {
  static const char *names[4] = {"o", "dq", "dk", "dv"};
  size_t n[4][2];
  if (census(n, c->spec, c) != 0) {
    AA_FAIL("%s %zu/%zu/%zu %s: the run failed", c->spec, c->n_q, c->n_k, c->d, c->causal ? "causal" : "none");
    return;
  }
  for (int o = 0; o < 4; o++) {
    int ok = c->presence ? ((n[o][0] + n[o][1] > 0) == (c->nan[o] + c->inf[o] > 0))
                         : (n[o][0] == c->nan[o] && n[o][1] == c->inf[o]);
    AA_CHECK(ok, "%s %zu/%zu/%zu %s offset %g %s: NaN %zu Inf %zu, the H200 %zu %zu%s", c->spec, c->n_q, c->n_k, c->d,
             c->causal ? "causal" : "none", c->offset, names[o], n[o][0], n[o][1], c->nan[o], c->inf[o],
             c->presence ? " (presence)" : "");
  }
}

/* The census tells the chains apart: efficient-h100 with FA2's exp2 FFMA of S * scale * log2 e (the chain these
   presets had before) overflows in the forward at d = 64, where the H200's efficient backend gives no NaN. */
static void check_sensitive(void) {
  nan_cell_t c = {"efficient-h100:scale_fold=exp,exp_form=exp2-fma", 64, 64, 64, 0, 1, ALLNAN(1), 0};
  size_t n[4][2];
  AA_CHECK(census(n, c.spec, &c) == 0 && n[0][0] + n[0][1] > 0, "%s 64/64/64: no NaN in o (the check is blind)",
           c.spec);
  /* and the masked cells tell cuDNN's masked chain from its unmasked one (scale on the FP32 scores, natural exp in
     both passes, written here on efficient-h100's base): at 64/64/128 offset -200 that chain cancels and leaves dk
     finite, where the H200 has it NaN */
  nan_cell_t m = {"efficient-h100:exp_form=natural,fwd.lse_form=fma", 64, 64, 128, 0, 0, NONE, -200};
  AA_CHECK(census(n, m.spec, &m) == 0 && n[2][0] + n[2][1] == 0,
           "%s 64/64/128 offset -200: dk not finite (the masked cells cannot tell the chains apart)", m.spec);
}

int main(void) {
  for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++)
    check_cell(&cells[i]);
  check_sensitive();
  printf("tnan_presets: %zu cells, %d failures\n", sizeof cells / sizeof cells[0] + 1, aa_test_failures);
  return aa_test_failures ? 1 : 0;
}
