"""Tests for `literate.parts.cache.KVCache`: preallocated, in-place, validated, resettable.

The cache's use inside attention (decode equals the full forward, contents equal
independently rotated keys) is tested in tests/test_multi_head.py.
"""

from __future__ import annotations

import re

import pytest
import torch

from literate.parts.cache import KVCache
from literate.tools.syncs import HostReads as HostSyncs

F64 = torch.float64


def kv(
    seed: int, b: int = 2, h: int = 3, t: int = 1, d: int = 4, dtype: torch.dtype = F64
):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, h, t, d, generator=g, dtype=F64).to(dtype),
        torch.randn(b, h, t, d, generator=g, dtype=F64).to(dtype),
    )


def test_buffers_are_preallocated_and_written_in_place():
    cache = KVCache(2, 3, 6, 4, dtype=F64)
    assert cache.k.shape == cache.v.shape == (2, 3, 6, 4)
    assert cache.next_pos == 0 and cache.capacity == 6
    k_ptr, v_ptr = cache.k.data_ptr(), cache.v.data_ptr()
    written_k, written_v = [], []
    for step, t in enumerate([2, 1, 3]):
        k_new, v_new = kv(step, t=t)
        written_k.append(k_new)
        written_v.append(v_new)
        k_all, v_all = cache.append(k_new, v_new)
        assert (
            cache.k.data_ptr() == k_ptr and cache.v.data_ptr() == v_ptr
        )  # never reallocated
        assert (
            k_all.data_ptr() == k_ptr and v_all.data_ptr() == v_ptr
        )  # views, not copies
        assert k_all.shape == (2, 3, cache.next_pos, 4)
    assert cache.next_pos == 6
    assert torch.equal(cache.k, torch.cat(written_k, dim=2))
    assert torch.equal(cache.v, torch.cat(written_v, dim=2))


def test_views_see_only_the_filled_part():
    cache = KVCache(1, 1, 5, 2, dtype=F64)
    k_all, v_all = cache.append(*kv(0, b=1, h=1, t=2, d=2))
    assert k_all.shape[2] == 2 and v_all.shape[2] == 2


def test_properties_and_nbytes():
    cache = KVCache(2, 1, 7, 8, dtype=torch.float16)
    assert (cache.batch, cache.n_kv_heads, cache.capacity, cache.d_head) == (2, 1, 7, 8)
    assert cache.dtype == torch.float16 and cache.device == torch.device("cpu")
    # plain attributes, set once by the constructor (not properties recomputed per call)
    assert {
        "batch",
        "n_kv_heads",
        "capacity",
        "d_head",
        "dtype",
        "device",
        "owner",
    } <= set(vars(cache))
    assert cache.nbytes == 2 * (2 * 1 * 7 * 8) * 2  # K and V, 2 bytes each
    assert (
        cache.nbytes
        == cache.k.untyped_storage().nbytes() + cache.v.untyped_storage().nbytes()
    )


def test_reset_forgets_the_sequence_and_keeps_the_buffers():
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    ptr = cache.k.data_ptr()
    cache.append(*kv(1, t=3))
    cache.reset()
    assert cache.next_pos == 0 and (cache.k == 0).all() and (cache.v == 0).all()
    assert cache.k.data_ptr() == ptr
    k_all, _ = cache.append(*kv(2, t=4))  # the full capacity is available again
    assert k_all.shape[2] == 4


def test_capacity_overflow_is_refused_without_writing():
    cache = KVCache(2, 3, 3, 4, dtype=F64)
    cache.append(*kv(3, t=2))
    before = cache.k.clone()
    with pytest.raises(
        ValueError,
        match=r"^appending 2 token\(s\) at next_pos=2 needs capacity >= 4, "
        r"the cache has capacity=3$",
    ):
        cache.append(*kv(4, t=2))
    assert cache.next_pos == 2 and torch.equal(cache.k, before)


CPU = torch.device("cpu")


def layout(batch, n_kv_heads, d_head, dtype, device) -> str:
    """The list a layout refusal prints: [batch, n_kv_heads, d_head, dtype, device]."""
    return re.escape(str([batch, n_kv_heads, d_head, dtype, device]))


def layout_refusal(ours: tuple, theirs: tuple) -> str:
    """The anchored message of a layout refusal: what the cache holds, what the call has."""
    return (
        r"^the cache holds \[batch, n_kv_heads, d_head, dtype, device\] = "
        + layout(*ours)
        + ", this call has "
        + layout(*theirs)
        + r"; make a cache for this layer and batch \(layer\.new_cache\)$"
    )


CACHE_LAYOUT = (2, 3, 4, F64, CPU)


@pytest.mark.parametrize(
    "k_new, theirs",
    [
        (torch.zeros(1, 3, 1, 4, dtype=F64), (1, 3, 4, F64, CPU)),  # batch
        (torch.zeros(2, 2, 1, 4, dtype=F64), (2, 2, 4, F64, CPU)),  # heads
        (torch.zeros(2, 3, 1, 5, dtype=F64), (2, 3, 5, F64, CPU)),  # head width
        (
            torch.zeros(2, 3, 1, 4, dtype=torch.float32),
            (2, 3, 4, torch.float32, CPU),
        ),  # dtype
        (
            torch.zeros(2, 3, 1, 4, dtype=F64, device="meta"),
            (2, 3, 4, F64, torch.device("meta")),
        ),  # device
    ],
    ids=["batch", "n_kv_heads", "d_head", "dtype", "device"],
)
def test_append_refuses_another_layout_naming_both(k_new, theirs):
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    with pytest.raises(ValueError, match=layout_refusal(CACHE_LAYOUT, theirs)):
        cache.append(k_new, k_new.clone())
    assert cache.next_pos == 0 and (cache.k == 0).all() and (cache.v == 0).all()


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (
            torch.zeros(2, 3, 4, dtype=F64),
            ValueError,
            r"^{} must have 4 axes, got \(2, 3, 4\)$",
        ),
        (
            torch.zeros(2, 3, 1, 4, dtype=torch.int64),
            TypeError,
            r"^{} must be a floating-point tensor, got torch\.int64$",
        ),
        ([[0.0]], TypeError, r"^{} must be a floating-point tensor, got list$"),
    ],
    ids=["3d", "int", "list"],
)
def test_append_refuses_what_is_not_a_4d_float_tensor_naming_k_new_or_v_new(
    bad, error, message
):
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    good = torch.zeros(2, 3, 1, 4, dtype=F64)
    with pytest.raises(error, match=message.format("k_new")):
        cache.append(bad, good)
    with pytest.raises(error, match=message.format("v_new")):
        cache.append(good, bad)
    assert cache.next_pos == 0


def test_seed_d11_mismatched_batch_after_a_first_append():
    cache = KVCache(1, 4, 8, 8, dtype=torch.float32)
    cache.append(torch.randn(1, 4, 2, 8), torch.randn(1, 4, 2, 8))
    before = cache.k.clone()
    wrong = torch.randn(2, 4, 1, 8)
    with pytest.raises(
        ValueError,
        match=layout_refusal(
            (1, 4, 8, torch.float32, CPU), (2, 4, 8, torch.float32, CPU)
        ),
    ):
        cache.append(wrong, wrong)
    assert cache.next_pos == 2 and torch.equal(cache.k, before)


def test_check_refuses_layout_and_capacity_from_metadata_alone():
    cache = KVCache(2, 3, 5, 4, dtype=F64)
    with HostSyncs() as syncs:
        assert cache.check(2, 3, 5, 4, F64, CPU) is None  # exactly the capacity
        assert cache.check(2, 3, 1, 4, F64, "cpu") is None  # a device given by name
    assert syncs.calls == []
    for theirs in [
        (1, 3, 4, F64, CPU),
        (2, 1, 4, F64, CPU),
        (2, 3, 8, F64, CPU),
        (2, 3, 4, torch.float16, CPU),
        (2, 3, 4, F64, torch.device("meta")),
    ]:
        b, h, d, dtype, device = theirs
        with pytest.raises(ValueError, match=layout_refusal(CACHE_LAYOUT, theirs)):
            cache.check(b, h, 1, d, dtype, device)
    with pytest.raises(
        ValueError,
        match=r"^appending 6 token\(s\) at next_pos=0 needs capacity >= 6, "
        r"the cache has capacity=5$",
    ):
        cache.check(2, 3, 6, 4, F64, CPU)
    cache.append(*kv(8, t=4))
    with pytest.raises(
        ValueError,
        match=r"^appending 2 token\(s\) at next_pos=4 needs capacity >= 6, "
        r"the cache has capacity=5$",
    ):
        cache.check(2, 3, 2, 4, F64, CPU)
    assert cache.next_pos == 4  # check never writes


def test_append_reads_no_value_and_stores_nan_as_given():
    """Metadata only: a NaN key is stored like any other (a layer given NaN returns NaN)."""
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    k_new = torch.full((2, 3, 1, 4), float("nan"), dtype=F64)
    with HostSyncs() as syncs:
        k_all, v_all = cache.append(k_new, torch.zeros(2, 3, 1, 4, dtype=F64))
    assert syncs.calls == []
    assert torch.isnan(k_all).all() and cache.next_pos == 1


def test_k_and_v_must_have_one_shape():
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    with pytest.raises(
        ValueError,
        match=r"^k_new \(2, 3, 2, 4\) and v_new \(2, 3, 1, 4\) must have one shape$",
    ):
        cache.append(*kv(5, t=2)[:1], kv(6, t=1)[1])
    assert cache.next_pos == 0


def test_tensors_that_require_grad_are_refused_outside_no_grad():
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    k_new, v_new = kv(7)
    k_new.requires_grad_()
    with pytest.raises(
        ValueError, match=r"^k_new requires grad: decode under torch\.no_grad\(\)$"
    ):
        cache.append(k_new, v_new)
    with pytest.raises(
        ValueError, match=r"^v_new requires grad: decode under torch\.no_grad\(\)$"
    ):
        cache.append(v_new, k_new)
    assert cache.next_pos == 0 and (cache.k == 0).all()
    with torch.no_grad():
        cache.append(k_new, v_new)
    with torch.inference_mode():
        cache.append(k_new, v_new)
    assert cache.next_pos == 2


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((0, 1, 4, 4), {}, ValueError, r"^batch must be >= 1, got 0$"),
        ((1, True, 4, 4), {}, TypeError, r"^n_kv_heads must be an int, got bool$"),
        ((1, 1, 0, 4), {}, ValueError, r"^capacity must be >= 1, got 0$"),
        ((1, 1, 4, 2.0), {}, TypeError, r"^d_head must be an int, got float$"),
        (
            (1, 1, 4, 4),
            {"dtype": torch.int32},
            TypeError,
            r"^dtype must be one of \[torch\.float16, torch\.bfloat16, "
            r"torch\.float32, torch\.float64\], got torch\.int32$",
        ),
    ],
)
def test_constructor_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        KVCache(*args, **kwargs)


def test_truncate_forgets_the_tail_and_checks_its_argument():
    cache = KVCache(1, 2, 6, 4, dtype=torch.float64)
    k = torch.arange(1 * 2 * 4 * 4, dtype=torch.float64).reshape(1, 2, 4, 4) + 1
    cache.append(k, -k)
    cache.truncate(1)
    assert cache.next_pos == 1
    assert (
        torch.equal(cache.k[:, :, :1], k[:, :, :1])
        and (cache.k[:, :, 1:] == 0).all()
        and (cache.v[:, :, 1:] == 0).all()
    )
    with pytest.raises(ValueError, match=r"^length must be <= next_pos=1, got 2$"):
        cache.truncate(2)
    with pytest.raises(ValueError, match=r"^length must be >= 0, got -1$"):
        cache.truncate(-1)
    with pytest.raises(TypeError, match=r"^length must be an int, got bool$"):
        cache.truncate(True)
    assert cache.next_pos == 1


def test_bind_ties_the_cache_to_one_layer_until_reset():
    a, b = object(), object()
    cache = KVCache(1, 1, 2, 2)
    assert cache.owner is None
    cache.bind(a)
    cache.bind(a)  # the same layer again: fine
    assert cache.owner == id(a)
    with pytest.raises(
        ValueError,
        match=r"^the cache holds another layer's keys and values; give each layer its "
        r"own cache \(layer\.new_cache\), or reset\(\) this one$",
    ):
        cache.bind(b)
    assert cache.owner == id(a)
    cache.reset()
    assert cache.owner is None
    cache.bind(b)
    assert cache.owner == id(b)


# --- DecodeCache: a whole model's cache moves in step --------------------------------------


def _tiny_llama():
    from literate.models.llama import llama_model

    torch.manual_seed(0)
    return llama_model(40, 16, 16, 2, 1, 2, 32).double().eval()


def test_a_decode_cache_refuses_layers_out_of_step_and_reset_starts_again():
    from literate.decoding.generate import cached_run, new_decode_cache
    from literate.parts.cache import DecodeCache

    model = _tiny_llama()
    ids = torch.randint(0, 40, (1, 5))
    cache = new_decode_cache(model, 1, 8)
    with torch.no_grad():
        expected = cached_run(model, ids, cache)
        cache.layers[1].reset()  # one layer reset on its own
        with pytest.raises(
            ValueError,
            match=r"^the layers' caches hold \[5, 0\] tokens: they must move in step",
        ):
            cached_run(model, ids[:, :1], cache)
        cache.reset()
        assert cache.next_pos == 0 and all(c.next_pos == 0 for c in cache.layers)
        torch.testing.assert_close(
            cached_run(model, ids, cache), expected, atol=0, rtol=0
        )
    used = model.blocks[0].attn.new_cache(1, 8)
    used.append(
        torch.zeros(1, 1, 2, 8, dtype=torch.float64),
        torch.zeros(1, 1, 2, 8, dtype=torch.float64),
    )
    with pytest.raises(ValueError, match=r"^the layers' caches hold \[2, 0\] tokens"):
        DecodeCache([used, model.blocks[1].attn.new_cache(1, 8)])


def test_a_call_that_fails_half_way_leaves_nothing_cached():
    """A call that fails after the first layer wrote its keys (here: an error raised as it returns) is
    taken back by cached_run: no layer holds its tokens, and the retry is the first call again."""
    from literate.decoding.generate import cached_run, new_decode_cache

    model = _tiny_llama()
    ids = torch.randint(0, 40, (1, 3))
    with torch.no_grad():
        expected = cached_run(model, ids, new_decode_cache(model, 1, 8))
    cache = new_decode_cache(model, 1, 8)
    first = model.blocks[0].attn
    original = first.forward

    def first_then_fail(*args, **kwargs):
        original(*args, **kwargs)
        raise RuntimeError("interrupted after layer 0 wrote")

    first.forward = first_then_fail
    try:
        with torch.no_grad(), pytest.raises(RuntimeError, match="interrupted"):
            cached_run(model, ids, cache)
    finally:
        del first.forward
    assert [c.next_pos for c in cache.layers] == [0, 0]
    with torch.no_grad():
        torch.testing.assert_close(
            cached_run(model, ids, cache), expected, atol=0, rtol=0
        )


def test_a_call_that_fails_after_every_layer_wrote_leaves_nothing_cached():
    """The output projection fails (as a large vocabulary's might, out of memory): every layer had
    written its keys; cached_run takes them back, so a retry is the first call again."""
    from literate.decoding.generate import cached_run, new_decode_cache

    model = _tiny_llama()
    ids = torch.randint(0, 40, (1, 5))
    with torch.no_grad():
        expected = cached_run(model, ids, new_decode_cache(model, 1, 8))
        cache = new_decode_cache(model, 1, 8)
        head = model.lm_head.forward
        model.lm_head.forward = lambda x: (_ for _ in ()).throw(MemoryError("no room"))
        try:
            with pytest.raises(MemoryError):
                cached_run(model, ids, cache)
        finally:
            model.lm_head.forward = head
        assert cache.next_pos == 0 and all(c.next_pos == 0 for c in cache.layers)
        torch.testing.assert_close(
            cached_run(model, ids, cache), expected, atol=0, rtol=0
        )


def test_reorder_refuses_rows_of_another_length():
    cache = KVCache(2, 1, 4, 8)
    with pytest.raises(
        ValueError,
        match=r"^rows must be torch.long \[batch=2\], the row each row continues, "
        r"got torch.int64 \(1,\)$",
    ):
        cache.reorder(torch.tensor([1]))
