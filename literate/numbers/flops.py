"""The forward FLOPs of one decoding step, by formula and read from a model (chapter 11).

`decoding_flops(...)` is the forward FLOPs of one decoding step (a token whose query
reads `keys` keys, its own included) of a decoder given by its shape: 2 per weight
entry of the linear maps the token passes through (q, k, v, o or multi-head latent
attention's maps, the dense FFN or the router, the k chosen experts and a shared one,
the head), and per key read the scores and the weighted sum (4 H d_head; a layer with a
window reads min(window, keys); MLA's absorbed form reads its latents).
`step_flops(model, keys)` is that formula with the shape `decoder_shape` reads from a
built model of ours (`published_model(name)`, or a small one): tests/test_published.py
checks it against PyTorch's FlopCounterMode on a cached decoding step of a small model
of each family (GPT-2, Llama, Mistral, Mixtral, Gemma 3, gpt-oss, DeepSeek-V3), and
its matmuls at one key against twice the active parameters less those no matmul
multiplies (embedding, norms, biases, sinks) for every published model.
`dense_decoding_flops` is `step_flops` for a dense gated decoder, and
`attention_equals_matmuls_at(model)` the context where the step's attention FLOPs pass
its matmul FLOPs.

`published_flops(name, keys)` is `decoding_flops` of each published model's shape
(`published_shape`: read from the model our loader builds, or for Qwen3-30B-A3B, which
has no loader, from its configuration: `qwen3_moe_shape`), and
`training_flops_per_token(name)` the rule of thumb 6 N (Kaplan et al. 2020, N the
active parameters less the embedding, `non_embedding_active`): 2 N is the forward's
matmuls, up to a tied head and the norms, while the context's attention is small.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

from torch import nn

from literate.numbers.published import (
    built_published_model,
    parameter_counts,
    published_config,
)
from literate.parts.checks import boolean, choice, non_negative_int, positive_int
from literate.parts.ffn import DenseFFN, GatedFFN
from literate.parts.mla import MultiHeadLatentAttention
from literate.parts.moe import Experts, GptOssExperts, MoEFFN
from literate.parts.multi_head import MultiHeadAttention, head_counts
from literate.parts.routers import DeepSeekV3Router, switch_router
from literate.parts.window import layer_window

__all__ = [
    "LatentShape",
    "decoding_flops",
    "routed_top_k",
    "ffn_shape",
    "attention_shape",
    "decoder_shape",
    "step_flops",
    "MOST_KEYS",
    "attention_equals_matmuls_at",
    "qwen3_moe_shape",
    "published_shape",
    "published_flops",
    "non_embedding_active",
    "training_flops_per_token",
    "dense_decoding_flops",
]


# --8<-- [start:decoding_flops]
class LatentShape(NamedTuple):
    """The widths of a multi-head latent attention layer (`literate.parts.mla`'s
    `MultiHeadLatentAttention`, in its attribute names) and its `absorb` mode, for
    `decoding_flops`: q_lora_rank None is one q_proj (no bottleneck)."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    absorb: str = "decode"


def decoding_flops(*, d_model: int, n_layers: int, n_heads: int, d_ff: int,
                   vocab: int, keys: int, n_kv_heads: int | None = None,
                   d_head: int | None = None, gated: bool = True,
                   windows: Sequence[int | None] | None = None,
                   n_experts: int | None = None, top_k: int | None = None,
                   shared_d_ff: int = 0, dense_layers: int = 0,
                   dense_d_ff: int | None = None,
                   latent: LatentShape | None = None) -> dict[str, int]:
    """Forward FLOPs of one decoding step of a decoder: one token whose query reads
    `keys` keys (its own included), the same formula for every model here.

    "matmuls": 2 per weight entry of each linear map the token passes through. The
    embedding is a lookup; norms, biases, RoPE, gates, sinks and softmaxes multiply by
    no weight matrix: none is counted. Per layer:

    * attention's projections: q and o (H d_head wide), k and v (H_kv d_head), or,
      with `latent` (MLA; `n_kv_heads` and `d_head` do not apply), q (d -> q_lora_rank
      -> H d_qk, or d -> H d_qk), kv_a (d -> r + d_rope), o (H d_v -> d), and
      kv_b_proj's W_uk and W_uv (H r (d_nope + d_v) entries): in the absorbed form
      multiplied into the one query and the one output (once per token), in the naive
      form onto every key's latent (once per key read);
    * the FFN: dense, 3 d d_ff gated (SwiGLU, GeGLU) or 2 d d_ff (GPT-2's); or, with
      `top_k`, a mixture of experts after `dense_layers` dense layers (of
      `dense_d_ff`): the router (E d), the k chosen experts (3 d d_ff each: gated, and
      gpt-oss's fused gate-and-up is 2 d_ff x d) and a shared expert of
      `shared_d_ff` (DeepSeek-V3's; 0: none). The E - k others are not multiplied;

    and the output head (V d), tied or not.

    "attention": per layer and key read, the scores and the weighted sum, 2 H d_head
    each (GQA reads H_kv heads but computes H rows); a layer whose window is w reads
    min(w, keys) keys (`windows`, one per layer, None: every key). MLA's absorbed form
    is multi-query attention over the latents [c | k_rope]: 2 H (r + d_rope) and 2 H r
    per key; its naive form attends d_qk-wide keys and d_v-wide values, 2 H d_qk and
    2 H d_v. `absorb` as the layer's: "decode" absorbs when a cached key precedes the
    token (keys > 1), "always", "never".
    """
    d, layers = positive_int("d_model", d_model), positive_int("n_layers", n_layers)
    h, v = positive_int("n_heads", n_heads), positive_int("vocab", vocab)
    keys = positive_int("keys", keys)
    windows = [None] * layers if windows is None else list(windows)
    if len(windows) != layers:
        raise ValueError(f"windows must give one window (or None) per layer, "
                         f"{layers}; got {len(windows)}")
    read = [keys if w is None else min(positive_int("windows[i]", w), keys)
            for w in windows]  # the keys each layer's query reads
    if latent is None:
        _, h, h_kv, d_head = head_counts(d, h, n_kv_heads, d_head)
        project = 2 * (2 * d * h * d_head + 2 * d * h_kv * d_head)  # q, o; k, v
        per_key_matmuls, per_key = 0, 4 * h * d_head
    else:
        if not isinstance(latent, tuple) or len(latent) != len(LatentShape._fields):
            raise TypeError(f"latent must be a LatentShape, got "
                            f"{type(latent).__name__}")
        latent = LatentShape(*latent)  # any copy of the class (a page's) will do
        if n_kv_heads is not None or d_head is not None:
            raise ValueError("latent attention has no n_kv_heads or d_head: its widths "
                             "are latent's")
        r = positive_int("kv_lora_rank", latent.kv_lora_rank)
        nope = positive_int("qk_nope_head_dim", latent.qk_nope_head_dim)
        rope = positive_int("qk_rope_head_dim", latent.qk_rope_head_dim)
        d_v = positive_int("v_head_dim", latent.v_head_dim)
        c_q = latent.q_lora_rank
        q = (d * h * (nope + rope) if c_q is None
             else d * positive_int("q_lora_rank", c_q) + c_q * h * (nope + rope))
        up = h * r * (nope + d_v)  # kv_b_proj: W_uk and W_uv, head by head
        project = 2 * (q + d * (r + rope) + h * d_v * d)
        mode = choice("latent.absorb", latent.absorb, ("never", "decode", "always"))
        if mode == "always" or (mode == "decode" and keys > 1):  # absorbed
            project += 2 * up  # W_uk into the query, W_uv onto the output: once
            per_key_matmuls, per_key = 0, 2 * h * (r + rope) + 2 * h * r
        else:  # naive: every latent read goes through kv_b_proj
            per_key_matmuls, per_key = 2 * up, 2 * h * (nope + rope) + 2 * h * d_v
    dense_ffn = (3 if boolean("gated", gated) else 2) * 2 * d  # per unit of width
    if top_k is None:
        if n_experts is not None or shared_d_ff or dense_layers or dense_d_ff:
            raise ValueError("n_experts, shared_d_ff, dense_layers and dense_d_ff are "
                             "a mixture of experts' (give top_k)")
        ffn = layers * dense_ffn * positive_int("d_ff", d_ff)
    else:
        e, k = positive_int("n_experts", n_experts), positive_int("top_k", top_k)
        if k > e:
            raise ValueError(f"top_k={top_k} > n_experts={n_experts}")
        dense = non_negative_int("dense_layers", dense_layers)
        if dense > layers:
            raise ValueError(f"dense_layers={dense_layers} > n_layers={n_layers}")
        moe = 2 * (d * e + k * 3 * d * positive_int("d_ff", d_ff)
                   + 3 * d * non_negative_int("shared_d_ff", shared_d_ff))
        ffn = (layers - dense) * moe
        if dense:
            if dense_d_ff is None:
                raise ValueError("dense_layers > 0 needs dense_d_ff")
            ffn += dense * dense_ffn * positive_int("dense_d_ff", dense_d_ff)
    matmuls = (layers * project + per_key_matmuls * sum(read) + ffn
               + 2 * v * d)  # the head
    attention = per_key * sum(read)
    return {"matmuls": matmuls, "attention": attention, "total": matmuls + attention}
# --8<-- [end:decoding_flops]


# --8<-- [start:step_flops]
def routed_top_k(moe: MoEFFN) -> int:
    """How many experts a `MoEFFN`'s router sends each token to: DeepSeek-V3's
    router's `top_k` option, the k of a `Router` routing by `partial(router_function,
    top_k=k)` (Mixtral's, Qwen3-MoE's, gpt-oss's), or 1 for `switch_router`."""
    router = moe.router
    if isinstance(router, DeepSeekV3Router):
        return router.options["top_k"]
    route = getattr(router, "route", None)
    if route is switch_router:
        return 1
    if isinstance(route, partial) and "top_k" in route.keywords:
        return route.keywords["top_k"]
    raise ValueError(f"ffn.router routes by {route!r}: its k is not known here (a "
                     "partial with top_k=k, switch_router or DeepSeekV3Router)")


def ffn_shape(ffn: nn.Module, where: str) -> tuple:
    """("dense", d_ff, gated) or ("moe", d_ff, E, k, shared d_ff) of a block's FFN."""
    if isinstance(ffn, MoEFFN):
        if not isinstance(ffn.experts, (Experts, GptOssExperts)):
            raise TypeError(f"{where}.experts is a {type(ffn.experts).__name__}: "
                            "not counted (Experts or GptOssExperts)")
        if ffn.shared is not None and not isinstance(ffn.shared, GatedFFN):
            raise TypeError(f"{where}.shared must be a GatedFFN or None, got "
                            f"{type(ffn.shared).__name__}")
        shared = 0 if ffn.shared is None else ffn.shared.d_ff
        return ("moe", ffn.experts.d_ff, ffn.n_experts, routed_top_k(ffn), shared)
    if isinstance(ffn, (GatedFFN, DenseFFN)):
        return ("dense", ffn.d_ff, isinstance(ffn, GatedFFN))
    raise TypeError(f"{where} is a {type(ffn).__name__}: not counted (GatedFFN, "
                    "DenseFFN or MoEFFN)")


def attention_shape(attn: nn.Module, where: str) -> dict:
    """`decoding_flops`'s attention keywords of a layer: its heads, or MLA's widths."""
    if isinstance(attn, MultiHeadLatentAttention):
        return {"n_heads": attn.n_heads, "latent": LatentShape(
            attn.q_lora_rank, attn.kv_lora_rank, attn.qk_nope_head_dim,
            attn.qk_rope_head_dim, attn.v_head_dim, attn.absorb)}
    if isinstance(attn, MultiHeadAttention):
        return {"n_heads": attn.n_heads, "n_kv_heads": attn.n_kv_heads,
                "d_head": attn.d_head}
    raise TypeError(f"{where} is a {type(attn).__name__}: not counted "
                    "(MultiHeadAttention or MultiHeadLatentAttention)")


def decoder_shape(model: nn.Module) -> dict:
    """`decoding_flops`'s keywords but `keys`, read from a built language model of ours
    (GPT-2's or chapter 7's `LlamaLanguageModel`, any block of `.attn` and `.ffn`):
    the width, vocabulary and layers; every layer's attention of one shape (its heads,
    or MLA's widths and `absorb`) and its window (`layer_window`, None if it has none);
    the FFNs dense, or dense for the first layers and then one mixture of experts
    (its experts' width, E, the router's k, the shared expert). A model outside that
    pattern (attention shapes that differ between layers, a dense layer after an
    MoE one) is refused: the formula would not describe it."""
    blocks = list(getattr(model, "blocks", None) or [])
    if not blocks or not hasattr(model, "d_model") or not hasattr(model, "vocab_size"):
        raise TypeError(f"model must be one of our language models (blocks, d_model, "
                        f"vocab_size), got {type(model).__name__}")
    shapes = [attention_shape(b.attn, f"blocks[{i}].attn")
              for i, b in enumerate(blocks)]
    for i, shape in enumerate(shapes):
        if shape != shapes[0]:
            raise ValueError(f"blocks[{i}].attn has {shape}, blocks[0].attn "
                             f"{shapes[0]}: the layers' attention must have one shape")
    ffns = [ffn_shape(b.ffn, f"blocks[{i}].ffn") for i, b in enumerate(blocks)]
    dense = next((i for i, f in enumerate(ffns) if f[0] == "moe"), len(ffns))
    for i, ffn in enumerate(ffns):
        first = 0 if i < dense else dense  # the first layer of its kind
        if ffn != ffns[first]:
            raise ValueError(f"blocks[{i}].ffn is {ffn}, unlike blocks[{first}].ffn "
                             f"{ffns[first]}: the formula has dense layers first, "
                             "then one mixture of experts")
    shape = {"d_model": model.d_model, "n_layers": len(blocks),
             "vocab": model.vocab_size,
             "windows": tuple(layer_window(b.attn) for b in blocks),
             **shapes[0]}
    if dense == len(ffns):  # a dense model
        _, d_ff, gated = ffns[0]
        return shape | {"d_ff": d_ff, "gated": gated}
    _, d_ff, e, k, shared = ffns[dense]
    shape |= {"d_ff": d_ff, "n_experts": e, "top_k": k, "shared_d_ff": shared,
              "dense_layers": dense}
    if dense:
        _, dense_d_ff, gated = ffns[0]
        shape |= {"dense_d_ff": dense_d_ff, "gated": gated}
    return shape


def step_flops(model: nn.Module, keys: int) -> dict[str, int]:
    """Forward FLOPs of one decoding step of a built language model of ours (any that
    `published_model` returns, or a small one of the same builders): one new token
    whose query reads `keys` cached keys, its own included. `decoding_flops` (its
    "matmuls", "attention" and "total") with the shape `decoder_shape` reads from the
    model's modules, so what is counted is what the model's layers hold:

    * windows per layer (Mistral's every layer, Gemma 3's local ones, gpt-oss's
      sliding ones): min(window, keys) keys;
    * mixtures of experts: the router and the k chosen experts (and DeepSeek-V3's
      shared expert; its first dense layers dense), as the grouped path computes
      them (`Experts.grouped`, `GptOssExperts.grouped`: each (token, expert) pair
      once). `dispatch`'s padded path (float64, or a capacity) multiplies every
      expert's whole group instead: dropless, E / k times the experts' work counted
      here, the E - k experts a token did not choose on zeros;
    * multi-head latent attention (DeepSeek-V3): the form the layer runs. With its
      default `absorb="decode"`, a cached step (keys > 1) is the absorbed form (W_uk
      multiplied into the query, attention over the cached latents [c | k_rope],
      W_uv after), which never re-projects a cached latent; keys = 1 (no cache
      before it) and `absorb="never"` up-project every latent through kv_b_proj;
    * gpt-oss's sinks add one logit per head to each softmax: no multiplication by a
      weight, so, like the softmax itself, not counted."""
    return decoding_flops(**decoder_shape(model), keys=keys)
# --8<-- [end:step_flops]


def dense_decoding_flops(model: nn.Module, keys: int) -> dict[str, int]:
    """`step_flops` of a dense decoder of gated FFNs (a LlamaLanguageModel of SwiGLU
    blocks, e.g. `published_model("Llama 3 8B")`); a layer with a window reads
    min(window, keys) keys (chapter 10). Other models are refused."""
    if not all(type(b.ffn) is GatedFFN for b in model.blocks):
        raise ValueError("a dense decoder of gated FFNs is needed (for MoE and latent "
                         "models, step_flops)")
    return step_flops(model, keys)


# --8<-- [start:attention_equals]
MOST_KEYS = 2**40  # far past any context: a step that never gets there, never does


def attention_equals_matmuls_at(model: nn.Module | dict) -> int | None:
    """The context at which a decoding step's attention FLOPs reach its matmul FLOPs
    (`step_flops`): the most keys whose attention is still <= the matmuls, or None if
    the attention never passes them (every layer has a window too short; MLA's naive
    form, whose matmuls grow with the keys faster). The rule of thumb 2 N per token
    (6 N to train) counts the matmuls only, and stops describing the step's cost as
    the context nears this. `model` may be `decoding_flops`'s shape itself (a dict of
    its keywords but `keys`, e.g. `published_shape(name)`)."""
    shape = model if isinstance(model, dict) else decoder_shape(model)

    def passes(keys: int) -> bool:  # nondecreasing in keys
        flops = decoding_flops(**shape, keys=keys)
        return flops["attention"] > flops["matmuls"]

    if not passes(MOST_KEYS):
        return None
    below, above = 0, MOST_KEYS  # passes(above); not passes(below), keys 0 reads none
    while above - below > 1:
        middle = (below + above) // 2
        below, above = (below, middle) if passes(middle) else (middle, above)
    return below
# --8<-- [end:attention_equals]


def qwen3_moe_shape(config: object) -> dict:
    """`decoding_flops`'s keywords but `keys` from a Qwen3-MoE configuration (a
    Qwen3MoeConfig: Qwen3-30B-A3B has no loader here): GQA with QK-norm (norms: not
    counted), every layer a mixture of `num_experts` SwiGLU experts of
    `moe_intermediate_size`, `num_experts_per_tok` of them chosen, no shared expert,
    no window (`use_sliding_window` off). Dense layers (`mlp_only_layers`, a
    `decoder_sparse_step` > 1) are refused: they need not come first."""
    if getattr(config, "mlp_only_layers", []) or config.decoder_sparse_step != 1:
        raise ValueError("config has dense layers (mlp_only_layers, decoder_sparse_step"
                         " > 1): not in this formula's pattern")
    if getattr(config, "use_sliding_window", False):
        raise ValueError("config use_sliding_window=True: not counted here")
    return {"d_model": config.hidden_size, "n_layers": config.num_hidden_layers,
            "n_heads": config.num_attention_heads,
            "n_kv_heads": config.num_key_value_heads, "d_head": config.head_dim,
            "d_ff": config.moe_intermediate_size, "vocab": config.vocab_size,
            "n_experts": config.num_experts, "top_k": config.num_experts_per_tok}


def published_shape(name: str) -> dict:
    """`decoding_flops`'s keywords but `keys` for a published model: read from the
    model our loader builds from its configuration (`decoder_shape`), or for
    Qwen3-30B-A3B (no loader) from its configuration (`qwen3_moe_shape`)."""
    if name == "Qwen3-30B-A3B":
        return qwen3_moe_shape(published_config(name))
    return decoder_shape(built_published_model(name))


def published_flops(name: str, keys: int) -> dict[str, int]:
    """`decoding_flops` of a published model's step at `keys` keys (`published_shape`):
    `step_flops` of the model our loader builds, Qwen3-30B-A3B's from its config."""
    return decoding_flops(**published_shape(name), keys=keys)


# --8<-- [start:training_flops]
def non_embedding_active(name: str) -> int:
    """N of the rule of thumb: the parameters one token's forward passes through
    (`parameter_counts`' active count: the k chosen experts, not E) less the
    embedding tables, as Kaplan et al. 2020 (sec. 2.1, table 1) count N, without the
    token embedding and the position table (GPT-2's). A lookup multiplies by nothing;
    a tied head is the token table and goes with it (Kaplan's models, GPT-2, Gemma 3),
    an untied head is a matmul of its own and stays. Norms, biases and sinks stay, as
    they do in the active count (a few per thousand at most)."""
    _, active = parameter_counts(name)
    config = published_config(name)
    embedding = config.vocab_size * config.hidden_size
    if config.model_type == "gpt2":  # learned positions: a second lookup table
        embedding += config.max_position_embeddings * config.hidden_size
    return active - embedding


def training_flops_per_token(name: str) -> int:
    """6 N (`non_embedding_active`): Kaplan et al. 2020's training compute per token
    (sec. 2.1), 2 N for the forward and twice that for the backward. Their N is the
    non-embedding parameters because their forward count, C_forward = 2 N + 2 n_layer
    n_ctx d_attn, leaves out the lookups; for a mixture of experts N is the active
    count (the experts a token does not use cost it nothing). The context's term is
    dropped too, which holds while the attention's FLOPs are small next to 2 N: the
    step's forward FLOPs over 2 N (`published_flops(name, keys)["total"]` / (2 N)) say
    how far from that a context of `keys` is."""
    return 6 * non_embedding_active(name)
# --8<-- [end:training_flops]
