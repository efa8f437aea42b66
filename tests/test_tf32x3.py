"""The 3xTF32 family on the CPU: the split's rounding bit for bit, its error bound, the launch's knobs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convkit.core import gpu
from convkit.core.problem import ConvProblem
from convkit.families import tf32x3 as family
from convkit.families.tf32x3 import launch
from convkit.families.tf32x3.rounding import product_tf32x3, round_tf32, split_tf32


def _f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


@pytest.mark.parametrize(
    ("bits", "rounded"),
    [
        (0x3F800000, 0x3F800000),  # 1.0: exact
        (0x3F800FFF, 0x3F800000),  # below half of the dropped range: down
        (0x3F801000, 0x3F802000),  # exactly half: away from zero
        (0xBF801000, 0xBF802000),  # negative half: away from zero too
        (0x3F801001, 0x3F802000),  # above half: up
        (0x3FFFF000, 0x40000000),  # the carry rounds into the next binade
        (0x00000000, 0x00000000),
    ],
)
def test_round_tf32_is_cvt_rna(bits, rounded):
    assert round_tf32(np.array([_f32(bits)])).view(np.uint32)[0] == rounded


def test_the_split_is_exact_to_22_bits_and_its_parts_are_tf32():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(100_000) * np.exp2(rng.integers(-20, 20, 100_000))).astype(np.float32)
    big, small = split_tf32(a)
    assert not (big.view(np.uint32) & 0x1FFF).any() and not (small.view(np.uint32) & 0x1FFF).any()
    # big + small holds a's leading 22 bits at least: a relative difference of at most 2^-22
    err = np.abs(big.astype(np.float64) + small - a) / np.abs(a.astype(np.float64))
    assert err.max() <= 2.0**-22


def test_what_tf32_drops_of_the_small_part_is_at_most_a_tie():
    """Why weights split ahead keep the loop's rule (small left to the tensor core to truncate): with big rounded to
    nearest, the small part's dropped bits are at most exactly half its last TF32 place, so rounding it instead
    would only move a tie the other way, never shrink an error."""
    rng = np.random.default_rng(2)
    a = (rng.standard_normal(100_000) * np.exp2(rng.integers(-20, 20, 100_000))).astype(np.float32)
    small = a - split_tf32(a)[0]
    dropped = small.view(np.uint32) & np.uint32(0x1FFF)
    assert dropped.max() <= 0x1000 and (dropped == 0x1000).any()


def test_the_dropped_small_product_bounds_a_products_error_near_fp32():
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(100_000).astype(np.float32) for _ in range(2))
    exact = a.astype(np.float64) * b
    err = np.abs(product_tf32x3(a, b) - exact) / np.abs(exact)
    assert np.median(err) < 2.0**-23 and err.max() < 2.0**-20


def test_the_launch_is_the_fp32_launch_with_16_deep_slices_and_dynamic_shared_memory():
    p = ConvProblem.same(1, 3, 17, 19, 5, 3)  # K = 27: two slices of 16
    spec = launch.TensorCoreGemmLaunch("64x64", splits=2, stages=4)
    assert spec.effective_splits(p) == 2 and spec.grid(p) == (6, 1, 2) and spec.block(p) == (64,)
    assert spec.shared_bytes(p) == 4 * launch.stage_bytes("64x64") == 4 * 4 * 16 * (72 + 72)
    assert spec.options(p) == ("-DCONVKIT_BM=64", "-DCONVKIT_BN=64", "-DCONVKIT_R=3", "-DCONVKIT_S=3",
                               "-DCONVKIT_VEC=1", "-DCONVKIT_STAGES=4")  # fmt: skip
    assert spec.kernel_name(p) == "implicit_gemm_tf32x3"


def test_the_family_declines_gpus_without_tf32_tensor_cores(monkeypatch):
    p = ConvProblem.same(1, 8, 8, 8, 8, 3)
    monkeypatch.setenv("CONVKIT_PTX_ARCH", "compute_75")
    with pytest.raises(ValueError, match=r"3xTF32 needs TF32 tensor cores .*compute_75"):
        launch.TensorCoreGemmLaunch().can_implement(p)
    assert not family.IGEMM_VARIANT.supports(p)  # the generic checks and the sweeps leave it out there
    monkeypatch.delenv("CONVKIT_PTX_ARCH")
    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (7, 5))
    with pytest.raises(ValueError, match=r"this build targets sm_75"):
        launch.TensorCoreGemmLaunch().can_implement(p)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    launch.TensorCoreGemmLaunch().can_implement(p)
    with pytest.raises(ValueError, match="stages must be one of"):
        launch.TensorCoreGemmLaunch(stages=6).can_implement(p)


def test_winograd_in_tf32x3_is_fp32_winograd_with_its_products_on_the_3xtf32_gemm(monkeypatch):
    from convkit.core.reference import TRANSFORM_TOLERANCE
    from convkit.families.fp32 import winograd

    p = ConvProblem.same(8, 64, 56, 56, 64, 3)
    spec = launch.winograd_launch(p)
    fp32 = winograd.winograd_default(p)
    assert type(spec) is launch.TensorCoreWinogradLaunch and spec.to_params() == fp32.to_params()
    assert spec.kind == "tf32x3_winograd" and spec.gemm_launch(p) == launch.TensorCoreGemmLaunch(
        fp32.gemm_tile, 1, fp32.stages, batch=36
    )
    fp32_candidates = [c.to_params() for c in winograd.winograd_candidates(p)]
    tuned = [c.to_params() for c in launch.winograd_launch_candidates(p)]
    assert tuned == fp32_candidates + [c | {"weights": "split"} for c in fp32_candidates]
    split = launch.TensorCoreWinogradLaunch(4, "64x64", weights="split")  # the filters split by their transform
    assert split.transform_layout() == winograd.FILTERS_SPLIT and spec.transform_layout() == winograd.PLAIN
    assert split.filter_row(p) == 64
    assert split.gemm_launch(p).weights == "presplit" and split.gemm_launch(p).weight_elements(p) == 0
    assert split.workspace_elements(p)[0] == 2 * spec.workspace_elements(p)[0]  # C = 64: no padding
    odd = ConvProblem.same(1, 7, 9, 9, 5, 3)
    assert split.filter_row(odd) == 8 and split.filter_elements(odd) == 2 * 36 * 5 * 8
    assert launch.TensorCoreWinogradLaunch.from_params(spec.to_params()) == spec
    variant = family.WINOGRAD_VARIANT
    assert variant.tolerance == TRANSFORM_TOLERANCE and variant.precision == "tf32x3"
    monkeypatch.setattr(launch, "has_tf32_tensor_cores", lambda: True)
    assert variant.not_supported_reasons(p) == []
    assert variant.not_supported_reasons(ConvProblem(1, 8, 9, 9, 8, 3, 3, pad=1, stride=2)) != []  # stride 1 only
    assert variant.not_supported_reasons(ConvProblem.same(1, 8, 9, 9, 8, 7)) != []  # no F(m, 7x7)
    monkeypatch.setattr(launch, "has_tf32_tensor_cores", lambda: False)
    (reason,) = variant.not_supported_reasons(p)  # the GPU's: no TF32 tensor cores (here, no GPU)
    assert "3xTF32 needs TF32 tensor cores" in reason


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_kernel_builds_without_spills(arch):
    from convkit.cuda.ptxas import find_nvcc, ptxas_report
    from convkit.families.fp32.launch import TILES

    if find_nvcc() is None:
        pytest.skip("nvcc is not on the PATH")
    shapes = [ConvProblem(1, 8, 8, 8, 8, 1, 1), ConvProblem(1, 8, 7, 7, 8, 1, 1)]  # 16-byte copies and 4-byte
    shapes += [ConvProblem(1, 8, 13, 13, 8, k, k) for k in (3, 5, 7, 11)]
    for tile in TILES:
        for p in shapes:
            for stages in (3, 5):
                options = launch.TensorCoreGemmLaunch(tile, stages=stages).options(p)
                for k in ptxas_report("implicit_gemm_tf32x3", arch, options=options):
                    assert k.spill_store_bytes == k.spill_load_bytes == 0, (options, k)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cutlass_warps_and_weights_split_ahead_build_without_spills(arch):
    from convkit.cuda.ptxas import find_nvcc, ptxas_report
    from convkit.families.fp32.launch import TILES

    if find_nvcc() is None:
        pytest.skip("nvcc is not on the PATH")
    for p in (ConvProblem(1, 8, 13, 13, 8, 3, 3), ConvProblem(1, 8, 8, 8, 8, 1, 1)):  # 4-byte and 16-byte copies
        for tile in TILES:
            for flush in launch.FLUSHES:
                spec = launch.TensorCoreGemmLaunch(tile, stages=4, warp="64x32", weights="split", flush=flush)
                for k in ptxas_report("implicit_gemm_tf32x3", arch, options=spec.options(p)):
                    assert k.spill_store_bytes == k.spill_load_bytes == 0, (spec, k)


def test_the_new_knobs_are_macros_shared_memory_and_workspace_and_left_out_at_none(monkeypatch):
    p = ConvProblem.same(1, 7, 9, 9, 5, 3)  # K = 63: planes of rows of 64
    first = launch.TensorCoreGemmLaunch("128x64", stages=3)
    assert first.to_params() == {"tile": "128x64", "splits": 1, "stages": 3}  # as recorded before the knobs
    spec = launch.TensorCoreGemmLaunch("128x64", stages=3, warp="64x32", weights="split", flush=2)
    assert spec.options(p)[-3:] == ("-DCONVKIT_WARP_M=64", "-DCONVKIT_PRESPLIT=1", "-DCONVKIT_FLUSH=2")
    assert launch.TensorCoreGemmLaunch.from_params(spec.to_params()) == spec
    assert spec.shared_bytes(p) == 3 * 4 * (2 * 128 * 20 + 16 * 72) and spec.weight_elements(p) == 2 * 5 * 64
    assert spec.workspace_bytes(p) >= 4 * 2 * 5 * 64 and first.weight_elements(p) == first.workspace_bytes(p) == 0
    assert launch.SplitWeightsLaunch().grid(p) == (2,)  # 5 x 64 elements, 256 a block
    tuned = launch.launch_candidates(p)  # each as first designed, then with CUTLASS's warps and weights split ahead
    half = len(tuned) // 2
    assert [dataclasses.replace(c, warp="64x32", weights="split") for c in tuned[:half]] == tuned[half:]
    monkeypatch.setattr(launch, "has_tf32_tensor_cores", lambda: True)
    spec.can_implement(p)
    for bad, match in ((dict(warp="16x128"), "warp must be one of"), (dict(weights="cached"), "weights must be one of"),
                       (dict(flush=3), "flush must be one of"),
                       (dict(weights="split", batch=2), "one GEMM")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            launch.TensorCoreGemmLaunch(**bad).can_implement(p)
    with pytest.raises(ValueError, match="launch reads its weights presplit"):  # before anything is allocated
        launch.conv2d_tf32x3(None, None, launch=launch.TensorCoreGemmLaunch(weights="presplit"))


def test_a_rows_precision_comes_from_its_kernel_or_is_fp32_fma():
    from convkit.families import precision_of

    assert precision_of("convkit", "igemm_tf32x3") == "tf32x3"
    assert precision_of("convkit", "fp32_igemm") == precision_of("cublas", "sgemm") == "ieee"
    assert precision_of("cudnn", "IMPLICIT_GEMM") == precision_of("pytorch", "cudnn.benchmark") == "ieee"
