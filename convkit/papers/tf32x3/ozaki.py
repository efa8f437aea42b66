"""FP32-accurate 1x1 convolution on INT8 tensor cores (the Ozaki scheme II of Uchino, Ozaki and Imamura, SC '25),
modelled exactly on the CPU: how many INT8 products it needs to reach the FP32 kernels' error on the accuracy
experiment's inputs.

A 1x1 convolution is the product of the filters W (M x K, K = C) and the input X (K x P, P = N*H*W). The scheme
scales each filter row and each pixel column by a power of two and rounds them to integers W', X'; multiplies their
residues modulo n pairwise coprime moduli m_l <= 256 (each residue fits INT8, and K products of two sum exactly in
INT32: one INT8 GEMM a modulus); rebuilds W'X' from its n residues by the Chinese remainder theorem, exact while
|W'X'| < prod(m_l) / 2; and scales back. The only roundings are W' and X' (and the result's to FP32), so the error
is set by how many bits the scaling leaves each operand, which the moduli's product bounds:

- ``max`` scaling: every row and column to the same a bits, with K * 2^(2a) < prod(m_l) / 2 (no extra work);
- ``product`` scaling: the columns to a bits, then each row to as many bits as its own sums |W_i| |X'_j| allow
  (the bound of Uchino et al.'s accurate mode: on a GPU one more low-precision GEMM; here computed in float64).

The model multiplies the residues exactly (float64 products of integers under 2^53) and rebuilds by Garner's
mixed-radix digits (integers under 2^16), evaluated in float64 (a relative error of n * 2^-53, far below FP32's).
Nothing here runs on a GPU or records a result: the 3xTF32 chapter tabulates the model's errors beside the recorded
ones (:func:`model_table`), and ``scripts/ozaki_int8_model.py`` prints the same table for any number of moduli.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from convkit.core.problem import ConvProblem
from convkit.papers.tf32x3.accuracy import INPUTS, make_inputs

#: Pairwise coprime moduli, largest first: each residue, taken in [-m/2, m/2), fits INT8.
MODULI = (256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217, 211)
SCALINGS = ("max", "product")
#: The accuracy experiment's 1x1 problems (:func:`convkit.papers.tf32x3.accuracy.problems`: K = C of 256, 1024 and
#: 4096, 64 filters, two 24 x 24 images).
PROBLEMS = tuple(ConvProblem.same(2, c, 24, 24, 64, 1) for c in (256, 1024, 4096))


def symmetric_residues(v: np.ndarray, m: int) -> np.ndarray:
    """``v`` (int64) modulo ``m`` in [-m/2, m/2): an INT8 value for every m <= 256."""
    r = np.mod(v, m)
    return np.where(r >= (m + 1) // 2, r - m, r)


def operand_bits(k: int, moduli: tuple[int, ...]) -> int:
    """The most bits a (the largest with K * 2^(2a) < prod(moduli) / 2) that ``max`` scaling leaves each operand: then
    every |W'| and |X'| is at most 2^a and |W'X'| stays under prod / 2."""
    half = math.prod(moduli) // 2
    bits = ((half - 1) // k).bit_length() // 2 + 1
    while k << (2 * bits) >= half:
        bits -= 1
    return bits


def _exponents(a: np.ndarray, axis: int, bits: int) -> np.ndarray:
    """Per slice along ``axis``, the power of two that brings its largest magnitude into [2^(bits-1), 2^bits)."""
    biggest = np.abs(a).max(axis=axis, keepdims=True).astype(np.float64)
    exponent = np.floor(np.log2(np.where(biggest > 0, biggest, 1.0)))
    return (bits - 1 - exponent).astype(np.int64)


def scaled_operands(w: np.ndarray, x: np.ndarray, moduli: tuple[int, ...], scaling: str) -> tuple[np.ndarray, ...]:
    """W' and X' (int64) and the exponents s (M x 1) and t (1 x P) with W' = rint(W 2^s), X' = rint(X 2^t), scaled
    by ``scaling`` (:data:`SCALINGS`) so that |W'| |X'| < prod(moduli) / 2 everywhere."""
    half = math.prod(moduli) / 2
    bits = operand_bits(w.shape[1], moduli)
    t = _exponents(x, axis=0, bits=bits)  # one per pixel (column)
    xs = np.rint(np.ldexp(x.astype(np.float64), t))
    if scaling == "max":
        s = _exponents(w, axis=1, bits=bits)
    elif scaling == "product":  # each row as far as its own sums allow, W's rounding (1/2 an element) included
        sums = np.abs(w.astype(np.float64)) @ np.abs(xs)
        room = half * (1 - 2.0**-40) - 0.5 * np.abs(xs).sum(axis=0, keepdims=True)
        s = np.floor(np.log2(room / np.maximum(sums, np.finfo(np.float64).tiny))).min(axis=1, keepdims=True)
        s = s.astype(np.int64)
    else:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    ws = np.rint(np.ldexp(w.astype(np.float64), s))
    if not float((np.abs(ws) @ np.abs(xs)).max()) < half:
        raise AssertionError("scaled past the moduli's range")
    return ws.astype(np.int64), xs.astype(np.int64), s, t


def rebuilt(residues: list[np.ndarray], moduli: tuple[int, ...]) -> np.ndarray:
    """The integers in [-prod/2, prod/2) with these ``residues`` (each in [0, m)), in float64: Garner's digits of the
    value plus prod // 2 (each below its modulus), less those of prod // 2, summed from the top."""
    half = math.prod(moduli) // 2
    half_digits, rest = [], half
    digits: list[np.ndarray] = []
    for i, m in enumerate(moduli):
        half_digits.append(rest % m)
        rest //= m
        radix = 1  # the product of the moduli before m, and the digits' value so far, both modulo m
        so_far = np.zeros_like(residues[i])
        for j in range(i):
            so_far = (so_far + digits[j] * radix) % m
            radix = radix * moduli[j] % m
        shifted = (residues[i] + half % m) % m
        digits.append((shifted - so_far) * pow(radix, -1, m) % m)
    value = (digits[-1] - half_digits[-1]).astype(np.float64)
    for i in range(len(moduli) - 2, -1, -1):
        value = value * moduli[i] + (digits[i] - half_digits[i])
    return value


def ozaki2_product(w: np.ndarray, x: np.ndarray, n: int, scaling: str = "max") -> np.ndarray:
    """W (M x K) times X (K x P), both float32, as the Ozaki scheme II on the first ``n`` of :data:`MODULI`; FP32."""
    moduli = MODULI[:n]
    wi, xi, s, t = scaled_operands(w, x, moduli, scaling)
    residues = []
    for m in moduli:
        # One INT8 GEMM: residues of magnitude at most 128, K products summed exactly (in float64 as in INT32).
        c = symmetric_residues(wi, m).astype(np.float64) @ symmetric_residues(xi, m).astype(np.float64)
        residues.append(np.mod(c.astype(np.int64), m))
    return np.ldexp(rebuilt(residues, moduli), -(s + t)).astype(np.float32)


def model_error(problem: ConvProblem, inputs: str, n: int, scaling: str = "max", seed: int = 0) -> float:
    """Norm-wise error against float64 of the 1x1 ``problem`` on one kind of the accuracy experiment's
    :data:`~convkit.papers.tf32x3.accuracy.INPUTS` (drawn by NumPy, not CuPy: other values of the same kind)."""
    if (problem.r, problem.s, problem.stride, problem.pad) != (1, 1, 1, 0):
        raise ValueError(f"the model is of 1x1 convolutions (stride 1, no padding), got {problem.label}")
    x, w = make_inputs(problem, inputs, seed, np)
    xm = x.transpose(1, 0, 2, 3).reshape(problem.c, -1)  # K x P
    wm = w.reshape(problem.m, problem.c)
    exact = wm.astype(np.float64) @ xm.astype(np.float64)
    got = ozaki2_product(wm, xm, n, scaling)
    return float(np.linalg.norm(got - exact) / np.linalg.norm(exact))


def model_errors(moduli: tuple[int, ...] = (6, 7, 8, 9), scaling: str = "max") -> Any:
    """One row per (problem, kind of input, number of moduli n): the model's error (a DataFrame)."""
    import pandas as pd

    rows = [{"label": p.label, "C": p.c, "inputs": inputs, "n": n, "error": model_error(p, inputs, n, scaling)}
            for p in PROBLEMS for inputs in INPUTS for n in moduli]  # fmt: skip
    return pd.DataFrame(rows)


def model_table(model: Any, accuracy: Any) -> Any:
    """Per 1x1 problem of :data:`PROBLEMS` (rows: K = C, kind of input), the error of the ``model``
    (:func:`model_errors`) with each number of moduli beside the errors the accuracy experiment recorded
    (``accuracy``, its rows) for our 3xTF32 and FP32 implicit GEMMs on the same problem and kind of input (other
    values of it), as numbers."""
    from convkit.families.fp32 import IGEMM
    from convkit.families.tf32x3 import IGEMM as TF32X3
    from convkit.papers.tf32x3.accuracy import ERROR_NAMES, accuracy_frame

    table = model.pivot_table(index=["C", "inputs"], columns="n", values="error", sort=False)
    table.columns = [f"INT8, {n} products (model)" for n in table.columns]
    recorded = accuracy_frame(accuracy)
    c_of = {p.label: p.c for p in PROBLEMS}
    for variant in (TF32X3, IGEMM):
        name = ERROR_NAMES[("convkit", variant)]
        rows = recorded[recorded["label"].isin(c_of) & (recorded["method"] == name)]
        errors = {(c_of[r.label], r.inputs): r.rel_err for r in rows.itertuples()}
        table[f"{name}, recorded"] = [errors.get(key, math.nan) for key in table.index]
    return table.rename_axis(index=["K", "inputs"])


def tensor_bound_share(table: Any, ceilings: dict[str, float], products: float, rate_key: str) -> float:
    """The share (%) of the 1x1 problems of ``table`` (the chapter's problem table: a ``problem`` column) whose
    ``products`` tensor-core products at the measured rate ``ceilings[rate_key]`` (TFLOP/s or TOP/s) take longer than
    their fewest bytes at the measured copy bandwidth: the layers where fewer tensor-core operations could pay."""
    rate = ceilings.get(rate_key, math.nan)
    ones = [p for p in table["problem"] if (p.r, p.s) == (1, 1)]
    if not ones or rate != rate:
        return math.nan
    bound = [products * p.flops / (rate * 1e12) > p.min_bytes / (ceilings["copy_gbps"] * 1e9) for p in ones]
    return 100.0 * sum(bound) / len(bound)


def model_lines(model: Any, errors: Any, table: Any, ceilings: dict[str, float]) -> list[str]:
    """The chapter's sentences on the model: its largest error with each number of moduli against the direct bar and
    the FP32 kernel's recorded errors (``errors``, :func:`model_table`), and on how many of the run's 1x1 layers
    (``table``) the tensor cores, not the memory, bound 3xTF32 and an eight-product INT8 scheme (measured ceilings)."""
    from convkit.core.reference import DIRECT_TOLERANCE

    lines = []
    for n, worst in model.groupby("n")["error"].max().items():
        verdict = "within" if worst <= DIRECT_TOLERANCE else "over"
        lines.append(f"With {n} INT8 products the model's largest error on these problems is {worst:.1e}, {verdict} "
                     f"the direct-method bar ({DIRECT_TOLERANCE:.0e}).")  # fmt: skip
    fp32 = [c for c in errors.columns if c.startswith("FP32")]
    if fp32 and errors[fp32[0]].notna().any():
        lines.append(f"Our FP32 implicit GEMM's largest recorded error on them is {errors[fp32[0]].max():.1e}.")
    ones = sum((p.r, p.s) == (1, 1) for p in table["problem"])
    # Hopper's own instruction where the run measured it (the rate its kernels can reach), else mma.sync's.
    instruction, key = ("wgmma", "wgmma") if "tf32_wgmma_peak_tflops" in ceilings else ("mma.sync", "mma")
    tf32_key, int8_key = f"tf32_{key}_peak_tflops", f"int8_{key}_peak_tops"
    tf32 = tensor_bound_share(table, ceilings, 3, tf32_key)
    if tf32 == tf32:
        lines.append(f"On {tf32:.0f}% of this run's {ones} 1x1 layers, three TF32 products at the measured "
                     f"{instruction} rate take longer than moving the layer's fewest bytes at the measured copy "
                     "bandwidth: only on such layers can fewer tensor-core operations pay.")  # fmt: skip
    int8 = tensor_bound_share(table, ceilings, 8, int8_key)
    if int8 == int8:
        lines.append(f"Eight INT8 products at the measured INT8 {instruction} rate take longer than those bytes on "
                     f"{int8:.0f}% of them.")  # fmt: skip
    else:
        lines.append(f"The INT8 {instruction} rate is not among this run's ceilings.")
    lines.append("The study has no INT8 kernel: the model bounds the error, not the time, and the scheme would add "
                 "a pass over the input for its scaling and a reconstruction in FP64 for every output.")  # fmt: skip
    return lines
