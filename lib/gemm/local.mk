# attnacc: build fragment of the gemm module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/gemm.h
lib_libattnacc_core_la_SOURCES += lib/gemm/gemm-impl.h lib/gemm/accum.c lib/gemm/check.c lib/gemm/gemm.c lib/gemm/ref.c \
	lib/gemm/pair32.c lib/gemm/blocked.c lib/gemm/seq32.c lib/gemm/seq64.c
lib_libattnacc_core_la_SOURCES += lib/gemm/tc-impl.h lib/gemm/tc.c lib/gemm/tc32.c lib/gemm/promo.c lib/gemm/scaled.c
lib_libattnacc_core_la_SOURCES += lib/gemm/tc-core.h lib/gemm/gemm-cuda.h lib/gemm/cuda.c

# The GPU models (configure --with-cuda): the kernels in one .cu compiled by nvcc and wrapped as a libtool object by
# Makefile.am's .cu.lo rule; cudart comes with liboracle.la. Without CUDA, cuda.c says "not built with CUDA".
EXTRA_DIST += lib/gemm/gemm_cuda_kern.cu
if HAVE_CUDA
lib_libattnacc_core_la_LIBADD += lib/gemm/gemm_cuda_kern.lo
# built by the .cu.lo rule of Makefile.am
lib/gemm/gemm_cuda_kern.lo: $(srcdir)/lib/gemm/tc-core.h $(srcdir)/lib/gemm/gemm-cuda.h $(srcdir)/lib/hd.h
CLEANFILES += lib/gemm/gemm_cuda_kern.lo lib/gemm/gemm_cuda_kern.o lib/gemm/.libs/gemm_cuda_kern.o
endif

# The GPU models against the CPU's bits (exits 77 without CUDA or a GPU).
check_PROGRAMS += tests/tgemm_cuda
TESTS += tests/tgemm_cuda
tests_tgemm_cuda_SOURCES = tests/tgemm_cuda.c
tests_tgemm_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_tgemm_cuda_LDADD = $(LDADD) -lm

# The kernels' device code run on CPU threads against aa_gemm (every build: the logic checked without a GPU).
check_PROGRAMS += tests/tgemm_cuda_emu
TESTS += tests/tgemm_cuda_emu
tests_tgemm_cuda_emu_SOURCES = tests/tgemm_cuda_emu.cpp tests/cuda-emu.h
tests_tgemm_cuda_emu_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/lib/gemm
tests_tgemm_cuda_emu_LDADD = $(LDADD) -lpthread -lm

# GPU model throughput beside cuBLAS's BF16 rate (`bench/bench_gemm_cuda [M N K [REPS]]`; default 4096 4096 128 and
# the attention shapes); CUDA builds only.
if HAVE_CUDA
EXTRA_PROGRAMS += bench/bench_gemm_cuda
bench_bench_gemm_cuda_SOURCES = bench/bench_gemm_cuda.c
bench_bench_gemm_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
bench_bench_gemm_cuda_LDADD = $(LDADD) -ldl -lm
CLEANFILES += bench/bench_gemm_cuda
endif
EXTRA_DIST += bench/bench_gemm_cuda.c

check_PROGRAMS += tests/tgemm
TESTS += tests/tgemm
tests_tgemm_SOURCES = tests/tgemm.c
tests_tgemm_LDADD = $(LDADD) -lmpfr -lgmp -lm

check_PROGRAMS += tests/tgemm_tc
TESTS += tests/tgemm_tc
tests_tgemm_tc_SOURCES = tests/tgemm_tc.c
tests_tgemm_tc_CPPFLAGS = $(AM_CPPFLAGS) -DAA_TOP_SRCDIR='"$(abs_top_srcdir)"' # REFERENCES.md for the citations check
tests_tgemm_tc_LDADD = $(LDADD) -lmpfr -lgmp -lm

# Both gemm tests again on the paths of a build or CPU without AVX-512.
TESTS += tests/tgemm_portable.sh
EXTRA_DIST += tests/tgemm_portable.sh

# External check against H200 outputs (fixtures/h200-sdpa, experiments/README-gpu.md).
TESTS += tests/tgpu_agree.sh
EXTRA_DIST += tests/tgpu_agree.sh experiments/README-gpu.md fixtures/h200-sdpa/gpu_sdpa.py \
	fixtures/h200-sdpa/inputs/q.npy fixtures/h200-sdpa/inputs/k.npy fixtures/h200-sdpa/inputs/v.npy \
	fixtures/h200-sdpa/inputs/do.npy fixtures/h200-sdpa/flash-dense/o.npy fixtures/h200-sdpa/flash-dense/dq.npy \
	fixtures/h200-sdpa/flash-dense/dk.npy fixtures/h200-sdpa/flash-dense/dv.npy fixtures/h200-sdpa/flash-causal/o.npy \
	fixtures/h200-sdpa/flash-causal/dq.npy fixtures/h200-sdpa/flash-causal/dk.npy fixtures/h200-sdpa/flash-causal/dv.npy \
	fixtures/h200-sdpa/flash-dense/lse.npy fixtures/h200-sdpa/flash-causal/lse.npy

check_PROGRAMS += tests/tmma_sm90
TESTS += tests/tmma_sm90
tests_tmma_sm90_SOURCES = tests/tmma_sm90.c
tests_tmma_sm90_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/fixtures/h200-fa2
tests_tmma_sm90_LDADD = $(LDADD) -lm
EXTRA_DIST += fixtures/h200-fa2/mma.npy fixtures/h200-fa2/mma_gen.h fixtures/h200-fa2/mma_chain.cu \
	fixtures/h200-fa2/mma_fit.c fixtures/h200-fa2/ckpt_diag.py \
	fixtures/h200-fa2/run_diag.sh fixtures/h200-fa2/run3.sh fixtures/h200-fa2/agree.py fixtures/h200-fa2/agree.sh \
	fixtures/h200-fa2/probe_tc_overflow.py

check_PROGRAMS += tests/tmma_fp8
TESTS += tests/tmma_fp8
tests_tmma_fp8_SOURCES = tests/tmma_fp8.c
tests_tmma_fp8_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/fixtures/h200-fp8
tests_tmma_fp8_LDADD = $(LDADD) -lm
EXTRA_DIST += fixtures/h200-fp8/mma_f32.npy fixtures/h200-fp8/mma_f16.npy fixtures/h200-fp8/scaled_mm_ops.npy \
	fixtures/h200-fp8/scaled_mm_out.npy fixtures/h200-fp8/fp8_gen.h fixtures/h200-fp8/mma_chain_fp8.cu \
	fixtures/h200-fp8/pack.py fixtures/h200-fp8/run.sh fixtures/h200-fp8/sass.txt fixtures/h200-fp8/scaled_mm.py \
	fixtures/h200-fp8/scaled_mm.json fixtures/h200-fp8/fit_fp8.c fixtures/h200-fp8/fit_scaled_mm.py \
	fixtures/h200-fp8/splitk_chain.npy fixtures/h200-fp8/splitk_ops.npy fixtures/h200-fp8/splitk_out.npy \
	fixtures/h200-fp8/splitk_probe.py fixtures/h200-fp8/pack_splitk.py fixtures/h200-fp8/fit_splitk.py \
	fixtures/h200-fp8/splitk.json fixtures/h200-fp8/splitk_n32.json
