# attnacc: build fragment of the problem module (shapes and masks).
lib_libattnacc_core_la_SOURCES += lib/problem/problem.c
attnaccinclude_HEADERS += lib/problem.h
