"""The one way a launcher runs a kernel: a :class:`Launch` (CUTLASS's device adapter, in Python) that can say
no before launching, and :func:`launch`, which asks it whether it can implement the problem, then builds
the kernel (:mod:`convkit.cuda.nvrtc`), opts in to its shared memory and enqueues it on the current stream
(:func:`convkit.cuda.record.enqueue`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from convkit.core.gpu import shared_memory_limits
from convkit.core.memo import memoize
from convkit.cuda.nvrtc import load_kernel
from convkit.cuda.record import KernelCall, enqueue, thread_scoped


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
    """What a kernel launch declares before it runs, for one problem (CUTLASS's device adapter, in Python).

    Every family's launch objects (frozen dataclasses of their knobs, deriving :class:`KernelLaunch`) satisfy this;
    :func:`launch` is the only code that turns one into a launch.
    """

    #: The launch's type, one per class: what a recorded ``params`` object is read back as.
    kind: ClassVar[str]
    #: The file under ``kernels/`` (stem) that defines the kernel.
    source: str
    #: The architecture the kernel needs built (``"sm_90a"`` for wgmma or TMA); None: the GPU's own.
    arch: ClassVar[str | None]
    #: Whether its workspace is kernel state, zero when it starts and left zero (split counters), which a caller
    #: takes from :mod:`convkit.cuda.zeroed` per stream, rather than scratch.
    zeroed_workspace: ClassVar[bool]

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

    def not_supported_reasons(self, problem: Any) -> list[str]:
        """Why the kernel cannot run this launch on ``problem`` (empty: it can)."""
        ...

    def workspace_bytes(self, problem: Any) -> int:
        """Device memory the launch needs beside its operands on ``problem`` (bytes; 0: none): the ``workspace`` of
        its :class:`~convkit.cuda.operands.ConvArgs`."""
        ...

    def adds_bias(self, problem: Any) -> bool:
        """Whether the launch adds the op's bias as it writes the output on ``problem`` (in its last kernel's
        epilogue), so that no launch after it need."""
        ...

    def to_params(self) -> dict[str, Any]:
        """The knobs as a results row and the shipped table record them (a plain JSON object)."""
        ...

    def starts_early(self, problem: Any) -> bool:
        """Whether the kernel is launched to start before the kernel ahead of it in its stream ends (programmatic
        dependent launch: :class:`~convkit.cuda.driver.EarlyLaunch`); it then waits for that kernel's writes itself."""
        ...


class KernelLaunch:
    """What every family's launch dataclass shares (a mixin; the subclass is a frozen dataclass).

    A subclass names its ``kind`` and its ``knobs`` (the fields recorded as ``params``, default every field; the
    others, such as the variant a launch belongs to, are fixed by the caller of :meth:`from_params`). ``to_params`` and
    ``from_params`` are each other's inverse, and ``from_params`` rejects a knob the launch does not have, so a
    misspelt knob in a table fails where the table is read, not on a GPU.
    """

    kind: ClassVar[str]
    knobs: ClassVar[tuple[str, ...] | None] = None
    arch: ClassVar[str | None] = None
    zeroed_workspace: ClassVar[bool] = False

    @classmethod
    def knob_names(cls) -> tuple[str, ...]:
        """:attr:`knobs`, or where it is None every field of the dataclass."""
        return cls.knobs if cls.knobs is not None else tuple(f.name for f in dataclasses.fields(cls) if f.init)

    def to_params(self) -> dict[str, Any]:
        """The knobs as a results row records them, in their order; a knob at None (one that does not apply to
        this launch) is left out."""
        return {name: value for name in self.knob_names() if (value := getattr(self, name)) is not None}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], **fixed: Any) -> Self:
        """The launch recorded as ``params`` (:meth:`to_params`), with the non-knob fields ``fixed``; raises
        ValueError naming any key that is no knob of this launch."""
        cls.check_knobs(params, cls.knob_names())
        return cls(**fixed, **params)

    @classmethod
    def check_knobs(cls, params: Mapping[str, Any], knobs: tuple[str, ...]) -> None:
        """Raise ValueError naming every key of ``params`` that is not one of ``knobs``."""
        unknown = sorted(set(params) - set(knobs))
        if unknown:
            raise ValueError(f"a {cls.kind} launch has no knob {', '.join(map(repr, unknown))}; its knobs are "
                             f"{', '.join(knobs) or 'none'}")  # fmt: skip

    def can_implement(self, problem: Any) -> None:
        """Raise ValueError naming what the kernel cannot run (the subclass's checks; none by default)."""

    def not_supported_reasons(self, problem: Any) -> list[str]:
        """Why the kernel cannot run this launch on ``problem``, from :meth:`can_implement` (empty: it can)."""
        try:
            self.can_implement(problem)
        except ValueError as exc:
            return [str(exc)]
        return []

    def workspace_bytes(self, problem: Any) -> int:
        """Device scratch beside the operands (bytes): none by default."""
        return 0

    def adds_bias(self, problem: Any) -> bool:
        """Whether it adds the op's bias as it writes the output: not by default."""
        return False

    def starts_early(self, problem: Any) -> bool:
        """Whether it starts before the kernel ahead of it ends: not by default."""
        return False


@dataclass(frozen=True)
class ElementwiseLaunch(KernelLaunch):
    """A :class:`Launch` of one thread per output element, ``threads`` per block, the grid capped at
    ``max_blocks`` (the kernel strides over the rest), no shared memory: the simple kernels' shape (a plain
    direct convolution, a sum of partial planes, an epilogue). A family sets ``kind``, ``source``, ``kernel``
    and, where its output is not the problem's, :meth:`elements`."""

    threads: int = 256

    knobs: ClassVar[tuple[str, ...]] = ("threads",)
    source: ClassVar[str]
    kernel: ClassVar[str]
    max_blocks: ClassVar[int] = 2**31 - 1

    def elements(self, problem: Any) -> int:
        """The output elements the kernel writes: the convolution's output by default."""
        return math.prod(problem.output_shape)

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


@dataclass(frozen=True)
class Build:
    """One kernel build, as :func:`convkit.cuda.nvrtc.load_kernel` compiles it."""

    source: str
    kernel: str
    options: tuple[str, ...]
    arch: str | None

    @classmethod
    def of(cls, spec: Launch, problem: Any) -> Build:
        """The build ``spec``'s kernel takes on ``problem``."""
        return cls(spec.source, spec.kernel_name(problem), tuple(spec.options(problem)), spec.arch)

    def load(self) -> Any:
        """The kernel, built now (or read from CuPy's on-disk cache)."""
        return load_kernel(self.source, self.kernel, options=self.options, arch=self.arch)


_COLLECTING = threading.local()


def collecting_builds() -> contextlib.AbstractContextManager[set[Build]]:
    """Run launchers without launching (this thread only): each :func:`launch` notes the :class:`Build` it needs
    and returns. Nothing is built, allocated by a launch or enqueued, so the launchers may be given arrays of no
    memory (``convkit prebuild``)."""
    return thread_scoped(_COLLECTING, set())


def launch(spec: Launch, problem: Any, args: tuple[Any, ...]) -> None:
    """Check ``spec`` against ``problem`` (:meth:`Launch.can_implement`), build its kernel for this GPU and
    enqueue it on the current stream with ``args`` (arrays as they are, integers as the kernel takes them); inside
    :func:`collecting_builds`, only note the build."""
    spec.can_implement(problem)
    collecting = getattr(_COLLECTING, "active", None)
    if collecting is not None:
        collecting.add(Build.of(spec, problem))
        return
    kernel = loaded(spec, problem)
    call = KernelCall(kernel.kernel, spec.grid(problem), spec.block(problem), spec.shared_bytes(problem),
                      spec.starts_early(problem))  # fmt: skip
    enqueue(call, args)


def loaded(spec: Launch, problem: Any) -> Any:
    """``spec``'s kernel for ``problem``, built for this GPU (:func:`~convkit.cuda.nvrtc.load_kernel`) and opted in
    to its dynamic shared memory (:func:`with_dynamic_shared`): what :func:`launch` enqueues, and what the driver's
    occupancy queries take."""
    kernel = load_kernel(spec.source, spec.kernel_name(problem), options=spec.options(problem), arch=spec.arch)
    return with_dynamic_shared(kernel, spec.shared_bytes(problem), f"{spec.kind} launch {spec.to_params()}")


#: ``cudaStreamPerThread``: one handle that names a different stream in each host thread.
PER_THREAD_STREAM = 2


def stream_key(handle: int) -> Hashable:
    """What identifies the stream ``handle`` names for state kept per stream (workspaces, counters, runners): the
    handle, and for the per-thread default stream the thread too."""
    return handle if handle != PER_THREAD_STREAM else (handle, threading.get_ident())


@memoize()
def external_stream(handle: int, device: int) -> Any:
    """A CuPy stream object on the CUDA stream ``handle`` of ``device`` (another library's), made once per stream:
    CuPy launches inside ``with external_stream(...):`` queue on it."""
    import warnings

    import cupy

    with warnings.catch_warnings():  # CuPy 14 prefers Stream.from_external; 13 (Colab's) has only this
        warnings.simplefilter("ignore", DeprecationWarning)
        return cupy.cuda.ExternalStream(handle, device)
