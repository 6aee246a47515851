"""Multi-head latent attention's two orders, counted (chapter 10): the multiply-adds of
n queries reading T keys, naive against absorbed, and where the absorbed order becomes
the cheaper one.

Only the products in which the two orders differ are counted; the projections both
share (the queries' `q_a_proj` and `q_b_proj`, `kv_a_proj_with_mqa`, `o_proj`) are
left out, and every query meets every key, as a dense kernel computes them (masked
pairs included):

* naive (`literate.minimal.mla.MultiHeadLatentAttention`): `kv_b_proj` on each of the
  T latents, H r (d_nope + d_v) each, then H heads of d_nope + d_rope wide scores
  and d_v wide values per query-key pair;
* absorbed (`AbsorbedLatentAttention`): W_uk into each query and W_uv onto each
  output, H r (d_nope + d_v) per query, then scores against [c | k_rope],
  r + d_rope wide, and the weighted sum of the latents, r wide, per pair and head.

tests/test_mla_depth.py checks the counts against PyTorch's FlopCounterMode on the
layers themselves, at DeepSeek-V3's sizes, and against chapter 11's `decoding_flops`.
"""

from __future__ import annotations

from literate.parts.checks import positive_int

__all__ = [
    "naive_multiply_adds",
    "absorbed_multiply_adds",
    "absorbed_cheaper_below",
]


# --8<-- [start:mla_multiply_adds]
def naive_multiply_adds(n_queries: int, n_keys: int, *, n_heads: int,
                        kv_lora_rank: int, qk_nope_head_dim: int,
                        qk_rope_head_dim: int, v_head_dim: int) -> int:
    """Multiply-adds of the naive order beyond the shared projections: every latent
    up-projected by kv_b_proj, then H heads attend (scores d_qk wide, values d_v)."""
    n, t = positive_int("n_queries", n_queries), positive_int("n_keys", n_keys)
    h, r = positive_int("n_heads", n_heads), positive_int("kv_lora_rank", kv_lora_rank)
    d_nope = positive_int("qk_nope_head_dim", qk_nope_head_dim)
    d_rope = positive_int("qk_rope_head_dim", qk_rope_head_dim)
    d_v = positive_int("v_head_dim", v_head_dim)
    up = t * h * r * (d_nope + d_v)  # W_uk and W_uv on each of the t latents
    return up + n * t * h * (d_nope + d_rope + d_v)


def absorbed_multiply_adds(n_queries: int, n_keys: int, *, n_heads: int,
                           kv_lora_rank: int, qk_nope_head_dim: int,
                           qk_rope_head_dim: int, v_head_dim: int) -> int:
    """Multiply-adds of the absorbed order beyond the shared projections: W_uk into
    each query, W_uv after each sum, attention over [c | k_rope] and c."""
    n, t = positive_int("n_queries", n_queries), positive_int("n_keys", n_keys)
    h, r = positive_int("n_heads", n_heads), positive_int("kv_lora_rank", kv_lora_rank)
    d_nope = positive_int("qk_nope_head_dim", qk_nope_head_dim)
    d_rope = positive_int("qk_rope_head_dim", qk_rope_head_dim)
    d_v = positive_int("v_head_dim", v_head_dim)
    absorb = n * h * r * (d_nope + d_v)  # W_uk^T q_nope, then W_uv (sum p c)
    return absorb + n * t * h * (r + d_rope + r)


def absorbed_cheaper_below(n_keys: int, **sizes: int) -> int:
    """The fewest queries for which, reading n_keys keys, the absorbed order costs
    at least as many multiply-adds as the naive one (n_keys + 1: never)."""
    return next((n for n in range(1, positive_int("n_keys", n_keys) + 1)
                 if absorbed_multiply_adds(n, n_keys, **sizes)
                 >= naive_multiply_adds(n, n_keys, **sizes)), n_keys + 1)
# --8<-- [end:mla_multiply_adds]
