"""The convolution problem: shapes, work, traffic and the papers' labels.

Every chapter describes a layer with one :class:`ConvProblem`; the results store keys its rows
by the problem's fields, so a problem means the same thing in a kernel, a cuDNN call, a CSV row
and a plot label.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

FLOAT32_BYTES = 4

_LABEL = re.compile(r"^(?P<h>\d+)(?:x(?P<w>\d+))?-(?P<n>\d+)-(?P<r>\d+)(?:x(?P<s>\d+))?-(?P<m>\d+)-(?P<c>\d+)$")


@dataclass(frozen=True)
class ConvProblem:
    """A 2-D convolution (cross-correlation, as cuDNN computes it), NCHW input, MCRS filters.

    Args:
        n: batch size.
        c: input channels (the paper's "depth").
        h: input height.
        w: input width.
        m: number of filters (output channels).
        r: filter height.
        s: filter width.
        pad: zero padding on every side, in pixels.
        stride: step between windows, same in both directions.

    Example:
        >>> p = ConvProblem.from_label("7-1-1-32-832")
        >>> p.output_shape, p.flops
        ((1, 32, 7, 7), 2609152)
    """

    n: int
    c: int
    h: int
    w: int
    m: int
    r: int
    s: int
    pad: int = 0
    stride: int = 1

    def __post_init__(self) -> None:
        for name in ("n", "c", "h", "w", "m", "r", "s", "stride"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.pad, int) or isinstance(self.pad, bool) or self.pad < 0:
            raise ValueError(f"pad must be a non-negative int, got {self.pad!r}")
        if self.out_h < 1 or self.out_w < 1:
            raise ValueError(
                f"pad={self.pad}, stride={self.stride} give no output for a {self.h}x{self.w} "
                f"input and a {self.r}x{self.s} filter"
            )

    @classmethod
    def same(cls, n: int, c: int, h: int, w: int, m: int, r: int, s: int | None = None) -> ConvProblem:
        """A stride-1 problem with the "same" padding the papers use ((R-1)/2, R odd)."""
        s = r if s is None else s
        if r != s or r % 2 == 0:
            raise ValueError(f"'same' padding needs a square odd filter, got {r}x{s}")
        return cls(n, c, h, w, m, r, s, pad=(r - 1) // 2, stride=1)

    @classmethod
    def from_label(cls, label: str, *, pad: int | str = "same", stride: int = 1) -> ConvProblem:
        """Parse cuConv's ``input-batch-filter-filters-depth`` label (``7-1-1-32-832``).

        Non-square inputs or filters are written ``HxW`` and ``RxS``. ``pad="same"`` gives the
        padding that keeps the output size (the papers' setting); an int gives that padding.
        """
        match = _LABEL.match(label.strip())
        if not match:
            raise ValueError(
                f"label must look like input-batch-filter-filters-depth (e.g. 7-1-1-32-832), got {label!r}"
            )
        g = match.groupdict()
        h, r = int(g["h"]), int(g["r"])
        w = int(g["w"]) if g["w"] else h
        s = int(g["s"]) if g["s"] else r
        n, m, c = int(g["n"]), int(g["m"]), int(g["c"])
        if pad == "same":
            if stride != 1:
                raise ValueError("pad='same' is defined for stride 1 only")
            return cls.same(n, c, h, w, m, r, s)
        if not isinstance(pad, int):
            raise ValueError(f"pad must be 'same' or an int, got {pad!r}")
        return cls(n, c, h, w, m, r, s, pad=pad, stride=stride)

    @classmethod
    def from_key(cls, key: str) -> ConvProblem:
        """The problem of a :attr:`key` (its inverse)."""
        label, pad, stride = key.rsplit("-", 2)
        return cls.from_label(label, pad=int(pad.removeprefix("p")), stride=int(stride.removeprefix("s")))

    @classmethod
    def from_row(cls, row: Any) -> ConvProblem:
        """The problem of a results row (a mapping with N, C, H, W, M, R, S, pad, stride)."""
        return cls(*(int(row[k]) for k in ("N", "C", "H", "W", "M", "R", "S")),
                   pad=int(row["pad"]), stride=int(row["stride"]))  # fmt: skip

    @property
    def key(self) -> str:
        """The problem's one key (its label, padding and stride: ``7-1-1-32-832-p0-s1``), as every dispatch
        and knob table writes it."""
        return f"{self.label}-p{self.pad}-s{self.stride}"

    @property
    def label(self) -> str:
        """cuConv's ``input-batch-filter-filters-depth`` label (padding and stride not included)."""
        size = f"{self.h}" if self.h == self.w else f"{self.h}x{self.w}"
        filt = f"{self.r}" if self.r == self.s else f"{self.r}x{self.s}"
        return f"{size}-{self.n}-{filt}-{self.m}-{self.c}"

    @property
    def name(self) -> str:
        """The book's one name of the layer: :attr:`label`, with the padding written where it is not "same"
        padding and the stride where it is not 1 (``14-1-1-1024-256 s2``, ``228-1-5-256-256 p0``)."""
        same = self.r == self.s and self.r % 2 == 1 and self.pad == (self.r - 1) // 2
        return self.label + ("" if same else f" p{self.pad}") + ("" if self.stride == 1 else f" s{self.stride}")

    @property
    def is_image_filter(self) -> bool:
        """One image, one channel, one odd square filter, "same" zero padding, stride 1: what the filter of an
        image-processing library (cupyx.ndimage, NPP, CV-CUDA) computes."""
        return (self.n == self.c == self.m == 1 and self.r == self.s and self.r % 2 == 1
                and self.pad == (self.r - 1) // 2 and self.stride == 1)  # fmt: skip

    @property
    def out_h(self) -> int:
        return (self.h + 2 * self.pad - self.r) // self.stride + 1

    @property
    def out_w(self) -> int:
        return (self.w + 2 * self.pad - self.s) // self.stride + 1

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.c, self.h, self.w)

    @property
    def filter_shape(self) -> tuple[int, int, int, int]:
        return (self.m, self.c, self.r, self.s)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.m, self.out_h, self.out_w)

    @property
    def flops(self) -> int:
        """Multiply-adds counted as two operations, padding taps included (the papers' count)."""
        return 2 * self.n * self.m * self.out_h * self.out_w * self.c * self.r * self.s

    @property
    def min_bytes(self) -> int:
        """The fewest bytes of device memory traffic: input and filters read once, output written once."""
        elements = (
            self.n * self.c * self.h * self.w
            + self.m * self.c * self.r * self.s
            + self.n * self.m * self.out_h * self.out_w
        )
        return FLOAT32_BYTES * elements

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte of the minimal traffic: where the problem sits on the roofline."""
        return self.flops / self.min_bytes

    def as_dict(self) -> dict[str, int]:
        """The fields, keyed by the results store's upper-case column names."""
        return {k.upper(): v for k, v in asdict(self).items() if k not in ("pad", "stride")} | {
            "pad": self.pad,
            "stride": self.stride,
        }
