"""gpt-oss (OpenAI 2025): chapter 7's Llama model with chapter 10's attention sinks and
sliding windows and chapter 9's gpt-oss mixture of experts.

Every block is pre-norm RMSNorm; its attention is a `SinkAttention` (grouped-query,
RoPE, biases on q, k, v and o, one learned sink logit per head), in the layers
`layer_types` calls "sliding_attention" a `SlidingWindowSinkAttention` of window
`sliding_window` (128 in the released models, every other layer, the first sliding);
its FFN a `MoEFFN` with gpt-oss's biased router (`gpt_oss_router`: top k of the logits,
then a softmax over those k) and `GptOssExperts` (clamped SwiGLU, biases). The RoPE of
the released configs is YaRN (factor 32 over 4096 positions, truncate False: chapter
10's `YarnRotaryEmbedding`).

* `gpt_oss_block`, `gpt_oss_init_`, `gpt_oss_model`: build one;
* `gpt_oss_from_hf_config`, `check_gpt_oss_config`, `load_hf_gpt_oss`: from a Hugging
  Face `GptOssConfig` (or its config.json dict) and `GptOssForCausalLM`'s weights, by
  Llama's names (HF's `mlp.router` is our `ffn.router`, `self_attn.sinks` our
  `attn.sinks`);
* `gpt_oss_aux_loss`: the balancing loss HF returns with `output_router_logits=True`.

Shapes: B batch, T tokens, V vocabulary, d model width, E experts, I expert width.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import torch
from torch import Tensor, nn

from literate.models.llama import (
    HF_LLAMA_NAMES,
    LlamaLanguageModel,
    check_model_type,
    config_field,
    load_renamed,
    refuse_mismatches,
    tied_head_state,
)
from literate.models.mixtral import model_balancing_loss
from literate.parts.blocks import PreNormBlock
from literate.parts.checks import (
    boolean,
    checked_entry,
    non_negative_int,
    positive_float,
    positive_int,
)
from literate.parts.moe import GptOssExperts, MoEFFN
from literate.parts.multi_head import head_counts
from literate.parts.norms import RMSNorm
from literate.parts.positions import RotaryEmbedding
from literate.parts.rope_scaling import (
    YarnRotaryEmbedding,
    rope_settings,
    yarn_settings,
)
from literate.parts.routers import Router, gpt_oss_router
from literate.parts.sinks import SinkAttention, SlidingWindowSinkAttention
from literate.parts.window import LAYER_TYPES, layer_window

__all__ = [
    "gpt_oss_block",
    "gpt_oss_init_",
    "gpt_oss_model",
    "gpt_oss_field",
    "gpt_oss_rope",
    "gpt_oss_windows",
    "gpt_oss_from_hf_config",
    "check_gpt_oss_config",
    "HF_GPT_OSS_NAMES",
    "load_hf_gpt_oss",
    "gpt_oss_aux_loss",
]


# --8<-- [start:gpt_oss_block]
def gpt_oss_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int,
                  n_experts: int, top_k: int, *, d_head: int | None = None,
                  window: int | None = None, rope: RotaryEmbedding | None = None,
                  rope_base: float = 150_000.0, eps: float = 1e-5, bias: bool = True,
                  alpha: float = 1.702, limit: float = 7.0) -> PreNormBlock:
    """gpt-oss's block: pre-norm RMSNorm; grouped-query attention with sinks, biases
    and RoPE (`rope`, else plain RoPE of `rope_base`), over a sliding `window` or
    (None) every earlier position; `n_experts` clamped-SwiGLU experts of width `d_ff`
    (with biases), each token routed to `top_k` by a biased router."""
    d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads,
                                                       d_head)
    d_ff, n_experts = positive_int("d_ff", d_ff), positive_int("n_experts", n_experts)
    top_k = positive_int("top_k", top_k)
    if top_k > n_experts:
        raise ValueError(f"top_k={top_k} > n_experts={n_experts}")
    window = None if window is None else positive_int("window", window)
    rope = RotaryEmbedding(d_head, base=rope_base) if rope is None else rope
    bias, eps = boolean("bias", bias), positive_float("eps", eps)
    alpha, limit = positive_float("alpha", alpha), positive_float("limit", limit)
    options = {"d_head": d_head, "bias": bias, "rope": rope}
    with checked_entry():  # the parts trust the arguments checked above
        attn = (SinkAttention(d_model, n_heads, n_kv_heads, **options)
                if window is None
                else SlidingWindowSinkAttention(d_model, n_heads, n_kv_heads,
                                                window=window, **options))
        return PreNormBlock(
            attn,
            MoEFFN(Router(d_model, n_experts, partial(gpt_oss_router, top_k=top_k),
                          bias=True),
                   GptOssExperts(n_experts, d_model, d_ff, alpha=alpha, limit=limit)),
            RMSNorm(d_model, eps=eps),
            RMSNorm(d_model, eps=eps),
        )
# --8<-- [end:gpt_oss_block]


# --8<-- [start:gpt_oss_model]
def gpt_oss_init_(model: LlamaLanguageModel, *,
                  std: float = 0.02) -> LlamaLanguageModel:
    """Hugging Face's gpt-oss initialisation, in place: linear maps, the embedding,
    the routers (weight and bias), the experts' matrices and the sinks ~ N(0, std^2);
    the attention's and the experts' biases 0; norms' gains 1."""
    std = positive_float("std", std)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, std)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    module.bias.zero_()
                if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, Router):
                module.weight.normal_(0.0, std)
                module.bias.normal_(0.0, std)
            elif isinstance(module, GptOssExperts):
                module.gate_up_proj.normal_(0.0, std)
                module.down_proj.normal_(0.0, std)
                module.gate_up_proj_bias.zero_()
                module.down_proj_bias.zero_()
            if isinstance(module, SinkAttention):
                module.sinks.normal_(0.0, std)
    return model


def gpt_oss_model(vocab_size: int, context: int, d_model: int, n_heads: int,
                  n_kv_heads: int, d_ff: int, n_experts: int, top_k: int, *,
                  windows: Sequence[int | None], d_head: int | None = None,
                  rope: partial | None = None, rope_base: float = 150_000.0,
                  eps: float = 1e-5, bias: bool = True, alpha: float = 1.702,
                  limit: float = 7.0, tied: bool = False, pad_id: int | None = None,
                  std: float = 0.02) -> LlamaLanguageModel:
    """A gpt-oss of any size: chapter 7's `LlamaLanguageModel` with one `gpt_oss_block`
    per entry of `windows` (an int: a sliding layer of that window; None: a full
    one), initialised as Hugging Face does. `rope`: a function making each layer's
    RoPE (e.g. `partial(YarnRotaryEmbedding, d_head, base=..., factor=...)`), else
    plain RoPE of `rope_base`. `pad_id`: the embedding's padding row (HF's
    `padding_idx`, whose gradient is always 0)."""
    vocab_size = positive_int("vocab_size", vocab_size)
    context = positive_int("context", context)
    tied, std = boolean("tied", tied), positive_float("std", std)
    windows = list(windows)
    if not windows:
        raise ValueError("windows must name at least one layer")
    windows = [None if w is None else positive_int("windows[i]", w) for w in windows]
    if pad_id is not None and non_negative_int("pad_id", pad_id) >= vocab_size:
        raise ValueError(f"pad_id={pad_id} must be < vocab_size={vocab_size}")
    block = partial(gpt_oss_block, d_model, n_heads, n_kv_heads, d_ff, n_experts,
                    top_k, d_head=d_head, rope_base=rope_base, eps=eps, bias=bias,
                    alpha=alpha, limit=limit)
    def layer(window: int | None) -> PreNormBlock:
        return block(window=window, rope=None if rope is None else rope())

    blocks = [layer(windows[0])]  # gpt_oss_block checks a block's arguments
    with checked_entry():  # the other layers and the model's parts trust them
        blocks += [layer(w) for w in windows[1:]]
        model = LlamaLanguageModel(
            nn.Embedding(vocab_size, d_model, padding_idx=pad_id),
            blocks,
            RMSNorm(d_model, eps=eps),
            None if tied else nn.Linear(d_model, vocab_size, bias=False),
            context=context,
        )
        return gpt_oss_init_(model, std=std)
# --8<-- [end:gpt_oss_model]


# --8<-- [start:gpt_oss_from_hf_config]
GPT_OSS_DEFAULTS = {  # transformers' GptOssConfig, for what a config.json leaves out
    "num_hidden_layers": 36, "num_local_experts": 128, "vocab_size": 201088,
    "hidden_size": 2880, "intermediate_size": 2880, "head_dim": 64,
    "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128,
    "tie_word_embeddings": False, "initializer_range": 0.02,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_parameters": None,
    "rope_scaling": None, "rope_theta": 150000.0, "attention_dropout": 0.0,
    "num_experts_per_tok": 4, "swiglu_alpha": 1.702, "swiglu_limit": 7.0,
    "router_aux_loss_coef": 0.001, "layer_types": None, "pad_token_id": None,
    "attention_bias": True,
}
GPT_OSS_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}  # HF's default


def gpt_oss_field(config: object, name: str) -> object:
    """`config.name` of a GptOssConfig, or `config[name]` of its config.json."""
    return config_field(config, name, GPT_OSS_DEFAULTS)


def gpt_oss_rope_parameters(config: object) -> dict:
    """The RoPE settings: transformers 5's `rope_parameters`, or a config.json's
    `rope_theta` and `rope_scaling`; none at all is HF's default, YaRN."""
    parameters = dict(gpt_oss_field(config, "rope_scaling") or {})
    parameters |= dict(gpt_oss_field(config, "rope_parameters") or {})
    if not parameters:
        parameters = dict(GPT_OSS_YARN)
    parameters.setdefault("rope_type", parameters.get("type", "default"))
    parameters.setdefault("rope_theta", gpt_oss_field(config, "rope_theta"))
    return parameters


def gpt_oss_rope(config: object) -> partial:
    """A function making one layer's RoPE as HF's `GptOssRotaryEmbedding` computes it:
    plain ("default") or YaRN (`YarnRotaryEmbedding`, HF's attention factor rule).
    Other scalings, and a partial rotation, are refused."""
    p = gpt_oss_rope_parameters(config)
    heads = gpt_oss_field(config, "num_attention_heads")
    d_head = (gpt_oss_field(config, "head_dim")
              or gpt_oss_field(config, "hidden_size") // heads)
    base = float(p["rope_theta"])
    if p.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"config partial_rotary_factor={p['partial_rotary_factor']!r}"
                         " is not supported (ours: 1.0)")
    if p["rope_type"] == "default":
        return partial(RotaryEmbedding, d_head, base=base)
    if p["rope_type"] != "yarn":
        raise ValueError(f"config rope_type={p['rope_type']!r} is not supported "
                         "(ours: 'default' or 'yarn')")
    return partial(YarnRotaryEmbedding, d_head, base=base, **yarn_settings(
        p, gpt_oss_field(config, "max_position_embeddings")))


def gpt_oss_windows(config: object) -> list[int | None]:
    """Each layer's window: `sliding_window` for a "sliding_attention" layer, None for
    a "full_attention" one; no `layer_types` is HF's default, sliding first, then
    alternating. Another kind, a list of another length, or a sliding layer without
    a window is refused."""
    n = positive_int("num_hidden_layers", gpt_oss_field(config, "num_hidden_layers"))
    kinds = gpt_oss_field(config, "layer_types") or [
        LAYER_TYPES[i % 2] for i in range(n)]
    if len(kinds) != n or set(kinds) - set(LAYER_TYPES):
        raise ValueError(f"config layer_types={list(kinds)!r} is not supported (ours: "
                         f"{n} entries of {LAYER_TYPES})")
    window = gpt_oss_field(config, "sliding_window")
    if "sliding_attention" in kinds:
        if window is None:
            raise ValueError("config sliding_window=None, but layer_types has "
                             "sliding_attention layers: they need a window")
        window = positive_int("sliding_window", window)
    return [window if kind == "sliding_attention" else None for kind in kinds]


def check_gpt_oss_supported(config: object) -> None:
    """Refuse, rather than change, what ours does not do: attention dropout (and, by
    `gpt_oss_rope` and `gpt_oss_windows`, other RoPE scalings and layer kinds)."""
    if gpt_oss_field(config, "attention_dropout"):
        raise ValueError(f"config attention_dropout="
                         f"{gpt_oss_field(config, 'attention_dropout')!r} is not "
                         "supported (ours: 0.0)")
    gpt_oss_rope(config)
    gpt_oss_windows(config)


def gpt_oss_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face gpt-oss configuration (a GptOssConfig
    or its config.json dict). Refused rather than changed: `check_gpt_oss_supported`.
    (HF's `hidden_act` is not read by its gpt-oss: the experts' activation is
    `clamped_swiglu` of `swiglu_alpha` and `swiglu_limit`.)"""
    check_model_type(config, "gpt_oss")
    check_gpt_oss_supported(config)
    field = partial(gpt_oss_field, config)
    heads = field("num_attention_heads")
    return gpt_oss_model(
        field("vocab_size"), field("max_position_embeddings"), field("hidden_size"),
        heads, field("num_key_value_heads") or heads, field("intermediate_size"),
        field("num_local_experts"), field("num_experts_per_tok"),
        windows=gpt_oss_windows(config), d_head=field("head_dim"),
        rope=gpt_oss_rope(config), eps=field("rms_norm_eps"),
        bias=bool(field("attention_bias")), alpha=field("swiglu_alpha"),
        limit=field("swiglu_limit"), tied=bool(field("tie_word_embeddings")),
        pad_id=field("pad_token_id"), std=field("initializer_range"))
# --8<-- [end:gpt_oss_from_hf_config]


# --8<-- [start:check_gpt_oss_config]
def gpt_oss_top_k(moe: MoEFFN) -> int:
    """The k of a `MoEFFN` routed by `partial(gpt_oss_router, top_k=k)` with a biased
    router; any other router is refused (it is not gpt-oss's)."""
    route = getattr(moe.router, "route", None)
    if not isinstance(route, partial) or route.func is not gpt_oss_router \
            or set(route.keywords) != {"top_k"} or route.args \
            or moe.router.bias is None:
        raise ValueError("ffn.router must be Router(..., partial(gpt_oss_router, "
                         "top_k=k), bias=True)")
    return route.keywords["top_k"]


def check_gpt_oss_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights between models of different shape or function, naming
    both sides."""
    if not isinstance(ours, LlamaLanguageModel) or not all(
            isinstance(b, PreNormBlock) and isinstance(b.ffn, MoEFFN)
            and isinstance(b.attn, SinkAttention) for b in ours.blocks):
        raise TypeError(f"ours must be a LlamaLanguageModel of gpt_oss_blocks, got "
                        f"{type(ours).__name__}")
    check_gpt_oss_supported(config)
    field = partial(gpt_oss_field, config)
    block, heads = ours.blocks[0], field("num_attention_heads")
    experts = block.ffn.experts
    pairs = [
        ("vocab_size", ours.vocab_size, "vocab_size", field("vocab_size")),
        ("d_model", ours.d_model, "hidden_size", field("hidden_size")),
        ("n_layers", len(ours.blocks), "num_hidden_layers",
         field("num_hidden_layers")),
        ("windows", [layer_window(b.attn) for b in ours.blocks], "layer_types",
         gpt_oss_windows(config)),
        ("n_heads", block.attn.n_heads, "num_attention_heads", heads),
        ("n_kv_heads", block.attn.n_kv_heads, "num_key_value_heads",
         field("num_key_value_heads") or heads),
        ("d_head", block.attn.d_head, "head_dim",
         field("head_dim") or field("hidden_size") // heads),
        ("bias", block.attn.q_proj.bias is not None, "attention_bias",
         bool(field("attention_bias"))),
        ("d_ff", experts.d_ff, "intermediate_size", field("intermediate_size")),
        ("n_experts", block.ffn.n_experts, "num_local_experts",
         field("num_local_experts")),
        ("top_k", gpt_oss_top_k(block.ffn), "num_experts_per_tok",
         field("num_experts_per_tok")),
        ("alpha", experts.alpha, "swiglu_alpha", field("swiglu_alpha")),
        ("limit", experts.limit, "swiglu_limit", field("swiglu_limit")),
        ("eps", block.attn_norm.eps, "rms_norm_eps", field("rms_norm_eps")),
        ("rope", rope_settings(block.attn.rope), "rope_parameters",
         rope_settings(gpt_oss_rope(config)())),
        ("tied", ours.lm_head.weight is ours.token_embedding.weight,
         "tie_word_embeddings", bool(field("tie_word_embeddings"))),
        ("pad_id", ours.token_embedding.padding_idx, "pad_token_id",
         field("pad_token_id")),
    ]
    refuse_mismatches(pairs)
    for i, b in enumerate(ours.blocks):
        if rope_settings(b.attn.rope) != rope_settings(block.attn.rope):
            raise ValueError(f"ours has blocks[{i}].attn.rope unlike blocks[0]'s; "
                             "HF's layers share one")
# --8<-- [end:check_gpt_oss_config]


# --8<-- [start:load_hf_gpt_oss]
HF_GPT_OSS_NAMES = HF_LLAMA_NAMES  # mlp.router -> ffn.router, self_attn.sinks -> attn.


def load_hf_gpt_oss(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                    config: object) -> LlamaLanguageModel:
    """Load a `GptOssForCausalLM` state dict by name, after `check_gpt_oss_config`:
    `model.layers.i.self_attn.{q,k,v,o}_proj.{weight,bias}` and `.sinks` ->
    `blocks.i.attn.`, `mlp.router.{weight,bias}` -> `blocks.i.ffn.router.`,
    `mlp.experts.{gate_up_proj,down_proj}{,_bias}` -> `blocks.i.ffn.experts.` (the
    same layout), norms as `load_hf_llama` names them."""
    check_gpt_oss_config(ours, config)
    return load_renamed(ours, tied_head_state(ours, state_dict), HF_GPT_OSS_NAMES)
# --8<-- [end:load_hf_gpt_oss]


# --8<-- [start:gpt_oss_aux_loss]
def gpt_oss_aux_loss(model: LlamaLanguageModel,
                     attention_mask: Tensor | None = None) -> Tensor:
    """The balancing loss of the model's last forward (HF's `aux_loss` with
    `output_router_logits=True`; its training loss adds it times
    `router_aux_loss_coef`, 0.001): chapter 9's `model_balancing_loss` with gpt-oss's
    k."""
    return model_balancing_loss(model, gpt_oss_top_k, attention_mask)
# --8<-- [end:gpt_oss_aux_loss]
