# attnacc: build fragment of the reduce module (dQ reduction strategies).
attnaccinclude_HEADERS += lib/reduce.h
lib_libattnacc_la_SOURCES += lib/reduce/reduce-impl.h lib/reduce/names.c lib/reduce/tile.c lib/reduce/fixed.c

check_PROGRAMS += tests/treduce
TESTS += tests/treduce
tests_treduce_SOURCES = tests/treduce.c
tests_treduce_LDADD = $(LDADD) -lmpfr -lgmp -lm
