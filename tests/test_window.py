"""Sliding-window attention (chapter 10): the mask, the ring cache, the windowed layer.

- The mask (`literate.parts.window.window_allowed`): key k is visible to query q iff
  q - W < k <= q, W positions including the query itself, the meaning of Mistral's and
  Gemma 3's `sliding_window`: equal, entry for entry, to Hugging Face's
  `sliding_window_causal_mask_function` (masking_utils, transformers 5.24) through its own
  `sdpa_mask`, with query and key offsets (a decoding step, a sliding cache's kv_offset).
  The two off-by-one readings (W - 1 or W + 1 keys) differ from it. Built from positions,
  it also works with each row's own positions (left padding): on the real tokens it is the
  mask of the slots.
- The ring (`RingKVCache(window=W)`, `SlidingWindowAttention.new_cache`):
  W slots, position p in slot p % W, its positions stored (slots out of order after the
  first W tokens), memory and buffers unchanged however long the decode (10 W steps);
  decoding through it token by token, or in chunks longer than W, equals the full
  windowed forward and a windowed layer decoding with a plain, growing cache. A mask from
  the slot indices instead of the stored positions gives another (wrong) output. It can
  take back one decoding step, and refuses to take back what it has overwritten.
- The windowed layer (`SlidingWindowAttention`: chapter 3's layer, the same weights,
  with new_cache, allowed and forward overridden; chapter 3's own takes no window): its
  full forward equals PyTorch's fused attention given the mask; the transparent path (weights) equals the fused one and puts weight 0 outside the
  window; a window covering the sequence is causal attention; window 1 reads the token
  itself only. Refusals name the argument; no host sync in a forward or a ring step.

Tolerances, float64: ours vs ours through another path (another kernel, other chunks,
another cache): 1e-12 absolute (measured <= 4e-16); a wrong window moves outputs by 1e-2.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers.masking_utils import (
    and_masks,
    causal_mask_function,
    sdpa_mask,
    sliding_window_causal_mask_function,
    sliding_window_overlay,
)

from literate.parts.cache import KVCache
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.window import (
    RingKVCache,
    SlidingWindowAttention,
    layer_window,
    window_allowed,
    window_attention_allowed,
)
from literate.tools.syncs import host_reads

F64 = torch.float64
SAME = 1e-12
D, H, H_KV, B = 16, 4, 2, 2


def arange(a: int, b: int) -> torch.Tensor:
    return torch.arange(a, b)


# --- the mask ---------------------------------------------------------------------------
@pytest.mark.parametrize("window", [1, 2, 3, 5])
@pytest.mark.parametrize(
    "t_q, t_k, q_offset, kv_offset",
    [(9, 9, 0, 0), (1, 9, 8, 0), (3, 7, 11, 7), (1, 4, 20, 17)],
    ids=["prefill", "step", "chunk-after-cache", "step-in-sliding-cache"],
)
def test_window_allowed_equals_hugging_face_mask(window, t_q, t_k, q_offset, kv_offset):
    """HF's own mask function through its own mask builder (`sdpa_mask`, True = attend),
    queries at q_offset.., keys at kv_offset.., no shortcut allowed."""
    theirs = sdpa_mask(
        batch_size=1,
        q_length=t_q,
        kv_length=t_k,
        q_offset=q_offset,
        kv_offset=kv_offset,
        mask_function=sliding_window_causal_mask_function(window),
        allow_is_causal_skip=False,
    )[0, 0]
    ours = window_allowed(
        arange(q_offset, q_offset + t_q), arange(kv_offset, kv_offset + t_k), window
    )
    assert theirs.dtype == ours.dtype == torch.bool and torch.equal(ours, theirs)
    # the same as HF's overlay `kv_idx > q_idx - sliding_window` and its causal mask
    q, k = (
        arange(q_offset, q_offset + t_q)[:, None],
        arange(kv_offset, kv_offset + t_k)[None],
    )
    overlay = and_masks(sliding_window_overlay(window), causal_mask_function)
    assert torch.equal(ours, overlay(0, 0, q, k).expand(t_q, t_k))


def test_a_window_of_w_holds_w_keys_the_query_included():
    """Far enough from the start each query sees exactly W keys, q - W + 1 .. q; the two
    off-by-one readings (k >= q - W: W + 1 keys, as the original Mistral reference code
    reads it; k > q - W + 1: W - 1 keys) are other masks."""
    W, T = 4, 12
    pos = arange(0, T)
    mask = window_allowed(pos, pos, W)
    assert mask.sum(-1).tolist() == [min(q + 1, W) for q in range(T)]
    assert [row.nonzero().flatten().tolist() for row in mask][-1] == [8, 9, 10, 11]
    q, k = pos[:, None], pos[None]
    plus_one = (k <= q) & (k >= q - W)
    minus_one = (k <= q) & (k > q - W + 1)
    theirs = sdpa_mask(
        1,
        T,
        T,
        mask_function=sliding_window_causal_mask_function(W),
        allow_is_causal_skip=False,
    )[0, 0]
    assert torch.equal(mask, theirs)
    assert not torch.equal(plus_one, theirs) and not torch.equal(minus_one, theirs)
    assert plus_one.sum(-1)[-1] == W + 1 and minus_one.sum(-1)[-1] == W - 1


def test_with_each_rows_own_positions_left_padding_gives_the_same_mask_on_real_tokens():
    """Left padding: row b's real tokens start at slot pad_b, its positions are
    cumsum(valid) - 1. The mask from those positions equals the mask from the slots on
    every (real query, real key) pair: the window counts real tokens."""
    W, T = 3, 9
    pads = torch.tensor([0, 2, 5])
    valid = arange(0, T)[None] >= pads[:, None]  # [B, T]
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)  # [B, T]
    per_row = window_allowed(positions, positions, W)  # [B, T, T]
    slots = window_allowed(arange(0, T), arange(0, T), W)  # [T, T]
    real = valid[:, :, None] & valid[:, None, :]
    assert torch.equal(per_row & real, slots & real)
    assert per_row.shape == (3, T, T)


def test_a_negative_key_position_is_an_empty_slot_never_visible():
    mask = window_allowed(arange(0, 3), torch.tensor([-1, 0, 1, 2, -1]), 10)
    assert not mask[:, 0].any() and not mask[:, -1].any()
    assert mask[:, 1:4].tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]


@pytest.mark.parametrize(
    "window, error, message",
    [
        (True, TypeError, "window must be an int, got bool"),
        (0, ValueError, "window must be >= 1, got 0"),
        (2.0, TypeError, "window must be an int, got float"),
    ],
)
def test_window_allowed_refuses_a_bad_window(window, error, message):
    with pytest.raises(error, match=message):
        window_allowed(arange(0, 2), arange(0, 2), window)


def test_window_allowed_refuses_positions_that_are_not_long_tensors():
    with pytest.raises(TypeError, match="key_positions must be a torch.long tensor"):
        window_allowed(arange(0, 2), torch.zeros(2), 2)
    with pytest.raises(
        TypeError, match="query_positions must be a torch.long tensor .* list"
    ):
        window_allowed([0, 1], arange(0, 2), 2)


def test_window_attention_allowed():
    """None when nothing is blocked (one query over at most W keys); else the window on
    axes [1, 1, T_q, T_k] and padding on [B, 1, 1, T_k]; key_positions are read as given
    and the padding flags taken at those positions."""
    assert window_attention_allowed(1, 4, query_offset=3, window=4) is None
    step = window_attention_allowed(1, 5, query_offset=4, window=4)
    assert (
        step.shape == (1, 1, 1, 5) and step.flatten().tolist() == [False] + [True] * 4
    )
    full = window_attention_allowed(6, 6, window=2)
    assert torch.equal(full[0, 0], window_allowed(arange(0, 6), arange(0, 6), 2))
    valid = torch.tensor([[True] * 6, [False, False] + [True] * 4])
    padded = window_attention_allowed(6, 6, window=2, key_valid=valid)
    assert padded.shape == (2, 1, 6, 6)
    assert torch.equal(padded[1, 0], full[0, 0] & valid[1][None])
    ring = torch.tensor([4, 1, 2, 3])  # a ring's slots after position 4 overwrote 0
    assert (
        window_attention_allowed(1, 5, query_offset=4, window=4, key_positions=ring)
        is None
    )  # one query: its window
    flags = torch.tensor([[True] * 5, [True, False, True, True, True]])
    got = window_attention_allowed(
        1, 5, query_offset=4, window=4, key_positions=ring, key_valid=flags
    )  # the flags at the slots' positions
    assert got.shape == (2, 1, 1, 4) and got[:, 0, 0].tolist() == [
        [True] * 4,
        [True, False, True, True],
    ]
    chunk = torch.tensor([4, 1, 2, 3, 5, 6])  # a chunk of 2 after the ring: masked
    got = window_attention_allowed(2, 7, query_offset=5, window=4, key_positions=chunk)
    assert got[0, 0].tolist() == [
        [True, False, True, True, True, False],
        [True, False, False, True, True, True],
    ]
    with pytest.raises(ValueError, match=r"key_valid must be \[B, T_k=6\]"):
        window_attention_allowed(6, 6, window=2, key_valid=valid[:, :5])


# --- the windowed layer -----------------------------------------------------------------
def layer(window: int | None, seed: int = 0, rope: bool = True) -> MultiHeadAttention:
    """Chapter 3's layer (window None) or the windowed one, the same weights for a seed."""
    torch.manual_seed(seed)
    if window is None:
        return MultiHeadAttention(D, H, H_KV, rope=rope).double()
    return SlidingWindowAttention(D, H, H_KV, rope=rope, window=window).double()


def inputs(t: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(
        B, t, D, generator=torch.Generator().manual_seed(seed), dtype=F64
    )


def by_hand(attn: MultiHeadAttention, x: torch.Tensor, window: int) -> torch.Tensor:
    """Projections, RoPE, then PyTorch's fused attention with our mask."""
    t = x.shape[1]
    q, (k, v) = attn.queries(x), attn.keys_values(x)
    q, k = attn.rope.pair(q, k)
    mask = window_allowed(arange(0, t), arange(0, t), window)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return attn.o_proj(out.transpose(1, 2).reshape(B, t, H * (D // H)))


@pytest.mark.parametrize("window", [1, 3, 4])
def test_windowed_forward_equals_fused_attention_with_the_mask(window):
    attn, x = layer(window), inputs(11)
    got = attn(x, causal=True)
    torch.testing.assert_close(got, by_hand(attn, x, window), atol=SAME, rtol=0)
    out, weights = attn(x, causal=True, return_weights=True)  # the transparent path
    torch.testing.assert_close(out, got, atol=SAME, rtol=0)
    outside = ~window_allowed(arange(0, 11), arange(0, 11), window)
    assert torch.all(weights[..., outside] == 0)
    assert (weights.sum(-1) - 1).abs().max() < 1e-12
    assert (got - layer(None)(x, causal=True)).abs().max() > 1e-2  # the window matters


def test_a_window_covering_the_sequence_is_causal_attention_and_window_1_the_token_alone():
    x = inputs(7)
    causal = layer(None)(x, causal=True)
    torch.testing.assert_close(layer(7)(x, causal=True), causal, atol=SAME, rtol=0)
    torch.testing.assert_close(layer(100)(x, causal=True), causal, atol=SAME, rtol=0)
    alone = layer(1)
    _, v = alone.keys_values(x)  # each query reads its own value only
    expected = alone.o_proj(
        v.repeat_interleave(H // H_KV, dim=1).transpose(1, 2).reshape(B, 7, D)
    )
    torch.testing.assert_close(alone(x, causal=True), expected, atol=SAME, rtol=0)


def test_the_window_is_metadata_checked_at_construction():
    with pytest.raises(TypeError, match="window must be an int, got bool"):
        SlidingWindowAttention(D, H, window=True)
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        SlidingWindowAttention(D, H, window=0)
    with pytest.raises(TypeError, match="window"):  # chapter 3's layer takes none
        MultiHeadAttention(D, H, window=3)
    assert not hasattr(
        MultiHeadAttention(D, H), "window"
    )  # the window is the subclass's
    assert layer_window(MultiHeadAttention(D, H)) is None
    assert layer_window(SlidingWindowAttention(D, H, window=3)) == 3


def test_the_same_weights_with_and_without_a_window():
    """A subclass, not another layer: the same parameters, names and initialisation."""
    plain, windowed = layer(None), layer(3)
    assert isinstance(windowed, MultiHeadAttention)
    assert windowed.state_dict().keys() == plain.state_dict().keys()
    assert all(
        torch.equal(a, b)
        for a, b in zip(plain.state_dict().values(), windowed.state_dict().values())
    )


def test_a_windowed_layer_refuses_cross_attention_and_causal_false():
    attn, x = layer(3), inputs(4)
    with pytest.raises(
        ValueError, match="window=3: a sliding window is causal self-attention"
    ):
        attn(x, causal=False)
    with pytest.raises(
        ValueError, match="window=3: a sliding window is causal self-attention"
    ):
        layer(3, rope=False)(x, inputs(5, 2), causal=False)


# --- the ring ---------------------------------------------------------------------------
def test_new_cache_of_a_windowed_layer_is_a_ring_of_min_window_capacity_slots():
    ring = layer(4).new_cache(B, 100)
    assert isinstance(ring, RingKVCache) and isinstance(ring, KVCache)
    assert ring.window == 4 and ring.slots == 4 and ring.capacity == 100
    assert ring.k.shape == ring.v.shape == (B, H_KV, 4, D // H)
    assert ring.positions.tolist() == [-1] * 4
    short = layer(4).new_cache(B, 3)  # a context shorter than the window
    assert short.slots == 3 and short.k.shape[2] == 3
    plain = layer(None).new_cache(B, 100)  # chapter 3's, untouched
    assert type(plain) is KVCache and plain.k.shape[2] == 100
    assert not hasattr(plain, "positions") and not hasattr(plain, "slots")
    with pytest.raises(TypeError, match="window must be an int, got bool"):
        RingKVCache(1, 1, 4, 2, window=True)
    with pytest.raises(TypeError, match="window"):
        KVCache(1, 1, 4, 2, window=3)


def decode(attn, x, chunks, cache):
    outs, start = [], 0
    with torch.no_grad():
        for c in chunks:
            outs.append(attn(x[:, start : start + c], causal=True, cache=cache))
            start += c
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize(
    "chunks",
    [[1] * 13, [6, 1, 1, 1, 1, 3], [3, 7, 2, 1], [13], [2, 5, 6]],
    ids=["steps", "prefill-then-steps", "chunk-longer-than-W", "all-at-once", "chunks"],
)
def test_decoding_through_the_ring_equals_the_full_windowed_forward(chunks):
    attn, x = layer(4), inputs(13)
    with torch.no_grad():
        full = attn(x, causal=True)
    ring = attn.new_cache(B, 13)
    torch.testing.assert_close(decode(attn, x, chunks, ring), full, atol=SAME, rtol=0)
    plain = KVCache(B, H_KV, 13, D // H, dtype=F64)  # a growing cache on the same layer
    torch.testing.assert_close(decode(attn, x, chunks, plain), full, atol=SAME, rtol=0)
    assert ring.next_pos == plain.next_pos == 13
    assert sorted(ring.positions.tolist()) == [9, 10, 11, 12]


def test_slot_p_mod_w_holds_position_p_and_the_slots_are_out_of_order():
    W = 4
    cache = RingKVCache(1, 1, 50, 2, dtype=F64, window=W)
    for p in range(11):
        value = torch.full((1, 1, 1, 2), float(p), dtype=F64)
        k, _ = cache.append(value, -value)
        assert k.shape[2] == min(p + 1, W)  # one new token reads at most W slots
    assert cache.positions.tolist() == [8, 9, 10, 7]  # slot p % 4 holds position p
    assert cache.k[0, 0, :, 0].tolist() == [8.0, 9.0, 10.0, 7.0]
    assert cache.key_positions(1).tolist() == [8, 9, 10, 11]  # 11 replaces 7
    assert cache.key_positions(3).tolist() == [8, 9, 10, 7, 11, 12, 13]  # old, then new


def test_the_rings_memory_never_grows_over_ten_windows_of_decoding():
    W, steps = 4, 40
    attn, x = layer(W), inputs(steps)
    ring = attn.new_cache(B, 10_000)
    pointers = (ring.k.data_ptr(), ring.v.data_ptr())
    sizes = []
    with torch.no_grad():
        for t in range(steps):
            attn(x[:, t : t + 1], causal=True, cache=ring)
            sizes.append((ring.nbytes, ring.k.shape, ring.positions.shape))
            assert (
                ring.k.data_ptr(),
                ring.v.data_ptr(),
            ) == pointers  # written in place
    assert len(set(sizes)) == 1 and ring.nbytes == 2 * B * H_KV * W * (D // H) * 8
    assert attn.new_cache(B, 100).nbytes == ring.nbytes  # nor does the capacity
    assert KVCache(B, H_KV, steps, D // H, dtype=F64).nbytes == steps // W * ring.nbytes


def test_every_step_past_the_window_reads_exactly_w_keys():
    """What a step costs: the keys it attends over. Inside the window, p + 1; from the
    window on, W, at step W and at step 10 W alike."""
    W = 4
    attn, x = layer(W), inputs(40)
    ring = attn.new_cache(B, 40)
    seen = []
    with torch.no_grad():
        for t in range(40):
            positions = ring.key_positions(1)
            seen.append(t + 1 if positions is None else positions.numel())
            if (
                positions is not None
            ):  # the slots are exactly the window: no mask needed
                assert window_allowed(torch.tensor([t]), positions, W).all()
                assert sorted(positions.tolist()) == list(range(t - W + 1, t + 1))
            attn(x[:, t : t + 1], causal=True, cache=ring)
            if t in (17, 18):  # taking a step back keeps it so
                ring.truncate(t)
                attn(x[:, t : t + 1], causal=True, cache=ring)
    assert seen == [min(t + 1, W) for t in range(40)]


def test_trap_a_mask_from_the_slot_indices_reads_the_wrong_keys():
    """After the ring wraps, slot j no longer holds position j. A chunk of 3 queries
    masked as if the slots were positions 0 .. W - 1 (and the new keys after them) gets
    another output than the full forward; the stored positions give the right one."""
    W, attn, x = 4, layer(4), inputs(9)
    with torch.no_grad():
        full = attn(x, causal=True)
        ring = attn.new_cache(B, 9)
        decode(attn, x[:, :6], [6], ring)
        positions = ring.key_positions(3)  # the 4 slots (out of order), the 3 new keys
        assert positions.tolist() == [4, 5, 2, 3, 6, 7, 8]
        q, (k, v) = attn.queries(x[:, 6:]), attn.keys_values(x[:, 6:])
        q, k = attn.rope.pair(q, k, offset=6)
        k_all, v_all = ring.write(k, v)

        def attend(keys):
            mask = window_allowed(arange(6, 9), keys, W)
            out = F.scaled_dot_product_attention(
                q, k_all, v_all, attn_mask=mask, enable_gqa=True
            )
            return attn.o_proj(out.transpose(1, 2).reshape(B, 3, D))

        torch.testing.assert_close(attend(positions), full[:, 6:], atol=SAME, rtol=0)
        in_slot_order = torch.cat(
            (arange(2, 6), arange(6, 9))
        )  # as if slot j were 2 + j
        assert (attend(in_slot_order) - full[:, 6:]).abs().max() > 1e-2


def test_the_ring_takes_back_one_step_but_not_what_a_chunk_overwrote():
    attn, x = layer(4), inputs(12)
    with torch.no_grad():
        full = attn(x, causal=True)
        ring = attn.new_cache(B, 12)
        decode(attn, x[:, :9], [9], ring)
        attn(x[:, 9:10], causal=True, cache=ring)  # position 9 overwrote position 5
        ring.truncate(9)  # 5 is no query's from 9 on: the step can be taken back
        assert ring.next_pos == 9 and sorted(ring.positions.tolist()) == [-1, 6, 7, 8]
        torch.testing.assert_close(
            decode(attn, x[:, 9:], [1, 2], ring), full[:, 9:], atol=SAME, rtol=0
        )
        before = (ring.k.clone(), ring.positions.clone(), ring.next_pos)
        with pytest.raises(
            ValueError,
            match=r"the ring holds positions 8 \.\. 11: going back "
            r"to length=10 needs position 7, overwritten",
        ):
            ring.truncate(10)
        assert torch.equal(ring.k, before[0]) and torch.equal(ring.positions, before[1])
        assert ring.next_pos == before[2]
        ring.truncate(0)  # forgetting everything is always possible
        assert ring.next_pos == 0 and ring.positions.tolist() == [-1] * 4
        assert not ring.k.any()
        torch.testing.assert_close(
            decode(attn, x, [5, 1, 6], ring), full, atol=SAME, rtol=0
        )


def test_reorder_moves_rows_of_every_filled_slot():
    cache = RingKVCache(3, 1, 20, 2, dtype=F64, window=2)
    for p in range(5):
        cache.append(
            torch.arange(3, dtype=F64).view(3, 1, 1, 1).expand(3, 1, 1, 2) + 10 * p,
            torch.zeros(3, 1, 1, 2, dtype=F64),
        )
    cache.reorder(torch.tensor([2, 2, 0]))
    assert cache.k[:, 0, :, 0].tolist() == [[42.0, 32.0], [42.0, 32.0], [40.0, 30.0]]


def test_a_ring_is_refused_where_it_would_drop_what_the_layer_reads():
    """Chapter 3's layer knows no rings: the ring itself refuses it (its `bind`, before
    anything is written); the windowed layer refuses a ring of another window at once."""
    x = inputs(1)
    with torch.no_grad():
        ring = layer(4).new_cache(B, 8)
        with pytest.raises(
            ValueError,
            match="the cache is a ring for window=4, the layer has "
            "window=None; make its cache with layer.new_cache",
        ):
            layer(None)(x, causal=True, cache=ring)
        assert ring.next_pos == 0 and ring.owner is None and not ring.k.any()
        assert ring.positions.tolist() == [-1] * 4
        with pytest.raises(
            ValueError, match="the cache is a ring for window=4, the layer has window=3"
        ):
            layer(3)(x, causal=True, cache=layer(4).new_cache(B, 8))
        with pytest.raises(ValueError, match="return_weights with a ring cache"):
            layer(4)(
                x, causal=True, cache=layer(4).new_cache(B, 8), return_weights=True
            )
        ring = layer(4).new_cache(B, 2)
        attn = layer(4)
        attn(inputs(2), causal=True, cache=ring)
        with pytest.raises(
            ValueError, match="needs capacity >= 3, the cache has capacity=2"
        ):
            attn(x, causal=True, cache=ring)


def test_no_host_sync_in_a_windowed_forward_or_a_ring_step():
    attn, x = layer(4), inputs(9)
    assert host_reads(attn, x, causal=True) == 0
    ring = attn.new_cache(B, 20)
    with torch.no_grad():
        assert host_reads(attn, x[:, :6], causal=True, cache=ring) == 0  # wraps
        assert host_reads(attn, x[:, 6:7], causal=True, cache=ring) == 0  # a step
        assert host_reads(attn, x[:, 7:9], causal=True, cache=ring) == 0  # a chunk
        valid = torch.ones(B, 11, dtype=torch.bool)
        assert (
            host_reads(
                attn,
                inputs(2, 3),
                causal=True,
                cache=ring,
                key_valid=valid,
                empty_row="zero",
            )
            == 0
        )
