/* attnacc: the `explain` command: a recipe's error budget, one rounding site made exact at a time. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/masks.h"
#include "commands.h"

static const char *const usage_line = "usage: attnacc explain --variant SPEC [run's problem options]";
static const char *const description =
    "Where a recipe's error comes from: the part of it each rounding site contributes.\n\n"
    "For each rounding site of the recipe (each format, accumulation-model and exp/tanh\n"
    "key that the key table marks as a rounding: attnacc\n"
    "list --keys, 'rounding -> X') whose value is not already exact, the same recipe with\n"
    "that one site made exact (fp64, fp64-seq, exact) is run on the same inputs as the\n"
    "recipe itself and as the recipe with every site exact, and each is compared with the\n"
    "oracle (rel_l2 of o, dq, dk, dv). A site's part is sqrt(total^2 - e^2), e the error\n"
    "with that site exact: the error it removes when the errors add in quadrature; it is\n"
    "printed negative, -sqrt(e^2 - total^2), when making the site exact increased the\n"
    "error. The last lines compare sqrt(floor^2 + the signed sum of the squared parts)\n"
    "(floor: every site exact) with the\n"
    "total; a ratio away from 1 means the roundings do not add in quadrature: below 1,\n"
    "correlated roundings (one rounding's error is carried and re-rounded by the next, or\n"
    "two sites round the same value, so making either exact removes most of the shared\n"
    "error); above 1, roundings that partly cancel. A site whose exact value fails the\n"
    "recipe check (e.g. alu = fp64 with a BF16 exp construction) is listed as not separable.\n"
    "Sites of one key group (fwd.exp and bwd.exp: one mechanism, whose bias cancels in\n"
    "the normalisation only while both sides share it) are also made exact together, and\n"
    "the sum counts that joint part instead of the single ones.\n"
    "The inputs are drawn in the recipe's io format; making io exact removes only the\n"
    "rounding of the outputs. SPEC is a preset, a recipe file or NAME:key=value,...\n"
    "A recipe with conditional keys (when COND: key = value) is first resolved for the\n"
    "problem of --n, --n-q, --d, --causal and the mask options (--mask, --key-len,\n"
    "--logit-offset: `masked`), and the lines that apply are printed.\n"
    "Problem options are run's (attnacc run --help): --n, --d, --heads, --kv-heads, --seed,\n"
    "--dist, --sigma, --scale, --causal, --window, --softcap, --alibi, --inputs, and the\n"
    "masks --mask, --key-len, --logit-offset (a mask's first NaN/Inf is named too), ...;\n"
    "--recipe, --json, --out, --save, --save-oracle, --dropout and --cu-seqlens are not\n"
    "available here. Exit status: 0 done, 2 bad usage or input, 1 failure while computing.";

#define MAX_SITES 64

/* A recipe with conditional keys (lib/recipe.h) is explained as resolved
   for the problem of the command line (--n, --n-q, --d, --causal and run's
   mask options --mask, --key-len, --logit-offset, read by run's own
   masks_cli_problem; run's defaults n = 1024, d = 128): each site is then
   made exact in the recipe that runs, as aa_attn_run would resolve it
   (aa_attn_case: `masked` with a mask, key padding, bias or offset).
   Prints which lines apply. 0, or 2 after an error message. */
static int resolve_for_problem(aa_recipe_t *r, const char *cmd, const cli_args_t *pa) {
  const char *sn = cli_get(pa, "n"), *sq = cli_get(pa, "n-q"), *sd = cli_get(pa, "d"), *sh = cli_get(pa, "heads");
  if (cli_get(pa, "inputs") != NULL || cli_get(pa, "cu-seqlens") != NULL) {
    cli_error(cmd, "recipe '%s' has conditional keys: give the problem with --n, --n-q, --d, --causal", r->name);
    return 2;
  }
  size_t n_k = sn != NULL ? strtoull(sn, NULL, 10) : 1024, n_q = sq != NULL ? strtoull(sq, NULL, 10) : n_k;
  size_t heads = sh != NULL ? strtoull(sh, NULL, 10) : 1;
  aa_problem_t pb;
  masks_cli_t mc = {0};
  aa_problem_init(&pb, n_q, n_k, sd != NULL ? strtoull(sd, NULL, 10) : 128, heads, heads);
  pb.causal = cli_get(pa, "causal") != NULL;
  if (masks_cli_problem(&mc, cmd, pa, 1, &pb)) return 2;
  aa_recipe_case_t c = aa_attn_case(&pb);
  masks_cli_free(&mc);
  printf("conditional keys of %s for %s%s n_q=%zu n_k=%zu d=%zu (applied in this order; a later line wins):\n",
         r->name, c.causal ? "causal" : "dense", c.masked ? " masked" : "", c.n_q, c.n_k, c.d);
  for (size_t i = 0; i < r->nwhen; i++) {
    char line[512];
    aa_recipe_when_format(line, sizeof line, &r->when[i]);
    printf("  %-8s %s", aa_recipe_when_matches(&r->when[i], &c) ? "applies" : "-", line);
  }
  aa_error_t e = {{0}};
  if (aa_recipe_resolve(r, r, &c, &e) != AA_OK) {
    cli_error(cmd, "%s", e.msg);
    return 2;
  }
  return 0;
}

typedef struct {
  const char *key[MAX_SITES]; /* the site of variant 1 + i */
  int group[MAX_SITES];       /* its key group (aa_recipe_key_info_t.group), 0: none */
  int joint[MAX_SITES];       /* 1: the row makes every site of its group exact together */
  char jname[MAX_SITES][64];
  const char *exact[MAX_SITES];
  size_t nsites;
  const char *skipped[MAX_SITES]; /* sites whose exact value fails the check */
  char why[MAX_SITES][sizeof(((aa_error_t *)0)->msg)];
  size_t nskipped;
  size_t nalready; /* sites already exact */
} explain_t;

static const char *const outs[4] = {"o", "dq", "dk", "dv"};

static double rel(const cli_variant_t *v, int o) {
  for (int i = 0; i < v->nout; i++)
    if (!strcmp(v->out[i].name, outs[o])) return v->out[i].m.rel_l2;
  return NAN;
}

/* 1 when row i enters the quadrature sum: a joint row, or a single site
   whose group has no joint row (then the group counts once, jointly). */
static int counted(const explain_t *x, size_t i) {
  if (x->joint[i] || x->group[i] == 0) return 1;
  for (size_t j = 0; j < x->nsites; j++)
    if (x->joint[j] && x->group[j] == x->group[i]) return 0;
  return 1;
}

/* The budget table: total, each site's part, the floor and the quadrature sum; sum2 and tot, flo for the notes. */
static void print_table(const explain_t *x, const cli_report_t *rep, const aa_recipe_t *recipes,
                        const cli_variant_t *vs, size_t n, double *sum2, double *tot, double *flo) {
  const aa_problem_t *pb = rep->pb;
  printf("problem: n_q=%zu n_k=%zu d=%zu heads=%zu kv_heads=%zu causal=%s seed=%llu dist=%s sigma=%g\n", pb->n_q,
         pb->n_k, pb->d, pb->heads, pb->kv_heads, pb->causal ? "yes" : "no", (unsigned long long)rep->seed,
         rep->dist != NULL ? rep->dist : "files", rep->sigma);
  printf("error budget of %s: rel_l2 against the oracle; part = sqrt(total^2 - e^2), e = rel_l2 with that site "
         "exact\n",
         recipes[0].name);
  printf("%-22s %-12s %-12s %-12s %-12s %-12s\n", "site", "exact", "o", "dq", "dk", "dv");
  printf("%-22s %-12s", "total", "");
  for (int o = 0; o < 4; o++) {
    tot[o] = rel(&vs[0], o);
    flo[o] = rel(&vs[n - 1], o);
    sum2[o] = 0;
    printf(" %-12.4e", tot[o]);
  }
  printf("\n");
  for (size_t i = 0; i < x->nsites; i++) {
    const cli_variant_t *v = &vs[1 + i];
    printf("%-22s %-12s", x->key[i], x->exact[i]);
    for (int o = 0; o < 4; o++) {
      double e = rel(v, o), d2 = tot[o] * tot[o] - e * e;
      if (counted(x, i)) sum2[o] += d2; /* signed: a negative part offsets the others */
      if (d2 >= 0)
        printf(" %-12.4e", sqrt(d2));
      else
        printf(" -%-11.4e", sqrt(-d2)); /* making it exact made the error larger */
    }
    printf("\n");
  }
  printf("%-22s %-12s", "all sites exact", "(floor)");
  for (int o = 0; o < 4; o++)
    printf(" %-12.4e", flo[o]);
  printf("\n%-22s %-12s", "quadrature sum", "");
  for (int o = 0; o < 4; o++)
    printf(" %-12.4e", sqrt(fmax(0, sum2[o] + flo[o] * flo[o])));
  printf("\n%-22s %-12s", "sum / total", "");
  for (int o = 0; o < 4; o++)
    printf(" %-12.4f", tot[o] > 0 ? sqrt(fmax(0, sum2[o] + flo[o] * flo[o])) / tot[o] : 0.0);
  printf("\n");
}

/* What the table cannot show: a floor that is not exact, joint sites, sites already exact or not separable. */
static void print_notes(const explain_t *x, const aa_recipe_t *recipes, const cli_variant_t *vs, const double *tot,
                        const double *flo) {
  if (flo[0] > 1e-12 || flo[1] > 1e-12 || flo[2] > 1e-12 || flo[3] > 1e-12)
    printf("the floor is not exact: %s rounds where the key table marks no site (e.g. dropout, a dq_reduce "
           "parameter, softcap/ALiBi formation)\n",
           recipes[0].name);
  for (size_t i = 0; i < x->nsites; i++)
    if (x->joint[i])
      printf("%s: one mechanism (keys written together), made exact together too; the sum counts this joint part, "
             "not the single ones\n",
             x->key[i]);
  if (x->nalready > 0)
    printf("%zu rounding sites of the table are already exact in %s\n", x->nalready, recipes[0].name);
  for (size_t i = 0; i < x->nskipped; i++)
    printf("not separable: %s (%s)\n", x->skipped[i], x->why[i]);
  for (size_t i = 0, shown = 0; i < x->nsites && !shown; i++)
    for (int o = 0; o < 4 && !shown; o++)
      if (rel(&vs[1 + i], o) > tot[o]) {
        printf("a negative part: making that site exact increased the error (its rounding partly cancelled "
               "others)\n");
        shown = 1;
      }
}

/* Per output: whether the parts add in quadrature, and what it means when they do not. */
static void print_verdicts(const explain_t *x, const cli_variant_t *vs, const double *sum2, const double *tot,
                           const double *flo) {
  for (int o = 0; o < 4; o++) {
    double r = tot[o] > 0 ? sqrt(fmax(0, sum2[o] + flo[o] * flo[o])) / tot[o] : 1, worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < x->nsites; i++) {
      double e = rel(&vs[1 + i], o);
      if (counted(x, i) && e - tot[o] > worst) {
        worst = e - tot[o];
        wi = i;
      }
    }
    if (x->nsites > 0 && worst > 0.5 * tot[o]) {
      printf("%s: the parts do not add in quadrature (sum / total = %.3f): %s exact alone raises the error to "
             "%.4e; its rounding cancels another's (an error that normalisation divides out when both sides "
             "share it), so such sites are a pair, not parts\n",
             outs[o], r, x->key[wi], rel(&vs[1 + wi], o));
      continue;
    }
    if (x->nsites == 0)
      printf("%s: no rounding site to remove\n", outs[o]);
    else if (r >= 0.8 && r <= 1.25)
      printf("%s: the parts add in quadrature (sum / total = %.3f)\n", outs[o], r);
    else if (r < 0.8)
      printf("%s: the parts do not add in quadrature (sum / total = %.3f): correlated roundings, each site exact "
             "removes a shared error (one rounding re-rounds another's result)\n",
             outs[o], r);
    else
      printf("%s: the parts do not add in quadrature (sum / total = %.3f): roundings that partly cancel\n", outs[o],
             r);
  }
}

/* run's hook: the recipe (vs[0]), one variant per site, the floor (vs[n - 1]). */
static int report(void *ctx, const cli_report_t *rep, const aa_recipe_t *recipes, const cli_variant_t *vs, size_t n) {
  const explain_t *x = ctx;
  double sum2[4], tot[4], flo[4];
  print_table(x, rep, recipes, vs, n, sum2, tot, flo);
  print_notes(x, recipes, vs, tot, flo);
  print_verdicts(x, vs, sum2, tot, flo);
  if (vs[0].first.found) { /* where the first NaN/Inf was created, not only where it lands */
    char text[400];
    aa_attn_first_format(text, sizeof text, &vs[0].first);
    printf("first NaN/Inf (%s): %s\n", aa_attn_first_site_name(vs[0].first.site), text);
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

/* One variant per rounding site of the key table (that site made exact) into rs[1..]; all gets every site
   exact. Returns the count of recipes in rs. */
static size_t add_single_sites(explain_t *x, aa_recipe_t *rs, aa_recipe_t *all) {
  size_t nr = 1;
  for (size_t i = 0; i < aa_recipe_key_count(); i++) {
    aa_recipe_key_info_t k;
    char v[192];
    aa_recipe_key_info(&k, i);
    if (k.exact == NULL || aa_recipe_value(v, sizeof v, &rs[0], k.key) != AA_OK) continue;
    aa_recipe_t r = rs[0];
    aa_error_t e = {{0}};
    int st = aa_recipe_set(&r, k.key, k.exact, &e);
    char ve[192];
    if (st == AA_OK && aa_recipe_value(ve, sizeof ve, &r, k.key) == AA_OK && !strcmp(v, ve)) {
      x->nalready++; /* the site already holds its exact value */
      continue;
    }
    aa_recipe_set(all, k.key, k.exact, NULL);
    if (st != AA_OK || aa_recipe_check(&r, &e) != AA_OK) {
      if (x->nskipped < MAX_SITES) {
        x->skipped[x->nskipped] = k.key;
        snprintf(x->why[x->nskipped++], sizeof x->why[0], "%s", e.msg);
      }
      continue;
    }
    if (x->nsites == MAX_SITES) continue;
    snprintf(r.name, sizeof r.name, "%s", k.key);
    x->key[x->nsites] = k.key;
    x->group[x->nsites] = k.group;
    x->exact[x->nsites++] = k.exact;
    rs[nr++] = r;
  }
  return nr;
}

/* Keys of one group (fwd.exp and bwd.exp) model one mechanism, whose
   errors may cancel only while both sides share them: made exact jointly
   too, as one more variant per group. Returns the new count. */
static size_t add_joint_sites(explain_t *x, aa_recipe_t *rs, size_t nr) {
  for (size_t i = 0, ns = x->nsites; i < ns; i++) {
    int g = x->group[i], first = 1, members = 0;
    if (g == 0) continue;
    for (size_t j = 0; j < i; j++)
      if (x->group[j] == g) first = 0;
    if (!first || x->nsites == MAX_SITES) continue;
    aa_recipe_t r = rs[0];
    char jn[64] = "";
    for (size_t j = i; j < ns; j++)
      if (x->group[j] == g) {
        aa_recipe_set(&r, x->key[j], x->exact[j], NULL);
        snprintf(jn + strlen(jn), sizeof jn - strlen(jn), "%s%s", members++ ? "+" : "", x->key[j]);
      }
    if (members < 2 || aa_recipe_check(&r, NULL) != AA_OK) continue;
    snprintf(x->jname[x->nsites], sizeof x->jname[0], "%s", jn);
    snprintf(r.name, sizeof r.name, "%s", jn);
    x->key[x->nsites] = x->jname[x->nsites];
    x->exact[x->nsites] = x->exact[i];
    x->group[x->nsites] = g;
    x->joint[x->nsites++] = 1;
    rs[nr++] = r;
  }
  return nr;
}

int aa_cmd_explain(int argc, char **argv) {
  const char *cmd = "explain", *spec = NULL;
  static const char *const refused[] = {"recipe", "json", "out", "save", "save-oracle", "dropout", "cu-seqlens"};
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  int nrest = 0, status = 2;
  aa_recipe_t *rs = NULL;
  explain_t x;
  cli_args_t pa;
  aa_error_t err = {{0}};
  memset(&x, 0, sizeof x);
  if (rest == NULL) {
    cli_error(cmd, "out of memory");
    return 1;
  }
  rest[nrest++] = argv[0];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("%s\n\n%s\n", usage_line, description);
      free(rest);
      return fflush(stdout) == 0 ? 0 : 1;
    }
    if (!strcmp(a, "--variant") || !strncmp(a, "--variant=", 10)) {
      if (spec != NULL) {
        cli_error(cmd, "--variant is given twice");
        goto out;
      }
      if (a[9] == '=')
        spec = a + 10;
      else if (i + 1 < argc)
        spec = argv[++i];
      else {
        cli_error(cmd, "--variant needs a value");
        goto out;
      }
      continue;
    }
    rest[nrest++] = argv[i];
  }
  /* the problem options, read with run's own parser */
  if ((status = cli_run_args(&pa, cmd, nrest, rest)) >= 0) goto out;
  status = 2;
  for (size_t j = 0; j < sizeof refused / sizeof refused[0]; j++)
    if (cli_get(&pa, refused[j]) != NULL) {
      cli_error(cmd, "--%s is not available in explain (use attnacc run)", refused[j]);
      goto out;
    }
  if (spec == NULL) {
    cli_error(cmd, "give --variant SPEC (a preset, a recipe file or NAME:key=value,...)");
    goto out;
  }
  rs = calloc(MAX_SITES + 2, sizeof *rs);
  if (rs == NULL) {
    cli_error(cmd, "out of memory");
    status = 1;
    goto out;
  }
  int rc = aa_recipe_from_spec(&rs[0], spec, &err);
  if (rc != AA_OK) {
    cli_error(cmd, "--variant: %s", err.msg);
    status = cli_exit_status(rc);
    goto out;
  }
  if (rs[0].nwhen > 0 && resolve_for_problem(&rs[0], cmd, &pa) != 0) {
    status = 2;
    goto out;
  }
  aa_recipe_t all = rs[0];
  size_t nr = add_single_sites(&x, rs, &all);
  nr = add_joint_sites(&x, rs, nr);
  snprintf(all.name, sizeof all.name, "all-exact");
  if (aa_recipe_check(&all, &err) != AA_OK) {
    cli_error(cmd, "%s with every rounding site exact fails the recipe check: %s", rs[0].name, err.msg);
    status = 1;
    goto out;
  }
  rs[nr++] = all;
  status = cli_run_main(cmd, rs, nr, report, &x, nrest, rest);
out:
  free(rs);
  free(rest);
  return status;
}
