"""compute-sanitizer's driver for the op: ``convkit.conv2d`` on edge shapes, recorded and replayed.

``scripts/edge_launch.py conv2d`` runs :func:`edge_check`.
"""

from __future__ import annotations

from typing import Any

from convkit.core.problem import ConvProblem
from convkit.op import conv2d
from convkit.op.cases import params_text
from convkit.op.conv import record_plan
from convkit.op.dispatch import Choice


def epilogue_choices(problem: ConvProblem) -> list[Choice]:
    """Of each kernel that runs ``problem``, the first of its default launch and its tuning candidates that adds the
    bias as it writes the output there (:meth:`convkit.cuda.launch.Launch.adds_bias`), as a choice of the op."""
    from convkit.families import FAMILIES

    found = []
    for family in FAMILIES:
        for variant in (v for v in family.variants if v.supports(problem)):
            launches = [variant.default(problem), *(variant.candidates(problem) if variant.candidates else [])]
            if first := next((launch for launch in launches if launch.adds_bias(problem)), None):
                found.append(Choice("convkit", variant.name, params_text(first.to_params()), family.name))
    return found


def edge_check() -> None:
    """:func:`conv2d` with a bias on shapes no block divides (a 1-element output, C = M = 1, stride 2, an
    unaligned input), each call twice (recorded, then replayed through the driver), and the choices that add
    the bias in their last launch, each recorded and replayed; all against float64, raising AssertionError on
    a mismatch. compute-sanitizer runs it (``scripts/edge_launch.py conv2d``)."""
    import cupy
    import numpy as np

    from convkit.core import reference

    rng = np.random.default_rng(0)

    def operands(p: ConvProblem) -> tuple[Any, Any, Any, Any]:
        x = rng.standard_normal(p.input_shape).astype(np.float32)
        w = rng.standard_normal(p.filter_shape).astype(np.float32)
        b = rng.standard_normal(p.m).astype(np.float32)
        return x, w, b, reference.conv2d(x, w, pad=p.pad, stride=p.stride) + b[None, :, None, None]

    for p in (ConvProblem(1, 1, 1, 1, 1, 1, 1), ConvProblem(2, 3, 5, 7, 9, 3, 3, pad=1, stride=2),
              ConvProblem(1, 7, 9, 9, 33, 1, 1), ConvProblem(3, 2, 11, 6, 5, 5, 5, pad=2)):  # fmt: skip
        x, w, b, ref = operands(p)
        shifted = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
        shifted[...] = cupy.asarray(x)
        for xs in (cupy.asarray(x), shifted):
            for _ in range(2):
                y = conv2d(xs, cupy.asarray(w), cupy.asarray(b), stride=p.stride, padding=p.pad)
                err = reference.relative_error(y.get(), ref)
                assert err < 1e-5, f"conv2d on {p}: relative error {err:.2e}"
    p = ConvProblem(3, 37, 9, 11, 19, 3, 3, pad=1)
    x, w, b, ref = (cupy.asarray(a) if i < 3 else a for i, a in enumerate(operands(p)))
    for choice in epilogue_choices(p):
        out = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
        plan = record_plan(choice, p, x, w, b, out)  # the launch adds the bias: the op does not
        again = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
        block = cupy.empty(max(plan.scratch_bytes, 1), dtype=cupy.uint8)
        bases = (x.data.ptr, w.data.ptr, again.data.ptr, b.data.ptr, block.data.ptr, 0)
        plan.replay(bases, cupy.cuda.get_current_stream())
        for y in (out, again):
            err = reference.relative_error(y.get(), ref)
            assert err < 1e-4, f"{choice.variant} with its bias in the epilogue: relative error {err:.2e}"
    split_replays(operands, reference.relative_error)


#: Channel splits summed in one launch (split counters: zeroed kernel state, :mod:`convkit.cuda.zeroed`) on maps
#: no tile divides, with channels no split divides.
SPLIT_CHOICES = (
    (ConvProblem.same(1, 37, 9, 11, 19, 3),
     Choice("convkit", "chang_multi_async", '{"ck":4,"filters":32,"kernel":"broadcast","split":3,"tile_h":2,'
            '"tile_w":7,"tiles":1}', "chang2022")),
    (ConvProblem.same(1, 70, 5, 7, 33, 1),
     Choice("convkit", "chang_multi_async", '{"bm":32,"bp":32,"ck":16,"kernel":"pointwise","split":3,"stages":3,'
            '"tm":4,"tp":4}', "chang2022")),
    (ConvProblem.same(1, 21, 13, 17, 9, 5),
     Choice("convkit", "chang_multi_async", '{"bm":16,"ck":4,"px":4,"rows16":true,"rpt":1,"split":4,"tile_h":8,'
            '"tile_w":16}', "chang2022")),
)  # fmt: skip


def split_replays(operands: Any, relative_error: Any) -> None:
    """Each of :data:`SPLIT_CHOICES` recorded once, then replayed on two streams at once, each replay with the
    zeroed block of its own stream, three times each; every output against float64."""
    import cupy

    from convkit.cuda.zeroed import cupy_zeroed

    for p, choice in SPLIT_CHOICES:
        x, w, b, ref = (cupy.asarray(a) if i < 3 else a for i, a in enumerate(operands(p)))
        out = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
        plan = record_plan(choice, p, x, w, b, out)
        assert plan.zeroed_bytes, f"{choice.params}: no split counters recorded"
        outputs = [out]
        cupy.cuda.get_current_stream().synchronize()
        streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
        for _ in range(3):
            for stream in streams:
                with stream:
                    again = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
                    zeroed = cupy_zeroed(stream.ptr, plan.zeroed_bytes).data.ptr
                    plan.replay((x.data.ptr, w.data.ptr, again.data.ptr, b.data.ptr, 0, zeroed), stream)
                    outputs.append(again)
        for stream in streams:
            stream.synchronize()
        for y in outputs:
            err = relative_error(y.get(), ref)
            assert err < 1e-5, f"{choice.params} replayed on two streams: relative error {err:.2e}"
