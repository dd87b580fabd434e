# attnacc: build fragment of the dropout module (keep-mask schemes, rates, forward/backward mask comparison).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/dropout.h
lib_libattnacc_core_la_SOURCES += lib/dropout/dropout-impl.h lib/dropout/philox.c lib/dropout/names.c \
	lib/dropout/mask.c lib/dropout/stats.c

check_PROGRAMS += tests/tdropout
TESTS += tests/tdropout
tests_tdropout_SOURCES = tests/tdropout.c
tests_tdropout_LDADD = $(LDADD) -lm

# Dropout in the attn pipeline: forward mask vs the backward's redraw (bitwise identities, oracle error).
check_PROGRAMS += tests/tdropout_attn
TESTS += tests/tdropout_attn
tests_tdropout_attn_SOURCES = tests/tdropout_attn.c
tests_tdropout_attn_LDADD = $(LDADD) -lmpfr -lgmp -lm
