"""Chapter 10's cache ledger: what the KV cache of six published models costs, per token,
per layer and for a whole context, in bfloat16 at batch 1.

The numbers of each model are written once, in `PUBLISHED_CACHES`, from its
config.json (sources in the comments; where chapter 7's catalog also holds a model's
heads, tests/test_cache_ledger.py checks the two agree). The formula is `literate.numbers.params.cache_bytes`;
the tests check it against the `.nbytes` of the caches our windowed, interleaved and
latent models allocate, and against Hugging Face's config classes, attention modules
(on the meta device) and StaticCache layers for these very configurations.
"""

from __future__ import annotations

from collections.abc import Sequence

from literate.numbers.params import (
    CacheShape,
    cache_bytes,
    cache_bytes_per_token_per_layer,
    kv_cache_shape,
    latent_cache_shape,
)

__all__ = [
    "GIB",
    "LEDGER_CONTEXTS",
    "PUBLISHED_CACHES",
    "cache_ledger",
    "growth_stops",
    "ledger_row",
    "published_cache",
]

GIB = 2**30


# --8<-- [start:published_caches]
PUBLISHED_CACHES: tuple[CacheShape, ...] = (
    # meta-llama/Meta-Llama-3-8B config.json: num_hidden_layers 32, hidden_size 4096,
    # num_attention_heads 32 (head 128), num_key_value_heads 8 (chapter 7's catalog
    # row). Dubey et al. 2024, table 3.
    kv_cache_shape("Llama 3 8B", n_layers=32, n_heads=32, n_kv_heads=8, d_head=128,
                   source="meta-llama/Meta-Llama-3-8B"),
    # meta-llama/Meta-Llama-3-70B config.json: num_hidden_layers 80, hidden_size 8192,
    # num_attention_heads 64 (head 128), num_key_value_heads 8. Dubey et al. 2024,
    # table 3.
    kv_cache_shape("Llama 3 70B", n_layers=80, n_heads=64, n_kv_heads=8, d_head=128,
                   source="meta-llama/Meta-Llama-3-70B"),
    # mistralai/Mistral-7B-v0.1 config.json: num_hidden_layers 32 (MistralConfig's
    # default, the same model), 32 heads of 128, 8 key/value heads (chapter 7's
    # catalog row), sliding_window 4096 in every layer. Jiang et al. 2023, table 1.
    # (v0.2 and later: sliding_window null.)
    kv_cache_shape("Mistral 7B v0.1", n_layers=32, n_heads=32, n_kv_heads=8,
                   d_head=128, window=4096, source="mistralai/Mistral-7B-v0.1"),
    # google/gemma-3-27b-pt config.json, text_config: num_hidden_layers 62,
    # num_attention_heads 32, num_key_value_heads 16, head_dim 128, sliding_window
    # 1024, sliding_window_pattern 6 (five local layers, then a global one: 52 + 10).
    # Not in transformers' Gemma3TextConfig defaults (those are a 26-layer model);
    # read in two public copies of the config (a Gemma3Config fixture for
    # "google/gemma-3-27b" and a tutorial quoting the file). Gemma Team 2025, sec. 2.
    kv_cache_shape("Gemma 3 27B", n_layers=62, n_heads=32, n_kv_heads=16, d_head=128,
                   window=1024, every=6, source="google/gemma-3-27b-pt"),
    # openai/gpt-oss-120b config.json = transformers' GptOssConfig defaults (5.24, the
    # tests check): num_hidden_layers 36, num_attention_heads 64, num_key_value_heads
    # 8, head_dim 64, sliding_window 128, layer_types sliding / full alternating, the
    # first sliding (18 + 18). OpenAI 2025, model card sec. 2.
    kv_cache_shape("gpt-oss-120b", n_layers=36, n_heads=64, n_kv_heads=8, d_head=64,
                   window=128, every=2, source="openai/gpt-oss-120b"),
    # deepseek-ai/DeepSeek-V3 config.json = transformers' DeepseekV3Config defaults
    # (the tests check): num_hidden_layers 61, kv_lora_rank 512, qk_rope_head_dim 64.
    # The MTP module (num_nextn_predict_layers 1) is not counted: it is not run when
    # decoding without speculation. DeepSeek-AI 2024b, sec. 2.1.1.
    latent_cache_shape("DeepSeek-V3", n_layers=61, kv_lora_rank=512,
                       qk_rope_head_dim=64, source="deepseek-ai/DeepSeek-V3"),
)
# --8<-- [end:published_caches]


def published_cache(name: str) -> CacheShape:
    """The entry of `PUBLISHED_CACHES` of that name."""
    for shape in PUBLISHED_CACHES:
        if shape.name == name:
            return shape
    raise ValueError(f"no published cache named {name!r}; known: "
                     f"{[s.name for s in PUBLISHED_CACHES]}")


def growth_stops(shape: CacheShape) -> int | None:
    """The context from which only the global layers grow (the longest window), None
    for a model without windowed layers. With no global layer (Mistral 7B v0.1), the
    whole cache stops growing there."""
    windows = [w for w in shape.windows if w is not None]
    return max(windows) if windows else None


LEDGER_CONTEXTS = (32 * 1024, 128 * 1024)


def ledger_row(shape: CacheShape, contexts: Sequence[int] = LEDGER_CONTEXTS, *,
               bytes_per_value: int = 2) -> dict[str, object]:
    """One model's line of the ledger: bytes per token per layer, per token over all
    layers (a context within every window), per token once past the windows (only
    global layers), and the whole cache's bytes at each context."""
    per_layer = cache_bytes_per_token_per_layer(shape, bytes_per_value=bytes_per_value)
    return {
        "name": shape.name, "kind": shape.kind, "layers": shape.n_layers,
        "global layers": shape.global_layers, "window": growth_stops(shape),
        "bytes/token/layer": per_layer,
        "bytes/token": per_layer * shape.n_layers,
        "bytes/token past the windows": per_layer * shape.global_layers,
        "bytes": {context: cache_bytes(shape, context, bytes_per_value=bytes_per_value)
                  for context in contexts},
    }


def cache_ledger(shapes: Sequence[CacheShape] = PUBLISHED_CACHES,
                 contexts: Sequence[int] = LEDGER_CONTEXTS, *,
                 bytes_per_value: int = 2) -> list[dict[str, object]]:
    """`ledger_row` of every model."""
    return [ledger_row(s, contexts, bytes_per_value=bytes_per_value) for s in shapes]
