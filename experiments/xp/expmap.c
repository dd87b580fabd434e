/* attnacc: the `expmap` command: exhaustive or sampled error map of exp constructions (ratio, errors, NaN/Inf/...
 * regions). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commands.h"

#define MAXC 16

static const char *help_text =
    "usage: attnacc expmap --construction NAME [--param K=V ...] [--construction NAME2 ...]\n"
    "                      [--lo X] [--hi Y] [--exhaustive | --samples N [--seed S]] [--shift S]\n"
    "                      [--packed] [--ref-check N] [--threads T] [--curve FILE] [--curve-points N] [--json]\n"
    "\n"
    "Evaluate exp constructions on FP32 inputs and compare them with 2^x. Every construction\n"
    "takes BASE-2 inputs: x is the score after the shift, in log2 units.\n"
    "\n"
    "options (defaults in brackets):\n"
    "  --construction NAME  exact, schraudolph-fp32, schraudolph-bf16, quadratic-bf16, fa4-poly\n"
    "                       (repeatable; each --param applies to the latest construction)\n"
    "  --param K=V          construction parameter; see `attnacc expmap --list`\n"
    "  --list               list the constructions, their parameters and defaults, and exit\n"
    "  --lo X, --hi Y       input interval [-149, 0x1.fffffep+6]: where the exact 2^x is a finite\n"
    "                       non-zero FP32, i.e. x in [-149, 128)\n"
    "  --exhaustive         every FP32 in [lo, hi] (the default)\n"
    "  --samples N          N uniform samples of [lo, hi] from pcg64 (aa_rng_derive(S, {0x657870}))\n"
    "  --seed S             sample seed [1]\n"
    "  --shift S            the construction gets fl32(x - S), the reference is 2^(x - S) [0]\n"
    "  --packed             map the packed BF16 output (default: FP32 output, except for BF16-native\n"
    "                       constructions, which always give BF16)\n"
    "  --ref-check N        inputs (spread evenly) on which the libm reference is checked against MPFR [4096]\n"
    "  --threads T          OpenMP threads [OpenMP default]; results do not depend on it\n"
    "  --curve FILE         also write a decimated CSV curve (x, ratio and output class per construction)\n"
    "                       for plots/expratio.gp\n"
    "  --curve-points N     points of the curve, uniform in x [4000]\n"
    "  --json               JSON instead of text: one object per construction (an array when several)\n"
    "\n"
    "Reference: libm exp2 in FP64 at the (unrounded) input. Its relative error is below 2^-52 =\n"
    "2.22e-16 (reference_max_relerr): glibc documents at most 1 ulp, tests/texp checks it against\n"
    "MPFR on a dense sample and on the proof-relevant inputs, and each run re-checks it against\n"
    "MPFR exp2 at 113 bits on --ref-check inputs (reference_checked, reference_observed_max_relerr).\n"
    "Ratio and relative errors are over the 'valid' inputs: finite, non-negative output and finite\n"
    "non-zero reference. cr_mismatch counts valid inputs whose output differs from the correctly\n"
    "rounded 2^x in the output format (0 for `exact`).\n"
    "\n"
    "Runs: inputs are visited in increasing order; each class of output (nan, inf, negative, zero,\n"
    "subnormal) is reported as a count and as [lo, hi] runs of consecutive inputs (with --samples:\n"
    "consecutive sorted samples). Each run is also given in effective encoded base-two exponent:\n"
    "E = S / 2^m - 127, where S is the signed integer the construction writes over the sign,\n"
    "exponent and mantissa fields before it wraps into the unsigned pattern, and m = 23 (FP32) or\n"
    "7 (BF16). For a positive normal result E is exponent + mantissa/2^m, a piecewise-linear log2 of\n"
    "the value; for S < 0 it keeps counting downward where the pattern itself has wrapped into the\n"
    "sign bit (0xFF81..0xFFFF NaN at E in [-127.99, -127.008] for BF16). The JSON's\n"
    "paper_nan_exponents says whether E = -127 and E = -126.5 (the NaN exponents that the\n"
    "Blackwell FlashAttention paper, Stashuk, Yu, Shah, reports in section 5.5; REFERENCES.md\n"
    "[blackwell-fa]) lie within one encoding step of a NaN run.\n"
    "\n"
    "exit status: 0 ok, 2 bad options, 1 failure\n";

static void list_constructions(void) {
  int n, nc;
  const aa_exp_info_t *reg = aa_exp_registry(&n);
  const aa_exp_param_info_t *cp = aa_exp_common_params(&nc);
  for (int i = 0; i < n; i++) {
    printf("%s\n  %s\n", reg[i].name, reg[i].description);
    for (int j = 0; j < reg[i].nparams; j++)
      printf("    %-8s [%s] %s\n", reg[i].params[j].name, reg[i].params[j].defval, reg[i].params[j].help);
    for (int j = 0; j < nc; j++)
      printf("    %-8s [%s] %s\n", cp[j].name, cp[j].defval, cp[j].help);
  }
}

static int parse_float(float *out, const char *opt, const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || v != v) {
    cli_error("expmap", "--%s: '%s' is not a number", opt, s);
    return 2;
  }
  float f = (float)v;
  if ((double)f != v) {
    cli_error("expmap", "--%s: %s is not an FP32 value (nearest %.9g)", opt, s, (double)f);
    return 2;
  }
  *out = f;
  return 0;
}

/* The [lo, hi] runs of class c: the inputs x (exponent 0) or their encoded exponents. */
static json_t *json_ranges(const aa_exp_map_t *m, const aa_exp_t *e, int c, int exponent, int bf16, float shift) {
  json_t *a = json_array();
  int bad = 0;
  for (int r = 0; r < m->nranges[c]; r++) {
    float lo = m->ranges[c][r].lo, hi = m->ranges[c][r].hi;
    json_t *p = json_array();
    bad |= aa_json_push(p, aa_json_num(exponent ? aa_exp_encoded_exponent(e, lo - shift, bf16) : lo));
    bad |= aa_json_push(p, aa_json_num(exponent ? aa_exp_encoded_exponent(e, hi - shift, bf16) : hi));
    bad |= aa_json_push(a, p);
  }
  return bad ? (json_decref(a), NULL) : a;
}

/* Is E within one encoding step of some NaN run (in encoded-exponent terms)? */
static int nan_near(const aa_exp_map_t *m, const aa_exp_t *e, int bf16, float shift, double E) {
  double step = bf16 ? 1.0 / 128 : 0x1p-23;
  for (int r = 0; r < m->nranges[AA_EXP_CLS_NAN]; r++) {
    double a = aa_exp_encoded_exponent(e, m->ranges[AA_EXP_CLS_NAN][r].lo - shift, bf16);
    double b = aa_exp_encoded_exponent(e, m->ranges[AA_EXP_CLS_NAN][r].hi - shift, bf16);
    if (a > b) {
      double t = a;
      a = b;
      b = t;
    }
    if (E >= a - step && E <= b + step) return 1;
  }
  return 0;
}

/* The classes' counts, runs and ranges into j (keys CLASS_count, CLASS_runs, CLASS_ranges...). */
static int json_classes(json_t *j, const aa_exp_map_t *m, const aa_exp_t *e, int bf16, float shift) {
  int bad = 0;
  for (int c = 0; c < AA_EXP_NCLS; c++) {
    const char *n = aa_exp_cls_name(c);
    char key[64];
    snprintf(key, sizeof key, "%s_count", n);
    bad |= aa_json_set(j, key, aa_json_u64(m->cls_count[c]));
    snprintf(key, sizeof key, "%s_runs", n);
    bad |= aa_json_set(j, key, aa_json_u64(m->cls_runs[c]));
    snprintf(key, sizeof key, "%s_ranges", n);
    bad |= aa_json_set(j, key, json_ranges(m, e, c, 0, bf16, shift));
    snprintf(key, sizeof key, "%s_ranges_exponent", n);
    bad |= aa_json_set(j, key, json_ranges(m, e, c, 1, bf16, shift));
    snprintf(key, sizeof key, "%s_ranges_truncated", n);
    bad |= aa_json_set(j, key, aa_json_bool(m->ranges_truncated[c]));
  }
  return bad;
}

static json_t *json_one(const aa_exp_map_t *m, const aa_exp_t *e, int bf16, float lo, float hi, int exhaustive,
                        uint64_t seed, float shift) {
  char spec[256];
  json_t *j = json_object(), *nan = json_object();
  aa_exp_describe(spec, sizeof spec, e);
  int bad = aa_json_set(j, "version", aa_json_str(AA_VERSION));
  bad |= aa_json_set(j, "git", aa_json_str(AA_GIT_HASH));
  bad |= aa_json_set(j, "construction", aa_json_str(aa_exp_info(e->kind)->name));
  bad |= aa_json_set(j, "spec", aa_json_str(spec));
  bad |= aa_json_set(j, "input_base", json_string("2"));
  bad |= aa_json_set(j, "output", json_string(bf16 ? "bf16" : "fp32"));
  bad |= aa_json_set(j, "mode", json_string(exhaustive ? "exhaustive" : "samples"));
  if (!exhaustive) bad |= aa_json_set(j, "seed", aa_json_u64(seed));
  bad |= aa_json_set(j, "lo", aa_json_num(lo));
  bad |= aa_json_set(j, "hi", aa_json_num(hi));
  bad |= aa_json_set(j, "shift", aa_json_num(shift));
  bad |= aa_json_set(j, "inputs", aa_json_u64(m->inputs));
  bad |= aa_json_set(j, "valid", aa_json_u64(m->valid));
  bad |= aa_json_set(j, "min_ratio", aa_json_num(m->min_ratio));
  bad |= aa_json_set(j, "max_ratio", aa_json_num(m->max_ratio));
  bad |= aa_json_set(j, "max_rel_err", aa_json_num(m->max_rel_err));
  bad |= aa_json_set(j, "mean_rel_err", aa_json_num(m->mean_rel_err));
  bad |= aa_json_set(j, "min_ratio_at", aa_json_num(m->argmin_ratio));
  bad |= aa_json_set(j, "max_ratio_at", aa_json_num(m->argmax_ratio));
  bad |= aa_json_set(j, "max_rel_err_at", aa_json_num(m->argmax_rel_err));
  bad |= aa_json_set(j, "cr_mismatch", shift != 0.0f ? json_null() : aa_json_u64(m->cr_mismatch));
  bad |= json_classes(j, m, e, bf16, shift);
  bad |= aa_json_set(nan, "-127", aa_json_bool(nan_near(m, e, bf16, shift, -127.0)));
  bad |= aa_json_set(nan, "-126.5", aa_json_bool(nan_near(m, e, bf16, shift, -126.5)));
  bad |= aa_json_set(j, "paper_nan_exponents", nan);
  bad |= aa_json_set(j, "reference", json_string("libm exp2 (FP64)"));
  bad |= aa_json_set(j, "reference_max_relerr", aa_json_num(AA_EXP_REF_RELERR));
  bad |= aa_json_set(j, "reference_checked", aa_json_u64(m->ref_checked));
  bad |= aa_json_set(j, "reference_observed_max_relerr", aa_json_num(m->ref_observed_max_relerr));
  return bad ? (json_decref(j), NULL) : j;
}

static void text_one(const aa_exp_map_t *m, const aa_exp_t *e, int bf16, float shift) {
  char spec[256];
  aa_exp_describe(spec, sizeof spec, e);
  printf("%s (output %s)\n", spec, bf16 ? "bf16" : "fp32");
  printf("  inputs %llu, valid %llu\n", (unsigned long long)m->inputs, (unsigned long long)m->valid);
  printf("  ratio output/2^x in [%.7f, %.7f] (at x = %.9g, %.9g)\n", m->min_ratio, m->max_ratio,
         (double)m->argmin_ratio, (double)m->argmax_ratio);
  printf("  max rel err %.4e (at x = %.9g), mean rel err %.4e\n", m->max_rel_err, (double)m->argmax_rel_err,
         m->mean_rel_err);
  if (shift == 0.0f)
    printf("  differs from correctly rounded 2^x: %llu inputs\n", (unsigned long long)m->cr_mismatch);
  for (int c = 0; c < AA_EXP_NCLS; c++) {
    if (!m->cls_count[c]) continue;
    printf("  %-9s %llu inputs in %llu runs%s\n", aa_exp_cls_name(c), (unsigned long long)m->cls_count[c],
           (unsigned long long)m->cls_runs[c], m->ranges_truncated[c] ? " (run list truncated)" : "");
    for (int r = 0; r < m->nranges[c]; r++)
      printf("    x in [%.9g, %.9g]  E in [%.7g, %.7g]\n", (double)m->ranges[c][r].lo, (double)m->ranges[c][r].hi,
             aa_exp_encoded_exponent(e, m->ranges[c][r].lo - shift, bf16),
             aa_exp_encoded_exponent(e, m->ranges[c][r].hi - shift, bf16));
  }
  printf("  reference: libm exp2, bound %.3g, checked on %llu inputs, observed max %.3g\n", AA_EXP_REF_RELERR,
         (unsigned long long)m->ref_checked, m->ref_observed_max_relerr);
}

static int write_curve(const char *path, const aa_exp_t *e, const int *bf16, int ne, float lo, float hi, float shift,
                       size_t npts) {
  cli_sb_t sb = {0};
  cli_sb_printf(&sb,
                "# attnacc %s (git %s) expmap curve: ratio = output / 2^(x - shift), class 0 valid, 1 nan, 2 inf, "
                "3 negative, 4 zero, 5 subnormal; shift %.9g\n",
                AA_VERSION, AA_GIT_HASH, (double)shift);
  aa_csv_t csv;
  aa_csv_init(&csv, &sb);
  aa_csv_str(&csv, "x");
  for (int c = 0; c < ne; c++) {
    char spec[256];
    aa_exp_describe(spec, sizeof spec, &e[c]);
    for (char *q = spec; *q; q++)
      if (*q == ',') *q = ' '; /* gnuplot's columnhead takes the field as it stands */
    aa_csv_str(&csv, spec);
    aa_csv_printf(&csv, "class%d", c + 1);
  }
  aa_csv_end(&csv);
  for (size_t i = 0; i < npts; i++) {
    float x = (float)((double)lo + ((double)hi - (double)lo) * (double)i / (double)(npts > 1 ? npts - 1 : 1));
    double ref = exp2((double)x - (double)shift);
    aa_csv_printf(&csv, "%.9g", (double)x);
    for (int c = 0; c < ne; c++) {
      float xin = x - shift;
      float v = bf16[c] ? aa_bf16_to_f32((uint16_t)aa_exp_eval_packed(&e[c], xin, xin)) : aa_exp_eval(&e[c], xin);
      uint32_t u = aa_f32_bits(v) & 0x7fffffffu;
      int cls = u > 0x7f800000u ? 1 : u == 0x7f800000u ? 2 : u == 0 ? 4 : v < 0 ? 3 : u < 0x00800000u ? 5 : 0;
      if (cls == 0 || cls == 5)
        aa_csv_printf(&csv, "%.9g", (double)v / ref);
      else
        aa_csv_str(&csv, "nan");
      aa_csv_printf(&csv, "%d", cls);
    }
    aa_csv_end(&csv);
  }
  aa_error_t err;
  int st = sb.oom ? AA_ENOMEM : aa_file_write(path, sb.buf, sb.len, &err);
  cli_sb_free(&sb);
  if (st != AA_OK) {
    cli_error("expmap", "--curve: %s", st == AA_ENOMEM ? "out of memory" : err.msg);
    return 1;
  }
  return 0;
}

/* The command's settings. */
typedef struct {
  aa_exp_t e[MAXC];
  int ne, json, exhaustive, packed, threads;
  float lo, hi, shift;
  uint64_t nsamples, seed;
  size_t ref_check, curve_points;
  const char *curve;
} expmap_args_t;

/* --param K=V: a parameter of the latest construction. */
static int parse_param(expmap_args_t *X, const char *val) {
  char kv[256], *eq;
  aa_error_t err;
  if (X->ne == 0) {
    cli_error("expmap", "--param %s comes before any --construction", val);
    return 2;
  }
  if (strlen(val) >= sizeof kv || (eq = strchr(strcpy(kv, val), '=')) == NULL) {
    cli_error("expmap", "--param: '%s' is not K=V", val);
    return 2;
  }
  *eq = '\0';
  if (aa_exp_set(&X->e[X->ne - 1], kv, eq + 1, &err) != AA_OK) {
    cli_error("expmap", "--param: %s", err.msg);
    return 2;
  }
  return 0;
}

/* One option that takes a value: 0, or 2 after a message. */
static int parse_valued(expmap_args_t *X, const char *a, const char *val) {
  aa_error_t err;
  size_t t;
  int rc;
  if (strcmp(a, "--construction") == 0) {
    if (X->ne == MAXC) {
      cli_error("expmap", "at most %d constructions", MAXC);
      return 2;
    }
    if (aa_exp_init(&X->e[X->ne], val, &err) != AA_OK) {
      cli_error("expmap", "--construction: %s", err.msg);
      return 2;
    }
    X->ne++;
    return 0;
  }
  if (strcmp(a, "--param") == 0) return parse_param(X, val);
  if (strcmp(a, "--lo") == 0) return parse_float(&X->lo, "lo", val);
  if (strcmp(a, "--hi") == 0) return parse_float(&X->hi, "hi", val);
  if (strcmp(a, "--shift") == 0) {
    if ((rc = parse_float(&X->shift, "shift", val))) return rc;
    if (isfinite(X->shift)) return 0;
    cli_error("expmap", "--shift must be finite");
    return 2;
  }
  if (strcmp(a, "--samples") == 0) {
    if ((rc = cli_u64(&X->nsamples, "expmap", "samples", val))) return rc;
    if (X->nsamples > 0 && X->nsamples <= (UINT64_C(1) << 30)) return 0;
    cli_error("expmap", "--samples must be in 1..2^30, not %s", val);
    return 2;
  }
  if (strcmp(a, "--seed") == 0) return cli_u64(&X->seed, "expmap", "seed", val);
  if (strcmp(a, "--ref-check") == 0) return cli_size(&X->ref_check, "expmap", "ref-check", val, 0, 1u << 24);
  if (strcmp(a, "--threads") == 0) {
    if ((rc = cli_size(&t, "expmap", "threads", val, 1, 1024))) return rc;
    X->threads = (int)t;
    return 0;
  }
  if (strcmp(a, "--curve") == 0) {
    X->curve = val;
    return 0;
  }
  if (strcmp(a, "--curve-points") == 0) return cli_size(&X->curve_points, "expmap", "curve-points", val, 2, 10000000);
  cli_error("expmap", "unknown option '%s' (see attnacc expmap --help)", a);
  return 2;
}

/* The command line: -1 to go on, 0 after --help or --list, 2 after a message. */
static int parse_args(expmap_args_t *X, int argc, char **argv) {
  aa_error_t err;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    int rc;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(help_text, stdout);
      return 0;
    }
    if (strcmp(a, "--list") == 0) {
      list_constructions();
      return 0;
    }
    int *flag = strcmp(a, "--json") == 0         ? &X->json
                : strcmp(a, "--exhaustive") == 0 ? &X->exhaustive
                : strcmp(a, "--packed") == 0     ? &X->packed
                                                 : NULL;
    if (flag != NULL) {
      *flag = 1;
      continue;
    }
    if (val == NULL) {
      cli_error("expmap", "%s: unknown option or missing value (see attnacc expmap --help)", a);
      return 2;
    }
    i++;
    if ((rc = parse_valued(X, a, val)) != 0) return rc;
  }
  if (X->ne == 0) {
    cli_error("expmap", "--construction NAME is required (see attnacc expmap --list)");
    return 2;
  }
  if (X->exhaustive && X->nsamples) {
    cli_error("expmap", "--exhaustive and --samples exclude each other");
    return 2;
  }
  if (!(X->lo <= X->hi)) {
    cli_error("expmap", "need --lo <= --hi (got %.9g > %.9g)", (double)X->lo, (double)X->hi);
    return 2;
  }
  if (X->curve != NULL && cli_check_out_file(X->curve, &err) != AA_OK) {
    cli_error("expmap", "--curve: %s", err.msg);
    return 2;
  }
  return -1;
}

/* The maps over the seeded samples (pcg64 stream aa_rng_derive(seed, {0x657870})) or every FP32 input of [lo, hi]. */
static int compute_maps(aa_exp_map_t *maps, const expmap_args_t *X, aa_error_t *err) {
  aa_exp_map_opts_t mo = {X->packed, (int)X->ref_check, X->threads, X->shift};
  aa_pcg64_t rng;
  uint64_t tag = 0x657870;
  float *xs;
  int st;
  if (X->nsamples == 0) return aa_exp_map_interval(maps, X->e, X->ne, X->lo, X->hi, &mo, err);
  if ((xs = malloc(sizeof(float) * X->nsamples)) == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  aa_rng_derive(&rng, X->seed, &tag, 1);
  for (uint64_t i = 0; i < X->nsamples; i++) {
    float x = (float)((double)X->lo + ((double)X->hi - (double)X->lo) * aa_pcg64_uniform(&rng));
    xs[i] = x < X->lo ? X->lo : x > X->hi ? X->hi : x;
  }
  st = aa_exp_map_samples(maps, X->e, X->ne, xs, (size_t)X->nsamples, &mo, err);
  free(xs);
  return st;
}

/* One construction: its object; several: an array of them. */
static int print_json(const aa_exp_map_t *maps, const expmap_args_t *X, const int *bf16) {
  json_t *all = X->ne > 1 ? json_array() : NULL, *one = NULL;
  int bad = 0;
  for (int c = 0; c < X->ne; c++) {
    one = json_one(&maps[c], &X->e[c], bf16[c], X->lo, X->hi, X->nsamples == 0, X->seed, X->shift);
    if (all != NULL) bad |= aa_json_push(all, one);
  }
  char *text = bad ? NULL : aa_json_text(all != NULL ? all : one, 0, NULL);
  json_decref(all != NULL ? all : one);
  if (text == NULL) {
    cli_error("expmap", "out of memory");
    return 1;
  }
  fputs(text, stdout);
  free(text);
  return 0;
}

int aa_cmd_expmap(int argc, char **argv) {
  expmap_args_t X = {.lo = -149.0f, .hi = 0x1.fffffep+6f, .seed = 1, .ref_check = 4096, .curve_points = 4000};
  aa_exp_map_t *maps;
  aa_error_t err;
  int bf16[MAXC], st;
  if ((st = parse_args(&X, argc, argv)) >= 0) return st;
  if ((maps = calloc((size_t)X.ne, sizeof *maps)) == NULL) return 1;
  if ((st = compute_maps(maps, &X, &err)) != AA_OK) {
    cli_error("expmap", "%s", err.msg);
    free(maps);
    return cli_exit_status(st);
  }
  for (int c = 0; c < X.ne; c++)
    bf16[c] = X.packed || aa_exp_info(X.e[c].kind)->bf16_native;
  if (X.json) {
    st = print_json(maps, &X, bf16);
  } else {
    printf("attnacc %s (git %s) expmap over [%.9g, %.9g]%s, %s\n", AA_VERSION, AA_GIT_HASH, (double)X.lo,
           (double)X.hi, X.shift != 0.0f ? " shifted" : "", X.nsamples ? "samples" : "every FP32 input");
    for (int c = 0; c < X.ne; c++)
      text_one(&maps[c], &X.e[c], bf16[c], X.shift);
  }
  free(maps);
  if (st != 0) return st;
  if (X.curve != NULL && write_curve(X.curve, X.e, bf16, X.ne, X.lo, X.hi, X.shift, X.curve_points)) return 1;
  return fflush(stdout) == 0 ? 0 : 1;
}
