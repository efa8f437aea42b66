"""The 3xTF32 chapter's kernels on Hopper's wgmma as its appendix describes them, where its run recorded them (the
numbers are :mod:`convkit.papers.tf32x3.results`' tables')."""

from __future__ import annotations

from typing import Any

from convkit.papers.tf32x3.results import HOPPER


def method(t: dict[str, Any]) -> list[str]:
    """The method of the kernels on Hopper's wgmma, as paragraphs, where this run recorded them (else none)."""
    sweep = t["sweep"]
    if not len(sweep) or not (sweep["variant"].isin(HOPPER) & (sweep["status"] == "ok")).any():
        return []
    return [
        "On Hopper the family adds two kernels on the GPU's own tensor-core instruction, wgmma: a warpgroup of 128 "
        "threads issues a 64 x N x 8 TF32 product with both operands in shared memory and goes on while it runs. "
        "The weights are split once per call into their big and small parts, tiled as a stage holds them. Three "
        "products per 8-deep step, and each 32-deep K-tile's sum started from zero and added in FP32, as the "
        "mma.sync kernel does per 16-deep slice.",
        "One producer warpgroup stages K-tiles into three shared-memory stages (the weights by one bulk copy each, "
        "counted on a barrier), and two consumer warpgroups multiply 64 filters each by 128 output positions, "
        "handing each stage back through a second barrier. The inputs reach a stage three ways, one per tuning "
        "candidate: gathered from NCHW and split by the producer; split ahead by a pass that writes them channels "
        "last with their small parts; or written channels last in FP32 and split in shared memory by the consumers "
        "once the stage is full. Each way, inputs are split as the weights are, big rounded to nearest TF32 and "
        "small the rest: the value itself as the big part, which the tensor core truncates, would save a rounding "
        "but double the small part, and with it the small-by-small term that 3xTF32 leaves out. A persistent block "
        "per SM walks the output tiles; a block of 64 filters, its consumers taking alternate K-tiles, serves "
        "layers of at most 64, and on any filter of more than one tap a block of 64 filters whose consumers take "
        "alternate output tiles (ping-pong, below) is a candidate too, the faster where its tiles take fewer waves "
        "of the SMs than those of 128 filters. One launch splits the inputs ahead and the weights with them, and "
        "the kernel starts as that launch ends, its producer waiting for the split before its first copy. Where the "
        "input's split would pass the 1 GiB of workspace every algorithm is allowed, the split and the kernel run "
        "a share of the batch at a time.",
        "On 1x1 layers and a network's first layer of three channels, whose few K-tiles a tile leave the output's "
        "store most of the time, the gathering kernel has two more settings: persistent, and at 64 filters a block "
        "its consumers taking alternate output tiles instead, one storing as the other multiplies (CUTLASS's "
        "ping-pong). On layers of any filter with few tiles and many K-tiles the reduction is split over several "
        "blocks a tile; where the GPU holds every tile's blocks at once, a tile's blocks form one thread-block "
        "cluster and add their partial sums through each other's shared memory, in the order a separate summing "
        "kernel would, so that no partial output is written and no second kernel runs; elsewhere each block "
        "writes its partial output and a second kernel adds them.",
        "Two more settings serve narrow and small layers. On a 1x1 layer of at most 32 filters, a block's 128 "
        "output positions are the products' rows and its 32 filters (16 where the layer has at most 16) their "
        "columns, so that a few filters do not leave most of each 64-row product idle; on a 1x1 layer whose output "
        "tiles would fill at most half the SMs, the same blocks of 32 or 16 filters spread its output over more "
        "SMs, whatever its filters, where each block's store of its tile would otherwise set the time; where such "
        "a layer has three K-tiles or more (a batch of one image), those blocks split the reduction over a cluster "
        "too, so that its weights are read by many blocks at once rather than by a few tiles of 128 filters, and "
        "where each block's share is four K-tiles or more, the producer's two halves gather alternate K-tiles, two "
        "of them in flight; and where a block's share is at most the four K-tiles its stages hold, its consumers "
        "split the weights themselves, read as given, while the producer stages the inputs, so that a call is one "
        "launch rather than the weights' split and then the kernel. On a layer "
        "of at most 16 channels, the split-ahead pass writes the input's rows 16 channels wide and a K-tile takes "
        "two taps of them, where a K-tile of 32 channels at one tap would be half zeros. And on a layer of more "
        "than one tap whose tiles of 64 filters by 128 output positions are fewer than the SMs, the split-ahead "
        "kernel's ping-pong at 64 output positions a block is a candidate too: twice the tiles, each a 64 x 64 x 8 "
        "product a step, the shape of CUTLASS's fastest tile on such layers.",
        "Winograd on wgmma: FP32 Winograd's transforms write the transformed filters and inputs in the split-ahead "
        "kernel's layouts, its batched products (36 GEMMs at F(4x4, 3x3)) run on that kernel, and the output "
        "transform adds the bias. Both kernels' launches were tuned per problem as the mma.sync kernel's were; "
        "they need compute capability 9.0, and the op runs them only there.",
        "No other FP32-accurate convolution on wgmma was found in public sources. CUTLASS's public repository (as "
        "of August 2026) has 3xTF32 kernels for the A100's mma.sync alone (its examples 27 to 29 and 33, the "
        "convolution among them) and FP32 emulation on nine BF16 products for Blackwell (SM100); none for "
        "Hopper's wgmma. NVIDIA's other FP32 emulation (cuBLAS's on BF16, cuTENSOR's on FP16) targets Blackwell "
        "too, and a search of cuDNN's release notes found none.",
    ]
