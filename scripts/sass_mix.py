"""The instruction mix of a kernel's main loop, read from its SASS on a machine without a GPU (a probe: prints,
records nothing): nvcc builds the kernel for an architecture with a launch's macros, cuobjdump disassembles it,
and the loop that holds the tensor-core (HMMA) or FMA instructions is counted, per such instruction. Where a
profile on the GPU shows the loop issue-bound, this says which instructions to cut, between device runs.
    python3 scripts/sass_mix.py [--arch sm_90] [--tile 128x128] [--stages 4] [--filter 3] [--kernel tf32x3|fp32]
cuobjdump: on the PATH, or CUOBJDUMP naming it (the nvidia-cuda-cuobjdump wheel ships one; convkit.cuda.ptxas.sass).
"""

from __future__ import annotations

import argparse
import collections
import re

from convkit.core.problem import ConvProblem
from convkit.cuda.ptxas import sass

_LINE = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
_TARGET = re.compile(r"0x([0-9a-f]+)")


def loop_mix(text: str, function: str, marker: str) -> tuple[int, collections.Counter[str]]:
    """The innermost backward branch's body that holds ``marker`` instructions in ``function``: its length and
    its opcodes (predicates and modifiers dropped)."""
    body = text.split(f"Function : {function}", 1)[1].split("Function : ", 1)[0]
    code = [(int(m.group(1), 16), m.group(2)) for line in body.splitlines() if (m := _LINE.match(line))]
    loops = []
    for end, (address, text_) in enumerate(code):
        target = _TARGET.search(text_) if "BRA" in text_ else None
        if target and int(target.group(1), 16) < address:
            start = next(i for i, (a, _) in enumerate(code) if a == int(target.group(1), 16))
            ops = collections.Counter(
                t.split()[1 if t.startswith("@") else 0].split(".")[0] for _, t in code[start : end + 1]
            )
            if ops[marker]:
                loops.append((end + 1 - start, ops))
    if not loops:
        raise SystemExit(f"no loop with {marker} in {function}")
    return min(loops, key=lambda loop: loop[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", choices=("tf32x3", "fp32"), default="tf32x3")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--tile", default="128x128")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--filter", type=int, default=3)
    args = parser.parse_args()
    if args.kernel == "tf32x3":
        from convkit.families.tf32x3.launch import TensorCoreGemmLaunch as kind

        marker = "HMMA"
    else:
        from convkit.families.fp32.launch import ImplicitGemmLaunch as kind

        marker = "FFMA"
    problem = ConvProblem(1, 64, 28, 28, 64, args.filter, args.filter, pad=args.filter // 2)
    spec = kind(args.tile, stages=args.stages)
    length, ops = loop_mix(sass(spec.source, args.arch, options=spec.options(problem)), spec.source, marker)
    print(f"{spec.source} {spec.options(problem)} on {args.arch}: main loop {length} instructions, "
          f"{ops[marker]} {marker}, {length / ops[marker]:.2f} per {marker}")  # fmt: skip
    for op, count in ops.most_common():
        print(f"  {op:10s} {count:5d}  {count / ops[marker]:.2f} per {marker}")


if __name__ == "__main__":
    main()
