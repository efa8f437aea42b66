"""The summary's ten networks in CUDA-graph mode, PyTorch beside convkit, printed (nothing recorded): what the op's
first-use tuner picks on a GPU without a shipped table (an H200's, with the wgmma kernels among its candidates), ahead
of a recording run. Per label: the first forward's seconds (tuning every layer), both networks' eager and graph-replay
GPU times (the study's timing), the convolutions convkit runs and their share of the GPU time, and the features'
error against float64.

    python3 scripts/networks_graph_probe.py [--batch=16] [LABEL ...]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from convkit.cuda.timing import CudaEventClock, benchmark
from convkit.op.interop import cupy_stream
from convkit.op.patch import patch
from convkit.papers.summary import inference
from convkit.papers.summary.modes import captured, relative_error


def gpu_ms(forward: object) -> float:
    """The median GPU time of ``forward`` (milliseconds), as the study times a network."""
    with cupy_stream():
        return benchmark(forward, clock=CudaEventClock(), **inference.TIMING).median_ms


def probe(network: str, batch: int) -> float:
    """Print ``network`` at ``batch``'s line; returns PyTorch's graph GPU time over convkit's."""
    with torch.no_grad():
        model = inference.network_model(network)
        x = torch.randn(batch, 3, inference.IMAGE, inference.IMAGE, device="cuda")
        reference = inference._features(copy.deepcopy(model).double(), network, x.double())
        patched = copy.deepcopy(model)
        patch(patched)
        torch.cuda.synchronize()
        start = time.perf_counter()
        patched(x)
        torch.cuda.synchronize()
        tuning_s = time.perf_counter() - start
        error = relative_error(inference._features(patched, network, x), reference)
        layers, in_convkit, share = inference.convolution_share(patched, x)
        eager = {impl: gpu_ms(lambda net=net: net(x)) for impl, net in (("pytorch", model), ("convkit", patched))}
        graph = {impl: gpu_ms(captured(net, x)[0].replay) for impl, net in (("pytorch", model), ("convkit", patched))}
        speedup = graph["pytorch"] / graph["convkit"]
        print(f"{network}-{batch}: first forward {tuning_s:.1f} s; convkit on {in_convkit} of {layers} convolutions "
              f"({share:.0%} of their time); eager {eager['pytorch']:.3f} / {eager['convkit']:.3f} ms "
              f"({eager['pytorch'] / eager['convkit']:.2f}x); graph {graph['pytorch']:.3f} / {graph['convkit']:.3f} ms "
              f"({speedup:.2f}x); error {error:.1e}", flush=True)  # fmt: skip
        del model, patched
        torch.cuda.empty_cache()
        return speedup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("networks", nargs="*", default=list(inference.NETWORKS))
    args = parser.parse_args()
    inference.pytorch_as_measured()
    speedups = [probe(network, args.batch) for network in args.networks]
    geomean = statistics.geometric_mean(speedups)
    print(f"graph mode at batch {args.batch}: geometric mean {geomean:.3f}x PyTorch's over {len(speedups)} networks")


if __name__ == "__main__":
    main()
