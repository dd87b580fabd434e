# attnacc: build fragment of the score module (robust metrics, pass rules, flat entry points).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/score.h
lib_libattnacc_core_la_SOURCES += lib/score/rules.c lib/score/compare.c lib/score/eval.c lib/score/json.h lib/score/json.c lib/score/score-impl.h lib/score/measures.c lib/score/flat.c lib/score/kept.c lib/score/naive_cache.c lib/score/abi.c
check_PROGRAMS += tests/tscore
TESTS += tests/tscore
tests_tscore_SOURCES = tests/tscore.c
tests_tscore_LDADD = $(LDADD) -lmpfr -lgmp -lm
check_PROGRAMS += tests/teval
TESTS += tests/teval
tests_teval_SOURCES = tests/teval.c
tests_teval_LDADD = $(LDADD) -lmpfr -lgmp -lm
