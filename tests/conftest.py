"""Shared fixtures: the GPU skip, a results directory, and fresh random data."""

from __future__ import annotations

import numpy as np
import pytest

from convkit.core.gpu import gpu_status


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every ``gpu``-marked test, with the reason, where no GPU is usable."""
    ok, why = gpu_status()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"no GPU: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A ``watchdog``-marked test runs in a process of its own, killed after its limit (tests/watchdog.py)."""
    import os

    from hang_watchdog import CHILD, run_watched, seconds_of

    marker = pyfuncitem.get_closest_marker("watchdog")
    if marker is None or os.environ.get(CHILD):
        return None
    run_watched(pyfuncitem.nodeid, seconds_of(marker), pyfuncitem.config.rootpath)
    return True


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """A copy of book/ with every notebook executed (recorded mode) and the HTML built: (book, executed
    notebooks, HTML folder). Built once per session, for the book's tests and the browser's."""
    import shutil

    from convkit.book.reproduce import build_book, run_notebook
    from convkit.book.reproduce import select_notebooks as notebooks
    from convkit.study.checkout import book_dir

    book = tmp_path_factory.mktemp("site") / "book"
    shutil.copytree(book_dir(), book, ignore=shutil.ignore_patterns("_build", "notebooks"))
    executed = [run_notebook(nb, device="recorded", output_dir=book / "notebooks", progress_bar=False)
                for nb in notebooks()]  # fmt: skip
    return book, executed, build_book(book)
