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
    bad |= cli_json_push(a, json_integer(cu[b]));
  return bad ? (json_decref(a), NULL) : a;
}

/* One sequence of the batch: its problem, oracle and runs (the document's own shape without the provenance). */
static json_t *json_sequence(const cli_report_t *rep, const cli_variant_t *vs, size_t nrec) {
  json_t *j = json_object();
  int bad = cli_json_set(j, "problem", cli_json_problem(rep));
  bad |= cli_json_set(j, "oracle", cli_json_oracle(rep));
  bad |= cli_json_set(j, "runs", cli_json_runs(rep, vs, nrec));
  return bad ? (json_decref(j), NULL) : j;
}

int features_cli_run_varlen(const features_cli_t *fc, const char *cmd, const cli_report_t *rep,
                            const cli_inputs_t *in, const aa_recipe_t *recipes, size_t nrec, int json,
                            const char *out_file) {
  const aa_problem_t *pb = rep->pb;
  size_t B = fc->batch, H = pb->heads, KH = pb->kv_heads, d = pb->d;
  size_t sq[3] = {H, pb->n_q, d}, sk[3] = {KH, pb->n_k, d};
  aa_error_t err = {{0}};
  int status = 1, rc;
  json_t *seqs = json ? json_array() : NULL;
  int jbad = 0;
  char *jtext = NULL;
  size_t jlen = 0;
  char *tables = NULL;
  size_t tables_len = 0;
  FILE *tf = json ? NULL : open_memstream(&tables, &tables_len);
  /* The flash-attention rule needs naive-bf16 on the same inputs (BF16 inputs only, as run does): one of the
     recipes, or run as an extra one at index nrec that is not reported. */
  int fa = in->q.fmt == AA_FMT_BF16, ni = -1;
  aa_recipe_t *rs = calloc(nrec + 1, sizeof *rs);
  for (size_t i = 0; rs != NULL && i < nrec; i++) {
    rs[i] = recipes[i];
    if (ni < 0 && strcmp(recipes[i].name, "naive-bf16") == 0) ni = (int)i;
  }
  size_t nrun = nrec;
  if (fa && ni < 0 && rs != NULL && aa_recipe_preset(&rs[nrec], "naive-bf16", NULL) == AA_OK) ni = (int)nrun++;
  if (ni < 0) fa = 0;
  cli_variant_t *vs = calloc(nrun, sizeof *vs), *vb = calloc(nrun, sizeof *vb);
  aa_attn_result_t *pk = calloc(nrun, sizeof *pk);
  aa_oracle_result_t po;
  memset(&po, 0, sizeof po);
  if (rs == NULL || vs == NULL || vb == NULL || pk == NULL || (!json && tf == NULL) || out_alloc(&po.o, sq) ||
      out_alloc(&po.dq, sq) || out_alloc(&po.dk, sk) || out_alloc(&po.dv, sk)) {
    cli_error(cmd, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < nrun; i++)
    if (aa_tensor_alloc(&pk[i].o, 3, sq, rs[i].io_fmt) || aa_tensor_alloc(&pk[i].dq, 3, sq, rs[i].io_fmt) ||
        aa_tensor_alloc(&pk[i].dk, 3, sk, rs[i].io_fmt) || aa_tensor_alloc(&pk[i].dv, 3, sk, rs[i].io_fmt)) {
      cli_error(cmd, "out of memory");
      goto out;
    }
  double osec_total = 0;
  for (size_t b = 0; b < B; b++) {
    size_t q0 = (size_t)fc->cu_q[b], k0 = (size_t)fc->cu_k[b];
    size_t nq = (size_t)fc->cu_q[b + 1] - q0, nk = (size_t)fc->cu_k[b + 1] - k0;
    cli_inputs_t sub;
    memset(&sub, 0, sizeof sub);
    aa_problem_t pbb = *pb;
    pbb.n_q = nq;
    pbb.n_k = nk;
    aa_oracle_result_t ob;
    double osec = 0;
    memset(&ob, 0, sizeof ob);
    if (rows_copy(&sub.q, &in->q, q0, nq, 1) || rows_copy(&sub.dO, &in->dO, q0, nq, 1) ||
        rows_copy(&sub.k, &in->k, k0, nk, 1) || rows_copy(&sub.v, &in->v, k0, nk, 1)) {
      cli_inputs_free(&sub);
      cli_error(cmd, "out of memory");
      goto out;
    }
    if ((rc = aa_problem_check(&pbb, &err)) != AA_OK) {
      cli_inputs_free(&sub);
      cli_error(cmd, "sequence %zu: %s", b, err.msg);
      status = 2;
      goto out;
    }
    if ((rc = cli_oracle_run(&ob, &osec, cmd, &pbb, &sub, rep->oo)) != 0) {
      cli_inputs_free(&sub);
      status = rc;
      goto out;
    }
    osec_total += osec;
    for (size_t i = 0; i < nrun; i++) {
      aa_attn_result_t res;
      cli_variant_free(&vs[i]);
      memset(&vs[i], 0, sizeof vs[i]);
      if ((rc = cli_run_variant(&vs[i], &res, &rs[i], &pbb, &sub, &ob, &err)) != AA_OK) {
        cli_error(cmd, "sequence %zu: %s", b, err.msg);
        status = cli_exit_status(rc);
        aa_oracle_result_free(&ob);
        cli_inputs_free(&sub);
        goto out;
      }
      rows_put(&pk[i].o, &res.o, q0);
      rows_put(&pk[i].dq, &res.dq, q0);
      rows_put(&pk[i].dk, &res.dk, k0);
      rows_put(&pk[i].dv, &res.dv, k0);
      vb[i].seconds += vs[i].seconds;
      aa_attn_result_free(&res);
    }
    if (fa)
      for (size_t i = 0; i < nrec; i++)
        cli_apply_fa(&vs[i], &vs[ni]);
    out_put(&po.o, &ob.o, q0);
    out_put(&po.dq, &ob.dq, q0);
    out_put(&po.dk, &ob.dk, k0);
    out_put(&po.dv, &ob.dv, k0);
    po.n_recomputed += ob.n_recomputed;
    po.n_uncertified += ob.n_uncertified;
    cli_report_t rb = *rep;
    rb.pb = &pbb;
    rb.oracle = &ob;
    rb.oracle_seconds = osec;
    if (json) {
      jbad |= cli_json_push(seqs, json_sequence(&rb, vs, nrec));
    } else {
      fprintf(tf, "== sequence %zu of %zu: queries %zu..%zu, keys %zu..%zu\n", b, B, q0, q0 + nq - 1, k0,
              k0 + nk - 1);
      cli_print_table(tf, &rb, vs, nrec);
      fprintf(tf, "\n");
    }
    aa_oracle_result_free(&ob);
    cli_inputs_free(&sub);
  }
  for (size_t i = 0; i < nrun; i++) {
    snprintf(vb[i].variant, sizeof vb[i].variant, "%s", vs[i].variant);
    vb[i].recipe_text = vs[i].recipe_text;
    vs[i].recipe_text = NULL;
    vb[i].nout = 0;
    if ((rc = cli_compare(&vb[i].out[vb[i].nout++], "o", &pk[i].o, &po.o, &err)) ||
        (rc = cli_compare(&vb[i].out[vb[i].nout++], "dq", &pk[i].dq, &po.dq, &err)) ||
        (rc = cli_compare(&vb[i].out[vb[i].nout++], "dk", &pk[i].dk, &po.dk, &err)) ||
        (rc = cli_compare(&vb[i].out[vb[i].nout++], "dv", &pk[i].dv, &po.dv, &err))) {
      cli_error(cmd, "batch: %s", err.msg);
      goto out;
    }
  }
  if (fa)
    for (size_t i = 0; i < nrec; i++)
      cli_apply_fa(&vb[i], &vb[ni]);
  {
    cli_report_t rb = *rep;
    rb.oracle = &po;
    rb.oracle_seconds = osec_total;
    if (json) {
      /* the document of the whole packed batch, with the sequences' own results */
      json_t *doc = cli_json_doc(&rb, vb, nrec);
      jbad |= cli_json_set(doc, "cu_seqlens_q", json_cu(fc->cu_q, B));
      jbad |= cli_json_set(doc, "cu_seqlens_k", json_cu(fc->cu_k, B));
      jbad |= cli_json_set(doc, "sequences", seqs);
      seqs = NULL;
      jtext = jbad ? NULL : cli_json_text(doc, 0, &jlen);
      json_decref(doc);
      jbad = jtext == NULL;
    } else {
      fprintf(tf, "== batch of %zu sequences: %zu queries, %zu keys (metrics over all packed elements)\n", B, pb->n_q,
              pb->n_k);
      cli_print_table(tf, &rb, vb, nrec);
    }
  }
  if (jbad) {
    cli_error(cmd, "out of memory");
    goto out;
  }
  if (out_file != NULL) { /* run.c refuses --out without --json for a varlen batch */
    if ((rc = cli_write_atomic(out_file, jtext, jlen, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      goto out;
    }
  }
  if (json)
    fwrite(jtext, 1, jlen, stdout);
  else {
    fclose(tf);
    tf = NULL;
    fwrite(tables, 1, tables_len, stdout);
  }
  status = fflush(stdout) != 0 ? 1 : 0;
out:
  if (tf != NULL) fclose(tf);
  free(tables);
  json_decref(seqs);
  free(jtext);
  if (vs != NULL)
    for (size_t i = 0; i < nrun; i++)
      cli_variant_free(&vs[i]);
  if (vb != NULL)
    for (size_t i = 0; i < nrun; i++)
      cli_variant_free(&vb[i]);
  if (pk != NULL)
    for (size_t i = 0; i < nrun; i++)
      aa_attn_result_free(&pk[i]);
  aa_oracle_result_free(&po);
  free(rs);
  free(vs);
  free(vb);
  free(pk);
  return status;
}
