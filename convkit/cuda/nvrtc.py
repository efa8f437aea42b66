"""Compiling ``kernels/*.cu`` at run time with NVRTC (through CuPy's bindings, not its ``RawModule``: see
:class:`_Module`).

:func:`load_kernel` builds a source once per (source text, options, architecture) for the GPU in use and
hands back its kernel; ahead of time, :mod:`convkit.cuda.ptxas` compiles the same source text.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from convkit.core.gpu import compute_capability, ptx_arch, require_cupy
from convkit.core.memo import memoize
from convkit.core.paths import kernels_dir, replace_text

#: Options every kernel is built with, at run time and ahead of time alike.
COMMON_OPTIONS: tuple[str, ...] = ("-std=c++17",)


def kernel_source(name: str) -> Path:
    """Path of ``kernels/<name>.cu``; raises FileNotFoundError naming the file."""
    path = kernels_dir() / f"{name}.cu"
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA source {path}")
    return path


_LOCAL_INCLUDE = re.compile(r'^#include "(?P<name>[\w.]+)"[^\n]*$', re.MULTILINE)


def kernel_code(name: str) -> str:
    """The text of ``kernels/<name>.cu`` with its ``#include "x.cuh"`` of ``kernels/`` headers inlined, theirs too,
    each header once (they are all ``#pragma once``), so NVRTC needs no include path and the build cache key covers
    the headers too."""
    inlined: set[str] = set()

    def inline(match: re.Match[str]) -> str:
        header = kernels_dir() / match.group("name")
        if not header.is_file():
            raise FileNotFoundError(f"kernels/{name}.cu includes {match.group('name')}, not in {kernels_dir()}")
        if header.name in inlined:
            return ""
        inlined.add(header.name)
        return _LOCAL_INCLUDE.sub(inline, header.read_text())

    return _LOCAL_INCLUDE.sub(inline, kernel_source(name).read_text())


def kernel_names(source: str) -> list[str]:
    """The ``extern "C" __global__`` kernels a source defines, in order."""
    # before or after the return type: launch bounds, and a macro of convkit's for attributes (a cluster's size)
    attributes = r"(?:(?:__launch_bounds__\([^)]*\)|CONVKIT_[A-Z_]+)\s+)*"
    return re.findall(rf'extern\s+"C"\s+__global__\s+{attributes}void\s+{attributes}(\w+)', source)


@memoize()
def _module(code_hash: str, code: str, options: tuple[str, ...], arch: str) -> _Module:
    del code_hash  # part of the cache key only
    return _Module(_cached_build(code, options, _buildable(arch)))


class _Module:
    """A module of convkit's own NVRTC build (:func:`_cached_build`), loaded by the driver: a binary for the GPU's own
    architecture, or PTX for a virtual one that the driver JIT-compiles.

    Not ``cupy.RawModule``: CuPy appends ``-ftz=true`` to every NVRTC build it makes, which flushes subnormal values
    to zero in every FP32 instruction. A 3xTF32 split's small part of an input about 1e-35 is subnormal, so a
    flushed build loses it (the error of a layer of such inputs grows from 2e-7 to 2e-4), and an FP32 kernel
    drops the subnormal products that cuDNN keeps."""

    def __init__(self, binary: bytes):
        import cupy

        self._module = cupy.cuda.function.Module()
        self._module.load(binary)

    def get_function(self, kernel: str) -> Any:
        return _Kernel(self._module.get_function(kernel))


def kernel_cache_dir() -> Path:
    """Where built kernels are kept between processes: CuPy's kernel cache folder (``CUPY_CACHE_DIR``, read at each
    build as CuPy reads it), in files of convkit's own (:func:`_cached_build`), so that ``convkit prebuild`` fills it
    and emptying CuPy's cache empties it too."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


def _buildable(arch: str) -> str:
    """``arch``, or where this NVRTC cannot build a binary for it (a GPU newer than the compiler), PTX for the
    newest architecture it can, which the driver compiles for the GPU."""
    if not arch.startswith("sm_"):
        return arch
    from cupy_backends.cuda.libs import nvrtc

    supported = getattr(nvrtc, "getSupportedArchs", None)
    archs = tuple(supported()) if supported else ()
    number = int(arch.removeprefix("sm_").rstrip("af"))
    if not archs or number in archs:
        return arch
    return f"compute_{max((a for a in archs if a <= number), default=min(archs))}"


def _cached_build(code: str, options: tuple[str, ...], arch: str) -> bytes:
    """NVRTC's build of ``code`` for ``arch``, once per machine: a binary (cubin) for a real architecture
    (``sm_90``), PTX for a virtual one (``compute_75``, ``compute_90a``). Kept in :func:`kernel_cache_dir` under the
    hash of what it is built from (the code, the options, the architecture, NVRTC's version); the driver keeps the
    binary it JIT-compiles from PTX in its own cache."""
    from cupy_backends.cuda.libs import nvrtc

    # as CuPy builds for NVRTC 12+: unannotated (constexpr) functions are device functions; subnormals kept
    flags = [*options, *_cuda_include_options(), "--device-as-default-execution-space", "--ftz=false",
             f"--gpu-architecture={arch}"]  # fmt: skip
    key = hashlib.sha256("\0".join((code, *flags, str(nvrtc.getVersion()))).encode()).hexdigest()
    binary = arch.startswith("sm_")
    path = kernel_cache_dir() / f"convkit-{key}.{'cubin' if binary else 'ptx'}"
    if path.is_file():
        return path.read_bytes()
    program = nvrtc.createProgram(code, "convkit.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(program, flags)
        except nvrtc.NVRTCError as exc:
            raise RuntimeError(f"NVRTC failed for {arch}: {exc}\n{nvrtc.getProgramLog(program)}") from None
        built = nvrtc.getCUBIN(program) if binary else nvrtc.getPTX(program)
    finally:
        nvrtc.destroyProgram(program)
    built = built if isinstance(built, bytes) else built.encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, built)
    except OSError:  # a cache that cannot be written: built again by the next process
        pass
    return built


def _cuda_include_options() -> list[str]:
    """``-I`` options for the CUDA headers (``cuda_runtime.h``, ...): CuPy's own list for its NVRTC builds where
    it has one, and the toolkit's include folder."""
    import os

    import cupy

    options = list(getattr(cupy.cuda.compiler, "_get_extra_include_dir_opts", lambda: [])())
    for root in (cupy.cuda.get_cuda_path(), "/usr/local/cuda"):
        if root and os.path.isfile(f"{root}/include/cuda_runtime.h") and f"-I{root}/include" not in options:
            options.append(f"-I{root}/include")
    return options


class _Kernel:
    """A kernel as launchers use it (what they would use of a ``cupy.RawKernel``): the call, and the dynamic
    shared-memory opt-in."""

    def __init__(self, function: Any):
        self._function = function

    def __call__(self, grid: tuple, block: tuple, args: tuple, *, shared_mem: int = 0) -> None:
        self._function(grid, block, args, shared_mem=shared_mem)

    @property
    def kernel(self) -> Any:
        """The ``cupy.cuda.Function``, as ``cupy.RawKernel.kernel`` gives it."""
        return self._function

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        from cupy_backends.cuda.api import driver

        return driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self._function.ptr)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, nbytes: int) -> None:
        from cupy_backends.cuda.api import driver

        driver.funcSetAttribute(self._function.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)


def load_kernel(source: str, kernel: str, *, options: tuple[str, ...] = (), arch: str | None = None) -> Any:
    """``kernel`` of ``kernels/<source>.cu``, built for the current GPU, called as a ``cupy.RawKernel`` is.

    Args:
        source: file stem under ``kernels/`` (``"direct"``).
        kernel: the ``extern "C"`` kernel name.
        options: extra NVRTC options (``-D`` macros for compile-time knobs).
        arch: the architecture the kernel needs (``"sm_90a"``: Hopper's wgmma and TMA), built as its PTX
            (``compute_90a``) for the driver to compile; ValueError where this GPU is another. None: this GPU's
            own (or ``CONVKIT_PTX_ARCH``'s).

    Returns:
        the kernel, compiled once per (source text, options, architecture) and looked up once per
        (source, kernel, options, device) in this process; the build is kept on disk between processes
        (:func:`kernel_cache_dir`). A source edited while a process runs is picked up by the next process.
    """
    require_cupy()
    if arch is not None:
        major, minor = compute_capability()
        if arch.removeprefix("sm_").rstrip("af") != f"{major}{minor}":
            raise ValueError(f"{source}:{kernel} needs {arch}; this GPU is sm_{major}{minor}")
        return _loaded_kernel(source, kernel, tuple(options), arch.replace("sm_", "compute_"))
    return _loaded_kernel(source, kernel, tuple(options), ptx_arch())


@memoize(for_each_device=True)
def _loaded_kernel(source: str, kernel: str, options: tuple[str, ...], ptx: str | None) -> Any:
    """:func:`load_kernel`, remembered per device: a launch finds its kernel without reading a file, running a
    regular expression or hashing (CuPy memoizes its own kernels per device the same way)."""
    code = kernel_code(source)
    if kernel not in kernel_names(code):
        raise ValueError(f"kernels/{source}.cu defines no kernel {kernel!r} (has {kernel_names(code)})")
    major, minor = compute_capability()
    arch = ptx or f"sm_{major}{minor}"
    all_options = COMMON_OPTIONS + tuple(options)
    digest = hashlib.sha256(code.encode()).hexdigest()
    return _module(digest, code, all_options, arch).get_function(kernel)


# ---------------------------------------------------------------------------------------------
# Recording: what a launcher enqueued, to replay it without the launcher (convkit.conv2d's fast path)
