"""ConvProblem: shapes, work, traffic and the papers' labels."""

from __future__ import annotations

import pytest

from convkit.core.problem import ConvProblem


def test_cuconv_max_case_by_hand():
    p = ConvProblem.from_label("7-1-1-32-832")
    assert (p.n, p.c, p.h, p.w, p.m, p.r, p.s, p.pad, p.stride) == (1, 832, 7, 7, 32, 1, 1, 0, 1)
    assert p.output_shape == (1, 32, 7, 7)
    assert p.flops == 2 * 32 * 49 * 832 == 2609152
    assert p.min_bytes == 4 * (832 * 49 + 32 * 832 + 32 * 49)
    assert p.arithmetic_intensity == pytest.approx(p.flops / p.min_bytes)


def test_same_padding_strided_and_non_square():
    assert ConvProblem.from_label("13-8-5-128-48").pad == 2
    p = ConvProblem(2, 3, 17, 23, 5, 3, 5, pad=1, stride=2)
    assert p.output_shape == (2, 5, (17 + 2 - 3) // 2 + 1, (23 + 2 - 5) // 2 + 1)
    assert p.flops == 2 * 2 * 5 * p.out_h * p.out_w * 3 * 3 * 5


@pytest.mark.parametrize("label", ["7-1-1-32-832", "224-16-5-256-256", "7x9-2-3x5-16-8"])
def test_label_round_trip(label):
    assert ConvProblem.from_label(label, pad=0).label == label


def test_label_with_explicit_padding_and_stride():
    p = ConvProblem.from_label("8-1-3-4-2", pad=0, stride=2)
    assert (p.pad, p.stride, p.output_shape) == (0, 2, (1, 4, 3, 3))


@pytest.mark.parametrize(
    ("label", "message"),
    [("7-1-1-32", "label must look like"), ("a-1-1-32-8", "label must look like"), ("7-0-1-32-8", "n must be")],
)
def test_bad_labels(label, message):
    with pytest.raises(ValueError, match=message):
        ConvProblem.from_label(label)


def test_invalid_fields_name_the_field():
    with pytest.raises(ValueError, match="m must be a positive int"):
        ConvProblem(1, 3, 8, 8, 0, 3, 3)
    with pytest.raises(ValueError, match="pad must be a non-negative int"):
        ConvProblem(1, 3, 8, 8, 4, 3, 3, pad=-1)
    with pytest.raises(ValueError, match="stride must be a positive int"):
        ConvProblem(1, 3, 8, 8, 4, 3, 3, stride=0)
    with pytest.raises(ValueError, match="give no output"):
        ConvProblem(1, 3, 2, 2, 4, 5, 5, pad=0)
    with pytest.raises(ValueError, match="square odd filter"):
        ConvProblem.same(1, 3, 8, 8, 4, 4)
    with pytest.raises(ValueError, match="stride 1 only"):
        ConvProblem.from_label("8-1-3-4-2", stride=2)


def test_rows_round_trip_through_as_dict():
    p = ConvProblem(3, 5, 2, 3, 4, 5, 5, pad=2)
    assert ConvProblem.from_row(p.as_dict()) == p
    assert list(p.as_dict()) == ["N", "C", "H", "W", "M", "R", "S", "pad", "stride"]


def test_the_books_name_writes_padding_and_stride_only_where_not_the_default():
    assert ConvProblem.from_label("14-1-3-256-256").name == "14-1-3-256-256"
    assert ConvProblem.from_label("14-1-1-1024-256", pad=0, stride=2).name == "14-1-1-1024-256 s2"
    assert ConvProblem.from_label("228-1-5-256-256", pad=0).name == "228-1-5-256-256 p0"
