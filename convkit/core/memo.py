"""convkit's one memoize helper: what is built once per process, or once per CUDA device.

As ``cupy._util.memoize(for_each_device=True)``: a cuDNN descriptor, a loaded kernel or a GPU's name
belongs to the device that was current when it was made, so those caches key on it too. Importing this
imports no CuPy; the device is read through CuPy at the first call of a per-device function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@functools.cache
def _current_device() -> Callable[[], int]:
    import cupy

    return cupy.cuda.runtime.getDevice


def memoize(*, for_each_device: bool = False) -> Callable[[F], F]:
    """Remember a function's result per (hashable) arguments, and per current CUDA device with
    ``for_each_device``. The function gets ``cache_clear()``, as :func:`functools.cache` gives."""

    def decorate(func: F) -> F:
        if not for_each_device:
            return functools.cache(func)  # type: ignore[return-value]
        cache: dict[tuple[Any, ...], Any] = {}

        @functools.wraps(func)
        def per_device(*args: Any) -> Any:
            key = (_current_device()(), *args)
            try:
                return cache[key]
            except KeyError:
                value = cache[key] = func(*args)
                return value

        per_device.cache_clear = cache.clear  # type: ignore[attr-defined]
        return per_device  # type: ignore[return-value]

    return decorate
