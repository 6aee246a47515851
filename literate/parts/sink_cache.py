"""StreamingLLM's cache (chapter 10): four attention sinks and a ring.

A model trained with full attention spends much of every softmax row on its first few
tokens, whatever they are (Xiao et al. 2024, sec. 3.1): evict them, as a window's ring
does, and it fails. StreamingLLM (sec. 3.2) keeps the keys and values of the first
`sinks` tokens (4 in the paper) and a ring of the last `window - sinks`: `window` slots
in all, however long the stream.

Positions are those within the cache, not in the text (sec. 3.2: a cache holding
tokens [0, 1, 2, 3, 6, 7, 8] decodes token 9 at positions 0 .. 7). A token's place in
the cache changes at every step once the ring is full, so its key cannot be turned by
RoPE once and cached, as chapter 8's and the ring's are: the cache keeps keys before
RoPE, hands them back in cache order (sinks, then the ring from its oldest slot), and
`streaming_attention` turns every one at its cache position, as the paper does ("we
cache the Keys of tokens prior to introducing the rotary transformation").

The ring is chapter 10's `RingKVCache` (literate/parts/window.py) of window - sinks
slots; the sinks, two buffers beside it. One token at a time, for inference.

Shapes: B batch, H query heads, H_kv stored heads, S sinks, W window (S sink slots and
W - S ring slots), n = min(tokens seen, W) tokens held, d_head head width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from literate.minimal.window import _rope
from literate.parts.checks import float_tensor, non_negative_int, positive_int
from literate.parts.window import RingKVCache

__all__ = ["SinkRingCache", "streaming_attention"]


# --8<-- [start:sink_ring_cache]
class SinkRingCache:
    """StreamingLLM's cache of one layer (Xiao et al. 2024, sec. 3.2): the keys and
    values of the first `sinks` tokens, kept for good, and a RingKVCache of the last
    window - sinks, [B, H_kv, W, d_head] in all, however long the stream. Keys are
    stored before RoPE; `update` returns what is held in cache order, for the caller to
    turn at positions 0 .. n - 1 (`streaming_attention`).
    """

    def __init__(self, batch: int, n_kv_heads: int, d_head: int, *, window: int,
                 sinks: int = 4, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        window = positive_int("window", window)
        if non_negative_int("sinks", sinks) >= window:
            raise ValueError(f"sinks must be < window={window} (the ring needs a "
                             f"slot), got {sinks}")
        self.sinks, self.window, self.seen = sinks, window, 0  # seen: tokens written
        self.ring = RingKVCache(batch, n_kv_heads, 2**62, d_head, window=window - sinks,
                                dtype=dtype, device=device)  # capacity: no limit
        shape = (batch, n_kv_heads, sinks, d_head)
        self.k_sinks = torch.zeros(shape, dtype=dtype, device=device)
        self.v_sinks = torch.zeros(shape, dtype=dtype, device=device)

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values, filled or not: W slots, whatever was seen."""
        return self.ring.nbytes + self.k_sinks.nbytes + self.v_sinks.nbytes

    def kept(self) -> list[int]:
        """The text positions held, in cache order: the sinks, then the last ones."""
        held = min(self.ring.next_pos, self.ring.slots)
        return [*range(min(self.seen, self.sinks)), *range(self.seen - held, self.seen)]

    def check(self, k: Tensor, v: Tensor) -> None:
        """Refuse anything but one token [B, H_kv, 1, d_head] of the cache's layout."""
        for name, new in (("k", k), ("v", v)):
            if float_tensor(name, new, ndim=4).shape[2] != 1 or new.shape != k.shape:
                raise ValueError(f"{name} must be one token [B, H_kv, 1, d_head], like "
                                 f"k {tuple(k.shape)}, got {tuple(new.shape)}")
            if new.requires_grad and torch.is_grad_enabled():
                raise ValueError(f"{name} requires grad: decode under torch.no_grad()")
        b, h, _, d = k.shape
        self.ring.check(b, h, 0, d, k.dtype, k.device)  # batch, heads, width, dtype

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write one token's k (before RoPE) and v [B, H_kv, 1, d_head]; return what
        is held [B, H_kv, n, d_head] in cache order: the sinks, then the ring rolled
        to start at its oldest slot."""
        self.check(k, v)
        if self.seen < self.sinks:  # one of the first S: a sink, for good
            self.k_sinks[:, :, self.seen] = k[:, :, 0]
            self.v_sinks[:, :, self.seen] = v[:, :, 0]
        else:  # the ring: slot (p - S) % (W - S), over the oldest
            self.ring.write(k, v)
        self.seen += 1
        held, slots = min(self.ring.next_pos, self.ring.slots), self.ring.slots
        oldest = self.ring.next_pos % slots if held == slots else 0  # its slot
        s = min(self.seen, self.sinks)
        return (torch.cat((self.k_sinks[:, :, :s],
                           self.ring.k[:, :, :held].roll(-oldest, dims=2)), dim=2),
                torch.cat((self.v_sinks[:, :, :s],
                           self.ring.v[:, :, :held].roll(-oldest, dims=2)), dim=2))

    def check_query(self, q: Tensor, cos: Tensor, sin: Tensor) -> None:
        """Refuse a query [B, H, 1, d_head] that does not fit the cache, and RoPE
        tables with fewer than W rows (the positions within the cache: 0 .. W - 1)."""
        b, h, t, d = float_tensor("q", q, ndim=4).shape
        if (b, t, d) != (self.ring.batch, 1, self.ring.d_head) \
                or h % self.ring.n_kv_heads:
            raise ValueError(f"q must be one token [B={self.ring.batch}, H, 1, "
                             f"d_head={self.ring.d_head}], H a multiple of "
                             f"H_kv={self.ring.n_kv_heads}, got {tuple(q.shape)}")
        for name, table in (("cos", cos), ("sin", sin)):
            shape = float_tensor(name, table, ndim=2).shape
            if shape[0] < self.window or shape[1] != d:
                raise ValueError(f"{name} must be [>= window={self.window}, d_head={d}]"
                                 f", got {tuple(shape)}")
# --8<-- [end:sink_ring_cache]


# --8<-- [start:streaming_attention]
def streaming_attention(q: Tensor, k: Tensor, v: Tensor, cache: SinkRingCache,
                        cos: Tensor, sin: Tensor) -> Tensor:
    """One token's q [B, H, 1, d_head], k, v [B, H_kv, 1, d_head], before RoPE, through
    the cache; RoPE at places in the cache (sec. 3.2) -> [B, H, 1, d_head]."""
    cache.check_query(q, cos, sin)
    k, v = cache.update(k, v)  # [B, H_kv, n, d_head]: unturned, in cache order
    n = k.shape[2]
    q = _rope(q, cos[n - 1:n], sin[n - 1:n])  # the newest token: place n - 1
    k = _rope(k, cos[:n], sin[:n])  # every key turned afresh: places 0 .. n - 1
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # no mask
# --8<-- [end:streaming_attention]
