"""Compiling ``kernels/*.cu``: at run time through CuPy (NVRTC), and ahead of time through ``nvcc``.

Run time: :func:`load_kernel` builds a source once per (source text, options, architecture) for
the GPU in use and hands back a ``cupy.RawKernel``; :func:`launch` is the one way a launcher runs a
kernel: it asks a :class:`Launch` (CUTLASS's device adapter, in Python) whether it can implement the
problem, then builds, opts in to its shared memory and launches it on the current stream.

Ahead of time, with no GPU: :func:`ptxas_report` compiles the same source with
``nvcc -cubin -Xptxas -v`` for a given architecture and parses the resource usage of every
kernel (registers, stack frame, spills, shared memory). CI uses it to check that every kernel
builds for the Colab T4 (sm_75) and the H100 (sm_90); the chapters use it as evidence.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from convkit.core.gpu import compute_capability, ptx_arch, require_cupy, shared_memory_limits
from convkit.core.paths import kernels_dir

#: Options every kernel is built with, at run time and ahead of time alike.
COMMON_OPTIONS: tuple[str, ...] = ("-std=c++17",)
#: The architectures CI compiles for: Colab's T4 and the H100.
CHECKED_ARCHS: tuple[str, ...] = ("sm_75", "sm_90")


def kernel_source(name: str) -> Path:
    """Path of ``kernels/<name>.cu``; raises FileNotFoundError naming the file."""
    path = kernels_dir() / f"{name}.cu"
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA source {path}")
    return path


_LOCAL_INCLUDE = re.compile(r'^#include "(?P<name>[\w.]+)"[^\n]*$', re.MULTILINE)


def kernel_code(name: str) -> str:
    """The text of ``kernels/<name>.cu`` with its ``#include "x.cuh"`` of ``kernels/`` headers inlined,
    so NVRTC needs no include path and the build cache key covers the headers too."""

    def inline(match: re.Match[str]) -> str:
        header = kernels_dir() / match.group("name")
        if not header.is_file():
            raise FileNotFoundError(f"kernels/{name}.cu includes {match.group('name')}, not in {kernels_dir()}")
        return header.read_text()

    return _LOCAL_INCLUDE.sub(inline, kernel_source(name).read_text())


def staged_row_stride(width: int, threads_x: int, rows_apart: int) -> int:
    """Row stride (floats) of a staged shared-memory window, as ``conflict_free_stride`` in
    ``kernels/staging.cuh`` computes it: the smallest multiple of 4 from ``width`` at which one LDS.128
    phase (8 lanes, ``threads_x`` per thread row, thread rows ``rows_apart`` staged rows apart) hits 32
    distinct banks; ``width`` rounded up to 4 if none does."""
    first = -(-width // 4) * 4
    if threads_x >= 8:
        return first
    for stride in range(first, first + 32, 4):  # banks repeat every 32 words
        words = [(lane // threads_x) * rows_apart * stride + (lane % threads_x) * 4 + k
                 for lane in range(8) for k in range(4)]  # fmt: skip
        if len({word % 32 for word in words}) == 32:
            return stride
    return first


def kernel_names(source: str) -> list[str]:
    """The ``extern "C" __global__`` kernels a source defines, in order."""
    bounds = r"(?:__launch_bounds__\([^)]*\)\s+)?"  # before or after the return type
    return re.findall(rf'extern\s+"C"\s+__global__\s+{bounds}void\s+{bounds}(\w+)', source)


@functools.cache
def _module(code_hash: str, code: str, options: tuple[str, ...], arch: str) -> Any:
    cupy = require_cupy()
    del code_hash  # part of the cache key only
    if arch.startswith("compute_"):
        return _PtxModule(code, options, arch)
    return cupy.RawModule(code=code, options=options, name_expressions=None)


class _PtxModule:
    """A module built by NVRTC as PTX for a virtual architecture and JIT-compiled by the driver for the GPU in
    hand (CuPy's ``RawModule`` builds for the device's own architecture, whatever ``-arch`` it is given)."""

    def __init__(self, code: str, options: tuple[str, ...], arch: str):
        import cupy
        from cupy_backends.cuda.libs import nvrtc

        program = nvrtc.createProgram(code, "convkit.cu", (), ())
        try:
            try:
                # as CuPy builds for NVRTC 12+: unannotated (constexpr) functions are device functions
                flags = ["--device-as-default-execution-space", f"--gpu-architecture={arch}"]
                nvrtc.compileProgram(program, [*options, *_cuda_include_options(), *flags])
            except nvrtc.NVRTCError as exc:
                raise RuntimeError(f"NVRTC failed for {arch}: {exc}\n{nvrtc.getProgramLog(program)}") from None
            ptx = nvrtc.getPTX(program)
        finally:
            nvrtc.destroyProgram(program)
        self._module = cupy.cuda.function.Module()
        self._module.load(ptx if isinstance(ptx, bytes) else ptx.encode())

    def get_function(self, kernel: str) -> Any:
        return _PtxKernel(self._module.get_function(kernel))


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


class _PtxKernel:
    """What launchers use of a ``cupy.RawKernel``: the call, and the dynamic shared-memory opt-in."""

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


#: Kernels already loaded, by (source, kernel, options, device): a launch finds its kernel without reading
#: a file, running a regular expression or hashing (CuPy memoizes its own kernels per device the same way).
_LOADED: dict[tuple[str, str, tuple[str, ...], int, str | None], Any] = {}


def load_kernel(source: str, kernel: str, *, options: tuple[str, ...] = ()) -> Any:
    """A ``cupy.RawKernel`` for ``kernel`` from ``kernels/<source>.cu``, built for the current GPU.

    Args:
        source: file stem under ``kernels/`` (``"direct"``).
        kernel: the ``extern "C"`` kernel name.
        options: extra NVRTC options (``-D`` macros for compile-time knobs).

    Returns:
        the kernel, compiled once per (source text, options, architecture) and looked up once per
        (source, kernel, options, device) in this process; CuPy also caches the binary on disk between
        processes. A source edited while a process runs is picked up by the next process.
    """
    cupy = require_cupy()
    key = (source, kernel, tuple(options), cupy.cuda.runtime.getDevice(), ptx_arch())
    found = _LOADED.get(key)
    if found is not None:
        return found
    code = kernel_code(source)
    if kernel not in kernel_names(code):
        raise ValueError(f"kernels/{source}.cu defines no kernel {kernel!r} (has {kernel_names(code)})")
    major, minor = compute_capability()
    arch = ptx_arch() or f"sm_{major}{minor}"
    all_options = COMMON_OPTIONS + tuple(options)
    digest = hashlib.sha256(code.encode()).hexdigest()
    found = _LOADED[key] = _module(digest, code, all_options, arch).get_function(kernel)
    return found


#: Dynamic shared memory a block gets without opting in (bytes).
DEFAULT_DYNAMIC_SHARED = 48 * 1024


def with_dynamic_shared(kernel: Any, nbytes: int, what: str) -> Any:
    """``kernel``, opted in to ``nbytes`` of dynamic shared memory per block where that is above the
    default 48 KiB; raises ValueError naming ``what`` (the launch) if this GPU allows less."""
    limit = shared_memory_limits()[0]
    if nbytes > limit:
        raise ValueError(f"{what} needs {nbytes} bytes of shared memory; this GPU allows {limit}")
    if nbytes > DEFAULT_DYNAMIC_SHARED:
        kernel.max_dynamic_shared_size_bytes = nbytes
    return kernel


@runtime_checkable
class Launch(Protocol):
    """What a kernel launch declares before it runs, for one problem.

    Every family's launch objects (frozen dataclasses of their knobs, recorded as a row's ``params``
    through ``as_params``) satisfy this; :func:`launch` is the only code that turns one into a launch.
    """

    #: The file under ``kernels/`` (stem) that defines the kernel.
    source: str

    def kernel_name(self, problem: Any) -> str:
        """The ``extern "C"`` kernel this launch runs on ``problem``."""
        ...

    def options(self, problem: Any) -> tuple[str, ...]:
        """Compile-time options (``-D`` macros) for ``problem``."""
        ...

    def grid(self, problem: Any) -> tuple[int, ...]: ...

    def block(self, problem: Any) -> tuple[int, ...]: ...

    def shared_bytes(self, problem: Any) -> int:
        """Dynamic shared memory per block (bytes)."""
        ...

    def can_implement(self, problem: Any) -> None:
        """Raise ValueError, naming the knob or argument, if the kernel cannot run this launch on ``problem``."""
        ...

    def as_params(self) -> dict[str, Any]:
        """The knobs as a results row records them."""
        ...


@dataclass(frozen=True)
class ElementwiseLaunch:
    """A :class:`Launch` of one thread per output element, ``threads`` per block, the grid capped at
    ``max_blocks`` (the kernel strides over the rest), no shared memory: the simple kernels' shape (a plain
    direct convolution, a sum of partial planes, an epilogue). A family sets ``source``, ``kernel`` and, where
    its output is not the problem's, :meth:`elements`."""

    threads: int = 256

    source: ClassVar[str]
    kernel: ClassVar[str]
    max_blocks: ClassVar[int] = 2**31 - 1

    def elements(self, problem: Any) -> int:
        """The output elements the kernel writes: the convolution's output by default."""
        return math.prod(problem.output_shape)

    def as_params(self) -> dict[str, Any]:
        return {"threads": self.threads}

    def kernel_name(self, problem: Any = None) -> str:
        return self.kernel

    def options(self, problem: Any = None) -> tuple[str, ...]:
        return ()

    def grid(self, problem: Any) -> tuple[int, ...]:
        return (min(math.ceil(self.elements(problem) / self.threads), self.max_blocks),)

    def block(self, problem: Any = None) -> tuple[int, ...]:
        return (self.threads,)

    def shared_bytes(self, problem: Any = None) -> int:
        return 0

    def can_implement(self, problem: Any) -> None:
        """Raise ValueError naming ``threads`` if it is no int in 1..1024 (every problem runs)."""
        if not isinstance(self.threads, int) or isinstance(self.threads, bool) or not 1 <= self.threads <= 1024:
            raise ValueError(f"threads must be an int in 1..1024, got {self.threads!r}")


def launch(spec: Launch, problem: Any, args: tuple[Any, ...]) -> None:
    """Check ``spec`` against ``problem`` (:meth:`Launch.can_implement`), build its kernel for this GPU and
    enqueue it on the current stream with ``args`` (arrays as they are, integers as the kernel takes them)."""
    spec.can_implement(problem)
    shared = spec.shared_bytes(problem)
    kernel = load_kernel(spec.source, spec.kernel_name(problem), options=spec.options(problem))
    with_dynamic_shared(kernel, shared, f"{type(spec).__name__} {spec.as_params()}")
    enqueue(KernelCall(kernel.kernel, spec.grid(problem), spec.block(problem), shared), args)


# ---------------------------------------------------------------------------------------------
# Recording: what a launcher enqueued, to replay it without the launcher (convkit.conv2d's fast path)


@dataclass(frozen=True)
class KernelCall:
    """One kernel at its grid, block and dynamic shared memory, enqueued by :func:`enqueue`."""

    function: Any  # cupy.cuda.Function
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared: int

    def __call__(self, args: tuple[Any, ...], stream: Any = None) -> None:
        """Launch with ``args`` (arrays, or device pointers as ints) on ``stream`` (default: the current one)."""
        self.function(self.grid, self.block, args, shared_mem=self.shared, stream=stream)


@dataclass
class Recording:
    """What ran inside :func:`recording`: each enqueued call with its arguments, and the scratch arrays the
    launchers allocated (:func:`scratch`), which a replay may allocate afresh. ``bias`` and ``output`` are
    what the op asks of the launchers: the launch that writes the output may add the bias as it does
    (:func:`epilogue_bias`), saving the op a launch."""

    calls: list[tuple[Callable[..., None], tuple[Any, ...]]] = field(default_factory=list)
    scratch: list[Any] = field(default_factory=list)
    bias: Any = None
    output: Any = None
    bias_added: bool = False


_RECORDER = threading.local()


@contextlib.contextmanager
def recording(*, bias: Any = None, output: Any = None) -> Iterator[Recording]:
    """Run launchers as usual and note what they enqueue (this thread only); with ``bias`` (M,) and
    ``output`` (N, M, P, Q), the launch writing ``output`` may add the bias (:func:`epilogue_bias`)."""
    previous = getattr(_RECORDER, "active", None)
    _RECORDER.active = found = Recording(bias=bias, output=output)
    try:
        yield found
    finally:
        _RECORDER.active = previous


def enqueue(call: Callable[..., None], args: tuple[Any, ...]) -> None:
    """Run ``call(args)`` on the current stream: every GPU operation of a launcher goes through here, so that
    :func:`recording` sees it. ``call(args, stream)`` must also accept device pointers (ints) for arrays."""
    call(args)
    active = getattr(_RECORDER, "active", None)
    if active is not None:
        active.calls.append((call, args))


def epilogue_bias(destination: Any) -> Any:
    """The kernel argument for a launch's optional bias: the op's bias where ``destination`` (whole images of
    NCHW planes) lies in the output of the op recording this launcher, else a null pointer. A launcher passes
    it to the launch that writes the final output (a split sum, a transform back), which then adds
    ``bias[m]`` to every element of filter ``m``'s planes; the op adds the bias itself where none did."""
    import cupy

    active = getattr(_RECORDER, "active", None)
    if active is None or active.bias is None or active.output is None:
        return cupy.uint64(0)
    start, end = active.output.data.ptr, active.output.data.ptr + active.output.nbytes
    if not start <= destination.data.ptr < end:
        return cupy.uint64(0)
    active.bias_added = True
    return active.bias


def scratch(elements: int) -> Any:
    """A float32 work array a launcher needs during its launches only (partial planes, transforms)."""
    import cupy

    array = cupy.empty(elements, dtype=cupy.float32)
    active = getattr(_RECORDER, "active", None)
    if active is not None:
        active.scratch.append(array)
    return array


@dataclass(frozen=True)
class KernelResources:
    """What ``ptxas -v`` reports for one kernel on one architecture."""

    source: str
    kernel: str
    arch: str
    registers: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    shared_bytes: int
    constant_bytes: int


_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(sm_\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas(text: str, *, source: str = "") -> list[KernelResources]:
    """Parse the ``-Xptxas -v`` log of one compilation into one record per kernel."""
    records: list[KernelResources] = []
    current: dict[str, Any] | None = None

    def flush() -> None:
        if current is not None and "registers" in current:
            records.append(KernelResources(source=source, **current))

    for line in text.splitlines():
        if m := _ENTRY.search(line):
            flush()
            current = dict(
                kernel=m.group(1), arch=m.group(2), registers=0, stack_frame_bytes=0,
                spill_store_bytes=0, spill_load_bytes=0, shared_bytes=0, constant_bytes=0,
            )  # fmt: skip
            current.pop("registers")
            continue
        if current is None:
            continue
        if m := _FRAME.search(line):
            current["stack_frame_bytes"], current["spill_store_bytes"], current["spill_load_bytes"] = (
                int(g) for g in m.groups()
            )
        if m := _USED.search(line):
            current["registers"] = int(m.group(1))
            current["shared_bytes"] = int(s.group(1)) if (s := _SMEM.search(line)) else 0
            current["constant_bytes"] = int(c.group(1)) if (c := _CMEM.search(line)) else 0
    flush()
    return records


def find_nvcc() -> str | None:
    """Path of ``nvcc`` on the PATH, or None."""
    return shutil.which("nvcc")


def ptxas_report(source: str, arch: str = "sm_90", *, options: tuple[str, ...] = ()) -> list[KernelResources]:
    """Compile ``kernels/<source>.cu`` with ``nvcc -cubin -Xptxas -v`` and parse the resources.

    Needs no GPU, only ``nvcc``. Raises RuntimeError with the compiler's output if it fails.
    """
    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc is not on the PATH: the compile report needs the CUDA toolkit")
    path = kernel_source(source)
    # nvcc splits option values at commas (NVRTC takes each option whole): escape them in macro values
    options = tuple(o.replace(",", "\\,") if o.startswith("-D") else o for o in options)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", *COMMON_OPTIONS, *options,
            "-o", str(Path(tmp) / f"{source}.cubin"), str(path),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed for kernels/{source}.cu ({arch}):\n{log}")
    return parse_ptxas(log, source=source)


def all_sources() -> list[str]:
    """Stems of every ``kernels/*.cu``."""
    return sorted(p.stem for p in kernels_dir().glob("*.cu"))
