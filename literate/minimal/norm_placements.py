"""Where the norms went after Llama. OLMo 2 (OLMo Team 2024, "2 OLMo 2 Furious") norms
each sublayer's output, inside the residual branch, and none of its inputs; Gemma 3
(Gemma Team 2025, sec. 2) norms both, a sandwich, with RMSNorms whose gain is 1 + w.
Both normalise q and k before RoPE (QK-norm): OLMo 2 over the whole q and k
projections, Gemma 3 each head's, as Qwen3. Gemma3Block is a global layer: Gemma 3's
local layers (five in six) differ only in reading a window (chapter 10's
`sliding_window_mask`) with RoPE base 1e4, which is not needed here; its larger models
also divide the global layers' positions by 8, which `rope_tables` does not. No cache.
Layer names as Hugging Face's; shapes: B batch, T tokens, H query heads, H_kv
key/value heads, d_head head width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from literate.minimal.ffn import SwiGLU, gelu_tanh
from literate.minimal.multi_head import GQAttention, merge_heads, split_heads
from literate.minimal.norms import RMSNorm
from literate.minimal.positions import apply_rope, rope_tables


# --8<-- [start:gemma_rms_norm]
class GemmaRMSNorm(RMSNorm):
    """x / sqrt(mean(x^2) + eps) * (1 + w): w is stored, zero at the start (gain 1).
    Hugging Face computes it in float32 whatever the input; here, in the input's."""

    def __init__(self, *, d_model, eps=1e-6):
        super().__init__(d_model=d_model, eps=eps)
        nn.init.zeros_(self.weight)

    def forward(self, x):
        ms = x.pow(2).mean(dim=-1, keepdim=True)  # [..., 1]: the mean square
        return x * torch.rsqrt(ms + self.eps) * (1 + self.weight)
# --8<-- [end:gemma_rms_norm]


# --8<-- [start:geglu]
class GeGLU(SwiGLU):
    """down(gelu_tanh(gate(x)) * up(x)): SwiGLU with GELU's tanh approximation as the
    gate (Shazeer 2020, eq. 6; Gemma's `gelu_pytorch_tanh`)."""

    def forward(self, x):
        return self.down_proj(gelu_tanh(self.gate_proj(x)) * self.up_proj(x))
# --8<-- [end:geglu]


# --8<-- [start:qk_norm_attention]
class QKNormAttention(GQAttention):
    """GQAttention's projections, causal, with q and k normalised by `norm` before
    RoPE: qk_norm="projection" (OLMo 2) over the whole q_proj / k_proj output, widths
    H d_head and H_kv d_head, before the split into heads; qk_norm="head" (Gemma 3,
    Qwen3) over each head, width d_head. Scores times `scale` (None: d_head^-1/2),
    which torch's attention takes and chapter 1's (fixed d_head^-1/2) does not."""

    def __init__(self, *, d_model, n_heads, n_kv_heads, d_head=None, rope_base=10000.0,
                 eps=1e-6, qk_norm="head", norm=RMSNorm, scale=None):
        super().__init__(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,
                         d_head=d_head, rope_base=rope_base)
        self.qk_norm, self.scale = qk_norm, scale
        q_heads, k_heads = (1, 1) if qk_norm == "head" else (n_heads, n_kv_heads)
        self.q_norm = norm(d_model=q_heads * self.d_head, eps=eps)  # heads per norm
        self.k_norm = norm(d_model=k_heads * self.d_head, eps=eps)

    def forward(self, x):
        t = x.shape[1]
        q = self.q_proj(x)  # [B, T, H d_head]
        k, v = self.k_proj(x), self.v_proj(x)  # [B, T, H_kv d_head]
        if self.qk_norm == "projection":  # one norm across all heads
            q, k = self.q_norm(q), self.k_norm(k)
        q = split_heads(q, self.n_heads)  # [B, H, T, d_head]
        k, v = split_heads(k, self.n_kv_heads), split_heads(v, self.n_kv_heads)
        if self.qk_norm == "head":  # each head's own
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope_tables(self.d_head, t, base=self.rope_base)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale,
                                             enable_gqa=True)  # [B, H, T, d_head]
        return self.o_proj(merge_heads(out))  # [B, T, d_model]
# --8<-- [end:qk_norm_attention]


# --8<-- [start:olmo2_block]
class OLMo2Block(nn.Module):
    """x = x + RMSNorm(Attn(x)); x = x + RMSNorm(SwiGLU(x)): each norm on its
    sublayer's output, inside the residual branch; QK-norm over the projections.
    HF's names: attn_out_norm is post_attention_layernorm, ffn_out_norm
    post_feedforward_layernorm."""

    def __init__(self, *, d_model, n_heads, n_kv_heads, d_ff, d_head=None,
                 rope_base=500000.0, eps=1e-6):
        super().__init__()
        self.attn = QKNormAttention(d_model=d_model, n_heads=n_heads,
                                    n_kv_heads=n_kv_heads, d_head=d_head,
                                    rope_base=rope_base, eps=eps, qk_norm="projection")
        self.attn_out_norm = RMSNorm(d_model=d_model, eps=eps)
        self.ffn = SwiGLU(d_model=d_model, d_ff=d_ff)
        self.ffn_out_norm = RMSNorm(d_model=d_model, eps=eps)

    def forward(self, x):
        x = x + self.attn_out_norm(self.attn(x))
        return x + self.ffn_out_norm(self.ffn(x))
# --8<-- [end:olmo2_block]


# --8<-- [start:gemma3_block]
class Gemma3Block(nn.Module):
    """x = x + N(Attn(N(x))); x = x + N(GeGLU(N(x))): the sandwich of four (1 + w)
    RMSNorms; QK-norm per head; scores scaled by query_pre_attn_scalar^-1/2. HF's
    names: attn_norm, attn_out_norm, ffn_norm, ffn_out_norm are input_layernorm,
    post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm."""

    def __init__(self, *, d_model, n_heads, n_kv_heads, d_ff, d_head,
                 query_pre_attn_scalar, rope_base=1000000.0, eps=1e-6):
        super().__init__()
        self.attn_norm = GemmaRMSNorm(d_model=d_model, eps=eps)
        self.attn = QKNormAttention(d_model=d_model, n_heads=n_heads,
                                    n_kv_heads=n_kv_heads, d_head=d_head,
                                    rope_base=rope_base, eps=eps, qk_norm="head",
                                    norm=GemmaRMSNorm,
                                    scale=query_pre_attn_scalar**-0.5)
        self.attn_out_norm = GemmaRMSNorm(d_model=d_model, eps=eps)
        self.ffn_norm = GemmaRMSNorm(d_model=d_model, eps=eps)
        self.ffn = GeGLU(d_model=d_model, d_ff=d_ff)
        self.ffn_out_norm = GemmaRMSNorm(d_model=d_model, eps=eps)

    def forward(self, x):
        x = x + self.attn_out_norm(self.attn(self.attn_norm(x)))
        return x + self.ffn_out_norm(self.ffn(self.ffn_norm(x)))
# --8<-- [end:gemma3_block]
