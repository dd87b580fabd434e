# attnacc: build fragment of the exp module (constructions, packed BF16 pairs, error map).
attnaccinclude_HEADERS += lib/exp.h
lib_libattnacc_la_SOURCES += lib/exp/registry.c lib/exp/eval.c lib/exp/exact.c lib/exp/map.c
EXTRA_DIST += lib/exp/exp-impl.h
