"""The convolution layers of the five CNNs the cuConv paper evaluates (its Table 1), as data.

Every convolution layer is listed with its name, input size (H = W), filter size, number of
filters, depth and stride; the study keeps the stride-1 layers, as the paper does ("all the
configurations implement a stride of 1 element" with "same" padding). A *configuration* is
(input size, filter size, filters, depth); batch size is set by the sweep.

Variants and counting rules, and how they meet the paper's Table 1:

- **GoogLeNet**: Inception v1 as in Caffe's ``bvlc_googlenet``. Counting every stride-1 layer gives
  48 configurations; the paper's 42, and its 57.2 / 23.8 / 19.0 % split (24 / 10 / 8), are met
  exactly when the six distinct ``pool_proj`` configurations (the 1x1 after each inception
  module's max-pool) are left out, which is the rule used here. The auxiliary classifiers'
  convolutions are not counted (they exist in training only).
- **SqueezeNet**: v1.0 (v1.1 gives 17): 21 configurations, 71.4 % 1x1, 28.6 % 3x3, as the paper.
- **AlexNet**: conv2..conv5 (conv1 has stride 4), with the single-tower depths of Krizhevsky et
  al. (96, 256, 384, 384; Caffe's grouped version halves conv2, conv4 and conv5): 4
  configurations, 75 % 3x3, 25 % 5x5, as the paper.
- **ResNet-50**: v1 (the stride of each stage's first block in its first 1x1, as in He et al.'s
  Caffe model). It gives 13 configurations (9 1x1, 4 3x3) where the paper has 12 (8 and 4), and
  the last convolution's input is 7x7x512 where the paper writes 7x7x1024. No published variant
  matches both (v1.5, with the stride in the 3x3, gives 16); :func:`table1_differences` says so
  and the chapter shows both tables.
- **VGG19**: configuration E of Simonyan and Zisserman: 9 configurations, all 3x3, as the paper.

Across networks the distinct configurations number 88 (GoogLeNet's conv2/3x3_reduce and ResNet-50's
res2a_branch2a are the same 56-64-64 1x1); times the paper's seven batch sizes that is 616
problems, the paper's "more than 600".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from convkit.core.problem import ConvProblem

#: The paper's batch sizes (section 4).
BATCH_SIZES = (1, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Layer:
    """One convolution layer: input size (H = W), filter size (R = S), filters, depth, stride."""

    network: str
    name: str
    size: int
    filter: int
    filters: int
    depth: int
    stride: int = 1


@dataclass(frozen=True)
class Config:
    """A distinct stride-1 configuration of a network and the layers that share it."""

    size: int
    filter: int
    filters: int
    depth: int
    layers: tuple[str, ...] = field(default=(), compare=False)

    def problem(self, batch: int = 1) -> ConvProblem:
        """The configuration at a batch size, "same" padding, stride 1."""
        return ConvProblem.same(batch, self.depth, self.size, self.size, self.filters, self.filter)

    @property
    def label(self) -> str:
        """The paper's figure label: ``[input]-[filters]-[depth]``."""
        return f"{self.size}-{self.filters}-{self.depth}"


def _inception(name: str, size: int, depth: int, b1: int, r3: int, b3: int, r5: int, b5: int, pool: int) -> list:
    return [
        (f"{name}/1x1", size, 1, b1, depth),
        (f"{name}/3x3_reduce", size, 1, r3, depth),
        (f"{name}/3x3", size, 3, b3, r3),
        (f"{name}/5x5_reduce", size, 1, r5, depth),
        (f"{name}/5x5", size, 5, b5, r5),
        (f"{name}/pool_proj", size, 1, pool, depth),
    ]


def _fire(name: str, size: int, depth: int, squeeze: int, expand: int) -> list:
    return [
        (f"{name}/squeeze1x1", size, 1, squeeze, depth),
        (f"{name}/expand1x1", size, 1, expand, squeeze),
        (f"{name}/expand3x3", size, 3, expand, squeeze),
    ]


def _bottleneck_stage(stage: int, size: int, depth_in: int, width: int, blocks: int, stride: int) -> list:
    """ResNet v1 stage: the first block's 1x1 (and projection) carries the stride."""
    out = 4 * width
    rows = []
    for b in range(blocks):
        name = f"res{stage}{'abcdef'[b]}"
        first = b == 0
        in_size = size * stride if first else size
        rows += [
            (f"{name}_branch2a", in_size, 1, width, depth_in if first else out, stride if first else 1),
            (f"{name}_branch2b", size, 3, width, width),
            (f"{name}_branch2c", size, 1, out, width),
        ]
        if first:
            rows.append((f"{name}_branch1", in_size, 1, out, depth_in, stride))
    return rows


_RAW: dict[str, list] = {
    "GoogLeNet": [
        ("conv1/7x7_s2", 224, 7, 64, 3, 2),
        ("conv2/3x3_reduce", 56, 1, 64, 64),
        ("conv2/3x3", 56, 3, 192, 64),
        *_inception("inception_3a", 28, 192, 64, 96, 128, 16, 32, 32),
        *_inception("inception_3b", 28, 256, 128, 128, 192, 32, 96, 64),
        *_inception("inception_4a", 14, 480, 192, 96, 208, 16, 48, 64),
        *_inception("inception_4b", 14, 512, 160, 112, 224, 24, 64, 64),
        *_inception("inception_4c", 14, 512, 128, 128, 256, 24, 64, 64),
        *_inception("inception_4d", 14, 512, 112, 144, 288, 32, 64, 64),
        *_inception("inception_4e", 14, 528, 256, 160, 320, 32, 128, 128),
        *_inception("inception_5a", 7, 832, 256, 160, 320, 32, 128, 128),
        *_inception("inception_5b", 7, 832, 384, 192, 384, 48, 128, 128),
    ],
    "SqueezeNet": [
        ("conv1", 224, 7, 96, 3, 2),
        *_fire("fire2", 54, 96, 16, 64),
        *_fire("fire3", 54, 128, 16, 64),
        *_fire("fire4", 54, 128, 32, 128),
        *_fire("fire5", 27, 256, 32, 128),
        *_fire("fire6", 27, 256, 48, 192),
        *_fire("fire7", 27, 384, 48, 192),
        *_fire("fire8", 27, 384, 64, 256),
        *_fire("fire9", 13, 512, 64, 256),
        ("conv10", 13, 1, 1000, 512),
    ],
    "AlexNet": [
        ("conv1", 224, 11, 96, 3, 4),
        ("conv2", 27, 5, 256, 96),
        ("conv3", 13, 3, 384, 256),
        ("conv4", 13, 3, 384, 384),
        ("conv5", 13, 3, 256, 384),
    ],
    "ResNet-50": [
        ("conv1", 224, 7, 64, 3, 2),
        *_bottleneck_stage(2, 56, 64, 64, 3, 1),
        *_bottleneck_stage(3, 28, 256, 128, 4, 2),
        *_bottleneck_stage(4, 14, 512, 256, 6, 2),
        *_bottleneck_stage(5, 7, 1024, 512, 3, 2),
    ],
    "VGG19": [
        ("conv1_1", 224, 3, 64, 3),
        ("conv1_2", 224, 3, 64, 64),
        ("conv2_1", 112, 3, 128, 64),
        ("conv2_2", 112, 3, 128, 128),
        ("conv3_1", 56, 3, 256, 128),
        *[(f"conv3_{i}", 56, 3, 256, 256) for i in (2, 3, 4)],
        ("conv4_1", 28, 3, 512, 256),
        *[(f"conv4_{i}", 28, 3, 512, 512) for i in (2, 3, 4)],
        *[(f"conv5_{i}", 14, 3, 512, 512) for i in (1, 2, 3, 4)],
    ],
}

#: The networks in the paper's Table 1 column order.
NETWORKS: tuple[str, ...] = tuple(_RAW)

#: Every convolution layer of every network, stride-2 and -4 layers included.
LAYERS: tuple[Layer, ...] = tuple(Layer(net, *row) for net, rows in _RAW.items() for row in rows)

#: Layers left out of the count to meet the paper's Table 1 (see the module doc).
EXCLUDED_FROM_COUNT = {"GoogLeNet": "pool_proj"}

#: The paper's Table 1, for side-by-side display.
PAPER_TABLE1: dict[str, dict[str, Any]] = {
    "GoogLeNet": {"configurations": 42, "last_input": "7x7x832", "filters": {1: 57.2, 3: 23.8, 5: 19.0}},
    "SqueezeNet": {"configurations": 21, "last_input": "13x13x512", "filters": {1: 71.4, 3: 28.6}},
    "AlexNet": {"configurations": 4, "last_input": "13x13x384", "filters": {3: 75.0, 5: 25.0}},
    "ResNet-50": {"configurations": 12, "last_input": "7x7x1024", "filters": {1: 66.7, 3: 33.3}},
    "VGG19": {"configurations": 9, "last_input": "14x14x512", "filters": {3: 100.0}},
}


def _check_network(network: str) -> None:
    if network not in _RAW:
        raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")


def stride1_layers(network: str) -> list[Layer]:
    """The network's stride-1 layers that the study counts, in network order."""
    _check_network(network)
    skip = EXCLUDED_FROM_COUNT.get(network)
    return [
        layer
        for layer in LAYERS
        if layer.network == network and layer.stride == 1 and not (skip and layer.name.endswith(skip))
    ]


def distinct_configurations(network: str) -> list[Config]:
    """The network's distinct stride-1 configurations, each with the layers that share it."""
    groups: dict[tuple[int, int, int, int], list[str]] = {}
    for layer in stride1_layers(network):
        groups.setdefault((layer.size, layer.filter, layer.filters, layer.depth), []).append(layer.name)
    return [Config(*key, layers=tuple(names)) for key, names in groups.items()]


def _filter_shares(configs: list[Config]) -> dict[int, float]:
    counts = Counter(c.filter for c in configs)
    return {f: 100.0 * counts[f] / len(configs) for f in sorted(counts)}


def _shares_text(shares: dict[int, float]) -> str:
    return " ".join(f"{f}x{f} ({pct:.1f}%)" for f, pct in shares.items())


def table1() -> Any:
    """Table 1 as measured from the layer data, beside the paper's (a pandas DataFrame, one column per network)."""
    import pandas as pd

    columns = {}
    for net in NETWORKS:
        configs = distinct_configurations(net)
        last = [layer for layer in LAYERS if layer.network == net][-1]
        paper = PAPER_TABLE1[net]
        columns[net] = {
            "distinct layer shapes": len(configs),
            "paper: distinct layer shapes": paper["configurations"],
            "network input": "224x224x3",
            "input to the last conv layer": f"{last.size}x{last.size}x{last.depth}",
            "paper: input to the last conv layer": paper["last_input"],
            "filter sizes (% of shapes)": _shares_text(_filter_shares(configs)),
            "paper: filter sizes": _shares_text(paper["filters"]),
        }
    return pd.DataFrame(columns)


def table1_differences() -> list[str]:
    """Where the layer data cannot meet the paper's Table 1, and why."""
    notes = []
    for net in NETWORKS:
        configs = distinct_configurations(net)
        paper = PAPER_TABLE1[net]
        last = [layer for layer in LAYERS if layer.network == net][-1]
        shares = _filter_shares(configs)
        paper_shares = paper["filters"]
        # the paper rounds 24/42 = 57.14% up to 57.2%: compare within its rounding
        same_shares = shares.keys() == paper_shares.keys() and all(
            abs(shares[f] - paper_shares[f]) <= 0.1 for f in shares
        )
        if len(configs) != paper["configurations"] or not same_shares:
            notes.append(
                f"{net}: {len(configs)} configurations ({_shares_text(shares)}) where the paper has "
                f"{paper['configurations']} ({_shares_text(paper['filters'])})."
            )
        if f"{last.size}x{last.size}x{last.depth}" != paper["last_input"]:
            notes.append(
                f"{net}: the last convolution ({last.name}) reads {last.size}x{last.size}x{last.depth}; "
                f"the paper writes {paper['last_input']}."
            )
    return notes


def configurations(networks: tuple[str, ...] = NETWORKS) -> list[Config]:
    """Distinct configurations across ``networks`` (a shared one listed once), by filter size then network."""
    seen: dict[tuple[int, int, int, int], Config] = {}
    for net in networks:
        for c in distinct_configurations(net):
            key = (c.size, c.filter, c.filters, c.depth)
            prior = seen.get(key)
            names = tuple(f"{net}:{n}" for n in c.layers)
            seen[key] = Config(*key, layers=(prior.layers if prior else ()) + names)
    return sorted(seen.values(), key=lambda c: c.filter)  # stable: network order within a filter size


def problems(batch_sizes: tuple[int, ...] = BATCH_SIZES, networks: tuple[str, ...] = NETWORKS) -> list[ConvProblem]:
    """Every distinct configuration at every batch size: the sweep's problems."""
    return [c.problem(n) for c in configurations(networks) for n in batch_sizes]
