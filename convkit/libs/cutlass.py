"""CUTLASS's convolution forward as a peer (impl ``cutlass``): its SM80 3xTF32 kernels and its SIMT FP32 kernels.

``cutlass_fprop.cu`` beside this module instantiates them at a few threadblock tiles (:data:`KERNELS`) behind one
C function; :func:`library` builds it once with ``nvcc`` from the headers that ship in the ``nvidia-cutlass``
wheel (its ``cutlass_library`` package) into the user's cache, and loads it with ctypes. CUTLASS runs
convolutions in NHWC with KRSC filters: :func:`prepared` transforms the operands before the timed call and the
output after it, so a measured time is CUTLASS's kernel alone (the book says so); :func:`conv2d` does all of it.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from convkit.core.gpu import has_tf32_tensor_cores
from convkit.core.memo import memoize
from convkit.core.paths import cache_dir
from convkit.core.problem import ConvProblem
from convkit.families.registry import Variant

IMPL = "cutlass"
#: The kernels of ``cutlass_fprop.cu``, in its order: (variant name, input precision).
KERNELS: tuple[tuple[str, str], ...] = (
    ("cutlass_tf32x3_128x64", "tf32x3"),  # example 28's tile
    ("cutlass_tf32x3_128x128", "tf32x3"),
    ("cutlass_tf32x3_64x64", "tf32x3"),
    ("cutlass_tf32x3_256x64", "tf32x3"),
    ("cutlass_simt_128x128", "ieee"),
    ("cutlass_simt_64x64", "ieee"),
)
INDEX = {name: i for i, (name, _) in enumerate(KERNELS)}
SOURCE = Path(__file__).with_name("cutlass_fprop.cu")
_WORKSPACE, _CAN_IMPLEMENT, _RUN = 0, 1, 2


def headers() -> Path | None:
    """CUTLASS's include directory from the ``nvidia-cutlass`` wheel, found without importing it; None if absent."""
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    include = Path(next(iter(spec.submodule_search_locations))) / "source" / "include"
    return include if (include / "cutlass" / "cutlass.h").is_file() else None


def available() -> bool:
    """Whether the peer can be built here: CUTLASS's headers and ``nvcc``."""
    from convkit.cuda.ptxas import find_nvcc

    return headers() is not None and find_nvcc() is not None


@memoize()
def library() -> Any:
    """The shim, built once per source, CUTLASS version and nvcc into ``$XDG_CACHE_HOME/convkit`` and loaded."""
    from convkit.cuda.ptxas import find_nvcc

    include, nvcc = headers(), find_nvcc()
    if include is None or nvcc is None:
        raise RuntimeError("the CUTLASS peer needs the nvidia-cutlass wheel's headers and nvcc on the PATH")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    digest = hashlib.sha256((SOURCE.read_text() + str(include) + version).encode()).hexdigest()[:16]
    root = cache_dir()
    path = root / f"cutlass_fprop-{digest}.so"
    if not path.is_file():
        root.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        command = [nvcc, "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr",
                   "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
                   f"-I{include}", "-o", str(partial), str(SOURCE)]  # fmt: skip
        built = subprocess.run(command, capture_output=True, text=True)
        if built.returncode:
            raise RuntimeError(f"building the CUTLASS peer failed:\n{built.stderr[-4000:]}")
        partial.replace(path)  # atomic: a concurrent build leaves one whole file
    shim = ctypes.CDLL(str(path))
    shim.convkit_cutlass_fprop.restype = ctypes.c_longlong
    shim.convkit_cutlass_fprop.argtypes = [ctypes.c_int] * 14 + [ctypes.c_void_p] * 5
    return shim


def _call(kernel: str, action: int, p: ConvProblem, x: int = 0, w: int = 0, y: int = 0, work: int = 0,
          stream: int = 0) -> int:  # fmt: skip
    dims = (p.n, p.h, p.w, p.c, p.m, p.r, p.s, p.out_h, p.out_w, p.pad, p.stride, 1)
    return library().convkit_cutlass_fprop(INDEX[kernel], action, *dims, x, w, y, work, stream)


def supports(kernel: str, problem: ConvProblem) -> bool:
    """Whether ``kernel`` runs ``problem`` here: the shim built, TF32 tensor cores for a 3xTF32 kernel, and
    CUTLASS's own ``can_implement`` (its tensor-core kernels read 4 floats at a time: C and M multiples of 4)."""
    if not available() or (dict(KERNELS)[kernel] == "tf32x3" and not has_tf32_tensor_cores()):
        return False
    return _call(kernel, _CAN_IMPLEMENT, problem) == 0


def prepared(
    kernel: str, problem: ConvProblem, x: Any, w: Any, y: Any
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(run, check_run) of ``kernel`` on NCHW ``x`` and MCRS ``w`` into NCHW ``y``: ``run`` is CUTLASS's kernel alone
    on NHWC copies made here; ``check_run`` runs it and transforms its output back into ``y``."""
    import cupy

    x_nhwc = cupy.ascontiguousarray(x.transpose(0, 2, 3, 1))
    w_krsc = cupy.ascontiguousarray(w.transpose(0, 2, 3, 1))
    y_nhwc = cupy.empty((problem.n, problem.out_h, problem.out_w, problem.m), dtype=cupy.float32)
    need = _call(kernel, _WORKSPACE, problem)
    work = cupy.empty(max(need, 1), dtype=cupy.uint8)

    def run() -> None:
        stream = cupy.cuda.get_current_stream().ptr
        status = _call(kernel, _RUN, problem, x_nhwc.data.ptr, w_krsc.data.ptr, y_nhwc.data.ptr, work.data.ptr, stream)
        if status:
            raise RuntimeError(f"CUTLASS {kernel} failed on {problem.key}: cutlass::Status {-status}")

    def check_run() -> None:
        run()
        y[...] = y_nhwc.transpose(0, 3, 1, 2)

    return run, check_run


def conv2d(kernel: str, x: Any, w: Any, problem: ConvProblem, out: Any) -> None:
    """``out`` = the convolution of ``x`` and ``w`` by CUTLASS's ``kernel``, layout transforms included."""
    prepared(kernel, problem, x, w, out)[1]()


def _peer(name: str, precision: str) -> Variant:
    return Variant(name, lambda a, p, launch=None: conv2d(name, a.x, a.w, p, a.out),
                   applies_to=lambda p: supports(name, p), impl=IMPL, precision=precision)  # fmt: skip


#: Every CUTLASS kernel as a library peer, one per tile (peers are measured at their own launch, not tuned).
PEERS: tuple[Variant, ...] = tuple(_peer(name, precision) for name, precision in KERNELS)
