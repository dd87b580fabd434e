/* attnacc: flex-eager-h100's LSE and exp overflow of one query row equal FlexAttention's on the H200 (8.11). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "tests.h"

/* tests/data/h200_flex_decode_lse.txt (fixtures/h200-nan/flex_decode_lse.py, from the H200 run of probe_cells.py on
   heldout9's three decode cells at sigma 20000): per head, the LSE FlexAttention returned and whether its dv row of
   the row's top key was non-finite, with the query row, that key's row, its bias and the dO row. Hardware readings,
   independent of the code under test. The row's other keys lie more than 1e6 below the top one, so their exp
   vanishes and the LSE is the top key's alone: the problem here keeps the top key as key 0 and makes the other
   NK - 1 keys zero (score 0, 1e9 below), which keeps the GEMV's shape (NK keys, d) and so its order. The scores are
   near 1e9, one FP32 ulp is 64 or 128, and the exp argument of the top key is 0 or an ulp or two: one bit of the
   score's sum decides the LSE and whether exp overflows, so the test can fail. */
#define PRESET "flex-eager-h100"
/* the scores as a column-order FFMA chain (the GEMM of n_q > 1), what the preset did before the readings: it must
   miss some reading, or they could not tell the two orders apart */
#define EARLIER "flex-eager-h100:fwd.qk_gemv=none,bwd.qk_gemv=none"
/* the GEMV stands in for an FP32 GEMM only: with the scores' model made exact (explain's site), the key must change
   nothing, or explain's exact site and floor would keep FP32 sums */
#define EXACT_QK "flex-eager-h100:fwd.acc_qk=fp64-seq"
#define EXACT_QK_NO_GEMV EXACT_QK ",fwd.qk_gemv=none"
#define MAXD 256

typedef struct {
  int seed, b, h, dv_bad;
  size_t d, nk, top;
  double bias;
  uint32_t lse_bits;
  double q[MAXD], k[MAXD], dO[MAXD];
} reading_t;

static float f32_of(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* d BF16 values in hex after the word tag at *s; 0 when the line has fewer. */
static int read_bf16(char **s, const char *tag, double *dst, size_t d) {
  char *p = strstr(*s, tag);
  if (p == NULL) return 0;
  p += strlen(tag);
  for (size_t c = 0; c < d; c++) {
    char *end;
    unsigned long bits = strtoul(p, &end, 16);
    if (end == p || bits > 0xffff) return 0;
    dst[c] = f32_of((uint32_t)bits << 16);
    p = end;
  }
  *s = p;
  return 1;
}

static int parse(char *line, reading_t *x) {
  int used = 0;
  if (sscanf(line, "%d %d %d %zu %zu %zu %lf %x %d%n", &x->seed, &x->b, &x->h, &x->d, &x->nk, &x->top, &x->bias,
             &x->lse_bits, &x->dv_bad, &used) != 9 ||
      x->d == 0 || x->d > MAXD || x->nk < 2)
    return 0;
  char *s = line + used;
  return read_bf16(&s, " q ", x->q, x->d) && read_bf16(&s, " k ", x->k, x->d) && read_bf16(&s, " do ", x->dO, x->d);
}

/* The reading's row as a problem: q, the keys (the top one first, the others zero), V (zero) and dO, in BF16 (every
   value is a BF16 number), and the bias of the top key (0 elsewhere). */
typedef struct {
  aa_tensor_t t[4];
  double *bias;
  aa_problem_t pb;
} row_t;

static void row_free(row_t *w) {
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&w->t[i]);
  free(w->bias);
}

static int row_make(row_t *w, const reading_t *x) {
  size_t d = x->d, nk = x->nk;
  size_t shape[4][3] = {{1, 1, d}, {1, nk, d}, {1, nk, d}, {1, 1, d}};
  memset(w, 0, sizeof *w);
  int st = AA_OK;
  for (int i = 0; i < 4 && st == AA_OK; i++)
    st = aa_tensor_alloc(&w->t[i], 3, shape[i], AA_FMT_BF16); /* zeroed: the other keys and V */
  w->bias = calloc(nk, sizeof *w->bias);
  if (st != AA_OK || w->bias == NULL) {
    row_free(w);
    return -1;
  }
  memcpy(w->t[0].data, x->q, d * sizeof *x->q);
  memcpy(w->t[1].data, x->k, d * sizeof *x->k);
  memcpy(w->t[3].data, x->dO, d * sizeof *x->dO);
  w->bias[0] = x->bias;
  aa_problem_init(&w->pb, 1, nk, d, 1, 1);
  w->pb.bias = w->bias;
  w->pb.mask_hstride = nk;
  return 0;
}

/* The recipe's run on the row: *lse its LSE, *dv_bad whether dv row 0 (the top key) is non-finite; -1 on failure. */
static int run_row(const char *spec, row_t *w, double *lse, int *dv_bad) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  aa_attn_result_t res;
  memset(&res, 0, sizeof res);
  int st = aa_recipe_from_spec(&r, spec, &err);
  if (st == AA_OK) st = aa_attn_run(&res, &w->pb, &r, &w->t[0], &w->t[1], &w->t[2], &w->t[3], &err);
  if (st == AA_OK) {
    *lse = res.lse.data[0];
    *dv_bad = 0;
    for (size_t c = 0; c < w->pb.d; c++)
      *dv_bad |= !isfinite(res.dv.data[c]);
  } else {
    printf("%s: %s\n", spec, err.msg);
  }
  aa_attn_result_free(&res);
  return st == AA_OK ? 0 : -1;
}

int main(void) {
  static char line[16384];
  FILE *f = aa_test_open_data("h200_flex_decode_lse.txt");
  if (f == NULL) return 1;
  size_t n = 0, overflow = 0, earlier_missed = 0;
  static reading_t x;
  while (fgets(line, sizeof line, f) != NULL) {
    if (line[0] == '#') continue;
    if (!parse(line, &x)) {
      AA_FAIL("h200_flex_decode_lse.txt: bad line %.60s", line);
      break;
    }
    double lse, lse0;
    int bad, bad0;
    row_t w;
    if (row_make(&w, &x) != 0) {
      AA_FAIL("seed %d b %d h %d: out of memory", x.seed, x.b, x.h);
      continue;
    }
    if (run_row(PRESET, &w, &lse, &bad) != 0) {
      AA_FAIL("seed %d b %d h %d: the run failed", x.seed, x.b, x.h);
      row_free(&w);
      continue;
    }
    double want = f32_of(x.lse_bits);
    AA_CHECK(lse == want, "seed %d b %d h %d (d %zu): LSE %.10g, the H200's %.10g", x.seed, x.b, x.h, x.d, lse, want);
    AA_CHECK(bad == x.dv_bad, "seed %d b %d h %d (d %zu): dv of the top key %s, on the H200 %s", x.seed, x.b, x.h,
             x.d, bad ? "non-finite" : "finite", x.dv_bad ? "non-finite" : "finite");
    if (run_row(EARLIER, &w, &lse0, &bad0) != 0)
      AA_FAIL("seed %d b %d h %d: the run of %s failed", x.seed, x.b, x.h, EARLIER);
    earlier_missed += lse0 != want;
    double lse_x, lse_xn;
    if (run_row(EXACT_QK, &w, &lse_x, &bad0) != 0 || run_row(EXACT_QK_NO_GEMV, &w, &lse_xn, &bad0) != 0)
      AA_FAIL("seed %d b %d h %d: the exact-scores runs failed", x.seed, x.b, x.h);
    else
      AA_CHECK(lse_x == lse_xn, "seed %d b %d h %d: exact scores with the GEMV key give LSE %.10g, without %.10g",
               x.seed, x.b, x.h, lse_x, lse_xn);
    row_free(&w);
    n++;
    overflow += x.dv_bad != 0;
  }
  fclose(f);
  AA_CHECK(n >= 24 && overflow > 0 && overflow < n, "%zu readings (%zu overflowing): too few to tell", n, overflow);
  AA_CHECK(earlier_missed > 0, "column-order scores (%s) give every reading: blind", EARLIER);
  printf("tflex_decode_lse: %zu readings of FlexAttention's LSE (%zu with exp overflow; column order misses %zu), %d "
         "failures\n",
         n, overflow, earlier_missed, aa_test_failures);
  return aa_test_failures ? 1 : 0;
}
