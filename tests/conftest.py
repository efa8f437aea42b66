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


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()
