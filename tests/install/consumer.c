/* attnacc: a program of a library user, built against an installed attnacc with pkg-config (CI's install leg). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <attnacc/attnacc.h>
#include <math.h>
#include <stdio.h>

/* Closed form: with every key zero the softmax weights of a row are uniform,
   so each output row is the mean of the value rows (here 1.5 and -1.5). */
int main(void) {
  enum { N = 4, D = 2 };
  size_t shape[3] = {1, N, D};
  aa_tensor_t q, k, v, dO;
  aa_error_t err;
  if (aa_tensor_alloc(&q, 3, shape, AA_FMT_BF16) || aa_tensor_alloc(&k, 3, shape, AA_FMT_BF16) ||
      aa_tensor_alloc(&v, 3, shape, AA_FMT_BF16) || aa_tensor_alloc(&dO, 3, shape, AA_FMT_BF16))
    return 1;
  for (size_t j = 0; j < N; j++) {
    q.data[j * D] = 1.0;
    v.data[j * D] = (double)j;
    v.data[j * D + 1] = -(double)j;
    dO.data[j * D] = 1.0;
  }
  aa_problem_t pb;
  aa_problem_init(&pb, N, N, D, 1, 1);
  aa_oracle_opts_t opts;
  aa_oracle_opts_init(&opts);
  aa_oracle_result_t res;
  if (aa_oracle_run(&res, &pb, &q, &k, &v, &dO, &opts, &err) != AA_OK) {
    fprintf(stderr, "consumer: %s\n", err.msg);
    return 1;
  }
  aa_pcg64_t rng; /* the 128-bit state type must compile under -std=c11 -pedantic */
  aa_pcg64_seed(&rng, 1, 2);
  int ok = 1;
  for (size_t i = 0; i < N; i++)
    ok &= fabs(res.o.val.data[i * D] - 1.5) <= 1.5 * res.o.relerr_bound &&
          fabs(res.o.val.data[i * D + 1] + 1.5) <= 1.5 * res.o.relerr_bound;
  printf("consumer: attnacc %s (%s): O rows %s the closed form 1.5, -1.5; pcg64 %llu\n", AA_VERSION, aa_git_hash(),
         ok ? "match" : "DO NOT match", (unsigned long long)aa_pcg64_next(&rng));
  aa_oracle_result_free(&res);
  aa_tensor_free(&q);
  aa_tensor_free(&k);
  aa_tensor_free(&v);
  aa_tensor_free(&dO);
  return ok ? 0 : 1;
}
