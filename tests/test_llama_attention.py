"""`MultiHeadAttention(rope=True)` against Hugging Face's `LlamaAttention` (chapter 3).

The production reference for a layer with grouped heads and RoPE: HF's Llama attention,
built from a small `LlamaConfig` (no download) whose `head_dim` and RoPE base
(`rope_parameters["rope_theta"]`) are ours, holding our weights (the same names,
`q_proj` .. `o_proj`, so `load_state_dict` copies them), called with
`position_embeddings` from `LlamaRotaryEmbedding` for the tokens' positions.

- "sdpa" (PyTorch's fused kernel): with `attention_mask=None` it is causal; with a bool
  mask (True = attend) it takes the mask as is. Both of our paths (the fused kernel, and
  the transparent attention run for `return_weights=True`) equal it in float64 at atol
  1e-12, rtol 0: the output and the gradients w.r.t. the input and every weight, for MHA,
  GQA and MQA, with and without bias, at positions 0.. and 5.., with and without right
  padding; with left padding (rows left empty, `empty_row="zero"`) on every real query;
  and a cached decode (a prompt, then one token per step) against HF's `DynamicCache`.
- "eager": it *adds* the mask to the scores, so it needs an additive mask; `None` means
  no mask (not causal) and a bool mask is added as 0/1. It takes its softmax in float32
  whatever the input dtype, so it agrees with us (and with "sdpa") to ~1e-7 only.

Every random tensor comes from a fixed seed. Importing the HF module costs a few seconds:
everything that needs it is in this one file.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from transformers import DynamicCache, LlamaConfig
from transformers.models.llama.modeling_llama import (
    LlamaAttention,
    LlamaRotaryEmbedding,
)

from literate.parts.attention import causal_allowed, padding_allowed
from literate.parts.multi_head import MultiHeadAttention

F64 = torch.float64
TOL = dict(atol=1e-12, rtol=0)
# the decoder layers' cache argument was renamed in 5.x (past_key_values -> cache)
CACHE_KW = (
    "cache"
    if "cache" in inspect.signature(LlamaAttention.forward).parameters
    else "past_key_values"
)


def pair(seed: int, n_kv: int, *, bias: bool = False, implementation: str = "sdpa"):
    """(ours, theirs, config): our float64 layer and HF's, holding the same weights."""
    torch.manual_seed(seed)
    ours = MultiHeadAttention(32, 8, n_kv, bias=bias, rope=True).double()
    if bias:  # nn.Linear's biases are random already; make them larger than rounding
        with torch.no_grad():
            for p in (ours.q_proj, ours.k_proj, ours.v_proj, ours.o_proj):
                p.bias.normal_()
    config = LlamaConfig(
        hidden_size=ours.d_model,
        num_attention_heads=ours.n_heads,
        num_key_value_heads=ours.n_kv_heads,
        head_dim=ours.d_head,
        rope_parameters={"rope_type": "default", "rope_theta": ours.rope.base},
        attention_bias=bias,
        attn_implementation=implementation,
        num_hidden_layers=1,
    )
    theirs = LlamaAttention(config, layer_idx=0).double()
    theirs.load_state_dict(ours.state_dict())  # strict: the same names and shapes
    return ours, theirs, config


def x_and_rope(config: LlamaConfig, seed: int, b: int, t: int, start: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(
        b, t, config.hidden_size, generator=g, dtype=F64, requires_grad=True
    )
    positions = torch.arange(start, start + t).expand(b, t)
    return x, LlamaRotaryEmbedding(config)(x, positions)


def ours_out(
    layer: MultiHeadAttention, x: torch.Tensor, return_weights: bool, **kwargs
):
    if return_weights:
        return layer(x, causal=True, return_weights=True, **kwargs)[0]
    return layer(x, causal=True, **kwargs)


PATHS = pytest.mark.parametrize(
    "return_weights", [False, True], ids=["fused", "transparent"]
)
HEADS = pytest.mark.parametrize("n_kv", [8, 2, 1], ids=["MHA", "GQA", "MQA"])


def test_the_reference_is_what_we_think_it_is():
    """The config is ours: head width, RoPE base and type, and HF's tables are our tables."""
    ours, theirs, config = pair(0, 2)
    assert (theirs.head_dim, theirs.num_key_value_groups) == (ours.d_head, 4)
    assert config.rope_parameters == {"rope_type": "default", "rope_theta": 10_000.0}
    x, (cos, sin) = x_and_rope(config, 1, 2, 6, start=3)
    table_cos, table_sin = ours.rope.tables(9)
    assert torch.equal(cos[0], table_cos[3:9].double()) and torch.equal(
        sin[1], table_sin[3:9].double()
    )


@PATHS
@HEADS
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("start", [0, 5], ids=["at-0", "at-5"])
@pytest.mark.parametrize("padded", [False, True], ids=["causal", "causal+padding"])
def test_equals_llama_sdpa_attention_forward_and_backward(
    n_kv, bias, start, padded, return_weights
):
    ours, theirs, config = pair(10 + n_kv, n_kv, bias=bias)
    x, cos_sin = x_and_rope(config, 20 + n_kv, 3, 6, start)
    if padded:  # right padding: no query is left without a key
        valid = torch.tensor(
            [[True] * 6, [True] * 4 + [False] * 2, [True] * 5 + [False]]
        )
        kwargs, mask = (
            {"key_valid": valid},
            causal_allowed(6, 6) & padding_allowed(valid),
        )
    else:
        kwargs, mask = {}, None  # None: HF's sdpa attention is causal by itself
    start_kw = {"start_pos": start} if start else {}
    ref, _ = theirs(x, position_embeddings=cos_sin, attention_mask=mask)
    out = ours_out(ours, x, return_weights, **kwargs, **start_kw)
    torch.testing.assert_close(out, ref, **TOL)
    probe = torch.randn(
        ref.shape, generator=torch.Generator().manual_seed(30), dtype=F64
    )
    g_ref = torch.autograd.grad((ref * probe).sum(), [x, *theirs.parameters()])
    g_ours = torch.autograd.grad((out * probe).sum(), [x, *ours.parameters()])
    assert len(g_ours) == len(g_ref) == 1 + (8 if bias else 4)
    for a, b in zip(g_ours, g_ref):
        torch.testing.assert_close(a, b, **TOL)


@PATHS
@HEADS
def test_left_padding_equals_llama_on_every_real_query(n_kv, return_weights):
    """Left padding under a causal mask leaves the first queries of a short sequence with
    no key. We give them zero ("zero" policy); the kernel's own answer there depends on
    the torch version, so only the real queries are compared."""
    ours, theirs, config = pair(40 + n_kv, n_kv)
    x, cos_sin = x_and_rope(config, 41, 2, 6)
    valid = torch.tensor([[True] * 6, [False, False] + [True] * 4])
    mask = causal_allowed(6, 6) & padding_allowed(valid)
    with torch.no_grad():
        ref, _ = theirs(x, position_embeddings=cos_sin, attention_mask=mask)
        out = ours_out(ours, x, return_weights, key_valid=valid, empty_row="zero")
    torch.testing.assert_close(out[valid], ref[valid], **TOL)
    assert torch.equal(out[~valid], torch.zeros_like(out[~valid]))


@PATHS
@HEADS
def test_cached_decode_equals_llama_with_a_dynamic_cache(n_kv, return_weights):
    """A 4-token prompt, then one token per step. (HF's sdpa attention with
    attention_mask=None is causal only for T_q == T_k: a chunk of several tokens after a
    cache would need a mask. One token at a time needs none.)"""
    ours, theirs, config = pair(50 + n_kv, n_kv)
    x, _ = x_and_rope(config, 51, 2, 8)
    rope = LlamaRotaryEmbedding(config)
    with torch.no_grad():
        hf_cache, cache = (
            DynamicCache(config=config),
            ours.new_cache(batch=2, capacity=8),
        )
        refs, outs = [], []
        for a, b in [(0, 4), (4, 5), (5, 6), (6, 7), (7, 8)]:
            cos_sin = rope(x, torch.arange(a, b).expand(2, b - a))
            refs.append(
                theirs(
                    x[:, a:b],
                    position_embeddings=cos_sin,
                    attention_mask=None,
                    **{CACHE_KW: hf_cache},
                )[0]
            )
            outs.append(ours_out(ours, x[:, a:b], return_weights, cache=cache))
    torch.testing.assert_close(torch.cat(outs, dim=1), torch.cat(refs, dim=1), **TOL)
    keys = hf_cache.layers[
        0
    ].keys  # [B, H_kv, T, d_head]: rotated before caching, as ours
    assert keys.shape == (2, n_kv, 8, 4)
    torch.testing.assert_close(cache.k[:, :, :8], keys, **TOL)
    torch.testing.assert_close(cache.v[:, :, :8], hf_cache.layers[0].values, **TOL)


@HEADS
def test_eager_llama_attention_needs_an_additive_mask_and_softmaxes_in_float32(n_kv):
    ours, eager, config = pair(60 + n_kv, n_kv, implementation="eager")
    x, cos_sin = x_and_rope(config, 61, 2, 6)
    valid = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    allowed = causal_allowed(6, 6) & padding_allowed(
        valid
    )  # [B, 1, T, T], True = attend
    additive = torch.zeros(allowed.shape, dtype=F64).masked_fill(~allowed, -torch.inf)
    with torch.no_grad():
        out, weights = ours(x, causal=True, key_valid=valid, return_weights=True)
        ref, ref_weights = eager(
            x, position_embeddings=cos_sin, attention_mask=additive
        )
        # its softmax is float32: the weights are float32 numbers, and it is 1e-7 away
        assert torch.equal(ref_weights, ref_weights.float().double())
        assert 1e-12 < (ref - out).abs().max() < 1e-6
        torch.testing.assert_close(ref_weights, weights, atol=1e-6, rtol=0)
        # None is no mask at all: every query reads every key
        unmasked, _ = eager(x, position_embeddings=cos_sin, attention_mask=None)
        torch.testing.assert_close(unmasked, ours(x, causal=False), atol=1e-6, rtol=0)
        assert (unmasked - ours(x, causal=True)).abs().max() > 1e-3
        # a bool mask is added to the scores as 1 (True) and 0 (False): nothing is blocked
        as_bool, _ = eager(x, position_embeddings=cos_sin, attention_mask=allowed)
        as_01, _ = eager(x, position_embeddings=cos_sin, attention_mask=allowed.to(F64))
        assert torch.equal(as_bool, as_01)
        assert (as_bool - out).abs().max() > 1e-3
