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

from literate.checks import bool_tensor, choice, float_tensor, non_negative_int, positive_int

__all__ = [
    "AttentionResult",
    "EMPTY_ROW_POLICIES",
    "causal_allowed",
    "padding_allowed",
    "masked_softmax",
    "scaled_dot_product_attention",
]

EmptyRowPolicy = Literal["error", "zero"]
EMPTY_ROW_POLICIES: tuple[str, ...] = ("error", "zero")


# --8<-- [start:causal_allowed]
def causal_allowed(
    t_q: int,
    t_k: int,
    *,
    query_offset: int = 0,
    device: torch.device | str | None = None,
) -> Tensor:
    """Causal mask `[T_q, T_k]`: query i may read key j iff j <= query_offset + i.

    Positions are absolute. `query_offset` is the position of the first query:
    0 for a full forward pass, the number of cached tokens when decoding with a
    KV cache (then T_k = query_offset + T_q).
    """
    t_q = positive_int("t_q", t_q)
    t_k = positive_int("t_k", t_k)
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
    valid = bool_tensor("valid", valid)
    if valid.ndim != 2:
        raise ValueError(f"valid must have shape [B, T_k], got {tuple(valid.shape)}")
    return valid[:, None, None, :]  # [B, 1, 1, T_k]
# --8<-- [end:padding_allowed]


# --8<-- [start:masked_softmax]
def masked_softmax(scores: Tensor, allowed: Tensor) -> Tensor:
    """Softmax over the last axis, taken over the allowed entries only.

    Blocked entries get weight exactly 0. Stable: each row's largest allowed score
    is subtracted before `exp`, so `exp` never sees a positive argument and cannot
    overflow (softmax(z) = softmax(z - c) for any constant c). A row with no
    allowed entry comes out as all zeros, never NaN.
    """
    scores = float_tensor("scores", scores)
    allowed = bool_tensor("allowed", allowed)
    if allowed.device != scores.device:
        raise ValueError(f"allowed is on {allowed.device}, scores on {scores.device}")
    try:
        broadcasts = torch.broadcast_shapes(allowed.shape, scores.shape) == scores.shape
    except RuntimeError:
        broadcasts = False
    if not broadcasts:
        raise ValueError(
            f"allowed {tuple(allowed.shape)} must broadcast to scores {tuple(scores.shape)}"
        )
    masked = scores.masked_fill(~allowed, float("-inf"))
    row_max = masked.amax(dim=-1, keepdim=True)  # -inf for a row with nothing allowed
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exps = torch.exp(masked - row_max)  # exp(-inf) == 0 exactly; every allowed term <= 1
    total = exps.sum(dim=-1, keepdim=True)  # >= 1 on any row with an allowed entry
    return exps / torch.where(total > 0, total, torch.ones_like(total))
# --8<-- [end:masked_softmax]


# --8<-- [start:attention_result]
@dataclass(frozen=True)
class AttentionResult:
    """Everything one attention call computed, so a reader can look inside.

    output      [..., T_q, d_v]  weighted average of the value rows
    weights     [..., T_q, T_k]  softmax over allowed keys; blocked entries exactly 0
    scores      [..., T_q, T_k]  q k^T / sqrt(d_k), with -inf where blocked (float32 or wider)
    empty_rows  [..., T_q]       True where a query had no key it may attend to
    """

    output: Tensor
    weights: Tensor
    scores: Tensor
    empty_rows: Tensor
# --8<-- [end:attention_result]


# --8<-- [start:scaled_dot_product_attention]
def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    allowed: Tensor | None = None,
    *,
    empty_row: EmptyRowPolicy = "error",
) -> AttentionResult:
    """softmax(q k^T / sqrt(d_k)) v over the allowed keys.

    q [..., T_q, d_k], k [..., T_k, d_k], v [..., T_k, d_v]; leading axes broadcast.
    allowed: bool, broadcastable to [..., T_q, T_k], True = may attend; None = all.
    empty_row: a query with no allowed key raises ValueError ("error", the
    default) or gets zero weights and a zero output ("zero", for padded queries).
    Computes in float32 or wider; output and weights come back in the inputs'
    (promoted) dtype, scores stay in the compute dtype (so they cannot overflow).
    """
    empty_row = choice("empty_row", empty_row, EMPTY_ROW_POLICIES)
    q = float_tensor("q", q, min_ndim=2)
    k = float_tensor("k", k, min_ndim=2)
    v = float_tensor("v", v, min_ndim=2)
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k, v must share a device, got {q.device}, {k.device}, {v.device}")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k must have q's width d_k={q.shape[-1]}, got k {tuple(k.shape)}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"v must have one row per key (T_k={k.shape[-2]}), got v {tuple(v.shape)}")
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"leading axes of q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
            "do not broadcast"
        ) from None

    out_dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), v.dtype)
    dtype = torch.promote_types(out_dtype, torch.float32)  # at least float32
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)

    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [..., T_q, T_k]
    scores = scores.expand(*batch, *scores.shape[-2:])
    if not torch.isfinite(scores).all():
        raise ValueError(f"q k^T overflowed in {dtype}; rescale q and k")

    if allowed is None:
        allowed = torch.ones((), dtype=torch.bool, device=q.device).expand(scores.shape)
    else:
        allowed = bool_tensor("allowed", allowed)
        if allowed.device != q.device:
            raise ValueError(f"allowed is on {allowed.device}, q on {q.device}")
        try:
            allowed = allowed.expand(scores.shape)
        except RuntimeError:
            raise ValueError(
                f"allowed {tuple(allowed.shape)} does not broadcast to "
                f"[..., T_q, T_k] = {tuple(scores.shape)}"
            ) from None

    empty_rows = ~allowed.any(dim=-1)  # [..., T_q]
    if empty_row == "error" and bool(empty_rows.any()):
        where = torch.nonzero(empty_rows)[:8].tolist()
        raise ValueError(
            f"allowed leaves {int(empty_rows.sum())} query row(s) with no key to attend to, "
            f"at index [..., query] {where}; fix the mask, or pass empty_row='zero' "
            "to give padded queries zero output"
        )

    weights = masked_softmax(scores, allowed)  # [..., T_q, T_k]
    output = weights @ v  # [..., T_q, d_v]: inside the hull of the value rows, so finite
    return AttentionResult(
        output=output.to(out_dtype),
        weights=weights.to(out_dtype),
        scores=scores.masked_fill(~allowed, float("-inf")),  # kept in the compute dtype
        empty_rows=empty_rows,
    )
# --8<-- [end:scaled_dot_product_attention]
