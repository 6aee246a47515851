"""A key/value cache for decoding one token at a time (used in chapter 3; a planned
chapter covers it in depth).

When a decoder generates token t, the keys and values of tokens 0..t-1 have not changed
since they were computed: only the new token's key and value are new. The cache keeps
them, so each step projects one token instead of the whole prefix.

This cache is **preallocated**: two buffers `[B, n_kv_heads, capacity, d_head]` are made
once and each step writes the new rows in place, so a whole decode copies each key once
(a cache that grows by `torch.cat` copies the whole prefix at every step, O(T^2) in all).
It stores `n_kv_heads` heads, never `n_heads`: grouped-query and multi-query attention
(chapter 3) share each stored head between several query heads at read time, and that
sharing is where their memory saving comes from.

`next_pos` is the absolute position of the next token to be appended; a layer reads it
to place its queries (causal mask offset, RoPE angles). Everything appended is checked
against the constructor's arguments: a wrong batch, head count, head width, dtype or
device, or more tokens than the capacity, is an error naming what is wrong.

Shapes: B batch, H_kv stored heads, T new tokens, d_head head width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from literate.checks import float_dtype, float_tensor, non_negative_int, positive_int

__all__ = ["KVCache"]

# --8<-- [start:kv_cache]
class KVCache:
    """Preallocated keys and values of one attention layer: `[B, n_kv_heads, capacity, d_head]`.

    `append(k_new, v_new)` writes `[B, n_kv_heads, T, d_head]` at positions
    `next_pos .. next_pos + T - 1` and returns views of everything filled so far.
    Keys are stored as given: a RoPE layer rotates them *before* appending.
    For inference: it refuses tensors that require grad (see `append`).
    """

    def __init__(
        self,
        batch: int,
        n_kv_heads: int,
        capacity: int,
        d_head: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        shape = (
            positive_int("batch", batch),
            positive_int("n_kv_heads", n_kv_heads),
            positive_int("capacity", capacity),
            positive_int("d_head", d_head),
        )
        float_dtype("dtype", dtype)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # [B, H_kv, capacity, d_head]
        self.v = torch.zeros(shape, dtype=dtype, device=device)  # [B, H_kv, capacity, d_head]
        self.next_pos = 0
        self._owner: int | None = None  # id() of the one layer whose keys this holds

    @property
    def batch(self) -> int:
        return self.k.shape[0]

    @property
    def n_kv_heads(self) -> int:
        return self.k.shape[1]

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    @property
    def d_head(self) -> int:
        return self.k.shape[3]

    @property
    def dtype(self) -> torch.dtype:
        return self.k.dtype

    @property
    def device(self) -> torch.device:
        return self.k.device

    @property
    def nbytes(self) -> int:
        """Bytes held by both buffers (filled or not): what the cache costs in memory."""
        return self.k.nbytes + self.v.nbytes

    def append(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Store `[B, n_kv_heads, T, d_head]` keys and values; return the filled
        `[B, n_kv_heads, next_pos, d_head]` views (no copy) after advancing `next_pos`."""
        for name, new in (("k_new", k_new), ("v_new", v_new)):
            if isinstance(new, Tensor) and new.device != self.device:  # before any value is read
                raise ValueError(f"{name} is on {new.device}, the cache is on {self.device}")
            float_tensor(name, new)
            expected = (self.batch, self.n_kv_heads, self.d_head)
            if new.ndim != 4 or (new.shape[0], new.shape[1], new.shape[3]) != expected:
                raise ValueError(
                    f"{name} must have shape [batch={self.batch}, n_kv_heads={self.n_kv_heads}, "
                    f"T, d_head={self.d_head}] like the cache, got {tuple(new.shape)}; "
                    "call reset() or make a new cache for another sequence or layer"
                )
            if new.dtype != self.dtype:
                raise TypeError(f"{name} has dtype {new.dtype}, the cache holds {self.dtype}")
            if torch.is_grad_enabled() and new.requires_grad:
                raise ValueError(
                    f"{name} requires grad: the cache writes in place into shared buffers, which "
                    "autograd cannot differentiate through over several steps; decode under "
                    "torch.no_grad()"
                )
        if k_new.shape != v_new.shape:
            raise ValueError(f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} must have one shape")
        start, end = self.next_pos, self.next_pos + k_new.shape[2]
        if end > self.capacity:
            raise ValueError(
                f"appending {k_new.shape[2]} token(s) at next_pos={start} needs capacity >= {end}, "
                f"the cache has capacity={self.capacity}"
            )
        self.k[:, :, start:end] = k_new  # written in place: no reallocation, no copy of the prefix
        self.v[:, :, start:end] = v_new
        self.next_pos = end
        return self.k[:, :, :end], self.v[:, :, :end]  # [B, H_kv, next_pos, d_head], views

    def bind(self, layer: object) -> None:
        """Tie the cache to the layer that fills it. A cache holds one layer's keys: a second
        layer appending to it would attend to the first layer's keys, without any error."""
        if self._owner is None:
            self._owner = id(layer)
        elif self._owner != id(layer):
            raise ValueError("cache already holds another layer's keys and values; give each layer "
                             "its own cache (layer.new_cache), or reset() this one")

    def truncate(self, length: int) -> None:
        """Forget every position from `length` on: `next_pos` goes back to `length`. Used to
        undo the append of a call that failed, so the cache never keeps half a step."""
        length = non_negative_int("length", length)
        if length > self.next_pos:
            raise ValueError(f"length must be <= next_pos={self.next_pos}, got {length}")
        self.k[:, :, length:self.next_pos] = 0
        self.v[:, :, length:self.next_pos] = 0
        self.next_pos = length

    def reset(self) -> None:
        """Forget the sequence and the layer: `next_pos` back to 0 (the buffers are kept,
        and zeroed)."""
        self.k.zero_()
        self.v.zero_()
        self.next_pos = 0
        self._owner = None
# --8<-- [end:kv_cache]
