"""attnacc: score an attention kernel's outputs against an exact (MPFR-certified) oracle.

    import attnacc
    res = attnacc.score(q, k, v, do, o=o, dq=dq, dk=dk, dv=dv, layout="bhnd", is_causal=True)
    print(res.summary())
    attnacc.assert_accurate(q, k, v, do, o=o, dq=dq, dk=dk, dv=dv, rule="fa")
    em = attnacc.emulate("fa2", q, k, v, do, layout="bhnd")   # a recipe in bit-faithful emulation

Tensors are numpy arrays or torch tensors (bfloat16, float16, float32, float64; CUDA tensors are
copied to the CPU) in one of the layouts "bhnd" [B, H, N, d] (SDPA), "bnhd" [B, N, H, d]
(flash-attn), "hnd" [H, N, d] or "nd" [N, d]. k and v may have fewer heads (GQA). The library is
libattnacc (found through ATTNACC_LIB, the build tree's lib/.libs, or the installed libdir), loaded and
checked against the ABI version and the sizes of the input structures this package mirrors when the package is
imported; the result structures are built from the library's own description of them (aa_abi_field).

Every argument is checked before it reaches C (TypeError / ValueError with a message starting "attnacc:"),
and every call first estimates the memory and time of the problem from the tensors' shapes alone
(libattnacc's aa_flat_estimate), refusing with LimitError, before any tensor is converted, when the
estimate exceeds max_memory (bytes, or text such as "64G"; default: the environment variable
ATTNACC_MAX_MEMORY, else 3/4 of the physical memory) or max_seconds (default: ATTNACC_MAX_SECONDS,
else 3600 seconds of wall-clock time on the threads).
"""
# SPDX-License-Identifier: LGPL-3.0-or-later
import ctypes
import json
import math
import numbers
import os
import time
import warnings

import numpy as np

from . import _lib
from ._lib import EXPECT_STATS, FMTS, LAYOUT_AXES, LAYOUTS, RULES
from .invariance import InvarianceReport, check_invariance  # noqa: F401

__all__ = ["score", "score_many", "assert_accurate", "oracle", "emulate", "Oracle", "Score", "TensorScore",
           "RuleResult", "LimitError", "SCHEMA_VERSION", "RULES"]

# Version of the JSON object written by Score.to_dict() and `attnacc score --json` (experiments/README-json.md).
SCHEMA_VERSION = 2
OUTPUTS = ("o", "dq", "dk", "dv")
SCORED = OUTPUTS + ("dsinks", "lse")  # what score() takes: aa_flat_score's outputs, in its order
THREADS_MAX = 4096  # the command's --threads bound: more would only make OpenMP spawn threads until it fails
MAX_SECONDS = 3600.0  # default time limit, as the command's --max-seconds


class LimitError(ValueError):
    """The problem's memory or time estimate exceeds max_memory / max_seconds: refused before any work."""


def _int_arg(name, x, lo, hi):
    """x as an int in [lo, hi]: ctypes would silently wrap a larger one."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise TypeError(f"attnacc: {name} must be an integer, got {type(x).__name__} {x!r}")
    if not lo <= int(x) <= hi:
        raise ValueError(f"attnacc: {name} = {int(x)} is outside [{lo}, {hi}]")
    return int(x)


def _real_arg(name, x, positive=False):
    """x as a finite float, >= 0 (> 0 when positive)."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"attnacc: {name} must be a number, got {type(x).__name__} {x!r}")
    v = float(x)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ValueError(f"attnacc: {name} = {x!r} is not a {'positive' if positive else 'non-negative'} finite "
                         "number")
    return v


def _str_arg(name, x, choices=None):
    """x as a str without NUL (C would cut it there), one of choices when given (case-insensitive)."""
    if not isinstance(x, str):
        raise TypeError(f"attnacc: {name} must be a string, got {type(x).__name__} {x!r}")
    if "\0" in x:
        raise ValueError(f"attnacc: {name} holds a NUL byte, where C would cut the text short")
    if choices is not None and x.lower() not in choices:
        raise ValueError(f"attnacc: {name} {x!r} is not one of {', '.join(choices)}")
    return x


def _flag_arg(name, x):
    if x is None:
        return False
    if isinstance(x, (bool, np.bool_)) or (isinstance(x, numbers.Integral) and int(x) in (0, 1)):
        return bool(x)
    raise TypeError(f"attnacc: {name} must be True or False, got {type(x).__name__} {x!r}")


def _shape(x, name, required=True):
    """The shape of a numpy array or torch tensor (others through np.asarray), read without converting it."""
    if x is None:
        if required:
            raise TypeError(f"attnacc: {name} is None (need a numpy array or torch tensor)")
        return None
    shape = tuple(x.shape) if type(x).__module__.startswith("torch") else np.shape(x)
    if not 2 <= len(shape) <= 4:
        raise ValueError(f"attnacc: {name} has {len(shape)} axes (need 2 to 4: [N, d], [H, N, d], [B, H, N, d] or "
                         "[B, N, H, d])")
    return tuple(int(n) for n in shape)


def _bytes_text(b):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if b < 1024 or unit == "PiB":
            return f"{b:.0f} {unit}" if unit == "bytes" else f"{b:.3g} {unit}"
        b /= 1024


def _limit_arg(name, x, env, default, suffixes):
    """(limit, where it came from) of the keyword x, else the environment variable env, else default.
    Text may end in K, M, G or T (powers of 1024) when suffixes; math.inf lifts the limit."""
    src = f"{name}="
    if x is None:
        x = os.environ.get(env)
        src = env
        if x is None or x == "":
            return default
    if isinstance(x, str):
        text = _str_arg(name, x).strip()
        mult = 1.0
        if suffixes and text[-1:].upper() in ("K", "M", "G", "T"):
            mult = 1024.0 ** ("KMGT".index(text[-1].upper()) + 1)
            text = text[:-1]
        try:
            x = float(text) * mult
        except ValueError:
            raise ValueError(f"attnacc: {src} {x!r} is not a number{' (suffix K, M, G or T)' if suffixes else ''}") \
                from None
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not float(x) > 0:
        raise ValueError(f"attnacc: {src} {x!r} is not a positive number")
    return float(x), src


def _budget(opts, shapes, sets, max_memory, max_seconds):
    """Refuse (LimitError) a problem whose estimate (aa_flat_estimate of the shapes, with `sets` output sets,
    this package's own float64 copies among them) exceeds the memory or time limit; shape and layout errors
    surface here too, before any tensor is converted."""
    lib = _lib.lib()
    ins = (_lib.FlatTensor * 4)()
    for t, shape in zip(ins, shapes):
        t.fmt, t.ndim = 3, len(shape)
        for i, n in enumerate(shape):
            t.shape[i] = n
    cost = _lib.Cost()
    msg = ctypes.create_string_buffer(1024)
    rc = lib.aa_flat_estimate(ctypes.byref(cost), ins, ctypes.byref(opts), sets, msg, len(msg))
    if rc != 0:
        _raise(rc, msg.value)
    mem_default = lib.aa_problem_mem_default()
    mem, msrc = _limit_arg("max_memory", max_memory, "ATTNACC_MAX_MEMORY",
                           (mem_default if mem_default > 0 else math.inf, "3/4 of physical memory"), True)
    secs, ssrc = _limit_arg("max_seconds", max_seconds, "ATTNACC_MAX_SECONDS", (MAX_SECONDS, "default"), False)
    what = f"q {list(shapes[0])}, k {list(shapes[1])}"
    if cost.bytes > mem:
        raise LimitError(f"attnacc: the problem ({what}) needs about {_bytes_text(cost.bytes)} ({cost.bytes:.0f} "
                         f"bytes, estimate), over the memory limit of {_bytes_text(mem)} ({mem:.0f} bytes; {msrc}): "
                         "pass max_memory= or set ATTNACC_MAX_MEMORY to raise it")
    if cost.seconds > secs:
        cores = os.cpu_count() or 1
        raise LimitError(f"attnacc: the problem ({what}) would take about {cost.seconds:.3g} seconds (estimate, on "
                         f"{min(opts.threads or cores, cores)} threads), over the time limit of {secs:.3g} seconds "
                         f"({ssrc}): pass max_seconds= or set ATTNACC_MAX_SECONDS to raise it")


def _as_array(x, name, bf16_bits=False):
    """(float64 C-order array, format index) of a numpy array or torch tensor."""
    if x is None:
        return None, None
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch

        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        tmap = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2, torch.float64: 3}
        if t.dtype not in tmap:
            raise TypeError(f"attnacc: {name} has dtype {t.dtype} (need bfloat16, float16, float32 or float64)")
        return np.ascontiguousarray(t.to(torch.float64).numpy()), tmap[t.dtype]
    a = np.asarray(x)
    if a.dtype in (np.int16, np.uint16) and bf16_bits:
        bits = a.astype(np.uint16).astype(np.uint32) << 16
        return np.ascontiguousarray(bits.view(np.float32).astype(np.float64)), 0
    nmap = {np.dtype(np.float16): 1, np.dtype(np.float32): 2, np.dtype(np.float64): 3}
    if a.dtype not in nmap:
        hint = " (BF16 bit patterns: pass bf16_bits=True)" if a.dtype in (np.int16, np.uint16) else ""
        raise TypeError(f"attnacc: {name} has dtype {a.dtype} (need float16, float32, float64){hint}")
    return np.ascontiguousarray(a, dtype=np.float64), nmap[a.dtype]


def _flat(arr, fmt):
    t = _lib.FlatTensor()
    if arr is None:
        return t
    if arr.ndim < 1 or arr.ndim > 4:
        raise ValueError(f"attnacc: an array has {arr.ndim} axes (need 2 to 4)")
    t.data = arr.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
    t.fmt = fmt
    t.ndim = arr.ndim
    for i, s in enumerate(arr.shape):
        t.shape[i] = s
    return t


def _as_out(x, name):
    """(float64 array, format) of dsinks or lse, which may hold infinities (lse of rows that see no key) and are
    refused only for their dtype and size here; their shapes are checked against the problem in C."""
    if x is None:
        return None, None
    a, f = _as_array(x, name)
    if a.ndim < 1 or a.ndim > 3:
        raise ValueError(f"attnacc: {name} has {a.ndim} axes (need 1 to 3)")
    return a, f


def _kernel_fmt(kernel_dtype, arrs):
    """The format index the kernel computes in (kernel_dtype: "bf16", "fp16", "fp32", "fp64" or a torch dtype),
    checked against every input's values: the inputs are then tagged with it, so the naive reference of the fa
    and sdpa rules runs in the kernel's format rather than the storage dtype's. None: the storage dtype."""
    if kernel_dtype is None:
        return None
    names = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
             "float64": "fp64", "double": "fp64"}
    text = str(kernel_dtype).replace("torch.", "").lower()
    fmt = _str_arg("kernel_dtype", names.get(text, text), ("bf16", "fp16", "fp32", "fp64")).lower()
    for (a, _), n in zip(arrs, ("q", "k", "v", "do")):
        if fmt == "bf16":
            f = a.astype(np.float32)
            ok = np.array_equal(f.astype(np.float64), a) and not (f.view(np.uint32) & 0xFFFF).any()
        elif fmt == "fp16":
            ok = np.array_equal(a.astype(np.float16).astype(np.float64), a)
        elif fmt == "fp32":
            ok = np.array_equal(a.astype(np.float32).astype(np.float64), a)
        else:
            ok = True
        if not ok:
            raise ValueError(f"attnacc: kernel_dtype={fmt}: {n} holds values that are not {fmt}")
    return FMTS.index(fmt)


def _opts(layout, is_causal, causal, scale, softmax_scale, window_size, enable_gqa, atol, rtol, ulp_fmt, oracle_path,
          threads, naive, q_shape=None, k_shape=None, device=None):
    o = _lib.FlatOpts()
    _lib.lib().aa_flat_opts_init(ctypes.byref(o))
    lay = "auto" if layout is None else _str_arg("layout", layout, LAYOUTS).lower()
    o.layout = LAYOUTS.index(lay)
    c = _flag_arg("is_causal", is_causal) or _flag_arg("causal", causal)
    o.causal = int(c)
    s = softmax_scale if softmax_scale is not None else scale
    if s is not None:
        o.scale = _real_arg("softmax_scale" if softmax_scale is not None else "scale", s, positive=True)
    if window_size is not None:
        if isinstance(window_size, (str, bytes)) or not hasattr(window_size, "__len__") or len(window_size) != 2:
            raise TypeError(f"attnacc: window_size must be a pair (left, right) of integers, got "
                            f"{type(window_size).__name__} {window_size!r}")
        left, right = (_int_arg("window_size[%d]" % i, w, -1, 2 ** 31 - 1) for i, w in enumerate(window_size))
        # flash-attn's window_size: query i sees keys c(i) - left .. c(i) + right (-1: unbounded), bottom-right
        # aligned unless causal_align says otherwise (as `attnacc run --window L,R`)
        if (left, right) != (-1, -1):
            o.local = 1
            o.window_left = _lib.WINDOW_INF if left < 0 else left
            o.window_right = _lib.WINDOW_INF if right < 0 else right
            o.align = 1
    if enable_gqa is not None:
        _flag_arg("enable_gqa", enable_gqa)
    if enable_gqa is False and q_shape is not None and k_shape is not None and tuple(q_shape) != tuple(k_shape):
        raise ValueError("attnacc: k has a different shape from q (GQA) but enable_gqa=False")
    if atol is not None:
        o.atol = _real_arg("atol", atol)
    if rtol is not None:
        o.rtol = _real_arg("rtol", rtol)
    if ulp_fmt is not None:
        o.ulp_fmt = FMTS.index(_str_arg("ulp_fmt", ulp_fmt, ("bf16", "fp16", "fp32")).lower())
    o.oracle_path = _lib.ORACLE_PATHS.index(_str_arg("oracle", oracle_path, _lib.ORACLE_PATHS).lower())
    o.threads = _int_arg("threads", threads, 0, THREADS_MAX)
    o.naive = int(bool(naive))
    o.device = _lib.DEVICES.index(_str_arg("device", "auto" if device is None else device, _lib.DEVICES).lower())
    return o


def _f64(x, name):
    """A float64 C-order copy of a numpy array or torch tensor (any float dtype)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"attnacc: {name} has dtype {a.dtype} (need numbers)")
    return np.ascontiguousarray(a, dtype=np.float64)


def _features(o, causal_align=None, softcap=None, alibi=None, alibi_slopes=None, alibi_form="flash", sinks=None,
              keep=None, dropout_p=None, cache=None, kept=None):
    """Set the problem features (lib/problem.h, as `attnacc run` takes them), the oracle cache and a kept oracle on
    opts o. Returns the arrays the C call reads, which the caller keeps alive during it."""
    alive = []
    if causal_align is not None:
        o.align = ("top-left", "bottom-right").index(
            _str_arg("causal_align", causal_align, ("top-left", "bottom-right")).lower())
    if softcap is not None:
        o.softcap = _real_arg("softcap", softcap)
    if alibi_slopes is not None or _flag_arg("alibi", alibi):
        o.alibi = ("flash", "torch").index(_str_arg("alibi_form", alibi_form, ("flash", "torch")).lower()) + 1
        if alibi_slopes is not None:  # [H] (flash-attn's), or [B, H]; None: the geometric slopes of q's heads
            a = _f64(alibi_slopes, "alibi_slopes").reshape(-1)
            alive.append(a)
            o.alibi_slopes = a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
            o.n_slopes = a.size
    if sinks is not None:
        a = _f64(sinks, "sinks")
        if a.ndim not in (1, 2):
            raise ValueError(f"attnacc: sinks has shape {a.shape} (need [H, K], or [K] for one head)")
        alive.append(a)
        o.sinks = a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        o.num_sinks = a.shape[-1]
        o.sinks_numel = a.size
    if (keep is None) != (dropout_p is None):
        raise ValueError("attnacc: dropout needs both keep (the kernel's keep mask) and dropout_p")
    if keep is not None:
        p = _real_arg("dropout_p", dropout_p)
        if not p < 1:
            raise ValueError(f"attnacc: dropout_p = {dropout_p!r} is not below 1")
        k = _f64(keep, "keep")
        if not np.isin(k, (0, 1)).all():
            raise ValueError("attnacc: keep holds values other than 0 (dropped) and 1 (kept)")
        k = np.ascontiguousarray(k, dtype=np.uint8)
        alive.append(k)
        o.keep = k.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        o.keep_scale = 1.0 / (1.0 - p)
        o.keep_numel = k.size
    if cache is not None:
        o.cache_dir = os.fsencode(os.fspath(cache))
    if kept is not None:
        o.oracle = kept._kept
        o.oracle_path = _lib.ORACLE_PATHS.index(kept.path)
    return alive


def _oracle_arg(oracle):
    """(path name, kept Oracle or None) of score's oracle=: "fast", "mpfr", or an Oracle to reuse."""
    if isinstance(oracle, Oracle):
        if oracle._kept is None:
            raise ValueError("attnacc: oracle= holds no kept result (it was released)")
        return oracle.path, oracle
    if not isinstance(oracle, str):
        raise TypeError(f"attnacc: oracle must be a string (\"fast\", \"mpfr\") or an attnacc.Oracle (what oracle() "
                        f"returns), got {type(oracle).__name__} {oracle!r}")
    return oracle, None


def _raise(rc, msg):
    text = "attnacc: " + msg.decode(errors="replace")
    if rc == _lib.AA_ENOMEM:
        raise MemoryError(text)
    if rc == _lib.AA_EIO:
        raise OSError(text)
    raise ValueError(text)


def _num(x):
    return None if x is None or not math.isfinite(x) else float(x)


class RuleResult:
    """One rule on one output: passed, ratio (measured / allowed; <= 1 passes), allowed, atol, rtol,
    fail_count, worst_index (the caller's layout), worst_got, worst_ref, naive_max_abs (fa, sdpa)."""

    def __init__(self, rule, f, i, ndim):
        self.rule = rule
        self.applied = bool(f.rule_applied[i])
        self.passed = bool(f.rule_pass[i]) if self.applied else None
        self.ratio = f.rule_ratio[i]
        self.allowed = f.rule_allowed[i]
        self.atol = f.rule_atol[i]
        self.rtol = f.rule_rtol[i]
        self.naive_max_abs = f.rule_naive_max_abs[i] if rule in ("fa", "sdpa") else None
        self.fail_count = f.rule_fail_count[i]
        self.worst_index = tuple(f.rule_worst_idx[i][j] for j in range(ndim))
        self.worst_got = f.rule_worst_got[i]
        self.worst_ref = f.rule_worst_ref[i]
        # expect: the deciding statistic and each statistic's ratio, limit and the recipe's value
        self.statistic = EXPECT_STATS[f.expect_stat] if rule == "expect" else None
        self.statistics = {k: {"ratio": f.expect_ratio[j], "limit": f.expect_limit[j], "recipe": f.expect_ref[j]}
                           for j, k in enumerate(EXPECT_STATS)} if rule == "expect" else None

    def to_dict(self):
        d = {"applied": self.applied}
        if self.applied:
            d.update({"pass": self.passed, "ratio": _num(self.ratio), "allowed": _num(self.allowed),
                      "atol": _num(self.atol), "rtol": _num(self.rtol)})
            if self.naive_max_abs is not None:
                d["naive_max_abs"] = _num(self.naive_max_abs)
            if self.statistics is not None:
                d["statistic"] = self.statistic
                d["statistics"] = {k: {n: _num(x) for n, x in v.items()} for k, v in self.statistics.items()}
            d.update({"fail_count": self.fail_count, "worst_index": list(self.worst_index)})
        return d


# the systematic-error statistics (lib/score.h), the document's "systematic" object
SYSTEMATIC = ("ls_scale", "ls_offset", "scale_sigma", "offset_sigma", "err_corr", "abs_q99", "row_err_max",
              "head_rel_l2_max")


class TensorScore:
    """Error measures of one output against the oracle (formulas: README.md, "Metrics")."""

    # the counts and legacy measures; the robust measures (ulp_median, max_rel, ...) are the library's list
    # (_lib.MEASURES, from lib/score/measures.c), so a measure added there appears here and in to_dict()
    FIELDS = ("count", "nan", "inf", "rel_l2", "max_abs")

    def __init__(self, f):
        self.name = f.name.decode()
        self.data_fmt = FMTS[f.data_fmt]
        self.ulp_fmt = FMTS[f.ulp_fmt]
        for k in self.FIELDS + tuple(m for m, _ in _lib.MEASURES):
            setattr(self, k, getattr(f, k))
        nd = f.idx_ndim
        self.worst_abs_index = tuple(f.worst_abs_idx[j] for j in range(nd))
        self.worst_rel_index = tuple(f.worst_rel_idx[j] for j in range(nd))
        self.worst_got, self.worst_ref = f.worst_got, f.worst_ref
        self.worst_rel_got, self.worst_rel_ref = f.worst_rel_got, f.worst_rel_ref
        self.rules = {r: RuleResult(r, f, i, nd) for i, r in enumerate(RULES)}
        self.row_worst, self.head_worst = f.row_worst, f.head_worst

    def to_dict(self):
        """The output's entry of the JSON schema (experiments/README-json.md), without the CLI-only keys."""
        robust = {"ulp_fmt": self.ulp_fmt}
        for k, listed in _lib.MEASURES:
            if listed:
                robust[k] = _num(getattr(self, k))
        robust["worst_abs"] = {"index": list(self.worst_abs_index), "got": _num(self.worst_got),
                               "oracle": _num(self.worst_ref)}
        systematic = {k: _num(getattr(self, k)) for k in SYSTEMATIC}
        systematic.update({"row_worst": self.row_worst, "head_worst": self.head_worst})
        return {"count": self.count, "rel_l2": _num(self.rel_l2), "max_abs": _num(self.max_abs), "nan": self.nan,
                "inf": self.inf, "oracle_relerr_bound": _num(self.oracle_relerr_bound), "data_fmt": self.data_fmt,
                "robust": robust, "systematic": systematic, "rules": {r: x.to_dict() for r, x in self.rules.items()}}


class Score:
    """The result of score(): passed (every chosen rule on every given output), rules (the chosen ones),
    outputs (name -> TensorScore), layout and problem facts; summary() and to_dict()."""

    def __init__(self, outs, info, rules, causal=False, window=0, seconds=None):
        self._causal, self._window = bool(causal), int(window)
        self.layout = LAYOUTS[info.layout]
        self.problem = {"layout": self.layout, "b": info.b, "heads": info.h, "kv_heads": info.h_kv, "n": info.n_q,
                        "n_k": info.n_k, "d": info.d, "scale": info.scale, "input_fmt": FMTS[info.input_fmt],
                        "kernel_fmt": FMTS[info.kernel_fmt], "expect": info.expect.decode() or None}
        self.oracle = {"relerr_bound": info.oracle_relerr_bound, "recomputed": info.oracle_recomputed,
                       "uncertified": info.oracle_uncertified,
                       "seconds": seconds}  # the library reads no clock: the caller timed the call
        self.outputs = {}
        for f in outs:
            if f.present:
                t = TensorScore(f)
                self.outputs[t.name] = t
        self.rules = tuple(rules)
        self.passed = all(self.verdict(n, r) is not False for n in self.outputs for r in self.rules)

    def verdict(self, out, rule):
        """True / False, or None when the rule could not be applied (fa and sdpa on fp64 inputs)."""
        return self.outputs[out].rules[rule].passed

    def failures(self):
        return [(n, r) for n in self.outputs for r in self.rules if self.verdict(n, r) is False]

    def __getitem__(self, name):
        return self.outputs[name]

    def __bool__(self):
        return self.passed

    def summary(self):
        p = self.problem
        lines = [f"layout {self.layout} {LAYOUT_AXES[self.layout]}: B={p['b']} H={p['heads']} H_kv={p['kv_heads']} "
                 f"N={p['n']} N_k={p['n_k']} d={p['d']} inputs {p['input_fmt']}"]
        head = f"{'out':<4} {'ulp':<4} {'rel_l2':>10} {'max_abs':>10} {'max_rel':>10} {'ulp_med':>8} {'ulp_p99':>8} " \
               f"{'ulp_nw':>8}"
        for r in RULES:
            head += f" {r:>12}"
        lines.append(head)
        for n, t in self.outputs.items():
            row = f"{n:<4} {t.ulp_fmt:<4} {t.rel_l2:>10.3e} {t.max_abs:>10.3e} {t.max_rel:>10.3e} " \
                  f"{t.ulp_median:>8.3g} {t.ulp_p99:>8.3g} {t.ulp_normwise:>8.3g}"
            for r in RULES:
                x = t.rules[r]
                row += f" {'-':>12}" if not x.applied else f" {x.ratio:>8.3g} {'ok' if x.passed else 'FAIL':>3}"
            lines.append(row)
        lines.append(f"rules {', '.join(self.rules)}: {'pass' if self.passed else 'FAIL'} "
                     "(each cell: measured / allowed; <= 1 passes)")
        for n, r in self.failures():
            lines.append(_explain(self, n, r))
        return "\n".join(lines)

    def to_dict(self):
        """One JSON document of schema version SCHEMA_VERSION, the shape `attnacc score --json` prints
        (experiments/README-json.md): provenance, problem, layout and oracle at the top, the scored
        outputs and the verdict in runs[0]."""
        lib = _lib.lib()
        lib.aa_flat_version.restype = ctypes.c_char_p
        lib.aa_git_hash.restype = ctypes.c_char_p
        p = self.problem
        return {
            "schema_version": SCHEMA_VERSION,
            "attnacc": {"version": lib.aa_flat_version().decode(), "git": lib.aa_git_hash().decode()},
            "command": "python",
            "seed": None,
            "inputs": None,
            "problem": {"n": p["n"], "n_k": p["n_k"], "d": p["d"], "heads": p["b"] * p["heads"],
                        "kv_heads": p["b"] * p["kv_heads"], "causal": self._causal, "window": self._window,
                        "sinks": 0, "dist": None, "sigma": None, "scale": _num(p["scale"])},
            "layout": {"name": self.layout, "axes": LAYOUT_AXES[self.layout], "b": p["b"], "heads": p["heads"],
                       "kv_heads": p["kv_heads"]},
            "oracle": {"relerr_bound": _num(self.oracle["relerr_bound"]), "recomputed": self.oracle["recomputed"],
                       "uncertified": self.oracle["uncertified"], "seconds": _num(self.oracle["seconds"])},
            "runs": [{
                "variant": "external",
                "recipe": None,
                "outputs": {n: t.to_dict() for n, t in self.outputs.items()},
                "verdict": {"rules": list(self.rules), "pass": self.passed,
                            "failures": [_explain(self, n, r).split("\n")[0] for n, r in self.failures()],
                            "expect": self.problem["expect"]},
            }],
        }

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2)


def _idx(t):
    return "(" + ", ".join(str(i) for i in t) + ")"


def _explain(res, name, rule):
    t = res.outputs[name]
    x = t.rules[rule]
    where = f"[layout {res.layout} {LAYOUT_AXES[res.layout]}]"
    if rule in ("abs-rel", "torch"):
        n = t.count
        return (f"{name} fails the {rule} rule (rtol {x.rtol:g}, atol {x.atol:g}, {t.data_fmt}) {where}\n"
                f"Mismatched elements: {x.fail_count} / {n} ({100.0 * x.fail_count / max(n, 1):.1f}%)\n"
                f"Greatest absolute difference: {t.max_abs:.6g} at index {_idx(t.worst_abs_index)} "
                f"(got {t.worst_got:.9g}, oracle {t.worst_ref:.9g}; up to {x.atol:g} allowed)\n"
                f"Greatest relative difference: {t.max_rel_any:.6g} at index {_idx(t.worst_rel_index)} "
                f"(got {t.worst_rel_got:.9g}, oracle {t.worst_rel_ref:.9g}; up to {x.rtol:g} allowed)\n"
                f"Worst element against the rule: index {_idx(x.worst_index)}, got {x.worst_got:.9g}, "
                f"oracle {x.worst_ref:.9g}, error {abs(x.worst_got - x.worst_ref):.6g} "
                f"= {x.ratio:.4g} x the allowed {x.allowed:.6g}")
    if rule == "expect":
        st = x.statistics[x.statistic]
        return (f"{name} fails the expect rule {where}: its {x.statistic} statistic is {x.ratio:.4g} x the limit "
                f"{st['limit']:.6g} set by the recipe {res.problem['expect']} (whose value is {st['recipe']:.6g}); "
                f"rel_l2 {t.rel_l2:.6g}, least-squares scale - 1 {t.ls_scale:.3g} (sigma {t.scale_sigma:.3g}), "
                f"offset {t.ls_offset:.3g} (sigma {t.offset_sigma:.3g}), worst row {t.row_worst} "
                f"(|e| {t.row_err_max:.6g}), worst head {t.head_worst} (rel_l2 {t.head_rel_l2_max:.6g})")
    what = f"{x.rtol:g} x naive-{res.problem['input_fmt']}'s max error {x.naive_max_abs:.6g}"
    if rule == "sdpa":
        what = f"max({x.atol:g}, {what})"
    return (f"{name} fails the {rule} rule {where}: max abs error {t.max_abs:.6g} at index "
            f"{_idx(x.worst_index)} (got {x.worst_got:.9g}, oracle {x.worst_ref:.9g}) exceeds {what} = "
            f"{x.allowed:.6g} (ratio {x.ratio:.4g})\n"
            f"Greatest absolute difference: {t.max_abs:.6g} at index {_idx(t.worst_abs_index)} "
            f"(up to {x.allowed:.6g} allowed)\n"
            f"Greatest relative difference: {t.max_rel_any:.6g} at index {_idx(t.worst_rel_index)} "
            f"(got {t.worst_rel_got:.9g}, oracle {t.worst_rel_ref:.9g})")


def _varlen(opts, cu_seqlens_q, cu_seqlens_k):
    """Attach a varlen batch (flash_attn_varlen_func's cu_seqlens_q/_k: B + 1 offsets from 0) to opts.
    Returns the int32 copies, which the caller keeps alive during the C call (None without varlen)."""
    if cu_seqlens_q is None and cu_seqlens_k is None:
        return None
    if cu_seqlens_q is None:
        raise ValueError("attnacc: cu_seqlens_k given without cu_seqlens_q")
    arrs = []
    for name, c in (("cu_seqlens_q", cu_seqlens_q),
                    ("cu_seqlens_k", cu_seqlens_q if cu_seqlens_k is None else cu_seqlens_k)):
        if hasattr(c, "detach"):
            c = c.detach().cpu().numpy()
        a = np.asarray(c)
        if a.ndim != 1 or a.size < 2 or a.dtype.kind not in "iu":
            raise ValueError(f"attnacc: {name} must be a 1-D integer array of B + 1 offsets, got shape "
                             f"{tuple(a.shape)} of {a.dtype}")
        if a.min() < 0 or a.max() >= 2 ** 31:
            raise ValueError(f"attnacc: {name} holds offsets outside [0, 2^31)")
        arrs.append(np.ascontiguousarray(a, dtype=np.int32))
    if arrs[0].size != arrs[1].size:
        raise ValueError(f"attnacc: cu_seqlens_q has {arrs[0].size} offsets, cu_seqlens_k {arrs[1].size} "
                         "(one per sequence and one)")
    ip = ctypes.POINTER(ctypes.c_int32)
    opts.varlen_batch = arrs[0].size - 1
    opts.cu_seqlens_q = arrs[0].ctypes.data_as(ip)
    opts.cu_seqlens_k = arrs[1].ctypes.data_as(ip)
    return arrs


# ---- masks: attn_mask, key_len, logit_offset (lib/problem.h; aa_flat_opts_t's mask fields) ----

def _masks(opts, attn_mask, key_len, logit_offset):
    """Attach SDPA's attn_mask (bool: True attends; float: added to every score after the softcap, -inf masks;
    [Nq, Nk], [H or 1, Nq, Nk] or [B or 1, H or 1, Nq, Nk]), the key lengths of a padded batch (one int, or one
    per batch element) and a logit offset to opts. Returns the arrays the caller keeps alive during the C call."""
    if isinstance(logit_offset, bool) or not isinstance(logit_offset, numbers.Real):
        raise TypeError(f"attnacc: logit_offset must be a number, got {type(logit_offset).__name__} {logit_offset!r}")
    if not abs(float(logit_offset)) <= 2.0 ** 40:
        raise ValueError(f"attnacc: logit_offset = {logit_offset!r} is not a finite number with |c| <= 2^40")
    opts.logit_offset = float(logit_offset)
    keep = []
    if attn_mask is not None:
        m = attn_mask
        if hasattr(m, "detach"):
            import torch

            t = m.detach().cpu()
            m = t.numpy() if t.dtype == torch.bool else t.to(torch.float64).numpy()
        m = np.asarray(m)
        if m.ndim < 2 or m.ndim > 4:
            raise ValueError(f"attnacc: attn_mask has {m.ndim} axes (need [Nq, Nk], [H, Nq, Nk] or [B, H, Nq, Nk])")
        if m.dtype == np.bool_:  # its additive form, flagged as boolean (a kernel may score those keys otherwise)
            m = np.where(m, 0.0, -np.inf)
            opts.mask_bool = 1
        elif m.dtype.kind != "f":
            raise TypeError(f"attnacc: attn_mask has dtype {m.dtype} (need bool or a float dtype)")
        m = np.ascontiguousarray(m.reshape((1,) * (4 - m.ndim) + m.shape), dtype=np.float64)
        opts.attn_mask = m.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        opts.mask_b, opts.mask_h = m.shape[0], m.shape[1]
        keep.append(m)
    if key_len is not None:
        if hasattr(key_len, "detach"):
            key_len = key_len.detach().cpu().numpy()
        lens = np.atleast_1d(np.asarray(key_len))
        if lens.ndim != 1 or lens.size == 0 or lens.dtype.kind not in "iu" or lens.min() < 0:
            raise ValueError(f"attnacc: key_len must be one non-negative integer or one per batch element, got "
                             f"{key_len!r}")
        lens = np.ascontiguousarray(lens, dtype=np.uintp)
        opts.key_len = lens.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t))
        opts.nkey_len = lens.size
        keep.append(lens)
    return keep


def _layout_arg(layout, cu_seqlens_q):
    """Varlen batches are packed [total, H, d]: layout nhd unless the caller names one (others are refused)."""
    return layout if layout is not None or cu_seqlens_q is None else "nhd"


def _rules_arg(rule):
    if rule is None:
        return None  # the default, chosen by the inputs' dtype in _finish
    if not isinstance(rule, (str, list, tuple)):
        raise TypeError(f"attnacc: rule must be a rule name or a list of them, got {type(rule).__name__} {rule!r}")
    rules = (rule,) if isinstance(rule, str) else tuple(rule)
    if not rules:
        # an empty list would decide nothing: every kernel would pass
        raise ValueError(f"attnacc: rule is empty (give one of {', '.join(RULES)}, a list of them, or 'all')")
    if rules == ("all",):
        rules = RULES
    for r in rules:
        _str_arg("rule", r, RULES)
    return tuple(r.lower() for r in rules)


def _finish(res, info, rules, opts, seconds=None):
    """The Score, with the default rule (expect; torch for fp64 kernels) and a refusal of rules that need a naive
    reference or a recipe in the inputs' dtype when there is none (fp64 inputs)."""
    if rules is None:
        rules = (RULES[_lib.lib().aa_eval_default_rule(info.kernel_fmt)],)
    sc = Score(list(res), info, rules, opts.causal, opts.window, seconds)
    for r in rules:
        if any(not t.rules[r].applied for t in sc.outputs.values()):
            raise ValueError(f"attnacc: rule {r!r} needs a {'recipe' if r == 'expect' else 'naive reference'} in "
                             "the kernel's dtype, which exists for "
                             f"bf16, fp16 and fp32 inputs; these are {sc.problem['input_fmt']} (use 'torch' or "
                             "'abs-rel')")
    return sc


def score(q, k, v, do, o=None, dq=None, dk=None, dv=None, *, lse=None, dsinks=None, layout=None, is_causal=False,
          causal=None, causal_align=None, scale=None, softmax_scale=None, window_size=None, softcap=None, alibi=None,
          alibi_slopes=None, alibi_form="flash", sinks=None, keep=None, dropout_p=None, enable_gqa=None, rule=None,
          atol=0.01, rtol=0.01, ulp_fmt=None, oracle="fast", cache=None, threads=0, bf16_bits=False,
          cu_seqlens_q=None, cu_seqlens_k=None, max_memory=None, max_seconds=None, kernel_dtype=None, expect=None,
          attn_mask=None, key_len=None, logit_offset=0.0, device=None):
    """Score a kernel's o, dq, dk, dv (any subset) for inputs q, k, v and upstream gradient do.

    layout: "bhnd" [B, H, N, d] (SDPA), "bnhd" [B, N, H, d] (flash-attn), "hnd" [H, N, d], "nd" [N, d],
    "nhd" [N, H, d] (flash-attn without batch); None infers it where only one of the 4-axis layouts fits
    (else ValueError naming the candidates); 3 axes are read as hnd unless "nhd" is given. k, v may have fewer heads (GQA).
    is_causal / causal: causal mask, top-left aligned (SDPA) unless causal_align="bottom-right" (flash-attn,
    n_q != n_k); scale / softmax_scale: default 1/sqrt(d);
    window_size=(left, right): flash-attn's window (-1: unbounded side), bottom-right aligned unless causal_align
    says otherwise; softcap: flash-attn's logit softcap; alibi_slopes ([H], flash-attn's, or [B, H]) or alibi=True
    (the geometric slopes): ALiBi, alibi_form "flash" (-slope |i + n_k - n_q - j|) or "torch" (slope (j - i));
    sinks [H, K]: attention-sink logits (batch 1), scored with dsinks; keep [B, H, n_q, n_k] (0/1) with
    dropout_p: the kernel's dropout mask, kept weights scaled by 1 / (1 - dropout_p) (the oracle applies exactly
    that mask). enable_gqa=False refuses GQA shapes.
    lse: the kernel's log-sum-exp [B, H, n_q] (natural log with the softmax scale, flash-attn's softmax_lse);
    where a row sees no key the oracle's -inf and flash-attn's +inf are both accepted.
    rule: one of "expect" (recipe-relative: the error statistics within a band around those of the recipe
    `expect` run on the same inputs; README.md "The default verdict"), "abs-rel" (|a-b| <= atol + rtol|b|,
    atol = rtol = 0.01 by default), "torch" (torch.testing.assert_close's defaults for the output's dtype),
    "fa" (max error <= 2x (o) / 3x (grads) that of the naive reference in the inputs' dtype), "sdpa"
    (PyTorch SDPA tests' fudge factors), a list of them, or "all". Default: "expect", or "torch" for float64
    kernels (expect, fa and sdpa need a reference in the kernel's dtype: ValueError for float64). Every rule's
    ratio is reported when its reference ran: expect's by default or when chosen (or expect= given), fa's and
    sdpa's when one of them is chosen or "all" (the naive reference runs only then); `rule` picks which
    decide Score.passed.
    expect: the expect rule's recipe (a preset name such as "fa2-h100", a recipe file or text); None: fa2. It
    is put in the kernel's format (fa2 for an fp16 kernel rounds P and dS to fp16).
    ulp_fmt: count ULPs in this format instead of each output's own. oracle: "fast" or "mpfr", or the Oracle
    that oracle() returned for the same inputs and problem (reused, not recomputed; ValueError when it was
    computed for others). cache: a folder of the on-disk oracle cache shared with `attnacc run/score --cache` and
    the sweeps (read when it holds these inputs' oracle, else computed and stored).
    kernel_dtype: the format the kernel computes in ("bf16", "fp16", "fp32", "fp64" or a torch dtype) when the
    tensors were stored wider (a BF16 kernel's tensors saved as float32): the fa and sdpa rules then compare with
    a naive reference in that format, the expect recipe runs in it and ULPs are counted in it; every input must
    hold only its values. Without it, the expect recipe's format is inferred from the values (a UserWarning
    says so when they are all BF16 or FP16 though stored wider).
    threads: 0 (all cores) to 4096, as the command's --threads.
    bf16_bits: int16/uint16 numpy arrays hold BF16 bit patterns.
    max_memory, max_seconds: the limits of the up-front estimate (module docstring; LimitError beyond them).
    cu_seqlens_q / cu_seqlens_k: a varlen batch as flash_attn_varlen_func takes it: packed [total, H, d]
    tensors (layout "nhd") and B + 1 offsets from 0 (int tensors or arrays; cu_seqlens_k defaults to
    cu_seqlens_q). Each sequence is its own problem (causal and windows apply within it); metrics and
    rules cover all packed elements.
    attn_mask: SDPA's attn_mask (bool, True attends; or float, added to the scores after the softcap, -inf
    masks), numpy or torch, [Nq, Nk], [H or 1, Nq, Nk] or [B or 1, H or 1, Nq, Nk]; key_len: the key lengths of
    a padded batch (one int, or one per batch element); logit_offset: a constant added to every score (every LSE
    moves by it, nothing else). A row left with no key has O = 0 and no gradient (lib/problem.h): a kernel's 0
    there is exact, its NaN counts as NaN.
    device: where the fast oracle and the emulated recipes run: "auto" (default: a GPU where this libattnacc was
    built with CUDA, one is present and the problem is implemented there), "cpu" or "cuda" (without
    a GPU: ValueError). Every value is the same on either; tensors on a GPU are copied to the host first.
    Returns a Score (passed, outputs[name].rules[rule].ratio, summary(), to_dict()).
    """
    return score_many(q, k, v, do, [dict(o=o, dq=dq, dk=dk, dv=dv, dsinks=dsinks, lse=lse)], layout=layout,
                      is_causal=is_causal, causal=causal, causal_align=causal_align, scale=scale,
                      softmax_scale=softmax_scale, window_size=window_size, softcap=softcap, alibi=alibi,
                      alibi_slopes=alibi_slopes, alibi_form=alibi_form, sinks=sinks, keep=keep, dropout_p=dropout_p,
                      enable_gqa=enable_gqa, rule=rule, atol=atol, rtol=rtol, ulp_fmt=ulp_fmt, oracle=oracle,
                      cache=cache, threads=threads, bf16_bits=bf16_bits, cu_seqlens_q=cu_seqlens_q,
                      cu_seqlens_k=cu_seqlens_k, max_memory=max_memory, max_seconds=max_seconds,
                      kernel_dtype=kernel_dtype, expect=expect, attn_mask=attn_mask, key_len=key_len,
                      logit_offset=logit_offset, device=device)[0]


def _expect_arg(expect, rules):
    """opts.expect: None when the expect rule is neither the default nor chosen and no recipe is named."""
    if expect is not None:
        if isinstance(expect, os.PathLike):
            expect = os.fspath(expect)
        return _str_arg("expect", expect).encode()
    return b"" if rules is None or "expect" in rules else None


def score_many(q, k, v, do, sets, *, rule=None, max_memory=None, max_seconds=None, kernel_dtype=None, expect=None,
               bf16_bits=False, **kwargs):
    """score() for several kernels' outputs on the same inputs: sets is a list of dicts with any of o, dq, dk,
    dv, dsinks, lse. The oracle, the naive reference and the expect recipe run once for all of them. Returns a list
    of Score in the order of sets. Keywords as score()."""
    rules = _rules_arg(rule)
    bf16_bits = _flag_arg("bf16_bits", bf16_bits)
    if not isinstance(sets, (list, tuple)) or not sets or not all(isinstance(x, dict) for x in sets):
        raise TypeError("attnacc: sets must be a non-empty list of dicts of o, dq, dk, dv, dsinks, lse")
    for x in sets:
        if set(x) - set(SCORED) or all(x.get(n) is None for n in SCORED):
            raise ValueError(f"attnacc: each set holds one or more of {', '.join(SCORED)} (got {sorted(x)})")
    shapes = [_shape(x, n) for x, n in zip((q, k, v, do), ("q", "k", "v", "do"))]
    kw = dict(layout=None, is_causal=False, causal=None, causal_align=None, scale=None, softmax_scale=None,
              window_size=None, softcap=None, alibi=None, alibi_slopes=None, alibi_form="flash", sinks=None,
              keep=None, dropout_p=None, enable_gqa=None, atol=0.01, rtol=0.01, ulp_fmt=None, oracle="fast",
              cache=None, threads=0, cu_seqlens_q=None, cu_seqlens_k=None, attn_mask=None, key_len=None,
              logit_offset=0.0, device=None)
    if set(kwargs) - set(kw):
        raise TypeError(f"attnacc: unknown keyword {sorted(set(kwargs) - set(kw))[0]!r}")
    kw.update(kwargs)
    path, kept = _oracle_arg(kw["oracle"])
    # the naive reference only for its rules (fa, sdpa): the default rule reads nothing of it
    naive = rules is not None and any(r in ("fa", "sdpa") for r in rules)
    opts = _opts(_layout_arg(kw["layout"], kw["cu_seqlens_q"]), kw["is_causal"], kw["causal"], kw["scale"],
                 kw["softmax_scale"], kw["window_size"], kw["enable_gqa"], kw["atol"], kw["rtol"], kw["ulp_fmt"],
                 path, kw["threads"], naive, shapes[0], shapes[1], kw["device"])
    alive = _features(opts, kw["causal_align"], kw["softcap"], kw["alibi"], kw["alibi_slopes"], kw["alibi_form"],
                      kw["sinks"], kw["keep"], kw["dropout_p"], kw["cache"], kept)
    alive.append(_varlen(opts, kw["cu_seqlens_q"], kw["cu_seqlens_k"]))  # alive during the call
    alive.append(_masks(opts, kw["attn_mask"], kw["key_len"], kw["logit_offset"]))
    alive.append(_expect_arg(expect, rules))
    opts.expect = alive[-1]
    # the given outputs, the naive reference, the expect recipe, our copies
    _budget(opts, shapes, 3 + len(sets), max_memory, max_seconds)
    arrs = [_as_array(x, n, bf16_bits) for x, n in zip((q, k, v, do), ("q", "k", "v", "do"))]
    outs = [_as_array(x.get(n), n, bf16_bits) if n in OUTPUTS else _as_out(x.get(n), n) for x in sets for n in SCORED]
    kf = _kernel_fmt(kernel_dtype, arrs)
    if kf is not None:
        arrs = [(a, kf) for a, _ in arrs]
        if kw["ulp_fmt"] is None and FMTS[kf] != "fp64":
            opts.ulp_fmt = kf
    ins = (_lib.FlatTensor * 4)(*[_flat(a, f) for a, f in arrs])
    gs = (_lib.FlatTensor * len(outs))(*[_flat(a, f) for a, f in outs])
    res = (_lib.FlatOut * len(outs))()
    info = _lib.FlatInfo()
    msg = ctypes.create_string_buffer(1024)
    t0 = time.perf_counter()
    rc = _lib.lib().aa_flat_score_sets(res, ctypes.byref(info), ins, gs, len(sets), ctypes.byref(opts), msg,
                                       len(msg))
    seconds = time.perf_counter() - t0  # the oracle and the references are most of the call
    if rc != 0:
        _raise(rc, msg.value)
    if info.kernel_fmt_inferred:
        warnings.warn(f"attnacc: every input and output value is {FMTS[info.kernel_fmt]} though stored as "
                      f"{FMTS[info.input_fmt]}: the expect rule judged a {FMTS[info.kernel_fmt]} kernel; pass "
                      f"kernel_dtype= to say which precision the kernel computes in", UserWarning, stacklevel=3)
    n = _lib.NOUT
    return [_finish(res[n * i:n * i + n], info, rules, opts, seconds) for i in range(len(sets))]


def assert_accurate(q, k, v, do, o=None, dq=None, dk=None, dv=None, *, rule=None, msg=None, **kwargs):
    """score(...) and raise AssertionError, in the style of torch.testing.assert_close, when a chosen
    rule fails on any given output: the message names the output, the rule, the layout, the mismatched
    element count (elementwise rules), the greatest absolute and relative differences with their
    indices in the caller's layout, and the oracle's value there. Returns the Score when it passes."""
    res = score(q, k, v, do, o=o, dq=dq, dk=dk, dv=dv, rule=rule, **kwargs)
    if not res.passed:
        text = "\n\n".join(_explain(res, n, r) for n, r in res.failures())
        raise AssertionError(text if msg is None else f"{msg}\n\n{text}")
    return res


class Oracle(dict):
    """What oracle() returns: a dict of "o", "lse", "dq", "dk", "dv" (float64 numpy arrays in the inputs' layout),
    "relerr_bound" and "layout", which also keeps the library's certified result (with its FP32 and BF16
    roundings) for score(..., oracle=this) and emulate(..., oracle=this) to reuse on the same inputs and problem
    instead of computing it again. path: the oracle path it ran on. release() frees the kept result early."""

    def __init__(self, values, kept, path):
        super().__init__(values)
        self._kept = kept
        self.path = path

    def release(self):
        if self._kept is not None:
            _lib.lib().aa_flat_kept_free(self._kept)
            self._kept = None

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown: the module's globals may be gone; the process frees it anyway
            pass


def oracle(q, k, v, do=None, *, layout=None, is_causal=False, causal=None, causal_align=None, scale=None,
           softmax_scale=None, window_size=None, softcap=None, alibi=None, alibi_slopes=None, alibi_form="flash",
           sinks=None, keep=None, dropout_p=None, enable_gqa=None, oracle="fast", cache=None, threads=0,
           bf16_bits=False, cu_seqlens_q=None, cu_seqlens_k=None, max_memory=None, max_seconds=None, attn_mask=None,
           key_len=None, logit_offset=0.0, device=None):
    """The exact o, lse, dq, dk, dv (float64 numpy arrays in the inputs' layout; lse [B, H, N]) of
    attention on the given values, each within the certified relative bound returned as 'relerr_bound'.
    do=None uses zeros (o and lse stay exact; the gradients are then zero). cu_seqlens_q / _k: a varlen
    batch of packed [total, H, d] tensors, as in score(). The problem features (causal_align, window_size,
    softcap, alibi, alibi_slopes, alibi_form, sinks, keep, dropout_p), cache, threads, max_memory, max_seconds:
    as in score(). attn_mask, key_len, logit_offset, device: as in score(). Returns an Oracle (a dict) that
    score(..., oracle=it) reuses."""
    bf16_bits = _flag_arg("bf16_bits", bf16_bits)
    shapes = [_shape(x, n) for x, n in zip((q, k, v), ("q", "k", "v"))]
    shapes.append(shapes[0] if do is None else _shape(do, "do"))
    path, kept = _oracle_arg(oracle)
    opts = _opts(_layout_arg(layout, cu_seqlens_q), is_causal, causal, scale, softmax_scale, window_size, enable_gqa,
                 None, None, None, path, threads, False, shapes[0], shapes[1], device)
    alive = _features(opts, causal_align, softcap, alibi, alibi_slopes, alibi_form, sinks, keep, dropout_p, cache,
                      kept)
    alive.append(_varlen(opts, cu_seqlens_q, cu_seqlens_k))  # alive during the call
    alive.append(_masks(opts, attn_mask, key_len, logit_offset))
    _budget(opts, shapes, 1, max_memory, max_seconds)  # our copies and the result arrays
    arrs = [_as_array(x, n, bf16_bits) for x, n in zip((q, k, v), ("q", "k", "v"))]
    if do is None:
        arrs.append((np.zeros_like(arrs[0][0]), arrs[0][1]))
    else:
        arrs.append(_as_array(do, "do", bf16_bits))
    ins = (_lib.FlatTensor * 4)(*[_flat(a, f) for a, f in arrs])
    qa, ka = arrs[0][0], arrs[1][0]
    o = np.empty_like(qa)
    dq = np.empty_like(qa)
    dk = np.empty_like(ka)
    dv = np.empty_like(ka)
    lse = np.empty(qa.size // qa.shape[-1])
    info = _lib.FlatInfo()
    msg = ctypes.create_string_buffer(1024)
    dp = ctypes.POINTER(ctypes.c_double)
    handle = ctypes.c_void_p()
    rc = _lib.lib().aa_flat_oracle(o.ctypes.data_as(dp), lse.ctypes.data_as(dp), dq.ctypes.data_as(dp),
                                   dk.ctypes.data_as(dp), dv.ctypes.data_as(dp), ctypes.byref(handle),
                                   ctypes.byref(info), ins, ctypes.byref(opts), msg, len(msg))
    if rc != 0:
        _raise(rc, msg.value)
    lay = LAYOUTS[info.layout]
    if lay in ("bhnd", "bnhd"):
        lse = lse.reshape(info.b, info.h, info.n_q)
    elif lay in ("hnd", "nhd"):
        lse = lse.reshape(info.h, info.n_q)
    values = {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv, "relerr_bound": info.oracle_relerr_bound,
              "layout": lay}
    return Oracle(values, handle.value, path)  # nothing kept when it reused a kept one (oracle=)


def emulate(recipe, q, k, v, do, *, layout=None, is_causal=False, causal=None, causal_align=None, scale=None,
            softmax_scale=None, window_size=None, softcap=None, alibi=None, alibi_slopes=None, alibi_form="flash",
            sinks=None, keep=None, dropout_p=None, enable_gqa=None, rule=None, atol=0.01, rtol=0.01, ulp_fmt=None,
            oracle="fast", cache=None, threads=0, bf16_bits=False, cu_seqlens_q=None, cu_seqlens_k=None,
            max_memory=None, max_seconds=None, attn_mask=None, key_len=None, logit_offset=0.0, device=None):
    """Run a precision recipe (a preset name such as "fa2" or "nki", a recipe file's path, or recipe text
    with "key = value" lines) on the inputs in attnacc's bit-faithful emulation (CPU or GPU: the same bits), and score it.

    The inputs are first rounded to the recipe's io format (bf16 for the presets); the oracle sees the
    rounded values. Returns a dict: "o", "dq", "dk", "dv" (float64 numpy arrays in the inputs' layout,
    holding values of the recipe's output format), "score" (a Score, as score() returns), "recipe" (its
    name) and "rounded" (how many input values the rounding changed). cu_seqlens_q / _k: a varlen batch
    of packed [total, H, d] tensors, as in score(); each sequence is emulated on its own. The problem features,
    oracle (a path or an Oracle to reuse), cache, threads, max_memory, max_seconds, attn_mask, key_len, logit_offset,
    device: as in score() (the recipe's mask.* keys say how the emulated kernel treats masked keys and fully masked
    rows)."""
    rules = _rules_arg(rule)
    if isinstance(recipe, os.PathLike):
        recipe = os.fspath(recipe)
    recipe = _str_arg("recipe", recipe)
    bf16_bits = _flag_arg("bf16_bits", bf16_bits)
    shapes = [_shape(x, n) for x, n in zip((q, k, v, do), ("q", "k", "v", "do"))]
    path, kept = _oracle_arg(oracle)
    naive = rules is None or any(r in ("fa", "sdpa") for r in rules)
    opts = _opts(_layout_arg(layout, cu_seqlens_q), is_causal, causal, scale, softmax_scale, window_size, enable_gqa,
                 atol, rtol, ulp_fmt, path, threads, naive, shapes[0], shapes[1], device)
    alive = _features(opts, causal_align, softcap, alibi, alibi_slopes, alibi_form, sinks, keep, dropout_p, cache,
                      kept)
    alive.append(_varlen(opts, cu_seqlens_q, cu_seqlens_k))  # alive during the call
    alive.append(_masks(opts, attn_mask, key_len, logit_offset))
    opts.expect = _expect_arg(None, rules)
    _budget(opts, shapes, 4, max_memory, max_seconds)  # the recipe's outputs, the naive and expect ones, our copies
    arrs = [_as_array(x, n, bf16_bits) for x, n in zip((q, k, v, do), ("q", "k", "v", "do"))]
    ins = (_lib.FlatTensor * 4)(*[_flat(a, f) for a, f in arrs])
    qa, ka = arrs[0][0], arrs[1][0]
    bufs = [np.empty_like(qa), np.empty_like(qa), np.empty_like(ka), np.empty_like(ka)]
    res = (_lib.FlatOut * 4)()
    info = _lib.FlatInfo()
    msg = ctypes.create_string_buffer(1024)
    dp = ctypes.POINTER(ctypes.c_double)
    t0 = time.perf_counter()
    rc = _lib.lib().aa_flat_emulate(*[b.ctypes.data_as(dp) for b in bufs], res, ctypes.byref(info), ins,
                                    recipe.encode(), ctypes.byref(opts), msg, len(msg))
    seconds = time.perf_counter() - t0  # oracle and emulation together
    if rc != 0:
        _raise(rc, msg.value)
    out = dict(zip(OUTPUTS, bufs))
    out["score"] = _finish(res, info, rules, opts, seconds)
    out["recipe"] = info.recipe.decode()
    out["rounded"] = info.rounded
    return out


# The input distributions of lib/layout.h (AA_DIST_* in this order).
DISTS = ("normal", "uniform", "outlier", "constant", "near-constant", "huge-keys", "massive")


def draw(n, d, *, heads=1, kv_heads=None, n_k=None, seed=1, dist="normal", sigma=1.0, dtype="bf16"):
    """The inputs `attnacc run --n N --n-q N --d D --heads H --kv-heads HKV --seed S --dist DIST --sigma X` draws
    (lib/layout.h), as float64 numpy arrays holding values of dtype ("bf16", "fp16", "fp32", "fp64"): a dict with
    q and do [H, n, d], k and v [HKV, n_k, d] (n_k defaults to n). dist: one of DISTS; "constant" (every value
    sigma: ties at the row max), "near-constant", "huge-keys" and "massive" aim at the magnitudes where kernels
    give NaN or Inf."""
    dist = _str_arg("dist", dist, DISTS).lower()
    dt = _str_arg("dtype", dtype, FMTS).lower()
    n, d, heads = (_int_arg(nm, x, 1, 2 ** 31 - 1) for nm, x in (("n", n), ("d", d), ("heads", heads)))
    kvh = heads if kv_heads is None else _int_arg("kv_heads", kv_heads, 1, heads)
    nk = n if n_k is None else _int_arg("n_k", n_k, 1, 2 ** 31 - 1)
    seed = _int_arg("seed", seed, 0, 2 ** 64 - 1)
    sigma = _real_arg("sigma", sigma, positive=True)
    out, msg = {}, ctypes.create_string_buffer(1024)
    for i, (name, h, rows) in enumerate((("q", heads, n), ("k", kvh, nk), ("v", kvh, nk), ("do", heads, n))):
        a = np.empty((h, rows, d))
        rc = _lib.lib().aa_flat_draw(a.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), seed, i, h, rows, d,
                                     DISTS.index(dist), sigma, FMTS.index(dt), msg, len(msg))
        if rc != 0:
            _raise(rc, msg.value)
        out[name] = a
    return out


_lib.lib()  # load libattnacc and check its ABI now: a mismatch is an ImportError of `import attnacc`
