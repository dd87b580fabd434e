/* attnacc: exponential constructions (exact, Schraudolph FP32/BF16, quadratic BF16, FA4 polynomial), packed BF16
 * pairs, and their exhaustive error map. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_EXP_H
#define AA_EXP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every construction approximates 2^x: the input x is in BASE-2 units, the
   score after the shift (x = s*scale*log2(e) - shift), never a natural-log
   argument. Published natural-base constants (Schraudolph 1999) are
   translated to this form in lib/exp/registry.c. */
typedef enum {
  AA_EXP_EXACT = 0,        /* correctly rounded FP32 2^x */
  AA_EXP_SCHRAUDOLPH_FP32, /* i = round(2^23 x + 127*2^23 - c) as FP32 bits */
  AA_EXP_SCHRAUDOLPH_BF16, /* i = round(2^7 x + 127*2^7 - c) in FP32 arithmetic, int16, BF16 bits */
  AA_EXP_QUADRATIC_BF16,   /* BF16 mantissa s (1 + d + f + k f (f - 1)), exponent floor(x) added to the bits */
  AA_EXP_FA4_POLY,         /* FA4 software exp2: Horner polynomial of degree 1..5 plus (j << 23) */
  AA_EXP_EX2_SM90,         /* model of exp2f on sm90 (MUFU.EX2, ex2.approx): aa_exp2f_sm90 */
  AA_EXP_KIND_COUNT
} aa_exp_kind_t;

/* Order of operations of the packed evaluator ([blackwell-fa]
   section 3.3): FP32 arithmetic on the FP32 scores and one final
   FP32 -> BF16 conversion, or the scores converted to BF16 first and the
   construction run in paired BF16 arithmetic (for FP32-native constructions:
   FP32 arithmetic on the BF16-rounded scores). */
typedef enum { AA_EXP_ORDER_FP32 = 0, AA_EXP_ORDER_BF16 = 1 } aa_exp_order_t;

/* One configured construction. Fill it with aa_exp_init() and change
   parameters with aa_exp_set(); the derived fields are recomputed there. */
typedef struct {
  aa_exp_kind_t kind;
  double c;             /* Schraudolph/quadratic bias, in units of the output mantissa LSB (subtracted) */
  int arith64;          /* schraudolph-fp32: 1 = exact integer i (default), 0 = one FP32 FMA first */
  aa_rnd_t icvt;        /* Schraudolph float -> integer conversion: AA_RND_NE (default), AA_RND_Z, AA_RND_D */
  double k;             /* quadratic-bf16: coefficient of f (f - 1) */
  double d;             /* quadratic-bf16: constant added to the mantissa */
  double s;             /* quadratic-bf16: scale applied to the mantissa before the conversion (default 1) */
  int degree;           /* fa4-poly: 1..5 (3 = FA4's published coefficients) */
  aa_rnd_t cvt;         /* FP32 -> BF16 conversions: AA_RND_NE (default) or AA_RND_Z */
  aa_exp_order_t order; /* see aa_exp_order_t */
  /* derived (set by aa_exp_init / aa_exp_set) */
  float bmc;         /* Schraudolph b - c rounded to FP32 */
  float kf, df1, sf; /* quadratic: k, 1 + d and s in FP32 (BF16-rounded in BF16 order) */
  float coef[6];     /* fa4-poly: coef[0] = 1, coef[1..degree] */
} aa_exp_t;

/* Registry: one entry per construction, with its parameters and defaults. */
typedef struct {
  const char *name;
  const char *defval;
  const char *help;
} aa_exp_param_info_t;

typedef struct {
  const char *name; /* "exact", "schraudolph-fp32", ... */
  aa_exp_kind_t kind;
  int bf16_native;         /* 1 when the construction writes BF16 bits itself */
  const char *description; /* one paragraph */
  const aa_exp_param_info_t *params;
  int nparams; /* construction-specific params; "cvt" and "order" apply to all */
} aa_exp_info_t;

/* Registry access: *count receives the number of constructions. */
const aa_exp_info_t *aa_exp_registry(int *count);
const aa_exp_info_t *aa_exp_info(aa_exp_kind_t kind);
/* Parameters common to every construction ("cvt", "order"). */
const aa_exp_param_info_t *aa_exp_common_params(int *count);

/* Initialise out with the defaults of the named construction
   (AA_ENOTFOUND for an unknown name). */
int aa_exp_init(aa_exp_t *out, const char *name, aa_error_t *err);
/* Set one parameter from text: c, preset (linear|rms|sym|above|below), arith
   (fp32|fp64), icvt (rne|rz|rd), k, d, s, degree, cvt (rne|rz), order
   (fp32|bf16). AA_EINVAL for an unknown key or a bad value. */
int aa_exp_set(aa_exp_t *e, const char *key, const char *value, aa_error_t *err);
/* Parse "name" or "name:key=value,key=value". */
int aa_exp_parse(aa_exp_t *out, const char *spec, aa_error_t *err);
/* Canonical text of a configured construction ("schraudolph-bf16:c=0,icvt=rne,cvt=rne,order=fp32"). */
int aa_exp_describe(char *buf, size_t size, const aa_exp_t *e);

/* Unpacked evaluation of one score: the construction's result as FP32
   before any final FP32 -> BF16 conversion (for BF16-native constructions
   the value is a BF16 bit pattern shifted into the top half, NaN payloads
   kept). In BF16 order the input is first converted with e->cvt. */
float aa_exp_eval(const aa_exp_t *e, float x);
/* Packed evaluation: two FP32 scores in, one u32 of two BF16 weights out,
   low half = x0, high half = x1 (the layout of a bf16x2 register). */
uint32_t aa_exp_eval_packed(const aa_exp_t *e, float x0, float x1);
/* Batch forms (vectorised, dispatched at run time): out[i] = eval(x[i]) and
   out16[i] = the BF16 half packed evaluation writes for x[i]. */
void aa_exp_eval_batch(float *out, const float *x, size_t n, const aa_exp_t *e);
void aa_exp_eval_bf16_batch(uint16_t *out, const float *x, size_t n, const aa_exp_t *e);

/* Effective encoded base-two exponent of the result for input x: the signed
   integer S that the construction writes over sign, exponent and mantissa
   fields (before wrapping into the unsigned bit pattern), as S / 2^m - 127
   with m the output's mantissa width (23 FP32, 7 BF16). For a positive
   normal result it equals the exponent plus mantissa/2^m, a piecewise-linear
   log2 of the value; below the range S < 0, where the bit pattern has the
   sign bit set and exponent field all ones (NaN, -Inf, ...). out_bf16 selects
   the BF16 (packed) output for FP32-native constructions. */
double aa_exp_encoded_exponent(const aa_exp_t *e, float x, int out_bf16);

/* Correctly rounded 2^x in FP32 (the "exact" construction) and in BF16
   (bits), both with subnormals and overflow to +Inf, RNE. The FP64 libm
   value is used when it is far from a rounding boundary, MPFR otherwise. */
float aa_exp2_cr_f32(float x);
uint16_t aa_exp2_cr_bf16(float x);
/* The same given ref = libm exp2((double)x) already computed. */
float aa_exp2_cr_f32_ref(float x, double ref);
uint16_t aa_exp2_cr_bf16_ref(float x, double ref);
/* Relative error bound of the FP64 reference (libm exp2) that the map and
   the correct-rounding shortcut rely on: 2^-52 (glibc documents <= 1 ulp;
   tests/texp checks it against MPFR on a dense sample). */
#define AA_EXP_REF_RELERR 2.220446049250313e-16

/* Models of the sm90 (H100/H200) special-function results that FA2's
   kernels compile to without fast math (lib/exp/sm90.c says what was
   measured and how well each matches the device; experiments/README-gpu.md
   section 4):
   aa_ex2_sm90_ftz     MUFU.EX2 = ex2.approx.ftz.f32: input truncated to a
                       multiple of 2^-23, result 2^floor * T(frac) with T the
                       interpolator's 64-interval quadratic (bit-exact on all
                       2^23 device mantissas);
   aa_ex2_sm90_mantissa  T for f = f23 / 2^23 (23-bit mantissa field);
   aa_exp2f_sm90       exp2f: x < -126 halved and the result squared;
   aa_expf_sm90        libdevice expf (two FMAs of range reduction around
                       MUFU.EX2; exact given the EX2 model);
   aa_logf_sm90        libdevice logf (FMA polynomial, no MUFU: bit-exact);
   aa_lg2_sm90_ftz     MUFU.LG2 = lg2.approx.ftz.f32: the same interpolator
                       for lg2 of the mantissa in fixed point, the exponent
                       added there, the sum truncated (bit-exact on all 2^23
                       device outputs on [1, 2));
   aa_logf_fast_sm90   __logf = MUFU.LG2 * ln2 (subnormals prescaled);
   aa_sfu_square_sm90  the interpolator's truncated square S(t) of the low 17
                       fraction bits t: the partial products of weight >= 2^19
                       of the folded squarer, divided by 2^19 (bench/sfu_fit). */
uint32_t aa_ex2_sm90_mantissa(uint32_t f23);
float aa_ex2_sm90_ftz(float x);
float aa_exp2f_sm90(float x);
float aa_expf_sm90(float x);
float aa_logf_sm90(float x);
float aa_lg2_sm90_ftz(float x);
float aa_logf_fast_sm90(float x);
uint32_t aa_sfu_square_sm90(uint32_t t);

/* ---- Error map ---- */

/* Output classes tracked as runs of consecutive inputs. */
typedef enum {
  AA_EXP_CLS_NAN = 0,
  AA_EXP_CLS_INF,       /* +Inf or -Inf */
  AA_EXP_CLS_NEG,       /* finite and < 0 */
  AA_EXP_CLS_ZERO,      /* +0 or -0 */
  AA_EXP_CLS_SUBNORMAL, /* non-zero subnormal */
  AA_EXP_NCLS
} aa_exp_cls_t;
const char *aa_exp_cls_name(int cls); /* "nan", "inf", "negative", "zero", "subnormal" */

#define AA_EXP_MAX_RANGES 32

typedef struct {
  float lo, hi; /* inclusive input interval of one run */
} aa_exp_range_t;

typedef struct {
  uint64_t inputs;             /* inputs visited */
  uint64_t valid;              /* finite, non-negative outputs with a finite non-zero reference */
  double min_ratio, max_ratio; /* output / 2^x over valid inputs */
  float argmin_ratio, argmax_ratio;
  double max_rel_err, mean_rel_err; /* |output - 2^x| / 2^x over valid inputs */
  float argmax_rel_err;
  double sum_rel_err;
  uint64_t cr_mismatch; /* valid inputs whose output differs from correctly rounded 2^x in the output format */
  uint64_t cls_count[AA_EXP_NCLS];
  uint64_t cls_runs[AA_EXP_NCLS];
  int nranges[AA_EXP_NCLS];
  int ranges_truncated[AA_EXP_NCLS]; /* 1 when more than AA_EXP_MAX_RANGES runs (or lost inside a block) */
  aa_exp_range_t ranges[AA_EXP_NCLS][AA_EXP_MAX_RANGES];
  uint64_t ref_checked; /* inputs whose libm reference was checked against MPFR */
  double ref_observed_max_relerr;
} aa_exp_map_t;

typedef struct {
  int out_bf16;  /* 1: map the packed BF16 output (forced for BF16-native constructions) */
  int ref_check; /* how many inputs, spread evenly, to check the libm reference against MPFR (0: none) */
  int threads;   /* 0: OpenMP default */
  float shift;   /* the construction gets fl32(x - shift), the reference is 2^(x - shift) in FP64;
                    with a non-zero shift cr_mismatch is not computed (left 0) */
} aa_exp_map_opts_t;

/* Order-preserving key of a float: key(a) < key(b) iff a < b for non-NaN
   a, b (-0 < +0); NaNs sort beyond the infinities. */
static inline uint32_t aa_exp_key(float x) {
  uint32_t u = aa_f32_bits(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
static inline float aa_exp_unkey(uint32_t k) {
  return aa_f32_from_bits((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* Map ne constructions at once (one result each, out[0..ne-1]) over every
   float whose key lies in [key_lo, key_hi], in increasing order. The result
   does not depend on the thread count. */
int aa_exp_map_keys(aa_exp_map_t *out, const aa_exp_t *e, int ne, uint32_t key_lo, uint32_t key_hi,
                    const aa_exp_map_opts_t *opts, aa_error_t *err);
/* Every float in [lo, hi] (AA_EINVAL if lo > hi or either is NaN). */
int aa_exp_map_interval(aa_exp_map_t *out, const aa_exp_t *e, int ne, float lo, float hi,
                        const aa_exp_map_opts_t *opts, aa_error_t *err);
/* The given inputs (sorted in place by value first, so runs are runs of
   consecutive samples). NaN inputs are rejected. */
int aa_exp_map_samples(aa_exp_map_t *out, const aa_exp_t *e, int ne, float *x, size_t n,
                       const aa_exp_map_opts_t *opts, aa_error_t *err);

/* FA4 / Remez FP32 coefficients for degree 1..5 (coef[0] = 1). */
const float *aa_exp_fa4_coefs(int degree);

#ifdef __cplusplus
}
#endif
#endif
