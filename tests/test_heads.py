"""Tests for `literate.heads` (and the attention half of `literate.params`).

What is checked, and against what, in float64 with atol 1e-12 and rtol 0 unless stated:

- MHA equals `torch.nn.MultiheadAttention(batch_first=True, dropout=0)` with its weights
  copied in (its `in_proj_weight` is q; k; v stacked), with and without bias, with causal
  and padding masks (its masks block where True: we pass `~allowed`), per-head weights
  (`average_attn_weights=False`), self- and cross-attention (T != S): outputs and the
  gradients w.r.t. the inputs and every parameter;
- MHA, GQA and MQA with RoPE equal PyTorch's fused `F.scaled_dot_product_attention(...,
  enable_gqa=True)` run on the same projections, and an independent reference that copies
  K/V with `repeat_interleave` and rotates with complex numbers (seed 003's
  `reference_gqa`), forward and backward;
- the KV cache: token-by-token and chunked decode equal the full causal forward (RoPE,
  GQA, padding on either side), the cache holds n_kv heads whose contents equal
  independently projected and rotated K/V, and the K/V read by attention are views of the
  cache (never copied to n_heads);
- the seed's regression checks D05, D06 (attention), D07, D10, D11, D12, D13, D15;
- every error path.

Every random tensor comes from a fixed seed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import literate.heads as heads_module
from literate.attention import causal_allowed, padding_allowed
from literate.cache import KVCache
from literate.heads import (
    MultiHeadAttention,
    attention_allowed,
    grouped_attention,
    load_packed_qkv,
    merge_heads,
    pack_qkv,
    resolve_start,
    split_heads,
)
from literate.params import PUBLISHED_ATTENTION, attention_params, kv_cache_bytes_per_token

F64 = torch.float64
TOL = dict(atol=1e-12, rtol=0)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator, *shape: int, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(shape, generator=g, dtype=F64).to(dtype)


def layer(seed: int, d: int, h: int, h_kv: int | None = None, **kwargs) -> MultiHeadAttention:
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


def grads(out: torch.Tensor, probe: torch.Tensor, wrt: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return torch.autograd.grad((out * probe).sum(), wrt)


# --------------------------------------------------------------------------------------
# Independent references (no code shared with literate.heads)
# --------------------------------------------------------------------------------------


def rope_reference(x: torch.Tensor, start: int, base: float = 10_000.0) -> torch.Tensor:
    """Rotate-half RoPE written with complex numbers: pair (i, i + d/2) is x_i + j x_{i+d/2},
    multiplied by exp(j pos theta_i). Angles in float32, as Hugging Face computes them."""
    d = x.shape[-1]
    half = d // 2
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))  # float32
    pos = torch.arange(start, start + x.shape[-2]).float()
    angle = torch.outer(pos, inv_freq)  # [T, d/2], float32
    turn = torch.complex(angle.cos().to(x.dtype), angle.sin().to(x.dtype))
    z = torch.complex(x[..., :half], x[..., half:]) * turn
    return torch.cat([z.real, z.imag], dim=-1)


def reference_gqa(m: MultiHeadAttention, x: torch.Tensor, allowed: torch.Tensor, *, rope: bool,
                  start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Seed 003's reference: project, rotate, physically repeat_interleave K/V up to H heads,
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


def fused_gqa(m: MultiHeadAttention, x: torch.Tensor, allowed: torch.Tensor, *, rope: bool) -> torch.Tensor:
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


def torch_mha_with_our_weights(ours: MultiHeadAttention, bias: bool, seed: int) -> nn.MultiheadAttention:
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(ours.d_model, ours.n_heads, bias=bias, batch_first=True, dropout=0.0, dtype=F64)
    with torch.no_grad():
        if bias:
            ref.in_proj_bias.normal_()
            ref.out_proj.bias.normal_()
    load_packed_qkv(ours, ref.in_proj_weight.detach(), ref.in_proj_bias.detach() if bias else None)
    with torch.no_grad():
        ours.o_proj.weight.copy_(ref.out_proj.weight)
        if bias:
            ours.o_proj.bias.copy_(ref.out_proj.bias)
    return ref


def our_param_grads_as_torch(ours: MultiHeadAttention, g: tuple[torch.Tensor, ...], bias: bool) -> list[torch.Tensor]:
    """Our gradients, laid out as nn.MultiheadAttention's parameters (q; k; v stacked)."""
    names = [n for n, _ in ours.named_parameters()]
    by_name = dict(zip(names, g))
    out = [torch.cat([by_name[f"{p}_proj.weight"] for p in "qkv"]), by_name["o_proj.weight"]]
    if bias:
        out += [torch.cat([by_name[f"{p}_proj.bias"] for p in "qkv"]), by_name["o_proj.bias"]]
    return out


def torch_param_list(ref: nn.MultiheadAttention, bias: bool) -> list[torch.Tensor]:
    out = [ref.in_proj_weight, ref.out_proj.weight]
    if bias:
        out += [ref.in_proj_bias, ref.out_proj.bias]
    return out


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_mha_equals_torch_multihead_attention(bias, causal):
    d, h, b, t = 16, 4, 3, 6
    ours = layer(10, d, h, bias=bias)
    ref = torch_mha_with_our_weights(ours, bias, seed=11)
    g = gen(12)
    x = randn(g, b, t, d).requires_grad_()
    valid = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] * 5 + [False]])

    out, weights = ours(x, causal=causal, key_valid=valid, return_weights=True)
    ref_out, ref_weights = ref(x, x, x, key_padding_mask=~valid, need_weights=True, average_attn_weights=False,
                               attn_mask=~causal_allowed(t, t) if causal else None)
    torch.testing.assert_close(out, ref_out, **TOL)
    torch.testing.assert_close(weights, ref_weights, **TOL)  # [B, H, T_q, T_k], per head

    probe = randn(g, b, t, d)
    ours_g = grads(out, probe, [x, *ours.parameters()])
    ref_g = grads(ref_out, probe, [x, *torch_param_list(ref, bias)])
    torch.testing.assert_close(ours_g[0], ref_g[0], **TOL)  # w.r.t. the input
    for a, r in zip(our_param_grads_as_torch(ours, ours_g[1:], bias), ref_g[1:]):
        torch.testing.assert_close(a, r, **TOL)  # w.r.t. every parameter


@pytest.mark.parametrize("bias", [False, True])
def test_cross_attention_equals_torch_multihead_attention(bias):
    d, h, b, t, s = 16, 4, 2, 3, 7  # T != S
    ours = layer(20, d, h, bias=bias)
    ref = torch_mha_with_our_weights(ours, bias, seed=21)
    g = gen(22)
    x = randn(g, b, t, d).requires_grad_()
    memory = randn(g, b, s, d).requires_grad_()
    source_valid = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])

    out, weights = ours(x, memory, causal=False, key_valid=source_valid, return_weights=True)
    ref_out, ref_weights = ref(x, memory, memory, key_padding_mask=~source_valid, need_weights=True,
                               average_attn_weights=False)
    assert out.shape == (b, t, d) and weights.shape == (b, h, t, s)
    torch.testing.assert_close(out, ref_out, **TOL)
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


@pytest.mark.parametrize("h_kv", [8, 2, 1], ids=["mha", "gqa-2", "mqa"])
@pytest.mark.parametrize("rope", [False, True])
def test_matches_fused_sdpa_with_enable_gqa(h_kv, rope):
    m = layer(30 + h_kv, 32, 8, h_kv, bias=True, rope=rope)
    g = gen(31)
    x = randn(g, 2, 6, 32).requires_grad_()
    allowed = causal_allowed(6, 6) & padding_allowed(VALID_6)  # [B, 1, T, T]
    out = m(x, causal=True, key_valid=VALID_6)
    fused = fused_gqa(m, x, allowed, rope=rope)
    torch.testing.assert_close(out, fused, **TOL)
    probe = randn(g, 2, 6, 32)
    wrt = [x, *m.parameters()]
    for a, r in zip(grads(out, probe, wrt), grads(fused, probe, wrt)):
        torch.testing.assert_close(a, r, **TOL)


@pytest.mark.parametrize("h_kv", [8, 2, 1], ids=["mha", "gqa-2", "mqa"])
def test_matches_repeat_interleave_reference_with_rope(h_kv):
    """Seed 003, D05: MHA is the n_kv = n_heads case; a real grouping (group of 4) and MQA
    are checked against a reference that physically copies K/V; MQA's per-head outputs
    are distinct (the group axis is broadcast per head, not collapsed)."""
    m = layer(40 + h_kv, 32, 8, h_kv, rope=True)
    g = gen(41)
    x = randn(g, 2, 5, 32).requires_grad_()
    allowed = causal_allowed(5, 5)
    out = m(x, causal=True)
    ref, per_head_ref = reference_gqa(m, x, allowed, rope=True)
    torch.testing.assert_close(out, ref, **TOL)
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


def apply_rope_for(m: MultiHeadAttention, x: torch.Tensor, start: int = 0) -> torch.Tensor:
    from literate.positions import apply_rope, rope_cache

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
    interleaved = F.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
    tiled = F.scaled_dot_product_attention(q, k.repeat(1, 4, 1, 1), v.repeat(1, 4, 1, 1))
    torch.testing.assert_close(ours, interleaved, **TOL)
    assert max_err(ours, tiled) > 1e-2


def test_grouped_attention_matches_fused_with_per_head_mask():
    g = gen(52)
    q, k, v = randn(g, 2, 6, 3, 4), randn(g, 2, 2, 5, 4), randn(g, 2, 2, 5, 7)  # d_v != d_k
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


def test_gqa_hands_the_cache_itself_to_the_kernel(monkeypatch):
    """What grouped attention hands to the attention kernel is the cache's own storage, with
    the G query heads of each group stacked along the query axis; no repeat_interleave
    anywhere in a forward."""
    seen = {}
    original = heads_module.scaled_dot_product_attention

    def spy(q, k, v, allowed=None, **kwargs):
        seen.update(q=q, k=k, v=v)
        return original(q, k, v, allowed, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError("repeat_interleave copies K/V")

    monkeypatch.setattr(heads_module, "scaled_dot_product_attention", spy)
    monkeypatch.setattr(torch, "repeat_interleave", forbidden)
    monkeypatch.setattr(torch.Tensor, "repeat_interleave", forbidden)

    m = layer(60, 32, 8, 2, rope=True)
    cache = m.new_cache(2, 8)
    g = gen(61)
    with torch.no_grad():
        m(randn(g, 2, 3, 32), causal=True, cache=cache)
        m(randn(g, 2, 1, 32), causal=True, cache=cache)
    k, v = seen["k"], seen["v"]
    assert k.shape == (2, 2, 4, 4) and v.shape == (2, 2, 4, 4)  # [B, H_kv, T_k, d_head]
    assert seen["q"].shape == (2, 2, 4 * 1, 4)  # [B, H_kv, G * T_q, d_head]
    assert k.untyped_storage().data_ptr() == cache.k.untyped_storage().data_ptr()
    assert v.untyped_storage().data_ptr() == cache.v.untyped_storage().data_ptr()


def largest_copy(fn) -> int:
    """The largest tensor (in elements) that any clone/copy/contiguous inside `fn` touched."""
    from math import prod

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    copies = ("aten::clone", "aten::copy_", "aten::contiguous", "aten::repeat_interleave", "aten::repeat")
    return max((prod(s) for e in prof.events() if e.name in copies for s in e.input_shapes if s), default=0)


def test_grouped_attention_never_materialises_g_copies_of_k_or_v():
    """Measured with the profiler, not assumed: broadcasting a size-1 group axis through
    torch.matmul would clone K and V G times (expand + reshape); stacking the queries does not.
    The largest copy is score-sized (T_q = 3 is small), far below G copies of K."""
    b, h, h_kv, t_q, t_k, d = 1, 8, 2, 3, 64, 16
    q, k, v = randn(gen(62), b, h, t_q, d), randn(gen(63), b, h_kv, t_k, d), randn(gen(64), b, h_kv, t_k, d)
    g = h // h_kv
    assert largest_copy(lambda: grouped_attention(q, k, v)) < g * k.numel()
    # The check can fail: the broadcast it replaced does copy K G times.
    assert largest_copy(lambda: q.view(b, h_kv, g, t_q, d) @ k.unsqueeze(2).transpose(-2, -1)) >= g * k.numel()


# --------------------------------------------------------------------------------------
# KV cache: decode equals the full forward; the cache holds n_kv rotated heads
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("h_kv", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_cached_decode_equals_full_causal_forward(h_kv):
    """Seed 003, D04 at layer level: prefill 3 tokens, then one at a time (RoPE, GQA)."""
    m = layer(70 + h_kv, 32, 4, h_kv, rope=True)
    g = gen(71)
    x = randn(g, 2, 7, 32)
    with torch.no_grad():
        full, full_w = m(x, causal=True, return_weights=True)
        cache = m.new_cache(2, 10)
        steps = [m(x[:, :3], causal=True, cache=cache)]
        for t in range(3, 7):
            out, w = m(x[:, t : t + 1], causal=True, cache=cache, start_pos=t, return_weights=True)
            assert w.shape == (2, 4, 1, t + 1)
            torch.testing.assert_close(w[:, :, 0], full_w[:, :, t, : t + 1], **TOL)
            steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL)
    assert cache.next_pos == 7 and cache.k.shape == (2, h_kv, 10, 8)

    # the cache's contents equal independently projected and rotated K (and unrotated V)
    with torch.no_grad():
        k_ref = rope_reference(F.linear(x, m.k_proj.weight).view(2, 7, h_kv, 8).transpose(1, 2), 0)
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
        full, w_full = m(x, causal=True, key_valid=valid, empty_row=policy, return_weights=True)
        cache = m.new_cache(2, 6)
        steps = [m(x[:, :2], causal=True, key_valid=valid[:, :2], cache=cache, empty_row=policy)]
        for t in range(2, 6):
            steps.append(m(x[:, t : t + 1], causal=True, key_valid=valid[:, : t + 1], cache=cache, empty_row=policy))
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


def test_failed_call_leaves_the_cache_untouched():
    m = layer(93, 16, 4, 2)
    cache = m.new_cache(1, 4)
    x = randn(gen(94), 1, 2, 16)
    with torch.no_grad():
        with pytest.raises(ValueError, match="no key"):
            m(x, causal=True, key_valid=torch.tensor([[False, True]]), cache=cache)
        with pytest.raises(ValueError, match="capacity"):
            m(randn(gen(95), 1, 5, 16), causal=True, cache=cache)
    assert cache.next_pos == 0


def test_a_call_that_fails_inside_attention_rolls_the_cache_back():
    """Scores that overflow float32 are found only after the new keys were appended: the
    cache must still end where it was, with the positions written by the call zeroed."""
    m = layer(96, 16, 4, 2, rope=True).float()
    cache = m.new_cache(1, 8)
    with torch.no_grad():
        m(torch.randn(1, 2, 16, generator=gen(97)), causal=True, cache=cache)
        before_k = cache.k.clone()
        with pytest.raises(ValueError, match="overflowed"):
            m(torch.full((1, 1, 16), 1e21), causal=True, cache=cache)
    assert cache.next_pos == 2
    assert torch.equal(cache.k, before_k)


def test_one_cache_serves_one_layer():
    a, b = layer(98, 16, 4, 2), layer(99, 16, 4, 2)
    cache = a.new_cache(1, 8)
    with torch.no_grad():
        a(randn(gen(100), 1, 2, 16), causal=True, cache=cache)
        with pytest.raises(ValueError, match="another layer's keys"):
            b(randn(gen(101), 1, 1, 16), causal=True, cache=cache)
        assert cache.next_pos == 2
        cache.reset()  # a new sequence may belong to another layer
        b(randn(gen(101), 1, 1, 16), causal=True, cache=cache)
    assert cache.next_pos == 1


# --------------------------------------------------------------------------------------
# Seed 003 regression checks
# --------------------------------------------------------------------------------------


def test_d06_attention_params_formula_equals_numel():
    for d, h, h_kv in [(32, 8, 8), (32, 8, 2), (32, 8, 1), (96, 8, 2), (64, 4, 4)]:
        for bias in (False, True):
            m = MultiHeadAttention(d, h, h_kv, bias=bias)
            assert attention_params(d, h, h_kv, bias) == sum(p.numel() for p in m.parameters())
        assert attention_params(d, h, h_kv) == 2 * d * d * (1 + Fraction(h_kv, h))


def test_d06_kv_bytes_per_token_equals_real_storage():
    n_layers, b, capacity = 3, 2, 5
    for h, h_kv, dtype in [(8, 8, torch.float16), (8, 2, torch.float32), (8, 1, torch.bfloat16)]:
        m = MultiHeadAttention(32, h, h_kv).to(dtype)
        caches = [m.new_cache(b, capacity) for _ in range(n_layers)]
        stored = sum(c.nbytes for c in caches)
        per_token = kv_cache_bytes_per_token(n_layers, h_kv, m.d_head, torch.finfo(dtype).bits // 8)
        assert stored == per_token * b * capacity


def test_published_kv_cache_arithmetic():
    per_token = {c.name: kv_cache_bytes_per_token(c.n_layers, c.n_kv_heads, c.d_head, 2) for c in PUBLISHED_ATTENTION}
    assert per_token == {"GPT-2 small": 36_864, "Llama-2-7B": 524_288, "Llama-2-70B": 327_680, "Falcon-7B": 8_192}
    assert per_token["Llama-2-7B"] * 4096 == 2 * 2**30  # 2 GiB per 4,096-token sequence
    assert per_token["Llama-2-70B"] * 4096 == 1.25 * 2**30
    llama70 = next(c for c in PUBLISHED_ATTENTION if c.name == "Llama-2-70B")
    assert kv_cache_bytes_per_token(80, llama70.n_heads, 128, 2) == 8 * per_token["Llama-2-70B"]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("h_kv", [4, 2, 1])
def test_d07_packed_qkv_equals_separate(bias, h_kv):
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


def test_d10_config_validation():
    with pytest.raises(ValueError, match="d_model=100 must be divisible by n_heads=8"):
        MultiHeadAttention(100, 8)
    with pytest.raises(ValueError, match="n_heads=8 must be divisible by n_kv_heads=3"):
        MultiHeadAttention(96, 8, 3)
    with pytest.raises(ValueError, match="even d_head"):
        MultiHeadAttention(48, 16, rope=True)  # d_head = 3


def test_d11_start_pos_and_cache_consistency():
    m = layer(110, 32, 4, rope=True)
    cache = m.new_cache(1, 8)
    g = gen(111)
    with torch.no_grad():
        m(randn(g, 1, 3, 32), causal=True, cache=cache)
        x2 = randn(g, 1, 1, 32)
        with pytest.raises(ValueError, match=r"start_pos=0 disagrees with cache.next_pos=3"):
            m(x2, causal=True, cache=cache, start_pos=0)
        assert cache.next_pos == 3
        explicit = m(x2, causal=True, cache=cache, start_pos=3)
    cache.reset()
    assert cache.next_pos == 0 and (cache.k == 0).all()
    assert resolve_start(None, None) == 0 and resolve_start(None, 5) == 5
    with torch.no_grad():
        m(torch.zeros(1, 3, 32, dtype=F64), causal=True, cache=cache)
        assert resolve_start(cache, None) == 3
    # The explicit, agreeing start_pos computed the same step as the full forward's last row.
    first = randn(gen(111), 1, 3, 32)  # the same first three tokens as above
    with torch.no_grad():
        full = m(torch.cat([first, x2], dim=1), causal=True)
    torch.testing.assert_close(explicit, full[:, 3:], atol=1e-12, rtol=0)


def test_d12_cross_attention_guards_and_memory_is_read():
    x, memory = randn(gen(120), 1, 4, 32), randn(gen(121), 1, 3, 32)
    with pytest.raises(ValueError, match="rope"):
        layer(122, 32, 4, rope=True)(x, memory, causal=False)
    plain = layer(123, 32, 4)
    with pytest.raises(ValueError, match="cache"):
        plain(x, memory, causal=False, cache=plain.new_cache(1, 8))
    with pytest.raises(ValueError, match="causal"):
        plain(x, memory, causal=True)
    out = plain(x, memory, causal=False)
    assert out.shape == (1, 4, 32)
    assert max_err(out, plain(x, randn(gen(124), 1, 3, 32), causal=False)) > 1e-3  # memory is read


@pytest.mark.parametrize("b, t, h_kv", [(2, 5, 2), (3, 3, 1), (4, 4, 4)], ids=["B=n_kv", "B=T_q", "B=T_q=n_kv"])
def test_d13_batch_size_never_collides_with_a_mask_axis(b, t, h_kv):
    """A batch equal to n_kv_heads or to T_q: batched padding masks equal per-sample runs."""
    m = layer(130 + b, 16, 4, h_kv, rope=True)
    x = randn(gen(131), b, t, 16)
    valid = torch.ones(b, t, dtype=torch.bool)
    for i in range(1, b):
        valid[i, t - i :] = False  # sample i has i padding keys at the end
    with torch.no_grad():
        batched = m(x, causal=True, key_valid=valid)
        one_by_one = torch.cat([m(x[i : i + 1], causal=True, key_valid=valid[i : i + 1]) for i in range(b)])
    torch.testing.assert_close(batched, one_by_one, **TOL)


def test_d13_fully_masked_row_is_refused_by_default_and_finite_with_zero():
    m = layer(140, 32, 4)
    x = randn(gen(141), 2, 5, 32).requires_grad_()
    valid = torch.tensor([[False, True, True, True, True], [True] * 5])  # query 0 of sample 0 sees nothing
    with pytest.raises(ValueError, match=r"\[batch, query\] \[\[0, 0\]\]"):
        m(x, causal=True, key_valid=valid)
    out = m(x, causal=True, key_valid=valid, empty_row="zero")
    assert torch.isfinite(out).all() and (out[0, 0] == 0).all()
    g = torch.autograd.grad(out.square().sum(), [x, *m.parameters()])
    assert all(torch.isfinite(t).all() for t in g)


def test_d15_rope_tables_follow_the_layer_dtype():
    """The float32 RoPE tables serve a float64 layer (cast, no error) and a bfloat16 one."""
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
    valid = torch.tensor([[True, True, False], [True, True, True], [False, True, True]])  # B = T_q = T_k = 3
    allowed = attention_allowed(3, 3, causal=True, key_valid=valid)
    assert allowed.shape == (3, 1, 3, 3)
    for b in range(3):
        assert torch.equal(allowed[b, 0], causal_allowed(3, 3) & valid[b][None, :])
    assert attention_allowed(3, 3, causal=False) is None
    assert attention_allowed(1, 4, causal=True, query_offset=3).tolist() == [[[[True] * 4]]]
    assert attention_allowed(2, 3, causal=False, key_valid=valid[:2]).shape == (2, 1, 1, 3)


def test_empty_rows_pass_through_to_attention_with_zero_weights():
    m = layer(170, 16, 4, 2)
    x = randn(gen(171), 1, 3, 16)
    valid = torch.tensor([[False, True, True]])
    out, w = m(x, causal=True, key_valid=valid, empty_row="zero", return_weights=True)
    assert (w[0, :, 0] == 0).all() and (out[0, 0] == 0).all()
    torch.testing.assert_close(w[0, :, 1:].sum(-1), torch.ones(4, 2, dtype=F64), **TOL)


def test_grouped_attention_names_empty_rows_by_head():
    q, k, v = randn(gen(172), 1, 4, 2, 3), randn(gen(173), 1, 2, 3, 3), randn(gen(174), 1, 2, 3, 3)
    allowed = torch.ones(1, 4, 2, 3, dtype=torch.bool)
    allowed[0, 3, 1] = False
    with pytest.raises(ValueError, match=r"\[batch, head, query\] \[\[0, 3, 1\]\]"):
        grouped_attention(q, k, v, allowed)
    r = grouped_attention(q, k, v, allowed, empty_row="zero")
    assert r.empty_rows[0, 3, 1] and r.empty_rows.sum() == 1 and (r.output[0, 3, 1] == 0).all()


# --------------------------------------------------------------------------------------
# Every error path
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((0, 2), {}, ValueError, "d_model"),
        ((True, 2), {}, TypeError, "d_model"),
        ((32.0, 2), {}, TypeError, "d_model"),
        ((32, 0), {}, ValueError, "n_heads"),
        ((32, False), {}, TypeError, "n_heads"),
        ((32, 4, 0), {}, ValueError, "n_kv_heads"),
        ((32, 4, True), {}, TypeError, "n_kv_heads"),
        ((32, 4, 8), {}, ValueError, "n_kv_heads=8"),
        ((30, 4), {}, ValueError, "d_model=30"),
        ((32, 4), {"bias": 1}, TypeError, "bias"),
        ((32, 4), {"rope": "yes"}, TypeError, "rope"),
        ((24, 8), {"rope": True}, ValueError, "d_head=3"),
        ((32, 4), {"rope": True, "rope_base": 1.0}, ValueError, "rope_base"),
        ((32, 4), {"rope": True, "rope_base": -5.0}, ValueError, "rope_base"),
        ((32, 4), {"rope": True, "rope_base": True}, TypeError, "rope_base"),
    ],
)
def test_constructor_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        MultiHeadAttention(*args, **kwargs)


def forward_error_cases():
    x = torch.zeros(2, 3, 16, dtype=F64)
    mem = torch.zeros(2, 4, 16, dtype=F64)
    ok_valid = torch.ones(2, 3, dtype=torch.bool)
    nan = x.clone()
    nan[0, 0, 0] = float("nan")
    return [
        ("x-not-tensor", (x.tolist(),), {"causal": True}, TypeError, "x must be a torch.Tensor"),
        ("x-int", (x.long(),), {"causal": True}, TypeError, "x must have a floating"),
        ("x-2d", (x[0],), {"causal": True}, ValueError, "x must be"),
        ("x-width", (torch.zeros(2, 3, 8, dtype=F64),), {"causal": True}, ValueError, "d_model=16"),
        ("x-dtype", (x.float(),), {"causal": True}, TypeError, "x has dtype torch.float32"),
        ("x-nan", (nan,), {"causal": True}, ValueError, "x contains NaN"),
        ("x-device", (x.to("meta"),), {"causal": True}, ValueError, "x is on meta"),
        ("mem-device", (x, mem.to("meta")), {"causal": False}, ValueError, "memory is on meta"),
        ("causal-mask", (x,), {"causal": causal_allowed(3, 3)}, TypeError, "causal must be a bool"),
        ("causal-int", (x,), {"causal": 1}, TypeError, "causal"),
        ("weights-flag", (x,), {"causal": True, "return_weights": 1}, TypeError, "return_weights"),
        ("empty-row", (x,), {"causal": True, "empty_row": "nan"}, ValueError, "empty_row"),
        ("mem-2d", (x, mem[0]), {"causal": False}, ValueError, "memory must be"),
        ("mem-width", (x, torch.zeros(2, 4, 8, dtype=F64)), {"causal": False}, ValueError, "memory must be"),
        ("mem-batch", (x, mem[:1]), {"causal": False}, ValueError, "memory has batch 1"),
        ("mem-dtype", (x, mem.float()), {"causal": False}, TypeError, "memory has dtype"),
        ("mem-int", (x, mem.long()), {"causal": False}, TypeError, "memory must have a floating"),
        ("mem-causal", (x, mem), {"causal": True}, ValueError, "causal=True"),
        ("mem-start", (x, mem), {"causal": False, "start_pos": 0}, ValueError, "start_pos"),
        ("mem-cache", (x, mem), {"causal": False, "cache": KVCache(2, 2, 8, 4, dtype=F64)}, ValueError, "cache"),
        ("cache-type", (x,), {"causal": True, "cache": object()}, TypeError, "cache must be a KVCache"),
        ("cache-heads", (x,), {"causal": True, "cache": KVCache(2, 4, 8, 4, dtype=F64)}, ValueError, "n_kv_heads=4"),
        ("cache-batch", (x,), {"causal": True, "cache": KVCache(1, 2, 8, 4, dtype=F64)}, ValueError, "batch=1"),
        ("cache-dtype", (x,), {"causal": True, "cache": KVCache(2, 2, 8, 4)}, ValueError, "float32"),
        ("cache-full", (x,), {"causal": True, "cache": KVCache(2, 2, 2, 4, dtype=F64)}, ValueError, "capacity=2"),
        ("start-neg", (x,), {"causal": True, "start_pos": -1}, ValueError, "start_pos"),
        ("start-bool", (x,), {"causal": True, "start_pos": True}, TypeError, "start_pos"),
        ("kv-int", (x,), {"causal": True, "key_valid": ok_valid.long()}, TypeError, "key_valid must be a bool"),
        ("kv-shape", (x,), {"causal": True, "key_valid": ok_valid[0]}, ValueError, r"key_valid must be \[B=2, T_k=3\]"),
        ("kv-cross", (x, mem), {"causal": False, "key_valid": ok_valid}, ValueError, "T_k=4"),
        ("kv-cache", (x,), {"causal": True, "key_valid": ok_valid,
                            "cache": _filled_cache()}, ValueError, "T_k=5"),
        ("kv-device", (x,), {"causal": True, "key_valid": ok_valid.to("meta")}, ValueError, "key_valid is on meta"),
        ("empty", (x,), {"causal": True, "key_valid": torch.tensor([[False, True, True]] * 2)}, ValueError,
         "empty_row='zero'"),
    ]


def _filled_cache() -> KVCache:
    cache = KVCache(2, 2, 8, 4, dtype=F64)
    cache.append(torch.zeros(2, 2, 2, 4, dtype=F64), torch.zeros(2, 2, 2, 4, dtype=F64))
    return cache


@pytest.mark.parametrize("args, kwargs, error, match",
                         [pytest.param(*case[1:], id=case[0]) for case in forward_error_cases()])
def test_forward_errors(args, kwargs, error, match):
    m = layer(180, 16, 4, 2)
    with pytest.raises(error, match=match):
        m(*args, **kwargs)


def test_forward_errors_cross_rope_and_missing_causal():
    x = torch.zeros(1, 2, 16, dtype=F64)
    with pytest.raises(ValueError, match="rope=True"):
        layer(181, 16, 4, rope=True)(x, x, causal=False)
    with pytest.raises(TypeError, match="causal"):
        layer(182, 16, 4)(x)  # causal has no default: forgetting it is an error, not full attention


def test_helper_errors():
    x = torch.zeros(1, 2, 12, dtype=F64)
    with pytest.raises(ValueError, match="n_heads=5"):
        split_heads(x, 5)
    with pytest.raises(ValueError, match=r"x must be \[B, T"):
        split_heads(x[0], 3)
    with pytest.raises(TypeError, match="n_heads"):
        split_heads(x, 3.0)
    with pytest.raises(ValueError, match=r"x must be \[B, H, T, d_head\]"):
        merge_heads(x)
    q, k = torch.zeros(1, 4, 2, 3, dtype=F64), torch.zeros(1, 3, 2, 3, dtype=F64)
    with pytest.raises(ValueError, match="H % H_kv"):
        grouped_attention(q, k, k)
    with pytest.raises(ValueError, match="q must be 4-d"):
        grouped_attention(q[0], k, k)
    with pytest.raises(ValueError, match="H % H_kv"):
        grouped_attention(q, q[:, :2].expand(2, 2, 2, 3), q[:, :2])  # batch 2 != 1
    with pytest.raises(TypeError, match="allowed must be a bool"):
        grouped_attention(q, q[:, :2], q[:, :2], torch.ones(2, 2))
    with pytest.raises(ValueError, match="does not broadcast"):
        grouped_attention(q, q[:, :2], q[:, :2], torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="empty_row"):
        grouped_attention(q, q[:, :2], q[:, :2], empty_row="skip")
    with pytest.raises(ValueError, match="start_pos"):
        resolve_start(None, -2)


def test_packed_qkv_errors():
    m = MultiHeadAttention(16, 4, 2, bias=True)
    with pytest.raises(TypeError, match="attn must be a MultiHeadAttention"):
        pack_qkv(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="attn must be a MultiHeadAttention"):
        load_packed_qkv(nn.Linear(2, 2), torch.zeros(1, 1))
    with pytest.raises(ValueError, match=r"weight must be \[32, 16\]"):
        load_packed_qkv(m, torch.zeros(48, 16), torch.zeros(48))
    with pytest.raises(ValueError, match="bias must be given"):
        load_packed_qkv(m, torch.zeros(32, 16))
    with pytest.raises(ValueError, match=r"bias must be \[32\]"):
        load_packed_qkv(m, torch.zeros(32, 16), torch.zeros(31))
    with pytest.raises(ValueError, match="bias must be given"):
        load_packed_qkv(MultiHeadAttention(16, 4), torch.zeros(48, 16), torch.zeros(48))


def test_params_errors():
    with pytest.raises(ValueError, match="d_model=30"):
        attention_params(30, 4, 4)
    with pytest.raises(ValueError, match="n_kv_heads=3"):
        attention_params(32, 4, 3)
    with pytest.raises(TypeError, match="n_kv_heads"):
        attention_params(32, 4, True)
    with pytest.raises(TypeError, match="bias"):
        attention_params(32, 4, 4, bias=1)
    with pytest.raises(ValueError, match="bytes_per_value"):
        kv_cache_bytes_per_token(1, 1, 64, 0)
    with pytest.raises(TypeError, match="n_layers"):
        kv_cache_bytes_per_token(True, 1, 64, 2)


def test_helpers_refuse_what_they_cannot_use():
    with pytest.raises(TypeError, match="^x must be a torch.Tensor"):
        split_heads([1.0, 2.0], 2)
    with pytest.raises(TypeError, match="^x must be a torch.Tensor"):
        merge_heads([1.0])
    with pytest.raises(TypeError, match="^causal must be a bool"):
        attention_allowed(2, 2, causal=torch.ones(2, 2, dtype=torch.bool))
