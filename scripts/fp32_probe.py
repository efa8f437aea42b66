"""Tune and sweep the FP32-ceiling kernels on a few layers into a scratch folder and print a summary."""

import sys
from pathlib import Path

from convkit import tuning
from convkit.measure import run_experiment
from convkit.papers import fp32
from convkit.problem import ConvProblem
from convkit.results import load_results

out = Path(sys.argv[1])
same = ConvProblem.same
layers = [same(1, 832, 7, 7, 32, 1), same(1, 256, 14, 14, 1024, 1), same(32, 64, 56, 56, 256, 1),
          same(256, 512, 7, 7, 2048, 1), same(1, 64, 56, 56, 64, 3), same(32, 256, 56, 56, 256, 3),
          same(256, 256, 14, 14, 256, 3), same(8, 64, 224, 224, 64, 3), same(1, 96, 27, 27, 256, 5),
          same(64, 96, 27, 27, 256, 5), same(32, 128, 112, 112, 128, 3), same(128, 16, 28, 28, 32, 5)]
for p in layers:
    run_experiment("probe_tuning", [p], fp32.VARIANTS, directory=out, cudnn=False, tune=True, timing=tuning.TIMING,
                   progress=None)
    run_experiment("probe", [p], fp32.VARIANTS, directory=out, peers=fp32.PEERS, timing=fp32.TIMING, progress=None)
frame, _ = load_results(out, "probe")
for label, rows in frame.groupby("label", sort=False):
    ok = rows[rows.status == "ok"]
    flops = ConvProblem.from_label(label).flops if hasattr(ConvProblem, "from_label") else 0
    parts = []
    for _, r in ok.sort_values("time_ms_median").iterrows():
        parts.append(f"{r.variant}={r.time_ms_median * 1e3:.0f}us({flops / r.time_ms_median / 1e9:.0f}TF)")
    print(label, f"{flops / 1e9:.2f} GFLOP", " ".join(parts[:6]))
    bad = rows[rows.status != "ok"]
    for _, r in bad.iterrows():
        if r.impl == "convkit":
            print("   FAILED", r.variant, r.params, r.status, r.note)
tun, _ = load_results(out, "probe_tuning")
tun = tun[tun.status == "ok"]
for (label, variant), rows in tun.groupby(["label", "variant"], sort=False):
    best = rows.loc[rows.time_ms_median.idxmin()]
    flops = ConvProblem.from_label(label).flops
    print(f"tuned {label:20s} {variant:14s} {best.time_ms_median * 1e3:8.1f}us {flops / best.time_ms_median / 1e9:6.1f}TF "
          f"{best.params} err {best.rel_err}")
