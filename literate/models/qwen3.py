"""Qwen3's dense language model (Qwen Team 2025), around chapter 7's `qwen3_block`.

Qwen3's model is Llama's (`LlamaLanguageModel`: token embedding, blocks, final RMSNorm,
an output projection of its own or the embedding, tied as in Qwen3 0.6B to 4B) whose
blocks are `qwen3_block`s: Llama's block with QK-norm, an RMSNorm of each head's q and
k before RoPE (Hugging Face's `self_attn.q_norm` and `self_attn.k_norm`, of width
d_head), and heads of a width of their own (`head_dim`: 128 in every Qwen3, though
Qwen3 0.6B's d / H is 64). Checking the ids and generating are chapter 5's, unchanged.

Weights load from Hugging Face's `Qwen3ForCausalLM` by Llama's names, after the
configuration is checked: `qwen3_from_hf_config`, `check_qwen3_config`,
`load_hf_qwen3`. Refused rather than changed, naming the field: biases, another
activation, attention dropout, a sliding window (`use_sliding_window`, or sliding
layers in `layer_types`) and any RoPE scaling.

Shapes: B batch, T tokens, V vocabulary, d model width.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from torch import Tensor, nn

from literate.models.llama import (
    HF_LLAMA_NAMES,
    LlamaLanguageModel,
    check_model_type,
    config_field,
    llama_init_,
    llama_rope_base,
    load_renamed,
    refuse_mismatches,
    tied_head_state,
)
from literate.parts.blocks import PreNormBlock, qwen3_block
from literate.parts.checks import boolean, checked_entry, positive_float, positive_int
from literate.parts.ffn import GatedFFN
from literate.parts.norms import RMSNorm

__all__ = [
    "qwen3_model",
    "QWEN3_DEFAULTS",
    "qwen3_field",
    "QWEN3_UNSUPPORTED",
    "check_qwen3_supported",
    "qwen3_from_hf_config",
    "check_qwen3_config",
    "HF_QWEN3_NAMES",
    "load_hf_qwen3",
]


# --8<-- [start:qwen3_model]
def qwen3_model(vocab_size: int, context: int, d_model: int, n_heads: int,
                n_kv_heads: int, n_layers: int, d_ff: int, *, d_head: int,
                rope_base: float = 1_000_000.0, eps: float = 1e-6, tied: bool = False,
                std: float = 0.02) -> LlamaLanguageModel:
    """A Qwen3 of any size: chapter 7's `LlamaLanguageModel` with `qwen3_block`s,
    initialised as Hugging Face does (`llama_init_`: weights ~ N(0, std^2), gains 1).
    `tied`: the output projection is the token embedding (Qwen3 0.6B to 4B)."""
    vocab_size = positive_int("vocab_size", vocab_size)
    context, n_layers = positive_int("context", context), positive_int("n_layers",
                                                                       n_layers)
    tied, std = boolean("tied", tied), positive_float("std", std)
    block = partial(qwen3_block, d_model, n_heads, n_kv_heads, d_ff, d_head=d_head,
                    rope_base=rope_base, eps=eps)
    blocks = [block()]  # qwen3_block checks a block's arguments
    with checked_entry():  # the other layers and the model's parts trust them
        blocks += [block() for _ in range(n_layers - 1)]
        model = LlamaLanguageModel(
            nn.Embedding(vocab_size, d_model),
            blocks,
            RMSNorm(d_model, eps=eps),
            None if tied else nn.Linear(d_model, vocab_size, bias=False),
            context=context,
        )
        return llama_init_(model, std=std)
# --8<-- [end:qwen3_model]


# --8<-- [start:qwen3_from_hf_config]
# transformers' Qwen3Config defaults, for what a config.json leaves out (RoPE: no
# rope_parameters and no rope_theta is base 10,000, as for Llama; every released Qwen3
# gives 1,000,000)
QWEN3_DEFAULTS = {
    "num_key_value_heads": 32, "head_dim": 128, "hidden_act": "silu",
    "max_position_embeddings": 32768, "initializer_range": 0.02, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False, "rope_parameters": None, "rope_theta": 10_000.0,
    "rope_scaling": None, "attention_bias": False, "attention_dropout": 0.0,
    "use_sliding_window": False, "layer_types": None,
}


def qwen3_field(config: object, name: str) -> object:
    """`config.name` of a Qwen3Config, or `config[name]` of its config.json."""
    return config_field(config, name, QWEN3_DEFAULTS)


QWEN3_UNSUPPORTED = {  # a field, and the one value our Qwen3 has for it
    "attention_bias": False, "hidden_act": "silu", "attention_dropout": 0.0,
    "use_sliding_window": False,
}


def check_qwen3_supported(config: object) -> None:
    """Refuse, rather than change, what our Qwen3 does not do (Qwen3-MoE's configs
    share these fields and defaults): biases on q, k, v and o, another activation,
    attention dropout, a sliding window (`use_sliding_window`, or a layer of
    `layer_types` that is not "full_attention": windows are chapter 10's). RoPE
    scaling: `llama_rope_base`."""
    for name, needed in QWEN3_UNSUPPORTED.items():
        if qwen3_field(config, name) != needed:
            raise ValueError(f"config {name}={qwen3_field(config, name)!r} is not "
                             f"supported (ours: {needed!r})")
    kinds = qwen3_field(config, "layer_types") or []
    if any(kind != "full_attention" for kind in kinds):
        raise ValueError(f"config layer_types={kinds!r} is not supported (ours: "
                         "every layer 'full_attention')")


def qwen3_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face Qwen3 configuration (a Qwen3Config or
    its config.json dict). Refused rather than changed: `check_qwen3_supported`, and
    a RoPE scaling (`llama_rope_base`)."""
    check_model_type(config, "qwen3")
    check_qwen3_supported(config)
    d = qwen3_field(config, "hidden_size")
    heads = qwen3_field(config, "num_attention_heads")
    return qwen3_model(qwen3_field(config, "vocab_size"),
                       qwen3_field(config, "max_position_embeddings"), d, heads,
                       qwen3_field(config, "num_key_value_heads") or heads,
                       qwen3_field(config, "num_hidden_layers"),
                       qwen3_field(config, "intermediate_size"),
                       d_head=qwen3_field(config, "head_dim") or d // heads,
                       rope_base=llama_rope_base(config),
                       eps=qwen3_field(config, "rms_norm_eps"),
                       tied=qwen3_field(config, "tie_word_embeddings"),
                       std=qwen3_field(config, "initializer_range"))
# --8<-- [end:qwen3_from_hf_config]


# --8<-- [start:check_qwen3_config]
def check_qwen3_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights between models of different shape or function, naming
    both sides; a model whose blocks are not Qwen3's (QK-norm per head, a gated FFN)
    is a TypeError."""
    if not isinstance(ours, LlamaLanguageModel) or not all(
            isinstance(b, PreNormBlock) and getattr(b.attn, "qk_norm", None) == "head"
            and isinstance(b.ffn, GatedFFN) for b in ours.blocks):
        raise TypeError(f"ours must be a LlamaLanguageModel of qwen3_blocks, got "
                        f"{type(ours).__name__}")
    check_qwen3_supported(config)
    block = ours.blocks[0]
    d = qwen3_field(config, "hidden_size")
    heads = qwen3_field(config, "num_attention_heads")
    refuse_mismatches([
        ("vocab_size", ours.vocab_size, "vocab_size",
         qwen3_field(config, "vocab_size")),
        ("d_model", ours.d_model, "hidden_size", d),
        ("n_layers", len(ours.blocks), "num_hidden_layers",
         qwen3_field(config, "num_hidden_layers")),
        ("n_heads", block.attn.n_heads, "num_attention_heads", heads),
        ("n_kv_heads", block.attn.n_kv_heads, "num_key_value_heads",
         qwen3_field(config, "num_key_value_heads") or heads),
        ("d_head", block.attn.d_head, "head_dim",
         qwen3_field(config, "head_dim") or d // heads),
        ("d_ff", block.ffn.d_ff, "intermediate_size",
         qwen3_field(config, "intermediate_size")),
        ("eps", block.attn_norm.eps, "rms_norm_eps",
         qwen3_field(config, "rms_norm_eps")),
        ("rope_base", block.attn.rope.base, "rope_theta", llama_rope_base(config)),
        ("tied", ours.lm_head.weight is ours.token_embedding.weight,
         "tie_word_embeddings", qwen3_field(config, "tie_word_embeddings")),
    ])
# --8<-- [end:check_qwen3_config]


# --8<-- [start:load_hf_qwen3]
# Llama's names: HF's self_attn.q_norm and k_norm are our attn.q_norm and k_norm
HF_QWEN3_NAMES = HF_LLAMA_NAMES


def load_hf_qwen3(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                  config: object) -> LlamaLanguageModel:
    """Load a `Qwen3ForCausalLM` state dict (or a checkpoint's safetensors) by name,
    after `check_qwen3_config`; a tied head is stored once or equal to the
    embedding (`tied_head_state`)."""
    check_qwen3_config(ours, config)
    return load_renamed(ours, tied_head_state(ours, state_dict), HF_QWEN3_NAMES)
# --8<-- [end:load_hf_qwen3]
