# attnacc: build fragment of the sweep module (grids of cells, resumable sharded results, oracle cache).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/sweep.h
lib_libattnacc_core_la_SOURCES += lib/sweep/internal.h lib/sweep/hash.c lib/sweep/grid.c lib/sweep/rows.c \
  lib/sweep/journal.c lib/sweep/folder.c lib/sweep/lock.c lib/sweep/run.c lib/sweep/progress.c lib/sweep/ocache.c \
  lib/sweep/ocache_run.c

check_PROGRAMS += tests/tsweep tests/tsweep_kill tests/tsweep_ocache
TESTS += tests/tsweep tests/tsweep_kill tests/tsweep_ocache
EXTRA_DIST += tests/tsweep_synth.h
tests_tsweep_SOURCES = tests/tsweep.c tests/tsweep_synth.c
tests_tsweep_LDADD = $(LDADD) -lgmp -lm
tests_tsweep_kill_SOURCES = tests/tsweep_kill.c tests/tsweep_synth.c
tests_tsweep_kill_LDADD = $(LDADD) -lm
tests_tsweep_ocache_SOURCES = tests/tsweep_ocache.c
tests_tsweep_ocache_LDADD = $(LDADD) -lm

# MPI (configure --with-mpi): the rank-spreading variant (lib/sweep/sweep-mpi.h) is
# compiled with MPI's flags in a convenience library that only the attnacc
# command and its test link, so libattnacc never needs libmpi.
if HAVE_MPI
noinst_LTLIBRARIES += lib/sweep/libsweepmpi.la
lib_sweep_libsweepmpi_la_SOURCES = lib/sweep/mpi.c lib/sweep/sweep-mpi.h
lib_sweep_libsweepmpi_la_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
check_PROGRAMS += tests/tsweep_mpi
tests_tsweep_mpi_SOURCES = tests/tsweep_mpi.c tests/tsweep_synth.c
tests_tsweep_mpi_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
tests_tsweep_mpi_LDADD = lib/sweep/libsweepmpi.la $(LDADD) $(MPI_LIBS) -lm
endif
EXTRA_DIST += lib/sweep/mpi.c lib/sweep/sweep-mpi.h tests/tsweep_mpi.c
TESTS += tests/tsweep_mpi.sh
EXTRA_DIST += tests/tsweep_mpi.sh
AM_TESTS_ENVIRONMENT += MPIRUN='$(MPIRUN)'; export MPIRUN;
