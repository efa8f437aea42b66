"""The networks' convolution layers that no chapter measures (a ResNet's 7x7 stem, strided 1x1 layers, a ConvNeXt's
4x4 patchify stem): swept as the op's first-use tuner would measure them, but every launch candidate checked and
timed (``results/<gpu>/network_layers.csv``), so that the shipped table holds them and a patched network's first
forward tunes nothing (:func:`convkit.papers.shipping_sources` names this sweep).

``python -m convkit.papers.summary.network_layers [results folder]``: the layers of every network of
:data:`~convkit.papers.summary.inference.NETWORKS` at :data:`~convkit.papers.summary.inference.MODE_BATCHES` that
``convkit.patch`` runs and the shipped table lacks, measured (resumable).
"""

from __future__ import annotations

from pathlib import Path

from convkit.core.problem import ConvProblem
from convkit.papers.summary.inference import IMAGE, MODE_BATCHES, NETWORKS, network_model

EXPERIMENT = "network_layers"


def patched_layers(network: str, batch: int) -> list[ConvProblem]:
    """The convolution problems of ``network`` at ``batch`` that ``convkit.patch`` runs, in the order they run."""
    import torch

    from convkit.core.arguments import conv_geometry
    from convkit.op.patch import unsupported

    found: list[ConvProblem] = []

    def note(conv: torch.nn.Conv2d, inputs: tuple[torch.Tensor, ...]) -> None:
        n, c, h, w = inputs[0].shape
        m, _, r, s = conv.weight.shape
        stride, pad = conv_geometry(tuple(conv.weight.shape), conv.stride, conv.padding, conv.dilation, conv.groups)
        found.append(ConvProblem(n, c, h, w, m, r, s, pad=pad, stride=stride))

    model = network_model(network)
    hooks = [m.register_forward_pre_hook(note) for m in model.modules()
             if type(m) is torch.nn.Conv2d and unsupported(m) is None]  # fmt: skip
    with torch.no_grad():
        model(torch.randn(batch, 3, IMAGE, IMAGE, device="cuda"))
    for hook in hooks:
        hook.remove()
    return list(dict.fromkeys(found))


def unshipped_layers(gpu: str) -> list[ConvProblem]:
    """Every network's patched layers at every mode batch that ``gpu``'s shipped table holds no choice for."""
    from convkit.op.dispatch import shipped_choices

    held = {key.split("@")[0] for key in shipped_choices(gpu)}
    layers = [p for network in NETWORKS for batch in MODE_BATCHES for p in patched_layers(network, batch)]
    return [p for p in dict.fromkeys(layers) if p.key not in held]


def measure(directory: Path | None = None) -> Path:
    """Sweep :func:`unshipped_layers` with the first-use tuner's kernels at every launch candidate, cuDNN's every
    algorithm and PyTorch's autotuned convolution, resuming."""
    from convkit.families import FAMILIES
    from convkit.op.interop import gpu_name
    from convkit.study.sweep import run_experiment

    families = [f for f in FAMILIES if f.tuned_on_first_use]
    variants = [v for f in families for v in f.variants]
    peers = [v for f in families for v in f.peers]
    problems = unshipped_layers(gpu_name())
    print(f"{len(problems)} layers of the networks that no shipped choice holds")
    return run_experiment(EXPERIMENT, problems, variants, peers=peers, directory=directory, tune=True)


if __name__ == "__main__":
    import sys

    measure(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
