"""convkit.cuda.plan on the CPU, with stand-ins for CuPy arrays: which arguments become slots, where each points,
the scratch block's layout, and a replay filling the slots from new pointers."""

from __future__ import annotations

import sys
import threading
import types
from dataclasses import dataclass

import pytest

from convkit.cuda.plan import SCRATCH, SCRATCH_ALIGN, ZEROED, Plan
from convkit.cuda.record import Recording


@dataclass
class _Pointer:
    ptr: int


class _FakeArray:
    """What Plan.record reads of a CuPy array: its pointer and its size."""

    def __init__(self, ptr: int, nbytes: int):
        self.data, self.nbytes = _Pointer(ptr), nbytes


@pytest.fixture
def fake_cupy(monkeypatch):
    module = types.ModuleType("cupy")
    module.ndarray = _FakeArray
    monkeypatch.setitem(sys.modules, "cupy", module)


def test_arguments_become_slots_and_replays_follow_new_pointers(fake_cupy):
    x, w, out = _FakeArray(0x10000, 4096), _FakeArray(0x20000, 256), _FakeArray(0x30000, 1024)
    view = _FakeArray(0x10000 + 2048, 2048)  # a pass over the second half of the images
    first, second = _FakeArray(0x90000, 100), _FakeArray(0xA0000, 300)  # scratch: planes, transforms
    kept = _FakeArray(0xF0000, 64)  # a read-only table the launcher keeps
    calls = []
    recording = Recording(calls=[(calls.append, (x, w, first, 7)), (calls.append, (view, second, out, kept, 2.5))],
                          scratch=[first, second])  # fmt: skip
    plan = Plan.record(recording, (x, w, out, None))
    assert plan.scratch_bytes == 3 * SCRATCH_ALIGN  # 100 and 300 bytes, each rounded up to the alignment
    assert plan.steps[0].slots == ((0, 0, 0), (1, 1, 0), (2, SCRATCH, 0))
    assert plan.steps[1].slots == ((0, 0, 2048), (1, SCRATCH, SCRATCH_ALIGN), (2, 2, 0))
    assert plan.steps[1].template[3] is kept and plan.steps[1].template[4] == 2.5
    replayed = []
    for step in plan.steps:
        object.__setattr__(step, "call", lambda args, stream: replayed.append(args))
    plan.replay((1000, 2000, 3000, 0, 50_000), stream=_Pointer(0))
    assert replayed == [(1000, 2000, 50_000, 7), (3048, 50_000 + SCRATCH_ALIGN, 3000, kept, 2.5)]


def test_zeroed_state_is_a_slot_of_its_own_block(fake_cupy):
    """Split counters (zeroed kernel state) are never kept by the plan: each replay gives its own block."""
    x, w, out = _FakeArray(0x10000, 4096), _FakeArray(0x20000, 256), _FakeArray(0x30000, 1024)
    scratch, counters = _FakeArray(0x90000, 100), _FakeArray(0xB0000, 12)
    recording = Recording(calls=[(print, (x, w, out, scratch, counters))], scratch=[scratch], zeroed=[counters])
    plan = Plan.record(recording, (x, w, out, None))
    assert (plan.scratch_bytes, plan.zeroed_bytes) == (SCRATCH_ALIGN, SCRATCH_ALIGN)
    assert plan.steps[0].slots == ((0, 0, 0), (1, 1, 0), (2, 2, 0), (3, SCRATCH, 0), (4, ZEROED, 0))
    assert all(a is None for a in plan.steps[0].template)
    replayed = []
    object.__setattr__(plan.steps[0], "call", lambda args, stream: replayed.append(args))
    plan.replay((1, 2, 3, 0, 500, 7000), stream=_Pointer(0))
    assert replayed == [(1, 2, 3, 500, 7000)]


def test_each_stream_has_its_own_zeroed_block_grown_on_demand():
    from convkit.cuda import zeroed
    from convkit.cuda.launch import PER_THREAD_STREAM

    class Block:
        made = 0

        def __init__(self, n):
            Block.made += 1
            self.nbytes, self.ptr = n, 0x1000 * Block.made

        def data_ptr(self):
            return self.ptr

    zeroed._BLOCKS.clear()
    a, owner_a = zeroed.stream_block("torch", 0, 11, 100, Block)
    again, _ = zeroed.stream_block("torch", 0, 11, 100, Block)
    other, _ = zeroed.stream_block("torch", 0, 22, 100, Block)
    assert a == again != other and owner_a.nbytes == zeroed.MIN_BLOCK_BYTES
    grown, owner = zeroed.stream_block("torch", 0, 11, zeroed.MIN_BLOCK_BYTES + 1, Block)
    assert grown not in (a, other) and owner.nbytes == zeroed.MIN_BLOCK_BYTES + 1
    assert zeroed.stream_block("torch", 1, 11, 100, Block)[0] not in (a, grown, other)  # another device
    # the per-thread default stream is one handle for a different stream in each thread: a block per thread
    here = zeroed.stream_block("torch", 0, PER_THREAD_STREAM, 100, Block)[0]
    there: list[int] = []
    worker = threading.Thread(target=lambda: there.append(zeroed.stream_block("torch", 0, 2, 100, Block)[0]))
    worker.start()
    worker.join()
    assert there and there[0] != here == zeroed.stream_block("torch", 0, PER_THREAD_STREAM, 100, Block)[0]
    zeroed._BLOCKS.clear()
