/* attnacc: formatting of the sweep progress line (the caller measures time and decides where to print). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>

#include "sweep.h"

int aa_sweep_progress_line(char *buf, size_t size, const aa_sweep_progress_t *p, double elapsed_seconds) {
  size_t finished = p->skipped + p->done;
  char rate[32] = "-", left[32] = "-";
  if (p->done > 0 && elapsed_seconds > 0) {
    double per_min = (double)p->done * 60.0 / elapsed_seconds;
    snprintf(rate, sizeof rate, "%.1f", per_min);
    size_t remaining = p->todo > p->done ? p->todo - p->done : 0;
    double s = (double)remaining * elapsed_seconds / (double)p->done + 0.5;
    if (s < 360000.0) {
      long t = (long)s;
      if (t >= 3600)
        snprintf(left, sizeof left, "%ldh%02ldm", t / 3600, t / 60 % 60);
      else
        snprintf(left, sizeof left, "%ldm%02lds", t / 60, t % 60);
    } else {
      snprintf(left, sizeof left, ">100h");
    }
  }
  return snprintf(buf, size, "sweep: %zu/%zu cells (%zu resumed), %s cells/min, %s left", finished, p->total,
                  p->skipped, rate, left);
}
