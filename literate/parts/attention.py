"""Scaled dot-product attention, written out (Vaswani et al. 2017, sec. 3.2.1).

Shapes: `...` leading (batch, head) axes, T_q queries, T_k keys,
d_k query/key width, d_v value width.

Masks are boolean and **True means "may attend"**, the convention of
`torch.nn.functional.scaled_dot_product_attention`'s boolean `attn_mask`.
Causal structure and padding are built by two separate helpers and combined
with `&`, never guessed from one mask's shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from literate.parts.checks import (
    bool_tensor,
    choice,
    float_tensor,
    non_negative_int,
    positive_float,
    positive_int,
)

__all__ = [
    "AttentionResult",
    "EMPTY_ROW_POLICIES",
    "causal_allowed",
    "padding_allowed",
    "check_mask",
    "masked_softmax",
    "check_qkv",
    "refuse_empty_rows",
    "scaled_dot_product_attention",
]

# --8<-- [start:empty_row_policies]
EmptyRowPolicy = Literal["error", "zero"]
EMPTY_ROW_POLICIES = ("error", "zero")
# --8<-- [end:empty_row_policies]


# --8<-- [start:causal_allowed]
def causal_allowed(t_q: int, t_k: int, *, query_offset: int = 0,
                   device: torch.device | str | None = None) -> Tensor:
    """Causal mask `[T_q, T_k]`: query i may read key j iff j <= query_offset + i.

    Positions are absolute. `query_offset` is the position of the first query:
    0 for a full forward pass, the number of cached tokens when decoding with a
    KV cache (then T_k = query_offset + T_q).
    """
    t_q, t_k = positive_int("t_q", t_q), positive_int("t_k", t_k)
    query_offset = non_negative_int("query_offset", query_offset)
    q_pos = torch.arange(query_offset, query_offset + t_q, device=device)  # [T_q]
    k_pos = torch.arange(t_k, device=device)  # [T_k]
    return k_pos[None, :] <= q_pos[:, None]  # [T_q, T_k]
# --8<-- [end:causal_allowed]


# --8<-- [start:padding_allowed]
def padding_allowed(valid: Tensor) -> Tensor:
    """Key-padding mask: `valid [B, T_k]` (True = real token) -> `[B, 1, 1, T_k]`.

    The two singleton axes broadcast over heads and queries, so the result can be
    combined with a causal `[T_q, T_k]` mask by `&`.
    """
    if bool_tensor("valid", valid).ndim != 2:
        raise ValueError(f"valid must have shape [B, T_k], got {tuple(valid.shape)}")
    return valid[:, None, None, :]  # [B, 1, 1, T_k]
# --8<-- [end:padding_allowed]


# --8<-- [start:check_mask]
def check_mask(name: str, mask: object, shape: tuple[int, ...],
               device: torch.device) -> Tensor:
    """`mask` if it is a bool tensor on `device` that broadcasts to `shape`: the
    metadata of a mask, checked where it enters."""
    if bool_tensor(name, mask).device != device:
        raise ValueError(f"{name} is on {mask.device}, the scores on {device}")
    try:
        return mask.expand(shape)  # a view: nothing is copied
    except RuntimeError:
        raise ValueError(f"{name} {tuple(mask.shape)} must broadcast to the scores "
                         f"[..., T_q, T_k] = {tuple(shape)}") from None
# --8<-- [end:check_mask]


# --8<-- [start:masked_softmax]
def masked_softmax(scores: Tensor, allowed: Tensor) -> Tensor:
    """Softmax over the last axis, taken over the allowed entries only.

    Blocked entries get weight exactly 0. Stable: each row's largest allowed score
    is subtracted before `exp`, so `exp` never sees a positive argument and cannot
    overflow (softmax(z) = softmax(z - c) for any constant c). A row with no
    allowed entry comes out as all zeros, not NaN (NaN in the scores stays NaN).
    """
    allowed = check_mask("allowed", allowed, float_tensor("scores", scores).shape,
                         scores.device)
    empty = ~allowed.any(dim=-1, keepdim=True)  # [..., 1]: no allowed key in the row
    masked = scores.masked_fill(~allowed, -math.inf)
    row_max = masked.amax(dim=-1, keepdim=True).masked_fill(empty, 0.0)  # [..., 1]
    exps = torch.exp(masked - row_max)  # exp(-inf) = 0 exactly; each term <= 1
    total = exps.sum(dim=-1, keepdim=True)  # >= 1 on a row with an allowed entry
    return exps / total.masked_fill(empty, 1.0)
# --8<-- [end:masked_softmax]


# --8<-- [start:attention_result]
@dataclass(frozen=True)
class AttentionResult:
    """Everything one attention call computed, so a reader can look inside.

    output      [..., T_q, d_v]  weighted average of the value rows
    weights     [..., T_q, T_k]  softmax over allowed keys; blocked entries exactly 0
    scores      [..., T_q, T_k]  q k^T / sqrt(d_k), -inf if blocked (float32 or wider)
    empty_rows  [..., T_q]       True where a query had no key it may attend to
    """

    output: Tensor
    weights: Tensor
    scores: Tensor
    empty_rows: Tensor
# --8<-- [end:attention_result]


# --8<-- [start:check_qkv]
def check_qkv(q: object, k: object, v: object, allowed: object) -> None:
    """What attention refuses, from metadata alone: q [..., T_q, d_k],
    k [..., T_k, d_k], v [..., T_k, d_v] of one dtype and device whose leading axes
    broadcast, and a bool mask that broadcasts to [..., T_q, T_k]."""
    q, k, v = (float_tensor(n, t) for n, t in (("q", q), ("k", k), ("v", v)))
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ValueError("q, k and v need at least 2 axes: [..., T, width]")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, "
                        f"{v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k, v must share a device, got {q.device}, {k.device}, "
                         f"{v.device}")
    if k.shape[-2] == 0:
        raise ValueError(f"k has no key to attend to: {tuple(k.shape)}")
    if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
        raise ValueError(f"need q [..., T_q, d_k], k [..., T_k, d_k], "
                         f"v [..., T_k, d_v], got {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    try:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading axes of q {tuple(q.shape)}, k {tuple(k.shape)} "
                         f"and v {tuple(v.shape)} do not broadcast") from None
    if allowed is not None:
        check_mask("allowed", allowed, (*lead, q.shape[-2], k.shape[-2]), q.device)
# --8<-- [end:check_qkv]


# --8<-- [start:refuse_empty_rows]
def refuse_empty_rows(name: str, empty: Tensor) -> None:
    """Raise if a query row has no key it may attend to (`empty [..., T_q]`). It reads
    values (one host sync), so it runs only where a mask comes in from outside."""
    if empty.any():
        rows = torch.nonzero(empty)[:8].tolist()
        raise ValueError(f"{name} leaves {int(empty.sum())} query row(s) with no key "
                         f"to attend to, at index [..., query] {rows}; fix the mask, "
                         "or pass empty_row='zero' to give those rows a zero output")
# --8<-- [end:refuse_empty_rows]


# --8<-- [start:scaled_dot_product_attention]
def scaled_dot_product_attention(
        q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None, *,
        empty_row: EmptyRowPolicy = "error",
        scale: float | None = None) -> AttentionResult:
    """softmax(q k^T / sqrt(d_k)) v over the allowed keys (`check_qkv` has the shapes).

    allowed: bool, broadcastable to [..., T_q, T_k], True = may attend; None = all.
    empty_row: a query with no allowed key raises ("error", the default) or gets zero
    weights and a zero output ("zero", for padded queries). scale: what multiplies
    q k^T, 1 / sqrt(d_k) unless given (Gemma 3 gives its own). Half precision is
    computed in float32; output and weights come back in the inputs' dtype.
    """
    check_qkv(q, k, v, allowed)
    empty_row = choice("empty_row", empty_row, EMPTY_ROW_POLICIES)
    dtype = torch.promote_types(q.dtype, torch.float32)  # float16/bfloat16 -> float32
    scores = q.to(dtype) @ k.to(dtype).transpose(-2, -1)  # [..., T_q, T_k]
    if scale is None:
        scores = scores / math.sqrt(q.shape[-1])
    else:
        scores = scores * positive_float("scale", scale)
    if allowed is None:  # every key allowed: no row can be empty
        allowed = torch.ones((), dtype=torch.bool, device=q.device)
    elif empty_row == "error":
        refuse_empty_rows("allowed", ~allowed.any(dim=-1))
    scores = scores.expand(torch.broadcast_shapes(scores.shape, allowed.shape))  # view
    weights = masked_softmax(scores, allowed)  # [..., T_q, T_k]
    output = weights @ v.to(dtype)  # [..., T_q, d_v]
    empty_rows = ~allowed.expand(scores.shape).any(dim=-1)  # [..., T_q]
    return AttentionResult(output.to(q.dtype), weights.to(q.dtype),
                           scores.masked_fill(~allowed, -math.inf), empty_rows)
# --8<-- [end:scaled_dot_product_attention]
