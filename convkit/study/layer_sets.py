"""Sets of convolution layers that more than one chapter measures, defined once.

- :func:`network_3x3_layers`: the 3x3 layers of VGG19 and ResNet-50 (stride 1, "same" padding) at
  batch 1 and 32: the multi-channel table of the memory-transactions chapter, measured again by the
  FP32-ceiling chapter.
- :func:`square_map_grid`: one image, square maps 7..512, C = M in 64, 256, 512, filters 1, 3, 5, "same"
  padding: the multi-channel grid of the Pascal-era chapter, measured again likewise.
- :func:`three_chapter_suites` and :func:`three_chapter_problems`: those two and cuConv's network layers, the
  compute-bound problems the FP32-ceiling chapter measures and the tensor-core chapter measures again.
"""

from __future__ import annotations

from convkit.core.problem import ConvProblem
from convkit.families.chang2022.model import FILTER_SIZES
from convkit.study import networks
from convkit.study.networks import distinct_configurations

#: The networks whose 3x3 layers :func:`network_3x3_layers` takes, and the batch sizes.
NETWORKS_3X3, BATCHES_3X3 = ("VGG19", "ResNet-50"), (1, 32)
#: A quick run of :func:`three_chapter_suites`: every QUICK_STEP-th of the networks' configurations, at batch 1
#: and 32, and of the other two sets.
QUICK_STEP, QUICK_BATCHES = 11, (1, 32)
#: :func:`square_map_grid`'s maps, channels (C = M) and filter sizes: 7 x 3 x 3 = 63 layers.
GRID_MAPS, GRID_CHANNELS, GRID_FILTERS = (7, 14, 28, 56, 112, 224, 512), (64, 256, 512), FILTER_SIZES


def network_3x3_layers() -> list[ConvProblem]:
    """The VGG19 and ResNet-50 3x3 layers (stride 1, "same"), batch 1 then 32."""
    configs = [c for net in NETWORKS_3X3 for c in distinct_configurations(net) if c.filter == 3]
    return [c.problem(batch) for batch in BATCHES_3X3 for c in configs]


def square_map_grid() -> list[ConvProblem]:
    """Batch 1, maps 7..512 square, C = M in 64, 256, 512, filters 1, 3, 5, "same" padding."""
    return [ConvProblem.same(1, c, h, h, c, k) for h in GRID_MAPS for c in GRID_CHANNELS for k in GRID_FILTERS]


def three_chapter_suites(quick: bool = False) -> dict[str, list[ConvProblem]]:
    """cuConv's network layers, :func:`network_3x3_layers` and :func:`square_map_grid`, by the chapter each comes
    from (``quick``: a subset of each)."""
    if quick:
        configs = networks.configurations()[::QUICK_STEP]
        return {
            "cuconv": [c.problem(b) for b in QUICK_BATCHES for c in configs],
            "lu2020": network_3x3_layers()[::QUICK_STEP],
            "chang2022": square_map_grid()[::QUICK_STEP],
        }
    return {"cuconv": networks.problems(), "lu2020": network_3x3_layers(), "chang2022": square_map_grid()}


def three_chapter_problems(quick: bool = False) -> list[ConvProblem]:
    """Every problem of :func:`three_chapter_suites`, once, in order (cuConv's by batch size first)."""
    return list(dict.fromkeys(p for group in three_chapter_suites(quick).values() for p in group))
