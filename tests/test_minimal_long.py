"""The minimal blocks of chapters 9 and 10 (literate/minimal/moe.py, window.py,
sinks.py, mla.py) against Hugging Face (transformers 5.24) and against the hardened
versions in literate/parts, weights copied, float64 (modules built, then `.double()`).

Each comparison: the output, and the gradients of the input and of every parameter of
sum(output * probe), a fixed random probe.

- `MixtralMoE` == HF `MixtralSparseMoeBlock` (its experts fused, `gate_up_proj` and
  `down_proj`, loaded by name) == the hardened `MoEFFN` (Mixtral's router and experts);
  `load_balancing_loss` == the hardened one and == HF's `load_balancing_loss_func`.
- `sliding_window_mask` == the mask HF builds for Mistral (`sliding_window=W`: W keys,
  the query's own included) == the hardened `window_allowed`; `SlidingWindowAttention`
  == HF `MistralAttention` given that mask, sdpa and eager, == the hardened
  `SlidingWindowAttention`; decoding through the ring of W slots == the full forward.
- `SinkAttention` == HF `GptOssAttention` (a sliding layer and a full one; plain RoPE
  and gpt-oss's YaRN) == the hardened `SinkAttention` / `SlidingWindowSinkAttention`.
- `AbsorbedLatentAttention` == `MultiHeadLatentAttention` (the same weights) == HF
  `DeepseekV3Attention` (`rope_interleave=False`; and `True`, DeepSeek's checkpoints'
  layout, once the RoPE rows are reordered) == the hardened `MultiHeadLatentAttention`.

Tolerances. TOL = 1e-12 where both sides compute in float64: the same formula, products
summed in another order at most, differs by ~1e-15 relative, and the largest entries
compared here are O(10). The routers of Mixtral (ours, HF's, the hardened) all take
their softmax in float32, op for op alike, so the same float32 gates enter every side
and the comparison stays at TOL. Where HF computes in float32 whatever the input (its
eager softmax for Mistral, its RMSNorms for DeepSeek-V3, its balancing loss's sums), HF
is compared twice: as it is, within harness.F32_BOUND (16 float32 ulps of the largest
entry, `assert_float32_limited`, which also checks the float32 steps are really there);
and, where tests/harness.py's `hf_in_input_dtype` patch applies (RMSNorms), with HF
computing in float64, at TOL. RoPE tables are float32 numbers on every side (as HF's),
cast to float64 exactly.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from transformers import DeepseekV3Config, MistralConfig, MixtralConfig
from transformers.masking_utils import (
    create_causal_mask,
    create_sliding_window_causal_mask,
)
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_deepseek
from transformers.models.gpt_oss import modeling_gpt_oss as hf_gpt_oss
from transformers.models.mistral import modeling_mistral as hf_mistral
from transformers.models.mixtral import modeling_mixtral as hf_mixtral

from literate.minimal.mla import AbsorbedLatentAttention, MultiHeadLatentAttention
from literate.minimal.moe import MixtralMoE, load_balancing_loss
from literate.minimal.sinks import SinkAttention, attention_with_sinks
from literate.minimal.window import (
    RingKVCache,
    SlidingWindowAttention,
    sliding_window_mask,
)
from literate.parts import mla as parts_mla
from literate.parts import moe as parts_moe
from literate.parts import sinks as parts_sinks
from literate.parts import window as parts_window
from literate.parts.positions import rope_cache
from literate.parts.routers import Router, mixtral_router

import harness
from harness import (
    GPT_OSS_YARN,
    assert_equal_to_hf,
    assert_float32_limited,
    compare_grads,
    gpt_oss_attention_config,
    hf_in_input_dtype,
    input_and_probe,
    latent_dims,
    output_and_grads,
    randomise_,
    tiny_deepseek_v3_config,
)

F64 = torch.float64
TOL = 1e-12
B, T = 2, 11


# --- the harness ----------------------------------------------------------------------
assert_float64_equal = partial(harness.assert_float64_equal, tol=TOL)


def inputs(d: int, seed: int = 1, t: int = T):
    return input_and_probe(B, t, d, seed=seed)


def tables(d_head: int, base: float, t: int = T):
    """RoPE's cos and sin [T, d_head]: float32 numbers, as HF's, in float64."""
    cos, sin = rope_cache(t, d_head, base=base)
    return cos.double(), sin.double()


# --- chapter 9: the mixture of experts ------------------------------------------------
D, D_FF, E, K = 32, 24, 4, 2
compare = partial(compare_grads, shape=(B, T, D))  # output and every gradient


def mixtral_config() -> MixtralConfig:
    return MixtralConfig(
        hidden_size=D,
        intermediate_size=D_FF,
        num_local_experts=E,
        num_experts_per_tok=K,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=1,
        vocab_size=16,
        router_jitter_noise=0.0,
        experts_implementation="eager",
    )  # grouped_mm has no float64


@pytest.fixture(scope="module")
def moe():
    """Ours, random (a router far from uniform: N(0, 0.5^2) weights), in float64."""
    ours = randomise_(MixtralMoE(d_model=D, d_ff=D_FF, n_experts=E, top_k=K), 0)
    with torch.no_grad():
        ours.gate.weight.mul_(0.5 / 0.3)
    return ours.double()


def test_moe_equals_hf_mixtral_sparse_moe_block(moe):
    theirs = hf_mixtral.MixtralSparseMoeBlock(mixtral_config()).double().eval()
    theirs.load_state_dict(moe.state_dict(), strict=True)  # HF's names, as they are
    labels, got, want = compare(moe, lambda x: moe(x)[0], theirs, theirs)
    assert labels == [
        "output",
        "x",
        "gate.weight",
        "experts.gate_up_proj",
        "experts.down_proj",
    ]
    assert_float64_equal(labels, got, want)
    x, _ = inputs(D)
    out, logits = moe(x)
    hf_logits, _, chosen = theirs.gate(x)
    assert (logits - hf_logits).abs().max() <= TOL
    assert chosen.unique().numel() == E  # every expert is used
    assert got[labels.index("gate.weight")].abs().min() > 0  # the router learns


def test_moe_equals_the_hardened_moe_ffn(moe):
    hardened = parts_moe.MoEFFN(
        Router(D, E, partial(mixtral_router, top_k=K)), parts_moe.Experts(E, D, D_FF)
    ).double()

    def rename(name: str) -> str:
        return name.replace("gate.", "router.")

    hardened.load_state_dict(
        {rename(n): p for n, p in moe.state_dict().items()}, strict=True
    )
    labels, got, want = compare(moe, lambda x: moe(x)[0], hardened, hardened, rename)
    assert_float64_equal(labels, got, want)
    assert (moe(inputs(D)[0])[1] - hardened.router_logits).abs().max() <= TOL


def test_moe_gates_are_renormalised_over_the_top_k(moe):
    """One token, one expert at a time: the output is the experts' outputs weighted by
    their softmax probabilities divided by the top k's sum (which a missing
    renormalisation, or top-1, would change)."""
    x = inputs(D)[0][:1, :1].detach()  # [1, 1, d]
    out, logits = moe(x)
    top, chosen = logits[0].float().softmax(dim=-1).topk(K)  # float32, as Mixtral's
    assert top.sum() < 0.99  # renormalising changes the gates
    gates = (top / top.sum()).double()
    want = sum(
        moe.experts(x[0, 0][None], e) * p for e, p in zip(chosen.tolist(), gates)
    )
    assert (out[0, 0] - want[0]).abs().max() <= TOL


def test_load_balancing_loss_equals_hf_and_the_hardened():
    """Two layers' logits, pooled. Ours and the hardened: float64, TOL. HF's
    accumulates its counts and probability sums in float32: F32_BOUND."""
    g = torch.Generator().manual_seed(5)
    layers = [
        (2 * torch.randn(B * T, E, generator=g, dtype=F64)).requires_grad_()
        for _ in range(2)
    ]
    ours = load_balancing_loss(torch.cat(layers), top_k=K)
    hardened = parts_moe.load_balancing_loss(layers, K, E)
    hf = hf_mixtral.load_balancing_loss_func(tuple(layers), E, K)
    labels = ["loss", "d layer 0", "d layer 1"]
    got, want_hardened, want_hf = (
        [loss, *torch.autograd.grad(loss, layers)] for loss in (ours, hardened, hf)
    )
    assert_float64_equal(labels, got, want_hardened)
    assert_float32_limited(labels, got, want_hf)
    assert ours > K  # these logits route unevenly; uniform routing gives k:
    uniform = load_balancing_loss(torch.zeros(B * T, E, dtype=F64), top_k=K)
    assert abs(uniform.item() - K) <= TOL


# --- chapter 10: sliding windows ------------------------------------------------------
H, H_KV, W, BASE = 4, 2, 4, 10_000.0


def mistral_config(implementation: str) -> MistralConfig:
    return MistralConfig(
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=H_KV,
        intermediate_size=D_FF,
        num_hidden_layers=1,
        vocab_size=16,
        sliding_window=W,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": BASE},
        attn_implementation=implementation,
    )


@pytest.fixture(scope="module")
def window_layer():
    attn = SlidingWindowAttention(d_model=D, n_heads=H, n_kv_heads=H_KV, window=W)
    return randomise_(attn, 2).double()


def test_the_window_mask_is_hfs_and_the_hardened_ones():
    """sliding_window=W: query i sees keys i - W < j <= i, W keys with its own (HF's
    mask as MistralModel builds it); W - 1 or W + 1 is another mask."""
    ours = sliding_window_mask(T, W)
    x = torch.zeros(1, T, D, dtype=F64)
    hf = create_sliding_window_causal_mask(
        mistral_config("sdpa"), x, None, None, position_ids=torch.arange(T)[None]
    )
    assert torch.equal(ours, hf[0, 0])
    assert torch.equal(
        ours, parts_window.window_allowed(torch.arange(T), torch.arange(T), W)
    )
    assert ours.sum(dim=-1).tolist() == [min(i + 1, W) for i in range(T)]
    assert not torch.equal(ours, sliding_window_mask(T, W + 1))
    assert not torch.equal(ours, sliding_window_mask(T, W - 1))


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_sliding_window_attention_equals_hf_mistral_attention(
    window_layer, implementation
):
    """Given the mask HF builds for it. sdpa computes in float64: TOL. Eager takes its
    softmax in float32: F32_BOUND."""
    config = mistral_config(implementation)
    theirs = hf_mistral.MistralAttention(config, layer_idx=0).double()
    theirs.load_state_dict(window_layer.state_dict(), strict=True)
    x = torch.zeros(B, T, D, dtype=F64)
    mask = create_sliding_window_causal_mask(
        config, x, None, None, position_ids=torch.arange(T)[None]
    )
    cos, sin = hf_mistral.MistralRotaryEmbedding(config)(x, torch.arange(T)[None])
    result = compare(
        window_layer,
        lambda x: window_layer(x, cos[0], sin[0]),
        theirs,
        lambda x: theirs(x, (cos, sin), mask)[0],
    )
    if implementation == "sdpa":
        assert_float64_equal(*result)
    else:
        assert_float32_limited(*result)


def test_sliding_window_attention_equals_the_hardened_layer(window_layer):
    hardened = parts_window.SlidingWindowAttention(
        D, H, H_KV, window=W, rope=True, rope_base=BASE
    ).double()
    hardened.load_state_dict(window_layer.state_dict(), strict=True)
    cos, sin = tables(D // H, BASE)
    assert_float64_equal(
        *compare(
            window_layer,
            lambda x: window_layer(x, cos, sin),
            hardened,
            lambda x: hardened(x, causal=True),
        )
    )


def test_ring_decoding_equals_the_full_windowed_forward(window_layer):
    """T = 11 tokens one by one through W = 4 slots (the ring wraps twice): each step's
    output == the full forward's row, and the cache never grows."""
    cos, sin = tables(D // H, BASE)
    x = inputs(D)[0].detach()
    cache = RingKVCache(batch=B, n_kv_heads=H_KV, d_head=D // H, window=W, dtype=F64)
    with torch.no_grad():
        full = window_layer(x, cos, sin)
        steps = [window_layer.step(x[:, t : t + 1], cos, sin, cache) for t in range(T)]
    assert cache.k.shape == cache.v.shape == (B, H_KV, W, D // H) and cache.offset == T
    assert_float64_equal(["decoded"], [torch.cat(steps, dim=1)], [full])
    with torch.no_grad():  # the window matters: a plain causal layer differs
        q, k, v = window_layer.project(x, cos, sin)
        causal = window_layer.attend(q, k, v, torch.ones(T, T, dtype=torch.bool).tril())
    assert (causal[:, W:] - full[:, W:]).abs().min() > 1e-6
    assert (causal[:, :W] - full[:, :W]).abs().max() <= TOL


# --- chapter 10: attention sinks ------------------------------------------------------
D_HEAD, GPT_OSS_BASE = 8, 150_000.0  # D, H, H_KV, W, D_HEAD: gpt_oss_attention_config's


def gpt_oss_config(rope: str):
    return gpt_oss_attention_config(
        GPT_OSS_YARN
        if rope == "yarn"
        else {"rope_type": "default", "rope_theta": GPT_OSS_BASE}
    )


def sink_layer(window: int | None) -> SinkAttention:
    attn = SinkAttention(
        d_model=D, n_heads=H, n_kv_heads=H_KV, d_head=D_HEAD, window=window
    )
    return randomise_(attn, 3).double()


@pytest.mark.parametrize("rope", ["default", "yarn"])
@pytest.mark.parametrize("layer", [0, 1], ids=["sliding", "full"])
def test_sink_attention_equals_hf_gpt_oss_attention(layer, rope):
    """HF's gpt-oss eager attention takes its softmax in the input dtype: TOL, no
    patch. Its mask is the one GptOssModel builds for the layer; its cos and sin
    [T, d/2] (YaRN's carry its attention factor) are ours [T, d] once repeated."""
    config = gpt_oss_config(rope)
    ours = sink_layer(W if layer == 0 else None)
    theirs = hf_gpt_oss.GptOssAttention(config, layer).double().eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert theirs.sliding_window == ours.window
    x = torch.zeros(B, T, D, dtype=F64)
    make_mask = create_sliding_window_causal_mask if layer == 0 else create_causal_mask
    mask = make_mask(config, x, None, None, position_ids=torch.arange(T)[None])
    cos, sin = hf_gpt_oss.GptOssRotaryEmbedding(config)(x, torch.arange(T)[None])
    labels, got, want = compare(
        ours,
        lambda x: ours(
            x, torch.cat((cos[0], cos[0]), -1), torch.cat((sin[0], sin[0]), -1)
        ),
        theirs,
        lambda x: theirs(x, (cos, sin), mask)[0],
    )
    assert len(labels) == 2 + 9 and "sinks" in labels
    assert_float64_equal(labels, got, want)
    assert got[labels.index("sinks")].abs().min() > 1e-3  # every head's sink is used


@pytest.mark.parametrize("window", [W, None], ids=["sliding", "full"])
def test_sink_attention_equals_the_hardened_layer(window):
    ours = sink_layer(window)
    if window is None:
        hardened = parts_sinks.SinkAttention(
            D, H, H_KV, d_head=D_HEAD, bias=True, rope=True, rope_base=GPT_OSS_BASE
        )
    else:
        hardened = parts_sinks.SlidingWindowSinkAttention(
            D,
            H,
            H_KV,
            d_head=D_HEAD,
            bias=True,
            rope=True,
            rope_base=GPT_OSS_BASE,
            window=window,
        )
    hardened = hardened.double()
    hardened.load_state_dict(ours.state_dict(), strict=True)
    cos, sin = tables(D_HEAD, GPT_OSS_BASE)
    assert_float64_equal(
        *compare(
            ours,
            lambda x: ours(x, cos, sin),
            hardened,
            lambda x: hardened(x, causal=True),
        )
    )


def test_a_sink_takes_weight_from_the_keys():
    """A sink of -inf is plain causal attention (PyTorch's fused kernel); a large one
    takes almost all the weight, and the layer's output shrinks to o_proj's bias."""
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(B, H, T, D_HEAD, generator=g, dtype=F64) for _ in range(3))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    no_sink = torch.full((H,), float("-inf"), dtype=F64)
    plain = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_float64_equal(
        ["-inf sinks"], [attention_with_sinks(q, k, v, no_sink, causal)], [plain]
    )
    ours = sink_layer(None)
    cos, sin = tables(D_HEAD, GPT_OSS_BASE)
    with torch.no_grad():
        ours.sinks.fill_(40.0)
        out = ours(inputs(D)[0], cos, sin)
    assert (out - ours.o_proj.bias).abs().max() < 1e-6


# --- chapter 10: multi-head latent attention ------------------------------------------
R_Q, R_KV, D_NOPE, D_ROPE, D_V = 24, 16, 10, 6, 12


def mla_config(**changes) -> DeepseekV3Config:
    """One layer of DeepSeek-V3 of these sizes (D, H and the latent dims are
    tiny_deepseek_v3_config's), rotate-half RoPE."""
    settings = {
        "vocab_size": 16,
        "num_hidden_layers": 1,
        "rope_parameters": {"rope_type": "default", "rope_theta": BASE},
        "rope_interleave": False,
    }
    return tiny_deepseek_v3_config(**(settings | changes))


def mla_layer(form: str = "naive") -> MultiHeadLatentAttention:
    make = MultiHeadLatentAttention if form == "naive" else AbsorbedLatentAttention
    attn = make(d_model=D, n_heads=H, **latent_dims(R_Q, R_KV, D_NOPE, D_ROPE, D_V))
    return randomise_(attn, 4).double()


def test_absorbed_equals_naive():
    """The same weights, the products in another order: TOL (measured 2e-14)."""
    naive, absorbed = mla_layer("naive"), mla_layer("absorbed")
    assert all(
        torch.equal(a, b)
        for a, b in zip(naive.state_dict().values(), absorbed.state_dict().values())
    )
    cos, sin = tables(D_ROPE, BASE)
    labels, got, want = compare(
        absorbed,
        lambda x: absorbed(x, cos, sin),
        naive,
        lambda x: naive(x, cos, sin),
    )
    assert_float64_equal(labels, got, want)
    assert got[labels.index("kv_a_proj_with_mqa.weight")].abs().max() > 1e-3


def deinterleave_rope_rows(state: dict, n_heads: int = H) -> dict:
    """DeepSeek's checkpoints (HF rope_interleave=True) rotate the pairs (2i, 2i + 1);
    rotate-half rotates (i, i + d_rope / 2). Reordering the rows that make the RoPE
    parts (in each head of q_b_proj, and of kv_a_proj_with_mqa) to the even ones, then
    the odd ones, turns one into the other: the same scores, the same output."""
    order = torch.cat((torch.arange(0, D_ROPE, 2), torch.arange(1, D_ROPE, 2)))
    state = dict(state)
    q_b = state["q_b_proj.weight"].view(n_heads, D_NOPE + D_ROPE, -1)
    q_b = torch.cat((q_b[:, :D_NOPE], q_b[:, D_NOPE + order]), dim=1)
    state["q_b_proj.weight"] = q_b.reshape(-1, q_b.shape[-1])
    kv_a = state["kv_a_proj_with_mqa.weight"]
    state["kv_a_proj_with_mqa.weight"] = torch.cat((kv_a[:R_KV], kv_a[R_KV + order]))
    return state


@pytest.mark.parametrize("interleave", [False, True], ids=["half", "interleaved"])
@pytest.mark.parametrize("form", ["naive", "absorbed"])
def test_mla_equals_hf_deepseek_v3_attention(form, interleave):
    """HF's RMSNorms compute in float32: F32_BOUND as it is; TOL with them patched to
    compute in float64 (its sdpa attention is float64 already). Interleaved: HF's
    weights and gradients are ours with the RoPE rows reordered."""
    config = mla_config(rope_interleave=interleave)
    theirs = hf_deepseek.DeepseekV3Attention(config, layer_idx=0).double()
    randomise_(theirs, 5)
    ours = mla_layer(form)
    state = theirs.state_dict()
    ours.load_state_dict(
        deinterleave_rope_rows(state) if interleave else state, strict=True
    )
    x = torch.zeros(B, T, D, dtype=F64)
    cos, sin = hf_deepseek.DeepseekV3RotaryEmbedding(config)(x, torch.arange(T)[None])
    names = [n for n, _ in ours.named_parameters()]

    def run():
        x, probe = inputs(D)
        got = output_and_grads(ours, lambda x: ours(x, cos[0], sin[0]), names, x, probe)
        want = output_and_grads(
            theirs, lambda x: theirs(x, (cos, sin), None)[0], names, x, probe
        )  # sdpa, no mask: causal
        if interleave:  # HF's parameter gradients, in our row order
            want[2:] = deinterleave_rope_rows(dict(zip(names, want[2:]))).values()
        return ["output", "x", *names], got, want

    assert_equal_to_hf(run, hf_in_input_dtype(theirs, hf_deepseek), tol=TOL)


@pytest.mark.parametrize("form", ["naive", "absorbed"])
def test_mla_equals_the_hardened_layer(form):
    ours = mla_layer(form)
    hardened = parts_mla.MultiHeadLatentAttention(
        D,
        H,
        **latent_dims(R_Q, R_KV, D_NOPE, D_ROPE, D_V),
        rope_base=BASE,
        rope_layout="half",
        absorb="never" if form == "naive" else "always",
    ).double()
    hardened.load_state_dict(ours.state_dict(), strict=True)
    cos, sin = tables(D_ROPE, BASE)
    assert_float64_equal(
        *compare(
            ours,
            lambda x: ours(x, cos, sin),
            hardened,
            lambda x: hardened(x, causal=True),
        )
    )
