"""GPT-2 (Radford et al. 2019, sec. 2.3): the 2017 decoder without cross-attention, with
the LayerNorm moved in front of each sublayer (pre-norm), a GELU FFN, learned positions,
a final LayerNorm and an output projection tied to the token embedding. Shapes: B
batch, T tokens, V vocabulary, d_model model width.
"""

from __future__ import annotations

from torch import nn

from literate.minimal.attention import causal_mask
from literate.minimal.ffn import FeedForward, gelu_tanh
from literate.minimal.multi_head import MultiHeadAttention
from literate.minimal.norms import LayerNorm
from literate.minimal.positions import LearnedPositions


# --8<-- [start:gpt2_block]
class GPT2Block(nn.Module):
    """x = x + Attn(LN(x)); x = x + FFN(LN(x)): normalise what each sublayer reads,
    never the residual stream. Causal self-attention, biases, FFN of 4 d_model.
    Dropout where Hugging Face's GPT2Block has it, on each sublayer's output (HF also
    drops attention weights, attn_pdrop: not here)."""

    def __init__(self, *, d_model, n_heads, dropout=0.1, eps=1e-5):
        super().__init__()
        self.attn_norm = LayerNorm(d_model=d_model, eps=eps)
        self.attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads)
        self.ffn_norm = LayerNorm(d_model=d_model, eps=eps)
        self.ffn = FeedForward(d_model=d_model, d_ff=4 * d_model, activation=gelu_tanh)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        t = x.shape[1]
        allowed = causal_mask(t, t, device=x.device)  # [T, T]
        x = x + self.dropout(self.attn(self.attn_norm(x), allowed=allowed))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))
# --8<-- [end:gpt2_block]


# --8<-- [start:gpt2_model]
class GPT2Model(nn.Module):
    """ids [B, T] -> logits [B, T, V]: token + learned position embeddings, dropout,
    blocks, final LayerNorm, and lm_head = the token embedding (tied, Press & Wolf
    2017). logits[:, t] scores the token at t + 1."""

    def __init__(self, *, vocab_size, n_positions, d_model, n_heads, n_layers,
                 dropout=0.1, eps=1e-5):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)  # HF's wte
        self.positions = LearnedPositions(n_positions=n_positions, d_model=d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            GPT2Block(d_model=d_model, n_heads=n_heads, dropout=dropout, eps=eps)
            for _ in range(n_layers))
        self.final_norm = LayerNorm(d_model=d_model, eps=eps)  # HF's ln_f
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # tied: one [V, d] tensor

    def forward(self, ids):
        x = self.dropout(self.positions(self.token_embedding(ids)))  # [B, T, d_model]
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.final_norm(x))  # [B, T, V]
# --8<-- [end:gpt2_model]
