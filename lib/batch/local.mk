# attnacc: build fragment of the batch module (FA2's launch decisions for a padded batch).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/batch.h
lib_libattnacc_core_la_SOURCES += lib/batch/batch.c

check_PROGRAMS += tests/tinvariance
TESTS += tests/tinvariance
tests_tinvariance_SOURCES = tests/tinvariance.c
TESTS += tests/tinvariance_cmd.sh
EXTRA_DIST += tests/tinvariance_cmd.sh
