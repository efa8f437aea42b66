"""Where a network's first forward goes, layer by layer, patched and not (a probe: prints, records nothing).

``networks_cold.csv`` records a fresh process's first forward whole; this splits it. In a fresh process per run
(the setup of :mod:`convkit.papers.summary.first_forward`: PyTorch imported and its GPU initialised, the network
built on the GPU, convkit imported and the network patched, the kernels built ahead by ``convkit prebuild``), each
module's first call is timed with the GPU synchronised before and after (forward hooks), so the one-time costs
(CuPy's import and context, the table read, loading built kernels, cuDNN's and cuBLAS's setup) show in the layer
that pays them. Run from the repository root on a GPU machine, after ``convkit prebuild``:
    PYTHONPATH=$PWD python3 scripts/first_call_probe.py [LABEL ...]    # default AlexNet-1 ResNet-50-16
"""

from __future__ import annotations

import subprocess
import sys
import time

TOP = 12  # the slowest modules printed per run


def one_run(label: str, patched: bool) -> None:
    """The first forward of ``label`` in this process, each module's first call timed; the slowest printed."""
    import os
    import tempfile

    import torch

    from convkit.op.patch import patch
    from convkit.papers.summary.inference import network_model, pytorch_as_measured

    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()  # convkit's user cache empty, as the recorded runs have it
    pytorch_as_measured()
    network, batch = label.rsplit("-", 1)
    model = network_model(network)
    x = torch.randn(int(batch), 3, 224, 224, device="cuda")
    start = time.perf_counter()
    if patched:
        patch(model)
        print(f"  patch {time.perf_counter() - start:.3f} s")
    spent: dict[str, float] = {}
    began: dict[str, float] = {}

    def before(name: str):
        def hook(module, args):
            torch.cuda.synchronize()
            began[name] = time.perf_counter()

        return hook

    def after(name: str):
        def hook(module, args, output):
            torch.cuda.synchronize()
            spent.setdefault(name, time.perf_counter() - began[name])

        return hook

    for name, module in model.named_modules():
        patched_layer = hasattr(module, "original")  # a convkit layer, whose child is the nn.Conv2d it replaced
        if name and (patched_layer or not list(module.children())) and not name.endswith(".original"):
            module.register_forward_pre_hook(before(name))
            module.register_forward_hook(after(name))
    first = time.perf_counter()
    with torch.no_grad():
        model(x)
    torch.cuda.synchronize()
    whole = time.perf_counter() - first
    print(f"  first forward {whole:.3f} s; its leaves {sum(spent.values()):.3f} s over {len(spent)} modules")
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1])[:TOP]:
        print(f"    {seconds * 1e3:8.1f} ms  {name} ({type(dict(model.named_modules())[name]).__name__})")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["--one"]:  # a run of its own, in this fresh process
        one_run(arguments[1], arguments[2] == "patched")
    else:
        for label in arguments or ["AlexNet-1", "ResNet-50-16"]:
            for how in ("unpatched", "patched"):
                print(f"=== {label}, {how} (a fresh process)", flush=True)
                subprocess.run([sys.executable, __file__, "--one", label, how], check=False)
