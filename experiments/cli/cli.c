/* attnacc: helpers shared by the subcommands (options, numbers, JSON text, atomic files, inputs, metric reports). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/limits.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- messages ---- */

void cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "attnacc %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
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

/* --force of the last cli_oracle_opts, for cli_oracle_run (one command per process). */
static int oracle_force = 0;

int cli_oracle_opts(aa_oracle_opts_t *oo, const cli_args_t *a, const char *cmd) {
  const char *s;
  size_t prec = 128;
  aa_oracle_opts_init(oo);
  oracle_force = cli_get(a, "force") != NULL;
  if ((s = cli_get(a, "oracle")) != NULL && aa_oracle_path_from_name(&oo->path, s) != AA_OK) {
    cli_error(cmd, "--oracle: '%s' is not mpfr or fast", s);
    return 2;
  }
  if ((s = cli_get(a, "prec")) && cli_size(&prec, cmd, "prec", s, 64, 4096)) return 2;
  oo->prec = (int)prec;
  if ((s = cli_get(a, "oracle-target")) && cli_oracle_target(&oo->target, cmd, s)) return 2;
  return 0;
}

int cli_oracle_run(aa_oracle_result_t *res, double *seconds, const char *cmd, const aa_problem_t *pb,
                   const cli_inputs_t *in, const aa_oracle_opts_t *oo) {
  aa_error_t err = {{0}};
  double t0;
  int rc;
  if (oo->path == AA_ORACLE_MPFR) {
    int threads = lim_threads(oo->threads);
    double est = aa_oracle_mpfr_seconds(pb, oo) / threads;
    char t[48], lim[48];
    lim_duration(t, sizeof t, est);
    lim_duration(lim, sizeof lim, LIM_MPFR_SECONDS);
    if (est > LIM_MPFR_SECONDS && !oracle_force) {
      cli_error(cmd,
                "the mpfr oracle would take about %s on %d thread%s (estimate; limit %s): use --oracle fast, a "
                "smaller problem, or --force",
                t, threads, threads == 1 ? "" : "s", lim);
      return 2;
    }
    fprintf(stderr, "attnacc %s: note: the mpfr oracle should take about %s on %d thread%s (estimate)\n", cmd, t,
            threads, threads == 1 ? "" : "s");
  }
  t0 = cli_now();
  rc = aa_oracle_run(res, pb, &in->q, &in->k, &in->v, &in->dO, oo, &err);
  *seconds = cli_now() - t0;
  if (rc == AA_OK) return 0;
  cli_error(cmd, "oracle: %s", err.msg);
  return cli_exit_status(rc);
}

/* ---- strings ---- */

void cli_sb_printf(cli_sb_t *sb, const char *fmt, ...) {
  va_list ap;
  int n;
  if (sb->oom) return;
  for (;;) {
    size_t room = sb->cap - sb->len;
    va_start(ap, fmt);
    n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, sb->buf ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      sb->oom = 1;
      return;
    }
    if (sb->buf != NULL && (size_t)n < room) {
      sb->len += (size_t)n;
      return;
    }
    {
      size_t cap = sb->cap ? sb->cap : 4096;
      char *nb;
      while (cap < sb->len + (size_t)n + 1)
        cap *= 2;
      nb = realloc(sb->buf, cap);
      if (nb == NULL) {
        sb->oom = 1;
        return;
      }
      sb->buf = nb;
      sb->cap = cap;
    }
  }
}

void cli_sb_json_str(cli_sb_t *sb, const char *s) {
  if (s == NULL) {
    cli_sb_printf(sb, "null");
    return;
  }
  cli_sb_printf(sb, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      cli_sb_printf(sb, "\\%c", c);
    else if (c == '\n')
      cli_sb_printf(sb, "\\n");
    else if (c == '\t')
      cli_sb_printf(sb, "\\t");
    else if (c < 0x20)
      cli_sb_printf(sb, "\\u%04x", c);
    else
      cli_sb_printf(sb, "%c", c);
  }
  cli_sb_printf(sb, "\"");
}

void cli_sb_json_num(cli_sb_t *sb, double x) {
  if (!isfinite(x))
    cli_sb_printf(sb, "null");
  else
    cli_sb_printf(sb, "%.17g", x);
}

void cli_sb_free(cli_sb_t *sb) {
  free(sb->buf);
  *sb = (cli_sb_t){0};
}

/* ---- files ---- */

/* Write to an existing device or pipe (/dev/stdout, /dev/null, /dev/full)
   in place: renaming a temporary over it would replace the device node. */
static int write_in_place(const char *path, const char *data, size_t len, aa_error_t *err) {
  int fd = open(path, O_WRONLY), e;
  size_t done = 0;
  if (fd < 0) return aa_error_set(err, AA_EIO, "%s: cannot open: %s", path, strerror(errno));
  while (done < len) {
    ssize_t w = write(fd, data + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      e = w < 0 ? errno : EIO;
      close(fd);
      return aa_error_set(err, AA_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    done += (size_t)w;
  }
  if (close(fd) != 0) return aa_error_set(err, AA_EIO, "%s: cannot write: %s", path, strerror(errno));
  return AA_OK;
}

int cli_write_atomic(const char *path, const char *data, size_t len, aa_error_t *err) {
  size_t cap = strlen(path) + 40;
  char *tmp;
  int fd = -1, e;
  size_t done = 0;
  struct stat st;
  if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
    return write_in_place(path, data, len, err);
  if ((tmp = malloc(cap)) == NULL) return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
  for (unsigned i = 0;; i++) {
    snprintf(tmp, cap, "%s.tmp%ld.%u", path, (long)getpid(), i);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd >= 0 || errno != EEXIST || i > 100) break;
  }
  if (fd < 0) {
    e = errno;
    free(tmp);
    return aa_error_set(err, AA_EIO, "%s: cannot create: %s", path, strerror(e));
  }
  while (done < len) {
    ssize_t w = write(fd, data + done, len - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      goto fail;
    }
    done += (size_t)w;
  }
  if (fsync(fd) != 0) goto fail;
  if (close(fd) != 0) {
    fd = -1;
    goto fail;
  }
  fd = -1;
  if (rename(tmp, path) != 0) goto fail;
  free(tmp);
  return AA_OK;
fail:
  e = errno;
  if (fd >= 0) close(fd);
  unlink(tmp);
  free(tmp);
  return aa_error_set(err, AA_EIO, "%s: cannot write: %s", path, strerror(e));
}

/* The folder part of path ("." when there is none), malloc'd. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  char *d;
  if (slash == NULL) return strdup(".");
  if (slash == path) return strdup("/");
  d = malloc((size_t)(slash - path) + 1);
  if (d != NULL) {
    memcpy(d, path, (size_t)(slash - path));
    d[slash - path] = '\0';
  }
  return d;
}

/* Whether a file can be created in the folder dir: access(W_OK) is not
   enough (root passes it on /proc and /sys, where creating fails), so
   create and remove a probe file. 0, or the errno of the failure. */
static int probe_create(const char *dir) {
  static unsigned count = 0;
  size_t cap = strlen(dir) + 64;
  char *p = malloc(cap);
  int fd, e = 0;
  if (p == NULL) return ENOMEM;
  for (int tries = 0;; tries++) {
    snprintf(p, cap, "%s/.attnacc-probe.%ld.%u", dir, (long)getpid(), count++);
    fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0 || errno != EEXIST || tries > 100) break;
  }
  if (fd < 0)
    e = errno;
  else {
    close(fd);
    unlink(p);
  }
  free(p);
  return e;
}

int cli_check_out_file(const char *path, aa_error_t *err) {
  struct stat st;
  char *dir;
  int rc = AA_OK, e;
  if (path[0] == '\0') return aa_error_set(err, AA_EINVAL, "empty output file name");
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return aa_error_set(err, AA_EIO, "%s: is a folder", path);
  if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) /* written in place */
    return access(path, W_OK) == 0 ? AA_OK : aa_error_set(err, AA_EIO, "%s: not writable: %s", path, strerror(errno));
  dir = dir_of(path);
  if (dir == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    rc = aa_error_set(err, AA_EIO, "%s: the folder %s does not exist", path, dir);
  else if (access(dir, W_OK) != 0)
    rc = aa_error_set(err, AA_EIO, "%s: the folder %s is not writable", path, dir);
  else if ((e = probe_create(dir)) != 0)
    rc = aa_error_set(err, AA_EIO, "%s: cannot create a file in the folder %s: %s", path, dir, strerror(e));
  free(dir);
  return rc;
}

int cli_check_out_dir(const char *dir, aa_error_t *err) {
  struct stat st;
  char *p = strdup(dir);
  int rc = AA_OK;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  if (dir[0] == '\0') rc = aa_error_set(err, AA_EINVAL, "empty folder name");
  /* Walk up to the first existing ancestor: it must be a writable folder. */
  while (rc == AA_OK) {
    if (stat(p, &st) == 0) {
      int e;
      if (!S_ISDIR(st.st_mode))
        rc = aa_error_set(err, AA_EIO, "%s: %s exists and is not a folder", dir, p);
      else if (access(p, W_OK) != 0)
        rc = aa_error_set(err, AA_EIO, "%s: the folder %s is not writable", dir, p);
      else if ((e = probe_create(p)) != 0)
        rc = aa_error_set(err, AA_EIO, "%s: cannot create anything in the folder %s: %s", dir, p, strerror(e));
      break;
    }
    {
      char *up = dir_of(p);
      if (up == NULL) {
        rc = aa_error_set(err, AA_ENOMEM, "out of memory");
        break;
      }
      free(p);
      p = up;
    }
  }
  free(p);
  return rc;
}

int cli_mkdir_p(const char *dir, aa_error_t *err) {
  char *p = strdup(dir);
  int rc = AA_OK;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  for (char *s = p + 1;; s++) {
    if (*s == '/' || *s == '\0') {
      char c = *s;
      struct stat st;
      *s = '\0';
      if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        rc = aa_error_set(err, AA_EIO, "%s: cannot create the folder %s: %s", dir, p, strerror(errno));
        break;
      }
      if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = aa_error_set(err, AA_EIO, "%s: %s is not a folder", dir, p);
        break;
      }
      *s = c;
      if (c == '\0') break;
    }
  }
  free(p);
  return rc;
}

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

void cli_problem_features(char *buf, size_t cap, const aa_problem_t *pb, int json) {
  size_t u = 0;
  buf[0] = '\0';
#define ADD(...)                                                                                                     \
  do {                                                                                                               \
    if (u < cap) u += (size_t)snprintf(buf + u, cap - u, __VA_ARGS__);                                               \
  } while (0)
  if (pb->align == AA_ALIGN_BOTTOM_RIGHT)
    ADD(json ? ", \"causal_align\": \"bottom-right\"" : " causal_align=bottom-right");
  if (pb->local) {
    long l = pb->window_left == AA_WINDOW_INF ? -1 : (long)pb->window_left;
    long r = pb->window_right == AA_WINDOW_INF ? -1 : (long)pb->window_right;
    ADD(json ? ", \"window_size\": [%ld, %ld]" : " window_size=%ld,%ld", l, r);
  }
  if (pb->softcap > 0) ADD(json ? ", \"softcap\": %.17g" : " softcap=%.17g", pb->softcap);
  if (pb->alibi != AA_ALIBI_NONE) {
    const char *form = pb->alibi == AA_ALIBI_FLASH ? "flash" : "torch";
    ADD(json ? ", \"alibi\": \"%s\", \"alibi_slopes\": [" : " alibi=%s slopes=", form);
    for (size_t h = 0; h < pb->heads; h++)
      ADD("%s%.9g", h ? (json ? ", " : ",") : "", pb->alibi_slopes[h]);
    if (json) ADD("]");
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
      return aa_error_set(err, AA_ENAN, "%s holds %zu NaN and %zu Inf values (--allow-nan accepts them)", names[i],
                          nn, ni);
  }
  return AA_OK;
}

static int save_one(const aa_tensor_t *t, const char *dir, const char *file, aa_fmt_t fmt, aa_error_t *err) {
  size_t len = strlen(dir) + strlen(file) + 2;
  char *p = malloc(len);
  int rc;
  if (p == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  snprintf(p, len, "%s/%s", dir, file);
  rc = aa_npy_write(p, t, fmt, err);
  free(p);
  return rc;
}

int cli_inputs_save(const cli_inputs_t *in, const char *dir, aa_fmt_t fmt, aa_error_t *err) {
  int rc;
  if ((rc = cli_mkdir_p(dir, err)) || (rc = save_one(&in->q, dir, "q.npy", fmt, err)) ||
      (rc = save_one(&in->k, dir, "k.npy", fmt, err)) || (rc = save_one(&in->v, dir, "v.npy", fmt, err)) ||
      (rc = save_one(&in->dO, dir, "do.npy", fmt, err)))
    return rc;
  if (in->sinks.data != NULL) return save_one(&in->sinks, dir, "sinks.npy", fmt, err);
  return AA_OK;
}

int cli_save_oracle(const aa_oracle_result_t *r, const char *dir, aa_error_t *err) {
  int rc;
  if ((rc = cli_mkdir_p(dir, err)) || (rc = save_one(&r->o.val, dir, "o.npy", AA_FMT_FP64, err)) ||
      (rc = save_one(&r->lse.val, dir, "lse.npy", AA_FMT_FP64, err)) ||
      (rc = save_one(&r->dq.val, dir, "dq.npy", AA_FMT_FP64, err)) ||
      (rc = save_one(&r->dk.val, dir, "dk.npy", AA_FMT_FP64, err)) ||
      (rc = save_one(&r->dv.val, dir, "dv.npy", AA_FMT_FP64, err)))
    return rc;
  if (r->dsinks.val.data != NULL && aa_tensor_numel(&r->dsinks.val) > 0)
    return save_one(&r->dsinks.val, dir, "dsinks.npy", AA_FMT_FP64, err);
  return AA_OK;
}

/* Put "prefix: " in front of err's message (truncating its end if needed). */
static void err_prefix(aa_error_t *err, const char *prefix) {
  size_t pl, ml, cap = sizeof err->msg;
  if (err == NULL) return;
  pl = strlen(prefix) + 2;
  if (pl >= cap) return;
  ml = strnlen(err->msg, cap - 1);
  if (ml > cap - 1 - pl) ml = cap - 1 - pl;
  memmove(err->msg + pl, err->msg, ml);
  memcpy(err->msg, prefix, pl - 2);
  err->msg[pl - 2] = ':';
  err->msg[pl - 1] = ' ';
  err->msg[pl + ml] = '\0';
}

/* ---- reports ---- */

int cli_compare(cli_out_t *out, const char *name, const aa_tensor_t *t, const aa_oracle_out_t *ref, aa_error_t *err) {
  int rc;
  out->name = name;
  out->ulp_fmt = t->fmt == AA_FMT_BF16 ? AA_FMT_BF16 : AA_FMT_FP32;
  out->relerr_bound = ref->relerr_bound;
  out->fa_applied = 0;
  rc = aa_metrics_compare(&out->m, t, ref, out->ulp_fmt, AA_METRICS_ATOL, AA_METRICS_RTOL, err);
  if (rc == AA_OK) rc = cli_score_out(out, t, ref, -1, -1, -1, err);
  if (rc != AA_OK) err_prefix(err, name);
  return rc;
}

int cli_score_out(cli_out_t *out, const aa_tensor_t *t, const aa_oracle_out_t *ref, int ulp_fmt, double atol,
                  double rtol, aa_error_t *err) {
  aa_fmt_t uf = ulp_fmt >= 0                                                              ? (aa_fmt_t)ulp_fmt
                : t->fmt == AA_FMT_BF16 || t->fmt == AA_FMT_FP16 || t->fmt == AA_FMT_FP32 ? t->fmt
                                                                                          : AA_FMT_FP32;
  return aa_score_compare(&out->s, out->name, t, ref, t->fmt, uf, atol >= 0 ? atol : AA_METRICS_ATOL,
                          rtol >= 0 ? rtol : AA_METRICS_RTOL, err);
}

int cli_rules_parse(aa_rule_t *rules, int *n, double *atol, double *rtol, const char *cmd, const char *s) {
  char buf[256], *tok, *save = NULL;
  int have[AA_RULE_COUNT] = {0};
  *n = 0;
  if (strlen(s) >= sizeof buf) {
    cli_error(cmd, "--rule: '%s' is too long", s);
    return 2;
  }
  strcpy(buf, s);
  for (tok = strtok_r(buf, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
    aa_rule_t r;
    if (strcmp(tok, "all") == 0) {
      for (int i = 0; i < AA_RULE_COUNT; i++)
        if (!have[i]++) rules[(*n)++] = (aa_rule_t)i;
      continue;
    }
    if (aa_rule_from_name(&r, tok) != AA_OK) {
      cli_error(cmd, "--rule: '%s' is not fa, torch, sdpa, abs-rel or all", tok);
      return 2;
    }
    if (r == AA_RULE_ABSREL) {
      /* optional ATOL RTOL after abs-rel */
      char *save2 = save;
      char *a = strtok_r(NULL, ", ", &save2), *b = a ? strtok_r(NULL, ", ", &save2) : NULL;
      char *end;
      if (a != NULL && ((a[0] >= '0' && a[0] <= '9') || a[0] == '.')) {
        if (b == NULL) {
          cli_error(cmd, "--rule abs-rel: give both ATOL and RTOL (e.g. --rule abs-rel,1e-3,1e-2)");
          return 2;
        }
        *atol = strtod(a, &end);
        if (*end != '\0' || !(*atol >= 0) || !isfinite(*atol)) {
          cli_error(cmd, "--rule abs-rel: ATOL '%s' is not a number >= 0", a);
          return 2;
        }
        *rtol = strtod(b, &end);
        if (*end != '\0' || !(*rtol >= 0) || !isfinite(*rtol)) {
          cli_error(cmd, "--rule abs-rel: RTOL '%s' is not a number >= 0", b);
          return 2;
        }
        save = save2;
      }
    }
    if (!have[r]++) rules[(*n)++] = r;
  }
  if (*n == 0) {
    cli_error(cmd, "--rule: no rule given");
    return 2;
  }
  return 0;
}

int cli_verdict(const cli_variant_t *v, const aa_rule_t *rules, int n) {
  for (int j = 0; j < v->nout; j++)
    for (int i = 0; i < n; i++) {
      const aa_rule_result_t *r = &v->out[j].s.rule[rules[i]];
      if (!r->applied || !r->pass) return 0;
    }
  return 1;
}

static cli_report_extra_t extra; /* zero: auto layout, no verdict */

void cli_set_report_extra(const cli_report_extra_t *x) {
  extra = *x;
}

/* "(b, h, n, d)" of folded element i of output o in the report's layout. */
static void index_fmt(char *buf, size_t cap, const cli_report_t *rep, const cli_out_t *o, size_t i, int json) {
  size_t idx[4], used;
  int nd;
  const aa_problem_t *pb = rep->pb;
  int kv = strcmp(o->name, "dk") == 0 || strcmp(o->name, "dv") == 0;
  if (strcmp(o->name, "dsinks") == 0) {
    size_t k = pb->num_sinks ? pb->num_sinks : 1;
    idx[0] = i / k, idx[1] = i % k, nd = 2;
  } else if (extra.layout == AA_LAYOUT_AUTO) {
    size_t n = kv ? pb->n_k : pb->n_q;
    idx[0] = i / (n * pb->d), idx[1] = (i / pb->d) % n, idx[2] = i % pb->d, nd = 3;
  } else {
    nd = aa_layout_index(idx, extra.layout, kv ? &extra.kdims : &extra.qdims, i);
  }
  used = (size_t)snprintf(buf, cap, json ? "[" : "(");
  for (int k = 0; k < nd && used < cap; k++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%zu", k ? ", " : "", idx[k]);
  if (used < cap) snprintf(buf + used, cap - used, json ? "]" : ")");
}

static void index_str(char *buf, size_t cap, const cli_report_t *rep, const cli_out_t *o, size_t i) {
  index_fmt(buf, cap, rep, o, i, 0);
}

static void failure_line(char *buf, size_t cap, const cli_report_t *rep, const cli_out_t *o, aa_rule_t rule,
                         const aa_tensor_t *unused) {
  const aa_rule_result_t *r = &o->s.rule[rule];
  char ix[96];
  (void)unused;
  index_str(ix, sizeof ix, rep, o, r->worst);
  if (!r->applied) {
    snprintf(buf, cap, "%s: the %s rule could not be applied (it needs bf16, fp16 or fp32 inputs)", o->name,
             aa_rule_name(rule));
    return;
  }
  if (o->s.m.nan + o->s.m.inf > 0) {
    snprintf(buf, cap, "%s fails the %s rule: %zu NaN and %zu Inf elements of %zu", o->name, aa_rule_name(rule),
             o->s.m.nan, o->s.m.inf, o->s.m.count);
    return;
  }
  if (rule == AA_RULE_ABSREL || rule == AA_RULE_TORCH)
    snprintf(
        buf, cap,
        "%s fails the %s rule (atol %g, rtol %g): %zu of %zu elements over; worst at index %s: value %.9g, oracle "
        "%.9g, error %.6g = %.4g x the allowed %.6g",
        o->name, aa_rule_name(rule), r->atol, r->rtol, r->fail_count, o->s.m.count, ix, r->worst_got, r->worst_ref,
        fabs(r->worst_got - r->worst_ref), r->ratio, r->allowed);
  else
    snprintf(buf, cap,
             "%s fails the %s rule: max abs error %.6g at index %s (value %.9g, oracle %.9g) exceeds %s%g x %s's max "
             "error %.6g%s = %.6g (ratio %.4g)",
             o->name, aa_rule_name(rule), o->s.m.max_abs, ix, r->worst_got, r->worst_ref,
             rule == AA_RULE_SDPA ? "max(1e-05, " : "", r->rtol, extra.naive ? extra.naive : "the naive reference",
             r->naive_max_abs, rule == AA_RULE_SDPA ? ")" : "", r->allowed, r->ratio);
}

void cli_print_rules(FILE *f, const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  char line[1024];
  fprintf(f, "rules (measured / allowed, <= 1 passes):\n%-14s %-6s %-6s %-10s %-10s %-10s %-10s %-10s", "variant",
          "out", "ulp", "ulp_med", "ulp_p99", "ulp_max", "ulp_norm", "max_rel");
  for (int r = 0; r < AA_RULE_COUNT; r++)
    fprintf(f, " %-14s", aa_rule_name((aa_rule_t)r));
  fprintf(f, "\n");
  for (size_t i = 0; i < nv; i++)
    for (int j = 0; j < vs[i].nout; j++) {
      const cli_out_t *o = &vs[i].out[j];
      fprintf(f, "%-14s %-6s %-6s %-10.4g %-10.4g %-10.4g %-10.4g %-10.4g", vs[i].variant, o->name,
              cli_fmt_name(o->s.ulp_fmt), o->s.ulp_median, o->s.ulp_p99, o->s.ulp_max, o->s.ulp_normwise,
              o->s.max_rel);
      for (int r = 0; r < AA_RULE_COUNT; r++) {
        const aa_rule_result_t *x = &o->s.rule[r];
        char cell[32];
        if (x->applied)
          snprintf(cell, sizeof cell, "%.4g %s", x->ratio, x->pass ? "pass" : "FAIL");
        else
          snprintf(cell, sizeof cell, "-");
        fprintf(f, " %-14s", cell);
      }
      fprintf(f, "\n");
    }
  fprintf(
      f,
      "abs-rel: |a - b| <= atol + rtol |b| (atol %g, rtol %g); torch: the same with assert_close's defaults for the "
      "output's dtype; fa: max_abs <= 2x (o) / 3x (grads) the naive reference's; sdpa: <= max(1e-5, fudge x "
      "naive's), fudge o 4, dq 180, dk 16, dv 4\n",
      vs[0].nout ? vs[0].out[0].s.rule[AA_RULE_ABSREL].atol : AA_METRICS_ATOL,
      vs[0].nout ? vs[0].out[0].s.rule[AA_RULE_ABSREL].rtol : AA_METRICS_RTOL);
  if (extra.n_verdict == 0) return;
  for (size_t i = 0; i < nv; i++) {
    int pass = cli_verdict(&vs[i], extra.verdict_rules, extra.n_verdict);
    fprintf(f, "verdict: %s %s by", vs[i].variant, pass ? "PASS" : "FAIL");
    for (int r = 0; r < extra.n_verdict; r++)
      fprintf(f, "%s%s", r ? ", " : " ", aa_rule_name(extra.verdict_rules[r]));
    fprintf(f, "\n");
    for (int j = 0; j < vs[i].nout; j++)
      for (int r = 0; r < extra.n_verdict; r++) {
        const aa_rule_result_t *x = &vs[i].out[j].s.rule[extra.verdict_rules[r]];
        if (x->applied && x->pass) continue;
        failure_line(line, sizeof line, rep, &vs[i].out[j], extra.verdict_rules[r], NULL);
        fprintf(f, "FAIL %s %s\n", vs[i].variant, line);
      }
  }
}

int cli_first_failure(char *buf, size_t cap, const cli_report_t *rep, const cli_variant_t *v) {
  for (int j = 0; j < v->nout; j++)
    for (int r = 0; r < extra.n_verdict; r++) {
      const aa_rule_result_t *x = &v->out[j].s.rule[extra.verdict_rules[r]];
      if (x->applied && x->pass) continue;
      failure_line(buf, cap, rep, &v->out[j], extra.verdict_rules[r], NULL);
      return 1;
    }
  return 0;
}

double cli_oracle_bound(const aa_oracle_result_t *r) {
  double b = 0;
  const aa_oracle_out_t *outs[5] = {&r->o, &r->dq, &r->dk, &r->dv, &r->dsinks};
  for (int i = 0; i < 5; i++)
    if (outs[i]->val.data != NULL && aa_tensor_numel(&outs[i]->val) > 0 && !(outs[i]->relerr_bound <= b))
      b = outs[i]->relerr_bound;
  return b;
}

const char *cli_fmt_name(aa_fmt_t f) {
  switch (f) {
  case AA_FMT_BF16:
    return "bf16";
  case AA_FMT_FP16:
    return "fp16";
  case AA_FMT_FP32:
    return "fp32";
  case AA_FMT_FP64:
    return "fp64";
  case AA_FMT_E4M3:
    return "e4m3";
  case AA_FMT_E5M2:
    return "e5m2";
  default:
    return "?";
  }
}

static void problem_line(FILE *f, const cli_report_t *rep) {
  const aa_problem_t *pb = rep->pb;
  fprintf(f, "problem: n=%zu", pb->n_q);
  if (pb->n_k != pb->n_q) fprintf(f, " n_k=%zu", pb->n_k);
  fprintf(f, " d=%zu heads=%zu kv_heads=%zu causal=%s window=%zu sinks=%zu scale=%.17g", pb->d, pb->heads,
          pb->kv_heads, pb->causal ? "yes" : "no", pb->window, pb->num_sinks, aa_problem_scale(pb));
  { /* issue 14 features, only when on (the line of other problems is unchanged) */
    char buf[256];
    cli_problem_features(buf, sizeof buf, pb, 0);
    fputs(buf, f);
  }
  if (rep->inputs_dir != NULL)
    fprintf(f, " inputs=%s", rep->inputs_dir);
  else
    fprintf(f, " dist=%s sigma=%.17g", rep->dist, rep->sigma);
  fprintf(f, "\n");
}

void cli_print_table(FILE *f, const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  double emul = 0;
  problem_line(f, rep);
  fprintf(f, "%-14s %-6s %-4s %-13s %-13s %-10s %-10s %-5s %-5s %-5s %-13s %s\n", "variant", "out", "ulp", "rel_l2",
          "max_abs", "max_ulp", "mean_ulp", "nan", "inf", "pass", "fa_ratio", "fa_pass");
  for (size_t i = 0; i < nv; i++) {
    emul += vs[i].seconds;
    for (int j = 0; j < vs[i].nout; j++) {
      const cli_out_t *o = &vs[i].out[j];
      fprintf(f, "%-14s %-6s %-4s %-13.6e %-13.6e %-10.4g %-10.4g %-5zu %-5zu %-5s ", vs[i].variant, o->name,
              cli_fmt_name(o->ulp_fmt), o->m.rel_l2, o->m.max_abs, o->m.max_ulp, o->m.mean_ulp, o->m.nan, o->m.inf,
              o->m.pass ? "yes" : "no");
      if (o->fa_applied)
        fprintf(f, "%-13.6e %s (<= %g)\n", o->m.fa_ratio, o->m.fa_pass ? "yes" : "no", o->m.fa_factor);
      else
        fprintf(f, "%-13s %s\n", "-", "-");
    }
  }
  for (size_t i = 0; i < nv; i++)
    if (vs[i].dq_reduce[0] != '\0')
      fprintf(f, "dq reduce: %s %s, %llu tiles, %llu budget failures, %llu FP64 recomputes\n", vs[i].variant,
              vs[i].dq_reduce, (unsigned long long)vs[i].dq_stats.tiles,
              (unsigned long long)vs[i].dq_stats.budget_failures, (unsigned long long)vs[i].dq_stats.fp64_recomputes);
  for (size_t i = 0; i < nv; i++)
    if (vs[i].softmax[0] != '\0')
      fprintf(f,
              "normalisation: %s %s, %zu of %zu forward tiles flagged, %zu rows recovered, NaN/Inf in outputs: %s\n",
              vs[i].variant, vs[i].softmax, vs[i].tiles_flagged, vs[i].fwd_tiles, vs[i].rows_recovered,
              vs[i].nonfinite ? "yes" : "no");
  fprintf(f, "rule 1 (pass): |a - b| <= %g + %g |b| for every element; fa rule: max_abs <= factor x naive-bf16's\n",
          AA_METRICS_ATOL, AA_METRICS_RTOL);
  fprintf(f,
          "oracle: %s, %d bits, target %a, certified relative error bound %.3e, %zu elements recomputed in MPFR, %zu "
          "uncertified\n",
          aa_oracle_path_name(rep->oo->path), rep->oo->prec, rep->oo->target, cli_oracle_bound(rep->oracle),
          rep->oracle->n_recomputed, rep->oracle->n_uncertified);
  fprintf(f, "seconds: oracle %.3f, emulation %.3f\n", rep->oracle_seconds, emul);
  if (rep->seed_known) fprintf(f, "seed %llu, ", (unsigned long long)rep->seed);
  fprintf(f, "attnacc %s (git %s)\n", AA_VERSION, AA_GIT_HASH);
}

/* The robust measures and the four rules of one output (schema: experiments/README-json.md). */
static void json_robust(cli_sb_t *sb, const cli_report_t *rep, const cli_out_t *o) {
  const aa_score_out_t *s = &o->s;
  char ix[96];
  cli_sb_printf(sb, ", \"data_fmt\": \"%s\", \"robust\": {\"ulp_fmt\": \"%s\", \"ulp_median\": ",
                cli_fmt_name(s->data_fmt), cli_fmt_name(s->ulp_fmt));
  cli_sb_json_num(sb, s->ulp_median);
  cli_sb_printf(sb, ", \"ulp_p99\": ");
  cli_sb_json_num(sb, s->ulp_p99);
  cli_sb_printf(sb, ", \"ulp_max\": ");
  cli_sb_json_num(sb, s->ulp_max);
  cli_sb_printf(sb, ", \"ulp_normwise\": ");
  cli_sb_json_num(sb, s->ulp_normwise);
  cli_sb_printf(sb, ", \"max_rel\": ");
  cli_sb_json_num(sb, s->max_rel);
  cli_sb_printf(sb, ", \"rel_floor\": ");
  cli_sb_json_num(sb, s->rel_floor);
  cli_sb_printf(sb, ", \"max_rel_any\": ");
  cli_sb_json_num(sb, s->max_rel_any);
  index_fmt(ix, sizeof ix, rep, o, s->worst_abs, 1);
  cli_sb_printf(sb, ", \"worst_abs\": {\"index\": %s, \"got\": ", ix);
  cli_sb_json_num(sb, s->worst_got);
  cli_sb_printf(sb, ", \"oracle\": ");
  cli_sb_json_num(sb, s->worst_ref);
  cli_sb_printf(sb, "}}, \"rules\": {");
  for (int r = 0; r < AA_RULE_COUNT; r++) {
    const aa_rule_result_t *x = &s->rule[r];
    cli_sb_printf(sb, "%s\"%s\": {\"applied\": %s", r ? ", " : "", aa_rule_name((aa_rule_t)r),
                  x->applied ? "true" : "false");
    if (x->applied) {
      index_fmt(ix, sizeof ix, rep, o, x->worst, 1);
      cli_sb_printf(sb, ", \"pass\": %s, \"ratio\": ", x->pass ? "true" : "false");
      cli_sb_json_num(sb, x->ratio);
      cli_sb_printf(sb, ", \"allowed\": ");
      cli_sb_json_num(sb, x->allowed);
      cli_sb_printf(sb, ", \"atol\": ");
      cli_sb_json_num(sb, x->atol);
      cli_sb_printf(sb, ", \"rtol\": ");
      cli_sb_json_num(sb, x->rtol);
      if (r == AA_RULE_FA || r == AA_RULE_SDPA) {
        cli_sb_printf(sb, ", \"naive_max_abs\": ");
        cli_sb_json_num(sb, x->naive_max_abs);
      }
      cli_sb_printf(sb, ", \"fail_count\": %zu, \"worst_index\": %s", x->fail_count, ix);
    }
    cli_sb_printf(sb, "}");
  }
  cli_sb_printf(sb, "}");
}

static void json_variant(cli_sb_t *sb, const cli_report_t *rep, const cli_variant_t *v, const char *ind) {
  const aa_problem_t *pb = rep->pb;
  cli_sb_printf(sb, "{\n%s  \"schema_version\": %d,\n%s  \"attnacc_version\": ", ind, CLI_SCHEMA_VERSION, ind);
  cli_sb_json_str(sb, AA_VERSION);
  cli_sb_printf(sb, ",\n%s  \"git_hash\": ", ind);
  cli_sb_json_str(sb, AA_GIT_HASH);
  cli_sb_printf(sb, ",\n%s  \"seed\": ", ind);
  if (rep->seed_known)
    cli_sb_printf(sb, "%llu", (unsigned long long)rep->seed);
  else
    cli_sb_printf(sb, "null");
  cli_sb_printf(sb, ",\n%s  \"variant\": ", ind);
  cli_sb_json_str(sb, v->variant);
  cli_sb_printf(sb, ",\n%s  \"recipe\": ", ind);
  cli_sb_json_str(sb, v->recipe_text);
  cli_sb_printf(sb, ",\n%s  \"inputs\": ", ind);
  cli_sb_json_str(sb, rep->inputs_dir);
  cli_sb_printf(sb, ",\n%s  \"problem\": {\"n\": %zu, \"n_k\": %zu, \"d\": %zu, \"heads\": %zu, \"kv_heads\": %zu, ",
                ind, pb->n_q, pb->n_k, pb->d, pb->heads, pb->kv_heads);
  cli_sb_printf(sb, "\"causal\": %s, \"window\": %zu, \"sinks\": %zu, \"dist\": ", pb->causal ? "true" : "false",
                pb->window, pb->num_sinks);
  cli_sb_json_str(sb, rep->dist);
  cli_sb_printf(sb, ", \"sigma\": ");
  if (rep->dist != NULL)
    cli_sb_json_num(sb, rep->sigma);
  else
    cli_sb_printf(sb, "null");
  cli_sb_printf(sb, ", \"scale\": ");
  cli_sb_json_num(sb, aa_problem_scale(pb));
  { /* issue 14 features, only when on */
    char buf[8192];
    cli_problem_features(buf, sizeof buf, pb, 1);
    cli_sb_printf(sb, "%s", buf);
  }
  cli_sb_printf(sb, "},\n");
  if (extra.layout != AA_LAYOUT_AUTO)
    cli_sb_printf(
        sb, "%s  \"layout\": {\"name\": \"%s\", \"axes\": \"%s\", \"b\": %zu, \"heads\": %zu, \"kv_heads\": %zu},\n",
        ind, aa_layout_name(extra.layout), aa_layout_axes(extra.layout), extra.qdims.b, extra.qdims.h, extra.kdims.h);
  cli_sb_printf(sb, "%s  \"oracle\": {\"path\": ", ind);
  cli_sb_json_str(sb, aa_oracle_path_name(rep->oo->path));
  cli_sb_printf(sb, ", \"prec\": %d, \"target\": ", rep->oo->prec);
  cli_sb_json_num(sb, rep->oo->target);
  cli_sb_printf(sb, ", \"relerr_bound\": ");
  cli_sb_json_num(sb, cli_oracle_bound(rep->oracle));
  cli_sb_printf(sb, ", \"recomputed\": %zu, \"uncertified\": %zu, \"seconds\": ", rep->oracle->n_recomputed,
                rep->oracle->n_uncertified);
  cli_sb_json_num(sb, rep->oracle_seconds);
  cli_sb_printf(sb, "},\n%s  \"emulation_seconds\": ", ind);
  cli_sb_json_num(sb, v->seconds);
  if (v->dq_reduce[0] != '\0')
    cli_sb_printf(sb,
                  ",\n%s  \"dq_reduce\": {\"kind\": \"%s\", \"tiles\": %llu, \"conv_failures\": %llu, "
                  "\"sum_failures\": %llu, \"budget_failures\": %llu, \"fp64_recomputes\": %llu}",
                  ind, v->dq_reduce, (unsigned long long)v->dq_stats.tiles,
                  (unsigned long long)v->dq_stats.conv_failures, (unsigned long long)v->dq_stats.sum_failures,
                  (unsigned long long)v->dq_stats.budget_failures, (unsigned long long)v->dq_stats.fp64_recomputes);
  if (v->softmax[0] != '\0')
    cli_sb_printf(sb,
                  ",\n%s  \"normalisation\": {\"softmax\": \"%s\", \"fwd_tiles\": %zu, \"tiles_flagged\": %zu, "
                  "\"rows_recovered\": %zu, \"nonfinite\": %s}",
                  ind, v->softmax, v->fwd_tiles, v->tiles_flagged, v->rows_recovered,
                  v->nonfinite ? "true" : "false");
  cli_sb_printf(sb, ",\n%s  \"outputs\": {", ind);
  for (int j = 0; j < v->nout; j++) {
    const cli_out_t *o = &v->out[j];
    const aa_metrics_t *m = &o->m;
    cli_sb_printf(sb, "%s\n%s    \"%s\": {\"count\": %zu, \"ulp_fmt\": \"%s\", \"rel_l2\": ", j ? "," : "", ind,
                  o->name, m->count, cli_fmt_name(o->ulp_fmt));
    cli_sb_json_num(sb, m->rel_l2);
    cli_sb_printf(sb, ", \"max_abs\": ");
    cli_sb_json_num(sb, m->max_abs);
    cli_sb_printf(sb, ", \"max_ulp\": ");
    cli_sb_json_num(sb, m->max_ulp);
    cli_sb_printf(sb, ", \"mean_ulp\": ");
    cli_sb_json_num(sb, m->mean_ulp);
    cli_sb_printf(sb, ", \"nan\": %zu, \"inf\": %zu, \"atol\": ", m->nan, m->inf);
    cli_sb_json_num(sb, m->atol);
    cli_sb_printf(sb, ", \"rtol\": ");
    cli_sb_json_num(sb, m->rtol);
    cli_sb_printf(sb, ", \"fail_count\": %zu, \"pass\": %s, \"oracle_relerr_bound\": ", m->fail_count,
                  m->pass ? "true" : "false");
    cli_sb_json_num(sb, o->relerr_bound);
    cli_sb_printf(sb, ", \"fa_factor\": ");
    if (o->fa_applied)
      cli_sb_json_num(sb, m->fa_factor);
    else
      cli_sb_printf(sb, "null");
    cli_sb_printf(sb, ", \"fa_ref_max_abs\": ");
    if (o->fa_applied)
      cli_sb_json_num(sb, m->fa_ref_max_abs);
    else
      cli_sb_printf(sb, "null");
    cli_sb_printf(sb, ", \"fa_ratio\": ");
    if (o->fa_applied)
      cli_sb_json_num(sb, m->fa_ratio);
    else
      cli_sb_printf(sb, "null");
    cli_sb_printf(sb, ", \"fa_pass\": %s", o->fa_applied ? (m->fa_pass ? "true" : "false") : "null");
    json_robust(sb, rep, o);
    cli_sb_printf(sb, "}");
  }
  cli_sb_printf(sb, "\n%s  }", ind);
  if (extra.n_verdict > 0) {
    char line[1024];
    cli_sb_printf(sb, ",\n%s  \"verdict\": {\"rules\": [", ind);
    for (int r = 0; r < extra.n_verdict; r++)
      cli_sb_printf(sb, "%s\"%s\"", r ? ", " : "", aa_rule_name(extra.verdict_rules[r]));
    cli_sb_printf(sb, "], \"pass\": %s, \"failures\": [",
                  cli_verdict(v, extra.verdict_rules, extra.n_verdict) ? "true" : "false");
    {
      int first = 1;
      for (int j = 0; j < v->nout; j++)
        for (int r = 0; r < extra.n_verdict; r++) {
          const aa_rule_result_t *x = &v->out[j].s.rule[extra.verdict_rules[r]];
          if (x->applied && x->pass) continue;
          failure_line(line, sizeof line, rep, &v->out[j], extra.verdict_rules[r], NULL);
          cli_sb_printf(sb, "%s", first ? "" : ", ");
          cli_sb_json_str(sb, line);
          first = 0;
        }
    }
    cli_sb_printf(sb, "]}");
  }
  cli_sb_printf(sb, "\n%s}", ind);
}

void cli_json(cli_sb_t *sb, const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  if (nv == 1) {
    json_variant(sb, rep, &vs[0], "");
    cli_sb_printf(sb, "\n");
    return;
  }
  cli_sb_printf(sb, "{\n  \"schema_version\": %d,\n  \"runs\": [", CLI_SCHEMA_VERSION);
  for (size_t i = 0; i < nv; i++) {
    cli_sb_printf(sb, "%s\n    ", i ? "," : "");
    json_variant(sb, rep, &vs[i], "    ");
  }
  cli_sb_printf(sb, "\n  ]\n}\n");
}

static int progress_shown;

void cli_progress(const char *cmd, const char *what, double work) {
  cli_progress_end();
  if (work < 3e8 || !isatty(STDERR_FILENO)) return;
  fprintf(stderr, "attnacc %s: %s (about %.0f s of one core)...", cmd, what, work / 1.5e8);
  fflush(stderr);
  progress_shown = 1;
}

void cli_progress_end(void) {
  if (!progress_shown) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
  progress_shown = 0;
}

void cli_variant_free(cli_variant_t *v) {
  free(v->recipe_text);
  v->recipe_text = NULL;
}

void cli_set_threads(size_t threads) {
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads((int)threads);
#else
  (void)threads;
#endif
}

aa_fmt_t cli_npy_fmt(aa_fmt_t f) {
  return f == AA_FMT_BF16 || f == AA_FMT_FP16 || f == AA_FMT_FP32 || f == AA_FMT_FP64 ? f : AA_FMT_FP32;
}

int cli_run_variant(cli_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                    const cli_inputs_t *in, const aa_oracle_result_t *oracle, aa_error_t *err) {
  double t0;
  int rc;
  size_t need;
  memset(res, 0, sizeof *res);
  snprintf(v->variant, sizeof v->variant, "%s", r->name);
  {
    char probe[2];
    need = aa_recipe_format(probe, sizeof probe, r);
  }
  v->recipe_text = malloc(need + 1);
  if (v->recipe_text == NULL) return aa_error_set(err, AA_ENOMEM, "out of memory");
  aa_recipe_format(v->recipe_text, need + 1, r);
  t0 = cli_now();
  rc = aa_attn_run(res, pb, r, &in->q, &in->k, &in->v, &in->dO, err);
  v->seconds = cli_now() - t0;
  if (rc != AA_OK) {
    err_prefix(err, r->name);
    return rc;
  }
  /* The summary lines describe the recipe that ran: with conditional keys,
     the one resolved for this problem (aa_attn_run resolved it the same way). */
  aa_recipe_t *resolved = NULL;
  if (r->nwhen > 0 && (resolved = malloc(sizeof *resolved)) != NULL) {
    aa_recipe_case_t c = {.causal = pb->causal, .n_q = pb->n_q, .n_k = pb->n_k, .d = pb->d};
    if (aa_recipe_resolve(resolved, r, &c, NULL) == AA_OK) r = resolved;
  }
  snprintf(v->dq_reduce, sizeof v->dq_reduce, "%s", aa_reduce_kind_name(r->bwd_dq_reduce.kind));
  v->dq_stats = res->dq_reduce;
  {
    static const char *const sm[] = {"online-lse", "two-pass", "fixed-shift", "guarded"};
    snprintf(v->softmax, sizeof v->softmax, "%s",
             (unsigned)r->fwd_softmax < sizeof sm / sizeof sm[0] ? sm[r->fwd_softmax] : "?");
    v->fwd_tiles = res->fwd_q_tiles * pb->heads;
    v->tiles_flagged = res->tiles_flagged;
    v->rows_recovered = res->rows_recovered;
  }
  free(resolved);
  v->nout = 0;
  if ((rc = cli_compare(&v->out[v->nout++], "o", &res->o, &oracle->o, err)) ||
      (rc = cli_compare(&v->out[v->nout++], "dq", &res->dq, &oracle->dq, err)) ||
      (rc = cli_compare(&v->out[v->nout++], "dk", &res->dk, &oracle->dk, err)) ||
      (rc = cli_compare(&v->out[v->nout++], "dv", &res->dv, &oracle->dv, err)))
    return rc;
  if (pb->num_sinks > 0 && (rc = cli_compare(&v->out[v->nout++], "dsinks", &res->dsinks, &oracle->dsinks, err)))
    return rc;
  v->nonfinite = 0;
  for (int j = 0; j < v->nout; j++)
    if (v->out[j].m.nan + v->out[j].m.inf > 0) v->nonfinite = 1;
  return AA_OK;
}

void cli_apply_fa(cli_variant_t *v, const cli_variant_t *naive) {
  for (int i = 0; i < v->nout; i++)
    for (int j = 0; j < naive->nout; j++)
      if (strcmp(v->out[i].name, naive->out[j].name) == 0) {
        double factor = strcmp(v->out[i].name, "o") == 0 ? AA_METRICS_FA_FACTOR_FWD : AA_METRICS_FA_FACTOR_BWD;
        aa_metrics_fa_rule(&v->out[i].m, &naive->out[j].m, factor);
        aa_score_apply_naive(&v->out[i].s, &naive->out[j].s);
        v->out[i].fa_applied = 1;
      }
}

int cli_save_outputs(const aa_attn_result_t *res, const char *dir, aa_error_t *err) {
  int rc;
  if ((rc = cli_mkdir_p(dir, err)) || (rc = save_one(&res->o, dir, "o.npy", cli_npy_fmt(res->o.fmt), err)) ||
      (rc = save_one(&res->dq, dir, "dq.npy", cli_npy_fmt(res->dq.fmt), err)) ||
      (rc = save_one(&res->dk, dir, "dk.npy", cli_npy_fmt(res->dk.fmt), err)) ||
      (rc = save_one(&res->dv, dir, "dv.npy", cli_npy_fmt(res->dv.fmt), err)))
    return rc;
  if (res->dsinks.data != NULL && aa_tensor_numel(&res->dsinks) > 0)
    return save_one(&res->dsinks, dir, "dsinks.npy", cli_npy_fmt(res->dsinks.fmt), err);
  return AA_OK;
}
