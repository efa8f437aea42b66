"""``convkit prebuild``: every kernel the op runs from this GPU's shipped table, built once, before the first call.

Each kernel knob is a compile-time macro, so a network needs many builds, and NVRTC takes about 0.7 s a build:
built at the first call, a ResNet-50's first forward waits seconds for them. Prebuilding runs every shipped
choice's launcher without launching (:func:`convkit.cuda.launch.collecting_builds`, on arrays of no memory) to list
the builds it needs, then builds them in parallel worker processes. CuPy keeps each binary in its on-disk kernel
cache (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``) keyed by source, options, architecture and compiler, so
the op's first call reads it there (milliseconds) instead of compiling. Nothing is committed or shipped: the
binaries are built on the user's machine, for its GPU, by its CUDA.

Not covered: problems no shipped table records (tuned on first use, each candidate built as it is measured), the
fused layer's choices, and a GPU with no shipped table (nothing to read the builds from).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.cuda.launch import Build, collecting_builds
from convkit.cuda.operands import ConvArgs
from convkit.op import dispatch

#: Where the arrays of no memory point: far from any allocation, aligned to 256 bytes as allocations are.
_NOWHERE = 1 << 46


def nowhere(shape: tuple[int, ...], dtype: str = "float32") -> Any:
    """A CuPy array of ``shape`` that owns no memory (its pointer is never read or written): what a launcher is
    given inside :func:`~convkit.cuda.launch.collecting_builds`."""
    import cupy

    nbytes = cupy.dtype(dtype).itemsize * max(1, math.prod(shape))
    memory = cupy.cuda.UnownedMemory(_NOWHERE, nbytes, None, cupy.cuda.runtime.getDevice())
    return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))


def builds_of(choices: Mapping[str, dispatch.Choice], array: Callable[..., Any] = nowhere) -> set[Build]:
    """The kernel builds the convkit choices among ``choices`` (by table key) run, found by running each choice's
    launcher on ``array``s of no memory without launching."""
    from convkit.families import variants_by_name
    from convkit.op.conv import launch_of_choice

    found: set[Build] = set()
    for key, choice in choices.items():
        if choice.impl != "convkit":
            continue
        problem = ConvProblem.from_key(key.split("@")[0])
        variant = variants_by_name()[choice.variant]
        launch = launch_of_choice(choice, variant, problem)
        nbytes = launch.workspace_bytes(problem) if launch is not None else 0
        args = ConvArgs(array(problem.input_shape), array(problem.filter_shape), array(problem.output_shape),
                        workspace=array((nbytes,), "uint8") if nbytes else None)  # fmt: skip
        with collecting_builds() as builds:
            variant.run(args, problem, launch)
        found |= builds
    return found


def _build_all(builds: Iterable[Build]) -> int:
    """In a worker process: build each of ``builds`` (into CuPy's on-disk cache); their count."""
    count = 0
    for build in builds:
        build.load()
        count += 1
    return count


def prebuild(gpu: str | None = None, workers: int | None = None) -> dict[str, Any]:
    """Build every kernel the shipped table of ``gpu`` (default: this GPU's) runs, in ``workers`` processes (default:
    one per CPU core, at most 16); returns what was done: the builds, the workers, the seconds, the cache folder."""
    from convkit.core.shipped import shipped
    from convkit.op.interop import gpu_name

    gpu = gpu or gpu_name()
    table = shipped(gpu)
    builds = sorted(builds_of(dispatch.choices_of(table)) if table else set(), key=lambda b: (b.source, b.options))
    workers = max(1, min(workers or os.cpu_count() or 1, 16, len(builds) or 1))
    start = time.perf_counter()
    chunks = [builds[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        built = sum(pool.map(_build_all, chunks))
    cache = os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))
    return {"gpu": gpu, "table": bool(table), "builds": built, "workers": workers,
            "seconds": round(time.perf_counter() - start, 3), "cache": cache}  # fmt: skip


def main(workers: int | None = None) -> int:
    """``convkit prebuild``: build, and say what was built (nothing, and why, where no GPU is usable)."""
    from convkit.core.gpu import gpu_status

    usable, why = gpu_status()
    if not usable:
        print(f"no GPU: nothing to prebuild ({why})")
        return 0
    done = prebuild(workers=workers)
    if not done["table"]:
        print(f"no shipped table for {done['gpu']}: nothing to prebuild (kernels build at first use)")
        return 0
    print(f"built {done['builds']} kernels for {done['gpu']} in {done['seconds']:.1f} s with {done['workers']} "
          f"processes, into {done['cache']}")  # fmt: skip
    print(json.dumps(done))
    return 0
