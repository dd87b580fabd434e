/* attnacc: a kernel's inputs and outputs as score and closest read them: folders of NAME.npy, .npz archives,
 * .safetensors files; any layout (lib/layout.h), folded into [B*H, N, d]. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/features.h"
#include "cli/sources.h"

/* Each step returns 0, or 2 after a message naming the problem. */
static int src_fail(cli_sources_t *S, const char *prefix) {
  if (prefix != NULL)
    cli_error(S->cmd, "%s: %s", prefix, S->err.msg);
  else
    cli_error(S->cmd, "%s", S->err.msg);
  return 2;
}

static int src_kind(cli_src_kind_t *k, const char *path, const char *opt, aa_error_t *err) {
  struct stat st;
  size_t n = strlen(path);
  if (stat(path, &st) != 0) return aa_error_set(err, AA_EIO, "--%s %s: no such file or folder", opt, path);
  if (S_ISDIR(st.st_mode)) {
    *k = CLI_SRC_DIR;
    return AA_OK;
  }
  if (n >= 4 && strcmp(path + n - 4, ".npz") == 0) {
    *k = CLI_SRC_NPZ;
    return AA_OK;
  }
  if (n >= 12 && strcmp(path + n - 12, ".safetensors") == 0) {
    *k = CLI_SRC_ST;
    return AA_OK;
  }
  return aa_error_set(err, AA_EFORMAT, "--%s %s: not a folder, an .npz or a .safetensors file", opt, path);
}

/* One named array of a source; *present = 0 when optional and absent. label gets its name for messages. */
static int load_arr(aa_ndarray_t *a, char *label, size_t cap, const char *src, cli_src_kind_t kind, const char *name,
                    int optional, unsigned flags, int *present, aa_error_t *err) {
  int rc;
  *present = 0;
  *a = (aa_ndarray_t){0};
  if (kind == CLI_SRC_DIR) {
    size_t len = strlen(src) + strlen(name) + 6;
    char *p = malloc(len);
    if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
    snprintf(p, len, "%s/%s.npy", src, name);
    snprintf(label, cap, "%s.npy", name);
    if (optional && access(p, F_OK) != 0) {
      free(p);
      return AA_OK;
    }
    rc = aa_npy_read_nd(a, p, flags, err);
    free(p);
  } else {
    snprintf(label, cap, "%s[%s]", src, name);
    rc = kind == CLI_SRC_NPZ ? aa_npz_read(a, src, name, flags, err) : aa_safetensors_read(a, src, name, flags, err);
    if (rc == AA_ENOTFOUND && optional) return AA_OK;
  }
  if (rc == AA_OK) *present = 1;
  return rc;
}

static void nd_str(char *buf, size_t cap, const aa_ndarray_t *a) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < a->ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%zu", i ? ", " : "", a->shape[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

static int same_nd(const aa_ndarray_t *a, const aa_ndarray_t *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

/* [N, d] -> [1, N, d], so that one-head arrays mix with [H, N, d] ones as before layouts existed. */
static void promote_2d(aa_ndarray_t *a) {
  if (a->data == NULL || a->ndim != 2) return;
  a->shape[2] = a->shape[1];
  a->shape[1] = a->shape[0];
  a->shape[0] = 1;
  a->ndim = 3;
}

static int any_3d(const aa_ndarray_t *a, int n) {
  for (int i = 0; i < n; i++)
    if (a[i].data != NULL && a[i].ndim == 3) return 1;
  return 0;
}

static int resolve_layout(cli_sources_t *S) {
  char sa[96], sb2[96];
  const aa_ndarray_t *q = &S->raw[0], *k = &S->raw[1];
  if (q->ndim != k->ndim) {
    nd_str(sa, sizeof sa, q);
    nd_str(sb2, sizeof sb2, k);
    cli_error(S->cmd, "%s: shape %s has %d axes but %s's %s has %d", S->label[1], sb2, k->ndim, S->label[0], sa,
              q->ndim);
    return 2;
  }
  if (aa_layout_resolve(&S->layout, S->layout, q->ndim, q->shape, k->shape, &S->err) != AA_OK)
    return src_fail(S, NULL);
  for (int i = 2; i < 4; i++)
    if (!same_nd(&S->raw[i], &S->raw[i == 2 ? 1 : 0])) {
      nd_str(sa, sizeof sa, &S->raw[i]);
      nd_str(sb2, sizeof sb2, &S->raw[i == 2 ? 1 : 0]);
      cli_error(S->cmd, "%s: shape %s does not match %s's %s", S->label[i], sa, S->label[i == 2 ? 1 : 0], sb2);
      return 2;
    }
  aa_layout_dims(&S->qd, S->layout, q->ndim, q->shape);
  aa_layout_dims(&S->kd, S->layout, k->ndim, k->shape);
  return 0;
}

/* The optional sinks [H, K] or [K] (batch 1 only). */
static int read_sinks(cli_sources_t *S) {
  const aa_ndarray_t *r = &S->raw[4];
  size_t shp[2] = {r->ndim == 1 ? 1 : r->shape[0], r->shape[r->ndim - 1]};
  char sa[96];
  nd_str(sa, sizeof sa, r);
  if (r->ndim > 2 || shp[0] != S->qd.h || S->qd.b != 1) {
    cli_error(S->cmd, "%s: shape %s is not [H, K] with H = %zu query heads%s", S->label[4], sa, S->qd.h,
              S->qd.b != 1 ? " (sinks need batch 1)" : "");
    return 2;
  }
  if (aa_tensor_alloc(&S->in.sinks, 2, shp, r->fmt) != AA_OK) {
    cli_error(S->cmd, "out of memory");
    return 2;
  }
  memcpy(S->in.sinks.data, r->data, shp[0] * shp[1] * sizeof(double));
  return 0;
}

int cli_sources_read_inputs(cli_sources_t *S) {
  static const char *iname[6] = {"q", "k", "v", "do", "sinks", "keep"};
  int present;
  for (int i = 0; i < 6; i++)
    if (load_arr(&S->raw[i], S->label[i], sizeof S->label[i], S->inputs_src, S->ik, iname[i], i >= 4, S->flags,
                 &present, &S->err))
      return src_fail(S, NULL);
  if (S->layout != AA_LAYOUT_ND && S->layout != AA_LAYOUT_NHD && any_3d(S->raw, 4))
    for (int i = 0; i < 4; i++)
      promote_2d(&S->raw[i]);
  return resolve_layout(S);
}

int cli_sources_import_inputs(cli_sources_t *S) {
  aa_tensor_t *dst[4] = {&S->in.q, &S->in.k, &S->in.v, &S->in.dO};
  for (int i = 0; i < 4; i++) {
    const aa_ndarray_t *r = &S->raw[i];
    if (aa_layout_import(dst[i], r->data, r->fmt, S->layout, r->ndim, r->shape, &S->err))
      return src_fail(S, S->label[i]);
    /* the widest input format: the naive reference's (bf16 < fp16 < fp32 < fp64 by range of values held) */
    if (r->fmt == AA_FMT_FP64 || (r->fmt == AA_FMT_FP32 && S->in_fmt != AA_FMT_FP64) ||
        (r->fmt == AA_FMT_FP16 && S->in_fmt == AA_FMT_BF16))
      S->in_fmt = r->fmt;
  }
  return S->raw[4].data != NULL ? read_sinks(S) : 0;
}

/* An array of the folded heads followed by the axes rest[0..nrest-1]: [B, H, rest] (4-axis layouts: flash-attn's
   softmax_lse and dropout mask are head-major whatever q's layout), [H, rest] or [rest] (one head); 0, or 2 after a
   message naming what it should be. */
static int check_headmajor(const cli_sources_t *S, const aa_ndarray_t *r, const char *label, const size_t *rest,
                           int nrest, const char *what) {
  int np = r->ndim - nrest, ok = np >= 0 && np <= 2;
  char sa[96];
  for (int i = 0; ok && i < nrest; i++)
    ok = r->shape[np + i] == rest[i];
  if (ok)
    ok = np == 2   ? r->shape[0] == S->qd.b && r->shape[1] == S->qd.h
         : np == 1 ? S->qd.b == 1 && r->shape[0] == S->qd.h
                   : S->qd.b * S->qd.h == 1;
  if (ok) return 0;
  nd_str(sa, sizeof sa, r);
  cli_error(S->cmd, "%s: shape %s is not %s = [%zu, %zu, %zu%s] (B, H of q; [H, ...] with one batch)", label, sa,
            what, S->qd.b, S->qd.h, rest[0], nrest > 1 ? ", Nk" : "");
  return 2;
}

int cli_sources_keep(cli_sources_t *S, double dropout_p, uint8_t **keep) {
  const aa_ndarray_t *r = &S->raw[5];
  size_t rest[2] = {S->qd.n, S->kd.n}, n;
  *keep = NULL;
  if ((r->data != NULL) != (dropout_p > 0)) {
    cli_error(S->cmd,
              r->data != NULL ? "%s: a keep mask needs --dropout P (the kernel's dropout probability)"
                              : "--dropout needs the kernel's keep mask: the array keep in %s",
              r->data != NULL ? S->label[5] : S->inputs_src);
    return 2;
  }
  if (r->data == NULL) return 0;
  if (check_headmajor(S, r, S->label[5], rest, 2, "[B, H, Nq, Nk]")) return 2;
  n = S->qd.b * S->qd.h * rest[0] * rest[1];
  if ((*keep = malloc(n)) == NULL) {
    cli_error(S->cmd, "out of memory");
    return 2;
  }
  for (size_t i = 0; i < n; i++) {
    if (r->data[i] != 0 && r->data[i] != 1) {
      cli_error(S->cmd, "%s: element %zu is %g; a keep mask holds 0 (dropped) and 1 (kept)", S->label[5], i,
                r->data[i]);
      return 2;
    }
    (*keep)[i] = r->data[i] == 1;
  }
  return 0;
}

/* The kernel's optional lse [B, H, Nq] (natural log, softmax scale included: flash-attn's softmax_lse), folded. */
static int read_lse(cli_sources_t *S) {
  aa_ndarray_t *gr = &S->graw[5];
  size_t shp[2] = {S->qd.b * S->qd.h, S->qd.n};
  int present;
  if (load_arr(gr, S->glabel[5], sizeof S->glabel[5], S->grads_src, S->gk, "lse", 1, S->flags, &present, &S->err))
    return src_fail(S, NULL);
  if (!present) return 0;
  if (check_headmajor(S, gr, S->glabel[5], &shp[1], 1, "[B, H, Nq]")) return 2;
  if (aa_tensor_alloc(&S->lse, 2, shp, gr->fmt) != AA_OK) {
    cli_error(S->cmd, "out of memory");
    return 2;
  }
  memcpy(S->lse.data, gr->data, shp[0] * shp[1] * sizeof(double));
  return 0;
}

/* The kernel's o (optional), dq, dk, dv and (with sinks) dsinks, in the inputs' layout; the optional lse. */
int cli_sources_read_outputs(cli_sources_t *S) {
  static const char *gname[5] = {"o", "dq", "dk", "dv", "dsinks"};
  for (int i = 0; i < 5; i++) {
    int li = i == 0 || i == 1 ? 0 : i == 4 ? 4 : 1, present;
    const aa_ndarray_t *like = &S->raw[li];
    aa_ndarray_t *gr = &S->graw[i];
    char sa[96], sb2[96];
    if (i == 4 && S->in.sinks.data == NULL) continue;
    if (load_arr(gr, S->glabel[i], sizeof S->glabel[i], S->grads_src, S->gk, gname[i], i == 0 || i == 4, S->flags,
                 &present, &S->err))
      return src_fail(S, NULL);
    if (!present) continue;
    if (i < 4 && like->ndim == 3) promote_2d(gr);
    if (!same_nd(gr, like)) {
      nd_str(sa, sizeof sa, gr);
      nd_str(sb2, sizeof sb2, like);
      cli_error(S->cmd, "%s: shape %s does not match %s's %s", S->glabel[i], sa, S->label[li], sb2);
      return 2;
    }
    if (i == 4) {
      size_t shp[2] = {S->in.sinks.shape[0], S->in.sinks.shape[1]};
      if (aa_tensor_alloc(&S->g[4], 2, shp, gr->fmt) != AA_OK) {
        cli_error(S->cmd, "out of memory");
        return 2;
      }
      memcpy(S->g[4].data, gr->data, shp[0] * shp[1] * sizeof(double));
    } else if (aa_layout_import(&S->g[i], gr->data, gr->fmt, S->layout, gr->ndim, gr->shape, &S->err)) {
      return src_fail(S, S->glabel[i]);
    }
  }
  return read_lse(S);
}

int cli_sources_open(cli_sources_t *S, const char *cmd, const char *inputs, const char *grads) {
  S->cmd = cmd;
  S->inputs_src = inputs;
  S->grads_src = grads;
  S->in_fmt = AA_FMT_BF16;
  if (src_kind(&S->ik, inputs, "inputs", &S->err) || src_kind(&S->gk, grads, "grads", &S->err))
    return src_fail(S, NULL);
  return 0;
}

void cli_sources_free(cli_sources_t *S) {
  for (int i = 0; i < 6; i++) {
    if (i < 5) aa_tensor_free(&S->g[i]);
    aa_ndarray_free(&S->raw[i]);
    aa_ndarray_free(&S->graw[i]);
  }
  aa_tensor_free(&S->lse);
  cli_inputs_free(&S->in);
}

/* run's problem features (features_cli_problem) on the folded heads: ALiBi slopes are per head of q (flash-attn's
   alibi_slopes [H]), the same for every batch element. */
static int problem_features(aa_problem_t *pb, features_cli_t *fc, const cli_sources_t *S, const cli_args_t *a) {
  size_t heads = pb->heads, h = S->qd.h;
  double *all;
  int rc;
  pb->heads = h;
  rc = features_cli_problem(fc, S->cmd, a, pb);
  pb->heads = heads;
  if (rc || fc->slopes == NULL || heads == h) return rc;
  if ((all = realloc(fc->slopes, heads * sizeof *all)) == NULL) {
    cli_error(S->cmd, "out of memory");
    return 2;
  }
  for (size_t i = h; i < heads; i++)
    all[i] = all[i % h];
  fc->slopes = all;
  pb->alibi_slopes = all;
  return 0;
}

int cli_sources_problem(aa_problem_t *pb, features_cli_t *fc, cli_sources_t *S, const cli_args_t *a) {
  const char *sc = cli_get(a, "scale");
  aa_problem_init(pb, S->qd.n, S->kd.n, S->qd.d, S->qd.b * S->qd.h, S->kd.b * S->kd.h);
  pb->causal = cli_get(a, "causal") != NULL;
  if (problem_features(pb, fc, S, a)) return 2; /* --window W|L,R, alignment, softcap, ALiBi */
  if (sc != NULL) {
    if (cli_double(&pb->scale, S->cmd, "scale", sc, 0, 1e300, 1)) return 2;
    pb->scale_default = 0;
  }
  if (S->in.sinks.data != NULL) {
    pb->num_sinks = S->in.sinks.shape[1];
    pb->sinks = S->in.sinks.data;
  }
  return 0;
}
