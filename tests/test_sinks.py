"""Attention sinks (literate/parts/sinks.py) against Hugging Face's `GptOssAttention`.

Float64. HF's gpt-oss attention computes its softmax in the input dtype (the sink
concatenated as one more logit, the row's max subtracted, the sink column dropped),
and its RoPE tables in float32 as ours do, so the layer is compared at 1e-12 with no
patch: output, and the gradients of the input and of every parameter (q/k/v/o weights
and biases, sinks), for a sliding layer (window 4 < T) and a full one, with plain RoPE
and with the released config's YaRN.
"""

from __future__ import annotations

import pytest
import torch
from transformers.models.gpt_oss import modeling_gpt_oss

from literate.models.gpt_oss import gpt_oss_rope
from literate.parts.multi_head import grouped_attention
from literate.parts.sinks import (
    SinkAttention,
    SlidingWindowSinkAttention,
    sink_attention,
    sink_attention_sdpa,
    sink_share,
)
from literate.parts.window import RingKVCache, window_allowed
from literate.tools.syncs import host_reads

from harness import (
    GPT_OSS_YARN,
    assert_float64_equal,
    compare_grads,
    gpt_oss_attention_config,
)

F64 = torch.float64
TOL = 1e-12
D, H, H_KV, D_HEAD, W, T, B = 32, 4, 2, 8, 4, 9, 2  # gpt_oss_attention_config's
hf_config = gpt_oss_attention_config


def additive(allowed: torch.Tensor) -> torch.Tensor:
    return torch.zeros(allowed.shape, dtype=F64).masked_fill(~allowed, float("-inf"))


@pytest.mark.parametrize("rope", ["default", "yarn"])
@pytest.mark.parametrize("layer", [0, 1], ids=["sliding", "full"])
def test_sink_attention_equals_hf_gpt_oss_attention(layer, rope):
    config = hf_config(
        GPT_OSS_YARN
        if rope == "yarn"
        else {"rope_type": "default", "rope_theta": 150000.0}
    )
    torch.manual_seed(0)
    theirs = modeling_gpt_oss.GptOssAttention(config, layer).double().eval()
    window = W if layer == 0 else None
    make = SinkAttention if window is None else SlidingWindowSinkAttention
    options = {} if window is None else {"window": window}
    ours = make(
        D, H, H_KV, d_head=D_HEAD, bias=True, rope=gpt_oss_rope(config)(), **options
    ).double()
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_(0.0, 0.5)
        ours.sinks.normal_(0.0, 2.0)  # sinks that matter: shares far from 0 and 1
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert theirs.sliding_window == window
    positions = torch.arange(T)
    allowed = (
        window_allowed(positions, positions, W)
        if window
        else positions[None] <= positions[:, None]
    )
    cos_sin = modeling_gpt_oss.GptOssRotaryEmbedding(config)(
        torch.zeros(B, T, D, dtype=F64), positions[None]
    )
    labels, got, want = compare_grads(
        ours,
        lambda x: ours(x, causal=True),
        theirs,
        lambda x: theirs(x, cos_sin, additive(allowed)[None, None])[0],
        shape=(B, T, D),
    )
    assert "sinks" in labels and "q_proj.bias" in labels and len(labels) == 2 + 9
    assert_float64_equal(labels, got, want, TOL)
    assert got[labels.index("sinks")].abs().min() > 1e-3  # the sinks are used


def random_qkv(t_q=5, t_k=5, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, t_q, D_HEAD, generator=g, dtype=dtype)
    k = torch.randn(B, H_KV, t_k, D_HEAD, generator=g, dtype=dtype)
    v = torch.randn(B, H_KV, t_k, D_HEAD, generator=g, dtype=dtype)
    return q, k, v


def test_weights_sum_to_one_minus_the_sink_share_and_low_scores_shrink_the_output():
    q, k, v = random_qkv()
    sinks = torch.tensor([-30.0, 0.0, 1.0, 3.0], dtype=F64)
    out, weights = sink_attention(q, k, v, sinks)
    scores = grouped_attention(q, k, v).scores
    share = sink_share(scores, sinks)  # [B, H, T_q]
    assert torch.allclose(weights.sum(-1), 1 - share, atol=1e-14, rtol=0)
    # a sink of -30 takes nothing: chapter 3's attention
    plain = grouped_attention(q, k, v).output
    assert (out[:, 0] - plain[:, 0]).abs().max() < 1e-12
    # every other head: the output is (1 - share) times chapter 3's average
    assert torch.allclose(out, (1 - share)[..., None] * plain, atol=1e-14, rtol=0)


def test_a_row_whose_keys_all_score_low_shrinks_toward_zero():
    """Keys u + noise, queries -c u: every real score ~ -c |u|^2 / sqrt(d_head). Without
    a sink the softmax is blind to the common shift and averages V whatever c is; with
    a sink of 0 the real keys' share, and the output, fall toward 0 as c grows."""
    q, k, v = random_qkv(seed=5)
    u = torch.randn(D_HEAD, generator=torch.Generator().manual_seed(6), dtype=F64)
    k = 0.1 * k + u
    sinks = torch.zeros(H, dtype=F64)
    kept, plain_norms = [], []
    for c in (0.0, 2.0, 4.0, 8.0):
        q_c = 0.1 * q - c * u
        out, weights = sink_attention(q_c, k, v, sinks)
        plain = grouped_attention(q_c, k, v).output
        kept.append((out.norm() / plain.norm()).item())
        plain_norms.append(plain.norm().item())
        share = sink_share(grouped_attention(q_c, k, v).scores, sinks)
        assert torch.allclose(weights.sum(-1), 1 - share, atol=1e-14, rtol=0)
    assert kept == sorted(kept, reverse=True) and kept[0] > 0.5 and kept[-1] < 1e-3
    assert min(plain_norms) > 0.5 * max(plain_norms)  # no sink: still an average


def test_the_sdpa_form_equals_the_explicit_softmax():
    q, k, v = random_qkv(t_q=6, t_k=6, seed=2)
    sinks = torch.randn(H, dtype=F64)
    allowed = window_allowed(torch.arange(6), torch.arange(6), 3)[None, None]
    out, _ = sink_attention(q, k, v, sinks, allowed)
    assert (sink_attention_sdpa(q, k, v, sinks, allowed) - out).abs().max() < 1e-14
    assert (
        sink_attention_sdpa(q, k, v, sinks) - sink_attention(q, k, v, sinks)[0]
    ).abs().max() < 1e-14


def test_an_empty_row_goes_to_the_sink_and_bad_sinks_are_refused():
    q, k, v = random_qkv()
    allowed = torch.ones(B, 1, 5, 5, dtype=torch.bool)
    allowed[0, :, 2] = False  # query 2 of row 0 sees no key
    out, weights = sink_attention(q, k, v, torch.zeros(H, dtype=F64), allowed)
    assert out[0, :, 2].abs().max() == 0 and weights[0, :, 2].abs().max() == 0
    assert out.isfinite().all()
    with pytest.raises(ValueError, match="sinks must be"):
        sink_attention(q, k, v, torch.zeros(H + 1, dtype=F64))
    with pytest.raises(TypeError, match="sinks"):
        sink_attention(q, k, v, torch.zeros(H, dtype=torch.long))
    scores = torch.zeros(B, H, 5, 5, dtype=F64)
    for bad in (
        torch.tensor(0.0, dtype=F64),
        torch.zeros(H + 1, dtype=F64),
        torch.zeros(1, H, dtype=F64),
    ):  # a 0-d one too: ValueError, not IndexError
        with pytest.raises(ValueError, match=r"^sinks must be \[H=4\]"):
            sink_share(scores, bad)


def test_weights_path_equals_fused_path_and_ring_decoding_equals_the_full_forward():
    torch.manual_seed(3)
    attn = (
        SlidingWindowSinkAttention(
            D, H, H_KV, window=W, bias=True, rope=True, rope_base=150000.0
        )
        .double()
        .eval()
    )
    with torch.no_grad():
        attn.sinks.normal_(0.0, 2.0)
    x = torch.randn(B, 11, D, dtype=F64)
    full = attn(x, causal=True)
    out, weights = attn(x, causal=True, return_weights=True)
    assert (out - full).abs().max() < 1e-14
    assert (weights.sum(-1) < 1).all()  # every row gives the sink something
    cache = attn.new_cache(B, 11)
    assert isinstance(cache, RingKVCache) and cache.slots == W
    with torch.no_grad():
        steps = [attn(x[:, :3], causal=True, cache=cache)]
        steps += [attn(x[:, t : t + 1], causal=True, cache=cache) for t in range(3, 11)]
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-12


def test_no_host_sync_and_compiled_sink_layer_equals_eager():
    torch.manual_seed(4)
    attn = SlidingWindowSinkAttention(D, H, H_KV, window=W, bias=True, rope=True).eval()
    with torch.no_grad():
        attn.sinks.normal_(0.0, 2.0)
    x = torch.randn(B, 7, D)
    assert host_reads(lambda t: attn(t, causal=True), x) == 0
    torch._dynamo.reset()
    compiled = torch.compile(attn, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        assert (compiled(x, causal=True) - attn(x, causal=True)).abs().max() < 1e-6
