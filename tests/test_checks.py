"""Tests for `literate.parts.checks`: what each validator accepts, returns, and rejects.

Every rejection asserts the exception type (TypeError = wrong kind of thing,
ValueError = right kind, wrong value) and that the message starts with the
argument's name.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
import torch

from literate.parts.checks import (
    bool_tensor,
    choice,
    float_tensor,
    non_negative_int,
    positive_float,
    positive_int,
)
from literate.tools.syncs import HostReads as HostSyncs

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
    (torch.tensor(3), "Tensor"),  # a 0-d tensor is a value on the device, not an int
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
    with pytest.raises(
        ValueError, match=rf"^start_pos must be >= 0, got {int(value)}$"
    ):
        non_negative_int("start_pos", value)


# --------------------------------------------------------------------------------------
# positive_float
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2, 2.0),
        (0.5, 0.5),
        (1e-300, 1e-300),
        (np.float64(0.25), 0.25),
        (np.float32(0.5), 0.5),
        (np.int64(3), 3.0),
        (Fraction(1, 4), 0.25),
    ],
)
def test_positive_float_accepts_reals_and_returns_float(value, expected):
    result = positive_float("temperature", value)
    assert type(result) is float
    assert result == expected


def test_positive_float_warns_about_nothing_for_a_numpy_float32():
    """`abs(np.float32(0.5)) < 1e308` casts 1e308 to float32 (inf) and numpy warns
    "overflow encountered in cast": a correct argument must not print a RuntimeWarning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert positive_float("temperature", np.float32(0.5)) == 0.5
        assert positive_float("temperature", np.float16(2.0)) == 2.0


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (True, "bool"),
        (np.bool_(False), "bool_?"),
        ("1.0", "str"),
        (None, "NoneType"),
        (1 + 0j, "complex"),
        (torch.tensor(1.0), "Tensor"),
    ],
)
def test_positive_float_rejects_non_reals_with_type_error(value, kind):
    with pytest.raises(
        TypeError, match=rf"^temperature must be a real number, got {kind}$"
    ):
        positive_float("temperature", value)


@pytest.mark.parametrize(
    "value",
    [0, 0.0, -0.0, -1.5, math.nan, math.inf, -math.inf, np.float64("nan"), 10**400],
)
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
    with pytest.raises(
        ValueError,
        match=rf"^empty_row must be one of \['error', 'zero'\], got {value!r}$",
    ):
        choice("empty_row", value, OPTIONS)


@pytest.mark.parametrize(
    ("value", "kind"),
    [(None, "NoneType"), (0, "int"), (["zero"], "list"), (b"zero", "bytes")],
)
def test_choice_rejects_non_strings_with_type_error(value, kind):
    with pytest.raises(
        TypeError,
        match=rf"^empty_row must be a str, one of \['error', 'zero'\], got {kind}$",
    ):
        choice("empty_row", value, OPTIONS)


# --------------------------------------------------------------------------------------
# Host syncs: a check that reads a tensor's value from Python waits for the device
# --------------------------------------------------------------------------------------


def test_the_sync_counter_sees_every_kind_of_value_read():
    x = torch.tensor([1.0, 2.0])
    with HostSyncs() as syncs:
        (
            bool(x[0]),
            x.tolist(),
            x[0].item(),
            int(x[0]),
            float(x[0]),
            [7, 8][torch.tensor(1)],
        )
        if (x > 0).any():
            pass
    assert syncs.calls == [
        "__bool__",
        "tolist",
        "item",
        "__int__",
        "__float__",
        "__index__",
        "__bool__",
    ]


# --------------------------------------------------------------------------------------
# float_tensor: metadata only
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64]
)
def test_float_tensor_returns_the_same_tensor(dtype):
    x = torch.linspace(-1.0, 1.0, 6, dtype=dtype).reshape(2, 3)
    assert float_tensor("x", x) is x
    assert float_tensor("x", x, ndim=2) is x
    scalar = torch.tensor(1.5, dtype=dtype)
    assert (
        float_tensor("x", scalar) is scalar
        and float_tensor("x", scalar, ndim=0) is scalar
    )


@pytest.mark.parametrize(
    "value",
    [
        torch.tensor([1.0, math.nan]),
        torch.tensor([1.0, math.inf]),
        torch.tensor([-math.inf, 1.0], dtype=torch.float16),
        torch.ones(0),
        torch.ones(2, 0, 3),
    ],
    ids=["nan", "inf", "neg_inf_half", "empty", "empty_axis"],
)
def test_float_tensor_reads_no_value_so_nan_inf_and_empty_tensors_pass(value):
    """Like PyTorch's layers: NaN goes through (and comes out as NaN), nothing is synced."""
    with HostSyncs() as syncs:
        assert float_tensor("x", value) is value
    assert syncs.calls == []


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        ([1.0, 2.0], r"^x must be a floating-point tensor, got list$"),
        (np.ones(3), r"^x must be a floating-point tensor, got ndarray$"),
        (1.0, r"^x must be a floating-point tensor, got float$"),
        (None, r"^x must be a floating-point tensor, got NoneType$"),
        (
            torch.ones(3, dtype=torch.int64),
            r"^x must be a floating-point tensor, got torch\.int64$",
        ),
        (
            torch.ones(3, dtype=torch.bool),
            r"^x must be a floating-point tensor, got torch\.bool$",
        ),
        (
            torch.ones(3, dtype=torch.complex64),
            r"^x must be a floating-point tensor, got torch\.complex64$",
        ),
    ],
)
def test_float_tensor_rejects_what_is_not_a_float_tensor(value, pattern):
    with pytest.raises(TypeError, match=pattern) as info:
        float_tensor("x", value)
    assert type(info.value) is TypeError


@pytest.mark.parametrize(
    ("shape", "ndim"), [((4,), 2), ((1, 4), 1), ((), 1), ((2, 3, 4), 4)]
)
def test_float_tensor_ndim_is_an_exact_rank(shape, ndim):
    with pytest.raises(
        ValueError, match=rf"^q must have {ndim} axes, got {re.escape(str(shape))}$"
    ):
        float_tensor("q", torch.ones(shape), ndim=ndim)


def test_float_tensor_has_no_min_ndim_any_more():
    with pytest.raises(TypeError, match="min_ndim"):
        float_tensor("x", torch.ones(2), min_ndim=1)


# --------------------------------------------------------------------------------------
# bool_tensor
# --------------------------------------------------------------------------------------


def test_bool_tensor_returns_the_same_tensor():
    mask = torch.tensor([[True, False], [False, True]])
    assert bool_tensor("allowed", mask) is mask
    scalar = torch.tensor(True)
    assert bool_tensor("allowed", scalar) is scalar
    empty = torch.ones(3, 0, dtype=torch.bool)  # metadata only: an empty mask passes
    with HostSyncs() as syncs:
        assert bool_tensor("allowed", empty) is empty
    assert syncs.calls == []


BOOL_MESSAGE = r"^allowed must be a bool tensor \(True = may attend\), got {}; convert a 0/1 mask with `mask == 1`$"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ([True, False], "list"),
        (np.ones(2, dtype=bool), "ndarray"),
        (torch.ones(2), r"torch\.float32"),
        (torch.ones(2, dtype=torch.uint8), r"torch\.uint8"),
        (torch.ones(2, dtype=torch.int64), r"torch\.int64"),
    ],
)
def test_bool_tensor_rejects(value, kind):
    with pytest.raises(TypeError, match=BOOL_MESSAGE.format(kind)) as info:
        bool_tensor("allowed", value)
    assert type(info.value) is TypeError


# --------------------------------------------------------------------------------------
# float_dtype
# --------------------------------------------------------------------------------------


def test_float_dtype_accepts_the_four_float_dtypes_and_names_the_argument():
    from literate.parts.checks import FLOAT_DTYPES, float_dtype

    assert FLOAT_DTYPES == (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    for dtype in FLOAT_DTYPES:
        assert float_dtype("dtype", dtype) is dtype
    listed = re.escape(str(list(FLOAT_DTYPES)))
    for bad, shown in (
        (torch.int32, r"torch\.int32"),
        ("float32", "'float32'"),
        (None, "None"),
    ):
        with pytest.raises(
            TypeError, match=rf"^dtype must be one of {listed}, got {shown}$"
        ):
            float_dtype("dtype", bad)


def test_probability_accepts_the_half_open_unit_interval():
    from literate.parts.checks import probability

    assert probability("dropout", 0) == 0.0 and isinstance(
        probability("dropout", 0), float
    )
    assert probability("dropout", 0.1) == 0.1
    for bad in (1.0, 1, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^dropout must be in \[0, 1\)"):
            probability("dropout", bad)
    for bad in (True, "0.1", None):
        with pytest.raises(TypeError, match=r"^dropout must be a real number"):
            probability("dropout", bad)


def test_boolean_and_features():
    from literate.parts.checks import boolean, features

    assert boolean("bias", True) is True and boolean("bias", False) is False
    for bad, kind in (
        (1, "int"),
        (0, "int"),
        ("no", "str"),
        (None, "NoneType"),
        (np.bool_(True), "bool_?"),
    ):
        with pytest.raises(TypeError, match=rf"^bias must be a bool, got {kind}$"):
            boolean("bias", bad)
    w = torch.zeros(3, 4)
    x = torch.ones(2, 4)
    assert features("x", x, width=4, like=w) is x
    with pytest.raises(ValueError, match=r"^x must have last axis 4, got \(2, 5\)$"):
        features("x", torch.ones(2, 5), width=4, like=w)
    with pytest.raises(ValueError, match=r"^x must have last axis 4, got \(\)$"):
        features("x", torch.tensor(1.0), width=4, like=w)
    with pytest.raises(
        TypeError, match=r"^x must be a floating-point tensor, got torch\.int64$"
    ):
        features("x", torch.ones(2, 4, dtype=torch.long), width=4, like=w)
    with pytest.raises(
        TypeError, match=r"^x is torch\.float64, the layer's parameters torch\.float32$"
    ):
        features("x", x.double(), width=4, like=w)
    with pytest.raises(ValueError, match=r"^x is on cpu, the layer on meta$"):
        features("x", x, width=4, like=w.to("meta"))
    with pytest.raises(ValueError, match=r"^p must be in \[0, 1\), got 1000"):
        __import__("literate.parts.checks", fromlist=["probability"]).probability(
            "p", 10**400
        )


def test_features_reads_no_value():
    from literate.parts.checks import features

    x = torch.full((2, 4), math.nan)
    with HostSyncs() as syncs:
        assert features("x", x, width=4, like=torch.zeros(4)) is x
    assert syncs.calls == []


def test_no_module_of_the_package_validates_with_assert():
    """`assert` vanishes under `python -O`: every check in literate/ must be an explicit raise."""
    import ast
    from pathlib import Path

    import literate

    root = Path(literate.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.relative_to(root)}:{n.lineno}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Assert)
        ]
    assert len(list(root.rglob("*.py"))) > 20
    assert found == []


# --------------------------------------------------------------------------------------
# token_ids (metadata) and ids_in_vocabulary (the one value check)
# --------------------------------------------------------------------------------------


def test_token_ids_checks_kind_shape_and_length_from_metadata_only():
    from literate.parts.checks import token_ids

    ids = torch.tensor([[3, 4, 0], [5, 0, 0]])
    assert token_ids("ids", ids) is ids
    assert token_ids("ids", ids, max_length=3) is ids
    outside = torch.tensor(
        [[-1, 10**6]]
    )  # values are not read here: ids_in_vocabulary reads them
    with HostSyncs() as syncs:
        assert token_ids("ids", outside, max_length=2) is outside
    assert syncs.calls == []
    cases = [
        ([[1]], TypeError, r"^ids must hold token ids as torch\.long, got list$"),
        (
            ids.float(),
            TypeError,
            r"^ids must hold token ids as torch\.long, got torch\.float32$",
        ),
        (
            ids.int(),
            TypeError,
            r"^ids must hold token ids as torch\.long, got torch\.int32$",
        ),
        (ids[0], ValueError, r"^ids must have shape \[B, T\], B, T >= 1, got \(3,\)$"),
        (
            ids[:, :0],
            ValueError,
            r"^ids must have shape \[B, T\], B, T >= 1, got \(2, 0\)$",
        ),
        (
            ids[:0],
            ValueError,
            r"^ids must have shape \[B, T\], B, T >= 1, got \(0, 3\)$",
        ),
        (
            ids[None],
            ValueError,
            r"^ids must have shape \[B, T\], B, T >= 1, got \(1, 2, 3\)$",
        ),
    ]
    for value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            token_ids("ids", value)
    with pytest.raises(ValueError, match=r"^ids has 3 tokens > max_length=2$"):
        token_ids("ids", ids, max_length=2)
    with pytest.raises(TypeError, match="vocab_size"):
        token_ids(
            "ids", ids, vocab_size=6
        )  # the value check moved to ids_in_vocabulary


def test_ids_in_vocabulary_accepts_good_ids_with_one_host_sync_for_all_tensors():
    from literate.parts.checks import ids_in_vocabulary

    ids = {
        "source": torch.tensor([[3, 4, 0], [5, 1, 0]]),
        "target": torch.tensor([[1, 2]] * 2),
        "more": torch.tensor([[2]]),
    }
    with HostSyncs() as syncs:
        assert ids_in_vocabulary(ids, vocab_size=6) is None
        assert ids_in_vocabulary(ids, vocab_size=6, pad_id=0) is None
    assert syncs.calls == ["__bool__", "__bool__"]  # one per call, however many tensors


@pytest.mark.parametrize(
    ("ids", "pad_id", "pattern"),
    [
        (
            {"ids": torch.tensor([[3, 6]])},
            None,
            r"^ids\[0, 1\] = 6 is outside the vocabulary \[0, 6\)$",
        ),
        (
            {"ids": torch.tensor([[2, 2], [-1, 2]])},
            None,
            r"^ids\[1, 0\] = -1 is outside the vocabulary \[0, 6\)$",
        ),
        (
            {
                "source": torch.tensor([[1, 2]]),
                "target": torch.tensor([[0, 1, 2], [5, 4, 9]]),
            },
            None,
            r"^target\[1, 2\] = 9 is outside the vocabulary \[0, 6\)$",
        ),
        (
            {"ids": torch.tensor([[3, 0], [0, 0]])},
            0,
            r"^ids row 1 is nothing but PAD=0$",
        ),
        (
            {"source": torch.tensor([[1, 5]]), "target": torch.tensor([[5, 5]])},
            5,
            r"^target row 0 is nothing but PAD=5$",
        ),
    ],
    ids=[
        "too_large",
        "negative",
        "second_tensor_named",
        "pad_row",
        "pad_row_of_second_tensor",
    ],
)
def test_ids_in_vocabulary_names_the_tensor_and_the_first_bad_place(
    ids, pad_id, pattern
):
    from literate.parts.checks import ids_in_vocabulary

    with pytest.raises(ValueError, match=pattern):
        ids_in_vocabulary(ids, vocab_size=6, pad_id=pad_id)


def test_ids_in_vocabulary_without_pad_id_allows_a_row_of_pad():
    from literate.parts.checks import ids_in_vocabulary

    assert ids_in_vocabulary({"ids": torch.tensor([[0, 0]])}, vocab_size=6) is None


def test_ids_in_vocabulary_is_skipped_while_compiling(monkeypatch):
    """torch.compile cannot raise on a value: while compiling, the check reads nothing."""
    from literate.parts.checks import ids_in_vocabulary

    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    with HostSyncs() as syncs:
        assert ids_in_vocabulary({"ids": torch.tensor([[99]])}, vocab_size=6) is None
    assert syncs.calls == []


# --------------------------------------------------------------------------------------
# once per entry: checked_entry
# --------------------------------------------------------------------------------------
def test_inside_a_checked_entry_the_checks_return_their_argument_and_the_flag_comes_back():
    from literate.parts.checks import checked_entry, input_checked

    assert not input_checked()
    with pytest.raises(ValueError, match="boom"), checked_entry():
        assert input_checked()
        assert positive_int("n", -3) == -3  # not checked: the entry vouches for it
        assert float_tensor("x", "not a tensor") == "not a tensor"
        raise ValueError("boom")
    assert not input_checked()  # restored after the error
    with pytest.raises(ValueError, match="n must be >= 1"):
        positive_int("n", -3)


def test_the_flag_is_per_thread():
    import threading

    from literate.parts.checks import checked_entry, input_checked

    seen = []
    with checked_entry():
        worker = threading.Thread(target=lambda: seen.append(input_checked()))
        worker.start()
        worker.join()
    assert seen == [False]  # another thread's layers still check their input


def test_a_model_forward_checks_its_input_once_and_its_layers_never_again(monkeypatch):
    """A 2-layer Mixtral's forward: the entry checks the ids (2 checks), and every check
    its layers reach returns at once (before: 74 checks did work). A layer called on
    its own is an entry and still checks."""
    import literate.parts.checks as checks
    import literate.parts.mla as mla
    import literate.parts.multi_head as multi_head
    from literate.models.mixtral import mixtral_model

    torch.manual_seed(0)
    model = mixtral_model(
        vocab_size=64,
        context=16,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        n_layers=2,
        d_ff=48,
        n_experts=4,
        top_k=2,
    )
    answers = []

    def recorded() -> bool:
        answers.append(checks._ENTRY.checked)
        return answers[-1]

    for module in (checks, multi_head, mla):
        monkeypatch.setattr(module, "input_checked", recorded)
    model(torch.randint(0, 64, (2, 8)))
    assert answers and all(answers)  # every layer check was reached inside the entry
    answers.clear()
    with pytest.raises(ValueError, match="x must have last axis 32"):
        model.blocks[0].attn_norm(torch.zeros(2, 8, 31))
    assert answers and not any(answers)


def test_a_builder_checks_each_argument_once_and_its_parts_trust_it(monkeypatch):
    """One Mixtral block's construction checks each of its arguments once (before: 27
    checks, d_model six times, by the builder and by every part's constructor); a
    2-layer Mixtral model checks each once too (before: 62), its first block's builder
    checking a block's arguments for every layer."""
    import sys

    import literate.parts.checks as checks
    import literate.parts.mla as mla
    import literate.parts.multi_head as multi_head
    from literate.models.mixtral import mixtral_block, mixtral_model

    checked = []

    def recorded() -> bool:
        if not checks._ENTRY.checked:
            caller = sys._getframe(1)
            checked.append(caller.f_locals.get("name", caller.f_code.co_name))
        return checks._ENTRY.checked

    for module in (checks, multi_head, mla):
        monkeypatch.setattr(module, "input_checked", recorded)
    mixtral_block(32, 4, 2, 48, 4, 2)
    assert sorted(checked) == sorted(
        ["d_model", "n_heads", "n_kv_heads", "d_ff", "n_experts", "top_k"]
        + ["rope_base", "eps"]
    )
    checked.clear()
    mixtral_model(
        vocab_size=64,
        context=16,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        n_layers=2,
        d_ff=48,
        n_experts=4,
        top_k=2,
    )
    assert len(checked) == len(set(checked)) == 13, checked
    assert {"vocab_size", "context", "n_layers", "tied", "std", "d_model"} <= set(
        checked
    )
