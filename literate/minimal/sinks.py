"""Attention sinks, minimal (chapter 10): gpt-oss's learned sink logits, in plain
PyTorch.

A softmax row sums to 1, so a query that finds nothing worth reading must still average
some values. gpt-oss (OpenAI 2025) gives each head h one learned logit s_h (Hugging
Face's `sinks` [H]) that joins every row's softmax and is dropped before the values:

    w_j = exp(z_j) / (exp(s_h) + sum_k exp(z_k)),    sum_j w_j < 1,

so the row can put weight "nowhere" (Xiao et al. 2024 saw trained models make such a
sink of their first tokens; Miller 2023's "softmax + 1" is s_h = 0).

The layer is gpt-oss's attention: grouped-query, biases on every projection, RoPE,
and a sliding window on every other layer (window 128; None: a full causal layer).
Names as Hugging Face's `GptOssAttention`. RoPE's tables `cos, sin` [>= T, d_head]
(chapter 2's `rope_tables`, or YaRN's for gpt-oss's long context; rotate-half layout)
are passed in, as Hugging Face passes them.

Shapes: B batch, T time, H query heads, H_kv key/value heads, d_head head width.
"""

import torch
from torch import nn


# --8<-- [start:rope]
def _rope(x, cos, sin):
    """x [B, H, T, d_head] turned by RoPE tables cos, sin [T, d_head] (rotate-half)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos.to(x) + torch.cat((-x2, x1), dim=-1) * sin.to(x)
# --8<-- [end:rope]


# --8<-- [start:attention_with_sinks]
def attention_with_sinks(q, k, v, sinks, allowed):
    """Attention whose every row's softmax has one more logit, the head's sink, dropped
    before V. q, k, v [B, H, T, d_head], sinks [H], allowed [T, T] bool (True = may
    attend) -> [B, H, T, d_head]."""
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5  # [B, H, T, T]
    scores = scores.masked_fill(~allowed, float("-inf"))
    sink = sinks.view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)  # [B, H, T, 1]
    weights = torch.cat((scores, sink), dim=-1).softmax(dim=-1)  # [B, H, T, T + 1]
    return weights[..., :-1] @ v  # the sink's column dropped: rows sum to < 1
# --8<-- [end:attention_with_sinks]


# --8<-- [start:sink_attention_layer]
class SinkAttention(nn.Module):
    """gpt-oss's attention layer: causal (or, with a `window`, query i reads keys
    i - window < j <= i), with a learned sink per head."""

    def __init__(self, *, d_model, n_heads, n_kv_heads, d_head, window=None):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_head
        self.window = window
        self.q_proj = nn.Linear(d_model, n_heads * d_head)
        self.k_proj = nn.Linear(d_model, n_kv_heads * d_head)
        self.v_proj = nn.Linear(d_model, n_kv_heads * d_head)
        self.o_proj = nn.Linear(n_heads * d_head, d_model)
        self.sinks = nn.Parameter(torch.zeros(n_heads))  # s_h: 0 is "softmax + 1"

    def forward(self, x, cos, sin):
        """x [B, T, d] at positions 0 .. T - 1 -> [B, T, d]."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)
        q, k = _rope(q, cos[:T], sin[:T]), _rope(k, cos[:T], sin[:T])
        group = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(group, dim=1)  # [B, H, T, d_head]: head h reads h // G
        v = v.repeat_interleave(group, dim=1)
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]  # queries, keys
        allowed = j <= i
        if self.window is not None:
            allowed = allowed & (j > i - self.window)
        out = attention_with_sinks(q, k, v, self.sinks, allowed.to(x.device))
        return self.o_proj(out.transpose(1, 2).flatten(2))  # [B, T, d]
# --8<-- [end:sink_attention_layer]
