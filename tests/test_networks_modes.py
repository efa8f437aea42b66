"""The networks' measurement without a GPU: which labels run in which modes, and how an interrupted or older run
resumes (a label lacking a mode is measured again whole, both networks in one run)."""

from __future__ import annotations

import pytest

from convkit.papers.summary import inference


def test_the_study_networks_run_eagerly_and_every_network_in_every_mode():
    labels = inference.labels()
    assert len(labels) == len(set(labels))
    assert {label.rsplit("-", 1)[0] for label in labels} == set(inference.NETWORKS)
    assert inference.variants_of("VGG19-256") == ("gpu", "wall")
    assert inference.variants_of("DenseNet-121-16") == inference.MODES
    assert all(f"{network}-{batch}" in labels for network in inference.NETWORKS for batch in inference.MODE_BATCHES)


def test_a_label_lacking_a_mode_is_measured_again_whole(monkeypatch, tmp_path):
    measured = []

    def fake(network, batch):
        label = f"{network}-{batch}"
        measured.append(label)
        for impl in inference.IMPLS:
            for variant in inference.variants_of(label):
                yield {"label": label, "network": network, "batch": batch, "impl": impl, "variant": variant,
                       "status": "ok"}  # fmt: skip

    monkeypatch.setattr(inference, "measure_network", fake)
    monkeypatch.setattr("convkit.study.provenance.collect", lambda: {"gpu": "test"})
    only = ["ResNet-50-1", "ResNet-50-8"]
    inference.measure(tmp_path, only=only, progress=None)
    assert measured == only
    from convkit.study.results import ResultStore

    store = ResultStore.open(tmp_path, inference.EXPERIMENT, {"gpu": "test"}, columns=inference.COLUMNS,
                             key_columns=inference.KEY_COLUMNS)  # fmt: skip
    # an older run's eager rows alone for batch 1: that label is measured again, its old rows dropped
    store.drop(lambda row: row["label"] == "ResNet-50-1" and row["variant"] not in inference.VARIANTS)
    measured.clear()
    inference.measure(tmp_path, only=only, progress=None)
    assert measured == ["ResNet-50-1"]
    rows = [r for r in store.rows() if r["label"] == "ResNet-50-1"]
    assert len(rows) == 2 * len(inference.MODES)


def test_the_modes_table_reads_each_mode_of_a_pair(tmp_path):
    from convkit.papers.summary import networks_tables as nets
    from convkit.study.results import ResultStore

    store = ResultStore.open(tmp_path, inference.EXPERIMENT, {"gpu": "test"}, columns=inference.COLUMNS,
                             key_columns=inference.KEY_COLUMNS)  # fmt: skip
    times = {"gpu": 2.0, "wall": 3.0, "compile_wall": 2.5, "graph_wall": 1.0, "graph_gpu": 0.9}
    for impl, scale in (("pytorch", 1.0), ("convkit", 0.5)):
        for variant, ms in times.items():
            extra = {"graph_breaks": 0} if variant == "compile_wall" else {}
            if impl == "convkit" and variant == "wall":
                extra = {"first_forward_s": "1.2"}
            store.append({"label": "ResNet-26d-1", "network": "ResNet-26d", "batch": 1, "impl": impl,
                          "variant": variant, "status": "ok", "time_ms_median": ms * scale, "conv_layers": 30,
                          **extra})  # fmt: skip
    table = nets.modes_table(tmp_path)
    assert list(table["network"]) == ["ResNet-26d"]
    row = table.iloc[0]
    assert row["eager speed-up"] == row["torch.compile speed-up"] == row["CUDA graph speed-up"] == 2.0
    assert row["graph breaks (patched / PyTorch)"] == "0 / 0" and row["first forward (ms a layer)"] == 40.0
    assert nets.modes_table(tmp_path / "none").empty
    wide = nets.modes_by_batch(table)
    assert list(wide.columns) == [(1, "eager"), (1, "torch.compile"), (1, "CUDA graph")]
    lines = nets.mode_lines(table, nets.cold_first_forward(tmp_path))
    assert "2.00x to 2.00x faster than PyTorch" in lines[0] and "without a graph break" in lines[1]
    assert "median 40 ms" in lines[2]


def test_the_recorded_modes_agree_with_their_result_lines():
    """The recorded H100 run: the lines the chapter opens with give the numbers its tables show."""
    from convkit.papers.summary import chapter
    from convkit.papers.summary import networks_tables as nets
    from convkit.study.checkout import results_dir

    directory = results_dir() / "nvidia-h100-80gb-hbm3"
    table = nets.modes_table(directory)
    assert len(table) == len(inference.NETWORKS) * len(inference.MODE_BATCHES)
    cold = nets.cold_first_forward(directory)
    lines = nets.mode_lines(table, cold, chapter.spreads(directory))
    graph = table["CUDA graph speed-up"]
    assert nets.speedup_span(graph) in lines[0]
    nothing, ahead = cold[cold["kind"] == "nothing built"], cold[cold["kind"] == "built ahead"]
    assert f"up to {nothing['seconds'].max():.1f} s" in lines[2]
    built = next(line for line in lines if line.startswith("**Kernels built ahead**"))
    assert f"median {ahead['ms a layer'].median():.0f} ms a convolution layer over {len(ahead)} " in built
    assert f"{cold.attrs['prebuild']['built ahead']['seconds']:.0f} s once" in built


def test_unrecorded_labels_are_those_lacking_any_row(tmp_path):
    from convkit.study.results import ResultStore

    labels = ["AlexNet-1", "AlexNet-16", "VGG19-256"]
    assert inference.unrecorded(tmp_path, labels) == labels  # no file yet
    store = ResultStore.open(tmp_path, inference.EXPERIMENT, {"gpu": "test"}, columns=inference.COLUMNS,
                             key_columns=inference.KEY_COLUMNS)  # fmt: skip
    for impl in inference.IMPLS:
        for variant in inference.variants_of("AlexNet-1"):
            store.append({"label": "AlexNet-1", "impl": impl, "variant": variant, "status": "ok"})
        store.append({"label": "VGG19-256", "impl": impl, "variant": "gpu", "status": "ok"})  # no wall rows
    assert inference.unrecorded(tmp_path, labels) == ["AlexNet-16", "VGG19-256"]


def test_the_networks_measured_in_parts_on_several_gpus_join_into_one_recording(monkeypatch, tmp_path):
    """``--part K N``: each GPU of a node measures every N-th label into a folder of its own; ``--absorb`` moves the
    parts' rows into the results folder, every label once, each part's provenance kept."""
    import json

    from convkit.study.results import ResultStore, absorb

    def fake(network, batch):
        for impl in inference.IMPLS:
            for variant in inference.variants_of(f"{network}-{batch}"):
                yield {"label": f"{network}-{batch}", "network": network, "batch": batch, "impl": impl,
                       "variant": variant, "status": "ok"}  # fmt: skip

    monkeypatch.setattr(inference, "measure_network", fake)
    every, layout = inference.labels(), {"columns": inference.COLUMNS, "key_columns": inference.KEY_COLUMNS}
    for part in range(3):
        monkeypatch.setattr("convkit.study.provenance.collect", lambda part=part: {"gpu_index": str(part)})
        inference.measure(tmp_path / f"part{part}", only=every[part::3], progress=None)
    main = tmp_path / "main"
    moved = sum(absorb(main, inference.EXPERIMENT, tmp_path / f"part{p}", **layout) for p in range(3))
    rows = ResultStore.open(main, inference.EXPERIMENT, **layout).rows()
    assert moved == len(rows) == sum(len(inference.IMPLS) * len(inference.variants_of(label)) for label in every)
    assert inference.unrecorded(main, every) == []
    runs = json.loads((main / f"{inference.EXPERIMENT}.json").read_text())["runs"]
    assert sorted(run["gpu_index"] for run in runs.values()) == ["0", "1", "2"]


def test_the_built_ahead_line_gives_the_import_and_patch_costs_beside_the_first_forward(monkeypatch, tmp_path):
    """``import convkit`` timed in fresh processes (its median recorded as an ``import`` row) and the seconds
    ``patch`` took (each prebuilt row's note) stand in the result box beside the first forward they precede."""
    import subprocess

    from convkit.papers.summary import first_forward
    from convkit.papers.summary import networks_tables as nets
    from convkit.study.results import ResultStore

    timings = iter(["0.30\n", "0.10\n", "0.20\n"])
    monkeypatch.setattr("convkit.study.provenance.collect", lambda: {"gpu": "test"})
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, next(timings), ""))
    first_forward.measure_import(tmp_path)
    first_forward.measure_import(tmp_path)  # recorded once: nothing timed again
    store = ResultStore.open(tmp_path, inference.EXPERIMENT + inference.COLD, {"gpu": "test"},
                             columns=inference.COLUMNS, key_columns=inference.KEY_COLUMNS)  # fmt: skip
    for label, patch_s in (("ResNet-50-1", "0.003"), ("AlexNet-1", "0.012")):
        store.append({"label": label, "network": label.rsplit("-", 1)[0], "batch": 1, "impl": "convkit",
                      "variant": first_forward.PREBUILT, "status": "ok", "conv_layers": 50, "first_forward_s": "0.5",
                      "note": f"patch {patch_s} s"})  # fmt: skip
    cold = nets.cold_first_forward(tmp_path)
    assert list(cold["kind"]) == ["built ahead", "built ahead"]  # the import row is no first forward
    assert cold.attrs["import seconds"] == 0.2 and cold.attrs["patch seconds"] == 0.012
    modes = nets.modes_table(tmp_path / "none")
    assert nets.mode_lines(modes, cold) == []  # no modes recorded: no lines
    line = nets.mode_lines(_one_mode_table(tmp_path / "modes"), cold)[-1]
    assert "importing convkit (after PyTorch) took 0.20 s and patching the network at most 12 ms" in line
    assert "unpatched" not in line  # no PyTorch first forward recorded: nothing said of one
    store.append({"label": "AlexNet-1", "network": "AlexNet", "batch": 1, "impl": "pytorch",
                  "variant": first_forward.PYTORCH_FIRST, "status": "ok", "conv_layers": 50,
                  "first_forward_s": "0.4"})  # fmt: skip
    cold = nets.cold_first_forward(tmp_path)
    assert list(cold["kind"]) == ["built ahead", "built ahead", "PyTorch alone"]
    line = nets.mode_lines(_one_mode_table(tmp_path / "modes"), cold)[-1]
    assert "unpatched, each in a fresh process, took a median 8 ms a layer" in line  # AlexNet's pair alone
    assert "the patched ones took a median 2 ms a layer more" in line


@pytest.mark.filterwarnings("error")
def test_first_forwards_recorded_without_any_note_are_read(tmp_path):
    """A first-forward file whose rows have no note at all (its column read as floats) is read, no patch time in it,
    and pandas is not asked to fill that column with text (which it warns will raise)."""
    from convkit.papers.summary import first_forward
    from convkit.papers.summary import networks_tables as nets
    from convkit.study.results import ResultStore

    store = ResultStore.open(tmp_path, inference.EXPERIMENT + inference.COLD, {"gpu": "test"},
                             columns=inference.COLUMNS, key_columns=inference.KEY_COLUMNS)  # fmt: skip
    store.append({"label": "AlexNet-1", "network": "AlexNet", "batch": 1, "impl": "convkit", "status": "ok",
                  "variant": first_forward.PREBUILT, "conv_layers": 5, "first_forward_s": "0.5"})  # fmt: skip
    cold = nets.cold_first_forward(tmp_path)
    assert list(cold["kind"]) == ["built ahead"] and cold.attrs["patch seconds"] is None


def _one_mode_table(directory):
    from convkit.papers.summary import networks_tables as nets
    from convkit.study.results import ResultStore

    store = ResultStore.open(directory, inference.EXPERIMENT, {"gpu": "test"}, columns=inference.COLUMNS,
                             key_columns=inference.KEY_COLUMNS)  # fmt: skip
    for impl in inference.IMPLS:
        for variant in inference.MODES:
            extra = {"first_forward_s": "1.0"} if (impl, variant) == ("convkit", "wall") else {}
            store.append(
                {
                    "label": "AlexNet-1",
                    "network": "AlexNet",
                    "batch": 1,
                    "impl": impl,
                    "variant": variant,
                    "status": "ok",
                    "time_ms_median": 1.0,
                    "conv_layers": 5,
                    "graph_breaks": 0,
                    **extra,
                }
            )
    return nets.modes_table(directory)
