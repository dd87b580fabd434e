"""attnacc: locating libattnacc, the ctypes mirrors of lib/score.h's flat input structures, and its result
structures built from the library's own description of them (aa_abi_field)."""
# SPDX-License-Identifier: LGPL-3.0-or-later
import ctypes
import os

RULES = ("abs-rel", "torch", "fa", "sdpa", "expect")
EXPECT_STATS = ("rel-l2", "q99", "scale", "offset", "row", "head")  # aa_expect_stat_t
FMTS = ("bf16", "fp16", "fp32", "fp64")
LAYOUTS = ("auto", "bhnd", "bnhd", "hnd", "nd", "nhd")
LAYOUT_AXES = {"bhnd": "[B, H, N, d]", "bnhd": "[B, N, H, d]", "hnd": "[H, N, d]", "nd": "[N, d]", "nhd": "[N, H, d]"}
ORACLE_PATHS = ("mpfr", "fast")
DEVICES = ("auto", "cpu", "cuda")  # aa_oracle_device_t
NRULE = len(RULES)
# lib/score.h's AA_ABI_VERSION that the mirrors below match; the loaded library must report the same.
ABI_VERSION = 6

# Status codes of lib/common.h.
AA_EINVAL, AA_ENOMEM, AA_EIO, AA_EFORMAT, AA_ESHAPE, AA_ENAN, AA_EUNSUPPORTED, AA_ERANGE, AA_ENOTFOUND = range(1, 10)


class FlatTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.POINTER(ctypes.c_double)),
        ("fmt", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_size_t * 4),
    ]


class FlatOpts(ctypes.Structure):
    _fields_ = [
        ("layout", ctypes.c_int),
        ("causal", ctypes.c_int),
        ("scale", ctypes.c_double),
        ("window", ctypes.c_size_t),
        ("atol", ctypes.c_double),
        ("rtol", ctypes.c_double),
        ("ulp_fmt", ctypes.c_int),
        ("oracle_path", ctypes.c_int),
        ("oracle_target", ctypes.c_double),
        ("threads", ctypes.c_int),
        ("naive", ctypes.c_int),
        ("varlen_batch", ctypes.c_size_t),
        ("cu_seqlens_q", ctypes.POINTER(ctypes.c_int32)),
        ("cu_seqlens_k", ctypes.POINTER(ctypes.c_int32)),
        # masks (ABI 3): attn_mask in additive form [mask_b, mask_h, n_q, n_k], key lengths, logit offset
        ("attn_mask", ctypes.POINTER(ctypes.c_double)),
        ("mask_b", ctypes.c_size_t),
        ("mask_h", ctypes.c_size_t),
        ("key_len", ctypes.POINTER(ctypes.c_size_t)),
        ("nkey_len", ctypes.c_size_t),
        ("logit_offset", ctypes.c_double),
        ("expect", ctypes.c_char_p),
        # problem features, sinks, keep mask, oracle cache, kept oracle (ABI 5)
        ("align", ctypes.c_int),
        ("local", ctypes.c_int),
        ("window_left", ctypes.c_size_t),
        ("window_right", ctypes.c_size_t),
        ("softcap", ctypes.c_double),
        ("alibi", ctypes.c_int),
        ("alibi_slopes", ctypes.POINTER(ctypes.c_double)),
        ("n_slopes", ctypes.c_size_t),
        ("sinks", ctypes.POINTER(ctypes.c_double)),
        ("num_sinks", ctypes.c_size_t),
        ("sinks_numel", ctypes.c_size_t),
        ("keep", ctypes.POINTER(ctypes.c_uint8)),
        ("keep_scale", ctypes.c_double),
        ("keep_numel", ctypes.c_size_t),
        ("cache_dir", ctypes.c_char_p),
        ("oracle", ctypes.c_void_p),
        ("device", ctypes.c_int),  # ABI 6: where the oracle and the recipes run (DEVICES)
        ("mask_bool", ctypes.c_int),  # ABI 6: attn_mask was boolean (mask.score = fill applies to its keys)
    ]


NOUT = 6  # aa_flat_score's outputs: o, dq, dk, dv, dsinks, lse (AA_FLAT_NOUT)
WINDOW_INF = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1  # AA_WINDOW_INF (SIZE_MAX): an unbounded window side


class Cost(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_double), ("seconds", ctypes.c_double)]


MIRRORS = {"aa_flat_tensor_t": FlatTensor, "aa_flat_opts_t": FlatOpts, "aa_problem_cost_t": Cost}

# The result structures, built by lib() from the library's description (_result_struct): one output's scores and
# the problem facts of a call. MEASURES: the robust measures' names in the order of the JSON document's "robust"
# object, and the other measures after them, with whether each is listed there (aa_abi_measure).
FlatOut = FlatInfo = None
MEASURES = ()
_KINDS = {"i": ctypes.c_int, "z": ctypes.c_size_t, "d": ctypes.c_double, "c": ctypes.c_char}


def _result_struct(handle, path, name):
    """The ctypes structure of result structure `name` from aa_abi_field, refused (ImportError) unless every
    field sits at the library's offset and the whole has the library's size."""
    field = handle.aa_abi_field
    field.restype = ctypes.c_char_p
    field.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int),
                      ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    off, kind, rows, cols = ctypes.c_size_t(), ctypes.c_int(), ctypes.c_size_t(), ctypes.c_size_t()
    fields, offsets = [], []
    while True:
        fname = field(name.encode(), len(fields), off, kind, rows, cols)
        if fname is None:
            break
        t = _KINDS[chr(kind.value)]
        if cols.value > 1:
            t = t * cols.value
        if rows.value > 1:
            t = t * rows.value
        fields.append((fname.decode(), t))
        offsets.append(off.value)
    cls = type(name, (ctypes.Structure,), {"_fields_": fields})
    for (fname, _), want in zip(fields, offsets):
        if getattr(cls, fname).offset != want:
            raise ImportError(f"attnacc: {path} places {name}.{fname} at byte {want}, ctypes at "
                              f"{getattr(cls, fname).offset}: rebuild libattnacc")
    size = handle.aa_abi_struct_size(name.encode())
    if size != ctypes.sizeof(cls):
        raise ImportError(f"attnacc: {path} has {name} of {size} bytes, its fields {ctypes.sizeof(cls)}")
    return cls


def _measures(handle):
    fn = handle.aa_abi_measure
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)]
    out, robust = [], ctypes.c_int()
    while True:
        m = fn(len(out), robust)
        if m is None:
            return tuple(out)
        out.append((m.decode(), bool(robust.value)))


def check_abi(handle, path):
    """Refuse (ImportError naming both sides) a library whose ABI version or flat struct sizes differ from the
    mirrors here: a stale ATTNACC_LIB or libdir would otherwise read and write the structs at wrong offsets."""
    try:
        fn = handle.aa_abi_version
    except AttributeError:
        raise ImportError(f"attnacc: {path} has no aa_abi_version (a libattnacc older than ABI version 1); this "
                          f"package needs ABI version {ABI_VERSION}: rebuild libattnacc or point ATTNACC_LIB at a "
                          "matching one") from None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    have = fn()
    if have != ABI_VERSION:
        raise ImportError(f"attnacc: {path} has ABI version {have}, this package needs ABI version {ABI_VERSION}: "
                          "rebuild libattnacc or point ATTNACC_LIB at a matching one")
    size = handle.aa_abi_struct_size
    size.restype = ctypes.c_size_t
    size.argtypes = [ctypes.c_char_p]
    for name, mirror in MIRRORS.items():
        n = size(name.encode())
        if n != ctypes.sizeof(mirror):
            raise ImportError(f"attnacc: {path} (ABI version {have}) has {name} of {n} bytes, this package's "
                              f"mirror (ABI version {ABI_VERSION}) {ctypes.sizeof(mirror)} bytes")


def _candidates():
    env = os.environ.get("ATTNACC_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    # build tree: python/attnacc/ -> lib/.libs/
    yield os.path.join(here, "..", "..", "lib", ".libs", "libattnacc.so")
    try:
        from . import _installed  # written by `make install`

        yield os.path.join(_installed.LIBDIR, "libattnacc.so")
    except ImportError:
        pass
    yield "libattnacc.so"


_lib = None


def lib():
    """The loaded libattnacc (ATTNACC_LIB, else the build tree's lib/.libs, else the installed libdir)."""
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for path in _candidates():
        try:
            handle = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(f"{path}: {e}")
    else:
        raise ImportError("attnacc: cannot load libattnacc.so (set ATTNACC_LIB to its path): " + "; ".join(errors))
    check_abi(handle, path)
    global FlatOut, FlatInfo, MEASURES
    FlatOut = _result_struct(handle, path, "aa_flat_out_t")
    FlatInfo = _result_struct(handle, path, "aa_flat_info_t")
    MEASURES = _measures(handle)
    handle.aa_flat_score.argtypes = [
        ctypes.POINTER(FlatOut),
        ctypes.POINTER(FlatInfo),
        ctypes.POINTER(FlatTensor),
        ctypes.POINTER(FlatTensor),
        ctypes.POINTER(FlatOpts),
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    handle.aa_flat_score.restype = ctypes.c_int
    handle.aa_flat_score_sets.argtypes = [ctypes.POINTER(FlatOut), ctypes.POINTER(FlatInfo),
                                          ctypes.POINTER(FlatTensor), ctypes.POINTER(FlatTensor), ctypes.c_size_t,
                                          ctypes.POINTER(FlatOpts), ctypes.c_char_p, ctypes.c_size_t]
    handle.aa_flat_score_sets.restype = ctypes.c_int
    dp = ctypes.POINTER(ctypes.c_double)
    handle.aa_flat_oracle.argtypes = [dp, dp, dp, dp, dp, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(FlatInfo),
                                      ctypes.POINTER(FlatTensor), ctypes.POINTER(FlatOpts), ctypes.c_char_p,
                                      ctypes.c_size_t]
    handle.aa_flat_oracle.restype = ctypes.c_int
    handle.aa_flat_kept_free.argtypes = [ctypes.c_void_p]
    handle.aa_flat_kept_free.restype = None
    handle.aa_flat_emulate.argtypes = [dp, dp, dp, dp, ctypes.POINTER(FlatOut), ctypes.POINTER(FlatInfo),
                                       ctypes.POINTER(FlatTensor), ctypes.c_char_p, ctypes.POINTER(FlatOpts),
                                       ctypes.c_char_p, ctypes.c_size_t]
    handle.aa_flat_emulate.restype = ctypes.c_int
    handle.aa_flat_opts_init.argtypes = [ctypes.POINTER(FlatOpts)]
    handle.aa_flat_opts_init.restype = None
    handle.aa_flat_estimate.argtypes = [ctypes.POINTER(Cost), ctypes.POINTER(FlatTensor), ctypes.POINTER(FlatOpts),
                                        ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    handle.aa_flat_estimate.restype = ctypes.c_int
    handle.aa_flat_draw.argtypes = [dp, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t,
                                    ctypes.c_size_t, ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_char_p,
                                    ctypes.c_size_t]
    handle.aa_flat_draw.restype = ctypes.c_int
    handle.aa_eval_default_rule.argtypes = [ctypes.c_int]
    handle.aa_eval_default_rule.restype = ctypes.c_int
    handle.aa_problem_mem_default.argtypes = []
    handle.aa_problem_mem_default.restype = ctypes.c_double
    _lib = handle
    return handle
