"""The five networks' layers and the paper's Table 1 (CPU)."""

from __future__ import annotations

import pytest

from convkit.study import networks as nw


@pytest.mark.parametrize("network", ["GoogLeNet", "SqueezeNet", "AlexNet", "VGG19"])
def test_table1_counts_and_shares_match_the_paper(network):
    configs = nw.distinct_configurations(network)
    paper = nw.PAPER_TABLE1[network]
    assert len(configs) == paper["configurations"]
    shares = {f: 100 * sum(c.filter == f for c in configs) / len(configs) for f in {c.filter for c in configs}}
    assert shares.keys() == paper["filters"].keys()
    for f, pct in shares.items():
        assert pct == pytest.approx(paper["filters"][f], abs=0.1)


def test_resnet50_difference_is_the_documented_one():
    configs = nw.distinct_configurations("ResNet-50")
    assert len(configs) == 13 and sum(c.filter == 1 for c in configs) == 9
    notes = nw.table1_differences()
    assert len(notes) == 2 and all(n.startswith("ResNet-50") for n in notes)
    assert "7x7x512" in notes[1] and "7x7x1024" in notes[1]


def test_last_layer_inputs():
    table = nw.table1()
    assert list(table.columns) == list(nw.NETWORKS)
    measured = table.loc["input to the last conv layer"].to_dict()
    assert measured == {"GoogLeNet": "7x7x832", "SqueezeNet": "13x13x512", "AlexNet": "13x13x384",
                        "ResNet-50": "7x7x512", "VGG19": "14x14x512"}  # fmt: skip


def test_strided_layers_are_listed_but_not_counted():
    assert any(layer.stride == 4 for layer in nw.LAYERS if layer.network == "AlexNet")
    assert all(layer.stride == 1 for net in nw.NETWORKS for layer in nw.stride1_layers(net))
    assert not any(layer.name.endswith("pool_proj") for layer in nw.stride1_layers("GoogLeNet"))


def test_the_papers_named_configurations_are_present():
    labels = {p.label for p in nw.problems(batch_sizes=(1, 8))}
    for label in ["7-1-1-32-832", "7-1-1-256-832", "14-1-1-1024-256", "27-1-1-256-64", "7-1-3-384-192",
                  "13-1-3-384-384", "7-1-5-128-48", "7-8-5-128-48", "7-1-1-384-832"]:  # fmt: skip
        assert label in labels, label
    shared = [c for c in nw.configurations() if c.label == "7-32-832"]
    assert shared and shared[0].layers == ("GoogLeNet:inception_5a/5x5_reduce",)


def test_problems_are_distinct_and_over_600():
    problems = nw.problems()
    assert len(problems) == len(set(problems)) == 88 * 7 == 616
    assert all(p.stride == 1 and p.pad == (p.r - 1) // 2 for p in problems)
    assert [p.r for p in problems] == sorted(p.r for p in problems)


def test_unknown_network():
    with pytest.raises(ValueError, match="network must be one of"):
        nw.stride1_layers("LeNet")
