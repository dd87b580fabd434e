#!/bin/sh
# attnacc: run the Python package's pytest files (tests/test_python.py, test_verdict.py, ...) on the build tree's libattnacc; 77 when python3-numpy, python3-torch or python3-pytest is missing.
# SPDX-License-Identifier: LGPL-3.0-or-later
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
py=
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$cand" ] || continue
  if "$cand" -c 'import numpy, torch, pytest' >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  echo "SKIP: no python3 with numpy, torch and pytest (apt-get install python3-numpy python3-torch python3-pytest)"
  exit 77
fi
# A sanitizer build's libattnacc.so needs the sanitizer runtime in the
# process, which the Python interpreter does not have: the Python tests run
# in the plain gcc and clang builds.
if [ -n "${AA_SAN_CFLAGS:-}" ]; then
  echo "SKIP: libattnacc is built with sanitizers ($AA_SAN_CFLAGS), which python3 cannot load"
  exit 77
fi
lib="$top_builddir/lib/.libs/libattnacc.so"
[ -f "$lib" ] || { echo "FAIL tpython: $lib was not built"; exit 1; }
ATTNACC_LIB=$lib
ATTNACC_CLI="$top_builddir/experiments/attnacc"
PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export ATTNACC_LIB ATTNACC_CLI PYTHONPATH OMP_NUM_THREADS
"$py" -c 'import sys, numpy, torch; print("python", sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__)'
exec "$py" -m pytest -q -p no:cacheprovider "$top_srcdir/tests/test_python.py" "$top_srcdir/tests/test_python_args.py" \
  "$top_srcdir/tests/test_python_invariance.py" "$top_srcdir/tests/test_python_masks.py" "$top_srcdir/tests/test_verdict.py" \
  "$top_srcdir/tests/test_python_parity.py"
