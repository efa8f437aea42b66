"""The column-reuse exchange and the load counts of ``kernels/lu2020.cu``, on the CPU."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest

from convkit.families.lu2020.exchange import exchange_schedule, schedule_macros
from convkit.papers.lu2020.warp_sim import (
    METHODS,
    Schedule,
    Step,
    problem_loads,
    simulate_exchange,
    transactions_table,
    warp_loads,
)


def _pairs(k: int) -> tuple[tuple[int, int], ...]:
    return tuple((s.slot, s.mask) for s in exchange_schedule(k).steps)


def test_schedules_match_the_paper_and_the_search() -> None:
    assert exchange_schedule(1) == Schedule(1, (0,), ())
    assert exchange_schedule(3).loads == (0, 2) and _pairs(3) == ((1, 1),)
    assert exchange_schedule(5).loads == (0, 4) and _pairs(5) == ((2, 2), (1, 1), (3, 1))  # Figure 3
    assert exchange_schedule(7).loads == (0, 2, 6) and _pairs(7) == ((1, 1), (4, 2), (3, 1), (5, 1))
    assert exchange_schedule(9).loads == (0, 8) and len(_pairs(9)) == 7


def test_step_sends_low_where_the_bit_is_set() -> None:
    step = Step(2, 2)
    assert (step.low, step.high) == (0, 4)


@pytest.mark.parametrize("k", [0, 2, 4, -1])
def test_even_or_small_k_is_refused(k: int) -> None:
    with pytest.raises(ValueError, match="k"):
        exchange_schedule(k)


@pytest.mark.parametrize("k", [1, 3, 5, 7, 9])
def test_every_lane_ends_with_its_window(k: int) -> None:
    trace = simulate_exchange(k, lanes=32)
    lane = np.arange(32)
    assert np.array_equal(trace.held, lane[:, None] + np.arange(k)[None, :])
    assert trace.loads + trace.shuffles == k
    for step in trace.steps:
        bit_set = (lane & step.step.mask) != 0
        assert np.array_equal(step.sent, np.where(bit_set, step.step.low, step.step.high))
        assert np.array_equal(step.received, lane + step.step.slot)


def test_a_wrong_schedule_is_caught() -> None:
    early = Schedule(5, (0, 4), (Step(1, 1), Step(2, 2), Step(3, 1)))  # slot 2 used before it is held
    with pytest.raises(ValueError, match="does not hold"):
        simulate_exchange(5, schedule=early)
    short = Schedule(5, (0, 4), (Step(2, 2), Step(1, 1)))  # slot 3 never filled
    with pytest.raises(ValueError, match="slot 3"):
        simulate_exchange(5, schedule=short)


def test_the_papers_counts_for_k5() -> None:
    assert warp_loads(5, "direct").requests == 25 and warp_loads(5, "column").requests == 10
    table = transactions_table(rows=8).set_index(["k", "method"])
    five = table.loc[5]
    assert five.loc["direct", "loads_per_row"] == 5 == five.loc["direct", "paper_per_row"]
    assert five.loc["column", "loads_per_row"] == 2 == five.loc["column", "paper_per_row"]
    assert five.loc["direct", "loads_per_window"] == 25 == five.loc["direct", "paper"]
    assert five.loc["column", "loads_per_window"] == 10 == five.loc["column", "paper"]
    assert math.isnan(table.loc[(3, "direct"), "paper"])


def test_table_for_3_and_7() -> None:
    table = transactions_table(ks=(3, 7), rows=8).set_index(["k", "method"])
    assert list(table.loc[3, "loads_per_window"]) == [9, 6, 6, (8 + 2) * 3 / 8, (8 + 2) * 2 / 8]
    assert list(table.loc[7, "loads_per_window"]) == [49, 21, 21, (8 + 6) * 7 / 8, (8 + 6) * 3 / 8]
    assert list(table.loc[7, "shuffles_per_row"]) == [0, 4, 4, 0, 4]
    assert table.loc[(7, "direct"), "loads_per_output"] == 49 / 32


def test_macros_for_k5() -> None:
    assert schedule_macros(exchange_schedule(5)) == (
        "-DLU_K=5",
        "-DLU_NLOADS=2",
        "-DLU_LOADS=0,4",
        "-DLU_NSTEPS=3",
        "-DLU_STEPS=2,2,1,1,3,1",
    )
    assert schedule_macros(exchange_schedule(1))[-2:] == ("-DLU_NSTEPS=0", "-DLU_STEPS=0,0")


def test_interior_warp_sectors_by_hand() -> None:
    # 32 floats from element offset o: sectors o//8 .. (o+31)//8. Offset 0: 0..3 (4); offset 2: 0..4 (5).
    direct = warp_loads(5, "direct", width_offset=0)
    assert (direct.requests, direct.outputs) == (25, 32)
    assert direct.sectors == 5 * (4 + 5 + 5 + 5 + 5)  # window offsets 0..4: only s = 0 is aligned
    shifted = warp_loads(5, "direct", width_offset=2)
    assert shifted.sectors == 5 * (5 * 5)  # starts 2..6: none aligned
    column = warp_loads(5, "column", width_offset=4)
    assert column.sectors == 5 * (5 + 4)  # starts 4 and 8
    row = warp_loads(5, "row", rows=8)
    assert (row.requests, row.outputs, row.rows) == (12 * 5, 256, 8)


def _brute_force(h: int, w: int, k: int, pad: int, method: str, rows: int) -> tuple[int, int, int, int]:
    """Every warp, every row, every offset, every lane, as the kernel runs it."""
    t_rows = 1 if method in ("direct", "column_naive", "column") else rows
    p, q = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    offsets = exchange_schedule(k).loads if method in ("column_naive", "column", "combined") else range(k)
    requests = sectors = filters = warps = 0
    for q0 in range(0, q, 32):
        for p0 in range(0, p, t_rows):
            warps += 1
            filters += k * k
            for i in range(k if t_rows == 1 else t_rows + k - 1):
                row = p0 - pad + i
                if not 0 <= row < h:
                    continue
                for s in offsets:
                    touched = set()
                    for lane in range(32):
                        col = q0 - pad + lane + s
                        if 0 <= col < w:
                            touched.add((row * w + col) * 4 // 32)
                    if touched:
                        requests += 1
                        sectors += len(touched)
    return requests + filters, sectors + filters, filters, warps


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("rows", [1, 3])
# (7, 33, 3, 1): the last warp's loads at s = 2 have no active lane (no request).
@pytest.mark.parametrize(
    ("h", "w", "k", "pad"), [(37, 45, 5, 2), (37, 45, 3, 0), (9, 70, 7, 3), (5, 33, 5, 4), (7, 33, 3, 1)]
)
def test_problem_loads_match_a_brute_force_count(h: int, w: int, k: int, pad: int, method: str, rows: int) -> None:
    got = problem_loads(h, w, k, pad, method, rows=rows)
    assert (got.requests, got.sectors, got.filter_requests, got.warps) == _brute_force(h, w, k, pad, method, rows)
    assert got.outputs == (h + 2 * pad - k + 1) * (w + 2 * pad - k + 1)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="method"):
        warp_loads(5, "tiled")
    with pytest.raises(ValueError, match="rows"):
        problem_loads(10, 10, 3, 1, "row", rows=0)
    with pytest.raises(ValueError, match="lanes"):
        simulate_exchange(9, lanes=4)


def test_exchange_diagram_draws() -> None:
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from convkit.papers.lu2020.figures import exchange_diagram

    ax = exchange_diagram(simulate_exchange(5), lanes=8)
    assert ax.patches and any("xor 2" in text.get_text() for text in ax.texts)
    plt.close(ax.figure)
