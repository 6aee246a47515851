"""GPT-J (Wang & Komatsuzaki 2021) as a whole language model that loads from Hugging
Face's `GPTJForCausalLM` (chapter 7).

Around chapter 7's `gptj_block` (the parallel residual with one LayerNorm, RoPE on the
first `rotary_dim` coordinates of each head, interleaved), the model has a token
embedding (HF's `wte`), a final LayerNorm (`ln_f`) and an output projection of its own
**with a bias** (`lm_head`: GPT-J's alone among the families here; with
`tie_word_embeddings` its weight is the embedding and the bias stays its own). No
position is added: RoPE turns inside each attention. The model is chapter 7's
`LlamaLanguageModel` of these parts (`literate.models.parallel.parallel_model`), so
chapter 5's `generate` and chapter 8's cached one run it unchanged.

Loading: `gptj_from_hf_config` (a `GPTJConfig` or its config.json), `check_gptj_config`,
`load_hf_gptj`, by name. Refused rather than changed, naming the field: dropout
(`embd_pdrop`, `resid_pdrop`, `attn_pdrop`), an activation other than GPT-J's tanh GELU
(`activation_function`), `rotary_dim=None`.

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
    tensor_mapping,
    tied_head_state,
)
from literate.models.parallel import (
    GPTJ_DEFAULTS,
    HF_GPTJ_BLOCK_NAMES,
    check_parallel_model,
    gptj_block_from_hf_config,
    gptj_field,
    in_layers,
    parallel_model,
    refuse_unsupported,
)
from literate.parts.checks import positive_int
from literate.parts.norms import LayerNorm

__all__ = [
    "gptj_from_hf_config",
    "check_gptj_config",
    "HF_GPTJ_NAMES",
    "load_hf_gptj",
]


# --8<-- [start:gptj_from_hf_config]
def gptj_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face GPT-J configuration (a `GPTJConfig` or
    its config.json dict): `n_layer` of `gptj_block_from_hf_config`'s block, a final
    LayerNorm, an output projection with a bias (its weight tied to the embedding if
    `tie_word_embeddings`). The embedding's dropout is refused, as the blocks' is."""
    check_model_type(config, "gptj")
    refuse_unsupported(config, {"embd_pdrop": 0.0}, GPTJ_DEFAULTS)
    d, vocab = gptj_field(config, "n_embd"), gptj_field(config, "vocab_size")
    n_layers = positive_int("config n_layer", gptj_field(config, "n_layer"))
    return parallel_model(
        vocab, positive_int("config n_positions", gptj_field(config, "n_positions")),
        [gptj_block_from_hf_config(config) for _ in range(n_layers)],
        LayerNorm(d, eps=gptj_field(config, "layer_norm_epsilon")),
        nn.Linear(d, vocab, bias=True),
        tied=gptj_field(config, "tie_word_embeddings"),
        std=gptj_field(config, "initializer_range"))
# --8<-- [end:gptj_from_hf_config]


# --8<-- [start:check_gptj_config]
def check_gptj_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights into `ours` unless it is the model the configuration
    builds (`check_parallel_model`, against that model on the meta device)."""
    with torch.device("meta"):
        theirs = gptj_from_hf_config(config)
    check_parallel_model(ours, theirs)


HF_GPTJ_NAMES = [  # (Hugging Face's name pattern, ours); lm_head: the same name
    (r"^transformer\.wte\.", "token_embedding."),
    (r"^transformer\.ln_f\.", "final_norm."),
    *in_layers(r"transformer\.h\.", HF_GPTJ_BLOCK_NAMES),
]
# --8<-- [end:check_gptj_config]


# --8<-- [start:load_hf_gptj]
def load_hf_gptj(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                 config: object) -> LlamaLanguageModel:
    """Load a `GPTJForCausalLM` state dict (or a checkpoint's) by name, all or
    nothing, after `check_gptj_config`. The causal-mask buffers older checkpoints
    store in every layer (`attn.bias`, `attn.masked_bias`: GPT-J's attention has no
    biases) are left out, as HF leaves them."""
    check_gptj_config(ours, config)
    state = {key: value for key, value in tensor_mapping("state_dict",
                                                          state_dict).items()
             if not key.endswith((".attn.bias", ".attn.masked_bias"))}
    state = tied_head_state(ours, state, embedding="transformer.wte.weight")
    return load_renamed(ours, state, HF_GPTJ_NAMES)
# --8<-- [end:load_hf_gptj]
