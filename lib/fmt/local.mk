# attnacc: build fragment of the fmt module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/fmt.h
lib_libattnacc_core_la_SOURCES += lib/fmt/fmt-impl.h lib/fmt/info.c lib/fmt/round.c lib/fmt/encode.c lib/fmt/block.c

check_PROGRAMS += tests/tfmt
TESTS += tests/tfmt
tests_tfmt_SOURCES = tests/tfmt.c
tests_tfmt_LDADD = $(LDADD) -lmpfr -lgmp -lm
EXTRA_DIST += tests/tfmt_model.c

check_PROGRAMS += tests/tfmt_fp32
TESTS += tests/tfmt_fp32
tests_tfmt_fp32_SOURCES = tests/tfmt_fp32.c
tests_tfmt_fp32_LDADD = $(LDADD) -lmpfr -lgmp -lm

check_PROGRAMS += tests/tfmt_block
TESTS += tests/tfmt_block
tests_tfmt_block_SOURCES = tests/tfmt_block.c
tests_tfmt_block_LDADD = $(LDADD) -lmpfr -lgmp -lm
