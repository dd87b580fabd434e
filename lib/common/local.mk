# attnacc: build fragment of the common module (status codes, errors, build identity, file and text utilities).
# SPDX-License-Identifier: LGPL-3.0-or-later
lib_libattnacc_core_la_SOURCES += lib/common/status.c lib/common/githash.c lib/common/parse.c \
  lib/common/common-impl.h lib/common/buf.c lib/common/csv.c lib/common/file.c lib/common/fileset.c \
  lib/common/json.h lib/common/json.c lib/common/gpu.c lib/common/clock.c
# JSON (the sweep's results.jsonl, the command's documents) is built with libjansson.
lib_libattnacc_core_la_LIBADD += $(JANSSON_LIBS)

# The git hash is taken at make time: lib/githash.h is regenerated on every
# make (a phony prerequisite) but rewritten only when the hash changes, so
# only githash.c recompiles after a commit.
BUILT_SOURCES += lib/githash.h
CLEANFILES += lib/githash.h
EXTRA_DIST += build-aux/githash
lib/githash.h: aa-githash-force
	@$(MKDIR_P) lib
	@$(SHELL) $(srcdir)/build-aux/githash $(srcdir) $@
.PHONY: aa-githash-force
aa-githash-force:

# Release tarballs carry the commit they were made from.
dist-hook: aa-dist-githash
aa-dist-githash:
	@$(SHELL) $(srcdir)/build-aux/githash $(srcdir) $(distdir)/githash.tmp && \
	  sed -n 's/^#define AA_GIT_HASH_TEXT "\(.*\)"$$/\1/p' $(distdir)/githash.tmp >$(distdir)/GITHASH && \
	  rm -f $(distdir)/githash.tmp
.PHONY: aa-dist-githash

check_PROGRAMS += tests/tcommon
TESTS += tests/tcommon
# The CSV writer (lib/common) is checked against the results reader (lib/sweep/folder.c), a second implementation.
tests_tcommon_SOURCES = tests/tcommon.c
check_PROGRAMS += tests/tcommon_file
TESTS += tests/tcommon_file
tests_tcommon_file_LDADD = $(LDADD) -lpthread
