# attnacc: build fragment of the dropout module (keep-mask schemes, rates, forward/backward mask comparison).
attnaccinclude_HEADERS += lib/dropout.h
lib_libattnacc_la_SOURCES += lib/dropout/dropout-impl.h lib/dropout/philox.c lib/dropout/names.c \
	lib/dropout/mask.c lib/dropout/stats.c

check_PROGRAMS += tests/tdropout
TESTS += tests/tdropout
tests_tdropout_SOURCES = tests/tdropout.c
tests_tdropout_LDADD = $(LDADD) -lm
