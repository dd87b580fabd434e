# attnacc: build fragment of the attnacc command (one source per subcommand; register it in attnacc.c).
# SPDX-License-Identifier: LGPL-3.0-or-later
bin_PROGRAMS += experiments/attnacc
experiments_attnacc_SOURCES = experiments/attnacc.c experiments/commands.h experiments/cli.c experiments/cli.h \
	experiments/list.c experiments/run.c experiments/explain.c experiments/score.c experiments/stage.c experiments/stage.h \
	experiments/limits.c experiments/limits.h \
	experiments/expmap.c experiments/table3.c \
	experiments/dropout_cli.c experiments/dropout_cli.h experiments/dropout_map.c \
	experiments/features_cli.c experiments/features_cli.h experiments/varlen.c \
	experiments/determinism.c experiments/dqbudget.c experiments/normmap.c
experiments_attnacc_LDADD = lib/libattnacc_core.la -lmpfr -lgmp -lm
EXTRA_DIST += experiments/README-json.md
EXTRA_DIST += experiments/README-run.md experiments/README-exp-attn.md experiments/RESULTS.md
TESTS += tests/tcli.sh tests/tfeatures_cli.sh
EXTRA_DIST += tests/tcli.sh tests/tfeatures_cli.sh
TESTS += tests/tedges.sh tests/tnospace.sh
# explain and variant specs (run, sweep --variants): issue 14 items 13, 14.
TESTS += tests/texplain.sh
EXTRA_DIST += tests/texplain.sh
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
