"""Tests for `literate.parts.attention`.

What is checked, and against what:

- equality with `torch.nn.functional.scaled_dot_product_attention` (forward and the
  gradients w.r.t. q, k, v) in float64 for every mask geometry the chapters use;
- float32, float16 and bfloat16 behaviour (computed in float32, returned in the input
  dtype), against a float64 reference;
- stability with huge logits, permutation equivariance (and its failure under a causal
  mask), the empty-row policies, cached-decode geometry, the reference
  values, the mask helpers, every error path, and hypothesis properties;
- the contract of the checks: metadata only (a wrong kind, rank, shape, dtype or device is
  refused by name), one host sync and only to refuse the empty rows of a given mask, and
  non-finite input propagating like F.scaled_dot_product_attention instead of raising.

Every random tensor comes from a `torch.Generator` with a fixed seed.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from literate.numbers.golden import reference
from literate.parts.attention import (
    EMPTY_ROW_POLICIES,
    AttentionResult,
    causal_allowed,
    masked_softmax,
    padding_allowed,
    scaled_dot_product_attention,
)
from literate.tools.syncs import HostReads as HostSyncs

F64 = torch.float64
F32 = torch.float32

# --------------------------------------------------------------------------------------
# Shared factories
# --------------------------------------------------------------------------------------


def gen(seed: int) -> torch.Generator:
    """A CPU generator with a fixed seed: every random tensor in this file uses one."""
    return torch.Generator().manual_seed(seed)


def randn(
    g: torch.Generator, *shape: int, dtype: torch.dtype = F64, scale: float = 1.0
) -> torch.Tensor:
    """Standard normal values drawn in float64, scaled, then cast to `dtype`."""
    return (torch.randn(shape, generator=g, dtype=F64) * scale).to(dtype)


def make_qkv(
    seed: int,
    q_shape: tuple[int, ...],
    k_shape: tuple[int, ...],
    v_shape: tuple[int, ...],
    *,
    dtype: torch.dtype = F64,
    scale: float = 1.0,
    requires_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v leaf tensors with the given shapes, drawn from one seeded generator."""
    g = gen(seed)
    return tuple(
        randn(g, *shape, dtype=dtype, scale=scale).requires_grad_(requires_grad)
        for shape in (q_shape, k_shape, v_shape)
    )


def random_mask(
    seed: int, *shape: int, p_true: float = 0.5, ensure_row: bool = True
) -> torch.Tensor:
    """A random bool mask; with `ensure_row`, every query row keeps one random key."""
    g = gen(seed)
    mask = torch.rand(shape, generator=g) < p_true
    if ensure_row:
        rows = mask.reshape(-1, shape[-1])
        keep = torch.randint(shape[-1], (rows.shape[0],), generator=g)
        rows[torch.arange(rows.shape[0]), keep] = True
    return mask


def torch_sdpa(q, k, v, allowed=None):
    """PyTorch's fused attention, the production reference (no dropout, default scale)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=0.0)


def grads(output: torch.Tensor, inputs, probe: torch.Tensor):
    """Gradients of <output, probe> w.r.t. `inputs`: a random upstream gradient."""
    return torch.autograd.grad((output * probe).sum(), inputs)


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).abs().max())


def ulp(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Spacing of `dtype` floats around each float64 value of `x` (subnormals included)."""
    mantissa_bits = {torch.float16: 11, torch.bfloat16: 8}[
        dtype
    ]  # incl. the hidden bit
    _, exponent = torch.frexp(x.double())  # x = m * 2**e, 0.5 <= |m| < 1
    spacing = torch.ldexp(torch.ones_like(x, dtype=F64), exponent - mantissa_bits)
    smallest = torch.finfo(dtype).smallest_normal * 2.0 ** (1 - mantissa_bits)
    return spacing.clamp_min(smallest)


# The geometry used by the float64 contract: B=2 sequences, H=3 heads, T_q=4 queries
# against T_k=6 keys (more keys than queries, as in cross-attention or a cached decode).
B, H, TQ, TK, DK, DV = 2, 3, 4, 6, 5, 7


def _padding() -> torch.Tensor:
    # Right padding: sequence 0 has 6 real keys, sequence 1 has 3. Every query of the
    # causal case below (first query at position T_k - T_q = 2) still sees key 0..2.
    valid = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    return padding_allowed(valid)  # [B, 1, 1, T_k]


MASKS = {
    "no_mask": lambda: None,
    "key_padding_B11Tk": _padding,
    "per_head_BHTqTk": lambda: random_mask(11, B, H, TQ, TK),
    "causal_offset": lambda: causal_allowed(TQ, TK, query_offset=TK - TQ),
    "causal_and_padding": lambda: (
        causal_allowed(TQ, TK, query_offset=TK - TQ) & _padding()
    ),
    "broadcast_from_Tk": lambda: torch.tensor([True, False, True, True, False, True]),
}


# --------------------------------------------------------------------------------------
# 1. Equality with F.scaled_dot_product_attention in float64, forward and backward
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_name", list(MASKS))
def test_float64_forward_and_gradients_equal_torch_sdpa(mask_name):
    allowed = MASKS[mask_name]()
    q, k, v = make_qkv(
        1, (B, H, TQ, DK), (B, H, TK, DK), (B, H, TK, DV), requires_grad=True
    )
    ours = scaled_dot_product_attention(q, k, v, allowed)
    # F.sdpa wants a mask with at least [T_q, T_k] axes; a [T_k] mask is the same mask
    # broadcast over queries, which is what ours does implicitly.
    their_mask = (
        allowed if allowed is None or allowed.ndim >= 2 else allowed.expand(TQ, TK)
    )
    theirs = torch_sdpa(q, k, v, their_mask)
    assert ours.output.dtype == F64 and ours.output.shape == (B, H, TQ, DV)
    torch.testing.assert_close(ours.output, theirs, atol=1e-12, rtol=0)

    probe = randn(gen(2), *theirs.shape)
    ours_g = grads(ours.output, (q, k, v), probe)
    theirs_g = grads(theirs, (q, k, v), probe)
    for name, a, b in zip("qkv", ours_g, theirs_g):
        assert torch.isfinite(a).all(), name
        # Gradients are O(1) here; the measured gap is <= 6.7e-16 (3 ulps).
        torch.testing.assert_close(
            a, b, atol=1e-12, rtol=0, msg=lambda m: f"grad {name}: {m}"
        )

    # The mask really did something (except for the no-mask case): blocked keys get
    # exactly zero weight.
    if allowed is not None:
        blocked = ~allowed.expand(B, H, TQ, TK)
        assert blocked.any()
        assert torch.all(ours.weights[blocked] == 0.0)


def test_mask_may_vary_along_a_batch_axis_only_v_has():
    """From the source notebook: q, k [1, ...], v [2, ...]; the mask varies along B."""
    q = torch.zeros(1, 2, 1, dtype=F64)
    k = torch.zeros(1, 3, 1, dtype=F64)
    v = torch.tensor([[[1.0], [2.0], [3.0]], [[4.0], [5.0], [6.0]]], dtype=F64)
    allowed = torch.tensor(
        [[[1, 0, 0], [0, 1, 0]], [[0, 0, 1], [1, 1, 0]]], dtype=torch.bool
    )
    result = scaled_dot_product_attention(q, k, v, allowed)
    expected = torch.tensor([[[1.0], [2.0]], [[6.0], [4.5]]], dtype=F64)
    torch.testing.assert_close(result.output, expected, atol=1e-15, rtol=0)
    assert result.weights.shape == (2, 2, 3)
    torch.testing.assert_close(
        result.output,
        torch_sdpa(q.expand(2, 2, 1), k.expand(2, 3, 1), v, allowed),
        atol=1e-15,
        rtol=0,
    )


def test_result_fields_scores_weights_empty_rows():
    q, k, v = make_qkv(3, (2, 3, 4), (2, 5, 4), (2, 5, 2))
    allowed = random_mask(4, 2, 3, 5)
    result = scaled_dot_product_attention(q, k, v, allowed)
    assert isinstance(result, AttentionResult)
    raw = q @ k.transpose(-2, -1) / 2.0  # sqrt(d_k) = 2
    assert torch.equal(torch.isneginf(result.scores), ~allowed)
    torch.testing.assert_close(result.scores[allowed], raw[allowed], atol=1e-15, rtol=0)
    expected_w = torch.softmax(raw.masked_fill(~allowed, -math.inf), dim=-1)
    torch.testing.assert_close(result.weights, expected_w, atol=1e-15, rtol=0)
    torch.testing.assert_close(result.output, expected_w @ v, atol=1e-15, rtol=0)
    assert result.empty_rows.dtype == torch.bool and result.empty_rows.shape == (2, 3)
    assert not result.empty_rows.any()


# --------------------------------------------------------------------------------------
# 2. float32, float16, bfloat16
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mask_name", ["no_mask", "causal_and_padding", "per_head_BHTqTk"]
)
def test_float32_agrees_with_torch_sdpa(mask_name):
    allowed = MASKS[mask_name]()
    q, k, v = make_qkv(
        5, (B, H, TQ, DK), (B, H, TK, DK), (B, H, TK, DV), dtype=F32, requires_grad=True
    )
    ours = scaled_dot_product_attention(q, k, v, allowed)
    theirs = torch_sdpa(q, k, v, allowed)
    assert (
        ours.output.dtype == F32
        and ours.weights.dtype == F32
        and ours.scores.dtype == F32
    )
    # float32 eps is 1.2e-7 and values are O(1): measured forward gap 4.8e-7 (a few
    # ulps, from a different summation order), tolerance 1e-6.
    torch.testing.assert_close(ours.output, theirs, atol=1e-6, rtol=0)
    probe = randn(gen(6), *theirs.shape, dtype=F32)
    # Gradients chain three more float32 matmuls: measured gap 9.5e-7, tolerance 5e-6.
    for a, b in zip(
        grads(ours.output, (q, k, v), probe), grads(theirs, (q, k, v), probe)
    ):
        torch.testing.assert_close(a, b, atol=5e-6, rtol=0)
    # And against a float64 reference of the same float32 inputs.
    ref64 = torch_sdpa(
        q.detach().double(), k.detach().double(), v.detach().double(), allowed
    )
    torch.testing.assert_close(ours.output.double(), ref64, atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_computed_in_float32_returned_in_input_dtype(dtype):
    """The result is the float64 answer rounded once to `dtype` (plus float32 noise).

    If the softmax and matmuls ran in `dtype` itself, errors would compound to several
    `dtype` ulps; the bound below allows half an ulp (the final rounding) plus 1e-5
    relative (float32 arithmetic), so a half-precision computation fails it.
    """
    q, k, v = make_qkv(
        7, (B, H, TQ, DK), (B, H, TK, DK), (B, H, TK, DV), dtype=dtype, scale=2.0
    )
    allowed = MASKS["causal_and_padding"]()
    result = scaled_dot_product_attention(q, k, v, allowed)
    assert result.output.dtype == dtype and result.weights.dtype == dtype
    assert (
        result.scores.dtype == torch.float32
    )  # scores stay in the compute dtype: they cannot overflow
    q64, k64, v64 = q.double(), k.double(), v.double()  # exactly the same numbers
    ref_out = torch_sdpa(q64, k64, v64, allowed)
    ref_w = torch.softmax(
        (q64 @ k64.transpose(-2, -1) / math.sqrt(DK)).masked_fill(~allowed, -math.inf),
        -1,
    )
    for got, ref in ((result.output, ref_out), (result.weights, ref_w)):
        err = (got.double() - ref).abs()
        bound = 0.5 * ulp(ref, dtype) + 1e-5 * ref.abs()
        assert torch.all(err <= bound), f"max excess {float((err - bound).max())}"
    # Rounding the float64 answer once gives the same numbers almost everywhere.
    same = (result.output == ref_out.to(dtype)).double().mean()
    assert same > 0.95


def test_mixed_dtypes_and_devices_are_refused_naming_all_three():
    """q, k and v share one dtype: attention does not promote silently (nor does F.sdpa)."""
    q, k, v = make_qkv(8, (3, 4), (5, 4), (5, 2))
    with pytest.raises(
        TypeError,
        match=r"^q, k, v must share a dtype, got torch\.float32, "
        r"torch\.float64, torch\.float16$",
    ):
        scaled_dot_product_attention(q.float(), k, v.half())
    with pytest.raises(
        ValueError, match=r"^q, k, v must share a device, got cpu, meta, cpu$"
    ):
        scaled_dot_product_attention(q, k.to("meta"), v)
    with pytest.raises(ValueError, match=r"^allowed is on meta, the scores on cpu$"):
        scaled_dot_product_attention(
            q, k, v, torch.ones(3, 5, dtype=torch.bool, device="meta")
        )


# --------------------------------------------------------------------------------------
# 3. Large logits
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_large_logits_are_stable_and_equal_torch_sdpa(causal):
    q, k, v = make_qkv(9, (2, 5, 8), (2, 5, 8), (2, 5, 3), scale=1e3)
    allowed = causal_allowed(5, 5) if causal else None
    result = scaled_dot_product_attention(q, k, v, allowed)
    finite_scores = result.scores[torch.isfinite(result.scores)]
    assert finite_scores.abs().max() > 1e6  # the case really has scores ~1e6

    # The naive softmax overflows on exactly these scores: exp(1e6) = inf, inf/inf = NaN.
    naive_exp = torch.exp(result.scores)
    assert torch.isinf(naive_exp).any()
    naive = naive_exp / naive_exp.sum(dim=-1, keepdim=True)
    assert torch.isnan(naive).any()

    for tensor in (result.output, result.weights):
        assert torch.isfinite(tensor).all()
    torch.testing.assert_close(
        result.weights.sum(-1), torch.ones(2, 5, dtype=F64), atol=1e-12, rtol=0
    )
    torch.testing.assert_close(
        result.output, torch_sdpa(q, k, v, allowed), atol=1e-12, rtol=0
    )


# --------------------------------------------------------------------------------------
# 4. Permutation equivariance
# --------------------------------------------------------------------------------------


def test_permuting_queries_permutes_output_rows():
    q, k, v = make_qkv(10, (5, 4), (7, 4), (7, 3))
    perm = torch.tensor([2, 0, 4, 1, 3])
    base = scaled_dot_product_attention(q, k, v)
    permuted = scaled_dot_product_attention(q[perm], k, v)
    torch.testing.assert_close(permuted.output, base.output[perm], atol=1e-12, rtol=0)
    torch.testing.assert_close(permuted.weights, base.weights[perm], atol=1e-12, rtol=0)
    assert max_err(permuted.output, base.output) > 1e-3  # the rows really moved


def test_permuting_keys_and_values_together_leaves_output_unchanged():
    q, k, v = make_qkv(10, (5, 4), (7, 4), (7, 3))
    perm = torch.tensor([6, 2, 0, 5, 1, 3, 4])
    base = scaled_dot_product_attention(q, k, v)
    permuted = scaled_dot_product_attention(q, k[perm], v[perm])
    torch.testing.assert_close(permuted.output, base.output, atol=1e-12, rtol=0)
    torch.testing.assert_close(
        permuted.weights, base.weights[:, perm], atol=1e-12, rtol=0
    )
    # Permuting keys without their values does change the answer.
    assert (
        max_err(scaled_dot_product_attention(q, k[perm], v).output, base.output) > 1e-3
    )


def test_causal_mask_breaks_permutation_equivariance():
    q, k, v = make_qkv(12, (5, 4), (5, 4), (5, 3))
    perm = torch.tensor([2, 0, 4, 1, 3])
    causal = causal_allowed(5, 5)
    base = scaled_dot_product_attention(q, k, v, causal).output
    # Permute the whole sequence (q, k, v rows together): without a mask the output
    # rows would just permute; with the causal mask they do not.
    permuted = scaled_dot_product_attention(q[perm], k[perm], v[perm], causal).output
    assert max_err(permuted, base[perm]) > 1e-3
    # Control: the same comparison without the mask holds.
    base_nomask = scaled_dot_product_attention(q, k, v).output
    permuted_nomask = scaled_dot_product_attention(q[perm], k[perm], v[perm]).output
    torch.testing.assert_close(permuted_nomask, base_nomask[perm], atol=1e-12, rtol=0)


# --------------------------------------------------------------------------------------
# 5. Empty rows
# --------------------------------------------------------------------------------------


def _empty_row_case(requires_grad: bool = False):
    q, k, v = make_qkv(13, (2, 4, 3), (2, 5, 3), (2, 5, 2), requires_grad=requires_grad)
    allowed = random_mask(14, 2, 4, 5)
    allowed[0, 1] = False
    allowed[1, 3] = False
    expected_empty = torch.zeros(2, 4, dtype=torch.bool)
    expected_empty[0, 1] = expected_empty[1, 3] = True
    return q, k, v, allowed, expected_empty


def test_empty_rows_raise_by_default_naming_the_rows():
    q, k, v, allowed, _ = _empty_row_case()
    with pytest.raises(ValueError, match=re.escape("[[0, 1], [1, 3]]")) as info:
        scaled_dot_product_attention(q, k, v, allowed)
    assert "2 query row(s)" in str(info.value)
    assert "empty_row='zero'" in str(info.value)
    with pytest.raises(ValueError, match=re.escape("[[0, 1], [1, 3]]")):
        scaled_dot_product_attention(q, k, v, allowed, empty_row="error")


def test_zero_policy_zero_rows_other_rows_unaffected_and_finite_gradients():
    q, k, v, allowed, expected_empty = _empty_row_case(requires_grad=True)
    result = scaled_dot_product_attention(q, k, v, allowed, empty_row="zero")
    assert torch.equal(result.empty_rows, expected_empty)
    assert torch.all(result.weights[expected_empty] == 0.0)
    assert torch.all(result.output[expected_empty] == 0.0)
    assert torch.all(torch.isneginf(result.scores[expected_empty]))

    probe = randn(gen(15), 2, 4, 2)
    gq, gk, gv = grads(result.output, (q, k, v), probe)
    for g in (gq, gk, gv):
        assert torch.isfinite(g).all()
    assert torch.all(gq[expected_empty] == 0.0)  # nothing flows into an empty query

    # The other rows equal a call that never saw the empty rows (output and gradients).
    for b in range(2):
        keep = ~expected_empty[b]
        qb = q.detach()[b, keep].requires_grad_()
        kb = k.detach()[b].requires_grad_()
        vb = v.detach()[b].requires_grad_()
        alone = scaled_dot_product_attention(qb, kb, vb, allowed[b, keep])
        torch.testing.assert_close(
            result.output[b, keep], alone.output, atol=1e-14, rtol=0
        )
        torch.testing.assert_close(
            result.weights[b, keep], alone.weights, atol=1e-14, rtol=0
        )
        ga = grads(alone.output, (qb, kb, vb), probe[b, keep])
        torch.testing.assert_close(gq[b, keep], ga[0], atol=1e-14, rtol=0)
        torch.testing.assert_close(gk[b], ga[1], atol=1e-14, rtol=0)
        torch.testing.assert_close(gv[b], ga[2], atol=1e-14, rtol=0)


def test_zero_policy_for_padded_queries_and_keys():
    """The usual use: padded positions as both queries and keys, causal self-attention."""
    valid = torch.tensor([[True, True, True, True], [True, True, False, False]])
    allowed = valid[:, None, :, None] & padding_allowed(valid) & causal_allowed(4, 4)
    q, k, v = make_qkv(16, (2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 5), requires_grad=True)
    result = scaled_dot_product_attention(q, k, v, allowed, empty_row="zero")
    padded_query = ~valid[:, None, :].expand(2, 2, 4)
    assert torch.equal(result.empty_rows, padded_query)
    assert torch.all(result.output[padded_query] == 0.0)
    real = ~padded_query
    torch.testing.assert_close(
        result.output[real], torch_sdpa(q, k, v, allowed)[real], atol=1e-12, rtol=0
    )
    gq, gk, gv = grads(result.output, (q, k, v), randn(gen(17), 2, 2, 4, 5))
    assert all(torch.isfinite(g).all() for g in (gq, gk, gv))
    assert torch.all(gq[padded_query] == 0.0)
    # A padded key is read by no query, so it gets no gradient either.
    assert torch.all(gk[1, :, 2:] == 0.0) and torch.all(gv[1, :, 2:] == 0.0)


def test_zero_policy_without_empty_rows_equals_error_policy():
    q, k, v = make_qkv(18, (2, 4, 3), (2, 5, 3), (2, 5, 2))
    allowed = random_mask(19, 2, 4, 5)
    a = scaled_dot_product_attention(q, k, v, allowed)
    b = scaled_dot_product_attention(q, k, v, allowed, empty_row="zero")
    assert torch.equal(a.output, b.output) and torch.equal(a.weights, b.weights)
    assert EMPTY_ROW_POLICIES == ("error", "zero")


# --------------------------------------------------------------------------------------
# 6. Cached decode geometry
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_new", [1, 3])
def test_cached_decode_equals_last_rows_of_full_causal_forward(n_new):
    t = 7
    q, k, v = make_qkv(20, (2, 2, t, 4), (2, 2, t, 4), (2, 2, t, 3))
    full = scaled_dot_product_attention(q, k, v, causal_allowed(t, t))
    cached = scaled_dot_product_attention(
        q[..., -n_new:, :], k, v, causal_allowed(n_new, t, query_offset=t - n_new)
    )
    torch.testing.assert_close(
        cached.output, full.output[..., -n_new:, :], atol=1e-12, rtol=0
    )
    torch.testing.assert_close(
        cached.weights, full.weights[..., -n_new:, :], atol=1e-12, rtol=0
    )
    # Forgetting the offset treats the new queries as positions 0..n-1: wrong answer.
    wrong = scaled_dot_product_attention(
        q[..., -n_new:, :], k, v, causal_allowed(n_new, t, query_offset=0)
    )
    assert max_err(wrong.output, full.output[..., -n_new:, :]) > 1e-3


# --------------------------------------------------------------------------------------
# 7. Golden values from the source notebook
# --------------------------------------------------------------------------------------


def test_golden_reference_3x3():
    ref = reference()["attention"]
    q, k, v = (torch.tensor(ref[name], dtype=F64) for name in "qkv")
    allowed = torch.tensor(ref["allowed"], dtype=torch.bool)
    assert torch.equal(allowed, causal_allowed(3, 3))
    result = scaled_dot_product_attention(q, k, v, allowed)
    torch.testing.assert_close(
        result.weights, torch.tensor(ref["weights"], dtype=F64), atol=1e-12, rtol=0
    )
    torch.testing.assert_close(
        result.output, torch.tensor(ref["output"], dtype=F64), atol=1e-12, rtol=0
    )
    expected_scores = torch.tensor(
        [[-math.inf if s is None else s for s in row] for row in ref["scores"]],
        dtype=F64,
    )
    blocked = torch.tensor([[s is None for s in row] for row in ref["scores"]])
    assert torch.equal(blocked, ~allowed)
    assert torch.all(torch.isneginf(result.scores[blocked]))
    torch.testing.assert_close(
        result.scores[~blocked], expected_scores[~blocked], atol=1e-12, rtol=0
    )


# --------------------------------------------------------------------------------------
# 8. Mask helpers
# --------------------------------------------------------------------------------------


def test_causal_allowed_exact_masks():
    assert torch.equal(causal_allowed(4, 4), torch.ones(4, 4, dtype=torch.bool).tril())
    assert torch.equal(causal_allowed(3, 5), torch.ones(3, 5, dtype=torch.bool).tril())
    assert torch.equal(
        causal_allowed(3, 5, query_offset=2),
        torch.ones(3, 5, dtype=torch.bool).tril(diagonal=2),
    )
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_allowed(2, 5, query_offset=3), expected)
    assert torch.equal(causal_allowed(1, 1), torch.tensor([[True]]))
    # An offset past the keys lets every query see every key.
    assert torch.equal(
        causal_allowed(2, 3, query_offset=5), torch.ones(2, 3, dtype=torch.bool)
    )


def test_causal_allowed_counts_dtype_device():
    assert int(causal_allowed(5, 5).sum()) == 15
    assert int(causal_allowed(1, 5, query_offset=4).sum()) == 5
    assert int(causal_allowed(1, 5).sum()) == 1
    mask = causal_allowed(2, 3)
    assert mask.dtype == torch.bool and mask.shape == (2, 3)
    assert causal_allowed(2, 3, device="meta").device.type == "meta"
    assert causal_allowed(2, 3, device=torch.device("cpu")).device.type == "cpu"


def test_causal_allowed_accepts_numpy_ints():
    np = pytest.importorskip("numpy")
    assert torch.equal(
        causal_allowed(np.int64(2), np.int32(3), query_offset=np.int64(1)),
        causal_allowed(2, 3, query_offset=1),
    )


def test_padding_allowed_shape_values_and_combination_with_causal():
    valid = torch.tensor([[True, True, False], [True, False, False]])
    mask = padding_allowed(valid)
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 1, 3)
    assert torch.equal(mask[:, 0, 0, :], valid)
    combined = mask & causal_allowed(3, 3)  # [2, 1, 3, 3]
    expected = torch.tensor(
        [
            [[1, 0, 0], [1, 1, 0], [1, 1, 0]],
            [[1, 0, 0], [1, 0, 0], [1, 0, 0]],
        ],
        dtype=torch.bool,
    )[:, None]
    assert torch.equal(combined, expected)


# --------------------------------------------------------------------------------------
# 9. Error paths: type and message naming the argument
# --------------------------------------------------------------------------------------

_q, _k, _v = make_qkv(21, (2, 3, 4), (2, 5, 4), (2, 5, 6))


def _with(name: str, value):
    """(q, k, v) with one of them replaced."""
    args = {"q": _q, "k": _k, "v": _v}
    args[name] = value
    return args["q"], args["k"], args["v"]


def _nan_at(t: torch.Tensor, value: float) -> torch.Tensor:
    t = t.clone()
    t.view(-1)[3] = value
    return t


SDPA = scaled_dot_product_attention
SHAPES = r"^need q \[\.\.\., T_q, d_k\], k \[\.\.\., T_k, d_k\], v \[\.\.\., T_k, d_v\], got "
MASK_MESSAGE = r"^{} must be a bool tensor \(True = may attend\), got {}; convert a 0/1 mask with `mask == 1`$"
ERROR_CASES = [
    # (id, callable, exception type, regex the message must match)
    *[
        (
            f"{n}_not_tensor",
            lambda n=n: SDPA(*_with(n, [[1.0, 2.0]])),
            TypeError,
            rf"^{n} must be a floating-point tensor, got list$",
        )
        for n in "qkv"
    ],
    *[
        (
            f"{n}_int_tensor",
            lambda n=n: SDPA(*_with(n, torch.ones(2, 5, 4, dtype=torch.int64))),
            TypeError,
            rf"^{n} must be a floating-point tensor, got torch\.int64$",
        )
        for n in "qkv"
    ],
    (
        "q_bool_tensor",
        lambda: SDPA(torch.ones(2, 3, 4, dtype=torch.bool), _k, _v),
        TypeError,
        r"^q must be a floating-point tensor, got torch\.bool$",
    ),
    (
        "q_1d",
        lambda: SDPA(torch.ones(4, dtype=F64), _k, _v),
        ValueError,
        r"^q, k and v need at least 2 axes: \[\.\.\., T, width\]$",
    ),
    (
        "v_1d",
        lambda: SDPA(_q, _k, torch.ones(5, dtype=F64)),
        ValueError,
        r"^q, k and v need at least 2 axes",
    ),
    (
        "dk_mismatch",
        lambda: SDPA(_q, torch.ones(2, 5, 3, dtype=F64), _v),
        ValueError,
        SHAPES + r"\(2, 3, 4\), \(2, 5, 3\), \(2, 5, 6\)$",
    ),
    (
        "tk_mismatch",
        lambda: SDPA(_q, _k, torch.ones(2, 4, 6, dtype=F64)),
        ValueError,
        SHAPES + r"\(2, 3, 4\), \(2, 5, 4\), \(2, 4, 6\)$",
    ),
    (
        "batch_not_broadcasting",
        lambda: SDPA(
            _q, torch.ones(3, 5, 4, dtype=F64), torch.ones(3, 5, 6, dtype=F64)
        ),
        ValueError,
        r"^the leading axes of q \(2, 3, 4\), k \(3, 5, 4\) and v \(3, 5, 6\) do not broadcast$",
    ),
    (
        "mask_float",
        lambda: SDPA(_q, _k, _v, torch.ones(3, 5)),
        TypeError,
        MASK_MESSAGE.format("allowed", r"torch\.float32"),
    ),
    (
        "mask_int",
        lambda: SDPA(_q, _k, _v, torch.ones(3, 5, dtype=torch.int64)),
        TypeError,
        MASK_MESSAGE.format("allowed", r"torch\.int64"),
    ),
    (
        "mask_not_tensor",
        lambda: SDPA(_q, _k, _v, [[True] * 5] * 3),
        TypeError,
        MASK_MESSAGE.format("allowed", "list"),
    ),
    (
        "mask_empty_axis",
        lambda: SDPA(_q, _k, _v, torch.ones(3, 0, dtype=torch.bool)),
        ValueError,
        r"^allowed \(3, 0\) must broadcast to the scores \[\.\.\., T_q, T_k\] = \(2, 3, 5\)$",
    ),
    (
        "mask_bad_shape",
        lambda: SDPA(_q, _k, _v, torch.ones(3, 4, dtype=torch.bool)),
        ValueError,
        r"^allowed \(3, 4\) must broadcast to the scores \[\.\.\., T_q, T_k\] = \(2, 3, 5\)$",
    ),
    (
        "mask_transposed",
        lambda: SDPA(_q, _k, _v, torch.ones(5, 3, dtype=torch.bool)),
        ValueError,
        r"^allowed \(5, 3\) must broadcast to the scores \[\.\.\., T_q, T_k\] = \(2, 3, 5\)$",
    ),
    (
        "mask_extra_leading_axis",
        lambda: SDPA(_q, _k, _v, torch.ones(4, 2, 3, 5, dtype=torch.bool)),
        ValueError,
        r"^allowed \(4, 2, 3, 5\) must broadcast to the scores \[\.\.\., T_q, T_k\] = \(2, 3, 5\)$",
    ),
    (
        "mask_extra_unit_axis_2d",
        lambda: SDPA(_q[0], _k[0], _v[0], torch.ones(1, 3, 5, dtype=torch.bool)),
        ValueError,
        r"^allowed \(1, 3, 5\) must broadcast to the scores \[\.\.\., T_q, T_k\] = \(3, 5\)$",
    ),
    (
        "empty_row_unknown",
        lambda: SDPA(_q, _k, _v, empty_row="nan"),
        ValueError,
        r"^empty_row must be one of \['error', 'zero'\], got 'nan'$",
    ),
    (
        "empty_row_not_str",
        lambda: SDPA(_q, _k, _v, empty_row=None),
        TypeError,
        r"^empty_row must be a str, one of \['error', 'zero'\], got NoneType$",
    ),
    (
        "causal_tq_bool",
        lambda: causal_allowed(True, 3),
        TypeError,
        r"^t_q must be an int, got bool$",
    ),
    (
        "causal_tk_float",
        lambda: causal_allowed(3, 2.0),
        TypeError,
        r"^t_k must be an int, got float$",
    ),
    (
        "causal_tq_zero",
        lambda: causal_allowed(0, 3),
        ValueError,
        r"^t_q must be >= 1, got 0$",
    ),
    (
        "causal_tk_negative",
        lambda: causal_allowed(3, -1),
        ValueError,
        r"^t_k must be >= 1, got -1$",
    ),
    (
        "causal_offset_negative",
        lambda: causal_allowed(2, 3, query_offset=-1),
        ValueError,
        r"^query_offset must be >= 0, got -1$",
    ),
    (
        "causal_offset_bool",
        lambda: causal_allowed(2, 3, query_offset=True),
        TypeError,
        r"^query_offset must be an int, got bool$",
    ),
    (
        "causal_offset_float",
        lambda: causal_allowed(2, 3, query_offset=1.0),
        TypeError,
        r"^query_offset must be an int, got float$",
    ),
    (
        "padding_not_bool",
        lambda: padding_allowed(torch.ones(2, 3)),
        TypeError,
        MASK_MESSAGE.format("valid", r"torch\.float32"),
    ),
    (
        "padding_int",
        lambda: padding_allowed(torch.ones(2, 3, dtype=torch.int64)),
        TypeError,
        MASK_MESSAGE.format("valid", r"torch\.int64"),
    ),
    (
        "padding_not_tensor",
        lambda: padding_allowed([[True, False]]),
        TypeError,
        MASK_MESSAGE.format("valid", "list"),
    ),
    (
        "padding_1d",
        lambda: padding_allowed(torch.ones(3, dtype=torch.bool)),
        ValueError,
        r"^valid must have shape \[B, T_k\], got \(3,\)$",
    ),
    (
        "padding_3d",
        lambda: padding_allowed(torch.ones(2, 1, 3, dtype=torch.bool)),
        ValueError,
        r"^valid must have shape \[B, T_k\], got \(2, 1, 3\)$",
    ),
    (
        "softmax_mask_float",
        lambda: masked_softmax(torch.zeros(2, 4), torch.ones(2, 4)),
        TypeError,
        MASK_MESSAGE.format("allowed", r"torch\.float32"),
    ),
    (
        "softmax_mask_not_tensor",
        lambda: masked_softmax(torch.zeros(2, 4), None),
        TypeError,
        MASK_MESSAGE.format("allowed", "NoneType"),
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_error_paths(call, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        call()
    assert type(info.value) is error  # not a subclass standing in for it


def test_library_never_uses_assert_for_checks():
    """`assert` vanishes under `python -O`; the checks must be explicit raises."""
    import ast
    import inspect

    import literate.parts.attention
    import literate.parts.checks

    for module in (literate.parts.attention, literate.parts.checks):
        tree = ast.parse(inspect.getsource(module))
        asserts = [
            node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)
        ]
        assert asserts == [], f"{module.__name__} uses assert at lines {asserts}"


# --------------------------------------------------------------------------------------
# 10. Hypothesis properties
# --------------------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_values = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False)


@st.composite
def attention_inputs(draw, *, allow_empty_rows: bool):
    """Random shapes, bounded float64 values, and a [B, T_q, T_k] bool mask."""
    b, t_q, t_k = (
        draw(st.integers(1, 3)),
        draw(st.integers(1, 6)),
        draw(st.integers(1, 6)),
    )
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 5))

    def tensor(*shape):
        n = math.prod(shape)
        return torch.tensor(
            draw(st.lists(_values, min_size=n, max_size=n)), dtype=F64
        ).reshape(shape)

    q, k, v = tensor(b, t_q, d_k), tensor(b, t_k, d_k), tensor(b, t_k, d_v)
    n = b * t_q * t_k
    allowed = torch.tensor(
        draw(st.lists(st.booleans(), min_size=n, max_size=n))
    ).reshape(b, t_q, t_k)
    if not allow_empty_rows:
        keep = draw(
            st.lists(st.integers(0, t_k - 1), min_size=b * t_q, max_size=b * t_q)
        )
        allowed.view(-1, t_k)[torch.arange(b * t_q), torch.tensor(keep)] = True
    return q, k, v, allowed


@PROPERTY_SETTINGS
@given(attention_inputs(allow_empty_rows=False))
def test_property_softmax_rows_convex_hull_and_torch_equality(case):
    q, k, v, allowed = case
    result = scaled_dot_product_attention(q, k, v, allowed)
    w = result.weights
    torch.testing.assert_close(
        w.sum(-1), torch.ones(w.shape[:-1], dtype=F64), atol=1e-12, rtol=0
    )
    assert torch.all(w[~allowed] == 0.0)  # exactly zero, not tiny
    assert torch.all(w >= 0.0)
    assert not result.empty_rows.any()

    # Each output coordinate lies between the smallest and largest allowed value.
    v_rows = v[:, None, :, :]  # [B, 1, T_k, d_v]
    mask = allowed[..., None]  # [B, T_q, T_k, 1]
    lo = torch.where(mask, v_rows, math.inf).amin(dim=-2)
    hi = torch.where(mask, v_rows, -math.inf).amax(dim=-2)
    assert torch.all(result.output >= lo - 1e-12)
    assert torch.all(result.output <= hi + 1e-12)

    torch.testing.assert_close(
        result.output, torch_sdpa(q, k, v, allowed), atol=1e-12, rtol=0
    )


@PROPERTY_SETTINGS
@given(attention_inputs(allow_empty_rows=True))
def test_property_zero_policy_never_nan(case):
    q, k, v, allowed = case
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    result = scaled_dot_product_attention(q, k, v, allowed, empty_row="zero")
    empty = ~allowed.any(dim=-1)
    assert torch.equal(result.empty_rows, empty)
    for t in (result.output, result.weights):
        assert not torch.isnan(t).any()
    assert torch.all(result.output[empty] == 0.0)
    assert torch.all(result.weights[empty] == 0.0)
    row_sums = result.weights.sum(-1)
    torch.testing.assert_close(
        row_sums[~empty], torch.ones_like(row_sums[~empty]), atol=1e-12, rtol=0
    )
    gq, gk, gv = grads(result.output, (q, k, v), torch.ones_like(result.output))
    assert all(torch.isfinite(g).all() for g in (gq, gk, gv))
    assert torch.all(gq[empty] == 0.0)
    if (~empty).any():
        theirs = torch_sdpa(q.detach(), k.detach(), v.detach(), allowed)
        torch.testing.assert_close(
            result.output.detach()[~empty], theirs[~empty], atol=1e-12, rtol=0
        )
    if empty.any():
        n_empty = int(empty.sum())
        with pytest.raises(
            ValueError,
            match=rf"^allowed leaves {n_empty} query row\(s\) with no key to attend to",
        ):
            scaled_dot_product_attention(q, k, v, allowed)


def test_half_precision_scores_that_exceed_float16_stay_finite():
    """Scores above float16's maximum (65504) come back finite: they stay in float32."""
    q = torch.full((1, 2, 4), 200.0, dtype=torch.float16)
    k = torch.full((1, 3, 4), 200.0, dtype=torch.float16)
    v = randn(gen(40), 1, 3, 2, dtype=torch.float16)
    result = scaled_dot_product_attention(q, k, v)
    assert result.scores.max().item() == 200.0 * 200.0 * 4 / 2  # 80,000 > 65,504
    assert torch.isfinite(result.scores).all() and torch.isfinite(result.output).all()


# --------------------------------------------------------------------------------------
# 11. The new contract: no value is read without a mask; NaN propagates; empty axes pass
# --------------------------------------------------------------------------------------


def test_attention_reads_a_value_only_to_refuse_empty_rows_of_a_given_mask():
    q, k, v = make_qkv(50, (2, 4, 3), (2, 5, 3), (2, 5, 2))
    allowed = random_mask(51, 2, 4, 5)  # every row keeps a key
    with HostSyncs() as no_mask:
        scaled_dot_product_attention(q, k, v)
        scaled_dot_product_attention(q, k, v, empty_row="error")
    with HostSyncs() as zero_policy:
        scaled_dot_product_attention(q, k, v, allowed, empty_row="zero")
    with HostSyncs() as error_policy:
        scaled_dot_product_attention(q, k, v, allowed)
    assert no_mask.calls == [] and zero_policy.calls == []
    assert error_policy.calls == [
        "__bool__"
    ]  # the one check: does any row have no key?


def test_refuse_empty_rows_names_its_argument_the_count_and_at_most_eight_rows():
    from literate.parts.attention import refuse_empty_rows

    refuse_empty_rows(
        "allowed", torch.zeros(3, 4, dtype=torch.bool)
    )  # nothing empty: no error
    empty = torch.zeros(2, 6, dtype=torch.bool)
    empty[0, 1] = empty[1, 5] = True
    with pytest.raises(
        ValueError,
        match=re.escape(
            "key_valid leaves 2 query row(s) with no key to attend to, at index [..., query] "
            "[[0, 1], [1, 5]]; fix the mask, or pass empty_row='zero' to give those rows a zero output"
        )
        + "$",
    ):
        refuse_empty_rows("key_valid", empty)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "m leaves 12 query row(s) with no key to attend to, at index [..., query] "
            "[[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [0, 5], [1, 0], [1, 1]];"
        ),
    ):
        refuse_empty_rows("m", torch.ones(2, 6, dtype=torch.bool))


def _poisoned(name: str, value: float):
    """q, k, v [2, 4, 3] with one entry of `name` (batch 0, row 1) replaced by `value`."""
    q, k, v = make_qkv(52, (2, 4, 3), (2, 4, 3), (2, 4, 3))
    t = {"q": q, "k": k, "v": v}
    t[name][0, 1, 2] = value
    return t["q"], t["k"], t["v"]


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "neg_inf"]
)
@pytest.mark.parametrize("name", "qkv")
def test_non_finite_input_propagates_like_torch_sdpa_and_does_not_raise(name, value):
    """A layer given NaN returns NaN, as PyTorch does: nothing is laundered, nothing raises."""
    q, k, v = _poisoned(name, value)
    ours = scaled_dot_product_attention(q, k, v).output
    theirs = torch_sdpa(q, k, v)
    assert not torch.isfinite(ours[0]).all()  # the poisoned batch item shows it
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs)) and torch.equal(
        torch.isinf(ours), torch.isinf(theirs)
    )
    torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0, equal_nan=True)
    clean = scaled_dot_product_attention(
        *make_qkv(52, (2, 4, 3), (2, 4, 3), (2, 4, 3))
    ).output
    assert torch.equal(ours[1], clean[1])  # the other batch item is untouched


def test_nan_reaches_exactly_the_rows_that_read_it_under_a_causal_mask():
    causal = causal_allowed(4, 4)
    q, k, v = _poisoned("q", math.nan)  # query 1 is NaN: only its own row
    out = scaled_dot_product_attention(q, k, v, causal).output
    assert (
        torch.isnan(out[0, 1]).all()
        and torch.isfinite(out[0, [0, 2, 3]]).all()
        and torch.isfinite(out[1]).all()
    )
    q, k, v = _poisoned("k", math.nan)  # key 1 is NaN: every query that may read it
    out = scaled_dot_product_attention(q, k, v, causal).output
    assert torch.isnan(out[0, 1:]).all() and torch.isfinite(out[1]).all()
    q, k, v = _poisoned("v", math.nan)  # value 1, coordinate 2, is NaN
    out = scaled_dot_product_attention(q, k, v, causal).output
    torch.testing.assert_close(
        out, torch_sdpa(q, k, v, causal), atol=1e-12, rtol=0, equal_nan=True
    )
    assert torch.isnan(out[0, 1:, 2]).all() and torch.isfinite(out[0, :, :2]).all()


def test_scores_that_overflow_float32_give_nan_like_torch_sdpa_instead_of_raising():
    q, k, v = torch.full((2, 4), 1e20), torch.full((3, 4), 1e20), torch.ones(3, 2)
    result = scaled_dot_product_attention(q, k, v)
    assert torch.isinf(result.scores).all()  # q k^T = 4e40 > float32's 3.4e38
    assert torch.isnan(result.output).all() and torch.isnan(torch_sdpa(q, k, v)).all()


def test_masked_softmax_equals_torch_softmax_over_the_allowed_entries():
    g = gen(53)
    scores = randn(g, 3, 4, 6, scale=3.0)
    allowed = random_mask(54, 3, 4, 6)
    expected = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
    torch.testing.assert_close(
        masked_softmax(scores, allowed), expected, atol=1e-15, rtol=0
    )
    # A mask that broadcasts: one [T_k] row of flags for every query.
    keys = torch.tensor([True, False, True, True, False, True])
    torch.testing.assert_close(
        masked_softmax(scores, keys),
        torch.softmax(scores.masked_fill(~keys, -math.inf), -1),
        atol=1e-15,
        rtol=0,
    )
    # A row with no allowed key is all zeros, not NaN.
    none = torch.zeros(6, dtype=torch.bool)
    assert torch.equal(masked_softmax(scores, none), torch.zeros_like(scores))


@pytest.mark.parametrize(
    "row",
    [
        [0.0, math.nan, 1.0],
        [math.inf, 0.0, 1.0],
        [math.inf, math.inf, 0.0],
        [-math.inf, 0.0, 1.0],
    ],
    ids=["nan", "inf", "two_inf", "one_neg_inf"],
)
def test_masked_softmax_with_every_key_allowed_is_torch_softmax_on_non_finite_scores(
    row,
):
    scores = torch.tensor([row], dtype=F64)
    ours = masked_softmax(scores, torch.ones(1, 3, dtype=torch.bool))
    torch.testing.assert_close(
        ours, torch.softmax(scores, dim=-1), atol=1e-15, rtol=0, equal_nan=True
    )


def test_masked_softmax_does_not_launder_all_neg_inf_allowed_scores_into_zeros():
    """BUG: a row whose *allowed* scores are all -inf (q or k holds -inf) is treated like a
    row with no allowed key and comes out as zeros; torch.softmax gives NaN, and so does
    F.scaled_dot_product_attention on the same q, k, v. The row maximum is tested for -inf
    instead of asking the mask whether the row has an allowed key."""
    scores = torch.tensor([[-math.inf, -math.inf]], dtype=F64)
    assert torch.isnan(torch.softmax(scores, dim=-1)).all()
    ours = masked_softmax(scores, torch.ones(1, 2, dtype=torch.bool))
    assert torch.isnan(ours).all(), (
        f"non-finite scores came out finite: {ours.tolist()}"
    )


def test_empty_axes_pass_through_like_torch_sdpa():
    """No query, or values of width 0: metadata only, the result is empty like F.sdpa's."""
    q, k, v = torch.ones(2, 0, 4, dtype=F64), _k, _v
    result = scaled_dot_product_attention(q, k, v)
    assert result.output.shape == (2, 0, 6) and result.weights.shape == (2, 0, 5)
    assert torch_sdpa(q, k, v).shape == (2, 0, 6)
    result = scaled_dot_product_attention(_q, _k, torch.ones(2, 5, 0, dtype=F64))
    assert result.output.shape == (2, 3, 0)
    torch.testing.assert_close(
        result.weights, scaled_dot_product_attention(_q, _k, _v).weights, atol=0, rtol=0
    )


def test_no_keys_at_all_is_refused_from_the_shapes():
    """With T_k = 0 there is nothing to average: F.sdpa returns zeros, ours refuses from
    the metadata (under either policy) instead of failing inside torch's amax."""
    q, k, v = _q, torch.ones(2, 0, 4, dtype=F64), torch.ones(2, 0, 6, dtype=F64)
    assert torch.equal(torch_sdpa(q, k, v), torch.zeros(2, 3, 6, dtype=F64))
    for policy in ("error", "zero"):
        with pytest.raises(
            ValueError, match=r"^k has no key to attend to: \(2, 0, 4\)$"
        ):
            scaled_dot_product_attention(q, k, v, empty_row=policy)
