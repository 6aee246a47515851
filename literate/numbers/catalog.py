"""The blocks of published models, built from our parts and read back (chapter 7).

`PUBLISHED_BLOCKS` holds, once, the numbers each model's configuration publishes for one
decoder block (its Hugging Face config.json, cross-checked with its paper or report).
`published_block(spec)` builds that block with this library's builders; `describe_block`
reads every column of the table from the built object (the class gives the norm
placement, the modules give their widths, eps, RoPE settings, biases and activation);
`catalog_table` builds all of them on the meta device, where a tensor has a shape and a
dtype but no storage, so an 8-billion-parameter model's block costs no memory. The
tests compare each described cell with `expected_row(spec)`, the same cell written from
the published numbers, and each block's `.numel()` with `block_parameter_count(spec)`.

What the table cannot show is said in `PublishedBlock.not_modelled`: a published layer
that does something none of our parts does (a sliding attention window, RoPE position
scaling) is listed there, never silently dropped.
"""

# Over 450 lines on purpose: the catalog is one table (`PUBLISHED_BLOCKS`) and the
# functions that build, describe and count its rows, in ten sections (chapters 7 and 11
# show six); split, the table would sit apart from the reading of its cells.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.parts.blocks import (
    OutputNormBlock,
    ParallelBlock,
    PostNormBlock,
    PreNormBlock,
    SandwichBlock,
    cohere_block,
    gemma3_block,
    gptj_block,
    llama_block,
    neox_block,
    olmo2_block,
    qwen3_block,
)
from literate.parts.ffn import DenseFFN, GatedFFN, gelu_tanh
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import LayerNorm, RMSNorm, ZeroCentredRMSNorm

__all__ = [
    "PublishedBlock",
    "PUBLISHED_BLOCKS",
    "HF_ACTIVATIONS",
    "COLUMNS",
    "published_block",
    "describe_block",
    "expected_row",
    "block_parameter_count",
    "catalog_table",
    "render_markdown",
    "catalog_notes",
]


# --8<-- [start:published_block_spec]
@dataclass(frozen=True)
class PublishedBlock:
    """One decoder block of a published model: numbers only, with their sources."""

    name: str
    builder: str  # the function in `published_block` that builds it
    hf_repo: str  # the Hugging Face repository whose config.json gives the numbers
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    ffn: str  # "gated" (three matrices) or "dense" (two)
    d_ff: int
    hf_activation: str  # the config's own name for it (see HF_ACTIVATIONS)
    norm: str  # "RMSNorm", "RMSNorm (1 + w)", "LayerNorm", "LayerNorm (no bias)"
    eps: float
    placement: str  # as `describe_block` names the block classes
    qk_norm: str | None  # None, "head" (per head) or "projection" (before the split)
    rope_base: float
    rope_layout: str  # "half" (rotate-half) or "interleaved"
    rotary_dim: int  # how many of each head's d_head coordinates turn
    attn_bias: bool
    ffn_bias: bool
    query_pre_attn_scalar: float | None  # scores scaled by its -1/2 power; None: d_head
    tied: bool  # output projection = token embedding (a model fact, not a block's)
    paper: str  # the id of the paper or report in docs/appendix/references.md, or ""
    not_modelled: tuple[str, ...] = ()  # what the published layer does, ours does not

    @property
    def config_url(self) -> str:
        return f"https://huggingface.co/{self.hf_repo}/blob/main/config.json"
# --8<-- [end:published_block_spec]


# --8<-- [start:hf_activations]
# Hugging Face's names for the activations in these configs, and ours. gelu_new,
# gelu_fast and gelu_pytorch_tanh are three spellings of the tanh approximation of GELU
# (Hendrycks & Gimpel 2016, sec. 2); gelu_fast rounds sqrt(2/pi) to 10 digits. The tests
# check each name against transformers' own ACT2FN.
HF_ACTIVATIONS: dict[str, str] = {
    "silu": "silu",
    "gelu": "gelu",
    "gelu_new": "gelu (tanh)",
    "gelu_fast": "gelu (tanh)",
    "gelu_pytorch_tanh": "gelu (tanh)",
}
# --8<-- [end:hf_activations]


# --8<-- [start:published_blocks]
# Where each number comes from. The config.json files were read in copies that other
# public code embeds verbatim (named below), each agreeing with the model's paper.
PUBLISHED_BLOCKS: tuple[PublishedBlock, ...] = (
    # meta-llama/Meta-Llama-3-8B config.json (full copy in a Huawei test fixture,
    # another in a planner preset citing the file): hidden_size 4096,
    # num_attention_heads 32, num_key_value_heads 8 (head 4096 / 32 = 128),
    # intermediate_size 14336 (Meta's params.json: multiple_of 1024,
    # ffn_dim_multiplier 1.3), hidden_act silu, rms_norm_eps 1e-05, rope_theta
    # 500000.0, rope_scaling null, attention_bias false, tie_word_embeddings false.
    # Dubey et al. 2024, table 3.
    PublishedBlock(
        "Llama 3 8B", "llama_block", "meta-llama/Meta-Llama-3-8B",
        d_model=4096, n_heads=32, n_kv_heads=8, d_head=128, ffn="gated", d_ff=14336,
        hf_activation="silu", norm="RMSNorm", eps=1e-5, placement="pre-norm",
        qk_norm=None, rope_base=500_000.0, rope_layout="half", rotary_dim=128,
        attn_bias=False, ffn_bias=False, query_pre_attn_scalar=None, tied=False,
        paper="dubey-2024"),
    # mistralai/Mistral-7B-v0.1 config.json (copies in fusion_bench, citing
    # .../resolve/main/config.json, and in a course's config reader): hidden_size 4096,
    # 32 heads, 8 key/value heads, intermediate_size 14336, silu, rms_norm_eps 1e-05,
    # rope_theta 10000.0, sliding_window 4096, tie_word_embeddings false. Jiang et al.
    # 2023, table 1 (head_dim 128, window_size 4096).
    PublishedBlock(
        "Mistral 7B v0.1", "llama_block", "mistralai/Mistral-7B-v0.1",
        d_model=4096, n_heads=32, n_kv_heads=8, d_head=128, ffn="gated", d_ff=14336,
        hf_activation="silu", norm="RMSNorm", eps=1e-5, placement="pre-norm",
        qk_norm=None, rope_base=10_000.0, rope_layout="half", rotary_dim=128,
        attn_bias=False, ffn_bias=False, query_pre_attn_scalar=None, tied=False,
        paper="jiang-2023",
        not_modelled=(("sliding-window attention in every layer: a query reads only "
                       "the last 4,096 positions (sliding_window 4096); the block "
                       "built here with this chapter's attention reads all earlier "
                       "ones, the same computation up to 4,096 tokens (chapter 10 "
                       "builds the window)"),)),
    # Qwen/Qwen3-8B config.json (an ADR quoting it: 4096, 12288, 32 query / 8 key-value
    # heads, head_dim 128, untied), Qwen3-8B-Base's config.json (copy in
    # Chen-Oliver/qwen3-8b-base) and two 8B derivatives' configs (Qwen3-Reranker-8B,
    # DeepSeek-R1-0528-Qwen3-8B), all: head_dim 128, rms_norm_eps 1e-06, rope_theta
    # 1000000, attention_bias false, tie_word_embeddings false; MaxText's qwen3-8b.yml
    # agrees. Qwen3 modelling: QK-norm is an RMSNorm(head_dim) per head. Qwen Team 2025,
    # table 1.
    PublishedBlock(
        "Qwen3 8B", "qwen3_block", "Qwen/Qwen3-8B",
        d_model=4096, n_heads=32, n_kv_heads=8, d_head=128, ffn="gated", d_ff=12288,
        hf_activation="silu", norm="RMSNorm", eps=1e-6, placement="pre-norm",
        qk_norm="head", rope_base=1_000_000.0, rope_layout="half", rotary_dim=128,
        attn_bias=False, ffn_bias=False, query_pre_attn_scalar=None, tied=False,
        paper="qwen-2025"),
    # google/gemma-3-4b-pt config.json, text_config: hidden_size 2560, intermediate_size
    # 10240, rope_scaling {factor 8.0, rope_type linear}, sliding_window 1024; the rest
    # are Gemma3TextConfig's defaults (transformers 5.24, read here): 8 heads, 4
    # key/value heads, head_dim 256, query_pre_attn_scalar 256, hidden_activation
    # gelu_pytorch_tanh, rms_norm_eps 1e-06, rope_theta 1e6 on full-attention layers,
    # tie_word_embeddings true. The same values in MaxText's gemma3-4b.yml (Google),
    # ComfyUI's Gemma3_4B_Config (rope_scale [8.0, 1.0]) and flattened 4B test fixtures.
    # Gemma Team 2025, sec. 2 (global layers: base 1M, positional interpolation by 8).
    PublishedBlock(
        "Gemma 3 4B (global layer)", "gemma3_block", "google/gemma-3-4b-pt",
        d_model=2560, n_heads=8, n_kv_heads=4, d_head=256, ffn="gated", d_ff=10240,
        hf_activation="gelu_pytorch_tanh", norm="RMSNorm (1 + w)", eps=1e-6,
        placement="sandwich", qk_norm="head", rope_base=1_000_000.0, rope_layout="half",
        rotary_dim=256, attn_bias=False, ffn_bias=False, query_pre_attn_scalar=256.0,
        tied=True, paper="gemma-2025",
        not_modelled=(("RoPE position scaling: the global layers divide every "
                       "position by 8 before turning (rope_scaling linear, factor 8); "
                       "our RotaryEmbedding has no scaling factor"),
                      ("five of every six layers are local: a 1,024-token sliding "
                       "window with RoPE base 10,000; the row describes a global "
                       "layer (chapter 10 builds the local layers and the model)"))),
    # allenai/OLMo-2-1124-7B config.json (copy in a Megatron-bridge test, "Mirror of
    # allenai/OLMo-2-1124-7B/config.json"): hidden_size 4096, 32 heads, 32 key/value
    # heads, intermediate_size 11008, silu, rms_norm_eps 1e-06, rope_theta 500000.0,
    # attention_bias false, tie_word_embeddings false. Olmo2 modelling: q_norm and
    # k_norm are RMSNorms over the whole projections; the norms sit on the sublayer
    # outputs. OLMo Team 2024, sec. 3.
    PublishedBlock(
        "OLMo 2 7B", "olmo2_block", "allenai/OLMo-2-1124-7B",
        d_model=4096, n_heads=32, n_kv_heads=32, d_head=128, ffn="gated", d_ff=11008,
        hf_activation="silu", norm="RMSNorm", eps=1e-6, placement="output norm",
        qk_norm="projection", rope_base=500_000.0, rope_layout="half", rotary_dim=128,
        attn_bias=False, ffn_bias=False, query_pre_attn_scalar=None, tied=False,
        paper="olmo-2024"),
    # EleutherAI/gpt-j-6b config.json (full copies in several repositories):
    # activation_function gelu_new, n_embd 4096, n_head 16 (head 256), n_inner null
    # (HF's GPTJBlock: 4 * n_embd = 16384), rotary_dim 64, layer_norm_epsilon 1e-05,
    # tie_word_embeddings false. HF's GPT-J: q/k/v/out projections without bias, fc_in
    # and fc_out with bias, one LayerNorm, RoPE base 10000 in the code, rotate-every-two
    # (interleaved). Wang & Komatsuzaki 2021.
    PublishedBlock(
        "GPT-J 6B", "gptj_block", "EleutherAI/gpt-j-6b",
        d_model=4096, n_heads=16, n_kv_heads=16, d_head=256, ffn="dense", d_ff=16384,
        hf_activation="gelu_new", norm="LayerNorm", eps=1e-5,
        placement="parallel (one norm)", qk_norm=None, rope_base=10_000.0,
        rope_layout="interleaved", rotary_dim=64, attn_bias=False, ffn_bias=True,
        query_pre_attn_scalar=None, tied=False, paper="wang-2021"),
    # EleutherAI/gpt-neox-20b config.json (as cat'ed in huggingface/transformers PR
    # #16659, and a full copy in a distributed-inference repository): hidden_act
    # gelu_fast, hidden_size 6144, 64 heads (head 96), intermediate_size 24576,
    # layer_norm_eps 1e-05, rotary_pct 0.25 (int(96 * 0.25) = 24 rotated dims),
    # rotary_emb_base 10000, tie_word_embeddings false; use_parallel_residual and
    # attention_bias are absent: GPTNeoXConfig's defaults, True. Black et al. 2022.
    PublishedBlock(
        "GPT-NeoX 20B", "neox_block", "EleutherAI/gpt-neox-20b",
        d_model=6144, n_heads=64, n_kv_heads=64, d_head=96, ffn="dense", d_ff=24576,
        hf_activation="gelu_fast", norm="LayerNorm", eps=1e-5,
        placement="parallel (two norms)", qk_norm=None, rope_base=10_000.0,
        rope_layout="half", rotary_dim=24, attn_bias=True, ffn_bias=True,
        query_pre_attn_scalar=None, tied=False, paper="black-2022"),
    # CohereForAI/c4ai-command-r-v01 config.json: the GGUF converted from its snapshot
    # 9fe64d67 (metadata dumped in llama.cpp issue #6801): embedding_length 8192,
    # feed_forward_length 22528, head_count 64, head_count_kv 64, rope.freq_base 8e6;
    # a Rust test embedding the config: layer_norm_eps 1e-05, rope_theta 8000000.0,
    # tie_word_embeddings true, no use_qk_norm (so False, as in TGI's default). HF's
    # Cohere: one bias-free LayerNorm, interleaved RoPE, no biases. No paper: the model
    # card only.
    PublishedBlock(
        "Command R (35B, v01)", "cohere_block", "CohereForAI/c4ai-command-r-v01",
        d_model=8192, n_heads=64, n_kv_heads=64, d_head=128, ffn="gated", d_ff=22528,
        hf_activation="silu", norm="LayerNorm (no bias)", eps=1e-5,
        placement="parallel (one norm)", qk_norm=None, rope_base=8_000_000.0,
        rope_layout="interleaved", rotary_dim=128, attn_bias=False, ffn_bias=False,
        query_pre_attn_scalar=None, tied=True, paper=""),
)
# --8<-- [end:published_blocks]




# --8<-- [start:published_block]
def published_block(spec: PublishedBlock) -> nn.Module:
    """The block `spec` publishes, built by its builder from the published numbers.
    Under `with torch.device("meta"):` no parameter gets storage."""
    s = spec
    if s.builder == "llama_block":
        return llama_block(s.d_model, s.n_heads, s.n_kv_heads, s.d_ff,
                           rope_base=s.rope_base, eps=s.eps)
    if s.builder == "qwen3_block":
        return qwen3_block(s.d_model, s.n_heads, s.n_kv_heads, s.d_ff, d_head=s.d_head,
                           rope_base=s.rope_base, eps=s.eps)
    if s.builder == "gemma3_block":
        return gemma3_block(s.d_model, s.n_heads, s.n_kv_heads, s.d_ff, d_head=s.d_head,
                            query_pre_attn_scalar=s.query_pre_attn_scalar,
                            rope_base=s.rope_base, eps=s.eps)
    if s.builder == "olmo2_block":
        return olmo2_block(s.d_model, s.n_heads, s.n_kv_heads, s.d_ff,
                           rope_base=s.rope_base, eps=s.eps)
    if s.builder == "gptj_block":  # GPT-J's RoPE base is 10,000 in its code
        return gptj_block(s.d_model, s.n_heads, s.d_ff, rotary_dim=s.rotary_dim,
                          eps=s.eps)
    if s.builder == "neox_block":  # 20B's gelu_fast is the tanh form
        activation = gelu_tanh if HF_ACTIVATIONS[s.hf_activation] == "gelu (tanh)" \
            else F.gelu
        return neox_block(s.d_model, s.n_heads, s.d_ff,
                          rotary_pct=s.rotary_dim / s.d_head, rope_base=s.rope_base,
                          eps=s.eps, activation=activation)
    if s.builder == "cohere_block":
        return cohere_block(s.d_model, s.n_heads, s.n_kv_heads, s.d_ff,
                            rope_base=s.rope_base, eps=s.eps)
    raise ValueError(f"no builder named {s.builder!r} for {s.name}")
# --8<-- [end:published_block]


# --8<-- [start:cells]
COLUMNS = ("d_model", "heads", "kv heads", "head dim", "FFN", "FFN width", "activation",
           "norm", "norm eps", "placement", "residual", "QK-norm", "RoPE base",
           "RoPE layout", "rotary dims", "score scale", "biases")

QK_NORM = {None: "none", "head": "per head", "projection": "over projection"}
LAYOUT = {"half": "rotate-half", "interleaved": "interleaved"}


def number(x: float) -> str:
    """500000.0 -> "500,000"; 1e-05 -> "1e-05"."""
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"


def biases(attn: bool, ffn: bool) -> str:
    return ", ".join(n for n, b in (("attention", attn), ("FFN", ffn)) if b) or "none"
# --8<-- [end:cells]


# --8<-- [start:describe_block]
def norm_name(norm: nn.Module) -> str:
    """The table's name for one of our norm modules."""
    if type(norm) is RMSNorm:
        return "RMSNorm"
    if type(norm) is ZeroCentredRMSNorm:
        return "RMSNorm (1 + w)"
    if type(norm) is LayerNorm:
        return "LayerNorm" if norm.bias is not None else "LayerNorm (no bias)"
    raise TypeError(f"not one of our norms: {type(norm).__module__}."
                    f"{type(norm).__qualname__}")


def activation_name(fn: Callable[[Tensor], Tensor]) -> str:
    """The table's name for an FFN's activation function."""
    if isinstance(fn, partial) and fn.func is F.gelu and not fn.args \
            and fn.keywords == {"approximate": "tanh"}:
        return "gelu (tanh)"
    names = {F.silu: "silu", F.gelu: "gelu", F.relu: "relu"}
    if fn in names:
        return names[fn]
    raise ValueError(f"an activation the table has no name for: {fn!r}")


def block_norms(block: nn.Module) -> tuple[str, list[nn.Module]]:
    """The norm placement the block's class stands for, and its residual norms."""
    kind = type(block)
    if kind is ParallelBlock:
        if block.ffn_norm is None:
            return "parallel (one norm)", [block.attn_norm]
        return "parallel (two norms)", [block.attn_norm, block.ffn_norm]
    if kind is SandwichBlock:
        return "sandwich", [block.attn_norm, block.attn_out_norm, block.ffn_norm,
                            block.ffn_out_norm]
    if kind is OutputNormBlock:
        return "output norm", [block.attn_out_norm, block.ffn_out_norm]
    names = {PreNormBlock: "pre-norm", PostNormBlock: "post-norm"}
    if kind in names:
        return names[kind], [block.attn_norm, block.ffn_norm]
    raise TypeError(f"not a decoder block of ours: "
                    f"{kind.__module__}.{kind.__qualname__}")


def one(what: str, values: list[str]) -> str:
    if len(set(values)) != 1:
        raise ValueError(f"the block's {what} differ: {values}; a cell holds one value")
    return values[0]


def describe_block(block: nn.Module) -> dict[str, str]:
    """Every column of the table (COLUMNS), read from a built block: the placement
    from its class, the rest from its modules' attributes. Nothing is typed in."""
    placement, norms = block_norms(block)
    attn, ffn = block.attn, block.ffn
    if not isinstance(attn, MultiHeadAttention) \
            or type(ffn) not in (GatedFFN, DenseFFN):
        raise TypeError(f"need a MultiHeadAttention and a GatedFFN or DenseFFN, got "
                        f"{type(attn).__name__} and {type(ffn).__name__}")
    norm = one("norm kinds", [norm_name(n) for n in norms])
    eps = one("norm eps", [number(n.eps) for n in norms])
    qk = QK_NORM[attn.qk_norm]
    if attn.qk_norm is not None:  # say so if the QK-norms are not the block's kind
        qk_kind = one("QK-norm kinds", [norm_name(attn.q_norm), norm_name(attn.k_norm)])
        qk_eps = one("QK-norm eps", [number(attn.q_norm.eps), number(attn.k_norm.eps)])
        if (qk_kind, qk_eps) != (norm, eps):
            qk = f"{qk} ({qk_kind}, eps {qk_eps})"
    rope = attn.rope
    return {
        "d_model": str(block.d_model),
        "heads": str(attn.n_heads),
        "kv heads": str(attn.n_kv_heads),
        "head dim": str(attn.d_head),
        "FFN": "gated" if type(ffn) is GatedFFN else "dense",
        "FFN width": str(ffn.d_ff),
        "activation": activation_name(ffn.activation),
        "norm": norm,
        "norm eps": eps,
        "placement": placement,
        "residual": "parallel" if type(block) is ParallelBlock else "serial",
        "QK-norm": qk,
        "RoPE base": "none" if rope is None else number(rope.base),
        "RoPE layout": "none" if rope is None else LAYOUT[rope.layout],
        "rotary dims": ("none" if rope is None
                        else f"{rope.rotary_dim} of {rope.d_head}"),
        "score scale": (f"1/sqrt({attn.d_head})" if attn.scale is None
                        else f"1/sqrt({number(attn.scale ** -2)})"),
        "biases": biases(attn.q_proj.bias is not None, ffn.up_proj.bias is not None),
    }
# --8<-- [end:describe_block]


# --8<-- [start:expected_row]
def expected_row(spec: PublishedBlock) -> dict[str, str]:
    """The cells `describe_block` must read, written from the published numbers."""
    s = spec
    scalar = s.d_head if s.query_pre_attn_scalar is None else s.query_pre_attn_scalar
    return {
        "d_model": str(s.d_model), "heads": str(s.n_heads),
        "kv heads": str(s.n_kv_heads), "head dim": str(s.d_head),
        "FFN": s.ffn, "FFN width": str(s.d_ff),
        "activation": HF_ACTIVATIONS[s.hf_activation],
        "norm": s.norm, "norm eps": number(s.eps), "placement": s.placement,
        "residual": "parallel" if s.placement.startswith("parallel") else "serial",
        "QK-norm": QK_NORM[s.qk_norm], "RoPE base": number(s.rope_base),
        "RoPE layout": LAYOUT[s.rope_layout],
        "rotary dims": f"{s.rotary_dim} of {s.d_head}",
        "score scale": f"1/sqrt({number(scalar)})",
        "biases": biases(s.attn_bias, s.ffn_bias),
    }
# --8<-- [end:expected_row]


# --8<-- [start:block_parameter_count]
def block_parameter_count(spec: PublishedBlock) -> int:
    """Parameters of one block, from the published numbers, part by part: attention
    W_q [H d_head, d], W_k and W_v [H_kv d_head, d], W_o [d, H d_head] (+ biases), the
    FFN's three (gated) or two (dense) matrices (+ biases), the residual norms (gain,
    + shift for a LayerNorm with bias) and the QK-norms' gains."""
    s = spec
    d, q, kv = s.d_model, s.n_heads * s.d_head, s.n_kv_heads * s.d_head
    attention = d * q + 2 * d * kv + q * d + ((q + 2 * kv + d) if s.attn_bias else 0)
    matrices, hidden_biases = (3, 2) if s.ffn == "gated" else (2, 1)
    ffn = matrices * d * s.d_ff + ((hidden_biases * s.d_ff + d) if s.ffn_bias else 0)
    n_norms = {"pre-norm": 2, "output norm": 2, "sandwich": 4, "parallel (one norm)": 1,
               "parallel (two norms)": 2}[s.placement]
    norms = n_norms * d * (2 if s.norm == "LayerNorm" else 1)
    qk = {None: 0, "head": 2 * s.d_head, "projection": q + kv}[s.qk_norm]
    return attention + ffn + norms + qk
# --8<-- [end:block_parameter_count]


# --8<-- [start:catalog_table]
def catalog_table(specs: tuple[PublishedBlock, ...] = PUBLISHED_BLOCKS
                  ) -> list[dict[str, str]]:
    """One row per published block: its name, the cells `describe_block` reads from
    the block built on the meta device (no storage), and two facts of the whole model
    that no block holds, from the record: tied embeddings and the configuration."""
    rows = []
    with torch.device("meta"):
        for spec in specs:
            cells = describe_block(published_block(spec))
            rows.append({"model": spec.name, **cells,
                         "tied embeddings": "yes" if spec.tied else "no",
                         "config": spec.hf_repo})
    return rows
# --8<-- [end:catalog_table]


# --8<-- [start:render_markdown]
def render_markdown(rows: list[dict[str, str]]) -> str:
    """The table as Markdown, one model per column (the rows have ~20 cells), padded so
    that it also reads as plain text."""
    if not rows:
        raise ValueError("no rows to render")
    keys = [k for k in rows[0] if k != "model"]
    if any(list(row) != ["model", *keys] for row in rows):
        raise ValueError("every row must have the same cells, model first")
    table = [["", *(row["model"] for row in rows)]]
    table += [[key, *(row[key] for row in rows)] for key in keys]
    table = [[cell.replace("|", r"\|") for cell in line] for line in table]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |"
             for line in table]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def catalog_notes(specs: tuple[PublishedBlock, ...] = PUBLISHED_BLOCKS) -> str:
    """What each published layer does that its row's block does not (Markdown list)."""
    return "\n".join(f"- {s.name}: {note}." for s in specs for note in s.not_modelled)
# --8<-- [end:render_markdown]
