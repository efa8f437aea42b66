"""The package's architecture, read from its sources (CPU): the library apart from the study, one registry of
chapters, no hubs, no cycles, small modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from convkit.study.checkout import book_dir, notebooks_dir

PACKAGE = Path(__file__).resolve().parent.parent / "convkit"
#: The library's layers: what ``convkit.conv2d`` is made of. The study (``study``, ``papers``, ``book``, the
#: command line) imports them, never the other way.
LIBRARY = ("convkit.core", "convkit.cuda", "convkit.libs", "convkit.op", "convkit.families")
#: The benchmark's row format and measuring rule sit on the library; the study stands on both.
STUDY = ("convkit.bench", "convkit.study", "convkit.papers", "convkit.book", "convkit.cli", "convkit.__main__")
#: The only modules that may import the chapters' registry: the top of the stack.
TOP_OF_STACK = {
    "convkit.cli",
    "convkit.book.chapter",
    "convkit.book.reproduce",
    "convkit.book.reproduction",
    "convkit.book.verify",
    "convkit.book.node",
    "convkit.papers.summary.chapter",
    "convkit.book.profile",
    "convkit.book.plots",
    "convkit.study.shipping",
    "convkit.papers.summary.precisions",
}
REGISTRY = "convkit.papers"
MAX_LINES = 400
MAX_TOP_MODULES = 10
#: Where the op must not look: the study's results folders.
RESULTS_LOOKUPS = {"results_dir", "gpu_results_dir", "load_results", "results_directory"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
TREES: dict[str, ast.Module] = {m: ast.parse(p.read_text()) for m, p in MODULES.items()}


def _resolve(name: str) -> str:
    """The convkit module ``name`` refers to: itself, or the nearest package above it that exists."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _parents(module: str) -> set[str]:
    """The packages Python runs before ``module``: every ``__init__`` above it."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _imports(module: str) -> tuple[set[str], set[str]]:
    """(every convkit module ``module`` imports, at the top or inside a function, with their parent packages;
    every other top-level package it imports)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found, external = set(), set()
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "convkit":
                    found.add(_resolve(alias.name))
                else:
                    external.add(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            if base.split(".")[0] != "convkit":
                external.add(base.split(".")[0])
                continue
            for alias in node.names:  # `from convkit.study import tables` imports the module convkit.study.tables
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else _resolve(base))
    found |= {p for m in found for p in _parents(m)}
    return found - {module}, external


GRAPH = {m: _imports(m)[0] for m in MODULES}
EXTERNAL = {m: _imports(m)[1] for m in MODULES}


def _closure(start: str) -> set[str]:
    seen, todo = set(), [start, *_parents(start)]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += GRAPH[module]
    return seen


def _under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _docstrings(tree: ast.Module) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}  # fmt: skip


def _results_lookups(module: str) -> list[str]:
    """What in ``module`` names the study's results folders: a results-folder function, or a ``results`` path."""
    tree, found = TREES[module], []
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name in RESULTS_LOOKUPS:
            found.append(name)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if node.value.strip("/") == "results" or "results/" in node.value:
                found.append(repr(node.value))
    return found


OP_CLOSURE = _closure("convkit.op") | _closure("convkit")


def test_the_op_imports_no_chapter_no_study_module_and_no_pandas_or_matplotlib():
    study = sorted(m for m in OP_CLOSURE if _under(m, STUDY))
    assert not study, study
    heavy = {m: sorted(EXTERNAL[m] & {"pandas", "matplotlib"}) for m in OP_CLOSURE}
    assert not {m: h for m, h in heavy.items() if h}


def test_the_op_looks_up_nothing_under_results():
    found = {m: _results_lookups(m) for m in sorted(OP_CLOSURE)}
    assert not {m: f for m, f in found.items() if f}


def test_the_library_imports_nothing_of_the_study():
    for module in MODULES:
        if _under(module, LIBRARY):
            assert not [t for t in GRAPH[module] if _under(t, STUDY)], module


def test_a_family_imports_no_chapter():
    for family in (m for m in MODULES if m.startswith("convkit.families.")):
        assert not [m for m in _closure(family) if _under(m, STUDY)], family


def test_the_structure_test_sees_a_results_lookup_and_a_study_import():
    """The checks above would catch the op reading ``results/`` or importing a chapter (as it once did)."""
    tree = ast.parse('from convkit.study.results import results_dir\nresults_dir() / "x"\nopen("results/a")')
    TREES["convkit.fake"] = tree
    try:
        assert sorted(_results_lookups("convkit.fake")) == ["'results/a'", "results_dir"]
    finally:
        del TREES["convkit.fake"]


def test_only_the_top_of_the_stack_imports_the_registry():
    importers = {m for m, imports in GRAPH.items() if REGISTRY in imports and not m.startswith(REGISTRY + ".")}
    assert importers <= TOP_OF_STACK, sorted(importers - TOP_OF_STACK)


def test_a_chapter_imports_shared_modules_and_its_own_folder_only():
    def chapter_of(module: str) -> str | None:
        parts = module.split(".")
        return ".".join(parts[:3]) if len(parts) >= 3 and parts[:2] == ["convkit", "papers"] else None

    for module, imports in GRAPH.items():
        own = chapter_of(module)
        if own in (None, "convkit.papers.paper", "convkit.papers.summary"):  # the summary joins the chapters
            continue
        for target in imports - _parents(module):
            assert target not in (TOP_OF_STACK - {"convkit.papers.summary.precisions"}) | {REGISTRY}, (module, target)
            assert chapter_of(target) in (None, own, "convkit.papers.paper"), (module, target)


def test_no_import_cycle():
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    graph = {m: {t for t in targets if t not in _parents(m)} for m, targets in GRAPH.items()}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycle = [*path[path.index(target) :], target] if target in path else [module, target]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_no_module_over_400_lines(module):
    assert len(MODULES[module].read_text().splitlines()) <= MAX_LINES


def test_at_most_ten_modules_directly_in_the_package():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_two_public_classes_share_a_name():
    seen: dict[str, str] = {}
    for module, tree in TREES.items():
        for node in tree.body:
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


def test_every_kernel_the_op_runs_is_a_chapter_s_and_every_kernel_source_has_one_owner():
    from convkit.cuda.ptxas import all_sources
    from convkit.families import FAMILIES
    from convkit.papers import PAPERS

    measured = {v.name for p in PAPERS for v in (*p.variants, *p.peers)}
    assert {v.name for f in FAMILIES for v in (*f.variants, *f.peers)} <= measured
    owners = [s for p in PAPERS for s in p.sources]
    assert len(owners) == len(set(owners))
    # the markers and stream hold every paper uses; convkit.conv2d's bias epilogue
    assert set(all_sources()) - set(owners) <= {"timing", "bias"}
    names = [v.name for f in FAMILIES for v in (*f.variants, *f.peers)]
    assert len(names) == len(set(names))


def test_every_family_with_kernels_has_sample_problems_where_each_variant_runs():
    from convkit.families import FAMILIES

    for family in FAMILIES:
        if family.variants:
            assert family.sample_problems, family.name
            assert all(any(v.applies_to(p) for p in family.sample_problems) for v in family.variants), family.name


def _module_attributes_read(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, attribute) of each ``name.attribute`` in ``path`` where ``name`` is a convkit module imported
    by a ``from convkit... import name`` and never bound again in the file."""
    import importlib

    tree = ast.parse(path.read_text())
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("convkit"):
            for alias in node.names:
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    continue  # a function or class, not a module
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    rebound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    rebound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in (*n.args, *n.kwonlyargs)}
    return [(n.lineno, modules[n.value.id], n.attr) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules
            and n.value.id not in rebound]  # fmt: skip


def test_every_module_attribute_the_tests_and_scripts_read_exists():
    """A GPU test's body runs only on a GPU: a function it calls that moved would fail there first. Read here."""
    import importlib

    root = PACKAGE.parent
    files = [*(root / "tests").glob("*.py"), *(root / "scripts").glob("*.py"), *PACKAGE.rglob("*.py")]
    missing = [f"{path.relative_to(root)}:{line} {module}.{attribute}" for path in files
               for line, module, attribute in _module_attributes_read(path)
               if not hasattr(importlib.import_module(module), attribute)]  # fmt: skip
    assert not missing, missing
