"""Chapter 11's numbers per published configuration: the published models'
configurations, their total and active parameters by formula, their KV caches, and the
figures their authors publish. Each formula is checked in tests/test_published.py against
Hugging Face's model of that configuration built on the meta device (shapes, no storage:
a 671-billion-parameter model costs no memory).

`PUBLISHED_CONFIGS` holds each model's Hugging Face configuration class and the fields
of its config.json that differ from that class's defaults (sources in the comments);
`parameter_counts(name)` is (total, active) from chapter 5's and chapter 9's formulas
(`gpt2_params`, `moe_params`, `mla_params`) and the extra norms, biases and sinks of
Gemma 3 and gpt-oss written out below, as are the layers of chapter 7's parallel-residual
families (`parallel_counts`: GPT-J 6B, Pythia-1.4B, Command R v01).

`cache_shape(name)` is each model's KV cache (chapter 10's `CacheShape`: the ledger's
six, and those it does not hold), whose width the tests check against the key and
value projections of the meta models. `published_model(name)` is the model our loader
builds from the configuration (on the meta device); `built_published_model` keeps one.
The FLOPs of a step are in `literate.numbers.flops`.

`PUBLISHED_FIGURES` holds the totals (and active counts) the authors publish, rounded
as they round them, with their sources; `rounds_to` compares a count with one.
"""

from __future__ import annotations

from functools import cache

import torch
from torch import nn

from literate.models.families import family_of_config
from literate.models.mixtral import mla_params, moe_params
from literate.numbers.cache_ledger import PUBLISHED_CACHES
from literate.numbers.params import CacheShape, gpt2_params, kv_cache_shape

__all__ = [
    "PUBLISHED_CONFIGS",
    "PUBLISHED_FIGURES",
    "rounds_to",
    "parameter_counts",
    "cache_shape",
    "published_name",
    "published_config",
    "published_model",
    "gpt_oss_counts",
    "parallel_counts",
    "IN_THE_LEDGER",
    "built_published_model",
]

# --8<-- [start:published_configs]
PUBLISHED_CONFIGS: dict[str, tuple[str, dict]] = {
    # The fields of each model's config.json that differ from its transformers class's
    # defaults (the repositories named; the rest of the file is the class's default).
    # openai-community/gpt2: GPT2Config's defaults
    "GPT-2 small": ("GPT2Config", {}),
    # openai-community/gpt2-xl
    "GPT-2 XL": ("GPT2Config", {"n_embd": 1600, "n_layer": 48, "n_head": 25}),
    # meta-llama/Llama-2-7b-hf (d 4096, FFN 11008, 32 layers and heads, vocab 32000,
    # untied: LlamaConfig's defaults)
    "Llama 2 7B": ("LlamaConfig", {"max_position_embeddings": 4096,
                                   "rms_norm_eps": 1e-5}),
    # meta-llama/Meta-Llama-3-8B
    "Llama 3 8B": ("LlamaConfig", {
        "vocab_size": 128256, "intermediate_size": 14336, "num_key_value_heads": 8,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500_000.0}}),
    # meta-llama/Meta-Llama-3-70B
    "Llama 3 70B": ("LlamaConfig", {
        "vocab_size": 128256, "hidden_size": 8192, "intermediate_size": 28672,
        "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500_000.0}}),
    # mistralai/Mistral-7B-v0.1 (its window of 4096: MistralConfig's default)
    "Mistral 7B v0.1": ("MistralConfig", {"max_position_embeddings": 32768,
                                          "rms_norm_eps": 1e-5}),
    # mistralai/Mixtral-8x7B-v0.1
    "Mixtral 8x7B": ("MixtralConfig", {"max_position_embeddings": 32768,
                                       "router_aux_loss_coef": 0.02}),
    # Qwen/Qwen3-0.6B (vocabulary, head_dim 128, eps: Qwen3Config's defaults)
    "Qwen3-0.6B": ("Qwen3Config", {
        "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8,
        "max_position_embeddings": 40960, "tie_word_embeddings": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0}}),
    # Qwen/Qwen3-30B-A3B
    "Qwen3-30B-A3B": ("Qwen3MoeConfig", {
        "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "moe_intermediate_size": 768,
        "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True,
        "vocab_size": 151936, "max_position_embeddings": 40960,
        "tie_word_embeddings": False, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0}}),
    # google/gemma-3-27b-pt, its text_config (the vision tower is not counted here;
    # the global layers divide the positions by 8: chapter 10's
    # LinearScaledRotaryEmbedding)
    "Gemma 3 27B": ("Gemma3TextConfig", {
        "vocab_size": 262208, "hidden_size": 5376, "intermediate_size": 21504,
        "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16,
        "head_dim": 128, "query_pre_attn_scalar": 168, "sliding_window": 1024,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0}}),
    # deepseek-ai/DeepSeek-V3: its context and YaRN (the main model, without the
    # multi-token-prediction layer the checkpoint also holds)
    "DeepSeek-V3": ("DeepseekV3Config", {
        "max_position_embeddings": 163_840,
        "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1,
                         "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 4096}}),
    # openai/gpt-oss-120b: GptOssConfig's defaults
    "gpt-oss-120b": ("GptOssConfig", {}),
    # Chapter 7's parallel residual. EleutherAI/gpt-j-6b: GPTJConfig's defaults (d 4096,
    # 28 layers of 16 heads, rotary_dim 64, FFN 4d, vocab 50400, context 2048, untied)
    "GPT-J 6B": ("GPTJConfig", {}),
    # EleutherAI/pythia-1.4b (the exact GELU, rotary_pct 0.25, rotary_emb_base 10000,
    # the parallel residual, context 2048, untied: GPTNeoXConfig's defaults)
    "Pythia-1.4B": ("GPTNeoXConfig", {
        "vocab_size": 50304, "hidden_size": 2048, "num_hidden_layers": 24,
        "num_attention_heads": 16, "intermediate_size": 8192, "eos_token_id": 0}),
    # CohereForAI/c4ai-command-r-v01 (d 8192, 40 layers of 64 heads, 64 key/value
    # heads, FFN 22528, vocab 256000, context 8192, logit_scale 0.0625, tied:
    # CohereConfig's defaults)
    "Command R v01": ("CohereConfig", {
        "rope_parameters": {"rope_type": "default", "rope_theta": 8_000_000.0}}),
}
# --8<-- [end:published_configs]


# --8<-- [start:published_figures]
# What the authors give, rounded as they give it (total, active or None), and where
PUBLISHED_FIGURES: dict[str, tuple[str, str | None, str, str]] = {
    "GPT-2 small": ("117M", None, "Radford et al. 2019, table 2", "radford-2019"),
    "GPT-2 XL": ("1542M", None, "Radford et al. 2019, table 2", "radford-2019"),
    "Llama 2 7B": ("7B", None, "Touvron et al. 2023b, table 1", "touvron-2023b"),
    "Llama 3 8B": ("8B", None, "Dubey et al. 2024, table 3", "dubey-2024"),
    "Llama 3 70B": ("70B", None, "Dubey et al. 2024, table 3", "dubey-2024"),
    "Mistral 7B v0.1": ("7B", None, "Jiang et al. 2023, abstract", "jiang-2023"),
    "Mixtral 8x7B": ("47B", "13B", "Jiang et al. 2024, abstract", "jiang-2024"),
    "Qwen3-0.6B": ("0.6B", None, "Qwen Team 2025, the model's name", "qwen-2025"),
    "Qwen3-30B-A3B": ("30B", "3B", "Qwen Team 2025, the model's name", "qwen-2025"),
    "Gemma 3 27B": ("27B", None, "Gemma Team 2025, the model's name", "gemma-2025"),
    "DeepSeek-V3": ("671B", "37B", "DeepSeek-AI 2024b, abstract", "deepseek-2024"),
    "gpt-oss-120b": ("116.83B", "5.13B", "OpenAI 2025, table 1", "openai-2025"),
    "GPT-J 6B": ("6B", None, "Wang & Komatsuzaki 2021, the model's name", "wang-2021"),
    "Pythia-1.4B": ("1.4B", None, "Biderman et al. 2023, table 1", "biderman-2023"),
    "Command R v01": ("35B", None, "Cohere For AI 2024, the model card",
                      "cohere-2024"),
}


def rounds_to(count: int, figure: str) -> bool:
    """Whether a count rounds to a published figure such as "116.8B" or "117M": within
    half a unit of its last digit."""
    units = {"M": 10**6, "B": 10**9}
    if not figure or figure[-1] not in units:
        raise ValueError(f"figure must be a number and M or B, got {figure!r}")
    digits = figure[:-1]
    decimals = len(digits.partition(".")[2])
    step = units[figure[-1]] / 10**decimals  # the unit of the last digit
    return abs(count - float(digits) * units[figure[-1]]) <= step / 2
# --8<-- [end:published_figures]


# --8<-- [start:parameter_counts]
def parameter_counts(name: str) -> tuple[int, int]:
    """(total, active per token) of a published model of `PUBLISHED_CONFIGS`, exact
    integers by formula from the numbers of its configuration (`published_config`):
    what Hugging Face's model of that config holds (tied tensors once)."""
    c = published_config(name)
    d, layers, h, vocab = (getattr(c, "hidden_size", None), c.num_hidden_layers,
                           c.num_attention_heads, c.vocab_size)
    kind = c.model_type
    if kind == "gpt2":
        n = gpt2_params(vocab, c.n_positions, c.n_embd, c.n_head, c.n_layer).total
        return n, n
    if kind in ("llama", "mistral"):  # Llama's block, dense
        return moe_params(d, layers, 1, 1, c.intermediate_size, h,
                          c.num_key_value_heads, vocab, dense_layers=layers,
                          dense_d_ff=c.intermediate_size,
                          tied=c.tie_word_embeddings)
    if kind == "mixtral":
        return moe_params(d, layers, c.num_local_experts, c.num_experts_per_tok,
                          c.intermediate_size, h, c.num_key_value_heads, vocab)
    if kind == "qwen3":  # Llama's count with QK-norm's two gains of d_head a layer
        return moe_params(d, layers, 1, 1, c.intermediate_size, h,
                          c.num_key_value_heads, vocab, d_head=c.head_dim,
                          dense_layers=layers, dense_d_ff=c.intermediate_size,
                          tied=c.tie_word_embeddings, qk_norm=True)
    if kind == "qwen3_moe":
        return moe_params(d, layers, c.num_experts, c.num_experts_per_tok,
                          c.moe_intermediate_size, h, c.num_key_value_heads, vocab,
                          d_head=c.head_dim, qk_norm=True)
    if kind == "gemma3_text":
        # Llama's count with QK-norm, tied, plus the sandwich's two more norms a layer
        total, _ = moe_params(d, layers, 1, 1, c.intermediate_size, h,
                              c.num_key_value_heads, vocab, d_head=c.head_dim,
                              dense_layers=layers, dense_d_ff=c.intermediate_size,
                              tied=True, qk_norm=True)
        total += layers * 2 * d
        return total, total
    if kind == "deepseek_v3":
        attention = mla_params(d, h, q_lora_rank=c.q_lora_rank,
                               kv_lora_rank=c.kv_lora_rank,
                               qk_nope_head_dim=c.qk_nope_head_dim,
                               qk_rope_head_dim=c.qk_rope_head_dim,
                               v_head_dim=c.v_head_dim)
        return moe_params(d, layers, c.n_routed_experts, c.num_experts_per_tok,
                          c.moe_intermediate_size, h, c.num_key_value_heads, vocab,
                          shared=c.n_shared_experts,
                          dense_layers=c.first_k_dense_replace,
                          dense_d_ff=c.intermediate_size, attention=attention)
    if kind == "gpt_oss":
        return gpt_oss_counts(d=d, layers=layers, heads=h,
                              kv_heads=c.num_key_value_heads, d_head=c.head_dim,
                              experts=c.num_local_experts, top_k=c.num_experts_per_tok,
                              d_ff=c.intermediate_size, vocab=vocab)
    if kind in ("gptj", "gpt_neox", "cohere"):  # chapter 7's parallel residual
        n = parallel_counts(c)
        return n, n
    raise ValueError(f"{name}: no formula here for a {kind} model")


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


def parallel_counts(c: object) -> int:
    """The parameters of a GPT-J, GPT-NeoX or Cohere configuration (dense: all of them
    active). A layer: attention (q, k, v, o), the FFN, the norms. GPT-J: no attention
    biases, a dense FFN with biases, one LayerNorm; its head has a bias (its weight
    the embedding if tied). GPT-NeoX: biases everywhere, two LayerNorms. Cohere: GQA
    without biases, SwiGLU, one LayerNorm without a bias. Each ends in a final norm."""
    d, layers, vocab = c.hidden_size, c.num_hidden_layers, c.vocab_size
    table = vocab * d * (1 if c.tie_word_embeddings else 2)  # embedding, head
    if c.model_type == "gptj":
        f = c.n_inner or 4 * d
        layer = 4 * d * d + 2 * d * f + f + d + 2 * d
        return layers * layer + 2 * d + table + vocab  # + the head's bias
    if c.model_type == "gpt_neox":
        f = c.intermediate_size
        layer = 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d
        return layers * layer + 2 * d + table
    kv = c.num_key_value_heads * (d // c.num_attention_heads)  # Cohere: GQA
    layer = 2 * d * d + 2 * d * kv + 3 * d * c.intermediate_size + d
    return layers * layer + d + table
# --8<-- [end:parameter_counts]


# --8<-- [start:cache_shape]
IN_THE_LEDGER = {"Llama 3 8B": "Llama 3 8B", "Llama 3 70B": "Llama 3 70B",
                 "Mistral 7B v0.1": "Mistral 7B v0.1", "Gemma 3 27B": "Gemma 3 27B",
                 "DeepSeek-V3": "DeepSeek-V3", "gpt-oss-120b": "gpt-oss-120b"}


def cache_shape(name: str) -> CacheShape:
    """The KV cache of a published model: chapter 10's ledger entry, or for those it
    does not hold (MHA for GPT-2, Llama 2 7B and the parallel families, GQA for Mixtral
    and the Qwen3s; no window) the layers, heads and key/value heads of its
    configuration."""
    if published_name(name) in IN_THE_LEDGER:
        return next(s for s in PUBLISHED_CACHES if s.name == IN_THE_LEDGER[name])
    c = published_config(name)  # refuses an unknown name
    heads = c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or heads  # GPT-2: MHA
    d_head = getattr(c, "head_dim", None) or c.hidden_size // heads
    return kv_cache_shape(name, n_layers=c.num_hidden_layers, n_heads=heads,
                          n_kv_heads=kv_heads, d_head=d_head)
# --8<-- [end:cache_shape]


# --8<-- [start:published_model]
def published_name(name: object) -> str:
    """`name` if it is a model of `PUBLISHED_CONFIGS` (by its name, a str)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, one of {sorted(PUBLISHED_CONFIGS)}, "
                        f"got {type(name).__name__}")
    if name not in PUBLISHED_CONFIGS:
        raise ValueError(f"no published configuration named {name!r}; "
                         f"known: {sorted(PUBLISHED_CONFIGS)}")
    return name


def published_config(name: str) -> object:
    """The Hugging Face configuration of a published model: its config class of
    `PUBLISHED_CONFIGS` filled with the fields given there."""
    import transformers

    config_class, fields = PUBLISHED_CONFIGS[published_name(name)]
    return getattr(transformers, config_class)(**fields)


def published_model(name: str) -> nn.Module:
    """Our model of a published configuration (`published_config`), built by the
    loader of its family (`literate.models.families`) on the meta device: shapes only,
    so DeepSeek-V3 costs no memory. A new model at each call."""
    config = published_config(name)
    try:
        family = family_of_config(PUBLISHED_CONFIGS[name][0])
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    with torch.device("meta"):
        return family.function("from_hf_config")(config, **family.inference_options)
# --8<-- [end:published_model]


def built_published_model(name: str) -> nn.Module:
    """`published_model(name)`, built once and kept (meta tensors: no memory); for
    reading, not for changing."""
    return _built(published_name(name))


@cache
def _built(name: str) -> nn.Module:
    return published_model(name)


