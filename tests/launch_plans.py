"""Every convkit choice a GPU's shipped table holds, and every kernel at its default launch and each tuning candidate
on a few sample problems, planned on the CPU: the launches its runner enqueues (the kernel, grid, block, dynamic
shared bytes, compile options and each argument: which operand or work array, or an integer and its type). CuPy is
a stand-in here and :func:`convkit.cuda.launch.launch` records instead of launching, so the plan is what the
family's code decides, with no GPU. tests/test_launch_plans.py runs it in a process of its own (the stand-in must
never meet the real CuPy) and compares the plans with the fixture recorded from the code before the launches were
reworked.

With a third argument it also writes, for each sample launch (keyed as in the plans), what the launch declares: its
kind, its workspace bytes, whether it adds the op's bias (and whether its runner took it), whether ``from_params``
reads its ``to_params`` back to the same launch and whether it rejects a knob it does not have
(tests/test_typed_launch.py holds the plans to these).

Usage: python tests/launch_plans.py GPU OUT.json [DECLARED.json]
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import types
from pathlib import Path
from typing import Any

#: The stand-in device: an H100's attributes, as the families read them.
ATTRIBUTES = {"MultiProcessorCount": 132, "MaxSharedMemoryPerBlockOptin": 232448,
              "MaxSharedMemoryPerMultiprocessor": 233472}  # fmt: skip
_POINTERS = itertools.count(1 << 32, 1 << 32)
#: Problems each kernel is also planned on, at its default launch and every tuning candidate: an image, 1x1, 3x3 and
#: 5x5 layers at batch 1 and 8, one strided.
SAMPLE_PROBLEMS = ("256-1-3-1-1-p1-s1", "512-1-5-1-1-p2-s1", "14-1-1-256-128-p0-s1", "28-8-3-64-64-p1-s1",
                   "56-1-3-64-128-p1-s2", "14-8-5-96-64-p2-s1", "7-1-3-512-512-p1-s1")  # fmt: skip


class _DType:
    def __init__(self, name: str, itemsize: int):
        self.name, self.itemsize = name, itemsize

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name


FLOAT32, UINT8 = _DType("float32", 4), _DType("uint8", 1)


class _IntType(_DType):
    """``cupy.int32``: a dtype (``dtype=cupy.int32``) and a scalar type (``cupy.int32(7)``) at once."""

    def __init__(self) -> None:
        super().__init__("int32", 4)

    def __call__(self, value: Any) -> tuple[str, int]:
        return ("int32", int(value))


INT32 = _IntType()


class ndarray:
    """A device array with a shape, a dtype and an address, and nothing in it."""

    def __init__(self, shape: Any, dtype: Any = FLOAT32, ptr: int | None = None):
        self.shape = tuple(shape) if isinstance(shape, tuple | list) else (int(shape),)
        self.dtype = dtype if isinstance(dtype, _DType) else FLOAT32
        self.ndim, self.size = len(self.shape), math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self.flags = types.SimpleNamespace(c_contiguous=True)
        self.device = types.SimpleNamespace(id=0)
        self.data = types.SimpleNamespace(ptr=next(_POINTERS) if ptr is None else ptr)

    def __getitem__(self, index: slice) -> ndarray:
        """A slice along the first axis (images of a batch): a view at its offset."""
        start, stop, _ = index.indices(self.shape[0])
        row = self.nbytes // self.shape[0]
        return ndarray((stop - start, *self.shape[1:]), self.dtype, self.data.ptr + start * row)

    def view(self, dtype: Any) -> ndarray:
        """The same bytes as another type."""
        itemsize = dtype.itemsize if isinstance(dtype, _DType) else 4
        return ndarray((self.nbytes // itemsize,), dtype, self.data.ptr)

    def fill(self, value: Any) -> None:
        pass


def _integer(kind: str) -> Any:
    return lambda value: (kind, int(value))


def stand_in_cupy() -> types.ModuleType:
    """The CuPy the families meet here: arrays, scalar types, one device with an H100's attributes, no stream
    capture."""
    cupy = types.ModuleType("cupy")
    cupy.ndarray, cupy.float32, cupy.int32, cupy.uint8 = ndarray, FLOAT32, INT32, UINT8
    cupy.uint32, cupy.uint64, cupy.int64 = _integer("uint32"), _integer("uint64"), _integer("int64")
    cupy.empty = cupy.zeros = lambda shape, dtype=FLOAT32: ndarray(shape, dtype)
    cupy.ascontiguousarray = lambda a: a
    device = types.SimpleNamespace(id=0, attributes=ATTRIBUTES, compute_capability="90")
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 1, getDevice=lambda: 0, streamIsCapturing=lambda s: 0,
                                    getDeviceProperties=lambda d: {"name": b"NVIDIA H100 80GB HBM3"})  # fmt: skip
    cupy.cuda = types.SimpleNamespace(Device=lambda *a: device, runtime=runtime,
                                      get_current_stream=lambda: types.SimpleNamespace(ptr=0))  # fmt: skip
    cupy.__version__ = "stand-in"
    return cupy


def plan_all(gpu: str) -> dict[str, list[dict[str, Any]]]:
    """Each convkit choice of ``gpu``'s shipped table (by table key) -> the launches its runner enqueues."""
    sys.modules["cupy"] = stand_in_cupy()
    import convkit.cuda.launch as launching

    calls: list[dict[str, Any]] = []

    def record(spec: Any, problem: Any, args: tuple[Any, ...]) -> None:
        spec.can_implement(problem)
        calls.append({"launch": type(spec).__name__, "source": spec.source, "kernel": spec.kernel_name(problem),
                      "grid": list(spec.grid(problem)), "block": list(spec.block(problem)),
                      "shared_bytes": spec.shared_bytes(problem), "options": list(spec.options(problem)),
                      "args": args})  # fmt: skip

    from convkit.core.problem import ConvProblem
    from convkit.core.shipped import shipped
    from convkit.families import variants_by_name
    from convkit.op.dispatch import choices_of

    original = launching.launch  # every module that took it by name (convkit's __init__ imports the families)
    for module in [m for name, m in sys.modules.items() if name.startswith("convkit")]:
        for attribute, value in list(vars(module).items()):
            if value is original:
                setattr(module, attribute, record)

    def planned(variant: Any, problem: Any, knobs: dict[str, Any]) -> list[dict[str, Any]]:
        x, w, out = ndarray(problem.input_shape), ndarray(problem.filter_shape), ndarray(problem.output_shape)
        calls.clear()
        try:
            variant.run(x, w, problem, out, variant.launch_of(knobs))
        except Exception as exc:  # planned as the error it raises
            calls.append({"error": f"{type(exc).__name__}: {exc}"})
        named = [("x", x), ("w", w), ("out", out)]
        return [_described(call, named) for call in calls]

    plans: dict[str, list[dict[str, Any]]] = {}
    for key, choice in sorted(choices_of(shipped(gpu)).items()):
        if choice.impl == "convkit":
            problem = ConvProblem.from_key(key.split("@")[0])
            plans[key] = planned(variants_by_name()[choice.variant], problem, json.loads(choice.params))
    for name, variant in sorted(variants_by_name().items()):  # every kernel, the ones no choice runs too
        if variant.impl != "convkit":
            continue
        for problem in (ConvProblem.from_key(k) for k in SAMPLE_PROBLEMS):
            if not variant.supports(problem):
                continue
            launches = [variant.default(problem), *(variant.candidates(problem) if variant.candidates else [])]
            knob_sets = [launch.to_params() for launch in launches]
            for knobs in knob_sets:
                plans[f"{name} {problem.key} {json.dumps(knobs, sort_keys=True)}"] = planned(variant, problem, knobs)
    return plans


def _described(call: dict[str, Any], named: list[tuple[str, ndarray]]) -> dict[str, Any]:
    """``call`` with its arguments as the plan writes them: an operand's name (and the byte offset of a view into
    it), a work array by its order of first use, with its type and size; an integer with its type."""
    if "args" not in call:
        return call
    args = []
    for arg in call["args"]:
        if isinstance(arg, ndarray):
            ptr = arg.data.ptr
            base = next(((n, a) for n, a in named if a.data.ptr <= ptr < a.data.ptr + max(a.nbytes, 1)), None)
            if base is None:
                base = (f"work{sum(n.startswith('work') for n, _ in named)}", arg)
                named.append(base)
            offset = ptr - base[1].data.ptr
            args.append(f"{base[0]}{f'+{offset}' if offset else ''}:{arg.dtype}[{arg.size}]")
        elif isinstance(arg, tuple):
            args.append(f"{arg[0]}:{arg[1]}")
        else:
            args.append(repr(arg))
    return call | {"args": args}


def declared_all() -> dict[str, dict[str, Any]]:
    """Each sample launch (keyed as :func:`plan_all` keys it) -> what it declares (see the module doc); after
    :func:`plan_all`, which installs the stand-in CuPy."""
    from convkit.core.problem import ConvProblem
    from convkit.cuda.record import recording
    from convkit.families import variants_by_name

    def bias_taken(variant: Any, problem: Any, params: dict[str, Any]) -> bool:
        """Whether a launch of the runner took the op's bias into the output it writes."""
        out = ndarray(problem.output_shape)
        with recording(bias=ndarray((problem.m,)), output=out) as found:
            x, w = ndarray(problem.input_shape), ndarray(problem.filter_shape)
            variant.run(x, w, problem, out, variant.launch_of(params))
        return found.bias_added

    found: dict[str, dict[str, Any]] = {}
    for name, variant in sorted(variants_by_name().items()):
        if variant.impl != "convkit":
            continue
        for problem in (ConvProblem.from_key(k) for k in SAMPLE_PROBLEMS):
            if not variant.supports(problem):
                continue
            for launch in [variant.default(problem), *(variant.candidates(problem) if variant.candidates else [])]:
                params = launch.to_params()
                try:
                    variant.launch_of(params | {"no_such_knob": 1})
                    rejects = False
                except ValueError as exc:
                    rejects = "no_such_knob" in str(exc)
                found[f"{name} {problem.key} {json.dumps(params, sort_keys=True)}"] = {
                    "kind": launch.kind, "class": type(launch).__name__,
                    "workspace_bytes": launch.workspace_bytes(problem),
                    "adds_bias": launch.adds_bias(problem), "bias_taken": bias_taken(variant, problem, params),
                    "round_trip": variant.launch_of(json.loads(json.dumps(params))) == launch,
                    "rejects_unknown_knob": rejects,
                }  # fmt: skip
    return found


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(plan_all(sys.argv[1]), sort_keys=True, separators=(",", ":")))
    if len(sys.argv) > 3:
        Path(sys.argv[3]).write_text(json.dumps(declared_all(), sort_keys=True))
