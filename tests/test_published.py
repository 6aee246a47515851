"""Chapter 11's published numbers (a start): every model's (total, active) parameter
count by formula == the parameter count of Hugging Face's model of that configuration,
built on the meta device (shapes only); the active count of each MoE == the meta
model's total minus its unchosen routed experts, read from its own expert shapes."""

from __future__ import annotations

import functools

import pytest
import torch
import transformers

from literate.published import (
    PUBLISHED_CONFIGS,
    attention_equals_matmuls_at,
    cache_shape,
    decoding_flops,
    dense_decoding_flops,
    parameter_counts,
    published_model,
)

CAUSAL_LM = {"GPT2Config": "GPT2LMHeadModel", "LlamaConfig": "LlamaForCausalLM",
             "MistralConfig": "MistralForCausalLM", "MixtralConfig": "MixtralForCausalLM",
             "Qwen3MoeConfig": "Qwen3MoeForCausalLM",
             "Gemma3TextConfig": "Gemma3ForCausalLM",
             "DeepseekV3Config": "DeepseekV3ForCausalLM",
             "GptOssConfig": "GptOssForCausalLM"}


@functools.lru_cache(maxsize=None)
def meta_model(name: str) -> torch.nn.Module:
    config_class, fields = PUBLISHED_CONFIGS[name]
    config = getattr(transformers, config_class)(**fields)
    with torch.device("meta"):
        return getattr(transformers, CAUSAL_LM[config_class])(config)


def unchosen_experts(model: torch.nn.Module) -> int:
    """Parameters of the routed experts one token does not use, over all MoE layers."""
    config, unused = model.config, 0
    for name, experts in model.named_modules():
        if not name.endswith("mlp.experts"):
            continue
        e = getattr(config, "num_local_experts", None) or getattr(
            config, "n_routed_experts", None) or config.num_experts
        per_expert = sum(p[0].numel() for p in experts.parameters())  # [E, ...] each
        unused += (e - config.num_experts_per_tok) * per_expert
    return unused


@pytest.mark.parametrize("name", list(PUBLISHED_CONFIGS))
def test_the_formula_counts_what_hugging_faces_model_holds(name):
    model = meta_model(name)
    total, active = parameter_counts(name)
    assert total == sum(p.numel() for p in model.parameters()), name
    assert active == total - unchosen_experts(model), name
    assert (active < total) == (unchosen_experts(model) > 0)


def kv_width(attention: torch.nn.Module) -> int:
    """How many values one position leaves in a layer's cache, read from Hugging Face's
    attention module: its key and value projections' outputs, GPT-2's fused c_attn's
    last two thirds, or MLA's latent and RoPE key (`kv_a_proj_with_mqa`)."""
    if hasattr(attention, "kv_a_proj_with_mqa"):
        return attention.kv_a_proj_with_mqa.out_features
    if hasattr(attention, "c_attn"):
        return 2 * attention.c_attn.nf // 3
    return attention.k_proj.out_features + attention.v_proj.out_features


def hf_window(attention: torch.nn.Module) -> int | None:
    """The window of a Hugging Face attention layer: Gemma 3's and gpt-oss's layers hold
    theirs (None on a full layer); Mistral's is its config's, for every layer; the
    others have none (Qwen3-MoE's config has a sliding_window it does not use)."""
    if hasattr(attention, "sliding_window"):
        return attention.sliding_window
    if type(attention).__name__ == "MistralAttention":
        return attention.config.sliding_window
    return None


@pytest.mark.parametrize("name", list(PUBLISHED_CONFIGS))
def test_the_cache_width_is_what_hugging_faces_layers_project(name):
    model = meta_model(name)
    layers = model.transformer.h if hasattr(model, "transformer") else model.model.layers
    shape = cache_shape(name)
    assert shape.n_layers == len(layers)
    attention = [getattr(layer, "self_attn", None) or layer.attn for layer in layers]
    assert {kv_width(a) for a in attention} == {shape.width}, name
    assert [hf_window(a) for a in attention] == list(shape.windows), name


def test_an_unknown_model_is_refused_naming_the_known_ones():
    for count in (parameter_counts, cache_shape):
        with pytest.raises(ValueError, match=r"no published configuration named 'GPT-5'"):
            count("GPT-5")


@pytest.mark.parametrize("family", ["llama", "gpt2"])
@pytest.mark.parametrize("keys", [1, 9, 40])
def test_a_decoding_step_costs_the_formulas_flops(family, keys):
    """PyTorch's FlopCounterMode on one step of our models (a token after keys - 1
    cached ones) counts exactly `decoding_flops`'s matmuls (on the CPU it counts no
    FLOPs for the fused attention kernel); the attention part is counted on chapter 3's
    explicit `grouped_attention` for one layer's query over the keys."""
    from torch.utils.flop_counter import FlopCounterMode

    from literate.decoding import cached_run, new_decode_cache
    from literate.heads import grouped_attention
    from literate.llama import llama_model
    from literate.models import gpt2_model

    torch.manual_seed(0)
    if family == "llama":
        model, shape = llama_model(61, 64, 32, 4, 2, 2, 88), dict(
            d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_head=8, d_ff=88,
            vocab=61)
    else:
        model, shape = gpt2_model(61, 64, 32, 4, 2), dict(
            d_model=32, n_layers=2, n_heads=4, n_kv_heads=4, d_head=8, d_ff=128,
            vocab=61, gated=False)
    model.eval()
    ids = torch.randint(0, 61, (1, keys))
    cache = new_decode_cache(model, 1, keys)
    with torch.no_grad():
        if keys > 1:
            cached_run(model, ids[:, :-1], cache)
        with FlopCounterMode(display=False) as counter:
            cached_run(model, ids[:, -1:], cache, last=True)
    expected = decoding_flops(keys=keys, **shape)
    assert counter.get_total_flops() == expected["matmuls"]
    h, h_kv, d_head = shape["n_heads"], shape["n_kv_heads"], shape["d_head"]
    q, k, v = (torch.randn(1, n, t, d_head) for n, t in ((h, 1), (h_kv, keys),
                                                          (h_kv, keys)))
    with FlopCounterMode(display=False) as counter:
        grouped_attention(q, k, v)
    assert counter.get_total_flops() * shape["n_layers"] == expected["attention"]


@pytest.mark.parametrize("name", ["Llama 2 7B", "Llama 3 8B", "Llama 3 70B", "Mistral 7B"])
def test_the_matmuls_are_two_flops_per_weight_a_token_multiplies(name):
    """For the dense published models (built by our loaders on the meta device) the
    step's matmul FLOPs are twice the parameters less the embedding table and the
    norms' gains (lookups and products by a gain: not counted), the "2 N" of the rule of
    thumb; attention reaches them at a context of matmuls / (4 L H d_head) keys, never
    under Mistral 7B v0.1's window of 4,096 in every layer."""
    model = published_model(name)
    total, _ = parameter_counts(name)
    d, layers = model.d_model, len(model.blocks)
    flops = dense_decoding_flops(model, 1)
    assert flops["matmuls"] == 2 * (total - model.vocab_size * d - (2 * layers + 1) * d)
    attn = model.blocks[0].attn
    at = attention_equals_matmuls_at(model)
    if name == "Mistral 7B":
        assert at is None
        capped = dense_decoding_flops(model, 10**6)["attention"]
        assert capped == dense_decoding_flops(model, 4096)["attention"] < flops["matmuls"]
        return
    assert at == flops["matmuls"] // (4 * layers * attn.n_heads * attn.d_head)
    assert dense_decoding_flops(model, at)["attention"] <= flops["matmuls"] \
        < dense_decoding_flops(model, at + 1)["attention"]
    with pytest.raises(ValueError, match="a dense decoder of gated FFNs"):
        dense_decoding_flops(published_model("Mixtral 8x7B"), 1)
