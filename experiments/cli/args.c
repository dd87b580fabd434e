/* attnacc: command-line messages, option parsing and numbers (the whole text a number in range). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* ---- messages ---- */

/* The message goes through aa_escape: it may quote an argument or a file's
   bytes, which must not reach the terminal as control sequences. */
void cli_error(const char *cmd, const char *fmt, ...) {
  char raw[2048], out[4 * sizeof raw];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  fprintf(stderr, "attnacc %s: %s\n", cmd, aa_escape(out, sizeof out, raw));
}

int cli_exit_status(int status) {
  return status == AA_ENOMEM || status == AA_EIO ? 1 : 2;
}

/* ---- options ---- */

static void print_help(const char *cmd, const char *usage, const char *desc, const cli_opt_t *opts, size_t n) {
  printf("usage: attnacc %s %s\n\n%s\n\noptions:\n", cmd, usage, desc);
  for (size_t i = 0; i < n; i++) {
    char lhs[64];
    snprintf(lhs, sizeof lhs, "--%s%s%s", opts[i].name, opts[i].metavar ? " " : "",
             opts[i].metavar ? opts[i].metavar : "");
    printf("  %-25s %s", lhs, opts[i].help);
    if (opts[i].def != NULL) printf(" (default: %s)", opts[i].def);
    printf("\n");
  }
  printf("  %-25s %s\n", "--help", "print this help and exit");
}

int cli_args_parse(cli_args_t *a, const char *cmd, const char *usage, const char *desc, const cli_opt_t *opts,
                   size_t n, int argc, char **argv) {
  a->opts = opts;
  a->n = n < CLI_MAX_OPTS ? n : CLI_MAX_OPTS; /* a longer table is a programming error: its tail is ignored */
  for (size_t i = 0; i < CLI_MAX_OPTS; i++)
    a->val[i] = NULL;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *eq, *name;
    size_t len, j;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      print_help(cmd, usage, desc, opts, n);
      return 0;
    }
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
      cli_error(cmd, "unexpected argument '%s' (see attnacc %s --help)", arg, cmd);
      return 2;
    }
    name = arg + 2;
    eq = strchr(name, '=');
    len = eq ? (size_t)(eq - name) : strlen(name);
    for (j = 0; j < a->n; j++)
      if (strlen(opts[j].name) == len && strncmp(opts[j].name, name, len) == 0) break;
    if (j == a->n) {
      cli_error(cmd, "unknown option '--%.*s' (see attnacc %s --help)", (int)len, name, cmd);
      return 2;
    }
    if (opts[j].metavar == NULL) {
      if (eq != NULL) {
        cli_error(cmd, "option --%s takes no value", opts[j].name);
        return 2;
      }
      a->val[j] = "1";
    } else if (eq != NULL) {
      a->val[j] = eq + 1;
    } else {
      if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
        cli_error(cmd, "option --%s needs a value %s", opts[j].name, opts[j].metavar);
        return 2;
      }
      a->val[j] = argv[++i];
    }
  }
  return -1;
}

const char *cli_get(const cli_args_t *a, const char *name) {
  for (size_t j = 0; j < a->n; j++)
    if (strcmp(a->opts[j].name, name) == 0) return a->val[j];
  return NULL;
}

int cli_u64(uint64_t *out, const char *cmd, const char *opt, const char *s) {
  char *end;
  unsigned long long v;
  if (s[0] < '0' || s[0] > '9') goto bad;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (*end != '\0') goto bad;
  if (errno == ERANGE) {
    cli_error(cmd, "--%s: '%s' is too large (at most %llu)", opt, s, (unsigned long long)UINT64_MAX);
    return 2;
  }
  *out = (uint64_t)v;
  return 0;
bad:
  cli_error(cmd, "--%s: '%s' is not a non-negative integer", opt, s);
  return 2;
}

int cli_size(size_t *out, const char *cmd, const char *opt, const char *s, size_t min, size_t max) {
  uint64_t v;
  if (s[0] < '0' || s[0] > '9') {
    cli_error(cmd, "--%s: '%s' is not a non-negative integer", opt, s);
    return 2;
  }
  if (cli_u64(&v, cmd, opt, s) != 0) return 2;
  if (v < min || v > max) {
    cli_error(cmd, "--%s: %s is out of range (must be between %zu and %zu)", opt, s, min, max);
    return 2;
  }
  *out = (size_t)v;
  return 0;
}

int cli_double(double *out, const char *cmd, const char *opt, const char *s, double min, double max, int min_open) {
  char *end;
  double v;
  errno = 0;
  v = strtod(s, &end);
  if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t') {
    cli_error(cmd, "--%s: '%s' is not a number", opt, s);
    return 2;
  }
  if (!isfinite(v) || (min_open ? !(v > min) : !(v >= min)) || !(v <= max)) {
    cli_error(cmd, "--%s: %s is out of range (must be %s %g and <= %g)", opt, s, min_open ? ">" : ">=", min, max);
    return 2;
  }
  *out = v;
  return 0;
}

int cli_oracle_target(double *out, const char *cmd, const char *s) {
  double v;
  if (s[0] == '2' && s[1] == '^') {
    char *end;
    long e;
    errno = 0;
    e = strtol(s + 2, &end, 10);
    if (end == s + 2 || *end != '\0' || errno || e < -96 || e > -8) {
      cli_error(cmd, "--oracle-target: '%s' is not 2^E with E an integer in -96..-8", s);
      return 2;
    }
    *out = ldexp(1.0, (int)e);
    return 0;
  }
  if (cli_double(&v, cmd, "oracle-target", s, AA_ORACLE_TARGET_MIN, AA_ORACLE_TARGET_MAX, 0)) return 2;
  *out = v;
  return 0;
}

const char *cli_dist_name(int dist) {
  return aa_layout_dist_name(dist);
}

void cli_problem_opts_init(cli_problem_opts_t *p) {
  *p = (cli_problem_opts_t){.n = 1024, .d = 128, .heads = 1, .kv_heads = 0, .seed = 1, .sigma = 1};
}

int cli_problem_opts_parse(cli_problem_opts_t *p, const cli_args_t *a, const char *cmd, size_t max_n,
                           size_t max_dim) {
  const char *s;
  if (((s = cli_get(a, "n")) && cli_size(&p->n, cmd, "n", s, 1, max_n)) ||
      ((s = cli_get(a, "d")) && cli_size(&p->d, cmd, "d", s, 1, max_dim)) ||
      ((s = cli_get(a, "heads")) && cli_size(&p->heads, cmd, "heads", s, 1, max_dim)) ||
      ((s = cli_get(a, "kv-heads")) && cli_size(&p->kv_heads, cmd, "kv-heads", s, 1, max_dim)) ||
      ((s = cli_get(a, "seed")) && cli_u64(&p->seed, cmd, "seed", s)))
    return 2;
  if ((s = cli_get(a, "dist")) != NULL && (p->dist = aa_layout_dist_from_name(s)) < 0) {
    cli_error(cmd, "--dist: '%s' is not normal, uniform, outlier, constant, near-constant, huge-keys or massive", s);
    return 2;
  }
  if (((s = cli_get(a, "sigma")) && cli_double(&p->sigma, cmd, "sigma", s, 0, 1e300, 1)) ||
      ((s = cli_get(a, "scale")) && cli_double(&p->scale, cmd, "scale", s, 0, 1e300, 1)))
    return 2;
  p->causal = cli_get(a, "causal") != NULL;
  return 0;
}
