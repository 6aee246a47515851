"""Mistral 7B (Jiang et al. 2023): chapter 7's Llama whose every attention has a sliding
window (chapter 10).

The window itself (its mask, its ring cache, `SlidingWindowAttention`) is a part,
`literate/parts/window.py`; this family module builds the model from it (`mistral_block`,
`mistral_model`) and loads a Hugging Face `MistralForCausalLM` by Llama's names
(`mistral_from_hf_config`, `check_mistral_config`, `load_hf_mistral`). A config whose
`sliding_window` is None (Mistral 7B v0.2 and later) is a Llama.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from torch import Tensor

from literate.models.llama import (
    LlamaLanguageModel,
    check_llama_config,
    check_model_type,
    config_object,
    llama_field,
    llama_from_hf_config,
    llama_model,
    load_hf_llama,
)
from literate.parts.blocks import PreNormBlock, llama_block
from literate.parts.checks import positive_int
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.window import SlidingWindowAttention, layer_window

__all__ = [
    "mistral_block",
    "mistral_model",
    "mistral_window",
    "without_window",
    "mistral_from_hf_config",
    "check_mistral_config",
    "load_hf_mistral",
]


# --8<-- [start:mistral]
def mistral_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, *,
                  window: int, **options: object) -> PreNormBlock:
    """Mistral 7B's block: chapter 7's `llama_block` (`options`: its d_head,
    rope_base, eps) whose attention has a sliding window (its `sliding_window`,
    4096)."""
    window = positive_int("window", window)  # llama_block's parts trust it
    attention = partial(SlidingWindowAttention, window=window)
    return llama_block(d_model, n_heads, n_kv_heads, d_ff, attention=attention,
                       **options)


def mistral_model(vocab_size: int, context: int, d_model: int, n_heads: int,
                  n_kv_heads: int, n_layers: int, d_ff: int, *, window: int,
                  **options: object) -> LlamaLanguageModel:
    """A Mistral of any size: chapter 7's `llama_model` (`options`: its d_head,
    rope_base, eps, tied, std) with a sliding window in every layer."""
    window = positive_int("window", window)  # llama_model's parts trust it
    attention = partial(SlidingWindowAttention, window=window)
    return llama_model(vocab_size, context, d_model, n_heads, n_kv_heads, n_layers,
                       d_ff, attention=attention, **options)


def mistral_window(config: object) -> int | None:
    """A Mistral configuration's (a MistralConfig or its config.json dict) window:
    `sliding_window`, every layer's (None: none, as in Mistral 7B v0.2 and later). A
    `layer_types` list that mixes kinds is refused: Mistral's layers are all alike."""
    window = llama_field(config, "sliding_window")
    kinds = set((config.get("layer_types") if isinstance(config, Mapping)
                 else getattr(config, "layer_types", None)) or ())
    kind = "full_attention" if window is None else "sliding_attention"
    if kinds - {kind}:
        raise ValueError(f"config layer_types={sorted(kinds)} is not supported (ours: "
                         f"every layer {kind!r}, as sliding_window says)")
    return None if window is None else positive_int("sliding_window", window)


def without_window(config: object) -> dict:
    """The configuration as chapter 7 reads it (which refuses a window): a dict of its
    fields, `sliding_window` None. Everything else of a Mistral is a Llama's."""
    llama_field(config, "sliding_window")  # refuses a model id, None...
    fields = dict(config) if isinstance(config, Mapping) else config.to_dict()
    return fields | {"sliding_window": None}


def mistral_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face Mistral configuration: chapter 7's
    `llama_from_hf_config`, every attention a SlidingWindowAttention of the config's
    window (none: a Llama)."""
    check_model_type(config_object("config", config), "mistral")
    window = mistral_window(config)
    attention = (MultiHeadAttention if window is None
                 else partial(SlidingWindowAttention, window=window))
    return llama_from_hf_config(without_window(config), attention=attention)


def check_mistral_config(ours: LlamaLanguageModel, config: object) -> None:
    """Chapter 7's `check_llama_config`, and every layer's window against
    `sliding_window`, naming both sides."""
    check_llama_config(ours, without_window(config))
    window = mistral_window(config)
    for block in ours.blocks:
        if layer_window(block.attn) != window:
            raise ValueError(f"ours has window={layer_window(block.attn)!r}, theirs "
                             f"sliding_window={window!r}")


def load_hf_mistral(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                    config: object) -> LlamaLanguageModel:
    """Load a `MistralForCausalLM` state dict by Llama's names (`load_hf_llama`),
    after `check_mistral_config`."""
    check_mistral_config(ours, config)
    return load_hf_llama(ours, state_dict, without_window(config))
# --8<-- [end:mistral]
