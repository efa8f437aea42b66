"""The convkit command on a machine without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from convkit import cli
from convkit.core.gpu import GPUUnavailableError, has_gpu
from convkit.cuda.ptxas import find_nvcc

no_gpu = pytest.mark.skipif(has_gpu(), reason="checks the behaviour without a GPU")


@no_gpu
def test_info_says_there_is_no_gpu(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "GPU: none" in out and "cuDNN:" in out and "nvcc" in out


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on the PATH")
def test_kernels_lists_every_kernel(capsys):
    assert cli.main(["kernels", "--arch", "sm_90"]) == 0
    out = capsys.readouterr().out
    for name in ("conv2d_direct", "fma_peak", "pointer_chase", "hold_stream", "cuda_arch"):
        assert name in out


@no_gpu
def test_bench_without_a_gpu_says_why():
    with pytest.raises(GPUUnavailableError, match="needs a CUDA GPU"):
        cli.main(["bench", "7-1-1-32-832"])


def test_reproduce_names_an_unknown_notebook(capsys):
    assert cli.main(["reproduce", "--only", "nope"]) == 1
    assert "matches no notebook" in capsys.readouterr().err


def test_bad_arguments_are_refused():
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--device", "tpu"])
    with pytest.raises(SystemExit):
        cli.main([])


def test_a_run_says_whether_it_measures_or_shows_recorded_results(monkeypatch):
    from convkit.book import reproduce
    from convkit.core import gpu

    monkeypatch.setattr(gpu, "gpu_status", lambda: (False, "no driver"))
    line = reproduce.mode_line("auto")
    assert line == ("showing the results recorded on the NVIDIA H100 80GB HBM3 (results/nvidia-h100-80gb-hbm3/; "
                    "no GPU here: no driver)")  # fmt: skip
    monkeypatch.setattr(gpu, "gpu_status", lambda: (True, ""))
    monkeypatch.setattr(gpu, "device_name", lambda: "NVIDIA H100 80GB HBM3")
    assert reproduce.mode_line("auto").startswith("measuring on this GPU, NVIDIA H100 80GB HBM3 (results in "
                                                  "results/nvidia-h100-80gb-hbm3/")  # fmt: skip
    assert reproduce.mode_line("recorded").endswith("; as asked)")
    assert reproduce.recorded_gpu_name("nowhere") == "nowhere"


def test_reproduce_on_a_node_measures_first_then_runs_the_notebooks_on_what_the_node_recorded(monkeypatch, tmp_path):
    """``convkit reproduce --gpus 4``: every chapter measured on the node (run_on_node), then the notebooks, shown
    from the node's results folder; with ``--directory`` (a scratch folder) only the measuring runs."""
    from convkit.book import node, reproduce

    measured, shown = [], []
    folder = tmp_path / "nvidia-h200"
    monkeypatch.setattr(node, "run_on_node", lambda **kw: measured.append(kw) or Path(kw["directory"] or folder))
    monkeypatch.setattr(reproduce, "reproduce", lambda **kw: shown.append(kw))
    assert cli.main(["reproduce", "--gpus", "4", "--quick"]) == 0
    assert measured[0]["gpus"] == 4 and measured[0]["quick"] and measured[0]["directory"] is None
    assert shown == [{"only": None, "device": "recorded", "quick": True, "recorded_gpu": "nvidia-h200",
                      "record_times": False}]  # fmt: skip
    assert cli.main(["reproduce", "--gpus", "4", "--directory", str(tmp_path / "scratch")]) == 0
    assert len(measured) == 2 and len(shown) == 1


def test_sweep_builds_every_kernel_first_where_asked(monkeypatch, tmp_path, capsys):
    """``--build-workers N``: the chapter's kernels built in N processes, then its sweep (here or on a node's GPUs);
    without it, or for a cluster elsewhere, the sweep alone (building each kernel as it meets it)."""
    from types import SimpleNamespace

    import convkit.core.gpu

    calls = []
    measure = lambda directory, **kw: calls.append(("measure", kw["quick"]))  # noqa: E731
    build_first = lambda quick, workers: calls.append(("build", quick, workers)) or 155  # noqa: E731
    chapter = SimpleNamespace(experiment="tf32x3", measure=measure, build_first=build_first)
    monkeypatch.setattr(convkit.core.gpu, "require_cupy", lambda: None)
    monkeypatch.setattr(cli, "paper", lambda name: chapter)
    assert cli.main(["sweep", "tf32x3", "--quick", "--build-workers", "16", "--directory", str(tmp_path)]) == 0
    assert calls == [("build", True, 16), ("measure", True)] and "155 kernel builds ready" in capsys.readouterr().out
    calls.clear()
    assert cli.main(["sweep", "tf32x3", "--directory", str(tmp_path)]) == 0
    assert calls == [("measure", False)]
    calls.clear()  # on a node: built here first, in the caches its GPUs share; not for a cluster elsewhere
    monkeypatch.setattr(cli, "_on_node", lambda args, only: calls.append(("node", args.gpus)) or True)
    assert cli.main(["sweep", "tf32x3", "--gpus", "4", "--build-workers", "16"]) == 0
    assert cli.main(["sweep", "tf32x3", "--scheduler", "tcp://host:8786", "--build-workers", "16"]) == 0
    assert calls == [("build", False, 16), ("node", 4), ("node", 1)]
