# attnacc: build fragment of the tensor module.
attnaccinclude_HEADERS += lib/tensor.h
attnaccinclude_HEADERS += lib/npy.h
lib_libattnacc_la_SOURCES += lib/tensor/tensor.c
