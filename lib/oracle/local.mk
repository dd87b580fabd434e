# attnacc: build fragment of the oracle module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/oracle.h
lib_libattnacc_core_la_SOURCES += lib/oracle/oracle-impl.h lib/oracle/fast-common.h lib/oracle/oracle.c lib/oracle/round.c lib/oracle/ddexp.c \
	lib/oracle/mpeng.c lib/oracle/fast.c lib/oracle/fast_rows.c lib/oracle/dot.c
lib_libattnacc_core_la_SOURCES += lib/oracle/estimate.c lib/oracle/varlen.c

# Tests: fast vs mpfr over masks/GQA/sinks/dropout, MPFR self-consistency,
# closed forms, finite differences, identities, kernels (dd exp, spans, rounding);
# the tiled fast kernel against the row-by-row one, bit for bit, and across thread counts.
check_PROGRAMS += tests/toracle tests/toracle_closed tests/toracle_kernels tests/toracle_tiled tests/toracle_target \
	tests/toracle_features tests/toracle_property
TESTS += tests/toracle_kernels tests/toracle tests/toracle_closed tests/toracle_tiled tests/toracle_target \
	tests/toracle_features tests/toracle_property
tests_toracle_SOURCES = tests/toracle.c
tests_toracle_LDADD = $(LDADD) -lmpfr -lgmp -lm
tests_toracle_closed_SOURCES = tests/toracle_closed.c
tests_toracle_closed_LDADD = $(LDADD) -lmpfr -lgmp -lm
tests_toracle_kernels_SOURCES = tests/toracle_kernels.c
tests_toracle_kernels_LDADD = $(LDADD) -lmpfr -lgmp -lm
tests_toracle_tiled_SOURCES = tests/toracle_tiled.c
tests_toracle_tiled_LDADD = $(LDADD) -lmpfr -lgmp -lm
EXTRA_DIST += tests/toracle_common.c
tests_toracle_target_SOURCES = tests/toracle_target.c
tests_toracle_target_LDADD = $(LDADD) -lmpfr -lgmp -lm
# issue 14 features: closed forms, an independent MPFR forward and its finite differences, fast vs mpfr vs rows.
tests_toracle_features_SOURCES = tests/toracle_features.c
tests_toracle_features_LDADD = $(LDADD) -lmpfr -lgmp -lm
# issue 22: the certificate over the whole exponent range against an independent MPFR reference (tgeneric style).
tests_toracle_property_SOURCES = tests/toracle_property.c
tests_toracle_property_LDADD = $(LDADD) -lmpfr -lgmp -lm
# the same through the command: huge logits, the range refusal of score (exit 2)
TESTS += tests/tcertificate.sh
EXTRA_DIST += tests/tcertificate.sh
