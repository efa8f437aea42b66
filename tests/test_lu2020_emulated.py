"""lu_wide on the CPU: its launches run under ``tests/cuda_emulator`` (warp shuffles included) and are checked
against float64 on widths no warp's 128 columns divide, widths that are and are not multiples of 4 (the
16-byte and the 4-byte paths), images narrower than the filter, and every filter size."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_kernels_emulated import CXX, emulate, pointer

from convkit.core.problem import ConvProblem
from convkit.cuda.nvrtc import kernel_code
from convkit.families.lu2020.launch import LuWideLaunch

pytestmark = pytest.mark.skipif(CXX is None, reason="no g++ to build the CUDA emulator")


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """lu2020.cu as the emulator includes it (it has no dynamic shared memory: the pointer is a stand-in)."""
    directory = tmp_path_factory.mktemp("lu2020_emulated")
    source = kernel_code("lu2020").replace("__shared__ __align__(16)", "alignas(16) __shared__")  # C++'s order
    (directory / "kernel_source.cu").write_text("float* dynamic_smem;\n" + source)
    return directory


@dataclasses.dataclass(frozen=True)
class OneWarpLaunch(LuWideLaunch):
    """A one-warp block as the emulator's driver launches it (a flat block of 32)."""

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (32,)


def same(h: int, w: int, k: int, m: int = 1) -> ConvProblem:
    return ConvProblem(1, 1, h, w, m, k, k, pad=(k - 1) // 2)


PROBLEMS = (same(9, 133, 3), same(6, 260, 5), same(11, 129, 7), same(3, 2, 5), same(13, 8, 7, m=3), same(5, 36, 3))
CASES = [(OneWarpLaunch(rows, 1), p) for rows in (1, 4) for p in PROBLEMS]


@pytest.mark.parametrize(("launch", "problem"), CASES, ids=lambda v: v.label if isinstance(v, ConvProblem) else None)
def test_wide_matches_float64(build_dir: Path, launch: LuWideLaunch, problem: ConvProblem) -> None:
    """Each launch with the ``vec`` flag its launcher computes for aligned arrays."""
    args = launch.kernel_args(problem, pointer(0), pointer(0))
    emulate(build_dir, launch, problem, args, counters=False)
