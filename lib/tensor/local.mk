# attnacc: build fragment of the tensor module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/tensor.h
attnaccinclude_HEADERS += lib/npy.h
lib_libattnacc_core_la_SOURCES += lib/tensor/tensor.c
lib_libattnacc_core_la_SOURCES += lib/tensor/npy.c
check_PROGRAMS += tests/tnpy
TESTS += tests/tnpy
tests_tnpy_SOURCES = tests/tnpy.c
lib_libattnacc_core_la_SOURCES += lib/tensor/npz.c lib/tensor/safetensors.c
lib_libattnacc_core_la_LIBADD += $(LIBZIP_LIBS)
# One sizing of what a file declares, shared by the three readers (internal.h).
lib_libattnacc_core_la_SOURCES += lib/tensor/internal.h lib/tensor/extent.c
check_PROGRAMS += tests/treaders
TESTS += tests/treaders tests/treaders_cli.sh
tests_treaders_SOURCES = tests/treaders.c
EXTRA_DIST += tests/treaders_cli.sh
