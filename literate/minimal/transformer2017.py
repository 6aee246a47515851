"""The 2017 encoder and decoder layers (Vaswani et al. 2017, sec. 3.1), post-norm: each
sublayer's output goes through dropout (sec. 5.4), is added to its input, and the sum
is normalised. ReLU FFN, biases everywhere. Shapes: B batch, T target length, S source
length, d_model model width; masks are bool, True = may attend.
"""

from __future__ import annotations

from torch import nn

from literate.minimal.attention import causal_mask
from literate.minimal.ffn import FeedForward
from literate.minimal.multi_head import MultiHeadAttention
from literate.minimal.norms import LayerNorm


# --8<-- [start:encoder_layer]
class EncoderLayer(nn.Module):
    """Self-attention, add & norm, FFN, add & norm. Every token reads every other;
    allowed (e.g. `padding_mask(valid)`, [B, 1, 1, T]) hides the padding."""

    def __init__(self, *, d_model, n_heads, d_ff, dropout=0.1, eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads)
        self.self_attn_norm = LayerNorm(d_model=d_model, eps=eps)
        self.ffn = FeedForward(d_model=d_model, d_ff=d_ff)
        self.ffn_norm = LayerNorm(d_model=d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, allowed=None):
        a = self.self_attn(x, allowed=allowed)  # [B, T, d_model]
        x = self.self_attn_norm(x + self.dropout(a))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))
# --8<-- [end:encoder_layer]


# --8<-- [start:decoder_layer]
class DecoderLayer(nn.Module):
    """Masked (causal) self-attention, cross-attention over the encoder's output
    memory [B, S, d_model], FFN: each followed by add & norm. memory_allowed (e.g.
    `padding_mask(source_valid)`) hides the source's padding."""

    def __init__(self, *, d_model, n_heads, d_ff, dropout=0.1, eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads)
        self.self_attn_norm = LayerNorm(d_model=d_model, eps=eps)
        self.cross_attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads)
        self.cross_attn_norm = LayerNorm(d_model=d_model, eps=eps)
        self.ffn = FeedForward(d_model=d_model, d_ff=d_ff)
        self.ffn_norm = LayerNorm(d_model=d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, memory_allowed=None):
        t = x.shape[1]
        a = self.self_attn(x, allowed=causal_mask(t, t, device=x.device))
        x = self.self_attn_norm(x + self.dropout(a))
        c = self.cross_attn(x, memory, allowed=memory_allowed)  # read the source
        x = self.cross_attn_norm(x + self.dropout(c))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))
# --8<-- [end:decoder_layer]
