# attnacc: build fragment of the problem module (shapes and masks).
# SPDX-License-Identifier: LGPL-3.0-or-later
lib_libattnacc_core_la_SOURCES += lib/problem/problem.c lib/problem/estimate.c lib/problem/mask.c
attnaccinclude_HEADERS += lib/problem.h
# Tests: masks against the index formulas of flash-attn and SDPA, ALiBi distances and slopes, validation.
check_PROGRAMS += tests/tproblem
TESTS += tests/tproblem
tests_tproblem_SOURCES = tests/tproblem.c
# Varlen batches: the packed oracle against packing bounds, the packed emulation against per-sequence runs.
check_PROGRAMS += tests/tvarlen
TESTS += tests/tvarlen
tests_tvarlen_SOURCES = tests/tvarlen.c
tests_tvarlen_LDADD = $(LDADD) -lmpfr -lgmp -lm
# Attention masks, biases, key padding, logit offsets, fully masked rows: the oracle against a long-double
# reference and its MPFR path, the emulation's mask path against its causal interval and the mask.* keys.
check_PROGRAMS += tests/tmask
TESTS += tests/tmask
tests_tmask_SOURCES = tests/tmask.c
tests_tmask_LDADD = $(LDADD) -lmpfr -lgmp -lm
# mask.phantom_tile: cuDNN's phantom key slots against the key's definition.
check_PROGRAMS += tests/tmask_phantom
TESTS += tests/tmask_phantom
tests_tmask_phantom_SOURCES = tests/tmask_phantom.c
tests_tmask_phantom_LDADD = $(LDADD) -lm
