"""Shared argument validation.

Every public function in `literate` validates what it is given and raises a
`TypeError` (wrong kind of thing) or a `ValueError` (right kind, wrong value) that
names the argument. These helpers are the one place that wording lives. They never
use `assert`, which disappears under `python -O`.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "positive_int",
    "non_negative_int",
    "positive_float",
    "probability",
    "boolean",
    "features",
    "token_ids",
    "FLOAT_DTYPES",
    "float_dtype",
    "choice",
    "float_tensor",
    "bool_tensor",
]


def _kind(value: object) -> str:
    """Describe a value for an error message: its type, and dtype for tensors."""
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__


def positive_int(name: str, value: object) -> int:
    """Return `value` as an int if it is an integer >= 1. `True` is not a length."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {_kind(value)}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def non_negative_int(name: str, value: object) -> int:
    """Return `value` as an int if it is an integer >= 0 (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {_kind(value)}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def positive_float(name: str, value: object) -> float:
    """Return `value` as a float if it is a finite real number > 0 (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {_kind(value)}")
    try:
        result = float(value)
    except OverflowError:  # an int too large for a float, e.g. 10**400
        raise ValueError(f"{name} must be finite and > 0, got {value}") from None
    if not math.isfinite(result) or result <= 0.0:
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return result


def probability(name: str, value: object) -> float:
    """Return `value` as a float if it is a real number in [0, 1) (bools rejected): a
    dropout rate or a label-smoothing weight, where 1 would remove everything."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number in [0, 1), got {_kind(value)}")
    try:
        result = float(value)
    except OverflowError:  # an int too large for a float
        raise ValueError(f"{name} must be in [0, 1), got {value}") from None
    if not 0.0 <= result < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return result


def boolean(name: str, value: object) -> bool:
    """Return `value` if it is a bool: `bias="no"` or `bias=1` is a mistake, not a choice."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {_kind(value)}")
    return value


FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def float_dtype(name: str, dtype: object) -> torch.dtype:
    """Return `dtype` if it is one of the floating dtypes a table or buffer can hold."""
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating dtype {list(FLOAT_DTYPES)}, got {dtype!r}")
    return dtype  # type: ignore[return-value]


def choice(name: str, value: Any, options: tuple[str, ...]) -> str:
    """Return `value` if it is one of the allowed strings."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {list(options)}, got {_kind(value)}")
    if value not in options:
        raise ValueError(f"{name} must be one of {list(options)}, got {value!r}")
    return value


def float_tensor(name: str, value: object, *, min_ndim: int = 1) -> Tensor:
    """Check that `value` is a non-empty, finite, floating-point tensor."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {_kind(value)}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must have a floating-point dtype, got {value.dtype}")
    if value.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dims, got shape {tuple(value.shape)}")
    if value.numel() == 0:
        raise ValueError(f"{name} has an empty axis: shape {tuple(value.shape)}")
    if not torch.isfinite(value).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return value


def bool_tensor(name: str, value: object) -> Tensor:
    """Check that `value` is a non-empty boolean tensor (True = may attend)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {_kind(value)}")
    if value.dtype is not torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = may attend), got {value.dtype}; "
            f"convert a 0/1 mask with `mask == 1`"
        )
    if value.numel() == 0:
        raise ValueError(f"{name} has an empty axis: shape {tuple(value.shape)}")
    return value


def features(name: str, value: object, *, width: int, like: Tensor) -> Tensor:
    """Check the input of a layer: a finite float tensor whose last axis is `width`, with
    the dtype (else TypeError) and device (else ValueError) of the layer's parameter `like`.
    Checked here so that a mismatch names the argument instead of surfacing as an error
    from inside a matmul."""
    value = float_tensor(name, value)
    if value.shape[-1] != width:
        raise ValueError(f"{name} must have last axis {width}, got shape {tuple(value.shape)}")
    if value.dtype != like.dtype:
        raise TypeError(f"{name} has dtype {value.dtype}, the layer's parameters {like.dtype}")
    if value.device != like.device:
        raise ValueError(f"{name} is on {value.device}, the layer's parameters on {like.device}")
    return value


# --8<-- [start:token_ids]
def token_ids(name: str, value: object, *, vocab_size: int, max_length: int | None = None,
              pad_id: int | None = None) -> Tensor:
    """Check a batch of token ids `[B, T]`: int64, non-empty, every id in [0, vocab_size),
    T <= max_length if given, and (if `pad_id` is given) no row of nothing but PAD.

    Ids are never clamped or cast: an id outside the vocabulary is a bug upstream (a
    tokenizer for another model, an off-by-one), and a float tensor of "ids" is one too.
    """
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(value).__name__}")
    if value.dtype != torch.long:
        raise TypeError(f"{name} must hold token ids as torch.long, got {value.dtype}")
    if value.ndim != 2:
        raise ValueError(f"{name} must have shape [B, T], got {tuple(value.shape)}")
    if value.numel() == 0:
        raise ValueError(f"{name} has an empty axis: shape {tuple(value.shape)}")
    if max_length is not None and value.shape[1] > max_length:
        raise ValueError(f"{name} has length {value.shape[1]} > max_length={max_length}")
    outside = (value < 0) | (value >= vocab_size)
    if bool(outside.any()):
        where = torch.nonzero(outside)[0].tolist()
        raise ValueError(f"{name} holds id {value[tuple(where)].item()} at {where}, outside [0, {vocab_size})")
    if pad_id is not None:
        all_pad = ~(value != pad_id).any(dim=1)  # [B]
        if bool(all_pad.any()):
            raise ValueError(f"{name} has rows of nothing but PAD={pad_id}: {torch.nonzero(all_pad)[:, 0].tolist()}")
    return value
# --8<-- [end:token_ids]
