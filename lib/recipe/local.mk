# attnacc: build fragment of the recipe module.
# SPDX-License-Identifier: LGPL-3.0-or-later
attnaccinclude_HEADERS += lib/recipe.h
lib_libattnacc_core_la_SOURCES += lib/recipe/recipe-impl.h lib/recipe/keys.c lib/recipe/presets.c lib/recipe/parse.c \
	lib/recipe/check.c lib/recipe/spec.c lib/recipe/when.c
EXTRA_DIST += lib/recipe/KEYS.md

# The presets are recipe files, compiled in as strings (in this order: the
# order of `attnacc list`).
AA_PRESET_FILES = lib/recipe/presets/nki.recipe lib/recipe/presets/nki-bf16.recipe lib/recipe/presets/fa2.recipe \
	lib/recipe/presets/fa2-h100.recipe lib/recipe/presets/fa2-h100-bi.recipe lib/recipe/presets/recip.recipe lib/recipe/presets/recip-causal.recipe \
	lib/recipe/presets/fa2-atomic.recipe lib/recipe/presets/fa2-fixed.recipe lib/recipe/presets/tlx-dq.recipe \
	lib/recipe/presets/tlx-dq-causal.recipe lib/recipe/presets/tlx-exp.recipe lib/recipe/presets/tlx.recipe \
	lib/recipe/presets/tlx-causal.recipe lib/recipe/presets/naive-bf16.recipe lib/recipe/presets/exact-fp64.recipe \
	lib/recipe/presets/efficient-h100.recipe lib/recipe/presets/cudnn-h100.recipe lib/recipe/presets/flex-h100.recipe \
	lib/recipe/presets/flex-eager-h100.recipe \
	lib/recipe/presets/fa3-fp8.recipe lib/recipe/presets/fa4.recipe lib/recipe/presets/fa4-fp8.recipe lib/recipe/presets/fa4-mxfp8.recipe lib/recipe/presets/fa4-nvfp4.recipe lib/recipe/presets/sage2.recipe lib/recipe/presets/sage2pp.recipe lib/recipe/presets/sage3.recipe \
	lib/recipe/presets/triton-tutorial.recipe
EXTRA_DIST += $(AA_PRESET_FILES) lib/recipe/presets-gen.awk

# Candidate readings of the TLX kernel (experiments/RESULTS.md, "TLX readings").
EXTRA_DIST += recipes/tlx-readings/README.md recipes/tlx-readings/dense-tree128.recipe \
	recipes/tlx-readings/dense-chain128.recipe recipes/tlx-readings/dense-chain256.recipe \
	recipes/tlx-readings/dense-fwd-packed-only.recipe recipes/tlx-readings/causal-packed.recipe \
	recipes/tlx-readings/causal-native.recipe recipes/tlx-readings/causal-native-lse.recipe
nodist_lib_libattnacc_core_la_SOURCES = lib/recipe/presets-text.c
BUILT_SOURCES += lib/recipe/presets-text.c
CLEANFILES += lib/recipe/presets-text.c
lib/recipe/presets-text.c: $(AA_PRESET_FILES) $(srcdir)/lib/recipe/presets-gen.awk
	$(AM_V_GEN)$(MKDIR_P) lib/recipe && cd $(srcdir) && $(AWK) -f lib/recipe/presets-gen.awk $(AA_PRESET_FILES) \
	  > $(abs_builddir)/lib/recipe/presets-text.c.tmp && mv $(abs_builddir)/lib/recipe/presets-text.c.tmp $(abs_builddir)/lib/recipe/presets-text.c

check_PROGRAMS += tests/trecipe
TESTS += tests/trecipe
tests_trecipe_SOURCES = tests/trecipe.c

# Conditional keys (`when COND: key = value`): parsing, errors, resolution.
check_PROGRAMS += tests/trecipe_when
TESTS += tests/trecipe_when
tests_trecipe_when_SOURCES = tests/trecipe_when.c

# Regression guard: every preset's canonical text against tests/data/presets.
check_PROGRAMS += tests/tpresets
TESTS += tests/tpresets
tests_tpresets_SOURCES = tests/tpresets.c
# ... and what each preset computes: output checksums on five small problems against tests/data/preset_bits.txt.
check_PROGRAMS += tests/tpreset_bits
TESTS += tests/tpreset_bits
tests_tpreset_bits_SOURCES = tests/tpreset_bits.c
# ... and where the H200 presets make NaN and Inf: all-constant inputs, counts of fixtures/h200-nan/nan.json cells.
check_PROGRAMS += tests/tnan_presets
TESTS += tests/tnan_presets
tests_tnan_presets_SOURCES = tests/tnan_presets.c
# ... and the vendor-library summation orders behind flex-eager-h100's dS (torch.sum, cuBLAS GEMV) as the H200 took them.
check_PROGRAMS += tests/tvendor_order
TESTS += tests/tvendor_order
tests_tvendor_order_SOURCES = tests/tvendor_order.c
# ... and cudnn-h100's exp and LSE chains against cuDNN's own LSE and overflow (masked and unmasked graphs).
check_PROGRAMS += tests/tcudnn_lse
TESTS += tests/tcudnn_lse
tests_tcudnn_lse_SOURCES = tests/tcudnn_lse.c
# ... and flex-eager-h100's scores of one query row (cuBLAS's GEMV order) against FlexAttention's own LSE.
check_PROGRAMS += tests/tflex_decode_lse
TESTS += tests/tflex_decode_lse
tests_tflex_decode_lse_SOURCES = tests/tflex_decode_lse.c
EXTRA_DIST += tests/data/presets tests/data/preset_bits.txt tests/data/h200_causal_rows.txt tests/data/h200_sum_orders.txt \
	tests/data/h200_cudnn_lse.txt tests/data/h200_flex_decode_lse.txt

# Guard of the preset recipe (HACKING.md): every preset file is in AA_PRESET_FILES, compiled in and stored;
# every recipe file under recipes/ ships and loads.
TESTS += tests/tpreset_files.sh
EXTRA_DIST += tests/tpreset_files.sh
