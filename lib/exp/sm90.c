/* attnacc: models of the sm90 (H100/H200) special-function results FA2 uses: MUFU.EX2, exp2f, expf, logf, __logf. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <string.h>

#include "exp-impl.h"

/* MUFU.EX2 (ex2.approx.ftz.f32) as measured on an H200 over all 2^32 inputs
   (experiments/README-gpu.md section 4, fixtures/h200-fa2/):
   - the input is truncated toward zero to a multiple of 2^-23 (ex2(x) =
     ex2(trunc(x 2^23) / 2^23) held for every |x| < 128; floor and nearest
     did not);
   - for x >= 0 the fixed-point value xq = i + f, i = floor(xq), f in
     [0, 1), gives 2^i * T(f) (mantissa T(f) from f alone, exponent i): no
     mismatch over all of [0, 128); for x < 0 the magnitude is negated by
     one's complement, xq = -|xq| - 2^-23 (2^i T(f) with that xq matched all
     2^24 - 2 device values on (-1, 0) off the integers; the two's
     complement rule missed 91 %; all of [-126, 0) followed it except the
     126 negative integers, where the one's complement missed every one:
     there the model gives 2^-k, which the device run did not check);
   - T on the 2^23 grid of [0, 1) is a 64-interval quadratic interpolation
     (index = top 6 bits of f, t = low 17 bits): a least-squares quadratic
     per interval leaves a residual of RMS 0.2896 ulp (1/sqrt(12) = 0.2887:
     one truncation), 32 intervals leave 0.50. Its exact datapath (partial
     product truncation) was not recovered: the minimax spread of any real
     quadratic is 1.17-1.21 ulp per interval, so no floor(quadratic) is
     exact. The model below is floor(C0 / 2^10 + C1 t / 2^17 + C2 t^2 / 2^34)
     ulps with integer C0, C1, C2 fitted per interval to the most matches
     (C1 came out a multiple of 4 in the fit, as a 16-bit C1 would): it
     reproduces 90.90 % of the 2^23 device mantissas (correctly rounded
     2^f: 61.1 %), the others by one ulp.
   Rows: C0 (2^-10 ulp), C1, C2 for interval s = 0..63. */
static const struct {
  long long c0;
  long c1, c2;
} ex2_coef[64] = {
    {925LL, 90852, 494},         {93538777LL, 91841, 500},    {188095963LL, 92841, 505},
    {283682205LL, 93852, 511},   {380309796LL, 94874, 516},   {477989276LL, 95908, 521},
    {576732315LL, 96952, 527},   {676551069LL, 98008, 532},   {777456404LL, 99074, 539},
    {879460565LL, 100153, 545},  {982575255LL, 101244, 551},  {1086813212LL, 102346, 557},
    {1192186076LL, 103461, 563}, {1298706584LL, 104588, 568}, {1406386712LL, 105726, 575},
    {1515239446LL, 106878, 581}, {1625277659LL, 108041, 588}, {1736513805LL, 109218, 594},
    {1848961430LL, 110408, 600}, {1962633504LL, 111610, 607}, {2077543191LL, 112826, 613},
    {2193704731LL, 114054, 620}, {2311130775LL, 115296, 627}, {2429835669LL, 116552, 633},
    {2549833106LL, 117820, 641}, {2671137170LL, 119104, 647}, {2793762006LL, 120401, 654},
    {2917722771LL, 121712, 661}, {3043032527LL, 123037, 669}, {3169707210LL, 124377, 676},
    {3297761367LL, 125731, 683}, {3427210127LL, 127100, 691}, {3558067923LL, 128485, 698},
    {3690351505LL, 129884, 705}, {3824074960LL, 131297, 714}, {3959254413LL, 132728, 721},
    {4095906003LL, 134173, 729}, {4234045711LL, 135634, 737}, {4373689685LL, 137111, 745},
    {4514854541LL, 138604, 753}, {4657555982LL, 140114, 761}, {4801811536LL, 141639, 770},
    {4947638727LL, 143181, 778}, {5095053001LL, 144741, 786}, {5244072650LL, 146317, 795},
    {5394714700LL, 147911, 803}, {5546997958LL, 149521, 812}, {5700938958LL, 151149, 821},
    {5856556385LL, 152795, 830}, {6013868109LL, 154459, 839}, {6172893391LL, 156141, 848},
    {6333650365LL, 157841, 857}, {6496157250LL, 159559, 867}, {6660434372LL, 161297, 876},
    {6826499582LL, 163054, 885}, {6994373832LL, 164829, 895}, {7164075399LL, 166624, 905},
    {7335625470LL, 168438, 915}, {7509043841LL, 170272, 925}, {7684349516LL, 172127, 935},
    {7861565377LL, 174001, 945}, {8040710025LL, 175896, 955}, {8221805682LL, 177812, 965},
    {8404873606LL, 179748, 976},
};

uint32_t aa_ex2_sm90_mantissa(uint32_t f23) {
  uint32_t s = f23 >> 17, t = f23 & 0x1ffff;
  /* all terms in units of 2^-34 ulp (fits in 64 bits: 2^23 * 2^34 = 2^57) */
  long long v = ex2_coef[s].c0 * (1LL << 24) + (long long)ex2_coef[s].c1 * t * (1LL << 17) +
                (long long)ex2_coef[s].c2 * (long long)t * t;
  long long m = v >> 34;
  return m < 0 ? 0 : m > 0x7fffff ? 0x7fffff : (uint32_t)m;
}

float aa_ex2_sm90_ftz(float x) {
  if (isnan(x)) return x;
  if (x >= 128.0f) return INFINITY;
  if (x < -127.0f) return 0.0f; /* results below 2^-126 flush to zero */
  /* trunc(x 2^23) is exact in int64 for |x| < 128 */
  long long q = (long long)((double)x * 0x1p23);
  if (q < 0 && (-q & 0x7fffff) != 0) q -= 1; /* negative non-integers: the magnitude's one's complement */
  long long i = q >= 0 ? q >> 23 : -((-q + 0x7fffff) >> 23); /* floor(q / 2^23) */
  uint32_t f23 = (uint32_t)(q - i * 0x800000);
  if (i < -126) return 0.0f;
  return aa_f32_from_bits((uint32_t)(i + 127) << 23 | aa_ex2_sm90_mantissa(f23));
}

/* exp2f as nvcc compiles it for sm90 without fast math (SASS of exp2f and
   of exp2f(__fmul_rn(s, c) - b), read with cuobjdump on the device): x <
   -126 is halved, MUFU.EX2 taken, and the result squared (FMUL, so the
   subnormal range is kept); else MUFU.EX2 directly. */
float aa_exp2f_sm90(float x) {
  if (x < -126.0f) {
    float h = aa_ex2_sm90_ftz(x * 0.5f);
    return h * h;
  }
  return aa_ex2_sm90_ftz(x);
}

static float f32c(uint32_t b) {
  return aa_f32_from_bits(b);
}

/* expf without fast math (libdevice, SASS on sm90):
     t = sat(fma(a, 0x3bbb989d, 0.5)); t = fma.rm(t, 252, 12582913);
     j = t - 12583039; r = fma(a, 0x3fb8aa3b, -j); r = fma(a, 0x32a57060, r);
     result = (bits(t) << 23 as float) * MUFU.EX2(r). */
float aa_expf_sm90(float a) {
  float t = fmaf(a, f32c(0x3bbb989du), 0.5f);
  t = isnan(t) ? 0.0f : t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
  /* t * 252 + 12582913 is exact in binary64 and lies in [2^23, 2^24), where
     FP32 spacing is 1: round-down is floor */
  float tr = (float)floor((double)t * 252.0 + 12582913.0);
  float j = tr - 12583039.0f;
  float r = fmaf(a, f32c(0x3fb8aa3bu), -j);
  r = fmaf(a, f32c(0x32a57060u), r);
  return aa_f32_from_bits(aa_f32_bits(tr) << 23) * aa_ex2_sm90_ftz(r);
}

/* logf without fast math (libdevice, SASS on sm90): no MUFU, an FP32 FMA
   polynomial in r = m - 1 with m = x / 2^e in [2/3, 4/3). Bit-exact. */
float aa_logf_sm90(float x) {
  int tiny = !(x >= f32c(0x00800000u)); /* FSETP.GEU: true for NaN too */
  if (tiny) x *= 8388608.0f;
  uint32_t xb = aa_f32_bits(x);
  uint32_t eb = (xb - 0x3f2aaaabu) & 0xff800000u;
  float r = aa_f32_from_bits(xb - eb) - 1.0f;
  float e = fmaf((float)(int32_t)eb, f32c(0x34000000u), tiny ? -23.0f : 0.0f);
  float p = fmaf(r, -f32c(0x3e055027u), 0.14084610342979431152f);
  p = fmaf(r, p, -0.12148627638816833496f);
  p = fmaf(r, p, 0.13980610668659210205f);
  p = fmaf(r, p, -0.16684235632419586182f);
  p = fmaf(r, p, 0.20012299716472625732f);
  p = fmaf(r, p, -0.24999669194221496582f);
  p = fmaf(r, p, 0.33333182334899902344f);
  p = fmaf(r, p, -0.5f);
  p = r * p;
  p = fmaf(r, p, r);
  float y = fmaf(e, 0.69314718246459960938f, p);
  if (xb >= 0x7f800000u) y = fmaf(x, INFINITY, INFINITY); /* +Inf, NaN, negative inputs */
  return x != 0.0f ? y : -INFINITY;
}

/* MUFU.LG2 (lg2.approx.ftz.f32) for a normal x = 2^e m, m in [1, 2):
   RZ_fp32(e + L(m)), the exponent added to the unit's log2 of the
   mantissa and the sum truncated toward zero to fp32. Found from the
   H200's softmax_lse (experiments/README-gpu.md section 6): with the device's
   own lg2 on [1, 2) as L, RZ(e + L(m)) reproduces 97.6 % of FA2's LSE at
   n = 16384 (row sums 52..1383, e = 5..10), round-to-nearest 67.5 %. L is
   not modelled bit for bit: log2(m) in binary64 stands in (94.0 % of those
   LSEs). Only e >= 5 was checked; e < 0 (RZ of a negative sum) and e = 0
   (where the result is L itself) were not. Zero gives -Inf, negative and
   NaN inputs NaN, +Inf +Inf; subnormals are flushed (ftz: -Inf). */
float aa_lg2_sm90_ftz(float x) {
  uint32_t xb = aa_f32_bits(x);
  if (isnan(x) || (xb >> 31 && (xb & 0x7fffffffu) != 0)) return NAN;
  if ((xb & 0x7f800000u) == 0) return -INFINITY; /* zero or flushed subnormal */
  if (xb == 0x7f800000u) return INFINITY;
  int e = (int)((xb >> 23) & 0xff) - 127;
  double m = 1.0 + (double)(xb & 0x7fffffu) * 0x1p-23;
  double v = (double)e + log2(m);
  float f = (float)v; /* RN; step back one ulp toward zero where it rounded away */
  if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
  return f;
}

/* __logf (SASS: MUFU.LG2 then FMUL by 0x3f317218; subnormals are prescaled
   by 2^24 there, modelled here by the correctly rounded log2, unchecked). */
float aa_logf_fast_sm90(float x) {
  uint32_t xb = aa_f32_bits(x);
  if (xb != 0 && (xb & 0x7f800000u) == 0) return (float)log2((double)x) * f32c(0x3f317218u);
  return aa_lg2_sm90_ftz(x) * f32c(0x3f317218u);
}
