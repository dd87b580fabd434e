# attnacc: build fragment of the recipe module.
attnaccinclude_HEADERS += lib/recipe.h
lib_libattnacc_core_la_SOURCES += lib/recipe/recipe-impl.h lib/recipe/keys.c lib/recipe/presets.c lib/recipe/parse.c \
	lib/recipe/check.c
EXTRA_DIST += lib/recipe/KEYS.md

check_PROGRAMS += tests/trecipe
TESTS += tests/trecipe
tests_trecipe_SOURCES = tests/trecipe.c

# Regression guard: every preset's canonical text against tests/data/presets.
check_PROGRAMS += tests/tpresets
TESTS += tests/tpresets
tests_tpresets_SOURCES = tests/tpresets.c
EXTRA_DIST += tests/data/presets
