"""Multi-head latent attention, minimal (chapter 10): DeepSeek-V2 (DeepSeek-AI 2024a,
sec. 2.1) and V3's attention, in plain PyTorch.

Each token leaves behind one latent c of width r = `kv_lora_rank` (512 in DeepSeek-V3),
from which every head's key and value are computed again (`kv_b_proj`: W_uk for the
keys, W_uv for the values). RoPE cannot go through the latent, so positions travel in a
small decoupled part: one rotated key k_rope of width `qk_rope_head_dim` shared by all
heads, and a rotated part of every query. A decoder caches c and k_rope: r + d_rope
numbers per token and layer, for any number of heads.

Two orders of the same products:

* naive (`MultiHeadLatentAttention`): up-project the latents to H keys and values, then
  attend as multi-head attention does;
* absorbed (`AbsorbedLatentAttention`, the same weights): q_nope . (W_uk c) =
  (W_uk^T q_nope) . c, so W_uk folds into the query, and W_uv is applied after the
  weighted sum of the latents. That is multi-query attention with one key [c | k_rope]
  and one value c, which a decoder reads straight from its cache.

Names as Hugging Face's `DeepseekV3Attention` (with a query bottleneck, no biases). RoPE
here is rotate-half on tables `cos, sin` [>= T, d_rope] passed in (chapter 2's
`rope_tables(d_rope, n_positions)`; DeepSeek-V3's are YaRN's, and it also multiplies
the score scale by YaRN's mscale^2, which this minimal version leaves out); DeepSeek's
checkpoints pair coordinates (2i, 2i + 1) (HF `rope_interleave=True`): to load them,
reorder the RoPE rows of `q_b_proj` (in each head) and of `kv_a_proj_with_mqa` to the
even ones, then the odd ones (tests/test_minimal_long.py does it).

Shapes: B batch, T time, H heads, r latent width, d_nope, d_rope, d_v head widths.
"""

import torch
import torch.nn.functional as F
from torch import nn


# --8<-- [start:rope]
def _rope(x, cos, sin):
    """x [B, H, T, d] turned by RoPE tables cos, sin [T, d] (rotate-half)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos.to(x) + torch.cat((-x2, x1), dim=-1) * sin.to(x)
# --8<-- [end:rope]


# --8<-- [start:multi_head_latent_attention]
class MultiHeadLatentAttention(nn.Module):
    """MLA, naive order: each latent up-projected to H keys and values."""

    def __init__(self, *, d_model, n_heads, q_lora_rank, kv_lora_rank,
                 qk_nope_head_dim, qk_rope_head_dim, v_head_dim):
        super().__init__()
        self.n_heads, self.r, self.d_v = n_heads, kv_lora_rank, v_head_dim
        self.d_nope, self.d_rope = qk_nope_head_dim, qk_rope_head_dim
        d_qk = qk_nope_head_dim + qk_rope_head_dim
        self.scale = d_qk**-0.5  # the scores are those of d_qk-wide heads
        self.q_a_proj = nn.Linear(d_model, q_lora_rank, bias=False)
        self.q_a_layernorm = nn.RMSNorm(q_lora_rank, eps=1e-6)
        self.q_b_proj = nn.Linear(q_lora_rank, n_heads * d_qk, bias=False)
        # the latent and k_rope; then, from the latent, W_uk and W_uv head by head
        self.kv_a_proj_with_mqa = nn.Linear(d_model, self.r + self.d_rope, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(self.r, eps=1e-6)
        d_kv = self.d_nope + self.d_v
        self.kv_b_proj = nn.Linear(self.r, n_heads * d_kv, bias=False)
        self.o_proj = nn.Linear(n_heads * v_head_dim, d_model, bias=False)

    def project(self, x, cos, sin):
        """x [B, T, d] -> q_nope [B, H, T, d_nope], q_rope [B, H, T, d_rope], the latent
        c [B, 1, T, r] and k_rope [B, 1, T, d_rope]: what a decoder caches."""
        B, T, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(B, T, self.n_heads, -1).transpose(1, 2)  # [B, H, T, d_qk]
        q_nope, q_rope = q.split((self.d_nope, self.d_rope), dim=-1)
        latent = self.kv_a_proj_with_mqa(x)[:, None]  # [B, 1, T, r + d_rope]
        c, k_rope = latent.split((self.r, self.d_rope), dim=-1)
        q_rope, k_rope = (_rope(t, cos[:T], sin[:T]) for t in (q_rope, k_rope))
        return q_nope, q_rope, self.kv_a_layernorm(c), k_rope

    def forward(self, x, cos, sin):
        """x [B, T, d] at positions 0 .. T - 1 -> [B, T, d], causal."""
        B, T, _ = x.shape
        q_nope, q_rope, c, k_rope = self.project(x, cos, sin)
        kv = self.kv_b_proj(c[:, 0]).view(B, T, self.n_heads, -1).transpose(1, 2)
        k_nope, v = kv.split((self.d_nope, self.d_v), dim=-1)  # [B, H, T, .]
        q = torch.cat((q_nope, q_rope), dim=-1)  # [B, H, T, d_qk]
        k = torch.cat((k_nope, k_rope.expand(-1, self.n_heads, -1, -1)), dim=-1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.o_proj(out.transpose(1, 2).flatten(2))  # [B, T, d]
# --8<-- [end:multi_head_latent_attention]


# --8<-- [start:absorbed_latent_attention]
class AbsorbedLatentAttention(MultiHeadLatentAttention):
    """MLA, absorbed order (the same weights): attention over the latents themselves."""

    def forward(self, x, cos, sin):
        """x [B, T, d] at positions 0 .. T - 1 -> [B, T, d], causal."""
        B, T, _ = x.shape
        q_nope, q_rope, c, k_rope = self.project(x, cos, sin)
        w = self.kv_b_proj.weight.view(self.n_heads, self.d_nope + self.d_v, self.r)
        w_uk, w_uv = w.split((self.d_nope, self.d_v), dim=1)  # [H, d_nope | d_v, r]
        q = torch.cat((q_nope @ w_uk, q_rope), dim=-1)  # [B, H, T, r + d_rope]
        k = torch.cat((c, k_rope), dim=-1)  # [B, 1, T, r + d_rope]: one key head
        out = F.scaled_dot_product_attention(q, k, c, is_causal=True, scale=self.scale,
                                             enable_gqa=True)  # [B, H, T, r]
        out = out @ w_uv.transpose(1, 2)  # [B, H, T, d_v]: W_uv after the sum
        return self.o_proj(out.transpose(1, 2).flatten(2))  # [B, T, d]
# --8<-- [end:absorbed_latent_attention]
