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


def _samples() -> list:
    import torch

    frozen = torch.backends.flags_frozen()
    from torch.testing._internal.common_methods_invocations import op_db

    # importing PyTorch's test suite freezes torch.backends' flags for the whole process: thaw them again, since
    # later tests in this process set them
    setattr(torch.backends, "__allow_nonbracketed_mutation_flag", not frozen)
    info = next(op for op in op_db if op.name == "nn.functional.conv2d")
    return list(info.sample_inputs("cuda", torch.float32, requires_grad=False))


@pytest.mark.parametrize("input_precision", INPUT_PRECISIONS)
def test_every_opinfo_sample_matches_f_conv2d_or_names_what_convkit_does_not_cover(input_precision, monkeypatch):
    import torch
    import torch.nn.functional as F

    import convkit
    from convkit.op import conv as op

    monkeypatch.setenv("CONVKIT_TUNE", "0")  # a problem no table records runs the fallback: no tuning per sample
    op.choose.cache_clear()
    samples = _samples()
    assert len(samples) >= 20
    matched, named, wrong = 0, [], []
    for sample in samples:
        x, (w, *rest), kwargs = sample.input, sample.args, dict(sample.kwargs)
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
