"""Where a network's first forward goes, layer by layer, patched and not (a probe: prints, records nothing).

``networks_cold.csv`` records a fresh process's first forward whole; this splits it. In a fresh process per run
(the setup of :mod:`convkit.papers.summary.first_forward`: PyTorch imported and its GPU initialised, the network
built on the GPU, convkit imported and the network patched, the kernels built ahead by ``convkit prebuild``), each
module's first call is timed with the GPU synchronised before and after (forward hooks), so the one-time costs
(CuPy's import and context, the table read, loading built kernels, cuDNN's and cuBLAS's setup) show in the layer
that pays them. Of each layer's time it says how much went to kernel builds read back or compiled (NVRTC) and to
modules loaded, and for each slow convolution what the op chose for it. Run from the repository root on a GPU
machine, after ``convkit prebuild``:
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
    loading = watch_kernel_loading()
    network, batch = label.rsplit("-", 1)
    model = network_model(network)
    x = torch.randn(int(batch), 3, 224, 224, device="cuda")
    start = time.perf_counter()
    if patched:
        patch(model)
        print(f"  patch {time.perf_counter() - start:.3f} s")
    spent: dict[str, float] = {}
    began: dict[str, float] = {}

    loaded: dict[str, str] = {}
    problems: dict[str, object] = {}

    def before(name: str):
        def hook(module, args):
            torch.cuda.synchronize()
            loading.clear()
            began[name] = time.perf_counter()

        return hook

    def after(name: str):
        def hook(module, args, output):
            torch.cuda.synchronize()
            if name not in spent:
                spent[name] = time.perf_counter() - began[name]
                loaded[name] = loading.text()
                if hasattr(module, "original"):
                    problems[name] = conv_problem(module.original, args[0])

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
        print(f"    {seconds * 1e3:8.1f} ms  {name} ({type(dict(model.named_modules())[name]).__name__}){loaded[name]}")
        if name in problems:
            print(f"                 {choice_text(problems[name])}")


class KernelLoading:
    """The kernel builds (each read back from the cache or compiled by NVRTC) and module loads since :meth:`clear`,
    with their seconds: convkit.cuda.nvrtc's two steps, wrapped."""

    def __init__(self) -> None:
        self.builds: list[tuple[bool, float]] = []  # (compiled, seconds)
        self.loads: list[float] = []

    def clear(self) -> None:
        self.builds.clear()
        self.loads.clear()

    def text(self) -> str:
        if not self.builds and not self.loads:
            return ""
        compiled, seconds = sum(1 for c, _ in self.builds if c), sum(t for _, t in self.builds)
        return (f"; of it {len(self.builds)} builds ({compiled} compiled) {1e3 * seconds:.1f} ms, "
                f"{len(self.loads)} module loads {1e3 * sum(self.loads):.1f} ms")  # fmt: skip


def watch_kernel_loading() -> KernelLoading:
    """Wrap convkit.cuda.nvrtc's build and module load so that each is counted and timed (:class:`KernelLoading`)."""
    from cupy_backends.cuda.libs import nvrtc as bindings

    from convkit.cuda import nvrtc

    seen = KernelLoading()
    build, load, compile_program = nvrtc._cached_build, nvrtc._Module.__init__, bindings.compileProgram
    compiles = [0]

    def counted_compile(*args):
        compiles[0] += 1
        return compile_program(*args)

    def timed_build(code, options, arch):
        before, start = compiles[0], time.perf_counter()
        built = build(code, options, arch)
        seen.builds.append((compiles[0] > before, time.perf_counter() - start))
        return built

    def timed_load(module, binary):
        start = time.perf_counter()
        load(module, binary)
        seen.loads.append(time.perf_counter() - start)

    nvrtc._cached_build, nvrtc._Module.__init__, bindings.compileProgram = timed_build, timed_load, counted_compile
    return seen


def conv_problem(conv, x):
    """The problem a patched nn.Conv2d ran on input ``x``."""
    from convkit.core.problem import ConvProblem

    n, c, h, w = x.shape
    return ConvProblem(n, c, h, w, conv.out_channels, *conv.kernel_size, pad=conv.padding[0], stride=conv.stride[0])


def choice_text(problem) -> str:
    """What the op runs ``problem`` with on this GPU (the user's cache, then the shipped table), in a line."""
    from convkit.core.gpu import device_name, gpu_slug
    from convkit.op.dispatch import lookup

    found = lookup(problem, gpu_slug(device_name()))
    if found is None:
        return f"{problem.key}: no choice (tuned at this call)"
    return f"{problem.key}: {found.impl} {found.variant} {found.params} ({found.source}, {found.time_us:.1f} us)"


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["--one"]:  # a run of its own, in this fresh process
        one_run(arguments[1], arguments[2] == "patched")
    else:
        for label in arguments or ["AlexNet-1", "ResNet-50-16"]:
            for how in ("unpatched", "patched"):
                print(f"=== {label}, {how} (a fresh process)", flush=True)
                subprocess.run([sys.executable, __file__, "--one", label, how], check=False)
