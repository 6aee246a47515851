"""One path, two speeds: the fused kernel equals the transparent attention of chapter 1.

`MultiHeadAttention.forward` runs `heads.fused_attention` (PyTorch's
F.scaled_dot_product_attention, one call that never stores the weights) unless it is asked
for its weights, then `heads.grouped_attention`. What is checked, in float64 with atol 1e-12
and rtol 0:

- `fused_attention` against `grouped_attention(...).output`, forward and the gradients
  w.r.t. q, k and v, for MHA, GQA and MQA, with no mask, the kernel's own square causal
  mask, a causal mask with a KV-cache offset (one query after a prefix), key padding,
  causal + padding, a per-head mask, and rows left empty (zero output, finite gradients);
- the layer with `return_weights=False` against `return_weights=True`: output and the
  gradients w.r.t. the input (and memory) and every parameter, for the same geometries at
  layer level, cross-attention with memory padding included, and a KV-cache decode
  (forward only: the cache is for inference);
- that the default path really is the fused one (and the other really the transparent one);
- host syncs: a layer call reads no tensor value, except the one check that a padding mask
  leaves no query without a key (`key_valid` given and empty_row="error").
"""

from __future__ import annotations

import re

import pytest
import torch

import literate.parts.multi_head as heads_module
from literate.parts.attention import causal_allowed, padding_allowed
from literate.parts.multi_head import (
    MultiHeadAttention,
    fused_attention,
    grouped_attention,
)
from literate.tools.syncs import HostReads as HostSyncs

F64 = torch.float64
TOL = dict(atol=1e-12, rtol=0)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=g, dtype=F64)


# --------------------------------------------------------------------------------------
# fused_attention equals grouped_attention
# --------------------------------------------------------------------------------------

B, H, T, D = 2, 4, 5, 8  # T_q = T_k = T for square masks


def _valid(t_k: int) -> torch.Tensor:
    """Right padding: sequence 1 has 2 padded keys; every query still sees key 0."""
    valid = torch.ones(B, t_k, dtype=torch.bool)
    valid[1, -2:] = False
    return valid


def _left_padded(t_k: int) -> torch.Tensor:
    """Left padding: sequence 0's first two keys are padding, so under a causal mask its
    first two queries see no key at all (empty rows)."""
    valid = torch.ones(B, t_k, dtype=torch.bool)
    valid[0, :2] = False
    return valid


def _per_head(t_q: int, t_k: int) -> torch.Tensor:
    allowed = torch.rand(B, H, t_q, t_k, generator=gen(7)) < 0.6
    allowed[..., 0] = True
    return allowed


# name -> (T_q, T_k, mask or None, is_causal, rows may be empty)
MASKS = {
    "none": (T, 7, None, False, False),
    "kernel_causal": (T, T, None, True, False),
    "causal_offset_decode": (
        1,
        6,
        causal_allowed(1, 6, query_offset=5)[None, None],
        False,
        False,
    ),
    "causal_offset_chunk": (
        3,
        7,
        causal_allowed(3, 7, query_offset=4)[None, None],
        False,
        False,
    ),
    "padding": (T, 7, padding_allowed(_valid(7)), False, False),
    "causal_and_padding": (
        T,
        T,
        causal_allowed(T, T)[None, None] & padding_allowed(_valid(T)),
        False,
        False,
    ),
    "per_head": (T, 6, _per_head(T, 6), False, False),
    "empty_rows": (
        T,
        T,
        causal_allowed(T, T)[None, None] & padding_allowed(_left_padded(T)),
        False,
        True,
    ),
}


@pytest.mark.parametrize("mask_name", list(MASKS))
@pytest.mark.parametrize("h_kv", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_fused_attention_equals_grouped_attention_forward_and_backward(h_kv, mask_name):
    t_q, t_k, allowed, is_causal, may_be_empty = MASKS[mask_name]
    g = gen(10 + h_kv)
    q = randn(g, B, H, t_q, D).requires_grad_()
    k, v = (
        randn(g, B, h_kv, t_k, D).requires_grad_(),
        randn(g, B, h_kv, t_k, D).requires_grad_(),
    )
    transparent_mask = causal_allowed(t_q, t_k) if is_causal else allowed
    policy = (
        "zero" if may_be_empty else "error"
    )  # "error" proves the other cases have no empty row
    transparent = grouped_attention(q, k, v, transparent_mask, empty_row=policy)
    fused = fused_attention(q, k, v, allowed, is_causal=is_causal)
    assert fused.shape == transparent.output.shape == (B, H, t_q, D)
    torch.testing.assert_close(fused, transparent.output, **TOL)

    probe = randn(g, B, H, t_q, D)
    fused_g = torch.autograd.grad((fused * probe).sum(), (q, k, v))
    transparent_g = torch.autograd.grad((transparent.output * probe).sum(), (q, k, v))
    for name, a, b in zip("qkv", fused_g, transparent_g):
        assert torch.isfinite(a).all(), name
        torch.testing.assert_close(a, b, **TOL, msg=lambda m: f"grad {name}: {m}")

    empty = transparent.empty_rows  # [B, H, T_q]
    assert bool(empty.any()) == may_be_empty
    if may_be_empty:  # zero output, and nothing flows into an empty query
        assert torch.all(fused[empty] == 0) and torch.all(
            transparent.output[empty] == 0
        )
        assert torch.all(fused_g[0][empty] == 0)


def test_the_kernel_alone_is_what_fused_attention_corrects_on_an_empty_row():
    """F.sdpa gives NaN or 0 on a row with no allowed key depending on the torch version;
    fused_attention opens such a row to every key and then zeroes it: 0 on every version."""
    g = gen(20)
    q, k, v = randn(g, 1, 2, 3, 4), randn(g, 1, 2, 3, 4), randn(g, 1, 2, 3, 4)
    allowed = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    allowed[0, 0, 1] = False  # query 1 sees nothing
    out = fused_attention(q, k, v, allowed)
    assert torch.all(out[:, :, 1] == 0) and torch.isfinite(out).all()
    other = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    torch.testing.assert_close(out[:, :, [0, 2]], other[:, :, [0, 2]], **TOL)


# --------------------------------------------------------------------------------------
# The layer: return_weights=False (fused) equals return_weights=True (transparent)
# --------------------------------------------------------------------------------------


def layer(
    seed: int, h_kv: int, *, bias: bool = True, rope: bool = False
) -> MultiHeadAttention:
    """A float64 layer d=16, H=4, with seeded weights; biases random, not zero."""
    torch.manual_seed(seed)
    m = MultiHeadAttention(16, 4, h_kv, bias=bias, rope=rope).double()
    if bias:
        with torch.no_grad():
            for p in (m.q_proj, m.k_proj, m.v_proj, m.o_proj):
                p.bias.normal_()
    return m


def both_paths(m: MultiHeadAttention, inputs: list[torch.Tensor], **kwargs):
    """Output and gradients (w.r.t. `inputs` and every parameter) of both paths."""
    results = []
    for return_weights in (False, True):
        out = m(*inputs, return_weights=return_weights, **kwargs)
        out = out[0] if return_weights else out
        probe = torch.randn(out.shape, generator=gen(31), dtype=F64)
        results.append(
            (out, torch.autograd.grad((out * probe).sum(), [*inputs, *m.parameters()]))
        )
    return results


VALID_6 = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
LEFT_6 = torch.tensor([[False] * 2 + [True] * 4, [True] * 6])
MEMORY_VALID = torch.tensor([[True] * 7, [True] * 3 + [False] * 4])

# name -> (h_kv, rope, call keyword arguments, memory length or None)
LAYER_CASES = {
    "mha": (4, False, dict(causal=False), None),
    "gqa": (2, False, dict(causal=False), None),
    "mqa": (1, False, dict(causal=False), None),
    "mha_causal": (4, False, dict(causal=True), None),
    "gqa_causal_rope": (2, True, dict(causal=True), None),
    "mqa_causal_rope": (1, True, dict(causal=True), None),
    "rope_start_pos": (2, True, dict(causal=True, start_pos=9), None),
    "causal_padding": (2, True, dict(causal=True, key_valid=VALID_6), None),
    "padding": (1, False, dict(causal=False, key_valid=VALID_6), None),
    "cross": (2, False, dict(causal=False), 7),
    "cross_padding": (2, False, dict(causal=False, key_valid=MEMORY_VALID), 7),
}


@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_the_fused_path_equals_the_transparent_path_forward_and_every_gradient(case):
    h_kv, rope, kwargs, s = LAYER_CASES[case]
    m = layer(40, h_kv, rope=rope)
    g = gen(41)
    x = randn(g, 2, 6, 16).requires_grad_()
    inputs = [x] if s is None else [x, randn(g, 2, s, 16).requires_grad_()]
    (fused, fused_g), (transparent, transparent_g) = both_paths(m, inputs, **kwargs)
    torch.testing.assert_close(fused, transparent, **TOL)
    names = ["x", "memory"][: len(inputs)] + [n for n, _ in m.named_parameters()]
    assert len(fused_g) == len(names) == len(inputs) + 8  # 4 weights and 4 biases
    for name, a, b in zip(names, fused_g, transparent_g):
        assert torch.isfinite(a).all(), name
        torch.testing.assert_close(a, b, **TOL, msg=lambda msg: f"grad {name}: {msg}")


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("where", ["self", "cross"])
def test_empty_rows_with_the_zero_policy_give_zero_and_finite_gradients_on_both_paths(
    where, bias
):
    """Left padding under a causal mask leaves sequence 0's first two queries with no key;
    a fully padded memory leaves every query of sequence 0 with none. Their attention
    output is zero (so the layer's is o_proj's bias), the gradients are finite, and the
    two paths agree everywhere."""
    m = layer(50, 2, bias=bias, rope=where == "self")
    g = gen(51)
    x = randn(g, 2, 6, 16).requires_grad_()
    if where == "self":
        inputs, kwargs, empty = (
            [x],
            dict(causal=True, key_valid=LEFT_6),
            (0, slice(0, 2)),
        )
    else:
        valid = torch.tensor([[False] * 5, [True] * 3 + [False] * 2])
        inputs, kwargs, empty = (
            [x, randn(g, 2, 5, 16).requires_grad_()],
            dict(causal=False, key_valid=valid),
            (0, slice(None)),
        )
    (fused, fused_g), (transparent, transparent_g) = both_paths(
        m, inputs, empty_row="zero", **kwargs
    )
    torch.testing.assert_close(fused, transparent, **TOL)
    expected = m.o_proj.bias.detach() if bias else torch.zeros(16, dtype=F64)
    for out in (fused, transparent):
        assert torch.equal(out[empty], expected.expand_as(out[empty]))
    for a, b in zip(fused_g, transparent_g):
        assert torch.isfinite(a).all() and torch.isfinite(b).all()
        torch.testing.assert_close(a, b, **TOL)
    assert torch.all(
        fused_g[0][empty] == 0
    )  # an empty query's input gets no gradient through attention


@pytest.mark.parametrize("h_kv", [4, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("padded", [False, True])
def test_cached_decode_is_the_same_on_both_paths(h_kv, padded):
    """A prefix of 3 tokens, one token, then a chunk of 2, each path with its own cache:
    equal outputs at every step (forward only: the cache is for inference), equal caches."""
    m = layer(60 + h_kv, h_kv, rope=True)
    x = randn(gen(61), 2, 6, 16)
    valid = VALID_6 if padded else None
    caches = [m.new_cache(2, 8), m.new_cache(2, 8)]
    with torch.no_grad():
        for start, end in ((0, 3), (3, 4), (4, 6)):
            kwargs = dict(
                causal=True, key_valid=None if valid is None else valid[:, :end]
            )
            fused = m(x[:, start:end], cache=caches[0], **kwargs)
            transparent, weights = m(
                x[:, start:end], cache=caches[1], return_weights=True, **kwargs
            )
            assert weights.shape == (2, 4, end - start, end)
            torch.testing.assert_close(fused, transparent, **TOL)
    assert torch.equal(caches[0].k, caches[1].k) and torch.equal(
        caches[0].v, caches[1].v
    )
    assert caches[0].next_pos == caches[1].next_pos == 6


def test_the_default_path_is_the_fused_kernel_and_return_weights_the_transparent_one(
    monkeypatch,
):
    """Without this, every equality above could hold because both paths ran the same code."""
    calls, guards = [], []
    fused, transparent = heads_module.fused_attention, heads_module.grouped_attention

    def spy_fused(
        q, k, v, allowed=None, *, is_causal=False, scale=None, rows_can_be_empty=True
    ):
        calls.append(("fused", allowed is None, is_causal))
        if allowed is not None:  # only padding can leave a query row without a key
            guards.append(rows_can_be_empty)
        return fused(
            q,
            k,
            v,
            allowed,
            is_causal=is_causal,
            scale=scale,
            rows_can_be_empty=rows_can_be_empty,
        )

    def spy_transparent(q, k, v, allowed=None, **kwargs):
        calls.append(("transparent", allowed is None, kwargs.get("empty_row")))
        return transparent(q, k, v, allowed, **kwargs)

    monkeypatch.setattr(heads_module, "fused_attention", spy_fused)
    monkeypatch.setattr(heads_module, "grouped_attention", spy_transparent)
    m = layer(70, 2, rope=True)
    x, memory = randn(gen(71), 2, 6, 16), randn(gen(72), 2, 4, 16)
    cache = m.new_cache(2, 8)
    with torch.no_grad():
        m(
            x, causal=True
        )  # square causal, no padding: the kernel builds the mask itself
        m(x, causal=False)
        m(x, causal=True, key_valid=VALID_6)
        m(x[:, :5], causal=True, cache=cache)  # the first call on a cache is square too
        m(x[:, 5:], causal=True, cache=cache)  # 1 query, 6 keys: it reads all, no mask
        cache.truncate(3)
        m(x[:, 3:5], causal=True, cache=cache)  # 2 queries, 5 keys: an offset mask
        layer(73, 2)(x, memory, causal=False)
        m(x, causal=True, return_weights=True)
    assert calls == [
        ("fused", True, True),
        ("fused", True, False),
        ("fused", False, False),
        ("fused", True, True),
        ("fused", True, False),
        ("fused", False, False),
        ("fused", True, False),
        ("transparent", False, "zero"),
    ]
    assert guards == [
        True,
        False,
    ]  # the padded call keeps the empty-row guard, the offset
    # mask without padding skips it


# --------------------------------------------------------------------------------------
# Host syncs: refuse_empty_rows runs only with a padding mask and empty_row="error"
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("return_weights", [False, True], ids=["fused", "transparent"])
def test_a_layer_call_without_padding_reads_no_tensor_value(return_weights):
    m = layer(80, 2, rope=True)
    cross = layer(81, 2)
    x, memory = randn(gen(82), 2, 6, 16), randn(gen(83), 2, 4, 16)
    cache = m.new_cache(2, 8)
    with torch.no_grad(), HostSyncs() as syncs:
        m(x, causal=True, return_weights=return_weights)
        m(x, causal=False, return_weights=return_weights)
        m(x, causal=True, start_pos=3, return_weights=return_weights)
        m(
            x[:, :5], causal=True, cache=cache, return_weights=return_weights
        )  # the RoPE tables grow here
        m(x[:, 5:], causal=True, cache=cache, return_weights=return_weights)
        cross(x, memory, causal=False, return_weights=return_weights)
        m(
            x,
            causal=True,
            key_valid=LEFT_6,
            empty_row="zero",
            return_weights=return_weights,
        )
    assert syncs.calls == []


@pytest.mark.parametrize("return_weights", [False, True], ids=["fused", "transparent"])
def test_padding_with_the_error_policy_costs_exactly_one_host_sync(return_weights):
    m = layer(84, 2, rope=True)
    x = randn(gen(85), 2, 6, 16)
    with torch.no_grad(), HostSyncs() as syncs:
        m(x, causal=True, key_valid=VALID_6, return_weights=return_weights)
    assert syncs.calls == ["__bool__"]  # refuse_empty_rows asking: is any row empty?
    message = (
        "causal and key_valid leaves 2 query row(s) with no key to attend to, at index [..., query] "
        "[[0, 0], [0, 1]]; fix the mask, or pass empty_row='zero' to give those rows a zero output"
    )
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        m(x, causal=True, key_valid=LEFT_6, return_weights=return_weights)


def test_an_empty_row_refusal_in_cross_attention_counts_and_names_every_query():
    """BUG: without a causal mask the combined mask is [B, 1, 1, S], one broadcast row per
    sequence, and the refusal counts and names that row: "1 query row(s) ... [[1, 0]]"
    when all 3 queries of sequence 1 have no key (it also says "causal and key_valid"
    for a call with causal=False)."""
    m = layer(86, 2)
    x, memory = randn(gen(87), 2, 3, 16), randn(gen(88), 2, 4, 16)
    valid = torch.tensor([[True] * 4, [False] * 4])
    with pytest.raises(
        ValueError,
        match=r"^[\w ]*key_valid leaves 3 query row\(s\) with no key to attend to, "
        r"at index \[\.\.\., query\] \[\[1, 0\], \[1, 1\], \[1, 2\]\]",
    ):
        m(x, memory, causal=False, key_valid=valid)


@pytest.mark.parametrize("masked", [False, True], ids=["is_causal", "allowed"])
def test_fused_attention_compiles_with_symbolic_shapes_grouped_or_not(masked):
    """Under dynamic shapes `q.shape[1] != k.shape[1]` is a symbolic bool, which the
    kernel refuses as `enable_gqa` ("must be bool, not SymBool"); the function must hand
    it a plain bool. The compiled call equals the eager one for H_kv < H and H_kv = H."""
    compiled = torch.compile(
        fused_attention, fullgraph=True, dynamic=True, backend="aot_eager"
    )
    for seed, (h, h_kv, t) in enumerate([(4, 2, 5), (4, 4, 5), (6, 3, 7)]):
        g = gen(90 + seed)
        q, k, v = randn(g, 2, h, t, 8), randn(g, 2, h_kv, t, 8), randn(g, 2, h_kv, t, 8)
        kwargs = {"allowed": causal_allowed(t, t)} if masked else {"is_causal": True}
        torch.testing.assert_close(
            compiled(q, k, v, **kwargs),
            fused_attention(q, k, v, **kwargs),
            atol=0,
            rtol=0,
        )
