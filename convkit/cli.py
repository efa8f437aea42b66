"""The ``convkit`` command: info, prebuild, bench, kernels, reproduce, book."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.registry import Variant
from convkit.op import prebuild as prebuilding
from convkit.papers import PAPERS, names, paper, shipping_sources


def _cmd_info(args: argparse.Namespace) -> int:
    from convkit._version import __version__
    from convkit.core.gpu import gpu_status
    from convkit.cuda.ptxas import find_nvcc
    from convkit.libs import cudnn

    ok, what = gpu_status()
    print(f"convkit {__version__}")
    print(f"GPU: {what if ok else 'none (' + what + ')'}")
    if ok:
        from convkit.study import provenance

        for key, value in provenance.collect().items():
            print(f"  {key}: {value}")
    else:
        print(f"cuDNN: {cudnn.library_origin()}")
    print(f"nvcc (compile reports): {find_nvcc() or 'not found'}")
    return 0


def _problems(args: argparse.Namespace) -> list[ConvProblem]:
    pad: Any = args.pad if args.pad == "same" else int(args.pad)
    problems = [ConvProblem.from_label(label, pad=pad, stride=args.stride) for label in args.labels]
    if args.suite:
        suite = paper(args.suite).problems
        if suite is None:
            raise SystemExit(f"convkit bench: {args.suite} declares no problems; try one of {_suites()}")
        problems += suite(args.quick)
    if not problems:
        raise SystemExit("convkit bench: give a label (e.g. 7-1-1-32-832) or --suite baseline")
    return problems


def _suites() -> list[str]:
    return [p.name for p in PAPERS if p.problems is not None]


def _variants(names: str | None) -> list[Variant]:
    """The registered variants called ``names`` (comma-separated), or all of them."""
    known = {v.name: v for p in PAPERS for v in p.variants}
    if not names:
        return list(known.values())
    unknown = [n for n in names.split(",") if n not in known]
    if unknown:
        raise SystemExit(f"convkit bench: unknown variants {unknown}; known: {sorted(known)}")
    return [known[n] for n in names.split(",")]


def _print_rows(rows: Sequence[dict[str, Any]]) -> None:
    header = (
        f"{'impl':8} {'variant':22} {'status':20} {'median ms':>11} {'min ms':>10} {'max ms':>10} "
        f"{'GFLOP/s':>9} {'rel err':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['impl']:8} {r['variant']:22} {r['status']:20} {r.get('time_ms_median') or '-':>11} "
              f"{r.get('time_ms_min') or '-':>10} {r.get('time_ms_max') or '-':>10} "
              f"{r.get('gflops') or '-':>9} {r.get('rel_err') or '-':>9}")  # fmt: skip


def _cmd_bench(args: argparse.Namespace) -> int:
    from convkit.bench import measure
    from convkit.bench.rows import case_key, row_key
    from convkit.core.gpu import require_cupy
    from convkit.families.registry import Kernels
    from convkit.op.cases import cases
    from convkit.papers import tuned_knobs
    from convkit.study.results import ResultStore, gpu_results_dir
    from convkit.study.sweep import run_experiment

    require_cupy()
    problems = _problems(args)
    timing = {"flush_l2": args.flush_l2}
    variants = _variants(args.variants)
    kernels = Kernels(tuple(variants))
    tuned = tuned_knobs(gpu_results_dir(None))  # each kernel at the launch this GPU's recorded tuning found
    if args.csv:
        csv = Path(args.csv)
        run_experiment(csv.stem, problems, variants, directory=csv.parent, cudnn=not args.no_cudnn, timing=timing,
                       progress=None, tuned=tuned)  # fmt: skip
        stored = {row_key(r): r for r in ResultStore(csv.parent, csv.stem).rows()}
    for problem in problems:
        todo = cases(problem, variants, cudnn=not args.no_cudnn, tuned=tuned)
        print(f"\n{problem.label}  N={problem.n} C={problem.c} HxW={problem.h}x{problem.w} M={problem.m} "
              f"RxS={problem.r}x{problem.s} pad={problem.pad} stride={problem.stride}  "
              f"{problem.flops / 1e9:.3f} GFLOP, {problem.min_bytes / 1e6:.2f} MB")  # fmt: skip
        if args.csv:
            rows = [stored[case_key(problem, c)] for c in todo]
        else:
            rows = list(measure.measure_problem(problem, todo, kernels, timing=timing))
        _print_rows(rows)
    if args.csv:
        print(f"\nrows in {args.csv}, provenance in {Path(args.csv).with_suffix('.json')}")
    return 0


def _cmd_kernels(args: argparse.Namespace) -> int:
    from convkit.cuda.ptxas import CHECKED_ARCHS, all_sources, ptxas_report

    archs = args.arch or list(CHECKED_ARCHS)
    print(
        f"{'source':12} {'kernel':24} {'arch':6} {'regs':>5} {'stack B':>8} "
        f"{'spill st':>9} {'spill ld':>9} {'smem B':>7}"
    )
    for source in all_sources():
        for arch in archs:
            for k in ptxas_report(source, arch):
                print(f"{k.source:12} {k.kernel:24} {k.arch:6} {k.registers:5} {k.stack_frame_bytes:8} "
                      f"{k.spill_store_bytes:9} {k.spill_load_bytes:9} {k.shared_bytes:7}")  # fmt: skip
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from convkit.core.gpu import require_cupy
    from convkit.study.results import QUICK_SUFFIX, gpu_results_dir

    entry = paper(args.paper)
    if args.build_workers and not args.scheduler:  # built in parallel first, in the caches a node's GPUs share
        require_cupy()
        print(f"{entry.build_first(args.quick, args.build_workers)} kernel builds ready")
    if args.gpus > 1 or args.scheduler:
        if args.batches:
            print("convkit sweep: --batches is for one GPU; leave it out with --gpus or --scheduler", file=sys.stderr)
            return 2
        return 0 if _on_node(args, only=[args.paper]) else 1
    require_cupy()
    directory = gpu_results_dir(Path(args.directory) if args.directory else None)
    options = {"batches": tuple(int(b) for b in args.batches.split(","))} if args.batches else {}
    experiment = entry.experiment + (QUICK_SUFFIX if args.quick else "")
    entry.measure(directory, quick=args.quick, experiment=experiment, **options)
    print(f"rows in {directory / experiment}.csv")
    return 0


def _cmd_repeat(args: argparse.Namespace) -> int:
    from convkit.core.gpu import require_cupy
    from convkit.study.results import gpu_results_dir

    require_cupy()
    entry = paper(args.paper)
    directory = gpu_results_dir(Path(args.directory) if args.directory else None)
    entry.measure_repeat(directory)
    print(f"rows in {directory / entry.experiment}_repeat.csv")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from convkit.book import chapter, verify

    directory = Path(args.directory) if args.directory else chapter.results_directory("recorded")
    if not directory.is_dir():
        print(f"convkit verify: no results folder {directory}", file=sys.stderr)
        return 2
    if args.record:
        print(f"claims recorded in {verify.record(directory)}")
    return _verify_folder(directory, quick=args.quick or not (directory / "ceilings.csv").is_file())


def _verify_folder(directory: Path, *, quick: bool) -> int:
    """Print every claim on ``directory`` (its quick run with ``quick``) against the record; the exit status."""
    import pandas as pd

    from convkit.book import verify

    rows, same_gpu = verify.verify(directory, quick=quick)
    with pd.option_context("display.width", 200, "display.max_colwidth", 40, "display.max_rows", None):
        print(verify.table(rows).to_string(index=False))
    counts = verify.summary(rows)
    run = "quick run, on the problems it measured" if quick else "full run"
    print(f"\n{directory.name} ({run}): " + ", ".join(f"{n} {what}" for what, n in counts.items() if n))
    if not quick and (stale := verify.stale(directory)) and (directory / verify.EXPECTED).is_file():
        print("the recorded claims.json no longer matches these results:\n  " + "\n  ".join(stale), file=sys.stderr)
        return 1
    if counts[verify.FAILED]:
        print(f"convkit verify: {counts[verify.FAILED]} claims that held fall outside their tolerance on the same "
              "GPU model", file=sys.stderr)  # fmt: skip
        return 1
    if not same_gpu:
        print("another GPU than the record's: verdicts reported, not failed")
    return 0


def _cmd_profile(args: argparse.Namespace) -> int:
    from convkit.book import profile

    print(f"rows in {profile.profile(args.paper, Path(args.directory) if args.directory else None)}")
    return 0


def _on_node(args: argparse.Namespace, only: list[str] | None) -> Path | None:
    """Measure ``only`` (None: every chapter) on a node's GPUs or a cluster (convkit.book.node); the folder measured
    into, or None where it failed (said on stderr)."""
    from convkit.book.node import run_on_node

    try:
        return run_on_node(gpus=args.gpus, scheduler=args.scheduler, quick=args.quick, only=only,
                           directory=Path(args.directory) if args.directory else None,
                           times=getattr(args, "record_times", False))  # fmt: skip
    except (ImportError, ValueError, RuntimeError) as exc:
        print(f"convkit: {exc}", file=sys.stderr)
        return None


def _cmd_across(args: argparse.Namespace) -> int:
    """Every chapter's run-to-run sample on every GPU of a node or cluster; the spread across GPUs beside the
    recorded run-to-run spread."""
    from convkit.book import node
    from convkit.study.shards import DaskSharder, close, open_client

    try:
        client = open_client(gpus=args.gpus, scheduler=args.scheduler)
    except (ImportError, ValueError) as exc:
        print(f"convkit across: {exc}", file=sys.stderr)
        return 1
    try:
        sharder = DaskSharder(client)
        directory = node.results_folder(sharder, Path(args.directory) if args.directory else None)
        node.measure_across(sharder, directory, only=args.only.split(",") if args.only else None)
    finally:
        close(client)
    found = node.agreement(directory)
    print(found.to_string(index=False) if not found.empty else "no chapter sampled on two GPUs")
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from convkit.book.reproduce import NotebookFailure, mode_line, reproduce, selected

    recorded_gpu = None
    if args.gpus > 1 or args.scheduler or args.directory:  # measure first, sharded; the notebooks read it after
        folder = _on_node(args, only=[name for name, _ in selected(args.only)])
        if folder is None:
            return 1
        if args.directory:  # a scratch folder: timed, not shown (the notebooks read results/<gpu>/)
            return 0
        from convkit.book.chapter import resolve_device, results_directory

        if args.device == "recorded" or resolve_device(args.device) != "gpu" or results_directory("gpu") != folder:
            args.device, recorded_gpu = "recorded", folder.name  # show what the cluster recorded
    try:
        print(f"convkit: {mode_line(args.device)}", flush=True)
        reproduce(only=args.only, device=args.device, quick=args.quick, recorded_gpu=recorded_gpu,
                  record_times=args.record_times and args.device != "recorded")  # fmt: skip
    except (NotebookFailure, ValueError) as exc:
        print(f"convkit reproduce: {exc}", file=sys.stderr)
        return 1
    return 0


def _cmd_book(args: argparse.Namespace) -> int:
    import subprocess

    from convkit.book.reproduce import build_book

    status = _cmd_reproduce(args)
    if status:
        return status
    try:
        html = build_book(device=args.device)
    except subprocess.CalledProcessError as exc:
        print(f"convkit book: jupyter-book failed ({exc.returncode})", file=sys.stderr)
        return 1
    from convkit.book import chapter
    from convkit.book.reproduce import mode_line

    print(f"book: {html / 'index.html'}, {mode_line(args.device)}")
    if chapter.resolve_device(args.device) == "gpu":  # what this GPU measured, against the record
        return _verify_folder(chapter.results_directory("gpu"), quick=args.quick)
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    from convkit.book import chapter
    from convkit.study import shipping

    directory = chapter.results_directory("recorded", args.gpu or chapter.DEFAULT_RECORDED_GPU)
    if args.write_table:
        print(f"dispatch table in {shipping.write_shipped_table(directory, shipping_sources())}")
    pad: Any = args.pad if args.pad == "same" else int(args.pad)
    for label in args.labels:
        problem = ConvProblem.from_label(label, pad=pad, stride=args.stride)
        rows = shipping.explain(problem, directory, shipping_sources())
        print(f"\n{problem.label} pad={problem.pad} stride={problem.stride} on {directory.name}: "
              f"{len(rows)} recorded candidates, fastest first, as the shipped table ranks them")  # fmt: skip
        print(rows.to_string(index=False) if len(rows) else "  none recorded: convkit.conv2d tunes it on first use")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``convkit`` command."""
    parser = argparse.ArgumentParser(prog="convkit", description="A reproducible study of fast GPU convolution.")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("info", help="GPU, library versions, which cuDNN was found").set_defaults(func=_cmd_info)
    prebuild = sub.add_parser("prebuild", help="build every kernel this GPU's shipped table runs, once, in parallel")
    prebuild.add_argument("--workers", type=int, help="build processes (default: one per core, at most 16)")
    prebuild.set_defaults(func=lambda args: prebuilding.main(args.workers))

    bench = sub.add_parser("bench", help="every convkit kernel and every cuDNN algorithm on one problem")
    bench.add_argument("labels", nargs="*", help="cuConv labels input-batch-filter-filters-depth, e.g. 7-1-1-32-832")
    bench.add_argument("--pad", default="same", help="'same' (default) or an int")
    bench.add_argument("--stride", type=int, default=1)
    bench.add_argument("--suite", choices=_suites(), help="add a chapter's problems (baseline: the anchors)")
    bench.add_argument("--quick", action="store_true", help="with --suite: a small subset")
    bench.add_argument("--variants", help="comma-separated convkit variants (default: all)")
    bench.add_argument("--no-cudnn", action="store_true", help="skip the cuDNN algorithms")
    bench.add_argument("--flush-l2", action="store_true", help="cold L2 before every timed run")
    bench.add_argument("--csv", help="also record the rows (resumable) in this CSV, provenance beside it")
    bench.set_defaults(func=_cmd_bench)

    kernels = sub.add_parser("kernels", help="ptxas resource report of every kernel (needs nvcc, no GPU)")
    kernels.add_argument("--arch", action="append", help="e.g. sm_90 (repeatable; default sm_75 and sm_90)")
    kernels.set_defaults(func=_cmd_kernels)

    sweep = sub.add_parser("sweep", help="tune, then sweep a chapter's configurations (resumable)")
    sweep.add_argument("paper", choices=names())
    sweep.add_argument("--batches", help="comma-separated batch sizes, where a chapter sweeps several (cuconv)")
    sweep.add_argument("--quick", action="store_true", help="a small subset (seconds)")
    sweep.add_argument("--directory", help="results folder (default: results/<this GPU>)")
    sweep.add_argument("--build-workers", type=int, default=0, help="build its kernels first, N at once (0: as met)")
    _node_options(sweep)
    sweep.set_defaults(func=_cmd_sweep)

    repeat = sub.add_parser("repeat", help="a chapter's sample measured again in this process: the run-to-run spread")
    repeat.add_argument("paper", choices=names())
    repeat.add_argument("--directory", help="results folder (default: results/<this GPU>)")
    repeat.set_defaults(func=_cmd_repeat)

    across = sub.add_parser("across", help="each chapter's run-to-run sample on every GPU of a node: their spread")
    across.add_argument("--only", help="comma-separated chapters (default: every chapter that sweeps)")
    across.add_argument("--directory", help="results folder with the tuned launches (default: results/<the GPU>)")
    _node_options(across)
    across.set_defaults(func=_cmd_across, gpus=2)

    check = sub.add_parser("verify", help="every chapter's claims on a results folder, against the recorded ones")
    check.add_argument("directory", nargs="?", help="a results folder (default: the recorded GPU's)")
    check.add_argument("--quick", action="store_true", help="the folder's quick runs (default where it has no other)")
    check.add_argument("--record", action="store_true", help="write the folder's claims.json first (a recording run)")
    check.set_defaults(func=_cmd_verify)

    prof = sub.add_parser("profile", help="ncu kernel profile of a chapter's named cases")
    prof.add_argument("paper", choices=[p.name for p in PAPERS if p.profile is not None])
    prof.add_argument("--directory", help="results folder (default: results/<this GPU>)")
    prof.set_defaults(func=_cmd_profile)

    explain = sub.add_parser("explain", help="every recorded implementation of a problem, fastest first (no GPU)")
    explain.add_argument("labels", nargs="*", help="cuConv labels input-batch-filter-filters-depth")
    explain.add_argument("--pad", default="same", help="'same' (default) or an int")
    explain.add_argument("--stride", type=int, default=1)
    explain.add_argument("--gpu", help="a results/ folder (default: the recorded GPU)")
    explain.add_argument("--write-table", action="store_true", help="write that GPU's dispatch table into the package")
    explain.set_defaults(func=_cmd_explain)

    for name, func, text in (("reproduce", _cmd_reproduce, "execute the notebooks with papermill"),
                             ("book", _cmd_book, "reproduce, then build the book")):  # fmt: skip
        p = sub.add_parser(name, help=text)
        p.add_argument("--only", help="a notebook name or prefix, e.g. 00")
        p.add_argument("--device", choices=["auto", "gpu", "recorded"], default="auto",
                       help="measure on the GPU, read recorded results, or GPU if present (default)")  # fmt: skip
        p.add_argument("--quick", action="store_true", help="small sweeps (seconds)")
        p.add_argument("--record-times", action="store_true",
                       help="record each notebook's (and sharded, each chapter's) wall time in "
                            "results/<gpu>/notebook_runs.csv")  # fmt: skip
        _node_options(p)
        p.add_argument("--directory", help="measure into this folder and stop (timed runs: a scratch folder)")
        p.set_defaults(func=func)
    return parser


def _node_options(p: argparse.ArgumentParser) -> None:
    gpus_help = "measure on this node's first N GPUs first, through Dask (convkit[node]); 1: no cluster"
    p.add_argument("--gpus", type=int, default=1, help=gpus_help)
    p.add_argument("--scheduler", help="measure on the Dask cluster at this address (tcp://host:port)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``convkit`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
