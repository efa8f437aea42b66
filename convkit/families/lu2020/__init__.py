"""Lu, Zhang, Wang 2020's kernels (``kernels/lu2020.cu``): column and row reuse through warp shuffles.

The paper's single-channel ladder (``lu_direct`` .. ``lu_combined``, C = 1), the kernel past it
(``lu_wide``: four columns a lane) and the paper's multi-channel form (``lu_multi``), each with the launches
a tuning run chooses among (:mod:`.launch`); and the image-processing libraries measured beside them on
single images: cupyx.scipy.ndimage, NVIDIA NPP and CV-CUDA.
"""

from __future__ import annotations

import functools
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.cuda.operands import ConvArgs
from convkit.families.lu2020.launch import (
    MULTI_CANDIDATES,
    NDIMAGE_PEER,
    SINGLE_VARIANTS,
    WIDE,
    WIDE_CANDIDATES,
    LuMultiLaunch,
    LuSingleLaunch,
    LuWideLaunch,
    conv2d_multi,
    conv2d_single,
    conv2d_wide,
    correlate_peer,
    default_single,
    is_single_image,
    single_candidates,
)
from convkit.families.registry import Family, Variant, called_when_run
from convkit.libs import cvcuda, npp


def _lu(variant: str) -> Variant:
    """A Lu 2020 kernel: ``lu_<single-channel variant>`` (C = 1), ``lu_wide`` (past the paper, C = 1) or
    ``lu_multi``, with its untuned launch as the default and every launch it offers as candidates."""
    name = f"lu_{variant}"
    multi, wide = variant == "multi", variant == WIDE
    if multi:
        default, launches, conv, launch_of = LuMultiLaunch(), MULTI_CANDIDATES, conv2d_multi, LuMultiLaunch.from_params
    elif wide:
        default, launches, conv, launch_of = LuWideLaunch(), WIDE_CANDIDATES, conv2d_wide, LuWideLaunch.from_params
    else:
        default, launches, conv = default_single(variant), single_candidates(variant), conv2d_single
        launch_of = functools.partial(LuSingleLaunch.from_params, variant=variant)

    def run(a: ConvArgs, p: ConvProblem, launch: Any) -> None:
        conv(a.x, a.w, pad=p.pad, launch=launch, out=a.out)

    return Variant(name, run, default=lambda p: default, candidates=lambda p: list(launches), launch_from=launch_of)


def _correlate(a: ConvArgs, p: ConvProblem, launch: None = None) -> None:
    correlate_peer(a.x, a.w, a.out)


#: The paper's single-channel ladder, the kernel past it, and the paper's multi-channel form.
LADDER: tuple[Variant, ...] = tuple(_lu(v) for v in SINGLE_VARIANTS)
SINGLE: tuple[Variant, ...] = (*LADDER, _lu(WIDE))
MULTI: tuple[Variant, ...] = (_lu("multi"),)


def _npp(a: ConvArgs, p: ConvProblem, launch: None = None) -> None:
    npp.correlate(a.x, a.w, a.out)


def _cvcuda(a: ConvArgs, p: ConvProblem, launch: None = None) -> None:
    cvcuda.correlate(a.x, a.w, a.out)


#: The image-processing peers, on single images: cupyx.scipy.ndimage, NVIDIA NPP (where its library loads) and
#: CV-CUDA (where it is installed).
NDIMAGE = Variant(NDIMAGE_PEER, _correlate, applies_to=is_single_image, impl="cupyx")
NPP = Variant("nppi_filter", _npp, applies_to=lambda p: is_single_image(p) and npp.available(), impl=npp.IMPL)
CVCUDA = Variant("cvcuda_conv2d", _cvcuda, applies_to=lambda p: is_single_image(p) and cvcuda.available(),
                 impl=cvcuda.IMPL)  # fmt: skip
IMAGE_PEERS = (NDIMAGE, NPP, CVCUDA)

#: Each variant's method in words: the book's one name for it.
WORDS = {
    "lu_direct": "direct, warp-shuffled",
    "lu_column_naive": "column reuse",
    "lu_column": "column reuse, packed",
    "lu_row": "row reuse",
    "lu_combined": "column and row reuse",
    "lu_wide": "column reuse, 4 columns a lane",
    "lu_multi": "multi-channel, shuffles",
}

#: Small problems the generic GPU test checks every variant on: widths below a warp and no warp divides, an image
#: smaller than the filter, several images and filters, "valid" and partial padding (C = 1); channels no stage
#: divides and filters no thread's group divides (C > 1); K 3, 5, 7.
SAMPLE_PROBLEMS = (
    ConvProblem.same(1, 1, 37, 45, 1, 5), ConvProblem.same(2, 1, 70, 97, 3, 3), ConvProblem.same(1, 1, 5, 3, 1, 7),
    ConvProblem.same(3, 1, 2, 2, 1, 3), ConvProblem(1, 1, 131, 33, 1, 5, 5, pad=0),
    ConvProblem(1, 1, 9, 200, 2, 7, 7, pad=1), ConvProblem.same(1, 13, 9, 11, 20, 3),
    ConvProblem.same(2, 3, 40, 33, 8, 5), ConvProblem.same(1, 17, 28, 28, 37, 7), ConvProblem.same(1, 1, 5, 70, 4, 3),
)  # fmt: skip


FAMILY = Family(
    "lu2020",
    (*SINGLE, *MULTI),
    IMAGE_PEERS,
    sources=("lu2020",),
    words=WORDS,
    sample_problems=SAMPLE_PROBLEMS,
    edge_check=called_when_run(f"{__name__}.edges", "edge_check"),
)
