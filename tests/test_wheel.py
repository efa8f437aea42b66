"""The installed wheel, away from the source tree: convkit.conv2d's dispatch tables and the kernels ship inside
it, and the op runs from it (on a GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding convkit installed from a wheel built from this checkout (build backend: hatchling)."""
    work = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(ROOT)],
                   check=True, capture_output=True)  # fmt: skip
    wheel = next((work / "dist").glob("convkit-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(work / "site"), str(wheel)], check=True,
                   capture_output=True)  # fmt: skip
    return work / "site"


def _run(site: Path, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", code], cwd=site.parent, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_wheel_carries_the_tables_and_the_kernels(installed):
    code = (
        "import sys, convkit, convkit.core.paths as paths\n"
        "from convkit.core import shipped\n"
        "from convkit.core.problem import ConvProblem\n"
        "from convkit.op import dispatch\n"
        "from convkit.op.fused import fused_knobs\n"
        f"assert convkit.__file__.startswith({str(installed)!r}), convkit.__file__\n"
        "gpu = 'nvidia-h100-80gb-hbm3'\n"
        "assert shipped.shipped_path(gpu).is_file()\n"
        "choice = dispatch.lookup(ConvProblem.same(1, 832, 7, 7, 32, 1), gpu)\n"
        "assert choice is not None and choice.impl == 'convkit' and choice.params, choice\n"
        "knobs = shipped.knob_table(gpu)(ConvProblem.same(64, 512, 7, 7, 512, 3), 'fp32_igemm')\n"
        "assert knobs and 'tile' in knobs, knobs\n"
        "assert fused_knobs(ConvProblem(1, 256, 228, 228, 256, 5, 5), gpu), 'no fused choice'\n"
        "assert shipped.shipped(gpu)['figures']['dram_latency_cycles'] > 0\n"
        "assert not {'pandas', 'matplotlib'} & set(sys.modules), 'the op imported the study'\n"
        "kernels = paths.kernels_dir()\n"
        "assert kernels.name == '_kernels'\n"
        "assert (kernels / 'implicit_gemm.cu').is_file() and (kernels / 'bias.cu').is_file()\n"
        "print('ok')"
    )  # fmt: skip
    assert _run(installed, code) == "ok"


@pytest.mark.gpu
def test_conv2d_runs_from_the_installed_wheel(installed):
    code = (
        "import cupy, numpy as np, convkit\n"
        "from convkit.core import reference\n"
        f"assert convkit.__file__.startswith({str(installed)!r})\n"
        "rng = np.random.default_rng(0)\n"
        "for shape, wshape, pad in (((1, 832, 7, 7), (32, 832, 1, 1), 0), ((2, 5, 9, 11), (6, 5, 3, 3), 1)):\n"
        "    x, w = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(wshape).astype(np.float32)\n"
        "    y = convkit.conv2d(cupy.asarray(x), cupy.asarray(w), padding=pad)\n"
        "    assert reference.relative_error(y.get(), reference.conv2d(x, w, pad=pad)) < 1e-5\n"
        "print('ok')"
    )
    assert _run(installed, code) == "ok"
