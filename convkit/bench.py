"""Checking and timing: every convkit kernel and every cuDNN forward algorithm on one problem.

:func:`measure_problem` draws fresh random inputs, computes the float64 reference once, then for
each case poisons the output with NaN, runs it, checks it, and times it only if it was right.
:func:`run_experiment` drives :func:`convkit.results.sweep` with it, so every chapter's sweep is
resumable. Later chapters add their kernels to :data:`VARIANTS`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit import reference
from convkit.problem import ConvProblem
from convkit.results import Case, ResultStore, make_row, params_text, sweep

#: Relative error a direct FP32 method must stay under (the study's correctness bar).
DIRECT_TOLERANCE = 1e-5
#: FFT and Winograd transforms round more: they land near 1e-6..1e-4 on FP32 data.
TRANSFORM_TOLERANCE = 1e-3
#: Problems above this many FLOPs get their float64 reference on the GPU (CuPy, float64 cuBLAS):
#: the same code as on the CPU, minutes faster for the large layers.
GPU_REFERENCE_FLOPS = 2e9


@dataclass(frozen=True)
class Variant:
    """A convkit kernel as the benchmark sees it: its launch knobs for a problem, and how to run it.

    ``run(x, w, problem, out, **knobs)`` enqueues the kernel writing ``out``; ``knobs(problem)``
    gives the knobs it runs with there (tuned where a tuner has run), recorded in the row's
    ``params``; ``candidates(problem)`` the knob sets a tuning run measures.
    """

    name: str
    run: Callable[..., Any]
    knobs: Callable[[ConvProblem], dict[str, Any]] = lambda p: {}
    candidates: Callable[[ConvProblem], list[dict[str, Any]]] | None = None
    tolerance: float = DIRECT_TOLERANCE
    supports: Callable[[ConvProblem], bool] = lambda p: True


def _direct(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
    from convkit.direct import conv2d_direct

    conv2d_direct(x, w, pad=p.pad, stride=p.stride, out=out, **knobs)


def _cuconv(variant: str) -> Variant:
    from convkit import cuconv

    def run(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
        cuconv.conv2d_cuconv(x, w, pad=p.pad, stride=p.stride, variant=variant, out=out, **knobs)

    name = f"cuconv_{variant}"

    def knobs(p: ConvProblem) -> dict[str, Any]:
        from convkit import tuner
        from convkit.gpu import sm_count

        tuned = tuner.tuned_knobs(p, name)
        return tuned if tuned is not None else cuconv.default_knobs(p, variant, sm_count()).as_params()

    def candidates(p: ConvProblem) -> list[dict[str, Any]]:
        from convkit.gpu import sm_count

        return [k.as_params() for k in cuconv.candidates(p, variant, sm_count())]

    return Variant(name, run, knobs, candidates=candidates)


def _same_padded(p: ConvProblem) -> bool:
    """The Chang 2022 kernels' problems: one image, square 1x1/3x3/5x5 filters, "same" padding, stride 1."""
    return p.n == 1 and p.r == p.s and p.r in (1, 3, 5) and p.pad == (p.r - 1) // 2 and p.stride == 1


#: The tuning table of the H100 plan and launch of both Chang 2022 kernels (results/<gpu>/chang2022_tuning.csv).
CHANG_TUNING = "chang2022_tuning"


def _chang_single(name: str, planner: str, tuned: bool) -> Variant:
    """A single-channel plan: the paper's (``plan_single``), or the H100's (``fill_plan``, ``tuned``
    over :func:`convkit.chang2022.single_candidates` where a tuning run has measured them)."""
    from convkit import chang2022 as chang

    def model() -> Any:
        return chang.latency_model(chang.current_figures())

    def knobs(p: ConvProblem) -> dict[str, Any]:
        from convkit import tuner

        best = tuner.tuned_knobs(p, name, experiment=CHANG_TUNING) if tuned else None
        return best if best is not None else getattr(chang, planner)(p, model()).as_params()

    def candidates(p: ConvProblem) -> list[dict[str, Any]]:
        return [plan.as_params() for plan in chang.single_candidates(p, model())]

    def run(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
        chang.conv2d_single(x, w, plan=chang.single_launch(knobs), out=out)

    supports = lambda p: p.c == 1 and _same_padded(p)  # noqa: E731
    return Variant(name, run, knobs, candidates=candidates if tuned else None, supports=supports)


def _chang_multi(name: str, paper: bool) -> Variant:
    from convkit import chang2022 as chang

    def knobs(p: ConvProblem) -> dict[str, Any]:
        from convkit import tuner
        from convkit.gpu import sm_count

        if paper:
            return chang.paper_multi_config(p, chang.latency_model(chang.current_figures())).as_params()
        tuned = tuner.tuned_knobs(p, name, experiment=CHANG_TUNING)
        return tuned if tuned is not None else chang.multi_config(p, sm_count()).as_params()

    def candidates(p: ConvProblem) -> list[dict[str, Any]]:
        from convkit.gpu import sm_count

        return [c.as_params() for c in chang.ranked_multi_configs(p, sm_count())[: chang.TUNING_CANDIDATES]]

    def run(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
        chang.conv2d_multi(x, w, config=chang.multi_launch(knobs), out=out)

    return Variant(name, run, knobs, candidates=None if paper else candidates, supports=_same_padded)


#: The tuning table of the Lu 2020 kernels' launches (results/<gpu>/lu2020_tuning.csv).
LU_TUNING = "lu2020_tuning"


def _lu(variant: str) -> Variant:
    """A Lu 2020 kernel: ``lu_<single-channel variant>`` (C = 1) or ``lu_multi``, tuned where a tuning
    run has measured its launches."""
    from convkit import lu2020

    name = f"lu_{variant}"
    multi = variant == "multi"
    launch_type = lu2020.MultiLaunch if multi else lu2020.SingleLaunch

    def knobs(p: ConvProblem) -> dict[str, Any]:
        from convkit import tuner

        tuned = tuner.tuned_knobs(p, name, experiment=LU_TUNING)
        if tuned is not None:
            return tuned
        return (lu2020.MultiLaunch() if multi else lu2020.default_single(variant)).as_params()

    def candidates(p: ConvProblem) -> list[dict[str, Any]]:
        launches = lu2020.MULTI_CANDIDATES if multi else lu2020.single_candidates(variant)
        return [launch.as_params() for launch in launches]

    def run(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
        if multi:
            lu2020.conv2d_multi(x, w, pad=p.pad, launch=launch_type(**knobs), out=out)
        else:
            lu2020.conv2d_single(x, w, pad=p.pad, variant=variant, launch=launch_type(**knobs), out=out)

    def supports(p: ConvProblem) -> bool:
        return p.stride == 1 and p.r == p.s and p.r in lu2020.FILTER_SIZES and p.pad < p.r and (multi or p.c == 1)

    return Variant(name, run, knobs, candidates=candidates, supports=supports)


def _correlate(x: Any, w: Any, p: ConvProblem, out: Any) -> None:
    from convkit.lu2020 import correlate_peer

    correlate_peer(x, w, out)


def _single_image(p: ConvProblem) -> bool:
    from convkit.lu2020 import is_single_image

    return is_single_image(p)


#: Library peers outside cuDNN (impl ``cupyx``), measured where a chapter asks for them.
PEERS: dict[str, Variant] = {"ndimage.correlate": Variant("ndimage.correlate", _correlate, supports=_single_image)}

#: Every convkit kernel the benchmark knows, by variant name.
VARIANTS: dict[str, Variant] = {
    "direct": Variant("direct", _direct, lambda p: {"threads": 256}),
    **{f"cuconv_{v}": _cuconv(v) for v in ("paper", "fused", "split", "tiled")},
    "chang_single": _chang_single("chang_single", "plan_single", tuned=False),
    "chang_single_fill": _chang_single("chang_single_fill", "fill_plan", tuned=True),
    "chang_multi": _chang_multi("chang_multi", paper=True),
    "chang_multi_async": _chang_multi("chang_multi_async", paper=False),
    **{f"lu_{v}": _lu(v) for v in ("direct", "column_naive", "column", "row", "combined", "multi")},
}
#: The cuConv chapter's ladder: the paper's design, then each step past it.
CUCONV_VARIANTS: tuple[str, ...] = ("cuconv_paper", "cuconv_fused", "cuconv_split", "cuconv_tiled")
#: The Chang 2022 chapter: the paper's plan and the H100's, for each of its two kernels.
CHANG_SINGLE_VARIANTS: tuple[str, ...] = ("chang_single", "chang_single_fill")
CHANG_MULTI_VARIANTS: tuple[str, ...] = ("chang_multi", "chang_multi_async")
#: The Lu 2020 chapter: the paper's single-channel ladder, and its multi-channel form.
LU_SINGLE_VARIANTS: tuple[str, ...] = ("lu_direct", "lu_column_naive", "lu_column", "lu_row", "lu_combined")
LU_MULTI_VARIANTS: tuple[str, ...] = ("lu_multi",)


def cases(
    problem: ConvProblem,
    variants: Iterable[str] | None = None,
    *,
    cudnn: bool = True,
    pytorch: bool | None = None,
    tune: bool = False,
    peers: Iterable[str] = (),
) -> list[Case]:
    """What to measure on ``problem``: the chosen convkit variants, then every cuDNN algorithm.

    With ``cudnn``, PyTorch's autotuned convolution follows as a second opinion on the best cuDNN
    time; ``pytorch=None`` includes it where PyTorch with CUDA is importable. With ``tune``, each
    variant gives one case per knob candidate instead of its (tuned) knobs. ``peers`` names
    library peers of :data:`PEERS` (impl ``cupyx``), added where they support the problem.
    """
    from convkit import pytorch as torch_baseline
    from convkit.cudnn import FORWARD_ALGORITHMS

    names = list(VARIANTS) if variants is None else list(variants)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
    out = []
    for name in names:
        variant = VARIANTS[name]
        if not variant.supports(problem):
            continue
        if tune and variant.candidates is not None:
            out += [Case("convkit", name, params_text(k)) for k in variant.candidates(problem)]
        else:
            out.append(Case("convkit", name, params_text(variant.knobs(problem))))
    if cudnn:
        out += [Case("cudnn", algo) for algo in FORWARD_ALGORITHMS]
        if pytorch or (pytorch is None and torch_baseline.available()):
            out.append(Case("pytorch", torch_baseline.VARIANT))
    for peer in peers:
        if peer not in PEERS:
            raise ValueError(f"unknown peer {peer!r}; known: {sorted(PEERS)}")
        if PEERS[peer].supports(problem):
            out.append(Case("cupyx", peer))
    return out


def tolerance_for(case: Case) -> float:
    """The relative error ``case`` must stay under: a convkit variant's own, looser for cuDNN's FFT
    and Winograd algorithms and for PyTorch (whose autotuner may pick them), else the direct bar."""
    from convkit.cudnn import TRANSFORM_ALGORITHMS

    if case.impl == "convkit":
        return VARIANTS[case.variant].tolerance if case.variant in VARIANTS else DIRECT_TOLERANCE
    if case.impl == "pytorch" or (case.impl.startswith("cudnn") and case.variant in TRANSFORM_ALGORITHMS):
        return TRANSFORM_TOLERANCE
    return DIRECT_TOLERANCE


def _reference(problem: ConvProblem, x: Any, w: Any) -> Any:
    """float64 reference on the CPU, or on the GPU (same code) for large problems."""
    if problem.flops > GPU_REFERENCE_FLOPS:
        return reference.conv2d(x, w, pad=problem.pad, stride=problem.stride)
    return reference.conv2d(x.get(), w.get(), pad=problem.pad, stride=problem.stride)


def measure_problem(
    problem: ConvProblem, todo: list[Case], *, seed: int | None = None, timing: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Check, then time, each case of ``todo`` on fresh random inputs; yields one row per case.

    Args:
        problem: the convolution.
        todo: cases from :func:`cases`.
        seed: random seed for the inputs (fresh entropy when None).
        timing: keyword arguments for :func:`convkit.timing.benchmark` (budget, L2 flush, ...).
    """
    from convkit.gpu import require_cupy

    cupy = require_cupy()
    timing = dict(timing or {})
    try:
        rng = cupy.random.default_rng(seed)
        x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
        w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
        y = cupy.empty(problem.output_shape, dtype=cupy.float32)
    except cupy.cuda.memory.OutOfMemoryError as exc:
        for case in todo:
            yield make_row(problem, case, status="oom", note=str(exc)[:300])
        return
    ref = _reference(problem, x, w)

    for case in todo:
        yield _measure_case(problem, case, x, w, y, ref, timing)
        cupy.get_default_memory_pool().free_all_blocks()  # cuDNN workspaces must not pile up


def _measure_case(
    problem: ConvProblem,
    case: Case,
    x: Any,
    w: Any,
    y: Any,
    ref: Any,
    timing: dict[str, Any],
) -> dict[str, Any]:
    """One row: check the case's output against ``ref``, time it if right, or say why not."""

    def prepare() -> tuple[Callable[[], None], Callable[[], None] | None] | dict[str, Any]:
        if case.impl == "convkit":
            variant = VARIANTS[case.variant]
            knobs = json.loads(case.params)
            return (lambda: variant.run(x, w, problem, y, **knobs)), None
        if case.impl == "cupyx":
            peer = PEERS[case.variant]
            return (lambda: peer.run(x, w, problem, y)), None
        if case.impl == "pytorch":
            import cupy

            from convkit import pytorch

            autotuned = pytorch.autotuned_conv2d(problem, x, w)
            # PyTorch allocates its output: the checked run copies it into the poisoned one
            return (lambda: autotuned()), (lambda: cupy.copyto(y, autotuned()))
        return _cudnn_prepare(problem, case, x, w, y)()

    return check_and_time(problem, case, prepare, y, ref, timing)


def check_and_time(
    problem: ConvProblem,
    case: Case,
    prepare: Callable[[], Any],
    out: Any,
    ref: Any,
    timing: dict[str, Any],
    *,
    min_bytes: int | None = None,
) -> dict[str, Any]:
    """The study's measuring rule for one case, as a results row.

    ``prepare()`` returns ``(run, check_run)`` (``check_run`` None when the checked run is ``run``)
    or a finished row (the case cannot run: e.g. a cuDNN algorithm over the workspace limit). The
    output ``out`` is poisoned with NaN, the checked run fills it, the norm-wise relative error to
    ``ref`` (where ``ref`` lives: CPU or GPU) must stay under :func:`tolerance_for`, and only then
    is ``run`` timed. cuDNN refusals, out-of-memory and any other error become rows with their
    message. ``min_bytes`` overrides the problem's minimal traffic in the bandwidth column.
    """
    import cupy

    from convkit.cudnn import CudnnError
    from convkit.timing import benchmark

    try:
        prepared = prepare()
        if isinstance(prepared, dict):
            return prepared
        run, check_run = prepared
        tolerance = tolerance_for(case)
        out.fill(math.nan)  # poison: an element the kernel forgets to write fails the check
        (check_run or run)()
        cupy.cuda.get_current_stream().synchronize()
        on_gpu = type(ref).__module__.split(".")[0] == "cupy"
        err = reference.relative_error(out if on_gpu else out.get(), ref)
        if not err <= tolerance:  # NaN fails too
            return make_row(problem, case, status="wrong", rel_err=err,
                            note=f"relative error over the tolerance {tolerance:g}; not timed")  # fmt: skip
        result = benchmark(run, **timing)
    except CudnnError as exc:
        return make_row(problem, case, status="not_supported" if exc.not_supported else "error", note=str(exc)[:300])
    except cupy.cuda.memory.OutOfMemoryError as exc:
        return make_row(problem, case, status="oom", note=str(exc)[:300])
    except Exception as exc:  # recorded with its message; the sweep goes on
        return make_row(problem, case, status="error", note=f"{type(exc).__name__}: {exc}"[:300])
    row = make_row(problem, case, status="ok", timing=result, rel_err=err, note=f"tolerance {tolerance:g}")
    if min_bytes is not None:
        row["gbytes_per_s"] = f"{min_bytes / (result.median_ms * 1e6):.6g}"
    return row


def run_experiment(
    experiment: str,
    problems: Iterable[ConvProblem],
    *,
    directory: Path | None = None,
    variants: Iterable[str] | None = None,
    cudnn: bool = True,
    tune: bool = False,
    peers: Iterable[str] = (),
    seed: int | None = None,
    timing: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = print,
    remeasure_changed: bool = False,
) -> Path:
    """Measure ``problems`` into ``results/<gpu-slug>/<experiment>.csv``, resuming what is there.

    ``tune`` measures every knob candidate of the variants, ``peers`` adds library peers (see
    :func:`cases`). ``remeasure_changed``: a problem whose variant now runs other knobs than its rows
    record (tuned again) is measured again whole (:func:`convkit.results.sweep`). Returns the directory
    written to.
    """
    from convkit import provenance
    from convkit.gpu import device_name, gpu_slug
    from convkit.paths import results_dir

    directory = Path(directory) if directory is not None else results_dir() / gpu_slug(device_name())
    variants = list(variants) if variants is not None else None
    store = ResultStore.open(directory, experiment, provenance.collect())
    peers = tuple(peers)
    sweep(store, problems, lambda p: cases(p, variants, cudnn=cudnn, tune=tune, peers=peers),
          lambda p, todo: measure_problem(p, todo, seed=seed, timing=timing), progress=progress,
          remeasure_changed=remeasure_changed)  # fmt: skip
    return directory


# --- The fused CNN layer (toy CNN chapter): conv 5x5 + bias + ReLU + 2x2 max-pool -------------------

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
    from convkit import pytorch as torch_baseline
    from convkit.cudnn import FORWARD_ALGORITHMS

    out = [Case("convkit", f"toy_{v}", params_text(k)) for v, k in launches]
    out += [Case(HOST_TIMED, f"toy_{v}", params_text(k)) for v, k in host_timed]
    if cudnn:
        out += [Case("cudnn", algo, CONV_ONLY) for algo in FORWARD_ALGORITHMS]
        out += [Case("cudnn", algo, LAYER_STEPS) for algo in FORWARD_ALGORITHMS]
        if pytorch or (pytorch is None and torch_baseline.available()):
            out.append(Case("pytorch", torch_baseline.VARIANT, LAYER_STEPS))
    return out


def _toy_launch(params: str) -> dict[str, Any]:
    """Launch keywords of :func:`convkit.toy_cnn.conv_relu_pool` from a row's params."""
    from convkit.toy_cnn import TiledConfig

    knobs = json.loads(params)
    if "block" in knobs:
        return {"block": tuple(knobs["block"]), "grid": tuple(knobs["grid"])}
    return {"tile": TiledConfig(**knobs)} if knobs else {}


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
    from convkit import reference, toy_cnn
    from convkit.gpu import require_cupy

    cupy = require_cupy()
    timing = dict(timing or {})
    try:
        rng = cupy.random.default_rng(seed)
        x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
        w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
        bias = rng.standard_normal((problem.m,), dtype=cupy.float32)
        pooled = cupy.empty(toy_cnn.layer_output_shape(problem), dtype=cupy.float32)
        conv_out = cupy.empty(problem.output_shape, dtype=cupy.float32)
    except cupy.cuda.memory.OutOfMemoryError as exc:
        for case in todo:
            yield make_row(problem, case, status="oom", note=str(exc)[:300])
        return
    conv_ref = _reference(problem, x, w)
    xp = cupy if type(conv_ref).__module__.startswith("cupy") else None
    layer_ref = reference.max_pool2x2(reference.relu(reference.bias_add(conv_ref, bias if xp else bias.get())))
    layer_bytes = toy_cnn.layer_min_bytes(problem)
    host_inputs = (x.get(), w.get(), bias.get())

    for case in todo:
        if case.params == CONV_ONLY:
            prepare = _cudnn_prepare(problem, case, x, w, conv_out)
            yield check_and_time(problem, case, prepare, conv_out, conv_ref, timing)
        elif case.impl == HOST_TIMED:
            yield _host_timed_row(problem, case, host_inputs, pooled, layer_ref)
        else:
            prepare = layer_prepare(problem, case, x, w, bias, conv_out, pooled)
            yield check_and_time(problem, case, prepare, pooled, layer_ref, timing, min_bytes=layer_bytes)
        cupy.get_default_memory_pool().free_all_blocks()


def _cudnn_prepare(problem: ConvProblem, case: Case, x: Any, w: Any, y: Any) -> Callable[[], Any]:
    def prepare() -> Any:
        from convkit.cudnn import CudnnConvolution

        conv = CudnnConvolution(problem)
        need = conv.workspace(case.variant)
        if need.status != "ok":
            return make_row(problem, case, status=need.status, note=need.note)
        return (lambda: conv.forward(case.variant, x, w, y)), None

    return prepare


def layer_prepare(
    problem: ConvProblem, case: Case, x: Any, w: Any, bias: Any, conv_out: Any, pooled: Any
) -> Callable[[], Any]:
    """For :func:`check_and_time`: a function giving ``(run, check_run)`` of a layer case writing
    ``pooled`` (``conv_out`` is the cuDNN steps' intermediate), or a row saying why it cannot run."""

    def prepare() -> Any:
        import cupy

        from convkit import toy_cnn

        if case.impl == "convkit":
            launch = _toy_launch(case.params)
            variant = case.variant.removeprefix("toy_")
            return (lambda: toy_cnn.conv_relu_pool(x, w, bias, variant=variant, out=pooled, **launch)), None
        if case.impl == "pytorch":
            layer = _pytorch_layer(x, w, bias)
            return (lambda: layer()), (lambda: cupy.copyto(pooled, layer()))
        prepared = _cudnn_prepare(problem, case, x, w, conv_out)()
        if isinstance(prepared, dict):
            return prepared
        conv_run = prepared[0]
        from convkit.cudnn import CudnnBiasReluPool

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
    problem: ConvProblem, case: Case, host_inputs: tuple[Any, Any, Any], pooled: Any, layer_ref: Any
) -> dict[str, Any]:
    """The report's timing: one run on the host clock, NumPy in, NumPy out; checked, then recorded."""
    import time

    import cupy

    from convkit import toy_cnn
    from convkit.timing import Timing

    variant = case.variant.removeprefix("toy_")
    launch = _toy_launch(case.params)
    x_h, w_h, b_h = host_inputs

    def once() -> Any:
        x, w, b = cupy.asarray(x_h), cupy.asarray(w_h), cupy.asarray(b_h)
        return toy_cnn.conv_relu_pool(x, w, b, variant=variant, **launch).get()

    try:
        once()  # loads (compiles) the module: the report's binary was built before its timer started
        cupy.cuda.get_current_stream().synchronize()
        start = time.perf_counter()
        result = once()
        elapsed_ms = (time.perf_counter() - start) * 1e3
        on_gpu = type(layer_ref).__module__.startswith("cupy")
        err = reference.relative_error(cupy.asarray(result) if on_gpu else result, layer_ref)
    except Exception as exc:
        return make_row(problem, case, status="error", note=f"{type(exc).__name__}: {exc}"[:300])
    if not err <= DIRECT_TOLERANCE:
        return make_row(problem, case, status="wrong", rel_err=err, note="host-timed run failed the check")
    row = make_row(problem, case, status="ok", timing=Timing((elapsed_ms,)), rel_err=err,
                   note="one run on the host clock: allocation, copies both ways, launch, synchronize")  # fmt: skip
    row["gbytes_per_s"] = f"{toy_cnn.layer_min_bytes(problem) / (elapsed_ms * 1e6):.6g}"
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
    """Measure fused-layer cases into ``results/<gpu-slug>/<experiment>.csv``, resuming what is there."""
    from convkit import provenance
    from convkit.gpu import device_name, gpu_slug
    from convkit.paths import results_dir

    directory = Path(directory) if directory is not None else results_dir() / gpu_slug(device_name())
    plan = list(problems_and_cases)
    by_problem = {p: c for p, c in plan}
    store = ResultStore.open(directory, experiment, provenance.collect())
    sweep(store, [p for p, _ in plan], lambda p: by_problem[p],
          lambda p, todo: measure_layer(p, todo, seed=seed, timing=timing), progress=progress)  # fmt: skip
    return directory
