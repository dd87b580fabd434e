# attnacc: build fragment of the layout module (caller layouts, inference, seeded draw).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/layout.h
lib_libattnacc_core_la_SOURCES += lib/layout/layout.c
