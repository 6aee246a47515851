"""Multi-head attention with any number of key/value heads: MHA, GQA and MQA.

* Multi-head attention (Vaswani et al. 2017, sec. 3.2.2): H heads, each attending in its
  own d_head = d_model / H wide subspace; their outputs are concatenated and mixed by W_o.
* Multi-query attention (Shazeer 2019, sec. 3): every query head reads one shared key and
  value head, so the KV cache is H times smaller.
* Grouped-query attention (Ainslie et al. 2023, sec. 2.2): H_kv key/value heads, each
  shared by a group of G = H / H_kv consecutive query heads. MHA is H_kv = H, MQA H_kv = 1.

One class covers the three, for self-attention (optionally causal, with RoPE, with a KV
cache) and for cross-attention (keys and values from a `memory`). Causal structure and
padding are separate arguments (`causal: bool`, `key_valid: [B, T_k] bool`, True = a real
key), combined on explicit axes, never guessed from one mask's shape.

Shapes: B batch, T_q queries, T_k keys (S for a cross-attention memory), d = d_model,
H query heads, H_kv key/value heads, G = H / H_kv, d_head = d / H.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from literate.attention import (
    EMPTY_ROW_POLICIES,
    AttentionResult,
    EmptyRowPolicy,
    causal_allowed,
    padding_allowed,
    scaled_dot_product_attention,
)
from literate.cache import KVCache
from literate.checks import bool_tensor, boolean, choice, float_tensor, non_negative_int, positive_int
from literate.positions import apply_rope, base_above_one, rope_cache

__all__ = [
    "split_heads",
    "merge_heads",
    "grouped_attention",
    "attention_allowed",
    "resolve_start",
    "head_counts",
    "check_forward",
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
    n_heads = positive_int("n_heads", n_heads)
    x = float_tensor("x", x)
    if x.ndim != 3 or x.shape[-1] % n_heads:
        raise ValueError(f"x must be [B, T, n_heads * d_head] with n_heads={n_heads}, got {tuple(x.shape)}")
    b, t, width = x.shape
    return x.view(b, t, n_heads, width // n_heads).transpose(1, 2)  # [B, H, T, d_head]
# --8<-- [end:split_heads]


# --8<-- [start:merge_heads]
def merge_heads(x: Tensor) -> Tensor:
    """[B, H, T, d_head] -> [B, T, H * d_head]: the heads side by side again, the inverse
    of `split_heads` (this is the Concat of Vaswani et al. 2017, eq. in sec. 3.2.2)."""
    x = float_tensor("x", x)
    if x.ndim != 4:
        raise ValueError(f"x must be [B, H, T, d_head], got {tuple(x.shape)}")
    b, h, t, d_head = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_head)  # [B, T, H * d_head]
# --8<-- [end:merge_heads]


# --8<-- [start:grouped_attention]
def grouped_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    allowed: Tensor | None = None,
    *,
    empty_row: EmptyRowPolicy = "error",
) -> AttentionResult:
    """Attention where H query heads share H_kv key/value heads (GQA; MHA and MQA are the ends).

    q [B, H, T_q, d_head]; k [B, H_kv, T_k, d_head]; v [B, H_kv, T_k, d_v]; H = G * H_kv.
    Query head h reads key/value head h // G: heads 0..G-1 share the first, the next G the
    second, and so on (the order of Llama's `repeat_kv` and of PyTorch's `enable_gqa`).
    allowed: bool, broadcastable to [B, H, T_q, T_k], True = may attend.

    K and V are never copied G times: the G query heads of a group are stacked along the
    query axis, q [B, H_kv, G * T_q, d_head], so that q and k have the same leading axes
    and the matmul has nothing to broadcast. (A size-1 group axis on k would be broadcast
    by `torch.matmul` through expand + reshape, which copies K G times.)
    Returns per-head output [B, H, T_q, d_v], weights and scores [B, H, T_q, T_k].
    """
    empty_row = choice("empty_row", empty_row, EMPTY_ROW_POLICIES)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if float_tensor(name, t).ndim != 4:
            raise ValueError(f"{name} must be 4-d [B, heads, T, width], got {tuple(t.shape)}")
    b, h, t_q, d_head = q.shape
    h_kv, t_k = k.shape[1], k.shape[2]
    if k.shape[0] != b or v.shape[:3] != k.shape[:3] or h % h_kv:
        raise ValueError(
            f"need q [B, H, T_q, d], k [B, H_kv, T_k, d], v [B, H_kv, T_k, d_v] with H % H_kv == 0, "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    g = h // h_kv
    if allowed is not None:
        allowed = bool_tensor("allowed", allowed)
        try:
            allowed = allowed.expand(b, h, t_q, t_k)  # [B, H, T_q, T_k], a view
        except RuntimeError:
            raise ValueError(f"allowed {tuple(allowed.shape)} does not broadcast to {(b, h, t_q, t_k)}") from None
        empty = ~allowed.any(dim=-1)  # [B, H, T_q]
        if empty_row == "error" and bool(empty.any()):
            raise ValueError(
                f"allowed leaves query row(s) with no key, at [batch, head, query] "
                f"{torch.nonzero(empty)[:8].tolist()}; pass empty_row='zero' for padded queries"
            )
        allowed = allowed.reshape(b, h_kv, g * t_q, t_k)  # [B, H_kv, G*T_q, T_k]

    q = q.reshape(b, h_kv, g * t_q, d_head)  # [B, H_kv, G*T_q, d_head]: a group's queries stacked
    r = scaled_dot_product_attention(q, k, v, allowed, empty_row=empty_row)  # k, v as they are
    return AttentionResult(
        output=r.output.reshape(b, h, t_q, -1),  # [B, H, T_q, d_v]
        weights=r.weights.reshape(b, h, t_q, t_k),  # [B, H, T_q, T_k]
        scores=r.scores.reshape(b, h, t_q, t_k),  # [B, H, T_q, T_k]
        empty_rows=r.empty_rows.reshape(b, h, t_q),  # [B, H, T_q]
    )
# --8<-- [end:grouped_attention]


# --8<-- [start:attention_allowed]
def attention_allowed(
    t_q: int,
    t_k: int,
    *,
    causal: bool,
    query_offset: int = 0,
    key_valid: Tensor | None = None,
    device: torch.device | str | None = None,
) -> Tensor | None:
    """The mask of one layer call, broadcastable to [B, H, T_q, T_k]; None if nothing is blocked.

    causal: query i, at absolute position query_offset + i, may read key j iff
    j <= query_offset + i. key_valid [B, T_k]: True for real keys. Each goes onto its own
    axes explicitly ([1, 1, T_q, T_k] and [B, 1, 1, T_k]), so a batch size that happens to
    equal T_q or a head count cannot be read as another axis. Axis 1 broadcasts over heads.
    """
    allowed = None
    if boolean("causal", causal):
        allowed = causal_allowed(t_q, t_k, query_offset=query_offset, device=device)[None, None]  # [1, 1, T_q, T_k]
    if key_valid is not None:
        padding = padding_allowed(key_valid)  # [B, 1, 1, T_k]
        allowed = padding if allowed is None else allowed & padding  # [B, 1, T_q, T_k]
    return allowed
# --8<-- [end:attention_allowed]


# --8<-- [start:resolve_start]
def resolve_start(cache: KVCache | None, start_pos: int | None) -> int:
    """Absolute position of this call's first query (and first new key).

    With a cache it is `cache.next_pos`, and an explicit `start_pos` must agree: a stale
    one would rotate the new tokens to the wrong angles and misplace the causal mask,
    silently. Without a cache it is `start_pos`, 0 by default.
    """
    if start_pos is not None:
        start_pos = non_negative_int("start_pos", start_pos)
    if cache is None:
        return 0 if start_pos is None else start_pos
    if start_pos is not None and start_pos != cache.next_pos:
        raise ValueError(
            f"start_pos={start_pos} disagrees with cache.next_pos={cache.next_pos}: omit start_pos "
            "to continue the cached sequence, or reset() the cache to start a new one"
        )
    return cache.next_pos
# --8<-- [end:resolve_start]


# --8<-- [start:checks]
def head_counts(d_model: int, n_heads: int, n_kv_heads: int | None) -> tuple[int, int, int]:
    """Validated (d_model, n_heads, n_kv_heads); n_kv_heads=None means n_heads (MHA)."""
    d_model = positive_int("d_model", d_model)
    n_heads = positive_int("n_heads", n_heads)
    n_kv_heads = n_heads if n_kv_heads is None else positive_int("n_kv_heads", n_kv_heads)
    if d_model % n_heads:
        raise ValueError(
            f"d_model={d_model} must be divisible by n_heads={n_heads}: a floored d_head would "
            f"attend in {n_heads * (d_model // n_heads)} of {d_model} dims without any error"
        )
    if n_heads % n_kv_heads:
        raise ValueError(
            f"n_heads={n_heads} must be divisible by n_kv_heads={n_kv_heads}: "
            "every key/value head serves the same number of query heads"
        )
    return d_model, n_heads, n_kv_heads


def check_forward(
    layer: "MultiHeadAttention",
    x: object,
    memory: object,
    *,
    causal: object,
    key_valid: object,
    cache: object,
    start_pos: object,
    empty_row: object,
    return_weights: object,
) -> None:
    """Everything `MultiHeadAttention.forward` refuses, checked before anything is
    projected or written to the cache."""
    weight = layer.q_proj.weight
    for name, t in (("x", x), ("memory", memory)):
        if isinstance(t, Tensor) and t.device != weight.device:  # before any value is read
            raise ValueError(f"{name} is on {t.device}, the layer's parameters on {weight.device}")
    x = float_tensor("x", x)
    if x.ndim != 3 or x.shape[-1] != layer.d_model:
        raise ValueError(f"x must be [B, T, d_model={layer.d_model}], got {tuple(x.shape)}")
    if x.dtype != weight.dtype:
        raise TypeError(f"x has dtype {x.dtype}, the layer's parameters {weight.dtype}")
    for name, flag in (("causal", causal), ("return_weights", return_weights)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}"
                            + ("; padding goes in key_valid" if name == "causal" else ""))
    choice("empty_row", empty_row, EMPTY_ROW_POLICIES)
    if memory is not None:
        memory = float_tensor("memory", memory)
        if memory.ndim != 3 or memory.shape[-1] != layer.d_model:
            raise ValueError(f"memory must be [B, S, d_model={layer.d_model}], got {tuple(memory.shape)}")
        if memory.shape[0] != x.shape[0]:
            raise ValueError(f"memory has batch {memory.shape[0]}, x has batch {x.shape[0]}")
        if memory.dtype != x.dtype:
            raise TypeError(f"memory has dtype {memory.dtype}, x has {x.dtype}")
        unsupported = [
            (layer.rope, "rope=True: queries and memory live in different position spaces"),
            (cache is not None, "a cache: the memory is projected once, not appended at every step"),
            (causal, "causal=True: a target token may read the whole source"),
            (start_pos is not None, "start_pos: it places self-attention queries only"),
        ]
        for refused, why in unsupported:
            if refused:
                raise ValueError(f"cross-attention (memory given) does not take {why}")
    if cache is not None:
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
        expected = (x.shape[0], layer.n_kv_heads, layer.d_head, x.dtype, x.device)
        if (cache.batch, cache.n_kv_heads, cache.d_head, cache.dtype, cache.device) != expected:
            raise ValueError(
                f"cache holds [batch={cache.batch}, n_kv_heads={cache.n_kv_heads}, d_head={cache.d_head}] "
                f"{cache.dtype} on {cache.device}; this call needs {expected} (use layer.new_cache)"
            )
    start = resolve_start(cache, start_pos)
    t_q = x.shape[1]
    if cache is not None and start + t_q > cache.capacity:
        raise ValueError(f"cache is full: next_pos={start} + {t_q} new token(s) > capacity={cache.capacity}")
    if memory is not None:
        t_k = memory.shape[1]  # the source
    elif cache is not None:
        t_k = start + t_q  # the cached tokens and the new ones
    else:
        t_k = t_q
    if key_valid is not None:
        key_valid = bool_tensor("key_valid", key_valid)
        if key_valid.shape != (x.shape[0], t_k):
            raise ValueError(
                f"key_valid must be [B={x.shape[0]}, T_k={t_k}] (one flag per key the queries see: "
                f"the memory's S, or the cached plus new tokens), got {tuple(key_valid.shape)}"
            )
        if key_valid.device != x.device:
            raise ValueError(f"key_valid is on {key_valid.device}, x on {x.device}")
    allowed = attention_allowed(t_q, t_k, causal=causal, query_offset=t_k - t_q, key_valid=key_valid,
                                device=x.device)
    if empty_row == "error" and allowed is not None:
        empty = ~allowed.expand(x.shape[0], 1, t_q, t_k).any(dim=-1)[:, 0]  # [B, T_q]
        if bool(empty.any()):
            raise ValueError(
                f"causal and key_valid leave query row(s) with no key, at [batch, query] "
                f"{torch.nonzero(empty)[:8].tolist()}; pass empty_row='zero' for padded queries"
            )
# --8<-- [end:checks]


# --8<-- [start:multi_head_attention]
class MultiHeadAttention(nn.Module):
    """Multi-head attention with `n_kv_heads` key/value heads: MHA when n_kv_heads = n_heads
    (the default; Vaswani et al. 2017, sec. 3.2.2), GQA in between (Ainslie et al. 2023),
    MQA when n_kv_heads = 1 (Shazeer 2019).

    Self-attention: `attn(x, causal=...)`; cross-attention: `attn(x, memory, causal=False)`,
    queries from x [B, T, d], keys and values from memory [B, S, d]. `rope=True` rotates q
    and k (never v) at their absolute positions (Su et al. 2021); `cache=` a KVCache for
    decoding. Projections are named as in Hugging Face's Llama. No dropout.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        *,
        bias: bool = False,
        rope: bool = False,
        rope_base: float = 10_000.0,
    ) -> None:
        super().__init__()
        d_model, n_heads, n_kv_heads = head_counts(d_model, n_heads, n_kv_heads)
        if not isinstance(bias, bool) or not isinstance(rope, bool):
            raise TypeError(f"bias and rope must be bools, got {bias!r} and {rope!r}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads
        if rope and self.d_head % 2:
            raise ValueError(f"rope=True needs an even d_head (pairs rotate), got d_head={self.d_head}")
        self.rope, self.rope_base = rope, base_above_one(rope_base, name="rope_base")
        d_kv = n_kv_heads * self.d_head
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_q: H heads of d_head
        self.k_proj = nn.Linear(d_model, d_kv, bias=bias)  # W_k: only H_kv heads
        self.v_proj = nn.Linear(d_model, d_kv, bias=bias)  # W_v: only H_kv heads
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)  # W_o mixes the concatenated heads

    def new_cache(self, batch: int, capacity: int) -> KVCache:
        """An empty cache for this layer: n_kv_heads heads of d_head, never n_heads."""
        w = self.k_proj.weight
        return KVCache(batch, self.n_kv_heads, capacity, self.d_head, dtype=w.dtype, device=w.device)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        *,
        causal: bool,
        key_valid: Tensor | None = None,
        cache: KVCache | None = None,
        start_pos: int | None = None,
        empty_row: EmptyRowPolicy = "error",
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x [B, T_q, d] -> [B, T_q, d]; with return_weights, also the weights [B, H, T_q, T_k].

        causal (required, no default): True for decoder self-attention.
        key_valid [B, T_k]: True = a real key, one flag per key the queries see: S for
        cross-attention, T_q without a cache, cache.next_pos + T_q with one.
        start_pos: absolute position of x[:, 0]; with a cache it is cache.next_pos.
        """
        check_forward(self, x, memory, causal=causal, key_valid=key_valid, cache=cache,
                      start_pos=start_pos, empty_row=empty_row, return_weights=return_weights)
        start = resolve_start(cache, start_pos)
        source = x if memory is None else memory  # where keys and values come from
        q = split_heads(self.q_proj(x), self.n_heads)  # [B, H, T_q, d_head]
        k = split_heads(self.k_proj(source), self.n_kv_heads)  # [B, H_kv, T_new, d_head]
        v = split_heads(self.v_proj(source), self.n_kv_heads)  # [B, H_kv, T_new, d_head]
        if self.rope:  # positions start .. start + T_q - 1, for q and the new k; never v
            cos, sin = rope_cache(start + x.shape[1], self.d_head, base=self.rope_base, device=x.device)
            q = apply_rope(q, cos, sin, offset=start)
            k = apply_rope(k, cos, sin, offset=start)  # rotated before it is cached
        if cache is not None:
            cache.bind(self)  # one cache, one layer
            k, v = cache.append(k, v)  # [B, H_kv, T_k, d_head]: all keys so far, H_kv heads
        t_q, t_k = q.shape[2], k.shape[2]  # the queries are the last t_q of the t_k positions
        allowed = attention_allowed(t_q, t_k, causal=causal, query_offset=t_k - t_q,
                                    key_valid=key_valid, device=x.device)
        try:
            result = grouped_attention(q, k, v, allowed, empty_row=empty_row)  # per head
        except ValueError:
            if cache is not None:
                cache.truncate(start)  # a failed call leaves no keys behind
            raise
        out = self.o_proj(merge_heads(result.output))  # [B, T_q, d]
        return (out, result.weights) if return_weights else out
# --8<-- [end:multi_head_attention]


# --8<-- [start:packed_qkv]
def pack_qkv(attn: MultiHeadAttention) -> nn.Linear:
    """One Linear d -> (H + 2 H_kv) d_head that computes q, k and v in one matmul.

    Rows are stacked q; k; v, the layout of nn.MultiheadAttention's `in_proj_weight` and
    of Falcon-7B's `query_key_value`. Split its output with
    `.split([H * d_head, H_kv * d_head, H_kv * d_head], dim=-1)`.
    """
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attn must be a MultiHeadAttention, got {type(attn).__name__}")
    projections = (attn.q_proj, attn.k_proj, attn.v_proj)
    w = attn.q_proj.weight
    packed = nn.Linear(attn.d_model, sum(p.out_features for p in projections),
                       bias=attn.q_proj.bias is not None, dtype=w.dtype, device=w.device)
    with torch.no_grad():
        packed.weight.copy_(torch.cat([p.weight for p in projections]))  # [(H + 2 H_kv) d_head, d]
        if packed.bias is not None:
            packed.bias.copy_(torch.cat([p.bias for p in projections]))
    return packed


def load_packed_qkv(attn: MultiHeadAttention, weight: Tensor, bias: Tensor | None = None) -> None:
    """The reverse: copy a packed q; k; v weight [(H + 2 H_kv) d_head, d] (and bias) into
    q_proj, k_proj and v_proj, e.g. from nn.MultiheadAttention's in_proj_weight."""
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attn must be a MultiHeadAttention, got {type(attn).__name__}")
    projections = (attn.q_proj, attn.k_proj, attn.v_proj)
    sizes = [p.out_features for p in projections]
    weight = float_tensor("weight", weight)
    if weight.shape != (sum(sizes), attn.d_model):
        raise ValueError(f"weight must be [{sum(sizes)}, {attn.d_model}] (q; k; v rows), got {tuple(weight.shape)}")
    if (bias is None) != (attn.q_proj.bias is None):
        raise ValueError("bias must be given exactly when the layer was built with bias=True")
    if bias is not None and float_tensor("bias", bias).shape != (sum(sizes),):
        raise ValueError(f"bias must be [{sum(sizes)}], got {tuple(bias.shape)}")
    with torch.no_grad():
        for p, w in zip(projections, weight.split(sizes)):
            p.weight.copy_(w)
        if bias is not None:
            for p, b in zip(projections, bias.split(sizes)):
                p.bias.copy_(b)
# --8<-- [end:packed_qkv]
