"""GPT-NeoX (Black et al. 2022; Pythia's architecture too) as a whole language model
that loads from Hugging Face's `GPTNeoXForCausalLM` (chapter 7).

Around chapter 7's `neox_block` (the parallel residual with two LayerNorms; with
`use_parallel_residual=False` the serial pre-norm block of the same parts), the model
has a token embedding (HF's `embed_in`), a final LayerNorm with a bias
(`final_layer_norm`) and an output projection of its own, without a bias (`embed_out`
in a checkpoint, `lm_head` in transformers 5's model; the embedding itself if
`tie_word_embeddings`). No position is added: RoPE turns the first quarter (by
default) of every head inside each attention. The model is chapter 7's
`LlamaLanguageModel` of these parts (`literate.models.parallel.parallel_model`), so
chapter 5's `generate` and chapter 8's cached one run it unchanged.

Loading: `gpt_neox_from_hf_config` (a `GPTNeoXConfig` or its config.json, older
files' `rotary_pct` and `rotary_emb_base` included), `check_gpt_neox_config`,
`load_hf_gpt_neox`: by name, each layer's packed `query_key_value` unpacked head by
head. Refused rather than changed, naming the field (`neox_block_from_hf_config`):
dropout, RoPE scaling, an activation other than the exact or tanh GELU, no biases.

Shapes: V vocabulary, d model width.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from literate.models.llama import (
    LlamaLanguageModel,
    check_model_type,
    load_renamed,
    tied_head_state,
)
from literate.models.parallel import (
    HF_NEOX_BLOCK_NAMES,
    check_parallel_model,
    gpt_neox_field,
    in_layers,
    neox_block_from_hf_config,
    neox_unpacked,
    parallel_model,
)
from literate.parts.checks import positive_int
from literate.parts.norms import LayerNorm

__all__ = [
    "gpt_neox_from_hf_config",
    "check_gpt_neox_config",
    "HF_GPT_NEOX_NAMES",
    "load_hf_gpt_neox",
]


# --8<-- [start:gpt_neox_from_hf_config]
def gpt_neox_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face GPT-NeoX configuration (a
    `GPTNeoXConfig` or its config.json dict): `num_hidden_layers` of
    `neox_block_from_hf_config`'s block, a final LayerNorm, an output projection
    without a bias (tied if `tie_word_embeddings`)."""
    check_model_type(config, "gpt_neox")
    d = gpt_neox_field(config, "hidden_size")
    vocab = gpt_neox_field(config, "vocab_size")
    n_layers = positive_int("config num_hidden_layers",
                            gpt_neox_field(config, "num_hidden_layers"))
    return parallel_model(
        vocab, gpt_neox_field(config, "max_position_embeddings"),
        [neox_block_from_hf_config(config) for _ in range(n_layers)],
        LayerNorm(d, eps=gpt_neox_field(config, "layer_norm_eps")),
        nn.Linear(d, vocab, bias=False),
        tied=gpt_neox_field(config, "tie_word_embeddings"),
        std=gpt_neox_field(config, "initializer_range"))
# --8<-- [end:gpt_neox_from_hf_config]


# --8<-- [start:check_gpt_neox_config]
def check_gpt_neox_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights into `ours` unless it is the model the configuration
    builds (`check_parallel_model`, against that model on the meta device)."""
    with torch.device("meta"):
        theirs = gpt_neox_from_hf_config(config)
    check_parallel_model(ours, theirs)


HF_GPT_NEOX_NAMES = [  # (Hugging Face's name pattern, ours), once unpacked
    (r"^gpt_neox\.embed_in\.", "token_embedding."),
    (r"^gpt_neox\.final_layer_norm\.", "final_norm."),
    *in_layers(r"gpt_neox\.layers\.", HF_NEOX_BLOCK_NAMES),
]
# --8<-- [end:check_gpt_neox_config]


# --8<-- [start:load_hf_gpt_neox]
def load_hf_gpt_neox(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                     config: object) -> LlamaLanguageModel:
    """Load a `GPTNeoXForCausalLM` state dict (or a checkpoint's, whose output
    projection is `embed_out`) by name, all or nothing, after
    `check_gpt_neox_config`: each layer's query_key_value unpacked head by head, the
    buffers older checkpoints store (causal masks, RoPE's frequencies) left out."""
    check_gpt_neox_config(ours, config)
    state = neox_unpacked(state_dict, ours.blocks[0].attn.n_heads)
    if "embed_out.weight" in state:  # a checkpoint's name for transformers 5's lm_head
        if "lm_head.weight" in state:
            raise ValueError("state_dict has both embed_out.weight and "
                             "lm_head.weight: one output projection")
        state["lm_head.weight"] = state.pop("embed_out.weight")
    state = tied_head_state(ours, state, embedding="gpt_neox.embed_in.weight")
    return load_renamed(ours, state, HF_GPT_NEOX_NAMES)
# --8<-- [end:load_hf_gpt_neox]
