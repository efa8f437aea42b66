"""A patched network's first forward, each in a process of its own (``<experiment>_cold.csv``): with nothing built
(``first_forward_cold``: CuPy's kernel cache emptied here), and after ``convkit prebuild`` (``first_forward_prebuilt``,
with the prebuild step's one-time cost as a ``prebuild`` row), convkit's user cache empty in both.

``python -m convkit.papers.summary.first_forward --cold LABEL`` times the first kind;
``--prebuild`` times ``convkit prebuild`` into CuPy's kernel cache (``CUPY_CACHE_DIR``, empty before: the caller makes
it so) and ``LABEL...`` then times the second kind, each in a fresh process reading that cache, with the seconds
``patch`` took beside it; ``--pytorch LABEL...`` times the unpatched network's first forward the same way
(``first_forward_pytorch``: PyTorch's own one-time costs, cuDNN's autotuning included, beside convkit's);
``--import`` times ``import convkit`` in fresh processes (an ``import`` row); ``--forget``
drops the prebuild, prebuilt and import rows, to measure them again whole. On a GPU with no shipped table the
prebuild and prebuilt variants end in :data:`NO_TABLE`.
"""

from __future__ import annotations

import time
from pathlib import Path

from convkit.papers.summary.inference import (
    COLD,
    COLUMNS,
    EXPERIMENT,
    IMAGE,
    KEY_COLUMNS,
    network_model,
    pytorch_as_measured,
)
from convkit.papers.summary.modes import first_forward_seconds
from convkit.study.results import ResultStore

COLD_VARIANT, PREBUILD, PREBUILT = "first_forward_cold", "prebuild", "first_forward_prebuilt"
#: The unpatched network's first forward in a fresh process (impl ``pytorch``).
PYTORCH_FIRST = "first_forward_pytorch"
#: The ``import convkit`` row: its seconds in a fresh process that has imported PyTorch (the median of
#: :data:`IMPORT_REPEATS` such processes).
IMPORT, IMPORT_REPEATS = "import", 3
_IMPORT_CODE = ("import time, torch; start = time.perf_counter(); import convkit; "
                "print(time.perf_counter() - start)")  # fmt: skip
#: The suffix of both variants on a GPU the package ships no table for (simulated on one it does by shipping its
#: table under another GPU's name: the prebuild then builds what the first-use tuner times, and every layer tunes).
NO_TABLE = "_no_table"


def _table_suffix() -> str:
    """:data:`NO_TABLE` where this GPU has no shipped table, else nothing."""
    from convkit.core.shipped import shipped
    from convkit.op.interop import gpu_name

    return "" if shipped(gpu_name()) else NO_TABLE


def _store(directory: Path | None) -> ResultStore:
    from convkit.study import provenance
    from convkit.study.results import gpu_results_dir

    return ResultStore.open(gpu_results_dir(directory), EXPERIMENT + COLD, provenance.collect(), columns=COLUMNS,
                            key_columns=KEY_COLUMNS)  # fmt: skip


def measure_prebuild(directory: Path | None = None) -> None:
    """Record ``convkit prebuild``'s wall time (a ``prebuild`` row; its builds and processes in the note)."""
    from convkit.op.prebuild import prebuild

    store, variant = _store(directory), PREBUILD + _table_suffix()
    if ("prebuild", "convkit", variant) in store.done_keys():
        return
    done = prebuild()
    store.append({"label": "prebuild", "network": "every shipped choice", "batch": "", "impl": "convkit",
                  "variant": variant, "status": "ok", "first_forward_s": f"{done['seconds']:.3f}",
                  "note": f"{done['builds']} kernels built by {done['workers']} processes"})  # fmt: skip


def measure_import(directory: Path | None = None) -> None:
    """Record what ``import convkit`` costs a fresh process that has imported PyTorch (an ``import`` row): the
    median of :data:`IMPORT_REPEATS` processes, each timing its own import."""
    import statistics
    import subprocess
    import sys

    store = _store(directory)
    if (IMPORT, "convkit", IMPORT) in store.done_keys():
        return
    runs = [float(subprocess.run([sys.executable, "-c", _IMPORT_CODE], capture_output=True, text=True,
                                 check=True).stdout.split()[-1]) for _ in range(IMPORT_REPEATS)]  # fmt: skip
    store.append({"label": IMPORT, "network": "convkit, after PyTorch", "impl": "convkit", "variant": IMPORT,
                  "status": "ok", "first_forward_s": f"{statistics.median(runs):.3f}",
                  "note": f"median of {IMPORT_REPEATS} fresh processes"})  # fmt: skip


def measure_first_forward(
    label: str, directory: Path | None = None, *, cold: bool = False, pytorch: bool = False
) -> None:
    """Record the first forward of the patched network of ``label`` in this fresh process, convkit's user cache
    empty: with ``cold``, CuPy's kernel cache empty too (nothing built: run it in a process that has built nothing,
    as CuPy keeps what it built in memory too), else reading the kernels ``convkit prebuild`` built (CuPy's cache as
    the environment names it); with ``pytorch``, the network unpatched (what PyTorch's own first forward costs)."""
    import os
    import tempfile

    import torch

    from convkit.op.patch import patch

    store = _store(directory)
    impl, variant = (
        ("pytorch", PYTORCH_FIRST) if pytorch else ("convkit", COLD_VARIANT if cold else PREBUILT + _table_suffix())
    )
    if (label, impl, variant) in store.done_keys():
        return
    pytorch_as_measured()
    network, batch = label.rsplit("-", 1)
    with torch.no_grad(), tempfile.TemporaryDirectory() as empty:
        if cold:
            os.environ["CUPY_CACHE_DIR"] = empty  # read by CuPy at each build
        model = network_model(network)
        layers = sum(type(m) is torch.nn.Conv2d for m in model.modules())
        start = time.perf_counter()
        if not pytorch:
            patch(model)
        patched = time.perf_counter() - start
        x = torch.randn(int(batch), 3, IMAGE, IMAGE, device="cuda")
        seconds = first_forward_seconds(model, x)
    store.append({"label": label, "network": network, "batch": batch, "impl": impl, "variant": variant,
                  "status": "ok", "conv_layers": layers, "first_forward_s": f"{seconds:.3f}",
                  "note": "" if cold or pytorch else f"patch {patched:.3f} s"})  # fmt: skip


def forget(directory: Path | None = None) -> int:
    """Drop the recorded prebuild, prebuilt, PyTorch and import rows (to measure them again whole, after the shipped
    table or the kernels changed); the rows dropped."""
    dropped = (PREBUILD, PREBUILT, PYTORCH_FIRST, IMPORT)
    return _store(directory).drop(lambda row: row["variant"].removesuffix(NO_TABLE) in dropped)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--forget"]:
        print(f"dropped {forget()} rows")
    elif sys.argv[1:] == ["--prebuild"]:
        measure_prebuild()
    elif sys.argv[1:] == ["--import"]:
        measure_import()
    elif sys.argv[1:2] == ["--pytorch"]:
        for name in sys.argv[2:]:
            measure_first_forward(name, pytorch=True)
    elif sys.argv[1:2] == ["--cold"] and len(sys.argv) == 3:
        measure_first_forward(sys.argv[2], cold=True)
    else:
        for name in sys.argv[1:]:
            measure_first_forward(name)
