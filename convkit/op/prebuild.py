"""``convkit prebuild``: every kernel the op runs from this GPU's shipped table, built once, before the first call.

Each kernel knob is a compile-time macro, so a network needs many builds, and NVRTC takes about 0.7 s a build:
built at the first call, a ResNet-50's first forward waits seconds for them. Prebuilding runs every shipped
choice's launcher without launching (:func:`convkit.cuda.launch.collecting_builds`, on arrays of no memory) to list
the builds it needs, then builds them in parallel worker processes. Each binary is kept on disk in CuPy's kernel
cache folder (:func:`convkit.cuda.nvrtc.kernel_cache_dir`: ``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``) keyed
by source, options, architecture and compiler, so the op's first call reads it there (milliseconds) instead of
compiling; a kernel built as PTX (for an architecture's own features, Hopper's wgmma's ``sm_90a``, or a T4's
``compute_75`` run elsewhere) is JIT-compiled by the driver, which keeps that binary in its own cache. Nothing is
committed or shipped: the binaries are built on the user's machine, for its GPU, by its CUDA.

It also builds what the first-use tuner (:mod:`convkit.op.tune`) times on the layers any shipped table records
(:func:`common_problems`): a GPU with no shipped table tunes its layers at their first call, and so does a layer
no choice holds, and most layers of a network are among these. Not covered: the fused layer's choices, and the
builds of a layer unlike any recorded one (built as the tuner measures it).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.cuda.launch import Build, collecting_builds
from convkit.cuda.nvrtc import kernel_cache_dir
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
        if choice.impl == "convkit":
            problem = ConvProblem.from_key(key.split("@")[0])
            variant = variants_by_name()[choice.variant]
            found |= launch_builds(variant, problem, launch_of_choice(choice, variant, problem), array)
    return found


def tuner_builds(problems: Iterable[ConvProblem], gpu: str, array: Callable[..., Any] = nowhere) -> set[Build]:
    """The kernel builds the first-use tuner (:mod:`convkit.op.tune`) times on ``problems``: each variant of the
    families it measures that runs there, at the launch it would time (``gpu``'s shipped knobs, else the heuristic),
    the fallback among them."""
    from convkit.core.shipped import knob_table
    from convkit.families import FAMILIES

    knobs = knob_table(gpu)
    variants = [v for f in FAMILIES if f.tuned_on_first_use for v in f.variants]
    found: set[Build] = set()
    for problem in problems:
        for variant in (v for v in variants if v.supports(problem)):
            found |= launch_builds(variant, problem, variant.launch(problem, knobs), array)
    return found


def launch_builds(variant: Any, problem: ConvProblem, launch: Any, array: Callable[..., Any] = nowhere) -> set[Build]:
    """The builds ``variant`` needs to run ``problem`` with ``launch``, its launcher run without launching on
    ``array``s (default :func:`nowhere`: of no memory)."""
    nbytes = launch.workspace_bytes(problem) if launch is not None else 0
    args = ConvArgs(array(problem.input_shape), array(problem.filter_shape), array(problem.output_shape),
                    workspace=array((nbytes,), "uint8") if nbytes else None)  # fmt: skip
    with collecting_builds() as builds:
        variant.run(args, problem, launch)
    return builds


def common_problems() -> list[ConvProblem]:
    """The problems every shipped table records (the study's and the networks' layers): the layers a user's network
    most likely has, whatever the GPU."""
    from convkit.core.shipped import DATA_DIR

    gpus = [path.stem.removeprefix("dispatch-") for path in DATA_DIR.glob("dispatch-*.json")]
    keys = {key.split("@")[0] for gpu in gpus for key in dispatch.shipped_choices(gpu)}
    return [ConvProblem.from_key(key) for key in sorted(keys)]


def _build_all(builds: Iterable[Build]) -> int:
    """In a worker process: build each of ``builds`` (into CuPy's on-disk cache); their count."""
    count = 0
    for build in builds:
        build.load()
        count += 1
    return count


def build_in_parallel(builds: Sequence[Build], workers: int) -> int:
    """Build each of ``builds`` into CuPy's on-disk cache, shared out over ``workers`` processes; their count."""
    chunks = [builds[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        return sum(pool.map(_build_all, chunks))


def prebuild(gpu: str | None = None, workers: int | None = None) -> dict[str, Any]:
    """Build every kernel the shipped table of ``gpu`` (default: this GPU's) runs, and those the first-use tuner
    times on :func:`common_problems` (what a GPU with no table tunes, and a layer no choice holds), in ``workers``
    processes (default: one per CPU core, at most 16); returns what was done: the builds (of the table, of the
    tuner), the workers, the seconds, the cache folder."""
    from convkit.core.shipped import shipped
    from convkit.op.interop import gpu_name

    gpu = gpu or gpu_name()
    table = shipped(gpu)
    start = time.perf_counter()
    chosen = builds_of(dispatch.shipped_choices(gpu)) if table else set()
    tuner = tuner_builds(common_problems(), gpu) - chosen
    builds = sorted(chosen | tuner, key=lambda b: (b.source, b.options))
    listed = time.perf_counter() - start
    workers = max(1, min(workers or os.cpu_count() or 1, 16, len(builds) or 1))
    built = build_in_parallel(builds, workers)
    cache = str(kernel_cache_dir())
    return {"gpu": gpu, "table": bool(table), "builds": built, "of_table": len(chosen), "of_tuner": len(tuner),
            "workers": workers, "listed_s": round(listed, 3), "seconds": round(time.perf_counter() - start, 3),
            "cache": cache}  # fmt: skip


def main(workers: int | None = None) -> int:
    """``convkit prebuild``: build, and say what was built (nothing, and why, where no GPU is usable)."""
    from convkit.core.gpu import gpu_status

    usable, why = gpu_status()
    if not usable:
        print(f"no GPU: nothing to prebuild ({why})")
        return 0
    done = prebuild(workers=workers)
    table = f"{done['of_table']} the shipped table runs" if done["table"] else f"no shipped table for {done['gpu']}"
    print(f"built {done['builds']} kernels ({table}, {done['of_tuner']} more the first-use tuner times on common "
          f"layers) in {done['seconds']:.1f} s with {done['workers']} processes, into {done['cache']}")  # fmt: skip
    print(json.dumps(done))
    return 0
