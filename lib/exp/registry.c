/* attnacc: registry of the exp constructions, their parameters, presets and text parsing. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exp-impl.h"

/* FA4 degree-3 coefficients are the published ones ([fa4],
   max relative error about 8.8e-5; measured 8.769e-5 over every FP32 f in
   [0,1) with FP32 FMA Horner). Degrees 1, 2, 4, 5 are our own minimax fits of
   2^f on [0,1] in relative error with p(0) = 1 held fixed, by the Remez
   exchange algorithm (long double, n+1 alternation points in (0,1], extrema
   located on a 2e5-point grid, 60 exchanges), then rounded to nearest FP32.
   tests/texp_remez.c repeats the fit independently and checks these values.
   Continuous minimax errors E / measured FP32-Horner max over all f:
     deg 1: 3.8222e-2 / 3.8222e-2    deg 2: 2.0533e-3 / 2.0534e-3
     deg 3 (ours, not used): 8.559e-5 / 8.565e-5
     deg 4: 2.8959e-6 / 2.955e-6     deg 5: 8.227e-8 / 1.446e-7 (FP32 rounding dominates) */
static const float fa4_coefs[6][6] = {
    {1.0f},
    {1.0f, 0x1.d8dc72p-1f},
    {1.0f, 0x1.54f8d6p-1f, 0x1.51d9ccp-2f},
    {1.0f, 0x1.63ea32p-1f, 0x1.d20d48p-3f,
     0x1.3be13ap-4f}, /* FA4: 0.6951461434..., 0.2275643944..., 0.0771190890... */
    {1.0f, 0x1.62d6c6p-1f, 0x1.ee245p-3f, 0x1.abf868p-5f, 0x1.b7f73p-7f},
    {1.0f, 0x1.62e4bap-1f, 0x1.ebdb56p-3f, 0x1.c91ce6p-5f, 0x1.277856p-7f, 0x1.e974fap-10f},
};

const float *aa_exp_fa4_coefs(int degree) {
  if (degree < 1 || degree > 5) return NULL;
  return fa4_coefs[degree];
}

static const aa_exp_param_info_t common_params[] = {
    {"cvt", "rne", "FP32 -> BF16 conversion of the packed output (and of the scores in bf16 order): rne or rz"},
    {"order", "fp32",
     "fp32: FP32 arithmetic then one conversion; bf16: scores converted to BF16 first, paired BF16 arithmetic"},
};

static const aa_exp_param_info_t sfp32_params[] = {
    {"c", "0",
     "bias subtracted from i, in FP32 mantissa LSBs (2^-23 of an exponent step); 0 = plain linear mantissa"},
    {"preset", "linear",
     "Schraudolph's published biases translated: linear (0), rms (486408), sym (366392), above (-8), below (722024)"},
    {"arith", "fp64",
     "fp64: i = round(a x + b - c) exactly; fp32: a x + (b - c) by one FP32 FMA first (a 17-bit mantissa near 2^30, "
     "as a GPU FMA would)"},
    {"icvt", "rne", "float -> int32 conversion rounding: rne, rz or rd"},
};
static const aa_exp_param_info_t sbf16_params[] = {
    {"c", "0", "bias subtracted from i, in BF16 mantissa LSBs (2^-7 of an exponent step)"},
    {"preset", "linear",
     "translated biases: linear (0), rms (60801/8192 = 7.4220), sym (5.5907), above (-1/8192), below (11.0172)"},
    {"icvt", "rne", "float -> int16 conversion rounding: rne, rz or rd"},
};
static const aa_exp_param_info_t quad_params[] = {
    {"k", "0.33984375",
     "coefficient of the correction f (f - 1); 0.33984375 (BF16-exact) is near the log-minimax 0.3397"},
    {"d", "0", "constant added to the mantissa (1 + d + f + ...): raises the ratio by d at f = 0, d/2 at f -> 1"},
    {"s", "1", "scale of the mantissa before the BF16 conversion: multiplies the ratio by s"},
};
static const aa_exp_param_info_t fa4_params[] = {
    {"degree", "3", "polynomial degree 1..5 (3 = FA4's published coefficients, others our Remez fits)"},
};

static const aa_exp_info_t registry[AA_EXP_KIND_COUNT] = {
    {"exact", AA_EXP_EXACT, 0,
     "Correctly rounded FP32 2^x (RNE, subnormals, +Inf from x >= 128): the libm FP64 exp2 rounded to FP32 when it "
     "is "
     "farther than 2^-49 relative from a rounding boundary, the MPFR value otherwise. The packed form converts it to "
     "BF16 with cvt.",
     NULL, 0},
    {"schraudolph-fp32", AA_EXP_SCHRAUDOLPH_FP32, 0,
     "Schraudolph's exponent-field trick in the FP32 field: i = round(2^23 x + 127*2^23 - c) written as the FP32 bit "
     "pattern, so the mantissa is linear in frac(x): with c = 0 the ratio to 2^x lies in [1, 1.061476], maximal at "
     "frac(x) = 1/ln2 - 1. The published FP64 high-word constants c_hi (60801 RMS, 45799 symmetric, -1 never below, "
     "90253 never above) act on a 20-bit mantissa field; in base 2 the high word is 2^20 x + 1023*2^20 - c_hi, so "
     "the "
     "bias is c_hi / 2^20 of an exponent step, i.e. c = 8 c_hi in the 23-bit FP32 field (486408 vs the published "
     "FP32 "
     "1065353216 - 1064866805 = 486411). A negative i sets the sign bit: NaN, -Inf, then negative values.",
     sfp32_params, 4},
    {"schraudolph-bf16", AA_EXP_SCHRAUDOLPH_BF16, 1,
     "The same trick in the BF16 field: i = a x + b - c with a = 2^7, b = 127*2^7, computed by one FP32 FMA, "
     "converted "
     "to int16 (saturating) and used as BF16 bits. Published biases translate as c = c_hi / 2^13 (60801 -> 7.4220, "
     "matching the published 16256 - 16248.578). Bottom of the range modelled as the hardware does it: once i < 0 "
     "the "
     "pattern is 0xFF81..0xFFFF (NaN) for i in [-127, -1], 0xFF80 (-Inf) at i = -128, large negative finite values "
     "below.",
     sbf16_params, 3},
    {"quadratic-bf16", AA_EXP_QUADRATIC_BF16, 1,
     "Quadratic-corrected BF16 mantissa in the spirit of hardware BF16 exp units: j = floor(x), f = x - j, "
     "m = s (1 + d + f + k f (f - 1)) (the linear mantissa bent toward 2^f, then scaled), m converted to BF16 and "
     "the exponent added to "
     "its bits as j << 7 (16-bit integer add). In fp32 order m is computed in FP32 and converted with cvt; in bf16 "
     "order "
     "the score is converted first and every step is a BF16 operation. For j <= -128 the add borrows into the sign: "
     "NaN and -Inf patterns as in schraudolph-bf16.",
     quad_params, 3},
    {"fa4-poly", AA_EXP_FA4_POLY, 0,
     "FA4's software exp2: clamp x at -127, j = floor(x) (add of 1.5*2^23 in round-down), f = x - j in FP32, "
     "p(f) = 1 + c1 f + ... + cn f^n by FP32 FMA Horner, result bits = bits(p) + (j << 23). Degree 3 uses FA4's "
     "published coefficients (max relative error 8.8e-5); degrees 1, 2, 4, 5 use our Remez minimax fits with p(0) = "
     "1. "
     "Between -127 and -126 the clamp/shift yields subnormal patterns that are not 2^x.",
     fa4_params, 1},
    {"ex2-sm90", AA_EXP_EX2_SM90, 0,
     "exp2f as FA2's kernels run it on an H100/H200 (sm90, no fast math): MUFU.EX2 (ex2.approx.ftz.f32) with the "
     "input truncated toward zero to a multiple of 2^-23 and the mantissa from a 64-interval quadratic in the "
     "fraction (the SFU's interpolator: truncated squarer, 2^-38 fixed-point sum, truncation), bit-identical to "
     "the H200's outputs over all 2^23 fractions (correctly rounded 2^x matches 61.1 %); below -126 the input is "
     "halved and the result squared, as nvcc "
     "compiles exp2f. lib/exp/sm90.c.",
     NULL, 0},
};

const aa_exp_info_t *aa_exp_registry(int *count) {
  if (count != NULL) *count = AA_EXP_KIND_COUNT;
  return registry;
}

const aa_exp_info_t *aa_exp_info(aa_exp_kind_t kind) {
  if ((int)kind < 0 || kind >= AA_EXP_KIND_COUNT) return NULL;
  return &registry[kind];
}

const aa_exp_param_info_t *aa_exp_common_params(int *count) {
  if (count != NULL) *count = 2;
  return common_params;
}

static void derive(aa_exp_t *e) {
  if (e->kind == AA_EXP_SCHRAUDOLPH_FP32)
    e->bmc = (float)(1065353216.0 - e->c);
  else
    e->bmc = (float)(16256.0 - e->c);
  if (e->order == AA_EXP_ORDER_BF16) {
    /* constants of paired BF16 arithmetic are themselves BF16 */
    e->kf = aa_exp_round_bf16_d(e->k);
    e->df1 = aa_exp_round_bf16_d(1.0 + e->d);
    e->sf = aa_exp_round_bf16_d(e->s);
  } else {
    e->kf = (float)e->k;
    e->df1 = (float)(1.0 + e->d);
    e->sf = (float)e->s;
  }
  memset(e->coef, 0, sizeof e->coef);
  if (e->degree >= 1 && e->degree <= 5)
    memcpy(e->coef, fa4_coefs[e->degree], sizeof(float) * (size_t)(e->degree + 1));
}

int aa_exp_init(aa_exp_t *out, const char *name, aa_error_t *err) {
  if (out == NULL || name == NULL) return aa_error_set(err, AA_EINVAL, "aa_exp_init: NULL argument");
  for (int i = 0; i < AA_EXP_KIND_COUNT; i++) {
    if (strcmp(registry[i].name, name) == 0) {
      memset(out, 0, sizeof *out);
      out->kind = registry[i].kind;
      out->c = 0;
      out->arith64 = 1;
      out->icvt = AA_RND_NE;
      out->k = 0.33984375;
      out->d = 0;
      out->s = 1;
      out->degree = 3;
      out->cvt = AA_RND_NE;
      out->order = AA_EXP_ORDER_FP32;
      derive(out);
      return AA_OK;
    }
  }
  return aa_error_set(
      err, AA_ENOTFOUND,
      "unknown exp construction '%s' (try exact, schraudolph-fp32, schraudolph-bf16, quadratic-bf16, fa4-poly)",
      name);
}

static int parse_double(double *out, const char *s) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || errno != 0 || !isfinite(v)) return 0;
  *out = v;
  return 1;
}

static int has_param(const aa_exp_t *e, const char *key) {
  const aa_exp_info_t *in = &registry[e->kind];
  for (int i = 0; i < in->nparams; i++)
    if (strcmp(in->params[i].name, key) == 0) return 1;
  return strcmp(key, "cvt") == 0 || strcmp(key, "order") == 0;
}

int aa_exp_set(aa_exp_t *e, const char *key, const char *value, aa_error_t *err) {
  if (e == NULL || key == NULL || value == NULL) return aa_error_set(err, AA_EINVAL, "aa_exp_set: NULL argument");
  const char *name = registry[e->kind].name;
  if (!has_param(e, key)) return aa_error_set(err, AA_EINVAL, "construction %s has no parameter '%s'", name, key);
  double v;
  if (strcmp(key, "c") == 0) {
    if (!parse_double(&v, value) || fabs(v) > 1e9) return aa_error_set(err, AA_EINVAL, "%s: bad c '%s'", name, value);
    e->c = v;
  } else if (strcmp(key, "preset") == 0) {
    /* Schraudolph's FP64 high-word biases; see the description for the scale */
    static const struct {
      const char *n;
      double chi;
    } presets[] = {{"linear", 0}, {"rms", 60801}, {"sym", 45799}, {"above", -1}, {"below", 90253}};
    int found = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
      if (strcmp(presets[i].n, value) == 0) {
        e->c = e->kind == AA_EXP_SCHRAUDOLPH_FP32 ? 8.0 * presets[i].chi : presets[i].chi / 8192.0;
        found = 1;
      }
    }
    if (!found)
      return aa_error_set(err, AA_EINVAL, "%s: unknown preset '%s' (linear, rms, sym, above, below)", name, value);
  } else if (strcmp(key, "arith") == 0) {
    if (strcmp(value, "fp32") == 0)
      e->arith64 = 0;
    else if (strcmp(value, "fp64") == 0)
      e->arith64 = 1;
    else
      return aa_error_set(err, AA_EINVAL, "%s: arith must be fp32 or fp64, not '%s'", name, value);
  } else if (strcmp(key, "icvt") == 0) {
    if (strcmp(value, "rne") == 0)
      e->icvt = AA_RND_NE;
    else if (strcmp(value, "rz") == 0)
      e->icvt = AA_RND_Z;
    else if (strcmp(value, "rd") == 0)
      e->icvt = AA_RND_D;
    else
      return aa_error_set(err, AA_EINVAL, "%s: icvt must be rne, rz or rd, not '%s'", name, value);
  } else if (strcmp(key, "k") == 0) {
    if (!parse_double(&v, value) || fabs(v) > 4)
      return aa_error_set(err, AA_EINVAL, "%s: bad k '%s' (|k| <= 4)", name, value);
    e->k = v;
  } else if (strcmp(key, "d") == 0) {
    if (!parse_double(&v, value) || v <= -0.5 || v >= 0.5)
      return aa_error_set(err, AA_EINVAL, "%s: bad d '%s' (|d| < 0.5)", name, value);
    e->d = v;
  } else if (strcmp(key, "s") == 0) {
    if (!parse_double(&v, value) || v < 0.5 || v > 1.5)
      return aa_error_set(err, AA_EINVAL, "%s: bad s '%s' (0.5 <= s <= 1.5)", name, value);
    e->s = v;
  } else if (strcmp(key, "degree") == 0) {
    if (!parse_double(&v, value) || v != floor(v) || v < 1 || v > 5)
      return aa_error_set(err, AA_EINVAL, "%s: degree must be an integer 1..5, not '%s'", name, value);
    e->degree = (int)v;
  } else if (strcmp(key, "cvt") == 0) {
    if (strcmp(value, "rne") == 0)
      e->cvt = AA_RND_NE;
    else if (strcmp(value, "rz") == 0)
      e->cvt = AA_RND_Z;
    else
      return aa_error_set(err, AA_EINVAL, "%s: cvt must be rne or rz, not '%s'", name, value);
  } else if (strcmp(key, "order") == 0) {
    if (strcmp(value, "fp32") == 0)
      e->order = AA_EXP_ORDER_FP32;
    else if (strcmp(value, "bf16") == 0)
      e->order = AA_EXP_ORDER_BF16;
    else
      return aa_error_set(err, AA_EINVAL, "%s: order must be fp32 or bf16, not '%s'", name, value);
  }
  derive(e);
  return AA_OK;
}

int aa_exp_parse(aa_exp_t *out, const char *spec, aa_error_t *err) {
  char buf[512];
  if (spec == NULL || strlen(spec) >= sizeof buf) return aa_error_set(err, AA_EINVAL, "bad construction spec");
  strcpy(buf, spec);
  char *colon = strchr(buf, ':');
  if (colon != NULL) *colon = '\0';
  int st = aa_exp_init(out, buf, err);
  if (st != AA_OK || colon == NULL) return st;
  char *save = NULL;
  for (char *kv = strtok_r(colon + 1, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (eq == NULL) return aa_error_set(err, AA_EINVAL, "parameter '%s' is not key=value", kv);
    *eq = '\0';
    st = aa_exp_set(out, kv, eq + 1, err);
    if (st != AA_OK) return st;
  }
  return AA_OK;
}

int aa_exp_describe(char *buf, size_t size, const aa_exp_t *e) {
  if (buf == NULL || e == NULL || size == 0) return AA_EINVAL;
  const char *cvt = e->cvt == AA_RND_Z ? "rz" : "rne";
  const char *order = e->order == AA_EXP_ORDER_BF16 ? "bf16" : "fp32";
  const char *icvt = e->icvt == AA_RND_Z ? "rz" : e->icvt == AA_RND_D ? "rd" : "rne";
  int n;
  switch (e->kind) {
  case AA_EXP_SCHRAUDOLPH_FP32:
    n = snprintf(buf, size, "%s:c=%.10g,arith=%s,icvt=%s,cvt=%s,order=%s", registry[e->kind].name, e->c,
                 e->arith64 ? "fp64" : "fp32", icvt, cvt, order);
    break;
  case AA_EXP_SCHRAUDOLPH_BF16:
    n = snprintf(buf, size, "%s:c=%.10g,icvt=%s,cvt=%s,order=%s", registry[e->kind].name, e->c, icvt, cvt, order);
    break;
  case AA_EXP_QUADRATIC_BF16:
    n = snprintf(buf, size, "%s:k=%.10g,d=%.10g,s=%.10g,cvt=%s,order=%s", registry[e->kind].name, e->k, e->d, e->s,
                 cvt, order);
    break;
  case AA_EXP_FA4_POLY:
    n = snprintf(buf, size, "%s:degree=%d,cvt=%s,order=%s", registry[e->kind].name, e->degree, cvt, order);
    break;
  default:
    n = snprintf(buf, size, "%s:cvt=%s,order=%s", registry[e->kind].name, cvt, order);
    break;
  }
  return (n < 0 || (size_t)n >= size) ? AA_ERANGE : AA_OK;
}
