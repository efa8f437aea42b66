"""Checking and timing the fused layer (conv 5x5 + bias + ReLU + 2x2 max-pool) against the libraries.

A layer's cases (:func:`layer_cases`) are convkit's launches, the same timed the report's way (one
host-timed run, :data:`HOST_TIMED`), each cuDNN forward algorithm alone and followed by bias, ReLU
and pool as separate cuDNN calls, and PyTorch's autotuned layer. :func:`measure_layer` checks each
against float64 (the convolution alone, or the whole layer) and times it with
:func:`convkit.bench.measure.check_and_time`, the rule every chapter measures by.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from convkit.bench.measure import check_and_time
from convkit.bench.rows import make_row
from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.cuda.timing import Timing
from convkit.families.toy_cnn.launch import (
    KERNEL_SIZE,
    ToyLadderLaunch,
    ToyTiledLaunch,
    conv_relu_pool,
    layer_output_shape,
    pooled_shape,
)
from convkit.libs import pytorch as torch_baseline
from convkit.libs.cudnn import FORWARD_ALGORITHMS, CudnnBiasReluPool
from convkit.op.cases import Case, cudnn_prepare, float64_reference, params_text
from convkit.study.sweep import run_sweep

#: ``params`` of the cuDNN and PyTorch cases: the convolution alone, or the whole layer in steps.
CONV_ONLY = params_text({"steps": "conv"})
LAYER_STEPS = params_text({"steps": "conv+bias+relu+pool"})
#: impl of the report's way of timing: one host-timed run including transfers (see measure_layer).
HOST_TIMED = "convkit_host"


def layer_cases(
    problem: ConvProblem,
    launches: Iterable[tuple[str, dict[str, Any]]],
    *,
    host_timed: Iterable[tuple[str, dict[str, Any]]] = (),
    cudnn: bool = True,
    pytorch: bool | None = None,
) -> list[Case]:
    """What to measure on a fused layer: convkit launches ``(variant, knobs)``, the same timed the
    report's way (``host_timed``), then each cuDNN algorithm alone and followed by bias, ReLU and
    pool as separate cuDNN calls, then PyTorch's autotuned layer (where PyTorch has CUDA)."""
    out = [Case("convkit", f"toy_{v}", params_text(k)) for v, k in launches]
    out += [Case(HOST_TIMED, f"toy_{v}", params_text(k)) for v, k in host_timed]
    if cudnn:
        out += [Case("cudnn", algo, CONV_ONLY) for algo in FORWARD_ALGORITHMS]
        out += [Case("cudnn", algo, LAYER_STEPS) for algo in FORWARD_ALGORITHMS]
        if pytorch or (pytorch is None and torch_baseline.available()):
            out.append(Case("pytorch", torch_baseline.VARIANT, LAYER_STEPS))
    return out


def recorded_launch(variant: str, params: str) -> ToyLadderLaunch | ToyTiledLaunch | None:
    """:func:`convkit.families.toy_cnn.launch.conv_relu_pool`'s launch of ``variant`` recorded as a row's params: a
    ladder launch's block and grid, a tile, or none (the default tile)."""
    knobs = json.loads(params)
    if "block" in knobs:
        return ToyLadderLaunch.from_params(knobs, variant=variant)
    return ToyTiledLaunch.from_params(knobs) if knobs else None


def measure_layer(
    problem: ConvProblem, todo: list[Case], *, seed: int | None = None, timing: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Check, then time, each case of ``todo`` (from :func:`layer_cases`) on fresh random inputs.

    ``problem`` is the layer's convolution (one image, 5x5, no padding: the input comes padded).
    Convolution-only cases are checked against the float64 convolution, the others against
    ``maxpool(relu(conv + bias))`` in float64. ``convkit_host`` rows are timed the report's way:
    one run on the host clock from NumPy inputs to NumPy output (allocation, copies both ways,
    launch, synchronization), the kernel module already loaded; their output is checked too.
    """
    import cupy

    timing = dict(timing or {})
    try:
        rng = cupy.random.default_rng(seed)
        x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
        w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
        bias = rng.standard_normal((problem.m,), dtype=cupy.float32)
        pooled = cupy.empty(layer_output_shape(problem), dtype=cupy.float32)
        conv_out = cupy.empty(problem.output_shape, dtype=cupy.float32)
    except cupy.cuda.memory.OutOfMemoryError as exc:
        for case in todo:
            yield make_row(problem, case, status="oom", note=str(exc)[:300])
        return
    conv_ref = float64_reference(problem, x, w)
    on_gpu = type(conv_ref).__module__.startswith("cupy")
    layer_ref = reference.max_pool2x2(reference.relu(reference.bias_add(conv_ref, bias if on_gpu else bias.get())))
    layer_bytes = layer_min_bytes(problem)
    host_inputs = (x.get(), w.get(), bias.get())

    for case in todo:
        if case.params == CONV_ONLY:
            prepare = cudnn_prepare(problem, case, x, w, conv_out)
            yield check_and_time(problem, case, prepare, conv_out, conv_ref, timing)
        elif case.impl == HOST_TIMED:
            yield _host_timed_row(problem, case, host_inputs, layer_ref)
        else:
            prepare = layer_prepare(problem, case, x, w, bias, conv_out, pooled)
            yield check_and_time(problem, case, prepare, pooled, layer_ref, timing, min_bytes=layer_bytes)
        cupy.get_default_memory_pool().free_all_blocks()


def layer_prepare(
    problem: ConvProblem, case: Case, x: Any, w: Any, bias: Any, conv_out: Any, pooled: Any
) -> Callable[[], Any]:
    """For :func:`convkit.bench.measure.check_and_time`: a function giving ``(run, check_run)`` of a layer case
    writing ``pooled`` (``conv_out`` is the cuDNN steps' intermediate), or a refusal saying why it cannot run."""

    def prepare() -> Any:
        import cupy

        if case.impl == "convkit":
            variant = case.variant.removeprefix("toy_")
            launch = recorded_launch(variant, case.params)
            return (lambda: conv_relu_pool(x, w, bias, variant=variant, launch=launch, out=pooled)), None
        if case.impl == "pytorch":
            layer = _pytorch_layer(x, w, bias)
            return (lambda: layer()), (lambda: cupy.copyto(pooled, layer()))
        prepared = cudnn_prepare(problem, case, x, w, conv_out)()
        if isinstance(prepared, dict):
            return prepared
        conv_run = prepared[0]
        tail = CudnnBiasReluPool(problem.m, problem.out_h, problem.out_w)

        def run() -> None:
            conv_run()
            tail(conv_out, bias, pooled)

        return run, None

    return prepare


def _pytorch_layer(x: Any, w: Any, bias: Any) -> Callable[[], Any]:
    """PyTorch's layer in true FP32 (cuDNN autotuned, TF32 off): conv2d with bias, relu, max_pool2d."""
    import cupy
    import torch

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    xt, wt, bt = torch.from_dlpack(x), torch.from_dlpack(w), torch.from_dlpack(bias)
    functional = torch.nn.functional
    return lambda: cupy.from_dlpack(functional.max_pool2d(functional.relu(functional.conv2d(xt, wt, bt)), 2))


def _host_timed_row(
    problem: ConvProblem, case: Case, host_inputs: tuple[Any, Any, Any], layer_ref: Any
) -> dict[str, Any]:
    """The report's timing: one run on the host clock, NumPy in, NumPy out; checked, then recorded."""
    import cupy

    variant = case.variant.removeprefix("toy_")
    launch = recorded_launch(variant, case.params)
    x_h, w_h, b_h = host_inputs

    def once() -> Any:
        x, w, b = cupy.asarray(x_h), cupy.asarray(w_h), cupy.asarray(b_h)
        return conv_relu_pool(x, w, b, variant=variant, launch=launch).get()

    try:
        once()  # loads (compiles) the module: the report's binary was built before its timer started
        cupy.cuda.get_current_stream().synchronize()
        start = time.perf_counter()
        result = once()
        elapsed_ms = (time.perf_counter() - start) * 1e3
        on_gpu = type(layer_ref).__module__.startswith("cupy")
        err = reference.relative_error(cupy.asarray(result) if on_gpu else result, layer_ref)
    except Exception as exc:  # recorded with its message; the sweep goes on
        return make_row(problem, case, status="error", note=f"{type(exc).__name__}: {exc}"[:300])
    if not err <= DIRECT_TOLERANCE:
        return make_row(problem, case, status="wrong", rel_err=err, note="host-timed run failed the check")
    row = make_row(problem, case, status="ok", timing=Timing((elapsed_ms,)), rel_err=err,
                   note="one run on the host clock: allocation, copies both ways, launch, synchronize")  # fmt: skip
    row["gbytes_per_s"] = f"{layer_min_bytes(problem) / (elapsed_ms * 1e6):.6g}"
    return row


def run_layer_experiment(
    experiment: str,
    problems_and_cases: Iterable[tuple[ConvProblem, list[Case]]],
    *,
    directory: Path | None = None,
    seed: int | None = None,
    timing: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = print,
) -> Path:
    """Measure fused-layer cases into ``<directory>/<experiment>.csv`` (default ``results/<this GPU>``),
    resuming what is there; returns the directory."""
    plan = list(problems_and_cases)
    by_problem = dict(plan)
    return run_sweep(experiment, [p for p, _ in plan], lambda p: by_problem[p],
                     lambda p, todo: measure_layer(p, todo, seed=seed, timing=timing),
                     directory=directory, progress=progress)  # fmt: skip


def layer_min_bytes(problem: ConvProblem) -> int:
    """Fewest bytes the fused layer moves: input, weights and bias read once, pooled output written once (float32:
    4 bytes each)."""
    ph, pw = pooled_shape(problem)
    return 4 * (problem.c * problem.h * problem.w + problem.m * problem.c * KERNEL_SIZE**2
                     + problem.m + problem.m * ph * pw)  # fmt: skip


def reference_layer(x: Any, w: Any, bias: Any) -> Any:
    """The float64 reference: ``maxpool2x2(relu(conv(x, w) + bias))`` (NumPy or CuPy arrays)."""
    return reference.max_pool2x2(reference.relu(reference.bias_add(reference.conv2d(x, w), bias)))
