/* attnacc: aa_attn_result_t.first (lib/attn/first.c): where the first NaN or Inf of a run is created, against
 * cases whose site follows from the definitions, and the same record at 1 and 2 OpenMP threads. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attnacc.h"
#include "tests.h"

enum { D = 8, H = 2 };

/* Inputs representable in bf16: small multiples of 1/8. */
static void fill(aa_tensor_t *t, size_t n, unsigned salt) {
  size_t shape[3] = {H, n, D};
  aa_tensor_alloc(t, 3, shape, AA_FMT_BF16);
  for (size_t i = 0; i < H * n * D; i++)
    t->data[i] = (double)((int)((i * 7 + salt * 13) % 17) - 8) / 8;
}

static int run(aa_attn_result_t *res, const aa_problem_t *pb, const char *spec, size_t n) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  aa_tensor_t q, k, v, dO;
  fill(&q, n, 1), fill(&k, n, 2), fill(&v, n, 3), fill(&dO, n, 4);
  int st = aa_recipe_from_spec(&r, spec, &err);
  if (st == AA_OK) st = aa_attn_run(res, pb, &r, &q, &k, &v, &dO, &err);
  AA_CHECK(st == AA_OK, "%s: %s", spec, err.msg);
  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v), aa_tensor_free(&dO);
  return st;
}

/* cuDNN's phantom slots: n_k = 192 (mod 128 = 64), 32 padded keys, every score shifted by -200: each row's LSE
   is below -88.72, so the first slot past n_k (j = 192) of row (0, 0) overflows exp(0 - LSE) (recipe.h). */
static void phantom(int threads) {
  aa_problem_t pb;
  aa_attn_result_t res;
  aa_problem_init(&pb, 192, 192, D, H, H);
  pb.key_pad = 32, pb.logit_offset = -200;
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  if (run(&res, &pb, "cudnn-h100", 192) != AA_OK) return;
  const aa_attn_first_t *f = &res.first;
  AA_CHECK(f->found && f->site == AA_FIRST_EXP && f->phantom && f->h == 0 && f->i == 0 && f->j == 192,
           "phantom (%d threads): found %d site %d phantom %d at (%zu, %zu, %zu)", threads, f->found, f->site,
           f->phantom, f->h, f->i, f->j);
  AA_CHECK(f->a == 0 && f->b == res.lse.data[0] && f->b < -88.72 && f->c == -f->b && isinf(f->value),
           "phantom operands: s %g LSE %g (row LSE %g) argument %g value %g", f->a, f->b, res.lse.data[0], f->c,
           f->value);
  aa_attn_result_free(&res);
}

int main(void) {
  aa_problem_t pb;
  aa_attn_result_t res;
  uint8_t mask[16 * 16];
  /* finite inputs of magnitude <= 1 and no mask: nothing is created */
  aa_problem_init(&pb, 16, 16, D, H, H);
  if (run(&res, &pb, "fa2", 16) == AA_OK) {
    AA_CHECK(!res.first.found, "finite run recorded site %d", res.first.site);
    aa_attn_result_free(&res);
  }
  /* row 3 fully masked with mask.empty_o = nan: the empty row of head 0 is the first site */
  memset(mask, 1, sizeof mask);
  memset(mask + 3 * 16, 0, 16);
  pb.mask = mask, pb.mask_hstride = 0;
  if (run(&res, &pb, "fa2:mask.empty_o=nan", 16) == AA_OK) {
    const aa_attn_first_t *f = &res.first;
    AA_CHECK(f->found && f->site == AA_FIRST_EMPTY && f->h == 0 && f->i == 3, "empty row: site %d at (%zu, %zu)",
             f->site, f->h, f->i);
    aa_attn_result_free(&res);
  }
  phantom(1);
  phantom(2);
  return aa_test_finish("tattn_first");
}
