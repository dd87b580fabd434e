/* attnacc: models of the sm90 (H100/H200) special-function results FA2 uses: MUFU.EX2/LG2, expf, logf, __logf. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <math.h>
#include <string.h>
#include <threads.h>

#include "exp-impl.h"

/* The H200's multifunction interpolator (MUFU.EX2 and MUFU.LG2), recovered
   bit for bit from all 2^23 mantissas of each on the device
   (experiments/README-gpu.md section 4; fixtures/h200-fa2/mufu.cu dumps;
   bench/sfu_fit derives the tables below and checks them). It is the
   quadratic interpolator of Oberman and Siu, "A high-performance
   area-efficient multifunction interpolator", ARITH-17 (2005):
   - the 23-bit fraction f splits into an index s (top 6 bits: 64
     intervals) and t (low 17 bits);
   - a truncated squarer forms t^2 from the partial products of weight at
     least 2^19 only (the folded array: the squares t_i 2^2i with i >= 10
     and the cross terms t_i t_j 2^(i+j+1), i < j, i + j >= 18), and
     drops its low 19 bits: S(t), 15 bits;
   - the sum C0 + C1 t + C2 S is formed in a fixed-point accumulator of
     2^-38 (relative to the [1, 2) or [0, 1) result) and truncated (for
     lg2 no table fits round-to-nearest; for ex2 rounding is the same as
     truncation with C0 shifted by half an ulp);
   - C0 has 38 fraction bits, C1 16 bits and C2 10 bits of magnitude
     (ex2: units 2^-38; lg2: 2^-37, stored doubled below).
   Each table row was solved exactly: with the datapath fixed, every
   device output bounds C0 + C1 t + C2 S to an integer interval; the
   jointly concave slack over (C1, C2) is maximised and C0 taken from the
   intersection. The tables reproduce all 2^23 device outputs of each
   function on its reduced domain; another table that does is as good (the
   solution is not unique). */
struct sfu_row {
  long long c0;
  long c1, c2;
};

/* S(t): the truncated square of the 17-bit t (see above). With a = t >> 9,
   the kept terms are a^2 2^18 less the square of bit 9 (weight 2^18), and
   twice t_i 2^i times the bits j >= 18 - i of t for i = 2..8 (the bits
   below 9 meet no partner above the threshold otherwise); all are
   multiples of 2^18. */
/* The cross terms' sum g = sum over i = 2..8 of t_i (t >> (18 - i)) depends on bits 2-8 of t (the t_i) and bits
   10-16 (t >> (18 - i) = (t >> 10) >> (8 - i)) only: a table of 2^14 entries (below 2^10), filled once, keeps
   the exp models from looping over the seven terms per call (it was a sixth of fa2-h100's SFU time). */
static uint16_t sfu_cross[1 << 14];
static once_flag sfu_cross_once = ONCE_FLAG_INIT;

static void sfu_cross_fill(void) {
  for (uint32_t lh = 0; lh < (1u << 14); lh++) {
    uint32_t t = (lh >> 7) << 2 | (lh & 127u) << 10, g = 0; /* bits 2-8 from the index's top, 10-16 its bottom */
    for (int i = 2; i <= 8; i++)
      g += ((t >> i) & 1u) * (t >> (18 - i));
    sfu_cross[lh] = (uint16_t)g;
  }
}

uint32_t aa_sfu_square_sm90(uint32_t t) {
  call_once(&sfu_cross_once, sfu_cross_fill);
  uint32_t a = t >> 9, g = sfu_cross[((t >> 2) & 127u) << 7 | (t >> 10 & 127u)];
  return (a * a - (a & 1u) + 2u * g) >> 1;
}

/* C0 + C1 t + C2 S(t) in units of 2^-38, for the 23-bit fraction f23 */
static long long sfu_interpolate(const struct sfu_row *tab, uint32_t f23) {
  const struct sfu_row *r = &tab[f23 >> 17];
  uint32_t t = f23 & 0x1ffffu;
  return r->c0 + (long long)r->c1 * t + (long long)r->c2 * aa_sfu_square_sm90(t);
}

/* MUFU.EX2: T(f) = 1 + f23 / 2^23 mantissa of 2^f on [0, 1), rows C0
   (2^-38), C1, C2 for s = 0..63. */
static const struct sfu_row ex2_coef[64] = {
    {30690LL, 22713, 494},        {2993248226LL, 22960, 501},   {6019078114LL, 23210, 506},
    {9077831650LL, 23463, 511},   {12169926626LL, 23718, 518},  {15295657954LL, 23977, 521},
    {18455435234LL, 24238, 527},  {21649635298LL, 24502, 532},  {24878618594LL, 24768, 541},
    {28142745570LL, 25038, 546},  {31442409442LL, 25311, 551},  {34778036194LL, 25586, 559},
    {38149961698LL, 25865, 564},  {41558611938LL, 26147, 568},  {45004388321LL, 26431, 577},
    {48487675874LL, 26719, 583},  {52008892386LL, 27010, 589},  {55568455648LL, 27304, 596},
    {59166767074LL, 27602, 600},  {62804285410LL, 27902, 609},  {66481395682LL, 28206, 615},
    {70198564834LL, 28513, 622},  {73956186082LL, 28824, 627},  {77754742754LL, 29138, 633},
    {81594660834LL, 29455, 641},  {85476390882LL, 29776, 647},  {89400391650LL, 30100, 655},
    {93367130082LL, 30428, 661},  {97377048546LL, 30759, 670},  {101430638562LL, 31094, 677},
    {105528383458LL, 31432, 686}, {109670725602LL, 31775, 691}, {113858181090LL, 32121, 699},
    {118091249634LL, 32471, 705}, {122370406370LL, 32824, 715}, {126696142818LL, 33182, 721},
    {131068999650LL, 33543, 730}, {135489476578LL, 33908, 739}, {139958089698LL, 34277, 748},
    {144475346914LL, 34651, 753}, {149041805282LL, 35028, 763}, {153657989090LL, 35409, 773},
    {158324447202LL, 35795, 779}, {163041703906LL, 36185, 787}, {167810332642LL, 36579, 796},
    {172630890466LL, 36977, 806}, {177503942626LL, 37380, 813}, {182430054370LL, 37787, 822},
    {187409823714LL, 38198, 833}, {192443799522LL, 38614, 842}, {197532596194LL, 39035, 849},
    {202676819938LL, 39460, 858}, {207877052386LL, 39889, 870}, {213133907938LL, 40324, 877},
    {218448000994LL, 40763, 887}, {223819970530LL, 41207, 896}, {229250439138LL, 41655, 909},
    {234740029410LL, 42109, 917}, {240289404898LL, 42568, 925}, {245899204578LL, 43031, 938},
    {251570100194LL, 43500, 946}, {257302747106LL, 43973, 959}, {263097808866LL, 44452, 969},
    {268955981792LL, 44936, 980},
};

/* MUFU.LG2: lg2(1 + f) on [0, 1) in units 2^-38 (C2 here is twice the
   hardware's 2^-37 coefficient: all even). */
static const struct sfu_row lg2_coef[64] = {
    {29508LL, 47272, -1454},       {6148432709LL, 46545, -1410},  {12203000644LL, 45840, -1370},
    {18166489924LL, 45156, -1330}, {24041640772LL, 44492, -1292}, {29831013189LL, 43847, -1254},
    {35537077061LL, 43221, -1220}, {41162191684LL, 42612, -1184}, {46708667204LL, 42020, -1152},
    {52178604868LL, 41444, -1118}, {57574130500LL, 40884, -1088}, {62897230661LL, 40339, -1060},
    {68149822277LL, 39809, -1036}, {73333732164LL, 39292, -1008}, {78450783044LL, 38788, -982},
    {83502646085LL, 38297, -958},  {88490939204LL, 37818, -932},  {93417288517LL, 37351, -910},
    {98283180868LL, 36896, -890},  {103090078533LL, 36451, -866}, {107839419204LL, 36018, -850},
    {112532534084LL, 35594, -828}, {117170770756LL, 35180, -808}, {121755394880LL, 34776, -792},
    {126287618884LL, 34380, -770}, {130768622404LL, 33994, -754}, {135199564608LL, 33616, -736},
    {139581543237LL, 33247, -722}, {143915623236LL, 32886, -708}, {148202869572LL, 32532, -692},
    {152444248900LL, 32186, -678}, {156640731973LL, 31847, -662}, {160793285444LL, 31516, -652},
    {164902798149LL, 31191, -638}, {168970179396LL, 30872, -622}, {172996260677LL, 30561, -614},
    {176981869381LL, 30255, -600}, {180927816517LL, 29955, -586}, {184834904900LL, 29662, -578},
    {188703847236LL, 29374, -566}, {192535413573LL, 29091, -552}, {196330328900LL, 28814, -542},
    {200089273156LL, 28542, -532}, {203812897604LL, 28276, -524}, {207501906756LL, 28014, -514},
    {211156931397LL, 27757, -506}, {214778549061LL, 27505, -498}, {218367394629LL, 27257, -488},
    {221924049733LL, 27013, -476}, {225449096004LL, 26774, -468}, {228943086404LL, 26540, -464},
    {232406541125LL, 26309, -454}, {235840037700LL, 26082, -446}, {239244047173LL, 25859, -438},
    {242619102016LL, 25640, -432}, {245965656900LL, 25424, -422}, {249284195141LL, 25213, -418},
    {252575208260LL, 25004, -408}, {255839150917LL, 24799, -402}, {259076424516LL, 24598, -398},
    {262287512389LL, 24399, -390}, {265472783172LL, 24204, -384}, {268632675140LL, 24012, -378},
    {271767585605LL, 23823, -372},
};

uint32_t aa_ex2_sm90_mantissa(uint32_t f23) {
  return (uint32_t)(sfu_interpolate(ex2_coef, f23 & 0x7fffffu) >> 15);
}

/* MUFU.EX2 (ex2.approx.ftz.f32), measured on an H200 over all 2^32 inputs:
   - the input is truncated toward zero to a multiple of 2^-23 (ex2(x) =
     ex2(trunc(x 2^23) / 2^23) held for every |x| < 128; floor and nearest
     did not);
   - for x >= 0 the fixed-point value xq = i + f, i = floor(xq), f in
     [0, 1), gives 2^i * T(f) (mantissa T(f) from f alone, exponent i): no
     mismatch over all of [0, 128); for negative non-integers the magnitude
     is negated by one's complement, xq = -|xq| - 2^-23 (this matched all
     2^24 - 2 device values on (-1, 0) off the integers; the two's
     complement rule missed 91 %); at the negative integers the result is
     2^-k exactly (the one's complement rule gives one ulp less there: the
     device histogram has 125 fewer -1-ulp results than that, and one
     fewer flushed);
   - T is the interpolator above. Over all 2^32 inputs this model gives
     the device's error histogram against the correctly rounded 2^x
     exactly (all buckets, all inputs and [-126, 1]; fixtures/h200-fa2
     mufu.txt), and the device's count of failures of
     ex2(x) = 2^floor(x) ex2(frac x) (124681140). */
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

/* v 2^-36 truncated to a float (toward zero), |v| < 2^62 */
static float sfu_fixed36_trunc(long long v) {
  uint64_t m = v < 0 ? (uint64_t)-v : (uint64_t)v;
  if (m == 0) return 0.0f;
  int nb = 64 - __builtin_clzll(m);
  if (nb > 24) m = m >> (nb - 24) << (nb - 24);
  float y = (float)ldexp((double)m, -36); /* exact: m has at most 24 significant bits */
  return v < 0 ? -y : y;
}

/* MUFU.LG2 (lg2.approx.ftz.f32). On [1, 2) the interpolator above gives
   lg2(m) in 2^-38, truncated to a fixed point of 2^-36 (the device outputs
   below 2^-12 are all multiples of 2^-36, and so are exact there). For x =
   2^e m the integer e is added in that fixed point, v = e 2^36 + P(m), and
   the sum is truncated to a float: toward zero for v >= 0, and for v < 0
   (x < 1) the magnitude is the one's complement ~v = -v - 1 truncated (as
   EX2 negates its input). x = 1 gives +0; x = 2^e (e != 0) goes through the
   table (P(1) = 7377 2^-36, so the result for e < 0 is one ulp short of e,
   two for e = -1). Verified: all 2^23 device outputs on [1, 2); all 4096
   stored __logf samples on [1, 2^20) (fixtures/h200-fa2/libm.npy); and over
   all 2^32 inputs the device's error histogram against the correctly
   rounded log2 (every bucket, all inputs and [1, 65536]), its largest
   absolute and relative errors and its count of failures of lg2(2^e m) =
   fl(e + lg2(m)) (1064174777; mufu.txt) are what this model gives. The
   inputs below 1 are checked only through those totals. */
float aa_lg2_sm90_ftz(float x) {
  uint32_t b = aa_f32_bits(x);
  if (isnan(x)) return x;
  if ((b & 0x7f800000u) == 0) return -INFINITY; /* zero and (flushed) subnormals, either sign */
  if (b >> 31) return NAN;
  if (b == 0x7f800000u) return INFINITY;
  if (b == 0x3f800000u) return 0.0f;
  int e = (int)(b >> 23) - 127;
  long long v = (long long)e * (1LL << 36) + (sfu_interpolate(lg2_coef, b & 0x7fffffu) >> 2);
  return sfu_fixed36_trunc(v >= 0 ? v : -(~v));
}

/* __logf (SASS: FSETP.GEU |x|, 2^-126; inputs below it scaled by 2^24;
   MUFU.LG2; 24 subtracted (FADD) after a scaled input; FMUL by
   0x3f317218 = ln 2 rounded): subnormals are not flushed. */
float aa_logf_fast_sm90(float x) {
  int tiny = fabsf(x) < f32c(0x00800000u); /* GEU: NaN is not tiny */
  float l = aa_lg2_sm90_ftz(tiny ? x * 16777216.0f : x);
  if (tiny) l = l - 24.0f;
  return l * f32c(0x3f317218u);
}
