"""The summary chapter's words for what the op runs: a convkit kernel's method, a library's implementation."""

from __future__ import annotations

from convkit.study import tables

#: Each convkit kernel's method in words, by kernel id.
KERNEL_WORDS = tables.KERNEL_WORDS

#: The libraries' implementations in words, by ``"<impl> <variant>"``.
_LIBRARY_IMPL = {"sgemm": "cublas", "cudnn.benchmark": "pytorch"}  # every other library variant is cuDNN's
LIBRARY_WORDS = {f"{_LIBRARY_IMPL.get(v, 'cudnn')} {v}": words for v, words in tables.LIBRARY_NAMES.items()}


def kernel_words(variant: str) -> str:
    """A convkit kernel's method in words (:data:`KERNEL_WORDS`; an unknown id with its underscores as spaces)."""
    return KERNEL_WORDS.get(variant, variant.replace("_", " "))


def implementation_words(impl: str, variant: str) -> str:
    """Any recorded implementation in words: a convkit kernel (:func:`kernel_words`) or a library's
    (:data:`LIBRARY_WORDS`)."""
    if impl == tables.CONVKIT:
        return kernel_words(variant)
    return LIBRARY_WORDS.get(f"{impl} {variant}", f"{impl} {variant}")
