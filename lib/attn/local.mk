# attnacc: build fragment of the attn module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/attn.h
lib_libattnacc_core_la_SOURCES += lib/attn/attn-impl.h lib/attn/common.c lib/attn/forward.c lib/attn/backward.c \
	lib/attn/run.c lib/attn/forward_fixed.c lib/attn/backward_recip.c lib/attn/fp8.c lib/attn/quant.c
lib_libattnacc_core_la_SOURCES += lib/attn/forward_split.c lib/attn/varlen.c lib/attn/dispatch.c
lib_libattnacc_core_la_SOURCES += lib/attn/first.c lib/attn/vendor_order.c
lib_libattnacc_core_la_SOURCES += lib/attn/attn-core.h lib/attn/attn-bwd-core.h lib/attn/attn-cuda.h lib/attn/cuda.c \
  lib/attn/cuda_fixed.c \
  lib/attn/cuda_bwd.c

# The GPU emulation (configure --with-cuda): its kernels in one .cu compiled by nvcc and wrapped as a libtool object
# by Makefile.am's .cu.lo rule. Without CUDA, cuda.c finds no device and the CPU runs every pass.
EXTRA_DIST += lib/attn/attn_cuda_kern.cu
if HAVE_CUDA
lib_libattnacc_core_la_LIBADD += lib/attn/attn_cuda_kern.lo
# built by the .cu.lo rule of Makefile.am
lib/attn/attn_cuda_kern.lo: $(srcdir)/lib/attn/attn-core.h $(srcdir)/lib/attn/attn-bwd-core.h $(srcdir)/lib/attn/attn-cuda.h $(srcdir)/lib/gemm/tc-core.h \
	  $(srcdir)/lib/exp/sm90-core.h $(srcdir)/lib/exp/quad-core.h $(srcdir)/lib/reduce/fixed-core.h $(srcdir)/lib/hd.h
CLEANFILES += lib/attn/attn_cuda_kern.lo lib/attn/attn_cuda_kern.o lib/attn/.libs/attn_cuda_kern.o
endif

check_PROGRAMS += tests/tattn tests/tattn_micro tests/tnorm tests/tkernel_presets
TESTS += tests/tattn tests/tattn_micro tests/tnorm tests/tkernel_presets
tests_tkernel_presets_SOURCES = tests/tkernel_presets.c
tests_tkernel_presets_LDADD = $(LDADD) -lm
tests_tnorm_SOURCES = tests/tnorm.c
TESTS += tests/tnormmap.sh
EXTRA_DIST += tests/tnormmap.sh
tests_tattn_SOURCES = tests/tattn.c
tests_tattn_micro_SOURCES = tests/tattn_micro.c
check_PROGRAMS += tests/texp_attn
TESTS += tests/texp_attn
tests_texp_attn_SOURCES = tests/texp_attn.c
tests_texp_attn_LDADD = $(LDADD) -lm
# The problem features (softcap, ALiBi, alignment, windows) in the emulation: binary64 recipes against the oracle.
check_PROGRAMS += tests/tattn_features
TESTS += tests/tattn_features
tests_tattn_features_SOURCES = tests/tattn_features.c
tests_tattn_features_LDADD = $(LDADD) -lmpfr -lgmp -lm
# The kernel presets against H200 rel_l2 (fixtures/h200-kernels; experiments/README-gpu.md section 5).
TESTS += tests/tkernel_gpu.sh
EXTRA_DIST += tests/tkernel_gpu.sh fixtures/h200-kernels/h200-c1.tsv fixtures/h200-kernels/cases.txt \
	fixtures/h200-kernels/gpu_kernels.py fixtures/h200-kernels/make_inputs.sh fixtures/h200-kernels/predict.sh \
	fixtures/h200-kernels/compare.sh fixtures/h200-kernels/rel_l2.tsv fixtures/h200-kernels/predicted.tsv \
	fixtures/h200-kernels/triton_tutorial.py fixtures/h200-kernels/triton-tutorial-bf16.recipe \
	fixtures/h200-kernels/triton-rel_l2.tsv fixtures/h200-kernels/triton-predicted.tsv
# FA2 kernel dispatch (lib/attn/dispatch.c): against the launch code and the H200's launches.
check_PROGRAMS += tests/tdispatch
TESTS += tests/tdispatch
tests_tdispatch_SOURCES = tests/tdispatch.c
# aa_attn_run's steps and their one cleanup (lib/attn/run.c).
check_PROGRAMS += tests/tattn_run
TESTS += tests/tattn_run
tests_tattn_run_SOURCES = tests/tattn_run.c
# NaN and Inf of the H200 backends over masks and magnitudes (experiments/README-gpu.md section 8; raw data: a
# first grid and a held-out one), and the presets' census of the same cells (predict.py runs nan_census, built on
# demand: make fixtures/h200-nan/nan_census).
EXTRA_DIST += fixtures/h200-nan/collect.py fixtures/h200-nan/nan.json fixtures/h200-nan/nan_heldout.json \
	fixtures/h200-nan/nan_heldout2.json \
	fixtures/h200-nan/nan_dsweep.json fixtures/h200-nan/nan_heldout3.json fixtures/h200-nan/nan_dsweep_predicted.json \
	fixtures/h200-nan/nan_heldout3_predicted.json fixtures/h200-nan/nan_heldout4.json fixtures/h200-nan/nan_heldout4_predicted.json fixtures/h200-nan/probe_scale.py fixtures/h200-nan/causal_rows.py \
	fixtures/h200-nan/probe_sass_efficient.sh fixtures/h200-nan/probe_sass_efficient.py \
	fixtures/h200-nan/predict.py fixtures/h200-nan/predict_cpu.py fixtures/h200-nan/probe_fill.py fixtures/h200-nan/probe_rowmask.py \
	fixtures/h200-nan/probe_flex_order.py fixtures/h200-nan/flex_order.py fixtures/h200-nan/sum_orders.py fixtures/h200-nan/placeholder.py \
	fixtures/h200-nan/probe_flex.npz fixtures/h200-nan/probe_flex2.npz fixtures/h200-nan/probe_flex3.npz \
	fixtures/h200-nan/nan_heldout5_predicted.json \
	fixtures/h200-nan/nan_heldout6_predicted.json fixtures/h200-nan/nan_heldout5.json fixtures/h200-nan/nan_heldout6.json \
	fixtures/h200-nan/nan_heldout7.json fixtures/h200-nan/nan_heldout7_predicted.json fixtures/h200-nan/nan_heldout8.json \
	fixtures/h200-nan/nan_heldout8_predicted.json fixtures/h200-nan/nan_heldout9.json \
	fixtures/h200-nan/nan_heldout9_predicted.json fixtures/h200-nan/nan_heldout10_predicted.json \
	fixtures/h200-nan/compare_predicted.py fixtures/h200-nan/probe_cells.py fixtures/h200-nan/cells_flex.npz \
	fixtures/h200-nan/flex_decode_lse.py fixtures/h200-nan/probe_gemv.py fixtures/h200-nan/probe_cudnn_order.py \
	fixtures/h200-nan/probe_cudnn.npz fixtures/h200-nan/cudnn_order.py fixtures/h200-nan/probe_cudnn_bias.py \
	fixtures/h200-nan/probe_cudnn_bias.npz fixtures/h200-nan/cudnn_bias.py
EXTRA_PROGRAMS += fixtures/h200-nan/nan_census
fixtures_h200_nan_nan_census_SOURCES = fixtures/h200-nan/nan_census.c
# FP8 (E4M3) mma.sync chains and torch._scaled_mm on the H200 (experiments/README-gpu.md; raw data programs).
EXTRA_DIST += fixtures/h200-fp8/fp8_gen.h fixtures/h200-fp8/mma_chain_fp8.cu fixtures/h200-fp8/run.sh \
	fixtures/h200-fp8/scaled_mm.py fixtures/h200-fp8/scaled_mm.json fixtures/h200-fp8/sass.txt
# The quant.* keys: operands quantised as the test does, where P and dS quantisation act.
check_PROGRAMS += tests/tattn_quant
TESTS += tests/tattn_quant
tests_tattn_quant_SOURCES = tests/tattn_quant.c
tests_tattn_quant_LDADD = $(LDADD) -lm
# The FP8 P cast of fa4-fp8 (satfinite, the stale-max overflow) against closed forms.
check_PROGRAMS += tests/tattn_fp8_sat
TESTS += tests/tattn_fp8_sat
tests_tattn_fp8_sat_SOURCES = tests/tattn_fp8_sat.c
tests_tattn_fp8_sat_LDADD = $(LDADD) -lm
check_PROGRAMS += tests/tattn_pcast
TESTS += tests/tattn_pcast
tests_tattn_pcast_SOURCES = tests/tattn_pcast.c
tests_tattn_pcast_LDADD = $(LDADD) -lm
# Where a run's first NaN or Inf is created (aa_attn_result_t.first, lib/attn/first.c).
check_PROGRAMS += tests/tattn_first
TESTS += tests/tattn_first
tests_tattn_first_SOURCES = tests/tattn_first.c

# The GPU emulation's per-row code on host threads against the CPU emulation (every build: no GPU needed).
check_PROGRAMS += tests/tattn_cuda_emu
TESTS += tests/tattn_cuda_emu
tests_tattn_cuda_emu_SOURCES = tests/tattn_cuda_emu.c tests/tattn_cuda_cases.h
tests_tattn_cuda_emu_LDADD = $(LDADD) -lm

# The GPU emulation against the CPU's bits (exits 77 without CUDA or a GPU; build-aux/device-check runs it).
check_PROGRAMS += tests/tattn_cuda
TESTS += tests/tattn_cuda
tests_tattn_cuda_SOURCES = tests/tattn_cuda.c tests/tattn_cuda_cases.h
tests_tattn_cuda_LDADD = $(LDADD) -lm

# The GPU emulation's time beside the CPU's on the same problem (`bench/bench_attn_cuda [N D [REPS [CPU_MAX_N [PRESET]]]]`);
# CUDA builds only.
if HAVE_CUDA
EXTRA_PROGRAMS += bench/bench_attn_cuda
bench_bench_attn_cuda_SOURCES = bench/bench_attn_cuda.c
bench_bench_attn_cuda_LDADD = $(LDADD) -lm
CLEANFILES += bench/bench_attn_cuda
endif
EXTRA_DIST += bench/bench_attn_cuda.c
