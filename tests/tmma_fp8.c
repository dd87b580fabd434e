/* attnacc: the FP8 models against the H200: mma.sync m16n8k32 e4m3 chains (both accumulators) and torch._scaled_mm.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
/* fixtures/h200-fp8 (pack.py says the layouts). mma_f32.npy and
   mma_f16.npy: 4096 sampled steps each of mma_chain_fp8.cu, rows (code,
   acc_in, acc_out, 0), the operands regenerated from fp8_gen.h; the models
   sm90-fp8-mma-f32 and sm90-fp8-mma-f16 must reproduce every row, and the
   model first expected from the SASS (two consecutive tc-k16-f25 blocks
   accumulating into C, k 0..15 then 16..31) must fail on some, so the
   sample tells them apart. scaled_mm_*.npy: the 32 x 32 corner of each
   torch._scaled_mm case; tc-fp8-k32-f13 (use_fast_accum) and
   tc-fp8-k32-f13-p128 (without) followed by cuBLAS's epilogue as modelled
   here (alpha = fl32(scale_a scale_b), D = fl32(alpha acc), bf16 by RNE)
   must reproduce every calibration case and every held-out case; the
   split-K ones with use_fast_accum (K = 8192: cuBLASLt's
   nvjet_..._splitK kernel, 3 slices) follow the split-K model below.
   splitk_*.npy (splitk_probe.py, pack_splitk.py): the chain probes must
   show K cut into slices of ceil(T / S) k tiles of 128 (T tiles in all,
   S the number of accumulators the probes show), each slice one accumulator; then the split-K
   model -- each slice a tc-fp8-k32-f13 chain from +0, the slices' results
   added in fp32 in slice order -- must reproduce every calibration and
   held-out case (S as the probes count it: the 64x32 kernel at N 32 runs
   grid y 6 over 3 slices). Without use_fast_accum the split-K kernels
   give tc-fp8-k32-f13-p128 in k order, as unsplit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "fp8_gen.h"
#include "gemm.h"
#include "tests.h"

/* The n bytes after the 128-byte header of fixtures/h200-fp8/NAME, or NULL (reported). */
static void *load(const char *name, size_t n) {
  const char *src = getenv("top_srcdir");
  char p[4200];
  snprintf(p, sizeof p, "%s/fixtures/h200-fp8/%s", src != NULL ? src : "..", name);
  FILE *f = fopen(p, "rb");
  void *buf = malloc(n);
  int ok = f != NULL && buf != NULL && fseek(f, 128, SEEK_SET) == 0 && fread(buf, 1, n, f) == n;
  if (f != NULL) fclose(f);
  if (!ok) {
    AA_FAIL("cannot read %zu bytes of %s", n, p);
    free(buf);
    return NULL;
  }
  return buf;
}

/* One chain step of row r: the model's output bits (fp32, or fp16 as a value compared with its sign). */
static int step_ok(const uint32_t *row, int f16form, aa_accum_t model, int accumulate_into_c) {
  uint32_t code = row[0];
  int cfg = (int)(code >> 24), w = (int)((code >> 16) & 0xff), s = (int)((code >> 8) & 0xff),
      i = (int)((code >> 4) & 15), j = (int)(code & 15);
  double a[32], b[32];
  for (int k = 0; k < 32; k++) {
    a[k] = fp8_e4m3_value(fp8_operand(cfg, 0, w, s, i * 32 + k));
    b[k] = fp8_e4m3_value(fp8_operand(cfg, 1, w, s, k * 8 + j));
  }
  double c = f16form ? fp8_f16_value(row[1]) : aa_f32_from_bits(row[1]),
         want = f16form ? fp8_f16_value(row[2]) : aa_f32_from_bits(row[2]);
  if (aa_gemm(&c, 1, a, 32, 0, b, 1, 0, 1, 1, 32, accumulate_into_c, model) != AA_OK) return 0;
  return c == want && signbit(c) == signbit(want);
}

static void test_chains(const char *file, int f16form, aa_accum_t model) {
  uint32_t *rows = load(file, 4096 * 16);
  if (rows == NULL) return;
  size_t same = 0, expected_same = 0, c0_bad = 0;
  for (size_t r = 0; r < 4096; r++) {
    const uint32_t *row = rows + 4 * r;
    int cfg = (int)(row[0] >> 24), w = (int)((row[0] >> 16) & 0xff), e = (int)(row[0] & 0xff);
    if (((row[0] >> 8) & 0xff) == 0) /* step 0: the packer's initial C is fp8_gen.h's */
      c0_bad += row[1] !=
                (f16form ? fp8_c0_f16(cfg, w, (e >> 4) * 8 + (e & 15)) : fp8_c0_f32(cfg, w, (e >> 4) * 8 + (e & 15)));
    if (step_ok(row, f16form, model, 1))
      same++;
    else if (r - same < 4)
      AA_FAIL("%s row %zu (code 0x%08x): %s differs from the H200", file, r, row[0], aa_accum_name(model));
    if (!f16form) expected_same += step_ok(row, 0, AA_ACC_TC_K16_F25, 1);
  }
  printf("tmma_fp8: %s reproduces %zu of 4096 steps of %s", aa_accum_name(model), same, file);
  if (!f16form) printf("; two consecutive tc-k16-f25 blocks into C %zu", expected_same);
  printf("\n");
  AA_CHECK(c0_bad == 0, "%s: %zu step-0 rows do not start from fp8_gen.h's C", file, c0_bad);
  AA_CHECK(same == 4096, "%s: %s differs from the H200 on %zu steps", file, aa_accum_name(model), 4096 - same);
  AA_CHECK(f16form || expected_same < 4096, "%s: the sample does not refute the consecutive-blocks model", file);
  free(rows);
}

/* The scaled_mm record layout of pack.py: 8 header words, then R x R output bits. */
enum { SMM_CASES = 55, SMM_SETS = 11, R = 32, REC = 8 + R * R };

/* cuBLAS's epilogue as modelled: alpha = fl32(sa sb), D = fl32(alpha acc); bf16 by RNE. */
static uint32_t epilogue(double acc, const uint32_t *head) {
  float alpha = aa_f32_from_bits(head[5]) * aa_f32_from_bits(head[6]), d = alpha * (float)acc;
  return head[4] ? aa_bf16_bits_rne(d) : aa_f32_bits(d);
}

enum { SPLIT_TILE_K = 128 }; /* the k tile of the nvjet_sm90_qq..._128x16 kernels: a slice is whole tiles */

/* cuBLASLt's split-K FP8 GEMM with use_fast_accum, as the chain probes and the calibration cases show: K in
   slices of ceil(T / S) tiles (the last one the rest), each slice a tc-fp8-k32-f13 chain from +0, the slices'
   results (exact in fp32) added in fp32 in slice order. r x r outputs, operands rows [r][K]. */
static int splitk_fast(double *out, const double *A, const double *B, size_t r, size_t K, size_t S) {
  size_t per = (K / SPLIT_TILE_K + S - 1) / S * SPLIT_TILE_K;
  double *part = malloc(r * r * sizeof *part);
  float *sum = calloc(r * r, sizeof *sum);
  int st = part != NULL && sum != NULL ? AA_OK : AA_ENOMEM;
  for (size_t lo = 0; st == AA_OK && lo < K; lo += per) {
    size_t len = K - lo < per ? K - lo : per;
    st = aa_gemm(part, r, A + lo, K, 0, B + lo, K, 1, r, r, len, 0, AA_ACC_TC_FP8_K32_F13);
    for (size_t e = 0; st == AA_OK && e < r * r; e++)
      sum[e] = lo == 0 ? (float)part[e] : sum[e] + (float)part[e];
  }
  for (size_t e = 0; st == AA_OK && e < r * r; e++)
    out[e] = sum[e];
  free(part);
  free(sum);
  return st;
}

/* The r x r corner of one operand set (A rows [r][K], B^T rows [r][K]) under the fast, promoted and split-K
   (S slices; none when S is 0) models. */
static int set_gemms(const uint8_t *ops, size_t r, size_t K, size_t S, double *fast, double *promo, double *split) {
  double *A = malloc(r * K * sizeof *A), *B = malloc(r * K * sizeof *B);
  int st = A != NULL && B != NULL ? AA_OK : AA_ENOMEM;
  for (size_t t = 0; st == AA_OK && t < r * K; t++)
    A[t] = fp8_e4m3_value(ops[t]), B[t] = fp8_e4m3_value(ops[r * K + t]);
  if (st == AA_OK) st = aa_gemm(fast, r, A, K, 0, B, K, 1, r, r, K, 0, AA_ACC_TC_FP8_K32_F13);
  if (st == AA_OK) st = aa_gemm(promo, r, A, K, 0, B, K, 1, r, r, K, 0, AA_ACC_TC_FP8_K32_F13_P128);
  if (st == AA_OK && S > 0) st = splitk_fast(split, A, B, r, K, S);
  free(A);
  free(B);
  return st;
}

static void test_scaled_mm(void) {
  uint32_t *out = load("scaled_mm_out.npy", (size_t)SMM_CASES * REC * 4);
  size_t setk[SMM_SETS] = {0}, off[SMM_SETS + 1] = {0};
  for (int c = 0; out != NULL && c < SMM_CASES; c++) /* each set's K, from its cases */
    if (out[c * REC + 1] < SMM_SETS) setk[out[c * REC + 1]] = out[c * REC + 2];
  for (int s = 0; s < SMM_SETS; s++)
    off[s + 1] = off[s] + 2 * R * setk[s];
  uint8_t *ops = out != NULL ? load("scaled_mm_ops.npy", off[SMM_SETS]) : NULL;
  size_t tot[2] = {0, 0}, same[2] = {0, 0}, alt = 0, alt_tot = 0;
  for (int s = 0; ops != NULL && s < SMM_SETS; s++) {
    double fast[R * R], promo[R * R], split[R * R];
    /* K 8192 (M 256, N 64) ran split-K in 3 slices: the grid splitk_probe.py saw for that shape */
    size_t slices = setk[s] == 8192 ? 3 : 0;
    AA_CHECK(setk[s] > 0 && set_gemms(ops + off[s], R, setk[s], slices, fast, promo, split) == AA_OK,
             "scaled_mm set %d: gemm", s);
    for (int c = 0; c < SMM_CASES; c++) {
      const uint32_t *h = out + c * REC;
      if (h[1] != (uint32_t)s) continue;
      size_t n = 0;
      int splitk = h[2] == 8192 && h[3]; /* cuBLAS ran split-K */
      for (int e = 0; e < R * R; e++)
        n += epilogue(!h[3] ? promo[e] : splitk ? split[e] : fast[e], h) == h[8 + e];
      printf("tmma_fp8: scaled_mm %-11s K %5u %s %s sa %g sb %g: %zu of %d bits equal%s\n",
             h[0] ? "held-out" : "calibration", h[2], h[3] ? "fast " : "promo", h[4] ? "bf16" : "fp32",
             aa_f32_from_bits(h[5]), aa_f32_from_bits(h[6]), n, R * R, splitk ? " (split-K model, 3 slices)" : "");
      for (int e = 0; !h[3] && h[2] >= 256 && e < R * R; e++, alt_tot++) /* promo cases without promotion */
        alt += epilogue(fast[e], h) == h[8 + e];
      tot[h[0] != 0] += R * R, same[h[0] != 0] += n;
      AA_CHECK(n == R * R, "scaled_mm case %d (K %u): the model differs on %zu outputs", c, h[2], R * R - n);
    }
  }
  printf("tmma_fp8: scaled_mm calibration %zu of %zu, held-out %zu of %zu\n", same[0], tot[0], same[1], tot[1]);
  printf("tmma_fp8: tc-fp8-k32-f13 without promotion reproduces %zu of %zu outputs of the promo cases, K >= 256\n",
         alt, alt_tot);
  AA_CHECK(alt < alt_tot, "scaled_mm: the data do not tell promotion from none");
  AA_CHECK(tot[0] == 35 * R * R && tot[1] == 20 * R * R, "scaled_mm: %zu + %zu outputs checked", tot[0], tot[1]);
  free(ops);
  free(out);
}

enum { SPK_PROBES = 49, SPK_BLOCKS = 256, SPK_CASES = 30, SPK_SETS = 10, SR = 8, SREC = 8 + SR * SR };

/* The chain probes: row i is 256 exactly when k block i (k = 32 i + 1) shares block b0's accumulator, i.e. when
   the slice formula of splitk_fast puts both in one slice. */
static void test_splitk_chains(void) {
  uint32_t *p = load("splitk_chain.npy", (size_t)SPK_PROBES * (4 + SPK_BLOCKS) * 4);
  size_t agree = 0;
  for (int c = 0; p != NULL && c < SPK_PROBES; c++) {
    const uint32_t *h = p + c * (4 + SPK_BLOCKS);
    size_t per = (h[1] / SPLIT_TILE_K + h[2] - 1) / h[2] * SPLIT_TILE_K, mine = 32 * h[0] / per;
    AA_CHECK(h[3] == SPK_BLOCKS && h[1] == 32 * SPK_BLOCKS, "splitk chain probe %d: shape", c);
    for (uint32_t i = 0; i < SPK_BLOCKS; i++) {
      float v = aa_f32_from_bits(h[4 + i]);
      int same = 32 * i / per == mine;
      AA_CHECK(v == (same ? 256.0f : 256.0f + 0x1p-6f), "splitk probe b0 %u row %u: %a", h[0], i, v);
      agree += v == (same ? 256.0f : 256.0f + 0x1p-6f);
    }
  }
  printf("tmma_fp8: splitk chain probes: %zu of %d rows as the slices of ceil(T / S) tiles say\n", agree,
         SPK_PROBES * SPK_BLOCKS);
  free(p);
}

/* The random split-K cases: use_fast_accum by splitk_fast (S from the kernel's grid; S = 1 is the plain chain),
   without it tc-fp8-k32-f13-p128 in k order; fp32 or bf16 (RNE) outputs, unit scales. */
static void test_splitk_cases(void) {
  uint32_t *out = load("splitk_out.npy", (size_t)SPK_CASES * SREC * 4);
  size_t setk[SPK_SETS] = {0}, off[SPK_SETS + 1] = {0}, same[2] = {0, 0}, tot[2] = {0, 0};
  for (int c = 0; out != NULL && c < SPK_CASES; c++)
    if (out[c * SREC + 1] < SPK_SETS) setk[out[c * SREC + 1]] = out[c * SREC + 2];
  for (int s = 0; s < SPK_SETS; s++)
    off[s + 1] = off[s] + 2 * SR * setk[s];
  uint8_t *ops = out != NULL ? load("splitk_ops.npy", off[SPK_SETS]) : NULL;
  for (int c = 0; ops != NULL && c < SPK_CASES; c++) {
    const uint32_t *h = out + c * SREC;
    uint32_t unit[8] = {0, 0, 0, 0, h[4], aa_f32_bits(1.0f), aa_f32_bits(1.0f), SR};
    double fast[SR * SR], promo[SR * SR], split[SR * SR];
    AA_CHECK(setk[h[1]] > 0 && set_gemms(ops + off[h[1]], SR, h[2], h[5], fast, promo, split) == AA_OK,
             "splitk case %d: gemm", c);
    size_t n = 0;
    for (int e = 0; e < SR * SR; e++)
      n += epilogue(h[3] ? split[e] : promo[e], unit) == h[8 + e];
    printf("tmma_fp8: splitk %-11s K %5u N %2u S %u %s %s: %zu of %d bits equal\n", h[0] ? "held-out" : "calibration",
           h[2], h[6], h[5], h[3] ? "fast " : "promo", h[4] ? "bf16" : "fp32", n, SR * SR);
    same[h[0] != 0] += n, tot[h[0] != 0] += SR * SR;
    AA_CHECK(n == SR * SR, "splitk case %d (K %u, S %u): the model differs on %zu outputs", c, h[2], h[5],
             SR * SR - n);
  }
  printf("tmma_fp8: splitk calibration %zu of %zu, held-out %zu of %zu\n", same[0], tot[0], same[1], tot[1]);
  AA_CHECK(tot[0] == 15 * SR * SR && tot[1] == 15 * SR * SR, "splitk: %zu + %zu outputs checked", tot[0], tot[1]);
  free(ops);
  free(out);
}

int main(void) {
  test_chains("mma_f32.npy", 0, AA_ACC_SM90_FP8_MMA_F32);
  test_chains("mma_f16.npy", 1, AA_ACC_SM90_FP8_MMA_F16);
  test_scaled_mm();
  test_splitk_chains();
  test_splitk_cases();
  return aa_test_finish("tmma_fp8");
}
