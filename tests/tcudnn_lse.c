/* attnacc: cudnn-h100's LSE and backward overflow equal cuDNN's own on the H200, masked and unmasked (8.10). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "layout.h"
#include "tests.h"

/* tests/data/h200_cudnn_lse.txt (fixtures/h200-nan/cudnn_bias.py, from the H200 run of probe_cudnn_bias.py): rows
   of constant scores, q = k = C against 640 keys at head dim D, with the additive mask value B on every key (or no
   mask: graph u), and what cuDNN 9.19 stored and did: the LSE's FP32 bits and whether the backward's dq overflowed
   (+: NaN or Inf), vanished (-: all 0) or stayed finite (0). Hardware readings, independent of the code under test.
   The preset must give every LSE bit for bit and every outcome; its decode chain is taken with one query row, its
   prefill chain with two (cuDNN's prefill read with 64 identical rows: every row alike). The scores are ~1e8 to
   ~3e11, so one ulp of the FP32 exp argument decides the outcome, and the test can fail. */
#define NK 640
/* the unmasked prefill's LSE as README-gpu 8.7 inferred it (a rounded product, then the sum), which the readings
   replaced: it must miss some reading of that graph, or the readings could not tell the two apart */
#define EARLIER "cudnn-h100:fwd.lse_form=log2-ln2"

typedef struct {
  char graph[8];
  double c, b;
  size_t d;
  uint32_t lse_bits;
  char outcome;
} reading_t;

static float f32_of(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* The preset's run on the reading's problem: *lse its row-0 LSE, *outcome as the file says it; -1 on failure. */
static int run_reading(const char *spec, const reading_t *x, double *lse, char *outcome) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  int masked = x->graph[0] == 'm';
  size_t n_q = strcmp(x->graph + 1, "1") == 0 ? 1 : 2;
  aa_tensor_t t[4] = {{0}};
  size_t shape[2][3] = {{1, n_q, x->d}, {1, NK, x->d}};
  int st = aa_recipe_from_spec(&r, spec, &err);
  for (int i = 0; i < 2 && st == AA_OK; i++) {
    st = aa_tensor_alloc(&t[i], 3, shape[i], r.io_fmt);
    for (size_t e = 0; st == AA_OK && e < aa_tensor_numel(&t[i]); e++)
      t[i].data[e] = x->c;
  }
  if (st == AA_OK) st = aa_layout_draw(&t[2], 11, 2, 1, NK, x->d, AA_DIST_NORMAL, 1.0, r.io_fmt, &err);
  if (st == AA_OK) st = aa_layout_draw(&t[3], 11, 3, 1, n_q, x->d, AA_DIST_NORMAL, 1.0, r.io_fmt, &err);
  double *bias = masked ? malloc(n_q * NK * sizeof *bias) : NULL;
  for (size_t e = 0; bias != NULL && e < n_q * NK; e++)
    bias[e] = x->b;
  aa_problem_t pb;
  aa_problem_init(&pb, n_q, NK, x->d, 1, 1);
  pb.bias = bias;
  pb.mask_hstride = n_q * NK;
  aa_attn_result_t res;
  memset(&res, 0, sizeof res);
  if (st == AA_OK && masked && bias == NULL) st = AA_ENOMEM;
  if (st == AA_OK) st = aa_attn_run(&res, &pb, &r, &t[0], &t[1], &t[2], &t[3], &err);
  if (st == AA_OK) {
    size_t nan, inf, zero = 0, n = aa_tensor_numel(&res.dq);
    aa_tensor_count_nonfinite(&res.dq, &nan, &inf);
    for (size_t e = 0; e < n; e++)
      zero += res.dq.data[e] == 0;
    *lse = res.lse.data[0];
    *outcome = nan + inf ? '+' : zero == n ? '-' : '0';
  } else {
    printf("%s %g d %zu b %g: %s\n", x->graph, x->c, x->d, x->b, err.msg);
  }
  aa_attn_result_free(&res);
  free(bias);
  for (int i = 0; i < 4; i++)
    aa_tensor_free(&t[i]);
  return st == AA_OK ? 0 : -1;
}

int main(void) {
  char line[256];
  FILE *f = aa_test_open_data("h200_cudnn_lse.txt");
  if (f == NULL) return 1;
  size_t n = 0, overflow = 0, finite = 0, earlier_missed = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (line[0] == '#') continue;
    reading_t x;
    if (sscanf(line, "%7s %lf %zu %lf %x %c", x.graph, &x.c, &x.d, &x.b, &x.lse_bits, &x.outcome) != 6) {
      AA_FAIL("h200_cudnn_lse.txt: bad line %s", line);
      break;
    }
    double lse;
    char got;
    if (run_reading("cudnn-h100", &x, &lse, &got) != 0) {
      AA_FAIL("%s %g d %zu b %g: the run failed", x.graph, x.c, x.d, x.b);
      continue;
    }
    double want = f32_of(x.lse_bits);
    AA_CHECK(lse == want, "%s c %g d %zu b %g: LSE %.9g, cuDNN's %.9g", x.graph, x.c, x.d, x.b, lse, want);
    AA_CHECK(got == x.outcome, "%s c %g d %zu b %g: dq outcome %c, cuDNN's %c", x.graph, x.c, x.d, x.b, got,
             x.outcome);
    n++;
    double lse0;
    char got0;
    if (strcmp(x.graph, "u64") == 0 && run_reading(EARLIER, &x, &lse0, &got0) == 0)
      earlier_missed += lse0 != want || got0 != x.outcome;
    overflow += x.outcome == '+';
    finite += x.outcome == '0';
  }
  fclose(f);
  AA_CHECK(n >= 500 && overflow > 50 && finite > 50, "%zu readings (%zu overflow, %zu finite): too few to tell", n,
           overflow, finite);
  AA_CHECK(earlier_missed > 0, "the chains inferred before the readings (%s) give every reading: blind", EARLIER);
  printf(
      "tcudnn_lse: %zu readings of cuDNN's LSE and dq (%zu overflowing; the earlier chains miss %zu), %d failures\n",
      n, overflow, earlier_missed, aa_test_failures);
  return aa_test_failures ? 1 : 0;
}
