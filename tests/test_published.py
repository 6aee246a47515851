"""Chapter 11's published numbers: every model's (total, active) parameter count by
formula == the parameter count of Hugging Face's model of that configuration, built on
the meta device (shapes only); the active count of each MoE == the meta model's total
minus its unchosen routed experts, read from its own expert shapes. Their FLOPs: a
decoding step's by formula == FlopCounterMode's count on a cached step of a small model
of each family, and == 2 per active parameter a matmul multiplies for every published
model; 6 N from the active count less the embedding."""

from __future__ import annotations

import functools

import pytest
import torch
import transformers

from literate.numbers.flops import (
    attention_equals_matmuls_at,
    decoder_shape,
    decoding_flops,
    dense_decoding_flops,
    non_embedding_active,
    published_flops,
    qwen3_moe_shape,
    routed_top_k,
    step_flops,
    training_flops_per_token,
)
from literate.numbers.published import (
    PUBLISHED_CONFIGS,
    built_published_model,
    cache_shape,
    parameter_counts,
    published_config,
    published_model,
)
from literate.parts.window import layer_window

CAUSAL_LM = {
    "GPT2Config": "GPT2LMHeadModel",
    "LlamaConfig": "LlamaForCausalLM",
    "MistralConfig": "MistralForCausalLM",
    "MixtralConfig": "MixtralForCausalLM",
    "Qwen3Config": "Qwen3ForCausalLM",
    "Qwen3MoeConfig": "Qwen3MoeForCausalLM",
    "Gemma3TextConfig": "Gemma3ForCausalLM",
    "DeepseekV3Config": "DeepseekV3ForCausalLM",
    "GptOssConfig": "GptOssForCausalLM",
    "GPTJConfig": "GPTJForCausalLM",
    "GPTNeoXConfig": "GPTNeoXForCausalLM",
    "CohereConfig": "CohereForCausalLM",
}


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
        e = (
            getattr(config, "num_local_experts", None)
            or getattr(config, "n_routed_experts", None)
            or config.num_experts
        )
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
    and GPT-NeoX's query_key_value's two thirds, or MLA's latent and RoPE key
    (`kv_a_proj_with_mqa`)."""
    if hasattr(attention, "query_key_value"):
        return 2 * attention.query_key_value.out_features // 3
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
    body = next(
        getattr(model, n)
        for n in ("transformer", "gpt_neox", "model")
        if hasattr(model, n)
    )
    layers = body.h if hasattr(body, "h") else body.layers
    shape = cache_shape(name)
    assert shape.n_layers == len(layers)
    attention = [
        getattr(layer, "self_attn", None)
        or getattr(layer, "attention", None)
        or layer.attn
        for layer in layers
    ]
    assert {kv_width(a) for a in attention} == {shape.width}, name
    assert [hf_window(a) for a in attention] == list(shape.windows), name


def test_an_unknown_model_is_refused_naming_the_known_ones():
    for count in (
        parameter_counts,
        cache_shape,
        published_model,
        training_flops_per_token,
        functools.partial(published_flops, keys=1),
    ):
        with pytest.raises(
            ValueError, match=r"no published configuration named 'GPT-5'"
        ):
            count("GPT-5")


@pytest.mark.parametrize("family", ["llama", "gpt2"])
@pytest.mark.parametrize("keys", [1, 9, 40])
def test_a_decoding_step_costs_the_formulas_flops(family, keys):
    """PyTorch's FlopCounterMode on one step of our models (a token after keys - 1
    cached ones) counts exactly `decoding_flops`'s matmuls (on the CPU it counts no
    FLOPs for the fused attention kernel); the attention part is counted on chapter 3's
    explicit `grouped_attention` for one layer's query over the keys."""
    from torch.utils.flop_counter import FlopCounterMode

    from literate.decoding.generate import cached_run, new_decode_cache
    from literate.models.gpt2 import gpt2_model
    from literate.models.llama import llama_model
    from literate.parts.multi_head import grouped_attention

    torch.manual_seed(0)
    if family == "llama":
        model, shape = (
            llama_model(61, 64, 32, 4, 2, 2, 88),
            dict(
                d_model=32,
                n_layers=2,
                n_heads=4,
                n_kv_heads=2,
                d_head=8,
                d_ff=88,
                vocab=61,
            ),
        )
    else:
        model, shape = (
            gpt2_model(61, 64, 32, 4, 2),
            dict(
                d_model=32,
                n_layers=2,
                n_heads=4,
                n_kv_heads=4,
                d_head=8,
                d_ff=128,
                vocab=61,
                gated=False,
            ),
        )
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
    q, k, v = (
        torch.randn(1, n, t, d_head) for n, t in ((h, 1), (h_kv, keys), (h_kv, keys))
    )
    with FlopCounterMode(display=False) as counter:
        grouped_attention(q, k, v)
    assert counter.get_total_flops() * shape["n_layers"] == expected["attention"]


@pytest.mark.parametrize(
    "name", ["Llama 2 7B", "Llama 3 8B", "Llama 3 70B", "Mistral 7B v0.1"]
)
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
    if name == "Mistral 7B v0.1":
        assert at is None
        capped = dense_decoding_flops(model, 10**6)["attention"]
        assert (
            capped == dense_decoding_flops(model, 4096)["attention"] < flops["matmuls"]
        )
        return
    assert at == flops["matmuls"] // (4 * layers * attn.n_heads * attn.d_head)
    assert (
        dense_decoding_flops(model, at)["attention"]
        <= flops["matmuls"]
        < dense_decoding_flops(model, at + 1)["attention"]
    )
    with pytest.raises(ValueError, match="a dense decoder of gated FFNs"):
        dense_decoding_flops(published_model("Mixtral 8x7B"), 1)


# --- chapter 11's FLOPs of every published model: MoE, windows and latent attention ---


def grouped_mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """FlopCounterMode's formula for `F.grouped_mm` (torch 2.13's counter has none):
    rows [M, K], one [K, N] matrix per group, each row multiplied by its group's
    matrix once: 2 M K N (the experts' grouped path)."""
    if len(a_shape) != 2 or len(b_shape) != 3 or a_shape[1] != b_shape[1]:
        raise ValueError(
            f"rows [M, K] and weights [E, K, N] expected, got {a_shape}, {b_shape}"
        )
    return 2 * a_shape[0] * a_shape[1] * b_shape[2]


def explicit_attention(
    q, k, v, allowed=None, *, is_causal=False, scale=None, rows_can_be_empty=True
):
    """`fused_attention`'s output from chapter 3's `grouped_attention` (its matmuls
    are counted; the CPU kernel's are not), `is_causal` as the square causal mask."""
    from literate.parts.attention import causal_allowed
    from literate.parts.multi_head import grouped_attention

    if is_causal:
        allowed = causal_allowed(q.shape[2], k.shape[2], device=q.device)
    return grouped_attention(q, k, v, allowed, empty_row="zero", scale=scale).output


def counted_step(model, keys: int, monkeypatch) -> tuple[int, int]:
    """(matmul FLOPs, attention FLOPs) that FlopCounterMode counts in one cached
    decoding step of `model`: keys - 1 tokens prefilled into a cache, then one token
    reading keys keys. Every attention call of the step is explicit, so the counter
    sees its matmuls: `fused_attention` (chapter 3's layers and MLA's) is replaced by
    `explicit_attention`, gpt-oss's `sink_attention` is explicit already. Their FLOPs
    are told apart from the rest by the counter's running total around each call."""
    from torch.utils.flop_counter import FlopCounterMode

    import literate.parts.mla
    import literate.parts.multi_head
    import literate.parts.sinks
    from literate.decoding.generate import cached_run, new_decode_cache

    model.eval()
    torch.manual_seed(1)
    ids = torch.randint(0, model.vocab_size, (1, keys))
    cache = new_decode_cache(model, 1, keys)
    counter = FlopCounterMode(
        display=False, custom_mapping={torch.ops.aten._grouped_mm: grouped_mm_flop}
    )
    attention = 0

    def measured(function):
        def call(*args, **kwargs):
            nonlocal attention
            before = counter.get_total_flops()
            out = function(*args, **kwargs)
            attention += counter.get_total_flops() - before
            return out

        return call

    with torch.no_grad():
        if keys > 1:
            cached_run(model, ids[:, :-1], cache)
        monkeypatch.setattr(
            literate.parts.multi_head, "fused_attention", measured(explicit_attention)
        )
        monkeypatch.setattr(
            literate.parts.mla, "fused_attention", measured(explicit_attention)
        )
        monkeypatch.setattr(
            literate.parts.sinks,
            "sink_attention",
            measured(literate.parts.sinks.sink_attention),
        )
        with counter:
            cached_run(model, ids[:, -1:], cache, last=True)
    return counter.get_total_flops() - attention, attention


def tiny_model(family: str) -> torch.nn.Module:
    """A small model of each family, built by the site's own builders (from a small
    Hugging Face config where the family has a loader); windows of 4, shorter than
    the keys of the test. Float32: the experts take their grouped path."""
    from literate.models.deepseek_v3 import deepseek_v3_from_hf_config
    from literate.models.gemma3 import gemma3_from_hf_config
    from literate.models.gpt2 import gpt2_model
    from literate.models.gpt_oss import gpt_oss_from_hf_config
    from literate.models.llama import llama_model
    from literate.models.mistral import mistral_model
    from literate.models.mixtral import mixtral_from_hf_config

    torch.manual_seed(0)
    small = {
        "vocab_size": 61,
        "hidden_size": 32,
        "num_attention_heads": 4,
        "max_position_embeddings": 64,
    }
    if family == "gpt2":
        return gpt2_model(61, 64, 32, 4, 2)
    if family == "llama":
        return llama_model(61, 64, 32, 4, 2, 2, 88)
    if family == "mistral":
        return mistral_model(61, 64, 32, 4, 2, 2, 88, window=4)
    if family == "mixtral":
        return mixtral_from_hf_config(
            transformers.MixtralConfig(
                **small,
                intermediate_size=24,
                num_hidden_layers=2,
                num_key_value_heads=2,
                num_local_experts=4,
                num_experts_per_tok=2,
            )
        )
    if family == "gemma3":
        return gemma3_from_hf_config(
            transformers.Gemma3TextConfig(
                **small,
                intermediate_size=48,
                num_hidden_layers=3,
                num_key_value_heads=2,
                head_dim=8,
                query_pre_attn_scalar=8,
                sliding_window=4,
                layer_types=[
                    "sliding_attention",
                    "sliding_attention",
                    "full_attention",
                ],
            )
        )
    if family == "gpt-oss":
        return gpt_oss_from_hf_config(
            transformers.GptOssConfig(
                **small,
                intermediate_size=16,
                num_hidden_layers=2,
                num_key_value_heads=2,
                head_dim=8,
                num_local_experts=4,
                num_experts_per_tok=2,
                sliding_window=4,
            )
        )
    deepseek = dict(
        small,
        intermediate_size=48,
        moe_intermediate_size=16,
        num_hidden_layers=3,
        first_k_dense_replace=1,
        num_key_value_heads=4,
        n_routed_experts=8,
        n_group=2,
        topk_group=1,
        num_experts_per_tok=2,
        n_shared_experts=1,
        q_lora_rank=16,
        kv_lora_rank=12,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=8,
    )
    if family == "deepseek-v3":
        return deepseek_v3_from_hf_config(transformers.DeepseekV3Config(**deepseek))
    if family == "deepseek-v3 naive":  # no query bottleneck, latents re-projected
        model = deepseek_v3_from_hf_config(
            transformers.DeepseekV3Config(**deepseek | {"q_lora_rank": None})
        )
        for block in model.blocks:
            block.attn.absorb = "never"
        return model
    raise ValueError(family)


FAMILIES = [
    "gpt2",
    "llama",
    "mistral",
    "mixtral",
    "gemma3",
    "gpt-oss",
    "deepseek-v3",
    "deepseek-v3 naive",
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("keys", [1, 9, 40])
def test_step_flops_is_what_flop_counter_mode_counts(family, keys, monkeypatch):
    """FlopCounterMode on one cached decoding step of a small model of each family
    counts exactly `step_flops`'s matmuls and attention: windows (4 < 9 keys) read
    min(window, keys) keys, the MoE layers multiply the router and the k chosen
    experts (and DeepSeek-V3's shared expert after its dense first layer), MLA's
    cached step is the absorbed form (its first, uncached token and `absorb="never"`
    re-project the latents). Every family's experts (`Experts`, gpt-oss's
    `GptOssExperts`) take the grouped path in float32, each chosen pair once, so the
    count has no padding to add."""
    from literate.parts.moe import Experts, GptOssExperts, MoEFFN

    model = tiny_model(family)
    matmuls, attention = counted_step(model, keys, monkeypatch)
    flops = step_flops(model, keys)
    for block in model.blocks:
        if isinstance(block.ffn, MoEFFN):  # the grouped path runs
            assert isinstance(block.ffn.experts, (Experts, GptOssExperts))
            assert block.ffn.experts.takes_grouped(torch.float32)
    assert matmuls == flops["matmuls"]
    assert attention == flops["attention"]
    assert flops["total"] == flops["matmuls"] + flops["attention"]
    windows = [layer_window(b.attn) for b in model.blocks]
    unwindowed = decoding_flops(**decoder_shape(model) | {"windows": None}, keys=keys)
    assert (attention < unwindowed["attention"]) == (keys > 4 and any(windows))


def not_multiplied(model: torch.nn.Module) -> dict[str, int]:
    """The parameters one token uses that no matmul multiplies it by, read from the
    model: the embedding table and GPT-2's position table (lookups), every norm's
    gains (and LayerNorm's biases), the biases of the linear maps and routers, the
    biases of the k experts it is routed to (gpt-oss's), and gpt-oss's sinks."""
    from literate.parts.moe import GptOssExperts, MoEFFN
    from literate.parts.routers import Router
    from literate.parts.sinks import SinkAttention

    parts = dict.fromkeys(
        ["embedding", "positions", "norms", "biases", "expert biases", "sinks"], 0
    )
    parts["embedding"] = model.token_embedding.weight.numel()
    if hasattr(model, "positions"):
        parts["positions"] = sum(p.numel() for p in model.positions.parameters())
    for module in model.modules():
        own = list(module.parameters(recurse=False))
        if type(module).__name__.endswith("Norm"):
            parts["norms"] += sum(p.numel() for p in own)
        elif isinstance(module, (torch.nn.Linear, Router)) and module.bias is not None:
            parts["biases"] += module.bias.numel()
        if isinstance(module, SinkAttention):
            parts["sinks"] += module.sinks.numel()
    for block in model.blocks:
        if isinstance(block.ffn, MoEFFN) and isinstance(
            block.ffn.experts, GptOssExperts
        ):
            e = block.ffn.experts  # [E, ...] each; the token's k experts
            parts["expert biases"] += routed_top_k(block.ffn) * (
                e.gate_up_proj_bias[0].numel() + e.down_proj_bias[0].numel()
            )
    return parts


LOADED = [name for name in PUBLISHED_CONFIGS if name != "Qwen3-30B-A3B"]


@pytest.mark.parametrize("name", LOADED)
def test_a_step_multiplies_each_active_weight_once(name):
    """For every published model with a loader, the step's matmul FLOPs at one key
    are 2 per active parameter (`parameter_counts`: the k chosen experts, the
    routers, the shared expert, MLA's matrices) less those no matmul multiplies the
    token by; a tied head is the embedding table, multiplied once as the head."""
    model = built_published_model(name)
    _, active = parameter_counts(name)
    p = not_multiplied(model)
    tied = model.lm_head.weight is model.token_embedding.weight
    head = model.lm_head.weight.numel() if tied else 0  # in active once, as the table
    assert step_flops(model, 1)["matmuls"] == 2 * (
        active
        - p["embedding"]
        - p["positions"]
        - p["norms"]
        - p["biases"]
        - p["expert biases"]
        - p["sinks"]
        + head
    )
    assert published_flops(name, 1) == step_flops(model, 1)
    assert (p["sinks"] > 0) == (name == "gpt-oss-120b")
    assert (p["positions"] > 0) == name.startswith("GPT-2")


def test_qwen3_30b_a3b_is_counted_from_its_configuration():
    """Qwen3-30B-A3B (no loader): the same formula from its config's shape, whose
    matmuls are 2 per active parameter less the embedding and the norms (two per
    layer, QK-norm's two of d_head, the final one)."""
    config = published_config("Qwen3-30B-A3B")
    _, active = parameter_counts("Qwen3-30B-A3B")
    d, layers, v = config.hidden_size, config.num_hidden_layers, config.vocab_size
    norms = layers * (2 * d + 2 * config.head_dim) + d
    flops = published_flops("Qwen3-30B-A3B", 1)
    assert flops["matmuls"] == 2 * (active - v * d - norms)
    assert published_flops("Qwen3-30B-A3B", 4096)["attention"] == (
        4 * 32 * 128 * 48 * 4096
    )  # 32 heads of 128, 48 layers, no window
    with pytest.raises(ValueError, match="dense layers"):
        qwen3_moe_shape(transformers.Qwen3MoeConfig(mlp_only_layers=[0]))


def test_published_windows_and_latents_cap_and_cost_what_they_should():
    """At 131,072 keys: Gemma 3 27B's 52 local layers read 1,024 keys and its 10
    global ones all of them; gpt-oss-120b's 18 sliding layers 128; Mistral 7B no more
    than at 4,096. DeepSeek-V3's cached step attends its 128 heads over the
    576-wide latents (scores) and their 512-wide part (the sum)."""
    keys = 131_072
    gemma = published_flops("Gemma 3 27B", keys)["attention"]
    assert gemma == 4 * 32 * 128 * (52 * 1024 + 10 * keys)
    oss = published_flops("gpt-oss-120b", keys)["attention"]
    assert oss == 4 * 64 * 64 * (18 * 128 + 18 * keys)
    assert published_flops("Mistral 7B v0.1", keys) == published_flops(
        "Mistral 7B v0.1", 4096
    )
    deepseek = published_flops("DeepSeek-V3", keys)
    assert deepseek["attention"] == 61 * 2 * 128 * (576 + 512) * keys
    assert deepseek["matmuls"] == published_flops("DeepSeek-V3", 2)["matmuls"]


@pytest.mark.parametrize("name", list(PUBLISHED_CONFIGS))
def test_six_n_is_six_times_the_active_parameters_less_the_embedding(name):
    """Kaplan et al.'s N: the active count less the token table (and GPT-2's
    positions); 6 N to train a token. The step's forward at one key differs from 2 N
    by the head of a tied model (in the step, not in N) and the norms, biases and
    sinks (in N, not in the step); attention then grows with the keys."""
    config = published_config(name)
    _, active = parameter_counts(name)
    embedding = config.vocab_size * config.hidden_size
    if name.startswith("GPT-2"):
        embedding += config.n_positions * config.n_embd
    n = non_embedding_active(name)
    assert n == active - embedding
    assert training_flops_per_token(name) == 6 * n
    if name != "Qwen3-30B-A3B":
        model = built_published_model(name)
        p = not_multiplied(model)
        tied = model.lm_head.weight is model.token_embedding.weight
        head = model.lm_head.weight.numel() if tied else 0
        assert published_flops(name, 1)["matmuls"] - 2 * n == 2 * (
            head - p["norms"] - p["biases"] - p["expert biases"] - p["sinks"]
        )
    total = {keys: published_flops(name, keys)["total"] for keys in (1, 8192, 131_072)}
    if name == "Mistral 7B v0.1":  # every layer's window is 4,096 keys
        assert total[1] < total[8192] == total[131_072]
    else:
        assert total[1] < total[8192] < total[131_072]


def test_attention_reaches_the_matmuls_where_the_windows_allow():
    """Where attention's FLOPs pass the matmuls': a search over the keys, equal to the
    closed form of a model without windows; Gemma 3 27B's local layers push it far
    out; Mistral 7B's never get there."""
    for name in ("Gemma 3 27B", "DeepSeek-V3", "gpt-oss-120b", "Mixtral 8x7B"):
        model = built_published_model(name)
        at = attention_equals_matmuls_at(model)
        before, after = step_flops(model, at), step_flops(model, at + 1)
        assert before["attention"] <= before["matmuls"]
        assert after["attention"] > after["matmuls"]
    assert attention_equals_matmuls_at(built_published_model("Mistral 7B v0.1")) is None
    naive = tiny_model("deepseek-v3 naive")  # its matmuls grow faster with the keys
    assert attention_equals_matmuls_at(naive) is None
    assert attention_equals_matmuls_at(tiny_model("deepseek-v3")) is not None


def test_step_flops_refuses_what_its_formula_does_not_describe():
    """A model whose layers' attention differs, or whose dense layer follows an MoE
    one, is refused rather than miscounted; so is a model that is not ours."""
    from literate.parts.ffn import GatedFFN

    model = tiny_model("llama")
    model.blocks[1].attn.n_heads = 8
    with pytest.raises(ValueError, match=r"blocks\[1\]\.attn has"):
        step_flops(model, 1)
    deepseek = tiny_model("deepseek-v3")
    deepseek.blocks[2].ffn = GatedFFN(32, 48, torch.nn.functional.silu)
    with pytest.raises(ValueError, match="dense layers first"):
        step_flops(deepseek, 1)
    with pytest.raises(TypeError, match="one of our language models"):
        step_flops(torch.nn.Linear(2, 2), 1)
    with pytest.raises(ValueError, match="windows must give one window"):
        decoding_flops(
            d_model=8, n_layers=2, n_heads=2, d_ff=8, vocab=5, keys=1, windows=[None]
        )


def test_a_count_rounds_to_a_figure_within_half_its_last_digit():
    from literate.numbers.published import PUBLISHED_FIGURES, rounds_to

    assert rounds_to(116_849_999_999, "116.8B") and not rounds_to(
        116_850_000_001, "116.8B"
    )
    assert rounds_to(124_499_999, "124M") and not rounds_to(124_500_001, "124M")
    assert rounds_to(46_702_792_704, "47B") and not rounds_to(46_499_999_999, "47B")
    with pytest.raises(ValueError, match="figure must be a number and M or B"):
        rounds_to(1, "7 billion")
    assert set(PUBLISHED_FIGURES) == set(PUBLISHED_CONFIGS)


@pytest.mark.parametrize("name", ["Qwen3-30B-A3B", "Llama 3 8B"])
def test_attention_passes_the_matmuls_one_key_after_the_context_it_gives(name):
    """`attention_equals_matmuls_at` of a shape (Qwen3-30B-A3B's, from its config) or
    of a model: the most keys whose attention is within the matmuls."""
    from literate.numbers.flops import published_shape

    shape = published_shape(name)
    at = attention_equals_matmuls_at(shape)
    for keys, beyond in ((at, False), (at + 1, True)):
        step = decoding_flops(**shape, keys=keys)
        assert (step["attention"] > step["matmuls"]) == beyond
    if name == "Llama 3 8B":
        assert at == attention_equals_matmuls_at(published_model(name)) == 28_628
