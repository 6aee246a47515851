"""Cohere's Command R as a whole language model that loads from Hugging Face's
`CohereForCausalLM` (chapter 7).

Around chapter 7's `cohere_block` (the parallel residual with one LayerNorm without a
bias, grouped-query attention, interleaved RoPE over the whole head, SwiGLU, no
biases), the model has a token embedding (HF's `embed_tokens`), a final LayerNorm
without a bias (`norm`) and an output projection that is the embedding by default
(`tie_word_embeddings`) and whose logits are multiplied by `logit_scale` (0.0625 in
Command R): `LogitScaledHead`, still the model's `lm_head`, so that chapter 8's cached
`generate` scales them too. The model is chapter 7's `LlamaLanguageModel` of these
parts (`literate.models.parallel.parallel_model`).

Loading: `cohere_from_hf_config` (a `CohereConfig` or its config.json, an older file's
`rope_theta` included), `check_cohere_config`, `load_hf_cohere`, by name. Refused
rather than changed, naming the field: `use_qk_norm` (Command R+'s per-head
LayerNorms of q and k), biases, dropout, another activation, RoPE scaling, a
`head_dim` other than hidden_size / heads, no `logit_scale`.

Hugging Face's Cohere computes its LayerNorms and its RoPE in float32 whatever the
input: in float64 it agrees with this model to float32's precision, not beyond.

Shapes: B batch, T tokens, V vocabulary, d model width.
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
    HF_COHERE_BLOCK_NAMES,
    check_parallel_model,
    cohere_block_from_hf_config,
    cohere_field,
    in_layers,
    parallel_model,
)
from literate.parts.checks import positive_float, positive_int
from literate.parts.norms import LayerNorm

__all__ = [
    "LogitScaledHead",
    "cohere_logit_scale",
    "cohere_from_hf_config",
    "check_cohere_config",
    "HF_COHERE_NAMES",
    "load_hf_cohere",
]


# --8<-- [start:logit_scaled_head]
class LogitScaledHead(nn.Linear):
    """An output projection whose logits are multiplied by a fixed `scale`: x [B, T, d]
    -> scale * x W^T [B, T, V], as `CohereForCausalLM` computes them (the product
    after the matmul, by a Python float). An nn.Linear of [V, d] still, so the model
    ties it and its check reads it as any output projection."""

    def __init__(self, d_model: int, vocab_size: int, *, scale: float) -> None:
        super().__init__(positive_int("d_model", d_model),
                         positive_int("vocab_size", vocab_size), bias=False)
        self.scale = positive_float("scale", scale)

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x) * self.scale

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, scale={self.scale}"
# --8<-- [end:logit_scaled_head]


# --8<-- [start:cohere_from_hf_config]
def cohere_logit_scale(config: object) -> float:
    """The config's `logit_scale`, which `CohereForCausalLM` multiplies its logits by
    (None, which HF cannot run, is refused by name)."""
    scale = cohere_field(config, "logit_scale")
    if scale is None:
        raise ValueError("config logit_scale=None is not supported: CohereForCausalLM "
                         "multiplies its logits by it")
    return positive_float("config logit_scale", scale)


def cohere_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face Cohere configuration (a `CohereConfig`
    or its config.json dict): `num_hidden_layers` of `cohere_block_from_hf_config`'s
    block, a final LayerNorm without a bias, a `LogitScaledHead` (the embedding if
    `tie_word_embeddings`, as in Command R)."""
    check_model_type(config, "cohere")
    d = cohere_field(config, "hidden_size")
    vocab = cohere_field(config, "vocab_size")
    n_layers = positive_int("config num_hidden_layers",
                            cohere_field(config, "num_hidden_layers"))
    return parallel_model(
        vocab, cohere_field(config, "max_position_embeddings"),
        [cohere_block_from_hf_config(config) for _ in range(n_layers)],
        LayerNorm(d, eps=cohere_field(config, "layer_norm_eps"), bias=False),
        LogitScaledHead(d, vocab, scale=cohere_logit_scale(config)),
        tied=cohere_field(config, "tie_word_embeddings"),
        std=cohere_field(config, "initializer_range"))
# --8<-- [end:cohere_from_hf_config]


# --8<-- [start:check_cohere_config]
def check_cohere_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights into `ours` unless it is the model the configuration
    builds (`check_parallel_model`, against that model on the meta device): its logit
    scale too."""
    with torch.device("meta"):
        theirs = cohere_from_hf_config(config)
    check_parallel_model(ours, theirs)


HF_COHERE_NAMES = [  # (Hugging Face's name pattern, ours); lm_head: the same name
    (r"^model\.embed_tokens\.", "token_embedding."),
    (r"^model\.norm\.", "final_norm."),
    *in_layers(r"model\.layers\.", HF_COHERE_BLOCK_NAMES),
]
# --8<-- [end:check_cohere_config]


# --8<-- [start:load_hf_cohere]
def load_hf_cohere(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                   config: object) -> LlamaLanguageModel:
    """Load a `CohereForCausalLM` state dict (or a checkpoint's, whose tied head is
    stored once) by name, all or nothing, after `check_cohere_config`."""
    check_cohere_config(ours, config)
    return load_renamed(ours, tied_head_state(ours, state_dict), HF_COHERE_NAMES)
# --8<-- [end:load_hf_cohere]
