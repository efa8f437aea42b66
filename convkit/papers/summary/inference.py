"""Whole networks with their convolutions in convkit: ``results/<gpu>/networks.csv``.

torchvision's AlexNet, VGG19, ResNet-50, GoogLeNet and SqueezeNet 1.0 (the study's five, at batch 1, 8, 32 and
256) and five of other families (MobileNetV2's inverted residuals with depthwise convolutions, DenseNet-121's
dense connections, Inception-v3's 1x7 and 7x1 branches, ConvNeXt-Tiny, and timm's ResNet-26d), with random
weights (nothing downloaded), in inference on 224x224 images, each as PyTorch runs it (FP32, TF32 off, cuDNN
autotuned) and patched by :func:`convkit.patch`. Per network and batch, for each of ``pytorch`` and
``convkit``, the ``variant`` names the mode and the measure:

- eager: ``gpu``, one forward's GPU time, the study's timing (CUDA events, the stream held while the host
  enqueues, median of repeats); ``wall``: one forward's wall time, synchronized, median (what a caller
  waits, host cost included; PyTorch and convkit take turns); on convkit's ``wall`` row, ``first_forward_s``:
  the first forward with an empty cache (tuning what the package records no choice for);
- :data:`MODES` (every label of :data:`MODE_BATCHES`): ``compile_wall``, the wall time of the network under
  ``torch.compile`` (with ``graph_breaks``, the breaks ``torch._dynamo.explain`` counts in that network);
  ``graph_wall`` and ``graph_gpu``, one replay of the forward captured in a CUDA graph;
- ``rel_err``: the features the classifier reads, against the same network in float64 (random logits
  alone would hide a wrong convolution);
- for ``convkit``: every patched layer checked against a float64 convolution of its own input (the direct
  bar, the transform bar where a transform method runs it), how many layers ran a convkit kernel, and their
  share of the convolution layers' GPU time.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from convkit.bench.rows import error_text, timing_columns
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE, TRANSFORM_TOLERANCE
from convkit.op.interop import cupy_stream
from convkit.papers.summary.modes import first_forward_seconds, mode_rows, relative_error, wall_ms
from convkit.study.results import ResultStore

EXPERIMENT = "networks"
#: The constructor (torchvision's, or ``timm:<name>``) and its options, and the module whose input is the
#: features, per network.
NETWORKS: dict[str, tuple[str, dict[str, Any], str]] = {
    "AlexNet": ("alexnet", {}, "classifier"),
    "VGG19": ("vgg19", {}, "classifier"),
    "ResNet-50": ("resnet50", {}, "fc"),
    "GoogLeNet": ("googlenet", {"aux_logits": False, "init_weights": True}, "fc"),
    "SqueezeNet": ("squeezenet1_0", {}, "classifier"),
    "MobileNetV2": ("mobilenet_v2", {}, "classifier"),
    "DenseNet-121": ("densenet121", {}, "classifier"),
    "Inception-v3": ("inception_v3", {"aux_logits": False, "init_weights": True}, "fc"),
    "ConvNeXt-Tiny": ("convnext_tiny", {}, "classifier"),
    "ResNet-26d": ("timm:resnet26d", {}, "fc"),
}
#: The study's five networks, measured eagerly at :data:`BATCHES`; every network in every mode at MODE_BATCHES.
STUDY_NETWORKS = ("AlexNet", "VGG19", "ResNet-50", "GoogLeNet", "SqueezeNet")
BATCHES, MODE_BATCHES = (1, 8, 32, 256), (1, 16, 64)
IMAGE = 224
COLUMNS = ("experiment", "label", "network", "batch", "impl", "variant", "status", "time_ms_median", "time_ms_min",
           "time_ms_max", "reps", "rel_err", "conv_layers", "convkit_layers", "convkit_share", "worst_layer_err",
           "layers_over_bar", "graph_breaks", "first_forward_s", "note", "run_id")  # fmt: skip
KEY_COLUMNS = ("label", "impl", "variant")
IMPLS, VARIANTS = ("pytorch", "convkit"), ("gpu", "wall")
#: The variants of a label measured in every mode: eager, torch.compile, a captured CUDA graph.
MODES = (*VARIANTS, "compile_wall", "graph_wall", "graph_gpu")
TIMING: dict[str, Any] = {"warmup": 2, "min_reps": 5, "max_reps": 50, "budget_ms": 400.0}


def labels() -> list[str]:
    """``<network>-<batch>`` of every measurement, in the order they run: the study's five networks eagerly at
    :data:`BATCHES`, then every network in every mode at :data:`MODE_BATCHES`."""
    eager = [f"{network}-{batch}" for batch in BATCHES for network in STUDY_NETWORKS]
    modes = [f"{network}-{batch}" for batch in MODE_BATCHES for network in NETWORKS]
    return list(dict.fromkeys(eager + modes))


def variants_of(label: str) -> tuple[str, ...]:
    """What is measured of ``label``: every mode at :data:`MODE_BATCHES`, else eager only."""
    return MODES if int(label.rsplit("-", 1)[1]) in MODE_BATCHES else VARIANTS


def network_model(network: str) -> Any:
    import torch
    import torchvision

    name, options, _ = NETWORKS[network]
    torch.manual_seed(0)
    if name.startswith("timm:"):
        import timm

        return timm.create_model(name.removeprefix("timm:"), pretrained=False, **options).cuda().eval()
    return getattr(torchvision.models, name)(weights=None, **options).cuda().eval()


def _features(model: Any, network: str, x: Any) -> Any:
    """What the classifier of ``model`` reads on ``x``, flattened."""
    head = model.get_submodule(NETWORKS[network][2])
    seen: list[Any] = []
    handle = head.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().flatten(1)))
    try:
        model(x)
    finally:
        handle.remove()
    return seen[0]


def _problem(conv: Any, x: Any) -> ConvProblem:
    n, c, h, w = x.shape
    m, _, r, s = conv.weight.shape
    return ConvProblem(n, c, h, w, m, r, s, pad=int(conv.padding[0]), stride=int(conv.stride[0]))


def _transform(problem: ConvProblem) -> bool:
    """Whether ``problem`` runs a transform method in convkit.conv2d (or PyTorch's own choice, unknown)."""
    from convkit.op.conv import implementation

    choice = implementation(problem)
    return choice.impl == "pytorch" or any(t in choice.variant.lower() for t in ("winograd", "fft"))


def _in_convkit(problem: ConvProblem) -> bool:
    from convkit.op.conv import implementation

    return implementation(problem).impl == "convkit"


def _patched_modules(model: Any) -> list[tuple[str, Any]]:
    return [(name, m) for name, m in model.named_modules() if hasattr(m, "runs_in_convkit")]


def check_layers(model: Any, x: Any) -> tuple[float, int, list[str]]:
    """Run ``model`` on ``x`` and check every patched layer's output against a float64 convolution of its own
    input: (worst relative error, layers over their bar, the names of those layers)."""
    import torch

    worst, over = 0.0, []

    def hook(name: str) -> Callable[..., None]:
        def check(module: Any, args: tuple[Any, ...], out: Any) -> None:
            nonlocal worst
            conv, inp = module.original, args[0]
            ref = torch.nn.functional.conv2d(inp.double(), conv.weight.double(), None if conv.bias is None else
                                             conv.bias.double(), stride=conv.stride, padding=conv.padding)  # fmt: skip
            if hasattr(module, "pool"):
                ref = module.pool(torch.relu(ref))
            err = relative_error(out, ref)
            worst = max(worst, err)
            problem = _problem(conv, inp)
            if err >= (TRANSFORM_TOLERANCE if _transform(problem) else DIRECT_TOLERANCE):
                over.append(f"{name} {err:.1e}")

        return check

    handles = [m.register_forward_hook(hook(name)) for name, m in _patched_modules(model)]
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    return worst, len(over), over


def convolution_share(model: Any, x: Any) -> tuple[int, int, float]:
    """(convolution layers, those in a convkit kernel, their share of the convolution layers' GPU time) on one
    forward of the patched ``model``: CUDA events around each layer, the stream held while it is enqueued."""
    import torch

    from convkit.cuda.timing import CudaEventClock

    wrapped = {id(m.original) for m in model.modules() if hasattr(m, "runs_in_convkit")}  # inside a patched layer
    layers = [m for m in model.modules()
              if (type(m) is torch.nn.Conv2d or hasattr(m, "runs_in_convkit")) and id(m) not in wrapped]  # fmt: skip
    marks: list[tuple[Any, Any, Any]] = []
    handles = []
    for m in layers:
        handles.append(m.register_forward_pre_hook(lambda mod, args: marks.append((mod, args[0], _event()))))
        handles.append(m.register_forward_hook(lambda mod, args, out: marks.append((mod, None, _event()))))
    try:
        with cupy_stream():
            clock = CudaEventClock()
            clock.hold(300.0)
            model(x)
            torch.cuda.synchronize()
    finally:
        for h in handles:
            h.remove()
    total = mine = 0.0
    convkit_layers = 0
    stack: list[tuple[Any, Any, Any]] = []
    for mod, inp, event in marks:
        if inp is not None:
            stack.append((mod, inp, event))
            continue
        _, inp, start = stack.pop()
        ms = start.elapsed_time(event)
        total += ms
        if hasattr(mod, "runs_in_convkit") and _in_convkit(_problem(mod.original, inp)):
            mine += ms
            convkit_layers += 1
    return len(layers), convkit_layers, mine / total if total else 0.0


def _event() -> Any:
    import torch

    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def pytorch_as_measured() -> None:
    """PyTorch's settings in every measurement: cuDNN autotuned, TF32 off."""
    import torch

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def measure_network(network: str, batch: int) -> Iterator[dict[str, Any]]:
    """The rows of ``network`` at ``batch`` (see the module doc): eagerly, and at :data:`MODE_BATCHES` in every
    mode."""
    import torch

    from convkit.cuda.timing import CudaEventClock, Timing, benchmark
    from convkit.op.patch import patch

    pytorch_as_measured()
    label = f"{network}-{batch}"
    base = {"label": label, "network": network, "batch": batch}
    with torch.no_grad():
        model = network_model(network)
        x = torch.randn(batch, 3, IMAGE, IMAGE, device="cuda")
        in_float64 = copy.deepcopy(model).double()
        reference, logits = _features(in_float64, network, x.double()), in_float64(x.double())
        del in_float64
        patched = copy.deepcopy(model)
        outcome = patch(patched)
        first = first_forward_seconds(patched, x)
        note = f"{sum(v.startswith('convkit') for v in outcome.values())} of {len(outcome)} convolutions patched"
        worst, over, names = check_layers(patched, x)
        layers, in_convkit, share = convolution_share(patched, x)
        walls = wall_ms({"pytorch": lambda net=model: net(x), "convkit": lambda net=patched: net(x)})
        for impl, net in (("pytorch", model), ("convkit", patched)):
            error = relative_error(_features(net, network, x), reference)
            with cupy_stream():
                gpu = benchmark(lambda net=net: net(x), clock=CudaEventClock(), **TIMING)
            wall = Timing(tuple(walls[impl]))
            extra: dict[str, Any] = {"conv_layers": layers}
            if impl == "convkit":
                extra |= {"convkit_layers": in_convkit, "convkit_share": f"{share:.4f}",
                          "worst_layer_err": error_text(worst), "layers_over_bar": over,
                          "note": "; ".join([note, *names])[:500]}  # fmt: skip
            for variant, timing in (("gpu", gpu), ("wall", wall)):
                first_forward = {"first_forward_s": f"{first:.3f}"} if impl == "convkit" and variant == "wall" else {}
                yield (
                    base
                    | {"impl": impl, "variant": variant, "status": "ok", "rel_err": error_text(error)}
                    | (timing_columns(timing) | extra | first_forward)
                )
        if batch in MODE_BATCHES:
            for row in mode_rows(model, patched, x, logits, TIMING):
                yield base | {"conv_layers": layers} | row
        del reference, logits, patched, model
        torch.cuda.empty_cache()


def measure(directory: Path | None = None, *, only: list[str] | None = None, experiment: str = EXPERIMENT,
            progress: Callable[[str], None] | None = print) -> Path:  # fmt: skip
    """Measure every network and batch (``only``: those labels) into ``<directory>/<experiment>.csv``, resuming
    what is there; a failing one is recorded with its error and the rest go on. Returns the directory."""
    from convkit.study import provenance
    from convkit.study.results import gpu_results_dir

    directory = gpu_results_dir(directory)
    store = ResultStore.open(directory, experiment, provenance.collect(), columns=COLUMNS, key_columns=KEY_COLUMNS)
    recorded, start = store.done_keys(), time.perf_counter()
    for label in labels():
        if only is not None and label not in only:
            continue
        wanted = {(label, impl, variant) for impl in IMPLS for variant in variants_of(label)}
        if wanted <= recorded:
            continue
        # a label lacking a mode (an older run measured it eagerly) is measured again whole: a pair in one run
        store.drop(lambda row, label=label: row["label"] == label)
        network, batch = label.rsplit("-", 1)
        if progress:  # with the seconds since the start: a device job's chunks are planned from them
            progress(f"{label} ({time.perf_counter() - start:.0f} s)")
        try:
            rows = list(measure_network(network, int(batch)))
        except Exception as exc:  # recorded, and the rest go on
            note = f"{type(exc).__name__}: {exc}"[:500]
            rows = [{"label": label, "network": network, "batch": batch, "impl": impl, "variant": variant,
                     "status": "error", "note": note} for impl in IMPLS for variant in variants_of(label)]  # fmt: skip
        for row in rows:
            store.append(row)
    return directory


def unrecorded(directory: Path, labels: list[str], experiment: str = EXPERIMENT) -> list[str]:
    """Those of ``labels`` that ``<directory>/<experiment>.csv`` lacks a row of (every label, without the file)."""
    import csv

    path = Path(directory) / f"{experiment}.csv"
    done = set()
    if path.is_file():
        with path.open(newline="") as f:
            done = {tuple(row[k] for k in KEY_COLUMNS) for row in csv.DictReader(f)}
    return [label for label in labels
            if any((label, impl, v) not in done for impl in IMPLS for v in variants_of(label))]  # fmt: skip


def warm_compile_cache(only: list[str]) -> None:
    """Compile each label of ``only`` (plain and patched, as :func:`measure_network` will) once, so that a recording
    run reads the compiled graphs from torch.compile's on-disk cache instead of compiling for a minute a label
    (what a second run of a user's program does). Nothing is timed or recorded: several of these may run at once
    beside each other, before the recording, each with a cache of convkit's choices of its own."""
    import torch

    from convkit.op.patch import patch

    pytorch_as_measured()
    for label in only:
        network, batch = label.rsplit("-", 1)
        with torch.no_grad():
            model = network_model(network)
            patched = copy.deepcopy(model)
            patch(patched)
            x = torch.randn(int(batch), 3, IMAGE, IMAGE, device="cuda")
            for net in (model, patched):
                torch.compile(net)(x)
                torch._dynamo.reset()
        del model, patched
        torch.cuda.empty_cache()


#: The first forwards in a fresh process, recorded apart (``<experiment>_cold.csv``,
#: :mod:`convkit.papers.summary.first_forward`): with nothing built, and with the kernels built ahead.
COLD = "_cold"


if __name__ == "__main__":
    # python -m convkit.papers.summary.inference [labels...]: measure into results/<this GPU>
    # python -m convkit.papers.summary.inference --unrecorded <results folder>: the labels in every mode it lacks
    # python -m convkit.papers.summary.inference --warm labels...: fill torch.compile's cache first
    # python -m convkit.papers.summary.inference --part K N <folder>: the K-th of N parts of the labels, into folder
    # python -m convkit.papers.summary.inference --absorb <results folder> <part folder>...: the parts' rows moved in
    import sys

    from convkit.study.results import absorb

    arguments = sys.argv[1:]
    if arguments[:1] == ["--unrecorded"] and len(arguments) == 2:
        print(" ".join(unrecorded(Path(arguments[1]), [k for k in labels() if variants_of(k) == MODES])))
    elif arguments[:1] == ["--warm"]:
        warm_compile_cache(arguments[1:])
    elif arguments[:1] == ["--part"] and len(arguments) == 4:
        part, parts = int(arguments[1]), int(arguments[2])
        measure(Path(arguments[3]), only=labels()[part::parts])
    elif arguments[:1] == ["--absorb"] and len(arguments) >= 3:
        for folder in arguments[2:]:
            moved = absorb(Path(arguments[1]), EXPERIMENT, Path(folder), columns=COLUMNS, key_columns=KEY_COLUMNS)
            print(f"{moved} rows from {folder}")
    else:
        measure(only=arguments or None)
