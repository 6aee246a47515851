"""StreamingLLM's cache (literate/parts/sink_cache.py) against a reference written from
the paper (Xiao et al. 2024, sec. 3.2).

transformers 5.25 ships no sink cache, so the reference here is independent: it keeps
every token's unrotated query, key and value, picks the kept tokens by the paper's rule
(the first S, and the last W - S), turns them with RoPE as complex numbers at their
positions within the cache, and attends with an explicit softmax. Float64 throughout,
with float64 RoPE tables: the two differ only by the order of float64 operations, so
1e-12 (the outputs are of order 1).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from literate.parts.multi_head import MultiHeadAttention, merge_heads
from literate.parts.sink_cache import SinkRingCache, streaming_attention
from literate.parts.window import SlidingWindowAttention
from literate.tools.syncs import host_reads

F64 = torch.float64
B, H, H_KV, D = 2, 4, 2, 8


def tables(n: int, d: int, base: float = 10_000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 RoPE tables [n, d], rotate-half layout."""
    inv = base ** -(torch.arange(0, d, 2, dtype=F64) / d)
    angles = torch.outer(torch.arange(n, dtype=F64), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rope_complex(x: torch.Tensor, positions: list[int], base: float = 10_000.0):
    """RoPE as a product of complex numbers: pair (i, i + d/2) is x_i + j x_{i+d/2},
    turned by exp(j m theta_i) at position m (Su et al. 2021, rotate-half layout)."""
    d = x.shape[-1]
    theta = base ** -(torch.arange(0, d, 2, dtype=F64) / d)
    m = torch.tensor(positions, dtype=F64)
    z = torch.complex(x[..., : d // 2], x[..., d // 2 :])
    z = z * torch.polar(torch.ones_like(m[:, None] * theta), m[:, None] * theta)
    return torch.cat((z.real, z.imag), dim=-1)


def reference_stream(q, k, v, *, sinks: int, window: int) -> torch.Tensor:
    """q [B, H, T, d], k, v [B, H_kv, T, d], all before RoPE: step t's output from the
    tokens StreamingLLM keeps, at their positions within the cache -> [B, H, T, d]."""
    outs = []
    for t in range(q.shape[2]):
        kept = [p for p in range(t + 1) if p < sinks or p > t - (window - sinks)]
        places = list(range(len(kept)))  # sec. 3.2: positions within the cache
        kk = rope_complex(k[:, :, kept], places)
        qq = rope_complex(q[:, :, t : t + 1], places[-1:])
        kk = kk.repeat_interleave(H // H_KV, dim=1)
        vv = v[:, :, kept].repeat_interleave(H // H_KV, dim=1)
        weights = torch.softmax(qq @ kk.transpose(-1, -2) / D**0.5, dim=-1)
        outs.append(weights @ vv)
    return torch.cat(outs, dim=2)


def streamed(q, k, v, cache: SinkRingCache, cos, sin) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat(
            [
                streaming_attention(
                    q[:, :, t : t + 1],
                    k[:, :, t : t + 1],
                    v[:, :, t : t + 1],
                    cache,
                    cos,
                    sin,
                )
                for t in range(q.shape[2])
            ],
            dim=2,
        )


def qkv(t: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, h, t, D, generator=g, dtype=F64) for h in (H, H_KV, H_KV))


def test_by_hand_step_20_keeps_the_four_sinks_and_the_last_four():
    cache = SinkRingCache(1, 1, 1, window=8, sinks=4)
    for p in range(21):  # each key its own text position
        k, _ = cache.update(torch.full((1, 1, 1, 1), float(p)), torch.zeros(1, 1, 1, 1))
    assert k.flatten().tolist() == [0, 1, 2, 3, 17, 18, 19, 20]
    assert cache.kept() == [0, 1, 2, 3, 17, 18, 19, 20]
    assert k.shape[2] == 8  # at cache positions 0 .. 7


@pytest.mark.parametrize("sinks, window", [(4, 8), (1, 5), (3, 4), (0, 6), (4, 16)])
def test_streaming_equals_the_papers_recomputation_far_past_the_window(sinks, window):
    q, k, v = qkv(100)
    cos, sin = tables(window, D)
    cache = SinkRingCache(B, H_KV, D, window=window, sinks=sinks, dtype=F64)
    ours = streamed(q, k, v, cache, cos, sin)
    theirs = reference_stream(q, k, v, sinks=sinks, window=window)
    assert (ours - theirs).abs().max() < 1e-12
    assert theirs.abs().max() > 0.1  # the outputs are of order 1


def test_the_cache_memory_stays_constant():
    q, k, v = qkv(100)
    cos, sin = tables(8, D)
    cache = SinkRingCache(B, H_KV, D, window=8, sinks=4, dtype=F64)
    storage = (
        cache.nbytes,
        cache.ring.k.data_ptr(),
        cache.ring.v.data_ptr(),
        cache.k_sinks.data_ptr(),
        cache.v_sinks.data_ptr(),
    )
    assert cache.nbytes == 2 * B * H_KV * 8 * D * 8  # k and v, W slots, float64
    with torch.no_grad():
        for t in range(100):
            one = (x[:, :, t : t + 1] for x in (q, k, v))
            streaming_attention(*one, cache, cos, sin)
            assert (
                cache.nbytes,
                cache.ring.k.data_ptr(),
                cache.ring.v.data_ptr(),
                cache.k_sinks.data_ptr(),
                cache.v_sinks.data_ptr(),
            ) == storage
            assert len(cache.kept()) == min(t + 1, 8)


def test_a_layer_decoding_equals_its_forward_over_the_kept_tokens():
    """Chapter 3's layer: each step's output is its full forward, run afresh on the
    kept tokens only (positions 0 .. n - 1), read at the last."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(32, H, H_KV, rope=True).double()
    x = torch.randn(B, 50, 32, dtype=F64)
    cos, sin = attn.rope.tables(8)
    cache = SinkRingCache(B, H_KV, D, window=8, sinks=4, dtype=F64)
    with torch.no_grad():
        for t in range(50):
            token = x[:, t : t + 1]
            k_t, v_t = attn.keys_values(token)
            out = streaming_attention(attn.queries(token), k_t, v_t, cache, cos, sin)
            again = attn(x[:, cache.kept()], causal=True)[:, -1:]
            assert (attn.o_proj(merge_heads(out)) - again).abs().max() < 1e-12, t


def test_text_positions_give_another_output_once_the_window_is_full():
    """Turning the kept keys at their text positions (as a ring's are) agrees until
    the cache is full, then differs: the sinks' distances to the query are not the
    text's."""
    q, k, v = qkv(30)
    cos, sin = tables(30, D)
    cache = SinkRingCache(B, H_KV, D, window=8, sinks=4, dtype=F64)
    with torch.no_grad():
        for t in range(30):
            kept = list(range(min(t + 1, 4))) + list(range(max(4, t - 3), t + 1))
            out = streaming_attention(
                *(x[:, :, t : t + 1] for x in (q, k, v)), cache, cos, sin
            )
            assert cache.kept() == kept
            at_text = F.scaled_dot_product_attention(
                rope_complex(q[:, :, t : t + 1], [t]),
                rope_complex(k[:, :, kept], kept),
                v[:, :, kept],
                enable_gqa=True,
            )
            gap = (out - at_text).abs().max()
            assert gap < 1e-12 if t < 8 else gap > 1e-3, (t, gap)


def test_without_sinks_it_is_the_chapters_ring():
    """sinks=0: RoPE's scores depend on distances only, and without sinks every kept
    key is as far from the query in the cache as in the text: the chapter's windowed
    layer, decoding through its ring at text positions, gives the same output. To
    1e-5: that layer's RoPE tables are float32 (as Hugging Face's), read at other rows
    (the text's positions, up to 39), rounded otherwise (float32: 6e-8 relative)."""
    torch.manual_seed(1)
    layer = SlidingWindowAttention(32, H, H_KV, window=6, rope=True).double()
    x = torch.randn(B, 40, 32, dtype=F64)
    cos, sin = layer.rope.tables(6)
    cache = SinkRingCache(B, H_KV, D, window=6, sinks=0, dtype=F64)
    ring = layer.new_cache(batch=B, capacity=40)
    with torch.no_grad():
        full = layer(x, causal=True)
        for t in range(40):
            token = x[:, t : t + 1]
            k_t, v_t = layer.keys_values(token)
            out = streaming_attention(layer.queries(token), k_t, v_t, cache, cos, sin)
            ours = layer.o_proj(merge_heads(out))
            theirs = layer(token, causal=True, cache=ring)
            assert (ours - theirs).abs().max() < 1e-5, t
            assert (ours - full[:, t : t + 1]).abs().max() < 1e-5, t


def test_a_step_reads_no_tensor_value():
    q, k, v = qkv(12)
    cos, sin = tables(8, D)
    cache = SinkRingCache(B, H_KV, D, window=8, sinks=4, dtype=F64)
    streamed(q[:, :, :11], k[:, :, :11], v[:, :, :11], cache, cos, sin)  # wrapped
    with torch.no_grad():
        one = [x[:, :, 11:12] for x in (q, k, v)]
        assert host_reads(streaming_attention, *one, cache, cos, sin) == 0


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="sinks must be < window=4"):
        SinkRingCache(1, 1, 8, window=4, sinks=4)
    with pytest.raises(ValueError, match="window"):
        SinkRingCache(1, 1, 8, window=0)
    with pytest.raises(TypeError, match="sinks"):
        SinkRingCache(1, 1, 8, window=8, sinks=True)
    with pytest.raises(ValueError, match="sinks"):
        SinkRingCache(1, 1, 8, window=8, sinks=-1)
    cache = SinkRingCache(B, H_KV, D, window=8, dtype=F64)
    q, k, v = qkv(2)
    cos, sin = tables(8, D)
    with torch.no_grad():
        with pytest.raises(ValueError, match="k must be one token"):
            cache.update(k, v)  # two tokens
        with pytest.raises(ValueError, match="v must be one token"):
            cache.update(k[:, :, :1], v[:, :1, :1])
        with pytest.raises(ValueError, match="n_kv_heads"):
            cache.update(k[:, :1, :1], v[:, :1, :1])  # one head, the cache has two
        with pytest.raises(ValueError, match="dtype"):
            cache.update(k[:, :, :1].float(), v[:, :, :1].float())
        with pytest.raises(TypeError, match="k"):
            cache.update(k[:, :, :1].tolist(), v[:, :, :1])
        with pytest.raises(ValueError, match="q must be one token"):
            streaming_attention(q[:, :3, :1], k[:, :, :1], v[:, :, :1], cache, cos, sin)
        with pytest.raises(ValueError, match="cos must be"):
            streaming_attention(
                q[:, :, :1], k[:, :, :1], v[:, :, :1], cache, cos[:7], sin
            )
        with pytest.raises(ValueError, match="sin must be"):
            streaming_attention(
                q[:, :, :1], k[:, :, :1], v[:, :, :1], cache, cos, sin[:, :4]
            )
    grad_k = k[:, :, :1].clone().requires_grad_()
    with pytest.raises(ValueError, match="k requires grad"):
        cache.update(grad_k, v[:, :, :1])
    assert cache.seen == 0 and cache.ring.next_pos == 0  # nothing was written
