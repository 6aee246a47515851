"""Scaled dot-product attention in plain PyTorch (Vaswani et al. 2017, sec. 3.2.1), and
the two masks it is given. Masks are boolean and True means "may attend", as in
`torch.nn.functional.scaled_dot_product_attention`. Shapes: `...` leading (batch, head)
axes, T_q queries, T_k keys, d_k query/key width, d_v value width.
"""

from __future__ import annotations

import math

import torch


# --8<-- [start:scaled_dot_product_attention]
def scaled_dot_product_attention(q, k, v, allowed=None):
    """softmax(q k^T / sqrt(d_k)) v: returns output [..., T_q, d_v] and the weights
    [..., T_q, T_k]. allowed: bool, broadcast to [..., T_q, T_k], True = may attend;
    a query row with no allowed key gives NaN."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [..., T_q, T_k]
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))  # exp(-inf) = 0
    weights = scores.softmax(dim=-1)  # [..., T_q, T_k], each row sums to 1
    return weights @ v, weights  # [..., T_q, d_v]
# --8<-- [end:scaled_dot_product_attention]


# --8<-- [start:causal_mask]
def causal_mask(t_q, t_k, *, device=None):
    """[T_q, T_k], True where query i may read key j: j <= i + T_k - T_q. The queries
    are the last T_q of the T_k positions (T_k - T_q of them already cached)."""
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q)
# --8<-- [end:causal_mask]


# --8<-- [start:padding_mask]
def padding_mask(valid):
    """valid [B, T_k] (True = a real token) -> [B, 1, 1, T_k], which broadcasts over
    heads and queries and combines with a causal mask by `&`."""
    return valid[:, None, None, :]
# --8<-- [end:padding_mask]
