"""Lu 2020 on the CPU: the compiler's verdict on the window array, the launch options, the problems, the cases."""

from __future__ import annotations

import pytest

from convkit import bench, lu2020, warp_sim
from convkit.compile import find_nvcc, ptxas_report
from convkit.problem import ConvProblem

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on the PATH")

#: The naive kernel's stack frame (bytes) as ptxas 13.0 reported it, per filter width: identical on sm_75
#: and sm_90. K = 3: the lane-dependent index takes two values and becomes a select; 5 and 7: the window
#: iTemp[K * K] (100 and 196 bytes) goes to local memory.
NAIVE_STACK_FRAME = {3: 0, 5: 104, 7: 200}


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("k", lu2020.FILTER_SIZES)
def test_only_the_naive_window_goes_to_local_memory(k, arch):
    resources = {r.kernel: r for r in ptxas_report("lu2020", arch, options=lu2020.build_options(k, rows=8))}
    assert resources["lu_column_naive"].stack_frame_bytes == NAIVE_STACK_FRAME[k]
    for name in ("lu_direct", "lu_column", "lu_row", "lu_combined"):
        r = resources[name]
        assert (r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes) == (0, 0, 0), name
    assert resources["lu_column_naive"].spill_store_bytes == 0  # local memory by indexing, not by pressure


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_multi_channel_tiles_do_not_spill_at_3x3(arch):
    for launch in (lu2020.MultiLaunch(), lu2020.MultiLaunch(4, 16, 2), lu2020.MultiLaunch(8, 8, 2)):
        options = lu2020.build_options(3, **launch.as_params())
        multi = next(r for r in ptxas_report("lu2020", arch, options=options) if r.kernel == "lu_multi")
        assert (multi.stack_frame_bytes, multi.spill_store_bytes) == (0, 0), launch


def test_build_options_carry_the_simulated_schedule():
    options = lu2020.build_options(7, rows=16, warps=2)
    assert options[:5] == warp_sim.schedule_macros(warp_sim.exchange_schedule(7))
    assert "-DLU_LOADS=0,2,6" in options and "-DLU_ROWS=16" in options and "-DLU_WARPS=2" in options


def test_chapter_problems():
    single = lu2020.single_problems()
    assert len(single) == 18 and {p.r for p in single} == {3, 5, 7}
    assert all(lu2020.is_single_image(p) for p in single)
    multi = lu2020.multi_problems()
    assert len(multi) == 26 and {p.n for p in multi} == {1, 32} and {p.r for p in multi} == {3}
    assert ConvProblem.same(1, 512, 7, 7, 512, 3) in multi  # ResNet-50 res5 3x3


def test_cases_add_the_image_peer_on_single_images_only():
    image, layer = lu2020.single_problems()[0], lu2020.multi_problems()[0]
    peers = ("ndimage.correlate",)
    image_cases = bench.cases(image, bench.LU_SINGLE_VARIANTS, pytorch=False, peers=peers)
    assert [c.variant for c in image_cases if c.impl == "cupyx"] == ["ndimage.correlate"]
    assert [c.variant for c in image_cases if c.impl == "convkit"] == list(bench.LU_SINGLE_VARIANTS)
    layer_cases = bench.cases(layer, [*bench.LU_SINGLE_VARIANTS, "lu_multi"], pytorch=False, peers=peers)
    assert [c.variant for c in layer_cases if c.impl in ("convkit", "cupyx")] == ["lu_multi"]
    with pytest.raises(ValueError, match="unknown peer"):
        bench.cases(image, [], peers=("scipy",))


def test_tuning_candidates():
    assert [c.rows for c in lu2020.single_candidates("column")] == [1, 1, 1]
    assert {c.rows for c in lu2020.single_candidates("combined")} == {2, 4, 8, 16}
    assert all(c.rows * c.filters <= 64 for c in lu2020.MULTI_CANDIDATES)
