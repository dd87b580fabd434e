/* attnacc: the text report of run and score: the problem line, the metric table, the rule table and the failure
 * lines. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static cli_report_extra_t extra; /* zero: auto layout, no verdict */

void cli_set_report_extra(const cli_report_extra_t *x) {
  extra = *x;
}

const cli_report_extra_t *cli_report_extra(void) {
  return &extra;
}

void cli_place(aa_eval_place_t *p, const cli_report_t *rep) {
  *p = (aa_eval_place_t){extra.layout, extra.qdims, extra.kdims,        rep->pb->n_q,
                         rep->pb->n_k, rep->pb->d,  rep->pb->num_sinks, extra.row_map};
}

int cli_index(size_t idx[4], const cli_report_t *rep, const cli_out_t *o, size_t i) {
  aa_eval_place_t p;
  cli_place(&p, rep);
  return aa_eval_index(idx, &p, o, i);
}

/* "(b, h, n, d)" of folded element i of output o in the report's layout. */
static void index_str(char *buf, size_t cap, const cli_report_t *rep, const cli_out_t *o, size_t i) {
  size_t idx[4], used;
  int nd = cli_index(idx, rep, o, i);
  used = (size_t)snprintf(buf, cap, "(");
  for (int k = 0; k < nd && used < cap; k++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%zu", k ? ", " : "", idx[k]);
  if (used < cap) snprintf(buf + used, cap - used, ")");
}

void cli_failure_line(char *buf, size_t cap, const cli_report_t *rep, const cli_out_t *o, aa_rule_t rule) {
  const aa_rule_result_t *r = &o->s.rule[rule];
  char ix[96];
  index_str(ix, sizeof ix, rep, o, r->worst);
  if (!r->applied) {
    snprintf(buf, cap, "%s: the %s rule could not be applied (it needs bf16, fp16 or fp32 inputs)", o->name,
             aa_rule_name(rule));
    return;
  }
  if (o->s.m.nan + o->s.m.inf > 0) { /* never compared with the oracle as a number */
    char first[96];
    index_str(first, sizeof first, rep, o, o->s.first_nonfinite);
    snprintf(buf, cap, "%s fails the %s rule: %zu NaN and %zu Inf elements of %zu, the first at index %s", o->name,
             aa_rule_name(rule), o->s.m.nan, o->s.m.inf, o->s.m.count, first);
    return;
  }
  if (rule == AA_RULE_EXPECT) {
    const aa_score_out_t *s = &o->s;
    snprintf(buf, cap,
             "%s fails the expect rule: its %s statistic is %.4g x the limit %.6g set by %s (recipe's value %.6g); "
             "rel_l2 %.6g, scale - 1 %.3g (sigma %.3g), offset %.3g (sigma %.3g), worst row %zu (|e| %.6g), worst "
             "head %zu (rel_l2 %.6g)",
             o->name, aa_expect_stat_name((aa_expect_stat_t)s->expect_stat), r->ratio, r->allowed,
             extra.expect ? extra.expect : "the recipe", s->expect_ref[s->expect_stat], s->m.rel_l2, s->ls_scale,
             s->scale_sigma, s->ls_offset, s->offset_sigma, s->row_worst, s->row_err_max, s->head_worst,
             s->head_rel_l2_max);
    return;
  }
  if (rule == AA_RULE_ABSREL || rule == AA_RULE_TORCH)
    snprintf(
        buf, cap,
        "%s fails the %s rule (atol %g, rtol %g): %zu of %zu elements over; worst at index %s: value %.9g, oracle "
        "%.9g, error %.6g = %.4g x the allowed %.6g",
        o->name, aa_rule_name(rule), r->atol, r->rtol, r->fail_count, o->s.m.count, ix, r->worst_got, r->worst_ref,
        fabs(r->worst_got - r->worst_ref), r->ratio, r->allowed);
  else
    snprintf(buf, cap,
             "%s fails the %s rule: max abs error %.6g at index %s (value %.9g, oracle %.9g) exceeds %s%g x %s's max "
             "error %.6g%s = %.6g (ratio %.4g)",
             o->name, aa_rule_name(rule), o->s.m.max_abs, ix, r->worst_got, r->worst_ref,
             rule == AA_RULE_SDPA ? "max(1e-05, " : "", r->rtol, extra.naive ? extra.naive : "the naive reference",
             r->naive_max_abs, rule == AA_RULE_SDPA ? ")" : "", r->allowed, r->ratio);
}

/* The expect rule's statistics per output (lib/score.h): each one's ratio to its limit, and the fit. */
static void print_expect(FILE *f, const cli_variant_t *vs, size_t nv) {
  fprintf(f, "expect: against %s in the kernel's format (ratio to the limit per statistic, <= 1 passes):\n%-14s %-6s",
          extra.expect, "variant", "out");
  for (int k = 0; k < AA_EXPECT_NSTAT; k++)
    fprintf(f, " %-8s", aa_expect_stat_name((aa_expect_stat_t)k));
  fprintf(f, " %-11s %-10s %-11s %-10s %-9s\n", "scale-1", "sigma", "offset", "sigma", "corr");
  for (size_t i = 0; i < nv; i++)
    for (int j = 0; j < vs[i].nout; j++) {
      const aa_score_out_t *s = &vs[i].out[j].s;
      if (!s->rule[AA_RULE_EXPECT].applied) continue;
      fprintf(f, "%-14s %-6s", vs[i].variant, vs[i].out[j].name);
      for (int k = 0; k < AA_EXPECT_NSTAT; k++)
        fprintf(f, " %-8.3g", s->expect_ratio[k]);
      fprintf(f, " %-11.3g %-10.3g %-11.3g %-10.3g %-9.3g\n", s->ls_scale, s->scale_sigma, s->ls_offset,
              s->offset_sigma, s->err_corr);
    }
  fprintf(
      f,
      "limits: rel-l2 <= %g x the recipe's, q99 (0.99 quantile of |e|) <= %g x, |scale-1| and |offset| <= the "
      "recipe's + %g sigma, worst row |e| <= %g x, worst head rel_l2 <= %g x (README.md, \"The default verdict\")\n",
      AA_EXPECT_BAND_L2, AA_EXPECT_BAND_Q99, AA_EXPECT_Z, AA_EXPECT_BAND_ROW, AA_EXPECT_BAND_HEAD);
}

void cli_print_rules(FILE *f, const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  char line[1024];
  fprintf(f, "rules (measured / allowed, <= 1 passes):\n%-14s %-6s %-6s %-10s %-10s %-10s %-10s %-10s", "variant",
          "out", "ulp", "ulp_med", "ulp_p99", "ulp_max", "ulp_norm", "max_rel");
  for (int r = 0; r < AA_RULE_COUNT; r++)
    fprintf(f, " %-14s", aa_rule_name((aa_rule_t)r));
  fprintf(f, "\n");
  for (size_t i = 0; i < nv; i++)
    for (int j = 0; j < vs[i].nout; j++) {
      const cli_out_t *o = &vs[i].out[j];
      fprintf(f, "%-14s %-6s %-6s %-10.4g %-10.4g %-10.4g %-10.4g %-10.4g", vs[i].variant, o->name,
              cli_fmt_name(o->s.ulp_fmt), o->s.ulp_median, o->s.ulp_p99, o->s.ulp_max, o->s.ulp_normwise,
              o->s.max_rel);
      for (int r = 0; r < AA_RULE_COUNT; r++) {
        const aa_rule_result_t *x = &o->s.rule[r];
        char cell[32];
        if (x->applied && o->s.m.nan + o->s.m.inf > 0) /* a count, not a ratio against the oracle */
          snprintf(cell, sizeof cell, "%zu %s FAIL", o->s.m.nan ? o->s.m.nan : o->s.m.inf,
                   o->s.m.nan ? "NaN" : "Inf");
        else if (x->applied)
          snprintf(cell, sizeof cell, "%.4g %s", x->ratio, x->pass ? "pass" : "FAIL");
        else
          snprintf(cell, sizeof cell, "-");
        fprintf(f, " %-14s", cell);
      }
      fprintf(f, "\n");
    }
  fprintf(
      f,
      "abs-rel: |a - b| <= atol + rtol |b| (atol %g, rtol %g); torch: the same with assert_close's defaults for the "
      "output's dtype; fa: max_abs <= 2x (o) / 3x (grads) the naive reference's; sdpa: <= max(1e-5, fudge x "
      "naive's), fudge o 4, dq 180, dk 16, dv 4\n",
      vs[0].nout ? vs[0].out[0].s.rule[AA_RULE_ABSREL].atol : AA_METRICS_ATOL,
      vs[0].nout ? vs[0].out[0].s.rule[AA_RULE_ABSREL].rtol : AA_METRICS_RTOL);
  if (extra.expect != NULL) print_expect(f, vs, nv);
  if (extra.n_verdict == 0) return;
  for (size_t i = 0; i < nv; i++) {
    int pass = cli_verdict(&vs[i], extra.verdict_rules, extra.n_verdict), nfail = 0;
    /* PASS by every rule asked for, or FAIL naming only the rules that failed */
    fprintf(f, "verdict: %s %s", vs[i].variant, pass ? "PASS by" : "FAIL by");
    for (int r = 0; r < extra.n_verdict; r++) {
      aa_rule_t rule = extra.verdict_rules[r];
      int ok = 1;
      for (int j = 0; j < vs[i].nout; j++)
        ok &= vs[i].out[j].s.rule[rule].applied && vs[i].out[j].s.rule[rule].pass;
      if (pass || !ok) fprintf(f, "%s%s", nfail++ ? ", " : " ", aa_rule_name(rule));
    }
    if (!pass && nfail < extra.n_verdict) fprintf(f, " (of %d rules asked for)", extra.n_verdict);
    fprintf(f, "\n");
    for (int j = 0; j < vs[i].nout; j++)
      for (int r = 0; r < extra.n_verdict; r++) {
        const aa_rule_result_t *x = &vs[i].out[j].s.rule[extra.verdict_rules[r]];
        if (x->applied && x->pass) continue;
        cli_failure_line(line, sizeof line, rep, &vs[i].out[j], extra.verdict_rules[r]);
        fprintf(f, "FAIL %s %s\n", vs[i].variant, line);
      }
  }
}

int cli_first_failure(char *buf, size_t cap, const cli_report_t *rep, const cli_variant_t *v) {
  for (int j = 0; j < v->nout; j++)
    for (int r = 0; r < extra.n_verdict; r++) {
      const aa_rule_result_t *x = &v->out[j].s.rule[extra.verdict_rules[r]];
      if (x->applied && x->pass) continue;
      cli_failure_line(buf, cap, rep, &v->out[j], extra.verdict_rules[r]);
      return 1;
    }
  return 0;
}

const char *cli_fmt_name(aa_fmt_t f) {
  switch (f) {
  case AA_FMT_BF16:
    return "bf16";
  case AA_FMT_FP16:
    return "fp16";
  case AA_FMT_FP32:
    return "fp32";
  case AA_FMT_FP64:
    return "fp64";
  case AA_FMT_E4M3:
    return "e4m3";
  case AA_FMT_E5M2:
    return "e5m2";
  default:
    return "?";
  }
}

static void problem_line(FILE *f, const cli_report_t *rep) {
  const aa_problem_t *pb = rep->pb;
  fprintf(f, "problem: n=%zu", pb->n_q);
  if (pb->n_k != pb->n_q) fprintf(f, " n_k=%zu", pb->n_k);
  fprintf(f, " d=%zu heads=%zu kv_heads=%zu causal=%s window=%zu sinks=%zu scale=%.17g", pb->d, pb->heads,
          pb->kv_heads, pb->causal ? "yes" : "no", pb->window, pb->num_sinks, aa_problem_scale(pb));
  { /* problem features beyond masks (lib/problem.h), only when on (the line of other problems is unchanged) */
    char buf[256];
    cli_problem_features(buf, sizeof buf, pb);
    fputs(buf, f);
  }
  if (rep->inputs_dir != NULL)
    fprintf(f, " inputs=%s", rep->inputs_dir);
  else
    fprintf(f, " dist=%s sigma=%.17g", rep->dist, rep->sigma);
  fprintf(f, "\n");
}

void cli_print_table(FILE *f, const cli_report_t *rep, const cli_variant_t *vs, size_t nv) {
  double emul = 0;
  problem_line(f, rep);
  fprintf(f, "%-14s %-6s %-4s %-13s %-13s %-10s %-10s %-5s %-5s %-5s %-13s %s\n", "variant", "out", "ulp", "rel_l2",
          "max_abs", "max_ulp", "mean_ulp", "nan", "inf", "pass", "fa_ratio", "fa_pass");
  for (size_t i = 0; i < nv; i++) {
    emul += vs[i].seconds;
    for (int j = 0; j < vs[i].nout; j++) {
      const cli_out_t *o = &vs[i].out[j];
      fprintf(f, "%-14s %-6s %-4s %-13.6e %-13.6e %-10.4g %-10.4g %-5zu %-5zu %-5s ", vs[i].variant, o->name,
              cli_fmt_name(o->ulp_fmt), o->m.rel_l2, o->m.max_abs, o->m.max_ulp, o->m.mean_ulp, o->m.nan, o->m.inf,
              o->m.pass ? "yes" : "no");
      if (o->fa_applied)
        fprintf(f, "%-13.6e %s (<= %g)\n", o->m.fa_ratio, o->m.fa_pass ? "yes" : "no", o->m.fa_factor);
      else
        fprintf(f, "%-13s %s\n", "-", "-");
    }
  }
  for (size_t i = 0; i < nv; i++)
    if (vs[i].dq_reduce[0] != '\0')
      fprintf(f, "dq reduce: %s %s, %llu tiles, %llu budget failures, %llu FP64 recomputes\n", vs[i].variant,
              vs[i].dq_reduce, (unsigned long long)vs[i].dq_stats.tiles,
              (unsigned long long)vs[i].dq_stats.budget_failures, (unsigned long long)vs[i].dq_stats.fp64_recomputes);
  for (size_t i = 0; i < nv; i++)
    if (vs[i].softmax[0] != '\0')
      fprintf(f,
              "normalisation: %s %s, %zu of %zu forward tiles flagged, %zu rows recovered, NaN/Inf in outputs: %s\n",
              vs[i].variant, vs[i].softmax, vs[i].tiles_flagged, vs[i].fwd_tiles, vs[i].rows_recovered,
              vs[i].nonfinite ? "yes" : "no");
  fprintf(f, "rule 1 (pass): |a - b| <= %g + %g |b| for every element; fa rule: max_abs <= factor x naive-bf16's\n",
          AA_METRICS_ATOL, AA_METRICS_RTOL);
  {
    char target[32];
    int e;
    /* decimal, or 2^E for a power of two (the form --oracle-target takes) */
    if (frexp(rep->oo->target, &e) == 0.5)
      snprintf(target, sizeof target, "2^%d", e - 1);
    else
      snprintf(target, sizeof target, "%.6g", rep->oo->target);
    fprintf(f,
            "oracle: %s, %d bits, target %s, certified relative error bound %.3e, %zu elements recomputed in MPFR, "
            "%zu uncertified\n",
            aa_oracle_path_name(rep->oo->path), rep->oo->prec, target, cli_oracle_bound(rep->oracle),
            rep->oracle->n_recomputed, rep->oracle->n_uncertified);
  }
  fprintf(f, "seconds: oracle %.3f, emulation %.3f\n", rep->oracle_seconds, emul);
  if (rep->seed_known) fprintf(f, "seed %llu, ", (unsigned long long)rep->seed);
  fprintf(f, "attnacc %s (git %s)\n", AA_VERSION, AA_GIT_HASH);
}

static int progress_shown;

void cli_progress(const char *cmd, const char *what, double work) {
  cli_progress_end();
  if (work < 3e8 || !isatty(STDERR_FILENO)) return;
  fprintf(stderr, "attnacc %s: %s (about %.0f s of one core)...", cmd, what, work / 1.5e8);
  fflush(stderr);
  progress_shown = 1;
}

void cli_progress_end(void) {
  if (!progress_shown) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
  progress_shown = 0;
}
