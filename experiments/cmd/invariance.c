/* attnacc: the `invariance` command: does one sequence keep its output bits as the batch around it grows? */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commands.h"

#define MAX_BATCHES 32

static const char *const description =
    "For one fixed sequence (drawn by --seed as attnacc run draws it, or read with\n"
    "--inputs), predict its forward output bits when it is launched alone and inside\n"
    "padded batches of the sizes in --batch. A kernel computes a sequence the same way\n"
    "whatever the other sequences hold, but FA2 (PyTorch's SDPA flash backend) chooses\n"
    "its split-KV count from the whole batch: batch x heads x ceil(n_q / 64) work units\n"
    "against twice the SM count (flash_api.cpp num_splits_heuristic; for decode with\n"
    "GQA after mha_fwd's seqlenq_ngroups_swapped transpose). Each row gives the batch\n"
    "size, the work units, the split count and kernel, how many elements of o differ\n"
    "from the batch of one and by how many ULPs at most (ULPs of o's format, counted\n"
    "across zero), and why. A recipe whose tiles and split count are fixed (no tiling =\n"
    "fa2, no fwd.split_sms) is invariant by construction and reported as such. The\n"
    "forward runs once per distinct decision (the emulation is deterministic). The\n"
    "causal mask is FA2's, bottom-right aligned (the same as top-left when n_q = n_k).\n"
    "--save DIR writes o of every batch size as DIR/o-bB.npy. Exit status: 0 done\n"
    "(invariant or not), 2 bad usage or input, 1 failure while computing or writing.";

static const cli_opt_t opts[] = {
    {"variant", "SPEC", "fa2-h100", "recipe: a preset, a recipe file or NAME:key=value,..."},
    CLI_OPTS_PROBLEM_SHAPE,
    {"n-q", "N", "= n", "query rows of the sequence"},
    {"n-k", "N", "= n", "key rows of the sequence"},
    CLI_OPTS_PROBLEM_DRAW,
    CLI_OPT_CAUSAL,
    {"batch", "B,B,...", "1,2,4,8,16,32,64,128", "batch sizes (the first is the reference)"},
    {"sms", "N", "the recipe's fwd.split_sms, else 132", "SM count of the GPU (H100 SXM, H200: 132)"},
    {"inputs", "DIR", NULL, "read the sequence's q.npy, k.npy, v.npy from DIR instead of drawing them"},
    {"save", "DIR", NULL, "write o of each batch size as DIR/o-bB.npy (mkdir -p)"},
    {"json", NULL, NULL, "print one JSON document instead of the table"},
};

typedef struct {
  size_t batch;
  aa_batch_decision_t dec;
  size_t same_as;   /* index of the first row with the same decision (its output is reused) */
  size_t differ;    /* elements of o that differ from the reference row */
  uint64_t max_ulp; /* largest ULP distance to the reference */
  aa_attn_result_t res;
} inv_row_t;

typedef struct {
  const char *cmd;
  aa_recipe_t *r;
  aa_problem_t pb;
  cli_inputs_t in;
  size_t sms;
  inv_row_t rows[MAX_BATCHES];
  size_t nrows;
} inv_t;

/* "1,2,4": sizes 1..2^20, at most MAX_BATCHES; 0 or 2 after a message. */
static int parse_batches(inv_t *x, const char *s) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
    if (x->nrows == MAX_BATCHES) {
      cli_error(x->cmd, "--batch: at most %d sizes", MAX_BATCHES);
      return 2;
    }
    if (cli_size(&x->rows[x->nrows++].batch, x->cmd, "batch", tok, 1, (size_t)1 << 20) != 0) return 2;
  }
  if (x->nrows == 0) cli_error(x->cmd, "--batch: no batch size in '%s'", s);
  return x->nrows == 0 ? 2 : 0;
}

static int same_decision(const aa_batch_decision_t *a, const aa_batch_decision_t *b) {
  return a->num_splits == b->num_splits && a->fwd_tile_q == b->fwd_tile_q && a->fwd_tile_k == b->fwd_tile_k;
}

/* ULP distance of two values of format f, across zero (BF16/FP16/FP32 bit patterns as ordered integers). */
static int64_t ordinal(double x, aa_fmt_t f) {
  uint64_t sign = aa_fmt_encode(-0.0, f), bits = aa_fmt_encode(x, f); /* -0 is the sign bit alone */
  return bits & sign ? -(int64_t)(bits & ~sign) : (int64_t)bits;
}

static uint64_t ulp_distance(double a, double b, aa_fmt_t f) {
  if (a == b) return 0;
  int64_t ia = ordinal(a, f), ib = ordinal(b, f);
  return ia > ib ? (uint64_t)(ia - ib) : (uint64_t)(ib - ia);
}

/* Decide every row, run the forward once per distinct decision, compare o with row 0's. */
static int compute(inv_t *x, aa_error_t *err) {
  for (size_t i = 0; i < x->nrows; i++) {
    inv_row_t *w = &x->rows[i];
    aa_batch_t b = {.batch = w->batch, .num_sms = x->sms};
    int st = aa_batch_decide(&w->dec, &x->pb, x->r, &b, err);
    if (st != AA_OK) return st;
    w->same_as = i;
    for (size_t j = 0; j < i && w->same_as == i; j++)
      if (same_decision(&x->rows[j].dec, &w->dec)) w->same_as = j;
    if (w->same_as == i &&
        (st = aa_batch_forward(&w->res, &w->dec, &x->pb, x->r, &b, &x->in.q, &x->in.k, &x->in.v, err)) != AA_OK)
      return st;
  }
  const aa_tensor_t *ref = &x->rows[0].res.o;
  for (size_t i = 0; i < x->nrows; i++) {
    const aa_tensor_t *o = &x->rows[x->rows[i].same_as].res.o;
    for (size_t e = 0; e < aa_tensor_numel(o); e++) {
      uint64_t u = ulp_distance(o->data[e], ref->data[e], o->fmt);
      x->rows[i].differ += o->data[e] != ref->data[e];
      if (u > x->rows[i].max_ulp) x->rows[i].max_ulp = u;
    }
  }
  return AA_OK;
}

static void kernel_name(char *buf, size_t cap, const aa_batch_decision_t *d) {
  snprintf(buf, cap, "%s %zux%zu", d->num_splits > 1 ? "splitkv" : "standard", d->fwd_tile_q, d->fwd_tile_k);
}

static void reason(char *buf, size_t cap, const inv_t *x, size_t i) {
  const aa_batch_decision_t *d = &x->rows[i].dec, *d0 = &x->rows[0].dec;
  if (!d->batch_dependent && x->r->fwd_split_keys > 0)
    snprintf(buf, cap, "fixed split size (fwd.split_keys = %zu keys): no decision depends on the batch",
             x->r->fwd_split_keys);
  else if (!d->batch_dependent)
    snprintf(buf, cap, "recipe fixes tiles and splits: no decision depends on the batch");
  else if (i == 0)
    snprintf(buf, cap, "reference");
  else if (d->num_splits != d0->num_splits)
    snprintf(buf, cap, "split count changed from %zu to %zu", d0->num_splits, d->num_splits);
  else if (!same_decision(d, d0))
    snprintf(buf, cap, "tiles changed");
  else
    snprintf(buf, cap, "same decision as B=%zu (%zu split%s)", x->rows[0].batch, d->num_splits,
             d->num_splits > 1 ? "s" : "");
}

static size_t count_variant(const inv_t *x) {
  size_t n = 0;
  for (size_t i = 0; i < x->nrows; i++)
    n += x->rows[i].differ > 0;
  return n;
}

static void print_table(const inv_t *x) {
  const aa_problem_t *pb = &x->pb;
  printf("%s: n_q %zu, n_k %zu, d %zu, heads %zu, kv_heads %zu, %s, %zu SMs%s\n", x->r->name, pb->n_q, pb->n_k, pb->d,
         pb->heads, pb->kv_heads, pb->causal ? "causal (bottom-right)" : "dense", x->sms,
         x->rows[0].dec.ngroups_swapped ? "; decode GQA: q transposed to (b, g, h_k, d) (mha_fwd)" : "");
  printf("%-7s %-7s %-7s %-18s %-9s %-8s %s\n", "batch", "units", "splits", "kernel", "differ", "max_ulp", "reason");
  for (size_t i = 0; i < x->nrows; i++) {
    const inv_row_t *w = &x->rows[i];
    char k[48], why[128];
    kernel_name(k, sizeof k, &w->dec);
    reason(why, sizeof why, x, i);
    printf("%-7zu %-7zu %-7zu %-18s %-9zu %-8llu %s\n", w->batch, w->dec.units, w->dec.num_splits, k, w->differ,
           (unsigned long long)w->max_ulp, why);
  }
  size_t nv = count_variant(x);
  if (nv == 0)
    printf("invariant: o keeps every bit at every batch size listed%s\n",
           x->rows[0].dec.batch_dependent ? "" : " (and at any other: the recipe's decisions ignore the batch)");
  else
    printf("not invariant: o changes bits at %zu of %zu batch sizes (elements of %zu)\n", nv, x->nrows,
           aa_tensor_numel(&x->rows[0].res.o));
}

static int print_json(const inv_t *x) {
  json_t *doc = json_object(), *rows = json_array();
  const aa_problem_t *pb = &x->pb;
  aa_json_set(doc, "variant", aa_json_str(x->r->name));
  aa_json_set(doc, "n_q", aa_json_u64(pb->n_q));
  aa_json_set(doc, "n_k", aa_json_u64(pb->n_k));
  aa_json_set(doc, "d", aa_json_u64(pb->d));
  aa_json_set(doc, "heads", aa_json_u64(pb->heads));
  aa_json_set(doc, "kv_heads", aa_json_u64(pb->kv_heads));
  aa_json_set(doc, "causal", aa_json_bool(pb->causal));
  aa_json_set(doc, "sms", aa_json_u64(x->sms));
  aa_json_set(doc, "batch_dependent", aa_json_bool(x->rows[0].dec.batch_dependent));
  aa_json_set(doc, "ngroups_swapped", aa_json_bool(x->rows[0].dec.ngroups_swapped));
  aa_json_set(doc, "elements", aa_json_u64(aa_tensor_numel(&x->rows[0].res.o)));
  for (size_t i = 0; i < x->nrows; i++) {
    const inv_row_t *w = &x->rows[i];
    json_t *row = json_object();
    char k[48], why[128];
    kernel_name(k, sizeof k, &w->dec);
    reason(why, sizeof why, x, i);
    aa_json_set(row, "batch", aa_json_u64(w->batch));
    aa_json_set(row, "units", aa_json_u64(w->dec.units));
    aa_json_set(row, "num_splits", aa_json_u64(w->dec.num_splits));
    aa_json_set(row, "kernel", aa_json_str(k));
    aa_json_set(row, "differ", aa_json_u64(w->differ));
    aa_json_set(row, "max_ulp", aa_json_u64(w->max_ulp));
    aa_json_set(row, "reason", aa_json_str(why));
    aa_json_push(rows, row);
  }
  aa_json_set(doc, "rows", rows);
  aa_json_set(doc, "invariant", aa_json_bool(count_variant(x) == 0));
  char *text = aa_json_text(doc, 0, NULL);
  json_decref(doc);
  if (text == NULL) return AA_ENOMEM;
  printf("%s\n", text);
  free(text);
  return AA_OK;
}

static int save_outputs(const inv_t *x, const char *dir, aa_error_t *err) {
  int st = aa_mkdir_p(dir, err);
  for (size_t i = 0; st == AA_OK && i < x->nrows; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/o-b%zu.npy", dir, x->rows[i].batch);
    const aa_tensor_t *o = &x->rows[x->rows[i].same_as].res.o;
    st = aa_npy_write(path, o, o->fmt, err);
  }
  return st;
}

/* The problem and the sequence's inputs from the options; 0 or 2 after a message. */
static int setup(inv_t *x, const cli_args_t *a) {
  cli_problem_opts_t p;
  cli_problem_opts_init(&p);
  if (cli_problem_opts_parse(&p, a, x->cmd, (size_t)1 << 20, 256) != 0) return 2;
  size_t nq = p.n, nk = p.n;
  if (cli_get(a, "n-q") && cli_size(&nq, x->cmd, "n-q", cli_get(a, "n-q"), 1, (size_t)1 << 20)) return 2;
  if (cli_get(a, "n-k") && cli_size(&nk, x->cmd, "n-k", cli_get(a, "n-k"), 1, (size_t)1 << 20)) return 2;
  aa_error_t err = {{0}};
  x->r = malloc(sizeof *x->r);
  if (x->r == NULL || aa_recipe_from_spec(x->r, cli_get(a, "variant") ? cli_get(a, "variant") : "fa2-h100", &err)) {
    cli_error(x->cmd, "--variant: %s", x->r ? err.msg : "out of memory");
    return 2;
  }
  x->sms = x->r->fwd_split_sms ? x->r->fwd_split_sms : 132;
  if (cli_get(a, "sms") && cli_size(&x->sms, x->cmd, "sms", cli_get(a, "sms"), 1, 65536)) return 2;
  if (parse_batches(x, cli_get(a, "batch") ? cli_get(a, "batch") : "1,2,4,8,16,32,64,128")) return 2;
  int st = cli_get(a, "inputs") ? cli_inputs_load(&x->in, cli_get(a, "inputs"), &err)
                                : cli_inputs_draw_qk(&x->in, p.seed, p.dist, p.sigma, nq, nk, p.d, p.heads,
                                                     p.kv_heads ? p.kv_heads : p.heads, 0, x->r->io_fmt, &err);
  if (st != AA_OK) {
    cli_error(x->cmd, "inputs: %s", err.msg);
    return cli_exit_status(st);
  }
  const aa_tensor_t *q = &x->in.q, *k = &x->in.k;
  aa_problem_init(&x->pb, q->shape[1], k->shape[1], q->shape[2], q->shape[0], k->shape[0]);
  x->pb.causal = cli_get(a, "causal") != NULL;
  x->pb.align = AA_ALIGN_BOTTOM_RIGHT;
  if (p.scale > 0) x->pb.scale_default = 0, x->pb.scale = p.scale;
  if ((st = aa_problem_check(&x->pb, &err)) != AA_OK) cli_error(x->cmd, "%s", err.msg);
  return st != AA_OK ? 2 : 0;
}

static void release(inv_t *x) {
  for (size_t i = 0; i < x->nrows; i++)
    aa_attn_result_free(&x->rows[i].res);
  cli_inputs_free(&x->in);
  free(x->r);
}

int aa_cmd_invariance(int argc, char **argv) {
  cli_args_t a;
  int rc;
  if ((rc = cli_args_parse(&a, "invariance",
                           "usage: attnacc invariance [--variant SPEC] [problem options] [--batch LIST]", description,
                           opts, sizeof opts / sizeof opts[0], argc, argv)) >= 0)
    return rc;
  inv_t x = {.cmd = "invariance"};
  aa_error_t err = {{0}};
  if ((rc = setup(&x, &a)) == 0) {
    int st = compute(&x, &err);
    if (st == AA_OK && cli_get(&a, "save")) st = save_outputs(&x, cli_get(&a, "save"), &err);
    if (st != AA_OK) {
      cli_error(x.cmd, "%s", err.msg);
      rc = cli_exit_status(st);
    } else if (cli_get(&a, "json")) {
      rc = print_json(&x) == AA_OK ? 0 : 1;
    } else {
      print_table(&x);
    }
  }
  release(&x);
  return rc;
}
