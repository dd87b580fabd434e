/* attnacc: derive and check the H200 MUFU.EX2 / MUFU.LG2 interpolator tables (lib/exp/sm90.c) on the device dumps. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
/* Usage (DIR holds the dumps of fixtures/h200-fa2/mufu.cu: lg2_ftz_1_2.d32, ex2_ftz_0_1_step2m24.d8):
     sfu_fit check DIR        match rates of aa_lg2_sm90_ftz and aa_ex2_sm90_ftz over all 2^23 device outputs
     sfu_fit fit DIR ex2|lg2  re-derive the 64-row table (a minute of one core): C0 C1 C2 per interval
     sfu_fit sample DIR OUT   write OUT (.npy, 4096 x 2 '<u4'): (x, lg2.approx.ftz(x)) device pairs on [1, 2)
     sfu_fit hist MUFU.TXT    the models' error histograms over all 2^32 inputs and structure tests 0 and 17,
                              as mufu.cu prints them, each compared with the device's mufu.txt (minutes)
   The datapath is fixed (lib/exp/sm90.c): index = top 6 bits of the fraction, t = low 17 bits, P = C0 + C1 t +
   C2 S(t) in 2^-38 with S the truncated square (aa_sfu_square_sm90), truncated to the output. Each device output
   then bounds P to an integer interval [lo_t, hi_t]; for fixed (C1, C2) a C0 exists iff min(hi - C1 t - C2 S) >=
   max(lo - C1 t - C2 S), and that slack is jointly concave in (C1, C2), so nested ternary searches find the best. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exp.h"
#include "fmt.h"
#include "rng.h"

#define NMANT (1u << 23)
#define NT (1u << 17) /* points per interval */

/* The device outputs for the 2^23 fractions: lg2.approx.ftz(1 + j 2^-23) (file: int32 first differences from
   0), or the ex2.approx.ftz(j 2^-23) bits (file: int8 first differences from 0x3f800000 at step 2^-24, of which
   the even points are the 2^-23 grid since the input is truncated to it). NULL after a message. */
static uint32_t *load_dump(const char *dir, int lg2) {
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", dir, lg2 ? "lg2_ftz_1_2.d32" : "ex2_ftz_0_1_step2m24.d8");
  size_t n = lg2 ? NMANT : 2 * NMANT, w = lg2 ? 4 : 1;
  FILE *f = fopen(p, "rb");
  unsigned char *raw = malloc(n * w);
  uint32_t *out = malloc(NMANT * sizeof *out);
  int ok = f != NULL && raw != NULL && out != NULL && fread(raw, w, n, f) == n;
  if (f != NULL) fclose(f);
  if (!ok) {
    fprintf(stderr, "sfu_fit: cannot read %s\n", p);
    free(raw), free(out);
    return NULL;
  }
  uint32_t acc = lg2 ? 0u : 0x3f800000u;
  for (size_t j = 0; j < n; j++) {
    int32_t d;
    if (lg2)
      memcpy(&d, raw + 4 * j, 4);
    else
      d = (int8_t)raw[j];
    acc += (uint32_t)d;
    if (lg2 || j % 2 == 0) out[lg2 ? j : j / 2] = acc;
  }
  free(raw);
  return out;
}

static int check(const char *dir) {
  uint32_t *l = load_dump(dir, 1), *e = load_dump(dir, 0);
  if (l == NULL || e == NULL) return free(l), free(e), 2;
  size_t lm = 0, lcr = 0, em = 0, ecr = 0;
  for (uint32_t j = 0; j < NMANT; j++) {
    float x = aa_f32_from_bits(0x3f800000u | j);
    lm += aa_f32_bits(aa_lg2_sm90_ftz(x)) == l[j];
    lcr += aa_f32_bits((float)log2((double)x)) == l[j];
    float z = (float)j * 0x1p-23f;
    em += aa_f32_bits(aa_ex2_sm90_ftz(z)) == e[j];
    ecr += aa_f32_bits(aa_exp2_cr_f32(z)) == e[j];
  }
  printf("lg2.approx.ftz on [1, 2): model %zu of %u (%.4f %%), correctly rounded log2 %.4f %%\n", lm, NMANT,
         100.0 * lm / NMANT, 100.0 * lcr / NMANT);
  printf("ex2.approx.ftz on [0, 1): model %zu of %u (%.4f %%), correctly rounded 2^x %.4f %%\n", em, NMANT,
         100.0 * em / NMANT, 100.0 * ecr / NMANT);
  free(l), free(e);
  return lm == NMANT && em == NMANT ? 0 : 1;
}

/* bounds on P (2^-38) from the device output of interval s, point t (truncation toward zero everywhere) */
static void bounds(const uint32_t *dev, int lg2, uint32_t s, uint32_t t, long long *lo, long long *hi) {
  uint32_t y = dev[s * NT + t];
  if (!lg2) {
    *lo = (long long)(y & 0x7fffffu) << 15, *hi = *lo + (1LL << 15) - 1;
    return;
  }
  if (s == 0 && t == 0) { /* lg2(1) = +0 is special-cased: no constraint */
    *lo = -(1LL << 50), *hi = 1LL << 50;
    return;
  }
  int ex = (int)(y >> 23) - 127;                                   /* y in [2^ex, 2^(ex+1)), ulp 2^(ex-23) */
  long long ulp36 = ex - 23 + 36 >= 0 ? 1LL << (ex - 23 + 36) : 1; /* below 2^-13 the 2^-36 grid is held exactly */
  long long y36 = (long long)ldexp((double)aa_f32_from_bits(y), 36);
  *lo = y36 * 4, *hi = (y36 + ulp36) * 4 - 1;
}

struct fit {
  const uint32_t *dev;
  int lg2;
  uint32_t s;
  long long *lo, *hi, *sq;
};

/* min over t of (hi - C1 t - C2 S) minus max of (lo - C1 t - C2 S); *c0 = the smallest feasible C0 */
static long long slack(const struct fit *f, long long c2, long long c1, long long *c0) {
  long long a = -(1LL << 62), b = 1LL << 62;
  for (uint32_t t = 0; t < NT; t++) {
    long long q = c1 * t + c2 * f->sq[t];
    if (f->lo[t] - q > a) a = f->lo[t] - q;
    if (f->hi[t] - q < b) b = f->hi[t] - q;
  }
  if (c0 != NULL) *c0 = a;
  return b - a;
}

/* the best C1 in [a, b] for this C2 (ternary search on the concave slack), *best = its slack */
static long long best_c1(const struct fit *f, long long c2, long long a, long long b, long long *best) {
  while (b - a > 4) {
    long long m1 = a + (b - a) / 3, m2 = b - (b - a) / 3;
    if (slack(f, c2, m1, NULL) < slack(f, c2, m2, NULL))
      a = m1 + 1;
    else
      b = m2;
  }
  long long arg = a;
  *best = -(1LL << 62);
  for (long long c = a; c <= b; c++) {
    long long v = slack(f, c2, c, NULL);
    if (v > *best) *best = v, arg = c;
  }
  return arg;
}

/* solve interval s; prints the row, returns 0 when feasible */
static int fit_interval(struct fit *f) {
  for (uint32_t t = 0; t < NT; t++)
    bounds(f->dev, f->lg2, f->s, t, &f->lo[t], &f->hi[t]);
  /* a quadratic through three points gives the search windows */
  uint32_t t0 = 1, tm = NT / 2, t1 = NT - 1;
  double y0 = (f->lo[t0] + f->hi[t0]) / 2.0, ym = (f->lo[tm] + f->hi[tm]) / 2.0, y1 = (f->lo[t1] + f->hi[t1]) / 2.0;
  double c = ((y1 - y0) / (t1 - t0) - (ym - y0) / (tm - t0)) / (t1 - tm);
  double b = (ym - y0) / (tm - t0) - c * (tm + t0);
  long long c2a = llround(c * 524288.0) - 2048, c2b = c2a + 4096, c1e = llround(b), w1 = 1LL << 24, v, c1;
  while (c2b - c2a > 4) {
    long long m1 = c2a + (c2b - c2a) / 3, m2 = c2b - (c2b - c2a) / 3, v1, v2;
    best_c1(f, m1, c1e - w1, c1e + w1, &v1), best_c1(f, m2, c1e - w1, c1e + w1, &v2);
    if (v1 < v2)
      c2a = m1 + 1;
    else
      c2b = m2;
  }
  long long best = -(1LL << 62), bc1 = 0, bc2 = 0, c0;
  for (long long c2 = c2a - 4; c2 <= c2b + 4; c2++) {
    c1 = best_c1(f, c2, c1e - w1, c1e + w1, &v);
    if (v > best) best = v, bc1 = c1, bc2 = c2;
  }
  best = slack(f, bc2, bc1, &c0);
  printf("{%lldLL, %lld, %lld}, /* %u: slack %lld%s */\n", c0, bc1, bc2, f->s, best, best < 0 ? " INFEASIBLE" : "");
  fflush(stdout);
  return best < 0;
}

static int fit(const char *dir, const char *fn) {
  int lg2 = strcmp(fn, "lg2") == 0;
  if (!lg2 && strcmp(fn, "ex2") != 0) return fprintf(stderr, "sfu_fit: fit wants ex2 or lg2, not '%s'\n", fn), 2;
  struct fit f = {load_dump(dir, lg2), lg2, 0, malloc(NT * 8), malloc(NT * 8), malloc(NT * 8)};
  int bad = f.dev == NULL || f.lo == NULL || f.hi == NULL || f.sq == NULL ? 2 : 0;
  for (uint32_t t = 0; !bad && t < NT; t++)
    f.sq[t] = aa_sfu_square_sm90(t);
  for (f.s = 0; !bad && f.s < 64; f.s++)
    bad |= fit_interval(&f);
  free((void *)f.dev), free(f.lo), free(f.hi), free(f.sq);
  return bad;
}

/* 4096 device pairs: the first and last 64 fractions, both sides of every interval boundary, and PCG32 (seed 16,
   stream 2) draws for the rest */
static int sample(const char *dir, const char *out) {
  uint32_t *l = load_dump(dir, 1), j[4096];
  if (l == NULL) return 2;
  int n = 0;
  for (uint32_t k = 1; k <= 64; k++)
    j[n++] = k, j[n++] = NMANT - k;
  for (uint32_t s = 1; s < 64; s++)
    j[n++] = s * NT, j[n++] = s * NT - 1;
  aa_pcg32_t r;
  aa_pcg32_seed(&r, 16, 2);
  while (n < 4096)
    j[n++] = aa_pcg32_next(&r) & (NMANT - 1);
  static const char dict[] = "{'descr': '<u4', 'fortran_order': False, 'shape': (4096, 2), }";
  char hdr[128];
  memset(hdr, ' ', sizeof hdr);
  memcpy(hdr, "\x93NUMPY\x01\x00\x76\x00", 10); /* version 1.0, 118 header bytes follow */
  memcpy(hdr + 10, dict, sizeof dict - 1);
  hdr[127] = '\n';
  FILE *f = fopen(out, "wb");
  int ok = f != NULL && fwrite(hdr, 1, 128, f) == 128;
  for (int k = 0; ok && k < 4096; k++) {
    uint32_t row[2] = {0x3f800000u | j[k], l[j[k]]};
    ok = fwrite(row, 4, 2, f) == 2;
  }
  if (f != NULL && fclose(f) != 0) ok = 0;
  free(l);
  if (!ok) return fprintf(stderr, "sfu_fit: cannot write %s\n", out), remove(out), 2;
  return 0;
}

/* mufu.cu's bucket of y against r (the correctly rounded value): ulp difference -4..4 -> 0..8, 9 beyond, 10 a
   class mismatch (NaN, infinity, zero or sign) */
static int classify(float y, float r) {
  uint32_t yb = aa_f32_bits(y), rb = aa_f32_bits(r);
  if (isnan(r)) return isnan(y) ? 4 : 10;
  if (yb == rb) return 4;
  if (isnan(y) || isinf(y) || isinf(r) || y == 0.f || r == 0.f || (yb >> 31) != (rb >> 31)) return 10;
  long long d = (long long)(yb & 0x7fffffffu) - (long long)(rb & 0x7fffffffu);
  if (yb >> 31) d = -d;
  return d < -4 || d > 4 ? 9 : (int)d + 4;
}

/* mufu.cu's structure tests 0 (ex2(x) = 2^floor(x) ex2(frac x), -126 <= x < 128) and 17 (lg2(2^e m) =
   fl(e + lg2(m)) for normal x > 0): 1 when x fails it */
static int structure_fails(int lg2, float x) {
  uint32_t u = aa_f32_bits(x);
  if (lg2) {
    if (!(isfinite(x) && x >= 0x1p-126f)) return 0;
    float m = aa_f32_from_bits((u & 0x7fffffu) | 0x3f800000u);
    return aa_f32_bits(aa_lg2_sm90_ftz(x)) != aa_f32_bits((float)((int)(u >> 23) - 127) + aa_lg2_sm90_ftz(m));
  }
  if (!(isfinite(x) && x >= -126.f && x < 128.f)) return 0;
  float i = floorf(x);
  return aa_f32_bits(aa_ex2_sm90_ftz(x)) != aa_f32_bits(aa_ex2_sm90_ftz(x - i)) + ((uint32_t)(int)i << 23);
}

/* the model's line of mufu.cu's histogram ("all" or "range" inputs) and the structure test's failures */
static void histogram(int lg2, char lines[2][400], unsigned long long *tfails) {
  unsigned long long h[2][12] = {{0}};
  float mr[2] = {0, 0}, ma[2] = {0, 0};
  *tfails = 0;
  for (uint64_t u = 0; u < (1ull << 32); u++) {
    float x = aa_f32_from_bits((uint32_t)u), y = lg2 ? aa_lg2_sm90_ftz(x) : aa_ex2_sm90_ftz(x);
    double rd = lg2 ? log2((double)x) : exp2((double)x);
    float r = (float)rd;
    int c = classify(y, r), inr = lg2 ? x >= 1.f && x <= 65536.f : x >= -126.f && x <= 1.f;
    for (int a = 0; a <= inr; a++) {
      h[a][c]++, h[a][11]++;
      if (c == 10 || isnan(r) || isinf(r) || isnan(y)) continue;
      float ae = (float)fabs((double)y - rd), re = rd != 0 ? (float)(ae / fabs(rd)) : 0.f;
      if (re > mr[a]) mr[a] = re;
      if (ae > ma[a]) ma[a] = ae;
    }
    *tfails += (unsigned long long)structure_fails(lg2, x);
  }
  for (int a = 0; a < 2; a++) {
    int n = snprintf(lines[a], 400, "hist %-20s %s", lg2 ? "lg2.approx.ftz.f32" : "ex2.approx.ftz.f32",
                     a ? "range" : "all  ");
    for (int c = 0; c < 12; c++)
      n += snprintf(lines[a] + n, 400 - (size_t)n, " %llu", h[a][c]);
    snprintf(lines[a] + n, 400 - (size_t)n, " maxrel %.6e maxabs %.6e", mr[a], ma[a]);
  }
}

/* whether the device's mufu.txt holds this line (without its newline) */
static int has_line(const char *path, const char *line) {
  FILE *f = fopen(path, "r");
  char buf[1024];
  int found = 0;
  while (f != NULL && !found && fgets(buf, sizeof buf, f) != NULL) {
    buf[strcspn(buf, "\n")] = 0;
    found = strcmp(buf, line) == 0;
  }
  if (f != NULL) fclose(f);
  return found;
}

/* the models' mufu.cu histograms over all 2^32 inputs (a few minutes), each line compared with the device's */
static int hist(const char *mufu_txt) {
  FILE *probe = fopen(mufu_txt, "r");
  if (probe == NULL) return fprintf(stderr, "sfu_fit: cannot read %s\n", mufu_txt), 2;
  fclose(probe);
  int bad = 0;
  for (int lg2 = 0; lg2 < 2; lg2++) {
    char lines[2][400], test[64];
    unsigned long long tf;
    histogram(lg2, lines, &tf);
    snprintf(test, sizeof test, "test %d fails %llu ", lg2 ? 17 : 0, tf);
    for (int a = 0; a < 2; a++) {
      int same = has_line(mufu_txt, lines[a]);
      printf("%s: %s\n", lines[a], same ? "as on the device" : "DIFFERS from the device");
      bad |= !same;
    }
    /* the device's line goes on with the first failing input: compare the prefix */
    FILE *f = fopen(mufu_txt, "r");
    char buf[1024];
    int same = 0;
    while (f != NULL && !same && fgets(buf, sizeof buf, f) != NULL)
      same = strncmp(buf, test, strlen(test)) == 0;
    if (f != NULL) fclose(f);
    printf("%s: %s\n", test, same ? "as on the device" : "DIFFERS from the device");
    bad |= !same;
  }
  return bad;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "check") == 0) return check(argv[2]);
  if (argc == 4 && strcmp(argv[1], "fit") == 0) return fit(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "sample") == 0) return sample(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "hist") == 0) return hist(argv[2]);
  fprintf(stderr, "usage: sfu_fit check DIR | fit DIR ex2|lg2 | sample DIR OUT.npy | hist MUFU.TXT\n");
  return 2;
}
