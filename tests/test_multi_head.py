"""Tests for `literate.parts.multi_head` (and the attention half of `literate.numbers.params`).

What is checked, and against what, in float64 with atol 1e-12 and rtol 0 unless stated;
the layer's two paths (the fused kernel, and the transparent attention run when weights
are asked for) are each checked against the references (tests/test_fused_attention.py
checks them against each other):

- MHA equals `torch.nn.MultiheadAttention(batch_first=True, dropout=0)` with its weights
  copied in (its `in_proj_weight` is q; k; v stacked), with and without bias, with causal
  and padding masks (its masks block where True: we pass `~allowed`), per-head weights
  (`average_attn_weights=False`), self- and cross-attention (T != S): outputs and the
  gradients w.r.t. the inputs and every parameter;
- MHA, GQA and MQA with RoPE equal PyTorch's fused `F.scaled_dot_product_attention(...,
  enable_gqa=True)` run on the same projections, and an independent reference that copies
  K/V with `repeat_interleave` and rotates with complex numbers (the
  `reference_gqa`), forward and backward, also at a start_pos and while the RoPE tables grow;
- the KV cache: token-by-token and chunked decode equal the full causal forward (RoPE,
  GQA, padding on either side), the cache holds n_kv heads whose contents equal
  independently projected and rotated K/V, and the K/V read by attention are views of the
  cache (never copied to n_heads); a refused call leaves the cache as it was;
- RoPE tables: computed once per layer, grown (doubled) on demand, equal to `rope_cache`
  bit for bit, not in the state dict, converted with the layer;
- regression checks: MHA as the n_kv = n_heads case, parameter and KV-byte formulas, packed
  QKV, argument checks, cache positions, cross-attention guards, mask axes and empty rows,
  RoPE tables in the layer's dtype;
- every error path, with its whole message (anchored), and NaN in, NaN out; each
  cross-attention refusal names its own option and none of the others.

Hugging Face's `LlamaAttention` (GQA + RoPE, both paths, forward and backward, and a
cached decode) is the reference of tests/test_llama_attention.py.

Every random tensor comes from a fixed seed.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import literate.parts.multi_head as heads_module
from literate.numbers.params import (
    PUBLISHED_ATTENTION,
    attention_params,
    kv_cache_bytes_per_token,
)
from literate.parts.attention import causal_allowed, padding_allowed
from literate.parts.cache import KVCache
from literate.parts.multi_head import (
    MultiHeadAttention,
    attention_allowed,
    check_call,
    grouped_attention,
    load_packed_qkv,
    merge_heads,
    pack_qkv,
    split_heads,
)
from literate.tools.syncs import HostReads as HostSyncs

F64 = torch.float64
TOL = dict(atol=1e-12, rtol=0)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator, *shape: int, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(shape, generator=g, dtype=F64).to(dtype)


def layer(
    seed: int, d: int, h: int, h_kv: int | None = None, **kwargs
) -> MultiHeadAttention:
    """A float64 layer with seeded weights; biases (if any) random too, not zero."""
    torch.manual_seed(seed)
    m = MultiHeadAttention(d, h, h_kv, **kwargs).double()
    if kwargs.get("bias"):
        with torch.no_grad():
            for p in (m.q_proj, m.k_proj, m.v_proj, m.o_proj):
                p.bias.normal_()
    return m


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def grads(
    out: torch.Tensor, probe: torch.Tensor, wrt: list[torch.Tensor]
) -> tuple[torch.Tensor, ...]:
    return torch.autograd.grad((out * probe).sum(), wrt)


# --------------------------------------------------------------------------------------
# Independent references (no code shared with literate.parts.multi_head)
# --------------------------------------------------------------------------------------


def rope_reference(x: torch.Tensor, start: int, base: float = 10_000.0) -> torch.Tensor:
    """Rotate-half RoPE written with complex numbers: pair (i, i + d/2) is x_i + j x_{i+d/2},
    multiplied by exp(j pos theta_i). Angles in float32, as Hugging Face computes them."""
    d = x.shape[-1]
    half = d // 2
    inv_freq = 1.0 / (
        base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d)
    )  # float32
    pos = torch.arange(start, start + x.shape[-2]).float()
    angle = torch.outer(pos, inv_freq)  # [T, d/2], float32
    turn = torch.complex(angle.cos().to(x.dtype), angle.sin().to(x.dtype))
    z = torch.complex(x[..., :half], x[..., half:]) * turn
    return torch.cat([z.real, z.imag], dim=-1)


def reference_gqa(
    m: MultiHeadAttention,
    x: torch.Tensor,
    allowed: torch.Tensor,
    *,
    rope: bool,
    start: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A plain reference: project, rotate, physically repeat_interleave K/V up to H heads,
    plain softmax attention per head. Returns (output, per-head output before o_proj)."""
    b, t, d = x.shape
    h, h_kv = m.n_heads, m.n_kv_heads
    dh = d // h

    def heads_of(p: nn.Linear, n: int) -> torch.Tensor:
        return F.linear(x, p.weight, p.bias).reshape(b, t, n, dh).permute(0, 2, 1, 3)

    q, k, v = heads_of(m.q_proj, h), heads_of(m.k_proj, h_kv), heads_of(m.v_proj, h_kv)
    if rope:
        q, k = rope_reference(q, start), rope_reference(k, start)
    k = k.repeat_interleave(h // h_kv, dim=1)  # a physical copy: [B, H, T, dh]
    v = v.repeat_interleave(h // h_kv, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    per_head = weights @ v
    out = per_head.permute(0, 2, 1, 3).reshape(b, t, d)
    return F.linear(out, m.o_proj.weight, m.o_proj.bias), per_head


def fused_gqa(
    m: MultiHeadAttention, x: torch.Tensor, allowed: torch.Tensor, *, rope: bool
) -> torch.Tensor:
    """The same layer through PyTorch's fused kernel with enable_gqa=True (K/V stay H_kv)."""
    b, t, d = x.shape
    dh = m.d_head
    q = m.q_proj(x).view(b, t, m.n_heads, dh).transpose(1, 2)
    k = m.k_proj(x).view(b, t, m.n_kv_heads, dh).transpose(1, 2)
    v = m.v_proj(x).view(b, t, m.n_kv_heads, dh).transpose(1, 2)
    if rope:
        q, k = rope_reference(q, 0), rope_reference(k, 0)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    return m.o_proj(o.transpose(1, 2).reshape(b, t, d))


# --------------------------------------------------------------------------------------
# MHA equals torch.nn.MultiheadAttention
# --------------------------------------------------------------------------------------


def torch_mha_with_our_weights(
    ours: MultiHeadAttention, bias: bool, seed: int
) -> nn.MultiheadAttention:
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(
        ours.d_model, ours.n_heads, bias=bias, batch_first=True, dropout=0.0, dtype=F64
    )
    with torch.no_grad():
        if bias:
            ref.in_proj_bias.normal_()
            ref.out_proj.bias.normal_()
    load_packed_qkv(
        ours, ref.in_proj_weight.detach(), ref.in_proj_bias.detach() if bias else None
    )
    with torch.no_grad():
        ours.o_proj.weight.copy_(ref.out_proj.weight)
        if bias:
            ours.o_proj.bias.copy_(ref.out_proj.bias)
    return ref


def our_param_grads_as_torch(
    ours: MultiHeadAttention, g: tuple[torch.Tensor, ...], bias: bool
) -> list[torch.Tensor]:
    """Our gradients, laid out as nn.MultiheadAttention's parameters (q; k; v stacked)."""
    names = [n for n, _ in ours.named_parameters()]
    by_name = dict(zip(names, g))
    out = [
        torch.cat([by_name[f"{p}_proj.weight"] for p in "qkv"]),
        by_name["o_proj.weight"],
    ]
    if bias:
        out += [
            torch.cat([by_name[f"{p}_proj.bias"] for p in "qkv"]),
            by_name["o_proj.bias"],
        ]
    return out


def torch_param_list(ref: nn.MultiheadAttention, bias: bool) -> list[torch.Tensor]:
    out = [ref.in_proj_weight, ref.out_proj.weight]
    if bias:
        out += [ref.in_proj_bias, ref.out_proj.bias]
    return out


PATHS = pytest.mark.parametrize(
    "return_weights", [False, True], ids=["fused", "transparent"]
)


def call(m: MultiHeadAttention, *args, return_weights: bool, **kwargs):
    """(output, weights or None) through the fused path (return_weights=False) or the
    transparent one of chapter 1 (return_weights=True)."""
    if return_weights:
        return m(*args, return_weights=True, **kwargs)
    return m(*args, **kwargs), None


@PATHS
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_mha_equals_torch_multihead_attention(bias, causal, return_weights):
    d, h, b, t = 16, 4, 3, 6
    ours = layer(10, d, h, bias=bias)
    ref = torch_mha_with_our_weights(ours, bias, seed=11)
    g = gen(12)
    x = randn(g, b, t, d).requires_grad_()
    valid = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] * 5 + [False]])

    out, weights = call(
        ours, x, causal=causal, key_valid=valid, return_weights=return_weights
    )
    ref_out, ref_weights = ref(
        x,
        x,
        x,
        key_padding_mask=~valid,
        need_weights=True,
        average_attn_weights=False,
        attn_mask=~causal_allowed(t, t) if causal else None,
    )
    torch.testing.assert_close(out, ref_out, **TOL)
    if return_weights:
        torch.testing.assert_close(
            weights, ref_weights, **TOL
        )  # [B, H, T_q, T_k], per head

    probe = randn(g, b, t, d)
    ours_g = grads(out, probe, [x, *ours.parameters()])
    ref_g = grads(ref_out, probe, [x, *torch_param_list(ref, bias)])
    torch.testing.assert_close(ours_g[0], ref_g[0], **TOL)  # w.r.t. the input
    for a, r in zip(our_param_grads_as_torch(ours, ours_g[1:], bias), ref_g[1:]):
        torch.testing.assert_close(a, r, **TOL)  # w.r.t. every parameter


@PATHS
@pytest.mark.parametrize("bias", [False, True])
def test_cross_attention_equals_torch_multihead_attention(bias, return_weights):
    d, h, b, t, s = 16, 4, 2, 3, 7  # T != S
    ours = layer(20, d, h, bias=bias)
    ref = torch_mha_with_our_weights(ours, bias, seed=21)
    g = gen(22)
    x = randn(g, b, t, d).requires_grad_()
    memory = randn(g, b, s, d).requires_grad_()
    source_valid = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])

    out, weights = call(
        ours,
        x,
        memory,
        causal=False,
        key_valid=source_valid,
        return_weights=return_weights,
    )
    ref_out, ref_weights = ref(
        x,
        memory,
        memory,
        key_padding_mask=~source_valid,
        need_weights=True,
        average_attn_weights=False,
    )
    assert out.shape == (b, t, d)
    torch.testing.assert_close(out, ref_out, **TOL)
    if return_weights:
        assert weights.shape == (b, h, t, s)
        torch.testing.assert_close(weights, ref_weights, **TOL)
    probe = randn(g, b, t, d)
    ours_g = grads(out, probe, [x, memory, *ours.parameters()])
    ref_g = grads(ref_out, probe, [x, memory, *torch_param_list(ref, bias)])
    torch.testing.assert_close(ours_g[0], ref_g[0], **TOL)
    torch.testing.assert_close(ours_g[1], ref_g[1], **TOL)
    for a, r in zip(our_param_grads_as_torch(ours, ours_g[2:], bias), ref_g[2:]):
        torch.testing.assert_close(a, r, **TOL)


# --------------------------------------------------------------------------------------
# GQA and MQA equal the fused kernel and the repeat_interleave reference
# --------------------------------------------------------------------------------------

VALID_6 = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])


@PATHS
@pytest.mark.parametrize("h_kv", [8, 2, 1], ids=["mha", "gqa-2", "mqa"])
@pytest.mark.parametrize("rope", [False, True])
def test_matches_fused_sdpa_with_enable_gqa(h_kv, rope, return_weights):
    m = layer(30 + h_kv, 32, 8, h_kv, bias=True, rope=rope)
    g = gen(31)
    x = randn(g, 2, 6, 32).requires_grad_()
    allowed = causal_allowed(6, 6) & padding_allowed(VALID_6)  # [B, 1, T, T]
    out, _ = call(m, x, causal=True, key_valid=VALID_6, return_weights=return_weights)
    fused = fused_gqa(m, x, allowed, rope=rope)
    torch.testing.assert_close(out, fused, **TOL)
    probe = randn(g, 2, 6, 32)
    wrt = [x, *m.parameters()]
    for a, r in zip(grads(out, probe, wrt), grads(fused, probe, wrt)):
        torch.testing.assert_close(a, r, **TOL)


@PATHS
@pytest.mark.parametrize("h_kv", [8, 2, 1], ids=["mha", "gqa-2", "mqa"])
def test_matches_repeat_interleave_reference_with_rope(h_kv, return_weights):
    """MHA is the n_kv = n_heads case; a real grouping (group of 4) and MQA
    are checked against a reference that physically copies K/V; MQA's per-head outputs
    are distinct (the group axis is broadcast per head, not collapsed). Both paths: the
    fused kernel (is_causal) and the transparent attention."""
    m = layer(40 + h_kv, 32, 8, h_kv, rope=True)
    g = gen(41)
    x = randn(g, 2, 5, 32).requires_grad_()
    allowed = causal_allowed(5, 5)
    out, weights = call(m, x, causal=True, return_weights=return_weights)
    ref, per_head_ref = reference_gqa(m, x, allowed, rope=True)
    torch.testing.assert_close(out, ref, **TOL)
    if return_weights:
        assert weights.shape == (2, 8, 5, 5) and torch.all(weights[..., ~allowed] == 0)
    probe = randn(g, 2, 5, 32)
    wrt = [x, *m.parameters()]
    for a, r in zip(grads(out, probe, wrt), grads(ref, probe, wrt)):
        torch.testing.assert_close(a, r, **TOL)

    # per-head outputs, through grouped_attention on the layer's own projections
    with torch.no_grad():
        q = apply_rope_for(m, split_heads(m.q_proj(x), m.n_heads))
        k = apply_rope_for(m, split_heads(m.k_proj(x), m.n_kv_heads))
        v = split_heads(m.v_proj(x), m.n_kv_heads)
        per_head = grouped_attention(q, k, v, allowed).output  # [B, H, T, d_head]
    torch.testing.assert_close(per_head, per_head_ref.detach(), **TOL)
    for i in range(8):
        for j in range(i + 1, 8):
            assert max_err(per_head[:, i], per_head[:, j]) > 1e-3, (i, j)


def apply_rope_for(
    m: MultiHeadAttention, x: torch.Tensor, start: int = 0
) -> torch.Tensor:
    from literate.parts.positions import apply_rope, rope_cache

    cos, sin = rope_cache(start + x.shape[-2], m.d_head)
    return apply_rope(x, cos, sin, offset=start)


def test_group_order_is_repeat_interleave_not_tile():
    """Query head h reads KV head h // G. Tiling (`repeat`) would pair head h with h % H_kv:
    a different model, and the test would see it."""
    m = layer(50, 32, 8, 2)
    g = gen(51)
    x = randn(g, 1, 4, 32)
    q = split_heads(m.q_proj(x), 8).detach()
    k = split_heads(m.k_proj(x), 2).detach()
    v = split_heads(m.v_proj(x), 2).detach()
    ours = grouped_attention(q, k, v).output
    interleaved = F.scaled_dot_product_attention(
        q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
    )
    tiled = F.scaled_dot_product_attention(
        q, k.repeat(1, 4, 1, 1), v.repeat(1, 4, 1, 1)
    )
    torch.testing.assert_close(ours, interleaved, **TOL)
    assert max_err(ours, tiled) > 1e-2


def test_grouped_attention_matches_fused_with_per_head_mask():
    g = gen(52)
    q, k, v = (
        randn(g, 2, 6, 3, 4),
        randn(g, 2, 2, 5, 4),
        randn(g, 2, 2, 5, 7),
    )  # d_v != d_k
    allowed = torch.rand(2, 6, 3, 5, generator=g) < 0.7
    allowed[..., 0] = True
    ours = grouped_attention(q, k, v, allowed)
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    torch.testing.assert_close(ours.output, fused, **TOL)
    assert ours.weights.shape == (2, 6, 3, 5) and ours.empty_rows.shape == (2, 6, 3)
    assert (ours.weights[~allowed] == 0).all()


# --------------------------------------------------------------------------------------
# K and V are never copied up to n_heads
# --------------------------------------------------------------------------------------


@PATHS
def test_gqa_hands_the_cache_itself_to_the_kernel(monkeypatch, return_weights):
    """What grouped attention hands to the attention kernel is the cache's own storage: to
    PyTorch's fused kernel as [B, H_kv, T_k, d_head] with enable_gqa=True, to the transparent
    attention with the G query heads of each group stacked along the query axis; no
    repeat_interleave anywhere in a forward."""
    seen = {}
    transparent = heads_module.scaled_dot_product_attention
    fused = F.scaled_dot_product_attention

    def spy_transparent(q, k, v, allowed=None, **kwargs):
        seen.update(q=q, k=k, v=v, kernel="transparent")
        return transparent(q, k, v, allowed, **kwargs)

    def spy_fused(q, k, v, **kwargs):
        seen.update(q=q, k=k, v=v, kernel="fused", enable_gqa=kwargs.get("enable_gqa"))
        return fused(q, k, v, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError("repeat_interleave copies K/V")

    monkeypatch.setattr(heads_module, "scaled_dot_product_attention", spy_transparent)
    monkeypatch.setattr(heads_module.F, "scaled_dot_product_attention", spy_fused)
    monkeypatch.setattr(torch, "repeat_interleave", forbidden)
    monkeypatch.setattr(torch.Tensor, "repeat_interleave", forbidden)

    m = layer(60, 32, 8, 2, rope=True)
    cache = m.new_cache(2, 8)
    g = gen(61)
    with torch.no_grad():
        m(randn(g, 2, 3, 32), causal=True, cache=cache, return_weights=return_weights)
        m(randn(g, 2, 1, 32), causal=True, cache=cache, return_weights=return_weights)
    k, v = seen["k"], seen["v"]
    assert k.shape == (2, 2, 4, 4) and v.shape == (2, 2, 4, 4)  # [B, H_kv, T_k, d_head]
    if return_weights:
        assert seen["kernel"] == "transparent"
        assert seen["q"].shape == (2, 2, 4 * 1, 4)  # [B, H_kv, G * T_q, d_head]
    else:
        assert seen["kernel"] == "fused" and seen["enable_gqa"] is True
        assert seen["q"].shape == (2, 8, 1, 4)  # [B, H, T_q, d_head]
    assert k.untyped_storage().data_ptr() == cache.k.untyped_storage().data_ptr()
    assert v.untyped_storage().data_ptr() == cache.v.untyped_storage().data_ptr()


def largest_copy(fn) -> int:
    """The largest tensor (in elements) that any clone/copy/contiguous inside `fn` touched."""
    from math import prod

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    copies = (
        "aten::clone",
        "aten::copy_",
        "aten::contiguous",
        "aten::repeat_interleave",
        "aten::repeat",
    )
    return max(
        (
            prod(s)
            for e in prof.events()
            if e.name in copies
            for s in e.input_shapes
            if s
        ),
        default=0,
    )


def test_grouped_attention_never_materialises_g_copies_of_k_or_v():
    """Measured with the profiler, not assumed: broadcasting a size-1 group axis through
    torch.matmul would clone K and V G times (expand + reshape); stacking the queries does not.
    The largest copy is score-sized (T_q = 3 is small), far below G copies of K."""
    b, h, h_kv, t_q, t_k, d = 1, 8, 2, 3, 64, 16
    q, k, v = (
        randn(gen(62), b, h, t_q, d),
        randn(gen(63), b, h_kv, t_k, d),
        randn(gen(64), b, h_kv, t_k, d),
    )
    g = h // h_kv
    assert largest_copy(lambda: grouped_attention(q, k, v)) < g * k.numel()
    # The check can fail: the broadcast it replaced does copy K G times.
    assert (
        largest_copy(
            lambda: q.view(b, h_kv, g, t_q, d) @ k.unsqueeze(2).transpose(-2, -1)
        )
        >= g * k.numel()
    )


# --------------------------------------------------------------------------------------
# KV cache: decode equals the full forward; the cache holds n_kv rotated heads
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("h_kv", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_cached_decode_equals_full_causal_forward(h_kv):
    """Cached decoding at the layer level: prefill 3 tokens, then one at a time (RoPE, GQA)."""
    m = layer(70 + h_kv, 32, 4, h_kv, rope=True)
    g = gen(71)
    x = randn(g, 2, 7, 32)
    with torch.no_grad():
        full, full_w = m(x, causal=True, return_weights=True)
        cache = m.new_cache(2, 10)
        steps = [m(x[:, :3], causal=True, cache=cache)]
        for t in range(3, 7):
            out, w = m(
                x[:, t : t + 1],
                causal=True,
                cache=cache,
                start_pos=t,
                return_weights=True,
            )
            assert w.shape == (2, 4, 1, t + 1)
            torch.testing.assert_close(w[:, :, 0], full_w[:, :, t, : t + 1], **TOL)
            steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL)
    assert cache.next_pos == 7 and cache.k.shape == (2, h_kv, 10, 8)

    # the cache's contents equal independently projected and rotated K (and unrotated V)
    with torch.no_grad():
        k_ref = rope_reference(
            F.linear(x, m.k_proj.weight).view(2, 7, h_kv, 8).transpose(1, 2), 0
        )
        v_ref = F.linear(x, m.v_proj.weight).view(2, 7, h_kv, 8).transpose(1, 2)
    torch.testing.assert_close(cache.k[:, :, :7], k_ref, **TOL)
    torch.testing.assert_close(cache.v[:, :, :7], v_ref, **TOL)
    assert (cache.k[:, :, 7:] == 0).all()  # untouched capacity


@pytest.mark.parametrize("side", ["right", "left"])
def test_cached_decode_with_padding_equals_full_forward(side):
    """key_valid covers every key seen so far; left padding leaves empty query rows, which
    empty_row='zero' passes through to attention (zero weights for them)."""
    m = layer(80, 16, 4, 2, rope=True)
    g = gen(81)
    x = randn(g, 2, 6, 16)
    short = [True] * 4 + [False] * 2 if side == "right" else [False] * 2 + [True] * 4
    valid = torch.tensor([short, [True] * 6])
    policy = "zero" if side == "left" else "error"
    with torch.no_grad():
        full, w_full = m(
            x, causal=True, key_valid=valid, empty_row=policy, return_weights=True
        )
        cache = m.new_cache(2, 6)
        steps = [
            m(
                x[:, :2],
                causal=True,
                key_valid=valid[:, :2],
                cache=cache,
                empty_row=policy,
            )
        ]
        for t in range(2, 6):
            steps.append(
                m(
                    x[:, t : t + 1],
                    causal=True,
                    key_valid=valid[:, : t + 1],
                    cache=cache,
                    empty_row=policy,
                )
            )
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL)
    if side == "left":
        assert (w_full[0, :, :2] == 0).all()
        assert (full[0, :2] == 0).all()  # no bias: a zero row stays zero through o_proj


def test_mqa_cache_keeps_one_head_and_costs_what_the_formula_says():
    m = layer(90, 32, 8, 1, rope=True)
    cache = m.new_cache(batch=3, capacity=16)
    assert cache.k.shape == (3, 1, 16, 4) and cache.v.shape == (3, 1, 16, 4)
    with torch.no_grad():
        m(randn(gen(91), 3, 5, 32), causal=True, cache=cache)
    assert cache.next_pos == 5
    per_token = kv_cache_bytes_per_token(1, 1, 4, cache.k.element_size())
    assert cache.nbytes == per_token * 3 * 16  # one layer, batch 3, capacity 16
    mha_cache = layer(92, 32, 8).new_cache(batch=3, capacity=16)
    assert mha_cache.nbytes == 8 * cache.nbytes  # H / H_kv times more


def _cache_state(cache: KVCache):
    return cache.next_pos, cache.owner, cache.k.clone(), cache.v.clone()


def _same_state(cache: KVCache, state) -> bool:
    next_pos, owner, k, v = state
    return (
        cache.next_pos == next_pos
        and cache.owner == owner
        and torch.equal(cache.k, k)
        and torch.equal(cache.v, v)
    )


def refusals(fill: int) -> list[tuple[dict, str]]:
    """Calls of 2 new tokens to a layer whose cache (capacity 8) holds `fill` tokens, each
    refused: (keyword arguments, anchored message)."""
    seen = fill + 2  # the keys the queries see: the cached and the new tokens
    first_blind = torch.ones(1, seen, dtype=torch.bool)
    first_blind[0, : fill + 1] = (
        False  # the first new query (and everything before it) is padding
    )
    return [
        (
            dict(key_valid=first_blind),
            "^"
            + re.escape(
                "causal and key_valid leaves 1 query row(s) with no key to attend to, at index [..., query] "
                "[[0, 0]]; fix the mask, or pass empty_row='zero' to give those rows a zero output"
            )
            + "$",
        ),
        (
            dict(key_valid=torch.ones(1, seen + 1, dtype=torch.bool)),
            rf"^key_valid must be \[B=1, T_k={seen}\] \(one flag per key the queries see",
        ),
        (
            dict(key_valid=torch.ones(1, seen, dtype=torch.long)),
            r"^key_valid must be a bool tensor",
        ),
        (
            dict(start_pos=fill + 1),
            rf"^start_pos={fill + 1} disagrees with cache\.next_pos={fill}: omit it",
        ),
        (
            dict(x=randn(gen(95), 1, 9, 16)),
            rf"^appending 9 token\(s\) at next_pos={fill} needs capacity >= {fill + 9}, the cache has capacity=8$",
        ),
        (
            dict(x=randn(gen(95), 2, 2, 16)),
            re.escape(
                "the cache holds [batch, n_kv_heads, d_head, dtype, device] = [1, 2, 4, torch.float64, "
                "device(type='cpu')], this call has [2, 2, 4, torch.float64, device(type='cpu')]"
            ),
        ),
        (
            dict(empty_row="skip"),
            r"^empty_row must be one of \['error', 'zero'\], got 'skip'$",
        ),
        (
            dict(causal=1),
            r"^causal must be a bool, got int; a padding mask goes in key_valid$",
        ),
    ]


@PATHS
@pytest.mark.parametrize("fill", [0, 3], ids=["empty", "filled"])
def test_a_refused_call_leaves_the_cache_untouched(fill, return_weights):
    """Every refusal comes before anything is projected or written: next_pos, the owner and
    the contents stay as they were."""
    m = layer(93, 16, 4, 2, rope=True)
    cache = m.new_cache(1, 8)
    with torch.no_grad():
        if fill:
            m(randn(gen(96), 1, fill, 16), causal=True, cache=cache)
        for kwargs, pattern in refusals(fill):
            kwargs = {"x": randn(gen(94), 1, 2, 16), "causal": True, **kwargs}
            before = _cache_state(cache)
            with pytest.raises((ValueError, TypeError), match=pattern):
                m(cache=cache, return_weights=return_weights, **kwargs)
            assert _same_state(cache, before), pattern
        assert cache.next_pos == fill
        m(
            randn(gen(94), 1, 2, 16), causal=True, cache=cache
        )  # and the cache still works
    assert cache.next_pos == fill + 2


def test_a_call_under_autograd_is_refused_before_the_cache_is_written():
    """The cache writes in place: decoding must run under torch.no_grad(). The layer refuses
    before it projects anything, so the cache is neither written nor bound."""
    m = layer(97, 16, 4, 2)
    cache = m.new_cache(1, 4)
    with torch.no_grad():
        m(randn(gen(98), 1, 1, 16), causal=True, cache=cache)
    before = _cache_state(cache)
    with pytest.raises(
        ValueError,
        match=r"^a KV cache is for inference: its in-place writes "
        r"cannot be differentiated through; decode under "
        r"torch\.no_grad\(\)$",
    ):
        m(randn(gen(99), 1, 1, 16), causal=True, cache=cache)
    assert _same_state(cache, before)
    fresh = m.new_cache(1, 4)
    with pytest.raises(ValueError, match=r"^a KV cache is for inference"):
        m(randn(gen(99), 1, 1, 16), causal=True, cache=fresh)
    assert fresh.owner is None and fresh.next_pos == 0


def test_input_that_overflows_is_not_refused_it_gives_nan_and_is_cached():
    """Values are not checked inside a layer: scores that overflow float32 give NaN (like
    PyTorch's layers), the call is not an error, and its keys are stored like any others."""
    m = layer(96, 16, 4, 2, rope=True).float()
    cache = m.new_cache(1, 8)
    with torch.no_grad():
        m(torch.randn(1, 2, 16, generator=gen(97)), causal=True, cache=cache)
        before_k = cache.k[:, :, :2].clone()
        out = m(torch.full((1, 1, 16), 1e38), causal=True, cache=cache)
    assert torch.isnan(out).all()
    assert cache.next_pos == 3 and torch.equal(cache.k[:, :, :2], before_k)
    assert (
        cache.k[:, :, 2].abs().max() > 1e36
    )  # stored as computed; q k^T overflows float32


def test_one_cache_serves_one_layer():
    a, b = layer(98, 16, 4, 2), layer(99, 16, 4, 2)
    cache = a.new_cache(1, 8)
    with torch.no_grad():
        a(randn(gen(100), 1, 2, 16), causal=True, cache=cache)
        with pytest.raises(
            ValueError,
            match=r"^the cache holds another layer's keys and values; give each layer",
        ):
            b(randn(gen(101), 1, 1, 16), causal=True, cache=cache)
        assert cache.next_pos == 2
        cache.reset()  # a new sequence may belong to another layer
        b(randn(gen(101), 1, 1, 16), causal=True, cache=cache)
    assert cache.next_pos == 1


# --------------------------------------------------------------------------------------
# Regression checks
# --------------------------------------------------------------------------------------


def test_attention_params_formula_equals_numel():
    for d, h, h_kv in [(32, 8, 8), (32, 8, 2), (32, 8, 1), (96, 8, 2), (64, 4, 4)]:
        for bias in (False, True):
            m = MultiHeadAttention(d, h, h_kv, bias=bias)
            assert attention_params(d, h, h_kv, bias) == sum(
                p.numel() for p in m.parameters()
            )
        assert attention_params(d, h, h_kv) == 2 * d * d * (1 + Fraction(h_kv, h))


def test_kv_bytes_per_token_equals_real_storage():
    n_layers, b, capacity = 3, 2, 5
    for h, h_kv, dtype in [
        (8, 8, torch.float16),
        (8, 2, torch.float32),
        (8, 1, torch.bfloat16),
    ]:
        m = MultiHeadAttention(32, h, h_kv).to(dtype)
        caches = [m.new_cache(b, capacity) for _ in range(n_layers)]
        stored = sum(c.nbytes for c in caches)
        per_token = kv_cache_bytes_per_token(
            n_layers, h_kv, m.d_head, torch.finfo(dtype).bits // 8
        )
        assert stored == per_token * b * capacity


def test_published_kv_cache_arithmetic():
    per_token = {
        c.name: kv_cache_bytes_per_token(c.n_layers, c.n_kv_heads, c.d_head, 2)
        for c in PUBLISHED_ATTENTION
    }
    assert per_token == {
        "GPT-2 small": 36_864,
        "Llama-2-7B": 524_288,
        "Llama-2-70B": 327_680,
        "Falcon-7B": 8_192,
    }
    assert per_token["Llama-2-7B"] * 4096 == 2 * 2**30  # 2 GiB per 4,096-token sequence
    assert per_token["Llama-2-70B"] * 4096 == 1.25 * 2**30
    llama70 = next(c for c in PUBLISHED_ATTENTION if c.name == "Llama-2-70B")
    assert (
        kv_cache_bytes_per_token(80, llama70.n_heads, 128, 2)
        == 8 * per_token["Llama-2-70B"]
    )


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("h_kv", [4, 2, 1])
def test_packed_qkv_equals_separate(bias, h_kv):
    """Numerically equivalent (one GEMM against three), not promised bit-identical: 1e-13."""
    m = layer(100 + h_kv, 32, 4, h_kv, bias=bias)
    x = randn(gen(101), 2, 5, 32)
    packed = pack_qkv(m)
    assert packed.weight.shape == ((4 + 2 * h_kv) * 8, 32)
    q, k, v = packed(x).split([32, 8 * h_kv, 8 * h_kv], dim=-1)
    for ours, theirs in ((q, m.q_proj(x)), (k, m.k_proj(x)), (v, m.v_proj(x))):
        torch.testing.assert_close(ours, theirs, atol=1e-13, rtol=0)

    twin = layer(102 + h_kv, 32, 4, h_kv, bias=bias)  # other weights ...
    load_packed_qkv(twin, packed.weight, packed.bias)  # ... replaced by the packed ones
    twin.o_proj.load_state_dict(m.o_proj.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(twin(x, causal=True), m(x, causal=True), **TOL)


def test_config_validation():
    with pytest.raises(
        ValueError,
        match=r"^d_model=100 must be divisible by n_heads=8: a floored d_head would attend "
        r"in 96 of 100 dims without any error$",
    ):
        MultiHeadAttention(100, 8)
    with pytest.raises(
        ValueError, match=r"^n_heads=8 must be divisible by n_kv_heads=3: "
    ):
        MultiHeadAttention(96, 8, 3)
    with pytest.raises(
        ValueError, match=r"^rope=True needs an even d_head \(pairs rotate\), got 3$"
    ):
        MultiHeadAttention(48, 16, rope=True)  # d_head = 3


def test_start_pos_and_cache_consistency():
    m = layer(110, 32, 4, rope=True)
    cache = m.new_cache(1, 8)
    g = gen(111)
    with torch.no_grad():
        m(randn(g, 1, 3, 32), causal=True, cache=cache)
        x2 = randn(g, 1, 1, 32)
        with pytest.raises(
            ValueError,
            match=r"^start_pos=0 disagrees with cache\.next_pos=3: omit it to continue "
            r"the cached sequence, or reset\(\) the cache to start a new one$",
        ):
            m(x2, causal=True, cache=cache, start_pos=0)
        assert cache.next_pos == 3
        explicit = m(x2, causal=True, cache=cache, start_pos=3)
    cache.reset()
    assert cache.next_pos == 0 and (cache.k == 0).all()
    # The explicit, agreeing start_pos computed the same step as the full forward's last row.
    first = randn(gen(111), 1, 3, 32)  # the same first three tokens as above
    with torch.no_grad():
        full = m(torch.cat([first, x2], dim=1), causal=True)
    torch.testing.assert_close(explicit, full[:, 3:], atol=1e-12, rtol=0)


def test_check_call_returns_the_start_and_the_number_of_keys_the_queries_see():
    """(start, T_k): the absolute position of x[:, 0], and how many keys its queries read."""
    m = layer(112, 32, 4, rope=True)
    x, memory = torch.zeros(2, 3, 32, dtype=F64), torch.zeros(2, 5, 32, dtype=F64)
    plain = dict(
        key_valid=None,
        cache=None,
        start_pos=None,
        positions=None,
        empty_row="error",
        return_weights=False,
    )

    def check(x, memory=None, *, causal=True, **changes):
        with torch.no_grad():  # a cache is refused under autograd
            return check_call(
                m if memory is None else layer(113, 32, 4),
                x,
                memory,
                causal=causal,
                **{**plain, **changes},
            )

    assert check(x) == (0, 3)
    assert check(x, start_pos=5) == (
        5,
        3,
    )  # RoPE positions 5..7, no cache: the keys are x's own
    assert check(x, memory, causal=False) == (0, 5)
    assert check(
        x, memory, causal=False, key_valid=torch.ones(2, 5, dtype=torch.bool)
    ) == (0, 5)
    cache = m.new_cache(2, 8)
    assert check(x, cache=cache) == (0, 3)
    with torch.no_grad():
        m(torch.zeros(2, 4, 32, dtype=F64), causal=True, cache=cache)
    assert check(x, cache=cache) == (4, 7) and check(x, cache=cache, start_pos=4) == (
        4,
        7,
    )
    with HostSyncs() as syncs:  # metadata only
        check(x, cache=cache, key_valid=torch.ones(2, 7, dtype=torch.bool))
    assert syncs.calls == []
    assert cache.next_pos == 4  # check_call writes nothing
    with pytest.raises(ValueError, match=r"^start_pos must be >= 0, got -2$"):
        check(x, start_pos=-2)
    with pytest.raises(
        ValueError, match=r"^start_pos=3 disagrees with cache\.next_pos=4"
    ):
        check(x, cache=cache, start_pos=3)


def test_cross_attention_guards_and_memory_is_read():
    x, memory = randn(gen(120), 1, 4, 32), randn(gen(121), 1, 3, 32)
    plain = layer(123, 32, 4)
    cache = plain.new_cache(1, 8)
    refused = {
        "rope": (layer(122, 32, 4, rope=True), {"causal": False}),
        "causal": (plain, {"causal": True}),
        "cache": (plain, {"causal": False, "cache": cache}),
        "start_pos": (plain, {"causal": False, "start_pos": 0}),
    }
    for option, (m, kwargs) in refused.items():
        with pytest.raises(ValueError, match="^" + CROSS[option] + "$") as info:
            m(x, memory, **kwargs)
        message = str(info.value)
        others = [o for o in CROSS if o != option]
        assert option in message and not any(o in message for o in others), message
    assert cache.next_pos == 0  # refused before anything was written
    out = plain(x, memory, causal=False)
    assert out.shape == (1, 4, 32)
    assert (
        max_err(out, plain(x, randn(gen(124), 1, 3, 32), causal=False)) > 1e-3
    )  # memory is read


@pytest.mark.parametrize(
    "b, t, h_kv",
    [(2, 5, 2), (3, 3, 1), (4, 4, 4)],
    ids=["B=n_kv", "B=T_q", "B=T_q=n_kv"],
)
def test_batch_size_never_collides_with_a_mask_axis(b, t, h_kv):
    """A batch equal to n_kv_heads or to T_q: batched padding masks equal per-sample runs."""
    m = layer(130 + b, 16, 4, h_kv, rope=True)
    x = randn(gen(131), b, t, 16)
    valid = torch.ones(b, t, dtype=torch.bool)
    for i in range(1, b):
        valid[i, t - i :] = False  # sample i has i padding keys at the end
    with torch.no_grad():
        batched = m(x, causal=True, key_valid=valid)
        one_by_one = torch.cat(
            [m(x[i : i + 1], causal=True, key_valid=valid[i : i + 1]) for i in range(b)]
        )
    torch.testing.assert_close(batched, one_by_one, **TOL)


def test_fully_masked_row_is_refused_by_default_and_finite_with_zero():
    m = layer(140, 32, 4)
    x = randn(gen(141), 2, 5, 32).requires_grad_()
    valid = torch.tensor(
        [[False, True, True, True, True], [True] * 5]
    )  # query 0 of sample 0 sees nothing
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "causal and key_valid leaves 1 query row(s) with no key to attend to, at index [..., query] [[0, 0]]; "
            "fix the mask, or pass empty_row='zero' to give those rows a zero output"
        )
        + "$",
    ):
        m(x, causal=True, key_valid=valid)
    with pytest.raises(ValueError, match=r"^causal and key_valid leaves 1 query row"):
        m(x, causal=True, key_valid=valid, return_weights=True)
    out = m(x, causal=True, key_valid=valid, empty_row="zero")
    assert torch.isfinite(out).all() and (out[0, 0] == 0).all()
    g = torch.autograd.grad(out.square().sum(), [x, *m.parameters()])
    assert all(torch.isfinite(t).all() for t in g)


def test_rope_tables_follow_the_layer_dtype():
    """The RoPE tables are buffers: they follow the layer to float32 and bfloat16, and the
    outputs stay within those dtypes' rounding of the float64 layer's."""
    m64 = layer(150, 32, 4, 2, rope=True)
    x = randn(gen(151), 2, 5, 32)
    with torch.no_grad():
        ref = m64(x, causal=True)
        for dtype, atol in [(torch.float32, 1e-5), (torch.bfloat16, 5e-2)]:
            m = layer(150, 32, 4, 2, rope=True).to(dtype)
            out = m(x.to(dtype), causal=True)
            assert out.dtype == dtype
            torch.testing.assert_close(out.double(), ref, atol=atol, rtol=0)


# --------------------------------------------------------------------------------------
# RoPE tables: computed once per layer, grown on demand, never saved
# --------------------------------------------------------------------------------------


def count_rope_cache_calls(monkeypatch) -> list[int]:
    """Record the length of every table a layer's RotaryEmbedding computes."""
    import literate.parts.positions as positions_module
    from literate.parts.positions import rope_cache

    lengths = []

    def spy(length, *args, **kwargs):
        lengths.append(length)
        return rope_cache(length, *args, **kwargs)

    monkeypatch.setattr(positions_module, "rope_cache", spy)
    return lengths


def test_rope_tables_are_computed_once_and_the_same_buffers_serve_shorter_calls(
    monkeypatch,
):
    from literate.parts.positions import rope_cache

    lengths = count_rope_cache_calls(monkeypatch)
    m = layer(190, 32, 4, 2, rope=True)  # float64, d_head 8
    assert (
        m.rope.cos.shape == m.rope.sin.shape == (0, 8)
    )  # nothing computed before a call
    cos, sin = m.rope.tables(6)
    assert (
        cos.shape == sin.shape == (6, 8) and cos.dtype == torch.float32
    )  # cast at use
    ref_cos, ref_sin = rope_cache(6, 8)
    assert torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)  # bit for bit
    for length in (6, 5, 1):
        again = m.rope.tables(length)
        assert (
            again[0] is cos and again[1] is sin
        )  # the same buffer objects, not a copy
    g = gen(191)
    with torch.no_grad():
        m(randn(g, 2, 6, 32), causal=True)
        m(randn(g, 2, 3, 32), causal=True)
        m(randn(g, 2, 2, 32), causal=True, start_pos=4)  # positions 4, 5
        cache = m.new_cache(2, 6)
        for t in (4, 1, 1):
            m(randn(g, 2, t, 32), causal=True, cache=cache)  # up to position 5
    assert lengths == [6] and m.rope.cos is cos


def test_rope_tables_grow_for_a_longer_input_equal_to_rope_cache_bit_for_bit(
    monkeypatch,
):
    from literate.parts.positions import rope_cache

    lengths = count_rope_cache_calls(monkeypatch)
    m = layer(192, 32, 4, 2, rope=True, rope_base=500_000.0)
    m.rope.tables(6)
    cos, sin = m.rope.tables(7)  # longer: regrown, to twice the old length
    assert cos.shape == (12, 8) and lengths == [6, 12]
    assert torch.equal(cos, rope_cache(12, 8, base=500_000.0, dtype=F64)[0])
    assert torch.equal(sin, rope_cache(12, 8, base=500_000.0, dtype=F64)[1])
    assert torch.equal(
        cos[:7], rope_cache(7, 8, base=500_000.0, dtype=F64)[0]
    )  # the prefix is the short table
    assert not torch.equal(
        cos, rope_cache(12, 8, dtype=F64)[0]
    )  # the layer's base, not the default
    assert m.rope.tables(12)[0] is cos and lengths == [
        6,
        12,
    ]  # doubling: no new table up to 12
    with torch.no_grad():
        m(
            randn(gen(193), 1, 30, 32), causal=True
        )  # more than twice: exactly what is asked
    assert m.rope.cos.shape[0] >= 30 and lengths == [6, 12, 30]
    assert torch.equal(m.rope.cos, rope_cache(30, 8, base=500_000.0, dtype=F64)[0])
    assert torch.equal(m.rope.sin, rope_cache(30, 8, base=500_000.0, dtype=F64)[1])


def test_rope_tables_are_buffers_outside_the_state_dict():
    m = layer(194, 32, 4, 2, rope=True)
    m.rope.tables(5)
    assert {"rope.cos", "rope.sin"} <= {name for name, _ in m.named_buffers()}
    assert sorted(m.state_dict()) == sorted(
        n for n, _ in m.named_parameters()
    )  # nothing else saved
    fresh = MultiHeadAttention(32, 4, 2, rope=True).double()
    fresh.load_state_dict(
        m.state_dict(), strict=True
    )  # a layer that never ran loads it
    m.load_state_dict(fresh.state_dict(), strict=True)
    assert m.rope.cos.shape == (5, 8) and fresh.rope.cos.shape == (0, 8)


def test_rope_tables_stay_float32_and_are_remade_after_a_dtype_change():
    """The tables hold float32 angles (as Hugging Face computes them) whatever the layer's
    dtype; apply_rope casts them at use. `.double()` or `.to(bfloat16)` converts the
    buffers; the next call then remakes them in float32, once."""
    from literate.parts.positions import rope_cache

    torch.manual_seed(195)
    m = MultiHeadAttention(32, 4, 2, rope=True)  # float32
    cos, _ = m.rope.tables(6)
    assert cos.dtype == torch.float32 and torch.equal(cos, rope_cache(6, 8)[0])
    for dtype in (F64, torch.bfloat16):
        m.to(dtype)
        assert m.rope.cos.dtype == m.rope.sin.dtype == dtype  # converted with the layer
        remade = m.rope.tables(6)
        assert remade[0].dtype == torch.float32 and torch.equal(
            remade[0], rope_cache(6, 8)[0]
        )
        assert torch.equal(remade[1], rope_cache(6, 8)[1])
        assert m.rope.tables(6)[0] is remade[0]  # remade once, then reused
    m.rope.tables(13)
    assert torch.equal(m.rope.cos, rope_cache(13, 8)[0])


def test_rope_tables_made_in_low_precision_are_recomputed_after_double():
    """BUG: a layer that ran once in bfloat16 keeps bfloat16-rounded cos/sin after .double()
    (the buffers are widened, their precision is not restored), and rope_tables never
    recomputes a table that is long enough: the float64 layer's output is then off by
    ~1.6e-4 from the same layer built in float64 (a sin/cos error of ~2e-3)."""
    from literate.parts.positions import rope_cache

    m = layer(196, 32, 4, 2, rope=True).to(torch.bfloat16)
    with torch.no_grad():
        m(torch.zeros(1, 6, 32, dtype=torch.bfloat16), causal=True)
    m.double()
    twin = layer(196, 32, 4, 2, rope=True)  # the same weights, never run in bfloat16
    twin.load_state_dict(m.state_dict())
    x = randn(gen(197), 1, 6, 32)
    with torch.no_grad():
        torch.testing.assert_close(m(x, causal=True), twin(x, causal=True), **TOL)
    assert torch.equal(m.rope.tables(6)[0][:6], rope_cache(6, 8, dtype=F64)[0])


@PATHS
def test_a_fresh_layer_decoding_token_by_token_grows_its_tables_and_equals_the_reference(
    return_weights,
):
    """The tables grow from 2 to 4, 8 and 16 positions during the decode; each step still
    equals the independent complex-number RoPE reference run on the whole sequence."""
    m = layer(198, 32, 4, 2, rope=True)
    x = randn(gen(199), 2, 9, 32)
    cache = m.new_cache(2, 9)
    with torch.no_grad():
        steps = [
            call(m, x[:, :2], causal=True, cache=cache, return_weights=return_weights)[
                0
            ]
        ]
        for t in range(2, 9):
            steps.append(
                call(
                    m,
                    x[:, t : t + 1],
                    causal=True,
                    cache=cache,
                    return_weights=return_weights,
                )[0]
            )
        ref, _ = reference_gqa(m, x, causal_allowed(9, 9), rope=True)
    assert m.rope.cos.shape[0] == 16
    torch.testing.assert_close(torch.cat(steps, dim=1), ref, **TOL)


@PATHS
def test_start_pos_without_a_cache_rotates_at_those_positions_like_the_reference(
    return_weights,
):
    m = layer(200, 32, 4, 1, rope=True)
    x = randn(gen(201), 2, 5, 32).requires_grad_()
    out, _ = call(m, x, causal=True, start_pos=37, return_weights=return_weights)
    ref, _ = reference_gqa(m, x, causal_allowed(5, 5), rope=True, start=37)
    torch.testing.assert_close(out, ref, **TOL)
    probe = randn(gen(202), 2, 5, 32)
    wrt = [x, *m.parameters()]
    for a, r in zip(grads(out, probe, wrt), grads(ref, probe, wrt)):
        torch.testing.assert_close(a, r, **TOL)
    # Causal scores depend on position differences only: shifting every position changes the
    # output only through the rounding of the float32 angles (~1e-8), which 1e-12 sees.
    assert (
        max_err(out, call(m, x, causal=True, return_weights=return_weights)[0]) > 1e-10
    )


# --------------------------------------------------------------------------------------
# Helpers: heads, masks, empty rows
# --------------------------------------------------------------------------------------


def test_split_and_merge_heads():
    x = randn(gen(160), 2, 5, 12)
    s = split_heads(x, 3)
    assert s.shape == (2, 3, 5, 4)
    assert s.data_ptr() == x.data_ptr()  # a view
    torch.testing.assert_close(s[:, 1], x[..., 4:8], atol=0, rtol=0)
    assert torch.equal(merge_heads(s), x)


def test_attention_allowed_places_each_mask_on_its_own_axes():
    valid = torch.tensor(
        [[True, True, False], [True, True, True], [False, True, True]]
    )  # B = T_q = T_k = 3
    allowed = attention_allowed(3, 3, causal=True, key_valid=valid)
    assert allowed.shape == (3, 1, 3, 3)
    for b in range(3):
        assert torch.equal(allowed[b, 0], causal_allowed(3, 3) & valid[b][None, :])
    assert attention_allowed(3, 3, causal=False) is None
    # one query after a cache reads every key: a causal mask that blocks nothing is no mask
    assert attention_allowed(1, 4, causal=True, query_offset=3) is None
    assert attention_allowed(2, 5, causal=True, query_offset=3).tolist() == [
        [[[True] * 4 + [False], [True] * 5]]
    ]
    assert attention_allowed(2, 3, causal=False, key_valid=valid[:2]).shape == (
        2,
        1,
        1,
        3,
    )


def test_empty_rows_pass_through_to_attention_with_zero_weights():
    m = layer(170, 16, 4, 2)
    x = randn(gen(171), 1, 3, 16)
    valid = torch.tensor([[False, True, True]])
    out, w = m(x, causal=True, key_valid=valid, empty_row="zero", return_weights=True)
    assert (w[0, :, 0] == 0).all() and (out[0, 0] == 0).all()
    torch.testing.assert_close(w[0, :, 1:].sum(-1), torch.ones(4, 2, dtype=F64), **TOL)


def test_grouped_attention_names_empty_rows_by_head():
    """BUG: the empty row is at [batch 0, head 3, query 1] of the mask the caller passed, but
    grouped_attention stacks each group's queries ([B, H_kv, G * T_q]) before calling
    chapter 1's attention, and the error names the stacked index: [[0, 1, 3]] (head 1,
    query 3, with T_q = 2). The zero policy is right."""
    q, k, v = (
        randn(gen(172), 1, 4, 2, 3),
        randn(gen(173), 1, 2, 3, 3),
        randn(gen(174), 1, 2, 3, 3),
    )
    allowed = torch.ones(1, 4, 2, 3, dtype=torch.bool)
    allowed[0, 3, 1] = False
    r = grouped_attention(q, k, v, allowed, empty_row="zero")
    assert (
        r.empty_rows[0, 3, 1]
        and r.empty_rows.sum() == 1
        and (r.output[0, 3, 1] == 0).all()
    )
    with pytest.raises(
        ValueError,
        match=r"^allowed leaves 1 query row\(s\) with no key to attend to, at index "
        r"\[\.\.\., query\] \[\[0, 3, 1\]\]",
    ):
        grouped_attention(q, k, v, allowed)


def test_grouped_attention_names_a_mask_that_does_not_broadcast():
    """BUG: `allowed.expand(B, H, T_q, T_k)` runs before chapter 1's check_qkv could name
    the mask: a [3, 2] mask for [1, 4, 2, 3] scores raises torch's own RuntimeError ("The
    expanded size of the tensor (3) must match ...") instead of a ValueError naming allowed."""
    q, k = torch.zeros(1, 4, 2, 3, dtype=F64), torch.zeros(1, 2, 3, 3, dtype=F64)
    with pytest.raises(ValueError, match=r"^allowed \(3, 2\) must broadcast to"):
        grouped_attention(q, k, k, torch.ones(3, 2, dtype=torch.bool))


# --------------------------------------------------------------------------------------
# Every error path
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((0, 2), {}, ValueError, r"^d_model must be >= 1, got 0$"),
        ((True, 2), {}, TypeError, r"^d_model must be an int, got bool$"),
        ((32.0, 2), {}, TypeError, r"^d_model must be an int, got float$"),
        ((32, 0), {}, ValueError, r"^n_heads must be >= 1, got 0$"),
        ((32, False), {}, TypeError, r"^n_heads must be an int, got bool$"),
        ((32, 4, 0), {}, ValueError, r"^n_kv_heads must be >= 1, got 0$"),
        ((32, 4, True), {}, TypeError, r"^n_kv_heads must be an int, got bool$"),
        (
            (32, 4, 8),
            {},
            ValueError,
            r"^n_heads=4 must be divisible by n_kv_heads=8: every key/value head serves "
            r"the same number of query heads$",
        ),
        (
            (30, 4),
            {},
            ValueError,
            r"^d_model=30 must be divisible by n_heads=4: a floored d_head would attend in 28 "
            r"of 30 dims without any error$",
        ),
        ((32, 4), {"bias": 1}, TypeError, r"^bias must be a bool, got int$"),
        ((32, 4), {"rope": "yes"}, TypeError, r"^rope must be a bool, got str$"),
        (
            (24, 8),
            {"rope": True},
            ValueError,
            r"^rope=True needs an even d_head \(pairs rotate\), got 3$",
        ),
        (
            (32, 4),
            {"rope": True, "rope_base": 1.0},
            ValueError,
            r"^rope_base must be > 1 \(frequencies base\^\(-2i/d\) must decrease\), got 1\.0$",
        ),
        (
            (32, 4),
            {"rope": True, "rope_base": -5.0},
            ValueError,
            r"^rope_base must be finite and > 0, got -5\.0$",
        ),
        (
            (32, 4),
            {"rope": True, "rope_base": True},
            TypeError,
            r"^rope_base must be a real number, got bool$",
        ),
    ],
)
def test_constructor_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        MultiHeadAttention(*args, **kwargs)
    assert type(info.value) is error


CROSS = {  # one refusal per option, each naming its own option and no other
    "rope": re.escape(
        "cross-attention (memory given) on a layer built with rope=True: the target and the source "
        "are two sequences and one rotation offset cannot place both; build the cross-attention "
        "layer with rope=False"
    ),
    "causal": re.escape(
        "cross-attention (memory given) takes causal=False: no order runs between the target and "
        "the source, every query reads the whole source"
    ),
    "cache": re.escape(
        "cross-attention (memory given) takes no cache: the memory is projected once per source, not "
        "appended at each step"
    ),
    "start_pos": re.escape(
        "cross-attention (memory given) takes no start_pos or positions: the queries' positions "
        "do not enter it"
    ),
}
CACHE_HOLDS = re.escape("the cache holds [batch, n_kv_heads, d_head, dtype, device] = ")
KEY_VALID = (
    r"^key_valid must be \[B=2, T_k={}\] \(one flag per key the queries see: the memory's S, or the cached "
    r"plus new tokens\), got {}$"
)


def forward_error_cases():
    x = torch.zeros(2, 3, 16, dtype=F64)
    mem = torch.zeros(2, 4, 16, dtype=F64)
    ok_valid = torch.ones(2, 3, dtype=torch.bool)
    return [
        (
            "x-not-tensor",
            (x.tolist(),),
            {"causal": True},
            TypeError,
            r"^x must be a floating-point tensor, got list$",
        ),
        (
            "x-int",
            (x.long(),),
            {"causal": True},
            TypeError,
            r"^x must be a floating-point tensor, got torch\.int64$",
        ),
        (
            "x-2d",
            (x[0],),
            {"causal": True},
            ValueError,
            r"^x must be \[B, T, d_model=16\], got \(3, 16\)$",
        ),
        (
            "x-4d",
            (x[None],),
            {"causal": True},
            ValueError,
            r"^x must be \[B, T, d_model=16\], got \(1, 2, 3, 16\)$",
        ),
        (
            "x-width",
            (torch.zeros(2, 3, 8, dtype=F64),),
            {"causal": True},
            ValueError,
            r"^x must have last axis 16, got \(2, 3, 8\)$",
        ),
        (
            "x-dtype",
            (x.float(),),
            {"causal": True},
            TypeError,
            r"^x is torch\.float32, the layer's parameters torch\.float64$",
        ),
        (
            "x-device",
            (x.to("meta"),),
            {"causal": True},
            ValueError,
            r"^x is on meta, the layer on cpu$",
        ),
        (
            "mem-device",
            (x, mem.to("meta")),
            {"causal": False},
            ValueError,
            r"^memory is on meta, the layer on cpu$",
        ),
        (
            "causal-mask",
            (x,),
            {"causal": causal_allowed(3, 3)},
            TypeError,
            r"^causal must be a bool, got Tensor; a padding mask goes in key_valid$",
        ),
        (
            "causal-int",
            (x,),
            {"causal": 1},
            TypeError,
            r"^causal must be a bool, got int; a padding mask goes in key_valid$",
        ),
        (
            "weights-flag",
            (x,),
            {"causal": True, "return_weights": 1},
            TypeError,
            r"^return_weights must be a bool, got int$",
        ),
        (
            "empty-row",
            (x,),
            {"causal": True, "empty_row": "nan"},
            ValueError,
            r"^empty_row must be one of \['error', 'zero'\], got 'nan'$",
        ),
        (
            "mem-2d",
            (x, mem[0]),
            {"causal": False},
            ValueError,
            r"^memory must be \[B=2, S >= 1, d\], got \(4, 16\)$",
        ),
        (
            "mem-empty",
            (x, mem[:, :0]),
            {"causal": False},
            ValueError,
            r"^memory must be \[B=2, S >= 1, d\], got \(2, 0, 16\)$",
        ),
        (
            "mem-width",
            (x, torch.zeros(2, 4, 8, dtype=F64)),
            {"causal": False},
            ValueError,
            r"^memory must have last axis 16, got \(2, 4, 8\)$",
        ),
        (
            "mem-batch",
            (x, mem[:1]),
            {"causal": False},
            ValueError,
            r"^memory must be \[B=2, S >= 1, d\], got \(1, 4, 16\)$",
        ),
        (
            "mem-dtype",
            (x, mem.float()),
            {"causal": False},
            TypeError,
            r"^memory is torch\.float32, the layer's parameters torch\.float64$",
        ),
        (
            "mem-int",
            (x, mem.long()),
            {"causal": False},
            TypeError,
            r"^memory must be a floating-point tensor, got torch\.int64$",
        ),
        (
            "mem-causal",
            (x, mem),
            {"causal": True},
            ValueError,
            "^" + CROSS["causal"] + "$",
        ),
        (
            "mem-start",
            (x, mem),
            {"causal": False, "start_pos": 0},
            ValueError,
            "^" + CROSS["start_pos"] + "$",
        ),
        (
            "mem-cache",
            (x, mem),
            {"causal": False, "cache": KVCache(2, 2, 8, 4, dtype=F64)},
            ValueError,
            "^" + CROSS["cache"] + "$",
        ),
        (
            "cache-type",
            (x,),
            {"causal": True, "cache": object()},
            TypeError,
            r"^cache must be a KVCache, got object$",
        ),
        (
            "cache-heads",
            (x,),
            {"causal": True, "cache": KVCache(2, 4, 8, 4, dtype=F64)},
            ValueError,
            "^"
            + CACHE_HOLDS
            + re.escape(
                "[2, 4, 4, torch.float64, device(type='cpu')], this call has "
                "[2, 2, 4, torch.float64, device(type='cpu')]; make a cache"
            ),
        ),
        (
            "cache-batch",
            (x,),
            {"causal": True, "cache": KVCache(1, 2, 8, 4, dtype=F64)},
            ValueError,
            "^"
            + CACHE_HOLDS
            + re.escape(
                "[1, 2, 4, torch.float64, device(type='cpu')], this call has [2, "
            ),
        ),
        (
            "cache-dtype",
            (x,),
            {"causal": True, "cache": KVCache(2, 2, 8, 4)},
            ValueError,
            "^"
            + CACHE_HOLDS
            + re.escape(
                "[2, 2, 4, torch.float32, device(type='cpu')], this call has "
                "[2, 2, 4, torch.float64, "
            ),
        ),
        (
            "cache-width",
            (x,),
            {"causal": True, "cache": KVCache(2, 2, 8, 8, dtype=F64)},
            ValueError,
            "^"
            + CACHE_HOLDS
            + re.escape(
                "[2, 2, 8, torch.float64, device(type='cpu')], this call has [2, 2, 4, "
            ),
        ),
        (
            "cache-full",
            (x,),
            {"causal": True, "cache": KVCache(2, 2, 2, 4, dtype=F64)},
            ValueError,
            r"^appending 3 token\(s\) at next_pos=0 needs capacity >= 3, the cache has capacity=2$",
        ),
        (
            "start-neg",
            (x,),
            {"causal": True, "start_pos": -1},
            ValueError,
            r"^start_pos must be >= 0, got -1$",
        ),
        (
            "start-bool",
            (x,),
            {"causal": True, "start_pos": True},
            TypeError,
            r"^start_pos must be an int, got bool$",
        ),
        (
            "start-cache",
            (x,),
            {"causal": True, "start_pos": 0, "cache": _filled_cache()},
            ValueError,
            r"^start_pos=0 disagrees with cache\.next_pos=2: omit it",
        ),
        (
            "kv-int",
            (x,),
            {"causal": True, "key_valid": ok_valid.long()},
            TypeError,
            r"^key_valid must be a bool tensor \(True = may attend\), got torch\.int64; convert a 0/1 mask with "
            r"`mask == 1`$",
        ),
        (
            "kv-shape",
            (x,),
            {"causal": True, "key_valid": ok_valid[0]},
            ValueError,
            KEY_VALID.format(3, r"\(3,\)"),
        ),
        (
            "kv-cross",
            (x, mem),
            {"causal": False, "key_valid": ok_valid},
            ValueError,
            KEY_VALID.format(4, r"\(2, 3\)"),
        ),
        (
            "kv-cache",
            (x,),
            {"causal": True, "key_valid": ok_valid, "cache": _filled_cache()},
            ValueError,
            KEY_VALID.format(5, r"\(2, 3\)"),
        ),
        (
            "kv-device",
            (x,),
            {"causal": True, "key_valid": ok_valid.to("meta")},
            ValueError,
            r"^key_valid is on meta, x on cpu$",
        ),
        (
            "empty",
            (x,),
            {"causal": True, "key_valid": torch.tensor([[False, True, True]] * 2)},
            ValueError,
            r"^causal and key_valid leaves 2 query row\(s\) with no key to attend to, at index \[\.\.\., query\] "
            r"\[\[0, 0\], \[1, 0\]\]; fix the mask, or pass empty_row='zero' to give those rows a zero output$",
        ),
    ]


def _filled_cache() -> KVCache:
    cache = KVCache(2, 2, 8, 4, dtype=F64)
    cache.append(torch.zeros(2, 2, 2, 4, dtype=F64), torch.zeros(2, 2, 2, 4, dtype=F64))
    return cache


@PATHS
@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [pytest.param(*case[1:], id=case[0]) for case in forward_error_cases()],
)
def test_forward_errors(args, kwargs, error, match, return_weights):
    m = layer(180, 16, 4, 2)
    if "return_weights" not in kwargs:
        kwargs = {**kwargs, "return_weights": return_weights}
    with pytest.raises(error, match=match) as info:
        m(*args, **kwargs)
    assert type(info.value) is error


@PATHS
def test_a_layer_given_nan_returns_nan_in_the_rows_that_read_it_and_does_not_raise(
    return_weights,
):
    """No value is checked inside the layer: a NaN token poisons the queries that attend to
    it (itself and later ones, under a causal mask) and nothing else; the other sequence of
    the batch is exactly what it is alone."""
    m = layer(181, 16, 4, 2, rope=True)
    x = randn(gen(182), 2, 5, 16)
    poisoned = x.clone()
    poisoned[0, 2, 3] = float("nan")
    with torch.no_grad():
        out, _ = call(m, poisoned, causal=True, return_weights=return_weights)
        alone, _ = call(m, x[1:], causal=True, return_weights=return_weights)
    assert torch.isnan(out[0, 2:]).all()
    torch.testing.assert_close(out[1:], alone, **TOL)


def test_forward_errors_cross_rope_and_missing_causal():
    x = torch.zeros(1, 2, 16, dtype=F64)
    with pytest.raises(ValueError, match="^" + CROSS["rope"] + "$"):
        layer(181, 16, 4, rope=True)(x, x, causal=False)
    with pytest.raises(
        TypeError, match=r"missing 1 required keyword-only argument: 'causal'$"
    ):
        layer(182, 16, 4)(
            x
        )  # causal has no default: forgetting it is an error, not full attention


def test_helper_errors():
    x = torch.zeros(1, 2, 12, dtype=F64)
    with pytest.raises(
        ValueError,
        match=r"^x must be \[B, T, n_heads \* d_head\], n_heads=5, got \(1, 2, 12\)$",
    ):
        split_heads(x, 5)
    with pytest.raises(
        ValueError,
        match=r"^x must be \[B, T, n_heads \* d_head\], n_heads=3, got \(2, 12\)$",
    ):
        split_heads(x[0], 3)
    with pytest.raises(TypeError, match=r"^n_heads must be an int, got float$"):
        split_heads(x, 3.0)
    with pytest.raises(ValueError, match=r"^x must have 4 axes, got \(1, 2, 12\)$"):
        merge_heads(x)
    q, k = torch.zeros(1, 4, 2, 3, dtype=F64), torch.zeros(1, 3, 2, 3, dtype=F64)
    shapes = r"^need q \[B, H, T_q, d\], k \[B, H_kv, T_k, d\], v \[B, H_kv, T_k, d_v\] with H % H_kv == 0, got "
    with pytest.raises(
        ValueError, match=shapes + r"\(1, 4, 2, 3\), \(1, 3, 2, 3\), \(1, 3, 2, 3\)$"
    ):
        grouped_attention(q, k, k)
    with pytest.raises(ValueError, match=r"^q must have 4 axes, got \(4, 2, 3\)$"):
        grouped_attention(q[0], k, k)
    with pytest.raises(
        ValueError, match=shapes + r"\(1, 4, 2, 3\), \(2, 2, 2, 3\), \(1, 2, 2, 3\)$"
    ):
        grouped_attention(q, q[:, :2].expand(2, 2, 2, 3), q[:, :2])  # batch 2 != 1
    with pytest.raises(
        TypeError,
        match=r"^allowed must be a bool tensor \(True = may attend\), got torch\.float32",
    ):
        grouped_attention(q, q[:, :2], q[:, :2], torch.ones(2, 2))
    with pytest.raises(
        ValueError, match=r"^empty_row must be one of \['error', 'zero'\], got 'skip'$"
    ):
        grouped_attention(q, q[:, :2], q[:, :2], empty_row="skip")


def test_packed_qkv_errors():
    m = MultiHeadAttention(16, 4, 2, bias=True)
    with pytest.raises(
        TypeError, match=r"^attn must be a MultiHeadAttention, got Linear$"
    ):
        pack_qkv(nn.Linear(2, 2))
    with pytest.raises(
        TypeError, match=r"^attn must be a MultiHeadAttention, got Linear$"
    ):
        load_packed_qkv(nn.Linear(2, 2), torch.zeros(1, 1))
    with pytest.raises(
        ValueError,
        match=r"^weight must be \[32, 16\] \(q; k; v rows\), got \(48, 16\)$",
    ):
        load_packed_qkv(m, torch.zeros(48, 16), torch.zeros(48))
    with pytest.raises(
        ValueError,
        match=r"^bias must be given exactly when the layer was built with bias=True$",
    ):
        load_packed_qkv(m, torch.zeros(32, 16))
    with pytest.raises(ValueError, match=r"^bias must be \[32\], got \(31,\)$"):
        load_packed_qkv(m, torch.zeros(32, 16), torch.zeros(31))
    with pytest.raises(
        ValueError,
        match=r"^bias must be given exactly when the layer was built with bias=True$",
    ):
        load_packed_qkv(MultiHeadAttention(16, 4), torch.zeros(48, 16), torch.zeros(48))
    with pytest.raises(
        TypeError, match=r"^weight must be a floating-point tensor, got list$"
    ):
        load_packed_qkv(m, [[0.0]])


def test_params_errors():
    with pytest.raises(ValueError, match=r"^d_model=30 must be divisible by n_heads=4"):
        attention_params(30, 4, 4)
    with pytest.raises(
        ValueError, match=r"^n_heads=4 must be divisible by n_kv_heads=3"
    ):
        attention_params(32, 4, 3)
    with pytest.raises(TypeError, match=r"^n_kv_heads must be an int, got bool$"):
        attention_params(32, 4, True)
    with pytest.raises(TypeError, match=r"^bias must be a bool, got int$"):
        attention_params(32, 4, 4, bias=1)
    with pytest.raises(ValueError, match=r"^bytes_per_value must be >= 1, got 0$"):
        kv_cache_bytes_per_token(1, 1, 64, 0)
    with pytest.raises(TypeError, match=r"^n_layers must be an int, got bool$"):
        kv_cache_bytes_per_token(True, 1, 64, 2)


def test_helpers_refuse_what_they_cannot_use():
    with pytest.raises(
        TypeError, match=r"^x must be a floating-point tensor, got list$"
    ):
        split_heads([1.0, 2.0], 2)
    with pytest.raises(
        TypeError, match=r"^x must be a floating-point tensor, got list$"
    ):
        merge_heads([1.0])
    with pytest.raises(TypeError, match=r"^causal must be a bool, got Tensor$"):
        attention_allowed(2, 2, causal=torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(
        ValueError, match=r"^key_valid must be \[B, T_k=3\], got \(2, 4\)$"
    ):
        attention_allowed(
            2, 3, causal=True, key_valid=torch.ones(2, 4, dtype=torch.bool)
        )
    with pytest.raises(TypeError, match=r"^key_valid must be a bool tensor"):
        attention_allowed(2, 3, causal=True, key_valid=torch.ones(2, 3))


def test_the_qk_norm_placement_is_said_never_guessed():
    """QK-norm goes where the caller says (`qk_norm`), and norms that do not fit that
    place are refused, naming both widths; no placement is read from a shape."""
    from literate.parts.norms import RMSNorm

    d, h, h_kv = 32, 4, 2  # d_head 8; projections 32 and 16 wide
    per_head = MultiHeadAttention(
        d, h, h_kv, q_norm=RMSNorm(8), k_norm=RMSNorm(8), qk_norm="head"
    )
    whole = MultiHeadAttention(
        d, h, h_kv, q_norm=RMSNorm(32), k_norm=RMSNorm(16), qk_norm="projection"
    )
    assert (per_head.qk_norm, whole.qk_norm, MultiHeadAttention(d, h).qk_norm) == (
        "head",
        "projection",
        None,
    )
    with pytest.raises(ValueError, match="qk_norm is None: say where they go"):
        MultiHeadAttention(d, h, h_kv, q_norm=RMSNorm(8), k_norm=RMSNorm(8))
    with pytest.raises(
        ValueError,
        match=r"qk_norm='projection' needs q_norm and k_norm "
        r"of widths \(32, 16\), got \(8, 8\)",
    ):
        MultiHeadAttention(
            d, h, h_kv, q_norm=RMSNorm(8), k_norm=RMSNorm(8), qk_norm="projection"
        )
    with pytest.raises(
        ValueError,
        match=r"qk_norm='head' needs q_norm and k_norm of "
        r"widths \(8, 8\), got \(32, 16\)",
    ):
        MultiHeadAttention(
            d, h, h_kv, q_norm=RMSNorm(32), k_norm=RMSNorm(16), qk_norm="head"
        )
    with pytest.raises(TypeError, match="qk_norm='head' needs q_norm and k_norm, both"):
        MultiHeadAttention(d, h, h_kv, q_norm=RMSNorm(8), qk_norm="head")
    with pytest.raises(
        ValueError, match=r"qk_norm must be one of \['head', 'projection'\]"
    ):
        MultiHeadAttention(
            d, h, h_kv, q_norm=RMSNorm(8), k_norm=RMSNorm(8), qk_norm="heads"
        )
