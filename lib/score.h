/* attnacc: scoring a kernel's outputs against the oracle: robust error measures, the pass rules users know
 * (abs-rel, torch, fa, sdpa), and a flat C entry point for foreign callers (Python ctypes). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_SCORE_H
#define AA_SCORE_H

#include <stddef.h>

#include "attn.h"
#include "common.h"
#include "fmt.h"
#include "layout.h"
#include "metrics.h"
#include "oracle.h"
#include "recipe.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- pass rules ----
   abs-rel  every element |a - b| <= atol + rtol |b| (default atol = rtol = 0.01, [blackwell-fa] 5.3)
   torch    the same with torch.testing.assert_close's default (rtol, atol) for the data's dtype
            ([pytorch-sdpa]; PyTorch torch/testing/_comparison.py, _DTYPE_PRECISIONS):
            bf16 (1.6e-2, 1e-5), fp16 (1e-3, 1e-5), fp32 (1.3e-6, 1e-5), fp64 (1e-7, 1e-7)
   fa       flash-attention's tests: max|a - b| <= factor * max|naive - b|, factor 2 for o and 3 for
            the gradients, naive = the naive math reference in the inputs' own dtype ([fa2] tests)
   sdpa     PyTorch test_transformers.py: max|a - b| <= max(1e-5, fudge * max|naive - b|), fudge for the
            flash backend: o 4, dq 180, dk 16, dv 4 (dsinks: 4)
   expect   recipe-relative (the default for bf16, fp16 and fp32 kernels): the kernel's error statistics
            lie within a band around those of a named recipe (fa2 in the kernel's format unless given)
            run on the same inputs; see "recipe-relative rule" below
   Every rule reports ratio = (what was measured) / (what the rule allows); the rule passes when
   ratio <= 1 and no element is NaN or Inf. b is the oracle's value (exact to its certified bound). */
typedef enum { AA_RULE_ABSREL = 0, AA_RULE_TORCH, AA_RULE_FA, AA_RULE_SDPA, AA_RULE_EXPECT, AA_RULE_COUNT } aa_rule_t;

const char *aa_rule_name(aa_rule_t r); /* "abs-rel", "torch", "fa", "sdpa", "expect" */
int aa_rule_from_name(aa_rule_t *out, const char *name);
/* torch.testing.assert_close defaults for data of format fmt (FP8 formats: bf16's). */
void aa_rule_torch_tol(double *rtol, double *atol, aa_fmt_t fmt);
double aa_rule_fa_factor(const char *out_name);  /* 2 for "o", 3 otherwise */
double aa_rule_sdpa_fudge(const char *out_name); /* o 4, dq 180, dk 16, dv 4, else 4 */
#define AA_RULE_SDPA_ATOL 1e-5

typedef struct {
  int applied;                 /* 0: not evaluated (fa/sdpa without a naive reference) */
  int pass;                    /* ratio <= 1 and no NaN/Inf */
  double ratio;                /* measured / allowed (NaN when a NaN decides it, +Inf for Inf) */
  double allowed;              /* elementwise rules: the allowance at the worst element; fa/sdpa: the threshold */
  double atol, rtol;           /* elementwise rules: the tolerances; fa/sdpa: atol 0 / 1e-5, rtol = factor */
  double naive_max_abs;        /* fa/sdpa: max|naive - b| */
  size_t fail_count;           /* elements over the allowance (elementwise rules), NaN/Inf included */
  size_t worst;                /* folded index of the element deciding the ratio */
  double worst_got, worst_ref; /* the tested value and the oracle's there */
} aa_rule_result_t;

/* ---- robust error measures of one output tensor ----
   a = the tested tensor, b = the oracle's value, r = RN_fmt(exact) in ulp_fmt:
     ulp_i        |ord(a_i) - ord(r_i)|, ord the signed bit-pattern ordinal of ulp_fmt (aa_metrics_ordinal)
     ulp_median, ulp_p99, ulp_max   order statistics of ulp_i (p99: the ceil(0.99 n)-th smallest)
     ulp_normwise max|a - b| / ulp_fmt(max|b|): the error in units of the last place of the largest
                  reference element, blind to the sign flips of near-zero elements
     max_rel      max |a_i - b_i| / |b_i| over the elements with |b_i| >= rel_floor,
                  rel_floor = 2^-4 max|b| (the top four binades, where the relative error is at
                  most 16 max_abs / max|b|; smaller elements are judged by ulp_normwise)
     max_rel_any  max |a_i - b_i| / |b_i| over every element (|b_i| = 0: 0 if a_i = 0, else +Inf):
                  torch.testing.assert_close's "greatest relative difference"
   Non-finite elements of a are counted in nan/inf and left out of the statistics. */
/* ---- the recipe-relative rule (expect) and the systematic-error statistics ----
   e = a - b over the finite elements; a row is the tensor's last axis (one query's o or dq, one key's dk or
   dv: d elements), a head its first axis (the folded B*H). Computed by aa_score_compare for every output:
     ls_scale       a.b / b.b - 1: the least-squares scale of a against b, minus one (0 for an unbiased kernel)
     ls_offset      mean(e - ls_scale b) / rms(b): the fit's offset, in units of rms(b)
     scale_sigma    the standard error of ls_scale when the residual r = e - ls_scale b is independent between
                    rows (any correlation within a row): sqrt(sum_rows (r_row . b_row)^2) / b.b. For a residual
                    of relative size rel_l2 spread evenly it is rel_l2 / sqrt(rows) (rel_l2 / sqrt(n) for
                    independent elements): a scale error of 0.2 % is dozens of sigmas at 1e4 rows
     offset_sigma   the same for ls_offset: sqrt(sum_rows (sum r_row - ls_offset rms(b) d)^2) / (n rms(b))
     err_corr       e.b / (|e| |b|): the error's correlation with the reference
     abs_q99        the 0.99 quantile of |e| (the ceil(0.99 n)-th smallest)
     row_err_max    max over rows of |e_row|_2 (row_worst: that row, counted over the folded [H*N] rows)
     head_rel_l2_max  max over heads of |e_head| / |b_head| (head_worst: that head)
   The expect rule compares them with the same statistics of a recipe's outputs r on the same inputs
   (aa_score_apply_expect); each gives ratio = measured / limit, the rule's ratio is the largest:
     rel-l2   rel_l2 / (AA_EXPECT_BAND_L2 rel_l2(r))           one-sided: a kernel more accurate passes
     q99      abs_q99 / (AA_EXPECT_BAND_Q99 abs_q99(r))        one-sided
     scale    |ls_scale| / (|ls_scale(r)| + AA_EXPECT_Z max(scale_sigma, scale_sigma(r)))    two-sided
     offset   |ls_offset| / (|ls_offset(r)| + AA_EXPECT_Z max(offset_sigma, offset_sigma(r))) two-sided
     row      row_err_max / (AA_EXPECT_BAND_ROW row_err_max(r))     a row of zeros, a wrong row
     head     head_rel_l2_max / (AA_EXPECT_BAND_HEAD head_rel_l2_max(r))   a head with 10x the error
   The bands were measured (experiments/README-run.md, "The default verdict"): the spread of each statistic
   between fa2, its legitimate variations (fa2-atomic's dQ order, fa2-h100's tensor-core accumulation) and
   correct torch kernels over seeds, shapes, masks and dtypes, and the planted bugs of tests/test_verdict.py. */
typedef enum {
  AA_EXPECT_REL_L2 = 0,
  AA_EXPECT_Q99,
  AA_EXPECT_SCALE,
  AA_EXPECT_OFFSET,
  AA_EXPECT_ROW,
  AA_EXPECT_HEAD,
  AA_EXPECT_NSTAT
} aa_expect_stat_t;
#define AA_EXPECT_BAND_L2 1.2
#define AA_EXPECT_BAND_Q99 1.25
#define AA_EXPECT_Z 8.0
#define AA_EXPECT_BAND_ROW 2.0
#define AA_EXPECT_BAND_HEAD 1.5
const char *aa_expect_stat_name(aa_expect_stat_t s); /* "rel-l2", "q99", "scale", "offset", "row", "head" */

typedef struct {
  const char *name;           /* "o", "dq", "dk", "dv", "dsinks" */
  aa_metrics_t m;             /* rel_l2, max_abs, nan, inf, count (and the legacy abs-rel rule fields; ULPs: below) */
  aa_fmt_t data_fmt, ulp_fmt; /* the tested data's format; the format ULPs are counted in */
  double ulp_median, ulp_p99, ulp_max, ulp_mean, ulp_normwise;
  double max_rel, rel_floor, max_rel_any;
  size_t worst_abs, worst_rel; /* folded indices of max_abs and max_rel_any */
  size_t first_nonfinite;      /* folded index of the first NaN or Inf of got (m.nan + m.inf > 0), else 0 */
  double worst_got, worst_ref; /* a and b at worst_abs */
  double oracle_relerr_bound;
  /* systematic-error statistics (above) */
  double ls_scale, ls_offset, scale_sigma, offset_sigma, err_corr, abs_q99, row_err_max, head_rel_l2_max;
  size_t row_worst, head_worst;
  /* the expect rule (aa_score_apply_expect): each statistic's ratio, its limit and the recipe's value */
  double expect_ratio[AA_EXPECT_NSTAT], expect_limit[AA_EXPECT_NSTAT], expect_ref[AA_EXPECT_NSTAT];
  int expect_stat; /* the deciding statistic (aa_expect_stat_t) */
  aa_rule_result_t rule[AA_RULE_COUNT];
} aa_score_out_t;

/* Compare got (any shape, element count of ref) with ref. ulp_fmt BF16,
   FP16 or FP32 (FP64 data: FP32). Fills the statistics and the abs-rel rule
   (atol, rtol >= 0) and torch rule (tolerances of data_fmt); fa and sdpa are
   left unapplied. AA_ESHAPE on a count mismatch, AA_EINVAL on a bad format
   or tolerance, AA_ENOMEM. */
int aa_score_compare(aa_score_out_t *s, const char *name, const aa_tensor_t *got, const aa_oracle_out_t *ref,
                     aa_fmt_t data_fmt, aa_fmt_t ulp_fmt, double atol, double rtol, aa_error_t *err);
/* The format s->m's max_ulp and mean_ulp count ULPs in (s compared by aa_score_compare): ulp_fmt when bf16, else
   fp32 (the formats of aa_metrics_compare); with the default tolerances s->m is then aa_metrics_compare's result
   for that format, which aa_eval_compare reuses rather than computing it again. */
aa_fmt_t aa_score_metrics_ulp_fmt(const aa_score_out_t *s);
/* AA_ERANGE, naming the output, the count and the largest magnitude, when
   the exact values ref are not all finite in the kernel's format data_fmt
   (their correct rounding overflows: BF16/FP32 from the oracle's certified
   roundings, FP16 from val): no rule can judge a kernel there, so a score
   is refused rather than given against Inf. AA_OK otherwise. */
int aa_score_exact_finite(const aa_oracle_out_t *ref, const char *name, aa_fmt_t data_fmt, aa_error_t *err);
/* Apply the fa and sdpa rules to s, given the naive reference's scores of
   the same output. */
void aa_score_apply_naive(aa_score_out_t *s, const aa_score_out_t *naive);
/* Apply the expect rule to s, given a recipe's scores rec of the same output on the same inputs. */
void aa_score_apply_expect(aa_score_out_t *s, const aa_score_out_t *rec);
/* The expect rule on an output it has no band for (the lse: the bands were measured on o, dq, dk, dv, and a
   correct kernel's LSE differs systematically from the recipe's by its exp2 and log2, e.g. the H200's from
   fa2's by 40 sigmas in scale): applied, passing unless the output holds a NaN or Inf, ratio 0, every
   statistic's limit and recipe value NaN. The fa, sdpa, torch and abs-rel rules judge an lse's values. */
void aa_score_apply_expect_finite(aa_score_out_t *s);
/* Every BF16 format key of r (the key table's format keys) set to fmt (BF16, FP16 or FP32), and its name
   suffixed "-fp16" / "-fp32": the same recipe for a kernel computing in fmt (FA2 rounds P and dS to the
   inputs' dtype). Nothing changes for BF16. AA_EINVAL for other formats. */
int aa_score_recipe_to_fmt(aa_recipe_t *r, aa_fmt_t fmt, aa_error_t *err);

/* The naive math reference in format fmt (BF16, FP16 or FP32): the
   naive-bf16 preset with every BF16 step in fmt instead (named
   naive-bf16, naive-fp16, naive-fp32). AA_EINVAL for other formats. */
int aa_score_naive_recipe(aa_recipe_t *r, aa_fmt_t fmt, aa_error_t *err);

/* The oracle accuracy a score asks for when the caller names none (--oracle-target, oracle_target): 2^-32 for a
   kernel computing in BF16, FP16 or FP32, 2^-48 (the oracle's default) for FP64. A verdict reads the kernel's error
   against the oracle's value; a value within 2^-32 relative moves a correctly rounded FP32 output's error by at
   most 2^-8 of itself and a BF16 output's by 2^-24, far below every band, while the FP32 and BF16 roundings the
   oracle reports stay exact at any target. At 2^-32 the oracle's binary64 tier (lib/oracle.h, on for targets of
   2^-34 and looser) certifies nearly every row, which is what makes a cold score fast. */
#define AA_SCORE_ORACLE_TARGET 0x1p-32
double aa_score_oracle_target(aa_fmt_t kernel_fmt);

/* The narrowest of BF16, FP16, FP32, FP64 holding every element of t exactly
   (the dtype a value array most likely came from; FP64 when none is smaller). */
aa_fmt_t aa_score_infer_fmt(const aa_tensor_t *t);

/* ---- the evaluation path (lib/score/eval.c) ----
   The one path from inputs to a scored verdict, for the command (run, score,
   the sweep's experiments) and the flat entry points below alike: a recipe
   run on a problem and each of its outputs compared with the oracle, given
   (external) outputs scored, the naive reference's rules applied, rules
   parsed and verdicts formed. Nothing here prints or reads the clock: the
   caller times the emulation into seconds. */
#define AA_EVAL_MAX_OUT 6 /* o, dq, dk, dv, dsinks, lse */
/* One compared output: the legacy metrics (lib/metrics.h: ULPs in the
   output's format when bf16, else fp32; the 0.01/0.01 rule) and the robust
   measures and four rules (aa_score_out_t). */
typedef struct {
  const char *name; /* "o", "dq", "dk", "dv", "dsinks" */
  aa_fmt_t ulp_fmt; /* the legacy metrics' ULP format */
  aa_metrics_t m;
  double relerr_bound; /* the oracle's certified bound of this output */
  int fa_applied;      /* the legacy fa fields of m are filled (aa_eval_apply_fa) */
  aa_score_out_t s;
} aa_eval_out_t;

/* One evaluated variant: a recipe's run, or outputs given by a kernel. */
typedef struct {
  char variant[64];
  char *recipe_text; /* aa_recipe_format text, malloc'd; NULL for external outputs */
  aa_eval_out_t out[AA_EVAL_MAX_OUT];
  int nout;
  double seconds;             /* emulation seconds (forward + backward), set by the caller that times it */
  char dq_reduce[32];         /* the recipe's dq_reduce strategy name ("" for external outputs) */
  aa_reduce_stats_t dq_stats; /* its counters: tiles, budget failures, FP64 recomputes */
  /* Normalisation (the fixed-shift and guarded variants of [blackwell-fa]
     sections 3.1-3.2; zeros for the other schemes): forward query tiles,
     tiles flagged by the range checks, rows recovered to LSE, and whether
     any output (o, dq, dk, dv, dsinks) holds NaN or Inf. */
  char softmax[24]; /* fwd.softmax name ("" for external outputs) */
  size_t fwd_tiles, tiles_flagged, rows_recovered;
  int nonfinite;
  aa_attn_first_t first; /* the recipe's run: where its first NaN or Inf was created (attn.h); found 0 otherwise */
  /* The emulation's own message when the recipe refused the problem (a NaN
     it detects, a range it cannot hold); "" when it ran. */
  char refused[512]; /* the size of aa_error_t's msg (checked in lib/score/eval.c) */
} aa_eval_variant_t;

/* How outputs are scored: ULPs counted in ulp_fmt (-1: the data's own,
   fp64 and fp8 data: fp32) and the abs-rel rule's atol, rtol (< 0: 0.01). */
typedef struct {
  int ulp_fmt;
  double atol, rtol;
} aa_eval_opts_t;
#define AA_EVAL_OPTS_DEFAULT ((aa_eval_opts_t){-1, -1, -1})

/* Compare t with ref into out: the legacy metrics and the robust measures
   and rules with the default options. On failure err says "NAME: ...". */
int aa_eval_compare(aa_eval_out_t *out, const char *name, const aa_tensor_t *t, const aa_oracle_out_t *ref,
                    aa_error_t *err);
/* (Re)compute out->s alone with the options o (out->name kept). */
int aa_eval_rescore(aa_eval_out_t *out, const aa_tensor_t *t, const aa_oracle_out_t *ref, const aa_eval_opts_t *o,
                    aa_error_t *err);
/* Run recipe r (aa_attn_run) on the problem's inputs into res and record
   in v the variant's name, recipe text and counters (of the recipe
   resolved for this problem when it has conditional keys). On failure err
   says "RECIPE: ...", and when the emulation itself refused the problem
   v->refused keeps its message. v->seconds is left to the caller. */
int aa_eval_attn(aa_eval_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                 const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                 aa_error_t *err);
/* aa_eval_attn with the emulation's device choice (aa_attn_run_device; aa_eval_attn is the CPU): the same bits,
   res->fwd_device and bwd_device say where the passes ran. */
int aa_eval_attn_device(aa_eval_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                        const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                        aa_attn_device_t dev, aa_error_t *err);
/* Compare res's o, dq, dk, dv (and dsinks when the problem has sinks) with
   the oracle into v->out, scored with o (NULL: the defaults); v->nonfinite. */
int aa_eval_outputs(aa_eval_variant_t *v, const aa_attn_result_t *res, const aa_problem_t *pb,
                    const aa_oracle_result_t *oracle, const aa_eval_opts_t *o, aa_error_t *err);
/* The emulation's device for the oracle's device choice (auto, cpu, cuda alike; values do not depend on it). */
aa_attn_device_t aa_eval_device(aa_oracle_device_t dev);
/* aa_eval_attn then aa_eval_outputs. */
int aa_eval_run(aa_eval_variant_t *v, aa_attn_result_t *res, const aa_recipe_t *r, const aa_problem_t *pb,
                const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                const aa_oracle_result_t *oracle, const aa_eval_opts_t *o, aa_error_t *err);
/* Outputs given by a kernel: g[5] holds o, dq, dk, dv, dsinks (data NULL
   where not given); each given one is refused when its exact value is not
   finite in its format (aa_score_exact_finite), else compared with the
   oracle as aa_eval_outputs does, scored with o (NULL: the defaults). v is
   named "external". */
int aa_eval_given(aa_eval_variant_t *v, const aa_tensor_t g[5], const aa_oracle_result_t *oracle,
                  const aa_eval_opts_t *o, aa_error_t *err);
/* A kernel's LSE (natural log, softmax scale included, folded [heads, n_q])
   made comparable with the oracle's: rows with no visible key and no sink
   have LSE = -Inf in the oracle (oracle.h) and +Inf in flash-attn
   (softmax.h:180); there either infinity reads as 0 in both copies, any
   other value as a NaN (a failure). got and ref are those copies, empty
   the count of such rows. */
typedef struct {
  aa_tensor_t got;
  aa_oracle_out_t ref;
  size_t empty;
} aa_eval_lse_t;
/* Fill x from the kernel's lse and the oracle's; AA_ESHAPE when the sizes
   differ. Free with aa_eval_lse_free (also after a failure). */
int aa_eval_lse_prepare(aa_eval_lse_t *x, const aa_tensor_t *lse, const aa_oracle_out_t *oracle_lse, aa_error_t *err);
void aa_eval_lse_free(aa_eval_lse_t *x);
/* x's lse checked (aa_score_exact_finite) and compared as aa_eval_given
   compares the others, appended to v->out as "lse". */
int aa_eval_lse(aa_eval_variant_t *v, const aa_eval_lse_t *x, const aa_eval_opts_t *o, aa_error_t *err);
/* An emulation's lse (res->lse) compared with the oracle's and appended to
   v->out as "lse" (aa_eval_lse on copies freed here): the naive
   reference's lse, which the fa and sdpa rules read when a kernel's lse is
   scored. */
int aa_eval_result_lse(aa_eval_variant_t *v, const aa_attn_result_t *res, const aa_oracle_result_t *oracle,
                       aa_error_t *err);
/* The naive reference in format fmt (aa_score_naive_recipe: BF16, FP16 or
   FP32) run on inputs already tagged fmt, and compared with the oracle,
   into naive and naive_res (freed by the caller on success). */
int aa_eval_naive(aa_eval_variant_t *naive, aa_attn_result_t *naive_res, aa_fmt_t fmt, const aa_problem_t *pb,
                  const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt, const aa_tensor_t *dO,
                  const aa_oracle_result_t *oracle, aa_error_t *err);
/* Recipe r run on inputs already tagged with its io format and compared
   with the oracle (aa_eval_run; with_lse: its lse too, aa_eval_result_lse),
   through an on-disk cache dir (NULL: none) that keeps what the fa, sdpa
   and expect rules read of each output (m.max_abs, m.nan, m.inf, also in
   s.m; m.rel_l2, abs_q99, ls_scale, ls_offset, scale_sigma, offset_sigma,
   row_err_max, head_rel_l2_max, err_corr): entries DIR/<key>.ref beside the
   oracle cache's, the key that of the oracle cache (lib/sweep.h) for the
   problem, the inputs as tagged and oo, with the recipe's text, with_lse
   and the library version. On a hit (*hit = 1, optional) nothing is
   emulated, v is named r->name, has no recipe text and only those fields. */
int aa_eval_recipe_cached(aa_eval_variant_t *v, int *hit, const aa_recipe_t *r, int with_lse, const aa_problem_t *pb,
                          const aa_tensor_t *const in[4], const aa_oracle_result_t *oracle,
                          const aa_oracle_opts_t *oo, const char *dir, aa_error_t *err);
/* aa_eval_recipe_cached of the naive reference in format fmt (inputs tagged
   fmt), its lse always scored: what the fa and sdpa rules read. */
int aa_eval_naive_cached(aa_eval_variant_t *naive, int *hit, aa_fmt_t fmt, const aa_problem_t *pb,
                         const aa_tensor_t *const in[4], const aa_oracle_result_t *oracle, const aa_oracle_opts_t *oo,
                         const char *dir, aa_error_t *err);
/* The fa and sdpa rules of v against the naive reference's outputs of the
   same name (aa_score_apply_naive). */
void aa_eval_apply_naive(aa_eval_variant_t *v, const aa_eval_variant_t *naive);
/* The same, and the legacy fa fields of the metrics (factor 2 for o, 3 for
   the gradients; fa_applied set). */
void aa_eval_apply_fa(aa_eval_variant_t *v, const aa_eval_variant_t *naive);
/* The expect rule's recipe: spec (a preset name, file or NAME:key=value;
   NULL or "": aa_eval_expect_default(fmt)), a bf16 one put in the kernel's
   format fmt (BF16, FP16 or FP32: aa_score_recipe_to_fmt). AA_EINVAL for
   other formats. */
int aa_eval_expect_recipe(aa_recipe_t *r, const char *spec, aa_fmt_t fmt, aa_error_t *err);
/* The default recipe of the expect rule for a kernel computing in fmt: "fa2" (FlashAttention-2's recipe,
   [fa2]) for bf16 and fp16 kernels, "naive-fp32" (PyTorch's math attention in fp32, aa_score_naive_recipe)
   for fp32 kernels, which FA2 does not build for. */
const char *aa_eval_expect_default(aa_fmt_t fmt);
/* The expect recipe r run on inputs already tagged with its io format and
   compared with the oracle into rec, rec_res (freed by the caller), then
   the expect rule applied to v's outputs (aa_score_apply_expect). */
int aa_eval_expect(aa_eval_variant_t *v, aa_eval_variant_t *rec, aa_attn_result_t *rec_res, const aa_recipe_t *r,
                   const aa_problem_t *pb, const aa_tensor_t *q, const aa_tensor_t *k, const aa_tensor_t *vt,
                   const aa_tensor_t *dO, const aa_oracle_result_t *oracle, aa_error_t *err);
/* The expect rule on v's outputs against the recipe's outputs of the same
   name (aa_score_apply_expect). */
void aa_eval_apply_expect(aa_eval_variant_t *v, const aa_eval_variant_t *rec);
/* The format a kernel computed in: its storage format (the inputs' widest)
   when that is bf16 or fp16; for fp32 and fp64 storage the narrowest of
   BF16, FP16, FP32, FP64 holding every value of its inputs and outputs
   (data NULL: absent; aa_score_infer_fmt), *inferred = 1 when narrower
   than the storage (a BF16 kernel's tensors saved as float32). */
aa_fmt_t aa_eval_kernel_fmt(int *inferred, aa_fmt_t storage, const aa_tensor_t *in, size_t nin,
                            const aa_tensor_t *out, size_t nout);
/* Rules as text: a comma- or space-separated list of fa, torch, sdpa,
   expect, abs-rel (optionally followed by ATOL,RTOL, stored in *atol,
   *rtol) or "all", into rules[AA_RULE_COUNT] (each once, *n of them).
   AA_EINVAL with a message naming the word. */
int aa_eval_rules_parse(aa_rule_t *rules, int *n, double *atol, double *rtol, const char *text, aa_error_t *err);
/* The rule a score applies when none is given: expect for bf16, fp16 and
   fp32 kernels (the recipe-relative rule, which catches the bugs the fa
   and sdpa rules pass: experiments/README-run.md), torch for fp64. */
aa_rule_t aa_eval_default_rule(aa_fmt_t input_fmt);
/* AA_OK, or AA_EINVAL naming the first rule that needs a naive reference or
   a recipe in the inputs' format (fa, sdpa, expect) when there is none
   (fp64 inputs). */
int aa_eval_rules_usable(const aa_rule_t *rules, int n, aa_fmt_t input_fmt, aa_error_t *err);
/* 1 when every rule passes on every output of v (a rule that could not be
   applied, fa/sdpa without a naive reference, counts as a failure). */
int aa_eval_verdict(const aa_eval_variant_t *v, const aa_rule_t *rules, int n);
/* Where the elements of evaluated outputs sit in the caller's arrays: its
   layout (AA_LAYOUT_AUTO: the folded [H, N, d]) with the dims of q and k
   in it, and the problem's n_q, n_k, d and sinks per head. */
typedef struct {
  aa_layout_t layout;
  aa_dims_t qdims, kdims;
  size_t n_q, n_k, d, num_sinks;
  /* a subsample of query rows (score --rows): row r of o, dq and lse is
     row row_map[r] of the caller's arrays; NULL: every row */
  const size_t *row_map;
} aa_eval_place_t;
/* The index of folded element i of output o in p's layout into idx ((b, h,
   n, d), (h, n, d), (b, h, n) for lse, or (h, k) for dsinks); returns its
   length. */
int aa_eval_index(size_t idx[4], const aa_eval_place_t *p, const aa_eval_out_t *o, size_t i);
/* The largest certified bound over o, dq, dk, dv, dsinks. */
double aa_eval_oracle_bound(const aa_oracle_result_t *r);
void aa_eval_variant_free(aa_eval_variant_t *v); /* the recipe text */

/* ---- flat entry point (specification for foreign callers) ----
   Tensors are C-order double arrays (every bf16/fp16/fp32 value is exact in
   double) with the caller's dtype in fmt (aa_fmt_t: 0 bf16, 1 fp16, 2 fp32,
   3 fp64, see fmt.h) and up to 4 axes. Inputs: q, k, v, dO (all required);
   outputs: o, dq, dk, dv (each optional: data NULL). Every tensor has the
   layout opts->layout (auto: inferred from q and k, see
   aa_layout_resolve); o, dq, dO have q's shape and dk, dv k's. */
typedef struct {
  const double *data;
  int fmt;
  int ndim;
  size_t shape[4];
} aa_flat_tensor_t;

typedef struct {
  int layout;           /* aa_layout_t */
  int causal;           /* top-left causal mask */
  double scale;         /* softmax scale; 0 = 1/sqrt(d) */
  size_t window;        /* sliding window (0 = none; needs causal) */
  double atol, rtol;    /* abs-rel rule */
  int ulp_fmt;          /* -1: each output's own format (fp64 data: fp32); else an aa_fmt_t */
  int oracle_path;      /* aa_oracle_path_t */
  double oracle_target; /* 0 = default */
  int threads;          /* 0 = all */
  int naive;            /* 1: run the naive reference in the inputs' dtype for the fa and sdpa rules */
  /* Varlen batch (problem.h): varlen_batch > 0 sequences packed as
     flash_attn_varlen_func takes them, every tensor [total, H, d] (layout
     nhd; auto becomes nhd), cu_seqlens_q / _k [varlen_batch + 1] (the
     caller keeps them alive during the call; cu_seqlens_k NULL: = _q). */
  size_t varlen_batch;
  const int32_t *cu_seqlens_q, *cu_seqlens_k;
  /* ---- masks (problem.h; ABI 3) ----
     attn_mask: SDPA's attn_mask in its additive form (a boolean mask as 0
     where True, -Inf where False; a float mask as is), [mask_b][mask_h][n_q]
     [n_k] with mask_b 1 or B and mask_h 1 or H (broadcast, as SDPA), NULL:
     none. key_len: the key lengths of a padded batch, nkey_len of them (0:
     none, 1: every batch element, B: one each). logit_offset: added to every
     score. The caller keeps the arrays alive during the call. */
  const double *attn_mask;
  size_t mask_b, mask_h;
  const size_t *key_len;
  size_t nkey_len;
  double logit_offset;
  /* The expect rule's recipe (aa_flat_score): NULL runs none (the rule is not applied), "" the default
     (aa_eval_expect_default of the kernel's format), else a spec as aa_recipe_from_spec takes it, put in
     the kernel's format (aa_score_recipe_to_fmt). */
  const char *expect;
  /* Problem features (problem.h), as `attnacc run` and `score` take them (ABI 5): */
  int align;                        /* aa_align_t of causal and the windows (0 top-left, 1 bottom-right) */
  int local;                        /* 1: flash-attn's window_size (window_left, window_right) applies */
  size_t window_left, window_right; /* AA_WINDOW_INF: an unbounded side */
  double softcap;                   /* 0: off */
  int alibi;                        /* aa_alibi_t: 0 off, 1 flash's form, 2 torch's */
  const double *alibi_slopes;       /* [n_slopes]: one per head of q (repeated over the batch), or [B * H];
                                       NULL: the geometric slopes of q's heads (aa_problem_alibi_geometric) */
  size_t n_slopes;
  const double *sinks; /* [H, num_sinks] sink logits (batch 1), or NULL */
  size_t num_sinks;
  size_t sinks_numel;  /* the elements sinks holds: must be H num_sinks */
  const uint8_t *keep; /* the kernel's dropout keep mask [B, H, n_q, n_k] (0/1), or NULL */
  double keep_scale;   /* the rescale of kept weights, 1 / (1 - p) */
  size_t keep_numel;   /* the elements keep holds: must be B H n_q n_k */
  /* The oracle: computed, read from the on-disk cache cache_dir (NULL: none; lib/sweep.h's format, shared with
     run, score and the sweeps), or taken from a result kept by aa_flat_oracle (NULL: none), refused unless it
     was computed for the same problem, input values and oracle settings. */
  const char *cache_dir;
  const struct aa_flat_kept_s *oracle;
  /* Where the fast oracle and the emulated recipes run (ABI 6): aa_oracle_device_t (0 auto, 1 cpu, 2 cuda); every
     value is the same on either (lib/oracle.h, lib/attn.h), cuda without a GPU is refused. */
  int device;
  /* 1: attn_mask came as a boolean mask (its -Inf entries, and key_len's padded keys with it, are keys a boolean
     mask hides: a recipe with mask.score = fill scores them as that kernel scores a boolean mask's; problem.h
     bias_bool); 0: a float mask, -Inf as given (ABI 6). */
  int mask_bool;
} aa_flat_opts_t;

/* An oracle result kept in memory for reuse by later calls (aa_flat_oracle
   fills one, aa_flat_kept_free releases it). */
typedef struct aa_flat_kept_s aa_flat_kept_t;
void aa_flat_kept_free(aa_flat_kept_t *kept);

/* One output's scores, flat for ctypes. Indices are in the caller's layout
   (idx_ndim axes). */
typedef struct {
  char name[8];
  int present;
  int data_fmt, ulp_fmt;
  size_t count, nan, inf;
  double rel_l2, max_abs, max_rel, rel_floor, max_rel_any;
  double ulp_median, ulp_p99, ulp_max, ulp_mean, ulp_normwise;
  double oracle_relerr_bound;
  int idx_ndim;
  size_t worst_abs_idx[4], worst_rel_idx[4];
  double worst_got, worst_ref, worst_rel_got, worst_rel_ref;
  int rule_applied[AA_RULE_COUNT], rule_pass[AA_RULE_COUNT];
  double rule_ratio[AA_RULE_COUNT], rule_allowed[AA_RULE_COUNT], rule_atol[AA_RULE_COUNT], rule_rtol[AA_RULE_COUNT],
      rule_naive_max_abs[AA_RULE_COUNT];
  size_t rule_fail_count[AA_RULE_COUNT];
  size_t rule_worst_idx[AA_RULE_COUNT][4];
  double rule_worst_got[AA_RULE_COUNT], rule_worst_ref[AA_RULE_COUNT];
  /* systematic-error statistics and the expect rule's parts (aa_score_out_t) */
  double ls_scale, ls_offset, scale_sigma, offset_sigma, err_corr, abs_q99, row_err_max, head_rel_l2_max;
  size_t row_worst, head_worst;
  double expect_ratio[AA_EXPECT_NSTAT], expect_limit[AA_EXPECT_NSTAT], expect_ref[AA_EXPECT_NSTAT];
  int expect_stat;
} aa_flat_out_t;

/* Problem-level facts of a scoring run. */
typedef struct {
  int layout; /* the layout used (resolved) */
  size_t b, h, h_kv, n_q, n_k, d;
  double scale;
  int input_fmt;              /* the inputs' format (the naive reference's) */
  double oracle_relerr_bound; /* no timings: the library reads no clock, callers time the call */
  size_t oracle_recomputed, oracle_uncertified;
  size_t rounded;  /* aa_flat_emulate: input values rounded into the recipe's io format */
  char recipe[64]; /* aa_flat_emulate: the recipe's name */
  /* aa_flat_score: the format the kernel computes in (the expect recipe's), and 1 when it was inferred as
     narrower than the storage dtype (every input and output value is BF16 or FP16 though stored wider: give
     the kernel's dtype to be sure); expect: the expect rule's recipe ("" when not run) */
  int kernel_fmt, kernel_fmt_inferred;
  char expect[64];
} aa_flat_info_t;

/* Score o, dq, dk, dv, dsinks, lse (outputs and out [0..5], in that order;
   dsinks [H, num_sinks], lse [B, H, N] for 4-axis layouts, [H, N] or [N],
   natural log with the softmax scale: flash-attn's softmax_lse, whose +Inf
   for rows that see no key is accepted as aa_eval_lse_prepare says)
   against the oracle of the problem (q, k, v, dO). The naive reference runs
   only when opts->naive is set. Returns a status; on failure msg (msg_cap
   bytes) holds one line naming the problem. */
#define AA_FLAT_NOUT 6
int aa_flat_score(aa_flat_out_t *out, aa_flat_info_t *info, const aa_flat_tensor_t *inputs,
                  const aa_flat_tensor_t *outputs, const aa_flat_opts_t *opts, char *msg, size_t msg_cap);
/* The same for nsets kernels' outputs on the same inputs (outputs[AA_FLAT_NOUT * i + j], out[AA_FLAT_NOUT * i +
   j]: set i's o, dq, dk, dv, dsinks, lse): the oracle, the naive reference and the expect recipe run once. info
   from the first set. */
int aa_flat_score_sets(aa_flat_out_t *out, aa_flat_info_t *info, const aa_flat_tensor_t *inputs,
                       const aa_flat_tensor_t *outputs, size_t nsets, const aa_flat_opts_t *opts, char *msg,
                       size_t msg_cap);

/* The oracle's values (FP64) of o, lse, dq, dk, dv written into caller
   buffers in the layout of the inputs: o and dq have q's shape, dk and dv
   k's, lse is [B, H, N] (both 4-axis layouts, as SDPA and flash-attn return
   it), [H, N] or [N]. Any buffer may be NULL. kept (optional): the result,
   kept for opts->oracle of later calls. */
int aa_flat_oracle(double *o, double *lse, double *dq, double *dk, double *dv, aa_flat_kept_t **kept,
                   aa_flat_info_t *info, const aa_flat_tensor_t *inputs, const aa_flat_opts_t *opts, char *msg,
                   size_t msg_cap);

/* Emulate a recipe on the inputs and score it: recipe is a preset name
   (`attnacc list`), a recipe file's path, or recipe text (it holds '=').
   The inputs are first rounded (RNE) into the recipe's io format, the count
   in info->rounded, and the oracle sees the rounded values. The recipe's
   o, dq, dk, dv are written into the buffers (any may be NULL) in the
   inputs' layout, and scored into out[0..3] as aa_flat_score does. */
int aa_flat_emulate(double *o, double *dq, double *dk, double *dv, aa_flat_out_t *out, aa_flat_info_t *info,
                    const aa_flat_tensor_t *inputs, const char *recipe, const aa_flat_opts_t *opts, char *msg,
                    size_t msg_cap);

/* What aa_flat_score, aa_flat_oracle or aa_flat_emulate would need for
   inputs of these shapes, before anything is allocated (the data pointers
   may be NULL; shapes and layout are checked as those functions check
   them): aa_problem_cost with `sets` output sets (the caller counts its own
   copies as sets too), the seconds as wall-clock time spread over
   opts->threads (0: the online cores) and, on the mpfr oracle path,
   including aa_oracle_mpfr_seconds. A status; msg as the entry points. */
int aa_flat_estimate(aa_problem_cost_t *c, const aa_flat_tensor_t *inputs, const aa_flat_opts_t *opts, size_t sets,
                     char *msg, size_t msg_cap);

/* The seeded input draw of `attnacc run` (aa_layout_draw, lib/layout.h:
   tensor id 0 q, 1 k, 2 v, 3 dO; distribution dist an AA_DIST_*; values of
   format fmt) into out [heads][rows][cols], so that a caller draws the
   inputs run draws for one seed. A status; msg as the entry points. */
int aa_flat_draw(double *out, uint64_t seed, uint64_t id, size_t heads, size_t rows, size_t cols, int dist,
                 double sigma, int fmt, char *msg, size_t msg_cap);

/* ---- ABI of the flat entry points (lib/score/abi.c) ----
   Foreign callers mirror the input structures above (aa_flat_tensor_t,
   aa_flat_opts_t, aa_problem_cost_t) and build the result structures
   (aa_flat_out_t, aa_flat_info_t) from the library's own description of
   them (aa_abi_field), as python/attnacc/_lib.py does: they compare
   aa_abi_version() and each aa_abi_struct_size with their own before the
   first call. AA_ABI_VERSION grows whenever a flat structure, a flat
   function's arguments or a status code change, or an abi function is
   added (2: aa_abi_field, aa_abi_measure; 3: the mask fields of aa_flat_opts_t; 4: the expect rule, its
   statistics, opts.expect, info.kernel_fmt, aa_flat_score_sets; 5: the problem features, sinks, keep mask,
   oracle cache and kept oracle of aa_flat_opts_t, dsinks and lse scored (AA_FLAT_NOUT outputs per set),
   aa_flat_oracle's kept argument, aa_flat_kept_free, aa_flat_draw). */
#define AA_ABI_VERSION 6
int aa_abi_version(void);
/* sizeof of "aa_flat_tensor_t", "aa_flat_opts_t", "aa_flat_out_t",
   "aa_flat_info_t" or "aa_problem_cost_t"; 0 for any other name. */
size_t aa_abi_struct_size(const char *name);
/* Field i (0, 1, ... in declaration order) of the result structure strct
   ("aa_flat_out_t" or "aa_flat_info_t"): its name, and its byte offset,
   element kind ('i' int, 'z' size_t, 'd' double, 'c' char) and shape
   (rows x cols elements: 1 x 1 a scalar, 1 x n an array, m x n an array of
   arrays); NULL past the last field or for another structure. */
const char *aa_abi_field(const char *strct, size_t i, size_t *offset, int *kind, size_t *rows, size_t *cols);
/* Robust measure i (0, 1, ...) of aa_flat_out_t, each a double field of
   that name (and of aa_score_out_t): its name, and in *robust whether the
   JSON document lists it under "robust" (in this order); NULL past the
   last. One table (lib/score/measures.c) feeds the JSON of run and score,
   aa_flat_out_t and the Python package. */
const char *aa_abi_measure(size_t i, int *robust);

void aa_flat_opts_init(aa_flat_opts_t *opts); /* auto layout, no mask, default scale, abs-rel 0.01/0.01, naive on */
const char *aa_flat_version(void);            /* AA_VERSION, for callers that cannot read the header */

#ifdef __cplusplus
}
#endif
#endif
