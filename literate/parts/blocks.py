"""Transformer blocks, era by era, each composed from parts passed in.

A block never builds its attention, feed-forward or norm layers itself: the builder
functions at the bottom do (`encoder_layer_2017`, `decoder_layer_2017`, `gpt2_block`),
so a block class is only its residual topology, readable as the paper's equation. Its
norms are named by role, for the sublayer they serve: `attn_norm` (`self_attn_norm`,
`cross_attn_norm`), `ffn_norm` for the norm a sublayer reads through (pre-norm,
parallel) or that follows its residual sum (post-norm); `attn_out_norm`,
`ffn_out_norm` for a norm on the sublayer's output, inside the residual (the sandwich,
OLMo 2's output norms).

* `PostNormEncoderLayer`: x = self_attn_norm(x + Attn(x)); x = ffn_norm(x + FFN(x))
  (Vaswani et al. 2017, sec. 3.1)
* `PostNormDecoderLayer`: the same with a causal self-attention, then cross-attention
  over the encoder's output, then the FFN: three sublayers, each followed by add & norm.
* `PreNormBlock`: x = x + Attn(attn_norm(x)); x = x + FFN(ffn_norm(x))
  (GPT-2, Radford et al. 2019, sec. 2.3)
* `PostNormBlock`: the causal block with the 2017 placement, for comparison.

Dropout is applied to each sublayer's output before it is added to the residual stream
(Vaswani et al. 2017, sec. 5.4). Shapes: B batch, T target/sequence length, S source
length, d model width.
"""

# Over 450 lines on purpose: every block class is its residual topology in a dozen lines,
# and its builder sits beside it (the era's parts, checked once); apart, a chapter's
# include of a block and of the builder that makes it would come from two modules.

from __future__ import annotations

from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.parts.attention import EmptyRowPolicy
from literate.parts.cache import KVCache, MemoryKV
from literate.parts.checks import (
    checked_entry,
    input_checked,
    positive_float,
    positive_int,
    probability,
)
from literate.parts.ffn import DenseFFN, GatedFFN, gelu_tanh
from literate.parts.multi_head import MultiHeadAttention, head_counts
from literate.parts.norms import LayerNorm, RMSNorm, ZeroCentredRMSNorm
from literate.parts.positions import RotaryEmbedding

__all__ = [
    "same_width",
    "check_decoder_masks",
    "PostNormEncoderLayer",
    "PostNormDecoderLayer",
    "PreNormBlock",
    "PostNormBlock",
    "encoder_layer_2017",
    "decoder_layer_2017",
    "gpt2_block",
    "SandwichBlock",
    "OutputNormBlock",
    "ParallelBlock",
    "llama_block",
    "qwen3_block",
    "olmo2_block",
    "gemma3_block",
    "gptj_block",
    "neox_block",
    "cohere_block",
]


# --8<-- [start:same_width]
def same_width(**parts: object) -> int:
    """The width d_model that every part of a block shares. Refuses, naming the part,
    anything that is not a module with an int `d_model`, and parts of different widths
    (which would otherwise fail, or silently broadcast, deep inside a forward)."""
    widths = {}
    for name, part in parts.items():
        width = getattr(part, "d_model", None)
        if not isinstance(part, nn.Module) or isinstance(width, bool) \
                or not isinstance(width, int):
            kind = type(part).__qualname__  # torch's LayerNorm is not ours: say whose
            if type(part).__module__ != "builtins":
                kind = f"{type(part).__module__}.{kind}"
            raise TypeError(f"{name} must be an nn.Module with an int d_model (its "
                            f"width), got {kind}")
        widths[name] = width
    if len(set(widths.values())) != 1:
        raise ValueError(f"the parts must share one width d_model, got {widths}")
    return next(iter(widths.values()))
# --8<-- [end:same_width]


# --8<-- [start:post_norm_encoder_layer]
class PostNormEncoderLayer(nn.Module):
    """The 2017 encoder layer: self-attention, add & norm, FFN, add & norm.

    Bidirectional: every token sees every other real token; `key_valid [B, T]` hides
    padding. Dropout on each sublayer's output, before it is added (sec. 5.4).
    """

    def __init__(self, self_attn: MultiHeadAttention, ffn: nn.Module,
                 self_attn_norm: nn.Module, ffn_norm: nn.Module, *,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = same_width(self_attn=self_attn, ffn=ffn,
                                  self_attn_norm=self_attn_norm, ffn_norm=ffn_norm)
        self.self_attn, self.ffn = self_attn, ffn
        self.self_attn_norm, self.ffn_norm = self_attn_norm, ffn_norm
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor, *, key_valid: Tensor | None = None,
                empty_row: EmptyRowPolicy = "error") -> Tensor:
        a = self.self_attn(x, causal=False, key_valid=key_valid, empty_row=empty_row)
        x = self.self_attn_norm(x + self.dropout(a))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))
# --8<-- [end:post_norm_encoder_layer]


# --8<-- [start:post_norm_decoder_layer]
def check_decoder_masks(x: object, memory: object, cache: object, masks: dict) -> None:
    """Refuse the decoder's masks, name -> mask ({"target_valid": [B, T_k],
    "memory_valid": [B, S]}), by the names the caller gave them: its two attentions
    would report both as key_valid. Metadata only; x and memory are the layers' to
    check."""
    if not isinstance(x, Tensor) or x.ndim != 3:
        return
    t_k = x.shape[1] + (cache.next_pos if isinstance(cache, KVCache) else 0)
    s = (memory.k.shape[-2] if isinstance(memory, MemoryKV) else memory.shape[1]
         if isinstance(memory, Tensor) and memory.ndim == 3 else None)
    for (name, mask), n, what in zip(masks.items(), (t_k, s), ("T_k", "S")):
        if mask is None or n is None:
            continue
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            kind = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
            raise TypeError(f"{name} must be a bool tensor (True = may attend), got "
                            f"{kind}; convert a 0/1 mask with `mask == 1`")
        if mask.shape != (x.shape[0], n):
            raise ValueError(f"{name} must be [B={x.shape[0]}, {what}={n}] (one flag "
                             f"per key), got {tuple(mask.shape)}")


class PostNormDecoderLayer(nn.Module):
    """The 2017 decoder layer: masked self-attention, cross-attention, FFN, each
    followed by add & norm. The self-attention is always causal (there is no way to
    forget the mask); the cross-attention reads the encoder's output `memory [B, S, d]`,
    whose length S need not equal T, and is not causal: the whole source is known.
    Decoding (chapter 8) passes `cache` for the self-attention and `memory` as the
    cross-attention's keys and values, projected once (a MemoryKV).
    """

    def __init__(self, self_attn: MultiHeadAttention, cross_attn: MultiHeadAttention,
                 ffn: nn.Module, self_attn_norm: nn.Module, cross_attn_norm: nn.Module,
                 ffn_norm: nn.Module, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = same_width(self_attn=self_attn, cross_attn=cross_attn, ffn=ffn,
                                  self_attn_norm=self_attn_norm,
                                  cross_attn_norm=cross_attn_norm, ffn_norm=ffn_norm)
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn
        self.self_attn_norm, self.cross_attn_norm = self_attn_norm, cross_attn_norm
        self.ffn_norm = ffn_norm
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor, memory: Tensor | MemoryKV, *,
                target_valid: Tensor | None = None, memory_valid: Tensor | None = None,
                cache: KVCache | None = None,
                empty_row: EmptyRowPolicy = "error") -> Tensor:
        if not input_checked():  # each attention calls its mask key_valid
            check_decoder_masks(x, memory, cache, {"target_valid": target_valid,
                                                   "memory_valid": memory_valid})
        a = self.self_attn(x, causal=True, key_valid=target_valid, cache=cache,
                           empty_row=empty_row)
        x = self.self_attn_norm(x + self.dropout(a))
        c = self.cross_attn(x, memory, causal=False, key_valid=memory_valid,
                            empty_row=empty_row)
        x = self.cross_attn_norm(x + self.dropout(c))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))
# --8<-- [end:post_norm_decoder_layer]


# --8<-- [start:pre_norm_block]
class PreNormBlock(nn.Module):
    """The decoder-only block of GPT-2 and its descendants: normalise, transform, add.

    The residual stream x itself is never normalised, only what each sublayer reads, so
    the identity path from the first block to the last is untouched. Causal
    self-attention only: no cross-attention, no encoder, and no argument that turns the
    causal mask off. `key_valid` (padding), `cache` (a KVCache), `positions` (each
    row's own, for RoPE) and `empty_row` are passed on to the attention, as chapter 3
    defines them.
    """

    def __init__(self, attn: MultiHeadAttention, ffn: nn.Module, attn_norm: nn.Module,
                 ffn_norm: nn.Module, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = same_width(attn=attn, ffn=ffn, attn_norm=attn_norm,
                                  ffn_norm=ffn_norm)
        self.attn, self.ffn = attn, ffn
        self.attn_norm, self.ffn_norm = attn_norm, ffn_norm
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor, *, key_valid: Tensor | None = None,
                cache: KVCache | None = None, positions: Tensor | None = None,
                empty_row: EmptyRowPolicy = "error") -> Tensor:
        a = self.attn(self.attn_norm(x), causal=True, key_valid=key_valid, cache=cache,
                      positions=positions, empty_row=empty_row)
        x = x + self.dropout(a)
        return x + self.dropout(self.ffn(self.ffn_norm(x)))
# --8<-- [end:pre_norm_block]


# --8<-- [start:post_norm_block]
class PostNormBlock(nn.Module):
    """A causal decoder-only block with the 2017 placement, x = N(x + F(x)) (GPT-1,
    Radford et al. 2018, kept it): the comparison chapter 5 makes against `PreNormBlock`
    from the very same parts, so that the one thing that differs is where the norm sits.
    """

    def __init__(self, attn: MultiHeadAttention, ffn: nn.Module, attn_norm: nn.Module,
                 ffn_norm: nn.Module, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = same_width(attn=attn, ffn=ffn, attn_norm=attn_norm,
                                  ffn_norm=ffn_norm)
        self.attn, self.ffn = attn, ffn
        self.attn_norm, self.ffn_norm = attn_norm, ffn_norm
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor) -> Tensor:
        x = self.attn_norm(x + self.dropout(self.attn(x, causal=True)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))
# --8<-- [end:post_norm_block]


# --8<-- [start:sandwich_block]
class SandwichBlock(nn.Module):
    """Gemma 3's "sandwich": a norm before *and* after each sublayer, inside the
    residual. x = x + attn_out_norm(Attn(attn_norm(x)));
    x = x + ffn_out_norm(FFN(ffn_norm(x))). The output norms keep
    what each sublayer adds to the stream at a fixed scale."""

    def __init__(self, attn: MultiHeadAttention, ffn: nn.Module, attn_norm: nn.Module,
                 attn_out_norm: nn.Module, ffn_norm: nn.Module,
                 ffn_out_norm: nn.Module, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = same_width(attn=attn, ffn=ffn, attn_norm=attn_norm,
                                  attn_out_norm=attn_out_norm, ffn_norm=ffn_norm,
                                  ffn_out_norm=ffn_out_norm)
        self.attn, self.ffn = attn, ffn
        self.attn_norm, self.attn_out_norm = attn_norm, attn_out_norm
        self.ffn_norm, self.ffn_out_norm = ffn_norm, ffn_out_norm
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor, *, key_valid: Tensor | None = None,
                cache: KVCache | None = None, positions: Tensor | None = None,
                empty_row: EmptyRowPolicy = "error") -> Tensor:
        a = self.attn(self.attn_norm(x), causal=True, key_valid=key_valid, cache=cache,
                      positions=positions, empty_row=empty_row)
        x = x + self.dropout(self.attn_out_norm(a))
        return x + self.dropout(self.ffn_out_norm(self.ffn(self.ffn_norm(x))))
# --8<-- [end:sandwich_block]


# --8<-- [start:output_norm_block]
class OutputNormBlock(nn.Module):
    """OLMo 2's placement: each sublayer reads the stream as it is and its output is
    normalised before it is added. x = x + attn_out_norm(Attn(x));
    x = x + ffn_out_norm(FFN(x))."""

    def __init__(self, attn: MultiHeadAttention, ffn: nn.Module,
                 attn_out_norm: nn.Module, ffn_out_norm: nn.Module, *,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = same_width(attn=attn, ffn=ffn, attn_out_norm=attn_out_norm,
                                  ffn_out_norm=ffn_out_norm)
        self.attn, self.ffn = attn, ffn
        self.attn_out_norm, self.ffn_out_norm = attn_out_norm, ffn_out_norm
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor, *, key_valid: Tensor | None = None,
                cache: KVCache | None = None, positions: Tensor | None = None,
                empty_row: EmptyRowPolicy = "error") -> Tensor:
        a = self.attn(x, causal=True, key_valid=key_valid, cache=cache,
                      positions=positions, empty_row=empty_row)
        x = x + self.dropout(self.attn_out_norm(a))
        return x + self.dropout(self.ffn_out_norm(self.ffn(x)))
# --8<-- [end:output_norm_block]


# --8<-- [start:parallel_block]
class ParallelBlock(nn.Module):
    """The parallel residual (GPT-J, GPT-NeoX, PaLM, Cohere): attention and FFN both
    read the block's input and their outputs are added together.
    x = x + Attn(attn_norm(x)) + FFN(ffn_norm(x)); with ffn_norm=None the FFN reads
    attn_norm(x) too, one norm for both (GPT-J, PaLM, Cohere); GPT-NeoX has two."""

    def __init__(self, attn: MultiHeadAttention, ffn: nn.Module, attn_norm: nn.Module,
                 ffn_norm: nn.Module | None = None, *, dropout: float = 0.0) -> None:
        super().__init__()
        parts = {"attn": attn, "ffn": ffn, "attn_norm": attn_norm}
        if ffn_norm is not None:
            parts["ffn_norm"] = ffn_norm
        self.d_model = same_width(**parts)
        self.attn, self.ffn = attn, ffn
        self.attn_norm, self.ffn_norm = attn_norm, ffn_norm
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, x: Tensor, *, key_valid: Tensor | None = None,
                cache: KVCache | None = None, positions: Tensor | None = None,
                empty_row: EmptyRowPolicy = "error") -> Tensor:
        h = self.attn_norm(x)
        a = self.attn(h, causal=True, key_valid=key_valid, cache=cache,
                      positions=positions, empty_row=empty_row)
        f = self.ffn(h if self.ffn_norm is None else self.ffn_norm(x))
        return x + self.dropout(a) + self.dropout(f)
# --8<-- [end:parallel_block]


# --8<-- [start:builders_2017]
def encoder_layer_2017(d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.1,
                       eps: float = 1e-5) -> PostNormEncoderLayer:
    """Vaswani et al. 2017: post-norm, ReLU FFN, biases everywhere. The paper gives no
    LayerNorm eps: 1e-5 is PyTorch's default (tensor2tensor used 1e-6)."""
    d_model = positive_int("d_model", d_model)
    n_heads = positive_int("n_heads", n_heads)
    d_ff, eps = positive_int("d_ff", d_ff), positive_float("eps", eps)
    dropout = probability("dropout", dropout)
    with checked_entry():  # the parts trust the arguments checked above
        return PostNormEncoderLayer(
            MultiHeadAttention(d_model, n_heads, bias=True),
            DenseFFN(d_model, d_ff, F.relu, bias=True),
            LayerNorm(d_model, eps=eps),
            LayerNorm(d_model, eps=eps),
            dropout=dropout,
        )


def decoder_layer_2017(d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.1,
                       eps: float = 1e-5) -> PostNormDecoderLayer:
    """Vaswani et al. 2017: masked self- and cross-attention, ReLU FFN, post-norm; eps
    as in `encoder_layer_2017`."""
    d_model = positive_int("d_model", d_model)
    n_heads = positive_int("n_heads", n_heads)
    d_ff, eps = positive_int("d_ff", d_ff), positive_float("eps", eps)
    dropout = probability("dropout", dropout)
    with checked_entry():  # the parts trust the arguments checked above
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
def gpt2_block(d_model: int, n_heads: int, *, d_ff: int | None = None,
               dropout: float = 0.1, eps: float = 1e-5,
               activation: Callable[[Tensor], Tensor] = gelu_tanh) -> PreNormBlock:
    """Radford et al. 2019: pre-norm LayerNorm, biases, GELU (tanh form) FFN of 4d."""
    d_model = positive_int("d_model", d_model)
    n_heads = positive_int("n_heads", n_heads)
    d_ff = 4 * d_model if d_ff is None else positive_int("d_ff", d_ff)
    dropout, eps = probability("dropout", dropout), positive_float("eps", eps)
    with checked_entry():  # the parts trust the arguments checked above
        return PreNormBlock(
            MultiHeadAttention(d_model, n_heads, bias=True),
            DenseFFN(d_model, d_ff, activation, bias=True),
            LayerNorm(d_model, eps=eps),
            LayerNorm(d_model, eps=eps),
            dropout=dropout,
        )
# --8<-- [end:builder_gpt2]


# --8<-- [start:builder_llama]
def llama_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, *,
                d_head: int | None = None, rope_base: float = 10_000.0,
                eps: float = 1e-5,
                attention: Callable[..., MultiHeadAttention] = MultiHeadAttention,
                ) -> PreNormBlock:
    """Llama 2 and 3, Mistral (Touvron et al. 2023a, b; Dubey et al. 2024): pre-norm
    RMSNorm, grouped-query attention with RoPE, SwiGLU, no biases anywhere. `d_head`:
    d_model // n_heads unless given (Hugging Face's `head_dim`; Mistral NeMo's 128 is
    not 5120 / 32). `attention`: the layer's class (chapter 10's sliding window)."""
    d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads,
                                                       d_head)
    d_ff = positive_int("d_ff", d_ff)
    rope_base, eps = positive_float("rope_base", rope_base), positive_float("eps", eps)
    with checked_entry():  # the parts trust the arguments checked above
        return PreNormBlock(
            attention(d_model, n_heads, n_kv_heads, d_head=d_head,
                      rope=RotaryEmbedding(d_head, base=rope_base)),
            GatedFFN(d_model, d_ff, F.silu),
            RMSNorm(d_model, eps=eps),
            RMSNorm(d_model, eps=eps),
        )
# --8<-- [end:builder_llama]


# --8<-- [start:builder_qwen3]
def qwen3_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, *,
                d_head: int, rope_base: float = 1_000_000.0,
                eps: float = 1e-6) -> PreNormBlock:
    """Qwen3: Llama's block with QK-norm, an RMSNorm of each head's q and k before
    RoPE, and heads of their own width."""
    d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads,
                                                       d_head)
    d_ff = positive_int("d_ff", d_ff)
    rope_base, eps = positive_float("rope_base", rope_base), positive_float("eps", eps)
    with checked_entry():  # the parts trust the arguments checked above
        return PreNormBlock(
            MultiHeadAttention(d_model, n_heads, n_kv_heads, d_head=d_head,
                               rope=RotaryEmbedding(d_head, base=rope_base),
                               q_norm=RMSNorm(d_head, eps=eps),
                               k_norm=RMSNorm(d_head, eps=eps), qk_norm="head"),
            GatedFFN(d_model, d_ff, F.silu),
            RMSNorm(d_model, eps=eps),
            RMSNorm(d_model, eps=eps),
        )
# --8<-- [end:builder_qwen3]


# --8<-- [start:builder_olmo2]
def olmo2_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, *,
                rope_base: float = 500_000.0, eps: float = 1e-6) -> OutputNormBlock:
    """OLMo 2: QK-norm over the whole q and k projections (before the heads are
    split) and the norm on each sublayer's output, inside the residual."""
    d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads)
    d_ff = positive_int("d_ff", d_ff)
    rope_base, eps = positive_float("rope_base", rope_base), positive_float("eps", eps)
    with checked_entry():  # the parts trust the arguments checked above
        return OutputNormBlock(
            MultiHeadAttention(d_model, n_heads, n_kv_heads,
                               rope=RotaryEmbedding(d_head, base=rope_base),
                               q_norm=RMSNorm(n_heads * d_head, eps=eps),
                               k_norm=RMSNorm(n_kv_heads * d_head, eps=eps),
                               qk_norm="projection"),
            GatedFFN(d_model, d_ff, F.silu),
            RMSNorm(d_model, eps=eps),
            RMSNorm(d_model, eps=eps),
        )
# --8<-- [end:builder_olmo2]


# --8<-- [start:builder_gemma3]
def gemma3_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, *,
                 d_head: int, query_pre_attn_scalar: float,
                 rope_base: float = 1_000_000.0, eps: float = 1e-6,
                 attention: Callable[..., MultiHeadAttention] = MultiHeadAttention,
                 ) -> SandwichBlock:
    """Gemma 3 (a global-attention layer): the sandwich of zero-centred RMSNorms,
    QK-norm per head, scores scaled by query_pre_attn_scalar^-1/2, GeGLU.
    `attention`: the layer's class (chapter 10's sliding window, a local layer)."""
    d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads,
                                                       d_head)
    d_ff = positive_int("d_ff", d_ff)
    rope_base, eps = positive_float("rope_base", rope_base), positive_float("eps", eps)
    scale = positive_float("query_pre_attn_scalar", query_pre_attn_scalar) ** -0.5
    norm = partial(ZeroCentredRMSNorm, eps=eps)
    with checked_entry():  # the parts trust the arguments checked above
        return SandwichBlock(
            attention(d_model, n_heads, n_kv_heads, d_head=d_head,
                      rope=RotaryEmbedding(d_head, base=rope_base),
                      q_norm=norm(d_head), k_norm=norm(d_head), qk_norm="head",
                      scale=scale),
            GatedFFN(d_model, d_ff, gelu_tanh),
            norm(d_model), norm(d_model), norm(d_model), norm(d_model),
        )
# --8<-- [end:builder_gemma3]


# --8<-- [start:builders_parallel]
def gptj_block(d_model: int, n_heads: int, d_ff: int, *, rotary_dim: int,
               eps: float = 1e-5) -> ParallelBlock:
    """GPT-J (Wang & Komatsuzaki 2021): the parallel residual with one LayerNorm, RoPE
    on the first `rotary_dim` coordinates of each head (with the frequencies of a
    rotary_dim-wide head, base 10000 as in GPT-J's code), interleaved, no attention
    biases, a dense FFN with biases and the tanh GELU (HF's gelu_new)."""
    d_model, n_heads, _, d_head = head_counts(d_model, n_heads, None)
    d_ff, eps = positive_int("d_ff", d_ff), positive_float("eps", eps)
    rope = RotaryEmbedding(d_head, rotary_dim=rotary_dim, layout="interleaved")
    with checked_entry():  # the parts trust the arguments checked above
        return ParallelBlock(
            MultiHeadAttention(d_model, n_heads, rope=rope),
            DenseFFN(d_model, d_ff, gelu_tanh, bias=True),
            LayerNorm(d_model, eps=eps),
        )


def neox_block(d_model: int, n_heads: int, d_ff: int, *, rotary_pct: float = 0.25,
               rope_base: float = 10_000.0, eps: float = 1e-5,
               activation: Callable[[Tensor], Tensor] = F.gelu) -> ParallelBlock:
    """GPT-NeoX (Black et al. 2022) with `use_parallel_residual`: two LayerNorms (the
    FFN's norm reads the block's input, not the attention's output), RoPE rotate-half
    on the first int(d_head * rotary_pct) coordinates of each head, biases everywhere,
    exact GELU (Pythia's; `activation=gelu_tanh` for the tanh form)."""
    d_model, n_heads, _, d_head = head_counts(d_model, n_heads, None)
    d_ff, eps = positive_int("d_ff", d_ff), positive_float("eps", eps)
    rotary_dim = int(d_head * positive_float("rotary_pct", rotary_pct))  # HF's rule
    if rotary_pct > 1 or rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rotary_pct={rotary_pct} must be <= 1 and turn an even "
                         f"number >= 2 of d_head={d_head} coordinates, not "
                         f"{rotary_dim}")
    rope = RotaryEmbedding(d_head, base=rope_base, rotary_dim=rotary_dim)
    with checked_entry():  # the parts trust the arguments checked above
        return ParallelBlock(
            MultiHeadAttention(d_model, n_heads, bias=True, rope=rope),
            DenseFFN(d_model, d_ff, activation, bias=True),
            LayerNorm(d_model, eps=eps),
            LayerNorm(d_model, eps=eps),
        )


def cohere_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, *,
                 rope_base: float, eps: float = 1e-5) -> ParallelBlock:
    """Cohere (Command R): the parallel residual with one bias-free LayerNorm (the
    mean is still taken out), RoPE interleaved over the whole head, SwiGLU, no
    biases. No default base: Command R v01 turns with 8e6 (HF's default: 5e5)."""
    d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads)
    d_ff, eps = positive_int("d_ff", d_ff), positive_float("eps", eps)
    rope = RotaryEmbedding(d_head, base=rope_base, layout="interleaved")
    with checked_entry():  # the parts trust the arguments checked above
        return ParallelBlock(
            MultiHeadAttention(d_model, n_heads, n_kv_heads, rope=rope),
            GatedFFN(d_model, d_ff, F.silu),
            LayerNorm(d_model, eps=eps, bias=False),
        )
# --8<-- [end:builders_parallel]
