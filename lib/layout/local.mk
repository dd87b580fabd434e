# attnacc: build fragment of the layout module (caller layouts, inference, seeded draw).
attnaccinclude_HEADERS += lib/layout.h
lib_libattnacc_core_la_SOURCES += lib/layout/layout.c
