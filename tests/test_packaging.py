"""pyproject.toml and environment.yml agree; convkit imports without CuPy."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def normalise(requirement: str) -> str:
    return re.sub(r"\s+", "", requirement).lower()


def test_environment_yml_matches_pyproject():
    project = PYPROJECT["project"]
    extras = project["optional-dependencies"]
    wanted = {
        normalise(r) for r in project["dependencies"] + extras["book"] + extras["dev"] if not r.startswith("convkit")
    }
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    have = {normalise(d) for d in conda if not d.startswith(("python", "pip"))}
    have |= {normalise(d) for d in pip if not d.startswith("-e")}
    assert have == wanted
    python = next(d for d in conda if d.startswith("python"))
    assert python.removeprefix("python") == project["requires-python"]


def test_extras_scripts_and_pins():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {r.split(">")[0] for r in extras["cuda12"]} == {"cupy-cuda12x", "nvidia-cudnn-cu12"}
    assert {r.split(">")[0] for r in extras["cuda13"]} == {"cupy-cuda13x", "nvidia-cudnn-cu13"}
    assert any(r.startswith("jupyter-book") and "<2" in r for r in extras["book"])
    assert PYPROJECT["project"]["scripts"]["convkit"] == "convkit.cli:main"
    markers = {m.split(":")[0].split("(")[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}
    assert markers == {"gpu", "slow", "watchdog"}


def test_import_convkit_without_cupy():
    code = (
        "import sys; sys.modules['cupy'] = None\n"
        "import convkit, convkit.core.reference, convkit.study.results, convkit.book.plots, convkit.book.chapter\n"
        "import convkit.cuda.nvrtc, convkit.cuda.ptxas, convkit.cuda.launch, convkit.op.conv, convkit.families\n"
        "import convkit.bench.measure, convkit.libs.cudnn, convkit.papers, convkit.cli, convkit.book.profile\n"
        "assert not convkit.has_gpu()\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ok"


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text().splitlines()
    commands = [line for line in readme[:6] if line.startswith("make ")]
    assert [c.split()[1] for c in commands] == ["book", "test"]
