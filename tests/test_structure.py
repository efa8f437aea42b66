"""The package's architecture, read from its sources (CPU): one registry of papers, no hubs, no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from convkit.core.paths import book_dir, notebooks_dir

PACKAGE = Path(__file__).resolve().parent.parent / "convkit"
#: The only modules that may import the registry: the top of the stack.
TOP_OF_STACK = {
    "convkit.cli",
    "convkit.book.chapter",
    "convkit.book.reproduce",
    "convkit.book.profile",
    "convkit.book.plots",
    "convkit.op.dispatch",
    "convkit.op.conv",
    "convkit.papers.summary.precisions",
}
REGISTRY = "convkit.papers"
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The convkit module ``name`` refers to: itself, or the nearest package above it that exists."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str) -> set[str]:
    """Every convkit module ``module`` imports, at the top or inside a function."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {_resolve(a.name) for a in node.names if a.name.split(".")[0] == "convkit"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            if base.split(".")[0] != "convkit":
                continue
            for alias in node.names:  # `from convkit import chapter` imports the module convkit.book.chapter
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else _resolve(base))
    return found - {module}


GRAPH = {m: _imports(m) for m in MODULES}


def _paper_of(module: str) -> str | None:
    """``convkit.papers.<name>`` for a module of a paper's folder, else None."""
    parts = module.split(".")
    return ".".join(parts[:3]) if len(parts) >= 3 and parts[:2] == ["convkit", "papers"] else None


def test_only_paper_folders_import_paper_modules():
    offenders = {m: sorted(i for i in imports if _paper_of(i)) for m, imports in GRAPH.items() if m != REGISTRY}
    offenders = {m: i for m, i in offenders.items() if i and not _paper_of(m)}
    assert not offenders, offenders


def test_only_the_top_of_the_stack_imports_the_registry():
    importers = {m for m, imports in GRAPH.items() if REGISTRY in imports}
    assert importers <= TOP_OF_STACK, sorted(importers - TOP_OF_STACK)


def test_a_paper_imports_shared_modules_and_its_own_folder_only():
    for module, imports in GRAPH.items():
        own = _paper_of(module)
        if own is None:
            continue
        for target in imports:
            assert target not in TOP_OF_STACK | {REGISTRY}, (module, target)
            assert _paper_of(target) in (None, own), (module, target)


def test_no_import_cycle():
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == 1:
                cycle = [*path[path.index(target) :], target] if target in path else [module, target]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in GRAPH:
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_no_module_over_500_lines(module):
    assert len(MODULES[module].read_text().splitlines()) <= MAX_LINES


def test_no_two_public_classes_share_a_name():
    seen: dict[str, str] = {}
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                assert node.name not in seen, f"{node.name} in {seen.get(node.name)} and {module}"
                seen[node.name] = module


def test_the_registry_lists_every_chapter_the_book_shows():
    from convkit.book.reproduce import CLOSING_CHAPTERS
    from convkit.papers import PAPERS

    toc = yaml.safe_load((book_dir() / "_toc.yml").read_text())
    shown = [c["file"].removeprefix("notebooks/") for part in toc["parts"] for c in part["chapters"]
             if c["file"].startswith("notebooks/")]  # fmt: skip
    assert shown == [p.notebook for p in PAPERS] + [stem for _, stem in CLOSING_CHAPTERS]
    for p in PAPERS:
        assert (notebooks_dir() / f"{p.notebook}.ipynb").is_file(), p.notebook
        assert (PACKAGE / "papers" / p.name / "__init__.py").is_file(), p.name
    assert len({p.name for p in PAPERS}) == len(PAPERS)


def test_every_kernel_source_belongs_to_one_paper():
    from convkit.cuda.compile import all_sources
    from convkit.papers import PAPERS

    owners = [s for p in PAPERS for s in p.sources]
    assert len(owners) == len(set(owners))
    # the markers and stream hold every paper uses; convkit.conv2d's bias epilogue
    assert set(all_sources()) - set(owners) <= {"timing", "bias"}
