/* attnacc: how the report finds and runs gnuplot and its scripts (the .gp files of plots/), writing PNG and SVG. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "report/report.h"

#ifndef AA_PLOTS_SRCDIR
#define AA_PLOTS_SRCDIR ""
#endif
#ifndef AA_PLOTS_DATADIR
#define AA_PLOTS_DATADIR ""
#endif

int rp_write_file(const char *dir, const char *name, const cli_sb_t *sb) {
  char path[4096];
  if (sb->oom) return AA_ENOMEM;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return aa_file_write(path, sb->buf ? sb->buf : "", sb->len, NULL);
}

/* $ATTNACC_GNUPLOT (empty or missing file: none), else the configured path, else the PATH. */
static int find_gnuplot(char *out, size_t cap) {
  const char *e = getenv("ATTNACC_GNUPLOT"), *path;
  if (e != NULL) {
    snprintf(out, cap, "%s", e);
    return e[0] != '\0' && access(e, X_OK) == 0;
  }
  if (AA_GNUPLOT[0] != '\0' && access(AA_GNUPLOT, X_OK) == 0) {
    snprintf(out, cap, "%s", AA_GNUPLOT);
    return 1;
  }
  if ((path = getenv("PATH")) != NULL) {
    const char *p = path;
    while (*p) {
      const char *c = strchr(p, ':');
      size_t len = c ? (size_t)(c - p) : strlen(p);
      snprintf(out, cap, "%.*s/gnuplot", (int)len, p);
      if (len > 0 && access(out, X_OK) == 0) return 1;
      p = c ? c + 1 : p + len;
    }
  }
  out[0] = '\0';
  return 0;
}

/* $ATTNACC_PLOTS_DIR, else the source tree, else the installed copy. */
static int find_plots(char *out, size_t cap) {
  const char *c[3] = {getenv("ATTNACC_PLOTS_DIR"), AA_PLOTS_SRCDIR, AA_PLOTS_DATADIR};
  for (int i = 0; i < 3; i++) {
    char probe[4200];
    if (c[i] == NULL || c[i][0] == '\0') continue;
    snprintf(probe, sizeof probe, "%s/table4.gp", c[i]);
    if (access(probe, R_OK) == 0) {
      snprintf(out, cap, "%s", c[i]);
      return 1;
    }
  }
  out[0] = '\0';
  return 0;
}

void rp_plotter_init(rp_plotter_t *pl, const char *out) {
  char lp[4300];
  memset(pl, 0, sizeof *pl);
  pl->out = out;
  pl->have_gnuplot = find_gnuplot(pl->gnuplot, sizeof pl->gnuplot);
  pl->have_scripts = find_plots(pl->plots, sizeof pl->plots);
  snprintf(lp, sizeof lp, "%s/gnuplot.log", out);
  remove(lp);
}

/* One gnuplot run: vars file, then the script; its messages go to OUT/gnuplot.log. */
static int run_gnuplot(const rp_plotter_t *pl, const char *varsfile, const char *scr, const char *img) {
  char logf[4300];
  pid_t pid;
  int st = 0;
  snprintf(logf, sizeof logf, "%s/gnuplot.log", pl->out);
  remove(img);
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    FILE *lf = freopen(logf, "a", stderr);
    (void)lf;
    if (freopen("/dev/null", "w", stdout) == NULL) _exit(127);
    execl(pl->gnuplot, pl->gnuplot, varsfile, scr, (char *)NULL);
    _exit(127);
  }
  return pid >= 0 && waitpid(pid, &st, 0) >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && access(img, R_OK) == 0;
}

/* Run gnuplot on vars (written to OUT/name.EXT.vars.gp, removed after a success) then the script, for the PNG and
   the SVG. Returns 1 when both images exist. */
int rp_draw(rp_plotter_t *pl, const char *script, const char *name, const char *vars) {
  char scr[4300];
  int ok = 1;
  if (!pl->have_gnuplot || !pl->have_scripts) return 0;
  snprintf(scr, sizeof scr, "%s/%s", pl->plots, script);
  if (access(scr, R_OK) != 0) return 0;
  for (int k = 0; k < 2; k++) {
    const char *ext = k ? "svg" : "png";
    cli_sb_t sb = {0};
    char img[4300], varsfile[4300];
    snprintf(img, sizeof img, "%s/%s.%s", pl->out, name, ext);
    snprintf(varsfile, sizeof varsfile, "%s/%s.%s.vars.gp", pl->out, name, ext);
    cli_sb_printf(&sb, "# attnacc report: variables for %s\n%sout = '%s'\n", script, vars, img);
    if (sb.oom || aa_file_write(varsfile, sb.buf, sb.len, NULL) != AA_OK) {
      cli_sb_free(&sb);
      return 0;
    }
    cli_sb_free(&sb);
    if (run_gnuplot(pl, varsfile, scr, img))
      remove(varsfile);
    else
      ok = 0;
  }
  pl->nplots++;
  if (!ok) pl->nfailed++;
  return ok;
}

void rp_gp_str(cli_sb_t *sb, const char *name, const char *v) {
  cli_sb_printf(sb, "%s = '", name);
  for (const char *p = v; *p; p++)
    cli_sb_printf(sb, *p == '\'' ? "''" : "%c", *p);
  cli_sb_printf(sb, "'\n");
}

/* Append one line of the caption (src[0..n)), escaped for a double-quoted gnuplot string. */
static void caption_line(cli_sb_t *sb, const char *src, size_t n, int first) {
  if (!first) cli_sb_printf(sb, "\\n");
  for (size_t i = 0; i < n; i++)
    cli_sb_printf(sb, src[i] == '"' || src[i] == '\\' ? "\\%c" : "%c", src[i]);
}

int rp_gp_caption(cli_sb_t *sb, const char *text, size_t width) {
  int lines = 0;
  const char *p = text;
  cli_sb_printf(sb, "caption = \"");
  while (*p) {
    /* the hard break ahead: a newline or the two characters of a \n escape */
    size_t hard = 0, cut;
    while (p[hard] && p[hard] != '\n' && !(p[hard] == '\\' && p[hard + 1] == 'n'))
      hard++;
    cut = hard;
    if (cut > width) { /* too wide for the canvas: break at the last space that fits, else at the width */
      cut = width;
      while (cut > width / 2 && p[cut] != ' ')
        cut--;
      if (p[cut] != ' ') cut = width;
    }
    caption_line(sb, p, cut, lines == 0);
    lines++;
    p += cut;
    if (*p == ' ' && cut < hard)
      p++;
    else if (*p == '\n')
      p++;
    else if (*p == '\\' && cut == hard)
      p += 2;
  }
  cli_sb_printf(sb, "\"\ncaplines = %d\n", lines ? lines : 1);
  return lines;
}
