/* attnacc: first test; prints version, configuration and CPU features (it fails only if the build identity is empty).
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <gmp.h>
#include <mpfr.h>
#include <stdio.h>

#include "config.h"
#include "version.h"

int main(void) {
  printf("attnacc %s (git %s)\n", AA_VERSION, AA_GIT_HASH);
  printf("compiler: %s\n", __VERSION__);
  printf("MPFR %s (header %s), GMP %s\n", mpfr_get_version(), MPFR_VERSION_STRING, gmp_version);
#ifdef _OPENMP
  printf("OpenMP: %d\n", _OPENMP);
#else
  printf("OpenMP: off\n");
#endif
  printf("gnuplot: %s\n", AA_GNUPLOT[0] ? AA_GNUPLOT : "not found");
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  printf("CPU features:%s%s%s%s%s\n", __builtin_cpu_supports("sse4.2") ? " sse4.2" : "",
         __builtin_cpu_supports("avx2") ? " avx2" : "", __builtin_cpu_supports("fma") ? " fma" : "",
         __builtin_cpu_supports("avx512f") ? " avx512f" : "", __builtin_cpu_supports("avx512bw") ? " avx512bw" : "");
#endif
  if (AA_VERSION[0] == '\0') {
    printf("FAIL tversion: empty version string\n");
    return 1;
  }
  return 0;
}
