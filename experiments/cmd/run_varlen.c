/* attnacc: the varlen batch of the run command: each sequence its own problem, then the whole packed batch. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/features.h"

/* rows r0 .. r0 + n - 1 of every head of src [H, N, d] into dst [H, n, d] (allocated), or back with dir = 1 */
static int rows_copy(aa_tensor_t *dst, const aa_tensor_t *src, size_t r0, size_t n, int alloc) {
  size_t H = src->shape[0], N = src->shape[1], d = src->shape[2];
  if (alloc) {
    size_t sh[3] = {H, n, d};
    if (aa_tensor_alloc(dst, 3, sh, src->fmt) != AA_OK) return AA_ENOMEM;
  }
  for (size_t h = 0; h < H; h++)
    memcpy(dst->data + h * n * d, src->data + (h * N + r0) * d, n * d * sizeof(double));
  return AA_OK;
}

/* the reverse: src [H, n, d] into rows r0 .. of dst [H, N, d] */
static void rows_put(aa_tensor_t *dst, const aa_tensor_t *src, size_t r0) {
  size_t H = src->shape[0], n = src->shape[1], d = src->shape[2], N = dst->shape[1];
  for (size_t h = 0; h < H; h++)
    memcpy(dst->data + (h * N + r0) * d, src->data + h * n * d, n * d * sizeof(double));
}

static int out_alloc(aa_oracle_out_t *o, const size_t *shape) {
  if (aa_tensor_alloc(&o->val, 3, shape, AA_FMT_FP64) || aa_tensor_alloc(&o->fp32, 3, shape, AA_FMT_FP32) ||
      aa_tensor_alloc(&o->bf16, 3, shape, AA_FMT_BF16))
    return AA_ENOMEM;
  o->relerr_bound = 0;
  return AA_OK;
}

static void out_put(aa_oracle_out_t *dst, const aa_oracle_out_t *src, size_t r0) {
  rows_put(&dst->val, &src->val, r0);
  rows_put(&dst->fp32, &src->fp32, r0);
  rows_put(&dst->bf16, &src->bf16, r0);
  if (!(src->relerr_bound <= dst->relerr_bound)) dst->relerr_bound = src->relerr_bound;
}

static json_t *json_cu(const int32_t *cu, size_t B) {
  json_t *a = json_array();
  int bad = 0;
  for (size_t b = 0; b <= B; b++)
    bad |= aa_json_push(a, json_integer(cu[b]));
  return bad ? (json_decref(a), NULL) : a;
}

/* One sequence of the batch: its problem, oracle and runs (the document's own shape without the provenance). */
static json_t *json_sequence(const cli_report_t *rep, const cli_variant_t *vs, size_t nrec) {
  json_t *j = json_object();
  int bad = aa_json_set(j, "problem", cli_json_problem(rep));
  bad |= aa_json_set(j, "oracle", cli_json_oracle(rep));
  bad |= aa_json_set(j, "runs", cli_json_runs(rep, vs, nrec));
  return bad ? (json_decref(j), NULL) : j;
}

/* What a varlen run holds: the recipes (and naive-bf16 for the
   flash-attention rule), the per-sequence results vs, the packed outputs pk
   and oracle po of the whole batch and their results vb, and the report. */
typedef struct {
  const features_cli_t *fc;
  const char *cmd;
  const cli_report_t *rep;
  const cli_inputs_t *in;
  aa_recipe_t *rs;
  size_t nrec, nrun; /* reported recipes; run ones (nrec, or nrec + 1 with the naive reference) */
  int fa, ni;        /* the flash-attention rule applies; the naive reference's index */
  cli_variant_t *vs, *vb;
  aa_attn_result_t *pk;
  aa_oracle_result_t po;
  double osec_total;
  int json, jbad;
  json_t *seqs;
  char *jtext, *tables;
  size_t jlen, tables_len;
  FILE *tf; /* the text tables, printed only when everything succeeded */
  aa_error_t err;
} varlen_t;

static void vl_free(varlen_t *V) {
  if (V->tf != NULL) fclose(V->tf);
  free(V->tables);
  json_decref(V->seqs);
  free(V->jtext);
  for (size_t i = 0; V->vs != NULL && i < V->nrun; i++)
    cli_variant_free(&V->vs[i]);
  for (size_t i = 0; V->vb != NULL && i < V->nrun; i++)
    cli_variant_free(&V->vb[i]);
  for (size_t i = 0; V->pk != NULL && i < V->nrun; i++)
    aa_attn_result_free(&V->pk[i]);
  aa_oracle_result_free(&V->po);
  free(V->rs);
  free(V->vs);
  free(V->vb);
  free(V->pk);
}

/* The recipes and the packed buffers. The flash-attention rule needs
   naive-bf16 on the same inputs (BF16 inputs only, as run does): one of the
   recipes, or run as an extra one at index nrec that is not reported. */
static int vl_alloc(varlen_t *V, const aa_recipe_t *recipes) {
  const aa_problem_t *pb = V->rep->pb;
  size_t sq[3] = {pb->heads, pb->n_q, pb->d}, sk[3] = {pb->kv_heads, pb->n_k, pb->d};
  V->fa = V->in->q.fmt == AA_FMT_BF16;
  V->ni = -1;
  V->rs = calloc(V->nrec + 1, sizeof *V->rs);
  for (size_t i = 0; V->rs != NULL && i < V->nrec; i++) {
    V->rs[i] = recipes[i];
    if (V->ni < 0 && strcmp(recipes[i].name, "naive-bf16") == 0) V->ni = (int)i;
  }
  V->nrun = V->nrec;
  if (V->fa && V->ni < 0 && V->rs != NULL && aa_recipe_preset(&V->rs[V->nrec], "naive-bf16", NULL) == AA_OK)
    V->ni = (int)V->nrun++;
  if (V->ni < 0) V->fa = 0;
  V->vs = calloc(V->nrun, sizeof *V->vs);
  V->vb = calloc(V->nrun, sizeof *V->vb);
  V->pk = calloc(V->nrun, sizeof *V->pk);
  if (V->rs == NULL || V->vs == NULL || V->vb == NULL || V->pk == NULL || (!V->json && V->tf == NULL) ||
      out_alloc(&V->po.o, sq) || out_alloc(&V->po.dq, sq) || out_alloc(&V->po.dk, sk) || out_alloc(&V->po.dv, sk))
    return AA_ENOMEM;
  for (size_t i = 0; i < V->nrun; i++) {
    aa_fmt_t f = V->rs[i].io_fmt;
    if (aa_tensor_alloc(&V->pk[i].o, 3, sq, f) || aa_tensor_alloc(&V->pk[i].dq, 3, sq, f) ||
        aa_tensor_alloc(&V->pk[i].dk, 3, sk, f) || aa_tensor_alloc(&V->pk[i].dv, 3, sk, f))
      return AA_ENOMEM;
  }
  return AA_OK;
}

/* Every recipe on sequence b (problem pbb, inputs sub, oracle ob), its
   outputs packed into pk at rows q0, k0. */
static int vl_recipes(varlen_t *V, size_t b, const aa_problem_t *pbb, const cli_inputs_t *sub,
                      const aa_oracle_result_t *ob, size_t q0, size_t k0) {
  for (size_t i = 0; i < V->nrun; i++) {
    aa_attn_result_t res;
    int rc;
    cli_variant_free(&V->vs[i]);
    memset(&V->vs[i], 0, sizeof V->vs[i]);
    if ((rc = cli_run_variant(&V->vs[i], &res, &V->rs[i], pbb, sub, ob, &V->err)) != AA_OK) {
      cli_error(V->cmd, "sequence %zu: %s", b, V->err.msg);
      return cli_exit_status(rc);
    }
    rows_put(&V->pk[i].o, &res.o, q0);
    rows_put(&V->pk[i].dq, &res.dq, q0);
    rows_put(&V->pk[i].dk, &res.dk, k0);
    rows_put(&V->pk[i].dv, &res.dv, k0);
    V->vb[i].seconds += V->vs[i].seconds;
    aa_attn_result_free(&res);
  }
  if (V->fa)
    for (size_t i = 0; i < V->nrec; i++)
      cli_apply_fa(&V->vs[i], &V->vs[V->ni]);
  return 0;
}

/* Sequence b's report: its oracle packed into po, its JSON member or table. */
static void vl_report_sequence(varlen_t *V, size_t b, const aa_problem_t *pbb, const aa_oracle_result_t *ob,
                               double osec, size_t q0, size_t k0) {
  cli_report_t rb = *V->rep;
  out_put(&V->po.o, &ob->o, q0);
  out_put(&V->po.dq, &ob->dq, q0);
  out_put(&V->po.dk, &ob->dk, k0);
  out_put(&V->po.dv, &ob->dv, k0);
  V->po.n_recomputed += ob->n_recomputed;
  V->po.n_uncertified += ob->n_uncertified;
  rb.pb = pbb;
  rb.oracle = ob;
  rb.oracle_seconds = osec;
  if (V->json) {
    V->jbad |= aa_json_push(V->seqs, json_sequence(&rb, V->vs, V->nrec));
  } else {
    fprintf(V->tf, "== sequence %zu of %zu: queries %zu..%zu, keys %zu..%zu\n", b, V->fc->batch, q0,
            q0 + pbb->n_q - 1, k0, k0 + pbb->n_k - 1);
    cli_print_table(V->tf, &rb, V->vs, V->nrec);
    fprintf(V->tf, "\n");
  }
}

/* Sequence b as its own problem: its rows of the inputs, the oracle, every recipe. */
static int vl_sequence(varlen_t *V, size_t b) {
  const features_cli_t *fc = V->fc;
  size_t q0 = (size_t)fc->cu_q[b], k0 = (size_t)fc->cu_k[b];
  size_t nq = (size_t)fc->cu_q[b + 1] - q0, nk = (size_t)fc->cu_k[b + 1] - k0;
  cli_inputs_t sub;
  aa_problem_t pbb = *V->rep->pb;
  aa_oracle_result_t ob;
  double osec = 0;
  int st = 0;
  memset(&sub, 0, sizeof sub);
  memset(&ob, 0, sizeof ob);
  pbb.n_q = nq;
  pbb.n_k = nk;
  if (rows_copy(&sub.q, &V->in->q, q0, nq, 1) || rows_copy(&sub.dO, &V->in->dO, q0, nq, 1) ||
      rows_copy(&sub.k, &V->in->k, k0, nk, 1) || rows_copy(&sub.v, &V->in->v, k0, nk, 1)) {
    cli_error(V->cmd, "out of memory");
    st = 1;
  } else if (aa_problem_check(&pbb, &V->err) != AA_OK) {
    cli_error(V->cmd, "sequence %zu: %s", b, V->err.msg);
    st = 2;
  } else if ((st = cli_oracle_run(&ob, &osec, V->cmd, &pbb, &sub, V->rep->oo)) == 0) {
    V->osec_total += osec;
    if ((st = vl_recipes(V, b, &pbb, &sub, &ob, q0, k0)) == 0) vl_report_sequence(V, b, &pbb, &ob, osec, q0, k0);
  }
  aa_oracle_result_free(&ob);
  cli_inputs_free(&sub);
  return st;
}

/* Every output compared over the whole packed batch, and its report. */
static int vl_batch(varlen_t *V) {
  cli_report_t rb = *V->rep;
  int rc;
  for (size_t i = 0; i < V->nrun; i++) {
    cli_variant_t *v = &V->vb[i];
    snprintf(v->variant, sizeof v->variant, "%s", V->vs[i].variant);
    v->recipe_text = V->vs[i].recipe_text;
    V->vs[i].recipe_text = NULL;
    v->nout = 0;
    if ((rc = cli_compare(&v->out[v->nout++], "o", &V->pk[i].o, &V->po.o, &V->err)) ||
        (rc = cli_compare(&v->out[v->nout++], "dq", &V->pk[i].dq, &V->po.dq, &V->err)) ||
        (rc = cli_compare(&v->out[v->nout++], "dk", &V->pk[i].dk, &V->po.dk, &V->err)) ||
        (rc = cli_compare(&v->out[v->nout++], "dv", &V->pk[i].dv, &V->po.dv, &V->err))) {
      cli_error(V->cmd, "batch: %s", V->err.msg);
      return 1;
    }
  }
  if (V->fa)
    for (size_t i = 0; i < V->nrec; i++)
      cli_apply_fa(&V->vb[i], &V->vb[V->ni]);
  rb.oracle = &V->po;
  rb.oracle_seconds = V->osec_total;
  if (V->json) {
    /* the document of the whole packed batch, with the sequences' own results */
    json_t *doc = cli_json_doc(&rb, V->vb, V->nrec);
    V->jbad |= aa_json_set(doc, "cu_seqlens_q", json_cu(V->fc->cu_q, V->fc->batch));
    V->jbad |= aa_json_set(doc, "cu_seqlens_k", json_cu(V->fc->cu_k, V->fc->batch));
    V->jbad |= aa_json_set(doc, "sequences", V->seqs);
    V->seqs = NULL;
    V->jtext = V->jbad ? NULL : aa_json_text(doc, 0, &V->jlen);
    json_decref(doc);
    V->jbad = V->jtext == NULL;
  } else {
    fprintf(V->tf, "== batch of %zu sequences: %zu queries, %zu keys (metrics over all packed elements)\n",
            V->fc->batch, rb.pb->n_q, rb.pb->n_k);
    cli_print_table(V->tf, &rb, V->vb, V->nrec);
  }
  if (!V->jbad) return 0;
  cli_error(V->cmd, "out of memory");
  return 1;
}

/* The JSON into out_file (run.c refuses --out without --json here), then the JSON or the tables on stdout. */
static int vl_output(varlen_t *V, const char *out_file) {
  aa_error_t err = {{0}};
  const char *jtext = V->jtext;
  size_t jlen = V->jlen;
  int rc;
  if (out_file != NULL) {
    if ((rc = aa_file_write(out_file, jtext, jlen, &err)) != AA_OK) {
      cli_error(V->cmd, "%s", err.msg);
      return 1;
    }
  }
  if (V->json)
    fwrite(jtext, 1, jlen, stdout);
  else {
    fclose(V->tf);
    V->tf = NULL;
    fwrite(V->tables, 1, V->tables_len, stdout);
  }
  return fflush(stdout) != 0 ? 1 : 0;
}

int features_cli_run_varlen(const features_cli_t *fc, const char *cmd, const cli_report_t *rep,
                            const cli_inputs_t *in, const aa_recipe_t *recipes, size_t nrec, int json,
                            const char *out_file) {
  varlen_t V;
  int st = 0;
  memset(&V, 0, sizeof V);
  V.fc = fc, V.cmd = cmd, V.rep = rep, V.in = in, V.nrec = nrec, V.json = json;
  V.seqs = json ? json_array() : NULL;
  V.tf = json ? NULL : open_memstream(&V.tables, &V.tables_len);
  if (vl_alloc(&V, recipes) != AA_OK) {
    cli_error(cmd, "out of memory");
    st = 1;
  }
  for (size_t b = 0; st == 0 && b < fc->batch; b++)
    st = vl_sequence(&V, b);
  if (st == 0 && (st = vl_batch(&V)) == 0) st = vl_output(&V, out_file);
  vl_free(&V);
  return st;
}
