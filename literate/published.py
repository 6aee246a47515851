"""Chapter 11's numbers per published configuration (a start): total and active
parameters of eleven published models, by formula, each formula checked in
tests/test_published.py against Hugging Face's model of that configuration built on the
meta device (shapes, no storage: a 671-billion-parameter model costs no memory).

`PUBLISHED_CONFIGS` holds each model's Hugging Face configuration class and the fields
of its config.json that differ from that class's defaults (sources in the comments);
`parameter_counts(name)` is (total, active) from chapter 5's and chapter 9's formulas
(`gpt2_params`, `moe_params`, `mla_params`) and the extra norms, biases and sinks of
Gemma 3 and gpt-oss written out below.

`cache_shape(name)` is each model's KV cache (chapter 10's `CacheShape`: the ledger's
six, and the five it does not hold), whose width the tests check against the key and
value projections of the meta models.

`decoding_flops(...)` is the forward FLOPs of one decoding step of a dense decoder (a
token at `keys` cached positions): 2 per weight entry of the linear maps it passes
through, and 4 H d_head per key in each layer's attention (the scores and the weighted
sum); tests/test_published.py checks it against PyTorch's FlopCounterMode on our
Llama and GPT-2 models.

`dense_decoding_flops(model, keys)` reads that shape from a built dense model (windows
included), and `attention_equals_matmuls_at(model)` is the context where the step's
attention FLOPs reach its matmul FLOPs, the "2 N per token" (6 N to train) of the rule
of thumb: past it the rule undercounts the step by half or more.

Not yet here (issue 13): the FLOPs of the MoE and latent models, the published totals
cited
on the page (and why ours differs from a rounded one, e.g. gpt-oss-120b's active count
here includes the embedding and the head).
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from literate.long_context import published_cache
from literate.mixtral import mla_params, moe_params
from literate.params import CacheShape, gpt2_params, kv_cache_shape

__all__ = ["PUBLISHED_CONFIGS", "parameter_counts", "cache_shape", "decoding_flops",
           "published_model", "dense_decoding_flops", "attention_equals_matmuls_at"]

PUBLISHED_CONFIGS: dict[str, tuple[str, dict]] = {
    # openai-community/gpt2 config.json = transformers' GPT2Config defaults
    "GPT-2 small": ("GPT2Config", {}),
    # openai-community/gpt2-xl config.json: n_embd 1600, n_layer 48, n_head 25
    "GPT-2 XL": ("GPT2Config", {"n_embd": 1600, "n_layer": 48, "n_head": 25}),
    # meta-llama/Llama-2-7b-hf config.json = LlamaConfig's defaults (4096, 11008, 32
    # layers, 32 heads, vocab 32000, untied)
    "Llama 2 7B": ("LlamaConfig", {}),
    # meta-llama/Meta-Llama-3-8B config.json
    "Llama 3 8B": ("LlamaConfig", {"vocab_size": 128256, "intermediate_size": 14336,
                                   "num_key_value_heads": 8, "rope_parameters": {
                                       "rope_type": "default", "rope_theta": 500_000.0}}),
    # meta-llama/Meta-Llama-3-70B config.json
    "Llama 3 70B": ("LlamaConfig", {"vocab_size": 128256, "hidden_size": 8192,
                                    "intermediate_size": 28672, "num_hidden_layers": 80,
                                    "num_attention_heads": 64,
                                    "num_key_value_heads": 8, "rope_parameters": {
                                        "rope_type": "default",
                                        "rope_theta": 500_000.0}}),
    # mistralai/Mistral-7B-v0.1 config.json = MistralConfig's defaults
    "Mistral 7B": ("MistralConfig", {}),
    # mistralai/Mixtral-8x7B-v0.1 config.json = MixtralConfig's defaults
    "Mixtral 8x7B": ("MixtralConfig", {}),
    # Qwen/Qwen3-30B-A3B config.json
    "Qwen3-30B-A3B": ("Qwen3MoeConfig", {
        "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "moe_intermediate_size": 768,
        "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936,
        "tie_word_embeddings": False, "decoder_sparse_step": 1, "mlp_only_layers": []}),
    # google/gemma-3-27b-pt config.json, text_config (chapter 10's ledger has its cache;
    # its global layers' linear RoPE scaling by 8 changes no parameter and is left out)
    "Gemma 3 27B": ("Gemma3TextConfig", {
        "vocab_size": 262208, "hidden_size": 5376, "intermediate_size": 21504,
        "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16,
        "head_dim": 128, "query_pre_attn_scalar": 168, "sliding_window": 1024}),
    # deepseek-ai/DeepSeek-V3 config.json: DeepseekV3Config's defaults, and its YaRN
    "DeepSeek-V3": ("DeepseekV3Config", {
        "max_position_embeddings": 163_840,
        "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1,
                         "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 4096}}),
    # openai/gpt-oss-120b config.json = GptOssConfig's defaults
    "gpt-oss-120b": ("GptOssConfig", {}),
}


def parameter_counts(name: str) -> tuple[int, int]:
    """(total, active per token) of a published model of `PUBLISHED_CONFIGS`, exact
    integers by formula: what Hugging Face's model of that config holds (its parameter
    count; tied tensors once)."""
    if name == "GPT-2 small":
        n = gpt2_params(50257, 1024, 768, 12, 12).total
        return n, n
    if name == "GPT-2 XL":
        n = gpt2_params(50257, 1024, 1600, 25, 48).total
        return n, n
    dense = {  # d, layers, heads, kv heads, d_ff, vocab: Llama's block, untied
        "Llama 2 7B": (4096, 32, 32, 32, 11008, 32000),
        "Llama 3 8B": (4096, 32, 32, 8, 14336, 128256),
        "Llama 3 70B": (8192, 80, 64, 8, 28672, 128256),
        "Mistral 7B": (4096, 32, 32, 8, 14336, 32000),
    }
    if name in dense:
        d, layers, h, h_kv, d_ff, vocab = dense[name]
        return moe_params(d, layers, 1, 1, d_ff, h, h_kv, vocab, dense_layers=layers,
                          dense_d_ff=d_ff)
    if name == "Mixtral 8x7B":
        return moe_params(4096, 32, 8, 2, 14336, 32, 8, 32000)
    if name == "Qwen3-30B-A3B":
        return moe_params(2048, 48, 128, 8, 768, 32, 4, 151936, d_head=128,
                          qk_norm=True)
    if name == "Gemma 3 27B":
        # Llama's count with QK-norm, tied, plus the sandwich's two more norms a layer
        d, layers = 5376, 62
        total, _ = moe_params(d, layers, 1, 1, 21504, 32, 16, 262208, d_head=128,
                              dense_layers=layers, dense_d_ff=21504, tied=True,
                              qk_norm=True)
        total += layers * 2 * d
        return total, total
    if name == "DeepSeek-V3":
        attention = mla_params(7168, 128, q_lora_rank=1536, kv_lora_rank=512,
                               qk_nope_head_dim=128, qk_rope_head_dim=64,
                               v_head_dim=128)
        return moe_params(7168, 61, 256, 8, 2048, 128, 128, 129280, shared=1,
                          dense_layers=3, dense_d_ff=18432, attention=attention)
    if name == "gpt-oss-120b":
        return gpt_oss_counts(d=2880, layers=36, heads=64, kv_heads=8, d_head=64,
                              experts=128, top_k=4, d_ff=2880, vocab=201088)
    raise ValueError(f"no published configuration named {name!r}; "
                     f"known: {sorted(PUBLISHED_CONFIGS)}")


def gpt_oss_counts(*, d: int, layers: int, heads: int, kv_heads: int, d_head: int,
                   experts: int, top_k: int, d_ff: int, vocab: int) -> tuple[int, int]:
    """gpt-oss's (total, active): per layer, attention with biases on q, k, v and o and
    one sink per head; a router with a bias; experts whose fused gate-and-up map
    (2 d_ff x d, and 2 d_ff biases) and down map (d x d_ff, and d biases) all have
    biases; two RMSNorms. Then the embedding, the final norm and an untied head."""
    attention = (2 * d * heads * d_head + 2 * d * kv_heads * d_head  # q, o; k, v
                 + heads * d_head + 2 * kv_heads * d_head + d  # their biases
                 + heads)  # the sinks
    expert = 2 * d_ff * d + 2 * d_ff + d * d_ff + d
    always = layers * (attention + 2 * d + experts * d + experts)  # router and bias
    outside = 2 * vocab * d + d
    return (always + layers * experts * expert + outside,
            always + layers * top_k * expert + outside)


IN_THE_LEDGER = {"Llama 3 8B": "Llama 3 8B", "Llama 3 70B": "Llama 3 70B",
                 "Mistral 7B": "Mistral 7B v0.1", "Gemma 3 27B": "Gemma 3 27B",
                 "DeepSeek-V3": "DeepSeek-V3", "gpt-oss-120b": "gpt-oss-120b"}


def cache_shape(name: str) -> CacheShape:
    """The KV cache of a published model: chapter 10's ledger entry, or for the five it
    does not hold their layers and key/value heads (MHA for GPT-2 and Llama 2 7B, GQA
    for Mixtral and Qwen3-30B-A3B; no window)."""
    if name in IN_THE_LEDGER:
        return published_cache(IN_THE_LEDGER[name])
    others = {  # layers, heads, key/value heads, head width
        "GPT-2 small": (12, 12, 12, 64), "GPT-2 XL": (48, 25, 25, 64),
        "Llama 2 7B": (32, 32, 32, 128), "Mixtral 8x7B": (32, 32, 8, 128),
        "Qwen3-30B-A3B": (48, 32, 4, 128),
    }
    if name not in others:
        raise ValueError(f"no published configuration named {name!r}; "
                         f"known: {sorted(PUBLISHED_CONFIGS)}")
    layers, heads, kv_heads, d_head = others[name]
    return kv_cache_shape(name, n_layers=layers, n_heads=heads, n_kv_heads=kv_heads,
                          d_head=d_head)


def decoding_flops(*, d_model: int, n_layers: int, n_heads: int, n_kv_heads: int,
                   d_head: int, d_ff: int, vocab: int, keys: int,
                   gated: bool = True) -> dict[str, int]:
    """Forward FLOPs of one decoding step of a dense decoder whose token reads `keys`
    keys in every layer (its own included): "matmuls", 2 per weight entry of q, k, v,
    o, the FFN (3 d d_ff gated, 2 d d_ff dense) and the head (the embedding is a
    lookup, norms and biases are additions: not counted); "attention", 2 H d_head per
    key for the scores and as many for the weighted sum, in each layer."""
    per_layer = (2 * d_model * n_heads * d_head + 2 * d_model * n_kv_heads * d_head
                 + (3 if gated else 2) * d_model * d_ff)
    matmuls = 2 * (n_layers * per_layer + vocab * d_model)
    attention = n_layers * 4 * n_heads * d_head * keys
    return {"matmuls": matmuls, "attention": attention, "total": matmuls + attention}


def published_model(name: str) -> nn.Module:
    """Our model of a published configuration (its Hugging Face config class filled
    with `PUBLISHED_CONFIGS`'s fields), built by this site's loaders on the meta device:
    shapes only, so DeepSeek-V3 costs no memory. Qwen3-30B-A3B has no loader here."""
    import transformers

    from literate.gemma3 import gemma3_from_hf_config
    from literate.gpt_oss import gpt_oss_from_hf_config
    from literate.llama import llama_from_hf_config
    from literate.mla import deepseek_v3_from_hf_config
    from literate.mixtral import mixtral_from_hf_config
    from literate.models import gpt2_from_hf_config
    from literate.window import mistral_from_hf_config

    builders = {"GPT2Config": partial(gpt2_from_hf_config, inference=True),
                "LlamaConfig": llama_from_hf_config, "MistralConfig": mistral_from_hf_config,
                "MixtralConfig": mixtral_from_hf_config,
                "Gemma3TextConfig": gemma3_from_hf_config,
                "DeepseekV3Config": deepseek_v3_from_hf_config,
                "GptOssConfig": gpt_oss_from_hf_config}
    if name not in PUBLISHED_CONFIGS:
        raise ValueError(f"no published configuration named {name!r}; "
                         f"known: {sorted(PUBLISHED_CONFIGS)}")
    config_class, fields = PUBLISHED_CONFIGS[name]
    if config_class not in builders:
        raise ValueError(f"{name}: no loader here for a {config_class}")
    config = getattr(transformers, config_class)(**fields)
    with torch.device("meta"):
        return builders[config_class](config)


def dense_decoding_flops(model: nn.Module, keys: int) -> dict[str, int]:
    """`decoding_flops` with the shape read from a built dense decoder of ours (a
    LlamaLanguageModel of SwiGLU blocks), e.g. `published_model("Llama 3 8B")`; a
    layer with a window reads min(window, keys) keys (chapter 10)."""
    from literate.ffn import GatedFFN

    block = model.blocks[0]
    if not all(type(b.ffn) is GatedFFN for b in model.blocks):
        raise ValueError("a dense decoder of gated FFNs is needed (MoE and latent "
                         "models are not counted by this formula)")
    attn = block.attn
    flops = decoding_flops(d_model=model.d_model, n_layers=len(model.blocks),
                           n_heads=attn.n_heads, n_kv_heads=attn.n_kv_heads,
                           d_head=attn.d_head, d_ff=block.ffn.d_ff,
                           vocab=model.vocab_size, keys=keys)
    read = sum(keys if getattr(b.attn, "window", None) is None
               else min(b.attn.window, keys) for b in model.blocks)
    flops["attention"] = 4 * attn.n_heads * attn.d_head * read
    flops["total"] = flops["matmuls"] + flops["attention"]
    return flops


def attention_equals_matmuls_at(model: nn.Module) -> int | None:
    """The context at which a decoding step's attention FLOPs reach its matmul FLOPs
    (`dense_decoding_flops`), or None if they never do (every layer has a window too
    short): the rule of thumb 2 N per token (6 N to train) counts the matmuls only, and
    stops describing the step's cost as the context nears this."""
    matmuls = dense_decoding_flops(model, 1)["matmuls"]
    attn = model.blocks[0].attn
    at = matmuls // (4 * attn.n_heads * attn.d_head * len(model.blocks))
    if dense_decoding_flops(model, at + 1)["attention"] <= matmuls:
        return None  # the windows cap the attention below the matmuls
    return at
