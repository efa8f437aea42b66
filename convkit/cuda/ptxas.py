"""Compiling ``kernels/*.cu`` ahead of time with ``nvcc``, no GPU needed: what ptxas says of each kernel.

:func:`ptxas_report` compiles a source with ``nvcc -cubin -Xptxas -v`` for a given architecture and parses
the resource usage of every kernel (registers, stack frame, spills, shared memory, and whether ptxas serialised its
wgmma instructions). CI uses it to check
that every kernel builds for the Colab T4 (sm_75) and the H100 (sm_90); the chapters use it as evidence.
:func:`sass` disassembles a build, and :func:`main_loop` reads a kernel's main loop from it: its length, its mix of
instructions and their order (scripts/sass_mix.py; a test holds the 3xTF32 kernel's order).
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from convkit.core.paths import kernels_dir
from convkit.cuda.nvrtc import COMMON_OPTIONS, kernel_source

#: The architectures CI compiles for: Colab's T4 and the H100.
CHECKED_ARCHS: tuple[str, ...] = ("sm_75", "sm_90")


@dataclass(frozen=True)
class KernelResources:
    """What ``ptxas -v`` reports for one kernel on one architecture."""

    source: str
    kernel: str
    arch: str
    registers: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    shared_bytes: int
    constant_bytes: int
    #: ptxas made each ``wgmma.mma_async`` wait for the one before (its warning C7514, C7515, ...: registers of a
    #: running wgmma touched, for one): a Hopper kernel built so runs its tensor cores one product at a time.
    wgmma_serialized: bool = False


_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(sm_\w+)'")


_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


_USED = re.compile(r"Used (\d+) registers")


_SMEM = re.compile(r"(\d+) bytes smem")


_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


_SERIALIZED = re.compile(r"wgmma\.mma_async instructions are serialized .* in the function '(\w+)'")


def parse_ptxas(text: str, *, source: str = "") -> list[KernelResources]:
    """Parse the ``-Xptxas -v`` log of one compilation into one record per kernel."""
    records: list[KernelResources] = []
    current: dict[str, Any] | None = None

    def flush() -> None:
        if current is not None and "registers" in current:
            records.append(KernelResources(source=source, **current))

    for line in text.splitlines():
        if m := _ENTRY.search(line):
            flush()
            current = dict(
                kernel=m.group(1), arch=m.group(2), registers=0, stack_frame_bytes=0,
                spill_store_bytes=0, spill_load_bytes=0, shared_bytes=0, constant_bytes=0,
            )  # fmt: skip
            current.pop("registers")
            continue
        if current is None:
            continue
        if m := _FRAME.search(line):
            current["stack_frame_bytes"], current["spill_store_bytes"], current["spill_load_bytes"] = (
                int(g) for g in m.groups()
            )
        if m := _USED.search(line):
            current["registers"] = int(m.group(1))
            current["shared_bytes"] = int(s.group(1)) if (s := _SMEM.search(line)) else 0
            current["constant_bytes"] = int(c.group(1)) if (c := _CMEM.search(line)) else 0
    flush()
    serialized = set(_SERIALIZED.findall(text))
    return [replace(r, wgmma_serialized=r.kernel in serialized) for r in records]


def find_nvcc() -> str | None:
    """Path of ``nvcc`` on the PATH, or None."""
    return shutil.which("nvcc")


def ptxas_report(source: str, arch: str = "sm_90", *, options: tuple[str, ...] = ()) -> list[KernelResources]:
    """Compile ``kernels/<source>.cu`` with ``nvcc -cubin -Xptxas -v`` and parse the resources.

    Needs no GPU, only ``nvcc``. Raises RuntimeError with the compiler's output if it fails.
    """
    with tempfile.TemporaryDirectory() as tmp:
        _, log = _cubin(source, arch, options, Path(tmp))
    return parse_ptxas(log, source=source)


def sass(source: str, arch: str = "sm_90", *, options: tuple[str, ...] = ()) -> str:
    """The SASS of ``kernels/<source>.cu`` built for ``arch`` with ``options`` (``cuobjdump -sass``: on the PATH,
    or named by the environment variable ``CUOBJDUMP``; the ``nvidia-cuda-cuobjdump`` wheel ships one). Needs no
    GPU; raises RuntimeError where a tool is missing or fails."""
    import os

    cuobjdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not cuobjdump:
        raise RuntimeError("cuobjdump is not on the PATH (or named by CUOBJDUMP): SASS needs it")
    with tempfile.TemporaryDirectory() as tmp:
        cubin, _ = _cubin(source, arch, options, Path(tmp))
        proc = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump failed on kernels/{source}.cu ({arch}):\n{proc.stderr}")
    return proc.stdout


_SASS_LINE = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
_BRANCH_TARGET = re.compile(r"0x([0-9a-f]+)")
#: :func:`main_loop`'s letters for the instructions a main loop's order is read by (the rest: ".").
LOOP_LETTERS = {"HMMA": "H", "LDSM": "m", "LDS": "s", "LDGSTS": "g", "FADD": "+", "BAR": "|"}


def opcode(instruction: str) -> str:
    """A SASS instruction's opcode, its predicate and modifiers dropped."""
    return instruction.split()[1 if instruction.startswith("@") else 0].split(".")[0]


def main_loop(text: str, function: str, marker: str) -> tuple[int, collections.Counter[str], str]:
    """In :func:`sass`'s ``text``, the innermost loop (backward branch) of ``function`` that holds ``marker``
    instructions (``HMMA``, ``FFMA``): its length, its opcodes and their order, a letter each
    (:data:`LOOP_LETTERS`). Raises ValueError where no loop holds one."""
    body = text.split(f"Function : {function}", 1)[1].split("Function : ", 1)[0]
    code = [(int(m.group(1), 16), m.group(2)) for line in body.splitlines() if (m := _SASS_LINE.match(line))]
    loops = []
    for end, (address, instruction) in enumerate(code):
        target = _BRANCH_TARGET.search(instruction) if "BRA" in instruction else None
        if target and int(target.group(1), 16) < address:
            start = next(i for i, (a, _) in enumerate(code) if a == int(target.group(1), 16))
            names = [opcode(t) for _, t in code[start : end + 1]]
            ops = collections.Counter(names)
            if ops[marker]:
                loops.append((end + 1 - start, ops, "".join(LOOP_LETTERS.get(n, ".") for n in names)))
    if not loops:
        raise ValueError(f"no loop with {marker} in {function}")
    return min(loops, key=lambda loop: loop[0])


def _cubin(source: str, arch: str, options: tuple[str, ...], folder: Path) -> tuple[Path, str]:
    """Build ``kernels/<source>.cu`` for ``arch`` into a cubin in ``folder``, as NVRTC builds it (the common
    options, ptxas verbose): its path and the compiler's log."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc is not on the PATH: the compile report needs the CUDA toolkit")
    path = kernel_source(source)
    # nvcc splits option values at commas (NVRTC takes each option whole): escape them in macro values
    options = tuple(o.replace(",", "\\,") if o.startswith("-D") else o for o in options)
    cubin = folder / f"{source}.cubin"
    cmd = [nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", *COMMON_OPTIONS, *options, "-o", str(cubin), str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed for kernels/{source}.cu ({arch}):\n{log}")
    return cubin, log


def all_sources() -> list[str]:
    """Stems of every ``kernels/*.cu``."""
    return sorted(p.stem for p in kernels_dir().glob("*.cu"))
