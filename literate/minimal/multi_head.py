"""Multi-head attention: the 2017 / GPT-2 layer (Vaswani et al. 2017, sec. 3.2.2), for
self- and cross-attention, and grouped-query attention with RoPE (Ainslie et al. 2023;
Llama), with Qwen3's QK-norm and a KV cache as options. Both call chapter 1's attention,
the reader's own; `F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)` computes
the same, faster (not `is_causal=True` after a cache: it puts the mask's diagonal at
the first key, not the last). Shapes: B batch, T queries, S keys, H query heads, H_kv
key/value heads, d_head head width.
"""

from __future__ import annotations

from torch import nn

from literate.minimal.attention import causal_mask, scaled_dot_product_attention
from literate.minimal.norms import RMSNorm
from literate.minimal.positions import apply_rope, rope_tables


# --8<-- [start:split_heads]
def split_heads(x, n_heads):
    """[B, T, n_heads * d_head] -> [B, n_heads, T, d_head]: one slice per head."""
    b, t, _ = x.shape
    return x.view(b, t, n_heads, -1).transpose(1, 2)  # [B, H, T, d_head]
# --8<-- [end:split_heads]


# --8<-- [start:merge_heads]
def merge_heads(x):
    """[B, H, T, d_head] -> [B, T, H * d_head]: the heads side by side (Concat)."""
    b, h, t, d_head = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_head)  # [B, T, H * d_head]
# --8<-- [end:merge_heads]


# --8<-- [start:multi_head_attention]
class MultiHeadAttention(nn.Module):
    """H heads of width d_model / H, each attending in its own subspace, concatenated
    and mixed by o_proj. Self-attention: attn(x); cross-attention: attn(x, memory),
    queries from x [B, T, d_model], keys and values from memory [B, S, d_model].
    allowed: a bool mask (True = may attend) broadcast to [B, H, T, S]."""

    def __init__(self, *, d_model, n_heads, bias=True):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, memory=None, allowed=None):
        source = x if memory is None else memory
        q = split_heads(self.q_proj(x), self.n_heads)  # [B, H, T, d_head]
        k = split_heads(self.k_proj(source), self.n_heads)  # [B, H, S, d_head]
        v = split_heads(self.v_proj(source), self.n_heads)  # [B, H, S, d_head]
        out, _ = scaled_dot_product_attention(q, k, v, allowed)  # [B, H, T, d_head]
        return self.o_proj(merge_heads(out))  # [B, T, d_model]
# --8<-- [end:multi_head_attention]


# --8<-- [start:gq_attention]
class GQAttention(nn.Module):
    """Causal grouped-query attention with RoPE: n_kv_heads key/value heads, each read
    by n_heads / n_kv_heads query heads (MHA if equal, MQA if 1). qk_norm: an RMSNorm
    of each head's q and k before RoPE (Qwen3). cache: a KVCache, for decoding."""

    def __init__(self, *, d_model, n_heads, n_kv_heads, d_head=None,
                 rope_base=10000.0, qk_norm=False, eps=1e-5, bias=False):
        super().__init__()
        d_head = d_head or d_model // n_heads
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_head
        self.rope_base = rope_base
        self.q_proj = nn.Linear(d_model, n_heads * d_head, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=bias)  # H_kv heads
        self.v_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=bias)
        self.o_proj = nn.Linear(n_heads * d_head, d_model, bias=bias)
        self.q_norm = RMSNorm(d_model=d_head, eps=eps) if qk_norm else nn.Identity()
        self.k_norm = RMSNorm(d_model=d_head, eps=eps) if qk_norm else nn.Identity()

    def forward(self, x, cache=None):
        t = x.shape[1]
        start = 0 if cache is None else cache.offset  # the position of x[:, 0]
        q = split_heads(self.q_proj(x), self.n_heads)  # [B, H, T, d_head]
        k = split_heads(self.k_proj(x), self.n_kv_heads)  # [B, H_kv, T, d_head]
        v = split_heads(self.v_proj(x), self.n_kv_heads)  # [B, H_kv, T, d_head]
        q, k = self.q_norm(q), self.k_norm(k)  # QK-norm, or nothing
        cos, sin = rope_tables(self.d_head, start + t, base=self.rope_base)
        q = apply_rope(q, cos[start:], sin[start:])  # positions start .. start + T - 1
        k = apply_rope(k, cos[start:], sin[start:])
        if cache is not None:
            k, v = cache.update(k, v)  # [B, H_kv, start + T, d_head]
        group = self.n_heads // self.n_kv_heads  # query heads per key/value head
        k = k.repeat_interleave(group, dim=1)  # [B, H, T_k, d_head], head h reads h//G
        v = v.repeat_interleave(group, dim=1)
        allowed = causal_mask(t, start + t, device=x.device)  # [T, T_k]
        out, _ = scaled_dot_product_attention(q, k, v, allowed)  # [B, H, T, d_head]
        return self.o_proj(merge_heads(out))  # [B, T, d_model]
# --8<-- [end:gq_attention]
