"""Sliding-window attention and its ring cache, minimal (chapter 10), in plain PyTorch.

A query reads only the last `window` positions, its own included: query i sees key j
iff i - window < j <= i. That is what `sliding_window=W` means in Mistral's and Gemma
3's Hugging Face configs (transformers' `sliding_window_causal_mask_function`:
`kv_idx > q_idx - sliding_window` and `kv_idx <= q_idx`). So a decoder needs only W
cached keys per layer, whatever the length: a ring of W slots, position p in slot
p % W.

Attention as Mistral's (Jiang et al. 2023): grouped-query, RoPE, no biases; names as
Hugging Face's `MistralAttention`. RoPE's tables `cos, sin` [>= T, d_head], from
position 0 (chapter 2's `rope_tables(d_head, n_positions)`, rotate-half layout), are
passed in, as Hugging Face passes its `position_embeddings`.

Shapes: B batch, T time, H query heads, H_kv key/value heads, W window, d_head head
width.
"""

import torch
import torch.nn.functional as F
from torch import nn


# --8<-- [start:rope]
def _rope(x, cos, sin):
    """x [B, H, T, d_head] turned by RoPE tables cos, sin [T, d_head] (rotate-half)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos.to(x) + torch.cat((-x2, x1), dim=-1) * sin.to(x)
# --8<-- [end:rope]


# --8<-- [start:sliding_window_mask]
def sliding_window_mask(t, window):
    """[T, T] bool, True = may attend: query i sees keys i - window < j <= i."""
    i = torch.arange(t)[:, None]  # [T, 1] queries
    j = torch.arange(t)[None, :]  # [1, T] keys
    return (j <= i) & (j > i - window)
# --8<-- [end:sliding_window_mask]


# --8<-- [start:ring_kv_cache]
class RingKVCache:
    """One layer's cache of `window` slots: position p is written to slot p % window,
    over position p - window, which no query from p on reads. Its memory never grows.
    """

    def __init__(self, *, batch, n_kv_heads, d_head, window, dtype=torch.float32,
                 device=None):
        shape = (batch, n_kv_heads, window, d_head)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.offset = 0  # tokens seen: the position of the next one

    def update(self, k, v):
        """Write one token's k, v [B, H_kv, 1, d_head]; return the filled slots
        [B, H_kv, min(offset, W), d_head]: the new token's window, in slot order."""
        window = self.k.shape[2]
        slot = self.offset % window
        self.k[:, :, slot], self.v[:, :, slot] = k[:, :, 0], v[:, :, 0]
        self.offset += 1
        n = min(self.offset, window)
        return self.k[:, :, :n], self.v[:, :, :n]
# --8<-- [end:ring_kv_cache]


# --8<-- [start:sliding_window_attention]
class SlidingWindowAttention(nn.Module):
    """Grouped-query attention with RoPE in which query i reads keys i - window < j
    <= i. `forward` runs a whole sequence; `step`, one new token against a ring."""

    def __init__(self, *, d_model, n_heads, n_kv_heads, window):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.window = n_heads, n_kv_heads, window
        self.d_head = d_head = d_model // n_heads
        self.q_proj = nn.Linear(d_model, n_heads * d_head, bias=False)
        self.k_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=False)
        self.v_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=False)
        self.o_proj = nn.Linear(n_heads * d_head, d_model, bias=False)

    def project(self, x, cos, sin):
        """x [B, T, d] -> q [B, H, T, d_head], k and v [B, H_kv, T, d_head]."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)
        return _rope(q, cos, sin), _rope(k, cos, sin), v  # k turned before caching

    def attend(self, q, k, v, allowed):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed,
                                             enable_gqa=True)  # [B, H, T, d_head]
        return self.o_proj(out.transpose(1, 2).flatten(2))  # [B, T, d]

    def forward(self, x, cos, sin):
        """x [B, T, d] at positions 0 .. T - 1 -> [B, T, d]."""
        T = x.shape[1]
        q, k, v = self.project(x, cos[:T], sin[:T])
        return self.attend(q, k, v, sliding_window_mask(T, self.window).to(x.device))

    def step(self, x, cos, sin, cache):
        """One new token x [B, 1, d] at position cache.offset -> [B, 1, d]. The ring
        holds exactly its window (slot order does not matter to a softmax): no mask."""
        p = cache.offset
        q, k, v = self.project(x, cos[p:p + 1], sin[p:p + 1])
        k, v = cache.update(k, v)  # [B, H_kv, <= W, d_head]
        return self.attend(q, k, v, None)
# --8<-- [end:sliding_window_attention]
