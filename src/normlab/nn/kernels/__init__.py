"""Fused CPU RMSNorm / LayerNorm (C++, `norm_kernels.cpp`), compiled at first use.

Stock PyTorch has a fused CPU kernel for LayerNorm but none for RMSNorm: eager
`torch.nn.RMSNorm` is a chain of elementwise ops, 3-11x slower than LayerNorm
forward+backward. The kernels here do a whole row per pass (statistics in fp32,
fp64 for fp64 input), and the autograd function around them is C++ too. They are
built with torch.utils.cpp_extension.load (gcc, ninja) into torch's extension cache
(TORCH_EXTENSIONS_DIR, default ~/.cache/torch_extensions), once per source, torch
version and CPU: about 25 s on an idle 2-core machine, later processes load it in
a fraction of a second.

Which implementation the normalizers run:

    NORMLAB_NORM_IMPL=auto       (default) the fused kernel where it was measured faster than
                                 torch's own code (AUTO_FAST): rmsnorm always, layernorm for bf16
    NORMLAB_NORM_IMPL=fast       the fused kernel wherever it applies
    NORMLAB_NORM_IMPL=reference  the plain torch code in normlab.nn.norms

or `set_norm_impl(...)` / `with norm_impl(...):` from Python. The fused kernel
applies to CPU tensors of dtype float32, float64 or bfloat16 outside
torch.compile (inductor fuses the reference code itself, and an opaque extension
call would break its graph). If the extension cannot be built, the reference
code runs and the logger 'normlab' says so once per normalizer.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import sys
import threading
from pathlib import Path

import torch

log = logging.getLogger("normlab")

IMPLS = ("auto", "fast", "reference")
FAST_DTYPES = (torch.float32, torch.float64, torch.bfloat16)
# Where `auto` picks the fused kernel: normalizer -> input dtypes. Measured with
# `normlab bench --only norms` (forward+backward, shapes (768, 128) to (8192, 4096)):
# the fused RMSNorm is 4-6x faster than the eager reference (a chain of elementwise
# ops) in every dtype. torch's F.layer_norm is a fused native kernel too: for fp32 our
# LayerNorm is only as fast (0.99-1.3x its time), so auto keeps F.layer_norm there; for
# bf16 input ours is 1.3-3.5x faster than normlab's reference (which upcasts to fp32).
AUTO_FAST = {"rmsnorm": FAST_DTYPES, "layernorm": (torch.bfloat16,)}

SOURCE = Path(__file__).with_name("norm_kernels.cpp")
CFLAGS = ["-O3", "-march=native", "-fopenmp"]

_impl = os.environ.get("NORMLAB_NORM_IMPL", "auto").strip().lower() or "auto"
_ext = None
_ext_error: str | None = None
_lock = threading.Lock()
_announced: set[tuple[str, str, str]] = set()


# -- choosing the implementation --------------------------------------------------------

def set_norm_impl(impl: str) -> None:
    """Pick `auto`, `fast` or `reference` for every normalizer from now on."""
    global _impl
    if impl not in IMPLS:
        raise ValueError(f"unknown norm implementation {impl!r}; valid: {', '.join(IMPLS)}")
    _impl = impl


def get_norm_impl() -> str:
    if _impl not in IMPLS:  # a bad environment variable is reported where it is used
        raise ValueError(f"NORMLAB_NORM_IMPL={_impl!r} is not one of {', '.join(IMPLS)}")
    return _impl


@contextlib.contextmanager
def norm_impl(impl: str):
    """`with norm_impl("reference"): ...` runs the block with that implementation."""
    before = get_norm_impl()
    set_norm_impl(impl)
    try:
        yield
    finally:
        set_norm_impl(before)


def use_fast(norm: str, x: torch.Tensor) -> bool:
    """Whether normalizer `norm` should run the fused kernel on `x` now."""
    impl = get_norm_impl()
    if impl == "reference" or torch.compiler.is_compiling():
        return False
    if x.device.type != "cpu" or x.dtype not in FAST_DTYPES or x.ndim == 0 or x.shape[-1] == 0:
        return False
    if impl == "auto" and x.dtype not in AUTO_FAST.get(norm, ()):
        _announce(norm, "reference", f"auto: not faster than torch's own kernel for {x.dtype}")
        return False
    if extension() is None:
        _announce(norm, "reference", f"fused kernels unavailable: {_ext_error}", logging.WARNING)
        return False
    _announce(norm, "fast", f"fused C++ kernel, NORMLAB_NORM_IMPL={impl}")
    return True


def _announce(norm: str, path: str, why: str, level: int = logging.INFO) -> None:
    """One log line per normalizer and path (and reason): which implementation runs, and why."""
    if (norm, path, why) not in _announced:
        _announced.add((norm, path, why))
        log.log(level, "%s runs the %s implementation (%s)", norm, path, why)


# -- building the extension -------------------------------------------------------------

def extension():
    """The compiled module, building it on first call; None if it cannot be built."""
    global _ext, _ext_error
    if _ext is not None or _ext_error is not None:
        return _ext
    with _lock:
        if _ext is None and _ext_error is None:
            try:
                _ext = _load()
            except Exception as e:  # a missing compiler, headers, ninja...: fall back, say why
                lines = str(e).strip().splitlines()
                _ext_error = f"{type(e).__name__}: {lines[-1] if lines else ''}"
    return _ext


def _load():
    from torch.utils import cpp_extension

    log.debug("building the fused norm kernels (first use; about a minute)")
    # the `ninja` wheel installs its binary beside this interpreter, which need not be on PATH
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    return cpp_extension.load(name=_build_name(), sources=[str(SOURCE)], extra_cflags=CFLAGS,
                              extra_ldflags=["-fopenmp"], verbose=False)


def _build_name() -> str:
    """A name per source, flags, torch and CPU: -march=native code must not run on another CPU."""
    h = hashlib.sha256()
    for part in (SOURCE.read_bytes(), " ".join(CFLAGS).encode(), torch.__version__.encode(),
                 _cpu_signature().encode()):
        h.update(part)
    return f"normlab_norm_kernels_{h.hexdigest()[:12]}"


def _cpu_signature() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def unavailable_reason() -> str | None:
    """Why the extension could not be built (None if it was, or was not tried yet)."""
    return _ext_error


def reset_for_tests() -> None:
    """Forget the loaded extension, its error and what was logged (tests only)."""
    global _ext, _ext_error
    _ext, _ext_error = None, None
    _announced.clear()


# -- the normalizers -------------------------------------------------------------------
# The autograd function is the extension's (C++): see FusedNorm in norm_kernels.cpp.

def _require():
    ext = extension()
    if ext is None:
        raise RuntimeError(f"normlab's fused norm kernels are unavailable: {_ext_error}")
    return ext


def fast_rms_norm(x, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
    """x / sqrt(mean(x²) + eps) · weight + bias over the last dim, fused; x's dtype out."""
    return _require().fused_norm(x, weight, bias, float(eps), False)


def fast_layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
    """(x − mean) / sqrt(var + eps) · weight + bias over the last dim, fused; x's dtype out."""
    return _require().fused_norm(x, weight, bias, float(eps), True)
