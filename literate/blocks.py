"""Transformer blocks, era by era, each composed from parts passed in.

A block never builds its attention, feed-forward or norm layers itself: the builder
functions at the bottom do (`encoder_layer_2017`, `decoder_layer_2017`, `gpt2_block`), so
a block class is only its residual topology, readable as the paper's equation:

* `PostNormEncoderLayer`: x = N1(x + Attn(x)); x = N2(x + FFN(x))   (Vaswani et al. 2017, sec. 3.1)
* `PostNormDecoderLayer`: the same with a causal self-attention, then cross-attention over
  the encoder's output, then the FFN: three sublayers, each followed by add & norm.
* `PreNormBlock`: x = x + Attn(N1(x)); x = x + FFN(N2(x))   (GPT-2, Radford et al. 2019, sec. 2.3)

Dropout is applied to each sublayer's output before it is added to the residual stream
(Vaswani et al. 2017, sec. 5.4). Shapes: B batch, T target/sequence length, S source
length, d model width.
"""

from __future__ import annotations

from typing import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from literate.attention import EmptyRowPolicy
from literate.checks import bool_tensor, float_tensor, positive_int, probability
from literate.ffn import DenseFFN, gelu_tanh
from literate.cache import KVCache
from literate.heads import MultiHeadAttention
from literate.norms import LayerNorm

__all__ = [
    "PostNormEncoderLayer",
    "PostNormDecoderLayer",
    "PreNormBlock",
    "encoder_layer_2017",
    "decoder_layer_2017",
    "gpt2_block",
]


def dropout_layer(p: object) -> nn.Dropout:
    """Dropout on a sublayer's output, after checking the rate is in [0, 1)."""
    return nn.Dropout(probability("dropout", p))


def check_valid(name: str, valid: object, batch: int, length: int) -> Tensor | None:
    """A padding mask `[B, length]`, True = a real token, checked under the caller's name."""
    if valid is None:
        return None
    valid = bool_tensor(name, valid)
    if valid.shape != (batch, length):
        raise ValueError(f"{name} must be [B={batch}, {length}], got {tuple(valid.shape)}")
    return valid


def check_stream(name: str, x: object) -> Tensor:
    """The residual stream must be a finite float tensor [B, T, d]."""
    x = float_tensor(name, x, min_ndim=3)
    if x.ndim != 3:
        raise ValueError(f"{name} must have shape [B, T, d], got {tuple(x.shape)}")
    return x


# --8<-- [start:post_norm_encoder_layer]
class PostNormEncoderLayer(nn.Module):
    """The 2017 encoder layer: self-attention, add & norm, FFN, add & norm.

    Bidirectional: every token sees every other real token; `key_valid [B, T]` hides padding.
    """

    def __init__(self, self_attn: MultiHeadAttention, ffn: nn.Module, norm1: nn.Module,
                 norm2: nn.Module, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.self_attn, self.ffn, self.norm1, self.norm2 = self_attn, ffn, norm1, norm2
        self.dropout = dropout_layer(dropout)

    def forward(self, x: Tensor, *, key_valid: Tensor | None = None,
                empty_row: EmptyRowPolicy = "error") -> Tensor:
        x = check_stream("x", x)
        key_valid = check_valid("key_valid", key_valid, x.shape[0], x.shape[1])
        a = self.self_attn(x, causal=False, key_valid=key_valid, empty_row=empty_row)
        x = self.norm1(x + self.dropout(a))
        x = self.norm2(x + self.dropout(self.ffn(x)))
        return x
# --8<-- [end:post_norm_encoder_layer]


# --8<-- [start:post_norm_decoder_layer]
class PostNormDecoderLayer(nn.Module):
    """The 2017 decoder layer: masked self-attention, cross-attention, FFN, each followed by
    add & norm. The self-attention is always causal (there is no way to forget the mask);
    the cross-attention reads the encoder's output `memory [B, S, d]`, whose length S need
    not equal T, and is not causal: the whole source is known.
    """

    def __init__(self, self_attn: MultiHeadAttention, cross_attn: MultiHeadAttention,
                 ffn: nn.Module, norm1: nn.Module, norm2: nn.Module, norm3: nn.Module,
                 *, dropout: float = 0.0) -> None:
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn
        self.norm1, self.norm2, self.norm3 = norm1, norm2, norm3
        self.dropout = dropout_layer(dropout)

    def forward(self, x: Tensor, memory: Tensor, *, target_valid: Tensor | None = None,
                memory_valid: Tensor | None = None, empty_row: EmptyRowPolicy = "error") -> Tensor:
        x = check_stream("x", x)
        memory = check_stream("memory", memory)
        target_valid = check_valid("target_valid", target_valid, x.shape[0], x.shape[1])
        memory_valid = check_valid("memory_valid", memory_valid, memory.shape[0], memory.shape[1])
        a = self.self_attn(x, causal=True, key_valid=target_valid, empty_row=empty_row)
        x = self.norm1(x + self.dropout(a))
        c = self.cross_attn(x, memory, causal=False, key_valid=memory_valid, empty_row=empty_row)
        x = self.norm2(x + self.dropout(c))
        x = self.norm3(x + self.dropout(self.ffn(x)))
        return x
# --8<-- [end:post_norm_decoder_layer]


# --8<-- [start:pre_norm_block]
class PreNormBlock(nn.Module):
    """The decoder-only block of GPT-2 and its descendants: normalise, transform, add.

    The residual stream x itself is never normalised, only what each sublayer reads, so
    the identity path from the first block to the last is untouched. Causal self-attention
    only: no cross-attention, no encoder.
    """

    def __init__(self, attn: MultiHeadAttention, ffn: nn.Module, norm1: nn.Module,
                 norm2: nn.Module, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.attn, self.ffn, self.norm1, self.norm2 = attn, ffn, norm1, norm2
        self.dropout = dropout_layer(dropout)

    def forward(self, x: Tensor, *, key_valid: Tensor | None = None, cache: KVCache | None = None,
                empty_row: EmptyRowPolicy = "error") -> Tensor:
        x = check_stream("x", x)
        a = self.attn(self.norm1(x), causal=True, key_valid=key_valid, cache=cache, empty_row=empty_row)
        x = x + self.dropout(a)
        x = x + self.dropout(self.ffn(self.norm2(x)))
        return x
# --8<-- [end:pre_norm_block]


# --8<-- [start:builders_2017]
def encoder_layer_2017(d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.1,
                       eps: float = 1e-5) -> PostNormEncoderLayer:
    """Vaswani et al. 2017: post-norm, ReLU FFN, biases everywhere."""
    return PostNormEncoderLayer(
        MultiHeadAttention(d_model, n_heads, bias=True),
        DenseFFN(d_model, d_ff, F.relu, bias=True),
        LayerNorm(d_model, eps=eps),
        LayerNorm(d_model, eps=eps),
        dropout=dropout,
    )


def decoder_layer_2017(d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.1,
                       eps: float = 1e-5) -> PostNormDecoderLayer:
    """Vaswani et al. 2017: masked self-attention, cross-attention, ReLU FFN, post-norm."""
    return PostNormDecoderLayer(
        MultiHeadAttention(d_model, n_heads, bias=True),
        MultiHeadAttention(d_model, n_heads, bias=True),
        DenseFFN(d_model, d_ff, F.relu, bias=True),
        LayerNorm(d_model, eps=eps),
        LayerNorm(d_model, eps=eps),
        LayerNorm(d_model, eps=eps),
        dropout=dropout,
    )
# --8<-- [end:builders_2017]


# --8<-- [start:builder_gpt2]
def gpt2_block(d_model: int, n_heads: int, *, d_ff: int | None = None, dropout: float = 0.1,
               eps: float = 1e-5, activation: Callable[[Tensor], Tensor] = gelu_tanh) -> PreNormBlock:
    """Radford et al. 2019: pre-norm LayerNorm, biases, GELU (tanh form) FFN of width 4d."""
    d_ff = 4 * positive_int("d_model", d_model) if d_ff is None else d_ff
    return PreNormBlock(
        MultiHeadAttention(d_model, n_heads, bias=True),
        DenseFFN(d_model, d_ff, activation, bias=True),
        LayerNorm(d_model, eps=eps),
        LayerNorm(d_model, eps=eps),
        dropout=dropout,
    )
# --8<-- [end:builder_gpt2]
