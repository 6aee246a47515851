"""Chapter 10's cache ledger: `literate.numbers.params.cache_bytes` and the published models of
`literate.numbers.cache_ledger`, checked against the caches our models allocate (their
`.nbytes`, after a prefill and a decode below and past the window) and against Hugging
Face: its config classes' defaults, its attention modules on the meta device, and its
StaticCache layers for the published configurations (allocated on the meta device, so
a 128K-token cache of a 70B model costs no memory)."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GptOssConfig,
    GptOssForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
)
from transformers.cache_utils import StaticCache
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention
from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention
from transformers.models.llama.modeling_llama import LlamaAttention
from transformers.models.mistral.modeling_mistral import MistralAttention

from literate.decoding.generate import cached_run, new_decode_cache
from literate.models.deepseek_v3 import deepseek_v3_from_hf_config
from literate.models.gemma3 import gemma3_layer_types, gemma3_model
from literate.models.llama import llama_model
from literate.models.mistral import mistral_model
from literate.numbers.cache_ledger import (
    GIB,
    PUBLISHED_CACHES,
    cache_ledger,
    growth_stops,
    published_cache,
)
from literate.numbers.catalog import PUBLISHED_BLOCKS
from literate.numbers.params import (
    attention_kind,
    cache_bytes,
    cache_bytes_per_token_per_layer,
    interleaved_windows,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    kv_cache_shape,
    latent_cache_shape,
)
from literate.parts.mla import latent_cache_bytes_per_token

from harness import tiny_deepseek_v3_config

K = 1024


# --- the formula --------------------------------------------------------------------
def test_per_token_per_layer_is_two_kv_heads_d_head_bytes_and_mla_r_plus_d_rope():
    llama = published_cache("Llama 3 8B")
    assert cache_bytes_per_token_per_layer(llama) == 2 * 8 * 128 * 2 == 4096
    assert cache_bytes_per_token_per_layer(llama) * 32 == kv_cache_bytes_per_token(
        32, 8, 128, 2
    )
    ds = published_cache("DeepSeek-V3")
    assert cache_bytes_per_token_per_layer(ds) == (512 + 64) * 2
    assert (
        cache_bytes_per_token_per_layer(ds) * 61
        == latent_cache_bytes_per_token(61, 512, 64, 2)
        == 70_272
    )


@pytest.mark.parametrize("shape", PUBLISHED_CACHES, ids=lambda s: s.name)
@pytest.mark.parametrize("context", [100, 1000, 5000, 128 * K])
def test_cache_bytes_is_chapter_10s_kv_cache_bytes(shape, context):
    if shape.kind == "MLA":  # one "head" of width r + d_rope, K and V the same buffer
        expected = kv_cache_bytes(shape.windows, 1, shape.width, 1, context)
    else:
        expected = kv_cache_bytes(shape.windows, 1, shape.width // 2, 2, context)
    assert cache_bytes(shape, context) == expected
    assert cache_bytes(shape, context, batch=3, bytes_per_value=4) == 6 * expected


def test_past_the_windows_only_global_layers_grow():
    for shape in PUBLISHED_CACHES:
        stop = growth_stops(shape) or 1
        per = cache_bytes_per_token_per_layer(shape)
        step = cache_bytes(shape, stop + 1000) - cache_bytes(shape, stop)
        assert step == 1000 * per * shape.global_layers
        below = (
            cache_bytes(shape, stop) - cache_bytes(shape, stop - 1) if stop > 1 else 0
        )
        if stop > 1:  # the last position of the window: every layer still grows
            assert below == per * shape.n_layers


def test_kinds_windows_and_refusals():
    assert [attention_kind(32, k) for k in (32, 8, 1)] == ["MHA", "GQA", "MQA"]
    assert interleaved_windows(4, 7, every=2) == (7, None, 7, None)
    assert interleaved_windows(3, 7) == (7, 7, 7)
    assert interleaved_windows(2, None, every=2) == (None, None)
    assert (
        kv_cache_shape(
            "m", n_layers=2, n_heads=4, n_kv_heads=1, d_head=8, window=3
        ).kind
        == "MQA + sliding"
    )
    with pytest.raises(ValueError, match="n_kv_heads"):
        attention_kind(6, 4)
    with pytest.raises(TypeError, match="n_layers"):
        interleaved_windows(2.0, 4)
    with pytest.raises(ValueError, match="every"):
        interleaved_windows(2, 4, every=-1)
    with pytest.raises(ValueError, match="window"):
        interleaved_windows(2, 0, every=2)
    with pytest.raises(ValueError, match="context"):
        cache_bytes(published_cache("Llama 3 8B"), 0)
    with pytest.raises(ValueError, match="kv_lora_rank"):
        latent_cache_shape("x", n_layers=1, kv_lora_rank=0, qk_rope_head_dim=4)
    with pytest.raises(ValueError, match="no published cache"):
        published_cache("GPT-5")


def test_the_ledger_in_numbers():
    rows = {r["name"]: r for r in cache_ledger()}
    gib = {n: tuple(b / GIB for b in r["bytes"].values()) for n, r in rows.items()}
    assert gib["Llama 3 8B"] == (4.0, 16.0)
    assert gib["Llama 3 70B"] == (10.0, 40.0)
    assert gib["Mistral 7B v0.1"] == (0.5, 0.5)  # 4096 slots x 32 layers x 4 KiB
    assert rows["Gemma 3 27B"]["global layers"] == 10
    assert rows["Gemma 3 27B"]["bytes/token past the windows"] == 10 * 8192
    assert rows["gpt-oss-120b"]["bytes/token"] == 36 * 2048
    assert rows["DeepSeek-V3"]["bytes/token"] == 70_272


def test_heads_agree_with_the_catalog():
    catalog = {b.name: b for b in PUBLISHED_BLOCKS}
    for name in ("Llama 3 8B", "Mistral 7B v0.1"):
        spec = catalog[name]
        assert published_cache(name).width == 2 * spec.n_kv_heads * spec.d_head


# --- against the caches our models allocate ----------------------------------------------
def allocated(model, prompt: int, steps: int, capacity: int) -> int:
    """Prefill `prompt` tokens and decode `steps` more in a fresh cache of `capacity`;
    the bytes it holds after (checked to be those it held before)."""
    model.eval()
    cache = new_decode_cache(model, 1, capacity)
    before = cache.nbytes
    ids = torch.randint(0, 50, (1, prompt))
    with torch.no_grad():
        logits = cached_run(model, ids, cache, last=True)
        for _ in range(steps):
            logits = cached_run(model, logits.argmax(-1)[:, None], cache, last=True)
    assert cache.next_pos == prompt + steps
    assert cache.nbytes == before
    return cache.nbytes


D, H, D_FF = 16, 4, 32


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["MHA", "GQA", "MQA"])
def test_llama_caches_are_the_formula(n_kv_heads):
    torch.manual_seed(0)
    model = llama_model(50, 32, D, H, n_kv_heads, 2, D_FF)
    shape = kv_cache_shape(
        "tiny", n_layers=2, n_heads=H, n_kv_heads=n_kv_heads, d_head=D // H
    )
    assert shape.kind == ["MQA", "GQA", "MHA"][[1, 2, 4].index(n_kv_heads)]
    for context in (5, 12):
        assert allocated(model, context - 2, 2, context) == cache_bytes(
            shape, context, bytes_per_value=4
        )


@pytest.mark.parametrize("context", [3, 6, 13])  # below, at and past the window of 6
def test_mistral_rings_are_the_formula(context):
    torch.manual_seed(0)
    model = mistral_model(50, 32, D, H, 2, 2, D_FF, window=6)
    shape = kv_cache_shape(
        "tiny", n_layers=2, n_heads=H, n_kv_heads=2, d_head=D // H, window=6
    )
    assert allocated(
        model, max(1, context - 3), min(3, context - 1), context
    ) == cache_bytes(shape, context, bytes_per_value=4)


@pytest.mark.parametrize(
    "every", [3, 2], ids=["Gemma 3 (local, local, global)", "gpt-oss (alternating)"]
)
@pytest.mark.parametrize("context", [3, 5, 14])
def test_interleaved_caches_are_the_formula(every, context):
    torch.manual_seed(0)
    kinds = gemma3_layer_types(6, pattern=every)
    model = gemma3_model(
        50,
        32,
        D,
        H,
        2,
        D_FF,
        d_head=8,
        layer_types=kinds,
        window=5,
        query_pre_attn_scalar=8.0,
    )
    shape = kv_cache_shape(
        "tiny", n_layers=6, n_heads=H, n_kv_heads=2, d_head=8, window=5, every=every
    )
    assert [w is None for w in shape.windows] == [k == "full_attention" for k in kinds]
    assert allocated(
        model, max(1, context - 2), min(2, context - 1), context
    ) == cache_bytes(shape, context, bytes_per_value=4)


def tiny_deepseek() -> DeepseekV3Config:
    """harness's tiny DeepSeek-V3 (2 layers, kv_lora_rank 16, qk_rope_head_dim 6) with
    4 routed experts in 2 groups."""
    return tiny_deepseek_v3_config(
        vocab_size=50, n_routed_experts=4, n_group=2, topk_group=1
    )


@pytest.mark.parametrize("context", [4, 11])
def test_latent_caches_are_the_formula(context):
    torch.manual_seed(0)
    model = deepseek_v3_from_hf_config(tiny_deepseek())
    shape = latent_cache_shape("tiny", n_layers=2, kv_lora_rank=16, qk_rope_head_dim=6)
    assert allocated(model, context - 2, 2, context) == cache_bytes(
        shape, context, bytes_per_value=4
    )


# --- against Hugging Face -----------------------------------------------------------------
def hf_configs() -> dict[str, object]:
    """The published configurations, as transformers' config classes hold them."""
    return {
        "Llama 3 8B": LlamaConfig(
            num_hidden_layers=32,
            hidden_size=4096,
            num_attention_heads=32,
            num_key_value_heads=8,
        ),
        "Llama 3 70B": LlamaConfig(
            num_hidden_layers=80,
            hidden_size=8192,
            num_attention_heads=64,
            num_key_value_heads=8,
        ),
        "Mistral 7B v0.1": MistralConfig(),  # the defaults are Mistral 7B v0.1
        "Gemma 3 27B": Gemma3TextConfig(
            num_hidden_layers=62,
            hidden_size=5376,
            num_attention_heads=32,
            num_key_value_heads=16,
            head_dim=128,
            sliding_window=1024,
        ),
        "gpt-oss-120b": GptOssConfig(),  # the defaults are gpt-oss-120b
        "DeepSeek-V3": DeepseekV3Config(),  # the defaults are DeepSeek-V3
    }


def test_config_defaults_are_the_published_models():
    mistral, oss, ds = MistralConfig(), GptOssConfig(), DeepseekV3Config()
    assert (
        mistral.num_hidden_layers,
        mistral.num_key_value_heads,
        mistral.head_dim,
        mistral.sliding_window,
    ) == (32, 8, 128, 4096)
    assert (
        oss.num_hidden_layers,
        oss.num_attention_heads,
        oss.num_key_value_heads,
        oss.head_dim,
        oss.sliding_window,
    ) == (36, 64, 8, 64, 128)
    assert (ds.num_hidden_layers, ds.kv_lora_rank, ds.qk_rope_head_dim) == (61, 512, 64)
    # HF's layer types give our windows: Gemma 3's 5:1 and gpt-oss's alternation
    for name, config in hf_configs().items():
        ours = published_cache(name)
        assert ours.n_layers == config.num_hidden_layers, name
        kinds = (
            getattr(config, "layer_types", None) or ["full_attention"] * ours.n_layers
        )
        if name == "Mistral 7B v0.1":
            kinds = ["sliding_attention"] * 32  # sliding_window set, layer_types absent
        assert [w is None for w in ours.windows] == [
            k == "full_attention" for k in kinds
        ], name
        window = getattr(config, "sliding_window", None)
        assert {w for w in ours.windows if w is not None} <= {window}, name


def meta_attention(name: str, config) -> torch.nn.Module:
    cls = {
        "Llama 3 8B": LlamaAttention,
        "Llama 3 70B": LlamaAttention,
        "Mistral 7B v0.1": MistralAttention,
        "Gemma 3 27B": Gemma3Attention,
        "gpt-oss-120b": GptOssAttention,
        "DeepSeek-V3": DeepseekV3Attention,
    }[name]
    with torch.device("meta"):
        return cls(config, layer_idx=0)


@pytest.mark.parametrize("name", [s.name for s in PUBLISHED_CACHES])
def test_hf_attention_projects_what_the_ledger_counts(name):
    """The width of what one position stores per layer, read off HF's own layer on
    the meta device: k_proj + v_proj outputs, or DeepSeek's kv_a_proj_with_mqa
    (the latent and the shared RoPE key, which MLA caches)."""
    config = hf_configs()[name]
    layer = meta_attention(name, config)
    if name == "DeepSeek-V3":
        width = layer.kv_a_proj_with_mqa.out_features
    else:
        width = layer.k_proj.out_features + layer.v_proj.out_features
    assert width == published_cache(name).width


def hf_static_cache_bytes(config, context: int) -> int:
    """Bytes of HF's StaticCache for `context` tokens of this configuration, in
    bfloat16 at batch 1, allocated on the meta device (shapes, no storage). HF decides
    each layer's slots (min(window, context) for a sliding layer); what one slot holds
    is what `test_hf_models_allocate_the_ledger_at_small_scale` sees HF's models store:
    a key and a value per key/value head, or DeepSeek's latent and RoPE key as one
    head (transformers 5.24 caches MLA's latent, not the up-projected heads)."""
    cache = StaticCache(config=config, max_cache_len=context)
    if isinstance(config, DeepseekV3Config):
        heads, k_dim, v_dim = 1, config.kv_lora_rank, config.qk_rope_head_dim
    else:
        heads, k_dim, v_dim = (
            config.num_key_value_heads,
            config.head_dim,
            config.head_dim,
        )
    for layer in cache.layers:
        layer.lazy_initialization(
            torch.empty(1, heads, 1, k_dim, dtype=torch.bfloat16, device="meta"),
            torch.empty(1, heads, 1, v_dim, dtype=torch.bfloat16, device="meta"),
        )
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)


@pytest.mark.parametrize("name", [s.name for s in PUBLISHED_CACHES])
@pytest.mark.parametrize("context", [1000, 32 * K, 128 * K])
def test_hf_static_cache_allocates_the_ledger(name, context):
    """HF's StaticCache gives a sliding layer min(window, context) slots, a full one
    `context`: the same count as ours, for the published configurations."""
    theirs = hf_static_cache_bytes(hf_configs()[name], context)
    assert theirs == cache_bytes(published_cache(name), context)


def tiny_hf(family: str):
    """A tiny HF model of each family and our CacheShape of it."""
    common = {
        "vocab_size": 50,
        "hidden_size": 16,
        "intermediate_size": 8,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 4,
        "max_position_embeddings": 32,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }
    if family == "llama":
        config = LlamaConfig(num_hidden_layers=2, **common)
        shape = kv_cache_shape(family, n_layers=2, n_heads=4, n_kv_heads=2, d_head=4)
        return LlamaForCausalLM(config), shape
    if family == "mistral":
        config = MistralConfig(num_hidden_layers=2, sliding_window=5, **common)
        shape = kv_cache_shape(
            family, n_layers=2, n_heads=4, n_kv_heads=2, d_head=4, window=5
        )
        return MistralForCausalLM(config), shape
    if family == "gemma3":
        config = Gemma3TextConfig(
            num_hidden_layers=6, sliding_window=5, query_pre_attn_scalar=4, **common
        )
        shape = kv_cache_shape(
            family, n_layers=6, n_heads=4, n_kv_heads=2, d_head=4, window=5, every=6
        )
        return Gemma3ForCausalLM(config), shape
    if family == "gpt_oss":
        config = GptOssConfig(
            num_hidden_layers=4,
            sliding_window=5,
            num_local_experts=2,
            num_experts_per_tok=1,
            **common,
        )
        shape = kv_cache_shape(
            family, n_layers=4, n_heads=4, n_kv_heads=2, d_head=4, window=5, every=2
        )
        return GptOssForCausalLM(config), shape
    config = tiny_deepseek()
    shape = latent_cache_shape(family, n_layers=2, kv_lora_rank=16, qk_rope_head_dim=6)
    return DeepseekV3ForCausalLM(config), shape


@pytest.mark.parametrize(
    "family", ["llama", "mistral", "gemma3", "gpt_oss", "deepseek_v3"]
)
@pytest.mark.parametrize("context", [4, 9])  # below and past the window of 5
def test_hf_models_allocate_the_ledger_at_small_scale(family, context):
    """HF's own models, prefilling `context` tokens into a StaticCache of `context`
    slots: the bytes their layers allocate are `cache_bytes` (float32)."""
    torch.manual_seed(0)
    model, shape = tiny_hf(family)
    cache = StaticCache(config=model.config, max_cache_len=context)
    with torch.no_grad():
        model.eval()(torch.arange(context)[None] % 50, cache=cache, use_cache=True)
    theirs = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert theirs == cache_bytes(shape, context, bytes_per_value=4)


# --- the figure ---------------------------------------------------------------------
def test_the_figure_plots_the_ledger():
    """Each model's line is `cache_bytes` in GiB at the figure's contexts; a hollow
    marker sits at each windowed model's `growth_stops`, on its line."""
    import matplotlib.pyplot as plt

    from literate.figures import FIGURES
    from literate.figures.long_context import CONTEXTS

    assert "kv-cache-memory" in FIGURES
    fig = FIGURES["kv-cache-memory"].draw(language="ru", theme="dark")
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    for shape in PUBLISHED_CACHES:
        line = next(v for k, v in lines.items() if k.startswith(shape.name + " ("))
        assert list(line.get_xdata()) == list(CONTEXTS)
        assert list(line.get_ydata()) == [cache_bytes(shape, n) / GIB for n in CONTEXTS]
    stops = {
        (m.get_xdata()[0], m.get_ydata()[0])
        for m in fig.axes[0].get_lines()
        if m.get_markerfacecolor() == "none" and len(m.get_xdata()) == 1
    }
    assert stops == {
        (growth_stops(s), cache_bytes(s, growth_stops(s)) / GIB)
        for s in PUBLISHED_CACHES
        if growth_stops(s) is not None
    }
    plt.close(fig)
