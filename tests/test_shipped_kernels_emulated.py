"""The kernels the op ships, on the CPU: the FP32 implicit GEMM, the 3xTF32 one (its mma.sync fragments emulated as a
warp collective), Winograd's three launches, cuConv's four kernels and the memory-transactions paper's ladder and
multi-channel kernel, each launch's grid, block, shared memory and macros from convkit's launches, run under
``tests/cuda_emulator`` and checked against convkit's float64 reference (Chang's kernels and Lu's wide kernel:
``test_kernels_emulated.py``, ``test_lu2020_emulated.py``). CI thereby checks the kernels' im2col indexing, staging,
fragment layouts, split-K planes, batches, transforms and stores without a GPU; the GPU tests check cp.async, the
tensor cores' own rounding and the timing."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from emulated import CXX, build  # tests/emulated.py

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.cuda.nvrtc import kernel_code
from convkit.families.fp32.launch import ImplicitGemmLaunch, gemm_args
from convkit.families.tf32x3.launch import SplitWeightsLaunch, TensorCoreGemmLaunch

pytestmark = pytest.mark.skipif(CXX is None, reason="no g++ to build the CUDA emulator")

#: A kernel's declaration of dynamic shared memory, which becomes a pointer to the block's under the emulator.
DYNAMIC_SMEM = re.compile(r"extern __shared__ (?:__align__\(\d+\) )?float (\w+)\[\];")


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emulated_gemm")


def source(build_dir: Path, name: str) -> Path:
    """``kernels/<name>.cu`` (headers inlined) as the emulator includes it, in a folder of its own."""
    folder = build_dir / name
    folder.mkdir(exist_ok=True)
    # the launch points dynamic_smem at each block's shared memory (unused by a kernel of static shared memory)
    text = "float* dynamic_smem;\n" + DYNAMIC_SMEM.sub(r"float* \1 = dynamic_smem;", kernel_code(name))
    (folder / "kernel_source.cu").write_text(text)
    return folder


def _block(launch: Any, problem: ConvProblem) -> tuple[int, int]:
    """The launch's block as the driver takes it: x and y threads."""
    return (*launch.block(problem), 1)[:2]


def _ints(count: int) -> str:
    """The first ``count`` integer arguments of a launch, as the driver's call names them."""
    return ",".join(f"ints[{i}]" for i in range(count))


def run_launch(build_dir: Path, launch: Any, problem: ConvProblem, call: str, inputs: tuple[np.ndarray, np.ndarray],
               out_floats: int, ints: tuple[int, ...], cluster: int = 1) -> np.ndarray:  # fmt: skip
    """One launch of ``launch`` (its grid, block, shared memory and macros on ``problem``) under the emulator:
    ``call`` in terms of x, w, out and ints, on ``inputs`` (x, w); ``out_floats`` of output, poisoned with NaN.
    ``cluster``: the blocks along z of a cluster (a kernel built with its cluster's size), run together."""
    folder = source(build_dir, launch.source)
    clustered = (f"-DCONVKIT_EMULATED_CLUSTER_Z={cluster}",) if cluster > 1 else ()
    exe = build(folder, call, (*launch.options(problem), *clustered), "launch_driver.cpp")
    files = [exe.with_suffix(f".{name}") for name in ("x", "w", "out")]
    for array, path in zip(inputs, files, strict=False):
        np.ascontiguousarray(array, dtype=np.float32).tofile(path)
    grid = (*launch.grid(problem), 1, 1)[:3]
    dims = (inputs[0].size, inputs[1].size, out_floats, *grid, *_block(launch, problem),
            launch.shared_bytes(problem), *ints)  # fmt: skip
    run = subprocess.run([str(exe), *map(str, (*files, *dims))], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{call}: {(run.stdout + run.stderr).strip()}"
    return np.fromfile(files[2], dtype=np.float32)


def emulate(build_dir: Path, launch: ImplicitGemmLaunch, problem: ConvProblem) -> float:
    """Run ``launch`` on ``problem`` (fresh random inputs) under the emulator, its ``batch`` GEMMs on as many
    independent inputs and filters (as Winograd's transformed points run), sum the split planes as ``sum_planes``
    would, and return the largest relative error against float64."""
    launch.can_implement(problem)
    p, splits, batch = problem, launch.effective_splits(problem), launch.batch
    rng = np.random.default_rng()
    x = rng.standard_normal((batch, *p.input_shape), dtype=np.float32)
    w = rng.standard_normal((batch, *p.filter_shape), dtype=np.float32)
    out_shape = (batch, splits, *p.output_shape)  # a GEMM's split planes lie together
    strides = (x[0].size, w[0].size, splits * math.prod(p.output_shape)) if batch > 1 else (0, 0, 0)
    read = w
    if launch.weight_elements(p):  # the weights as the kernel reads them: split ahead into two planes
        split = SplitWeightsLaunch()
        read = run_launch(build_dir, split, p, "split_weights_tf32x3(w,out,ints[0],ints[1])", (w[:1], w),
                          launch.weight_elements(p), (p.m, p.c * p.r * p.s))  # fmt: skip
        big, small = read.reshape(2, p.m, -1)[:, :, : p.c * p.r * p.s].astype(np.float64)
        assert np.abs(big + small - w.reshape(p.m, -1)).max() <= 2.0**-20 * np.abs(w).max()
    # an unsplit GEMM adds the op's bias as it stores (passed after the weights); split planes and batches take none
    takes = launch.stores_bias and splits == 1 and batch == 1
    bias = rng.standard_normal(p.m, dtype=np.float32) if takes else np.zeros(p.m, np.float32)
    read = np.concatenate([read.ravel(), bias])
    bias_arg = (f",w+{read.size - p.m}" if takes else ",(const float*)nullptr") if launch.stores_bias else ""
    out = run_launch(build_dir, launch, p, f"{launch.kernel_name(p)}(x,w,out,{_ints(14)}{bias_arg})", (x, read),
                     math.prod(out_shape), gemm_args(launch, p, strides))  # fmt: skip
    planes = out.reshape(out_shape)
    assert not np.isnan(planes).any(), f"{launch} on {p.label}: outputs left unwritten"
    biased = bias.astype(np.float64)[:, None, None]
    return max(reference.relative_error(planes[g].sum(axis=0),
                                        reference.conv2d(x[g], w[g], pad=p.pad, stride=p.stride) + biased)
               for g in range(batch))  # fmt: skip


#: Small problems no tile divides: odd sizes, batches, stride 2, 1x1 with 16-byte copies, 5x5 and 7x7, a channel
#: count that leaves a partial slice, split-K.
PROBLEMS = (
    ConvProblem(1, 7, 13, 11, 5, 3, 3, pad=1),
    ConvProblem(2, 9, 15, 12, 10, 3, 3, pad=1, stride=2),
    ConvProblem(2, 19, 16, 16, 33, 1, 1),
    ConvProblem(1, 11, 5, 5, 7, 5, 5, pad=1),
    ConvProblem(1, 6, 17, 10, 3, 7, 7, pad=3, stride=2),
    ConvProblem(1, 40, 6, 6, 70, 3, 3, pad=1),
)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.key)
@pytest.mark.parametrize("kind", [ImplicitGemmLaunch, TensorCoreGemmLaunch], ids=["fp32", "tf32x3"])
def test_the_implicit_gemm_kernels_match_float64_on_the_cpu(build_dir, problem, kind, monkeypatch):
    # the launch's own checks of the GPU in hand (TF32 tensor cores) do not apply on the CPU
    monkeypatch.setattr("convkit.families.tf32x3.launch.has_tf32_tensor_cores", lambda: True)
    slices = math.ceil(problem.c * problem.r * problem.s / kind.slice_k)
    launches = [kind(tile="64x64", splits=1, stages=2), kind(tile="128x64", splits=min(3, slices), stages=3),
                kind(tile="64x128", stages=4, batch=3)]  # fmt: skip
    if kind is TensorCoreGemmLaunch:  # CUTLASS's warps, the weights split ahead (ldmatrix), two slices a flush
        launches += [kind("128x64", stages=3, warp="64x32", weights="split"),
                     kind("64x64", splits=min(2, slices), stages=2, warp="64x32", weights="split", flush=2),
                     kind("128x128", stages=2, weights="split"), kind("64x128", stages=3, flush=2)]  # fmt: skip
    for launch in launches:
        err = emulate(build_dir, launch, problem)
        assert err < DIRECT_TOLERANCE, f"{launch} on {problem.key}: relative error {err:.2e}"


#: Winograd's launches the emulated test runs, by the products' kernel.
WINOGRAD_KINDS = ("fp32", "tf32x3", "tf32x3, filters split", "tf32x3 on wgmma", "tf32x3 on wgmma, split staged")


#: Its problems: padding and none, 5x5, and (for the products' kernels) more channels than a K-tile and more filters
#: than a block, over more tiles than a block of pixels.
WINOGRAD_PROBLEMS = (
    ConvProblem(2, 5, 11, 9, 6, 3, 3, pad=1),
    ConvProblem(1, 3, 9, 10, 4, 5, 5, pad=2),
    ConvProblem(1, 4, 8, 8, 3, 3, 3),
    ConvProblem(6, 40, 20, 19, 130, 3, 3, pad=1),
)


@pytest.mark.parametrize("problem", WINOGRAD_PROBLEMS, ids=lambda p: p.key)
@pytest.mark.parametrize("kind", WINOGRAD_KINDS)
def test_winograd_matches_float64_on_the_cpu(build_dir, problem, kind, monkeypatch):
    """Winograd's three launches in turn, as ``conv2d_winograd`` runs them on one pass of images: the filter and
    input transforms in one, the batched GEMM of the transformed points (the FP32 implicit GEMM, the 3xTF32 one, or
    the split-ahead wgmma kernel, persistent over every point's tiles on a GPU of two SMs), the output transform;
    within the transform methods' bar of float64. At F(4x4, 3x3) and F(2x2, 5x5)."""
    emulate_winograd(build_dir, problem, kind, 4 if problem.r == 3 else 2, monkeypatch)


#: The other tiles on wgmma, each on a problem of its filter (among them six images of 40 channels: a block's 32 and 8).
OTHER_TILES = ((WINOGRAD_PROBLEMS[0], 2), (WINOGRAD_PROBLEMS[3], 6), (WINOGRAD_PROBLEMS[0], 6),
               (WINOGRAD_PROBLEMS[1], 4))  # fmt: skip


@pytest.mark.parametrize(("problem", "m"), OTHER_TILES, ids=lambda v: getattr(v, "key", f"F({v})"))
@pytest.mark.parametrize("kind", WINOGRAD_KINDS[3:])
def test_winograd_on_wgmma_at_every_tile_on_the_cpu(build_dir, problem, m, kind, monkeypatch):
    """The same on wgmma at the filters' other tiles, F(2x2, 3x3), F(6x6, 3x3) and F(4x4, 5x5): the input transform's
    block stages windows of each size (those of 8 x 8 past the 48 KiB a block gets without asking)."""
    emulate_winograd(build_dir, problem, kind, m, monkeypatch)


def emulate_winograd(build_dir: Path, problem: ConvProblem, kind: str, m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Winograd of ``kind`` (:data:`WINOGRAD_KINDS`) at F(m x m) on ``problem``, emulated, against float64."""
    from convkit.families.fp32.winograd import (
        FILTERS_SPLIT,
        PLAIN,
        WGMMA_FP32_INPUTS,
        WGMMA_OPERANDS,
        WinogradLaunch,
        _TransformLaunch,
    )
    from convkit.families.tf32x3 import wgmma_winograd
    from convkit.families.tf32x3.launch import TensorCoreWinogradLaunch

    monkeypatch.setattr("convkit.families.tf32x3.launch.has_tf32_tensor_cores", lambda: True)
    monkeypatch.setattr(wgmma_winograd, "check_problem", lambda problem: None)  # Hopper's: not the CPU's
    monkeypatch.setattr(wgmma_winograd, "sm_count", lambda: 2)
    p = problem
    spec = {"fp32": WinogradLaunch(m, "64x64"), "tf32x3": TensorCoreWinogradLaunch(m, "64x64"),
            "tf32x3, filters split": TensorCoreWinogradLaunch(m, "64x64", weights="split"),
            "tf32x3 on wgmma": wgmma_winograd.WgmmaWinogradLaunch(m),
            "tf32x3 on wgmma, split staged": wgmma_winograd.WgmmaWinogradLaunch(m, inputs="split staged"),
            }[kind]  # fmt: skip
    spec.can_implement(p)
    th, tw, t, t_pad = spec.tiles(p)
    points, layout = spec.alpha(p) ** 2, spec.transform_layout()
    rng = np.random.default_rng()
    x = rng.standard_normal(p.input_shape, dtype=np.float32)
    w = rng.standard_normal(p.filter_shape, dtype=np.float32)
    none = np.zeros(1, np.float32)
    # both transforms in one launch: V (split into its TF32 parts where the products read it so) and U (split too,
    # channels last, for the wgmma kernel)
    filters, inputs = spec.transform_items(p)
    cp = -(-p.c // 32) * 32
    # a thread per channel and padded tile (for the wgmma kernel in blocks of 8 tiles by 32 channels)
    on_wgmma = layout in (WGMMA_OPERANDS, WGMMA_FP32_INPUTS)
    assert inputs == (cp * -(-t_pad // 8) * 8 if on_wgmma else p.c * t_pad)
    vu = run_launch(build_dir, _TransformLaunch("winograd_transforms", spec), p,
                    f"winograd_transforms(w,out,x,out+{spec.filter_elements(p)},{_ints(11)})", (x, w),
                    spec.filter_elements(p) + spec.input_elements(p),
                    (p.m, p.c, p.h, p.w, p.pad, th, tw, t, t_pad, filters, layout))  # fmt: skip
    v, u = vu[: spec.filter_elements(p)], vu[spec.filter_elements(p) :]
    assert not np.isnan(vu).any(), "a float of V or U the transforms never wrote"
    if layout == FILTERS_SPLIT:  # the big parts' planes, then the small parts', rows padded to whole float4s
        assert not v.reshape(2, points, p.m, -1)[:, :, :, p.c :].any()
    if on_wgmma:
        tiles = cp // 32  # V: [point][m-block][K-tile][plane][k-group][row][4]; U: [point][plane][t][CP]
        tiled = v.reshape(points, -1, tiles, 2, 8, 128, 4).transpose(0, 3, 1, 5, 2, 4, 6).reshape(points, 2, -1, cp)
        assert not tiled[:, :, p.m :].any() and not tiled[:, :, :, p.c :].any(), "V past M or C"
        planes = u.reshape(points, 1 if layout == WGMMA_FP32_INPUTS else 2, t_pad, cp)
        assert not planes[..., p.c :].any() and not planes[:, :, t:].any(), "U past C or T"
        big = tiled[:, 0, : p.m, : p.c]
        assert (big.view(np.uint32) & 0x1FFF == 0).all(), "V's big parts hold more than TF32"
        products = spec.products_launch(p)
        gp = spec.gemm_problem(p)
        prod = run_launch(build_dir, products, gp, f"{products.kernel_name(gp)}(x,w,out,{_ints(4)})", (u, v),
                          points * p.m * t_pad, (p.m, p.c, t_pad, points))  # fmt: skip
    else:
        gemm, gp = spec.gemm_launch(p), spec.gemm_problem(p)
        strides = (p.c * t_pad, p.m * spec.filter_row(p), p.m * t_pad)
        no_bias = ",(const float*)nullptr" if gemm.stores_bias else ""
        prod = run_launch(build_dir, gemm, gp, f"{gemm.kernel_name(gp)}(x,w,out,{_ints(14)}{no_bias})", (u, v),
                          points * p.m * t_pad, gemm_args(gemm, gp, strides))  # fmt: skip
    assert layout in (PLAIN, FILTERS_SPLIT, WGMMA_OPERANDS, WGMMA_FP32_INPUTS)
    y = run_launch(build_dir, _TransformLaunch("winograd_output", spec), p,
                   f"winograd_output(x,out,{_ints(7)},(const float*)nullptr)",
                   (prod, none), math.prod(p.output_shape), (p.m, p.out_h, p.out_w, th, tw, t, t_pad))  # fmt: skip
    err = reference.relative_error(y.reshape(p.output_shape), reference.conv2d(x, w, pad=p.pad))
    # on these small problems FP32 Winograd stays near 1e-6: 3xTF32 products must too (TF32's own would be ~1e-4)
    assert err < 1e-5 < reference.TRANSFORM_TOLERANCE, f"Winograd F({spec.m}, {p.r}) on {p.key}: error {err:.2e}"


CUCONV_PROBLEMS = (
    ConvProblem(2, 7, 11, 9, 10, 3, 3, pad=1),
    ConvProblem(1, 20, 8, 7, 5, 5, 5, pad=2),
    ConvProblem(1, 9, 10, 10, 6, 3, 3, pad=0, stride=2),
)


@pytest.mark.parametrize("problem", CUCONV_PROBLEMS, ids=lambda p: p.key)
def test_cuconv_matches_float64_on_the_cpu(build_dir, problem):
    """cuConv's kernels (the paper's per-tap planes, the fused tile, its channel splits and the tiled GEMM), each
    launch's partial planes summed as ``sum_planes`` would, against float64."""
    from convkit.families.cuconv.launch import CuconvLaunch, kernel_args

    p = problem
    rng = np.random.default_rng()
    x = rng.standard_normal(p.input_shape, dtype=np.float32)
    w = rng.standard_normal(p.filter_shape, dtype=np.float32)
    ref = reference.conv2d(x, w, pad=p.pad, stride=p.stride)
    for launch in (CuconvLaunch("paper", 64), CuconvLaunch("fused", 64, filters_per_thread=2),
                   CuconvLaunch("split", 32, filters_per_thread=4, splits=2), CuconvLaunch.tiled("32x32", splits=2),
                   CuconvLaunch.tiled("64x64")):  # fmt: skip
        if launch.variant == "paper" and p.stride != 1:
            continue
        launch.can_implement(p)
        ints = kernel_args(launch, p)
        planes = launch.planes(p)
        out = run_launch(build_dir, launch, p, f"{launch.kernel_name(p)}(x,w,out,{_ints(len(ints))})", (x, w),
                         planes * math.prod(p.output_shape), ints)  # fmt: skip
        got = out.reshape(planes, *p.output_shape)
        assert not np.isnan(got).any(), f"{launch} on {p.key}: outputs left unwritten"
        err = reference.relative_error(got.sum(axis=0), ref)
        assert err < DIRECT_TOLERANCE, f"{launch} on {p.key}: relative error {err:.2e}"


#: Single-channel images (the ladder) and a multi-channel layer, odd widths and heights, each filter size.
LU_PROBLEMS = (
    ConvProblem(1, 1, 13, 37, 1, 3, 3, pad=1),
    ConvProblem(2, 1, 9, 70, 2, 5, 5, pad=2),
    ConvProblem(1, 1, 11, 33, 1, 7, 7, pad=3),
)


@pytest.mark.parametrize("problem", LU_PROBLEMS, ids=lambda p: p.key)
def test_lu2020_ladder_and_multi_channel_match_float64_on_the_cpu(build_dir, problem):
    """The memory-transactions paper's single-channel ladder (``lu_direct`` .. ``lu_combined``, warp shuffles
    emulated) and its multi-channel kernel against float64, at blocks of one warp: the emulator's shuffles wait for
    the whole block, so a warp that leaves early (rows past the image) would strand the others, where on the GPU a
    shuffle waits for its own warp only."""
    from convkit.families.lu2020.launch import ONE_OUTPUT, SINGLE_VARIANTS, LuMultiLaunch, LuSingleLaunch

    p = problem
    rng = np.random.default_rng()
    x = rng.standard_normal(p.input_shape, dtype=np.float32)
    w = rng.standard_normal(p.filter_shape, dtype=np.float32)
    ref = reference.conv2d(x, w, pad=p.pad)
    single = [LuSingleLaunch(v, 1 if v in ONE_OUTPUT else 4, 1) for v in SINGLE_VARIANTS]
    for launch in single:
        launch.can_implement(p)
        ints = (p.h, p.w, p.m, p.out_h, p.out_w, p.pad)
        out = run_launch(build_dir, launch, p, f"{launch.kernel_name(p)}(x,w,out,{_ints(6)})", (x, w),
                         math.prod(p.output_shape), ints)  # fmt: skip
        err = reference.relative_error(out.reshape(p.output_shape), ref)
        assert err < DIRECT_TOLERANCE, f"{launch} on {p.key}: relative error {err:.2e}"
    # the multi-channel kernel on the same layer with more channels and filters
    multi = dataclasses.replace(p, c=5, m=9)
    x = rng.standard_normal(multi.input_shape, dtype=np.float32)
    w = rng.standard_normal(multi.filter_shape, dtype=np.float32)
    launch = LuMultiLaunch(rows=2, filters=4, warps=1, stage_channels=2)
    launch.can_implement(multi)
    ints = (multi.c, multi.h, multi.w, multi.m, multi.out_h, multi.out_w, multi.pad)
    out = run_launch(build_dir, launch, multi, f"lu_multi(x,w,out,{_ints(7)})", (x, w), math.prod(multi.output_shape),
                     ints)  # fmt: skip
    err = reference.relative_error(out.reshape(multi.output_shape), reference.conv2d(x, w, pad=multi.pad))
    assert err < DIRECT_TOLERANCE, f"{launch} on {multi.key}: relative error {err:.2e}"
