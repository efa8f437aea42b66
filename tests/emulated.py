"""Building one kernel launch under ``tests/cuda_emulator`` (g++), for the tests that run kernels on the CPU."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

EMULATOR = Path(__file__).parent / "cuda_emulator"
CXX = shutil.which("g++")


def build(folder: Path, call: str, options: Sequence[str], driver: str) -> Path:
    """The executable of ``tests/cuda_emulator/<driver>`` running ``call`` (the kernel's call, ``-DKERNEL_CALL``)
    on ``folder``'s ``kernel_source.cu`` with the launch's macros ``options``; built once per call and macros."""
    exe = folder / f"launch_{hashlib.sha1(' '.join((*options, call)).encode()).hexdigest()[:16]}"
    if not exe.exists():
        subprocess.run([CXX, "-std=c++17", "-O1", "-w", f"-I{EMULATOR / 'include'}", f"-I{EMULATOR}", f"-I{folder}",
                        f"-DKERNEL_CALL={call}", *options, str(EMULATOR / driver), "-o", str(exe)],
                       check=True)  # fmt: skip
    return exe
