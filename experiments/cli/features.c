/* attnacc: the problem-feature options of the run command (alignment, two-sided windows, softcap, ALiBi, varlen). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/features.h"

void features_cli_free(features_cli_t *fc) {
  free(fc->slopes);
  free(fc->cu_q);
  free(fc->cu_k);
  *fc = (features_cli_t){0};
}

/* One line of increasing integers from 0 into *out (malloc'd), count in *n. */
static int parse_cu_line(int32_t **out, size_t *n, const char *line, const char *cmd, const char *file, int lineno) {
  size_t cap = 16, m = 0;
  int32_t *v = malloc(cap * sizeof *v);
  const char *p = line;
  if (v == NULL) {
    cli_error(cmd, "out of memory");
    return 2;
  }
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r' || *p == '\n')
      p++;
    if (*p == '\0') break;
    char *end;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (end == p || errno != 0 || x < 0 || x > INT32_MAX ||
        !(*end == '\0' || *end == ' ' || *end == '\t' || *end == ',' || *end == '\r' || *end == '\n')) {
      /* the token alone (up to its separator), not the rest of the line and its newline */
      int tl = (int)strcspn(p, " \t,\r\n");
      cli_error(cmd, "--cu-seqlens: %s line %d: '%.*s' is not an integer in [0, 2^31)", file, lineno,
                tl < 20 ? tl : 20, p);
      free(v);
      return 2;
    }
    if ((m == 0 && x != 0) || (m > 0 && x <= v[m - 1])) {
      cli_error(cmd, "--cu-seqlens: %s line %d: offsets must start at 0 and increase (entry %zu is %lld)", file,
                lineno, m, x);
      free(v);
      return 2;
    }
    if (m == cap) {
      int32_t *w = realloc(v, 2 * cap * sizeof *v);
      if (w == NULL) {
        free(v);
        cli_error(cmd, "out of memory");
        return 2;
      }
      v = w;
      cap *= 2;
    }
    v[m++] = (int32_t)x;
    p = end;
  }
  if (m < 2) {
    cli_error(cmd, "--cu-seqlens: %s line %d: need at least two offsets (0 and the end of one sequence)", file,
              lineno);
    free(v);
    return 2;
  }
  *out = v;
  *n = m;
  return 0;
}

int features_cli_lengths(features_cli_t *fc, const char *cmd, const cli_args_t *a, size_t *n_q, size_t *n_k) {
  const char *s;
  if ((s = cli_get(a, "n-q")) != NULL && cli_size(n_q, cmd, "n-q", s, 1, INT32_MAX)) return 2;
  if ((s = cli_get(a, "cu-seqlens")) == NULL) return 0;
  if (cli_get(a, "n-q") != NULL || cli_get(a, "n") != NULL) {
    cli_error(cmd, "--cu-seqlens gives the lengths: leave out --n and --n-q");
    return 2;
  }
  FILE *f = fopen(s, "r");
  if (f == NULL) {
    cli_error(cmd, "--cu-seqlens: %s: cannot read the file", s);
    return 2;
  }
  char *lines[2] = {NULL, NULL};
  size_t caps[2] = {0, 0};
  int nl = 0, rc = 0;
  while (nl < 2 && getline(&lines[nl], &caps[nl], f) >= 0) {
    if (strspn(lines[nl], " \t\r\n") == strlen(lines[nl])) continue; /* blank */
    nl++;
  }
  {
    char *extra = NULL;
    size_t ec = 0;
    while (getline(&extra, &ec, f) >= 0)
      if (strspn(extra, " \t\r\n") != strlen(extra)) {
        cli_error(cmd, "--cu-seqlens: %s: more than two lines (cu_seqlens_q, cu_seqlens_k)", s);
        rc = 2;
        break;
      }
    free(extra);
  }
  fclose(f);
  size_t mq = 0, mk = 0;
  if (rc == 0 && nl == 0) {
    cli_error(cmd, "--cu-seqlens: %s: the file is empty", s);
    rc = 2;
  }
  if (rc == 0) rc = parse_cu_line(&fc->cu_q, &mq, lines[0], cmd, s, 1);
  if (rc == 0 && nl == 2) rc = parse_cu_line(&fc->cu_k, &mk, lines[1], cmd, s, 2);
  if (rc == 0 && nl == 2 && mk != mq) {
    cli_error(cmd, "--cu-seqlens: %s: cu_seqlens_q has %zu offsets, cu_seqlens_k %zu (one per sequence and one)", s,
              mq, mk);
    rc = 2;
  }
  if (rc == 0 && nl == 1) {
    fc->cu_k = malloc(mq * sizeof *fc->cu_k);
    if (fc->cu_k == NULL) {
      cli_error(cmd, "out of memory");
      rc = 2;
    } else
      memcpy(fc->cu_k, fc->cu_q, mq * sizeof *fc->cu_k);
  }
  free(lines[0]);
  free(lines[1]);
  if (rc != 0) {
    features_cli_free(fc);
    return rc;
  }
  fc->batch = mq - 1;
  *n_q = (size_t)fc->cu_q[fc->batch];
  *n_k = (size_t)fc->cu_k[fc->batch];
  return 0;
}

/* --window: "W" (the causal sliding window) or "L,R" (window_size, -1 = unbounded). */
static int parse_window(aa_problem_t *pb, int *two_sided, const char *cmd, const char *s) {
  const char *comma = strchr(s, ',');
  if (comma == NULL) {
    size_t w;
    if (cli_size(&w, cmd, "window", s, 0, INT32_MAX)) return 2;
    pb->window = w;
    *two_sided = 0;
    return 0;
  }
  long v[2];
  const char *p[2] = {s, comma + 1};
  for (int i = 0; i < 2; i++) {
    char *end;
    errno = 0;
    v[i] = strtol(p[i], &end, 10);
    if (end == p[i] || errno != 0 || (i == 0 ? end != comma : *end != '\0') || v[i] < -1 || v[i] > INT32_MAX) {
      cli_error(cmd, "--window: '%s' is not W or L,R with L and R integers >= -1 (-1 = unbounded)", s);
      return 2;
    }
  }
  pb->local = 1;
  pb->window_left = v[0] < 0 ? AA_WINDOW_INF : (size_t)v[0];
  pb->window_right = v[1] < 0 ? AA_WINDOW_INF : (size_t)v[1];
  *two_sided = 1;
  return 0;
}

static int read_slopes(double *out, size_t heads, const char *cmd, const char *file) {
  FILE *f = fopen(file, "r");
  size_t m = 0;
  if (f == NULL) {
    cli_error(cmd, "--alibi-slopes: %s: cannot read the file", file);
    return 2;
  }
  for (;;) {
    char tok[128];
    int r = fscanf(f, " %127[^ \t\r\n,]%*[ \t\r\n,]", tok);
    if (r != 1) break;
    char *end;
    errno = 0;
    double x = strtod(tok, &end);
    if (end == tok || *end != '\0' || errno != 0 || !isfinite(x)) {
      cli_error(cmd, "--alibi-slopes: %s: '%s' is not a finite number", file, tok);
      fclose(f);
      return 2;
    }
    if (m == heads) {
      cli_error(cmd, "--alibi-slopes: %s holds more than the %zu slopes of --heads %zu", file, heads, heads);
      fclose(f);
      return 2;
    }
    out[m++] = x;
  }
  fclose(f);
  if (m != heads) {
    cli_error(cmd, "--alibi-slopes: %s holds %zu slopes, --heads is %zu (one slope per query head)", file, m, heads);
    return 2;
  }
  return 0;
}

int features_cli_problem(features_cli_t *fc, const char *cmd, const cli_args_t *a, aa_problem_t *pb) {
  const char *s;
  int two_sided = 0;
  if ((s = cli_get(a, "window")) != NULL && parse_window(pb, &two_sided, cmd, s)) return 2;
  pb->align = two_sided ? AA_ALIGN_BOTTOM_RIGHT : AA_ALIGN_TOP_LEFT;
  if ((s = cli_get(a, "causal-align")) != NULL) {
    if (strcmp(s, "top-left") == 0)
      pb->align = AA_ALIGN_TOP_LEFT;
    else if (strcmp(s, "bottom-right") == 0)
      pb->align = AA_ALIGN_BOTTOM_RIGHT;
    else {
      cli_error(cmd, "--causal-align: '%s' is not top-left or bottom-right", s);
      return 2;
    }
  }
  if ((s = cli_get(a, "softcap")) != NULL && cli_double(&pb->softcap, cmd, "softcap", s, 0, 0x1p40, 0)) return 2;
  int alibi = cli_get(a, "alibi") != NULL || cli_get(a, "alibi-slopes") != NULL;
  if ((s = cli_get(a, "alibi-form")) != NULL) {
    if (!alibi) {
      cli_error(cmd, "--alibi-form needs --alibi or --alibi-slopes");
      return 2;
    }
    if (strcmp(s, "flash") != 0 && strcmp(s, "torch") != 0) {
      cli_error(cmd, "--alibi-form: '%s' is not flash or torch", s);
      return 2;
    }
  }
  if (alibi) {
    pb->alibi = s != NULL && strcmp(s, "torch") == 0 ? AA_ALIBI_TORCH : AA_ALIBI_FLASH;
    fc->slopes = malloc(pb->heads * sizeof *fc->slopes);
    if (fc->slopes == NULL) {
      cli_error(cmd, "out of memory");
      return 2;
    }
    if ((s = cli_get(a, "alibi-slopes")) != NULL) {
      if (read_slopes(fc->slopes, pb->heads, cmd, s)) return 2;
    } else {
      aa_problem_alibi_geometric(fc->slopes, pb->heads);
    }
    pb->alibi_slopes = fc->slopes;
  }
  return 0;
}
