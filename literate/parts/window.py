"""Sliding-window attention (chapter 10): a query reads only the last `window` keys.

Mistral 7B (Jiang et al. 2023) attends, in every layer, to the `sliding_window` = 4096
positions ending at the query; Gemma 3 (Gemma Team 2025) does so in five layers of six
(1024). Three parts, each a subclass or a sibling of chapter 3's, which they leave as
they are:

* the mask (`window_allowed`): key k is visible to query q iff q - W < k <= q, the W
  positions ending at the query itself (Hugging Face's
  `sliding_window_causal_mask_function`); `window_attention_allowed` is chapter 3's
  `attention_allowed` for such a layer;
* the cache (`RingKVCache`): a query at p never reads a position before p - W + 1, so
  the cache needs W slots, not one per position: a ring, position p written to slot
  p % W, whose memory does not grow with the sequence;
* the layer (`SlidingWindowAttention`): chapter 3's `MultiHeadAttention` with the
  window's mask (its `allowed`), a ring for its cache (`new_cache`) and the window's
  refusals (`forward`, before chapter 3's `check_call`).

Mistral is then chapter 7's Llama with this attention (`mistral_block`,
`mistral_model`, loaded from a MistralConfig by `mistral_from_hf_config`,
`check_mistral_config`, `load_hf_mistral`); Gemma 3's local layers are in
`literate/models/gemma3.py`.

Positions here are slots, steps of the sequence: a left-padded row's real tokens sit in
consecutive slots, so the window counts real tokens, as Hugging Face's (cache indices)
does.

Shapes: B batch, H_kv stored heads, T_q queries, T_k keys, W window, S = min(W,
capacity) ring slots, d_head head width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from literate.parts.attention import padding_allowed
from literate.parts.cache import KVCache, MemoryKV
from literate.parts.checks import (
    bool_tensor,
    boolean,
    input_checked,
    non_negative_int,
    positive_int,
)
from literate.parts.multi_head import MultiHeadAttention

__all__ = [
    "LAYER_TYPES",
    "window_allowed",
    "window_attention_allowed",
    "RingKVCache",
    "SlidingWindowAttention",
    "layer_window",
]


# --8<-- [start:window_allowed]
def window_allowed(query_positions: Tensor, key_positions: Tensor,
                   window: int) -> Tensor:
    """Sliding-window causal mask from absolute positions: key k is visible to query q
    iff q - window < k <= q, the `window` positions ending at the query itself (the
    meaning of Mistral's and Gemma 3's `sliding_window`, and of Hugging Face's
    `sliding_window_causal_mask_function`: `kv_idx > q_idx - sliding_window` and
    `kv_idx <= q_idx`). A negative key position marks an empty cache slot: never
    visible. query_positions [..., T_q], key_positions [..., T_k], torch.long, leading
    axes broadcast (positions per row, [B, T], give [B, T_q, T_k]) -> [..., T_q, T_k].
    """
    window = positive_int("window", window)
    for name, p in (("query_positions", query_positions),
                    ("key_positions", key_positions)):
        if not isinstance(p, Tensor) or p.dtype != torch.long or p.ndim == 0:
            kind = p.dtype if isinstance(p, Tensor) else type(p).__name__
            raise TypeError(f"{name} must be a torch.long tensor [..., T], got {kind}")
    q = query_positions[..., :, None]  # [..., T_q, 1]
    k = key_positions[..., None, :]  # [..., 1, T_k]
    return (k >= 0) & (k <= q) & (k > q - window)  # [..., T_q, T_k]
# --8<-- [end:window_allowed]


# --8<-- [start:window_attention_allowed]
def window_attention_allowed(t_q: int, t_k: int, *, window: int, query_offset: int = 0,
                             key_valid: Tensor | None = None,
                             key_positions: Tensor | None = None,
                             device: torch.device | str | None = None
                             ) -> Tensor | None:
    """Chapter 3's `attention_allowed` for a sliding-window layer (always causal): the
    mask of one call, broadcastable to [B, H, T_q, T_k]; None if nothing is blocked.

    Query i, at absolute position query_offset + i, reads the `window` positions
    ending at its own (`window_allowed`). The keys are positions 0 .. T_k - 1 unless
    `key_positions` [T_k'] gives theirs: a ring cache's slots, out of order (for one
    new query they are exactly its window, nothing to block). key_valid [B, T_k]: one
    flag per position, read at those positions. The window on [1, 1, T_q, T_k], the
    padding on [B, 1, 1, T_k], as chapter 3 puts them.
    """
    t_q, t_k = non_negative_int("t_q", t_q), non_negative_int("t_k", t_k)
    query_offset = non_negative_int("query_offset", query_offset)
    window = positive_int("window", window)
    if key_valid is not None and bool_tensor("key_valid", key_valid).shape[-1] != t_k:
        raise ValueError(f"key_valid must be [B, T_k={t_k}], "
                         f"got {tuple(key_valid.shape)}")
    if key_positions is not None and not input_checked():
        if not isinstance(key_positions, Tensor) or key_positions.dtype != torch.long:
            kind = (key_positions.dtype if isinstance(key_positions, Tensor)
                    else type(key_positions).__name__)
            raise TypeError(f"key_positions must be a torch.long tensor [T_k'], got "
                            f"{kind}")
        if key_positions.ndim != 1:
            raise ValueError(f"key_positions must be [T_k'], one position per key, got "
                             f"{tuple(key_positions.shape)}")
    if key_positions is None:  # 0 .. T_k - 1: blocked unless one query reads all
        blocked = query_offset < t_k - 1 or t_k > window
    else:  # a ring's slots: one new query reads them all
        blocked = t_q > 1
    allowed = None
    if blocked:
        queries = torch.arange(query_offset, query_offset + t_q, device=device)
        keys = (torch.arange(t_k, device=device) if key_positions is None
                else key_positions)
        allowed = window_allowed(queries, keys, window)[None, None]  # [1, 1, T_q, T_k]
    if key_valid is not None:
        if key_positions is not None:  # the flags of the slots' positions
            key_valid = key_valid.index_select(1, key_positions.clamp(min=0))
        padding = padding_allowed(key_valid)  # [B, 1, 1, T_k]
        allowed = padding if allowed is None else allowed & padding  # [B, 1, T_q, T_k]
    return allowed
# --8<-- [end:window_attention_allowed]


# --8<-- [start:ring_kv_cache]
class RingKVCache(KVCache):
    """The cache of a sliding-window layer: chapter 3's KVCache whose buffers are a
    ring of S = min(window, capacity) slots, [B, H_kv, S, d_head].

    Position p is written to slot p % S, over the position p - S, which no query from
    p on can see (a query at p reads p - window + 1 .. p): the S slots hold the
    window - 1 keys before the newest token and the newest itself, and the memory
    never grows, however long the sequence (`capacity` only bounds the positions, as
    chapter 3's does). The slots then hold their positions out of order, so each
    slot's position is stored (`positions` [S], -1 for an empty slot) and
    `key_positions` says which positions `write` returns, for the layer's mask.
    `reorder` is chapter 3's: its [:next_pos] is every slot once the ring is full.
    A ring serves only a layer of its window (`check_window`).
    """

    def __init__(self, batch: int, n_kv_heads: int, capacity: int, d_head: int, *,
                 window: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        self.window = positive_int("window", window)
        capacity = positive_int("capacity", capacity)
        self.slots = min(self.window, capacity)
        super().__init__(batch, n_kv_heads, self.slots, d_head, dtype=dtype,
                         device=device)  # buffers of S slots
        self.capacity = capacity  # and positions up to capacity - 1, as chapter 3's
        self.positions = torch.full((self.slots,), -1, dtype=torch.long,
                                    device=self.device)  # slot -> position

    def check_window(self, layer: object) -> None:
        """Refuse a layer of another window (or of none): the ring keeps what a query
        of its own window reads, and drops what a longer one would read."""
        window = getattr(layer, "window", None)
        if window != self.window:
            raise ValueError(f"the cache is a ring for window={self.window}, the "
                             f"layer has window={window}; make its cache with "
                             "layer.new_cache")

    def bind(self, layer: object) -> None:
        """Chapter 3's `bind`, for a layer of this ring's window only (chapter 3's
        layer, which has none, would read the slots as positions 0 .. S - 1)."""
        self.check_window(layer)
        super().bind(layer)

    def write(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """`append` without its checks. Returns what the new queries read, in the
        order `key_positions` gives: until the ring wraps, chapter 3's views (slot =
        position); one new token after, written over the stale slot, and the S slots
        read in place; a chunk of several, the old slots and its own keys side by
        side (a copy), and then the newest S of its tokens written."""
        start, end = self.next_pos, self.next_pos + k_new.shape[2]
        if end <= self.slots:  # nothing overwritten: slot = position
            self.positions[start:end] = torch.arange(start, end, device=self.device)
            return super().write(k_new, v_new)
        if end - start == 1:  # a decoding step
            self.put(start, k_new, v_new)
            return self.k, self.v  # the slots themselves: no copy
        filled = min(start, self.slots)  # a chunk: read the old slots before writing
        k = torch.cat((self.k[:, :, :filled], k_new), dim=2)  # [B, H_kv, S' + T, d]
        v = torch.cat((self.v[:, :, :filled], v_new), dim=2)
        keep = min(end - start, self.slots)  # the newest S tokens stay
        self.put(end - keep, k_new[:, :, -keep:], v_new[:, :, -keep:])
        return k, v

    def ring_slots(self, first: int, n: int) -> list[tuple[slice, slice]]:
        """Where n <= S consecutive positions first .. first + n - 1 live in the ring
        (slot p % S): at most two (slots, tokens) slices, the second from slot 0."""
        at = first % self.slots
        head = min(n, self.slots - at)
        parts = [(slice(at, at + head), slice(0, head))]
        if n > head:
            parts.append((slice(0, n - head), slice(head, n)))
        return parts

    def put(self, first: int, k: Tensor, v: Tensor) -> None:
        """Write the n <= S tokens of positions first .. first + n - 1 to their ring
        slots; then next_pos = first + n."""
        n = k.shape[2]
        for slots, tokens in self.ring_slots(first, n):
            self.k[:, :, slots] = k[:, :, tokens]
            self.v[:, :, slots] = v[:, :, tokens]
            self.positions[slots] = torch.arange(
                first + tokens.start, first + tokens.stop, device=self.device)
        self.next_pos = first + n

    def key_positions(self, new: int) -> Tensor | None:
        """The positions of the keys `write` returns when `new` tokens come next, in
        its order [T_k] (-1: an empty slot); None when they are simply 0 .. next_pos +
        new - 1 (the ring has not wrapped yet)."""
        start, end = self.next_pos, self.next_pos + positive_int("new", new)
        if end <= self.slots:
            return None
        if new == 1:
            positions = self.positions.clone()
            positions[start % self.slots] = start  # the stale slot takes the new token
            return positions
        return torch.cat((self.positions[:min(start, self.slots)],
                          torch.arange(start, end, device=self.device)))

    def truncate(self, length: int) -> None:
        """Forget every position from `length` on: `next_pos` goes back to `length`.
        The ring can go back only while it still holds the window - 1 positions
        before `length` (after one decoding step, always; after a chunk, not once its
        slots were overwritten): else an error, and nothing changes."""
        if non_negative_int("length", length) > self.next_pos:
            raise ValueError(f"length must be <= next_pos={self.next_pos}, "
                             f"got {length}")
        held = max(0, self.next_pos - self.slots)  # the oldest position still held
        needed = max(0, length - self.window + 1)  # the oldest a query at length reads
        if length > 0 and held > needed:
            raise ValueError(f"the ring holds positions {held} .. {self.next_pos - 1}: "
                             f"going back to length={length} needs position {needed}, "
                             "overwritten; reset() and prefill again")
        first = max(length, held)  # forget the held positions first .. next_pos - 1
        for slots, _ in self.ring_slots(first, self.next_pos - first):
            self.k[:, :, slots] = 0
            self.v[:, :, slots] = 0
            self.positions[slots] = -1
        self.next_pos = length

    def reset(self) -> None:
        """Chapter 3's `reset`, and every slot empty."""
        super().reset()
        self.positions.fill_(-1)
# --8<-- [end:ring_kv_cache]


# --8<-- [start:sliding_window_attention]
class SlidingWindowAttention(MultiHeadAttention):
    """Chapter 3's MultiHeadAttention in which a query reads only the `window`
    positions ending at its own (Mistral 7B's every layer, Gemma 3's local layers):
    causal self-attention only. Four methods change: `new_cache` makes a RingKVCache
    of min(window, capacity) slots (a plain KVCache works too: it keeps every key and
    the mask reads the window); `allowed` is the window's mask, at a ring's slot
    positions; `kernel_makes_mask` is False (the fused kernel's own causal mask would
    read past the window); `forward` refuses what a window cannot do, then runs chapter
    3's. `options`: MultiHeadAttention's (d_head, rope, q_norm, ...).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, *,
                 window: int, **options: object) -> None:
        window = positive_int("window", window)
        super().__init__(d_model, n_heads, n_kv_heads, **options)
        self.window = window

    def new_cache(self, batch: int, capacity: int) -> RingKVCache:
        """An empty ring for this layer: n_kv_heads heads of d_head, min(window,
        capacity) slots."""
        w = self.k_proj.weight
        return RingKVCache(batch, self.n_kv_heads, capacity, self.d_head,
                           window=self.window, dtype=w.dtype, device=w.device)

    def kernel_makes_mask(self, t_q: int, t_k: int, key_valid: Tensor | None) -> bool:
        """Never: the fused kernel's causal mask would read past the window."""
        return False

    def allowed(self, t_q: int, t_k: int, causal: bool, key_valid: Tensor | None,
                cache: KVCache | None) -> Tensor | None:
        """The window's mask (`window_attention_allowed`); a ring's keys are at the
        positions of its slots, read before `write` changes them."""
        ring = isinstance(cache, RingKVCache)
        return window_attention_allowed(
            t_q, t_k, window=self.window, query_offset=t_k - t_q, key_valid=key_valid,
            key_positions=cache.key_positions(t_q) if ring else None,
            device=self.q_proj.weight.device)

    def forward(self, x: Tensor, memory: Tensor | MemoryKV | None = None, *,
                causal: bool, cache: KVCache | None = None,
                return_weights: bool = False,
                **options: object) -> Tensor | tuple[Tensor, Tensor]:
        """Chapter 3's forward (`options`: its key_valid, start_pos, positions,
        empty_row), after the window's refusals, from metadata alone: cross-attention
        or causal=False, a ring of another window, and return_weights with a ring
        (its keys are in slot order)."""
        if memory is not None or causal is False:  # another type: check_call's error
            raise ValueError(f"the layer has window={self.window}: a sliding window "
                             "is causal self-attention; call it with causal=True, no "
                             "memory")
        if isinstance(cache, RingKVCache):
            cache.check_window(self)
            if boolean("return_weights", return_weights):
                raise ValueError("return_weights with a ring cache: its keys are in "
                                 "slot order, not position order; use a KVCache")
        return super().forward(x, memory, causal=causal, cache=cache,
                               return_weights=return_weights, **options)


# Hugging Face's names of a windowed and a full layer in a config's `layer_types`
LAYER_TYPES = ("sliding_attention", "full_attention")


def layer_window(attn: object) -> int | None:
    """An attention layer's window: `window` of a SlidingWindowAttention (or a subclass,
    chapter 10's sinks with a window), None for any other layer, which reads every
    earlier key."""
    return attn.window if isinstance(attn, SlidingWindowAttention) else None
# --8<-- [end:sliding_window_attention]

