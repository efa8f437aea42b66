"""The Ozaki scheme II on INT8 tensor cores for the 1x1 layers, modelled exactly on the CPU
(:mod:`convkit.papers.tf32x3.ozaki`): the model's error per number of moduli on the accuracy experiment's 1x1
problems and inputs, beside the errors recorded there for our FP32 and 3xTF32 implicit GEMMs (prints; records
nothing).
    python3 scripts/ozaki_int8_model.py [--moduli 6 7 8 9] [--scaling max] [--results results/nvidia-h100-80gb-hbm3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from convkit.core.reference import DIRECT_TOLERANCE
from convkit.papers.tf32x3 import ozaki, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moduli", type=int, nargs="+", default=[6, 7, 8, 9])
    parser.add_argument("--scaling", choices=ozaki.SCALINGS, default="max")
    parser.add_argument("--results", type=Path, default=Path("results/nvidia-h100-80gb-hbm3"))
    args = parser.parse_args()
    model = ozaki.model_errors(tuple(args.moduli), args.scaling)
    table = ozaki.model_table(model, results.load(args.results)["accuracy"])
    print(table.to_string(float_format=lambda v: f"{v:.1e}"))
    print(f"\nworst over the problems and inputs (the direct bar {DIRECT_TOLERANCE:.0e}); n INT8 GEMMs a product")
    fp32 = next((c for c in table.columns if c.startswith("FP32")), None)
    for n, worst in model.groupby("n")["error"].max().items():
        line = f"n={n}: {worst:.1e}"
        if fp32 is not None and table[fp32].notna().any():
            within = int((table[f"INT8, {n} products (model)"] <= table[fp32]).sum())
            line += f", at or under our FP32 implicit GEMM's recorded error on {within} of {len(table)}"
        print(line)


if __name__ == "__main__":
    main()
