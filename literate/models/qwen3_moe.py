"""Qwen3-MoE (Qwen Team 2025): Qwen3's model with a mixture of experts where each
block's FFN was (chapter 9). Every block's attention, norms and residuals are Qwen3's
(chapter 7's `qwen3_block`: QK-norm per head, heads of their own width); its FFN is
Mixtral's `MoEFFN` routed by `qwen3_moe_router`: a softmax over E SwiGLU experts, the
top k, renormalised over the k only if `norm_topk_prob` (Qwen3-30B-A3B: 128 experts,
top 8, renormalised).

* `qwen3_moe_block`: a `PreNormBlock` of Qwen3's attention and norms with a `MoEFFN`.
* `qwen3_moe_model`: chapter 7's `LlamaLanguageModel` of these blocks, initialised as
  Mixtral's (`mixtral_init_`). The layers of `dense_layers` are `qwen3_block`s with a
  dense SwiGLU instead: Hugging Face's `mlp_only_layers` and `decoder_sparse_step`
  (the released Qwen3-MoE models have none).
* `qwen3_moe_from_hf_config`, `check_qwen3_moe_config`, `load_hf_qwen3_moe`: weights
  load by name from Hugging Face's `Qwen3MoeForCausalLM`, by Mixtral's names (its
  experts are held in the same fused layout).

Refused rather than changed, naming the field: Qwen3's refusals (biases, another
activation, attention dropout, a sliding window, RoPE scaling) and a config without
experts (`num_experts` 0: that model is a Qwen3). The balancing loss that
`router_aux_loss_coef` weighs while training is `model_balancing_loss` of
`literate.models.mixtral` with `qwen3_moe_top_k`.

Shapes: B batch, T tokens, V vocabulary, d model width, E experts, I expert width.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial

from torch import Tensor, nn

from literate.models.llama import (
    LlamaLanguageModel,
    check_model_type,
    config_field,
    llama_rope_base,
    load_renamed,
    refuse_mismatches,
    tied_head_state,
)
from literate.models.mixtral import HF_MIXTRAL_NAMES, mixtral_init_
from literate.models.qwen3 import QWEN3_DEFAULTS, check_qwen3_supported
from literate.parts.blocks import PreNormBlock, qwen3_block
from literate.parts.checks import (
    boolean,
    checked_entry,
    non_negative_int,
    positive_float,
    positive_int,
)
from literate.parts.ffn import GatedFFN
from literate.parts.moe import Experts, MoEFFN
from literate.parts.multi_head import MultiHeadAttention, head_counts
from literate.parts.norms import RMSNorm
from literate.parts.positions import RotaryEmbedding
from literate.parts.routers import Router, qwen3_moe_router

__all__ = [
    "qwen3_moe_block",
    "qwen3_moe_model",
    "QWEN3_MOE_DEFAULTS",
    "qwen3_moe_field",
    "qwen3_moe_dense_layers",
    "check_qwen3_moe_supported",
    "qwen3_moe_from_hf_config",
    "qwen3_moe_routing",
    "qwen3_moe_top_k",
    "check_qwen3_moe_config",
    "HF_QWEN3_MOE_NAMES",
    "load_hf_qwen3_moe",
]


# --8<-- [start:qwen3_moe_block]
def qwen3_moe_block(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int,
                    n_experts: int, top_k: int, *, d_head: int | None = None,
                    norm_topk_prob: bool = False, rope_base: float = 1_000_000.0,
                    eps: float = 1e-6) -> PreNormBlock:
    """Qwen3-MoE's block: `qwen3_block`'s attention (QK-norm per head, `d_head`
    d_model // n_heads unless given) and norms, with the FFN replaced by `n_experts`
    SwiGLU experts of width `d_ff`, each token routed to `top_k` of them by
    `qwen3_moe_router` (renormalised over the k if `norm_topk_prob`). The FFN keeps
    its `router_logits`."""
    d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads,
                                                       d_head)
    d_ff, n_experts = positive_int("d_ff", d_ff), positive_int("n_experts", n_experts)
    top_k = positive_int("top_k", top_k)
    if top_k > n_experts:
        raise ValueError(f"top_k={top_k} > n_experts={n_experts}")
    norm_topk_prob = boolean("norm_topk_prob", norm_topk_prob)
    rope_base, eps = positive_float("rope_base", rope_base), positive_float("eps", eps)
    route = partial(qwen3_moe_router, top_k=top_k, norm_topk_prob=norm_topk_prob)
    with checked_entry():  # the parts trust the arguments checked above
        return PreNormBlock(
            MultiHeadAttention(d_model, n_heads, n_kv_heads, d_head=d_head,
                               rope=RotaryEmbedding(d_head, base=rope_base),
                               q_norm=RMSNorm(d_head, eps=eps),
                               k_norm=RMSNorm(d_head, eps=eps), qk_norm="head"),
            MoEFFN(Router(d_model, n_experts, route),
                   Experts(n_experts, d_model, d_ff)),
            RMSNorm(d_model, eps=eps),
            RMSNorm(d_model, eps=eps),
        )
# --8<-- [end:qwen3_moe_block]


# --8<-- [start:qwen3_moe_model]
def qwen3_moe_model(vocab_size: int, context: int, d_model: int, n_heads: int,
                    n_kv_heads: int, n_layers: int, d_ff: int, n_experts: int,
                    top_k: int, *, d_head: int | None = None,
                    norm_topk_prob: bool = False, dense_layers: Iterable[int] = (),
                    dense_d_ff: int | None = None, rope_base: float = 1_000_000.0,
                    eps: float = 1e-6, tied: bool = False,
                    std: float = 0.02) -> LlamaLanguageModel:
    """A Qwen3-MoE of any size: chapter 7's `LlamaLanguageModel` with
    `qwen3_moe_block`s, but for the layers numbered in `dense_layers`, which are
    `qwen3_block`s with a dense SwiGLU of width `dense_d_ff`; initialised as Hugging
    Face does (`mixtral_init_`)."""
    vocab_size = positive_int("vocab_size", vocab_size)
    context, n_layers = positive_int("context", context), positive_int("n_layers",
                                                                       n_layers)
    tied, std = boolean("tied", tied), positive_float("std", std)
    if isinstance(dense_layers, (str, bytes)) or not isinstance(dense_layers, Iterable):
        raise TypeError(f"dense_layers must be layer numbers, got "
                        f"{type(dense_layers).__name__}")
    dense = {non_negative_int("dense_layers[...]", i) for i in dense_layers}
    if any(i >= n_layers for i in dense):
        raise ValueError(f"dense_layers={sorted(dense)} names a layer beyond the "
                         f"{n_layers} of the model")
    if dense and dense_d_ff is None:
        raise ValueError("dense_layers need dense_d_ff, the width of their FFN")
    build = {
        False: partial(qwen3_moe_block, d_model, n_heads, n_kv_heads, d_ff, n_experts,
                       top_k, d_head=d_head, norm_topk_prob=norm_topk_prob,
                       rope_base=rope_base, eps=eps),
        True: partial(qwen3_block, d_model, n_heads, n_kv_heads, dense_d_ff,
                      d_head=d_head, rope_base=rope_base, eps=eps),
    }
    kinds = [i in dense for i in range(n_layers)]  # True: a dense layer
    # the first block of each kind checks its builder's arguments
    first = {kind: build[kind]() for kind in dict.fromkeys(kinds)}
    with checked_entry():  # the other layers and the model's parts trust them
        blocks = [first.pop(kind) if kind in first else build[kind]()
                  for kind in kinds]
        model = LlamaLanguageModel(
            nn.Embedding(vocab_size, d_model),
            blocks,
            RMSNorm(d_model, eps=eps),
            None if tied else nn.Linear(d_model, vocab_size, bias=False),
            context=context,
        )
        return mixtral_init_(model, std=std)
# --8<-- [end:qwen3_moe_model]


# --8<-- [start:qwen3_moe_from_hf_config]
# transformers' Qwen3MoeConfig defaults, where they differ from Qwen3Config's
QWEN3_MOE_DEFAULTS = QWEN3_DEFAULTS | {
    "num_key_value_heads": 4,
    "head_dim": None,  # not a field of Qwen3MoeConfig: d // H unless a config gives it
    "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
    "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": None,
    "router_aux_loss_coef": 0.001,  # training only: the balancing loss's weight
}


def qwen3_moe_field(config: object, name: str) -> object:
    """`config.name` of a Qwen3MoeConfig, or `config[name]` of its config.json. The
    experts' count: `num_experts` in the released config.json files,
    `num_local_experts` in the ones transformers 5 writes (its attribute map)."""
    if name == "num_experts" and isinstance(config, Mapping) \
            and name not in config and "num_local_experts" in config:
        name = "num_local_experts"
    return config_field(config, name, QWEN3_MOE_DEFAULTS)


def qwen3_moe_dense_layers(config: object) -> list[int]:
    """The layers of a Qwen3-MoE configuration with a dense FFN, by Hugging Face's
    rule (`Qwen3MoeDecoderLayer`): layer i is dense if it is in `mlp_only_layers` or
    if i + 1 is not a multiple of `decoder_sparse_step`."""
    step = positive_int("config decoder_sparse_step",
                        qwen3_moe_field(config, "decoder_sparse_step"))
    only = qwen3_moe_field(config, "mlp_only_layers") or []
    if not isinstance(only, (list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise TypeError(f"config mlp_only_layers must be a list of layer numbers, got "
                        f"{only!r}")
    return [i for i in range(qwen3_moe_field(config, "num_hidden_layers"))
            if i in only or (i + 1) % step]


def check_qwen3_moe_supported(config: object) -> None:
    """Qwen3's refusals (`check_qwen3_supported`), and a config without experts
    (`num_experts` 0, every layer dense: a Qwen3, `qwen3_from_hf_config`)."""
    check_qwen3_supported(config)
    positive_int("config num_experts", qwen3_moe_field(config, "num_experts"))


def qwen3_moe_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face Qwen3-MoE configuration (a
    Qwen3MoeConfig or its config.json dict). Refused rather than changed:
    `check_qwen3_moe_supported`, and a RoPE scaling (`llama_rope_base`)."""
    check_model_type(config, "qwen3_moe")
    check_qwen3_moe_supported(config)
    d = qwen3_moe_field(config, "hidden_size")
    heads = qwen3_moe_field(config, "num_attention_heads")
    dense = qwen3_moe_dense_layers(config)
    return qwen3_moe_model(
        qwen3_moe_field(config, "vocab_size"),
        qwen3_moe_field(config, "max_position_embeddings"), d, heads,
        qwen3_moe_field(config, "num_key_value_heads") or heads,
        qwen3_moe_field(config, "num_hidden_layers"),
        qwen3_moe_field(config, "moe_intermediate_size"),
        qwen3_moe_field(config, "num_experts"),
        qwen3_moe_field(config, "num_experts_per_tok"),
        d_head=qwen3_moe_field(config, "head_dim") or d // heads,
        norm_topk_prob=qwen3_moe_field(config, "norm_topk_prob"),
        dense_layers=dense,
        dense_d_ff=qwen3_moe_field(config, "intermediate_size") if dense else None,
        rope_base=llama_rope_base(config),
        eps=qwen3_moe_field(config, "rms_norm_eps"),
        tied=qwen3_moe_field(config, "tie_word_embeddings"),
        std=qwen3_moe_field(config, "initializer_range"))
# --8<-- [end:qwen3_moe_from_hf_config]


# --8<-- [start:check_qwen3_moe_config]
def qwen3_moe_routing(moe: MoEFFN) -> tuple[int, bool]:
    """(k, norm_topk_prob) of a `MoEFFN` routed by `partial(qwen3_moe_router, top_k=k,
    norm_topk_prob=...)`; any other router is refused (it is not Qwen3-MoE's)."""
    route = getattr(moe.router, "route", None)
    if not isinstance(route, partial) or route.func is not qwen3_moe_router \
            or set(route.keywords) != {"top_k", "norm_topk_prob"} or route.args:
        raise ValueError("ffn.router.route must be partial(qwen3_moe_router, top_k=k, "
                         "norm_topk_prob=...)")
    return route.keywords["top_k"], route.keywords["norm_topk_prob"]


def qwen3_moe_top_k(moe: MoEFFN) -> int:
    """The k of a Qwen3-MoE layer (`qwen3_moe_routing`), for `model_balancing_loss`."""
    return qwen3_moe_routing(moe)[0]


def check_qwen3_moe_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights between models of different shape or function, naming
    both sides: the shared shape, which layers are dense, the experts and their
    routing (if any layer has them), the dense layers' width (if any)."""
    if not isinstance(ours, LlamaLanguageModel) or not all(
            isinstance(b, PreNormBlock) and getattr(b.attn, "qk_norm", None) == "head"
            and (isinstance(b.ffn, GatedFFN) or isinstance(b.ffn, MoEFFN)
                 and isinstance(b.ffn.experts, Experts)) for b in ours.blocks):
        raise TypeError(f"ours must be a LlamaLanguageModel of qwen3_moe_blocks (and "
                        f"qwen3_blocks), got {type(ours).__name__}")
    check_qwen3_moe_supported(config)
    block = ours.blocks[0]
    d = qwen3_moe_field(config, "hidden_size")
    heads = qwen3_moe_field(config, "num_attention_heads")
    dense = [i for i, b in enumerate(ours.blocks) if isinstance(b.ffn, GatedFFN)]
    pairs = [
        ("vocab_size", ours.vocab_size, "vocab_size",
         qwen3_moe_field(config, "vocab_size")),
        ("d_model", ours.d_model, "hidden_size", d),
        ("n_layers", len(ours.blocks), "num_hidden_layers",
         qwen3_moe_field(config, "num_hidden_layers")),
        ("n_heads", block.attn.n_heads, "num_attention_heads", heads),
        ("n_kv_heads", block.attn.n_kv_heads, "num_key_value_heads",
         qwen3_moe_field(config, "num_key_value_heads") or heads),
        ("d_head", block.attn.d_head, "head_dim",
         qwen3_moe_field(config, "head_dim") or d // heads),
        ("eps", block.attn_norm.eps, "rms_norm_eps",
         qwen3_moe_field(config, "rms_norm_eps")),
        ("rope_base", block.attn.rope.base, "rope_theta", llama_rope_base(config)),
        ("tied", ours.lm_head.weight is ours.token_embedding.weight,
         "tie_word_embeddings", qwen3_moe_field(config, "tie_word_embeddings")),
        ("dense_layers", dense, "mlp_only_layers and decoder_sparse_step",
         qwen3_moe_dense_layers(config)),
    ]
    moe = next((b.ffn for b in ours.blocks if isinstance(b.ffn, MoEFFN)), None)
    if moe is not None:
        top_k, norm_topk_prob = qwen3_moe_routing(moe)
        pairs += [
            ("d_ff", moe.experts.d_ff, "moe_intermediate_size",
             qwen3_moe_field(config, "moe_intermediate_size")),
            ("n_experts", moe.n_experts, "num_experts",
             qwen3_moe_field(config, "num_experts")),
            ("top_k", top_k, "num_experts_per_tok",
             qwen3_moe_field(config, "num_experts_per_tok")),
            ("norm_topk_prob", norm_topk_prob, "norm_topk_prob",
             qwen3_moe_field(config, "norm_topk_prob")),
        ]
    if dense:
        pairs.append(("dense_d_ff", ours.blocks[dense[0]].ffn.d_ff, "intermediate_size",
                      qwen3_moe_field(config, "intermediate_size")))
    refuse_mismatches(pairs)
# --8<-- [end:check_qwen3_moe_config]


# --8<-- [start:load_hf_qwen3_moe]
# Mixtral's names: HF's mlp.gate is our ffn.router; its experts' fused gate_up_proj
# (E, 2I, d) and down_proj (E, d, I) are ours; a dense layer's mlp is Llama's
HF_QWEN3_MOE_NAMES = HF_MIXTRAL_NAMES


def load_hf_qwen3_moe(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                      config: object) -> LlamaLanguageModel:
    """Load a `Qwen3MoeForCausalLM` state dict by name, after
    `check_qwen3_moe_config`: `model.layers.i.mlp.gate.weight` ->
    `blocks.i.ffn.router.weight`, `mlp.experts.gate_up_proj` and `down_proj` ->
    `ffn.experts.` (the same layout), attention (with `q_norm` and `k_norm`) and
    norms as `load_hf_llama` names them."""
    check_qwen3_moe_config(ours, config)
    state = tied_head_state(ours, state_dict)
    return load_renamed(ours, state, HF_QWEN3_MOE_NAMES)
# --8<-- [end:load_hf_qwen3_moe]
