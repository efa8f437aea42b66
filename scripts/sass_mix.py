"""The instruction mix of a kernel's main loop, read from its SASS on a machine without a GPU (a probe: prints,
records nothing): nvcc builds the kernel for an architecture with a launch's macros, cuobjdump disassembles it,
and the loop that holds the tensor-core (HMMA) or FMA instructions is counted, per such instruction. Where a
profile on the GPU shows the loop issue-bound, this says which instructions to cut, between device runs.
    python3 scripts/sass_mix.py [--arch sm_90] [--tile 128x128] [--stages 4] [--filter 3] [--kernel tf32x3|fp32]
        [--warp 64x32] [--weights split] [--order]
    python3 scripts/sass_mix.py --cutlass [--order]  # CUTLASS's 3xTF32 tiles as convkit.libs.cutlass builds them
--order prints the loop's instructions in issue order, one letter each (H HMMA, m ldmatrix, s shared load, g copy
to shared memory, + FADD, | barrier, . the rest): where the tensor cores wait on the rest of the loop.
cuobjdump: on the PATH, or CUOBJDUMP naming it (the nvidia-cuda-cuobjdump wheel ships one; convkit.cuda.ptxas.sass).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from convkit.core.problem import ConvProblem
from convkit.cuda.ptxas import main_loop, sass


def cutlass_sass(arch: str) -> str:
    """The SASS of CUTLASS's shim (convkit/libs/cutlass_fprop.cu) built for ``arch`` from the nvidia-cutlass wheel's
    headers, as convkit.libs.cutlass builds it."""
    from convkit.libs import cutlass

    include = cutlass.headers()
    if include is None:
        raise SystemExit("CUTLASS's headers: install the nvidia-cutlass wheel")
    cuobjdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "cutlass.cubin"
        subprocess.run(["nvcc", "-std=c++17", "-O3", "-cubin", f"-arch={arch}", "--expt-relaxed-constexpr",
                        f"-I{include}", "-o", str(cubin), str(cutlass.SOURCE)], check=True)  # fmt: skip
        return subprocess.run([str(cuobjdump), "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip


def report(name: str, text: str, function: str, marker: str, order: bool) -> None:
    """One kernel's main loop: its length per ``marker`` instruction, its mix and (``order``) its order."""
    length, ops, letters = main_loop(text, function, marker)
    print(f"{name}: main loop {length} instructions, {ops[marker]} {marker}, {length / ops[marker]:.2f} per {marker}")
    for op, count in ops.most_common():
        print(f"  {op:10s} {count:5d}  {count / ops[marker]:.2f} per {marker}")
    if order:
        print("  order: " + letters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", choices=("tf32x3", "fp32"), default="tf32x3")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--tile", default="128x128")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--filter", type=int, default=3)
    parser.add_argument("--warp", default=None)
    parser.add_argument("--weights", default=None)
    parser.add_argument("--order", action="store_true")
    parser.add_argument("--cutlass", action="store_true")
    args = parser.parse_args()
    if args.cutlass:
        text = cutlass_sass(args.arch)
        for function in re.findall(r"Function : (\S+)", text):
            if "MmaTensorOpFastF32" in function:  # its 3xTF32 tiles
                tile = re.search(r"GemmShapeILi(\d+)ELi(\d+)ELi16", function)
                report(f"CUTLASS 3xTF32 {tile.group(1)}x{tile.group(2)} on {args.arch}", text, function, "HMMA",
                       args.order)  # fmt: skip
        return
    if args.kernel == "tf32x3":
        from convkit.families.tf32x3.launch import TensorCoreGemmLaunch as kind

        marker = "HMMA"
    else:
        from convkit.families.fp32.launch import ImplicitGemmLaunch as kind

        marker = "FFMA"
    problem = ConvProblem(1, 64, 28, 28, 64, args.filter, args.filter, pad=args.filter // 2)
    knobs = {"warp": args.warp, "weights": args.weights} if args.kernel == "tf32x3" else {}
    spec = kind(args.tile, stages=args.stages, **knobs)
    text = sass(spec.source, args.arch, options=spec.options(problem))
    report(f"{spec.source} {spec.options(problem)} on {args.arch}", text, spec.source, marker, args.order)


if __name__ == "__main__":
    main()
