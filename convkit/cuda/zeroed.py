"""Work memory that is zero when a launch starts and that the launch leaves zero: the counters of a split whose
splits sum into one output tile in one launch (``split::`` in ``kernels/chang2022.cu``).

Such memory is kernel state, so two launches that can be in flight together must never share it: one launch's
reset would strand the other's splits, and the GPU hangs. Launches on one stream run in order, so each
(library, device, stream) keeps one block, zeroed when it is made (the launches keep it zero) and replaced by a
larger one when a launch needs more; the block a launch gets is resolved when it is enqueued, on the stream it
is enqueued on, never fixed when a plan is recorded. A stream being captured into a CUDA graph gets a block of
its own instead, zeroed inside the graph (a memset node before the graph's launches): the graph owns it, and
two graphs captured on one stream and replayed on two at once share nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from convkit.cuda.launch import stream_key

#: The smallest block made for a stream (bytes): a larger launch later replaces it.
MIN_BLOCK_BYTES = 48 * 1024

#: The block of each (library, device, stream key :func:`~convkit.cuda.launch.stream_key`): (device pointer,
#: bytes, the array that owns it).
_BLOCKS: dict[tuple[Any, ...], tuple[int, int, Any]] = {}

#: Blocks of CuPy launches under capture: CuPy's memory pool would give a freed block to a later eager call on
#: the captured stream while the graph still uses it, so a graph's block lives as long as the process.
_CAPTURED_CUPY: list[Any] = []


def capturing(stream: int) -> bool:
    """Whether ``stream`` (a handle; the legacy stream 0 never captures) is being captured into a CUDA graph."""
    import cupy

    return stream != 0 and cupy.cuda.runtime.streamIsCapturing(stream)


def stream_block(library: str, device: int, stream: int, nbytes: int, zeros: Callable[[int], Any]) -> tuple[int, Any]:
    """(pointer, owner) of ``nbytes`` of zeroed memory for a launch on ``stream`` of ``device``: the stream's block,
    made or grown with ``zeros(bytes)`` (an array of that many zero bytes, allocated on ``stream``), which must be
    called with ``stream`` current. ``library`` is ``"cupy"``, ``"torch"``, or ``"torch scratch"`` for a PyTorch
    stream's scratch (``zeros`` then need not zero it). Not for a stream under capture (:func:`capturing`): a graph
    makes its own."""
    key = (library, device, stream_key(stream))
    found = _BLOCKS.get(key)
    if found is None or found[1] < nbytes:
        # the block replaced goes back to its allocator on ``stream``: reused only after this stream's launches
        size = max(nbytes, MIN_BLOCK_BYTES)
        owner = zeros(size)
        pointer = owner.data_ptr() if library.startswith("torch") else owner.data.ptr
        found = _BLOCKS[key] = (pointer, size, owner)
    return found[0], found[2]


def cupy_zeroed_int32(elements: int) -> Any:
    """``elements`` zeroed int32 on CuPy's current stream and device, for a launch enqueued there now
    (:func:`cupy_zeroed`): a launcher's own, where its caller gave it no workspace."""
    import cupy

    nbytes = 4 * max(elements, 1)
    return cupy_zeroed(cupy.cuda.get_current_stream().ptr, nbytes)[:nbytes].view(cupy.int32)


def cupy_zeroed(stream: int, nbytes: int) -> Any:
    """At least ``nbytes`` of zeroed memory (a CuPy uint8 array) for a launch on ``stream``, CuPy's current one: the
    stream's block, or under capture one the graph owns."""
    import cupy

    if capturing(stream):
        return cupy_graph_owned(nbytes, zeroed=True)
    device = cupy.cuda.runtime.getDevice()
    return stream_block("cupy", device, stream, nbytes, lambda n: cupy.zeros(n, dtype=cupy.uint8))[1]


def cupy_graph_owned(nbytes: int, *, zeroed: bool = False) -> Any:
    """``nbytes`` of CuPy memory (zero-filled inside the graph with ``zeroed``) for the graph being captured on
    CuPy's current stream, kept for the life of the process (see :data:`_CAPTURED_CUPY`)."""
    import cupy

    array = (cupy.zeros if zeroed else cupy.empty)(nbytes, dtype=cupy.uint8)
    _CAPTURED_CUPY.append(array)
    return array


def _torch_block(device: int, stream: int, nbytes: int, zeroed: bool = True) -> tuple[int, Any]:
    """(pointer, owner) of ``nbytes`` of memory (zeroed with ``zeroed``) for a PyTorch replay on ``stream`` (PyTorch's
    current one): the stream's block, or under capture a fresh one from the graph's memory pool (zeroed in the
    graph)."""
    import torch

    def block(n: int) -> Any:
        return (torch.zeros if zeroed else torch.empty)(n, dtype=torch.uint8, device=torch.device("cuda", device))

    if capturing(stream):
        owner = block(nbytes)  # freed after the call into the graph's own pool, in the graph's stream order
        return owner.data_ptr(), owner
    return stream_block("torch" if zeroed else "torch scratch", device, stream, nbytes, block)


def torch_replay_resolver(device: int, nbytes: int, *, zeroed: bool = True) -> Callable[[int], tuple[int, Any]]:
    """What a PyTorch replay of a plan needing ``nbytes`` on ``device`` calls per launch with PyTorch's current stream:
    (pointer, owner) of its zeroed memory (or, without ``zeroed``, its scratch: launches on one stream run in order,
    so the stream's eager calls share one block), the stream's block found with one lookup where it is there,
    large enough, and the stream not capturing (:func:`_torch_block` otherwise). The owner must stay referenced
    until the launch is enqueued."""
    import cupy

    blocks, is_capturing = _BLOCKS, cupy.cuda.runtime.streamIsCapturing
    library = "torch" if zeroed else "torch scratch"

    def resolve(stream: int) -> tuple[int, Any]:
        found = blocks.get((library, device, stream))  # never the per-thread stream's: its key has the thread
        if found is not None and found[1] >= nbytes and not (stream and is_capturing(stream)):
            return found[0], None
        return _torch_block(device, stream, nbytes, zeroed)

    return resolve
