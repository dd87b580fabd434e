# attnacc: build fragment of the exp module (constructions, packed BF16 pairs, error map).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/exp.h
lib_libattnacc_core_la_SOURCES += lib/exp/registry.c lib/exp/eval.c lib/exp/exact.c lib/exp/map.c lib/exp/sm90.c lib/exp/sm90-core.h lib/hd.h \
  lib/exp/quad-core.h
EXTRA_DIST += lib/exp/exp-impl.h

check_PROGRAMS += tests/texp tests/texp_remez
TESTS += tests/texp tests/texp_remez
tests_texp_SOURCES = tests/texp.c
tests_texp_LDADD = $(LDADD) -lmpfr -lgmp -lm
tests_texp_remez_SOURCES = tests/texp_remez.c
tests_texp_remez_LDADD = $(LDADD) -lm
# plots/expratio.gp is installed and distributed through dist_plots_DATA (experiments/tables.mk).
# sm90 special-function models against stored H200 outputs (fixtures/h200-fa2, experiments/README-gpu.md section 4).
check_PROGRAMS += tests/texp_sm90
TESTS += tests/texp_sm90
tests_texp_sm90_SOURCES = tests/texp_sm90.c
tests_texp_sm90_LDADD = $(LDADD) -lmpfr -lgmp -lm
EXTRA_DIST += fixtures/h200-fa2/ex2.npy fixtures/h200-fa2/libm.npy fixtures/h200-fa2/lg2.npy fixtures/h200-fa2/mufu.txt \
	fixtures/h200-fa2/launches.txt \
	fixtures/h200-fa2/d64n1024-dense/o.npy fixtures/h200-fa2/d64n1024-dense/dq.npy \
	fixtures/h200-fa2/d64n1024-dense/dk.npy fixtures/h200-fa2/d64n1024-dense/dv.npy \
	fixtures/h200-fa2/mufu.cu fixtures/h200-fa2/verify.cu fixtures/h200-fa2/sass.cu fixtures/h200-fa2/gpu_fa2.py \
	fixtures/h200-fa2/pack.py fixtures/h200-fa2/run.sh fixtures/h200-fa2/run2.sh \
	fixtures/h200-fa2/dq_pairs.txt fixtures/h200-fa2/dq_atomic.sh fixtures/h200-fa2/dq_atomic.csv
