# attnacc: build fragment of the rng module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/rng.h
lib_libattnacc_core_la_SOURCES += lib/rng/pcg32.c lib/rng/pcg64.c lib/rng/derive.c

check_PROGRAMS += tests/trng
TESTS += tests/trng
tests_trng_SOURCES = tests/trng.c
tests_trng_LDADD = $(LDADD) -lm

if HAVE_PCG_CPP
check_PROGRAMS += tests/tpcg_cross
TESTS += tests/tpcg_cross
tests_tpcg_cross_SOURCES = tests/tpcg_cross.cpp
endif
EXTRA_DIST += tests/tpcg_cross.cpp
