# attnacc: build fragment of the Python package (python/attnacc, ctypes over libattnacc) and its test.
# SPDX-License-Identifier: LGPL-3.0-or-later
EXTRA_DIST += python/attnacc/__init__.py python/attnacc/_lib.py python/attnacc/invariance.py tests/test_python_invariance.py tests/test_python_masks.py tests/test_python_parity.py tests/test_python.py tests/test_verdict.py tests/verdict_kernels.py experiments/verdict_bands.py tests/tpython.sh tests/tscore_verdict.sh
TESTS += tests/tpython.sh tests/tscore_verdict.sh
if HAVE_PYTHON
attnaccpydir = $(pythondir)/attnacc
attnaccpy_PYTHON = python/attnacc/__init__.py python/attnacc/_lib.py python/attnacc/invariance.py
# The installed package finds the installed library through _installed.py (LIBDIR).
install-data-hook: install-attnacc-py-libdir
install-attnacc-py-libdir:
	$(MKDIR_P) '$(DESTDIR)$(attnaccpydir)'
	printf '"""attnacc: where make install put libattnacc."""\nLIBDIR = %s\n' "'$(libdir)'" >'$(DESTDIR)$(attnaccpydir)/_installed.py'
uninstall-local: uninstall-attnacc-py-libdir
uninstall-attnacc-py-libdir:
	rm -f '$(DESTDIR)$(attnaccpydir)/_installed.py'
endif
.PHONY: install-attnacc-py-libdir uninstall-attnacc-py-libdir
AM_TESTS_ENVIRONMENT += PYTHON='$(PYTHON)'; export PYTHON;
