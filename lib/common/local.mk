# attnacc: build fragment of the common module (status codes, errors).
lib_libattnacc_la_SOURCES += lib/common/status.c
