"""Argument checks shared by every module.

Two kinds, kept apart on purpose:

* **Metadata** (a Python type, a bool passed as an int, a rank, a shape, a dtype, a
  device, an option string). These cost nothing, so they sit where an argument enters.
* **Values** (`ids_in_vocabulary`: ids inside the vocabulary, rows that are not all
  padding). Reading a tensor's values from Python waits for the device to finish (a
  host sync) and cannot be captured by `torch.compile`, so a value check runs once,
  where data enters a model from outside, never in the layers the model calls.

Every check raises a `TypeError` (wrong kind of thing) or a `ValueError` (right kind,
wrong value) that names the argument; none uses `assert`, which `python -O` removes.

**Once per entry.** A model's entry (its `forward`, `generate` or loss) checks what the
caller gave it, then runs its blocks and parts inside `checked_entry()`: there the
metadata checks below return their argument at once, so a hidden state is not checked
again at every floor (an RMSNorm, the attention, its heads, RoPE...). A part called on
its own, outside any entry, is an entry itself and checks everything.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Mapping
from numbers import Integral, Real

import torch
from torch import Tensor, nn

__all__ = [
    "misfit_weight",
    "checked_entry",
    "input_checked",
    "weights_fit",
    "positive_int",
    "non_negative_int",
    "positive_float",
    "probability",
    "boolean",
    "choice",
    "FLOAT_DTYPES",
    "float_dtype",
    "float_tensor",
    "bool_tensor",
    "features",
    "token_ids",
    "ids_in_vocabulary",
]


# --8<-- [start:misfit_weight]
def misfit_weight(module: nn.Module) -> str | None:
    """The first Linear or Embedding weight (or bias) in `module` whose shape is not the
    one its layer was built for, as a sentence naming it; None if all fit. Reads shapes
    only: a weight replaced by hand (`layer.weight = nn.Parameter(...)`) is found here,
    where torch would say "mat1 and mat2 shapes cannot be multiplied"."""
    for path, part in module.named_modules():
        if isinstance(part, nn.Linear):
            shapes = {"weight": (part.out_features, part.in_features),
                      "bias": (part.out_features,)}
        elif isinstance(part, nn.Embedding):
            shapes = {"weight": (part.num_embeddings, part.embedding_dim)}
        else:
            continue
        for name, shape in shapes.items():
            tensor = getattr(part, name)
            if tensor is not None and tuple(tensor.shape) != shape:
                where = f"{path}.{name}" if path else name
                return (f"{where} has shape {tuple(tensor.shape)}, but its "
                        f"{type(part).__name__} was built for {shape}: a replaced "
                        "weight must keep its shape")
    return None
# --8<-- [end:misfit_weight]


# --8<-- [start:checked_entry]
class _Entry(threading.local):
    checked = False  # per thread: True inside an entry that has checked its input


_ENTRY = _Entry()


def input_checked() -> bool:
    """True inside `checked_entry()`: the input was checked where it came in."""
    return _ENTRY.checked


@contextlib.contextmanager
def checked_entry(module: nn.Module | None = None) -> Iterator[None]:
    """The body runs on input its entry has checked: the checks of this module return
    their argument at once (a flag per thread; torch.compile traces it away). Given the
    entry's `module`, an error raised inside (torch's, or a check's that blames a
    tensor the caller never passed) is told again naming the weight that does not fit,
    if one does not (`misfit_weight`: read only after a failure)."""
    before, _ENTRY.checked = _ENTRY.checked, True
    try:
        yield
    except (RuntimeError, ValueError) as error:
        problem = None if module is None else misfit_weight(module)
        if problem is None:
            raise
        raise ValueError(problem) from error
    finally:
        _ENTRY.checked = before
# --8<-- [end:checked_entry]


# --8<-- [start:weights_fit]
def weights_fit(module: nn.Module) -> None:
    """Where a layer is called from outside: refuse a Linear or Embedding weight that
    was replaced by one of another shape (`misfit_weight`), naming it. Inside an entry
    the model's own `checked_entry(model)` does it, and only after a failure."""
    if input_checked():
        return
    problem = misfit_weight(module)
    if problem is not None:
        raise ValueError(problem)
# --8<-- [end:weights_fit]


# --8<-- [start:positive_int]
def positive_int(name: str, value: object) -> int:
    """`value` if it is an int >= 1. `True` is an int in Python, but not a length."""
    if input_checked():
        return value  # checked where it came in
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)
# --8<-- [end:positive_int]


# --8<-- [start:non_negative_int]
def non_negative_int(name: str, value: object) -> int:
    """`value` if it is an int >= 0 (bools refused)."""
    if input_checked():
        return value  # checked where it came in
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)
# --8<-- [end:non_negative_int]


# --8<-- [start:positive_float]
def positive_float(name: str, value: object) -> float:
    """`value` as a float if it is a finite real number > 0 (bools refused)."""
    if input_checked():
        return value  # checked where it came in
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        result = float(value)
    except OverflowError:  # an int too large for a float, e.g. 10**400
        result = math.inf
    if not 0.0 < result < math.inf:  # NaN, inf and <= 0 fail (comparisons compile)
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return result
# --8<-- [end:positive_float]


# --8<-- [start:probability]
def probability(name: str, value: object) -> float:
    """`value` as a float in [0, 1): a dropout rate or a smoothing weight (1 would
    remove everything). Bools refused."""
    if input_checked():
        return value  # checked where it came in
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number in [0, 1), "
                        f"got {type(value).__name__}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return float(value)
# --8<-- [end:probability]


# --8<-- [start:boolean]
def boolean(name: str, value: object) -> bool:
    """`value` if it is a bool: `bias="no"` or `bias=1` is a mistake, not a choice."""
    if input_checked():
        return value  # checked where it came in
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value
# --8<-- [end:boolean]


# --8<-- [start:choice]
def choice(name: str, value: object, options: tuple[str, ...]) -> str:
    """`value` if it is one of the allowed strings."""
    if input_checked():
        return value  # checked where it came in
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {list(options)}, "
                        f"got {type(value).__name__}")
    if value not in options:
        raise ValueError(f"{name} must be one of {list(options)}, got {value!r}")
    return value
# --8<-- [end:choice]


# --8<-- [start:float_dtype]
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def float_dtype(name: str, dtype: object) -> torch.dtype:
    """`dtype` if it is one of the floating dtypes a table or a buffer can hold."""
    if input_checked():
        return dtype  # checked where it came in
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be one of {list(FLOAT_DTYPES)}, got {dtype!r}")
    return dtype  # type: ignore[return-value]
# --8<-- [end:float_dtype]


# --8<-- [start:float_tensor]
def float_tensor(name: str, value: object, *, ndim: int | None = None) -> Tensor:
    """`value` if it is a floating-point tensor (of rank `ndim`, if given).

    Metadata only: NaN passes, as it does through PyTorch's own layers."""
    if input_checked():
        return value  # checked where it came in
    if not isinstance(value, Tensor) or not value.is_floating_point():
        kind = value.dtype if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must be a floating-point tensor, got {kind}")
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got {tuple(value.shape)}")
    return value
# --8<-- [end:float_tensor]


# --8<-- [start:bool_tensor]
def bool_tensor(name: str, value: object) -> Tensor:
    """`value` if it is a boolean tensor (a mask: True = may attend)."""
    if input_checked():
        return value  # checked where it came in
    if not isinstance(value, Tensor) or value.dtype != torch.bool:
        kind = value.dtype if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must be a bool tensor (True = may attend), "
                        f"got {kind}; convert a 0/1 mask with `mask == 1`")
    return value
# --8<-- [end:bool_tensor]


# --8<-- [start:features]
def features(name: str, value: object, *, width: int, like: Tensor) -> Tensor:
    """The input of a layer: a float tensor whose last axis is `width`, with the dtype
    and device of the layer's parameter `like`. Checked here, so that a mistake names
    the argument instead of surfacing from inside a matrix product."""
    if input_checked():
        return value  # checked where it came in
    value = float_tensor(name, value)
    if value.ndim == 0 or value.shape[-1] != width:
        raise ValueError(f"{name} must have last axis {width}, "
                         f"got {tuple(value.shape)}")
    if value.dtype != like.dtype:
        raise TypeError(f"{name} is {value.dtype}, the layer's parameters {like.dtype}")
    if value.device != like.device:
        raise ValueError(f"{name} is on {value.device}, the layer on {like.device}")
    return value
# --8<-- [end:features]


# --8<-- [start:token_ids]
def token_ids(name: str, value: object, *, max_length: int | None = None) -> Tensor:
    """`value` if it is a batch of token ids `[B, T]`, int64, B, T >= 1 and
    T <= max_length. Metadata only; `ids_in_vocabulary` reads the values.

    Ids are never cast: a float tensor of "ids" is a bug upstream."""
    if not isinstance(value, Tensor) or value.dtype != torch.long:
        kind = value.dtype if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must hold token ids as torch.long, got {kind}")
    if value.ndim != 2 or value.numel() == 0:
        raise ValueError(f"{name} must have shape [B, T], B, T >= 1, "
                         f"got {tuple(value.shape)}")
    if max_length is not None and value.shape[1] > max_length:
        raise ValueError(f"{name} has {value.shape[1]} tokens > "
                         f"max_length={max_length}")
    return value
# --8<-- [end:token_ids]


# --8<-- [start:ids_in_vocabulary]
def ids_in_vocabulary(ids: Mapping[str, Tensor], *, vocab_size: int,
                      pad_id: int | None = None) -> None:
    """The one check that reads token values: every id of every tensor in `ids`
    (name -> [B, T]) is in [0, vocab_size), and, if `pad_id` is given, no row is nothing
    but PAD. One host sync for all of them; skipped inside `torch.compile`, which cannot
    raise on a value (there `nn.Embedding` still refuses an id out of range on the CPU).
    """
    if torch.compiler.is_compiling() or not ids:
        return
    bad = {}
    for name, t in ids.items():
        bad[name] = (t < 0) | (t >= vocab_size)  # [B, T]
        if pad_id is not None:
            bad[name] |= (t == pad_id).all(dim=1, keepdim=True)  # a row of only PAD
    if not torch.stack([b.any() for b in bad.values()]).any():  # the one host sync
        return
    name = next(n for n, b in bad.items() if b.any())  # failing: details may cost
    row, col = torch.nonzero(bad[name])[0].tolist()
    token = int(ids[name][row, col])
    if 0 <= token < vocab_size:
        raise ValueError(f"{name} row {row} is nothing but PAD={pad_id}")
    raise ValueError(f"{name}[{row}, {col}] = {token} is outside the vocabulary "
                     f"[0, {vocab_size})")
# --8<-- [end:ids_in_vocabulary]
