# attnacc: build fragment of the libFuzzer harnesses (configure --enable-fuzzing with CC=clang-14; `make fuzz`).
# SPDX-License-Identifier: LGPL-3.0-or-later
# Each harness runs for FUZZ_SECONDS (default 60) on a scratch copy of its
# committed seed corpus fuzz/corpus/NAME, so the tree is never written;
# a crash, leak or failed property leaves the input in fuzz-NAME.crash/.
AA_FUZZERS = fuzz/fuzz_npy fuzz/fuzz_npz fuzz/fuzz_safetensors fuzz/fuzz_recipe fuzz/fuzz_journal
EXTRA_PROGRAMS += $(AA_FUZZERS)
CLEANFILES += $(AA_FUZZERS)
fuzz_fuzz_npy_SOURCES = fuzz/fuzz_npy.c fuzz/fuzz.h
fuzz_fuzz_npz_SOURCES = fuzz/fuzz_npz.c fuzz/fuzz.h
fuzz_fuzz_npz_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
fuzz_fuzz_npz_LDADD = $(LDADD) -lmpfr -lgmp -lm
fuzz_fuzz_safetensors_SOURCES = fuzz/fuzz_safetensors.c fuzz/fuzz.h
fuzz_fuzz_safetensors_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
fuzz_fuzz_safetensors_LDADD = $(LDADD) -lmpfr -lgmp -lm
fuzz_fuzz_recipe_SOURCES = fuzz/fuzz_recipe.c fuzz/fuzz.h
fuzz_fuzz_journal_SOURCES = fuzz/fuzz_journal.c fuzz/fuzz.h
fuzz_fuzz_npy_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
fuzz_fuzz_recipe_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
fuzz_fuzz_journal_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
fuzz_fuzz_npy_LDADD = $(LDADD) -lmpfr -lgmp -lm
fuzz_fuzz_recipe_LDADD = $(LDADD) -lmpfr -lgmp -lm
fuzz_fuzz_journal_LDADD = $(LDADD) -lmpfr -lgmp -lm
EXTRA_DIST += fuzz/corpus fuzz/run-fuzzers
# The README's fuzzing build, in a copy of the tree (expensive).
TESTS += tests/tfuzzbuild.sh
EXTRA_DIST += tests/tfuzzbuild.sh
FUZZ_SECONDS = 60

.PHONY: fuzz
if AA_FUZZING
# BUILT_SOURCES (lib/githash.h, ...) are made for all and check only: made
# first here, so that `make fuzz` works right after configure.
fuzz: $(BUILT_SOURCES)
	$(MAKE) $(AM_MAKEFLAGS) $(AA_FUZZERS)
	$(SHELL) $(srcdir)/fuzz/run-fuzzers $(srcdir)/fuzz/corpus $(FUZZ_SECONDS) $(AA_FUZZERS)
else
fuzz:
	@echo "make fuzz: this build has no fuzz harnesses; configure with CC=clang-14 --enable-fuzzing" >&2; exit 2
endif
