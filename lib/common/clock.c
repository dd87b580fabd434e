/* attnacc: the monotonic clock and the per-phase timing lines that AA_*_TIMES variables turn on. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"

double aa_wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void aa_phase_mark(const char *env, const char *prefix, const char *what, double *t) {
  double now;
  if (getenv(env) == NULL) return;
  now = aa_wall_seconds();
  if (*t > 0 && what != NULL && what[0] != '\0') fprintf(stderr, "%s: %-34s %.3f s\n", prefix, what, now - *t);
  *t = now;
}
