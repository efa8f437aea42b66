"""convkit.cuda.plan on the CPU, with stand-ins for CuPy arrays: which arguments become slots, where each points,
regions of the declared workspace, and a replay filling the slots from new pointers."""

from __future__ import annotations

import ctypes
import sys
import threading
import types
from dataclasses import dataclass

import pytest

from convkit.cuda.operands import WORKSPACE_ALIGN, ConvArgs
from convkit.cuda.plan import SCRATCH, ZEROED, Plan
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


def test_arguments_become_slots_of_the_declared_operands_and_replays_follow_new_pointers(fake_cupy):
    x, w, out = _FakeArray(0x10000, 4096), _FakeArray(0x20000, 256), _FakeArray(0x30000, 1024)
    workspace = _FakeArray(0x90000, 3 * WORKSPACE_ALIGN)
    view = _FakeArray(0x10000 + 2048, 2048)  # a pass over the second half of the images
    planes, transforms = _FakeArray(0x90000, 100), _FakeArray(0x90000 + WORKSPACE_ALIGN, 300)  # regions of it
    calls = []
    recording = Recording(calls=[(calls.append, (x, w, planes, 7)), (calls.append, (view, transforms, out, 2.5))])
    plan = Plan.record(recording, ConvArgs(x, w, out, workspace=workspace))
    assert (plan.scratch_bytes, plan.zeroed_bytes) == (3 * WORKSPACE_ALIGN, 0)
    assert plan.steps[0].slots == ((0, 0, 0), (1, 1, 0), (2, SCRATCH, 0))
    assert plan.steps[1].slots == ((0, 0, 2048), (1, SCRATCH, WORKSPACE_ALIGN), (2, 2, 0))
    assert plan.steps[1].template[3] == 2.5
    replayed = []
    for step in plan.steps:
        object.__setattr__(step, "call", lambda args, stream: replayed.append(args))
    plan.replay((1000, 2000, 3000, 0, 50_000), stream=_Pointer(0))
    assert replayed == [(1000, 2000, 50_000, 7), (3048, 50_000 + WORKSPACE_ALIGN, 3000, 2.5)]


def test_a_zeroed_workspace_is_a_slot_of_its_own_block(fake_cupy):
    """Split counters (zeroed kernel state) are never kept by the plan: each replay gives its own block."""
    x, w, out, bias = (_FakeArray(p, n) for p, n in ((0x10000, 4096), (0x20000, 256), (0x30000, 1024), (0x40000, 8)))
    counters = _FakeArray(0xB0000, 12)
    recording = Recording(calls=[(print, (x, w, out, bias, counters))])
    plan = Plan.record(recording, ConvArgs(x, w, out, bias, counters), zeroed_workspace=True)
    assert (plan.scratch_bytes, plan.zeroed_bytes) == (0, 12)
    assert plan.steps[0].slots == ((0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0), (4, ZEROED, 0))
    assert all(a is None for a in plan.steps[0].template)
    replayed = []
    object.__setattr__(plan.steps[0], "call", lambda args, stream: replayed.append(args))
    plan.replay((1, 2, 3, 4, 0, 7000), stream=_Pointer(0))
    assert replayed == [(1, 2, 3, 4, 7000)]


def test_an_array_no_operand_holds_is_refused(fake_cupy):
    """A launcher's own array would be shared by every replay of the plan, in flight together: refused."""
    x, w, out = _FakeArray(0x10000, 4096), _FakeArray(0x20000, 256), _FakeArray(0x30000, 1024)
    own = _FakeArray(0xF0000, 64)
    with pytest.raises(ValueError, match=r"argument 3 of .* is no declared operand"):
        Plan.record(Recording(calls=[(print, (x, w, out, own))]), ConvArgs(x, w, out))


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


def test_a_pytorch_replay_keeps_scratch_per_stream_apart_from_its_zeroed_state(monkeypatch):
    """A PyTorch replay's scratch (``torch_replay_resolver(zeroed=False)``): the stream's block, made with
    ``torch.empty`` once and found again with one lookup; another block than the stream's zeroed state; under
    capture a fresh block per call that no later call gets."""
    from convkit.cuda import zeroed

    made: list[tuple[str, int]] = []

    class Tensor:
        def __init__(self, how: str, n: int):
            made.append((how, n))
            self.ptr = 0x1000 * len(made)

        def data_ptr(self) -> int:
            return self.ptr

    fake_torch = types.SimpleNamespace(uint8="uint8", device=lambda *a: a, empty=lambda n, **k: Tensor("empty", n),
                                       zeros=lambda n, **k: Tensor("zeros", n))  # fmt: skip
    capturing = {33}
    runtime = types.SimpleNamespace(streamIsCapturing=lambda stream: stream in capturing)
    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    zeroed._BLOCKS.clear()
    scratch, counters = zeroed.torch_replay_resolver(0, 1000, zeroed=False), zeroed.torch_replay_resolver(0, 64)
    first, owner = scratch(11)
    assert owner is not None and made == [("empty", zeroed.MIN_BLOCK_BYTES)]
    assert scratch(11) == (first, None) and len(made) == 1  # found again: nothing made, no owner to keep
    assert counters(11)[0] != first and made[-1][0] == "zeros"  # the zeroed state is a block of its own
    assert scratch(22)[0] != first  # another stream, another block
    fresh = [scratch(33) for _ in range(2)]  # under capture: a block per call, kept by its owner only
    assert fresh[0][0] != fresh[1][0] and all(owner is not None for _, owner in fresh)
    assert ("torch scratch", 0, 33) not in zeroed._BLOCKS
    zeroed._BLOCKS.clear()


def test_a_pytorch_replay_calls_cublas_on_convkits_handle_except_under_capture(monkeypatch):
    """``torch_replay_handle``: convkit's own handle for the thread and stream (set up once) where the stream runs
    eagerly; PyTorch's handle and workspace while it is captured into a CUDA graph (nothing made under capture)."""
    from convkit.libs import cublas

    capturing = {33}
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.streamIsCapturing = lambda stream: stream in capturing
    for name, module in (("cupy", types.ModuleType("cupy")), ("cupy.cuda", types.ModuleType("cupy.cuda")),
                         ("cupy.cuda.runtime", runtime)):  # fmt: skip
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(cublas, "_handle", lambda device, stream: ("convkit", device, stream))
    monkeypatch.setattr(cublas, "torch_handle", lambda device, stream: ("pytorch", device, stream))
    assert cublas.torch_replay_handle(0, 11) == ("convkit", 0, 11)
    assert cublas.torch_replay_handle(0, 0) == ("convkit", 0, 0)  # the legacy stream never captures
    assert cublas.torch_replay_handle(1, 33) == ("pytorch", 1, 33)


def test_an_early_launch_configures_cuda_h_structures_with_programmatic_serialization():
    """CUlaunchConfig and CUlaunchAttribute as cuda.h lays them out on a 64-bit host (sizes, offsets), filled with
    the call's grid, block and shared memory and the one attribute, programmatic stream serialization, set."""
    from convkit.cuda import driver

    assert ctypes.sizeof(driver._LaunchAttribute) == 72 and driver._LaunchAttribute.value.offset == 8
    offsets = tuple(getattr(driver._LaunchConfig, name).offset for name in ("shared", "stream", "attrs", "count"))
    assert ctypes.sizeof(driver._LaunchConfig) == 56 and offsets == (24, 32, 40, 48)
    call = types.SimpleNamespace(grid=(7, 3), block=(384,), shared=231_552, function=types.SimpleNamespace(ptr=5))
    config = driver.EarlyLaunch(call)._config
    assert (list(config.grid), list(config.block), config.shared, config.count) == ([7, 3, 1], [384, 1, 1], 231_552, 1)
    assert (config.attrs[0].id, config.attrs[0].value[0]) == (driver.PROGRAMMATIC_STREAM_SERIALIZATION, 1)
