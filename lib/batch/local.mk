# attnacc: build fragment of the batch module (FA2's launch decisions for a padded batch).
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/batch.h
lib_libattnacc_core_la_SOURCES += lib/batch/batch.c

check_PROGRAMS += tests/tinvariance
TESTS += tests/tinvariance
tests_tinvariance_SOURCES = tests/tinvariance.c
TESTS += tests/tinvariance_cmd.sh
EXTRA_DIST += tests/tinvariance_cmd.sh
# The H200's batch runs (fixtures/h200-batch, collect.py; fixtures/MANIFEST lists the .npy files).
TESTS += tests/tinvariance_gpu.sh
EXTRA_DIST += tests/tinvariance_gpu.sh fixtures/h200-batch/collect.py fixtures/h200-batch/compare.py \
	fixtures/h200-batch/run.sh fixtures/h200-batch/summary.json fixtures/h200-batch/collect.txt \
	fixtures/h200-batch/PREDICTIONS.txt fixtures/h200-batch/compare.txt \
	fixtures/h200-batch/q1-k16384-gqa-dense.npy \
	fixtures/h200-batch/q1-k16384-mha-dense.npy \
	fixtures/h200-batch/q1-k4096-gqa-dense.npy \
	fixtures/h200-batch/q1-k4096-mha-dense.npy \
	fixtures/h200-batch/q1-k512-gqa-dense.npy \
	fixtures/h200-batch/q1-k512-mha-dense.npy \
	fixtures/h200-batch/q1000-k16384-gqa-causal.npy \
	fixtures/h200-batch/q1000-k16384-gqa-dense.npy \
	fixtures/h200-batch/q1000-k16384-mha-causal.npy \
	fixtures/h200-batch/q1000-k16384-mha-dense.npy \
	fixtures/h200-batch/q1000-k16384-mha16-causal.npy \
	fixtures/h200-batch/q1000-k16384-mha16-dense.npy \
	fixtures/h200-batch/q1000-k4096-gqa-causal.npy \
	fixtures/h200-batch/q1000-k4096-gqa-dense.npy \
	fixtures/h200-batch/q1000-k4096-mha-causal.npy \
	fixtures/h200-batch/q1000-k4096-mha-dense.npy \
	fixtures/h200-batch/q1000-k4096-mha16-causal.npy \
	fixtures/h200-batch/q1000-k4096-mha16-dense.npy \
	fixtures/h200-batch/q1000-k512-gqa-causal.npy \
	fixtures/h200-batch/q1000-k512-gqa-dense.npy \
	fixtures/h200-batch/q1000-k512-mha-causal.npy \
	fixtures/h200-batch/q1000-k512-mha-dense.npy \
	fixtures/h200-batch/q1000-k512-mha16-causal.npy \
	fixtures/h200-batch/q1000-k512-mha16-dense.npy \
	fixtures/h200-batch/q128-k16384-gqa-causal.npy \
	fixtures/h200-batch/q128-k16384-gqa-dense.npy \
	fixtures/h200-batch/q128-k16384-mha-causal.npy \
	fixtures/h200-batch/q128-k16384-mha-dense.npy \
	fixtures/h200-batch/q128-k4096-gqa-causal.npy \
	fixtures/h200-batch/q128-k4096-gqa-dense.npy \
	fixtures/h200-batch/q128-k4096-mha-causal.npy \
	fixtures/h200-batch/q128-k4096-mha-dense.npy \
	fixtures/h200-batch/q128-k512-gqa-causal.npy \
	fixtures/h200-batch/q128-k512-gqa-dense.npy \
	fixtures/h200-batch/q128-k512-mha-causal.npy \
	fixtures/h200-batch/q128-k512-mha-dense.npy
