"""Where is the token: the sinusoidal table (Vaswani et al. 2017, sec. 3.5) and learned
positions (GPT-2), both added to the token embeddings, and RoPE (Su et al. 2021), which
turns queries and keys inside attention, in the rotate-half layout of GPT-NeoX and
Hugging Face's Llama (coordinate i pairs with i + d_head/2). Shapes: B batch, T
positions, d_model model width, d_head head width (even).
"""

from __future__ import annotations

import torch
from torch import nn


# --8<-- [start:sinusoidal_positions]
def sinusoidal_positions(n_positions, d_model, *, base=10000.0, dtype=torch.float32):
    """[n_positions, d_model]: PE[pos, 2i] = sin(pos / base^(2i/d_model)) and
    PE[pos, 2i+1] = cos(same angle), one frequency per pair of coordinates. Computed
    in float64 (a float32 angle is off by ~pos * 6e-8), returned in `dtype`."""
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]  # [T, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # [d_model/2]
    angle = pos / base ** (two_i / d_model)  # [T, d_model/2]
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.to(dtype)
# --8<-- [end:sinusoidal_positions]


# --8<-- [start:learned_positions]
class LearnedPositions(nn.Module):
    """One trained vector per position, added to the token embeddings (GPT-1 and GPT-2,
    Hugging Face's `wpe`). No row, no position: inputs are at most n_positions long."""

    def __init__(self, *, n_positions, d_model):
        super().__init__()
        self.embedding = nn.Embedding(n_positions, d_model)  # [n_positions, d_model]

    def forward(self, x):
        positions = torch.arange(x.shape[1], device=x.device)  # [T]
        return x + self.embedding(positions)  # [B, T, d_model]
# --8<-- [end:learned_positions]


# --8<-- [start:rope_tables]
def rope_tables(d_head, n_positions, *, base=10000.0):
    """cos and sin [n_positions, d_head]: pair (i, i + d_head/2) turns by pos * theta_i,
    theta_i = base^(-2i/d_head). In float32, as Hugging Face's LlamaRotaryEmbedding."""
    theta = 1.0 / base ** (torch.arange(0, d_head, 2).float() / d_head)  # [d_head/2]
    angles = torch.outer(torch.arange(n_positions).float(), theta)  # [T, d_head/2]
    angles = torch.cat((angles, angles), dim=-1)  # [T, d_head]: both halves of a pair
    return angles.cos(), angles.sin()
# --8<-- [end:rope_tables]


# --8<-- [start:apply_rope]
def apply_rope(x, cos, sin):
    """Turn x [..., T, d_head] (queries or keys, never values) by the rows of cos and
    sin [T, d_head]: x cos + rotate_half(x) sin, rotate_half(x1, x2) = (-x2, x1)."""
    x1, x2 = x.chunk(2, dim=-1)  # [..., T, d_head/2] each
    rotated = torch.cat((-x2, x1), dim=-1)  # a quarter turn of every pair
    return x * cos.to(x) + rotated * sin.to(x)  # tables cast to x's dtype and device
# --8<-- [end:apply_rope]
