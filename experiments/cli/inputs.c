/* attnacc: the inputs of one problem: the seeded draw, .npy folders read and written, shapes checked with messages
 * naming the files. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* ---- inputs ---- */

void cli_inputs_free(cli_inputs_t *in) {
  aa_tensor_free(&in->q);
  aa_tensor_free(&in->k);
  aa_tensor_free(&in->v);
  aa_tensor_free(&in->dO);
  aa_tensor_free(&in->sinks);
}

/* The seeded draw lives in the library (lib/layout.h) so C and Python callers get the same inputs. */
static int draw_tensor(aa_tensor_t *t, uint64_t seed, uint64_t id, size_t heads, size_t rows, size_t cols,
                       int uniform, double sigma, aa_fmt_t fmt, aa_error_t *err) {
  return aa_layout_draw(t, seed, id, heads, rows, cols, uniform, sigma, fmt, err);
}

int cli_inputs_draw(cli_inputs_t *in, uint64_t seed, int uniform, double sigma, size_t n, size_t d, size_t heads,
                    size_t kv_heads, size_t num_sinks, aa_fmt_t io_fmt, aa_error_t *err) {
  return cli_inputs_draw_qk(in, seed, uniform, sigma, n, n, d, heads, kv_heads, num_sinks, io_fmt, err);
}

int cli_inputs_draw_qk(cli_inputs_t *in, uint64_t seed, int uniform, double sigma, size_t n_q, size_t n_k, size_t d,
                       size_t heads, size_t kv_heads, size_t num_sinks, aa_fmt_t io_fmt, aa_error_t *err) {
  int rc;
  *in = (cli_inputs_t){0};
  if ((rc = draw_tensor(&in->q, seed, 0, heads, n_q, d, uniform, sigma, io_fmt, err)) ||
      (rc = draw_tensor(&in->k, seed, 1, kv_heads, n_k, d, uniform, sigma, io_fmt, err)) ||
      (rc = draw_tensor(&in->v, seed, 2, kv_heads, n_k, d, uniform, sigma, io_fmt, err)) ||
      (rc = draw_tensor(&in->dO, seed, 3, heads, n_q, d, uniform, sigma, io_fmt, err)) ||
      (num_sinks > 0 && (rc = draw_tensor(&in->sinks, seed, 4, heads, 1, num_sinks, 0, 1.0, io_fmt, err)))) {
    cli_inputs_free(in);
    return rc;
  }
  if (num_sinks > 0) { /* [heads, 1, K] -> [heads, K] */
    in->sinks.ndim = 2;
    in->sinks.shape[1] = num_sinks;
    in->sinks.shape[2] = 1;
  }
  return AA_OK;
}

void cli_problem_features(char *buf, size_t cap, const aa_problem_t *pb) {
  size_t u = 0;
  buf[0] = '\0';
#define ADD(...)                                                                                                     \
  do {                                                                                                               \
    if (u < cap) u += (size_t)snprintf(buf + u, cap - u, __VA_ARGS__);                                               \
  } while (0)
  if (pb->align == AA_ALIGN_BOTTOM_RIGHT) ADD(" causal_align=bottom-right");
  if (pb->local) {
    long l = pb->window_left == AA_WINDOW_INF ? -1 : (long)pb->window_left;
    long r = pb->window_right == AA_WINDOW_INF ? -1 : (long)pb->window_right;
    ADD(" window_size=%ld,%ld", l, r);
  }
  if (pb->softcap > 0) ADD(" softcap=%.17g", pb->softcap);
  if (pb->mask != NULL || pb->bias != NULL) ADD(" attn_mask=%s", pb->mask_hstride ? "per-head" : "broadcast");
  if (pb->key_pad > 0) ADD(" key_len=%zu", pb->n_k - pb->key_pad);
  if (pb->logit_offset != 0) ADD(" logit_offset=%.17g", pb->logit_offset);
  if (pb->alibi != AA_ALIBI_NONE) {
    ADD(" alibi=%s slopes=", pb->alibi == AA_ALIBI_FLASH ? "flash" : "torch");
    for (size_t h = 0; h < pb->heads; h++)
      ADD("%s%.9g", h ? "," : "", pb->alibi_slopes[h]);
  }
#undef ADD
}

void cli_shape_str(char *buf, size_t cap, const aa_tensor_t *t) {
  if (t->ndim == 1)
    snprintf(buf, cap, "[%zu]", t->shape[0]);
  else if (t->ndim == 2)
    snprintf(buf, cap, "[%zu, %zu]", t->shape[0], t->shape[1]);
  else
    snprintf(buf, cap, "[%zu, %zu, %zu]", t->shape[0], t->shape[1], t->shape[2]);
}

/* [N, d] becomes [1, N, d]; 1-D is refused. */
int cli_as_3d(aa_tensor_t *t, const char *file, aa_error_t *err) {
  char s[96];
  if (t->ndim == 3) return AA_OK;
  if (t->ndim == 2) {
    t->shape[2] = t->shape[1];
    t->shape[1] = t->shape[0];
    t->shape[0] = 1;
    t->ndim = 3;
    return AA_OK;
  }
  cli_shape_str(s, sizeof s, t);
  return aa_error_set(err, AA_ESHAPE, "%s: shape %s is not [N, d] or [H, N, d]", file, s);
}

static int load_one(aa_tensor_t *t, const char *dir, const char *file, aa_error_t *err) {
  size_t len = strlen(dir) + strlen(file) + 2;
  char *p = malloc(len);
  int rc;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  snprintf(p, len, "%s/%s", dir, file);
  rc = aa_npy_read(t, p, err);
  free(p);
  return rc;
}

int cli_inputs_load(cli_inputs_t *in, const char *dir, aa_error_t *err) {
  char a[96], b[96];
  int rc;
  struct stat st;
  *in = (cli_inputs_t){0};
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return aa_error_set(err, AA_EIO, "%s: not a readable folder", dir);
  if ((rc = load_one(&in->q, dir, "q.npy", err)) || (rc = cli_as_3d(&in->q, "q.npy", err))) goto fail;
  if ((rc = load_one(&in->k, dir, "k.npy", err)) || (rc = cli_as_3d(&in->k, "k.npy", err))) goto fail;
  if ((rc = load_one(&in->v, dir, "v.npy", err)) || (rc = cli_as_3d(&in->v, "v.npy", err))) goto fail;
  if ((rc = load_one(&in->dO, dir, "do.npy", err)) || (rc = cli_as_3d(&in->dO, "do.npy", err))) goto fail;
  cli_shape_str(a, sizeof a, &in->q);
  if (in->q.shape[2] == 0 || in->q.shape[1] == 0 || in->q.shape[0] == 0) {
    rc = aa_error_set(err, AA_ESHAPE, "q.npy: shape %s is empty", a);
    goto fail;
  }
  cli_shape_str(b, sizeof b, &in->k);
  if (in->k.shape[2] != in->q.shape[2]) {
    rc = aa_error_set(err, AA_ESHAPE, "k.npy: shape %s does not match q.npy's d = %zu", b, in->q.shape[2]);
    goto fail;
  }
  if (in->k.shape[1] == 0 || in->k.shape[0] == 0) {
    rc = aa_error_set(err, AA_ESHAPE, "k.npy: shape %s is empty", b);
    goto fail;
  }
  if (in->q.shape[0] % in->k.shape[0] != 0) {
    rc = aa_error_set(err, AA_ESHAPE, "k.npy: %zu kv heads do not divide q.npy's %zu heads", in->k.shape[0],
                      in->q.shape[0]);
    goto fail;
  }
  if (memcmp(in->v.shape, in->k.shape, sizeof in->k.shape) != 0) {
    cli_shape_str(a, sizeof a, &in->v);
    rc = aa_error_set(err, AA_ESHAPE, "v.npy: shape %s does not match k.npy's %s", a, b);
    goto fail;
  }
  if (memcmp(in->dO.shape, in->q.shape, sizeof in->q.shape) != 0) {
    cli_shape_str(b, sizeof b, &in->dO);
    rc = aa_error_set(err, AA_ESHAPE, "do.npy: shape %s does not match q.npy's %s", b, a);
    goto fail;
  }
  {
    size_t len = strlen(dir) + 16;
    char *p = malloc(len);
    if (p == NULL) {
      rc = aa_error_set(err, AA_ENOMEM, "out of memory");
      goto fail;
    }
    snprintf(p, len, "%s/sinks.npy", dir);
    if (access(p, F_OK) == 0) {
      rc = aa_npy_read(&in->sinks, p, err);
      free(p);
      if (rc) goto fail;
      cli_shape_str(b, sizeof b, &in->sinks);
      if (in->sinks.ndim == 1 && in->q.shape[0] == 1) {
        in->sinks.ndim = 2;
        in->sinks.shape[1] = in->sinks.shape[0];
        in->sinks.shape[0] = 1;
      }
      if (in->sinks.ndim != 2 || in->sinks.shape[0] != in->q.shape[0] || in->sinks.shape[1] == 0) {
        rc =
            aa_error_set(err, AA_ESHAPE, "sinks.npy: shape %s is not [H, K] with q.npy's H = %zu", b, in->q.shape[0]);
        goto fail;
      }
    } else {
      free(p);
    }
  }
  return AA_OK;
fail:
  cli_inputs_free(in);
  return rc;
}

int cli_inputs_check_finite(const cli_inputs_t *in, aa_error_t *err) {
  const aa_tensor_t *ts[5] = {&in->q, &in->k, &in->v, &in->dO, &in->sinks};
  const char *names[5] = {"q", "k", "v", "do", "sinks"};
  for (int i = 0; i < 5; i++) {
    size_t nn, ni;
    if (ts[i]->data == NULL) continue;
    aa_tensor_count_nonfinite(ts[i], &nn, &ni);
    if (nn || ni)
      return aa_error_set(err, AA_ENAN, "%s holds %zu NaN and %zu Inf values (inputs must be finite)", names[i], nn,
                          ni);
  }
  return AA_OK;
}

/* Stage DIR/NAME.npy of each tensor with data. */
static int stage_set(aa_fileset_t *stg, const char *dir, const char *const *names, const aa_tensor_t *const *ts,
                     const aa_fmt_t *fmts, int n, aa_error_t *err) {
  int rc = aa_fileset_mkdir_p(stg, dir, err);
  for (int i = 0; i < n && rc == AA_OK; i++) {
    char p[4096];
    if (ts[i]->data == NULL || aa_tensor_numel(ts[i]) == 0) continue;
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, names[i]) >= sizeof p)
      return aa_error_set(err, AA_EINVAL, "%s: folder name too long", dir);
    rc = aa_npy_write_set(stg, p, ts[i], fmts[i], err);
  }
  return rc;
}

int cli_stage_inputs(aa_fileset_t *stg, const cli_inputs_t *in, const char *dir, aa_fmt_t fmt, aa_error_t *err) {
  const char *names[5] = {"q.npy", "k.npy", "v.npy", "do.npy", "sinks.npy"};
  const aa_tensor_t *ts[5] = {&in->q, &in->k, &in->v, &in->dO, &in->sinks};
  const aa_fmt_t fmts[5] = {fmt, fmt, fmt, fmt, fmt};
  return stage_set(stg, dir, names, ts, fmts, 5, err);
}

int cli_stage_outputs(aa_fileset_t *stg, const aa_attn_result_t *res, const char *dir, aa_error_t *err) {
  const char *names[6] = {"o.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy", "dsinks.npy"};
  const aa_tensor_t *ts[6] = {&res->o, &res->lse, &res->dq, &res->dk, &res->dv, &res->dsinks};
  aa_fmt_t fmts[6];
  for (int i = 0; i < 6; i++)
    fmts[i] = cli_npy_fmt(ts[i]->fmt);
  return stage_set(stg, dir, names, ts, fmts, 6, err);
}

int cli_stage_oracle(aa_fileset_t *stg, const aa_oracle_result_t *r, const char *dir, aa_error_t *err) {
  const char *names[6] = {"o.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy", "dsinks.npy"};
  const aa_tensor_t *ts[6] = {&r->o.val, &r->lse.val, &r->dq.val, &r->dk.val, &r->dv.val, &r->dsinks.val};
  const aa_fmt_t fmts[6] = {AA_FMT_FP64, AA_FMT_FP64, AA_FMT_FP64, AA_FMT_FP64, AA_FMT_FP64, AA_FMT_FP64};
  return stage_set(stg, dir, names, ts, fmts, 6, err);
}

aa_fmt_t cli_npy_fmt(aa_fmt_t f) {
  return f == AA_FMT_BF16 || f == AA_FMT_FP16 || f == AA_FMT_FP32 || f == AA_FMT_FP64 ? f : AA_FMT_FP32;
}
