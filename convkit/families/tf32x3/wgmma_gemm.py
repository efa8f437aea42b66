"""Launcher of ``implicit_gemm_wgmma_tf32x3`` in ``kernels/wgmma_tf32x3.cu``, the first wgmma kernel: the weights' split
(:class:`~convkit.families.tf32x3.launch.SplitWeightsLaunch`, into its workspace), then blocks of 128 filters by ``n``
pixels, two warpgroups each issuing ``wgmma.mma_async m64nNk8`` on both operands in shared memory, each K-tile summed
apart and added in FP32 (``staged``) or summed on in the tensor cores, in two or three stages. It adds the op's bias as
it stores. It runs on compute capability 9.0 alone (H100, H200): elsewhere it declines, naming the GPU. The
warp-specialised kernel of the same source, and the call that runs either, are :mod:`convkit.families.tf32x3.wgmma`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.problem import ConvProblem
from convkit.cuda.launch import KernelLaunch
from convkit.cuda.operands import float32_regions, regions_bytes
from convkit.families.tf32x3.launch import split_elements, split_weights
from convkit.families.tf32x3.wgmma_operands import BLOCK_M, TILE_K, WIDTHS, check_problem, filter_macros


@dataclass(frozen=True)
class WgmmaGemmLaunch(KernelLaunch):
    """One launch of ``implicit_gemm_wgmma_tf32x3`` (a :class:`convkit.cuda.launch.Launch`): ``n`` pixels a block
    (:data:`WIDTHS`), ``staged`` sums (each K-tile's products summed apart, then added in FP32: twice the
    accumulators, so not at 256), ``stages`` in shared memory (2, or 3: a K-tile's products still running as the
    next K-tile's are issued, with the sums left to the tensor cores, at 128 pixels)."""

    n: int = 128
    staged: bool = True
    stages: int = 2

    kind: ClassVar[str] = "tf32x3_wgmma"
    source: ClassVar[str] = "wgmma_tf32x3"
    arch: ClassVar[str | None] = "sm_90a"

    def kernel_name(self, problem: ConvProblem) -> str:
        return "implicit_gemm_wgmma_tf32x3"

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (*filter_macros(problem), f"-DCONVKIT_WG_N={self.n}", f"-DCONVKIT_STAGED={int(self.staged)}",
                f"-DCONVKIT_STAGES={self.stages}")  # fmt: skip

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        pixels = problem.n * problem.out_h * problem.out_w
        return (math.ceil(pixels / self.n), math.ceil(problem.m / BLOCK_M))

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (256,)

    def shared_bytes(self, problem: ConvProblem) -> int:
        """``stages`` stages of the weights' two planes (128 rows) and the inputs' two (``n`` rows), 32 floats a
        row."""
        return self.stages * (2 * BLOCK_M + 2 * self.n) * TILE_K * 4

    def workspace_bytes(self, problem: ConvProblem) -> int:
        """The weights split into their two planes (:func:`~convkit.families.tf32x3.launch.split_elements`)."""
        return regions_bytes([split_elements(problem)])

    def operands(self, problem: ConvProblem, x: Any, w: Any, workspace: Any) -> tuple[Any, Any]:
        """Enqueue the split of ``w`` into ``workspace`` (allocated where None); the kernel's input and weight
        operands (``x`` as it is)."""
        (planes,) = float32_regions(workspace, [split_elements(problem)])
        return x, split_weights(problem, w, planes)

    def adds_bias(self, problem: ConvProblem) -> bool:
        return True

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming ``n``, ``staged`` or ``stages`` where the kernel builds no such launch, the problem
        where a size is past the kernel's 32-bit indices or its grid, or the GPU where it is not Hopper."""
        if self.n not in WIDTHS:
            raise ValueError(f"n must be one of {WIDTHS}, got {self.n!r}")
        if self.staged not in (True, False):
            raise ValueError(f"staged must be True or False, got {self.staged!r}")
        if self.n == 256 and self.staged:
            raise ValueError("staged sums at n=256 would hold 256 accumulators a thread: n=256 takes staged=False")
        if self.stages not in (2, 3) or (self.stages == 3 and (self.staged or self.n != 128)):
            raise ValueError(f"stages must be 2, or 3 with staged=False at n=128 (192 KiB), got stages={self.stages!r}")
        check_problem(problem)
