"""Multi-head attention with any number of key/value heads: MHA, GQA and MQA.

* Multi-head attention (Vaswani et al. 2017, sec. 3.2.2): H heads, each attending in its
  own d_head = d_model / H wide subspace; their outputs are concatenated and mixed by
  W_o.
* Multi-query attention (Shazeer 2019, sec. 3): every query head reads one shared key
  and value head, so the KV cache is H times smaller.
* Grouped-query attention (Ainslie et al. 2023, sec. 2.2): H_kv key/value heads, each
  shared by a group of G = H / H_kv consecutive query heads. MHA is H_kv = H, MQA
  H_kv = 1.

One class covers the three, for self-attention (optionally causal, with RoPE, with a KV
cache) and for cross-attention (keys and values from a `memory`). Causal structure and
padding are separate arguments (`causal: bool`, `key_valid: [B, T_k] bool`, True = a
real key), combined on explicit axes, never guessed from one mask's shape.

One path, two speeds: asked for its weights, the layer runs the transparent attention of
chapter 1 (`grouped_attention`); otherwise PyTorch's fused kernel (`fused_attention`),
which never materialises the [T_q, T_k] weights. The two are proven equal (for finite
inputs: on a NaN key the kernel may spread NaN into rows the mask blocks).

Shapes: B batch, T_q queries, T_k keys (S for a cross-attention memory), d = d_model,
H query heads, H_kv key/value heads, G = H / H_kv, d_head = d / H.
"""

# Over 450 lines on purpose: chapter 3's layer and the functions it is made of (split
# and merge heads, the grouped and fused attention, the masks, the checks), its eight
# sections in reading order.

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.parts.attention import (
    EMPTY_ROW_POLICIES,
    AttentionResult,
    EmptyRowPolicy,
    causal_allowed,
    check_mask,
    padding_allowed,
    refuse_empty_rows,
    scaled_dot_product_attention,
)
from literate.parts.cache import KVCache, MemoryKV
from literate.parts.checks import (
    bool_tensor,
    boolean,
    choice,
    features,
    float_tensor,
    input_checked,
    non_negative_int,
    positive_float,
    positive_int,
    weights_fit,
)
from literate.parts.positions import RotaryEmbedding, base_above_one

__all__ = [
    "split_heads",
    "merge_heads",
    "grouped_attention",
    "fused_attention",
    "attention_allowed",
    "head_counts",
    "call_span",
    "check_call",
    "MultiHeadAttention",
    "pack_qkv",
    "load_packed_qkv",
]


# --8<-- [start:split_heads]
def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """[B, T, n_heads * d_head] -> [B, n_heads, T, d_head].

    Head h gets columns h * d_head .. (h + 1) * d_head - 1 of the projection. A view:
    nothing is copied, the head axis is moved next to the batch axis so that attention
    runs for every (batch, head) pair at once.
    """
    if float_tensor("x", x).ndim != 3 or x.shape[-1] % positive_int("n_heads", n_heads):
        raise ValueError(f"x must be [B, T, n_heads * d_head], n_heads={n_heads}, "
                         f"got {tuple(x.shape)}")
    b, t, width = x.shape
    return x.view(b, t, n_heads, width // n_heads).transpose(1, 2)  # [B, H, T, d_head]
# --8<-- [end:split_heads]


# --8<-- [start:merge_heads]
def merge_heads(x: Tensor) -> Tensor:
    """[B, H, T, d_head] -> [B, T, H * d_head]: the heads side by side again, the
    inverse of `split_heads` (the Concat of Vaswani et al. 2017, sec. 3.2.2)."""
    b, h, t, d_head = float_tensor("x", x, ndim=4).shape
    return x.transpose(1, 2).reshape(b, t, h * d_head)  # [B, T, H * d_head]
# --8<-- [end:merge_heads]


# --8<-- [start:grouped_attention]
def grouped_attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None,
                      *, empty_row: EmptyRowPolicy = "error",
                      scale: float | None = None) -> AttentionResult:
    """Chapter 1's attention where H query heads share H_kv key/value heads (GQA).

    q [B, H, T_q, d_head]; k [B, H_kv, T_k, d_head]; v [B, H_kv, T_k, d_v]; H = G H_kv.
    Query head h reads key/value head h // G: heads 0..G-1 share the first, the next G
    the second (the order of Llama's `repeat_kv` and of PyTorch's `enable_gqa`).
    allowed: bool, broadcastable to [B, H, T_q, T_k], True = may attend.

    K and V are never copied G times: a group's G query heads are stacked along the
    query axis, q [B, H_kv, G * T_q, d_head], so q and k have the same leading axes and
    the matmul has nothing to broadcast. Returns per-head output [B, H, T_q, d_v],
    weights and scores [B, H, T_q, T_k]. `scale` as in scaled_dot_product_attention.
    """
    q, k, v = (float_tensor(n, t, ndim=4) for n, t in (("q", q), ("k", k), ("v", v)))
    (b, h, t_q, d_head), (h_kv, t_k) = q.shape, k.shape[1:3]
    if k.shape[0] != b or v.shape[:3] != k.shape[:3] or h % h_kv:
        raise ValueError(f"need q [B, H, T_q, d], k [B, H_kv, T_k, d], "
                         f"v [B, H_kv, T_k, d_v] with H % H_kv == 0, "
                         f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    g = h // h_kv
    empty_row = choice("empty_row", empty_row, EMPTY_ROW_POLICIES)
    if allowed is not None:
        allowed = check_mask("allowed", allowed, (b, h, t_q, t_k), q.device)  # a view
        if empty_row == "error":  # named by [batch, head, query], before the stacking
            refuse_empty_rows("allowed", ~allowed.any(dim=-1))
        allowed = allowed.reshape(b, h_kv, g * t_q, t_k)  # stacked like q below
    q = q.reshape(b, h_kv, g * t_q, d_head)  # a group's queries, stacked
    r = scaled_dot_product_attention(q, k, v, allowed, empty_row="zero", scale=scale)
    return AttentionResult(
        output=r.output.reshape(b, h, t_q, -1),  # [B, H, T_q, d_v]
        weights=r.weights.reshape(b, h, t_q, t_k),  # [B, H, T_q, T_k]
        scores=r.scores.reshape(b, h, t_q, t_k),  # [B, H, T_q, T_k]
        empty_rows=r.empty_rows.reshape(b, h, t_q),  # [B, H, T_q]
    )
# --8<-- [end:grouped_attention]


# --8<-- [start:fused_attention]
def fused_attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None,
                    *, is_causal: bool = False, scale: float | None = None,
                    rows_can_be_empty: bool = True) -> Tensor:
    """The output of `grouped_attention` (shapes as there), from PyTorch's fused kernel:
    one call that never stores the [T_q, T_k] weights. `is_causal=True` (no `allowed`)
    asks the kernel for the square causal mask itself. A query row that `allowed`
    leaves empty gets a zero output, as with `empty_row="zero"`, on every torch version
    (the kernel alone gives NaN or 0 there, depending on the version); a caller that
    knows no row is empty (a causal or windowed mask without padding: each query reads
    its own key) says `rows_can_be_empty=False`, and that guard, a pass over the mask
    and one over the output, is skipped. `scale`: the score scale, 1 / sqrt(d_head) if
    None.
    """
    # H query heads read H_kv < H key/value heads. A plain bool: under dynamic shapes
    # the comparison is symbolic, and the kernel refuses a symbolic enable_gqa.
    gqa = True if q.shape[1] != k.shape[1] else False
    if is_causal and allowed is not None:
        raise ValueError("pass allowed or is_causal=True, not both")
    if allowed is None or not rows_can_be_empty:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed,
                                              is_causal=is_causal, scale=scale,
                                              enable_gqa=gqa)
    empty = ~allowed.any(dim=-1, keepdim=True)  # [..., T_q, 1]: a row with no key
    # An empty row may read every key (so the kernel has something to average), and
    # its output is then zeroed.
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed | empty,
                                         scale=scale, enable_gqa=gqa)
    return out.masked_fill(empty, 0.0)  # [B, H, T_q, d_v]
# --8<-- [end:fused_attention]


# --8<-- [start:attention_allowed]
def attention_allowed(t_q: int, t_k: int, *, causal: bool, query_offset: int = 0,
                      key_valid: Tensor | None = None,
                      device: torch.device | str | None = None) -> Tensor | None:
    """The mask of one layer call, broadcastable to [B, H, T_q, T_k]; None if nothing is
    blocked.

    causal: query i, at absolute position query_offset + i, may read key j iff
    j <= query_offset + i; when the first query already reads every key (one new token
    after a cache), that blocks nothing and there is no causal mask. key_valid
    [B, T_k]: True for real keys. Each goes onto its own axes ([1, 1, T_q, T_k] and
    [B, 1, 1, T_k]), so a batch size that happens to equal T_q or a head count cannot
    be read as another axis.
    """
    if key_valid is not None and bool_tensor("key_valid", key_valid).shape[-1] != t_k:
        raise ValueError(f"key_valid must be [B, T_k={t_k}], "
                         f"got {tuple(key_valid.shape)}")
    allowed = None
    if boolean("causal", causal) and query_offset < t_k - 1:  # else: nothing blocked
        allowed = causal_allowed(t_q, t_k, query_offset=query_offset, device=device)
        allowed = allowed[None, None]  # [1, 1, T_q, T_k]
    if key_valid is not None:
        padding = padding_allowed(key_valid)  # [B, 1, 1, T_k]
        allowed = padding if allowed is None else allowed & padding  # [B, 1, T_q, T_k]
    return allowed
# --8<-- [end:attention_allowed]


# --8<-- [start:checks]
def head_counts(d_model: int, n_heads: int, n_kv_heads: int | None,
                d_head: int | None = None) -> tuple[int, int, int, int]:
    """Validated (d_model, n_heads, n_kv_heads, d_head); n_kv_heads=None means n_heads
    (MHA); d_head=None means d_model // n_heads, which must then divide evenly."""
    d_model = positive_int("d_model", d_model)
    n_heads = positive_int("n_heads", n_heads)
    n_kv_heads = (n_heads if n_kv_heads is None
                  else positive_int("n_kv_heads", n_kv_heads))
    if d_head is None and d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}: a "
                         f"floored d_head would attend in "
                         f"{n_heads * (d_model // n_heads)} of {d_model} dims without "
                         "any error")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must be divisible by "
                         f"n_kv_heads={n_kv_heads}: every key/value head serves the "
                         "same number of query heads")
    d_head = d_model // n_heads if d_head is None else positive_int("d_head", d_head)
    return d_model, n_heads, n_kv_heads, d_head


def rotary_part(rope: object, base: object, d_head: int) -> RotaryEmbedding | None:
    """The layer's RoPE part: None, RotaryEmbedding(d_head, base) for rope=True, or the
    RotaryEmbedding given (for this d_head, with its own base)."""
    if isinstance(rope, RotaryEmbedding):
        if rope.d_head != d_head or base is not None:
            raise ValueError(f"rope is a RotaryEmbedding for d_head={rope.d_head}, "
                             f"with its own base; the layer has d_head={d_head} and "
                             f"rope_base={base}")
        return rope
    if boolean("rope", rope):
        base = 10_000.0 if base is None else base_above_one("rope_base", base)
        if d_head % 2:
            raise ValueError(f"rope=True needs an even d_head (pairs rotate), "
                             f"got {d_head}")
        return RotaryEmbedding(d_head, base=base)
    if base is not None:
        raise ValueError("rope_base is given but rope=False")
    return None


QK_NORM_PLACEMENTS = ("head", "projection")


def check_qk_norm(qk_norm: object, q_norm: object, k_norm: object,
                  layer: "MultiHeadAttention") -> str | None:
    """The QK-norm placement the caller chose, checked against its norms: "head" (norms
    of width d_head, each head alone: Qwen3, Gemma 3), "projection" (the widths of
    q_proj and k_proj, before the split: OLMo 2), or None (no norms). Nothing is read
    from a shape: norms of other widths are an error naming both."""
    if qk_norm is None:
        if q_norm is not None or k_norm is not None:
            raise ValueError("q_norm and k_norm are given but qk_norm is None: say "
                             "where they go, qk_norm='head' or qk_norm='projection'")
        return None
    placement = choice("qk_norm", qk_norm, QK_NORM_PLACEMENTS)
    if not all(isinstance(n, nn.Module) for n in (q_norm, k_norm)):
        raise TypeError(f"qk_norm={placement!r} needs q_norm and k_norm, both modules "
                        "(norms)")
    d_head = layer.d_head
    want = ((d_head, d_head) if placement == "head"
            else (layer.n_heads * d_head, layer.n_kv_heads * d_head))
    widths = tuple(getattr(n, "d_model", None) for n in (q_norm, k_norm))
    if widths != want:
        raise ValueError(f"qk_norm={placement!r} needs q_norm and k_norm of widths "
                         f"{want}, got {widths}")
    return placement


def call_span(x: Tensor, memory: Tensor | MemoryKV | None, cache: KVCache | None,
              start_pos: int | None) -> tuple[int, int]:
    """(start, T_k) of a call: the absolute position of x[:, 0], and the number of keys
    the queries see (the memory's S; else the cached and the new tokens)."""
    start = cache.next_pos if cache is not None else start_pos or 0
    if memory is not None:
        return start, memory.k.shape[-2] if isinstance(memory, MemoryKV) \
            else memory.shape[1]
    return start, start + x.shape[1] if cache is not None else x.shape[1]


def check_call(layer: "MultiHeadAttention", x: object, memory: object, *,
               causal: object, key_valid: object, cache: object, start_pos: object,
               positions: object, empty_row: object,
               return_weights: object) -> tuple[int, int]:
    """Everything `MultiHeadAttention.forward` refuses, from metadata alone, before
    anything is projected or cached. Returns (start, T_k): the absolute position of
    x[:, 0] and the number of keys the queries see. Inside a checked entry, only that.
    """
    if input_checked():
        return call_span(x, memory, cache, start_pos)
    weights_fit(layer)  # a projection replaced by one of another shape
    x = features("x", x, width=layer.d_model, like=layer.q_proj.weight)
    if x.ndim != 3:
        raise ValueError(f"x must be [B, T, d_model={layer.d_model}], "
                         f"got {tuple(x.shape)}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}; "
                        "a padding mask goes in key_valid")
    boolean("return_weights", return_weights)
    choice("empty_row", empty_row, EMPTY_ROW_POLICIES)
    b, t_q = x.shape[:2]
    if isinstance(memory, MemoryKV):  # keys and values projected once (chapter 8)
        shape = (b, layer.n_kv_heads, memory.k.shape[-2], layer.d_head)
        for name, kv in zip(("memory.k", "memory.v"), memory):
            if features(name, kv, width=layer.d_head, like=x).shape != shape \
                    or shape[2] == 0:
                raise ValueError(f"{name} must be [B, H_kv, S >= 1, d_head] = "
                                 f"{list(shape)}, got {tuple(kv.shape)}")
    elif memory is not None:
        memory = features("memory", memory, width=layer.d_model,
                          like=layer.q_proj.weight)
        if memory.ndim != 3 or memory.shape[0] != b or memory.shape[1] == 0:
            raise ValueError(f"memory must be [B={b}, S >= 1, d], "
                             f"got {tuple(memory.shape)}")
    if memory is not None:
        if layer.rope is not None:
            raise ValueError("cross-attention (memory given) on a layer built with "
                             "rope=True: the target and the source are two sequences "
                             "and one rotation offset cannot place both; build the "
                             "cross-attention layer with rope=False")
        if causal:
            raise ValueError("cross-attention (memory given) takes causal=False: no "
                             "order runs between the target and the source, every "
                             "query reads the whole source")
        if cache is not None:
            raise ValueError("cross-attention (memory given) takes no cache: the "
                             "memory is projected once per source, not appended at "
                             "each step")
        if start_pos is not None or positions is not None:
            raise ValueError("cross-attention (memory given) takes no start_pos or "
                             "positions: the queries' positions do not enter it")
    if positions is not None:
        if not isinstance(positions, torch.Tensor) or positions.dtype != torch.long:
            raise TypeError("positions must be a torch.long tensor [B, T_q]")
        if positions.shape != (b, t_q) or positions.device != x.device:
            raise ValueError(f"positions must be [B={b}, T_q={t_q}] on {x.device}, got "
                             f"{tuple(positions.shape)} on {positions.device}")
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
    start = 0 if start_pos is None else non_negative_int("start_pos", start_pos)
    if cache is not None:
        if start_pos is not None and start != cache.next_pos:
            raise ValueError(f"start_pos={start} disagrees with cache.next_pos="
                             f"{cache.next_pos}: omit it to continue the cached "
                             "sequence, or reset() the cache to start a new one")
        start = cache.next_pos
        cache.check(b, layer.n_kv_heads, t_q, layer.d_head, x.dtype, x.device)
        if cache.owner not in (None, id(layer)):
            raise ValueError("the cache holds another layer's keys and values; give "
                             "each layer its own cache (layer.new_cache), or reset() "
                             "this one")
    t_k = call_span(x, memory, cache, start)[1]
    if key_valid is not None:
        if bool_tensor("key_valid", key_valid).shape != (b, t_k):
            raise ValueError(f"key_valid must be [B={b}, T_k={t_k}] (one flag per key "
                             "the queries see: the memory's S, or the cached plus new "
                             f"tokens), got {tuple(key_valid.shape)}")
        if key_valid.device != x.device:
            raise ValueError(f"key_valid is on {key_valid.device}, x on {x.device}")
    grad = x.requires_grad or layer.k_proj.weight.requires_grad
    if cache is not None and torch.is_grad_enabled() and grad:
        raise ValueError("a KV cache is for inference: its in-place writes cannot be "
                         "differentiated through; decode under torch.no_grad()")
    return start, t_k
# --8<-- [end:checks]


# --8<-- [start:multi_head_attention]
class MultiHeadAttention(nn.Module):
    """Multi-head attention with `n_kv_heads` key/value heads: MHA when n_kv_heads =
    n_heads (the default; Vaswani et al. 2017, sec. 3.2.2), GQA in between (Ainslie et
    al. 2023), MQA when n_kv_heads = 1 (Shazeer 2019).

    Self-attention: `attn(x, causal=...)`; cross-attention: `attn(x, memory,
    causal=False)`, queries from x [B, T, d], keys and values from memory [B, S, d].
    `cache=` a KVCache for decoding. Projections are named as in Hugging Face's Llama.
    Parts and numbers the newer blocks change (chapter 7):

    - rope: a RotaryEmbedding that turns q and k (never v) at their absolute positions
      (Su et al. 2021); `rope=True` is `RotaryEmbedding(d_head, base=rope_base)`;
    - q_norm, k_norm, qk_norm: QK-norm, where the caller says: qk_norm="head", norms
      of width d_head applied to each head (Qwen3, Gemma 3), or "projection", norms of
      the projections' widths applied before the split (OLMo 2);
    - d_head: the head width, d_model // n_heads unless given (Gemma 3 and Qwen3's
      small models project to n_heads * d_head != d_model);
    - scale: the score scale, 1 / sqrt(d_head) unless given (Gemma 3).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, *,
                 d_head: int | None = None, bias: bool = False,
                 rope: bool | RotaryEmbedding = False, rope_base: float | None = None,
                 q_norm: nn.Module | None = None, k_norm: nn.Module | None = None,
                 qk_norm: str | None = None, scale: float | None = None) -> None:
        super().__init__()
        d_model, n_heads, n_kv_heads, d_head = head_counts(d_model, n_heads, n_kv_heads,
                                                           d_head)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_head
        self.rope = rotary_part(rope, rope_base, self.d_head)
        self.qk_norm = check_qk_norm(qk_norm, q_norm, k_norm, self)
        self.q_norm, self.k_norm = q_norm, k_norm
        self.scale = None if scale is None else positive_float("scale", scale)
        bias, d_q, d_kv = boolean("bias", bias), n_heads * d_head, n_kv_heads * d_head
        self.q_proj = nn.Linear(d_model, d_q, bias=bias)  # W_q: H heads of d_head
        self.k_proj = nn.Linear(d_model, d_kv, bias=bias)  # W_k: only H_kv heads
        self.v_proj = nn.Linear(d_model, d_kv, bias=bias)  # W_v: only H_kv heads
        self.o_proj = nn.Linear(d_q, d_model, bias=bias)  # W_o mixes the heads

    def new_cache(self, batch: int, capacity: int) -> KVCache:
        """An empty cache for this layer: n_kv_heads heads of d_head, never n_heads."""
        w = self.k_proj.weight
        return KVCache(batch, self.n_kv_heads, capacity, self.d_head, dtype=w.dtype,
                       device=w.device)

    def allowed(self, t_q: int, t_k: int, causal: bool, key_valid: Tensor | None,
                cache: KVCache | None) -> Tensor | None:
        """The mask of a call whose t_q queries are the last of its t_k positions
        (`attention_allowed`); a method, for chapter 10's sliding window to override."""
        return attention_allowed(t_q, t_k, causal=causal, query_offset=t_k - t_q,
                                 key_valid=key_valid, device=self.q_proj.weight.device)

    def kernel_makes_mask(self, t_q: int, t_k: int, key_valid: Tensor | None) -> bool:
        """Whether a causal call's mask is the plain square one, which the fused kernel
        makes itself (no padding, no cache); a method, for chapter 10's sliding window
        (whose mask never is) to override."""
        return key_valid is None and t_q == t_k

    def attend(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, *,
               plain_causal: bool, padded: bool,
               return_weights: bool) -> tuple[Tensor, Tensor | None]:
        """The attention itself: q [B, H, T_q, d_head], k and v [B, H_kv, T_k, d_head]
        -> (per-head output [B, H, T_q, d_head], the weights or None); a method, for
        chapter 10's attention sinks to override. `plain_causal`: `allowed` is the
        square causal mask, which the fused kernel makes itself; `padded`: `allowed`
        has padding in it (without, no query row is empty)."""
        if return_weights:  # the transparent path of chapter 1
            # empty rows were refused by forward, or are wanted: "zero"
            result = grouped_attention(q, k, v, allowed, empty_row="zero",
                                       scale=self.scale)
            return result.output, result.weights
        if plain_causal:
            return fused_attention(q, k, v, is_causal=True, scale=self.scale), None
        # allowed None: nothing blocked (no padding, one query after a cache)
        return fused_attention(q, k, v, allowed, scale=self.scale,
                               rows_can_be_empty=padded), None

    def queries(self, x: Tensor) -> Tensor:
        """x [B, T, d] -> q [B, H, T, d_head], QK-normed if the layer has q_norm."""
        q = self.q_proj(x)
        if self.qk_norm == "projection":  # OLMo 2: all heads at once, before the split
            q = self.q_norm(q)
        q = split_heads(q, self.n_heads)  # [B, H, T, d_head]
        return self.q_norm(q) if self.qk_norm == "head" else q  # Qwen3, Gemma 3

    def keys_values(self, source: Tensor) -> MemoryKV:
        """source [B, T, d] -> k, v [B, H_kv, T, d_head], k QK-normed like q. For
        cross-attention, call it once per source and pass the result as `memory`."""
        k, v = self.k_proj(source), self.v_proj(source)
        if self.qk_norm == "projection":
            k = self.k_norm(k)
        k = split_heads(k, self.n_kv_heads)  # [B, H_kv, T, d_head]
        k = self.k_norm(k) if self.qk_norm == "head" else k
        return MemoryKV(k, split_heads(v, self.n_kv_heads))

    def forward(self, x: Tensor, memory: Tensor | MemoryKV | None = None, *,
                causal: bool, key_valid: Tensor | None = None,
                cache: KVCache | None = None, start_pos: int | None = None,
                positions: Tensor | None = None, empty_row: EmptyRowPolicy = "error",
                return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """x [B, T_q, d] -> [B, T_q, d]; with return_weights, also the weights
        [B, H, T_q, T_k].

        causal (required, no default): True for decoder self-attention.
        memory: the source of cross-attention, [B, S, d], or its keys and values
        already projected (a MemoryKV from `keys_values`).
        key_valid [B, T_k]: True = a real key, one flag per key the queries see: S for
        cross-attention, T_q without a cache, cache.next_pos + T_q with one.
        start_pos: absolute position of x[:, 0]; with a cache it is cache.next_pos.
        positions [B, T_q]: each row's own positions instead (left padding); they
        enter through RoPE only, and each must be < start + T_q.
        """
        start, t_k = check_call(self, x, memory, causal=causal, key_valid=key_valid,
                                cache=cache, start_pos=start_pos, positions=positions,
                                empty_row=empty_row, return_weights=return_weights)
        t_q = x.shape[1]  # the queries are the last t_q of the t_k positions
        allowed = self.allowed(t_q, t_k, causal, key_valid, cache)
        if key_valid is not None and empty_row == "error":  # padding can empty a row
            rows = allowed.expand(x.shape[0], 1, t_q, -1)  # [B, 1, T_q, T_k], a view
            refuse_empty_rows("causal and key_valid", ~rows.any(dim=-1)[:, 0])
        q = self.queries(x)  # [B, H, T_q, d_head]
        if isinstance(memory, MemoryKV):
            k, v = memory  # [B, H_kv, S, d_head]: projected once, read at every step
        else:
            k, v = self.keys_values(x if memory is None else memory)  # [B, H_kv, ., d]
        if self.rope is not None:  # positions start .. start + T_q - 1; never v
            # k is turned before it is cached; one table lookup for both
            q, k = self.rope.pair(q, k, offset=start, positions=positions)
        if cache is not None:
            cache.bind(self)  # one cache, one layer
            k, v = cache.write(k, v)  # [B, H_kv, T_k, d_head]: checked by check_call
        plain = allowed is not None and self.kernel_makes_mask(t_q, t_k, key_valid)
        out, weights = self.attend(q, k, v, allowed, plain_causal=plain,
                                   padded=key_valid is not None,
                                   return_weights=return_weights)  # [B, H, T_q, d]
        out = self.o_proj(merge_heads(out))  # [B, T_q, d]
        return (out, weights) if return_weights else out
# --8<-- [end:multi_head_attention]


# --8<-- [start:packed_qkv]
def pack_qkv(attn: MultiHeadAttention) -> nn.Linear:
    """One Linear d -> (H + 2 H_kv) d_head that computes q, k and v in one matmul.

    Rows are stacked q; k; v, the layout of nn.MultiheadAttention's `in_proj_weight`
    and of Falcon-7B's `query_key_value`. Split its output with
    `.split([H * d_head, H_kv * d_head, H_kv * d_head], dim=-1)`.
    """
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attn must be a MultiHeadAttention, got {type(attn).__name__}")
    parts, w = (attn.q_proj, attn.k_proj, attn.v_proj), attn.q_proj.weight
    packed = nn.Linear(attn.d_model, sum(p.out_features for p in parts),
                       bias=attn.q_proj.bias is not None, dtype=w.dtype,
                       device=w.device)
    with torch.no_grad():  # weight [(H + 2 H_kv) d_head, d]: q; k; v rows
        packed.weight.copy_(torch.cat([p.weight for p in parts]))
        if packed.bias is not None:
            packed.bias.copy_(torch.cat([p.bias for p in parts]))
    return packed


def load_packed_qkv(attn: MultiHeadAttention, weight: Tensor,
                    bias: Tensor | None = None) -> None:
    """The reverse: copy a packed q; k; v weight [(H + 2 H_kv) d_head, d] (and bias)
    into q_proj, k_proj and v_proj, e.g. from nn.MultiheadAttention's in_proj_weight."""
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attn must be a MultiHeadAttention, got {type(attn).__name__}")
    parts = (attn.q_proj, attn.k_proj, attn.v_proj)
    sizes = [p.out_features for p in parts]
    if float_tensor("weight", weight).shape != (sum(sizes), attn.d_model):
        raise ValueError(f"weight must be [{sum(sizes)}, {attn.d_model}] "
                         f"(q; k; v rows), got {tuple(weight.shape)}")
    if (bias is None) != (attn.q_proj.bias is None):
        raise ValueError("bias must be given exactly when the layer was built with "
                         "bias=True")
    if bias is not None and float_tensor("bias", bias).shape != (sum(sizes),):
        raise ValueError(f"bias must be [{sum(sizes)}], got {tuple(bias.shape)}")
    with torch.no_grad():
        for p, w in zip(parts, weight.split(sizes)):
            p.weight.copy_(w)
        if bias is not None:
            for p, b_ in zip(parts, bias.split(sizes)):
                p.bias.copy_(b_)
# --8<-- [end:packed_qkv]
