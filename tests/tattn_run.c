/* attnacc: aa_attn_run's steps (lib/attn/run.c): a failure in any of them returns its status with a message naming
 * the step and leaves the result empty; a later run into the same result works. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <string.h>

#include "attnacc.h"
#include "tests.h"

enum { N = 24, D = 8, H = 2 };

/* Inputs representable in bf16: small multiples of 1/8. */
static void fill(aa_tensor_t *t, size_t heads, unsigned salt) {
  size_t shape[3] = {heads, N, D};
  aa_tensor_alloc(t, 3, shape, AA_FMT_BF16);
  for (size_t i = 0; i < heads * N * D; i++)
    t->data[i] = (double)((int)((i * 7 + salt * 13) % 17) - 8) / 8;
}

static int result_empty(const aa_attn_result_t *res) {
  return res->o.data == NULL && res->lse.data == NULL && res->dq.data == NULL && res->dk.data == NULL &&
         res->dv.data == NULL && res->dsinks.data == NULL && res->recip.data == NULL && res->shift.data == NULL &&
         res->row_ckpt == NULL && res->tile_flagged == NULL && res->fwd_q_tiles == 0;
}

/* Run spec on pb; expect status want and, on failure, a message holding
   `says` and an empty result. */
static void expect(const char *what, const aa_problem_t *pb, const char *spec, const aa_tensor_t *q,
                   const aa_tensor_t *k, const aa_tensor_t *v, const aa_tensor_t *dO, int want, const char *says) {
  aa_recipe_t r;
  aa_error_t err = {{0}};
  aa_attn_result_t res;
  if (aa_recipe_from_spec(&r, spec, &err) != AA_OK) {
    AA_FAIL("%s: recipe %s: %s", what, spec, err.msg);
    return;
  }
  int st = aa_attn_run(&res, pb, &r, q, k, v, dO, &err);
  AA_CHECK(st == want, "%s: aa_attn_run(%s) returned %d (%s), want %d", what, spec, st, err.msg, want);
  if (want != AA_OK) {
    AA_CHECK(strstr(err.msg, says) != NULL, "%s: message '%s' does not say '%s'", what, err.msg, says);
    AA_CHECK(result_empty(&res), "%s: a failed run left outputs in the result", what);
  } else {
    AA_CHECK(res.o.data != NULL && res.dq.data != NULL && (pb->num_sinks == 0 || res.dsinks.data != NULL),
             "%s: outputs missing", what);
  }
  aa_attn_result_free(&res);
}

int main(void) {
  aa_problem_t pb;
  aa_tensor_t q, k, v, dO, missing = {0};
  double slopes[H], sinks[H] = {0.5, -0.25};
  fill(&q, H, 1), fill(&k, H, 2), fill(&v, H, 3), fill(&dO, H, 4);
  aa_problem_init(&pb, N, N, D, H, H);
  pb.causal = 1;

  /* check: the inputs, before anything is allocated */
  expect("missing q", &pb, "fa2", &missing, &k, &v, &dO, AA_EINVAL, "tensor q is missing");
  /* dispatch: tiling = fa2 without its SM count */
  expect("fa2 tiling without SMs", &pb, "fa2:tiling=fa2", &q, &k, &v, &dO, AA_EINVAL, "needs the SM count");

  /* context, then forward: ALiBi slopes and sinks allocated, the outputs
     too, then the split-KV forward refuses problem sinks
     (aa_attn_fwd_tile_split): every allocation is released. */
  aa_problem_alibi_geometric(slopes, H);
  pb.alibi = AA_ALIBI_FLASH;
  pb.alibi_slopes = slopes;
  pb.num_sinks = 1;
  pb.sinks = sinks;
  expect("split-KV with sinks", &pb, "fa2:fwd.splits=2", &q, &k, &v, &dO, AA_EUNSUPPORTED, "failed");
  /* the same problem through steps that succeed */
  expect("sinks and ALiBi", &pb, "fa2", &q, &k, &v, &dO, AA_OK, "");
  pb.alibi = AA_ALIBI_NONE;
  expect("recip backward with sinks", &pb, "recip", &q, &k, &v, &dO, AA_OK, "");
  expect("recipe dropout", &pb, "fa2:dropout_scheme=tile-seeded", &q, &k, &v, &dO, AA_OK, "");

  aa_tensor_free(&q), aa_tensor_free(&k), aa_tensor_free(&v), aa_tensor_free(&dO);
  return aa_test_finish("tattn_run");
}
