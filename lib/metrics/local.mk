# attnacc: build fragment of the metrics module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/metrics.h
lib_libattnacc_core_la_SOURCES += lib/metrics/compare.c lib/metrics/fa_rule.c lib/metrics/ulp.c lib/metrics/ordinal.h
check_PROGRAMS += tests/tmetrics
TESTS += tests/tmetrics
tests_tmetrics_SOURCES = tests/tmetrics.c
tests_tmetrics_LDADD = $(LDADD) -lmpfr -lgmp -lm
