# attnacc: build fragment of the exp module (constructions, packed BF16 pairs, error map).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/exp.h
lib_libattnacc_core_la_SOURCES += lib/exp/registry.c lib/exp/eval.c lib/exp/exact.c lib/exp/map.c
EXTRA_DIST += lib/exp/exp-impl.h

check_PROGRAMS += tests/texp tests/texp_remez
TESTS += tests/texp tests/texp_remez
tests_texp_SOURCES = tests/texp.c
tests_texp_LDADD = $(LDADD) -lmpfr -lgmp -lm
tests_texp_remez_SOURCES = tests/texp_remez.c
tests_texp_remez_LDADD = $(LDADD) -lm
# plots/expratio.gp is installed and distributed through dist_plots_DATA (experiments/tables.mk).
