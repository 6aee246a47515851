"""Tests for `literate.parts.positions`.

What is checked, and against what:

- the sinusoidal table against the reference values (float64, atol 1e-12),
  position zero, and the shift property PE[pos + k] = R_k PE[pos] over many k;
- `LearnedPositions` against Hugging Face's `GPT2Model` position embedding (`wpe`), forward
  and backward, with the same weights copied in;
- `rope_cache` against Hugging Face's `LlamaRotaryEmbedding`, and `apply_rope` against
  `apply_rotary_pos_emb` for q and k, in float64, with offsets (position_ids not starting
  at 0): bit-for-bit equal, because both compute the angles in float32 the same way;
- the interleaved layout against an explicit block-diagonal rotation matrix (Su et al.
  2021, sec. 3.2.2), and against rotate-half once the q/k projection rows are permuted
  (also against the permutation of Hugging Face's Llama conversion script);
- RoPE's relative-position property, the fact that v is never rotated, and the dtype
  contract (a float32 table serves float64 and bfloat16 inputs in their own dtype);
- every error path.

`transformers` is imported here only: it costs a few seconds once. Every random tensor comes
from a `torch.Generator` with a fixed seed.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import GPT2Config, LlamaConfig
from transformers.models.gpt2.modeling_gpt2 import GPT2Model
from transformers.models.llama.modeling_llama import (
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)
from transformers.models.llama.modeling_llama import rotate_half as hf_rotate_half

import literate.figures.positions as figures_positions
import literate.parts.positions as positions
from literate.numbers.golden import reference
from literate.parts.attention import causal_allowed, scaled_dot_product_attention
from literate.parts.positions import (
    LearnedPositions,
    apply_rope,
    apply_rope_interleaved,
    interleaved_to_half_permutation,
    rope_cache,
    rotate_half,
    sinusoidal_shift,
    sinusoidal_table,
)
from literate.tools.syncs import HostReads as HostSyncs

F64 = torch.float64
F32 = torch.float32


PROPERTY_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(seed: int, *shape: int, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(shape, generator=gen(seed), dtype=F64).to(dtype)


def float64_rope_tables(
    length: int, d_head: int, base: float = 10_000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate-half tables with the angles computed in float64 (an independent construction)."""
    theta = base ** (-torch.arange(0, d_head, 2, dtype=F64) / d_head)  # [d/2]
    angles = torch.arange(length, dtype=F64)[:, None] * theta  # [T, d/2]
    angles = torch.cat((angles, angles), dim=-1)  # [T, d]
    return angles.cos(), angles.sin()


# --------------------------------------------------------------------------------------
# 1. Sinusoidal table: golden values, position zero, dtype
# --------------------------------------------------------------------------------------


def test_sinusoidal_table_matches_golden_values():
    ref = reference()["positional_encoding"]
    ours = sinusoidal_table(ref["length"], ref["d_model"], dtype=F64)
    expected = torch.tensor(ref["table"], dtype=F64)
    torch.testing.assert_close(ours, expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("d_model", [2, 4, 8, 64, 512])
def test_position_zero_is_zero_one_repeated(d_model):
    row = sinusoidal_table(3, d_model, dtype=F64)[0]
    assert row.tolist() == [0.0, 1.0] * (d_model // 2)


def test_table_dtype_device_and_paper_layout():
    assert sinusoidal_table(4, 6).dtype == F32
    assert sinusoidal_table(4, 6, dtype=torch.bfloat16).dtype == torch.bfloat16
    table = sinusoidal_table(50, 6, dtype=F64, device="cpu")
    pos = torch.arange(50, dtype=F64)
    for i in range(3):
        angle = pos / 10_000.0 ** (2 * i / 6)
        torch.testing.assert_close(
            table[:, 2 * i], torch.sin(angle), atol=1e-15, rtol=0
        )
        torch.testing.assert_close(
            table[:, 2 * i + 1], torch.cos(angle), atol=1e-15, rtol=0
        )


def test_even_width_rows_all_have_length_sqrt_half_width():
    table = sinusoidal_table(1000, 10, dtype=F64)
    torch.testing.assert_close(
        table.norm(dim=-1),
        torch.full((1000,), math.sqrt(5), dtype=F64),
        atol=1e-12,
        rtol=0,
    )


# --------------------------------------------------------------------------------------
# 2. The shift property: PE[pos + k] = R_k PE[pos]
# --------------------------------------------------------------------------------------


def test_shift_moves_every_row_for_many_offsets():
    table = sinusoidal_table(1200, 32, dtype=F64)  # [1200, 32]
    ks = list(range(-300, 301, 7))
    shifts = torch.stack([sinusoidal_shift(k, 32) for k in ks])  # [K, 32, 32]
    moved = torch.einsum("kij,pj->kpi", shifts, table[300:900])  # [K, 600, 32]
    targets = torch.stack([table[300 + k : 900 + k] for k in ks])  # [K, 600, 32]
    assert (moved - targets).abs().max() < 1e-12


def test_shift_is_block_diagonal_rotation_and_a_group():
    r = sinusoidal_shift(5, 8)
    torch.testing.assert_close(r @ r.T, torch.eye(8, dtype=F64), atol=1e-14, rtol=0)
    mask = torch.block_diag(*[torch.ones(2, 2)] * 4).bool()
    assert (r[~mask] == 0).all()  # nothing mixes two frequencies
    assert torch.allclose(
        torch.linalg.det(r[:2, :2]), torch.tensor(1.0, dtype=F64)
    )  # a rotation, not a reflection
    assert torch.equal(sinusoidal_shift(0, 8), torch.eye(8, dtype=F64))
    torch.testing.assert_close(sinusoidal_shift(-5, 8), r.T, atol=1e-15, rtol=0)


@PROPERTY_SETTINGS
@given(
    a=st.integers(0, 3000),
    b=st.integers(0, 3000),
    half=st.integers(1, 24),
    base=st.floats(1.5, 1e5),
)
def test_property_shift_holds_for_any_offset_width_and_base(a, b, half, base):
    d = 2 * half
    table = sinusoidal_table(max(a, b) + 1, d, base=base, dtype=F64)
    torch.testing.assert_close(
        sinusoidal_shift(b - a, d, base=base) @ table[a], table[b], atol=1e-10, rtol=0
    )


def test_table_dot_products_depend_only_on_the_offset():
    table = sinusoidal_table(300, 16, dtype=F64)
    gram = table @ table.T  # [m, n]
    offset = torch.arange(300)[:, None] - torch.arange(300)[None, :]
    theta = 10_000.0 ** (-torch.arange(0, 16, 2, dtype=F64) / 16)
    expected = torch.cos(offset[..., None].to(F64) * theta).sum(
        -1
    )  # sum_i cos((m - n) w_i)
    torch.testing.assert_close(gram, expected, atol=1e-11, rtol=0)


# --------------------------------------------------------------------------------------
# 3. Learned positions, against GPT-2's wpe
# --------------------------------------------------------------------------------------


def gpt2_embedding_stage(max_length: int, d_model: int) -> GPT2Model:
    """A GPT2Model with no blocks: inputs_embeds + wpe(position_ids), then ln_f."""
    config = GPT2Config(
        n_embd=d_model,
        n_layer=0,
        n_head=2,
        n_positions=max_length,
        vocab_size=8,
        embd_pdrop=0.0,
        bos_token_id=None,
        eos_token_id=None,
    )
    return GPT2Model(config).to(F64).eval()


@pytest.mark.parametrize("offset", [0, 3])
def test_learned_positions_equal_gpt2_wpe_forward_and_backward(offset):
    torch.manual_seed(1)
    ours = LearnedPositions(12, 8, dtype=F64)
    hf = gpt2_embedding_stage(12, 8)
    with torch.no_grad():
        hf.wpe.weight.copy_(ours.embedding.weight)
    x = randn(2, 2, 5, 8).requires_grad_()
    x_hf = x.detach().clone().requires_grad_()
    position_ids = torch.arange(offset, offset + 5)[None]
    theirs = hf(inputs_embeds=x_hf, position_ids=position_ids).last_hidden_state
    mine = hf.ln_f(ours(x, offset=offset))  # the same final norm on top of our sum
    torch.testing.assert_close(mine, theirs, atol=1e-12, rtol=0)
    probe = randn(3, 2, 5, 8)
    (mine * probe).sum().backward()
    (theirs * probe).sum().backward()
    torch.testing.assert_close(x.grad, x_hf.grad, atol=1e-12, rtol=0)
    torch.testing.assert_close(
        ours.embedding.weight.grad, hf.wpe.weight.grad, atol=1e-12, rtol=0
    )
    unused = torch.ones(12, dtype=torch.bool)
    unused[offset : offset + 5] = False
    assert (
        ours.embedding.weight.grad[unused] == 0
    ).all()  # only the rows used get a gradient


def test_learned_positions_init_and_shapes():
    torch.manual_seed(0)
    wpe = LearnedPositions(1024, 64)
    assert (
        wpe.embedding.weight.shape == (1024, 64) and wpe.embedding.weight.dtype == F32
    )
    assert (
        abs(wpe.embedding.weight.std().item() - 0.02) < 0.002
    )  # GPT-2's initializer_range
    x = torch.zeros(3, 1024, 64)
    assert torch.equal(wpe(x), wpe.embedding.weight.detach().expand(3, 1024, 64))
    assert wpe(x[:, :1], offset=1023).shape == (3, 1, 64)


# --------------------------------------------------------------------------------------
# 4. RoPE against Hugging Face (float64, bit for bit)
# --------------------------------------------------------------------------------------


def hf_rotary(d_head: int, length: int, base: float) -> LlamaRotaryEmbedding:
    config = LlamaConfig(
        hidden_size=2 * d_head,
        num_attention_heads=2,
        head_dim=d_head,
        max_position_embeddings=length,
        rope_theta=base,
    )
    return LlamaRotaryEmbedding(config)


@pytest.mark.parametrize(
    "d_head, base", [(2, 10_000.0), (16, 10_000.0), (64, 500_000.0), (128, 10_000.0)]
)
@pytest.mark.parametrize("dtype", [F64, F32])
def test_rope_cache_equals_llama_rotary_embedding(d_head, base, dtype):
    length = 300
    hf = hf_rotary(d_head, length, base)
    x = torch.zeros(1, dtype=dtype)
    hf_cos, hf_sin = hf(x, torch.arange(length)[None])  # [1, T, d_head] in x's dtype
    cos, sin = rope_cache(length, d_head, base=base, dtype=dtype)
    assert hf_cos.dtype == cos.dtype == dtype
    assert torch.equal(cos, hf_cos[0]) and torch.equal(sin, hf_sin[0])


MAX_ERRORS: dict[str, float] = {}


@pytest.mark.parametrize("offset", [0, 1, 37])
def test_apply_rope_equals_apply_rotary_pos_emb_with_offset(offset):
    b, h, t, d = 2, 3, 9, 32
    hf = hf_rotary(d, 64, 10_000.0)
    q, k = randn(10 + offset, b, h, t, d), randn(20 + offset, b, h, t, d)
    position_ids = torch.arange(offset, offset + t).expand(b, t)  # [B, T]
    hf_cos, hf_sin = hf(q, position_ids)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    cos, sin = rope_cache(64, d)
    our_q, our_k = (
        apply_rope(q, cos, sin, offset=offset),
        apply_rope(k, cos, sin, offset=offset),
    )
    MAX_ERRORS[f"offset {offset}"] = max(
        (our_q - hf_q).abs().max().item(), (our_k - hf_k).abs().max().item()
    )
    assert torch.equal(our_q, hf_q) and torch.equal(our_k, hf_k)


def test_rotate_half_equals_hugging_face():
    x = randn(4, 2, 5, 12)
    assert torch.equal(rotate_half(x), hf_rotate_half(x))


# --------------------------------------------------------------------------------------
# 5. Layouts: the paper's rotation matrix, and the permutation between layouts
# --------------------------------------------------------------------------------------


def rotation_matrix(m: int, d: int) -> torch.Tensor:
    """R^d_{Theta, m} of Su et al. 2021, sec. 3.2.2, built explicitly (interleaved pairs)."""
    r = torch.zeros(d, d, dtype=F64)
    for i in range(d // 2):
        a = m * 10_000.0 ** (-2 * i / d)
        r[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=F64
        )
    return r


def test_interleaved_equals_the_explicit_rotation_matrix():
    d, length = 10, 40
    cos, sin = float64_rope_tables(length, d)
    x = randn(5, length, d)
    ours = apply_rope_interleaved(x, cos, sin)
    explicit = torch.stack([rotation_matrix(m, d) @ x[m] for m in range(length)])
    torch.testing.assert_close(ours, explicit, atol=1e-12, rtol=0)


def test_rotate_half_is_the_interleaved_rotation_reordered():
    d = 12
    cos, sin = rope_cache(30, d)
    p = interleaved_to_half_permutation(d)
    x = randn(6, 2, 30, d)
    assert torch.equal(
        apply_rope(x[..., p], cos, sin), apply_rope_interleaved(x, cos, sin)[..., p]
    )


def test_permutation_equals_hugging_face_conversion_script():
    # transformers' convert_llama_weights_to_hf.py: permute(w) for q_proj and k_proj.
    n_heads, d_head, d_model = 4, 8, 32
    w = randn(7, n_heads * d_head, d_model)
    hf_permuted = (
        w.view(n_heads, d_head // 2, 2, d_model)
        .transpose(1, 2)
        .reshape(n_heads * d_head, d_model)
    )
    p = interleaved_to_half_permutation(d_head)
    ours = w.view(n_heads, d_head, d_model)[:, p].reshape(n_heads * d_head, d_model)
    assert torch.equal(ours, hf_permuted)
    assert p.tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


@pytest.mark.parametrize("offset", [0, 11])
def test_layouts_give_the_same_scores_with_permuted_projection_rows(offset):
    n_heads, d_head, d_model, t = 3, 16, 48, 12
    w_q, w_k = (
        randn(8, n_heads * d_head, d_model) / 7,
        randn(9, n_heads * d_head, d_model) / 7,
    )
    x = randn(10, 2, t, d_model)  # [B, T, d_model]
    cos, sin = rope_cache(32, d_head)
    p = interleaved_to_half_permutation(d_head)

    def heads(w):  # [B, T, d_model] -> [B, H, T, d_head]
        return (
            (x @ w.T).view(2, t, n_heads, d_head).transpose(1, 2)
        )  # (B, H, T, d_head)

    def permuted(w):
        return w.view(n_heads, d_head, d_model)[:, p].reshape(
            n_heads * d_head, d_model
        )  # (H*d_head, d_model)

    interleaved = apply_rope_interleaved(
        heads(w_q), cos, sin, offset=offset
    ) @ apply_rope_interleaved(heads(w_k), cos, sin, offset=offset).transpose(-2, -1)
    half = apply_rope(heads(permuted(w_q)), cos, sin, offset=offset) @ apply_rope(
        heads(permuted(w_k)), cos, sin, offset=offset
    ).transpose(-2, -1)
    torch.testing.assert_close(half, interleaved, atol=1e-12, rtol=0)

    wrong = apply_rope(heads(w_q), cos, sin, offset=offset) @ apply_rope(
        heads(w_k), cos, sin, offset=offset
    ).transpose(-2, -1)
    diagonal = torch.eye(t, dtype=torch.bool)
    torch.testing.assert_close(
        wrong[..., diagonal], interleaved[..., diagonal], atol=1e-6, rtol=0
    )
    assert (wrong - interleaved)[..., ~diagonal].abs().max() > 0.5


# --------------------------------------------------------------------------------------
# 6. RoPE properties: relative positions, v never rotated, dtype contract
# --------------------------------------------------------------------------------------


def test_position_zero_is_the_identity_and_lengths_are_kept():
    cos, sin = rope_cache(100, 24)
    x = randn(11, 100, 24)
    y = apply_rope(x, cos, sin)
    assert torch.equal(y[0], x[0])
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-6, atol=0)


@PROPERTY_SETTINGS
@given(
    m=st.integers(0, 1000),
    n=st.integers(0, 1000),
    shift=st.integers(0, 1000),
    seed=st.integers(0, 10**6),
)
def test_property_rope_score_depends_only_on_the_offset(m, n, shift, seed):
    # Tolerance: rope_cache computes the angles in float32 (as Hugging Face does), so an
    # angle near position M is off by up to about M * 2**-24 rad, plus ~2**-24 from cos and
    # sin; the two scores compared involve four rotated vectors, each off by at most that
    # times its length: |difference| <= 4 (M + 2) 2**-24 |q| |k| = (M + 2) 2**-22 |q| |k|.
    d, top = 32, max(m, n) + shift
    cos, sin = rope_cache(top + 1, d)
    q, k = randn(seed, 2, d).unbind(0)

    def score(a, b):
        return (
            apply_rope(q[None], cos, sin, offset=a)
            * apply_rope(k[None], cos, sin, offset=b)
        ).sum()

    tolerance = (top + 2) * 2**-22 * (q.norm() * k.norm()).item()
    assert abs(score(m + shift, n + shift) - score(m, n)) < tolerance


def test_relative_property_with_float64_angles_is_exact_to_rounding():
    d, length = 48, 200
    cos, sin = float64_rope_tables(length, d)
    q, k = randn(12, d), randn(13, d)
    scores = (
        apply_rope(q.expand(length, d), cos, sin)
        @ apply_rope(k.expand(length, d), cos, sin).T
    )  # [m, n]
    offset = torch.arange(length)[:, None] - torch.arange(length)[None, :]
    spread = max(
        (scores[offset == o].max() - scores[offset == o].min()).item()
        for o in range(-length + 1, length)
    )
    assert spread < 1e-11 * (q.norm() * k.norm()).item()


def test_values_are_never_rotated_so_only_distances_matter():
    d_model, t = 16, 7
    w_q, w_k, w_v = (randn(s, d_model, d_model) / 4 for s in (20, 21, 22))
    cos, sin = rope_cache(512, d_model)
    x = randn(23, 2, t, d_model)

    def head(offset, rotate_v):
        q = apply_rope(x @ w_q.T, cos, sin, offset=offset)
        k = apply_rope(x @ w_k.T, cos, sin, offset=offset)
        v = x @ w_v.T
        if rotate_v:
            v = apply_rope(v, cos, sin, offset=offset)
        return scaled_dot_product_attention(q, k, v, causal_allowed(t, t)).output

    for offset in (1, 50, 400):
        torch.testing.assert_close(
            head(offset, False), head(0, False), atol=1e-5, rtol=0
        )
    assert (head(400, True) - head(0, True)).abs().max() > 0.1


def test_float32_cache_keeps_the_input_dtype_d15():
    cos32, sin32 = rope_cache(8, 16)
    cos64, sin64 = rope_cache(8, 16, dtype=F64)
    assert cos64.dtype == sin64.dtype == F64 and cos32.dtype == F32
    x = randn(30, 1, 4, 8, 16)
    out = apply_rope(x, cos32, sin32)
    assert out.dtype == F64
    assert torch.equal(
        out, apply_rope(x, cos64, sin64)
    )  # the same float32 angles, cast
    torch.testing.assert_close(
        out, apply_rope(x, *float64_rope_tables(8, 16)), atol=1e-6, rtol=0
    )
    for low in (torch.float16, torch.bfloat16):
        assert apply_rope(x.to(low), cos32, sin32).dtype == low
        assert apply_rope_interleaved(x.to(low), cos32, sin32).dtype == low


# --------------------------------------------------------------------------------------
# 7. Every error path
# --------------------------------------------------------------------------------------

GOOD_COS, GOOD_SIN = rope_cache(8, 4)
GOOD_X = torch.zeros(2, 5, 4)


ODD = positions.ODD_WIDTH_REASON
LONG = "x [B, T, d] must have offset + T <= max_length=8 (no vector for a position never trained), got "


@pytest.mark.parametrize(
    "call, error, message",
    [
        # lengths and widths: bools, floats, zero, negative, odd
        (
            lambda: sinusoidal_table(True, 4),
            TypeError,
            "length must be an int, got bool",
        ),
        (
            lambda: sinusoidal_table(5.0, 4),
            TypeError,
            "length must be an int, got float",
        ),
        (lambda: sinusoidal_table(0, 4), ValueError, "length must be >= 1, got 0"),
        (lambda: sinusoidal_table(-3, 4), ValueError, "length must be >= 1, got -3"),
        (
            lambda: sinusoidal_table(5, True),
            TypeError,
            "d_model must be an int, got bool",
        ),
        (
            lambda: sinusoidal_table(5, 7),
            ValueError,
            f"d_model must be even: {ODD}; got 7",
        ),
        (
            lambda: sinusoidal_table(5, 1),
            ValueError,
            f"d_model must be even: {ODD}; got 1",
        ),
        (lambda: rope_cache(False, 4), TypeError, "length must be an int, got bool"),
        (lambda: rope_cache(4.0, 4), TypeError, "length must be an int, got float"),
        (lambda: rope_cache(0, 4), ValueError, "length must be >= 1, got 0"),
        (
            lambda: rope_cache(4, 5),
            ValueError,
            "d_head must be even: coordinates rotate in pairs; got 5",
        ),
        (lambda: rope_cache(4, 0), ValueError, "d_head must be >= 1, got 0"),
        (lambda: sinusoidal_shift(True, 4), TypeError, "k must be an int, got bool"),
        (lambda: sinusoidal_shift(1.0, 4), TypeError, "k must be an int, got float"),
        (
            lambda: sinusoidal_shift(1, 3),
            ValueError,
            f"d_model must be even: {ODD}; got 3",
        ),
        (
            lambda: interleaved_to_half_permutation(7),
            ValueError,
            "d_head must be even: coordinates rotate in pairs; got 7",
        ),
        # bases
        (
            lambda: sinusoidal_table(5, 4, base=1.0),
            ValueError,
            "base must be > 1 (frequencies base^(-2i/d) must decrease), got 1.0",
        ),
        (
            lambda: sinusoidal_table(5, 4, base=0.5),
            ValueError,
            "base must be > 1 (frequencies base^(-2i/d) must decrease), got 0.5",
        ),
        (
            lambda: sinusoidal_table(5, 4, base=-10.0),
            ValueError,
            "base must be finite and > 0, got -10.0",
        ),
        (
            lambda: sinusoidal_table(5, 4, base=math.inf),
            ValueError,
            "base must be finite and > 0, got inf",
        ),
        (
            lambda: sinusoidal_table(5, 4, base=math.nan),
            ValueError,
            "base must be finite and > 0, got nan",
        ),
        (
            lambda: sinusoidal_table(5, 4, base=True),
            TypeError,
            "base must be a real number, got bool",
        ),
        (
            lambda: sinusoidal_table(5, 4, base="10000"),
            TypeError,
            "base must be a real number, got str",
        ),
        (
            lambda: rope_cache(5, 4, base=1),
            ValueError,
            "base must be > 1 (frequencies base^(-2i/d) must decrease), got 1",
        ),
        (
            lambda: sinusoidal_shift(1, 4, base=0.9),
            ValueError,
            "base must be > 1 (frequencies base^(-2i/d) must decrease), got 0.9",
        ),
        # dtypes
        (
            lambda: sinusoidal_table(5, 4, dtype=torch.int64),
            TypeError,
            "dtype must be one of [torch.float16, torch.bfloat16, torch.float32, torch.float64], got torch.int64",
        ),
        (
            lambda: sinusoidal_table(5, 4, dtype="float32"),
            TypeError,
            "dtype must be one of [torch.float16, torch.bfloat16, torch.float32, torch.float64], got 'float32'",
        ),
        (
            lambda: rope_cache(5, 4, dtype=torch.bool),
            TypeError,
            "dtype must be one of [torch.float16, torch.bfloat16, torch.float32, torch.float64], got torch.bool",
        ),
        (
            lambda: rope_cache(5, 4, dtype=torch.complex64),
            TypeError,
            "dtype must be one of [torch.float16, torch.bfloat16, torch.float32, torch.float64], got torch.complex64",
        ),
        # apply_rope: x
        (
            lambda: apply_rope(GOOD_X.long(), GOOD_COS, GOOD_SIN),
            TypeError,
            "x must be a floating-point tensor, got torch.int64",
        ),
        (
            lambda: apply_rope(GOOD_X.tolist(), GOOD_COS, GOOD_SIN),
            TypeError,
            "x must be a floating-point tensor, got list",
        ),
        (
            lambda: apply_rope(torch.zeros(4), GOOD_COS, GOOD_SIN),
            ValueError,
            "x must be [..., T, d_head], d_head even, got (4,)",
        ),
        (
            lambda: apply_rope(torch.zeros(2, 5, 3), GOOD_COS, GOOD_SIN),
            ValueError,
            "x must be [..., T, d_head], d_head even, got (2, 5, 3)",
        ),
        # apply_rope: cos/sin
        (
            lambda: apply_rope(GOOD_X, GOOD_COS, GOOD_SIN[:7]),
            ValueError,
            "positions 0..4 of width 4 need cos and sin [>= 5, 4], got (8, 4), (7, 4)",
        ),
        (
            lambda: apply_rope(GOOD_X, GOOD_COS[:, :2], GOOD_SIN[:, :2]),
            ValueError,
            "positions 0..4 of width 4 need cos and sin [>= 5, 4], got (8, 2), (8, 2)",
        ),
        (
            lambda: apply_rope(GOOD_X, GOOD_COS[None], GOOD_SIN[None]),
            ValueError,
            "cos must have 2 axes, got (1, 8, 4)",
        ),
        (
            lambda: apply_rope(GOOD_X, GOOD_COS.numpy(), GOOD_SIN),
            TypeError,
            "cos must be a floating-point tensor, got ndarray",
        ),
        (
            lambda: apply_rope(GOOD_X, GOOD_COS, GOOD_SIN.long()),
            TypeError,
            "sin must be a floating-point tensor, got torch.int64",
        ),
        # apply_rope: x too long for the cache, offsets
        (
            lambda: apply_rope(torch.zeros(2, 9, 4), GOOD_COS, GOOD_SIN),
            ValueError,
            "positions 0..8 of width 4 need cos and sin [>= 9, 4], got (8, 4), (8, 4)",
        ),
        (
            lambda: apply_rope(GOOD_X, GOOD_COS, GOOD_SIN, offset=4),
            ValueError,
            "positions 4..8 of width 4 need cos and sin [>= 9, 4], got (8, 4), (8, 4)",
        ),
        (
            lambda: apply_rope(GOOD_X, GOOD_COS, GOOD_SIN, offset=-1),
            ValueError,
            "offset must be >= 0, got -1",
        ),
        (
            lambda: apply_rope(GOOD_X, GOOD_COS, GOOD_SIN, offset=True),
            TypeError,
            "offset must be an int, got bool",
        ),
        (
            lambda: apply_rope(GOOD_X, GOOD_COS, GOOD_SIN, offset=1.0),
            TypeError,
            "offset must be an int, got float",
        ),
        (
            lambda: apply_rope_interleaved(GOOD_X, GOOD_COS, GOOD_SIN, offset=-2),
            ValueError,
            "offset must be >= 0, got -2",
        ),
        (
            lambda: apply_rope_interleaved(torch.zeros(2, 9, 4), GOOD_COS, GOOD_SIN),
            ValueError,
            "positions 0..8 of width 4 need cos and sin [>= 9, 4], got (8, 4), (8, 4)",
        ),
        (
            lambda: apply_rope_interleaved(GOOD_X, GOOD_COS, GOOD_SIN[:5]),
            ValueError,
            "positions 0..4 of width 4 need cos and sin [>= 5, 4], got (8, 4), (5, 4)",
        ),
        # LearnedPositions: construction
        (lambda: LearnedPositions(0, 4), ValueError, "max_length must be >= 1, got 0"),
        (
            lambda: LearnedPositions(True, 4),
            TypeError,
            "max_length must be an int, got bool",
        ),
        (
            lambda: LearnedPositions(8, 4.0),
            TypeError,
            "d_model must be an int, got float",
        ),
        (
            lambda: LearnedPositions(8, 4, init_std=0.0),
            ValueError,
            "init_std must be finite and > 0, got 0.0",
        ),
        (
            lambda: LearnedPositions(8, 4, dtype=torch.int32),
            TypeError,
            "dtype must be one of [torch.float16, torch.bfloat16, torch.float32, torch.float64], got torch.int32",
        ),
        # LearnedPositions: forward
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(1, 9, 4)),
            ValueError,
            LONG + "offset=0 and x (1, 9, 4)",
        ),
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(1, 2, 4), offset=7),
            ValueError,
            LONG + "offset=7 and x (1, 2, 4)",
        ),
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(1, 2, 4), offset=-1),
            ValueError,
            "offset must be >= 0, got -1",
        ),
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(1, 2, 4), offset=True),
            TypeError,
            "offset must be an int, got bool",
        ),
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(2, 4)),
            ValueError,
            "x must be [B, T, d_model], got (2, 4)",
        ),
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(1, 2, 2, 4)),
            ValueError,
            "x must be [B, T, d_model], got (1, 2, 2, 4)",
        ),
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(1, 2, 5)),
            ValueError,
            "x must have last axis 4, got (1, 2, 5)",
        ),
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(1, 2, 4, dtype=torch.long)),
            TypeError,
            "x must be a floating-point tensor, got torch.int64",
        ),
        (
            lambda: LearnedPositions(8, 4)(torch.zeros(1, 2, 4, dtype=F64)),
            TypeError,
            "x is torch.float64, the layer's parameters torch.float32",
        ),
    ],
)
def test_error_paths(call, error, message):
    """Every refusal: its type and its whole message, which starts with the argument's name."""
    with pytest.raises(error, match="^" + re.escape(message) + "$") as info:
        call()
    assert type(info.value) is error


def test_check_rope_returns_the_offset_and_base_above_one_takes_the_name_first():
    import numpy as np

    rows = positions.check_rope(GOOD_X, GOOD_COS, GOOD_SIN, np.int64(3))
    t = GOOD_X.shape[-2]
    assert rows == slice(3, 3 + t) and type(rows.start) is int
    assert positions.check_rope(GOOD_X, GOOD_COS, GOOD_SIN, 0) == slice(0, t)
    base = positions.base_above_one("rope_base", 500_000)
    assert base == 500_000.0 and type(base) is float
    with pytest.raises(
        ValueError,
        match=r"^rope_base must be > 1 \(frequencies base\^\(-2i/d\) must decrease\), "
        r"got 1$",
    ):
        positions.base_above_one("rope_base", 1)
    with pytest.raises(TypeError, match=r"^rope_base must be a real number, got str$"):
        positions.base_above_one("rope_base", "10000")


def test_apply_rope_reads_no_value_nan_propagates_and_empty_passes():
    """Metadata only: a NaN coordinate turns into NaN in its own pair (i, i + d/2) and
    nowhere else, as in Hugging Face's apply_rotary_pos_emb; no position is an error."""
    cos, sin = rope_cache(8, 8)
    x = randn(31, 2, 5, 8)
    x[1, 3, 2] = math.nan
    with HostSyncs() as syncs:
        out = apply_rope(x, cos, sin)
        out_interleaved = apply_rope_interleaved(x, cos, sin)
    assert syncs.calls == []
    expected = torch.zeros(2, 5, 8, dtype=torch.bool)
    expected[1, 3, [2, 6]] = True  # rotate-half pairs coordinate 2 with 2 + 4
    assert torch.equal(torch.isnan(out), expected)
    hf_q, _ = apply_rotary_pos_emb(
        x, x, cos[:5].to(F64), sin[:5].to(F64), unsqueeze_dim=0
    )
    assert torch.equal(torch.isnan(hf_q), expected)
    expected_interleaved = torch.zeros(2, 5, 8, dtype=torch.bool)
    expected_interleaved[1, 3, [2, 3]] = True  # interleaved pairs 2 with 3
    assert torch.equal(torch.isnan(out_interleaved), expected_interleaved)
    assert apply_rope(torch.zeros(2, 0, 4), GOOD_COS, GOOD_SIN).shape == (2, 0, 4)
    assert rotate_half(torch.zeros(3, 0)).shape == (3, 0)


def test_learned_positions_pass_nan_through():
    wpe = LearnedPositions(8, 4)
    x = torch.zeros(1, 3, 4)
    x[0, 1, 2] = math.nan
    out = wpe(x)
    assert torch.isnan(out[0, 1, 2]) and torch.isnan(out).sum() == 1


def test_rotate_half_refuses_an_odd_width():
    with pytest.raises(
        ValueError, match=r"^x must have an even last axis, got \(3,\)$"
    ):
        rotate_half(torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"^x must have an even last axis, got \(\)$"):
        rotate_half(torch.tensor(1.0))
    with pytest.raises(
        TypeError, match=r"^x must be a floating-point tensor, got torch\.int64$"
    ):
        rotate_half(torch.tensor([1, 2]))
    torch.testing.assert_close(
        rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])),
        torch.tensor([-3.0, -4.0, 1.0, 2.0]),
    )


def test_relative_figure_data_shows_the_property():
    curves = figures_positions.relative_score_curves()
    rope, absolute = curves["rope"], curves["absolute"]
    assert abs(rope - rope[0]).max() < 1e-4  # the three RoPE curves coincide
    assert abs(absolute - absolute[0]).max() > 0.5  # the additive ones do not


def test_report_max_errors_against_hugging_face():
    # Runs after the parametrized equivalence tests in this file; printed with `pytest -s`.
    if MAX_ERRORS:
        print("max |ours - HF| for apply_rope:", MAX_ERRORS)
        assert max(MAX_ERRORS.values()) == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize(
    "layout, rotary_dim",
    [("half", None), ("half", 8), ("interleaved", None), ("interleaved", 8)],
)
def test_the_layers_rope_pass_is_apply_rope_bit_for_bit(dtype, layout, rotary_dim):
    """`RotaryEmbedding.pair` turns q and k with `x * cos + roll(x) * [-sin, sin]` (one op fewer than
    rotate_half): the same products, so the same bits as chapter 2's apply_rope / apply_rope_interleaved,
    at an offset and with per-row positions, for a full and a partial rotary width."""
    from literate.parts.positions import RotaryEmbedding, apply_rope_interleaved

    g = torch.Generator().manual_seed(5)
    rope = RotaryEmbedding(16, rotary_dim=rotary_dim, layout=layout)
    r = rope.rotary_dim
    q = torch.randn(2, 4, 3, 16, generator=g).to(dtype)
    k = torch.randn(2, 2, 3, 16, generator=g).to(dtype)
    cos, sin = rope_cache(64, r)
    turn = apply_rope if layout == "half" else apply_rope_interleaved
    rows = torch.tensor([[0, 1, 2], [5, 6, 7]])

    def expected(x, **where):
        return torch.cat((turn(x[..., :r], cos, sin, **where), x[..., r:]), dim=-1)

    for where in ({"offset": 0}, {"offset": 9}, {"offset": 5, "positions": rows}):
        got_q, got_k = rope.pair(q, k, **where)
        assert torch.equal(got_q, expected(q, **where)) and torch.equal(
            got_k, expected(k, **where)
        )
        assert torch.equal(rope(q, **where), got_q)
