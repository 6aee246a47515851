"""DeepSeek-V3 (DeepSeek-AI 2024b): multi-head latent attention, YaRN and a mixture of
experts in Llama's pre-norm block (chapter 10).

The parts are elsewhere: MLA in `literate/parts/mla.py`, YaRN in
`literate/parts/rope_scaling.py`, the sigmoid router with its bias and the experts in
`literate/parts/moe.py`. This family module reads a Hugging Face `DeepseekV3Config` (or
its config.json): one attention layer (`mla_from_hf_config`), the whole model
(`deepseek_v3_from_hf_config`: the first `first_k_dense_replace` blocks dense, the rest
MoE with a shared expert), and loads a `DeepseekV3ForCausalLM` state dict by name
(`load_hf_deepseek_v3`, after `check_deepseek_v3_config`). What ours does not support
is refused, naming the field, never silently changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import torch
import torch.nn.functional as F
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
from literate.parts.blocks import PreNormBlock
from literate.parts.checks import non_negative_int, positive_float, positive_int
from literate.parts.ffn import GatedFFN
from literate.parts.mla import MultiHeadLatentAttention
from literate.parts.moe import Experts, MoEFFN
from literate.parts.norms import RMSNorm
from literate.parts.positions import RotaryEmbedding
from literate.parts.rope_scaling import (
    YarnRotaryEmbedding,
    rope_settings,
    yarn_mscale,
    yarn_settings,
)
from literate.parts.routers import DeepSeekV3Router

__all__ = [
    "DEEPSEEK_V3_DEFAULTS",
    "deepseek_field",
    "deepseek_rope_parameters",
    "deepseek_rope",
    "DEEPSEEK_UNSUPPORTED",
    "check_deepseek_supported",
    "mla_from_hf_config",
    "deepseek_v3_moe",
    "deepseek_v3_init_",
    "deepseek_v3_from_hf_config",
    "check_deepseek_v3_config",
    "HF_DEEPSEEK_V3_NAMES",
    "load_hf_deepseek_v3",
]


# --8<-- [start:mla_from_hf_config]
# transformers' DeepseekV3Config defaults (DeepSeek-V3's config.json), for what a
# config.json leaves out
DEEPSEEK_V3_DEFAULTS = {
    "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
    "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "n_group": 8,
    "topk_group": 4, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
    "norm_topk_prob": True, "hidden_act": "silu", "max_position_embeddings": 4096,
    "initializer_range": 0.02, "rms_norm_eps": 1e-6, "pretraining_tp": 1,
    "tie_word_embeddings": False, "rope_theta": 10_000.0, "rope_parameters": None,
    "rope_scaling": None, "rope_interleave": True, "attention_bias": False,
    "attention_dropout": 0.0,
}


def deepseek_field(config: object, name: str) -> object:
    """`config.name` of a DeepseekV3Config, or `config[name]` of its config.json."""
    return config_field(config, name, DEEPSEEK_V3_DEFAULTS)


def deepseek_rope_parameters(config: object) -> dict:
    """The RoPE settings of a config: transformers 5 keeps them in `rope_parameters`
    ({"rope_type", "rope_theta", ...}); DeepSeek's config.json has `rope_theta` and
    `rope_scaling` ({"type": "yarn", "factor": 40, ...})."""
    parameters = dict(deepseek_field(config, "rope_scaling") or {})
    parameters |= dict(deepseek_field(config, "rope_parameters") or {})
    parameters.setdefault("rope_type", parameters.get("type", "default"))
    parameters.setdefault("rope_theta", deepseek_field(config, "rope_theta"))
    return parameters


def deepseek_rope(config: object) -> tuple[RotaryEmbedding, float]:
    """(the RoPE of the layer's RoPE parts, the softmax scale) of a DeepseekV3Config,
    as HF's DeepseekV3RotaryEmbedding and DeepseekV3Attention make them. The scale is
    1/sqrt(d_qk); with yarn (DeepSeek-V3's checkpoints) the frequencies are YaRN's, cos
    and sin are multiplied by its attention factor, and the scale by
    yarn_mscale(factor, mscale_all_dim)^2 (1.87 for factor 40). Other scalings are
    refused."""
    p = deepseek_rope_parameters(config)
    field = partial(deepseek_field, config)  # field(name): the config's value
    d_rope, base = field("qk_rope_head_dim"), float(p["rope_theta"])
    if d_rope % 2:
        raise ValueError(f"config qk_rope_head_dim must be even (pairs rotate), got "
                         f"{d_rope}")
    layout = "interleaved" if field("rope_interleave") else "half"
    scale = (field("qk_nope_head_dim") + d_rope) ** -0.5
    if p["rope_type"] == "default":
        return RotaryEmbedding(d_rope, base=base, layout=layout), scale
    if p["rope_type"] != "yarn":
        raise ValueError(f"RoPE scaling {p['rope_type']!r} is not implemented (MLA "
                         "here turns the plain frequencies, or yarn's)")
    yarn = yarn_settings(p, field("max_position_embeddings"))
    if p.get("mscale_all_dim"):  # HF's yarn_apply_mscale: the given factor, squared
        scale *= yarn_mscale(p["factor"], p["mscale_all_dim"]) ** 2
    return YarnRotaryEmbedding(d_rope, base=base, layout=layout, **yarn), scale


DEEPSEEK_UNSUPPORTED = {  # a field, and the one value ours has for it
    "hidden_act": "silu", "pretraining_tp": 1, "attention_dropout": 0.0,
}


def check_deepseek_supported(config: object) -> None:
    """Refuse, rather than change, what ours does not do: another activation,
    tensor-parallel slicing, attention dropout, key/value head counts other than the
    query heads' (HF's eager path would repeat MLA's H keys), and RoPE scalings other
    than yarn (`deepseek_rope`)."""
    for name, needed in DEEPSEEK_UNSUPPORTED.items():
        if deepseek_field(config, name) != needed:
            raise ValueError(f"config {name}={deepseek_field(config, name)!r} is not "
                             f"supported (ours: {needed!r})")
    heads = deepseek_field(config, "num_attention_heads")
    kv_heads = deepseek_field(config, "num_key_value_heads") or heads
    if kv_heads != heads:
        raise ValueError(f"config num_key_value_heads={kv_heads} must equal "
                         f"num_attention_heads={heads}: MLA makes a key per head")
    deepseek_rope(config)


def mla_from_hf_config(config: object) -> MultiHeadLatentAttention:
    """Our MLA layer in the shape of a DeepseekV3Config (or its config.json dict)."""
    check_deepseek_supported(config)
    field = partial(deepseek_field, config)  # field(name): the config's value
    rope, scale = deepseek_rope(config)
    return MultiHeadLatentAttention(
        field("hidden_size"), field("num_attention_heads"),
        q_lora_rank=field("q_lora_rank"), kv_lora_rank=field("kv_lora_rank"),
        qk_nope_head_dim=field("qk_nope_head_dim"),
        qk_rope_head_dim=field("qk_rope_head_dim"), v_head_dim=field("v_head_dim"),
        rope=rope, scale=scale, bias=bool(field("attention_bias")))
# --8<-- [end:mla_from_hf_config]


# --8<-- [start:deepseek_v3_from_hf_config]
def deepseek_v3_moe(d_model: int, n_experts: int, d_ff: int, *, top_k: int,
                    n_group: int, topk_group: int, n_shared: int,
                    norm_topk_prob: bool = True,
                    routed_scaling_factor: float = 1.0) -> MoEFFN:
    """DeepSeek-V3's FFN (chapter 9): `n_experts` routed SwiGLU experts of width d_ff,
    its group-limited sigmoid router, and `n_shared` shared experts as one SwiGLU of
    width n_shared d_ff (HF's `shared_experts`)."""
    return MoEFFN(DeepSeekV3Router(d_model, n_experts, top_k=top_k, n_group=n_group,
                                   topk_group=topk_group, norm_topk_prob=norm_topk_prob,
                                   routed_scaling_factor=routed_scaling_factor),
                  Experts(n_experts, d_model, d_ff),
                  shared=GatedFFN(d_model, positive_int("n_shared", n_shared) * d_ff,
                                  F.silu))


def deepseek_v3_init_(model: nn.Module, *, std: float = 0.02) -> nn.Module:
    """HF's DeepSeek-V3 initialisation, in place: every linear map, the embedding, the
    routers and the experts ~ N(0, std^2); gains 1, the routers' balancing bias 0."""
    std = positive_float("std", std)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding, DeepSeekV3Router)):
                module.weight.normal_(0.0, std)
            elif isinstance(module, Experts):
                module.gate_up_proj.normal_(0.0, std)
                module.down_proj.normal_(0.0, std)
    return model


def deepseek_v3_from_hf_config(config: object) -> LlamaLanguageModel:
    """Our DeepSeek-V3 in the shape of a DeepseekV3Config: chapter 7's
    `LlamaLanguageModel` of `PreNormBlock`s, each an MLA layer, RMSNorms, and a dense
    SwiGLU FFN for the first `first_k_dense_replace` blocks, DeepSeek-V3's MoE after.
    The multi-token-prediction module is not built (HF's model has none either)."""
    check_model_type(config, "deepseek_v3")
    check_deepseek_supported(config)
    field = partial(deepseek_field, config)  # field(name): the config's value
    d, eps = field("hidden_size"), field("rms_norm_eps")
    n_layers = positive_int("num_hidden_layers", field("num_hidden_layers"))
    dense = min(non_negative_int("first_k_dense_replace",
                                 field("first_k_dense_replace")), n_layers)

    def ffn(layer: int) -> nn.Module:
        if layer < dense:
            return GatedFFN(d, field("intermediate_size"), F.silu)
        return deepseek_v3_moe(d, field("n_routed_experts"),
                               field("moe_intermediate_size"),
                               top_k=field("num_experts_per_tok"),
                               n_group=field("n_group"), topk_group=field("topk_group"),
                               n_shared=field("n_shared_experts"),
                               norm_topk_prob=bool(field("norm_topk_prob")),
                               routed_scaling_factor=field("routed_scaling_factor"))

    blocks = [PreNormBlock(mla_from_hf_config(config), ffn(i), RMSNorm(d, eps=eps),
                           RMSNorm(d, eps=eps)) for i in range(n_layers)]
    vocab = field("vocab_size")
    model = LlamaLanguageModel(
        nn.Embedding(vocab, d), blocks, RMSNorm(d, eps=eps),
        None if field("tie_word_embeddings") else nn.Linear(d, vocab, bias=False),
        context=field("max_position_embeddings"))
    return deepseek_v3_init_(model, std=field("initializer_range"))
# --8<-- [end:deepseek_v3_from_hf_config]


# --8<-- [start:load_hf_deepseek_v3]
def check_deepseek_v3_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights between models of different shape or function, naming
    both sides: every block's attention, FFN kind (dense or MoE) and widths."""
    if not isinstance(ours, LlamaLanguageModel) or not all(
            isinstance(b, PreNormBlock) and isinstance(b.attn, MultiHeadLatentAttention)
            for b in ours.blocks):
        raise TypeError(f"ours must be a LlamaLanguageModel of MLA blocks, got "
                        f"{type(ours).__name__}")
    check_deepseek_supported(config)
    field = partial(deepseek_field, config)  # field(name): the config's value
    dense = field("first_k_dense_replace")
    rope, scale = deepseek_rope(config)
    rows = [  # (our name, ours, their field, theirs)
        ("vocab_size", ours.vocab_size, "vocab_size", field("vocab_size")),
        ("d_model", ours.d_model, "hidden_size", field("hidden_size")),
        ("n_layers", len(ours.blocks), "num_hidden_layers", field("num_hidden_layers")),
        ("tied", ours.lm_head.weight is ours.token_embedding.weight,
         "tie_word_embeddings", bool(field("tie_word_embeddings")))]
    for i, block in enumerate(ours.blocks):
        a, moe = block.attn, isinstance(block.ffn, MoEFFN)
        rows += [(f"blocks[{i}].attn.{n}", getattr(a, n), f, field(f)) for n, f in (
            ("n_heads", "num_attention_heads"), ("q_lora_rank", "q_lora_rank"),
            ("kv_lora_rank", "kv_lora_rank"), ("qk_nope_head_dim", "qk_nope_head_dim"),
            ("qk_rope_head_dim", "qk_rope_head_dim"), ("v_head_dim", "v_head_dim"))]
        rows += [
            (f"blocks[{i}].attn.rope", rope_settings(a.rope), "rope_parameters",
             rope_settings(rope)),
            (f"blocks[{i}].attn.scale", a.scale, "the softmax scale", scale),
            (f"blocks[{i}].attn has bias", a.o_proj.bias is not None, "attention_bias",
             bool(field("attention_bias"))),
            (f"blocks[{i}].attn_norm.eps", block.attn_norm.eps, "rms_norm_eps",
             field("rms_norm_eps")),
            (f"blocks[{i}].ffn is MoE", moe, "first_k_dense_replace", i >= dense)]
        if moe:
            rows += [(f"blocks[{i}].ffn.n_experts", block.ffn.n_experts,
                      "n_routed_experts", field("n_routed_experts")),
                     (f"blocks[{i}].ffn.experts.d_ff", block.ffn.experts.d_ff,
                      "moe_intermediate_size", field("moe_intermediate_size")),
                     (f"blocks[{i}].ffn.router options", block.ffn.router.options,
                      "the router's fields", {
                          "top_k": field("num_experts_per_tok"),
                          "n_group": field("n_group"),
                          "topk_group": field("topk_group"),
                          "norm_topk_prob": bool(field("norm_topk_prob")),
                          "routed_scaling_factor": field("routed_scaling_factor")}),
                     (f"blocks[{i}].ffn.shared.d_ff", block.ffn.shared.d_ff,
                      "n_shared_experts * moe_intermediate_size",
                      field("n_shared_experts") * field("moe_intermediate_size"))]
        else:
            rows += [(f"blocks[{i}].ffn.d_ff", block.ffn.d_ff, "intermediate_size",
                      field("intermediate_size"))]
    refuse_mismatches(rows)


# Llama's names (self_attn. -> attn. keeps MLA's own), then the MoE's: HF's mlp.gate
# is our router, its shared_experts our shared
HF_DEEPSEEK_V3_NAMES = [
    *HF_LLAMA_NAMES,
    (r"^(blocks\.\d+\.ffn\.)gate\.", r"\1router."),
    (r"^(blocks\.\d+\.ffn\.)shared_experts\.", r"\1shared."),
]


def load_hf_deepseek_v3(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                        config: object) -> LlamaLanguageModel:
    """Load a `DeepseekV3ForCausalLM` state dict by name, after
    `check_deepseek_v3_config`: the attention's names are HF's own."""
    check_deepseek_v3_config(ours, config)
    return load_renamed(ours, tied_head_state(ours, state_dict), HF_DEEPSEEK_V3_NAMES)
# --8<-- [end:load_hf_deepseek_v3]
