# attnacc: build fragment of the reduce module (dQ reduction strategies).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/reduce.h
lib_libattnacc_core_la_SOURCES += lib/reduce/reduce-impl.h lib/reduce/names.c lib/reduce/tile.c lib/reduce/fixed.c \
  lib/reduce/fixed-core.h

check_PROGRAMS += tests/treduce
TESTS += tests/treduce
tests_treduce_SOURCES = tests/treduce.c
tests_treduce_LDADD = $(LDADD) -lmpfr -lgmp -lm

check_PROGRAMS += tests/treduce_attn
TESTS += tests/treduce_attn
tests_treduce_attn_SOURCES = tests/treduce_attn.c

TESTS += tests/tdeterminism.sh
EXTRA_DIST += tests/tdeterminism.sh
EXTRA_DIST += plots/dqbudget.gp
