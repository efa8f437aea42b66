"""Adding a kernel family, as the README's recipe says, followed on the CPU: the baseline's direct kernel declared
again, from scratch, as a family of its own (``toy_direct``), then shipped to ``convkit.conv2d`` without a chapter,
from a recorded sweep of its variant. What it touched is the recipe's count: its declaration (a folder, here this
test), one line in ``convkit/families/__init__.py`` (here a monkeypatch), and a recorded sweep."""

from __future__ import annotations

from typing import Any

from convkit.bench.rows import make_row
from convkit.core.problem import ConvProblem
from convkit.op import dispatch
from convkit.op.cases import Case, variant_case
from convkit.study import shipping
from convkit.study.results import ResultStore

PROBLEM = ConvProblem.same(1, 8, 14, 14, 16, 3)


def _declared_from_scratch() -> Any:
    """Step 1, the family's folder: its variants (their runner, default launch and the words the book names them by),
    its kernels' source under ``kernels/`` (here the baseline's ``direct.cu``, reused)."""
    from convkit.cuda.operands import ConvArgs
    from convkit.families.baseline.launch import DirectLaunch, conv2d_direct
    from convkit.families.registry import Family, Variant

    def run(a: ConvArgs, p: ConvProblem, launch: DirectLaunch) -> None:
        conv2d_direct(a.x, a.w, pad=p.pad, stride=p.stride, out=a.out, launch=launch)

    variant = Variant("toy_direct", run, default=lambda p: DirectLaunch(128), launch_from=DirectLaunch.from_params)
    return Family("toy_direct", (variant,), sources=("direct",), words={"toy_direct": "direct, declared again"})


def test_a_family_declared_from_scratch_reaches_the_op_through_a_recorded_sweep_without_a_chapter(
    monkeypatch, tmp_path
):
    from convkit import families

    toy = _declared_from_scratch()
    monkeypatch.setattr(families, "FAMILIES", (*families.FAMILIES, toy))  # step 2: its line in the registry
    families.variants_by_name.cache_clear()
    try:
        # step 3: a recorded sweep of its variants, rows as any sweep writes them (here two, hand-timed)
        store = ResultStore.open(tmp_path, "toy_direct", {"gpu": "fake"})
        timing = {"time_ms_median": "0.001", "time_ms_min": "0.001", "time_ms_max": "0.001", "reps": 10}
        store.append(make_row(PROBLEM, variant_case(toy.variants[0], PROBLEM), status="ok") | timing)
        slower = timing | {"time_ms_median": "0.002"}
        store.append(make_row(PROBLEM, Case("cudnn", "GEMM"), status="ok") | slower)

        # the shipped table written from that sweep alone: no chapter names it
        table = shipping.table_from_results(tmp_path, shipping.Sources(sweeps={"toy_direct": "toy_direct"}))
        choice = table[PROBLEM.key]
        assert (choice.impl, choice.variant, choice.paper, choice.params) == (
            "convkit", "toy_direct", "toy_direct", '{"threads":128}')  # fmt: skip

        # convkit.conv2d's lookup finds it, and the op knows its variant by name
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        dispatch.write_table(dispatch.cache_path("a-gpu"), "a-gpu", table)
        assert dispatch.lookup(PROBLEM, "a-gpu") == choice
        assert families.variants_by_name()["toy_direct"] is toy.variants[0]
        assert families.owner("toy_direct") == "toy_direct"
    finally:
        families.variants_by_name.cache_clear()
