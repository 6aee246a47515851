"""Mixtral: Llama's model with a mixture of experts where each block's FFN was
(Jiang et al. 2024). Every block's attention, norms and residuals are Llama's (or
Mistral's); its FFN is `MoEFFN` with Mixtral's router: E SwiGLU experts, each token
sent to the top k of them (8 and 2 in Mixtral 8x7B).

* `mixtral_block`: a `PreNormBlock` of Llama's parts with a `MoEFFN` as its FFN.
* `mixtral_model`, `mixtral_from_hf_config`, `check_mixtral_config`,
  `load_hf_mixtral`: the language model is chapter 7's `LlamaLanguageModel` with these
  blocks; weights load by name from Hugging Face's `MixtralForCausalLM`.
* `router_aux_loss`: Switch's balancing loss pooled over the layers' router logits,
  what HF adds to the loss (times `router_aux_loss_coef`) with
  `output_router_logits=True`.
* `moe_params`, `mla_params`: total and active parameters of a MoE language model by
  formula (Mixtral 8x7B: 46.7 B total, 12.9 B active per token).

Shapes: B batch, T tokens, V vocabulary, d model width, E experts, I expert width.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

import torch
from torch import Tensor, nn

from literate.models.llama import (
    HF_LLAMA_NAMES,
    LLAMA_DEFAULTS,
    LlamaLanguageModel,
    check_llama_supported,
    check_model_type,
    config_field,
    llama_rope_base,
    load_renamed,
    refuse_mismatches,
    tied_head_state,
)
from literate.parts.blocks import PreNormBlock
from literate.parts.checks import (
    boolean,
    checked_entry,
    non_negative_int,
    positive_float,
    positive_int,
)
from literate.parts.moe import Experts, MoEFFN, load_balancing_loss
from literate.parts.multi_head import MultiHeadAttention, head_counts
from literate.parts.norms import RMSNorm
from literate.parts.positions import RotaryEmbedding
from literate.parts.routers import Router, mixtral_router

__all__ = [
    "mixtral_block",
    "mixtral_init_",
    "mixtral_model",
    "mixtral_top_k",
    "mixtral_from_hf_config",
    "check_mixtral_config",
    "HF_MIXTRAL_NAMES",
    "load_hf_mixtral",
    "model_balancing_loss",
    "router_aux_loss",
    "mla_params",
    "moe_params",
]


# --8<-- [start:mixtral_block]
def mixtral_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int,
                  n_experts: int, top_k: int, *, d_head: int | None = None,
                  rope_base: float = 1_000_000.0, eps: float = 1e-5) -> PreNormBlock:
    """Mixtral's block: `llama_block`'s parts (pre-norm RMSNorm, grouped-query
    attention with RoPE, no biases) with the FFN replaced by `n_experts` SwiGLU
    experts of width `d_ff`, each token routed to `top_k` of them by Mixtral's router
    (softmax, top k, renormalised). The FFN keeps its `router_logits`."""
    d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads,
                                                       d_head)
    d_ff, n_experts = positive_int("d_ff", d_ff), positive_int("n_experts", n_experts)
    top_k = positive_int("top_k", top_k)
    if top_k > n_experts:
        raise ValueError(f"top_k={top_k} > n_experts={n_experts}")
    rope_base, eps = positive_float("rope_base", rope_base), positive_float("eps", eps)
    with checked_entry():  # the parts trust the arguments checked above
        return PreNormBlock(
            MultiHeadAttention(d_model, n_heads, n_kv_heads, d_head=d_head,
                               rope=RotaryEmbedding(d_head, base=rope_base)),
            MoEFFN(Router(d_model, n_experts, partial(mixtral_router, top_k=top_k)),
                   Experts(n_experts, d_model, d_ff)),
            RMSNorm(d_model, eps=eps),
            RMSNorm(d_model, eps=eps),
        )
# --8<-- [end:mixtral_block]


# --8<-- [start:mixtral_model]
def mixtral_init_(model: LlamaLanguageModel, *,
                  std: float = 0.02) -> LlamaLanguageModel:
    """Hugging Face's Mixtral initialisation, in place: every linear map, the
    embedding, the routers and the experts' fused matrices ~ N(0, std^2)."""
    std = positive_float("std", std)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding, Router)):
                module.weight.normal_(0.0, std)
            elif isinstance(module, Experts):
                module.gate_up_proj.normal_(0.0, std)
                module.down_proj.normal_(0.0, std)
    return model


def mixtral_model(vocab_size: int, context: int, d_model: int, n_heads: int,
                  n_kv_heads: int, n_layers: int, d_ff: int, n_experts: int,
                  top_k: int, *, d_head: int | None = None,
                  rope_base: float = 1_000_000.0, eps: float = 1e-5,
                  tied: bool = False, std: float = 0.02) -> LlamaLanguageModel:
    """A Mixtral of any size: chapter 7's `LlamaLanguageModel` with `mixtral_block`s,
    initialised as Hugging Face does."""
    vocab_size = positive_int("vocab_size", vocab_size)
    context, n_layers = positive_int("context", context), positive_int("n_layers",
                                                                       n_layers)
    tied, std = boolean("tied", tied), positive_float("std", std)
    block = partial(mixtral_block, d_model, n_heads, n_kv_heads, d_ff, n_experts,
                    top_k, d_head=d_head, rope_base=rope_base, eps=eps)
    blocks = [block()]  # mixtral_block checks a block's arguments
    with checked_entry():  # the other layers and the model's parts trust them
        blocks += [block() for _ in range(n_layers - 1)]
        model = LlamaLanguageModel(
            nn.Embedding(vocab_size, d_model),
            blocks,
            RMSNorm(d_model, eps=eps),
            None if tied else nn.Linear(d_model, vocab_size, bias=False),
            context=context,
        )
        return mixtral_init_(model, std=std)
# --8<-- [end:mixtral_model]


# --8<-- [start:mixtral_from_hf_config]
MIXTRAL_DEFAULTS = {  # transformers' MixtralConfig, where it differs from Llama's
    "rms_norm_eps": 1e-5, "max_position_embeddings": 4096 * 32,
    "rope_theta": 1_000_000.0, "sliding_window": None, "router_jitter_noise": 0.0,
    "num_local_experts": 8, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.001,
}


def mixtral_field(config: object, name: str) -> object:
    """`config.name` of a MixtralConfig, or `config[name]` of its config.json."""
    return config_field(config, name, LLAMA_DEFAULTS | MIXTRAL_DEFAULTS)


def check_mixtral_supported(config: object) -> None:
    """Llama's refusals (`check_llama_supported`), and two of Mixtral's own: a
    sliding window (Mistral 7B's; Mixtral's configs have none) and router jitter
    (multiplicative noise on the FFN's input while training)."""
    check_llama_supported(config)
    for name in ("sliding_window", "router_jitter_noise"):
        if mixtral_field(config, name):
            raise ValueError(f"config {name}={mixtral_field(config, name)!r} is not "
                             f"supported (ours: {MIXTRAL_DEFAULTS[name]!r})")


def mixtral_rope_base(config: object) -> float:
    """Llama's reading of the RoPE base, with Mixtral's default (1e6)."""
    if isinstance(config, Mapping) and "rope_theta" not in config \
            and "rope_parameters" not in config:
        config = dict(config, rope_theta=MIXTRAL_DEFAULTS["rope_theta"])
    return llama_rope_base(config)


def mixtral_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face Mixtral configuration (a MixtralConfig
    or its config.json dict). Refused rather than changed: `check_mixtral_supported`."""
    check_model_type(config, "mixtral")
    check_mixtral_supported(config)
    heads = mixtral_field(config, "num_attention_heads")
    return mixtral_model(
        mixtral_field(config, "vocab_size"),
        mixtral_field(config, "max_position_embeddings"),
        mixtral_field(config, "hidden_size"), heads,
        mixtral_field(config, "num_key_value_heads") or heads,
        mixtral_field(config, "num_hidden_layers"),
        mixtral_field(config, "intermediate_size"),
        mixtral_field(config, "num_local_experts"),
        mixtral_field(config, "num_experts_per_tok"),
        d_head=mixtral_field(config, "head_dim"), rope_base=mixtral_rope_base(config),
        eps=mixtral_field(config, "rms_norm_eps"),
        tied=bool(mixtral_field(config, "tie_word_embeddings")),
        std=mixtral_field(config, "initializer_range"))
# --8<-- [end:mixtral_from_hf_config]


# --8<-- [start:check_mixtral_config]
def mixtral_top_k(moe: MoEFFN) -> int:
    """The k of a `MoEFFN` routed by `partial(mixtral_router, top_k=k)`; any other
    router is refused (it is not Mixtral's)."""
    route = getattr(moe.router, "route", None)
    if not isinstance(route, partial) or route.func is not mixtral_router \
            or set(route.keywords) != {"top_k"} or route.args:
        raise ValueError("ffn.router.route must be partial(mixtral_router, top_k=k)")
    return route.keywords["top_k"]


def check_mixtral_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights between models of different shape or function, naming
    both sides."""
    if not isinstance(ours, LlamaLanguageModel) or not all(
            isinstance(b, PreNormBlock) and isinstance(b.ffn, MoEFFN)
            for b in ours.blocks):
        raise TypeError(f"ours must be a LlamaLanguageModel of mixtral_blocks, got "
                        f"{type(ours).__name__}")
    check_mixtral_supported(config)
    block = ours.blocks[0]
    d = mixtral_field(config, "hidden_size")
    heads = mixtral_field(config, "num_attention_heads")
    pairs = [
        ("vocab_size", ours.vocab_size, "vocab_size"),
        ("d_model", ours.d_model, "hidden_size"),
        ("n_layers", len(ours.blocks), "num_hidden_layers"),
        ("n_heads", block.attn.n_heads, "num_attention_heads"),
        ("n_kv_heads", block.attn.n_kv_heads, "num_key_value_heads", heads),
        ("d_head", block.attn.d_head, "head_dim", d // heads),
        ("d_ff", block.ffn.experts.d_ff, "intermediate_size"),
        ("n_experts", block.ffn.n_experts, "num_local_experts"),
        ("top_k", mixtral_top_k(block.ffn), "num_experts_per_tok"),
        ("eps", block.attn_norm.eps, "rms_norm_eps"),
        ("rope_base", block.attn.rope.base, "rope_theta", None),
        ("tied", ours.lm_head.weight is ours.token_embedding.weight,
         "tie_word_embeddings"),
    ]
    compared = []
    for name, mine, field, *fallback in pairs:
        theirs = (mixtral_rope_base(config) if field == "rope_theta"
                  else mixtral_field(config, field))
        if field == "tie_word_embeddings":
            theirs = bool(theirs)
        if theirs is None and fallback:
            theirs = fallback[0]
        compared.append((name, mine, field, theirs))
    refuse_mismatches(compared)
# --8<-- [end:check_mixtral_config]


# --8<-- [start:load_hf_mixtral]
HF_MIXTRAL_NAMES = [  # Llama's names, then the router: HF's mlp.gate is our ffn.router
    *HF_LLAMA_NAMES,
    (r"^(blocks\.\d+\.ffn\.)gate\.", r"\1router."),
]


def load_hf_mixtral(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                    config: object) -> LlamaLanguageModel:
    """Load a `MixtralForCausalLM` state dict by name, after `check_mixtral_config`:
    `model.layers.i.mlp.gate.weight` -> `blocks.i.ffn.router.weight`, `mlp.experts.
    gate_up_proj (E, 2I, d)` and `down_proj (E, d, I)` -> `ffn.experts.` (the same
    layout), attention and norms as `load_hf_llama` names them."""
    check_mixtral_config(ours, config)
    return load_renamed(ours, tied_head_state(ours, state_dict), HF_MIXTRAL_NAMES)
# --8<-- [end:load_hf_mixtral]


# --8<-- [start:router_aux_loss]
def model_balancing_loss(model: LlamaLanguageModel, top_k_of: Callable[[MoEFFN], int],
                         attention_mask: Tensor | None = None) -> Tensor:
    """`load_balancing_loss` over every MoE block's `router_logits` of the model's last
    forward, pooled, with the k that `top_k_of` reads from the first MoE block and its
    E (HF's `aux_loss`, for Mixtral, gpt-oss and their kin)."""
    moes = [b.ffn for b in model.blocks if isinstance(getattr(b, "ffn", None), MoEFFN)]
    if not moes:
        raise ValueError("model has no MoEFFN block")
    if any(moe.router_logits is None for moe in moes):
        raise ValueError("model has not run forward yet: no router_logits")
    return load_balancing_loss([moe.router_logits for moe in moes],
                               top_k_of(moes[0]), moes[0].n_experts, attention_mask)


def router_aux_loss(model: LlamaLanguageModel,
                    attention_mask: Tensor | None = None) -> Tensor:
    """Mixtral's balancing loss of the model's last forward (HF's `aux_loss`; the
    training loss adds it times `router_aux_loss_coef`: 0.02 in Mixtral's released
    config, 0.001 the default of HF's MixtralConfig; Fedus et al. use 0.01)."""
    return model_balancing_loss(model, mixtral_top_k, attention_mask)
# --8<-- [end:router_aux_loss]


# --8<-- [start:moe_params]
def mla_params(d_model: int, n_heads: int, *, q_lora_rank: int | None,
               kv_lora_rank: int, qk_nope_head_dim: int, qk_rope_head_dim: int,
               v_head_dim: int) -> int:
    """Parameters of DeepSeek's multi-head latent attention (DeepSeek-V2, sec. 2.1),
    as HF's `DeepseekV3Attention` holds them: q through a rank-`q_lora_rank` bottleneck
    with its RMSNorm (or one d x H d_qk map if None), k and v from one latent of width
    `kv_lora_rank` (normed) plus a shared RoPE key of width `qk_rope_head_dim`, o."""
    d, h = positive_int("d_model", d_model), positive_int("n_heads", n_heads)
    c_kv = positive_int("kv_lora_rank", kv_lora_rank)
    nope = positive_int("qk_nope_head_dim", qk_nope_head_dim)
    rope = positive_int("qk_rope_head_dim", qk_rope_head_dim)
    v = positive_int("v_head_dim", v_head_dim)
    if q_lora_rank is None:
        q = d * h * (nope + rope)
    else:
        c_q = positive_int("q_lora_rank", q_lora_rank)
        q = d * c_q + c_q + c_q * h * (nope + rope)
    kv = d * (c_kv + rope) + c_kv + c_kv * h * (nope + v)
    return q + kv + h * v * d


def moe_params(d_model: int, n_layers: int, n_experts: int, top_k: int, d_ff: int,
               n_heads: int, n_kv_heads: int, vocab: int, d_head: int | None = None,
               shared: int = 0, dense_layers: int = 0, dense_d_ff: int | None = None,
               tied: bool = False, *, qk_norm: bool = False,
               attention: int | None = None) -> tuple[int, int]:
    """(total, active) parameters of a decoder-only MoE model with SwiGLU experts and
    no biases: the first `dense_layers` blocks have a dense SwiGLU FFN of width
    `dense_d_ff`, the rest E routed experts of width `d_ff` (3 d d_ff each), a router
    (E d) and `shared` always-on experts of width d_ff. Active: what one token's
    forward multiplies by, the top k routed experts of each MoE layer, not E. Per
    layer: attention (GQA, `qk_norm` adding Qwen3's two d_head gains, or `attention`
    given, e.g. `mla_params`) and two d-wide RMSNorms; then the embedding, the final
    norm and the head (unless `tied`). Exact integers."""
    d, n_layers = positive_int("d_model", d_model), positive_int("n_layers", n_layers)
    e, k = positive_int("n_experts", n_experts), positive_int("top_k", top_k)
    if k > e:
        raise ValueError(f"top_k={top_k} > n_experts={n_experts}")
    i, v = positive_int("d_ff", d_ff), positive_int("vocab", vocab)
    shared = non_negative_int("shared", shared)
    dense = non_negative_int("dense_layers", dense_layers)
    if dense > n_layers:
        raise ValueError(f"dense_layers={dense_layers} > n_layers={n_layers}")
    if dense and dense_d_ff is None:
        raise ValueError("dense_layers > 0 needs dense_d_ff")
    if attention is None:
        _, h, h_kv, dh = head_counts(d, n_heads, n_kv_heads, d_head)
        attention = 2 * d * h * dh + 2 * d * h_kv * dh + 2 * dh * boolean(
            "qk_norm", qk_norm)
    else:
        attention = positive_int("attention", attention)
    per_layer = attention + 2 * d  # attention and the two norms
    moe_layers = n_layers - dense
    always = n_layers * per_layer + moe_layers * (e * d + shared * 3 * d * i)
    if dense:
        always += dense * 3 * d * positive_int("dense_d_ff", dense_d_ff)
    outside = v * d + d + (0 if boolean("tied", tied) else v * d)
    expert = 3 * d * i
    return (always + moe_layers * e * expert + outside,
            always + moe_layers * k * expert + outside)
# --8<-- [end:moe_params]
