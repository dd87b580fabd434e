# attnacc: build fragment of the attnacc command (one source per subcommand; register it in attnacc.c).
# SPDX-License-Identifier: LGPL-3.0-or-later
bin_PROGRAMS += experiments/attnacc
# The command's sources by role: the dispatcher; cli/ (options, inputs,
# output files and text); cmd/ (one file per command, named after it);
# xp/ (the experiment registry and one file per experiment); report/.
experiments_attnacc_SOURCES = experiments/attnacc.c experiments/commands.h \
	experiments/cli/cli.c experiments/cli/cli.h experiments/cli/args.c experiments/cli/inputs.c experiments/cli/sources.c experiments/cli/sources.h \
	experiments/cli/evaluate.c experiments/cli/report.c \
	experiments/cli/json_report.c experiments/cli/limits.c experiments/cli/limits.h \
	experiments/cli/dropout.c experiments/cli/dropout.h \
	experiments/cli/features.c experiments/cli/features.h \
	experiments/cli/masks.c experiments/cli/masks.h \
	experiments/cli/rows.c experiments/cli/rows.h \
	experiments/cmd/list.c experiments/cmd/run.c experiments/cmd/run_varlen.c experiments/cmd/explain.c experiments/cmd/invariance.c experiments/cmd/closest.c \
	experiments/cmd/score.c experiments/cmd/sweep.c experiments/cmd/main.c \
	experiments/xp/xp.h experiments/xp/registry.c experiments/xp/expmap.c experiments/xp/table3.c \
	experiments/xp/table4.c experiments/xp/nanmap.c experiments/xp/fp8.c experiments/xp/lowpmap.c experiments/xp/normmap.c experiments/xp/dropout_map.c \
	experiments/xp/determinism.c experiments/xp/dq_budget.c \
	experiments/report/report.c experiments/report/report.h experiments/report/sets.c experiments/report/meta.c \
	experiments/report/published.c experiments/report/aggregate.c experiments/report/gnuplot.c \
	experiments/report/render_summary.c experiments/report/render_variants.c experiments/report/verdicts.c experiments/report/render_table4.c experiments/report/render_published.c \
	experiments/report/render_plots.c experiments/report/render_nanmap.c experiments/report/render_table3.c experiments/report/render_lowp.c
experiments_attnacc_LDADD = lib/libattnacc_core.la $(JANSSON_LIBS) -lmpfr -lgmp -lm
EXTRA_DIST += experiments/README-json.md
EXTRA_DIST += experiments/README-run.md experiments/README-exp-attn.md experiments/RESULTS.md
# tests/jget: the shell tests read JSON through jansson's own parser.
check_PROGRAMS += tests/jget
tests_jget_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
tests_jget_LDADD = $(JANSSON_LIBS)
TESTS += tests/tcli.sh tests/tfeatures_cli.sh tests/tjson.sh tests/tmask_cli.sh tests/tscore_parity.sh
# the up-front resource estimate of run and score
TESTS += tests/testimate.sh
EXTRA_DIST += tests/testimate.sh
EXTRA_DIST += tests/tcli.sh tests/tfeatures_cli.sh tests/tjson.sh tests/tmask_cli.sh tests/tscore_parity.sh
TESTS += tests/tedges.sh tests/tnospace.sh
# explain and variant specs (run, sweep --variants): tests/texplain.sh.
TESTS += tests/texplain.sh
EXTRA_DIST += tests/texplain.sh
# recipes/lowp/: the quant.* keys in user recipe files, explained (tests/tlowp_recipes.sh).
TESTS += tests/tlowp_recipes.sh tests/tlowp_presets.sh
EXTRA_DIST += tests/tlowp_recipes.sh tests/tlowp_presets.sh recipes/lowp/README.md recipes/lowp/mxfp8-bwd.recipe recipes/lowp/fa3-fp8-hadamard.recipe \
	recipes/lowp/sagebwd-paper.recipe
TESTS += tests/twhen_cli.sh
EXTRA_DIST += tests/twhen_cli.sh
EXTRA_DIST += tests/tedges.sh tests/tnospace.sh
TESTS += tests/tfixture.sh
EXTRA_DIST += tests/tfixture.sh fixtures/MANIFEST \
	fixtures/small/q.npy fixtures/small/k.npy fixtures/small/v.npy fixtures/small/do.npy \
	fixtures/small/golden/o.npy fixtures/small/golden/lse.npy fixtures/small/golden/dq.npy \
	fixtures/small/golden/dk.npy fixtures/small/golden/dv.npy \
	fixtures/causal-gqa/q.npy fixtures/causal-gqa/k.npy fixtures/causal-gqa/v.npy fixtures/causal-gqa/do.npy \
	fixtures/causal-gqa/golden/o.npy fixtures/causal-gqa/golden/lse.npy fixtures/causal-gqa/golden/dq.npy \
	fixtures/causal-gqa/golden/dk.npy fixtures/causal-gqa/golden/dv.npy
include $(srcdir)/experiments/tables.mk
EXTRA_DIST += fixtures/h200-flex/flex_witness.py
# closest: tests/tclosest.sh; score with run's problem features: tests/tscore_window.sh.
TESTS += tests/tclosest.sh tests/tscore_window.sh
EXTRA_DIST += tests/tclosest.sh tests/tscore_window.sh
# lost or wrong signals: stdout, score's file set, --allow-nan, escaped messages.
TESTS += tests/tsignals.sh
EXTRA_DIST += tests/tsignals.sh
