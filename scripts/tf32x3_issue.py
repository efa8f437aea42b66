"""Where the mma.sync 3xTF32 kernel issues the next slice's copies (prints; records nothing): between a slice's two
k-steps, as CUTLASS's mainloop spreads its copies over its k-steps (the kernel's order), against before the slice's
products (``CONVKIT_COPIES_FIRST``, the order before), on a sample of the 3xTF32 chapter's layers of at least 20 GFLOP
(stride-1 3x3), at the launches the chapter's tuning picks most; each build checked against float64.
Run on a GPU from the repository root:
    PYTHONPATH=$PWD python3 scripts/tf32x3_issue.py [--part=k/n]
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from wgmma_probe import chapter_layers, expected, inputs, median_us

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.families.tf32x3.launch import TensorCoreGemmLaunch, conv2d_tf32x3

#: The launches timed: the tiles the chapter's H100 tuning picked most (64x128 on 274 of its problems, 128x128 at 5
#: stages on 63), and 64x32 warps on weights split ahead, as CUTLASS's fastest tiles have them.
LAUNCHES = (TensorCoreGemmLaunch("64x128"), TensorCoreGemmLaunch("128x128", stages=5),
            TensorCoreGemmLaunch("128x128", warp="64x32", weights="split"))  # fmt: skip


@dataclass(frozen=True)
class CopiesFirst(TensorCoreGemmLaunch):
    """The launch built with the copies issued before the slice's products."""

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (*super().options(problem), "-DCONVKIT_COPIES_FIRST=1")


def copies_first(spec: TensorCoreGemmLaunch) -> CopiesFirst:
    return CopiesFirst(**{f.name: getattr(spec, f.name) for f in fields(spec)})


def call(p: ConvProblem, x: Any, w: Any, bias: Any, out: Any, launch: TensorCoreGemmLaunch) -> Callable[[], Any]:
    """One call of the kernel at ``launch`` into ``out`` (the weights' split included where it splits them)."""
    return lambda: conv2d_tf32x3(x, w, pad=p.pad, stride=p.stride, launch=launch, out=out, bias=bias)


def main(part: tuple[int, int]) -> None:
    import cupy

    problems = [p for p in chapter_layers() if p.r == 3 and p.stride == 1][part[0] - 1 :: part[1]]
    rng = cupy.random.default_rng(5)
    ratios: dict[str, list[float]] = {}
    for p in problems:
        x, w, bias = inputs(p, rng)
        ref = expected(x, w, bias, p)
        out = cupy.empty(p.output_shape, dtype=cupy.float32)
        line = []
        for spec in LAUNCHES:
            if spec.not_supported_reasons(p):
                continue
            times = {}
            for name, launch in (("between", spec), ("first", copies_first(spec))):
                run = call(p, x, w, bias, out, launch)
                out.fill(cupy.nan)
                err = reference.relative_error(run(), ref)
                times[name] = median_us(run)
                if not err < reference.DIRECT_TOLERANCE:
                    line.append(f"{name} WRONG {err:.1e}")
            tag = f"{spec.tile} {spec.warp or '32x64'}"
            ratios.setdefault(tag, []).append(times["first"] / times["between"])
            line.append(f"{tag}: {p.flops / times['between'] / 1e6:.1f} TFLOP/s between, "
                        f"{p.flops / times['first'] / 1e6:.1f} first")  # fmt: skip
        print(f"{p.label} pad={p.pad} ({p.flops / 1e9:.0f} GFLOP): " + "; ".join(line), flush=True)
    for tag, r in ratios.items():
        print(f"{tag}: copies between the k-steps over copies first, median speed-up {statistics.median(r):.3f}x "
              f"(min {min(r):.3f}, max {max(r):.3f}) over {len(r)} layers")  # fmt: skip


if __name__ == "__main__":
    share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/10")
    main(tuple(map(int, share.split("/"))))
