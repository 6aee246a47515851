"""Tests for `literate.cache.KVCache`: preallocated, in-place, validated, resettable.

The cache's use inside attention (decode equals the full forward, contents equal
independently rotated keys) is tested in tests/test_heads.py.
"""

from __future__ import annotations

import pytest
import torch

from literate.cache import KVCache

F64 = torch.float64


def kv(seed: int, b: int = 2, h: int = 3, t: int = 1, d: int = 4, dtype: torch.dtype = F64):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, t, d, generator=g, dtype=F64).to(dtype),
            torch.randn(b, h, t, d, generator=g, dtype=F64).to(dtype))


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
        assert cache.k.data_ptr() == k_ptr and cache.v.data_ptr() == v_ptr  # never reallocated
        assert k_all.data_ptr() == k_ptr and v_all.data_ptr() == v_ptr  # views, not copies
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
    assert cache.nbytes == 2 * (2 * 1 * 7 * 8) * 2  # K and V, 2 bytes each
    assert cache.nbytes == cache.k.untyped_storage().nbytes() + cache.v.untyped_storage().nbytes()


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
    with pytest.raises(ValueError, match=r"needs capacity >= 4, the cache has capacity=3"):
        cache.append(*kv(4, t=2))
    assert cache.next_pos == 2 and torch.equal(cache.k, before)


@pytest.mark.parametrize(
    "k_new, error, match",
    [
        (torch.zeros(1, 3, 1, 4, dtype=F64), ValueError, r"batch=2"),  # batch
        (torch.zeros(2, 2, 1, 4, dtype=F64), ValueError, r"n_kv_heads=3"),  # heads
        (torch.zeros(2, 3, 1, 5, dtype=F64), ValueError, r"d_head=4"),  # head width
        (torch.zeros(2, 3, 4, dtype=F64), ValueError, r"must have shape"),  # 3-d
        (torch.zeros(2, 3, 1, 4, dtype=torch.float32), TypeError, r"dtype torch.float32"),
        (torch.zeros(2, 3, 1, 4, dtype=torch.int64), TypeError, r"floating-point"),
        (torch.zeros(2, 3, 1, 4, dtype=F64, device="meta"), ValueError, r"is on meta"),
        ([[0.0]], TypeError, r"torch.Tensor"),
        (torch.full((2, 3, 1, 4), float("nan"), dtype=F64), ValueError, r"NaN"),
    ],
)
def test_append_validates_against_the_constructor(k_new, error, match):
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    with pytest.raises(error, match=match):
        cache.append(k_new, torch.zeros(2, 3, 1, 4, dtype=F64))
    with pytest.raises(error, match=match.replace("k_new", "v_new")):
        cache.append(torch.zeros(2, 3, 1, 4, dtype=F64), k_new)
    assert cache.next_pos == 0


def test_seed_d11_mismatched_batch_after_a_first_append():
    cache = KVCache(1, 4, 8, 8, dtype=torch.float32)
    cache.append(torch.randn(1, 4, 2, 8), torch.randn(1, 4, 2, 8))
    wrong = torch.randn(2, 4, 1, 8)
    with pytest.raises(ValueError, match="batch=1"):
        cache.append(wrong, wrong)
    assert cache.next_pos == 2


def test_k_and_v_must_have_one_shape():
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    with pytest.raises(ValueError, match="one shape"):
        cache.append(*kv(5, t=2)[:1], kv(6, t=1)[1])


def test_tensors_that_require_grad_are_refused_outside_no_grad():
    cache = KVCache(2, 3, 4, 4, dtype=F64)
    k_new, v_new = kv(7)
    k_new.requires_grad_()
    with pytest.raises(ValueError, match=r"k_new requires grad.*torch.no_grad"):
        cache.append(k_new, v_new)
    with torch.no_grad():
        cache.append(k_new, v_new)
    assert cache.next_pos == 1


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((0, 1, 4, 4), {}, ValueError, "batch"),
        ((1, True, 4, 4), {}, TypeError, "n_kv_heads"),
        ((1, 1, 0, 4), {}, ValueError, "capacity"),
        ((1, 1, 4, 2.0), {}, TypeError, "d_head"),
        ((1, 1, 4, 4), {"dtype": torch.int32}, TypeError, "dtype"),
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
    assert torch.equal(cache.k[:, :, :1], k[:, :, :1]) and (cache.k[:, :, 1:] == 0).all() and (cache.v[:, :, 1:] == 0).all()
    with pytest.raises(ValueError, match=r"^length must be <= next_pos=1"):
        cache.truncate(2)
    with pytest.raises(ValueError, match="^length must be >= 0"):
        cache.truncate(-1)
    with pytest.raises(TypeError, match="^length must be an int"):
        cache.truncate(True)
