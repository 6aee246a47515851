"""The minimal blocks of chapters 1-8 (`literate/minimal/`) against the layers people run
and against the hardened versions the rest of the site uses (promise 5).

Every comparison is float64 (modules built, then `.double()`; the default dtype is left
alone), with every parameter of the reference random (gains ~ N(1, 0.3^2), the rest
~ N(0, 0.3^2): a weight copied to the wrong place, or a gain or bias left at 1 or 0,
cannot go unseen), weights copied by name, and covers the output and the gradient of a
random probe . output w.r.t. every float input and every parameter (a parameter that
takes no part is an error of `torch.autograd.grad`).

References: `F.scaled_dot_product_attention`, `nn.LayerNorm`, `nn.RMSNorm`,
`nn.MultiheadAttention`, `nn.TransformerEncoderLayer`/`DecoderLayer`, Hugging Face's
`apply_rotary_pos_emb` + `LlamaRotaryEmbedding`, `LlamaRMSNorm`, `LlamaMLP`, `GPT2Block`,
`GPT2LMHeadModel`, `LlamaDecoderLayer`, `LlamaForCausalLM`, `Qwen3ForCausalLM`,
`GPTJBlock`, `GPTNeoXLayer` and `generate(do_sample=False)`; and `literate.parts` /
`literate.models` / `literate.decoding` (the hardened versions).

Tolerances, relative to each tensor's scale (its reference's largest |entry|, at least
1; `assert_same`):
- TOL = 1e-12 where both sides compute in float64: the same formula in another order
  (one packed matmul against three, an additive -inf mask against masked_fill) agrees to
  ~1e-16 per operation, measured <= 3e-14 after the few hundred in a row of a model and
  its backward; a real difference (a missing scale, a wrong transpose or RoPE half, a
  swapped norm, a misplaced dropout) is 1e-2 or more.
  Hugging Face's Llama and Qwen3 too, with their float32 steps patched to the input
  dtype (`harness.hf_in_input_dtype`; measured <= 4e-15).
- HF as it is (its RMSNorms and eager softmax compute in float32):
  `harness.assert_float32_limited`, within 16 float32 ulps of the largest entry.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    GPTJConfig,
    GPTNeoXConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from transformers.models.gpt2 import modeling_gpt2 as hf_gpt2
from transformers.models.gpt_neox import modeling_gpt_neox as hf_neox
from transformers.models.gptj import modeling_gptj as hf_gptj
from transformers.models.llama import modeling_llama as hf_llama
from transformers.models.qwen3 import modeling_qwen3 as hf_qwen3

from literate.minimal.attention import (
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)
from literate.minimal.cache import KVCache
from literate.minimal.ffn import FeedForward, SwiGLU, gelu_tanh
from literate.minimal.generate import generate
from literate.minimal.gpt2 import GPT2Block, GPT2Model
from literate.minimal.llama import LlamaBlock, LlamaModel
from literate.minimal.multi_head import GQAttention, MultiHeadAttention
from literate.minimal.norms import LayerNorm, RMSNorm
from literate.minimal.parallel import ParallelBlock
from literate.minimal.positions import (
    LearnedPositions,
    apply_rope,
    rope_tables,
    sinusoidal_positions,
)
from literate.minimal.transformer2017 import DecoderLayer, EncoderLayer

from harness import (
    F32_BOUND,
    assert_float32_limited,
    hf_causal_mask,
    hf_in_input_dtype,
)

F64 = torch.float64
TOL = 1e-12
B, T, D, H, H_KV, D_FF = 2, 7, 32, 4, 2, 48


# --- the harness ----------------------------------------------------------------------
def rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def randomised(module, seed):
    """float64, eval mode, every parameter random: 1-D weights (norm gains) ~ N(1, 0.09),
    everything else ~ N(0, 0.09)."""
    module = module.double().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            gain = p.ndim == 1 and name.endswith("weight")
            p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=F64) + gain)
    return module


def load(ours, state):
    """Copy `state` (our names) into every parameter of `ours`; the names must match."""
    params = dict(ours.named_parameters())
    assert params.keys() == state.keys(), params.keys() ^ state.keys()
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(state[name])
    return ours


def weights(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def renamed(state, names):
    """Each key of `state` through every (pattern, replacement) of `names`, in turn."""
    out = {}
    for key, value in state.items():
        for pattern, replacement in names:
            key = re.sub(pattern, replacement, key)
        out[key] = value
    return out


def run(module, call, inputs, seed=99):
    """{"out": call(*inputs)} and the gradients of (out * probe).sum() w.r.t. each float
    input ("in0", ...) and each parameter of `module` (by its name)."""
    inputs = [
        t.detach().clone().requires_grad_() if t.is_floating_point() else t
        for t in inputs
    ]
    out = call(*inputs)
    probe = rand(*out.shape, seed=seed)
    floats = {f"in{i}": t for i, t in enumerate(inputs) if t.is_floating_point()}
    params = dict(module.named_parameters())
    grads = torch.autograd.grad(
        (out * probe).sum(), [*floats.values(), *params.values()]
    )
    return {"out": out.detach()} | dict(zip([*floats, *params], grads))


def assert_same(ours, theirs, tol=TOL):
    """Each tensor of `ours` within tol * max(1, max |entry| of `theirs`) of the one of
    `theirs` of the same name (same names on both sides); returns the largest ratio."""
    assert ours.keys() == theirs.keys(), ours.keys() ^ theirs.keys()
    ratios = {
        k: (ours[k] - theirs[k]).abs().max().item()
        / max(1.0, theirs[k].abs().max().item())
        for k in ours
    }
    worst = max(ratios, key=ratios.get)
    assert ratios[worst] <= tol, (
        f"{worst}: max |diff| / scale {ratios[worst]:.3g} > {tol:g}"
    )
    return ratios[worst]


def assert_f32_limited(ours, theirs):
    assert ours.keys() == theirs.keys(), ours.keys() ^ theirs.keys()
    keys = list(ours)
    return assert_float32_limited(
        keys, [ours[k] for k in keys], [theirs[k] for k in keys]
    )


def next_token_loss(logits, ids):
    """Mean cross-entropy of each position's logits against the next token."""
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


def assert_loss_equal(ours, theirs, ids, names):
    """The next-token loss and every parameter's gradient of it, the same loss function
    on both logits (TOL); and HF's own `labels=` loss, which shifts the labels itself
    and computes in float32 whatever the logits' dtype (F32_BOUND times the largest
    |logit|: each logit is rounded to float32 before the log-sum-exp)."""
    mine = run(ours, lambda i: next_token_loss(ours(i), i)[None], (ids,))
    reference = run(
        theirs, lambda i: next_token_loss(theirs(input_ids=i).logits, i)[None], (ids,)
    )
    assert_same(mine, names(reference))
    with torch.no_grad():
        out = theirs(input_ids=ids, labels=ids)
    bound = F32_BOUND * out.logits.abs().max().item()
    assert 1e-12 < abs(out.loss.item() - mine["out"].item()) < bound


# --- chapter 1: attention --------------------------------------------------------------
VALID = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])  # [B, T_k]: row 1 padded


@pytest.mark.parametrize(
    "case",
    ["none", "causal", "causal_after_cache", "padding", "causal_and_padding", "cross"],
)
def test_attention_equals_torch_sdpa_and_the_hardened_one(case):
    """Output and the gradients of q, k, v against F.scaled_dot_product_attention given
    the same boolean mask (True = may attend), and against literate.parts' attention
    (output, weights, gradients)."""
    from literate.parts.attention import scaled_dot_product_attention as hardened

    t_q = 3 if case in ("causal_after_cache", "cross") else 7
    masks = {
        "none": None,
        "causal": causal_mask(7, 7),
        "causal_after_cache": causal_mask(3, 7),
        "padding": padding_mask(VALID),
        "causal_and_padding": causal_mask(7, 7) & padding_mask(VALID),
        "cross": padding_mask(VALID),
    }
    allowed = masks[case]
    q, k, v = (
        rand(B, H, t_q, 8, seed=1),
        rand(B, H, 7, 8, seed=2),
        rand(B, H, 7, 5, seed=3),
    )
    ours = run(
        nn.Module(),
        lambda q, k, v: scaled_dot_product_attention(q, k, v, allowed)[0],
        (q, k, v),
    )
    torch_ = run(
        nn.Module(),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
        (q, k, v),
    )
    assert_same(ours, torch_)
    hard = run(
        nn.Module(), lambda q, k, v: hardened(q, k, v, allowed).output, (q, k, v)
    )
    assert_same(ours, hard)
    weights_ours = scaled_dot_product_attention(q, k, v, allowed)[1]
    assert_same({"w": weights_ours}, {"w": hardened(q, k, v, allowed).weights})
    if allowed is not None:  # blocked entries weigh exactly 0, rows sum to 1
        assert (weights_ours[~allowed.expand_as(weights_ours)] == 0).all()
    assert_same(
        {"rows": weights_ours.sum(-1)}, {"rows": torch.ones(B, H, t_q, dtype=F64)}
    )


def test_the_masks_equal_the_hardened_helpers():
    from literate.parts.attention import causal_allowed, padding_allowed

    for t_q, t_k in ((7, 7), (1, 7), (3, 7)):
        assert torch.equal(
            causal_mask(t_q, t_k), causal_allowed(t_q, t_k, query_offset=t_k - t_q)
        )
    assert torch.equal(padding_mask(VALID), padding_allowed(VALID))


def test_is_causal_true_aligns_the_diagonal_to_the_first_key():
    """Why the layers pass their own mask (multi_head.py's docstring): with 3 queries
    after 4 cached keys, `is_causal=True` lets query 0 read key 0 only; the last 3 of 7
    positions must read keys 0..4, 0..5, 0..6 (causal_mask). Square: the same."""
    q, k, v = (
        rand(1, 1, 3, 8, seed=4),
        rand(1, 1, 7, 8, seed=5),
        rand(1, 1, 7, 8, seed=6),
    )
    ours = scaled_dot_product_attention(q, k, v, causal_mask(3, 7))[0]
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (ours - top_left).abs().max() > 1e-2
    q = rand(1, 1, 7, 8, seed=7)
    assert_same(
        {"o": scaled_dot_product_attention(q, k, v, causal_mask(7, 7))[0]},
        {"o": F.scaled_dot_product_attention(q, k, v, is_causal=True)},
    )


# --- chapter 2: positions --------------------------------------------------------------
def test_sinusoidal_table_is_the_papers_formula():
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...), entry by entry in
    Python floats (Vaswani et al. 2017, sec. 3.5); and the hardened table, bit for bit
    in float64 and in float32 (both computed in float64, then cast)."""
    from literate.parts.positions import sinusoidal_table

    n, d = 50, 16
    ours = sinusoidal_positions(n, d, dtype=F64)
    paper = torch.tensor(
        [
            [
                f(pos / 10000 ** (2 * (j // 2) / d))
                for j, f in zip(range(d), [math.sin, math.cos] * (d // 2))
            ]
            for pos in range(n)
        ],
        dtype=F64,
    )
    assert_same({"pe": ours}, {"pe": paper})
    assert torch.equal(ours, sinusoidal_table(n, d, dtype=F64))
    assert torch.equal(sinusoidal_positions(1024, 64), sinusoidal_table(1024, 64))


def test_learned_positions_equal_the_hardened_ones():
    from literate.parts.positions import LearnedPositions as Hardened

    hard = randomised(Hardened(16, D), seed=1)
    ours = load(LearnedPositions(n_positions=16, d_model=D).double(), weights(hard))
    x = rand(B, T, D, seed=2)
    assert_same(run(ours, ours, (x,)), run(hard, hard, (x,)))


def test_rope_equals_hf_llama_rotary_embedding_and_apply_rotary_pos_emb():
    """The tables equal LlamaRotaryEmbedding's bit for bit (float32, cast to float64 as
    HF does); apply_rope equals apply_rotary_pos_emb on q and k, forward and backward;
    and the hardened rope_cache / apply_rope. d_head 16: a wrong half shows."""
    from literate.parts.positions import apply_rope as hardened_rope
    from literate.parts.positions import rope_cache

    d_head, base = 16, 500_000.0
    config = LlamaConfig(
        hidden_size=64,
        num_attention_heads=4,
        head_dim=d_head,
        rope_parameters={"rope_type": "default", "rope_theta": base},
    )
    q, k = rand(B, H, T, d_head, seed=1), rand(B, H_KV, T, d_head, seed=2)
    hf_cos, hf_sin = hf_llama.LlamaRotaryEmbedding(config)(q, torch.arange(T)[None])
    cos, sin = rope_tables(d_head, T, base=base)
    assert cos.dtype == torch.float32
    assert torch.equal(cos.double(), hf_cos[0]) and torch.equal(sin.double(), hf_sin[0])
    assert all(map(torch.equal, (cos, sin), rope_cache(T, d_head, base=base)))
    ours = run(
        nn.Module(),
        lambda q, k: torch.cat(
            [apply_rope(q, cos, sin), apply_rope(k, cos, sin)], dim=1
        ),
        (q, k),
    )
    theirs = run(
        nn.Module(),
        lambda q, k: torch.cat(
            hf_llama.apply_rotary_pos_emb(q, k, hf_cos, hf_sin), dim=1
        ),
        (q, k),
    )
    assert_same(ours, theirs)
    hard = run(
        nn.Module(),
        lambda q, k: torch.cat(
            [hardened_rope(q, cos, sin), hardened_rope(k, cos, sin)], dim=1
        ),
        (q, k),
    )
    assert_same(ours, hard)


def test_rope_scores_depend_on_the_distance_only():
    """q turned to position m, k to n: q.k is the same for (m, n) and (m + s, n + s)."""
    cos, sin = rope_tables(16, 40)
    q, k = rand(16, seed=3), rand(16, seed=4)

    def score(m, n):
        return apply_rope(q, cos[m], sin[m]) @ apply_rope(k, cos[n], sin[n])

    # the tables are float32: angles rounded to ~2^-24 relative, 35 * 6e-8 ~ 2e-6
    assert abs(score(5, 2) - score(35, 32)) < 1e-5
    assert abs(score(5, 2) - score(5, 3)) > 1e-2


# --- chapter 7: norms ------------------------------------------------------------------
def test_layer_norm_equals_torch_and_the_hardened_one():
    from literate.parts.norms import LayerNorm as Hardened

    reference = randomised(nn.LayerNorm(D, eps=1e-5), seed=1)
    ours = load(LayerNorm(d_model=D, eps=1e-5).double(), weights(reference))
    hard = load(Hardened(D, eps=1e-5).double(), weights(reference))
    x = 3 * rand(B, T, D, seed=2) + 1  # a mean to take out
    mine = run(ours, ours, (x,))
    assert_same(mine, run(reference, reference, (x,)))
    assert_same(mine, run(hard, hard, (x,)))


def test_rms_norm_equals_torch_hf_and_the_hardened_one():
    """float64: torch.nn.RMSNorm, the hardened RMSNorm, HF's LlamaRMSNorm with its float32
    step patched to the input dtype (TOL), and as it is (float32-limited)."""
    from literate.parts.norms import RMSNorm as Hardened

    reference = randomised(nn.RMSNorm(D, eps=1e-5), seed=1)
    ours = load(RMSNorm(d_model=D, eps=1e-5).double(), weights(reference))
    hard = load(Hardened(D, eps=1e-5).double(), weights(reference))
    hf = load(hf_llama.LlamaRMSNorm(D, eps=1e-5).double(), weights(reference))
    x = 3 * rand(B, T, D, seed=2) + 1
    mine = run(ours, ours, (x,))
    assert_same(mine, run(reference, reference, (x,)))
    assert_same(mine, run(hard, hard, (x,)))
    assert_f32_limited(mine, run(hf, hf, (x,)))
    with hf_in_input_dtype(hf, hf_llama):
        assert_same(mine, run(hf, hf, (x,)))


# --- chapters 4, 5, 7: feed-forward ----------------------------------------------------
@pytest.mark.parametrize("activation", [F.relu, gelu_tanh], ids=["relu", "gelu_tanh"])
def test_feed_forward_equals_the_hardened_dense_ffn(activation):
    from literate.parts.ffn import DenseFFN
    from literate.parts.ffn import gelu_tanh as hardened_gelu_tanh

    hard_activation = F.relu if activation is F.relu else hardened_gelu_tanh
    hard = randomised(DenseFFN(D, 4 * D, hard_activation), seed=1)
    ours = load(
        FeedForward(d_model=D, d_ff=4 * D, activation=activation).double(),
        weights(hard),
    )
    x = rand(B, T, D, seed=2)
    assert_same(run(ours, ours, (x,)), run(hard, hard, (x,)))


def test_swiglu_equals_hf_llama_mlp_and_the_hardened_gated_ffn():
    from literate.parts.ffn import GatedFFN

    config = LlamaConfig(hidden_size=D, intermediate_size=D_FF)
    hf = randomised(hf_llama.LlamaMLP(config), seed=1)
    ours = load(SwiGLU(d_model=D, d_ff=D_FF).double(), weights(hf))
    hard = load(GatedFFN(D, D_FF, F.silu).double(), weights(hf))
    x = rand(B, T, D, seed=2)
    mine = run(ours, ours, (x,))
    assert_same(mine, run(hf, hf, (x,)))
    assert_same(mine, run(hard, hard, (x,)))


# --- chapter 3: multi-head attention ---------------------------------------------------
def torch_names(state, norms=()):
    """nn.MultiheadAttention / nn.Transformer*Layer names -> ours: in_proj_* (rows q; k;
    v) split in three, out_proj -> o_proj, linear1/2 -> ffn, multihead_attn ->
    cross_attn, normN -> `norms`[N - 1]."""
    names = [
        (r"multihead_attn\.", "cross_attn."),
        (r"out_proj\.", "o_proj."),
        (r"^linear1\.", "ffn.up_proj."),
        (r"^linear2\.", "ffn.down_proj."),
    ]
    names += [(rf"^norm{i}\.", f"{n}.") for i, n in enumerate(norms, 1)]
    out = {}
    for key, value in renamed(state, names).items():
        packed = re.fullmatch(r"(.*)in_proj_(weight|bias)", key)
        if packed:
            for name, part in zip("qkv", value.chunk(3)):
                out[f"{packed[1]}{name}_proj.{packed[2]}"] = part
        else:
            out[key] = value
    return out


def test_multi_head_attention_equals_torch_multihead_attention():
    """Self-attention with a causal mask and cross-attention with source padding. torch's
    masks are the opposite convention (True = blocked): ~allowed."""
    theirs = randomised(nn.MultiheadAttention(D, H, batch_first=True), seed=1)
    ours = load(
        MultiHeadAttention(d_model=D, n_heads=H).double(), torch_names(weights(theirs))
    )
    x, memory = rand(B, 5, D, seed=2), rand(B, T, D, seed=3)
    causal = causal_mask(5, 5)
    assert_same(
        run(ours, lambda x: ours(x, allowed=causal), (x,)),
        torch_names(
            run(
                theirs,
                lambda x: theirs(x, x, x, attn_mask=~causal, need_weights=False)[0],
                (x,),
            )
        ),
    )
    mine = run(ours, lambda x, m: ours(x, m, allowed=padding_mask(VALID)), (x, memory))
    reference = run(
        theirs,
        lambda x, m: theirs(x, m, m, key_padding_mask=~VALID, need_weights=False)[0],
        (x, memory),
    )
    assert_same(mine, torch_names(reference))


def test_multi_head_attention_equals_the_hardened_one():
    from literate.parts.multi_head import MultiHeadAttention as Hardened

    hard = randomised(Hardened(D, H, bias=True), seed=1)
    ours = load(MultiHeadAttention(d_model=D, n_heads=H).double(), weights(hard))
    x, memory = rand(B, 5, D, seed=2), rand(B, T, D, seed=3)
    assert_same(
        run(ours, lambda x: ours(x, allowed=causal_mask(5, 5)), (x,)),
        run(hard, lambda x: hard(x, causal=True), (x,)),
    )
    assert_same(
        run(ours, lambda x, m: ours(x, m, allowed=padding_mask(VALID)), (x, memory)),
        run(hard, lambda x, m: hard(x, m, causal=False, key_valid=VALID), (x, memory)),
    )


@pytest.mark.parametrize("qk_norm", [False, True], ids=["llama", "qwen3"])
def test_gq_attention_equals_the_hardened_one(qk_norm):
    """GQA with RoPE (d_head 16 != d_model / H, base 1e6) and, for Qwen3, per-head
    QK-norm: the hardened MultiHeadAttention with the same parts."""
    from literate.parts.multi_head import MultiHeadAttention as Hardened
    from literate.parts.norms import RMSNorm as HardenedRMSNorm

    norms = (
        dict(
            q_norm=HardenedRMSNorm(16, eps=1e-6),
            k_norm=HardenedRMSNorm(16, eps=1e-6),
            qk_norm="head",
        )
        if qk_norm
        else {}
    )
    hard = randomised(
        Hardened(D, H, H_KV, d_head=16, rope=True, rope_base=1e6, **norms), seed=1
    )
    ours = load(
        GQAttention(
            d_model=D,
            n_heads=H,
            n_kv_heads=H_KV,
            d_head=16,
            rope_base=1e6,
            qk_norm=qk_norm,
            eps=1e-6,
        ).double(),
        weights(hard),
    )
    assert len(weights(ours)) == 4 + 2 * qk_norm
    x = rand(B, T, D, seed=2)
    assert_same(run(ours, ours, (x,)), run(hard, lambda x: hard(x, causal=True), (x,)))


def test_gq_attention_with_a_cache_equals_it_without():
    """Prefill 4 tokens, then one at a time: each output equals the uncached layer's
    at that position; the cache holds H_KV heads, not H, and its offset counts tokens."""
    ours = randomised(
        GQAttention(d_model=D, n_heads=H, n_kv_heads=H_KV, qk_norm=True), seed=1
    )
    x = rand(B, T, D, seed=2)
    with torch.no_grad():
        full = ours(x)
        cache = KVCache()
        steps = [ours(x[:, :4], cache)] + [
            ours(x[:, t : t + 1], cache) for t in range(4, T)
        ]
    assert_same({"out": torch.cat(steps, dim=1)}, {"out": full})
    assert cache.k.shape == cache.v.shape == (B, H_KV, T, D // H) and cache.offset == T


# --- chapter 4: the 2017 layers --------------------------------------------------------
ENCODER_NORMS, DECODER_NORMS = (
    ("self_attn_norm", "ffn_norm"),
    ("self_attn_norm", "cross_attn_norm", "ffn_norm"),
)


def torch_2017_pair(kind, dropout=0.0, seed=1):
    """(ours, theirs): PyTorch's post-norm ReLU layer, random, and ours holding its
    weights; both float64 and in eval mode."""
    layer = (
        nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer
    )
    theirs = randomised(
        layer(
            D,
            H,
            D_FF,
            dropout=dropout,
            batch_first=True,
            norm_first=False,
            activation="relu",
        ),
        seed,
    )
    cls, norms = (
        (EncoderLayer, ENCODER_NORMS)
        if kind == "encoder"
        else (DecoderLayer, DECODER_NORMS)
    )
    ours = cls(d_model=D, n_heads=H, d_ff=D_FF, dropout=dropout).double().eval()
    return load(ours, torch_names(weights(theirs), norms)), theirs


def encoder_calls(ours, theirs):
    return (
        lambda x: ours(x, padding_mask(VALID)),
        lambda x: theirs(x, src_key_padding_mask=~VALID),
    )


def decoder_calls(ours, theirs):
    blocked = ~causal_mask(5, 5)  # torch: True = may not attend
    return (
        lambda y, m: ours(y, m, padding_mask(VALID)),
        lambda y, m: theirs(y, m, tgt_mask=blocked, memory_key_padding_mask=~VALID),
    )


def test_encoder_layer_equals_torch_transformer_encoder_layer():
    ours, theirs = torch_2017_pair("encoder")
    mine, reference = encoder_calls(ours, theirs)
    x = rand(B, T, D, seed=2)
    assert_same(
        run(ours, mine, (x,)), torch_names(run(theirs, reference, (x,)), ENCODER_NORMS)
    )


def test_decoder_layer_equals_torch_transformer_decoder_layer():
    ours, theirs = torch_2017_pair("decoder")
    mine, reference = decoder_calls(ours, theirs)
    y, memory = rand(B, 5, D, seed=2), rand(B, T, D, seed=3)
    assert_same(
        run(ours, mine, (y, memory)),
        torch_names(run(theirs, reference, (y, memory)), DECODER_NORMS),
    )


def contiguous_output(forward):
    def patched(*args, **kwargs):
        out, weights = forward(*args, **kwargs)
        return out.contiguous(), weights

    return patched


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_the_2017_layers_drop_where_pytorch_does_in_train_mode(kind):
    """Train mode, one seed: PyTorch's layers drop each sublayer's output (dropout1..3,
    sec. 5.4) and also the attention weights and the FFN's hidden units; with those two
    set to 0, both draw the same masks in the same order, so the outputs and every
    gradient agree only if each dropout of ours sits where PyTorch's does. One more
    step aligns the draws: nn.MultiheadAttention (batch_first) returns a transposed,
    non-contiguous view, and dropout draws its mask in memory order, so its output is
    made contiguous first (the same numbers, the mask laid out as ours)."""
    ours, theirs = torch_2017_pair(kind, dropout=0.3)
    ours.train(), theirs.train()
    theirs.dropout.p = 0.0  # the FFN's hidden units
    for attn in (theirs.self_attn, getattr(theirs, "multihead_attn", theirs.self_attn)):
        attn.dropout = 0.0  # the attention weights
        attn.forward = contiguous_output(attn.forward)
    mine, reference = (encoder_calls if kind == "encoder" else decoder_calls)(
        ours, theirs
    )
    inputs = (
        (rand(B, T, D, seed=2),)
        if kind == "encoder"
        else (rand(B, 5, D, seed=2), rand(B, T, D, seed=3))
    )
    norms = ENCODER_NORMS if kind == "encoder" else DECODER_NORMS
    torch.manual_seed(0)
    dropped = run(ours, mine, inputs)
    torch.manual_seed(0)
    assert_same(dropped, torch_names(run(theirs, reference, inputs), norms))
    ours.eval()
    assert (run(ours, mine, inputs)["out"] - dropped["out"]).abs().max() > 1e-2


def test_the_2017_layers_equal_the_hardened_ones():
    from literate.parts.blocks import decoder_layer_2017, encoder_layer_2017

    hard_enc = randomised(encoder_layer_2017(D, H, D_FF, dropout=0.0), seed=1)
    ours = load(
        EncoderLayer(d_model=D, n_heads=H, d_ff=D_FF).double().eval(), weights(hard_enc)
    )
    x = rand(B, T, D, seed=2)
    assert_same(
        run(ours, lambda x: ours(x, padding_mask(VALID)), (x,)),
        run(hard_enc, lambda x: hard_enc(x, key_valid=VALID), (x,)),
    )
    hard_dec = randomised(decoder_layer_2017(D, H, D_FF, dropout=0.0), seed=3)
    ours = load(
        DecoderLayer(d_model=D, n_heads=H, d_ff=D_FF).double().eval(), weights(hard_dec)
    )
    y = rand(B, 5, D, seed=4)
    assert_same(
        run(ours, lambda y, m: ours(y, m, padding_mask(VALID)), (y, x)),
        run(hard_dec, lambda y, m: hard_dec(y, m, memory_valid=VALID), (y, x)),
    )


# --- chapter 5: GPT-2 ------------------------------------------------------------------
GPT2_NAMES = [
    (r"^transformer\.", ""),
    (r"^wte\.", "token_embedding."),
    (r"^wpe\.", "positions.embedding."),
    (r"^ln_f\.", "final_norm."),
    (r"^h\.(\d+)\.", r"blocks.\1."),
    (r"ln_1\.", "attn_norm."),
    (r"ln_2\.", "ffn_norm."),
    (r"attn\.c_proj\.", "attn.o_proj."),
    (r"mlp\.c_fc\.", "ffn.up_proj."),
    (r"mlp\.c_proj\.", "ffn.down_proj."),
]


def gpt2_names(state):
    """HF GPT-2 names -> ours. Conv1D matrices are [in, out]: transposed; c_attn is
    W_q | W_k | W_v side by side: split in three. Embeddings stay as they are."""
    out = {}
    for key, value in renamed(state, GPT2_NAMES).items():
        if value.ndim == 2 and "embedding" not in key:
            value = value.T  # Conv1D [in, out] -> nn.Linear [out, in]
        if "c_attn" in key:
            for name, part in zip("qkv", value.chunk(3)):
                out[key.replace("c_attn", f"{name}_proj")] = part
        else:
            out[key] = value
    return out


def gpt2_config(**changes):
    settings = dict(
        n_embd=D,
        n_head=H,
        n_layer=2,
        vocab_size=64,
        n_positions=16,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="eager",
    )
    return GPT2Config(**(settings | changes))


def test_gpt2_block_equals_hf_gpt2_block_and_the_hardened_one():
    from literate.parts.blocks import gpt2_block

    theirs = randomised(hf_gpt2.GPT2Block(gpt2_config(), layer_idx=0), seed=1)
    ours = load(
        GPT2Block(d_model=D, n_heads=H, dropout=0.0).double().eval(),
        gpt2_names(weights(theirs)),
    )
    x = rand(B, T, D, seed=2)
    mine = run(ours, ours, (x,))
    assert_same(
        mine,
        gpt2_names(
            run(theirs, lambda x: theirs(x, attention_mask=hf_causal_mask(T)), (x,))
        ),
    )
    hard = load(gpt2_block(D, H, dropout=0.0).double(), weights(ours))
    assert_same(mine, run(hard, hard, (x,)))


def test_gpt2_block_drops_where_hf_gpt2_block_does():
    """Train mode, one seed, resid_pdrop 0.3 (attn_pdrop 0: ours drops no attention
    weights): HF drops the attention's output, then the MLP's; so do we."""
    theirs = randomised(
        hf_gpt2.GPT2Block(gpt2_config(resid_pdrop=0.3), 0), seed=1
    ).train()
    ours = load(
        GPT2Block(d_model=D, n_heads=H, dropout=0.3).double().train(),
        gpt2_names(weights(theirs)),
    )
    x = rand(B, T, D, seed=2)
    torch.manual_seed(0)
    dropped = run(ours, ours, (x,))
    torch.manual_seed(0)
    assert_same(
        dropped,
        gpt2_names(
            run(theirs, lambda x: theirs(x, attention_mask=hf_causal_mask(T)), (x,))
        ),
    )
    ours.eval()
    assert (run(ours, ours, (x,))["out"] - dropped["out"]).abs().max() > 1e-2


def test_gpt2_model_equals_gpt2_lm_head_model_and_the_hardened_one():
    """Logits and the gradient of every parameter (the tied embedding once: its use as
    the head and as the input both count), and the next-token loss."""
    from literate.models.gpt2 import gpt2_model

    theirs = randomised(GPT2LMHeadModel(gpt2_config()), seed=1)
    ours = load(
        GPT2Model(
            vocab_size=64, n_positions=16, d_model=D, n_heads=H, n_layers=2, dropout=0.0
        )
        .double()
        .eval(),
        gpt2_names(weights(theirs)),
    )
    assert ours.lm_head.weight is ours.token_embedding.weight
    ids = torch.randint(0, 64, (B, 16), generator=torch.Generator().manual_seed(2))
    mine = run(ours, ours, (ids,))
    assert_same(
        mine, gpt2_names(run(theirs, lambda i: theirs(input_ids=i).logits, (ids,)))
    )
    hard = load(gpt2_model(64, 16, D, H, 2, dropout=0.0).double().eval(), weights(ours))
    assert_same(mine, run(hard, hard, (ids,)))
    assert_loss_equal(ours, theirs, ids, gpt2_names)


# --- chapter 7: Llama and Qwen3 --------------------------------------------------------
LLAMA_NAMES = [
    (r"^model\.", ""),
    (r"^embed_tokens\.", "token_embedding."),
    (r"^norm\.", "final_norm."),
    (r"^layers\.", "blocks."),
    (r"self_attn\.", "attn."),
    (r"mlp\.", "ffn."),
    (r"input_layernorm\.", "attn_norm."),
    (r"post_attention_layernorm\.", "ffn_norm."),
]


def llama_names(state):
    return renamed(state, LLAMA_NAMES)


def hf_llama_config(qwen3=False, **changes):
    """A tiny LlamaConfig, or Qwen3Config (head_dim 16 != d / H, QK-norm, base 1e6)."""
    settings = dict(
        vocab_size=61,
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=H_KV,
        intermediate_size=D_FF,
        num_hidden_layers=2,
        max_position_embeddings=32,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6 if qwen3 else 1e4},
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="eager",
    )
    if qwen3:
        return Qwen3Config(**(settings | {"head_dim": 16} | changes))
    return LlamaConfig(**(settings | changes))


def minimal_llama(config):
    qwen3 = isinstance(config, Qwen3Config)
    return (
        LlamaModel(
            vocab_size=config.vocab_size,
            d_model=D,
            n_layers=2,
            n_heads=H,
            n_kv_heads=H_KV,
            d_ff=D_FF,
            d_head=16 if qwen3 else None,
            rope_base=config.rope_parameters["rope_theta"],
            eps=1e-5,
            qk_norm=qwen3,
            tied=config.tie_word_embeddings,
        )
        .double()
        .eval()
    )


@pytest.mark.parametrize("qwen3", [False, True], ids=["llama", "qwen3"])
def test_llama_block_equals_the_hf_decoder_layer(qwen3):
    """LlamaDecoderLayer / Qwen3DecoderLayer, eager with HF's additive causal mask and
    the rotary embedding's cos/sin: float32-limited as HF is, TOL with its float32 steps
    patched to float64."""
    config = hf_llama_config(qwen3)
    modeling = hf_qwen3 if qwen3 else hf_llama
    layer = modeling.Qwen3DecoderLayer if qwen3 else modeling.LlamaDecoderLayer
    rotary = modeling.Qwen3RotaryEmbedding if qwen3 else modeling.LlamaRotaryEmbedding
    theirs = randomised(layer(config, 0), seed=1)
    ours = load(
        LlamaBlock(
            d_model=D,
            n_heads=H,
            n_kv_heads=H_KV,
            d_ff=D_FF,
            d_head=16 if qwen3 else None,
            rope_base=config.rope_parameters["rope_theta"],
            eps=1e-5,
            qk_norm=qwen3,
        ).double(),
        llama_names(weights(theirs)),
    )
    x = rand(B, T, D, seed=2)
    cos_sin = rotary(config)(x, torch.arange(T)[None])

    def call(x):
        return theirs(x, attention_mask=hf_causal_mask(T), position_embeddings=cos_sin)

    mine = run(ours, ours, (x,))
    assert_f32_limited(mine, llama_names(run(theirs, call, (x,))))
    with hf_in_input_dtype(theirs, modeling):
        assert_same(mine, llama_names(run(theirs, call, (x,))))


@pytest.fixture(
    scope="module",
    params=[(False, False), (False, True), (True, True)],
    ids=["llama-untied", "llama-tied", "qwen3-tied"],
)
def llama_pair(request):
    """(ours, theirs, modeling): a random float64 HF model and our LlamaModel holding
    its weights."""
    qwen3, tied = request.param
    config = hf_llama_config(qwen3, tie_word_embeddings=tied)
    theirs = randomised(
        (Qwen3ForCausalLM if qwen3 else LlamaForCausalLM)(config), seed=1
    )
    ours = load(minimal_llama(config), llama_names(weights(theirs)))
    assert (ours.lm_head.weight is ours.token_embedding.weight) == tied
    return ours, theirs, hf_qwen3 if qwen3 else hf_llama


def llama_ids(seed=2, t=9):
    return torch.randint(0, 61, (B, t), generator=torch.Generator().manual_seed(seed))


def test_llama_model_logits_loss_and_every_gradient_equal_hf(llama_pair):
    ours, theirs, modeling = llama_pair
    ids = llama_ids()
    mine = run(ours, ours, (ids,))

    def call(i):
        return theirs(input_ids=i).logits

    assert_f32_limited(mine, llama_names(run(theirs, call, (ids,))))
    with hf_in_input_dtype(theirs, modeling):
        assert_same(mine, llama_names(run(theirs, call, (ids,))))
        assert_loss_equal(ours, theirs, ids, llama_names)


def test_cached_forward_equals_the_full_forward(llama_pair):
    """Prefill 5 tokens, then 4 one at a time with one KVCache per block: the logits of
    every position equal the uncached forward's."""
    ours, _, _ = llama_pair
    ids = llama_ids()
    with torch.no_grad():
        cache = [KVCache() for _ in ours.blocks]
        steps = [ours(ids[:, :5], cache)] + [
            ours(ids[:, t : t + 1], cache) for t in range(5, 9)
        ]
        assert_same({"logits": torch.cat(steps, dim=1)}, {"logits": ours(ids)})
    assert all(c.offset == 9 for c in cache)


def test_greedy_generate_equals_hf_generate(llama_pair):
    ours, theirs, _ = llama_pair
    prompt = llama_ids(4, 5)
    want = theirs.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=10,
        do_sample=False,
    )
    got = generate(ours, prompt, max_new_tokens=10)
    assert want.shape == (B, 15) and torch.equal(got, want)
    assert len(set(got[:, 5:].flatten().tolist())) >= 3  # not one token repeated


def test_sampled_generate_equals_sampling_without_a_cache(llama_pair):
    """temperature 0.8, one generator seed: the cached generate draws the tokens that
    re-reading the whole sequence at every step draws (same logits, same draws)."""
    ours, _, _ = llama_pair
    prompt = llama_ids(5, 4)
    got = generate(
        ours,
        prompt,
        max_new_tokens=8,
        temperature=0.8,
        generator=torch.Generator().manual_seed(7),
    )
    g, ids = torch.Generator().manual_seed(7), prompt
    with torch.no_grad():
        for _ in range(8):
            probs = (ours(ids)[:, -1] / 0.8).softmax(dim=-1)
            ids = torch.cat((ids, torch.multinomial(probs, 1, generator=g)), dim=1)
    assert torch.equal(got, ids)
    assert not torch.equal(got, generate(ours, prompt, max_new_tokens=8))  # it sampled


def hardened_llama(ours, qwen3):
    """literate.models' model of the same shape: `llama_model`, or Qwen3's blocks
    (`qwen3_block`) in a LlamaLanguageModel."""
    from literate.models.llama import LlamaLanguageModel, llama_model
    from literate.parts.blocks import qwen3_block
    from literate.parts.norms import RMSNorm as HardenedRMSNorm

    tied = ours.lm_head.weight is ours.token_embedding.weight
    if not qwen3:
        return llama_model(61, 32, D, H, H_KV, 2, D_FF, eps=1e-5, tied=tied).double()
    blocks = [
        qwen3_block(D, H, H_KV, D_FF, d_head=16, rope_base=1e6, eps=1e-5)
        for _ in range(2)
    ]
    head = None if tied else nn.Linear(D, 61, bias=False)
    return LlamaLanguageModel(
        nn.Embedding(61, D), blocks, HardenedRMSNorm(D, eps=1e-5), head, context=32
    ).double()


def test_llama_model_and_generate_equal_the_hardened_ones(llama_pair):
    """The same weights in literate.models' Llama (or Qwen3 blocks): logits and every
    gradient; greedy tokens equal literate.decoding's cached generate; the blocks too."""
    from literate.decoding.generate import generate as hardened_generate

    ours, _, modeling = llama_pair
    hard = load(hardened_llama(ours, modeling is hf_qwen3).eval(), weights(ours))
    ids = llama_ids()
    assert_same(run(ours, ours, (ids,)), run(hard, hard, (ids,)))
    x = rand(B, T, D, seed=3)
    block, hard_block = ours.blocks[1], hard.blocks[1]
    assert_same(run(block, block, (x,)), run(hard_block, hard_block, (x,)))
    prompt = llama_ids(4, 5)
    assert torch.equal(
        generate(ours, prompt, max_new_tokens=10), hardened_generate(hard, prompt, 10)
    )


# --- chapter 7: the parallel residual --------------------------------------------------
def parallel_parts(*, bias, activation, two_norms):
    """Our GPT-J (one norm, no attention biases, tanh GELU) or GPT-NeoX (two norms,
    biases, exact GELU) block, RoPE over the whole head."""
    norm = LayerNorm(d_model=D, eps=1e-5)
    return (
        ParallelBlock(
            attn=GQAttention(d_model=D, n_heads=H, n_kv_heads=H, bias=bias),
            ffn=FeedForward(d_model=D, d_ff=64, activation=activation),
            attn_norm=norm,
            ffn_norm=LayerNorm(d_model=D, eps=1e-5) if two_norms else None,
        )
        .double()
        .eval()
    )


HALF = torch.cat((torch.arange(0, 8, 2), torch.arange(1, 8, 2)))  # interleaved -> half
GPTJ_NAMES = [
    (r"^ln_1\.", "attn_norm."),
    (r"^attn\.out_proj\.", "attn.o_proj."),
    (r"^mlp\.fc_in\.", "ffn.up_proj."),
    (r"^mlp\.fc_out\.", "ffn.down_proj."),
]


def to_half(state):
    """GPT-J turns the pairs (2i, 2i+1) of a head (interleaved), ours (i, i + 4): the
    rows of each head's q and k reordered by HALF give the same scores."""
    out = dict(state)
    for key in ("attn.q_proj.weight", "attn.k_proj.weight"):
        out[key] = out[key].view(H, 8, D)[:, HALF].reshape(D, D)
    return out


def gptj_names(state):
    """GPTJBlock -> ours (the hardened gptj_block: the same names, interleaved)."""
    return to_half(renamed(state, GPTJ_NAMES))


def neox_names(state):
    """GPTNeoXLayer -> ours: query_key_value is packed head by head, [H, 3, d_head]."""
    from literate.models.parallel import neox_unpack_qkv

    names = [
        (r"^input_layernorm\.", "attn_norm."),
        (r"^post_attention_layernorm\.", "ffn_norm."),
        (r"^attention\.dense\.", "attn.o_proj."),
        (r"^mlp\.dense_h_to_4h\.", "ffn.up_proj."),
        (r"^mlp\.dense_4h_to_h\.", "ffn.down_proj."),
    ]
    out = {}
    for key, value in renamed(state, names).items():
        if key.startswith("attention.query_key_value."):
            kind = key.rsplit(".", 1)[1]
            for name, part in zip("qkv", neox_unpack_qkv(value, H)):
                out[f"attn.{name}_proj.{kind}"] = part
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("family", ["gptj", "neox"])
def test_parallel_block_equals_the_hf_layer_and_the_hardened_one(family):
    """GPTJBlock (rotary_dim = d_head) and GPTNeoXLayer (use_parallel_residual, every
    coordinate turned), "sdpa" with attention_mask=None (causal): TOL. The hardened
    gptj_block / neox_block with the same weights (GPT-J's in its own interleaved
    layout: ours reordered as from HF)."""
    from literate.parts.blocks import gptj_block, neox_block

    if family == "gptj":
        config = GPTJConfig(
            n_embd=D,
            n_head=H,
            rotary_dim=8,
            n_inner=64,
            n_layer=1,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            attn_implementation="sdpa",
        )
        theirs = randomised(hf_gptj.GPTJBlock(config, 0), seed=1)
        rotary, names = hf_gptj.GPTJRotaryEmbedding(config), gptj_names
        ours = parallel_parts(bias=False, activation=gelu_tanh, two_norms=False)
        hard = gptj_block(D, H, 64, rotary_dim=8)
    else:
        rope = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 1.0}
        config = GPTNeoXConfig(
            hidden_size=D,
            num_attention_heads=H,
            intermediate_size=64,
            num_hidden_layers=1,
            use_parallel_residual=True,
            hidden_act="gelu",
            rope_parameters=rope,
            attn_implementation="sdpa",
        )
        theirs = randomised(hf_neox.GPTNeoXLayer(config, 0), seed=1)
        rotary, names = hf_neox.GPTNeoXRotaryEmbedding(config), neox_names
        ours = parallel_parts(bias=True, activation=F.gelu, two_norms=True)
        hard = neox_block(D, H, 64, rotary_pct=1.0)
    load(ours, names(weights(theirs)))
    x = rand(B, T, D, seed=2)
    cos_sin = rotary(x, torch.arange(T)[None])
    mine = run(ours, ours, (x,))
    assert_same(
        mine, names(run(theirs, lambda x: theirs(x, position_embeddings=cos_sin), (x,)))
    )
    if family == "gptj":  # the hardened GPT-J keeps GPT-J's interleaved layout
        hard = load(hard.double().eval(), renamed(weights(theirs), GPTJ_NAMES))
        assert_same(mine, to_half(run(hard, hard, (x,))))
    else:
        hard = load(hard.double().eval(), weights(ours))
        assert_same(mine, run(hard, hard, (x,)))


def test_minimal_classes_and_functions_are_small():
    """The minimal code is short enough to read at once: a class <= 40 lines and a
    function <= 15, blank lines not counted (the self-check `check.py` is a test, not
    a block a page teaches)."""
    import ast
    from pathlib import Path

    import literate.minimal

    too_long = []
    for path in sorted(Path(literate.minimal.__file__).parent.glob("*.py")):
        if path.name == "check.py":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.parse("\n".join(lines)).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                body = lines[node.lineno - 1 : node.end_lineno]
                n = sum(1 for line in body if line.strip())
                limit = 40 if isinstance(node, ast.ClassDef) else 15
                if n > limit:
                    too_long.append(
                        f"{path.name}:{node.name} has {n} lines (> {limit})"
                    )
    assert not too_long, too_long
