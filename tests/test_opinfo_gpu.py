"""``convkit.conv2d`` as a drop-in for ``torch.nn.functional.conv2d``, on PyTorch's own OpInfo samples for
``nn.functional.conv2d`` (float32, CUDA; batched and unbatched, ints and pairs, "valid" and "same", dilation,
groups): each sample matches PyTorch's convolution in float64 within the direct methods' bar, or raises
NotImplementedError naming the argument convkit has no kernel for. None is wrong, none raises anything else."""

from __future__ import annotations

import pytest

from convkit.core.precision import INPUT_PRECISIONS
from convkit.core.reference import DIRECT_TOLERANCE

pytestmark = pytest.mark.gpu

#: The arguments a NotImplementedError may name (convkit.core.arguments.NotCovered).
NAMED = ("groups", "dilation", "stride", "padding")


#: PyTorch's samples, made in a process of their own: importing PyTorch's test suite freezes torch.backends' flags
#: for the whole process, and later tests in this one set them. Each sample as (input, args, kwargs), on the CPU.
MAKE_SAMPLES = """
import sys, torch
from torch.testing._internal.common_methods_invocations import op_db
cpu = lambda a: a.cpu() if isinstance(a, torch.Tensor) else a
info = next(op for op in op_db if op.name == "nn.functional.conv2d")
torch.save([(s.input.cpu(), [cpu(a) for a in s.args], {k: cpu(v) for k, v in s.kwargs.items()})
            for s in info.sample_inputs("cpu", torch.float32, requires_grad=False)], sys.argv[1])
"""


def _samples(tmp_path) -> list:
    """PyTorch's OpInfo samples of ``nn.functional.conv2d`` in float32, on the GPU: (input, args, kwargs)."""
    import subprocess
    import sys

    import torch

    made = tmp_path / "samples.pt"
    subprocess.run([sys.executable, "-c", MAKE_SAMPLES, str(made)], check=True, timeout=120)
    cuda = lambda a: a.cuda() if isinstance(a, torch.Tensor) else a  # noqa: E731
    return [(x.cuda(), [cuda(a) for a in args], {k: cuda(v) for k, v in kwargs.items()})
            for x, args, kwargs in torch.load(made)]  # fmt: skip


@pytest.mark.parametrize("input_precision", INPUT_PRECISIONS)
def test_every_opinfo_sample_matches_f_conv2d_or_names_what_convkit_does_not_cover(
    input_precision, monkeypatch, tmp_path
):
    import torch
    import torch.nn.functional as F

    import convkit
    from convkit.op import conv as op

    monkeypatch.setenv("CONVKIT_TUNE", "0")  # a problem no table records runs the fallback: no tuning per sample
    op.choose.cache_clear()
    samples = _samples(tmp_path)
    assert len(samples) >= 20
    matched, named, wrong = 0, [], []
    for x, (w, *rest), kwargs in samples:
        bias = rest[0] if rest else kwargs.pop("bias", None)
        what = f"x{tuple(x.shape)} w{tuple(w.shape)} bias={bias is not None} {kwargs}"
        try:
            with torch.no_grad():
                y = convkit.conv2d(x, w, bias, **kwargs, input_precision=input_precision)
        except NotImplementedError as exc:
            argument = str(exc).split("=")[0]
            (named.append if argument in NAMED else wrong.append)(f"{what}: {exc}")
            continue
        except Exception as exc:
            wrong.append(f"{what}: {type(exc).__name__}: {exc}")
            continue
        double = None if bias is None else bias.double()
        ref = F.conv2d(x.double(), w.double(), double, **kwargs)
        if y.shape != ref.shape:
            wrong.append(f"{what}: shape {tuple(y.shape)}, PyTorch's {tuple(ref.shape)}")
            continue
        err = (torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref)).item()
        if not err < DIRECT_TOLERANCE:
            wrong.append(f"{what}: relative error {err:.2e}")
            continue
        matched += 1
    print(f"{input_precision}: {len(samples)} samples, {matched} matched, {len(named)} named what convkit does not "
          f"cover")  # fmt: skip
    assert not wrong, wrong
    assert matched and matched + len(named) == len(samples)
