# attnacc: build fragment of the attn module.
attnaccinclude_HEADERS += lib/attn.h
lib_libattnacc_la_SOURCES += lib/attn/attn-impl.h lib/attn/common.c lib/attn/forward.c lib/attn/backward.c \
	lib/attn/run.c

check_PROGRAMS += tests/tattn tests/tattn_micro
TESTS += tests/tattn tests/tattn_micro
tests_tattn_SOURCES = tests/tattn.c
tests_tattn_micro_SOURCES = tests/tattn_micro.c
