"""Chapter 10's MLA, written out: the multiply-add counts of the two orders
(`literate.numbers.mla_flops`) against PyTorch's FlopCounterMode on the layers
themselves at DeepSeek-V3's sizes, and against chapter 11's `decoding_flops`; the
crossover against its closed form; the shapes of DeepSeek-V3's layer against Hugging
Face's; and RoPE's relative property, which keeps W_uk out of a rotated query."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_deepseek

from literate.minimal.mla import AbsorbedLatentAttention
from literate.minimal.mla import MultiHeadLatentAttention as MinimalLatentAttention
from literate.minimal.positions import apply_rope, rope_tables
from literate.models.deepseek_v3 import mla_from_hf_config
from literate.numbers.flops import LatentShape, decoding_flops
from literate.numbers.mla_flops import (
    absorbed_cheaper_below,
    absorbed_multiply_adds,
    naive_multiply_adds,
)
from literate.numbers.published import published_config

V3 = published_config("DeepSeek-V3")
SIZES = {
    "n_heads": V3.num_attention_heads,
    "kv_lora_rank": V3.kv_lora_rank,
    "qk_nope_head_dim": V3.qk_nope_head_dim,
    "qk_rope_head_dim": V3.qk_rope_head_dim,
    "v_head_dim": V3.v_head_dim,
}
MINIMAL = {"d_model": V3.hidden_size, "q_lora_rank": V3.q_lora_rank, **SIZES}


def shared_multiply_adds(layer: torch.nn.Module) -> int:
    """Per query token, the projections both orders run: q_a, q_b, kv_a and o."""
    names = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "o_proj")
    return sum(getattr(layer, name).weight.numel() for name in names)


@pytest.fixture(scope="module")
def v3_layer():
    with torch.device("meta"):
        return mla_from_hf_config(V3)


def counted_flops(layer, n_queries: int, n_cached: int) -> int:
    """FlopCounterMode's total for n queries after n_cached tokens in a LatentCache
    (none when n_cached is 0), on the meta device: shapes, no memory."""
    with torch.device("meta"), torch.no_grad():
        x = torch.empty(1, n_queries, V3.hidden_size)
        cache = None
        if n_cached:
            cache = layer.new_cache(batch=1, capacity=n_cached + n_queries)
            cache.next_pos = n_cached  # as if a prefill had written them
        with FlopCounterMode(display=False) as counter:
            layer(x, causal=True, cache=cache)
    return counter.get_total_flops()


@pytest.mark.parametrize(
    ("n_queries", "n_keys"), [(1, 2), (1, 4096), (7, 300), (200, 4096), (16, 16)]
)
def test_the_counts_are_what_the_hardened_layer_runs(v3_layer, n_queries, n_keys):
    shared = n_queries * shared_multiply_adds(v3_layer)
    cached = n_keys - n_queries
    for absorb, count in (
        ("never", naive_multiply_adds),
        ("always", absorbed_multiply_adds),
    ):
        v3_layer.absorb = absorb
        flops = counted_flops(v3_layer, n_queries, cached)
        assert flops == 2 * (shared + count(n_queries, n_keys, **SIZES)), absorb


@pytest.mark.parametrize("n_tokens", [3, 64])
def test_the_counts_are_what_the_minimal_layers_run(n_tokens):
    with torch.device("meta"):
        naive = MinimalLatentAttention(**MINIMAL)
        absorbed = AbsorbedLatentAttention(**MINIMAL)
    shared = n_tokens * shared_multiply_adds(naive)
    for layer, count in (
        (naive, naive_multiply_adds),
        (absorbed, absorbed_multiply_adds),
    ):
        with torch.device("meta"), FlopCounterMode(display=False) as counter:
            layer(torch.empty(2, n_tokens, V3.hidden_size), *rope_tables(64, n_tokens))
        per_row = count(n_tokens, n_tokens, **SIZES)
        assert counter.get_total_flops() == 2 * 2 * (shared + per_row)  # 2 batch rows


@pytest.mark.parametrize("keys", [2, 100, 4096])
def test_one_query_agrees_with_chapter_11s_decoding_flops(keys):
    """decoding_flops counts a whole step; the two orders differ only where ours
    count, so their difference is twice ours."""

    def step(absorb: str) -> int:
        latent = LatentShape(
            V3.q_lora_rank,
            V3.kv_lora_rank,
            V3.qk_nope_head_dim,
            V3.qk_rope_head_dim,
            V3.v_head_dim,
            absorb=absorb,
        )
        return decoding_flops(
            d_model=V3.hidden_size,
            n_layers=1,
            n_heads=V3.num_attention_heads,
            d_ff=1,
            vocab=1,
            keys=keys,
            latent=latent,
        )["total"]

    ours = naive_multiply_adds(1, keys, **SIZES) - absorbed_multiply_adds(
        1, keys, **SIZES
    )
    assert step("never") - step("always") == 2 * ours
    assert ours > 0  # one query: the absorbed order is the cheaper


def closed_form(keys: int) -> float:
    """Absorbed < naive exactly when n < this (2r > d_nope + d_v)."""
    r, up = SIZES["kv_lora_rank"], SIZES["qk_nope_head_dim"] + SIZES["v_head_dim"]
    return keys * r * up / (r * up + keys * (2 * r - up))


@pytest.mark.parametrize("keys", [1, 2, 64, 512, 4096, 32_768, 163_840])
def test_the_crossover_is_the_closed_form(keys):
    below = absorbed_cheaper_below(keys, **SIZES)
    assert below == math.ceil(closed_form(keys))
    if below > 1:
        n = below - 1
        assert absorbed_multiply_adds(n, keys, **SIZES) < naive_multiply_adds(
            n, keys, **SIZES
        )
    assert absorbed_multiply_adds(below, keys, **SIZES) >= naive_multiply_adds(
        below, keys, **SIZES
    )
    r, up = SIZES["kv_lora_rank"], SIZES["qk_nope_head_dim"] + SIZES["v_head_dim"]
    assert below <= math.ceil(r * up / (2 * r - up)) == 171


def test_a_small_latent_is_always_cheaper_absorbed():
    """With 2r < d_nope + d_v the absorbed order costs less per pair and per query
    than the naive one per key: cheaper for every n <= T, and the answer is T + 1."""
    small = dict(SIZES, kv_lora_rank=64)
    assert absorbed_cheaper_below(10, **small) == 11
    assert all(
        absorbed_multiply_adds(n, 10, **small) < naive_multiply_adds(n, 10, **small)
        for n in range(1, 11)
    )


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"n_queries": 0}, ValueError, "n_queries must be >= 1"),
        ({"n_keys": True}, TypeError, "n_keys must be an int"),
        ({"kv_lora_rank": 2.5}, TypeError, "kv_lora_rank must be an int"),
        ({"n_heads": -1}, ValueError, "n_heads must be >= 1"),
    ],
)
def test_bad_sizes_are_refused_by_name(change, error, message):
    arguments = {"n_queries": 1, "n_keys": 8, **SIZES} | change
    n, t = arguments.pop("n_queries"), arguments.pop("n_keys")
    for count in (naive_multiply_adds, absorbed_multiply_adds):
        with pytest.raises(error, match=message):
            count(n, t, **arguments)


def test_v3_shapes_are_hugging_faces_and_the_equations():
    with torch.device("meta"):
        ours = MinimalLatentAttention(**MINIMAL)
        theirs = hf_deepseek.DeepseekV3Attention(V3, layer_idx=0)
    shapes = {n: tuple(p.shape) for n, p in ours.named_parameters()}
    assert shapes == {n: tuple(p.shape) for n, p in theirs.named_parameters()}
    h, d = SIZES["n_heads"], V3.hidden_size
    r, nope = SIZES["kv_lora_rank"], SIZES["qk_nope_head_dim"]
    rope, d_v, c_q = SIZES["qk_rope_head_dim"], SIZES["v_head_dim"], V3.q_lora_rank
    assert shapes == {
        "q_a_proj.weight": (c_q, d),  # W_dq
        "q_a_layernorm.weight": (c_q,),
        "q_b_proj.weight": (h * (nope + rope), c_q),  # W_uq, W_qr per head
        "kv_a_proj_with_mqa.weight": (r + rope, d),  # W_dkv over W_kr
        "kv_a_layernorm.weight": (r,),
        "kv_b_proj.weight": (h * (nope + d_v), r),  # W_uk, W_uv per head
        "o_proj.weight": (d, h * d_v),
    }
    assert (d, h, c_q, r, nope, rope, d_v) == (7168, 128, 1536, 512, 128, 64, 128)


def rotation_matrix(position: int, width: int) -> torch.Tensor:
    """R_position from chapter 2's minimal apply_rope, applied to each basis vector."""
    cos, sin = rope_tables(width, position + 1)
    basis = torch.eye(width, dtype=torch.float64)[:, None]  # [width, 1, width]
    return apply_rope(basis, cos[position:].double(), sin[position:].double())[:, 0].T


def test_rope_is_relative_so_w_uk_cannot_fold_into_the_query():
    torch.manual_seed(0)
    w_uk = torch.randn(8, 5, dtype=torch.float64)
    for m, n in ((0, 3), (4, 7), (9, 12), (2, 9)):
        folded = rotation_matrix(m, 8).T @ rotation_matrix(n, 8) @ w_uk
        assert torch.allclose(folded, rotation_matrix(n - m, 8) @ w_uk, atol=1e-5)
    one = rotation_matrix(0, 8).T @ rotation_matrix(3, 8) @ w_uk
    other = rotation_matrix(0, 8).T @ rotation_matrix(4, 8) @ w_uk
    assert (one - other).abs().max() > 0.1  # another distance, another matrix
