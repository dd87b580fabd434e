# attnacc: build fragment of the benchmark programs (make bench); add a program to EXTRA_PROGRAMS and AA_BENCHES.
# SPDX-License-Identifier: LGPL-3.0-or-later
# bench/bench-util.h: the clock and the median the benchmarks share (ATTNACC_BENCH_CLOCK=cpu: the process
# CPU-time clock, for single-threaded runs on a shared machine). bench/README.md: the CPU speed targets
# (tensor-core models >= 0.25x sgemm, fa2-h100 <= 2x fa2), measured, and why the first is out of reach.
EXTRA_DIST += bench/bench-util.h bench/README.md bench/bench_score_cuda.py
AA_BENCHES =
# The GPU benchmarks (built in lib/oracle, lib/gemm and lib/attn) in a CUDA build; without a GPU they exit 77,
# which make bench skips.
if HAVE_CUDA
AA_BENCHES += bench/bench_oracle_cuda bench/bench_gemm_cuda bench/bench_attn_cuda
endif

# aa_gemm on the five attention-backward shapes (n = 8192, d = 128 by default;
# `bench/bench_gemm 1024` for a quick run), against OpenBLAS sgemm when found:
# sgemm and every model alternate within each repetition, and the closing
# tables give each model's throughput over sgemm's and over fp32-seq's
# (medians of the per-repetition ratios), e.g. for the tensor-core models
# `bench/bench_gemm 4096 128 5 fp32-seq,tc-k16-f25,tc-k8-f24`.
EXTRA_PROGRAMS += bench/bench_gemm
AA_BENCHES += bench/bench_gemm
bench_bench_gemm_SOURCES = bench/bench_gemm.c
bench_bench_gemm_LDADD = $(LDADD) -lm
if HAVE_OPENBLAS
bench_bench_gemm_LDADD += -lopenblas
endif
CLEANFILES += bench/bench_gemm

# The oracle's fast path at n = 1024..8192 (d = 128, one head, BF16 normal
# inputs), with the plain-MPFR estimate; `bench/bench_oracle 32768` adds n.
EXTRA_PROGRAMS += bench/bench_oracle
AA_BENCHES += bench/bench_oracle
bench_bench_oracle_SOURCES = bench/bench_oracle.c
bench_bench_oracle_LDADD = $(LDADD) -lmpfr -lgmp -lm
CLEANFILES += bench/bench_oracle
# `attnacc score` cold (oracle computed), warm (oracle from --cache), with and without the naive reference, and
# --rows K, at [2, 8, 1024, 128] and [1, 16, 4096, 64] by default (medians of --reps R runs): run from the build
# root, `bench/bench_score --reps 3 --phases 2,8,1024,128` (--phases: where a cold score's time goes).
EXTRA_PROGRAMS += bench/bench_score
AA_BENCHES += bench/bench_score
bench_bench_score_SOURCES = bench/bench_score.c
bench_bench_score_LDADD = $(LDADD) -lmpfr -lgmp -lm
CLEANFILES += bench/bench_score
EXTRA_PROGRAMS += bench/bench_exp
AA_BENCHES += bench/bench_exp

# Whole recipes side by side (forward + backward, one head, d = 128, n = 8192
# by default): `bench/bench_attn 8192 128 1 fa2,fa2-h100` gives fa2-h100's
# emulation time as a multiple of fa2's.
EXTRA_PROGRAMS += bench/bench_attn
AA_BENCHES += bench/bench_attn
bench_bench_attn_SOURCES = bench/bench_attn.c
bench_bench_attn_LDADD = $(LDADD) -lm
CLEANFILES += bench/bench_attn

# The H200's MUFU.EX2 / MUFU.LG2 tables of lib/exp/sm90.c against the device dumps of
# fixtures/h200-fa2/mufu.cu (not stored: 48 MiB): `bench/sfu_fit check DIR` prints the
# match rates over all 2^23 outputs of each, `fit DIR ex2|lg2` re-derives a table.
EXTRA_PROGRAMS += bench/sfu_fit
AA_BENCHES += bench/sfu_fit
bench_sfu_fit_SOURCES = bench/sfu_fit.c
bench_sfu_fit_LDADD = $(LDADD) -lm
CLEANFILES += bench/sfu_fit
