"""Attention sinks (chapter 10): one learned logit per head that every query row may
attend to instead of a real key.

A softmax row sums to 1: a query that finds nothing relevant must still average the
values of the keys it sees. gpt-oss (OpenAI 2025) gives each head h a learned logit
s_h (Hugging Face's `sinks`, shape [H]) that joins every row's softmax as one extra
entry and is dropped before the weights multiply V:

    w_j = exp(z_j) / (exp(s_h) + sum_k exp(z_k)),   sum_j w_j = 1 - sink share < 1,

so a row whose real scores z_j are all low gives most of its weight to the sink and
its output shrinks toward 0 (Xiao et al. 2024 found trained models making such a
"sink" of the first tokens; Miller 2023's "softmax + 1" is s_h = 0). `sink_share`
measures it.

* `sink_attention`: the attention of one call with the sink, explicit softmax (the
  fused kernel cannot take a per-head extra logit; `sink_attention_sdpa` gives it one
  as an extra key with zero value and a float mask, the same numbers, slower but at
  the smallest shapes: see `SinkAttention`).
* `SinkAttention`: chapter 3's MultiHeadAttention with a `sinks` parameter; one method
  changes, `attend`, the attention itself.
* `SlidingWindowSinkAttention`: the same with chapter 10's window and ring cache
  (gpt-oss's sliding layers, window 128, alternate with full ones).

Shapes: B batch, H query heads, H_kv key/value heads, G = H / H_kv, T_q queries, T_k
keys, d_head head width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from literate.parts.checks import float_tensor, input_checked, positive_float
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.window import SlidingWindowAttention

__all__ = [
    "check_sink_call",
    "sink_attention",
    "sink_attention_sdpa",
    "sink_share",
    "SinkAttention",
    "SlidingWindowSinkAttention",
]


# --8<-- [start:sink_attention]
def _check_allowed(allowed: object, shape: tuple[int, ...],
                   device: torch.device) -> None:
    """`allowed` is a bool mask (True = may attend) broadcastable to `shape`, on
    `device`. A 0/1 integer mask (Hugging Face's `attention_mask`) is refused, not
    guessed at: `mask.bool()` converts it."""
    if not isinstance(allowed, Tensor) or allowed.dtype != torch.bool:
        kind = allowed.dtype if isinstance(allowed, Tensor) else type(allowed).__name__
        also = (", an additive 0/-inf mask with `mask == 0`"
                if isinstance(allowed, Tensor) and allowed.is_floating_point() else "")
        raise TypeError(f"allowed must be a bool tensor (True = may attend), got "
                        f"{kind}; pass a 0/1 mask as `mask.bool()`{also}")
    if allowed.ndim > len(shape) or any(
            a not in (1, s) for a, s in zip(allowed.shape[::-1], shape[::-1])):
        raise ValueError(f"allowed must broadcast to [B, H, T_q, T_k] = {shape}, got "
                         f"{tuple(allowed.shape)}")
    if allowed.device != device:
        raise ValueError(f"allowed is on {allowed.device}, q on {device}")


def check_sink_call(q: object, k: object, v: object, sinks: object, allowed: object,
                    scale: object) -> float:
    """What `sink_attention` and `sink_attention_sdpa` refuse, from metadata alone:
    q [B, H, T_q, d_head], k [B, H_kv, T_k, d_head], v [B, H_kv, T_k, d_v], of one float
    dtype and device, H % H_kv == 0; sinks [H]; allowed a bool mask broadcastable to
    [B, H, T_q, T_k]; scale None or a finite number > 0. Returns the scale (d_head^-1/2
    if None). Inside a checked entry, only that."""
    if input_checked():
        return q.shape[-1] ** -0.5 if scale is None else scale
    q, k, v = (float_tensor(n, t, ndim=4) for n, t in (("q", q), ("k", k), ("v", v)))
    (b, h, t_q, d_head), (h_kv, t_k) = q.shape, k.shape[1:3]
    if k.shape[0] != b or v.shape[:3] != k.shape[:3] or h_kv < 1 or h % h_kv:
        raise ValueError(f"need q [B, H, T_q, d], k [B, H_kv, T_k, d], "
                         f"v [B, H_kv, T_k, d_v] with H % H_kv == 0, "
                         f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape[-1] != d_head:
        raise ValueError(f"k has head width {k.shape[-1]}, q {d_head}: q . k needs one")
    if not q.dtype == k.dtype == v.dtype:  # the sinks are cast to it
        raise TypeError(f"q, k, v must have one dtype, got {q.dtype}, {k.dtype}, "
                        f"{v.dtype}")
    sinks = float_tensor("sinks", sinks)
    if not q.device == k.device == v.device == sinks.device:
        raise ValueError(f"q, k, v, sinks must be on one device, got {q.device}, "
                         f"{k.device}, {v.device}, {sinks.device}")
    if sinks.shape != (h,):
        raise ValueError(f"sinks must be [H={h}], got {tuple(sinks.shape)}")
    if allowed is not None:
        _check_allowed(allowed, (b, h, t_q, t_k), q.device)
    return d_head**-0.5 if scale is None else positive_float("scale", scale)


def sink_attention(q: Tensor, k: Tensor, v: Tensor, sinks: Tensor,
                   allowed: Tensor | None = None, *,
                   scale: float | None = None) -> tuple[Tensor, Tensor]:
    """Grouped-query attention whose every row's softmax has one more logit, the head's
    sink s_h, dropped before V (Hugging Face's gpt-oss `eager_attention_forward`).
    q [B, H, T_q, d_head], k and v [B, H_kv, T_k, d_head] (query head h reads key head
    h // G, as chapter 3's), sinks [H], allowed bool broadcastable to [B, H, T_q, T_k].
    Returns (output [B, H, T_q, d_head], weights [B, H, T_q, T_k]), each row's weights
    summing to 1 - its sink share. A row the mask leaves empty puts all its weight on
    the sink: output 0, no special case. The softmax runs in the inputs' dtype, as
    HF's does (Llama's eager one runs in float32)."""
    scale = check_sink_call(q, k, v, sinks, allowed, scale)
    (b, h, t_q, d_head), (h_kv, t_k) = q.shape, k.shape[1:3]
    g = h // h_kv  # a group's G query heads stacked on the query axis: k is not copied
    scores = q.reshape(b, h_kv, g * t_q, d_head) @ k.transpose(-1, -2) * scale
    scores = scores.view(b, h, t_q, t_k)  # [B, H, T_q, T_k]
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    sink = sinks.to(scores.dtype)[None, :, None, None].expand(b, h, t_q, 1)
    logits = torch.cat((scores, sink), dim=-1)  # [B, H, T_q, T_k + 1]
    weights = logits.softmax(dim=-1)[..., :-1]  # the sink's column dropped
    out = weights.reshape(b, h_kv, g * t_q, t_k) @ v  # [B, H_kv, G T_q, d_v]
    return out.view(b, h, t_q, -1), weights
# --8<-- [end:sink_attention]


# --8<-- [start:sink_attention_sdpa]
def sink_attention_sdpa(q: Tensor, k: Tensor, v: Tensor, sinks: Tensor,
                        allowed: Tensor | None = None, *,
                        scale: float | None = None) -> Tensor:
    """The output of `sink_attention` from PyTorch's fused kernel: the sink as one extra
    key of zeros (its score q . 0 = 0) whose value is zeros (dropped before V), the
    logit s_h added by a float mask [B, H, T_q, T_k + 1] (-inf where `allowed` is
    False). K and V are copied to make room for the key, at every call."""
    scale = check_sink_call(q, k, v, sinks, allowed, scale)
    b, h, t_q, _ = q.shape
    t_k = k.shape[2]
    zero = k.new_zeros(*k.shape[:2], 1, k.shape[-1])  # [B, H_kv, 1, d_head]
    k, v = torch.cat((k, zero), dim=2), torch.cat((v, zero), dim=2)
    bias = q.new_zeros(1, 1, t_q, t_k) if allowed is None else torch.zeros(
        allowed.shape, dtype=q.dtype, device=q.device).masked_fill(~allowed,
                                                                    float("-inf"))
    bias = bias.expand(b, h, t_q, t_k)
    sink = sinks.to(q.dtype)[None, :, None, None].expand(b, h, t_q, 1)
    mask = torch.cat((bias, sink), dim=-1)  # [B, H, T_q, T_k + 1]
    gqa = True if h != k.shape[1] else False
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
# --8<-- [end:sink_attention_sdpa]


# --8<-- [start:sink_share]
def sink_share(scores: Tensor, sinks: Tensor) -> Tensor:
    """The weight each row gives its sink, exp(s_h) / (exp(s_h) + sum_j exp(z_j)) =
    sigmoid(s_h - logsumexp_j z_j), from its scaled scores z [B, H, T_q, T_k] (-inf:
    a blocked key) and sinks [H] -> [B, H, T_q]. The real keys share 1 - this: a row
    whose scores are all low next to s_h hands its weight to the sink, and its output,
    (1 - share) times an average of values, shrinks toward 0."""
    scores, sinks = float_tensor("scores", scores, ndim=4), float_tensor("sinks", sinks)
    if sinks.shape != (scores.shape[1],):
        raise ValueError(f"sinks must be [H={scores.shape[1]}], "
                         f"got {tuple(sinks.shape)}")
    return torch.sigmoid(sinks[None, :, None] - scores.logsumexp(dim=-1))
# --8<-- [end:sink_share]


# --8<-- [start:sink_layers]
class SinkAttention(MultiHeadAttention):
    """Chapter 3's MultiHeadAttention with gpt-oss's attention sinks: a parameter
    `sinks` [H] (zeros at first, as a "softmax + 1"; Hugging Face's name), and one
    method changed, `attend`, which runs `sink_attention` (weights or not: the fused
    kernel has no room for the extra logit; `sink_attention_sdpa` makes it one by
    copying K and V to append the zero key, at every call:
    `python -m literate.tools.bench --only long` times the two). Everything else, masks,
    caches, RoPE, padding, is chapter 3's. `options`: MultiHeadAttention's (bias,
    d_head, rope, ...; gpt-oss: bias=True)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None,
                 **options: object) -> None:
        super().__init__(d_model, n_heads, n_kv_heads, **options)
        w = self.q_proj.weight
        self.sinks = nn.Parameter(torch.zeros(self.n_heads, dtype=w.dtype,
                                              device=w.device))  # [H]: s_h

    def attend(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, *,
               plain_causal: bool, padded: bool,
               return_weights: bool) -> tuple[Tensor, Tensor | None]:
        """`sink_attention` (`plain_causal` and `padded` change nothing here:
        `allowed` is the mask)."""
        out, weights = sink_attention(q, k, v, self.sinks, allowed, scale=self.scale)
        return out, (weights if return_weights else None)


class SlidingWindowSinkAttention(SinkAttention, SlidingWindowAttention):
    """gpt-oss's sliding layers: `SinkAttention` over the `window` positions ending at
    each query, with `SlidingWindowAttention`'s mask, ring cache and refusals."""
# --8<-- [end:sink_layers]
