"""Gemma 3's text model: local and global layers (chapter 10).

Gemma 3 (Gemma Team 2025) interleaves two kinds of layer, five local to one global:
a local layer ("sliding_attention") reads only a sliding window of the last
`sliding_window` positions (1,024 in Gemma 3 4B, 12B and 27B, 512 in the 1B and 270M) and turns RoPE with base
10,000; a global one ("full_attention") reads every earlier position, with base
1,000,000. Only the global layers' KV cache grows with the context; a local layer's is a
ring of `sliding_window` slots (`literate.parts.window.RingKVCache`). Every layer is
chapter 7's `gemma3_block`, given its base and, if local, a SlidingWindowAttention.

Around the blocks, Gemma 3's model differs from Llama's in one place: the token
embedding is multiplied by sqrt(d_model), the factor rounded to the embedding's dtype
as Gemma's code does (Hugging Face: `Gemma3TextScaledWordEmbedding`). The final norm is
zero-centred like the blocks' and the output projection is the embedding (tied). The
model is chapter 7's `LlamaLanguageModel` otherwise, so chapter 8's `generate` decodes
it, each layer with its own kind of cache.

Loading from Hugging Face's `Gemma3ForCausalLM` (a `Gemma3TextConfig`, or the
`config.json` of a text-only checkpoint): `gemma3_from_hf_config`,
`check_gemma3_config`, `load_hf_gemma3`. RoPE scaling: "linear" (the 4B-27B models'
global layers interpolate positions by 8, `LinearScaledRotaryEmbedding`) for either
kind of layer. Refused rather than changed, naming the field: any other RoPE scaling,
logit soft-capping (Gemma 2's; Gemma 3 has none), bidirectional attention, biases,
attention dropout, another activation.

Shapes: B batch, T tokens, V vocabulary, d model width.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import torch
from torch import Tensor, nn

from literate.models.llama import (
    HF_LLAMA_NAMES,
    LlamaLanguageModel,
    config_field,
    load_renamed,
    refuse_mismatches,
    tied_head_state,
)
from literate.parts.blocks import gemma3_block
from literate.parts.checks import (
    boolean,
    checked_entry,
    choice,
    non_negative_int,
    positive_float,
    positive_int,
)
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import ZeroCentredRMSNorm
from literate.parts.rope_scaling import LinearScaledRotaryEmbedding
from literate.parts.window import LAYER_TYPES, SlidingWindowAttention, layer_window

__all__ = [
    "Gemma3LanguageModel",
    "gemma3_layer_types",
    "gemma3_model",
    "layer_windows",
    "GEMMA3_DEFAULTS",
    "gemma3_field",
    "gemma3_rope_bases",
    "gemma3_rope_settings",
    "check_gemma3_supported",
    "gemma3_from_hf_config",
    "check_gemma3_config",
    "HF_GEMMA3_NAMES",
    "load_hf_gemma3",
    "GEMMA3_ROPE_TYPES",
    "GEMMA3_UNSUPPORTED",
]


# --8<-- [start:gemma3_language_model]
class Gemma3LanguageModel(LlamaLanguageModel):
    """ids [B, T] -> token embedding x sqrt(d) -> blocks (local and global) -> final
    norm -> logits [B, T, V]: Llama's model with Gemma's embedding scale. The scale is
    a float32 buffer cast with the model, as Hugging Face's `embed_scale` is: rounded
    to bfloat16 in a bfloat16 model (sqrt(2560) = 50.596 is 50.5), as Gemma's own code
    rounds it, and kept at its float32 rounding by `.double()`. `parts`:
    LlamaLanguageModel's."""

    def __init__(self, *parts: object, **options: object) -> None:
        super().__init__(*parts, **options)
        # a buffer (not in the state dict): it follows the model's dtype and device
        self.register_buffer("embed_scale", torch.tensor(self.d_model**0.5),
                             persistent=False)

    def embed(self, ids: Tensor, *, offset: int = 0,
              positions: Tensor | None = None) -> Tensor:
        x = self.token_embedding(ids)  # [B, T, d]
        return x * self.embed_scale.to(x.dtype)


def gemma3_layer_types(n_layers: int, *, pattern: int = 6) -> list[str]:
    """Gemma 3's interleaving: every `pattern`-th layer global, the others local (5:1;
    Hugging Face's default when a config has no `layer_types`)."""
    n_layers, pattern = positive_int("n_layers", n_layers), positive_int("pattern",
                                                                         pattern)
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
            for i in range(n_layers)]


def gemma3_model(vocab_size: int, context: int, d_model: int, n_heads: int,
                 n_kv_heads: int, d_ff: int, *, d_head: int,
                 layer_types: Sequence[str], window: int | None,
                 query_pre_attn_scalar: float, local_base: float = 10_000.0,
                 global_base: float = 1_000_000.0, local_factor: float | None = None,
                 global_factor: float | None = None, eps: float = 1e-6,
                 tied: bool = True, pad_id: int | None = None,
                 std: float = 0.02) -> Gemma3LanguageModel:
    """A Gemma 3 text model of any size: one `gemma3_block` per entry of `layer_types`,
    "sliding_attention" with a SlidingWindowAttention of `window` and RoPE base
    `local_base`, "full_attention" with chapter 3's attention and `global_base`; a
    kind given a factor (`local_factor`, `global_factor`; None: none) turns its
    positions with LinearScaledRotaryEmbedding instead of the plain RotaryEmbedding.
    Initialised as Hugging Face does: linear maps and the embedding ~ N(0, std^2),
    every norm's w = 0 (gain 1), the `pad_id` row of the embedding 0 (it gets no
    gradient either, as in `nn.Embedding(padding_idx=...)`)."""
    vocab_size = positive_int("vocab_size", vocab_size)
    context, tied = positive_int("context", context), boolean("tied", tied)
    local_base = positive_float("local_base", local_base)
    global_base = positive_float("global_base", global_base)
    kinds = [choice("layer_types[]", kind, LAYER_TYPES) for kind in layer_types]
    if not kinds:
        raise ValueError("layer_types must name at least one layer")
    std = positive_float("std", std)
    factors = {kind: None if factor is None else positive_float(name, factor)
               for kind, name, factor in (("sliding_attention", "local_factor",
                                           local_factor),
                                          ("full_attention", "global_factor",
                                           global_factor))}
    if "sliding_attention" in kinds:
        window = positive_int("window", window)
    elif window is not None:
        raise ValueError(f"window={window} is given, but no layer is local")
    if pad_id is not None and non_negative_int("pad_id", pad_id) >= vocab_size:
        raise ValueError(f"pad_id={pad_id} must be < vocab_size={vocab_size}")
    local = partial(SlidingWindowAttention, window=window)

    def layer(kind: str) -> nn.Module:
        sliding = kind == "sliding_attention"
        return gemma3_block(d_model, n_heads, n_kv_heads, d_ff, d_head=d_head,
                            query_pre_attn_scalar=query_pre_attn_scalar, eps=eps,
                            attention=local if sliding else MultiHeadAttention,
                            rope_base=local_base if sliding else global_base)

    blocks = [layer(kinds[0])]  # gemma3_block checks a block's arguments
    with checked_entry():  # the other layers and the model's parts trust them
        blocks += [layer(kind) for kind in kinds[1:]]
        for block, kind in zip(blocks, kinds):
            if factors[kind] is not None:  # the same base, its frequencies / factor
                block.attn.rope = LinearScaledRotaryEmbedding(
                    block.attn.d_head, base=block.attn.rope.base, factor=factors[kind])
        model = Gemma3LanguageModel(
            nn.Embedding(vocab_size, d_model, padding_idx=pad_id),
            blocks,
            ZeroCentredRMSNorm(d_model, eps=eps),
            None if tied else nn.Linear(d_model, vocab_size, bias=False),
            context=context,
        )
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, std)
        if pad_id is not None:
            model.token_embedding.weight[pad_id].zero_()
    return model


def layer_windows(model: nn.Module) -> list[int | None]:
    """The window of each block's attention, in order; None for a global layer."""
    return [layer_window(block.attn) for block in model.blocks]
# --8<-- [end:gemma3_language_model]


# --8<-- [start:gemma3_from_hf_config]
GEMMA3_DEFAULTS = {  # transformers' Gemma3TextConfig (5.24), for what config.json omits
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131_072, "initializer_range": 0.02,
    "rms_norm_eps": 1e-6, "pad_token_id": 0, "tie_word_embeddings": True,
    "rope_parameters": None, "attention_bias": False, "attention_dropout": 0.0,
    "query_pre_attn_scalar": 256, "sliding_window": 4096, "layer_types": None,
    "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "use_bidirectional_attention": False, "model_type": "gemma3_text",
    # the older config.json fields, before rope_parameters and layer_types
    "sliding_window_pattern": 6, "rope_theta": 1_000_000.0,
    "rope_local_base_freq": 10_000.0, "rope_scaling": None,
}


def gemma3_field(config: object, name: str) -> object:
    """`config.name` of a Gemma3TextConfig, or `config[name]` of its config.json, with
    Gemma3TextConfig's default for what it leaves out."""
    return config_field(config, name, GEMMA3_DEFAULTS)


GEMMA3_ROPE_TYPES = ("default", "linear")  # the rope_type values our Gemma 3 turns


def gemma3_rope_settings(config: object) -> dict[str, dict[str, float | None]]:
    """The RoPE of each layer type, {"base": ..., "factor": ...}, read as
    Gemma3TextConfig reads it. transformers 5 keeps one dict per type in
    `rope_parameters` ({"sliding_attention": {"rope_type", "rope_theta"},
    "full_attention": {...}}); an older config.json has `rope_theta` (global),
    `rope_local_base_freq` (local) and `rope_scaling`, which Hugging Face merges into
    the global layers' dict only. rope_type "default" (factor None) and "linear" (its
    `factor` > 0, for LinearScaledRotaryEmbedding) are ours; any other is refused,
    naming the field, and so is a `type` that says otherwise than the `rope_type`
    transformers 5 reads (older versions read `type`)."""
    parameters = gemma3_field(config, "rope_parameters") or {}
    # a config object's rope_scaling is its rope_parameters; a config.json's is its own
    scaling = (gemma3_field(config, "rope_scaling") if isinstance(config, Mapping)
               else None)
    thetas = {"sliding_attention": gemma3_field(config, "rope_local_base_freq"),
              "full_attention": gemma3_field(config, "rope_theta")}
    settings = {}
    for kind in LAYER_TYPES:
        given = dict(parameters.get(kind) or {"rope_type": "default"})
        field, shown = f"rope_parameters[{kind!r}]", parameters.get(kind)
        if kind == "full_attention" and scaling:  # HF: full_attention.update(scaling)
            given |= scaling
            field, shown = "rope_scaling", scaling
        rope_type = given.get("rope_type", given.get("type", "default"))
        if given.get("type", rope_type) != rope_type:
            raise ValueError(f"config {field}={shown!r} is ambiguous: transformers 5 "
                             f"reads rope_type ({rope_type!r} here) and ignores "
                             f"type={given['type']!r}, which older versions read; "
                             "give rope_type")
        if rope_type not in GEMMA3_ROPE_TYPES:
            raise ValueError(f"config {field}={shown!r} is not supported (ours: "
                             "rope_type 'default', or 'linear' with a factor)")
        factor = None
        if rope_type == "linear":
            if given.get("factor") is None:
                raise ValueError(f"config {field}={shown!r}: rope_type 'linear' needs "
                                 "a factor")
            factor = positive_float(f"config {field}['factor']", given["factor"])
        settings[kind] = {"base": float(given.get("rope_theta", thetas[kind])),
                          "factor": factor}
    return settings


def gemma3_rope_bases(config: object) -> dict[str, float]:
    """The RoPE base of each layer type (`gemma3_rope_settings`)."""
    return {kind: rope["base"] for kind, rope in gemma3_rope_settings(config).items()}


GEMMA3_UNSUPPORTED = {  # a field, and the one value our Gemma 3 has for it
    "attention_bias": False, "attention_dropout": 0.0,
    "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": None,
    "attn_logit_softcapping": None, "use_bidirectional_attention": False,
}


def check_gemma3_supported(config: object) -> list[str]:
    """Refuse, naming the field, what our Gemma 3 does not do (GEMMA3_UNSUPPORTED, a
    multimodal config, layer types other than the two, RoPE scaling other than
    linear); return the layer types (from `layer_types`, or the older
    `sliding_window_pattern`)."""
    if gemma3_field(config, "model_type") != "gemma3_text":
        raise ValueError(f"config model_type={gemma3_field(config, 'model_type')!r} is "
                         "not supported: pass a Gemma3TextConfig (a multimodal "
                         "Gemma3Config's text_config)")
    for name, needed in GEMMA3_UNSUPPORTED.items():
        if gemma3_field(config, name) != needed:
            raise ValueError(f"config {name}={gemma3_field(config, name)!r} is not "
                             f"supported (ours: {needed!r})")
    n_layers = gemma3_field(config, "num_hidden_layers")
    kinds = gemma3_field(config, "layer_types") or gemma3_layer_types(
        n_layers, pattern=gemma3_field(config, "sliding_window_pattern"))
    if len(kinds) != n_layers or set(kinds) - set(LAYER_TYPES):
        raise ValueError(f"config layer_types={list(kinds)!r} must give one of "
                         f"{list(LAYER_TYPES)} for each of the {n_layers} layers")
    gemma3_rope_settings(config)
    return list(kinds)


def gemma3_from_hf_config(config: object) -> Gemma3LanguageModel:
    """Our model in the shape of a Hugging Face Gemma 3 text configuration (a
    Gemma3TextConfig or its config.json dict). Refused rather than changed:
    `check_gemma3_supported`."""
    kinds = check_gemma3_supported(config)
    rope = gemma3_rope_settings(config)
    local_rope, global_rope = rope["sliding_attention"], rope["full_attention"]

    def field(name: str) -> object:
        return gemma3_field(config, name)

    local = "sliding_attention" in kinds
    return gemma3_model(
        field("vocab_size"), field("max_position_embeddings"), field("hidden_size"),
        field("num_attention_heads"), field("num_key_value_heads"),
        field("intermediate_size"), d_head=field("head_dim"), layer_types=kinds,
        window=field("sliding_window") if local else None,
        query_pre_attn_scalar=field("query_pre_attn_scalar"),
        local_base=local_rope["base"], global_base=global_rope["base"],
        local_factor=local_rope["factor"], global_factor=global_rope["factor"],
        eps=field("rms_norm_eps"), tied=bool(field("tie_word_embeddings")),
        pad_id=field("pad_token_id"), std=field("initializer_range"))
# --8<-- [end:gemma3_from_hf_config]


# --8<-- [start:check_gemma3_config]
def check_gemma3_config(ours: Gemma3LanguageModel, config: object) -> None:
    """Refuse to copy weights between models of different shape or function, naming
    both sides: the sizes, and each layer's window, RoPE kind, base and factor (1:
    none)."""
    if not isinstance(ours, Gemma3LanguageModel):
        raise TypeError(f"ours must be a Gemma3LanguageModel, "
                        f"got {type(ours).__name__}")
    kinds = check_gemma3_supported(config)
    rope = gemma3_rope_settings(config)
    block = ours.blocks[0]

    def field(name: str) -> object:
        return gemma3_field(config, name)

    pairs = [
        ("vocab_size", ours.vocab_size, "vocab_size", field("vocab_size")),
        ("d_model", ours.d_model, "hidden_size", field("hidden_size")),
        ("n_layers", len(ours.blocks), "num_hidden_layers", field("num_hidden_layers")),
        ("n_heads", block.attn.n_heads, "num_attention_heads",
         field("num_attention_heads")),
        ("n_kv_heads", block.attn.n_kv_heads, "num_key_value_heads",
         field("num_key_value_heads")),
        ("d_head", block.attn.d_head, "head_dim", field("head_dim")),
        ("d_ff", block.ffn.d_ff, "intermediate_size", field("intermediate_size")),
        ("eps", block.attn_norm.eps, "rms_norm_eps", field("rms_norm_eps")),
        ("scale", block.attn.scale, "query_pre_attn_scalar^-1/2",
         field("query_pre_attn_scalar") ** -0.5),
        ("tied", ours.lm_head.weight is ours.token_embedding.weight,
         "tie_word_embeddings", bool(field("tie_word_embeddings"))),
        ("pad_id", ours.token_embedding.padding_idx, "pad_token_id",
         field("pad_token_id")),
    ]
    for i, (b, kind) in enumerate(zip(ours.blocks, kinds)):
        window = field("sliding_window") if kind == "sliding_attention" else None
        factor = rope[kind]["factor"]
        pairs += [(f"blocks[{i}] window", layer_window(b.attn),
                   f"sliding_window ({kind})", window),
                  (f"blocks[{i}] rope", type(b.attn.rope).__name__,
                   f"rope ({kind})", "RotaryEmbedding" if factor is None
                   else "LinearScaledRotaryEmbedding"),
                  (f"blocks[{i}] rope_base", b.attn.rope.base,
                   f"rope_theta ({kind})", rope[kind]["base"]),
                  (f"blocks[{i}] rope_factor", getattr(b.attn.rope, "factor", 1.0),
                   f"factor ({kind})", 1.0 if factor is None else factor)]
    refuse_mismatches(pairs)


HF_GEMMA3_NAMES = [  # Llama's names but the norms; the sandwich's four, role to role
    *(pair for pair in HF_LLAMA_NAMES if "layernorm" not in pair[0]),
    (r"^model\.layers\.(\d+)\.input_layernorm\.", r"blocks.\1.attn_norm."),
    (r"^model\.layers\.(\d+)\.post_attention_layernorm\.",
     r"blocks.\1.attn_out_norm."),
    (r"^model\.layers\.(\d+)\.pre_feedforward_layernorm\.", r"blocks.\1.ffn_norm."),
    (r"^model\.layers\.(\d+)\.post_feedforward_layernorm\.",
     r"blocks.\1.ffn_out_norm."),
]


def load_hf_gemma3(ours: Gemma3LanguageModel, state_dict: Mapping[str, Tensor],
                   config: object) -> Gemma3LanguageModel:
    """Load a `Gemma3ForCausalLM` state dict by name, after `check_gemma3_config`:
    attention (with `q_norm`, `k_norm`) and MLP as `load_hf_llama` names them, the
    sandwich's norms role to role (`input_layernorm` -> attn_norm,
    `post_attention_layernorm` -> attn_out_norm, `pre_feedforward_layernorm` ->
    ffn_norm, `post_feedforward_layernorm` -> ffn_out_norm); the head tied to the
    embedding."""
    check_gemma3_config(ours, config)
    return load_renamed(ours, tied_head_state(ours, state_dict), HF_GEMMA3_NAMES)
# --8<-- [end:check_gemma3_config]
