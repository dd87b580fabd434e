/* attnacc: problem defaults, validation and the softmax scale. */
#include <math.h>

#include "problem.h"

void aa_problem_init(aa_problem_t *pb, size_t n_q, size_t n_k, size_t d, size_t heads, size_t kv_heads) {
  *pb = (aa_problem_t){0};
  pb->n_q = n_q;
  pb->n_k = n_k;
  pb->d = d;
  pb->heads = heads;
  pb->kv_heads = kv_heads;
  pb->scale_default = 1;
  pb->keep_scale = 1.0;
}

int aa_problem_check(const aa_problem_t *pb, aa_error_t *err) {
  if (pb->n_q == 0 || pb->n_k == 0 || pb->d == 0 || pb->heads == 0 || pb->kv_heads == 0)
    return aa_error_set(err, AA_ESHAPE, "empty problem: n_q=%zu n_k=%zu d=%zu heads=%zu kv_heads=%zu", pb->n_q,
                        pb->n_k, pb->d, pb->heads, pb->kv_heads);
  if (pb->heads % pb->kv_heads != 0)
    return aa_error_set(err, AA_ESHAPE, "GQA needs heads (%zu) to be a multiple of kv_heads (%zu)", pb->heads,
                        pb->kv_heads);
  if (pb->causal && pb->n_q != pb->n_k)
    return aa_error_set(err, AA_ESHAPE, "causal masking needs n_q == n_k (got %zu and %zu)", pb->n_q, pb->n_k);
  if (pb->window != 0 && !pb->causal)
    return aa_error_set(err, AA_EINVAL, "a sliding window is only valid with the causal mask");
  if ((pb->bound_min == NULL) != (pb->bound_max == NULL))
    return aa_error_set(err, AA_EINVAL, "sequence-packing bounds need both bound_min and bound_max");
  if (pb->num_sinks != 0 && pb->sinks == NULL)
    return aa_error_set(err, AA_EINVAL, "num_sinks is %zu but no sink logits were given", pb->num_sinks);
  if (!pb->scale_default && !(isfinite(pb->scale) && pb->scale > 0))
    return aa_error_set(err, AA_EINVAL, "softmax scale must be finite and positive, got %g", pb->scale);
  if (pb->keep != NULL && !(isfinite(pb->keep_scale) && pb->keep_scale > 0))
    return aa_error_set(err, AA_EINVAL, "dropout keep_scale must be finite and positive, got %g", pb->keep_scale);
  return AA_OK;
}

double aa_problem_scale(const aa_problem_t *pb) {
  return pb->scale_default ? 1.0 / sqrt((double)pb->d) : pb->scale;
}
