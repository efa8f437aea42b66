"""Each notebook's Colab cell, run on the CPU with a stand-in ``google.colab`` module and a local clone as the
repository: what it would clone, install and where it would work; and the repository named in one place."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types

import nbformat
import pytest
import yaml

from convkit.study.checkout import book_dir, notebooks_dir, project_root

NOTEBOOKS = sorted(notebooks_dir().glob("*.ipynb"))
COLAB = "/content/convkit"


def _cell(nb: nbformat.NotebookNode, needle: str) -> str:
    return next(c.source for c in nb.cells if c.cell_type == "code" and needle in c.source)


def _parameters(nb: nbformat.NotebookNode) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", [])), namespace)
    return namespace


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_colab_cell_clones_installs_and_moves_to_the_notebooks(path, tmp_path, monkeypatch):
    clone_to = tmp_path / "content" / "convkit"
    calls: list[list[str]] = []
    real_run = subprocess.run

    def run(command, check=False, **kwargs):
        calls.append([str(c) for c in command])
        if command[0] == "git":  # the real git, on this repository, into the test's folder
            real = [str(clone_to) if c == COLAB else c for c in command]
            return real_run(real, check=check, capture_output=True, text=True)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(os.path, "isdir", lambda p, _isdir=os.path.isdir: False if p == COLAB else _isdir(p))
    moved: list[str] = []
    monkeypatch.setattr(os, "chdir", moved.append)
    nb = nbformat.read(path, as_version=4)
    repo = f"file://{project_root()}"
    head = real_run(["git", "-C", str(project_root()), "rev-parse", "HEAD"], capture_output=True, text=True)
    namespace = {"repo_url": repo, "repo_ref": head.stdout.strip(), "quick": None, "__name__": "colab_cell"}
    exec(_cell(nb, '"google.colab" in sys.modules'), namespace)
    assert calls[:3] == [["git", "init", "-q", COLAB],
                         ["git", "-C", COLAB, "fetch", "-q", "--depth=1", repo, head.stdout.strip()],
                         ["git", "-C", COLAB, "checkout", "-q", "FETCH_HEAD"]]  # fmt: skip
    assert calls[3] == [sys.executable, "-m", "pip", "install", "-q", f"{COLAB}[cuda12]"]
    assert namespace["quick"] is True, "quick left unset: the quick subset on Colab"
    assert moved == [f"{COLAB}/notebooks"]
    assert (clone_to / "notebooks" / path.name).is_file(), "the clone holds the notebook"
    extras = __import__("tomllib").loads((clone_to / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("cupy-cuda12x") for r in extras["cuda12"])


@pytest.mark.parametrize("path", NOTEBOOKS[:1], ids=lambda p: p.stem)
@pytest.mark.parametrize("colab", [True, False], ids=["colab", "elsewhere"])
def test_quick_is_the_readers_where_set(path, colab, monkeypatch):
    """The parameter a reader sets is the one that runs; left at None, the quick subset on Colab only."""
    nb = nbformat.read(path, as_version=4)
    if colab:  # a runtime with the clone in place: nothing is cloned or installed
        monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
        monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=""))
        monkeypatch.setattr(os.path, "isdir", lambda p, _isdir=os.path.isdir: True if p == COLAB else _isdir(p))
        monkeypatch.setattr(os, "chdir", lambda where: None)
    for given, expected in ((None, colab), (False, False), (True, True)):
        namespace = {"repo_url": "", "repo_ref": "main", "quick": given, "__name__": "colab_cell"}
        exec(_cell(nb, '"google.colab" in sys.modules'), namespace)
        assert namespace["quick"] is expected, (given, colab)


def test_the_repository_is_named_once():
    url = yaml.safe_load((book_dir() / "_config.yml").read_text())["repository"]["url"]
    branch = yaml.safe_load((book_dir() / "_config.yml").read_text())["repository"]["branch"]
    for path in NOTEBOOKS:
        parameters = _parameters(nbformat.read(path, as_version=4))
        assert (parameters["repo_url"], parameters["repo_ref"]) == (url, branch), path.name
    readme = (book_dir().parent / "README.md").read_text()
    named = set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", readme))
    assert named == {url}, "the README names the repository as book/_config.yml does"
