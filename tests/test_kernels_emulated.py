"""The chang2022 kernels on the CPU: their launches (grid, block, shared memory and arguments from convkit's
launches) run under ``tests/cuda_emulator`` and are checked against convkit's float64 reference, so that CI
checks the kernels' indexing, staging and channel-split protocol without a GPU. The emulator takes the
kernels' synchronous-copy (Turing) paths; the GPU tests cover cp.async and the real timing of threads."""

from __future__ import annotations

import subprocess
import types
from pathlib import Path

import numpy as np
import pytest
from emulated import CXX, build  # tests/emulated.py

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.cuda.launch import Launch
from convkit.cuda.nvrtc import kernel_code
from convkit.families.chang2022 import multi, single

pytestmark = pytest.mark.skipif(CXX is None, reason="no g++ to build the CUDA emulator")

#: The kernels' one declaration of dynamic shared memory, a pointer under the emulator.
DYNAMIC_SMEM = "extern __shared__ __align__(16) float dynamic_smem[];"


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """chang2022.cu (its headers inlined) as the emulator includes it."""
    directory = tmp_path_factory.mktemp("emulated")
    source = kernel_code("chang2022")
    assert DYNAMIC_SMEM in source
    (directory / "kernel_source.cu").write_text(source.replace(DYNAMIC_SMEM, "float* dynamic_smem;"))
    return directory


def emulate(build_dir: Path, launch: Launch, problem: ConvProblem, args: tuple[int, ...], *, counters: bool = True,
            offset: int = 0) -> None:  # fmt: skip
    """Build (once per macro set) and run one launch (its grid, block and shared memory as
    :func:`convkit.cuda.launch.launch` takes them) on fresh random inputs, ``w`` and ``out`` ``offset`` floats off
    16 bytes, and check it against :func:`convkit.core.reference.conv2d`. ``counters``: the kernel takes the split
    counters last."""
    launch.can_implement(problem)
    grid, (threads,), shared = launch.grid(problem), launch.block(problem), launch.shared_bytes(problem)
    options = launch.options(problem)
    ints = ",".join(f"ints[{i}]" for i in range(len(args)))
    call = f"{launch.kernel_name(problem)}(x,w,out,{ints}{',counters.data()' if counters else ''})"
    exe = build(build_dir, call, options, "conv_driver.cpp")
    p = problem
    rng = np.random.default_rng()
    x = rng.standard_normal((1, p.c, p.h, p.w), dtype=np.float32)
    w = rng.standard_normal((p.m, p.c, p.r, p.s), dtype=np.float32)
    files = [build_dir / f"{exe.name}.{name}" for name in ("x", "w", "out")]
    x.tofile(files[0])
    w.tofile(files[1])
    dims = (p.c, p.h, p.w, p.m, p.r, *grid, *[1] * (3 - len(grid)), threads, shared, offset, offset, *args)
    run = subprocess.run([str(exe), *map(str, (*files, *dims))], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{launch} on {p.label}: {(run.stdout + run.stderr).strip()}"
    out = np.fromfile(files[2], dtype=np.float32).reshape(1, p.m, p.h, p.w)
    assert not np.isnan(out).any(), f"{launch} on {p.label}: outputs left unwritten"
    err = reference.relative_error(out, reference.conv2d(x, w, pad=p.pad))
    assert err < DIRECT_TOLERANCE, f"{launch} on {p.label}: relative error {err:.2e}"


def pointer(offset_floats: int) -> types.SimpleNamespace:
    """The ``.data.ptr`` the configs' kernel_args read, for an array ``offset_floats`` past 16 bytes."""
    return types.SimpleNamespace(data=types.SimpleNamespace(ptr=4096 + 4 * offset_floats))


def same(c: int, h: int, w: int, m: int, k: int) -> ConvProblem:
    """One image, "same" padding."""
    return ConvProblem(n=1, c=c, h=h, w=w, m=m, r=k, s=k, pad=(k - 1) // 2)


#: (launch, problems): maps no tile divides, channels no segment divides, splits, several tiles per block.
MULTI_CASES = [
    (multi.BroadcastMultiLaunch(64, 1, 7, 7, 4), [same(8, 7, 7, 64, 3), same(12, 9, 11, 70, 5), same(3, 7, 7, 32, 3)]),
    (multi.BroadcastMultiLaunch(32, 2, 7, 7, 4, split=3), [same(16, 14, 14, 40, 5), same(13, 15, 9, 33, 3)]),
    (multi.BroadcastMultiLaunch(32, 2, 4, 7, 8, split=2), [same(16, 7, 7, 64, 5), same(20, 13, 10, 35, 3)]),
    (multi.BroadcastMultiLaunch(64, 1, 7, 7, 4, split=4), [same(16, 7, 7, 100, 5), same(16, 5, 6, 70, 3)]),
    (multi.BroadcastMultiLaunch(128, 1, 7, 7, 8), [same(8, 7, 7, 130, 3), same(9, 6, 5, 64, 5)]),
    (multi.BroadcastMultiLaunch(64, 2, 7, 7, 8, split=3), [same(16, 7, 7, 70, 5)]),
    (multi.BroadcastMultiLaunch(128, 2, 4, 7, 4, split=2), [same(12, 14, 14, 130, 5), same(8, 7, 7, 64, 3)]),
    (multi.BroadcastMultiLaunch(32, 1, 1, 7, 4, split=4), [same(16, 7, 7, 40, 5), same(9, 5, 12, 32, 3)]),
    (multi.BroadcastMultiLaunch(64, 1, 2, 7, 4), [same(8, 14, 14, 64, 3)]),
    (
        multi.TiledMultiLaunch(bm=32, tile_h=8, tile_w=8, rpt=1, px=4, ck=8, rows16=True, split=2),
        [same(16, 9, 13, 40, 3)],
    ),
    (multi.TiledMultiLaunch(bm=16, tile_h=16, tile_w=32, rpt=2, px=4, ck=8, rows16=True), [same(12, 20, 36, 20, 1)]),
    (
        multi.TiledMultiLaunch(bm=16, tile_h=32, tile_w=32, rpt=2, px=4, ck=8, rows16=True, split=3),
        [same(12, 19, 37, 20, 3), same(9, 35, 33, 17, 5)],
    ),
    (multi.TiledMultiLaunch(bm=8, tile_h=1, tile_w=32, rpt=1, px=1, ck=8), [same(10, 5, 37, 12, 5)]),
    (multi.PointwiseMultiLaunch(64, 64, 4, 8, 16, split=3), [same(40, 9, 11, 70, 1)]),
    (multi.PointwiseMultiLaunch(32, 32, 4, 4, 8), [same(13, 7, 7, 33, 1)]),
]


@pytest.mark.parametrize(
    ("launch", "problem", "offset"),
    [(launch, p, offset) for launch, problems in MULTI_CASES for p in problems for offset in (0, 1)],
    ids=lambda v: v.label if isinstance(v, ConvProblem) else (f"off{v}" if isinstance(v, int) else None),
)
def test_multi_channel_launch_matches_reference(
    build_dir: Path, launch: multi.ChangMultiLaunch, problem: ConvProblem, offset: int
) -> None:
    """Each multi-channel kernel, with its launch as conv2d_multi builds it; offset 1 puts w and out off 16
    bytes (the kernels' 4-byte fallbacks)."""
    emulate(build_dir, launch, problem, launch.kernel_args(problem, pointer(offset), pointer(offset)), offset=offset)


SINGLE_DIRECT_PROBLEMS = [*(same(1, 7, 5, 9, k) for k in (1, 3, 5)), same(1, 28, 28, 32, 1), same(1, 1, 3, 2, 1),
                          same(1, 2, 6, 5, 5), same(1, 13, 29, 11, 3)]  # fmt: skip


#: The direct launch with the weights from global memory, and from shared memory on 2 and 4 rows per thread
#: (3 filters: M = 9 leaves no partial group, 5 and 11 do; 32 threads copy 3 x 25 taps in three rounds),
#: paired with each problem it can run (at 1x1 the map is one row: rows 1 only).
SINGLE_DIRECT_EMULATED = [single.DirectSingleLaunch(4, 32),
                          single.DirectSingleLaunch(4, 32, rows=2, shared_weights=True),
                          single.DirectSingleLaunch(3, 64, rows=4, shared_weights=True)]  # fmt: skip
SINGLE_DIRECT_CASES = [(problem, plan) for problem in SINGLE_DIRECT_PROBLEMS for plan in SINGLE_DIRECT_EMULATED
                       if plan.rows == 1 or problem.r > 1]  # fmt: skip


@pytest.mark.parametrize(("problem", "plan"), SINGLE_DIRECT_CASES, ids=lambda case: str(getattr(case, "label", case)))
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "off1"])
def test_single_direct_matches_reference(
    build_dir: Path, problem: ConvProblem, plan: single.DirectSingleLaunch, offset: int
) -> None:
    """chang_single_direct on maps and widths no 4-pixel quad (or row pair or quad) divides, maps smaller than
    the halo and M no filter group divides; offset 1 puts w and out off 16 bytes (scalar stores)."""
    emulate(build_dir, plan, problem, plan.kernel_args(problem), counters=False, offset=offset)


@pytest.mark.parametrize("problem", [same(1, 28, 28, 32, 3), same(1, 30, 17, 40, 5), same(1, 9, 33, 12, 1)],
                         ids=lambda p: p.label)  # fmt: skip
def test_single_channel_plan_matches_reference(build_dir: Path, problem: ConvProblem) -> None:
    """chang_single with a plan of several bands, filter groups and pieces (none dividing the map or M)."""
    plan = single.StagedSingleLaunch("both", 1, 1, band_rows=11, group_filters=24, piece_rows=4, piece_filters=16,
                            threads=128)  # fmt: skip
    emulate(build_dir, plan, problem, plan.kernel_args(problem), counters=False)
