"""Multi-head latent attention (MLA): DeepSeek-V2 (DeepSeek-AI 2024a, sec. 2.1) and
DeepSeek-V3 (DeepSeek-AI 2024b, sec. 2.1.1).

Grouped-query attention shrinks the KV cache by storing fewer heads. MLA stores no head
at all: each token leaves behind one **latent** vector c_kv of width `kv_lora_rank`
(512 in DeepSeek-V2 and V3), from which every head's key and value are computed again
when they are needed, by one up-projection `kv_b_proj` (W_uk for the keys, W_uv for the
values). RoPE does not fit the latent: rotated keys R_s W_uk c_s would put a rotation
that depends on the key's position s between the query and W_uk, so W_uk could no
longer be multiplied into the query (the absorbed form below) and every cached key
would have to be recomputed at every step (DeepSeek-V2, sec. 2.1.3). So positions
travel in a small separate part: a **decoupled** RoPE key k_rope of width
`qk_rope_head_dim` (64), one for all heads, and a RoPE part of every query head. Per
token and layer the cache holds c_kv and k_rope, kv_lora_rank + qk_rope_head_dim
numbers (576), where multi-head attention of the same heads would hold H (d_qk + d_v)
(40 960 for DeepSeek-V3's 128 heads).

The parts, in Hugging Face's layout and names (`DeepseekV3Attention`), so weights load
by name:

* queries: `q_a_proj` (d -> q_lora_rank), `q_a_layernorm` (RMSNorm), `q_b_proj`
  (-> H (d_nope + d_rope)); or one `q_proj` when `q_lora_rank` is None
  (DeepSeek-V2-Lite);
* `kv_a_proj_with_mqa` (d -> kv_lora_rank + d_rope): the latent and the shared RoPE key;
  `kv_a_layernorm` (RMSNorm) on the latent only;
* `kv_b_proj` (kv_lora_rank -> H (d_nope + d_v)): per head the key's position-free part
  k_nope and the value;
* `o_proj` (H d_v -> d).

Two ways to compute the same attention:

* **naive**: up-project every cached latent to H keys and values, then attend as
  multi-head attention does. Its cost per decoding step grows with the cache: all T
  latents go through kv_b_proj again.
* **absorbed**: q_nope . (W_uk c) = (W_uk^T q_nope) . c, so W_uk is multiplied into the
  query and the scores are taken against the latents themselves; the weighted sum of the
  latents is multiplied by W_uv afterwards. That is multi-query attention with one key
  [c_kv | k_rope] (kv_lora_rank + d_rope wide) whose value is that key's first
  kv_lora_rank columns, and the softmax scale stays 1 / sqrt(d_nope + d_rope).

Hugging Face's conventions (transformers 5.24), which this module follows or states:

* RoPE: with `rope_interleave=True` (the default, DeepSeek's checkpoints) the rotated
  pairs are (2i, 2i + 1), and `apply_rotary_pos_emb_interleave` returns the rotated
  vector de-interleaved (evens, then odds); ours returns it interleaved. The two differ
  by one fixed permutation of the coordinates, the same for q and k, so every score is
  the same; only the cached k_rope is stored in another order. `rope_interleave=False`
  is rotate-half on both sides.
* its cache holds the latent too: `DynamicCache` stores c_kv (after `kv_a_layernorm`) as
  the "keys" [B, 1, T, kv_lora_rank] and the rotated k_rope as the "values"
  [B, 1, T, d_rope], and up-projects all of them at every step (the naive form).
* scale: 1 / sqrt(d_nope + d_rope), times yarn_mscale(factor, mscale_all_dim)^2 when
  the RoPE is yarn (DeepSeek-V3's checkpoints: factor 40, so 1.87 times), whose
  frequencies and cos/sin factor are YaRN's (`YarnRotaryEmbedding`).
* `q_a_layernorm` and `kv_a_layernorm` have eps 1e-6 (the norm's default), not the
  configuration's `rms_norm_eps`; every norm computes in float32 there.

Shapes: B batch, T_q queries, T_k keys, d model width, H heads, r = kv_lora_rank,
d_nope, d_rope, d_v the head widths, d_qk = d_nope + d_rope.
"""

# Over 450 lines on purpose: multi-head latent attention is one layer with its cache,
# its two forms (naive and absorbed) and its checks, in eight sections (chapter 10 shows
# six); YaRN and DeepSeek-V3's loading already live apart (parts/rope_scaling.py,
# models/deepseek_v3.py).

from __future__ import annotations

import torch
from torch import Tensor, nn

from literate.parts.attention import (
    EMPTY_ROW_POLICIES,
    EmptyRowPolicy,
    refuse_empty_rows,
)
from literate.parts.cache import KVCache
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
)
from literate.parts.multi_head import (
    attention_allowed,
    fused_attention,
    grouped_attention,
    merge_heads,
    split_heads,
)
from literate.parts.norms import RMSNorm
from literate.parts.positions import ROPE_LAYOUTS, RotaryEmbedding

__all__ = [
    "LatentCache",
    "split_kv_b",
    "absorb_query",
    "absorb_output",
    "latent_attention",
    "ABSORB_MODES",
    "check_mla_call",
    "MultiHeadLatentAttention",
    "latent_cache_bytes_per_token",
    "expanded_cache_bytes_per_token",
    "latent_rotary_part",
]


# --8<-- [start:latent_cache]
class LatentCache(KVCache):
    """What MLA keeps per token: the latent c_kv [kv_lora_rank] and the rotated shared
    key k_rope [d_rope], side by side in one preallocated buffer
    `k` [B, 1, capacity, kv_lora_rank + d_rope], never a key or value per head.

    It is a KVCache of one head (chapter 8's `DecodeCache`, `cached_run`, `generate`
    and beam search take it as they are) whose key is [c_kv | k_rope], the key of the
    absorbed form, and whose value `v` is a view of that key's first kv_lora_rank
    columns: the latent is stored once. `write(c, k_rope)` appends [B, 1, T, r] and
    [B, 1, T, d_rope] and returns the filled [B, 1, next_pos, r + d_rope] view.
    """

    def __init__(self, batch: int, capacity: int, kv_lora_rank: int,
                 qk_rope_head_dim: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        self.kv_lora_rank = positive_int("kv_lora_rank", kv_lora_rank)
        self.qk_rope_head_dim = positive_int("qk_rope_head_dim", qk_rope_head_dim)
        super().__init__(batch, 1, capacity, self.kv_lora_rank + self.qk_rope_head_dim,
                         dtype=dtype, device=device)
        self.v = self.k[..., :self.kv_lora_rank]  # a view of the key: stored once

    @property
    def nbytes(self) -> int:
        """Bytes of the one buffer (the value is a view of it)."""
        return self.k.nbytes

    def append(self, c_new: Tensor, k_rope_new: Tensor) -> Tensor:
        """Store latents [B, 1, T, r] and rotated keys [B, 1, T, d_rope]; return the
        filled [B, 1, next_pos, r + d_rope] view after advancing `next_pos`."""
        for name, new, width in (("c_new", c_new, self.kv_lora_rank),
                                 ("k_rope_new", k_rope_new, self.qk_rope_head_dim)):
            grad = float_tensor(name, new, ndim=4).requires_grad
            if grad and torch.is_grad_enabled():
                raise ValueError(f"{name} requires grad: decode under torch.no_grad()")
            if new.shape[1] != 1 or new.shape[-1] != width:
                raise ValueError(f"{name} must be [B, 1, T, {width}], "
                                 f"got {tuple(new.shape)}")
        if c_new.shape[:3] != k_rope_new.shape[:3]:
            raise ValueError(f"c_new {tuple(c_new.shape)} and k_rope_new "
                             f"{tuple(k_rope_new.shape)} must cover the same tokens")
        b, _, t, _ = c_new.shape
        self.check(b, 1, t, self.d_head, c_new.dtype, c_new.device)
        if k_rope_new.dtype != c_new.dtype or k_rope_new.device != c_new.device:
            raise ValueError("c_new and k_rope_new must share a dtype and a device")
        return self.write(c_new, k_rope_new)

    def write(self, c_new: Tensor,  # type: ignore[override]
              k_rope_new: Tensor) -> Tensor:
        """`append` without its checks, for the layer (`check_mla_call` made them)."""
        start, end, r = self.next_pos, self.next_pos + c_new.shape[2], self.kv_lora_rank
        self.k[:, :, start:end, :r] = c_new  # in place: nothing else is copied
        self.k[:, :, start:end, r:] = k_rope_new
        self.next_pos = end
        return self.k[:, :, :end]  # [B, 1, T_k, r + d_rope], a view

    def reorder(self, rows: Tensor) -> None:
        """Row i becomes row rows[i] [B], in the filled slots, in place (beam search).
        Once: the value is a view of the key and moves with it."""
        if not isinstance(rows, Tensor) or rows.dtype != torch.long \
                or rows.shape != (self.batch,):
            got = (f"{rows.dtype} {tuple(rows.shape)}" if isinstance(rows, Tensor)
                   else type(rows).__name__)
            raise ValueError(f"rows must be torch.long [batch={self.batch}], the row "
                             f"each row continues, got {got}")
        n = self.next_pos
        self.k[:, :, :n] = self.k[:, :, :n].index_select(0, rows)
# --8<-- [end:latent_cache]


# --8<-- [start:absorbed]
def split_kv_b(weight: Tensor, n_heads: int, qk_nope_head_dim: int,
               v_head_dim: int) -> tuple[Tensor, Tensor]:
    """kv_b_proj's weight [H (d_nope + d_v), r] -> (W_uk [H, d_nope, r],
    W_uv [H, d_v, r]): each head's rows, its key part first (HF's order). Views."""
    h, d_nope, d_v = n_heads, qk_nope_head_dim, v_head_dim
    if float_tensor("weight", weight, ndim=2).shape[0] != h * (d_nope + d_v):
        raise ValueError(f"weight must be [H (d_nope + d_v) = {h * (d_nope + d_v)}, "
                         f"r], got {tuple(weight.shape)}")
    per_head = weight.view(h, d_nope + d_v, weight.shape[1])  # [H, d_nope + d_v, r]
    return per_head[:, :d_nope], per_head[:, d_nope:]


def absorb_query(q_nope: Tensor, q_rope: Tensor, w_uk: Tensor) -> Tensor:
    """q_nope [B, H, T, d_nope], rotated q_rope [B, H, T, d_rope] -> the absorbed query
    [B, H, T, r + d_rope]: q_nope . (W_uk c) = (W_uk^T q_nope) . c, so W_uk moves from
    every cached token's key to the one query, and the query reads the latent
    [c | k_rope] directly."""
    # [B, H, T, d_nope] @ [H, d_nope, r] -> [B, H, T, r], then the RoPE part
    return torch.cat((q_nope @ w_uk, q_rope), dim=-1)


def absorb_output(out_latent: Tensor, w_uv: Tensor) -> Tensor:
    """The attention-weighted sum of the latents [B, H, T, r] -> each head's output
    [B, H, T, d_v]: sum_s p_s (W_uv c_s) = W_uv (sum_s p_s c_s), so W_uv is applied once
    per query instead of once per cached token."""
    return out_latent @ w_uv.mT  # [B, H, T, r] @ [H, r, d_v]
# --8<-- [end:absorbed]


# --8<-- [start:latent_attention]
def latent_attention(q: Tensor, keys: Tensor, values: Tensor,
                     allowed: Tensor | None, *, scale: float) -> Tensor:
    """The fused kernel on the absorbed form: every head's query
    q [B, H, T_q, r + d_rope] reads the one key `keys` [B, 1, T_k, r + d_rope] and value
    `values` [B, 1, T_k, r]; allowed broadcastable to [B, H, T_q, T_k]. The H heads are
    stacked along the query axis, one head of H T_q queries, as chapter 3's
    `grouped_attention` does (rather than PyTorch's kernel with `enable_gqa` and one
    key head: `python -m literate.tools.bench --only long` times the two at T_q = 1).
    `scale` is given: the absorbed query is r + d_rope wide, but the scores are
    those of d_qk-wide heads. -> [B, H, T_q, r]."""
    b, h, t_q, width = q.shape
    t_k = keys.shape[2]
    stacked = q.reshape(b, 1, h * t_q, width)  # head h's queries at h T_q .. (h+1) T_q
    if allowed is not None:
        allowed = allowed.expand(b, h, t_q, t_k).reshape(b, 1, h * t_q, t_k)
    out = fused_attention(stacked, keys, values, allowed, scale=scale)  # one head
    return out.reshape(b, h, t_q, values.shape[-1])
# --8<-- [end:latent_attention]


# --8<-- [start:mla_checks]
ABSORB_MODES = ("never", "decode", "always")


def latent_rotary_part(rope: object, base: object, layout: object,
                       d_rope: int) -> RotaryEmbedding:
    """The RoPE of the queries' and keys' RoPE parts: `rope` as given (a
    RotaryEmbedding turning all of its d_rope coordinates), or one made from `base`
    (10000) and `layout` ("interleaved"), not both."""
    if rope is None:
        layout = "interleaved" if layout is None else choice("rope_layout", layout,
                                                            ROPE_LAYOUTS)
        if d_rope % 2:  # the layer's name for it, not RotaryEmbedding's d_head
            raise ValueError(f"qk_rope_head_dim must be even: coordinates rotate in "
                             f"pairs; got {d_rope}")
        return RotaryEmbedding(d_rope, base=10_000.0 if base is None else base,
                               layout=layout)
    if not isinstance(rope, RotaryEmbedding):
        raise TypeError(f"rope must be a RotaryEmbedding, got {type(rope).__name__}")
    if base is not None or layout is not None:
        raise ValueError("give rope, or rope_base and rope_layout, not both")
    if (rope.d_head, rope.rotary_dim) != (d_rope, d_rope):
        raise ValueError(f"rope must turn all d_rope={d_rope} coordinates, it has "
                         f"d_head={rope.d_head}, rotary_dim={rope.rotary_dim}")
    return rope


def check_mla_call(layer: "MultiHeadLatentAttention", x: object, *, causal: object,
                   key_valid: object, cache: object, start_pos: object,
                   positions: object, empty_row: object,
                   return_weights: object) -> tuple[int, int]:
    """Everything `MultiHeadLatentAttention.forward` refuses, from metadata alone,
    before anything is projected or cached (chapter 3's `check_call`, self-attention
    only). Returns (start, T_k): the position of x[:, 0], the keys the queries see.
    Inside a checked entry, only that."""
    if input_checked():
        start = cache.next_pos if cache is not None else start_pos or 0
        return start, start + x.shape[1] if cache is not None else x.shape[1]
    x = features("x", x, width=layer.d_model, like=layer.kv_a_proj_with_mqa.weight)
    if x.ndim != 3:
        raise ValueError(f"x must be [B, T, d_model={layer.d_model}], "
                         f"got {tuple(x.shape)}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}; "
                        "a padding mask goes in key_valid")
    boolean("return_weights", return_weights)
    choice("empty_row", empty_row, EMPTY_ROW_POLICIES)
    choice("absorb", layer.absorb, ABSORB_MODES)
    b, t_q = x.shape[:2]
    if positions is not None:
        if not isinstance(positions, Tensor) or positions.dtype != torch.long:
            raise TypeError("positions must be a torch.long tensor [B, T_q]")
        if positions.shape != (b, t_q) or positions.device != x.device:
            raise ValueError(f"positions must be [B={b}, T_q={t_q}] on {x.device}, got "
                             f"{tuple(positions.shape)} on {positions.device}")
    if cache is not None and not isinstance(cache, LatentCache):
        raise TypeError(f"cache must be a LatentCache (layer.new_cache), "
                        f"got {type(cache).__name__}")
    start = 0 if start_pos is None else non_negative_int("start_pos", start_pos)
    if cache is not None:
        if start_pos is not None and start != cache.next_pos:
            raise ValueError(f"start_pos={start} disagrees with cache.next_pos="
                             f"{cache.next_pos}: omit it to continue the cached "
                             "sequence, or reset() the cache to start a new one")
        start = cache.next_pos
        if (cache.kv_lora_rank, cache.qk_rope_head_dim) != (layer.kv_lora_rank,
                                                            layer.qk_rope_head_dim):
            mine = [layer.kv_lora_rank, layer.qk_rope_head_dim]
            raise ValueError(f"the cache holds latents of [kv_lora_rank, d_rope] = "
                             f"{[cache.kv_lora_rank, cache.qk_rope_head_dim]}, the "
                             f"layer makes {mine}")
        cache.check(b, 1, t_q, cache.d_head, x.dtype, x.device)
        if cache.owner not in (None, id(layer)):
            raise ValueError("the cache holds another layer's latents; give each layer "
                             "its own cache (layer.new_cache), or reset() this one")
        grad = x.requires_grad or layer.kv_b_proj.weight.requires_grad
        if torch.is_grad_enabled() and grad:
            raise ValueError("a latent cache is for inference: its in-place writes "
                             "cannot be differentiated through; decode under "
                             "torch.no_grad()")
    t_k = t_q if cache is None else start + t_q
    if key_valid is not None:
        if bool_tensor("key_valid", key_valid).shape != (b, t_k):
            raise ValueError(f"key_valid must be [B={b}, T_k={t_k}] (one flag per key "
                             "the queries see: the cached plus new tokens), got "
                             f"{tuple(key_valid.shape)}")
        if key_valid.device != x.device:
            raise ValueError(f"key_valid is on {key_valid.device}, x on {x.device}")
    return start, t_k
# --8<-- [end:mla_checks]


# --8<-- [start:multi_head_latent_attention]
class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2, sec. 2.1), HF's `DeepseekV3Attention`
    in its parameter names; `attn(x, causal=True)`, `cache=` a LatentCache to decode.

    q_lora_rank: the query bottleneck's width (None: one q_proj, DeepSeek-V2-Lite);
    kv_lora_rank: the latent's width, r; qk_nope_head_dim, qk_rope_head_dim: each query
    and key head's position-free and RoPE parts; v_head_dim: each value head's width.
    rope_layout: "interleaved" (DeepSeek's checkpoints, HF `rope_interleave=True`) or
    "half" (defaults: "interleaved", base 10000); or `rope`, a RotaryEmbedding of width
    d_rope given whole (a YarnRotaryEmbedding for DeepSeek-V3's long context).
    scale: the score scale, 1 / sqrt(d_nope + d_rope) unless given. bias: on
    q_a_proj, kv_a_proj_with_mqa and o_proj, where HF's `attention_bias` puts them
    (q_proj, q_b_proj and kv_b_proj have none; kv_b_proj's absence keeps the absorption
    exact).
    absorb: "never" (up-project the latents, then attend), "always" (the absorbed
    form), or "decode" (the default: absorbed when the call's first position is > 0,
    i.e. each decoding step after a cached prefill and each later prefill chunk; a full
    forward or the first prefill call up-projects, which costs less per query-key pair:
    d_qk + d_v against 2 r + d_rope multiply-adds, 320 against 1088 in DeepSeek-V3).
    """

    def __init__(self, d_model: int, n_heads: int, *, q_lora_rank: int | None,
                 kv_lora_rank: int, qk_nope_head_dim: int, qk_rope_head_dim: int,
                 v_head_dim: int, rope_base: float | None = None,
                 rope_layout: str | None = None, rope: RotaryEmbedding | None = None,
                 scale: float | None = None,
                 bias: bool = False, absorb: str = "decode",
                 latent_eps: float = 1e-6) -> None:
        super().__init__()
        self.d_model = d = positive_int("d_model", d_model)
        self.n_heads = h = positive_int("n_heads", n_heads)
        self.q_lora_rank = (None if q_lora_rank is None
                            else positive_int("q_lora_rank", q_lora_rank))
        self.kv_lora_rank = r = positive_int("kv_lora_rank", kv_lora_rank)
        self.qk_nope_head_dim = positive_int("qk_nope_head_dim", qk_nope_head_dim)
        self.qk_rope_head_dim = positive_int("qk_rope_head_dim", qk_rope_head_dim)
        self.v_head_dim = positive_int("v_head_dim", v_head_dim)
        self.qk_head_dim = d_qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.rope = latent_rotary_part(rope, rope_base, rope_layout,
                                       self.qk_rope_head_dim)
        self.scale = d_qk**-0.5 if scale is None else positive_float("scale", scale)
        self.absorb = choice("absorb", absorb, ABSORB_MODES)
        bias = boolean("bias", bias)
        if self.q_lora_rank is None:
            self.q_proj = nn.Linear(d, h * d_qk, bias=False)
        else:  # the query's own bottleneck: it saves activations, not cache
            self.q_a_proj = nn.Linear(d, self.q_lora_rank, bias=bias)
            self.q_a_layernorm = RMSNorm(self.q_lora_rank, eps=latent_eps)
            self.q_b_proj = nn.Linear(self.q_lora_rank, h * d_qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(d, r + self.qk_rope_head_dim, bias=bias)
        self.kv_a_layernorm = RMSNorm(r, eps=latent_eps)
        self.kv_b_proj = nn.Linear(r, h * (self.qk_nope_head_dim + self.v_head_dim),
                                   bias=False)  # W_uk and W_uv, head by head
        self.o_proj = nn.Linear(h * self.v_head_dim, d, bias=bias)

    def new_cache(self, batch: int, capacity: int) -> LatentCache:
        """An empty cache for this layer: r + d_rope numbers per token."""
        w = self.kv_a_proj_with_mqa.weight
        return LatentCache(batch, capacity, self.kv_lora_rank, self.qk_rope_head_dim,
                           dtype=w.dtype, device=w.device)

    def queries(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x [B, T, d] -> (q_nope [B, H, T, d_nope], q_rope [B, H, T, d_rope])."""
        if self.q_lora_rank is None:
            q = self.q_proj(x)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = split_heads(q, self.n_heads)  # [B, H, T, d_qk]
        return q.split((self.qk_nope_head_dim, self.qk_rope_head_dim), dim=-1)

    def latents(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x [B, T, d] -> (c [B, 1, T, r], normed; k_rope [B, 1, T, d_rope], not yet
        rotated): what the cache keeps, one "head" each."""
        c, k_rope = self.kv_a_proj_with_mqa(x).split(
            (self.kv_lora_rank, self.qk_rope_head_dim), dim=-1)
        return self.kv_a_layernorm(c)[:, None], k_rope[:, None]

    def up_project(self, c: Tensor, k_rope: Tensor) -> tuple[Tensor, Tensor]:
        """The naive form: latents c [B, 1, T_k, r] and rotated k_rope
        [B, 1, T_k, d_rope] -> every head's key [B, H, T_k, d_qk] (k_nope, then the
        shared k_rope) and value [B, H, T_k, d_v]."""
        kv = split_heads(self.kv_b_proj(c[:, 0]), self.n_heads)  # [B, H, T_k, .]
        k_nope, v = kv.split((self.qk_nope_head_dim, self.v_head_dim), dim=-1)
        k_rope = k_rope.expand(-1, self.n_heads, -1, -1)  # one RoPE key for all heads
        return torch.cat((k_nope, k_rope), dim=-1), v

    def forward(self, x: Tensor, *, causal: bool, key_valid: Tensor | None = None,
                cache: LatentCache | None = None, start_pos: int | None = None,
                positions: Tensor | None = None, empty_row: EmptyRowPolicy = "error",
                return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """x [B, T_q, d] -> [B, T_q, d]; with return_weights, also the weights
        [B, H, T_q, T_k] (the same in both forms). Arguments as chapter 3's
        `MultiHeadAttention` takes them for self-attention: key_valid [B, T_k] (True: a
        real key), cache, start_pos, positions [B, T_q] (each row's own, for RoPE)."""
        start, t_k = check_mla_call(self, x, causal=causal, key_valid=key_valid,
                                    cache=cache, start_pos=start_pos,
                                    positions=positions, empty_row=empty_row,
                                    return_weights=return_weights)
        t_q, r = x.shape[1], self.kv_lora_rank
        allowed = attention_allowed(t_q, t_k, causal=causal, query_offset=t_k - t_q,
                                    key_valid=key_valid, device=x.device)
        if key_valid is not None and empty_row == "error":  # padding can empty a row
            rows = allowed.expand(x.shape[0], 1, t_q, t_k)
            refuse_empty_rows("causal and key_valid", ~rows.any(dim=-1)[:, 0])
        q_nope, q_rope = self.queries(x)
        c, k_rope = self.latents(x)  # [B, 1, T_q, r], [B, 1, T_q, d_rope]
        q_rope, k_rope = self.rope.pair(q_rope, k_rope, offset=start,
                                        positions=positions)  # rotated before caching
        absorbed = self.absorb == "always" or (self.absorb == "decode" and start > 0)
        if cache is not None:
            cache.bind(self)
            latent = cache.write(c, k_rope)  # [B, 1, T_k, r + d_rope]: all so far
            c, k_rope = latent[..., :r], latent[..., r:]
        elif absorbed:
            latent = torch.cat((c, k_rope), dim=-1)  # [B, 1, T_k, r + d_rope]
        if absorbed:  # multi-query attention over the latents
            w_uk, w_uv = split_kv_b(self.kv_b_proj.weight, self.n_heads,
                                    self.qk_nope_head_dim, self.v_head_dim)
            q = absorb_query(q_nope, q_rope, w_uk)  # [B, H, T_q, r + d_rope]
            if return_weights:
                result = grouped_attention(q, latent, c, allowed, empty_row="zero",
                                           scale=self.scale)
                out, weights = result.output, result.weights  # out [B, H, T_q, r]
            else:
                out = latent_attention(q, latent, c, allowed, scale=self.scale)
            out = absorb_output(out, w_uv)  # [B, H, T_q, d_v]
        else:  # up-project every latent, then chapter 3's attention
            q = torch.cat((q_nope, q_rope), dim=-1)  # [B, H, T_q, d_qk]
            k, v = self.up_project(c, k_rope)  # [B, H, T_k, d_qk], [B, H, T_k, d_v]
            if return_weights:
                result = grouped_attention(q, k, v, allowed, empty_row="zero",
                                           scale=self.scale)
                out, weights = result.output, result.weights
            elif allowed is not None and key_valid is None and t_q == t_k:
                out = fused_attention(q, k, v, is_causal=True, scale=self.scale)
            else:
                out = fused_attention(q, k, v, allowed, scale=self.scale,
                                      rows_can_be_empty=key_valid is not None)
        out = self.o_proj(merge_heads(out))  # [B, T_q, d]
        return (out, weights) if return_weights else out
# --8<-- [end:multi_head_latent_attention]


# --8<-- [start:cache_bytes]
def latent_cache_bytes_per_token(n_layers: int, kv_lora_rank: int,
                                 qk_rope_head_dim: int, bytes_per_value: int) -> int:
    """Bytes one token adds to an MLA model's cache: layers x (r + d_rope) x bytes per
    value. No head count appears: the latent is shared by all heads (DeepSeek-V3:
    61 x 576 x 2 = 70 272 bytes in bfloat16)."""
    n_layers = positive_int("n_layers", n_layers)
    width = (positive_int("kv_lora_rank", kv_lora_rank)
             + positive_int("qk_rope_head_dim", qk_rope_head_dim))
    return n_layers * width * positive_int("bytes_per_value", bytes_per_value)


def expanded_cache_bytes_per_token(n_layers: int, n_heads: int, qk_head_dim: int,
                                   v_head_dim: int, bytes_per_value: int) -> int:
    """What caching MLA's up-projected keys and values would cost: layers x H x
    (d_qk + d_v) x bytes (multi-head attention with these heads; DeepSeek-V3:
    61 x 128 x 320 x 2 = 4 997 120 bytes, 71 times the latent)."""
    n_layers = positive_int("n_layers", n_layers)
    per_head = (positive_int("qk_head_dim", qk_head_dim)
                + positive_int("v_head_dim", v_head_dim))
    return (n_layers * positive_int("n_heads", n_heads) * per_head
            * positive_int("bytes_per_value", bytes_per_value))
# --8<-- [end:cache_bytes]


