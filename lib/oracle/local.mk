# attnacc: build fragment of the oracle module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/oracle.h
# The oracle is its own convenience library for one flag: -ffp-contract=off, so that no compiler fuses a * b + c
# where the code does not write fma: the bits of the fast path then do not depend on the machine's vector clone,
# and the CUDA kernels (nvcc -fmad=false) give the same bits as the CPU rows kernel (lib/oracle/ddcore.h).
noinst_LTLIBRARIES += lib/liboracle.la
lib_liboracle_la_CFLAGS = $(AM_CFLAGS) $(AA_FP_CFLAGS)
lib_liboracle_la_SOURCES = lib/oracle/oracle-impl.h lib/oracle/ddcore.h lib/oracle/fast-common.h lib/oracle/oracle.c \
	lib/oracle/round.c lib/oracle/ddexp.c lib/oracle/mpeng.c lib/oracle/fast.c lib/oracle/fast_rows.c lib/oracle/dot.c
lib_liboracle_la_SOURCES += lib/oracle/estimate.c lib/oracle/varlen.c lib/oracle/oracle-cuda.h
lib_libattnacc_core_la_LIBADD += lib/liboracle.la

# Optional GPU fast path (configure --with-cuda): the kernels in one .cu compiled by nvcc, wrapped as a libtool
# object by Makefile.am's .cu.lo rule (libtool does not know nvcc), and the host side in C; cudart linked statically.
EXTRA_DIST += lib/oracle/fast_cuda_kern.cu
dist_noinst_SCRIPTS += build-aux/device-check
if HAVE_CUDA
lib_liboracle_la_SOURCES += lib/oracle/fast_cuda.c
lib_liboracle_la_LIBADD = lib/oracle/fast_cuda_kern.lo $(CUDA_LIBS)
# built by the .cu.lo rule of Makefile.am
lib/oracle/fast_cuda_kern.lo: $(srcdir)/lib/oracle/ddcore.h $(srcdir)/lib/oracle/oracle-cuda.h
CLEANFILES += lib/oracle/fast_cuda_kern.lo lib/oracle/fast_cuda_kern.o lib/oracle/.libs/fast_cuda_kern.o
endif

# Tests: fast vs mpfr over masks/GQA/sinks/dropout, MPFR self-consistency,
# closed forms, finite differences, identities, kernels (dd exp, spans, rounding);
# the tiled fast kernel against the row-by-row one, bit for bit, and across thread counts.
check_PROGRAMS += tests/toracle tests/toracle_closed tests/toracle_kernels tests/toracle_tiled tests/toracle_target \
	tests/toracle_features tests/toracle_property tests/toracle_tier64 tests/toracle_round
TESTS += tests/toracle_kernels tests/toracle tests/toracle_closed tests/toracle_tiled tests/toracle_target \
	tests/toracle_features tests/toracle_property tests/toracle_tier64 tests/toracle_round
tests_toracle_SOURCES = tests/toracle.c
tests_toracle_LDADD = $(LDADD) -lmpfr -lgmp -lm
tests_toracle_closed_SOURCES = tests/toracle_closed.c
tests_toracle_closed_LDADD = $(LDADD) -lmpfr -lgmp -lm
tests_toracle_kernels_SOURCES = tests/toracle_kernels.c
tests_toracle_kernels_LDADD = $(LDADD) -lmpfr -lgmp -lm
tests_toracle_tiled_SOURCES = tests/toracle_tiled.c
tests_toracle_tiled_LDADD = $(LDADD) -lmpfr -lgmp -lm
EXTRA_DIST += tests/toracle_common.c
tests_toracle_target_SOURCES = tests/toracle_target.c
tests_toracle_target_LDADD = $(LDADD) -lmpfr -lgmp -lm
# the score features (softcap, ALiBi, alignment, two-sided windows): closed forms, an independent MPFR forward and its finite differences, fast vs mpfr vs rows.
tests_toracle_features_SOURCES = tests/toracle_features.c
tests_toracle_features_LDADD = $(LDADD) -lmpfr -lgmp -lm
# the certificate over the whole exponent range against an independent MPFR reference (tgeneric style).
tests_toracle_property_SOURCES = tests/toracle_property.c
tests_toracle_property_LDADD = $(LDADD) -lmpfr -lgmp -lm
# the binary64 tier of loose targets against the MPFR path at 256 bits, on adversarial inputs and thread counts.
tests_toracle_tier64_SOURCES = tests/toracle_tier64.c
tests_toracle_tier64_LDADD = $(LDADD) -lmpfr -lgmp -lm
# the BF16/FP32 rounding of a double and the settle's interval steps against MPFR and nextafter.
tests_toracle_round_SOURCES = tests/toracle_round.c
tests_toracle_round_LDADD = $(LDADD) -lmpfr -lgmp -lm
# the same through the command: huge logits, the range refusal of score (exit 2)
TESTS += tests/tcertificate.sh
EXTRA_DIST += tests/tcertificate.sh
# the GPU fast path against the CPU rows and tiled kernels, bit for bit (exits 77 without CUDA or GPU).
check_PROGRAMS += tests/toracle_cuda
TESTS += tests/toracle_cuda
tests_toracle_cuda_SOURCES = tests/toracle_cuda.c
tests_toracle_cuda_LDADD = $(LDADD) -lmpfr -lgmp -lm
# k_dots' device code on CPU threads against the kernels' per-pair path, bit for bit (every build; no GPU needed).
check_PROGRAMS += tests/toracle_cuda_emu
TESTS += tests/toracle_cuda_emu
tests_toracle_cuda_emu_SOURCES = tests/toracle_cuda_emu.cpp tests/cuda-emu.h
tests_toracle_cuda_emu_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/lib/oracle
tests_toracle_cuda_emu_CXXFLAGS = $(AM_CXXFLAGS) $(AA_FP_CFLAGS)
tests_toracle_cuda_emu_LDADD = $(LDADD) -lpthread -lm

# The GPU oracle beside the CPU's (`bench/bench_oracle_cuda [N_GPU [N_CPU [E]]]`, default 32768 and 8192); in make
# bench of a CUDA build (bench/local.mk).
EXTRA_PROGRAMS += bench/bench_oracle_cuda
bench_bench_oracle_cuda_SOURCES = bench/bench_oracle_cuda.c
bench_bench_oracle_cuda_LDADD = $(LDADD) -lmpfr -lgmp -lm
CLEANFILES += bench/bench_oracle_cuda
