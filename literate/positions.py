"""Where is the token? Absolute and rotary position information.

Attention alone is permutation equivariant (chapter 1), so order must be put in:

* `sinusoidal_table`: the fixed table of Vaswani et al. 2017, sec. 3.5, added to the
  token embeddings (the 2017 encoder-decoder);
* `LearnedPositions`: one trained vector per position, added likewise (GPT-2);
* RoPE (Su et al. 2021): queries and keys are rotated by an angle proportional to their
  position, inside attention, so that a score depends on positions only through their
  difference (GPT-J, PaLM, Llama). Two layouts are in use:
  - *rotate-half* (Llama, Hugging Face): coordinate i is paired with i + d/2;
  - *interleaved* (the RoFormer paper, Meta's original Llama code, GPT-J): coordinate 2i
    is paired with 2i + 1.
  They are the same rotation up to a fixed permutation of the q/k projection rows
  (`interleaved_to_half_permutation`).

Shapes: T positions, d_model model width, d_head head width (even for RoPE).
"""

from __future__ import annotations

import torch
from torch import Tensor

from literate.checks import float_tensor, non_negative_int, positive_float, positive_int

__all__ = [
    "sinusoidal_table",
    "rope_cache",
    "rotate_half",
    "apply_rope",
    "apply_rope_interleaved",
    "interleaved_to_half_permutation",
]

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _float_dtype(name: str, dtype: object) -> torch.dtype:
    if dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating dtype {list(_FLOAT_DTYPES)}, got {dtype!r}")
    return dtype  # type: ignore[return-value]


def _even(name: str, value: object) -> int:
    value = positive_int(name, value)
    if value % 2:
        raise ValueError(f"{name} must be even (coordinates are used in sin/cos pairs), got {value}")
    return value


def _base(base: object) -> float:
    base = positive_float("base", base)
    if base <= 1.0:
        raise ValueError(f"base must be > 1, got {base}")
    return base


# --8<-- [start:sinusoidal_table]
def sinusoidal_table(
    length: int,
    d_model: int,
    *,
    base: float = 10_000.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """The fixed positional table `[length, d_model]` of Vaswani et al. 2017, sec. 3.5.

    PE[pos, 2i] = sin(pos / base^(2i/d_model)), PE[pos, 2i+1] = cos(same angle): sines in
    the even coordinates, cosines in the odd ones, one frequency per pair. `d_model`
    must be even: an odd width would leave a sine without its cosine, and that coordinate
    would lose the property that makes the table useful (PE[pos + k] is a fixed rotation
    of PE[pos], pair by pair). Computed in float64, returned in `dtype`.
    """
    length = positive_int("length", length)
    d_model = _even("d_model", d_model)
    base = _base(base)
    dtype = _float_dtype("dtype", dtype)
    pos = torch.arange(length, dtype=torch.float64, device=device)[:, None]  # [T, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64, device=device)  # [d_model/2]
    angle = pos / base ** (two_i / d_model)  # [T, d_model/2]
    table = torch.empty(length, d_model, dtype=torch.float64, device=device)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.to(dtype)
# --8<-- [end:sinusoidal_table]


# --8<-- [start:rope_cache]
def rope_cache(
    length: int,
    d_head: int,
    *,
    base: float = 10_000.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """cos and sin tables `[length, d_head]` for RoPE, rotate-half layout.

    Pair i (coordinates i and i + d_head/2) turns by angle pos * theta_i with
    theta_i = base^(-2i/d_head) (Su et al. 2021, sec. 3.2.2). Each half of a row holds the
    same d_head/2 angles, so `x * cos + rotate_half(x) * sin` rotates every pair at once.
    The angles are computed in float32, as Hugging Face's `LlamaRotaryEmbedding` does
    (so the tables match it exactly), then cast to `dtype`.
    """
    length = positive_int("length", length)
    d_head = _even("d_head", d_head)
    base = _base(base)
    dtype = _float_dtype("dtype", dtype)
    exponent = torch.arange(0, d_head, 2, dtype=torch.int64, device=device).float() / d_head
    inv_freq = 1.0 / (base**exponent)  # [d_head/2], float32
    pos = torch.arange(length, dtype=torch.int64, device=device).float()  # [T]
    angles = torch.outer(pos, inv_freq)  # [T, d_head/2]
    angles = torch.cat((angles, angles), dim=-1)  # [T, d_head]: both halves of each pair
    return angles.cos().to(dtype), angles.sin().to(dtype)
# --8<-- [end:rope_cache]


# --8<-- [start:rotate_half]
def rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) -> (-x2, x1) over the two halves of the last axis: a quarter turn of
    every pair (i, i + d/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)
# --8<-- [end:rotate_half]


def _check_rope_inputs(x: object, cos: object, sin: object, offset: object) -> tuple[Tensor, Tensor, Tensor, int]:
    x = float_tensor("x", x, min_ndim=2)
    cos = float_tensor("cos", cos, min_ndim=2)
    sin = float_tensor("sin", sin, min_ndim=2)
    offset = non_negative_int("offset", offset)
    t, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"x must have an even last axis (d_head), got {tuple(x.shape)}")
    if cos.shape != sin.shape or cos.ndim != 2 or cos.shape[-1] != d:
        raise ValueError(
            f"cos and sin must both be [length, d_head={d}], got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if offset + t > cos.shape[0]:
        raise ValueError(
            f"positions {offset}..{offset + t - 1} need a cache of length >= {offset + t}, "
            f"got cos/sin of length {cos.shape[0]}"
        )
    return x, cos, sin, offset


# --8<-- [start:apply_rope]
def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, *, offset: int = 0) -> Tensor:
    """Rotate queries or keys `x [..., T, d_head]` to positions offset .. offset+T-1.

    Rotate-half layout (Llama, Hugging Face). Apply it to q and k only, never to v: the
    rotation is there to make q.k depend on the positions' difference, and values do not
    enter the score. `offset` is the absolute position of the first row (the number of
    cached tokens when decoding). The tables are cast to x's dtype and device, so a
    float32 cache can serve float64 inputs.
    """
    x, cos, sin, offset = _check_rope_inputs(x, cos, sin, offset)
    t = x.shape[-2]
    cos = cos[offset : offset + t].to(dtype=x.dtype, device=x.device)  # [T, d_head]
    sin = sin[offset : offset + t].to(dtype=x.dtype, device=x.device)
    return x * cos + rotate_half(x) * sin
# --8<-- [end:apply_rope]


# --8<-- [start:apply_rope_interleaved]
def apply_rope_interleaved(x: Tensor, cos: Tensor, sin: Tensor, *, offset: int = 0) -> Tensor:
    """The same rotation in the interleaved layout (RoFormer paper, Meta's original code):
    coordinates (2i, 2i+1) form pair i. Takes the rotate-half tables of `rope_cache`."""
    x, cos, sin, offset = _check_rope_inputs(x, cos, sin, offset)
    t, half = x.shape[-2], x.shape[-1] // 2
    cos = cos[offset : offset + t, :half].to(dtype=x.dtype, device=x.device)  # [T, d/2]: one angle per pair
    sin = sin[offset : offset + t, :half].to(dtype=x.dtype, device=x.device)
    even, odd = x[..., 0::2], x[..., 1::2]  # [..., T, d/2] each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # [..., T, d/2, 2]
    return rotated.flatten(-2)  # [..., T, d]
# --8<-- [end:apply_rope_interleaved]


# --8<-- [start:interleaved_to_half_permutation]
def interleaved_to_half_permutation(d_head: int) -> Tensor:
    """Index `p` with `x_half = x_interleaved[..., p]`: (0, 2, 4, ..., 1, 3, 5, ...).

    Apply it to the rows of each head's q and k projection weights to convert a
    checkpoint from the interleaved layout to rotate-half: scores stay identical.
    """
    d_head = _even("d_head", d_head)
    return torch.cat((torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)))
# --8<-- [end:interleaved_to_half_permutation]
