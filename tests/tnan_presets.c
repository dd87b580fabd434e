/* attnacc: the H200 presets' NaN/Inf census on all-constant inputs equals the H200's (README-gpu section 8). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Row 0 of v and of dO in each head, which replace the test's own draw there; NULL: none. */
typedef struct {
  double v0[8][256], dO[8][256];
} given_rows_t;

/* The census of one spec on one cell: counts[o][0] NaN, counts[o][1] Inf; -1 when the run fails. */
static int census_with(size_t counts[4][2], const char *spec, const nan_cell_t *c, const given_rows_t *g) {
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
  for (size_t h = 0; g != NULL && st == AA_OK && h < 8; h++)
    for (size_t e = 0; e < c->d; e++) {
      t[2].data[h * c->n_k * c->d + e] = g->v0[h][e];
      t[3].data[h * c->n_q * c->d + e] = g->dO[h][e];
    }
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

static int census(size_t counts[4][2], const char *spec, const nan_cell_t *c) {
  return census_with(counts, spec, c, NULL);
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

/* d BF16 bit patterns (hex) after the word `name` of a line into x; 0 when the line is not that. */
static int read_row(FILE *f, const char *name, size_t d, double *x) {
  char word[8];
  if (fscanf(f, "%7s", word) != 1 || strcmp(word, name) != 0) return 0;
  for (size_t e = 0; e < d; e++) {
    unsigned bits;
    if (fscanf(f, "%x", &bits) != 1 || bits > 0xffff) return 0;
    uint32_t w = (uint32_t)bits << 16;
    float v;
    memcpy(&v, &w, sizeof v);
    x[e] = v;
  }
  return 1;
}

/* tests/data/h200_causal_rows.txt (fixtures/h200-nan/causal_rows.py): causal cells of cuDNN and the mem-efficient
   backend, where every head's P_00 is Inf and dS_00 is NaN exactly when the FP32 dP_00 and D_0 agree; the H200's
   NaN/Inf split counts those heads. With n_q = 1 every count is compared; with n_q > 1 (the test draws the rows
   below row 0 itself) dq's Inf count, which on the H200 is row 0's alone. The cells were chosen where the preset's
   earlier D and dP (the line's second spec) get the split wrong: the preset must match every one, the earlier spec
   must miss at least one of each preset's cells (the check can fail). Returns the number of cells. */
static size_t check_causal_rows(void) {
  const char *top = getenv("top_srcdir");
  char path[4096], spec[64], old[128], rest[256], last[64] = "";
  size_t nspec = 0, nspec_missed = 0;
  int missed = 0;
  snprintf(path, sizeof path, "%s/tests/data/h200_causal_rows.txt", top != NULL ? top : ".");
  FILE *f = fopen(path, "r");
  static given_rows_t g;
  size_t ncell = 0;
  AA_CHECK(f != NULL, "%s: cannot open", path);
  if (f == NULL) return 0;
  int ch;
  while ((ch = fgetc(f)) == '#')
    if (fgets(rest, sizeof rest, f) == NULL) break; /* comment lines (each under 256 characters) */
  ungetc(ch, f);
  nan_cell_t c = {spec, 0, 0, 0, 1, 0, NONE, 0};
  while (fscanf(f, " cell %63s %127s %zu %zu %zu", spec, old, &c.n_q, &c.n_k, &c.d) == 5) {
    if (strcmp(spec, last) != 0) { /* a new preset's cells */
      nspec++, nspec_missed += missed, missed = 0;
      snprintf(last, sizeof last, "%s", spec);
    }
    int ok = c.n_q >= 1 && c.d <= 256;
    for (int o = 0; o < 4; o++)
      ok = ok && fscanf(f, "%zu %zu", &c.nan[o], &c.inf[o]) == 2;
    ok = ok && fgets(rest, sizeof rest, f) != NULL; /* the source comment */
    for (int h = 0; ok && h < 8; h++)
      ok = read_row(f, "v", c.d, g.v0[h]);
    for (int h = 0; ok && h < 8; h++)
      ok = read_row(f, "do", c.d, g.dO[h]);
    AA_CHECK(ok, "%s: cell %zu is malformed", path, ncell + 1);
    if (!ok) break;
    ncell++;
    size_t n[4][2], m[4][2];
    int run = census_with(n, spec, &c, &g) == 0 && census_with(m, old, &c, &g) == 0;
    AA_CHECK(run, "%s %zu/%zu/%zu causal (H200 rows): the run failed", spec, c.n_q, c.n_k, c.d);
    for (int o = 0; run && c.n_q == 1 && o < 4; o++)
      AA_CHECK(n[o][0] == c.nan[o] && n[o][1] == c.inf[o],
               "%s 1/%zu/%zu causal (H200 rows) output %d: NaN %zu Inf %zu, the H200 %zu %zu", spec, c.n_k, c.d, o,
               n[o][0], n[o][1], c.nan[o], c.inf[o]);
    if (run && c.n_q > 1) /* dq's Inf: row 0's (every other dq element is NaN on the H200) */
      AA_CHECK(c.nan[1] + c.inf[1] == 8 * c.n_q * c.d && n[1][1] == c.inf[1],
               "%s %zu/%zu/%zu causal (H200 row 0) dq: Inf %zu, the H200 %zu (of %zu non-finite)", spec, c.n_q, c.n_k,
               c.d, n[1][1], c.inf[1], c.nan[1] + c.inf[1]);
    missed |= run && (m[1][1] != c.inf[1] || (c.n_q == 1 && m[1][0] != c.nan[1]));
  }
  fclose(f);
  nspec_missed += missed;
  AA_CHECK(ncell >= 17 && nspec >= 3, "%s: %zu cells of %zu presets, expected 17 of 3", path, ncell, nspec);
  AA_CHECK(nspec_missed == nspec, "the earlier D and dP match every H200 split of %zu of %zu presets: blind check",
           nspec - nspec_missed, nspec);
  return ncell;
}

int main(void) {
  for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++)
    check_cell(&cells[i]);
  check_sensitive();
  size_t nrows = check_causal_rows();
  printf("tnan_presets: %zu cells, %d failures\n", sizeof cells / sizeof cells[0] + 1 + nrows, aa_test_failures);
  return aa_test_failures ? 1 : 0;
}
