"""Every convkit choice a GPU's shipped table holds, and every kernel at its default launch and each tuning candidate
on a few sample problems, planned on the CPU: the launches its runner enqueues (the kernel, grid, block, dynamic
shared bytes, compile options and each argument: which operand or work array, or an integer and its type). CuPy is
a stand-in here and :func:`convkit.cuda.launch.launch` records instead of launching, so the plan is what the
family's code decides, with no GPU. tests/test_launch_plans.py runs it in a process of its own (the stand-in must
never meet the real CuPy) and compares the plans with the fixture recorded from the code before the launches were
reworked.

With a third argument it also writes, for each sample launch (keyed as in the plans), what the launch declares and
what its runner, given a bias and the declared workspace, does: its kind, its workspace bytes and how far into the
workspace its arguments reach, any array argument that is no declared operand, whether it adds the op's bias and
whether its runner took it (or refused it), whether ``from_params`` reads its ``to_params`` back to the same launch
and whether it rejects a knob it does not have (tests/test_typed_launch.py holds the launches to these).

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


#: What the stand-in :func:`convkit.cuda.launch.launch` recorded since the last :func:`run_planned`.
_CALLS: list[dict[str, Any]] = []


def _record(spec: Any, problem: Any, args: tuple[Any, ...]) -> None:
    spec.can_implement(problem)
    _CALLS.append({"launch": type(spec).__name__, "source": spec.source, "kernel": spec.kernel_name(problem),
                   "grid": list(spec.grid(problem)), "block": list(spec.block(problem)),
                   "shared_bytes": spec.shared_bytes(problem), "options": list(spec.options(problem)),
                   "args": args})  # fmt: skip


def install_stand_ins() -> None:
    """The stand-in CuPy, and :func:`_record` wherever a convkit module took ``launch`` by name."""
    sys.modules["cupy"] = stand_in_cupy()
    import convkit.cuda.launch as launching

    _ORIGINAL[:] = [launching.launch]
    _swap(launching.launch, _record)
    # The clusters a GPU holds at once come from the driver on a built kernel; the stand-in H100 has neither: the
    # bound, one cluster per `splits` SMs.
    from convkit.families.tf32x3 import wgmma_settings

    wgmma_settings._driver_cluster_slots = lambda splits: ATTRIBUTES["MultiProcessorCount"] // splits


#: convkit's own ``launch``, once :func:`install_stand_ins` has swapped it out.
_ORIGINAL: list[Any] = []


def _swap(found: Any, put: Any) -> None:
    """``put`` wherever a convkit module holds ``found`` (convkit's __init__ imports the families)."""
    for module in [m for name, m in sys.modules.items() if name.startswith("convkit")]:
        for attribute, value in list(vars(module).items()):
            if value is found:
                setattr(module, attribute, put)


def run_planned(
    variant: Any, problem: Any, params: dict[str, Any], *, bias: bool = False, name_workspace: bool = False
) -> list[dict[str, Any]]:
    """The launches ``variant`` enqueues with the launch ``params`` on ``problem``, on the operands it declares
    (:class:`convkit.cuda.operands.ConvArgs`: a workspace of its ``workspace_bytes``, a bias with ``bias``). An
    argument is described by the operand holding it; with ``name_workspace`` the workspace is one of them, else each
    region of it is a work array of its own (as the plans recorded before the workspace was declared name them)."""
    from convkit.cuda.operands import ConvArgs

    x, w, out = ndarray(problem.input_shape), ndarray(problem.filter_shape), ndarray(problem.output_shape)
    b = ndarray((problem.m,)) if bias else None
    workspace = None
    _CALLS.clear()
    try:
        launch = variant.launch_of(params)
        nbytes = launch.workspace_bytes(problem) if launch is not None else 0
        workspace = ndarray((nbytes,), UINT8) if nbytes else None
        variant.run(ConvArgs(x, w, out, b, workspace), problem, launch)
    except Exception as exc:  # planned as the error it raises
        _CALLS.append({"error": f"{type(exc).__name__}: {exc}"})
    operands = [("x", x), ("w", w), ("out", out), ("bias", b), ("workspace", workspace if name_workspace else None)]
    named = [(n, a) for n, a in operands if a is not None]  # work arrays join it as they are first used
    return [_described(call, named) for call in _CALLS]


def sample_launches() -> list[tuple[str, Any, Any, Any]]:
    """(key, variant, problem, launch) of every convkit kernel at its default launch and each tuning candidate on
    :data:`SAMPLE_PROBLEMS` it runs."""
    from convkit.core.problem import ConvProblem
    from convkit.families import variants_by_name

    found = []
    for name, variant in sorted(variants_by_name().items()):  # every kernel, the ones no choice runs too
        if variant.impl != "convkit":
            continue
        for problem in (ConvProblem.from_key(k) for k in SAMPLE_PROBLEMS):
            if not variant.supports(problem):
                continue
            for launch in [variant.default(problem), *(variant.candidates(problem) if variant.candidates else [])]:
                key = f"{name} {problem.key} {json.dumps(launch.to_params(), sort_keys=True)}"
                found.append((key, variant, problem, launch))
    return found


def plan_all(gpu: str) -> dict[str, list[dict[str, Any]]]:
    """Each convkit choice of ``gpu``'s shipped table (by table key), and each sample launch, -> the launches its
    runner enqueues."""
    install_stand_ins()
    from convkit.core.problem import ConvProblem
    from convkit.families import variants_by_name
    from convkit.op.dispatch import shipped_choices

    plans: dict[str, list[dict[str, Any]]] = {}
    for key, choice in sorted(shipped_choices(gpu).items()):
        if choice.impl == "convkit":
            problem = ConvProblem.from_key(key.split("@")[0])
            plans[key] = run_planned(variants_by_name()[choice.variant], problem, json.loads(choice.params))
    for key, variant, problem, launch in sample_launches():
        plans[key] = run_planned(variant, problem, launch.to_params())
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
    """Each sample launch (keyed as :func:`plan_all` keys it) -> what it declares and what its runner does with it
    (see the module doc); after :func:`plan_all`, which installs the stand-in CuPy."""
    found: dict[str, dict[str, Any]] = {}
    for key, variant, problem, launch in sample_launches():
        params = launch.to_params()
        try:
            variant.launch_of(params | {"no_such_knob": 1})
            rejects = False
        except ValueError as exc:
            rejects = "no_such_knob" in str(exc)
        # run with a bias and the workspace named: which operands its arguments lie in, and how far into each (a
        # launch that refuses the bias, as one that adds none must, runs again without it)
        with_bias = run_planned(variant, problem, params, bias=True, name_workspace=True)
        bias_args = [arg for call in with_bias for arg in call.get("args", [])]
        plain = with_bias if launch.adds_bias(problem) else run_planned(variant, problem, params, name_workspace=True)
        args = [arg for call in plain for arg in call.get("args", [])]
        found[key] = {
            "kind": launch.kind, "class": type(launch).__name__,
            "workspace_bytes": launch.workspace_bytes(problem), "zeroed_workspace": launch.zeroed_workspace,
            "workspace_reach": max((_reach(arg) for arg in args if arg.startswith("workspace")), default=0),
            "undeclared": sorted({arg for arg in args if arg.startswith("work") and not arg.startswith("workspace")}),
            "adds_bias": launch.adds_bias(problem), "bias_taken": any(arg.startswith("bias") for arg in bias_args),
            "bias_refused": any("bias" in call.get("error", "") for call in with_bias),
            "round_trip": variant.launch_of(json.loads(json.dumps(params))) == launch,
            "rejects_unknown_knob": rejects,
        }  # fmt: skip
    return found


#: Bytes of each type an argument description (:func:`_described`) names.
ITEM_BYTES = {"float32": 4, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "uint8": 1}


def _reach(arg: str) -> int:
    """The byte past the last an array argument's description (``name+offset:dtype[size]``) reaches in its operand."""
    head, typed = arg.split(":")
    dtype, size = typed.rstrip("]").split("[")
    offset = int(head.split("+")[1]) if "+" in head else 0
    return offset + int(size) * ITEM_BYTES[dtype]


def builds_both_ways(gpu: str, plans: dict[str, list[dict[str, Any]]]) -> dict[str, list[list[Any]]]:
    """The kernel builds of ``gpu``'s shipped convkit choices as ``convkit prebuild`` lists them (its launchers run on
    arrays of no memory, collecting) and as the choices' plans hold them (after :func:`plan_all`)."""
    from convkit.op.dispatch import shipped_choices
    from convkit.op.prebuild import builds_of, common_problems, tuner_builds

    dtypes = {"float32": FLOAT32, "uint8": UINT8}
    choices = shipped_choices(gpu)
    _swap(_record, _ORIGINAL[0])  # convkit's own launch, which collects the builds instead of launching
    try:
        array = lambda shape, dtype="float32": ndarray(shape, dtypes[dtype])  # noqa: E731
        listed = builds_of(choices, array=array)
        tuned = tuner_builds(common_problems(), gpu, array=array)
    finally:
        _swap(_ORIGINAL[0], _record)
    planned = {(c["source"], c["kernel"], tuple(c["options"])) for key in choices if key in plans
               for c in plans[key] if "kernel" in c}  # fmt: skip
    return {
        "prebuild": sorted([b.source, b.kernel, list(b.options)] for b in listed),
        "tuner": sorted([b.source, b.kernel, list(b.options)] for b in tuned),
        "planned": sorted([source, kernel, list(options)] for source, kernel, options in planned),
    }


if __name__ == "__main__":
    # python tests/launch_plans.py GPU PLANS.json [DECLARED.json [BUILDS.json]]
    plans = plan_all(sys.argv[1])
    Path(sys.argv[2]).write_text(json.dumps(plans, sort_keys=True, separators=(",", ":")))
    if len(sys.argv) > 3:
        Path(sys.argv[3]).write_text(json.dumps(declared_all(), sort_keys=True))
    if len(sys.argv) > 4:
        Path(sys.argv[4]).write_text(json.dumps(builds_both_ways(sys.argv[1], plans)))
