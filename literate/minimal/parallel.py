"""The parallel residual (GPT-J, Wang & Komatsuzaki 2021; GPT-NeoX, Black et al. 2022;
PaLM): attention and FFN both read the block's input, and both outputs are added to it,
so the two can run at once. Shapes: [B, T, d_model] in and out.
"""

from __future__ import annotations

from torch import nn


# --8<-- [start:parallel_block]
class ParallelBlock(nn.Module):
    """x + Attn(attn_norm(x)) + FFN(ffn_norm(x)). With ffn_norm=None the FFN reads
    attn_norm(x) too, one norm for both (GPT-J, PaLM); GPT-NeoX gives the FFN its own.
    The parts are passed in, e.g. GPT-J's: attn=GQAttention(n_kv_heads=n_heads, ...),
    ffn=FeedForward(activation=gelu_tanh), attn_norm=LayerNorm(...)."""

    def __init__(self, *, attn, ffn, attn_norm, ffn_norm=None):
        super().__init__()
        self.attn, self.ffn = attn, ffn
        self.attn_norm, self.ffn_norm = attn_norm, ffn_norm

    def forward(self, x):
        h = self.attn_norm(x)
        f = h if self.ffn_norm is None else self.ffn_norm(x)  # what the FFN reads
        return x + self.attn(h) + self.ffn(f)
# --8<-- [end:parallel_block]
