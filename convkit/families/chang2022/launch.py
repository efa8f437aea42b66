"""Chang 2022's launchers: check the arguments, pick a default launch for this GPU, launch it.

Both kernels of the paper take one image, square 1x1, 3x3 or 5x5 filters and "same" padding
(:func:`check_same_args`). :func:`conv2d_single` runs a single-channel launch
(:mod:`convkit.families.chang2022.single`), :func:`conv2d_multi` a multi-channel one
(:mod:`convkit.families.chang2022.multi`), each through :func:`convkit.cuda.launch.launch`.
"""

from __future__ import annotations

from typing import Any

from convkit.core.gpu import require_cupy, shared_memory_limits, sm_count
from convkit.core.problem import ConvProblem
from convkit.cuda.arrays import check_conv_args, output_for
from convkit.cuda.launch import launch as launch_kernel
from convkit.cuda.zeroed import cupy_zeroed_int32
from convkit.families.chang2022.model import FILTER_SIZES, current_figures, latency_model
from convkit.families.chang2022.multi import ChangMultiLaunch
from convkit.families.chang2022.ranking import multi_config
from convkit.families.chang2022.single import ChangSingleLaunch, fill_plan


def check_same_args(x: Any, w: Any, *, single: bool) -> ConvProblem:
    """Validate the arguments of both kernels before launch: one image, square K x K filters with K in
    1, 3, 5, "same" padding implied; ``single`` also needs C = 1. Errors name the argument."""
    k = w.shape[-1] if hasattr(w, "shape") and len(w.shape) == 4 else 1
    problem = check_conv_args(x, w, pad=(k - 1) // 2 if k % 2 else 0, stride=1)
    if problem.n != 1:
        raise ValueError(f"x must hold one image (N = 1) as in the paper, got N = {problem.n}")
    if problem.r != problem.s or problem.r not in FILTER_SIZES:
        raise ValueError(f"w must hold square 1x1, 3x3 or 5x5 filters, got {problem.r}x{problem.s}")
    if single and problem.c != 1:
        raise ValueError(f"x must have one channel for the single-channel kernel, got C = {problem.c}")
    p = problem
    if max(p.c * p.h * p.w, p.m * p.c * p.r * p.s, p.m * p.h * p.w) >= 2**31:
        raise ValueError("x, w or the output has 2^31 elements or more; the kernels index planes with int")
    return problem


def conv2d_single(x: Any, w: Any, *, launch: ChangSingleLaunch | None = None, out: Any = None) -> Any:
    """Single-channel "same" convolution (1, 1, H, W) x (M, 1, K, K) -> (1, M, H, W) with ``chang_single``
    (``chang_single_direct`` for a :class:`~convkit.families.chang2022.single.DirectSingleLaunch`).

    Args:
        x: float32 ``cupy.ndarray`` (1, 1, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, 1, K, K), K in 1, 3, 5.
        launch: the division; default :func:`~convkit.families.chang2022.single.fill_plan` for this GPU's figures.
            A :class:`~convkit.families.chang2022.single.DirectSingleLaunch` runs the unstaged kernel.
        out: optional float32 (1, M, H, W) output.

    Example:
        >>> y = conv2d_single(x, w, launch=plan_single(problem, latency_model(current_figures())))  # doctest: +SKIP
    """
    cupy = require_cupy()
    problem = check_same_args(x, w, single=True)
    plan = launch if launch is not None else fill_plan(problem, latency_model(current_figures()))
    if not isinstance(plan, ChangSingleLaunch):
        raise TypeError(f"launch must be a StagedSingleLaunch or DirectSingleLaunch, got {type(plan).__name__}")
    plan.can_implement(problem)  # before the output is allocated: a bad plan is named first
    out = output_for(out, problem)
    launch_kernel(plan, problem, (x, w, out, *(cupy.int32(v) for v in plan.kernel_args(problem))))
    return out


def conv2d_multi(
    x: Any, w: Any, *, launch: ChangMultiLaunch | None = None, out: Any = None, workspace: Any = None
) -> Any:
    """Multi-channel "same" convolution (1, C, H, W) x (M, C, K, K) -> (1, M, H, W) with ``chang_multi``
    (``chang_pointwise`` for a :class:`~convkit.families.chang2022.multi.PointwiseMultiLaunch` at 1x1,
    ``chang_broadcast`` for a :class:`~convkit.families.chang2022.multi.BroadcastMultiLaunch`).

    Args:
        x: float32 ``cupy.ndarray`` (1, C, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, C, K, K), K in 1, 3, 5.
        launch: the block; default :func:`~convkit.families.chang2022.multi.multi_config` for this GPU. With
            ``split`` above 1 the splits of each output tile add into it with atomics in the same launch (the
            first to start zeroes it), coordinated by counters (the launch's workspace).
        out: optional float32 (1, M, H, W) output.
        workspace: the counters, zero and left zero (uint8, the launch's ``workspace_bytes``); default the current
            stream's own (:mod:`convkit.cuda.zeroed`): launches on two streams share none.
    """
    cupy = require_cupy()
    problem = check_same_args(x, w, single=False)
    config = (
        launch if launch is not None else multi_config(problem, sm_count(), shared_per_sm=shared_memory_limits()[1])
    )
    if not isinstance(config, ChangMultiLaunch):
        raise TypeError(
            "launch must be a TiledMultiLaunch, PointwiseMultiLaunch or BroadcastMultiLaunch, "
            f"got {type(config).__name__}"
        )
    config.can_implement(problem)  # before the output is allocated: a bad launch is named first
    out = output_for(out, problem)
    # the splits' counters (the launch's workspace, 3 per output tile), zero at the start (split::zero_tile_once) and
    # left zero by the launch; no split: never read
    nbytes = config.workspace_bytes(problem)
    if not nbytes:
        counters = cupy.uint64(0)
    elif workspace is None:
        counters = cupy_zeroed_int32(nbytes // 4)
    else:
        counters = workspace[:nbytes].view(cupy.int32)
    args = config.kernel_args(problem, x, w)
    launch_kernel(config, problem, (x, w, out, *(cupy.int32(v) for v in args), counters))
    return out
