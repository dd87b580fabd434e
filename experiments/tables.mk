# attnacc: build fragment of the sweep and report side of the attnacc command (experiment registry, plots, their tests).
# SPDX-License-Identifier: LGPL-3.0-or-later
# The command's own folder (its includes name cli/..., xp/...), MPI's include
# flags for cmd/sweep.c (mpirun spreads cells over ranks), libjansson's
# (lib/common/json.h), and the folders where report/gnuplot.c looks for the
# gnuplot scripts (source tree first,
# then the installed copy).
experiments_attnacc_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/experiments $(MPI_CFLAGS) $(JANSSON_CFLAGS) \
	-DAA_PLOTS_SRCDIR='"$(abs_top_srcdir)/plots"' -DAA_PLOTS_DATADIR='"$(pkgdatadir)/plots"'
if HAVE_MPI
experiments_attnacc_LDADD += lib/sweep/libsweepmpi.la $(MPI_LIBS)
endif
plotsdir = $(pkgdatadir)/plots
dist_plots_DATA = plots/table4.gp plots/nanmap.gp plots/expratio.gp plots/dqbudget.gp plots/variants.gp plots/fp8rescale.gp plots/lowpmap.gp plots/lowpcast.gp
EXTRA_DIST += experiments/README-sweep.md experiments/README-fp8.md
TESTS += tests/tsweepcmd.sh tests/treport.sh tests/tsweepxp.sh tests/tvariant.sh tests/tfp8_rescale.sh tests/tlowpmap.sh
EXTRA_DIST += tests/tsweepcmd.sh tests/treport.sh tests/tsweepxp.sh tests/tvariant.sh tests/tfp8_rescale.sh tests/tlowpmap.sh
# the sweep folder: temporaries, refused shards, busy folders, symlinked journals
TESTS += tests/tsweepfolder.sh
EXTRA_DIST += tests/tsweepfolder.sh
