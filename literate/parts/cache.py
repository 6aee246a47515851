"""A key/value cache for decoding one token at a time.

When a decoder generates token t, the keys and values of tokens 0..t-1 have not changed
since they were computed: only the new token's key and value are new. The cache keeps
them, so each step projects one token instead of the whole prefix.

This cache is **preallocated**: two buffers `[B, n_kv_heads, capacity, d_head]` are
made once and each step writes the new rows in place, so a whole decode copies each key
once (a cache that grows by `torch.cat` copies the whole prefix at every step, O(T^2) in
all).
It stores `n_kv_heads` heads, never `n_heads`: grouped-query and multi-query attention
share each stored head between several query heads at read time, and that sharing is
where their memory saving comes from.

`next_pos` is the absolute position of the next token to be appended; a layer reads it
to place its queries (causal mask offset, RoPE angles). What is appended is checked
against the cache's layout (metadata only): a wrong batch, head count, head width, dtype
or device, or more tokens than the capacity, is an error naming what is wrong.

Shapes: B batch, H_kv stored heads, T new tokens, d_head head width.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from literate.parts.checks import (
    bool_tensor,
    float_dtype,
    float_tensor,
    non_negative_int,
    positive_int,
)

__all__ = ["KVCache", "MemoryKV", "DecodeCache"]


# --8<-- [start:kv_cache]
class KVCache:
    """Preallocated keys and values of one attention layer, [B, H_kv, capacity, d_head].

    `append(k_new, v_new)` writes `[B, H_kv, T, d_head]` at positions
    `next_pos .. next_pos + T - 1` and returns views of everything filled so far. Keys
    are stored as given: a RoPE layer rotates them *before* appending. For inference:
    the in-place writes cannot be differentiated through, so it refuses tensors that
    require grad (decode under `torch.no_grad()`).
    """

    def __init__(self, batch: int, n_kv_heads: int, capacity: int, d_head: int, *,
                 dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        shape = (positive_int("batch", batch), positive_int("n_kv_heads", n_kv_heads),
                 positive_int("capacity", capacity), positive_int("d_head", d_head))
        dtype = float_dtype("dtype", dtype)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # [B, H_kv, cap., d]
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.batch, self.n_kv_heads, self.capacity, self.d_head = shape
        self.dtype, self.device = dtype, self.k.device
        self.next_pos = 0
        self.owner: int | None = None  # id() of the one layer whose keys this holds

    @property
    def nbytes(self) -> int:
        """Bytes held by both buffers, filled or not: what the cache costs in memory."""
        return self.k.nbytes + self.v.nbytes

    def check(self, batch: int, n_kv_heads: int, new: int, d_head: int,
              dtype: torch.dtype, device: torch.device) -> None:
        """Refuse `new` tokens of another layout, or more than the capacity left."""
        layout = (self.batch, self.n_kv_heads, self.d_head, self.dtype, self.device)
        if (batch, n_kv_heads, d_head, dtype, torch.device(device)) != layout:
            raise ValueError(f"the cache holds [batch, n_kv_heads, d_head, dtype, "
                             f"device] = {list(layout)}, this call has "
                             f"{[batch, n_kv_heads, d_head, dtype, device]}; make a "
                             "cache for this layer and batch (layer.new_cache)")
        if self.next_pos + new > self.capacity:
            raise ValueError(f"appending {new} token(s) at next_pos={self.next_pos} "
                             f"needs capacity >= {self.next_pos + new}, the cache has "
                             f"capacity={self.capacity}")

    def append(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Store keys and values `[B, H_kv, T, d_head]`; return the filled
        `[B, H_kv, next_pos, d_head]` views (no copy) after advancing `next_pos`."""
        for name, new in (("k_new", k_new), ("v_new", v_new)):
            grad = float_tensor(name, new, ndim=4).requires_grad
            if grad and torch.is_grad_enabled():
                raise ValueError(f"{name} requires grad: decode under torch.no_grad()")
        if k_new.shape != v_new.shape:
            raise ValueError(f"k_new {tuple(k_new.shape)} and "
                             f"v_new {tuple(v_new.shape)} must have one shape")
        b, h, t, d = k_new.shape
        self.check(b, h, t, d, k_new.dtype, k_new.device)
        return self.write(k_new, v_new)

    def write(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """`append` without its checks, for a caller that has made them (the layer's
        `check_call` does, before anything is projected)."""
        start, end = self.next_pos, self.next_pos + k_new.shape[2]
        self.k[:, :, start:end] = k_new  # in place: no new buffer, no prefix copied
        self.v[:, :, start:end] = v_new
        self.next_pos = end
        return self.k[:, :, :end], self.v[:, :, :end]  # views

    def bind(self, layer: object) -> None:
        """Tie the cache to the layer that fills it. A cache holds one layer's keys: a
        second layer appending to it would attend to the first one's, without an
        error."""
        if self.owner is None:
            self.owner = id(layer)
        elif self.owner != id(layer):
            raise ValueError("the cache holds another layer's keys and values; give "
                             "each layer its own cache (layer.new_cache), or reset() "
                             "this one")

    def truncate(self, length: int) -> None:
        """Forget every position from `length` on: `next_pos` goes back to `length`."""
        if non_negative_int("length", length) > self.next_pos:
            raise ValueError(f"length must be <= next_pos={self.next_pos}, "
                             f"got {length}")
        self.k[:, :, length:self.next_pos] = 0
        self.v[:, :, length:self.next_pos] = 0
        self.next_pos = length

    def reorder(self, rows: Tensor) -> None:
        """Row i becomes row rows[i] [B], in the filled slots, in place (beam search:
        each surviving beam continues the history of the beam it extends)."""
        if not isinstance(rows, Tensor) or rows.dtype != torch.long \
                or rows.shape != (self.batch,):
            got = (f"{rows.dtype} {tuple(rows.shape)}" if isinstance(rows, Tensor)
                   else type(rows).__name__)
            raise ValueError(f"rows must be torch.long [batch={self.batch}], the row "
                             f"each row continues, got {got}")
        n = self.next_pos
        self.k[:, :, :n] = self.k[:, :, :n].index_select(0, rows)
        self.v[:, :, :n] = self.v[:, :, :n].index_select(0, rows)

    def reset(self) -> None:
        """Forget the sequence and the layer: `next_pos` back to 0, buffers zeroed."""
        self.k.zero_()
        self.v.zero_()
        self.next_pos, self.owner = 0, None
# --8<-- [end:kv_cache]


# --8<-- [start:memory_kv]
class MemoryKV(NamedTuple):
    """A static cache: the keys and values a cross-attention reads from its source,
    `[B, H_kv, S, d_head]` each, projected once per source (`attn.keys_values(memory)`)
    and read unchanged by every decoding step. Pass it as the layer's `memory`."""

    k: Tensor
    v: Tensor
# --8<-- [end:memory_kv]


# --8<-- [start:decode_cache]
class DecodeCache:
    """What a decoder keeps between steps: one KVCache per layer, and which of their
    slots hold real tokens (False: left padding), so that each row's positions count
    its real tokens only.

    Every layer's slot t holds the same token. `advance(t_new, valid)` is called once
    per model call, before the layers: it records the new tokens' flags and returns
    `(key_valid, positions)` for that call: the flags of every slot so far [B, T_k]
    and the new tokens' positions [B, T_new] (the real tokens before them in their
    row), or (None, None) while no row has been padded, so that the layers run their
    plain causal path. Reads no tensor value. Its position is its layers' (`next_pos`),
    and layers that disagree (a layer reset or filled on its own) are an error, not a
    silent shift; `cached_run` takes back a call that fails half-way.
    """

    def __init__(self, layers: list[KVCache]) -> None:
        if not isinstance(layers, (list, tuple)) or not layers \
                or not all(isinstance(c, KVCache) for c in layers):
            raise TypeError(f"layers must be a non-empty list of KVCache, one per "
                            f"layer, got {type(layers).__name__}")
        layers = list(layers)
        first = layers[0]
        if any((c.batch, c.capacity, c.device) != (first.batch, first.capacity,
                                                    first.device) for c in layers):
            raise ValueError("the layers' caches must share batch, capacity and device")
        self.layers = layers
        self.valid = torch.ones(first.batch, first.capacity, dtype=torch.bool,
                                device=first.device)  # [B, capacity]
        self.padded = False  # has any row been given a padding flag?
        self.check_in_step()

    @property
    def next_pos(self) -> int:
        """The slot of the next token: the number of tokens every layer holds."""
        return self.layers[0].next_pos

    @property
    def nbytes(self) -> int:
        """Bytes of every layer's keys and values (the flags are negligible)."""
        return sum(c.nbytes for c in self.layers)

    def check_in_step(self) -> None:
        """Refuse layers that hold different numbers of tokens."""
        held = [c.next_pos for c in self.layers]
        if len(set(held)) > 1:
            raise ValueError(f"the layers' caches hold {held} tokens: they must move "
                             "in step (reset() the cache to start again)")

    def advance(self, t_new: int, valid: Tensor | None = None
                ) -> tuple[Tensor | None, Tensor | None]:
        """Flags [B, t_new] (True: a real token; None: all real) -> (key_valid,
        positions) for the call that appends these t_new tokens."""
        self.check_in_step()
        start, end = self.next_pos, self.next_pos + positive_int("t_new", t_new)
        if end > self.layers[0].capacity:
            raise ValueError(f"appending {t_new} token(s) at next_pos={start} needs "
                             f"capacity >= {end}, the cache has "
                             f"capacity={self.layers[0].capacity}")
        if valid is not None:
            if bool_tensor("valid", valid).shape != (self.valid.shape[0], t_new):
                raise ValueError(f"valid must be [B={self.valid.shape[0]}, "
                                 f"T={t_new}], got {tuple(valid.shape)}")
            self.padded = True
        if not self.padded:
            return None, None
        self.valid[:, start:end] = True if valid is None else valid
        real = self.valid[:, :end].long().cumsum(dim=1)  # [B, end]: real tokens so far
        positions = real[:, start:] - 1  # [B, t_new]: the real tokens before each
        return self.valid[:, :end], positions.clamp(min=0)  # a pad's position: unused

    def reorder(self, rows: Tensor) -> None:
        """Row i of every buffer becomes row rows[i] (beam search: each surviving
        beam continues the history of the beam it came from). In place."""
        for c in self.layers:
            c.reorder(rows)
        n = self.next_pos  # only the filled slots move
        self.valid[:, :n] = self.valid[:, :n].index_select(0, rows)

    def reset(self) -> None:
        """Forget the sequences: every layer's cache reset, no padding recorded."""
        for c in self.layers:
            c.reset()
        self.valid.fill_(True)
        self.padded = False
# --8<-- [end:decode_cache]
