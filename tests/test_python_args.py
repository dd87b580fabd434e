"""attnacc: the Python package's argument checks, up-front resource limits and library ABI check (run by tests/tpython.sh)."""
# SPDX-License-Identifier: LGPL-3.0-or-later
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import attnacc  # noqa: E402
from attnacc import _lib  # noqa: E402

ABI = getattr(_lib, "ABI_VERSION", 1)  # (a package without it fails the tests below, not their collection)


def small():
    gen = torch.Generator().manual_seed(20261202)
    q, k, v, do = (torch.randn(1, 2, 8, 4, generator=gen) for _ in range(4))
    return q, k, v, do


def run_python(code, limit_bytes=None):
    """code in a fresh interpreter (a crash there must not take pytest down), optionally under an address-space
    limit so that a conversion the package failed to refuse fails with MemoryError instead of paging the machine."""
    pre = None
    if limit_bytes is not None:
        import resource

        def pre():
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          preexec_fn=pre)


def refused(exc, pattern, **kw):
    q, k, v, do = small()
    with pytest.raises(exc, match=pattern) as e:
        attnacc.score(q, k, v, do, o=q, **{"layout": "bhnd", **kw})
    assert str(e.value).startswith("attnacc: "), str(e.value)


def test_threads_bounded_as_the_command():
    # Unchecked, threads=100000 reached OpenMP, which killed the interpreter while spawning them.
    r = run_python("""
        import torch, attnacc
        q = torch.randn(1, 2, 8, 4)
        try:
            attnacc.score(q, q, q, q, o=q, layout="bhnd", threads=100000)
        except ValueError as e:
            print("REFUSED", e)
    """)
    assert r.returncode == 0 and "REFUSED attnacc: threads = 100000 is outside [0, 4096]" in r.stdout, \
        (r.returncode, r.stdout, r.stderr[-500:])
    refused(ValueError, "threads = -1", threads=-1)
    refused(TypeError, "threads must be an integer", threads=2.5)


def test_window_size_does_not_wrap():
    # 2**70 + 1 wrapped through size_t to window 1: a different problem, scored without a word.
    refused(ValueError, r"window_size\[0\] = 1180591620717411303424 is outside", window_size=(2 ** 70, 0),
            is_causal=True)
    refused(TypeError, "window_size must be a pair", window_size=4, is_causal=True)


def test_device_named_and_honest():
    # device= chooses where the oracle and the recipes run; the values do not depend on it
    refused(ValueError, "device 'gpu' is not one of auto, cpu, cuda", device="gpu")
    refused(TypeError, "device must be a string", device=1)
    q, k, v, do = small()
    a = attnacc.score(q, k, v, do, o=q, layout="bhnd", device="cpu").to_dict()
    b = attnacc.score(q, k, v, do, o=q, layout="bhnd").to_dict()
    assert a["runs"][0]["outputs"] == b["runs"][0]["outputs"]  # everything but the timings
    if not _lib.lib().aa_oracle_cuda_available():  # a GPU is asked for where there is none: refused, named
        refused(ValueError, "device cuda: no CUDA GPU", device="cuda")


def test_empty_rule_list_refused():
    # rule=[] chose no rule, so Score.passed was True for any kernel.
    refused(ValueError, "rule is empty", rule=[])
    refused(TypeError, "rule must be a string", rule=[3])


def test_nul_in_strings_refused():
    q, k, v, do = small()
    # C stops at the NUL: "fa2\0..." ran the fa2 preset and ignored the rest.
    with pytest.raises(ValueError, match="attnacc: recipe holds a NUL byte"):
        attnacc.emulate("fa2\0 this text was cut off", q, k, v, do, layout="bhnd")
    with pytest.raises(ValueError, match="attnacc: recipe holds a NUL byte"):
        attnacc.emulate("io_fmt = bf16\0garbage = 1", q, k, v, do, layout="bhnd")
    refused(ValueError, "layout holds a NUL byte", layout="bhnd\0")


def test_wrong_types_named():
    q, k, v, do = small()
    with pytest.raises(TypeError, match="attnacc: q is None"):
        attnacc.score(None, k, v, do, o=q, layout="bhnd")
    with pytest.raises(TypeError, match="attnacc: recipe must be a string, got int"):
        attnacc.emulate(3, q, k, v, do, layout="bhnd")
    refused(TypeError, "layout must be a string, got int", layout=3)
    refused(TypeError, "oracle must be a string", oracle=None)
    refused(TypeError, "scale must be a number", scale="0.5")
    refused(ValueError, "atol = -1 is not a non-negative", atol=-1)


def test_broadcast_view_refused_before_conversion():
    # A [1, 1, 65536, 32768] broadcast view holds one element; converting it to float64 takes 16 GiB per
    # tensor. The child runs under an 8 GiB address-space limit, so a missing refusal shows as MemoryError.
    r = run_python("""
        import torch, attnacc
        big = torch.zeros(1, dtype=torch.bfloat16).expand(1, 1, 65536, 32768)
        try:
            attnacc.score(big, big, big, big, o=big, layout="bhnd")
        except attnacc.LimitError as e:
            print("REFUSED", e)
    """, limit_bytes=8 << 30)
    assert r.returncode == 0 and "REFUSED attnacc: " in r.stdout, (r.returncode, r.stdout, r.stderr[-500:])
    assert "bytes, estimate" in r.stdout and "memory limit" in r.stdout, r.stdout


def test_limits_keyword_and_environment(monkeypatch):
    q, k, v, do = small()
    refused(attnacc.LimitError, r"needs about .* bytes, estimate\), over the memory limit of 1000 bytes",
            max_memory=1000)
    refused(attnacc.LimitError, "over the time limit", max_seconds=1e-9)
    refused(ValueError, "max_memory= '12Q' is not a number", max_memory="12Q")
    monkeypatch.setenv("ATTNACC_MAX_MEMORY", "1K")
    refused(attnacc.LimitError, r"memory limit of 1 KiB \(1024 bytes; ATTNACC_MAX_MEMORY\)")
    with pytest.raises(attnacc.LimitError, match="ATTNACC_MAX_MEMORY"):
        attnacc.oracle(q, k, v, layout="bhnd")
    # the keyword wins over the environment
    assert attnacc.score(q, k, v, do, o=q, layout="bhnd", rule="abs-rel", max_memory="1G").outputs["o"].count == 64
    monkeypatch.setenv("ATTNACC_MAX_MEMORY", "")
    monkeypatch.setenv("ATTNACC_MAX_SECONDS", "1e-9")
    with pytest.raises(attnacc.LimitError, match="ATTNACC_MAX_SECONDS"):
        attnacc.emulate("fa2", q, k, v, do, layout="bhnd")


def fake_library(tmp_path, body):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in libattnacc")
    src, so = tmp_path / "fake.c", tmp_path / "libfake.so"
    src.write_text("#include <stddef.h>\n" + body)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return str(so)


@pytest.mark.parametrize("body,pattern", [
    ("int aa_abi_version(void) { return 999; }", f"has ABI version 999, this package needs ABI version {ABI}"),
    ("int aa_flat_score(void) { return 0; }", "has no aa_abi_version"),
    (f"int aa_abi_version(void) {{ return {ABI}; }}\n"
     "size_t aa_abi_struct_size(const char *n) { (void)n; return 8; }",
     r"has aa_flat_tensor_t of 8 bytes, this package.s mirror \(ABI version %d\) %d bytes"
     % (ABI, ctypes.sizeof(_lib.FlatTensor))),
])
def test_wrong_library_refused(tmp_path, monkeypatch, body, pattern):
    so = fake_library(tmp_path, body)
    monkeypatch.setenv("ATTNACC_LIB", so)
    monkeypatch.setattr(_lib, "_lib", None)  # monkeypatch puts the real library back afterwards
    with pytest.raises(ImportError, match=pattern):
        _lib.lib()


def test_wrong_library_refused_at_import(tmp_path):
    so = fake_library(tmp_path, "int aa_abi_version(void) { return 999; }")
    env = dict(os.environ, ATTNACC_LIB=so)
    r = subprocess.run([sys.executable, "-c", "import attnacc"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "ImportError: attnacc:" in r.stderr and "ABI version 999" in r.stderr, r.stderr[-800:]


def test_library_reports_its_abi():
    lib = _lib.lib()
    assert lib.aa_abi_version() == _lib.ABI_VERSION
    for name, mirror in _lib.MIRRORS.items():
        assert lib.aa_abi_struct_size(name.encode()) == ctypes.sizeof(mirror), name
    assert lib.aa_abi_struct_size(b"no_such_struct") == 0
    # the result structures come from the library's description, size-checked against it
    for name, cls in (("aa_flat_out_t", _lib.FlatOut), ("aa_flat_info_t", _lib.FlatInfo)):
        assert lib.aa_abi_struct_size(name.encode()) == ctypes.sizeof(cls), name
    names = [f for f, _ in _lib.FlatOut._fields_]
    assert names[0] == "name" and "ulp_median" in names and "rule_worst_idx" in names
    assert len(_lib.FlatOut().rule_worst_idx) == len(_lib.RULES) and len(_lib.FlatOut().rule_worst_idx[0]) == 4
    robust = [m for m, listed in _lib.MEASURES if listed]
    assert robust[:3] == ["ulp_median", "ulp_p99", "ulp_max"] and ("ulp_mean", False) in _lib.MEASURES
