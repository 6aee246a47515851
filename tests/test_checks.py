"""Tests for `literate.checks`: what each validator accepts, returns, and rejects.

Every rejection asserts the exception type (TypeError = wrong kind of thing,
ValueError = right kind, wrong value) and that the message starts with the
argument's name.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from literate.checks import (
    bool_tensor,
    choice,
    float_tensor,
    non_negative_int,
    positive_float,
    positive_int,
)

# --------------------------------------------------------------------------------------
# positive_int / non_negative_int
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, 7, 10**30, np.int64(3), np.int32(5), np.uint8(2)])
def test_positive_int_accepts_integers_and_returns_python_int(value):
    result = positive_int("n", value)
    assert type(result) is int
    assert result == int(value)


@pytest.mark.parametrize("value", [0, 4, np.int64(0), np.int16(9)])
def test_non_negative_int_accepts_zero_and_up(value):
    result = non_negative_int("offset", value)
    assert type(result) is int
    assert result == int(value)


INT_TYPE_ERRORS = [
    (True, "bool"),
    (False, "bool"),
    (np.bool_(True), "bool_?"),
    (3.0, "float"),
    (np.float64(3.0), "float64"),
    ("3", "str"),
    (None, "NoneType"),
    (Fraction(3, 1), "Fraction"),
    (torch.tensor(3), r"a torch\.int64 tensor of shape \(\)"),
]


@pytest.mark.parametrize("func", [positive_int, non_negative_int])
@pytest.mark.parametrize(("value", "kind"), INT_TYPE_ERRORS)
def test_int_checks_reject_non_integers_with_type_error(func, value, kind):
    with pytest.raises(TypeError, match=rf"^width must be an int, got {kind}$"):
        func("width", value)


@pytest.mark.parametrize("value", [0, -1, np.int64(-5)])
def test_positive_int_rejects_zero_and_negatives(value):
    with pytest.raises(ValueError, match=rf"^n_heads must be >= 1, got {int(value)}$"):
        positive_int("n_heads", value)


@pytest.mark.parametrize("value", [-1, np.int64(-3)])
def test_non_negative_int_rejects_negatives(value):
    with pytest.raises(ValueError, match=rf"^start_pos must be >= 0, got {int(value)}$"):
        non_negative_int("start_pos", value)


# --------------------------------------------------------------------------------------
# positive_float
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2, 2.0), (0.5, 0.5), (1e-300, 1e-300), (np.float64(0.25), 0.25), (np.float32(0.5), 0.5),
     (np.int64(3), 3.0), (Fraction(1, 4), 0.25)],
)
def test_positive_float_accepts_reals_and_returns_float(value, expected):
    result = positive_float("temperature", value)
    assert type(result) is float
    assert result == expected


@pytest.mark.parametrize(
    ("value", "kind"),
    [(True, "bool"), (np.bool_(False), "bool_?"), ("1.0", "str"), (None, "NoneType"), (1 + 0j, "complex"),
     (torch.tensor(1.0), r"a torch\.float32 tensor")],
)
def test_positive_float_rejects_non_reals_with_type_error(value, kind):
    with pytest.raises(TypeError, match=rf"^temperature must be a real number, got {kind}"):
        positive_float("temperature", value)


@pytest.mark.parametrize("value", [0, 0.0, -0.0, -1.5, math.nan, math.inf, -math.inf, np.float64("nan"), 10**400])
def test_positive_float_rejects_zero_negative_and_non_finite(value):
    with pytest.raises(ValueError, match=r"^temperature must be finite and > 0"):
        positive_float("temperature", value)


# --------------------------------------------------------------------------------------
# choice
# --------------------------------------------------------------------------------------

OPTIONS = ("error", "zero")


@pytest.mark.parametrize("value", OPTIONS)
def test_choice_returns_the_option(value):
    assert choice("empty_row", value, OPTIONS) is value


@pytest.mark.parametrize("value", ["nan", "Zero", "", " zero"])
def test_choice_rejects_unknown_strings_with_value_error(value):
    with pytest.raises(ValueError, match=rf"^empty_row must be one of \['error', 'zero'\], got {value!r}$"):
        choice("empty_row", value, OPTIONS)


@pytest.mark.parametrize(("value", "kind"), [(None, "NoneType"), (0, "int"), (["zero"], "list"), (b"zero", "bytes")])
def test_choice_rejects_non_strings_with_type_error(value, kind):
    with pytest.raises(TypeError, match=rf"^empty_row must be a str, one of \['error', 'zero'\], got {kind}$"):
        choice("empty_row", value, OPTIONS)


# --------------------------------------------------------------------------------------
# float_tensor
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_float_tensor_returns_the_same_tensor(dtype):
    x = torch.linspace(-1.0, 1.0, 6, dtype=dtype).reshape(2, 3)
    assert float_tensor("x", x) is x
    assert float_tensor("x", x, min_ndim=2) is x
    # A zero-dim tensor is fine when no axis is required.
    scalar = torch.tensor(1.5, dtype=dtype)
    assert float_tensor("x", scalar, min_ndim=0) is scalar


@pytest.mark.parametrize(
    ("value", "error", "pattern"),
    [
        ([1.0, 2.0], TypeError, r"^x must be a torch\.Tensor, got list$"),
        (np.ones(3), TypeError, r"^x must be a torch\.Tensor, got ndarray$"),
        (1.0, TypeError, r"^x must be a torch\.Tensor, got float$"),
        (torch.ones(3, dtype=torch.int64), TypeError, r"^x must have a floating-point dtype, got torch\.int64$"),
        (torch.ones(3, dtype=torch.bool), TypeError, r"^x must have a floating-point dtype, got torch\.bool$"),
        (torch.ones(3, dtype=torch.complex64), TypeError, r"^x must have a floating-point dtype"),
        (torch.tensor(1.0), ValueError, r"^x must have at least 1 dims, got shape \(\)$"),
        (torch.ones(0), ValueError, r"^x has an empty axis: shape \(0,\)$"),
        (torch.ones(2, 0, 3), ValueError, r"^x has an empty axis: shape \(2, 0, 3\)$"),
        (torch.tensor([1.0, math.nan]), ValueError, r"^x contains NaN or infinite values$"),
        (torch.tensor([1.0, math.inf]), ValueError, r"^x contains NaN or infinite values$"),
        (torch.tensor([-math.inf, 1.0], dtype=torch.float16), ValueError, r"^x contains NaN or infinite values$"),
    ],
)
def test_float_tensor_rejects(value, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        float_tensor("x", value)
    assert type(info.value) is error


def test_float_tensor_min_ndim():
    with pytest.raises(ValueError, match=r"^q must have at least 2 dims, got shape \(4,\)$"):
        float_tensor("q", torch.ones(4), min_ndim=2)


# --------------------------------------------------------------------------------------
# bool_tensor
# --------------------------------------------------------------------------------------


def test_bool_tensor_returns_the_same_tensor():
    mask = torch.tensor([[True, False], [False, True]])
    assert bool_tensor("allowed", mask) is mask
    scalar = torch.tensor(True)
    assert bool_tensor("allowed", scalar) is scalar


@pytest.mark.parametrize(
    ("value", "error", "pattern"),
    [
        ([True, False], TypeError, r"^allowed must be a torch\.Tensor, got list$"),
        (np.ones(2, dtype=bool), TypeError, r"^allowed must be a torch\.Tensor, got ndarray$"),
        (torch.ones(2), TypeError, r"^allowed must be a bool tensor \(True = may attend\), got torch\.float32"),
        (torch.ones(2, dtype=torch.uint8), TypeError, r"^allowed must be a bool tensor.*torch\.uint8.*mask == 1"),
        (torch.ones(2, dtype=torch.int64), TypeError, r"^allowed must be a bool tensor.*torch\.int64"),
        (torch.ones(3, 0, dtype=torch.bool), ValueError, r"^allowed has an empty axis: shape \(3, 0\)$"),
    ],
)
def test_bool_tensor_rejects(value, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        bool_tensor("allowed", value)
    assert type(info.value) is error


def test_probability_accepts_the_half_open_unit_interval():
    from literate.checks import probability

    assert probability("dropout", 0) == 0.0 and isinstance(probability("dropout", 0), float)
    assert probability("dropout", 0.1) == 0.1
    for bad in (1.0, 1, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^dropout must be in \[0, 1\)"):
            probability("dropout", bad)
    for bad in (True, "0.1", None):
        with pytest.raises(TypeError, match=r"^dropout must be a real number"):
            probability("dropout", bad)


def test_boolean_and_features():
    from literate.checks import boolean, features

    assert boolean("bias", True) is True and boolean("bias", False) is False
    for bad in (1, 0, "no", None):
        with pytest.raises(TypeError, match="^bias must be a bool"):
            boolean("bias", bad)
    w = torch.zeros(3, 4)
    x = torch.ones(2, 4)
    assert features("x", x, width=4, like=w) is x
    with pytest.raises(ValueError, match="^x must have last axis 4"):
        features("x", torch.ones(2, 5), width=4, like=w)
    with pytest.raises(TypeError, match="^x has dtype torch.float64, the layer's parameters torch.float32"):
        features("x", x.double(), width=4, like=w)
    with pytest.raises(ValueError, match="^x is on cpu, the layer's parameters on meta"):
        features("x", x, width=4, like=w.to("meta"))
    with pytest.raises(ValueError, match="^p must be in"):
        __import__("literate.checks", fromlist=["probability"]).probability("p", 10**400)


def test_no_module_of_the_package_validates_with_assert():
    """`assert` vanishes under `python -O`: every check in literate/ must be an explicit raise."""
    import ast
    from pathlib import Path

    import literate

    root = Path(literate.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(root)}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert len(list(root.rglob("*.py"))) > 20
    assert found == []


def test_token_ids_checks_kind_shape_vocabulary_length_and_pad_rows():
    from literate.checks import token_ids

    ids = torch.tensor([[3, 4, 0], [5, 0, 0]])
    assert token_ids("ids", ids, vocab_size=6) is ids
    assert token_ids("ids", ids, vocab_size=6, max_length=3, pad_id=0) is ids
    cases = [
        ([[1]], TypeError, r"^ids must be a torch.Tensor of token ids, got list$"),
        (ids.float(), TypeError, r"^ids must hold token ids as torch.long, got torch.float32$"),
        (ids[0], ValueError, r"^ids must have shape \[B, T\], got \(3,\)$"),
        (ids[:, :0], ValueError, r"^ids has an empty axis"),
        (torch.tensor([[3, 6]]), ValueError, r"^ids holds id 6 at \[0, 1\], outside \[0, 6\)$"),
        (torch.tensor([[-1, 2]]), ValueError, r"^ids holds id -1 at \[0, 0\]"),
    ]
    for value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            token_ids("ids", value, vocab_size=6)
    with pytest.raises(ValueError, match=r"^ids has length 3 > max_length=2$"):
        token_ids("ids", ids, vocab_size=6, max_length=2)
    with pytest.raises(ValueError, match=r"^ids has rows of nothing but PAD=0: \[1\]$"):
        token_ids("ids", torch.tensor([[3, 0], [0, 0]]), vocab_size=6, pad_id=0)
